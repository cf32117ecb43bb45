//! Quantized matrix-vector products, split over rayon by rows (row-major weights) or by
//! column blocks (column-major weights), and the requantizing transpose between the two.

use super::{activation_format, by_format, par, row_dot_f32, row_dot_q8_best};
use crate::blocks::*;
use crate::dequant::Dequantize;
use crate::isa::{Isa, per_isa};
use crate::{QuantError, QuantFormat, Result};

/// How a matvec treats the f32 input vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatvecPath {
    /// Quantize `x` once to the weight format's activation format (Q8_K or Q8_0) and take
    /// integer block products, as GGML does: fastest; `x` contributes its 8-bit rounding
    /// error (at most half its block's step per element). NF4 falls back to `F32`.
    Int8,
    /// Multiply each dequantized block by `x` in f32: no error beyond f32 rounding.
    F32,
}

/// Rows per parallel task: enough work (~1 MB of Q4_K at 4096 columns) to amortize rayon.
const ROWS_PER_TASK: usize = 256;
/// Below this many weights a product runs on the calling thread.
const PARALLEL_MIN_WEIGHTS: usize = 1 << 20;

#[inline(always)]
fn rows_f32<B: Dequantize>(w: &[u8], row_bytes: usize, x: &[f32], y: &mut [f32]) {
    for (yi, row) in y.iter_mut().zip(w.chunks_exact(row_bytes)) {
        *yi = row_dot_f32::<B>(row, x);
    }
}

per_isa!(fn rows_f32_isa<B: Dequantize>(w: &[u8], row_bytes: usize, x: &[f32], y: &mut [f32]) = rows_f32);

fn check_shape(
    format: QuantFormat,
    w: usize,
    rows: usize,
    cols: usize,
    x: usize,
    y: usize,
) -> Result<usize> {
    let row_bytes = format.row_bytes(cols)?;
    let checks = [
        ("weight bytes", rows.checked_mul(row_bytes), w),
        ("x", Some(cols), x),
        ("y", Some(rows), y),
    ];
    for (what, expected, got) in checks {
        let Some(expected) = expected else {
            return Err(QuantError::BufferSize {
                op: "matvec",
                what: "rows x row bytes (overflows usize)",
                expected: usize::MAX,
                got: w,
            });
        };
        if expected != got {
            return Err(QuantError::BufferSize {
                op: "matvec",
                what,
                expected,
                got,
            });
        }
    }
    Ok(row_bytes)
}

/// `y = W x` for a row-major quantized `W` of `rows` rows of `cols` weights each (GGUF's
/// layout for a `[cols, rows]` tensor), on the process's ISA, split across rayon's threads
/// above a size threshold. Errors on shapes that do not fit and on non-finite `x` (Int8).
///
/// ```
/// use trueno_quant::{MatvecPath, QuantFormat, matvec, quantize_rows};
/// let w: Vec<f32> = (0..4 * 256).map(|i| ((i % 7) as f32 - 3.0) / 4.0).collect();
/// let q = quantize_rows(QuantFormat::Q6K, &w, 256)?;
/// let x = vec![0.5f32; 256];
/// let mut y = vec![0.0; 4];
/// matvec(QuantFormat::Q6K, &q, 4, 256, &x, &mut y, MatvecPath::F32)?;
/// let exact: f32 = w[..256].iter().map(|v| v * 0.5).sum();
/// assert!((y[0] - exact).abs() < 0.1);
/// # Ok::<(), trueno_quant::QuantError>(())
/// ```
pub fn matvec(
    format: QuantFormat,
    w: &[u8],
    rows: usize,
    cols: usize,
    x: &[f32],
    y: &mut [f32],
    path: MatvecPath,
) -> Result<()> {
    let row_bytes = check_shape(format, w.len(), rows, cols, x.len(), y.len())?;
    let isa = Isa::current()?;
    let act = match (path, activation_format(format)) {
        (MatvecPath::Int8, Some(af)) => Some(crate::quantize(af, x)?),
        _ => None,
    };
    let run = |w: &[u8], y: &mut [f32]| match &act {
        Some(a) => {
            for (yi, row) in y.iter_mut().zip(w.chunks_exact(row_bytes)) {
                *yi = row_dot_q8_best(isa, format, row, a);
            }
        }
        None => by_format!(format, rows_f32_isa, isa, w, row_bytes, x, y),
    };
    if rows * cols < PARALLEL_MIN_WEIGHTS || par::threads() == 1 {
        run(w, y);
    } else {
        par::zip_chunks(y, ROWS_PER_TASK, w, ROWS_PER_TASK * row_bytes, |yc, wc| {
            run(wc, yc)
        });
    }
    Ok(())
}

/// `y += x[c] * column c` over a range of blocks of every stored column.
#[inline(always)]
fn cols_axpy<B: Dequantize>(
    w: &[u8],
    col_bytes: usize,
    blocks: (usize, usize),
    x: &[f32],
    y: &mut [f32],
) {
    let mut tmp = [0.0f32; QK_K];
    let (b0, b1) = blocks;
    for (col, &xc) in w.chunks_exact(col_bytes).zip(x) {
        if xc == 0.0 {
            continue;
        }
        for (b, yb) in (b0..b1).zip(y.chunks_exact_mut(B::ELEMS)) {
            B::read(&col[b * B::BYTES..]).dequantize_into(&mut tmp);
            for (o, &t) in yb.iter_mut().zip(&tmp[..B::ELEMS]) {
                *o += xc * t;
            }
        }
    }
}

