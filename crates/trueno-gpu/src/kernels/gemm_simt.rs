//! The FP32 SIMT GEMM's block: a 128x128 tile of C, 256 threads each holding an 8x8
//! register tile in two 4-wide halves (16-byte shared loads, conflict-free), and k-tiles
//! brought into a ring of shared stages by `cp.async` while the one before is
//! multiplied: one barrier a k-tile, no staging registers. A lands transposed, one
//! element a copy, so a thread's rows are one 16-byte load. Whole tiles (the block inside
//! m and n, the k-tile inside k, B's rows 16-byte aligned) copy without checks and take
//! B in 16-byte copies; the edges check each element and zero-fill, so every m, n, k
//! runs the one kernel. The sliced form ([`SimtPipeline::SLICED`]) has 64 x 128 tiles
//! and two sets of 128 threads, each multiplying half of every stage's k and copying
//! half of it in; the two sums meet in shared memory at the end. It gives a product
//! too small for 128 x 128 tiles to fill the GPU twice the blocks at the same warps a
//! block, where cutting k instead costs a second kernel.
//!
//! Why: the kernel is bound by instruction issue (ncu on an H100: 82% issue-active, the
//! FMA pipe at 69%), so what counts is the share of its loop that is FFMA. The
//! register-staged kernel before it (each thread's share of the next tile loaded into
//! registers, stored to shared memory between two barriers, every element checked) ran
//! 84% FFMA at 43.5 TFLOP/s at 4096; this loop, 32 k a stage, 92% on whole tiles
//! (47.5).

use super::gemm::TILE;
use super::gemm_split::{k_range, split_output};
use super::helpers::{self, elem_addr};
use crate::ptx::{Cmp, F32, KernelBuilder, KernelIr, Pred, Reg, Space, U32, U64};

/// Shape of the pipeline: the k-step of a stage, the number of stages, and the k-slices
/// of a block. Measured on an H100 (TFLOP/s at 4096 / 8192): 16 k x 3 stages 45.7 /
/// 46.7, 16 x 4 45.7 / 46.5, 32 x 3 47.0 / 47.3, 32 x 2 47.6 / 47.8 (two blocks a
/// multiprocessor either way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimtPipeline {
    /// Rows of the block's tile of C (128 or 64; 128 columns either way): a slice has
    /// twice as many threads, each an 8 x 8 register tile.
    pub tile_m: u32,
    /// k values per stage (a power of two, at least 8 a slice).
    pub tile_k: u32,
    /// Stages in the ring (tiles in flight plus the one being multiplied).
    pub stages: u32,
    /// Sets of threads sharing the block's tile, each multiplying its own share of
    /// every stage's k (1 or 2); their sums meet in shared memory at the end.
    pub slices: u32,
}

impl SimtPipeline {
    /// The shape the GEMM runs.
    pub const DEFAULT: SimtPipeline = SimtPipeline {
        tile_m: TILE,
        tile_k: 32,
        stages: 2,
        slices: 1,
    };

    /// The shape of the sliced kernel (`GemmVariant::TiledSliced`): 64 x 128 tiles, two
    /// slices of 128 threads, 64-k stages (32 a slice). Measured on an H100 against the
    /// tiled kernel, cut into ranges where that fills the GPU (µs, the reduce included;
    /// BENCHMARKS.md "Small products without cutting k"): 1024^3 56.3 uncut against 65.4
    /// in two ranges (32-k stages 57.5; one slice of 128 threads, cuBLAS's shape, 83.1),
    /// 512^3 in four ranges 16.6-20.2 against 22.7 in eight; at 2048^3 the 32-k form
    /// trails the tiled kernel (380 against 372).
    pub const SLICED: SimtPipeline = SimtPipeline {
        tile_m: 64,
        tile_k: 64,
        stages: 2,
        slices: 2,
    };

    /// Threads of a slice: 16 columns of 8 x 8 register tiles, `tile_m / 8` rows.
    pub fn slice_threads(self) -> u32 {
        2 * self.tile_m
    }

    /// Threads of a block.
    pub fn threads(self) -> u32 {
        self.slice_threads() * self.slices
    }

    /// Padded row of a stage's transposed A tile (floats): 4 more than the tile, so the
    /// 8 k-rows a warp's copies write fall in distinct banks, and rows stay 16-byte
    /// aligned.
    fn a_stride(self) -> u32 {
        self.tile_m + 4
    }

