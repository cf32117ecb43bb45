//! The row arithmetic both FlashAttention kernels share: which keys a row sees, the
//! masks, the online softmax over a tile of scores, the output's rescale, the 16-bit
//! probabilities and the epilogue. Scores and outputs are accumulator fragments in
//! `mma.sync`'s m16n8 layout, which `wgmma`'s 64-row accumulators repeat per warp:
//! `frags[f][i]` holds rows `g` (entries 0, 1) and `g + 8` (2, 3) of 16-row fragment
//! `f`, columns `8 i + 2 (lane % 4)` (+1), `g = lane / 4`.

use crate::kernels::helpers::elem_addr;
use crate::ptx::ir::{Dim, Label, Rounding, ShflMode, SpecialReg};
use crate::ptx::{Cmp, F32, KernelBuilder, Pred, PtxType, Reg, Space, U32, U64};

/// Accumulator fragments: `[fragment][n8 tile]`, four registers each.
pub(crate) type Frags = Vec<Vec<[Reg<F32>; 4]>>;

/// `x > y ? x - y : 0`
pub(crate) fn sat_sub(b: &mut KernelBuilder, x: Reg<U32>, y: Reg<U32>) -> Reg<U32> {
    let d = b.sub(x, y);
    let gt = b.setp::<U32>(Cmp::Gt, x, y);
    b.selp::<U32>(d, 0u32, gt)
}

/// What a row's key limit depends on: the sequence's query and key counts and the
/// causal flag.
pub(super) struct KeyLimits {
    pub len_q: Reg<U32>,
    pub len_k: Reg<U32>,
    pub causal: Reg<Pred>,
}

impl KeyLimits {
    /// Keys row `r` (sequence position) sees: `0..lim(r)`, `lim(r) = min(lk, r + 1 +
    /// lk - lq)` when causal (saturating at 0), `lk` otherwise.
    pub fn lim(&self, b: &mut KernelBuilder, r: Reg<U32>) -> Reg<U32> {
        let reach = b.add(r, 1u32);
        let reach = b.add(reach, self.len_k);
        let reach = sat_sub(b, reach, self.len_q);
        let reach = b.min(reach, self.len_k);
        b.selp::<U32>(reach, self.len_k, self.causal)
    }

    /// Masks the scores of keys a row does not see to -inf: one compare per score
    /// against the row's key budget. `row_base` is the thread's first row, `key0` the key
    /// of its first column in this tile.
    pub fn mask(&self, b: &mut KernelBuilder, s: &Frags, row_base: Reg<U32>, key0: Reg<U32>) {
        for (mi, s_m) in s.iter().enumerate() {
            for half in 0..2usize {
                let r = b.add(row_base, (mi * 16 + half * 8) as u32);
                let row_lim = self.lim(b, r);
                let budget = sat_sub(b, row_lim, key0);
                for (ni, frag) in s_m.iter().enumerate() {
                    for e in 0..2usize {
                        let x = frag[2 * half + e];
                        let ok = b.setp::<U32>(Cmp::Gt, budget, (ni * 8 + e) as u32);
                        let masked = b.selp::<F32>(x, f32::NEG_INFINITY, ok);
                        b.assign(x, masked);
                    }
                }
            }
        }
    }
}

/// The parameters both kernels take after their inputs (`q`, `k`, `v` or their tensor
/// maps): `out`, `cu_q`, `cu_k`, `total_q`, `total_k`, `heads_q`, `heads_kv`, `group`,
/// `scale_log2`, `causal` (then `lse`, `want_lse`, read by [`store_rows`]).
pub(super) struct Params {
    pub out: Reg<U64>,
    pub cu_q: Reg<U64>,
    pub cu_k: Reg<U64>,
    pub total_q: Reg<U32>,
    pub total_k: Reg<U32>,
    pub heads_q: Reg<U32>,
    pub heads_kv: Reg<U32>,
    pub group: Reg<U32>,
    pub scale_log2: Reg<F32>,
    pub causal: Reg<U32>,
}

