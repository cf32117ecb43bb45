//! trueno against ndarray 0.17 (its idiomatic allocation-free forms) on the same data in
//! the same run, plus a memcpy of the input as the memory-bandwidth limit.
//!
//! `cargo bench -p trueno-bench --bench vector_ops`, then
//! `cargo run -p trueno-bench --bin bench-report` for the markdown table.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use ndarray::{Array1, Zip};
use std::hint::black_box;
use std::time::Duration;
use trueno::Engine;

const SIZES: [usize; 5] = [1_000, 10_000, 100_000, 1_000_000, 10_000_000];

struct Data {
    a: Array1<f32>,
    b: Array1<f32>,
    out: Array1<f32>,
}

fn data(n: usize) -> Data {
    // Inputs in [-3, 3]: the range activations see in practice; no special values.
    let a = Array1::from_iter((0..n).map(|i| ((i * 7919) % 6000) as f32 / 1000.0 - 3.0));
    let b = Array1::from_iter((0..n).map(|i| ((i * 104_729) % 6000) as f32 / 1000.0 - 3.0));
    Data {
        a,
        b,
        out: Array1::zeros(n),
    }
}

type Side = fn(&Engine, &mut Data);

/// One row of the comparison: the op, the bytes it moves per element, trueno, ndarray.
struct Op {
    name: &'static str,
    bytes: u64,
    trueno: Side,
    ndarray: Side,
}

fn s(a: &Array1<f32>) -> &[f32] {
    a.as_slice().expect("contiguous")
}

fn gelu_tanh(x: f32) -> f32 {
    0.5 * x * (1.0 + (0.797_884_6 * (x + 0.044_715 * x * x * x)).tanh())
}

fn ops() -> Vec<Op> {
    vec![
        Op {
            name: "add",
            bytes: 12,
            trueno: |e, d| {
                e.add_into(s(&d.a), s(&d.b), d.out.as_slice_mut().unwrap())
                    .unwrap()
            },
            ndarray: |_, d| {
                Zip::from(&mut d.out)
                    .and(&d.a)
                    .and(&d.b)
                    .for_each(|o, &x, &y| *o = x + y)
            },
        },
        Op {
            name: "mul",
            bytes: 12,
            trueno: |e, d| {
                e.mul_into(s(&d.a), s(&d.b), d.out.as_slice_mut().unwrap())
                    .unwrap()
            },
            ndarray: |_, d| {
                Zip::from(&mut d.out)
                    .and(&d.a)
                    .and(&d.b)
                    .for_each(|o, &x, &y| *o = x * y)
            },
        },
        Op {
            name: "dot",
            bytes: 8,
            trueno: |e, d| {
                black_box(e.dot(s(&d.a), s(&d.b)).unwrap());
            },
            ndarray: |_, d| {
                black_box(d.a.dot(&d.b));
            },
        },
        Op {
            name: "sum",
            bytes: 4,
            trueno: |e, d| {
                black_box(e.sum(s(&d.a)).unwrap());
            },
            ndarray: |_, d| {
                black_box(d.a.sum());
            },
        },
        Op {
            name: "max",
            bytes: 4,
            trueno: |e, d| {
                black_box(e.max(s(&d.a)).unwrap());
            },
            ndarray: |_, d| {
                black_box(d.a.fold(f32::NEG_INFINITY, |m, &x| m.max(x)));
            },
        },
        Op {
            name: "argmax",
            bytes: 4,
            trueno: |e, d| {
                black_box(e.argmax(s(&d.a)).unwrap());
            },
            ndarray: |_, d| {
                let best =
                    d.a.iter()
                        .enumerate()
                        .fold((0, f32::NEG_INFINITY), |(bi, bv), (i, &v)| {
                            if v > bv { (i, v) } else { (bi, bv) }
                        });
                black_box(best);
            },
        },
        Op {
            name: "relu",
            bytes: 8,
            trueno: |e, d| e.relu_into(s(&d.a), d.out.as_slice_mut().unwrap()).unwrap(),
            ndarray: |_, d| {
                Zip::from(&mut d.out)
                    .and(&d.a)
                    .for_each(|o, &x| *o = x.max(0.0))
            },
        },
        Op {
            name: "exp",
            bytes: 8,
            trueno: |e, d| e.exp_into(s(&d.a), d.out.as_slice_mut().unwrap()).unwrap(),
            ndarray: |_, d| {
                Zip::from(&mut d.out)
                    .and(&d.a)
                    .for_each(|o, &x| *o = x.exp())
            },
        },
        Op {
            name: "sigmoid",
            bytes: 8,
            trueno: |e, d| {
                e.sigmoid_into(s(&d.a), d.out.as_slice_mut().unwrap())
                    .unwrap()
            },
            ndarray: |_, d| {
                Zip::from(&mut d.out)
                    .and(&d.a)
                    .for_each(|o, &x| *o = 1.0 / (1.0 + (-x).exp()))
            },
        },
        Op {
            name: "tanh",
            bytes: 8,
            trueno: |e, d| e.tanh_into(s(&d.a), d.out.as_slice_mut().unwrap()).unwrap(),
            ndarray: |_, d| {
                Zip::from(&mut d.out)
                    .and(&d.a)
                    .for_each(|o, &x| *o = x.tanh())
            },
        },
        Op {
            name: "gelu",
            bytes: 8,
            trueno: |e, d| e.gelu_into(s(&d.a), d.out.as_slice_mut().unwrap()).unwrap(),
            ndarray: |_, d| {
                Zip::from(&mut d.out)
                    .and(&d.a)
                    .for_each(|o, &x| *o = gelu_tanh(x))
            },
        },
        Op {
            name: "softmax",
            bytes: 8,
            trueno: |e, d| {
                e.softmax_into(s(&d.a), d.out.as_slice_mut().unwrap())
                    .unwrap()
            },
            ndarray: |_, d| {
                let m = d.a.fold(f32::NEG_INFINITY, |m, &x| m.max(x));
                Zip::from(&mut d.out)
                    .and(&d.a)
                    .for_each(|o, &x| *o = (x - m).exp());
                let total = d.out.sum();
                d.out.mapv_inplace(|v| v / total);
            },
        },
        Op {
            name: "norm_l2",
            bytes: 4,
            trueno: |e, d| {
                black_box(e.norm_l2(s(&d.a)).unwrap());
            },
            ndarray: |_, d| {
                black_box(d.a.dot(&d.a).sqrt());
            },
        },
    ]
}

