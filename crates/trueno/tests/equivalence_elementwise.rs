//! Every elementwise op on every backend the host supports, against its canonical
//! definition (`trueno::activations` or exact arithmetic) and against the scalar backend:
//! random data at every size 0..=70 and past the block and threading thresholds, at
//! misaligned offsets, into and in place, outputs poisoned with NaN first, and special
//! values (NaN, ±inf, ±0, subnormals, extremes).

mod common;

use common::*;
use trueno::{Backend, Engine, Result, activations as act};

type Into = fn(&Engine, &[f32], &mut [f32]) -> Result<()>;
type InPlace = fn(&Engine, &mut [f32]) -> Result<()>;

struct Case {
    name: &'static str,
    into: Into,
    inplace: InPlace,
    reference: fn(f32) -> f32,
    /// Random inputs are drawn from this range.
    domain: (f32, f32),
    /// Allowed error against the f64 reference: (rel + cond * c(x) * 2^-24) * |want| + abs,
    /// where c(x) = |x f'(x) / f(x)| is the condition number at x: composite activations
    /// round an intermediate (e.g. the tanh argument of GELU) before a function that
    /// amplifies relative error by c(x), which no f32 evaluation order avoids.
    rel: f32,
    abs: f32,
    cond: f32,
}

macro_rules! case {
    ($name:ident, ($($p:expr),*), $reference:expr, $domain:expr, $rel:expr, $abs:expr) => {
        paste_case!($name, ($($p),*), $reference, $domain, $rel, $abs, 0.0)
    };
    ($name:ident, ($($p:expr),*), $reference:expr, $domain:expr, $rel:expr, $abs:expr, $cond:expr) => {
        paste_case!($name, ($($p),*), $reference, $domain, $rel, $abs, $cond)
    };
}

macro_rules! paste_case {
    ($name:ident, ($($p:expr),*), $reference:expr, $domain:expr, $rel:expr, $abs:expr, $cond:expr) => {{
        fn into(e: &Engine, x: &[f32], out: &mut [f32]) -> Result<()> {
            into_of!($name)(e, x, $($p,)* out)
        }
        fn inplace(e: &Engine, x: &mut [f32]) -> Result<()> {
            inplace_of!($name)(e, x $(, $p)*)
        }
        Case { name: stringify!($name), into, inplace, reference: $reference, domain: $domain, rel: $rel, abs: $abs, cond: $cond }
    }};
}

macro_rules! into_of {
    (abs) => {
        Engine::abs_into
    };
    (neg) => {
        Engine::neg_into
    };
    (sqrt) => {
        Engine::sqrt_into
    };
    (recip) => {
        Engine::recip_into
    };
    (scale) => {
        Engine::scale_into
    };
    (add_scalar) => {
        Engine::add_scalar_into
    };
    (clamp) => {
        Engine::clamp_into
    };
    (exp) => {
        Engine::exp_into
    };
    (ln) => {
        Engine::ln_into
    };
    (relu) => {
        Engine::relu_into
    };
    (leaky_relu) => {
        Engine::leaky_relu_into
    };
    (elu) => {
        Engine::elu_into
    };
    (sigmoid) => {
        Engine::sigmoid_into
    };
    (tanh) => {
        Engine::tanh_into
    };
    (gelu) => {
        Engine::gelu_into
    };
    (gelu_erf) => {
        Engine::gelu_erf_into
    };
    (silu) => {
        Engine::silu_into
    };
    (softplus) => {
        Engine::softplus_into
    };
    (hardswish) => {
        Engine::hardswish_into
    };
    (mish) => {
        Engine::mish_into
    };
}

macro_rules! inplace_of {
    (abs) => {
        Engine::abs_inplace
    };
    (neg) => {
        Engine::neg_inplace
    };
    (sqrt) => {
        Engine::sqrt_inplace
    };
    (recip) => {
        Engine::recip_inplace
    };
    (scale) => {
        Engine::scale_inplace
    };
    (add_scalar) => {
        Engine::add_scalar_inplace
    };
    (clamp) => {
        Engine::clamp_inplace
    };
    (exp) => {
        Engine::exp_inplace
    };
    (ln) => {
        Engine::ln_inplace
    };
    (relu) => {
        Engine::relu_inplace
    };
    (leaky_relu) => {
        Engine::leaky_relu_inplace
    };
    (elu) => {
        Engine::elu_inplace
    };
    (sigmoid) => {
        Engine::sigmoid_inplace
    };
    (tanh) => {
        Engine::tanh_inplace
    };
    (gelu) => {
        Engine::gelu_inplace
    };
    (gelu_erf) => {
        Engine::gelu_erf_inplace
    };
    (silu) => {
        Engine::silu_inplace
    };
    (softplus) => {
        Engine::softplus_inplace
    };
    (hardswish) => {
        Engine::hardswish_inplace
    };
    (mish) => {
        Engine::mish_inplace
    };
}

