//! FlashAttention forward for sm_80 and later: `out = softmax(scale * Q K^T) V` over
//! sequences of f16 or bf16 tokens, f32 softmax and accumulation, without the score
//! matrix ever leaving registers. This module's kernel multiplies with `mma.sync`;
//! [`wgmma`] is Hopper's (warpgroup products, the copy engine), the same contract, and
//! one softmax and epilogue (`rows.rs`) serve both.
//!
//! One block of four warps takes a tile of query rows of one head of one sequence and
//! walks the key/value tiles of its sequence: each warp holds 16 (or 32) rows' scores
//! `S = Q K^T` as `mma.sync.m16n8k16` accumulators, keeps a running row max and sum
//! (online softmax, base 2: the scale arrives multiplied by log2 e), turns the scores into
//! 16-bit probabilities in place (the accumulator layout of two n8 tiles is the operand
//! layout of one k16 step) and accumulates `P V` by a second `mma.sync`. K and V tiles
//! move by `cp.async` into two stages of shared memory, the next tile's copies in flight
//! while this one is multiplied; rows are XOR-swizzled in 16-byte chunks so `ldmatrix`
//! reads eight rows from eight bank groups.
//!
//! Layouts (row-major, variable-length sequences packed back to back, as flash-attn's
//! `varlen` interface): `q` and `out` `[total_q, heads_q, dim]`, `k` and `v`
//! `[total_k, heads_kv, dim]`, `cu_q` / `cu_k` `[batch + 1]` (sequence `b`'s tokens are
//! `cu[b]..cu[b + 1]`). Query head `h` reads key/value head `h / (heads_q / heads_kv)`.
//! Causal masks align to the bottom right: with `lq` queries and `lk` keys, query `i`
//! sees keys `0..=i + lk - lq`, so a decode-style suffix of queries attends its whole
//! prefix. A row that sees no key gets zeros.

pub(crate) mod build;
pub(crate) mod rows;
pub mod wgmma;
mod wgmma_shape;

use super::attention::attend_f64;
use super::gemm_mma::HalfType;
use super::math::LOG2E;
use super::{Family, Kernel, LaunchConfig, blocks_for, check_dims};
use crate::error::{Result, shape_err};
use crate::ptx::KernelIr;

/// Threads per block: four warps, each with its own query rows.
pub const THREADS: u32 = 128;
const WARPS: u32 = THREADS / 32;

/// The head dimensions the kernels are built for.
pub const HEAD_DIMS: [u32; 3] = [64, 128, 256];

/// The tile shape for a head dimension: m16 row fragments per warp and keys per tile.
/// Two fragments per warp halve the shared-memory reads per product (each K and V
/// fragment feeds two `mma`); at 256 the output accumulator alone is 128 registers a
/// fragment, so one. At 128, tiles of 64 keys measured 7-10% faster on the H100 but
/// ptxas spills (60-100 bytes) with scores of 64 keys beside 32 rows of output, so 32;
/// scoring a 64-key stage in two passes of 32 gained nothing (the gain is in the larger
/// softmax step, not in fewer barriers).
fn tiles(dim: u32) -> (u32, u32) {
    match dim {
        256 => (1, 32),
        128 => (2, 32),
        _ => (2, 64),
    }
}

/// Query rows per block for a head dimension.
pub fn block_rows(dim: u32) -> u32 {
    WARPS * 16 * tiles(dim).0
}

/// Dynamic shared memory: the query tile and two stages of key and value tiles.
pub fn shared_bytes(dim: u32) -> u32 {
    let (_, bn) = tiles(dim);
    (block_rows(dim) + 4 * bn) * dim * 2
}

/// Which FlashAttention kernel runs a call: the `mma.sync` kernel (sm_80 and later)
/// or Hopper's (sm_90a: warpgroup products fed by the copy engine,
/// [`wgmma::FlashAttentionWgmmaKernel`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlashPath {
    /// [`FlashAttentionKernel`].
    Mma,
    /// [`wgmma::FlashAttentionWgmmaKernel`].
    Wgmma,
}

