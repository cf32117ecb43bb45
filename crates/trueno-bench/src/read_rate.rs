//! A read of a row-major matrix with several streams in flight: the read ceiling the
//! GEMV's share is measured against, beside `Engine::sum`'s one stream.
//!
//! Why: one core's hardware prefetchers serve several interleaved streams faster than
//! one, on some machines by far (the Zen 3 VM of sessions 43-44: one stream 8-12 GB/s,
//! several interleaved 16-21), and a GEMV reads its rows several at a time. Against one
//! stream the GEMV read 125-147% of "the read bandwidth", which said nothing about how
//! close to the machine it runs.

use rayon::prelude::*;

/// Rows read side by side.
pub const STREAMS: usize = 8;
/// Floats of a row each step takes (one SSE2 register: the read rate, not the adds,
/// is what this measures).
const LANES: usize = 4;

/// The sum of the row-major `[rows, cols]` matrix `a` (`a.len()` a multiple of `cols`),
/// read [`STREAMS`] rows at a time with their elements in lockstep; rows past the last
/// whole group one after another.
pub fn sum_rows_interleaved(a: &[f32], cols: usize) -> f32 {
    if cols == 0 {
        return 0.0;
    }
    let mut groups = a.chunks_exact(STREAMS * cols);
    let mut total = 0.0f32;
    for group in groups.by_ref() {
        let rows: [&[f32]; STREAMS] = std::array::from_fn(|r| &group[r * cols..(r + 1) * cols]);
        let mut acc = [[0.0f32; LANES]; STREAMS];
        let mut steps: [_; STREAMS] = rows.map(|row| row.chunks_exact(LANES));
        for _ in 0..cols / LANES {
            for (acc, step) in acc.iter_mut().zip(steps.iter_mut()) {
                if let Some(x) = step.next() {
                    for (a, &x) in acc.iter_mut().zip(x) {
                        *a += x;
                    }
                }
            }
        }
        let tails: f32 = steps
            .iter()
            .map(|s| s.remainder().iter().sum::<f32>())
            .sum();
        total += acc.iter().flatten().sum::<f32>() + tails;
    }
    total + groups.remainder().iter().sum::<f32>()
}

/// [`sum_rows_interleaved`] with the rows split between rayon's threads (whole groups of
/// [`STREAMS`] rows each, as evenly as they go).
pub fn sum_rows_interleaved_par(a: &[f32], cols: usize) -> f32 {
    if cols == 0 || a.is_empty() {
        return 0.0;
    }
    let rows = a.len() / cols;
    let groups = rows.div_ceil(STREAMS);
    let per_thread = groups.div_ceil(rayon::current_num_threads()).max(1);
    a.par_chunks(per_thread * STREAMS * cols)
        .map(|part| sum_rows_interleaved(part, cols))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values exact in f32 and small enough that any order of adds gives the f64 sum.
    fn matrix(rows: usize, cols: usize) -> Vec<f32> {
        (0..rows * cols)
            .map(|i| ((i * 7 + 3) % 13) as f32 - 6.0)
            .collect()
    }

    #[test]
    fn the_interleaved_read_sums_every_element_once() {
        for (rows, cols) in [
            (0, 5),
            (1, 1),
            (7, 3),
            (8, 4),
            (9, 5),
            (17, 33),
            (64, 64),
            (3, 0),
        ] {
            let a = matrix(rows, cols);
            let want: f64 = a.iter().map(|&v| f64::from(v)).sum();
            assert_eq!(
                f64::from(sum_rows_interleaved(&a, cols)),
                want,
                "{rows}x{cols}"
            );
            assert_eq!(
                f64::from(sum_rows_interleaved_par(&a, cols)),
                want,
                "{rows}x{cols}"
            );
        }
    }
}
