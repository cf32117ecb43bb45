//! The tensor-core GEMMs on a recording stream: the sm_80 path (`mma.sync`) and
//! Hopper's (`wgmma` fed by the copy engine, 16-bit or TF32), with the epilogue options
//! every caller of a GEMM in a network wants fused: alpha/beta, a bias per column, an
//! activation, and an f32, bf16 or f16 output.

use crate::driver::{Function, KernelArg, Recording, Stream};
use crate::error::{Result, shape_err};
use crate::gemm_tune::{GemmClass, GemmConfig};
use crate::kernels::float_type::FloatType;
use crate::kernels::gemm_epilogue::Activation;
use crate::kernels::gemm_mma::{GemmInput, MmaGemmKernel, MmaTileK};
use crate::kernels::gemm_wgmma::{BOX_N, TILE_M, WgmmaGemmKernel, WgmmaTileN, tile_k};
use crate::kernels::gemm_wgmma_kn::{
    BOX_COLS as KN_BOX_COLS, TILE_K as KN_TILE_K, WgmmaTf32KnKernel,
};
use crate::kernels::{Family, Kernel, LaunchConfig};
use crate::memory::{DeviceBuffer, DeviceCopy, FloatElem, HalfElem};
use crate::ops::expect_len;
use crate::ops_gemm_split::{SplitShape, split_count};

/// The wgmma path's tile width for an `m x n` output on a device of `sms`
/// multiprocessors: 256 wide unless those tiles would leave more than half the
/// multiprocessors idle, 64 wide where even 128-wide ones would. On the H100 (132 SMs):
/// n128 ran 125-149 TFLOP/s at 1024^3 (32 tiles of 256) against n256's 95-108, and
/// n256 won from 2048^3 (128 tiles) up; n64 (GPU time, BENCHMARKS.md "Small products
/// without cutting k")
/// took 1024^3 (64 tiles of 128) from 9.8-10.5 to 7.5-8.8 µs, 128 x 4096 x 4096 from
/// 20.6 (n128 cut in two) to 15.3-15.5 and 256 x 4096 x 4096 from 24.8 to 16.0, and
/// lost at 512 x 4096 x 4096 (128 tiles of 128; 39 against 30 µs a call in tuning).
pub(crate) fn wgmma_tile_for(sms: usize, m: usize, n: usize) -> WgmmaTileN {
    let tiles = |width: usize| m.div_ceil(TILE_M as usize) * n.div_ceil(width);
    if 2 * tiles(128) <= sms {
        WgmmaTileN::N64
    } else if 2 * tiles(256) < sms {
        WgmmaTileN::N128
    } else {
        WgmmaTileN::N256
    }
}

/// What a tensor-core GEMM does with each accumulated product `p` of row `r`, column
/// `j`: `c[r, j] = activation(alpha * p + beta * c[r, j] + bias[j])`, rounded to `c`'s
/// type last (to nearest even). `beta == 0` never reads `c` (NaN there does not leak).
/// The default is `c = p`.
///
/// ```
/// use trueno_gpu::GemmEpilogue;
/// use trueno_gpu::kernels::gemm_epilogue::Activation;
///
/// let e = GemmEpilogue::scaled(0.5, 0.0).with_activation(Activation::Gelu);
/// assert_eq!((e.alpha, e.beta, e.activation), (0.5, 0.0, Activation::Gelu));
/// assert!(e.bias.is_none());
/// ```
#[derive(Clone, Copy, Debug)]
pub struct GemmEpilogue<'a> {
    /// Scale of the product.
    pub alpha: f32,
    /// Scale of `c`'s old values (0: `c` is not read).
    pub beta: f32,
    /// One value per column of `c` (`n`), added before the activation.
    pub bias: Option<&'a DeviceBuffer<f32>>,
    /// Applied last.
    pub activation: Activation,
}

impl Default for GemmEpilogue<'_> {
    fn default() -> Self {
        GemmEpilogue::scaled(1.0, 0.0)
    }
}

impl<'a> GemmEpilogue<'a> {
    /// `c = alpha * p + beta * c`, no bias or activation.
    pub fn scaled(alpha: f32, beta: f32) -> Self {
        GemmEpilogue {
            alpha,
            beta,
            bias: None,
            activation: Activation::Identity,
        }
    }

