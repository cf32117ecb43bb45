//! The plan's matrix products: the projections of a layer (and the logits), as
//! matrix-vector products for a decode step (the integer path where the input is whole
//! Q8_K blocks) or `Stream::qgemm_with`'s launches for a prefill.

use super::{F32, Math, Step, WeightType, elementwise, gap, launch};
use crate::error::Result;
use crate::kernels::convert::ToHalfKernel;
use crate::kernels::dequant_t::DequantTransposedKernel;
use crate::kernels::elementwise::ElementwiseOp;
use crate::kernels::float_type::FloatType;
use crate::kernels::gemm_mma::{HalfType, MmaGemmKernel, MmaTileK};
use crate::kernels::qgemm_wgmma::QgemmWgmmaKernel;
use crate::kernels::qgemv::QgemvKernel;
use crate::kernels::qgemv_dp4a::QgemvQ8kKernel;
use crate::kernels::quantize_q8k::QuantizeQ8kKernel;
use crate::ops_qgemm::{fused_is_faster, qgemm_tile};

/// `y = W x` for `tokens` activation vectors: a qgemv per vector where the format has a
/// kernel and there is one vector; for several, where the shape allows (`rows` a
/// multiple of 8, `cols` of 256), `Stream::qgemm_with`'s launches: on a `wgmma` device
/// where it takes the fused kernel, the activations rounded to bf16 and the fused GEMM;
/// otherwise the weights dequantized to transposed bf16, the activations rounded, the
/// tensor-core GEMM (the mma.sync kernel's configuration, which Hopper runs as wgmma).
/// With `bias`, the GEMM adds it in its epilogue; the other paths return `false` for the
/// caller to add it.
fn projection(
    what: &str,
    w: &WeightType,
    (rows, cols): (usize, usize),
    (tokens, wgmma): (usize, bool),
    bias: bool,
) -> Result<(Vec<Step>, bool)> {
    let (r, c, t) = (rows as u64, cols as u64, tokens as u64);
    let bytes = w.bytes(r, c) + t * (r + c) * F32;
    let flops = 2 * t * r * c;
    let qgemm_fits = rows.is_multiple_of(8) && cols.is_multiple_of(256);
    // The bias's bytes (and an add a value) where the GEMM takes it.
    let fused = if bias { r * F32 } else { 0 };
    // Each arm: its steps, and whether its GEMM took the bias.
    Ok(match (w.qgemv_format(), tokens) {
        (Some(f), 1) => (
            vec![launch(
                what,
                &QgemvKernel(f, FloatType::F32),
                &[rows, cols],
                bytes,
                flops,
            )?],
            false,
        ),
        (Some(f), _) if qgemm_fits && fused_is_faster(wgmma, f, tokens) => {
            let name = if bias { "GEMM + bias" } else { "GEMM" };
            let kernel = QgemmWgmmaKernel(f, FloatType::F32, qgemm_tile(tokens, rows));
            let mut gemm = launch(
                &format!("{what} (fused {name})"),
                &kernel,
                &[tokens, rows, cols],
                w.bytes(r, c) + t * c * 2 + t * r * F32 + fused,
                flops + fused / F32 * t,
            )?;
            gemm.math = Math::Tensor;
            (vec![to_bf16(what, tokens, cols)?, gemm], bias)
        }
        (Some(f), _) if qgemm_fits => {
            let wt = r * c * 2;
            let name = if bias { "GEMM + bias" } else { "GEMM" };
            let mut gemm = launch(
                &format!("{what} ({name})"),
                &MmaGemmKernel(HalfType::Bf16.into(), MmaTileK::K64, FloatType::F32),
                &[tokens, rows, cols],
                t * c * 2 + wt + t * r * F32 + fused,
                flops + fused / F32 * t,
            )?;
            gemm.math = Math::Tensor;
            let steps = vec![
                launch(
                    &format!("{what} (weights to bf16)"),
                    &DequantTransposedKernel(f),
                    &[rows, cols],
                    w.bytes(r, c) + wt,
                    0,
                )?,
                to_bf16(what, tokens, cols)?,
                gemm,
            ];
            (steps, bias)
        }
        (Some(_), _) => (
            vec![gap(
                what,
                format!(
                    "no quantized GEMM for a {rows}x{cols} {} matrix (rows a multiple of 8, \
                 columns of 256)",
                    w.name
                ),
                bytes,
                flops,
                Math::Tensor,
            )],
            false,
        ),
        (None, _) => (
            vec![gap(
                what,
                format!("no {} matrix-vector kernel", w.name),
                bytes,
                flops,
                Math::F32,
            )],
            false,
        ),
    })
}

/// The activations of a projection rounded to bf16 for the tensor cores.
fn to_bf16(what: &str, tokens: usize, cols: usize) -> Result<Step> {
    let n = (tokens * cols) as u64;
    launch(
        &format!("{what} (input to bf16)"),
        &ToHalfKernel(HalfType::Bf16),
        &[tokens * cols],
        n * (F32 + 2),
        0,
    )
}

/// The projections of `group` (what, weights, rows) that read one input of `cols`
/// values: for a decode step whose input is whole Q8_K blocks (`cols` a multiple of 256,
/// as every K-quant's is; Q8_0 and Q4_0 need not be), the input is quantized to Q8_K once
/// and the projections take the `dp4a` path (on the H100, with the
/// quantization's own launch paid by one projection alone, as fast as the f32 path at
/// 4096x4096 and 1.3-1.9x faster on larger matrices: BENCHMARKS.md); the rest as
/// [`projection`]. With `bias`, each output gets its bias: fused into the GEMM's
/// epilogue where the projection is one (`Stream::qgemm_with`), else an elementwise add
/// after it (`q projection` -> `q bias`).
pub(super) fn projections(
    group: &[(&str, &WeightType, usize)],
    cols: usize,
    (tokens, wgmma): (usize, bool),
    bias: bool,
) -> Result<Vec<Step>> {
    let integer = |w: &WeightType| {
        w.qgemv_format().filter(|f| {
            tokens == 1 && cols.is_multiple_of(256) && QgemvQ8kKernel::FORMATS.contains(f)
        })
    };
    let mut steps = Vec::new();
    let c = cols as u64;
    // Q8_K: a byte a value, an f32 scale per 256 and an i32 sum per 16.
    let act = c + c / 256 * 4 + c / 16 * 4;
    if group.iter().any(|(_, w, _)| integer(w).is_some()) {
        steps.push(launch(
            "quantize input (Q8_K)",
            &QuantizeQ8kKernel(FloatType::F32),
            &[cols],
            c * F32 + act,
            3 * c,
        )?);
    }
    for &(what, w, rows) in group {
        let fused = match integer(w) {
            Some(f) => {
                let r = rows as u64;
                let bytes = w.bytes(r, c) + act + r * F32;
                steps.push(launch(
                    what,
                    &QgemvQ8kKernel(f),
                    &[rows, cols],
                    bytes,
                    2 * r * c,
                )?);
                false
            }
            None => {
                let (s, fused) = projection(what, w, (rows, cols), (tokens, wgmma), bias)?;
                steps.extend(s);
                fused
            }
        };
        if bias && !fused {
            let name = format!("{} bias", what.trim_end_matches(" projection"));
            steps.push(elementwise(&name, ElementwiseOp::Add, tokens * rows, 2)?);
        }
    }
    Ok(steps)
}
