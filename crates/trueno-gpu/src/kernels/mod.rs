//! GPU kernels: one file per family, each kernel beside its CPU reference.
//!
//! A family is one PTX module per dtype (all its entry points together), built once per
//! process and target and cached. Shapes are kernel parameters, so one module serves every
//! size.

pub mod attention;
pub mod convert;
mod decode_chunk;
pub mod decode_mma;
pub mod decode_split;
pub mod dequant;
mod dequant_chunk;
pub mod dequant_t;
pub mod elementwise;
pub mod flash_attention;
pub mod float_type;
pub mod gather_rows;
pub mod gemm;
pub(crate) mod gemm_copies;
pub mod gemm_epilogue;
pub mod gemm_mma;
mod gemm_mma_frags;
pub(crate) mod gemm_simt;
pub mod gemm_split;
pub mod gemm_wgmma;
pub(crate) mod gemm_wgmma_block;
pub mod gemm_wgmma_kn;
mod helpers;
pub mod hold;
pub mod kv_cache;
mod math;
pub mod norm;
pub mod paged;
pub mod qgemm_wgmma;
pub mod qgemv;
mod qgemv_block32_dp4a;
mod qgemv_block32_mma;
pub mod qgemv_dp4a;
mod qgemv_k;
mod qgemv_k4_dp4a;
pub mod qgemv_late;
pub mod qgemv_mma_batch;
mod qgemv_mma_staged;
mod qgemv_mma_tile;
pub mod qgemv_one_wave;
pub mod qgemv_q4k_mma;
pub mod qgemv_q4k_mma_one;
mod qgemv_q6k;
mod qgemv_q6k_dp4a;
mod qgemv_q6k_mma;
mod qgemv_q6k_mma_lane;
pub mod qgemv_q6k_mma_one;
pub mod qgemv_q6k_mma_one_bulk;
pub mod qgemv_q6k_mma_one_staged;
pub mod qgemv_wide;
pub mod quantize_q8k;
pub mod reduce;
pub mod rope;
pub mod softmax;
pub mod transpose;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use crate::error::{GpuError, Result};
use crate::ptx::{self, CompiledKernel, KernelIr, Target};

/// Grid, block and dynamic shared memory for one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks in x, y, z.
    pub grid: (u32, u32, u32),
    /// Threads per block in x, y, z.
    pub block: (u32, u32, u32),
    /// Dynamic shared memory in bytes.
    pub shared_bytes: u32,
}

impl LaunchConfig {
    /// A 1-D launch.
    pub fn linear(blocks: u32, threads: u32) -> Self {
        LaunchConfig {
            grid: (blocks, 1, 1),
            block: (threads, 1, 1),
            shared_bytes: 0,
        }
    }
}

/// One GPU kernel: its IR, its PTX, and how to launch it for a runtime shape.
pub trait Kernel: Send + Sync {
    /// Entry name, unique across all families (`trueno_gelu_f32`).
    fn name(&self) -> String;
    /// The family (module) it belongs to.
    fn family(&self) -> Family;
    /// Builds the IR.
    fn build(&self) -> KernelIr;
    /// PTX of a module holding only this kernel.
    fn emit_ptx(&self, target: Target) -> Result<String> {
        if !self.targets().contains(&target) {
            return crate::error::shape_err(
                &self.name(),
                format!(
                    "written for {}, not {}",
                    self.targets()
                        .iter()
                        .map(|t| t.name())
                        .collect::<Vec<_>>()
                        .join(", "),
                    target.name()
                ),
            );
        }
        Ok(ptx::emit_module(target, &[ptx::compile(self.build())?]))
    }
    /// The targets this kernel can be written for: every one from sm_80 unless it uses
    /// architecture-specific instructions (`wgmma`: sm_90a only).
    fn targets(&self) -> &'static [Target] {
        &[Target::Sm80, Target::Sm90, Target::Sm90a]
    }
    /// Launch configuration for `dims` (the meaning of each dim is the kernel's: `[n]` for
    /// elementwise and reductions, `[rows, cols]` for row ops, `[m, n, k]` for GEMM).
    /// Zero-size and out-of-range shapes are errors.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig>;
}

