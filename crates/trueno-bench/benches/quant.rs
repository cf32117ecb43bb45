//! Quantized matvec against its peers in the same run: the fused kernel (integer dots on
//! Q8-quantized activations), dequantize-then-f32 GEMV (trueno's own, the fair "no fused
//! kernel" baseline), and a read loop over the same quantized bytes (the bandwidth limit);
//! one thread and all threads. Plus dequantization throughput per format.
//!
//! `cargo bench -p trueno-bench --bench quant`, then `cargo run --release -p trueno-bench
//! --bin quant-report` for the BENCHMARKS.md table.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rayon::prelude::*;
use trueno_quant::{MatvecPath, QuantFormat, dequantize, matvec, quantize_rows};

/// Deterministic weights with a realistic spread (no RNG dependency).
fn weights(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let h = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
            (h as f32 / (1u64 << 24) as f32 - 0.5) * 0.2
        })
        .collect()
}

/// Sums the bytes as u64 words: every byte read once, nothing else done.
fn read_words(b: &[u8]) -> u64 {
    b.chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .fold(0u64, u64::wrapping_add)
}

fn read_all(b: &[u8], parallel: bool) -> u64 {
    if parallel {
        b.par_chunks(1 << 20)
            .map(read_words)
            .reduce(|| 0, u64::wrapping_add)
    } else {
        read_words(b)
    }
}

const SHAPES: [(usize, usize); 3] = [(4096, 4096), (11008, 4096), (32000, 4096)];
const FORMATS: [QuantFormat; 3] = [QuantFormat::Q4K, QuantFormat::Q6K, QuantFormat::Q8_0];

fn bench_matvec(c: &mut Criterion) {
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("1-thread pool");
    let e = trueno::engine().expect("engine");
    let mut g = c.benchmark_group("quant_matvec");
    g.sample_size(10)
        .warm_up_time(std::time::Duration::from_millis(300))
        .measurement_time(std::time::Duration::from_secs(2));
    for (rows, cols) in SHAPES {
        let wf = weights(rows * cols);
        let x: Vec<f32> = weights(cols).iter().map(|v| v * 10.0).collect();
        let mut y = vec![0.0f32; rows];
        let mut deq = vec![0.0f32; rows * cols];
        for format in FORMATS {
            let q = quantize_rows(format, &wf, cols).expect("quantize");
            let label = format!("{format}-{rows}x{cols}");
            let rb = format.row_bytes(cols).expect("whole blocks");
            // Throughput in bytes of quantized weights: the read-bandwidth view.
            g.throughput(Throughput::Bytes(q.len() as u64));
            for (threads, pool) in [("1t", Some(&one)), ("all", None)] {
                let run = |f: &mut (dyn FnMut() + Send)| match pool {
                    Some(p) => p.install(f),
                    None => f(),
                };
                g.bench_function(BenchmarkId::new(format!("fused-{threads}"), &label), |b| {
                    b.iter(|| {
                        run(&mut || {
                            matvec(format, &q, rows, cols, &x, &mut y, MatvecPath::Int8).unwrap()
                        })
                    })
                });
                g.bench_function(
                    BenchmarkId::new(format!("dequant-gemv-{threads}"), &label),
                    |b| {
                        b.iter(|| {
                            run(&mut || {
                                // Dequantized in 64-row slabs, in parallel on "all".
                                let slabs =
                                    deq.par_chunks_mut(64 * cols).zip(q.par_chunks(64 * rb));
                                if pool.is_none() {
                                    slabs.for_each(|(o, b)| dequantize(format, b, o).unwrap());
                                } else {
                                    dequantize(format, &q, &mut deq).unwrap();
                                }
                                let a = trueno::MatRef::new(&deq, rows, cols, cols).unwrap();
                                e.gemv(1.0, a, &x, 0.0, &mut y).unwrap();
                            })
                        })
                    },
                );
                g.bench_function(BenchmarkId::new(format!("read-{threads}"), &label), |b| {
                    b.iter(|| {
                        run(&mut || {
                            std::hint::black_box(read_all(&q, pool.is_none()));
                        })
                    })
                });
            }
        }
    }
    g.finish();
}

fn bench_dequantize(c: &mut Criterion) {
    let mut g = c.benchmark_group("quant_dequantize");
    g.sample_size(10)
        .warm_up_time(std::time::Duration::from_millis(300))
        .measurement_time(std::time::Duration::from_secs(1));
    // 1M weights: the f32 output (4 MB) stays in L2/L3, so this measures the kernel.
    let n = 1 << 20;
    let wf = weights(n);
    let mut out = vec![0.0f32; n];
    for format in QuantFormat::ALL {
        let q = quantize_rows(format, &wf, 1 << 12).expect("quantize");
        g.throughput(Throughput::Bytes((n * 4) as u64));
        g.bench_function(BenchmarkId::new("dequantize", format.to_string()), |b| {
            b.iter(|| dequantize(format, &q, &mut out).unwrap())
        });
    }
    g.finish();
}

criterion_group!(benches, bench_matvec, bench_dequantize);
criterion_main!(benches);
