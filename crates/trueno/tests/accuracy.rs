//! Dense sweeps of every transcendental against its f64 definition on every backend,
//! holding each to the error bound stated in its docs. Run with `--nocapture` to see the
//! measured maxima (quoted in the docs and in BENCHMARKS.md).

mod common;

use common::{engines, is_device};
use trueno::{Engine, Result, activations as act};

/// Inputs whose bit patterns are evenly spaced between `lo` and `hi` (same sign), so every
/// binade is covered in proportion to its share of the floats.
fn bit_sweep(lo: f32, hi: f32, count: u32) -> Vec<f32> {
    let (a, b) = (lo.to_bits(), hi.to_bits());
    let (a, b) = (a.min(b), a.max(b));
    let step = ((b - a) / count).max(1);
    (a..=b).step_by(step as usize).map(f32::from_bits).collect()
}

/// Max relative error of `op` against `reference` over `x`, ignoring points where the
/// reference is below `floor` in magnitude (there an absolute bound applies instead).
fn max_rel_error(
    e: &Engine,
    op: fn(&Engine, &[f32], &mut [f32]) -> Result<()>,
    reference: impl Fn(f32) -> f64,
    x: &[f32],
    floor: f64,
) -> (f64, f32) {
    let mut out = vec![f32::NAN; x.len()];
    op(e, x, &mut out).unwrap();
    let mut worst = (0.0f64, 0.0f32);
    for (&xi, &got) in x.iter().zip(&out) {
        let want = reference(xi);
        let err = (got as f64 - want).abs();
        let rel = if want.abs() < floor {
            err / floor
        } else {
            err / want.abs()
        };
        assert!(!got.is_nan(), "NaN at {xi:e}");
        if rel > worst.0 {
            worst = (rel, xi);
        }
    }
    worst
}

struct Sweep {
    name: &'static str,
    op: fn(&Engine, &[f32], &mut [f32]) -> Result<()>,
    reference: fn(f32) -> f64,
    ranges: &'static [(f32, f32)],
    floor: f64,
    bound: f64,
}

fn sweeps() -> Vec<Sweep> {
    vec![
        Sweep {
            name: "exp",
            op: Engine::exp_into,
            reference: |x| (x as f64).exp(),
            ranges: &[(-87.3, -1e-30), (1e-30, 88.7)],
            floor: f32::MIN_POSITIVE as f64,
            bound: 1.2e-7,
        },
        Sweep {
            name: "ln",
            op: Engine::ln_into,
            reference: |x| (x as f64).ln(),
            ranges: &[(1e-45, 0.7), (1.5, f32::MAX)],
            floor: 0.0,
            bound: 1.2e-7,
        },
        Sweep {
            name: "ln near 1",
            op: Engine::ln_into,
            reference: |x| (x as f64).ln(),
            ranges: &[(0.7, 1.5)],
            floor: 1.0,
            bound: 6e-8,
        },
        Sweep {
            name: "tanh",
            op: Engine::tanh_into,
            reference: |x| (x as f64).tanh(),
            ranges: &[(-20.0, -1e-30), (1e-30, 20.0)],
            floor: 0.0,
            bound: 2e-7,
        },
        Sweep {
            name: "sigmoid",
            op: Engine::sigmoid_into,
            reference: |x| 1.0 / (1.0 + (-(x as f64)).exp()),
            ranges: &[(-87.0, -1e-30), (1e-30, 40.0)],
            floor: 0.0,
            bound: 2e-7,
        },
        Sweep {
            name: "gelu_erf (x >= -5)",
            op: Engine::gelu_erf_into,
            reference: |x| act::gelu_erf(x) as f64,
            ranges: &[(-5.0, -1e-30), (1e-30, 20.0)],
            floor: 1e-30,
            bound: 3e-6,
        },
        Sweep {
            name: "gelu_tanh (x >= -5)",
            op: Engine::gelu_into,
            reference: |x| act::gelu_tanh(x) as f64,
            ranges: &[(-5.0, -1e-30), (1e-30, 20.0)],
            floor: 1e-30,
            bound: 3e-6,
        },
        Sweep {
            name: "silu",
            op: Engine::silu_into,
            reference: |x| act::silu(x) as f64,
            ranges: &[(-80.0, -1e-30), (1e-30, 80.0)],
            floor: 1e-30,
            bound: 2.4e-7,
        },
        Sweep {
            name: "softplus",
            op: Engine::softplus_into,
            reference: |x| act::softplus(x) as f64,
            ranges: &[(-80.0, -1e-30), (1e-30, 80.0)],
            floor: 1e-30,
            bound: 3e-7,
        },
        Sweep {
            name: "elu",
            op: |e, x, out| e.elu_into(x, 1.0, out),
            reference: |x| act::elu(x, 1.0) as f64,
            ranges: &[(-80.0, -1e-30)],
            floor: 1e-30,
            bound: 3e-7,
        },
        Sweep {
            name: "mish (x >= -5)",
            op: Engine::mish_into,
            reference: |x| act::mish(x) as f64,
            ranges: &[(-5.0, -1e-30), (1e-30, 20.0)],
            floor: 1e-30,
            bound: 3.6e-7,
        },
    ]
}

