//! Every kernel on the GPU against its CPU reference: random data at ragged shapes (1,
//! primes, tile sizes ± 1), special values, and the errors that must come before a launch.
//!
//! Without a CUDA device each test prints SKIPPED and passes; `TRUENO_REQUIRE_GPU=1`
//! turns a missing device into a failure (the device runs set it). `TRUENO_GPU_SMALL=1`
//! keeps sizes small (for compute-sanitizer, which runs kernels far slower).

mod common;
use common::device::{POISON, Rng, assert_close, ctx, poisoned, small};
use trueno_gpu::GpuError;
use trueno_gpu::driver::{Context, KernelArg, load_raw_ptx};
use trueno_gpu::kernels::elementwise::ElementwiseOp;
use trueno_gpu::kernels::gemm::{self, GemmVariant};
use trueno_gpu::kernels::{Family, LaunchConfig, norm, reduce, softmax};
use trueno_gpu::memory::DeviceBuffer;

const SIZES: [usize; 14] = [
    1,
    2,
    3,
    4,
    5,
    7,
    31,
    33,
    255,
    257,
    1021,
    4099,
    100_003,
    (1 << 20) + 3,
];

#[test]
fn elementwise_ops_match_the_cpu_reference_at_ragged_sizes() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(1);
    let sizes: &[usize] = if small() { &SIZES[..11] } else { &SIZES };
    for op in ElementwiseOp::ALL {
        // Exact for the arithmetic ops; the transcendental ones go through ex2.approx.
        let rel = if matches!(
            op,
            ElementwiseOp::Gelu | ElementwiseOp::Silu | ElementwiseOp::Swiglu
        ) {
            3e-5
        } else {
            0.0
        };
        for &n in sizes {
            let mut x = rng.vec(n, -9.0, 9.0);
            let y = rng.vec(n, -4.0, 4.0);
            // Special values at the front where they fit.
            let specials = [
                f32::NAN,
                f32::INFINITY,
                f32::NEG_INFINITY,
                -0.0,
                1e-40,
                -1e-40,
                80.0,
                -80.0,
            ];
            for (d, s) in x.iter_mut().zip(specials) {
                *d = s;
            }
            let alpha = 1.75f32;
            let want: Vec<f32> = x
                .iter()
                .zip(&y)
                .map(|(&a, &b)| op.reference(a, b, alpha))
                .collect();
            let dx = ctx.upload(&x).unwrap();
            let dy = ctx.upload(&y).unwrap();
            let mut out = poisoned(&ctx, n);
            let mut s = ctx.stream().unwrap().record();
            s.elementwise(op, &dx, op.is_binary().then_some(&dy), &out, alpha)
                .unwrap();
            s.sync().unwrap();
            assert_close(
                &format!("{} n={n}", op.name()),
                &out.to_vec().unwrap(),
                &want,
                rel,
                1e-37,
            );
        }
    }
}

