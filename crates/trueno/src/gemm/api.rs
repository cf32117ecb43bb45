//! The public GEMM entry points on `Engine`: argument checks, the thread split, dispatch.

use super::task::{CPtr, GemmPath, GemmTask, ProfileCounters};
use crate::backend::OpClass;
use crate::engine::{Engine, route_gpu};
use crate::error::{Result, TruenoError};
use crate::matrix::{MatMut, MatRef, Matrix};

/// Whether an operand enters the product as is or transposed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transpose {
    /// op(X) = X
    No,
    /// op(X) = Xᵀ (no copy is made: the packing reads X by columns)
    Yes,
}

/// Where a GEMM's time went (see [`Engine::gemm_profiled`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GemmProfile {
    /// Packing op(A) into MR-row panels, summed over threads.
    pub pack_a: std::time::Duration,
    /// Packing op(B) into NR-column panels, summed over threads.
    pub pack_b: std::time::Duration,
    /// The micro-kernel sweeps including C updates, summed over threads.
    pub kernel: std::time::Duration,
    /// Wall time of the whole call.
    pub total: std::time::Duration,
}

fn shape_err<T>(reason: String) -> Result<T> {
    Err(TruenoError::ShapeMismatch { op: "gemm", reason })
}

impl Engine {
    /// `C = alpha * op(A) op(B) + beta * C`. `op(A)` is `m x k`, `op(B)` is `k x n`, `C`
    /// is `m x n`; views may be sub-matrices with any row stride. With `beta == 0`, C is
    /// only written (NaN in C does not leak through).
    ///
    /// ```
    /// use trueno::{Matrix, Transpose};
    /// let e = trueno::engine()?;
    /// let a = Matrix::from_vec(2, 3, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])?;
    /// let b = Matrix::from_vec(2, 3, vec![1.0, 0.0, 1.0, 0.0, 1.0, 0.0])?;
    /// let mut c = Matrix::zeros(2, 2)?;
    /// // A · Bᵀ without materialising Bᵀ.
    /// e.gemm(1.0, a.view(), Transpose::No, b.view(), Transpose::Yes, 0.0, &mut c.view_mut())?;
    /// assert_eq!(c.as_slice(), &[4.0, 2.0, 10.0, 5.0]);
    /// # Ok::<(), trueno::TruenoError>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn gemm(
        &self,
        alpha: f32,
        a: MatRef<'_>,
        ta: Transpose,
        b: MatRef<'_>,
        tb: Transpose,
        beta: f32,
        c: &mut MatMut<'_>,
    ) -> Result<()> {
        self.gemm_impl(alpha, a, ta, b, tb, beta, c, GemmPath::Auto, None)
    }

    /// [`Engine::gemm`] that never takes the small unpacked path, so tests can hold the
    /// packed micro-kernels to every shape. Not for general use.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_packed_path(
        &self,
        alpha: f32,
        a: MatRef<'_>,
        ta: Transpose,
        b: MatRef<'_>,
        tb: Transpose,
        beta: f32,
        c: &mut MatMut<'_>,
    ) -> Result<()> {
        self.gemm_impl(alpha, a, ta, b, tb, beta, c, GemmPath::Packed, None)
    }

    /// [`Engine::gemm`], timing each level of the packed loops: packing A, packing B, and
    /// the micro-kernel sweep (C updates included). Times are summed over threads; a
    /// small problem that skips packing reports everything under `total` only.
    ///
    /// ```
    /// use trueno::{Matrix, Transpose};
    /// let e = trueno::engine()?;
    /// let a = Matrix::from_fn(200, 300, |i, j| (i + j) as f32 * 1e-3)?;
    /// let mut c = Matrix::zeros(200, 200)?;
    /// let p = e.gemm_profiled(1.0, a.view(), Transpose::No, a.view(), Transpose::Yes, 0.0, &mut c.view_mut())?;
    /// // Level times are summed over threads, so with several they may exceed `total`.
    /// assert!(p.kernel > std::time::Duration::ZERO && p.total > std::time::Duration::ZERO);
    /// # Ok::<(), trueno::TruenoError>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_profiled(
        &self,
        alpha: f32,
        a: MatRef<'_>,
        ta: Transpose,
        b: MatRef<'_>,
        tb: Transpose,
        beta: f32,
        c: &mut MatMut<'_>,
    ) -> Result<GemmProfile> {
        let counters = ProfileCounters::default();
        let t0 = std::time::Instant::now();
        self.gemm_impl(
            alpha,
            a,
            ta,
            b,
            tb,
            beta,
            c,
            GemmPath::Auto,
            Some(&counters),
        )?;
        let ns = |x: &std::sync::atomic::AtomicU64| {
            std::time::Duration::from_nanos(x.load(std::sync::atomic::Ordering::Relaxed))
        };
        Ok(GemmProfile {
            pack_a: ns(&counters.pack_a),
            pack_b: ns(&counters.pack_b),
            kernel: ns(&counters.kernel),
            total: t0.elapsed(),
        })
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn gemm_impl(
        &self,
        alpha: f32,
        a: MatRef<'_>,
        ta: Transpose,
        b: MatRef<'_>,
        tb: Transpose,
        beta: f32,
        c: &mut MatMut<'_>,
        path: GemmPath,
        profile: Option<&ProfileCounters>,
    ) -> Result<()> {
        let (m, k) = if ta == Transpose::Yes {
            (a.cols, a.rows)
        } else {
            (a.rows, a.cols)
        };
        let (k2, n) = if tb == Transpose::Yes {
            (b.cols, b.rows)
        } else {
            (b.rows, b.cols)
        };
        if k != k2 {
            return shape_err(format!("op(A) is {m}x{k} but op(B) is {k2}x{n}"));
        }
        if c.rows != m || c.cols != n {
            return shape_err(format!(
                "C is {}x{} but op(A) op(B) is {m}x{n}",
                c.rows, c.cols
            ));
        }
        if m == 0 || n == 0 {
            return Ok(());
        }
        // The GPU takes the plain forms, never the profiled or forced-packed ones.
        if path != GemmPath::Packed && profile.is_none() {
            route_gpu!(
                self,
                if m == 1 || n == 1 {
                    crate::gpu::Workload::Gemv
                } else {
                    crate::gpu::Workload::MatMul
                },
                m.saturating_mul(n).saturating_mul(k),
                (m * k).max(k * n).max(m * n),
                |g| crate::gpu::run::gemm(g, self, alpha, a, ta, b, tb, beta, c)
                    .and_then(|_| self.check_c(c))
            );
        }
        let task = GemmTask {
            m,
            n,
            k,
            whole_k: k,
            alpha,
            beta,
            a: a.data,
            lda: a.stride,
            ta: ta == Transpose::Yes,
            b: b.data,
            ldb: b.stride,
            tb: tb == Transpose::Yes,
            c: CPtr {
                ptr: c.data.as_mut_ptr(),
                stride: c.stride,
                trans: false,
            },
            blocking: None,
            path,
            profile,
        };
        self.run_gemm(&task);
        self.check_c(c)
    }

    /// The guard's check of every row of C.
    fn check_c(&self, c: &MatMut<'_>) -> Result<()> {
        if self.has_guard() {
            for i in 0..c.rows {
                self.checked("gemm", &c.data[i * c.stride..i * c.stride + c.cols])?;
            }
        }
        Ok(())
    }

    /// `A · B` into a new matrix.
    ///
    /// ```
    /// use trueno::Matrix;
    /// let e = trueno::engine()?;
    /// let a = Matrix::from_vec(2, 2, vec![1.0, 2.0, 3.0, 4.0])?;
    /// let c = e.matmul(&a, &Matrix::identity(2)?)?;
    /// assert_eq!(c, a);
    /// # Ok::<(), trueno::TruenoError>(())
    /// ```
    pub fn matmul(&self, a: &Matrix, b: &Matrix) -> Result<Matrix> {
        let mut c = Matrix::zeros(a.rows(), b.cols())?;
        self.gemm(
            1.0,
            a.view(),
            Transpose::No,
            b.view(),
            Transpose::No,
            0.0,
            &mut c.view_mut(),
        )?;
        Ok(c)
    }

    fn run_gemm(&self, task: &GemmTask<'_>) {
        let k = self.k(OpClass::MatMul);
        #[cfg(feature = "parallel")]
        {
            let macs = task.m.saturating_mul(task.n).saturating_mul(task.k);
            let threads = crate::parallel::threads_for(OpClass::MatMul, macs);
            if threads > 1 {
                let (mr, nr) = super::micro_shape(k.backend());
                // Whole rows of B a thread: where the pass packs them as one stream, or
                // for a GEMV (one row of C) and the few rows that run as axpys over B's
                // rows, which read B themselves (see `split_k_pays`).
                let caches = super::CacheSizes::detect();
                let whole_rows = super::blocking_for(k.backend()).pack_b_rows_one_stream == 1;
                let reads_b_itself = task.m == 1 || super::small::takes_row_axpys(task, caches.l2);
                if (whole_rows || reads_b_itself) && split_k_pays(task, threads) {
                    let stagger = stagger_block(task, k.backend());
                    return run_split_k(k, task, threads, stagger);
                }
                let (tiles_m, tiles_n) = (task.m.div_ceil(mr), task.n.div_ceil(nr));
                let lanes = k.backend().lanes();
                let rows_pass_b = !super::small::skips_packing(task, caches, (lanes, true))
                    && (task.tb || task.b_bytes() > caches.l2);
                // Bands of whole micro-tiles, of C's columns or of its rows.
                let parts: Vec<GemmTask<'_>> =
                    match splits_columns(task, (mr, nr), threads, rows_pass_b) {
                        true => bands(tiles_n, threads)
                            .map(|(t0, t1)| task.split(0, task.m, t0 * nr, (t1 * nr).min(task.n)))
                            .collect(),
                        false => bands(tiles_m, threads)
                            .map(|(t0, t1)| task.split(t0 * mr, (t1 * mr).min(task.m), 0, task.n))
                            .collect(),
                    };
                use rayon::prelude::*;
                parts.par_iter().for_each(|p| k.gemm(p));
                return;
            }
        }
        k.gemm(task);
    }
}

