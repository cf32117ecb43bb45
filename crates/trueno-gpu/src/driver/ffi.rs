//! The slice of the CUDA driver API trueno uses, loaded from libcuda at run time. Each
//! symbol is looked up on its first call and cached; nothing links against CUDA.

#[cfg(not(target_family = "wasm"))]
use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_void};
#[cfg(not(target_family = "wasm"))]
use std::sync::{Mutex, OnceLock};

use crate::error::{GpuError, Result};

/// `CUresult`
pub type CuResult = i32;
/// `CUdevice`
pub type CuDevice = i32;
/// `CUdeviceptr`
pub type CuDevicePtr = u64;
/// Opaque driver handles.
pub type CuHandle = *mut c_void;

/// `CUDA_ERROR_OUT_OF_MEMORY`
pub const CUDA_ERROR_OUT_OF_MEMORY: CuResult = 2;

/// Device attributes used here (`CUdevice_attribute`).
pub mod attr {
    /// Maximum threads per block.
    pub const MAX_THREADS_PER_BLOCK: i32 = 1;
    /// Shared memory per block without opt-in.
    pub const MAX_SHARED_PER_BLOCK: i32 = 8;
    /// Core clock in kHz.
    pub const CLOCK_RATE: i32 = 13;
    /// Streaming multiprocessors.
    pub const MULTIPROCESSOR_COUNT: i32 = 16;
    /// Memory clock in kHz.
    pub const MEMORY_CLOCK_RATE: i32 = 36;
    /// Memory bus width in bits.
    pub const GLOBAL_MEMORY_BUS_WIDTH: i32 = 37;
    /// L2 bytes.
    pub const L2_CACHE_SIZE: i32 = 38;
    /// Compute capability major.
    pub const COMPUTE_CAPABILITY_MAJOR: i32 = 75;
    /// Compute capability minor.
    pub const COMPUTE_CAPABILITY_MINOR: i32 = 76;
    /// Shared memory per block with opt-in.
    pub const MAX_SHARED_PER_BLOCK_OPTIN: i32 = 97;
}

/// `CUfunction_attribute`: the dynamic shared memory a function may be launched with
/// (above 48 KiB it must be raised first, up to the device's opt-in limit).
pub const FUNC_MAX_DYNAMIC_SHARED_BYTES: i32 = 8;

/// JIT options (`CUjit_option`).
pub mod jit {
    /// Info log buffer.
    pub const INFO_LOG_BUFFER: i32 = 3;
    /// Its size in bytes (in and out).
    pub const INFO_LOG_BUFFER_SIZE_BYTES: i32 = 4;
    /// Error log buffer.
    pub const ERROR_LOG_BUFFER: i32 = 5;
    /// Its size in bytes (in and out).
    pub const ERROR_LOG_BUFFER_SIZE_BYTES: i32 = 6;
}

#[cfg(not(target_family = "wasm"))]
struct Library {
    lib: libloading::Library,
    symbols: Mutex<HashMap<&'static str, usize>>,
}

#[cfg(not(target_family = "wasm"))]
fn library() -> Result<&'static Library> {
    static LIB: OnceLock<std::result::Result<Library, String>> = OnceLock::new();
    let lib = LIB.get_or_init(|| {
        let names: &[&str] = if cfg!(windows) {
            &["nvcuda.dll"]
        } else {
            &["libcuda.so.1", "libcuda.so"]
        };
        let mut errors = Vec::new();
        for &n in names {
            // SAFETY: loading libcuda runs its initialisers, which have no preconditions
            // on our side; it is the documented way to use the driver API dynamically.
            match unsafe { libloading::Library::new(n) } {
                Ok(lib) => {
                    return Ok(Library {
                        lib,
                        symbols: Mutex::new(HashMap::new()),
                    });
                }
                Err(e) => errors.push(e.to_string()),
            }
        }
        Err(format!(
            "libcuda not found (tried {}): {}",
            names.join(", "),
            errors.first().map_or("", |e| e.as_str())
        ))
    });
    lib.as_ref().map_err(|e| GpuError::NoDriver(e.clone()))
}

/// WebAssembly has no libcuda to load: every driver call reports that.
#[cfg(target_family = "wasm")]
fn symbol(_name: &'static str) -> Result<usize> {
    Err(GpuError::NoDriver(
        "no CUDA driver in WebAssembly".to_string(),
    ))
}

