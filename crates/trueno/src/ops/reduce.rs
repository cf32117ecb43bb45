//! Reductions written once over [`Simd`], all through `map::fold_blocks`.
//!
//! # Summation order and error bound
//! Input is cut into blocks of `256 * LANES` elements. Inside a block, `4 * LANES` f32
//! partial sums each take every `4 * LANES`-th element (64 each); the partials are merged
//! pairwise, and each block's sum is added to an f64 total. For a sum, the error is at most
//! `(64 + log2(4 * LANES) + 1) * u * sum|x_i|` plus the final f64→f32 rounding, with
//! `u = 2^-24`: independent of n, and at most `71 u` (4.3e-6) on every ISA. Dot products
//! and norms have the same bound with the products' magnitudes.

use super::map::{Align, fold_blocks};
use crate::simd::Simd;

/// One-input reductions. Results are f64 totals (max/min: the exact f32 value).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum ReduceOp {
    Sum,
    /// Sum of |x|.
    SumAbs,
    /// Sum of x^2.
    SumSq,
    /// Sum of (x - c)^2.
    SumSqDev(f32),
    /// NaN-propagating maximum (`-inf` on empty input).
    Max,
    /// NaN-propagating minimum (`+inf` on empty input).
    Min,
    /// Largest |x|, NaN-propagating.
    MaxAbs,
    /// Sum of e^(x - m) (the normaliser of softmax).
    SumExp(f32),
}

/// Two-input reductions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Reduce2Op {
    /// Sum of a*b.
    Dot,
    /// Sum of (a-b)^2.
    SqDist,
    /// Sum of |a-b|.
    AbsDist,
}

/// Sum of `term` over all elements, blocked as the module docs describe.
#[inline(always)]
fn sum_of<S: Simd, const N: usize>(
    s: S,
    srcs: [&[f32]; N],
    pad: f32,
    term: impl Fn(S::V, [S::V; N]) -> S::V,
) -> f64 {
    let mut total = 0.0f64;
    fold_blocks(
        s,
        srcs,
        Align::Lowest,
        pad,
        [s.zero()],
        #[inline(always)]
        |[acc], v| *acc = term(*acc, v),
        #[inline(always)]
        |[a], [b]| [s.add(a, b)],
        #[inline(always)]
        |_, _, [acc]| total += s.reduce_add(acc) as f64,
    );
    total
}

/// The identity of max (`-inf`) or min (`+inf`).
fn identity(is_max: bool) -> f32 {
    if is_max {
        f32::NEG_INFINITY
    } else {
        f32::INFINITY
    }
}

/// Per-block extreme (`max` when `is_max`) of `map(x)` with NaN tracking;
/// `on_block(start, end, value)` gets each block's range and extreme, NaN if the block holds a NaN. `pad`
/// fills tail lanes and must leave the extreme unchanged once mapped.
#[inline(always)]
pub(crate) fn block_extremes<S: Simd>(
    s: S,
    x: &[f32],
    is_max: bool,
    pad: f32,
    map: impl Fn(S::V) -> S::V,
    mut on_block: impl FnMut(usize, usize, f32),
) {
    #[inline(always)]
    fn pick<S: Simd>(s: S, is_max: bool, a: S::V, b: S::V) -> S::V {
        if is_max { s.max(a, b) } else { s.min(a, b) }
    }
    // acc[1] starts at 0 and becomes NaN at the first NaN lane: a sticky flag.
    fold_blocks(
        s,
        [x],
        Align::Lowest,
        pad,
        [s.splat(identity(is_max)), s.zero()],
        #[inline(always)]
        |acc, [v]| {
            let v = map(v);
            acc[0] = pick(s, is_max, acc[0], v);
            acc[1] = s.select(s.is_nan(v), v, acc[1]);
        },
        #[inline(always)]
        |a, b| [pick(s, is_max, a[0], b[0]), s.add(a[1], b[1])],
        #[inline(always)]
        |start, end, acc| {
            let flag = s.reduce_add(acc[1]);
            let e = if is_max {
                s.reduce_max(acc[0])
            } else {
                s.reduce_min(acc[0])
            };
            on_block(start, end, if flag.is_nan() { f32::NAN } else { e });
        },
    );
}

