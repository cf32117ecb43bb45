//! The chunk kernel of decode attention (contiguous and paged caches): one block per
//! (chunk of positions, `heads` query heads of one key/value group, sequence) keeps an
//! online softmax per head over its chunk and writes each head's partial for the merge.
//!
//! A block serves several query heads of a group so that each cache row crosses from L2
//! to the SM once for all of them: with one head a block, the four blocks of a Llama
//! group each read the group's rows, and at 32K-128K that L2 traffic (four times the
//! cache) was what held the kernel to 0.63-0.76x of SDPA's flash-decoding. Keys and values
//! are loaded once a row and shared by the heads; each head keeps its own scores, sums
//! and accumulators. A row is read by a row group of 32 or 16 lanes (see
//! [`lanes_per_row`]), each lane holding `dim / lanes` consecutive elements.

use super::attention::{THREADS, WARPS, weight};
use super::float_type::{FloatType, load_row, load_words, widen};
use super::helpers::{elem_addr, group_reduce, max_nan_of};
use super::math::LOG2E;
use super::paged::Pages;
use crate::ptx::ir::{Dim, SpecialReg};
use crate::ptx::{Cmp, F32, KernelBuilder, KernelIr, PtxType, Reg, Space, U32, U64};

/// Cache rows a warp scores per step (see the loop below): four rows of 32 lanes, or two
/// rows for each of its two row groups of 16 (each lane then loads twice the bytes a row,
/// so the bytes in flight a lane stay the same).
const ROWS_PER_STEP: u32 = 4;

/// Lanes that share one cache row: 16 (two rows a warp instruction) on a contiguous cache
/// at head dimension 64 or 128 (each head's query and accumulator slices, twice as long,
/// take up to 64 registers each at eight heads of 128: 218-224 in all, two blocks a SM),
/// else 32. A row's softmax bookkeeping (max, exponential, the shuffle sum, four steps
/// instead of five) runs once a lane for its own row, so two rows a warp instruction
/// halve it per row: on an H100, bf16 32K 76 -> 71 us, 128K 251 -> 233, a head a block
/// (28/4 heads) 88 -> 71, eight heads a block (64/8) 139 -> 114. Paged caches keep 32:
/// there the same split ran slower at 32K (bf16 85 -> 98 us, f32 111 -> 135), with two
/// page lookups a row group a step.
fn lanes_per_row(dim: u32, paged: bool) -> u32 {
    if !paged && dim <= 128 { 16 } else { 32 }
}

/// A paged cache's parameters: the table, the pool's pages, log2 of the rows per page.
pub(super) type Paging = Option<(Reg<U64>, Reg<U32>, Reg<U32>)>;

/// The parameters every chunk kernel takes (SIMT and tensor-core, contiguous and paged),
/// in launch order: `q`, `k`, `v`, `lens`, [`table`], `part_acc`, `part_ml`, `heads_q`,
/// `heads_kv`, `capacity` or `max_pages`, [`pool_pages`, `page_shift`], `chunk`,
/// `splits`, `scale`.
pub(super) struct ChunkParams {
    pub q: Reg<U64>,
    pub k: Reg<U64>,
    pub v: Reg<U64>,
    pub lens: Reg<U64>,
    pub part_acc: Reg<U64>,
    pub part_ml: Reg<U64>,
    pub heads_q: Reg<U32>,
    pub heads_kv: Reg<U32>,
    /// Contiguous: positions per head. Paged: table entries per sequence.
    pub capacity: Reg<U32>,
    pub paging: Paging,
    pub chunk: Reg<U32>,
    pub splits: Reg<U32>,
    pub scale: Reg<F32>,
}

impl ChunkParams {
    /// Declares them for a cache of element type `cache`.
    pub fn declare(b: &mut KernelBuilder, cache: PtxType, paged: bool) -> ChunkParams {
        let q = b.param_ptr("q", PtxType::F32);
        let k = b.param_ptr("k", cache);
        let v = b.param_ptr("v", cache);
        let lens = b.param_ptr("lens", PtxType::U32);
        let table = paged.then(|| b.param_ptr("table", PtxType::U32));
        let part_acc = b.param_ptr("part_acc", PtxType::F32);
        let part_ml = b.param_ptr("part_ml", PtxType::F32);
        let heads_q = b.param_u32("heads_q");
        let heads_kv = b.param_u32("heads_kv");
        let capacity = b.param_u32(if paged { "max_pages" } else { "capacity" });
        let paging = table.map(|table| {
            let pool = b.param_u32("pool_pages");
            let shift = b.param_u32("page_shift");
            (table, pool, shift)
        });
        ChunkParams {
            q,
            k,
            v,
            lens,
            part_acc,
            part_ml,
            heads_q,
            heads_kv,
            capacity,
            paging,
            chunk: b.param_u32("chunk"),
            splits: b.param_u32("splits"),
            scale: b.param_f32("scale"),
        }
    }
}

