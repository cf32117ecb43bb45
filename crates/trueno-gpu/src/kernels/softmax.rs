//! Row softmax over a row-major f32 matrix. Rows whose length is a multiple of 4 use
//! 16-byte accesses.
//!
//! Short rows (up to 1024): one warp per row, the row held in the lanes' registers (32
//! values a lane at most): one read, the max, one exponential a value, the sum, one
//! write. (The first version read the row twice and paid three exponentials a value
//! through an online max; on GPU time it ran at 0.82x PyTorch's softmax at 4096 x 1024
//! on an H100.) Long rows: one block per row, one pass with an online max and rescaled
//! sum, then a second pass that writes exp(x - max) / sum.

use super::helpers::{
    block_stage, col_loop, load_cols, max_nan, max_nan_of, row_ptr, store_cols, warp_reduce,
};
use super::{Family, Kernel, LaunchConfig, blocks_for, check_rows, math};
use crate::error::Result;
use crate::ptx::{Cmp, F32, KernelBuilder, KernelIr, PtxType, Reg, ShflMode, Space, U32, U64};

/// Rows at most this long take the warp-per-row kernel.
pub const WARP_ROW_MAX: usize = 1024;
/// Threads per block (8 rows per block in the warp kernel).
pub const WARP_THREADS: u32 = 256;
/// Threads per block in the block-per-row kernel.
pub const BLOCK_THREADS: u32 = 512;

/// CPU reference in f64.
pub fn reference(x: &[f32], cols: usize) -> Vec<f32> {
    x.chunks(cols)
        .flat_map(|row| {
            let m = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
            let has_nan = row.iter().any(|v| v.is_nan());
            let e: Vec<f64> = row.iter().map(|&v| (v as f64 - m).exp()).collect();
            let s: f64 = e.iter().sum();
            e.into_iter()
                .map(move |v| if has_nan { f32::NAN } else { (v / s) as f32 })
        })
        .collect()
}

/// The kernel shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SoftmaxVariant {
    /// One warp per row.
    Warp,
    /// One block per row.
    Block,
}

/// A softmax kernel: parameters `x`, `out`, `rows`, `cols`. `vec4` configurations need
/// `cols % 4 == 0`.
#[derive(Clone, Copy, Debug)]
pub struct SoftmaxKernel {
    /// Warp or block per row.
    pub variant: SoftmaxVariant,
    /// 16-byte accesses.
    pub vec4: bool,
}

impl SoftmaxKernel {
    /// The configuration for a row length.
    pub fn for_cols(cols: usize) -> Self {
        let variant = if cols <= WARP_ROW_MAX {
            SoftmaxVariant::Warp
        } else {
            SoftmaxVariant::Block
        };
        SoftmaxKernel {
            variant,
            vec4: cols.is_multiple_of(4),
        }
    }
}

/// (m, s) pair combine: the max and the sum of exp(x - max), each side rescaled. A side
/// whose max equals the new max keeps its sum as is (this also covers -inf on both sides).
fn combine(b: &mut KernelBuilder, m: Reg<F32>, s: Reg<F32>, m2: Reg<F32>, s2: Reg<F32>) {
    let mx = b.max(m, m2);
    let scale = |b: &mut KernelBuilder, mi: Reg<F32>| {
        let same = b.setp::<F32>(Cmp::Eq, mi, mx);
        let d = b.sub(mi, mx);
        let e = math::exp(b, d);
        b.selp(1.0f32, e, same)
    };
    let a = scale(b, m);
    let c = scale(b, m2);
    let t = b.mul(s2, c);
    let ns = b.fma(s, a, t);
    b.assign(m, mx);
    b.assign(s, ns);
}

fn warp_combine(b: &mut KernelBuilder, m: Reg<F32>, s: Reg<F32>) {
    for d in [16u32, 8, 4, 2, 1] {
        let m2 = b.shfl(ShflMode::Bfly, m, d);
        let s2 = b.shfl(ShflMode::Bfly, s, d);
        combine(b, m, s, m2, s2);
    }
}

/// The warp kernel's row: lane `l` holds columns `width * (l + 32 k)..+width` for every
/// `k` below `WARP_ROW_MAX / (32 * width)` (-inf past `cols`, which weighs 0, or NaN if
/// the row's max is -inf or NaN, as the reference's), then writes the ones inside. Steps
/// wholly past `cols` are branched over (the test is the same for the whole warp), so a
/// short row pays for its own columns only.
fn warp_row_in_registers(
    b: &mut KernelBuilder,
    (xr, or): (Reg<U64>, Reg<U64>),
    cols: Reg<U32>,
    lane: Reg<U32>,
    width: u32,
) {
    let steps = WARP_ROW_MAX as u32 / (32 * width);
    let w = width as usize;
    let c0 = b.mul(lane, width);
    let col = |b: &mut KernelBuilder, k: u32| b.add(c0, k * 32 * width);
    // Whether step k has a column inside the row, for the whole warp.
    let live_step = |b: &mut KernelBuilder, k: u32| b.setp::<U32>(Cmp::Lt, k * 32 * width, cols);
    let vals: Vec<Reg<F32>> = (0..steps * width)
        .map(|_| b.mov(f32::NEG_INFINITY))
        .collect();
    for k in 0..steps {
        let live = live_step(b, k);
        b.if_then(live, true, |b| {
            let c = col(b, k);
            let inside = b.setp::<U32>(Cmp::Lt, c, cols);
            b.predicated(inside, |b| {
                let v = load_cols(b, xr, c, width);
                for (r, v) in vals[k as usize * w..].iter().zip(v) {
                    b.assign(*r, v);
                }
            });
        });
    }
    let m = max_nan_of(b, vals[0], vals[1..].iter().copied());
    let m = warp_reduce(b, m, max_nan);
    // Each value becomes its exponential in place (a step past the row keeps -inf and
    // stays out of the sum).
    let sum = b.mov(0.0f32);
    for k in 0..steps {
        let live = live_step(b, k);
        b.if_then(live, true, |b| {
            for &v in &vals[k as usize * w..(k as usize + 1) * w] {
                let d = b.sub(v, m);
                let e = math::exp(b, d);
                b.assign(v, e);
                let s2 = b.add(sum, e);
                b.assign(sum, s2);
            }
        });
    }
    let sum = warp_reduce(b, sum, |b, x, y| b.add(x, y));
    let inv = b.div(1.0f32, sum);
    for k in 0..steps {
        let live = live_step(b, k);
        b.if_then(live, true, |b| {
            let c = col(b, k);
            let inside = b.setp::<U32>(Cmp::Lt, c, cols);
            let r: Vec<Reg<F32>> = vals[k as usize * w..(k as usize + 1) * w]
                .iter()
                .map(|&e| b.mul(e, inv))
                .collect();
            b.predicated(inside, |b| store_cols(b, or, c, &r));
        });
    }
}