/// Whether `threads` threads each take a band of C's columns rather than of its rows
/// (bands of whole `mr x nr` micro-tiles). Each thread packs all of the operand its band
/// does not cut: every row of B for a band of rows, every row of A for a band of
/// columns. Where B outgrows L2 (or is transposed) that is a pass over all of B on every
/// thread, and a band of columns halves it (and may leave each thread a B its first
/// tiles pack, `fuse_b`). So columns where B is at least as wide as A is tall, the row
/// bands would pack B in a pass (`rows_pass_b`), and the biggest band of columns (in
/// whole tiles) holds no more of C than the biggest band of rows would: at 240^3 on
/// AVX2, 15 tiles across split 8 + 7, a part 7% bigger than the rows' 20 + 20 tiles.
///
/// Until session 68 the dimension with more micro-tiles was cut: rows up to n = 2.7 m
/// on AVX2. Zen 3 VM, two threads, trueno's GFLOP/s (faer's moved 15% between rounds)
/// alternated twice with that rule: 384^3 179-180 -> 186-187, 512^3 184-186 -> 188-190,
/// 1024^3 177-181 -> 181-185, 256x512x512 164-175 -> 188, 512x1024x1024 169-171 ->
/// 177-180; criterion's mean (`gemm/trueno-all/512`) 1.57-1.79 -> 1.49-1.51 ms. Where
/// columns lost, rows stay: a B within L2 (224^3 and 256^3, columns 172-174 against rows
/// 174-181; 128^3-192^3, whose rows read B unpacked, 142-146 against 150-153 at 128^3),
/// an uneven split of columns (240^3 182 against 175-177, 272^3 183-184 against 177,
/// 400^3 180 against 177-178), a taller A (512x256x512 188-189 against 183-184,
/// 2048x256x256 189-190 against 172-173).
///
/// `rows_pass_b` is judged by B alone. A row band of at most MC rows is one A block,
/// whose B past L2 is packed by its first tiles from L3 (`fuse_b`), not by a pass; there
/// the rule was measured both ways and left as it is (same VM, two rounds, columns
/// against rows): 240x480x400 187.9 against 181.3-181.8, 240x480x1000 177.8-179.7
/// against 183.8-185.3, 250x512x800 179.2-181.2 against 181.5-182.6.
#[cfg(feature = "parallel")]
fn splits_columns(
    t: &GemmTask<'_>,
    (mr, nr): (usize, usize),
    threads: usize,
    rows_pass_b: bool,
) -> bool {
    let (tiles_m, tiles_n) = (t.m.div_ceil(mr), t.n.div_ceil(nr));
    let biggest = |tiles: usize, unit: usize, len: usize| (tiles.div_ceil(threads) * unit).min(len);
    let columns_part = biggest(tiles_n, nr, t.n) * t.m.next_multiple_of(mr);
    let rows_part = biggest(tiles_m, mr, t.m) * t.n.next_multiple_of(nr);
    let columns_pay = t.n >= t.m && rows_pass_b && columns_part <= rows_part;
    tiles_n >= threads && (columns_pay || tiles_m < threads)
}

