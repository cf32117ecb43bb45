//! K-quant quantization (Q4_K, Q5_K, Q6_K): a least-squares search per sub-block, then the
//! sub-block scales themselves quantized, then the best neighbouring 6/8-bit scale codes.
//!
//! The algorithm, per sub-block of 32 (Q4_K/Q5_K, `x ~ s*q - m`, `q` in `0..=nmax`, `s, m
//! >= 0`) or 16 (Q6_K, `x ~ s*q`, `q` in `-32..=31`):
//! 1. Candidate scales on a grid around the range-fitting one (21 steps of 0.1 quant
//!    levels, as the reference searches); for each, round to the levels, then solve the
//!    2x2 (1x1 for Q6_K) least-squares problem for the scale and offset those levels
//!    imply, re-round with it, and keep the pair of least squared error.
//! 2. Lloyd refinement of the winner: re-round, re-fit, until the error stops falling.
//! 3. The super-block: `d = max s / 63` (Q6_K: `max |s| / 127`, or `/ 128` when that
//!    scale is negative), stored as f16, and `d` times 0.94..1.06 in steps of 0.02 (both
//!    `d` and `dmin` for Q4_K/Q5_K); for each, every sub-block tries the codes just below
//!    and above `s / d` (and the same for the min), re-rounding its weights with each; the
//!    super-scale and codes of least total error win.
//!
//! Unlike the reference, the error minimised is the plain squared error (the reference
//! weighs each weight by `|x| + rms`), and step 3 searches the super-scales and codes
//! instead of rounding once.

use half::f16;

use super::Quantize;
use crate::blocks::*;

fn sq(v: f32) -> f32 {
    v * v
}

/// Squared error of `x ~ s*q + b` with `q = clamp(round((x - b) / s), lo, hi)`.
fn affine_error(x: &[f32], s: f32, b: f32, lo: f32, hi: f32) -> f32 {
    let is = if s == 0.0 { 0.0 } else { 1.0 / s };
    x.iter()
        .map(|&v| sq(s * ((v - b) * is).round().clamp(lo, hi) + b - v))
        .sum()
}

/// Least-squares `(s, b)` for `x ~ s*q + b` given levels `q`, with `b <= 0` when
/// `with_offset` (else `b = 0`).
fn fit(x: &[f32], q: &[f32], with_offset: bool) -> Option<(f32, f32)> {
    let n = x.len() as f32;
    let (mut sq_, mut sq2, mut sx, mut sqx) = (0.0f32, 0.0f32, 0.0f32, 0.0f32);
    for (&v, &l) in x.iter().zip(q) {
        sq_ += l;
        sq2 += l * l;
        sx += v;
        sqx += l * v;
    }
    if with_offset {
        let det = n * sq2 - sq_ * sq_;
        if det > 0.0 {
            let s = (n * sqx - sq_ * sx) / det;
            let b = (sq2 * sx - sq_ * sqx) / det;
            if b <= 0.0 {
                return (s > 0.0).then_some((s, b));
            }
        }
    }
    (sq2 > 0.0)
        .then(|| (sqx / sq2, 0.0))
        .filter(|&(s, _)| s != 0.0)
}

/// Steps 1 and 2: the best `(s, b)` for one sub-block on levels `lo..=hi`.
fn search(x: &[f32], lo: f32, hi: f32, with_offset: bool) -> (f32, f32) {
    let (xmin, xmax) = x.iter().fold((0.0f32, f32::NEG_INFINITY), |(a, b), &v| {
        (a.min(v), b.max(v))
    });
    let xmin = if with_offset { xmin } else { 0.0 };
    let mut levels = vec![0.0f32; x.len()];
    let round_with = |s: f32, b: f32, out: &mut [f32]| {
        let is = 1.0 / s;
        for (o, &v) in out.iter_mut().zip(x) {
            *o = ((v - b) * is).round().clamp(lo, hi);
        }
    };
    // The range-fitting start: affine maps [xmin, xmax] onto [0, hi]; symmetric maps the
    // largest magnitude onto the level of its sign's end.
    let (amax_v, amax) = x.iter().fold((0.0f32, 0.0f32), |(mv, m), &v| {
        if v.abs() > m { (v, v.abs()) } else { (mv, m) }
    });
    let range = if with_offset { xmax - xmin } else { amax };
    if range <= 0.0 {
        return (0.0, xmin);
    }
    let start = |step: i32| -> (f32, f32) {
        let levels_span = hi + 0.1 * step as f32;
        if with_offset {
            (range / levels_span, xmin)
        } else if amax_v < 0.0 {
            (amax / (-lo + 0.1 * step as f32), 0.0)
        } else {
            (amax / levels_span, 0.0)
        }
    };
    let mut best = {
        let (s, b) = start(0);
        (affine_error(x, s, b, lo, hi), s, b)
    };
    for step in -10..=10 {
        let (s, b) = start(step);
        if s <= 0.0 || !s.is_finite() {
            continue;
        }
        round_with(s, b, &mut levels);
        if let Some((s2, b2)) = fit(x, &levels, with_offset) {
            let e = affine_error(x, s2, b2, lo, hi);
            if e < best.0 {
                best = (e, s2, b2);
            }
        }
    }
    for _ in 0..8 {
        let (e0, s, b) = best;
        round_with(s, b, &mut levels);
        match fit(x, &levels, with_offset) {
            Some((s2, b2)) => {
                let e = affine_error(x, s2, b2, lo, hi);
                if e < e0 {
                    best = (e, s2, b2);
                } else {
                    break;
                }
            }
            None => break,
        }
    }
    (best.1, best.2)
}

