//! Which way round a product with a transposed B runs: as given, B's panels packed by
//! transposing them, or as `Cᵀ = op(B)ᵀ op(A)ᵀ`, B read in place and C written through
//! its transpose (`run_transposed`). Each rule carries the measurements that set it.

use super::blocking::{Blocking, CoreFamily};
use super::store::transposes_by_blocks;
use super::sweep::edge_tile_rows;
use super::sweep_order::rows_alias;
use super::task::GemmTask;

/// Whether to run a thin product with B transposed as `Cᵀ = op(B)ᵀ op(A)ᵀ`: the weight
/// layout of a linear layer (`x Wᵀ`, W stored out x in), where B is the big operand and
/// packing it means transposing it. Swapped, B is read in place, eight rows a micro-tile
/// as the broadcast operand along k, and the few rows of A are packed instead. `lanes`:
/// the floats of a vector of the ISA that runs it.
///
/// Not for a shallow product of more than 64 rows (more than 96 at k 129-256): its C,
/// written through the transpose, costs more than packing B, which then serves that many
/// A panels. Intel VM (session 58, AVX-512: 32-column tiles, so up to 128 rows swap),
/// `x·Wᵀ`, one thread, against faer, swapped and not alternated twice: 128x1056x256 0.87x
/// -> 0.92-0.93x, 128x4096x128 0.81-0.82x -> 0.95-0.96x, 128x4096x256 0.90-0.91x ->
/// 0.95-0.96x, 128x2048x256 0.86x -> 0.93x, 128x512x128 0.93-0.94x -> 0.99-1.00x,
/// 112x4096x256 0.79-0.80x -> 0.95x, 96x4096x128 0.83x -> 0.86-0.87x. Swapped stays
/// ahead at 96x4096x256 (0.93-0.94x against 0.84x), 64 rows (64x4096x128 0.82x against
/// 0.75-0.76x) and from k 384 (128x4096x384 0.87-0.88x against 0.85-0.86x).
///
/// Nor where running as given costs less than the swap (`packing_b_costs_less`): always
/// weighed where the swapped C's tiles would be written element by element (AVX2's,
/// SSE2's and WASM's 6- and 4-row tiles, `BY_ELEMENT`), and up to k
/// `BY_BLOCKS_MAX_K` where they go out through 8 x 8 blocks (AVX-512's and NEON's 8-row
/// tiles, `by_blocks`: per core, and on Zen by where C's rows fall in L1).
pub(super) fn run_transposed(t: &GemmTask, bl: Blocking, lanes: usize, core: CoreFamily) -> bool {
    let shallow = (t.m > 96 && t.k <= 256) || (t.m > 64 && t.k <= 128);
    let swaps = t.tb && t.m >= 2 && t.m <= 4 * bl.nr && t.n > t.m && !shallow;
    let costs = match transposes_by_blocks(bl.mr, bl.nr) {
        false => Some(BY_ELEMENT),
        true => (t.k <= BY_BLOCKS_MAX_K).then_some(by_blocks(core, rows_alias(t.c))),
    };
    swaps && !costs.is_some_and(|c| packing_b_costs_less(t.m, t.k, (bl.mr, lanes), c))
}

/// What the two ways round cost beyond the micro-kernel's k steps, in k steps of the
/// tile per element (`packing_b_costs_less`), fitted per way the swapped C is stored.
#[derive(Clone, Copy, Debug)]
struct SwapCosts {
    /// The swapped C's transposed store, per element of C.
    store: f64,
    /// Packing the transposed B when run as given, per element of B.
    pack_b: f64,
    /// How much longer the swapped tile's k step takes than the as-given one's (a
    /// fraction of it), fitted: 5% on Zen where C's rows are off L1's set grid (B read in
    /// place as the broadcast operand there, a packed panel as given), 0 elsewhere.
    swapped_step: f64,
}

