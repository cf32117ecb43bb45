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
use crate::kernels::hold::HoldKernel;
use crate::kernels::norm::{NormKernel, NormOp};
use crate::kernels::reduce::{self, ReduceKernel, ReduceOp};
use crate::kernels::rope::{RopeKernel, RopeMode};
use crate::kernels::softmax::SoftmaxKernel;
use crate::kernels::{Family, Kernel, LaunchConfig};
use crate::memory::DeviceBuffer;
use crate::ops_gemm_split::{SplitShape, simt_variant};

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
    /// A buffer argument the kernel reads only when a flag beside it says so: the
    /// buffer, or an empty one standing in (no allocation, nothing to free, so nothing
    /// the stream must keep alive).
    pub(crate) fn optional_arg<T: crate::memory::DeviceCopy>(
        &self,
        b: Option<&'a DeviceBuffer<T>>,
    ) -> Result<KernelArg<'a>> {
        match b {
            Some(b) => Ok(KernelArg::buf(b)),
            None => Ok(KernelArg::scratch(&self.context().alloc::<T>(0)?)),
        }
    }

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

    /// `c = a b` for row-major `a` (m x k), `b` (k x n), `c` (m x n). The tiled kernels
    /// cut k into ranges where their tiles would leave most of the GPU idle (the split
    /// rule; [`gemm_split`](Self::gemm_split) forces a cut), and `Tiled` runs as
    /// `TiledSliced` where its 128 x 128 tiles number fewer than the multiprocessors.
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
        let variant = match variant {
            GemmVariant::Tiled => simt_variant(self.sms(), (m, n)),
            v => v,
        };
        let splits = match variant.pipeline() {
            None => 1,
            Some(pipe) => self.gemm_splits(SplitShape::simt(pipe), (m, n, k)),
        };
        self.simt_gemm(&GemmKernel(variant), splits, (a, b, c), (m, n, k))
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

    /// Keeps the stream's GPU work waiting for `duration` (one thread spinning on the
    /// GPU's own nanosecond clock; at most [`MAX_HOLD`]) before whatever is queued after
    /// it: queue a hold,
    /// then the calls to time, and they run back to back however slowly the host
    /// launches them. GPU time measured so is free of the host's launch latency, which a
    /// kernel shorter than its own launch otherwise measures instead of itself.
    ///
    /// ```
    /// use std::time::Duration;
    /// use trueno_gpu::driver::Context;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// let x = ctx.upload(&vec![1.0f32; 1024])?;
    /// let total = ctx.alloc::<f32>(1)?;
    /// let mut s = ctx.stream()?.record();
    /// s.hold(Duration::from_micros(500))?;
    /// let start = s.record_event()?;
    /// for _ in 0..10 {
    ///     s.sum(&x, &total)?; // queued behind the hold: no gaps between them
    /// }
    /// let end = s.record_event()?;
    /// s.sync()?;
    /// assert!(start.elapsed_ms(&end)? > 0.0);
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    pub fn hold(&mut self, duration: std::time::Duration) -> Result<()> {
        let k = HoldKernel;
        if duration > MAX_HOLD {
            return shape_err(&k.name(), format!("{duration:?} (at most {MAX_HOLD:?})"));
        }
        let cfg = k.launch_config(&[])?;
        let f = self.context().function(Family::Elementwise, &k.name())?;
        self.launch(&f)
            .config(cfg)
            .arg(KernelArg::U32(duration.as_nanos() as u32))
            .run()
    }
}

/// The longest [`Stream::hold`]: its kernel counts nanoseconds in 32 bits.
pub const MAX_HOLD: std::time::Duration = std::time::Duration::from_secs(4);
