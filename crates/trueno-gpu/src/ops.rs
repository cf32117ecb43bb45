//! Typed operations on a recording stream: each checks its buffers against the shape
//! (lengths, zero sizes, aliasing) before anything is enqueued, then launches the right
//! kernel configuration.
//!
//! Outputs are passed by shared reference, like inputs: a `DeviceBuffer` is a handle to
//! device memory, and the recording stream's borrow is what matters. It blocks dropping
//! the buffer and every host access (those need `&mut`) until `sync`, while letting one
//! kernel's output feed the next kernel in the same recording. Elementwise, softmax and
//! the norms may run in place; GEMM rejects an output that aliases an input.

use crate::driver::{KernelArg, Recording, Stream};
use crate::error::{GpuError, Result, shape_err};
use crate::kernels::elementwise::{ElementwiseKernel, ElementwiseOp};
use crate::kernels::gemm::{GemmKernel, GemmVariant};
use crate::kernels::gemm_mma::{MmaGemmKernel, MmaTileK};
use crate::kernels::gemm_wgmma::{BOX_N, TILE_K, TILE_M, WgmmaGemmKernel, WgmmaTileN};
use crate::kernels::norm::{NormKernel, NormOp};
use crate::kernels::reduce::{self, ReduceKernel, ReduceOp};
use crate::kernels::rope::{RopeKernel, RopeMode};
use crate::kernels::softmax::SoftmaxKernel;
use crate::kernels::{Family, Kernel, LaunchConfig};
use crate::memory::{DeviceBuffer, HalfElem};

/// The values of `tokens` rows of `row` values each, for kernel `name`: at least one
/// token, under 2^32 values in all.
pub(crate) fn token_values(name: &str, row: usize, tokens: usize) -> Result<usize> {
    match row.checked_mul(tokens) {
        Some(n) if n > 0 && n <= u32::MAX as usize => Ok(n),
        _ => crate::error::shape_err(name, format!("{tokens} tokens of {row} values")),
    }
}

pub(crate) fn expect_len<T: crate::memory::DeviceCopy>(
    what: &'static str,
    b: &DeviceBuffer<T>,
    want: usize,
) -> Result<()> {
    if b.len() == want {
        Ok(())
    } else {
        Err(GpuError::LengthMismatch {
            what,
            expected: want,
            got: b.len(),
        })
    }
}

fn rows_cols(kernel: &str, rows: usize, cols: usize) -> Result<usize> {
    match rows.checked_mul(cols) {
        Some(n) if n > 0 => Ok(n),
        Some(_) => shape_err(kernel, format!("zero-size shape {rows}x{cols}")),
        None => shape_err(kernel, format!("{rows}x{cols} overflows")),
    }
}

impl<'a> Stream<Recording<'a>> {
    /// `out = op(x[, y][, alpha])` elementwise. `y` is required by binary ops (add, mul,
    /// swiglu: `x` is the gate), `alpha` read by scale.
    pub fn elementwise(
        &mut self,
        op: ElementwiseOp,
        x: &'a DeviceBuffer<f32>,
        y: Option<&'a DeviceBuffer<f32>>,
        out: &'a DeviceBuffer<f32>,
        alpha: f32,
    ) -> Result<()> {
        let k = ElementwiseKernel(op);
        let n = x.len();
        let cfg = k.launch_config(&[n])?;
        expect_len("elementwise output", out, n)?;
        let f = self.context().function(Family::Elementwise, &k.name())?;
        let mut l = self.launch(&f).config(cfg).arg(KernelArg::buf(x));
        match (op.is_binary(), y) {
            (true, Some(y)) => {
                expect_len("elementwise second input", y, n)?;
                l = l.arg(KernelArg::buf(y));
            }
            (true, None) => return shape_err(&k.name(), "needs a second input"),
            (false, _) => {}
        }
        l = l.arg(KernelArg::buf_mut(out)).arg(KernelArg::U32(n as u32));
        if op.has_alpha() {
            l = l.arg(KernelArg::F32(alpha));
        }
        l.run()
    }

