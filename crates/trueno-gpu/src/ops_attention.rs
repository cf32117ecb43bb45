//! Attention's stream operations: FlashAttention forward over packed variable-length
//! sequences (prefill), and the decode path's KV-cache append and one-token attention.

use crate::driver::{KernelArg, Recording, Stream};
use crate::error::{Result, shape_err};
use crate::kernels::attention::{DecodeChunkKernel, DecodeMergeKernel, DecodeShape};
use crate::kernels::decode_mma::DecodeMmaKernel;
use crate::kernels::decode_split::{DecodePath, half_type};
use crate::kernels::flash_attention::wgmma::{self as fa_wgmma, FlashAttentionWgmmaKernel};
use crate::kernels::flash_attention::{self, FlashAttentionKernel, FlashPath, FlashShape};
use crate::kernels::float_type::FloatType;
use crate::kernels::kv_cache::KvAppendKernel;
use crate::kernels::paged::PagedDecodeChunkKernel;
use crate::kernels::{Family, Kernel, LaunchConfig};
use crate::memory::{DeviceBuffer, FloatElem, HalfElem};
use crate::ops::{expect_len, token_values};

/// A decode step's query and key/value caches.
pub type DecodeInputs<'a, C> = (
    &'a DeviceBuffer<f32>,
    &'a DeviceBuffer<C>,
    &'a DeviceBuffer<C>,
);

/// The chunk kernel `path` names for a cache of type `ty`, contiguous or `paged`; an
/// error for the tensor cores on an f32 cache.
pub(crate) fn decode_chunk_kernel(
    path: DecodePath,
    ty: FloatType,
    shape: &DecodeShape,
    paged: bool,
) -> Result<Box<dyn Kernel>> {
    let dim = shape.dim as u32;
    let heads = shape.block_heads() as u32;
    Ok(match (path, paged) {
        (DecodePath::Simt, false) => Box::new(DecodeChunkKernel(dim, ty, heads)),
        (DecodePath::Simt, true) => Box::new(PagedDecodeChunkKernel(dim, ty, heads)),
        (DecodePath::Mma, _) => {
            let Some(ty) = half_type(ty) else {
                return shape_err(
                    "decode_attention",
                    "the tensor-core path (DecodePath::Mma) needs a bf16 or f16 cache",
                );
            };
            Box::new(DecodeMmaKernel { dim, ty, paged })
        }
    })
}

/// How a decode step splits its cache (see [`Stream::decode_split`]): positions per
/// chunk, chunks, the chunk kernel's launch, and the partials' scratch (accumulators;
/// max and sum).
pub(crate) struct DecodeSplit {
    pub(crate) chunk: usize,
    pub(crate) splits: usize,
    pub(crate) cfg: LaunchConfig,
    pub(crate) part_acc: DeviceBuffer<f32>,
    pub(crate) part_ml: DeviceBuffer<f32>,
}

impl<'a> Stream<Recording<'a>> {
    /// Writes one step's keys and values (f32, `[batch, heads_kv, dim]`) into the caches
    /// (`[batch, heads_kv, capacity, dim]` of f32, bf16 or f16: 16-bit caches get each
    /// value rounded to nearest) at row `positions[b]` of sequence `b`.
    /// Positions at or past the capacity are not written (the device cannot fail a
    /// launch; keep `lens` for [`decode_attention`](Self::decode_attention) within it).
    ///
    /// ```
    /// use trueno_gpu::driver::Context;
    /// use trueno_gpu::kernels::attention::DecodeShape;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// let shape = DecodeShape { batch: 1, heads_q: 1, heads_kv: 1, capacity: 4, dim: 64 };
    /// let (k_new, v_new) = (ctx.upload(&[1.0f32; 64])?, ctx.upload(&[2.0f32; 64])?);
    /// let mut k_cache = ctx.alloc::<f32>(4 * 64)?;
    /// let v_cache = ctx.alloc::<f32>(4 * 64)?;
    /// let pos = ctx.upload(&[2u32])?;
    /// let mut s = ctx.stream()?.record();
    /// s.kv_append(&k_new, &v_new, &k_cache, &v_cache, &pos, shape)?;
    /// s.sync()?;
    /// assert_eq!(k_cache.to_vec()?[2 * 64], 1.0);
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn kv_append<C: FloatElem>(
        &mut self,
        k_new: &'a DeviceBuffer<f32>,
        v_new: &'a DeviceBuffer<f32>,
        k_cache: &'a DeviceBuffer<C>,
        v_cache: &'a DeviceBuffer<C>,
        positions: &'a DeviceBuffer<u32>,
        shape: DecodeShape,
    ) -> Result<()> {
        self.kv_append_tokens(k_new, v_new, k_cache, v_cache, positions, shape, 1)
    }

