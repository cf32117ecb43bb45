//! Which B panels the micro-kernel packs as it first reads them (its B loads stored on
//! to the packed panel) instead of a pass of their own packing them first: a row-major B
//! within L2 or eight L2 (`fuse_b`), a transposed one just before each panel's first
//! tile (`fuse_transposed_b`), a Zen core's blocks within L2 (`fuse_b_block`), and a B
//! well past L2, a layer's weights (`fills_b_past_l2`). Each rule carries the
//! measurements that set it.

use super::blocking::{CacheSizes, CoreFamily};

/// Whether B's whole panels are packed by the first micro-kernel call that reads them
/// (its B loads stored on to the packed panel, `micro_tile`'s `pack`) instead of in a
/// pass of their own: the copy then overlaps that call's FMAs. Only for a row-major B
/// within L2 (or eight L2, below), whose strided rows the call reads from cache; from
/// memory (a layer's weights) each k step would wait on two new lines, where the pass
/// reads whole rows in page streams. Zen 5 VM, one thread, against faer, alternated
/// twice with the pass: 192^3 0.92-0.93x -> 0.97-0.99x, 256^3 0.94-0.95x -> 0.98-0.99x,
/// 384^3-512^3 within 1%; for B from memory, 32x4096x4096 0.91x -> 0.73-0.74x.
///
/// Where A is one block (`one_block`: each B panel then serves only that block's few A
/// panels, so a pass of its own is a large share), B up to eight times L2, read from L3:
/// only where the whole B (`whole_k` rows of `ldb` floats: a thread's range of k or of
/// columns is judged by it, as `b_in_place_from_memory` does) is within half of L3, and
/// so not from memory. Intel VM (session 58), one thread, against faer, the rule and
/// the L2 bar alternated twice: 128x1056x512 0.88-0.89x -> 0.93x, 128x4096x256
/// 0.94-0.95x -> 0.96-0.98x, 128x2048x512 0.88x -> 0.90x, 32x4096x512 0.71-0.72x ->
/// 0.74x, 64x4096x256 0.84x -> 0.86x, 256x4096x512 within 1% (two threads: all within
/// the noise). From 16 MiB it lost then: 128x8192x512 0.86-0.87x -> 0.77x,
/// 128x16384x256 0.94-0.96x -> 0.84-0.85x, 128x8192x1024 0.88-0.89x -> 0.66-0.68x.
/// Since those panels share one slot (`packed_panel_at`, session 59) instead of
/// streaming a packed copy of B through L2, up to eight L2 wins: same VM, one thread,
/// four L2 and eight alternated twice, 32x8192x512 0.68-0.70x -> 0.92-0.93x,
/// 64x8192x512 0.75-0.76x -> 0.85-0.86x, 128x8192x512 0.87-0.88x -> 0.91-0.92x,
/// 128x6144x512 0.91x -> 0.95-0.97x, 256x8192x512 0.92x -> 0.96x, 64x16384x256
/// 0.82-0.83x -> 0.87x, 128x16384x256 0.93x -> 0.95-0.96x; 128x12288x256 unchanged; two
/// threads (whose halves were fused already) within the noise. Past it, still a loss
/// with the one slot: 128x11008x1024 (45 MB) 0.83-0.85x -> 0.79-0.81x, 128x4096x4096
/// 0.87-0.90x -> 0.75-0.76x; 128x8192x1024 (32 MiB) even.
///
/// And, on a Zen core, a one-block product's B from memory, row-major or transposed
/// (`fills_b_past_l2`).
///
/// And, on a Zen core, a one-block product's row-major B of rows of 16 KiB or more
/// (`ZEN_FUSED_ROW_BYTES`, 4096 columns; past L3 the rule above takes it anyway, and
/// `b_in_place` and `b_in_place_for_few_rows`, asked first, may read it in place):
/// past eight L2 the pass packed it at half the one-block depth (`one_block_b`), a
/// block of four L2 or more from such rows. Zen 4 VM (1 MiB L2, session 82), the pass
/// and this alternated call by call in one process, eight rounds, best of each
/// (trueno's GFLOP/s, warm / with 32 MiB read before each call), one thread:
/// 32x4096x1024 77.6 -> 86.2 / 74.9 -> 79.7 (25-32 rows then leave B's in-place
/// reading, `b_in_place_for_few_rows`), 128x4096x1024 94.4 -> 99.0 / 97.0 -> 102.0,
/// 256x4096x1024 96.2 -> 99.6 / 102.1 -> 104.7, 256x6144x1024 86.7 -> 98.2 / 100.3 ->
/// 105.8, 128x8192x1024 94.6 -> 100.1 / 95.3 -> 102.4, 100x5000x1000 74.1 -> 95.3 /
/// 79.6 -> 91.3, 256x11008x640 84.0 -> 96.1 / 80.9 -> 92.6, 128x4096x2048 even; two
/// threads 128x4096x2048 162.8 -> 184.3 / 167.1 -> 185.0, 128x8192x1024 145.4 -> 174.0
/// / 163.6 -> 191.4, the rest even. Against faer (`gemm_vs_faer`, two rounds, one
/// thread): 128x4096x1024 0.93-0.94x -> 0.97-1.00x, 256x4096x1024 0.83-0.92x ->
/// 0.96-0.98x, 128x8192x1024 0.75-0.84x -> 0.91-0.92x; two threads 128x4096x2048
/// 0.81-0.84x -> 0.93-1.00x. Shorter rows lost so, by 1-5% (8 KiB: 128x2048x4096,
/// 64x2048x2048, 128x2048x2048; 4 KiB: 256x1024x4096), 12 KiB rows mixed (-2% to +4%):
/// why the row's length decides was not traced. Zen 3 and Zen 5 not measured.
///
/// And, on a Zen core, a one-block product's transposed B (the W of an `x·Wᵀ` that
/// runs as given: more rows than the swap takes, `run_transposed`) past L2 and deeper
/// than 128 (`ZEN_FUSED_TRANSPOSED_MIN_K`): each panel transposed just before its first
/// tile, as past L3 (`fills_b_past_l2`), where a pass had transposed all of a KC block
/// first. Zen 4 VM (session 82), the pass and this alternated call by call in one
/// process, eight rounds, best of each (trueno's GFLOP/s, warm / with 32 MiB read
/// before each call), one thread: 256x4096x1024 91.8 -> 102.3 / 86.6 -> 98.6,
/// 256x2048x2048 93.3 -> 103.5 / 95.2 -> 105.7, 256x1024x4096 102.8 -> 101.7 / 92.5 ->
/// 104.4, 200x3072x768 86.6 -> 92.4 / 88.3 -> 95.8, 192x2048x1024 97.0 -> 104.1 / 86.7
/// -> 99.9, 256x11008x640 90.9 -> 101.6 / 82.7 -> 92.3, 256x1024x1024 and 256x512x2048
/// +2% to +6%, 256x8192x256 87.8 -> 93.6 / 88.0 -> 95.6, 200x8192x192 even / +4%; two
/// threads +1% to +16% on all of them. Against faer (`BT=1 gemm_vs_faer`, two rounds,
/// one thread): 256x4096x1024 0.88-0.93x -> 0.98-0.99x, 256x6144x1024 0.82-0.93x ->
/// 0.98-1.00x, 200x3072x768 0.88-0.95x -> 1.03-1.06x, 160x4096x2048 0.86-1.04x ->
/// 0.98-0.99x, 256x2048x2048 0.90-0.95x -> 0.95-0.99x. Shallower it was mixed, as on the
/// Emerald Rapids VM within L2 (`fuse_transposed_b`: a C past L2 pushes each panel's run
/// of W out before its first tile): 256x8192x64 0.94x, 0.99x, 0.94x and 1.17x (one and
/// two threads, warm and from memory), 256x4096x128 0.98x, 1.07x, 1.01x and 0.90x;
/// 256x16384x128 +1% to +5%. Zen 3 and Zen 5 not measured.
///
/// Neither Zen rule is asked where a product at most 512 deep over a C past two L2 sweeps
/// A's panels outside B's (`shallow_sweeps_a_outer`, decided first), B then packed by
/// the pass (since session 84, for one A block over a row-major B, by the first A panel's
/// tiles, `shallow_first_a_panel_packs_b`): same VM (session 83), one thread, that rule against these two, best of
/// eight rounds: `x·Wᵀ` 256x8192x256 95.4 -> 102.1 GFLOP/s, 200x8192x192 92.1 -> 100.2,
/// 256x4096x384 102.0 -> 106.1; 512 deep within 1.5% either way (256x4096x512,
/// 128x8192x512, 256x6144x512, `x·Wᵀ` 256x2048x512).
pub(super) fn fuse_b(
    tb: bool,
    (k, n): (usize, usize),
    whole_b_bytes: usize,
    (c, core): (CacheSizes, CoreFamily),
    (one_block, spreads): (bool, bool),
) -> bool {
    let part = k.saturating_mul(n).saturating_mul(4);
    let from_l3 = one_block && part <= 8 * c.l2 && whole_b_bytes <= c.l3 / 2;
    let zen = one_block && core == CoreFamily::Zen;
    let wide_rows = zen && !tb && n.saturating_mul(4) >= ZEN_FUSED_ROW_BYTES;
    let transposed_past_l2 = zen && tb && part > c.l2 && k > ZEN_FUSED_TRANSPOSED_MIN_K;
    let past_l2 = one_block && fills_b_past_l2(tb, whole_b_bytes, (c, core), spreads);
    (!tb && (part <= c.l2 || from_l3)) || wide_rows || transposed_past_l2 || past_l2
}

