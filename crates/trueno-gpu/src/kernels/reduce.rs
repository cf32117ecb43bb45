//! Reductions over f32: sum, max (NaN propagates) and argmax (first index of the largest;
//! NaN counts as largest, as in PyTorch). Warp shuffles, then the block through shared
//! memory, then the grid: a first launch writes one partial per block, a second launch of
//! the same kernel with one block reduces the partials. Deterministic: no atomics.

use super::helpers::{
    self, Combine, block_reduce, block_stage, elem_addr, global_index, grid_threads, grid_vec4,
    load_cols,
};
use super::{Family, Kernel, LaunchConfig, check_dims};
use crate::error::Result;
use crate::ptx::{
    Cmp, F32, KernelBuilder, KernelIr, Pred, PtxType, Reg, ShflMode, Space, U32, U64,
};

/// Threads per block.
pub const THREADS: u32 = 256;
/// Most blocks in a first pass (the second pass reduces this many partials).
pub const MAX_BLOCKS: u32 = 1024;

/// The reductions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Sum.
    Sum,
    /// Largest value; NaN if any element is NaN.
    Max,
    /// Index of the largest value (first on ties, first NaN if any).
    Argmax,
}

impl ReduceOp {
    /// Every reduction.
    pub const ALL: [ReduceOp; 3] = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Argmax];

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Max => "max",
            ReduceOp::Argmax => "argmax",
        }
    }
}

/// CPU reference: sum in f64.
pub fn reference_sum(x: &[f32]) -> f64 {
    x.iter().map(|&v| v as f64).sum()
}

/// CPU reference: max, NaN if any element is NaN.
pub fn reference_max(x: &[f32]) -> f32 {
    x.iter().fold(f32::NEG_INFINITY, |m, &v| {
        if v.is_nan() || m.is_nan() {
            f32::NAN
        } else {
            m.max(v)
        }
    })
}

/// CPU reference: first index of the largest value, NaN largest.
pub fn reference_argmax(x: &[f32]) -> Option<usize> {
    if let Some(i) = x.iter().position(|v| v.is_nan()) {
        return Some(i);
    }
    let mut best: Option<usize> = None;
    for (i, &v) in x.iter().enumerate() {
        if best.is_none_or(|b| v > x[b]) {
            best = Some(i);
        }
    }
    best
}

/// Blocks of the first pass for `n` elements (each thread handles at least 16).
pub fn first_pass_blocks(n: usize) -> u32 {
    n.div_ceil(THREADS as usize * 16)
        .clamp(1, MAX_BLOCKS as usize) as u32
}

/// A reduction kernel. Sum/max parameters: `x`, `out`, `n`; each block writes
/// `out[blockIdx]`. Argmax: `x`, `idx_in`, `out_val`, `out_idx`, `n`, `has_idx` (when 1,
/// `idx_in[i]` is the original index of `x[i]`: the second pass).
#[derive(Clone, Copy, Debug)]
pub struct ReduceKernel(pub ReduceOp);

impl Kernel for ReduceKernel {
    fn name(&self) -> String {
        format!("trueno_{}_f32", self.0.name())
    }
    fn family(&self) -> Family {
        Family::Reduce
    }
    fn build(&self) -> KernelIr {
        match self.0 {
            ReduceOp::Sum => build_fold(&self.name(), helpers::add, 0.0),
            ReduceOp::Max => build_fold(&self.name(), helpers::max_nan, f32::NEG_INFINITY),
            ReduceOp::Argmax => build_argmax(&self.name()),
        }
    }
    /// The first pass for `[n]`; the second is `LaunchConfig::linear(1, THREADS)` over the
    /// partials.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        check_dims(&self.name(), dims, 1)?;
        Ok(LaunchConfig::linear(first_pass_blocks(dims[0]), THREADS))
    }
}

fn build_fold(name: &str, op: Combine, identity: f32) -> KernelIr {
    let mut b = KernelBuilder::new(name);
    b.overlap_neighbours();
    b.max_threads(THREADS);
    let x = b.param_ptr("x", PtxType::F32);
    let out = b.param_ptr("out", PtxType::F32);
    let n = b.param_u32("n");
    let smem = b.shared_array("red", 33 * 4, 16);
    let acc: [Reg<F32>; 4] = std::array::from_fn(|_| b.mov(identity));
    grid_vec4(&mut b, n, |b, i, width| {
        for (k, v) in load_cols(b, x, i, width).into_iter().enumerate() {
            let r = op(b, acc[k], v);
            b.assign(acc[k], r);
        }
    });
    let s01 = op(&mut b, acc[0], acc[1]);
    let s23 = op(&mut b, acc[2], acc[3]);
    let s = op(&mut b, s01, s23);
    let total = block_reduce(&mut b, s, op, identity, smem);
    let tid = b.tid_x();
    let t0 = b.setp::<U32>(Cmp::Eq, tid, 0u32);
    let c = b.ctaid_x();
    let oa = elem_addr(&mut b, out, c, 4);
    b.predicated(t0, |b| b.st::<F32, U64>(Space::Global, oa, 0, total));
    b.ret();
    b.finish()
}