/// The shape of one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlashShape {
    /// Sequences.
    pub batch: usize,
    /// Query (and output) heads.
    pub heads_q: usize,
    /// Key/value heads (divides `heads_q`).
    pub heads_kv: usize,
    /// Head dimension (64, 128 or 256).
    pub dim: usize,
    /// Query tokens of all sequences together (`cu_q[batch]`).
    pub total_q: usize,
    /// Key tokens of all sequences together (`cu_k[batch]`).
    pub total_k: usize,
    /// The longest query sequence (sets the grid; rows past it are not computed).
    pub max_seqlen_q: usize,
    /// Bottom-right causal mask.
    pub causal: bool,
}

impl FlashShape {
    /// Checks what the kernels rely on.
    pub fn check(&self, kernel: &str) -> Result<()> {
        check_dims(
            kernel,
            &[self.batch, self.heads_q, self.heads_kv, self.max_seqlen_q],
            4,
        )?;
        if !HEAD_DIMS.contains(&(self.dim as u32)) {
            return shape_err(
                kernel,
                format!("head dim {} is not one of {HEAD_DIMS:?}", self.dim),
            );
        }
        if !self.heads_q.is_multiple_of(self.heads_kv) {
            return shape_err(
                kernel,
                format!(
                    "heads_q {} is not a multiple of heads_kv {}",
                    self.heads_q, self.heads_kv
                ),
            );
        }
        for (what, tokens, heads) in [
            ("query", self.total_q, self.heads_q),
            ("key/value", self.total_k, self.heads_kv),
        ] {
            let elems = tokens.checked_mul(heads * self.dim);
            if !matches!(elems, Some(e) if e <= u32::MAX as usize) {
                return shape_err(
                    kernel,
                    format!("{what} tokens x heads x dim exceed 32-bit indexing"),
                );
            }
        }
        Ok(())
    }
}

/// Visits every (query token, query head) of the packed sequences with the keys that
/// row sees: `f(token, head, keys)`, `keys` the element offsets of its key rows (the same
/// for V) in sequence order: varlen offsets, GQA head sharing, the bottom-right causal
/// mask.
fn for_each_row(
    (cu_q, cu_k): (&[u32], &[u32]),
    shape: FlashShape,
    mut f: impl FnMut(usize, usize, &dyn Fn(usize) -> usize, usize),
) {
    let (hq, hkv, d) = (shape.heads_q, shape.heads_kv, shape.dim);
    let group = hq / hkv;
    for b in 0..shape.batch {
        let (q0, q1) = (cu_q[b] as usize, cu_q[b + 1] as usize);
        let (k0, k1) = (cu_k[b] as usize, cu_k[b + 1] as usize);
        let (lq, lk) = (q1 - q0, k1 - k0);
        for i in 0..lq {
            let seen = if shape.causal {
                (i + 1 + lk).saturating_sub(lq).min(lk)
            } else {
                lk
            };
            for h in 0..hq {
                f(q0 + i, h, &|t| ((k0 + t) * hkv + h / group) * d, seen);
            }
        }
    }
}

/// CPU reference in f64 on the same layouts (inputs as f32): varlen sequences, GQA,
/// bottom-right causal mask; rows that see no key give zeros.
pub fn reference(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    cu_q: &[u32],
    cu_k: &[u32],
    shape: FlashShape,
    scale: f32,
) -> Vec<f32> {
    let (hq, d) = (shape.heads_q, shape.dim);
    let mut out = vec![0.0f32; q.len()];
    for_each_row((cu_q, cu_k), shape, |tok, h, key, seen| {
        let at = (tok * hq + h) * d;
        attend_f64(&q[at..][..d], (k, v), seen, key, scale, &mut out[at..][..d]);
    });
    out
}

