//! Device memory: typed buffers tied to their context, pinned host buffers, and the pool
//! that reuses freed device blocks.

mod device_buffer;
mod host_buffer;
pub(crate) mod pool;
mod q8k_vector;
mod quant_matrix;

pub use device_buffer::DeviceBuffer;
pub use host_buffer::HostBuffer;
pub use pool::PoolStats;
pub use q8k_vector::Q8kVector;
pub use quant_matrix::{QuantMatrix, SLACK_BYTES};

use crate::kernels::float_type::FloatType;
use crate::ptx::PtxType;

/// Element types that may live in device memory: plain data, any bit pattern valid.
///
/// # Safety
/// Implementors must be `Copy`, have no padding, and accept every bit pattern (device
/// memory is copied back byte for byte).
pub unsafe trait DeviceCopy: Copy + Default + Send + Sync + 'static {
    /// The PTX type of one element, matched against kernel parameters at launch.
    const PTX: PtxType;
}

// SAFETY: primitive numbers: no padding, every bit pattern valid.
unsafe impl DeviceCopy for f32 {
    const PTX: PtxType = PtxType::F32;
}
// SAFETY: as above.
unsafe impl DeviceCopy for f64 {
    const PTX: PtxType = PtxType::F64;
}
// SAFETY: as above.
unsafe impl DeviceCopy for u32 {
    const PTX: PtxType = PtxType::U32;
}
// SAFETY: as above.
unsafe impl DeviceCopy for i32 {
    const PTX: PtxType = PtxType::S32;
}
// SAFETY: as above.
unsafe impl DeviceCopy for u16 {
    const PTX: PtxType = PtxType::U16;
}
// SAFETY: as above (`half`'s types are `repr(transparent)` over `u16`).
unsafe impl DeviceCopy for half::f16 {
    const PTX: PtxType = PtxType::F16;
}
// SAFETY: as above.
unsafe impl DeviceCopy for half::bf16 {
    const PTX: PtxType = PtxType::Bf16;
}

/// The 16-bit floats the tensor-core kernels multiply.
pub trait HalfElem: DeviceCopy {
    /// Which one.
    const TYPE: crate::kernels::gemm_mma::HalfType;
}

impl HalfElem for half::f16 {
    const TYPE: crate::kernels::gemm_mma::HalfType = crate::kernels::gemm_mma::HalfType::F16;
}

impl HalfElem for half::bf16 {
    const TYPE: crate::kernels::gemm_mma::HalfType = crate::kernels::gemm_mma::HalfType::Bf16;
}

/// The input types of the tensor-core GEMMs: f16 and bf16, and f32 multiplied as TF32
/// (whose B the kernels take transposed).
pub trait GemmElem: DeviceCopy {
    /// Which input, and so which kernels and B layout.
    const INPUT: crate::kernels::gemm_mma::GemmInput;
    /// `x` rounded to this type (to nearest even; f32 as is).
    fn from_f32(x: f32) -> Self;
}

impl GemmElem for half::f16 {
    const INPUT: crate::kernels::gemm_mma::GemmInput =
        crate::kernels::gemm_mma::GemmInput::Half(crate::kernels::gemm_mma::HalfType::F16);
    fn from_f32(x: f32) -> Self {
        half::f16::from_f32(x)
    }
}

impl GemmElem for half::bf16 {
    const INPUT: crate::kernels::gemm_mma::GemmInput =
        crate::kernels::gemm_mma::GemmInput::Half(crate::kernels::gemm_mma::HalfType::Bf16);
    fn from_f32(x: f32) -> Self {
        half::bf16::from_f32(x)
    }
}

impl GemmElem for f32 {
    const INPUT: crate::kernels::gemm_mma::GemmInput = crate::kernels::gemm_mma::GemmInput::Tf32;
    fn from_f32(x: f32) -> Self {
        x
    }
}

/// The float types kernels read and write around their f32 math: a KV cache's elements
/// (16-bit for half the bytes a step), the activations the quantized products take
/// (`Stream::qgemv`, `Stream::quantize_q8k`), dense embedding tables.
pub trait FloatElem: DeviceCopy {
    /// Which one.
    const TYPE: FloatType;
}

impl FloatElem for f32 {
    const TYPE: FloatType = FloatType::F32;
}

impl FloatElem for half::bf16 {
    const TYPE: FloatType = FloatType::Bf16;
}

impl FloatElem for half::f16 {
    const TYPE: FloatType = FloatType::F16;
}

// SAFETY: as above.
unsafe impl DeviceCopy for u64 {
    const PTX: PtxType = PtxType::U64;
}