    /// The same with a bias (`n` values) added before the activation.
    pub fn with_bias(self, bias: &'a DeviceBuffer<f32>) -> Self {
        GemmEpilogue {
            bias: Some(bias),
            ..self
        }
    }

    /// The same with `activation` applied last.
    pub fn with_activation(self, activation: Activation) -> Self {
        GemmEpilogue { activation, ..self }
    }
}

impl<'a> Stream<Recording<'a>> {
    /// `c = alpha * a b + beta * c` on the tensor cores: row-major `a` (m x k) and `b`
    /// (k x n) of f16 or bf16, f32 accumulation, `c` (m x n) f32, bf16 or f16. `n` and
    /// `k` must be multiples of 8; `beta == 0` never reads `c` (NaN there does not
    /// leak). Runs the fastest path the device has: [`gemm_wgmma`](Self::gemm_wgmma) on
    /// sm_90 (1.2-1.8x the mma.sync path at 1024-8192 on an H100),
    /// [`gemm_mma_tiled`](Self::gemm_mma_tiled) elsewhere.
    /// [`gemm_mma_with`](Self::gemm_mma_with) adds a bias and an activation.
    ///
    /// ```
    /// use half::bf16;
    /// use trueno_gpu::driver::Context;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// let (m, n, k) = (256, 128, 64);
    /// let a = ctx.upload(&vec![bf16::from_f32(0.5); m * k])?;
    /// let b = ctx.upload(&vec![bf16::from_f32(2.0); k * n])?;
    /// let mut c = ctx.alloc::<f32>(m * n)?;
    /// let mut s = ctx.stream()?.record();
    /// s.gemm_mma(&a, &b, &c, m, n, k, 1.0, 0.0)?;
    /// s.sync()?;
    /// assert_eq!(c.to_vec()?[0], 64.0);
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_mma<T: HalfElem, C: FloatElem>(
        &mut self,
        a: &'a DeviceBuffer<T>,
        b: &'a DeviceBuffer<T>,
        c: &'a DeviceBuffer<C>,
        m: usize,
        n: usize,
        k: usize,
        alpha: f32,
        beta: f32,
    ) -> Result<()> {
        self.gemm_mma_with(a, b, c, m, n, k, GemmEpilogue::scaled(alpha, beta))
    }

    /// [`gemm_mma`](Self::gemm_mma) with the whole epilogue: `c = act(alpha * a b +
    /// beta * c + bias)` in one launch (see [`GemmEpilogue`]), e.g. a projection with
    /// its bias written straight to bf16 for the next product.
    ///
    /// ```
    /// use half::bf16;
    /// use trueno_gpu::GemmEpilogue;
    /// use trueno_gpu::driver::Context;
    /// use trueno_gpu::kernels::gemm_epilogue::Activation;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// let (m, n, k) = (128, 64, 32);
    /// let a = ctx.upload(&vec![bf16::from_f32(0.5); m * k])?;
    /// let b = ctx.upload(&vec![bf16::from_f32(2.0); k * n])?;
    /// let bias: Vec<f32> = (0..n).map(|j| -(j as f32)).collect();
    /// let bias = ctx.upload(&bias)?;
    /// let mut c = ctx.alloc::<bf16>(m * n)?;
    /// let epilogue = GemmEpilogue::default()
    ///     .with_bias(&bias)
    ///     .with_activation(Activation::Relu);
    /// let mut s = ctx.stream()?.record();
    /// s.gemm_mma_with(&a, &b, &c, m, n, k, epilogue)?;
    /// s.sync()?;
    /// let c = c.to_vec()?;
    /// // Each product is 32; column j adds -j, then relu.
    /// assert_eq!((c[1].to_f32(), c[40].to_f32()), (31.0, 0.0));
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_mma_with<T: HalfElem, C: FloatElem>(
        &mut self,
        a: &'a DeviceBuffer<T>,
        b: &'a DeviceBuffer<T>,
        c: &'a DeviceBuffer<C>,
        m: usize,
        n: usize,
        k: usize,
        epilogue: GemmEpilogue<'a>,
    ) -> Result<()> {
        let config = self.gemm_choice(T::TYPE.into(), C::TYPE, (m, n, k));
        self.gemm_with_config(T::TYPE.into(), config, a, b, c, m, n, k, epilogue)
    }

