//! The typed launch builder: every argument is checked against the kernel's declared
//! parameters (count, scalar type, pointee type, same context) and the configuration
//! against the hardware limits before anything is enqueued.

use std::ffi::c_void;

use super::Function;
use super::ffi;
use super::stream::{Recording, Stream};
use crate::error::{GpuError, Result};
use crate::kernels::LaunchConfig;
use crate::memory::{DeviceBuffer, DeviceCopy};
use crate::ptx::PtxType;

/// One kernel argument, borrowed for the stream's recording.
#[derive(Clone, Copy, Debug)]
pub enum KernelArg<'a> {
    /// A device buffer (its address is passed).
    Buffer {
        /// Device address.
        ptr: u64,
        /// Element type.
        elem: PtxType,
        /// Elements.
        len: usize,
        /// The owning context (must be the stream's).
        ctx: usize,
        /// Ties the buffer's borrow to the recording.
        _borrow: std::marker::PhantomData<&'a ()>,
    },
    /// A `u32` scalar.
    U32(u32),
    /// An `f32` scalar.
    F32(f32),
    /// A tensor map passed by value, describing a buffer of the recording.
    TensorMap {
        /// The map.
        map: super::TensorMap,
        /// The context of the buffer it describes (must be the stream's).
        ctx: usize,
        /// Ties that buffer's borrow to the recording.
        _borrow: std::marker::PhantomData<&'a ()>,
    },
}

/// The buffer argument without a borrow; the public constructors add theirs.
fn buffer_arg<T: DeviceCopy>(b: &DeviceBuffer<T>) -> KernelArg<'static> {
    KernelArg::Buffer {
        ptr: b.ptr,
        elem: T::PTX,
        len: b.len(),
        ctx: b.context_id(),
        _borrow: std::marker::PhantomData,
    }
}

impl<'a> KernelArg<'a> {
    /// A buffer the kernel reads.
    pub fn buf<T: DeviceCopy>(b: &'a DeviceBuffer<T>) -> Self {
        buffer_arg(b)
    }

    /// A buffer the kernel writes (device memory behind a handle: the shared borrow is
    /// what keeps it alive and off the host until the stream is synchronised).
    pub fn buf_mut<T: DeviceCopy>(b: &'a DeviceBuffer<T>) -> Self {
        buffer_arg(b)
    }

    /// Scratch memory the caller moves into [`Stream::keep_alive`] right after the
    /// launch, so it lives until the stream is synchronised, as a borrowed buffer would.
    pub(crate) fn scratch<T: DeviceCopy>(b: &DeviceBuffer<T>) -> KernelArg<'static> {
        buffer_arg(b)
    }

    /// A tensor map of `of`, the row-major `rows x cols` matrix of f32, bf16 or f16 read
    /// in boxes of `box_rows x box_cols` (rows 1 to 256; a box row 16 to 128 bytes in
    /// steps of 16: up to 64 16-bit values or 32 f32), written to shared memory in the
    /// 128-byte swizzled layout, parts of a box outside the matrix as zeros; rows on
    /// 16-byte boundaries (`cols` a multiple of 8 16-bit values or 4 f32); other element
    /// types are an error. The buffer stays borrowed by the recording, as with
    /// [`buf`](Self::buf), and the map describes no other.
    pub fn tensor_map<T: DeviceCopy>(
        of: &'a DeviceBuffer<T>,
        rows: usize,
        cols: usize,
        box_rows: u32,
        box_cols: u32,
    ) -> crate::error::Result<Self> {
        Ok(KernelArg::TensorMap {
            map: super::TensorMap::tiled_2d(of, rows, cols, box_rows, box_cols)?,
            ctx: of.context_id(),
            _borrow: std::marker::PhantomData,
        })
    }

    fn describe(&self) -> String {
        match self {
            KernelArg::Buffer { elem, len, .. } => format!("buffer of {len} {elem}"),
            KernelArg::U32(_) => "u32".into(),
            KernelArg::F32(_) => "f32".into(),
            KernelArg::TensorMap { .. } => "tensor map".into(),
        }
    }

    fn context(&self) -> Option<usize> {
        match self {
            KernelArg::Buffer { ctx, .. } | KernelArg::TensorMap { ctx, .. } => Some(*ctx),
            _ => None,
        }
    }
}

/// A launch being assembled: `stream.launch(&f).config(cfg).arg(..).run()`.
pub struct Launch<'s, 'a> {
    stream: &'s mut Stream<Recording<'a>>,
    f: &'s Function,
    cfg: Option<LaunchConfig>,
    args: Vec<KernelArg<'a>>,
}

impl<'s, 'a> Launch<'s, 'a> {
    pub(crate) fn new(stream: &'s mut Stream<Recording<'a>>, f: &'s Function) -> Self {
        Launch {
            stream,
            f,
            cfg: None,
            args: Vec::new(),
        }
    }

    /// Grid and block.
    pub fn config(mut self, cfg: LaunchConfig) -> Self {
        self.cfg = Some(cfg);
        self
    }

    /// Appends an argument.
    pub fn arg(mut self, a: KernelArg<'a>) -> Self {
        self.args.push(a);
        self
    }

