//! The register-tile micro-kernel every ISA runs (MR rows of op(A) broadcast against NR
//! columns of op(B), summed over KC steps in registers), and the prefetch of the C tile
//! it will update, spread over those steps.

use super::task::CPtr;
use crate::simd::Simd;

/// Where the micro-kernel reads its MR rows of op(A): element (i, p) of the panel is
/// `data[i * rs + p * cs]`. A packed panel is (1, MR); a row-major A read in place is
/// (lda, 1). Rows at and past `rows` repeat the last valid one (their results are
/// discarded), so a ragged edge never reads outside `data`.
#[derive(Clone, Copy)]
pub(super) struct APanel<'a> {
    pub data: &'a [f32],
    pub rs: usize,
    pub cs: usize,
    pub rows: usize,
}

/// Where the micro-kernel reads its KC x NR panel of op(B): row p at `data[p * stride..]`
/// (NR values). A packed panel has stride NR; a row-major B read in place, ldb.
#[derive(Clone, Copy)]
pub(super) struct BPanel<'a> {
    pub data: &'a [f32],
    pub stride: usize,
}

/// k steps between two prefetches of the C tile's lines.
const PREFETCH_SPACING: usize = 8;

/// Lines asked into L1 one every `PREFETCH_SPACING` k steps of a micro-kernel call: the
/// C tile it will update, or a share of the next A panel (`LinePrefetch::rows`).
/// The C tile's lines asked for all at once before the loop (MR x 3 lines from L3 at
/// 1024^3) held the line-fill buffers the loop's own loads of A wait on: on the Emerald
/// Rapids VM a tenth of the samples at 1024^3 sat on that burst, and spreading it took
/// 1024^3-2048^3 from 0.83-1.01x faer to 1.00-1.30x in the same alternation (no prefetch
/// at all: 0.85-0.92x). A C that fits L2 is not prefetched (`Block::prefetch_c`).
#[derive(Clone, Copy)]
pub(super) struct LinePrefetch {
    first: *const i8,
    /// Bytes between rows.
    stride: usize,
    rows: usize,
    /// Offset of a row's last byte.
    last: usize,
    /// Lines asked for a row: its first byte, each 64 bytes after, its last byte.
    per_row: usize,
}

impl LinePrefetch {
    /// The `rows x cols` tile at `c` (not transposed): the lines its rows span. A row of
    /// 32 floats on a line boundary is two lines; a third asked for its last byte, as
    /// before session 65, repeated the second, and the eight repeats a tile cost the
    /// loop. Intel VM, one thread, against faer, the two builds alternated seven times:
    /// 1024^3 192.0-196.8 -> 193.6-199.2 GFLOP/s, 2048^3 189.0-195.3 -> 191.8-198.6,
    /// 128x11008x4096 151.3-152.9 -> 152.9-155.6.
    #[inline(always)]
    pub fn c_tile(c: CPtr, rows: usize, cols: usize) -> Self {
        LinePrefetch::rows_spanned(c.ptr, c.stride, rows, cols)
    }

    /// `rows` runs of `len` floats from `first`, `stride` floats apart.
    #[inline(always)]
    pub fn rows(first: *const f32, stride: usize, rows: usize, len: usize) -> Self {
        LinePrefetch {
            first: first as *const i8,
            stride: stride * 4,
            rows,
            last: len.max(1) * 4 - 1,
            per_row: len * 4 / 64 + 1,
        }
    }

    /// [`LinePrefetch::rows`] counting only the lines the runs span where every run starts
    /// at the same offset in its line (`stride` a multiple of 16 floats): a 32-float B
    /// panel row on a line boundary is two lines, not three.
    #[inline(always)]
    pub fn rows_spanned(first: *const f32, stride: usize, rows: usize, len: usize) -> Self {
        let bytes = len.max(1) * 4;
        let per_row = match (stride * 4).is_multiple_of(64) {
            true => (first as usize % 64 + bytes - 1) / 64 + 1,
            false => bytes / 64 + 1,
        };
        LinePrefetch {
            per_row,
            ..LinePrefetch::rows(first, stride, rows, len)
        }
    }