/// See [`fuse_b`]: the shortest row of a B (the task's columns) that a Zen core's
/// one-block product packs by its first tiles at any size.
const ZEN_FUSED_ROW_BYTES: usize = 16 << 10;

/// See [`fuse_b`]: the depth up to which a Zen core's one-block product keeps the pass
/// for a transposed B past L2 (and within L3).
const ZEN_FUSED_TRANSPOSED_MIN_K: usize = 128;

/// Whether a one-block product packs a transposed B (Wᵀ of an `x·Wᵀ` run as given) panel
/// by panel in the sweep, each panel transposed just before its first tile into one slot
/// that stays in L1, rather than by a pass over all of it first: where B's `k x n` is
/// within L2 and C's `c_bytes` within half of it (all of it on Zen). The pass wrote the
/// whole packed copy to L2 and the sweep read it back; the panel-by-panel form reads each
/// panel's run of W once.
/// Emerald Rapids VM (2 MiB L2, session 72), one thread, against faer, the pass and this
/// alternated twice in one binary (trueno's GFLOP/s): 64x4096x32 135.1-136.6 ->
/// 139.4-140.2, 64x2048x64 144.0-144.9 -> 147.9-148.3, 128x2048x128 150.7-151.5 ->
/// 160.1-160.2, 512x512x256 164.5-165.2 -> 169.3-170.1, 40x4096x48 128.5-129.1 ->
/// 133.3-133.5, 128x4096x32 141.4-143.3 -> 147.2-147.8, 96x4096x64 143.0-143.5 ->
/// 149.3-149.6, 384^3 162.8-162.9 -> 167.5-168.2; 24x4096x16, 200^3, 256^3 and
/// 128x1024x512 within 1-3% either way. Where C is past L2 it lost: 256x4096x32 (a
/// 4 MiB C) 149.6-149.8 -> 130.8-133.8, each panel's run of W read from L3 on a fresh
/// page (no prefetcher carries it) once C's lines have pushed W out of L2; and on two
/// threads (each a 2 MiB C) 288 -> 276-284. So a C of half of L2 at most, which leaves
/// out two winners above (128x4096x32's and 96x4096x64's 2 and 1.5 MiB). Zen 4 VM (1 MiB
/// L2, 2026-12-06), one thread, `gemm-probe` alternating a C within half of L2 and within
/// all of it call by call, ten rounds: 64x4096x32 (a 1 MiB C) +1.1%, 128x2048x64 +1.4%,
/// 40x4096x48 +2.3%, 96x4096x64 and 128x4096x32 (C 1.5 and 2 MiB, not taken) even; two
/// threads (128x4096x32, 128x2048x64, 64x4096x32) even. So a C within L2 on Zen; not
/// elsewhere, where ER's two threads lost with a C of all of L2 each, above (its one
/// thread's two winners left out stay so: not measured since). Session 71's
/// form of this, before `sweep::whole_tiles`, lost 3-6% at 200^3, 384^3, 128x1024x512
/// and 64x1024x32.
pub(super) fn fuse_transposed_b(
    tb: bool,
    (k, n): (usize, usize),
    c_bytes: usize,
    (l2, core): (usize, CoreFamily),
    one_block: bool,
) -> bool {
    let b_bytes = k.saturating_mul(n).saturating_mul(4);
    let c_max = match core {
        CoreFamily::Zen => l2,
        CoreFamily::Other => l2 / 2,
    };
    tb && one_block && b_bytes <= l2 && c_bytes <= c_max
}

