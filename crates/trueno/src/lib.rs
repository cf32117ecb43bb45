//! trueno: compute primitives that run fast on every CPU.
//!
//! Each operation is written once over a small SIMD primitive trait and instantiated for
//! scalar, SSE2, AVX, AVX2+FMA and AVX-512; the best instance per operation class is chosen
//! at run time (override with `TRUENO_BACKEND=scalar|sse2|avx|avx2|avx512`).
//!
//! - [`Vector`]: owned vectors with allocating and in-place methods.
//! - [`Engine`]: the same operations on slices, with `_into(out)` and `_inplace` forms; get
//!   the process-wide one with [`engine()`] or pin a backend with [`Engine::new`].
//! - [`Matrix`], [`MatRef`], [`MatMut`]: row-major matrices and strided views;
//!   [`Engine::gemm`] (BLIS-blocked, a micro-kernel per ISA, threaded), GEMV, transpose
//!   and batched products ([`gemm`] holds the cache and block details).
//! - [`activations`]: the canonical scalar definitions every backend is tested against.
//! - [`JidokaGuard`]: opt-in NaN/Inf checks on outputs.
//! - `gpu` (feature `gpu`): `Backend::Gpu` through trueno-wgpu, and the default engine
//!   sending work to the GPU above the crossover measured on the machine.
//!
//! ```
//! use trueno::{Backend, Engine, Vector};
//! let x = Vector::from_slice(&[-1.0, 0.0, 2.0]);
//! let y = x.relu()?;
//! assert_eq!(y.as_slice(), &[0.0, 0.0, 2.0]);
//!
//! // Pin the portable backend, e.g. to compare against it.
//! let scalar = Engine::new(Backend::Scalar)?;
//! assert_eq!(scalar.sum(&[1.0, 2.0, 3.0])?, 6.0);
//! # Ok::<(), trueno::TruenoError>(())
//! ```

pub mod activations;
mod aligned;
pub mod backend;
mod convert;
mod dispatch;
mod engine;
mod error;
pub mod gemm;
#[cfg(feature = "gpu")]
pub mod gpu;
mod jidoka;
mod matrix;
mod ops;
mod parallel;
mod reductions;
mod simd;
mod vector;
#[cfg(all(target_os = "wasi", feature = "wasi-pthread-stubs"))]
mod wasi_stubs;

pub use backend::{
    Backend, OpClass, available_cpu_backends, select_backend_for_operation,
    select_best_available_backend,
};
pub use engine::{Engine, engine};
pub use error::{Result, TruenoError};
pub use gemm::api::{GemmProfile, Transpose};
pub use jidoka::JidokaGuard;
pub use matrix::{MatMut, MatRef, Matrix};
pub use vector::Vector;

/// The README's examples, compiled and run as doc tests so the README stays true.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
