//! A device's primary context, the modules loaded into it (one per kernel family, loaded
//! on first use), and the memory pool its buffers come from.

use std::collections::HashMap;
use std::ffi::{CString, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::ffi::{self, CuHandle};
use super::{DeviceInfo, device_handle, device_info};
use crate::error::{GpuError, Result};
use crate::gemm_tune::{GemmClass, GemmConfig};
use crate::kernels::{Family, family_module};
use crate::memory::pool::Pool;
use crate::ptx::{Param, Target};

pub(crate) struct ContextInner {
    pub(crate) raw: CuHandle,
    dev: ffi::CuDevice,
    pub(crate) info: DeviceInfo,
    pub(crate) target: Target,
    /// sm_90a where the device is exactly sm_90 (its architecture-specific instructions
    /// run nowhere else).
    arch_specific: Option<Target>,
    modules: Mutex<HashMap<Family, Arc<LoadedModule>>>,
    pub(crate) pool: Mutex<Pool>,
    /// Tensor-core GEMM configurations tuned on this device (`crate::gemm_tune`).
    pub(crate) gemm_tuned: Mutex<HashMap<GemmClass, GemmConfig>>,
    /// Whether the device and driver can overlap launches (sm_90+, CUDA 12.3+: captured
    /// into graphs from 12.3).
    overlap_supported: bool,
    /// Whether kernels that wait for their predecessor are launched to overlap it
    /// (`Context::set_overlapped_launches`; never where unsupported).
    overlap: AtomicBool,
    /// Whether one-vector integer products take the tensor-core kernel where a format
    /// has one (`Context::set_qgemv_tensor_cores`).
    qgemv_mma: AtomicBool,
}

// SAFETY: a CUDA context handle may be used from any thread once made current there;
// every entry point calls `bind` first. Mutable state is behind mutexes.
unsafe impl Send for ContextInner {}
// SAFETY: as above.
unsafe impl Sync for ContextInner {}

impl ContextInner {
    /// Makes this context current on the calling thread.
    pub(crate) fn bind(&self) -> Result<()> {
        // SAFETY: `raw` is a retained primary context, alive as long as `self`.
        unsafe { ffi::cuCtxSetCurrent(self.raw) }
    }
}

impl Drop for ContextInner {
    fn drop(&mut self) {
        let _ = self.bind();
        self.pool
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .release_all();
        self.modules
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        // SAFETY: balanced with the retain in `Context::new`; nothing of this context is
        // used after (buffers and modules hold an Arc to it, so they are gone).
        let _ = unsafe { ffi::cuDevicePrimaryCtxRelease_v2(self.dev) };
    }
}

pub(crate) struct LoadedModule {
    raw: CuHandle,
    ctx_raw: CuHandle,
    /// Handle, parameters, and whether the kernel as written here waits for the grid
    /// before it (`griddepcontrol.wait`, sm_90 and later).
    functions: HashMap<String, (CuHandle, Vec<Param>, bool)>,
    /// Blocks a multiprocessor holds, by function handle and block size
    /// (`Function::resident_blocks`).
    resident: Mutex<HashMap<(usize, u32), u32>>,
    pub(crate) load_time: Duration,
    pub(crate) build_time: Duration,
}

// SAFETY: module and function handles are plain driver handles usable from any thread
// with the context current.
unsafe impl Send for LoadedModule {}
// SAFETY: as above; the struct is immutable after loading but for its occupancy cache,
// behind a mutex.
unsafe impl Sync for LoadedModule {}

impl Drop for LoadedModule {
    fn drop(&mut self) {
        // SAFETY: the context outlives its module cache; the module handle came from
        // cuModuleLoadDataEx and is unloaded once.
        unsafe {
            let _ = ffi::cuCtxSetCurrent(self.ctx_raw);
            let _ = ffi::cuModuleUnload(self.raw);
        }
    }
}

/// A device context. Cloning is cheap; buffers and functions keep it alive, so none of
/// them can outlive it.
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Arc<ContextInner>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("device", &self.inner.info.name)
            .finish()
    }
}

