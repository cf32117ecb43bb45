//! Dequantization: each block's formula, evaluated in exactly the reference's order of f32
//! operations (a separate multiply and add, never a fused one), so results are equal bit for
//! bit to GGML's and to the `gguf` package's numpy ports.

use crate::blocks::*;
use crate::isa::{Isa, per_isa};
use crate::{QuantError, QuantFormat, Result};

/// A block that expands to f32 weights.
pub(crate) trait Dequantize: Block {
    /// Writes the block's `ELEMS` weights to `out[..ELEMS]`.
    fn dequantize_into(&self, out: &mut [f32]);
}

impl Dequantize for BlockQ4_0 {
    #[inline(always)]
    fn dequantize_into(&self, out: &mut [f32]) {
        let d = self.d.to_f32();
        let (lo, hi) = out[..32].split_at_mut(16);
        for l in 0..16 {
            lo[l] = d * ((self.qs[l] & 15) as i32 - 8) as f32;
            hi[l] = d * ((self.qs[l] >> 4) as i32 - 8) as f32;
        }
    }
}

impl Dequantize for BlockQ4_1 {
    #[inline(always)]
    fn dequantize_into(&self, out: &mut [f32]) {
        let (d, m) = (self.d.to_f32(), self.m.to_f32());
        let (lo, hi) = out[..32].split_at_mut(16);
        for l in 0..16 {
            lo[l] = d * (self.qs[l] & 15) as f32 + m;
            hi[l] = d * (self.qs[l] >> 4) as f32 + m;
        }
    }
}

/// The five-bit quants of Q5_0/Q5_1: low nibbles plus bit `l` of `qh`. Both halves in one
/// branch-free loop, so the compiler vectorizes it (per-lane shifts of `qh`).
#[inline(always)]
pub(crate) fn q5(qs: &[u8; 16], qh: [u8; 4]) -> [u8; 32] {
    let h = u32::from_le_bytes(qh);
    let mut out = [0u8; 32];
    for l in 0..16 {
        out[l] = (qs[l] & 15) | (((h >> l) & 1) as u8) << 4;
        out[l + 16] = (qs[l] >> 4) | (((h >> (l + 16)) & 1) as u8) << 4;
    }
    out
}

impl Dequantize for BlockQ5_0 {
    #[inline(always)]
    fn dequantize_into(&self, out: &mut [f32]) {
        let d = self.d.to_f32();
        for (o, q) in out[..32].iter_mut().zip(q5(&self.qs, self.qh)) {
            *o = d * (q as i32 - 16) as f32;
        }
    }
}

impl Dequantize for BlockQ5_1 {
    #[inline(always)]
    fn dequantize_into(&self, out: &mut [f32]) {
        let (d, m) = (self.d.to_f32(), self.m.to_f32());
        for (o, q) in out[..32].iter_mut().zip(q5(&self.qs, self.qh)) {
            *o = d * q as f32 + m;
        }
    }
}

impl Dequantize for BlockQ8_0 {
    #[inline(always)]
    fn dequantize_into(&self, out: &mut [f32]) {
        let d = self.d.to_f32();
        for (o, &q) in out[..32].iter_mut().zip(&self.qs) {
            *o = q as f32 * d;
        }
    }
}

