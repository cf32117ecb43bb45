//! The BLIS loops, written once over the `Simd` trait: pack a KC x NC block of B and an
//! MC x KC block of A into micro-panels (or read a small one in place), then sweep an
//! MR x NR register-tile micro-kernel over them, each block's sweep out of line
//! (`sweep.rs`). Edge tiles run the same micro-kernel on zero-padded panels (a ragged
//! last row panel a 4-row one, a last column panel of one vector the one-vector tile),
//! and `store.rs` writes only their valid part. Small problems skip packing
//! (`small.rs`).

use super::blocking::{Blocking, CacheSizes, CoreFamily};
use super::fused::{fills_b_past_l2, fuse_b, fuse_b_block, fuse_transposed_b, spreads_next_panel};
use super::in_place::{a_in_place, b_in_place, b_in_place_from_memory, one_block_b};
use super::micro::{APanel, BPanel};
use super::pack::{
    pack_a, pack_b, panel_stride, return_pack_buffer, rows_make_one_stream, take_pack_buffer,
};
use super::store::scale_c;
use super::sweep::{Block, NEXT_B_MIN_A_PANELS, packed_panel, prefetches_c, sweep_block};
use super::sweep_order::{
    cols_within_half_l2, shallow_first_a_panel_packs_b, shallow_sweeps_a_outer, sweeps_a_outer,
};
use super::task::{GemmTask, ProfileCounters};
use super::transpose8::has_avx;
use crate::simd::Simd;

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
    let (caches, core) = (CacheSizes::detect(), CoreFamily::detect());
    let thin = thin_b(MR, NV * S::LANES, t, bl);
    let one_block = one_block(MR, t, bl, (caches, core));
    // A shallow product over a C past two L2 (off Zen, a B that comes back from L2): A's
    // panels outside, B packed before the sweep or by its first A panel (see its rule).
    let b_packed = t.k.saturating_mul(t.n).saturating_mul(4);
    let shallow_a_outer = !thin
        && shallow_sweeps_a_outer(
            t.c,
            (t.k, t.m.div_ceil(MR), one_block, t.tb),
            (t.c_bytes(), b_packed),
            caches,
            core,
        );
    // When A is one block, operands that suit it are read in place (see `a_in_place`,
    // `b_in_place`; B's ragged last panel is still packed). B is otherwise packed whole,
    // KC x NC, reading each of its rows once. Judged once for the whole product, by its
    // KC and depth: a shallower last block, or a part of k that `run_split_k` gives a
    // thread or its lead call, reads B as the other blocks do (such a block had been
    // packed wherever its thinner panel fit L1, a strided copy that no A panel but the
    // first might reuse).
    let (kc, b_in_place) = match (thin, one_block) {
        (true, _) => {
            let kc = thin_kc(bl, t.n, caches.l2);
            (
                kc,
                one_block
                    && b_in_place(
                        t.tb,
                        (t.ldb, t.whole_k),
                        (kc.min(t.whole_k), nr),
                        false,
                        caches,
                    ),
            )
        }
        (false, true) if shallow_a_outer => (bl.kc_one_block, false),
        (false, true) => one_block_b(t, bl, (caches, core)),
        (false, false) => (bl.kc, false),
    };
    let nc = match one_block {
        true => one_block_nc(t, bl, kc.min(t.k), caches),
        false => bl.nc,
    };
    // Of one A block over a row-major B, its first A panel packs B in blocks within half
    // of L2 (`shallow_first_a_panel_packs_b`).
    let first_a_panel_packs = shallow_a_outer && shallow_first_a_panel_packs_b(one_block, t.tb);
    let nc = match first_a_panel_packs {
        true => nc.min(cols_within_half_l2(kc.min(t.k), nr, caches.l2)),
        false => nc,
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
    let modes = (thin, b_in_place, shallow_a_outer, first_a_panel_packs);
    packed_loops::<S, MR, NV>(s, t, a, bp, blocks, modes, bl.pack_b_rows_one_stream);
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
    (thin, b_reads_in_place, shallow_a_outer, first_a_panel_packs): (bool, bool, bool, bool),
    pack_b_rows_one_stream: usize,
) {
    let nr = NV * S::LANES;
    let avx = has_avx(S::BACKEND);
    let (caches, core) = (CacheSizes::detect(), CoreFamily::detect());
    let l2 = caches.l2;
    let one_block = t.m <= mc_max;
    let spreads = spreads_next_panel(t.m, MR, nr);
    for jc in (0..t.n).step_by(nc_max) {
        let nc = nc_max.min(t.n - jc);
        for pc in (0..t.k).step_by(kc_max) {
            let kc = kc_max.min(t.k - pc);
            let beta = if pc == 0 { t.beta } else { 1.0 };
            let b_direct = if b_reads_in_place { nc / nr } else { 0 };
            // Whole panels of B, packed by the first micro-kernel call that reads them,
            // or for a transposed B just before it (see `sweep`); in a shallow A-outer
            // sweep by the first A panel's tiles or the pass (`shallow_first_a_panel_packs_b`).
            let (shape, cc) = ((t.k, t.n), (caches, core));
            let b_outer_fuses = fuse_b(t.tb, shape, t.b_bytes(), cc, (one_block, spreads))
                || fuse_b_block(t.tb, (kc_max, nc_max), one_block, cc)
                || fuse_transposed_b(t.tb, shape, t.c_bytes(), (l2, core), one_block);
            let fuses = first_a_panel_packs || (!shallow_a_outer && b_outer_fuses);
            let fused = match b_direct == 0 && !thin && fuses {
                true => nc / nr,
                false => 0,
            };
            // A row-major B well past L2 packed by its panels' first tiles: the tiles
            // ask for the next panel's rows, on Zen instead of their C tiles, elsewhere
            // beside them (`fills_b_past_l2`, `Block::next_beside_c`).
            let fills_past_l2 =
                fused > 0 && !t.tb && fills_b_past_l2(false, t.b_bytes(), (caches, core), spreads);
            let next_beside_c = fills_past_l2 && core != CoreFamily::Zen;
            let next_b_to_l2 = b_direct > 1
                && b_in_place_from_memory(t.tb, (t.ldb, t.whole_k), caches)
                && t.m.div_ceil(MR) >= NEXT_B_MIN_A_PANELS;
            let block = Block {
                kc,
                beta,
                // Not in the A-outer sweep of a shallow product, whose C rows the
                // prefetchers follow (`shallow_sweeps_a_outer`).
                prefetch_c: prefetches_c(t.c.trans, (t.c_bytes(), t.operand_bytes()), l2, beta)
                    && (!fills_past_l2 || next_beside_c)
                    && !shallow_a_outer,
                next_beside_c,
                next_b_to_l2,
                next_fill_to_l2: fused > 0 && t.k.saturating_mul(t.n).saturating_mul(4) > l2,
                ahead_panels: match next_b_to_l2 {
                    true => 0,
                    false => b_direct,
                },
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
            // Panel jr's source: KC rows of a row-major B, or NR rows of a transposed one.
            let bsrc = |jr: usize| BPanel {
                data: match t.tb {
                    true => &t.b[(jc + jr * nr) * t.ldb + pc..],
                    false => &t.b[pc * t.ldb + jc + jr * nr..],
                },
                stride: t.ldb,
            };
            let (bptr, blen) = (bp.as_mut_ptr(), bp.len());
            // The A-outer sweep reads every panel again for each A panel: a slot each.
            let panels = (b_direct, packed_first, one_block && !shallow_a_outer);
            let packed_at = |jr: usize| packed_panel_at(jr, panels, panel_stride(kc, nr));
            let b_panel = |jr: usize| match jr < b_direct {
                true => bsrc(jr),
                false => BPanel {
                    // SAFETY: panel jr of the buffer `bp` (exclusively borrowed here),
                    // read after `b_fill` packed it, whose slice is then out of use; a
                    // panel sharing its slot (`packed_panel_at`) is filled only after
                    // the sweep has done with this one.
                    data: unsafe {
                        std::slice::from_raw_parts(bptr.add(packed_at(jr)), blen - packed_at(jr))
                    },
                    stride: nr,
                },
            };
            let b_fill = |jr: usize| {
                (jr >= b_direct && jr < packed_first).then(|| {
                    // SAFETY: panel jr of `bp`, kc x NR floats no other live slice covers
                    // (`b_panel(jr)` is asked for only after this one is written, and the
                    // sweep drops a panel before it fills the next one in its slot).
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
                let (b, block_at) = ((b_panel, b_fill), ((0, t.m), (jc, nc)));
                let a_outer = thin || shallow_a_outer;
                sweep_block::<S, MR, NV>(s, (t, &block), a_outer, a_panel, b, block_at);
                ProfileCounters::add(t.profile, |p| &p.kernel, t0);
                continue;
            }
            let b_block_bytes = kc * nc.next_multiple_of(nr) * 4;
            let a_outer = shallow_a_outer
                || (packed_first == 0
                    && !one_block
                    && sweeps_a_outer(t.c, b_block_bytes, l2, core));
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
                let (b, block_at) = ((&b_panel, fill), ((ic, mc), (jc, nc)));
                sweep_block::<S, MR, NV>(s, (t, &block), a_outer, a_panel, b, block_at);
                ProfileCounters::add(t.profile, |p| &p.kernel, t0);
                ic += mc;
            }
        }
    }
}

/// Where panel `jr` of a block goes in the packing buffer (floats from its start, slots
/// `stride` apart) when the first `b_direct` panels are read in place and those before
/// `packed_first` are packed by their first tiles (`fuse_b`). Where A is one block
/// (`one_block`), such a panel is dead once that block's A panels have passed it, so
/// all of them take the first slot, which stays in L1; a panel packed by the pass
/// before the sweep (past `packed_first`) keeps its own slot after theirs. Before, each
/// took a slot of its own: a KC x NC copy of B (1-4 MiB) streamed through L2 beside the
/// A panels and C. Intel VM (session 59), one thread, against faer, alternated twice
/// with a slot a panel: 128x1024x256 0.98x -> 1.06x, 128x1056x512 0.96-0.97x -> 1.02x,
/// 128x4096x256 0.95-0.97x -> 0.99-1.01x, 64x4096x512 0.82-0.84x -> 0.88x, 512^3
/// 1.02-1.04x -> 1.05-1.07x; 256^3 and 384^3 unchanged.
fn packed_panel_at(
    jr: usize,
    (b_direct, packed_first, one_block): (usize, usize, bool),
    stride: usize,
) -> usize {
    match one_block && jr < packed_first {
        true => 0,
        false => (jr - b_direct) * stride,
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
    let machine = (CacheSizes::detect(), CoreFamily::detect());
    let panel_in_l1 = t.k.min(bl.kc) * nr * 4 <= machine.0.l1 * 2 / 3;
    let b_outer = one_block(mr, t, bl, machine) && a_in_place(mr, t) && panel_in_l1;
    !t.ta && t.n <= THIN_PANELS * nr && !b_outer
}

/// Whether A is one block of the packed loops: at most MC rows, or, for a product no
/// deeper than the one-block depth, all of A within the MC x KC block's floats (a
/// shallow A of more than MC rows is smaller than the block MC was cut for). Zen 3 VM
/// (AVX2, MC 126), one thread, four rounds interleaved against faer: 128^3 0.96-0.98x ->
/// 1.00-1.01x, 160^3 0.94-0.96x -> 0.99-1.05x, 192^3 0.95x -> 0.97-0.98x, 200^3
/// 0.91-0.96x -> 0.92-0.94x. Not for deep products: there the one-block depth and
/// whole-row B blocks ran 128x11008x4096 at 0.78-0.85x against 0.82-0.92x.
///
/// And up to one micro-panel past MC (the rows `a_block_rows` would cut as one block)
/// where B comes from memory on a Zen core (`fills_b_past_l2`): a prefill's 128
/// rows on AVX2 with MC 126, measured with that rule. Where such a B is read in place
/// instead (Zen 4, `b_in_place`, which comes first), those MC + 1 to MC + MR rows read
/// it in place as one block: not measured.
#[inline(always)]
pub(super) fn one_block(
    mr: usize,
    t: &GemmTask,
    bl: Blocking,
    machine: (CacheSizes, CoreFamily),
) -> bool {
    let shallow_fits = t.k <= bl.kc_one_block && t.m.next_multiple_of(mr) * t.k <= bl.mc * bl.kc;
    let filled_from_memory = t.m <= bl.mc + mr
        && machine.1 == CoreFamily::Zen
        && fills_b_past_l2(t.tb, t.b_bytes(), machine, true);
    t.m <= bl.mc || shallow_fits || filled_from_memory
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

/// KC of a thin product (`thin_b`) whose B is `n` columns, on a core of `l2` bytes of L2:
/// `kc_thin_b`, sized for `THIN_PANELS` B panels, times the whole number of times B's
/// panels fit in that many (four times as deep for one panel, twice for two), as far as
/// B's panels stay within half of L2 (never under `kc_thin_b`). Each A panel, read in
/// place, serves only B's few panels, so it matters less that L1 keeps it than that each
/// of its MR rows is read in a long run (a new hardware-prefetch stream every KC floats)
/// and that C is updated fewer times. Intel VM (session
/// 60; `kc_thin_b` 1024), trueno's GFLOP/s, two rounds each, one thread: `x·Wᵀ`
/// 8x4096x4096 42-44 -> 53-54, 16x4096x4096 84 -> 106-107, 32x4096x4096 149-152 ->
/// 172-176, 32x11008x4096 147-153 -> 172-174, 32x4096x11008 113-118 -> 141-143,
/// 64x4096x4096 175 -> 180-184, 48x4096x4096 even; B thin, 4096x32x4096 153-162 ->
/// 179-180, 11008x32x4096 139-149 -> 174-178, 4096x24x3000 122-124 -> 143-146,
/// 1500x40x1500 149-150 -> 161-162; two threads `x·Wᵀ` 32x4096x4096 313-320 ->
/// 365-367, B thin 11008x32x4096 295-308 -> 348-354; AVX2 (its 4x16 tile) 4096x16x4096
/// 75-78 -> 94-95. Three panels a third deeper (96 rows, KC 1344) lost 1-3%, so three
/// and four keep `kc_thin_b`. More in BENCHMARKS.md (session 60).
pub(super) fn thin_kc(bl: Blocking, n: usize, l2: usize) -> usize {
    let panels = n.div_ceil(bl.nr).clamp(1, THIN_PANELS);
    let in_l2 = l2 / 2 / (panels * bl.nr * 4) / 64 * 64;
    (bl.kc_thin_b * (THIN_PANELS / panels))
        .min(in_l2)
        .max(bl.kc_thin_b)
}

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

#[cfg(test)]
mod tests {
    use super::*;

    /// The caches of the Intel VM the one-block and thin depths were measured on.
    fn intel_vm() -> CacheSizes {
        CacheSizes {
            l1: 48 << 10,
            l2: 2 << 20,
            l3: 480 << 20,
        }
    }

    #[test]
    fn an_a_one_panel_past_mc_is_one_block_where_a_zen_cores_first_tiles_pack_b() {
        use super::super::blocking::CoreFamily::{Other, Zen};
        let zen3 = CacheSizes {
            l1: 32 << 10,
            l2: 512 << 10,
            l3: 32 << 20,
        };
        // AVX2's 6x16 tile: MC 126, so a prefill's 128 rows are past it.
        let bl = Blocking::new(6, 16, zen3, Zen);
        assert_eq!((bl.mc, bl.kc_one_block), (126, 336));
        let mut c = [0.0f32];
        let c = c.as_mut_ptr();
        let task = |m, n, k| GemmTask::for_test((m, n, k), (&[], k), (&[], n), c);
        let one = |t: &GemmTask, core| one_block(6, t, bl, (zen3, core));
        // B from memory (64 MiB): up to MC + MR rows on Zen, MC elsewhere.
        for m in [126, 127, 132] {
            assert!(one(&task(m, 4096, 4096), Zen), "{m}");
        }
        assert!(!one(&task(133, 4096, 4096), Zen));
        assert!(!one(&task(128, 4096, 4096), Other));
        assert!(one(&task(126, 4096, 4096), Other));
        // B within L3 (8 MiB): MC. Given transposed (W for x·Wᵀ, 4096 rows of 4096
        // floats), as row-major; 1024 rows of it (16 MiB) are within L3.
        assert!(!one(&task(128, 1024, 2048), Zen));
        let transposed = |n| GemmTask {
            tb: true,
            ldb: 4096,
            ..task(128, n, 4096)
        };
        assert!(one(&transposed(4096), Zen));
        assert!(!one(&transposed(1024), Zen));
        // Packed by its first tiles, the block keeps the one-block depth; the pass
        // (elsewhere, under too few A panels to spread the asks) halves it.
        let t = task(32, 4096, 4096);
        assert_eq!(one_block_b(&t, bl, (zen3, Zen)), (336, false));
        assert_eq!(one_block_b(&t, bl, (zen3, Other)), (168, false));
        assert_eq!(
            one_block_b(&task(48, 4096, 4096), bl, (zen3, Other)),
            (336, false)
        );
    }

    #[test]
    fn a_thin_product_of_one_or_two_b_panels_runs_deeper_blocks() {
        use super::super::blocking::CoreFamily;
        let intel = intel_vm();
        let bl = Blocking::new(8, 32, intel, CoreFamily::Other);
        assert_eq!(bl.kc_thin_b, 1024);
        // One panel (up to 32 columns, an empty B included), two, then three and four.
        let kc: Vec<usize> = [0, 1, 32, 33, 64, 65, 96, 128, 129]
            .map(|n| thin_kc(bl, n, intel.l2))
            .to_vec();
        assert_eq!(kc, [4096, 4096, 4096, 2048, 2048, 1024, 1024, 1024, 1024]);
        // B's panels stay within half of L2 at every width, also where the L1 rule or
        // the `kc` floor, not L2, set `kc_thin_b` (a 32 KiB L1 with a 256 KiB L2).
        let small = CacheSizes {
            l1: 32 << 10,
            l2: 256 << 10,
            l3: 8 << 20,
        };
        for c in [intel, small] {
            let bl = Blocking::new(8, 32, c, CoreFamily::Other);
            for n in 1..=128usize {
                let (kc, panels) = (thin_kc(bl, n, c.l2), n.div_ceil(bl.nr));
                assert!(kc >= bl.kc_thin_b, "{n}");
                assert!(
                    kc == bl.kc_thin_b || kc * panels * bl.nr * 4 <= c.l2 / 2,
                    "{n}"
                );
            }
        }
        // There the `kc` floor sets `kc_thin_b` (512, where L2 alone would give 256):
        // one panel runs 1024, B's 128 KiB, not four times 512, all of L2.
        let bl = Blocking::new(8, 32, small, CoreFamily::Other);
        assert_eq!((bl.kc_thin_b, thin_kc(bl, 20, small.l2)), (512, 1024));
    }

    #[test]
    fn panels_packed_by_their_first_tiles_share_one_slot_only_where_a_is_one_block() {
        let stride = 256 * 32 + 16;
        // Seven panels packed by their first tiles, the ragged eighth by the pass.
        let at = |jr, one_block| packed_panel_at(jr, (0, 7, one_block), stride);
        assert!((0..7).all(|jr| at(jr, true) == 0));
        assert_eq!(at(7, true), 7 * stride);
        // Several A blocks read every packed panel again: a slot each.
        let own: Vec<usize> = (0..8).map(|jr| at(jr, false)).collect();
        assert_eq!(own, (0..8).map(|jr| jr * stride).collect::<Vec<_>>());
        // Panels read in place take no slot; the pass's start at the first.
        assert_eq!(packed_panel_at(5, (5, 5, true), stride), 0);
        assert_eq!(packed_panel_at(6, (5, 5, true), stride), stride);
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
