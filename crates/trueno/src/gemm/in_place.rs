//! Which operands the packed loops read where they lie instead of packing them: a
//! one-block A (`a_in_place`), B's panels within L1's or L2's reach or streaming from
//! memory (`b_in_place`), and few A panels over a B within L3 (`b_in_place_for_few_rows`);
//! with them a one-block product's depth (`one_block_b`).
//! Which B panels the micro-kernel packs as it reads them is `fused.rs`. Each rule
//! carries the measurements that set it.

use super::blocking::{Blocking, CacheSizes, CoreFamily};
use super::fused::{fuse_b, spreads_next_panel};
use super::task::GemmTask;

/// Whether the micro-kernel reads a one-block A in place instead of packing it: only a
/// row-major A (a transposed one would step a whole row per k), and only when its MR rows
/// spread over L1's sets. Rows 4 KiB apart (lda a multiple of 1024) all land in one set,
/// so eight of them evict the B panel that must stay in L1; rows 1 KiB apart share a set
/// two by two, which still fits. Packing costs a pass over A that only n/NR panels
/// amortise: measured at 64-256 it was 6-10% of the product. Rows more than a page apart
/// are packed all the same: each row of a panel is then a stream in a page of its own,
/// and the block spans a page per row. Packed, 128x4096x11008 ran 1.14-1.16x faster,
/// 64x4096x4000 and 128x1024x3000 1.03-1.26x, 256x2048x1500 0.98-1.00x (Emerald Rapids
/// VM, both alternated in one process, two runs).
#[inline(always)]
pub(super) fn a_in_place(mr: usize, t: &GemmTask) -> bool {
    let row_bytes = t.lda * 4;
    // Distinct 4 KiB-periodic offsets the rows start at (L1: 64 sets x 64-byte lines).
    let phases = 4096 >> row_bytes.trailing_zeros().min(12);
    !t.ta && 2 * phases >= mr && row_bytes <= 4096
}

