//! FlashAttention forward for sm_80 and later: `out = softmax(scale * Q K^T) V` over
//! sequences of f16 or bf16 tokens, f32 softmax and accumulation, without the score
//! matrix ever leaving registers.
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

use super::gemm_mma::{HalfType, cp_chunk};
use super::helpers::elem_addr;
use super::math::LOG2E;
use super::{Family, Kernel, LaunchConfig, blocks_for, check_dims};
use crate::error::{Result, shape_err};
use crate::ptx::ir::{Dim, Rounding, ShflMode, SpecialReg};
use crate::ptx::{Cmp, F32, KernelBuilder, KernelIr, Pred, PtxType, Reg, Space, U32, U64};

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
    let (hq, hkv, d) = (shape.heads_q, shape.heads_kv, shape.dim);
    let group = hq / hkv;
    let mut out = vec![0.0f32; q.len()];
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
                let qrow = &q[((q0 + i) * hq + h) * d..][..d];
                let kv = |t: usize| ((k0 + t) * hkv + h / group) * d;
                let s: Vec<f64> = (0..seen)
                    .map(|t| {
                        let krow = &k[kv(t)..][..d];
                        scale as f64
                            * qrow
                                .iter()
                                .zip(krow)
                                .map(|(&a, &c)| a as f64 * c as f64)
                                .sum::<f64>()
                    })
                    .collect();
                let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let w: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
                let total: f64 = w.iter().sum();
                for e in 0..d {
                    let acc: f64 = w
                        .iter()
                        .enumerate()
                        .map(|(t, &wt)| wt * v[kv(t) + e] as f64)
                        .sum();
                    out[((q0 + i) * hq + h) * d + e] = if total > 0.0 {
                        (acc / total) as f32
                    } else {
                        0.0
                    };
                }
            }
        }
    }
    out
}

/// The forward kernel for one input type and head dimension: parameters `q`, `k`, `v`,
/// `out`, `cu_q`, `cu_k`, `total_q`, `total_k`, `heads_q`, `heads_kv`, `group`
/// (`heads_q / heads_kv`), `scale_log2` (`scale * log2 e`), `causal` (0 or 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlashAttentionKernel(pub HalfType, pub u32);

/// A sequence's token range from its `cu` array, clamped to `total` so inconsistent
/// offsets cannot reach past the buffers: (first token, length).
fn seq_range(
    b: &mut KernelBuilder,
    cu: Reg<U64>,
    seq: Reg<U32>,
    total: Reg<U32>,
) -> (Reg<U32>, Reg<U32>) {
    let at = elem_addr(b, cu, seq, 4);
    let start = b.ld::<U32, U64>(Space::Global, at, 0);
    let end = b.ld::<U32, U64>(Space::Global, at, 4);
    let end = b.min(end, total);
    let start = b.min(start, end);
    let len = b.sub(end, start);
    (start, len)
}

/// `a > b ? a - b : 0`
fn sat_sub(b: &mut KernelBuilder, x: Reg<U32>, y: Reg<U32>) -> Reg<U32> {
    let d = b.sub(x, y);
    let gt = b.setp::<U32>(Cmp::Gt, x, y);
    b.selp::<U32>(d, 0u32, gt)
}

/// One thread's share of the 16-byte chunks of a `rows x dim` tile: chunk `t % cpr` of
/// rows `t / cpr + j * pass_rows`, `cpr = dim / 8` chunks a row.
struct TileCopy {
    /// Shared offsets (within the tile) of passes with even and odd `j`: rows advance by
    /// `pass_rows`, and when that is 4 the row's swizzle alternates (adding 4 mod 8
    /// flips bit 2), otherwise it stays.
    smem: [Reg<U32>; 2],
    /// The thread's first row and the rows one pass advances.
    row: Reg<U32>,
    pass_rows: u32,
    /// Bytes from this thread's chunk to the first element of the head's row.
    col_bytes: Reg<U32>,
}

