//! `DeviceBuffer<T>`: typed device memory from the context's pool.

use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::Arc;

use super::DeviceCopy;
use super::pool::block_size;
use crate::driver::Context;
use crate::driver::ffi;
use crate::error::{GpuError, Result};

/// `len` elements of `T` in device memory. Holds its context alive, so it cannot outlive
/// it; dropping it returns the block to the context's pool.
pub struct DeviceBuffer<T: DeviceCopy> {
    pub(crate) ptr: ffi::CuDevicePtr,
    len: usize,
    block: usize,
    ctx: Arc<crate::driver::context::ContextInner>,
    _t: PhantomData<T>,
}

impl<T: DeviceCopy> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceBuffer<{}>[{}] @ {:#x}",
            T::PTX,
            self.len,
            self.ptr
        )
    }
}

impl Context {
    /// `len` uninitialised elements (contents are whatever the block held). Running out
    /// of device memory is [`GpuError::OutOfMemory`], reported before anything runs.
    pub fn alloc<T: DeviceCopy>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        let inner = &self.inner;
        let bytes = len
            .checked_mul(size_of::<T>())
            .ok_or(GpuError::OutOfMemory {
                requested: usize::MAX,
                free: 0,
            })?;
        if bytes == 0 {
            return Ok(DeviceBuffer {
                ptr: 0,
                len: 0,
                block: 0,
                ctx: inner.clone(),
                _t: PhantomData,
            });
        }
        let block = block_size(bytes);
        inner.bind()?;
        let mut pool = inner.pool.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((ptr, block)) = pool.take(block, bytes) {
            return Ok(DeviceBuffer {
                ptr,
                len,
                block,
                ctx: inner.clone(),
                _t: PhantomData,
            });
        }
        let mut ptr = 0;
        // SAFETY: valid out-pointer; the context is current.
        let mut r = unsafe { ffi::cuMemAlloc_v2(&mut ptr, block) };
        if matches!(
            r,
            Err(GpuError::Driver {
                code: ffi::CUDA_ERROR_OUT_OF_MEMORY,
                ..
            })
        ) {
            // Give idle blocks back and try once more.
            pool.release_all();
            // SAFETY: as above.
            r = unsafe { ffi::cuMemAlloc_v2(&mut ptr, block) };
        }
        match r {
            Ok(()) => {
                pool.note_new(block, bytes);
                Ok(DeviceBuffer {
                    ptr,
                    len,
                    block,
                    ctx: inner.clone(),
                    _t: PhantomData,
                })
            }
            Err(GpuError::Driver {
                code: ffi::CUDA_ERROR_OUT_OF_MEMORY,
                ..
            }) => {
                drop(pool);
                let free = self.memory_info().map(|(f, _)| f).unwrap_or(0);
                Err(GpuError::OutOfMemory {
                    requested: bytes,
                    free,
                })
            }
            Err(e) => Err(e),
        }
    }

    /// A device copy of `data`.
    pub fn upload<T: DeviceCopy>(&self, data: &[T]) -> Result<DeviceBuffer<T>> {
        let mut b = self.alloc(data.len())?;
        b.copy_from_host(data)?;
        Ok(b)
    }

    /// The pool's counters.
    pub fn pool_stats(&self) -> PoolStatsSnapshot {
        self.inner
            .pool
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .stats
    }

    /// Frees the pool's idle blocks back to the driver.
    pub fn trim_pool(&self) -> Result<()> {
        self.inner.bind()?;
        self.inner
            .pool
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .release_all();
        Ok(())
    }
}

type PoolStatsSnapshot = super::PoolStats;

impl<T: DeviceCopy> DeviceBuffer<T> {
    /// Elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// No elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The raw device address (for interop).
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }

    fn bytes(&self) -> usize {
        self.len * size_of::<T>()
    }

    fn same_len(&self, what: &'static str, other: usize) -> Result<()> {
        if other == self.len {
            Ok(())
        } else {
            Err(GpuError::LengthMismatch {
                what,
                expected: self.len,
                got: other,
            })
        }
    }

    /// Copies `src` in (lengths must match). Waits for the copy.
    pub fn copy_from_host(&mut self, src: &[T]) -> Result<()> {
        self.same_len("copy_from_host", src.len())?;
        if self.len == 0 {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: `src` holds exactly `bytes` bytes; the device block at least that many.
        unsafe { ffi::cuMemcpyHtoD_v2(self.ptr, src.as_ptr() as *const c_void, self.bytes()) }
    }

    /// Copies out into `dst` (lengths must match). Waits for earlier work on blocking
    /// streams, then for the copy. Takes `&mut self` so a recording stream's borrow
    /// keeps host reads away from in-flight kernels.
    pub fn copy_to_host(&mut self, dst: &mut [T]) -> Result<()> {
        self.same_len("copy_to_host", dst.len())?;
        if self.len == 0 {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: `dst` holds exactly `bytes` bytes; any bit pattern is a valid T.
        unsafe { ffi::cuMemcpyDtoH_v2(dst.as_mut_ptr() as *mut c_void, self.ptr, self.bytes()) }
    }

    /// A host copy.
    pub fn to_vec(&mut self) -> Result<Vec<T>> {
        let mut v = vec![T::default(); self.len];
        self.copy_to_host(&mut v)?;
        Ok(v)
    }

    /// Copies another device buffer of the same length in.
    pub fn copy_from_device(&mut self, src: &DeviceBuffer<T>) -> Result<()> {
        self.same_len("copy_from_device", src.len)?;
        if self.len == 0 {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: both blocks hold at least `bytes` bytes and are distinct allocations
        // (`&mut self` and `&src` cannot alias).
        unsafe { ffi::cuMemcpyDtoD_v2(self.ptr, src.ptr, self.bytes()) }
    }

    /// Fills every 32-bit word with `pattern` (poisoning outputs in tests: 0x7FC00001
    /// is a NaN no kernel produces). Needs `size_of::<T>()` to be a multiple of 4.
    pub fn fill_u32(&mut self, pattern: u32) -> Result<()> {
        if !size_of::<T>().is_multiple_of(4) {
            return Err(GpuError::Shape {
                kernel: "fill_u32".into(),
                reason: "element size is not a multiple of 4".into(),
            });
        }
        if self.len == 0 {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: the block holds `bytes / 4` words.
        unsafe { ffi::cuMemsetD32_v2(self.ptr, pattern, self.bytes() / 4) }
    }

    pub(crate) fn context_id(&self) -> usize {
        Arc::as_ptr(&self.ctx) as usize
    }
}

impl<T: DeviceCopy> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        if self.block == 0 {
            return;
        }
        let mut pool = self.ctx.pool.lock().unwrap_or_else(|e| e.into_inner());
        pool.give(self.ptr, self.block, self.bytes());
    }
}
