//! The elementwise and reduction drivers every op body runs through: one loop shape,
//! main body plus padded tail, written once for all ISAs.
//!
//! Closures passed to these drivers are marked `#[inline(always)]`: a closure is compiled
//! as a function of its own, without the target features of the `#[target_feature]`
//! function it is created in, so a large body (exp, tanh) that LLVM declines to inline
//! would turn every intrinsic in it into a call.

use crate::simd::Simd;

/// Placeholder for `each` over slices.
const EMPTY: &[f32] = &[];

/// Vectors handled per main-loop iteration: enough independent work to cover FMA latency.
const UNROLL: usize = 4;

/// Elements per reduction block for an ISA of `lanes` lanes: each of the `UNROLL * lanes`
/// partial sums takes 64 elements per block, then the block's total is flushed to f64. This
/// bounds f32 rounding growth by a constant instead of the input length, the same on every
/// ISA.
pub(crate) const fn block_len(lanes: usize) -> usize {
    64 * UNROLL * lanes
}

/// `dst[i] = f(dst[i], [srcs[0][i], ...])` over `dst.len()` elements.
///
/// Each source must be at least as long as `dst` (callers check lengths and return an
/// error first). Lanes past the end of a partial tail vector are loaded as `pad`, and `f`
/// sees them: an `f` that accumulates must pick a `pad` that is neutral for it.
#[inline(always)]
pub(crate) fn map_n<S: Simd, const N: usize>(
    s: S,
    dst: &mut [f32],
    srcs: [&[f32]; N],
    pad: f32,
    mut f: impl FnMut(S::V, [S::V; N]) -> S::V,
) {
    let n = dst.len();
    let srcs = each(
        srcs,
        EMPTY,
        #[inline(always)]
        |x| &x[..n],
    );
    let l = S::LANES;
    // Peel a partial head vector so that the main loop's stores (and the loads of sources
    // sharing dst's alignment) are vector-aligned: unaligned 64-byte accesses split cache
    // lines, which measured 110 ns against 58 ns for a 1000-element AVX-512 add.
    let mut i = aligned_start::<S>(dst, n);
    if i > 0 {
        let v = f(
            s.load_partial(&dst[..i], pad),
            each(
                srcs,
                s.zero(),
                #[inline(always)]
                |x| s.load_partial(&x[..i], pad),
            ),
        );
        s.store_partial(v, &mut dst[..i]);
    }
    // Main loop over exact chunks: every slice below has a length the compiler knows, so
    // the per-vector bounds checks fold away (one check per chunk and source remains).
    let step = UNROLL * l;
    let main_end = i + (n - i) / step * step;
    for (k, d) in dst[i..main_end].chunks_exact_mut(step).enumerate() {
        let base = i + k * step;
        let xs = each(
            srcs,
            EMPTY,
            #[inline(always)]
            |x| &x[base..base + step],
        );
        for u in 0..UNROLL {
            let o = u * l;
            let v = f(
                s.load(&d[o..o + l]),
                each(
                    xs,
                    s.zero(),
                    #[inline(always)]
                    |x| s.load(&x[o..o + l]),
                ),
            );
            s.store(v, &mut d[o..o + l]);
        }
    }
    i = main_end;
    while i + l <= n {
        let v = f(
            s.load(&dst[i..i + l]),
            each(
                srcs,
                s.zero(),
                #[inline(always)]
                |x| s.load(&x[i..i + l]),
            ),
        );
        s.store(v, &mut dst[i..i + l]);
        i += l;
    }
    if i < n {
        let v = f(
            s.load_partial(&dst[i..], pad),
            each(
                srcs,
                s.zero(),
                #[inline(always)]
                |x| s.load_partial(&x[i..], pad),
            ),
        );
        s.store_partial(v, &mut dst[i..]);
    }
}

/// `dst[i] = f(x[i])` where `x` is `src`, or `dst` itself when `src` is `None` (the
/// in-place form). `pad` as for [`map_n`].
#[inline(always)]
pub(crate) fn map_unary<S: Simd>(
    s: S,
    dst: &mut [f32],
    src: Option<&[f32]>,
    pad: f32,
    mut f: impl FnMut(S::V) -> S::V,
) {
    match src {
        Some(x) => map_n(
            s,
            dst,
            [x],
            pad,
            #[inline(always)]
            |_, [v]| f(v),
        ),
        None => map_n(
            s,
            dst,
            [],
            pad,
            #[inline(always)]
            |v, []| f(v),
        ),
    }
}

