//! AVX2 integer block dots for the formats inference runs most (Q4_K, Q6_K, Q8_0 against
//! Q8_K / Q8_0 activations). The generic kernels in `int8.rs` are the reference; these do
//! the same sums with `vpmaddubsw` (u8 x i8 pairs to i16) and `vpmaddwd` (i16 pairs times
//! the sub-block scale to i32), so each 32-weight sub-block is a handful of instructions.
//!
//! Results equal the generic kernels' up to f32 rounding: the integer sums are the same,
//! but the per-block f32 terms are accumulated in eight lanes instead of one.

use std::arch::x86_64::*;

use crate::QuantFormat;
use crate::dequant::scale_min;
use crate::isa::{Isa, LevelTag};

/// The fast row dot of `format` on `isa`, if there is one.
pub(crate) fn row_dot(isa: Isa, format: QuantFormat, row: &[u8], act: &[u8]) -> Option<f32> {
    if !matches!(isa.level(), LevelTag::Avx2 | LevelTag::Avx512) {
        return None;
    }
    // The `Isa` level guarantees AVX2, FMA and F16C (see `isa::level_detected`); the
    // kernels read only through bounds-checked slices of whole blocks.
    match format {
        // SAFETY: the CPU has the kernel's features (above).
        QuantFormat::Q4K => Some(unsafe { q4k(row, act) }),
        // SAFETY: as above.
        QuantFormat::Q6K => Some(unsafe { q6k(row, act) }),
        // SAFETY: as above.
        QuantFormat::Q8_0 => Some(unsafe { q8_0(row, act) }),
        _ => None,
    }
}

/// The f16 at byte `at`, widened with F16C's `vcvtph2ps` (inlined into the kernels, which
/// all enable F16C).
#[inline(always)]
fn f16_at(b: &[u8], at: usize) -> f32 {
    let bits = u16::from_le_bytes([b[at], b[at + 1]]);
    // SAFETY: only called from functions compiled with F16C, on CPUs that have it.
    unsafe { _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32))) }
}

#[inline(always)]
fn f32_at(b: &[u8], at: usize) -> f32 {
    f32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Loads 32 bytes at `at` of `b` (bounds-checked).
#[inline(always)]
fn load32(b: &[u8], at: usize) -> __m256i {
    let s = &b[at..at + 32];
    // SAFETY: `s` is 32 readable bytes; the load is unaligned.
    unsafe { _mm256_loadu_si256(s.as_ptr() as *const __m256i) }
}

#[target_feature(enable = "avx2,fma")]
#[inline]
fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_shuffle_ps::<1>(s, s));
    _mm_cvtss_f32(s)
}

/// Q4_K weights x Q8_K activations.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4k(row: &[u8], act: &[u8]) -> f32 {
    let m4 = _mm256_set1_epi8(15);
    let mut acc = _mm256_setzero_ps();
    let mut mins = 0.0f32;
    for (w, a) in row.chunks_exact(144).zip(act.chunks_exact(292)) {
        let dx = f32_at(a, 0);
        let (d, dmin) = (f16_at(w, 0) * dx, f16_at(w, 2) * dx);
        let scales: &[u8; 12] = w[4..16].try_into().expect("12 bytes");
        let mut sm = [(0u8, 0u8); 8];
        for (j, v) in sm.iter_mut().enumerate() {
            *v = scale_min(j, scales);
        }
        let bs: &[u8; 32] = a[260..292].try_into().expect("32 bytes");
        let bsum = |j: usize| {
            i16::from_le_bytes([bs[4 * j], bs[4 * j + 1]]) as i32
                + i16::from_le_bytes([bs[4 * j + 2], bs[4 * j + 3]]) as i32
        };
        let mut isum = _mm256_setzero_si256();
        let mut msum = 0i32;
        for (j, &(_, mn)) in sm.iter().enumerate() {
            msum += mn as i32 * bsum(j);
        }
        for c in 0..4 {
            let q = load32(w, 16 + 32 * c);
            let lo = _mm256_and_si256(q, m4);
            let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), m4);
            let (sc0, sc1) = (sm[2 * c].0, sm[2 * c + 1].0);
            let p0 = _mm256_maddubs_epi16(lo, load32(a, 4 + 64 * c));
            let p1 = _mm256_maddubs_epi16(hi, load32(a, 4 + 64 * c + 32));
            let s0 = _mm256_madd_epi16(p0, _mm256_set1_epi16(sc0 as i16));
            let s1 = _mm256_madd_epi16(p1, _mm256_set1_epi16(sc1 as i16));
            isum = _mm256_add_epi32(isum, _mm256_add_epi32(s0, s1));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), acc);
        mins += dmin * msum as f32;
    }
    hsum(acc) - mins
}