    /// The configuration the GEMM ops run `input -> out` at `m x n x k` with: the one
    /// tuned for its class on this device ([`Context::tune_gemm`]), else the measured
    /// rule: on Hopper the wgmma path with 256-wide tiles unless they would leave more
    /// than half the multiprocessors idle (then 128-wide, or 64-wide where even those
    /// would; for [`GemmInput::Tf32Kn`] counted with the sides swapped, its kernel's
    /// tiles being those of `Cᵀ`), elsewhere the sm_80 path with the 64-wide k-step
    /// (TF32: 32).
    ///
    /// [`Context::tune_gemm`]: crate::driver::Context::tune_gemm
    pub fn gemm_choice(
        &self,
        input: GemmInput,
        out: FloatType,
        (m, n, k): (usize, usize, usize),
    ) -> GemmConfig {
        let ctx = self.context();
        if let Some(c) = ctx.tuned_gemm(GemmClass::of(input, out, m, n, k)) {
            return c;
        }
        match (ctx.has_sm90a(), input) {
            // Hopper's row-major-B kernel has tiles of R rows x 128 columns of Cᵀ: the
            // rule's count of 128 x R tiles with the sides swapped.
            (true, GemmInput::Tf32Kn) => GemmConfig::Wgmma(wgmma_tile_for(self.sms(), n, m)),
            (true, _) => GemmConfig::Wgmma(wgmma_tile_for(self.sms(), m, n)),
            (false, GemmInput::Tf32 | GemmInput::Tf32Kn) => GemmConfig::Mma(MmaTileK::K32),
            (false, _) => GemmConfig::Mma(MmaTileK::K64),
        }
    }

    /// [`gemm_mma_with`](Self::gemm_mma_with) with B given transposed: `c = act(alpha *
    /// a b_tᵀ + beta * c + bias)` for row-major f16/bf16 `a` (m x k) and `b_t` (n x k), a
    /// linear layer's `[out, in]` weights as they are stored (PyTorch's `x @ w.t()`), so
    /// they need no transpose; the same paths (wgmma on Hopper), the same contract.
    ///
    /// ```
    /// use half::bf16;
    /// use trueno_gpu::GemmEpilogue;
    /// use trueno_gpu::driver::Context;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// let (m, n, k) = (128, 64, 32);
    /// let x = ctx.upload(&vec![bf16::from_f32(0.5); m * k])?;
    /// // Weight row j (output feature j) holds j everywhere.
    /// let w: Vec<bf16> = (0..n * k).map(|i| bf16::from_f32((i / k) as f32)).collect();
    /// let w = ctx.upload(&w)?;
    /// let mut y = ctx.alloc::<f32>(m * n)?;
    /// let mut s = ctx.stream()?.record();
    /// s.gemm_mma_bt(&x, &w, &y, m, n, k, GemmEpilogue::default())?;
    /// s.sync()?;
    /// // y[r][j] = 32 * 0.5 * j.
    /// assert_eq!(y.to_vec()?[3], 48.0);
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_mma_bt<T: HalfElem, C: FloatElem>(
        &mut self,
        a: &'a DeviceBuffer<T>,
        b_t: &'a DeviceBuffer<T>,
        c: &'a DeviceBuffer<C>,
        m: usize,
        n: usize,
        k: usize,
        epilogue: GemmEpilogue<'a>,
    ) -> Result<()> {
        let input = GemmInput::HalfBt(T::TYPE);
        let config = self.gemm_choice(input, C::TYPE, (m, n, k));
        self.gemm_with_config(input, config, a, b_t, c, m, n, k, epilogue)
    }

    /// The sm_80 path (`mma.sync`, any device from sm_80) with the k-step chosen by the
    /// caller (for tuning and benchmarks; [`gemm_mma`](Self::gemm_mma) takes the
    /// measured best, or Hopper's own path where there is one).
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_mma_tiled<T: HalfElem, C: FloatElem>(
        &mut self,
        tile_k: MmaTileK,
        a: &'a DeviceBuffer<T>,
        b: &'a DeviceBuffer<T>,
        c: &'a DeviceBuffer<C>,
        m: usize,
        n: usize,
        k: usize,
        epilogue: GemmEpilogue<'a>,
    ) -> Result<()> {
        let config = GemmConfig::Mma(tile_k);
        self.gemm_with_config(T::TYPE.into(), config, a, b, c, m, n, k, epilogue)
    }

