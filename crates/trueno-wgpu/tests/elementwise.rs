//! Every elementwise op of trueno-wgpu against trueno's scalar CPU backend, on random data
//! at ragged sizes and on the IEEE special values.

mod common;

use common::{Rng, SIZES, assert_all_close, gpu, scalar};
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
    let x = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.0,
        -0.0,
        1e-40,
        -1e-40,
        f32::MIN_POSITIVE,
        f32::MAX,
        f32::MIN,
        88.0,
        -88.0,
        -104.5,
        1e-20,
        30.0,
        -30.0,
    ];
    for op in UnaryOp::ALL {
        let got = gpu.unary(op, &x).unwrap();
        let want = cpu_unary(&e, op, &x);
        assert_all_close(op.name(), &got, &want, &x, unary_tol(op).max(6e-6));
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
            let tol = if op == BinaryOp::Div {
                3.0 * f32::EPSILON as f64
            } else {
                0.0
            };
            assert_all_close(op.name(), &got, &want, &a, tol);
            // NaN in the second operand too (minimum/maximum treat the two differently).
            let got = gpu.binary(op, &b, &a).unwrap();
            let want = cpu_binary(&e, op, &b, &a);
            assert_all_close(op.name(), &got, &want, &b, tol);
        }
        let c = rng.vec(n, -10.0, 10.0);
        let got = gpu.fma(&a, &b, &c).unwrap();
        let mut want = vec![0.0; n];
        e.fma_into(&a, &b, &c, &mut want).unwrap();
        assert_all_close("fma", &got, &want, &a, 0.0);
    }
}
