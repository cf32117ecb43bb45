//! SSE2: 4 f32 lanes, the x86-64 baseline. No FMA, no rounding instruction, no F16C.

use std::arch::x86_64::*;

use super::Simd;
use super::lanewise::lanewise_f16_methods;
use crate::backend::Backend;

/// Token proving SSE2 (always true on x86-64, kept for uniformity).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sse2(());

impl Sse2 {
    /// The token, if the CPU has SSE2.
    pub(crate) fn detect() -> Option<Self> {
        std::arch::is_x86_feature_detected!("sse2").then_some(Sse2(()))
    }
}

/// Evaluates SSE2 intrinsics.
macro_rules! sse2 {
    ($e:expr) => {{
        // SAFETY: an `Sse2` token exists only after `Sse2::detect` saw SSE2 on this CPU, and
        // every pointer passed is taken from a slice already sliced to LANES elements.
        unsafe { $e }
    }};
}

impl Simd for Sse2 {
    const BACKEND: Backend = Backend::Sse2;
    const LANES: usize = 4;
    type V = __m128;
    type M = __m128;
    super::outlined_with_features!(Sse2, "sse2");

    #[inline(always)]
    fn splat(self, x: f32) -> __m128 {
        sse2!(_mm_set1_ps(x))
    }
    #[inline(always)]
    fn load(self, src: &[f32]) -> __m128 {
        let src = &src[..4];
        sse2!(_mm_loadu_ps(src.as_ptr()))
    }
    #[inline(always)]
    fn store(self, v: __m128, dst: &mut [f32]) {
        let dst = &mut dst[..4];
        sse2!(_mm_storeu_ps(dst.as_mut_ptr(), v))
    }
    #[inline(always)]
    fn add(self, a: __m128, b: __m128) -> __m128 {
        sse2!(_mm_add_ps(a, b))
    }
    #[inline(always)]
    fn sub(self, a: __m128, b: __m128) -> __m128 {
        sse2!(_mm_sub_ps(a, b))
    }
    #[inline(always)]
    fn mul(self, a: __m128, b: __m128) -> __m128 {
        sse2!(_mm_mul_ps(a, b))
    }
    #[inline(always)]
    fn div(self, a: __m128, b: __m128) -> __m128 {
        sse2!(_mm_div_ps(a, b))
    }
    #[inline(always)]
    fn fma(self, a: __m128, b: __m128, c: __m128) -> __m128 {
        sse2!(_mm_add_ps(_mm_mul_ps(a, b), c))
    }
    #[inline(always)]
    fn max(self, a: __m128, b: __m128) -> __m128 {
        sse2!(_mm_max_ps(a, b))
    }
    #[inline(always)]
    fn min(self, a: __m128, b: __m128) -> __m128 {
        sse2!(_mm_min_ps(a, b))
    }
    #[inline(always)]
    fn abs(self, a: __m128) -> __m128 {
        sse2!(_mm_andnot_ps(_mm_set1_ps(-0.0), a))
    }
    #[inline(always)]
    fn neg(self, a: __m128) -> __m128 {
        sse2!(_mm_xor_ps(_mm_set1_ps(-0.0), a))
    }
    #[inline(always)]
    fn sqrt(self, a: __m128) -> __m128 {
        sse2!(_mm_sqrt_ps(a))
    }
    #[inline(always)]
    fn round(self, a: __m128) -> __m128 {
        // cvtps rounds half to even (MXCSR default); values >= 2^23 are already integral
        // and would overflow the i32 round trip, so they pass through.
        sse2!({
            let r = _mm_cvtepi32_ps(_mm_cvtps_epi32(a));
            let small = _mm_cmplt_ps(self.abs(a), _mm_set1_ps(8_388_608.0));
            self.select(small, r, a)
        })
    }
    #[inline(always)]
    fn copysign(self, mag: __m128, sign: __m128) -> __m128 {
        sse2!({
            let s = _mm_set1_ps(-0.0);
            _mm_or_ps(_mm_andnot_ps(s, mag), _mm_and_ps(s, sign))
        })
    }
    #[inline(always)]
    fn lt(self, a: __m128, b: __m128) -> __m128 {
        sse2!(_mm_cmplt_ps(a, b))
    }
    #[inline(always)]
    fn le(self, a: __m128, b: __m128) -> __m128 {
        sse2!(_mm_cmple_ps(a, b))
    }
    #[inline(always)]
    fn eq(self, a: __m128, b: __m128) -> __m128 {
        sse2!(_mm_cmpeq_ps(a, b))
    }
    #[inline(always)]
    fn is_nan(self, a: __m128) -> __m128 {
        sse2!(_mm_cmpunord_ps(a, a))
    }
    #[inline(always)]
    fn mask_or(self, a: __m128, b: __m128) -> __m128 {
        sse2!(_mm_or_ps(a, b))
    }
    #[inline(always)]
    fn any(self, m: __m128) -> bool {
        sse2!(_mm_movemask_ps(m) != 0)
    }
    #[inline(always)]
    fn select(self, m: __m128, a: __m128, b: __m128) -> __m128 {
        sse2!(_mm_or_ps(_mm_and_ps(m, a), _mm_andnot_ps(m, b)))
    }
    #[inline(always)]
    fn pow2i(self, n: __m128) -> __m128 {
        sse2!({
            let e = _mm_add_epi32(_mm_cvtps_epi32(n), _mm_set1_epi32(127));
            _mm_castsi128_ps(_mm_slli_epi32::<23>(e))
        })
    }
    #[inline(always)]
    fn frexp(self, x: __m128) -> (__m128, __m128) {
        sse2!({
            let bits = _mm_castps_si128(x);
            let e = _mm_sub_epi32(_mm_srli_epi32::<23>(bits), _mm_set1_epi32(127));
            let m = _mm_or_si128(
                _mm_and_si128(bits, _mm_set1_epi32(0x007f_ffff)),
                _mm_set1_epi32(0x3f80_0000),
            );
            (_mm_castsi128_ps(m), _mm_cvtepi32_ps(e))
        })
    }
    #[inline(always)]
    fn reduce_add(self, v: __m128) -> f32 {
        sse2!({
            let s = _mm_add_ps(v, _mm_movehl_ps(v, v));
            _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps::<0b01>(s, s)))
        })
    }
    #[inline(always)]
    fn reduce_max(self, v: __m128) -> f32 {
        sse2!({
            let s = _mm_max_ps(v, _mm_movehl_ps(v, v));
            _mm_cvtss_f32(_mm_max_ss(s, _mm_shuffle_ps::<0b01>(s, s)))
        })
    }
    #[inline(always)]
    fn reduce_min(self, v: __m128) -> f32 {
        sse2!({
            let s = _mm_min_ps(v, _mm_movehl_ps(v, v));
            _mm_cvtss_f32(_mm_min_ss(s, _mm_shuffle_ps::<0b01>(s, s)))
        })
    }

    lanewise_f16_methods!();

    #[inline(always)]
    fn load_bf16(self, src: &[u16]) -> __m128 {
        let src = &src[..4];
        sse2!(widen_bf16x4(_mm_loadl_epi64(src.as_ptr().cast())))
    }
    #[inline(always)]
    fn store_bf16(self, v: __m128, dst: &mut [u16]) {
        let dst = &mut dst[..4];
        sse2!(_mm_storel_epi64(dst.as_mut_ptr().cast(), narrow_bf16x4(v)))
    }
}

