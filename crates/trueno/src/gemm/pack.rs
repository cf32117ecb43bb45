//! Packing for the BLIS loops: MR-row panels of op(A) and NR-column panels of op(B),
//! each k-major, plus the per-thread buffer they live in.

use super::task::GemmTask;
use super::transpose8::{has_avx512, transpose_8x8, transpose_16x16, transpose_rows_8};
use crate::simd::Simd;

/// Packs rows `i0..i0+mc` x columns `p0..p0+kc` of op(A) into MR-row micro-panels, each
/// stored k-major (`MR` values per k), rows past `mc` zero. `avx`: see [`transpose_8x8`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) fn pack_a<S: Simd>(
    s: S,
    t: &GemmTask,
    dst: &mut [f32],
    i0: usize,
    mc: usize,
    p0: usize,
    kc: usize,
    mr: usize,
    avx: bool,
) {
    for (panel, out) in dst
        .chunks_exact_mut(kc * mr)
        .take(mc.div_ceil(mr))
        .enumerate()
    {
        let r0 = panel * mr;
        let rows = mr.min(mc - r0);
        if rows < mr {
            out.fill(0.0);
        }
        if t.ta {
            // op(A) rows are A columns: for each k a contiguous run of `rows` values.
            for p in 0..kc {
                let src = &t.a[(p0 + p) * t.lda + i0 + r0..][..rows];
                copy_run(s, src, &mut out[p * mr..p * mr + rows]);
            }
        } else {
            // A panel is the transpose of a rows x kc block: 8 x 8 blocks, the rows past
            // the last eight in blocks of 8 k steps, then the ragged k steps element by
            // element. Those rows first: their blocks' stores may spill zeros into the
            // next k step's first rows, which the 8 x 8 blocks then write.
            let (rows8, kc8) = (rows / 8 * 8, kc / 8 * 8);
            if rows8 < rows {
                let src = &t.a[(i0 + r0 + rows8) * t.lda + p0..];
                let run = (rows - rows8, kc8 / 8);
                transpose_rows_8(avx, src, t.lda, run, &mut out[rows8..], mr);
            }
            for g in (0..rows8).step_by(8) {
                let src = &t.a[(i0 + r0 + g) * t.lda + p0..];
                for p in (0..kc8).step_by(8) {
                    transpose_8x8(avx, &src[p..], t.lda, &mut out[p * mr + g..], mr);
                }
            }
            let row = |r: usize| &t.a[(i0 + r0 + r) * t.lda + p0..][..kc];
            for r in 0..rows {
                for (p, &v) in row(r).iter().enumerate().skip(kc8) {
                    out[p * mr + r] = v;
                }
            }
        }
    }
}

/// `dst = src` (equal lengths) in whole vectors and one partial one: the packing loops
/// copy runs of one micro-tile width, where a `copy_from_slice` (a libc `memmove` call)
/// cost more than the copy.
#[inline(always)]
fn copy_run<S: Simd>(s: S, src: &[f32], dst: &mut [f32]) {
    let mut d = dst.chunks_exact_mut(S::LANES);
    let mut c = src.chunks_exact(S::LANES);
    for (d, c) in (&mut d).zip(&mut c) {
        s.store(s.load(c), d);
    }
    let (d, c) = (d.into_remainder(), c.remainder());
    if !c.is_empty() {
        s.store_partial(s.load_partial(c, 0.0), d);
    }
}