/// Q6_K weights x Q8_K activations: `sum sc * (q - 32) * x` as `sum sc * q * x` minus
/// `32 * sum sc * bsum` (the activations' 16-sums).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q6k(row: &[u8], act: &[u8]) -> f32 {
    let m4 = _mm256_set1_epi8(15);
    let m2 = _mm256_set1_epi8(3);
    let mut acc = _mm256_setzero_ps();
    let mut offsets = 0.0f32;
    for (w, a) in row.chunks_exact(210).zip(act.chunks_exact(292)) {
        let d = f16_at(w, 208) * f32_at(a, 0);
        let sc = |g: usize| w[192 + g] as i8 as i16;
        let mut isum = _mm256_setzero_si256();
        let mut corr = 0i32;
        for h in 0..2 {
            let qh = load32(w, 128 + 32 * h);
            let ql0 = load32(w, 64 * h);
            let ql1 = load32(w, 64 * h + 32);
            let high = |shift: i32| -> __m256i {
                // Bits `shift..shift+2` of each qh byte, moved to bits 4-5.
                let v = match shift {
                    0 => qh,
                    2 => _mm256_srli_epi16::<2>(qh),
                    4 => _mm256_srli_epi16::<4>(qh),
                    _ => _mm256_srli_epi16::<6>(qh),
                };
                _mm256_slli_epi16::<4>(_mm256_and_si256(v, m2))
            };
            let q = [
                _mm256_or_si256(_mm256_and_si256(ql0, m4), high(0)),
                _mm256_or_si256(_mm256_and_si256(ql1, m4), high(2)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(ql0), m4), high(4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(ql1), m4), high(6)),
            ];
            for (k, &qk) in q.iter().enumerate() {
                let p = _mm256_maddubs_epi16(qk, load32(a, 4 + 128 * h + 32 * k));
                let g = 8 * h + 2 * k;
                // Low 128 bits are weights 0-15 of the quarter (scale g), high are 16-31.
                let scales = _mm256_set_m128i(_mm_set1_epi16(sc(g + 1)), _mm_set1_epi16(sc(g)));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, scales));
                let bsum = |j: usize| i16::from_le_bytes([a[260 + 2 * j], a[261 + 2 * j]]) as i32;
                corr += sc(g) as i32 * bsum(g) + sc(g + 1) as i32 * bsum(g + 1);
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), acc);
        offsets += d * (32 * corr) as f32;
    }
    hsum(acc) - offsets
}

/// Q8_0 weights x Q8_0 activations: `|w| * (x * sign w)` keeps `vpmaddubsw`'s unsigned
/// operand non-negative (both sides are in -127..=127, as Q8_0 quantization makes them).
/// Two accumulators, so consecutive blocks' FMAs do not wait on each other.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_0(row: &[u8], act: &[u8]) -> f32 {
    let ones = _mm256_set1_epi16(1);
    let block = |w: &[u8], a: &[u8]| {
        let (wq, aq) = (load32(w, 2), load32(a, 2));
        let p = _mm256_maddubs_epi16(_mm256_sign_epi8(wq, wq), _mm256_sign_epi8(aq, wq));
        let s = _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones));
        (_mm256_set1_ps(f16_at(w, 0) * f16_at(a, 0)), s)
    };
    let mut acc = [_mm256_setzero_ps(); 2];
    let (rows, acts) = (row.chunks_exact(68), act.chunks_exact(68));
    let (row_tail, act_tail) = (rows.remainder(), acts.remainder());
    for (w, a) in rows.zip(acts) {
        for (k, acc_k) in acc.iter_mut().enumerate() {
            let (d, s) = block(&w[34 * k..], &a[34 * k..]);
            *acc_k = _mm256_fmadd_ps(d, s, *acc_k);
        }
    }
    if !row_tail.is_empty() {
        let (d, s) = block(row_tail, act_tail);
        acc[0] = _mm256_fmadd_ps(d, s, acc[0]);
    }
    hsum(_mm256_add_ps(acc[0], acc[1]))
}
