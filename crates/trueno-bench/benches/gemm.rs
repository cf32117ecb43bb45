//! f32 GEMM: trueno against ndarray 0.17 (`general_mat_mul`, matrixmultiply inside, one
//! thread: its threading feature is off) and faer 0.24 (`matmul`, one thread and both),
//! on square sizes and LLM shapes, plus the measured FMA peak written beside the results.
//! The LLM shapes run twice: B row-major (k x n), and B stored n x k and used transposed
//! (`-wt`: a linear layer's `x·Wᵀ`; ndarray gets the same bytes as a transposed view, and
//! faer's own column-major B is those bytes), and one shallow `x·Wᵀ`, a LoRA adapter's up
//! projection (`64x32x4096-wt`), and two shallow products over a wide C (`1024x128x4096`,
//! `128x128x16384`). faer runs twice: on its own column-major A, B and C
//! (`faer-*`, the peer), and on trueno's exact bytes (`faer-same-*`: row-major A
//! and C, B as trueno stores it), which separates layout from kernel. Then trueno and
//! faer on its own layout once more, interleaved call by call in the same rounds
//! (`paired_faer.json`): criterion's windows are timed apart, and on a shared VM their
//! drift decided the sign of a ratio at parity.
//! `cargo bench -p trueno-bench --bench gemm`, then `cargo run -p trueno-bench --bin gemm-report`.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, Par};
use trueno::{Matrix, Transpose};
use trueno_bench::paired::{Paired, median, paired};
use trueno_bench::read_rate::{sum_rows_interleaved, sum_rows_interleaved_par};

/// (m, n, k, label, B stored n x k and used transposed). Labels are m x k x n, as the
/// issue names the LLM shapes: "128x4096x11008" is 128 tokens times a 4096 x 11008 W.
fn shapes() -> Vec<(usize, usize, usize, String, bool)> {
    let mut v: Vec<_> = [16, 32, 64, 128, 256, 512, 1024, 2048]
        .iter()
        .map(|&s| (s, s, s, format!("{s}"), false))
        .collect();
    for wt in [false, true] {
        let sfx = if wt { "-wt" } else { "" };
        v.push((1, 4096, 4096, format!("1x4096x4096{sfx}"), wt));
        v.push((32, 4096, 4096, format!("32x4096x4096{sfx}"), wt));
        v.push((128, 11008, 4096, format!("128x4096x11008{sfx}"), wt));
    }
    // A LoRA adapter's up projection (64 tokens, rank 32, 4096 outputs; the adapter's B
    // stored out x rank): a shallow x·Wᵀ, which AVX2 runs as given rather than swapped.
    v.push((64, 4096, 32, "64x32x4096-wt".into(), true));
    // Shallow products over a C past two L2, outside the list: a prefill of 1024
    // tokens at 128 deep (A's panels swept outside B's, A in several blocks), and 128
    // tokens against a 16384-wide B at 128 deep (one A block, its first A panel packing
    // B in blocks within half of L2).
    v.push((1024, 4096, 128, "1024x128x4096".into(), false));
    v.push((128, 16384, 128, "128x128x16384".into(), false));
    v
}

fn value(i: usize, j: usize) -> f32 {
    ((i * 7 + j * 13) % 29) as f32 * 0.05 - 0.7
}

