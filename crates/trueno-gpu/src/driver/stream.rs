//! Streams whose state is a type: work is enqueued only on a `Stream<Recording>`, which
//! borrows every buffer it touches until `sync` hands back a `Stream<Idle>`. Dropping a
//! buffer and reading or writing it from the host need `&mut`, so none can happen while a
//! kernel may still use it.

use std::any::Any;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::Arc;

use super::context::ContextInner;
use super::ffi::{self, CuHandle};
use super::{Context, Function, Launch};
use crate::error::{GpuError, Result};
use crate::memory::{DeviceBuffer, DeviceCopy, HostBuffer};

/// A stream with nothing in flight.
#[derive(Debug)]
pub struct Idle;

/// A stream that accepts work; `'a` is how long the buffers it was given stay borrowed.
#[derive(Debug)]
pub struct Recording<'a>(PhantomData<&'a mut ()>);

/// A CUDA stream in state `S`.
pub struct Stream<S> {
    pub(crate) raw: CuHandle,
    pub(crate) ctx: Arc<ContextInner>,
    pub(super) keep: Vec<Box<dyn Any + Send>>,
    pub(super) _s: PhantomData<S>,
}

impl<S> std::fmt::Debug for Stream<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Stream<{}>", std::any::type_name::<S>())
    }
}

// SAFETY: a stream handle may be used from any thread with its context current.
unsafe impl<S> Send for Stream<S> {}

impl Context {
    /// A new stream (blocking: the legacy default stream, used by synchronous copies,
    /// waits for it).
    pub fn stream(&self) -> Result<Stream<Idle>> {
        self.create_stream(0)
    }

    /// A stream the legacy default stream does not wait for
    /// (`CU_STREAM_NON_BLOCKING`): captures run on one, so that another thread's
    /// synchronous copy, which waits for every blocking stream, cannot meet a capturing
    /// stream and fail its capture.
    pub(super) fn non_blocking_stream(&self) -> Result<Stream<Idle>> {
        self.create_stream(ffi::STREAM_NON_BLOCKING)
    }

    fn create_stream(&self, flags: u32) -> Result<Stream<Idle>> {
        self.inner.bind()?;
        let mut raw: CuHandle = std::ptr::null_mut();
        // SAFETY: valid out-pointer; the context is current; `flags` is 0 or
        // `CU_STREAM_NON_BLOCKING`, both flags the driver takes.
        unsafe { ffi::cuStreamCreate(&mut raw, flags) }?;
        Ok(Stream {
            raw,
            ctx: self.inner.clone(),
            keep: Vec::new(),
            _s: PhantomData,
        })
    }
}

impl<S> Stream<S> {
    fn into_state<T>(mut self) -> Stream<T> {
        let s = Stream {
            raw: self.raw,
            ctx: self.ctx.clone(),
            keep: std::mem::take(&mut self.keep),
            _s: PhantomData,
        };
        self.raw = std::ptr::null_mut();
        s
    }

    /// The context (to allocate scratch and look up functions).
    pub fn context(&self) -> Context {
        Context {
            inner: self.ctx.clone(),
        }
    }
}

impl Stream<Idle> {
    /// Starts accepting work.
    pub fn record<'a>(self) -> Stream<Recording<'a>> {
        self.into_state()
    }
}

impl<'a> Stream<Recording<'a>> {
    /// Starts a kernel launch on this stream.
    pub fn launch<'s>(&'s mut self, f: &'s Function) -> Launch<'s, 'a> {
        Launch::new(self, f)
    }

    /// Keeps `x` (scratch buffers) alive until the stream is synchronised.
    pub fn keep_alive(&mut self, x: impl Any + Send) {
        self.keep.push(Box::new(x));
    }

    /// Enqueues a host-to-device copy from pinned memory.
    pub fn copy_to_device_async<T: DeviceCopy>(
        &mut self,
        src: &'a HostBuffer<T>,
        dst: &'a DeviceBuffer<T>,
    ) -> Result<()> {
        if src.len() != dst.len() {
            return Err(GpuError::LengthMismatch {
                what: "copy_to_device_async",
                expected: dst.len(),
                got: src.len(),
            });
        }
        if dst.is_empty() {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: both sides hold len elements; the borrows last until sync.
        unsafe {
            ffi::cuMemcpyHtoDAsync_v2(
                dst.ptr,
                src.ptr as *const c_void,
                size_of_val(&**src),
                self.raw,
            )
        }
    }

    /// Enqueues a device-to-host copy into pinned memory.
    pub fn copy_to_host_async<T: DeviceCopy>(
        &mut self,
        src: &'a DeviceBuffer<T>,
        dst: &'a mut HostBuffer<T>,
    ) -> Result<()> {
        if src.len() != dst.len() {
            return Err(GpuError::LengthMismatch {
                what: "copy_to_host_async",
                expected: dst.len(),
                got: src.len(),
            });
        }
        if src.is_empty() {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: both sides hold len elements; the borrows last until sync.
        unsafe {
            ffi::cuMemcpyDtoHAsync_v2(
                dst.ptr as *mut c_void,
                src.ptr,
                size_of_val(&**dst),
                self.raw,
            )
        }
    }

    /// Records an event at this point of the stream (for timing).
    pub fn record_event(&mut self) -> Result<Event> {
        let e = Event::new(&self.ctx)?;
        // SAFETY: both handles belong to this context.
        unsafe { ffi::cuEventRecord(e.raw, self.raw) }?;
        Ok(e)
    }

    /// Waits for everything enqueued, releasing the borrows.
    pub fn sync(self) -> Result<Stream<Idle>> {
        self.ctx.bind()?;
        // SAFETY: a live stream of this context.
        unsafe { ffi::cuStreamSynchronize(self.raw) }?;
        let mut s: Stream<Idle> = self.into_state();
        s.keep.clear();
        Ok(s)
    }
}

impl<S> Drop for Stream<S> {
    fn drop(&mut self) {
        if self.raw.is_null() {
            return;
        }
        let _ = self.ctx.bind();
        // SAFETY: a live stream; waiting first keeps borrowed buffers valid while any
        // of its work runs, even if the stream is dropped mid-recording.
        unsafe {
            let _ = ffi::cuStreamSynchronize(self.raw);
            let _ = ffi::cuStreamDestroy_v2(self.raw);
        }
    }
}

/// A point in a stream, for timing work on the device.
pub struct Event {
    raw: CuHandle,
    ctx: Arc<ContextInner>,
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Event")
    }
}

impl Event {
    fn new(ctx: &Arc<ContextInner>) -> Result<Event> {
        ctx.bind()?;
        let mut raw: CuHandle = std::ptr::null_mut();
        // SAFETY: valid out-pointer; default flags keep timing on.
        unsafe { ffi::cuEventCreate(&mut raw, 0) }?;
        Ok(Event {
            raw,
            ctx: ctx.clone(),
        })
    }

    /// Milliseconds from `self` to `later`, waiting for `later` to complete.
    pub fn elapsed_ms(&self, later: &Event) -> Result<f32> {
        self.ctx.bind()?;
        let mut ms = 0.0f32;
        // SAFETY: both events were recorded on streams of this context.
        unsafe {
            ffi::cuEventSynchronize(later.raw)?;
            ffi::cuEventElapsedTime(&mut ms, self.raw, later.raw)?;
        }
        Ok(ms)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let _ = self.ctx.bind();
        // SAFETY: created by cuEventCreate, destroyed once.
        let _ = unsafe { ffi::cuEventDestroy_v2(self.raw) };
    }
}
