//! The integer block dots, one per format, over a byte-dot [`Unit`]. Byte offsets follow
//! the `#[repr(C)]` layouts in `blocks.rs`; the activations are Q8_0 (`d` f16, 32 `qs`) or
//! Q8_K (`d` f32, 256 `qs`, 16 `bsums` of 16 activations each).
//!
//! Every function here executes AVX2 (and, through `U`, VNNI) instructions and reads
//! through raw pointers: it is inlined into a `#[target_feature]` instance in `mod.rs`,
//! and [`row_dot`] checks that both buffers hold the same whole number of blocks before
//! any block is read.

use std::arch::x86_64::*;

use super::unit::{Unit, dot_scaled};
use crate::QuantFormat;
use crate::blocks::*;
use crate::dot::IntDot;

/// A weight block's integer dot, as SIMD over raw block bytes.
trait Kernel: IntDot {
    /// `acc` plus this block's products with the activation block at `a`, in f32 lanes.
    unsafe fn block<U: Unit>(w: *const u8, a: *const u8, acc: __m256) -> __m256;
}

/// The row dot for `format`, or `None` for NF4 and for buffers that are not whole matching
/// blocks.
///
/// # Safety
/// Call only from a `#[target_feature]` function enabling AVX2, FMA, F16C and what `U`
/// needs, on a CPU that has them.
#[inline(always)]
pub(super) unsafe fn row_dot<U: Unit>(format: QuantFormat, row: &[u8], act: &[u8]) -> Option<f32> {
    // SAFETY: the caller's contract; `sum_blocks` checks the lengths itself.
    unsafe {
        match format {
            QuantFormat::Q4_0 => sum_blocks::<BlockQ4_0, U>(row, act),
            QuantFormat::Q4_1 => sum_blocks::<BlockQ4_1, U>(row, act),
            QuantFormat::Q5_0 => sum_blocks::<BlockQ5_0, U>(row, act),
            QuantFormat::Q5_1 => sum_blocks::<BlockQ5_1, U>(row, act),
            QuantFormat::Q8_0 => sum_blocks::<BlockQ8_0, U>(row, act),
            QuantFormat::Q4K => sum_blocks::<BlockQ4K, U>(row, act),
            QuantFormat::Q5K => sum_blocks::<BlockQ5K, U>(row, act),
            QuantFormat::Q6K => sum_blocks::<BlockQ6K, U>(row, act),
            QuantFormat::Q8K => sum_blocks::<BlockQ8K, U>(row, act),
            QuantFormat::Nf4 => None,
        }
    }
}

/// Sums `K::block` over the row in two accumulators (so consecutive small blocks' FMAs
/// do not wait on each other), then across lanes.
#[inline(always)]
unsafe fn sum_blocks<K: Kernel, U: Unit>(row: &[u8], act: &[u8]) -> Option<f32> {
    let (wb, ab) = (K::BYTES, K::Act::BYTES);
    let n = row.len() / wb;
    if row.len() != n * wb || act.len() != n * ab {
        return None;
    }
    let (w, a) = (row.as_ptr(), act.as_ptr());
    // SAFETY: block `i < n` lies inside both buffers (checked above); AVX per the caller.
    unsafe {
        let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        let mut i = 0;
        while i + 1 < n {
            acc0 = K::block::<U>(w.add(i * wb), a.add(i * ab), acc0);
            acc1 = K::block::<U>(w.add((i + 1) * wb), a.add((i + 1) * ab), acc1);
            i += 2;
        }
        if i < n {
            acc0 = K::block::<U>(w.add(i * wb), a.add(i * ab), acc0);
        }
        let v = _mm256_add_ps(acc0, acc1);
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        Some(_mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s))))
    }
}

// Readers of little-endian fields at a byte address (x86 is little-endian; no alignment).

#[inline(always)]
unsafe fn load(p: *const u8) -> __m256i {
    // SAFETY: the caller's block has 32 readable bytes at `p`.
    unsafe { _mm256_loadu_si256(p.cast()) }
}

#[inline(always)]
unsafe fn u16_at(p: *const u8) -> u64 {
    // SAFETY: as above, 2 bytes.
    unsafe { p.cast::<u16>().read_unaligned() as u64 }
}

#[inline(always)]
unsafe fn u32_at(p: *const u8) -> u32 {
    // SAFETY: as above, 4 bytes.
    unsafe { p.cast::<u32>().read_unaligned() }
}

#[inline(always)]
unsafe fn f32_at(p: *const u8) -> f32 {
    // SAFETY: as above, 4 bytes.
    unsafe { p.cast::<f32>().read_unaligned() }
}

