//! Matrix-vector products from GGML-quantized weights: against f32 activations, and the
//! integer path (activations quantized to Q8_K once, then `dp4a` products, or for a
//! batch the integer tensor cores).

use crate::driver::Context;
use crate::driver::{KernelArg, Recording, Stream};
use crate::error::{Result, shape_err};
use crate::kernels::qgemv::QgemvKernel;
use crate::kernels::qgemv_dp4a::{MAX_BATCH, QgemvQ8kKernel, QgemvQ8kOneWaveKernel, one_wave_wins};
use crate::kernels::qgemv_late::QgemvQ8kLateKernel;
use crate::kernels::qgemv_q4k_mma::{BatchPath, MMA_MAX_BATCH};
use crate::kernels::qgemv_q4k_mma_one::tensor_core_kernel_for;
use crate::kernels::qgemv_wide::{QgemvQ8kWideKernel, wide_may_win, wide_wins};
use crate::kernels::quantize_q8k::{BLOCK, QuantizeQ8kKernel};
use crate::kernels::{Family, Kernel};
use crate::memory::{DeviceBuffer, FloatElem, Q8kVector, QuantMatrix};
use crate::ops::expect_len;

impl<'a> Stream<Recording<'a>> {
    /// `y = W x` straight from quantized weights (dequantized in registers, f32
    /// accumulation): `x` (f32, or bf16/f16 activations, widened exactly as they are
    /// loaded) has `w.cols()` elements, f32 `y` gets `w.rows()`. `y` may not be `x`.
    pub fn qgemv<T: FloatElem>(
        &mut self,
        w: &'a QuantMatrix,
        x: &'a DeviceBuffer<T>,
        y: &'a DeviceBuffer<f32>,
    ) -> Result<()> {
        let k = QgemvKernel(w.format(), T::TYPE);
        let cfg = k.launch_config(&[w.rows(), w.cols()])?;
        expect_len("qgemv input", x, w.cols())?;
        expect_len("qgemv output", y, w.rows())?;
        if x.device_ptr() == y.device_ptr() {
            return shape_err(&k.name(), "the output may not alias the input");
        }
        let f = self.context().function(Family::Qgemv, &k.name())?;
        self.launch(&f)
            .config(cfg)
            .arg(KernelArg::buf(w.words()))
            .arg(KernelArg::buf(x))
            .arg(KernelArg::buf_mut(y))
            .arg(KernelArg::U32(w.rows() as u32))
            .arg(KernelArg::U32((w.cols() / w.format().block_elems()) as u32))
            .run()
    }

    /// Quantizes `x` to Q8_K into `q` (GGML's `quantize_row_q8_K`, bit for bit: see
    /// [`crate::kernels::quantize_q8k`]), the activations of [`Self::qgemv_q8k`]. `x` is
    /// f32, bf16 or f16 (16-bit activations quantize as their exact f32 values: the
    /// integer products then take f16 or bf16 activations); `x` and `q` have the same
    /// length, a multiple of 256.
    ///
    /// ```
    /// use trueno_gpu::driver::Context;
    /// use trueno_gpu::kernels::qgemv::QuantFormat;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// // A 2 x 256 Q4_K matrix: d = 1, dmin = 0, every 6-bit scale 1, every quant 1.
    /// let mut block = vec![0u8; 144];
    /// block[..2].copy_from_slice(&half::f16::ONE.to_le_bytes());
    /// block[4..8].fill(1); // scales of sub-blocks 0-3
    /// block[12..16].fill(1); // low bits of the scales of sub-blocks 4-7
    /// block[16..].fill(0x11);
    /// let w = ctx.upload_quant(QuantFormat::Q4K, 2, 256, &[block.clone(), block].concat())?;
    /// let x = ctx.upload(&vec![0.25f32; 256])?;
    /// let (q, mut y) = (ctx.alloc_q8k(256)?, ctx.alloc::<f32>(2)?);
    /// let mut s = ctx.stream()?.record();
    /// s.quantize_q8k(&x, &q)?;
    /// s.qgemv_q8k(&w, &q, &y)?;
    /// s.sync()?;
    /// // 0.25 is the block's largest magnitude: exactly -128 * (-1 / 512) each.
    /// assert_eq!(y.to_vec()?, vec![64.0, 64.0]);
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    pub fn quantize_q8k<T: FloatElem>(
        &mut self,
        x: &'a DeviceBuffer<T>,
        q: &'a Q8kVector,
    ) -> Result<()> {
        let k = QuantizeQ8kKernel(T::TYPE);
        let cfg = k.launch_config(&[x.len()])?;
        if q.len() != x.len() {
            return shape_err(
                &k.name(),
                format!("{} values into a Q8_K vector of {}", x.len(), q.len()),
            );
        }
        let (qs, d, sums) = q.parts();
        let f = self.context().function(Family::Qgemv, &k.name())?;
        self.launch(&f)
            .config(cfg)
            .arg(KernelArg::buf(x))
            .arg(KernelArg::buf_mut(qs))
            .arg(KernelArg::buf_mut(d))
            .arg(KernelArg::buf_mut(sums))
            .arg(KernelArg::U32((x.len() / BLOCK) as u32))
            .run()
    }