/// Whether a one-block product reads B's micro-panels in place instead of packing them:
/// only a row-major B (`tb` false, rows `ldb` floats apart) whose KC rows spread over
/// L1's sets (at most four rows per 4 KiB offset, so the panel the kernel re-reads for
/// every A panel stays in L1) and span at most 64 KiB (sixteen pages). That is the small
/// products (64^3: a 16 KiB B), where a packing pass was 9% of the time. Or, where L1
/// cannot keep even a packed KC x NR panel (32 x 256 is all of a 32 KiB L1), one
/// whose KC rows, gaps included, fit in half of L2: the kernel reads the panel from L2
/// packed or not, so the pass buys nothing (Zen 4 VM, 128^3-256^3: 0.95x -> 0.97-0.98x
/// faer). Where L1 keeps the packed panel, reading a strided one in place evicts it (its
/// rows share L1's sets): on the Emerald Rapids VM (48 KiB L1) 256^3-1024^3 ran
/// 0.58-0.85x faer in place against 0.88-1.07x packed.
///
/// And a B from memory (all `k` rows of the whole product past L3: a range of k that
/// `run_split_k` gives a thread is judged by the whole B, which streams from memory even
/// where the range alone would fit): a prefill's projection of 112-256 tokens (fewer
/// below). Packing its
/// KC rows, far apart, ran at a fraction of the memory's rate (rows a page apart all
/// start at one offset in their pages and share L1's sets: on the Zen 3 VM such a pack
/// moved 7-8 GB/s, session 42); in place, each panel comes from memory once, for the
/// first A panel (`Block::next_b_to_l2` asks for the next one ahead). Only rows of whole
/// cache lines (a 32-float panel row is then two lines, not three) that start at four or
/// more offsets within 64 KiB, or of at most 32 KiB (`b_in_place_from_memory`). Zen 4
/// VM, one thread, against faer, the rule off and on in one binary, alternated:
/// 32x4096x4096 0.87x -> 0.89-1.03x, 64x4096x4096 0.73-0.81x -> 0.97-0.98x,
/// 128x4096x11008 0.87-0.94x -> 0.97-0.99x, 32x6144x4096 0.70-0.73x -> 1.02-1.03x,
/// 8x8192x8192 0.80-1.04x -> 1.23-1.24x (two threads: 128x4096x11008 161 -> 180
/// GFLOP/s, 64x4096x4096 128 -> 145; judged by the whole B rather than each thread's
/// range, two threads against faer, alternated twice: 16x4096x4096 0.71-0.76x ->
/// 0.97-1.01x, 32x4096x4096 0.74-0.76x -> 0.98-0.99x, 64x4096x4096 0.78-0.79x -> 0.96x,
/// 128x4096x4096 0.90-0.91x -> 0.98x). Rows off the page grid, two rounds: an LLM's
/// up projection 128x11008x4096 (43 KiB rows) 0.92-0.95x -> 1.01-1.03x (two threads
/// 0.90x -> 1.03x), 32x11008x4096 0.88-0.92x -> 1.02-1.05x (two threads 0.87-0.90x ->
/// 1.07-1.09x), 128x14336x4096 0.91-0.93x -> 0.98x (0.88-0.92x -> 0.99-1.02x),
/// 128x13824x5120 0.92x -> 1.00-1.02x, 128x12288x4096 0.93x -> 0.98x, 128x20480x2048
/// 0.90-0.94x -> 0.96-0.97x, 128x28672x1024 0.90-0.91x -> 0.97-0.98x. Slower in place,
/// so packed: rows that are not whole lines (64x5000x5000 0.84x -> 0.75-0.77x,
/// 128x11000x4096 0.91-0.94x -> 0.84x), rows of 64 KiB multiples or 96 KiB
/// (128x16384x2048 0.92-0.97x -> 0.80-0.83x, 128x32768x1024 0.91-0.96x -> 0.76-0.77x,
/// 128x24576x1024 0.89-0.96x -> 0.80-0.82x, 32x16384x4096 0.92-0.95x -> 0.85x), and a B
/// that L3 holds (32x2048x2048). 32 KiB rows stay in place, a mixed case: 8-64 rows
/// 0.82-1.02x packed -> 0.86-1.25x, 128x8192x4096 0.90x -> 0.85x.
///
/// A B from memory is read in place only where L1 cannot keep the packed panel either
/// (as for the L2 case): where it can, the strided rows evict it, whatever their spread.
/// On the Sapphire Rapids VM (48 KiB L1, KC 256: a 32 KiB panel; 105 MiB L3), one
/// thread, against faer, in place and packed alternated twice: 128x11008x4096
/// 0.64-0.69x in place -> 0.86-0.94x packed, 32x11008x4096 0.65-0.66x -> 0.97-1.08x,
/// 128x14336x4096 0.27-0.30x -> 0.76-0.87x, 8x8192x8192 0.60-0.63x -> 1.43-1.51x,
/// 32x8192x8192 0.32-0.33x -> 1.01-1.13x.
///
/// Nor under fewer than `FROM_MEMORY_MIN_A_PANELS` A panels whose first tiles would pack
/// B (`few_a_packing`: `fuse_b`, which came after the measurements above): that copy
/// serves the other A panels from L1, where they read the strided panel from L2. Zen 4
/// VM (32 KiB L1, KC 512; session 86), one thread, in place and packed in one binary as
/// processes alternated, two rounds, trueno's best GFLOP/s and against faer:
/// 9x4096x4096 30.8 -> 50.5 (0.88-0.95x -> 1.44-1.46x), 16x4096x4096 53.1 -> 74.8
/// (0.85-0.90x -> 1.14-1.21x), 24x4096x4096 63.5 -> 89.7, 32x4096x4096 78.1 -> 99.0
/// (0.93-0.98x -> 1.12-1.15x), 48x4096x4096 82.9 -> 99.0, 64x4096x4096 89.4 -> 101.5
/// (0.88-0.93x -> 1.03-1.04x), 96x4096x4096 101.6 -> 105.6, 16x8192x4096 49.4 -> 74.5,
/// 32x6144x4096 79.0 -> 95.4, 32x11008x4096 81.5 -> 95.5, 32x4096x11008 78.5 -> 97.3,
/// 64x11008x4096 93.2 -> 97.4; two threads 16x4096x4096 103.7 -> 120.3, 32x4096x4096
/// 162.0 -> 182.1, 64x4096x4096 184.3 -> 199.1, 32x11008x4096 156.6 -> 174.3. From 112
/// rows in place is even or ahead (three rounds: 112x11008x4096 103.7 in place, 99.4
/// packed; 128x11008x4096 107.1 against 98.6, 128x4096x11008 107.4 against 102.4;
/// 256x11008x4096 107.1 against 102.9; two threads 128x11008x4096 197.9 against 190.0);
/// 112x4096x4096 and 128x4096x4096 within 3%.
#[inline(always)]
pub(super) fn b_in_place(
    tb: bool,
    (ldb, k): (usize, usize),
    (kc, nr): (usize, usize),
    few_a_packing: bool,
    c: CacheSizes,
) -> bool {
    let row_bytes = ldb * 4;
    let phases = 4096 >> row_bytes.trailing_zeros().min(12);
    let fits_l1 = kc <= 4 * phases && kc * row_bytes <= 64 << 10;
    let l1_keeps_packed = kc * nr * 4 <= c.l1 * 2 / 3;
    let from_memory = b_in_place_from_memory(tb, (ldb, k), c) && !few_a_packing;
    !tb && (fits_l1 || (!l1_keeps_packed && (from_memory || kc * row_bytes <= c.l2 / 2)))
}

