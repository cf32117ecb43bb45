//! Dense f32 GEMM, `C = alpha * op(A) op(B) + beta * C`, BLIS-structured: cache-blocked
//! loops over packed panels feeding a register-tiled micro-kernel written once over the
//! `Simd` trait and instantiated per ISA; split across threads above a FLOP threshold.

pub(crate) mod api;
mod batched;
pub(crate) mod blocking;
mod gemv;
mod kernel;
mod micro;
mod pack;
mod peak;
mod small;
pub(crate) mod task;
mod transpose;
mod transpose8;

pub use blocking::{Blocking, CacheSizes, CoreFamily};
pub use peak::fma_peak_gflops;

use crate::backend::Backend;
use crate::simd::Simd;
use task::{GemmPath, GemmTask};

/// The micro-kernel shape (rows, vectors of columns) each ISA runs, and candidates for
/// measurement (`TRUENO_GEMM_MICRO=14x32` picks one for AVX-512). One table drives both
/// the dispatch below and `micro_shape`.
macro_rules! micro_shapes {
    ($(($backend:ident, $mr:literal, $nv:literal, [$(($cmr:literal, $cnv:literal)),*])),* $(,)?) => {
        /// (MR, NR) of the micro-kernel a backend runs (after any override).
        pub fn micro_shape(b: Backend) -> (usize, usize) {
            let lanes = b.lanes();
            if let Some((mr, nr)) = shape_override() {
                $(if b == Backend::$backend && [$(($cmr, $cnv * lanes)),*].contains(&(mr, nr)) {
                    return (mr, nr);
                })*
            }
            match b {
                $(Backend::$backend => ($mr, $nv * lanes),)*
                _ => (4, 4),
            }
        }

        /// Whether `backend` has a micro-kernel of `mr` rows and `nv` vectors.
        fn has_shape(b: Backend, mr: usize, nv: usize) -> bool {
            match b {
                $(Backend::$backend => ($mr, $nv) == (mr, nv) || [$(($cmr, $cnv)),*].contains(&(mr, nv)),)*
                _ => (mr, nv) == (4, 4),
            }
        }

        #[inline(always)]
        fn run_packed<S: Simd>(s: S, t: &GemmTask, bl: Blocking) {
            let nv = bl.nr / S::LANES;
            match S::BACKEND {
                $(Backend::$backend => match (bl.mr, nv) {
                    $(($cmr, $cnv) => kernel::gemm_packed::<S, $cmr, $cnv>(s, t, bl),)*
                    _ => kernel::gemm_packed::<S, $mr, $nv>(s, t, bl),
                },)*
                _ => kernel::gemm_packed::<S, 4, 4>(s, t, bl),
            }
        }
    };
}

micro_shapes! {
    (Avx512, 8, 2, [(6, 2), (8, 2), (12, 2), (14, 2), (4, 4), (6, 3), (8, 1)]),
    // (4, 2) and (4, 1): the thin tile (`thin_shape`).
    (Avx2, 6, 2, [(6, 2), (4, 3), (8, 1), (4, 2), (4, 1)]),
    (Avx, 6, 2, [(6, 2)]),
    (Sse2, 6, 2, [(6, 2), (4, 3)]),
    // 32 vector registers: 16 accumulators, two B vectors and A broadcasts by lane.
    (Neon, 8, 2, [(8, 2), (6, 2), (4, 4)]),
    // Engines map SIMD128 onto 16 x86 / 32 ARM registers: the SSE2 shape.
    (WasmSimd128, 6, 2, [(6, 2), (4, 3)]),
}

/// The tile (rows, vectors of columns) a backend runs where a thin product reads its big
/// operand A in place (`kernel::thin_b`, often a linear layer's `x·Wᵀ` swapped by
/// `run_transposed`), if not its default. AVX2's 6x16 needs 15 of its 16 vector
/// registers, and in the loop that reads A in place (six row pointers) LLVM keeps one of
/// the twelve accumulators on the stack: a load, FMA and store through memory every k
/// step (`perf annotate` on the Zen 3 VM: 73% of the loop's samples on that pair), the
/// loop at half speed. 4x16 keeps its eight in registers. Zen 3 VM, one thread,
/// interleaved against faer, two rounds: `x·Wᵀ` at 4, 8, 32 and 64 x 4096 x 4096
/// 0.51-0.81x -> 0.95-1.32x; 256x64x256 0.45x -> 0.95-0.98x, 300x48x300 0.47-0.49x ->
/// 1.00-1.01x, 512x32x512 0.52-0.54x -> 1.03-1.10x, 2048x8x2048 1.09-1.14x -> 2.12-2.50x,
/// 1024x64x1024 within the noise (1.04-1.16x). 2x16 ran as slowly as 6x16 (four
/// accumulators cannot cover the FMA latency). AVX-512's 8x32 has 32 registers and beat
/// faer there on the Zen 5 VM (1.05-4.5x); other ISAs were not measured.
fn thin_shape(b: Backend) -> Option<(usize, usize)> {
    match b {
        Backend::Avx2 => Some((4, 2)),
        _ => None,
    }
}

