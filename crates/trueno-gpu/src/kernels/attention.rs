//! Decode attention: one new query token per sequence against a KV cache, and the
//! kernel that appends the token's keys and values to the cache.
//!
//! Flash-decoding: the cache is cut into chunks of positions; one block per (chunk, query
//! head, sequence) keeps an online softmax (running max, running sum, weighted value sum)
//! over its chunk, its four warps taking every fourth position and merging at the end;
//! a second kernel merges the chunks of each head. Long contexts so spread over the whole
//! GPU instead of one block per head. Grouped-query attention maps query head `h` to
//! key/value head `h / (heads_q / heads_kv)`; the blocks of one group read the same cache
//! rows, which they mostly find in L2.
//!
//! Layouts (f32, row-major): `q` and `out` `[batch, heads_q, dim]`, each cache
//! `[batch, heads_kv, capacity, dim]`, `lens` `[batch]` (positions `0..lens[b]` valid).
//! Scores are computed in the base-2 domain (the query pre-scaled by `scale * log2 e`), so
//! every exponential is one `ex2.approx`.

use super::float_type::{FloatType, load_row, load_words, widen};
use super::helpers::{elem_addr, max_nan, warp_reduce};
use super::math::LOG2E;
use super::paged::Pages;
use super::{Family, Kernel, LaunchConfig, check_dims};
use crate::error::{Result, shape_err};
use crate::ptx::ir::{Dim, SpecialReg};
use crate::ptx::{Cmp, F32, KernelBuilder, KernelIr, PtxType, Reg, Space, U32, U64};

/// Threads per chunk block: four warps.
pub const THREADS: u32 = 128;
const WARPS: u32 = THREADS / 32;
/// Cache rows a warp scores per step (see the chunk kernel's loop).
const ROWS_PER_STEP: u32 = 4;

/// The head dimensions the kernels are built for (each lane holds `dim / 32` elements).
pub const HEAD_DIMS: [u32; 3] = [64, 128, 256];

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

    /// Positions per chunk: about four blocks per SM over the whole cache, a power of
    /// two in 64..=1024.
    pub fn chunk(&self, sms: usize) -> usize {
        let work = self
            .capacity
            .saturating_mul(self.heads_q)
            .saturating_mul(self.batch);
        work.div_ceil(4 * sms.max(1))
            .next_power_of_two()
            .clamp(64, 1024)
    }
}

/// The chunk kernel for one head dimension and cache type. Parameters: `q`, `k`, `v`, `lens`,
/// `part_acc` (`[batch, heads_q, splits, dim]`), `part_ml` (`[batch, heads_q, splits, 2]`),
/// `heads_q`, `heads_kv`, `capacity`, `chunk`, `splits`, `scale`.
#[derive(Clone, Copy, Debug)]
pub struct DecodeChunkKernel(pub u32, pub FloatType);

/// The merge kernel for one head dimension: `part_acc`, `part_ml`, `out`, `splits`.
#[derive(Clone, Copy, Debug)]
pub struct DecodeMergeKernel(pub u32);

/// `2^(x - top)`, or 0 while `top` is still -inf (nothing seen yet, where the difference
/// would be NaN). A NaN score makes `top` NaN (see `max_nan`) and so the result.
fn weight(b: &mut KernelBuilder, x: Reg<F32>, top: Reg<F32>) -> Reg<F32> {
    let d = b.sub(x, top);
    let e = b.ex2(d);
    let empty = b.setp::<F32>(Cmp::Eq, top, f32::NEG_INFINITY);
    b.selp(0.0f32, e, empty)
}