    /// `y = W a` for quantized weights `W` (any format: [`QgemvQ8kKernel::FORMATS`]) and
    /// activations quantized by [`Self::quantize_q8k`]: integer products per block, GGML's
    /// fast path (for the K-quants the result is trueno-quant's `dot_q8` per row, up to
    /// the order of the f32 sums; the activations' rounding is the difference from
    /// [`Self::qgemv`]). `a` has `w.cols()` values (a multiple of 256), `y` gets
    /// `w.rows()`. Q8_0 and Q4_0 weights take the same Q8_K activations (one scale per
    /// 256 values; GGML quantizes theirs per 32): where that is too coarse for an input
    /// with outliers, [`Self::qgemv`] keeps the activations in f32.
    pub fn qgemv_q8k(
        &mut self,
        w: &'a QuantMatrix,
        a: &'a Q8kVector,
        y: &'a DeviceBuffer<f32>,
    ) -> Result<()> {
        self.q8k_product(w, a, y, None)
    }

    /// [`Self::qgemv_q8k`] for `vectors` (1 to [`MMA_MAX_BATCH`], 32) activation vectors
    /// at once, the weights read once: `a` holds the vectors one after another (`vectors *
    /// w.cols()` values, quantized together by [`Self::quantize_q8k`]: a vector is whole
    /// blocks), `y` gets `y[v * w.rows() + r] = (W a[v])[r]`. For speculative decoding's
    /// draft tokens, sequences decoded together, or a short prompt's projections.
    ///
    /// ```
    /// use trueno_gpu::driver::Context;
    /// use trueno_gpu::kernels::qgemv::QuantFormat;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// // A 1 x 256 Q4_K row of ones (d = 1, dmin = 0, every scale 1, every quant 1).
    /// let mut block = vec![0u8; 144];
    /// block[..2].copy_from_slice(&half::f16::ONE.to_le_bytes());
    /// block[4..8].fill(1);
    /// block[12..16].fill(1);
    /// block[16..].fill(0x11);
    /// let w = ctx.upload_quant(QuantFormat::Q4K, 1, 256, &block)?;
    /// // Two vectors, one after the other: 256 x 0.25, then 256 x 0.5.
    /// let x: Vec<f32> = [0.25f32, 0.5].iter().flat_map(|&v| [v; 256]).collect();
    /// let x = ctx.upload(&x)?;
    /// let (q, mut y) = (ctx.alloc_q8k(512)?, ctx.alloc::<f32>(2)?);
    /// let mut s = ctx.stream()?.record();
    /// s.quantize_q8k(&x, &q)?;
    /// s.qgemv_q8k_batch(&w, &q, &y, 2)?;
    /// s.sync()?;
    /// assert_eq!(y.to_vec()?, vec![64.0, 128.0]);
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    pub fn qgemv_q8k_batch(
        &mut self,
        w: &'a QuantMatrix,
        a: &'a Q8kVector,
        y: &'a DeviceBuffer<f32>,
        vectors: usize,
    ) -> Result<()> {
        self.qgemv_q8k_batch_with(w, a, y, vectors, BatchPath::Auto)
    }

