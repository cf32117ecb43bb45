//! The frame the one-vector integer tensor-core kernels share (qgemv_q4k_mma_one.rs,
//! qgemv_q6k_mma_one.rs): a block takes a 16-row tile (the `mma`'s M), warp `w` of `W`
//! super-blocks `w, w + W, ...` of its rows, and the warps' sums meet in shared memory.

use super::qgemv_dp4a::{Q8kParams, q8k_params};
use crate::ptx::ir::Label;
use crate::ptx::{Cmp, F32, KernelBuilder, Pred, Reg, ShflMode, Space, U32, U64};

/// Rows a block: the product's M.
pub(super) const TILE_ROWS: u32 = 16;

/// Which sixteen rows a tile (a block) takes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum TileRows {
    /// Rows `16 T .. 16 T + 16` of tile `T`.
    Adjacent,
    /// Sixteen rows `S` apart that all start at the same offset past an 8-byte boundary:
    /// `S` is [`row_spacing`] of the row's bytes (1, 2, 4 or 8), and tile `T` takes rows
    /// `16 S (T / S) + T % S + S i`. For super-blocks only 2-byte aligned (Q6_K's 210
    /// bytes), whose rows start at up to four offsets mod 8 from one row to the next.
    SameAlignment,
}

/// Rows between two rows of `row_bytes` bytes that start at the same offset past an
/// 8-byte boundary: 8 over the largest power of two (at most 8) dividing `row_bytes`.
pub(crate) fn row_spacing(row_bytes: usize) -> usize {
    8 >> row_bytes.trailing_zeros().min(3)
}

/// log2 of [`row_spacing`] in the kernel: 0, 1, 2 or 3 as `row_bytes` is 0, 4, 2 or 6,
/// or odd mod 8.
fn spacing_log2(b: &mut KernelBuilder, row_bytes: Reg<U32>) -> Reg<U32> {
    let [by8, by4, by2] = [7u32, 3, 1].map(|m| {
        let low = b.and(row_bytes, m);
        b.setp::<U32>(Cmp::Eq, low, 0u32)
    });
    let odd_or_two = b.selp(2u32, 3u32, by2);
    let not_eight = b.selp(1u32, odd_or_two, by4);
    b.selp(0u32, not_eight, by8)
}

/// Tiles (blocks) that cover `rows` rows of `row_bytes` bytes, as [`TileRows`] lays them
/// (the bytes matter only to [`TileRows::SameAlignment`]): each kernel's grid.
pub(crate) fn tiles_for(rows: usize, row_bytes: usize, layout: TileRows) -> usize {
    match layout {
        TileRows::Adjacent => rows.div_ceil(TILE_ROWS as usize),
        TileRows::SameAlignment => {
            let s = row_spacing(row_bytes);
            rows.div_ceil(TILE_ROWS as usize * s) * s
        }
    }
}

/// A lane of a 16-row tile kernel: lane `4g + t` of warp `warp` holds rows `g` and `g +
/// 8` of tile `tile` (the block; which rows those are, [`TileRows`]), whose first
/// super-blocks `heads` points at (rows past the last read the last one, their sums never
/// stored; `pin_row`, the first of them clamped, is [`super::qgemv_k::end_block`]'s).
pub(super) struct TileLane {
    pub tid: Reg<U32>,
    pub warp: Reg<U32>,
    pub g: Reg<U32>,
    pub t: Reg<U32>,
    pub tile: Reg<U32>,
    pub heads: [Reg<U64>; 2],
    pub pin_row: Reg<U32>,
    /// For [`TileRows::SameAlignment`]: the tile's first row, log2 of `S`, and where a
    /// tile without rows goes.
    spaced: Option<(Reg<U32>, Reg<U32>, Label)>,
    /// The last row a lane reads (rows past it read it) and a row's bytes.
    rows_at: (Reg<U32>, Reg<U32>),
}

