//! Dense f32 GEMM, `C = alpha * op(A) op(B) + beta * C`, BLIS-structured: cache-blocked
//! loops over packed panels feeding a register-tiled micro-kernel written once over the
//! `Simd` trait and instantiated per ISA; split across threads above a FLOP threshold.

pub(crate) mod api;
mod batched;
pub(crate) mod blocking;
mod fused;
mod gemv;
mod in_place;
mod kernel;
mod micro;
mod orientation;
mod pack;
mod peak;
mod small;
mod store;
mod sweep;
mod sweep_order;
pub(crate) mod task;
mod transpose;
mod transpose8;

pub use blocking::{Blocking, CacheSizes, CoreFamily};
pub use peak::{fma_peak_gflops, fma_rate_gflops};

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
/// `run_transposed`) and A streams from memory (past a quarter of L3), or C is at most half its columns wide
/// (`thin_tile`), if not its default. AVX2: 4x16 (4x8 for the narrow C). Reading a large
/// A in place, four row streams beat six: Zen 3 VM, one thread, interleaved against
/// faer, two rounds, 2048x16x2048 (A 16 MiB) 2.63-2.74x with 4x16 against 2.01-2.08x with
/// 6x16, `x·Wᵀ` 64x4096x4096 1.00-1.06x against 0.95-0.98x (4-32 rows within the noise);
/// with A in cache 6x16 wins (1024x64x1024 1.20-1.28x -> 1.46-1.49x, 256x64x256,
/// 512x32x512 and 300x48x300 1.02-1.14x of 4x16). (Until the sweep ran out of line,
/// `kernel::Sweep`, the 6x16 loop that reads A in place kept an accumulator on the stack
/// and ran at half speed, so every thin product took 4x16.) AVX-512's 8x32 beat faer on
/// the Zen 5 VM (1.05-4.5x); other ISAs were not measured.
fn thin_shape(b: Backend) -> Option<(usize, usize)> {
    match b {
        Backend::Avx2 => Some((4, 2)),
        _ => None,
    }
}

/// Whether backend `b`'s default tile reads a one-block A in place (`kernel::a_in_place`)
/// for a product of `n` columns: on AVX2 (those with a thin tile, see `thin_shape`) only
/// where B has fewer than `PACK_A_FROM_COLUMNS` columns; from there A is packed and the
/// packed loop runs. With fewer, each packed panel serves too few tiles to pay for the
/// pass. Zen 3 VM, one thread, interleaved against faer, two rounds, with the sweep out of
/// line (in place first): 120x1024x300 0.87-0.88x -> 0.90x, 60x1000x1000 0.83-0.84x ->
/// 0.86-0.87x, 48x300x300, 64x256x256, 96x512x512 and 32x4096x4096 within 2% either way.
/// (Before the sweep ran out of line, the in-place loop's spilled accumulator made packing
/// worth 1.05-1.30x here.) Below the line, packed: 96^3 0.95-1.03x -> 0.93-0.94x, 120^3
/// 0.85-0.87x -> 0.83-0.84x, 100x100x400 0.82-0.83x -> 0.80x.
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

/// `bl`, or the backend's thin tile where `t` is thin with it and either A streams from
/// memory (more than a quarter of L3 in `c`) or C is at most half the tile's columns wide:
/// then its own block sizes and, for the narrow C, its one-vector-wide kernel.
fn thin_tile(b: Backend, t: &GemmTask, bl: Blocking, c: CacheSizes) -> Blocking {
    let Some(thin) = thin_blocking_for(b) else {
        return bl;
    };
    if !kernel::thin_b(thin.mr, thin.nr, t, thin) {
        return bl;
    }
    let narrow = t.n <= thin.nr / 2 && has_shape(b, thin.mr, 1);
    if !narrow && t.m * t.k * 4 <= c.l3 / 4 {
        return bl;
    }
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
        // whole matrix operand for one use; so, nearly, is a row-major B under a few rows
        // (`small::takes_row_axpys`). (Saturating: on a 32-bit target the count of a
        // product whose operands fit memory can pass usize.)
        GemmPath::Auto => {
            t.m.saturating_mul(t.n).saturating_mul(t.k) <= SMALL_MACS
                || t.m == 1
                || t.n == 1
                || small::takes_row_axpys(t, CacheSizes::detect().l2)
                || small::skips_packing(t, CacheSizes::detect(), (S::LANES, S::MASKED_TAIL))
        }
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
    let (t, bl) = match orientation::run_transposed(t, bl, S::LANES, CoreFamily::detect()) {
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
        false => thin_tile(S::BACKEND, t, bl, CacheSizes::detect()),
    };
    run_packed(s, t, bl);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row-major `m x n` product over `k` with nothing to read (only its shape counts).
    fn task(m: usize, n: usize, k: usize) -> GemmTask<'static> {
        GemmTask::for_test((m, n, k), (&[], k), (&[], n), std::ptr::null_mut())
    }

    #[test]
    fn thin_products_from_memory_take_avx2s_four_row_tile_and_others_keep_the_default() {
        let (avx2, avx512) = (Backend::Avx2, Backend::Avx512);
        let zen3 = CacheSizes {
            l1: 32 << 10,
            l2: 512 << 10,
            l3: 32 << 20,
        };
        let shape = |b, t: &GemmTask| {
            let bl = thin_tile(b, t, blocking_for(b), zen3);
            (bl.mr, bl.nr)
        };
        // A layer's x·Wᵀ after `run_transposed`: 4096 rows of W (64 MiB), 32 or 8 of x.
        assert_eq!(shape(avx2, &task(4096, 32, 4096)), (4, 16));
        assert_eq!(shape(avx2, &task(4096, 8, 4096)), (4, 8), "one vector wide");
        // A within a quarter of L3 (8 MiB) keeps the default tile unless C is narrow.
        assert_eq!(shape(avx2, &task(2048, 16, 2048)), (4, 16), "A 16 MiB");
        assert_eq!(
            shape(avx2, &task(1024, 64, 1024)),
            micro_shape(avx2),
            "A 4 MiB"
        );
        assert_eq!(shape(avx2, &task(1024, 8, 1024)), (4, 8), "narrow");
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
