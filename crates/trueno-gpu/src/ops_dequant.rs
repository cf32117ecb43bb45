//! Rows to f32 on the device: token-embedding lookups by id from quantized or dense
//! tables, and whole-matrix dequantization ([`crate::kernels::dequant`],
//! [`crate::kernels::gather_rows`]).

use crate::driver::{KernelArg, Recording, Stream};
use crate::error::{Result, shape_err};
use crate::kernels::dequant::DequantRowsKernel;
use crate::kernels::gather_rows::GatherRowsKernel;
use crate::kernels::{Family, Kernel};
use crate::memory::{DeviceBuffer, FloatElem, QuantMatrix};
use crate::ops::expect_len;

impl<'a> Stream<Recording<'a>> {
    /// The token embeddings of a decode or prefill step: `out[t * cols + c] =
    /// table[ids[t], c]` for each of the `ids.len()` ids, dequantized from any
    /// [`QuantFormat`](crate::kernels::qgemv::QuantFormat) (GGML's `get_rows`). The ids
    /// stay on the device (the token [`Self::argmax`] just wrote, say); an id past the
    /// table's rows gives a row of NaN, never a read outside the table. `out` holds
    /// `ids.len() * table.cols()` values.
    ///
    /// ```
    /// use trueno_gpu::driver::Context;
    /// use trueno_gpu::kernels::qgemv::QuantFormat;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// // A 3 x 32 Q8_0 table: row r has scale r + 1 and quants 0, 1, ..., 31.
    /// let table: Vec<u8> = (0..3u8)
    ///     .flat_map(|r| {
    ///         let d = half::f16::from_f32(f32::from(r + 1)).to_le_bytes();
    ///         d.into_iter().chain(0..32u8)
    ///     })
    ///     .collect();
    /// let table = ctx.upload_quant(QuantFormat::Q8_0, 3, 32, &table)?;
    /// let ids = ctx.upload(&[2u32, 0])?;
    /// let mut out = ctx.alloc::<f32>(2 * 32)?;
    /// let mut s = ctx.stream()?.record();
    /// s.embedding_rows(&table, &ids, &out)?;
    /// s.sync()?;
    /// let out = out.to_vec()?;
    /// assert_eq!((out[5], out[32 + 5]), (15.0, 5.0)); // 3 * 5, then 1 * 5
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    pub fn embedding_rows(
        &mut self,
        table: &'a QuantMatrix,
        ids: &'a DeviceBuffer<u32>,
        out: &'a DeviceBuffer<f32>,
    ) -> Result<()> {
        self.dequant_rows(table, Some(ids), out)
    }

    /// [`Self::embedding_rows`] from a dense table (`table` row-major, `cols` wide, of
    /// f32, bf16 or f16; 16-bit values widened exactly): `out[t * cols + c] =
    /// table[ids[t] * cols + c]`, an id past the table's rows a row of NaN.
    ///
    /// ```
    /// use half::f16;
    /// use trueno_gpu::driver::Context;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// // A 3 x 4 f16 table: row r holds r, r + 0.5, r + 1, r + 1.5.
    /// let table: Vec<f16> = (0..12).map(|i| f16::from_f32((i / 4) as f32 + (i % 4) as f32 / 2.0)).collect();
    /// let table = ctx.upload(&table)?;
    /// let ids = ctx.upload(&[2u32, 7])?;
    /// let mut out = ctx.alloc::<f32>(2 * 4)?;
    /// let mut s = ctx.stream()?.record();
    /// s.embedding_rows_dense(&table, 4, &ids, &out)?;
    /// s.sync()?;
    /// let out = out.to_vec()?;
    /// assert_eq!(&out[..4], &[2.0, 2.5, 3.0, 3.5]);
    /// assert!(out[4..].iter().all(|v| v.is_nan())); // id 7 is past the table
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    pub fn embedding_rows_dense<T: FloatElem>(
        &mut self,
        table: &'a DeviceBuffer<T>,
        cols: usize,
        ids: &'a DeviceBuffer<u32>,
        out: &'a DeviceBuffer<f32>,
    ) -> Result<()> {
        let k = GatherRowsKernel(T::TYPE);
        let cfg = k.launch_config(&[ids.len(), cols])?;
        if table.is_empty()
            || !table.len().is_multiple_of(cols)
            || table.len() / cols > u32::MAX as usize
        {
            return shape_err(
                &k.name(),
                format!(
                    "a table of {} values is not whole rows of {cols}",
                    table.len()
                ),
            );
        }
        expect_len("embedding rows", out, ids.len() * cols)?;
        let f = self.context().function(Family::Qgemv, &k.name())?;
        self.launch(&f)
            .config(cfg)
            .arg(KernelArg::buf(table))
            .arg(KernelArg::buf(ids))
            .arg(KernelArg::buf_mut(out))
            .arg(KernelArg::U32(cols as u32))
            .arg(KernelArg::U32((table.len() / cols) as u32))
            .arg(KernelArg::U32((ids.len() * cols) as u32))
            .run()
    }

    /// `out = W` as f32, row-major (`w.rows() * w.cols()` values): the weights for a
    /// library that wants them dense, or a check of what the quantized products read.
    pub fn dequantize(&mut self, w: &'a QuantMatrix, out: &'a DeviceBuffer<f32>) -> Result<()> {
        self.dequant_rows(w, None, out)
    }

    /// Rows `ids` of `w` (or all of them, in order) into `out`.
    fn dequant_rows(
        &mut self,
        w: &'a QuantMatrix,
        ids: Option<&'a DeviceBuffer<u32>>,
        out: &'a DeviceBuffer<f32>,
    ) -> Result<()> {
        let k = DequantRowsKernel(w.format());
        let rows = ids.map_or(w.rows(), |i| i.len());
        if rows == 0 {
            return shape_err(&k.name(), "no ids");
        }
        if w.rows() > u32::MAX as usize {
            return shape_err(&k.name(), format!("{} rows are over 2^32", w.rows()));
        }
        let cfg = k.launch_config(&[rows, w.cols()])?;
        expect_len("dequantized rows", out, rows * w.cols())?;
        let f = self.context().function(Family::Qgemv, &k.name())?;
        // Without ids the kernel never reads its ids pointer.
        let ids_arg = self.optional_arg(ids)?;
        self.launch(&f)
            .config(cfg)
            .arg(KernelArg::buf(w.words()))
            .arg(ids_arg)
            .arg(KernelArg::buf_mut(out))
            .arg(KernelArg::U32(rows as u32))
            .arg(KernelArg::U32((w.cols() / w.format().block_elems()) as u32))
            .arg(KernelArg::U32(w.rows() as u32))
            .arg(KernelArg::U32(ids.is_some() as u32))
            .run()
    }
}
