//! [`Engine`]: the slice-level public API. Validates arguments, picks the kernel instance
//! for the op's class, splits large inputs across threads, and applies the optional
//! [`JidokaGuard`].

use std::sync::OnceLock;

use crate::backend::{Backend, OpClass, backend_override};
use crate::dispatch::{Kernels, kernels_for};
use crate::error::{Result, TruenoError, check_len};
use crate::jidoka::JidokaGuard;
use crate::ops::{BinaryOp, Reduce2Op, ReduceOp, UnaryOp};
use crate::parallel;

/// Runs every operation on the ISA chosen for its [`OpClass`].
///
/// Cheap to copy. Get the process-wide one with [`engine()`] (honours `TRUENO_BACKEND`), or
/// build one pinned to a backend with [`Engine::new`].
///
/// ```
/// let e = trueno::engine()?;
/// let (a, b) = ([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]);
/// let mut out = [0.0; 3];
/// e.add_into(&a, &b, &mut out)?;
/// assert_eq!(out, [5.0, 7.0, 9.0]);
/// assert_eq!(e.dot(&a, &b)?, 32.0);
/// # Ok::<(), trueno::TruenoError>(())
/// ```
#[derive(Clone, Copy)]
pub struct Engine {
    kernels: [&'static dyn Kernels; OpClass::ALL.len()],
    guard: Option<JidokaGuard>,
    gpu: GpuUse,
}

/// Whether an engine sends work to the GPU (`Backend::Gpu`, feature `gpu`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GpuUse {
    /// CPU only.
    Never,
    /// Every op with a WGSL form, at any size (`Engine::new(Backend::Gpu)`).
    Always,
    /// Above the measured crossover (`crate::gpu::crossover`).
    #[cfg_attr(not(feature = "gpu"), allow(dead_code))]
    Measured,
    /// Above a crossover given by the caller.
    #[cfg(feature = "gpu")]
    Pinned(crate::gpu::Crossover),
}

/// In an engine method: when the engine sends `$work` units of `$workload` (largest buffer
/// `$largest` floats) to the GPU, returns `$run` with the device bound to `$g`. Expands to
/// nothing without the `gpu` feature.
macro_rules! route_gpu {
    ($eng:expr, $workload:expr, $work:expr, $largest:expr, |$g:ident| $run:expr) => {
        #[cfg(feature = "gpu")]
        if let Some($g) = $eng.gpu_for($workload, $work, $largest) {
            return $run;
        }
    };
}
pub(crate) use route_gpu;

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Engine");
        for class in OpClass::ALL {
            d.field(class.name(), &self.backend(class));
        }
        d.field("gpu", &self.gpu)
            .field("guard", &self.guard)
            .finish()
    }
}

/// The process-wide engine: `TRUENO_BACKEND` if set, else the best ISA per class. Resolved
/// once; an unknown or unsupported `TRUENO_BACKEND` is returned as an error on every call.
pub fn engine() -> Result<&'static Engine> {
    static GLOBAL: OnceLock<Result<Engine>> = OnceLock::new();
    GLOBAL
        .get_or_init(Engine::from_env)
        .as_ref()
        .map_err(Clone::clone)
}

impl Engine {
    /// Every class on `backend`; an error if this machine (or build) cannot run it.
    ///
    /// `Backend::Gpu` (feature `gpu`) runs every op with a WGSL form on the shared GPU
    /// (`gpu::shared`) at any size whose buffers fit one storage binding of the
    /// device; larger ones (a 512 MiB operand on a 128 MiB binding), f16/bf16
    /// conversions, and the parts of an op that the GPU route leaves to the host (see
    /// the `gpu` module) run on the best CPU backend, as the default engine's routing does.
    /// Without the feature, or without an adapter, it is an error.
    pub fn new(backend: Backend) -> Result<Engine> {
        if backend == Backend::Gpu {
            backend.check_available()?;
            return Ok(Engine {
                gpu: GpuUse::Always,
                ..Engine::auto()
            });
        }
        let k = kernels_for(backend)?;
        Ok(Engine {
            kernels: [k; OpClass::ALL.len()],
            guard: None,
            gpu: GpuUse::Never,
        })
    }

