//! The K-quant bar: our Q4_K, Q5_K and Q6_K quantizers must not lose more than GGML's
//! reference quantizers (`quantize_row_q{4,5,6}_K_ref`) on the same data.
//!
//! `reference` below re-implements those reference algorithms, from their description, to
//! measure their error here (the `gguf` oracle cannot quantize K-quants): per sub-block a
//! weighted grid search (`make_qkx2_quants`: weights `rms + |x|`, 21 or 16 inverse scales
//! `(nmax + rmin + 0.1 i) / range`, a least-squares scale and min per candidate) or, for
//! Q6_K, `make_qx_quants` (19 candidates `-(32 + 0.1 i) / max`, weights `x^2`); then the
//! sub-block scales rounded to 6 bits (Q6_K: 8 bits with `-128 / max`) and the weights
//! re-rounded with them. Its output is the reconstruction, compared by squared error.

mod common;

use common::Rng;
use trueno_quant::{QuantFormat, dequantize, quantize};

mod reference {
    /// GGML's `nearest_int`: round half to even.
    fn nearest(v: f32) -> i32 {
        v.round_ties_even() as i32
    }

    fn f16(v: f32) -> f32 {
        half::f16::from_f32(v).to_f32()
    }

    /// `make_qkx2_quants`: (scale, min as a positive offset).
    fn qkx2(x: &[f32], w: &[f32], nmax: i32, rmin: f32, nstep: i32) -> (f32, f32) {
        let mut min = x.iter().cloned().fold(f32::INFINITY, f32::min);
        let max = x.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        if min > 0.0 {
            min = 0.0;
        }
        if max == min {
            return (0.0, -min);
        }
        let (sum_w, sum_x) = x
            .iter()
            .zip(w)
            .fold((0.0f32, 0.0f32), |(a, b), (&v, &wi)| (a + wi, b + wi * v));
        let levels = |iscale: f32, min: f32| -> Vec<f32> {
            x.iter()
                .map(|&v| nearest(iscale * (v - min)).clamp(0, nmax) as f32)
                .collect()
        };
        let err = |s: f32, m: f32, l: &[f32]| -> f32 {
            x.iter()
                .zip(w)
                .zip(l)
                .map(|((&v, &wi), &li)| wi * (s * li + m - v).powi(2))
                .sum()
        };
        let mut scale = (max - min) / nmax as f32;
        let l0 = levels(nmax as f32 / (max - min), min);
        let mut best = err(scale, min, &l0);
        let mut best_min = min;
        for is in 0..=nstep {
            let iscale = (rmin + 0.1 * is as f32 + nmax as f32) / (max - min);
            let l = levels(iscale, min);
            let (mut sl, mut sl2, mut sxl) = (0.0f32, 0.0f32, 0.0f32);
            for ((&v, &wi), &li) in x.iter().zip(w).zip(&l) {
                sl += wi * li;
                sl2 += wi * li * li;
                sxl += wi * li * v;
            }
            let d = sum_w * sl2 - sl * sl;
            if d > 0.0 {
                let mut s = (sum_w * sxl - sum_x * sl) / d;
                let mut m = (sl2 * sum_x - sl * sxl) / d;
                if m > 0.0 {
                    m = 0.0;
                    s = sxl / sl2;
                }
                let e = err(s, m, &l);
                if e < best {
                    best = e;
                    scale = s;
                    best_min = m;
                }
            }
        }
        (scale, -best_min)
    }

    /// Q4_K (nmax 15, rmin -1, 20 steps) or Q5_K (nmax 31, rmin -0.5, 15 steps).
    pub fn affine_k(x: &[f32], nmax: i32, rmin: f32, nstep: i32) -> Vec<f32> {
        let mut out = Vec::with_capacity(x.len());
        for sb in x.chunks_exact(256) {
            let fits: Vec<(f32, f32)> = sb
                .chunks_exact(32)
                .map(|xs| {
                    let av = (xs.iter().map(|v| v * v).sum::<f32>() / 32.0).sqrt();
                    let w: Vec<f32> = xs.iter().map(|v| av + v.abs()).collect();
                    qkx2(xs, &w, nmax, rmin, nstep)
                })
                .collect();
            let max_s = fits.iter().fold(0.0f32, |a, f| a.max(f.0));
            let max_m = fits.iter().fold(0.0f32, |a, f| a.max(f.1));
            let inv_s = if max_s > 0.0 { 63.0 / max_s } else { 0.0 };
            let inv_m = if max_m > 0.0 { 63.0 / max_m } else { 0.0 };
            let (d, dmin) = (f16(max_s / 63.0), f16(max_m / 63.0));
            for (xs, &(s, m)) in sb.chunks_exact(32).zip(&fits) {
                let sc = nearest(inv_s * s).min(63) as f32;
                let mn = nearest(inv_m * m).min(63) as f32;
                let (dl, ml) = (d * sc, dmin * mn);
                for &v in xs {
                    let q = if dl == 0.0 {
                        0.0
                    } else {
                        nearest((v + ml) / dl).clamp(0, nmax) as f32
                    };
                    out.push(dl * q - ml);
                }
            }
        }
        out
    }

