//! Decode attention's chunk kernel on the tensor cores, for 16-bit caches: the query
//! heads of one key/value group are the rows of an `mma.sync.m16n8k16` product, so a
//! block scores 16 heads against a cache row in a few products where the SIMT kernel
//! (`decode_chunk.rs`) spends some 34 instructions a (row, head) per warp. That kernel
//! was bound by those instructions with groups of eight (Llama 3 70B: 0.75-0.90x SDPA's
//! flash-decoding on an H100) and by a page lookup per row on paged caches; here the
//! block copies whole tiles of cache rows into shared memory (`cp.async`, two to four
//! stages in flight), one lookup per 16-byte chunk, and the products run far under the
//! memory time.
//!
//! The f32 query and the probabilities each enter the products as two 16-bit parts, `x =
//! hi + lo` (`hi` the 16-bit rounding of `x`, `lo` that of the rest), and every product
//! is taken twice, once per part, into f32 accumulators: the keys and values are the
//! cache's own 16-bit numbers, so the scores and outputs keep about 16 significant bits
//! of the query and the weights where one part would keep 8 (bf16) and miss the f32
//! path's tolerance. The products cost a small part of the memory time even doubled.
//!
//! A block: one sequence, one chunk of its positions, up to 16 query heads of one
//! group (a group of more than 16 heads takes several blocks). Each of its four warps
//! takes 16 rows of every 64-row tile, keeps an online softmax per head (base 2, as
//! FlashAttention's kernels: `rows.rs`) and the weighted value sum in accumulators; at
//! the end the warps merge through shared memory and each head's partial (max, sum,
//! accumulator) goes to the scratch the merge kernel reads, exactly as the SIMT
//! kernel's. Heads past the group are zero rows, never stored; rows past the chunk land
//! as zeros and score -inf, so a neighbour's NaN cannot reach an output.

use super::attention::{THREADS, WARPS, weight};
use super::decode_chunk::{ChunkParams, seq_len};
use super::flash_attention::build::{frag_imm, frag_offsets, tile_copy};
use super::flash_attention::rows::{Frags, online_softmax, rescale, sat_sub};
use super::float_type::{FloatType, widen};
use super::gemm_mma::HalfType;
use super::helpers::{elem_addr, max_nan_of, next_stage};
use super::math::LOG2E;
use super::paged::Pages;
use super::{Family, Kernel, LaunchConfig, blocks_for, check_dims};
use crate::error::Result;
use crate::ptx::ir::{Dim, ShflMode, SpecialReg};
use crate::ptx::{Cmp, F32, KernelBuilder, KernelIr, Reg, Space, U32, U64};

/// Query heads a block: the M of one `m16n8k16` product.
pub const HEAD_ROWS: u32 = 16;

/// Cache rows a stage holds: 16 for each warp.
pub(super) const TILE_ROWS: u32 = WARPS * 16;

/// Stages of key and value tiles in flight: 64 KB of them at head dimension 64 and 128
/// (three blocks a SM), two stages of 64 KB at 256 (one). At 128, three stages
/// (two blocks a SM) measured 0-4% slower than two on an H100 (128K: 213 against 209
/// us), so two.
fn stages(dim: u32) -> u32 {
    match dim {
        64 => 4,
        _ => 2,
    }
}

/// Dynamic shared memory: the query's two parts (16 rows each), then the stages.
pub fn shared_bytes(dim: u32) -> u32 {
    (2 * HEAD_ROWS + stages(dim) * 2 * TILE_ROWS) * dim * 2
}

/// Blocks a group of `group` query heads takes.
pub fn tiles_per_group(group: usize) -> usize {
    group.div_ceil(HEAD_ROWS as usize)
}

/// The tensor-core chunk kernel for one head dimension and 16-bit cache type, contiguous
/// or paged: the SIMT chunk kernel's parameters (`q`, `k`, `v`, `lens`, `table`,
/// `part_acc`, `part_ml`, `heads_q`, `heads_kv`, `capacity` or `max_pages`, [`pool_pages`,
/// `page_shift`], `chunk`, `splits`, `scale`) and partials.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeMmaKernel {
    /// Head dimension: 64, 128 or 256.
    pub dim: u32,
    /// The caches' element type.
    pub ty: HalfType,
    /// Paged pools (`[pool_pages, heads_kv, page_size, dim]` through a block table).
    pub paged: bool,
}