    /// Lines asked for in all.
    #[inline(always)]
    fn lines(self) -> usize {
        self.rows * self.per_row
    }

    /// Line `q` of `lines()` (a row's first byte, each 64 bytes after, its last byte: a
    /// fixed count a row whatever its alignment, so no loop over it).
    #[inline(always)]
    fn fetch(self, q: usize) {
        self.fetch_into::<false>(q)
    }

    /// `fetch`, into L1 or only into L2 (`TO_L2`).
    #[inline(always)]
    fn fetch_into<const TO_L2: bool>(self, q: usize) {
        prefetch_line::<TO_L2>(self.line_at(q));
    }

    /// The address line `q` is asked for at. A run of one line (a 16-float row on a line
    /// boundary: AVX2's B panel rows and C tile rows) needs no division: the loops that
    /// ask for a line every other k step ran a `div` for each. Zen 3 VM, one thread,
    /// against faer, alternated twice: 16x4096x256 74.0-74.3 -> 76.4-77.0 GFLOP/s,
    /// 64x4096x64 80.1-81.3 -> 82.0-82.2, 32x4096x4096 58.8-63.9 -> 63.6-67.1; the rest
    /// within 1%.
    #[inline(always)]
    fn line_at(self, q: usize) -> *const i8 {
        if self.per_row == 1 {
            return self.first.wrapping_add(q * self.stride);
        }
        let (row, line) = (q / self.per_row, q % self.per_row);
        self.first
            .wrapping_add(row * self.stride + (line * 64).min(self.last))
    }
}

/// Lines `from..to` of the next B panel's source (`panel`), which one tile of the current
/// panel asks into L2, one every `NEXT_PANEL_SPACING` k steps (`Block::next_fill_to_l2`).
#[derive(Clone, Copy)]
pub(super) struct NextPanelShare {
    pub panel: LinePrefetch,
    pub from: usize,
    pub to: usize,
    /// k steps between two asks: `NEXT_PANEL_SPACING`, or with `spread` in `of` as many
    /// as spread the share over a `kc`-deep tile.
    pub spacing: usize,
}

impl NextPanelShare {
    /// Share `tile` of `tiles` of `panel`'s lines, asked for every `NEXT_PANEL_SPACING`
    /// k steps, or, where `spread`, spread over the tile's `kc` steps (never closer).
    #[inline(always)]
    pub fn of(panel: LinePrefetch, tile: usize, tiles: usize, (kc, spread): (usize, bool)) -> Self {
        let lines = panel.lines();
        let (from, to) = (lines * tile / tiles, lines * (tile + 1) / tiles);
        let spacing = match spread {
            true => (kc / (to - from).max(1)).max(NEXT_PANEL_SPACING),
            false => NEXT_PANEL_SPACING,
        };
        NextPanelShare {
            panel,
            from,
            to,
            spacing,
        }
    }
}

/// k steps between two lines of a [`NextPanelShare`]: a KC-deep tile carries KC / 2, a
/// 256 x 32 panel's 512 lines over four tiles (32 rows of C).
const NEXT_PANEL_SPACING: usize = 2;

/// Asks for the line holding `at`: into L1, or only into L2 (`TO_L2`); nothing off x86-64.
#[inline(always)]
fn prefetch_line<const TO_L2: bool>(at: *const i8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint that never faults, whatever the address.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _MM_HINT_T1, _mm_prefetch};
        match TO_L2 {
            true => _mm_prefetch::<_MM_HINT_T1>(at),
            false => _mm_prefetch::<_MM_HINT_T0>(at),
        }
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// Asks L2 for rows `rows` (each `len` floats from `first + row * stride`), every line of
/// them at once.
#[inline(always)]
pub(super) fn rows_to_l2(
    first: *const f32,
    stride: usize,
    rows: std::ops::Range<usize>,
    len: usize,
) {
    for r in rows {
        let row = first.wrapping_add(r * stride) as *const i8;
        for line in 0..(len * 4).div_ceil(64) {
            prefetch_line::<true>(row.wrapping_add(line * 64));
        }
    }
}

