//! The TF32 GEMMs (f32 operands on the tensor cores, as cuBLAS's TF32 mode) with B
//! given either way: transposed (`n x k`, a linear layer's weights), which every
//! tensor-core path reads as it is, or as stored (`k x n`), which Hopper's own kernel
//! reads as it is ([`crate::kernels::gemm_wgmma_kn`]) and other devices transpose first;
//! and the f32 transpose itself.

use crate::driver::{KernelArg, Recording, Stream};
use crate::error::{Result, shape_err};
use crate::gemm_tune::GemmConfig;
use crate::kernels::float_type::FloatType;
use crate::kernels::gemm_mma::{GemmInput, MmaGemmKernel, MmaTileK};
use crate::kernels::gemm_wgmma_kn::{BOX_COLS, TILE_K, WgmmaTf32KnKernel};
use crate::kernels::transpose::TransposeKernel;
use crate::kernels::{Family, Kernel};
use crate::memory::{DeviceBuffer, FloatElem};
use crate::ops::expect_len;
use crate::ops_gemm::{GemmEpilogue, wgmma_tile_for};
use crate::ops_gemm_split::{SplitShape, split_count};

impl<'a> Stream<Recording<'a>> {
    /// `c = act(alpha * a bᵀ + beta * c + bias)` for f32 `a` (m x k) and `b_t` (n x k),
    /// both row-major, on the tensor cores in TF32: each product reads 10 of the 23
    /// mantissa bits of its operands (relative error up to about 2^-10 a product), the
    /// sums stay f32, as cuBLAS's TF32 mode (`torch.backends.cuda.matmul.allow_tf32`).
    /// `b_t` is B transposed, the `[out, in]` layout of a linear layer's weights, which
    /// the tensor cores read as it is (TF32 operands only k-major); a row-major `k x n`
    /// B goes to [`gemm_tf32_kn`](Self::gemm_tf32_kn). `n` and `k` multiples of 8.
    /// Hopper's path (wgmma, as [`gemm_wgmma`](Self::gemm_wgmma)) on sm_90a, the
    /// `mma.sync` path elsewhere ([`gemm`](Self::gemm) is exact f32 on any device).
    ///
    /// ```
    /// use trueno_gpu::GemmEpilogue;
    /// use trueno_gpu::driver::Context;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// let (m, n, k) = (256, 128, 64);
    /// let a = ctx.upload(&vec![0.5f32; m * k])?;
    /// // Row j of b_t is column j of B: here B[p][j] = j, exactly representable in TF32.
    /// let b_t: Vec<f32> = (0..n * k).map(|i| (i / k) as f32).collect();
    /// let b_t = ctx.upload(&b_t)?;
    /// let mut c = ctx.alloc::<f32>(m * n)?;
    /// let mut s = ctx.stream()?.record();
    /// s.gemm_tf32(&a, &b_t, &c, m, n, k, GemmEpilogue::default())?;
    /// s.sync()?;
    /// // c[r][j] = 64 * 0.5 * j.
    /// assert_eq!(c.to_vec()?[3], 96.0);
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_tf32<C: FloatElem>(
        &mut self,
        a: &'a DeviceBuffer<f32>,
        b_t: &'a DeviceBuffer<f32>,
        c: &'a DeviceBuffer<C>,
        m: usize,
        n: usize,
        k: usize,
        epilogue: GemmEpilogue<'a>,
    ) -> Result<()> {
        let config = self.gemm_choice(GemmInput::Tf32, C::TYPE, (m, n, k));
        self.gemm_with_config(GemmInput::Tf32, config, a, b_t, c, m, n, k, epilogue)
    }

    /// `c = act(alpha * a b + beta * c + bias)` for f32 `a` (m x k) and `b` (k x n),
    /// both row-major as stored, in TF32 as [`gemm_tf32`](Self::gemm_tf32) (10 mantissa
    /// bits a product, f32 sums; the same epilogue and contract, `n` and `k` multiples
    /// of 8). On Hopper (sm_90a) one kernel reads B as it is (`Cᵀ = Bᵀ Aᵀ` with B's
    /// values gathered into registers); elsewhere B is transposed into scratch (freed
    /// when the stream is synchronised) for the sm_80 path. PyTorch's `a @ b` with TF32
    /// allowed.
    ///
    /// ```
    /// use trueno_gpu::GemmEpilogue;
    /// use trueno_gpu::driver::Context;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// let (m, n, k) = (256, 128, 64);
    /// let a = ctx.upload(&vec![0.5f32; m * k])?;
    /// // B[p][j] = j: column j of B holds j, exactly representable in TF32.
    /// let b: Vec<f32> = (0..k * n).map(|i| (i % n) as f32).collect();
    /// let b = ctx.upload(&b)?;
    /// let mut c = ctx.alloc::<f32>(m * n)?;
    /// let mut s = ctx.stream()?.record();
    /// s.gemm_tf32_kn(&a, &b, &c, m, n, k, GemmEpilogue::default())?;
    /// s.sync()?;
    /// // c[r][j] = 64 * 0.5 * j.
    /// assert_eq!(c.to_vec()?[3], 96.0);
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_tf32_kn<C: FloatElem>(
        &mut self,
        a: &'a DeviceBuffer<f32>,
        b: &'a DeviceBuffer<f32>,
        c: &'a DeviceBuffer<C>,
        m: usize,
        n: usize,
        k: usize,
        epilogue: GemmEpilogue<'a>,
    ) -> Result<()> {
        // The Hopper kernel's tiles are R rows x 128 columns: the rule's count of
        // 128 x R tiles with the sides swapped.
        let config = match self.context().has_sm90a() {
            true => GemmConfig::Wgmma(wgmma_tile_for(self.sms(), n, m)),
            false => GemmConfig::Mma(MmaTileK::K32),
        };
        self.gemm_tf32_kn_with_config(config, a, b, c, m, n, k, epilogue)
    }

