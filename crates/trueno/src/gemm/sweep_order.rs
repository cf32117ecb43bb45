//! Which order a block's sweep (`sweep.rs`) takes: B's panels outside A's, each B panel
//! kept in L1 while the block's A panels pass it (the default), or A's outside B's
//! (`sweep_a_outer`), each A panel kept in L1 while B's panels stream past it and C
//! written a band of MR rows at a time. Each rule carries the measurements that set it.

use super::blocking::{CacheSizes, CoreFamily};
use super::task::CPtr;

/// Whether a block of an A past one block, whose B the pass packed (`b_block_bytes` of
/// it), sweeps A's panels outside B's (`sweep_a_outer`: each A panel stays in L1 while
/// the block's B panels stream from L2) rather than inside. Where C's rows lie a
/// multiple of 4 KiB apart, a tile's MR rows share two of L1's 64 sets, where the B
/// panel that the B-outer sweep keeps in L1 for every A panel holds 8 of the 12 ways and
/// the A panel 2: the C tile's 16 lines cannot all stay, and each tile evicts the same
/// B lines the next re-reads. A-outer, the B panel changes every tile anyway. Only where
/// the B block is within half of L2 (its panels then stream from there), and not on Zen
/// (a 512-deep B panel comes from L2 there already; not measured).
///
/// Emerald Rapids VM (session 77), one thread, `gemm-probe` alternating the two sweeps
/// call by call: 1024^3 +2.5-2.8%, 640x1024x1024 +1.2%, 1024x1024x2048 +1.4%; where C's
/// rows are off that grid the B-outer sweep stays (1024x1040x1024 -0.7% A-outer,
/// 1024x512x1024, rows 2 KiB apart, even); past half of L2, 2048^3's 2 MiB B block
/// -21-25% and 1536^3's 1.5 MiB -7%. Two threads at 1024^3 (each a band of 512 columns)
/// even. C written in place at 1024 floats a row against 1040 had cost 1024^3 1.7-3.9%.
pub(super) fn sweeps_a_outer(c: CPtr, b_block_bytes: usize, l2: usize, core: CoreFamily) -> bool {
    core != CoreFamily::Zen && rows_alias(c) && b_block_bytes <= l2 / 2
}

/// Whether C's rows lie a multiple of 4 KiB apart (a 1024- or 4096-wide C), so that the
/// same column of successive rows falls in one set of L1.
pub(super) fn rows_alias(c: CPtr) -> bool {
    !c.trans && (c.stride * 4).is_multiple_of(4096)
}

