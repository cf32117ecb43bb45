//! The crate's error type: every bad input is named, never panicked on.

use crate::QuantFormat;

/// What went wrong in a trueno-quant call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QuantError {
    /// A row to quantize is not a whole number of blocks.
    #[error("row {row} has {len} weights, not a multiple of {format}'s block of {}", format.info().block_elems)]
    RowLength {
        /// The target format.
        format: QuantFormat,
        /// Index of the offending row.
        row: usize,
        /// Its length.
        len: usize,
    },
    /// A weight to quantize is NaN or infinite.
    #[error("row {row}, element {index} is {value}: {format} cannot encode a non-finite weight")]
    NonFinite {
        /// The target format.
        format: QuantFormat,
        /// Row of the offending weight.
        row: usize,
        /// Its index in the row.
        index: usize,
        /// The value.
        value: f32,
    },
    /// Quantized data whose length is not a whole number of blocks.
    #[error("{bytes} bytes are not whole {format} blocks of {} bytes", format.info().block_bytes)]
    NotWholeBlocks {
        /// The format.
        format: QuantFormat,
        /// The length given.
        bytes: usize,
    },
    /// An output (or second input) of the wrong size.
    #[error("{op}: {what} has {got} elements, expected {expected}")]
    BufferSize {
        /// The operation.
        op: &'static str,
        /// Which buffer.
        what: &'static str,
        /// The length required.
        expected: usize,
        /// The length given.
        got: usize,
    },
    /// The operation has no form for this format.
    #[error("{op} does not support {format}: {reason}")]
    Unsupported {
        /// The operation.
        op: &'static str,
        /// The format.
        format: QuantFormat,
        /// Why.
        reason: &'static str,
    },
    /// A GGUF file problem.
    #[error(transparent)]
    Gguf(#[from] crate::gguf::GgufError),
    /// An error from the trueno core (e.g. a forced backend this CPU lacks).
    #[error(transparent)]
    Trueno(#[from] trueno::TruenoError),
}

/// `Result` with [`QuantError`].
pub type Result<T, E = QuantError> = std::result::Result<T, E>;