impl Params {
    /// Declares them in that order; `out` of element type `ty`.
    pub fn declare(b: &mut KernelBuilder, ty: PtxType) -> Params {
        Params {
            out: b.param_ptr("out", ty),
            cu_q: b.param_ptr("cu_q", PtxType::U32),
            cu_k: b.param_ptr("cu_k", PtxType::U32),
            total_q: b.param_u32("total_q"),
            total_k: b.param_u32("total_k"),
            heads_q: b.param_u32("heads_q"),
            heads_kv: b.param_u32("heads_kv"),
            group: b.param_u32("group"),
            scale_log2: b.param_f32("scale_log2"),
            causal: b.param_u32("causal"),
        }
    }
}

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

/// A block's place in the problem, as both kernels derive it from the grid (`x` a
/// query tile, `y` a head, `z` a sequence, in the order `tile_order` gives them).
pub(super) struct BlockTile {
    pub h: Reg<U32>,
    /// The key/value head (`h / group`).
    pub hk: Reg<U32>,
    pub q_start: Reg<U32>,
    pub k_start: Reg<U32>,
    /// The tile's first query row within the sequence.
    pub q0: Reg<U32>,
    pub limits: KeyLimits,
    /// Keys the tile's last row sees (the tile's key count).
    pub keys_needed: Reg<U32>,
    /// Where blocks past their sequence's queries jump (placed by the caller before
    /// its final `ret`).
    pub done: Label,
}

/// Blocks launched together (about a wave) whose tiles `tile_order` sorts longest first.
const ORDER_BLOCKS: u32 = 128;

/// Whether a kernel of head dimension `dim` takes its tiles in `tile_order`'s groups.
/// Measured on an H200 (2026-11-27, three calls alternating with the grid order): at
/// head dims 128 and 256, causal 4K x 128 1.03-1.07x and causal 1K and 4K x 256
/// 1.08-1.10x, the rest within 3%; at 64 the groups lost up to 4% (causal 1K 0.96x in
/// both calls), so dim 64 keeps the grid's order.
pub(super) fn grouped_order(dim: u32) -> bool {
    dim >= 128
}

/// The block's (query tile, head, sequence). Not `grouped`: `x` the query tile, last
/// first, `y` the head, `z` the sequence. `grouped`: from the block's launch rank
/// (blocks start in the order of `x + nctaid.x (y + nctaid.y z)`), the (head,
/// sequence) pairs go in groups of `max(1, ORDER_BLOCKS / nctaid.x)`, and within a group
/// every pair's last query tile comes first, then every pair's one before it. Under a
/// causal mask the last tiles see the most keys: started first, the short ones fill in
/// after them, and the grid ends on short ones instead of a long one running alone. A
/// group's keys and values (about 128 query tiles' worth) stay in L2 while its tiles
/// run.
fn tile_order(b: &mut KernelBuilder, grouped: bool) -> (Reg<U32>, Reg<U32>, Reg<U32>) {
    if !grouped {
        let gx = b.nctaid_x();
        let tile = b.ctaid_x();
        let tile = b.sub(gx, tile);
        let tile = b.sub(tile, 1u32);
        let h = b.ctaid_y();
        let seq = b.special(SpecialReg::Ctaid(Dim::Z));
        return (tile, h, seq);
    }
    let rank = launch_rank(b);
    tile_of_rank(b, rank)
}

/// The block's launch rank: `x + nctaid.x (y + nctaid.y z)`, the order blocks start in.
fn launch_rank(b: &mut KernelBuilder) -> Reg<U32> {
    let gx = b.nctaid_x();
    let gy = b.special(SpecialReg::Nctaid(Dim::Y));
    let (x, y) = (b.ctaid_x(), b.ctaid_y());
    let z = b.special(SpecialReg::Ctaid(Dim::Z));
    let pair = b.mad(z, gy, y);
    b.mad(pair, gx, x)
}

