//! Every elementwise op of trueno-wgpu against trueno's scalar CPU backend, on random data
//! at ragged sizes and on the IEEE special values.

mod common;

use common::{Rng, SIZES, assert_all_close, close, gpu, scalar};
use trueno::Engine;
use trueno_wgpu::{BinaryOp, UnaryOp};

/// The CPU reference of a unary op.
fn cpu_unary(e: &Engine, op: UnaryOp, x: &[f32]) -> Vec<f32> {
    let mut o = vec![0.0; x.len()];
    match op {
        UnaryOp::Abs => e.abs_into(x, &mut o),
        UnaryOp::Neg => e.neg_into(x, &mut o),
        UnaryOp::Sqrt => e.sqrt_into(x, &mut o),
        UnaryOp::Recip => e.recip_into(x, &mut o),
        UnaryOp::Scale(a) => e.scale_into(x, a, &mut o),
        UnaryOp::AddScalar(a) => e.add_scalar_into(x, a, &mut o),
        UnaryOp::Clamp(lo, hi) => e.clamp_into(x, lo, hi, &mut o),
        UnaryOp::Exp => e.exp_into(x, &mut o),
        UnaryOp::Ln => e.ln_into(x, &mut o),
        UnaryOp::Relu => e.relu_into(x, &mut o),
        UnaryOp::LeakyRelu(a) => e.leaky_relu_into(x, a, &mut o),
        UnaryOp::Elu(a) => e.elu_into(x, a, &mut o),
        UnaryOp::Sigmoid => e.sigmoid_into(x, &mut o),
        UnaryOp::Tanh => e.tanh_into(x, &mut o),
        UnaryOp::Gelu => e.gelu_into(x, &mut o),
        UnaryOp::GeluErf => e.gelu_erf_into(x, &mut o),
        UnaryOp::Silu => e.silu_into(x, &mut o),
        UnaryOp::Softplus => e.softplus_into(x, &mut o),
        UnaryOp::Hardswish => e.hardswish_into(x, &mut o),
        UnaryOp::Mish => e.mish_into(x, &mut o),
    }
    .expect("cpu reference");
    o
}

fn cpu_binary(e: &Engine, op: BinaryOp, a: &[f32], b: &[f32]) -> Vec<f32> {
    let mut o = vec![0.0; a.len()];
    match op {
        BinaryOp::Add => e.add_into(a, b, &mut o),
        BinaryOp::Sub => e.sub_into(a, b, &mut o),
        BinaryOp::Mul => e.mul_into(a, b, &mut o),
        BinaryOp::Div => e.div_into(a, b, &mut o),
        BinaryOp::Minimum => e.minimum_into(a, b, &mut o),
        BinaryOp::Maximum => e.maximum_into(a, b, &mut o),
        BinaryOp::Axpy(t) => e.axpy_into(t, b, a, &mut o),
        BinaryOp::Lerp(t) => e.lerp_into(a, b, t, &mut o),
    }
    .expect("cpu reference");
    o
}

/// Relative tolerance of a unary op against the CPU: 0 where both compute the same IEEE
/// operations in the same order; 3 ulp for division and square root (WGSL allows 2.5 ulp
/// for division and derives sqrt from inverseSqrt); for the transcendentals, twice the
/// CPU's stated bound against the exact function (3e-6 for GELU), as both sides may err by
/// it in opposite directions (same algorithm, but division and the driver's contraction of
/// a * b + c into fma differ).
fn unary_tol(op: UnaryOp) -> f64 {
    use UnaryOp::*;
    match op {
        Abs | Neg | Scale(_) | AddScalar(_) | Clamp(..) | Relu | LeakyRelu(_) => 0.0,
        // Hardswish: x * (x + 3) * (1/6) is three roundings the driver may reorder.
        Sqrt | Recip | Hardswish => 3.0 * f32::EPSILON as f64,
        _ => 6e-6,
    }
}

#[test]
fn unary_ops_match_the_scalar_cpu_backend() {
    let Some(gpu) = gpu() else { return };
    let e = scalar();
    let mut rng = Rng::new(1);
    for op in UnaryOp::ALL {
        for n in SIZES {
            // [-5, 5]: the tails' condition numbers (GELU below -5) are the CPU's own caveat.
            let x = rng.vec(n, -5.0, 5.0);
            let got = gpu.unary(op, &x).unwrap();
            let want = cpu_unary(&e, op, &x);
            assert_all_close(op.name(), &got, &want, &x, unary_tol(op));
        }
    }
}

