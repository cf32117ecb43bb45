//! The float types kernels load and store around their f32 arithmetic (f32, bf16, f16),
//! with the loads that widen them to f32 exactly and the store that rounds back.

use crate::ptx::{Bf16, F16, F32, KernelBuilder, PtxType, Reg, Rounding, Space, U16, U32, U64};

/// A float type kernels read or write beside f32 math: a KV cache's elements (16-bit
/// halves the bytes each decode step reads; attention still scores and accumulates in
/// f32), the quantized products' activations (`QgemvKernel`, `QuantizeQ8kKernel`),
/// embedding tables, the tensor-core GEMMs' output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FloatType {
    /// IEEE single.
    F32,
    /// bfloat16.
    Bf16,
    /// IEEE half.
    F16,
}

impl FloatType {
    /// Every type.
    pub const ALL: [FloatType; 3] = [FloatType::F32, FloatType::Bf16, FloatType::F16];

    /// Bytes per element.
    pub fn bytes(self) -> u32 {
        match self {
            FloatType::F32 => 4,
            _ => 2,
        }
    }

    /// The kernel-name suffix.
    pub fn name(self) -> &'static str {
        match self {
            FloatType::F32 => "f32",
            FloatType::Bf16 => "bf16",
            FloatType::F16 => "f16",
        }
    }

    pub(crate) fn ptx(self) -> PtxType {
        match self {
            FloatType::F32 => PtxType::F32,
            FloatType::Bf16 => PtxType::Bf16,
            FloatType::F16 => PtxType::F16,
        }
    }
}

impl From<super::gemm_mma::HalfType> for FloatType {
    fn from(t: super::gemm_mma::HalfType) -> FloatType {
        match t {
            super::gemm_mma::HalfType::F16 => FloatType::F16,
            super::gemm_mma::HalfType::Bf16 => FloatType::Bf16,
        }
    }
}

/// The two 16-bit floats of a loaded word as f32 (low half first). bf16 widens by
/// moving its bits to the top of the word (exact); f16 through `cvt` (exact too).
fn widen_pair(b: &mut KernelBuilder, w: Reg<U32>, ty: FloatType) -> [Reg<F32>; 2] {
    match ty {
        FloatType::Bf16 => {
            let lo = b.shl(w, 16u32);
            let hi = b.and(w, 0xFFFF_0000u32);
            [b.bitcast32(lo), b.bitcast32(hi)]
        }
        _ => {
            let hi_bits = b.shr(w, 16u32);
            [w, hi_bits].map(|x| {
                let h = b.cvt::<U16, U32>(x, None);
                let h = b.bitcast16::<F16, U16>(h);
                b.cvt::<F32, F16>(h, None)
            })
        }
    }
}

/// The raw 32-bit words of `n` consecutive cache elements at `addr` (n is 2, 4 or 8; the
/// address aligned to their size), in 4-, 8- or 16-byte loads. Kept as words until used,
/// a 16-bit row held ahead takes half the registers of its widened values.
pub(crate) fn load_words(
    b: &mut KernelBuilder,
    addr: Reg<U64>,
    n: usize,
    ty: FloatType,
) -> Vec<Reg<U32>> {
    let words = n * ty.bytes() as usize / 4;
    match words {
        1 => vec![b.ld::<U32, U64>(Space::Global, addr, 0)],
        2 => b.ld_vec::<U32, U64, 2>(Space::Global, addr, 0).to_vec(),
        _ => (0..words / 4)
            .flat_map(|i| b.ld_vec::<U32, U64, 4>(Space::Global, addr, 16 * i as i64))
            .collect(),
    }
}

/// The f32 values of words from [`load_words`].
pub(crate) fn widen(b: &mut KernelBuilder, words: &[Reg<U32>], ty: FloatType) -> Vec<Reg<F32>> {
    match ty {
        FloatType::F32 => words.iter().map(|&w| b.bitcast32(w)).collect(),
        _ => words.iter().flat_map(|&w| widen_pair(b, w, ty)).collect(),
    }
}

/// `n` consecutive cache elements at `addr` as f32 (see [`load_words`]).
pub(crate) fn load_row(
    b: &mut KernelBuilder,
    addr: Reg<U64>,
    n: usize,
    ty: FloatType,
) -> Vec<Reg<F32>> {
    let w = load_words(b, addr, n, ty);
    widen(b, &w, ty)
}

/// Stores f32 `x` at `addr` as the cache type (16-bit types rounded to nearest).
pub(crate) fn store_elem(b: &mut KernelBuilder, addr: Reg<U64>, x: Reg<F32>, ty: FloatType) {
    match ty {
        FloatType::F32 => b.st::<F32, U64>(Space::Global, addr, 0, x),
        FloatType::Bf16 => {
            let h = b.cvt::<Bf16, F32>(x, Some(Rounding::Rn));
            b.st::<Bf16, U64>(Space::Global, addr, 0, h)
        }
        FloatType::F16 => {
            let h = b.cvt::<F16, F32>(x, Some(Rounding::Rn));
            b.st::<F16, U64>(Space::Global, addr, 0, h)
        }
    }
}

/// Stores 2 or 4 adjacent values at `addr` as `ty` in one access (f32 as they are,
/// 16-bit types rounded to nearest and packed in pairs; `addr` aligned to the access),
/// the counterpart of [`load_row`].
pub(crate) fn store_row(b: &mut KernelBuilder, addr: Reg<U64>, v: &[Reg<F32>], ty: FloatType) {
    match ty {
        FloatType::F32 => b.st_vec::<F32, U64>(Space::Global, addr, 0, v),
        _ => {
            let words: Vec<Reg<U32>> = v
                .chunks(2)
                .map(|p| b.cvt_pack(ty.ptx(), p[0], p[1]))
                .collect();
            match words.as_slice() {
                [w] => b.st::<U32, U64>(Space::Global, addr, 0, *w),
                _ => b.st_vec::<U32, U64>(Space::Global, addr, 0, &words),
            }
        }
    }
}