/// The register tile: `acc[i][v]` holds row i, columns `v*LANES..(v+1)*LANES` of
/// `sum_p a(i, p) * b(p, ..)` over `kc` steps; `c` is the tile to prefetch meanwhile.
/// `FIRST`: the first tile over a B panel read where it lies, which asks L1 for the
/// panel's rows ahead of its loads (`FILL_AHEAD`) and, given a non-empty `pack` (a packed
/// KC x NR panel, `NR` floats a k step), stores them there as they are loaded, so that
/// later calls read the packed copy; otherwise `pack` is not touched (pass `&mut []`).
/// A const parameter, not an `Option`: each call site then inlines one copy of the loop,
/// where a run-time choice inlined both, and unoptimised builds (whose frames keep every
/// inlined copy's locals) overflowed wasm's 1 MiB stack in the GEMM.
#[inline(always)]
pub(super) fn micro_tile<S: Simd, const MR: usize, const NV: usize, const FIRST: bool>(
    s: S,
    kc: usize,
    a: APanel,
    b: BPanel,
    c: Option<LinePrefetch>,
    pack: &mut [f32],
    next: Option<NextPanelShare>,
) -> [[S::V; NV]; MR] {
    let out = match FIRST && !pack.is_empty() {
        // The checked extent of every store in the loop (row p < kc at p * NR).
        true => pack[..kc * NV * S::LANES].as_mut_ptr(),
        false => std::ptr::null_mut(),
    };
    micro_tile_with::<S, MR, NV, FIRST, false>(s, kc, a, b, (c, next), out, S::LANES)
}

/// The plain loop of `micro_tile` (no prefetch, no packing) over a B panel whose last
/// vector holds only `tail` (1..=LANES) columns: C's right edge, read where it lies, the
/// columns past it neither read nor summed (`Simd::load_tail`).
#[inline(always)]
pub(super) fn micro_tile_tail<S: Simd, const MR: usize, const NV: usize>(
    s: S,
    kc: usize,
    a: APanel,
    b: BPanel,
    tail: usize,
) -> [[S::V; NV]; MR] {
    let tail = tail.clamp(1, S::LANES);
    micro_tile_with::<S, MR, NV, false, true>(s, kc, a, b, (None, None), std::ptr::null_mut(), tail)
}

/// `micro_tile`, with B's rows asked for ahead (`FIRST`) and stored k-major at `out`
/// (where not null) as they are loaded, and with `TAIL`, B's last vector only `tail`
/// columns wide.
#[inline(always)]
fn micro_tile_with<
    S: Simd,
    const MR: usize,
    const NV: usize,
    const FIRST: bool,
    const TAIL: bool,