/// Whether a product at most `SHALLOW_A_OUTER_MAX_K` deep (one KC block on Zen 4) whose
/// C is past two L2 sweeps A's panels outside B's (on a Zen core; elsewhere where B's
/// panels come from L2, below), one block of A or several, B packed by the pass before
/// the sweep or, for one block of A over a row-major B, by the first A panel's tiles
/// (`shallow_first_a_panel_packs_b`); never read in place nor packed by its panels'
/// first tiles in the B-outer way (decided before `fuse_b` and the in-place rules).
/// B-outer, each B panel's tiles walk down C a pair of lines a row, rows a C row apart:
/// C's lines come from L3 (or memory) in an order no hardware prefetcher follows, and
/// with few k steps a tile its stores wait on them. A-outer, a tile's MR rows each run
/// on along C, streams the prefetchers follow, and B's packed panels, a stream too, come
/// from L2 or L3 for every A panel: so only where the packed B stays within a quarter of
/// L3 beside C, and under four A panels or more.
///
/// Zen 4 VM (1 MiB L2), one thread, `gemm-probe` alternating the two sweeps call by
/// call, best of eight rounds (trueno's GFLOP/s): 1024x4096x128 83.8 -> 110.4,
/// 1024x4096x64 87.1 -> 107.1, 2048x4096x64 83.7 -> 105.7, 2048x2048x64 86.0 -> 105.6,
/// 512x4096x128 88.9 -> 109.0, 384x4096x128 90.1 -> 108.4, 2048x2048x128 97.2 -> 107.1,
/// 2048x4096x256 99.0 -> 108.9, 1024x2048x64 97.7 -> 108.5; with 32 MiB read between
/// calls 512x4096x64 81.8 -> 101.2, 300x3000x100 77.5 -> 100.3. A C of two to four L2
/// gained 0-5% (256x4096x16 to x256, 1024x1024x64), 256x11008x256 moved within 4%.
/// Against faer's own layout (`gemm_vs_faer`, two rounds): 1024x4096x64 0.70-0.78x ->
/// 1.04-1.05x, 1024x4096x128 0.78-0.87x -> 1.02-1.03x, 2048x2048x64 0.89-0.91x ->
/// 1.03-1.04x (`x·Wᵀ` 0.82-0.83x -> 1.03-1.04x: attention's scores at head size 64),
/// 512x4096x64 0.93-0.95x -> 1.10-1.11x; two threads 1024x4096x64 0.79-0.89x ->
/// 1.09-1.10x. 384-512 deep it gained less (512x4096x512 +5-7%, 1024x4096x384 +5-6%,
/// 2048x2048x512 +3-5%, 256x4096x512 +2%, 512x1536x384 even); past one KC block it was
/// not tried. Within two L2 B-outer keeps its lead (128x4096x64 and 512x1024x64 even,
/// 64x4096x64 -5%, 16x4096x128 -23%). Over a B past a quarter of L3, which the A panels
/// each read again from memory, A-outer lost: 32x32000x128 (16 MiB) -38-45%, 64x11008x256
/// -5-18%, 64x32000x256 -5%, 256x8192x512 -13%, and 256x11008x256 moved within 4%; within
/// it, 128x32000x64 +45-68%, 128x16384x128 +18-26%, 48x32000x64 +29-30%. Under three A
/// panels (24x32000x64) it lost 6-9%.
///
/// Where the update reads C (beta not 0), its tiles are not asked for ahead
/// (`Block::prefetch_c`): the prefetchers follow its rows here. Same VM, one thread, the
/// A-outer sweep with and without the asks, best of eight rounds, beta 1: 512x4096x16
/// 54.6 -> 69.5 GFLOP/s, 256x4096x64 89.6 -> 96.0, 1024x4096x64 88.7 -> 93.6,
/// 2048x2048x64 87.9 -> 93.4, 1024x4096x128 +2%; beta -1.5 alike, and with 32 MiB read
/// between calls +2-16% (300x3000x100 -4%); two threads +1-27%.
///
/// On other cores only where B's panels come back to every A panel from L2: a packed B
/// within half of L2, or one A block's row-major B that its first A panel packs in blocks
/// within half of L2 (`shallow_first_a_panel_packs_b`). A Zen core's L3 feeds one core
/// the packed B fast enough; a Xeon's does not. The Xeon of an H100 device host (2 MiB L2,
/// 48 KiB L1d, 300 MiB L3, AVX-512 8x32, KC 256, MC 512, so up to 131072 elements of A
/// are one block; a shared host), one thread, `gemm-probe` alternating the two sweeps call
/// by call, best of eight rounds (trueno's GFLOP/s): one A block over a row-major B,
/// 128x16384x128 106.6 -> 137.3, 256x8192x128 97.4 -> 125.8, 128x32000x64 71.0 -> 82.4,
/// 1024x4096x64 144.6 -> 152.7, 2048x2048x64 91.7 -> 98.7, 48x32000x64 119.5 -> 120.7
/// (median +16%), 384x4096x128 -5% (median -11%) and 32x32000x64 -13% (median -1%), the
/// rest within 4%; with 32 MiB read between calls +20-100% (512x4096x128 82.0 -> 142.9,
/// 128x32000x64 57.4 -> 114.9). Over a B past L2 packed by the pass, several A blocks
/// lost: 2048x4096x256 (4 MiB) 143.3 -> 96.0, 1024x4096x384 145.6 -> 89.0; a transposed
/// W past L2 even, within half of L2 mixed (`x·Wᵀ` 2048x2048x64 -12%, median +4%).
/// Against faer's own layout (`gemm_vs_faer`, two rounds, a drifting host): 1024x4096x64
/// 0.74-0.84x -> 0.89-1.01x, 2048x2048x64 0.77-0.80x -> 0.95-0.99x, 128x16384x128
/// 0.82-0.92x -> 0.97-1.07x; two threads 1024x4096x64 0.97x -> 1.37x, 2048x2048x64 1.13x
/// -> 1.28x.
///
/// Not for a C written through its transpose (its tiles are not rows of lines).
pub(super) fn shallow_sweeps_a_outer(
    c: CPtr,
    (k, a_panels, one_block, tb): (usize, usize, bool, bool),
    (c_bytes, b_bytes): (usize, usize),
    caches: CacheSizes,
    core: CoreFamily,
) -> bool {
    let shallow = k <= SHALLOW_A_OUTER_MAX_K && a_panels >= SHALLOW_A_OUTER_MIN_A_PANELS;
    let caches_fit = c_bytes > 2 * caches.l2 && b_bytes <= caches.l3 / 4;
    let b_from_l2 = b_bytes <= caches.l2 / 2 || shallow_first_a_panel_packs_b(one_block, tb);
    let core_fits = core == CoreFamily::Zen || b_from_l2;
    !c.trans && shallow && caches_fit && core_fits
}