pub(super) fn build_chunk(name: &str, dim: u32, ty: FloatType, paged: bool) -> KernelIr {
    let per_lane = (dim / 32) as usize;
    let mut b = KernelBuilder::new(name);
    b.max_threads(THREADS);
    let gq = b.param_ptr("q", PtxType::F32);
    let gk = b.param_ptr("k", ty.ptx());
    let gv = b.param_ptr("v", ty.ptx());
    let glens = b.param_ptr("lens", PtxType::U32);
    let table = paged.then(|| b.param_ptr("table", PtxType::U32));
    let gacc = b.param_ptr("part_acc", PtxType::F32);
    let gml = b.param_ptr("part_ml", PtxType::F32);
    let heads_q = b.param_u32("heads_q");
    let heads_kv = b.param_u32("heads_kv");
    // Contiguous: positions per head. Paged: table entries per sequence, the pool's
    // pages, log2 of the rows per page.
    let capacity = b.param_u32(if paged { "max_pages" } else { "capacity" });
    let paging = table.map(|table| {
        let pool = b.param_u32("pool_pages");
        let shift = b.param_u32("page_shift");
        (table, pool, shift)
    });
    let chunk = b.param_u32("chunk");
    let splits = b.param_u32("splits");
    let scale = b.param_f32("scale");
    let smem = b.shared_array("merge", WARPS * (dim + 2) * 4, 16);

    let t = b.tid_x();
    let lane = b.and(t, 31u32);
    let warp = b.shr(t, 5u32);
    // Heads fastest in launch order: the blocks reading one chunk of a key/value head
    // (its query heads) run together and share the rows in L2.
    let h = b.ctaid_x();
    let split = b.ctaid_y();
    let seq = b.special(SpecialReg::Ctaid(Dim::Z));
    let group = b.div_int(heads_q, heads_kv);
    let hkv = b.div_int(h, group);
    let lens_addr = elem_addr(&mut b, glens, seq, 4);
    let len = b.ld::<U32, U64>(Space::Global, lens_addr, 0);
    let limit = match paging {
        Some((_, _, shift)) => b.shl(capacity, shift),
        None => capacity,
    };
    let len = b.min(len, limit);
    let pages = paging.map(|(table, pool, shift)| {
        Pages::new(
            &mut b,
            table,
            (seq, capacity),
            (pool, shift),
            (hkv, heads_kv),
        )
    });
    let start = b.mul(split, chunk);
    let end = b.add(start, chunk);
    let end = b.min(end, len);

    // This lane's slice of the query, pre-scaled into the base-2 domain.
    let qrow = b.mad(seq, heads_q, h);
    let e0 = b.mul(lane, per_lane as u32);
    let qi = b.mad(qrow, dim, e0);
    let qa = elem_addr(&mut b, gq, qi, 4);
    let s2 = b.mul(scale, LOG2E);
    let qv: Vec<Reg<F32>> = load_row(&mut b, qa, per_lane, FloatType::F32)
        .into_iter()
        .map(|x| b.mul(x, s2))
        .collect();
    // Row `start + warp` of this head's cache, then 4 rows a step (contiguous: the
    // pointers advance; paged: each row's page is looked up).
    let first = match &pages {
        None => {
            let head_row = b.mad(seq, heads_kv, hkv);
            let row0 = b.mad(head_row, capacity, start);
            let row0 = b.add(row0, warp);
            b.mad(row0, dim, e0)
        }
        Some(pg) => {
            let p0 = b.add(start, warp);
            let row = pg.row(&mut b, p0);
            b.mad(row, dim, e0)
        }
    };
    let kp = elem_addr(&mut b, gk, first, ty.bytes());
    let vp = elem_addr(&mut b, gv, first, ty.bytes());
    // Paged: the pools' addresses of this lane's first element; a row adds row * dim.
    let lane_bases = pages.as_ref().map(|_| {
        let k = elem_addr(&mut b, gk, e0, ty.bytes());
        let v = elem_addr(&mut b, gv, e0, ty.bytes());
        (k, v)
    });

    let m = b.mov(f32::NEG_INFINITY);
    let l = b.mov(0.0f32);
    let acc: Vec<Reg<F32>> = (0..per_lane).map(|_| b.mov(0.0f32)).collect();
    let p0 = b.add(start, warp);
    // A warp step scores ROWS_PER_STEP rows, `WARPS` apart: their loads go out together
    // and their dependent chains (dot, shuffles, exponential) run side by side, where one
    // row a step waited on each chain in turn. A row past `end` reads the last row again
    // (no load is predicated: ptxas keeps a predicated load's zeroed registers live
    // beside the loaded ones), scores -inf and adds zeros, not its values (0 x inf would
    // be NaN).
    let last = b.sub(end, 1u32);
    b.for_loop(p0, end, WARPS * ROWS_PER_STEP, false, |b, p| {
        let rows: Vec<_> = (0..ROWS_PER_STEP)
            .map(|r| {
                let pr = b.add(p, r * WARPS);
                let valid = b.setp::<U32>(Cmp::Lt, pr, end);
                let pr = b.min(pr, last);
                let (ka, va) = match (&pages, lane_bases) {
                    // Paged: each row's own address (its page may differ).
                    (Some(pg), Some((lane_k, lane_v))) => {
                        let row = pg.row(b, pr);
                        let off = b.mul_wide(row, dim * ty.bytes());
                        (b.add(lane_k, off), b.add(lane_v, off))
                    }
                    _ => {
                        let d = b.sub(pr, p);
                        let off = b.mul_wide(d, dim * ty.bytes());
                        (b.add(kp, off), b.add(vp, off))
                    }
                };
                let kw = load_words(b, ka, per_lane, ty);
                let vw = load_words(b, va, per_lane, ty);
                let vw: Vec<Reg<U32>> = vw.into_iter().map(|w| b.selp(w, 0u32, valid)).collect();
                (valid, kw, vw)
            })
            .collect();
        let scores: Vec<Reg<F32>> = rows
            .iter()
            .map(|(valid, kw, _)| {
                let kv = widen(b, kw, ty);
                let mut dot = b.mul(qv[0], kv[0]);
                for i in 1..per_lane {
                    dot = b.fma(qv[i], kv[i], dot);
                }
                let s = warp_reduce(b, dot, super::helpers::add);
                b.selp(s, f32::NEG_INFINITY, *valid)
            })
            .collect();
        let mut m_new = m;
        for &s in &scores {
            m_new = max_nan(b, m_new, s);
        }
        let c = weight(b, m, m_new);
        let mut l2 = b.mul(l, c);
        let mut acc2: Vec<Reg<F32>> = acc.iter().map(|&a| b.mul(a, c)).collect();
        for (&s, (_, _, vw)) in scores.iter().zip(&rows) {
            let w = weight(b, s, m_new);
            l2 = b.add(l2, w);
            let vv = widen(b, vw, ty);
            for (a, &x) in acc2.iter_mut().zip(&vv) {
                *a = b.fma(w, x, *a);
            }
        }
        b.assign(l, l2);
        for (a, &a2) in acc.iter().zip(&acc2) {
            b.assign(*a, a2);
        }
        b.assign(m, m_new);
        if pages.is_none() {
            let adv = u64::from(ROWS_PER_STEP * WARPS * dim * ty.bytes());
            let kn = b.add(kp, adv);
            let vn = b.add(vp, adv);
            b.assign(kp, kn);
            b.assign(vp, vn);
        }
    });

    // Merge the four warps through shared memory: each stores (m, l, acc); every warp
    // then reads all four and warp 0 writes the chunk's partial.
    let lane0 = b.setp::<U32>(Cmp::Eq, lane, 0u32);
    let slot = b.mul(warp, (dim + 2) * 4);
    let slot = b.add(smem, slot);
    b.predicated(lane0, |b| {
        b.st::<F32, U32>(Space::Shared, slot, 0, m);
        b.st::<F32, U32>(Space::Shared, slot, 4, l);
    });
    // Element i of every lane at i * 32 + lane: consecutive lanes, distinct banks.
    let mine = b.mad(lane, 4u32, slot);
    for (i, &a) in acc.iter().enumerate() {
        b.st::<F32, U32>(Space::Shared, mine, 8 + 128 * i as i64, a);
    }
    b.bar_sync();
    let first_warp = b.setp::<U32>(Cmp::Eq, warp, 0u32);
    b.if_then(first_warp, false, |b| {
        let ms: Vec<Reg<F32>> = (0..WARPS)
            .map(|w| b.ld::<F32, U32>(Space::Shared, smem, (w * (dim + 2) * 4) as i64))
            .collect();
        let mut big = ms[0];
        for &x in &ms[1..] {
            big = max_nan(b, big, x);
        }
        let total = b.mov(0.0f32);
        let out: Vec<Reg<F32>> = (0..per_lane).map(|_| b.mov(0.0f32)).collect();
        let lane_base = b.mad(lane, 4u32, smem);
        for (w, &mw) in ms.iter().enumerate() {
            let base = (w as u32 * (dim + 2) * 4) as i64;
            let f = weight(b, mw, big);
            let lw = b.ld::<F32, U32>(Space::Shared, smem, base + 4);
            let t2 = b.fma(lw, f, total);
            b.assign(total, t2);
            for (i, &o) in out.iter().enumerate() {
                let x = b.ld::<F32, U32>(Space::Shared, lane_base, base + 8 + 128 * i as i64);
                let o2 = b.fma(x, f, o);
                b.assign(o, o2);
            }
        }
        // part index (seq * heads_q + h) * splits + split
        let part = b.mad(qrow, splits, split);
        let ai = b.mad(part, dim, e0);
        let aa = elem_addr(b, gacc, ai, 4);
        store_slice(b, aa, &out);
        let ma = elem_addr(b, gml, part, 8);
        b.predicated(lane0, |b| {
            b.st_vec::<F32, U64>(Space::Global, ma, 0, &[big, total])
        });
    });
    b.ret();
    b.finish()
}

