//! The decode path over paged KV caches (see [`crate::kernels::paged`]): appending a
//! step's keys and values through the block table, and one-token attention over it.

use crate::driver::{KernelArg, Recording, Stream};
use crate::error::{Result, shape_err};
use crate::kernels::decode_split::DecodePath;
use crate::kernels::paged::{PagedKvAppendKernel, PagedShape};
use crate::kernels::{Family, Kernel};
use crate::memory::{DeviceBuffer, FloatElem};
use crate::ops::{expect_len, token_values};
use crate::ops_attention::{DecodeInputs, decode_chunk_kernel};

impl<'a> Stream<Recording<'a>> {
    /// [`kv_append`](Self::kv_append) into paged pools: `k_new`, `v_new`
    /// `[batch, heads_kv, dim]` (f32) written at position `positions[b]` of sequence `b`,
    /// i.e. row `positions[b] % page_size` of page `table[b][positions[b] / page_size]`
    /// of `k_pages` / `v_pages` (`[pool_pages, heads_kv, page_size, dim]`, f32, bf16 or
    /// f16). Positions at or past `max_pages * page_size` are not written; page ids past
    /// the pool are clamped to its last page (a valid table is the caller's part).
    ///
    /// ```
    /// use trueno_gpu::driver::Context;
    /// use trueno_gpu::kernels::paged::PagedShape;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// let shape = PagedShape {
    ///     batch: 1, heads_q: 1, heads_kv: 1, dim: 64, page_size: 16, max_pages: 2, pool_pages: 4,
    /// };
    /// let (k_new, v_new) = (ctx.upload(&[1.0f32; 64])?, ctx.upload(&[2.0f32; 64])?);
    /// let mut k_pages = ctx.alloc::<f32>(shape.pool_len())?;
    /// let v_pages = ctx.alloc::<f32>(shape.pool_len())?;
    /// let table = ctx.upload(&[3u32, 1])?; // positions 0-15 in page 3, 16-31 in page 1
    /// let pos = ctx.upload(&[17u32])?;
    /// let mut s = ctx.stream()?.record();
    /// s.kv_append_paged(&k_new, &v_new, &k_pages, &v_pages, &table, &pos, shape)?;
    /// s.sync()?;
    /// assert_eq!(k_pages.to_vec()?[(16 + 1) * 64], 1.0); // page 1, row 1
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn kv_append_paged<C: FloatElem>(
        &mut self,
        k_new: &'a DeviceBuffer<f32>,
        v_new: &'a DeviceBuffer<f32>,
        k_pages: &'a DeviceBuffer<C>,
        v_pages: &'a DeviceBuffer<C>,
        table: &'a DeviceBuffer<u32>,
        positions: &'a DeviceBuffer<u32>,
        shape: PagedShape,
    ) -> Result<()> {
        self.kv_append_paged_tokens(k_new, v_new, k_pages, v_pages, table, positions, shape, 1)
    }