    fn fold(
        &mut self,
        op: ReduceOp,
        x: &'a DeviceBuffer<f32>,
        out: &'a DeviceBuffer<f32>,
    ) -> Result<()> {
        let k = ReduceKernel(op);
        let cfg = k.launch_config(&[x.len()])?;
        expect_len("reduction output", out, 1)?;
        let f = self.context().function(Family::Reduce, &k.name())?;
        let blocks = cfg.grid.0;
        let partial = self.context().alloc::<f32>(blocks as usize)?;
        self.launch(&f)
            .config(cfg)
            .arg(KernelArg::buf(x))
            .arg(KernelArg::scratch(&partial))
            .arg(KernelArg::U32(x.len() as u32))
            .run()?;
        let second = LaunchConfig::linear(1, reduce::THREADS);
        self.launch(&f)
            .config(second)
            .arg(KernelArg::scratch(&partial))
            .arg(KernelArg::buf_mut(out))
            .arg(KernelArg::U32(blocks))
            .run()?;
        self.keep_alive(partial);
        Ok(())
    }

    /// `out[0] = sum(x)` (f32 accumulation in a fixed order: deterministic).
    pub fn sum(&mut self, x: &'a DeviceBuffer<f32>, out: &'a DeviceBuffer<f32>) -> Result<()> {
        self.fold(ReduceOp::Sum, x, out)
    }

    /// `out[0] = max(x)`, NaN if any element is NaN.
    pub fn max(&mut self, x: &'a DeviceBuffer<f32>, out: &'a DeviceBuffer<f32>) -> Result<()> {
        self.fold(ReduceOp::Max, x, out)
    }

    /// `out[0] = argmax(x)`: first index of the largest element, the first NaN if any.
    pub fn argmax(&mut self, x: &'a DeviceBuffer<f32>, out: &'a DeviceBuffer<u32>) -> Result<()> {
        let k = ReduceKernel(ReduceOp::Argmax);
        let cfg = k.launch_config(&[x.len()])?;
        expect_len("argmax output", out, 1)?;
        let ctx = self.context();
        let f = ctx.function(Family::Reduce, &k.name())?;
        let blocks = cfg.grid.0;
        let vals = ctx.alloc::<f32>(blocks as usize)?;
        let idx = ctx.alloc::<u32>(blocks as usize)?;
        let best = ctx.alloc::<f32>(1)?;
        self.launch(&f)
            .config(cfg)
            .arg(KernelArg::buf(x))
            .arg(KernelArg::scratch(&idx))
            .arg(KernelArg::scratch(&vals))
            .arg(KernelArg::scratch(&idx))
            .arg(KernelArg::U32(x.len() as u32))
            .arg(KernelArg::U32(0))
            .run()?;
        self.launch(&f)
            .config(LaunchConfig::linear(1, reduce::THREADS))
            .arg(KernelArg::scratch(&vals))
            .arg(KernelArg::scratch(&idx))
            .arg(KernelArg::scratch(&best))
            .arg(KernelArg::buf_mut(out))
            .arg(KernelArg::U32(blocks))
            .arg(KernelArg::U32(1))
            .run()?;
        self.keep_alive((vals, idx, best));
        Ok(())
    }

    /// Softmax of each row of a row-major `rows x cols` matrix.
    pub fn softmax(
        &mut self,
        x: &'a DeviceBuffer<f32>,
        out: &'a DeviceBuffer<f32>,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        let k = SoftmaxKernel::for_cols(cols);
        let n = rows_cols(&k.name(), rows, cols)?;
        let cfg = k.launch_config(&[rows, cols])?;
        expect_len("softmax input", x, n)?;
        expect_len("softmax output", out, n)?;
        let f = self.context().function(Family::Softmax, &k.name())?;
        self.launch(&f)
            .config(cfg)
            .arg(KernelArg::buf(x))
            .arg(KernelArg::buf_mut(out))
            .arg(KernelArg::U32(rows as u32))
            .arg(KernelArg::U32(cols as u32))
            .run()
    }

    fn norm_setup(
        &self,
        op: NormOp,
        x: &DeviceBuffer<f32>,
        gamma: &DeviceBuffer<f32>,
        rows: usize,
        cols: usize,
    ) -> Result<(crate::driver::Function, LaunchConfig, usize)> {
        let k = NormKernel::for_cols(op, cols);
        let n = rows_cols(&k.name(), rows, cols)?;
        let cfg = k.launch_config(&[rows, cols])?;
        expect_len("norm input", x, n)?;
        expect_len("gamma", gamma, cols)?;
        Ok((self.context().function(Family::Norm, &k.name())?, cfg, n))
    }