>(
    s: S,
    kc: usize,
    a: APanel,
    b: BPanel,
    (c, next): (Option<LinePrefetch>, Option<NextPanelShare>),
    out: *mut f32,
    tail: usize,
) -> [[S::V; NV]; MR] {
    // Columns read a k step: NR, or up to the tail's last.
    let width = (NV - 1) * S::LANES + if TAIL { tail } else { S::LANES };
    let mut acc = [[s.zero(); NV]; MR];
    let last = a.rows.clamp(1, MR) - 1;
    // Every read below is at (i.min(last)) * rs + p * cs for p < kc: inside `data`, checked
    // here once (the slice index panics on a broken caller instead of reading outside).
    let data = &a.data[..last * a.rs + (kc.max(1) - 1) * a.cs + 1];
    let rows = panel_rows::<MR>(data, a.rs, last);
    // B likewise: its extent checked once, then one induction variable and no per-step
    // bounds checks (`.take(kc)` on a zip of chunks kept two counters and four checks in
    // the loop: measured 7-9% slower at 128-512).
    let bdata = &b.data[..(kc.max(1) - 1) * b.stride + width];
    let bsrc = (bdata, b.stride, tail);
    if let Some(nx) = next {
        // The next panel's share, an ask every `nx.spacing` k steps, and where the C tile
        // is asked for too (`Block::next_beside_c`) its lines as in the loop below.
        let c_lines = c.map_or(0, |c| c.lines());
        if let Some(c) = c {
            (kc.div_ceil(PREFETCH_SPACING)..c_lines).for_each(|q| c.fetch(q));
        }
        let carried = nx.from + kc.div_ceil(nx.spacing);
        (carried.min(nx.to)..nx.to).for_each(|q| nx.panel.fetch_into::<true>(q));
        let (to, mut q, mut next_ask) = (nx.to.min(carried), nx.from, 0);
        for p in 0..kc {
            if p == next_ask && q < to {
                nx.panel.fetch_into::<true>(q);
                (q, next_ask) = (q + 1, next_ask + nx.spacing);
            }
            if let Some(c) = c
                && p % PREFETCH_SPACING == 1
                && p / PREFETCH_SPACING < c_lines
            {
                c.fetch(p / PREFETCH_SPACING);
            }
            k_step::<S, MR, NV, FIRST, TAIL>(s, p, bsrc, &rows, a.cs, &mut acc, out);
        }
        return acc;
    }
    let Some(c) = c else {
        // No prefetch: the plain loop. The chunked one below, run with nothing to fetch,
        // cost 3-12% at 64^3-256^3 (interleaved against faer, three rounds of both).
        for p in 0..kc {
            k_step::<S, MR, NV, FIRST, TAIL>(s, p, bsrc, &rows, a.cs, &mut acc, out);
        }
        return acc;
    };
    let lines = c.lines();
    let slots = kc.div_ceil(PREFETCH_SPACING);
    // Lines the loop cannot carry (a short k block) go out before it.
    (slots..lines).for_each(|q| c.fetch(q));
    // One loop that asks for a line every PREFETCH_SPACING steps. Not a loop of 8-step
    // chunks: LLVM unrolled those and moved B's loads ahead, and in the out-of-line sweep
    // (`kernel::Sweep`) the allocator then kept accumulators and B vectors on the stack
    // (Zen 3 VM, 1024x64x1024's 4x16 tiles: 1.13-1.15x faer, one loop 1.25-1.28x).
    for p in 0..kc {
        if p % PREFETCH_SPACING == 0 && p / PREFETCH_SPACING < lines {
            c.fetch(p / PREFETCH_SPACING);
        }
        k_step::<S, MR, NV, FIRST, TAIL>(s, p, bsrc, &rows, a.cs, &mut acc, out);
    }
    acc
}

/// The first element of each of a panel's MR rows in `data` (rows `rs` apart; rows past
/// `last` repeat it). A whole panel's by adding `rs`, not by a compare, move and
/// multiply a row: part of the per-tile setup trimmed with `sweep::whole_tiles`.
#[inline(always)]
fn panel_rows<const MR: usize>(data: &[f32], rs: usize, last: usize) -> [*const f32; MR] {
    let mut rows = [data.as_ptr(); MR];
    if last + 1 >= MR {
        for i in 1..MR {
            // SAFETY: i * rs <= last * rs, within `data` (the caller checked its extent).
            rows[i] = unsafe { rows[i - 1].add(rs) };
        }
        return rows;
    }
    for (i, row) in rows.iter_mut().enumerate() {
        // SAFETY: i.min(last) * rs <= the slice's last index (checked by the caller).
        *row = unsafe { data.as_ptr().add(i.min(last) * rs) };
    }
    rows
}

