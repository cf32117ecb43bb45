//! Tensor maps: the 128-byte descriptors the Hopper copy engine (TMA) reads a tile of a
//! matrix through, built on the host by the driver and passed to kernels by value.

use std::ffi::c_void;

use super::ffi;
use crate::error::{GpuError, Result};
use crate::kernels::gemm_mma::HalfType;
use crate::memory::{DeviceBuffer, HalfElem};

/// A `CUtensorMap`: opaque to the host, 64-byte aligned as the driver requires. Made only
/// with the buffer it describes ([`KernelArg::half_tensor_map`](super::KernelArg::half_tensor_map)).
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
    /// A map of the row-major `rows x cols` matrix of 16-bit floats in `buf` read in
    /// boxes of `box_rows x box_cols` elements, written to shared memory in the 128-byte
    /// swizzled layout (so `box_cols` is at most 64); parts of a box outside the matrix
    /// arrive as zeros. Rows must start on 16-byte boundaries (`cols` a multiple of 8).
    pub(crate) fn half_2d<T: HalfElem>(
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
        if !cols.is_multiple_of(8) || rows > u32::MAX as usize || cols > u32::MAX as usize {
            return bad(format!(
                "{rows} x {cols}: rows must be a multiple of 16 bytes (cols % 8 == 0), \
                 each dimension below 2^32"
            ));
        }
        if !(1..=256).contains(&box_rows)
            || !(8..=64).contains(&box_cols)
            || !box_cols.is_multiple_of(8)
        {
            return bad(format!(
                "box {box_rows} x {box_cols}: rows 1 to 256, columns 8 to 64 in steps of 8"
            ));
        }
        if !buf.device_ptr().is_multiple_of(16) {
            return bad("the buffer does not start on a 16-byte boundary".into());
        }
        let dtype = match T::TYPE {
            HalfType::F16 => ffi::tensor_map::DATA_F16,
            HalfType::Bf16 => ffi::tensor_map::DATA_BF16,
        };
        let dims = [cols as u64, rows as u64];
        let strides = [cols as u64 * 2];
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
