//! Fused quantized dot products: a quantized row against an f32 vector (each block expanded
//! in registers, never the whole row), and against an 8-bit-quantized vector (integer
//! products, GGML's fast path).

mod int8;
mod matvec;
mod par;
#[cfg(target_arch = "x86_64")]
mod x86;

pub(crate) use int8::IntDot;
pub use matvec::{
    MatvecPath, matvec, matvec_col_major, matvec_nf4_f32, matvec_q4_0_f32, matvec_q4_1_f32,
    matvec_q4_k_f32, matvec_q5_0_f32, matvec_q5_1_f32, matvec_q5_k_f32, matvec_q6_k_f32,
    matvec_q8_0_f32, matvec_q8_k_f32, transpose_q4_k_for_matmul, transpose_q5_k_for_matmul,
    transpose_q6_k_for_matmul,
};

use crate::blocks::*;
use crate::dequant::{Dequantize, check_lengths};
use crate::isa::{Isa, per_isa};
use crate::{QuantError, QuantFormat, Result};

/// `sum w[i] * x[i]` over one block, in 16 independent f32 lanes (so the compiler keeps
/// them in vector registers and no reassociation is needed), then a pairwise lane sum.
#[inline(always)]
pub(crate) fn block_dot_f32<B: Dequantize>(blk: &B, x: &[f32]) -> f32 {
    let mut w = [0.0f32; QK_K];
    blk.dequantize_into(&mut w);
    let mut acc = [0.0f32; 16];
    for (wc, xc) in w[..B::ELEMS].chunks_exact(16).zip(x.chunks_exact(16)) {
        for k in 0..16 {
            acc[k] += wc[k] * xc[k];
        }
    }
    let mut width = 16;
    while width > 1 {
        width /= 2;
        for k in 0..width {
            acc[k] += acc[k + width];
        }
    }
    acc[0]
}

#[inline(always)]
pub(crate) fn row_dot_f32<B: Dequantize>(row: &[u8], x: &[f32]) -> f32 {
    row.chunks_exact(B::BYTES)
        .zip(x.chunks_exact(B::ELEMS))
        .map(|(b, xs)| block_dot_f32(&B::read(b), xs))
        .sum()
}

#[inline(always)]
pub(crate) fn row_dot_q8<B: IntDot>(row: &[u8], act: &[u8]) -> f32 {
    row.chunks_exact(B::BYTES)
        .zip(act.chunks_exact(B::Act::BYTES))
        .map(|(b, a)| B::read(b).dot_q8(&B::Act::read(a)))
        .sum()
}

per_isa!(fn row_dot_f32_isa<B: Dequantize>(row: &[u8], x: &[f32]) -> f32 = row_dot_f32);
per_isa!(fn row_dot_q8_isa<B: IntDot>(row: &[u8], act: &[u8]) -> f32 = row_dot_q8);

/// The integer row dot on `isa`: the hand-vectorized kernel where there is one, else the
/// generic one compiled for `isa`. `row` and `act` are whole, matching blocks; not NF4.
pub(crate) fn row_dot_q8_best(isa: Isa, format: QuantFormat, row: &[u8], act: &[u8]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if let Some(v) = x86::row_dot(isa, format, row, act) {
        return v;
    }
    by_int_format!(format, row_dot_q8_isa, isa, row, act).unwrap_or(f32::NAN)
}

/// Dispatches a generic body over the ten block types.
macro_rules! by_format {
    ($format:expr, $f:ident, $($arg:expr),*) => {
        match $format {
            QuantFormat::Q4_0 => $f::<BlockQ4_0>($($arg),*),
            QuantFormat::Q4_1 => $f::<BlockQ4_1>($($arg),*),
            QuantFormat::Q5_0 => $f::<BlockQ5_0>($($arg),*),
            QuantFormat::Q5_1 => $f::<BlockQ5_1>($($arg),*),
            QuantFormat::Q8_0 => $f::<BlockQ8_0>($($arg),*),
            QuantFormat::Q4K => $f::<BlockQ4K>($($arg),*),
            QuantFormat::Q5K => $f::<BlockQ5K>($($arg),*),
            QuantFormat::Q6K => $f::<BlockQ6K>($($arg),*),
            QuantFormat::Q8K => $f::<BlockQ8K>($($arg),*),
            QuantFormat::Nf4 => $f::<BlockNf4>($($arg),*),
        }
    };
}
pub(crate) use by_format;

