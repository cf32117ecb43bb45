//! Decode attention: one new query token per sequence against a KV cache, and the
//! kernel that appends the token's keys and values to the cache.
//!
//! Flash-decoding: the cache is cut into chunks of positions; one block per (chunk, tile
//! of query heads, sequence) keeps an online softmax (running max, running sum, weighted
//! value sum) per head over its chunk, its four warps taking every fourth position and
//! merging at the end; a second kernel merges the chunks of each head. Long contexts so
//! spread over the whole GPU instead of one block per head. Grouped-query attention maps
//! query head `h` to key/value head `h / (heads_q / heads_kv)`; a block serves up to eight
//! heads of one group (see [`DecodeShape::block_heads`]), reading each cache row once for
//! all of them (`decode_chunk.rs`).
//!
//! Layouts (f32, row-major): `q` and `out` `[batch, heads_q, dim]`, each cache
//! `[batch, heads_kv, capacity, dim]`, `lens` `[batch]` (positions `0..lens[b]` valid).
//! Scores are computed in the base-2 domain (the query pre-scaled by `scale * log2 e`), so
//! every exponential is one `ex2.approx.ftz`.

use super::decode_chunk::build_chunk;
use super::float_type::{FloatType, load_row};
use super::helpers::{elem_addr, max_nan_of};
use super::{Family, Kernel, LaunchConfig, check_dims};
use crate::error::{Result, shape_err};
use crate::ptx::{Cmp, F32, KernelBuilder, KernelIr, PtxType, Reg, Space, U32, U64};

/// Threads per chunk block: four warps.
pub const THREADS: u32 = 128;
pub(super) const WARPS: u32 = THREADS / 32;

/// The head dimensions the kernels are built for (a lane holds `dim / 32` or `dim / 16`
/// elements of a row).
pub const HEAD_DIMS: [u32; 3] = [64, 128, 256];

/// Query heads a chunk block may serve, largest first (see [`DecodeShape::block_heads`]).
pub const BLOCK_HEADS: [u32; 4] = [8, 4, 2, 1];

/// One query row's attention in f64, the reference both attention kernels are tested
/// against: `out = sum_t softmax(scale * q . k_t) v_t` over `n` keys, key and value `t`
/// starting at element `row(t)` of `k` and `v`; zeros when `n` is 0.
pub(crate) fn attend_f64(
    q: &[f32],
    (k, v): (&[f32], &[f32]),
    n: usize,
    row: impl Fn(usize) -> usize,
    scale: f32,
    out: &mut [f32],
) {
    let d = q.len();
    let scores: Vec<f64> = (0..n)
        .map(|t| {
            let dot: f64 = q
                .iter()
                .zip(&k[row(t)..][..d])
                .map(|(&a, &c)| a as f64 * c as f64)
                .sum();
            scale as f64 * dot
        })
        .collect();
    let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let w: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
    let total: f64 = w.iter().sum();
    for (e, o) in out.iter_mut().enumerate() {
        let acc: f64 = w
            .iter()
            .enumerate()
            .map(|(t, &wt)| wt * v[row(t) + e] as f64)
            .sum();
        *o = if total > 0.0 {
            (acc / total) as f32
        } else {
            0.0
        };
    }
}

/// CPU reference in f64: softmax(scale * q k^T) v per query head over positions
/// `0..lens[b]` of its key/value head. Empty sequences give zeros.
pub fn reference(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    lens: &[u32],
    (heads_q, heads_kv, capacity, dim): (usize, usize, usize, usize),
    scale: f32,
) -> Vec<f32> {
    let group = heads_q / heads_kv;
    let mut out = vec![0.0f32; q.len()];
    for (b, &len) in lens.iter().enumerate() {
        for h in 0..heads_q {
            let at = (b * heads_q + h) * dim;
            let base = (b * heads_kv + h / group) * capacity;
            attend_f64(
                &q[at..][..dim],
                (k, v),
                len as usize,
                |p| (base + p) * dim,
                scale,
                &mut out[at..][..dim],
            );
        }
    }
    out
}

/// The shape of one decode-attention call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeShape {
    /// Sequences.
    pub batch: usize,
    /// Query heads.
    pub heads_q: usize,
    /// Key/value heads (divides `heads_q`).
    pub heads_kv: usize,
    /// Positions each cache holds per head.
    pub capacity: usize,
    /// Head dimension: 64, 128 or 256.
    pub dim: usize,
}