impl Kernel for DecodeMmaKernel {
    fn name(&self) -> String {
        let paged = if self.paged { "_paged" } else { "" };
        format!(
            "trueno_decode_attn_mma_d{}_{}{paged}",
            self.dim,
            self.ty.name()
        )
    }
    fn family(&self) -> Family {
        Family::DecodeMma
    }
    fn build(&self) -> KernelIr {
        build(&self.name(), self.dim, self.ty, self.paged)
    }
    /// `[splits, head_tiles, batch]`, `head_tiles` = `heads_kv * tiles_per_group(group)`.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        let name = self.name();
        check_dims(&name, dims, 3)?;
        let gy = blocks_for(&name, dims[0], 1, 65535)?;
        let gx = blocks_for(&name, dims[1], 1, i32::MAX as u32)?;
        let gz = blocks_for(&name, dims[2], 1, 65535)?;
        Ok(LaunchConfig {
            grid: (gx, gy, gz),
            block: (THREADS, 1, 1),
            shared_bytes: shared_bytes(self.dim),
        })
    }
}

/// Every configuration: head dimensions 64, 128, 256; bf16 and f16; both layouts.
pub fn all() -> Vec<Box<dyn Kernel>> {
    let mut v: Vec<Box<dyn Kernel>> = Vec::new();
    for dim in super::attention::HEAD_DIMS {
        for ty in [HalfType::Bf16, HalfType::F16] {
            for paged in [false, true] {
                v.push(Box::new(DecodeMmaKernel { dim, ty, paged }));
            }
        }
    }
    v
}

/// `x` as two 16-bit parts `hi + lo` packed in pairs: `hi` each value rounded, `lo` the
/// rounding of what `hi` missed. `xs` holds pairs (element 0 in the low half).
fn split_pairs(
    b: &mut KernelBuilder,
    ty: HalfType,
    xs: &[Reg<F32>],
) -> (Vec<Reg<U32>>, Vec<Reg<U32>>) {
    let ft = FloatType::from(ty);
    let pt = ty.ptx();
    let mut his = Vec::new();
    let mut los = Vec::new();
    for pair in xs.chunks(2) {
        let hi = b.cvt_pack(pt, pair[0], pair[1]);
        let back = widen(b, &[hi], ft);
        let r0 = b.sub(pair[0], back[0]);
        let r1 = b.sub(pair[1], back[1]);
        his.push(hi);
        los.push(b.cvt_pack(pt, r0, r1));
    }
    (his, los)
}

/// Where a tile's cache rows are: the byte offset of this thread's chunk of the first
/// row of the chunk (contiguous), or a lookup per row (paged).
enum CacheRows {
    Contiguous(Reg<U64>),
    Paged(Pages),
}

