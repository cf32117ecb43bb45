//! The TF32 GEMMs (f32 operands on the tensor cores, as cuBLAS's TF32 mode) with B
//! given either way: transposed (`n x k`, a linear layer's weights) or as stored (`k x
//! n`), which Hopper runs on its own kernel ([`crate::kernels::gemm_wgmma_kn`]) and the
//! sm_80 path with gathered fragments; and the f32 transpose.

use crate::driver::{KernelArg, Recording, Stream};
use crate::error::{Result, shape_err};
use crate::gemm_tune::GemmConfig;
use crate::kernels::gemm_mma::GemmInput;
use crate::kernels::transpose::TransposeKernel;
use crate::kernels::{Family, Kernel};
use crate::memory::{DeviceBuffer, FloatElem};
use crate::ops::expect_len;
use crate::ops_gemm::GemmEpilogue;

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
    /// of 8). Both paths read B as it is: on Hopper (sm_90a) its own kernel (`Cᵀ = Bᵀ
    /// Aᵀ` with B's values gathered into registers), elsewhere the sm_80 path with B's
    /// fragments gathered one value at a time. The configuration is the one tuned for
    /// the shape's class ([`Context::tune_gemm_for`]) or the rule's
    /// ([`gemm_choice`](Self::gemm_choice)). PyTorch's `a @ b` with TF32 allowed.
    ///
    /// [`Context::tune_gemm_for`]: crate::driver::Context::tune_gemm_for
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
        let config = self.gemm_choice(GemmInput::Tf32Kn, C::TYPE, (m, n, k));
        self.gemm_tf32_kn_with_config(config, a, b, c, m, n, k, epilogue)
    }

    /// [`gemm_tf32_kn`](Self::gemm_tf32_kn) on the path `config` names (tests,
    /// benchmarks, tuning): `Wgmma(tile)` the Hopper kernel with tiles of `tile.elems()`
    /// rows (an error off sm_90a), `Mma(K32)` the sm_80 path reading B as stored (`K64`
    /// is an error, as for every TF32 product). Both cut k by the split rule where their
    /// tiles would leave most of the GPU idle. The same as
    /// [`gemm_with_config`](Self::gemm_with_config) with [`GemmInput::Tf32Kn`].
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
        self.gemm_with_config(GemmInput::Tf32Kn, config, a, b, c, m, n, k, epilogue)
    }

    /// `out = xᵀ` for a row-major f32 `x` (`rows x cols`; `out` is `cols x rows`): for
    /// instance a row-major B made the `b_t` of [`gemm_tf32`](Self::gemm_tf32). One read
    /// and one write of each value, both coalesced (32 x 32 tiles through shared memory).
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
        let kern = TransposeKernel;
        let cfg = kern.launch_config(&[rows, cols])?;
        let f = self.context().function(Family::Elementwise, &kern.name())?;
        self.launch(&f)
            .config(cfg)
            .arg(KernelArg::buf(x))
            .arg(KernelArg::buf_mut(out))
            .arg(KernelArg::U32(rows as u32))
            .arg(KernelArg::U32(cols as u32))
            .run()
    }
}
