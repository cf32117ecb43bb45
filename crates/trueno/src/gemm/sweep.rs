//! The micro-kernel swept over one block of the packed loops (`kernel.rs`): the block's
//! parameters (`Block`: its depth, beta, and what its tiles ask the caches for), the two
//! sweep orders, and the tile each step runs, its ragged edges included.

use super::micro::{APanel, BPanel, LinePrefetch, NextPanelShare, micro_tile, rows_to_l2};
use super::pack::pack_b_panel_transposed;
use super::store::store_tile;
use super::task::GemmTask;
use super::transpose8::{has_avx, has_avx512};
use crate::simd::{OutOfLine, Simd};

/// The depth of C's current update, the beta it applies (beta only on the first), and
/// whether C's tiles are prefetched: only where the update reads C (beta not 0) and C
/// outgrows half of L2, which it shares with a packed A block and B's panels, or A, B
/// and C together outgrow L2: the A and B lines a k block brings through L2 then push
/// out C's tiles before the next block's update reads them.
///
/// The second bar since session 76. Emerald Rapids VM, one thread, C's tiles asked for
/// in every update that reads C against the first bar alone, alternated call by call in
/// one process (trueno's GFLOP/s, two rounds): 256x1024x1024 (a 1 MiB C) 153.0-154.5
/// -> 160.4-160.5, 64x4096x512 140.7-141.8 -> 145.9-147.2, 32x4096x512 127.2-129.9 ->
/// 131.3-136.7, 128x1024x1024 154.6-155.1 -> 158.6-159.1, 512^3 162.0-162.7 ->
/// 164.7-164.8, 64x2048x1024 +2-4%, 128x4096x512 -1% and +1%; two threads 64x4096x512
/// +2.4%, 256x1024x1024 +1.9%, 512^3 +0.8%. Where all three fit L2 it bought nothing
/// (384^3 +0.5-1%, 448^3 -1.2% and +0.7%, 128x128x512 even), so the old bar stays there.
///
/// For a smaller C the prefetches cost more than they save (64^3-384^3, 0.93-0.99x on
/// the Emerald Rapids VM). A quarter of L2 was the bar until session 58: on that
/// session's Intel VM, one thread against faer, two rounds, half took 384^3 (a 576 KiB C)
/// from 1.02x to 1.05x and 448^3 from 1.01x to 1.04x, with 512^3 and C of 1-2 MiB
/// (256x1024x1024 to 256x2048x1500) unchanged; no prefetch at all lost 2048^3 (0.95-0.99x
/// against 1.02x) and 128x11008x4096 (0.81x against 0.83-0.84x).
///
/// An update with beta 0 (a product's first k block where C is overwritten) only writes
/// C: a prefetch there reads lines that the stores after the tile would take for
/// themselves, in the store buffer's time rather than the loop's. Same VM, alternated
/// twice with the prefetch kept: 384^3 0.97x -> 1.02x (`x·Wᵀ` 0.93x -> 0.98-0.99x),
/// 128x1056x256 0.92-0.93x -> 0.99x, 256x1024x256 0.94-0.95x -> 1.00x, 128x4096x128
/// 0.93-0.94x -> 1.00-1.01x (two threads 1.04-1.05x -> 1.14x), 64x4096x256 0.77-0.78x ->
/// 0.82x; 512^3 to 2048^3 and the deep products within the noise. A `prefetchw` there
/// instead lost 2-8% at the same shapes.
pub(super) struct Block {
    pub kc: usize,
    pub beta: f32,
    pub prefetch_c: bool,
    /// Whether each tile of a B panel read in place from memory first asks L2 for its
    /// share of the next panel's rows (`sweep`): that panel's KC rows are far apart
    /// (a row a page or more), so no hardware prefetcher runs ahead of its first tile.
    /// Zen 4 VM, against faer, four rounds alternated with it off: one thread
    /// 128x4096x4096 0.95-0.97x -> 0.99-1.01x, 128x4096x11008 1.01x -> 1.03-1.07x
    /// (102-104 -> 104-108 GFLOP/s); two threads, trueno's GFLOP/s (faer's drifted by
    /// 5% between rounds) 128x4096x4096 196-199 -> 199-209, 128x4096x11008 200-205 ->
    /// 205-209; 32-64 rows within the noise both ways. Under `NEXT_B_MIN_A_PANELS` A
    /// panels each tile would ask for a quarter of the panel or more at once.
    pub next_b_to_l2: bool,
    /// Whether the tiles of each B panel packed by its first tile (`fuse_b`) ask L2 for
    /// the next such panel's source rows, spread over their k steps (`NextPanelShare`):
    /// for a B past L2, whose strided rows the next first tile would otherwise wait on
    /// from L3, its line-fill buffers full. Not where the tile asks for its C tile (that
    /// loop goes on as it was), except that a row-major B's panels packed from memory on
    /// a Zen core ask for these rows instead of C's (`fills_b_past_l2`). A transposed
    /// B's panels (packed just before their first tiles) ask for theirs in a burst before
    /// each tile, as `next_b_to_l2` does. Intel VM (session 58), one thread, against faer,
    /// alternated twice with it off: 64x4096x256 0.85-0.86x -> 0.87-0.90x, 64x4096x512
    /// 0.78-0.79x -> 0.85-0.86x, 32x2048x512 0.78-0.80x -> 0.87x, 128x2048x512 0.90x ->
    /// 0.93-0.94x, 128x1056x512 0.93x -> 0.97-0.98x; 32x4096x512, 128x4096x256 and
    /// 256x4096x512 within 1%. Tried: three lines a 32-float row instead of the two it
    /// spans (1-4% slower than this), one loop that also asks for the C tile (2-3% slower
    /// at 128 and 256 rows), the lines spread by a running sum (18% slower at 256^3).
    pub next_fill_to_l2: bool,
    /// Whether each tile asks for the next panel's rows (`next_fill_to_l2`) beside its C
    /// tile rather than instead of it, its share spread over all of its k steps
    /// (`NextPanelShare::of`): where a row-major B's panels are packed from memory by
    /// their first tiles on a core other than Zen (`fills_b_past_l2`). Session 74
    /// had tried that packing on Intel with the Zen form (no C tile asked for, each
    /// tile's share in its first k steps): C's tiles (5.6 MB at 128x11008x4096) then
    /// came from L3 at each store, and 32 asks in 64 k steps kept the line-fill buffers
    /// full. Emerald Rapids VM (session 75), `gemm-probe` 128x11008x4096, one thread:
    /// the pass 128 GFLOP/s (pack B 17.3 ms, the kernel 74.3), the Zen form 127 (the
    /// kernel 91.5), C's tiles asked for beside it 132-135 (84.6), spread 135-136, and
    /// with B on huge pages (`aligned.rs`) 141-143 (79.1); 128x4096x11008 131 -> 141,
    /// 128x4096x4096 137 -> 148. Interleaved against faer in BENCHMARKS.md (session 75),
    /// with the H100 host's Xeon.
    pub next_beside_c: bool,
    /// The block's first B panels, read where they lie, whose first tile asks L1 for its
    /// own rows `FILL_AHEAD` k steps ahead, as a tile packing its panel does: B's rows
    /// are a row of B apart, so no hardware prefetcher runs ahead of that tile, and where
    /// B has left the caches since the last call (a model's other layers, any other work
    /// between calls) each k step's loads waited on memory. Not where the tiles ask L2
    /// for the next panel (`next_b_to_l2`): with both, 32x4096x4096 lost 9-11%.
    ///
    /// Zen 4 VM, one thread, `gemm-probe` alternating call by call with the first tile
    /// asking for nothing, eight rounds (median ratios; few rows at KC 128, before
    /// `few_rows_kc` went deeper on Zen's 32-float panels), with 32 MiB read between calls:
    /// few-row products over a B within L3 (`b_in_place_for_few_rows`) 16x1000x1000
    /// 1.90x, 16x1000x2000 1.90x, 16x1500x1500 1.88x, 32x1000x1000 1.58x, 48x1000x1000
    /// 1.44x, 64x1000x1000 1.33x, 16x512x512 1.26x; B in cache, 0.98x-1.01x. Squares
    /// (one block, B within L2's reach) 64^3-256^3 1.00-1.03x from memory, 1.00x warm.
    /// Against faer's own layout with 32 MiB read before every call of either
    /// (`gemm_vs_faer` `EVICT=32`), those few-row shapes went from 0.38-0.65x to
    /// 0.83-1.12x with this and the deeper blocks together (BENCHMARKS.md, session 81).
    pub ahead_panels: usize,
}

