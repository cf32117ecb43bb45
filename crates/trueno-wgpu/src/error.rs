//! Errors of the wgpu backend: every failure a device can report arrives here as a value
//! (wgpu's default is to panic on an uncaptured device error).

/// What went wrong on (or before reaching) the GPU.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GpuError {
    /// No adapter matched: none at all, or none whose name contains `TRUENO_WGPU_ADAPTER`.
    #[error("no wgpu adapter{}: {found}", match wanted { Some(w) => format!(" named like {w:?}"), None => String::new() })]
    NoAdapter {
        /// The `TRUENO_WGPU_ADAPTER` filter, if one was set.
        wanted: Option<String>,
        /// The adapters that were found (or how to get one).
        found: String,
    },
    /// The adapter refused to open a device.
    #[error("could not open a device on {adapter}: {reason}")]
    RequestDevice {
        /// The adapter's name.
        adapter: String,
        /// wgpu's message.
        reason: String,
    },
    /// The device ran out of memory.
    #[error("GPU out of memory: {0}")]
    OutOfMemory(String),
    /// The device was lost (driver reset, GPU removed, or destroyed).
    #[error("GPU device lost: {0}")]
    DeviceLost(String),
    /// wgpu rejected a command (a bug in trueno-wgpu if it happens; reported, not hidden).
    #[error("wgpu validation error: {0}")]
    Validation(String),
    /// Reading a result back failed.
    #[error("reading a GPU buffer back failed: {0}")]
    Readback(String),
    /// Operand lengths or shapes do not fit the op.
    #[error("{op}: {reason}")]
    Shape {
        /// The op.
        op: &'static str,
        /// What did not fit.
        reason: String,
    },
    /// A buffer larger than this device allows in one binding.
    #[error("{op}: {bytes} bytes exceed this device's {limit}-byte storage binding limit")]
    TooLarge {
        /// The op.
        op: &'static str,
        /// The buffer size asked for.
        bytes: u64,
        /// The device's `max_storage_buffer_binding_size`.
        limit: u64,
    },
    /// A result handle from another batch.
    #[error("download handle {0} does not belong to this batch's outputs")]
    UnknownDownload(usize),
}

/// Result of the wgpu backend.
pub type Result<T> = std::result::Result<T, GpuError>;

/// An error for ops whose operands must match in length.
pub(crate) fn check_len(op: &'static str, what: &str, want: usize, got: usize) -> Result<()> {
    if want == got {
        return Ok(());
    }
    Err(GpuError::Shape {
        op,
        reason: format!("{what} has {got} elements, expected {want}"),
    })
}
