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
    (Avx2, 6, 2, [(6, 2), (4, 3), (8, 1)]),
    (Avx, 6, 2, [(6, 2)]),
    (Sse2, 6, 2, [(6, 2), (4, 3)]),
    // 32 vector registers: 16 accumulators, two B vectors and A broadcasts by lane.
    (Neon, 8, 2, [(8, 2), (6, 2), (4, 4)]),
    // Engines map SIMD128 onto 16 x86 / 32 ARM registers: the SSE2 shape.
    (WasmSimd128, 6, 2, [(6, 2), (4, 3)]),
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
    // Worked out once per backend: every GEMM call asks, and at 64^3 (2 µs) working it
    // out again each time cost about 1% of the call.
    const N: usize = Backend::ALL.len();
    static BY_BACKEND: [std::sync::OnceLock<Blocking>; N] =
        [const { std::sync::OnceLock::new() }; N];
    match BY_BACKEND.get(b as usize) {
        Some(cell) => *cell.get_or_init(|| blocking_uncached(b)),
        None => blocking_uncached(b),
    }
}

fn blocking_uncached(b: Backend) -> Blocking {
    let (mr, nr) = micro_shape(b);
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
    run_packed(s, t, bl);
}

/// Whether to run a thin product with B transposed as `Cᵀ = op(B)ᵀ op(A)ᵀ`: the weight
/// layout of a linear layer (`x Wᵀ`, W stored out x in), where B is the big operand and
/// packing it means transposing it. Swapped, B is read in place, eight rows a micro-tile
/// as the broadcast operand along k, and the few rows of A are packed instead.
fn run_transposed(t: &GemmTask, bl: Blocking) -> bool {
    t.tb && t.m >= 2 && t.m <= 4 * bl.nr && t.n > t.m
}