    /// [`Engine::auto`], plus the GPU for work above the measured [`crate::gpu::crossover`]
    /// (the default engine's behaviour when built with the `gpu` feature). Small work
    /// never touches the GPU; the first op large enough to be worth measuring opens the
    /// device and measures the crossover (1.5-2.5 s, once per process) unless
    /// `TRUENO_GPU_CROSSOVER` pins it.
    #[cfg(feature = "gpu")]
    pub fn auto_with_gpu() -> Engine {
        Engine {
            gpu: GpuUse::Measured,
            ..Engine::auto()
        }
    }

    /// The same engine, sending work to the GPU from the sizes `crossover` names instead of
    /// the measured ones (nothing is measured).
    ///
    /// ```no_run
    /// use trueno::{Engine, OpClass};
    /// let c = "matmul=134217728".parse()?; // 512^3 multiply-adds and up
    /// let e = Engine::auto().with_gpu_crossover(c);
    /// assert!(e.on_gpu(OpClass::MatMul, 1024 * 1024 * 1024));
    /// assert!(!e.on_gpu(OpClass::Elementwise, 1 << 30));
    /// # Ok::<(), trueno::TruenoError>(())
    /// ```
    #[cfg(feature = "gpu")]
    pub fn with_gpu_crossover(self, crossover: crate::gpu::Crossover) -> Engine {
        Engine {
            gpu: GpuUse::Pinned(crossover),
            ..self
        }
    }

    /// Each class on its preferred CPU backend ([`OpClass::preferred_backend`]), ignoring
    /// the environment; never the GPU.
    pub fn auto() -> Engine {
        let pick = |c: OpClass| {
            kernels_for(c.preferred_backend())
                .or_else(|_| kernels_for(Backend::Scalar))
                .expect("the scalar backend is always available")
        };
        Engine {
            kernels: OpClass::ALL.map(pick),
            guard: None,
            gpu: GpuUse::Never,
        }
    }

    /// [`Engine::new`] with the backend named by `TRUENO_BACKEND`, else [`Engine::auto`]
    /// (with the `gpu` feature, `Engine::auto_with_gpu`; an unparsable
    /// `TRUENO_GPU_CROSSOVER` is then an error here).
    pub fn from_env() -> Result<Engine> {
        match backend_override()? {
            Some(b) => Engine::new(b),
            #[cfg(feature = "gpu")]
            None => crate::gpu::Crossover::from_env().map(|_| Engine::auto_with_gpu()),
            #[cfg(not(feature = "gpu"))]
            None => Ok(Engine::auto()),
        }
    }

    /// The same engine with every output checked by `guard`.
    pub fn with_guard(mut self, guard: JidokaGuard) -> Engine {
        self.guard = Some(guard);
        self
    }

    /// The backend that runs operations of `class`: `Backend::Gpu` for every class but
    /// conversions on an engine made with `Engine::new(Backend::Gpu)`; otherwise the CPU
    /// backend (which, on an engine that routes by size, runs the work below the
    /// crossover: see [`Engine::on_gpu`]).
    pub fn backend(&self, class: OpClass) -> Backend {
        if self.gpu == GpuUse::Always && class != OpClass::Conversion {
            Backend::Gpu
        } else {
            self.k(class).backend()
        }
    }

    /// Whether `work` units of `class` (elements; multiply-adds for `MatMul`) run on the
    /// GPU on this engine. On an engine that routes by size, asking may measure the
    /// crossover (see `Engine::auto_with_gpu`). Always false without the `gpu` feature.
    pub fn on_gpu(&self, class: OpClass, work: usize) -> bool {
        #[cfg(feature = "gpu")]
        {
            use crate::gpu::Workload as W;
            let w = match class {
                OpClass::Elementwise => W::Elementwise,
                OpClass::Transcendental => W::Transcendental,
                OpClass::Reduction => W::Reduction,
                OpClass::MatMul => W::MatMul,
                OpClass::Conversion => return false,
            };
            self.gpu_for(w, work, 0).is_some()
        }
        #[cfg(not(feature = "gpu"))]
        {
            let _ = (class, work);
            false
        }
    }