    /// [`kv_append`](Self::kv_append) for `tokens` consecutive positions of each
    /// sequence in one launch (a prompt's keys and values, as its projections leave
    /// them): `k_new` and `v_new` are f32 `[batch, tokens, heads_kv, dim]`, token `t` of
    /// sequence `b` goes to row `positions[b] + t`; rows at or past the capacity are not
    /// written.
    ///
    /// ```
    /// use trueno_gpu::driver::Context;
    /// use trueno_gpu::kernels::attention::DecodeShape;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// let shape = DecodeShape { batch: 1, heads_q: 1, heads_kv: 1, capacity: 4, dim: 64 };
    /// // Three tokens from position 2: rows 2 and 3; the third is past the capacity.
    /// let new: Vec<f32> = (0..3 * 64).map(|i| (i / 64) as f32 + 1.0).collect();
    /// let new = ctx.upload(&new)?;
    /// let mut k_cache = ctx.upload(&vec![0.0f32; 4 * 64])?;
    /// let v_cache = ctx.alloc::<f32>(4 * 64)?;
    /// let start = ctx.upload(&[2u32])?;
    /// let mut s = ctx.stream()?.record();
    /// s.kv_append_tokens(&new, &new, &k_cache, &v_cache, &start, shape, 3)?;
    /// s.sync()?;
    /// let k = k_cache.to_vec()?;
    /// assert_eq!((k[64], k[2 * 64], k[3 * 64]), (0.0, 1.0, 2.0));
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn kv_append_tokens<C: FloatElem>(
        &mut self,
        k_new: &'a DeviceBuffer<f32>,
        v_new: &'a DeviceBuffer<f32>,
        k_cache: &'a DeviceBuffer<C>,
        v_cache: &'a DeviceBuffer<C>,
        positions: &'a DeviceBuffer<u32>,
        shape: DecodeShape,
        tokens: usize,
    ) -> Result<()> {
        let kern = KvAppendKernel(C::TYPE);
        shape.check(&kern.name())?;
        let row = shape.batch * shape.heads_kv * shape.dim;
        let step = token_values(&kern.name(), row, tokens)?;
        expect_len("kv_append k_new", k_new, step)?;
        expect_len("kv_append v_new", v_new, step)?;
        expect_len("kv_append k_cache", k_cache, row * shape.capacity)?;
        expect_len("kv_append v_cache", v_cache, row * shape.capacity)?;
        expect_len("kv_append positions", positions, shape.batch)?;
        if k_cache.device_ptr() == v_cache.device_ptr() {
            return shape_err(&kern.name(), "the key and value caches are the same buffer");
        }
        let cfg = kern.launch_config(&[step])?;
        let f = self.context().function(Family::Attention, &kern.name())?;
        self.launch(&f)
            .config(cfg)
            .arg(KernelArg::buf(k_new))
            .arg(KernelArg::buf(v_new))
            .arg(KernelArg::buf_mut(k_cache))
            .arg(KernelArg::buf_mut(v_cache))
            .arg(KernelArg::buf(positions))
            .arg(KernelArg::U32(shape.heads_kv as u32))
            .arg(KernelArg::U32(shape.capacity as u32))
            .arg(KernelArg::U32(shape.dim as u32))
            .arg(KernelArg::U32(tokens as u32))
            .arg(KernelArg::U32(step as u32))
            .run()
    }