    /// [`Self::qgemv_q8k_batch`] on the kernel `path` names: batches of at least
    /// [`crate::kernels::qgemv_q4k_mma::mma_from_vectors`] vectors take the integer tensor
    /// cores by default ([`BatchPath::Auto`]), in the narrowest kernel that holds them
    /// (8, 16 or 32 vectors); [`BatchPath::Dp4a`] (up to [`MAX_BATCH`], 8 vectors),
    /// [`BatchPath::TensorCores`] and [`BatchPath::TensorCoresStaged`] force one kernel
    /// (for comparisons and tests).
    ///
    /// ```
    /// use trueno_gpu::driver::Context;
    /// use trueno_gpu::kernels::qgemv::QuantFormat;
    /// use trueno_gpu::kernels::qgemv_q4k_mma::BatchPath;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// // 16 Q4_K rows of ones (d = 1, dmin = 0, every scale 1, every quant 1).
    /// let mut block = vec![0u8; 144];
    /// block[..2].copy_from_slice(&half::f16::ONE.to_le_bytes());
    /// block[4..8].fill(1);
    /// block[12..16].fill(1);
    /// block[16..].fill(0x11);
    /// let w = ctx.upload_quant(QuantFormat::Q4K, 16, 256, &block.repeat(16))?;
    /// // Three vectors of 0.25, 0.5 and 1.0.
    /// let x: Vec<f32> = [0.25f32, 0.5, 1.0].iter().flat_map(|&v| [v; 256]).collect();
    /// let x = ctx.upload(&x)?;
    /// let (q, mut y) = (ctx.alloc_q8k(768)?, ctx.alloc::<f32>(48)?);
    /// let mut s = ctx.stream()?.record();
    /// s.quantize_q8k(&x, &q)?;
    /// s.qgemv_q8k_batch_with(&w, &q, &y, 3, BatchPath::TensorCores)?;
    /// s.sync()?;
    /// let y = y.to_vec()?;
    /// assert_eq!((y[0], y[16], y[47]), (64.0, 128.0, 256.0));
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    pub fn qgemv_q8k_batch_with(
        &mut self,
        w: &'a QuantMatrix,
        a: &'a Q8kVector,
        y: &'a DeviceBuffer<f32>,
        vectors: usize,
        path: BatchPath,
    ) -> Result<()> {
        let most = match path {
            BatchPath::Dp4a => MAX_BATCH,
            BatchPath::Auto | BatchPath::TensorCores | BatchPath::TensorCoresStaged => {
                MMA_MAX_BATCH
            }
        };
        let too_many = vectors
            .checked_mul(w.rows().max(w.cols()))
            .is_none_or(|n| n > u32::MAX as usize);
        if !(1..=most).contains(&vectors) || too_many {
            return shape_err(
                &path.kernel(w.format(), vectors.min(most)).name(),
                format!(
                    "{vectors} vectors of {} outputs from {} inputs: 1 to {most} a launch \
                     ({path:?}), under 2^32 outputs and activations",
                    w.rows(),
                    w.cols()
                ),
            );
        }
        self.q8k_product(w, a, y, Some((vectors, path)))
    }

    /// The integer product of one vector (`batch` `None`) or of a batch.
    fn q8k_product(
        &mut self,
        w: &'a QuantMatrix,
        a: &'a Q8kVector,
        y: &'a DeviceBuffer<f32>,
        batch: Option<(usize, BatchPath)>,
    ) -> Result<()> {
        let k: Box<dyn Kernel> = match batch {
            None => self.context().qgemv_q8k_kernel(w)?,
            Some((n, path)) => path.kernel(w.format(), n),
        };
        let cfg = k.launch_config(&[w.rows(), w.cols()])?;
        let vectors = batch.map_or(1, |(n, _)| n);
        if a.len() != vectors * w.cols() {
            return shape_err(
                &k.name(),
                format!(
                    "{} activations for {vectors} vectors of {}",
                    a.len(),
                    w.cols()
                ),
            );
        }
        expect_len("qgemv_q8k output", y, vectors * w.rows())?;
        let (qs, d, sums) = a.parts();
        let f = self.context().function(Family::Qgemv, &k.name())?;
        let mut launch = self
            .launch(&f)
            .config(cfg)
            .arg(KernelArg::buf(w.words()))
            .arg(KernelArg::buf(qs))
            .arg(KernelArg::buf(d))
            .arg(KernelArg::buf(sums))
            .arg(KernelArg::buf_mut(y))
            .arg(KernelArg::U32(w.rows() as u32))
            .arg(KernelArg::U32((w.cols() / BLOCK) as u32));
        if let Some((n, _)) = batch {
            launch = launch.arg(KernelArg::U32(n as u32));
        }
        launch.run()
    }
}

