//! Integer dot products of weight blocks with 8-bit activation blocks, as GGML computes
//! them for speed: the activations are quantized once per vector (Q8_0 for the one-scale
//! formats, Q8_K for the K-quants), each block's products are summed exactly in i32, and
//! only the per-block (or per-sub-block) scales are applied in f32.

use crate::blocks::*;
use crate::dequant::{q5, scale_min};

/// A weight block with an integer dot product against activation blocks `A`.
pub(crate) trait IntDot: Block {
    /// The activation block type (`BlockQ8_0` or `BlockQ8K`) of the same length.
    type Act: Block;
    /// `sum_l w[l] * a[l]`, in f32 from exact integer partial sums.
    fn dot_q8(&self, a: &Self::Act) -> f32;
}

/// `sum_l q[l] * a[l]` over 32 lanes, exactly.
#[inline(always)]
fn idot32(q: &[i8; 32], a: &[i8; 32]) -> i32 {
    let mut s = 0i32;
    for l in 0..32 {
        s += q[l] as i32 * a[l] as i32;
    }
    s
}

/// Nibble quants `l` (low) and `l + 16` (high) of a 32-weight block, minus `offset`
/// (branch-free, so it vectorizes on every ISA, NEON and SIMD128 included).
#[inline(always)]
fn nibbles32(qs: &[u8; 16], offset: i8) -> [i8; 32] {
    let mut out = [0i8; 32];
    for l in 0..16 {
        out[l] = (qs[l] & 15) as i8 - offset;
        out[l + 16] = (qs[l] >> 4) as i8 - offset;
    }
    out
}

#[inline(always)]
fn five_bit32(qs: &[u8; 16], qh: [u8; 4], offset: i8) -> [i8; 32] {
    q5(qs, qh).map(|q| q as i8 - offset)
}

fn sum32(a: &[i8; 32]) -> i32 {
    a.iter().map(|&v| v as i32).sum()
}

impl IntDot for BlockQ4_0 {
    type Act = BlockQ8_0;
    #[inline(always)]
    fn dot_q8(&self, a: &BlockQ8_0) -> f32 {
        let s = idot32(&nibbles32(&self.qs, 8), &a.qs);
        self.d.to_f32() * a.d.to_f32() * s as f32
    }
}

impl IntDot for BlockQ4_1 {
    type Act = BlockQ8_0;
    #[inline(always)]
    fn dot_q8(&self, a: &BlockQ8_0) -> f32 {
        let s = idot32(&nibbles32(&self.qs, 0), &a.qs);
        let da = a.d.to_f32();
        self.d.to_f32() * da * s as f32 + self.m.to_f32() * da * sum32(&a.qs) as f32
    }
}

impl IntDot for BlockQ5_0 {
    type Act = BlockQ8_0;
    #[inline(always)]
    fn dot_q8(&self, a: &BlockQ8_0) -> f32 {
        let s = idot32(&five_bit32(&self.qs, self.qh, 16), &a.qs);
        self.d.to_f32() * a.d.to_f32() * s as f32
    }
}

impl IntDot for BlockQ5_1 {
    type Act = BlockQ8_0;
    #[inline(always)]
    fn dot_q8(&self, a: &BlockQ8_0) -> f32 {
        let s = idot32(&five_bit32(&self.qs, self.qh, 0), &a.qs);
        let da = a.d.to_f32();
        self.d.to_f32() * da * s as f32 + self.m.to_f32() * da * sum32(&a.qs) as f32
    }
}

impl IntDot for BlockQ8_0 {
    type Act = BlockQ8_0;
    #[inline(always)]
    fn dot_q8(&self, a: &BlockQ8_0) -> f32 {
        self.d.to_f32() * a.d.to_f32() * idot32(&self.qs, &a.qs) as f32
    }
}

