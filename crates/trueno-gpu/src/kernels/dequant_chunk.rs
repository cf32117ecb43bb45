//! One weight row's 64-value chunk, dequantized by [`row_threads`] threads: the unit
//! of work of the fused quantized GEMM's producers ([`super::qgemm_wgmma`]), which fill
//! a stage (64 values of k for 128 rows of `W`) at a time.
//!
//! Thread `j` of a row takes chunk `c` (0 to 3) of the 256 values at `grp` (a K-quant
//! super-block, or eight Q8_0 / Q4_0 blocks) as runs of four or eight consecutive values
//! (one 8- or 16-byte store of bf16 each). The K-quants take two threads a row, 32
//! values each, which keeps their scale unpacking to a fraction of a value's cost; the
//! 2-byte aligned formats (Q8_0, Q4_0, Q6_K), read in 16-bit loads, take eight, so a
//! warp's load touches four rows rather than eight (the loads' L1 passes limited them).
//!
//! Each value costs a byte permute and one fused multiply-add: the quant byte `u` is
//! placed under the exponent of 2^23, at bit 16 (or bit 8 for Q8_0's full bytes), so the
//! float is `2^23 + u 2^16`, and `scale 2^-16 * that - (scale 2^7 + offset)` is
//! `scale u - offset`. The product is exact; the roundings are the FMA's and the sum
//! `scale 2^7 + offset`'s (2^-24 of it: 2^-17 of a scale step for the K-quants, none for
//! Q8_0's `d (2^15 + 128)`), both far below the bf16 rounding that follows.

use super::dequant::word16;
use super::helpers::elem_addr;
use super::qgemv::{QuantFormat, f16_bits};
use super::qgemv_k::{chunk_scales, half_of, layout, quant_bytes, scale_min};
use super::qgemv_q6k::{self, quant_bytes6, scaled_d};
use crate::ptx::{F32, KernelBuilder, Reg, Rounding, Space, U16, U32, U64};

/// Threads per row's chunk for format `f` (2 or 8).
pub(super) fn row_threads(f: QuantFormat) -> u32 {
    match f {
        QuantFormat::Q4K | QuantFormat::Q5K => 2,
        QuantFormat::Q6K | QuantFormat::Q8_0 | QuantFormat::Q4_0 => 8,
    }
}

/// Consecutive values (four or eight) from chunk position `at` (a multiple of their
/// count).
pub(super) struct Run {
    pub at: Reg<U32>,
    pub v: Vec<Reg<F32>>,
}

/// Thread `j`'s runs of chunk `c` of the 256 values at `grp`.
pub(super) fn chunk_runs(
    b: &mut KernelBuilder,
    f: QuantFormat,
    grp: Reg<U64>,
    c: Reg<U32>,
    j: Reg<U32>,
) -> Vec<Run> {
    match f {
        QuantFormat::Q4K | QuantFormat::Q5K => k4_runs(b, grp, c, j, f == QuantFormat::Q5K),
        QuantFormat::Q6K => q6k_runs(b, grp, c, j),
        QuantFormat::Q8_0 | QuantFormat::Q4_0 => block32_runs(b, grp, c, j, f),
    }
}

/// `scale * u - offset` for the bytes `u` of `words` (each under 128 when `at_byte` is
/// 2: nibbles and 6-bit quants; `at_byte` 1 takes full bytes).
fn affine_bytes(
    b: &mut KernelBuilder,
    words: &[Reg<U32>],
    at_byte: u32,
    scale: Reg<F32>,
    offset: Reg<F32>,
) -> Vec<Reg<F32>> {
    let unit = 2f32.powi(-8 * at_byte as i32);
    let scaled = b.mul(scale, unit);
    // 2^23 * unit = 2^(23 - 8 at_byte): the magic's share of the product.
    let magic = b.mul(scale, 2f32.powi(23 - 8 * at_byte as i32));
    let magic = b.add(magic, offset);
    let neg = b.neg(magic);
    // prmt picks output bytes (low first) from {words byte 0..3, magic bytes 4..7}:
    // zeros (byte 4 of 0x4B00_0000) except the quant byte at `at_byte` and 0x4B on top.
    (0..4 * words.len())
        .map(|k| {
            let w = words[k / 4];
            let src = (k % 4) as u32;
            let sel = (0..4u32).fold(0u32, |sel, pos| {
                let pick = match pos {
                    3 => 7,
                    p if p == at_byte => src,
                    _ => 4,
                };
                sel | (pick << (4 * pos))
            });
            let bits = b.prmt(w, 0x4B00_0000u32, sel);
            let x = b.bitcast32::<F32, U32>(bits);
            b.fma(scaled, x, neg)
        })
        .collect()
}

