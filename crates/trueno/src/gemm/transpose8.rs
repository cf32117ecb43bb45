//! 8 x 8 block transposes, the building block of the transpose op and of the GEMM packing
//! routines that gather columns (A by rows into k-major panels, Bᵀ into column panels).
//! Element by element, a transpose moves one float per load and store; with AVX a block
//! moves as eight 8-float loads, 24 shuffles and eight 8-float stores. With AVX-512, Bᵀ's
//! panels take 16 x 16 blocks (`transpose_16x16`).

use crate::backend::Backend;

/// Whether `backend` guarantees AVX (so the shuffle kernel may run).
#[inline(always)]
pub(crate) fn has_avx(backend: Backend) -> bool {
    matches!(backend, Backend::Avx | Backend::Avx2 | Backend::Avx512)
}

/// Whether `backend` guarantees AVX-512F (so the 16 x 16 kernel may run).
#[inline(always)]
pub(crate) fn has_avx512(backend: Backend) -> bool {
    backend == Backend::Avx512
}

/// `dst[j * ds + i] = src[i * ss + j]` for `i, j < 16` in zmm registers (which the caller
/// must only ask for, `zmm`, on a backend that has AVX-512F, see [`has_avx512`]): sixteen
/// whole-line loads, 64 shuffles and sixteen whole-line stores, where four 8 x 8 blocks
/// take 96 shuffles and 32 half-line stores. Packing Wᵀ for a shallow `x·Wᵀ` run as
/// given (Emerald Rapids VM, `gemm-probe`, best of 300, two rounds): 24x4096x16 13.0-13.1
/// -> 8.0 µs, 64x4096x32 22.3-22.5 -> 17.6-17.8, 64x2048x64 20.0-20.4 -> 16.1-17.5,
/// 128x4096x128 117-118 -> 103-105. Element by element without `zmm`.
///
/// Panics if a slice is too short for a 16 x 16 block at its stride; callers pass
/// in-bounds blocks, so this never fires on user input.
#[inline(always)]
pub(crate) fn transpose_16x16(zmm: bool, src: &[f32], ss: usize, dst: &mut [f32], ds: usize) {
    let (src, dst) = (&src[..15 * ss + 16], &mut dst[..15 * ds + 16]);
    #[cfg(target_arch = "x86_64")]
    if zmm {
        // SAFETY: `zmm` is only set when the running CPU has AVX-512F (`has_avx512` of the
        // engine's detected or forced-and-checked backend); the slices above hold every
        // row of the block at its stride.
        return unsafe { transpose_16x16_avx512(src.as_ptr(), ss, dst.as_mut_ptr(), ds) };
    }
    let _ = zmm;
    // SAFETY: `dst`, borrowed whole, holds every row of the block at its stride.
    unsafe { transpose_by_element::<16>(src, ss, dst.as_mut_ptr(), ds) };
}

/// `dst[j * ds + i] = src[i * ss + j]` for `i, j < 8`, with AVX when `avx` (which the
/// caller must only set on a backend that has it, see [`has_avx`]). Inlined into a caller
/// compiled with AVX enabled, the shuffles stay in line; elsewhere it is one call a block.
///
/// Panics if a slice is too short for an 8 x 8 block at its stride; callers pass
/// in-bounds blocks, so this never fires on user input.
#[inline(always)]
pub(crate) fn transpose_8x8(avx: bool, src: &[f32], ss: usize, dst: &mut [f32], ds: usize) {
    let dst = &mut dst[..7 * ds + 8];
    // SAFETY: `avx` is only set when the running CPU has AVX (`has_avx` of the engine's
    // detected or forced-and-checked backend); `dst`, borrowed whole, holds every row of
    // the block at its stride.
    unsafe { transpose_8x8_to(avx, src, ss, dst.as_mut_ptr(), ds) }
}

