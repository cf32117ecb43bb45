//! [`super::qgemv_q6k_mma_one`]'s kernel at two blocks a multiprocessor with its weights
//! copied into shared memory by `cp.async` before its products, not loaded into
//! registers ([`super::qgemv_q6k_mma_one::TileBlocks::StagedTwo`]): the same tile, lanes
//! and products, read from a stage.
//!
//! Why: the register form holds a super-block's 12-24 pieces a lane in registers until
//! its products, so a warp has one super-block in flight and issues many small loads
//! (Nsight Compute, H200: of 13.3 cycles between a warp's instructions, 5.0 waiting on
//! global loads and 2.4 on the load queue). Here a warp's step (its 16 rows' super-block)
//! is seven 16-byte `cp.async` a lane, and the next step's copies are in flight, holding
//! no register, while this step's products read the current stage; the next step's
//! activations (quants, sums, scale) wait in registers. H200, probe forms
//! (`scripts/qgemv_q6k_staged_forms.cuh`, µs in a graph, two blocks a multiprocessor
//! both): 14.0-14.2 against 15.1-15.4 at 4096x14336, 5.27-5.36 against 5.46-5.55 at
//! 4096x4096, 16.5 against 16.6-16.8 at 14336x4096, 32.1-32.4 against 33.5-33.9 at
//! 32000x4096. With rows of 16 super-blocks (two steps a warp) trueno's build lost to
//! the register form (8192x4096: 10.8 against 9.9), so only long rows take it.
//!
//! A row's slot is 14 chunks of 16 bytes (224): its super-block and the bytes before it
//! back to a 16-byte boundary (a quantized matrix's buffer ends in
//! [`crate::memory::SLACK_BYTES`] of zeros for the last row's last chunk). Chunk `32i +
//! lane` of a step is tile row `/ 14`, chunk `% 14`, so a copy instruction covers
//! whole runs of rows. Eight super-blocks (1680 bytes) are 0 mod 16, so each row's
//! offset in its slot is the same at every step of a warp; a tile's rows share their
//! offset mod 8 (`TileRows::SameAlignment` in qgemv_mma_tile.rs), so one loop per
//! offset mod 8 reads the pieces as the register form does, from each row's slot plus
//! its 0 or 8 bytes. The 224-byte pitch (56 words) puts a half-warp's 8-byte reads of
//! four rows in distinct banks.

use super::qgemv_dp4a::Q8kParams;
use super::qgemv_mma_staged::{STAGES, drain, prefetch, swap_stages, wait_stage};
use super::qgemv_mma_tile::{PassWait, TILE_ROWS, TileLane, TileRows, act_after_weights};
use super::qgemv_q6k::BLOCK_BYTES;
use super::qgemv_q6k_mma_lane::{ActSums, LaneB, Weights, act_sums, act_words, super_block};
use super::qgemv_q6k_mma_one::{QgemvDevice, WARPS};
use crate::ptx::{Cmp, KernelBuilder, KernelIr, Reg, U32, U64};

/// A row's slot in a stage: up to 14 bytes before its super-block, the 210 bytes.
const SLOT: u32 = 224;
/// 16-byte chunks a slot.
const CHUNKS: u32 = SLOT / 16;
/// A warp's stage: the tile's rows.
const STAGE: u32 = TILE_ROWS * SLOT;
/// Chunks a lane copies a step.
const LANE_CHUNKS: u32 = TILE_ROWS * CHUNKS / 32;

/// Dynamic shared memory a block: each warp's stages.
pub(super) const SHARED_BYTES: u32 = WARPS * STAGES * STAGE;

/// Blocks a multiprocessor asked of ptxas.
const BLOCKS: u32 = 2;

// A super-block up to 14 bytes past its slot's 16-byte boundary still fits, the slack
// past the matrix covers the last chunk, the lanes split a stage's chunks evenly, and
// two blocks (with the tile's sums and the 1 KiB a block reserved) fit an A100's 164 KiB.
const _: () = assert!(14 + BLOCK_BYTES <= SLOT);
const _: () = assert!((SLOT - BLOCK_BYTES) as usize <= crate::memory::SLACK_BYTES);
const _: () = assert!(LANE_CHUNKS * 32 == TILE_ROWS * CHUNKS);
const _: () = assert!(BLOCKS * (SHARED_BYTES + 1024 + 512) <= 164 * 1024);

/// Whether two of the kernel's blocks fit a multiprocessor of `dev`
/// ([`super::blocks_by_shared_memory`]): the residency it was measured at. Not on sm_86 /
/// sm_89 (99 KiB a block).
pub(super) fn fits(dev: QgemvDevice) -> bool {
    let block = (SHARED_BYTES + WARPS * TILE_ROWS * 4) as usize;
    super::blocks_by_shared_memory(block, dev.shared_per_block) >= BLOCKS as usize
}

