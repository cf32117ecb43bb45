//! The CUDA driver layer: devices, a context per device, modules loaded from PTX (the JIT
//! log surfaced on failure), functions, streams whose state is a type, events, and a
//! launch builder that checks arguments against the kernel's parameters.

pub(crate) mod context;
pub mod ffi;
mod graph;
mod launch;
mod stream;
mod tensor_map;

pub use context::{Context, Function, load_raw_ptx};
pub use graph::Graph;
pub use launch::{KernelArg, Launch};
pub use stream::{Event, Idle, Recording, Stream};
pub use tensor_map::TensorMap;

use std::ffi::c_char;
use std::sync::OnceLock;

use crate::error::{GpuError, Result};
use crate::kernels::qgemv_q6k_mma_one::QgemvDevice;

/// What a device is.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceInfo {
    /// Ordinal.
    pub ordinal: usize,
    /// Marketing name (`NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// Compute capability.
    pub compute_capability: (i32, i32),
    /// Streaming multiprocessors.
    pub multiprocessors: u32,
    /// Device memory in bytes.
    pub total_memory: usize,
    /// L2 cache in bytes.
    pub l2_bytes: u32,
    /// Shared memory per block with opt-in.
    pub max_shared_per_block: u32,
    /// Peak memory bandwidth from the clocks and bus width (GB/s), a datasheet figure.
    pub peak_bandwidth_gbs: f64,
}

impl DeviceInfo {
    /// What the quantized GEMV's routing asks of this device (`Stream::qgemv_q8k`'s
    /// kernel choice): its multiprocessors, a block's shared memory, and whether it has
    /// the copy engine's bulk copies (sm_90 and later).
    pub fn qgemv_device(&self) -> QgemvDevice {
        QgemvDevice {
            sms: self.multiprocessors,
            shared_per_block: self.max_shared_per_block,
            bulk_copies: self.compute_capability.0 >= 9,
        }
    }
}

/// Initialises the driver once.
pub(crate) fn init() -> Result<()> {
    static INIT: OnceLock<Result<()>> = OnceLock::new();
    // SAFETY: cuInit(0) has no preconditions.
    INIT.get_or_init(|| unsafe { ffi::cuInit(0) }).clone()
}

/// The driver's CUDA version (`13000` for 13.0).
pub fn driver_version() -> Result<i32> {
    init()?;
    let mut v = 0;
    // SAFETY: `v` is a valid out-pointer.
    unsafe { ffi::cuDriverGetVersion(&mut v) }?;
    Ok(v)
}

/// Number of CUDA devices (an error when there is no driver).
pub fn device_count() -> Result<usize> {
    init()?;
    let mut n = 0;
    // SAFETY: `n` is a valid out-pointer.
    unsafe { ffi::cuDeviceGetCount(&mut n) }?;
    Ok(n.max(0) as usize)
}

pub(crate) fn device_handle(ordinal: usize) -> Result<ffi::CuDevice> {
    if ordinal >= device_count()? {
        return Err(GpuError::NoDevice(ordinal));
    }
    let mut d = 0;
    // SAFETY: `d` is a valid out-pointer and the ordinal is in range.
    unsafe { ffi::cuDeviceGet(&mut d, ordinal as i32) }?;
    Ok(d)
}

fn attribute(dev: ffi::CuDevice, a: i32) -> Result<i32> {
    let mut v = 0;
    // SAFETY: `v` is a valid out-pointer and `dev` a device handle.
    unsafe { ffi::cuDeviceGetAttribute(&mut v, a, dev) }?;
    Ok(v)
}

/// Describes device `ordinal`.
pub fn device_info(ordinal: usize) -> Result<DeviceInfo> {
    let dev = device_handle(ordinal)?;
    let mut name = [0 as c_char; 256];
    // SAFETY: the buffer holds 256 bytes, as passed.
    unsafe { ffi::cuDeviceGetName(name.as_mut_ptr(), name.len() as i32, dev) }?;
    // SAFETY: the driver NUL-terminates within the buffer.
    let name = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    let mut total = 0usize;
    // SAFETY: `total` is a valid out-pointer.
    unsafe { ffi::cuDeviceTotalMem_v2(&mut total, dev) }?;
    let a = |k| attribute(dev, k);
    let mem_khz = a(ffi::attr::MEMORY_CLOCK_RATE)? as f64;
    let bus = a(ffi::attr::GLOBAL_MEMORY_BUS_WIDTH)? as f64;
    Ok(DeviceInfo {
        ordinal,
        name,
        compute_capability: (
            a(ffi::attr::COMPUTE_CAPABILITY_MAJOR)?,
            a(ffi::attr::COMPUTE_CAPABILITY_MINOR)?,
        ),
        multiprocessors: a(ffi::attr::MULTIPROCESSOR_COUNT)? as u32,
        total_memory: total,
        l2_bytes: a(ffi::attr::L2_CACHE_SIZE)? as u32,
        max_shared_per_block: a(ffi::attr::MAX_SHARED_PER_BLOCK_OPTIN)? as u32,
        peak_bandwidth_gbs: 2.0 * mem_khz * 1e3 * bus / 8.0 / 1e9,
    })
}

/// Every device, or the error that says why there are none.
pub fn devices() -> Result<Vec<DeviceInfo>> {
    (0..device_count()?).map(device_info).collect()
}