/// A kernel entry point in a loaded module, with its parameter list for argument checks.
#[derive(Clone)]
pub struct Function {
    pub(crate) raw: CuHandle,
    pub(crate) name: String,
    pub(crate) params: Vec<Param>,
    module: Arc<LoadedModule>,
    pub(crate) ctx: Arc<ContextInner>,
    waits_for_previous: bool,
}

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Function")
            .field("name", &self.name)
            .finish()
    }
}

impl Function {
    /// Entry name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Declared parameters.
    pub fn params(&self) -> &[Param] {
        &self.params
    }

    /// Whether its launches may overlap the stream's previous kernel (programmatic
    /// dependent launch): the kernel waits for its predecessor (`griddepcontrol.wait`,
    /// written for sm_90 and later) and the context allows it
    /// ([`Context::set_overlapped_launches`]). Its blocks then start, and read what no
    /// kernel writes (uploaded weights), while the previous kernel's last blocks finish.
    ///
    /// ```
    /// use trueno_gpu::driver::Context;
    /// use trueno_gpu::kernels::{Family, Kernel};
    /// use trueno_gpu::kernels::qgemv::QuantFormat;
    /// use trueno_gpu::kernels::qgemv_dp4a::QgemvQ8kKernel;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// let f = ctx.function(Family::Qgemv, &QgemvQ8kKernel(QuantFormat::Q4K).name())?;
    /// ctx.set_overlapped_launches(false);
    /// assert!(!f.overlaps_previous());
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    pub fn overlaps_previous(&self) -> bool {
        self.waits_for_previous && self.ctx.overlap.load(Ordering::Relaxed)
    }

    /// Blocks of `threads` threads (no dynamic shared memory) that one multiprocessor
    /// holds at once, from the driver's occupancy calculator: what the compiled kernel's
    /// registers and shared memory allow. A launch of more blocks than this times the
    /// multiprocessors runs in several waves.
    /// Asked of the driver once per function and block size, then cached with the module.
    ///
    /// ```
    /// use trueno_gpu::driver::Context;
    /// use trueno_gpu::kernels::{Family, Kernel};
    /// use trueno_gpu::kernels::qgemv::QuantFormat;
    /// use trueno_gpu::kernels::qgemv_dp4a::QgemvQ8kKernel;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// let k = QgemvQ8kKernel(QuantFormat::Q4K);
    /// let f = ctx.function(Family::Qgemv, &k.name())?;
    /// assert!(f.resident_blocks(256)? >= 1);
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    pub fn resident_blocks(&self, threads: u32) -> Result<u32> {
        // Keyed by the handle, not the name: no allocation on the launch path.
        let key = (self.raw as usize, threads);
        let mut cache = self
            .module
            .resident
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(&n) = cache.get(&key) {
            return Ok(n);
        }
        self.ctx.bind()?;
        let mut n = 0i32;
        // SAFETY: a live function handle of the bound context; `n` is a valid out-pointer.
        unsafe {
            ffi::cuOccupancyMaxActiveBlocksPerMultiprocessor(&mut n, self.raw, threads as i32, 0)
        }?;
        let n = n.max(0) as u32;
        cache.insert(key, n);
        Ok(n)
    }
}

impl Context {
    /// Opens device `ordinal` (its primary context). No driver or no such device is an
    /// error, never a crash.
    pub fn new(ordinal: usize) -> Result<Context> {
        let dev = device_handle(ordinal)?;
        let info = device_info(ordinal)?;
        let (major, minor) = info.compute_capability;
        let target = Target::for_capability(major, minor).ok_or_else(|| GpuError::Shape {
            kernel: "context".into(),
            reason: format!(
                "{} is sm_{major}{minor}; trueno-gpu needs sm_80 or newer",
                info.name
            ),
        })?;
        let mut raw: CuHandle = std::ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer and `dev` a device handle.
        unsafe { ffi::cuDevicePrimaryCtxRetain(&mut raw, dev) }?;
        let gemm_tuned = Mutex::new(crate::gemm_tune::load(&info.name));
        let overlap = target.has_grid_dependency_control() && super::driver_version()? >= 12030;
        let inner = ContextInner {
            raw,
            dev,
            info,
            target,
            arch_specific: ((major, minor) == (9, 0)).then_some(Target::Sm90a),
            modules: Mutex::new(HashMap::new()),
            pool: Mutex::new(Pool::default()),
            gemm_tuned,
            overlap_supported: overlap,
            overlap: AtomicBool::new(overlap),
            qgemv_mma: AtomicBool::new(true),
        };
        inner.bind()?;
        Ok(Context {
            inner: Arc::new(inner),
        })
    }