/// [`transpose_8x8`] into a destination given as a pointer: `*dst.add(j * ds + i) =
/// src[i * ss + j]` for `i, j < 8`. For a block of a C that other threads write between
/// its runs (a `&mut` slice over the whole block would cover their elements too).
///
/// # Safety
/// `avx` only where the CPU has AVX (as for `transpose_8x8`); for `i, j < 8`, `dst.add(j
/// * ds + i)` is valid for writes and no other thread reads or writes it meanwhile.
#[inline(always)]
pub(crate) unsafe fn transpose_8x8_to(avx: bool, src: &[f32], ss: usize, dst: *mut f32, ds: usize) {
    let src = &src[..7 * ss + 8];
    #[cfg(target_arch = "x86_64")]
    if avx {
        // SAFETY: AVX is present when `avx` is set; `src` holds every row of the block at
        // its stride (checked above) and `dst` every destination row (the contract).
        return unsafe { transpose_8x8_avx(src.as_ptr(), ss, dst, ds) };
    }
    let _ = avx;
    // SAFETY: every destination row of the block is ours to write (the contract).
    unsafe { transpose_by_element::<8>(src, ss, dst, ds) };
}

/// The `N x N` block transpose one element at a time: the kernels' fallback.
///
/// # Safety
/// For `i, j < N`, `dst.add(j * ds + i)` is valid for writes and no other thread reads
/// or writes it meanwhile.
#[inline(always)]
unsafe fn transpose_by_element<const N: usize>(src: &[f32], ss: usize, dst: *mut f32, ds: usize) {
    for i in 0..N {
        for j in 0..N {
            // SAFETY: element (j, i) of the destination block (the contract).
            unsafe { *dst.add(j * ds + i) = src[i * ss + j] };
        }
    }
}

