//! Writing a register tile into C: `alpha * acc + beta * C` (beta 0 never reads C), row-
//! major or through C's transpose, clipped to C's edge; and C scaled by beta alone. Shared
//! by the BLIS loops (`kernel.rs`) and the unpacked small-product path (`small.rs`).

use super::task::{CPtr, GemmTask};
use super::transpose8::{has_avx, transpose_8x8, transpose_8x8_to};
use crate::simd::Simd;

/// Writes `alpha * acc + beta * C` into the `rows x cols` tile of C at `c`; `beta == 0`
/// never reads C.
#[inline(always)]
pub(super) fn store_tile<S: Simd, const MR: usize, const NV: usize>(
    s: S,
    acc: &[[S::V; NV]; MR],
    c: CPtr,
    rows: usize,
    cols: usize,
    alpha: f32,
    beta: f32,
) {
    let nr = NV * S::LANES;
    let (va, vb) = (s.splat(alpha), s.splat(beta));
    if c.trans {
        return store_tile_transposed::<S, MR, NV>(s, acc, c, rows, cols, alpha, beta);
    }
    if rows == MR && cols == nr {
        for (i, row_acc) in acc.iter().enumerate() {
            // SAFETY: the tile lies inside this task's block of C (rows <= MR, cols <= NR
            // are clipped to the block by the caller), and no other thread writes it.
            let dst = unsafe { std::slice::from_raw_parts_mut(c.ptr.add(i * c.stride), nr) };
            for (v, &a) in row_acc.iter().enumerate() {
                update_c(s, &mut dst[v * S::LANES..], a, va, vb, (alpha, beta));
            }
        }
        return;
    }
    store_rows::<S, MR, NV>(s, acc, c, rows, cols, (alpha, beta));
}

/// `store_tile` into a row-major C for any `rows x cols` within the tile: each row's
/// vectors up to `cols`, the last one through `Simd::store_tail`: a ragged edge's row is
/// one vector's arithmetic, not an element's.
#[inline(always)]
pub(super) fn store_rows<S: Simd, const MR: usize, const NV: usize>(
    s: S,
    acc: &[[S::V; NV]; MR],
    c: CPtr,
    rows: usize,
    cols: usize,
    (alpha, beta): (f32, f32),
) {
    let (va, vb) = (s.splat(alpha), s.splat(beta));
    let l = S::LANES;
    for (i, row_acc) in acc.iter().enumerate().take(rows) {
        // SAFETY: row i < rows of the tile, `cols` floats, inside this task's block of C
        // (the caller clips both to it); no other thread writes them.
        let dst = unsafe { std::slice::from_raw_parts_mut(c.ptr.add(i * c.stride), cols) };
        for (v, &a) in row_acc.iter().enumerate() {
            let (from, to) = (v * l, ((v + 1) * l).min(cols));
            if from >= to {
                break;
            }
            update_c(s, &mut dst[from..to], a, va, vb, (alpha, beta));
        }
    }
}

/// `alpha * acc`, the MR x NR tile the transposed store reads as floats (`tile_floats`).
#[inline(always)]
fn scaled_tile<S: Simd, const MR: usize, const NV: usize>(
    s: S,
    acc: &[[S::V; NV]; MR],
    va: S::V,
) -> [[S::V; NV]; MR] {
    let mut tile = *acc;
    for row in tile.iter_mut() {
        for v in row.iter_mut() {
            *v = s.mul(va, *v);
        }
    }
    tile
}

/// The tile's floats, row-major: element (i, j) at `i * NR + j`. (An array of the
/// largest tile's floats, zeroed for each tile, made the zeroing a third of a shallow x·Wᵀ's
/// time: 64x1024x32, whose 16 columns of C are written through the transpose.)
#[inline(always)]
fn tile_floats<S: Simd, const MR: usize, const NV: usize>(tile: &[[S::V; NV]; MR]) -> &[f32] {
    assert_eq!(
        std::mem::size_of::<S::V>(),
        4 * S::LANES,
        "a vector is LANES f32"
    );
    // SAFETY: every `Simd::V` is LANES f32 side by side (checked above), so the array is
    // MR * NV * LANES initialised f32, read through a shared borrow that lives as long as
    // `tile`'s.
    unsafe { std::slice::from_raw_parts(tile.as_ptr().cast::<f32>(), MR * NV * S::LANES) }
}

