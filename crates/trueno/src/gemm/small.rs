//! Products without packing (small ones, and those whose B the tiles read from L1 or L2
//! all the same): the micro-kernel's register tiles straight over op(A) and the rows of
//! B (a transposed B first transposed into a buffer), axpys over B's rows for fewer than
//! four rows of C (up to eight over a B past L2), dot products for A·x and the narrowest
//! x·Wᵀ.

use super::blocking::{CacheSizes, CoreFamily};
use super::micro::{APanel, BPanel, micro_tile, micro_tile_tail};
use super::pack::{pack_b_panel_transposed, return_pack_buffer, take_pack_buffer};
use super::store::{scale_c, scale_row, store_rows, with_beta};
use super::sweep::{EDGE_ROWS, WIDE_EDGE_ROWS, edge_tile_rows};
use super::task::GemmTask;
use super::transpose8::{has_avx, has_avx512};
use crate::backend::Backend;
use crate::simd::{OutOfLine, Simd};

/// Whether a product past `SMALL_MACS` (of four rows or more of C) still skips packing:
/// where the unpacked grid's tiles read B's panels from L2 or L1 all the same.
///
/// A row-major B within a third of L2 (and 192 KiB): packed, it would be copied only to
/// be read from there. Zen 3 VM (512 KiB L2, AVX2 6x16), one thread, interleaved against
/// faer, unpacked against packed, two rounds: 64^3 1.01-1.02x -> 1.06-1.07x, 100^3
/// 0.96-0.97x -> 1.03-1.04x, 128^3 1.01x -> 1.07x, 160^3 0.98x -> 1.03x, 192^3 0.97x -> 1.02-1.03x,
/// 256x128x256 0.95x -> 1.02-1.04x, 512x64x512 1.08-1.09x -> 1.13-1.15x, 1000x40x1000
/// 1.01-1.09x -> 1.08-1.12x (B 160 KB). Past it, packed won: 256^3 (256 KB) 0.97x ->
/// 0.94-1.01x, 300^3 0.97-0.99x -> 0.82-0.87x, 64x1024x64 0.95-0.97x -> 0.76-0.77x,
/// 128x512x512 0.94-0.95x -> 0.69-0.70x, 16x64x2048 0.91-0.93x -> 0.88-0.91x.
///
/// At most 192 KiB whatever L2: on an H200 host's Xeon (48 KiB L1, 2 MiB L2, AVX-512
/// 8x32), a shared and noisy core, one thread, the same binaries alternated three times,
/// 300^3 (360 KB) lost in every round (0.87-0.93x -> 0.71-0.92x) and 224^3 and 256^3 were
/// mixed, where a third of L2 would take all three.
///
/// Judged by the span B's rows take where they lie (`k` rows `ldb` floats apart), not by
/// its `n` columns: a band of a wider B's columns (a thread's part, a view) reads a strip
/// of lines a row apart that the whole B's span maps to L2's sets, not the band's, and
/// as the band's it ran erratically. Zen 3 VM, two threads, 256^3 cut into two bands of
/// 128 columns, criterion's mean (`gemm/trueno-all/256`) alternated twice: read in place
/// 243 and 222 µs, packed 210 and 212 µs, the two threads in bands of rows 231 and 222.
///
/// A transposed B (x·Wᵀ) within half of L1, which the grid first transposes into a
/// buffer (`transposed_b_grid`): the same VM, one round, 64^3 0.93x -> 0.95x, and further
/// the transposition cost more than packing saved (100^3 0.95x -> 0.96x, 128^3 1.00x ->
/// 0.93x, 192^3 0.96x -> 0.91x).
///
/// Only on an ISA with masked tail loads (`Simd::MASKED_TAIL`, given with its `lanes`)
/// or for C a whole number of vectors wide: the right edge's tiles otherwise copy each k
/// step's tail through the stack, which ran the unpacked 100^3 at half speed on AVX2.
pub(crate) fn skips_packing(t: &GemmTask, c: CacheSizes, (lanes, masked): (usize, bool)) -> bool {
    let b_bytes = match t.tb {
        true => t.k.saturating_mul(t.n).saturating_mul(4),
        false => t.k.saturating_mul(t.ldb.max(t.n)).saturating_mul(4),
    };
    let reach = if t.tb {
        c.l1 / 2
    } else {
        (c.l2 / 3).min(B_REACH_MAX)
    };
    t.m >= 4 && b_bytes <= reach && (masked || t.n.is_multiple_of(lanes))
}