#[test]
fn unary_ops_handle_special_values_like_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let e = scalar();
    // The core suite's special values, plus the edges of exp's range and tanh's saturation.
    let mut x = common::SPECIALS.to_vec();
    x.extend([88.0, -104.5, 1e-20, 30.0, -30.0]);
    // A GPU may flush subnormal inputs to zero (NVIDIA's Vulkan driver does; lavapipe
    // does not): there, the op of the sign-preserving zero is right too.
    let flushed: Vec<f32> = x.iter().copied().map(common::flush).collect();
    for op in UnaryOp::ALL {
        let got = gpu.unary(op, &x).unwrap();
        let (want, want_flushed) = (cpu_unary(&e, op, &x), cpu_unary(&e, op, &flushed));
        let tol = unary_tol(op).max(6e-6);
        for i in 0..x.len() {
            // WGSL's division is accurate only for divisors in [2^-126, 2^126]; beyond, a
            // driver computing x * (1 / y) flushes the subnormal reciprocal, so quotients
            // below 2^-120 (silu(-88) = -88 / (1 + e^88)) may come out as zero.
            let tiny_quotient = got[i] == 0.0 && want[i].abs() < 2f32.powi(-120);
            assert!(
                close(got[i], want[i], tol) || close(got[i], want_flushed[i], tol) || tiny_quotient,
                "{}({:e}): gpu {:e}, cpu {:e} (of a flushed input {:e})",
                op.name(),
                x[i],
                got[i],
                want[i],
                want_flushed[i]
            );
        }
    }
}

/// Exact for the IEEE operations; division within 3 ulp (WGSL allows 2.5). Axpy and lerp
/// call WGSL's fma, whose accuracy is that of `a * b + c`: fusing is the driver's choice
/// (NVIDIA's Vulkan driver rounds the product), and the product's rounding, relative to a
/// result that cancels, is unbounded, so their bound is an ulp of the product plus one of
/// the result.
fn check_binary(op: BinaryOp, a: &[f32], b: &[f32], got: &[f32], want: &[f32]) {
    let eps = f32::EPSILON as f64;
    for i in 0..a.len() {
        let (x, y, w) = (a[i] as f64, b[i] as f64, want[i] as f64);
        let bound = match op {
            BinaryOp::Div => 3.0 * eps * w.abs(),
            BinaryOp::Axpy(t) => eps * ((t as f64 * y).abs() + w.abs()),
            BinaryOp::Lerp(t) => eps * ((t as f64 * (y - x)).abs() + w.abs()),
            _ => 0.0,
        };
        let diff = (got[i] as f64 - w).abs();
        assert!(
            close(got[i], want[i], 0.0) || diff <= bound,
            "{}[{i}] of {}: gpu {:e}, cpu {:e} ({:e}, {:e})",
            op.name(),
            a.len(),
            got[i],
            want[i],
            a[i],
            b[i]
        );
    }
}

#[test]
fn binary_ops_and_fma_match_the_scalar_cpu_backend() {
    let Some(gpu) = gpu() else { return };
    let e = scalar();
    let mut rng = Rng::new(2);
    for n in SIZES {
        let mut a = rng.vec(n, -10.0, 10.0);
        let b = rng.vec(n, -10.0, 10.0);
        if n > 3 {
            // NaN in either operand, and an infinity, inside the random data.
            a[1] = f32::NAN;
            a[2] = f32::INFINITY;
        }
        for op in BinaryOp::ALL {
            let got = gpu.binary(op, &a, &b).unwrap();
            let want = cpu_binary(&e, op, &a, &b);
            check_binary(op, &a, &b, &got, &want);
            // NaN in the second operand too (minimum/maximum treat the two differently).
            let got = gpu.binary(op, &b, &a).unwrap();
            let want = cpu_binary(&e, op, &b, &a);
            check_binary(op, &b, &a, &got, &want);
        }
        let c = rng.vec(n, -10.0, 10.0);
        let got = gpu.fma(&a, &b, &c).unwrap();
        let mut want = vec![0.0; n];
        e.fma_into(&a, &b, &c, &mut want).unwrap();
        // Fused or not (the driver's choice, as above): an unfused result differs by the
        // product's rounding, which relative to the sum is unbounded under cancellation,
        // so the bound is in terms of the product.
        for i in 0..n {
            let bound = f32::EPSILON as f64 * ((a[i] * b[i]).abs() + want[i].abs()) as f64;
            let diff = (got[i] as f64 - want[i] as f64).abs();
            assert!(
                close(got[i], want[i], 0.0) || diff <= bound,
                "fma[{i}]: gpu {:e}, cpu {:e}",
                got[i],
                want[i]
            );
        }
    }
}