/// Where `issuer` holds: asks L2 for the query tile (`rows` x `dim`, in boxes of
/// `box_cols` columns of the tensor map `map_q`) of the block that starts a wave after
/// this one in `tile_order`'s grouped order (launch rank + the multiprocessors;
/// `%nsmid` may count a few more), which would otherwise come from memory while that
/// block waits for it at its start.
pub(super) fn prefetch_later_queries(
    b: &mut KernelBuilder,
    issuer: Reg<Pred>,
    (map_q, cu_q): (Reg<U64>, Reg<U64>),
    (rows, dim, box_cols): (u32, u32, u32),
) {
    let nsm = b.special(SpecialReg::Nsmid);
    let rank = launch_rank(b);
    let later = b.add(rank, nsm);
    let blocks = grid_blocks(b);
    let exists = b.setp::<U32>(Cmp::Lt, later, blocks);
    let go = b.and_pred(issuer, exists);
    b.if_then(go, false, |b| {
        let (tile, h, seq) = tile_of_rank(b, later);
        let at = elem_addr(b, cu_q, seq, 4);
        let start = b.ld::<U32, U64>(Space::Global, at, 0);
        let y = b.mad(tile, rows, start);
        let x = b.mul(h, dim);
        for j in 0..dim / box_cols {
            let xj = b.add(x, j * box_cols);
            b.tma_prefetch_2d(map_q, xj, y);
        }
    });
}

/// Blocks in the grid.
fn grid_blocks(b: &mut KernelBuilder) -> Reg<U32> {
    let gx = b.nctaid_x();
    let gy = b.special(SpecialReg::Nctaid(Dim::Y));
    let gz = b.special(SpecialReg::Nctaid(Dim::Z));
    let pairs = b.mul(gy, gz);
    b.mul(pairs, gx)
}

/// The (query tile, head, sequence) `tile_order`'s groups give the block of launch
/// rank `rank` (any block's, not only this one's).
fn tile_of_rank(b: &mut KernelBuilder, rank: Reg<U32>) -> (Reg<U32>, Reg<U32>, Reg<U32>) {
    let gx = b.nctaid_x();
    let gy = b.special(SpecialReg::Nctaid(Dim::Y));
    let gz = b.special(SpecialReg::Nctaid(Dim::Z));
    let pairs = b.mul(gy, gz);
    let group = b.div_int(ORDER_BLOCKS, gx);
    let group = b.max(group, 1u32);
    let per_group = b.mul(group, gx);
    let g = b.div_int(rank, per_group);
    let first = b.mul(g, group);
    let start = b.mul(g, per_group);
    let within = b.sub(rank, start);
    // The last group may be short.
    let left = b.sub(pairs, first);
    let members = b.min(group, left);
    let step = b.div_int(within, members);
    let taken = b.mul(step, members);
    let member = b.sub(within, taken);
    let pair = b.add(first, member);
    let tile = b.sub(gx, step);
    let tile = b.sub(tile, 1u32);
    let h = b.rem(pair, gy);
    let seq = b.div_int(pair, gy);
    (tile, h, seq)
}

/// The block's tile of `rows` query rows: its sequence's ranges from `cu_q` / `cu_k`
/// (clamped to the totals), the early exit for tiles past the sequence (a block-uniform
/// branch, before any barrier), the key/value head and the key limits.
pub(super) fn block_tile(
    b: &mut KernelBuilder,
    (cu_q, cu_k): (Reg<U64>, Reg<U64>),
    (total_q, total_k): (Reg<U32>, Reg<U32>),
    (group, causal): (Reg<U32>, Reg<U32>),
    (rows, dim): (u32, u32),
) -> BlockTile {
    let (tile, h, seq) = tile_order(b, grouped_order(dim));
    let (q_start, len_q) = seq_range(b, cu_q, seq, total_q);
    let (k_start, len_k) = seq_range(b, cu_k, seq, total_k);
    let q0 = b.mul(tile, rows);
    let past = b.setp::<U32>(Cmp::Ge, q0, len_q);
    let done = b.new_label();
    b.bra_if(past, false, done, true);
    let hk = b.div_int(h, group);
    let is_causal = b.setp::<U32>(Cmp::Ne, causal, 0u32);
    let limits = KeyLimits {
        len_q,
        len_k,
        causal: is_causal,
    };
    let last_row = b.add(q0, rows - 1);
    let keys_needed = limits.lim(b, last_row);
    BlockTile {
        h,
        hk,
        q_start,
        k_start,
        q0,
        limits,
        keys_needed,
        done,
    }
}