/// k steps ahead that the first tile over a B panel read where it lies (`micro_tile`'s
/// `FIRST`: one packing the panel, or `Block::ahead_panels`) asks L1 for that panel's
/// row: its rows, a row of B apart, each a page or more apart in a wide B, start no
/// hardware stream, so each k step's loads waited on L2 or L3 (the previous panel's
/// tiles ask L2 for them, `Block::next_fill_to_l2`, where B outgrows L2). Emerald
/// Rapids VM, one thread, with and without alternated call by call in one process
/// (trueno's GFLOP/s, two rounds): 64x4096x512 138.6-140.6 -> 146.1-153.0, 32x4096x512
/// 123.2-126.2 -> 132.1-136.1, 128x1024x1024 152.4-153.4 -> 158.0-158.4, 256x1024x1024
/// 156.3-158.0 -> 159.9-161.9, 128x4096x11008 (B from memory) 137.0 -> 143.1, 512^3
/// +0.6% and +3.2%; 128x11008x4096 -1.9%, 128x4096x512 +2.4% and -0.5%. Two threads:
/// 64x4096x512 +5.2%, 512^3 +2.7%, 128x4096x11008 +2.7%. 16 steps ahead did no better.
/// The distance was not measured on Zen (the asks themselves were: `Block::ahead_panels`).
const FILL_AHEAD: usize = 8;