/// See [`skips_packing`].
const B_REACH_MAX: usize = 192 << 10;

/// Rows of the unpacked grid's two-vector tile on backend `b`: those of its default
/// micro-kernel in `micro_shapes!`, 8 where there are 32 vector registers and 6 where
/// there are 16 (12 accumulators, two B vectors and a broadcast), so that 12-16
/// independent sums hide the FMA latency.
const fn grid_rows(b: Backend) -> usize {
    match b {
        Backend::Avx512 | Backend::Neon => 8,
        _ => 6,
    }
}

/// C from op(A) and a row-major B read where they lie, tile by tile: R x NV tiles across,
/// the right edge's narrower tile read with `Simd::load_tail`, and the bottom edge's rows
/// repeating the last one (their sums discarded). The micro-kernel's own loop, out of
/// line (`Simd::outlined`) so that it has the registers to itself. (An earlier form, 4 x 4
/// vectors across with the edge copied through the stack each k step, ran 32^3 at
/// 0.76x and 33^3 at 0.30x faer on the Zen 3 VM.)
struct SmallGrid<'a, 'b, const R: usize, const NV: usize>(&'a GemmTask<'b>);

impl<S: Simd, const R: usize, const NV: usize> OutOfLine<S> for SmallGrid<'_, '_, R, NV> {
    type Out = ();
    #[inline(always)]
    fn run(self, s: S) {
        let t = self.0;
        let (l, nr) = (S::LANES, NV * S::LANES);
        let (rs, cs) = if t.ta { (1, t.lda) } else { (t.lda, 1) };
        let full = t.n / nr * nr;
        let edge = t.n - full;
        let ab = (t.alpha, t.beta);
        for i0 in (0..t.m).step_by(R) {
            let rows = (t.m - i0).min(R);
            let a = APanel {
                data: &t.a[i0 * rs..],
                rs,
                cs,
                rows,
            };
            for j0 in (0..full).step_by(nr) {
                let b = BPanel {
                    data: &t.b[j0..],
                    stride: t.ldb,
                };
                let acc = micro_tile::<S, R, NV, false>(s, t.k, a, b, None, &mut [], None);
                store_rows::<S, R, NV>(s, &acc, t.c.at(i0, j0), rows, nr, ab);
            }
            if edge == 0 {
                continue;
            }
            let b = BPanel {
                data: &t.b[full..],
                stride: t.ldb,
            };
            let (c, tail) = (t.c.at(i0, full), edge - (edge - 1) / l * l);
            // The grids run have NV <= 2: the edge is one vector, whole or not, or two.
            match (edge <= l, tail == l) {
                (true, true) => {
                    let acc = micro_tile::<S, R, 1, false>(s, t.k, a, b, None, &mut [], None);
                    store_rows::<S, R, 1>(s, &acc, c, rows, edge, ab);
                }
                (true, false) => {
                    let acc = micro_tile_tail::<S, R, 1>(s, t.k, a, b, tail);
                    store_rows::<S, R, 1>(s, &acc, c, rows, edge, ab);
                }
                (false, _) => {
                    let acc = micro_tile_tail::<S, R, NV>(s, t.k, a, b, tail);
                    store_rows::<S, R, NV>(s, &acc, c, rows, edge, ab);
                }
            }
        }
    }
}