/// Four bfloat16 values (the low 64 bits of `h`) widened to f32: each becomes the top half
/// of its lane. Shared with AVX, whose 256-bit narrowing runs these on each half.
#[inline]
#[target_feature(enable = "sse2")]
pub(crate) fn widen_bf16x4(h: __m128i) -> __m128 {
    _mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), h))
}

/// Four f32 narrowed to bfloat16 (round to nearest even, NaN kept quiet), packed in the low
/// 64 bits of the result.
#[inline]
#[target_feature(enable = "sse2")]
pub(crate) fn narrow_bf16x4(v: __m128) -> __m128i {
    let bits = _mm_castps_si128(v);
    let lsb = _mm_and_si128(_mm_srli_epi32::<16>(bits), _mm_set1_epi32(1));
    let rounded = _mm_add_epi32(bits, _mm_add_epi32(lsb, _mm_set1_epi32(0x7fff)));
    let quiet_nan = _mm_or_si128(bits, _mm_set1_epi32(0x0040_0000));
    let nan = _mm_castps_si128(_mm_cmpunord_ps(v, v));
    let r = _mm_or_si128(
        _mm_and_si128(nan, quiet_nan),
        _mm_andnot_si128(nan, rounded),
    );
    // The arithmetic shift leaves each top half sign-extended, inside i16, so the signed
    // saturating pack (SSE2 has no unsigned one) keeps its bit pattern exactly.
    let r = _mm_srai_epi32::<16>(r);
    _mm_packs_epi32(r, r)
}