#[test]
fn reductions_match_the_cpu_reference_and_propagate_nan() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(2);
    let mut sizes = SIZES.to_vec();
    if !small() {
        sizes.push(16 * 1024 * 1024 + 5);
    }
    for &n in &sizes {
        let x = rng.vec(n, -2.0, 3.0);
        let dx = ctx.upload(&x).unwrap();
        let mut sum = poisoned(&ctx, 1);
        let mut max = poisoned(&ctx, 1);
        let mut arg = ctx.alloc::<u32>(1).unwrap();
        let mut s = ctx.stream().unwrap().record();
        s.sum(&dx, &sum).unwrap();
        s.max(&dx, &max).unwrap();
        s.argmax(&dx, &arg).unwrap();
        s.sync().unwrap();
        let abs_sum: f64 = x.iter().map(|v| v.abs() as f64).sum();
        let got = sum.to_vec().unwrap()[0] as f64;
        assert!(
            (got - reduce::reference_sum(&x)).abs() <= 1e-6 * abs_sum + 1e-6,
            "sum n={n}: {got}"
        );
        assert_eq!(
            max.to_vec().unwrap()[0],
            reduce::reference_max(&x),
            "max n={n}"
        );
        assert_eq!(
            Some(arg.to_vec().unwrap()[0] as usize),
            reduce::reference_argmax(&x),
            "argmax n={n}"
        );
    }
    // Ties go to the first index; NaN wins and propagates; all -inf gives index 0.
    let cases: Vec<Vec<f32>> = vec![
        vec![1.0; 5000],
        {
            let mut v = rng.vec(70_001, -1.0, 1.0);
            v[12_345] = f32::NAN;
            v[50_000] = f32::NAN;
            v
        },
        vec![f32::NEG_INFINITY; 333],
        {
            let mut v = rng.vec(9_999, -1.0, 1.0);
            v[9_998] = 5.0;
            v[7] = 5.0;
            v
        },
    ];
    for x in cases {
        let dx = ctx.upload(&x).unwrap();
        let mut max = poisoned(&ctx, 1);
        let mut arg = ctx.alloc::<u32>(1).unwrap();
        let mut s = ctx.stream().unwrap().record();
        s.max(&dx, &max).unwrap();
        s.argmax(&dx, &arg).unwrap();
        s.sync().unwrap();
        let (m, want_m) = (max.to_vec().unwrap()[0], reduce::reference_max(&x));
        assert!(
            m == want_m || (m.is_nan() && want_m.is_nan()),
            "max {m} vs {want_m}"
        );
        assert_eq!(
            Some(arg.to_vec().unwrap()[0] as usize),
            reduce::reference_argmax(&x)
        );
    }
}

const ROW_SHAPES: [(usize, usize); 14] = [
    (1, 1),
    (3, 7),
    (5, 31),
    (7, 32),
    (9, 33),
    (17, 100),
    (2, 1023),
    (3, 1024),
    (4, 1025),
    (2, 4099),
    (3, 8192),
    (1, 32771),
    (13, 128),
    (67, 4096),
];

#[test]
fn softmax_matches_the_cpu_reference() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(3);
    for (rows, cols) in ROW_SHAPES {
        let mut x = rng.vec(rows * cols, -20.0, 20.0);
        if rows > 2 {
            x[cols] = f32::NAN; // row 1 becomes NaN
            x[2 * cols] = f32::NEG_INFINITY; // a zero in row 2
        }
        let want = softmax::reference(&x, cols);
        let dx = ctx.upload(&x).unwrap();
        let mut out = poisoned(&ctx, rows * cols);
        let mut s = ctx.stream().unwrap().record();
        s.softmax(&dx, &out, rows, cols).unwrap();
        s.sync().unwrap();
        assert_close(
            &format!("softmax {rows}x{cols}"),
            &out.to_vec().unwrap(),
            &want,
            2e-5,
            1e-9,
        );
    }
}

