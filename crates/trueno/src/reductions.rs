//! Reductions, similarity measures, normalisation and softmax on [`Engine`].

use crate::backend::OpClass;
use crate::engine::{Engine, route_gpu};
use crate::error::{Result, check_len, check_nonempty};
#[cfg(feature = "gpu")]
use crate::gpu::{
    Workload::{Reduction as ON_GPU, Transcendental as ON_GPU_EXP},
    run::{self, Reduce2Op as G2, ReduceOp as G1},
};
use crate::ops::{Reduce2Op, ReduceOp, UnaryOp};
use crate::parallel;
#[cfg(feature = "gpu")]
use trueno_wgpu::VectorOp;

impl Engine {
    /// Sum of `x` (0 for empty input). Blocked summation with an f64 total: the error is at
    /// most `(64 + log2(4 * lanes) + 1) * 2^-24 * sum|x_i|` (at most 4.3e-6 relative to
    /// `sum|x_i|`), independent of the length (see `ops::reduce` for the order).
    ///
    /// The split into partial sums starts at the first vector-aligned element, so the same
    /// values at a different address (or on another ISA) may round differently in the last
    /// bits, always within that bound.
    pub fn sum(&self, x: &[f32]) -> Result<f32> {
        route_gpu!(self, ON_GPU, x.len(), x.len(), |g| self
            .gpu_scalar("sum", run::reduce(g, G1::Sum, x)));
        self.checked_scalar("sum", self.reduce(ReduceOp::Sum, x) as f32)
    }

    /// Dot product (0 for empty input), with the error bound of [`Engine::sum`] on the
    /// products.
    pub fn dot(&self, a: &[f32], b: &[f32]) -> Result<f32> {
        check_len("dot", "b", a.len(), b.len())?;
        route_gpu!(self, ON_GPU, a.len(), a.len(), |g| self
            .gpu_scalar("dot", run::reduce2(g, G2::Dot, a, b)));
        let d = self.reduce2("dot", Reduce2Op::Dot, a, b)?;
        self.checked_scalar("dot", d as f32)
    }

    /// Largest element; NaN if any element is NaN. Error on empty input.
    pub fn max(&self, x: &[f32]) -> Result<f32> {
        check_nonempty("max", x.len())?;
        route_gpu!(self, ON_GPU, x.len(), x.len(), |g| self
            .gpu_scalar("max", run::reduce(g, G1::Max, x)));
        self.checked_scalar("max", self.reduce(ReduceOp::Max, x) as f32)
    }

    /// Smallest element; NaN if any element is NaN. Error on empty input.
    pub fn min(&self, x: &[f32]) -> Result<f32> {
        check_nonempty("min", x.len())?;
        route_gpu!(self, ON_GPU, x.len(), x.len(), |g| self
            .gpu_scalar("min", run::reduce(g, G1::Min, x)));
        self.checked_scalar("min", self.reduce(ReduceOp::Min, x) as f32)
    }

    /// Index of the first largest element (of the first NaN, if any). Error on empty input.
    pub fn argmax(&self, x: &[f32]) -> Result<usize> {
        check_nonempty("argmax", x.len())?;
        route_gpu!(self, ON_GPU, x.len(), x.len(), |g| run::arg_extreme(
            g, x, true
        ));
        Ok(self.arg_extreme(x, true))
    }

    /// Index of the first smallest element (of the first NaN, if any). Error on empty input.
    pub fn argmin(&self, x: &[f32]) -> Result<usize> {
        check_nonempty("argmin", x.len())?;
        route_gpu!(self, ON_GPU, x.len(), x.len(), |g| run::arg_extreme(
            g, x, false
        ));
        Ok(self.arg_extreme(x, false))
    }