/// A product without packing: the unpacked grid over op(A) and a row-major B (or B
/// transposed into a buffer, for four rows of C or more, or two or three over more than
/// a vector of columns), axpys over B's rows for fewer rows, dot products for one column
/// of C or the other transposed-B products. Returns false for the layout it does not
/// cover (A and B both transposed where the dot products would run).
#[inline(always)]
pub(crate) fn gemm_small<S: Simd>(s: S, t: &GemmTask) -> bool {
    if t.m == 0 || t.n == 0 {
        return true;
    }
    if t.k == 0 {
        scale_c(t);
        return true;
    }
    // One column of C with a contiguous B column is A·x: dot products, like B transposed.
    let column_vector = t.n == 1 && !t.tb && t.ldb == 1;
    if takes_row_axpys(t, CacheSizes::detect().l2) {
        // A few rows of C (xᵀ·A and its kin): stream B once, adding its rows, scaled,
        // into C's rows.
        match t.m {
            1 => row_axpys::<S, 1>(s, t),
            2 => row_axpys::<S, 2>(s, t),
            3 => row_axpys::<S, 3>(s, t),
            4 => row_axpys::<S, 4>(s, t),
            5 => row_axpys::<S, 5>(s, t),
            6 => row_axpys::<S, 6>(s, t),
            7 => row_axpys::<S, 7>(s, t),
            _ => row_axpys::<S, AXPY_MAX_ROWS>(s, t),
        }
        return true;
    }
    // Two or three rows as well, where C is wider than a vector (below it the dot
    // products won: 2x8x200 at 21.3 GFLOP/s against 11.6 through the grid).
    if t.tb && t.n > 1 && (t.m >= 4 || (t.m >= 2 && t.n > S::LANES)) {
        transposed_b_grid(s, t);
        return true;
    }
    if !t.tb && !column_vector {
        grid(s, t);
        return true;
    }
    if t.ta {
        return false;
    }
    dots(s, t);
    true
}

/// Rows of B one pass of `row_axpys` adds.
const AXPY_ROWS: usize = 4;

/// Rows of B one pass of `row_axpys` adds on a Zen core where B's rows span more than L2
/// (each pass loads and stores C's rows, from L2 once they outgrow L1: twice the rows,
/// half the traffic). Zen 4 VM, one thread, against faer, eight rows a pass against
/// four, processes alternated twice (trueno's best GFLOP/s): 1x4096x4096 16.0 -> 17.6,
/// 2x4096x4096 22.2 -> 29.0, 3x4096x4096 30.1 -> 40.2, 4x4096x4096 31.5 -> 35.3,
/// 6x4096x4096 40.8 -> 53.4, 8x4096x4096 44.9 -> 55.2 (1.23-1.36x -> 1.42-1.55x faer),
/// 8x11008x4096 58.7 -> 77.2, 4x4096x11008 34.1 -> 45.3, 8x1024x4096 58.6 -> 86.1,
/// 8x2048x2048 44.8 -> 59.0, 5x1000x3000 88.5 -> 94.4. Within L2 four stay (3x256x1024
/// 87.3 against 81.8, 2x512x512 even). Two rows a pass lost (8x4096x4096 35 -> 21). On
/// the Emerald Rapids VM eight were mixed (`takes_row_axpys`), so other cores keep four.
/// On the Zen 3 VM (AVX2, 512 KiB L2; 2026-12-07, the same runs) mixed too, so it stays:
/// 2x4096x4096 20.1-22.4 -> 23.0-24.8, 8x4096x4096 24.1-25.2 -> 27.3-36.0, 4x4096x4096
/// 36.9-41.3 -> 32.2-33.7, 1x4096x4096, 8x11008x4096 and 8x1024x4096 within the noise.
const AXPY_ROWS_PAST_L2: usize = 8;

/// The most rows of C `row_axpys` takes (where B lies past L2).
const AXPY_MAX_ROWS: usize = 8;