    /// `out = softmax(scale * q K^T) V` for one query token per sequence: `q` and `out`
    /// `[batch, heads_q, dim]` (f32), the caches `[batch, heads_kv, capacity, dim]` (f32,
    /// or bf16/f16 for half the bytes; scores and sums stay f32), positions
    /// `0..lens[b]` of sequence `b` attended (`lens` on the device, so a step needs no
    /// host round trip; a length past the capacity counts as the capacity, an empty
    /// sequence gives zeros). Query head `h` reads key/value head
    /// `h / (heads_q / heads_kv)`. Split over the cache in chunks (flash-decoding), with
    /// the chunks' partial results in a scratch buffer this call allocates; 16-bit caches
    /// run on the tensor cores (see [`decode_attention_with`](Self::decode_attention_with)).
    ///
    /// ```
    /// use trueno_gpu::driver::Context;
    /// use trueno_gpu::kernels::attention::DecodeShape;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// let shape = DecodeShape { batch: 1, heads_q: 2, heads_kv: 1, capacity: 8, dim: 64 };
    /// let q = ctx.upload(&vec![0.1f32; 2 * 64])?;
    /// let k = ctx.upload(&vec![0.2f32; 8 * 64])?;
    /// let v = ctx.upload(&vec![3.0f32; 8 * 64])?;
    /// let lens = ctx.upload(&[5u32])?;
    /// let mut out = ctx.alloc::<f32>(2 * 64)?;
    /// let mut s = ctx.stream()?.record();
    /// s.decode_attention(&q, &k, &v, &lens, &out, shape, 0.125)?;
    /// s.sync()?;
    /// assert!(out.to_vec()?.iter().all(|&x| (x - 3.0).abs() < 1e-5));
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn decode_attention<C: FloatElem>(
        &mut self,
        q: &'a DeviceBuffer<f32>,
        k_cache: &'a DeviceBuffer<C>,
        v_cache: &'a DeviceBuffer<C>,
        lens: &'a DeviceBuffer<u32>,
        out: &'a DeviceBuffer<f32>,
        shape: DecodeShape,
        scale: f32,
    ) -> Result<()> {
        let path = DecodePath::for_cache(C::TYPE);
        self.decode_attention_with(path, (q, k_cache, v_cache), lens, out, shape, scale)
    }