/// KC of a one-block product (A at most MC rows): `kc_one_block`, or half of it where
/// a row-major B is packed by the pass before each block's sweep (neither packed by its
/// first tiles, `fuse_b`, nor read in place: a B past eight L2, a layer's weights). The
/// pass then reads the block's KC rows in 4 KiB pieces (NC 1024) into a block of half
/// the size. Intel VM (session 59; 48 KiB L1, 2 MiB L2: KC 256 -> 128), `gemm-probe`,
/// 32x4096x4096: pack B 3.46 -> 2.97 ms, the kernel 5.45 -> 5.15 ms; NC 512 at KC 256
/// (a block of the same size in 2 KiB pieces) packed in 3.85 ms, NC 2048 at KC 128 in
/// 3.31. One thread, against faer, alternated twice (trueno's GFLOP/s; faer's moved 10%
/// between runs): 8x4096x4096 47 -> 51-52, 16x4096x4096 75-76 -> 82, 32x4096x4096
/// 108-110 -> 117-119, 64x4096x4096 135-139 -> 147; two threads 92-94 -> 102-103,
/// 150-153 -> 162-167, 214-216 -> 228-230, 277 -> 284; 128 rows (4096x4096, 11008x4096,
/// 4096x11008) and 32x11008x4096 within 1% on both. Not measured on another machine.
///
/// With it, whether B is read in place (`b_in_place`, judged at `kc_one_block`): the
/// one decision both come from. First, a product of few A panels over a B within L3
/// reads B in place at `few_rows_kc` (`b_in_place_for_few_rows`).
pub(super) fn one_block_b(
    t: &GemmTask,
    bl: Blocking,
    (c, core): (CacheSizes, CoreFamily),
) -> (usize, bool) {
    let few_rows_kc = few_rows_kc(bl.nr, (c.l1, core), bl.kc_one_block);
    if b_in_place_for_few_rows(t, (bl.mr, few_rows_kc), (c, core)) {
        return (few_rows_kc, true);
    }
    let (kc, spreads) = (bl.kc_one_block, spreads_next_panel(t.m, bl.mr, bl.nr));
    let fused = fuse_b(t.tb, (t.k, t.n), t.b_bytes(), (c, core), (true, spreads));
    let few_a_packing = fused && t.m.div_ceil(bl.mr) < FROM_MEMORY_MIN_A_PANELS;
    let shape = (kc.min(t.whole_k), bl.nr);
    let in_place = b_in_place(t.tb, (t.ldb, t.whole_k), shape, few_a_packing, c);
    let by_pass = !t.tb && !in_place && !fused;
    match by_pass {
        true => ((kc / 2 / 8 * 8).max(8), false),
        false => (kc, in_place),
    }
}

/// `b_in_place`'s last case: a row-major B past L3 whose rows are whole cache lines and
/// start at four or more offsets within 64 KiB, or are at most 32 KiB.
pub(super) fn b_in_place_from_memory(tb: bool, (ldb, k): (usize, usize), c: CacheSizes) -> bool {
    let row_bytes = ldb * 4;
    // Distinct offsets within 64 KiB that the rows start at.
    let spread = 65536 >> row_bytes.trailing_zeros().min(16);
    let lines = row_bytes.is_multiple_of(64);
    !tb && k * row_bytes > c.l3 && lines && (spread >= 4 || row_bytes <= 32 << 10)
}