/// Online softmax over one tile of scores, rows in base 2 (`scale_log2 = scale log2
/// e`): updates each row's running max `m_run` and sum `l_run` (this lane's columns),
/// turns the scores into probabilities in place and returns each row's correction of
/// the output so far, and whether every row of the warp kept its max (then the
/// correction is 1 throughout and [`rescale`] skips).
pub(crate) fn online_softmax(
    b: &mut KernelBuilder,
    s: &Frags,
    (m_run, l_run): (&[Reg<F32>], &[Reg<F32>]),
    scale_log2: Reg<F32>,
) -> (Vec<Reg<F32>>, Reg<Pred>) {
    let neg_inf = f32::NEG_INFINITY;
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
            let corr = b.ex2_ftz(gap);
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
                    let p = b.ex2_ftz(y);
                    b.assign(x, p);
                    sum = b.add(sum, p);
                }
            }
            let l = b.fma(l_run[idx], corr, sum);
            b.assign(l_run[idx], l);
            b.assign(m_run[idx], m_new);
        }
    }
    (corrs, all_same.expect("at least one row"))
}

/// Multiplies the output rows by their corrections, unless every row of the warp kept
/// its max (a vote): past the first tiles most do, and the rescale is `dim / 4`
/// multiplies a row.
pub(crate) fn rescale(b: &mut KernelBuilder, acc: &Frags, corrs: &[Reg<F32>], same: Reg<Pred>) {
    let warp_same = b.vote_all(same);
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
}

/// The probabilities of keys `16 kk..16 kk + 16` as the 16-bit A operand of one k16
/// product per fragment: the accumulators of n8 tiles `2 kk` and `2 kk + 1` are that
/// operand's layout.
pub(crate) fn probs_a(
    b: &mut KernelBuilder,
    ty: PtxType,
    s: &Frags,
    kk: usize,
) -> Vec<[Reg<U32>; 4]> {
    s.iter()
        .map(|s_m| {
            let (lo, hi) = (s_m[2 * kk], s_m[2 * kk + 1]);
            [
                b.cvt_pack(ty, lo[0], lo[1]),
                b.cvt_pack(ty, lo[2], lo[3]),
                b.cvt_pack(ty, hi[0], hi[1]),
                b.cvt_pack(ty, hi[2], hi[3]),
            ]
        })
        .collect()
}

/// Where the epilogue writes: the output, the head, the sequence's first token and
/// length, the bytes between tokens and of a head's row, the thread's first row and
/// column pair.
pub(super) struct OutRows {
    pub out: Reg<U64>,
    pub head: Reg<U32>,
    pub q_start: Reg<U32>,
    pub len_q: Reg<U32>,
    pub total_q: Reg<U32>,
    pub q_stride: Reg<U32>,
    pub row_bytes: u32,
    pub row_base: Reg<U32>,
    pub tq: Reg<U32>,
}