    /// `make_qx_quants(16, 32, x, rmse_type 1)`: the group's signed scale.
    fn qx(x: &[f32]) -> f32 {
        let (mut max, mut amax) = (0.0f32, 0.0f32);
        for &v in x {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        if amax < 1e-15 {
            return 0.0;
        }
        let sums = |iscale: f32| {
            x.iter().fold((0.0f32, 0.0f32), |(slx, sl2), &v| {
                let l = nearest(iscale * v).clamp(-32, 31) as f32;
                let w = v * v;
                (slx + w * v * l, sl2 + w * l * l)
            })
        };
        let (slx, sl2) = sums(-32.0 / max);
        let mut scale = if sl2 > 0.0 { slx / sl2 } else { 0.0 };
        let mut best = scale * slx;
        for is in (-9..=9).filter(|&i| i != 0) {
            let (slx, sl2) = sums(-(32.0 + 0.1 * is as f32) / max);
            if sl2 > 0.0 && slx * slx > best * sl2 {
                scale = slx / sl2;
                best = scale * slx;
            }
        }
        scale
    }

    pub fn q6_k(x: &[f32]) -> Vec<f32> {
        let mut out = Vec::with_capacity(x.len());
        for sb in x.chunks_exact(256) {
            let scales: Vec<f32> = sb.chunks_exact(16).map(qx).collect();
            let (mut max_s, mut amax_s) = (0.0f32, 0.0f32);
            for &s in &scales {
                if s.abs() > amax_s {
                    amax_s = s.abs();
                    max_s = s;
                }
            }
            if amax_s < 1e-15 {
                out.extend(std::iter::repeat_n(0.0, 256));
                continue;
            }
            let iscale = -128.0 / max_s;
            let d = f16(1.0 / iscale);
            for (xs, &s) in sb.chunks_exact(16).zip(&scales) {
                let dl = d * nearest(iscale * s).min(127) as f32;
                for &v in xs {
                    let q = if dl == 0.0 {
                        0.0
                    } else {
                        nearest(v / dl).clamp(-32, 31) as f32
                    };
                    out.push(dl * q);
                }
            }
        }
        out
    }
}

fn sq_err(x: &[f32], y: &[f32]) -> f64 {
    x.iter().zip(y).map(|(a, b)| ((a - b) as f64).powi(2)).sum()
}

#[test]
fn k_quants_lose_no_more_than_the_reference_quantizers() {
    let mut rng = Rng(42);
    let data: Vec<(&str, Vec<f32>)> = vec![
        ("normal", (0..128 * 256).map(|_| rng.normal()).collect()),
        (
            "heavy-tailed",
            (0..128 * 256).map(|_| rng.heavy()).collect(),
        ),
        (
            "positive",
            (0..64 * 256).map(|_| rng.normal().abs() + 0.1).collect(),
        ),
    ];
    for (what, x) in &data {
        for format in [QuantFormat::Q4K, QuantFormat::Q5K, QuantFormat::Q6K] {
            let ours = {
                let q = quantize(format, x).unwrap();
                let mut y = vec![0.0; x.len()];
                dequantize(format, &q, &mut y).unwrap();
                sq_err(x, &y)
            };
            let theirs = match format {
                QuantFormat::Q4K => sq_err(x, &reference::affine_k(x, 15, -1.0, 20)),
                QuantFormat::Q5K => sq_err(x, &reference::affine_k(x, 31, -0.5, 15)),
                _ => sq_err(x, &reference::q6_k(x)),
            };
            eprintln!(
                "{format} on {what}: squared error {ours:.4} vs reference {theirs:.4} ({:.1}% lower)",
                100.0 * (1.0 - ours / theirs)
            );
            assert!(
                ours <= theirs,
                "{format} on {what}: {ours} > reference {theirs}"
            );
        }
    }
}