    /// argmax / argmin of non-empty `x`; above the threshold, per-thread chunks are reduced
    /// in order, so the first of equal extremes (or the first NaN) still wins.
    fn arg_extreme(&self, x: &[f32], is_max: bool) -> usize {
        let k = self.k(OpClass::Reduction);
        let Some(chunk) = parallel::chunk_for(OpClass::Reduction, x.len()) else {
            return k.arg_extreme(x, is_max);
        };
        let best = parallel::map_chunks(x, chunk, |offset, c| {
            let i = offset + k.arg_extreme(c, is_max);
            (i, x[i])
        });
        let mut winner = best[0];
        for &(i, v) in &best[1..] {
            if winner.1.is_nan() {
                break;
            }
            if v.is_nan() || (is_max && v > winner.1) || (!is_max && v < winner.1) {
                winner = (i, v);
            }
        }
        winner.0
    }

    /// Arithmetic mean. Error on empty input.
    pub fn mean(&self, x: &[f32]) -> Result<f32> {
        check_nonempty("mean", x.len())?;
        route_gpu!(self, ON_GPU, x.len(), x.len(), |g| self
            .gpu_scalar("mean", run::reduce(g, G1::Mean, x)));
        self.checked_scalar(
            "mean",
            (self.reduce(ReduceOp::Sum, x) / x.len() as f64) as f32,
        )
    }

    /// Population variance (divides by n, numpy's default `ddof=0`), two passes: the mean,
    /// then the mean squared deviation from it. Error on empty input.
    pub fn variance(&self, x: &[f32]) -> Result<f32> {
        check_nonempty("variance", x.len())?;
        route_gpu!(self, ON_GPU, x.len(), x.len(), |g| self
            .gpu_scalar("variance", run::reduce(g, G1::Variance, x)));
        let mean = (self.reduce(ReduceOp::Sum, x) / x.len() as f64) as f32;
        let ss = self.reduce(ReduceOp::SumSqDev(mean), x);
        self.checked_scalar("variance", (ss / x.len() as f64) as f32)
    }

    /// Population standard deviation, `sqrt(variance)`. Error on empty input.
    pub fn stddev(&self, x: &[f32]) -> Result<f32> {
        let v = self.variance(x)?;
        self.checked_scalar("stddev", v.sqrt())
    }

    /// `sum |x_i|` (0 for empty input).
    pub fn norm_l1(&self, x: &[f32]) -> Result<f32> {
        route_gpu!(self, ON_GPU, x.len(), x.len(), |g| self
            .gpu_scalar("norm_l1", run::reduce(g, G1::NormL1, x)));
        self.checked_scalar("norm_l1", self.reduce(ReduceOp::SumAbs, x) as f32)
    }

    /// Euclidean norm `sqrt(sum x_i^2)` (0 for empty input). Squares are summed in f32
    /// blocks; when that overflows or underflows, the input is rescaled by its largest
    /// magnitude and summed again, so the result is finite whenever the true norm is.
    pub fn norm_l2(&self, x: &[f32]) -> Result<f32> {
        route_gpu!(self, ON_GPU, x.len(), x.len(), |g| self
            .gpu_scalar("norm_l2", run::reduce(g, G1::NormL2, x)));
        self.checked_scalar("norm_l2", self.l2(x))
    }

    fn l2(&self, x: &[f32]) -> f32 {
        if x.is_empty() {
            return 0.0;
        }
        let ss = self.reduce(ReduceOp::SumSq, x);
        if ss.is_finite() && ss > 1e-30 {
            return ss.sqrt() as f32;
        }
        // Squares overflowed (or an element is inf/NaN), or they may have underflowed.
        let big = self.reduce(ReduceOp::MaxAbs, x);
        if big == 0.0 || !big.is_finite() {
            return big as f32; // 0, +inf or NaN: already the answer
        }
        let mut scaled = vec![0.0f32; x.len()];
        let k = self.k(OpClass::Elementwise);
        k.unary(UnaryOp::Scale((1.0 / big) as f32), &mut scaled, Some(x));
        let ss = self.reduce(ReduceOp::SumSq, &scaled);
        (ss.sqrt() * big) as f32
    }

    /// Largest magnitude `max |x_i|` (0 for empty input); NaN if any element is NaN.
    pub fn norm_linf(&self, x: &[f32]) -> Result<f32> {
        if x.is_empty() {
            return Ok(0.0);
        }
        route_gpu!(self, ON_GPU, x.len(), x.len(), |g| self
            .gpu_scalar("norm_linf", run::reduce(g, G1::NormLinf, x)));
        self.checked_scalar("norm_linf", self.reduce(ReduceOp::MaxAbs, x) as f32)
    }