    /// [`kv_append_paged`](Self::kv_append_paged) for `tokens` consecutive positions of
    /// each sequence in one launch (a prompt's keys and values): `k_new` and `v_new` are
    /// f32 `[batch, tokens, heads_kv, dim]`, token `t` of sequence `b` goes to position
    /// `positions[b] + t` through the table; positions past the table are not written.
    #[allow(clippy::too_many_arguments)]
    pub fn kv_append_paged_tokens<C: FloatElem>(
        &mut self,
        k_new: &'a DeviceBuffer<f32>,
        v_new: &'a DeviceBuffer<f32>,
        k_pages: &'a DeviceBuffer<C>,
        v_pages: &'a DeviceBuffer<C>,
        table: &'a DeviceBuffer<u32>,
        positions: &'a DeviceBuffer<u32>,
        shape: PagedShape,
        tokens: usize,
    ) -> Result<()> {
        let kern = PagedKvAppendKernel(C::TYPE);
        shape.check(&kern.name())?;
        let row = shape.batch * shape.heads_kv * shape.dim;
        let step = token_values(&kern.name(), row, tokens)?;
        expect_len("kv_append_paged k_new", k_new, step)?;
        expect_len("kv_append_paged v_new", v_new, step)?;
        expect_len("kv_append_paged k_pages", k_pages, shape.pool_len())?;
        expect_len("kv_append_paged v_pages", v_pages, shape.pool_len())?;
        expect_len(
            "kv_append_paged table",
            table,
            shape.batch * shape.max_pages,
        )?;
        expect_len("kv_append_paged positions", positions, shape.batch)?;
        if k_pages.device_ptr() == v_pages.device_ptr() {
            return shape_err(&kern.name(), "the key and value pools are the same buffer");
        }
        let cfg = kern.launch_config(&[step])?;
        let f = self.context().function(Family::Attention, &kern.name())?;
        self.launch(&f)
            .config(cfg)
            .arg(KernelArg::buf(k_new))
            .arg(KernelArg::buf(v_new))
            .arg(KernelArg::buf_mut(k_pages))
            .arg(KernelArg::buf_mut(v_pages))
            .arg(KernelArg::buf(positions))
            .arg(KernelArg::buf(table))
            .arg(KernelArg::U32(shape.heads_kv as u32))
            .arg(KernelArg::U32(shape.max_pages as u32))
            .arg(KernelArg::U32(shape.pool_pages as u32))
            .arg(KernelArg::U32(shape.page_size.trailing_zeros()))
            .arg(KernelArg::U32(shape.dim as u32))
            .arg(KernelArg::U32(tokens as u32))
            .arg(KernelArg::U32(step as u32))
            .run()
    }

    /// [`decode_attention`](Self::decode_attention) over paged pools: sequence `b`
    /// attends positions `0..lens[b]` (capped at `max_pages * page_size`), position `p`
    /// at row `p % page_size` of page `table[b][p / page_size]` of `k_pages` / `v_pages`
    /// (`[pool_pages, heads_kv, page_size, dim]`). `q` and `out` are
    /// `[batch, heads_q, dim]` (f32); page ids past the pool are clamped to its last page.
    ///
    /// ```
    /// use trueno_gpu::driver::Context;
    /// use trueno_gpu::kernels::paged::PagedShape;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// let shape = PagedShape {
    ///     batch: 1, heads_q: 2, heads_kv: 1, dim: 64, page_size: 8, max_pages: 2, pool_pages: 3,
    /// };
    /// let q = ctx.upload(&vec![0.1f32; 2 * 64])?;
    /// let k = ctx.upload(&vec![0.2f32; shape.pool_len()])?;
    /// let v = ctx.upload(&vec![3.0f32; shape.pool_len()])?;
    /// let (table, lens) = (ctx.upload(&[2u32, 0])?, ctx.upload(&[11u32])?);
    /// let mut out = ctx.alloc::<f32>(2 * 64)?;
    /// let mut s = ctx.stream()?.record();
    /// s.decode_attention_paged(&q, &k, &v, &table, &lens, &out, shape, 0.125)?;
    /// s.sync()?;
    /// assert!(out.to_vec()?.iter().all(|&x| (x - 3.0).abs() < 1e-5));
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn decode_attention_paged<C: FloatElem>(
        &mut self,
        q: &'a DeviceBuffer<f32>,
        k_pages: &'a DeviceBuffer<C>,
        v_pages: &'a DeviceBuffer<C>,
        table: &'a DeviceBuffer<u32>,
        lens: &'a DeviceBuffer<u32>,
        out: &'a DeviceBuffer<f32>,
        shape: PagedShape,
        scale: f32,
    ) -> Result<()> {
        let path = DecodePath::for_cache(C::TYPE);
        let inputs = (q, k_pages, v_pages);
        self.decode_attention_paged_with(path, inputs, (table, lens), out, shape, scale)
    }

