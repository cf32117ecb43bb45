//! A prefill's projections from quantized weights on the tensor cores, two ways: the
//! weights dequantized to a transposed bf16 matrix, the activations rounded to bf16,
//! then the 16-bit GEMM ([`Stream::gemm_mma`]: every device from sm_80; the weights make
//! a trip through memory at two bytes a value), or on Hopper one fused kernel that
//! dequantizes weight tiles into shared memory ([`Stream::qgemm_wgmma`]).
//! [`Stream::qgemm_with`] takes whichever measured faster for the format and prompt.

use half::bf16;

use crate::GemmEpilogue;
use crate::driver::{KernelArg, Recording, Stream};
use crate::error::{Result, shape_err};
use crate::kernels::convert::ToHalfKernel;
use crate::kernels::dequant_t::DequantTransposedKernel;
use crate::kernels::float_type::FloatType;
use crate::kernels::gemm_mma::{GemmInput, HalfType};
use crate::kernels::gemm_wgmma::tile_k;
use crate::kernels::qgemm_wgmma::{QgemmTileM, QgemmWgmmaKernel};
use crate::kernels::qgemv::QuantFormat;
use crate::kernels::{Family, Kernel};
use crate::memory::{DeviceBuffer, FloatElem, HalfElem, QuantMatrix};
use crate::ops::expect_len;
use crate::ops_gemm_split::{SplitShape, split_count};

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
    /// `[tokens, w.cols()]`, `y` f32 `[tokens, w.rows()]`. The activations are rounded
    /// into `xh` (bf16, `tokens * w.cols()`) and multiplied on the tensor cores with the
    /// weights dequantized to bf16 and f32 accumulation, so the result is that of the
    /// bf16-rounded weights and activations. On Hopper, where it measured faster (every
    /// format up to 256 tokens, Q8_0 and Q5_K up to 512, Q4_K and Q4_0 up to 1024), the
    /// fused kernel
    /// ([`Self::qgemm_wgmma`])
    /// does it after the rounding and `wt` is not touched (its length is still checked);
    /// otherwise the weights are dequantized into `wt` (bf16,
    /// `w.rows() * w.cols()`: see [`Self::dequantize_transposed`]) first. `w.rows()` a
    /// multiple of 8, `w.cols()` of 256.
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
        // Everything checked before the first launch; the scratch on both paths, so a
        // caller's works on every device.
        expect_len("qgemm input", x, tokens * cols)?;
        expect_len("qgemm bf16 weights", wt, rows * cols)?;
        check_io(
            "qgemm",
            [x.device_ptr(), wt.device_ptr()],
            (xh, y, epilogue),
            (tokens, rows, cols),
        )?;
        if fused_is_faster(self.context().has_sm90a(), w.format(), tokens) {
            self.to_half(x, xh)?;
            return self.qgemm_wgmma(w, xh, y, tokens, epilogue);
        }
        self.dequantize_transposed(w, wt)?;
        self.to_half(x, xh)?;
        self.gemm_mma_with(xh, wt, y, tokens, rows, cols, epilogue)
    }

    /// `y = act(alpha * xh Wᵀ + beta * y + bias)` on Hopper with the dequantization
    /// fused into the GEMM ([`QgemmWgmmaKernel`]): the weights are read as quantized
    /// blocks and turned into bf16 tiles in shared memory, never into a bf16 matrix in
    /// global memory. `xh` is bf16 `[tokens, w.cols()]` (activations already in bf16, or
    /// rounded by [`Self::to_half`]), `y` `[tokens, w.rows()]` of any output type, `bias`
    /// one value per row of `w`. The sums are those of the bf16-rounded weights and
    /// activations in f32. `w.rows()` a multiple of 8, `w.cols()` of 256; an error
    /// off Hopper (sm_90a), where [`Self::qgemm_with`] runs the unfused path.
    ///
    /// ```
    /// use half::bf16;
    /// use trueno_gpu::GemmEpilogue;
    /// use trueno_gpu::driver::Context;
    /// use trueno_gpu::kernels::qgemv::QuantFormat;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// if !ctx.has_sm90a() { return Ok(()) } // the fused kernel is Hopper's
    /// // An 8 x 256 Q8_0 matrix: row r has scale 1 and every quant r + 1.
    /// let w: Vec<u8> = (0..8u8)
    ///     .flat_map(|r| (0..8).flat_map(move |_| {
    ///         half::f16::ONE.to_le_bytes().into_iter().chain([r + 1; 32])
    ///     }))
    ///     .collect();
    /// let w = ctx.upload_quant(QuantFormat::Q8_0, 8, 256, &w)?;
    /// let xh = ctx.upload(&[bf16::from_f32(0.5); 256])?; // one token of 0.5
    /// let mut y = ctx.alloc::<f32>(8)?;
    /// let mut s = ctx.stream()?.record();
    /// s.qgemm_wgmma(&w, &xh, &y, 1, GemmEpilogue::default())?;
    /// s.sync()?;
    /// assert_eq!(y.to_vec()?[7], 1024.0); // 256 * 0.5 * 8
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    pub fn qgemm_wgmma<C: FloatElem>(
        &mut self,
        w: &'a QuantMatrix,
        xh: &'a DeviceBuffer<bf16>,
        y: &'a DeviceBuffer<C>,
        tokens: usize,
        epilogue: GemmEpilogue<'a>,
    ) -> Result<()> {
        let tile = qgemm_tile(tokens);
        self.qgemm_wgmma_tiled(tile, w, xh, y, tokens, epilogue)
    }

    /// [`qgemm_wgmma`](Self::qgemm_wgmma) with the block tile's height forced (the
    /// bench and the tests run both). A short prompt's tiles fill few multiprocessors:
    /// then the k-loop is cut by the split rule, as the 16-bit GEMMs' (see
    /// [`gemm_with_split`](Self::gemm_with_split)).
    pub fn qgemm_wgmma_tiled<C: FloatElem>(
        &mut self,
        tile: QgemmTileM,
        w: &'a QuantMatrix,
        xh: &'a DeviceBuffer<bf16>,
        y: &'a DeviceBuffer<C>,
        tokens: usize,
        epilogue: GemmEpilogue<'a>,
    ) -> Result<()> {
        let shape = SplitShape::qgemm(tile);
        let splits = split_count(shape, self.sms(), (tokens, w.rows(), w.cols()));
        self.qgemm_wgmma_with_split(tile, splits, w, xh, y, tokens, epilogue)
    }

    /// [`qgemm_wgmma_tiled`](Self::qgemm_wgmma_tiled) with the k-loop cut into `splits`
    /// ranges of whole 256-column groups (1: not cut; at most
    /// [`MAX_SPLITS`](crate::kernels::gemm_split::MAX_SPLITS)): each range's product to
    /// an f32 slice of scratch (`splits * tokens * w.rows()` values, kept until the
    /// stream is synchronised), then the reduce sums them and applies the epilogue.
    #[allow(clippy::too_many_arguments)]
    pub fn qgemm_wgmma_with_split<C: FloatElem>(
        &mut self,
        tile: QgemmTileM,
        splits: u32,
        w: &'a QuantMatrix,
        xh: &'a DeviceBuffer<bf16>,
        y: &'a DeviceBuffer<C>,
        tokens: usize,
        epilogue: GemmEpilogue<'a>,
    ) -> Result<()> {
        let kern = QgemmWgmmaKernel(w.format(), C::TYPE, tile);
        self.require_sm90a(&kern)?;
        let (n, k) = (w.rows(), w.cols());
        let cfg = kern.launch_config(&[tokens, n, k])?;
        check_io(&kern.name(), [], (xh, y, epilogue), (tokens, n, k))?;
        let box_k = tile_k(GemmInput::HalfBt(HalfType::Bf16));
        let a = KernelArg::tensor_map(xh, tokens, k, tile.rows(), box_k)?;
        let operands = [a, KernelArg::buf(w.words())];
        if splits == 1 {
            let f = self.context().function(Family::QgemmWgmma, &kern.name())?;
            let y = KernelArg::buf_mut(y);
            return self.launch_gemm(&f, cfg, operands, y, (tokens, n, k), epilogue);
        }
        // A cut writes raw f32 partial products.
        let partial = QgemmWgmmaKernel(w.format(), FloatType::F32, tile);
        let f = self
            .context()
            .function(Family::QgemmWgmma, &partial.name())?;
        self.split_k(cfg, splits, y, (tokens, n), epilogue, |s, cfg, out| {
            let raw = GemmEpilogue::default();
            s.launch_gemm(&f, cfg, operands, out, (tokens, n, k), raw)
        })
    }
}

