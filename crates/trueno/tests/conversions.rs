//! f16 / bf16 conversion on every backend against the `half` crate (an independent
//! implementation): every one of the 65536 half-precision bit patterns widened, and f32
//! inputs covering every rounding case narrowed, at ragged lengths.

mod common;

use common::*;
use half::{bf16, f16};

fn same(a: f32, b: f32) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

#[test]
fn widening_every_bit_pattern_matches_half() {
    let all: Vec<u16> = (0..=u16::MAX).collect();
    for (backend, e) in engines() {
        for offset in [0, 1] {
            let src = &all[offset..];
            let mut out = vec![0.0f32; src.len()];
            e.f16_to_f32(src, &mut out).unwrap();
            for (&h, &v) in src.iter().zip(&out) {
                assert!(
                    same(v, f16::from_bits(h).to_f32()),
                    "f16 {h:#06x} on {backend}: {v:e}"
                );
            }
            e.bf16_to_f32(src, &mut out).unwrap();
            for (&h, &v) in src.iter().zip(&out) {
                assert!(
                    same(v, bf16::from_bits(h).to_f32()),
                    "bf16 {h:#06x} on {backend}: {v:e}"
                );
            }
        }
    }
}

/// f32 inputs that exercise rounding: every f16/bf16 value, the midpoints between
/// neighbours (ties to even), a bit either side of them, overflow, underflow, NaN.
fn narrowing_inputs() -> Vec<f32> {
    let mut v = Vec::new();
    for h in (0..=u16::MAX).step_by(7) {
        for x in [f16::from_bits(h).to_f32(), bf16::from_bits(h).to_f32()] {
            let b = x.to_bits();
            for d in [0u32, 1, 0x0fff, 0x1000, 0x1001, 0x7fff, 0x8000, 0x8001] {
                v.push(f32::from_bits(b.wrapping_add(d)));
            }
        }
    }
    v.extend([
        65504.0,
        65519.0,
        65520.0,
        1e6,
        -1e6,
        5.96e-8,
        2.98e-8,
        1e-10,
        f32::MAX,
        f32::NAN,
        -f32::NAN,
        f32::INFINITY,
    ]);
    v
}

#[test]
fn narrowing_matches_half_round_to_nearest_even() {
    let x = narrowing_inputs();
    for (backend, e) in engines() {
        for n in [x.len(), x.len() - 1, 17, 5, 1, 0] {
            let src = &x[..n];
            let mut out = vec![0u16; n];
            e.f32_to_f16(src, &mut out).unwrap();
            for (&v, &h) in src.iter().zip(&out) {
                let want = f16::from_f32(v);
                assert!(
                    h == want.to_bits() || (v.is_nan() && f16::from_bits(h).is_nan()),
                    "f32 {v:e} ({:#010x}) -> f16 on {backend}: {h:#06x}, want {:#06x}",
                    v.to_bits(),
                    want.to_bits()
                );
            }
            e.f32_to_bf16(src, &mut out).unwrap();
            for (&v, &h) in src.iter().zip(&out) {
                let want = bf16::from_f32(v);
                assert!(
                    h == want.to_bits() || (v.is_nan() && bf16::from_bits(h).is_nan()),
                    "f32 {v:e} -> bf16 on {backend}: {h:#06x}, want {:#06x}",
                    want.to_bits()
                );
            }
        }
    }
}

#[test]
fn conversion_length_mismatch_is_an_error() {
    let e = trueno::engine().unwrap();
    assert!(e.f16_to_f32(&[0; 3], &mut [0.0; 2]).is_err());
    assert!(e.f32_to_bf16(&[0.0; 3], &mut [0; 4]).is_err());
}