/// The head checks every decode layout shares: query heads a multiple of the key/value
/// heads, a head dimension the kernels are built for.
pub(super) fn check_heads(
    kernel: &str,
    (heads_q, heads_kv, dim): (usize, usize, usize),
) -> Result<()> {
    if !heads_q.is_multiple_of(heads_kv) {
        return shape_err(
            kernel,
            format!("{heads_q} query heads are not a multiple of {heads_kv} key/value heads"),
        );
    }
    if !HEAD_DIMS.contains(&(dim as u32)) {
        return shape_err(
            kernel,
            format!("head dimension {dim} (built for 64, 128, 256)"),
        );
    }
    Ok(())
}

/// Whether the product of `parts` fits 32-bit indexing.
pub(super) fn fits_u32(parts: &[usize]) -> bool {
    parts
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .is_some_and(|t| t <= u32::MAX as usize)
}

impl DecodeShape {
    /// Checks the shape; `kernel` names the error.
    pub fn check(&self, kernel: &str) -> Result<()> {
        let s = self;
        if [s.batch, s.heads_q, s.heads_kv, s.capacity, s.dim].contains(&0) {
            return shape_err(kernel, format!("zero-size shape {s:?}"));
        }
        check_heads(kernel, (s.heads_q, s.heads_kv, s.dim))?;
        if !fits_u32(&[s.batch, s.heads_kv, s.capacity, s.dim])
            || s.batch > 65535
            || s.heads_q > 65535
        {
            return shape_err(kernel, format!("{s:?} exceeds 32-bit indexing or the grid"));
        }
        Ok(())
    }

    /// Query heads one chunk block serves: the most of [`BLOCK_HEADS`] that divides the
    /// group (`heads_q / heads_kv`), at most four at head dimension 256 (each head holds
    /// its query and accumulators in registers). Groups of 3, 5 or 7 run a head a block.
    pub fn block_heads(&self) -> usize {
        let group = self.heads_q / self.heads_kv.max(1);
        let most = most_block_heads(self.dim as u32) as usize;
        BLOCK_HEADS
            .into_iter()
            .map(|h| h as usize)
            .find(|&h| h <= most && group.is_multiple_of(h))
            .unwrap_or(1)
    }

    /// Positions per chunk: about four blocks per SM over the whole cache (a block per
    /// tile of [`block_heads`](Self::block_heads) heads), a power of two in 64..=1024.
    pub fn chunk(&self, sms: usize) -> usize {
        let work = self
            .capacity
            .saturating_mul(self.heads_q / self.block_heads())
            .saturating_mul(self.batch);
        work.div_ceil(4 * sms.max(1))
            .next_power_of_two()
            .clamp(64, 1024)
    }
}

/// The chunk kernel for one head dimension, cache type and number of query heads a block
/// (see [`DecodeShape::block_heads`]). Parameters: `q`, `k`, `v`, `lens`, `part_acc`
/// (`[batch, heads_q, splits, dim]`), `part_ml` (`[batch, heads_q, splits, 2]`), `heads_q`,
/// `heads_kv`, `capacity`, `chunk`, `splits`, `scale`.
#[derive(Clone, Copy, Debug)]
pub struct DecodeChunkKernel(pub u32, pub FloatType, pub u32);

/// The most query heads a block serves at head dimension `dim`: each head keeps its query
/// slice and accumulators in registers (`dim / 32` or `dim / 16` values a lane each).
fn most_block_heads(dim: u32) -> u32 {
    if dim > 128 { 4 } else { 8 }
}

/// The kernel name's suffix for `heads` query heads a block (none for one).
pub(super) fn heads_suffix(heads: u32) -> String {
    match heads {
        1 => String::new(),
        h => format!("_h{h}"),
    }
}

/// The (head dimension, heads a block) pairs built: every head count a shape can choose.
pub(super) fn chunk_variants() -> impl Iterator<Item = (u32, u32)> {
    HEAD_DIMS.into_iter().flat_map(|d| {
        BLOCK_HEADS
            .into_iter()
            .filter(move |&h| h <= most_block_heads(d))
            .map(move |h| (d, h))
    })
}

/// The merge kernel for one head dimension: `part_acc`, `part_ml`, `out`, `splits`.
#[derive(Clone, Copy, Debug)]
pub struct DecodeMergeKernel(pub u32);