/// Whether a one-block product of few A panels reads a row-major B in place, `kc` rows a
/// block (`few_rows_kc`): on a Zen core at most `FEW_A_PANELS` MR-row panels of A (48 rows
/// on AVX2's 6-row tile), fewer where B's rows crowd L1's sets (more than eight of the
/// block's rows at one 4 KiB-periodic offset: at KC 256, rows a multiple of 256 bytes,
/// such as 1 to 16 KiB: four panels, or `CROWDED_FUSED_A_PANELS` where the first tiles
/// would pack B instead), none where they crowd L2's sets too (`crowds_l2`); on other
/// cores one panel. And a B within half of L3 and 16 MiB (`FEW_ROWS_B_MAX`; a larger one
/// keeps `fuse_b`'s and `b_in_place`'s rules). Each B panel then serves at most that many
/// tiles, too few to pay for copying it, by its first tile's strided reads and stores
/// (`fuse_b`) or by a pass: in place, the first tile brings the panel's lines into L1
/// and the others read them there, or from L2 where the rows crowd L1's sets.
///
/// Zen 3 VM (AVX2 6x16, 32 KiB L1; 2026-12-05), one thread, against faer, packed and in
/// place alternated twice (trueno's GFLOP/s): 4x1000x1000 22.1 -> 61.3-62.7, 8x1000x1000
/// 39.7 -> 64.2-64.4, 16x1000x1000 68.1 -> 84.9-85.5, 24x1000x1000 85.0-85.1 ->
/// 88.8-89.2, 32x1000x1000 80.9-81.0 -> 84.2-84.7, 48x1000x1000 90.0-90.1 -> 91.7-92.0,
/// 36x600x600 56.3-63.7 -> 90.4-90.6, 40x1500x1500 51.6-66.3 -> 69.4-71.9, 12x2048x2048
/// 45.1-45.5 -> 68.8-70.2, 20x2048x2048 48.9-50.0 -> 59.9-60.1, 16x512x512 75.0-76.7 ->
/// 81.7-82.1, 8x768x768 55.0-55.4 -> 64.7-66.0. Rows crowding L1's sets lost past four
/// panels: 48x512x512 88.9-89.5 -> 82.2-84.5, 32x512x512 80.5-80.7 -> 66.4-77.1,
/// 36x1024x1024 59.7-85.6 -> 72.5-72.8, 48x2048x2048 66.0-66.3 -> 61.3-64.7. 64 rows mixed
/// (64x1000x1000 90.4-90.7 against 89.9-90.1 in place), so not past eight panels.
///
/// Crowding rows, the next session (same VM, the rule off and on in one binary, two
/// rounds): where the first tiles would pack B instead (`fuse_b`: B within eight L2; on
/// Zen since session 82 also rows of 16 KiB, so 25-32 rows over them are packed so),
/// four panels lost in place, 24x4096x256 83.4-83.6 packed against 65.1-69.5,
/// 24x2048x512 82.6-83.2 against 61.4-73.9, 24x1024x1024 81.8-82.5 against 72.5-73.2,
/// 24x1024x512 82.8-83.0 against 74.2-74.9 (and session 69's 24x512x512 81.8-82.1 in
/// place against 83.3-84.6); three tied or lost by a little on one thread (16x4096x256
/// 73.9-74.9 against 70.4-72.5, 16x2048x512 74.1-74.4 against 61.3-74.0, 16x1024x1024
/// 73.3-74.0 against 61.6-74.2), but on two threads packed ran 0.61-0.94x faer (under
/// 0.72x in 8 of 19 cells, eight rounds) where in place held 0.75-0.94x, so three stay
/// in place; two won (8x4096x256 54.2-54.4 against 50.5-50.6, 8x2048x512 56.6-56.8
/// against 51.1-51.3, 8x1024x1024 56.4-56.6 against 50.5-50.8). Where a pass would
/// pack B (past eight L2), four panels still won: 16x4096x512 53.2-69.7 against
/// 48.7-53.3, 24x4096x512 60.0-67.2 against 50.5-53.0, 16x2048x2048 45.6-70.3 against
/// 43.8-45.1, 24x2048x2048 53.2-64.3 against 52.5-53.0, 24x4096x1024 53.7-58.3 against
/// 51.0-53.3. Rows of 32 KiB lost at
/// every count: 8x8192x512 19.2-22.9 against 23.9-27.1, 16x8192x512 25.9-31.7 against
/// 40.5-44.3, 24x8192x512 33.4-36.8 against 49.1-51.1, 16x8192x256 27.2-49.3 against
/// 44.4-52.4, 24x8192x256 33.6-47.2 against 51.0-55.0, and one panel too (three rounds:
/// 2x8192x512 5.6-6.4 against 7.5-8.3, 4x8192x512 10.4-12.5 against 15.1-15.6): the pass
/// reads whole rows as streams where the tile steps a page a k step. Other cores keep
/// their one panel there (the Emerald Rapids VM, last below).
///
/// On the H200 host's Xeon (48 KiB L1, 2 MiB L2, 300 MiB L3), the same two binaries, a
/// shared and noisy core, two rounds: one panel won (AVX-512's 8x32: 4x1000x1000 23.0-23.7
/// -> 39.2-43.7, 8x1000x1000 44.4-45.3 -> 48.7-51.5, 8x768x768 65.2-69.7 -> 71.1-72.5;
/// AVX2 forced: 4x1000x1000 20.3 -> 33.0-33.2), more lost (AVX-512: 48x1000x1000
/// 129.9-134.3 -> 58.4-114.3, 64x1000x1000 135.4-145.7 -> 111.9-117.9, 20x2048x2048
/// 85.5-92.0 -> 28.7-76.1, 40x1500x1500 123.0-124.1 -> 98.0-105.0; AVX2 forced:
/// 16x1000x1000 56.4-58.5 -> 51.0-53.2, 12x2048x2048 40.8-42.1 -> 24.6-32.3, 8x768x768
/// 49.0-50.8 -> 34.5-37.0). Zen 4 and Zen 5 were not measured.
///
/// On the Emerald Rapids VM (48 KiB L1, 2 MiB L2, 260 MiB L3; session 71), one thread,
/// two rounds, AVX-512: up to eight panels won only over a 1000 x 1000 B (24x1000x1000
/// 98.7-101.3 -> 116.7-119.1 GFLOP/s) and lost at 48 and 64 rows, over crowding rows
/// (32x2048x512 139.8-140.4 -> 124.1-125.3) and, at four panels, over other widths
/// (32x1500x1500 116.0-116.6 -> 105.5-107.3); one panel in place beat packing everywhere,
/// rows of 32 KiB included (2x8192x512 26.5-27.0 against 13.6-13.7, 8x8192x512 66.5-66.8
/// against 54.3-55.2), so `crowds_l2` stays Zen's.
pub(super) fn b_in_place_for_few_rows(
    t: &GemmTask,
    (mr, kc): (usize, usize),
    (c, core): (CacheSizes, CoreFamily),
) -> bool {
    let row_bytes = t.ldb * 4;
    // Distinct 4 KiB-periodic offsets the rows start at (L1: 64 sets of 8 ways).
    let phases = 4096 >> row_bytes.trailing_zeros().min(12);
    let crowds_l1 = kc > 8 * phases;
    // Read on Zen only, where no spread is asked for.
    let fused = fuse_b(t.tb, (t.k, t.n), t.b_bytes(), (c, core), (true, false));
    let most = match (core, crowds_l1) {
        (CoreFamily::Zen, _) if crowds_l2(row_bytes) => 0,
        (CoreFamily::Zen, false) => FEW_A_PANELS,
        (CoreFamily::Zen, true) if fused => CROWDED_FUSED_A_PANELS,
        (CoreFamily::Zen, true) => FEW_A_PANELS / 2,
        _ => 1,
    };
    let within = t.b_bytes() <= (c.l3 / 2).min(FEW_ROWS_B_MAX);
    !t.tb && t.m.div_ceil(mr.max(1)) <= most && within
}

