//! Elementwise operations: each is one match arm naming its vector body; the loop comes
//! from `map::map_n`. Adding an op is one enum variant plus one arm here (and one canonical
//! scalar definition in `activations.rs` that the tests hold it to).

use super::map::{map_n, map_unary};
use super::math;
use crate::backend::OpClass;
use crate::simd::Simd;

/// One-input elementwise operations (some with scalar parameters).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum UnaryOp {
    Abs,
    Neg,
    Sqrt,
    Recip,
    Scale(f32),
    AddScalar(f32),
    Clamp(f32, f32),
    Exp,
    Ln,
    Relu,
    LeakyRelu(f32),
    Elu(f32),
    Sigmoid,
    Tanh,
    GeluTanh,
    GeluErf,
    Silu,
    Softplus,
    Hardswish,
    Mish,
}

impl UnaryOp {
    /// The class whose preferred ISA this op runs on.
    pub(crate) fn class(self) -> OpClass {
        use UnaryOp::*;
        match self {
            Abs | Neg | Sqrt | Recip | Scale(_) | AddScalar(_) | Clamp(..) | Relu
            | LeakyRelu(_) | Hardswish => OpClass::Elementwise,
            Exp | Ln | Elu(_) | Sigmoid | Tanh | GeluTanh | GeluErf | Silu | Softplus | Mish => {
                OpClass::Transcendental
            }
        }
    }
}

/// Two-input elementwise operations `f(a, b)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    /// NaN-propagating minimum.
    Min,
    /// NaN-propagating maximum.
    Max,
    /// `a + alpha * b`.
    Axpy(f32),
    /// `a + t * (b - a)`.
    Lerp(f32),
}

/// `f(x)` for every lane of `x`, one body per op.
#[inline(always)]
pub(crate) fn unary_vec<S: Simd>(s: S, op: UnaryOp, dst: &mut [f32], src: Option<&[f32]>) {
    let zero = s.zero();
    // Products x * g(x) with g(-inf) = 0 are 0 in the limit, not NaN.
    #[inline(always)]
    fn limit_at_neg_inf<S: Simd>(s: S, x: S::V, r: S::V) -> S::V {
        s.select(s.eq(x, s.splat(f32::NEG_INFINITY)), s.splat(-0.0), r)
    }
    match op {
        UnaryOp::Abs => map_unary(
            s,
            dst,
            src,
            1.0,
            #[inline(always)]
            |x| s.abs(x),
        ),
        UnaryOp::Neg => map_unary(
            s,
            dst,
            src,
            1.0,
            #[inline(always)]
            |x| s.neg(x),
        ),
        UnaryOp::Sqrt => map_unary(
            s,
            dst,
            src,
            1.0,
            #[inline(always)]
            |x| s.sqrt(x),
        ),
        UnaryOp::Recip => map_unary(
            s,
            dst,
            src,
            1.0,
            #[inline(always)]
            |x| s.div(s.splat(1.0), x),
        ),
        UnaryOp::Scale(a) => map_unary(
            s,
            dst,
            src,
            1.0,
            #[inline(always)]
            |x| s.mul(x, s.splat(a)),
        ),
        UnaryOp::AddScalar(a) => map_unary(
            s,
            dst,
            src,
            1.0,
            #[inline(always)]
            |x| s.add(x, s.splat(a)),
        ),
        UnaryOp::Clamp(lo, hi) => map_unary(
            s,
            dst,
            src,
            1.0,
            #[inline(always)]
            |x| s.min(s.splat(hi), s.max(s.splat(lo), x)),
        ),
        UnaryOp::Exp => map_unary(
            s,
            dst,
            src,
            1.0,
            #[inline(always)]
            |x| math::exp(s, x),
        ),
        UnaryOp::Ln => map_unary(
            s,
            dst,
            src,
            1.0,
            #[inline(always)]
            |x| math::ln(s, x),
        ),
        UnaryOp::Relu => map_unary(
            s,
            dst,
            src,
            1.0,
            #[inline(always)]
            |x| s.select(s.le(x, zero), zero, x),
        ),
        UnaryOp::LeakyRelu(a) => map_unary(
            s,
            dst,
            src,
            1.0,
            #[inline(always)]
            |x| s.select(s.lt(x, zero), s.mul(x, s.splat(a)), x),
        ),
        UnaryOp::Elu(a) => map_unary(
            s,
            dst,
            src,
            1.0,
            #[inline(always)]
            |x| s.select(s.lt(x, zero), s.mul(s.splat(a), math::expm1(s, x)), x),
        ),
        UnaryOp::Sigmoid => map_unary(
            s,
            dst,
            src,
            1.0,
            #[inline(always)]
            |x| math::sigmoid(s, x),
        ),
        UnaryOp::Tanh => map_unary(
            s,
            dst,
            src,
            1.0,
            #[inline(always)]
            |x| math::tanh(s, x),
        ),
        UnaryOp::GeluTanh => map_unary(
            s,
            dst,
            src,
            1.0,
            #[inline(always)]
            |x| {
                // 0.5 x (1 + tanh u) = x * sigmoid(2u): no cancellation for negative x.
                let x3 = s.mul(s.mul(x, x), x);
                let u2 = s.mul(s.fma(x3, s.splat(0.044_715), x), s.splat(2.0 * 0.797_884_6));
                limit_at_neg_inf(s, x, s.div(x, s.add(s.splat(1.0), math::exp(s, s.neg(u2)))))
            },
        ),
        UnaryOp::GeluErf => map_unary(
            s,
            dst,
            src,
            1.0,
            #[inline(always)]
            |x| limit_at_neg_inf(s, x, s.mul(x, math::normal_cdf(s, x))),
        ),
        UnaryOp::Silu => map_unary(
            s,
            dst,
            src,
            1.0,
            #[inline(always)]
            |x| limit_at_neg_inf(s, x, s.div(x, s.add(s.splat(1.0), math::exp(s, s.neg(x))))),
        ),
        UnaryOp::Softplus => map_unary(
            s,
            dst,
            src,
            1.0,
            #[inline(always)]
            |x| softplus(s, x),
        ),
        UnaryOp::Hardswish => map_unary(
            s,
            dst,
            src,
            1.0,
            #[inline(always)]
            |x| {
                let three = s.splat(3.0);
                let mid = s.mul(s.mul(x, s.add(x, three)), s.splat(1.0 / 6.0));
                s.select(
                    s.le(x, s.neg(three)),
                    zero,
                    s.select(s.le(three, x), x, mid),
                )
            },
        ),
        UnaryOp::Mish => map_unary(
            s,
            dst,
            src,
            1.0,
            #[inline(always)]
            |x| limit_at_neg_inf(s, x, s.mul(x, math::tanh(s, softplus(s, x)))),
        ),
    }
}