    /// [`gemm_tf32_kn`](Self::gemm_tf32_kn) on the path `config` names (tests,
    /// benchmarks): `Wgmma(tile)` the Hopper kernel with tiles of `tile.elems()` rows
    /// (an error off sm_90a), `Mma(K32)` the transpose and the sm_80 path (`K64` is an
    /// error, as for every TF32 product). Both cut k by the split rule where their tiles
    /// would leave most of the GPU idle.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_tf32_kn_with_config<C: FloatElem>(
        &mut self,
        config: GemmConfig,
        a: &'a DeviceBuffer<f32>,
        b: &'a DeviceBuffer<f32>,
        c: &'a DeviceBuffer<C>,
        m: usize,
        n: usize,
        k: usize,
        epilogue: GemmEpilogue<'a>,
    ) -> Result<()> {
        let names = ["gemm_tf32_kn a", "gemm_tf32_kn b", "gemm_tf32_kn c"];
        match config {
            GemmConfig::Wgmma(tile) => {
                let kern = WgmmaTf32KnKernel(tile, C::TYPE);
                self.require_sm90a(&kern)?;
                let splits = split_count(SplitShape::wgmma_kn(tile), self.sms(), (m, n, k));
                // A cut writes raw f32 partial products.
                let partial = WgmmaTf32KnKernel(tile, FloatType::F32);
                let operands = |a, b| {
                    Ok([
                        KernelArg::tensor_map(a, m, k, tile.elems(), TILE_K)?,
                        KernelArg::tensor_map(b, k, n, TILE_K, BOX_COLS)?,
                    ])
                };
                self.tensor_core_gemm(
                    Family::GemmWgmmaKn,
                    (&kern, &partial, splits),
                    names,
                    (a, b, c),
                    (m, n, k),
                    epilogue,
                    operands,
                )
            }
            GemmConfig::Mma(tile_k) => {
                let kern = MmaGemmKernel(GemmInput::Tf32, tile_k, C::TYPE);
                // The shape and B's length before the transpose reads B; the rest
                // (lengths, aliasing) where every tensor-core GEMM checks them.
                kern.launch_config(&[m, n, k])?;
                expect_len(names[1], b, k * n)?;
                let b_t = self.context().alloc::<f32>(k * n)?;
                let run = self
                    .launch_transpose(KernelArg::buf(b), KernelArg::scratch(&b_t), (k, n))
                    .and_then(|()| {
                        let splits = split_count(SplitShape::mma(tile_k), self.sms(), (m, n, k));
                        let partial = MmaGemmKernel(GemmInput::Tf32, tile_k, FloatType::F32);
                        let b_t = KernelArg::scratch(&b_t);
                        self.tensor_core_gemm(
                            Family::GemmMma,
                            (&kern, &partial, splits),
                            names,
                            (a, b, c),
                            (m, n, k),
                            epilogue,
                            |a, _| Ok([KernelArg::buf(a), b_t]),
                        )
                    });
                self.keep_alive(b_t);
                run
            }
        }
    }

    /// `out = xᵀ` for a row-major f32 `x` (`rows x cols`; `out` is `cols x rows`): a
    /// row-major B made the `b_t` of [`gemm_tf32`](Self::gemm_tf32). One read and one
    /// write of each value, both coalesced (32 x 32 tiles through shared memory).
    ///
    /// ```
    /// use trueno_gpu::driver::Context;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// let x = ctx.upload(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?; // 2 x 3
    /// let mut out = ctx.alloc::<f32>(6)?;
    /// let mut s = ctx.stream()?.record();
    /// s.transpose(&x, &out, 2, 3)?;
    /// s.sync()?;
    /// assert_eq!(out.to_vec()?, [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    pub fn transpose(
        &mut self,
        x: &'a DeviceBuffer<f32>,
        out: &'a DeviceBuffer<f32>,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        if x.device_ptr() == out.device_ptr() {
            return shape_err(
                &TransposeKernel.name(),
                "the output may not alias the input",
            );
        }
        expect_len("transpose x", x, rows * cols)?;
        expect_len("transpose out", out, rows * cols)?;
        self.launch_transpose(KernelArg::buf(x), KernelArg::buf_mut(out), (rows, cols))
    }

    /// The transpose's launch, its operands checked.
    fn launch_transpose(
        &mut self,
        x: KernelArg<'a>,
        out: KernelArg<'a>,
        (rows, cols): (usize, usize),
    ) -> Result<()> {
        let kern = TransposeKernel;
        let cfg = kern.launch_config(&[rows, cols])?;
        let f = self.context().function(Family::Elementwise, &kern.name())?;
        self.launch(&f)
            .config(cfg)
            .arg(x)
            .arg(out)
            .arg(KernelArg::U32(rows as u32))
            .arg(KernelArg::U32(cols as u32))
            .run()
    }
}