/// `dst[j * ds + i] = src[i * ss + j]` for the first `rows` rows (`1..=8`) and `j <
/// 8 * blocks`: the packing of an A panel of fewer than eight rows (the AVX2 and SSE2
/// kernels' six, the rows past the last eight of a 12- or 14-row one), which went element
/// by element and took 7% of a 512^3 product on the Zen 3 VM. With AVX each k step's
/// `rows` values go out as one 8-float store whose lanes past `rows` are zeros, where
/// they fit before the run's last element (`dst[(8 * blocks - 1) * ds + rows - 1]`); the
/// last steps' stores are cut to `rows` lanes. So the run may also write zeros at
/// `dst[j * ds + i]`, `i` in `rows..8`, below that end: in the slots of the rows after
/// these (padding, or the next k step's first rows when `ds < 8`), which a caller writes
/// after this run. Elsewhere, element by element, only the run itself.
///
/// A run of blocks a call, `rows` a constant in each of its kernels. One call a block,
/// with `rows` tested at every load and a 4 + 2-lane store closing each block, packed
/// 256^3's A in 11.4-12.0 µs of 356 (Zen 3 VM, `gemm-probe`, best of 200, two rounds);
/// a run a panel, in 8.6 µs. One thread against faer, alternated twice: 256^3 0.96-0.97x
/// -> 0.98-0.99x, 300^3 0.97x -> 0.98x, 384^3 and 512^3 94.0-95.0 -> 95.4-96.0 GFLOP/s.
#[inline(always)]
pub(crate) fn transpose_rows_8(
    avx: bool,
    src: &[f32],
    ss: usize,
    (rows, blocks): (usize, usize),
    dst: &mut [f32],
    ds: usize,
) {
    let rows = rows.clamp(1, 8);
    if blocks == 0 {
        return;
    }
    let cols = 8 * blocks;
    let (src, dst) = (
        &src[..(rows - 1) * ss + cols],
        &mut dst[..(cols - 1) * ds + rows],
    );
    #[cfg(target_arch = "x86_64")]
    if avx {
        let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
        // SAFETY: as in `transpose_8x8`: AVX is present when `avx` is set, and the
        // slices above hold the run's `rows` source rows and every destination element
        // up to its last.
        unsafe {
            return match rows {
                1 => transpose_rows_avx::<1>(s, ss, blocks, d, ds),
                2 => transpose_rows_avx::<2>(s, ss, blocks, d, ds),
                3 => transpose_rows_avx::<3>(s, ss, blocks, d, ds),
                4 => transpose_rows_avx::<4>(s, ss, blocks, d, ds),
                5 => transpose_rows_avx::<5>(s, ss, blocks, d, ds),
                6 => transpose_rows_avx::<6>(s, ss, blocks, d, ds),
                7 => transpose_rows_avx::<7>(s, ss, blocks, d, ds),
                _ => transpose_rows_avx::<8>(s, ss, blocks, d, ds),
            };
        }
    }
    let _ = avx;
    for i in 0..rows {
        for j in 0..cols {
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
    let cols = shuffle_8x8([r(0), r(1), r(2), r(3), r(4), r(5), r(6), r(7)]);
    for (j, c) in cols.into_iter().enumerate() {
        // SAFETY: row j of the destination block, inside the caller's slice.
        unsafe { _mm256_storeu_ps(dst.add(j * ds), c) };
    }
}

/// [`transpose_rows_8`]'s AVX kernel: rows past `ROWS` are zeros.
///
/// # Safety
/// The CPU has AVX; `src` holds `ROWS` (1..=8) rows of `8 * blocks` floats at stride
/// `ss`, `dst` the `(8 * blocks - 1) * ds + ROWS` floats of the run.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
#[inline]
unsafe fn transpose_rows_avx<const ROWS: usize>(
    src: *const f32,
    ss: usize,
    blocks: usize,
    dst: *mut f32,
    ds: usize,
) {
    use std::arch::x86_64::*;
    if ROWS == 6 && ds == 6 {
        // SAFETY: the caller's contract, with the run's 48 floats a block contiguous.
        return unsafe { transpose_six_rows_avx(src, ss, blocks, dst) };
    }
    let end = (8 * blocks - 1) * ds + ROWS;
    for b in 0..blocks {
        let (src, dst) = (src.wrapping_add(8 * b), dst.wrapping_add(8 * b * ds));
        let r = |i: usize| match i < ROWS {
            // SAFETY: rows below `ROWS`, block b: inside the caller's run.
            true => unsafe { _mm256_loadu_ps(src.add(i * ss)) },
            false => _mm256_setzero_ps(),
        };
        let cols = shuffle_8x8([r(0), r(1), r(2), r(3), r(4), r(5), r(6), r(7)]);
        let last = b + 1 == blocks;
        for (j, c) in cols.into_iter().enumerate() {
            let at = (8 * b + j) * ds;
            // SAFETY: `at + 8 <= end`, or `ROWS` lanes from `at <= end - ROWS`: inside
            // the run (only the last block's last steps can reach past its end).
            unsafe {
                match !last || at + 8 <= end {
                    true => _mm256_storeu_ps(dst.add(j * ds), c),
                    false => store_lanes(dst.add(j * ds), c, ROWS),
                }
            }
        }
    }
}

/// [`transpose_rows_avx`] for six rows into six-float slots (AVX2's 6-row A panels): a
/// block's 48 floats are contiguous, so six 8-float stores on 32-byte steps and 20
/// shuffles, where the 8 x 8 kernel with two zero rows ran 22 and eight overlapping
/// stores, three of them across a line. Zen 3 VM, `gemm-probe`, best of 500-1000, two
/// rounds: pack A of 256^3 8.5-8.6 -> 7.1-7.3 µs, of 126x256x256 4.06 -> 3.52; one
/// thread against faer, alternated twice, 256^3 95.7-96.0 -> 96.1-96.2 GFLOP/s (0.98x
/// both), 512^3 91.4-92.9 -> 93.0-93.6, the other squares within the noise.
///
/// # Safety
/// The CPU has AVX; `src` holds 6 rows of `8 * blocks` floats at stride `ss`, `dst` the
/// run's `48 * blocks` floats.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
#[inline]
unsafe fn transpose_six_rows_avx(src: *const f32, ss: usize, blocks: usize, dst: *mut f32) {
    use std::arch::x86_64::*;
    for b in 0..blocks {
        let (src, dst) = (src.wrapping_add(8 * b), dst.wrapping_add(48 * b));
        // SAFETY: rows 0-5 of block b, inside the caller's run.
        let r = |i: usize| unsafe { _mm256_loadu_ps(src.add(i * ss)) };
        let (r0, r1, r2, r3, r4, r5) = (r(0), r(1), r(2), r(3), r(4), r(5));
        // Rows a-f: c_j = a-d of k step j | j + 4; t4 = e0 f0 e1 f1 | e4 .., t5 = e2 f2 ..
        let [c0, c1, c2, c3] = columns_of_four([r0, r1, r2, r3]);
        let (t4, t5) = (_mm256_unpacklo_ps(r4, r5), _mm256_unpackhi_ps(r4, r5));
        // The 4-float pieces between: e0 f0 a1 b1, c1 d1 e1 f1, e2 f2 a3 b3, c3 d3 e3 f3.
        let x = _mm256_shuffle_ps::<0x44>(t4, c1);
        let y = _mm256_shuffle_ps::<0xEE>(c1, t4);
        let z = _mm256_shuffle_ps::<0x44>(t5, c3);
        let w = _mm256_shuffle_ps::<0xEE>(c3, t5);
        let out = [
            _mm256_permute2f128_ps::<0x20>(c0, x),
            _mm256_permute2f128_ps::<0x20>(y, c2),
            _mm256_permute2f128_ps::<0x20>(z, w),
            _mm256_permute2f128_ps::<0x31>(c0, x),
            _mm256_permute2f128_ps::<0x31>(y, c2),
            _mm256_permute2f128_ps::<0x31>(z, w),
        ];
        for (j, v) in out.into_iter().enumerate() {
            // SAFETY: floats 8j..8j + 8 of the block's 48, inside the caller's run.
            unsafe { _mm256_storeu_ps(dst.add(8 * j), v) };
        }
    }
}

/// The first `n` (1..=8) lanes of `v` at `p`, in pieces of 4, 2 and 1.
///
/// # Safety
/// The CPU has AVX; `p` holds `n` floats.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
#[inline]
unsafe fn store_lanes(p: *mut f32, v: std::arch::x86_64::__m256, n: usize) {
    use std::arch::x86_64::*;
    if n >= 8 {
        // SAFETY: the caller's `p` holds 8 floats.
        return unsafe { _mm256_storeu_ps(p, v) };
    }
    let (mut at, mut rest) = (0, _mm256_castps256_ps128(v));
    if n & 4 != 0 {
        // SAFETY: lanes 0..4 of the caller's `n >= 4`.
        unsafe { _mm_storeu_ps(p, rest) };
        (at, rest) = (4, _mm256_extractf128_ps::<1>(v));
    }
    if n & 2 != 0 {
        // SAFETY: two lanes from `at`, below `n`.
        unsafe { _mm_store_sd(p.add(at).cast(), _mm_castps_pd(rest)) };
        (at, rest) = (at + 2, _mm_movehl_ps(rest, rest));
    }
    if n & 1 != 0 {
        // SAFETY: the last lane, `at == n - 1`.
        unsafe { _mm_store_ss(p.add(at), rest) };
    }
}

/// The 8 x 8 transpose in registers: `rows[i]` lane j to `cols[j]` lane i.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
#[inline]
fn shuffle_8x8(
    [r0, r1, r2, r3, r4, r5, r6, r7]: [std::arch::x86_64::__m256; 8],
) -> [std::arch::x86_64::__m256; 8] {
    use std::arch::x86_64::*;
    let [u0, u1, u2, u3] = columns_of_four([r0, r1, r2, r3]);
    let [u4, u5, u6, u7] = columns_of_four([r4, r5, r6, r7]);
    [
        _mm256_permute2f128_ps::<0x20>(u0, u4),
        _mm256_permute2f128_ps::<0x20>(u1, u5),
        _mm256_permute2f128_ps::<0x20>(u2, u6),
        _mm256_permute2f128_ps::<0x20>(u3, u7),
        _mm256_permute2f128_ps::<0x31>(u0, u4),
        _mm256_permute2f128_ps::<0x31>(u1, u5),
        _mm256_permute2f128_ps::<0x31>(u2, u6),
        _mm256_permute2f128_ps::<0x31>(u3, u7),
    ]
}

/// Four rows a-d of 8 floats to their columns within each 128-bit half: `[c0, c1, c2,
/// c3]` with `c_j = a_j b_j c_j d_j | a_(j+4) b_(j+4) c_(j+4) d_(j+4)`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
#[inline]
fn columns_of_four(
    [r0, r1, r2, r3]: [std::arch::x86_64::__m256; 4],
) -> [std::arch::x86_64::__m256; 4] {
    use std::arch::x86_64::*;
    // t0 = a0 b0 a1 b1 | a4 b4 a5 b5 ; t1 = a2 b2 a3 b3 | a6 b6 a7 b7
    let (t0, t1) = (_mm256_unpacklo_ps(r0, r1), _mm256_unpackhi_ps(r0, r1));
    let (t2, t3) = (_mm256_unpacklo_ps(r2, r3), _mm256_unpackhi_ps(r2, r3));
    [
        _mm256_shuffle_ps::<0x44>(t0, t2),
        _mm256_shuffle_ps::<0xEE>(t0, t2),
        _mm256_shuffle_ps::<0x44>(t1, t3),
        _mm256_shuffle_ps::<0xEE>(t1, t3),
    ]
}

/// The AVX-512 kernel of [`transpose_16x16`]: pairs of rows interleaved by floats, then by
/// pairs of floats, then 128-bit quarters gathered across rows 0-7 and 8-15 twice.
///
/// # Safety
/// The CPU has AVX-512F; `src` holds 16 rows of 16 floats at stride `ss`, `dst` 16 rows of
/// 16 at `ds`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn transpose_16x16_avx512(src: *const f32, ss: usize, dst: *mut f32, ds: usize) {
    use std::arch::x86_64::*;
    // SAFETY: row i of the caller's source block.
    let r: [__m512; 16] = std::array::from_fn(|i| unsafe { _mm512_loadu_ps(src.add(i * ss)) });
    // t[2i], t[2i + 1]: rows 2i and 2i + 1 interleaved, each 128-bit quarter q holding
    // their columns 4q, 4q + 1 (low) or 4q + 2, 4q + 3 (high).
    let mut t = [_mm512_setzero_ps(); 16];
    for i in 0..8 {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // u[4i + c], quarter q: rows 4i..4i + 4 of column 4q + c.
    let mut u = [_mm512_setzero_ps(); 16];
    let pd = _mm512_castps_pd;
    for i in 0..4 {
        let (a0, a1, a2, a3) = (
            pd(t[4 * i]),
            pd(t[4 * i + 1]),
            pd(t[4 * i + 2]),
            pd(t[4 * i + 3]),
        );
        u[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
        u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
        u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
        u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
    }
    for c in 0..4 {
        // Rows 8g..8g + 8 of columns c and 8 + c (`even`), 4 + c and 12 + c (`odd`).
        let even = |g: usize| _mm512_shuffle_f32x4::<0x88>(u[8 * g + c], u[8 * g + 4 + c]);
        let odd = |g: usize| _mm512_shuffle_f32x4::<0xDD>(u[8 * g + c], u[8 * g + 4 + c]);
        let (e0, e1, o0, o1) = (even(0), even(1), odd(0), odd(1));
        let columns = [
            (c, _mm512_shuffle_f32x4::<0x88>(e0, e1)),
            (8 + c, _mm512_shuffle_f32x4::<0xDD>(e0, e1)),
            (4 + c, _mm512_shuffle_f32x4::<0x88>(o0, o1)),
            (12 + c, _mm512_shuffle_f32x4::<0xDD>(o0, o1)),
        ];
        for (j, v) in columns {
            // SAFETY: row j of the caller's destination block.
            unsafe { _mm512_storeu_ps(dst.add(j * ds), v) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `kernel(flag, ..)` on an `n x n` block at source stride `ss`, destination `ds`,
    /// with the flag off and, where the CPU has `feature`, on: every element where the
    /// definition puts it, the gaps between destination rows untouched.
    fn check_block(
        n: usize,
        (ss, ds): (usize, usize),
        has_feature: bool,
        kernel: impl Fn(bool, &[f32], usize, &mut [f32], usize),
    ) {
        let src: Vec<f32> = (0..(n - 1) * ss + n).map(|x| x as f32).collect();
        for flag in [false, has_feature] {
            let mut dst = vec![-1.0; (n - 1) * ds + n];
            kernel(flag, &src, ss, &mut dst, ds);
            for i in 0..n {
                for j in 0..n {
                    assert_eq!(dst[j * ds + i], (i * ss + j) as f32, "{n}: {flag} {i} {j}");
                }
            }
            for j in 0..n - 1 {
                assert!(dst[j * ds + n..(j + 1) * ds].iter().all(|&v| v == -1.0));
            }
        }
    }

    #[test]
    fn both_kernels_of_each_block_transpose_a_strided_block() {
        #[cfg(target_arch = "x86_64")]
        let (avx, avx512) = (
            std::arch::is_x86_feature_detected!("avx"),
            std::arch::is_x86_feature_detected!("avx512f"),
        );
        #[cfg(not(target_arch = "x86_64"))]
        let (avx, avx512) = (false, false);
        check_block(8, (11, 9), avx, transpose_8x8);
        check_block(16, (19, 21), avx512, transpose_16x16);
        if !avx512 {
            eprintln!("the 16 x 16 block's zmm kernel not run: this CPU has no AVX-512F");
        }
    }

    /// Fewer than eight rows, into k-major slots of `ds` floats, runs of one to three
    /// blocks: the run's values where they belong; past a slot's `rows` values, only
    /// zeros (AVX) or nothing; nothing after the run's last element. Then, written after
    /// it as `pack_a` does, the next k steps' run leaves a panel whose every slot holds
    /// its rows exactly.
    #[test]
    fn fewer_rows_land_in_their_slots_and_spill_only_zeros_inside_the_run() {
        let ss = 29;
        let src: Vec<f32> = (0..8 * ss + 16).map(|x| x as f32 + 1.0).collect();
        #[cfg(target_arch = "x86_64")]
        let avx = std::arch::is_x86_feature_detected!("avx");
        #[cfg(not(target_arch = "x86_64"))]
        let avx = false;
        for use_avx in [false, avx] {
            for rows in 1..=8 {
                for (ds, blocks) in [(rows, 1), (rows + 1, 2), (6, 3), (8, 1), (14, 2)] {
                    if ds < rows {
                        continue;
                    }
                    let what = format!("avx {use_avx} rows {rows} ds {ds} blocks {blocks}");
                    let cols = 8 * blocks;
                    let mut dst = vec![-1.0; 2 * cols * ds + 8];
                    transpose_rows_8(use_avx, &src, ss, (rows, blocks), &mut dst, ds);
                    let end = (cols - 1) * ds + rows;
                    for (at, &v) in dst.iter().enumerate() {
                        let (j, i) = (at / ds, at % ds);
                        if at < end && i < rows {
                            assert_eq!(v, src[i * ss + j], "{what}: ({i}, {j})");
                        } else if at < end {
                            assert!(v == 0.0 || v == -1.0, "{what}: spill {v} at {at}");
                        } else {
                            assert_eq!(v, -1.0, "{what}: past the run at {at}");
                        }
                    }
                    // The next run of the panel, k steps cols..2 * cols, after it.
                    let next = &mut dst[cols * ds..];
                    transpose_rows_8(use_avx, &src[cols..], ss, (rows, blocks), next, ds);
                    for j in 0..2 * cols {
                        for i in 0..rows {
                            assert_eq!(dst[j * ds + i], src[i * ss + j], "{what}: ({i}, {j})");
                        }
                    }
                }
            }
        }
    }
}