#[test]
fn norms_match_the_cpu_reference() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(4);
    let eps = 1e-5;
    for (rows, cols) in ROW_SHAPES {
        let x = rng.vec(rows * cols, -3.0, 5.0);
        let r = rng.vec(rows * cols, -1.0, 1.0);
        let g = rng.vec(cols, 0.5, 1.5);
        let bt = rng.vec(cols, -0.5, 0.5);
        let (dx, dr, dg, db) = (
            ctx.upload(&x).unwrap(),
            ctx.upload(&r).unwrap(),
            ctx.upload(&g).unwrap(),
            ctx.upload(&bt).unwrap(),
        );
        let n = rows * cols;
        let (mut ln, mut rms, mut fused, mut h) = (
            poisoned(&ctx, n),
            poisoned(&ctx, n),
            poisoned(&ctx, n),
            poisoned(&ctx, n),
        );
        let mut s = ctx.stream().unwrap().record();
        s.layernorm(&dx, &dg, &db, &ln, rows, cols, eps).unwrap();
        s.rmsnorm(&dx, &dg, &rms, rows, cols, eps).unwrap();
        s.add_rmsnorm(&dx, &dr, &dg, &fused, &h, rows, cols, eps)
            .unwrap();
        s.sync().unwrap();
        let what = format!("{rows}x{cols}");
        assert_close(
            &format!("layernorm {what}"),
            &ln.to_vec().unwrap(),
            &norm::reference_layernorm(&x, &g, &bt, eps),
            2e-5,
            2e-5,
        );
        assert_close(
            &format!("rmsnorm {what}"),
            &rms.to_vec().unwrap(),
            &norm::reference_rmsnorm(&x, &g, eps),
            2e-5,
            2e-6,
        );
        let hs: Vec<f32> = x.iter().zip(&r).map(|(a, b)| a + b).collect();
        assert_close(
            &format!("add_rmsnorm sum {what}"),
            &h.to_vec().unwrap(),
            &hs,
            0.0,
            0.0,
        );
        assert_close(
            &format!("add_rmsnorm {what}"),
            &fused.to_vec().unwrap(),
            &norm::reference_rmsnorm(&hs, &g, eps),
            2e-5,
            2e-6,
        );
    }
}

#[test]
fn gemm_matches_the_cpu_reference_at_ragged_shapes() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(5);
    let mut shapes = vec![
        (1, 1, 1),
        (1, 7, 3),
        (17, 19, 23),
        (127, 129, 131),
        (128, 128, 128),
        (129, 127, 8),
        (257, 255, 33),
        (1, 1000, 513),
        (300, 1, 77),
        (5, 6, 1),
        // Whole tiles (n a multiple of 4) beside ragged rows, columns and a short last k-tile.
        (300, 260, 100),
    ];
    if !small() {
        shapes.push((521, 263, 1031));
    }
    for (m, n, k) in shapes {
        let a = rng.vec(m * k, -1.0, 1.0);
        let b = rng.vec(k * n, -1.0, 1.0);
        let want = gemm::reference(&a, &b, m, n, k);
        let (da, db) = (ctx.upload(&a).unwrap(), ctx.upload(&b).unwrap());
        // Each kernel as given (uncut), then `gemm`'s own choice of kernel and cut.
        for (v, routed) in SGEMM_RUNS {
            let got = run_sgemm(&ctx, (v, routed), (&da, &db), (m, n, k));
            assert!(
                got.iter().all(|v| v.to_bits() != POISON),
                "{v:?} {m}x{n}x{k}: unwritten output"
            );
            let num: f64 = got
                .iter()
                .zip(&want)
                .map(|(g, w)| (*g as f64 - *w as f64).powi(2))
                .sum();
            let den: f64 = want.iter().map(|w| (*w as f64).powi(2)).sum();
            let rel = (num / den.max(1e-30)).sqrt();
            assert!(rel < 1e-5, "{v:?} {m}x{n}x{k}: relative error {rel:e}");
        }
    }
    // NaN in A row 0 poisons exactly C row 0.
    let (m, n, k) = (70, 65, 40);
    let mut a = rng.vec(m * k, -1.0, 1.0);
    a[3] = f32::NAN;
    let b = rng.vec(k * n, -1.0, 1.0);
    let (da, db) = (ctx.upload(&a).unwrap(), ctx.upload(&b).unwrap());
    for (v, routed) in SGEMM_RUNS {
        let got = run_sgemm(&ctx, (v, routed), (&da, &db), (m, n, k));
        only_row0_is_nan(&got, n, v);
    }
}

/// A NaN in A's row 0 poisons exactly C's row 0 (`n` wide).
fn only_row0_is_nan(got: &[f32], n: usize, v: GemmVariant) {
    assert!(
        got[..n].iter().all(|x| x.is_nan()),
        "{v:?}: row 0 must be NaN"
    );
    assert!(
        got[n..].iter().all(|x| x.is_finite()),
        "{v:?}: other rows finite"
    );
}

