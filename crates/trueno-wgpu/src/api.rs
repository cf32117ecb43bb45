//! Host-slice forms of every op, synchronous and asynchronous: upload, one op, download,
//! in one batch. Each call pays both transfers, so for elementwise ops and reductions it
//! loses to the CPU at every size measured (up to 16M elements, on an H100 against its
//! 16-core host: BENCHMARKS.md); they are here so every op works on this backend. Matmul
//! wins from about 1024. Chains of ops should use a [`Batch`] and stay on the device.

use crate::batch::{Batch, Download, Outputs};
use crate::device::Gpu;
use crate::error::Result;
use crate::ops::{BinaryOp, Reduce2Op, ReduceOp, UnaryOp, VectorOp};

impl Gpu {
    /// Runs `record` in a fresh batch, waits, and hands back its one download.
    #[cfg(not(target_arch = "wasm32"))]
    fn run(&self, record: impl FnOnce(&mut Batch) -> Result<Download>) -> Result<Fetched> {
        let mut b = self.batch();
        let d = record(&mut b)?;
        Ok(Fetched(b.finish()?, d))
    }

    async fn run_async(
        &self,
        record: impl FnOnce(&mut Batch) -> Result<Download>,
    ) -> Result<Fetched> {
        let mut b = self.batch();
        let d = record(&mut b)?;
        Ok(Fetched(b.finish_async().await?, d))
    }
}

/// A finished one-op batch.
struct Fetched(Outputs, Download);

impl Fetched {
    fn vec(mut self) -> Result<Vec<f32>> {
        self.0.f32(self.1)
    }
    fn scalar(self) -> Result<f32> {
        Ok(self.vec()?[0])
    }
    fn index(mut self) -> Result<usize> {
        Ok(self.0.u32(self.1)?[0] as usize)
    }
}

/// Declares `name` (blocking) and `name_async` for one op: `record` builds the batch from
/// the arguments, `take` reads the result.
macro_rules! host_op {
    ($( $(#[$doc:meta])* $name:ident, $name_async:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty
        = |$b:ident| $record:expr, $take:ident; )*) => {
        impl Gpu {
            $(
                $(#[$doc])*
                #[cfg(not(target_arch = "wasm32"))]
                pub fn $name(&self $(, $arg: $ty)*) -> Result<$ret> {
                    self.run(|$b: &mut Batch| $record)?.$take()
                }
                #[doc = concat!("[`Gpu::", stringify!($name), "`] as a future.")]
                pub async fn $name_async(&self $(, $arg: $ty)*) -> Result<$ret> {
                    self.run_async(|$b: &mut Batch| $record).await?.$take()
                }
            )*
        }
    };
}

host_op! {
    /// `op(x)` elementwise.
    ///
    /// ```no_run
    /// let gpu = trueno_wgpu::Gpu::new()?;
    /// let y = gpu.unary(trueno_wgpu::UnaryOp::Relu, &[-1.0, 2.0])?;
    /// assert_eq!(y, [0.0, 2.0]);
    /// # Ok::<(), trueno_wgpu::GpuError>(())
    /// ```
    unary, unary_async(op: UnaryOp, x: &[f32]) -> Vec<f32> = |b| {
        let x = b.upload(x)?;
        let y = b.unary(op, &x)?;
        b.download(&y)
    }, vec;
    /// `op(a, b)` elementwise (equal lengths).
    binary, binary_async(op: BinaryOp, a: &[f32], y: &[f32]) -> Vec<f32> = |b| {
        let (a, y) = (b.upload(a)?, b.upload(y)?);
        let z = b.binary(op, &a, &y)?;
        b.download(&z)
    }, vec;
    /// `a * b + c` elementwise, fused.
    fma, fma_async(a: &[f32], y: &[f32], c: &[f32]) -> Vec<f32> = |b| {
        let (a, y, c) = (b.upload(a)?, b.upload(y)?, b.upload(c)?);
        let z = b.fma(&a, &y, &c)?;
        b.download(&z)
    }, vec;
    /// A reduction of `x` to a scalar.
    reduce, reduce_async(op: ReduceOp, x: &[f32]) -> f32 = |b| {
        let x = b.upload(x)?;
        let r = b.reduce(op, &x)?;
        b.download(&r)
    }, scalar;
    /// A reduction of two vectors to a scalar.
    reduce2, reduce2_async(op: Reduce2Op, a: &[f32], y: &[f32]) -> f32 = |b| {
        let (a, y) = (b.upload(a)?, b.upload(y)?);
        let r = b.reduce2(op, &a, &y)?;
        b.download(&r)
    }, scalar;
    /// Index of the first largest element (of the first NaN, if any); error if empty.
    argmax, argmax_async(x: &[f32]) -> usize = |b| {
        let x = b.upload(x)?;
        let r = b.arg_extreme(&x, true)?;
        b.download(&r)
    }, index;
    /// Index of the first smallest element (of the first NaN, if any); error if empty.
    argmin, argmin_async(x: &[f32]) -> usize = |b| {
        let x = b.upload(x)?;
        let r = b.arg_extreme(&x, false)?;
        b.download(&r)
    }, index;
    /// Softmax, log-softmax or normalize over the whole vector.
    vector_op, vector_op_async(op: VectorOp, x: &[f32]) -> Vec<f32> = |b| {
        let x = b.upload(x)?;
        let y = b.vector_op(op, &x)?;
        b.download(&y)
    }, vec;
    /// `A B` for row-major `A` (m x k) and `B` (k x n).
    matmul, matmul_async(a: &[f32], y: &[f32], m: usize, n: usize, k: usize) -> Vec<f32> = |b| {
        let (a, y) = (b.upload(a)?, b.upload(y)?);
        let c = b.matmul(&a, &y, m, n, k)?;
        b.download(&c)
    }, vec;
    /// `A x` for row-major `A` (m x k).
    gemv, gemv_async(a: &[f32], x: &[f32], m: usize, k: usize) -> Vec<f32> = |b| {
        let (a, x) = (b.upload(a)?, b.upload(x)?);
        let y = b.gemv(&a, &x, m, k)?;
        b.download(&y)
    }, vec;
    /// `xᵀ A` for row-major `A` (m x n).
    gemv_t, gemv_t_async(a: &[f32], x: &[f32], m: usize, n: usize) -> Vec<f32> = |b| {
        let (a, x) = (b.upload(a)?, b.upload(x)?);
        let y = b.gemv_t(&a, &x, m, n)?;
        b.download(&y)
    }, vec;
    /// RMSNorm of each row of `x` (rows x cols) with weight `w` (cols).
    rmsnorm, rmsnorm_async(x: &[f32], w: &[f32], rows: usize, cols: usize, eps: f32) -> Vec<f32> = |b| {
        let (x, w) = (b.upload(x)?, b.upload(w)?);
        let y = b.rmsnorm(&x, &w, rows, cols, eps)?;
        b.download(&y)
    }, vec;
    /// LayerNorm of each row of `x` (rows x cols) with weight and bias (cols each).
    layernorm, layernorm_async(x: &[f32], w: &[f32], bias: &[f32], rows: usize, cols: usize, eps: f32) -> Vec<f32> = |b| {
        let (x, w, bias) = (b.upload(x)?, b.upload(w)?, b.upload(bias)?);
        let y = b.layernorm(&x, &w, &bias, rows, cols, eps)?;
        b.download(&y)
    }, vec;
}