/// `Block::prefetch_c` for an update with `beta` of a C of `c_bytes` in a task of
/// `operand_bytes` (`GemmTask::operand_bytes`; `transposed`: C is written through its
/// transpose, whose tiles are not rows of lines) on a core of `l2` bytes of L2.
pub(super) fn prefetches_c(
    transposed: bool,
    (c_bytes, operand_bytes): (usize, usize),
    l2: usize,
    beta: f32,
) -> bool {
    !transposed && (c_bytes > l2 / 2 || operand_bytes > l2) && beta != 0.0
}

/// One block's `sweep` (`sweep_a_outer` with `A_OUTER`), run out of line
/// (`Simd::outlined`). Inlined into the one GEMM function with every kernel
/// shape's loops, the register allocator kept one of AVX2's twelve 6x16 accumulators on
/// the stack in the loop that reads A in place (a load, FMA and store a k step: half
/// speed), and where it did so moved with unrelated changes (a 4-row tile for ragged last
/// panels made 64^3 spill: 0.94x -> 0.49x faer). Out of line, a block a call, with the C
/// prefetch's single loop (`micro_tile`), no loop spills; Zen 3 VM, one thread,
/// interleaved against faer, two rounds against the inlined sweep: 64^3 0.92-0.94x ->
/// 1.04-1.05x, 100^3 0.86-0.87x -> 0.89x, 2048x8x2048 2.50-2.65x -> 2.83x, 128^3-1024^3
/// and 32x4096x4096 within the noise. One call a tile instead cost 64^3 5%.
pub(super) struct Sweep<'t, 'g, const MR: usize, const NV: usize, const A_OUTER: bool, AP, BP, BF> {
    pub t: &'t GemmTask<'g>,
    pub blk: &'t Block,
    pub a_panel: AP,
    pub b_panel: BP,
    pub b_fill: BF,
    pub rows: (usize, usize),
    pub cols: (usize, usize),
}

