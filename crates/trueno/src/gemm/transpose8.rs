//! 8 x 8 block transposes, the building block of the transpose op and of the GEMM packing
//! routines that gather columns (A by rows into k-major panels, Bᵀ into column panels).
//! Element by element, a transpose moves one float per load and store; with AVX a block
//! moves as eight 8-float loads, 24 shuffles and eight 8-float stores.

use crate::backend::Backend;

/// Whether `backend` guarantees AVX (so the shuffle kernel may run).
#[inline(always)]
pub(crate) fn has_avx(backend: Backend) -> bool {
    matches!(backend, Backend::Avx | Backend::Avx2 | Backend::Avx512)
}

/// `dst[j * ds + i] = src[i * ss + j]` for `i, j < 8`, with AVX when `avx` (which the
/// caller must only set on a backend that has it, see [`has_avx`]). Inlined into a caller
/// compiled with AVX enabled, the shuffles stay in line; elsewhere it is one call a block.
///
/// Panics if a slice is too short for an 8 x 8 block at its stride; callers pass
/// in-bounds blocks, so this never fires on user input.
#[inline(always)]
pub(crate) fn transpose_8x8(avx: bool, src: &[f32], ss: usize, dst: &mut [f32], ds: usize) {
    let (src, dst) = (&src[..7 * ss + 8], &mut dst[..7 * ds + 8]);
    #[cfg(target_arch = "x86_64")]
    if avx {
        // SAFETY: `avx` is only set when the running CPU has AVX (`has_avx` of the
        // engine's detected or forced-and-checked backend); the slices above hold every
        // row of the block at its stride.
        return unsafe { transpose_8x8_avx(src.as_ptr(), ss, dst.as_mut_ptr(), ds) };
    }
    let _ = avx;
    for i in 0..8 {
        for j in 0..8 {
            dst[j * ds + i] = src[i * ss + j];
        }
    }
}

/// The AVX kernel: pairwise interleave rows, then 64-bit shuffles, then swap 128-bit halves.
///
/// # Safety
/// The CPU has AVX; `src` holds 8 rows of 8 floats at stride `ss`, `dst` 8 rows of 8 at `ds`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
#[inline]
unsafe fn transpose_8x8_avx(src: *const f32, ss: usize, dst: *mut f32, ds: usize) {
    use std::arch::x86_64::*;
    // SAFETY: every row pointer is inside the caller's slice (see the contract above).
    let r = |i: usize| unsafe { _mm256_loadu_ps(src.add(i * ss)) };
    let (r0, r1, r2, r3, r4, r5, r6, r7) = (r(0), r(1), r(2), r(3), r(4), r(5), r(6), r(7));
    // t0 = a0 b0 a1 b1 | a4 b4 a5 b5 ; t1 = a2 b2 a3 b3 | a6 b6 a7 b7 (a, b: rows 0, 1)
    let (t0, t1) = (_mm256_unpacklo_ps(r0, r1), _mm256_unpackhi_ps(r0, r1));
    let (t2, t3) = (_mm256_unpacklo_ps(r2, r3), _mm256_unpackhi_ps(r2, r3));
    let (t4, t5) = (_mm256_unpacklo_ps(r4, r5), _mm256_unpackhi_ps(r4, r5));
    let (t6, t7) = (_mm256_unpacklo_ps(r6, r7), _mm256_unpackhi_ps(r6, r7));
    // u0 = a0 b0 c0 d0 | a4 b4 c4 d4, u1 = column 1 | 5, u2 = 2 | 6, u3 = 3 | 7 (rows 0-3)
    let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
    let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
    let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
    let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
    let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
    let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
    let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
    let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
    let cols = [
        _mm256_permute2f128_ps::<0x20>(u0, u4),
        _mm256_permute2f128_ps::<0x20>(u1, u5),
        _mm256_permute2f128_ps::<0x20>(u2, u6),
        _mm256_permute2f128_ps::<0x20>(u3, u7),
        _mm256_permute2f128_ps::<0x31>(u0, u4),
        _mm256_permute2f128_ps::<0x31>(u1, u5),
        _mm256_permute2f128_ps::<0x31>(u2, u6),
        _mm256_permute2f128_ps::<0x31>(u3, u7),
    ];
    for (j, c) in cols.into_iter().enumerate() {
        // SAFETY: row j of the destination block, inside the caller's slice.
        unsafe { _mm256_storeu_ps(dst.add(j * ds), c) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_kernels_transpose_a_strided_block() {
        let (ss, ds) = (11, 9);
        let src: Vec<f32> = (0..7 * ss + 8).map(|x| x as f32).collect();
        #[cfg(target_arch = "x86_64")]
        let avx = std::arch::is_x86_feature_detected!("avx");
        #[cfg(not(target_arch = "x86_64"))]
        let avx = false;
        for use_avx in [false, avx] {
            let mut dst = vec![-1.0; 7 * ds + 8];
            transpose_8x8(use_avx, &src, ss, &mut dst, ds);
            for i in 0..8 {
                for j in 0..8 {
                    assert_eq!(
                        dst[j * ds + i],
                        (i * ss + j) as f32,
                        "avx {use_avx} {i} {j}"
                    );
                }
            }
            // Gaps between destination rows are untouched.
            for j in 0..7 {
                assert_eq!(dst[j * ds + 8], -1.0);
            }
        }
    }
}
