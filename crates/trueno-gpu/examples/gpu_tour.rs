//! A tour of trueno-gpu: a kernel written in Rust and its PTX (any machine), then the
//! shipped kernels on the first CUDA device (where there is one).
//!
//! `cargo run --release -p trueno-gpu --example gpu_tour`

use trueno_gpu::driver::Context;
use trueno_gpu::kernels::elementwise::ElementwiseOp;
use trueno_gpu::kernels::gemm::GemmVariant;
use trueno_gpu::ptx::{self, Cmp, F32, KernelBuilder, PtxType, Space, Target, U32, U64};

/// y[i] = a * x[i] + y[i], written with the builder.
fn axpy() -> ptx::KernelIr {
    let mut b = KernelBuilder::new("axpy");
    let x = b.param_ptr("x", PtxType::F32);
    let y = b.param_ptr("y", PtxType::F32);
    let n = b.param_u32("n");
    let a = b.param_f32("a");
    let (c, nt, t) = (b.ctaid_x(), b.ntid_x(), b.tid_x());
    let i = b.mad(c, nt, t);
    let inside = b.setp::<U32>(Cmp::Lt, i, n);
    b.if_then(inside, false, |b| {
        let off = b.mul_wide(i, 4u32);
        let xa = b.add(x, off);
        let ya = b.add(y, off);
        let xv = b.ld::<F32, U64>(Space::Global, xa, 0);
        let yv = b.ld::<F32, U64>(Space::Global, ya, 0);
        let ax = b.mul(a, xv);
        let r = b.add(ax, yv); // fused into one fma by the optimiser
        b.st::<F32, U64>(Space::Global, ya, 0, r);
    });
    b.ret();
    b.finish()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let k = ptx::compile(axpy())?;
    println!(
        "{}",
        ptx::emit_module(Target::Sm90, std::slice::from_ref(&k))
    );
    println!("// passes: {:?}\n", k.stats);

    let ctx = match Context::new(0) {
        Ok(c) => c,
        Err(e) => {
            println!("no GPU here ({e}); PTX generation works without one");
            return Ok(());
        }
    };
    println!(
        "device: {} (sm_{}{})",
        ctx.device().name,
        ctx.device().compute_capability.0,
        ctx.device().compute_capability.1
    );
    let (rows, cols) = (4, 6);
    let x: Vec<f32> = (0..rows * cols).map(|i| (i % 7) as f32 - 3.0).collect();
    let dx = ctx.upload(&x)?;
    let mut probs = ctx.alloc::<f32>(rows * cols)?;
    let mut act = ctx.alloc::<f32>(rows * cols)?;
    let mut prod = ctx.alloc::<f32>(rows * rows)?;
    let mut s = ctx.stream()?.record();
    s.softmax(&dx, &probs, rows, cols)?;
    s.elementwise(ElementwiseOp::Gelu, &dx, None, &act, 0.0)?;
    // (rows x cols) times its transpose would need a transpose; use x as (rows x cols)
    // times the softmax viewed as (cols x rows): same buffer length.
    s.gemm(GemmVariant::Tiled, &dx, &probs, &prod, rows, rows, cols)?;
    s.sync()?;
    println!("softmax row 0: {:?}", &probs.to_vec()?[..cols]);
    println!("gelu row 0:    {:?}", &act.to_vec()?[..cols]);
    println!("x * softmax:   {:?}", prod.to_vec()?);
    Ok(())
}
