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
//! unsigned for `dp4a`. A lane's 16 weight words come from 19 16-bit loads.

use super::qgemv::f16_bits;
use super::qgemv_dp4a::{ACT_STEP, BLOCKS_PER_STEP, Frame, LaneStep, add_u32};
use super::qgemv_k::quant_bytes;
use super::qgemv_q6k::{BLOCK_BYTES, signed_byte};
use crate::ptx::{F32, KernelBuilder, Pred, Reg, Rounding, S32, Space, U16, U32, U64};

/// The lane's pointers: into its super-block's `ql` (16 bytes), `qh` (16 bytes) and
/// scales (the 16-bit word holding quarter `k`'s; `k + 2`'s is four bytes on); the block
/// itself (for `d`, last); its activation quants (quarter `k`'s; `k + 2`'s 64 on), the
/// activation scale, and its sums of 16 (quarter `k + 2`'s four on).
pub(super) struct Q6kLane {
    ql: Reg<U64>,
    qh: Reg<U64>,
    sc: Reg<U64>,
    blk: Reg<U64>,
    a: Reg<U64>,
    d: Reg<U64>,
    sums: Reg<U64>,
    /// `2k`: quarter `k`'s bit pair in `qh` (`k + 2`'s is four bits up).
    pair: Reg<U32>,
    /// `8 * (p % 2)`: the scale's byte in its 16-bit word.
    sel8: Reg<U32>,
}

/// One step's loads.
pub(super) struct Q6kLoads {
    ql: [Reg<U16>; 8],
    qh: [Reg<U16>; 8],
    sc: [Reg<U16>; 2],
    d: Reg<U16>,
    a: [[Reg<U32>; 4]; 2],
    dx: Reg<F32>,
    bs: [Reg<S32>; 2],
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
            ql: add_u32(b, fr.blk, ql, 1),
            qh: add_u32(b, fr.blk, qh, 1),
            sc: add_u32(b, fr.blk, sc, 1),
            blk: fr.blk,
            a: add_u32(b, fr.act, a, 1),
            d: fr.d,
            sums: add_u32(b, fr.sums, s, 4),
            pair: k2,
            sel8: b.shl(odd, 3u32),
        }
    }
}

/// The 32-bit word of two 16-bit halves.
fn word(b: &mut KernelBuilder, lo: Reg<U16>, hi: Reg<U16>) -> Reg<U32> {
    let lo = b.cvt::<U32, U16>(lo, None);
    let hi = b.cvt::<U32, U16>(hi, None);
    b.prmt(lo, hi, 0x5410)
}

impl LaneStep for Q6kLane {
    type Loads = Q6kLoads;

    fn load(&self, b: &mut KernelBuilder, valid: Reg<Pred>, s: i64) -> Q6kLoads {
        let w_off = s * i64::from(BLOCKS_PER_STEP * BLOCK_BYTES);
        let [a_off, d_off, s_off] = ACT_STEP.map(|n| s * i64::from(BLOCKS_PER_STEP * n));
        let z16 = |b: &mut KernelBuilder| b.mov::<U16>(0u16);
        let l = Q6kLoads {
            ql: std::array::from_fn(|_| z16(b)),
            qh: std::array::from_fn(|_| z16(b)),
            sc: [z16(b), z16(b)],
            d: z16(b),
            a: [
                std::array::from_fn(|_| b.mov::<U32>(0u32)),
                std::array::from_fn(|_| b.mov::<U32>(0u32)),
            ],
            dx: b.mov::<F32>(0.0f32),
            bs: [b.mov::<S32>(0i32), b.mov::<S32>(0i32)],
        };
        b.predicated(valid, |b| {
            let ld16 = |b: &mut KernelBuilder, dst: Reg<U16>, p: Reg<U64>, off: i64| {
                let v = b.ld::<U16, U64>(Space::Global, p, w_off + off);
                b.assign(dst, v);
            };
            for (j, (&lo, &hi)) in l.ql.iter().zip(&l.qh).enumerate() {
                ld16(b, lo, self.ql, 2 * j as i64);
                ld16(b, hi, self.qh, 2 * j as i64);
            }
            for (q, &dst) in l.sc.iter().enumerate() {
                ld16(b, dst, self.sc, 4 * q as i64);
            }
            ld16(b, l.d, self.blk, 208);
            for (q, dst) in l.a.iter().enumerate() {
                let v = b.ld_vec::<U32, U64, 4>(Space::Global, self.a, a_off + 64 * q as i64);
                for (d, v) in dst.iter().zip(v) {
                    b.assign(*d, v);
                }
            }
            let dx = b.ld::<F32, U64>(Space::Global, self.d, d_off);
            b.assign(l.dx, dx);
            for (q, &dst) in l.bs.iter().enumerate() {
                let v = b.ld::<S32, U64>(Space::Global, self.sums, s_off + 16 * q as i64);
                b.assign(dst, v);
            }
        });
        l
    }

    /// `dx * d * sum_k sc_k * (sum q a - 32 * bsum_k)` over the lane's two quarters.
    fn part(&self, b: &mut KernelBuilder, l: &Q6kLoads) -> Reg<F32> {
        let pair_hi = b.add(self.pair, 4u32);
        let mut dots = [b.mov::<S32>(0i32), b.mov::<S32>(0i32)];
        for j in 0..4 {
            let low = word(b, l.ql[2 * j], l.ql[2 * j + 1]);
            let top = word(b, l.qh[2 * j], l.qh[2 * j + 1]);
            let (lo, hi) = quant_bytes(b, low, None);
            for (q, (nibbles, pair)) in [(lo, self.pair), (hi, pair_hi)].into_iter().enumerate() {
                let t = b.shr(top, pair);
                let t = b.and(t, 0x0303_0303u32);
                let t = b.shl(t, 4u32);
                let quants = b.or(nibbles, t);
                dots[q] = b.dp4a(quants, l.a[q][j], dots[q], false, true);
            }
        }
        let mut isum: Option<Reg<S32>> = None;
        for (q, &dot) in dots.iter().enumerate() {
            // Exact: |sum (q - 32) a| <= 16 * 32 * 128, a scale <= 128, two quarters.
            let offset = b.shl(l.bs[q], 5u32);
            let centred = b.sub(dot, offset);
            let sc = b.cvt::<U32, U16>(l.sc[q], None);
            let sc = signed_byte(b, sc, self.sel8);
            isum = Some(match isum {
                None => b.mul(sc, centred),
                Some(acc) => b.mad(sc, centred, acc),
            });
        }
        let isum = b.cvt::<F32, S32>(isum.expect("two quarters"), Some(Rounding::Rn));
        let d = f16_bits(b, l.d);
        let dxd = b.mul(l.dx, d);
        b.mul(dxd, isum)
    }

    /// One step (two measured slower on the H100: twice the registers, fewer warps).
    fn unroll(&self) -> u32 {
        1
    }

    fn advance(&self, b: &mut KernelBuilder, steps: u32) {
        let w = u64::from(steps * BLOCKS_PER_STEP * BLOCK_BYTES);
        let [a, d, s] = ACT_STEP.map(|n| u64::from(steps * BLOCKS_PER_STEP * n));
        for (r, step) in [
            (self.ql, w),
            (self.qh, w),
            (self.sc, w),
            (self.blk, w),
            (self.a, a),
            (self.d, d),
            (self.sums, s),
        ] {
            let n = b.add(r, step);
            b.assign(r, n);
        }
    }
}
