//! Two- and three-input elementwise ops on every backend against exact f64 arithmetic, at
//! every size and misaligned offset, into and in place, with special values.

mod common;

use common::*;
use trueno::{Backend, Engine, Result};

type Into = fn(&Engine, &[f32], &[f32], &mut [f32]) -> Result<()>;
type InPlace = fn(&Engine, &mut [f32], &[f32]) -> Result<()>;

struct Case {
    name: &'static str,
    into: Into,
    inplace: InPlace,
    reference: fn(f32, f32) -> f32,
    /// Fused ops: the same formula with every step rounded to f32, which is what ISAs
    /// without FMA compute; where a product overflows, the two legitimately differ (e.g.
    /// `inf + (-MAX * 1.7)` is inf fused and NaN unfused), so either is accepted.
    fused: Option<fn(f32, f32) -> f32>,
    /// Where a device (WGSL's contract) defines the result; elsewhere it is not checked
    /// on device backends.
    device_defined: fn(f32, f32) -> bool,
}

/// Every input pair: the op is defined everywhere.
fn everywhere(_: f32, _: f32) -> bool {
    true
}

fn nan_min(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else {
        a.min(b)
    }
}

fn nan_max(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else {
        a.max(b)
    }
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "add",
            into: Engine::add_into,
            inplace: Engine::add_inplace,
            reference: |a, b| a + b,
            fused: None,
            device_defined: everywhere,
        },
        Case {
            name: "sub",
            into: Engine::sub_into,
            inplace: Engine::sub_inplace,
            reference: |a, b| a - b,
            fused: None,
            device_defined: everywhere,
        },
        Case {
            name: "mul",
            into: Engine::mul_into,
            inplace: Engine::mul_inplace,
            reference: |a, b| a * b,
            fused: None,
            device_defined: everywhere,
        },
        Case {
            name: "div",
            into: Engine::div_into,
            inplace: Engine::div_inplace,
            reference: |a, b| a / b,
            fused: None,
            // WGSL's x / y is defined to 2.5 ulp only for |y| in [2^-126, 2^126]: beyond,
            // a driver's x * (1 / y) flushes the reciprocal (inf / f32::MAX is NaN on
            // NVIDIA).
            device_defined: |_, y| (2f32.powi(-126)..=2f32.powi(126)).contains(&y.abs()),
        },
        Case {
            name: "minimum",
            into: Engine::minimum_into,
            inplace: Engine::minimum_inplace,
            reference: nan_min,
            fused: None,
            device_defined: everywhere,
        },
        Case {
            name: "maximum",
            into: Engine::maximum_into,
            inplace: Engine::maximum_inplace,
            reference: nan_max,
            fused: None,
            device_defined: everywhere,
        },
        Case {
            name: "lerp",
            into: |e, a, b, o| e.lerp_into(a, b, 0.3, o),
            inplace: |e, a, b| e.lerp_inplace(a, b, 0.3),
            // The documented formula a + t * (b - a) with the difference rounded to f32 first.
            reference: |a, b| (a as f64 + 0.3f32 as f64 * (b - a) as f64) as f32,
            fused: Some(|a, b| a + 0.3 * (b - a)),
            device_defined: everywhere,
        },
        Case {
            name: "axpy",
            into: |e, a, b, o| e.axpy_into(1.7, b, a, o),
            inplace: |e, a, b| e.axpy(1.7, b, a),
            reference: |a, b| (1.7f32 as f64 * b as f64 + a as f64) as f32,
            fused: Some(|a, b| 1.7 * b + a),
            device_defined: everywhere,
        },
        Case {
            name: "fma (accumulate)",
            into: |e, a, b, o| e.fma_into(b, b, a, o),
            inplace: |e, a, b| e.fma_inplace(a, b, b),
            reference: |a, b| (b as f64 * b as f64 + a as f64) as f32,
            fused: Some(|a, b| b * b + a),
            device_defined: everywhere,
        },
    ]
}