fn build_merge(name: &str, dim: u32) -> KernelIr {
    let mut b = KernelBuilder::new(name);
    b.max_threads(256);
    let gacc = b.param_ptr("part_acc", PtxType::F32);
    let gml = b.param_ptr("part_ml", PtxType::F32);
    let gout = b.param_ptr("out", PtxType::F32);
    let splits = b.param_u32("splits");
    // One block per (head, sequence) row of `out`, one thread per element.
    let e = b.tid_x();
    let row = b.ctaid_x();
    let first = b.mul(row, splits);
    let ml = elem_addr(&mut b, gml, first, 8);
    let big = b.mov(f32::NEG_INFINITY);
    b.for_loop(0u32, splits, 1u32, true, |b, s| {
        let a = elem_addr(b, ml, s, 8);
        let x = b.ld::<F32, U64>(Space::Global, a, 0);
        let y = max_nan(b, big, x);
        b.assign(big, y);
    });
    let total = b.mov(0.0f32);
    let acc = b.mov(0.0f32);
    let ai = b.mad(first, dim, e);
    let ap = elem_addr(&mut b, gacc, ai, 4);
    let mlp = b.mov(ml);
    b.for_loop(0u32, splits, 1u32, true, |b, _s| {
        let v = b.ld_vec::<F32, U64, 2>(Space::Global, mlp, 0);
        let f = weight(b, v[0], big);
        let t2 = b.fma(v[1], f, total);
        b.assign(total, t2);
        let x = b.ld::<F32, U64>(Space::Global, ap, 0);
        let a2 = b.fma(x, f, acc);
        b.assign(acc, a2);
        let n1 = b.add(mlp, 8u64);
        b.assign(mlp, n1);
        let n2 = b.add(ap, (dim * 4) as u64);
        b.assign(ap, n2);
    });
    // No position at all gives zeros; a NaN total (a NaN score) stays NaN.
    let none = b.setp::<F32>(Cmp::Eq, total, 0.0f32);
    let q = b.div(acc, total);
    let r = b.selp(0.0f32, q, none);
    let oi = b.mad(row, dim, e);
    let oa = elem_addr(&mut b, gout, oi, 4);
    b.st::<F32, U64>(Space::Global, oa, 0, r);
    b.ret();
    b.finish()
}