    /// LayerNorm of each row: `(x - mean) / sqrt(var + eps) * gamma + beta`.
    #[allow(clippy::too_many_arguments)]
    pub fn layernorm(
        &mut self,
        x: &'a DeviceBuffer<f32>,
        gamma: &'a DeviceBuffer<f32>,
        beta: &'a DeviceBuffer<f32>,
        out: &'a DeviceBuffer<f32>,
        rows: usize,
        cols: usize,
        eps: f32,
    ) -> Result<()> {
        let (f, cfg, n) = self.norm_setup(NormOp::LayerNorm, x, gamma, rows, cols)?;
        expect_len("beta", beta, cols)?;
        expect_len("norm output", out, n)?;
        self.launch(&f)
            .config(cfg)
            .arg(KernelArg::buf(x))
            .arg(KernelArg::buf(gamma))
            .arg(KernelArg::buf(beta))
            .arg(KernelArg::buf_mut(out))
            .arg(KernelArg::U32(rows as u32))
            .arg(KernelArg::U32(cols as u32))
            .arg(KernelArg::F32(eps))
            .run()
    }

    /// RMSNorm of each row: `x / sqrt(mean(x^2) + eps) * gamma`.
    pub fn rmsnorm(
        &mut self,
        x: &'a DeviceBuffer<f32>,
        gamma: &'a DeviceBuffer<f32>,
        out: &'a DeviceBuffer<f32>,
        rows: usize,
        cols: usize,
        eps: f32,
    ) -> Result<()> {
        let (f, cfg, n) = self.norm_setup(NormOp::RmsNorm, x, gamma, rows, cols)?;
        expect_len("norm output", out, n)?;
        self.launch(&f)
            .config(cfg)
            .arg(KernelArg::buf(x))
            .arg(KernelArg::buf(gamma))
            .arg(KernelArg::buf_mut(out))
            .arg(KernelArg::U32(rows as u32))
            .arg(KernelArg::U32(cols as u32))
            .arg(KernelArg::F32(eps))
            .run()
    }

    /// `h_out = x + residual; out = rmsnorm(h_out) * gamma` in one kernel.
    #[allow(clippy::too_many_arguments)]
    pub fn add_rmsnorm(
        &mut self,
        x: &'a DeviceBuffer<f32>,
        residual: &'a DeviceBuffer<f32>,
        gamma: &'a DeviceBuffer<f32>,
        out: &'a DeviceBuffer<f32>,
        h_out: &'a DeviceBuffer<f32>,
        rows: usize,
        cols: usize,
        eps: f32,
    ) -> Result<()> {
        let (f, cfg, n) = self.norm_setup(NormOp::AddRmsNorm, x, gamma, rows, cols)?;
        expect_len("residual", residual, n)?;
        expect_len("norm output", out, n)?;
        expect_len("sum output", h_out, n)?;
        self.launch(&f)
            .config(cfg)
            .arg(KernelArg::buf(x))
            .arg(KernelArg::buf(residual))
            .arg(KernelArg::buf(gamma))
            .arg(KernelArg::buf_mut(out))
            .arg(KernelArg::buf_mut(h_out))
            .arg(KernelArg::U32(rows as u32))
            .arg(KernelArg::U32(cols as u32))
            .arg(KernelArg::F32(eps))
            .run()
    }

    /// `c = a b` for row-major `a` (m x k), `b` (k x n), `c` (m x n).
    #[allow(clippy::too_many_arguments)]
    pub fn gemm(
        &mut self,
        variant: GemmVariant,
        a: &'a DeviceBuffer<f32>,
        b: &'a DeviceBuffer<f32>,
        c: &'a DeviceBuffer<f32>,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<()> {
        let kern = GemmKernel(variant);
        if c.device_ptr() == a.device_ptr() || c.device_ptr() == b.device_ptr() {
            return shape_err(&kern.name(), "the output may not alias an input");
        }
        let cfg = kern.launch_config(&[m, n, k])?;
        expect_len("gemm a", a, m * k)?;
        expect_len("gemm b", b, k * n)?;
        expect_len("gemm c", c, m * n)?;
        let f = self.context().function(Family::Gemm, &kern.name())?;
        self.launch(&f)
            .config(cfg)
            .arg(KernelArg::buf(a))
            .arg(KernelArg::buf(b))
            .arg(KernelArg::buf_mut(c))
            .arg(KernelArg::U32(m as u32))
            .arg(KernelArg::U32(n as u32))
            .arg(KernelArg::U32(k as u32))
            .run()
    }