/// Up to four f16 (low bits first) widened at once with F16C.
#[inline(always)]
unsafe fn f16x4(bits: u64) -> __m128 {
    // SAFETY: F16C per the caller.
    unsafe { _mm_cvtph_ps(_mm_cvtsi64_si128(bits as i64)) }
}

/// Lane 0 of `v` in all eight lanes.
#[inline(always)]
unsafe fn splat(v: __m128) -> __m256 {
    // SAFETY: AVX2 per the caller.
    unsafe { _mm256_broadcastss_ps(v) }
}

/// `d_w * d_a` of two f16 scales, broadcast (the reference's single f32 product).
#[inline(always)]
unsafe fn scale_product(w_d: u64, a_d: u64) -> __m256 {
    // SAFETY: AVX2/F16C per the caller.
    unsafe {
        let d = f16x4(w_d | a_d << 16);
        splat(_mm_mul_ss(d, _mm_movehdup_ps(d)))
    }
}

/// 16 bytes of nibble pairs to 32 quants: low nibbles (weights 0-15), then high ones.
#[inline(always)]
unsafe fn nibbles(p: *const u8) -> __m256i {
    // SAFETY: 16 readable bytes at `p`; AVX2 per the caller.
    unsafe {
        let v = _mm_loadu_si128(p.cast());
        let both = _mm256_set_m128i(_mm_srli_epi16::<4>(v), v);
        _mm256_and_si256(both, _mm256_set1_epi8(15))
    }
}

/// Bit `l` of `bits` to byte `l` as 0x10 (set) or 0: the fifth bit of Q5_0/Q5_1 quants.
#[inline(always)]
unsafe fn fifth_bits(bits: u32) -> __m256i {
    // SAFETY: AVX2 per the caller.
    unsafe {
        let spread = _mm256_shuffle_epi8(
            _mm256_set1_epi32(bits as i32),
            _mm256_set_epi64x(
                0x0303_0303_0303_0303,
                0x0202_0202_0202_0202,
                0x0101_0101_0101_0101,
                0,
            ),
        );
        let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
        let on = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
        _mm256_and_si256(on, _mm256_set1_epi8(0x10))
    }
}

/// A 32-weight block stored as `q - offset` with one f16 scale (Q4_0, Q5_0).
#[inline(always)]
unsafe fn offset_block<U: Unit>(
    q: __m256i,
    offset: i8,
    w: *const u8,
    a: *const u8,
    acc: __m256,
) -> __m256 {
    // SAFETY: the caller's block contract.
    unsafe {
        let s = U::dot_offset(q, _mm256_set1_epi8(offset), load(a.add(2)));
        _mm256_fmadd_ps(
            scale_product(u16_at(w), u16_at(a)),
            _mm256_cvtepi32_ps(s),
            acc,
        )
    }
}

/// A 32-weight block `d * q + m` with f16 `d`, `m` at the block's start (Q4_1, Q5_1).
#[inline(always)]
unsafe fn affine_block<U: Unit>(q: __m256i, w: *const u8, a: *const u8, acc: __m256) -> __m256 {
    // SAFETY: the caller's block contract.
    unsafe {
        let x = load(a.add(2));
        let (qx, sx) = (U::dot(q, x), U::dot(_mm256_set1_epi8(1), x));
        // [d, m, d_a, 0] -> [d * d_a, m * d_a, ..]
        let f = f16x4(u32_at(w) as u64 | u16_at(a) << 32);
        let f = _mm_mul_ps(f, _mm_shuffle_ps::<0b10_10_10_10>(f, f));
        let acc = _mm256_fmadd_ps(splat(f), _mm256_cvtepi32_ps(qx), acc);
        _mm256_fmadd_ps(splat(_mm_movehdup_ps(f)), _mm256_cvtepi32_ps(sx), acc)
    }
}

impl Kernel for BlockQ4_0 {
    #[inline(always)]
    unsafe fn block<U: Unit>(w: *const u8, a: *const u8, acc: __m256) -> __m256 {
        // SAFETY: the caller's block contract.
        unsafe { offset_block::<U>(nibbles(w.add(2)), 8, w, a, acc) }
    }
}

impl Kernel for BlockQ4_1 {
    #[inline(always)]
    unsafe fn block<U: Unit>(w: *const u8, a: *const u8, acc: __m256) -> __m256 {
        // SAFETY: the caller's block contract.
        unsafe { affine_block::<U>(nibbles(w.add(4)), w, a, acc) }
    }
}

