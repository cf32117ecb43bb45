//! The plan's matrix products: the projections of a layer (and the logits), as
//! matrix-vector products for a decode step (the integer path where the input is whole
//! Q8_K blocks) or `Stream::qgemm_with`'s launches for a prefill.

use super::{DevicePeak, F32, Math, Step, WeightType, elementwise, gap, launch};
use crate::error::Result;
use crate::kernels::Kernel;
use crate::kernels::convert::ToHalfKernel;
use crate::kernels::dequant_t::DequantTransposedKernel;
use crate::kernels::elementwise::ElementwiseOp;
use crate::kernels::float_type::FloatType;
use crate::kernels::gemm_mma::{GemmInput, HalfType, MmaGemmKernel, MmaTileK};
use crate::kernels::gemm_split::SplitReduceKernel;
use crate::kernels::gemm_wgmma::WgmmaGemmKernel;
use crate::kernels::qgemm_wgmma::QgemmWgmmaKernel;
use crate::kernels::qgemv::{QgemvKernel, QuantFormat};
use crate::kernels::qgemv_dp4a::{QgemvQ8kKernel, QgemvQ8kOneWaveKernel, one_wave_wins};
use crate::kernels::qgemv_late::QgemvQ8kLateKernel;
use crate::kernels::qgemv_q4k_mma_one::tensor_core_kernel_for;
use crate::kernels::qgemv_q6k_mma_one::QgemvDevice;
use crate::kernels::quantize_q8k::QuantizeQ8kKernel;
use crate::ops_gemm::wgmma_tile_for;
use crate::ops_gemm_split::{SplitShape, split_count};
use crate::ops_qgemm::{fused_is_faster, qgemm_tile};