impl TileLane {
    /// A tile kernel's start: its builder (`threads` a block, `min_blocks` a
    /// multiprocessor asked of ptxas), its [`q8k_params`] (the next grid allowed to
    /// start), and the lane, over super-blocks of `bb` bytes.
    pub(super) fn begin(
        name: String,
        (threads, min_blocks): (u32, u32),
        bb: u32,
        layout: TileRows,
    ) -> (KernelBuilder, Q8kParams, TileLane) {
        let mut b = KernelBuilder::new(name);
        b.max_threads(threads);
        b.min_blocks(min_blocks);
        let p = q8k_params(&mut b, false);
        b.allow_next_grid();
        let tl = TileLane::new(&mut b, &p, bb, layout);
        (b, p, tl)
    }

    fn new(b: &mut KernelBuilder, p: &Q8kParams, bb: u32, layout: TileRows) -> TileLane {
        let tid = b.tid_x();
        let warp = b.shr(tid, 5u32);
        let lane = b.and(tid, 31u32);
        let g = b.shr(lane, 2u32);
        let t = b.and(lane, 3u32);
        let tile = b.ctaid_x();
        let last = b.sub(p.rows, 1u32);
        // Rows g and g + 8: 16 T + g and 8 on, or base + S g and 8 S on.
        let (row0, row_bytes, last, spaced) = match layout {
            TileRows::Adjacent => {
                let row0 = b.mad(tile, TILE_ROWS, g);
                (row0, b.mul(p.blocks, bb), last, None)
            }
            TileRows::SameAlignment => {
                let row_bytes = b.mul(p.blocks, bb);
                let shift = spacing_log2(b, row_bytes);
                let group = b.shr(tile, shift);
                let group_first = b.shl(group, shift);
                let phase = b.sub(tile, group_first);
                let base = b.shl(group_first, 4u32);
                let base = b.add(base, phase);
                // A tile of the last group may hold no row at all (its first row lies
                // past the end): the whole block leaves (a uniform branch to
                // [`TileLane::store`]'s end).
                let none = b.setp::<U32>(Cmp::Gt, base, last);
                let empty = b.new_label();
                b.bra_if(none, false, empty, true);
                // Rows past the end read the last row at the tile's offset, not the
                // last row (whose 8-byte loads would be misaligned).
                let past_base = b.sub(last, base);
                let one = b.mov(1u32);
                let spacing = b.shl(one, shift);
                let mask = b.sub(spacing, 1u32);
                let over = b.and(past_base, mask);
                let last = b.sub(last, over);
                let mine = b.shl(g, shift);
                (
                    b.add(base, mine),
                    row_bytes,
                    last,
                    Some((base, shift, empty)),
                )
            }
        };
        let heads = [0u32, 8].map(|extra| {
            let r = match spaced {
                Some((_, shift, _)) if extra > 0 => {
                    let eight = b.mov(extra);
                    let apart = b.shl(eight, shift);
                    b.add(row0, apart)
                }
                _ => b.add(row0, extra),
            };
            let r = b.min(r, last);
            let off = b.mul_wide(r, row_bytes);
            b.add(p.w, off)
        });
        TileLane {
            tid,
            warp,
            g,
            t,
            tile,
            heads,
            pin_row: b.min(row0, last),
            spaced,
            rows_at: (last, row_bytes),
        }
    }

    /// Where the tile's row `r` (0..16) starts in `w`, as [`TileLane::heads`] are for the
    /// lane's own two: for a kernel whose lanes copy rows other than their own.
    pub(super) fn row_head(&self, b: &mut KernelBuilder, w: Reg<U64>, r: Reg<U32>) -> Reg<U64> {
        let (last, row_bytes) = self.rows_at;
        let row = match self.spaced {
            Some((base, shift, _)) => {
                let apart = b.shl(r, shift);
                b.add(base, apart)
            }
            None => b.mad(self.tile, TILE_ROWS, r),
        };
        let row = b.min(row, last);
        let off = b.mul_wide(row, row_bytes);
        b.add(w, off)
    }