/// `parts` contiguous, nearly equal ranges of `0..tiles` (empty ranges dropped).
#[cfg(feature = "parallel")]
fn bands(tiles: usize, parts: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..parts)
        .map(move |i| (tiles * i / parts, tiles * (i + 1) / parts))
        .filter(|(a, b)| a < b)
}

/// Whether `threads` threads should each take a range of the inner dimension (into their
/// own copy of C) rather than a band of C's columns: for a thin C (at most 128 rows, so B
/// is read for few rows of A) with a row-major B. A column band reads each row of B in
/// `threads` pieces, and the pack of B, which is what such products wait on, reads short
/// pieces of far-apart rows at half the speed of whole rows; a range of k reads whole
/// rows. On the Zen 4 VM, two threads, 32x4096x4096: pack B 8.0 -> 4.0 ms (summed over
/// threads), 122 -> 150 GFLOP/s. The copies of C cost `threads - 1` m x n buffers and one
/// pass to sum them, small beside 2mnk flops when each thread gets 256 steps of k or more.
///
/// Only where the pass packs B's rows as one stream (`Blocking::pack_b_rows_one_stream`,
/// Zen). Elsewhere a one-block product packs B in 4 KiB row pieces whichever way it is
/// split (`nc_one_block`), and since those products' fused panels share one slot
/// (`packed_panel_at`) a band of columns won: Intel VM (session 59), two threads,
/// against faer, split-k and column bands alternated twice in one binary: 128x1056x512
/// 0.91-0.92x -> 1.04-1.06x, 128x4096x1024 0.93-0.95x -> 1.02-1.04x, 128x2048x2048
/// 0.99x -> 1.04-1.07x, 128x8192x512 0.91-0.92x -> 1.00-1.01x, 64x4096x512 0.88-0.89x ->
/// 0.94-0.96x, 32x8192x512 0.91-0.92x -> 0.94-0.97x; B from memory 128x4096x4096
/// 0.90x -> 0.96x, 64x4096x4096 0.88-0.89x -> 0.92-0.93x, 128x4096x11008 0.91x ->
/// 0.94-0.95x, 32x4096x4096 0.92-0.95x -> 0.96-0.97x, 128x11008x4096 0.87x ->
/// 0.88-0.89x; 2-16 rows within 2% (8x4096x4096 106-107 -> 104-105 GFLOP/s,
/// 16x4096x4096 166-167 -> 164-172). A GEMV (one row of C, which reads B itself, not
/// through the pass) keeps the ranges of k: 1x4096x4096 23.6-25.0 GFLOP/s split over k
/// against 18.7-21.3 in column bands (1x11008x4096 went the other way, 17.6-17.8
/// against 18.3-19.6; the issue's GEMV cell is the former). So do the few rows that run
/// as axpys over B's rows (`small::takes_row_axpys`), which read B themselves: Emerald
/// Rapids VM, two threads, against faer on the same bytes, column bands -> ranges of k,
/// two rounds: 4x4096x4096 0.81-0.85x -> 0.94-0.98x, 8x4096x4096 0.83-0.88x ->
/// 0.98-1.21x, 8x1024x1024 0.66-0.69x -> 1.08-1.13x, 5x2048x1024 0.79x -> 1.26-1.31x,
/// 2x4096x4096 and 3x4096x4096 within the noise (0.85-1.00x -> 0.89-0.95x).
#[cfg(feature = "parallel")]
fn split_k_pays(t: &GemmTask<'_>, threads: usize) -> bool {
    const MAX_ROWS: usize = 128;
    const MIN_STEPS: usize = 256;
    const MAX_COPIES_BYTES: usize = 64 << 20;
    !t.tb
        && (1..=MAX_ROWS).contains(&t.m)
        && t.n > 0
        && t.k >= MIN_STEPS * threads
        && (threads - 1).saturating_mul(t.m * t.n * 4) <= MAX_COPIES_BYTES
}

