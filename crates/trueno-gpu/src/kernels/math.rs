//! Transcendental functions in PTX, from the hardware's `ex2.approx` (about 2 ulp) plus
//! the same erfc fit the CPU kernels use.

use crate::ptx::{Cmp, F32, KernelBuilder, Reg};

/// log2(e): e^x is 2^(x * LOG2E).
pub(crate) const LOG2E: f32 = std::f32::consts::LOG2_E;

/// e^x through `ex2.approx`: relative error about 2^-21 for |x| < 88, exact 0 and inf at
/// the ends, NaN propagated.
pub(crate) fn exp(b: &mut KernelBuilder, x: Reg<F32>) -> Reg<F32> {
    let t = b.mul(x, LOG2E);
    b.ex2(t)
}

/// max(x, 0), NaN kept (x > 0 or unordered: keep x).
pub(crate) fn relu(b: &mut KernelBuilder, x: Reg<F32>) -> Reg<F32> {
    let keep = b.setp::<F32>(Cmp::Gtu, x, 0.0f32);
    b.selp(x, 0.0f32, keep)
}

/// x * sigmoid(x), written as x / (1 + e^-x) (one 2-ulp division, -0 for very negative
/// x).
pub(crate) fn silu(b: &mut KernelBuilder, x: Reg<F32>) -> Reg<F32> {
    let nx = b.neg(x);
    let e = exp(b, nx);
    let d = b.add(e, 1.0f32);
    let r = b.div_full(x, d);
    vanishing_at_neg_inf(b, x, r)
}

/// GELU's tanh approximation, 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715 x^3),
/// written as x / (1 + e^(-2u)): the same function without the cancellation of
/// 1 + tanh(u) for negative x, and the form of the CPU reference.
pub(crate) fn gelu_tanh(b: &mut KernelBuilder, x: Reg<F32>) -> Reg<F32> {
    let k = -2.0 * (2.0 / std::f64::consts::PI).sqrt();
    let x2 = b.mul(x, x);
    let p = b.fma(x2, (k * 0.044715) as f32, k as f32);
    let t = b.mul(p, x);
    let e = exp(b, t);
    let d = b.add(e, 1.0f32);
    let r = b.div_full(x, d);
    vanishing_at_neg_inf(b, x, r)
}

/// The limit -0 at x = -inf of x * f(x) with f(-inf) = 0, where the arithmetic gives NaN.
fn vanishing_at_neg_inf(b: &mut KernelBuilder, x: Reg<F32>, r: Reg<F32>) -> Reg<F32> {
    let at = b.setp::<F32>(Cmp::Eq, x, f32::NEG_INFINITY);
    b.selp(-0.0f32, r, at)
}

/// erfc(z) for z >= 0 (Chebyshev fit, relative error below 1.2e-7 in exact arithmetic).
fn erfc_nonneg(b: &mut KernelBuilder, z: Reg<F32>) -> Reg<F32> {
    let d = b.fma(z, 0.5f32, 1.0f32);
    let t = b.div_full(1.0f32, d);
    const C: [f32; 10] = [
        0.170_872_77,
        -0.822_152_23,
        1.488_515_9,
        -1.135_204,
        0.278_868_07,
        -0.186_288_06,
        0.096_784_18,
        0.374_091_96,
        1.000_023_7,
        -1.265_512_2,
    ];
    let mut p = b.mov(C[0]);
    for &c in &C[1..] {
        p = b.fma(p, t, c);
    }
    let z2 = b.mul(z, z);
    let arg = b.sub(p, z2);
    let e = exp(b, arg);
    b.mul(t, e)
}

/// GELU with the exact normal CDF: x * Φ(x), Φ(x) = erfc(-x/√2) / 2, the tail taken from
/// erfc directly so it keeps relative accuracy for negative x.
pub(crate) fn gelu(b: &mut KernelBuilder, x: Reg<F32>) -> Reg<F32> {
    let ax = b.abs(x);
    let z = b.mul(ax, std::f32::consts::FRAC_1_SQRT_2);
    let e = erfc_nonneg(b, z);
    let tail = b.mul(e, 0.5f32);
    let upper = b.sub(1.0f32, tail);
    let neg = b.setp::<F32>(Cmp::Lt, x, 0.0f32);
    let cdf = b.selp(tail, upper, neg);
    let r = b.mul(x, cdf);
    vanishing_at_neg_inf(b, x, r)
}