/// Whether a product runs as `row_axpys`: a row-major B (not one contiguous column, A·x)
/// under fewer than four rows of C whatever its size, or under up to `AXPY_MAX_ROWS`
/// where B's rows span more than L2 (it streams from L3 or memory, and one pass over it
/// in order bounds the product). Packed, B is first copied, a pass of its own at these
/// heights, then run by tiles with most of their rows empty; a B within L2 still runs
/// faster that way from four rows. Emerald Rapids VM (AVX-512), one thread, against
/// faer on the same bytes, packed -> axpys, two rounds: 2x4096x4096 14.6-14.7 -> 26.3-26.7
/// GFLOP/s, 3x4096x4096 21.2-21.7 -> 34.5-35.4, 2x512x512 66.4-66.8 -> 113.9-121.4,
/// 3x256x1024 86.6-98.6 -> 122.4-136.0, 4x4096x4096 27.6-27.7 -> 37.1-39.3,
/// 6x4096x4096 30.9-33.8 -> 42.5-50.5, 8x4096x4096 39.8-41.7 -> 50.6-59.9, 8x11008x4096
/// 31.0-31.1 -> 47.3, 8x1024x1024 73.1-74.6 -> 94.7-97.2; within L2 packed stays ahead
/// from four rows (8x512x512 163.0-169.0 against 124.1-124.9, 4x512x512 130.2-130.7
/// against 126.2). Blocks of C's columns (512 or 1024 a pass over all of B's rows, to
/// keep C's rows in L1) ran no faster from memory and slower within L2; eight of B's
/// rows a pass from four rows of C were mixed (6x4096x4096 and 8x4096x4096 1.29-1.38x ->
/// 1.54-1.68x faer, 8x1024x1024 1.51-1.60x -> 1.36-1.49x, 8x11008x4096 1.76-2.05x ->
/// 1.66-1.95x). Two threads take ranges of k (`api::split_k_pays`).
pub(super) fn takes_row_axpys(t: &GemmTask, l2: usize) -> bool {
    let column_vector = t.n == 1 && t.ldb == 1;
    let past_l2 = b_rows_bytes(t) > l2;
    !t.tb && !column_vector && (t.m < 4 || (t.m <= AXPY_MAX_ROWS && past_l2))
}

/// The bytes B's `k` rows span, gaps included: what `row_axpys` streams.
fn b_rows_bytes(t: &GemmTask) -> usize {
    t.k.saturating_mul(t.ldb).saturating_mul(4)
}

/// `xᵀ·A` for `M` (1 to `AXPY_MAX_ROWS`) rows of C over a row-major B: each of B's rows
/// read once, `AXPY_ROWS` at a time (`AXPY_ROWS_PAST_L2` over a B past L2 on Zen), each
/// vector of C's rows loaded, updated by those rows in order and stored. One row a pass
/// loaded and stored all of C for each row of B and read one stream: 1x4096x4096 ran at
/// 12.5 GFLOP/s (25 GB/s, against 27-29 for a plain read) where faer's reached 13.5 on
/// the same bytes (Emerald Rapids VM, criterion); four a pass, 13.9 against 13.9. The
/// same fused multiply-adds in the same order as one row a pass, so the same result.
#[inline(always)]
fn row_axpys<S: Simd, const M: usize>(s: S, t: &GemmTask) {
    let n = t.n;
    let mut rows: [&mut [f32]; M] = std::array::from_fn(|i| {
        // SAFETY: row i of this task's block of C; rows are `stride >= n` apart, so the
        // M slices do not overlap.
        unsafe { std::slice::from_raw_parts_mut(t.c.ptr.add(i * t.c.stride), n) }
    });
    for row in rows.iter_mut() {
        scale_row(row, t.beta);
    }
    let mut p = 0;
    let past_l2 = b_rows_bytes(t) > CacheSizes::detect().l2;
    if past_l2 && CoreFamily::detect() == CoreFamily::Zen {
        while p + AXPY_ROWS_PAST_L2 <= t.k {
            axpy_pass::<S, M, AXPY_ROWS_PAST_L2>(s, t, &mut rows, p);
            p += AXPY_ROWS_PAST_L2;
        }
    }
    while p + AXPY_ROWS <= t.k {
        axpy_pass::<S, M, AXPY_ROWS>(s, t, &mut rows, p);
        p += AXPY_ROWS;
    }
    for p in p..t.k {
        axpy_pass::<S, M, 1>(s, t, &mut rows, p);
    }
}

