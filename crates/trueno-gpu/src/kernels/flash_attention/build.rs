//! The FlashAttention forward kernel's IR: the copies into shared memory, the fragment
//! addressing, and the loop over key/value tiles (see the module above for the design).

use super::rows::{
    BlockTile, OutRows, Params, block_tile, online_softmax, probs_a, rescale, store_rows,
};
use super::{THREADS, block_rows, tiles};
use crate::kernels::gemm_copies::cp_chunk;
use crate::kernels::gemm_mma::HalfType;
use crate::ptx::{Cmp, F32, KernelBuilder, KernelIr, Reg, U32, U64};

/// One thread's share of the 16-byte chunks of a `rows x dim` tile: chunk `t % cpr` of
/// rows `t / cpr + j * pass_rows`, `cpr = dim / 8` chunks a row.
pub(crate) struct TileCopy {
    /// Shared offsets (within the tile) of passes with even and odd `j`: rows advance by
    /// `pass_rows`, and when that is 4 the row's swizzle alternates (adding 4 mod 8
    /// flips bit 2), otherwise it stays.
    smem: [Reg<U32>; 2],
    /// The thread's first row and the rows one pass advances.
    pub(crate) row: Reg<U32>,
    pub(crate) pass_rows: u32,
    /// Bytes from this thread's chunk to the first element of the head's row.
    pub(crate) col_bytes: Reg<U32>,
}

/// The copy plan of a four-warp block for tiles of `dim`-element 16-bit rows.
pub(crate) fn tile_copy(b: &mut KernelBuilder, t: Reg<U32>, dim: u32) -> TileCopy {
    let cpr = dim / 8;
    let row = b.shr(t, cpr.trailing_zeros());
    let chunk = b.and(t, cpr - 1);
    let sw = b.and(row, 7u32);
    let phys = b.xor(chunk, sw);
    let base = b.mul(row, dim * 2);
    let even = b.mad(phys, 16u32, base);
    let phys_odd = b.xor(phys, 4u32);
    let odd = b.mad(phys_odd, 16u32, base);
    let col_bytes = b.shl(chunk, 4u32);
    TileCopy {
        smem: [even, odd],
        row,
        pass_rows: THREADS / cpr,
        col_bytes,
    }
}

impl TileCopy {
    /// Copies `rows` rows starting at global row pointer `src` (this thread's chunk of
    /// the tile's first row plus the thread's row offset, already applied) with
    /// `row_step` bytes between passes, into shared `dst`; rows at or past `valid` are
    /// zero-filled. `base` is any readable address for the skipped copies.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn issue(
        &self,
        b: &mut KernelBuilder,
        dst: Reg<U32>,
        src: Reg<U64>,
        row_step: Reg<U64>,
        rows: u32,
        dim: u32,
        valid: Reg<U32>,
        base: Reg<U64>,
    ) {
        let mut ptr = src;
        for j in 0..rows / self.pass_rows {
            if j > 0 {
                ptr = b.add(ptr, row_step);
            }
            let r = b.add(self.row, j * self.pass_rows);
            let ok = b.setp::<U32>(Cmp::Lt, r, valid);
            let (bytes, from) = cp_chunk(b, ok, ptr, base);
            let d = self.chunk_dst(b, dst, j, dim);
            b.cp_async_16(d, from, bytes);
        }
    }

    /// Where this thread's chunk of pass `j` lands in the tile at shared `dst`.
    pub(crate) fn chunk_dst(
        &self,
        b: &mut KernelBuilder,
        dst: Reg<U32>,
        j: u32,
        dim: u32,
    ) -> Reg<U32> {
        let parity = if self.pass_rows == 4 {
            j as usize & 1
        } else {
            0
        };
        let d = b.add(dst, self.smem[parity]);
        b.add(d, j * self.pass_rows * dim * 2)
    }
}