/// Whether an `m`-row `x·Wᵀ` of depth `k` runs faster as given (its transposed B packed
/// by the `mr`-row tile) than swapped, costed in the micro-kernel's k steps per element
/// of C. Swapped: each element's transposed store costs `costs.store`, and the swapped
/// tile runs C's m rows as columns padded to whole vectors of `lanes`, each k step
/// `costs.swapped_step` longer. As given: the rows
/// run in `mr`-row tiles (a ragged last panel in its edge tile, `edge_tile_rows`), and
/// packing B costs `costs.pack_b` per element of B, which C's m rows share. With the
/// six-row edge tile the costs keep
/// 14x4096x32 and 30x4096x64 as given, which they had swapped: Emerald Rapids VM, one
/// thread, against faer, two rounds (trueno's GFLOP/s), 61.7-69.7 -> 94.3-116.3 (0.77x ->
/// 1.18-1.22x) and 96.5-112.9 -> 137.4-162.6 (0.71-0.72x -> 1.01-1.04x).
fn packing_b_costs_less(m: usize, k: usize, (mr, lanes): (usize, usize), costs: SwapCosts) -> bool {
    let (rows, k) = (m as f64, k as f64);
    let padded = m.next_multiple_of(lanes) as f64 / rows;
    let ragged = m % mr;
    let run = m - ragged
        + match ragged {
            0 => 0,
            r => edge_tile_rows(mr, r),
        };
    let swapped = costs.store + k * padded * (1.0 + costs.swapped_step);
    let as_given = k * (run as f64 / rows + costs.pack_b / rows);
    as_given < swapped
}

/// The costs where the swapped C is stored element by element. Zen 3 VM (AVX2, 6x16;
/// 2026-12-05), one thread, `x·Wᵀ` against faer, swapped and not alternated twice
/// (trueno's GFLOP/s): 64x2048x32 53.3 -> 78.6-79.0 (0.65x -> 0.92x), 48x2048x32
/// 51.6-51.8 -> 74.3-75.0, 64x1024x32 0.54-0.62x -> 0.91-0.95x, 64x2048x64 69.9-70.0 ->
/// 84.2 (0.76-0.77x -> 0.91-0.92x), 56x4096x32 49.9-50.0 -> 73.5-73.8, 24x4096x16
/// 34.0-34.1 -> 58.6 (0.46-0.47x -> 0.78-0.79x), 40x4096x112 70.4-70.6 -> 80.0-80.2,
/// 48x2048x96 76.3 -> 82.3-82.8, 12x4096x48 47.9-49.5 -> 56.8-57.3, 4x16384x32 18.9-19.0
/// -> 30.2-30.5; two threads 64x4096x32 100-101 -> 141-145, 64x1024x32 85-86 -> 122-123,
/// 64x4096x64 135 -> 158. Swapped stays ahead at 16x2048x64 (67.4-68.1 against
/// 64.6-64.7), 32x2048x96 (77.9-78.3 against 73.2-73.4), 32x2048x128 (80.9 against
/// 72.5-72.6), 16x2048x192 (84.2-84.6 against 65.5-67.1); 64 rows at k 128-192 and 8-12
/// rows at k 80-192 within 2% either way. Fitted to those runs (2 to 64 rows, k 8 to
/// 192, n 512 to 16384); the fit still swaps 8x2048x64 (not swapped: 43.0 against 39.5),
/// 24x4096x112 (73.4 against 72.6) and 2x4096x32 (15.4 against 10.4). Not measured on
/// SSE2 or WASM.
const BY_ELEMENT: SwapCosts = SwapCosts {
    store: 23.0,
    pack_b: 6.3,
    swapped_step: 0.0,
};

/// The costs where the swapped C goes out through 8 x 8 blocks: under a third of
/// `BY_ELEMENT`'s store. Emerald Rapids VM (AVX-512, 8x32; 2026-12-05), one thread,
/// `x·Wᵀ` against faer, swapped and as given alternated in one binary (trueno's GFLOP/s,
/// swapped -> as given): 64x4096x32 112.9-113.4 -> 126.9-127.5 (0.72-0.73x -> 0.81-0.82x
/// faer), 64x4096x16 63.2-63.7 -> 112.3-113.1, 48x4096x32 107.8-110.3 -> 123.6-124.1,
/// 24x4096x16 39.2 -> 85.3-90.3, 24x4096x64 79.3-80.1 -> 106.1-106.5, 8x4096x32
/// 33.9-34.0 -> 57.1-57.2, 4x4096x64 27.6-27.7 -> 35.9-36.5, 56x2048x64 107.2 -> 144.6,
/// 20x1024x128 90.0 -> 102.8, 40x4096x128 108.1 -> 117.4. Swapped stays ahead at 16 and
/// 32 rows from k 32 (16x4096x64 112.9-114.3 against 90.2-91.0, 32x4096x64 135.9-140.0
/// against 115.7-119.8), 64x4096x96 (139.9-141.1 against 131.8-132.3) and 64x2048x128
/// (156.6 against 136.4). Fitted (the least regret over a grid of both costs) to 101
/// shapes of 2 to 96 rows, k 16 to 4096, n 1024 to 4096, one or two rounds each; it
/// misjudges 32x4096x32 (as given 0.92-0.93x of swapped), 48x4096x64, 64x4096x64,
/// 64x1024x64 and 40x2048x128 (0.97-1.03x). Deeper, swapped won at every count of rows,
/// ragged ones included, which the costs would keep as given for their padded swapped
/// columns (k 256: 20x1024x256 98.3 against 85.4, 56x1024x256 138.1 against 123.0,
/// 24x4096x256 105.2 against 89.4; 2x4096x256 even), so past `BY_BLOCKS_MAX_K` it
/// swaps. Not measured on NEON.
const BY_BLOCKS: SwapCosts = SwapCosts {
    store: 6.5,
    pack_b: 4.75,
    swapped_step: 0.0,
};

