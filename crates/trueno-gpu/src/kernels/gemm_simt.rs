//! The FP32 SIMT GEMM's block: a 128x128 tile of C, 256 threads each holding an 8x8
//! register tile in two 4-wide halves (16-byte shared loads, conflict-free), and k-tiles
//! brought into a ring of shared stages by `cp.async` while the one before is
//! multiplied: one barrier a k-tile, no staging registers. A lands transposed, one
//! element a copy, so a thread's rows are one 16-byte load. Whole tiles (the block inside
//! m and n, the k-tile inside k, B's rows 16-byte aligned) copy without checks and take
//! B in 16-byte copies; the edges check each element and zero-fill, so every m, n, k
//! runs the one kernel.
//!
//! Why: the kernel is bound by instruction issue (ncu on an H100: 82% issue-active, the
//! FMA pipe at 69%), so what counts is the share of its loop that is FFMA. The
//! register-staged kernel before it (each thread's share of the next tile loaded into
//! registers, stored to shared memory between two barriers, every element checked) ran
//! 84% FFMA at 43.5 TFLOP/s at 4096; this loop, 32 k a stage, 92% on whole tiles
//! (47.5).

use super::gemm::{THREADS, TILE};
use super::gemm_split::{k_range, split_output};
use super::helpers::{self, elem_addr};
use crate::ptx::{Cmp, F32, KernelBuilder, KernelIr, Pred, Reg, Space, U32, U64};

/// Shape of the pipeline: the k-step of a stage and the number of stages. Measured on an
/// H100 (TFLOP/s at 4096 / 8192): 16 k x 3 stages 45.7 / 46.7, 16 x 4 45.7 / 46.5,
/// 32 x 3 47.0 / 47.3, 32 x 2 47.6 / 47.8 (two blocks a multiprocessor either way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimtPipeline {
    /// k values per stage (a power of two, at least 8).
    pub tile_k: u32,
    /// Stages in the ring (tiles in flight plus the one being multiplied).
    pub stages: u32,
}

/// Padded row of a stage's transposed A tile (floats): 4 more than the tile, so the 8
/// k-rows a warp's copies write fall in distinct banks, and rows stay 16-byte aligned.
const A_STRIDE: u32 = TILE + 4;

impl SimtPipeline {
    /// The shape the GEMM runs.
    pub const DEFAULT: SimtPipeline = SimtPipeline {
        tile_k: 32,
        stages: 2,
    };

    /// Bytes of one stage: the transposed A tile, then the B tile.
    pub fn stage_bytes(self) -> u32 {
        self.tile_k * (A_STRIDE + TILE) * 4
    }

    /// Dynamic shared memory of a block.
    pub fn shared_bytes(self) -> u32 {
        self.stages * self.stage_bytes()
    }
}