    /// Bytes of one stage: the transposed A tile, then the B tile.
    pub fn stage_bytes(self) -> u32 {
        self.tile_k * (self.a_stride() + TILE) * 4
    }

    /// Dynamic shared memory of a block: the stages, or (sliced) the half tiles of
    /// sums the slices exchange at the end if those need more.
    pub fn shared_bytes(self) -> u32 {
        let exchange = match self.slices {
            1 => 0,
            s => s * self.tile_m * TILE * 4 / 2,
        };
        (self.stages * self.stage_bytes()).max(exchange)
    }
}

/// Builds the kernel (parameters `a`, `b`, `c`, `m`, `n`, `k`; `stages x stage_bytes` of
/// dynamic shared memory).
pub(super) fn build(name: &str, pipe: SimtPipeline) -> KernelIr {
    let SimtPipeline {
        tile_m,
        tile_k,
        stages,
        slices,
    } = pipe;
    let slice_k = tile_k / slices;
    // A slice's threads, and the A rows (of A's copies), B rows (of its 16-byte and
    // element copies) their copies cover at once.
    let st = pipe.slice_threads();
    let (a_step, b_chunk_step, b_elem_step) = (st / 8, st / 32, st / 128);
    debug_assert!(tile_m == 64 || tile_m == TILE);
    debug_assert!(tile_k.is_power_of_two() && slice_k >= 8 && stages >= 2);
    debug_assert!(slices == 1 || slices == 2);
    let a_stride = pipe.a_stride();
    let mut b = KernelBuilder::new(name);
    b.max_threads(pipe.threads());
    // 128 registers a thread, as two blocks of 256 threads have.
    b.min_blocks(512 / pipe.threads());
    let g = super::gemm::args(&mut b);
    // This block's share of k (all of it unless the grid splits k).
    let range = k_range(&mut b, g.k, tile_k, 1);
    let smem = b.dynamic_shared();
    let stage_bytes = pipe.stage_bytes();
    let a_area = tile_k * a_stride * 4;
    let tid = b.tid_x();
    // Sliced: threads `st s + t` take k values s slice_k + [0, slice_k) of each stage,
    // copying and multiplying as the one-slice block does the whole stage.
    let (t, slice, k_in) = match slices {
        1 => (tid, None, None),
        _ => {
            let t = b.and(tid, st - 1);
            let slice = b.shr(tid, st.trailing_zeros());
            let k_in = b.mul(slice, slice_k);
            (t, Some(slice), Some(k_in))
        }
    };
    let tx = b.and(t, 15u32);
    let ty = b.shr(t, 4u32);
    let (cx, cy) = (b.ctaid_x(), b.ctaid_y());
    let row0 = b.mul(cy, tile_m);
    let col0 = b.mul(cx, TILE);

    // A: the thread copies rows a_r + a_step j (j < 4) at k a_k + 8 h (h < slice_k / 8);
    // a warp's copies cover 4 rows x 8 k, 8 k-rows of the transposed tile in 32 banks.
    let mut a_k = b.and(t, 7u32);
    if let Some(k_in) = k_in {
        a_k = b.add(a_k, k_in);
    }
    let a_r = b.shr(t, 3u32);
    let a_row = b.add(row0, a_r);
    let a_ok: [Reg<Pred>; 4] = std::array::from_fn(|j| {
        let r = b.add(a_row, a_step * j as u32);
        b.setp::<U32>(Cmp::Lt, r, g.m)
    });
    let a_idx = b.mad(a_row, g.k, a_k);
    let a_idx = b.add(a_idx, range.begin);
    let a_ptr = elem_addr(&mut b, g.a, a_idx, 4);
    let a_rows_step = b.mul_wide(g.k, a_step * 4);
    let sa_idx = b.mad(a_k, a_stride, a_r);
    let sa_st = b.shl(sa_idx, 2u32);
    // B, from the tile's corner `b_tile` (k-row k0, column col0): element copies of
    // column b_c in k-rows b_k + b_elem_step i, a warp's 128 contiguous bytes of one
    // row, anywhere; or, inside the matrix with n a multiple of 4, 16-byte copies of
    // chunk b_q in k-rows b_r + b_chunk_step i.
    let b_c = b.and(t, 127u32);
    let mut b_k = b.shr(t, 7u32);
    if let Some(k_in) = k_in {
        b_k = b.add(b_k, k_in);
    }
    let b_col = b.add(col0, b_c);
    let b_ok = b.setp::<U32>(Cmp::Lt, b_col, g.n);
    let b_elem = b.mad(b_k, g.n, b_c);
    let b_elem = b.mul_wide(b_elem, 4u32);
    let sb_elem = b.mad(b_k, TILE, b_c);
    let sb_elem = b.mad(sb_elem, 4u32, a_area);
    let b_q = b.and(t, 31u32);
    let mut b_r = b.shr(t, 5u32);
    if let Some(k_in) = k_in {
        b_r = b.add(b_r, k_in);
    }
    let b_q4 = b.shl(b_q, 2u32);
    let b_chunk = b.mad(b_r, g.n, b_q4);
    let b_chunk = b.mul_wide(b_chunk, 4u32);
    let sb_chunk = b.mad(b_r, TILE, b_q4);
    let sb_chunk = b.mad(sb_chunk, 4u32, a_area);
    let b_rows_elem = b.mul_wide(g.n, b_elem_step * 4);
    let b_rows_chunk = b.mul_wide(g.n, b_chunk_step * 4);
    let b_tile_step = b.mul_wide(g.n, tile_k * 4);
    let b_corner = b.mad(range.begin, g.n, col0);
    let b_corner = elem_addr(&mut b, g.b, b_corner, 4);
    // Whole tiles of the block need no checks: rows and columns inside, B's rows
    // 16-byte aligned (n a multiple of 4, B on a 16-byte boundary).
    let rows_in = b.add(row0, tile_m);
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
                                let off = b.mul(a_rows_step, u64::from(j));
                                b.add(ap, off)
                            }
                        };
                        for h in 0..slice_k / 8 {
                            let src = b.add(src, u64::from(8 * h * 4));
                            let dst = b.add(a_dst, (8 * h * a_stride + a_step * j) * 4);
                            b.cp_async_4(dst, src, four);
                        }
                    }
                    let b_dst = b.add(base, sb_chunk);
                    let mut src = b.add(bt, b_chunk);
                    for i in 0..slice_k / b_chunk_step {
                        if i > 0 {
                            src = b.add(src, b_rows_chunk);
                        }
                        let dst = b.add(b_dst, b_chunk_step * i * TILE * 4);
                        b.cp_async_16(dst, src, sixteen);
                    }
                },
                |b| {
                    for h in 0..slice_k / 8 {
                        let kk = b.add(k0, a_k);
                        let kk = b.add(kk, 8 * h);
                        let k_ok = b.setp::<U32>(Cmp::Lt, kk, range.end);
                        let mut src = b.add(ap, u64::from(8 * h * 4));
                        for (j, &row_ok) in a_ok.iter().enumerate() {
                            if j > 0 {
                                src = b.add(src, a_rows_step);
                            }
                            let p = b.and_pred(row_ok, k_ok);
                            let bytes = b.selp::<U32>(4u32, 0u32, p);
                            let from = b.selp::<U64>(src, g.a, p);
                            let dst = b.add(a_dst, (8 * h * a_stride + a_step * j as u32) * 4);
                            b.cp_async_4(dst, from, bytes);
                        }
                    }
                    let b_dst = b.add(base, sb_elem);
                    let mut src = b.add(bt, b_elem);
                    for i in 0..slice_k / b_elem_step {
                        if i > 0 {
                            src = b.add(src, b_rows_elem);
                        }
                        let kr = b.add(k0, b_k);
                        let kr = b.add(kr, b_elem_step * i);
                        let k_ok = b.setp::<U32>(Cmp::Lt, kr, range.end);
                        let p = b.and_pred(b_ok, k_ok);
                        let bytes = b.selp::<U32>(4u32, 0u32, p);
                        let from = b.selp::<U64>(src, g.b, p);
                        let dst = b.add(b_dst, b_elem_step * i * TILE * 4);
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
    // The thread's rows ty*4 + i and tile_m/2 + ty*4 + i of the transposed A tile, its
    // columns tx*4 + j and 64 + tx*4 + j of the B tile.
    let mut sa_rd = b.mad(ty, 16u32, smem);
    let mut sb_rd = b.mad(tx, 16u32, smem);
    sb_rd = b.add(sb_rd, a_area);
    if let Some(k_in) = k_in {
        // The slice's first k-row of each stage.
        sa_rd = b.mad(k_in, a_stride * 4, sa_rd);
        sb_rd = b.mad(k_in, TILE * 4, sb_rd);
    }
    // Every thread runs the same number of k-tiles: the loop is block-uniform.
    b.for_loop(0u32, k_tiles, 1u32, true, |b, _| {
        // Tile kt has landed, and every warp is done with the stage the next copies
        // overwrite (the one multiplied last time round).
        b.cp_async_wait(stages - 2);
        b.bar_sync();
        issue_next(b);
        let a_at = b.add(sa_rd, use_stage);
        let b_at = b.add(sb_rd, use_stage);
        for kk in 0..slice_k as i64 {
            let a_off = kk * (a_stride as i64) * 4;
            let b_off = kk * (TILE as i64) * 4;
            let a_lo = b.ld_vec::<F32, U32, 4>(Space::Shared, a_at, a_off);
            let a_hi = b.ld_vec::<F32, U32, 4>(Space::Shared, a_at, a_off + tile_m as i64 * 2);
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
    let tile = super::gemm::Tile {
        block: (cx, cy),
        thread: (tx, ty),
        rows: tile_m,
    };
    match slice {
        None => super::gemm::store_tile(&mut b, &out, &tile, &acc, 0..8),
        Some(slice) => {
            let at = b.shl(t, 2u32);
            let at = b.add(smem, at);
            exchange_and_store(&mut b, &out, &tile, &acc, (slice, at, st));
        }
    }
    b.ret();
    b.finish()
}

/// The sliced block's end: slice 0 stores rows 0-3 of each thread's tile halves, slice
/// 1 rows 4-7, each first handing the other its sums of the rows it does not store
/// (through shared memory at `at`, a thread's value `v` at `at + 4 v st` for `st`
/// threads a slice: consecutive threads, consecutive words) and adding the other's to
/// its own.
fn exchange_and_store(
    b: &mut KernelBuilder,
    g: &super::gemm::Args,
    tile: &super::gemm::Tile,
    acc: &[[Reg<F32>; 8]; 8],
    (slice, at, st): (Reg<U32>, Reg<U32>, u32),
) {
    // Every warp is done with the stages (and no copy is landing) before they are
    // overwritten.
    b.bar_sync();
    let first = b.setp::<U32>(Cmp::Eq, slice, 0u32);
    let word = |v: usize| (v * st as usize * 4) as i64;
    let half = |b: &mut KernelBuilder, give: std::ops::Range<usize>, to: u32| {
        for (v, i) in give.enumerate() {
            for (j, &sum) in acc[i].iter().enumerate() {
                let off = word(to as usize * 32 + v * 8 + j);
                b.st::<F32, U32>(Space::Shared, at, off, sum);
            }
        }
    };
    // Slice 0 hands rows 4-7 to region 1, slice 1 rows 0-3 to region 0.
    b.if_else(first, true, |b| half(b, 4..8, 1), |b| half(b, 0..4, 0));
    b.bar_sync();
    let take = |b: &mut KernelBuilder, keep: std::ops::Range<usize>, from: u32| {
        let sums: [[Reg<F32>; 8]; 8] = std::array::from_fn(|i| {
            std::array::from_fn(|j| match keep.contains(&i) {
                true => {
                    let off = word(from as usize * 32 + (i - keep.start) * 8 + j);
                    let other = b.ld::<F32, U32>(Space::Shared, at, off);
                    b.add(acc[i][j], other)
                }
                false => acc[i][j],
            })
        });
        super::gemm::store_tile(b, g, tile, &sums, keep);
    };
    b.if_else(first, true, |b| take(b, 0..4, 0), |b| take(b, 4..8, 1));
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

    #[test]
    fn the_sliced_block_has_two_sets_of_threads_and_room_for_their_sums() {
        let k = GemmKernel(GemmVariant::TiledSliced);
        let c = k.launch_config(&[300, 260, 100]).unwrap();
        // 64-row tiles: 5 of 300 rows; two slices of 128 threads.
        assert_eq!((c.grid, c.block.0), ((3, 5, 1), 256));
        // Two stages of a 64-k transposed A tile (rows of 64 + 4 floats) and a 64-k B
        // tile (rows of 128); the exchange (half of a 64 x 128 f32 tile from each
        // slice, 32 KiB) fits in them.
        assert_eq!(c.shared_bytes, 2 * (64 * 68 + 64 * 128) * 4);
        assert!(c.shared_bytes >= 2 * 32 * 128 * 4);
    }
}