/// CPU reference of the log-sum-exp of each row's scaled scores, `ln sum_j e^(scale
/// q . k_j)` over the keys the row sees, in f64 (`-inf` for a row that sees none), laid
/// out `[heads_q, total_q]` as flash-attn's `softmax_lse` for packed sequences.
pub fn reference_lse(
    q: &[f32],
    k: &[f32],
    cu_q: &[u32],
    cu_k: &[u32],
    shape: FlashShape,
    scale: f32,
) -> Vec<f32> {
    let (hq, d) = (shape.heads_q, shape.dim);
    let mut lse = vec![f32::NEG_INFINITY; hq * shape.total_q];
    for_each_row((cu_q, cu_k), shape, |tok, h, key, seen| {
        let qr = &q[(tok * hq + h) * d..][..d];
        let scores: Vec<f64> = (0..seen)
            .map(|t| {
                let kr = &k[key(t)..][..d];
                let dot: f64 = qr.iter().zip(kr).map(|(&a, &b)| a as f64 * b as f64).sum();
                scale as f64 * dot
            })
            .collect();
        if let Some(m) = scores.iter().copied().reduce(f64::max) {
            let sum: f64 = scores.iter().map(|s| (s - m).exp()).sum();
            lse[h * shape.total_q + tok] = (m + sum.ln()) as f32;
        }
    });
    lse
}

/// The forward kernel for one input type and head dimension: parameters `q`, `k`, `v`,
/// `out`, `cu_q`, `cu_k`, `total_q`, `total_k`, `heads_q`, `heads_kv`, `group`
/// (`heads_q / heads_kv`), `scale_log2` (`scale * log2 e`), `causal` (0 or 1), `lse`
/// (f32 `[heads_q, total_q]`, written when `want_lse` is not 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlashAttentionKernel(pub HalfType, pub u32);

impl Kernel for FlashAttentionKernel {
    fn name(&self) -> String {
        format!("trueno_flash_attn_fwd_{}_d{}", self.0.name(), self.1)
    }
    fn family(&self) -> Family {
        Family::FlashAttention
    }
    fn build(&self) -> KernelIr {
        build::build(&self.name(), self.0, self.1)
    }
    /// `[max_seqlen_q, heads_q, batch]`.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        let block = (block_rows(self.1), THREADS, shared_bytes(self.1));
        launch(&self.name(), dims, block)
    }
}

/// Both kernels' launch for `[max_seqlen_q, heads_q, batch]`: a block per tile of
/// `rows` query rows, per head, per sequence, of `threads` threads and `shared` bytes.
fn launch(
    name: &str,
    dims: &[usize],
    (rows, threads, shared): (u32, u32, u32),
) -> Result<LaunchConfig> {
    check_dims(name, dims, 3)?;
    let gx = blocks_for(name, dims[0], rows as usize, i32::MAX as u32)?;
    let gy = blocks_for(name, dims[1], 1, 65535)?;
    let gz = blocks_for(name, dims[2], 1, 65535)?;
    Ok(LaunchConfig {
        grid: (gx, gy, gz),
        block: (threads, 1, 1),
        shared_bytes: shared,
    })
}

/// `scale * log2 e`: the kernels' scores are exponentiated in base 2.
pub fn scale_log2(scale: f32) -> f32 {
    scale * LOG2E
}