impl Context {
    /// The kernel [`Stream::qgemv_q8k`] runs for `w` on this device: a tensor-core kernel
    /// where [`tensor_core_kernel_for`] gives one (Q4_K, Q5_K, Q6_K), unless
    /// [`Self::set_qgemv_tensor_cores`] turned them off; else the format's one-wave
    /// variant ([`QgemvQ8kOneWaveKernel`], fewer steps a pass) where the matrix's rows
    /// run in one wave with it and not with the default ([`one_wave_wins`]; occupancy from
    /// the driver, for the kernels as compiled here), else the default: on a device with
    /// the bandwidth a multiprocessor of an H200
    /// ([`late_wins`](crate::kernels::qgemv_late::late_wins)) the late-activation kernel
    /// for its formats ([`QgemvQ8kLateKernel`]), else [`QgemvQ8kKernel`]. Before
    /// either, Q4_K's one-pass kernel ([`QgemvQ8kWideKernel`]) for many 4096-wide rows on
    /// such a device ([`wide_wins`]).
    ///
    /// ```
    /// use trueno_gpu::driver::Context;
    /// use trueno_gpu::kernels::Kernel;
    /// use trueno_gpu::kernels::qgemv::QuantFormat;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// let bytes = vec![0u8; 16 * 210]; // sixteen rows of one 210-byte super-block
    /// let w = ctx.upload_quant(QuantFormat::Q6K, 16, 256, &bytes)?;
    /// // Sixteen rows are two blocks: one wave with either kernel, so the deeper passes.
    /// let name = ctx.qgemv_q8k_kernel(&w)?.name();
    /// assert!(name == "trueno_qgemv_q6_k_q8k" || name == "trueno_qgemv_q6_k_q8k_late");
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    pub fn qgemv_q8k_kernel(&self, w: &QuantMatrix) -> Result<Box<dyn Kernel>> {
        let (f, dims) = (w.format(), [w.rows(), w.cols()]);
        let d = self.device();
        if let Some(k) = tensor_core_kernel_for(f, w.rows(), w.cols(), d.qgemv_device())
            .filter(|_| self.qgemv_tensor_cores())
        {
            return Ok(k);
        }
        let default = || QgemvQ8kLateKernel::or_default(f, d.peak_bandwidth_gbs, d.multiprocessors);
        let (plain, variant) = (QgemvQ8kKernel(f), QgemvQ8kOneWaveKernel(f));
        let cfg = plain.launch_config(&dims)?;
        let resident = |k: &dyn Kernel| {
            self.function(Family::Qgemv, &k.name())?
                .resident_blocks(cfg.block.0)
        };
        let (wide, sms, bw) = (
            QgemvQ8kWideKernel(f),
            d.multiprocessors,
            d.peak_bandwidth_gbs,
        );
        // The residency asked of the driver only where the rest of the rule holds.
        if wide_may_win(f, dims, sms, bw)
            && wide_wins(f, dims, cfg.grid.0, (sms, resident(&wide)?), bw)
        {
            return Ok(Box::new(wide));
        }
        if variant.steps().is_none() {
            return Ok(default());
        }
        // Measured against the plain kernel's residency. Where both it and the late
        // kernel fit one wave (Q6_K at 4096 rows), the one-step variant still wins: the
        // late kernel ran 0.917-0.925x of it on an H200 (session 36).
        let per_sm = (resident(&plain)?, resident(&variant)?);
        Ok(match one_wave_wins(cfg.grid.0, d.multiprocessors, per_sm) {
            true => Box::new(variant),
            false => default(),
        })
    }
}