impl<'a, 'b, 'c, S, const MR: usize, const NV: usize, const A_OUTER: bool, AP, BP, BF> OutOfLine<S>
    for Sweep<'_, '_, MR, NV, A_OUTER, AP, BP, BF>
where
    S: Simd,
    AP: Fn(usize) -> APanel<'a>,
    BP: Fn(usize) -> BPanel<'b>,
    BF: Fn(usize) -> Option<(BPanel<'b>, &'c mut [f32])>,
{
    type Out = ();
    #[inline(always)]
    fn run(self, s: S) {
        let Sweep {
            t, blk, rows, cols, ..
        } = self;
        let b = (self.b_panel, self.b_fill);
        match A_OUTER {
            true => sweep_a_outer::<S, MR, NV>(s, t, blk, self.a_panel, b, rows, cols),
            false => sweep::<S, MR, NV>(s, t, blk, self.a_panel, b, rows, cols),
        }
    }
}

/// One block's sweep, out of line: A's panels outside B's (`a_outer`: a thin product,
/// `sweeps_a_outer` or `shallow_sweeps_a_outer`), the first A panel's tile over each B
/// panel `b_fill` names packing it, or B's outside A's, the first tile of each such panel
/// packing it.
#[inline(always)]
#[allow(clippy::type_complexity)]
pub(super) fn sweep_block<'a, 'b, 'c, S: Simd, const MR: usize, const NV: usize>(
    s: S,
    (t, blk): (&GemmTask, &Block),
    a_outer: bool,
    a_panel: impl Fn(usize) -> APanel<'a>,
    (b_panel, b_fill): (
        impl Fn(usize) -> BPanel<'b>,
        impl Fn(usize) -> Option<(BPanel<'b>, &'c mut [f32])>,
    ),
    (rows, cols): ((usize, usize), (usize, usize)),
) {
    match a_outer {
        true => s.outlined(Sweep::<MR, NV, true, _, _, _> {
            t,
            blk,
            a_panel,
            b_panel,
            b_fill,
            rows,
            cols,
        }),
        false => s.outlined(Sweep::<MR, NV, false, _, _, _> {
            t,
            blk,
            a_panel,
            b_panel,
            b_fill,
            rows,
            cols,
        }),
    }
}

