//! Byte-dot units: the one operation the integer kernels need from the ISA, 32 byte
//! products summed in groups of four into eight exact i32 lanes. AVX2 has no such
//! instruction and builds it from `vpmaddubsw` (pairs to i16) and `vpmaddwd` (pairs of
//! those to i32); VNNI's `vpdpbusd` is the operation itself, accumulating in i32 with no
//! 16-bit intermediate, in its EVEX (AVX-512 VNNI) and VEX (AVX-VNNI) encodings.
//!
//! Everything here is `unsafe` only because it executes AVX2 (or VNNI) instructions: the
//! functions are inlined into the `#[target_feature]` instances of `mod.rs` and must not
//! be called from anywhere else.

use std::arch::x86_64::*;

pub(super) trait Unit {
    /// Lane `k` = `sum over bytes 4k..4k+4 of u[i] * s[i]`, `u` unsigned and `s` signed.
    /// Exact when `u <= 127` (the AVX2 unit's i16 pair sums cannot saturate then).
    unsafe fn dot(u: __m256i, s: __m256i) -> __m256i;

    /// `dot(u, s) - dot(k, s)`: weights stored with an offset (`q - 8`, `q - 16`), with `u`
    /// and `k` at most 31.
    unsafe fn dot_offset(u: __m256i, k: __m256i, s: __m256i) -> __m256i;

    /// As `dot`, for two signed operands, exact for every value including -128.
    unsafe fn dot_i8(w: __m256i, a: __m256i) -> __m256i;
}

/// Lane `k` of `vpmaddwd` with a broadcast sub-block scale: a scaled dot of nibbles or
/// 5- or 6-bit quants (`u <= 63`), the same instructions on every unit: VNNI's
/// `vpdpbusd` would still need a separate multiply by the scale.
#[inline(always)]
pub(super) unsafe fn dot_scaled(u: __m256i, s: __m256i, scale: __m256i) -> __m256i {
    // SAFETY: AVX2 instructions, in an AVX2 instance (module docs).
    unsafe { _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), scale) }
}

/// `vpmaddubsw` + `vpmaddwd` (AVX2, and the AVX-512 level without VNNI).
pub(super) struct Maddubs;

impl Unit for Maddubs {
    #[inline(always)]
    unsafe fn dot(u: __m256i, s: __m256i) -> __m256i {
        // SAFETY: AVX2 instructions, in an AVX2 instance (module docs).
        unsafe { _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)) }
    }

    #[inline(always)]
    unsafe fn dot_offset(u: __m256i, k: __m256i, s: __m256i) -> __m256i {
        // SAFETY: as above. Both pair sums are at most 2 * 31 * 128 in magnitude, so
        // neither they nor their difference leave i16.
        unsafe {
            let d = _mm256_sub_epi16(_mm256_maddubs_epi16(u, s), _mm256_maddubs_epi16(k, s));
            _mm256_madd_epi16(d, _mm256_set1_epi16(1))
        }
    }

    #[inline(always)]
    unsafe fn dot_i8(w: __m256i, a: __m256i) -> __m256i {
        // SAFETY: as above.
        unsafe {
            // |w| * (a * sign w) is exact unless a = -128 meets a negative w (then
            // a * sign w wraps); such blocks take the sign-extended i16 path.
            let edge = _mm256_cmpeq_epi8(a, _mm256_set1_epi8(i8::MIN));
            if _mm256_testz_si256(edge, edge) == 1 {
                Self::dot(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w))
            } else {
                let (wl, wh) = (_mm256_castsi256_si128(w), _mm256_extracti128_si256::<1>(w));
                let (al, ah) = (_mm256_castsi256_si128(a), _mm256_extracti128_si256::<1>(a));
                let lo = _mm256_madd_epi16(_mm256_cvtepi8_epi16(wl), _mm256_cvtepi8_epi16(al));
                let hi = _mm256_madd_epi16(_mm256_cvtepi8_epi16(wh), _mm256_cvtepi8_epi16(ah));
                // Lane order differs from `dot`'s, which is fine: callers only sum lanes.
                _mm256_add_epi32(lo, hi)
            }
        }
    }
}

/// `vpdpbusd` units, EVEX (AVX-512 VNNI with VL) and VEX (AVX-VNNI) encodings.
macro_rules! vnni_unit {
    ($name:ident, $dpbusd:ident) => {
        pub(super) struct $name;

        impl Unit for $name {
            #[inline(always)]
            unsafe fn dot(u: __m256i, s: __m256i) -> __m256i {
                // SAFETY: VNNI, in an instance that enables it (module docs).
                unsafe { $dpbusd(_mm256_setzero_si256(), u, s) }
            }

            #[inline(always)]
            unsafe fn dot_offset(u: __m256i, k: __m256i, s: __m256i) -> __m256i {
                // SAFETY: as above.
                unsafe { _mm256_sub_epi32(Self::dot(u, s), Self::dot(k, s)) }
            }

            #[inline(always)]
            unsafe fn dot_i8(w: __m256i, a: __m256i) -> __m256i {
                // SAFETY: as above. (w + 128) is a byte, so w * a = (w + 128) * a - 128 * a
                // with no 16-bit step to overflow.
                unsafe {
                    let bias = _mm256_set1_epi8(i8::MIN);
                    let biased = $dpbusd(_mm256_setzero_si256(), _mm256_xor_si256(w, bias), a);
                    _mm256_sub_epi32(biased, $dpbusd(_mm256_setzero_si256(), bias, a))
                }
            }
        }
    };
}

vnni_unit!(VnniEvex, _mm256_dpbusd_epi32);
vnni_unit!(VnniVex, _mm256_dpbusd_avx_epi32);