    /// The GPU, if this engine sends `work` units of `w` there (largest buffer `largest`
    /// floats). Empty work stays on the CPU, whose answer for it is the same.
    #[cfg(feature = "gpu")]
    pub(crate) fn gpu_for(
        &self,
        w: crate::gpu::Workload,
        work: usize,
        largest: usize,
    ) -> Option<&'static crate::gpu::Gpu> {
        match self.gpu {
            GpuUse::Never => None,
            _ if work == 0 => None,
            GpuUse::Always => crate::gpu::shared()
                .ok()
                .filter(|g| crate::gpu::fits_binding(g, largest)),
            GpuUse::Measured => crate::gpu::measured_route(w, work, largest),
            GpuUse::Pinned(c) => crate::gpu::route(&c, w, work, largest),
        }
    }

    /// The workload an elementwise op of `class` belongs to.
    #[cfg(feature = "gpu")]
    fn elementwise_workload(class: OpClass) -> crate::gpu::Workload {
        if class == OpClass::Transcendental {
            crate::gpu::Workload::Transcendental
        } else {
            crate::gpu::Workload::Elementwise
        }
    }

    pub(crate) fn k(&self, class: OpClass) -> &'static dyn Kernels {
        self.kernels[class.index()]
    }

    pub(crate) fn has_guard(&self) -> bool {
        self.guard.is_some()
    }

    pub(crate) fn checked(&self, op: &'static str, out: &[f32]) -> Result<()> {
        match &self.guard {
            Some(g) => g.check(op, out),
            None => Ok(()),
        }
    }

    pub(crate) fn checked_scalar(&self, op: &'static str, v: f32) -> Result<f32> {
        self.checked(op, std::slice::from_ref(&v)).map(|_| v)
    }

    /// Runs `f(offset, dst_chunk)` over `dst`, split across threads above the class
    /// threshold.
    pub(crate) fn split(
        &self,
        class: OpClass,
        dst: &mut [f32],
        f: impl Fn(usize, &mut [f32]) + Sync + Send,
    ) {
        match parallel::chunk_for(class, dst.len()) {
            Some(chunk) => {
                // A Vec of () never allocates.
                parallel::map_chunks_mut(dst, chunk, f);
            }
            None => f(0, dst),
        }
    }

    fn unary(
        &self,
        name: &'static str,
        op: UnaryOp,
        dst: &mut [f32],
        src: Option<&[f32]>,
    ) -> Result<()> {
        if let Some(x) = src {
            check_len(name, "out", x.len(), dst.len())?;
        }
        route_gpu!(
            self,
            Self::elementwise_workload(op.class()),
            dst.len(),
            dst.len(),
            |g| crate::gpu::run::unary(g, op, dst, src).and_then(|_| self.checked(name, dst))
        );
        let k = self.k(op.class());
        self.split(op.class(), dst, |o, d| {
            k.unary(op, d, src.map(|x| &x[o..o + d.len()]))
        });
        self.checked(name, dst)
    }

    fn binary(
        &self,
        name: &'static str,
        op: BinaryOp,
        dst: &mut [f32],
        a: Option<&[f32]>,
        b: &[f32],
    ) -> Result<()> {
        // Blame the output only once the inputs agree with each other.
        match a {
            Some(a) => {
                check_len(name, "b", a.len(), b.len())?;
                check_len(name, "out", a.len(), dst.len())?;
            }
            None => check_len(name, "b", dst.len(), b.len())?,
        }
        route_gpu!(
            self,
            crate::gpu::Workload::Elementwise,
            dst.len(),
            dst.len(),
            |g| crate::gpu::run::binary(g, op, dst, a, b).and_then(|_| self.checked(name, dst))
        );
        let k = self.k(OpClass::Elementwise);
        self.split(OpClass::Elementwise, dst, |o, d| {
            let r = o..o + d.len();
            k.binary(op, d, a.map(|a| &a[r.clone()]), &b[r]);
        });
        self.checked(name, dst)
    }

    pub(crate) fn reduce(&self, op: ReduceOp, x: &[f32]) -> f64 {
        let k = self.k(OpClass::Reduction);
        let Some(chunk) = parallel::chunk_for(OpClass::Reduction, x.len()) else {
            return k.reduce(op, x);
        };
        let parts = parallel::map_chunks(x, chunk, |_, c| k.reduce(op, c));
        match op {
            ReduceOp::Max | ReduceOp::MaxAbs => parts.into_iter().fold(f64::NEG_INFINITY, nan_max),
            ReduceOp::Min => -parts
                .into_iter()
                .map(|v| -v)
                .fold(f64::NEG_INFINITY, nan_max),
            _ => parts.into_iter().sum(),
        }
    }

    pub(crate) fn reduce2(
        &self,
        name: &'static str,
        op: Reduce2Op,
        a: &[f32],
        b: &[f32],
    ) -> Result<f64> {
        check_len(name, "b", a.len(), b.len())?;
        let k = self.k(OpClass::Reduction);
        let Some(chunk) = parallel::chunk_for(OpClass::Reduction, a.len()) else {
            return Ok(k.reduce2(op, a, b));
        };
        let parts = parallel::map_chunks(a, chunk, |o, c| k.reduce2(op, c, &b[o..o + c.len()]));
        Ok(parts.into_iter().sum())
    }
}