    /// Cosine similarity `a·b / (|a| |b|)`, clamped to [-1, 1]; 0 when either vector is
    /// zero (as PyTorch's eps-guarded form gives). Error on empty input.
    pub fn cosine(&self, a: &[f32], b: &[f32]) -> Result<f32> {
        check_len("cosine", "b", a.len(), b.len())?;
        check_nonempty("cosine", a.len())?;
        route_gpu!(self, ON_GPU, a.len(), a.len(), |g| self
            .gpu_scalar("cosine", run::reduce2(g, G2::Cosine, a, b)));
        let [ab, aa, bb] = self.k(OpClass::Reduction).dot_norms(a, b);
        let c = if aa == 0.0 || bb == 0.0 {
            0.0
        } else {
            (ab / (aa.sqrt() * bb.sqrt())).clamp(-1.0, 1.0)
        };
        self.checked_scalar("cosine", c as f32)
    }

    /// Euclidean distance `|a - b|_2` (0 for empty input).
    pub fn euclidean(&self, a: &[f32], b: &[f32]) -> Result<f32> {
        check_len("euclidean", "b", a.len(), b.len())?;
        route_gpu!(self, ON_GPU, a.len(), a.len(), |g| self
            .gpu_scalar("euclidean", run::reduce2(g, G2::Euclidean, a, b)));
        let d = self.reduce2("euclidean", Reduce2Op::SqDist, a, b)?;
        self.checked_scalar("euclidean", d.sqrt() as f32)
    }

    /// Manhattan distance `|a - b|_1` (0 for empty input).
    pub fn manhattan(&self, a: &[f32], b: &[f32]) -> Result<f32> {
        check_len("manhattan", "b", a.len(), b.len())?;
        route_gpu!(self, ON_GPU, a.len(), a.len(), |g| self
            .gpu_scalar("manhattan", run::reduce2(g, G2::Manhattan, a, b)));
        let d = self.reduce2("manhattan", Reduce2Op::AbsDist, a, b)?;
        self.checked_scalar("manhattan", d as f32)
    }

    /// `x / |x|_2` into `out`. A zero vector stays zero (as `torch.nn.functional.normalize`).
    pub fn normalize_into(&self, x: &[f32], out: &mut [f32]) -> Result<()> {
        check_len("normalize", "out", x.len(), out.len())?;
        out.copy_from_slice(x);
        self.normalize_inplace(out)
    }

    /// In-place form of [`Engine::normalize_into`].
    pub fn normalize_inplace(&self, x: &mut [f32]) -> Result<()> {
        route_gpu!(self, ON_GPU, x.len(), x.len(), |g| run::vector(
            g,
            VectorOp::Normalize,
            x,
            None
        )
        .and_then(|_| self.checked("normalize", x)));
        let n = self.l2(x) as f64;
        if n == 0.0 {
            return Ok(());
        }
        let mut inv = 1.0 / n;
        if !(inv as f32).is_finite() {
            // |x| is subnormal: lift it first so that 1/|x| is representable.
            self.scale_inplace(x, 2f32.powi(64))?;
            inv /= 2f64.powi(64);
        }
        self.scale_inplace(x, inv as f32)?;
        self.checked("normalize", x)
    }

    /// Softmax `e^(x_i - max) / sum_j e^(x_j - max)` into `out`. Error on empty input; a
    /// NaN input makes every output NaN.
    pub fn softmax_into(&self, x: &[f32], out: &mut [f32]) -> Result<()> {
        check_len("softmax", "out", x.len(), out.len())?;
        check_nonempty("softmax", x.len())?;
        route_gpu!(self, ON_GPU_EXP, x.len(), x.len(), |g| run::vector(
            g,
            VectorOp::Softmax,
            out,
            Some(x)
        )
        .and_then(|_| self.checked("softmax", out)));
        self.softmax_impl(out, Some(x));
        self.checked("softmax", out)
    }

