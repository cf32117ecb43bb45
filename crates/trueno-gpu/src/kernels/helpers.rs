//! Building blocks shared by the kernel families: thread indexing, addressing, and warp
//! and block reductions.

use crate::ptx::{Cmp, F32, KernelBuilder, Pred, Reg, ShflMode, Space, U16, U32, U64};

/// `ctaid.x * ntid.x + tid.x`
pub(crate) fn global_index(b: &mut KernelBuilder) -> Reg<U32> {
    let (c, n, t) = (b.ctaid_x(), b.ntid_x(), b.tid_x());
    b.mad(c, n, t)
}

/// The lane of the thread in its warp and the warp's index in the grid, for blocks of
/// `threads`: the frame of every warp-per-item kernel.
pub(crate) fn lane_and_warp(b: &mut KernelBuilder, threads: u32) -> (Reg<U32>, Reg<U32>) {
    let tid = b.tid_x();
    let in_block = b.shr(tid, 5u32);
    let lane = b.and(tid, 31u32);
    let cta = b.ctaid_x();
    (lane, b.mad(cta, threads / 32, in_block))
}

/// Threads in the whole grid: the stride of a grid-stride loop.
pub(crate) fn grid_threads(b: &mut KernelBuilder) -> Reg<U32> {
    let (c, n) = (b.nctaid_x(), b.ntid_x());
    b.mul(c, n)
}

/// Two 16-bit halves as one word, `lo` in the low half (one byte permute).
pub(crate) fn pair16(b: &mut KernelBuilder, lo: Reg<U16>, hi: Reg<U16>) -> Reg<U32> {
    let lo = b.cvt::<U32, U16>(lo, None);
    let hi = b.cvt::<U32, U16>(hi, None);
    b.prmt(lo, hi, 0x5410u32)
}

/// A table row by id: `id` clamped to the last of `rows` (every read stays inside the
/// table) and whether it was past them (the caller writes NaN there).
pub(crate) fn clamped_row(
    b: &mut KernelBuilder,
    id: Reg<U32>,
    rows: Reg<U32>,
) -> (Reg<U32>, Reg<Pred>) {
    let bad = b.setp::<U32>(Cmp::Ge, id, rows);
    let last = b.sub(rows, 1u32);
    (b.min(id, last), bad)
}

/// `base + idx * bytes` as a 64-bit address.
pub(crate) fn elem_addr(
    b: &mut KernelBuilder,
    base: Reg<U64>,
    idx: Reg<U32>,
    bytes: u32,
) -> Reg<U64> {
    let off = b.mul_wide(idx, bytes);
    b.add(base, off)
}

/// Visits elements `0..n` of flat arrays: 4 at a time (16-byte accesses) in a
/// grid-stride loop, then the `n % 4` tail one element per thread of the first few.
/// `f(b, i, width)` handles elements `i..i + width` (width 4 or 1), in increasing order
/// per thread.
pub(crate) fn grid_vec4(
    b: &mut KernelBuilder,
    n: Reg<U32>,
    mut f: impl FnMut(&mut KernelBuilder, Reg<U32>, u32),
) {
    let gid = global_index(b);
    let stride = grid_threads(b);
    let n_vec = b.shr(n, 2u32);
    b.for_loop(gid, n_vec, stride, false, |b, q| {
        let i = b.shl(q, 2u32);
        f(b, i, 4);
    });
    let head = b.shl(n_vec, 2u32);
    let j = b.add(head, gid);
    let in_tail = b.setp::<U32>(Cmp::Lt, j, n);
    b.if_then(in_tail, false, |b| f(b, j, 1));
}

/// A binary reduction step.
pub(crate) type Combine = fn(&mut KernelBuilder, Reg<F32>, Reg<F32>) -> Reg<F32>;

/// Sum.
pub(crate) fn add(b: &mut KernelBuilder, x: Reg<F32>, y: Reg<F32>) -> Reg<F32> {
    b.add(x, y)
}

/// Max that propagates NaN (PTX `max` returns the non-NaN operand).
pub(crate) fn max_nan(b: &mut KernelBuilder, x: Reg<F32>, y: Reg<F32>) -> Reg<F32> {
    let m = b.max(x, y);
    let either_nan = b.setp::<F32>(Cmp::Nan, x, y);
    let poison = b.add(x, y);
    b.selp(poison, m, either_nan)
}

/// [`max_nan`] of `first` and every value of `rest`, in order: a NaN among them makes
/// the result NaN.
pub(crate) fn max_nan_of(
    b: &mut KernelBuilder,
    first: Reg<F32>,
    rest: impl IntoIterator<Item = Reg<F32>>,
) -> Reg<F32> {
    let mut m = first;
    for x in rest {
        m = max_nan(b, m, x);
    }
    m
}

/// Reduces across the 32 lanes of a warp; every lane gets the result.
pub(crate) fn warp_reduce(b: &mut KernelBuilder, v: Reg<F32>, op: Combine) -> Reg<F32> {
    group_reduce(b, v, op, 32)
}

/// Reduces across each aligned group of `lanes` lanes (a power of two up to 32); every
/// lane of a group gets its group's result.
pub(crate) fn group_reduce(
    b: &mut KernelBuilder,
    v: Reg<F32>,
    op: Combine,
    lanes: u32,
) -> Reg<F32> {
    let mut v = v;
    let mut d = lanes / 2;
    while d > 0 {
        let o = b.shfl(ShflMode::Bfly, v, d);
        v = op(b, v, o);
        d /= 2;
    }
    v
}