/// `2^(x - top)`, or 0 while `top` is still -inf (nothing seen yet, where the difference
/// would be NaN). A NaN score makes `top` NaN (see `max_nan`) and so the result.
pub(super) fn weight(b: &mut KernelBuilder, x: Reg<F32>, top: Reg<F32>) -> Reg<F32> {
    let d = b.sub(x, top);
    let e = b.ex2_ftz(d);
    let empty = b.setp::<F32>(Cmp::Eq, top, f32::NEG_INFINITY);
    b.selp(0.0f32, e, empty)
}

/// Warps of a merge block: each takes every eighth split, so the dependent rounds of
/// loads per row are `splits / (8 * MERGE_UNROLL)`, not `splits / MERGE_UNROLL`.
const MERGE_WARPS: u32 = 8;

/// Splits a merge warp reads at once: their loads go out together.
const MERGE_UNROLL: u32 = 4;

/// The merge: one block per (sequence, head) row of `out`. Each warp folds its splits
/// (`w`, `w + 8`, ...) into a running (max, sum, accumulator) in one pass, a lane taking
/// `dim / 32` consecutive elements; the warps then combine through shared memory. (The
/// first merge, a thread an element walking every split in two passes, 128 threads a
/// row, took longer than the tensor-core chunk kernel at 4K: 15 against 11 us under
/// Nsight Compute, its rounds of loads each waiting on L2.)
fn build_merge(name: &str, dim: u32) -> KernelIr {
    let per_lane = (dim / 32) as usize;
    let slot_bytes = (dim + 2) * 4;
    let mut b = KernelBuilder::new(name);
    // Waits for the chunks (it may start as they drain) but lets the next kernel start
    // only when it is done: with both, the next step's chunk kernel sat resident through
    // this one and the chunks before it, and the SIMT chunks of 28 query heads over 4
    // ran 0.74-0.77x (H100); either side alone, 1.00-1.02x.
    b.wait_for_previous_grid();
    b.max_threads(MERGE_WARPS * 32);
    let gacc = b.param_ptr("part_acc", PtxType::F32);
    let gml = b.param_ptr("part_ml", PtxType::F32);
    let gout = b.param_ptr("out", PtxType::F32);
    let splits = b.param_u32("splits");
    let smem = b.shared_array("warps", MERGE_WARPS * slot_bytes, 16);
    let t = b.tid_x();
    let lane = b.and(t, 31u32);
    let warp = b.shr(t, 5u32);
    let row = b.ctaid_x();
    let first = b.mul(row, splits);
    let last = b.sub(splits, 1u32);
    let e0 = b.mul(lane, per_lane as u32);
    let big = b.mov(f32::NEG_INFINITY);
    let total = b.mov(0.0f32);
    let acc: Vec<Reg<F32>> = (0..per_lane).map(|_| b.mov(0.0f32)).collect();
    // A split past the end reads the last one again (no load is predicated) and
    // weighs nothing.
    b.for_loop(warp, splits, MERGE_WARPS * MERGE_UNROLL, false, |b, s0| {
        let parts: Vec<_> = (0..MERGE_UNROLL)
            .map(|u| {
                let s = b.add(s0, u * MERGE_WARPS);
                let valid = b.setp::<U32>(Cmp::Lt, s, splits);
                let i = b.min(s, last);
                let i = b.add(first, i);
                let a = elem_addr(b, gml, i, 8);
                let ml = b.ld_vec::<F32, U64, 2>(Space::Global, a, 0);
                let m = b.selp(ml[0], f32::NEG_INFINITY, valid);
                let ai = b.mad(i, dim, e0);
                let aa = elem_addr(b, gacc, ai, 4);
                (m, ml[1], load_row(b, aa, per_lane, FloatType::F32))
            })
            .collect();
        let top = max_nan_of(b, big, parts.iter().map(|p| p.0));
        let keep = weight(b, big, top);
        let mut t2 = b.mul(total, keep);
        let mut a2: Vec<Reg<F32>> = acc.iter().map(|&a| b.mul(a, keep)).collect();
        for (m, l, x) in &parts {
            let f = weight(b, *m, top);
            t2 = b.fma(*l, f, t2);
            for (a, &v) in a2.iter_mut().zip(x) {
                *a = b.fma(v, f, *a);
            }
        }
        b.assign(big, top);
        b.assign(total, t2);
        for (a, &v) in acc.iter().zip(&a2) {
            b.assign(*a, v);
        }
    });
    // Each warp's slot: max, sum, then the accumulator, a lane's element k at k * 32 +
    // lane (consecutive lanes, distinct banks).
    let slot = b.mul(warp, slot_bytes);
    let slot = b.add(smem, slot);
    let lane0 = b.setp::<U32>(Cmp::Eq, lane, 0u32);
    b.predicated(lane0, |b| {
        b.st_vec::<F32, U32>(Space::Shared, slot, 0, &[big, total])
    });
    let mine = b.mad(lane, 4u32, slot);
    for (k, &a) in acc.iter().enumerate() {
        b.st::<F32, U32>(Space::Shared, mine, 8 + 128 * k as i64, a);
    }
    b.bar_sync();
    // Thread e < dim combines element e over the warps.
    let here = b.setp::<U32>(Cmp::Lt, t, dim);
    b.if_then(here, false, |b| {
        let ms: Vec<[Reg<F32>; 2]> = (0..MERGE_WARPS)
            .map(|w| b.ld_vec::<F32, U32, 2>(Space::Shared, smem, (w * slot_bytes) as i64))
            .collect();
        let top = max_nan_of(b, ms[0][0], ms[1..].iter().map(|m| m[0]));
        // Element t is lane t / per_lane's element t % per_lane.
        let k = b.and(t, per_lane as u32 - 1);
        let from = b.shr(t, per_lane.trailing_zeros());
        let at = b.mad(k, 32u32, from);
        let el = b.mad(at, 4u32, smem);
        let sum = b.mov(0.0f32);
        let out = b.mov(0.0f32);
        for (w, m) in ms.iter().enumerate() {
            let f = weight(b, m[0], top);
            let x = b.ld::<F32, U32>(Space::Shared, el, (w as u32 * slot_bytes + 8) as i64);
            let s2 = b.fma(m[1], f, sum);
            let o2 = b.fma(x, f, out);
            b.assign(sum, s2);
            b.assign(out, o2);
        }
        // No position at all gives zeros; a NaN total (a NaN score) stays NaN.
        let none = b.setp::<F32>(Cmp::Eq, sum, 0.0f32);
        let q = b.div(out, sum);
        let r = b.selp(0.0f32, q, none);
        let oi = b.mad(row, dim, t);
        let oa = elem_addr(b, gout, oi, 4);
        b.st::<F32, U64>(Space::Global, oa, 0, r);
    });
    b.ret();
    b.finish()
}