/// One k step of the tile: NV vectors of B row `p` (with `TAIL`, the last one `tail`
/// columns), each row's A value broadcast against them. A function, not a closure: a
/// closure does not inherit the caller's target features, so its SIMD calls stayed calls
/// (1.8 GFLOP/s).
#[inline(always)]
fn k_step<S: Simd, const MR: usize, const NV: usize, const FIRST: bool, const TAIL: bool>(
    s: S,
    p: usize,
    (bdata, stride, tail): (&[f32], usize, usize),
    rows: &[*const f32; MR],
    cs: usize,
    acc: &mut [[S::V; NV]; MR],
    out: *mut f32,
) {
    let nr = NV * S::LANES;
    let width = (NV - 1) * S::LANES + if TAIL { tail } else { S::LANES };
    // SAFETY: the caller checked that p * stride + width <= bdata.len() for p < kc.
    let brow = unsafe { std::slice::from_raw_parts(bdata.as_ptr().add(p * stride), width) };
    let mut bv = [s.zero(); NV];
    for v in 0..NV {
        bv[v] = match TAIL && v == NV - 1 {
            true => s.load_tail(&brow[v * S::LANES..]),
            false => s.load(&brow[v * S::LANES..]),
        };
    }
    if FIRST {
        // The row FILL_AHEAD steps on (past the panel's last one for the final steps: a
        // hint, never a read).
        let ahead = bdata.as_ptr().wrapping_add((p + FILL_AHEAD) * stride) as *const i8;
        for line in (0..width * 4).step_by(64) {
            prefetch_line::<false>(ahead.wrapping_add(line));
        }
        // A row off the line grid spans one line more.
        if !(ahead as usize).is_multiple_of(64) {
            prefetch_line::<false>(ahead.wrapping_add(width * 4 - 1));
        }
        if !out.is_null() {
            // SAFETY: `micro_tile` checked that `out` holds kc * NR floats, and p < kc.
            let dst = unsafe { std::slice::from_raw_parts_mut(out.add(p * nr), nr) };
            for v in 0..NV {
                s.store(bv[v], &mut dst[v * S::LANES..]);
            }
        }
    }
    for (i, row) in rows.iter().enumerate() {
        // SAFETY: p < kc, so the offset is within the A panel the caller checked.
        let ai = s.splat(unsafe { *row.add(p * cs) });
        for v in 0..NV {
            acc[i][v] = s.fma(ai, bv[v], acc[i][v]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The distinct lines a prefetch asks for, as byte offsets from `base`.
    fn lines_asked(p: LinePrefetch, base: *const f32) -> Vec<usize> {
        let mut at: Vec<usize> = (0..p.lines())
            .map(|q| p.line_at(q) as usize / 64 * 64 - base as usize)
            .collect();
        at.sort_unstable();
        at.dedup();
        at
    }

    #[test]
    fn a_panel_row_on_a_line_is_asked_for_as_the_lines_it_spans() {
        let buf = vec![0.0f32; 64 * 40 + 32];
        let base = buf.as_ptr().wrapping_add(buf.as_ptr().align_offset(64));
        for (skip, stride) in [(0, 64), (0, 80), (3, 64), (16, 1024), (5, 37)] {
            let first = base.wrapping_add(skip);
            let p = LinePrefetch::rows_spanned(first, stride, 8, 32);
            // Every line of every row's 32 floats, from the addresses themselves.
            let mut want: Vec<usize> = (0..8)
                .flat_map(|r| (0..32).map(move |c| (skip + r * stride + c) * 4 / 64 * 64))
                .collect();
            want.sort_unstable();
            want.dedup();
            assert_eq!(lines_asked(p, base), want, "skip {skip} stride {stride}");
            // On a line and a whole number of lines apart: exactly two a row.
            if (skip * 4) % 64 == 0 && (stride * 4) % 64 == 0 {
                assert_eq!(p.lines(), 16, "skip {skip} stride {stride}");
            }
        }
    }

    #[test]
    fn a_c_tile_is_asked_for_as_every_line_its_rows_span_once() {
        let mut buf = vec![0.0f32; 1024 * 9 + 64];
        let base = buf.as_mut_ptr().wrapping_add(buf.as_ptr().align_offset(64));
        for (skip, stride, cols) in [(0, 1024, 32), (4, 1024, 32), (0, 1030, 32), (0, 1024, 20)] {
            let c = CPtr {
                ptr: base.wrapping_add(skip),
                stride,
                trans: false,
            };
            let p = LinePrefetch::c_tile(c, 8, cols);
            let mut want: Vec<usize> = (0..8)
                .flat_map(|r| (0..cols).map(move |j| (skip + r * stride + j) * 4 / 64 * 64))
                .collect();
            want.sort_unstable();
            want.dedup();
            assert_eq!(lines_asked(p, base), want, "skip {skip} stride {stride}");
            if skip == 0 && stride % 16 == 0 {
                assert_eq!(p.lines(), want.len(), "no line asked twice");
            }
        }
    }

    #[test]
    fn next_panel_shares_split_its_lines_among_the_tiles() {
        // Rows of 32 floats on a line boundary: two lines each, 512 in all.
        let buf = [0.0f32; 32];
        let first = buf[buf.as_ptr().align_offset(64)..].as_ptr();
        let p = LinePrefetch::rows_spanned(first, 1024, 256, 32);
        assert_eq!(p.lines(), 512);
        for tiles in [1, 3, 4, 16, 17] {
            for spread in [false, true] {
                let shares: Vec<_> = (0..tiles)
                    .map(|i| NextPanelShare::of(p, i, tiles, (256, spread)))
                    .collect();
                assert_eq!(shares[0].from, 0);
                assert_eq!(shares[tiles - 1].to, p.lines());
                for w in shares.windows(2) {
                    assert_eq!(w[0].to, w[1].from, "{tiles} tiles");
                }
                for sh in &shares {
                    let n = sh.to - sh.from;
                    match spread {
                        false => assert_eq!(sh.spacing, NEXT_PANEL_SPACING),
                        // Spread: the asks fit the tile's 256 steps, and no closer.
                        true => {
                            assert!(sh.spacing >= NEXT_PANEL_SPACING);
                            assert!(n * sh.spacing <= 256 || sh.spacing == NEXT_PANEL_SPACING);
                        }
                    }
                }
            }
        }
        // 512 lines over 16 tiles: 32 a tile, one every 8 of 256 steps; over four tiles
        // 128 a tile, every other step.
        let spacing = |tiles| NextPanelShare::of(p, 0, tiles, (256, true)).spacing;
        assert_eq!((spacing(16), spacing(4), spacing(1)), (8, 2, 2));
    }
}