/// The extreme over the whole input, NaN if any element is NaN.
#[inline(always)]
fn extreme<S: Simd>(s: S, x: &[f32], is_max: bool, pad: f32, map: impl Fn(S::V) -> S::V) -> f64 {
    let mut best = identity(is_max);
    block_extremes(
        s,
        x,
        is_max,
        pad,
        map,
        #[inline(always)]
        |_, _, e| {
            if e.is_nan() || best.is_nan() {
                best = f32::NAN;
            } else if (is_max && e > best) || (!is_max && e < best) {
                best = e;
            }
        },
    );
    best as f64
}

/// The reduction `op` over `x`.
#[inline(always)]
pub(crate) fn reduce_vec<S: Simd>(s: S, op: ReduceOp, x: &[f32]) -> f64 {
    match op {
        ReduceOp::Sum => sum_of(
            s,
            [x],
            0.0,
            #[inline(always)]
            |acc, [v]| s.add(acc, v),
        ),
        ReduceOp::SumAbs => sum_of(
            s,
            [x],
            0.0,
            #[inline(always)]
            |acc, [v]| s.add(acc, s.abs(v)),
        ),
        ReduceOp::SumSq => sum_of(
            s,
            [x],
            0.0,
            #[inline(always)]
            |acc, [v]| s.fma(v, v, acc),
        ),
        ReduceOp::SumSqDev(c) => {
            let cv = s.splat(c);
            sum_of(
                s,
                [x],
                c,
                #[inline(always)]
                |acc, [v]| {
                    let d = s.sub(v, cv);
                    s.fma(d, d, acc)
                },
            )
        }
        ReduceOp::Max => extreme(
            s,
            x,
            true,
            f32::NEG_INFINITY,
            #[inline(always)]
            |v| v,
        ),
        ReduceOp::Min => extreme(
            s,
            x,
            false,
            f32::INFINITY,
            #[inline(always)]
            |v| v,
        ),
        ReduceOp::MaxAbs => extreme(
            s,
            x,
            true,
            0.0,
            #[inline(always)]
            |v| s.abs(v),
        ),
        ReduceOp::SumExp(m) => {
            let mv = s.splat(m);
            // Pad with -inf: e^(-inf - m) = 0.
            sum_of(
                s,
                [x],
                f32::NEG_INFINITY,
                #[inline(always)]
                |acc, [v]| s.add(acc, super::math::exp(s, s.sub(v, mv))),
            )
        }
    }
}

/// The two-input reduction `op` over equally long `a` and `b`.
#[inline(always)]
pub(crate) fn reduce2_vec<S: Simd>(s: S, op: Reduce2Op, a: &[f32], b: &[f32]) -> f64 {
    match op {
        Reduce2Op::Dot => sum_of(
            s,
            [a, b],
            0.0,
            #[inline(always)]
            |acc, [x, y]| s.fma(x, y, acc),
        ),
        Reduce2Op::SqDist => sum_of(
            s,
            [a, b],
            0.0,
            #[inline(always)]
            |acc, [x, y]| {
                let d = s.sub(x, y);
                s.fma(d, d, acc)
            },
        ),
        Reduce2Op::AbsDist => sum_of(
            s,
            [a, b],
            0.0,
            #[inline(always)]
            |acc, [x, y]| s.add(acc, s.abs(s.sub(x, y))),
        ),
    }
}