impl Kernel for DecodeChunkKernel {
    fn name(&self) -> String {
        let h = heads_suffix(self.2);
        format!("trueno_decode_attn_d{}_{}{h}", self.0, self.1.name())
    }
    fn family(&self) -> Family {
        Family::decode_chunks(self.2)
    }
    fn build(&self) -> KernelIr {
        build_chunk(&self.name(), self.0, self.1, false, self.2)
    }
    /// `[splits, heads_q, batch]`: a block per (tile of this kernel's heads, chunk,
    /// sequence).
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        check_dims(&self.name(), dims, 3)?;
        let (splits, heads, batch) = (dims[0], dims[1], dims[2]);
        let per_block = self.2.max(1) as usize;
        if !heads.is_multiple_of(per_block) {
            return shape_err(
                &self.name(),
                format!("{heads} query heads are not tiles of {per_block}"),
            );
        }
        if heads > i32::MAX as usize || splits > 65535 || batch > 65535 {
            return shape_err(
                &self.name(),
                format!("grid {dims:?} over the hardware limits"),
            );
        }
        Ok(LaunchConfig {
            grid: ((heads / per_block) as u32, splits as u32, batch as u32),
            block: (THREADS, 1, 1),
            shared_bytes: 0,
        })
    }
}

impl Kernel for DecodeMergeKernel {
    fn name(&self) -> String {
        format!("trueno_decode_merge_d{}_f32", self.0)
    }
    fn family(&self) -> Family {
        Family::Attention
    }
    fn build(&self) -> KernelIr {
        build_merge(&self.name(), self.0)
    }
    /// `[rows]` (batch * heads_q).
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        check_dims(&self.name(), dims, 1)?;
        if dims[0] > i32::MAX as usize {
            return shape_err(
                &self.name(),
                format!("{} rows over the grid limit", dims[0]),
            );
        }
        Ok(LaunchConfig::linear(dims[0] as u32, MERGE_WARPS * 32))
    }
}

