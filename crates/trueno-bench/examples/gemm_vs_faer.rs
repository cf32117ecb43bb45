//! trueno against faer, interleaved: `gemm_vs_faer [N | MxNxK]...` (default 256 512 1024).
//!
//! The two alternate in bursts of about 5 ms for `SECS` seconds per shape (default 1.5)
//! and each keeps its best call: on a VM whose speed drifts over seconds, back-to-back
//! criterion runs can land in different phases, while best-of over interleaved bursts
//! compares both in the same quiet moments. Both use rayon's pool, so
//! `RAYON_NUM_THREADS=1` runs both on one thread. `ALIGN_C=1` puts C on a 64-byte
//! boundary (faer aligns its own storage; trueno's C is wherever the caller's is), and
//! `ALIGN=1` A and B too (a `Vec<f32>` of these sizes starts 16 bytes past a line here).
//! `BT=1` stores trueno's B as n x k and multiplies by its transpose (`x·Wᵀ`, a linear
//! layer's layout): the same bytes in the same order as faer's column-major k x n B.
//! `NDARRAY=1` adds ndarray 0.17 (`general_mat_mul`, matrixmultiply inside, one thread
//! whatever the pool) as a third contender in the same bursts, on trueno's row-major bytes
//! (B as a transposed view under `BT=1`): the ndarray bar on a drifting VM.
//! `PEAK=1` adds the FMA probe (`trueno::gemm::fma_rate_gflops`, ~4 ms a burst on the
//! pool's thread count) to the same bursts and prints trueno's best as a share of the
//! probe's best: the issue's %-of-peak bar where the peak itself drifts (a shared VM's
//! one-thread probe read 85-131 GFLOP/s over ten runs within a second).
//! `EVICT=MiB` reads that many MiB of other data before every call of either side, so
//! that both take their operands from memory, as a model's layers do when the others
//! ran in between (the probe's `TRUENO_PROBE_EVICT`).
//! `SPREAD=1` adds each side's median call and its 10th and 90th percentiles (as
//! GFLOP/s: the faster tenth and the slower tenth): criterion reports a mean, which a
//! side whose calls spread widely loses even where its best leads.

use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, Par};
use std::time::Instant;
use trueno::{MatMut, MatRef, Matrix, Transpose};

fn parse_shape(s: &str) -> Option<(usize, usize, usize)> {
    let p: Vec<usize> = s
        .split('x')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    match p[..] {
        [n] => Some((n, n, n)),
        [m, n, k] => Some((m, n, k)),
        _ => None,
    }
}

