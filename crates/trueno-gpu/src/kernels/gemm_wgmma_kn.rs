//! Hopper's TF32 GEMM with B as it is stored: `C = act(alpha * A B + beta * C + bias)`
//! for row-major f32 `A` (m x k) and `B` (k x n), with no transpose of B first.
//!
//! `wgmma` reads TF32 operands from shared memory only k-major, and a row-major B is
//! n-major. So the block computes `Cᵀ = Bᵀ Aᵀ`: `Bᵀ` is the product's A, which
//! `wgmma` also takes from registers, and registers can be filled from any layout (each
//! thread reads its fragment's values one at a time from the copy engine's tile of B);
//! `Aᵀ` is the product's B, k-major as A is stored, read by descriptor exactly as the
//! [`super::gemm_wgmma`] kernel reads a `Bᵀ`. The accumulators hold a tile of `Cᵀ` and
//! reach C through the common epilogue's staging, written transposed. Transposing B in
//! a kernel of its own instead reads and writes all of B once more: 12 of the 60 µs of
//! a 2048^3 product on an H200.
//!
//! The block is [`super::gemm_wgmma`]'s (a producer warpgroup driving the copy engine,
//! two consumers) on a tile of `R` rows (the products' n: 64, 128 or 256) by
//! [`TILE_COLS`] columns of C, each consumer multiplying 64 of the columns (the products'
//! 64 rows). A stage holds A's `R` x 32 box and four boxes of 32 k-rows x 32 columns of
//! B, each row 128 bytes in the copy engine's swizzle (16-byte chunk `c` of row `r` at
//! chunk `c ^ (r % 8)`).
//!
//! Which of a consumer's 64 columns is fragment row `16 w + 8 h + g` (warp `w`, lane
//! `4 g + q`) is chosen so that each fragment load is free of bank conflicts: column
//! `32 (w / 2) + 4 (w % 2) + 8 h + 16 (g / 4) + g % 4`. The lanes of one load read k-rows
//! `q` (or `q + 4`) of one box; `g % 4` picks four banks in a chunk, `g / 4` the half of
//! the row, and the swizzle sends the four `q` of a half to its four chunks.

use super::float_type::FloatType;
use super::gemm_epilogue::{CStore, GROUP_ROWS, GROUP_THREADS, ROW_PAD_SINGLES};
use super::gemm_mma::tensor_core_launch;
use super::gemm_wgmma::{BSource, THREADS, TILE_K_BYTES, WgmmaTileN};
use super::gemm_wgmma_block::{
    CONSUMER_REGS, FULL, Ring, block_setup, copy_producer, descriptor, release_previous,
};
use super::{Family, Kernel, LaunchConfig};
use crate::error::Result;
use crate::ptx::{Cmp, F32, KernelBuilder, KernelIr, PtxType, Reg, Space, Target, U32, U64};

/// Columns of C per block: two consumers of 64.
pub const TILE_COLS: u32 = 128;
/// Elements of k per stage (one 128-byte row of f32).
pub const TILE_K: u32 = TILE_K_BYTES / 4;
/// Columns of B per copy-engine box (one 128-byte row).
pub const BOX_COLS: u32 = TILE_K_BYTES / 4;
/// Bytes of one box of B: 32 k-rows of 128 bytes.
const BOX_BYTES: u32 = TILE_K * TILE_K_BYTES;
/// k-steps of one product (k8) in a stage.
const K_STEPS: u32 = TILE_K / 8;

/// The Hopper TF32 GEMM with a row-major B for one tile height (`R`, the rows of C per
/// block: [`WgmmaTileN::elems`]) and output: parameters `map_a` (A in boxes of `R`
/// rows x [`TILE_K`]), `map_b` (B in boxes of [`TILE_K`] rows x [`BOX_COLS`]), `c`, `m`,
/// `n`, `k`, then the epilogue's `alpha`, `beta` (`beta == 0` never reads `c`), `bias`,
/// `epilogue`; `c` of the output type.
#[derive(Clone, Copy, Debug)]
pub struct WgmmaTf32KnKernel(pub WgmmaTileN, pub FloatType);

