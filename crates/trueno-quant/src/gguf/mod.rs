//! GGUF files (the format llama.cpp writes): versions 2 and 3, every metadata value type
//! (nested arrays included), tensor infos, alignment, and tensor data memory-mapped with
//! typed views. Every count, length, offset and size is checked against the file before
//! it is used: a truncated or corrupt file is a [`GgufError`] naming what and where.

mod read;
mod types;
mod write;

pub use read::{GgufFile, TensorView};
pub use types::{GgmlType, GgufValue, TensorInfo, ValueType};
pub use write::GgufWriter;

/// What is wrong with a GGUF file, and where.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GgufError {
    /// Opening, reading or mapping the file failed.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        message: String,
    },
    /// The file's structure is invalid at byte `offset`.
    #[error("corrupt GGUF at byte {offset}: {what}")]
    Corrupt {
        /// Byte offset of the field that is wrong.
        offset: u64,
        /// What is wrong.
        what: String,
    },
    /// The file is valid GGUF but uses something this reader does not (big-endian, v1).
    #[error("unsupported GGUF: {what}")]
    Unsupported {
        /// What is not supported.
        what: String,
    },
    /// A lookup by name found nothing.
    #[error("no {kind} named {name:?} in the file")]
    NotFound {
        /// "tensor" or "metadata key".
        kind: &'static str,
        /// The name asked for.
        name: String,
    },
    /// A value of one type was asked for as another, or data the writer cannot encode.
    #[error("{what}")]
    Invalid {
        /// What is wrong.
        what: String,
    },
}

/// The GGUF magic, `"GGUF"` as a little-endian u32.
pub const GGUF_MAGIC: u32 = 0x4655_4747;

/// Tensor data alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