/// The checks both quantized GEMMs make on their bf16 activations `xh`
/// (`[tokens, k]`), output `y` (`[tokens, n]`) and bias (`n`): lengths, and `y` aliasing
/// none of them nor the `other` inputs.
fn check_io<C: FloatElem, const N: usize>(
    name: &str,
    other: [u64; N],
    (xh, y, epilogue): (&DeviceBuffer<bf16>, &DeviceBuffer<C>, GemmEpilogue),
    (tokens, n, k): (usize, usize, usize),
) -> Result<()> {
    let inputs = other
        .into_iter()
        .chain([xh.device_ptr()])
        .chain(epilogue.bias.map(|b| b.device_ptr()));
    if inputs.into_iter().any(|p| p == y.device_ptr()) {
        return shape_err(name, "the output may not alias an input");
    }
    expect_len("qgemm bf16 activations", xh, tokens * k)?;
    expect_len("qgemm output", y, tokens * n)?;
    if let Some(bias) = epilogue.bias {
        expect_len("qgemm bias", bias, n)?;
    }
    Ok(())
}

/// The fused kernel's tile height for a prompt of `tokens`: the tall tile (each weight
/// block dequantized for 256 tokens at once) as soon as the prompt needs more than one
/// 128-row tile, since split-K fills the GPU with its fewer tiles. Measured on the H100
/// (GPU time, 2026-11-25 01:41 UTC, BENCHMARKS.md "Split-K"): the tall tile took
/// 0.68-0.95x the short one's time at 256 tokens for every format and shape, 0.67-1.03x
/// at 512 (Q4_K at 4096 x 14336 114.7 against 143.7 us), 0.66-0.87x at 1024-2048; at 128
/// tokens the short one wins (the tall took 1.19-1.45x: half of it is empty). Before
/// split-K the short tile won at 512 x 4096 (1.26x), with its twice as many blocks.
pub(crate) fn qgemm_tile(tokens: usize) -> QgemmTileM {
    if tokens > QgemmTileM::M128.rows() as usize {
        QgemmTileM::M256
    } else {
        QgemmTileM::M128
    }
}