/// Whether a product of several A blocks (not `one_block`) packs B by the first tiles of
/// each KC x NC block (`fuse_b`'s copy) because that block fits L2 though all of B does
/// not: a deep product of few columns, whose blocks a pass packed from L3 at half the
/// copy's speed. On a Zen core. Zen 3 VM (512 KiB L2, KC 512: up to 256 columns), one
/// thread, against faer, the pass and this alternated twice in one binary, then twice
/// more as builds: 128x128x2048 84.8-85.3 -> 89.4-89.9 GFLOP/s (0.93-0.94x ->
/// 0.98-0.99x), 128x128x4096 81.4-84.6 -> 86.4-88.5, 256x256x2048 86.7-89.8 ->
/// 91.6-93.0, 256x256x1024 92.2-92.8 -> 94.8-94.9, 200x200x4096 81.0-84.2 -> 84.2-85.6,
/// 128x256x2048 86.0-87.2 -> 90.1-91.0, 192x128x8192 81.2-82.2 -> 84.7-86.1;
/// 512x128x2048 (84.0-89.6 against 85.9-88.8) and 300x200x2048 even; on one thread
/// 256^3 and 512^3 take neither (all of B fits L2, or no block does), and two threads'
/// 256-column bands of 512^3 fit L2 whole (`fuse_b`). Two threads, one round:
/// 128x128x2048 0.86x -> 1.02x faer, 128x128x4096 0.99x -> 1.04x, 256x256x2048 0.95x ->
/// 1.00x; three rounds, 512x512x1024 (bands of 256 columns, 1024 deep) 179.3-185.3 ->
/// 179.1-183.6 GFLOP/s, the noise. `gemm-probe` 128x128x2048: pack B 62 µs and kernel
/// 681 -> kernel 715, 785 -> 757 µs in all. Not measured on other cores (an Intel core's
/// 2 MiB L2 would take 1024^3's blocks).
pub(super) fn fuse_b_block(
    tb: bool,
    (kc, nc): (usize, usize),
    one_block: bool,
    (c, core): (CacheSizes, CoreFamily),
) -> bool {
    let block_in_l2 = kc.saturating_mul(nc).saturating_mul(4) <= c.l2;
    !tb && !one_block && matches!(core, CoreFamily::Zen) && block_in_l2
}