impl Kernel for BlockQ5_0 {
    #[inline(always)]
    unsafe fn block<U: Unit>(w: *const u8, a: *const u8, acc: __m256) -> __m256 {
        // SAFETY: the caller's block contract.
        unsafe {
            let q = _mm256_or_si256(nibbles(w.add(6)), fifth_bits(u32_at(w.add(2))));
            offset_block::<U>(q, 16, w, a, acc)
        }
    }
}

impl Kernel for BlockQ5_1 {
    #[inline(always)]
    unsafe fn block<U: Unit>(w: *const u8, a: *const u8, acc: __m256) -> __m256 {
        // SAFETY: the caller's block contract.
        unsafe {
            let q = _mm256_or_si256(nibbles(w.add(8)), fifth_bits(u32_at(w.add(4))));
            affine_block::<U>(q, w, a, acc)
        }
    }
}

impl Kernel for BlockQ8_0 {
    #[inline(always)]
    unsafe fn block<U: Unit>(w: *const u8, a: *const u8, acc: __m256) -> __m256 {
        // SAFETY: the caller's block contract.
        unsafe {
            let s = U::dot_i8(load(w.add(2)), load(a.add(2)));
            _mm256_fmadd_ps(
                scale_product(u16_at(w), u16_at(a)),
                _mm256_cvtepi32_ps(s),
                acc,
            )
        }
    }
}

impl Kernel for BlockQ8K {
    #[inline(always)]
    unsafe fn block<U: Unit>(w: *const u8, a: *const u8, acc: __m256) -> __m256 {
        // SAFETY: the caller's block contract.
        unsafe {
            let mut s = _mm256_setzero_si256();
            for c in 0..8 {
                s = _mm256_add_epi32(
                    s,
                    U::dot_i8(load(w.add(4 + 32 * c)), load(a.add(4 + 32 * c))),
                );
            }
            let d = _mm256_set1_ps(f32_at(w) * f32_at(a));
            _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc)
        }
    }
}

/// `vpshufb` control that broadcasts 16-bit lane `lo` across the low 128-bit half and lane
/// `hi` across the high half (each half shuffles within itself).
#[inline(always)]
unsafe fn pick16(lo: i16, hi: i16) -> __m256i {
    let lane = |j: i16| ((2 * j + 1) << 8) | (2 * j);
    // SAFETY: AVX per the caller.
    unsafe { _mm256_set_m128i(_mm_set1_epi16(lane(hi)), _mm_set1_epi16(lane(lo))) }
}

/// Q4_K (`FIVE = false`, quants at byte 16) and Q5_K (`FIVE`, fifth bits at 16, quants at
/// 48): `d * sum_j sc_j * (q . a)_j - dmin * sum_j m_j * bsum_j` with the eight 6-bit
/// scales and mins unpacked in four 32-bit operations (`dequant::scale_min`'s layout).
#[inline(always)]
unsafe fn affine_k<U: Unit, const FIVE: bool>(w: *const u8, a: *const u8, acc: __m256) -> __m256 {
    // SAFETY: the caller's block contract.
    unsafe {
        let (w0, w1, w2) = (u32_at(w.add(4)), u32_at(w.add(8)), u32_at(w.add(12)));
        let (low6, low4, top2) = (0x3f3f_3f3f, 0x0f0f_0f0f, 0x3030_3030);
        let sc_lo = w0 & low6;
        let mn_lo = w1 & low6;
        let sc_hi = (w2 & low4) | ((w0 >> 2) & top2);
        let mn_hi = ((w2 >> 4) & low4) | ((w1 >> 2) & top2);
        let sm = _mm256_cvtepu8_epi16(_mm_set_epi32(
            mn_hi as i32,
            mn_lo as i32,
            sc_hi as i32,
            sc_lo as i32,
        ));
        let scales = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(sm));
        // Sub-block activation sums from the 16-sums, times the mins.
        let bsums = load(a.add(260));
        let q8s = _mm_hadd_epi16(
            _mm256_castsi256_si128(bsums),
            _mm256_extracti128_si256::<1>(bsums),
        );
        let mins = _mm_madd_epi16(_mm256_extracti128_si256::<1>(sm), q8s);

        let m4 = _mm256_set1_epi8(15);
        let m10 = _mm256_set1_epi8(0x10);
        let mut qh = if FIVE {
            load(w.add(16))
        } else {
            _mm256_setzero_si256()
        };
        let qs = w.add(if FIVE { 48 } else { 16 });
        let mut isum = _mm256_setzero_si256();
        for c in 0..4 {
            let q = load(qs.add(32 * c));
            let mut lo = _mm256_and_si256(q, m4);
            let mut hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), m4);
            if FIVE {
                // Bits 2c and 2c + 1 of each qh byte (moved to bit 0 and 1 by the running
                // shift) become bit 4.
                lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16::<4>(qh), m10));
                hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16::<3>(qh), m10));
                qh = _mm256_srli_epi16::<2>(qh);
            }
            let j = 2 * c as i16;
            let sl = _mm256_shuffle_epi8(scales, pick16(j, j));
            let sh = _mm256_shuffle_epi8(scales, pick16(j + 1, j + 1));
            let xl = load(a.add(4 + 64 * c));
            let xh = load(a.add(36 + 64 * c));
            isum = _mm256_add_epi32(isum, dot_scaled(lo, xl, sl));
            isum = _mm256_add_epi32(isum, dot_scaled(hi, xh, sh));
        }
        // [d, dmin] * d_a
        let f = _mm_mul_ps(f16x4(u32_at(w) as u64), _mm_set1_ps(f32_at(a)));
        let acc = _mm256_fmadd_ps(splat(f), _mm256_cvtepi32_ps(isum), acc);
        let mins = _mm256_zextps128_ps256(_mm_cvtepi32_ps(mins));
        _mm256_fnmadd_ps(splat(_mm_movehdup_ps(f)), mins, acc)
    }
}

