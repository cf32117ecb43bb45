//! [`super::qgemv_q6k_mma_one`]'s products with each block's tiles copied whole into
//! shared memory by the copy engine ([`super::qgemv_q6k_mma_one::TileBlocks::Bulk`]):
//! for rows of 4096 columns on sm_90 and later.
//!
//! Why: with rows of 16 super-blocks a warp has two super-blocks of a tile, so the
//! register and `cp.async` forms run in waves: every warp of a wave loads, then all
//! compute while the memory idles (H200: 1.10x a plain read for the loads alone at
//! 14336x4096, the products 12% more; persistent grids and staging did not help). Here a
//! tile's 16 rows are contiguous (16 row lengths from a 16-byte boundary at any width), so
//! thread 0 asks the copy engine for a whole tile in one `cp.async.bulk` per stage (one
//! transaction barrier each): with two stages a block, the next tile streams in while this
//! one's products run, and a persistent grid keeps each block's stream going to its last
//! tile. H200, µs in a graph against the kernels routed before (alternated in one call):
//! 13.8 against the three-block register form's 15.2 at 14336x4096, 28.4 against 30.2 at
//! 32000x4096; one tile a block at three or four blocks a multiprocessor 5.0 against the
//! `dp4a` kernel's 5.5 at 4096x4096 and 8.9 against 9.9 at 8192x4096 (the probe's forms,
//! `scripts/qgemv_q6k_bulk_forms.cuh`, first: [`bulk_ring_for`]).
//!
//! Rows of whole 1024-column groups only (a row 0 mod 8 bytes), so that a tile's rows in
//! a stage all start on an 8-byte boundary and warp `w`'s super-blocks `w, w + 8, ...`
//! sit `210 w mod 8` bytes past one: the register kernel's per-offset loops read them. A
//! last tile of fewer rows copies those (rounded up to 16 bytes: a quantized matrix's
//! buffer ends in [`crate::memory::SLACK_BYTES`]); its lanes past the last row read the
//! last row, their sums never stored.

use super::qgemv_dp4a::q8k_params;
use super::qgemv_mma_tile::{PassWait, TILE_ROWS, act_after_weights, meet_and_store};
use super::qgemv_q6k::BLOCK_BYTES;
use super::qgemv_q6k_mma_lane::{LaneB, Weights, act_words, super_block};
use super::qgemv_q6k_mma_one::{QgemvDevice, WARPS};
use crate::ptx::{Cmp, KernelBuilder, KernelIr, Reg, U32};

/// Tiles a block holds in shared memory at once, blocks a multiprocessor, and the
/// multiprocessors its grid is capped at (a persistent grid of `blocks` a multiprocessor;
/// 0: a block a tile).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BulkRing {
    /// Tiles in shared memory a block: 1 (copy, then compute) or 2 (a ring).
    pub stages: u32,
    /// Blocks a multiprocessor asked of ptxas.
    pub blocks: u32,
    /// Multiprocessors the grid is sized for (0: one block a tile).
    pub sms: u32,
}

/// Static shared memory a block: the tile's sums in two buffers, the stages' barriers.
const STATIC_BYTES: u32 = 2 * WARPS * TILE_ROWS * 4 + 16;

impl BulkRing {
    /// One tile a block, three blocks a multiprocessor: up to three tiles a multiprocessor.
    pub const ONE_OF_THREE: BulkRing = BulkRing {
        stages: 1,
        blocks: 3,
        sms: 0,
    };
    /// One tile a block, four blocks a multiprocessor.
    pub const ONE_OF_FOUR: BulkRing = BulkRing {
        stages: 1,
        blocks: 4,
        sms: 0,
    };
    /// Two stages a block, two blocks a multiprocessor, a persistent grid: more tiles.
    pub const RING_OF_TWO: BulkRing = BulkRing {
        stages: 2,
        blocks: 2,
        sms: 0,
    };

    /// This ring with its grid sized for `sms` multiprocessors.
    pub const fn on(self, sms: u32) -> BulkRing {
        BulkRing { sms, ..self }
    }

    /// Dynamic shared memory a block for rows of `row_blocks` super-blocks.
    ///
    /// ```
    /// use trueno_gpu::kernels::qgemv_q6k_mma_one_bulk::BulkRing;
    ///
    /// // Two tiles of 16 rows of 16 super-blocks (4096 columns).
    /// assert_eq!(BulkRing::RING_OF_TWO.shared_bytes(16), 2 * 16 * 16 * 210);
    /// ```
    pub fn shared_bytes(self, row_blocks: usize) -> usize {
        self.stages as usize * TILE_ROWS as usize * row_blocks * BLOCK_BYTES as usize
    }

    /// Whether a device whose blocks may take `per_block` bytes of shared memory (opt-in)
    /// holds `blocks` of these blocks a multiprocessor for rows of `row_blocks`
    /// super-blocks ([`super::blocks_by_shared_memory`]).
    ///
    /// ```
    /// use trueno_gpu::kernels::qgemv_q6k_mma_one_bulk::BulkRing;
    ///
    /// assert!(BulkRing::RING_OF_TWO.fits(16, 227 * 1024)); // H100, H200
    /// assert!(!BulkRing::RING_OF_TWO.fits(16, 99 * 1024)); // sm_89
    /// ```
    pub fn fits(self, row_blocks: usize, per_block: u32) -> bool {
        let block = self.shared_bytes(row_blocks) + STATIC_BYTES as usize;
        super::blocks_by_shared_memory(block, per_block) >= self.blocks as usize
    }