/// The k block by which [`run_split_k`]'s parts are staggered: where B comes from memory
/// (more than half of L3), each part's packing passes read it from there and are what
/// these products wait on; run in step, every thread's pass reads at once and each gets a
/// share of the bandwidth. Part `i` first runs a lead of `i / threads` of a block
/// (`lead_steps`) as a call of its own, so the passes fall at different times and each
/// reads alone while the others compute. Zen 5 VM, two threads, against faer, the
/// previous binary and this one alternated three times: 32x4096x4096 0.91-0.96x ->
/// 1.01-1.07x (255-263 -> 288-298 GFLOP/s), 16x4096x4096 0.99-1.08x -> 1.10-1.17x,
/// 128x4096x11008 0.96-0.97x -> 0.99-1.02x. With B within L3 (128x2048x2048, 16 MiB) the
/// lead call's second pass over C cost 2-3% (a throwaway build), so not there. Where the
/// parts read B in place (`b_in_place`: rows of whole pages), there is no pass to spread;
/// with and without the stagger ran within the noise of each other there (Zen 4 VM, two
/// threads, 16-128 rows x 4096 x 4096 and 128x4096x11008, two rounds: 0.93-1.05x faer
/// staggered, 0.96-1.05x not), so it stays for every B from memory.
#[cfg(feature = "parallel")]
fn stagger_block(t: &GemmTask<'_>, backend: crate::backend::Backend) -> Option<usize> {
    let b_bytes = t.k.saturating_mul(t.n).saturating_mul(4);
    let machine = (super::CacheSizes::detect(), super::CoreFamily::detect());
    let bl = super::blocking_for(backend);
    (b_bytes > machine.0.l3 / 2).then(|| super::in_place::one_block_b(t, bl, machine).0)
}