    /// The device.
    pub fn device(&self) -> &DeviceInfo {
        &self.inner.info
    }

    /// The PTX target this context's modules are written for.
    pub fn target(&self) -> Target {
        self.inner.target
    }

    /// Whether the device runs sm_90a code (Hopper's `wgmma`; exactly compute 9.0).
    pub fn has_sm90a(&self) -> bool {
        self.inner.arch_specific == Some(Target::Sm90a)
    }

    /// Turns programmatic dependent launch on or off for this context's later launches
    /// (on by default where the device (sm_90 and later) and the driver (CUDA 12.3 and
    /// later) support it): a kernel that waits for its predecessor may then start while
    /// the stream's previous kernel drains, hiding a launch's ramp and the last blocks'
    /// tail (on an H100, in a graph: the integer Q4_K product at 4096x4096 5.65 -> 4.5
    /// µs a call, one Llama-3-8B decoder layer's decode step 91-98 -> 84 µs). Off, every
    /// launch waits for the one before, as without the feature; results are the same
    /// either way.
    ///
    /// ```
    /// use trueno_gpu::driver::Context;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// ctx.set_overlapped_launches(false);
    /// assert!(!ctx.overlapped_launches());
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    pub fn set_overlapped_launches(&self, on: bool) {
        let on = on && self.inner.overlap_supported;
        self.inner.overlap.store(on, Ordering::Relaxed);
    }

    /// Whether launches may overlap their predecessor ([`Self::set_overlapped_launches`]).
    pub fn overlapped_launches(&self) -> bool {
        self.inner.overlap.load(Ordering::Relaxed)
    }

    /// Whether [`Stream::qgemv_q8k`](crate::driver::Stream::qgemv_q8k) runs Q4_K, Q5_K
    /// and Q6_K on the integer tensor cores where
    /// [`tensor_core_kernel_for`](crate::kernels::qgemv_q4k_mma_one::tensor_core_kernel_for)
    /// says (the default) or always on the `dp4a` kernels (`false`: to compare them, or
    /// for the `dp4a` kernels' order of the f32 sums). The integer dot products are exact
    /// either way; the results differ only in how their scaled sums are added.
    ///
    /// ```
    /// use trueno_gpu::driver::Context;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// ctx.set_qgemv_tensor_cores(false);
    /// assert!(!ctx.qgemv_tensor_cores());
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    pub fn set_qgemv_tensor_cores(&self, on: bool) {
        self.inner.qgemv_mma.store(on, Ordering::Relaxed);
    }

    /// Whether one-vector Q4_K, Q5_K and Q6_K products may run on the tensor cores
    /// ([`Self::set_qgemv_tensor_cores`]).
    pub fn qgemv_tensor_cores(&self) -> bool {
        self.inner.qgemv_mma.load(Ordering::Relaxed)
    }

    /// Waits for all work on the device.
    pub fn synchronize(&self) -> Result<()> {
        self.inner.bind()?;
        // SAFETY: the context is current.
        unsafe { ffi::cuCtxSynchronize() }
    }

    /// Free and total device memory in bytes.
    pub fn memory_info(&self) -> Result<(usize, usize)> {
        self.inner.bind()?;
        let (mut free, mut total) = (0, 0);
        // SAFETY: valid out-pointers; the context is current.
        unsafe { ffi::cuMemGetInfo_v2(&mut free, &mut total) }?;
        Ok((free, total))
    }

    /// Loads `family`'s module (building its PTX on first use in the process) and returns
    /// the entry `name`. Modules are cached per context.
    pub fn function(&self, family: Family, name: &str) -> Result<Function> {
        let m = self.module(family)?;
        let (raw, params, waits) = m
            .functions
            .get(name)
            .ok_or_else(|| GpuError::UnknownKernel(name.into()))?;
        Ok(Function {
            raw: *raw,
            name: name.into(),
            params: params.clone(),
            module: m.clone(),
            ctx: self.inner.clone(),
            waits_for_previous: *waits,
        })
    }

