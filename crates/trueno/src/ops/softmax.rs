//! Numerically stable softmax and log-softmax: subtract the maximum before exponentiating.

use super::map::{block_len, map_unary};
use super::math;
use super::reduce::{ReduceOp, reduce_vec};
use crate::simd::Simd;

/// `dst = exp(x - max) / sum(exp(x - max))` with `x = src`, or `dst` itself when `src` is
/// `None`. Three passes: max; exp and block sums (f64 across blocks); scale. The input must
/// not be empty; a NaN anywhere makes every output NaN.
#[inline(always)]
pub(crate) fn softmax_vec<S: Simd>(s: S, dst: &mut [f32], src: Option<&[f32]>) {
    let m = reduce_vec(s, ReduceOp::Max, src.unwrap_or(&*dst)) as f32;
    let total = exp_shift_sum_vec(s, dst, src, m);
    let inv = s.splat((1.0 / total) as f32);
    map_unary(
        s,
        dst,
        None,
        1.0,
        #[inline(always)]
        |d| s.mul(d, inv),
    );
}

/// `dst = exp(x - m)` (`x` as in [`softmax_vec`]), returning the sum of `dst`: f32 partial
/// sums per block, f64 across blocks. The middle pass of softmax, also run per thread.
#[inline(always)]
pub(crate) fn exp_shift_sum_vec<S: Simd>(
    s: S,
    dst: &mut [f32],
    src: Option<&[f32]>,
    m: f32,
) -> f64 {
    let m = s.splat(m);
    let mut total = 0.0f64;
    let block = block_len(S::LANES);
    for (i, db) in dst.chunks_mut(block).enumerate() {
        let mut acc = s.zero();
        // Pad lanes with -inf: exp(-inf - max) = 0 adds nothing to the sum.
        let x = src.map(|x| &x[i * block..]);
        map_unary(
            s,
            db,
            x,
            f32::NEG_INFINITY,
            #[inline(always)]
            |v| exp_accumulate(s, v, m, &mut acc),
        );
        total += s.reduce_add(acc) as f64;
    }
    total
}

/// `dst = x - max - ln(sum(exp(x - max)))`, `x` as in [`softmax_vec`].
#[inline(always)]
pub(crate) fn log_softmax_vec<S: Simd>(s: S, dst: &mut [f32], src: Option<&[f32]>) {
    let x = src.unwrap_or(&*dst);
    let max = reduce_vec(s, ReduceOp::Max, x) as f32;
    let total = reduce_vec(s, ReduceOp::SumExp(max), x);
    let shift = s.splat(max + total.ln() as f32);
    map_unary(
        s,
        dst,
        src,
        1.0,
        #[inline(always)]
        |v| s.sub(v, shift),
    );
}

/// `e^(v - m)`, also added into `acc`.
#[inline(always)]
fn exp_accumulate<S: Simd>(s: S, v: S::V, m: S::V, acc: &mut S::V) -> S::V {
    let e = math::exp(s, s.sub(v, m));
    *acc = s.add(*acc, e);
    e
}
