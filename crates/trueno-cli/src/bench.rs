//! `trueno bench`: every operation at several sizes on scalar and on every ISA this CPU
//! has, pinned with `Engine::new`, reporting throughput and speedup over scalar.

use std::io::Write;
use std::time::{Duration, Instant};

use serde::Serialize;
use trueno::{Backend, Engine, Matrix, Transpose, TruenoError};

use crate::progress::Progress;

pub struct Options {
    pub quick: bool,
    pub json: bool,
    pub ops: Vec<String>,
}

/// The input and output buffers one measurement works on.
struct Buffers {
    a: Vec<f32>,
    b: Vec<f32>,
    out: Vec<f32>,
    half: Vec<u16>,
}

type Run = fn(&Engine, &mut Buffers) -> trueno::Result<()>;

/// An operation to time: `bytes` is memory traffic per element (inputs + outputs).
struct Op {
    name: &'static str,
    bytes: usize,
    run: Run,
}

fn ops() -> Vec<Op> {
    vec![
        Op {
            name: "add",
            bytes: 12,
            run: |e, b| e.add_into(&b.a, &b.b, &mut b.out),
        },
        Op {
            name: "mul",
            bytes: 12,
            run: |e, b| e.mul_into(&b.a, &b.b, &mut b.out),
        },
        Op {
            name: "dot",
            bytes: 8,
            run: |e, b| e.dot(&b.a, &b.b).map(drop),
        },
        Op {
            name: "sum",
            bytes: 4,
            run: |e, b| e.sum(&b.a).map(drop),
        },
        Op {
            name: "max",
            bytes: 4,
            run: |e, b| e.max(&b.a).map(drop),
        },
        Op {
            name: "argmax",
            bytes: 4,
            run: |e, b| e.argmax(&b.a).map(drop),
        },
        Op {
            name: "norm_l2",
            bytes: 4,
            run: |e, b| e.norm_l2(&b.a).map(drop),
        },
        Op {
            name: "relu",
            bytes: 8,
            run: |e, b| e.relu_into(&b.a, &mut b.out),
        },
        Op {
            name: "exp",
            bytes: 8,
            run: |e, b| e.exp_into(&b.a, &mut b.out),
        },
        Op {
            name: "sigmoid",
            bytes: 8,
            run: |e, b| e.sigmoid_into(&b.a, &mut b.out),
        },
        Op {
            name: "tanh",
            bytes: 8,
            run: |e, b| e.tanh_into(&b.a, &mut b.out),
        },
        Op {
            name: "gelu",
            bytes: 8,
            run: |e, b| e.gelu_into(&b.a, &mut b.out),
        },
        Op {
            name: "silu",
            bytes: 8,
            run: |e, b| e.silu_into(&b.a, &mut b.out),
        },
        Op {
            name: "softmax",
            bytes: 8,
            run: |e, b| e.softmax_into(&b.a, &mut b.out),
        },
        Op {
            name: "to_f16",
            bytes: 6,
            run: |e, b| e.f32_to_f16(&b.a, &mut b.half),
        },
        Op {
            name: "from_f16",
            bytes: 6,
            run: |e, b| e.f16_to_f32(&b.half, &mut b.out),
        },
        Op {
            name: "to_bf16",
            bytes: 6,
            run: |e, b| e.f32_to_bf16(&b.a, &mut b.half),
        },
    ]
}

const SIZES: [usize; 4] = [1_000, 10_000, 100_000, 1_000_000];

#[derive(Serialize)]
pub(crate) struct Cell {
    pub(crate) op: &'static str,
    pub(crate) size: usize,
    pub(crate) backend: &'static str,
    pub(crate) ns_per_call: f64,
    pub(crate) gb_per_s: f64,
    pub(crate) gelem_per_s: f64,
    /// Absent on the crossover rows, which compare the GPU with the CPU engine instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) speedup_vs_scalar: Option<f64>,
    /// GEMM rows: GFLOP/s and its share of the FMA peak measured in the same run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) gflops: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) percent_of_fma_peak: Option<f64>,
    /// Crossover rows (backend "gpu"): the CPU engine's time over the GPU route's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) gpu_speedup_vs_cpu: Option<f64>,
}

/// Runs closures on one thread: a one-thread rayon pool where the library may split work
/// across threads, the caller's thread where it cannot (built without `parallel`).
struct OneThread {
    #[cfg(feature = "parallel")]
    pool: rayon::ThreadPool,
}