/// Every FlashAttention configuration.
pub fn all() -> Vec<Box<dyn Kernel>> {
    let mut v: Vec<Box<dyn Kernel>> = Vec::new();
    for t in [HalfType::Bf16, HalfType::F16] {
        for d in HEAD_DIMS {
            v.push(Box::new(FlashAttentionKernel(t, d)));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every FlashAttention kernel (both paths) by name, with its PTX for its first target.
    fn every_kernel_ptx() -> Vec<(String, String)> {
        use crate::ptx::{compile, emit_module};
        let mut kernels = all();
        kernels.extend(wgmma::all());
        kernels
            .into_iter()
            .map(|k| {
                let target = k.targets()[0];
                (
                    k.name(),
                    emit_module(target, &[compile(k.build()).unwrap()]),
                )
            })
            .collect()
    }

    #[test]
    fn every_softmax_exponential_flushes_subnormals() {
        // The full-range `ex2.approx` costs ptxas's compare and two predicated multiplies
        // around each MUFU.EX2: a tile's softmax has one per score.
        for (name, text) in every_kernel_ptx() {
            let ex2: Vec<&str> = text.lines().filter(|l| l.contains("ex2.")).collect();
            assert!(ex2.len() >= 16, "{name}: {} exponentials", ex2.len());
            for l in ex2 {
                assert!(l.contains("ex2.approx.ftz.f32"), "{name}: {l}");
            }
        }
    }

    /// The output leaves in whole 32-byte sectors: after one shuffle with its neighbour a
    /// lane stores 8 bytes of a 16-column piece of its row, never the 4 bytes of one
    /// fragment (a warp instruction of those filled half of each sector it wrote: 49% of
    /// the global sectors at causal 1K x 128, Nsight Compute, session 34).
    #[test]
    fn the_output_is_stored_in_whole_sectors() {
        for (name, text) in every_kernel_ptx() {
            let stores: Vec<&str> = text.lines().filter(|l| l.contains("st.global")).collect();
            let pieces = stores
                .iter()
                .filter(|l| l.contains("st.global.v2.u32"))
                .count();
            let lse = stores
                .iter()
                .filter(|l| l.contains("st.global.f32"))
                .count();
            assert_eq!(pieces + lse, stores.len(), "{name}: {stores:?}");
            assert!(pieces > 0, "{name}: no output stores");
        }
    }

    #[test]
    fn shared_memory_fits_an_sm80_block_and_tiles_cover_the_rows() {
        for d in HEAD_DIMS {
            assert!(shared_bytes(d) <= 163 * 1024, "{d}: {}", shared_bytes(d));
            let c = FlashAttentionKernel(HalfType::Bf16, d)
                .launch_config(&[1000, 12, 3])
                .unwrap();
            assert_eq!(c.grid, (1000u32.div_ceil(block_rows(d)), 12, 3));
        }
        // The query tile (rows x dim halves) and two stages of K and V (keys x dim each),
        // written out: 128 rows + 4 x 64 keys at 64, 128 + 4 x 32 at 128, 64 + 4 x 32 at 256.
        let want = [(64, 384 * 128), (128, 256 * 256), (256, 192 * 512)];
        for (d, bytes) in want {
            assert_eq!(shared_bytes(d), bytes, "dim {d}");
        }
    }

    #[test]
    fn shapes_the_kernel_cannot_serve_are_errors() {
        let ok = FlashShape {
            batch: 2,
            heads_q: 8,
            heads_kv: 2,
            dim: 128,
            total_q: 100,
            total_k: 100,
            max_seqlen_q: 60,
            causal: true,
        };
        assert!(ok.check("t").is_ok());
        for bad in [
            FlashShape { dim: 96, ..ok },
            FlashShape { heads_kv: 3, ..ok },
            FlashShape { batch: 0, ..ok },
            FlashShape {
                max_seqlen_q: 0,
                ..ok
            },
            FlashShape {
                total_k: 1 << 30,
                ..ok
            },
        ] {
            assert!(bad.check("t").is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_reference_masks_bottom_right_and_zeroes_rows_that_see_nothing() {
        // One head of dim 64, 3 queries against 2 keys, causal: query 0 sees no key
        // (0 + 1 + 2 - 3 = 0), query 1 sees key 0, query 2 sees both.
        let shape = FlashShape {
            batch: 1,
            heads_q: 1,
            heads_kv: 1,
            dim: 64,
            total_q: 3,
            total_k: 2,
            max_seqlen_q: 3,
            causal: true,
        };
        let q = vec![0.0f32; 3 * 64];
        let k = vec![0.0f32; 2 * 64];
        let mut v = vec![1.0f32; 2 * 64];
        v[64..].fill(3.0);
        let o = reference(&q, &k, &v, &[0, 3], &[0, 2], shape, 0.1);
        assert!(o[..64].iter().all(|&x| x == 0.0));
        assert!(o[64..128].iter().all(|&x| x == 1.0));
        assert!(o[128..].iter().all(|&x| (x - 2.0).abs() < 1e-6));
        // Zero scores: the log-sum-exp is ln of the keys seen, -inf for none.
        let lse = reference_lse(&q, &k, &[0, 3], &[0, 2], shape, 0.1);
        assert_eq!(lse[0], f32::NEG_INFINITY);
        assert_eq!(lse[1], 0.0);
        assert!((lse[2] - 2f32.ln()).abs() < 1e-7);
    }
}