    /// The grid for `tiles` tiles: every tile a block, or at most `blocks` a
    /// multiprocessor, each block taking tiles `b, b + grid, ...`.
    pub fn grid(self, tiles: usize) -> usize {
        match self.sms {
            0 => tiles,
            sms => tiles.min((self.blocks * sms) as usize),
        }
    }
}

/// The copy engine's tiles ([`super::qgemv_q6k_mma_one::TileBlocks::Bulk`]) for a `rows`
/// x `cols` Q6_K product on `dev`, where measured to win: bulk copies, rows of
/// [`BULK_ROW_BLOCKS`] super-blocks, at least a tile a multiprocessor; one tile a block at
/// three blocks a multiprocessor up to three tiles each, at four up to four, then a
/// persistent ring of two at two; `None` elsewhere, or where `dev`'s shared memory does
/// not hold the ring ([`BulkRing::fits`]). H200, the probe's forms
/// (`scripts/qgemv_q6k_bulk_forms.cuh`), µs in a graph:
///
/// | rows x 4096 | one of three | one of four | ring of two | registers (as routed before) |
/// |---|---:|---:|---:|---:|
/// | 4096 | **5.04-5.08** | 5.74-5.97 | 5.42-5.43 | 5.49-5.50 (two; `dp4a` 5.5) |
/// | 8192 | 9.18-9.21 | **8.90-8.91** | 9.50-9.54 | 9.69-9.70 (two) |
/// | 12672 | 12.59-12.64 | 13.24-13.28 | **11.61-11.62** | 13.15-13.16 (three) |
/// | 14336 | 14.30 | 15.07 | **13.30-13.35** | 15.22-15.46 (three) |
/// | 32000 | 29.59-29.68 | 29.69-29.84 | **27.94-27.95** | 29.54-29.65 (three) |
pub fn bulk_ring_for(rows: usize, cols: usize, dev: QgemvDevice) -> Option<BulkRing> {
    let row_blocks = cols / 256;
    if !dev.bulk_copies || row_blocks != BULK_ROW_BLOCKS || !cols.is_multiple_of(256) {
        return None;
    }
    let (tiles, sms) = (rows.div_ceil(TILE_ROWS as usize), dev.sms as usize);
    let ring = match tiles {
        t if t < sms => return None,
        t if t <= 3 * sms => BulkRing::ONE_OF_THREE,
        t if t <= 4 * sms => BulkRing::ONE_OF_FOUR,
        _ => BulkRing::RING_OF_TWO.on(dev.sms),
    };
    ring.fits(row_blocks, dev.shared_per_block).then_some(ring)
}

/// Super-blocks a row of the products [`bulk_ring_for`] gives the copy engine's tiles:
/// 4096 columns (Llama's and Mistral's hidden size), where they were measured. The kernel
/// takes any rows of whole 1024-column groups whose tiles fit shared memory.
pub const BULK_ROW_BLOCKS: usize = 16;

