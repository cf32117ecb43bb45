//! What trueno-gpu launches to run a llama/qwen2-style transformer: the per-layer kernel
//! sequence for one decode step or one prefill, each launch with its configuration (from
//! the kernel's own `launch_config`), the bytes it must move and the FLOPs it must do,
//! and the time those take at a device's datasheet rates (the roofline floor). Steps
//! trueno has no kernel for yet are listed with the reason, so a plan shows the gaps too.
//!
//! The model comes in as a [`ModelShape`] (the CLI builds one from a GGUF file's metadata
//! and tensor table); nothing here touches weights.

use crate::error::{Result, shape_err};
use crate::kernels::Kernel;
use crate::kernels::LaunchConfig;
use crate::kernels::attention::{DecodeMergeKernel, DecodeShape, HEAD_DIMS};
use crate::kernels::decode_split::DecodePath;
use crate::kernels::dequant::DequantRowsKernel;
use crate::kernels::elementwise::{ElementwiseKernel, ElementwiseOp};
use crate::kernels::flash_attention::FlashAttentionKernel;
use crate::kernels::flash_attention::wgmma::FlashAttentionWgmmaKernel;
use crate::kernels::float_type::FloatType;
use crate::kernels::gather_rows::GatherRowsKernel;
use crate::kernels::gemm_mma::HalfType;
use crate::kernels::kv_cache::KvAppendKernel;
use crate::kernels::norm::{NormKernel, NormOp};
use crate::kernels::qgemv::QuantFormat;
use crate::kernels::reduce::{ReduceKernel, ReduceOp};
use crate::kernels::rope::{RopeKernel, RopeMode};
use crate::ops_attention::decode_chunk_kernel;

/// How a weight matrix is stored: a GGML type name (`Q4_K`, `F16`...) and its block
/// geometry, so its bytes are known whether or not trueno has a kernel for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WeightType {
    /// GGML's name.
    pub name: String,
    /// Elements per block.
    pub block_elems: u64,
    /// Bytes per block.
    pub block_bytes: u64,
}

impl WeightType {
    /// Bytes of a `rows x cols` matrix (rows padded to whole blocks, as GGML stores them).
    pub fn bytes(&self, rows: u64, cols: u64) -> u64 {
        rows * cols.div_ceil(self.block_elems.max(1)) * self.block_bytes
    }

    /// The matrix-vector kernel format, where trueno has one.
    pub fn qgemv_format(&self) -> Option<QuantFormat> {
        QuantFormat::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(&self.name))
    }
}

/// The weights of one layer, by role.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerWeights {
    /// `attn_q`, `attn_k`, `attn_v`, `attn_output`.
    pub q: WeightType,
    /// Key projection.
    pub k: WeightType,
    /// Value projection.
    pub v: WeightType,
    /// Attention output projection.
    pub o: WeightType,
    /// `ffn_gate`.
    pub gate: WeightType,
    /// `ffn_up`.
    pub up: WeightType,
    /// `ffn_down`.
    pub down: WeightType,
}

/// The shape of a llama/qwen2-style decoder: pre-norm (RMSNorm) blocks of grouped-query
/// attention with rotary positions and a SwiGLU feed-forward.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelShape {
    /// `general.architecture` (`llama`, `qwen2`...).
    pub arch: String,
    /// Decoder blocks.
    pub layers: usize,
    /// Residual width.
    pub hidden: usize,
    /// Feed-forward width.
    pub ffn: usize,
    /// Query heads.
    pub heads_q: usize,
    /// Key/value heads.
    pub heads_kv: usize,
    /// Per-head width.
    pub head_dim: usize,
    /// Vocabulary (rows of the output projection).
    pub vocab: usize,
    /// Rotary pairing.
    pub rope: RopeMode,
    /// Biases on the q/k/v projections (qwen2).
    pub qkv_bias: bool,
    /// The weights of each layer (one entry per layer; mixed quantizations differ).
    pub layer_weights: Vec<LayerWeights>,
    /// The token embedding table.
    pub embedding: WeightType,
    /// The output projection (the embedding table when tied).
    pub output: WeightType,
}

