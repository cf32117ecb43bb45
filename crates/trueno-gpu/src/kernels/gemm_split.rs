//! Split-K for GEMMs whose output tiles leave most of the GPU idle: the grid's z
//! dimension cuts the k-loop into ranges, each block writes its range's raw f32 product
//! to its own slice of a scratch buffer, and [`SplitReduceKernel`] sums the slices and
//! applies the epilogue. A 512^3 SGEMM has 16 tiles of 128 x 128 for 132
//! multiprocessors; 128 tokens through a 4096-wide layer 32 of 128 x 128.
//!
//! The kernels take the split from the launch alone (`%nctaid.z` ranges, the one at
//! `%ctaid.z`), so a grid of depth 1 runs them unsplit with no other parameter.

use super::float_type::FloatType;
use super::gemm_epilogue::{CStore, GROUP_ROWS, GROUP_THREADS, staged_bytes};
use super::helpers::elem_addr;
use super::{Family, Kernel, LaunchConfig, blocks_for};
use crate::error::{Result, shape_err};
use crate::ptx::ir::{Dim, SpecialReg};
use crate::ptx::{Cmp, F32, KernelBuilder, KernelIr, Pred, PtxType, Reg, Space, U32, U64};

/// Columns of C one reduce block covers: 64 rows of 32, eight threads a row, each
/// thread four columns of four rows; narrow, so a small product still gives every
/// multiprocessor several blocks.
pub const REDUCE_COLS: u32 = 32;
/// Slices the reduce loads in one step of its loop.
const SLICES_A_STEP: u32 = 4;
/// The most splits a GEMM is cut into.
pub const MAX_SPLITS: u32 = 16;

/// The k-values of this block's split, whole k-tiles of `tile_k` each but the last.
pub(super) struct KRange {
    /// First k of the range.
    pub begin: Reg<U32>,
    /// One past its last k, at most `k`. A range past the last tile (more splits than
    /// tiles) is empty: no tiles, and its end may lie below its begin, so every k check
    /// against it fails.
    pub end: Reg<U32>,
    /// k-tiles in the range.
    pub tiles: Reg<U32>,
    /// The range's first k-tile.
    pub first: Reg<U32>,
}

/// The range of split `%ctaid.z` of `%nctaid.z`: the k-tiles dealt out in equal runs
/// (`ceil(tiles / splits)` each, rounded up to a multiple of `align` tiles, the last
/// ones shorter or empty).
pub(super) fn k_range(b: &mut KernelBuilder, k: Reg<U32>, tile_k: u32, align: u32) -> KRange {
    debug_assert!(tile_k.is_power_of_two() && align.is_power_of_two());
    let z = b.special(SpecialReg::Ctaid(Dim::Z));
    let nz = b.special(SpecialReg::Nctaid(Dim::Z));
    let all = b.add(k, tile_k - 1);
    let all = b.shr(all, tile_k.trailing_zeros());
    let per = b.add(all, nz);
    let per = b.sub(per, 1u32);
    let mut per = b.div_int(per, nz);
    if align > 1 {
        let up = b.add(per, align - 1);
        per = b.and(up, !(align - 1));
    }
    let first = b.mul(z, per);
    let first = b.min(first, all);
    let last = b.add(first, per);
    let last = b.min(last, all);
    let tiles = b.sub(last, first);
    let begin = b.shl(first, tile_k.trailing_zeros());
    let end = b.shl(last, tile_k.trailing_zeros());
    let end = b.min(end, k);
    KRange {
        begin,
        end,
        tiles,
        first,
    }
}

/// Where split `%ctaid.z` writes its `m x n` product of `bytes`-wide elements: `c`
/// itself for the first (and an unsplit launch), the next slices after it.
pub(super) fn split_output(
    b: &mut KernelBuilder,
    c: Reg<U64>,
    (m, n): (Reg<U32>, Reg<U32>),
    bytes: u32,
) -> Reg<U64> {
    let z = b.special(SpecialReg::Ctaid(Dim::Z));
    let mn = b.mul(m, n);
    let slice = b.mul_wide(mn, bytes);
    let z = b.cvt::<U64, U32>(z, None);
    let off = b.mul(slice, z);
    b.add(c, off)
}

