//! A prefill's projections from quantized weights on the tensor cores: the weights
//! dequantized to a transposed bf16 matrix, the activations rounded to bf16, then the
//! 16-bit GEMM ([`Stream::gemm_mma`]: wgmma on Hopper). Not yet one fused kernel (the
//! weights make a trip through memory at two bytes a value), but every FLOP on the
//! tensor cores.

use half::bf16;

use crate::GemmEpilogue;
use crate::driver::{KernelArg, Recording, Stream};
use crate::error::{Result, shape_err};
use crate::kernels::convert::ToHalfKernel;
use crate::kernels::dequant_t::DequantTransposedKernel;
use crate::kernels::{Family, Kernel};
use crate::memory::{DeviceBuffer, FloatElem, HalfElem, QuantMatrix};
use crate::ops::expect_len;

impl<'a> Stream<Recording<'a>> {
    /// `y[i] = x[i]` rounded to f16 or bf16 (to nearest even), for the tensor-core
    /// products' 16-bit operands. `x` and `y` have the same length.
    pub fn to_half<T: HalfElem>(
        &mut self,
        x: &'a DeviceBuffer<f32>,
        y: &'a DeviceBuffer<T>,
    ) -> Result<()> {
        let k = ToHalfKernel(T::TYPE);
        let cfg = k.launch_config(&[x.len()])?;
        expect_len("to_half output", y, x.len())?;
        let f = self.context().function(Family::Elementwise, &k.name())?;
        self.launch(&f)
            .config(cfg)
            .arg(KernelArg::buf(x))
            .arg(KernelArg::buf_mut(y))
            .arg(KernelArg::U32(x.len() as u32))
            .run()
    }

    /// `wt[c * rows + r] = bf16(W[r, c])`: the quantized `[rows, cols]` matrix as the
    /// row-major `[cols, rows]` bf16 matrix `Wᵀ`, the `b` of a GEMM `Y = X Wᵀ`. `rows` a
    /// multiple of 8, `cols` of 256; `wt` holds `rows * cols` values.
    pub fn dequantize_transposed(
        &mut self,
        w: &'a QuantMatrix,
        wt: &'a DeviceBuffer<bf16>,
    ) -> Result<()> {
        let k = DequantTransposedKernel(w.format());
        let cfg = k.launch_config(&[w.rows(), w.cols()])?;
        expect_len("dequantize_transposed output", wt, w.rows() * w.cols())?;
        let f = self.context().function(Family::Qgemv, &k.name())?;
        self.launch(&f)
            .config(cfg)
            .arg(KernelArg::buf(w.words()))
            .arg(KernelArg::buf_mut(wt))
            .arg(KernelArg::U32(w.rows() as u32))
            .arg(KernelArg::U32((w.cols() / w.format().block_elems()) as u32))
            .run()
    }

    /// `y[t] = W x[t]` for `tokens` activation vectors at once (a prompt): `x` is f32
    /// `[tokens, w.cols()]`, `y` f32 `[tokens, w.rows()]`. The weights are dequantized
    /// into `wt` (bf16, `w.rows() * w.cols()`: see [`Self::dequantize_transposed`]) and the
    /// activations rounded into `xh` (bf16, `tokens * w.cols()`), then multiplied on the
    /// tensor cores with f32 accumulation, so the result is that of the bf16-rounded
    /// weights and activations. `w.rows()` a multiple of 8, `w.cols()` of 256.
    ///
    /// ```
    /// use half::bf16;
    /// use trueno_gpu::driver::Context;
    /// use trueno_gpu::kernels::qgemv::QuantFormat;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// // An 8 x 256 Q8_0 matrix: row r has scale 1 and every quant r + 1.
    /// let w: Vec<u8> = (0..8u8)
    ///     .flat_map(|r| (0..8).flat_map(move |_| {
    ///         half::f16::ONE.to_le_bytes().into_iter().chain([r + 1; 32])
    ///     }))
    ///     .collect();
    /// let w = ctx.upload_quant(QuantFormat::Q8_0, 8, 256, &w)?;
    /// // Two tokens: all 0.5, all 0.25.
    /// let x: Vec<f32> = [0.5f32, 0.25].iter().flat_map(|&v| [v; 256]).collect();
    /// let x = ctx.upload(&x)?;
    /// let (wt, xh) = (ctx.alloc::<bf16>(8 * 256)?, ctx.alloc::<bf16>(2 * 256)?);
    /// let mut y = ctx.alloc::<f32>(2 * 8)?;
    /// let mut s = ctx.stream()?.record();
    /// s.qgemm(&w, &x, &y, 2, &wt, &xh)?;
    /// s.sync()?;
    /// let y = y.to_vec()?;
    /// assert_eq!((y[0], y[7], y[8 + 7]), (128.0, 1024.0, 512.0)); // 256 * 0.5 * (r + 1)
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn qgemm(
        &mut self,
        w: &'a QuantMatrix,
        x: &'a DeviceBuffer<f32>,
        y: &'a DeviceBuffer<f32>,
        tokens: usize,
        wt: &'a DeviceBuffer<bf16>,
        xh: &'a DeviceBuffer<bf16>,
    ) -> Result<()> {
        self.qgemm_with(w, x, y, tokens, (wt, xh), GemmEpilogue::default())
    }