/// Whether a shallow A-outer sweep (`shallow_sweeps_a_outer`) packs B's panels by the
/// tiles of its first A panel (`sweep::first_a_panel_packs_b`), a block of B's columns
/// within half of L2 at a time (`cols_within_half_l2`), rather than by a pass over the
/// whole B before the sweep: for one block of A (`one_block`) over a row-major B. The
/// pass had written a packed copy of all of B (8 MiB at 48x32000x64) that went out to
/// L3 or memory and came back for every A panel; packed where it is first read, into
/// a block that L2 keeps, B is read once and its copy stays in L2.
///
/// Zen 4 VM (1 MiB L2), one thread, `gemm-probe` alternating the two call by call,
/// best and median of eight rounds (trueno's GFLOP/s, best): 48x32000x64 88.6 -> 94.4
/// (+7%), 32x32000x64 81.1 -> 92.2 (+14%), 64x11008x128 95.1 -> 102.2 (+7-8%),
/// 128x16384x128 100.4 -> 104.2 (+4-7%), 256x4096x256 +2-3%, 256x8192x128 +1.5%,
/// 128x32000x64 even; with 32 MiB read between calls 48x32000x64 66.5 -> 87.4 (+31%),
/// 32x32000x64 56.2 -> 79.3 (+41%), 64x11008x128 73.9 -> 94.6 (+28%), 128x16384x128
/// 88.0 -> 103.4 (+17%), 128x32000x64 87.0 -> 98.0 (+13%); two threads, best and median
/// ratio, 0.98-1.13x and 1.00-1.10x. Against faer's own layout (`gemm_vs_faer`, two rounds):
/// 128x16384x128 0.91-0.98x -> 1.05-1.06x, 128x32000x64 0.94-0.96x -> 1.06x,
/// 64x11008x128 1.00-1.01x -> 1.08-1.09x, 32x32000x64 0.73-0.74x -> 0.80-0.82x.
///
/// Tried. The whole B packed by the first A panel's tiles: +2-4% only, its row of tiles
/// (740 µs at 48x32000x64) as slow as the pass (460 µs) and a row over the packed copy
/// (292 µs) together. Blocks within a quarter of L2: even; within all of it: -1%. A pass
/// into blocks within half of L2: 48x32000x64 -7%, the pass reading B's rows in pieces.
/// Several A blocks, which each block of B's columns packs again (1024x4096x128): -5%
/// in blocks, -1-3% over the whole B (300x3000x100 -3%). A transposed B, whose panels
/// are packed just before their first tiles: 48x32000x64 -3-7%, 128x16384x128 +2%.
/// The next panel's rows asked for every other k step: -2-3%; not at all: -8-20%; two
/// panels ahead: even.
pub(super) fn shallow_first_a_panel_packs_b(one_block: bool, tb: bool) -> bool {
    one_block && !tb
}

