//! Where the GPU starts to win: each kind of work timed on the CPU engine and through the
//! GPU route (host slices in and out, as the engine runs it) at growing sizes, and the
//! size from which the GPU stays faster kept as the threshold.

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, Instant};

use super::run;
use crate::engine::Engine;
use crate::error::{Result, TruenoError};
use crate::gemm::api::Transpose;
use crate::matrix::{MatMut, MatRef};
use crate::ops::{BinaryOp, UnaryOp};

/// Environment variable that pins the crossover instead of measuring it, in the form
/// [`Crossover`]'s `Display` writes: `elementwise=never,matmul=134217728,...`.
pub const CROSSOVER_ENV: &str = "TRUENO_GPU_CROSSOVER";

/// The kinds of work routed separately, each measured with one representative op.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Workload {
    /// Cheap elementwise ops (add, scale, relu, ...): measured with `add`. Work = elements.
    Elementwise,
    /// Transcendental elementwise ops and softmax: measured with `tanh`. Work = elements.
    Transcendental,
    /// Reductions and similarity measures: measured with `sum`. Work = elements.
    Reduction,
    /// GEMM with both output dimensions above 1: measured with square products. Work =
    /// multiply-adds (`m * n * k`).
    MatMul,
    /// Matrix-vector products: measured with square matrices. Work = multiply-adds (`m * k`).
    Gemv,
}

impl Workload {
    /// Every workload, in table order.
    pub const ALL: [Workload; 5] = [
        Workload::Elementwise,
        Workload::Transcendental,
        Workload::Reduction,
        Workload::MatMul,
        Workload::Gemv,
    ];

    /// The key in `TRUENO_GPU_CROSSOVER` and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Elementwise => "elementwise",
            Workload::Transcendental => "transcendental",
            Workload::Reduction => "reduction",
            Workload::MatMul => "matmul",
            Workload::Gemv => "gemv",
        }
    }

    /// The sizes tried, smallest first: vector lengths, or the side of the square matrix.
    fn ladder(self) -> &'static [usize] {
        match self {
            Workload::Elementwise | Workload::Transcendental | Workload::Reduction => &[
                1 << 14,
                1 << 16,
                1 << 18,
                1 << 20,
                1 << 22,
                1 << 24,
                1 << 26,
            ],
            Workload::MatMul => &[64, 128, 256, 512, 1024, 2048, 4096],
            Workload::Gemv => &[256, 512, 1024, 2048, 4096, 8192],
        }
    }

    /// Work units of one ladder size.
    fn work(self, size: usize) -> usize {
        match self {
            Workload::MatMul => size * size * size,
            Workload::Gemv => size * size,
            _ => size,
        }
    }

    /// The least work a measurement can route: below it nothing is measured or opened.
    pub(crate) fn smallest_probe(self) -> usize {
        self.work(self.ladder()[0])
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The smallest work (in [`Workload`] units) from which each workload runs on the GPU, or
/// never.
///
/// ```
/// use trueno::gpu::{Crossover, Workload};
/// let c: Crossover = "matmul=1000000,gemv=never".parse()?;
/// assert!(c.routes(Workload::MatMul, 1 << 20));
/// assert!(!c.routes(Workload::MatMul, 999_999));
/// assert!(!c.routes(Workload::Elementwise, usize::MAX), "unnamed workloads stay on the CPU");
/// assert_eq!(c.to_string().parse::<Crossover>()?, c);
/// # Ok::<(), trueno::TruenoError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Crossover {
    thresholds: [Option<usize>; Workload::ALL.len()],
}

/// One measured point: a workload at one size on both sides.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CrossoverSample {
    /// What was measured.
    pub workload: Workload,
    /// Vector length, or side of the square matrix.
    pub size: usize,
    /// Work units ([`Workload`]) of that size.
    pub work: usize,
    /// Best of three runs on the CPU engine.
    pub cpu: Duration,
    /// Best of three runs through the GPU route, transfers included.
    pub gpu: Duration,
}

/// What [`Crossover::measure`] found: the thresholds and every point behind them.
#[derive(Debug, Clone, PartialEq)]
pub struct CrossoverReport {
    /// The thresholds.
    pub crossover: Crossover,
    /// Every size measured, per workload in [`Workload::ALL`] order, smallest first.
    pub samples: Vec<CrossoverSample>,
}

/// A ladder stops before a size whose predicted time (this size's slower side times the
/// growth to the next) would pass this: the whole measurement took about 1.5 s of timed
/// runs on an H100 machine and 2.5 s on lavapipe.
const STEP_BUDGET: Duration = Duration::from_millis(120);

impl Crossover {
    /// Everything on the CPU.
    pub fn never() -> Crossover {
        Crossover {
            thresholds: [None; Workload::ALL.len()],
        }
    }

