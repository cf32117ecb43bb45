//! Pinned (page-locked) host memory: what asynchronous copies need to overlap with work.

use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::Arc;

use super::DeviceCopy;
use crate::driver::Context;
use crate::driver::context::ContextInner;
use crate::driver::ffi;
use crate::error::Result;

/// `len` elements of pinned host memory, zero-initialised. Dereferences to a slice.
pub struct HostBuffer<T: DeviceCopy> {
    pub(crate) ptr: *mut T,
    len: usize,
    ctx: Arc<ContextInner>,
    _t: PhantomData<T>,
}

// SAFETY: the buffer owns its memory exclusively, like a Vec<T>.
unsafe impl<T: DeviceCopy> Send for HostBuffer<T> {}
// SAFETY: shared access only reads, as for &[T].
unsafe impl<T: DeviceCopy> Sync for HostBuffer<T> {}

impl Context {
    /// `len` zeroed elements of pinned host memory.
    pub fn alloc_host<T: DeviceCopy>(&self, len: usize) -> Result<HostBuffer<T>> {
        let bytes = len.max(1) * size_of::<T>();
        self.inner.bind()?;
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid out-pointer; the context is current.
        unsafe { ffi::cuMemAllocHost_v2(&mut p, bytes) }?;
        // SAFETY: the driver returned `bytes` writable bytes, page aligned.
        unsafe { std::ptr::write_bytes(p as *mut u8, 0, bytes) };
        Ok(HostBuffer {
            ptr: p as *mut T,
            len,
            ctx: self.inner.clone(),
            _t: PhantomData,
        })
    }
}

impl<T: DeviceCopy> std::ops::Deref for HostBuffer<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` holds `len` initialised elements for the buffer's lifetime.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl<T: DeviceCopy> std::ops::DerefMut for HostBuffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as above, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl<T: DeviceCopy> Drop for HostBuffer<T> {
    fn drop(&mut self) {
        let _ = self.ctx.bind();
        // SAFETY: allocated by cuMemAllocHost; streams that used it borrowed it and were
        // synchronised before the borrow ended.
        let _ = unsafe { ffi::cuMemFreeHost(self.ptr as *mut c_void) };
    }
}