fn cases() -> Vec<Case> {
    vec![
        case!(abs, (), |x| x.abs(), (-10.0, 10.0), 0.0, 0.0),
        case!(neg, (), |x| -x, (-10.0, 10.0), 0.0, 0.0),
        case!(sqrt, (), |x| x.sqrt(), (0.0, 100.0), 0.0, 0.0),
        case!(recip, (), |x| 1.0 / x, (-10.0, 10.0), 0.0, 0.0),
        case!(scale, (2.5), |x| x * 2.5, (-10.0, 10.0), 0.0, 0.0),
        case!(add_scalar, (-1.5), |x| x + -1.5, (-10.0, 10.0), 0.0, 0.0),
        case!(
            clamp,
            (-1.0, 2.0),
            |x| if x.is_nan() { x } else { x.clamp(-1.0, 2.0) },
            (-5.0, 5.0),
            0.0,
            0.0
        ),
        case!(exp, (), act::exp, (-100.0, 89.0), 2.5e-7, 1.5e-45),
        case!(ln, (), act::ln, (0.0, 1000.0), 2.5e-7, 1e-7),
        case!(relu, (), act::relu, (-10.0, 10.0), 0.0, 0.0),
        case!(
            leaky_relu,
            (0.1),
            |x| act::leaky_relu(x, 0.1),
            (-10.0, 10.0),
            0.0,
            0.0
        ),
        case!(elu, (1.0), |x| act::elu(x, 1.0), (-10.0, 10.0), 5e-7, 0.0),
        case!(sigmoid, (), act::sigmoid, (-30.0, 30.0), 4e-7, 0.0),
        case!(tanh, (), act::tanh, (-10.0, 10.0), 4e-7, 0.0),
        case!(gelu, (), act::gelu_tanh, (-10.0, 10.0), 5e-7, 0.0, 4.0),
        case!(gelu_erf, (), act::gelu_erf, (-10.0, 10.0), 5e-7, 0.0, 4.0),
        case!(silu, (), act::silu, (-30.0, 30.0), 5e-7, 0.0),
        case!(softplus, (), act::softplus, (-30.0, 30.0), 5e-7, 0.0),
        case!(hardswish, (), act::hardswish, (-5.0, 5.0), 2.5e-7, 0.0),
        case!(mish, (), act::mish, (-30.0, 30.0), 5e-7, 0.0, 4.0),
    ]
}

/// Condition number |x f'(x) / f(x)| of the reference at x, by central difference.
fn condition(f: fn(f32) -> f32, x: f32) -> f32 {
    let fx = f(x) as f64;
    if !fx.is_finite() || fx == 0.0 || !x.is_finite() || x == 0.0 {
        return 0.0;
    }
    let h = 1e-4f32;
    let (lo, hi) = (f(x * (1.0 - h)) as f64, f(x * (1.0 + h)) as f64);
    ((hi - lo) / (2.0 * h as f64 * fx)).abs().min(1e6) as f32
}

fn check(case: &Case, backend: Backend, e: &Engine, ctx: &str, x: &[f32], tol: (f32, f32)) {
    let want: Vec<f32> = x.iter().map(|&v| (case.reference)(v)).collect();
    let mut out = vec![f32::NAN; x.len()];
    (case.into)(e, x, &mut out).unwrap();
    let mut buf = x.to_vec();
    (case.inplace)(e, &mut buf).unwrap();
    for (i, &v) in x.iter().enumerate() {
        let rel = tol.0 + case.cond * condition(case.reference, v) * f32::EPSILON / 2.0;
        for (form, got) in [("into", out[i]), ("in place", buf[i])] {
            let flushed = (case.reference)(flush(v));
            assert!(
                close(got, want[i], rel, tol.1)
                    || device_close(backend, got, want[i], flushed, rel, tol.1),
                "{ctx} {form}: x[{i}] = {v:e}: got {got:e}, want {:e} (rel {rel:e}, abs {:e})",
                want[i],
                tol.1
            );
        }
    }
}

#[test]
fn every_unary_op_matches_its_definition_on_every_backend() {
    for (backend, e) in engines() {
        let mut rng = Rng::new(7);
        for case in cases() {
            for n in sizes() {
                let x = rng.vec(n, case.domain.0, case.domain.1);
                for offset in [0, 1, 3] {
                    let buf = misaligned(&x, offset);
                    let ctx = format!("{} on {backend}, n = {n}, offset {offset}", case.name);
                    check(
                        &case,
                        backend,
                        &e,
                        &ctx,
                        &buf[offset..],
                        (case.rel, case.abs),
                    );
                }
            }
        }
    }
}

#[test]
fn every_unary_op_handles_special_values_on_every_backend() {
    for (backend, e) in engines() {
        for case in cases() {
            // Every special value in every lane position of a vector and of the tail.
            for shift in 0..17 {
                let mut x = vec![0.25f32; shift];
                x.extend(SPECIALS);
                let ctx = format!("{} specials on {backend}, shift {shift}", case.name);
                // Results at special inputs may sit in subnormal range: widen abs a little.
                check(
                    &case,
                    backend,
                    &e,
                    &ctx,
                    &x,
                    (case.rel, case.abs.max(1e-38)),
                );
            }
        }
    }
}

#[test]
fn every_backend_agrees_with_scalar_within_the_contract() {
    let all = engines();
    let (_, scalar) = all[0];
    let mut rng = Rng::new(11);
    for case in cases() {
        let x = rng.vec(100_003, case.domain.0, case.domain.1);
        let mut want = vec![f32::NAN; x.len()];
        (case.into)(&scalar, &x, &mut want).unwrap();
        for (backend, e) in &all[1..] {
            let mut out = vec![f32::NAN; x.len()];
            (case.into)(e, &x, &mut out).unwrap();
            // Drivers need not fuse WGSL fma; composite activations (gelu's cubic) amplify
            // that one extra rounding by their condition number, ~100 in these tails.
            let rel = if is_device(*backend) { 1e-4 } else { 1e-5 };
            assert_all_close(
                &format!("{} {backend} vs scalar", case.name),
                &out,
                &want,
                rel,
                1e-37,
            );
        }
    }
}

#[test]
fn mismatched_output_length_is_an_error_for_every_op() {
    let e = trueno::engine().unwrap();
    for case in cases() {
        let mut out = vec![0.0; 3];
        let err = (case.into)(e, &[1.0, 2.0], &mut out).unwrap_err();
        assert!(
            matches!(
                err,
                trueno::TruenoError::LengthMismatch {
                    expected: 2,
                    got: 3,
                    ..
                }
            ),
            "{}",
            case.name
        );
    }
}