impl OneThread {
    fn new() -> trueno::Result<Self> {
        Ok(OneThread {
            #[cfg(feature = "parallel")]
            pool: rayon::ThreadPoolBuilder::new()
                .num_threads(1)
                .build()
                .map_err(|e| TruenoError::InvalidArgument {
                    op: "bench",
                    reason: format!("no thread pool: {e}"),
                })?,
        })
    }

    fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        #[cfg(feature = "parallel")]
        return self.pool.install(f);
        #[cfg(not(feature = "parallel"))]
        f()
    }
}

/// Square GEMM sizes of the bench's matrix section.
const GEMM_SIZES: [usize; 4] = [64, 128, 256, 512];

/// `n x n x n` GEMM on every ISA, one thread, as GFLOP/s and % of the one-core FMA peak.
fn gemm_cells(
    engines: &[(Backend, Engine)],
    target: Duration,
    rounds: usize,
    progress: &mut Progress,
) -> trueno::Result<Vec<Cell>> {
    let peak = trueno::gemm::fma_peak_gflops(1);
    let one = OneThread::new()?;
    let mut cells = Vec::new();
    for n in GEMM_SIZES {
        let a = Matrix::from_fn(n, n, |i, j| ((i * 7 + j * 3) % 13) as f32 * 0.1 - 0.6)?;
        let b = Matrix::from_fn(n, n, |i, j| ((i * 5 + j * 11) % 17) as f32 * 0.1 - 0.8)?;
        let mut c = Matrix::zeros(n, n)?;
        let mut scalar_ns = f64::NAN;
        for (backend, engine) in engines {
            progress.step(&format!("gemm {n} {}", backend.name()));
            let ns = one.install(|| {
                time_per_call(
                    || {
                        engine.gemm(
                            1.0,
                            a.view(),
                            Transpose::No,
                            b.view(),
                            Transpose::No,
                            0.0,
                            &mut c.view_mut(),
                        )
                    },
                    target,
                    rounds,
                )
            })?;
            if *backend == Backend::Scalar {
                scalar_ns = ns;
            }
            let gflops = 2.0 * (n as f64).powi(3) / ns;
            cells.push(Cell {
                op: "gemm",
                size: n,
                backend: backend.name(),
                ns_per_call: ns,
                gb_per_s: (3 * n * n * 4) as f64 / ns,
                gelem_per_s: (n * n) as f64 / ns,
                speedup_vs_scalar: Some(scalar_ns / ns),
                gflops: Some(gflops),
                percent_of_fma_peak: (peak > 0.0).then(|| 100.0 * gflops / peak),
                gpu_speedup_vs_cpu: None,
            });
        }
    }
    Ok(cells)
}

