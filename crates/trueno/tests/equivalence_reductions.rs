//! Reductions, similarity, normalisation and softmax on every backend against f64
//! references, at every size and misaligned offset, with the documented error bound;
//! special values and the empty-input contract.

mod common;

use common::*;
use trueno::{Backend, Engine, TruenoError, activations};

/// Error bound of a sum of `n` terms on `backend`, as a multiple of sum |terms|: the CPU's
/// blocked sum (see `Engine::sum`), or the GPU's f32 tree.
fn sum_bound(backend: Backend, n: usize) -> f64 {
    if is_device(backend) {
        return gpu_sum_bound(n);
    }
    (64 + (4 * backend.lanes()).ilog2() as usize + 1) as f64 * f32::EPSILON as f64 / 2.0
}

fn assert_sum_close(ctx: &str, got: f32, exact: f64, magnitude: f64, bound: f64) {
    // Plus the final rounding of the result to f32.
    let tol = bound * magnitude + exact.abs() * f32::EPSILON as f64;
    assert!(
        (got as f64 - exact).abs() <= tol,
        "{ctx}: got {got:e}, exact {exact:e}, tol {tol:e}"
    );
}

#[test]
fn sums_dots_and_norms_meet_the_error_bound_on_every_backend() {
    for (backend, e) in engines() {
        let mut rng = Rng::new(5);
        for n in sizes().into_iter().chain([100_003, 1_000_003]) {
            let bound = sum_bound(backend, n);
            let a = rng.vec(n, -3.0, 5.0);
            let b = rng.vec(n, -2.0, 2.0);
            let (ab, bb) = (misaligned(&a, 1), misaligned(&b, 3));
            let (a, b) = (&ab[1..], &bb[3..]);
            let ctx = |op: &str| format!("{op} on {backend}, n = {n}");
            let f = |v: &f32| *v as f64;
            let abs_sum: f64 = a.iter().map(|v| f(v).abs()).sum();
            assert_sum_close(
                &ctx("sum"),
                e.sum(a).unwrap(),
                a.iter().map(f).sum(),
                abs_sum,
                bound,
            );
            assert_sum_close(
                &ctx("norm_l1"),
                e.norm_l1(a).unwrap(),
                abs_sum,
                abs_sum,
                bound,
            );
            let prods: f64 = a.iter().zip(b).map(|(x, y)| (f(x) * f(y)).abs()).sum();
            let dot: f64 = a.iter().zip(b).map(|(x, y)| f(x) * f(y)).sum();
            assert_sum_close(&ctx("dot"), e.dot(a, b).unwrap(), dot, prods, bound);
            let sq: f64 = a.iter().map(|v| f(v) * f(v)).sum();
            let l2 = e.norm_l2(a).unwrap() as f64;
            assert!(
                (l2 - sq.sqrt()).abs() <= sq.sqrt() * (bound + 2e-7),
                "{}",
                ctx("norm_l2")
            );
            let d2: f64 = a.iter().zip(b).map(|(x, y)| (f(x) - f(y)).powi(2)).sum();
            let eu = e.euclidean(a, b).unwrap() as f64;
            assert!(
                (eu - d2.sqrt()).abs() <= d2.sqrt() * (bound + 2e-7) + 1e-30,
                "{}",
                ctx("euclidean")
            );
            let d1: f64 = a.iter().zip(b).map(|(x, y)| (f(x) - f(y)).abs()).sum();
            assert_sum_close(
                &ctx("manhattan"),
                e.manhattan(a, b).unwrap(),
                d1,
                d1 * 1.0001,
                bound,
            );
            if n == 0 {
                continue;
            }
            let max = a.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let min = a.iter().copied().fold(f32::INFINITY, f32::min);
            assert_eq!(e.max(a).unwrap(), max, "{}", ctx("max"));
            assert_eq!(e.min(a).unwrap(), min, "{}", ctx("min"));
            assert_eq!(
                e.argmax(a).unwrap(),
                a.iter().position(|&v| v == max).unwrap(),
                "{}",
                ctx("argmax")
            );
            assert_eq!(
                e.argmin(a).unwrap(),
                a.iter().position(|&v| v == min).unwrap(),
                "{}",
                ctx("argmin")
            );
            assert_eq!(
                e.norm_linf(a).unwrap(),
                a.iter().fold(0.0f32, |m, v| m.max(v.abs())),
                "{}",
                ctx("norm_linf")
            );
            let mean = a.iter().map(f).sum::<f64>() / n as f64;
            assert_sum_close(
                &ctx("mean"),
                e.mean(a).unwrap(),
                mean,
                abs_sum / n as f64,
                bound,
            );
            let var = a.iter().map(|v| (f(v) - mean).powi(2)).sum::<f64>() / n as f64;
            let got = e.variance(a).unwrap() as f64;
            assert!(
                (got - var).abs() <= 1e-5 * var + 1e-7,
                "{}: {got} vs {var}",
                ctx("variance")
            );
            assert!(
                (e.stddev(a).unwrap() as f64 - var.sqrt()).abs() <= 1e-5 * var.sqrt() + 1e-7,
                "{}",
                ctx("stddev")
            );
            let cos = dot / (sq.sqrt() * b.iter().map(|v| f(v) * f(v)).sum::<f64>().sqrt());
            assert!(
                (e.cosine(a, b).unwrap() as f64 - cos).abs() <= 1e-5,
                "{}",
                ctx("cosine")
            );
        }
    }
}

