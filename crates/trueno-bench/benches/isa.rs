//! AVX-512 against AVX2 per operation class, on the same data in one run: the evidence for
//! `OpClass::preferred_backend` (`AVX512_WINS` in crates/trueno/src/backend.rs).
//!
//! `cargo bench -p trueno-bench --bench isa`; skipped (prints why) on CPUs without both.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::time::Duration;
use trueno::{Backend, Engine};

struct Bufs {
    a: Vec<f32>,
    b: Vec<f32>,
    out: Vec<f32>,
    half: Vec<u16>,
}

type Run = fn(&Engine, &mut Bufs);

fn cases() -> Vec<(&'static str, &'static str, u64, Run)> {
    vec![
        ("elementwise", "add", 12, |e, d| {
            e.add_into(&d.a, &d.b, &mut d.out).unwrap()
        }),
        ("elementwise", "relu", 8, |e, d| {
            e.relu_into(&d.a, &mut d.out).unwrap()
        }),
        ("elementwise", "scale", 8, |e, d| {
            e.scale_into(&d.a, 1.5, &mut d.out).unwrap()
        }),
        ("transcendental", "exp", 8, |e, d| {
            e.exp_into(&d.a, &mut d.out).unwrap()
        }),
        ("transcendental", "gelu", 8, |e, d| {
            e.gelu_into(&d.a, &mut d.out).unwrap()
        }),
        ("transcendental", "softmax", 8, |e, d| {
            e.softmax_into(&d.a, &mut d.out).unwrap()
        }),
        ("reduction", "sum", 4, |e, d| {
            black_box(e.sum(&d.a).unwrap());
        }),
        ("reduction", "dot", 8, |e, d| {
            black_box(e.dot(&d.a, &d.b).unwrap());
        }),
        ("reduction", "argmax", 4, |e, d| {
            black_box(e.argmax(&d.a).unwrap());
        }),
        ("conversion", "to_f16", 6, |e, d| {
            e.f32_to_f16(&d.a, &mut d.half).unwrap()
        }),
        ("conversion", "from_f16", 6, |e, d| {
            e.f16_to_f32(&d.half, &mut d.out).unwrap()
        }),
        ("conversion", "to_bf16", 6, |e, d| {
            e.f32_to_bf16(&d.a, &mut d.half).unwrap()
        }),
    ]
}

fn bench(c: &mut Criterion) {
    let (Ok(avx2), Ok(avx512)) = (Engine::new(Backend::Avx2), Engine::new(Backend::Avx512)) else {
        eprintln!("isa bench skipped: this CPU lacks AVX2 or AVX-512");
        return;
    };
    for n in [1_000usize, 10_000, 100_000, 1_000_000] {
        let mut d = Bufs {
            a: (0..n)
                .map(|i| ((i * 7919) % 6000) as f32 / 1000.0 - 3.0)
                .collect(),
            b: (0..n)
                .map(|i| ((i * 104_729) % 6000) as f32 / 1000.0 - 3.0)
                .collect(),
            out: vec![0.0; n],
            half: vec![0x3c00; n],
        };
        for (class, op, bytes, run) in cases() {
            let mut g = c.benchmark_group(format!("isa/{class}/{op}"));
            g.warm_up_time(Duration::from_millis(200))
                .measurement_time(Duration::from_millis(800))
                .sample_size(20);
            g.throughput(Throughput::Bytes(bytes * n as u64));
            for (name, e) in [("avx2", &avx2), ("avx512", &avx512)] {
                g.bench_with_input(BenchmarkId::new(name, n), &n, |bch, _| {
                    bch.iter(|| run(e, &mut d))
                });
            }
        }
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