/// Builds the kernel (parameters `a`, `b`, `c`, `m`, `n`, `k`; `stages x stage_bytes` of
/// dynamic shared memory).
pub(super) fn build(name: &str, pipe: SimtPipeline) -> KernelIr {
    let SimtPipeline { tile_k, stages } = pipe;
    debug_assert!(tile_k.is_power_of_two() && tile_k >= 8 && stages >= 2);
    let mut b = KernelBuilder::new(name);
    b.max_threads(THREADS);
    b.min_blocks(2);
    let g = super::gemm::args(&mut b);
    // This block's share of k (all of it unless the grid splits k).
    let range = k_range(&mut b, g.k, tile_k, 1);
    let smem = b.dynamic_shared();
    let stage_bytes = pipe.stage_bytes();
    let a_area = tile_k * A_STRIDE * 4;
    let t = b.tid_x();
    let tx = b.and(t, 15u32);
    let ty = b.shr(t, 4u32);
    let (cx, cy) = (b.ctaid_x(), b.ctaid_y());
    let row0 = b.mul(cy, TILE);
    let col0 = b.mul(cx, TILE);

    // A: the thread copies rows a_r + 32 j (j < 4) at k a_k + 8 h (h < tile_k / 8); a
    // warp's copies cover 4 rows x 8 k, 8 k-rows of the transposed tile in 32 banks.
    let a_k = b.and(t, 7u32);
    let a_r = b.shr(t, 3u32);
    let a_row = b.add(row0, a_r);
    let a_ok: [Reg<Pred>; 4] = std::array::from_fn(|j| {
        let r = b.add(a_row, 32 * j as u32);
        b.setp::<U32>(Cmp::Lt, r, g.m)
    });
    let a_idx = b.mad(a_row, g.k, a_k);
    let a_idx = b.add(a_idx, range.begin);
    let a_ptr = elem_addr(&mut b, g.a, a_idx, 4);
    let a_rows32 = b.mul_wide(g.k, 32 * 4);
    let sa_idx = b.mad(a_k, A_STRIDE, a_r);
    let sa_st = b.shl(sa_idx, 2u32);
    // B, from the tile's corner `b_tile` (k-row k0, column col0): element copies of
    // column b_c in k-rows b_k + 2 i (i < tile_k / 2), a warp's 128 contiguous bytes of
    // one row, anywhere; or, inside the matrix with n a multiple of 4, 16-byte copies
    // of chunk b_q in k-rows b_r + 8 i (i < tile_k / 8).
    let b_c = b.and(t, 127u32);
    let b_k = b.shr(t, 7u32);
    let b_col = b.add(col0, b_c);
    let b_ok = b.setp::<U32>(Cmp::Lt, b_col, g.n);
    let b_elem = b.mad(b_k, g.n, b_c);
    let b_elem = b.mul_wide(b_elem, 4u32);
    let sb_elem = b.mad(b_k, TILE, b_c);
    let sb_elem = b.mad(sb_elem, 4u32, a_area);
    let b_q = b.and(t, 31u32);
    let b_r = b.shr(t, 5u32);
    let b_q4 = b.shl(b_q, 2u32);
    let b_chunk = b.mad(b_r, g.n, b_q4);
    let b_chunk = b.mul_wide(b_chunk, 4u32);
    let sb_chunk = b.mad(b_r, TILE, b_q4);
    let sb_chunk = b.mad(sb_chunk, 4u32, a_area);
    let b_rows2 = b.mul_wide(g.n, 2 * 4);
    let b_rows8 = b.mul_wide(g.n, 8 * 4);
    let b_tile_step = b.mul_wide(g.n, tile_k * 4);
    let b_corner = b.mad(range.begin, g.n, col0);
    let b_corner = elem_addr(&mut b, g.b, b_corner, 4);
    // Whole tiles of the block need no checks: rows and columns inside, B's rows
    // 16-byte aligned (n a multiple of 4, B on a 16-byte boundary).
    let rows_in = b.add(row0, TILE);
    let rows_in = b.setp::<U32>(Cmp::Le, rows_in, g.m);
    let cols_in = b.add(col0, TILE);
    let cols_in = b.setp::<U32>(Cmp::Le, cols_in, g.n);
    let n4 = b.and(g.n, 3u32);
    let b_lo = b.cvt::<U32, U64>(g.b, None);
    let b_lo = b.and(b_lo, 15u32);
    let aligned = b.or(n4, b_lo);
    let aligned = b.setp::<U32>(Cmp::Eq, aligned, 0u32);
    let inside = b.and_pred(rows_in, cols_in);
    let block_whole = b.and_pred(inside, aligned);
    let four = b.mov(4u32);
    let sixteen = b.mov(16u32);

    // Issues the copies of the k-tile at `k0` (pointers at it) into the stage at byte
    // offset `stage`, as one group; past m, n or the range's k they zero-fill.
    let issue =
        |b: &mut KernelBuilder, stage: Reg<U32>, k0: Reg<U32>, ap: Reg<U64>, bt: Reg<U64>| {
            let base = b.add(smem, stage);
            let a_dst = b.add(base, sa_st);
            let k_end = b.add(k0, tile_k);
            let k_whole = b.setp::<U32>(Cmp::Le, k_end, range.end);
            let whole = b.and_pred(block_whole, k_whole);
            b.if_else(
                whole,
                true,
                |b| {
                    for j in 0..4u32 {
                        let src = match j {
                            0 => ap,
                            _ => {
                                let off = b.mul(a_rows32, u64::from(j));
                                b.add(ap, off)
                            }
                        };
                        for h in 0..tile_k / 8 {
                            let src = b.add(src, u64::from(8 * h * 4));
                            let dst = b.add(a_dst, (8 * h * A_STRIDE + 32 * j) * 4);
                            b.cp_async_4(dst, src, four);
                        }
                    }
                    let b_dst = b.add(base, sb_chunk);
                    let mut src = b.add(bt, b_chunk);
                    for i in 0..tile_k / 8 {
                        if i > 0 {
                            src = b.add(src, b_rows8);
                        }
                        let dst = b.add(b_dst, 8 * i * TILE * 4);
                        b.cp_async_16(dst, src, sixteen);
                    }
                },
                |b| {
                    for h in 0..tile_k / 8 {
                        let kk = b.add(k0, a_k);
                        let kk = b.add(kk, 8 * h);
                        let k_ok = b.setp::<U32>(Cmp::Lt, kk, range.end);
                        let mut src = b.add(ap, u64::from(8 * h * 4));
                        for (j, &row_ok) in a_ok.iter().enumerate() {
                            if j > 0 {
                                src = b.add(src, a_rows32);
                            }
                            let p = b.and_pred(row_ok, k_ok);
                            let bytes = b.selp::<U32>(4u32, 0u32, p);
                            let from = b.selp::<U64>(src, g.a, p);
                            let dst = b.add(a_dst, (8 * h * A_STRIDE + 32 * j as u32) * 4);
                            b.cp_async_4(dst, from, bytes);
                        }
                    }
                    let b_dst = b.add(base, sb_elem);
                    let mut src = b.add(bt, b_elem);
                    for i in 0..tile_k / 2 {
                        if i > 0 {
                            src = b.add(src, b_rows2);
                        }
                        let kr = b.add(k0, b_k);
                        let kr = b.add(kr, 2 * i);
                        let k_ok = b.setp::<U32>(Cmp::Lt, kr, range.end);
                        let p = b.and_pred(b_ok, k_ok);
                        let bytes = b.selp::<U32>(4u32, 0u32, p);
                        let from = b.selp::<U64>(src, g.b, p);
                        let dst = b.add(b_dst, 2 * i * TILE * 4);
                        b.cp_async_4(dst, from, bytes);
                    }
                },
            );
            b.cp_async_commit();
        };

    let acc: [[Reg<F32>; 8]; 8] = std::array::from_fn(|_| std::array::from_fn(|_| b.mov(0.0f32)));
    let k_tiles = range.tiles;
    // The copies run `stages - 1` tiles ahead of the multiplies.
    let a_next = b.mov(a_ptr);
    let b_next = b.mov(b_corner);
    let k_next = b.mov(range.begin);
    let load_stage = b.mov(0u32);
    let use_stage = b.mov(0u32);
    let next_stage =
        |b: &mut KernelBuilder, s: Reg<U32>| helpers::next_stage(b, s, stage_bytes, stages);
    let issue_next = |b: &mut KernelBuilder| {
        issue(b, load_stage, k_next, a_next, b_next);
        let an = b.add(a_next, u64::from(tile_k * 4));
        let bn = b.add(b_next, b_tile_step);
        let kn = b.add(k_next, tile_k);
        b.assign(a_next, an);
        b.assign(b_next, bn);
        b.assign(k_next, kn);
        next_stage(b, load_stage);
    };
    for _ in 1..stages {
        issue_next(&mut b);
    }
    // The thread's rows ty*4 + i and 64 + ty*4 + i of the transposed A tile, its
    // columns tx*4 + j and 64 + tx*4 + j of the B tile.
    let sa_rd = b.mad(ty, 16u32, smem);
    let sb_rd = b.mad(tx, 16u32, smem);
    let sb_rd = b.add(sb_rd, a_area);
    // Every thread runs the same number of k-tiles: the loop is block-uniform.
    b.for_loop(0u32, k_tiles, 1u32, true, |b, _| {
        // Tile kt has landed, and every warp is done with the stage the next copies
        // overwrite (the one multiplied last time round).
        b.cp_async_wait(stages - 2);
        b.bar_sync();
        issue_next(b);
        let a_at = b.add(sa_rd, use_stage);
        let b_at = b.add(sb_rd, use_stage);
        for kk in 0..tile_k as i64 {
            let a_off = kk * (A_STRIDE as i64) * 4;
            let b_off = kk * (TILE as i64) * 4;
            let a_lo = b.ld_vec::<F32, U32, 4>(Space::Shared, a_at, a_off);
            let a_hi = b.ld_vec::<F32, U32, 4>(Space::Shared, a_at, a_off + 64 * 4);
            let b_lo = b.ld_vec::<F32, U32, 4>(Space::Shared, b_at, b_off);
            let b_hi = b.ld_vec::<F32, U32, 4>(Space::Shared, b_at, b_off + 64 * 4);
            let av: Vec<Reg<F32>> = a_lo.iter().chain(&a_hi).copied().collect();
            let bv: Vec<Reg<F32>> = b_lo.iter().chain(&b_hi).copied().collect();
            for i in 0..8 {
                for j in 0..8 {
                    let r = b.fma(av[i], bv[j], acc[i][j]);
                    b.assign(acc[i][j], r);
                }
            }
        }
        next_stage(b, use_stage);
    });
    // No copy may still be landing when the block exits.
    b.cp_async_wait(0);
    // Split k: this range's slice of the output (C itself when k is not split).
    let c = split_output(&mut b, g.c, (g.m, g.n), 4);
    let out = super::gemm::Args { c, ..g };
    super::gemm::store_tile(&mut b, &out, (cx, cy), (tx, ty), &acc);
    b.ret();
    b.finish()
}

#[cfg(test)]
mod tests {
    use crate::kernels::Kernel;
    use crate::kernels::gemm::{GemmKernel, GemmVariant};

    #[test]
    fn the_launch_asks_for_every_stage() {
        let k = GemmKernel(GemmVariant::Tiled);
        let c = k.launch_config(&[300, 260, 100]).unwrap();
        assert_eq!((c.grid, c.block.0), ((3, 3, 1), 256));
        // Two stages of a 32-k transposed A tile (rows of 128 + 4 floats) and a 32-k B
        // tile (rows of 128).
        assert_eq!(c.shared_bytes, 2 * (32 * 132 + 32 * 128) * 4);
        let ir = k.build();
        assert!(ir.dynamic_shared && ir.shared.is_empty());
    }
}
