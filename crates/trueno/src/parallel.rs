//! Splitting large inputs across threads (rayon, behind the default `parallel` feature).
//! Without the feature every split is `None` and work runs on the calling thread.

use crate::backend::OpClass;

/// Input length from which work of `class` is split across threads. Measured on a 2-vCPU
/// Sapphire Rapids guest (2026-11-22, `trueno bench` with RAYON_NUM_THREADS=1 and 2): a
/// 100K-element exp ran 1.15x faster split, a 1M-element add 2.1x; a 100K add did not gain.
///
/// For `MatMul` the unit is multiply-adds, not elements: a 128^3 product gained from two
/// threads on that machine, 96^3 did not.
#[cfg(feature = "parallel")]
fn threshold(class: OpClass) -> usize {
    match class {
        OpClass::Transcendental => 1 << 15,
        OpClass::MatMul => 128 * 128 * 128,
        _ => 1 << 19,
    }
}

/// Threads trueno uses for `work` units of `class` (elements, or multiply-adds for
/// `MatMul`): all of rayon's pool from the class's threshold, else one.
pub(crate) fn threads_for(class: OpClass, work: usize) -> usize {
    #[cfg(feature = "parallel")]
    return threads_from(work, threshold(class));
    #[cfg(not(feature = "parallel"))]
    {
        let _ = (class, work);
        1
    }
}

/// All of rayon's pool from `min` units of work, else one thread (for an op with a
/// threshold of its own).
pub(crate) fn threads_from(work: usize, min: usize) -> usize {
    #[cfg(feature = "parallel")]
    if work >= min {
        return rayon::current_num_threads();
    }
    let _ = (work, min);
    1
}

/// The chunk length to split `len` elements of `class` into, or `None` to stay on one
/// thread. Chunks are whole multiples of 4096 elements so every chunk starts with the
/// alignment of the input.
pub(crate) fn chunk_for(class: OpClass, len: usize) -> Option<usize> {
    #[cfg(feature = "parallel")]
    {
        // Length first: asking rayon for its thread count costs a registry lookup.
        let threads = if len >= threshold(class) {
            rayon::current_num_threads()
        } else {
            1
        };
        if threads > 1 {
            // Reductions combine one partial per chunk; elementwise work balances better
            // with a few chunks per thread.
            let parts = if class == OpClass::Reduction {
                threads
            } else {
                threads * 4
            };
            return Some(len.div_ceil(parts).next_multiple_of(4096));
        }
    }
    let _ = (class, len);
    None
}

/// `f(offset, chunk)` for consecutive `chunk`-long pieces of `x`, in parallel where the
/// feature is on; the results come back in input order.
pub(crate) fn map_chunks<T: Send>(
    x: &[f32],
    chunk: usize,
    f: impl Fn(usize, &[f32]) -> T + Sync + Send,
) -> Vec<T> {
    #[cfg(feature = "parallel")]
    {
        use rayon::prelude::*;
        x.par_chunks(chunk)
            .enumerate()
            .map(|(i, c)| f(i * chunk, c))
            .collect()
    }
    #[cfg(not(feature = "parallel"))]
    {
        x.chunks(chunk)
            .enumerate()
            .map(|(i, c)| f(i * chunk, c))
            .collect()
    }
}

/// `f(offset, chunk)` for consecutive `chunk`-long pieces of `dst`, in parallel where the
/// feature is on; the results come back in input order.
pub(crate) fn map_chunks_mut<T: Send>(
    dst: &mut [f32],
    chunk: usize,
    f: impl Fn(usize, &mut [f32]) -> T + Sync + Send,
) -> Vec<T> {
    #[cfg(feature = "parallel")]
    {
        use rayon::prelude::*;
        dst.par_chunks_mut(chunk)
            .enumerate()
            .map(|(i, d)| f(i * chunk, d))
            .collect()
    }
    #[cfg(not(feature = "parallel"))]
    {
        dst.chunks_mut(chunk)
            .enumerate()
            .map(|(i, d)| f(i * chunk, d))
            .collect()
    }
}
