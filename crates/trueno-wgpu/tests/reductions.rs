//! Reductions, argmax/argmin and the whole-vector maps (softmax, log-softmax, normalize)
//! against trueno's scalar CPU backend, which accumulates in f64.

mod common;

use common::{Rng, SIZES, assert_all_close, gpu, gpu_sum_bound, scalar};
use trueno::Engine;
use trueno_wgpu::{Reduce2Op, ReduceOp, VectorOp};

fn cpu_reduce(e: &Engine, op: ReduceOp, x: &[f32]) -> trueno::Result<f32> {
    match op {
        ReduceOp::Sum => e.sum(x),
        ReduceOp::Mean => e.mean(x),
        ReduceOp::Max => e.max(x),
        ReduceOp::Min => e.min(x),
        ReduceOp::NormL1 => e.norm_l1(x),
        ReduceOp::NormL2 => e.norm_l2(x),
        ReduceOp::NormLinf => e.norm_linf(x),
        ReduceOp::Variance => e.variance(x),
        ReduceOp::Stddev => e.stddev(x),
    }
}

#[test]
fn reductions_match_the_scalar_cpu_backend() {
    let Some(gpu) = gpu() else { return };
    let e = scalar();
    let mut rng = Rng::new(3);
    for n in SIZES {
        // Offset from zero so that the variance's two passes matter.
        let x = rng.vec(n, -3.0, 5.0);
        let mag: f64 = x.iter().map(|v| v.abs() as f64).sum();
        for op in ReduceOp::ALL {
            let got = gpu.reduce(op, &x);
            let want = cpu_reduce(&e, op, &x);
            let (got, want) = match (got, want) {
                (Ok(g), Ok(w)) => (g as f64, w as f64),
                (Err(_), Err(_)) => continue, // both refuse an empty input
                (g, w) => panic!("{op:?} n={n}: gpu {g:?}, cpu {w:?}"),
            };
            let tol = match op {
                ReduceOp::Max | ReduceOp::Min | ReduceOp::NormLinf => 0.0,
                ReduceOp::Sum | ReduceOp::NormL1 => gpu_sum_bound(n) * mag,
                ReduceOp::Mean => gpu_sum_bound(n) * mag / n as f64,
                // Relative: sums of non-negative terms, then a sqrt or a division.
                ReduceOp::NormL2 | ReduceOp::Variance | ReduceOp::Stddev => {
                    (gpu_sum_bound(n) + 4.0 * f32::EPSILON as f64) * want.abs()
                }
            };
            assert!(
                (got - want).abs() <= tol,
                "{op:?} n={n}: gpu {got:e}, cpu {want:e}, bound {tol:e}"
            );
        }
    }
}

#[test]
fn extremes_propagate_nan_and_norm_l2_survives_overflow() {
    let Some(gpu) = gpu() else { return };
    let mut x = vec![1.0f32; 5000];
    x[4321] = f32::NAN;
    assert!(gpu.reduce(ReduceOp::Max, &x).unwrap().is_nan());
    assert!(gpu.reduce(ReduceOp::Min, &x).unwrap().is_nan());
    assert_eq!(gpu.argmax(&x).unwrap(), 4321);
    // Squares overflow f32, the norm does not: 3e30 * sqrt(2) (the CPU rescales the same way).
    let big = [3e30f32, -3e30];
    let n = gpu.reduce(ReduceOp::NormL2, &big).unwrap();
    assert!((n as f64 - 3e30 * 2f64.sqrt()).abs() < 1e24, "{n}");
    assert_eq!(gpu.reduce(ReduceOp::NormL2, &[0.0; 7]).unwrap(), 0.0);
    assert_eq!(gpu.reduce(ReduceOp::Sum, &[]).unwrap(), 0.0);
}