/// Whether backend `b`'s default tile reads a one-block A in place (`kernel::a_in_place`)
/// for a product of `n` columns: not where it keeps an accumulator on the stack in that
/// loop (those with a thin tile, see `thin_shape`) and B has at least
/// `PACK_A_FROM_COLUMNS` columns, which pack A and run the packed loop; with fewer, each
/// packed panel serves too few tiles to pay for the pass. Zen 3 VM, one thread,
/// interleaved against faer, two rounds: 120x1024x300 0.66-0.67x -> 0.85-0.87x,
/// 60x1000x1000 0.63-0.67x -> 0.79-0.82x, 48x300x300 0.80-0.83x -> 0.85-0.88x,
/// 64x256x256 0.86x -> 0.89-0.90x, 96x512x512 0.83-0.84x both ways; and below the line,
/// packed: 96^3 0.95-1.03x -> 0.93-0.94x, 120^3 0.85-0.87x -> 0.83-0.84x, 100x100x400
/// 0.82-0.83x -> 0.80x.
fn tile_reads_a_in_place(b: Backend, n: usize) -> bool {
    thin_shape(b).is_none() || n < PACK_A_FROM_COLUMNS
}

/// See [`tile_reads_a_in_place`].
const PACK_A_FROM_COLUMNS: usize = 256;

/// The block sizes of the tile backend `b` runs for thin products that read A in place,
/// where that is not its default tile (`thin_shape`; `trueno info` shows them).
///
/// ```
/// use trueno::backend::Backend;
/// let thin = trueno::gemm::thin_blocking_for(Backend::Avx2).unwrap();
/// assert_eq!((thin.mr, thin.nr), (4, 16));
/// assert!(trueno::gemm::thin_blocking_for(Backend::Avx512).is_none());
/// ```
pub fn thin_blocking_for(b: Backend) -> Option<Blocking> {
    let (mr, nv) = thin_shape(b)?;
    Some(blocking_for_shape(b, mr, nv * b.lanes(), true))
}

/// `bl`, or the backend's thin tile where `t` is thin with it: then its own block sizes
/// and, for a C of at most half its columns, its one-vector-wide kernel.
fn thin_tile(b: Backend, t: &GemmTask, bl: Blocking) -> Blocking {
    let Some(thin) = thin_blocking_for(b) else {
        return bl;
    };
    if !kernel::thin_b(thin.mr, thin.nr, t, thin) {
        return bl;
    }
    let narrow = t.n <= thin.nr / 2 && has_shape(b, thin.mr, 1);
    Blocking {
        nr: if narrow { b.lanes() } else { thin.nr },
        ..thin
    }
}

fn shape_override() -> Option<(usize, usize)> {
    static O: std::sync::OnceLock<Option<(usize, usize)>> = std::sync::OnceLock::new();
    *O.get_or_init(|| {
        let v = std::env::var("TRUENO_GEMM_MICRO").ok()?;
        let (r, c) = v.split_once('x')?;
        Some((r.trim().parse().ok()?, c.trim().parse().ok()?))
    })
}

/// The block sizes `backend` uses on this machine (`TRUENO_GEMM_BLOCKS=KC,MC,NC`
/// overrides them, for tuning; its KC and NC then hold for thin products too, except that
/// a one-block product on Zen still packs all of a row-major B's columns where its rows
/// make one stream: see `one_block_nc` in `kernel.rs`).
pub fn blocking_for(b: Backend) -> Blocking {
    let (mr, nr) = micro_shape(b);
    blocking_for_shape(b, mr, nr, false)
}

/// [`blocking_for`] for backend `b`'s default tile `mr x nr`, or its thin one (`thin`).
fn blocking_for_shape(b: Backend, mr: usize, nr: usize, thin: bool) -> Blocking {
    // Worked out once per backend and tile: every GEMM call asks, and at 64^3 (2 µs)
    // working it out again each time cost about 1% of the call.
    const N: usize = Backend::ALL.len();
    static BY_BACKEND: [[std::sync::OnceLock<Blocking>; 2]; N] =
        [const { [const { std::sync::OnceLock::new() }; 2] }; N];
    match BY_BACKEND.get(b as usize) {
        Some(cells) => *cells[usize::from(thin)].get_or_init(|| blocking_uncached(mr, nr)),
        None => blocking_uncached(mr, nr),
    }
}

fn blocking_uncached(mr: usize, nr: usize) -> Blocking {
    let mut bl = Blocking::new(mr, nr, CacheSizes::detect(), CoreFamily::detect());
    if let Some([kc, mc, nc]) = blocks_override() {
        bl = Blocking {
            kc: kc.max(1),
            kc_one_block: kc.max(1),
            mc: mc.max(mr) / mr * mr,
            nc: nc.max(nr) / nr * nr,
            nc_one_block: nc.max(nr) / nr * nr,
            kc_thin_b: kc.max(1),
            ..bl
        };
    }
    bl
}

