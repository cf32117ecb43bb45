//! Size-based GPU routing (feature `gpu`): work below a crossover stays on the CPU, work at
//! or above it runs on the GPU (seen as a shader compiled on the shared device) and agrees
//! with the scalar backend; the measured crossover is the size from which every larger
//! measurement had the GPU ahead. Built only with the `gpu` feature (Cargo.toml); skipped,
//! with a note, without an adapter (required when `TRUENO_REQUIRE_WGPU` is set).

mod common;

use common::*;
use trueno::gpu::{Crossover, Workload};
use trueno::{Backend, Engine, Matrix, OpClass, Transpose};

/// One test: it counts the shared device's compiled shaders, so nothing else in this
/// binary may run GPU ops beside it.
#[test]
fn crossover_routes_by_size_and_the_measurement_backs_it() {
    if gpu_engine().is_none() {
        return;
    }
    let gpu = trueno::gpu::shared().unwrap();
    let scalar = Engine::new(Backend::Scalar).unwrap();
    let c: Crossover = "elementwise=1000,transcendental=1000,reduction=1000,matmul=8000,gemv=never"
        .parse()
        .unwrap();
    let e = Engine::auto().with_gpu_crossover(c);
    assert!(!e.on_gpu(OpClass::Elementwise, 999));
    assert!(e.on_gpu(OpClass::Elementwise, 1000));
    assert!(!e.on_gpu(OpClass::Conversion, usize::MAX));
    assert_eq!(
        e.backend(OpClass::Elementwise),
        Engine::auto().backend(OpClass::Elementwise)
    );

    // hardswish and mish are used nowhere else in this binary: their first GPU run compiles
    // a shader, a CPU run does not.
    let mut rng = Rng::new(41);
    for (n, on_gpu) in [(999, false), (1000, true)] {
        let x = rng.vec(n, -6.0, 6.0);
        let (mut got, mut want) = (vec![f32::NAN; n], vec![f32::NAN; n]);
        let before = gpu.compiled_pipelines();
        e.hardswish_into(&x, &mut got).unwrap();
        assert_eq!(
            gpu.compiled_pipelines() > before,
            on_gpu,
            "hardswish at {n}"
        );
        scalar.hardswish_into(&x, &mut want).unwrap();
        assert_all_close(&format!("hardswish {n}"), &got, &want, 1e-6, 1e-30);

        let before = gpu.compiled_pipelines();
        let s = e.norm_l1(&x).unwrap();
        assert_eq!(gpu.compiled_pipelines() > before, on_gpu, "norm_l1 at {n}");
        let exact: f64 = x.iter().map(|v| v.abs() as f64).sum();
        assert!(
            (s as f64 - exact).abs() <= 1e-5 * exact,
            "norm_l1 {n}: {s} vs {exact}"
        );
    }

    // GEMM: 19 x 20 x 21 = 7980 multiply-adds stays on the CPU, 20^3 = 8000 goes; with a
    // transposed, strided A and beta != 0, which the route handles on the host.
    for (m, n, k, on_gpu) in [(19, 20, 21, false), (20, 20, 20, true)] {
        let a_t = Matrix::from_fn(k, m + 3, |i, j| ((i * 7 + j * 5) % 11) as f32 - 5.0).unwrap();
        let a = a_t.view().sub(0, 0, k, m).unwrap();
        let b = Matrix::from_fn(k, n, |i, j| ((i * 3 + j) % 7) as f32 * 0.25).unwrap();
        let c0 = Matrix::from_fn(m, n, |i, j| (i + j) as f32).unwrap();
        let (mut got, mut want) = (c0.clone(), c0.clone());
        let before = gpu.compiled_pipelines();
        let (ta, tb) = (Transpose::Yes, Transpose::No);
        e.gemm(1.5, a, ta, b.view(), tb, -0.5, &mut got.view_mut())
            .unwrap();
        assert_eq!(
            gpu.compiled_pipelines() > before,
            on_gpu,
            "gemm {m}x{n}x{k}"
        );
        for i in 0..m {
            for j in 0..n {
                let dot: f64 = (0..k)
                    .map(|p| a.get(p, i).unwrap() as f64 * b.get(p, j).unwrap() as f64)
                    .sum();
                want.as_mut_slice()[i * n + j] =
                    (1.5 * dot - 0.5 * c0.get(i, j).unwrap() as f64) as f32;
            }
        }
        assert_all_close("gemm", got.as_slice(), want.as_slice(), 1e-5, 1e-4);
    }
    // gemv=never: a large GEMV stays on the CPU.
    let before = gpu.compiled_pipelines();
    let a = Matrix::from_fn(300, 300, |i, j| (i as f32 - j as f32) * 1e-3).unwrap();
    let mut y = vec![0.0; 300];
    e.gemv(1.0, a.view(), &vec![1.0; 300], 0.0, &mut y).unwrap();
    assert_eq!(
        gpu.compiled_pipelines(),
        before,
        "gemv=never ran on the GPU"
    );

    // A forced GPU engine runs an input past one storage binding on the CPU (the upload
    // would fail) and gets it right; the same op on a small input compiles its shader,
    // so the count above would have seen a GPU run. `max` runs nowhere else before here.
    let forced = Engine::new(Backend::Gpu).unwrap();
    let limit = gpu.info().max_binding_bytes;
    if limit <= 256 << 20 {
        let n = (limit / 4) as usize + 1;
        let mut x = rng.vec(n, -1.0, 1.0);
        x[n / 3] = 2.0;
        let before = gpu.compiled_pipelines();
        assert_eq!(forced.max(&x).unwrap(), 2.0);
        assert_eq!(
            gpu.compiled_pipelines(),
            before,
            "max over the binding on the GPU"
        );
        drop(x);
        assert_eq!(forced.max(&[0.5, -3.0, 1.5]).unwrap(), 1.5);
        assert!(
            gpu.compiled_pipelines() > before,
            "small max not on the GPU"
        );
    } else {
        eprintln!("note: a {limit}-byte binding: the input past it not tried (too large)");
    }

    // The measurement: every workload measured at growing sizes, and each threshold the
    // smallest measured work from which the GPU won every larger measurement.
    let report = Crossover::measure(gpu, &Engine::auto()).unwrap();
    println!("{report}");
    for w in Workload::ALL {
        let s: Vec<_> = report.samples.iter().filter(|s| s.workload == w).collect();
        assert!(!s.is_empty(), "{} not measured", w.name());
        assert!(s.windows(2).all(|p| p[0].work < p[1].work));
        let gpu_won = |t: usize| s.iter().filter(|x| x.work >= t).all(|x| x.gpu < x.cpu);
        match report.crossover.threshold(w) {
            Some(t) => {
                assert!(
                    s.iter().any(|x| x.work == t),
                    "{}: {t} not a sample",
                    w.name()
                );
                assert!(gpu_won(t), "{}: lost above {t}", w.name());
                let below = s.iter().rfind(|x| x.work < t);
                assert!(
                    below.is_none_or(|x| x.gpu >= x.cpu),
                    "{}: won below {t}",
                    w.name()
                );
            }
            None => assert!(
                s.last().unwrap().gpu >= s.last().unwrap().cpu,
                "{}",
                w.name()
            ),
        }
    }
}
