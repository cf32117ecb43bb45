//! f32 GEMM: trueno against ndarray 0.17 (`general_mat_mul`, matrixmultiply inside, one
//! thread: its threading feature is off) and faer 0.24 (`matmul`, one thread and both),
//! on square sizes and LLM shapes, plus the measured FMA peak written beside the results.
//! The LLM shapes run twice: B row-major (k x n), and B stored n x k and used transposed
//! (`-wt`: a linear layer's `x·Wᵀ`; ndarray gets the same bytes as a transposed view, and
//! faer's own column-major B is those bytes).
//! `cargo bench -p trueno-bench --bench gemm`, then `cargo run -p trueno-bench --bin gemm-report`.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, Par};
use trueno::{Matrix, Transpose};

/// (m, n, k, label, B stored n x k and used transposed)
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
        g.bench_with_input(BenchmarkId::new("faer-1t", &label), &(), |bch, _| {
            bch.iter(|| {
                matmul(
                    fc.as_mut(),
                    Accum::Replace,
                    fa.as_ref(),
                    fb.as_ref(),
                    1.0f32,
                    Par::Seq,
                )
            })
        });
        let threads = rayon::current_num_threads();
        g.bench_with_input(BenchmarkId::new("faer-all", &label), &(), |bch, _| {
            bch.iter(|| {
                matmul(
                    fc.as_mut(),
                    Accum::Replace,
                    fa.as_ref(),
                    fb.as_ref(),
                    1.0f32,
                    Par::rayon(threads),
                )
            })
        });
    }
    g.finish();
}

/// Transpose against ndarray's `t().as_standard_layout()` (trueno as the engine runs it,
/// split across threads from 512K floats, and on one thread), and GEMV against the read
/// bandwidth it is bound by (trueno's sum over the same 64 MB, one thread and all), with
/// the matrix partly in L3 (calls back to back) and from memory (`-cold`).
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
    // The same four from memory: the 64 MB matrix is only twice a 32 MB L3, so calls
    // repeated back to back find part of it still in L3, by an amount that depends on
    // the order they read it in (on the Zen 5 VM the sum ran 55-60 GB/s warm against 43
    // cold, and the two-thread GEMV above outran the two-thread sum). A layer's weights
    // come from memory in an inference step; each call here follows a read of three
    // L3s of other data, not timed.
    let other = vec![1.0f32; (3 * trueno::gemm::CacheSizes::detect().l3).max(64 << 20) / 4];
    let evict = || {
        std::hint::black_box(e.sum(&other).unwrap());
    };
    let cold = |iters: u64, f: &mut dyn FnMut()| {
        (0..iters)
            .map(|_| {
                evict();
                let t0 = std::time::Instant::now();
                f();
                t0.elapsed()
            })
            .sum::<std::time::Duration>()
    };
    g.bench_with_input(BenchmarkId::new("gemv-trueno-1t-cold", n), &(), |bch, _| {
        bch.iter_custom(|iters| {
            one.install(|| {
                cold(iters, &mut || {
                    e.gemv(1.0, a.view(), &x, 0.0, &mut y).unwrap()
                })
            })
        })
    });
    g.bench_with_input(
        BenchmarkId::new("gemv-trueno-all-cold", n),
        &(),
        |bch, _| {
            bch.iter_custom(|iters| {
                cold(iters, &mut || {
                    e.gemv(1.0, a.view(), &x, 0.0, &mut y).unwrap()
                })
            })
        },
    );
    let sum = || {
        std::hint::black_box(e.sum(a.as_slice()).unwrap());
    };
    g.bench_with_input(BenchmarkId::new("read-sum-1t-cold", n), &(), |bch, _| {
        bch.iter_custom(|iters| one.install(|| cold(iters, &mut { sum })))
    });
    g.bench_with_input(BenchmarkId::new("read-sum-all-cold", n), &(), |bch, _| {
        bch.iter_custom(|iters| cold(iters, &mut { sum }))
    });
    g.finish();
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