    fn check(&self) -> Result<LaunchConfig> {
        let f = self.f;
        let cfg = self.cfg.ok_or_else(|| GpuError::Shape {
            kernel: f.name.clone(),
            reason: "no launch configuration".into(),
        })?;
        let bad = |reason: String| {
            Err(GpuError::Shape {
                kernel: f.name.clone(),
                reason,
            })
        };
        let (g, b) = (cfg.grid, cfg.block);
        if g.0 == 0 || g.1 == 0 || g.2 == 0 || b.0 == 0 || b.1 == 0 || b.2 == 0 {
            return bad(format!("empty launch grid {g:?} block {b:?}"));
        }
        if g.0 > i32::MAX as u32 || g.1 > 65535 || g.2 > 65535 {
            return bad(format!("grid {g:?} over the hardware limits"));
        }
        if b.0 as u64 * b.1 as u64 * b.2 as u64 > 1024 {
            return bad(format!("block {b:?} has more than 1024 threads"));
        }
        let limit = f.ctx.info.max_shared_per_block;
        if cfg.shared_bytes > limit.max(48 * 1024) {
            return bad(format!(
                "{} bytes of dynamic shared memory (this device's limit is {limit})",
                cfg.shared_bytes
            ));
        }
        if self.args.len() != f.params.len() {
            return bad(format!(
                "{} arguments for {} parameters",
                self.args.len(),
                f.params.len()
            ));
        }
        let ctx = std::sync::Arc::as_ptr(&self.stream.ctx) as usize;
        if self
            .args
            .iter()
            .any(|a| a.context().is_some_and(|c| c != ctx))
        {
            return bad("a buffer belongs to another context".into());
        }
        for (i, (a, p)) in self.args.iter().zip(&f.params).enumerate() {
            let ok = match a {
                KernelArg::Buffer { elem, .. } => p.ty == PtxType::U64 && p.pointee == Some(*elem),
                KernelArg::U32(_) => p.ty == PtxType::U32,
                KernelArg::F32(_) => p.ty == PtxType::F32,
                KernelArg::TensorMap { .. } => p.tensor_map,
            } && (p.tensor_map == matches!(a, KernelArg::TensorMap { .. }));
            if !ok {
                let expected = match p.pointee {
                    _ if p.tensor_map => format!("tensor map ({})", p.name),
                    Some(e) => format!("buffer of {e} ({})", p.name),
                    None => format!("{} ({})", p.ty, p.name),
                };
                return Err(GpuError::ArgType {
                    kernel: f.name.clone(),
                    index: i,
                    expected,
                    got: a.describe(),
                });
            }
        }
        Ok(cfg)
    }

    /// Checks everything, then enqueues the kernel.
    pub fn run(self) -> Result<()> {
        let cfg = self.check()?;
        if !std::sync::Arc::ptr_eq(&self.f.ctx, &self.stream.ctx) {
            return Err(GpuError::Shape {
                kernel: self.f.name.clone(),
                reason: "function and stream belong to different contexts".into(),
            });
        }
        let mut values: Vec<u64> = self
            .args
            .iter()
            .map(|a| match *a {
                KernelArg::Buffer { ptr, .. } => ptr,
                KernelArg::U32(v) => v as u64,
                KernelArg::F32(v) => v.to_bits() as u64,
                KernelArg::TensorMap { .. } => 0,
            })
            .collect();
        // The driver reads each parameter's size from the kernel; little-endian storage
        // puts a u32/f32 in the low bytes of its u64 slot, and a tensor map is read (128
        // bytes) from the argument list itself, alive across the call.
        let mut ptrs: Vec<*mut c_void> = values
            .iter_mut()
            .zip(&self.args)
            .map(|(v, a)| match a {
                KernelArg::TensorMap { map, .. } => map.words.as_ptr() as *mut c_void,
                _ => v as *mut u64 as *mut c_void,
            })
            .collect();
        self.stream.ctx.bind()?;
        if cfg.shared_bytes > 48 * 1024 {
            // SAFETY: a live function handle of the bound context; the size is within the
            // device's opt-in limit (checked above).
            unsafe {
                ffi::cuFuncSetAttribute(
                    self.f.raw,
                    ffi::FUNC_MAX_DYNAMIC_SHARED_BYTES,
                    cfg.shared_bytes as i32,
                )
            }?;
        }
        let (g, b) = (cfg.grid, cfg.block);
        if self.f.overlaps_previous() {
            let mut attr = ffi::LaunchAttribute::int(
                ffi::LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
                1,
            );
            let config = ffi::LaunchConfigEx {
                dims: [g.0, g.1, g.2, b.0, b.1, b.2],
                shared: cfg.shared_bytes,
                stream: self.stream.raw,
                attrs: &mut attr,
                num_attrs: 1,
            };
            // SAFETY: as for `cuLaunchKernel` below; `config` and its one attribute live
            // across the call. The kernel waits for its predecessor (`griddepcontrol.wait`)
            // before anything an earlier kernel writes or reads (the validator rejects a
            // store before the wait), so the overlap changes no result.
            return unsafe {
                ffi::cuLaunchKernelEx(&config, self.f.raw, ptrs.as_mut_ptr(), std::ptr::null_mut())
            };
        }
        // SAFETY: arguments match the kernel's parameters in number and type (checked
        // above); `ptrs` points into `values`, alive across the call; the buffers are
        // borrowed by the recording stream until it is synchronised.
        unsafe {
            ffi::cuLaunchKernel(
                self.f.raw,
                g.0,
                g.1,
                g.2,
                b.0,
                b.1,
                b.2,
                cfg.shared_bytes,
                self.stream.raw,
                ptrs.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
    }
}
