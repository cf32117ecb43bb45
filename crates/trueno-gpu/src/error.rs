//! One error type for the crate: every driver failure carries the driver's error name.

use thiserror::Error;

/// Everything that can go wrong building, loading or running a kernel.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum GpuError {
    /// The IR broke a rule (type mix-up, undefined register, unsafe barrier...).
    #[error("PTX validation failed:\n{0}")]
    Validation(String),
    /// libcuda could not be loaded or lacks a symbol.
    #[error("no CUDA driver: {0}")]
    NoDriver(String),
    /// The driver loaded but reports no device (or not the one asked for).
    #[error("no CUDA device {0}")]
    NoDevice(usize),
    /// A driver call returned an error.
    #[error("CUDA driver call {call} failed: {name} (code {code})")]
    Driver {
        /// The driver function.
        call: &'static str,
        /// CUresult value.
        code: i32,
        /// The driver's name for it (`CUDA_ERROR_OUT_OF_MEMORY`).
        name: String,
    },
    /// The driver's JIT rejected a module; `log` is its error log.
    #[error("PTX JIT of {module} failed: {name}\n{log}")]
    Jit {
        /// Kernel family.
        module: String,
        /// Driver error name.
        name: String,
        /// The JIT's error log.
        log: String,
    },
    /// An allocation larger than the device's free memory.
    #[error("out of device memory: {requested} bytes requested, {free} free")]
    OutOfMemory {
        /// Bytes asked for.
        requested: usize,
        /// Bytes free on the device.
        free: usize,
    },
    /// Two buffers that must match in length do not.
    #[error("length mismatch in {what}: expected {expected}, got {got}")]
    LengthMismatch {
        /// Which operation.
        what: &'static str,
        /// Required length.
        expected: usize,
        /// Actual length.
        got: usize,
    },
    /// A shape the kernel cannot run (zero-size, too large for 32-bit indexing, or
    /// buffers too small for it).
    #[error("invalid shape for {kernel}: {reason}")]
    Shape {
        /// Kernel or operation.
        kernel: String,
        /// What is wrong.
        reason: String,
    },
    /// A launch argument does not match the kernel's parameter.
    #[error("argument {index} of {kernel}: kernel expects {expected}, got {got}")]
    ArgType {
        /// Kernel.
        kernel: String,
        /// Parameter position.
        index: usize,
        /// Parameter type.
        expected: String,
        /// Argument type.
        got: String,
    },
    /// No kernel or configuration by that name.
    #[error("unknown kernel {0}")]
    UnknownKernel(String),
    /// A file could not be read or written (the GEMM tune file).
    #[error("file error: {0}")]
    Io(String),
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, GpuError>;

/// Shape error helper.
pub(crate) fn shape_err<T>(kernel: &str, reason: impl Into<String>) -> Result<T> {
    Err(GpuError::Shape {
        kernel: kernel.into(),
        reason: reason.into(),
    })
}