/// max that lets a NaN win.
fn nan_max(acc: f64, v: f64) -> f64 {
    if acc.is_nan() || v.is_nan() {
        f64::NAN
    } else {
        acc.max(v)
    }
}

/// Declares the `_into` / `_inplace` pair of a one-input elementwise op.
macro_rules! unary_api {
    ($( $(#[$doc:meta])* $into:ident, $inplace:ident, $name:literal, ($($p:ident: $pt:ty = $ex:literal),*) => $op:expr; )*) => {
        impl Engine {
            $(
                $(#[$doc])*
                #[doc = "\n\nWrites into `out`, which must have `x.len()` elements."]
                #[doc = concat!(
                    "\n\n```\nlet e = trueno::engine()?;\nlet x = [0.5f32, -1.25, 2.0, 0.0];\n",
                    "let mut out = [f32::NAN; 4];\ne.", stringify!($into), "(&x, ", $(stringify!($ex), ", ",)*
                    "&mut out)?;\nlet mut y = x;\ne.", stringify!($inplace), "(&mut y", $(", ", stringify!($ex),)*
                    ")?;\n// Bit patterns, so that NaN outputs (sqrt or ln of a negative) compare equal too.\nassert_eq!(out.map(f32::to_bits), y.map(f32::to_bits));\n# Ok::<(), trueno::TruenoError>(())\n```"
                )]
                pub fn $into(&self, x: &[f32], $($p: $pt,)* out: &mut [f32]) -> Result<()> {
                    let op = $op;
                    self.unary($name, op?, out, Some(x))
                }
                #[doc = concat!("In-place form of [`Engine::", stringify!($into), "`].")]
                pub fn $inplace(&self, x: &mut [f32] $(, $p: $pt)*) -> Result<()> {
                    let op = $op;
                    self.unary($name, op?, x, None)
                }
            )*
        }
    };
}

fn ok(op: UnaryOp) -> Result<UnaryOp> {
    Ok(op)
}

fn clamp_op(lo: f32, hi: f32) -> Result<UnaryOp> {
    if lo.is_nan() || hi.is_nan() || lo > hi {
        return Err(TruenoError::InvalidArgument {
            op: "clamp",
            reason: format!("bounds must be ordered and not NaN, got lo = {lo}, hi = {hi}"),
        });
    }
    Ok(UnaryOp::Clamp(lo, hi))
}

unary_api! {
    /// `|x|`.
    abs_into, abs_inplace, "abs", () => ok(UnaryOp::Abs);
    /// `-x`.
    neg_into, neg_inplace, "neg", () => ok(UnaryOp::Neg);
    /// `sqrt(x)` (NaN for negative x), correctly rounded.
    sqrt_into, sqrt_inplace, "sqrt", () => ok(UnaryOp::Sqrt);
    /// `1 / x`, correctly rounded (a division, not an estimate).
    recip_into, recip_inplace, "recip", () => ok(UnaryOp::Recip);
    /// `alpha * x`.
    scale_into, scale_inplace, "scale", (alpha: f32 = 2.5) => ok(UnaryOp::Scale(alpha));
    /// `x + c`.
    add_scalar_into, add_scalar_inplace, "add_scalar", (c: f32 = 1.5) => ok(UnaryOp::AddScalar(c));
    /// `min(max(x, lo), hi)`; NaN stays NaN. Error if `lo > hi` or a bound is NaN.
    clamp_into, clamp_inplace, "clamp", (lo: f32 = -1.0, hi: f32 = 1.0) => clamp_op(lo, hi);
    /// `e^x`, relative error <= 1.2e-7 (1 ulp); exp(+inf) = +inf, exp(-inf) = 0.
    exp_into, exp_inplace, "exp", () => ok(UnaryOp::Exp);
    /// Natural logarithm, relative error <= 1.2e-7; ln(0) = -inf, ln(x < 0) = NaN.
    ln_into, ln_inplace, "ln", () => ok(UnaryOp::Ln);
    /// `max(x, 0)`, NaN-propagating.
    relu_into, relu_inplace, "relu", () => ok(UnaryOp::Relu);
    /// `x` for `x >= 0`, else `alpha * x`.
    leaky_relu_into, leaky_relu_inplace, "leaky_relu", (alpha: f32 = 0.01) => ok(UnaryOp::LeakyRelu(alpha));
    /// `x` for `x > 0`, else `alpha * (e^x - 1)` (computed without cancellation).
    elu_into, elu_inplace, "elu", (alpha: f32 = 1.0) => ok(UnaryOp::Elu(alpha));
    /// Logistic sigmoid `1 / (1 + e^-x)`, relative error <= 2e-7.
    sigmoid_into, sigmoid_inplace, "sigmoid", () => ok(UnaryOp::Sigmoid);
    /// Hyperbolic tangent, relative error <= 2e-7.
    tanh_into, tanh_inplace, "tanh", () => ok(UnaryOp::Tanh);
    /// GELU, tanh approximation (as PyTorch `approximate="tanh"`); relative error <= 3e-6
    /// for x >= -5 (the negative tail's condition number grows as x^2).
    gelu_into, gelu_inplace, "gelu", () => ok(UnaryOp::GeluTanh);
    /// GELU, exact erf form `x * Φ(x)`; relative error <= 3e-6 for x >= -5.
    gelu_erf_into, gelu_erf_inplace, "gelu_erf", () => ok(UnaryOp::GeluErf);
    /// SiLU (swish) `x * sigmoid(x)`.
    silu_into, silu_inplace, "silu", () => ok(UnaryOp::Silu);
    /// `ln(1 + e^x)`, accurate in both tails.
    softplus_into, softplus_inplace, "softplus", () => ok(UnaryOp::Softplus);
    /// `x * relu6(x + 3) / 6`.
    hardswish_into, hardswish_inplace, "hardswish", () => ok(UnaryOp::Hardswish);
    /// Mish `x * tanh(softplus(x))`.
    mish_into, mish_inplace, "mish", () => ok(UnaryOp::Mish);
}

/// Declares the `_into` / `_inplace` pair of a two-input elementwise op.
macro_rules! binary_api {
    ($( $(#[$doc:meta])* $into:ident, $inplace:ident, $name:literal, ($($p:ident: $pt:ty = $ex:literal),*) => $op:expr; )*) => {
        impl Engine {
            $(
                $(#[$doc])*
                #[doc = "\n\nWrites into `out`; `a`, `b` and `out` must have equal lengths."]
                #[doc = concat!(
                    "\n\n```\nlet e = trueno::engine()?;\nlet (a, b) = ([0.5f32, -1.25, 2.0], [4.0f32, 0.5, -2.0]);\n",
                    "let mut out = [f32::NAN; 3];\ne.", stringify!($into), "(&a, &b, ", $(stringify!($ex), ", ",)*
                    "&mut out)?;\nlet mut y = a;\ne.", stringify!($inplace), "(&mut y, &b", $(", ", stringify!($ex),)*
                    ")?;\n// Bit patterns, so that NaN outputs (sqrt or ln of a negative) compare equal too.\nassert_eq!(out.map(f32::to_bits), y.map(f32::to_bits));\n# Ok::<(), trueno::TruenoError>(())\n```"
                )]
                pub fn $into(&self, a: &[f32], b: &[f32], $($p: $pt,)* out: &mut [f32]) -> Result<()> {
                    self.binary($name, $op, out, Some(a), b)
                }
                #[doc = concat!("In-place form of [`Engine::", stringify!($into), "`]: the result replaces `a`.")]
                pub fn $inplace(&self, a: &mut [f32], b: &[f32] $(, $p: $pt)*) -> Result<()> {
                    self.binary($name, $op, a, None, b)
                }
            )*
        }
    };
}

binary_api! {
    /// `a + b`.
    add_into, add_inplace, "add", () => BinaryOp::Add;
    /// `a - b`.
    sub_into, sub_inplace, "sub", () => BinaryOp::Sub;
    /// `a * b`.
    mul_into, mul_inplace, "mul", () => BinaryOp::Mul;
    /// `a / b` (IEEE: x/0 is ±inf or NaN).
    div_into, div_inplace, "div", () => BinaryOp::Div;
    /// Elementwise minimum, NaN-propagating (torch.minimum).
    minimum_into, minimum_inplace, "minimum", () => BinaryOp::Min;
    /// Elementwise maximum, NaN-propagating (torch.maximum).
    maximum_into, maximum_inplace, "maximum", () => BinaryOp::Max;
    /// Linear interpolation `a + t * (b - a)`.
    lerp_into, lerp_inplace, "lerp", (t: f32 = 0.25) => BinaryOp::Lerp(t);
}

impl Engine {
    /// `alpha * x + y` into `out` (all equal lengths).
    pub fn axpy_into(&self, alpha: f32, x: &[f32], y: &[f32], out: &mut [f32]) -> Result<()> {
        self.binary("axpy", BinaryOp::Axpy(alpha), out, Some(y), x)
    }

    /// BLAS `axpy`: `y = alpha * x + y`.
    pub fn axpy(&self, alpha: f32, x: &[f32], y: &mut [f32]) -> Result<()> {
        self.binary("axpy", BinaryOp::Axpy(alpha), y, None, x)
    }

    /// `a * b + c` into `out` (fused where the ISA has FMA).
    pub fn fma_into(&self, a: &[f32], b: &[f32], c: &[f32], out: &mut [f32]) -> Result<()> {
        check_len("fma", "b", a.len(), b.len())?;
        check_len("fma", "c", a.len(), c.len())?;
        check_len("fma", "out", a.len(), out.len())?;
        route_gpu!(
            self,
            crate::gpu::Workload::Elementwise,
            out.len(),
            out.len(),
            |g| crate::gpu::run::fma(g, out, a, b, Some(c)).and_then(|_| self.checked("fma", out))
        );
        let k = self.k(OpClass::Elementwise);
        self.split(OpClass::Elementwise, out, |o, d| {
            let r = o..o + d.len();
            k.fma(d, &a[r.clone()], &b[r.clone()], Some(&c[r]))
        });
        self.checked("fma", out)
    }

    /// Accumulating fma: `acc = a * b + acc`.
    pub fn fma_inplace(&self, acc: &mut [f32], a: &[f32], b: &[f32]) -> Result<()> {
        check_len("fma", "a", acc.len(), a.len())?;
        check_len("fma", "b", acc.len(), b.len())?;
        route_gpu!(
            self,
            crate::gpu::Workload::Elementwise,
            acc.len(),
            acc.len(),
            |g| crate::gpu::run::fma(g, acc, a, b, None).and_then(|_| self.checked("fma", acc))
        );
        let k = self.k(OpClass::Elementwise);
        self.split(OpClass::Elementwise, acc, |o, d| {
            let r = o..o + d.len();
            k.fma(d, &a[r.clone()], &b[r], None)
        });
        self.checked("fma", acc)
    }
}
