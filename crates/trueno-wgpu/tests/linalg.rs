//! matmul, GEMV (both orientations), RMSNorm and LayerNorm against f64 references computed
//! here, at ragged shapes around the 64 x 64 tile and the 256-thread row workgroups.

mod common;

use common::{Rng, gpu};

/// `|got - want| <= k * eps * scale` for each element, `scale` the sum of the products'
/// magnitudes (the classical dot-product error bound with k terms).
fn assert_dot_close(what: &str, got: &[f32], want: &[(f64, f64)], k: usize) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &(w, scale))) in got.iter().zip(want).enumerate() {
        let tol = (k as f64 + 2.0) * f32::EPSILON as f64 * scale + 1e-30;
        assert!(
            (g as f64 - w).abs() <= tol,
            "{what}[{i}]: gpu {g:e}, exact {w:e}, bound {tol:e}"
        );
    }
}

/// Row-major f64 product with, per element, the sum of |a_ik b_kj|.
fn reference_matmul(a: &[f32], b: &[f32], m: usize, n: usize, k: usize) -> Vec<(f64, f64)> {
    let mut c = vec![(0.0, 0.0); m * n];
    for i in 0..m {
        for j in 0..n {
            for p in 0..k {
                let t = a[i * k + p] as f64 * b[p * n + j] as f64;
                c[i * n + j].0 += t;
                c[i * n + j].1 += t.abs();
            }
        }
    }
    c
}

#[test]
fn matmul_matches_f64_at_ragged_shapes() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng::new(7);
    let shapes = [
        (1, 1, 1),
        (0, 5, 3),
        (5, 0, 3),
        (5, 3, 0),
        (1, 300, 257),
        (63, 65, 17),
        (64, 64, 64),
        (65, 63, 129),
        (130, 70, 33),
        (200, 129, 300),
    ];
    for (m, n, k) in shapes {
        let a = rng.vec(m * k, -1.0, 1.0);
        let b = rng.vec(k * n, -1.0, 1.0);
        let got = gpu.matmul(&a, &b, m, n, k).unwrap();
        let want = reference_matmul(&a, &b, m, n, k);
        assert_dot_close(&format!("matmul {m}x{n}x{k}"), &got, &want, k);
    }
}

#[test]
fn gemv_both_orientations_match_f64() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng::new(8);
    for (m, k) in [
        (1, 1),
        (3, 0),
        (0, 3),
        (7, 255),
        (33, 257),
        (300, 1000),
        (1000, 77),
    ] {
        let a = rng.vec(m * k, -1.0, 1.0);
        let x = rng.vec(k, -1.0, 1.0);
        let got = gpu.gemv(&a, &x, m, k).unwrap();
        // A x is the product of A (m x k) with x as a k x 1 matrix.
        assert_dot_close(
            &format!("gemv {m}x{k}"),
            &got,
            &reference_matmul(&a, &x, m, 1, k),
            k,
        );
        let xt = rng.vec(m, -1.0, 1.0);
        let got = gpu.gemv_t(&a, &xt, m, k).unwrap();
        // xᵀ A is the product of x as a 1 x m matrix with A.
        let want = reference_matmul(&xt, &a, 1, k, m);
        assert_dot_close(&format!("gemv_t {m}x{k}"), &got, &want, m);
    }
}

#[test]
fn rmsnorm_and_layernorm_match_f64() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng::new(9);
    for (rows, cols) in [(1, 1), (3, 7), (2, 255), (5, 257), (4, 4099), (0, 16)] {
        let x = rng.vec(rows * cols, -3.0, 4.0);
        let w = rng.vec(cols, 0.5, 1.5);
        let bias = rng.vec(cols, -1.0, 1.0);
        let eps = 1e-5f32;
        let rms = gpu.rmsnorm(&x, &w, rows, cols, eps).unwrap();
        let ln = gpu.layernorm(&x, &w, &bias, rows, cols, eps).unwrap();
        for r in 0..rows {
            let row: Vec<f64> = x[r * cols..(r + 1) * cols]
                .iter()
                .map(|&v| v as f64)
                .collect();
            let ms = row.iter().map(|v| v * v).sum::<f64>() / cols as f64;
            let mean = row.iter().sum::<f64>() / cols as f64;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / cols as f64;
            for j in 0..cols {
                let want = row[j] / (ms + eps as f64).sqrt() * w[j] as f64;
                let got = rms[r * cols + j] as f64;
                // The row's sum of squares: about (cols / 256 + 8) roundings, then a few more.
                let rel = ((cols / 256 + 16) as f64) * f32::EPSILON as f64;
                assert!(
                    (got - want).abs() <= rel * want.abs() + 1e-6,
                    "rmsnorm {rows}x{cols} [{r},{j}]: {got} vs {want}"
                );
                let want =
                    (row[j] - mean) / (var + eps as f64).sqrt() * w[j] as f64 + bias[j] as f64;
                let got = ln[r * cols + j] as f64;
                // Normalized values are O(1); the mean's error scales with |x| / std.
                assert!(
                    (got - want).abs() <= 4.0 * rel + 1e-5,
                    "layernorm {rows}x{cols} [{r},{j}]: {got} vs {want}"
                );
            }
        }
    }
}