/// The kernel (see the module's doc).
pub(super) fn build(name: String, ring: BulkRing) -> KernelIr {
    assert!(matches!(ring.stages, 1 | 2), "one or two stages");
    let mut b = KernelBuilder::new(name);
    b.max_threads(32 * WARPS);
    b.min_blocks(ring.blocks);
    let p = q8k_params(&mut b, false);
    b.allow_next_grid();
    let tid = b.tid_x();
    let warp = b.shr(tid, 5u32);
    let lane = b.and(tid, 31u32);
    let g = b.shr(lane, 2u32);
    let t = b.and(lane, 3u32);
    let lane_b = LaneB::new(&mut b, g, t);
    let row_bytes = b.mul(p.blocks, BLOCK_BYTES);
    let tile_bytes = b.mul(row_bytes, TILE_ROWS);
    let tiles = b.add(p.rows, TILE_ROWS - 1);
    let tiles = b.shr(tiles, 4u32);
    let (first, grid) = (b.ctaid_x(), b.nctaid_x());
    let stages = b.dynamic_shared();
    let full = b.shared_array("bulk_full", 8 * ring.stages, 8);
    let partial = b.shared_array("partial", 2 * WARPS * TILE_ROWS * 4, 16);
    let thread0 = b.setp::<U32>(Cmp::Eq, tid, 0u32);
    // Tile `tile`'s rows (the last tile's up to the matrix's end) into stage `k`.
    let fill = |b: &mut KernelBuilder, tile: Reg<U32>, k: Reg<U32>| {
        let first_row = b.shl(tile, 4u32);
        let left = b.sub(p.rows, first_row);
        let n = b.min(left, TILE_ROWS);
        let bytes = b.mad(n, row_bytes, 15u32);
        let bytes = b.and(bytes, !15u32);
        let bar = b.mad(k, 8u32, full);
        b.mbar_arrive_expect_tx_reg(bar, 0, bytes);
        let dst = b.mad(k, tile_bytes, stages);
        let off = b.mul_wide(tile, tile_bytes);
        let src = b.add(p.w, off);
        b.bulk_copy(dst, src, bytes, bar);
    };
    b.if_then(thread0, false, |b| {
        for k in 0..ring.stages {
            b.mbar_init(full, 8 * i64::from(k), 1);
        }
        b.fence_mbar_init();
        // The weights are uploaded, never a kernel's output: the first tiles' copies go
        // before the wait for the previous grid.
        for k in 0..ring.stages {
            let tile = b.mad(grid, k, first);
            let some = b.setp::<U32>(Cmp::Lt, tile, tiles);
            let k = b.mov(k);
            b.if_then(some, false, |b| fill(b, tile, k));
        }
    });
    b.bar_sync();
    b.wait_for_previous_grid();
    // The warp's offset past an 8-byte boundary: the same for its rows and super-blocks.
    let o_warp = b.mul(warp, BLOCK_BYTES);
    let o_warp = b.and(o_warp, 7u32);
    let i = b.mov(0u32);
    b.for_loop(first, tiles, grid, true, |b, tile| {
        let k = b.and(i, ring.stages - 1);
        let parity = b.shr(i, ring.stages / 2);
        let parity = b.and(parity, 1u32);
        let bar = b.mad(k, 8u32, full);
        b.mbar_wait(bar, parity);
        let stage = b.mad(k, tile_bytes, stages);
        // Rows g and g + 8 (past the tile's last row, its last).
        let first_row = b.shl(tile, 4u32);
        let last = b.sub(p.rows, 1u32);
        let last = b.sub(last, first_row);
        let last = b.min(last, TILE_ROWS - 1);
        let heads = [0u32, 8].map(|extra| {
            let r = b.add(g, extra);
            let r = b.min(r, last);
            b.mad(r, row_bytes, stage)
        });
        let acc = [b.mov(0.0f32), b.mov(0.0f32)];
        for o in [0u32, 2, 4, 6] {
            let is = b.setp::<U32>(Cmp::Eq, o_warp, o);
            b.if_then(is, true, |b| {
                b.for_loop(warp, p.blocks, WARPS, false, |b, sb| {
                    let off = b.mul(sb, BLOCK_BYTES);
                    // Each row's 8-byte boundary before the super-block.
                    let at = heads.map(|h| {
                        let x = b.add(h, off);
                        b.sub(x, o)
                    });
                    let w = Weights::from_stage(b, &lane_b, o, at);
                    let act = act_after_weights(b, &p, sb, lane_b.act_off, PassWait::Never);
                    let xs = act_words(b, act);
                    super_block(b, (&p, &lane_b, o), (sb, xs, None), &w, acc);
                });
            });
        }
        // The tile's sums meet after a block barrier: past it every warp is done with the
        // stage, which thread 0 then refills with the tile `stages` on.
        let sums = |b: &mut KernelBuilder| {
            let half = b.and(i, 1u32);
            b.mad(half, WARPS * TILE_ROWS * 4, partial)
        };
        let lane = [tid, warp, g, t];
        meet_and_store(b, &p, lane, (WARPS, sums), acc, |b| {
            b.mad(tile, TILE_ROWS, tid)
        });
        let next = b.mad(grid, ring.stages, tile);
        let more = b.setp::<U32>(Cmp::Lt, next, tiles);
        let refill = b.and_pred(more, thread0);
        b.if_then(refill, false, |b| {
            b.fence_proxy_async();
            fill(b, next, k);
        });
        let i_next = b.add(i, 1u32);
        b.assign(i, i_next);
    });
    b.ret();
    b.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rings_fit_a_hopper_multiprocessor_and_not_smaller_ones() {
        // Rows of 4096 columns: a tile is 53,760 bytes; an H100's multiprocessor has 228
        // KiB, a block at most 227 KiB; an A100's 164 and 163; sm_86 / sm_89's 100 and 99.
        for r in [
            BulkRing::ONE_OF_THREE,
            BulkRing::ONE_OF_FOUR,
            BulkRing::RING_OF_TWO,
        ] {
            assert!(r.fits(16, 227 * 1024), "{r:?}");
            assert!(!r.fits(16, 99 * 1024), "{r:?}");
        }
        assert!(BulkRing::ONE_OF_THREE.fits(16, 163 * 1024));
        assert!(!BulkRing::ONE_OF_FOUR.fits(16, 163 * 1024));
        // Rows of 8192 columns: two tiles of 107,520 bytes do not fit twice.
        assert!(!BulkRing::RING_OF_TWO.fits(32, 227 * 1024));
    }

    #[test]
    fn a_persistent_grid_is_capped_at_its_blocks_a_multiprocessor() {
        assert_eq!(BulkRing::RING_OF_TWO.on(132).grid(896), 264);
        assert_eq!(BulkRing::RING_OF_TWO.on(132).grid(100), 100);
        assert_eq!(BulkRing::ONE_OF_THREE.grid(256), 256);
    }
}
