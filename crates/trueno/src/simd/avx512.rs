//! AVX-512F: 16 f32 lanes, mask registers, hardware exponent/mantissa extraction and f16
//! conversion. Only AVX-512F is required, so the token also covers Knights Landing-era parts.

use std::arch::x86_64::*;

use super::Simd;
use crate::backend::Backend;

/// Token proving AVX-512F.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx512(());

impl Avx512 {
    /// The token, if the CPU (and OS) support AVX-512F.
    pub(crate) fn detect() -> Option<Self> {
        std::arch::is_x86_feature_detected!("avx512f").then_some(Avx512(()))
    }
}

/// Evaluates AVX-512F intrinsics.
macro_rules! avx512 {
    ($e:expr) => {{
        // SAFETY: an `Avx512` token exists only after `Avx512::detect` saw AVX-512F on this
        // CPU, and every pointer passed comes from a slice already sliced to LANES elements.
        unsafe { $e }
    }};
}

const SIGN: i32 = i32::MIN;

impl Simd for Avx512 {
    const BACKEND: Backend = Backend::Avx512;
    const LANES: usize = 16;
    const MASKED_TAIL: bool = true;
    type V = __m512;
    type M = __mmask16;
    super::outlined_with_features!(Avx512, "avx512f,avx2,fma,f16c");