/// The address of `name` in libcuda, looked up once.
#[cfg(not(target_family = "wasm"))]
fn symbol(name: &'static str) -> Result<usize> {
    let lib = library()?;
    let mut cache = lib.symbols.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&p) = cache.get(name) {
        return Ok(p);
    }
    let mut cname = name.as_bytes().to_vec();
    cname.push(0);
    // SAFETY: the symbol is only read as an address here; callers transmute it to the
    // function type the driver API documents for that name.
    let p = unsafe { lib.lib.get::<*const c_void>(&cname) }
        .map(|s| *s as usize)
        .map_err(|e| GpuError::NoDriver(format!("libcuda lacks {name}: {e}")))?;
    cache.insert(name, p);
    Ok(p)
}

/// The driver's name for an error code.
pub fn error_name(code: CuResult) -> String {
    let Ok(p) = symbol("cuGetErrorName") else {
        return format!("CUresult {code}");
    };
    // SAFETY: cuGetErrorName has this signature in every driver since CUDA 6.
    let f: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult =
        unsafe { std::mem::transmute(p) };
    let mut s: *const c_char = std::ptr::null();
    // SAFETY: `s` is a valid out-pointer; on success it points to a static string.
    if unsafe { f(code, &mut s) } != 0 || s.is_null() {
        return format!("CUresult {code}");
    }
    // SAFETY: the driver returns a NUL-terminated static string.
    unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
}

/// Turns a `CUresult` into a `Result`, naming the call.
pub fn check(call: &'static str, code: CuResult) -> Result<()> {
    if code == 0 {
        Ok(())
    } else {
        Err(GpuError::Driver {
            call,
            code,
            name: error_name(code),
        })
    }
}

macro_rules! driver_fns {
    ($($name:ident($($arg:ident: $ty:ty),*);)*) => {$(
        #[allow(non_snake_case, clippy::too_many_arguments)]
        #[doc = concat!("`", stringify!($name), "`, resolved on first call; errors carry the driver's error name.")]
        /// # Safety
        /// The arguments must satisfy the driver API's contract for this function.
        pub unsafe fn $name($($arg: $ty),*) -> Result<()> {
            let p = symbol(stringify!($name))?;
            // SAFETY: the symbol has this C signature in the driver API (CUDA 12 and 13).
            let f: unsafe extern "C" fn($($ty),*) -> CuResult = unsafe { std::mem::transmute(p) };
            // SAFETY: forwarded from the caller's contract.
            check(stringify!($name), unsafe { f($($arg),*) })
        }
    )*};
}

driver_fns! {
    cuInit(flags: u32);
    cuDriverGetVersion(version: *mut i32);
    cuDeviceGetCount(count: *mut i32);
    cuDeviceGet(device: *mut CuDevice, ordinal: i32);
    cuDeviceGetName(name: *mut c_char, len: i32, dev: CuDevice);
    cuDeviceGetAttribute(value: *mut i32, attrib: i32, dev: CuDevice);
    cuDeviceTotalMem_v2(bytes: *mut usize, dev: CuDevice);
    cuDevicePrimaryCtxRetain(ctx: *mut CuHandle, dev: CuDevice);
    cuDevicePrimaryCtxRelease_v2(dev: CuDevice);
    cuCtxSetCurrent(ctx: CuHandle);
    cuCtxSynchronize();
    cuMemGetInfo_v2(free: *mut usize, total: *mut usize);
    cuModuleLoadDataEx(module: *mut CuHandle, image: *const c_void, n: u32, options: *mut i32, values: *mut *mut c_void);
    cuModuleUnload(module: CuHandle);
    cuModuleGetFunction(func: *mut CuHandle, module: CuHandle, name: *const c_char);
    cuFuncSetAttribute(f: CuHandle, attrib: i32, value: i32);
    cuOccupancyMaxActiveBlocksPerMultiprocessor(blocks: *mut i32, f: CuHandle, block_size: i32, dynamic_shared: usize);
    cuLaunchKernel(f: CuHandle, gx: u32, gy: u32, gz: u32, bx: u32, by: u32, bz: u32, shared: u32, stream: CuHandle, params: *mut *mut c_void, extra: *mut *mut c_void);
    cuLaunchKernelEx(config: *const LaunchConfigEx, f: CuHandle, params: *mut *mut c_void, extra: *mut *mut c_void);
    cuStreamCreate(stream: *mut CuHandle, flags: u32);
    cuStreamDestroy_v2(stream: CuHandle);
    cuStreamSynchronize(stream: CuHandle);
    cuEventCreate(event: *mut CuHandle, flags: u32);
    cuEventRecord(event: CuHandle, stream: CuHandle);
    cuEventSynchronize(event: CuHandle);
    cuEventElapsedTime(ms: *mut f32, start: CuHandle, end: CuHandle);
    cuEventDestroy_v2(event: CuHandle);
    cuMemAlloc_v2(ptr: *mut CuDevicePtr, bytes: usize);
    cuMemFree_v2(ptr: CuDevicePtr);
    cuMemAllocHost_v2(ptr: *mut *mut c_void, bytes: usize);
    cuMemFreeHost(ptr: *mut c_void);
    cuMemcpyHtoD_v2(dst: CuDevicePtr, src: *const c_void, bytes: usize);
    cuMemcpyDtoH_v2(dst: *mut c_void, src: CuDevicePtr, bytes: usize);
    cuMemcpyDtoD_v2(dst: CuDevicePtr, src: CuDevicePtr, bytes: usize);
    cuMemcpyHtoDAsync_v2(dst: CuDevicePtr, src: *const c_void, bytes: usize, stream: CuHandle);
    cuMemcpyDtoHAsync_v2(dst: *mut c_void, src: CuDevicePtr, bytes: usize, stream: CuHandle);
    cuMemsetD32_v2(dst: CuDevicePtr, value: u32, n: usize);
    cuStreamBeginCapture_v2(stream: CuHandle, mode: i32);
    cuStreamEndCapture(stream: CuHandle, graph: *mut CuHandle);
    cuGraphInstantiateWithFlags(exec: *mut CuHandle, graph: CuHandle, flags: u64);
    cuGraphLaunch(exec: CuHandle, stream: CuHandle);
    cuGraphExecDestroy(exec: CuHandle);
    cuGraphDestroy(graph: CuHandle);
    cuTensorMapEncodeTiled(map: *mut c_void, dtype: i32, rank: u32, addr: *mut c_void, dims: *const u64, strides: *const u64, box_dim: *const u32, elem_strides: *const u32, interleave: i32, swizzle: i32, l2_promotion: i32, oob_fill: i32);
}

