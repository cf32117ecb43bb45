//! A vector quantized to Q8_K on the device: the activations of the integer
//! matrix-vector products, written by [`crate::driver::Stream::quantize_q8k`].

use super::DeviceBuffer;
use crate::driver::Context;
use crate::error::{Result, shape_err};
use crate::kernels::quantize_q8k::BLOCK;

/// `len` values as Q8_K blocks of 256 (`x = d * q`, `q` an `i8`), kept as three device
/// arrays so the quants stay 16-byte aligned: the quants (four to a `u32`, in order), one
/// f32 scale per block and the sum of each 16 quants (an `i32`). [`Self::to_blocks`]
/// gives GGML's 292-byte blocks.
#[derive(Debug)]
pub struct Q8kVector {
    len: usize,
    qs: DeviceBuffer<u32>,
    d: DeviceBuffer<f32>,
    bsums: DeviceBuffer<i32>,
}

impl Q8kVector {
    /// Values (a multiple of 256).
    pub fn len(&self) -> usize {
        self.len
    }
    /// Never true: a vector holds at least one block.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub(crate) fn parts(&self) -> (&DeviceBuffer<u32>, &DeviceBuffer<f32>, &DeviceBuffer<i32>) {
        (&self.qs, &self.d, &self.bsums)
    }

    /// The blocks in GGML's Q8_K layout (f32 `d`, 256 quants, sixteen `i16` sums), as
    /// trueno-quant's `quantize(Q8K, ..)` writes them. Waits for the device.
    pub fn to_blocks(&mut self) -> Result<Vec<u8>> {
        let (qs, d, sums) = (self.qs.to_vec()?, self.d.to_vec()?, self.bsums.to_vec()?);
        let mut out = Vec::with_capacity(self.len / BLOCK * (4 + BLOCK + 32));
        for (blk, d) in d.iter().enumerate() {
            out.extend_from_slice(&d.to_le_bytes());
            for w in &qs[blk * BLOCK / 4..(blk + 1) * BLOCK / 4] {
                out.extend_from_slice(&w.to_le_bytes());
            }
            for &s in &sums[blk * 16..(blk + 1) * 16] {
                // A sum of 16 quants is within -2048..=2032.
                out.extend_from_slice(&(s as i16).to_le_bytes());
            }
        }
        Ok(out)
    }
}

impl Context {
    /// Room for `len` values quantized to Q8_K (see [`Q8kVector`]); `len` a non-zero
    /// multiple of 256.
    ///
    /// ```no_run
    /// use trueno_gpu::driver::Context;
    /// let ctx = Context::new(0)?;
    /// let x = ctx.upload(&vec![0.5f32; 512])?;
    /// let mut q = ctx.alloc_q8k(512)?;
    /// let mut s = ctx.stream()?.record();
    /// s.quantize_q8k(&x, &q)?;
    /// s.sync()?;
    /// let blocks = q.to_blocks()?; // two 292-byte blocks
    /// assert_eq!(blocks.len(), 2 * 292);
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    pub fn alloc_q8k(&self, len: usize) -> Result<Q8kVector> {
        if len == 0 || !len.is_multiple_of(BLOCK) {
            return shape_err(
                "alloc_q8k",
                format!("length {len} is not a non-zero multiple of {BLOCK}"),
            );
        }
        Ok(Q8kVector {
            len,
            qs: self.alloc(len / 4)?,
            d: self.alloc(len / BLOCK)?,
            bsums: self.alloc(len / 16)?,
        })
    }
}