/// The micro-kernel over every tile of the `rows.1 x cols.1` block at (`rows.0`,
/// `cols.0`) of C: packed B panels outside (each stays in L1 while the A panels of the
/// block stream past it), A panels inside, `a_panel(ir)` giving the ir-th. Where
/// `b_fill(jr)` gives panel jr's source and its place in the buffer, the first tile
/// packs it there (`fuse_b`) and the others read `b_panel(jr)`, the packed copy.
#[inline(always)]
#[allow(clippy::type_complexity)]
fn sweep<'a, 'b, 'c, S: Simd, const MR: usize, const NV: usize>(
    s: S,
    t: &GemmTask,
    blk: &Block,
    a_panel: impl Fn(usize) -> APanel<'a>,
    (b_panel, b_fill): (
        impl Fn(usize) -> BPanel<'b>,
        impl Fn(usize) -> Option<(BPanel<'b>, &'c mut [f32])>,
    ),
    (ic, mc): (usize, usize),
    (jc, nc): (usize, usize),
) {
    let nr = NV * S::LANES;
    let b_panels = nc.div_ceil(nr);
    for jr in 0..b_panels {
        let at = |ir: usize| (ic + ir * MR, jc + jr * nr);
        let panels = mc.div_ceil(MR);
        // Where the next panel is packed in the sweep too, this panel's tiles ask L2 for
        // its source (`Block::next_fill_to_l2`): a row-major B's KC rows spread over each
        // tile's k steps, a transposed B's NR rows (KC floats each, a run of lines) a share
        // before each tile. Its buffer slice, unused, is dropped at once.
        let next_src = next_fill_src(blk, &b_fill, jr, b_panels);
        let next_rows = next_src
            .filter(|_| !t.tb)
            .map(|src| LinePrefetch::rows_spanned(src.data.as_ptr(), src.stride, blk.kc, nr));
        let next_columns = next_src.filter(|_| t.tb);
        let spread = (blk.kc, blk.next_beside_c);
        let share = |ir: usize| next_rows.map(|rows| NextPanelShare::of(rows, ir, panels, spread));
        // The first tile packs the panel where `b_fill` says so; the rest read it. A
        // transposed B's panel (its rows are B's columns) is packed just before. A panel
        // read where it lies has its first tile ask for its rows ahead, packing nothing
        // (`Block::ahead_panels`). Only over a whole A panel: the asking tile has no edge
        // form, and a ragged first A panel runs its edge tile as before (4x256x256 on
        // AVX-512 ran 57 GFLOP/s through the full tile against 108 through its four-row
        // one).
        let asks_ahead = jr < blk.ahead_panels && t.m - ic >= MR;
        let fill = b_fill(jr).or_else(|| asks_ahead.then(|| (b_panel(jr), &mut [][..])));
        let first = match fill {
            Some((src, dst)) if t.tb => {
                let shape = (blk.kc, nr, nr);
                let isa = (has_avx(S::BACKEND), has_avx512(S::BACKEND));
                pack_b_panel_transposed(isa, src.data, src.stride, shape, dst);
                0
            }
            Some((src, dst)) => {
                let (a, fetch) = (a_panel(0), (None, share(0)));
                one_tile::<S, MR, NV, true>(s, t, blk, a, src, at(0), dst, fetch);
                1
            }
            None => 0,
        };
        let b = b_panel(jr);
        let next = (blk.next_b_to_l2 && jr + 1 < b_panels).then(|| b_panel(jr + 1));
        // Where no tile asks for anything of its own, the whole tiles run their own loop.
        let asks = next.is_some() || next_columns.is_some() || next_rows.is_some();
        let first = match asks || jc + (jr + 1) * nr > t.n {
            true => first,
            false => {
                let whole = ((t.m - ic) / MR).clamp(first, panels);
                whole_tiles::<S, MR, NV>(s, t, blk, (&a_panel, b), first..whole, at);
                whole
            }
        };
        for ir in first..panels {
            if let Some(nb) = next {
                let rows = (blk.kc * ir / panels)..(blk.kc * (ir + 1) / panels);
                rows_to_l2(nb.data.as_ptr(), nb.stride, rows, nr);
            }
            // Its own block, not one loop over a (source, rows, length) choice with the
            // one above: that ran the row-major 32x4096x4096 7-9% slower (Zen 3 VM,
            // session 66, three rounds against faer: 1.01-1.07x against 1.13-1.15x).
            if let Some(w) = next_columns {
                let rows = (nr * ir / panels)..(nr * (ir + 1) / panels);
                rows_to_l2(w.data.as_ptr(), w.stride, rows, blk.kc);
            }
            let fetch = (None, share(ir));
            one_tile::<S, MR, NV, false>(s, t, blk, a_panel(ir), b, at(ir), &mut [], fetch);
        }
    }
}