    /// `c = alpha * a b + beta * c` on the tensor cores: row-major `a` (m x k) and `b`
    /// (k x n) of f16 or bf16, f32 accumulation, f32 `c` (m x n). `n` and `k` must be
    /// multiples of 8; `beta == 0` never reads `c` (NaN there does not leak). Runs the
    /// fastest path the device has: [`gemm_wgmma`](Self::gemm_wgmma) on sm_90 (1.2-1.8x
    /// the mma.sync path at 1024-8192 on an H100),
    /// [`gemm_mma_tiled`](Self::gemm_mma_tiled) elsewhere.
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
    pub fn gemm_mma<T: HalfElem>(
        &mut self,
        a: &'a DeviceBuffer<T>,
        b: &'a DeviceBuffer<T>,
        c: &'a DeviceBuffer<f32>,
        m: usize,
        n: usize,
        k: usize,
        alpha: f32,
        beta: f32,
    ) -> Result<()> {
        if self.context().has_sm90a() {
            return self.gemm_wgmma(a, b, c, m, n, k, alpha, beta);
        }
        self.gemm_mma_tiled(MmaTileK::K64, a, b, c, m, n, k, alpha, beta)
    }

    /// The sm_80 path (`mma.sync`, any device from sm_80) with the k-step chosen by the
    /// caller (for tuning and benchmarks; [`gemm_mma`](Self::gemm_mma) takes the
    /// measured best, or Hopper's own path where there is one).
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_mma_tiled<T: HalfElem>(
        &mut self,
        tile_k: MmaTileK,
        a: &'a DeviceBuffer<T>,
        b: &'a DeviceBuffer<T>,
        c: &'a DeviceBuffer<f32>,
        m: usize,
        n: usize,
        k: usize,
        alpha: f32,
        beta: f32,
    ) -> Result<()> {
        let kern = MmaGemmKernel(T::TYPE, tile_k);
        let names = ["gemm_mma a", "gemm_mma b", "gemm_mma c"];
        let operands = |a, b| Ok([KernelArg::buf(a), KernelArg::buf(b)]);
        self.tensor_core_gemm(
            Family::GemmMma,
            &kern,
            names,
            (a, b, c),
            (m, n, k),
            (alpha, beta),
            operands,
        )
    }

    /// [`gemm_mma`](Self::gemm_mma) on Hopper's own path (sm_90a: H100, H200): warpgroup
    /// products fed by the copy engine, a producer warpgroup and two consumers per
    /// 128 x 256 tile (128 x 128 where 256-wide tiles would leave most of the GPU idle).
    /// The same contract (row-major f16/bf16 `a` (m x k) and `b` (k x n), f32 `c`,
    /// `beta == 0` never reads `c`, `n` and `k` multiples of 8); an error on
    /// other devices ([`Context::has_sm90a`](crate::driver::Context::has_sm90a) says which).
    ///
    /// ```
    /// use half::bf16;
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
    /// s.gemm_wgmma(&a, &b, &c, m, n, k, 1.0, 0.0)?;
    /// s.sync()?;
    /// assert_eq!(c.to_vec()?[0], 64.0);
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_wgmma<T: HalfElem>(
        &mut self,
        a: &'a DeviceBuffer<T>,
        b: &'a DeviceBuffer<T>,
        c: &'a DeviceBuffer<f32>,
        m: usize,
        n: usize,
        k: usize,
        alpha: f32,
        beta: f32,
    ) -> Result<()> {
        // 256-wide tiles unless they would leave more than half the multiprocessors idle:
        // on the H100 (132 SMs) n128 ran 125-149 TFLOP/s at 1024^3 (32 tiles of 256)
        // against n256's 95-108, and n256 won from 2048^3 (128 tiles) up.
        let sms = self.context().device().multiprocessors as usize;
        let tiles_256 = m.div_ceil(TILE_M as usize) * n.div_ceil(256);
        let tile_n = if 2 * tiles_256 < sms {
            WgmmaTileN::N128
        } else {
            WgmmaTileN::N256
        };
        self.gemm_wgmma_tiled(tile_n, a, b, c, m, n, k, alpha, beta)
    }