per_isa!(fn cols_axpy_isa<B: Dequantize>(w: &[u8], col_bytes: usize, blocks: (usize, usize), x: &[f32], y: &mut [f32]) = cols_axpy);

/// `y = W x` for a column-major quantized `W` (`rows x cols`, stored as `cols` quantized
/// columns of `rows` weights each, so `rows` must be whole blocks): the columns, scaled by
/// `x`, are summed into `y`, with `y`'s blocks split across threads.
pub fn matvec_col_major(
    format: QuantFormat,
    w: &[u8],
    rows: usize,
    cols: usize,
    x: &[f32],
    y: &mut [f32],
) -> Result<()> {
    // The stored shape is `cols` rows of `rows` weights; x has `cols`, y `rows` entries.
    let col_bytes = format.row_bytes(rows)?;
    let checks = [
        ("weight bytes", cols.saturating_mul(col_bytes), w.len()),
        ("x", cols, x.len()),
        ("y", rows, y.len()),
    ];
    for (what, expected, got) in checks {
        if expected != got {
            return Err(QuantError::BufferSize {
                op: "matvec_col_major",
                what,
                expected,
                got,
            });
        }
    }
    let isa = Isa::current()?;
    let elems = format.info().block_elems;
    y.fill(0.0);
    let n_blocks = rows / elems;
    let per_task = (n_blocks / (4 * par::threads())).max(1);
    let run = |b0: usize, yc: &mut [f32]| {
        let blocks = (b0, b0 + yc.len() / elems);
        by_format!(format, cols_axpy_isa, isa, w, col_bytes, blocks, x, yc)
    };
    if rows * cols < PARALLEL_MIN_WEIGHTS {
        run(0, y);
    } else {
        par::indexed_chunks(y, per_task * elems, |t, yc| run(t * per_task, yc));
    }
    Ok(())
}

/// A column-major quantized `rows x cols` matrix (as [`matvec_col_major`] takes) as the
/// row-major one [`matvec`] takes, in the same format. The blocks run along the other
/// dimension afterwards, so this dequantizes, transposes and quantizes again: the result
/// carries one more rounding (within the format's round-trip budget), and `cols` must be
/// whole blocks too.
fn transpose_for_matmul(
    format: QuantFormat,
    w: &[u8],
    rows: usize,
    cols: usize,
) -> Result<Vec<u8>> {
    let col_bytes = format.row_bytes(rows)?;
    format.row_bytes(cols)?;
    let want = cols.saturating_mul(col_bytes);
    if w.len() != want {
        return Err(QuantError::BufferSize {
            op: "transpose_for_matmul",
            what: "weight bytes",
            expected: want,
            got: w.len(),
        });
    }
    let mut colmajor = vec![0.0f32; rows * cols];
    crate::dequantize(format, w, &mut colmajor)?;
    let e = trueno::engine()?;
    let src = trueno::MatRef::new(&colmajor, cols, rows, rows)?;
    let mut rowmajor = vec![0.0f32; rows * cols];
    e.transpose(
        src,
        &mut trueno::MatMut::new(&mut rowmajor, rows, cols, cols)?,
    )?;
    crate::quantize_rows(format, &rowmajor, cols)
}

macro_rules! named {
    ([$($mv:ident, $fmt:ident, $path:ident);*], [$($tr:ident, $tfmt:ident);*]) => {
        $(
            #[doc = concat!("[`matvec`] on row-major `", stringify!($fmt), "` weights (",
                stringify!($path), " path).")]
            pub fn $mv(w: &[u8], rows: usize, cols: usize, x: &[f32], y: &mut [f32]) -> Result<()> {
                matvec(QuantFormat::$fmt, w, rows, cols, x, y, MatvecPath::$path)
            }
        )*
        $(
            #[doc = concat!("`transpose_for_matmul` for `", stringify!($tfmt),
                "`: column-major (`cols` stored columns of `rows` weights) to row-major, \
                 requantized.")]
            pub fn $tr(w: &[u8], rows: usize, cols: usize) -> Result<Vec<u8>> {
                transpose_for_matmul(QuantFormat::$tfmt, w, rows, cols)
            }
        )*
    };
}

named!(
    [matvec_q4_0_f32, Q4_0, Int8;
    matvec_q4_1_f32, Q4_1, Int8;
    matvec_q5_0_f32, Q5_0, Int8;
    matvec_q5_1_f32, Q5_1, Int8;
    matvec_q8_0_f32, Q8_0, Int8;
    matvec_q4_k_f32, Q4K, Int8;
    matvec_q5_k_f32, Q5K, Int8;
    matvec_q6_k_f32, Q6K, Int8;
    matvec_q8_k_f32, Q8K, Int8;
    matvec_nf4_f32, Nf4, F32],
    [transpose_q4_k_for_matmul, Q4K;
    transpose_q5_k_for_matmul, Q5K;
    transpose_q6_k_for_matmul, Q6K]
);