/// Every decode-attention configuration of one head a block (the chunk kernels of
/// several, see [`grouped`], live in modules of their own).
pub fn all() -> Vec<Box<dyn Kernel>> {
    let mut v: Vec<Box<dyn Kernel>> = Vec::new();
    for d in HEAD_DIMS {
        for t in FloatType::ALL {
            v.push(Box::new(DecodeChunkKernel(d, t, 1)));
        }
        v.push(Box::new(DecodeMergeKernel(d)));
    }
    v
}

/// The chunk kernels serving `heads` (more than one) query heads a block, contiguous and
/// paged, for every head dimension that allows that many and every cache type.
pub fn grouped(heads: u32) -> Vec<Box<dyn Kernel>> {
    let mut v: Vec<Box<dyn Kernel>> = Vec::new();
    for (d, h) in chunk_variants().filter(|&(_, h)| h == heads && h > 1) {
        for t in FloatType::ALL {
            v.push(Box::new(DecodeChunkKernel(d, t, h)));
            v.push(Box::new(super::paged::PagedDecodeChunkKernel(d, t, h)));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_are_checked_and_chunks_spread_the_cache_over_the_gpu() {
        let s = DecodeShape {
            batch: 1,
            heads_q: 32,
            heads_kv: 8,
            capacity: 4096,
            dim: 128,
        };
        assert!(s.check("k").is_ok());
        // Four heads a block: 8 tiles x 4096 positions over 4 x 132 blocks is 62.1.
        assert_eq!(s.block_heads(), 4);
        assert_eq!(s.chunk(132), 64);
        assert_eq!(
            DecodeShape {
                capacity: 131072,
                ..s
            }
            .chunk(132),
            1024
        );
        assert_eq!(DecodeShape { capacity: 100, ..s }.chunk(132), 64);
        for bad in [
            DecodeShape { heads_kv: 3, ..s },
            DecodeShape { dim: 96, ..s },
            DecodeShape { capacity: 0, ..s },
            DecodeShape {
                capacity: 1 << 30,
                ..s
            },
        ] {
            assert!(bad.check("k").is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_block_serves_the_largest_built_divisor_of_the_group() {
        let s = |heads_q, heads_kv, dim| DecodeShape {
            batch: 1,
            heads_q,
            heads_kv,
            capacity: 64,
            dim,
        };
        // (heads_q, heads_kv, dim) -> heads a block, written out from the rule.
        for (hq, hkv, d, want) in [
            (32, 32, 128, 1),
            (32, 8, 128, 4),
            (64, 8, 128, 8),
            (64, 8, 256, 4),
            (128, 8, 64, 8),
            (12, 2, 64, 2),
            (28, 4, 128, 1),
            (40, 8, 128, 1),
            (24, 8, 64, 1),
        ] {
            assert_eq!(s(hq, hkv, d).block_heads(), want, "{hq}/{hkv} d{d}");
        }
        // A launch names the query heads; the kernel tiles them by its own count.
        let four = DecodeChunkKernel(128, FloatType::Bf16, 4);
        assert_eq!(four.launch_config(&[3, 8, 2]).unwrap().grid, (2, 3, 2));
        assert!(four.launch_config(&[3, 6, 2]).is_err());
        // Whatever a shape picks is built, in both layouts, in the module its `family`
        // names (where the launch looks it up).
        let in_module = |k: &dyn Kernel| k.family().kernels().iter().any(|m| m.name() == k.name());
        for d in HEAD_DIMS {
            for group in 1..=16 {
                let h = s(group, 1, d as usize).block_heads() as u32;
                for t in FloatType::ALL {
                    let paged = super::super::paged::PagedDecodeChunkKernel(d, t, h);
                    for k in [&DecodeChunkKernel(d, t, h) as &dyn Kernel, &paged] {
                        assert!(in_module(k), "{} (group {group}) is not built", k.name());
                    }
                }
            }
        }
    }

    #[test]
    fn the_reference_is_a_weighted_mean_of_values() {
        // Two positions with equal keys: the output is the mean of the two values.
        let (q, k) = (vec![1.0f32; 64], vec![0.5f32; 2 * 64]);
        let v: Vec<f32> = (0..2 * 64)
            .map(|i| if i < 64 { 1.0 } else { 3.0 })
            .collect();
        let out = reference(&q, &k, &v, &[2], (1, 1, 2, 64), 0.125);
        assert!(out.iter().all(|&x| (x - 2.0).abs() < 1e-6), "{out:?}");
        let empty = reference(&q, &k, &v, &[0], (1, 1, 2, 64), 0.125);
        assert!(empty.iter().all(|&x| x == 0.0));
    }
}