/// `one_tile` for A panels `panels` of a block against B panel `b`, where every tile is
/// whole (MR x NR within C) and asks the caches for nothing but its C tile
/// (`Block::prefetch_c`): the sweep's common case, in a loop of its own that carries
/// none of the general loop's per-tile asks, edge tests and clipping. Through that loop,
/// the setup around each tile (its state kept on the stack for want of registers) cost
/// a 64x512x16 `x·Wᵀ` about 190 cycles a tile whose FMAs take 128 on the Emerald Rapids
/// VM. There, one thread, against the general loop: shallow `x·Wᵀ` 2-12% faster (the
/// LoRA row 64x4096x32 0.82x -> 0.88x faer), 512^3-1024^3 1-6% (BENCHMARKS.md, session
/// 72).
#[inline(always)]
fn whole_tiles<'a, S: Simd, const MR: usize, const NV: usize>(
    s: S,
    t: &GemmTask,
    blk: &Block,
    (a_panel, b): (impl Fn(usize) -> APanel<'a>, BPanel),
    panels: std::ops::Range<usize>,
    at: impl Fn(usize) -> (usize, usize),
) {
    let whole = (MR, NV * S::LANES);
    for ir in panels {
        let none = (None, None);
        tile_at::<S, MR, NV, false>(s, (t, blk), (a_panel(ir), b), at(ir), whole, &mut [], none);
    }
}

/// The micro-kernel on the tile of C at `(r, c)` (clipped to C), then its store; `pack`
/// as in `micro_tile`; `next`, lines its k steps ask into L1 where C's are not. A ragged
/// last row panel runs its edge tile (`edge_tile_rows`) instead of MR rows of which the
/// repeated ones are thrown away.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn one_tile<S: Simd, const MR: usize, const NV: usize, const FIRST: bool>(
    s: S,
    t: &GemmTask,
    blk: &Block,
    a: APanel,
    b: BPanel,
    (r, c): (usize, usize),
    pack: &mut [f32],
    (next, next_panel): (Option<LinePrefetch>, Option<NextPanelShare>),
) {
    let edge = edge_tile_rows(MR, t.m - r);
    if !FIRST && edge < MR {
        // `a` may hold more rows than the edge tile (a packed panel of this tile: element
        // (i, p) at `p * cs + i`), of which it reads the first `edge`.
        let (tile, fetch) = ((r, c), (next, next_panel));
        return match edge {
            EDGE_ROWS => one_tile::<S, EDGE_ROWS, NV, false>(s, t, blk, a, b, tile, &mut [], fetch),
            _ => one_tile::<S, WIDE_EDGE_ROWS, NV, false>(s, t, blk, a, b, tile, &mut [], fetch),
        };
    }
    if !FIRST && NV == 2 && t.n - c <= S::LANES {
        // A last column panel of at most one vector runs the one-vector tile, on the
        // first half of each k step's NR floats (the panel's stride stays NR): half the
        // FMAs of a padded full tile. Intel VM (session 58), one thread, against faer,
        // alternated twice with the full tile: `x·Wᵀ` (swapped, so the edge is C's last
        // rows) 100x4096x4096 0.90-0.91x -> 0.97-0.99x, 72x4096x4096 0.87-0.88x ->
        // 0.99-1.01x, 80x4096x256 0.77-0.79x -> 0.91x, 112x4096x512 0.82-0.83x -> 0.92x,
        // 48x4096x256 0.71-0.72x -> 0.91-0.92x; 200^3 1.03-1.04x -> 1.08-1.09x, 300^3
        // 0.99x -> 1.02-1.03x; 128x4096x4096 (no edge) unchanged.
        let fetch = (next, next_panel);
        return one_tile::<S, MR, 1, false>(s, t, blk, a, b, (r, c), &mut [], fetch);
    }
    let clipped = (MR.min(t.m - r), (NV * S::LANES).min(t.n - c));
    tile_at::<S, MR, NV, FIRST>(
        s,
        (t, blk),
        (a, b),
        (r, c),
        clipped,
        pack,
        (next, next_panel),
    );
}