impl Kernel for SoftmaxKernel {
    fn name(&self) -> String {
        let v = match self.variant {
            SoftmaxVariant::Warp => "warp",
            SoftmaxVariant::Block => "block",
        };
        format!(
            "trueno_softmax_{v}{}_f32",
            if self.vec4 { "_v4" } else { "" }
        )
    }
    fn family(&self) -> Family {
        Family::Softmax
    }
    fn build(&self) -> KernelIr {
        let width = if self.vec4 { 4 } else { 1 };
        let mut b = KernelBuilder::new(self.name());
        let x = b.param_ptr("x", PtxType::F32);
        let out = b.param_ptr("out", PtxType::F32);
        let rows = b.param_u32("rows");
        let cols = b.param_u32("cols");
        let tid = b.tid_x();
        if self.variant == SoftmaxVariant::Warp {
            b.max_threads(WARP_THREADS);
            let warp = b.shr(tid, 5u32);
            let c = b.ctaid_x();
            let row = b.mad(c, WARP_THREADS / 32, warp);
            let lane = b.and(tid, 31u32);
            // Warps past the last row leave; this kernel has no barrier.
            let past = b.setp::<U32>(Cmp::Ge, row, rows);
            b.exit_if(past);
            let (xr, or) = (
                row_ptr(&mut b, x, row, cols),
                row_ptr(&mut b, out, row, cols),
            );
            warp_row_in_registers(&mut b, (xr, or), cols, lane, width);
            b.ret();
            return b.finish();
        }
        // A block per row: an online max and rescaled sum, then the writing pass.
        b.max_threads(BLOCK_THREADS);
        let stride = b.ntid_x();
        let (row, first) = (b.ctaid_x(), tid);
        let xr = row_ptr(&mut b, x, row, cols);
        let m = b.mov(f32::NEG_INFINITY);
        let s = b.mov(0.0f32);
        col_loop(&mut b, cols, first, stride, width, |b, c| {
            for v in load_cols(b, xr, c, width) {
                let one = b.mov(1.0f32);
                combine(b, m, s, v, one);
            }
        });
        warp_combine(&mut b, m, s);
        let smem = b.shared_array("ms", 66 * 4, 16);
        let identity = [f32::NEG_INFINITY.to_bits(), 0.0f32.to_bits()];
        block_stage(&mut b, &[m, s], &identity, smem, |b, w, lane0| {
            warp_combine(b, w[0], w[1]);
            b.predicated(lane0, |b| {
                b.st::<F32, U32>(Space::Shared, smem, 64 * 4, w[0]);
                b.st::<F32, U32>(Space::Shared, smem, 65 * 4, w[1]);
            });
        });
        b.bar_sync();
        let bm = b.ld::<F32, U32>(Space::Shared, smem, 64 * 4);
        let bs = b.ld::<F32, U32>(Space::Shared, smem, 65 * 4);
        b.assign(m, bm);
        b.assign(s, bs);
        let inv = b.div(1.0f32, s);
        let or = row_ptr(&mut b, out, row, cols);
        col_loop(&mut b, cols, first, stride, width, |b, c| {
            let v = load_cols(b, xr, c, width);
            let r: Vec<Reg<F32>> = v
                .into_iter()
                .map(|v| {
                    let d = b.sub(v, m);
                    let e = math::exp(b, d);
                    b.mul(e, inv)
                })
                .collect();
            store_cols(b, or, c, &r);
        });
        b.ret();
        b.finish()
    }
    /// `[rows, cols]`.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        let name = self.name();
        check_rows(&name, dims, self.vec4)?;
        Ok(match self.variant {
            SoftmaxVariant::Warp => {
                let per_block = (WARP_THREADS / 32) as usize;
                LaunchConfig::linear(
                    blocks_for(&name, dims[0], per_block, i32::MAX as u32)?,
                    WARP_THREADS,
                )
            }
            SoftmaxVariant::Block => LaunchConfig::linear(
                blocks_for(&name, dims[0], 1, i32::MAX as u32)?,
                BLOCK_THREADS,
            ),
        })
    }
}

/// Every softmax configuration.
pub fn all() -> Vec<Box<dyn Kernel>> {
    let mut v: Vec<Box<dyn Kernel>> = Vec::new();
    for variant in [SoftmaxVariant::Warp, SoftmaxVariant::Block] {
        for vec4 in [false, true] {
            v.push(Box::new(SoftmaxKernel { variant, vec4 }));
        }
    }
    v
}