/// Four dot products against one `x` in one pass (`A·x`, four rows at a time): x is
/// loaded once per four rows' loads, and four rows stream at once, their loads aligned
/// (`Align::First`). Each row's sum is blocked and flushed to f64 like [`reduce2_vec`]'s.
#[inline(always)]
pub(crate) fn dot4_vec<S: Simd>(s: S, rows: [&[f32]; 4], x: &[f32]) -> [f64; 4] {
    let mut total = [0.0f64; 4];
    let z = s.zero();
    fold_blocks(
        s,
        [rows[0], x, rows[1], rows[2], rows[3]],
        Align::First,
        0.0,
        [z, z, z, z],
        #[inline(always)]
        |acc, [a0, x, a1, a2, a3]| {
            acc[0] = s.fma(a0, x, acc[0]);
            acc[1] = s.fma(a1, x, acc[1]);
            acc[2] = s.fma(a2, x, acc[2]);
            acc[3] = s.fma(a3, x, acc[3]);
        },
        // Spelled out, not `array::from_fn`: its closure is compiled without the caller's
        // target features, so each add became a call (6% of the GEMV's time).
        #[inline(always)]
        |a, b| {
            [
                s.add(a[0], b[0]),
                s.add(a[1], b[1]),
                s.add(a[2], b[2]),
                s.add(a[3], b[3]),
            ]
        },
        #[inline(always)]
        |_, _, acc| {
            for (t, a) in total.iter_mut().zip(acc) {
                *t += s.reduce_add(a) as f64;
            }
        },
    );
    total
}

/// `[sum a*b, sum a*a, sum b*b]` in one pass (cosine similarity).
#[inline(always)]
pub(crate) fn dot_norms_vec<S: Simd>(s: S, a: &[f32], b: &[f32]) -> [f64; 3] {
    let mut total = [0.0f64; 3];
    let z = s.zero();
    fold_blocks(
        s,
        [a, b],
        Align::Lowest,
        0.0,
        [z, z, z],
        #[inline(always)]
        |acc, [x, y]| {
            acc[0] = s.fma(x, y, acc[0]);
            acc[1] = s.fma(x, x, acc[1]);
            acc[2] = s.fma(y, y, acc[2]);
        },
        #[inline(always)]
        |p, q| [s.add(p[0], q[0]), s.add(p[1], q[1]), s.add(p[2], q[2])],
        #[inline(always)]
        |_, _, acc| {
            for (t, v) in total.iter_mut().zip(acc) {
                *t += s.reduce_add(v) as f64;
            }
        },
    );
    total
}

/// Index of the first maximum (`is_max`) or minimum; of the first NaN if there is one.
/// `x` must not be empty.
///
/// One vector pass finds the winning block (first block whose extreme beats all earlier
/// ones, or the first block with a NaN); a scalar scan of that block alone finds the index.
#[inline(always)]
pub(crate) fn arg_extreme_vec<S: Simd>(s: S, x: &[f32], is_max: bool) -> usize {
    let mut best = ((0usize, 0usize), identity(is_max));
    let mut nan_block = None;
    block_extremes(
        s,
        x,
        is_max,
        identity(is_max),
        #[inline(always)]
        |v| v,
        #[inline(always)]
        |start, end, e| {
            if nan_block.is_some() {
                return;
            }
            if e.is_nan() {
                nan_block = Some((start, end));
            } else if (is_max && e > best.1) || (!is_max && e < best.1) {
                best = ((start, end), e);
            }
        },
    );
    let ((start, end), target) = match nan_block {
        Some(range) => (range, f32::NAN),
        None => best,
    };
    let found = first_match(s, &x[start..end], target);
    // The target is an element of the block (or the identity, when every element equals
    // it, e.g. all -inf for max: then index 0 of the block is right), so found is Some.
    start + found.unwrap_or(0)
}

/// Index of the first element of `x` equal to `target` (the first NaN when `target` is
/// NaN): vector compares, then a scalar look inside the first vector that matched.
#[inline(always)]
fn first_match<S: Simd>(s: S, x: &[f32], target: f32) -> Option<usize> {
    let t = s.splat(target);
    let nan = target.is_nan();
    let is = |v: f32| if nan { v.is_nan() } else { v == target };
    let l = S::LANES;
    let mut chunks = x.chunks_exact(l);
    for (c, chunk) in (&mut chunks).enumerate() {
        let v = s.load(chunk);
        if s.any(if nan { s.is_nan(v) } else { s.eq(v, t) }) {
            return chunk.iter().position(|&v| is(v)).map(|i| c * l + i);
        }
    }
    let rest = chunks.remainder();
    rest.iter()
        .position(|&v| is(v))
        .map(|i| x.len() - rest.len() + i)
}