/// A device's datasheet ceilings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DevicePeak {
    /// Short name (`h100`).
    pub name: &'static str,
    /// What it is.
    pub label: &'static str,
    /// Memory bandwidth, GB/s.
    pub bandwidth_gbs: f64,
    /// Dense bf16 tensor-core rate, TFLOP/s.
    pub bf16_tflops: f64,
    /// f32 (CUDA core) rate, TFLOP/s.
    pub f32_tflops: f64,
    /// Multiprocessors (decode attention's split count depends on it).
    pub sms: usize,
    /// Shared memory a block may take (opt-in), bytes: how many of decode attention's
    /// tensor-core blocks a SM holds, and so its split.
    pub max_shared_per_block: u32,
    /// Hopper (sm_90a): the wgmma kernels run, and a prefill's quantized projections
    /// take the fused kernel where `Stream::qgemm_with` does.
    pub wgmma: bool,
}

/// The devices a plan can be priced on (vendor datasheets: SXM parts, dense rates).
pub const DEVICES: [DevicePeak; 3] = [
    DevicePeak {
        name: "h100",
        label: "NVIDIA H100 SXM5 80GB",
        bandwidth_gbs: 3352.0,
        bf16_tflops: 989.4,
        f32_tflops: 66.9,
        sms: 132,
        max_shared_per_block: 227 * 1024,
        wgmma: true,
    },
    DevicePeak {
        name: "h200",
        label: "NVIDIA H200 SXM 141GB",
        bandwidth_gbs: 4800.0,
        bf16_tflops: 989.4,
        f32_tflops: 66.9,
        sms: 132,
        max_shared_per_block: 227 * 1024,
        wgmma: true,
    },
    DevicePeak {
        name: "a100",
        label: "NVIDIA A100 SXM4 80GB",
        bandwidth_gbs: 2039.0,
        bf16_tflops: 312.0,
        f32_tflops: 19.5,
        sms: 108,
        max_shared_per_block: 163 * 1024,
        wgmma: false,
    },
];

/// Which units a step's arithmetic runs on (for its roofline).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Math {
    /// f32 on the CUDA cores.
    F32,
    /// bf16/f16 products on the tensor cores.
    Tensor,
}

/// One launch (or one step with no kernel yet).
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// What it does (`q projection`).
    pub what: String,
    /// The trueno kernel, or `None` with the reason in `missing`.
    pub kernel: Option<String>,
    /// Its launch configuration.
    pub config: Option<LaunchConfig>,
    /// Why there is no kernel.
    pub missing: Option<String>,
    /// Bytes it must move to or from device memory (each operand once).
    pub bytes: u64,
    /// Floating-point operations.
    pub flops: u64,
    /// Where the arithmetic runs.
    pub math: Math,
}

impl Step {
    /// The roofline floor on `d`: the longer of moving the bytes and doing the math.
    pub fn roofline_us(&self, d: &DevicePeak) -> f64 {
        let peak = match self.math {
            Math::F32 => d.f32_tflops,
            Math::Tensor => d.bf16_tflops,
        };
        let mem = self.bytes as f64 / (d.bandwidth_gbs * 1e3);
        let math = self.flops as f64 / (peak * 1e6);
        mem.max(math)
    }
}

/// What a plan covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// One new token against a cache of `context` positions.
    Decode {
        /// Positions in the KV cache (the attention's length).
        context: usize,
    },
    /// `tokens` prompt tokens at once.
    Prefill {
        /// Prompt length.
        tokens: usize,
    },
}