/// The SGEMM kernels run by the tests: each as given (`false`, through `gemm_split`
/// uncut), and `Tiled` as `gemm` routes it (`true`).
const SGEMM_RUNS: [(GemmVariant, bool); 4] = [
    (GemmVariant::Naive, true),
    (GemmVariant::Tiled, false),
    (GemmVariant::TiledSliced, false),
    (GemmVariant::Tiled, true),
];

/// One of [`SGEMM_RUNS`] into a poisoned output, read back.
fn run_sgemm(
    ctx: &Context,
    (v, routed): (GemmVariant, bool),
    (a, b): (&DeviceBuffer<f32>, &DeviceBuffer<f32>),
    (m, n, k): (usize, usize, usize),
) -> Vec<f32> {
    let mut c = poisoned(ctx, m * n);
    let mut s = ctx.stream().unwrap().record();
    match routed {
        true => s.gemm(v, a, b, &c, m, n, k).unwrap(),
        false => s.gemm_split(v, 1, a, b, &c, m, n, k).unwrap(),
    }
    s.sync().unwrap();
    c.to_vec().unwrap()
}

/// Both tiled GEMMs with k cut into ranges (forced): ragged shapes, more ranges than
/// k-tiles (empty ranges add zeros), a NaN in one range of A's row 0, and the cuts the
/// reduce cannot take.
#[test]
fn split_k_gemm_matches_the_cpu_reference() {
    const TILED: [GemmVariant; 2] = [GemmVariant::Tiled, GemmVariant::TiledSliced];
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(6);
    let shapes = [
        (1, 4, 1),
        (17, 20, 23),
        (64, 32, 40),
        (300, 260, 100),
        (129, 132, 1031),
    ];
    for (m, n, k) in shapes {
        let a = rng.vec(m * k, -1.0, 1.0);
        let b = rng.vec(k * n, -1.0, 1.0);
        let want = gemm::reference(&a, &b, m, n, k);
        // sum |a| |b| per output: the scale of the rounding an f32 sum may make.
        let mag: Vec<f64> = (0..m * n)
            .map(|i| {
                let (r, j) = (i / n, i % n);
                (0..k)
                    .map(|p| (a[r * k + p] as f64 * b[p * n + j] as f64).abs())
                    .sum()
            })
            .collect();
        let (da, db) = (ctx.upload(&a).unwrap(), ctx.upload(&b).unwrap());
        for (v, splits) in TILED.iter().flat_map(|&v| [1, 2, 5, 16].map(|s| (v, s))) {
            let mut c = poisoned(&ctx, m * n);
            let mut s = ctx.stream().unwrap().record();
            s.gemm_split(v, splits, &da, &db, &c, m, n, k).unwrap();
            s.sync().unwrap();
            let got = c.to_vec().unwrap();
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                // Each of the k products' additions (and the slices' one, the reduce's
                // one a range) rounds at most 2^-24 of a partial sum, itself at most
                // sum |a| |b|; the reference's own rounding to f32 once more.
                let adds = (k + splits as usize + 3) as f64;
                let bound = adds * 2f64.powi(-24) * mag[i] + 2f64.powi(-24) * w.abs() as f64;
                assert!(
                    (*g as f64 - *w as f64).abs() <= bound + 1e-30,
                    "{v:?} {splits} splits {m}x{n}x{k} [{i}]: got {g}, want {w} (bound {bound:e})"
                );
            }
        }
    }
    let (m, n, k) = (70, 68, 200);
    let mut a = rng.vec(m * k, -1.0, 1.0);
    a[150] = f32::NAN;
    let b = rng.vec(k * n, -1.0, 1.0);
    let (da, db) = (ctx.upload(&a).unwrap(), ctx.upload(&b).unwrap());
    for v in TILED {
        let mut c = poisoned(&ctx, m * n);
        let mut s = ctx.stream().unwrap().record();
        s.gemm_split(v, 3, &da, &db, &c, m, n, k).unwrap();
        s.sync().unwrap();
        only_row0_is_nan(&c.to_vec().unwrap(), n, v);
    }
    let x = ctx.upload(&vec![1.0f32; 64 * 64]).unwrap();
    let c = ctx.alloc::<f32>(64 * 64).unwrap();
    // n = 63: the reduce reads four columns a thread.
    let (b63, c63) = (
        ctx.alloc::<f32>(64 * 63).unwrap(),
        ctx.alloc(64 * 63).unwrap(),
    );
    let mut s = ctx.stream().unwrap().record();
    let sliced = GemmVariant::TiledSliced;
    for splits in [0, 17] {
        let e = s
            .gemm_split(sliced, splits, &x, &x, &c, 64, 64, 64)
            .unwrap_err();
        assert!(matches!(e, GpuError::Shape { .. }), "{splits}: {e}");
    }
    let e = s
        .gemm_split(sliced, 2, &x, &b63, &c63, 64, 63, 64)
        .unwrap_err();
    assert!(e.to_string().contains("multiple of 4"), "{e}");
    let naive = GemmVariant::Naive;
    let e = s.gemm_split(naive, 2, &x, &x, &c, 64, 64, 64).unwrap_err();
    assert!(e.to_string().contains("tiled kernels"), "{e}");
    // Unsplit, the same shape runs.
    s.gemm_split(sliced, 1, &x, &b63, &c63, 64, 63, 64).unwrap();
    s.sync().unwrap();
}