    /// [`decode_attention`](Self::decode_attention) on the chunk kernel `path` names: 16-bit
    /// caches take the tensor cores ([`DecodePath::Mma`]) by default; [`DecodePath::Simt`]
    /// runs any cache type, [`DecodePath::Mma`] on an f32 cache is an error. Both are
    /// held to the same tolerance against an f64 softmax in the tests (1e-3 relative):
    /// the tensor-core kernel takes the query and the weights in two 16-bit parts each,
    /// about 16 significant bits, and sums in f32. On an f16 cache it also needs the
    /// query under 65504 in magnitude, as the cache's own values are.
    ///
    /// ```
    /// use half::bf16;
    /// use trueno_gpu::driver::Context;
    /// use trueno_gpu::kernels::attention::DecodeShape;
    /// use trueno_gpu::kernels::decode_split::DecodePath;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// let shape = DecodeShape { batch: 1, heads_q: 4, heads_kv: 1, capacity: 8, dim: 64 };
    /// let q = ctx.upload(&vec![0.1f32; 4 * 64])?;
    /// let k = ctx.upload(&vec![bf16::from_f32(0.2); 8 * 64])?;
    /// let v = ctx.upload(&vec![bf16::from_f32(3.0); 8 * 64])?;
    /// let lens = ctx.upload(&[5u32])?;
    /// let mut out = ctx.alloc::<f32>(4 * 64)?;
    /// let mut s = ctx.stream()?.record();
    /// s.decode_attention_with(DecodePath::Simt, (&q, &k, &v), &lens, &out, shape, 0.125)?;
    /// s.sync()?;
    /// assert!(out.to_vec()?.iter().all(|&x| (x - 3.0).abs() < 1e-5));
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    pub fn decode_attention_with<C: FloatElem>(
        &mut self,
        path: DecodePath,
        (q, k_cache, v_cache): DecodeInputs<'a, C>,
        lens: &'a DeviceBuffer<u32>,
        out: &'a DeviceBuffer<f32>,
        shape: DecodeShape,
        scale: f32,
    ) -> Result<()> {
        let chunk_k = decode_chunk_kernel(path, C::TYPE, &shape, false)?;
        shape.check(&chunk_k.name())?;
        let rows = shape.batch * shape.heads_q;
        expect_len("decode_attention q", q, rows * shape.dim)?;
        expect_len("decode_attention out", out, rows * shape.dim)?;
        let cache = shape.batch * shape.heads_kv * shape.capacity * shape.dim;
        expect_len("decode_attention k_cache", k_cache, cache)?;
        expect_len("decode_attention v_cache", v_cache, cache)?;
        expect_len("decode_attention lens", lens, shape.batch)?;
        if out.device_ptr() == q.device_ptr() {
            return shape_err(&chunk_k.name(), "the output may not alias the query");
        }
        let split = self.decode_split(&shape, chunk_k.as_ref(), path)?;
        let f = self.context().function(chunk_k.family(), &chunk_k.name())?;
        self.launch(&f)
            .config(split.cfg)
            .arg(KernelArg::buf(q))
            .arg(KernelArg::buf(k_cache))
            .arg(KernelArg::buf(v_cache))
            .arg(KernelArg::buf(lens))
            .arg(KernelArg::scratch(&split.part_acc))
            .arg(KernelArg::scratch(&split.part_ml))
            .arg(KernelArg::U32(shape.heads_q as u32))
            .arg(KernelArg::U32(shape.heads_kv as u32))
            .arg(KernelArg::U32(shape.capacity as u32))
            .arg(KernelArg::U32(split.chunk as u32))
            .arg(KernelArg::U32(split.splits as u32))
            .arg(KernelArg::F32(scale))
            .run()?;
        self.merge_chunks(&shape, split, out)
    }

    /// A decode step's split of the cache (`shape.capacity` positions, the longest
    /// sequence) into chunks for `path`'s chunk kernel, its launch and the partials'
    /// scratch.
    pub(crate) fn decode_split(
        &self,
        shape: &DecodeShape,
        chunk_k: &dyn Kernel,
        path: DecodePath,
    ) -> Result<DecodeSplit> {
        let ctx = self.context();
        let rows = shape.batch * shape.heads_q;
        let sms = ctx.device().multiprocessors as usize;
        let (chunk, heads) = shape.split_for(path, sms, ctx.device().max_shared_per_block);
        let splits = shape.capacity.div_ceil(chunk);
        Ok(DecodeSplit {
            chunk,
            splits,
            cfg: chunk_k.launch_config(&[splits, heads, shape.batch])?,
            part_acc: ctx.alloc::<f32>(rows * splits * shape.dim)?,
            part_ml: ctx.alloc::<f32>(rows * splits * 2)?,
        })
    }

    /// The second launch of a decode step: each query head's chunk partials merged into
    /// `out`; the scratch then lives until the stream is synchronised.
    pub(crate) fn merge_chunks(
        &mut self,
        shape: &DecodeShape,
        split: DecodeSplit,
        out: &'a DeviceBuffer<f32>,
    ) -> Result<()> {
        let merge_k = DecodeMergeKernel(shape.dim as u32);
        let cfg = merge_k.launch_config(&[shape.batch * shape.heads_q])?;
        let f = self
            .context()
            .function(Family::Attention, &merge_k.name())?;
        self.launch(&f)
            .config(cfg)
            .arg(KernelArg::scratch(&split.part_acc))
            .arg(KernelArg::scratch(&split.part_ml))
            .arg(KernelArg::buf_mut(out))
            .arg(KernelArg::U32(split.splits as u32))
            .run()?;
        self.keep_alive(split.part_acc);
        self.keep_alive(split.part_ml);
        Ok(())
    }