/// C's `M` rows += `alpha * A[i, p + g] * B[p + g, ..]` for `g < G`, in that order.
#[inline(always)]
fn axpy_pass<S: Simd, const M: usize, const G: usize>(
    s: S,
    t: &GemmTask,
    rows: &mut [&mut [f32]; M],
    p: usize,
) {
    let (n, l) = (t.n, S::LANES);
    let w: [[f32; G]; M] =
        std::array::from_fn(|i| std::array::from_fn(|g| t.alpha * t.a_at(i, p + g)));
    // Loops, not `map`/`from_fn`: a closure is compiled without the caller's target
    // features, so a SIMD call inside it may stay a call.
    let mut wv = [[s.zero(); G]; M];
    for (wv, w) in wv.iter_mut().zip(&w) {
        for g in 0..G {
            wv[g] = s.splat(w[g]);
        }
    }
    let b: [&[f32]; G] = std::array::from_fn(|g| &t.b[(p + g) * t.ldb..][..n]);
    let whole = n / l * l;
    for j in (0..whole).step_by(l) {
        axpy_vector::<S, M, G, false>(s, rows, &wv, &b, j..j + l);
    }
    if whole == n {
        return;
    }
    if S::MASKED_TAIL {
        // The ragged columns as one masked vector (the lanes past C's edge neither read
        // nor written).
        return axpy_vector::<S, M, G, true>(s, rows, &wv, &b, whole..n);
    }
    for j in whole..n {
        for (row, w) in rows.iter_mut().zip(&w) {
            for g in 0..G {
                row[j] = w[g].mul_add(b[g][j], row[j]);
            }
        }
    }
}

/// One vector of columns `cols` of C's rows += `wv[i][g] * B's row g` for `g < G`, in
/// that order: a whole vector, or with `TAIL` the ragged last one through masked loads
/// and stores (`Simd::load_tail`).
#[inline(always)]
fn axpy_vector<S: Simd, const M: usize, const G: usize, const TAIL: bool>(
    s: S,
    rows: &mut [&mut [f32]; M],
    wv: &[[S::V; G]; M],
    b: &[&[f32]; G],
    cols: std::ops::Range<usize>,
) {
    let mut bv = [s.zero(); G];
    for g in 0..G {
        bv[g] = load_cols::<S, TAIL>(s, &b[g][cols.clone()]);
    }
    for (row, wv) in rows.iter_mut().zip(wv) {
        let c = &mut row[cols.clone()];
        let mut acc = load_cols::<S, TAIL>(s, c);
        for g in 0..G {
            acc = s.fma(wv[g], bv[g], acc);
        }
        match TAIL {
            true => s.store_tail(acc, c),
            false => s.store(acc, c),
        }
    }
}

/// A whole vector from `v`, or with `TAIL` its first `v.len()` lanes (masked).
#[inline(always)]
fn load_cols<S: Simd, const TAIL: bool>(s: S, v: &[f32]) -> S::V {
    match TAIL {
        true => s.load_tail(v),
        false => s.load(v),
    }
}

/// `op(B)` transposed into the thread's packing buffer as a row-major k x n matrix, then
/// the unpacked grid over it: each of B's rows is a column of the tiles' panels, which
/// the grid cannot read in place. (Each element of C as a dot product of a row of A and
/// one of B, as before, ran 33^3 at 1.4 GFLOP/s; the packed path at 40.)
#[inline(always)]
fn transposed_b_grid<S: Simd>(s: S, t: &GemmTask) {
    // Rows a multiple of 1 KiB apart fall in a quarter of L1's sets or fewer: a line more
    // apart, they spread. Zen 3 VM, one thread, x·Wᵀ, padded against not, two rounds:
    // 4x256x100 20.7-21.3 -> 30.7 GFLOP/s, 8x256x54 29.5-29.8 -> 36.3, 6x512x30 23.5-23.9
    // -> 30.3-30.5.
    let ldb = if t.n.is_multiple_of(256) {
        t.n + 16
    } else {
        t.n
    };
    let len = (t.k - 1) * ldb + t.n;
    let mut buf = take_pack_buffer();
    if buf.len() < len {
        buf.resize(len, 0.0);
    }
    let isa = (has_avx(S::BACKEND), has_avx512(S::BACKEND));
    pack_b_panel_transposed(isa, t.b, t.ldb, (t.k, ldb, t.n), &mut buf[..len]);
    let plain = GemmTask {
        b: &buf[..len],
        ldb,
        tb: false,
        ..*t
    };
    grid(s, &plain);
    return_pack_buffer(buf);
}

