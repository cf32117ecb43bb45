//! The block structs, field for field GGML's layouts (`ggml-common.h`), plus NF4.
//!
//! Each is `#[repr(C)]` with its size asserted at compile time, so `size_of` is the byte
//! count GGUF files use. Kernels never cast file bytes to these types (tensor data need not
//! be aligned): [`Block::read`] decodes a block from little-endian bytes and
//! [`Block::write`] encodes it.

use half::f16;

/// Elements in a K-quant super-block.
pub const QK_K: usize = 256;

/// A quantized block: its geometry and its byte encoding.
pub trait Block: Copy + Sized {
    /// The format this block belongs to.
    const FORMAT: crate::QuantFormat;
    /// Weights per block.
    const ELEMS: usize;
    /// Bytes per block in a GGUF file (equal to `size_of::<Self>()`).
    const BYTES: usize;
    /// Decodes one block from exactly [`Block::BYTES`] little-endian bytes.
    fn read(bytes: &[u8]) -> Self;
    /// Encodes this block into exactly [`Block::BYTES`] bytes.
    fn write(&self, out: &mut [u8]);
}

/// Q4_0: 4.5 bits per weight. 32 weights, `x = d * (q - 8)`, `q` in 0..16. Weight `l`
/// (l < 16) is the low nibble of `qs[l]`, weight `l + 16` its high nibble.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ4_0 {
    /// Scale.
    pub d: f16,
    /// Packed 4-bit quants.
    pub qs: [u8; 16],
}

/// Q4_1: 5 bits per weight. 32 weights, `x = d * q + m`, `q` in 0..16; nibbles as Q4_0.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ4_1 {
    /// Scale.
    pub d: f16,
    /// Offset (the block minimum).
    pub m: f16,
    /// Packed 4-bit quants.
    pub qs: [u8; 16],
}

/// Q5_0: 5.5 bits per weight. 32 weights, `x = d * (q - 16)`, `q` in 0..32: the low four
/// bits as Q4_0's nibbles, bit 4 of weight `l` is bit `l` of the little-endian `qh`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ5_0 {
    /// Scale.
    pub d: f16,
    /// The fifth bit of each quant.
    pub qh: [u8; 4],
    /// Packed low 4 bits.
    pub qs: [u8; 16],
}

/// Q5_1: 6 bits per weight. 32 weights, `x = d * q + m`, `q` in 0..32, bits as Q5_0.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ5_1 {
    /// Scale.
    pub d: f16,
    /// Offset (the block minimum).
    pub m: f16,
    /// The fifth bit of each quant.
    pub qh: [u8; 4],
    /// Packed low 4 bits.
    pub qs: [u8; 16],
}

/// Q8_0: 8.5 bits per weight. 32 weights, `x = d * q`, `q` in -127..=127.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ8_0 {
    /// Scale.
    pub d: f16,
    /// Quants.
    pub qs: [i8; 32],
}

/// Q4_K: 4.5 bits per weight. 256 weights in 8 sub-blocks of 32; sub-block `j` has a 6-bit
/// scale `sc[j]` and min `mn[j]`, and `x = (d * sc[j]) * q - (dmin * mn[j])`, `q` in
/// 0..16. Sub-blocks `2c` and `2c + 1` are the low and high nibbles of `qs[32c..32c+32]`.
/// `scales` packs the sixteen 6-bit values (see `kquant::scale_min`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ4K {
    /// Super-block scale of the scales.
    pub d: f16,
    /// Super-block scale of the mins.
    pub dmin: f16,
    /// Eight 6-bit scales and eight 6-bit mins, packed.
    pub scales: [u8; 12],
    /// Packed 4-bit quants.
    pub qs: [u8; 128],
}

/// Q5_K: 5.5 bits per weight. As Q4_K with `q` in 0..32: bit 4 of weight `l` of sub-block
/// `j` is bit `j` of `qh[l]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ5K {
    /// Super-block scale of the scales.
    pub d: f16,
    /// Super-block scale of the mins.
    pub dmin: f16,
    /// Eight 6-bit scales and eight 6-bit mins, packed.
    pub scales: [u8; 12],
    /// The fifth bit of each quant.
    pub qh: [u8; 32],
    /// Packed low 4 bits.
    pub qs: [u8; 128],
}