fn tile_copy(b: &mut KernelBuilder, t: Reg<U32>, dim: u32) -> TileCopy {
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
    fn issue(
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
            let parity = if self.pass_rows == 4 {
                j as usize & 1
            } else {
                0
            };
            let d = b.add(dst, self.smem[parity]);
            let d = b.add(d, j * self.pass_rows * dim * 2);
            b.cp_async_16(d, from, bytes);
        }
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
fn frag_offsets(
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
fn frag_imm(s: u32, rows: u32, dim: u32) -> i64 {
    ((s / 4) * 128 + rows * dim * 2) as i64
}

fn build(name: &str, ty: HalfType, dim: u32) -> KernelIr {
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
    let go = b.param_ptr("out", pt);
    let cu_q = b.param_ptr("cu_q", PtxType::U32);
    let cu_k = b.param_ptr("cu_k", PtxType::U32);
    let total_q = b.param_u32("total_q");
    let total_k = b.param_u32("total_k");
    let heads_q = b.param_u32("heads_q");
    let heads_kv = b.param_u32("heads_kv");
    let group = b.param_u32("group");
    let scale_log2 = b.param_f32("scale_log2");
    let causal = b.param_u32("causal");
    let smem = b.dynamic_shared();

    let t = b.tid_x();
    let lane = b.and(t, 31u32);
    let warp = b.shr(t, 5u32);
    // The last query tiles first: under a causal mask they see the most keys, and
    // starting them early keeps them from running alone at the end.
    let tiles_x = b.nctaid_x();
    let tile = b.ctaid_x();
    let tile = b.sub(tiles_x, tile);
    let tile = b.sub(tile, 1u32);
    let h = b.ctaid_y();
    let seq = b.special(SpecialReg::Ctaid(Dim::Z));
    let (q_start, len_q) = seq_range(&mut b, cu_q, seq, total_q);
    let (k_start, len_k) = seq_range(&mut b, cu_k, seq, total_k);
    let q0 = b.mul(tile, bm);
    // Tiles past this sequence's queries leave at once (a block-uniform branch: the
    // barriers below see all of a block or none of it).
    let past = b.setp::<U32>(Cmp::Ge, q0, len_q);
    let done = b.new_label();
    b.bra_if(past, false, done, true);
    let hk = b.div_int(h, group);

    // Keys row `r` (sequence position) sees: `0..lim(r)`, `lim(r) = min(lk, r + 1 + lk -
    // lq)` when causal (saturating at 0), `lk` otherwise.
    let is_causal = b.setp::<U32>(Cmp::Ne, causal, 0u32);
    let lim = |b: &mut KernelBuilder, r: Reg<U32>| -> Reg<U32> {
        let reach = b.add(r, 1u32);
        let reach = b.add(reach, len_k);
        let reach = sat_sub(b, reach, len_q);
        let reach = b.min(reach, len_k);
        b.selp::<U32>(reach, len_k, is_causal)
    };
    let last_row = b.add(q0, bm - 1);
    let keys_needed = lim(&mut b, last_row);
    let first_lim = lim(&mut b, q0);
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
    // and advances the pointers.
    // (Steps are recomputed from the stride rather than held: registers are short.)
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
        b.if_then(partial, true, |b| {
            for (mi, s_m) in s.iter().enumerate() {
                for half in 0..2usize {
                    let r = b.add(row_base, (mi * 16 + half * 8) as u32);
                    let row_lim = lim(b, r);
                    let budget = sat_sub(b, row_lim, key0);
                    for (ni, frag) in s_m.iter().enumerate() {
                        for e in 0..2usize {
                            let x = frag[2 * half + e];
                            let ok = b.setp::<U32>(Cmp::Gt, budget, (ni * 8 + e) as u32);
                            let masked = b.selp::<F32>(x, neg_inf, ok);
                            b.assign(x, masked);
                        }
                    }
                }
            }
        });

        // Online softmax per row, then P V. The output is rescaled only when some row
        // of the warp found a new max (a vote): past the first tiles most do not, and
        // the rescale is dim / 4 multiplies a row per tile.
        let mut corrs = Vec::new();
        let mut all_same: Option<Reg<Pred>> = None;
        for (mi, s_m) in s.iter().enumerate() {
            for half in 0..2usize {
                let idx = mi * 2 + half;
                let mut mx = s_m[0][2 * half];
                for frag in s_m {
                    for e in 0..2 {
                        mx = b.max(mx, frag[2 * half + e]);
                    }
                }
                for d in [1u32, 2] {
                    let o = b.shfl(ShflMode::Bfly, mx, d);
                    mx = b.max(mx, o);
                }
                let scaled = b.mul(mx, scale_log2);
                let m_new = b.max(m_run[idx], scaled);
                let none = b.setp::<F32>(Cmp::Eq, m_new, neg_inf);
                let base = b.selp::<F32>(0.0f32, m_new, none);
                let gap = b.sub(m_run[idx], base);
                let corr = b.ex2(gap);
                let same = b.setp::<F32>(Cmp::Eq, m_new, m_run[idx]);
                let corr = b.selp::<F32>(1.0f32, corr, same);
                all_same = Some(match all_same {
                    Some(p) => b.and_pred(p, same),
                    None => same,
                });
                corrs.push(corr);
                let neg_base = b.neg(base);
                let mut sum = b.mov(0.0f32);
                for frag in s_m {
                    for e in 0..2 {
                        let x = frag[2 * half + e];
                        let y = b.fma(x, scale_log2, neg_base);
                        let p = b.ex2(y);
                        b.assign(x, p);
                        sum = b.add(sum, p);
                    }
                }
                let l = b.fma(l_run[idx], corr, sum);
                b.assign(l_run[idx], l);
                b.assign(m_run[idx], m_new);
            }
        }
        let warp_same = b.vote_all(all_same.expect("at least one row"));
        let rescale = b.not_pred(warp_same);
        b.if_then(rescale, false, |b| {
            for (mi, acc_m) in acc.iter().enumerate() {
                for half in 0..2usize {
                    let corr = corrs[mi * 2 + half];
                    for frag in acc_m {
                        for e in 0..2 {
                            let o = frag[2 * half + e];
                            let w = b.mul(o, corr);
                            b.assign(o, w);
                        }
                    }
                }
            }
        });
        let v_tile = b.add(this, kv_tile);
        let v_shift = b.sub(v_tile, q_tile);
        let v_frag: [Reg<U32>; 4] = std::array::from_fn(|i| b.add(q_frag[i], v_shift));
        for kk in 0..(bn / 16) as usize {
            // The accumulators of key tiles 2kk and 2kk+1 are the A operand of one k16.
            let pa: Vec<[Reg<U32>; 4]> = s
                .iter()
                .map(|s_m| {
                    let (lo, hi) = (s_m[2 * kk], s_m[2 * kk + 1]);
                    [
                        b.cvt_pack(pt, lo[0], lo[1]),
                        b.cvt_pack(pt, lo[2], lo[3]),
                        b.cvt_pack(pt, hi[0], hi[1]),
                        b.cvt_pack(pt, hi[2], hi[3]),
                    ]
                })
                .collect();
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

    // Epilogue: the row sums are spread over the four lanes of a row; divide, round to
    // 16 bits in pairs, store the rows inside the sequence.
    let o_head = b.mul(h, row_bytes);
    let o_col = b.shl(tq, 2u32);
    let o_head = b.add(o_head, o_col);
    let o_head = b.cvt::<U64, U32>(o_head, None);
    for mi in 0..mf {
        for half in 0..2u32 {
            let idx = (mi * 2 + half) as usize;
            let mut l = l_run[idx];
            for d in [1u32, 2] {
                let o = b.shfl(ShflMode::Bfly, l, d);
                l = b.add(l, o);
            }
            let pos = b.setp::<F32>(Cmp::Gt, l, 0.0f32);
            let inv = b.rcp(l, Rounding::Rn);
            let inv = b.selp::<F32>(inv, 0.0f32, pos);
            let r = b.add(row_base, mi * 16 + half * 8);
            let ok: Reg<Pred> = b.setp::<U32>(Cmp::Lt, r, len_q);
            let tok = b.add(q_start, r);
            let off = b.mul_wide(tok, q_stride);
            let addr = b.add(go, off);
            let addr = b.add(addr, o_head);
            b.predicated(ok, |b| {
                for (ni, frag) in acc[mi as usize].iter().enumerate() {
                    let x = b.mul(frag[2 * half as usize], inv);
                    let y = b.mul(frag[2 * half as usize + 1], inv);
                    let pair = b.cvt_pack(pt, x, y);
                    b.st::<U32, U64>(Space::Global, addr, (ni * 16) as i64, pair);
                }
            });
        }
    }
    b.place(done);
    b.ret();
    b.finish()
}

impl Kernel for FlashAttentionKernel {
    fn name(&self) -> String {
        format!("trueno_flash_attn_fwd_{}_d{}", self.0.name(), self.1)
    }
    fn family(&self) -> Family {
        Family::FlashAttention
    }
    fn build(&self) -> KernelIr {
        build(&self.name(), self.0, self.1)
    }
    /// `[max_seqlen_q, heads_q, batch]`.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        let name = self.name();
        check_dims(&name, dims, 3)?;
        let gx = blocks_for(&name, dims[0], block_rows(self.1) as usize, i32::MAX as u32)?;
        let gy = blocks_for(&name, dims[1], 1, 65535)?;
        let gz = blocks_for(&name, dims[2], 1, 65535)?;
        Ok(LaunchConfig {
            grid: (gx, gy, gz),
            block: (THREADS, 1, 1),
            shared_bytes: shared_bytes(self.1),
        })
    }
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

    #[test]
    fn shared_memory_fits_an_sm80_block_and_tiles_cover_the_rows() {
        for d in HEAD_DIMS {
            assert!(shared_bytes(d) <= 163 * 1024, "{d}: {}", shared_bytes(d));
            let c = FlashAttentionKernel(HalfType::Bf16, d)
                .launch_config(&[1000, 12, 3])
                .unwrap();
            assert_eq!(c.grid, (1000u32.div_ceil(block_rows(d)), 12, 3));
        }
        let (_, bn) = tiles(128);
        assert_eq!(shared_bytes(128), (128 + 4 * bn) * 256);
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
    }
}