/// `y = W x` for `tokens` activation vectors: a qgemv per vector where the format has a
/// kernel and there is one vector; for several, where the shape allows (`rows` a
/// multiple of 8, `cols` of 256), `Stream::qgemm_with`'s launches: on a `wgmma` device
/// where it takes the fused kernel, the activations rounded to bf16 and the fused GEMM;
/// otherwise the weights dequantized to transposed bf16, the activations rounded, the
/// tensor-core GEMM as `Stream::gemm_mma_with` runs it untuned: on Hopper the wgmma
/// kernel at the rule's tile width, its k-loop cut by the split rule where the tiles
/// fill little of the device (then the reduce, which takes the bias); elsewhere the
/// mma.sync kernel. With `bias`, the GEMM adds it in its epilogue; the other paths
/// return `false` for the caller to add it.
fn projection(
    what: &str,
    w: &WeightType,
    (rows, cols): (usize, usize),
    (tokens, device): (usize, &DevicePeak),
    bias: bool,
) -> Result<(Vec<Step>, bool)> {
    let wgmma = device.wgmma;
    let (r, c, t) = (rows as u64, cols as u64, tokens as u64);
    let bytes = w.bytes(r, c) + t * (r + c) * F32;
    let flops = 2 * t * r * c;
    let qgemm_fits = rows.is_multiple_of(8) && cols.is_multiple_of(256);
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
            let tile = qgemm_tile(tokens);
            let kernel = QgemmWgmmaKernel(f, FloatType::F32, tile);
            let dims = (tokens, rows, cols);
            let splits = split_count(SplitShape::qgemm(tile), device.sms, dims);
            let inputs = w.bytes(r, c) + t * c * 2;
            let gemm = product(what, "fused GEMM", &kernel, dims, (splits, inputs), bias)?;
            let mut steps = vec![to_bf16(what, tokens, cols)?];
            steps.extend(gemm);
            (steps, bias)
        }
        (Some(f), _) if qgemm_fits => {
            let wt = r * c * 2;
            let mut steps = vec![
                launch(
                    &format!("{what} (weights to bf16)"),
                    &DequantTransposedKernel(f),
                    &[rows, cols],
                    w.bytes(r, c) + wt,
                    0,
                )?,
                to_bf16(what, tokens, cols)?,
            ];
            steps.extend(half_gemm(what, (tokens, rows, cols), device, bias)?);
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

/// `y = x Wᵀ` on bf16 activations and transposed bf16 weights (`Stream::gemm_mma_with`
/// untuned), f32 out, with the bias in its epilogue: on Hopper the wgmma kernel at the
/// rule's tile width, elsewhere the mma.sync kernel, either cut by the split rule.
fn half_gemm(
    what: &str,
    dims: (usize, usize, usize),
    device: &DevicePeak,
    bias: bool,
) -> Result<Vec<Step>> {
    let (tokens, rows, cols) = dims;
    let inputs = (tokens * cols * 2 + rows * cols * 2) as u64;
    let input = GemmInput::Half(HalfType::Bf16);
    let (kernel, shape): (Box<dyn Kernel>, SplitShape) = if device.wgmma {
        let tile_n = wgmma_tile_for(device.sms, tokens, rows);
        let kernel = WgmmaGemmKernel(input, tile_n, FloatType::F32);
        (Box::new(kernel), SplitShape::wgmma(input, tile_n))
    } else {
        let kernel = MmaGemmKernel(input, MmaTileK::K64, FloatType::F32);
        (Box::new(kernel), SplitShape::mma(MmaTileK::K64))
    };
    let splits = split_count(shape, device.sms, dims);
    product(what, "GEMM", &*kernel, dims, (splits, inputs), bias)
}

/// A tensor-core product's launches (f32 out, reading `inputs` bytes), with the bias in
/// its epilogue: one, or where `splits` cut its k-loop, the ranges' launch (a grid of
/// that depth writing their f32 slices, not `y`) and the reduce that sums them and
/// adds the bias.
fn product(
    what: &str,
    label: &str,
    kernel: &dyn Kernel,
    (tokens, rows, cols): (usize, usize, usize),
    (splits, inputs): (u32, u64),
    bias: bool,
) -> Result<Vec<Step>> {
    let (r, t) = (rows as u64, tokens as u64);
    let (flops, out) = (2 * t * r * cols as u64, t * r * F32);
    let (with_bias, bias_bytes) = if bias { (" + bias", r * F32) } else { ("", 0) };
    let dims = [tokens, rows, cols];
    if splits == 1 {
        let name = format!("{what} ({label}{with_bias})");
        let flops = flops + bias_bytes / F32 * t;
        let mut gemm = launch(&name, kernel, &dims, inputs + out + bias_bytes, flops)?;
        gemm.math = Math::Tensor;
        return Ok(vec![gemm]);
    }
    let s = u64::from(splits);
    let name = format!("{what} ({label}, k in {splits})");
    let mut gemm = launch(&name, kernel, &dims, inputs + s * out, flops)?;
    if let Some(cfg) = &mut gemm.config {
        cfg.grid.2 = splits;
    }
    gemm.math = Math::Tensor;
    let sum = launch(
        &format!("{what} (sum of the {splits} ranges{with_bias})"),
        &SplitReduceKernel(FloatType::F32),
        &[tokens, rows],
        s * out + out + bias_bytes,
        (s - 1) * t * r + bias_bytes / F32 * t,
    )?;
    Ok(vec![gemm, sum])
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
    (tokens, device): (usize, &DevicePeak),
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
                let kernel = integer_product(f, [rows, cols], device)?;
                steps.push(launch(what, &*kernel, &[rows, cols], bytes, 2 * r * c)?);
                false
            }
            None => {
                let (s, fused) = projection(what, w, (rows, cols), (tokens, device), bias)?;
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

/// The integer product `Stream::qgemv_q8k` runs on `device`: a tensor-core kernel where
/// [`tensor_core_kernel_for`] gives one (every Q4_K product, Q5_K's up to two waves,
/// Q6_K's past a wave or long, or of 4096-column rows filling the device on a Hopper part,
/// by the copy engine; Q4_K's one-pass `dp4a` kernel
/// runs only with the tensor cores turned off, which a plan does not assume), else the
/// one-wave variant where only it fits the rows in one wave against the default kernel
/// ([`one_wave_wins`], with the residency ptxas's register counts give), else
/// [`QgemvQ8kLateKernel::or_default`].
fn integer_product(
    f: QuantFormat,
    dims: [usize; 2],
    device: &DevicePeak,
) -> Result<Box<dyn Kernel>> {
    let sms = device.sms as u32;
    // The plan's Hopper parts (`wgmma`) are the devices with bulk copies.
    let dev = QgemvDevice {
        sms,
        shared_per_block: device.max_shared_per_block,
        bulk_copies: device.wgmma,
    };
    if let Some(k) = tensor_core_kernel_for(f, dims[0], dims[1], dev) {
        return Ok(k);
    }
    let variant = QgemvQ8kOneWaveKernel(f);
    let blocks = QgemvQ8kKernel(f).launch_config(&dims)?.grid.0;
    let one_wave = variant
        .planned_residency()
        .is_some_and(|per_sm| one_wave_wins(blocks, sms, per_sm));
    Ok(match one_wave {
        true => Box::new(variant),
        false => QgemvQ8kLateKernel::or_default(f, device.bandwidth_gbs, sms),
    })
}