/// A hold keeps the stream's work waiting for its duration: the events around it (on
/// the GPU's own clock) span at least that long, and the work queued behind it still
/// runs; past `MAX_HOLD` it is refused.
#[test]
fn a_hold_delays_what_is_queued_after_it() {
    use std::time::Duration;
    let Some(ctx) = ctx() else { return };
    let x = ctx.upload(&[1.0f32, 2.0, 3.0]).unwrap();
    let mut total = ctx.alloc::<f32>(1).unwrap();
    let mut s = ctx.stream().unwrap().record();
    let before = s.record_event().unwrap();
    s.hold(Duration::from_millis(3)).unwrap();
    let after = s.record_event().unwrap();
    s.sum(&x, &total).unwrap();
    let e = s.hold(trueno_gpu::MAX_HOLD + Duration::from_nanos(1));
    assert!(matches!(e, Err(GpuError::Shape { .. })), "{e:?}");
    s.sync().unwrap();
    let ms = before.elapsed_ms(&after).unwrap();
    assert!((2.9..1000.0).contains(&ms), "held {ms} ms");
    assert_eq!(total.to_vec().unwrap(), [6.0]);
}

#[test]
fn bad_shapes_and_arguments_fail_before_launch() {
    let Some(ctx) = ctx() else { return };
    let empty = ctx.alloc::<f32>(0).unwrap();
    let empty_out = ctx.alloc::<f32>(0).unwrap();
    let mut x = ctx.upload(&[1.0f32; 10]).unwrap();
    let short = ctx.alloc::<f32>(9).unwrap();
    let one = ctx.alloc::<f32>(1).unwrap();
    let wrong = ctx.alloc::<u32>(10).unwrap();
    let mut s = ctx.stream().unwrap().record();
    let e = s
        .elementwise(ElementwiseOp::Relu, &empty, None, &empty_out, 0.0)
        .unwrap_err();
    assert!(matches!(e, GpuError::Shape { .. }), "{e}");
    let e = s
        .elementwise(ElementwiseOp::Relu, &x, None, &short, 0.0)
        .unwrap_err();
    assert!(matches!(e, GpuError::LengthMismatch { .. }), "{e}");
    let e = s.sum(&empty, &one).unwrap_err();
    assert!(matches!(e, GpuError::Shape { .. }), "{e}");
    let e = s.softmax(&x, &short, 2, 5).unwrap_err();
    assert!(matches!(e, GpuError::LengthMismatch { .. }), "{e}");
    let e = s
        .gemm(GemmVariant::Tiled, &x, &x, &short, 2, 5, 5)
        .unwrap_err();
    assert!(matches!(e, GpuError::LengthMismatch { .. }), "{e}");
    // A u32 buffer where the kernel wants f32, and too few arguments.
    let f = ctx
        .function(Family::Elementwise, "trueno_relu_f32")
        .unwrap();
    let e = s
        .launch(&f)
        .config(LaunchConfig::linear(1, 32))
        .arg(KernelArg::buf(&wrong))
        .arg(KernelArg::buf(&x))
        .arg(KernelArg::U32(10))
        .run()
        .unwrap_err();
    assert!(matches!(e, GpuError::ArgType { index: 0, .. }), "{e}");
    let e = s
        .launch(&f)
        .config(LaunchConfig::linear(1, 32))
        .arg(KernelArg::buf(&x))
        .run()
        .unwrap_err();
    assert!(matches!(e, GpuError::Shape { .. }), "{e}");
    let e = s
        .launch(&f)
        .config(LaunchConfig::linear(0, 32))
        .arg(KernelArg::buf(&x))
        .arg(KernelArg::buf(&x))
        .arg(KernelArg::U32(10))
        .run()
        .unwrap_err();
    assert!(matches!(e, GpuError::Shape { .. }), "{e}");
    s.sync().unwrap();
    // Host copies with the wrong length.
    let mut h = vec![0.0f32; 3];
    assert!(matches!(
        x.copy_to_host(&mut h),
        Err(GpuError::LengthMismatch { .. })
    ));
}

