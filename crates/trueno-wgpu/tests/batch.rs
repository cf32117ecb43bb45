//! The command-list API, the async forms, the pipeline cache, and every error path that
//! does not need a second process.

mod common;

use common::{Rng, assert_all_close, gpu, scalar};
use trueno_wgpu::{BinaryOp, Gpu, GpuError, ReduceOp, UnaryOp};

#[test]
fn a_chain_of_ops_runs_in_one_batch() {
    let Some(gpu) = gpu() else { return };
    let e = scalar();
    let x = Rng::new(10).vec(5000, -2.0, 2.0);
    let mut b = gpu.batch();
    let dx = b.upload(&x).unwrap();
    let ex = b.unary(UnaryOp::Exp, &dx).unwrap();
    let prod = b.binary(BinaryOp::Mul, &ex, &dx).unwrap();
    let total = b.reduce(ReduceOp::Sum, &prod).unwrap();
    let (d_prod, d_total) = (b.download(&prod).unwrap(), b.download(&total).unwrap());
    let mut out = b.finish().unwrap();

    let mut want = vec![0.0; x.len()];
    e.exp_into(&x, &mut want).unwrap();
    e.mul_inplace(&mut want, &x).unwrap();
    let got = out.f32(d_prod).unwrap();
    assert_all_close("exp(x) * x", &got, &want, &x, 6e-6);
    let sum = out.f32(d_total).unwrap()[0] as f64;
    let exact: f64 = got.iter().map(|&v| v as f64).sum();
    let mag: f64 = got.iter().map(|v| v.abs() as f64).sum();
    assert!(
        (sum - exact).abs() <= 30.0 * f32::EPSILON as f64 * mag,
        "{sum} vs {exact}"
    );
    // Each handle is read once.
    assert_eq!(out.f32(d_prod), Err(GpuError::UnknownDownload(0)));
}

#[test]
fn async_forms_give_the_blocking_results() {
    let Some(gpu) = gpu() else { return };
    let x = Rng::new(11).vec(777, -3.0, 3.0);
    let sync = gpu.unary(UnaryOp::Tanh, &x).unwrap();
    let fut = pollster::block_on(gpu.unary_async(UnaryOp::Tanh, &x)).unwrap();
    assert_eq!(sync, fut);
    let s = gpu.reduce(ReduceOp::Max, &x).unwrap();
    assert_eq!(
        pollster::block_on(gpu.reduce_async(ReduceOp::Max, &x)).unwrap(),
        s
    );
    let am = gpu.argmax(&x).unwrap();
    assert_eq!(pollster::block_on(gpu.argmax_async(&x)).unwrap(), am);
    let mut b = gpu.batch();
    let d = b.upload(&x).unwrap();
    let h = b.download(&d).unwrap();
    let mut out = pollster::block_on(b.finish_async()).unwrap();
    assert_eq!(out.f32(h).unwrap(), x);
}

#[test]
fn each_shader_compiles_once() {
    if gpu().is_none() {
        return;
    }
    // A device of its own, so that the other tests' shaders do not change the count.
    let gpu = Gpu::new().unwrap();
    let x = [1.0f32, 2.0, 3.0];
    gpu.unary(UnaryOp::Softplus, &x).unwrap();
    let n = gpu.compiled_pipelines();
    for _ in 0..3 {
        gpu.unary(UnaryOp::Softplus, &x).unwrap();
        // Other parameters, same shader.
        gpu.unary(UnaryOp::Scale(3.0), &x).unwrap();
    }
    // Scale is new to this device (+1); Softplus is not compiled again.
    assert_eq!(gpu.compiled_pipelines(), n + 1);
    let m = gpu.compiled_pipelines();
    gpu.unary(UnaryOp::Scale(-1.0), &x).unwrap();
    assert_eq!(gpu.compiled_pipelines(), m);
}

