//! GEMV (`A·x` and `xᵀ·A`) against an f64 reference on every ISA: ragged sizes, padded
//! row strides, alpha/beta with NaN in y when beta is 0, and non-finite rows.

mod common;

use common::gemm_ref::Strided;
use common::{Rng, engines};
use trueno::{Matrix, TruenoError};

/// Checks `got[i] = alpha sum_p term(i, p) + beta y0[i]` (p over `len` terms) against its
/// f64 value within `(len + 2) eps (|alpha| sum |terms| + |beta y0[i]|)`.
fn assert_matches(
    what: &str,
    got: &[f32],
    y0: &[f32],
    (alpha, beta): (f32, f32),
    len: usize,
    term: impl Fn(usize, usize) -> f64,
) {
    for (i, &g) in got.iter().enumerate() {
        let (s, mag): (f64, f64) = (0..len)
            .map(|p| term(i, p))
            .fold((0.0, 0.0), |(s, m), v| (s + v, m + v.abs()));
        let c = if beta == 0.0 {
            0.0
        } else {
            beta as f64 * y0[i] as f64
        };
        let want = alpha as f64 * s + c;
        let bound =
            (len as f64 + 2.0) * f32::EPSILON as f64 * (alpha.abs() as f64 * mag + c.abs()) + 1e-30;
        assert!(
            (g as f64 - want).abs() <= bound,
            "{what}: y[{i}] = {g} want {want}"
        );
    }
}

#[test]
fn gemv_and_its_transpose_match_the_reference_on_every_isa() {
    let mut rng = Rng::new(21);
    for (backend, e) in engines() {
        for (m, k) in [
            (0, 5),
            (1, 1),
            (3, 17),
            (17, 3),
            (33, 65),
            (130, 257),
            (257, 130),
        ] {
            let a = Strided::new(&mut rng, m, k, 3);
            let x = rng.vec(k, -1.0, 1.0);
            let xt = rng.vec(m, -1.0, 1.0);
            for (alpha, beta) in [(1.0, 0.0), (-1.5, 1.0), (0.5, -1.5)] {
                let y0 = rng.vec(m, -1.0, 1.0);
                let mut y = if beta == 0.0 {
                    vec![f32::NAN; m]
                } else {
                    y0.clone()
                };
                e.gemv(alpha, a.view(), &x, beta, &mut y).unwrap();
                let what = format!("{} gemv {m}x{k}", backend.name());
                let term = |i: usize, p: usize| a.at(i, p) as f64 * x[p] as f64;
                assert_matches(&what, &y, &y0, (alpha, beta), k, term);
                let y1 = rng.vec(k, -1.0, 1.0);
                let mut yt = if beta == 0.0 {
                    vec![f32::NAN; k]
                } else {
                    y1.clone()
                };
                e.gemv_t(alpha, &xt, a.view(), beta, &mut yt).unwrap();
                let what = format!("{} gemv_t {m}x{k}", backend.name());
                let term = |j: usize, i: usize| xt[i] as f64 * a.at(i, j) as f64;
                assert_matches(&what, &yt, &y1, (alpha, beta), m, term);
            }
        }
        let a = Matrix::zeros(3, 4).unwrap();
        assert!(matches!(
            e.gemv(1.0, a.view(), &[0.0; 3], 0.0, &mut [0.0; 3]),
            Err(TruenoError::LengthMismatch { .. })
        ));
        assert!(matches!(
            e.gemv_t(1.0, &[0.0; 3], a.view(), 0.0, &mut [0.0; 3]),
            Err(TruenoError::LengthMismatch { .. })
        ));
    }
}

#[test]
fn gemv_keeps_a_non_finite_row_to_its_own_output() {
    // A·x runs four rows a pass: a NaN or Inf in one row must reach that row's y only.
    let mut rng = Rng::new(23);
    let (m, k) = (11, 70);
    for (backend, e) in engines() {
        for (bad_row, bad) in [(1, f32::NAN), (5, f32::INFINITY), (10, f32::NEG_INFINITY)] {
            let mut a = Strided::new(&mut rng, m, k, 2);
            let col = 37;
            a.data[bad_row * a.stride + col] = bad;
            let x: Vec<f32> = (0..k).map(|p| if p == col { 1.0 } else { 0.5 }).collect();
            let mut y = vec![0.0f32; m];
            e.gemv(1.0, a.view(), &x, 0.0, &mut y).unwrap();
            for (i, &yi) in y.iter().enumerate() {
                if i == bad_row {
                    assert!(
                        yi.is_nan() == bad.is_nan() && (bad.is_nan() || yi == bad),
                        "{} row {i}: {yi}",
                        backend.name()
                    );
                } else {
                    let want: f64 = (0..k).map(|p| a.at(i, p) as f64 * x[p] as f64).sum();
                    assert!(
                        (yi as f64 - want).abs() <= 1e-4,
                        "{} row {i}: {yi} want {want}",
                        backend.name()
                    );
                }
            }
        }
    }
}

#[test]
fn gemv_matches_the_reference_whatever_the_alignment_of_a_and_x() {
    // A·x aligns its loads to A's first row, not to x: every pair of offsets (in floats,
    // within one AVX-512 vector and past it) over rows longer than one f32 block (4096
    // on AVX-512), so the peeled head, the blocks and the tail all run misaligned.
    let mut rng = Rng::new(25);
    let (m, k, stride) = (6, 4133, 4133 + 5);
    let offsets = [0, 1, 7, 15, 16];
    let abuf = rng.vec(offsets[4] + m * stride, -1.0, 1.0);
    let xbuf = rng.vec(offsets[4] + k, -1.0, 1.0);
    for (backend, e) in engines() {
        for oa in offsets {
            for ox in offsets {
                let a = trueno::MatRef::new(&abuf[oa..], m, k, stride).unwrap();
                let x = &xbuf[ox..ox + k];
                let mut y = vec![f32::NAN; m];
                e.gemv(1.0, a, x, 0.0, &mut y).unwrap();
                let what = format!("{} gemv A+{oa} x+{ox}", backend.name());
                let term = |i: usize, p: usize| abuf[oa + i * stride + p] as f64 * x[p] as f64;
                assert_matches(&what, &y, &[], (1.0, 0.0), k, term);
            }
        }
    }
}