    /// FlashAttention forward: `out = softmax(scale * q k^T) v` per query head over its
    /// sequence's keys, f16 or bf16 in and out, f32 softmax and accumulation, the score
    /// matrix never in memory. Sequences are packed back to back (`q`, `out`
    /// `[total_q, heads_q, dim]`; `k`, `v` `[total_k, heads_kv, dim]`) and delimited by
    /// `cu_q` / `cu_k` (`[batch + 1]` token offsets on the device, flash-attn's varlen
    /// convention; offsets past the totals are clamped). Query head `h` reads key/value
    /// head `h / (heads_q / heads_kv)`. Causal masks align bottom-right: query `i` of `lq`
    /// sees keys `0..=i + lk - lq`; a row that sees no key is zeros. Query rows past
    /// `shape.max_seqlen_q` in a sequence are not written.
    ///
    /// ```
    /// use half::bf16;
    /// use trueno_gpu::driver::Context;
    /// use trueno_gpu::kernels::flash_attention::FlashShape;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// let shape = FlashShape {
    ///     batch: 1, heads_q: 2, heads_kv: 1, dim: 64,
    ///     total_q: 3, total_k: 3, max_seqlen_q: 3, causal: true,
    /// };
    /// let q = ctx.upload(&vec![bf16::from_f32(0.5); 3 * 2 * 64])?;
    /// let k = ctx.upload(&vec![bf16::from_f32(0.25); 3 * 64])?;
    /// let v = ctx.upload(&vec![bf16::from_f32(2.0); 3 * 64])?;
    /// let cu = ctx.upload(&[0u32, 3])?;
    /// let mut out = ctx.alloc::<bf16>(3 * 2 * 64)?;
    /// let mut s = ctx.stream()?.record();
    /// s.flash_attention(&q, &k, &v, &out, &cu, &cu, shape, 0.125)?;
    /// s.sync()?;
    /// assert!(out.to_vec()?.iter().all(|x| x.to_f32() == 2.0));
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn flash_attention<T: HalfElem>(
        &mut self,
        q: &'a DeviceBuffer<T>,
        k: &'a DeviceBuffer<T>,
        v: &'a DeviceBuffer<T>,
        out: &'a DeviceBuffer<T>,
        cu_q: &'a DeviceBuffer<u32>,
        cu_k: &'a DeviceBuffer<u32>,
        shape: FlashShape,
        scale: f32,
    ) -> Result<()> {
        let path = self.flash_path_for(shape);
        self.flash_attention_with(path, (q, k, v, out), None, (cu_q, cu_k), shape, scale)
    }

    /// The FlashAttention kernel this device runs: Hopper's warpgroup products where
    /// the device has them (sm_90a), else `mma.sync`.
    pub fn flash_path(&self) -> FlashPath {
        match self.context().has_sm90a() {
            true => FlashPath::Wgmma,
            false => FlashPath::Mma,
        }
    }

    /// [`flash_path`](Self::flash_path) for one call: `mma.sync` where there are no query
    /// or no key tokens at all (the copy engine's tensor maps describe no empty tensor;
    /// the output is zeros either way).
    fn flash_path_for(&self, shape: FlashShape) -> FlashPath {
        match shape.total_q == 0 || shape.total_k == 0 {
            true => FlashPath::Mma,
            false => self.flash_path(),
        }
    }