/// Steps of k that part `i` of `threads` runs first: `i / threads` of a `kc` block, in
/// whole 8-step pieces.
#[cfg(feature = "parallel")]
fn lead_steps(kc: usize, i: usize, threads: usize) -> usize {
    kc * i / threads.max(1) / 8 * 8
}

/// Each thread multiplies a range of the inner dimension into its own copy of C (the first
/// into C itself, with beta; the others from zero), then the copies are added into C.
/// With `stagger` (a k block, see [`stagger_block`]) part `i` runs its first
/// `lead_steps` as a call of its own, then the rest onto the same C.
#[cfg(feature = "parallel")]
fn run_split_k(
    k: &dyn crate::dispatch::Kernels,
    t: &GemmTask<'_>,
    threads: usize,
    stagger: Option<usize>,
) {
    use super::task::CPtr;
    use rayon::prelude::*;
    let (m, n) = (t.m, t.n);
    let mut copies = vec![0.0f32; (threads - 1) * m * n];
    // Ranges in multiples of 8 steps (whole 8 x 8 transposes when A or B is packed).
    let step = t.k.div_ceil(threads).next_multiple_of(8);
    let range = |i: usize| ((i * step).min(t.k), ((i + 1) * step).min(t.k));
    let mut parts = Vec::with_capacity(threads);
    let (p0, p1) = range(0);
    parts.push(t.split_k(p0, p1, t.c, t.beta));
    for (i, copy) in copies.chunks_exact_mut(m * n).enumerate() {
        let c = CPtr {
            ptr: copy.as_mut_ptr(),
            stride: n,
            trans: false,
        };
        let (p0, p1) = range(i + 1);
        parts.push(t.split_k(p0, p1, c, 0.0));
    }
    parts.par_iter().enumerate().for_each(|(i, p)| {
        match stagger.map(|kc| lead_steps(kc, i, threads)) {
            Some(lead) if lead > 0 && lead < p.k => {
                k.gemm(&p.split_k(0, lead, p.c, p.beta));
                k.gemm(&p.split_k(lead, p.k, p.c, 1.0));
            }
            _ => k.gemm(p),
        }
    });
    let c = t.c;
    (0..m).into_par_iter().with_min_len(16).for_each(|i| {
        // SAFETY: row i of this task's C; each row goes to one closure, and the parts
        // that wrote C have all returned.
        let row = unsafe { std::slice::from_raw_parts_mut(c.at(i, 0).ptr, n) };
        for copy in copies.chunks_exact(m * n) {
            for (d, s) in row.iter_mut().zip(&copy[i * n..(i + 1) * n]) {
                *d += *s;
            }
        }
    });
}

#[cfg(all(test, feature = "parallel"))]
mod tests {
    use super::*;
    use crate::backend::OpClass;
    use crate::gemm::task::CPtr;