/// Codes near `v / d` to try (clamped to `0..=top` or `-top..=top`).
fn neighbours(v: f32, d: f32, lo: i32, top: i32) -> [i32; 2] {
    if d == 0.0 {
        return [0, 0];
    }
    let t = v / d;
    [
        (t.floor() as i32).clamp(lo, top),
        (t.ceil() as i32).clamp(lo, top),
    ]
}

/// Factors tried around each range-derived super-block scale (step 3 of the module docs).
const SUPER_SCALE_FACTORS: [f32; 7] = [0.94, 0.96, 0.98, 1.0, 1.02, 1.04, 1.06];

/// Q4_K/Q5_K: per sub-block `(sc, mn)` codes and the weights' levels in `0..=nmax`.
fn quantize_affine_k(x: &[f32], nmax: f32) -> (f16, f16, [u8; 8], [u8; 8], [u8; QK_K]) {
    let fits: [(f32, f32); 8] = std::array::from_fn(|j| {
        let (s, b) = search(&x[32 * j..32 * j + 32], 0.0, nmax, true);
        (s, -b)
    });
    let max_s = fits.iter().fold(0.0f32, |a, f| a.max(f.0));
    let max_m = fits.iter().fold(0.0f32, |a, f| a.max(f.1));
    // Each sub-block's best codes for super-scales (d, dmin), and their total error.
    let codes_for = |d: f32, dmin: f32| -> (f32, [(i32, i32); 8]) {
        let mut total = 0.0;
        let codes = std::array::from_fn(|j| {
            let xs = &x[32 * j..32 * j + 32];
            let mut best = (f32::INFINITY, 0, 0);
            for a in neighbours(fits[j].0, d, 0, 63) {
                for m in neighbours(fits[j].1, dmin, 0, 63) {
                    let e = affine_error(xs, d * a as f32, -(dmin * m as f32), 0.0, nmax);
                    if e < best.0 {
                        best = (e, a, m);
                    }
                }
            }
            total += best.0;
            (best.1, best.2)
        });
        (total, codes)
    };
    let mut best = (f32::INFINITY, f16::ZERO, f16::ZERO, [(0, 0); 8]);
    for fs in SUPER_SCALE_FACTORS {
        for fm in SUPER_SCALE_FACTORS {
            let d = f16::from_f32(max_s / 63.0 * fs);
            let dmin = f16::from_f32(max_m / 63.0 * fm);
            let (e, codes) = codes_for(d.to_f32(), dmin.to_f32());
            if e < best.0 {
                best = (e, d, dmin, codes);
            }
        }
    }
    let (_, d, dmin, codes) = best;
    let (df, dminf) = (d.to_f32(), dmin.to_f32());
    let mut q = [0u8; QK_K];
    for (j, &(a, m)) in codes.iter().enumerate() {
        let (s, b) = (df * a as f32, dminf * m as f32);
        let is = if s == 0.0 { 0.0 } else { 1.0 / s };
        for (o, &v) in q[32 * j..32 * j + 32].iter_mut().zip(&x[32 * j..]) {
            *o = ((v + b) * is).round().clamp(0.0, nmax) as u8;
        }
    }
    let sc = codes.map(|c| c.0 as u8);
    let mn = codes.map(|c| c.1 as u8);
    (d, dmin, sc, mn, q)
}