/// The unpacked grid for a row-major B (see `SmallGrid`), its tile chosen for C's width.
#[inline(always)]
fn grid<S: Simd>(s: S, t: &GemmTask) {
    // A C at most one vector wide: 8 x 1 tiles, the fewest rows whose sums keep two FMA
    // pipes of latency 4 busy. 12 x 1 (as many accumulators as 6 x 2) computed up to 11
    // discarded rows: Zen 3 VM, one thread, 8x8x64 37.2 GFLOP/s against 54.6 for 8 x 1,
    // 1024x8x64 66.5 against 77.4.
    if t.n <= S::LANES {
        return s.outlined(SmallGrid::<8, 1>(t));
    }
    // Whole bands of the grid's rows, then a ragged last band in the packed loops' edge
    // tiles (`sweep::edge_tile_rows`).
    let rows = grid_rows(S::BACKEND);
    let whole = t.m / rows * rows;
    let body = t.split(0, whole, 0, t.n);
    match (rows, whole > 0) {
        (_, false) => {}
        (8, true) => s.outlined(SmallGrid::<8, 2>(&body)),
        (_, true) => s.outlined(SmallGrid::<6, 2>(&body)),
    }
    let edge = t.split(whole, t.m, 0, t.n);
    match (t.m - whole, edge_tile_rows(rows, t.m - whole)) {
        (0, _) => {}
        (_, EDGE_ROWS) => s.outlined(SmallGrid::<EDGE_ROWS, 2>(&edge)),
        (_, WIDE_EDGE_ROWS) => s.outlined(SmallGrid::<WIDE_EDGE_ROWS, 2>(&edge)),
        _ => s.outlined(SmallGrid::<8, 2>(&edge)),
    }
}

/// C's elements as dot products of rows of A and of B (B transposed, or one contiguous
/// column): A·x, and products of fewer than four rows.
#[inline(always)]
fn dots<S: Simd>(s: S, t: &GemmTask) {
    let store = |i: usize, j: usize, d: f64| {
        // SAFETY: element (i, j) of this task's block of C.
        let c = unsafe { &mut *t.c.ptr.add(i * t.c.stride + j) };
        *c = with_beta(*c, t.alpha * d as f32, t.beta);
    };
    // B transposed (or one contiguous column): row j of op(B)ᵀ is contiguous.
    let mut i0 = 0;
    if t.n == 1 {
        // A·x: four rows of A a pass (x loaded once for four rows' loads, four streams
        // for the prefetcher; one row at a time read 4096^2 at 86% of the read bandwidth).
        let a_row = |i: usize| &t.a[i * t.lda..][..t.k];
        i0 = dots_by_four(s, t.m, a_row, &t.b[..t.k], |i, d| store(i, 0, d));
    }
    for i in i0..t.m {
        let arow = &t.a[i * t.lda..][..t.k];
        // Four rows of op(B)ᵀ a pass against this row of A, as A·x takes four of A's: a
        // GEMV x·Wᵀ read W one row at a time at 13.4 GFLOP/s where faer, on the same
        // bytes, read it at 14.6 (Emerald Rapids VM, criterion, 1x4096x4096 `x·Wᵀ`).
        // Four a pass, interleaved against faer: 1x4096x4096 1.00-1.03x, 1x11008x4096
        // 0.96-1.08x -> 1.34-1.36x, 1x1000x300 0.86-0.89x -> 0.99-1.03x.
        let b_row = |j: usize| &t.b[j * t.ldb..][..t.k];
        let j0 = dots_by_four(s, t.n, b_row, arow, |j, d| store(i, j, d));
        for j in j0..t.n {
            let brow = &t.b[j * t.ldb..][..t.k];
            // The engine's blocked dot product (the GEMV loop): several accumulators,
            // bounded summation error.
            store(
                i,
                j,
                crate::ops::reduce::reduce2_vec(s, crate::ops::Reduce2Op::Dot, arow, brow),
            );
        }
    }
}