    #[inline(always)]
    fn splat(self, x: f32) -> __m512 {
        avx512!(_mm512_set1_ps(x))
    }
    #[inline(always)]
    fn load(self, src: &[f32]) -> __m512 {
        let src = &src[..16];
        avx512!(_mm512_loadu_ps(src.as_ptr()))
    }
    #[inline(always)]
    fn store(self, v: __m512, dst: &mut [f32]) {
        let dst = &mut dst[..16];
        avx512!(_mm512_storeu_ps(dst.as_mut_ptr(), v))
    }
    #[inline(always)]
    fn load_partial(self, src: &[f32], pad: f32) -> __m512 {
        let n = src.len().min(16);
        let mask = ((1u32 << n) - 1) as __mmask16;
        // Masked-off lanes are neither read nor able to fault.
        avx512!(_mm512_mask_loadu_ps(
            _mm512_set1_ps(pad),
            mask,
            src.as_ptr()
        ))
    }
    #[inline(always)]
    fn store_partial(self, v: __m512, dst: &mut [f32]) {
        let n = dst.len().min(16);
        let mask = ((1u32 << n) - 1) as __mmask16;
        avx512!(_mm512_mask_storeu_ps(dst.as_mut_ptr(), mask, v))
    }
    #[inline(always)]
    fn add(self, a: __m512, b: __m512) -> __m512 {
        avx512!(_mm512_add_ps(a, b))
    }
    #[inline(always)]
    fn sub(self, a: __m512, b: __m512) -> __m512 {
        avx512!(_mm512_sub_ps(a, b))
    }
    #[inline(always)]
    fn mul(self, a: __m512, b: __m512) -> __m512 {
        avx512!(_mm512_mul_ps(a, b))
    }
    #[inline(always)]
    fn div(self, a: __m512, b: __m512) -> __m512 {
        avx512!(_mm512_div_ps(a, b))
    }
    #[inline(always)]
    fn fma(self, a: __m512, b: __m512, c: __m512) -> __m512 {
        avx512!(_mm512_fmadd_ps(a, b, c))
    }
    #[inline(always)]
    fn max(self, a: __m512, b: __m512) -> __m512 {
        avx512!(_mm512_max_ps(a, b))
    }
    #[inline(always)]
    fn min(self, a: __m512, b: __m512) -> __m512 {
        avx512!(_mm512_min_ps(a, b))
    }
    #[inline(always)]
    fn abs(self, a: __m512) -> __m512 {
        avx512!(_mm512_abs_ps(a))
    }
    #[inline(always)]
    fn neg(self, a: __m512) -> __m512 {
        avx512!(_mm512_castsi512_ps(_mm512_xor_si512(
            _mm512_castps_si512(a),
            _mm512_set1_epi32(SIGN)
        )))
    }
    #[inline(always)]
    fn sqrt(self, a: __m512) -> __m512 {
        avx512!(_mm512_sqrt_ps(a))
    }
    #[inline(always)]
    fn round(self, a: __m512) -> __m512 {
        avx512!(_mm512_roundscale_ps::<
            { _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC },
        >(a))
    }
    #[inline(always)]
    fn copysign(self, mag: __m512, sign: __m512) -> __m512 {
        // ternarylogic 0xE4 = (C & A) | (!C & B) with C = sign mask: bitwise select.
        avx512!(_mm512_castsi512_ps(_mm512_ternarylogic_epi32::<0xE4>(
            _mm512_castps_si512(sign),
            _mm512_castps_si512(mag),
            _mm512_set1_epi32(SIGN)
        )))
    }
    #[inline(always)]
    fn lt(self, a: __m512, b: __m512) -> __mmask16 {
        avx512!(_mm512_cmp_ps_mask::<_CMP_LT_OQ>(a, b))
    }
    #[inline(always)]
    fn le(self, a: __m512, b: __m512) -> __mmask16 {
        avx512!(_mm512_cmp_ps_mask::<_CMP_LE_OQ>(a, b))
    }
    #[inline(always)]
    fn eq(self, a: __m512, b: __m512) -> __mmask16 {
        avx512!(_mm512_cmp_ps_mask::<_CMP_EQ_OQ>(a, b))
    }
    #[inline(always)]
    fn is_nan(self, a: __m512) -> __mmask16 {
        avx512!(_mm512_cmp_ps_mask::<_CMP_UNORD_Q>(a, a))
    }
    #[inline(always)]
    fn mask_or(self, a: __mmask16, b: __mmask16) -> __mmask16 {
        a | b
    }
    #[inline(always)]
    fn any(self, m: __mmask16) -> bool {
        m != 0
    }
    #[inline(always)]
    fn select(self, m: __mmask16, a: __m512, b: __m512) -> __m512 {
        avx512!(_mm512_mask_blend_ps(m, b, a))
    }
    #[inline(always)]
    fn pow2i(self, n: __m512) -> __m512 {
        avx512!({
            let e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
            _mm512_castsi512_ps(_mm512_slli_epi32::<23>(e))
        })
    }
    #[inline(always)]
    fn frexp(self, x: __m512) -> (__m512, __m512) {
        avx512!((
            _mm512_getmant_ps::<_MM_MANT_NORM_1_2, _MM_MANT_SIGN_ZERO>(x),
            _mm512_getexp_ps(x)
        ))
    }
    #[inline(always)]
    fn reduce_add(self, v: __m512) -> f32 {
        avx512!(_mm512_reduce_add_ps(v))
    }
    #[inline(always)]
    fn reduce_max(self, v: __m512) -> f32 {
        avx512!(_mm512_reduce_max_ps(v))
    }
    #[inline(always)]
    fn reduce_min(self, v: __m512) -> f32 {
        avx512!(_mm512_reduce_min_ps(v))
    }
    #[inline(always)]
    fn load_f16(self, src: &[u16]) -> __m512 {
        let src = &src[..16];
        avx512!(_mm512_cvtph_ps(_mm256_loadu_si256(src.as_ptr().cast())))
    }
    #[inline(always)]
    fn store_f16(self, v: __m512, dst: &mut [u16]) {
        let dst = &mut dst[..16];
        avx512!(_mm256_storeu_si256(
            dst.as_mut_ptr().cast(),
            _mm512_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(v)
        ))
    }
    #[inline(always)]
    fn load_bf16(self, src: &[u16]) -> __m512 {
        let src = &src[..16];
        avx512!({
            let h = _mm512_cvtepu16_epi32(_mm256_loadu_si256(src.as_ptr().cast()));
            _mm512_castsi512_ps(_mm512_slli_epi32::<16>(h))
        })
    }
    #[inline(always)]
    fn store_bf16(self, v: __m512, dst: &mut [u16]) {
        let dst = &mut dst[..16];
        avx512!({
            let bits = _mm512_castps_si512(v);
            let lsb = _mm512_and_si512(_mm512_srli_epi32::<16>(bits), _mm512_set1_epi32(1));
            let rounded = _mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
            let quiet_nan = _mm512_or_si512(bits, _mm512_set1_epi32(0x0040_0000));
            let r = _mm512_mask_blend_epi32(self.is_nan(v), rounded, quiet_nan);
            _mm256_storeu_si256(
                dst.as_mut_ptr().cast(),
                _mm512_cvtepi32_epi16(_mm512_srli_epi32::<16>(r)),
            )
        })
    }
}