/// Whether [`Stream::qgemm_with`] runs the fused kernel: on Hopper, for every format up
/// to 256 tokens, Q8_0 and Q5_K up to 512, Q4_K and Q4_0 up to 1024. Measured on the H100
/// (BENCHMARKS.md, three weight shapes, GPU time, 2026-11-25 01:41 UTC: the fused kernel
/// at `qgemm_tile`'s height and the split rule's cut, plus the activations' rounding,
/// against the unfused path): up to 256 tokens 0.41-0.85x the unfused time for every
/// format (Q6_K at 256 0.73-0.85x); at 512 Q4_K and Q4_0 0.74-0.86x, Q8_0 and Q5_K
/// 0.82-0.92x, Q6_K 1.19-1.24x; at 1024 Q4_K and Q4_0 0.82-0.96x, Q8_0 and Q5_K 0.88-1.08x
/// (a loss at some shape of each), Q6_K 1.27-1.48x; at 2048 every format 1.00-1.69x.
pub(crate) fn fused_is_faster(hopper: bool, format: QuantFormat, tokens: usize) -> bool {
    let limit = match format {
        QuantFormat::Q4K | QuantFormat::Q4_0 => 1024,
        QuantFormat::Q8_0 | QuantFormat::Q5K => 512,
        QuantFormat::Q6K => 256,
    };
    hopper && tokens <= limit
}