/// Whether rows `row_bytes` apart crowd L2's sets as well as L1's: multiples of 32 KiB
/// start at two offsets a 64 KiB period (Zen 3's L2: 512 KiB of 8 ways), so a panel's
/// 256 rows share 16 lines of it and every A panel's tiles read them from L3 again.
/// L2 is indexed by physical address, so that holds where B's pages are physically
/// contiguous (huge pages, or a fresh allocation's run of frames), not always: on the
/// Zen 3 VM (4 KiB pages, no huge pages in use) 12x8192x512 read B in place at 18.9-28.9
/// GFLOP/s in six runs and 48.4-49.1 in two, packed at 30.2-36.8 in all eight (means
/// 29.7 against 34.2; 16x8192x512 30.1 against 41.0, 24x8192x512 33.8 against 48.8).
fn crowds_l2(row_bytes: usize) -> bool {
    row_bytes.trailing_zeros() >= 15
}

/// The largest B `b_in_place_for_few_rows` takes, whatever L3: the largest measured (a
/// 2048 x 2048 B). On a core with hundreds of MiB of L3 a layer's weights (32x4096x4096's
/// 64 MiB) would otherwise come under it, where the Intel VM's measurements set a pass
/// at half the depth (`one_block_b`).
const FEW_ROWS_B_MAX: usize = 16 << 20;

/// See [`b_in_place`]: 112 rows on an 8-row tile.
pub(super) const FROM_MEMORY_MIN_A_PANELS: usize = 14;

/// See [`b_in_place_for_few_rows`].
const FEW_A_PANELS: usize = 8;

/// See [`b_in_place_for_few_rows`]: A panels read over B rows that crowd L1's sets where
/// the first tiles would otherwise pack B.
const CROWDED_FUSED_A_PANELS: usize = 3;