#[test]
fn transcendentals_meet_their_stated_bounds_on_every_backend() {
    for (backend, e) in engines() {
        for s in sweeps() {
            let x: Vec<f32> = s
                .ranges
                .iter()
                .flat_map(|&(lo, hi)| bit_sweep(lo, hi, 400_000))
                .collect();
            // A device may flush subnormals (WGSL allows it): its sweep skips subnormal
            // inputs and holds results only where the reference is a normal number.
            let x: Vec<f32> = if is_device(backend) {
                let tiny = f32::MIN_POSITIVE as f64;
                let normal = |v: f64| v == 0.0 || v.abs() >= tiny;
                x.into_iter()
                    .filter(|&v| normal(v as f64) && normal((s.reference)(v)))
                    .collect()
            } else {
                x
            };
            let (err, at) = max_rel_error(&e, s.op, s.reference, &x, s.floor);
            // The GPU runs the same algorithms, but shader compilers may contract and
            // reassociate float math (WGSL marks nothing exact): twice the CPU bound there.
            let bound = if is_device(backend) {
                2.0 * s.bound
            } else {
                s.bound
            };
            println!(
                "{:<22} {:<7} max rel error {err:.3e} at x = {at:e}",
                s.name,
                backend.name()
            );
            assert!(
                err <= bound,
                "{} on {backend}: {err:e} at {at:e} exceeds {bound:e}",
                s.name
            );
        }
    }
}

#[test]
fn exp_special_values() {
    for (backend, e) in engines() {
        let x = [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            89.0,
            -104.0,
            0.0,
            -0.0,
        ];
        let mut out = [0.0; 7];
        e.exp_into(&x, &mut out).unwrap();
        assert!(out[0].is_nan(), "{backend}");
        assert_eq!(
            &out[1..],
            &[f32::INFINITY, 0.0, f32::INFINITY, 0.0, 1.0, 1.0],
            "{backend}"
        );
    }
}

#[test]
fn exp_is_gradual_in_the_subnormal_range() {
    // e^x for x in [-103.9, -87.4] is subnormal: absolute error below one subnormal ulp.
    // Devices may flush subnormal results (WGSL allows it), so they are not held to this.
    for (backend, e) in engines().into_iter().filter(|(b, _)| !is_device(*b)) {
        let x = bit_sweep(-103.9, -87.4, 100_000);
        let mut out = vec![0.0; x.len()];
        e.exp_into(&x, &mut out).unwrap();
        for (&xi, &g) in x.iter().zip(&out) {
            let want = (xi as f64).exp();
            assert!(
                (g as f64 - want).abs() <= 1.5e-45,
                "{backend}: exp({xi:e}) = {g:e}, want {want:e}"
            );
        }
    }
}
