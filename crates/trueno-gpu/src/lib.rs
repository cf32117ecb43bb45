//! trueno-gpu: PTX written in pure Rust, a CUDA driver layer loaded at run time, and the
//! kernels built on both.
//!
//! Nothing here needs the CUDA toolkit to build: kernels are Rust code that builds a typed
//! IR ([`ptx`]), which is validated, optimised and emitted as PTX text; the driver layer
//! ([`driver`]) opens `libcuda` when first asked for a device and hands the PTX to the
//! driver's JIT. On a machine without a driver every GPU call returns
//! [`GpuError::NoDriver`]; PTX generation works everywhere.

pub mod driver;
pub mod error;
pub mod kernels;
pub mod memory;
mod ops;
pub mod ptx;

pub use error::{GpuError, Result};