/// `CUlaunchAttribute`: an attribute id and its 64-byte value union (8-byte aligned).
#[repr(C)]
pub struct LaunchAttribute {
    /// `CUlaunchAttributeID`.
    pub id: i32,
    _pad: [u8; 4],
    /// `CUlaunchAttributeValue`.
    pub value: [u64; 8],
}

/// `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`: the grid may start while the
/// stream's previous kernel drains, each side using `griddepcontrol` to order itself.
pub const LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION: i32 = 6;

impl LaunchAttribute {
    /// An attribute whose value is one `int` (the union's first four bytes).
    pub fn int(id: i32, v: i32) -> Self {
        let mut value = [0u64; 8];
        value[0] = u64::from(v as u32);
        LaunchAttribute {
            id,
            _pad: [0; 4],
            value,
        }
    }
}

/// `CUlaunchConfig`, `cuLaunchKernelEx`'s launch description.
#[repr(C)]
pub struct LaunchConfigEx {
    /// Grid, then block, dimensions.
    pub dims: [u32; 6],
    /// Dynamic shared memory in bytes.
    pub shared: u32,
    /// The stream.
    pub stream: CuHandle,
    /// `num_attrs` attributes.
    pub attrs: *mut LaunchAttribute,
    /// Their count.
    pub num_attrs: u32,
}

/// `CU_STREAM_NON_BLOCKING`: a stream that does not synchronize with the legacy
/// default stream.
pub const STREAM_NON_BLOCKING: u32 = 1;

/// `CU_STREAM_CAPTURE_MODE_RELAXED`: capture does not forbid other threads' (or this
/// one's) unsafe calls, such as loading a module; what would break the capture still
/// fails it.
pub const STREAM_CAPTURE_MODE_RELAXED: i32 = 2;

/// `cuTensorMapEncodeTiled`'s enumerations (`CUtensorMapDataType`, `CUtensorMapSwizzle`,
/// `CUtensorMapL2promotion`).
pub mod tensor_map {
    /// `CU_TENSOR_MAP_DATA_TYPE_FLOAT16`
    pub const DATA_F16: i32 = 6;
    /// `CU_TENSOR_MAP_DATA_TYPE_FLOAT32`
    pub const DATA_F32: i32 = 7;
    /// `CU_TENSOR_MAP_DATA_TYPE_BFLOAT16`
    pub const DATA_BF16: i32 = 9;
    /// `CU_TENSOR_MAP_SWIZZLE_128B`
    pub const SWIZZLE_128B: i32 = 3;
    /// `CU_TENSOR_MAP_L2_PROMOTION_L2_256B`
    pub const L2_256B: i32 = 3;
}
