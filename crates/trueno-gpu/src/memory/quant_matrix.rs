//! GGML-quantized weights on the device, their format and shape checked once at upload so
//! every product that reads them only has to check the activations.

use super::DeviceBuffer;
use crate::driver::Context;
use crate::error::{Result, shape_err};
use crate::kernels::qgemv::QuantFormat;

/// Zero bytes after a matrix's last block in its buffer: a kernel that copies rows in
/// aligned 16-byte chunks (the staged tensor-core batches and Q6_K's staged one-vector
/// kernel: Q6_K's 210-byte blocks start anywhere even past a boundary) may read up to 16
/// bytes over the last row's end and stay inside the allocation.
pub const SLACK_BYTES: usize = 16;

/// A row-major `rows x cols` matrix of [`QuantFormat`] blocks in device memory (GGML's
/// layout: each row `cols / block_elems` consecutive blocks, as in a GGUF tensor).
#[derive(Debug)]
pub struct QuantMatrix {
    format: QuantFormat,
    rows: usize,
    cols: usize,
    words: DeviceBuffer<u16>,
}

impl QuantMatrix {
    /// The block format.
    pub fn format(&self) -> QuantFormat {
        self.format
    }
    /// Rows (outputs of a matrix-vector product).
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Columns (inputs of a matrix-vector product).
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// Size of the blocks in device memory (the buffer also holds [`SLACK_BYTES`] of
    /// zeros after them).
    pub fn bytes(&self) -> usize {
        self.words.len() * 2 - SLACK_BYTES
    }
    /// The blocks as 16-bit words (the kernels' view).
    pub(crate) fn words(&self) -> &DeviceBuffer<u16> {
        &self.words
    }
}

impl Context {
    /// Uploads `bytes`, the blocks of a `rows x cols` matrix in `format` (for example a
    /// GGUF tensor's data). Errors when `cols` is not a whole number of blocks or `bytes`
    /// is not exactly the matrix.
    ///
    /// ```no_run
    /// use trueno_gpu::driver::Context;
    /// use trueno_gpu::kernels::qgemv::QuantFormat;
    /// let ctx = Context::new(0)?;
    /// let blocks = vec![0u8; 2 * 34]; // a 2 x 32 Q8_0 matrix (all zero)
    /// let w = ctx.upload_quant(QuantFormat::Q8_0, 2, 32, &blocks)?;
    /// let x = ctx.upload(&[1.0f32; 32])?;
    /// let y = ctx.alloc::<f32>(2)?;
    /// let mut s = ctx.stream()?.record();
    /// s.qgemv(&w, &x, &y)?;
    /// s.sync()?;
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    pub fn upload_quant(
        &self,
        format: QuantFormat,
        rows: usize,
        cols: usize,
        bytes: &[u8],
    ) -> Result<QuantMatrix> {
        let what = "upload_quant";
        if rows == 0 || cols == 0 {
            return shape_err(what, format!("zero-size shape {rows}x{cols}"));
        }
        let per = format.block_elems();
        if !cols.is_multiple_of(per) {
            return shape_err(what, format!("cols {cols} is not a multiple of {per}"));
        }
        match format.matrix_bytes(rows, cols) {
            Some(n) if n == bytes.len() => {}
            Some(n) => {
                return shape_err(
                    what,
                    format!(
                        "{rows}x{cols} {} is {n} bytes, got {}",
                        format.name(),
                        bytes.len()
                    ),
                );
            }
            None => return shape_err(what, format!("{rows}x{cols} overflows")),
        }
        // Every block is a whole number of 16-bit words, so `bytes.len()` is even.
        let words: Vec<u16> = bytes
            .chunks_exact(2)
            .map(|p| u16::from_le_bytes([p[0], p[1]]))
            .chain(std::iter::repeat_n(0, SLACK_BYTES / 2))
            .collect();
        Ok(QuantMatrix {
            format,
            rows,
            cols,
            words: self.upload(&words)?,
        })
    }
}
