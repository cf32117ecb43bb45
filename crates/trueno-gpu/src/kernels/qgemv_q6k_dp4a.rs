//! The Q6_K lane of the integer matrix-vector products (frame, loop and reduction:
//! qgemv_dp4a.rs). A 210-byte super-block is 2 mod 4 bytes long, so every other one is
//! only 2-byte aligned: its bytes are read as 16-bit words and paired into 32-bit ones
//! (one byte permute each) for `dp4a`.
//!
//! Lane `p` of its super-block takes half `h = p / 4`, quarters `k = (p % 4) / 2` and
//! `k + 2`, and elements `l0 = 16 (p % 2)..l0 + 16` of each (element `128h + 32k + l`):
//! the low four bits from byte `64h + 32 (k % 2) + l` of `ql` — its low nibble for
//! quarter `k` (< 2), its high one for `k + 2`, so one load serves both — bits 4-5 from
//! byte `32h + l` of `qh` (bits `2k, 2k + 1` and `2k + 4, 2k + 5`), and one signed scale
//! per quarter, that of the group of 16 `8h + 2k + p % 2` (and `+ 4`): the group Q8_K's
//! sums of 16 cover, so `sum (q - 32) a = sum q a - 32 * bsum` with `q` in 0..64
//! unsigned for `dp4a`. A lane's eight weight words, two scales and `d` come from 19
//! 16-bit loads.

use super::helpers::{elem_addr, pair16};
use super::qgemv::f16_bits;
use super::qgemv_dp4a::{ActLoads, ActPtrs, BLOCKS_PER_STEP, Frame, LaneStep};
use super::qgemv_k::quant_bytes;
use super::qgemv_q6k::{BLOCK_BYTES, signed_byte};
use crate::ptx::{F32, KernelBuilder, Reg, Rounding, S32, Space, U16, U32, U64};

/// The lane's place in its super-block: byte offsets of its `ql` (16 bytes), `qh` (16
/// bytes) and scales (the 16-bit word holding quarter `k`'s; `k + 2`'s is four bytes
/// on), from the block pointer (also `d`'s, last: one running 64-bit pointer, as ptxas
/// keeps it); its activation quants (quarter `k`'s; `k + 2`'s 64 on), the activation
/// scale, and its sums of 16 (quarter `k + 2`'s four on).
pub(super) struct Q6kLane {
    ql: Reg<U32>,
    qh: Reg<U32>,
    sc: Reg<U32>,
    blk: Reg<U64>,
    act: ActPtrs,
    /// `2k`: quarter `k`'s bit pair in `qh` (`k + 2`'s is four bits up).
    pair: Reg<U32>,
    /// `8 * (p % 2)`: the scale's byte in its 16-bit word.
    sel8: Reg<U32>,
}

/// One step's weight loads: `ql` and `qh` as 32-bit words (paired at once, so the
/// 16-bit halves die young), the two scales' words and `d`.
pub(super) struct Q6kWeights {
    ql: [Reg<U32>; 4],
    qh: [Reg<U32>; 4],
    sc: [Reg<U16>; 2],
    d: Reg<U16>,
}

/// A step's weights unpacked: the quants (0..64) of quarters `k` and `k + 2` as bytes,
/// their signed scales, `d`.
pub(super) struct Q6kUnpacked {
    quants: [[Reg<U32>; 4]; 2],
    scales: [Reg<S32>; 2],
    d: Reg<F32>,
}

impl Q6kLane {
    pub(super) fn new(b: &mut KernelBuilder, fr: &Frame) -> Q6kLane {
        let h = b.shr(fr.p, 2u32);
        let i = b.and(fr.p, 3u32);
        let k = b.shr(i, 1u32);
        let odd = b.and(fr.p, 1u32);
        let l0 = b.shl(odd, 4u32);
        let ql = b.mad(h, 64u32, l0);
        let ql = b.mad(k, 32u32, ql);
        let qh = b.mad(h, 32u32, l0);
        let qh = b.add(qh, 128u32);
        let k2 = b.shl(k, 1u32);
        let sc = b.mad(h, 8u32, 192u32);
        let sc = b.add(sc, k2);
        let a = b.mad(h, 128u32, l0);
        let a = b.mad(k, 32u32, a);
        let s = b.mad(h, 8u32, odd);
        let s = b.add(s, k2);
        Q6kLane {
            ql,
            qh,
            sc,
            blk: fr.blk,
            act: ActPtrs {
                a: elem_addr(b, fr.act, a, 1),
                d: fr.d,
                sums: elem_addr(b, fr.sums, s, 4),
                second_quad: 64,
                second_sum: 16,
            },
            pair: k2,
            sel8: b.shl(odd, 3u32),
        }
    }
}