#[test]
fn jit_errors_carry_the_log_and_out_of_memory_is_an_error() {
    let Some(ctx) = ctx() else { return };
    let bad = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k() { add.f32 %f1, %f2, %f3; ret; }\n";
    match load_raw_ptx(&ctx, bad) {
        Err(GpuError::Jit { log, .. }) => assert!(!log.is_empty(), "the JIT log is surfaced"),
        other => panic!("expected a JIT error, got {other:?}"),
    }
    let (_, total) = ctx.memory_info().unwrap();
    match ctx.alloc::<f32>(total) {
        Err(GpuError::OutOfMemory { requested, .. }) => assert_eq!(requested, total * 4),
        other => panic!("expected out of memory, got {other:?}"),
    }
}

#[test]
fn the_pool_reuses_freed_blocks() {
    let Some(ctx) = ctx() else { return };
    let before = ctx.pool_stats();
    let a = ctx.alloc::<f32>(300_000).unwrap();
    let ptr = a.device_ptr();
    drop(a);
    let b = ctx.alloc::<f32>(290_000).unwrap();
    let after = ctx.pool_stats();
    assert_eq!(b.device_ptr(), ptr, "the freed block is handed out again");
    assert_eq!(after.hits, before.hits + 1);
    assert!(after.fragmentation() >= 0.0 && after.fragmentation() < 1.0);
}

#[test]
fn async_copies_through_pinned_memory_round_trip() {
    let Some(ctx) = ctx() else { return };
    let n = 123_457;
    let mut src = ctx.alloc_host::<f32>(n).unwrap();
    src.iter_mut()
        .enumerate()
        .for_each(|(i, v)| *v = i as f32 * 0.5);
    let mut dst = ctx.alloc_host::<f32>(n).unwrap();
    let dev = ctx.alloc::<f32>(n).unwrap();
    let out = poisoned(&ctx, n);
    {
        let mut s = ctx.stream().unwrap().record();
        s.copy_to_device_async(&src, &dev).unwrap();
        s.sync().unwrap();
    }
    let mut s = ctx.stream().unwrap().record();
    s.elementwise(ElementwiseOp::Scale, &dev, None, &out, 2.0)
        .unwrap();
    s.copy_to_host_async(&out, &mut dst).unwrap();
    s.sync().unwrap();
    assert!(
        dst.iter().enumerate().all(|(i, &v)| v == i as f32),
        "scaled copy came back"
    );
}