/// The cross-warp stage of a block reduction over a tuple of 32-bit values, carried in
/// f32 registers (a u32 travels as its bits, through `bitcast32`). Lane 0 of every warp
/// must hold its warp's tuple. Warp 0 gathers the tuples, `identity` (as bits) standing in
/// for absent warps, and runs `in_warp0(b, tuple, lane0)`, which reduces across its lanes
/// and publishes the result. Starts with a barrier: every thread of the block must call
/// it. `smem` holds 32 floats per tuple element from its start.
pub(crate) fn block_stage(
    b: &mut KernelBuilder,
    vals: &[Reg<F32>],
    identity: &[u32],
    smem: Reg<U32>,
    in_warp0: impl FnOnce(&mut KernelBuilder, &[Reg<F32>], Reg<Pred>),
) {
    let tid = b.tid_x();
    let lane = b.and(tid, 31u32);
    let warp = b.shr(tid, 5u32);
    let lane0 = b.setp::<U32>(Cmp::Eq, lane, 0u32);
    let slot = b.mad(warp, 4u32, smem);
    b.predicated(lane0, |b| {
        for (k, &v) in vals.iter().enumerate() {
            b.st::<F32, U32>(Space::Shared, slot, k as i64 * 32 * 4, v);
        }
    });
    b.bar_sync();
    let first_warp = b.setp::<U32>(Cmp::Eq, warp, 0u32);
    b.if_then(first_warp, false, |b| {
        let nt = b.ntid_x();
        let nwarps = b.shr(nt, 5u32);
        let has = b.setp::<U32>(Cmp::Lt, lane, nwarps);
        let src = b.mad(lane, 4u32, smem);
        let w: Vec<Reg<F32>> = identity
            .iter()
            .enumerate()
            .map(|(k, &bits)| {
                let id = b.mov::<U32>(bits);
                let w = b.bitcast32::<F32, U32>(id);
                b.predicated(has, |b| {
                    let x = b.ld::<F32, U32>(Space::Shared, src, k as i64 * 32 * 4);
                    b.assign(w, x);
                });
                w
            })
            .collect();
        in_warp0(b, &w, lane0);
    });
}

/// Reduces across the block (at most 32 warps) and broadcasts the result to every thread.
/// `smem` must hold 33 floats. Contains barriers: every thread of the block must call it.
pub(crate) fn block_reduce(
    b: &mut KernelBuilder,
    v: Reg<F32>,
    op: Combine,
    identity: f32,
    smem: Reg<U32>,
) -> Reg<F32> {
    let v = warp_reduce(b, v, op);
    block_stage(b, &[v], &[identity.to_bits()], smem, |b, w, lane0| {
        let r = warp_reduce(b, w[0], op);
        b.predicated(lane0, |b| b.st::<F32, U32>(Space::Shared, smem, 32 * 4, r));
    });
    b.bar_sync();
    b.ld::<F32, U32>(Space::Shared, smem, 32 * 4)
}

/// Address of row `row` of a row-major matrix of `cols` f32s.
pub(crate) fn row_ptr(
    b: &mut KernelBuilder,
    base: Reg<U64>,
    row: Reg<U32>,
    cols: Reg<U32>,
) -> Reg<U64> {
    let elems = b.mul_wide(row, cols);
    let bytes = b.shl(elems, 2u32);
    b.add(base, bytes)
}

/// Loads `width` (1 or 4) consecutive f32s at column `c` of `row`.
pub(crate) fn load_cols(
    b: &mut KernelBuilder,
    row: Reg<U64>,
    c: Reg<U32>,
    width: u32,
) -> Vec<Reg<F32>> {
    let a = elem_addr(b, row, c, 4);
    if width == 4 {
        b.ld_vec::<F32, U64, 4>(Space::Global, a, 0).to_vec()
    } else {
        vec![b.ld::<F32, U64>(Space::Global, a, 0)]
    }
}

/// Stores `v` (1 or 4 values) at column `c` of `row`.
pub(crate) fn store_cols(b: &mut KernelBuilder, row: Reg<U64>, c: Reg<U32>, v: &[Reg<F32>]) {
    let a = elem_addr(b, row, c, 4);
    if v.len() == 4 {
        b.st_vec(Space::Global, a, 0, v);
    } else {
        b.st::<F32, U64>(Space::Global, a, 0, v[0]);
    }
}

/// Visits columns `first*width, (first+stride)*width, ...` below `cols`, `width` at a
/// time (4 needs `cols % 4 == 0`, which the launch checks). `f` gets the first column.
pub(crate) fn col_loop(
    b: &mut KernelBuilder,
    cols: Reg<U32>,
    first: Reg<U32>,
    stride: Reg<U32>,
    width: u32,
    mut f: impl FnMut(&mut KernelBuilder, Reg<U32>),
) {
    let end = if width == 4 { b.shr(cols, 2u32) } else { cols };
    b.for_loop(first, end, stride, false, |b, v| {
        let c = if width == 4 { b.shl(v, 2u32) } else { v };
        f(b, c);
    });
}

/// Moves `offset` (a byte offset into a ring of `stages` shared stages of `stage_bytes`)
/// to the next stage, wrapping to 0 after the last: the cp.async pipelines' stage cursor.
pub(crate) fn next_stage(b: &mut KernelBuilder, offset: Reg<U32>, stage_bytes: u32, stages: u32) {
    let next = b.add(offset, stage_bytes);
    let wrap = b.setp::<U32>(Cmp::Ge, next, stages * stage_bytes);
    let next = b.selp::<U32>(0u32, next, wrap);
    b.assign(offset, next);
}