/// Kernel families: one PTX module each (per dtype).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// add, mul, scale, relu, gelu, silu, swiglu; f32 to f16 / bf16
    Elementwise,
    /// sum, max, argmax
    Reduce,
    /// row softmax
    Softmax,
    /// layernorm, rmsnorm, fused residual + rmsnorm
    Norm,
    /// FP32 GEMM
    Gemm,
    /// tensor-core GEMM (f16 / bf16 inputs, f32 accumulation)
    GemmMma,
    /// Hopper tensor-core GEMM (wgmma and the copy engine; sm_90a only)
    GemmWgmma,
    /// Hopper TF32 GEMM with a row-major B (k x n) read as stored (sm_90a only; its own
    /// module, so the other GEMMs' first call does not compile these)
    GemmWgmmaKn,
    /// Hopper GEMM from GGML-quantized weights dequantized into shared memory (sm_90a
    /// only; its own module, so a plain GEMM's first call does not compile these)
    QgemmWgmma,
    /// matrix-vector products from GGML-quantized weights (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K
    /// against f32 activations and against Q8_K ones), the activations' quantization,
    /// and quantized rows to f32 (embedding lookups, whole-matrix dequantization) or to a
    /// transposed bf16 matrix (the tensor-core operand of a prefill)
    Qgemv,
    /// rotary position embedding (normal and NeoX pairings)
    Rope,
    /// decode attention over a KV cache (flash-decoding: the chunk kernels of one query
    /// head a block, and the merge) and KV-cache appends (f32, bf16 and f16 caches,
    /// contiguous or paged; the module keeps its `attention_f32` name: f32 math throughout)
    Attention,
    /// FlashAttention forward (f16 / bf16, tensor cores)
    FlashAttention,
    /// FlashAttention forward on Hopper's warpgroup products and copy engine (sm_90a
    /// only)
    FlashAttentionWgmma,
    /// decode attention's chunk kernels that serve two query heads a block (grouped-query
    /// models, contiguous and paged caches): a module per group size, so a model's first
    /// decode step compiles only the kernels its group size picks
    DecodeHeads2,
    /// as `DecodeHeads2`, four query heads a block
    DecodeHeads4,
    /// as `DecodeHeads2`, eight query heads a block
    DecodeHeads8,
    /// decode attention's chunk kernels on the tensor cores (16-bit caches, contiguous
    /// and paged: a group's query heads as the rows of `mma.sync` products)
    DecodeMma,
}

impl Family {
    /// All families.
    pub const ALL: [Family; 18] = [
        Family::Elementwise,
        Family::Reduce,
        Family::Softmax,
        Family::Norm,
        Family::Gemm,
        Family::GemmMma,
        Family::GemmWgmma,
        Family::GemmWgmmaKn,
        Family::QgemmWgmma,
        Family::Qgemv,
        Family::Rope,
        Family::Attention,
        Family::FlashAttention,
        Family::FlashAttentionWgmma,
        Family::DecodeHeads2,
        Family::DecodeHeads4,
        Family::DecodeHeads8,
        Family::DecodeMma,
    ];