    /// [`decode_attention_paged`](Self::decode_attention_paged) on the chunk kernel
    /// `path` names (see [`decode_attention_with`](Self::decode_attention_with)).
    ///
    /// ```
    /// use half::f16;
    /// use trueno_gpu::driver::Context;
    /// use trueno_gpu::kernels::decode_split::DecodePath;
    /// use trueno_gpu::kernels::paged::PagedShape;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// let shape = PagedShape {
    ///     batch: 1, heads_q: 2, heads_kv: 1, dim: 64, page_size: 8, max_pages: 2, pool_pages: 3,
    /// };
    /// let q = ctx.upload(&vec![0.1f32; 2 * 64])?;
    /// let k = ctx.upload(&vec![f16::from_f32(0.2); shape.pool_len()])?;
    /// let v = ctx.upload(&vec![f16::from_f32(3.0); shape.pool_len()])?;
    /// let (table, lens) = (ctx.upload(&[2u32, 0])?, ctx.upload(&[11u32])?);
    /// let mut out = ctx.alloc::<f32>(2 * 64)?;
    /// let mut s = ctx.stream()?.record();
    /// s.decode_attention_paged_with(DecodePath::Mma, (&q, &k, &v), (&table, &lens), &out, shape, 0.125)?;
    /// s.sync()?;
    /// assert!(out.to_vec()?.iter().all(|&x| (x - 3.0).abs() < 1e-5));
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    pub fn decode_attention_paged_with<C: FloatElem>(
        &mut self,
        path: DecodePath,
        (q, k_pages, v_pages): DecodeInputs<'a, C>,
        (table, lens): (&'a DeviceBuffer<u32>, &'a DeviceBuffer<u32>),
        out: &'a DeviceBuffer<f32>,
        shape: PagedShape,
        scale: f32,
    ) -> Result<()> {
        let longest = shape.as_decode();
        let chunk_k = decode_chunk_kernel(path, C::TYPE, &longest, true)?;
        shape.check(&chunk_k.name())?;
        let rows = shape.batch * shape.heads_q;
        expect_len("decode_attention_paged q", q, rows * shape.dim)?;
        expect_len("decode_attention_paged out", out, rows * shape.dim)?;
        expect_len("decode_attention_paged k_pages", k_pages, shape.pool_len())?;
        expect_len("decode_attention_paged v_pages", v_pages, shape.pool_len())?;
        expect_len(
            "decode_attention_paged table",
            table,
            shape.batch * shape.max_pages,
        )?;
        expect_len("decode_attention_paged lens", lens, shape.batch)?;
        if out.device_ptr() == q.device_ptr() {
            return shape_err(&chunk_k.name(), "the output may not alias the query");
        }
        let split = self.decode_split(&longest, chunk_k.as_ref(), path)?;
        let f = self.context().function(chunk_k.family(), &chunk_k.name())?;
        self.launch(&f)
            .config(split.cfg)
            .arg(KernelArg::buf(q))
            .arg(KernelArg::buf(k_pages))
            .arg(KernelArg::buf(v_pages))
            .arg(KernelArg::buf(lens))
            .arg(KernelArg::buf(table))
            .arg(KernelArg::scratch(&split.part_acc))
            .arg(KernelArg::scratch(&split.part_ml))
            .arg(KernelArg::U32(shape.heads_q as u32))
            .arg(KernelArg::U32(shape.heads_kv as u32))
            .arg(KernelArg::U32(shape.max_pages as u32))
            .arg(KernelArg::U32(shape.pool_pages as u32))
            .arg(KernelArg::U32(shape.page_size.trailing_zeros()))
            .arg(KernelArg::U32(split.chunk as u32))
            .arg(KernelArg::U32(split.splits as u32))
            .arg(KernelArg::F32(scale))
            .run()?;
        self.merge_chunks(&longest, split, out)
    }
}