    /// The smallest work of `w` that runs on the GPU, or `None` for never.
    pub fn threshold(&self, w: Workload) -> Option<usize> {
        self.thresholds[w.index()]
    }

    /// Whether `work` units of `w` run on the GPU.
    pub fn routes(&self, w: Workload, work: usize) -> bool {
        self.threshold(w).is_some_and(|t| work >= t)
    }

    /// Reads `TRUENO_GPU_CROSSOVER`: `None` when unset or empty.
    pub fn from_env() -> Result<Option<Crossover>> {
        match std::env::var(CROSSOVER_ENV) {
            Ok(v) if !v.trim().is_empty() => v.parse().map(Some),
            _ => Ok(None),
        }
    }

    /// Times each workload on `cpu` and through the GPU route on `gpu` at growing sizes (best
    /// of three after a warm-up that also compiles the shader), until a step would take
    /// more than about 120 ms. A workload's threshold is the smallest size from which the GPU
    /// was faster at every larger size measured; never if it lost at the largest.
    ///
    /// ```no_run
    /// let report = trueno::gpu::Crossover::measure(trueno::gpu::shared()?, &trueno::Engine::auto())?;
    /// println!("TRUENO_GPU_CROSSOVER={}", report.crossover);
    /// # Ok::<(), trueno::TruenoError>(())
    /// ```
    pub fn measure(gpu: &super::Gpu, cpu: &Engine) -> Result<CrossoverReport> {
        let mut crossover = Crossover::never();
        let mut samples = Vec::new();
        for w in Workload::ALL {
            let first = samples.len();
            for (step, &size) in w.ladder().iter().enumerate() {
                let (c, g) = time_both(w, size, gpu, cpu)?;
                samples.push(CrossoverSample {
                    workload: w,
                    size,
                    work: w.work(size),
                    cpu: c,
                    gpu: g,
                });
                let growth = match w.ladder().get(step + 1) {
                    Some(&next) => w.work(next) as f64 / w.work(size) as f64,
                    None => break,
                };
                if c.max(g).mul_f64(growth) > STEP_BUDGET {
                    break;
                }
            }
            crossover.thresholds[w.index()] = threshold_of(&samples[first..]);
        }
        Ok(CrossoverReport { crossover, samples })
    }
}

/// The smallest work from which every sample has the GPU faster.
fn threshold_of(samples: &[CrossoverSample]) -> Option<usize> {
    samples
        .iter()
        .rev()
        .take_while(|s| s.gpu < s.cpu)
        .last()
        .map(|s| s.work)
}

/// Best of three after one warm-up.
fn best_of(mut f: impl FnMut() -> Result<()>) -> Result<Duration> {
    f()?;
    let mut best = Duration::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        f()?;
        best = best.min(t.elapsed());
    }
    Ok(best)
}

/// (CPU, GPU) times of workload `w` at `size`.
fn time_both(
    w: Workload,
    size: usize,
    gpu: &super::Gpu,
    cpu: &Engine,
) -> Result<(Duration, Duration)> {
    let len = match w {
        Workload::MatMul | Workload::Gemv => size * size,
        _ => size,
    };
    // Varied, bounded values (the data does not change the timing of these ops).
    let a: Vec<f32> = (0..len).map(|i| (i % 1013) as f32 / 1013.0 - 0.5).collect();
    let b: Vec<f32> = (0..len).map(|i| (i % 769) as f32 / 769.0 - 0.5).collect();
    let mut out = vec![0.0f32; len];
    match w {
        Workload::Elementwise => Ok((
            best_of(|| cpu.add_into(&a, &b, &mut out))?,
            best_of(|| run::binary(gpu, BinaryOp::Add, &mut out, Some(&a), &b))?,
        )),
        Workload::Transcendental => Ok((
            best_of(|| cpu.tanh_into(&a, &mut out))?,
            best_of(|| run::unary(gpu, UnaryOp::Tanh, &mut out, Some(&a)))?,
        )),
        Workload::Reduction => Ok((
            best_of(|| cpu.sum(&a).map(drop))?,
            best_of(|| run::reduce(gpu, run::ReduceOp::Sum, &a).map(drop))?,
        )),
        Workload::MatMul | Workload::Gemv => {
            let n = size;
            let cols = if w == Workload::MatMul { n } else { 1 };
            let am = MatRef::new(&a, n, n, n)?;
            let bm = MatRef::new(&b[..n * cols], n, cols, cols)?;
            let mut c = vec![0.0f32; n * cols];
            let no = Transpose::No;
            let cpu_t = best_of(|| match w {
                Workload::Gemv => cpu.gemv(1.0, am, &b[..n], 0.0, &mut c),
                _ => cpu.gemm(1.0, am, no, bm, no, 0.0, &mut MatMut::new(&mut c, n, n, n)?),
            })?;
            let gpu_t = best_of(|| {
                let mut cm = MatMut::new(&mut c, n, cols, cols)?;
                run::gemm(gpu, cpu, 1.0, am, no, bm, no, 0.0, &mut cm)
            })?;
            Ok((cpu_t, gpu_t))
        }
    }
}