    /// In-place form of [`Engine::softmax_into`].
    pub fn softmax_inplace(&self, x: &mut [f32]) -> Result<()> {
        check_nonempty("softmax", x.len())?;
        route_gpu!(self, ON_GPU_EXP, x.len(), x.len(), |g| run::vector(
            g,
            VectorOp::Softmax,
            x,
            None
        )
        .and_then(|_| self.checked("softmax", x)));
        self.softmax_impl(x, None);
        self.checked("softmax", x)
    }

    /// Log-softmax `x_i - max - ln(sum_j e^(x_j - max))` into `out`. Error on empty input.
    pub fn log_softmax_into(&self, x: &[f32], out: &mut [f32]) -> Result<()> {
        check_len("log_softmax", "out", x.len(), out.len())?;
        check_nonempty("log_softmax", x.len())?;
        route_gpu!(self, ON_GPU_EXP, x.len(), x.len(), |g| run::vector(
            g,
            VectorOp::LogSoftmax,
            out,
            Some(x)
        )
        .and_then(|_| self.checked("log_softmax", out)));
        self.log_softmax_impl(out, Some(x));
        self.checked("log_softmax", out)
    }

    /// In-place form of [`Engine::log_softmax_into`].
    pub fn log_softmax_inplace(&self, x: &mut [f32]) -> Result<()> {
        check_nonempty("log_softmax", x.len())?;
        route_gpu!(self, ON_GPU_EXP, x.len(), x.len(), |g| run::vector(
            g,
            VectorOp::LogSoftmax,
            x,
            None
        )
        .and_then(|_| self.checked("log_softmax", x)));
        self.log_softmax_impl(x, None);
        self.checked("log_softmax", x)
    }

    /// A GPU scalar result, through the guard.
    #[cfg(feature = "gpu")]
    fn gpu_scalar(&self, op: &'static str, v: Result<f32>) -> Result<f32> {
        v.and_then(|v| self.checked_scalar(op, v))
    }

    /// One fused kernel call for short inputs; from the elementwise threshold (512K) the
    /// three passes (max, exp with partial sums, scale) each run split across threads. Three
    /// synchronisations do not pay earlier: a 100K softmax measured 85 us fused and 105 us
    /// split; a 1M one 1.03 ms fused and 0.56 ms split (2 vCPUs, 2026-11-22).
    fn softmax_impl(&self, dst: &mut [f32], src: Option<&[f32]>) {
        let k = self.k(OpClass::Transcendental);
        let Some(chunk) = parallel::chunk_for(OpClass::Elementwise, dst.len()) else {
            return k.softmax(dst, src);
        };
        let m = self.reduce(ReduceOp::Max, src.unwrap_or(dst)) as f32;
        let parts = parallel::map_chunks_mut(dst, chunk, |o, d| {
            k.exp_shift_sum(d, src.map(|x| &x[o..o + d.len()]), m)
        });
        let inv = (1.0 / parts.iter().sum::<f64>()) as f32;
        let ke = self.k(OpClass::Elementwise);
        self.split(OpClass::Elementwise, dst, |_, d| {
            ke.unary(UnaryOp::Scale(inv), d, None)
        });
    }

    /// As [`Engine::softmax_impl`] (same threshold): max, then the sum of exponentials,
    /// then a shift.
    fn log_softmax_impl(&self, dst: &mut [f32], src: Option<&[f32]>) {
        let k = self.k(OpClass::Transcendental);
        if parallel::chunk_for(OpClass::Elementwise, dst.len()).is_none() {
            return k.log_softmax(dst, src);
        }
        let x = src.unwrap_or(dst);
        let m = self.reduce(ReduceOp::Max, x) as f32;
        let total = self.reduce(ReduceOp::SumExp(m), x);
        let shift = m + total.ln() as f32;
        let ke = self.k(OpClass::Elementwise);
        self.split(OpClass::Elementwise, dst, |o, d| {
            ke.unary(
                UnaryOp::AddScalar(-shift),
                d,
                src.map(|x| &x[o..o + d.len()]),
            )
        });
    }
}