/// See [`BY_BLOCKS`].
const BY_BLOCKS_MAX_K: usize = 128;

/// The 8 x 8-block costs for a core, and for a C whose rows alias in L1's sets
/// (`rows_alias`: rows a multiple of 4 KiB apart, as a 4096-wide C's are).
///
/// On Zen (Zen 4 VM: 32 KiB 8-way L1, 1 MiB L2; 2026-12-06) the swapped C's store is what
/// the rows' spacing decides. Each swapped tile writes eight floats into each of 16-64 rows
/// of C; rows 4 KiB apart all fall in one set of L1's eight ways, so a line is pushed out
/// between the two tiles that fill its halves and comes back from L2. `gemm-probe`, one
/// thread, `x·Wᵀ` swapped and as given alternated call by call, six rounds each, 2-64 rows
/// by k 16-128 (66 shapes a grid): at 4000 columns the swap won every shape of whole
/// vectors (16x4000x32 104.5 against 77.1 GFLOP/s, 64x4000x32 98.5 against 80.8,
/// 32x4000x128 108.1 against 92.6) and lost every padded one (24x4000x64 60.4 against
/// 90.7), which store 0.5 and pack 3.0 fit with no regret (Emerald Rapids' costs: 162%
/// summed over the grid); at 4096 columns as given won where the ER costs swapped
/// 32x4096x64 (93.9 against 86.3), 64x4096x96 (104.4 against 94.2) and 12x4096x128, and
/// store 9.0 and pack 4.75 fit with 39% summed regret (79% with the ER costs): it keeps
/// 16x4096x16 as given (68.8 against 82.9 swapped) and swaps 32x4096x64 (0.89x).
///
/// Refitted off the set grid (session 80, the same VM) once the as-given tile's store
/// kept its accumulators in registers (`store.rs`, 8-10% on shallow `x·Wᵀ`): the 4000-
/// column grid twice more and 64 shapes at 1000, 2000, 3000 and 8000 columns (16-64
/// rows, k 16-128), six rounds each. As given now wins 48 and 64 rows up to k 32-64
/// (64x4000x16 91.0 against 83.0 GFLOP/s swapped, 64x4000x32 98.8-99.7 against 97.0,
/// 48x2000x16 89.7 against 81.3, 64x8000x32 83.3 against 75.4) while the swap keeps 16
/// and 32 rows (16x4000x16 96.6-97.7 against 69.9-70.1, 32x4000x32 97.8 against 92.9)
/// and 64 rows from k 96. A crossover that grows faster than the rows needs the swapped
/// k step's own cost: store 1.25, pack 4.25 and a 5% longer swapped step leave 9%
/// summed regret over the 196 alternated pairs (misses of 2% at most: 48x4000x48,
/// 64x8000x64); the old pair 159%, the best pair without the step 64%. At 4096 columns
/// a grid at this code kept the pair above (13% summed regret; the step bought nothing).
fn by_blocks(core: CoreFamily, rows_alias: bool) -> SwapCosts {
    let (store, pack_b, swapped_step) = match (core, rows_alias) {
        (CoreFamily::Zen, false) => (1.25, 4.25, 0.05),
        (CoreFamily::Zen, true) => (9.0, 4.75, 0.0),
        (CoreFamily::Other, _) => return BY_BLOCKS,
    };
    SwapCosts {
        store,
        pack_b,
        swapped_step,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Backend;
    use crate::gemm::blocking_for;
    use crate::gemm::task::CPtr;

    /// A row-major `m x n` product over `k` with nothing to read (only its shape counts).
    fn task(m: usize, n: usize, k: usize) -> GemmTask<'static> {
        GemmTask::for_test((m, n, k), (&[], k), (&[], n), std::ptr::null_mut())
    }

    /// Whether `x·Wᵀ` of `m x n x k` swaps on backend `b` with `nr`-column tiles.
    fn swaps(b: Backend, nr: usize, (m, n, k): (usize, usize, usize)) -> bool {
        let bl = Blocking {
            nr,
            ..blocking_for(b)
        };
        let t = GemmTask {
            tb: true,
            ..task(m, n, k)
        };
        run_transposed(&t, bl, b.lanes(), CoreFamily::Other)
    }

    #[test]
    fn a_linear_layers_product_swaps_unless_it_is_shallow_and_over_64_rows() {
        let swaps = |m, n, k| swaps(Backend::Avx512, 32, (m, n, k));
        assert!(swaps(32, 4096, 4096) && swaps(128, 11008, 4096));
        assert!(swaps(32, 4096, 128) && swaps(64, 4096, 128) && swaps(96, 4096, 256));
        assert!(swaps(128, 4096, 384) && swaps(2, 4096, 256));
        assert!(!swaps(128, 4096, 256) && !swaps(128, 1056, 256) && !swaps(112, 4096, 256));
        assert!(!swaps(96, 4096, 128) && !swaps(80, 4096, 128));
        // Past four tiles of rows, a row-major B, one row, or a C no wider than tall.
        assert!(!swaps(129, 4096, 4096) && !swaps(1, 4096, 4096) && !swaps(64, 64, 4096));
        let bl = blocking_for(Backend::Avx512);
        assert!(!run_transposed(
            &task(32, 4096, 4096),
            bl,
            16,
            CoreFamily::Other
        ));
    }

    #[test]
    fn element_by_element_transposed_stores_swap_only_where_k_outweighs_them() {
        let swaps = |m, n, k| swaps(Backend::Avx2, 16, (m, n, k));
        // The measured winners (Zen 3 VM): not swapped where shallow for its rows...
        for (m, k) in [(64, 32), (48, 32), (64, 64), (56, 32), (24, 16), (40, 112)] {
            assert!(!swaps(m, 2048, k), "{m} rows, k {k}");
        }
        assert!(!swaps(48, 2048, 96) && !swaps(12, 4096, 48) && !swaps(4, 16384, 32));
        // ...swapped where deep for them, and wherever the product is deep.
        for (m, k) in [
            (16, 64),
            (32, 96),
            (32, 128),
            (16, 192),
            (64, 4096),
            (8, 4096),
        ] {
            assert!(swaps(m, 2048, k), "{m} rows, k {k}");
        }
        // The cost by hand: 64 rows at k 32 (10 six-row tiles and a four-row one, 64
        // rows in all; whole vectors): 32 * (1 + 6.3 / 64) = 35.2 < 23 + 32.
        assert!(packing_b_costs_less(64, 32, (6, 8), BY_ELEMENT));
        // 16 rows at k 64 (6 + 6 + 4 rows): 64 * (1 + 6.3 / 16) = 89.2 > 23 + 64.
        assert!(!packing_b_costs_less(16, 64, (6, 8), BY_ELEMENT));
        // 2 rows at k 16 run a four-row tile, swapped a vector of 8 for 2 columns:
        // 16 * (4 / 2 + 6.3 / 2) = 82.4 < 23 + 16 * 4.
        assert!(packing_b_costs_less(2, 16, (6, 8), BY_ELEMENT));
    }

    #[test]
    fn block_transposed_stores_swap_where_k_outweighs_them_or_past_their_depth() {
        let swaps = |m, n, k| swaps(Backend::Avx512, 32, (m, n, k));
        // The measured winners (Emerald Rapids VM): as given where shallow for its rows,
        // swapped where deep for them and past the depth the costs were fitted to.
        for ((m, n, k), swapped) in [
            ((64, 4096, 32), false),
            ((64, 4096, 16), false),
            ((48, 4096, 32), false),
            ((24, 4096, 16), false),
            ((24, 4096, 64), false),
            ((8, 4096, 32), false),
            ((4, 4096, 64), false),
            ((56, 2048, 64), false),
            ((20, 1024, 128), false),
            ((40, 4096, 128), false),
            ((14, 4096, 32), false),
            ((30, 4096, 64), false),
            ((16, 4096, 64), true),
            ((32, 4096, 64), true),
            ((64, 4096, 96), true),
            ((64, 2048, 128), true),
            ((20, 1024, 256), true),
            ((56, 1024, 256), true),
            ((24, 4096, 256), true),
            ((8, 4096, 4096), true),
        ] {
            assert_eq!(swaps(m, n, k), swapped, "{m}x{n}x{k}");
        }
        // The cost by hand: 64 rows at k 32 (eight 8-row tiles): 32 * (1 + 4.75 / 64) =
        // 34.4 < 6.5 + 32.
        assert!(packing_b_costs_less(64, 32, (8, 16), BY_BLOCKS));
        // 16 rows at k 64: 64 * (1 + 4.75 / 16) = 83 > 6.5 + 64.
        assert!(!packing_b_costs_less(16, 64, (8, 16), BY_BLOCKS));
        // 24 rows pad to 32 columns swapped: 64 * (1 + 4.75 / 24) = 76.7 < 6.5 + 64 * 4 / 3.
        assert!(packing_b_costs_less(24, 64, (8, 16), BY_BLOCKS));
        // 14 rows at k 32 run an 8-row tile and a 6-row one: 32 * (14 / 14 + 4.75 / 14) =
        // 42.9 < 6.5 + 32 * 16 / 14 = 43.1; in two 8-row tiles it would be 47.4.
        assert!(packing_b_costs_less(14, 32, (8, 16), BY_BLOCKS));
    }

    #[test]
    fn on_zen_block_transposed_stores_swap_by_where_c_rows_fall_in_l1() {
        // `x·Wᵀ` of m x n x k, C's rows `ldc` floats apart, on Zen with AVX-512's tiles.
        let swaps = |(m, n, k): (usize, usize, usize), ldc: usize| {
            let bl = blocking_for(Backend::Avx512);
            let t = GemmTask::for_test((m, n, k), (&[], k), (&[], k), std::ptr::null_mut());
            let t = GemmTask {
                tb: true,
                c: CPtr { stride: ldc, ..t.c },
                ..t
            };
            run_transposed(&t, bl, 16, CoreFamily::Zen)
        };
        // The measured winners (Zen 4 VM), C's rows n floats apart. Rows 16,000 bytes
        // apart (and 32,000, 8,000): swapped for 16 and 32 rows, and for 48 and 64 from
        // a depth that grows with them; as given wherever C's rows pad a vector. Rows
        // 16 KiB apart: as given up to a depth that grows with the rows (the fit's misses:
        // 16x4096x16 stays as given, 0.83x of swapped, and 32x4096x64 and 64x4096x128
        // swap, 0.89x and 0.97x of as given).
        for (m, n, k, swapped) in [
            (16, 4000, 16, true),
            (16, 4000, 128, true),
            (32, 4000, 32, true),
            (32, 4000, 128, true),
            (48, 4000, 16, false),
            (48, 4000, 32, false),
            (48, 4000, 96, true),
            (64, 4000, 16, false),
            (64, 4000, 32, false),
            (64, 4000, 64, false),
            (64, 4000, 96, true),
            (64, 4000, 128, true),
            (24, 4000, 64, false),
            (40, 4000, 32, false),
            (56, 4000, 128, false),
            (8, 4000, 64, false),
            (2, 4000, 16, false),
            (12, 4000, 128, false),
            (64, 8000, 32, false),
            (48, 2000, 16, false),
            (16, 8000, 32, true),
            (32, 2000, 64, true),
            (16, 4096, 32, true),
            (16, 4096, 64, true),
            (32, 4096, 48, false),
            (64, 4096, 32, false),
            (64, 4096, 96, false),
            (12, 4096, 128, false),
            (24, 4096, 128, false),
        ] {
            assert_eq!(swaps((m, n, k), n), swapped, "{m}x{n}x{k}");
        }
        // The same C 4096 wide inside a wider matrix whose rows do not alias swaps.
        assert!(swaps((32, 4096, 48), 4112) && !swaps((32, 4096, 48), 4096));
        // Past the costs' depth it swaps either way.
        assert!(swaps((64, 4096, 256), 4096) && swaps((64, 4096, 256), 4000));
    }
}