/// `store_tile` into a C laid out transposed (`CPtr::trans`): tile column j is a run of
/// `rows` floats at `c.ptr + j * stride`.
#[inline(always)]
fn store_tile_transposed<S: Simd, const MR: usize, const NV: usize>(
    s: S,
    acc: &[[S::V; NV]; MR],
    c: CPtr,
    rows: usize,
    cols: usize,
    alpha: f32,
    beta: f32,
) {
    let nr = NV * S::LANES;
    // Read as floats from a copy, never from `acc` itself: taking `acc`'s address here
    // kept every tile's accumulators in memory on the row-major path as well (16 spills
    // and 16 reloads a tile, stores that filled the store queue beside C's). Zen 4 VM,
    // one thread, `gemm_vs_faer` `BT=1`, two rounds of each build, trueno's GFLOP/s:
    // `x·Wᵀ` 64x4096x32 88.9-89.7 -> 96.2-96.5 (0.81x -> 0.87-0.88x faer), 32x1000x32
    // 89.0 -> 97.8, 128x4096x32 92.7-93.0 -> 100.9 (89.3 in a slow round); 64^3-1024^3
    // within the noise.
    let copy = match is_one(alpha) {
        true => *acc,
        false => scaled_tile::<S, MR, NV>(s, acc, s.splat(alpha)),
    };
    // Through `black_box`, so the copy is plain memory that the 8 x 8 blocks load from:
    // otherwise LLVM may split it into registers and build each block's rows lane by
    // lane (`vmovd`/`vinsertps` chains), as it did for the one-vector 8 x 16 tile once
    // the blocks went straight into C (16x4000x16 `x·Wᵀ` 97 -> 70 GFLOP/s, 16x4000x64
    // 100 -> 84-90, Zen 4 VM; with `black_box` 99 and 88-101).
    let tile = tile_floats::<S, MR, NV>(std::hint::black_box(&copy));
    if rows == MR && cols == nr && transposes_by_blocks(MR, nr) {
        // Whole tile: 8 x 8 blocks transposed into runs of eight floats of C. Where beta
        // is 0, straight into C, not through a staging block: Zen 4 VM, one thread,
        // `gemm-probe` alternating both call by call, ten rounds: `x·Wᵀ` 16x4000x16
        // +4.3%, 32x4000x32 +2.8%, 64x4000x128 +1.4%, 32x4096x128 +1.4%, 16x4000x64 and
        // 32x4000x128 even.
        let avx = has_avx(S::BACKEND);
        let blocks = (0..MR)
            .step_by(8)
            .flat_map(|i0| (0..nr).step_by(8).map(move |j0| (i0, j0)));
        if is_zero(beta) {
            for (i0, j0) in blocks {
                // SAFETY: rows i0..i0 + 8 of tile columns j0..j0 + 8 are eight runs of
                // eight floats of this task's block of C (a whole tile), no other
                // thread's, and the first lies at this offset; AVX only where `has_avx`
                // says the CPU has it.
                unsafe {
                    let dst = c.ptr.add(j0 * c.stride + i0);
                    transpose_8x8_to(avx, &tile[i0 * nr + j0..], nr, dst, c.stride);
                }
            }
            return;
        }
        let mut block = [0.0f32; 64];
        for (i0, j0) in blocks {
            transpose_8x8(avx, &tile[i0 * nr + j0..], nr, &mut block, 8);
            for (j, run) in block.chunks_exact(8).enumerate() {
                // SAFETY: rows i0..i0 + 8 of tile column j0 + j: eight consecutive
                // floats of this task's block of C (a whole tile), no other thread's.
                let dst = unsafe {
                    std::slice::from_raw_parts_mut(c.ptr.add((j0 + j) * c.stride + i0), 8)
                };
                for (d, &r) in dst.iter_mut().zip(run) {
                    *d = with_beta(*d, r, beta);
                }
            }
        }
        return;
    }
    for j in 0..cols {
        // SAFETY: tile column j is `rows` consecutive floats of this task's block of C
        // (transposed: (i, j) at j * stride + i), clipped by the caller; no other thread
        // writes them.
        let dst = unsafe { std::slice::from_raw_parts_mut(c.ptr.add(j * c.stride), rows) };
        for (i, d) in dst.iter_mut().enumerate() {
            let r = tile[i * nr + j];
            *d = with_beta(*d, r, beta);
        }
    }
}

/// Whether `store_tile_transposed` writes a whole `mr x nr` tile through 8 x 8 blocks
/// (runs of eight floats of C) rather than element by element.
pub(super) const fn transposes_by_blocks(mr: usize, nr: usize) -> bool {
    mr.is_multiple_of(8) && nr.is_multiple_of(8)
}