    /// [`gemm_mma_with`](Self::gemm_mma_with) on Hopper's own path (sm_90a: H100,
    /// H200): warpgroup products fed by the copy engine, a producer warpgroup and two
    /// consumers per 128 x 256 tile (128 x 128 where 256-wide tiles would leave most of
    /// the GPU idle). The same contract (row-major f16/bf16 `a` (m x k) and `b` (k x n),
    /// `n` and `k` multiples of 8, the epilogue of [`GemmEpilogue`]); an error on other
    /// devices ([`Context::has_sm90a`](crate::driver::Context::has_sm90a) says which).
    ///
    /// ```
    /// use half::bf16;
    /// use trueno_gpu::GemmEpilogue;
    /// use trueno_gpu::driver::Context;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// if !ctx.has_sm90a() {
    ///     return Ok(()); // not a Hopper: gemm_mma is the path
    /// }
    /// let (m, n, k) = (256, 128, 64);
    /// let a = ctx.upload(&vec![bf16::from_f32(0.5); m * k])?;
    /// let b = ctx.upload(&vec![bf16::from_f32(2.0); k * n])?;
    /// let mut c = ctx.alloc::<f32>(m * n)?;
    /// let mut s = ctx.stream()?.record();
    /// s.gemm_wgmma(&a, &b, &c, m, n, k, GemmEpilogue::default())?;
    /// s.sync()?;
    /// assert_eq!(c.to_vec()?[0], 64.0);
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_wgmma<T: HalfElem, C: FloatElem>(
        &mut self,
        a: &'a DeviceBuffer<T>,
        b: &'a DeviceBuffer<T>,
        c: &'a DeviceBuffer<C>,
        m: usize,
        n: usize,
        k: usize,
        epilogue: GemmEpilogue<'a>,
    ) -> Result<()> {
        let tile_n = match self.gemm_choice(T::TYPE.into(), C::TYPE, (m, n, k)) {
            GemmConfig::Wgmma(t) => t,
            GemmConfig::Mma(_) => wgmma_tile_for(self.sms(), m, n),
        };
        self.gemm_wgmma_tiled(tile_n, a, b, c, m, n, k, epilogue)
    }

    /// The device's multiprocessors.
    pub(crate) fn sms(&self) -> usize {
        self.context().device().multiprocessors as usize
    }

    /// An error naming `kernel` unless the device runs sm_90a code (Hopper): the wgmma
    /// ops check it before anything else, so a non-Hopper device hears why first.
    pub(crate) fn require_sm90a(&self, kernel: &dyn Kernel) -> Result<()> {
        match self.context().has_sm90a() {
            true => Ok(()),
            false => shape_err(&kernel.name(), "wgmma needs an sm_90a device (Hopper)"),
        }
    }

    /// [`gemm_wgmma`](Self::gemm_wgmma) with the tile width chosen by the caller (for
    /// tuning and benchmarks).
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_wgmma_tiled<T: HalfElem, C: FloatElem>(
        &mut self,
        tile_n: WgmmaTileN,
        a: &'a DeviceBuffer<T>,
        b: &'a DeviceBuffer<T>,
        c: &'a DeviceBuffer<C>,
        m: usize,
        n: usize,
        k: usize,
        epilogue: GemmEpilogue<'a>,
    ) -> Result<()> {
        let config = GemmConfig::Wgmma(tile_n);
        self.gemm_with_config(T::TYPE.into(), config, a, b, c, m, n, k, epilogue)
    }

