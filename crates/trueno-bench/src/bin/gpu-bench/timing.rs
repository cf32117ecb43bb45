//! How gpu-bench times a call: one call at a time between event pairs (the host's
//! launch included), queued back to back behind a hold (GPU time), and captured in a
//! CUDA graph (what a caller that records a step once and replays it pays, as the peer
//! script times PyTorch).

use std::time::{Duration, Instant};

use trueno_gpu::driver::{Recording, Stream};
use trueno_gpu::{MAX_HOLD, Result};

use super::Bench;

fn median(mut v: Vec<f32>) -> f64 {
    v.sort_by(f32::total_cmp);
    v[v.len() / 2] as f64
}

impl Bench {
    /// The most batches of queued calls [`time`](Self::time) takes the median of, and
    /// the GPU milliseconds after which it stops adding batches.
    const QUEUED_BATCHES: usize = 5;
    const QUEUED_MS: f32 = 50.0;

    /// Median milliseconds of `run(set)` over `reps` runs after `warm` warm-ups.
    pub(super) fn time<'a>(
        &self,
        sets: usize,
        mut run: impl FnMut(&mut Stream<Recording<'a>>, usize) -> Result<()>,
    ) -> Result<f64> {
        let (warm, reps) = if self.quick { (2, 5) } else { (5, 30) };
        let mut s = self.ctx.stream()?.record();
        // As many warm-up calls as a timed loop makes: the scratch they allocate (split
        // GEMMs, decode attention) returns to the pool at the sync, so the timed loops
        // reuse it instead of waiting on the driver's allocator.
        for i in 0..warm + reps {
            run(&mut s, i % sets)?;
        }
        let mut s = s.sync()?.record();
        let mut times = Vec::with_capacity(reps);
        for i in 0..reps {
            let a = s.record_event()?;
            run(&mut s, i % sets)?;
            let b = s.record_event()?;
            times.push(a.elapsed_ms(&b)?);
        }
        // GPU time: batches of `reps` calls queued behind a hold (`Stream::hold`), so
        // they run back to back even where the host launches a call slower than the GPU
        // runs it (queued without the hold, a 1024^3 bf16 GEMM measured 7.6 to 13.1 µs a
        // call between sections of one run); the median batch, up to `QUEUED_BATCHES` of
        // them or `QUEUED_MS` of GPU time in all.
        let mut batches = Vec::with_capacity(Self::QUEUED_BATCHES);
        let mut spent = 0.0;
        let mut hold = Duration::from_micros(50 * reps as u64);
        while batches.len() < Self::QUEUED_BATCHES && spent < Self::QUEUED_MS {
            s = s.sync()?.record();
            s.hold(hold)?;
            let issue = Instant::now();
            let a = s.record_event()?;
            for i in 0..reps {
                run(&mut s, i % sets)?;
            }
            let b = s.record_event()?;
            // The next hold outlasts this batch's launches twice over.
            hold = (issue.elapsed() * 2).clamp(Duration::from_micros(100), MAX_HOLD);
            let ms = a.elapsed_ms(&b)?;
            spent += ms;
            batches.push(ms / reps as f32);
        }
        self.queued.set(median(batches));
        s.sync()?;
        Ok(median(times))
    }

    /// Milliseconds a call of `run(set)`, from a graph of `copies` calls (sets `i % sets`
    /// in turn) replayed: the median of the replays, each between its own events,
    /// divided by `copies`, as the peer script's `graph_ms` times PyTorch.
    pub(super) fn graph_ms<'a>(
        &self,
        (sets, copies): (usize, usize),
        mut run: impl FnMut(&mut Stream<Recording<'a>>, usize) -> Result<()>,
    ) -> Result<f64> {
        let (warm, reps) = if self.quick { (2, 5) } else { (5, 30) };
        let mut s = self.ctx.stream()?;
        let graph = s.capture(|s| (0..copies).try_for_each(|i| run(s, i % sets)))?;
        let mut times = Vec::with_capacity(reps);
        for i in 0..warm + reps {
            let mut r = s.record();
            let a = r.record_event()?;
            graph.launch(&mut r)?;
            let b = r.record_event()?;
            s = r.sync()?;
            if i >= warm {
                times.push(a.elapsed_ms(&b)? / copies as f32);
            }
        }
        Ok(median(times))
    }
}