/// ln(1 + e^x) = max(x, 0) + ln(1 + e^-|x|), exact in both tails.
#[inline(always)]
fn softplus<S: Simd>(s: S, x: S::V) -> S::V {
    let e = math::exp(s, s.neg(s.abs(x)));
    s.add(s.max(s.zero(), x), math::log1p_nonneg(s, e))
}

/// `f(a, b)` for every lane; `a = None` means `dst` holds `a` and is overwritten.
#[inline(always)]
pub(crate) fn binary_vec<S: Simd>(
    s: S,
    op: BinaryOp,
    dst: &mut [f32],
    a: Option<&[f32]>,
    b: &[f32],
) {
    #[inline(always)]
    fn apply<S: Simd>(
        s: S,
        dst: &mut [f32],
        a: Option<&[f32]>,
        b: &[f32],
        f: impl Fn(S::V, S::V) -> S::V,
    ) {
        match a {
            Some(a) => map_n(
                s,
                dst,
                [a, b],
                1.0,
                #[inline(always)]
                |_, [x, y]| f(x, y),
            ),
            None => map_n(
                s,
                dst,
                [b],
                1.0,
                #[inline(always)]
                |x, [y]| f(x, y),
            ),
        }
    }
    match op {
        BinaryOp::Add => apply(
            s,
            dst,
            a,
            b,
            #[inline(always)]
            |x, y| s.add(x, y),
        ),
        BinaryOp::Sub => apply(
            s,
            dst,
            a,
            b,
            #[inline(always)]
            |x, y| s.sub(x, y),
        ),
        BinaryOp::Mul => apply(
            s,
            dst,
            a,
            b,
            #[inline(always)]
            |x, y| s.mul(x, y),
        ),
        BinaryOp::Div => apply(
            s,
            dst,
            a,
            b,
            #[inline(always)]
            |x, y| s.div(x, y),
        ),
        // The raw min/max return y when either is NaN; x's NaN is put back by the select.
        BinaryOp::Min => apply(
            s,
            dst,
            a,
            b,
            #[inline(always)]
            |x, y| s.select(s.is_nan(x), x, s.min(x, y)),
        ),
        BinaryOp::Max => apply(
            s,
            dst,
            a,
            b,
            #[inline(always)]
            |x, y| s.select(s.is_nan(x), x, s.max(x, y)),
        ),
        BinaryOp::Axpy(alpha) => apply(
            s,
            dst,
            a,
            b,
            #[inline(always)]
            |x, y| s.fma(s.splat(alpha), y, x),
        ),
        BinaryOp::Lerp(t) => apply(
            s,
            dst,
            a,
            b,
            #[inline(always)]
            |x, y| s.fma(s.splat(t), s.sub(y, x), x),
        ),
    }
}

/// `a * b + c` for every lane; `c = None` means `dst` holds `c` (accumulate in place).
#[inline(always)]
pub(crate) fn fma_vec<S: Simd>(s: S, dst: &mut [f32], a: &[f32], b: &[f32], c: Option<&[f32]>) {
    match c {
        Some(c) => map_n(
            s,
            dst,
            [a, b, c],
            1.0,
            #[inline(always)]
            |_, [x, y, z]| s.fma(x, y, z),
        ),
        None => map_n(
            s,
            dst,
            [a, b],
            1.0,
            #[inline(always)]
            |z, [x, y]| s.fma(x, y, z),
        ),
    }
}