    /// Every tensor-core GEMM op ends here, and tuning, benchmarks and tests call it to
    /// force a configuration: the kernel for `input` (the element type of `a` and `b`,
    /// checked; B as the input says: `k x n` for [`GemmInput::Half`] and
    /// [`GemmInput::Tf32Kn`], `n x k` for [`GemmInput::HalfBt`] and [`GemmInput::Tf32`])
    /// and `config` (an error where it cannot run: wgmma off Hopper, TF32 with the
    /// 64-wide k-step; `Tf32Kn` on wgmma is Hopper's row-major-B kernel,
    /// [`WgmmaTf32KnKernel`]), its operands as that
    /// kernel reads them (buffers for the sm_80 path, tensor maps for the copy engine),
    /// then the common launch with the epilogue of [`GemmEpilogue`]. Both paths cut k
    /// into ranges by the split rule where their tiles would leave most of the GPU idle
    /// ([`gemm_with_split`](Self::gemm_with_split) forces a cut).
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_with_config<T: DeviceCopy, C: FloatElem>(
        &mut self,
        input: GemmInput,
        config: GemmConfig,
        a: &'a DeviceBuffer<T>,
        b: &'a DeviceBuffer<T>,
        c: &'a DeviceBuffer<C>,
        m: usize,
        n: usize,
        k: usize,
        epilogue: GemmEpilogue<'a>,
    ) -> Result<()> {
        let shape = match (config, input) {
            (GemmConfig::Wgmma(tile_n), GemmInput::Tf32Kn) => SplitShape::wgmma_kn(tile_n),
            (GemmConfig::Wgmma(tile_n), _) => SplitShape::wgmma(input, tile_n),
            (GemmConfig::Mma(tile_k), _) => SplitShape::mma(tile_k),
        };
        let splits = split_count(shape, self.sms(), (m, n, k));
        self.gemm_with_split(input, config, splits, a, b, c, m, n, k, epilogue)
    }