/// Q6_K: 6.5625 bits per weight. 256 weights in 16 groups of 16, `x = (d * sc[i / 16]) *
/// (q - 32)`, `q` in 0..64. In each half `h` (128 weights), weight `l < 32` takes its low
/// bits from `ql[64h + l]` (low nibble), `l + 32` from `ql[64h + 32 + l]` (low), `l + 64`
/// and `l + 96` from the same two bytes' high nibbles; bits 4-5 of the four come from
/// `qh[32h + l]` bits 0-1, 2-3, 4-5, 6-7.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ6K {
    /// Low 4 bits of the quants.
    pub ql: [u8; 128],
    /// High 2 bits of the quants.
    pub qh: [u8; 64],
    /// 8-bit scale per 16 weights.
    pub scales: [i8; 16],
    /// Super-block scale.
    pub d: f16,
}

/// Q8_K: 9.125 bits per weight. 256 weights, `x = d * q`, `q` in -128..=127, with the sum
/// of each 16 quants kept for the K-quant integer dot products.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ8K {
    /// Scale (f32, unlike the other formats).
    pub d: f32,
    /// Quants.
    pub qs: [i8; QK_K],
    /// Sum of each group of 16 quants.
    pub bsums: [i16; 16],
}

/// NF4 (QLoRA's 4-bit NormalFloat): 4.5 bits per weight. 64 weights, `x = absmax *
/// NF4_LEVELS[q]`; weight `l` (l < 32) is the low nibble of `qs[l]`, `l + 32` its high
/// nibble. Not a GGML type: no GGUF id.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockNf4 {
    /// The block's largest magnitude.
    pub absmax: f32,
    /// Packed 4-bit codes.
    pub qs: [u8; 32],
}

/// The sixteen NF4 levels: quantiles of a standard normal scaled to [-1, 1], with an exact
/// zero (Dettmers et al., QLoRA, 2023, appendix E).
pub const NF4_LEVELS: [f32; 16] = [
    -1.0,
    -0.696_192_8,
    -0.525_073_05,
    -0.394_917_5,
    -0.284_441_38,
    -0.184_773_43,
    -0.091_050_036,
    0.0,
    0.079_580_3,
    0.160_930_2,
    0.246_112_3,
    0.337_915_24,
    0.440_709_83,
    0.562_617,
    0.722_956_84,
    1.0,
];

const _: () = {
    use std::mem::size_of;
    assert!(size_of::<BlockQ4_0>() == 18);
    assert!(size_of::<BlockQ4_1>() == 20);
    assert!(size_of::<BlockQ5_0>() == 22);
    assert!(size_of::<BlockQ5_1>() == 24);
    assert!(size_of::<BlockQ8_0>() == 34);
    assert!(size_of::<BlockQ4K>() == 144);
    assert!(size_of::<BlockQ5K>() == 176);
    assert!(size_of::<BlockQ6K>() == 210);
    assert!(size_of::<BlockQ8K>() == 292);
    assert!(size_of::<BlockNf4>() == 36);
};

/// Little-endian field codec shared by the `Block` impls.
struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let out: [u8; N] = self.b[self.at..self.at + N].try_into().expect("N bytes");
        self.at += N;
        out
    }
    fn f16(&mut self) -> f16 {
        f16::from_bits(u16::from_le_bytes(self.take()))
    }
    fn f32(&mut self) -> f32 {
        f32::from_le_bytes(self.take())
    }
    fn i8s<const N: usize>(&mut self) -> [i8; N] {
        self.take::<N>().map(|v| v as i8)
    }
}

struct Writer<'a> {
    b: &'a mut [u8],
    at: usize,
}

impl Writer<'_> {
    fn put(&mut self, v: &[u8]) {
        self.b[self.at..self.at + v.len()].copy_from_slice(v);
        self.at += v.len();
    }
    fn f16(&mut self, v: f16) {
        self.put(&v.to_bits().to_le_bytes());
    }
}

