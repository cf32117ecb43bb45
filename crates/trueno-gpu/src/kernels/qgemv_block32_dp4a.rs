//! The Q8_0 / Q4_0 lane of the integer matrix-vector products (frame, loop and
//! reduction: qgemv_dp4a.rs). The frame's "super-block" is eight 32-weight blocks (272
//! or 144 bytes, so 256 weights, as a Q8_K activation block), and lane `p` of its eight
//! takes block `p`: its 32 weights against the activation quants `32p..32p + 32`.
//!
//! A block is 34 (Q8_0) or 18 (Q4_0) bytes, 2 mod 4, so odd blocks start 2 bytes past a
//! word boundary. Each lane loads whole aligned 32-bit words from the boundary at or
//! before its block (9 for Q8_0, 5 for Q4_0; an even block's last word holds 2 bytes of
//! the next block, inside the group) and lines the quants up with one byte permute per
//! word whose selector is the lane's own (2 bytes on for an even block, 4 for an odd
//! one): no branch, every lane the same instructions.
//!
//! Q8_0: `d * dx * sum(q a)`, `dp4a` on signed bytes. Q4_0: byte `j`'s low nibble is
//! weight `j`, its high one weight `j + 16`, `w = d * (q - 8)`: `d * dx * (sum(q a) - 8 *
//! sum(a))`, the sum of the activations from Q8_K's two sums of 16 for the block.

use super::helpers::elem_addr;
use super::qgemv::f16_bits;
use super::qgemv_dp4a::{ActLoads, ActPtrs, BLOCKS_PER_STEP, Frame, LaneStep, UNROLL};
use crate::ptx::{F32, KernelBuilder, Reg, Rounding, S32, Space, U16, U32, U64};

/// A Q8_0 or Q4_0 block: an f16 scale, then 32 or 16 bytes of quants.
const fn block_bytes(four_bit: bool) -> u32 {
    if four_bit { 18 } else { 34 }
}

/// Bytes of the frame's super-block: eight blocks.
pub(super) const fn group_bytes(four_bit: bool) -> u32 {
    8 * block_bytes(four_bit)
}

/// The lane's weight pointer (the word boundary at or before its block, in super-block
/// `g`, then `g + 4`, ...), its byte-permute selector and the scale's bit offset in the
/// first word.
pub(super) struct Block32Lane {
    w: Reg<U64>,
    sel: Reg<U32>,
    d_shift: Reg<U32>,
    act: ActPtrs,
    four_bit: bool,
}

/// A step's weights unpacked: the quant words, in weight order (Q4_0: the low nibbles'
/// four words, then the high nibbles'), and the block's scale.
pub(super) struct Block32Unpacked {
    quants: Vec<Reg<U32>>,
    d: Reg<F32>,
}

impl Block32Lane {
    /// The lane of a Q8_0 (`four_bit` false) or Q4_0 kernel.
    pub(super) fn new(b: &mut KernelBuilder, fr: &Frame, four_bit: bool) -> Block32Lane {
        let odd = b.and(fr.p, 1u32);
        // Block p starts at 34p or 18p: 2 bytes past a word boundary when p is odd.
        let at = b.mul(fr.p, block_bytes(four_bit));
        let skew = b.shl(odd, 1u32);
        let at = b.sub(at, skew);
        // The quants start 2 bytes into the first word (even) or at the second (odd).
        let sel = b.mad(odd, 0x2222u32, 0x5432u32);
        let d_shift = b.shl(odd, 4u32);
        Block32Lane {
            w: elem_addr(b, fr.blk, at, 1),
            sel,
            d_shift,
            act: ActPtrs {
                a: elem_addr(b, fr.act, fr.p, 32),
                d: fr.d,
                sums: elem_addr(b, fr.sums, fr.p, 8),
                second_quad: 16,
                second_sum: 4,
            },
            four_bit,
        }
    }

    /// 32-bit words a lane loads per block.
    fn words(&self) -> usize {
        block_bytes(self.four_bit) as usize / 4 + 1
    }

    fn step_bytes(&self) -> i64 {
        i64::from(BLOCKS_PER_STEP * group_bytes(self.four_bit))
    }
}

impl LaneStep for Block32Lane {
    type Weights = Vec<Reg<U32>>;
    type Unpacked = Block32Unpacked;

    fn act(&self) -> &ActPtrs {
        &self.act
    }

    fn load(&self, b: &mut KernelBuilder, s: i64) -> Vec<Reg<U32>> {
        let off = s * self.step_bytes();
        (0..self.words() as i64)
            .map(|i| b.ld::<U32, U64>(Space::Global, self.w, off + 4 * i))
            .collect()
    }

    fn unpack(&self, b: &mut KernelBuilder, w: &Vec<Reg<U32>>) -> Block32Unpacked {
        let d = b.shr(w[0], self.d_shift);
        let d = b.cvt::<U16, U32>(d, None);
        let d = f16_bits(b, d);
        let lined: Vec<Reg<U32>> = w
            .windows(2)
            .map(|pair| b.prmt(pair[0], pair[1], self.sel))
            .collect();
        Block32Unpacked { quants: lined, d }
    }

    /// `dx * d * sum(q a)` (Q4_0: less `8 sum(a)`), the sum exact in 32 bits.
    fn part(&self, b: &mut KernelBuilder, w: &Block32Unpacked, a: &ActLoads) -> Reg<F32> {
        let mut dot = b.mov::<S32>(0i32);
        if self.four_bit {
            // Each word's low nibbles are weights 4i.., its high ones 16 + 4i...
            for (i, &q) in w.quants.iter().enumerate() {
                let lo = b.and(q, 0x0F0F_0F0Fu32);
                let hi = b.shr(q, 4u32);
                let hi = b.and(hi, 0x0F0F_0F0Fu32);
                dot = b.dp4a(lo, a.a[0][i], dot, false, true);
                dot = b.dp4a(hi, a.a[1][i], dot, false, true);
            }
        } else {
            for (i, &q) in w.quants.iter().enumerate() {
                dot = b.dp4a(q, a.a[i / 4][i % 4], dot, true, true);
            }
        }
        if self.four_bit {
            // |dot| <= 32 * 15 * 128, |8 sum(a)| <= 8 * 32 * 128: exact, and as a float.
            dot = b.mad(a.bs[0], -8i32, dot);
            dot = b.mad(a.bs[1], -8i32, dot);
        }
        let dot = b.cvt::<F32, S32>(dot, Some(Rounding::Rn));
        let scale = b.mul(a.dx, w.d);
        b.mul(scale, dot)
    }

    fn advance(&self, b: &mut KernelBuilder, steps: u32) {
        let n = b.add(self.w, steps as u64 * self.step_bytes() as u64);
        b.assign(self.w, n);
    }

    /// Q8_0: four steps. A step's loads are nine 4-byte words, fewer bytes in flight
    /// than the K-quants' 16-byte loads; with four steps' loads first the product ran
    /// 1.02-1.08x at three LLM shapes, the same at 32000x4096 (H100, H200). Q4_0 keeps
    /// two (0.98-1.04x with four).
    fn unroll(&self) -> u32 {
        if self.four_bit { UNROLL } else { 4 }
    }
}