/// How many ranges to cut the k-loop of a GEMM with `tiles` output tiles and `k_tiles`
/// k-tiles into so that its blocks number about `target` (the blocks the kernel wants
/// in flight at once), each range at least `min_k_tiles` long (shorter ones pay the
/// pipeline's fill for little work), [`MAX_SPLITS`] at most; 1 where the tiles alone
/// pass half the target.
///
/// Every range writes its slice and the reduce reads them all back, so a cut pays only
/// where a block's own work outweighs that. Measured on an H100 (GPU time, µs;
/// BENCHMARKS.md "Split-K"): the SGEMM (two blocks a multiprocessor) and the 16-bit
/// wgmma GEMM (one) do best with blocks for half their slots: SGEMM 512^3 55.6 / 24.9 /
/// 24.1 / 31.7 at 1 / 4 / 8 / 16 ranges, bf16 128 x 4096 x 4096 24.6 / 20.7 / 22.3 /
/// 24.3 at 1 / 2 / 3 / 4, 64 tiles (1024^3) fastest uncut; the fused quantized GEMM,
/// whose blocks spend longest on their own k, with blocks for all of them: Q4_K at
/// 128 x 4096 x 4096 43.7 / 29.1 / 24.8 / 20.8 at 1 / 2 / 3 / 4.
///
/// ```
/// use trueno_gpu::kernels::gemm_split::splits_for;
///
/// // 512^3 in 128 x 128 tiles, 32-k steps, aiming at one block on each of 132 SMs.
/// assert_eq!(splits_for(16, 16, 132, 2), 8);
/// // 4096^3 fills the GPU by itself.
/// assert_eq!(splits_for(1024, 128, 132, 2), 1);
/// ```
pub fn splits_for(tiles: usize, k_tiles: usize, target: usize, min_k_tiles: usize) -> u32 {
    if tiles == 0 {
        return 1;
    }
    let fill = target / tiles;
    let deep = k_tiles / min_k_tiles.max(1);
    fill.min(deep).clamp(1, MAX_SPLITS as usize) as u32
}

/// Sums the `splits` f32 slices of `parts` (each `m x n`, row-major, one after another)
/// and applies the tensor-core GEMMs' epilogue (`alpha`, `beta` reading the
/// old `c` only when non-zero, a bias, an activation) into `c` of the output type.
/// Parameters `parts`, `splits`, `c`, `m`, `n`, `alpha`, `beta`, `bias`, `epilogue`;
/// `n` a multiple of 4 (four columns a thread, 16-byte reads).
#[derive(Clone, Copy, Debug)]
pub struct SplitReduceKernel(pub FloatType);

fn build_reduce(name: &str, out: FloatType) -> KernelIr {
    let mut b = KernelBuilder::new(name);
    b.max_threads(GROUP_THREADS);
    let parts = b.param_ptr("parts", PtxType::F32);
    let splits = b.param_u32("splits");
    let gc = b.param_ptr("c", out.ptx());
    let m = b.param_u32("m");
    let n = b.param_u32("n");
    let area = b.dynamic_shared();
    let t = b.tid_x();
    let row0 = b.ctaid_y();
    let row0 = b.mul(row0, GROUP_ROWS);
    let col0 = b.ctaid_x();
    let col0 = b.mul(col0, REDUCE_COLS);
    // The positions CStore::store gives this thread: four columns at quad t % quads,
    // rows t / quads + row_step i.
    let quads = REDUCE_COLS / 4;
    let row_step = GROUP_THREADS / quads;
    let q = b.and(t, quads - 1);
    let first = b.shr(t, quads.trailing_zeros());
    let col = b.mad(q, 4u32, col0);
    let c_ok = b.setp::<U32>(Cmp::Lt, col, n);
    let rows = GROUP_ROWS / row_step;
    let sums: Vec<[Reg<F32>; 4]> = (0..rows).map(|_| [(); 4].map(|_| b.mov(0.0f32))).collect();
    let at: Vec<(Reg<U64>, Reg<Pred>)> = (0..rows)
        .map(|i| {
            let row = b.add(row0, first);
            let row = b.add(row, i * row_step);
            let r_ok = b.setp::<U32>(Cmp::Lt, row, m);
            let ok = b.and_pred(r_ok, c_ok);
            let idx = b.mad(row, n, col);
            (elem_addr(&mut b, parts, idx, 4), ok)
        })
        .collect();
    let mn = b.mul(m, n);
    let slice = b.mul_wide(mn, 4u32);
    let offset = b.mov(0u64);
    // Four slices a step, every load issued before the first add: a slice a step left
    // each step waiting on its loads' latency (5.2 us for eight slices of 512^2 f32 on
    // an H100, 1.6 TB/s from L2).
    b.for_loop(0u32, splits, SLICES_A_STEP, true, |b, s| {
        let loaded: Vec<Vec<[Reg<F32>; 4]>> = (0..SLICES_A_STEP)
            .map(|u| {
                let there = b.add(s, u);
                let in_range = b.setp::<U32>(Cmp::Lt, there, splits);
                let off = b.mul(slice, u64::from(u));
                let off = b.add(offset, off);
                at.iter()
                    .map(|&(addr, ok)| {
                        let addr = b.add(addr, off);
                        let ok = b.and_pred(ok, in_range);
                        let v = [(); 4].map(|_| b.mov(0.0f32));
                        b.predicated(ok, |b| {
                            let x = b.ld_vec::<F32, U64, 4>(Space::Global, addr, 0);
                            for (&v, x) in v.iter().zip(x) {
                                b.assign(v, x);
                            }
                        });
                        v
                    })
                    .collect()
            })
            .collect();
        for slice_values in &loaded {
            for (sum, v) in sums.iter().zip(slice_values) {
                for (&s, &x) in sum.iter().zip(v) {
                    let t = b.add(s, x);
                    b.assign(s, t);
                }
            }
        }
        let step = b.mul(slice, u64::from(SLICES_A_STEP));
        let next = b.add(offset, step);
        b.assign(offset, next);
    });
    let store = CStore::declare(&mut b, gc, out, m, n);
    let pairs = sums.iter().enumerate().flat_map(|(i, s)| {
        let dr = i as u32 * row_step;
        [(dr, 0, [s[0], s[1]]), (dr, 2, [s[2], s[3]])]
    });
    let quad_col = b.shl(q, 2u32);
    store.stage(&mut b, (area, REDUCE_COLS), (first, quad_col), pairs);
    b.bar_sync();
    store.store(&mut b, (area, REDUCE_COLS), (row0, col0), t);
    b.ret();
    b.finish()
}

