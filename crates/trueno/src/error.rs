//! The one error type of the public API: every bad input is reported, never panicked on.

use crate::backend::Backend;

/// What went wrong in a trueno call. Each variant names the offending input.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TruenoError {
    /// Two inputs (or an input and an output) that must have equal lengths do not.
    #[error("length mismatch in {op}: {what} has {got} elements, expected {expected}")]
    LengthMismatch {
        /// The operation that was called.
        op: &'static str,
        /// Which argument had the wrong length.
        what: &'static str,
        /// The length required.
        expected: usize,
        /// The length given.
        got: usize,
    },
    /// Matrix shapes that do not fit together (inner dimensions, output shape, a buffer
    /// too short for its rows and stride).
    #[error("shape mismatch in {op}: {reason}")]
    ShapeMismatch {
        /// The operation that was called.
        op: &'static str,
        /// Which shapes and how they disagree.
        reason: String,
    },
    /// The operation has no value on an empty input (max, mean, softmax, ...).
    #[error("{op} is undefined on an empty input")]
    EmptyInput {
        /// The operation that was called.
        op: &'static str,
    },
    /// A scalar argument is outside the operation's domain (clamp with lo > hi, NaN bound, ...).
    #[error("invalid argument to {op}: {reason}")]
    InvalidArgument {
        /// The operation that was called.
        op: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The backend was asked for explicitly but this CPU (or build) cannot run it.
    #[error("backend {backend} is not supported on this machine: {reason}")]
    UnsupportedBackend {
        /// The backend asked for.
        backend: Backend,
        /// Why it cannot run here (missing CPU feature, not compiled in, ...).
        reason: String,
    },
    /// `TRUENO_BACKEND` (or a string given to `Backend::from_str`) names no backend.
    #[error("unknown backend name {name:?}; expected one of {expected}")]
    UnknownBackend {
        /// The name given.
        name: String,
        /// The accepted names.
        expected: &'static str,
    },
    /// A device backend failed while running an op (device lost, out of memory, a buffer
    /// over the device's size limit).
    #[error("{backend} device error: {reason}")]
    Device {
        /// The device backend that failed.
        backend: Backend,
        /// What the device reported.
        reason: String,
    },
    /// A `JidokaGuard` found a NaN or infinity in an output.
    #[error("{op} produced a non-finite value ({value}) at index {index}")]
    NonFinite {
        /// The operation whose output was checked.
        op: &'static str,
        /// Index of the first non-finite element.
        index: usize,
        /// The value found there.
        value: f32,
    },
}

/// Result of a trueno call.
pub type Result<T> = std::result::Result<T, TruenoError>;

/// Checks that `got == expected`, naming the argument in the error.
pub(crate) fn check_len(
    op: &'static str,
    what: &'static str,
    expected: usize,
    got: usize,
) -> Result<()> {
    if expected == got {
        Ok(())
    } else {
        Err(TruenoError::LengthMismatch {
            op,
            what,
            expected,
            got,
        })
    }
}

/// Checks that an input is not empty for an operation undefined on empty input.
pub(crate) fn check_nonempty(op: &'static str, len: usize) -> Result<()> {
    if len == 0 {
        Err(TruenoError::EmptyInput { op })
    } else {
        Ok(())
    }
}