/// The micro-kernel on the `rows x cols` tile of C at `(r, c)`, then its store: the body
/// `one_tile` (after its edge cases) and `whole_tiles` share. The C tile's lines are
/// asked for where `Block::prefetch_c` says, else `next`'s.
#[inline(always)]
fn tile_at<S: Simd, const MR: usize, const NV: usize, const FIRST: bool>(
    s: S,
    (t, blk): (&GemmTask, &Block),
    (a, b): (APanel, BPanel),
    (r, c): (usize, usize),
    (rows, cols): (usize, usize),
    pack: &mut [f32],
    (next, next_panel): (Option<LinePrefetch>, Option<NextPanelShare>),
) {
    let tile = t.c.at(r, c);
    let pf = match blk.prefetch_c {
        true => Some(LinePrefetch::c_tile(tile, rows, cols)),
        false => next,
    };
    let next_panel = next_panel.filter(|_| !blk.prefetch_c || blk.next_beside_c);
    let acc = micro_tile::<S, MR, NV, FIRST>(s, blk.kc, a, b, pf, pack, next_panel);
    store_tile::<S, MR, NV>(s, &acc, tile, rows, cols, t.alpha, blk.beta);
}

/// Rows of the tile that runs a row panel of `rows` rows in `mr`-row tiles: a whole
/// panel `mr`, a ragged last one an edge tile, `EDGE_ROWS` for at most that many rows and
/// `WIDE_EDGE_ROWS` for five or six where `mr` is more. The one rule for `one_tile`, the
/// unpacked grid's last band (`small::grid`) and the swap's costs (`orientation`).
pub(super) const fn edge_tile_rows(mr: usize, rows: usize) -> usize {
    if rows <= EDGE_ROWS && mr > EDGE_ROWS {
        EDGE_ROWS
    } else if rows <= WIDE_EDGE_ROWS && mr > WIDE_EDGE_ROWS {
        WIDE_EDGE_ROWS
    } else {
        mr
    }
}

/// Rows of the edge tile for a ragged last row panel of at most as many (`edge_tile_rows`).
pub(super) const EDGE_ROWS: usize = 4;

/// Rows of the tile that a ragged last row panel of five or six runs where MR is eight
/// (AVX-512's and NEON's 8 x 32 and 8 x 8 tiles): 12 accumulators, enough sums to keep
/// both FMA pipes busy, where the eight-row tile threw two or three rows' FMAs away.
/// Emerald Rapids VM, one thread, against faer on the same bytes, the six-row tile forced
/// for the whole product (`TRUENO_GEMM_MICRO=6x32`) against the eight-row one, two
/// rounds (trueno's GFLOP/s): 5x256x256 101.6-104.1 -> 129.8-131.8 (0.81-0.83x ->
/// 1.01-1.03x), 6x512x512 122.1 -> 158.1-168.0 (0.87-0.88x -> 1.10-1.14x).
pub(super) const WIDE_EDGE_ROWS: usize = 6;

/// `sweep` in the other order: A panels outside (each stays in L1 while the block's B
/// panels, in L2, pass it), B panels inside; for an A read in place that is read once.
/// Each tile also asks a share of the next A panel's rows into L1 over its k steps
/// (`next_a_rows`). Where `b_fill` names B's panels, the first A panel's tiles pack them
/// (`first_a_panel_packs_b`).
#[inline(always)]
#[allow(clippy::type_complexity)]
fn sweep_a_outer<'a, 'b, 'c, S: Simd, const MR: usize, const NV: usize>(
    s: S,
    t: &GemmTask,
    blk: &Block,
    a_panel: impl Fn(usize) -> APanel<'a>,
    (b_panel, b_fill): (
        impl Fn(usize) -> BPanel<'b>,
        impl Fn(usize) -> Option<(BPanel<'b>, &'c mut [f32])>,
    ),
    (ic, mc): (usize, usize),
    (jc, nc): (usize, usize),
) {
    let nr = NV * S::LANES;
    let (panels, b_panels) = (mc.div_ceil(MR), nc.div_ceil(nr));
    let fetch_next = MR.div_ceil(b_panels) <= NEXT_A_ROWS_A_TILE;
    // Only a row-major B's (`shallow_first_a_panel_packs_b`).
    let first_panel_packs = !t.tb && b_fill(0).is_some();
    for ir in 0..panels {
        let apan = a_panel(ir);
        if ir == 0 && first_panel_packs {
            first_a_panel_packs_b::<S, MR, NV>(
                s,
                (t, blk),
                apan,
                (&b_panel, &b_fill),
                ic,
                (jc, nc),
            );
            continue;
        }
        let next = (fetch_next && ir + 1 < panels).then(|| a_panel(ir + 1));
        for jr in 0..b_panels {
            let at = (ic + ir * MR, jc + jr * nr);
            let fetch = next.and_then(|a| next_a_rows(a, (jr, b_panels), blk.kc));
            let fetch = (fetch, None);
            one_tile::<S, MR, NV, false>(s, t, blk, apan, b_panel(jr), at, &mut [], fetch);
        }
    }
}

