//! `Backend::Gpu`: the engine's operations on any GPU that wgpu reaches (Vulkan, Metal,
//! DirectX 12), through the trueno-wgpu crate's WGSL shaders. Built with the `gpu` feature.
//!
//! Two ways in:
//! - [`Engine::new`](crate::Engine::new)`(Backend::Gpu)` (or `TRUENO_BACKEND=gpu`) runs every
//!   op that has a WGSL form on the GPU, whatever its size, as long as its buffers fit one
//!   storage binding of the device (larger ones run on the CPU, as with the default
//!   engine); f16/bf16 conversions stay on the CPU (no WGSL form yet).
//! - The default engine ([`crate::engine()`], [`Engine::auto_with_gpu`](crate::Engine::auto_with_gpu))
//!   keeps work on the CPU and sends it to the GPU only from the size where the GPU was
//!   measured faster on this machine: the [`Crossover`], measured once per process on the
//!   first op large enough to matter (1.5-2.5 s), or read from `TRUENO_GPU_CROSSOVER`
//!   (`trueno bench` prints the line to pin it).
//!
//! The engine's ops take and return host slices, so each GPU call pays both transfers; that
//! is why elementwise ops and reductions rarely cross over (they read each byte once), while
//! matmul does. Chains of ops that should stay on the device belong in a
//! [`trueno_wgpu::Batch`].

mod crossover;
pub(crate) mod run;

use std::sync::OnceLock;

pub use crossover::{CROSSOVER_ENV, Crossover, CrossoverReport, CrossoverSample, Workload};
pub use trueno_wgpu::Gpu;

use crate::backend::Backend;
use crate::error::{Result, TruenoError};

/// The process-wide GPU, opened on first use (the adapter `TRUENO_WGPU_ADAPTER` names, else
/// the high-performance one). An error, every time, if none opens.
///
/// ```no_run
/// let gpu = trueno::gpu::shared()?;
/// println!("{}", gpu.info());
/// # Ok::<(), trueno::TruenoError>(())
/// ```
pub fn shared() -> Result<&'static Gpu> {
    static DEVICE: OnceLock<std::result::Result<Gpu, String>> = OnceLock::new();
    DEVICE
        .get_or_init(|| Gpu::new().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|reason| TruenoError::UnsupportedBackend {
            backend: Backend::Gpu,
            reason: reason.clone(),
        })
}

static CROSSOVER: OnceLock<Result<Crossover>> = OnceLock::new();

/// The crossover the default engine routes by: `TRUENO_GPU_CROSSOVER` if set, else measured
/// once per process on [`shared`] against the CPU ([`Crossover::measure`]); "never" for
/// everything when no GPU opens or the measurement fails. An unparsable
/// `TRUENO_GPU_CROSSOVER` is an error, every time.
pub fn crossover() -> Result<&'static Crossover> {
    CROSSOVER
        .get_or_init(|| match Crossover::from_env()? {
            Some(c) => Ok(c),
            None => Ok(shared()
                .and_then(|g| Crossover::measure(g, &crate::Engine::auto()))
                .map(|r| r.crossover)
                .unwrap_or_else(|_| Crossover::never())),
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The GPU for `work` units of `w` under the process-wide [`crossover`], if it goes there.
/// Work below the smallest size the measurement tries never starts the measurement (nor
/// opens the device), and buffers of `largest` floats must fit one binding. Called on
/// every op of the default engine: until the crossover exists, small work costs one
/// atomic load and a compare.
pub(crate) fn measured_route(w: Workload, work: usize, largest: usize) -> Option<&'static Gpu> {
    if work == 0 {
        return None;
    }
    let c = match CROSSOVER.get() {
        Some(c) => c.as_ref().ok()?,
        None if work < w.smallest_probe() && !crossover_pinned() => return None,
        None => crossover().ok()?,
    };
    route(c, w, work, largest)
}

/// Whether `TRUENO_GPU_CROSSOVER` is set (read once: the environment is not read per op).
fn crossover_pinned() -> bool {
    static PINNED: OnceLock<bool> = OnceLock::new();
    *PINNED.get_or_init(|| std::env::var_os(CROSSOVER_ENV).is_some_and(|v| !v.is_empty()))
}

/// The shared GPU if `c` sends `work` units of `w` there and buffers of `largest` floats
/// fit one binding (larger ones stay on the CPU, which has no such limit).
pub(crate) fn route(
    c: &Crossover,
    w: Workload,
    work: usize,
    largest: usize,
) -> Option<&'static Gpu> {
    if !c.routes(w, work) {
        return None;
    }
    shared().ok().filter(|g| fits_binding(g, largest))
}

/// Whether buffers of `largest` floats fit one storage binding of `gpu` (a larger one
/// runs on the CPU, which has no such limit, whatever the engine).
pub(crate) fn fits_binding(gpu: &Gpu, largest: usize) -> bool {
    (largest as u64).saturating_mul(4) <= gpu.info().max_binding_bytes
}

/// A trueno-wgpu failure as the engine's error.
pub(crate) fn device_err(e: trueno_wgpu::GpuError) -> TruenoError {
    TruenoError::Device {
        backend: Backend::Gpu,
        reason: e.to_string(),
    }
}
