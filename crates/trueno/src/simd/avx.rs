//! AVX: 8 f32 lanes without FMA and without 256-bit integer instructions (those come with
//! AVX2), so integer steps run on the two 128-bit halves. Also holds the methods AVX2 shares.

use std::arch::x86_64::*;

use super::Simd;
use super::lanewise::lanewise_f16_methods;
use super::sse2::{narrow_bf16x4, widen_bf16x4};
use crate::backend::Backend;

/// Token proving AVX.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx(());

impl Avx {
    /// The token, if the CPU (and OS) support AVX.
    pub(crate) fn detect() -> Option<Self> {
        std::arch::is_x86_feature_detected!("avx").then_some(Avx(()))
    }
}

/// Eight all-ones lanes then eight zero lanes: the eight read from `8 - len` are the
/// `vmaskmovps` mask of lanes `0..len`.
pub(crate) const TAIL_MASKS: [i32; 16] = [-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0];

/// The `Simd` methods every 256-bit float ISA implements the same way. Expanded inside the
/// `impl Simd` of a token whose existence proves at least AVX.
///
/// Partial (head/tail) vectors keep the trait's stack-copy default: `vmaskmovps` measured
/// slower here (a 1000-element AVX2 abs took 133 ns with masked moves, 88 ns without),
/// unlike AVX-512's masked moves, which `avx512.rs` uses. The GEMM tile edge's
/// `load_tail`, repeated each k step with one mask, is masked: copied through the stack,
/// the unpacked grid (`gemm::small`) ran 33^3 at 19.7-20.3 GFLOP/s and 100^3 at
/// 45.9-46.9; masked, at 58.3 and 87.2-87.5 (Zen 3 VM, one thread, alternated twice).
/// Its `store_tail`, once a tile row, keeps the copy: a masked store there ran 17^3 at
/// 31.7 GFLOP/s against 33.9 copied (33^3 57.0-57.9 against 58.3-59.3, 100^3 87.1-87.6
/// against 87.8-88.1; same VM, two rounds), and Zen 3's `vmaskmovps` stores cost more
/// than the scalar stores they replace elsewhere too (BENCHMARKS, session 68).
macro_rules! avx256_common_methods {
    () => {
        const MASKED_TAIL: bool = true;
        #[inline(always)]
        fn splat(self, x: f32) -> __m256 {
            avx256!(_mm256_set1_ps(x))
        }
        #[inline(always)]
        fn load(self, src: &[f32]) -> __m256 {
            let src = &src[..8];
            avx256!(_mm256_loadu_ps(src.as_ptr()))
        }
        #[inline(always)]
        fn store(self, v: __m256, dst: &mut [f32]) {
            let dst = &mut dst[..8];
            avx256!(_mm256_storeu_ps(dst.as_mut_ptr(), v))
        }
        #[inline(always)]
        fn load_tail(self, src: &[f32]) -> __m256 {
            let n = src.len().min(8);
            let lanes = &$crate::simd::avx::TAIL_MASKS[8 - n..16 - n];
            // SAFETY: the token proves AVX; `lanes` is eight i32; the masked load reads only
            // the lanes below `n`, inside `src` (lanes masked off are neither read nor able
            // to fault).
            unsafe { _mm256_maskload_ps(src.as_ptr(), _mm256_loadu_si256(lanes.as_ptr().cast())) }
        }
        #[inline(always)]
        fn add(self, a: __m256, b: __m256) -> __m256 {
            avx256!(_mm256_add_ps(a, b))
        }
        #[inline(always)]
        fn sub(self, a: __m256, b: __m256) -> __m256 {
            avx256!(_mm256_sub_ps(a, b))
        }
        #[inline(always)]
        fn mul(self, a: __m256, b: __m256) -> __m256 {
            avx256!(_mm256_mul_ps(a, b))
        }
        #[inline(always)]
        fn div(self, a: __m256, b: __m256) -> __m256 {
            avx256!(_mm256_div_ps(a, b))
        }
        #[inline(always)]
        fn max(self, a: __m256, b: __m256) -> __m256 {
            avx256!(_mm256_max_ps(a, b))
        }
        #[inline(always)]
        fn min(self, a: __m256, b: __m256) -> __m256 {
            avx256!(_mm256_min_ps(a, b))
        }
        #[inline(always)]
        fn abs(self, a: __m256) -> __m256 {
            avx256!(_mm256_andnot_ps(_mm256_set1_ps(-0.0), a))
        }
        #[inline(always)]
        fn neg(self, a: __m256) -> __m256 {
            avx256!(_mm256_xor_ps(_mm256_set1_ps(-0.0), a))
        }
        #[inline(always)]
        fn sqrt(self, a: __m256) -> __m256 {
            avx256!(_mm256_sqrt_ps(a))
        }
        #[inline(always)]
        fn round(self, a: __m256) -> __m256 {
            avx256!(_mm256_round_ps::<
                { _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC },
            >(a))
        }
        #[inline(always)]
        fn copysign(self, mag: __m256, sign: __m256) -> __m256 {
            avx256!({
                let s = _mm256_set1_ps(-0.0);
                _mm256_or_ps(_mm256_andnot_ps(s, mag), _mm256_and_ps(s, sign))
            })
        }
        #[inline(always)]
        fn lt(self, a: __m256, b: __m256) -> __m256 {
            avx256!(_mm256_cmp_ps::<_CMP_LT_OQ>(a, b))
        }
        #[inline(always)]
        fn le(self, a: __m256, b: __m256) -> __m256 {
            avx256!(_mm256_cmp_ps::<_CMP_LE_OQ>(a, b))
        }
        #[inline(always)]
        fn eq(self, a: __m256, b: __m256) -> __m256 {
            avx256!(_mm256_cmp_ps::<_CMP_EQ_OQ>(a, b))
        }
        #[inline(always)]
        fn is_nan(self, a: __m256) -> __m256 {
            avx256!(_mm256_cmp_ps::<_CMP_UNORD_Q>(a, a))
        }
        #[inline(always)]
        fn mask_or(self, a: __m256, b: __m256) -> __m256 {
            avx256!(_mm256_or_ps(a, b))
        }
        #[inline(always)]
        fn any(self, m: __m256) -> bool {
            avx256!(_mm256_movemask_ps(m) != 0)
        }
        #[inline(always)]
        fn select(self, m: __m256, a: __m256, b: __m256) -> __m256 {
            avx256!(_mm256_blendv_ps(b, a, m))
        }
        #[inline(always)]
        fn reduce_add(self, v: __m256) -> f32 {
            avx256!({
                let q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
                let s = _mm_add_ps(q, _mm_movehl_ps(q, q));
                _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps::<0b01>(s, s)))
            })
        }
        #[inline(always)]
        fn reduce_max(self, v: __m256) -> f32 {
            avx256!({
                let q = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
                let s = _mm_max_ps(q, _mm_movehl_ps(q, q));
                _mm_cvtss_f32(_mm_max_ss(s, _mm_shuffle_ps::<0b01>(s, s)))
            })
        }
        #[inline(always)]
        fn reduce_min(self, v: __m256) -> f32 {
            avx256!({
                let q = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
                let s = _mm_min_ps(q, _mm_movehl_ps(q, q));
                _mm_cvtss_f32(_mm_min_ss(s, _mm_shuffle_ps::<0b01>(s, s)))
            })
        }
    };
}
pub(crate) use avx256_common_methods;

