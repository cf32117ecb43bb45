//! trueno-wgpu in one page: open the preferred adapter, run single ops in their blocking and
//! async forms, then a chain of ops as one batch (one submission, one read back).
//!
//! `cargo run -p trueno-wgpu --example wgpu_ops` (set `TRUENO_WGPU_ADAPTER=llvmpipe` to
//! pick Mesa's CPU driver, or part of any adapter's name).

use trueno_wgpu::{BinaryOp, Gpu, ReduceOp, UnaryOp, VectorOp};

fn main() -> Result<(), trueno_wgpu::GpuError> {
    let gpu = Gpu::new()?;
    println!("adapter: {}", gpu.info());

    let x: Vec<f32> = (0..10).map(|i| i as f32 * 0.5 - 2.0).collect();
    println!("x          = {x:?}");
    println!("gelu(x)    = {:?}", gpu.unary(UnaryOp::Gelu, &x)?);
    println!("softmax(x) = {:?}", gpu.vector_op(VectorOp::Softmax, &x)?);
    let norm = pollster::block_on(gpu.reduce_async(ReduceOp::NormL2, &x))?;
    println!("|x|_2      = {norm} (async form)");

    // y = silu(x) * x, then its sum: three ops, one submission.
    let mut b = gpu.batch();
    let dx = b.upload(&x)?;
    let s = b.unary(UnaryOp::Silu, &dx)?;
    let y = b.binary(BinaryOp::Mul, &s, &dx)?;
    let total = b.reduce(ReduceOp::Sum, &y)?;
    let (hy, ht) = (b.download(&y)?, b.download(&total)?);
    let mut out = b.finish()?;
    println!("silu(x)*x  = {:?}, sum {}", out.f32(hy)?, out.f32(ht)?[0]);

    // A 2x3 by 3x2 product.
    let c = gpu.matmul(
        &[1., 2., 3., 4., 5., 6.],
        &[1., 0., 0., 1., 1., 1.],
        2,
        2,
        3,
    )?;
    println!("matmul     = {c:?}");
    Ok(())
}