/// The first A panel's row of tiles in `sweep_a_outer`, each tile packing the B panel
/// `b_fill` names (a row-major B's) as it reads it, so that the A panels after it read
/// the packed copy; a panel `b_fill` does not name (a ragged last one, packed by the
/// pass) is read as packed. Each packing tile asks L2 for all of the next panel's
/// source rows over its k steps (`Block::next_fill_to_l2`): those rows are a row of B
/// apart, so no hardware prefetcher runs ahead of the tile (`FILL_AHEAD` then brings
/// each row on into L1).
#[inline(always)]
#[allow(clippy::type_complexity)]
fn first_a_panel_packs_b<'a, 'b, 'c, S: Simd, const MR: usize, const NV: usize>(
    s: S,
    (t, blk): (&GemmTask, &Block),
    apan: APanel<'a>,
    (b_panel, b_fill): (
        &impl Fn(usize) -> BPanel<'b>,
        &impl Fn(usize) -> Option<(BPanel<'b>, &'c mut [f32])>,
    ),
    ic: usize,
    (jc, nc): (usize, usize),
) {
    let nr = NV * S::LANES;
    let b_panels = nc.div_ceil(nr);
    for jr in 0..b_panels {
        let at = (ic, jc + jr * nr);
        let next_src = next_fill_src(blk, b_fill, jr, b_panels);
        // An ask every k step (what the loop cannot carry goes out before it).
        let share = next_src.map(|src| {
            let rows = LinePrefetch::rows_spanned(src.data.as_ptr(), src.stride, blk.kc, nr);
            let all = NextPanelShare::of(rows, 0, 1, (blk.kc, true));
            NextPanelShare { spacing: 1, ..all }
        });
        match b_fill(jr) {
            Some((src, dst)) => {
                one_tile::<S, MR, NV, true>(s, t, blk, apan, src, at, dst, (None, share));
            }
            None => {
                let b = b_panel(jr);
                one_tile::<S, MR, NV, false>(s, t, blk, apan, b, at, &mut [], (None, None));
            }
        }
    }
}

/// The source of the B panel after `jr` (of `b_panels`) where its first tile packs it and
/// the tiles before ask L2 for it (`Block::next_fill_to_l2`); its buffer slice, unused,
/// is dropped at once.
#[inline(always)]
fn next_fill_src<'b, 'c>(
    blk: &Block,
    b_fill: &impl Fn(usize) -> Option<(BPanel<'b>, &'c mut [f32])>,
    jr: usize,
    b_panels: usize,
) -> Option<BPanel<'b>> {
    match blk.next_fill_to_l2 && jr + 1 < b_panels {
        true => b_fill(jr + 1).map(|(src, _)| src),
        false => None,
    }
}

/// The fewest A panels over which `sweep` spreads asking L2 for the next B panel.
pub(super) const NEXT_B_MIN_A_PANELS: usize = 4;

/// Rows of the next A panel one tile of `sweep_a_outer` asks into L1, at most.
const NEXT_A_ROWS_A_TILE: usize = 2;