/// The per-lane `ldmatrix` offsets within a tile for the four 16-byte column pairs a
/// 128-byte swizzle period holds (`i` in 0..4: chunks `2i`, `2i + 1`), for the four
/// matrices taken rows first (`rows_first`: lanes 8..15 address rows 8..15, lanes 16..31
/// the second chunk; Q as the A operand, V through `.trans`) or chunks first (lanes 8..15
/// the second chunk, 16..31 rows 8..15; K as the B operand of `Q K^T`, its two n8 tiles'
/// pairs in registers 0-1 and 2-3). Chunk `c` of row `r` sits at `(c ^ (r % 8)) * 16`,
/// and the rows a lane addresses are `l % 8` plus multiples of 8. (K addressed rows
/// first, sharing Q's offsets and saving four registers, measured 7% slower on the H100.)
pub(crate) fn frag_offsets(
    b: &mut KernelBuilder,
    lane: Reg<U32>,
    dim: u32,
    rows_first: bool,
) -> [Reg<U32>; 4] {
    let q = b.shr(lane, 3u32);
    let l8 = b.and(lane, 7u32);
    let (row_sel, chunk_sel) = if rows_first {
        (b.and(q, 1u32), b.shr(q, 1u32))
    } else {
        (b.shr(q, 1u32), b.and(q, 1u32))
    };
    let r = b.mad(row_sel, 8u32, l8);
    let rbytes = b.mul(r, dim * 2);
    std::array::from_fn(|i| {
        let c = b.add(chunk_sel, 2 * i as u32);
        let c = b.xor(c, l8);
        b.mad(c, 16u32, rbytes)
    })
}

/// The `ldmatrix` immediate for k16 step `s` of a row (which 128-byte period, then
/// `frag_offsets[s % 4]`) plus `rows` rows.
pub(crate) fn frag_imm(s: u32, rows: u32, dim: u32) -> i64 {
    ((s / 4) * 128 + rows * dim * 2) as i64
}