    /// Rows `g` and `g + 8`'s sums `acc` over the four lanes `t` (their sub-blocks),
    /// then over the tile's `warps` warps in shared memory, into `y`; ends the kernel.
    pub(super) fn store(
        &self,
        b: &mut KernelBuilder,
        p: &Q8kParams,
        warps: u32,
        acc: [Reg<F32>; 2],
    ) {
        let TileLane {
            tid,
            warp,
            g,
            t,
            tile,
            ..
        } = *self;
        let partial = |b: &mut KernelBuilder| b.shared_array("partial", warps * TILE_ROWS * 4, 16);
        let spaced = self.spaced;
        let row = |b: &mut KernelBuilder| match spaced {
            None => b.mad(tile, TILE_ROWS, tid),
            Some((base, shift, _)) => {
                let r = b.shl(tid, shift);
                b.add(base, r)
            }
        };
        meet_and_store(b, p, [tid, warp, g, t], (warps, partial), acc, row);
        b.ret();
        if let Some((_, _, empty)) = self.spaced {
            b.place(empty);
            b.ret();
        }
    }
}

/// Rows `g` and `g + 8`'s sums `acc` (lane `4g + t` of warp `warp`, thread `tid`) over
/// the four lanes `t`, then over `warps` warps in shared memory at `partial(b)` (`warps`
/// x 16 floats, after a block barrier), stored into `y` by threads `tid < 16` at row
/// `row(b)` where it is below the product's rows.
pub(super) fn meet_and_store(
    b: &mut KernelBuilder,
    p: &Q8kParams,
    [tid, warp, g, t]: [Reg<U32>; 4],
    (warps, partial): (u32, impl FnOnce(&mut KernelBuilder) -> Reg<U32>),
    acc: [Reg<F32>; 2],
    row: impl FnOnce(&mut KernelBuilder) -> Reg<U32>,
) {
    let sums = acc.map(|a| {
        let x = b.shfl(ShflMode::Bfly, a, 1u32);
        let a = b.add(a, x);
        let x = b.shfl(ShflMode::Bfly, a, 2u32);
        b.add(a, x)
    });
    let partial = partial(b);
    let mine = b.mad(warp, TILE_ROWS, g);
    let mine = b.mad(mine, 4u32, partial);
    let lane_t0 = b.setp::<U32>(Cmp::Eq, t, 0u32);
    b.predicated(lane_t0, |b| {
        b.st::<F32, U32>(Space::Shared, mine, 0, sums[0]);
        b.st::<F32, U32>(Space::Shared, mine, 32, sums[1]);
    });
    b.bar_sync();
    let row = row(b);
    let in_tile = b.setp::<U32>(Cmp::Lt, tid, TILE_ROWS);
    let in_rows = b.setp::<U32>(Cmp::Lt, row, p.rows);
    let keep = b.and_pred(in_tile, in_rows);
    b.if_then(keep, false, |b| {
        let at = b.mad(tid, 4u32, partial);
        let mut sum = b.ld::<F32, U32>(Space::Shared, at, 0);
        for w in 1..warps {
            let x = b.ld::<F32, U32>(Space::Shared, at, i64::from(w * TILE_ROWS * 4));
            sum = b.add(sum, x);
        }
        let off = b.mul_wide(row, 4u32);
        let out = b.add(p.y, off);
        b.st::<F32, U64>(Space::Global, out, 0, sum);
    });
}

/// Where a pass waits for the previous grid, after its weight loads (the weights are
/// uploaded, never written by a kernel; the activations may be the previous kernel's
/// output).
#[derive(Clone, Copy)]
pub(super) enum PassWait {
    /// Not here (a pass after the first, unrolled apart: [`tile_passes`]).
    Never,
    /// Here (the first pass, unrolled apart).
    Always,
    /// Where the predicate holds (the first pass of one loop: [`tile_loop`]).
    Where(Reg<Pred>),
}

/// A pass's start after its weight loads: the wait for the previous grid as `wait` says,
/// then the lane's activation quants, `act_off` bytes into super-block `sb`'s.
pub(super) fn act_after_weights(
    b: &mut KernelBuilder,
    p: &Q8kParams,
    sb: Reg<U32>,
    act_off: Reg<U32>,
    wait: PassWait,
) -> Reg<U64> {
    match wait {
        PassWait::Never => {}
        PassWait::Always => b.wait_for_previous_grid(),
        PassWait::Where(first) => b.predicated(first, |b| b.wait_for_previous_grid()),
    }
    let ao = b.mad(sb, 256u32, act_off);
    let ao = b.cvt::<U64, U32>(ao, None);
    b.add(p.qs, ao)
}