    /// [`gemm_wgmma`](Self::gemm_wgmma) with the tile width chosen by the caller (for
    /// tuning and benchmarks).
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_wgmma_tiled<T: HalfElem>(
        &mut self,
        tile_n: WgmmaTileN,
        a: &'a DeviceBuffer<T>,
        b: &'a DeviceBuffer<T>,
        c: &'a DeviceBuffer<f32>,
        m: usize,
        n: usize,
        k: usize,
        alpha: f32,
        beta: f32,
    ) -> Result<()> {
        let kern = WgmmaGemmKernel(T::TYPE, tile_n);
        let names = ["gemm_wgmma a", "gemm_wgmma b", "gemm_wgmma c"];
        let operands = |a, b| {
            Ok([
                KernelArg::half_tensor_map(a, m, k, TILE_M, TILE_K)?,
                KernelArg::half_tensor_map(b, k, n, TILE_K, BOX_N)?,
            ])
        };
        self.tensor_core_gemm(
            Family::GemmWgmma,
            &kern,
            names,
            (a, b, c),
            (m, n, k),
            (alpha, beta),
            operands,
        )
    }

    /// The tensor-core GEMMs' launch: the shape and lengths checked, then A and B as
    /// `operands` passes them (buffers, or tensor maps of them), C, m, n, k, alpha, beta.
    #[allow(clippy::too_many_arguments)]
    fn tensor_core_gemm<T: HalfElem>(
        &mut self,
        family: Family,
        kern: &dyn Kernel,
        names: [&'static str; 3],
        (a, b, c): (
            &'a DeviceBuffer<T>,
            &'a DeviceBuffer<T>,
            &'a DeviceBuffer<f32>,
        ),
        (m, n, k): (usize, usize, usize),
        (alpha, beta): (f32, f32),
        operands: impl FnOnce(&'a DeviceBuffer<T>, &'a DeviceBuffer<T>) -> Result<[KernelArg<'a>; 2]>,
    ) -> Result<()> {
        let cfg = kern.launch_config(&[m, n, k])?;
        expect_len(names[0], a, m * k)?;
        expect_len(names[1], b, k * n)?;
        expect_len(names[2], c, m * n)?;
        let f = self.context().function(family, &kern.name())?;
        let [a, b] = operands(a, b)?;
        self.launch(&f)
            .config(cfg)
            .arg(a)
            .arg(b)
            .arg(KernelArg::buf_mut(c))
            .arg(KernelArg::U32(m as u32))
            .arg(KernelArg::U32(n as u32))
            .arg(KernelArg::U32(k as u32))
            .arg(KernelArg::F32(alpha))
            .arg(KernelArg::F32(beta))
            .run()
    }

    /// Rotary position embedding of `x` (`[tokens, heads, dim]`, row-major) into `out`
    /// (which may be `x`): pair `i` of each head (see [`RopeMode`]) rotated by
    /// `positions[token] * inv_freq[i]`. `inv_freq` has `dim / 2` entries
    /// ([`crate::kernels::rope::inv_freq`] gives the standard ones).
    #[allow(clippy::too_many_arguments)]
    pub fn rope(
        &mut self,
        mode: RopeMode,
        x: &'a DeviceBuffer<f32>,
        positions: &'a DeviceBuffer<u32>,
        inv_freq: &'a DeviceBuffer<f32>,
        out: &'a DeviceBuffer<f32>,
        tokens: usize,
        heads: usize,
        dim: usize,
    ) -> Result<()> {
        let k = RopeKernel(mode);
        let cfg = k.launch_config(&[tokens, heads, dim])?;
        let n = tokens * heads * dim;
        expect_len("rope input", x, n)?;
        expect_len("rope output", out, n)?;
        expect_len("rope positions", positions, tokens)?;
        expect_len("rope inv_freq", inv_freq, dim / 2)?;
        let f = self.context().function(Family::Rope, &k.name())?;
        self.launch(&f)
            .config(cfg)
            .arg(KernelArg::buf(x))
            .arg(KernelArg::buf(positions))
            .arg(KernelArg::buf(inv_freq))
            .arg(KernelArg::buf_mut(out))
            .arg(KernelArg::U32((n / 2) as u32))
            .arg(KernelArg::U32(heads as u32))
            .arg(KernelArg::U32((dim / 2) as u32))
            .run()
    }
}