    /// Module name.
    pub fn name(self) -> &'static str {
        match self {
            Family::Elementwise => "elementwise_f32",
            Family::Reduce => "reduce_f32",
            Family::Softmax => "softmax_f32",
            Family::Norm => "norm_f32",
            Family::Gemm => "gemm_f32",
            Family::GemmMma => "gemm_mma",
            Family::GemmWgmma => "gemm_wgmma",
            Family::GemmWgmmaKn => "gemm_wgmma_kn",
            Family::QgemmWgmma => "qgemm_wgmma",
            Family::Qgemv => "qgemv_f32",
            Family::Rope => "rope_f32",
            Family::Attention => "attention_f32",
            Family::FlashAttention => "flash_attention",
            Family::FlashAttentionWgmma => "flash_attention_wgmma",
            Family::DecodeHeads2 => "decode_attention_h2",
            Family::DecodeHeads4 => "decode_attention_h4",
            Family::DecodeHeads8 => "decode_attention_h8",
            Family::DecodeMma => "decode_attention_mma",
        }
    }

    /// The one target this family's module must be written for, where its kernels use
    /// architecture-specific instructions (`None`: the device's own target).
    pub fn required_target(self) -> Option<Target> {
        match self {
            Family::GemmWgmma
            | Family::GemmWgmmaKn
            | Family::QgemmWgmma
            | Family::FlashAttentionWgmma => Some(Target::Sm90a),
            _ => None,
        }
    }

    /// The module of decode attention's chunk kernels serving `heads` query heads a block.
    pub fn decode_chunks(heads: u32) -> Family {
        match heads {
            2 => Family::DecodeHeads2,
            4 => Family::DecodeHeads4,
            8 => Family::DecodeHeads8,
            _ => Family::Attention,
        }
    }

    /// Every kernel of the family.
    pub fn kernels(self) -> Vec<Box<dyn Kernel>> {
        match self {
            Family::Elementwise => elementwise::all()
                .into_iter()
                .chain(convert::all())
                .chain([
                    Box::new(transpose::TransposeKernel) as Box<dyn Kernel>,
                    Box::new(hold::HoldKernel),
                ])
                .collect(),
            Family::Reduce => reduce::all(),
            Family::Softmax => softmax::all(),
            Family::Norm => norm::all(),
            Family::Gemm => gemm::all().into_iter().chain(gemm_split::all()).collect(),
            Family::GemmMma => gemm_mma::all(),
            Family::GemmWgmma => gemm_wgmma::all(),
            Family::GemmWgmmaKn => gemm_wgmma_kn::all(),
            Family::QgemmWgmma => qgemm_wgmma::all(),
            Family::Qgemv => qgemv::all()
                .into_iter()
                .chain(dequant::all())
                .chain(dequant_t::all())
                .chain(gather_rows::all())
                .collect(),
            Family::Rope => rope::all(),
            Family::Attention => attention::all()
                .into_iter()
                .chain(kv_cache::all())
                .chain(paged::all())
                .collect(),
            Family::FlashAttention => flash_attention::all(),
            Family::FlashAttentionWgmma => flash_attention::wgmma::all(),
            Family::DecodeHeads2 => attention::grouped(2),
            Family::DecodeHeads4 => attention::grouped(4),
            Family::DecodeHeads8 => attention::grouped(8),
            Family::DecodeMma => decode_mma::all(),
        }
    }
}

/// Every kernel configuration trueno ships.
pub fn all_kernels() -> Vec<Box<dyn Kernel>> {
    Family::ALL.iter().flat_map(|f| f.kernels()).collect()
}

/// Finds a kernel by entry name.
pub fn find(name: &str) -> Result<Box<dyn Kernel>> {
    all_kernels()
        .into_iter()
        .find(|k| k.name() == name)
        .ok_or_else(|| GpuError::UnknownKernel(name.into()))
}

/// A family's module for a target: its PTX and the compiled kernels (params, stats).
#[derive(Debug)]
pub struct FamilyModule {
    /// Which family.
    pub family: Family,
    /// PTX text of the whole module.
    pub ptx: String,
    /// The compiled kernels, in module order.
    pub kernels: Vec<CompiledKernel>,
}

/// The family's module for `target`, built on first use and cached for the process: its
/// kernels written for that target (one written only for later targets, such as Q6_K's
/// copy-engine GEMV on sm_90, is left out of an sm_80 module).
pub fn family_module(family: Family, target: Target) -> Result<Arc<FamilyModule>> {
    type Cache = Mutex<HashMap<(Family, Target), Arc<FamilyModule>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(m) = cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&(family, target))
    {
        return Ok(m.clone());
    }
    let kernels = family
        .kernels()
        .iter()
        .filter(|k| k.targets().contains(&target))
        .map(|k| ptx::compile(k.build()))
        .collect::<Result<Vec<_>>>()?;
    let ptx = ptx::emit_module(target, &kernels);
    let m = Arc::new(FamilyModule {
        family,
        ptx,
        kernels,
    });
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert((family, target), m.clone());
    Ok(m)
}

/// Blocks that take `block_bytes` of shared memory each (dynamic and static) a
/// multiprocessor holds, on a device whose blocks may take `max_shared_per_block` bytes:
/// the driver reserves 1 KiB a block, and a multiprocessor has the block limit and one
/// reserve (H100: 227 + 1 KiB, A100: 163 + 1). Shared memory alone; registers may bind
/// first.
///
/// ```
/// use trueno_gpu::kernels::blocks_by_shared_memory;
///
/// assert_eq!(blocks_by_shared_memory(53_760 + 1040, 227 * 1024), 4);
/// assert_eq!(blocks_by_shared_memory(113 * 1024, 227 * 1024), 2);
/// assert_eq!(blocks_by_shared_memory(100 * 1024, 99 * 1024), 0);
/// ```
pub fn blocks_by_shared_memory(block_bytes: usize, max_shared_per_block: u32) -> usize {
    const RESERVED: usize = 1024;
    (max_shared_per_block as usize + RESERVED) / (block_bytes + RESERVED)
}