/// The rows of the A panel `a` (read in place, rows `rs` apart) that tile `jr` of
/// `b_panels` asks into L1 while it runs: the panel's rows split evenly over the tiles
/// before it is needed. The hardware prefetchers see each row of an A from memory as a
/// short stream (KC floats) that starts anew for every panel, and the first tile of each
/// panel waited on them. Zen 4 VM (AVX-512, 8x32: four B panels, two rows a tile), one
/// thread, alternated four times against faer, `x·Wᵀ`: 128x4096x4096 0.96-0.97x ->
/// 0.99-1.01x, 128x4096x11008 0.96-0.98x -> 0.98-1.00x, 128x11008x4096 0.99-1.00x ->
/// 1.01-1.04x (two threads, twice: within the noise, 0.95-1.04x both ways);
/// the 6x16 tile forced (three or four B panels): 48x4096x11008 0.90-0.93x -> 0.99-1.00x,
/// 64 rows within 1%. Three rows a tile or more (96 rows, 32, 64 on the 8x32 tile: up to
/// 328 lines asked over 80 slots, a next panel as big as the one L1 must keep) lost
/// 3-20%, so those tiles ask for nothing (`NEXT_A_ROWS_A_TILE`).
#[inline(always)]
fn next_a_rows(a: APanel, (jr, b_panels): (usize, usize), kc: usize) -> Option<LinePrefetch> {
    let (r0, r1) = (a.rows * jr / b_panels, a.rows * (jr + 1) / b_panels);
    // A packed panel (cs = MR) sits in L2 already; an empty share asks for nothing.
    (a.cs == 1 && r1 > r0)
        .then(|| LinePrefetch::rows(a.data[r0 * a.rs..].as_ptr(), a.rs, r1 - r0, kc))
}

/// The ir-th MR-row panel of a packed A block (zero-padded, so all MR rows are valid).
#[inline(always)]
pub(super) fn packed_panel<const MR: usize>(ap: &[f32], kc: usize, ir: usize) -> APanel<'_> {
    APanel {
        data: &ap[ir * kc * MR..],
        rs: 1,
        cs: MR,
        rows: MR,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ragged_row_panel_runs_the_four_or_six_row_edge_tile_where_it_is_shorter() {
        // AVX-512's and NEON's 8-row tile: up to four rows the four-row tile, five or six
        // the six-row one, seven and a whole panel the full tile.
        let eight: Vec<usize> = (1..=8).map(|r| edge_tile_rows(8, r)).collect();
        assert_eq!(eight, [4, 4, 4, 4, 6, 6, 8, 8]);
        // AVX2's 6-row tile has no six-row edge; a 4-row tile none at all; a taller
        // candidate (14 x 32) runs seven to thirteen rows in full.
        let six: Vec<usize> = (1..=6).map(|r| edge_tile_rows(6, r)).collect();
        assert_eq!(six, [4, 4, 4, 4, 6, 6]);
        assert_eq!(edge_tile_rows(4, 3), 4);
        assert_eq!((edge_tile_rows(14, 6), edge_tile_rows(14, 7)), (6, 14));
    }

    #[test]
    fn c_is_prefetched_only_where_the_update_reads_a_c_that_l2_does_not_keep() {
        let l2 = 2 << 20;
        // 1024^3: a 4 MiB C, read by beta 1 or -1.5 (k blocks after the first).
        let c = |m: usize, n: usize, k: usize| (m * n * 4, (m * k + k * n + m * n) * 4);
        assert!(prefetches_c(false, c(1024, 1024, 1024), l2, 1.0));
        assert!(prefetches_c(false, c(1024, 1024, 1024), l2, -1.5));
        // The first k block of an overwrite only writes C.
        assert!(!prefetches_c(false, c(1024, 1024, 1024), l2, 0.0));
        // A C within half of L2 whose A and B together with it fit L2 too: 384^3
        // (1.7 MiB in all), 128x128x512, and one just past half of L2.
        assert!(!prefetches_c(false, c(384, 384, 384), l2, 1.0));
        assert!(!prefetches_c(false, c(128, 128, 512), l2, 1.0));
        assert!(prefetches_c(false, (l2 / 2 + 4, l2 / 2 + 4), l2, 1.0));
        // One within half of L2 whose A and B stream past it: 512^3 (a 1 MiB C, 3 MiB
        // in all), 64x4096x512 (1 MiB, 9.1 MiB).
        assert!(prefetches_c(false, c(512, 512, 512), l2, 1.0));
        assert!(prefetches_c(false, c(64, 4096, 512), l2, 1.0));
        // Written through its transpose: never.
        assert!(!prefetches_c(true, c(1024, 1024, 1024), l2, 1.0));
    }
}