/// Two runs at `at0` and 32 on.
fn runs_32_apart(b: &mut KernelBuilder, at0: Reg<U32>, v: [Vec<Reg<F32>>; 2]) -> Vec<Run> {
    let at1 = b.add(at0, 32u32);
    let [v0, v1] = v;
    vec![Run { at: at0, v: v0 }, Run { at: at1, v: v1 }]
}

/// Q4_K / Q5_K: thread `j` (of two) takes quant bytes `32c + 16j..+16`, whose low
/// nibbles are elements `16j..` of sub-block `2c` (chunk positions `16j..`) and high
/// nibbles those of `2c + 1` (`32 + 16j..`); `d * sc * q - dmin * m` each. Q5_K's fifth
/// bits: bits `2c`, `2c + 1` of `qh` bytes `16j..+16`. Every load is one 16-byte load.
fn k4_runs(
    b: &mut KernelBuilder,
    blk: Reg<U64>,
    c: Reg<U32>,
    j: Reg<U32>,
    five_bit: bool,
) -> Vec<Run> {
    let (_, qs_at) = layout(five_bit);
    let sp = chunk_scales(b, c);
    let head = b.ld_vec::<U32, U64, 4>(Space::Global, blk, 0);
    let e0 = b.shl(j, 4u32);
    let q_off = b.shl(c, 5u32);
    let q_off = b.add(q_off, e0);
    let qp = elem_addr(b, blk, q_off, 1);
    let q = b.ld_vec::<U32, U64, 4>(Space::Global, qp, i64::from(qs_at));
    let qh = five_bit.then(|| {
        let hp = elem_addr(b, blk, e0, 1);
        b.ld_vec::<U32, U64, 4>(Space::Global, hp, 16)
    });
    let halves = [0, 1, 2, 3].map(|w| quant_bytes(b, q[w], qh.map(|qh| (qh[w], sp.j0))));
    let lo = halves.map(|h| h.0);
    let hi = halves.map(|h| h.1);
    let s = [head[1], head[2], head[3]];
    let d = half_of(b, head[0], false);
    let dmin = half_of(b, head[0], true);
    let half = |b: &mut KernelBuilder, bytes: [Reg<U32>; 4], shift: Reg<U32>| {
        let (sc, m) = scale_min(b, s, sp.low_pack, shift);
        let sc = b.cvt::<F32, U32>(sc, Some(Rounding::Rn));
        let m = b.cvt::<F32, U32>(m, Some(Rounding::Rn));
        let scale = b.mul(d, sc);
        let offset = b.mul(dmin, m);
        affine_bytes(b, &bytes, 2, scale, offset)
    };
    let v = [half(b, lo, sp.shift0), half(b, hi, sp.shift1)];
    // Sixteen values from 16j, sixteen from 32 + 16j: four runs of eight.
    let mut runs = Vec::new();
    for (v, first) in v.into_iter().zip([0u32, 32]) {
        for (k, run) in v.chunks(8).enumerate() {
            let at = b.add(e0, first + 8 * k as u32);
            runs.push(Run {
                at,
                v: run.to_vec(),
            });
        }
    }
    runs
}

