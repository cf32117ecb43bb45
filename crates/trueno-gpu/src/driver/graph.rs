//! CUDA graphs: a stream's work recorded once and replayed with one launch. A decode
//! step is dozens of short kernels; launched one by one, the host's time per launch can
//! exceed the GPU's per kernel, and a replay costs the host one call. Kernel arguments
//! are fixed at capture (buffer addresses, sizes, scalars), so what changes from one
//! replay to the next lives in device buffers (token ids, positions, cache lengths),
//! which trueno's decode ops already read from the device.

use std::any::Any;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::sync::Arc;

use super::context::ContextInner;
use super::ffi::{self, CuHandle};
use super::{Idle, Recording, Stream};
use crate::error::{GpuError, Result};

/// Work captured from a stream ([`Stream::capture`]), replayed by [`Graph::launch`]. It
/// borrows every buffer its work touches for `'a`, and keeps the scratch its ops
/// allocated, until it is dropped.
pub struct Graph<'a> {
    exec: CuHandle,
    graph: CuHandle,
    ctx: Arc<ContextInner>,
    /// Scratch the captured ops handed to `keep_alive`: the replays use it.
    _keep: Vec<Box<dyn Any + Send>>,
    _borrows: PhantomData<&'a ()>,
}

impl std::fmt::Debug for Graph<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Graph")
    }
}

// SAFETY: graph handles may be used from any thread with their context current.
unsafe impl Send for Graph<'_> {}

impl Stream<Idle> {
    /// Records the work `record` enqueues on this stream into a [`Graph`] instead of
    /// running it. Nothing runs until the graph is launched; the ops check their
    /// arguments as they would on a stream and fail the capture on a bad one (the stream
    /// leaves capture mode either way). An op's first call still loads its kernels'
    /// module, on the host, during the capture (capture mode is relaxed). Calls that
    /// wait for the device (a buffer's `to_vec`, a stream's `sync`) do not belong inside
    /// `record`. The capture records on a stream of its own that the legacy default
    /// stream does not wait for, so other threads may upload and read buffers
    /// meanwhile.
    ///
    /// ```
    /// use trueno_gpu::driver::Context;
    /// use trueno_gpu::kernels::elementwise::ElementwiseOp;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// let x = ctx.upload(&[1.0f32, -2.0, 3.0])?;
    /// let y = ctx.alloc::<f32>(3)?;
    /// let total = ctx.alloc::<f32>(1)?;
    /// let mut s = ctx.stream()?;
    /// // Run once on the stream, then capture the same two launches.
    /// let mut warm = s.record();
    /// warm.elementwise(ElementwiseOp::Relu, &x, None, &y, 1.0)?;
    /// warm.sum(&y, &total)?;
    /// let mut s = warm.sync()?;
    /// let graph = s.capture(|s| {
    ///     s.elementwise(ElementwiseOp::Relu, &x, None, &y, 1.0)?;
    ///     s.sum(&y, &total)
    /// })?;
    /// let mut run = s.record();
    /// graph.launch(&mut run)?;
    /// graph.launch(&mut run)?;
    /// run.sync()?;
    /// drop(graph);
    /// let mut total = total;
    /// assert_eq!(total.to_vec()?, [4.0]);
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    pub fn capture<'a>(
        &mut self,
        record: impl FnOnce(&mut Stream<Recording<'a>>) -> Result<()>,
    ) -> Result<Graph<'a>> {
        // The capture runs on a non-blocking stream of its own: on this one (blocking),
        // a synchronous copy on another thread, which waits for every blocking stream,
        // failed the capture (`CUDA_ERROR_STREAM_CAPTURE_IMPLICIT`). Nothing runs during
        // a capture, so which stream records it does not change the graph.
        let cap = self.context().non_blocking_stream()?;
        // The recording shares that stream's handle; it must never destroy it (nor, on
        // a panic in `record`, sync it mid-capture), so it is never dropped.
        let mut rec = ManuallyDrop::new(Stream::<Recording<'a>> {
            raw: cap.raw,
            ctx: self.ctx.clone(),
            keep: Vec::new(),
            _s: PhantomData,
        });
        // SAFETY: `cap` is a live stream, just created on this context (which its
        // creation made current), and not capturing.
        unsafe { ffi::cuStreamBeginCapture_v2(cap.raw, ffi::STREAM_CAPTURE_MODE_RELAXED) }?;
        let recorded = record(&mut rec);
        let mut graph: CuHandle = std::ptr::null_mut();
        // SAFETY: `cap`'s capture, begun above (`cap` outlives this call); ending it
        // always, so the stream leaves capture mode whether or not the recording
        // succeeded, before `cap` is destroyed.
        let ended = unsafe { ffi::cuStreamEndCapture(cap.raw, &mut graph) };
        let keep = std::mem::take(&mut rec.keep);
        let destroy = |g: CuHandle| {
            if !g.is_null() {
                // SAFETY: a graph the capture returned, destroyed once.
                let _ = unsafe { ffi::cuGraphDestroy(g) };
            }
        };
        if let Err(e) = recorded.and(ended) {
            destroy(graph);
            return Err(e);
        }
        let mut exec: CuHandle = std::ptr::null_mut();
        // SAFETY: a complete graph of this context; valid out-pointer.
        if let Err(e) = unsafe { ffi::cuGraphInstantiateWithFlags(&mut exec, graph, 0) } {
            destroy(graph);
            return Err(e);
        }
        Ok(Graph {
            exec,
            graph,
            ctx: self.ctx.clone(),
            _keep: keep,
            _borrows: PhantomData,
        })
    }
}

impl<'a> Graph<'a> {
    /// Enqueues one replay of the captured work on `stream` (of the same context); the
    /// graph stays borrowed until the stream is synchronised, so it cannot be dropped
    /// while a replay may run. Replays on one stream run in order.
    pub fn launch<'s>(&'s self, stream: &mut Stream<Recording<'s>>) -> Result<()>
    where
        'a: 's,
    {
        if !Arc::ptr_eq(&self.ctx, &stream.ctx) {
            return Err(GpuError::Shape {
                kernel: "graph".into(),
                reason: "graph and stream belong to different contexts".into(),
            });
        }
        self.ctx.bind()?;
        // SAFETY: an instantiated graph and a live stream of the same context; the
        // borrows of `self` (and through it of the captured buffers) last until the
        // stream is synchronised.
        unsafe { ffi::cuGraphLaunch(self.exec, stream.raw) }
    }
}

impl Drop for Graph<'_> {
    fn drop(&mut self) {
        let _ = self.ctx.bind();
        // SAFETY: created by instantiation and capture, destroyed once; no replay is in
        // flight (each borrows the graph until its stream is synchronised).
        unsafe {
            let _ = ffi::cuGraphExecDestroy(self.exec);
            let _ = ffi::cuGraphDestroy(self.graph);
        }
    }
}