/// A plan: the steps before the layers, one layer's steps per layer, the steps after.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// Decode or prefill.
    pub phase: Phase,
    /// KV cache element type.
    pub kv: FloatType,
    /// Before the first layer.
    pub prologue: Vec<Step>,
    /// Each layer's steps (layers differ only where their weights' formats do).
    pub layers: Vec<Vec<Step>>,
    /// After the last layer.
    pub epilogue: Vec<Step>,
}

impl Plan {
    /// Every step in order.
    pub fn steps(&self) -> impl Iterator<Item = &Step> {
        self.prologue
            .iter()
            .chain(self.layers.iter().flatten())
            .chain(&self.epilogue)
    }

    /// Kernel launches (steps with a kernel).
    pub fn launches(&self) -> usize {
        self.steps().filter(|s| s.kernel.is_some()).count()
    }

    /// Steps with no kernel yet.
    pub fn missing(&self) -> usize {
        self.steps().filter(|s| s.kernel.is_none()).count()
    }

    /// Total bytes, FLOPs and roofline time (µs) on `d`.
    pub fn totals(&self, d: &DevicePeak) -> (u64, u64, f64) {
        self.steps().fold((0, 0, 0.0), |(b, f, t), s| {
            (b + s.bytes, f + s.flops, t + s.roofline_us(d))
        })
    }
}

/// A step run by `kernel` launched over `dims`.
fn launch(what: &str, kernel: &dyn Kernel, dims: &[usize], bytes: u64, flops: u64) -> Result<Step> {
    Ok(Step {
        what: what.into(),
        kernel: Some(kernel.name()),
        config: Some(kernel.launch_config(dims)?),
        missing: None,
        bytes,
        flops,
        math: Math::F32,
    })
}

/// A step trueno has no kernel for.
fn gap(what: &str, why: String, bytes: u64, flops: u64, math: Math) -> Step {
    Step {
        what: what.into(),
        kernel: None,
        config: None,
        missing: Some(why),
        bytes,
        flops,
        math,
    }
}

const F32: u64 = 4;

/// An elementwise op over `n` values reading `reads` arrays and writing one.
pub(super) fn elementwise(what: &str, op: ElementwiseOp, n: usize, reads: u64) -> Result<Step> {
    launch(
        what,
        &ElementwiseKernel(op),
        &[n],
        (reads + 1) * n as u64 * F32,
        n as u64 * 8,
    )
}

/// Residual add + RMSNorm of `rows` rows: reads x, the residual and gamma, writes the sum
/// and the normalised rows.
fn add_rmsnorm(what: &str, rows: usize, hidden: usize) -> Result<Step> {
    let n = (rows * hidden) as u64;
    let k = NormKernel::for_cols(NormOp::AddRmsNorm, hidden);
    launch(
        what,
        &k,
        &[rows, hidden],
        4 * n * F32 + hidden as u64 * F32,
        5 * n,
    )
}

fn check(m: &ModelShape) -> Result<()> {
    let bad = |r: String| shape_err("plan", r);
    if [
        m.layers, m.hidden, m.ffn, m.heads_q, m.heads_kv, m.head_dim, m.vocab,
    ]
    .contains(&0)
    {
        return bad(format!("a zero dimension in {m:?}"));
    }
    if !m.heads_q.is_multiple_of(m.heads_kv) {
        return bad(format!(
            "{} query heads over {} key/value heads",
            m.heads_q, m.heads_kv
        ));
    }
    if m.layer_weights.len() != m.layers {
        return bad(format!(
            "{} layers but weights for {}",
            m.layers,
            m.layer_weights.len()
        ));
    }
    if !m.head_dim.is_multiple_of(2) {
        return bad(format!(
            "head dimension {} is odd (no rotary pairs)",
            m.head_dim
        ));
    }
    Ok(())
}