/// Sub-block `j`'s 6-bit scale and min from the 12 packed bytes of Q4_K/Q5_K: bytes 0-3
/// hold scales 0-3, bytes 4-7 mins 0-3 (low six bits each); scales and mins 4-7 take their
/// low four bits from bytes 8-11 and their top two from the spare bits of bytes 0-7.
#[inline(always)]
pub(crate) fn scale_min(j: usize, q: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// Q4_K and Q5_K share everything but the fifth bit: `hbit(j, l)` gives it (0 for Q4_K).
#[inline(always)]
fn dequantize_k(
    d: f32,
    dmin: f32,
    scales: &[u8; 12],
    qs: &[u8; 128],
    hbit: impl Fn(usize, usize) -> u8,
    out: &mut [f32],
) {
    for (j, sub) in out[..QK_K].chunks_exact_mut(32).enumerate() {
        let (sc, mn) = scale_min(j, scales);
        let (dl, ml) = (d * sc as f32, dmin * mn as f32);
        let bytes = &qs[32 * (j / 2)..32 * (j / 2) + 32];
        let shift = 4 * (j % 2);
        for (l, o) in sub.iter_mut().enumerate() {
            let q = ((bytes[l] >> shift) & 15) | hbit(j, l);
            *o = dl * q as f32 - ml;
        }
    }
}

impl Dequantize for BlockQ4K {
    #[inline(always)]
    fn dequantize_into(&self, out: &mut [f32]) {
        let (d, dmin) = (self.d.to_f32(), self.dmin.to_f32());
        dequantize_k(d, dmin, &self.scales, &self.qs, |_, _| 0, out);
    }
}

impl Dequantize for BlockQ5K {
    #[inline(always)]
    fn dequantize_into(&self, out: &mut [f32]) {
        let (d, dmin) = (self.d.to_f32(), self.dmin.to_f32());
        let qh = &self.qh;
        dequantize_k(
            d,
            dmin,
            &self.scales,
            &self.qs,
            |j, l| ((qh[l] >> j) & 1) << 4,
            out,
        );
    }
}

impl Dequantize for BlockQ6K {
    #[inline(always)]
    fn dequantize_into(&self, out: &mut [f32]) {
        let d = self.d.to_f32();
        for (h, half) in out[..QK_K].chunks_exact_mut(128).enumerate() {
            let (ql, qh) = (&self.ql[64 * h..64 * h + 64], &self.qh[32 * h..32 * h + 32]);
            // Quarter `k` of the half: low nibble of ql[l] / ql[l + 32], then their high
            // nibbles; bits 4-5 from qh bits 2k, 2k + 1.
            for (k, quarter) in half.chunks_exact_mut(32).enumerate() {
                let src = &ql[32 * (k % 2)..32 * (k % 2) + 32];
                let shift = 4 * (k / 2);
                for (l, o) in quarter.iter_mut().enumerate() {
                    let q = ((src[l] >> shift) & 15) | (((qh[l] >> (2 * k)) & 3) << 4);
                    let dl = d * self.scales[8 * h + 2 * k + l / 16] as f32;
                    *o = dl * (q as i32 - 32) as f32;
                }
            }
        }
    }
}

impl Dequantize for BlockQ8K {
    #[inline(always)]
    fn dequantize_into(&self, out: &mut [f32]) {
        for (o, &q) in out[..QK_K].iter_mut().zip(&self.qs) {
            *o = self.d * q as f32;
        }
    }
}

impl Dequantize for BlockNf4 {
    #[inline(always)]
    fn dequantize_into(&self, out: &mut [f32]) {
        let (lo, hi) = out[..64].split_at_mut(32);
        for l in 0..32 {
            lo[l] = self.absmax * NF4_LEVELS[(self.qs[l] & 15) as usize];
            hi[l] = self.absmax * NF4_LEVELS[(self.qs[l] >> 4) as usize];
        }
    }
}

#[inline(always)]
fn dequantize_blocks<B: Dequantize>(bytes: &[u8], out: &mut [f32]) {
    for (blk, o) in bytes
        .chunks_exact(B::BYTES)
        .zip(out.chunks_exact_mut(B::ELEMS))
    {
        B::read(blk).dequantize_into(o);
    }
}

per_isa!(fn dequantize_isa<B: Dequantize>(bytes: &[u8], out: &mut [f32]) = dequantize_blocks);

/// Checks that `bytes` is whole blocks of `format` and `out` holds exactly their weights.
pub(crate) fn check_lengths(format: QuantFormat, bytes: usize, out: usize) -> Result<()> {
    let i = format.info();
    if !bytes.is_multiple_of(i.block_bytes) {
        return Err(QuantError::NotWholeBlocks { format, bytes });
    }
    let want = bytes / i.block_bytes * i.block_elems;
    if out != want {
        return Err(QuantError::BufferSize {
            op: "dequantize",
            what: "output",
            expected: want,
            got: out,
        });
    }
    Ok(())
}

/// Expands whole blocks of `format` into f32 weights, on the level `isa`.
///
/// ```
/// use trueno_quant::{Isa, QuantFormat, dequantize_with};
/// // One Q8_0 block: d = 0.5 (f16 0x3800), quants 0, 1, 2, ...
/// let mut block = vec![0x00, 0x38];
/// block.extend((0..32).map(|q| q as u8));
/// let mut out = vec![0.0; 32];
/// dequantize_with(Isa::current()?, QuantFormat::Q8_0, &block, &mut out)?;
/// assert_eq!(out[3], 1.5);
/// # Ok::<(), trueno_quant::QuantError>(())
/// ```
pub fn dequantize_with(isa: Isa, format: QuantFormat, bytes: &[u8], out: &mut [f32]) -> Result<()> {
    check_lengths(format, bytes.len(), out.len())?;
    match format {
        QuantFormat::Q4_0 => dequantize_isa::<BlockQ4_0>(isa, bytes, out),
        QuantFormat::Q4_1 => dequantize_isa::<BlockQ4_1>(isa, bytes, out),
        QuantFormat::Q5_0 => dequantize_isa::<BlockQ5_0>(isa, bytes, out),
        QuantFormat::Q5_1 => dequantize_isa::<BlockQ5_1>(isa, bytes, out),
        QuantFormat::Q8_0 => dequantize_isa::<BlockQ8_0>(isa, bytes, out),
        QuantFormat::Q4K => dequantize_isa::<BlockQ4K>(isa, bytes, out),
        QuantFormat::Q5K => dequantize_isa::<BlockQ5K>(isa, bytes, out),
        QuantFormat::Q6K => dequantize_isa::<BlockQ6K>(isa, bytes, out),
        QuantFormat::Q8K => dequantize_isa::<BlockQ8K>(isa, bytes, out),
        QuantFormat::Nf4 => dequantize_isa::<BlockNf4>(isa, bytes, out),
    }
    Ok(())
}

/// [`dequantize_with`] on the process's chosen level ([`Isa::current`]).
pub fn dequantize(format: QuantFormat, bytes: &[u8], out: &mut [f32]) -> Result<()> {
    dequantize_with(Isa::current()?, format, bytes, out)
}

/// `dequantize_<format>_to_f32(bytes, out)` for each format, as the GGML names read.
macro_rules! named_dequantize {
    ($($name:ident => $fmt:ident),*) => {$(
        #[doc = concat!("[`dequantize`] for `", stringify!($fmt), "` blocks.")]
        pub fn $name(bytes: &[u8], out: &mut [f32]) -> Result<()> {
            dequantize(QuantFormat::$fmt, bytes, out)
        }
    )*};
}

named_dequantize!(
    dequantize_q4_0_to_f32 => Q4_0,
    dequantize_q4_1_to_f32 => Q4_1,
    dequantize_q5_0_to_f32 => Q5_0,
    dequantize_q5_1_to_f32 => Q5_1,
    dequantize_q8_0_to_f32 => Q8_0,
    dequantize_q4_k_to_f32 => Q4K,
    dequantize_q5_k_to_f32 => Q5K,
    dequantize_q6_k_to_f32 => Q6K,
    dequantize_q8_k_to_f32 => Q8K,
    dequantize_nf4_to_f32 => Nf4
);