/// KC of a few-row product that reads B in place (`b_in_place_for_few_rows`), at most
/// `one_block_kc`: as many of B's rows as keep the panel's NR-float pieces, a line each
/// where they start on one, in half of L1 (256 on AVX2 with a 32 KiB L1). On the Zen 3 VM
/// the one-block KC (336) ran 16x1000x1000 at 65.9-69.3 GFLOP/s and 24x1000x1000 at
/// 72.2-74.1, against 85.3-85.9 and 89.0-89.4 at 256 (512: 85.3-85.6 and 85.8-86.2). At
/// 128, one run, 8x1000x1000 ran 45.1 against 64.6 and 8-20 rows otherwise within 6%; at
/// 64 they lost 3-39%.
///
/// A Zen core's 32-float panels (AVX-512's tile, two lines a row) run the one-block
/// depth instead: half of L1 is only 128 of their rows, and the A panels after the first
/// read a deeper panel from L2 as fast, with a quarter of the C tile updates. Zen 4 VM
/// (1 MiB L2), one thread, `gemm-probe` alternating 128 and 512 call by call, eight
/// rounds, warm and with 32 MiB read between calls: 16x1000x1000 +5.7% / +6.1%,
/// 24x1000x1000 +5.2% / +6.2%, 32x1000x1000 +5.8% / +5.0%, 64x1000x1000 +4.5% / +2.6%,
/// 16x1000x2000 +5.8% / +10.8%, 16x512x512 +5.2% / +0.6%; 256 rows in between (+3.7% to
/// +4.7% warm). Other cores keep half of L1 (not measured there).
pub(super) fn few_rows_kc(
    nr: usize,
    (l1, core): (usize, CoreFamily),
    one_block_kc: usize,
) -> usize {
    let half_l1 = (l1 / 2 / (nr.max(1) * 4)).max(8) / 8 * 8;
    match core == CoreFamily::Zen && nr >= 32 {
        true => one_block_kc,
        false => half_l1.min(one_block_kc),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(crate) fn zen3() -> CacheSizes {
        CacheSizes {
            l1: 32 << 10,
            l2: 512 << 10,
            l3: 32 << 20,
        }
    }

    /// Zen 4's: Zen 3's with a 1 MiB L2.
    pub(crate) fn zen4() -> CacheSizes {
        CacheSizes {
            l2: 1 << 20,
            ..zen3()
        }
    }

    /// A Sapphire or Emerald Rapids Xeon's (48 KiB L1d, 2 MiB L2) with an `l3` of its own.
    pub(crate) fn rapids(l3: usize) -> CacheSizes {
        CacheSizes {
            l1: 48 << 10,
            l2: 2 << 20,
            l3,
        }
    }

    #[test]
    fn few_row_products_read_a_b_within_l3_in_place_unless_its_rows_crowd_the_caches_or_on_other_cores()
     {
        let zen3 = zen3();
        // AVX2: 6x16 tiles, KC for the in-place panel 32 KiB / 2 / 64 B = 256 rows.
        let (zen, other) = (CoreFamily::Zen, CoreFamily::Other);
        assert_eq!(few_rows_kc(16, (zen3.l1, zen), 512), 256);
        assert_eq!(few_rows_kc(16, (zen3.l1, zen), 128), 128);
        assert_eq!(few_rows_kc(16, (48 << 10, other), 512), 384);
        // AVX-512's 32-float panels: half of L1 elsewhere, the one-block depth on Zen.
        assert_eq!(few_rows_kc(32, (zen3.l1, other), 512), 128);
        assert_eq!(few_rows_kc(32, (zen3.l1, zen), 512), 512);
        let few = |m, n, k, tb| {
            let t = GemmTask {
                tb,
                ..GemmTask::for_test((m, n, k), (&[], k), (&[], n), std::ptr::null_mut())
            };
            b_in_place_for_few_rows(&t, (6, 256), (zen3, CoreFamily::Zen))
        };
        // Rows of 4000 bytes start at 128 offsets a 4 KiB period: up to eight panels.
        assert!(few(4, 1000, 1000, false) && few(16, 1000, 1000, false));
        assert!(few(48, 1000, 1000, false) && !few(49, 1000, 1000, false));
        // Rows of 2, 4 or 8 KiB start at two offsets or one: 256 rows crowd L1's sets.
        // Three panels at most where the first tiles would pack B (within eight L2: 1
        // MiB, 4 MiB; or rows of 16 KiB, on Zen at any size: 8 MiB), four where a pass
        // would (16 MiB of 8 KiB rows).
        assert!(few(18, 512, 512, false) && !few(19, 512, 512, false));
        assert!(few(16, 1024, 1024, false) && !few(24, 1024, 1024, false));
        assert!(few(16, 4096, 256, false) && !few(19, 4096, 256, false));
        assert!(few(20, 2048, 2048, false) && !few(32, 2048, 2048, false));
        assert!(few(24, 2048, 2048, false) && !few(25, 2048, 2048, false));
        assert!(few(18, 4096, 512, false) && !few(19, 4096, 512, false));
        // Rows of 32 KiB crowd L2's sets too: never, not even one panel.
        assert!(!few(2, 8192, 512, false) && !few(8, 8192, 256, false));
        assert!(few(2, 6144, 512, false));
        // A transposed B, or one past half of L3 (64 MiB: from memory), keeps its rules;
        // so does one past 16 MiB whatever L3 (the Intel VM's 480 MiB).
        assert!(!few(16, 1000, 1000, true) && !few(16, 4096, 4096, false));
        let t = GemmTask::for_test(
            (16, 2900, 2900),
            (&[], 2900),
            (&[], 2900),
            std::ptr::null_mut(),
        );
        let big_l3 = CacheSizes {
            l3: 480 << 20,
            ..zen3
        };
        assert!(!b_in_place_for_few_rows(
            &t,
            (6, 256),
            (big_l3, CoreFamily::Zen)
        ));
        assert!(few(16, 2048, 2048, false));
        // Elsewhere one panel: 6 rows of AVX2's tile, 8 of AVX-512's.
        let other = |m, mr| {
            let t = GemmTask::for_test(
                (m, 1000, 1000),
                (&[], 1000),
                (&[], 1000),
                std::ptr::null_mut(),
            );
            b_in_place_for_few_rows(&t, (mr, 256), (zen3, CoreFamily::Other))
        };
        assert!(other(6, 6) && !other(7, 6) && other(8, 8) && !other(9, 8));
        // Rows of 32 KiB keep that one panel there (the L2 limit is measured on Zen only).
        let t = GemmTask::for_test(
            (4, 8192, 512),
            (&[], 512),
            (&[], 8192),
            std::ptr::null_mut(),
        );
        assert!(b_in_place_for_few_rows(
            &t,
            (6, 256),
            (zen3, CoreFamily::Other)
        ));
    }

    #[test]
    fn b_is_read_in_place_where_its_panel_cannot_evict_a_packed_one_or_comes_from_memory() {
        let zen4 = CacheSizes {
            l1: 32 << 10,
            l2: 1 << 20,
            l3: 32 << 20,
        };
        let rapids = rapids(260 << 20);
        // 64^3 (KC 64, rows 256 bytes apart: 16 phases): in place on both.
        assert!(b_in_place(false, (64, 64), (64, 32), false, zen4));
        assert!(b_in_place(false, (64, 64), (64, 32), false, rapids));
        // 256^3 on Zen 4 (KC 256, all of k), whose L1 cannot keep a 32 x 256 packed
        // panel: the 256 KiB of rows fit half of its L2, so in place. 512^3 there (KC
        // 512): 1 MiB of rows, packed.
        assert!(b_in_place(false, (256, 256), (256, 32), false, zen4));
        assert!(!b_in_place(false, (512, 512), (512, 32), false, zen4));
        // At KC 256 a 48 KiB L1 keeps the 32 KiB packed panel: 256^3 to 1024^3 pack.
        for n in [256, 512, 1024] {
            assert!(!b_in_place(false, (n, n), (256, 32), false, rapids), "{n}");
        }
        // A B from memory (past L3) in rows of whole lines that start at four or more
        // offsets within 64 KiB, or of up to 32 KiB: in place (a prefill's 128x4096x11008,
        // 128x11008x4096, 128x14336x4096 on Zen 4); not where L3 holds it, not in rows
        // of 64 KiB multiples or 96 KiB (two offsets), not in rows of part lines, at any
        // depth a block takes.
        for kc in [256, 512] {
            assert!(b_in_place(false, (4096, 4096), (kc, 32), false, zen4));
            assert!(b_in_place(false, (4096, 11008), (kc, 32), false, zen4));
            assert!(b_in_place(false, (11008, 4096), (kc, 32), false, zen4));
            assert!(b_in_place(false, (14336, 4096), (kc, 32), false, zen4));
            assert!(b_in_place(false, (6144, 4096), (kc, 32), false, zen4));
            assert!(b_in_place(false, (8192, 4096), (kc, 32), false, zen4));
            assert!(!b_in_place(false, (2048, 2048), (kc, 32), false, zen4));
            assert!(!b_in_place(false, (16384, 4096), (kc, 32), false, zen4));
            assert!(!b_in_place(false, (24576, 1024), (kc, 32), false, zen4));
            assert!(!b_in_place(false, (5000, 5000), (kc, 32), false, zen4));
            assert!(!b_in_place(false, (11000, 4096), (kc, 32), false, zen4));
            // Packed where few A panels' first tiles would pack it.
            assert!(!b_in_place(false, (4096, 4096), (kc, 32), true, zen4));
            // Emerald Rapids' 260 MiB L3 holds a 180 MiB B.
            assert!(!b_in_place(false, (4096, 11008), (kc, 32), false, rapids));
        }
        // Past Sapphire Rapids' 105 MiB L3, a 180 MiB B is read in place only where its
        // 48 KiB L1 cannot keep the packed panel: at KC 512, not at 256 (32 KiB).
        let sapphire = CacheSizes {
            l3: 105 << 20,
            ..rapids
        };
        assert!(b_in_place_from_memory(false, (11008, 4096), sapphire));
        assert!(!b_in_place(
            false,
            (11008, 4096),
            (256, 32),
            false,
            sapphire
        ));
        assert!(b_in_place(false, (11008, 4096), (512, 32), false, sapphire));
        // A transposed B is never read in place.
        assert!(!b_in_place(true, (64, 64), (64, 32), false, rapids));
    }

    #[test]
    fn a_one_block_product_halves_its_depth_only_where_a_pass_packs_b() {
        use super::super::blocking::CoreFamily;
        let intel = rapids(480 << 20);
        let bl = Blocking::new(8, 32, intel, CoreFamily::Other);
        let intel = (intel, CoreFamily::Other);
        assert_eq!(bl.kc_one_block, 256);
        let mut c = [0.0f32];
        let c = c.as_mut_ptr();
        let task = |m, n, k| GemmTask::for_test((m, n, k), (&[], k), (&[], n), c);
        // A layer's weights (64 MiB, 180 MB; 256 MiB past half of this VM's 480 MiB L3)
        // under 32 rows, past half of L3 (a Sapphire Rapids host's 105 MiB): packed by
        // the pass, so KC 128; under 128 rows (sixteen A panels), or within half of L3,
        // by the first tiles (`fills_b_past_l2`), so KC 256.
        let spr = (
            CacheSizes {
                l3: 105 << 20,
                ..intel.0
            },
            CoreFamily::Other,
        );
        assert_eq!(one_block_b(&task(32, 4096, 4096), bl, spr), (128, false));
        assert_eq!(one_block_b(&task(120, 4096, 4096), bl, spr), (128, false));
        assert_eq!(one_block_b(&task(32, 16384, 4096), bl, intel), (128, false));
        assert_eq!(one_block_b(&task(128, 11008, 4096), bl, spr), (256, false));
        assert_eq!(one_block_b(&task(32, 4096, 4096), bl, intel), (256, false));
        assert_eq!(one_block_b(&task(120, 4096, 4096), bl, intel), (256, false));
        // Within eight L2 its first tiles pack it; given transposed it is not the pass
        // measured: KC 256 for both.
        assert_eq!(one_block_b(&task(128, 8192, 512), bl, intel), (256, false));
        let mut transposed = task(32, 4096, 4096);
        transposed.tb = true;
        assert_eq!(one_block_b(&transposed, bl, intel), (256, false));
        // Read in place from memory where L1 cannot keep a packed panel: KC stays.
        let small = CacheSizes {
            l1: 32 << 10,
            l2: 1 << 20,
            l3: 8 << 20,
        };
        let bl = Blocking::new(8, 32, small, CoreFamily::Other);
        let past_l3 = task(7, 1024, (8 << 20) / 4096 + 9);
        let small = (small, CoreFamily::Other);
        assert_eq!(one_block_b(&past_l3, bl, small), (bl.kc_one_block, true));
    }

    #[test]
    fn a_b_from_memory_is_packed_by_the_first_tiles_of_fewer_than_fourteen_a_panels() {
        use CoreFamily::{Other, Zen};
        let zen4 = zen4();
        let bl = Blocking::new(8, 32, zen4, Zen);
        assert_eq!(bl.kc_one_block, 512);
        let mut c = [0.0f32];
        let c = c.as_mut_ptr();
        let task = |m, n, k| GemmTask::for_test((m, n, k), (&[], k), (&[], n), c);
        // A layer's weights (4096 x 4096, 64 MiB) past Zen 4's 32 MiB L3, whose 32 KiB L1
        // cannot keep a packed 512 x 32 panel: a Zen core's first tiles pack it under
        // fourteen A panels of eight rows (up to 104 rows), from 105 rows it is read in
        // place; KC 512 either way.
        for m in [9, 16, 32, 104] {
            let b = one_block_b(&task(m, 4096, 4096), bl, (zen4, Zen));
            assert_eq!(b, (512, false), "{m} rows");
        }
        for m in [105, 128, 256] {
            let b = one_block_b(&task(m, 4096, 4096), bl, (zen4, Zen));
            assert_eq!(b, (512, true), "{m} rows");
        }
        // Another core's tiles do not pack it under four A panels (too few to spread the
        // asks for the next panel): read in place there as before.
        let bl = Blocking::new(8, 32, zen4, Other);
        let b = one_block_b(&task(32, 4096, 4096), bl, (zen4, Other));
        assert_eq!(b, (bl.kc_one_block, true));
    }
}