fn bench(c: &mut Criterion) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/criterion/gemm");
    let _ = std::fs::create_dir_all(&dir);
    let peak = serde_json::json!({
        "one_thread_gflops": trueno_bench::fma_peak_gflops(1),
        "all_threads_gflops": trueno_bench::fma_peak_gflops(rayon::current_num_threads()),
        "threads": rayon::current_num_threads(),
    });
    let _ = std::fs::write(dir.join("fma_peak.json"), peak.to_string());
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("1-thread pool");
    let e = trueno::engine().expect("engine");
    // trueno and faer on its own layout, interleaved in the same rounds (`paired`), beside
    // criterion's windows: where the two sit at parity, separate windows' drift on a
    // shared VM decided the sign of the ratio.
    let wants_paired = wants_extra(&["paired"]);
    let mut paired_rows = serde_json::Map::new();
    let mut g = c.benchmark_group("gemm");
    g.sample_size(10)
        .warm_up_time(std::time::Duration::from_millis(300))
        .measurement_time(std::time::Duration::from_secs(2));
    for (m, n, k, label, wt) in shapes() {
        g.throughput(Throughput::Elements((2 * m * n * k) as u64));
        let a = Matrix::from_fn(m, k, value).unwrap();
        let (b, tb) = match wt {
            true => (Matrix::from_fn(n, k, value).unwrap(), Transpose::Yes),
            false => (
                Matrix::from_fn(k, n, |i, j| value(j, i)).unwrap(),
                Transpose::No,
            ),
        };
        let mut cm = Matrix::zeros(m, n).unwrap();
        let product = |c: &mut Matrix| {
            let (a, b) = (a.view(), b.view());
            e.gemm(1.0, a, Transpose::No, b, tb, 0.0, &mut c.view_mut())
                .unwrap()
        };
        g.bench_with_input(BenchmarkId::new("trueno-1t", &label), &(), |bch, _| {
            bch.iter_custom(|iters| on_one_thread(&one, iters, || product(&mut cm)))
        });
        g.bench_with_input(BenchmarkId::new("trueno-all", &label), &(), |bch, _| {
            bch.iter(|| product(&mut cm))
        });
        let na = ndarray::Array2::from_shape_fn((m, k), |(i, j)| value(i, j));
        let nb = ndarray::Array2::from_shape_fn((k, n), |(i, j)| value(j, i));
        let nw = ndarray::Array2::from_shape_fn((n, k), |(j, i)| value(j, i));
        let mut nc = ndarray::Array2::<f32>::zeros((m, n));
        g.bench_with_input(BenchmarkId::new("ndarray-1t", &label), &(), |bch, _| {
            bch.iter(|| match wt {
                true => ndarray::linalg::general_mat_mul(1.0, &na, &nw.t(), 0.0, &mut nc),
                false => ndarray::linalg::general_mat_mul(1.0, &na, &nb, 0.0, &mut nc),
            })
        });
        let fa = Mat::<f32>::from_fn(m, k, value);
        let fb = Mat::<f32>::from_fn(k, n, |i, j| value(j, i));
        let mut fc = Mat::<f32>::zeros(m, n);
        let faer_product = |fc: &mut Mat<f32>, par| {
            matmul(
                fc.as_mut(),
                Accum::Replace,
                fa.as_ref(),
                fb.as_ref(),
                1.0f32,
                par,
            )
        };
        g.bench_with_input(BenchmarkId::new("faer-1t", &label), &(), |bch, _| {
            bch.iter(|| faer_product(&mut fc, Par::Seq))
        });
        let threads = rayon::current_num_threads();
        g.bench_with_input(BenchmarkId::new("faer-all", &label), &(), |bch, _| {
            bch.iter(|| faer_product(&mut fc, Par::rayon(threads)))
        });
        if wants_paired {
            let flops = (2 * m * n * k) as f64;
            let row = |p: Paired| {
                serde_json::json!({
                    "trueno_gflops": flops / p.first_s / 1e9,
                    "faer_gflops": flops / p.second_s / 1e9,
                    "ratio": p.ratio,
                    "calls": p.calls,
                })
            };
            let one_thread = one.install(|| {
                let (t, f) = (|| product(&mut cm), || faer_product(&mut fc, Par::Seq));
                paired(PAIRED_ROUNDS, PAIRED_MIN_SECS, t, f)
            });
            let (t, f) = (
                || product(&mut cm),
                || faer_product(&mut fc, Par::rayon(threads)),
            );
            let all = paired(PAIRED_ROUNDS, PAIRED_MIN_SECS, t, f);
            let entry = serde_json::json!({"one_thread": row(one_thread), "all_threads": row(all)});
            paired_rows.insert(label.clone(), entry);
        }
        // faer again on trueno's own bytes: A and C row-major (views of the transposes of
        // column-major matrices) and B as trueno stores it, so the two columns of faer
        // tell what its own layout is worth against the same product on the same memory.
        let fa_rm = Mat::<f32>::from_fn(k, m, |p, i| value(i, p));
        // Row-major k x n B: the transpose of a column-major n x k matrix (for `-wt`,
        // trueno's n x k B is `fb`'s bytes already).
        let fb_rm = (!wt).then(|| Mat::<f32>::from_fn(n, k, value));
        let mut fc_rm = Mat::<f32>::zeros(n, m);
        let same_bytes = |c: &mut Mat<f32>, par: Par| {
            let b = match &fb_rm {
                None => fb.as_ref(),
                Some(rm) => rm.as_ref().transpose(),
            };
            let a = fa_rm.as_ref().transpose();
            matmul(
                c.as_mut().transpose_mut(),
                Accum::Replace,
                a,
                b,
                1.0f32,
                par,
            )
        };
        // Once, unmeasured: the views make the same product (a wrong stride or transpose
        // would time some other one).
        product(&mut cm);
        same_bytes(&mut fc_rm, Par::Seq);
        let worst = (0..m * n)
            .map(|q| (cm.as_slice()[q] - fc_rm[(q % n, q / n)]).abs())
            .fold(0.0f32, f32::max);
        assert!(
            worst <= 1e-3 * k as f32,
            "{label}: faer on trueno's bytes differs by {worst}"
        );
        g.bench_with_input(BenchmarkId::new("faer-same-1t", &label), &(), |bch, _| {
            bch.iter(|| same_bytes(&mut fc_rm, Par::Seq))
        });
        g.bench_with_input(BenchmarkId::new("faer-same-all", &label), &(), |bch, _| {
            bch.iter(|| same_bytes(&mut fc_rm, Par::rayon(threads)))
        });
    }
    g.finish();
    if wants_paired {
        paired_rows.insert("rounds".into(), PAIRED_ROUNDS.into());
        let _ = std::fs::write(
            dir.join("paired_faer.json"),
            serde_json::Value::Object(paired_rows).to_string(),
        );
    }
}