/// Implements `Block` from a field list: `read` and `write` visit the fields in
/// declaration order (the struct is `repr(C)` without padding, so that is the byte order).
macro_rules! block_codec {
    ($ty:ident, $fmt:ident, $elems:expr, { $($field:ident: $kind:ident),* }) => {
        impl Block for $ty {
            const FORMAT: crate::QuantFormat = crate::QuantFormat::$fmt;
            const ELEMS: usize = $elems;
            const BYTES: usize = std::mem::size_of::<$ty>();
            #[inline(always)]
            fn read(bytes: &[u8]) -> Self {
                let mut c = Cursor { b: &bytes[..Self::BYTES], at: 0 };
                $ty { $($field: block_codec!(@read c, $kind)),* }
            }
            #[inline(always)]
            fn write(&self, out: &mut [u8]) {
                let mut w = Writer { b: &mut out[..Self::BYTES], at: 0 };
                $(block_codec!(@write w, self.$field, $kind);)*
            }
        }
    };
    (@read $c:ident, f16) => { $c.f16() };
    (@read $c:ident, f32) => { $c.f32() };
    (@read $c:ident, bytes) => { $c.take() };
    (@read $c:ident, i8s) => { $c.i8s() };
    (@read $c:ident, i16s) => {{
        let raw: [u8; 32] = $c.take();
        std::array::from_fn(|i| i16::from_le_bytes([raw[2 * i], raw[2 * i + 1]]))
    }};
    (@write $w:ident, $v:expr, f16) => { $w.f16($v) };
    (@write $w:ident, $v:expr, f32) => { $w.put(&$v.to_le_bytes()) };
    (@write $w:ident, $v:expr, bytes) => { $w.put(&$v) };
    (@write $w:ident, $v:expr, i8s) => { $w.put(&$v.map(|x| x as u8)) };
    (@write $w:ident, $v:expr, i16s) => {
        for x in $v {
            $w.put(&x.to_le_bytes());
        }
    };
}

block_codec!(BlockQ4_0, Q4_0, 32, { d: f16, qs: bytes });
block_codec!(BlockQ4_1, Q4_1, 32, { d: f16, m: f16, qs: bytes });
block_codec!(BlockQ5_0, Q5_0, 32, { d: f16, qh: bytes, qs: bytes });
block_codec!(BlockQ5_1, Q5_1, 32, { d: f16, m: f16, qh: bytes, qs: bytes });
block_codec!(BlockQ8_0, Q8_0, 32, { d: f16, qs: i8s });
block_codec!(BlockQ4K, Q4K, QK_K, { d: f16, dmin: f16, scales: bytes, qs: bytes });
block_codec!(BlockQ5K, Q5K, QK_K, { d: f16, dmin: f16, scales: bytes, qh: bytes, qs: bytes });
block_codec!(BlockQ6K, Q6K, QK_K, { ql: bytes, qh: bytes, scales: i8s, d: f16 });
block_codec!(BlockQ8K, Q8K, QK_K, { d: f32, qs: i8s, bsums: i16s });
block_codec!(BlockNf4, Nf4, 64, { absmax: f32, qs: bytes });

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<B: Block + PartialEq + std::fmt::Debug>() {
        let bytes: Vec<u8> = (0..B::BYTES).map(|i| (i * 37 + 11) as u8).collect();
        let b = B::read(&bytes);
        let mut out = vec![0u8; B::BYTES];
        b.write(&mut out);
        assert_eq!(out, bytes, "{:?}", B::FORMAT);
    }

    #[test]
    fn every_block_reads_and_writes_its_own_bytes() {
        round_trip::<BlockQ4_0>();
        round_trip::<BlockQ4_1>();
        round_trip::<BlockQ5_0>();
        round_trip::<BlockQ5_1>();
        round_trip::<BlockQ8_0>();
        round_trip::<BlockQ4K>();
        round_trip::<BlockQ5K>();
        round_trip::<BlockQ6K>();
        round_trip::<BlockQ8K>();
        round_trip::<BlockNf4>();
    }

    #[test]
    fn fields_sit_at_ggml_offsets() {
        // Q6_K ends with d; Q8_K starts with an f32 d; Q4_K's quants start at byte 16.
        let mut bytes = vec![0u8; BlockQ6K::BYTES];
        bytes[208..210].copy_from_slice(&f16::from_f32(2.0).to_bits().to_le_bytes());
        assert_eq!(BlockQ6K::read(&bytes).d, f16::from_f32(2.0));
        let mut bytes = vec![0u8; BlockQ8K::BYTES];
        bytes[..4].copy_from_slice(&1.5f32.to_le_bytes());
        bytes[4] = 0xff;
        let q8 = BlockQ8K::read(&bytes);
        assert_eq!((q8.d, q8.qs[0]), (1.5, -1));
        let mut bytes = vec![0u8; BlockQ4K::BYTES];
        bytes[16] = 0x21;
        assert_eq!(BlockQ4K::read(&bytes).qs[0], 0x21);
    }
}