/// The kernel (see the module's doc).
pub(super) fn build(name: String) -> KernelIr {
    let (mut b, p, tl) = TileLane::begin(
        name,
        (32 * WARPS, BLOCKS),
        BLOCK_BYTES,
        TileRows::SameAlignment,
    );
    let TileLane {
        tid,
        warp,
        g,
        t,
        heads,
        ..
    } = tl;
    let lane_b = LaneB::new(&mut b, g, t);
    let lane = b.and(tid, 31u32);
    let acc = [b.mov(0.0f32), b.mov(0.0f32)];
    let warp_off = b.mul_wide(warp, BLOCK_BYTES);
    // Chunk 32i + lane's source at the warp's first step.
    let src: Vec<Reg<U64>> = (0..LANE_CHUNKS)
        .map(|i| {
            let f = b.add(lane, 32 * i);
            let r = b.div_int(f, CHUNKS);
            let c = b.rem(f, CHUNKS);
            let head = tl.row_head(&mut b, p.w, r);
            let at = b.add(head, warp_off);
            let at = b.and(at, !15u64);
            let c16 = b.mul_wide(c, 16u32);
            b.add(at, c16)
        })
        .collect();
    let dst = b.shl(lane, 4u32);
    // The lane's rows in a stage: each row's slot and its 0 or 8 bytes to the 8-byte
    // boundary before its super-block; and the offset past that boundary, the same for
    // every row of the tile.
    let starts = heads.map(|h| {
        let at = b.add(h, warp_off);
        b.cvt::<U32, U64>(at, None)
    });
    let rows = [0, 1].map(|k| {
        let r = b.add(g, 8 * k as u32);
        let slot = b.mul(r, SLOT);
        let eight = b.and(starts[k], 8u32);
        b.add(slot, eight)
    });
    let o_warp = b.and(starts[0], 7u32);
    let smem = b.dynamic_shared();
    let mine = b.mad(warp, STAGES * STAGE, smem);
    let sixteen = b.mov(16u32);
    let copy = |b: &mut KernelBuilder, sb: Reg<U32>, stage: Reg<U32>| {
        let rel = b.sub(sb, warp);
        let off = b.mul_wide(rel, BLOCK_BYTES);
        let to = b.add(stage, dst);
        for (i, &s) in src.iter().enumerate() {
            let from = b.add(s, off);
            let at = b.add(to, 512 * i as u32);
            b.cp_async_16(at, from, sixteen);
        }
    };
    for o in [0u32, 2, 4, 6] {
        let is = b.setp::<U32>(Cmp::Eq, o_warp, o);
        b.if_then(is, true, |b| {
            let cur = b.mov(mine);
            let next = b.add(mine, STAGE);
            // The weights are uploaded, never written by a kernel: the first step's
            // copies go before the wait for the previous grid (the activations may be
            // its output).
            prefetch(b, (warp, p.blocks), |b| copy(b, warp, cur));
            b.wait_for_previous_grid();
            // The activations a step ahead in registers (the first step's: the row's
            // last super-block where the warp has none).
            let last = b.sub(p.blocks, 1u32);
            let first = b.min(warp, last);
            let acts = step_acts(b, (&p, &lane_b), first);
            b.for_loop(warp, p.blocks, WARPS, true, |b, sb| {
                let ahead = b.add(sb, WARPS);
                prefetch(b, (ahead, p.blocks), |b| copy(b, ahead, next));
                let more = b.setp::<U32>(Cmp::Lt, ahead, p.blocks);
                let then = b.selp(ahead, sb, more);
                let coming = step_acts(b, (&p, &lane_b), then);
                wait_stage(b);
                let at = rows.map(|r| b.add(cur, r));
                let w = Weights::from_stage(b, &lane_b, o, at);
                let (xs, sums) = acts;
                super_block(b, (&p, &lane_b, o), (sb, xs, Some(sums)), &w, acc);
                assign_acts(b, &acts, &coming);
                swap_stages(b, [cur, next]);
            });
            drain(b);
        });
    }
    tl.store(&mut b, &p, WARPS, acc);
    b.finish()
}

/// A step's activations as the lane reads them: its quants ([`act_words`]), sums and
/// scale ([`act_sums`]).
type StepActs = ([[Reg<U32>; 2]; 2], ActSums);

/// Super-block `sb`'s [`StepActs`].
fn step_acts(b: &mut KernelBuilder, (p, lane): (&Q8kParams, &LaneB), sb: Reg<U32>) -> StepActs {
    let act = act_after_weights(b, p, sb, lane.act_off, PassWait::Never);
    (act_words(b, act), act_sums(b, (p, lane), sb))
}

/// `to`'s registers take `from`'s values (the next step's, for the loop's next trip).
fn assign_acts(b: &mut KernelBuilder, to: &StepActs, from: &StepActs) {
    let ((xt, (st, dt)), (xf, (sf, df))) = (to, from);
    for (t, f) in xt.iter().flatten().zip(xf.iter().flatten()) {
        b.assign(*t, *f);
    }
    for (t, f) in st.iter().flatten().zip(sf.iter().flatten()) {
        b.assign(*t, *f);
    }
    b.assign(*dt, *df);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::report::bank_ways_at;

    #[test]
    fn two_staged_blocks_fit_an_a100_or_h100_and_not_an_sm_89() {
        assert!(fits(QgemvDevice::HOPPER_132));
        assert!(fits(QgemvDevice::A100_108));
        let sm89 = QgemvDevice {
            shared_per_block: 99 * 1024,
            ..QgemvDevice::A100_108
        };
        assert!(!fits(sm89));
    }

    #[test]
    fn a_half_warps_reads_of_a_stage_miss_each_others_banks() {
        // Lane 4g + t reads 8 bytes at row g's slot + 8t (+ the row's 0 or 8): one
        // wavefront a half-warp.
        for eight in [0, 8] {
            let at = |l: i64| (l / 4) * i64::from(SLOT) + eight + 8 * (l % 4);
            assert_eq!(bank_ways_at(at, 8), 1);
        }
    }
}