/// Rounds of the interleaved comparison with faer (`paired_faer.json`).
const PAIRED_ROUNDS: usize = 15;

/// Shortest timing in those rounds: a small product's calls are timed in batches this long.
const PAIRED_MIN_SECS: f64 = 2e-3;

/// Transpose against ndarray's `t().as_standard_layout()` (trueno as the engine runs it,
/// split across threads from 512K floats, and on one thread), and GEMV against the read
/// bandwidth it is bound by (trueno's sum over the same 64 MB, one thread and all); then
/// the same pair interleaved (`gemv_share`).
fn bench_extra(c: &mut Criterion) {
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("1-thread pool");
    let e = trueno::engine().expect("engine");
    let mut g = c.benchmark_group("gemm_extra");
    g.sample_size(10)
        .warm_up_time(std::time::Duration::from_millis(300))
        .measurement_time(std::time::Duration::from_secs(2));
    for n in [512usize, 2048] {
        g.throughput(Throughput::Bytes((2 * n * n * 4) as u64));
        let a = Matrix::from_fn(n, n, value).unwrap();
        let mut t = Matrix::zeros(n, n).unwrap();
        g.bench_with_input(BenchmarkId::new("transpose-trueno", n), &(), |bch, _| {
            bch.iter(|| e.transpose(a.view(), &mut t.view_mut()).unwrap())
        });
        g.bench_with_input(BenchmarkId::new("transpose-trueno-1t", n), &(), |bch, _| {
            bch.iter_custom(|iters| {
                on_one_thread(&one, iters, || {
                    e.transpose(a.view(), &mut t.view_mut()).unwrap()
                })
            })
        });
        let na = ndarray::Array2::from_shape_fn((n, n), |(i, j)| value(i, j));
        g.bench_with_input(BenchmarkId::new("transpose-ndarray", n), &(), |bch, _| {
            bch.iter(|| na.t().as_standard_layout().into_owned())
        });
    }
    let n = 4096;
    g.throughput(Throughput::Bytes((n * n * 4) as u64));
    let a = Matrix::from_fn(n, n, value).unwrap();
    let x: Vec<f32> = (0..n).map(|i| value(i, 1)).collect();
    let mut y = vec![0.0f32; n];
    g.bench_with_input(BenchmarkId::new("gemv-trueno-1t", n), &(), |bch, _| {
        bch.iter_custom(|iters| {
            on_one_thread(&one, iters, || {
                e.gemv(1.0, a.view(), &x, 0.0, &mut y).unwrap()
            })
        })
    });
    g.bench_with_input(BenchmarkId::new("gemv-trueno-all", n), &(), |bch, _| {
        bch.iter(|| e.gemv(1.0, a.view(), &x, 0.0, &mut y).unwrap())
    });
    g.bench_with_input(BenchmarkId::new("read-sum-1t", n), &(), |bch, _| {
        bch.iter_custom(|iters| {
            on_one_thread(&one, iters, || {
                std::hint::black_box(e.sum(a.as_slice()).unwrap());
            })
        })
    });
    g.bench_with_input(BenchmarkId::new("read-sum-all", n), &(), |bch, _| {
        bch.iter(|| e.sum(a.as_slice()).unwrap())
    });
    // The same bytes read eight rows at a time (several streams, as the GEMV reads).
    g.bench_with_input(BenchmarkId::new("read-streams-1t", n), &(), |bch, _| {
        bch.iter_custom(|iters| {
            on_one_thread(&one, iters, || {
                std::hint::black_box(sum_rows_interleaved(a.as_slice(), n));
            })
        })
    });
    g.bench_with_input(BenchmarkId::new("read-streams-all", n), &(), |bch, _| {
        bch.iter(|| sum_rows_interleaved_par(a.as_slice(), n))
    });
    g.finish();
    if !wants_extra(&["gemm_extra", "gemv", "read"]) {
        return;
    }
    let share = gemv_share(e, &one, &a, &x);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/criterion/gemm");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(dir.join("gemv_share.json"), share.to_string());
}

