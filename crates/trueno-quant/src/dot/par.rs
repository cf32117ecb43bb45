//! The one place trueno-quant touches threads: rayon with the `parallel` feature (default),
//! a plain loop without it (wasm32, where there are no threads to start).

/// Threads a parallel split would use.
pub(crate) fn threads() -> usize {
    #[cfg(feature = "parallel")]
    return rayon::current_num_threads();
    #[cfg(not(feature = "parallel"))]
    1
}

/// `f(y chunk, w chunk)` over `y` in chunks of `per` and `w` in chunks of `w_per`.
pub(crate) fn zip_chunks(
    y: &mut [f32],
    per: usize,
    w: &[u8],
    w_per: usize,
    f: impl Fn(&mut [f32], &[u8]) + Sync + Send,
) {
    #[cfg(feature = "parallel")]
    {
        use rayon::prelude::*;
        y.par_chunks_mut(per)
            .zip(w.par_chunks(w_per))
            .for_each(|(yc, wc)| f(yc, wc));
    }
    #[cfg(not(feature = "parallel"))]
    for (yc, wc) in y.chunks_mut(per).zip(w.chunks(w_per)) {
        f(yc, wc);
    }
}

/// `f(chunk index, y chunk)` over `y` in chunks of `per`.
pub(crate) fn indexed_chunks(
    y: &mut [f32],
    per: usize,
    f: impl Fn(usize, &mut [f32]) + Sync + Send,
) {
    #[cfg(feature = "parallel")]
    {
        use rayon::prelude::*;
        y.par_chunks_mut(per)
            .enumerate()
            .for_each(|(i, yc)| f(i, yc));
    }
    #[cfg(not(feature = "parallel"))]
    for (i, yc) in y.chunks_mut(per).enumerate() {
        f(i, yc);
    }
}
