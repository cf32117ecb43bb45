//! Tensor maps: the 128-byte descriptors the Hopper copy engine (TMA) reads a tile of a
//! matrix through, built on the host by the driver and passed to kernels by value.

use std::ffi::c_void;

use super::ffi;
use crate::error::{GpuError, Result};
use crate::memory::{DeviceBuffer, DeviceCopy};
use crate::ptx::PtxType;

/// A `CUtensorMap`: opaque to the host, 64-byte aligned as the driver requires. Made only
/// with the buffer it describes ([`KernelArg::tensor_map`](super::KernelArg::tensor_map)).
#[repr(C, align(64))]
#[derive(Clone, Copy)]
pub struct TensorMap {
    pub(crate) words: [u64; 16],
}

impl std::fmt::Debug for TensorMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TensorMap(..)")
    }
}

impl TensorMap {
    /// A map of the row-major `rows x cols` matrix of f32, bf16 or f16 in `buf` read in
    /// boxes of `box_rows x box_cols` elements, written to shared memory in the 128-byte
    /// swizzled layout (so a box row is 16 to 128 bytes: `box_cols` up to 64 16-bit
    /// values or 32 f32); parts of a box outside the matrix arrive as zeros. Rows must
    /// start on 16-byte boundaries (`cols` a multiple of 8 16-bit values or 4 f32).
    pub(crate) fn tiled_2d<T: DeviceCopy>(
        buf: &DeviceBuffer<T>,
        rows: usize,
        cols: usize,
        box_rows: u32,
        box_cols: u32,
    ) -> Result<TensorMap> {
        let bad = |reason: String| {
            Err(GpuError::Shape {
                kernel: "tensor map".into(),
                reason,
            })
        };
        if rows == 0 || cols == 0 || rows.checked_mul(cols) != Some(buf.len()) {
            return bad(format!(
                "{rows} x {cols} does not describe a buffer of {} elements",
                buf.len()
            ));
        }
        let dtype = match T::PTX {
            PtxType::F32 => ffi::tensor_map::DATA_F32,
            PtxType::F16 => ffi::tensor_map::DATA_F16,
            PtxType::Bf16 => ffi::tensor_map::DATA_BF16,
            t => {
                return bad(format!(
                    "{t} elements: the copy engine's maps here take f32, f16, bf16"
                ));
            }
        };
        let bytes = T::PTX.bytes();
        let per_16 = (16 / bytes) as usize;
        if !cols.is_multiple_of(per_16) || rows > u32::MAX as usize || cols > u32::MAX as usize {
            return bad(format!(
                "{rows} x {cols}: rows must be a multiple of 16 bytes (cols % {per_16} == 0), \
                 each dimension below 2^32"
            ));
        }
        let max_cols = 128 / bytes;
        if !(1..=256).contains(&box_rows)
            || !(1..=max_cols).contains(&box_cols)
            || !(box_cols * bytes).is_multiple_of(16)
        {
            return bad(format!(
                "box {box_rows} x {box_cols}: rows 1 to 256, columns {per_16} to {max_cols} \
                 in steps of {per_16}"
            ));
        }
        if !buf.device_ptr().is_multiple_of(16) {
            return bad("the buffer does not start on a 16-byte boundary".into());
        }
        let dims = [cols as u64, rows as u64];
        let strides = [cols as u64 * bytes as u64];
        let boxes = [box_cols, box_rows];
        let elem_strides = [1u32, 1];
        let mut map = TensorMap { words: [0; 16] };
        // SAFETY: `map` is 128 bytes, 64-byte aligned; the arrays have `rank` (2) entries
        // (`rank - 1` for the strides) and live across the call; the address is a live
        // allocation of `rows * cols` elements, 16-byte aligned; the box and stride
        // limits the driver documents are checked above.
        unsafe {
            ffi::cuTensorMapEncodeTiled(
                map.words.as_mut_ptr() as *mut c_void,
                dtype,
                2,
                buf.device_ptr() as *mut c_void,
                dims.as_ptr(),
                strides.as_ptr(),
                boxes.as_ptr(),
                elem_strides.as_ptr(),
                0,
                ffi::tensor_map::SWIZZLE_128B,
                ffi::tensor_map::L2_256B,
                0,
            )
        }?;
        Ok(map)
    }
}