#[test]
fn argmax_returns_the_first_of_ties_across_blocks() {
    for (backend, e) in engines() {
        let mut x = vec![1.0f32; 20_000];
        x[9_000] = 7.0;
        x[17_000] = 7.0;
        x[100] = -3.0;
        x[12_000] = -3.0;
        assert_eq!(e.argmax(&x).unwrap(), 9_000, "{backend}");
        assert_eq!(e.argmin(&x).unwrap(), 100, "{backend}");
        x[15_000] = f32::NAN;
        x[19_000] = f32::NAN;
        assert_eq!(e.argmax(&x).unwrap(), 15_000, "{backend}: first NaN");
        assert_eq!(e.argmin(&x).unwrap(), 15_000, "{backend}: first NaN");
        assert_eq!(e.argmax(&[f32::NEG_INFINITY; 5]).unwrap(), 0, "{backend}");
        assert_eq!(e.argmin(&[f32::INFINITY; 5]).unwrap(), 0, "{backend}");
    }
}

#[test]
fn argmax_keeps_first_occurrence_when_split_across_threads() {
    // Long enough to be split into per-thread chunks (see parallel.rs).
    for (backend, e) in engines() {
        let n = 1_300_000;
        let mut x = vec![0.5f32; n];
        x[900_000] = 9.0;
        x[1_200_000] = 9.0;
        x[700_001] = -9.0;
        x[1_250_000] = -9.0;
        assert_eq!(e.argmax(&x).unwrap(), 900_000, "{backend}");
        assert_eq!(e.argmin(&x).unwrap(), 700_001, "{backend}");
        assert_eq!(e.max(&x).unwrap(), 9.0, "{backend}");
        assert_eq!(e.min(&x).unwrap(), -9.0, "{backend}");
        x[1_100_000] = f32::NAN;
        x[1_290_000] = f32::NAN;
        assert_eq!(e.argmax(&x).unwrap(), 1_100_000, "{backend}");
        assert_eq!(e.argmin(&x).unwrap(), 1_100_000, "{backend}");
        assert!(
            e.max(&x).unwrap().is_nan() && e.min(&x).unwrap().is_nan(),
            "{backend}"
        );
    }
}

#[test]
fn nan_and_infinity_propagate_through_reductions() {
    for (backend, e) in engines() {
        for n in [1usize, 7, 16, 17, 33, 5000] {
            for pos in [0, n / 2, n - 1] {
                let mut x = vec![1.5f32; n];
                x[pos] = f32::NAN;
                for (op, v) in [
                    ("sum", e.sum(&x)),
                    ("max", e.max(&x)),
                    ("min", e.min(&x)),
                    ("norm_linf", e.norm_linf(&x)),
                    ("norm_l2", e.norm_l2(&x)),
                    ("mean", e.mean(&x)),
                    ("dot", e.dot(&x, &x)),
                ] {
                    assert!(
                        v.unwrap().is_nan(),
                        "{op} on {backend}, n = {n}, NaN at {pos}"
                    );
                }
                x[pos] = f32::INFINITY;
                assert_eq!(e.max(&x).unwrap(), f32::INFINITY, "{backend}");
                assert_eq!(e.sum(&x).unwrap(), f32::INFINITY, "{backend}");
                assert_eq!(e.norm_l2(&x).unwrap(), f32::INFINITY, "{backend}");
            }
        }
    }
}

#[test]
fn l2_norm_survives_overflow_and_underflow_of_squares() {
    for (backend, e) in engines() {
        let big = vec![3e30f32; 1000];
        let want = 3e30 * 1000f64.sqrt();
        assert!(
            ((e.norm_l2(&big).unwrap() as f64) / want - 1.0).abs() < 1e-6,
            "{backend}"
        );
        let tiny = vec![3e-30f32; 1000];
        let want = 3e-30 * 1000f64.sqrt();
        assert!(
            ((e.norm_l2(&tiny).unwrap() as f64) / want - 1.0).abs() < 1e-6,
            "{backend}"
        );
        let mut x = tiny.clone();
        e.normalize_inplace(&mut x).unwrap();
        assert!((e.norm_l2(&x).unwrap() - 1.0).abs() < 1e-6, "{backend}");
    }
}