/// Whether (v2, i2) beats (v1, i1): larger, or equal with a smaller index; NaN is largest.
fn better(
    b: &mut KernelBuilder,
    v1: Reg<F32>,
    i1: Reg<U32>,
    v2: Reg<F32>,
    i2: Reg<U32>,
) -> Reg<Pred> {
    let n1 = b.setp::<F32>(Cmp::Nan, v1, v1);
    let n2 = b.setp::<F32>(Cmp::Nan, v2, v2);
    let gt = b.setp::<F32>(Cmp::Gt, v2, v1);
    let eq = b.setp::<F32>(Cmp::Eq, v2, v1);
    let both_nan = b.and_pred(n1, n2);
    let eq = b.or_pred(eq, both_nan);
    let lower = b.setp::<U32>(Cmp::Lt, i2, i1);
    let tie_win = b.and_pred(eq, lower);
    let not_n1 = b.not_pred(n1);
    let nan_win = b.and_pred(n2, not_n1);
    let w = b.or_pred(gt, tie_win);
    b.or_pred(w, nan_win)
}

fn take_if(
    b: &mut KernelBuilder,
    p: Reg<Pred>,
    v: Reg<F32>,
    i: Reg<U32>,
    v2: Reg<F32>,
    i2: Reg<U32>,
) {
    let nv = b.selp(v2, v, p);
    let ni = b.selp(i2, i, p);
    b.assign(v, nv);
    b.assign(i, ni);
}

fn warp_argmax(b: &mut KernelBuilder, v: Reg<F32>, i: Reg<U32>) {
    for d in [16u32, 8, 4, 2, 1] {
        let ov = b.shfl(ShflMode::Bfly, v, d);
        let oi = b.shfl(ShflMode::Bfly, i, d);
        let p = better(b, v, i, ov, oi);
        take_if(b, p, v, i, ov, oi);
    }
}

fn build_argmax(name: &str) -> KernelIr {
    let mut b = KernelBuilder::new(name);
    b.overlap_neighbours();
    b.max_threads(THREADS);
    let x = b.param_ptr("x", PtxType::F32);
    let idx_in = b.param_ptr("idx_in", PtxType::U32);
    let out_val = b.param_ptr("out_val", PtxType::F32);
    let out_idx = b.param_ptr("out_idx", PtxType::U32);
    let n = b.param_u32("n");
    let has_idx = b.param_u32("has_idx");
    let smem = b.shared_array("red", 64 * 4, 16);
    let gid = global_index(&mut b);
    let stride = grid_threads(&mut b);
    let best_v = b.mov(f32::NEG_INFINITY);
    let best_i = b.mov(u32::MAX);
    let mapped = b.setp::<U32>(Cmp::Ne, has_idx, 0u32);
    // Each thread scans its elements in increasing index order, so a candidate only
    // wins by being larger, by being the first NaN, or by being the first element at
    // all (-inf must still win over "nothing yet"); ties keep the earlier index.
    let scan = |b: &mut KernelBuilder, v: Reg<F32>, i: Reg<U32>| {
        let gt = b.setp::<F32>(Cmp::Gt, v, best_v);
        let v_nan = b.setp::<F32>(Cmp::Nan, v, v);
        let best_nan = b.setp::<F32>(Cmp::Nan, best_v, best_v);
        let best_num = b.not_pred(best_nan);
        let nan_win = b.and_pred(v_nan, best_num);
        let first = b.setp::<U32>(Cmp::Eq, best_i, u32::MAX);
        let p = b.or_pred(gt, nan_win);
        let p = b.or_pred(p, first);
        take_if(b, p, best_v, best_i, v, i);
    };
    let first_pass = b.new_label();
    let done = b.new_label();
    // The second pass (few partials, with their original indices): scalar.
    b.bra_if(mapped, true, first_pass, true);
    b.for_loop(gid, n, stride, false, |b, k| {
        let a = elem_addr(b, x, k, 4);
        let v = b.ld::<F32, U64>(Space::Global, a, 0);
        let ia = elem_addr(b, idx_in, k, 4);
        let i = b.ld::<U32, U64>(Space::Global, ia, 0);
        let p = better(b, best_v, best_i, v, i);
        take_if(b, p, best_v, best_i, v, i);
    });
    b.bra(done);
    // The first pass: 16-byte loads, then the n % 4 tail.
    b.place(first_pass);
    grid_vec4(&mut b, n, |b, i, width| {
        for (k, v) in load_cols(b, x, i, width).into_iter().enumerate() {
            let ik = if k == 0 { i } else { b.add(i, k as u32) };
            scan(b, v, ik);
        }
    });
    b.place(done);
    warp_argmax(&mut b, best_v, best_i);
    let idx_bits = b.bitcast32::<F32, U32>(best_i);
    let identity = [f32::NEG_INFINITY.to_bits(), u32::MAX];
    block_stage(
        &mut b,
        &[best_v, idx_bits],
        &identity,
        smem,
        |b, w, lane0| {
            let i = b.bitcast32::<U32, F32>(w[1]);
            warp_argmax(b, w[0], i);
            let c = b.ctaid_x();
            let va = elem_addr(b, out_val, c, 4);
            let ia = elem_addr(b, out_idx, c, 4);
            b.predicated(lane0, |b| {
                b.st::<F32, U64>(Space::Global, va, 0, w[0]);
                b.st::<U32, U64>(Space::Global, ia, 0, i);
            });
        },
    );
    b.ret();
    b.finish()
}

/// Every reduction kernel.
pub fn all() -> Vec<Box<dyn Kernel>> {
    ReduceOp::ALL
        .iter()
        .map(|&op| Box::new(ReduceKernel(op)) as Box<dyn Kernel>)
        .collect()
}