    /// [`flash_attention`](Self::flash_attention) that also writes each row's
    /// log-sum-exp, `lse[h, t] = ln sum_j e^(scale q_t . k_j)` over the keys the row sees
    /// (`-inf` where it sees none), f32 `[heads_q, total_q]` as flash-attn's varlen
    /// `softmax_lse`: what merging attention over split key ranges (or a backward pass)
    /// needs. Same launch, same speed; rows of tokens not in a sequence are not written.
    ///
    /// ```
    /// use half::bf16;
    /// use trueno_gpu::driver::Context;
    /// use trueno_gpu::kernels::flash_attention::FlashShape;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// let shape = FlashShape {
    ///     batch: 1, heads_q: 1, heads_kv: 1, dim: 64,
    ///     total_q: 3, total_k: 3, max_seqlen_q: 3, causal: true,
    /// };
    /// // Every score is 0.125 * 64 * 0.5 * 0.25 = 1: row i sees i + 1 keys.
    /// let q = ctx.upload(&vec![bf16::from_f32(0.5); 3 * 64])?;
    /// let k = ctx.upload(&vec![bf16::from_f32(0.25); 3 * 64])?;
    /// let v = ctx.upload(&vec![bf16::from_f32(2.0); 3 * 64])?;
    /// let cu = ctx.upload(&[0u32, 3])?;
    /// let out = ctx.alloc::<bf16>(3 * 64)?;
    /// let mut lse = ctx.alloc::<f32>(3)?;
    /// let mut s = ctx.stream()?.record();
    /// s.flash_attention_lse(&q, &k, &v, &out, &lse, &cu, &cu, shape, 0.125)?;
    /// s.sync()?;
    /// let lse = lse.to_vec()?;
    /// assert!((lse[2] - (1.0 + 3f32.ln())).abs() < 1e-4);
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn flash_attention_lse<T: HalfElem>(
        &mut self,
        q: &'a DeviceBuffer<T>,
        k: &'a DeviceBuffer<T>,
        v: &'a DeviceBuffer<T>,
        out: &'a DeviceBuffer<T>,
        lse: &'a DeviceBuffer<f32>,
        cu_q: &'a DeviceBuffer<u32>,
        cu_k: &'a DeviceBuffer<u32>,
        shape: FlashShape,
        scale: f32,
    ) -> Result<()> {
        let path = self.flash_path_for(shape);
        self.flash_attention_with(path, (q, k, v, out), Some(lse), (cu_q, cu_k), shape, scale)
    }