fn blocks_override() -> Option<[usize; 3]> {
    static O: std::sync::OnceLock<Option<[usize; 3]>> = std::sync::OnceLock::new();
    *O.get_or_init(|| {
        let v = std::env::var("TRUENO_GEMM_BLOCKS").ok()?;
        let p: Vec<usize> = v.split(',').filter_map(|x| x.trim().parse().ok()).collect();
        (p.len() == 3).then(|| [p[0], p[1], p[2]])
    })
}

/// Below this many multiply-adds a GEMM skips packing (when the layout allows).
pub(crate) const SMALL_MACS: usize = 48 * 48 * 48;

/// One task on one thread, on ISA `s`: the small path or the packed BLIS loops.
#[inline(always)]
pub(crate) fn gemm_vec<S: Simd>(s: S, t: &GemmTask) {
    let try_small = match t.path {
        // A single row or column of C is a matrix-vector product: packing would copy the
        // whole matrix operand for one use.
        GemmPath::Auto => t.m * t.n * t.k <= SMALL_MACS || t.m == 1 || t.n == 1,
        GemmPath::Packed => false,
        GemmPath::Unpacked => true,
    };
    if try_small && small::gemm_small(s, t) {
        return;
    }
    // The caller's block sizes or tile (`TRUENO_GEMM_MICRO`), where given, hold as given.
    let given = t.blocking.is_some() || shape_override().is_some();
    let bl = t.blocking.unwrap_or_else(|| blocking_for(S::BACKEND));
    // One call of `run_packed` whatever the orientation: each call inlines every kernel
    // shape's loops, and unoptimised builds keep every inlined copy's locals in the one
    // frame (three calls made wasm's GEMM frame 1.1 MiB, past its 1 MiB stack).
    let swapped;
    let (t, bl) = match run_transposed(t, bl) {
        true => {
            swapped = t.transposed();
            // A C of at most half a micro-tile's columns (8-16 rows of the original C)
            // runs a kernel one vector wide where the ISA has one, instead of padding.
            let narrow = swapped.n <= bl.nr / 2 && has_shape(S::BACKEND, bl.mr, 1);
            let nr = if narrow { S::LANES } else { bl.nr };
            (&swapped, Blocking { nr, ..bl })
        }
        false => (t, bl),
    };
    let bl = match given {
        true => bl,
        false => thin_tile(S::BACKEND, t, bl),
    };
    run_packed(s, t, bl);
}

/// Whether to run a thin product with B transposed as `Cᵀ = op(B)ᵀ op(A)ᵀ`: the weight
/// layout of a linear layer (`x Wᵀ`, W stored out x in), where B is the big operand and
/// packing it means transposing it. Swapped, B is read in place, eight rows a micro-tile
/// as the broadcast operand along k, and the few rows of A are packed instead.
fn run_transposed(t: &GemmTask, bl: Blocking) -> bool {
    t.tb && t.m >= 2 && t.m <= 4 * bl.nr && t.n > t.m
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row-major `m x n` product over `k` with nothing to read (only its shape counts).
    fn task(m: usize, n: usize, k: usize) -> GemmTask<'static> {
        GemmTask::for_test((m, n, k), (&[], k), (&[], n), std::ptr::null_mut())
    }

    #[test]
    fn thin_products_take_avx2s_four_row_tile_and_others_keep_the_default() {
        let (avx2, avx512) = (Backend::Avx2, Backend::Avx512);
        let shape = |b, t: &GemmTask| {
            let bl = thin_tile(b, t, blocking_for(b));
            (bl.mr, bl.nr)
        };
        // A layer's x·Wᵀ after `run_transposed`: 4096 rows of W, 32 or 8 of x.
        assert_eq!(shape(avx2, &task(4096, 32, 4096)), (4, 16));
        assert_eq!(shape(avx2, &task(4096, 8, 4096)), (4, 8), "one vector wide");
        assert_eq!(shape(avx2, &task(512, 512, 512)), micro_shape(avx2));
        assert_eq!(
            shape(avx2, &task(4096, 32, 4096).transposed()),
            micro_shape(avx2)
        );
        assert_eq!(shape(avx512, &task(4096, 32, 4096)), micro_shape(avx512));
        // Its block sizes are its own (a deeper thin panel for four rows than six).
        let thin = thin_blocking_for(avx2).unwrap();
        assert_eq!(thin, blocking_uncached(4, 16));
        assert!(has_shape(avx2, 4, 2) && has_shape(avx2, 4, 1));
        // Its default tile reads a one-block A in place only for narrow Bs.
        assert!(!tile_reads_a_in_place(avx2, PACK_A_FROM_COLUMNS));
        assert!(tile_reads_a_in_place(avx2, PACK_A_FROM_COLUMNS - 1));
        assert!(tile_reads_a_in_place(avx512, 4096));
    }
}