/// Packs rows `p0..p0+kc` x columns `j0..j0+nc` of op(B) into NR-column micro-panels,
/// each k-major (`NR` values per k), columns past `nc` zero. `avx`: see [`transpose_8x8`].
/// `rows_one_stream`: rows of a row-major B read side by side when they make one stream
/// (`Blocking::pack_b_rows_one_stream`).
#[inline(always)]
pub(super) fn pack_b<S: Simd, const NV: usize>(
    s: S,
    t: &GemmTask,
    dst: &mut [f32],
    (p0, kc): (usize, usize),
    (j0, nc): (usize, usize),
    avx: bool,
    rows_one_stream: usize,
) {
    let nr = NV * S::LANES;
    let ps = panel_stride(kc, nr);
    let panels = nc.div_ceil(nr);
    if !nc.is_multiple_of(nr) {
        // The last panel's padding columns stay zero.
        dst[(panels - 1) * ps..(panels - 1) * ps + kc * nr].fill(0.0);
    }
    if t.tb {
        for (panel, out) in dst.chunks_mut(ps).take(panels).enumerate() {
            let c0 = panel * nr;
            let src = &t.b[(j0 + c0) * t.ldb + p0..];
            let isa = (avx, has_avx512(S::BACKEND));
            pack_b_panel_transposed(isa, src, t.ldb, (kc, nr, nr.min(nc - c0)), out);
        }
    } else {
        // Four rows at a time across every panel: each row of B is read once, front to
        // back, and four pages stream at once. Rows of a wide B are pages apart, so a
        // shorter visit per row (eight panels, 1 KiB) restarted the hardware prefetcher
        // on every row: on the Zen 4 VM that pass read 32x4096x4096's B at 8-9 GB/s,
        // whole rows one after another at 16 GB/s (the product 17.8 -> 14.5 ms). Four
        // whole rows side by side keep four of the prefetcher's streams busy where one
        // row left it idle between pages: on the Emerald Rapids VM, alternated in one
        // process, 32x4096x4096 1.09-1.23x, 128x4096x11008 1.02-1.11x, 128x11008x4096
        // 1.05-1.09x (two rounds at 0.83x and 0.95x: the VM's noise); eight rows ran
        // the same as four, sixteen 0.92-0.97x; square sizes within the noise.
        let full = nc / nr;
        let side_by_side = match rows_make_one_stream(t.ldb, nc) {
            true => rows_one_stream.max(1),
            false => PACK_B_ROWS,
        };
        for p in (0..kc).step_by(side_by_side) {
            let rows = side_by_side.min(kc - p);
            let row = |r: usize| &t.b[(p0 + p + r) * t.ldb + j0..][..nc];
            for panel in 0..full {
                for r in 0..rows {
                    let run = &row(r)[panel * nr..][..nr];
                    let d = &mut dst[panel * ps + (p + r) * nr..][..nr];
                    for v in 0..NV {
                        let l = v * S::LANES;
                        s.store(s.load(&run[l..]), &mut d[l..]);
                    }
                }
            }
            if full < panels {
                for r in 0..rows {
                    let rest = &row(r)[full * nr..];
                    let d = &mut dst[full * ps + (p + r) * nr..][..rest.len()];
                    copy_run(s, rest, d);
                }
            }
        }
    }
}

/// Packs one panel of a transposed B: its `cols` (at most `nr`) columns are rows of
/// `src`, `ldb` floats apart, each read for `kc` floats from its start, into `out`, k-major
/// (`nr` floats a k step; columns past `cols` untouched). 16 x 16 block transposes where
/// `zmm` (AVX-512, [`transpose_16x16`]), 8 x 8 ones for the rest, ragged parts element by
/// element. `avx`: see [`transpose_8x8`].
#[inline(always)]
pub(super) fn pack_b_panel_transposed(
    (avx, zmm): (bool, bool),
    src: &[f32],
    ldb: usize,
    (kc, nr, cols): (usize, usize, usize),
    out: &mut [f32],
) {
    let (kc8, cols8) = (kc / 8 * 8, cols / 8 * 8);
    // The 16 x 16 blocks' extent: none without `zmm`.
    let (kc16, cols16) = match zmm {
        true => (kc / 16 * 16, cols / 16 * 16),
        false => (0, 0),
    };
    for g in (0..cols16).step_by(16) {
        for p in (0..kc16).step_by(16) {
            transpose_16x16(zmm, &src[g * ldb + p..], ldb, &mut out[p * nr + g..], nr);
        }
    }
    for g in (0..cols8).step_by(8) {
        // k steps the 16 x 16 blocks did for these columns.
        let done = if g < cols16 { kc16 } else { 0 };
        for p in (done..kc8).step_by(8) {
            transpose_8x8(avx, &src[g * ldb + p..], ldb, &mut out[p * nr + g..], nr);
        }
    }
    for c in 0..cols {
        let skip = if c < cols8 { kc8 } else { 0 };
        for (p, &v) in src[c * ldb..][..kc].iter().enumerate().skip(skip) {
            out[p * nr + c] = v;
        }
    }
}

/// Floats from one packed B panel to the next: KC x NR, and 16 more (a cache line) where
/// that is a multiple of 4 KiB, so that the packing's stores into consecutive panels (a
/// row of each per source row) and the kernel's reads of them do not all map to the same
/// cache sets. Zen 5 VM, one thread, alternated twice with unpadded panels: 512^3 252-253
/// -> 258-260 GFLOP/s, 1024^3 239 -> 244, 128x4096x11008 199 -> 201-202, 128x11008x4096
/// 188-191 -> 192-193, 32x4096x4096 unchanged.
pub(super) fn panel_stride(kc: usize, nr: usize) -> usize {
    kc * nr
        + if (kc * nr * 4).is_multiple_of(4096) {
            16
        } else {
            0
        }
}

/// Rows of a row-major B the packing reads side by side (see `pack_b`), unless its rows
/// make one stream (`Blocking::pack_b_rows_one_stream`).
const PACK_B_ROWS: usize = 4;

/// The widest gap between one packed row's end and the next one's start that still reads
/// as one stream: on the Zen 5 VM, packing 4096 of a row's floats one row at a time, a
/// 256-byte gap ran at 28 GB/s as none did, a 1 KiB gap at 13-14 (four rows side by
/// side: 18).
const ONE_STREAM_GAP_BYTES: usize = 256;