/// `x == 0.0` (either sign), tested on the bits. The stores' tests of alpha and beta are
/// integer compares, so that no float constant sits in a vector register across the
/// micro-kernel's loop that the store follows: AVX2 has sixteen, and the 6x16 tile's loop
/// needs fifteen. With 0.0 held there for `beta == 0.0`, the allocator kept one of the
/// twelve accumulators on the stack (a load, FMA and store a k step) in the loop that asks
/// for the next B panel's rows, since de9e5f3 moved its choices. Zen 3 VM (2026-12-07),
/// `gemm_vs_faer`, the build before and after, alternated (trueno's GFLOP/s): one thread
/// 32x4096x4096 40-42 -> 60-66 (0.71-0.74x -> 1.14-1.16x faer), 128x4096x11008 40-42 ->
/// 83-84 (0.51-0.53x -> 1.04-1.06x), its `x·Wᵀ` 41 -> 85-89; two threads 32x4096x4096
/// 77-80 -> 117-123, 128x4096x11008 75-77 -> 149-157; the squares and shallow `x·Wᵀ`
/// within the noise.
#[inline(always)]
fn is_zero(x: f32) -> bool {
    x.to_bits() << 1 == 0
}

/// `x == 1.0`, tested on the bits (see `is_zero`).
#[inline(always)]
fn is_one(x: f32) -> bool {
    x.to_bits() == 1.0f32.to_bits()
}

/// `r + beta * d` for one element of C; beta 0 never reads `d`, so NaN in C does not leak.
#[inline(always)]
pub(super) fn with_beta(d: f32, r: f32, beta: f32) -> f32 {
    if is_zero(beta) { r } else { beta.mul_add(d, r) }
}

/// `d = alpha * acc + beta * d` for one vector of C (or its first `d.len()` lanes when
/// that is under a vector, through `Simd::load_tail`/`store_tail`); `beta == 0` never
/// reads `d`, so NaN in C does not leak. `alpha == 1` skips the multiply: a tile's 16
/// multiplies on AVX-512 are 3% of a k-32 tile's FMAs, and on Zen 4 they share the FMA
/// pipes (Zen 4 VM, one thread, `gemm-probe` alternating both call by call: 256x256x32
/// +2.7-2.9%, 128x4096x32 `x·Wᵀ` +2.0%, 64x4096x32 `x·Wᵀ` +1.4-1.8%, 128^3 +0.6%).
#[inline(always)]
pub(super) fn update_c<S: Simd>(
    s: S,
    d: &mut [f32],
    acc: S::V,
    va: S::V,
    vb: S::V,
    (alpha, beta): (f32, f32),
) {
    let prod = if is_one(alpha) { acc } else { s.mul(va, acc) };
    if d.len() >= S::LANES {
        let out = if is_zero(beta) {
            prod
        } else {
            s.fma(vb, s.load(d), prod)
        };
        s.store(out, d);
    } else {
        let out = if is_zero(beta) {
            prod
        } else {
            s.fma(vb, s.load_tail(d), prod)
        };
        s.store_tail(out, d);
    }
}

/// `row = beta * row` (zeros when beta is 0, without reading it).
#[inline(always)]
pub(super) fn scale_row(row: &mut [f32], beta: f32) {
    if beta == 0.0 {
        row.fill(0.0);
    } else if beta != 1.0 {
        row.iter_mut().for_each(|v| *v *= beta);
    }
}

/// `C = beta * C` (zero when beta is 0, without reading C): the whole product when k = 0.
pub(super) fn scale_c(t: &GemmTask) {
    if t.c.trans {
        for i in 0..t.m {
            for j in 0..t.n {
                // SAFETY: element (i, j) of this task's block of C.
                let d = unsafe { &mut *t.c.at(i, j).ptr };
                *d = if t.beta == 0.0 { 0.0 } else { *d * t.beta };
            }
        }
        return;
    }
    for i in 0..t.m {
        // SAFETY: row i of this task's block of C.
        let row = unsafe { std::slice::from_raw_parts_mut(t.c.ptr.add(i * t.c.stride), t.n) };
        scale_row(row, t.beta);
    }
}

#[cfg(test)]
mod tests {
    use super::{is_one, is_zero};

    /// The bit tests agree with IEEE comparison (the reference) on the edge values and
    /// on bit patterns spread over every exponent, NaNs and subnormals included.
    #[test]
    fn bit_tests_match_float_comparison() {
        let edges = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            f32::MIN_POSITIVE,
            -f32::MIN_POSITIVE / 2.0,
            f32::from_bits(1),
            f32::from_bits(0x8000_0001),
            1.0 + f32::EPSILON,
            1.0 - f32::EPSILON / 2.0,
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -1.5,
        ];
        let spread = (0..1u32 << 16).map(|i| f32::from_bits(i.wrapping_mul(0x9E37_79B9)));
        for x in edges.into_iter().chain(spread) {
            assert_eq!(
                is_zero(x),
                x == 0.0,
                "is_zero({x:e}) bits {:#x}",
                x.to_bits()
            );
            assert_eq!(is_one(x), x == 1.0, "is_one({x:e}) bits {:#x}", x.to_bits());
        }
    }
}
