//! trueno on any GPU through wgpu: Vulkan, Metal, DirectX 12 and WebGPU in browsers.
//!
//! The same ops as the CPU crate (elementwise, activations, reductions, softmax,
//! similarity), plus matmul, GEMV, RMSNorm and LayerNorm, as WGSL compute shaders that are
//! compiled once per device. Every op has a blocking form and a future
//! ([`Gpu::unary`] / [`Gpu::unary_async`]), and a [`Batch`] records many ops for one
//! submission with no host round trip in between. Transcendentals use the CPU crate's
//! algorithms, so results agree across backends to a few ulp. The core crate's `gpu`
//! feature runs its engine on these ops (`Backend::Gpu`, and routing by measured size).
//!
//! ```no_run
//! use trueno_wgpu::{Gpu, UnaryOp, ReduceOp};
//! let gpu = Gpu::new()?;               // TRUENO_WGPU_ADAPTER=name picks an adapter
//! let y = gpu.unary(UnaryOp::Silu, &[-1.0, 0.0, 2.0])?;
//! let s = gpu.reduce(ReduceOp::Sum, &y)?;
//! # Ok::<(), trueno_wgpu::GpuError>(())
//! ```
//!
//! Where WGSL leaves room that drivers take (each seen on NVIDIA's Vulkan driver, none on
//! lavapipe), and the conformance tests allow it: subnormals may flush to zero; `fma` need
//! not be fused (axpy, lerp and fma may round the product); division is only accurate for
//! divisors in [2^-126, 2^126] (a tiny quotient may come out as zero). NaN inputs propagate
//! on every driver: the shaders test NaN on the bits, since drivers rewrite comparisons
//! into NaN-dropping min/max. Shader compilers may also reassociate float math (Mesa
//! rewrote exp's Cody-Waite pair into one product until the shader hid the common
//! factor): transcendentals are held to twice the CPU's bounds here (measured on
//! lavapipe: exp 1.4e-7, sigmoid 1.7e-7, silu 2.3e-7). Sums are f32 trees (the CPU adds blocks in f64), with the
//! error bound the tests state. Device errors are per `Gpu`: threads sharing one may see
//! each other's (trueno-wgpu's own ops validate their inputs, so none should arise).

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
