//! Device buffers of 32-bit elements (f32 data, u32 indices).

/// A buffer on the GPU holding `len` 32-bit elements. Cloning shares the buffer.
#[derive(Clone, Debug)]
pub struct GpuBuffer {
    pub(crate) buf: wgpu::Buffer,
    pub(crate) len: usize,
}

impl GpuBuffer {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Bytes of `len` elements; zero-sized buffers cannot be bound, so at least one element.
pub(crate) fn byte_size(len: usize) -> u64 {
    (len.max(1) as u64).saturating_mul(4)
}