fn check(case: &Case, backend: Backend, e: &Engine, ctx: &str, a: &[f32], b: &[f32]) {
    let mut out = vec![f32::NAN; a.len()];
    (case.into)(e, a, b, &mut out).unwrap();
    let mut acc = a.to_vec();
    (case.inplace)(e, &mut acc, b).unwrap();
    for i in 0..a.len() {
        let want = (case.reference)(a[i], b[i]);
        // Non-fused ops are exact IEEE operations: equal bit for bit (up to NaN payload).
        // Fused ones: within 2 roundings of the magnitudes involved.
        let scale = a[i].abs() + 2.0 * b[i].abs() * b[i].abs().max(1.0);
        let abs = if case.fused.is_some() {
            2.5 * f32::EPSILON * scale
        } else {
            0.0
        };
        let unfused = case.fused.map(|f| f(a[i], b[i]));
        let undefined_on_device = is_device(backend) && !(case.device_defined)(a[i], b[i]);
        for (form, got) in [("into", out[i]), ("in place", acc[i])] {
            let ok = undefined_on_device
                || close(got, want, 0.0, abs)
                || unfused.is_some_and(|u| close(got, u, 0.0, abs))
                || device_close(
                    backend,
                    got,
                    want,
                    (case.reference)(flush(a[i]), flush(b[i])),
                    0.0,
                    abs,
                );
            assert!(
                ok,
                "{ctx} {form}: [{i}] a = {:e}, b = {:e}: got {got:e}, want {want:e}",
                a[i], b[i]
            );
        }
    }
}

#[test]
fn every_binary_op_matches_exact_arithmetic_on_every_backend() {
    for (backend, e) in engines() {
        let mut rng = Rng::new(3);
        for case in cases() {
            for n in sizes() {
                let a = rng.vec(n, -10.0, 10.0);
                let b: Vec<f32> = rng
                    .vec(n, -10.0, 10.0)
                    .into_iter()
                    .map(|v| if v == 0.0 { 0.5 } else { v })
                    .collect();
                for offset in [0, 2] {
                    let (ab, bb) = (misaligned(&a, offset), misaligned(&b, offset + 1));
                    let ctx = format!("{} on {backend}, n = {n}, offset {offset}", case.name);
                    check(&case, backend, &e, &ctx, &ab[offset..], &bb[offset + 1..]);
                }
            }
        }
    }
}

#[test]
fn every_binary_op_handles_special_values_on_every_backend() {
    for (backend, e) in engines() {
        for case in cases() {
            // Every pair of specials, in every lane position.
            let mut a = Vec::new();
            let mut b = Vec::new();
            for &x in &SPECIALS {
                for &y in &SPECIALS {
                    a.push(x);
                    b.push(y);
                }
            }
            for shift in 0..3 {
                let ctx = format!("{} specials on {backend}, shift {shift}", case.name);
                check(&case, backend, &e, &ctx, &a[shift..], &b[shift..]);
            }
        }
    }
}

#[test]
fn length_mismatch_is_reported_with_the_argument() {
    let e = trueno::engine().unwrap();
    for case in cases() {
        let mut out = [0.0; 3];
        assert!(
            matches!(
                (case.into)(e, &[1.0; 3], &[1.0; 2], &mut out),
                Err(trueno::TruenoError::LengthMismatch { .. })
            ),
            "{}",
            case.name
        );
        let mut out = [0.0; 2];
        assert!(
            matches!(
                (case.into)(e, &[1.0; 3], &[1.0; 3], &mut out),
                Err(trueno::TruenoError::LengthMismatch { .. })
            ),
            "{}",
            case.name
        );
        let mut a = [0.0; 4];
        assert!(
            matches!(
                (case.inplace)(e, &mut a, &[1.0; 3]),
                Err(trueno::TruenoError::LengthMismatch { .. })
            ),
            "{}",
            case.name
        );
    }
}
