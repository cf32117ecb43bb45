//! Timing captured work: what a caller that records a step once and replays it pays,
//! measured the way the peer script times PyTorch in a CUDA graph.

use trueno_gpu::Result;
use trueno_gpu::driver::{Recording, Stream};

use super::{Bench, median};

impl Bench {
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