/// The shared part of Q4_K and Q5_K: eight sub-block sums of `q * a`, scaled by their
/// 6-bit scales, minus the mins times the activations' sums (from Q8_K's `bsums`).
#[inline(always)]
fn dot_affine_k(d: f32, dmin: f32, scales: &[u8; 12], sums: [i32; 8], a: &BlockQ8K) -> f32 {
    let (mut isum, mut msum) = (0i32, 0i32);
    for (j, &s) in sums.iter().enumerate() {
        let (sc, mn) = scale_min(j, scales);
        isum += sc as i32 * s;
        msum += mn as i32 * (a.bsums[2 * j] as i32 + a.bsums[2 * j + 1] as i32);
    }
    a.d * d * isum as f32 - a.d * dmin * msum as f32
}

/// Q4_K and Q5_K sub-block sums of `q * a`; `hbit(j, l)` is the fifth bit (0 for Q4_K),
/// as in `dequant::dequantize_k`.
#[inline(always)]
fn affine_k_sums(qs: &[u8; 128], hbit: impl Fn(usize, usize) -> u8, a: &BlockQ8K) -> [i32; 8] {
    let mut sums = [0i32; 8];
    for (j, s) in sums.iter_mut().enumerate() {
        let (c, shift) = (j / 2, 4 * (j % 2));
        for l in 0..32 {
            let q = ((qs[32 * c + l] >> shift) & 15) | hbit(j, l);
            *s += q as i32 * a.qs[32 * j + l] as i32;
        }
    }
    sums
}

impl IntDot for BlockQ4K {
    type Act = BlockQ8K;
    #[inline(always)]
    fn dot_q8(&self, a: &BlockQ8K) -> f32 {
        let sums = affine_k_sums(&self.qs, |_, _| 0, a);
        dot_affine_k(self.d.to_f32(), self.dmin.to_f32(), &self.scales, sums, a)
    }
}

impl IntDot for BlockQ5K {
    type Act = BlockQ8K;
    #[inline(always)]
    fn dot_q8(&self, a: &BlockQ8K) -> f32 {
        let qh = &self.qh;
        let sums = affine_k_sums(&self.qs, |j, l| ((qh[l] >> j) & 1) << 4, a);
        dot_affine_k(self.d.to_f32(), self.dmin.to_f32(), &self.scales, sums, a)
    }
}

/// Quant `l` of quarter `k` of a Q6_K half (`ql` 64 bytes, `qh` 32), offset removed.
#[inline(always)]
fn q6(ql: &[u8], qh: &[u8], k: usize, l: usize) -> i32 {
    let low = if k.is_multiple_of(2) {
        ql[l]
    } else {
        ql[l + 32]
    };
    let low = if k < 2 { low & 15 } else { low >> 4 };
    (low | ((qh[l] >> (2 * k)) & 3) << 4) as i32 - 32
}

impl IntDot for BlockQ6K {
    type Act = BlockQ8K;
    #[inline(always)]
    fn dot_q8(&self, a: &BlockQ8K) -> f32 {
        let mut isum = 0i32;
        for h in 0..2 {
            let (ql, qh) = (&self.ql[64 * h..64 * h + 64], &self.qh[32 * h..32 * h + 32]);
            let act = &a.qs[128 * h..128 * h + 128];
            // Four quarters of 32 weights; each quarter has two 16-weight scales.
            for k in 0..4 {
                for g in 0..2 {
                    let mut s = 0i32;
                    for l in 16 * g..16 * g + 16 {
                        s += q6(ql, qh, k, l) * act[32 * k + l] as i32;
                    }
                    isum += self.scales[8 * h + 2 * k + g] as i32 * s;
                }
            }
        }
        self.d.to_f32() * a.d * isum as f32
    }
}

impl IntDot for BlockQ8K {
    type Act = BlockQ8K;
    #[inline(always)]
    fn dot_q8(&self, a: &BlockQ8K) -> f32 {
        let mut s = 0i32;
        for l in 0..QK_K {
            s += self.qs[l] as i32 * a.qs[l] as i32;
        }
        self.d * a.d * s as f32
    }
}