    /// [`gemm_with_config`](Self::gemm_with_config) with the k-loop cut into `splits`
    /// ranges (1: not cut; at most
    /// [`MAX_SPLITS`](crate::kernels::gemm_split::MAX_SPLITS)): each range's product
    /// goes to an f32 slice of scratch (`splits * m * n` values, kept until the stream
    /// is synchronised), then one more kernel sums them and applies the epilogue.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_with_split<T: DeviceCopy, C: FloatElem>(
        &mut self,
        input: GemmInput,
        config: GemmConfig,
        splits: u32,
        a: &'a DeviceBuffer<T>,
        b: &'a DeviceBuffer<T>,
        c: &'a DeviceBuffer<C>,
        m: usize,
        n: usize,
        k: usize,
        epilogue: GemmEpilogue<'a>,
    ) -> Result<()> {
        if T::PTX != input.ptx() {
            let what = format!("{} inputs for a {} product", T::PTX, input.name());
            return shape_err("tensor-core gemm", what);
        }
        let names = match (input, config) {
            (GemmInput::Tf32, _) => ["gemm_tf32 a", "gemm_tf32 b_t", "gemm_tf32 c"],
            (GemmInput::Tf32Kn, _) => ["gemm_tf32_kn a", "gemm_tf32_kn b", "gemm_tf32_kn c"],
            (GemmInput::HalfBt(_), _) => ["gemm_bt a", "gemm_bt b_t", "gemm_bt c"],
            (_, GemmConfig::Mma(_)) => ["gemm_mma a", "gemm_mma b", "gemm_mma c"],
            (_, GemmConfig::Wgmma(_)) => ["gemm_wgmma a", "gemm_wgmma b", "gemm_wgmma c"],
        };
        // The kernel, its f32-output form a cut launches (raw partial products), and how
        // it reads A and B: as buffers (sm_80) or through the copy engine's tensor maps,
        // each (rows, cols, box rows, box cols).
        let (mma, wgmma, kn);
        let (family, kern, partial, maps): (_, &dyn Kernel, &dyn Kernel, _) = match config {
            GemmConfig::Mma(tile_k) => {
                mma = [C::TYPE, FloatType::F32].map(|o| MmaGemmKernel(input, tile_k, o));
                (Family::GemmMma, &mma[0], &mma[1], None)
            }
            GemmConfig::Wgmma(tile) if input == GemmInput::Tf32Kn => {
                kn = [C::TYPE, FloatType::F32].map(|o| WgmmaTf32KnKernel(tile, o));
                let a = (m, k, tile.elems(), KN_TILE_K);
                let b = (k, n, KN_TILE_K, KN_BOX_COLS);
                (Family::GemmWgmmaKn, &kn[0], &kn[1], Some([a, b]))
            }
            GemmConfig::Wgmma(tile_n) => {
                wgmma = [C::TYPE, FloatType::F32].map(|o| WgmmaGemmKernel(input, tile_n, o));
                let tk = tile_k(input);
                let b = match input.b_k_major() {
                    true => (n, k, tile_n.elems(), tk),
                    false => (k, n, tk, BOX_N),
                };
                (
                    Family::GemmWgmma,
                    &wgmma[0],
                    &wgmma[1],
                    Some([(m, k, TILE_M, tk), b]),
                )
            }
        };
        if let GemmConfig::Wgmma(_) = config {
            self.require_sm90a(kern)?;
        }
        let operands = |a, b| match maps {
            None => Ok([KernelArg::buf(a), KernelArg::buf(b)]),
            Some([(ar, ac, abr, abc), (br, bc, bbr, bbc)]) => Ok([
                KernelArg::tensor_map(a, ar, ac, abr, abc)?,
                KernelArg::tensor_map(b, br, bc, bbr, bbc)?,
            ]),
        };
        self.tensor_core_gemm(
            family,
            (kern, partial, splits),
            names,
            (a, b, c),
            (m, n, k),
            epilogue,
            operands,
        )
    }

    /// The tensor-core GEMMs' launch: the shape, lengths and aliasing checked, then A
    /// and B as `operands` passes them (buffers, or tensor maps of them), C, m, n, k
    /// and the epilogue's alpha, beta, bias and flags; with `splits` above 1, the
    /// ranges' launch of `partial` (the family's f32-output kernel) and the reduce.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn tensor_core_gemm<T: DeviceCopy, C: FloatElem>(
        &mut self,
        family: Family,
        (kern, partial, splits): (&dyn Kernel, &dyn Kernel, u32),
        names: [&'static str; 3],
        (a, b, c): (
            &'a DeviceBuffer<T>,
            &'a DeviceBuffer<T>,
            &'a DeviceBuffer<C>,
        ),
        (m, n, k): (usize, usize, usize),
        epilogue: GemmEpilogue<'a>,
        operands: impl FnOnce(&'a DeviceBuffer<T>, &'a DeviceBuffer<T>) -> Result<[KernelArg<'a>; 2]>,
    ) -> Result<()> {
        let cfg = kern.launch_config(&[m, n, k])?;
        let inputs = [a.device_ptr(), b.device_ptr()]
            .into_iter()
            .chain(epilogue.bias.map(|x| x.device_ptr()));
        if inputs.into_iter().any(|p| p == c.device_ptr()) {
            return shape_err(&kern.name(), "the output may not alias an input");
        }
        expect_len(names[0], a, m * k)?;
        expect_len(names[1], b, k * n)?;
        expect_len(names[2], c, m * n)?;
        if let Some(bias) = epilogue.bias {
            expect_len("gemm bias", bias, n)?;
        }
        let operands = operands(a, b)?;
        match splits {
            1 => {
                let f = self.context().function(family, &kern.name())?;
                let c = KernelArg::buf_mut(c);
                self.launch_gemm(&f, cfg, operands, c, (m, n, k), epilogue)
            }
            splits => {
                let f = self.context().function(family, &partial.name())?;
                self.split_k(cfg, splits, c, (m, n), epilogue, |s, cfg, out| {
                    let raw = GemmEpilogue::default();
                    s.launch_gemm(&f, cfg, operands, out, (m, n, k), raw)
                })
            }
        }
    }

    /// A GEMM kernel's launch once its operands are checked: A and B as the kernel
    /// reads them, C, m, n, k and the epilogue's alpha, beta, bias and flags.
    pub(crate) fn launch_gemm(
        &mut self,
        f: &Function,
        cfg: LaunchConfig,
        [a, b]: [KernelArg<'a>; 2],
        c: KernelArg<'a>,
        (m, n, k): (usize, usize, usize),
        epilogue: GemmEpilogue<'a>,
    ) -> Result<()> {
        let tail = self.epilogue_args(epilogue)?;
        let launch = self
            .launch(f)
            .config(cfg)
            .arg(a)
            .arg(b)
            .arg(c)
            .arg(KernelArg::U32(m as u32))
            .arg(KernelArg::U32(n as u32))
            .arg(KernelArg::U32(k as u32));
        tail.into_iter().fold(launch, |l, x| l.arg(x)).run()
    }

    /// The last four parameters of every kernel that applies a [`GemmEpilogue`]:
    /// `alpha`, `beta`, `bias` (an empty stand-in when there is none) and `epilogue`
    /// (the activation and bias flags).
    pub(crate) fn epilogue_args(&self, e: GemmEpilogue<'a>) -> Result<[KernelArg<'a>; 4]> {
        Ok([
            KernelArg::F32(e.alpha),
            KernelArg::F32(e.beta),
            self.optional_arg(e.bias)?,
            KernelArg::U32(e.activation.flags(e.bias.is_some())),
        ])
    }
}