/// `[f(xs[0]), f(xs[1]), ...]` as a plain loop. `array::map` can stay out of line, and a
/// closure it calls from there is compiled without the kernel's target features, which
/// turns the intrinsics in it into calls.
#[inline(always)]
fn each<T: Copy, U: Copy, const N: usize>(
    xs: [T; N],
    init: U,
    mut f: impl FnMut(T) -> U,
) -> [U; N] {
    let mut out = [init; N];
    for (o, &x) in out.iter_mut().zip(&xs) {
        *o = f(x);
    }
    out
}

/// Elements before the first vector-aligned element of `x` (at most `n`, and less than one
/// vector).
#[inline(always)]
fn aligned_start<S: Simd>(x: &[f32], n: usize) -> usize {
    if S::LANES == 1 {
        return 0;
    }
    x.as_ptr()
        .align_offset(S::LANES * std::mem::size_of::<f32>())
        .min(n)
}

/// Which source `fold_blocks` peels a head from so that its loads are vector-aligned.
#[derive(Clone, Copy)]
pub(crate) enum Align {
    /// The source at the lowest address: a choice independent of argument order, so that
    /// e.g. dot(a, b) and dot(b, a) split identically and agree bit for bit.
    Lowest,
    /// `srcs[0]`: the one streamed from memory while the others stay in L1 (GEMV's rows of
    /// A against x). Aligned to an x below A in memory instead, every load of A straddled
    /// two lines: 4096^2 on one thread of the Zen 5 VM ran at 40-41 GB/s, 47-52 aligned.
    First,
}

/// A reduction over `srcs` (all of one length) with `K` vector accumulators.
///
/// `step` folds one vector of each source into the accumulators; `combine` merges two
/// accumulator sets (the main loop keeps `UNROLL` of them for instruction-level
/// parallelism); `flush(start, end, acc)` receives each block's range and merged
/// accumulators. The first block also holds a partial head vector that aligns the loads of
/// the source `align` names. Partial lanes are loaded as `pad`, which must be neutral for
/// `step`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn fold_blocks<S: Simd, const K: usize, const N: usize>(
    s: S,
    srcs: [&[f32]; N],
    align: Align,
    pad: f32,
    init: [S::V; K],
    step: impl Fn(&mut [S::V; K], [S::V; N]),
    combine: impl Fn([S::V; K], [S::V; K]) -> [S::V; K],
    mut flush: impl FnMut(usize, usize, [S::V; K]),
) {
    let n = srcs.first().map_or(0, |x| x.len());
    let srcs = each(
        srcs,
        EMPTY,
        #[inline(always)]
        |x| &x[..n],
    );
    let l = S::LANES;
    let aligned = match align {
        Align::Lowest => srcs.iter().min_by_key(|x| x.as_ptr() as usize),
        Align::First => srcs.first(),
    };
    let head = aligned.map_or(0, |x| aligned_start::<S>(x, n));
    let mut start = 0;
    while start < n {
        let mut acc = [init; UNROLL];
        let mut i = start;
        if start == 0 && head > 0 {
            step(
                &mut acc[0],
                each(
                    srcs,
                    s.zero(),
                    #[inline(always)]
                    |x| s.load_partial(&x[..head], pad),
                ),
            );
            i = head;
        }
        let end = (i + block_len(l)).min(n);
        let chunk = UNROLL * l;
        while i + chunk <= end {
            // A slice of known length per source: the loads below need no bounds checks.
            let xs = each(
                srcs,
                EMPTY,
                #[inline(always)]
                |x| &x[i..i + chunk],
            );
            for (u, a) in acc.iter_mut().enumerate() {
                let o = u * l;
                step(
                    a,
                    each(
                        xs,
                        s.zero(),
                        #[inline(always)]
                        |x| s.load(&x[o..o + l]),
                    ),
                );
            }
            i += chunk;
        }
        while i + l <= end {
            step(
                &mut acc[0],
                each(
                    srcs,
                    s.zero(),
                    #[inline(always)]
                    |x| s.load(&x[i..i + l]),
                ),
            );
            i += l;
        }
        if i < end {
            step(
                &mut acc[0],
                each(
                    srcs,
                    s.zero(),
                    #[inline(always)]
                    |x| s.load_partial(&x[i..end], pad),
                ),
            );
        }
        let merged = combine(combine(acc[0], acc[1]), combine(acc[2], acc[3]));
        flush(start, end, merged);
        start = end;
    }
}