/// Whether a B of `whole_b_bytes` well past L2 (a layer's weights: past L3 on Zen, past
/// eight L2 elsewhere, see below) is packed in the sweep where A is one block, on this
/// core, rather than by a pass of its own. A row-major B's
/// panels are packed by their first tiles: the tiles of each panel then ask L2 for the next panel's rows
/// (`Block::next_fill_to_l2`) instead of for their C tiles, so B's reads from memory
/// overlap the FMAs. The pass reads whole rows as streams, but on its own: on the Zen 3
/// VM (AVX2, 6x16) it read 32x4096x4096's 64 MiB at 10-12 GB/s, a third of the
/// product's time. Zen only: Zen 3 VM (session 66), one thread, against faer, two
/// rounds alternated with the pass (with one-block A up to MC + MR rows, `kernel::
/// one_block`): 16x4096x4096 0.75-0.79x -> 1.09-1.20x, 32x4096x4096 0.86-0.88x ->
/// 1.10-1.12x, 64x4096x4096 0.87x -> 1.02-1.03x, 128x4096x4096 0.92-0.94x ->
/// 1.04-1.07x, 128x11008x4096 0.88-0.96x -> 1.05x; 8x4096x4096 0.77-0.92x -> 1.46-1.51x
/// (C's tiles still asked for: 32-64 rows 0.80-0.88x, the next panel's rows went
/// unasked). Two threads, two rounds: 8 rows 0.85-0.86x -> 1.21-1.30x, 32 rows
/// 0.71-0.86x -> 1.00-1.10x, 64 rows 0.89-0.91x -> 0.92-0.95x, 128x4096x4096
/// 0.77-0.90x -> 0.98-1.00x, 128x11008x4096 0.84-1.05x -> 0.94-0.97x. On an Intel Xeon
/// (an H200 host: 48 KiB L1, 2 MiB L2, 300 MiB L3, which holds these B, so the form
/// was forced there) it lost, one thread, two rounds: 8x4096x4096 1.26-1.30x ->
/// 0.76-0.88x, 32x4096x4096 0.89-0.95x -> 0.83-0.84x, 128x4096x4096 0.91-0.92x ->
/// 0.80-0.88x, as the Zen 5 VM had
/// lost 32x4096x4096 to first-tile packing with C's tiles asked for (0.91x -> 0.73x,
/// above); Zen 4 reads such a B in place (`b_in_place`), which comes first. Zen 5 was
/// not measured with this form.
///
/// A transposed B past L3 (`x·Wᵀ` with more rows than the swap takes, `run_transposed`)
/// likewise: each panel is packed by 8 x 8 transposes just before its first tile, the
/// tiles asking L2 for the next panel's NR rows, a share in a burst before each, their C
/// tiles still asked for. Zen 3 VM, one thread, against faer, the pass and this
/// alternated twice (`BT=1`): 96x4096x4096 0.80-0.86x -> 1.00-1.01x, 128x4096x4096
/// 0.77-0.83x -> 1.04-1.05x, 128x11008x4096 0.83-0.90x -> 1.04-1.08x, 128x4096x11008
/// 0.89-0.90x -> 0.91-1.15x. The next panel asked for in the tiles' k steps instead of
/// C's lines ran 0.69-1.00x; in bursts without C's lines 0.88-1.05x.
///
/// And on other cores (Intel) a row-major B past eight L2 under an A of enough panels to
/// spread the next panel's asks (`spreads`, `spreads_next_panel`), the tiles asking L2
/// for them beside their C tiles, each share over the whole tile
/// (`Block::next_beside_c`). Fewer panels keep the pass where B is past half of L3: on
/// the H100 host's Xeon (Sapphire Rapids, session 75: 105 MiB of L3) the first tiles
/// then waited on B (16x4096x4096 1.13-1.15x faer -> 0.68-0.71x, 32 rows 1.07-1.08x ->
/// 0.84-0.88x, 64 rows 0.95-0.96x -> 0.93-0.97x, one thread), though they won on the
/// Emerald Rapids VM (260 MiB), where the same 64 MiB B sits in L3; 128 rows won on
/// both (BENCHMARKS.md, session 75). Within half of L3 any row count takes them (session
/// 76): Emerald Rapids VM, against the pass, alternated call by call in one process,
/// two rounds, one thread (trueno's GFLOP/s): 16x4096x4096 69.6-74.9 -> 74.3-88.0,
/// 32x4096x4096 99.0-101.5 -> 113.9-119.8, 48x4096x4096 114.3 -> 130.0, 64x4096x4096
/// 121.9-122.9 -> 137.6-141.4, 100x4096x4096 132.9 -> 144.5, 32x8192x2048 100.2 ->
/// 116.2; two threads 16 rows 149.5-157.3 -> 184.3-192.2, 32 rows 201.6-203.2 ->
/// 255.0-257.6, 64 rows 246.7-249.2 -> 286.5-301.4; 8 rows (read in place, `b_in_place_
/// for_few_rows`) even; past half of that L3 (32x11008x4096, 64x4096x11008) the pass
/// stays, within 1%. A transposed B keeps its pass there (not measured).
pub(super) fn fills_b_past_l2(
    tb: bool,
    whole_b_bytes: usize,
    (c, core): (CacheSizes, CoreFamily),
    spreads: bool,
) -> bool {
    match core {
        CoreFamily::Zen => whole_b_bytes > c.l3,
        CoreFamily::Other => {
            let in_l3 = whole_b_bytes <= c.l3 / 2;
            !tb && (spreads || in_l3) && whole_b_bytes > 8 * c.l2
        }
    }
}

