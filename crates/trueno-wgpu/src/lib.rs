//! trueno on any GPU through wgpu: Vulkan, Metal, DirectX 12 and WebGPU in browsers.
//!
//! The same ops as the CPU crate (elementwise, activations, reductions, softmax,
//! similarity), plus matmul, GEMV, RMSNorm and LayerNorm, as WGSL compute shaders that are
//! compiled once per device. Every op has a blocking form and a future
//! ([`Gpu::unary`] / [`Gpu::unary_async`]), and a [`Batch`] records many ops for one
//! submission with no host round trip in between. Transcendentals use the CPU crate's
//! algorithms, so results agree across backends to a few ulp.
//!
//! ```no_run
//! use trueno_wgpu::{Gpu, UnaryOp, ReduceOp};
//! let gpu = Gpu::new()?;               // TRUENO_WGPU_ADAPTER=name picks an adapter
//! let y = gpu.unary(UnaryOp::Silu, &[-1.0, 0.0, 2.0])?;
//! let s = gpu.reduce(ReduceOp::Sum, &y)?;
//! # Ok::<(), trueno_wgpu::GpuError>(())
//! ```
//!
//! Where WGSL differs from the CPU: GPUs may flush subnormal inputs and outputs to zero,
//! and sums are accumulated in f32 over a tree (the CPU sums blocks in f64); the
//! conformance tests state the tolerance for each.

mod api;
mod batch;
mod buffer;
mod device;
mod error;
mod kernels;
mod ops;
mod record;

pub use batch::{Batch, Download, Outputs};
pub use buffer::GpuBuffer;
pub use device::{ADAPTER_ENV, AdapterSummary, Gpu};
pub use error::{GpuError, Result};
pub use ops::{BinaryOp, Reduce2Op, ReduceOp, UnaryOp, VectorOp};

impl Gpu {
    /// Number of distinct shaders compiled on this device so far (each is compiled once).
    pub fn compiled_pipelines(&self) -> usize {
        self.pipelines.len()
    }
}