/// One stage's fragment registers: four k-steps of four values.
type Fragments = Vec<[Reg<U32>; 4]>;

fn build(name: &str, tile: WgmmaTileN, out: FloatType) -> KernelIr {
    let rows = tile.elems();
    let layout = Ring::layout(tile, 1);
    let a_bytes = rows * TILE_K_BYTES;
    let mut b = KernelBuilder::new(name);
    b.max_threads(THREADS);
    b.min_blocks(1);
    let source = BSource::CopyEngine;
    let blk = block_setup(&mut b, source, (rows, TILE_COLS), TILE_K, layout, out);
    let (map_a, map_b, row0, col0) = (blk.map_a, blk.map_b, blk.row0, blk.col0);
    let consumer = b.new_label();
    let producer_role = b.setp::<U32>(Cmp::Lt, blk.warpgroup, 1u32);
    b.bra_if(producer_role, true, consumer, false);

    // ---- producer: A's box, then B's four ------------------------------------------
    copy_producer(&mut b, &blk, TILE_K, |b, dst, kx, full| {
        b.tma_load_2d(dst, map_a, kx, row0, full);
        for j in 0..TILE_COLS / BOX_COLS {
            let dst = b.add(dst, a_bytes + j * BOX_BYTES);
            let x = b.add(col0, j * BOX_COLS);
            b.tma_load_2d(dst, map_b, x, kx, full);
        }
    });
    b.ret();

    // ---- consumers: 64 columns of C each --------------------------------------------
    b.place(consumer);
    b.setmaxnreg(true, CONSUMER_REGS);
    let (t, base, ring) = (blk.t, blk.base, &blk.ring);
    let half = b.sub(blk.warpgroup, 1u32);
    let acc: Vec<Reg<F32>> = (0..rows / 2).map(|_| b.mov(0.0f32)).collect();
    // scale-d: always accumulate (the accumulators start at zero above).
    let accumulate = b.setp::<U32>(Cmp::Eq, t, t);
    let a_desc0 = descriptor(&mut b, base, 16);
    let lane = b.and(t, 31u32);
    let lane0 = b.setp::<U32>(Cmp::Eq, lane, 0u32);
    let warp = b.shr(t, 5u32);
    let warp = b.and(warp, 3u32);
    let g = b.shr(lane, 2u32);
    let q = b.and(lane, 3u32);
    // The warp's box of B (32 columns: 2 half + w / 2) and, for h = 0, the chunk of its
    // columns in the box's rows (w % 2 + 4 (g / 4)); h = 1 is two chunks on.
    let bx = b.shr(warp, 1u32);
    let bx = b.mad(half, 2u32, bx);
    let g_lo = b.and(g, 3u32);
    let g_hi = b.shr(g, 2u32);
    let chunk = b.and(warp, 1u32);
    let chunk = b.mad(g_hi, 4u32, chunk);
    let box_at = b.mad(bx, BOX_BYTES, base);
    let box_at = b.add(box_at, a_bytes);
    let box_at = b.mad(q, TILE_K_BYTES, box_at);
    let box_at = b.mad(g_lo, 4u32, box_at);
    // Fragment value i of a k-step: k-row q (+ 4 for i >= 2), fragment row g (h = i % 2
    // = 0) or g + 8 (h = 1: eight columns, two chunks, on); the offsets from the stage,
    // the swizzle applied (row % 8 is q or q + 4 in every k-step: they are eight rows
    // apart).
    let value_at: Vec<Reg<U32>> = (0..4u32)
        .map(|i| {
            let (kq, h) = (i / 2, i % 2);
            let c = b.add(chunk, 2 * h);
            let row = b.add(q, 4 * kq);
            let c = b.xor(c, row);
            let at = b.mad(c, 16u32, box_at);
            b.add(at, 4 * kq * TILE_K_BYTES)
        })
        .collect();
    // Two sets of fragments, stages alternating: a stage's values are loaded while the
    // products of the one before still read the other set.
    let sets: [Fragments; 2] = std::array::from_fn(|_| {
        (0..K_STEPS)
            .map(|_| std::array::from_fn(|_| b.mov(0u32)))
            .collect()
    });
    let held = |set: &Fragments| -> Vec<Reg<U32>> { set.iter().flatten().copied().collect() };
    let prev_empty = b.mov(0u32);
    // One k-tile on fragment set `set`, the other set's products (the tile before)
    // waited for: its stage released, the ring moved on.
    let step = |b: &mut KernelBuilder, set: &Fragments, other: &Fragments, not_first| {
        let full = ring.barrier(b, FULL);
        b.mbar_wait(full, ring.phase);
        let at: Vec<Reg<U32>> = value_at.iter().map(|&v| b.add(v, ring.stage)).collect();
        for (ks, regs) in set.iter().enumerate() {
            for (&r, &at) in regs.iter().zip(&at) {
                let v = b.ld::<U32, U32>(Space::Shared, at, (ks as u32 * 8 * TILE_K_BYTES) as i64);
                b.assign(r, v);
            }
        }
        let offset = b.shr(ring.stage, 4u32);
        let offset = b.cvt::<U64, U32>(offset, None);
        let a_desc = b.add(a_desc0, offset);
        b.wgmma_fence();
        for (ks, regs) in set.iter().enumerate() {
            // Eight k further along A's 128-byte rows: 32 bytes, in 16-byte units.
            let ad = b.add(a_desc, (ks * 2) as u64);
            b.wgmma_rs(PtxType::F32, false, &acc, *regs, ad, accumulate);
        }
        b.wgmma_commit();
        b.wgmma_wait_holding(1, &held(other));
        release_previous(b, ring, not_first, lane0, prev_empty);
    };
    // Pairs of k-tiles, then the odd one out: every path into a set's loads has its
    // products waited for (a skippable second step in the loop would leave ptxas a path
    // back to the first set's loads with its products in flight, and it serializes
    // every product then).
    let k_tiles = blk.range.tiles;
    let paired = b.and(k_tiles, !1u32);
    b.for_loop(0u32, paired, 2u32, false, |b, kt| {
        let not_first = b.setp::<U32>(Cmp::Ne, kt, 0u32);
        step(b, &sets[0], &sets[1], Some(not_first));
        step(b, &sets[1], &sets[0], None);
    });
    let odd = b.setp::<U32>(Cmp::Ne, paired, k_tiles);
    b.if_then(odd, true, |b| {
        let not_first = b.setp::<U32>(Cmp::Ne, paired, 0u32);
        step(b, &sets[0], &sets[1], Some(not_first));
    });
    let all: Vec<Reg<U32>> = sets.iter().flat_map(held).collect();
    b.wgmma_wait_holding(0, &all);
    // Both consumers are done with the ring: the epilogue stages C there.
    b.bar_sync_named(1, 2 * GROUP_THREADS);

    // The epilogue's parameters come last in the list and are read only now.
    let store = CStore::declare(&mut b, blk.gc, out, blk.m, blk.n).with_row_pad(ROW_PAD_SINGLES);
    // Accumulator 4 i + j is C's row 8 i + 2 q + j % 2 (the products' column) and the
    // fragment row's column of C (8 more for j >= 2), staged as C: R rows of 128.
    let row = b.shl(q, 1u32);
    let col = b.mad(chunk, 4u32, g_lo);
    let col = b.mad(bx, BOX_COLS, col);
    let singles = acc.chunks(4).enumerate().flat_map(|(i, f)| {
        (0..4).map(move |j| (8 * i as u32 + j % 2, 8 * (j / 2), [f[j as usize]]))
    });
    store.stage(&mut b, (base, TILE_COLS), (row, col), singles);
    b.bar_sync_named(1, 2 * GROUP_THREADS);
    // Consumer `half` stores the staged groups of 64 rows half, half + 2, ...
    let t_group = b.and(t, GROUP_THREADS - 1);
    let groups = rows / GROUP_ROWS;
    let group_bytes = GROUP_ROWS * store.stride(TILE_COLS);
    for first in (0..groups).step_by(2) {
        let group = b.add(half, first);
        let area = b.mad(group, group_bytes, base);
        let r0 = b.mad(group, GROUP_ROWS, row0);
        if first + 1 < groups {
            store.store(&mut b, (area, TILE_COLS), (r0, col0), t_group);
        } else {
            let mine = b.setp::<U32>(Cmp::Lt, group, groups);
            b.if_then(mine, true, |b| {
                store.store(b, (area, TILE_COLS), (r0, col0), t_group)
            });
        }
    }
    b.ret();
    b.finish()
}