    /// [`qgemm`](Self::qgemm) with the GEMM's epilogue ([`GemmEpilogue`]: a bias per
    /// output row of `w`, an activation, alpha/beta) and an f32, bf16 or f16 `y`: a
    /// projection with its bias (Qwen2's q/k/v) written straight to bf16, in the same
    /// three launches. `scratch` is `(wt, xh)` as `qgemm` takes them.
    ///
    /// ```
    /// use half::bf16;
    /// use trueno_gpu::GemmEpilogue;
    /// use trueno_gpu::driver::Context;
    /// use trueno_gpu::kernels::qgemv::QuantFormat;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// // An 8 x 256 Q8_0 matrix of ones (scale 1, every quant 1), one token of 0.5.
    /// let w: Vec<u8> = (0..8 * 8)
    ///     .flat_map(|_| half::f16::ONE.to_le_bytes().into_iter().chain([1u8; 32]))
    ///     .collect();
    /// let w = ctx.upload_quant(QuantFormat::Q8_0, 8, 256, &w)?;
    /// let x = ctx.upload(&[0.5f32; 256])?;
    /// let bias: Vec<f32> = (0..8).map(|r| r as f32).collect();
    /// let bias = ctx.upload(&bias)?;
    /// let (wt, xh) = (ctx.alloc::<bf16>(8 * 256)?, ctx.alloc::<bf16>(256)?);
    /// let mut y = ctx.alloc::<bf16>(8)?;
    /// let mut s = ctx.stream()?.record();
    /// s.qgemm_with(&w, &x, &y, 1, (&wt, &xh), GemmEpilogue::default().with_bias(&bias))?;
    /// s.sync()?;
    /// assert_eq!(y.to_vec()?[3].to_f32(), 131.0); // 256 * 0.5 + 3
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn qgemm_with<C: FloatElem>(
        &mut self,
        w: &'a QuantMatrix,
        x: &'a DeviceBuffer<f32>,
        y: &'a DeviceBuffer<C>,
        tokens: usize,
        (wt, xh): (&'a DeviceBuffer<bf16>, &'a DeviceBuffer<bf16>),
        epilogue: GemmEpilogue<'a>,
    ) -> Result<()> {
        let (rows, cols) = (w.rows(), w.cols());
        if tokens == 0 {
            return shape_err("qgemm", "no tokens");
        }
        expect_len("qgemm input", x, tokens * cols)?;
        expect_len("qgemm output", y, tokens * rows)?;
        expect_len("qgemm bf16 activations", xh, tokens * cols)?;
        if let Some(bias) = epilogue.bias {
            expect_len("qgemm bias", bias, rows)?;
        }
        self.dequantize_transposed(w, wt)?;
        self.to_half(x, xh)?;
        self.gemm_mma_with(xh, wt, y, tokens, rows, cols, epilogue)
    }
}