fn store_slice(b: &mut KernelBuilder, addr: Reg<U64>, v: &[Reg<F32>]) {
    if v.len() == 2 {
        return b.st_vec::<F32, U64>(Space::Global, addr, 0, v);
    }
    for (i, c) in v.chunks(4).enumerate() {
        b.st_vec::<F32, U64>(Space::Global, addr, 16 * i as i64, c);
    }
}

impl Kernel for DecodeChunkKernel {
    fn name(&self) -> String {
        format!("trueno_decode_attn_d{}_{}", self.0, self.1.name())
    }
    fn family(&self) -> Family {
        Family::Attention
    }
    fn build(&self) -> KernelIr {
        build_chunk(&self.name(), self.0, self.1, false)
    }
    /// `[splits, heads_q, batch]`.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        check_dims(&self.name(), dims, 3)?;
        let (splits, heads, batch) = (dims[0], dims[1], dims[2]);
        if heads > i32::MAX as usize || splits > 65535 || batch > 65535 {
            return shape_err(
                &self.name(),
                format!("grid {dims:?} over the hardware limits"),
            );
        }
        Ok(LaunchConfig {
            grid: (heads as u32, splits as u32, batch as u32),
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
        Ok(LaunchConfig::linear(dims[0] as u32, self.0))
    }
}

/// Every decode-attention configuration.
pub fn all() -> Vec<Box<dyn Kernel>> {
    let mut v: Vec<Box<dyn Kernel>> = Vec::new();
    for d in HEAD_DIMS {
        for t in FloatType::ALL {
            v.push(Box::new(DecodeChunkKernel(d, t)));
        }
        v.push(Box::new(DecodeMergeKernel(d)));
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
        assert_eq!(s.chunk(132), 256);
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
