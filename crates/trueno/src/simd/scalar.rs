//! The scalar "ISA": one lane, plain Rust. It runs the same op bodies as the SIMD backends,
//! so it is both the portable fallback and the baseline the others are compared with.

use super::{Simd, half_bits};
use crate::backend::Backend;

/// Token for the scalar backend (always available).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Scalar;

impl Simd for Scalar {
    const BACKEND: Backend = Backend::Scalar;
    const LANES: usize = 1;
    type V = f32;
    type M = bool;

    #[inline(always)]
    fn splat(self, x: f32) -> f32 {
        x
    }
    #[inline(always)]
    fn load(self, src: &[f32]) -> f32 {
        src[0]
    }
    #[inline(always)]
    fn store(self, v: f32, dst: &mut [f32]) {
        dst[0] = v;
    }
    #[inline(always)]
    fn add(self, a: f32, b: f32) -> f32 {
        a + b
    }
    #[inline(always)]
    fn sub(self, a: f32, b: f32) -> f32 {
        a - b
    }
    #[inline(always)]
    fn mul(self, a: f32, b: f32) -> f32 {
        a * b
    }
    #[inline(always)]
    fn div(self, a: f32, b: f32) -> f32 {
        a / b
    }
    #[inline(always)]
    fn fma(self, a: f32, b: f32, c: f32) -> f32 {
        // Two roundings, as SSE2 does: the portable baseline must not call libm's fmaf.
        a * b + c
    }
    #[inline(always)]
    fn max(self, a: f32, b: f32) -> f32 {
        if a > b { a } else { b }
    }
    #[inline(always)]
    fn min(self, a: f32, b: f32) -> f32 {
        if a < b { a } else { b }
    }
    #[inline(always)]
    fn abs(self, a: f32) -> f32 {
        a.abs()
    }
    #[inline(always)]
    fn neg(self, a: f32) -> f32 {
        -a
    }
    #[inline(always)]
    fn sqrt(self, a: f32) -> f32 {
        a.sqrt()
    }
    #[inline(always)]
    fn round(self, a: f32) -> f32 {
        // Baseline x86-64 has no rounding instruction and `round_ties_even` becomes a libm
        // call; adding and removing 1.5 * 2^23 rounds half to even in the default mode.
        const MAGIC: f32 = 12_582_912.0;
        if a.abs() < 4_194_304.0 {
            (a + MAGIC) - MAGIC
        } else {
            a
        }
    }
    #[inline(always)]
    fn copysign(self, mag: f32, sign: f32) -> f32 {
        mag.copysign(sign)
    }
    #[inline(always)]
    fn lt(self, a: f32, b: f32) -> bool {
        a < b
    }
    #[inline(always)]
    fn le(self, a: f32, b: f32) -> bool {
        a <= b
    }
    #[inline(always)]
    fn eq(self, a: f32, b: f32) -> bool {
        a == b
    }
    #[inline(always)]
    fn is_nan(self, a: f32) -> bool {
        a.is_nan()
    }
    #[inline(always)]
    fn mask_or(self, a: bool, b: bool) -> bool {
        a | b
    }
    #[inline(always)]
    fn any(self, m: bool) -> bool {
        m
    }
    #[inline(always)]
    fn select(self, m: bool, a: f32, b: f32) -> f32 {
        if m { a } else { b }
    }
    #[inline(always)]
    fn pow2i(self, n: f32) -> f32 {
        f32::from_bits(((n as i32 + 127) as u32) << 23)
    }
    #[inline(always)]
    fn frexp(self, x: f32) -> (f32, f32) {
        let bits = x.to_bits();
        let e = ((bits >> 23) & 0xff) as i32 - 127;
        (f32::from_bits((bits & 0x007f_ffff) | 0x3f80_0000), e as f32)
    }
    #[inline(always)]
    fn reduce_add(self, v: f32) -> f32 {
        v
    }
    #[inline(always)]
    fn reduce_max(self, v: f32) -> f32 {
        v
    }
    #[inline(always)]
    fn reduce_min(self, v: f32) -> f32 {
        v
    }
    #[inline(always)]
    fn load_f16(self, src: &[u16]) -> f32 {
        half_bits::f16_to_f32(src[0])
    }
    #[inline(always)]
    fn store_f16(self, v: f32, dst: &mut [u16]) {
        dst[0] = half_bits::f32_to_f16(v);
    }
    #[inline(always)]
    fn load_bf16(self, src: &[u16]) -> f32 {
        half_bits::bf16_to_f32(src[0])
    }
    #[inline(always)]
    fn store_bf16(self, v: f32, dst: &mut [u16]) {
        dst[0] = half_bits::f32_to_bf16(v);
    }
}