/// The attention of one layer: decode over the cache, or FlashAttention over the prompt.
fn attention(
    m: &ModelShape,
    phase: Phase,
    kv: FloatType,
    device: &DevicePeak,
) -> Result<Vec<Step>> {
    let (sms, wgmma) = (device.sms, device.wgmma);
    let (hq, hkv, d) = (m.heads_q, m.heads_kv, m.head_dim);
    let fits = HEAD_DIMS.contains(&(d as u32));
    let kv_bytes = kv.bytes() as u64;
    match phase {
        Phase::Decode { context } => {
            let n = (hkv * d) as u64;
            let append_bytes = 2 * n * (F32 + kv_bytes) + F32;
            let append = launch(
                "kv append",
                &KvAppendKernel(kv),
                &[hkv * d],
                append_bytes,
                0,
            )?;
            let cache = 2 * (context * hkv * d) as u64 * kv_bytes;
            let flops = 4 * (context * hq * d) as u64;
            if !fits {
                let why = format!("no decode attention for head dimension {d} (64, 128, 256)");
                return Ok(vec![
                    append,
                    gap("decode attention", why, cache, flops, Math::F32),
                ]);
            }
            let shape = DecodeShape {
                batch: 1,
                heads_q: hq,
                heads_kv: hkv,
                capacity: context,
                dim: d,
            };
            // The chunk kernel `Stream::decode_attention` runs for this cache type.
            let path = DecodePath::for_cache(kv);
            let (chunk, width) = shape.split_for(path, sms, device.max_shared_per_block);
            let splits = context.div_ceil(chunk);
            let partials = (hq * splits * (d + 2)) as u64 * F32;
            let q = (hq * d) as u64 * F32;
            let chunk_k = decode_chunk_kernel(path, kv, &shape, false)?;
            let merge_k = DecodeMergeKernel(d as u32);
            let mut chunks = launch(
                "decode attention (chunks)",
                chunk_k.as_ref(),
                &[splits, width, 1],
                cache + q + partials,
                flops,
            )?;
            if path == DecodePath::Mma {
                chunks.math = Math::Tensor;
            }
            Ok(vec![
                append,
                chunks,
                launch(
                    "decode attention (merge)",
                    &merge_k,
                    &[hq],
                    partials + q,
                    (hq * splits * d * 3) as u64,
                )?,
            ])
        }
        Phase::Prefill { tokens } => {
            let t = tokens as u64;
            let kv_write = launch(
                "kv cache write (the prompt's rows)",
                &KvAppendKernel(kv),
                &[tokens * hkv * d],
                2 * t * (hkv * d) as u64 * (F32 + kv_bytes) + F32,
                0,
            )?;
            // Causal: half the score matrix.
            let flops = 2 * t * t * (hq * d) as u64;
            let bytes = t * ((2 * hq + 2 * hkv) * d) as u64 * 2;
            if !fits {
                let why = format!("no FlashAttention for head dimension {d} (64, 128, 256)");
                return Ok(vec![
                    kv_write,
                    gap("attention", why, bytes, flops, Math::Tensor),
                ]);
            }
            // `Stream::flash_attention`'s choice: Hopper's kernel on a wgmma device.
            let hopper = FlashAttentionWgmmaKernel::for_sequences(HalfType::Bf16, d as u32, tokens);
            let kernel: &dyn Kernel = match wgmma {
                true => &hopper,
                false => &FlashAttentionKernel(HalfType::Bf16, d as u32),
            };
            let mut fa = launch(
                "flash attention (causal, bf16 in and out)",
                kernel,
                &[tokens, hq, 1],
                bytes,
                flops,
            )?;
            fa.math = Math::Tensor;
            Ok(vec![kv_write, fa])
        }
    }
}

