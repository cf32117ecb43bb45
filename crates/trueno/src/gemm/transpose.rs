//! Cache-blocked transpose: 8 x 8 register blocks (AVX shuffles where the backend has
//! them) in an order that reads whole source lines and writes the destination
//! sequentially (a naive transpose misses on every write of a large matrix), aligned to
//! the destination's cache lines; an element loop only along ragged edges. Large ones are
//! split across threads by destination rows.

use super::transpose8::{has_avx, transpose_8x8};
use crate::backend::OpClass;
use crate::engine::Engine;
use crate::error::{Result, TruenoError};
use crate::matrix::{MatMut, MatRef, Matrix};

impl Engine {
    /// Writes `srcᵀ` into `dst` (`dst` is `src.cols() x src.rows()`; any row strides).
    /// From 128K elements the work is split across rayon's threads (the `parallel`
    /// feature).
    ///
    /// ```
    /// use trueno::Matrix;
    /// let e = trueno::engine()?;
    /// let a = Matrix::from_vec(2, 3, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])?;
    /// let mut t = Matrix::zeros(3, 2)?;
    /// e.transpose(a.view(), &mut t.view_mut())?;
    /// assert_eq!(t.as_slice(), &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    /// # Ok::<(), trueno::TruenoError>(())
    /// ```
    pub fn transpose(&self, src: MatRef<'_>, dst: &mut MatMut<'_>) -> Result<()> {
        let (r, c) = (src.rows(), src.cols());
        if dst.rows() != c || dst.cols() != r {
            return Err(TruenoError::ShapeMismatch {
                op: "transpose",
                reason: format!(
                    "source is {r}x{c}, destination {}x{} (want {c}x{r})",
                    dst.rows(),
                    dst.cols()
                ),
            });
        }
        transpose_blocked(has_avx(self.k(OpClass::MatMul).backend()), src, dst);
        Ok(())
    }
}

/// The blocked copy; shapes already checked. `avx`: see [`transpose_8x8`]. A large one
/// is split by destination rows (source columns) across threads, like the elementwise
/// ops: a single core's transpose of a matrix past L2 waits on its cache misses, and a
/// second core brings its own.
fn transpose_blocked(avx: bool, src: MatRef<'_>, dst: &mut MatMut<'_>) {
    let (r, c) = (src.rows(), src.cols());
    let threads = crate::parallel::threads_from(r * c, SPLIT_MIN_ELEMENTS);
    if threads > 1 && c >= 2 * SPLIT_ROWS {
        // Pieces of whole 16-row strips, two per thread, so an uneven split still balances.
        let rows = c.div_ceil(threads * 2).next_multiple_of(SPLIT_ROWS);
        let (ss, ds) = (src.stride(), dst.stride());
        // Only the destination's span: a longer slice would make chunks past its rows.
        let span = (c - 1) * ds + r;
        crate::parallel::map_chunks_mut(&mut dst.data[..span], rows * ds, |off, chunk| {
            // Columns j0..j0 + n of the source into this piece's n destination rows,
            // which the chunk holds (the last one ends at its last row's end).
            let j0 = off / ds;
            let n = rows.min(c - j0);
            let s = MatRef {
                data: &src.data[j0..],
                rows: r,
                cols: n,
                stride: ss,
            };
            let mut d = MatMut {
                data: chunk,
                rows: n,
                cols: r,
                stride: ds,
            };
            transpose_one_thread(avx, s, &mut d);
        });
        return;
    }
    transpose_one_thread(avx, src, dst)
}

/// Elements from which a transpose is split across threads: a quarter of the elementwise
/// ops' 512K, as each element of a transpose costs a strided access. On the Sapphire
/// Rapids VM (2 MiB L2 a core), two threads against one, alternated: 384^2 32-35 ->
/// 37-47 GiB/s, 512^2 13-20 -> 36-44 GiB/s (2.1-2.8x -> 4.9-6.5x ndarray); 256^2 (64K)
/// lost, 32-33 -> 28-30 GiB/s, and 128^2 and 192^2 a third to two thirds.
const SPLIT_MIN_ELEMENTS: usize = 1 << 17;

/// Destination rows per piece of a split transpose: a multiple of the 16-column strips
/// `transpose_blocked_with` walks.
const SPLIT_ROWS: usize = 16;

fn transpose_one_thread(avx: bool, src: MatRef<'_>, dst: &mut MatMut<'_>) {
    #[cfg(target_arch = "x86_64")]
    if avx {
        // SAFETY: `avx` is only set when the CPU has AVX (see `has_avx`).
        return unsafe { transpose_blocked_avx(src, dst) };
    }
    transpose_blocked_with(avx, src, dst)
}