    /// Time spent building the family's PTX and loading (JIT-compiling) it, loading it
    /// first if needed.
    pub fn module_times(&self, family: Family) -> Result<(Duration, Duration)> {
        let m = self.module(family)?;
        Ok((m.build_time, m.load_time))
    }

    fn module(&self, family: Family) -> Result<Arc<LoadedModule>> {
        let mut cache = self.inner.modules.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = cache.get(&family) {
            return Ok(m.clone());
        }
        let target = match family.required_target() {
            None => self.inner.target,
            Some(t) if self.inner.arch_specific == Some(t) => t,
            Some(t) => {
                return Err(GpuError::Shape {
                    kernel: family.name().into(),
                    reason: format!(
                        "these kernels are written for {} and {} is sm_{}{}",
                        t.name(),
                        self.inner.info.name,
                        self.inner.info.compute_capability.0,
                        self.inner.info.compute_capability.1
                    ),
                });
            }
        };
        let t0 = Instant::now();
        let fm = family_module(family, target)?;
        let build_time = t0.elapsed();
        let t1 = Instant::now();
        let raw = load_ptx(&self.inner, family.name(), &fm.ptx)?;
        let mut functions = HashMap::new();
        for k in &fm.kernels {
            let cname = CString::new(k.ir.name.clone())
                .map_err(|_| GpuError::UnknownKernel(k.ir.name.clone()))?;
            let mut f: CuHandle = std::ptr::null_mut();
            // SAFETY: `raw` is a loaded module and `cname` NUL-terminated.
            unsafe { ffi::cuModuleGetFunction(&mut f, raw, cname.as_ptr()) }?;
            let waits = target.has_grid_dependency_control() && k.ir.waits_for_previous_grid();
            functions.insert(k.ir.name.clone(), (f, k.ir.params.clone(), waits));
        }
        let m = Arc::new(LoadedModule {
            raw,
            ctx_raw: self.inner.raw,
            functions,
            resident: Mutex::new(HashMap::new()),
            load_time: t1.elapsed(),
            build_time,
        });
        cache.insert(family, m.clone());
        Ok(m)
    }
}

/// JIT-loads PTX text, returning the driver's error log inside the error on failure.
fn load_ptx(ctx: &ContextInner, module: &str, ptx: &str) -> Result<CuHandle> {
    ctx.bind()?;
    let image = CString::new(ptx).map_err(|_| GpuError::Jit {
        module: module.into(),
        name: "NUL in PTX".into(),
        log: String::new(),
    })?;
    let mut log = vec![0u8; 16 * 1024];
    let mut opts = [
        ffi::jit::ERROR_LOG_BUFFER,
        ffi::jit::ERROR_LOG_BUFFER_SIZE_BYTES,
    ];
    let mut vals = [log.as_mut_ptr() as *mut c_void, log.len() as *mut c_void];
    let mut raw: CuHandle = std::ptr::null_mut();
    // SAFETY: `image` is NUL-terminated PTX; the option arrays have 2 entries each; the
    // log buffer's size is passed alongside it and it outlives the call.
    let r = unsafe {
        ffi::cuModuleLoadDataEx(
            &mut raw,
            image.as_ptr() as *const c_void,
            2,
            opts.as_mut_ptr(),
            vals.as_mut_ptr(),
        )
    };
    match r {
        Ok(()) => Ok(raw),
        Err(GpuError::Driver { name, .. }) => {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            Err(GpuError::Jit {
                module: module.into(),
                name,
                log: String::from_utf8_lossy(&log[..end]).into_owned(),
            })
        }
        Err(e) => Err(e),
    }
}

/// Loads arbitrary PTX into `ctx` and returns its error log on failure. For tests of the
/// JIT error path and for users' own modules.
pub fn load_raw_ptx(ctx: &Context, ptx: &str) -> Result<()> {
    let raw = load_ptx(&ctx.inner, "user", ptx)?;
    // SAFETY: just loaded; unloaded once.
    unsafe { ffi::cuModuleUnload(raw) }
}