fn build(name: &str, dim: u32, ty: HalfType, paged: bool) -> KernelIr {
    let pt = ty.ptx();
    let row_bytes = dim * 2;
    let cpr = dim / 8;
    let stages = stages(dim);
    let tile_bytes = TILE_ROWS * row_bytes;
    let stage_bytes = 2 * tile_bytes;
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
    } = ChunkParams::declare(&mut b, pt, paged);
    let smem = b.dynamic_shared();

    let t = b.tid_x();
    let lane = b.and(t, 31u32);
    let warp = b.shr(t, 5u32);
    // Tiles of a group fastest in launch order, then its key/value head.
    let tile = b.ctaid_x();
    let split = b.ctaid_y();
    let seq = b.special(SpecialReg::Ctaid(Dim::Z));
    let group = b.div_int(heads_q, heads_kv);
    let per_group = b.add(group, HEAD_ROWS - 1);
    let per_group = b.shr(per_group, HEAD_ROWS.trailing_zeros());
    let hkv = b.div_int(tile, per_group);
    let first_of_group = b.mul(hkv, per_group);
    let sub = b.sub(tile, first_of_group);
    let sub_head = b.mul(sub, HEAD_ROWS);
    let h0 = b.mad(hkv, group, sub_head);
    let left = b.sub(group, sub_head);
    let heads = b.min(left, HEAD_ROWS);
    let len = seq_len(&mut b, glens, seq, (capacity, paging));
    let start = b.mul(split, chunk);
    let end = b.add(start, chunk);
    let end = b.min(end, len);
    let keys = sat_sub(&mut b, end, start);
    let n_tiles = b.add(keys, TILE_ROWS - 1);
    let n_tiles = b.shr(n_tiles, TILE_ROWS.trailing_zeros());

    // The copies: this thread's chunk of rows `copy.row + pass * pass_rows` of a tile.
    // Contiguous: row `start + r` of this head's `capacity` rows; paged: looked up.
    let q_hi = smem;
    let stage0 = b.add(smem, 2 * HEAD_ROWS * row_bytes);
    let copy = tile_copy(&mut b, t, dim);
    let col = b.cvt::<U64, U32>(copy.col_bytes, None);
    let rows_at = match paging {
        Some((table, pool, shift)) => CacheRows::Paged(Pages::new(
            &mut b,
            table,
            (seq, capacity),
            (pool, shift),
            (hkv, heads_kv),
        )),
        None => {
            let head_row = b.mad(seq, heads_kv, hkv);
            let row0 = b.mad(head_row, capacity, start);
            let row0 = b.add(row0, copy.row);
            let off = b.mul_wide(row0, row_bytes);
            CacheRows::Contiguous(b.add(off, col))
        }
    };
    let last = b.sub(end, 1u32);
    // Issues tile `j`'s keys and values into the stage at `dst`; rows at or past `end`
    // land as zeros without a read.
    let issue = |b: &mut KernelBuilder, j: Reg<U32>, dst: Reg<U32>| {
        let first = b.mul(j, TILE_ROWS);
        match &rows_at {
            CacheRows::Contiguous(off) => {
                let skip = b.mul_wide(first, row_bytes);
                let off = b.add(*off, skip);
                let valid = b.sub(keys, first);
                let step = b.mov(u64::from(copy.pass_rows * row_bytes));
                for (g, dst) in [(gk, dst), (gv, b.add(dst, tile_bytes))] {
                    let src = b.add(g, off);
                    copy.issue(b, dst, src, step, TILE_ROWS, dim, valid, g);
                }
            }
            CacheRows::Paged(pg) => {
                let p0 = b.add(start, first);
                let p0 = b.add(p0, copy.row);
                // Every pass's lookup first: their loads go out together. A row past the
                // chunk reads nothing (0 bytes) from the pool's start (offset 0), its
                // predicate gone at once (eight live would outnumber the hardware's).
                let rows: Vec<_> = (0..TILE_ROWS / copy.pass_rows)
                    .map(|pass| {
                        let p = b.add(p0, pass * copy.pass_rows);
                        let ok = b.setp::<U32>(Cmp::Lt, p, end);
                        let p = b.min(p, last);
                        let row = pg.row(b, p);
                        let off = b.mul_wide(row, row_bytes);
                        let off = b.add(off, col);
                        let bytes = b.selp::<U32>(16u32, 0u32, ok);
                        (bytes, b.selp::<U64>(off, 0u64, ok))
                    })
                    .collect();
                for (pass, (bytes, off)) in rows.into_iter().enumerate() {
                    for (g, tile_off) in [(gk, 0), (gv, tile_bytes)] {
                        let from = b.add(g, off);
                        let d = b.add(dst, tile_off);
                        let d = copy.chunk_dst(b, d, pass as u32, dim);
                        b.cp_async_16(d, from, bytes);
                    }
                }
            }
        }
    };
    for s in 0..stages - 1 {
        let ok = b.setp::<U32>(Cmp::Gt, n_tiles, s);
        let dst = b.add(stage0, s * stage_bytes);
        let j = b.mov(s);
        b.if_then(ok, true, |b| issue(b, j, dst));
        b.cp_async_commit();
    }

    // The query's two parts, rows = heads (zeros past the group), in the tiles' swizzle:
    // chunk c of row r at (c ^ (r % 8)) * 16.
    let qrow0 = b.mad(seq, heads_q, h0);
    for i in 0..(HEAD_ROWS * cpr) / THREADS {
        let idx = b.add(t, i * THREADS);
        let r = b.shr(idx, cpr.trailing_zeros());
        let c = b.and(idx, cpr - 1);
        let ok = b.setp::<U32>(Cmp::Lt, r, heads);
        let last_head = b.sub(heads, 1u32);
        let rr = b.min(r, last_head);
        let qi = b.add(qrow0, rr);
        let qi = b.mul(qi, dim);
        let qi = b.mad(c, 8u32, qi);
        let qa = elem_addr(&mut b, gq, qi, 4);
        let lo4 = b.ld_vec::<F32, U64, 4>(Space::Global, qa, 0);
        let hi4 = b.ld_vec::<F32, U64, 4>(Space::Global, qa, 16);
        let xs: Vec<Reg<F32>> = lo4
            .into_iter()
            .chain(hi4)
            .map(|x| b.selp::<F32>(x, 0.0f32, ok))
            .collect();
        let (his, los) = split_pairs(&mut b, ty, &xs);
        let sw = b.and(r, 7u32);
        let phys = b.xor(c, sw);
        let at = b.mul(r, row_bytes);
        let at = b.mad(phys, 16u32, at);
        let at = b.add(q_hi, at);
        b.st_vec::<U32, U32>(Space::Shared, at, 0, &his);
        b.st_vec::<U32, U32>(Space::Shared, at, (HEAD_ROWS * row_bytes) as i64, &los);
    }

    // Fragment addressing (FlashAttention's, `build.rs`): the query and V rows first,
    // K chunks first; this warp's 16 rows of each tile.
    let a_off = frag_offsets(&mut b, lane, dim, true);
    let k_off = frag_offsets(&mut b, lane, dim, false);
    let q_frag: [Reg<U32>; 4] = std::array::from_fn(|i| b.add(a_off[i], q_hi));
    let warp_rows = b.mul(warp, 16 * row_bytes);
    let g = b.shr(lane, 2u32);
    let tq = b.and(lane, 3u32);
    let col0 = b.shl(tq, 1u32);
    let m_run: Vec<Reg<F32>> = (0..2).map(|_| b.mov(f32::NEG_INFINITY)).collect();
    let l_run: Vec<Reg<F32>> = (0..2).map(|_| b.mov(0.0f32)).collect();
    let acc: Frags = vec![
        (0..dim / 8)
            .map(|_| std::array::from_fn(|_| b.mov(0.0f32)))
            .collect(),
    ];
    let scale_log2 = b.mul(scale, LOG2E);
    // The ring's read and write stages, as offsets from the first.
    let read = b.mov(0u32);
    let write = b.mov((stages - 1) * stage_bytes);

    b.for_loop(0u32, n_tiles, 1u32, true, |b, j| {
        // Tile j (and the query) landed; every warp is done with the stage the next
        // copies overwrite.
        b.cp_async_wait(stages - 2);
        b.bar_sync();
        let nj = b.add(j, stages - 1);
        let more = b.setp::<U32>(Cmp::Lt, nj, n_tiles);
        let write_at = b.add(stage0, write);
        b.if_then(more, true, |b| issue(b, nj, write_at));
        b.cp_async_commit();

        // S = Q K^T over this warp's 16 rows, each k16 step once per query part.
        let read_at = b.add(stage0, read);
        let k_tile = b.add(read_at, warp_rows);
        let k_frag: [Reg<U32>; 4] = std::array::from_fn(|i| b.add(k_tile, k_off[i]));
        let s: Frags = vec![
            (0..2)
                .map(|_| std::array::from_fn(|_| b.mov(0.0f32)))
                .collect(),
        ];
        for ks in 0..dim / 16 {
            let qf = q_frag[ks as usize % 4];
            let qh = b.ldmatrix_x4(qf, frag_imm(ks, 0, dim), false);
            let ql = b.ldmatrix_x4(qf, frag_imm(ks, HEAD_ROWS, dim), false);
            let kb = b.ldmatrix_x4(k_frag[ks as usize % 4], frag_imm(ks, 0, dim), false);
            for (half, pair) in [[kb[0], kb[1]], [kb[2], kb[3]]].into_iter().enumerate() {
                for a in [qh, ql] {
                    let c = s[0][half];
                    let d = b.mma_m16n8k16(pt, a, pair, c);
                    for (x, y) in c.iter().zip(d) {
                        b.assign(*x, y);
                    }
                }
            }
        }

        // Rows past the chunk (the last tile only) score -inf.
        let first = b.mul(j, TILE_ROWS);
        let first = b.add(start, first);
        let tile_end = b.add(first, TILE_ROWS);
        let partial = b.setp::<U32>(Cmp::Gt, tile_end, end);
        b.if_then(partial, true, |b| {
            let key0 = b.mad(warp, 16u32, first);
            let key0 = b.add(key0, col0);
            let budget = sat_sub(b, end, key0);
            for (ni, frag) in s[0].iter().enumerate() {
                for (e, &x) in frag.iter().enumerate() {
                    let ok = b.setp::<U32>(Cmp::Gt, budget, (ni * 8 + e % 2) as u32);
                    let masked = b.selp::<F32>(x, f32::NEG_INFINITY, ok);
                    b.assign(x, masked);
                }
            }
        });

        let (corrs, same) = online_softmax(b, &s, (&m_run, &l_run), scale_log2);
        rescale(b, &acc, &corrs, same);
        // O += P V, the probabilities in two parts.
        // The accumulators of the two n8 tiles, in order, are the A operand's pairs
        // (`probs_a`): rows g then g + 8 of keys 0-7, then of keys 8-15.
        let ps: Vec<Reg<F32>> = s[0].iter().flat_map(|f| *f).collect();
        let (ph, pl) = split_pairs(b, ty, &ps);
        let (ph, pl): ([Reg<U32>; 4], [Reg<U32>; 4]) =
            ([ph[0], ph[1], ph[2], ph[3]], [pl[0], pl[1], pl[2], pl[3]]);
        let v_tile = b.add(read_at, tile_bytes);
        let v_tile = b.add(v_tile, warp_rows);
        let v_shift = b.sub(v_tile, q_hi);
        for dp in 0..dim / 16 {
            let vf = b.add(q_frag[dp as usize % 4], v_shift);
            let vb = b.ldmatrix_x4(vf, frag_imm(dp, 0, dim), true);
            for (half, pair) in [[vb[0], vb[1]], [vb[2], vb[3]]].into_iter().enumerate() {
                for a in [ph, pl] {
                    let c = acc[0][(2 * dp) as usize + half];
                    let d = b.mma_m16n8k16(pt, a, pair, c);
                    for (x, y) in c.iter().zip(d) {
                        b.assign(*x, y);
                    }
                }
            }
        }
        next_stage(b, read, stage_bytes, stages);
        next_stage(b, write, stage_bytes, stages);
    });
    b.cp_async_wait(0);
    b.bar_sync();

    // Merge the four warps: each row's (max, sum) per warp, then every warp's output
    // scaled to the block's max, then their sum.
    let ml = smem; // [warp][16][2] f32, over the query (no longer read)
    let accs = stage0; // [warp][16][dim + 4] f32, over the stages
    let acc_row = (dim + 4) * 4;
    let quad_first = b.setp::<U32>(Cmp::Eq, tq, 0u32);
    for half in 0..2u32 {
        let mut l = l_run[half as usize];
        for d in [1u32, 2] {
            let o = b.shfl(ShflMode::Bfly, l, d);
            l = b.add(l, o);
        }
        let r = b.add(g, half * 8);
        let slot = b.mad(warp, 16u32, r);
        let at = b.mad(slot, 8u32, ml);
        let m = m_run[half as usize];
        b.predicated(quad_first, |b| {
            b.st_vec::<F32, U32>(Space::Shared, at, 0, &[m, l])
        });
    }
    b.bar_sync();
    // Both rows' factors first: every read of the maxima before any store of outputs.
    let factors: Vec<Reg<F32>> = (0..2u32)
        .map(|half| {
            let r = b.add(g, half * 8);
            let at = b.mad(r, 8u32, ml);
            let ms: Vec<Reg<F32>> = (0..WARPS)
                .map(|w| b.ld::<F32, U32>(Space::Shared, at, (w * 16 * 8) as i64))
                .collect();
            let top = max_nan_of(&mut b, ms[0], ms[1..].iter().copied());
            weight(&mut b, m_run[half as usize], top)
        })
        .collect();
    for (half, &f) in (0..2u32).zip(&factors) {
        let r = b.add(g, half * 8);
        let slot = b.mad(warp, 16u32, r);
        let at = b.mul(slot, acc_row);
        let at = b.mad(col0, 4u32, at);
        let at = b.add(accs, at);
        for (ni, frag) in acc[0].iter().enumerate() {
            let x = b.mul(frag[2 * half as usize], f);
            let y = b.mul(frag[2 * half as usize + 1], f);
            b.st_vec::<F32, U32>(Space::Shared, at, (ni * 32) as i64, &[x, y]);
        }
    }
    b.bar_sync();
    // Each thread sums four consecutive elements of a row over the warps.
    let per_row = dim / 4;
    for i in 0..(HEAD_ROWS * per_row) / THREADS {
        let idx = b.add(t, i * THREADS);
        let r = b.shr(idx, per_row.trailing_zeros());
        let c4 = b.and(idx, per_row - 1);
        let ok = b.setp::<U32>(Cmp::Lt, r, heads);
        b.if_then(ok, false, |b| {
            let at = b.mul(r, acc_row);
            let at = b.mad(c4, 16u32, at);
            let at = b.add(accs, at);
            let mut sum: Option<Vec<Reg<F32>>> = None;
            for w in 0..WARPS {
                let x = b.ld_vec::<F32, U32, 4>(Space::Shared, at, (w * 16 * acc_row) as i64);
                sum = Some(match sum {
                    None => x.to_vec(),
                    Some(s) => s.iter().zip(x).map(|(&a, c)| b.add(a, c)).collect(),
                });
            }
            let head_row = b.add(qrow0, r);
            let part = b.mad(head_row, splits, split);
            let ai = b.mul(part, dim);
            let ai = b.mad(c4, 4u32, ai);
            let aa = elem_addr(b, gacc, ai, 4);
            b.st_vec::<F32, U64>(Space::Global, aa, 0, &sum.expect("four warps"));
        });
    }
    // Thread r < heads writes row r's (max, sum) over the block.
    let ok = b.setp::<U32>(Cmp::Lt, t, heads);
    b.if_then(ok, false, |b| {
        let at = b.mad(t, 8u32, ml);
        let parts: Vec<[Reg<F32>; 2]> = (0..WARPS)
            .map(|w| b.ld_vec::<F32, U32, 2>(Space::Shared, at, (w * 16 * 8) as i64))
            .collect();
        let top = max_nan_of(b, parts[0][0], parts[1..].iter().map(|p| p[0]));
        let total = b.mov(0.0f32);
        for p in &parts {
            let f = weight(b, p[0], top);
            let s = b.fma(p[1], f, total);
            b.assign(total, s);
        }
        let head_row = b.add(qrow0, t);
        let part = b.mad(head_row, splits, split);
        let ma = elem_addr(b, gml, part, 8);
        b.st_vec::<F32, U64>(Space::Global, ma, 0, &[top, total]);
    });
    b.ret();
    b.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_memory_and_tiles_follow_the_stage_rule() {
        // (2 x 16 query rows + stages x 2 x 64 cache rows) x dim x 2 bytes, written out.
        assert_eq!(shared_bytes(64), (32 + 4 * 128) * 128);
        assert_eq!(shared_bytes(128), (32 + 2 * 128) * 256);
        assert_eq!(shared_bytes(256), (32 + 2 * 128) * 512);
        for (group, want) in [(1, 1), (8, 1), (16, 1), (17, 2), (32, 2), (48, 3)] {
            assert_eq!(tiles_per_group(group), want, "group {group}");
        }
        let k = DecodeMmaKernel {
            dim: 128,
            ty: HalfType::Bf16,
            paged: false,
        };
        let cfg = k.launch_config(&[64, 8, 2]).unwrap();
        assert_eq!((cfg.grid, cfg.block.0), ((8, 64, 2), THREADS));
        assert!(k.launch_config(&[70000, 8, 1]).is_err());
        assert!(k.launch_config(&[0, 8, 1]).is_err());
    }
}