impl Kernel for WgmmaTf32KnKernel {
    fn name(&self) -> String {
        format!(
            "trueno_gemm_wgmma_tf32_kn_{}_r{}",
            self.1.name(),
            self.0.elems()
        )
    }
    fn family(&self) -> Family {
        Family::GemmWgmmaKn
    }
    fn build(&self) -> KernelIr {
        build(&self.name(), self.0, self.1)
    }
    fn targets(&self) -> &'static [Target] {
        &[Target::Sm90a]
    }
    /// `[m, n, k]`; `n` and `k` multiples of 8 (as the other tensor-core GEMMs').
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        tensor_core_launch(
            &self.name(),
            dims,
            (self.0.elems(), TILE_COLS),
            THREADS,
            self.0.shared_bytes(),
        )
    }
}

/// Every configuration: three tile heights, three outputs.
pub fn all() -> Vec<Box<dyn Kernel>> {
    WgmmaTileN::ALL
        .into_iter()
        .flat_map(|t| {
            FloatType::ALL.map(|out| Box::new(WgmmaTf32KnKernel(t, out)) as Box<dyn Kernel>)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_staged_tile_fits_the_ring_and_the_grid_follows_the_tile() {
        for t in WgmmaTileN::ALL {
            let (stages, bytes) = Ring::layout(t, 1);
            // A's box and B's four fill a stage exactly.
            assert_eq!(bytes, t.elems() * TILE_K_BYTES + 4 * BOX_BYTES);
            assert!(t.elems() * (TILE_COLS * 4 + ROW_PAD_SINGLES) <= stages * bytes);
        }
        let k = WgmmaTf32KnKernel(WgmmaTileN::N256, FloatType::F32);
        let c = k.launch_config(&[257, 136, 40]).unwrap();
        assert_eq!((c.grid, c.block.0), ((2, 2, 1), THREADS));
        // 4 stages of 32 KiB (A) + 16 KiB (B), 8 barrier bytes twice per stage, 1 KiB slack.
        assert_eq!(c.shared_bytes, 4 * (48 * 1024 + 16) + 1024);
        for bad in [[16, 12, 16], [16, 16, 12], [0, 8, 8], [8, 8, 0]] {
            assert!(k.launch_config(&bad).is_err(), "{bad:?}");
        }
        assert_eq!(k.targets(), &[Target::Sm90a]);
    }

    #[test]
    fn the_fragment_columns_cover_each_consumers_64_once() {
        // Column of fragment row 16 w + 8 h + g, as the module's doc gives it.
        let mut seen = [false; 64];
        for w in 0..4u32 {
            for h in 0..2 {
                for g in 0..8 {
                    let c = 32 * (w / 2) + 4 * (w % 2) + 8 * h + 16 * (g / 4) + g % 4;
                    assert!(!seen[c as usize], "column {c} twice");
                    seen[c as usize] = true;
                }
            }
        }
        // Bank of each lane's first load (k-row q, h = 0) of warp w: distinct.
        for w in 0..4u32 {
            let banks: std::collections::HashSet<u32> = (0..32u32)
                .map(|lane| {
                    let (g, q) = (lane / 4, lane % 4);
                    let chunk = (w % 2 + 4 * (g / 4)) ^ q;
                    (q * TILE_K_BYTES + chunk * 16 + (g % 4) * 4) / 4 % 32
                })
                .collect();
            assert_eq!(banks.len(), 32, "warp {w}");
        }
    }
}
