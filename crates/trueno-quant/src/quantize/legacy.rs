//! The one-scale formats, computed exactly as the reference does (same f32 operations in
//! the same order, truncation where it truncates) so the bytes match GGML's: Q4_0, Q4_1,
//! Q5_0, Q5_1, Q8_0; plus Q8_K and NF4.

use half::f16;

use super::Quantize;
use crate::blocks::*;

/// The signed value of largest magnitude (the first, on ties) and that magnitude.
fn signed_absmax(x: &[f32]) -> (f32, f32) {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    (max, amax)
}

fn min_max(x: &[f32]) -> (f32, f32) {
    x.iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        })
}

fn inverse(d: f32) -> f32 {
    if d == 0.0 { 0.0 } else { 1.0 / d }
}

/// Packs 32 quants below 16 as GGML's nibble pairs: `l` low, `l + 16` high.
fn nibbles(q: &[u8; 32]) -> [u8; 16] {
    std::array::from_fn(|l| (q[l] & 15) | (q[l + 16] << 4))
}

/// Bit 4 of each of 32 quants, as GGML's little-endian `qh`.
fn fifth_bits(q: &[u8; 32]) -> [u8; 4] {
    let h = q
        .iter()
        .enumerate()
        .fold(0u32, |h, (l, &v)| h | (((v >> 4) & 1) as u32) << l);
    h.to_le_bytes()
}

/// Symmetric `q = trunc(x / d + offset)`, clipped to `0..=top`, with `d = max / -offset`
/// (Q4_0: offset 8, Q5_0: 16).
fn symmetric(x: &[f32], offset: f32, top: u8) -> (f16, [u8; 32]) {
    let (max, _) = signed_absmax(x);
    let d = max / -offset;
    let id = inverse(d);
    let q = std::array::from_fn(|l| ((x[l] * id + (offset + 0.5)) as u8).min(top));
    (f16::from_f32(d), q)
}

/// Affine `q = trunc((x - min) / d + 0.5)`, clipped to `0..=top`, `d = (max - min) / top`.
fn affine(x: &[f32], top: u8) -> (f16, f16, [u8; 32]) {
    let (min, max) = min_max(x);
    let d = (max - min) / top as f32;
    let id = inverse(d);
    let q = std::array::from_fn(|l| (((x[l] - min) * id + 0.5) as u8).min(top));
    (f16::from_f32(d), f16::from_f32(min), q)
}

impl Quantize for BlockQ4_0 {
    fn quantize_block(x: &[f32]) -> Self {
        let (d, q) = symmetric(x, 8.0, 15);
        BlockQ4_0 { d, qs: nibbles(&q) }
    }
}

impl Quantize for BlockQ4_1 {
    fn quantize_block(x: &[f32]) -> Self {
        let (d, m, q) = affine(x, 15);
        BlockQ4_1 {
            d,
            m,
            qs: nibbles(&q),
        }
    }
}

impl Quantize for BlockQ5_0 {
    fn quantize_block(x: &[f32]) -> Self {
        let (d, q) = symmetric(x, 16.0, 31);
        BlockQ5_0 {
            d,
            qh: fifth_bits(&q),
            qs: nibbles(&q),
        }
    }
}

impl Quantize for BlockQ5_1 {
    fn quantize_block(x: &[f32]) -> Self {
        let (d, m, q) = affine(x, 31);
        BlockQ5_1 {
            d,
            m,
            qh: fifth_bits(&q),
            qs: nibbles(&q),
        }
    }
}

impl Quantize for BlockQ8_0 {
    fn quantize_block(x: &[f32]) -> Self {
        let (_, amax) = signed_absmax(x);
        let d = amax / 127.0;
        let id = inverse(d);
        // Round half away from zero, as C's roundf.
        BlockQ8_0 {
            d: f16::from_f32(d),
            qs: std::array::from_fn(|l| (x[l] * id).round() as i8),
        }
    }
}

impl Quantize for BlockQ8K {
    /// The largest magnitude maps to -128 (its sign flipped through the scale), so the
    /// whole int8 range is used; rounding is to nearest, ties to even.
    fn quantize_block(x: &[f32]) -> Self {
        let (max, amax) = signed_absmax(x);
        if amax == 0.0 {
            return BlockQ8K {
                d: 0.0,
                qs: [0; QK_K],
                bsums: [0; 16],
            };
        }
        let iscale = -128.0 / max;
        let qs: [i8; QK_K] =
            std::array::from_fn(|l| (iscale * x[l]).round_ties_even().min(127.0) as i8);
        let bsums =
            std::array::from_fn(|g| qs[16 * g..16 * g + 16].iter().map(|&q| q as i16).sum());
        BlockQ8K {
            d: 1.0 / iscale,
            qs,
            bsums,
        }
    }
}

impl Quantize for BlockNf4 {
    /// Each weight, divided by the block's absmax, goes to the nearest NF4 level.
    fn quantize_block(x: &[f32]) -> Self {
        let (_, absmax) = signed_absmax(x);
        let id = inverse(absmax);
        let code = |v: f32| {
            let t = v * id;
            // Levels are sorted: the first midpoint above t ends the search.
            (0..15)
                .find(|&i| t < 0.5 * (NF4_LEVELS[i] + NF4_LEVELS[i + 1]))
                .unwrap_or(15) as u8
        };
        BlockNf4 {
            absmax,
            qs: std::array::from_fn(|l| code(x[l]) | (code(x[l + 32]) << 4)),
        }
    }
}