/// Best time per call over `rounds` batches, each long enough to dwarf timer overhead.
fn time_per_call(
    mut f: impl FnMut() -> trueno::Result<()>,
    target: Duration,
    rounds: usize,
) -> trueno::Result<f64> {
    f()?;
    let mut iters = 1u64;
    loop {
        let t = Instant::now();
        for _ in 0..iters {
            f()?;
        }
        if t.elapsed() >= target / 4 || iters > 1 << 30 {
            break;
        }
        iters *= 2;
    }
    let iters = iters * 4;
    let mut best = f64::INFINITY;
    for _ in 0..rounds {
        let t = Instant::now();
        for _ in 0..iters {
            f()?;
        }
        best = best.min(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    Ok(best)
}

pub fn run(opts: Options) -> Result<(), Box<dyn std::error::Error>> {
    let mut out = std::io::stdout().lock();
    let mut ops = ops();
    let with_gemm = opts.ops.is_empty() || opts.ops.iter().any(|o| o == "gemm");
    let with_crossover = opts.ops.is_empty() || opts.ops.iter().any(|o| o == "crossover");
    if !opts.ops.is_empty() {
        for name in opts
            .ops
            .iter()
            .filter(|n| *n != "gemm" && *n != "crossover")
        {
            if !ops.iter().any(|o| o.name == name) {
                let mut known: Vec<&str> = ops.iter().map(|o| o.name).collect();
                known.extend(["gemm", "crossover"]);
                return Err(TruenoError::InvalidArgument {
                    op: "bench",
                    reason: format!("unknown op {name:?}; known: {}", known.join(", ")),
                }
                .into());
            }
        }
        ops.retain(|o| opts.ops.iter().any(|n| n == o.name));
    }
    let backends: Vec<Backend> = trueno::available_cpu_backends();
    let engines: Vec<(Backend, Engine)> = backends
        .iter()
        .map(|&b| Engine::new(b).map(|e| (b, e)))
        .collect::<trueno::Result<_>>()?;
    let (target, rounds) = if opts.quick {
        (Duration::from_millis(4), 3)
    } else {
        (Duration::from_millis(40), 5)
    };

    let gemm_steps = if with_gemm {
        GEMM_SIZES.len() * engines.len()
    } else {
        0
    };
    let mut progress = Progress::new(ops.len() * SIZES.len() * engines.len() + gemm_steps);
    let mut cells = Vec::new();
    for op in &ops {
        for &n in &SIZES {
            // Inputs in (0.5, 1.5): valid for every op, no special values on the fast path.
            let mut bufs = Buffers {
                a: (0..n)
                    .map(|i| 0.5 + ((i * 7919) % 1000) as f32 / 1000.0)
                    .collect(),
                b: (0..n)
                    .map(|i| 0.5 + ((i * 104_729) % 1000) as f32 / 1000.0)
                    .collect(),
                out: vec![0.0; n],
                half: vec![0x3c00; n],
            };
            let mut scalar_ns = f64::NAN;
            for (backend, engine) in &engines {
                progress.step(&format!("{} {} {}", op.name, n, backend.name()));
                let ns = time_per_call(|| (op.run)(engine, &mut bufs), target, rounds)?;
                if *backend == Backend::Scalar {
                    scalar_ns = ns;
                }
                cells.push(Cell {
                    op: op.name,
                    size: n,
                    backend: backend.name(),
                    ns_per_call: ns,
                    gb_per_s: (op.bytes * n) as f64 / ns,
                    gelem_per_s: n as f64 / ns,
                    speedup_vs_scalar: Some(scalar_ns / ns),
                    gflops: None,
                    percent_of_fma_peak: None,
                    gpu_speedup_vs_cpu: None,
                });
            }
        }
    }
    if with_gemm {
        cells.extend(gemm_cells(&engines, target, rounds, &mut progress)?);
    }
    let mut crossover = if with_crossover {
        progress.step("gpu crossover");
        Some(crate::crossover::measure())
    } else {
        None
    };
    progress.finish();
    if let Some(Ok((c, _))) = &mut crossover {
        cells.append(c);
    }

    if opts.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&cells)?)?;
        return Ok(());
    }
    if cells
        .iter()
        .any(|c| c.gflops.is_none() && c.speedup_vs_scalar.is_some())
    {
        writeln!(
            out,
            "{:<9} {:>9} {:<8} {:>12} {:>9} {:>10} {:>9}",
            "op", "elements", "backend", "time", "GB/s", "Gelem/s", "vs scalar"
        )?;
        for c in cells
            .iter()
            .filter(|c| c.gflops.is_none() && c.speedup_vs_scalar.is_some())
        {
            writeln!(
                out,
                "{:<9} {:>9} {:<8} {:>12} {:>9.2} {:>10.3} {:>8.2}x",
                c.op,
                c.size,
                c.backend,
                format_ns(c.ns_per_call),
                c.gb_per_s,
                c.gelem_per_s,
                c.speedup_vs_scalar.unwrap_or(f64::NAN)
            )?;
        }
    }
    let gemm: Vec<&Cell> = cells.iter().filter(|c| c.gflops.is_some()).collect();
    if !gemm.is_empty() {
        writeln!(out, "\nGEMM, n x n x n, one thread")?;
        writeln!(
            out,
            "{:<9} {:>9} {:<8} {:>12} {:>9} {:>10} {:>9}",
            "op", "n", "backend", "time", "GFLOP/s", "% peak", "vs scalar"
        )?;
        for c in gemm {
            writeln!(
                out,
                "{:<9} {:>9} {:<8} {:>12} {:>9.1} {:>9.0}% {:>8.2}x",
                c.op,
                c.size,
                c.backend,
                format_ns(c.ns_per_call),
                c.gflops.unwrap_or(0.0),
                c.percent_of_fma_peak.unwrap_or(f64::NAN),
                c.speedup_vs_scalar.unwrap_or(f64::NAN)
            )?;
        }
    }
    match crossover {
        Some(Ok((_, report))) => writeln!(out, "\n{report}")?,
        Some(Err(why)) => writeln!(out, "\nGPU crossover: skipped ({why})")?,
        None => {}
    }
    Ok(())
}

fn format_ns(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} us", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}