#[test]
fn bad_operands_are_errors_not_panics() {
    let Some(gpu) = gpu() else { return };
    let shape = |r: Result<Vec<f32>, GpuError>| matches!(r, Err(GpuError::Shape { .. }));
    assert!(shape(gpu.binary(BinaryOp::Add, &[1.0, 2.0], &[1.0])));
    assert!(shape(gpu.fma(&[1.0], &[1.0], &[])));
    assert!(shape(gpu.unary(UnaryOp::Clamp(1.0, -1.0), &[0.0])));
    assert!(shape(gpu.unary(UnaryOp::Clamp(f32::NAN, 1.0), &[0.0])));
    assert!(shape(gpu.matmul(&[1.0; 6], &[1.0; 6], 2, 2, 2)));
    assert!(shape(gpu.matmul(&[1.0; 4], &[1.0; 4], usize::MAX, 2, 2)));
    assert!(shape(gpu.gemv(&[1.0; 6], &[1.0; 2], 2, 3)));
    assert!(shape(gpu.gemv_t(&[1.0; 6], &[1.0; 3], 2, 3)));
    assert!(shape(gpu.rmsnorm(&[1.0; 6], &[1.0; 2], 2, 3, 1e-5)));
    assert!(shape(gpu.rmsnorm(&[1.0; 6], &[1.0; 3], 2, 3, -1.0)));
    assert!(shape(
        gpu.layernorm(&[1.0; 6], &[1.0; 3], &[0.0; 2], 2, 3, 1e-5)
    ));
    assert!(matches!(
        gpu.reduce(ReduceOp::Mean, &[]),
        Err(GpuError::Shape { .. })
    ));
    assert!(matches!(gpu.argmin(&[]), Err(GpuError::Shape { .. })));
    // Larger than one binding may be: refused before anything is allocated.
    let limit = gpu.info().max_binding_bytes;
    let mut b = gpu.batch();
    let too_big = (limit / 4 + 1) as usize;
    assert!(matches!(
        b.alloc("test", too_big),
        Err(GpuError::TooLarge { .. })
    ));
}

#[test]
fn a_lost_device_is_an_error_on_every_later_op() {
    if gpu().is_none() {
        return;
    }
    // A device of its own: the shared one stays usable for the other tests.
    let g = Gpu::new().unwrap();
    assert_eq!(g.unary(UnaryOp::Neg, &[1.0]).unwrap(), [-1.0]);
    g.destroy();
    // The loss is reported by the driver asynchronously; the next op sees it at the latest.
    let r = g.unary(UnaryOp::Neg, &[1.0]);
    assert!(matches!(r, Err(GpuError::DeviceLost(_))), "{r:?}");
    assert!(matches!(
        g.reduce(ReduceOp::Sum, &[1.0]),
        Err(GpuError::DeviceLost(_))
    ));
}

#[test]
fn into_forms_write_existing_buffers_and_refuse_aliasing() {
    let Some(gpu) = gpu() else { return };
    let e = scalar();
    let mut rng = Rng::new(12);
    let (x, y) = (rng.vec(300, -1.0, 1.0), rng.vec(300, -1.0, 1.0));
    let mut b = gpu.batch();
    let (dx, dy) = (b.upload(&x).unwrap(), b.upload(&y).unwrap());
    let out = b.alloc("test", 300).unwrap();
    let copy = b.alloc("test", 300).unwrap();
    // Written twice: the second op's result is what is read back.
    b.unary_into(UnaryOp::Exp, &dx, &out).unwrap();
    b.binary_into(BinaryOp::Sub, &dx, &dy, &out).unwrap();
    b.copy(&out, &copy).unwrap();
    let c = b.alloc("test", 100).unwrap();
    // (10 x 30) by (30 x 10), reading x and y as matrices.
    b.matmul_into(&dx, &dy, &c, 10, 10, 30).unwrap();
    // Aliasing, wrong lengths: errors before anything is recorded.
    assert!(b.unary_into(UnaryOp::Exp, &dx, &dx).is_err());
    assert!(b.binary_into(BinaryOp::Add, &dx, &dy, &dy).is_err());
    assert!(b.matmul_into(&dx, &dy, &dx, 10, 30, 10).is_err());
    assert!(b.unary_into(UnaryOp::Exp, &dx, &c).is_err());
    assert!(b.copy(&dx, &c).is_err());
    let (h, hc, hm) = (
        b.download(&out).unwrap(),
        b.download(&copy).unwrap(),
        b.download(&c).unwrap(),
    );
    let mut o = b.finish().unwrap();
    let mut want = vec![0.0; 300];
    e.sub_into(&x, &y, &mut want).unwrap();
    assert_eq!(o.f32(h).unwrap(), want);
    assert_eq!(o.f32(hc).unwrap(), want);
    let m = o.f32(hm).unwrap();
    for i in 0..10 {
        for j in 0..10 {
            let r: f64 = (0..30)
                .map(|p| x[i * 30 + p] as f64 * y[p * 10 + j] as f64)
                .sum();
            assert!((m[i * 10 + j] as f64 - r).abs() < 1e-5, "[{i},{j}]");
        }
    }
}