/// The epilogue: the row sums are spread over the four lanes of a row; divide, round
/// to 16 bits in pairs, store the rows inside the sequence, and where asked each row's
/// log-sum-exp. Its parameters (`lse`, `want_lse`) come last in the list and are read
/// only here (the loop's registers are at their limit).
pub(super) fn store_rows(
    b: &mut KernelBuilder,
    ty: PtxType,
    acc: &Frags,
    (m_run, l_run): (&[Reg<F32>], &[Reg<F32>]),
    o: &OutRows,
) {
    let g_lse = b.param_ptr("lse", PtxType::F32);
    let want_lse = b.param_u32("want_lse");
    let want_lse = b.setp::<U32>(Cmp::Ne, want_lse, 0u32);
    let lane0 = b.setp::<U32>(Cmp::Eq, o.tq, 0u32);
    let lse_lane = b.and_pred(want_lse, lane0);
    // lse[h, token]: this head's row of the [heads_q, total_q] array.
    let lse_row = b.mul(o.head, o.total_q);
    let lse_row = b.add(lse_row, o.q_start);
    // Columns are stored in 16-column (32-byte) pieces, one sector: a row's four lanes
    // hold a pair of columns each of two 8-column fragments (E: columns 2 tq, 2 tq + 1 of
    // the first, O: of the second); one shuffle between neighbours gives lane 0 E0 E1
    // (bytes 0-7 of the piece), lane 1 O0 O1 (16-23), lane 2 E2 E3 (8-15), lane 3 O2 O3
    // (24-31), so each lane stores 8 bytes and a warp instruction whole sectors (a lane's
    // 4 bytes a fragment had filled half of each sector written).
    let odd = b.and(o.tq, 1u32);
    let even = b.setp::<U32>(Cmp::Eq, odd, 0u32);
    let half_piece = b.shr(o.tq, 1u32);
    let o_col = b.shl(half_piece, 3u32);
    let o_col = b.mad(odd, 16u32, o_col);
    let o_head = b.mul(o.head, o.row_bytes);
    let o_head = b.add(o_head, o_col);
    let o_head = b.cvt::<U64, U32>(o_head, None);
    for (mi, acc_m) in acc.iter().enumerate() {
        for half in 0..2u32 {
            let idx = mi * 2 + half as usize;
            let mut l = l_run[idx];
            for d in [1u32, 2] {
                let sh = b.shfl(ShflMode::Bfly, l, d);
                l = b.add(l, sh);
            }
            let pos = b.setp::<F32>(Cmp::Gt, l, 0.0f32);
            let inv = b.rcp(l, Rounding::Rn);
            let inv = b.selp::<F32>(inv, 0.0f32, pos);
            let r = b.add(o.row_base, mi as u32 * 16 + half * 8);
            let ok: Reg<Pred> = b.setp::<U32>(Cmp::Lt, r, o.len_q);
            let tok = b.add(o.q_start, r);
            let off = b.mul_wide(tok, o.q_stride);
            let addr = b.add(o.out, off);
            let addr = b.add(addr, o_head);
            // ln sum_j e^(scale s_j) = (m + log2 l) ln 2, m the running max in base 2;
            // -inf for a row that sees no key (l = 0).
            let with_lse = b.and_pred(ok, lse_lane);
            b.predicated(with_lse, |b| {
                let lg = b.lg2(l);
                let lse = b.add(m_run[idx], lg);
                let lse = b.mul(lse, std::f32::consts::LN_2);
                let at = b.add(lse_row, r);
                let at = elem_addr(b, g_lse, at, 4);
                b.st::<F32, U64>(Space::Global, at, 0, lse);
            });
            let pairs: Vec<Reg<U32>> = acc_m
                .iter()
                .map(|frag| {
                    let x = b.mul(frag[2 * half as usize], inv);
                    let y = b.mul(frag[2 * half as usize + 1], inv);
                    b.cvt_pack(ty, x, y)
                })
                .collect();
            // Every lane shuffles (the row's four lanes agree on `ok`; a shuffle must not
            // be predicated off), then the rows inside the sequence store.
            debug_assert!(
                pairs.len().is_multiple_of(2),
                "head dims are multiples of 16"
            );
            let pieces: Vec<[Reg<U32>; 2]> = pairs
                .chunks(2)
                .map(|p| {
                    let send = b.selp(p[1], p[0], even);
                    let got = b.shfl(ShflMode::Bfly, send, 1u32);
                    [b.selp(p[0], got, even), b.selp(got, p[1], even)]
                })
                .collect();
            b.predicated(ok, |b| {
                for (k, piece) in pieces.iter().enumerate() {
                    b.st_vec(Space::Global, addr, (k * 32) as i64, piece);
                }
            });
        }
    }
}