fn configure(
    c: &mut Criterion,
    n: usize,
) -> criterion::BenchmarkGroup<'_, criterion::measurement::WallTime> {
    let _ = n;
    let mut g = c.benchmark_group("ops");
    g.warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(1200))
        .sample_size(20);
    g
}

fn bench(c: &mut Criterion) {
    let engine = *trueno::engine().expect("trueno engine");
    let only: Vec<String> = std::env::var("TRUENO_BENCH_OPS")
        .map(|v| v.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    for &n in &SIZES {
        let mut d = data(n);
        {
            let mut g = configure(c, n);
            g.throughput(Throughput::Bytes(8 * n as u64));
            g.bench_with_input(BenchmarkId::new("copy/memcpy", n), &n, |bch, _| {
                bch.iter(|| d.out.as_slice_mut().unwrap().copy_from_slice(s(&d.a)))
            });
            // The same copy on every core (rayon): the bandwidth limit for trueno's
            // threaded paths, which split inputs above 512K elements.
            g.bench_with_input(BenchmarkId::new("copy/parallel", n), &n, |bch, _| {
                use rayon::prelude::*;
                let chunk = n.div_ceil(rayon::current_num_threads()).max(4096);
                bch.iter(|| {
                    let src = s(&d.a);
                    d.out
                        .as_slice_mut()
                        .unwrap()
                        .par_chunks_mut(chunk)
                        .zip(src.par_chunks(chunk))
                        .for_each(|(o, i)| o.copy_from_slice(i))
                })
            });
        }
        for op in ops() {
            if !only.is_empty() && !only.iter().any(|o| o == op.name) {
                continue;
            }
            let mut g = configure(c, n);
            g.throughput(Throughput::Bytes(op.bytes * n as u64));
            g.bench_with_input(
                BenchmarkId::new(format!("{}/trueno", op.name), n),
                &n,
                |bch, _| bch.iter(|| (op.trueno)(&engine, &mut d)),
            );
            g.bench_with_input(
                BenchmarkId::new(format!("{}/ndarray", op.name), n),
                &n,
                |bch, _| bch.iter(|| (op.ndarray)(&engine, &mut d)),
            );
        }
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
