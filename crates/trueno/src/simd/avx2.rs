//! AVX2 + FMA + F16C: 8 f32 lanes with fused multiply-add, 256-bit integer operations and
//! hardware f16 conversion.

use std::arch::x86_64::*;

use super::Simd;
use super::avx::{avx256, avx256_common_methods};
use crate::backend::Backend;

/// Token proving AVX2, FMA and F16C.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx2(());

impl Avx2 {
    /// The token, if the CPU has AVX2, FMA and F16C.
    pub(crate) fn detect() -> Option<Self> {
        (std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c"))
        .then_some(Avx2(()))
    }
}

/// Evaluates AVX2/FMA/F16C intrinsics.
macro_rules! avx2 {
    ($e:expr) => {{
        // SAFETY: an `Avx2` token exists only after `Avx2::detect` saw AVX2, FMA and F16C on
        // this CPU, and every pointer passed comes from a slice already sliced to LANES
        // elements.
        unsafe { $e }
    }};
}

impl Simd for Avx2 {
    const BACKEND: Backend = Backend::Avx2;
    const LANES: usize = 8;
    type V = __m256;
    type M = __m256;

    avx256_common_methods!();
    super::outlined_with_features!(Avx2, "avx2,fma,f16c");

    #[inline(always)]
    fn fma(self, a: __m256, b: __m256, c: __m256) -> __m256 {
        avx2!(_mm256_fmadd_ps(a, b, c))
    }
    #[inline(always)]
    fn pow2i(self, n: __m256) -> __m256 {
        avx2!({
            let e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
            _mm256_castsi256_ps(_mm256_slli_epi32::<23>(e))
        })
    }
    #[inline(always)]
    fn frexp(self, x: __m256) -> (__m256, __m256) {
        avx2!({
            let bits = _mm256_castps_si256(x);
            let e = _mm256_sub_epi32(_mm256_srli_epi32::<23>(bits), _mm256_set1_epi32(127));
            let m = _mm256_or_si256(
                _mm256_and_si256(bits, _mm256_set1_epi32(0x007f_ffff)),
                _mm256_set1_epi32(0x3f80_0000),
            );
            (_mm256_castsi256_ps(m), _mm256_cvtepi32_ps(e))
        })
    }
    #[inline(always)]
    fn load_f16(self, src: &[u16]) -> __m256 {
        let src = &src[..8];
        avx2!(_mm256_cvtph_ps(_mm_loadu_si128(src.as_ptr().cast())))
    }
    #[inline(always)]
    fn store_f16(self, v: __m256, dst: &mut [u16]) {
        let dst = &mut dst[..8];
        avx2!(_mm_storeu_si128(
            dst.as_mut_ptr().cast(),
            _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v)
        ))
    }
    #[inline(always)]
    fn load_bf16(self, src: &[u16]) -> __m256 {
        let src = &src[..8];
        avx2!({
            let h = _mm256_cvtepu16_epi32(_mm_loadu_si128(src.as_ptr().cast()));
            _mm256_castsi256_ps(_mm256_slli_epi32::<16>(h))
        })
    }
    #[inline(always)]
    fn store_bf16(self, v: __m256, dst: &mut [u16]) {
        let dst = &mut dst[..8];
        avx2!({
            let bits = _mm256_castps_si256(v);
            let lsb = _mm256_and_si256(_mm256_srli_epi32::<16>(bits), _mm256_set1_epi32(1));
            let rounded = _mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
            let quiet_nan = _mm256_or_si256(bits, _mm256_set1_epi32(0x0040_0000));
            let nan = _mm256_castps_si256(self.is_nan(v));
            let r = _mm256_srli_epi32::<16>(_mm256_blendv_epi8(rounded, quiet_nan, nan));
            let packed =
                _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256::<1>(r));
            _mm_storeu_si128(dst.as_mut_ptr().cast(), packed)
        })
    }
}