impl Kernel for BlockQ4K {
    #[inline(always)]
    unsafe fn block<U: Unit>(w: *const u8, a: *const u8, acc: __m256) -> __m256 {
        // SAFETY: the caller's block contract.
        unsafe { affine_k::<U, false>(w, a, acc) }
    }
}

impl Kernel for BlockQ5K {
    #[inline(always)]
    unsafe fn block<U: Unit>(w: *const u8, a: *const u8, acc: __m256) -> __m256 {
        // SAFETY: the caller's block contract.
        unsafe { affine_k::<U, true>(w, a, acc) }
    }
}

impl Kernel for BlockQ6K {
    /// `d * sum_g sc_g * (q - 32) . a_g` as `d * (sum_g sc_g * q . a_g - 32 * sum_g sc_g *
    /// bsum_g)`: the unsigned quants suit `vpmaddubsw`, the offset comes from the 16-sums.
    #[inline(always)]
    unsafe fn block<U: Unit>(w: *const u8, a: *const u8, acc: __m256) -> __m256 {
        // SAFETY: the caller's block contract.
        unsafe {
            let sc = _mm256_cvtepi8_epi16(_mm_loadu_si128(w.add(192).cast()));
            let offset = _mm256_madd_epi16(sc, load(a.add(260)));
            let mut isum = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32::<5>(offset));
            let (m4, m3) = (_mm256_set1_epi8(15), _mm256_set1_epi8(3));
            let m30 = _mm256_set1_epi8(0x30);
            for h in 0..2 {
                let half = if h == 0 {
                    _mm256_castsi256_si128(sc)
                } else {
                    _mm256_extracti128_si256::<1>(sc)
                };
                let sch = _mm256_broadcastsi128_si256(half);
                let qh = load(w.add(128 + 32 * h));
                let (ql0, ql1) = (load(w.add(64 * h)), load(w.add(64 * h + 32)));
                // Quarter k: 32 weights, low/high nibble of ql0/ql1, bits 2k..2k+2 of qh.
                let q = [
                    _mm256_or_si256(
                        _mm256_and_si256(ql0, m4),
                        _mm256_slli_epi16::<4>(_mm256_and_si256(qh, m3)),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(ql1, m4),
                        _mm256_slli_epi16::<2>(_mm256_and_si256(qh, _mm256_slli_epi16::<2>(m3))),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16::<4>(ql0), m4),
                        _mm256_and_si256(qh, m30),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16::<4>(ql1), m4),
                        _mm256_and_si256(_mm256_srli_epi16::<2>(qh), m30),
                    ),
                ];
                for (k, &qk) in q.iter().enumerate() {
                    // Weights 0-15 of the quarter take scale 2k of the half, 16-31 scale 2k+1.
                    let j = 2 * k as i16;
                    let s = _mm256_shuffle_epi8(sch, pick16(j, j + 1));
                    let x = load(a.add(4 + 128 * h + 32 * k));
                    isum = _mm256_add_epi32(isum, dot_scaled(qk, x, s));
                }
            }
            let d = _mm_mul_ss(f16x4(u16_at(w.add(208))), _mm_set_ss(f32_at(a)));
            _mm256_fmadd_ps(splat(d), _mm256_cvtepi32_ps(isum), acc)
        }
    }
}