/// The lane's activation sums of 16 of super-block `sb`, from its sum `first`.
pub(super) fn sums_at(
    b: &mut KernelBuilder,
    p: &Q8kParams,
    sb: Reg<U32>,
    first: Reg<U32>,
) -> Reg<U64> {
    let so = b.mad(sb, 16u32, first);
    let so = b.mul_wide(so, 4u32);
    b.add(p.bsums, so)
}

/// The activations' scale of super-block `sb`.
pub(super) fn scale_at(b: &mut KernelBuilder, p: &Q8kParams, sb: Reg<U32>) -> Reg<F32> {
    let off = b.mul_wide(sb, 4u32);
    let at = b.add(p.d, off);
    b.ld::<F32, U64>(Space::Global, at, 0)
}

/// Warp `warp` of `warps` runs `pass(b, sb, wait)` over super-blocks `warp, warp + warps,
/// ...` below `blocks`, the first pass unrolled apart to wait for the previous grid
/// after its weight loads (a warp without super-blocks just waits).
pub(super) fn tile_passes(
    b: &mut KernelBuilder,
    warp: Reg<U32>,
    warps: u32,
    blocks: Reg<U32>,
    pass: impl Fn(&mut KernelBuilder, Reg<U32>, PassWait),
) {
    let any = b.setp::<U32>(Cmp::Lt, warp, blocks);
    b.if_else(
        any,
        false,
        |b| pass(b, warp, PassWait::Always),
        |b| b.wait_for_previous_grid(),
    );
    let second = b.add(warp, warps);
    b.for_loop(second, blocks, warps, false, |b, sb| {
        pass(b, sb, PassWait::Never)
    });
}

/// [`tile_passes`] as one loop, the first pass's wait predicated, then a wait for the
/// warps without super-blocks (the others' returns at once): half the code, for a kernel
/// that builds a loop per case. Q6_K's (four, one per misalignment): 1.00-1.02x the
/// unrolled form on an H200 (session 56).
pub(super) fn tile_loop(
    b: &mut KernelBuilder,
    warp: Reg<U32>,
    warps: u32,
    blocks: Reg<U32>,
    pass: impl FnOnce(&mut KernelBuilder, Reg<U32>, PassWait),
) {
    b.for_loop(warp, blocks, warps, false, |b, sb| {
        let first = b.setp::<U32>(Cmp::Eq, sb, warp);
        pass(b, sb, PassWait::Where(first))
    });
    b.wait_for_previous_grid();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_of_a_spaced_tile_start_at_one_offset_and_tiles_cover_every_row() {
        assert_eq!([840, 420, 210, 630, 105].map(row_spacing), [1, 2, 4, 4, 8]);
        for row_bytes in [840usize, 420, 210, 630, 1050, 105] {
            let s = row_spacing(row_bytes);
            for rows in [1usize, 15, 16, 17, 33, 64, 65, 200] {
                let tiles = tiles_for(rows, row_bytes, TileRows::SameAlignment);
                let mut seen = vec![0u32; rows];
                for tile in 0..tiles {
                    // The kernel's layout: group tile / S, phase tile % S, rows S apart.
                    let base = 16 * s * (tile / s) + tile % s;
                    let mine: Vec<usize> = (0..16).map(|i| base + s * i).collect();
                    let offset = |r: usize| r * row_bytes % 8;
                    assert!(mine.iter().all(|&r| offset(r) == offset(base)));
                    mine.iter()
                        .filter(|&&r| r < rows)
                        .for_each(|&r| seen[r] += 1);
                }
                assert!(seen.iter().all(|&n| n == 1), "{row_bytes} {rows}: {seen:?}");
            }
        }
        assert_eq!(tiles_for(33, 840, TileRows::Adjacent), 3);
    }
}