/// Q6_K: chunk `c` is half `h = c / 2`, quarters `2p` and `2p + 1` (`p = c % 2`); thread
/// `j` (of eight) takes elements `4j..+4` of each: nibble `p` of `ql` bytes `64h + 4j..`
/// and `64h + 32 + 4j..`, bits `4p` (and `4p + 2`) of `qh` bytes `32h + 4j..`; `d * sc *
/// (q - 32)` with scales `4c + j / 4` and `4c + 2 + j / 4`.
fn q6k_runs(b: &mut KernelBuilder, blk: Reg<U64>, c: Reg<U32>, j: Reg<U32>) -> Vec<Run> {
    let h = b.shr(c, 1u32);
    let p = b.and(c, 1u32);
    let e0 = b.shl(j, 2u32);
    let ql = b.mad(h, 64u32, e0);
    let qlp = elem_addr(b, blk, ql, 1);
    let ql0 = word16(b, qlp, 0);
    let ql1 = word16(b, qlp, 32);
    let qh = b.mad(h, 32u32, e0);
    let qhp = elem_addr(b, blk, qh, 1);
    let qh = word16(b, qhp, 128);
    let sc = b.mad(c, 4u32, 192u32);
    let scp = elem_addr(b, blk, sc, 1);
    let sel8 = b.shr(j, 2u32);
    let sel8 = b.shl(sel8, 3u32);
    let d = qgemv_q6k::block_d(b, blk);
    let nib = b.shl(p, 2u32);
    let quarter = |b: &mut KernelBuilder, ql: Reg<U32>, up: u32, sc_off: i64| {
        let q = quant_bytes6(b, ql, nib, (qh, nib, up));
        let scale = scaled_d(b, d, (scp, sc_off), sel8);
        let offset = b.mul(scale, 32.0f32);
        affine_bytes(b, &[q], 2, scale, offset)
    };
    let v = [quarter(b, ql0, 0, 0), quarter(b, ql1, 2, 2)];
    runs_32_apart(b, e0, v)
}

/// Q8_0 / Q4_0: thread `j` (of eight) takes block `2c + j / 4` of the eight at `grp`,
/// part `i = j % 4` of it: Q8_0 quants `8i..+8` (`d * q`, one run at chunk position
/// `32 (j / 4) + 8i`); Q4_0 quant bytes `4i..+4`, whose low nibbles are elements `4i..`
/// and high ones `16 + 4i..` (`d * (q - 8)`).
fn block32_runs(
    b: &mut KernelBuilder,
    grp: Reg<U64>,
    c: Reg<U32>,
    j: Reg<U32>,
    f: QuantFormat,
) -> Vec<Run> {
    let part = b.and(j, 3u32);
    let half = b.shr(j, 2u32);
    let blk = b.mad(c, 2u32, half);
    let bp = elem_addr(b, grp, blk, f.block_bytes() as u32);
    let d = b.ld::<U16, U64>(Space::Global, bp, 0);
    let d = f16_bits(b, d);
    let base = b.shl(half, 5u32);
    if f == QuantFormat::Q8_0 {
        let qp = elem_addr(b, bp, part, 8);
        let q = [word16(b, qp, 2), word16(b, qp, 6)];
        // Signed bytes made unsigned (+128), the 128 taken back in the offset.
        let q = q.map(|w| b.xor(w, 0x8080_8080u32));
        let offset = b.mul(d, 128.0f32);
        let v = affine_bytes(b, &q, 1, d, offset);
        let at = b.mad(part, 8u32, base);
        vec![Run { at, v }]
    } else {
        let qp = elem_addr(b, bp, part, 4);
        let q = word16(b, qp, 2);
        let lo = b.and(q, 0x0F0F_0F0Fu32);
        let hi = b.shr(q, 4u32);
        let hi = b.and(hi, 0x0F0F_0F0Fu32);
        let offset = b.mul(d, 8.0f32);
        let v = [lo, hi].map(|w| affine_bytes(b, &[w], 2, d, offset));
        let at0 = b.mad(part, 4u32, base);
        let at1 = b.add(at0, 16u32);
        let [v0, v1] = v;
        vec![Run { at: at0, v: v0 }, Run { at: at1, v: v1 }]
    }
}