impl fmt::Display for Crossover {
    /// `elementwise=never,transcendental=never,reduction=never,matmul=134217728,gemv=never`:
    /// the form `TRUENO_GPU_CROSSOVER` takes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, w) in Workload::ALL.into_iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            match self.threshold(w) {
                Some(t) => write!(f, "{sep}{}={t}", w.name())?,
                None => write!(f, "{sep}{}=never", w.name())?,
            }
        }
        Ok(())
    }
}

impl FromStr for Crossover {
    type Err = TruenoError;

    /// Comma-separated `workload=work` or `workload=never`; workloads not named stay on the
    /// CPU. `never` alone is everything on the CPU.
    fn from_str(s: &str) -> Result<Crossover> {
        let bad = |reason: String| TruenoError::InvalidArgument {
            op: CROSSOVER_ENV,
            reason,
        };
        let mut c = Crossover::never();
        let s = s.trim();
        if s.eq_ignore_ascii_case("never") {
            return Ok(c);
        }
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| bad(format!("{part:?} is not workload=size")))?;
            let w = Workload::ALL
                .into_iter()
                .find(|w| w.name().eq_ignore_ascii_case(key.trim()))
                .ok_or_else(|| {
                    bad(format!(
                        "unknown workload {key:?}; expected elementwise, transcendental, \
                         reduction, matmul or gemv"
                    ))
                })?;
            let value = value.trim();
            c.thresholds[w.index()] = if value.eq_ignore_ascii_case("never") {
                None
            } else {
                Some(value.parse().map_err(|_| {
                    bad(format!("{key}: {value:?} is neither a size nor \"never\""))
                })?)
            };
        }
        Ok(c)
    }
}

impl fmt::Display for CrossoverReport {
    /// One line per sample (workload, size, CPU and GPU time, GPU speed-up), then the
    /// thresholds.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<15} {:>10} {:>12} {:>12} {:>8}",
            "workload", "size", "cpu", "gpu", "gpu/cpu"
        )?;
        for s in &self.samples {
            writeln!(
                f,
                "{:<15} {:>10} {:>12.3?} {:>12.3?} {:>7.2}x",
                s.workload.name(),
                s.size,
                s.cpu,
                s.gpu,
                s.cpu.as_secs_f64() / s.gpu.as_secs_f64().max(1e-12)
            )?;
        }
        write!(f, "{CROSSOVER_ENV}={}", self.crossover)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(work: usize, cpu_ms: u64, gpu_ms: u64) -> CrossoverSample {
        CrossoverSample {
            workload: Workload::MatMul,
            size: work,
            work,
            cpu: Duration::from_millis(cpu_ms),
            gpu: Duration::from_millis(gpu_ms),
        }
    }

    #[test]
    fn threshold_is_where_the_gpu_stays_ahead() {
        // Loses, wins, loses again, then wins at the two largest: from 40.
        let s = [
            sample(10, 1, 2),
            sample(20, 3, 2),
            sample(30, 5, 6),
            sample(40, 9, 8),
            sample(50, 20, 9),
        ];
        assert_eq!(threshold_of(&s), Some(40));
        assert_eq!(threshold_of(&s[..3]), None, "lost at the largest: never");
        assert_eq!(threshold_of(&[]), None);
        assert_eq!(threshold_of(&s[1..2]), Some(20));
    }

    #[test]
    fn parse_and_print_round_trip_with_clear_errors() {
        let c: Crossover = " Matmul = 4096 , gemv=never, reduction=7".parse().unwrap();
        assert_eq!(c.threshold(Workload::MatMul), Some(4096));
        assert_eq!(c.threshold(Workload::Reduction), Some(7));
        assert_eq!(c.threshold(Workload::Gemv), None);
        assert_eq!(c.threshold(Workload::Elementwise), None);
        assert_eq!(
            c.to_string(),
            "elementwise=never,transcendental=never,reduction=7,matmul=4096,gemv=never"
        );
        assert_eq!(c.to_string().parse::<Crossover>().unwrap(), c);
        assert_eq!("never".parse::<Crossover>().unwrap(), Crossover::never());
        for bad in ["matmul", "conv=3", "matmul=big", "matmul=-1"] {
            match bad.parse::<Crossover>() {
                Err(TruenoError::InvalidArgument { op, reason }) => {
                    assert_eq!(op, CROSSOVER_ENV);
                    assert!(!reason.is_empty());
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    #[test]
    fn ladders_grow_and_start_at_the_probe_floor() {
        for w in Workload::ALL {
            let l = w.ladder();
            assert!(l.windows(2).all(|p| p[0] < p[1]), "{}", w.name());
            assert_eq!(w.smallest_probe(), w.work(l[0]));
        }
    }
}
