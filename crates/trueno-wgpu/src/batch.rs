//! A command list: uploads, ops and downloads recorded into one command encoder and sent
//! in one submission, so a chain of ops makes no round trip through the host.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use wgpu::util::DeviceExt;

use crate::buffer::{GpuBuffer, byte_size};
use crate::device::Gpu;
use crate::error::{GpuError, Result};
use crate::kernels::Kernel;

/// Largest workgroup count along one dispatch dimension (WebGPU's guaranteed minimum).
pub(crate) const MAX_GROUPS: u32 = 65_535;

/// A result to read back after [`Batch::finish`]: an index into [`Outputs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Download(pub(crate) usize);

/// The downloaded results of a batch, by [`Download`] handle.
#[derive(Debug)]
pub struct Outputs {
    words: Vec<Option<Vec<u32>>>,
}

impl Outputs {
    /// The f32 data of `d` (taken: a second call for the same handle is an error).
    pub fn f32(&mut self, d: Download) -> Result<Vec<f32>> {
        Ok(self.take(d)?.into_iter().map(f32::from_bits).collect())
    }

    /// The u32 data of `d` (indices from argmax / argmin).
    pub fn u32(&mut self, d: Download) -> Result<Vec<u32>> {
        self.take(d)
    }

    fn take(&mut self, d: Download) -> Result<Vec<u32>> {
        self.words
            .get_mut(d.0)
            .and_then(Option::take)
            .ok_or(GpuError::UnknownDownload(d.0))
    }
}

/// Records ops on one [`Gpu`]; nothing runs until [`Batch::finish`] (or
/// [`Batch::finish_async`]) submits them all at once.
///
/// ```no_run
/// use trueno_wgpu::{Gpu, UnaryOp, BinaryOp};
/// let gpu = Gpu::new()?;
/// let mut b = gpu.batch();
/// let x = b.upload(&[1.0, 2.0, 3.0])?;
/// let y = b.unary(UnaryOp::Exp, &x)?;
/// let z = b.binary(BinaryOp::Mul, &y, &x)?;
/// let d = b.download(&z)?;
/// let mut out = b.finish()?;
/// assert_eq!(out.f32(d)?.len(), 3);
/// # Ok::<(), trueno_wgpu::GpuError>(())
/// ```
pub struct Batch<'g> {
    pub(crate) gpu: &'g Gpu,
    encoder: wgpu::CommandEncoder,
    staging: Vec<(wgpu::Buffer, usize)>,
}

impl Gpu {
    /// A new, empty command list on this device.
    pub fn batch(&self) -> Batch<'_> {
        let encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("trueno-wgpu batch"),
            });
        Batch {
            gpu: self,
            encoder,
            staging: Vec::new(),
        }
    }
}

impl<'g> Batch<'g> {
    /// A device buffer for `len` elements (contents undefined until an op writes them).
    pub fn alloc(&mut self, op: &'static str, len: usize) -> Result<GpuBuffer> {
        self.gpu.check_alive()?;
        let bytes = byte_size(len);
        let limit = self.gpu.info().max_binding_bytes;
        if bytes > limit {
            return Err(GpuError::TooLarge { op, bytes, limit });
        }
        let buf = self.gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(op),
            size: bytes,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        self.gpu.take_error()?;
        Ok(GpuBuffer { buf, len })
    }

    /// Copies `data` to a new device buffer (queued before this batch's commands).
    pub fn upload(&mut self, data: &[f32]) -> Result<GpuBuffer> {
        let b = self.alloc("upload", data.len())?;
        if !data.is_empty() {
            self.gpu
                .queue
                .write_buffer(&b.buf, 0, bytemuck::cast_slice(data));
        }
        Ok(b)
    }

    /// Copies `src` into `dst` (equal lengths) on the device.
    pub fn copy(&mut self, src: &GpuBuffer, dst: &GpuBuffer) -> Result<()> {
        crate::error::check_len("copy", "dst", src.len, dst.len)?;
        if src.buf == dst.buf {
            return Ok(());
        }
        self.encoder
            .copy_buffer_to_buffer(&src.buf, 0, &dst.buf, 0, byte_size(src.len));
        self.gpu.take_error()
    }

    /// Marks `buf` to be read back when the batch finishes.
    pub fn download(&mut self, buf: &GpuBuffer) -> Result<Download> {
        self.gpu.check_alive()?;
        let bytes = byte_size(buf.len);
        let staging = self.gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("trueno-wgpu readback"),
            size: bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        self.encoder
            .copy_buffer_to_buffer(&buf.buf, 0, &staging, 0, bytes);
        self.staging.push((staging, buf.len));
        Ok(Download(self.staging.len() - 1))
    }