/// Whether this run asks for a measurement outside criterion's benchmarks (the GEMV's
/// interleaved rows, `gemv_share`, or the interleaved faer rows): no filter given, or one
/// containing one of `words`. `--list` and runs filtered to other benchmarks skip it,
/// which criterion's filter does not reach.
fn wants_extra(words: &[&str]) -> bool {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    !args.iter().any(|a| a == "--list")
        && (filters.is_empty() || filters.iter().any(|f| words.iter().any(|w| f.contains(w))))
}

/// Rounds of `gemv_share`.
const SHARE_ROUNDS: usize = 25;

/// The GEMV's share of the read rate with the ops timed in the same rounds, one call of
/// each, in turn (the GEMV, `Engine::sum`'s one stream, eight rows read side by side by
/// `sum_rows_interleaved`; the share is against the faster read of the round): timed in windows of their own (criterion's rows above) a neighbour's
/// burst on this VM's memory moves one and not the other (the one-thread share read
/// 84-95% over eight runs, the two-thread one 70-125%). Each round times both ops warm
/// (after an untimed call of the same op: the 64 MB matrix is twice the Zen 5 VM's L3, so
/// part of it is still there) and from memory (after a read of three L3s of other data,
/// as a layer's weights come in an inference step), on one thread and on all. Medians of
/// the rounds' GB/s and of their per-round ratios.
fn gemv_share(
    e: &trueno::Engine,
    one: &rayon::ThreadPool,
    a: &Matrix,
    x: &[f32],
) -> serde_json::Value {
    let bytes = (a.rows() * a.cols() * 4) as f64;
    let mut y = vec![0.0f32; a.rows()];
    let other = vec![1.0f32; (3 * trueno::gemm::CacheSizes::detect().l3).max(64 << 20) / 4];
    let mut out = serde_json::Map::new();
    for (label, pool) in [("one_thread", Some(one)), ("all_threads", None)] {
        for cold in [false, true] {
            let mut rounds = Vec::with_capacity(SHARE_ROUNDS);
            let mut round = |r: usize| {
                let timed = |f: &mut dyn FnMut()| {
                    match cold {
                        true => {
                            std::hint::black_box(e.sum(&other).unwrap());
                        }
                        false => f(),
                    }
                    let t0 = std::time::Instant::now();
                    f();
                    t0.elapsed().as_secs_f64()
                };
                let mut gemv = || e.gemv(1.0, a.view(), x, 0.0, &mut y).unwrap();
                let mut sum = || {
                    std::hint::black_box(e.sum(a.as_slice()).unwrap());
                };
                let mut streams = || {
                    let read = match pool {
                        Some(_) => sum_rows_interleaved(a.as_slice(), a.cols()),
                        None => sum_rows_interleaved_par(a.as_slice(), a.cols()),
                    };
                    std::hint::black_box(read);
                };
                // Which goes first turns, so none always follows the same other.
                let mut t = [0.0f64; 3];
                for i in 0..3 {
                    let op = (r + i) % 3;
                    t[op] = match op {
                        0 => timed(&mut gemv),
                        1 => timed(&mut sum),
                        _ => timed(&mut streams),
                    };
                }
                rounds.push((t[0], t[1], t[2]));
            };
            for r in 0..SHARE_ROUNDS {
                match pool {
                    Some(p) => p.install(|| round(r)),
                    None => round(r),
                }
            }
            let gbps = |t: f64| bytes / t / 1e9;
            out.insert(
                format!("{label}_{}", if cold { "memory" } else { "warm" }),
                serde_json::json!({
                    "gemv_gbps": median(rounds.iter().map(|r| gbps(r.0)).collect()),
                    "sum_gbps": median(rounds.iter().map(|r| gbps(r.1)).collect()),
                    "streams_gbps": median(rounds.iter().map(|r| gbps(r.2)).collect()),
                    "share": median(rounds.iter().map(|r| r.1.min(r.2) / r.0).collect()),
                }),
            );
        }
    }
    out.insert("rounds".into(), SHARE_ROUNDS.into());
    serde_json::Value::Object(out)
}

/// `iters` calls of `f` timed inside the 1-thread pool: entering the pool per call would
/// add its hand-off to every iteration (~10 us, a third of a 128^3 product; ~100 us, as
/// much as the call, for a 512 x 512 transpose on the 2-vCPU VM).
fn on_one_thread(
    one: &rayon::ThreadPool,
    iters: u64,
    mut f: impl FnMut() + Send,
) -> std::time::Duration {
    one.install(|| {
        let t0 = std::time::Instant::now();
        for _ in 0..iters {
            f();
        }
        t0.elapsed()
    })
}

criterion_group!(benches, bench, bench_extra);
criterion_main!(benches);