/// Positions of sequence `seq` attended: `lens[seq]`, capped at what the cache holds
/// (`capacity`, or `max_pages` pages of `1 << page_shift` rows).
pub(super) fn seq_len(
    b: &mut KernelBuilder,
    lens: Reg<U64>,
    seq: Reg<U32>,
    (capacity, paging): (Reg<U32>, Paging),
) -> Reg<U32> {
    let lens_addr = elem_addr(b, lens, seq, 4);
    let len = b.ld::<U32, U64>(Space::Global, lens_addr, 0);
    let limit = match paging {
        Some((_, _, shift)) => b.shl(capacity, shift),
        None => capacity,
    };
    b.min(len, limit)
}

/// Builds the chunk kernel for head dimension `dim`, cache type `ty`, `heads` query heads
/// a block (a divisor of every group it is launched for), contiguous or `paged`.
pub(super) fn build_chunk(
    name: &str,
    dim: u32,
    ty: FloatType,
    paged: bool,
    heads: u32,
) -> KernelIr {
    let lanes = lanes_per_row(dim, paged);
    // Row groups of `lanes` lanes, `groups` of them a warp, `row_groups` in the block.
    let groups = 32 / lanes;
    let row_groups = WARPS * groups;
    let per_lane = (dim / lanes) as usize;
    let rows_per_step = ROWS_PER_STEP / groups;
    let nh = heads as usize;
    let mut b = KernelBuilder::new(name);
    b.overlap_neighbours();
    b.max_threads(THREADS);
    let ChunkParams {
        q: gq,
        k: gk,
        v: gv,
        lens: glens,
        part_acc: gacc,
        part_ml: gml,
        heads_q,
        heads_kv,
        capacity,
        paging,
        chunk,
        splits,
        scale,
    } = ChunkParams::declare(&mut b, ty.ptx(), paged);
    // One (m, l, acc) slot per row group and head.
    let slot_bytes = (dim + 2) * 4;
    let smem = b.shared_array("merge", row_groups * heads * slot_bytes, 16);

    let t = b.tid_x();
    let lane = b.and(t, 31u32);
    let warp = b.shr(t, 5u32);
    // `sub`: the lane within its row group; `rg`: the row group within the block;
    // `half`: the row group within its warp.
    let (sub, rg, half) = if lanes == 32 {
        (lane, warp, None)
    } else {
        let sub = b.and(lane, lanes - 1);
        let half = b.shr(lane, lanes.trailing_zeros());
        (sub, b.mad(warp, groups, half), Some(half))
    };
    // Head tiles fastest in launch order: the blocks of one chunk of a sequence run
    // together.
    let tile = b.ctaid_x();
    let split = b.ctaid_y();
    let seq = b.special(SpecialReg::Ctaid(Dim::Z));
    let h0 = if heads == 1 { tile } else { b.mul(tile, heads) };
    let group = b.div_int(heads_q, heads_kv);
    let hkv = b.div_int(h0, group);
    let len = seq_len(&mut b, glens, seq, (capacity, paging));
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

    // This lane's slice of each head's query, pre-scaled into the base-2 domain.
    let qrow = b.mad(seq, heads_q, h0);
    let e0 = b.mul(sub, per_lane as u32);
    let qi = b.mad(qrow, dim, e0);
    let qa = elem_addr(&mut b, gq, qi, 4);
    let s2 = b.mul(scale, LOG2E);
    let qv: Vec<Vec<Reg<F32>>> = (0..heads)
        .map(|j| {
            let a = match j {
                0 => qa,
                _ => b.add(qa, u64::from(j * dim * 4)),
            };
            load_row(&mut b, a, per_lane, FloatType::F32)
                .into_iter()
                .map(|x| b.mul(x, s2))
                .collect()
        })
        .collect();
    // The loop runs on the warp's first row, `start + lead`, so every lane of a warp takes
    // the same trip count (the shuffles below name the whole warp): a row group whose
    // rows run past `end` scores them -inf, as below.
    let lead = match half {
        None => warp,
        Some(_) => b.mul(warp, groups),
    };
    // Contiguous: this lane's first element of that row in each cache; the pointers
    // advance a step at a time. Paged: of the pools, a row adding row * dim (each row's
    // page is looked up).
    let bases = match &pages {
        None => {
            let head_row = b.mad(seq, heads_kv, hkv);
            let row0 = b.mad(head_row, capacity, start);
            let row0 = b.add(row0, lead);
            b.mad(row0, dim, e0)
        }
        Some(_) => e0,
    };
    let kp = elem_addr(&mut b, gk, bases, ty.bytes());
    let vp = elem_addr(&mut b, gv, bases, ty.bytes());

    let m: Vec<Reg<F32>> = (0..nh).map(|_| b.mov(f32::NEG_INFINITY)).collect();
    let l: Vec<Reg<F32>> = (0..nh).map(|_| b.mov(0.0f32)).collect();
    let acc: Vec<Vec<Reg<F32>>> = (0..nh)
        .map(|_| (0..per_lane).map(|_| b.mov(0.0f32)).collect())
        .collect();
    let p0 = b.add(start, lead);
    // A row group's step scores `rows_per_step` rows, `row_groups` apart: their loads go
    // out together and their dependent chains (dot, shuffles, exponential) run side by
    // side, where one row a step waited on each chain in turn. A row past `end` reads the
    // last row again (no load is predicated: ptxas keeps a predicated load's zeroed
    // registers live beside the loaded ones), scores -inf and adds zeros, not its values
    // (0 x inf would be NaN).
    let last = b.sub(end, 1u32);
    b.for_loop(p0, end, row_groups * rows_per_step, false, |b, pw| {
        // This row group's first row of the step.
        let p = match half {
            None => pw,
            Some(h) => b.add(pw, h),
        };
        let rows: Vec<_> = (0..rows_per_step)
            .map(|r| {
                let pr = b.add(p, r * row_groups);
                let valid = b.setp::<U32>(Cmp::Lt, pr, end);
                let pr = b.min(pr, last);
                let (ka, va) = match &pages {
                    // Paged: each row's own address (its page may differ).
                    Some(pg) => {
                        let row = pg.row(b, pr);
                        let off = b.mul_wide(row, dim * ty.bytes());
                        (b.add(kp, off), b.add(vp, off))
                    }
                    None => {
                        let d = b.sub(pr, pw);
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
        // Each head widens the words again where it uses them: ptxas merges the copies,
        // and one head a block keeps the live ranges it had before blocks served several.
        // Each (row, head) sum has its own five-shuffle butterfly: summing them together
        // (each step halving the values a lane carries, 32 shuffles for 16 sums instead of
        // 80) ran slower, 77 -> 87 us at 32K: one long dependent tree where the separate
        // chains overlap.
        for j in 0..nh {
            let scores: Vec<Reg<F32>> = rows
                .iter()
                .map(|(valid, kw, _)| {
                    let kv = widen(b, kw, ty);
                    let mut dot = b.mul(qv[j][0], kv[0]);
                    for i in 1..per_lane {
                        dot = b.fma(qv[j][i], kv[i], dot);
                    }
                    let s = group_reduce(b, dot, super::helpers::add, lanes);
                    b.selp(s, f32::NEG_INFINITY, *valid)
                })
                .collect();
            let m_new = max_nan_of(b, m[j], scores.iter().copied());
            let c = weight(b, m[j], m_new);
            let mut l2 = b.mul(l[j], c);
            let mut acc2: Vec<Reg<F32>> = acc[j].iter().map(|&a| b.mul(a, c)).collect();
            for (&s, (_, _, vw)) in scores.iter().zip(&rows) {
                let w = weight(b, s, m_new);
                l2 = b.add(l2, w);
                let vv = widen(b, vw, ty);
                for (a, &x) in acc2.iter_mut().zip(&vv) {
                    *a = b.fma(w, x, *a);
                }
            }
            b.assign(l[j], l2);
            for (a, &a2) in acc[j].iter().zip(&acc2) {
                b.assign(*a, a2);
            }
            b.assign(m[j], m_new);
        }
        if pages.is_none() {
            let adv = u64::from(rows_per_step * row_groups * dim * ty.bytes());
            let kn = b.add(kp, adv);
            let vn = b.add(vp, adv);
            b.assign(kp, kn);
            b.assign(vp, vn);
        }
    });

    // Merge the row groups through shared memory: each stores (m, l, acc) per head; then
    // warp `j % WARPS` reads head j's `row_groups` slots and writes its chunk partial.
    let lane0 = b.setp::<U32>(Cmp::Eq, lane, 0u32);
    let group_first = match half {
        None => lane0,
        Some(_) => b.setp::<U32>(Cmp::Eq, sub, 0u32),
    };
    let slot = b.mul(rg, slot_bytes);
    let slot = b.add(smem, slot);
    let mut mine = None;
    for j in 0..nh {
        // Head j's slots follow head j - 1's, `row_groups` of them.
        let at = (j as u32 * row_groups * slot_bytes) as i64;
        let (mj, lj) = (m[j], l[j]);
        b.predicated(group_first, |b| {
            b.st::<F32, U32>(Space::Shared, slot, at, mj);
            b.st::<F32, U32>(Space::Shared, slot, at + 4, lj);
        });
        // Element i of every lane at i * lanes + sub: consecutive lanes, distinct banks.
        let mine = *mine.get_or_insert_with(|| b.mad(sub, 4u32, slot));
        for (i, &a) in acc[j].iter().enumerate() {
            let off = at + 8 + (4 * lanes) as i64 * i as i64;
            b.st::<F32, U32>(Space::Shared, mine, off, a);
        }
    }
    b.bar_sync();
    // The first output element this lane merges (see `share` below).
    let e_out = match half {
        None => e0,
        Some(h) => b.mad(h, dim / 32, e0),
    };
    for j in 0..heads {
        let merger = b.setp::<U32>(Cmp::Eq, warp, j % WARPS);
        b.if_then(merger, false, |b| {
            let head = (j * row_groups * slot_bytes) as i64;
            let ms: Vec<Reg<F32>> = (0..row_groups)
                .map(|w| b.ld::<F32, U32>(Space::Shared, smem, head + (w * slot_bytes) as i64))
                .collect();
            let big = max_nan_of(b, ms[0], ms[1..].iter().copied());
            let total = b.mov(0.0f32);
            // Each lane merges dim / 32 elements: the `half`-th share of its row-group
            // lane's slice (all of it with one group a warp).
            let share = (dim / 32) as usize;
            let out: Vec<Reg<F32>> = (0..share).map(|_| b.mov(0.0f32)).collect();
            let lane_base = b.mad(sub, 4u32, smem);
            let lane_base = match half {
                None => lane_base,
                // Element (sub, half * share + i) at (half * share + i) * lanes + sub.
                Some(h) => {
                    let skip = b.mul(h, (share as u32) * lanes * 4);
                    b.add(lane_base, skip)
                }
            };
            for (w, &mw) in ms.iter().enumerate() {
                let base = head + (w as u32 * slot_bytes) as i64;
                let f = weight(b, mw, big);
                let lw = b.ld::<F32, U32>(Space::Shared, smem, base + 4);
                let t2 = b.fma(lw, f, total);
                b.assign(total, t2);
                for (i, &o) in out.iter().enumerate() {
                    let off = base + 8 + (4 * lanes) as i64 * i as i64;
                    let x = b.ld::<F32, U32>(Space::Shared, lane_base, off);
                    let o2 = b.fma(x, f, o);
                    b.assign(o, o2);
                }
            }
            // part index (seq * heads_q + h0 + j) * splits + split
            let row = if j == 0 { qrow } else { b.add(qrow, j) };
            let part = b.mad(row, splits, split);
            let ai = b.mad(part, dim, e_out);
            let aa = elem_addr(b, gacc, ai, 4);
            store_slice(b, aa, &out);
            let ma = elem_addr(b, gml, part, 8);
            b.predicated(lane0, |b| {
                b.st_vec::<F32, U64>(Space::Global, ma, 0, &[big, total])
            });
        });
    }
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

#[cfg(test)]
mod tests {
    use super::lanes_per_row;

    #[test]
    fn two_rows_a_warp_on_contiguous_caches_up_to_dimension_128() {
        // (dim, paged) -> lanes a row, from the rule: contiguous and dim <= 128.
        for (dim, paged, want) in [
            (64, false, 16),
            (128, false, 16),
            (256, false, 32),
            (64, true, 32),
            (128, true, 32),
        ] {
            assert_eq!(lanes_per_row(dim, paged), want, "d{dim} paged {paged}");
        }
    }
}