fn value(i: usize, j: usize) -> f32 {
    ((i * 7 + j * 13) % 29) as f32 * 0.05 - 0.7
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut shapes = Vec::new();
    for arg in std::env::args().skip(1) {
        shapes.push(parse_shape(&arg).ok_or(format!("not N or MxNxK: {arg}"))?);
    }
    if shapes.is_empty() {
        shapes = vec![(256, 256, 256), (512, 512, 512), (1024, 1024, 1024)];
    }
    let secs: f64 = std::env::var("SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1.5);
    let e = trueno::engine()?;
    let par = match rayon::current_num_threads() {
        1 => Par::Seq,
        t => Par::rayon(t),
    };
    let with_nd = std::env::var_os("NDARRAY").is_some();
    let with_peak = std::env::var_os("PEAK").is_some();
    let with_spread = std::env::var_os("SPREAD").is_some();
    let mut header = String::from(
        "| shape (m x n x k) | threads | trueno GFLOP/s | faer GFLOP/s | trueno / faer |",
    );
    let mut rule = String::from("|---|---:|---:|---:|---:|");
    if with_nd {
        header += " ndarray GFLOP/s | trueno / ndarray |";
        rule += "---:|---:|";
    }
    if with_peak {
        header += " FMA probe GFLOP/s | trueno / probe |";
        rule += "---:|---:|";
    }
    if with_spread {
        header += " trueno median / p10-p90 | faer median / p10-p90 | trueno / faer, medians |";
        rule += "---:|---:|---:|";
    }
    println!("{header}\n{rule}");
    let align_all = std::env::var_os("ALIGN").is_some();
    let other = trueno_bench::evict::OtherData::from_env("EVICT");
    let evict = || other.read();
    for (m, n, k) in shapes {
        let a = Matrix::from_fn(m, k, value)?;
        // BT=1: trueno's B stored n x k and used transposed, the same bytes in the same
        // order as faer's column-major k x n B.
        let bt_layout = std::env::var_os("BT").is_some();
        let b = match bt_layout {
            true => Matrix::from_fn(n, k, value)?,
            false => Matrix::from_fn(k, n, |i, j| value(j, i))?,
        };
        let tb = match bt_layout {
            true => Transpose::Yes,
            false => Transpose::No,
        };
        let mut cbuf = vec![0.0f32; m * n + 16];
        let off = match align_all || std::env::var_os("ALIGN_C").is_some() {
            true => cbuf.as_ptr().align_offset(64),
            false => 0,
        };
        let (abuf, bbuf) = (aligned_copy(a.as_slice()), aligned_copy(b.as_slice()));
        let (a, b) = match align_all {
            true => (
                MatRef::new(&abuf.0[abuf.1..], a.rows(), a.cols(), a.cols())?,
                MatRef::new(&bbuf.0[bbuf.1..], b.rows(), b.cols(), b.cols())?,
            ),
            false => (a.view(), b.view()),
        };
        // SAME_BYTES=1: faer multiplies views of matrices holding exactly trueno's bytes
        // (A and C row-major, B as trueno stores it); otherwise faer gets column-major
        // A, B and C, its own layout.
        let same = std::env::var_os("SAME_BYTES").is_some();
        let fa = Mat::<f32>::from_fn(m, k, value);
        let fa_t = Mat::<f32>::from_fn(k, m, |p, i| value(i, p));
        let fb = Mat::<f32>::from_fn(k, n, |i, j| value(j, i));
        // Row-major k x n B: the transpose of a column-major n x k matrix.
        let fb_t = Mat::<f32>::from_fn(n, k, value);
        let mut fc = Mat::<f32>::zeros(m, n);
        let mut fc_t = Mat::<f32>::zeros(n, m);
        // ndarray's operands only when it runs (B in the layout the run uses).
        let mut nd_args = with_nd.then(|| {
            let na = ndarray::Array2::from_shape_fn((m, k), |(i, p)| value(i, p));
            let nb = match bt_layout {
                true => ndarray::Array2::from_shape_fn((n, k), |(j, p)| value(j, p)),
                false => ndarray::Array2::from_shape_fn((k, n), |(p, j)| value(j, p)),
            };
            (na, nb, ndarray::Array2::<f32>::zeros((m, n)))
        });
        let mut bn = f64::MAX;
        // Every call's time, for `SPREAD`.
        let (mut calls_t, mut calls_f) = (Vec::new(), Vec::new());
        // The probe's best rate in the same bursts (GFLOP/s).
        let mut peak = 0.0f64;
        let gflop = 2.0 * (m * n * k) as f64 / 1e9;
        let reps = ((0.5 / gflop) as usize).max(1);
        // At least two rounds, so no side's best is a first call's one-time cost (with
        // the `gpu` feature, trueno's first large call measures the GPU crossover, 2-3 s
        // on lavapipe).
        let (start, mut rounds) = (Instant::now(), 0);
        while rounds < 2 || start.elapsed().as_secs_f64() < secs {
            rounds += 1;
            for _ in 0..reps {
                let mut cv = MatMut::new(&mut cbuf[off..off + m * n], m, n, n)?;
                evict();
                let t = Instant::now();
                e.gemm(1.0, a, Transpose::No, b, tb, 0.0, &mut cv)?;
                calls_t.push(t.elapsed().as_secs_f64());
            }
            for _ in 0..reps {
                evict();
                let t = Instant::now();
                match (same, bt_layout) {
                    (false, _) => matmul(
                        fc.as_mut(),
                        Accum::Replace,
                        fa.as_ref(),
                        fb.as_ref(),
                        1.0,
                        par,
                    ),
                    // B stored n x k (x·Wᵀ) is column-major k x n: faer's own B.
                    (true, true) => matmul(
                        fc_t.as_mut().transpose_mut(),
                        Accum::Replace,
                        fa_t.as_ref().transpose(),
                        fb.as_ref(),
                        1.0,
                        par,
                    ),
                    (true, false) => matmul(
                        fc_t.as_mut().transpose_mut(),
                        Accum::Replace,
                        fa_t.as_ref().transpose(),
                        fb_t.as_ref().transpose(),
                        1.0,
                        par,
                    ),
                }
                calls_f.push(t.elapsed().as_secs_f64());
            }
            if let Some((na, nb, nc)) = &mut nd_args {
                for _ in 0..reps {
                    let t = Instant::now();
                    match bt_layout {
                        true => ndarray::linalg::general_mat_mul(1.0, na, &nb.t(), 0.0, nc),
                        false => ndarray::linalg::general_mat_mul(1.0, na, nb, 0.0, nc),
                    }
                    bn = bn.min(t.elapsed().as_secs_f64());
                }
            }
            if with_peak {
                let threads = rayon::current_num_threads();
                peak = peak.max(trueno::gemm::fma_rate_gflops(threads, 1_500_000));
            }
        }
        let (spread_t, spread_f) = (Spread::of(&mut calls_t), Spread::of(&mut calls_f));
        let (bt, bf) = (spread_t.best, spread_f.best);
        let mut nd = match with_nd {
            true => format!(" {:.1} | {:.2}x |", gflop / bn, bn / bt),
            false => String::new(),
        };
        if with_peak {
            nd += &format!(" {peak:.1} | {:.0}% |", 100.0 * gflop / bt / peak);
        }
        if with_spread {
            let (t, f) = (spread_t.gflops(gflop), spread_f.gflops(gflop));
            nd += &format!(
                " {:.1} / {:.0}-{:.0} | {:.1} / {:.0}-{:.0} | {:.2}x |",
                t[0],
                t[1],
                t[2],
                f[0],
                f[1],
                f[2],
                spread_f.median / spread_t.median
            );
        }
        println!(
            "| {m}x{n}x{k} | {} | {:.1} | {:.1} | {:.2}x |{nd}",
            rayon::current_num_threads(),
            gflop / bt,
            gflop / bf,
            bf / bt
        );
    }
    Ok(())
}

/// `src` copied into a buffer, with the offset at which the copy starts on a 64-byte line.
fn aligned_copy(src: &[f32]) -> (Vec<f32>, usize) {
    let mut buf = vec![0.0f32; src.len() + 16];
    let off = buf.as_ptr().align_offset(64).min(16);
    buf[off..off + src.len()].copy_from_slice(src);
    (buf, off)
}

/// One side's calls (seconds): its best, median and 10th / 90th percentiles.
struct Spread {
    best: f64,
    median: f64,
    p10: f64,
    p90: f64,
}

impl Spread {
    fn of(calls: &mut [f64]) -> Spread {
        calls.sort_by(f64::total_cmp);
        let at = |q: usize| calls[(calls.len() - 1) * q / 100];
        Spread {
            best: calls[0],
            median: at(50),
            p10: at(10),
            p90: at(90),
        }
    }

    /// Median, faster tenth and slower tenth as GFLOP/s for `gflop` a call.
    fn gflops(&self, gflop: f64) -> [f64; 3] {
        [gflop / self.median, gflop / self.p10, gflop / self.p90]
    }
}