/// Packs eight 6-bit scales and mins as `crate::dequant::scale_min` unpacks them.
fn pack_scales(sc: &[u8; 8], mn: &[u8; 8]) -> [u8; 12] {
    let mut p = [0u8; 12];
    for j in 0..4 {
        p[j] = sc[j] | ((sc[j + 4] >> 4) << 6);
        p[j + 4] = mn[j] | ((mn[j + 4] >> 4) << 6);
        p[j + 8] = (sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4);
    }
    p
}

/// Sub-blocks `2c`, `2c + 1` as the low and high nibbles of `qs[32c..32c + 32]`.
fn pack_k_nibbles(q: &[u8; QK_K]) -> [u8; 128] {
    std::array::from_fn(|i| {
        let (c, l) = (i / 32, i % 32);
        (q[64 * c + l] & 15) | ((q[64 * c + 32 + l] & 15) << 4)
    })
}

impl Quantize for BlockQ4K {
    fn quantize_block(x: &[f32]) -> Self {
        let (d, dmin, sc, mn, q) = quantize_affine_k(x, 15.0);
        BlockQ4K {
            d,
            dmin,
            scales: pack_scales(&sc, &mn),
            qs: pack_k_nibbles(&q),
        }
    }
}

impl Quantize for BlockQ5K {
    fn quantize_block(x: &[f32]) -> Self {
        let (d, dmin, sc, mn, q) = quantize_affine_k(x, 31.0);
        let qh = std::array::from_fn(|l| (0..8).fold(0u8, |h, j| h | ((q[32 * j + l] >> 4) << j)));
        BlockQ5K {
            d,
            dmin,
            scales: pack_scales(&sc, &mn),
            qh,
            qs: pack_k_nibbles(&q),
        }
    }
}

impl Quantize for BlockQ6K {
    fn quantize_block(x: &[f32]) -> Self {
        let fits: [f32; 16] =
            std::array::from_fn(|g| search(&x[16 * g..16 * g + 16], -32.0, 31.0, false).0);
        let (mut max_s, mut max_abs) = (0.0f32, 0.0f32);
        for &f in &fits {
            if f.abs() > max_abs {
                (max_s, max_abs) = (f, f.abs());
            }
        }
        // The largest scale maps to code -128 when negative (the int8 range is one longer
        // on that side), else to 127; then factors around that.
        let base = if max_s < 0.0 {
            max_abs / 128.0
        } else {
            max_abs / 127.0
        };
        let codes_for = |d: f32| -> (f32, [i32; 16]) {
            let mut total = 0.0;
            let codes = std::array::from_fn(|g| {
                let xs = &x[16 * g..16 * g + 16];
                let mut best = (f32::INFINITY, 0);
                for c in neighbours(fits[g], d, -128, 127) {
                    let e = affine_error(xs, d * c as f32, 0.0, -32.0, 31.0);
                    if e < best.0 {
                        best = (e, c);
                    }
                }
                total += best.0;
                best.1
            });
            (total, codes)
        };
        let mut best = (f32::INFINITY, f16::ZERO, [0; 16]);
        for f in SUPER_SCALE_FACTORS {
            let d = f16::from_f32(base * f);
            let (e, codes) = codes_for(d.to_f32());
            if e < best.0 {
                best = (e, d, codes);
            }
        }
        let (_, d, codes) = best;
        let df = d.to_f32();
        let mut q = [0u8; QK_K];
        for (g, &c) in codes.iter().enumerate() {
            let s = df * c as f32;
            let is = if s == 0.0 { 0.0 } else { 1.0 / s };
            for (o, &v) in q[16 * g..16 * g + 16].iter_mut().zip(&x[16 * g..]) {
                *o = ((v * is).round().clamp(-32.0, 31.0) + 32.0) as u8;
            }
        }
        let mut ql = [0u8; 128];
        let mut qh = [0u8; 64];
        for (i, &v) in q.iter().enumerate() {
            let (h, k, l) = (i / 128, (i % 128) / 32, i % 32);
            ql[64 * h + 32 * (k % 2) + l] |= (v & 15) << (4 * (k / 2));
            qh[32 * h + l] |= (v >> 4) << (2 * k);
        }
        BlockQ6K {
            ql,
            qh,
            scales: codes.map(|c| c as i8),
            d,
        }
    }
}