/// Dispatches over the formats with an integer dot (all but NF4, whose levels are not
/// integers).
macro_rules! by_int_format {
    ($format:expr, $f:ident, $($arg:expr),*) => {
        match $format {
            QuantFormat::Q4_0 => Some($f::<BlockQ4_0>($($arg),*)),
            QuantFormat::Q4_1 => Some($f::<BlockQ4_1>($($arg),*)),
            QuantFormat::Q5_0 => Some($f::<BlockQ5_0>($($arg),*)),
            QuantFormat::Q5_1 => Some($f::<BlockQ5_1>($($arg),*)),
            QuantFormat::Q8_0 => Some($f::<BlockQ8_0>($($arg),*)),
            QuantFormat::Q4K => Some($f::<BlockQ4K>($($arg),*)),
            QuantFormat::Q5K => Some($f::<BlockQ5K>($($arg),*)),
            QuantFormat::Q6K => Some($f::<BlockQ6K>($($arg),*)),
            QuantFormat::Q8K => Some($f::<BlockQ8K>($($arg),*)),
            QuantFormat::Nf4 => None,
        }
    };
}
pub(crate) use by_int_format;

/// The activation format a weight format's integer dot takes: Q8_K for the K-quants,
/// Q8_0 for the one-scale formats; `None` for NF4.
pub fn activation_format(format: QuantFormat) -> Option<QuantFormat> {
    match format {
        QuantFormat::Q4K | QuantFormat::Q5K | QuantFormat::Q6K | QuantFormat::Q8K => {
            Some(QuantFormat::Q8K)
        }
        QuantFormat::Nf4 => None,
        _ => Some(QuantFormat::Q8_0),
    }
}

/// `row · x` for a quantized `row` (whole blocks) and f32 `x` of its length, on `isa`.
///
/// ```
/// use trueno_quant::{Isa, QuantFormat, dot_f32, quantize};
/// let w: Vec<f32> = (0..64).map(|i| i as f32 / 64.0).collect();
/// let row = quantize(QuantFormat::Q8_0, &w)?;
/// let d = dot_f32(Isa::current()?, QuantFormat::Q8_0, &row, &vec![1.0; 64])?;
/// // Exactly 31.5 in f32; Q8_0 rounds each weight by up to half of max|w| / 127.
/// assert!((d - 31.5).abs() < 64.0 * 0.5 * (63.0 / 64.0) / 127.0);
/// # Ok::<(), trueno_quant::QuantError>(())
/// ```
pub fn dot_f32(isa: Isa, format: QuantFormat, row: &[u8], x: &[f32]) -> Result<f32> {
    check_lengths(format, row.len(), x.len()).map_err(|_| row_mismatch(format, row, x))?;
    Ok(by_format!(format, row_dot_f32_isa, isa, row, x))
}

/// `row · act` for a quantized `row` and an activation vector quantized to
/// [`activation_format`]`(format)` (see [`crate::quantize`]), on `isa`: integer products
/// per block, GGML's method. NF4 has no integer dot ([`QuantError::Unsupported`]).
pub fn dot_q8(isa: Isa, format: QuantFormat, row: &[u8], act: &[u8]) -> Result<f32> {
    let Some(af) = activation_format(format) else {
        return Err(QuantError::Unsupported {
            op: "dot_q8",
            format,
            reason: "its levels are not integers; use dot_f32",
        });
    };
    let (wi, ai) = (format.info(), af.info());
    if !row.len().is_multiple_of(wi.block_bytes) {
        return Err(QuantError::NotWholeBlocks {
            format,
            bytes: row.len(),
        });
    }
    let n = row.len() / wi.block_bytes * wi.block_elems;
    let want = n / ai.block_elems * ai.block_bytes;
    if act.len() != want {
        return Err(QuantError::BufferSize {
            op: "dot_q8",
            what: "activation bytes",
            expected: want,
            got: act.len(),
        });
    }
    Ok(row_dot_q8_best(isa, format, row, act))
}

fn row_mismatch(format: QuantFormat, row: &[u8], x: &[f32]) -> QuantError {
    let i = format.info();
    if !row.len().is_multiple_of(i.block_bytes) {
        return QuantError::NotWholeBlocks {
            format,
            bytes: row.len(),
        };
    }
    QuantError::BufferSize {
        op: "dot",
        what: "x",
        expected: row.len() / i.block_bytes * i.block_elems,
        got: x.len(),
    }
}