/// Evaluates AVX intrinsics.
macro_rules! avx256 {
    ($e:expr) => {{
        // SAFETY: the token implementing these methods (`Avx`, `Avx2`) exists only after its
        // `detect` saw AVX on this CPU, and every pointer passed comes from a slice already
        // sliced to LANES elements.
        unsafe { $e }
    }};
}
pub(crate) use avx256;

impl Simd for Avx {
    const BACKEND: Backend = Backend::Avx;
    const LANES: usize = 8;
    type V = __m256;
    type M = __m256;

    avx256_common_methods!();
    super::outlined_with_features!(Avx, "avx");

    #[inline(always)]
    fn fma(self, a: __m256, b: __m256, c: __m256) -> __m256 {
        avx256!(_mm256_add_ps(_mm256_mul_ps(a, b), c))
    }
    #[inline(always)]
    fn pow2i(self, n: __m256) -> __m256 {
        avx256!({
            let ni = _mm256_cvtps_epi32(n);
            let bias = _mm_set1_epi32(127);
            let lo = _mm_slli_epi32::<23>(_mm_add_epi32(_mm256_castsi256_si128(ni), bias));
            let hi = _mm_slli_epi32::<23>(_mm_add_epi32(_mm256_extractf128_si256::<1>(ni), bias));
            _mm256_castsi256_ps(_mm256_set_m128i(hi, lo))
        })
    }
    #[inline(always)]
    fn frexp(self, x: __m256) -> (__m256, __m256) {
        avx256!({
            let m = _mm256_or_ps(
                _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(0x007f_ffff))),
                _mm256_set1_ps(1.0),
            );
            let bits = _mm256_castps_si256(x);
            let bias = _mm_set1_epi32(127);
            let lo = _mm_sub_epi32(_mm_srli_epi32::<23>(_mm256_castsi256_si128(bits)), bias);
            let hi = _mm_sub_epi32(
                _mm_srli_epi32::<23>(_mm256_extractf128_si256::<1>(bits)),
                bias,
            );
            (m, _mm256_cvtepi32_ps(_mm256_set_m128i(hi, lo)))
        })
    }

    lanewise_f16_methods!();

    #[inline(always)]
    fn load_bf16(self, src: &[u16]) -> __m256 {
        let src = &src[..8];
        avx256!({
            let h = _mm_loadu_si128(src.as_ptr().cast());
            let lo = widen_bf16x4(h);
            let hi = widen_bf16x4(_mm_unpackhi_epi64(h, h));
            _mm256_set_m128(hi, lo)
        })
    }
    #[inline(always)]
    fn store_bf16(self, v: __m256, dst: &mut [u16]) {
        let dst = &mut dst[..8];
        avx256!({
            let lo = narrow_bf16x4(_mm256_castps256_ps128(v));
            let hi = narrow_bf16x4(_mm256_extractf128_ps::<1>(v));
            _mm_storeu_si128(dst.as_mut_ptr().cast(), _mm_unpacklo_epi64(lo, hi))
        })
    }
}