/// The dot products of rows `0..4q` (`row(r)`, q the most whole fours in `rows`) with
/// `x`, four rows a pass (`dot4_vec`: x loaded once for four rows, four streams for the
/// prefetcher), each handed to `put(r, dot)`; returns `4q`, the first row left.
#[inline(always)]
fn dots_by_four<'a, S: Simd>(
    s: S,
    rows: usize,
    row: impl Fn(usize) -> &'a [f32],
    x: &[f32],
    mut put: impl FnMut(usize, f64),
) -> usize {
    let mut r0 = 0;
    while r0 + 4 <= rows {
        let four: [&[f32]; 4] = [row(r0), row(r0 + 1), row(r0 + 2), row(r0 + 3)];
        let d = crate::ops::reduce::dot4_vec(s, four, x);
        for (r, &d) in d.iter().enumerate() {
            put(r0 + r, d);
        }
        r0 += 4;
    }
    r0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn few_rows_over_a_row_major_b_run_as_axpys_up_to_eight_past_l2() {
        let l2 = 2 << 20;
        let axpys = |(m, n, k): (usize, usize, usize), tb: bool, ldb: usize| {
            let t = GemmTask::for_test((m, n, k), (&[], k), (&[], ldb), std::ptr::null_mut());
            takes_row_axpys(&GemmTask { tb, ..t }, l2)
        };
        // Fewer than four rows whatever B's size; not a transposed B (x·Wᵀ).
        assert!(axpys((1, 64, 64), false, 64) && axpys((3, 16, 8), false, 16));
        assert!(!axpys((2, 4096, 4096), true, 4096));
        // One contiguous column of B is A·x (dot products), not an axpy.
        assert!(!axpys((2, 1, 300), false, 1) && axpys((2, 1, 300), false, 5));
        // Four to eight rows only where B's rows span more than L2: 512 x 1024 floats is
        // exactly 2 MiB; one row more, or the same rows in a wider matrix, is past it.
        assert!(!axpys((4, 1024, 512), false, 1024) && axpys((4, 1024, 513), false, 1024));
        assert!(axpys((8, 512, 512), false, 1040) && !axpys((8, 512, 512), false, 512));
        assert!(!axpys((9, 4096, 4096), false, 4096) && axpys((8, 4096, 4096), false, 4096));
    }

    #[test]
    fn products_skip_packing_where_b_is_within_a_third_of_l2_or_transposed_half_of_l1() {
        let zen3 = CacheSizes {
            l1: 32 << 10,
            l2: 512 << 10,
            l3: 32 << 20,
        };
        let skips = |(m, n, k): (usize, usize, usize), tb: bool| {
            let t = GemmTask::for_test((m, n, k), (&[], k), (&[], n), std::ptr::null_mut());
            skips_packing(&GemmTask { tb, ..t }, zen3, (8, true))
        };
        // Row-major B: 192^3 (144 KiB) and 1000x40x1000 (160 KB) within 512 KiB / 3,
        // 256^3 (256 KiB) and 64x1024x64 past it; fewer than four rows of C never.
        assert!(skips((192, 192, 192), false) && skips((1000, 40, 1000), false));
        assert!(!skips((256, 256, 256), false) && !skips((64, 1024, 64), false));
        assert!(!skips((3, 192, 192), false) && skips((4, 192, 192), false));
        // Transposed B: 64^3 (16 KiB) is half of the 32 KiB L1, 100^3 (40 KB) past it.
        assert!(skips((64, 64, 64), true) && !skips((65, 64, 65), true));
        assert!(!skips((100, 100, 100), true));
        // On a 2 MiB L2, 192 KiB at most: 221^3 (191 KB) is within, 224^3 (196 KB) not.
        let l2_2m = CacheSizes {
            l2: 2 << 20,
            ..zen3
        };
        let t = |m: usize| GemmTask::for_test((m, m, m), (&[], m), (&[], m), std::ptr::null_mut());
        assert!(
            skips_packing(&t(221), l2_2m, (8, true)) && !skips_packing(&t(224), l2_2m, (8, true))
        );
        // A band of 128 columns of a 256-wide B spans the whole B's 256 KiB; alone, its
        // 128 KiB are within reach.
        let band = |ldb: usize| {
            let t = GemmTask::for_test(
                (256, 128, 256),
                (&[], 256),
                (&[], ldb),
                std::ptr::null_mut(),
            );
            skips_packing(&t, zen3, (8, true))
        };
        assert!(!band(256) && band(128));
        // A count that passes usize is not within reach.
        assert!(!skips((8, usize::MAX, 2), false));
        // Without masked tails, only a C of whole vectors.
        let t = GemmTask::for_test(
            (100, 100, 100),
            (&[], 100),
            (&[], 100),
            std::ptr::null_mut(),
        );
        assert!(skips_packing(&t, zen3, (4, false)) && !skips_packing(&t, zen3, (8, false)));
    }
}