impl Kernel for SplitReduceKernel {
    fn name(&self) -> String {
        format!("trueno_gemm_split_reduce_{}", self.0.name())
    }
    fn family(&self) -> Family {
        Family::Gemm
    }
    fn build(&self) -> KernelIr {
        build_reduce(&self.name(), self.0)
    }
    /// `[m, n]`; `n` a multiple of 4.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        let name = self.name();
        let &[m, n] = dims else {
            return shape_err(&name, format!("expected [m, n], got {dims:?}"));
        };
        if m == 0 || !n.is_multiple_of(4) || n == 0 {
            return shape_err(
                &name,
                format!("{m} x {n}: n must be a non-zero multiple of 4"),
            );
        }
        if m.checked_mul(n).is_none_or(|mn| mn > u32::MAX as usize) {
            return shape_err(&name, format!("{m} x {n} exceeds 32-bit indexing"));
        }
        Ok(LaunchConfig {
            grid: (
                blocks_for(&name, n, REDUCE_COLS as usize, i32::MAX as u32)?,
                blocks_for(&name, m, GROUP_ROWS as usize, 65535)?,
                1,
            ),
            block: (GROUP_THREADS, 1, 1),
            shared_bytes: staged_bytes(REDUCE_COLS),
        })
    }
}

/// The reduce kernel for every output type.
pub fn all() -> Vec<Box<dyn Kernel>> {
    FloatType::ALL
        .into_iter()
        .map(|t| Box::new(SplitReduceKernel(t)) as Box<dyn Kernel>)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_reach_the_target_without_short_ranges() {
        // 1024^3 SGEMM: 64 tiles, 32 k-tiles of 32, a target of 132 blocks -> 2.
        assert_eq!(splits_for(64, 32, 132, 2), 2);
        // bf16 1024^3 on the wgmma path: 64 tiles of 128 x 128, a target of 66 -> uncut.
        assert_eq!(splits_for(64, 16, 66, 4), 1);
        // 128 tokens x 4096 x 4096: 32 tiles, 64 k-tiles; 2 for a target of 66, 4 for
        // the fused quantized GEMM's 132.
        assert_eq!(splits_for(32, 64, 66, 4), 2);
        assert_eq!(splits_for(32, 64, 132, 4), 4);
        // A short k keeps the ranges long: 16 tiles, 6 k-tiles, at least 2 each -> 3.
        assert_eq!(splits_for(16, 6, 132, 2), 3);
        // Never more than MAX_SPLITS, never 0.
        assert_eq!(splits_for(1, 1000, 132, 2), MAX_SPLITS);
        assert_eq!(splits_for(1, 1, 132, 2), 1);
        assert_eq!(splits_for(0, 10, 132, 2), 1);
        // More than half the target already: uncut.
        assert_eq!(splits_for(67, 100, 132, 2), 1);
        assert_eq!(splits_for(66, 100, 132, 2), 2);
    }

    #[test]
    fn the_reduce_launch_covers_ragged_shapes_and_rejects_what_it_cannot_read() {
        let k = SplitReduceKernel(FloatType::Bf16);
        let c = k.launch_config(&[65, 260]).unwrap();
        assert_eq!((c.grid, c.block.0), ((9, 2, 1), 128));
        assert_eq!(c.shared_bytes, staged_bytes(32));
        for bad in [&[0, 8][..], &[8, 6], &[8, 0], &[8]] {
            assert!(k.launch_config(bad).is_err(), "{bad:?}");
        }
        let ir = k.build();
        assert!(ir.dynamic_shared);
    }
}