pub(super) fn build(name: &str, ty: HalfType, dim: u32) -> KernelIr {
    let (mf, bn) = tiles(dim);
    let bm = block_rows(dim);
    let row_bytes = dim * 2;
    let (q_bytes, kv_tile) = (bm * row_bytes, bn * row_bytes);
    let pt = ty.ptx();
    let mut b = KernelBuilder::new(name);
    b.max_threads(THREADS);
    let gq = b.param_ptr("q", pt);
    let gk = b.param_ptr("k", pt);
    let gv = b.param_ptr("v", pt);
    let Params {
        out: go,
        cu_q,
        cu_k,
        total_q,
        total_k,
        heads_q,
        heads_kv,
        group,
        scale_log2,
        causal,
    } = Params::declare(&mut b, pt);
    let smem = b.dynamic_shared();

    let t = b.tid_x();
    let lane = b.and(t, 31u32);
    let warp = b.shr(t, 5u32);
    let BlockTile {
        h,
        hk,
        q_start,
        k_start,
        q0,
        limits,
        keys_needed,
        done,
    } = block_tile(
        &mut b,
        (cu_q, cu_k),
        (total_q, total_k),
        (group, causal),
        (bm, dim),
    );
    let len_q = limits.len_q;
    let len_k = limits.len_k;
    let first_lim = limits.lim(&mut b, q0);
    let n_tiles = b.add(keys_needed, bn - 1);
    let n_tiles = b.shr(n_tiles, bn.trailing_zeros());

    // Global pointers: a token's row is `heads * dim` elements.
    let q_stride = b.mul(heads_q, dim * 2);
    let kv_stride = b.mul(heads_kv, dim * 2);
    let copy = tile_copy(&mut b, t, dim);
    let head_bytes = |b: &mut KernelBuilder, head: Reg<U32>| -> Reg<U32> {
        let x = b.mul(head, row_bytes);
        b.add(x, copy.col_bytes)
    };
    let q_row = b.add(q_start, q0);
    let q_row = b.add(q_row, copy.row);
    let q_off = b.mul_wide(q_row, q_stride);
    let q_src = b.add(gq, q_off);
    let hq_bytes = head_bytes(&mut b, h);
    let hq_bytes = b.cvt::<U64, U32>(hq_bytes, None);
    let q_src = b.add(q_src, hq_bytes);
    let q_step = b.mul_wide(q_stride, copy.pass_rows);
    let k_row = b.add(k_start, copy.row);
    let k_off = b.mul_wide(k_row, kv_stride);
    let hk_bytes = head_bytes(&mut b, hk);
    let hk_bytes = b.cvt::<U64, U32>(hk_bytes, None);
    let k_off = b.add(k_off, hk_bytes);
    let k_next = b.add(gk, k_off);
    let v_next = b.add(gv, k_off);

    let q_left = b.sub(len_q, q0);
    copy.issue(&mut b, smem, q_src, q_step, bm, dim, q_left, gq);
    let stage0 = b.add(smem, q_bytes);
    // Issues tile `j`'s keys and values into the stage at `dst` (pointers at tile `j`)
    // and advances the pointers (steps recomputed from the stride: registers are short).
    let issue_kv = |b: &mut KernelBuilder, j: Reg<U32>, dst: Reg<U32>| {
        let first = b.mul(j, bn);
        let left = b.sub(len_k, first);
        let pass = b.mul_wide(kv_stride, copy.pass_rows);
        copy.issue(b, dst, k_next, pass, bn, dim, left, gk);
        let vdst = b.add(dst, kv_tile);
        copy.issue(b, vdst, v_next, pass, bn, dim, left, gk);
        b.cp_async_commit();
        let step = b.mul_wide(kv_stride, bn);
        let kn = b.add(k_next, step);
        let vn = b.add(v_next, step);
        b.assign(k_next, kn);
        b.assign(v_next, vn);
    };
    let zero = b.mov(0u32);
    let has_tiles = b.setp::<U32>(Cmp::Gt, n_tiles, 0u32);
    b.if_then(has_tiles, true, |b| issue_kv(b, zero, stage0));
    b.cp_async_commit();

    // Fragment addressing (see `frag_offsets`): Q and V rows-first, K chunks-first.
    let a_off = frag_offsets(&mut b, lane, dim, true);
    let k_off = frag_offsets(&mut b, lane, dim, false);
    let warp_rows = b.mul(warp, 16 * mf * row_bytes);
    let q_tile = b.add(smem, warp_rows);
    let q_frag: [Reg<U32>; 4] = std::array::from_fn(|i| b.add(a_off[i], q_tile));

    // Per-thread state: each m16 fragment's two rows (g and g + 8) have a running max
    // (base 2, scaled), a partial sum over this lane's columns and the output
    // accumulator (dim / 8 n8 tiles of 4). Registers are what bound this kernel (at 128
    // the accumulators and scores take 192 of 255), so the rows' key limits are
    // recomputed where a mask needs them and V's fragment addresses derive from Q's.
    let g = b.shr(lane, 2u32);
    let tq = b.and(lane, 3u32);
    let neg_inf = f32::NEG_INFINITY;
    let row_base = b.mad(warp, 16 * mf, q0);
    let row_base = b.add(row_base, g);
    let m_run: Vec<Reg<F32>> = (0..2 * mf).map(|_| b.mov(neg_inf)).collect();
    let l_run: Vec<Reg<F32>> = (0..2 * mf).map(|_| b.mov(0.0f32)).collect();
    let acc: Vec<Vec<[Reg<F32>; 4]>> = (0..mf)
        .map(|_| {
            (0..dim / 8)
                .map(|_| std::array::from_fn(|_| b.mov(0.0f32)))
                .collect()
        })
        .collect();
    let col0 = b.shl(tq, 1u32);
    let stage_bytes = 2 * kv_tile;

    b.for_loop(0u32, n_tiles, 1u32, true, |b, j| {
        // Tile j (and Q) landed; every warp is done with the stage the next copies
        // overwrite.
        b.cp_async_wait(0);
        b.bar_sync();
        let parity = b.and(j, 1u32);
        let this = b.mad(parity, stage_bytes, stage0);
        let next_j = b.add(j, 1u32);
        let more = b.setp::<U32>(Cmp::Lt, next_j, n_tiles);
        b.if_then(more, true, |b| {
            let other = b.xor(parity, 1u32);
            let dst = b.mad(other, stage_bytes, stage0);
            issue_kv(b, next_j, dst);
        });

        // S = Q K^T: per k16 step one Q fragment per m16 and one K ldmatrix per 16 keys.
        let k_frag: [Reg<U32>; 4] = std::array::from_fn(|i| b.add(this, k_off[i]));
        let mut s: Vec<Vec<[Reg<F32>; 4]>> = (0..mf)
            .map(|_| {
                (0..bn / 8)
                    .map(|_| std::array::from_fn(|_| b.mov(0.0f32)))
                    .collect()
            })
            .collect();
        for ks in 0..dim / 16 {
            let qa: Vec<[Reg<U32>; 4]> = (0..mf)
                .map(|mi| b.ldmatrix_x4(q_frag[ks as usize % 4], frag_imm(ks, mi * 16, dim), false))
                .collect();
            for np in 0..bn / 16 {
                let kb = b.ldmatrix_x4(k_frag[ks as usize % 4], frag_imm(ks, np * 16, dim), false);
                for (mi, a) in qa.iter().enumerate() {
                    for (half, pair) in [[kb[0], kb[1]], [kb[2], kb[3]]].into_iter().enumerate() {
                        let c = &mut s[mi][(2 * np) as usize + half];
                        *c = b.mma_m16n8k16(pt, *a, pair, *c);
                    }
                }
            }
        }

        // Masks, where this tile reaches past a row's last key (the sequence's end or
        // the causal diagonal): one compare per score against the row's key budget.
        let first_key = b.mul(j, bn);
        let tile_end = b.add(first_key, bn);
        let partial = b.setp::<U32>(Cmp::Gt, tile_end, first_lim);
        let key0 = b.add(first_key, col0);
        b.if_then(partial, true, |b| limits.mask(b, &s, row_base, key0));

        // Online softmax per row, then P V. The output is rescaled only when some row
        // of the warp found a new max (a vote): past the first tiles most do not, and
        // the rescale is dim / 4 multiplies a row per tile.
        let (corrs, same) = online_softmax(b, &s, (&m_run, &l_run), scale_log2);
        rescale(b, &acc, &corrs, same);
        let v_tile = b.add(this, kv_tile);
        let v_shift = b.sub(v_tile, q_tile);
        let v_frag: [Reg<U32>; 4] = std::array::from_fn(|i| b.add(q_frag[i], v_shift));
        for kk in 0..(bn / 16) as usize {
            // The accumulators of key tiles 2kk and 2kk+1 are the A operand of one k16.
            let pa = probs_a(b, pt, &s, kk);
            for dp in 0..dim / 16 {
                let vb = b.ldmatrix_x4(
                    v_frag[dp as usize % 4],
                    frag_imm(dp, kk as u32 * 16, dim),
                    true,
                );
                for (mi, a) in pa.iter().enumerate() {
                    for (half, pair) in [[vb[0], vb[1]], [vb[2], vb[3]]].into_iter().enumerate() {
                        let c = acc[mi][(2 * dp) as usize + half];
                        let d = b.mma_m16n8k16(pt, *a, pair, c);
                        for (x, y) in c.iter().zip(d) {
                            b.assign(*x, y);
                        }
                    }
                }
            }
        }
    });
    b.cp_async_wait(0);

    let rows = OutRows {
        out: go,
        head: h,
        q_start,
        len_q,
        total_q,
        q_stride,
        row_bytes,
        row_base,
        tq,
    };
    store_rows(&mut b, pt, &acc, (&m_run, &l_run), &rows);
    b.place(done);
    b.ret();
    b.finish()
}