/// `ceil(a / b)` as a grid dimension, or an error when it exceeds the hardware limit.
pub(crate) fn blocks_for(kernel: &str, work: usize, per_block: usize, limit: u32) -> Result<u32> {
    let b = work.div_ceil(per_block);
    u32::try_from(b)
        .ok()
        .filter(|&b| b <= limit)
        .ok_or_else(|| GpuError::Shape {
            kernel: kernel.into(),
            reason: format!("{work} items need {b} blocks, over the limit of {limit}"),
        })
}

/// Rejects empty shapes and sizes beyond 32-bit indexing.
pub(crate) fn check_dims(kernel: &str, dims: &[usize], arity: usize) -> Result<()> {
    if dims.len() != arity {
        return crate::error::shape_err(
            kernel,
            format!("expected {arity} dimensions, got {}", dims.len()),
        );
    }
    if dims.contains(&0) {
        return crate::error::shape_err(kernel, format!("zero-size shape {dims:?}"));
    }
    let total: Option<usize> = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    match total {
        Some(t) if t <= u32::MAX as usize && dims.iter().all(|&d| d <= u32::MAX as usize) => Ok(()),
        _ => crate::error::shape_err(kernel, format!("shape {dims:?} exceeds 32-bit indexing")),
    }
}

/// `[rows, cols]` checks for row kernels; `vec4` configurations need `cols % 4 == 0`.
pub(crate) fn check_rows(kernel: &str, dims: &[usize], vec4: bool) -> Result<()> {
    check_dims(kernel, dims, 2)?;
    if vec4 && !dims[1].is_multiple_of(4) {
        return crate::error::shape_err(kernel, format!("cols {} is not a multiple of 4", dims[1]));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptx::ir::Op;

    /// Which kernels may overlap their neighbours (programmatic dependent launch): the
    /// launches of a decode step (the embedding rows and every quantized matrix-vector
    /// product, the activations' Q8_K quantization, the elementwise ops, norms, RoPE, the
    /// KV-cache appends, decode attention's chunk kernels and merge, the reductions (the
    /// greedy argmax)) wait for the kernel before them; all but the
    /// merge also let the next one start early. Every other kernel is launched as before,
    /// and nothing but the integer products (their weights) loads before its wait.
    #[test]
    fn the_decode_step_kernels_overlap_their_neighbours() {
        let mut waiting = 0;
        for k in all_kernels() {
            let (name, ir) = (k.name(), k.build());
            let waits = ir.waits_for_previous_grid();
            let starts_next = ir.body.iter().any(|i| i.op == Op::GridDepLaunch);
            let integer_product = name.starts_with("trueno_qgemv_") && name.contains("_q8k");
            let expected = match k.family() {
                // The 16-bit conversions and the transpose (a prefill's) and the benchmarks'
                // hold are launched as before.
                Family::Elementwise => !["_to_", "transpose", "hold"]
                    .iter()
                    .any(|p| name.contains(p)),
                Family::Norm | Family::Rope | Family::Attention | Family::DecodeMma => true,
                Family::DecodeHeads2 | Family::DecodeHeads4 | Family::DecodeHeads8 => true,
                Family::Qgemv | Family::Reduce => true,
                _ => false,
            };
            assert_eq!(waits, expected, "{name}");
            let merge = name.starts_with("trueno_decode_merge");
            assert_eq!(starts_next, waits && !merge, "{name}");
            if waits && !integer_product {
                let wait = ir
                    .body
                    .iter()
                    .position(|i| i.op == Op::GridDepWait)
                    .unwrap();
                let early = ir.body[..wait]
                    .iter()
                    .any(|i| matches!(i.op, Op::Ld(crate::ptx::Space::Global)));
                assert!(!early, "{name}: a load before its wait");
            }
            waiting += usize::from(waits);
        }
        assert!(waiting > 100, "{waiting} kernels wait");
    }
}
