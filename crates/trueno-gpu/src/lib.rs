//! trueno-gpu: PTX written in pure Rust, a CUDA driver layer loaded at run time, and the
//! kernels built on both.
//!
//! Nothing here needs the CUDA toolkit to build: kernels are Rust code that builds a typed
//! IR ([`ptx`]), which is validated, optimised, register-allocated and emitted as PTX
//! text; the driver layer ([`driver`]) opens `libcuda` when first asked for a device and
//! hands the PTX to the driver's JIT. On a machine without a driver every GPU call returns
//! [`GpuError::NoDriver`]; PTX generation works everywhere.
//!
//! Writing a kernel (the register types make `add` of an `f32` and a `u32` a compile
//! error; validation catches what the types cannot, such as an exit before a barrier):
//!
//! ```
//! use trueno_gpu::ptx::{self, Cmp, F32, KernelBuilder, PtxType, Space, Target, U32, U64};
//!
//! let mut b = KernelBuilder::new("double");
//! let x = b.param_ptr("x", PtxType::F32);
//! let n = b.param_u32("n");
//! let i = b.tid_x();
//! let inside = b.setp::<U32>(Cmp::Lt, i, n);
//! b.if_then(inside, false, |b| {
//!     let off = b.mul_wide(i, 4u32);
//!     let a = b.add(x, off);
//!     let v = b.ld::<F32, U64>(Space::Global, a, 0);
//!     let d = b.add(v, v);
//!     b.st::<F32, U64>(Space::Global, a, 0, d);
//! });
//! b.ret();
//! let kernel = ptx::compile(b.finish())?;
//! let text = ptx::emit_module(Target::Sm90, &[kernel]);
//! assert!(text.contains(".visible .entry double("));
//! # Ok::<(), trueno_gpu::GpuError>(())
//! ```
//!
//! Running the shipped kernels: work goes on a recording stream, which borrows every
//! buffer until `sync`, so none can be freed or read on the host while a kernel runs:
//!
//! ```
//! use trueno_gpu::driver::Context;
//!
//! let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
//! let (rows, cols) = (2, 3);
//! let x = ctx.upload(&[1.0f32, 2.0, 3.0, 0.0, 0.0, 0.0])?;
//! let mut out = ctx.alloc::<f32>(rows * cols)?;
//! let mut s = ctx.stream()?.record();
//! s.softmax(&x, &out, rows, cols)?;
//! s.sync()?;
//! let p = out.to_vec()?;
//! assert!((p[3] - 1.0 / 3.0).abs() < 1e-6);
//! # Ok::<(), trueno_gpu::GpuError>(())
//! ```

pub mod analyze;
pub mod driver;
pub mod error;
pub mod gemm_tune;
pub mod kernels;
pub mod memory;
mod ops;
mod ops_attention;
mod ops_dequant;
mod ops_gemm;
mod ops_gemm_split;
mod ops_gemm_tf32;
mod ops_paged;
mod ops_qgemm;
mod ops_qgemv;
pub mod plan;
pub mod ptx;

pub use error::{GpuError, Result};
pub use ops::MAX_HOLD;
pub use ops_attention::DecodeInputs;
pub use ops_gemm::GemmEpilogue;
