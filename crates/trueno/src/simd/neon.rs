//! AArch64 NEON (Advanced SIMD): 4 f32 lanes, fused multiply-add, round-to-nearest-even
//! and across-lane reductions. NEON is part of the AArch64 baseline, so the token always
//! exists there. f16 runs lane by lane: Rust's `float16x4_t` conversions are not stable.

use std::arch::aarch64::*;

use super::Simd;
use super::lanewise::lanewise_f16_methods;
use crate::backend::Backend;

/// Token proving NEON (every AArch64 CPU; checked anyway, for uniformity).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Neon(());

impl Neon {
    /// The token, if the CPU has NEON.
    pub(crate) fn detect() -> Option<Self> {
        std::arch::is_aarch64_feature_detected!("neon").then_some(Neon(()))
    }
}

/// Evaluates NEON intrinsics.
macro_rules! neon {
    ($e:expr) => {{
        // SAFETY: a `Neon` token exists only after `Neon::detect` saw NEON on this CPU, and
        // every pointer passed is taken from a slice already sliced to LANES elements.
        unsafe { $e }
    }};
}

impl Simd for Neon {
    const BACKEND: Backend = Backend::Neon;
    const LANES: usize = 4;
    type V = float32x4_t;
    type M = uint32x4_t;
    super::outlined_with_features!(Neon, "neon");

    #[inline(always)]
    fn splat(self, x: f32) -> float32x4_t {
        neon!(vdupq_n_f32(x))
    }
    #[inline(always)]
    fn load(self, src: &[f32]) -> float32x4_t {
        let src = &src[..4];
        neon!(vld1q_f32(src.as_ptr()))
    }
    #[inline(always)]
    fn store(self, v: float32x4_t, dst: &mut [f32]) {
        let dst = &mut dst[..4];
        neon!(vst1q_f32(dst.as_mut_ptr(), v))
    }
    #[inline(always)]
    fn add(self, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        neon!(vaddq_f32(a, b))
    }
    #[inline(always)]
    fn sub(self, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        neon!(vsubq_f32(a, b))
    }
    #[inline(always)]
    fn mul(self, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        neon!(vmulq_f32(a, b))
    }
    #[inline(always)]
    fn div(self, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        neon!(vdivq_f32(a, b))
    }
    #[inline(always)]
    fn fma(self, a: float32x4_t, b: float32x4_t, c: float32x4_t) -> float32x4_t {
        neon!(vfmaq_f32(c, a, b))
    }
    #[inline(always)]
    fn max(self, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        neon!(vmaxq_f32(a, b))
    }
    #[inline(always)]
    fn min(self, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        neon!(vminq_f32(a, b))
    }
    #[inline(always)]
    fn abs(self, a: float32x4_t) -> float32x4_t {
        neon!(vabsq_f32(a))
    }
    #[inline(always)]
    fn neg(self, a: float32x4_t) -> float32x4_t {
        neon!(vnegq_f32(a))
    }
    #[inline(always)]
    fn sqrt(self, a: float32x4_t) -> float32x4_t {
        neon!(vsqrtq_f32(a))
    }
    #[inline(always)]
    fn round(self, a: float32x4_t) -> float32x4_t {
        // FRINTN: to nearest, ties to even, whatever the magnitude.
        neon!(vrndnq_f32(a))
    }
    #[inline(always)]
    fn copysign(self, mag: float32x4_t, sign: float32x4_t) -> float32x4_t {
        neon!(vbslq_f32(vdupq_n_u32(0x8000_0000), sign, mag))
    }
    #[inline(always)]
    fn lt(self, a: float32x4_t, b: float32x4_t) -> uint32x4_t {
        neon!(vcltq_f32(a, b))
    }
    #[inline(always)]
    fn le(self, a: float32x4_t, b: float32x4_t) -> uint32x4_t {
        neon!(vcleq_f32(a, b))
    }
    #[inline(always)]
    fn eq(self, a: float32x4_t, b: float32x4_t) -> uint32x4_t {
        neon!(vceqq_f32(a, b))
    }
    #[inline(always)]
    fn is_nan(self, a: float32x4_t) -> uint32x4_t {
        neon!(vmvnq_u32(vceqq_f32(a, a)))
    }
    #[inline(always)]
    fn mask_or(self, a: uint32x4_t, b: uint32x4_t) -> uint32x4_t {
        neon!(vorrq_u32(a, b))
    }
    #[inline(always)]
    fn any(self, m: uint32x4_t) -> bool {
        neon!(vmaxvq_u32(m) != 0)
    }
    #[inline(always)]
    fn select(self, m: uint32x4_t, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        neon!(vbslq_f32(m, a, b))
    }
    #[inline(always)]
    fn pow2i(self, n: float32x4_t) -> float32x4_t {
        neon!({
            let e = vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127));
            vreinterpretq_f32_s32(vshlq_n_s32::<23>(e))
        })
    }
    #[inline(always)]
    fn frexp(self, x: float32x4_t) -> (float32x4_t, float32x4_t) {
        neon!({
            let bits = vreinterpretq_u32_f32(x);
            let e = vsubq_s32(
                vreinterpretq_s32_u32(vshrq_n_u32::<23>(bits)),
                vdupq_n_s32(127),
            );
            let m = vorrq_u32(
                vandq_u32(bits, vdupq_n_u32(0x007f_ffff)),
                vdupq_n_u32(0x3f80_0000),
            );
            (vreinterpretq_f32_u32(m), vcvtq_f32_s32(e))
        })
    }
    // Reductions pair lane i with lane i + 2, then the two sums: the SSE2 tree.
    #[inline(always)]
    fn reduce_add(self, v: float32x4_t) -> f32 {
        neon!({
            let s = vaddq_f32(v, vextq_f32::<2>(v, v));
            vgetq_lane_f32::<0>(s) + vgetq_lane_f32::<1>(s)
        })
    }
    #[inline(always)]
    fn reduce_max(self, v: float32x4_t) -> f32 {
        neon!({
            let s = vmaxq_f32(v, vextq_f32::<2>(v, v));
            vgetq_lane_f32::<0>(vmaxq_f32(s, vextq_f32::<1>(s, s)))
        })
    }
    #[inline(always)]
    fn reduce_min(self, v: float32x4_t) -> f32 {
        neon!({
            let s = vminq_f32(v, vextq_f32::<2>(v, v));
            vgetq_lane_f32::<0>(vminq_f32(s, vextq_f32::<1>(s, s)))
        })
    }

    lanewise_f16_methods!();

    #[inline(always)]
    fn load_bf16(self, src: &[u16]) -> float32x4_t {
        let src = &src[..4];
        neon!(vreinterpretq_f32_u32(vshll_n_u16::<16>(vld1_u16(
            src.as_ptr()
        ))))
    }
    #[inline(always)]
    fn store_bf16(self, v: float32x4_t, dst: &mut [u16]) {
        let dst = &mut dst[..4];
        neon!({
            let bits = vreinterpretq_u32_f32(v);
            let lsb = vandq_u32(vshrq_n_u32::<16>(bits), vdupq_n_u32(1));
            let rounded = vaddq_u32(bits, vaddq_u32(lsb, vdupq_n_u32(0x7fff)));
            let quiet_nan = vorrq_u32(bits, vdupq_n_u32(0x0040_0000));
            let r = vbslq_u32(self.is_nan(v), quiet_nan, rounded);
            vst1_u16(dst.as_mut_ptr(), vshrn_n_u32::<16>(r))
        })
    }
}