/// Whether `cols` columns of each row of a row-major B, rows `ldb` floats apart, read as
/// one stream row after row (at most `ONE_STREAM_GAP_BYTES` between one row's piece and
/// the next's).
pub(super) fn rows_make_one_stream(ldb: usize, cols: usize) -> bool {
    ldb.saturating_sub(cols) * 4 <= ONE_STREAM_GAP_BYTES
}

thread_local! {
    /// Packing buffers, kept per thread between calls: a fresh multi-megabyte allocation
    /// per call costs a page fault per 4 KiB touched (measured: up to a third of a 1024^3
    /// product's time on the 2-vCPU VM).
    static PACK: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The calling thread's packing buffer, taken out of its slot (a nested GEMM on the same
/// thread finds the slot empty and grows its own). Give it back with `return_pack_buffer`.
/// No closure here: the kernel must stay inside its `#[target_feature]` function.
pub(super) fn take_pack_buffer() -> Vec<f32> {
    PACK.with(|c| c.take())
}

pub(super) fn return_pack_buffer(v: Vec<f32>) {
    PACK.with(|c| {
        let mut slot = c.borrow_mut();
        if v.len() > slot.len() {
            *slot = v;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simd::scalar::Scalar;

    /// A row-major A packs to MR-row k-major panels for every MR the kernels use (below,
    /// at and past eight rows, so the rows past the last eight take the block transposes
    /// of fewer rows), with a ragged last panel (its missing rows zero) and k steps past
    /// the last eight, against the layout written out element by element.
    #[test]
    fn row_major_a_packs_to_the_panel_layout_for_every_micro_tile_height() {
        #[cfg(target_arch = "x86_64")]
        let avx = std::arch::is_x86_feature_detected!("avx");
        #[cfg(not(target_arch = "x86_64"))]
        let avx = false;
        let (i0, p0, lda) = (2, 3, 61);
        let a: Vec<f32> = (0..48 * lda).map(|i| i as f32 + 0.25).collect();
        let mut c = [0.0f32];
        let t = GemmTask::for_test((48, 1, lda), (&a, lda), (&[], 1), c.as_mut_ptr());
        for use_avx in [false, avx] {
            for mr in [4usize, 6, 8, 12, 14] {
                for (mc, kc) in [(2 * mr + 3, 21), (mr, 16), (3 * mr, 8), (1, 5)] {
                    let panels = mc.div_ceil(mr);
                    let mut dst = vec![f32::NAN; panels * mr * kc];
                    pack_a(Scalar, &t, &mut dst, i0, mc, p0, kc, mr, use_avx);
                    for (at, &got) in dst.iter().enumerate() {
                        let (panel, p, r) = (at / (mr * kc), at % (mr * kc) / mr, at % mr);
                        let i = panel * mr + r;
                        let want = match i < mc {
                            true => a[(i0 + i) * lda + p0 + p],
                            false => 0.0,
                        };
                        assert_eq!(
                            got, want,
                            "avx {use_avx} mr {mr} mc {mc} kc {kc}: ({i}, {p})"
                        );
                    }
                }
            }
        }
    }

    /// A row-major B packs to the layout the micro-kernel reads, however many rows are
    /// read side by side: block element (p, j) at panel j / NR, k step p, column j % NR,
    /// columns past the block zero. Blocks whose rows make one stream (no gap, a 256-byte
    /// gap) and one that does not (1 KiB), a row count that is not a multiple of four,
    /// a ragged last panel.
    #[test]
    fn row_major_b_packs_to_the_panel_layout_whatever_the_rows_read_side_by_side() {
        const NV: usize = 4;
        let nr = NV; // Scalar: one lane a vector.
        let (p0, kc, j0, nc) = (3, 7, 0, 10);
        for gap in [0, 64, 256] {
            let ldb = nc + gap;
            let b: Vec<f32> = (0..(p0 + kc) * ldb).map(|i| i as f32 + 0.5).collect();
            let mut c = [0.0f32];
            let t = GemmTask::for_test((1, nc, p0 + kc), (&[], 1), (&b, ldb), c.as_mut_ptr());
            let ps = panel_stride(kc, nr);
            for rows in [1, 4] {
                let mut dst = vec![f32::NAN; ps * nc.div_ceil(nr)];
                pack_b::<Scalar, NV>(Scalar, &t, &mut dst, (p0, kc), (j0, nc), false, rows);
                for j in 0..nc.next_multiple_of(nr) {
                    for p in 0..kc {
                        let got = dst[j / nr * ps + p * nr + j % nr];
                        let want = if j < nc {
                            b[(p0 + p) * ldb + j0 + j]
                        } else {
                            0.0
                        };
                        assert_eq!(got, want, "gap {gap} rows {rows}: (p {p}, j {j})");
                    }
                }
            }
        }
    }
}