    /// A uniform buffer of four 32-bit words (each kernel's parameter block).
    pub(crate) fn params(&self, words: [u32; 4]) -> wgpu::Buffer {
        self.gpu
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("trueno-wgpu params"),
                contents: bytemuck::cast_slice(&words),
                usage: wgpu::BufferUsages::UNIFORM,
            })
    }

    /// Records one dispatch of `kernel` over `groups` workgroups with `bindings` in order.
    pub(crate) fn dispatch(
        &mut self,
        kernel: &Kernel,
        bindings: &[&wgpu::Buffer],
        groups: (u32, u32),
    ) -> Result<()> {
        let gpu = self.gpu;
        let pipeline = gpu.pipelines.get(&gpu.device, kernel);
        let entries: Vec<wgpu::BindGroupEntry> = bindings
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: b.as_entire_binding(),
            })
            .collect();
        let bind = gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(&kernel.key),
            layout: gpu.pipelines.layout(kernel.family),
            entries: &entries,
        });
        {
            let mut pass = self
                .encoder
                .begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some(&kernel.key),
                    timestamp_writes: None,
                });
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bind, &[]);
            pass.dispatch_workgroups(groups.0, groups.1, 1);
        }
        gpu.take_error()
    }

    /// Submits everything and waits for the downloads.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn finish(self) -> Result<Outputs> {
        let (gpu, pending) = self.submit()?;
        gpu.device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(pending.index.clone()),
                timeout: None,
            })
            .map_err(|e| GpuError::DeviceLost(e.to_string()))?;
        // Another thread polling the same device may be running this batch's map callbacks
        // right now (the wait above returns once the work is done, not once they ran).
        while !pending.mapped() && gpu.check_alive().is_ok() {
            let _ = gpu.device.poll(wgpu::PollType::Poll);
            std::thread::yield_now();
        }
        pending.collect(gpu)
    }

    /// Submits everything; the future resolves when the downloads are readable. On native
    /// targets it polls the device each time it is polled (an executor that re-polls on
    /// wake keeps it moving); in a browser the device is polled by the browser.
    pub fn finish_async(self) -> impl Future<Output = Result<Outputs>> + 'g {
        let submitted = self.submit();
        async move {
            let (gpu, pending) = submitted?;
            WaitMapped {
                gpu,
                pending: &pending,
            }
            .await;
            pending.collect(gpu)
        }
    }

    fn submit(self) -> Result<(&'g Gpu, Pending)> {
        let Batch {
            gpu,
            encoder,
            staging,
        } = self;
        gpu.check_alive()?;
        let index = gpu.queue.submit([encoder.finish()]);
        gpu.take_error()?;
        let done = Arc::new(Mutex::new(MapState {
            left: staging.len(),
            failed: None,
            waker: None,
        }));
        for (buf, _) in &staging {
            let d = done.clone();
            buf.slice(..).map_async(wgpu::MapMode::Read, move |r| {
                let mut st = d.lock().unwrap_or_else(|p| p.into_inner());
                st.left -= 1;
                if let Err(e) = r {
                    st.failed = Some(e.to_string());
                }
                if let Some(w) = st.waker.take() {
                    w.wake();
                }
            });
        }
        Ok((
            gpu,
            Pending {
                index,
                staging,
                done,
            },
        ))
    }
}

struct MapState {
    left: usize,
    failed: Option<String>,
    waker: Option<std::task::Waker>,
}

/// A submitted batch whose downloads are being mapped.
struct Pending {
    index: wgpu::SubmissionIndex,
    staging: Vec<(wgpu::Buffer, usize)>,
    done: Arc<Mutex<MapState>>,
}

impl Pending {
    /// Whether every download is mapped or has failed.
    fn mapped(&self) -> bool {
        let st = self.done.lock().unwrap_or_else(|p| p.into_inner());
        st.left == 0 || st.failed.is_some()
    }

    fn collect(&self, gpu: &Gpu) -> Result<Outputs> {
        gpu.take_error()?;
        let st = self.done.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = &st.failed {
            return Err(GpuError::Readback(e.clone()));
        }
        if st.left > 0 {
            return Err(GpuError::Readback(format!(
                "{} downloads never completed",
                st.left
            )));
        }
        drop(st);
        let mut words = Vec::with_capacity(self.staging.len());
        for (buf, len) in &self.staging {
            let view = buf
                .slice(..)
                .get_mapped_range()
                .map_err(|e| GpuError::Readback(e.to_string()))?;
            let mut w: Vec<u32> = bytemuck::pod_collect_to_vec(&view);
            w.truncate(*len);
            drop(view);
            buf.unmap();
            words.push(Some(w));
        }
        Ok(Outputs { words })
    }
}

/// Resolves when every download of `pending` is mapped (or failed).
struct WaitMapped<'a> {
    gpu: &'a Gpu,
    pending: &'a Pending,
}

impl Future for WaitMapped<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let _ = self.gpu.device.poll(wgpu::PollType::Poll);
        if self.pending.mapped() || self.gpu.check_alive().is_err() {
            return Poll::Ready(());
        }
        let mut st = self.pending.done.lock().unwrap_or_else(|p| p.into_inner());
        if st.left == 0 || st.failed.is_some() {
            return Poll::Ready(());
        }
        st.waker = Some(cx.waker().clone());
        drop(st);
        // Native wgpu only runs map callbacks inside `poll`: ask to be polled again.
        if cfg!(not(target_arch = "wasm32")) {
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
}

/// Workgroups for `n` items at `per_group` items each, spread over x and y when more than
/// 65535 (kernels fold them back into one index).
pub(crate) fn groups_for(n: usize, per_group: usize) -> (u32, u32) {
    let g = n.div_ceil(per_group).max(1);
    let x = g.min(MAX_GROUPS as usize);
    (x as u32, g.div_ceil(x) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_cover_every_item_within_the_dispatch_limit() {
        for (n, per) in [
            (0, 1),
            (1, 1),
            (65_535, 1),
            (65_536, 1),
            (1 << 26, 1024),
            (300_000, 7),
        ] {
            let (x, y) = groups_for(n, per);
            assert!(
                (1..=MAX_GROUPS).contains(&x) && (1..=MAX_GROUPS).contains(&y),
                "{n}"
            );
            assert!(
                x as usize * y as usize * per >= n,
                "{n}: {x} x {y} groups of {per}"
            );
            // No whole row of groups is idle.
            assert!((x as usize * (y as usize - 1)) * per < n.max(1), "{n}");
        }
    }
}