/// Whether a one-block A of `m` rows has enough MR-row panels for the tiles of a B panel
/// (a tile each) to ask for all of the next panel's KC x NR floats (KC·NR/16 lines) at
/// most one line every eight k steps: NR / 2 panels (sixteen, 121-128 rows and more, for
/// AVX-512's 8 x 32 tile).
pub(super) fn spreads_next_panel(m: usize, mr: usize, nr: usize) -> bool {
    m.div_ceil(mr.max(1)) * 2 >= nr
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::in_place::tests::{zen3, zen4};

    #[test]
    fn a_transposed_b_is_packed_in_the_sweep_only_within_l2_under_a_c_within_half_of_it() {
        let l2 = 2 << 20;
        let fused_on = |core, (m, n, k): (usize, usize, usize), tb, one_block| {
            fuse_transposed_b(tb, (k, n), m * n * 4, (l2, core), one_block)
        };
        let fused = |mnk, tb, one_block| fused_on(CoreFamily::Other, mnk, tb, one_block);
        // The LoRA row: W 512 KiB, C 1 MiB, half of L2; W of all of L2 (128x2048x128).
        assert!(fused((64, 4096, 32), true, true));
        assert!(fused((128, 2048, 128), true, true));
        assert!(fused((384, 384, 384), true, true));
        // C past half of L2 (128x4096x32: 2 MiB), or B past L2 (64x4096x256: 4 MiB).
        assert!(!fused((128, 4096, 32), true, true));
        assert!(!fused((256, 4096, 32), true, true));
        assert!(!fused((64, 4096, 256), true, true));
        // Not transposed, or A in several blocks.
        assert!(!fused((64, 4096, 32), false, true));
        assert!(!fused((64, 4096, 32), true, false));
        // On Zen, a C of all of L2, and not past it.
        assert!(fused_on(CoreFamily::Zen, (128, 4096, 32), true, true));
        assert!(!fused_on(CoreFamily::Zen, (129, 4096, 32), true, true));
    }

    /// The Zen 3 VM's caches.
    #[test]
    fn b_is_packed_by_its_first_tiles_within_l2_or_eight_l2_where_a_is_one_block() {
        let c = CacheSizes {
            l1: 48 << 10,
            l2: 2 << 20,
            l3: 105 << 20,
        };
        let other = (c, CoreFamily::Other);
        let fuse = |tb, (k, n): (usize, usize), one_block| {
            fuse_b(
                tb,
                (k, n),
                k.saturating_mul(n).saturating_mul(4),
                other,
                (one_block, true),
            )
        };
        // 256^3 (256 KiB), 128x1056x512 (2.1 MiB), 32x4096x512 (8 MiB).
        assert!(fuse(false, (256, 256), false));
        assert!(!fuse(false, (512, 1056), false));
        assert!(fuse(false, (512, 1056), true));
        assert!(fuse(false, (512, 4096), true));
        // 128x8192x512 (16 MiB) is fused; 128x8192x1024 (32 MiB) and a B from memory,
        // past eight L2, are packed by their first tiles too (`fills_b_past_l2`),
        // but not given transposed (its panels are gathered across rows).
        assert!(fuse(false, (512, 8192), true));
        assert!(fuse(false, (1024, 8192), true));
        assert!(fuse(false, (4096, 4096), true));
        assert!(!fuse(true, (4096, 4096), true));
        assert!(!fuse(true, (256, 256), true));
        // A size past the address space saturates (no overflow): past eight L2.
        assert!(fuse(false, (usize::MAX, 2), true));
        assert!(!fuse(true, (usize::MAX, 2), true));
        // A thread's 8 MiB of a 16 MiB B (half its k, or half its columns), past half of
        // an 8 MiB L3: from memory.
        let small_l3 = CacheSizes { l3: 8 << 20, ..c };
        let small_l3 = (small_l3, CoreFamily::Other);
        let mib = |m: usize| m << 20;
        assert!(fuse_b(false, (512, 4096), mib(16), other, (true, true)));
        assert!(!fuse_b(false, (512, 4096), mib(16), small_l3, (true, true)));
        assert!(!fuse_b(
            false,
            (1024, 2048),
            mib(16),
            small_l3,
            (true, true)
        ));
        // Within L2 a range is packed by its first tiles whatever the whole B.
        assert!(fuse_b(
            false,
            (128, 1024),
            mib(4096),
            small_l3,
            (false, true)
        ));
    }

    /// The Zen 4 VM's caches (1 MiB L2), as a Zen core and as another.
    fn zen4_and_other() -> ((CacheSizes, CoreFamily), (CacheSizes, CoreFamily)) {
        let zen4 = zen4();
        ((zen4, CoreFamily::Zen), (zen4, CoreFamily::Other))
    }

    #[test]
    fn a_zen_cores_one_block_packs_rows_of_16_kib_by_their_first_tiles_at_any_size() {
        let (zen, other) = zen4_and_other();
        let fuse = |tb, (k, n): (usize, usize), machine, one_block| {
            fuse_b(tb, (k, n), k * n * 4, machine, (one_block, false))
        };
        // 128x4096x1024 (16 MiB), 128x4096x2048 (32 MiB, all of L3), 128x8192x1024 and
        // a ragged 5000 columns: past eight L2, still packed by their first tiles.
        for (k, n) in [(1024, 4096), (2048, 4096), (1024, 8192), (1000, 5000)] {
            assert!(fuse(false, (k, n), zen, true), "{k}x{n}");
            assert!(!fuse(false, (k, n), zen, false), "{k}x{n}");
        }
        // Rows under 16 KiB keep the pass there (eight L2 is 8 MiB here), up to L3.
        for (k, n) in [
            (4096, 2048),
            (2048, 2048),
            (4096, 1024),
            (2048, 3072),
            (2048, 4095),
        ] {
            assert!(!fuse(false, (k, n), zen, true), "{k}x{n}");
        }
        // Within eight L2 any row length is packed so, as before; another core keeps
        // its own rules (a 32 MiB B past half of L3, no spread asks: the pass).
        assert!(fuse(false, (1024, 2048), zen, true));
        assert!(!fuse(false, (2048, 4096), other, true));
    }

    #[test]
    fn a_zen_cores_one_block_packs_a_transposed_b_past_l2_deeper_than_128_in_the_sweep() {
        let (zen, other) = zen4_and_other();
        let fuse = |(k, n): (usize, usize), machine, one_block| {
            fuse_b(true, (k, n), k * n * 4, machine, (one_block, false))
        };
        // 256x4096x1024 (16 MiB), 256x1024x4096, 200x8192x192 (6 MiB), just past 1 MiB.
        for (k, n) in [(1024, 4096), (4096, 1024), (192, 8192), (129, 2033)] {
            assert!(fuse((k, n), zen, true), "{k}x{n}");
            assert!(!fuse((k, n), zen, false), "{k}x{n}");
            assert!(!fuse((k, n), other, true), "{k}x{n}");
        }
        // 128 deep or shallower, or within L2 (`fuse_transposed_b` decides there): no.
        for (k, n) in [(128, 16384), (64, 8192), (256, 1024), (512, 512)] {
            assert!(!fuse((k, n), zen, true), "{k}x{n}");
        }
    }

    #[test]
    fn a_zen_cores_first_tiles_pack_each_b_block_within_l2_where_a_is_several_blocks() {
        let zen3 = zen3();
        let (zen, other) = ((zen3, CoreFamily::Zen), (zen3, CoreFamily::Other));
        // 128x128x2048 and 256x256x2048 at KC 512: blocks of 256 and 512 KiB.
        assert!(fuse_b_block(false, (512, 128), false, zen));
        assert!(fuse_b_block(false, (512, 256), false, zen));
        // 512 columns (1 MiB blocks), a transposed B, a one-block A, another core: no.
        assert!(!fuse_b_block(false, (512, 512), false, zen));
        assert!(!fuse_b_block(true, (512, 128), false, zen));
        assert!(!fuse_b_block(false, (512, 128), true, zen));
        assert!(!fuse_b_block(false, (512, 128), false, other));
        assert!(!fuse_b_block(false, (usize::MAX, 2), false, zen));
    }

    #[test]
    fn first_tiles_pack_a_b_from_memory_where_a_is_one_block_on_zen_and_row_major_elsewhere() {
        let zen3 = zen3();
        let (zen, other) = ((zen3, CoreFamily::Zen), (zen3, CoreFamily::Other));
        // 32x4096x4096's 64 MiB and 128x11008x4096's 180 MB, past L3, row-major or
        // transposed (a layer's W for x·Wᵀ): on Zen both, elsewhere (past eight L2) the
        // row-major one; only where A is one block.
        for (k, n) in [(4096, 4096), (4096, 11008)] {
            for tb in [false, true] {
                assert!(fuse_b(tb, (k, n), k * n * 4, zen, (true, true)), "{k}x{n}");
                assert_eq!(
                    fuse_b(tb, (k, n), k * n * 4, other, (true, true)),
                    !tb,
                    "{k}x{n}"
                );
                assert!(
                    !fuse_b(tb, (k, n), k * n * 4, zen, (false, true)),
                    "{k}x{n}"
                );
                assert!(
                    !fuse_b(tb, (k, n), k * n * 4, other, (false, true)),
                    "{k}x{n}"
                );
            }
        }
        // Off Zen the bar is eight L2 (4 MiB here), not L3 (a 5 MiB B within L3), and an
        // A of panels enough to spread the asks (120 rows of 8 x 32 tiles are not) or a
        // B within half of L3 (16 MiB here).
        assert!(fills_b_past_l2(false, 5 << 20, other, false));
        assert!(fills_b_past_l2(false, 16 << 20, other, false));
        assert!(!fills_b_past_l2(false, (16 << 20) + 4, other, false));
        assert!(fills_b_past_l2(false, (16 << 20) + 4, other, true));
        assert!(!fills_b_past_l2(false, 4 << 20, other, false));
        assert!(spreads_next_panel(121, 8, 32) && spreads_next_panel(128, 8, 32));
        assert!(!spreads_next_panel(120, 8, 32) && !spreads_next_panel(64, 8, 32));
        assert!(spreads_next_panel(48, 6, 16) && !spreads_next_panel(42, 6, 16));
        assert!(fills_b_past_l2(false, 5 << 20, other, true));
        assert!(!fills_b_past_l2(false, 4 << 20, other, true));
        assert!(!fills_b_past_l2(true, 5 << 20, other, true));
        assert!(!fills_b_past_l2(false, 5 << 20, zen, true));
        // A thread's quarter of k is judged by the whole B; a 16 MiB B, within L3 and
        // past eight L2, keeps the pass, as a transposed B within L3 does.
        assert!(fuse_b(false, (1024, 4096), 64 << 20, zen, (true, true)));
        assert!(!fuse_b(false, (2048, 2048), 16 << 20, zen, (true, true)));
        assert!(!fuse_b(true, (256, 256), 256 << 10, zen, (true, true)));
        assert!(!fills_b_past_l2(false, 16 << 20, zen, true));
    }
}