    /// [`flash_attention`](Self::flash_attention) (with the log-sum-exp where `lse` is
    /// given, as [`flash_attention_lse`](Self::flash_attention_lse)) on the kernel
    /// `path` names, for benchmarks and tests that compare the two; an error where the
    /// device cannot run it ([`FlashPath::Wgmma`] off Hopper, or with no query or no key
    /// tokens: its tensor maps describe no empty tensor).
    ///
    /// ```
    /// use half::bf16;
    /// use trueno_gpu::driver::Context;
    /// use trueno_gpu::kernels::flash_attention::{FlashPath, FlashShape};
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// let shape = FlashShape {
    ///     batch: 1, heads_q: 1, heads_kv: 1, dim: 128,
    ///     total_q: 5, total_k: 5, max_seqlen_q: 5, causal: false,
    /// };
    /// let q = ctx.upload(&vec![bf16::from_f32(0.5); 5 * 128])?;
    /// let v = ctx.upload(&vec![bf16::from_f32(-1.0); 5 * 128])?;
    /// let cu = ctx.upload(&[0u32, 5])?;
    /// let mut out = ctx.alloc::<bf16>(5 * 128)?;
    /// let mut s = ctx.stream()?.record();
    /// s.flash_attention_with(FlashPath::Mma, (&q, &q, &v, &out), None, (&cu, &cu), shape, 0.1)?;
    /// s.sync()?;
    /// assert!(out.to_vec()?.iter().all(|x| x.to_f32() == -1.0));
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    pub fn flash_attention_with<T: HalfElem>(
        &mut self,
        path: FlashPath,
        (q, k, v, out): (
            &'a DeviceBuffer<T>,
            &'a DeviceBuffer<T>,
            &'a DeviceBuffer<T>,
            &'a DeviceBuffer<T>,
        ),
        lse: Option<&'a DeviceBuffer<f32>>,
        (cu_q, cu_k): (&'a DeviceBuffer<u32>, &'a DeviceBuffer<u32>),
        shape: FlashShape,
        scale: f32,
    ) -> Result<()> {
        let (ty, dim) = (T::TYPE, shape.dim as u32);
        let hopper = FlashAttentionWgmmaKernel::for_sequences(ty, dim, shape.max_seqlen_q);
        let kern: Box<dyn Kernel> = match path {
            FlashPath::Mma => Box::new(FlashAttentionKernel(ty, dim)),
            FlashPath::Wgmma => Box::new(hopper),
        };
        shape.check(&kern.name())?;
        if path == FlashPath::Wgmma {
            self.require_sm90a(&*kern)?;
        }
        if !(scale.is_finite() && scale > 0.0) {
            return shape_err(
                &kern.name(),
                format!("scale {scale} is not a positive number"),
            );
        }
        let q_len = shape.total_q * shape.heads_q * shape.dim;
        let kv_len = shape.total_k * shape.heads_kv * shape.dim;
        expect_len("flash_attention q", q, q_len)?;
        expect_len("flash_attention out", out, q_len)?;
        expect_len("flash_attention k", k, kv_len)?;
        expect_len("flash_attention v", v, kv_len)?;
        expect_len("flash_attention cu_q", cu_q, shape.batch + 1)?;
        expect_len("flash_attention cu_k", cu_k, shape.batch + 1)?;
        let o = out.device_ptr();
        if [q.device_ptr(), k.device_ptr(), v.device_ptr()].contains(&o) {
            return shape_err(&kern.name(), "the output may not alias an input");
        }
        if let Some(lse) = lse {
            expect_len("flash_attention lse", lse, shape.heads_q * shape.total_q)?;
        }
        let cfg = kern.launch_config(&[shape.max_seqlen_q, shape.heads_q, shape.batch])?;
        // The Hopper kernel reads Q, K and V through tensor maps of `[tokens, heads *
        // dim]` in boxes of 64 columns.
        let inputs = match path {
            FlashPath::Mma => [KernelArg::buf(q), KernelArg::buf(k), KernelArg::buf(v)],
            FlashPath::Wgmma => {
                let (box_q, box_kv, cols) = (
                    hopper.block_rows(),
                    fa_wgmma::keys_per_tile(dim),
                    fa_wgmma::BOX_COLS,
                );
                let map = |x, tokens, heads, rows| {
                    KernelArg::tensor_map(x, tokens, heads * shape.dim, rows, cols)
                };
                [
                    map(q, shape.total_q, shape.heads_q, box_q)?,
                    map(k, shape.total_k, shape.heads_kv, box_kv)?,
                    map(v, shape.total_k, shape.heads_kv, box_kv)?,
                ]
            }
        };
        let f = self.context().function(kern.family(), &kern.name())?;
        let lse_arg = self.optional_arg(lse)?;
        let [iq, ik, iv] = inputs;
        self.launch(&f)
            .config(cfg)
            .arg(iq)
            .arg(ik)
            .arg(iv)
            .arg(KernelArg::buf_mut(out))
            .arg(KernelArg::buf(cu_q))
            .arg(KernelArg::buf(cu_k))
            .arg(KernelArg::U32(shape.total_q as u32))
            .arg(KernelArg::U32(shape.total_k as u32))
            .arg(KernelArg::U32(shape.heads_q as u32))
            .arg(KernelArg::U32(shape.heads_kv as u32))
            .arg(KernelArg::U32((shape.heads_q / shape.heads_kv) as u32))
            .arg(KernelArg::F32(flash_attention::scale_log2(scale)))
            .arg(KernelArg::U32(shape.causal as u32))
            .arg(lse_arg)
            .arg(KernelArg::U32(lse.is_some() as u32))
            .run()
    }
}