/// The loops compiled with AVX enabled, so each block's shuffles are inlined.
///
/// # Safety
/// The CPU has AVX.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn transpose_blocked_avx(src: MatRef<'_>, dst: &mut MatMut<'_>) {
    transpose_blocked_with(true, src, dst)
}

/// Source rows to leave to the element loop so that the blocked ones land on whole
/// destination cache lines: when every destination row starts at the same offset in a
/// line (a stride of whole lines), the first `lead` floats of each finish a line, and the
/// 16-float runs after them each fill one. Otherwise 0.
fn line_lead(dst: &MatMut<'_>) -> usize {
    const LINE_FLOATS: usize = 16;
    // A float's address is a multiple of 4, so this counts whole floats.
    let addr = dst.data.as_ptr() as usize;
    match dst.stride().is_multiple_of(LINE_FLOATS) {
        true => (64 - addr % 64) % 64 / 4,
        false => 0,
    }
}

/// Bands of `BAND` source rows (their pages stay in the TLB); in each band, strips of 16
/// source columns walked down the band 16 rows at a time: every source cache line is read
/// whole at once, and the 16 destination rows fill sequentially, a line at a time. With a
/// power-of-two stride all those lines fall in a couple of L1 sets, so the live set is
/// kept this small. The bands start `line_lead` rows in, so each 16-row step writes whole
/// destination lines: at 512 x 512 into a destination 16 bytes off a line, 3.5-3.7x
/// ndarray's speed, 4.0-4.3x on a line (Emerald Rapids VM).
#[inline(always)]
fn transpose_blocked_with(avx: bool, src: MatRef<'_>, dst: &mut MatMut<'_>) {
    const BAND: usize = 256;
    let (r, c) = (src.rows(), src.cols());
    let (ss, ds) = (src.stride(), dst.stride());
    let lead = line_lead(dst).min(r);
    let (r8, c8) = (lead + (r - lead) / 8 * 8, c / 8 * 8);
    for i0 in (lead..r8).step_by(BAND) {
        let i1 = (i0 + BAND).min(r8);
        for j0 in (0..c8).step_by(16) {
            let j1 = (j0 + 16).min(c8);
            // 16 source rows per step: each destination row gets 16 floats (a whole line
            // when aligned) at once. With 8, a line was written in two halves, and the
            // source lines read in between (same L1 set under a 4 KiB-multiple stride)
            // evicted it, so it came back from L2 for the second half.
            for i in (i0..i1).step_by(16) {
                let i_end = (i + 16).min(i1);
                for j in (j0..j1).step_by(8) {
                    for ii in (i..i_end).step_by(8) {
                        transpose_8x8(
                            avx,
                            &src.data[ii * ss + j..],
                            ss,
                            &mut dst.data[j * ds + ii..],
                            ds,
                        );
                    }
                }
            }
        }
    }
    // The rows before the bands (0..lead), the ragged right strip (columns c8..c of the
    // band rows) and the bottom strip (rows r8..r).
    let mut copy = |rows: std::ops::Range<usize>, cols: std::ops::Range<usize>| {
        for j in cols {
            let out = &mut dst.data[j * ds + rows.start..j * ds + rows.end];
            for (o, i) in out.iter_mut().zip(rows.clone()) {
                *o = src.data[i * ss + j];
            }
        }
    };
    copy(0..lead, 0..c);
    copy(lead..r8, c8..c);
    copy(r8..r, 0..c);
}

impl Matrix {
    /// The transpose, as a new matrix.
    ///
    /// ```
    /// use trueno::Matrix;
    /// let a = Matrix::from_vec(1, 2, vec![1.0, 2.0])?;
    /// assert_eq!(a.transpose().as_slice(), &[1.0, 2.0]);
    /// assert_eq!(a.transpose().rows(), 2);
    /// # Ok::<(), trueno::TruenoError>(())
    /// ```
    pub fn transpose(&self) -> Matrix {
        let mut t = Matrix {
            rows: self.cols,
            cols: self.rows,
            data: crate::aligned::AlignedF32::zeros(self.data.len()),
        };
        // The default engine's choice of ISA (scalar if none could be made).
        let avx = crate::engine().is_ok_and(|e| has_avx(e.backend(OpClass::MatMul)));
        transpose_blocked(avx, self.view(), &mut t.view_mut());
        t
    }
}