/// The plan for `phase` with a KV cache of `kv` elements on `device` (decode attention
/// sizes its splits by its multiprocessors; a prefill's quantized projections take the
/// fused kernel on Hopper where `Stream::qgemm_with` does).
pub fn plan(m: &ModelShape, phase: Phase, kv: FloatType, device: &DevicePeak) -> Result<Plan> {
    check(m)?;
    let tokens = match phase {
        Phase::Decode { context: 0 } => {
            return shape_err(
                "plan",
                "a decode step needs a context of at least 1 position",
            );
        }
        Phase::Decode { .. } => 1,
        Phase::Prefill { tokens: 0 } => return shape_err("plan", "a prefill of zero tokens"),
        Phase::Prefill { tokens } => tokens,
    };
    let (hq, hkv, d, h) = (m.heads_q, m.heads_kv, m.head_dim, m.hidden);
    let t = tokens as u64;
    let embed_bytes = m.embedding.bytes(t, h as u64) + t * (h as u64 * F32 + 4);
    let dense = match m.embedding.name.to_ascii_uppercase().as_str() {
        "F32" => Some(FloatType::F32),
        "F16" => Some(FloatType::F16),
        "BF16" => Some(FloatType::Bf16),
        _ => None,
    };
    let prologue = vec![match (m.embedding.qgemv_format(), dense) {
        (Some(f), _) => launch(
            "token embedding rows",
            &DequantRowsKernel(f),
            &[tokens, h],
            embed_bytes,
            0,
        )?,
        (None, Some(t)) => launch(
            "token embedding rows",
            &GatherRowsKernel(t),
            &[tokens, h],
            embed_bytes,
            0,
        )?,
        (None, None) => gap(
            "token embedding rows",
            format!(
                "no embedding-row kernel for a {} table: rows dequantized on the host and copied",
                m.embedding.name
            ),
            embed_bytes,
            0,
            Math::F32,
        ),
    }];
    let mut layers = Vec::with_capacity(m.layers);
    for w in &m.layer_weights {
        let mut s = vec![add_rmsnorm("attention norm (+ residual)", tokens, h)?];
        s.extend(projections(
            &[
                ("q projection", &w.q, hq * d),
                ("k projection", &w.k, hkv * d),
                ("v projection", &w.v, hkv * d),
            ],
            h,
            (tokens, device),
            m.qkv_bias,
        )?);
        for (what, heads) in [("rope q", hq), ("rope k", hkv)] {
            let n = (tokens * heads * d) as u64;
            let bytes = 2 * n * F32 + t * F32 + (d / 2) as u64 * F32;
            s.push(launch(
                what,
                &RopeKernel(m.rope),
                &[tokens, heads, d],
                bytes,
                3 * n,
            )?);
        }
        s.extend(attention(m, phase, kv, device)?);
        s.extend(projections(
            &[("output projection", &w.o, h)],
            hq * d,
            (tokens, device),
            false,
        )?);
        s.push(add_rmsnorm("ffn norm (+ residual)", tokens, h)?);
        s.extend(projections(
            &[
                ("gate projection", &w.gate, m.ffn),
                ("up projection", &w.up, m.ffn),
            ],
            h,
            (tokens, device),
            false,
        )?);
        s.push(elementwise(
            "swiglu",
            ElementwiseOp::Swiglu,
            tokens * m.ffn,
            2,
        )?);
        s.extend(projections(
            &[("down projection", &w.down, h)],
            m.ffn,
            (tokens, device),
            false,
        )?);
        layers.push(s);
    }
    // Logits for the last token only (a prompt's other positions need none).
    let mut epilogue = vec![add_rmsnorm("output norm (+ residual)", 1, h)?];
    epilogue.extend(projections(
        &[("output projection (logits)", &m.output, m.vocab)],
        h,
        (1, device),
        false,
    )?);
    epilogue.extend([launch(
        "argmax (greedy sampling)",
        &ReduceKernel(ReduceOp::Argmax),
        &[m.vocab],
        m.vocab as u64 * F32,
        m.vocab as u64,
    )?]);
    Ok(Plan {
        phase,
        kv,
        prologue,
        layers,
        epilogue,
    })
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;

#[path = "plan_products.rs"]
mod products;
use products::projections;
