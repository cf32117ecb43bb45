//! The BLIS loops, written once over the `Simd` trait: pack a KC x NC block of B and an
//! MC x KC block of A into micro-panels (or read a small one in place), then sweep an
//! MR x NR register-tile micro-kernel over them, each block's sweep out of line. Edge
//! tiles run the same micro-kernel on zero-padded panels (a ragged last row panel a
//! 4-row one), and `store.rs` writes only their valid part. Small problems skip packing
//! (`small.rs`).

use super::blocking::{Blocking, CacheSizes};
use super::in_place::{a_in_place, b_in_place, b_in_place_from_memory, fuse_b};
use super::micro::{APanel, BPanel, LinePrefetch, NextPanelShare, micro_tile, rows_to_l2};
use super::pack::{
    pack_a, pack_b, panel_stride, return_pack_buffer, rows_make_one_stream, take_pack_buffer,
};
use super::store::{scale_c, store_tile};
use super::task::{GemmTask, ProfileCounters};
use super::transpose8::has_avx;
use crate::simd::{OutOfLine, Simd};

/// The packed BLIS loops for one task on one thread.
#[inline(always)]
pub(crate) fn gemm_packed<S: Simd, const MR: usize, const NV: usize>(
    s: S,
    t: &GemmTask,
    bl: Blocking,
) {
    let nr = NV * S::LANES;
    if t.m == 0 || t.n == 0 {
        return;
    }
    if t.k == 0 {
        return scale_c(t);
    }
    let thin = thin_b(MR, NV * S::LANES, t, bl);
    let one_block = one_block(MR, t, bl);
    let kc = match (thin, one_block) {
        (true, _) => bl.kc_thin_b,
        (false, true) => bl.kc_one_block,
        (false, false) => bl.kc,
    };
    let nc = match one_block {
        true => one_block_nc(t, bl, kc.min(t.k), CacheSizes::detect()),
        false => bl.nc,
    };
    // MC rows a block, or all of a one-block A.
    let (kc_max, mc_max, nc_max) = (
        kc.min(t.k),
        match one_block {
            true => t.m.next_multiple_of(MR),
            false => bl.mc,
        },
        nc.min(t.n.next_multiple_of(nr)),
    );
    let b_len = panel_stride(kc_max, nr) * nc_max.div_ceil(nr);
    let a_len = kc_max * tallest_a_block(t.m, mc_max, MR).next_multiple_of(MR);
    let a_pad = a_len.next_multiple_of(16);
    let mut buf = take_pack_buffer();
    if buf.len() < a_pad + b_len + 16 {
        buf.resize(a_pad + b_len + 16, 0.0);
    }
    // Both panels start on 64-byte boundaries: whole-cache-line vector loads.
    let off = buf.as_ptr().align_offset(64).min(16);
    let (ap, bp) = buf[off..off + a_pad + b_len].split_at_mut(a_pad);
    let blocks = (kc_max, mc_max, nc_max);
    let a = &mut ap[..a_len];
    packed_loops::<S, MR, NV>(s, t, a, bp, blocks, thin, bl.pack_b_rows_one_stream);
    return_pack_buffer(buf);
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn packed_loops<S: Simd, const MR: usize, const NV: usize>(
    s: S,
    t: &GemmTask,
    ap: &mut [f32],
    bp: &mut [f32],
    (kc_max, mc_max, nc_max): (usize, usize, usize),
    thin: bool,
    pack_b_rows_one_stream: usize,
) {
    let nr = NV * S::LANES;
    let avx = has_avx(S::BACKEND);
    let caches = CacheSizes::detect();
    let l2 = caches.l2;
    for jc in (0..t.n).step_by(nc_max) {
        let nc = nc_max.min(t.n - jc);
        for pc in (0..t.k).step_by(kc_max) {
            let kc = kc_max.min(t.k - pc);
            let beta = if pc == 0 { t.beta } else { 1.0 };
            // When A is one block, operands that suit it are read in place (see
            // `a_in_place`, `b_in_place`; B's ragged last panel is still packed). B is
            // otherwise packed whole, KC x NC, reading each of its rows once.
            let one_block = t.m <= mc_max;
            let b_direct = if one_block && b_in_place(t.tb, (t.ldb, t.whole_k), kc, nr, caches) {
                nc / nr
            } else {
                0
            };
            // Whole panels of a row-major B, packed by the first micro-kernel call that
            // reads them (see `sweep`).
            let fused = match b_direct == 0
                && !thin
                && fuse_b(t.tb, (t.k, t.n), (t.whole_k, t.ldb), caches, one_block)
            {
                true => nc / nr,
                false => 0,
            };
            let block = Block {
                kc,
                beta,
                prefetch_c: prefetches_c(t.c.trans, t.m * t.n * 4, l2, beta),
                next_b_to_l2: b_direct > 1
                    && b_in_place_from_memory(t.tb, (t.ldb, t.whole_k), caches)
                    && t.m.div_ceil(MR) >= NEXT_B_MIN_A_PANELS,
                next_fill_to_l2: fused > 0 && t.k.saturating_mul(t.n).saturating_mul(4) > l2,
            };

            let packed_first = b_direct + fused;
            if packed_first < nc.div_ceil(nr) {
                let t0 = t.profile.map(|_| std::time::Instant::now());
                let j0 = jc + packed_first * nr;
                let dst = &mut bp[fused * panel_stride(kc, nr)..];
                let (cols, rows) = (nc - packed_first * nr, pack_b_rows_one_stream);
                pack_b::<S, NV>(s, t, dst, (pc, kc), (j0, cols), avx, rows);
                ProfileCounters::add(t.profile, |p| &p.pack_b, t0);
            }
            let bsrc = |jr: usize| BPanel {
                data: &t.b[pc * t.ldb + jc + jr * nr..],
                stride: t.ldb,
            };
            let (bptr, blen) = (bp.as_mut_ptr(), bp.len());
            let packed_at = |jr: usize| (jr - b_direct) * panel_stride(kc, nr);
            let b_panel = |jr: usize| match jr < b_direct {
                true => bsrc(jr),
                false => BPanel {
                    // SAFETY: panel jr of the buffer `bp` (exclusively borrowed here),
                    // read after `b_fill` packed it, whose slice is then out of use.
                    data: unsafe {
                        std::slice::from_raw_parts(bptr.add(packed_at(jr)), blen - packed_at(jr))
                    },
                    stride: nr,
                },
            };
            let b_fill = |jr: usize| {
                (jr >= b_direct && jr < packed_first).then(|| {
                    // SAFETY: panel jr of `bp`, kc x NR floats no other live slice covers
                    // (`b_panel(jr)` is asked for only after this one is written).
                    let dst =
                        unsafe { std::slice::from_raw_parts_mut(bptr.add(packed_at(jr)), kc * nr) };
                    (bsrc(jr), dst)
                })
            };
            let in_place =
                one_block && a_in_place(MR, t) && super::tile_reads_a_in_place(S::BACKEND, t.n);
            if in_place || thin {
                let a_panel = |ir: usize| APanel {
                    data: &t.a[ir * MR * t.lda + pc..],
                    rs: t.lda,
                    cs: 1,
                    rows: MR.min(t.m - ir * MR),
                };
                let t0 = t.profile.map(|_| std::time::Instant::now());
                let (rows, cols) = ((0, t.m), (jc, nc));
                let blk = &block;
                match thin {
                    true => s.outlined(Sweep::<MR, NV, true, _, _, _> {
                        t,
                        blk,
                        a_panel,
                        b_panel,
                        b_fill: no_fill,
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
                ProfileCounters::add(t.profile, |p| &p.kernel, t0);
                continue;
            }
            let mut ic = 0;
            while ic < t.m {
                let mc = a_block_rows(t.m - ic, mc_max, MR);
                let t0 = t.profile.map(|_| std::time::Instant::now());
                pack_a(s, t, ap, ic, mc, pc, kc, MR, avx);
                ProfileCounters::add(t.profile, |p| &p.pack_a, t0);
                let t0 = t.profile.map(|_| std::time::Instant::now());
                let ap = &*ap;
                let a_panel = |ir| packed_panel::<MR>(ap, kc, ir);
                // Only the first block of A packs B's panels; the others read them.
                let fill = |jr| (ic == 0).then(|| b_fill(jr)).flatten();
                s.outlined(Sweep::<MR, NV, false, _, _, _> {
                    t,
                    blk: &block,
                    a_panel,
                    b_panel: &b_panel,
                    b_fill: fill,
                    rows: (ic, mc),
                    cols: (jc, nc),
                });
                ProfileCounters::add(t.profile, |p| &p.kernel, t0);
                ic += mc;
            }
        }
    }
}

/// Whether A is read in place whatever its size, because B is thin: at most
/// `THIN_PANELS` micro-panels wide, so each A panel would serve that few micro-tiles and a
/// packing pass over A (the big operand here) would cost as much as reading it. The sweep
/// then keeps each A panel in L1 across B's panels (`sweep_a_outer`). A row-major A only.
/// Not where the usual sweep reads A in place anyway (one block) and a KC-deep B panel
/// stays in L1 (two thirds of it): there B's panels, each packed by its first tile, stay
/// in L1 while A passes, where the A-outer sweep reads all of B from L2 for every A
/// panel. Zen 5 VM, one thread, against faer, two rounds: 128^3 0.92-0.94x -> 1.01-1.02x,
/// 256x128x256 0.95x -> 1.00-1.01x; deeper (128x128x512 and on, a 64 KiB panel) the
/// A-outer sweep stays ahead (1.03-1.07x against 0.98x).
#[inline(always)]
pub(super) fn thin_b(mr: usize, nr: usize, t: &GemmTask, bl: Blocking) -> bool {
    let panel_in_l1 = t.k.min(bl.kc) * nr * 4 <= CacheSizes::detect().l1 * 2 / 3;
    let b_outer = one_block(mr, t, bl) && a_in_place(mr, t) && panel_in_l1;
    !t.ta && t.n <= THIN_PANELS * nr && !b_outer
}

/// Whether A is one block of the packed loops: at most MC rows, or, for a product no
/// deeper than the one-block depth, all of A within the MC x KC block's floats (a
/// shallow A of more than MC rows is smaller than the block MC was cut for). Zen 3 VM
/// (AVX2, MC 126), one thread, four rounds interleaved against faer: 128^3 0.96-0.98x ->
/// 1.00-1.01x, 160^3 0.94-0.96x -> 0.99-1.05x, 192^3 0.95x -> 0.97-0.98x, 200^3
/// 0.91-0.96x -> 0.92-0.94x. Not for deep products: there the one-block depth and
/// whole-row B blocks ran 128x11008x4096 at 0.78-0.85x against 0.82-0.92x.
#[inline(always)]
pub(super) fn one_block(mr: usize, t: &GemmTask, bl: Blocking) -> bool {
    let shallow_fits = t.k <= bl.kc_one_block && t.m.next_multiple_of(mr) * t.k <= bl.mc * bl.kc;
    t.m <= bl.mc || shallow_fits
}

/// Rows of the A block that starts `rest` rows before A's end: `mc`, or all `rest` where
/// they overrun it by at most `mr` (one micro-panel), which a block of their own would
/// sweep all of B's block again for. On AVX2 (MC 126 on the Zen 3 VM) a prefill's 128
/// rows had run a 126-row block and a 2-row one, which read each packed B block from L3
/// a second time: one thread, four rounds interleaved against faer (medians),
/// 128x11008x4096 0.82-0.84x -> 0.88-0.93x, `x·Wᵀ` 128x11008x4096 0.79x -> 0.85x and
/// 128x4096x11008 0.78x -> 0.81x.
fn a_block_rows(rest: usize, mc: usize, mr: usize) -> usize {
    match rest <= mc + mr {
        true => rest,
        false => mc,
    }
}

/// Rows of the tallest A block `a_block_rows` cuts `m` rows into: `mc`, or the last block
/// where it takes up a remainder (the buffer is sized to it exactly: the B panels after it
/// keep their place, and with it their cache sets, wherever no block grows).
fn tallest_a_block(m: usize, mc: usize, mr: usize) -> usize {
    let before_last = m.saturating_sub(mc + mr).div_ceil(mc);
    (m - before_last * mc).max(mc.min(m))
}

/// B panels up to which `thin_b` holds.
pub(super) const THIN_PANELS: usize = 4;

/// NC of a one-block product (A at most MC rows): `nc_one_block`, or all of B's columns
/// where its packing reads a row-major B one row after another when the rows make one
/// stream (`Blocking::pack_b_rows_one_stream`, Zen) and a KC-deep block of whole rows
/// fits half of L3. A B wider than NC (a layer's 11008 or 14336 outputs) is otherwise
/// packed in pieces of its rows, and the pieces, far apart, are no stream: Zen 5 VM, one
/// thread, 128x11008x4096 alternated twice against faer: 0.95-0.96x -> 1.03-1.05x (two
/// threads, each packing half of k: 0.93x both ways).
fn one_block_nc(t: &GemmTask, bl: Blocking, kc: usize, c: CacheSizes) -> usize {
    let whole = t.n.next_multiple_of(bl.nr);
    let one_stream = !t.tb && rows_make_one_stream(t.ldb, t.n);
    match bl.pack_b_rows_one_stream == 1 && one_stream && kc * whole * 4 <= c.l3 / 2 {
        true => whole.max(bl.nc_one_block),
        false => bl.nc_one_block,
    }
}

/// The depth of C's current update, the beta it applies (beta only on the first), and
/// whether C's tiles are prefetched: only where the update reads C (beta not 0) and C
/// outgrows half of L2, which it shares with a packed A block and B's panels.
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
struct Block {
    kc: usize,
    beta: f32,
    prefetch_c: bool,
    /// Whether each tile of a B panel read in place from memory first asks L2 for its
    /// share of the next panel's rows (`sweep`): that panel's KC rows are far apart
    /// (a row a page or more), so no hardware prefetcher runs ahead of its first tile.
    /// Zen 4 VM, against faer, four rounds alternated with it off: one thread
    /// 128x4096x4096 0.95-0.97x -> 0.99-1.01x, 128x4096x11008 1.01x -> 1.03-1.07x
    /// (102-104 -> 104-108 GFLOP/s); two threads, trueno's GFLOP/s (faer's drifted by
    /// 5% between rounds) 128x4096x4096 196-199 -> 199-209, 128x4096x11008 200-205 ->
    /// 205-209; 32-64 rows within the noise both ways. Under `NEXT_B_MIN_A_PANELS` A
    /// panels each tile would ask for a quarter of the panel or more at once.
    next_b_to_l2: bool,
    /// Whether the tiles of each B panel packed by its first tile (`fuse_b`) ask L2 for
    /// the next such panel's source rows, spread over their k steps (`NextPanelShare`):
    /// for a B past L2, whose strided rows the next first tile would otherwise wait on
    /// from L3, its line-fill buffers full. Not where the tile asks for its C tile (that
    /// loop goes on as it was). Intel VM (session 58), one thread, against faer,
    /// alternated twice with it off: 64x4096x256 0.85-0.86x -> 0.87-0.90x, 64x4096x512
    /// 0.78-0.79x -> 0.85-0.86x, 32x2048x512 0.78-0.80x -> 0.87x, 128x2048x512 0.90x ->
    /// 0.93-0.94x, 128x1056x512 0.93x -> 0.97-0.98x; 32x4096x512, 128x4096x256 and
    /// 256x4096x512 within 1%. Tried: three lines a 32-float row instead of the two it
    /// spans (1-4% slower than this), one loop that also asks for the C tile (2-3% slower
    /// at 128 and 256 rows), the lines spread by a running sum (18% slower at 256^3).
    next_fill_to_l2: bool,
}

/// `Block::prefetch_c` for an update with `beta` of a C of `c_bytes` (`transposed`: C is
/// written through its transpose, whose tiles are not rows of lines) on a core of `l2`
/// bytes of L2.
fn prefetches_c(transposed: bool, c_bytes: usize, l2: usize, beta: f32) -> bool {
    !transposed && c_bytes > l2 / 2 && beta != 0.0
}

/// One block's `sweep` (`sweep_a_outer` with `A_OUTER`, `b_fill` then unused), run out
/// of line (`Simd::outlined`). Inlined into the one GEMM function with every kernel
/// shape's loops, the register allocator kept one of AVX2's twelve 6x16 accumulators on
/// the stack in the loop that reads A in place (a load, FMA and store a k step: half
/// speed), and where it did so moved with unrelated changes (a 4-row tile for ragged last
/// panels made 64^3 spill: 0.94x -> 0.49x faer). Out of line, a block a call, with the C
/// prefetch's single loop (`micro_tile`), no loop spills; Zen 3 VM, one thread,
/// interleaved against faer, two rounds against the inlined sweep: 64^3 0.92-0.94x ->
/// 1.04-1.05x, 100^3 0.86-0.87x -> 0.89x, 2048x8x2048 2.50-2.65x -> 2.83x, 128^3-1024^3
/// and 32x4096x4096 within the noise. One call a tile instead cost 64^3 5%.
struct Sweep<'t, 'g, const MR: usize, const NV: usize, const A_OUTER: bool, AP, BP, BF> {
    t: &'t GemmTask<'g>,
    blk: &'t Block,
    a_panel: AP,
    b_panel: BP,
    b_fill: BF,
    rows: (usize, usize),
    cols: (usize, usize),
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
        match A_OUTER {
            true => sweep_a_outer::<S, MR, NV>(s, t, blk, self.a_panel, self.b_panel, rows, cols),
            false => {
                let b = (self.b_panel, self.b_fill);
                sweep::<S, MR, NV>(s, t, blk, self.a_panel, b, rows, cols)
            }
        }
    }
}

/// `b_fill` for a sweep that packs no B panel.
fn no_fill<'b, 'c>(_: usize) -> Option<(BPanel<'b>, &'c mut [f32])> {
    None
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
        // Where the next panel is packed by its first tile too, this panel's tiles ask L2
        // for its source rows (`Block::next_fill_to_l2`). Its buffer slice, unused, is
        // dropped at once.
        let next_src = match blk.next_fill_to_l2 && jr + 1 < b_panels {
            true => b_fill(jr + 1).map(|(src, _)| src),
            false => None,
        };
        let share = |ir: usize| {
            next_src.map(|src| {
                let rows = LinePrefetch::rows_spanned(src.data.as_ptr(), src.stride, blk.kc, nr);
                NextPanelShare::of(rows, ir, panels)
            })
        };
        // The first tile packs the panel where `b_fill` says so; the rest read it.
        let first = match b_fill(jr) {
            Some((src, dst)) => {
                let (a, fetch) = (a_panel(0), (None, share(0)));
                one_tile::<S, MR, NV, true>(s, t, blk, a, src, at(0), dst, fetch);
                1
            }
            None => 0,
        };
        let b = b_panel(jr);
        let next = (blk.next_b_to_l2 && jr + 1 < b_panels).then(|| b_panel(jr + 1));
        for ir in first..panels {
            if let Some(nb) = next {
                let rows = (blk.kc * ir / panels)..(blk.kc * (ir + 1) / panels);
                rows_to_l2(nb.data.as_ptr(), nb.stride, rows, nr);
            }
            let fetch = (None, share(ir));
            one_tile::<S, MR, NV, false>(s, t, blk, a_panel(ir), b, at(ir), &mut [], fetch);
        }
    }
}

/// The micro-kernel on the tile of C at `(r, c)` (clipped to C), then its store; `pack`
/// as in `micro_tile`; `next`, lines its k steps ask into L1 where C's are not. A last
/// row panel of at most `EDGE_ROWS` rows runs the `EDGE_ROWS`-row tile instead of MR
/// rows of which the repeated ones are thrown away.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn one_tile<S: Simd, const MR: usize, const NV: usize, const PACK: bool>(
    s: S,
    t: &GemmTask,
    blk: &Block,
    a: APanel,
    b: BPanel,
    (r, c): (usize, usize),
    pack: &mut [f32],
    (next, next_panel): (Option<LinePrefetch>, Option<NextPanelShare>),
) {
    if !PACK && MR > EDGE_ROWS && t.m - r <= EDGE_ROWS {
        // `a` may hold more rows than the edge tile (a packed panel of this tile: element
        // (i, p) at `p * cs + i`), of which it reads the first EDGE_ROWS.
        let fetch = (next, next_panel);
        return one_tile::<S, EDGE_ROWS, NV, false>(s, t, blk, a, b, (r, c), &mut [], fetch);
    }
    if !PACK && NV == 2 && t.n - c <= S::LANES {
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
    let nr = NV * S::LANES;
    let tile = t.c.at(r, c);
    let (rows, cols) = (MR.min(t.m - r), nr.min(t.n - c));
    let pf = match blk.prefetch_c {
        true => Some(LinePrefetch::c_tile(tile, rows, cols, nr)),
        false => next,
    };
    let acc = micro_tile::<S, MR, NV, PACK>(s, blk.kc, a, b, pf, pack, next_panel);
    store_tile::<S, MR, NV>(s, &acc, tile, rows, cols, t.alpha, blk.beta);
}

/// Rows of the tile that a ragged last row panel runs (`one_tile`).
const EDGE_ROWS: usize = 4;

/// `sweep` in the other order: A panels outside (each stays in L1 while the block's B
/// panels, in L2, pass it), B panels inside; for an A read in place that is read once.
/// Each tile also asks a share of the next A panel's rows into L1 over its k steps
/// (`next_a_rows`).
#[inline(always)]
fn sweep_a_outer<'a, 'b, S: Simd, const MR: usize, const NV: usize>(
    s: S,
    t: &GemmTask,
    blk: &Block,
    a_panel: impl Fn(usize) -> APanel<'a>,
    b_panel: impl Fn(usize) -> BPanel<'b>,
    (ic, mc): (usize, usize),
    (jc, nc): (usize, usize),
) {
    let nr = NV * S::LANES;
    let (panels, b_panels) = (mc.div_ceil(MR), nc.div_ceil(nr));
    let fetch_next = MR.div_ceil(b_panels) <= NEXT_A_ROWS_A_TILE;
    for ir in 0..panels {
        let apan = a_panel(ir);
        let next = (fetch_next && ir + 1 < panels).then(|| a_panel(ir + 1));
        for jr in 0..b_panels {
            let at = (ic + ir * MR, jc + jr * nr);
            let fetch = next.and_then(|a| next_a_rows(a, (jr, b_panels), blk.kc));
            let fetch = (fetch, None);
            one_tile::<S, MR, NV, false>(s, t, blk, apan, b_panel(jr), at, &mut [], fetch);
        }
    }
}

/// The fewest A panels over which `sweep` spreads asking L2 for the next B panel.
const NEXT_B_MIN_A_PANELS: usize = 4;

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
fn packed_panel<const MR: usize>(ap: &[f32], kc: usize, ir: usize) -> APanel<'_> {
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
    fn c_is_prefetched_only_where_the_update_reads_a_c_past_half_of_l2() {
        let l2 = 2 << 20;
        // 1024 x 1024 floats: 4 MiB, read by beta 1 or -1.5 (k blocks after the first).
        assert!(prefetches_c(false, 4 << 20, l2, 1.0));
        assert!(prefetches_c(false, 4 << 20, l2, -1.5));
        // The first k block of an overwrite only writes C.
        assert!(!prefetches_c(false, 4 << 20, l2, 0.0));
        // A C within half of L2 (512^3: 1 MiB), or written through its transpose.
        assert!(!prefetches_c(false, l2 / 2, l2, 1.0));
        assert!(prefetches_c(false, l2 / 2 + 4, l2, 1.0));
        assert!(!prefetches_c(true, 4 << 20, l2, 1.0));
    }

    #[test]
    fn a_blocks_cover_a_once_and_the_buffer_holds_the_tallest() {
        for mr in [4, 6, 8, 14] {
            for mc in [mr, 3 * mr, 126 / mr * mr, 256 / mr * mr] {
                for m in 1..4 * mc + 3 * mr {
                    let (mut ic, mut tallest, mut blocks) = (0, 0, Vec::new());
                    while ic < m {
                        let rows = a_block_rows(m - ic, mc, mr);
                        blocks.push(rows);
                        tallest = tallest.max(rows);
                        ic += rows;
                    }
                    assert_eq!(ic, m, "mr {mr} mc {mc} m {m}: {blocks:?}");
                    assert_eq!(tallest_a_block(m, mc, mr), tallest, "{mr} {mc} {m}");
                    // Every block MC rows but the last, which is 1 to MC + MR.
                    let (last, full) = blocks.split_last().unwrap();
                    assert!(full.iter().all(|&r| r == mc), "{mc} {m}: {blocks:?}");
                    assert!(*last <= mc + mr, "{mc} {m}: {blocks:?}");
                    // No last block of at most MR rows after a full one.
                    assert!(full.is_empty() || *last > mr, "{mc} {m}: {blocks:?}");
                }
            }
        }
    }
}