/// Softmax and log-softmax of `x`, into and in place, against the f64 definitions.
fn check_softmax(backend: Backend, e: &Engine, x: &[f32]) {
    let n = x.len();
    let want = activations::softmax(x);
    let mut out = vec![f32::NAN; n];
    e.softmax_into(x, &mut out).unwrap();
    let mut inplace = x.to_vec();
    e.softmax_inplace(&mut inplace).unwrap();
    // x - max is rounded to f32 before exp, which amplifies that rounding by |x - max|:
    // every f32 softmax carries this error. (In place and into may differ in the last bits:
    // the block split follows the output's alignment.)
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    for i in 0..n {
        let rel = 1e-6 + sum_bound(backend, n) as f32 + (max - x[i]) * f32::EPSILON;
        for (form, got) in [("into", out[i]), ("in place", inplace[i])] {
            assert!(
                close(got, want[i], rel, 1e-37),
                "softmax {form} {backend} n = {n} [{i}]: {got} vs {}",
                want[i]
            );
        }
    }
    let want = activations::log_softmax(x);
    e.log_softmax_into(x, &mut out).unwrap();
    assert_all_close(
        &format!("log_softmax {backend} n = {n}"),
        &out,
        &want,
        1e-6,
        2e-6,
    );
    let mut inplace = x.to_vec();
    e.log_softmax_inplace(&mut inplace).unwrap();
    assert_all_close(
        &format!("log_softmax in place {backend} n = {n}"),
        &inplace,
        &want,
        1e-6,
        2e-6,
    );
}

#[test]
fn softmax_and_log_softmax_match_f64_on_every_backend() {
    for (backend, e) in engines() {
        let mut rng = Rng::new(9);
        for n in sizes().into_iter().filter(|&n| n > 0).chain([100_003]) {
            check_softmax(backend, &e, &rng.vec(n, -30.0, 30.0));
        }
        // Large logits do not overflow; a NaN poisons every output.
        let mut out = [0.0; 3];
        e.softmax_into(&[1000.0, 1000.0, -f32::INFINITY], &mut out)
            .unwrap();
        assert_eq!(out, [0.5, 0.5, 0.0], "{backend}");
        e.softmax_into(&[1.0, f32::NAN, 2.0], &mut out).unwrap();
        assert!(out.iter().all(|v| v.is_nan()), "{backend}");
    }
}

#[test]
fn softmax_split_across_threads_matches_f64() {
    // Above the threshold where softmax runs as three threaded passes (see reductions.rs).
    let x = Rng::new(21).vec(700_001, -20.0, 20.0);
    for (backend, e) in engines() {
        check_softmax(backend, &e, &x);
    }
}

#[test]
fn normalize_gives_unit_norm_and_keeps_zero_vectors() {
    for (backend, e) in engines() {
        let mut rng = Rng::new(4);
        for n in 1..70 {
            let x = rng.vec(n, -4.0, 4.0);
            let mut out = vec![f32::NAN; n];
            e.normalize_into(&x, &mut out).unwrap();
            let norm = out.iter().map(|v| (*v as f64).powi(2)).sum::<f64>().sqrt();
            assert!((norm - 1.0).abs() < 1e-6, "{backend} n = {n}");
        }
        let mut z = vec![0.0f32; 9];
        e.normalize_inplace(&mut z).unwrap();
        assert_eq!(z, vec![0.0; 9]);
        assert_eq!(
            e.cosine(&[0.0, 0.0], &[1.0, 2.0]).unwrap(),
            0.0,
            "{backend}"
        );
    }
}

#[test]
fn empty_input_is_an_error_where_undefined_and_zero_where_not() {
    let e: &Engine = trueno::engine().unwrap();
    let empty: &[f32] = &[];
    let undefined = [
        ("max", e.max(empty).map(|_| ())),
        ("min", e.min(empty).map(|_| ())),
        ("argmax", e.argmax(empty).map(|_| ())),
        ("argmin", e.argmin(empty).map(|_| ())),
        ("mean", e.mean(empty).map(|_| ())),
        ("variance", e.variance(empty).map(|_| ())),
        ("stddev", e.stddev(empty).map(|_| ())),
        ("cosine", e.cosine(empty, empty).map(|_| ())),
        ("softmax", e.softmax_into(empty, &mut []).map(|_| ())),
        (
            "log_softmax",
            e.log_softmax_into(empty, &mut []).map(|_| ()),
        ),
    ];
    for (op, r) in undefined {
        assert!(
            matches!(r, Err(TruenoError::EmptyInput { .. })),
            "{op}: {r:?}"
        );
    }
    assert_eq!(e.sum(empty).unwrap(), 0.0);
    assert_eq!(e.dot(empty, empty).unwrap(), 0.0);
    assert_eq!(e.norm_l1(empty).unwrap(), 0.0);
    assert_eq!(e.norm_l2(empty).unwrap(), 0.0);
    assert_eq!(e.norm_linf(empty).unwrap(), 0.0);
    assert!(matches!(
        e.dot(&[1.0], &[1.0, 2.0]),
        Err(TruenoError::LengthMismatch {
            expected: 1,
            got: 2,
            ..
        })
    ));
    assert!(matches!(
        e.cosine(&[1.0], &[]),
        Err(TruenoError::LengthMismatch { .. })
    ));
}