    #[test]
    fn lead_steps_spread_the_parts_over_a_block_in_whole_pieces_of_eight() {
        assert_eq!(
            (0..2).map(|i| lead_steps(256, i, 2)).collect::<Vec<_>>(),
            [0, 128]
        );
        assert_eq!(
            (0..3).map(|i| lead_steps(256, i, 3)).collect::<Vec<_>>(),
            [0, 80, 168]
        );
        assert_eq!(lead_steps(4, 1, 2), 0, "under eight steps: no lead");
        assert_eq!(lead_steps(256, 1, 0), 256);
    }

    /// The split's arithmetic on AVX2's 6 x 16 tiles, two threads, worked by hand: equal
    /// bands of whole tiles either way go across (512^3: 16 + 16 tiles of 16 columns, 256
    /// x 516 against 43 of 86 six-row tiles, 258 x 512), an uneven split of columns
    /// stays in rows (400^3: 13 of 25 tiles, 208 x 402 against 204 x 400), as do a
    /// taller A, a B the row bands pack without a pass, and too few columns for the
    /// threads.
    #[test]
    fn c_is_cut_into_column_bands_where_b_is_wider_and_the_bands_are_as_even() {
        let a = [0f32; 1];
        let cols = |m: usize, n: usize, pass: bool| {
            let t = GemmTask::for_test((m, n, 300), (&a, 1), (&a, 1), std::ptr::null_mut());
            splits_columns(&t, (6, 16), 2, pass)
        };
        assert!(cols(512, 512, true) && cols(256, 256, true));
        assert!(cols(1024, 1024, true) && cols(256, 512, true));
        assert!(
            !cols(240, 240, true),
            "8 + 7 tiles across against 20 + 20 down"
        );
        assert!(!cols(400, 400, true), "208 columns against 204 rows");
        assert!(!cols(512, 256, true), "A taller than B is wide");
        assert!(!cols(512, 512, false), "no pass over B to duplicate");
        assert!(!cols(64, 16, true), "one tile across for two threads");
        assert!(cols(6, 64, true), "one tile down, four across");
        assert!(cols(6, 64, false), "rows too few to go round, whatever B");
    }

    /// The staggered parts (a lead call, then the rest onto the same C) against an f64
    /// reference, forced on a small product (the rule takes them only where B outgrows
    /// half of L3): beta 0 over a NaN-filled C and beta != 0, leads shorter and longer
    /// than a part.
    #[test]
    fn staggered_split_k_parts_match_the_reference() {
        let e = crate::engine().unwrap();
        let kern = e.k(OpClass::MatMul);
        let (m, n, k) = (7, 300, 1100);
        let val = |i: usize, salt: usize| ((i * 7919 + salt * 104729) % 2003) as f32 / 1001.5 - 1.0;
        let a: Vec<f32> = (0..m * k).map(|i| val(i, 1)).collect();
        let b: Vec<f32> = (0..k * n).map(|i| val(i, 2)).collect();
        let c0: Vec<f32> = (0..m * n).map(|i| val(i, 3)).collect();
        for (threads, block, beta) in [(2, 256, 0.0), (3, 256, -1.5), (2, 2048, 1.0), (3, 64, 0.5)]
        {
            let mut c = match beta == 0.0 {
                true => vec![f32::NAN; m * n],
                false => c0.clone(),
            };
            let task = GemmTask {
                m,
                n,
                k,
                whole_k: k,
                alpha: 0.75,
                beta,
                a: &a,
                lda: k,
                ta: false,
                b: &b,
                ldb: n,
                tb: false,
                c: CPtr {
                    ptr: c.as_mut_ptr(),
                    stride: n,
                    trans: false,
                },
                blocking: None,
                path: GemmPath::Packed,
                profile: None,
            };
            run_split_k(kern, &task, threads, Some(block));
            for i in 0..m {
                for j in 0..n {
                    let (mut want, mut size) = (0f64, 0f64);
                    for p in 0..k {
                        let prod = f64::from(a[i * k + p]) * f64::from(b[p * n + j]);
                        want += prod;
                        size += prod.abs();
                    }
                    let prior = f64::from(c0[i * n + j]);
                    let want = 0.75 * want
                        + if beta == 0.0 {
                            0.0
                        } else {
                            f64::from(beta) * prior
                        };
                    let bound = 2.0 * k as f64 * f64::from(f32::EPSILON) * (size + prior.abs());
                    let got = f64::from(c[i * n + j]);
                    assert!(
                        (got - want).abs() <= bound,
                        "{threads} parts, block {block}, ({i}, {j}): {got} against {want}"
                    );
                }
            }
        }
    }
}