impl LaneStep for Q6kLane {
    type Weights = Q6kWeights;
    type Unpacked = Q6kUnpacked;

    fn act(&self) -> &ActPtrs {
        &self.act
    }

    fn load(&self, b: &mut KernelBuilder, s: i64) -> Q6kWeights {
        let w_off = s * i64::from(BLOCKS_PER_STEP * BLOCK_BYTES);
        let at = |b: &mut KernelBuilder, off: Reg<U32>| elem_addr(b, self.blk, off, 1);
        let (ql, qh, sc) = (at(b, self.ql), at(b, self.qh), at(b, self.sc));
        let ld16 = |b: &mut KernelBuilder, p: Reg<U64>, off: i64| {
            b.ld::<U16, U64>(Space::Global, p, w_off + off)
        };
        let word_at = |b: &mut KernelBuilder, p: Reg<U64>, j: i64| {
            let lo = ld16(b, p, 4 * j);
            let hi = ld16(b, p, 4 * j + 2);
            pair16(b, lo, hi)
        };
        Q6kWeights {
            ql: std::array::from_fn(|j| word_at(b, ql, j as i64)),
            qh: std::array::from_fn(|j| word_at(b, qh, j as i64)),
            sc: [ld16(b, sc, 0), ld16(b, sc, 4)],
            d: ld16(b, self.blk, 208),
        }
    }

    fn unpack(&self, b: &mut KernelBuilder, l: &Q6kWeights) -> Q6kUnpacked {
        let pair_hi = b.add(self.pair, 4u32);
        // Per word: quarter k's quants (low nibbles) and k + 2's (high ones), bits 4-5 in.
        let words: [[Reg<U32>; 2]; 4] = std::array::from_fn(|j| {
            let (lo, hi) = quant_bytes(b, l.ql[j], None);
            [(lo, self.pair), (hi, pair_hi)].map(|(nibbles, pair)| {
                let t = b.shr(l.qh[j], pair);
                let t = b.and(t, 0x0303_0303u32);
                let t = b.shl(t, 4u32);
                b.or(nibbles, t)
            })
        });
        let quants = [0, 1].map(|q| words.map(|w| w[q]));
        let scales = l.sc.map(|w| {
            let w = b.cvt::<U32, U16>(w, None);
            signed_byte(b, w, self.sel8)
        });
        Q6kUnpacked {
            quants,
            scales,
            d: f16_bits(b, l.d),
        }
    }

    /// `dx * d * sum_k sc_k * (sum q a - 32 * bsum_k)` over the lane's two quarters.
    fn part(&self, b: &mut KernelBuilder, w: &Q6kUnpacked, a: &ActLoads) -> Reg<F32> {
        let mut isum: Option<Reg<S32>> = None;
        for (q, quarter) in w.quants.iter().enumerate() {
            let mut dot = b.mov::<S32>(0i32);
            for (j, &quants) in quarter.iter().enumerate() {
                dot = b.dp4a(quants, a.a[q][j], dot, false, true);
            }
            // Exact: |sum (q - 32) a| <= 16 * 32 * 128, a scale <= 128, two quarters.
            let offset = b.shl(a.bs[q], 5u32);
            let centred = b.sub(dot, offset);
            isum = Some(match isum {
                None => b.mul(w.scales[q], centred),
                Some(acc) => b.mad(w.scales[q], centred, acc),
            });
        }
        let isum = b.cvt::<F32, S32>(isum.expect("two quarters"), Some(Rounding::Rn));
        let dxd = b.mul(a.dx, w.d);
        b.mul(dxd, isum)
    }

    fn advance(&self, b: &mut KernelBuilder, steps: u32) {
        let w = u64::from(steps * BLOCKS_PER_STEP * BLOCK_BYTES);
        let n = b.add(self.blk, w);
        b.assign(self.blk, n);
    }
}