/// Columns of B, whole `nr`-wide panels (one at least), of which a `kc`-deep block packed
/// fits half of `l2` (`shallow_first_a_panel_packs_b`).
pub(super) fn cols_within_half_l2(kc: usize, nr: usize, l2: usize) -> usize {
    let nr = nr.max(1);
    (l2 / 2 / (kc.max(1) * 4) / nr * nr).max(nr)
}

/// See [`shallow_sweeps_a_outer`].
const SHALLOW_A_OUTER_MAX_K: usize = 512;

/// See [`shallow_sweeps_a_outer`].
const SHALLOW_A_OUTER_MIN_A_PANELS: usize = 4;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_outer_sweeps_only_c_rows_on_the_4_kib_grid_under_a_b_block_within_half_of_l2() {
        let (l2, intel) = (2 << 20, CoreFamily::Other);
        let c = |stride: usize, trans: bool| CPtr {
            ptr: std::ptr::null_mut(),
            stride,
            trans,
        };
        // 1024^3 at KC 256: rows 4 KiB apart, a 1 MiB B block (half of L2); rows 8 KiB
        // apart alike.
        let block = 256 * 1024 * 4;
        assert!(sweeps_a_outer(c(1024, false), block, l2, intel));
        assert!(sweeps_a_outer(c(2048, false), block, l2, intel));
        // Rows off the 4 KiB grid (1040 floats) or on a 2 KiB one (512): B outside.
        assert!(!sweeps_a_outer(c(1040, false), block, l2, intel));
        assert!(!sweeps_a_outer(c(512, false), block, l2, intel));
        // A block past half of L2 (2048^3's 2 MiB), a C written through its transpose,
        // a Zen core: B outside.
        assert!(!sweeps_a_outer(c(2048, false), 2 * block, l2, intel));
        assert!(!sweeps_a_outer(c(1024, true), block, l2, intel));
        assert!(!sweeps_a_outer(c(1024, false), block, l2, CoreFamily::Zen));
    }

    #[test]
    fn a_zen_core_sweeps_a_outer_at_most_512_deep_over_a_c_past_two_l2_and_a_b_within_a_quarter_of_l3()
     {
        let (zen4, zen) = (crate::gemm::in_place::tests::zen4(), CoreFamily::Zen);
        let c = |trans: bool| CPtr {
            ptr: std::ptr::null_mut(),
            stride: 4096,
            trans,
        };
        // (k, A panels of 8 rows, one A block, B transposed), (C, packed B) of an m x n x k
        // product over a row-major B, A one block up to 256 rows.
        let shape = |m: usize, n: usize, k: usize| {
            ((k, m.div_ceil(8), m <= 256, false), (m * n * 4, k * n * 4))
        };
        let takes =
            |(k_panels, bytes), trans| shallow_sweeps_a_outer(c(trans), k_panels, bytes, zen4, zen);
        // 512x4096x64 (an 8 MiB C), 512x4096x512 (the deepest), 128x32000x64 (a 7.8 MiB B:
        // within a quarter of L3), 32 rows (four panels), a C 4 bytes past two L2.
        for (m, n, k) in [
            (512, 4096, 64),
            (512, 4096, 512),
            (128, 32000, 64),
            (32, 32000, 64),
        ] {
            assert!(takes(shape(m, n, k), false), "{m}x{n}x{k}");
        }
        assert!(takes(
            ((16, 64, false, false), (2 * zen4.l2 + 4, 1 << 20)),
            false
        ));
        // Deeper, a C within two L2 (128x4096: 2 MiB), a B past a quarter of L3
        // (32x32000x128: 16 MiB), three A panels, C written through its transpose: B outside.
        for (m, n, k) in [
            (256, 4096, 513),
            (128, 4096, 64),
            (32, 32000, 128),
            (24, 32000, 64),
        ] {
            assert!(!takes(shape(m, n, k), false), "{m}x{n}x{k}");
        }
        assert!(!takes(shape(512, 4096, 64), true));
    }

    #[test]
    fn another_core_sweeps_a_shallow_product_a_outer_only_where_b_comes_back_from_l2() {
        // A Xeon's 2 MiB L2 and 300 MiB L3.
        let (xeon, other) = (
            crate::gemm::in_place::tests::rapids(300 << 20),
            CoreFamily::Other,
        );
        let c = CPtr {
            ptr: std::ptr::null_mut(),
            stride: 4096,
            trans: false,
        };
        let takes = |(m, n, k): (usize, usize, usize), one_block: bool, tb: bool| {
            let k_panels = (k, m.div_ceil(8), one_block, tb);
            shallow_sweeps_a_outer(c, k_panels, (m * n * 4, k * n * 4), xeon, other)
        };
        // A packed B within half of L2 (1 MiB at 1024x4096x64, 512 KiB at 2048x2048x64),
        // several A blocks or one, either layout of B.
        for tb in [false, true] {
            assert!(takes((1024, 4096, 64), false, tb));
            assert!(takes((2048, 2048, 64), false, tb));
        }
        // Past it, one A block over a row-major B (its first A panel packs B): 8 MiB at
        // 128x16384x128, 7.8 MiB at 48x32000x64.
        assert!(takes((128, 16384, 128), true, false));
        assert!(takes((48, 32000, 64), true, false));
        // Past it and packed by the pass: several A blocks (2048x4096x256's 4 MiB,
        // 1024x4096x128's 2 MiB, just past half of L2), a transposed B: B outside.
        assert!(!takes((2048, 4096, 256), false, false));
        assert!(!takes((1024, 4096, 128), false, false));
        assert!(!takes((128, 16384, 128), true, true));
        // The bars every core shares: a C within two L2 (256x4096x64: 4 MiB), past 512
        // deep, three A panels.
        assert!(!takes((256, 4096, 64), false, false));
        assert!(!takes((2048, 1024, 520), true, false));
        assert!(!takes((24, 32000, 64), true, false));
        // The same product over a B past half of L2 on a Zen core takes the sweep.
        assert!(shallow_sweeps_a_outer(
            c,
            (256, 256, false, false),
            (2048 * 4096 * 4, 256 * 4096 * 4),
            xeon,
            CoreFamily::Zen
        ));
    }

    #[test]
    fn one_shallow_a_block_over_a_row_major_b_packs_b_by_its_first_a_panel_in_blocks_within_half_of_l2()
     {
        // One block of A over a row-major B: its first A panel packs B. Several blocks
        // (1024x4096x128 lost) and a transposed B (48x32000x64 lost): the pass.
        assert!(shallow_first_a_panel_packs_b(true, false));
        assert!(!shallow_first_a_panel_packs_b(false, false));
        assert!(!shallow_first_a_panel_packs_b(true, true));
        // Zen 4's 1 MiB L2, 32-float panels: 2048 columns 64 deep (512 KiB), 1024 at 128,
        // 2176 at 60 (510 KiB; 2208 would be 517.5 KiB), one panel at 4096 (512 KiB);
        // one panel at least, even past half of L2.
        let l2 = 1 << 20;
        assert_eq!(cols_within_half_l2(64, 32, l2), 2048);
        assert_eq!(cols_within_half_l2(128, 32, l2), 1024);
        assert_eq!(cols_within_half_l2(60, 32, l2), 2176);
        assert_eq!(cols_within_half_l2(4096, 32, l2), 32);
        assert_eq!(cols_within_half_l2(512, 32, 64 << 10), 32);
        assert_eq!(cols_within_half_l2(0, 32, l2), l2 / 2 / 4 / 32 * 32);
    }
}