#[test]
fn two_vector_reductions_match_the_scalar_cpu_backend() {
    let Some(gpu) = gpu() else { return };
    let e = scalar();
    let mut rng = Rng::new(4);
    for n in SIZES {
        let a = rng.vec(n, -2.0, 2.0);
        let b = rng.vec(n, -2.0, 2.0);
        for op in Reduce2Op::ALL {
            let got = gpu.reduce2(op, &a, &b);
            let want = match op {
                Reduce2Op::Dot => e.dot(&a, &b),
                Reduce2Op::Euclidean => e.euclidean(&a, &b),
                Reduce2Op::Manhattan => e.manhattan(&a, &b),
                Reduce2Op::Cosine => e.cosine(&a, &b),
            };
            let (got, want) = match (got, want) {
                (Ok(g), Ok(w)) => (g as f64, w as f64),
                (Err(_), Err(_)) => continue,
                (g, w) => panic!("{op:?} n={n}: gpu {g:?}, cpu {w:?}"),
            };
            // Products and differences of terms up to 2 in magnitude: |terms| <= 16 n.
            let tol = match op {
                Reduce2Op::Dot | Reduce2Op::Manhattan => gpu_sum_bound(n) * 16.0 * n as f64,
                Reduce2Op::Euclidean => gpu_sum_bound(n) * want.abs() + 1e-30,
                Reduce2Op::Cosine => 4.0 * gpu_sum_bound(n),
            };
            assert!(
                (got - want).abs() <= tol,
                "{op:?} n={n}: gpu {got:e}, cpu {want:e}, bound {tol:e}"
            );
        }
    }
}

#[test]
fn argmax_and_argmin_pick_the_first_extreme() {
    let Some(gpu) = gpu() else { return };
    let e = scalar();
    let mut rng = Rng::new(5);
    for n in SIZES.into_iter().filter(|&n| n > 0) {
        // Few distinct values, so ties are everywhere and "first" is what is tested.
        let x: Vec<f32> = (0..n)
            .map(|_| (rng.uniform(0.0, 7.0) as i32) as f32)
            .collect();
        assert_eq!(
            gpu.argmax(&x).unwrap(),
            e.argmax(&x).unwrap(),
            "argmax n={n}"
        );
        assert_eq!(
            gpu.argmin(&x).unwrap(),
            e.argmin(&x).unwrap(),
            "argmin n={n}"
        );
    }
    assert!(gpu.argmax(&[]).is_err());
}

#[test]
fn softmax_log_softmax_and_normalize_match_the_scalar_cpu_backend() {
    let Some(gpu) = gpu() else { return };
    let e = scalar();
    let mut rng = Rng::new(6);
    for n in SIZES {
        let x = rng.vec(n, -20.0, 20.0);
        for op in VectorOp::ALL {
            let got = gpu.vector_op(op, &x);
            let mut want = vec![0.0; n];
            let w = match op {
                VectorOp::Softmax => e.softmax_into(&x, &mut want),
                VectorOp::LogSoftmax => e.log_softmax_into(&x, &mut want),
                VectorOp::Normalize => e.normalize_into(&x, &mut want),
            };
            let got = match (got, w) {
                (Ok(g), Ok(())) => g,
                (Err(_), Err(_)) => continue,
                (g, w) => panic!("{op:?} n={n}: gpu {g:?}, cpu {w:?}"),
            };
            // exp of each term (1 ulp each side) plus the sum's bound, relative for softmax
            // and normalize; for log-softmax the sum's relative error becomes an absolute
            // error of ln(sum), so near the maximum (values near 0) it is absolute.
            let tol = 6e-6 + gpu_sum_bound(n);
            if op == VectorOp::LogSoftmax {
                for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                    let bound = tol * (1.0 + w.abs() as f64);
                    assert!(
                        (g - w).abs() as f64 <= bound,
                        "{op:?}[{i}] n={n}: gpu {g}, cpu {w}"
                    );
                }
            } else {
                assert_all_close(&format!("{op:?}"), &got, &want, &x, tol);
            }
        }
    }
}
