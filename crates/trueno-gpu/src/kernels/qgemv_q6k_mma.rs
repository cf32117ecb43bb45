//! Q6_K weights against a batch of Q8_K activation vectors on the integer tensor cores
//! (`mma.sync.m16n8k16.s8`), one product per group of 16 weights (the span of one of
//! Q6_K's signed 8-bit scales), on the staged frame of qgemv_mma_staged.rs (its 210-byte
//! blocks are only 2-byte aligned).
//!
//! Lane `4g + t` reads, for rows `g` and `g + 8`, bytes `4t..4t + 4` of each 16-byte run
//! of `ql` and `qh` (two words and a byte permute; the row's offset sets the permute),
//! and builds group `q`'s quants `(ql nibble | qh pair << 4) - 32` as signed bytes; each
//! group's `P = A B` is exact in s32, scaled by the rows' scales (a sign-extending byte
//! permute each) into the super-block's integer sum, then `d * isum` in f32.
//!
//! Group `q` of a super-block is elements `16q..16q + 16`: half `h = q / 8`, quarter `k =
//! (q / 2) % 4`, run `o = q % 2`; its low four bits are the low (`k < 2`) or high nibbles
//! of `ql[64h + 32 (k % 2) + 16o..]`, bits 4-5 bits `2k, 2k + 1` of `qh[32h + 16o..]`.

use super::qgemv::f16_bits;
use super::qgemv_mma_staged::{FragmentReads, Reads, StagedStep};
use super::qgemv_q6k::BLOCK_BYTES;
use crate::ptx::{F32, KernelBuilder, Reg, Rounding, S32, Space, U16, U32};

/// The Q6_K step.
pub(super) struct Q6kStep;

/// Per row: the byte permute that lines its pieces up, the sign-extending ones that take
/// scale `4i + s` from the pair of words `i, i + 1` (each `s`), and the shift of `d` in
/// its word (all from the row's offset).
pub(super) struct Q6kRow {
    line_up: Reg<U32>,
    scale_sel: [Reg<U32>; 4],
    d_shift: Reg<U32>,
}

impl StagedStep for Q6kStep {
    type Lane = [Q6kRow; 2];
    const SPAN: u32 = BLOCK_BYTES;
    const READS: FragmentReads = FragmentReads::Words;

    fn lane(&self, b: &mut KernelBuilder, r: &Reads) -> [Q6kRow; 2] {
        r.rows.each_ref().map(|row| {
            // o = 0: a piece is the first word of its pair; o = 2: bytes 2..6.
            let shift = b.mul(row.o, 0x1111u32);
            // Scale byte s + o of the pair, its sign in the three bytes above.
            let scale_sel = std::array::from_fn(|s| b.add(shift, 0x8880 + 0x1111 * s as u32));
            Q6kRow {
                line_up: b.add(shift, 0x3210u32),
                scale_sel,
                d_shift: b.shl(row.o, 3u32),
            }
        })
    }

    /// Runs are read per half and run, just before the four groups that share them (the
    /// register estimate then follows ptxas's, which reads shared memory where it is
    /// used).
    fn products(
        &self,
        b: &mut KernelBuilder,
        stage: Reg<U32>,
        r: &Reads,
        lane: &[Q6kRow; 2],
    ) -> Vec<[Reg<F32>; 4]> {
        let t4 = b.shl(r.t, 2u32);
        // Per row: the words holding its scales (bytes 192..208 from `-o`) and d
        // (208..210), d as f32, and where its pieces are.
        let rows: [_; 2] = std::array::from_fn(|k| {
            let at = b.add(stage, r.rows[k].at);
            let words: [Reg<U32>; 5] =
                std::array::from_fn(|i| b.ld::<U32, U32>(Space::Shared, at, 192 + 4 * i as i64));
            let d = b.shr(words[4], lane[k].d_shift);
            let d = b.cvt::<U16, U32>(d, None);
            (b.add(at, t4), words, f16_bits(b, d))
        });
        // Run `j`'s piece of each row, lined up.
        let piece = |b: &mut KernelBuilder, j: usize| {
            [0, 1].map(|k| {
                let (mine, _, _) = rows[k];
                let lo = b.ld::<U32, U32>(Space::Shared, mine, 16 * j as i64);
                let hi = b.ld::<U32, U32>(Space::Shared, mine, 16 * j as i64 + 4);
                b.prmt(lo, hi, lane[k].line_up)
            })
        };
        let act = b.add(stage, r.act);
        let act = b.add(act, t4);
        let zero = || [0i32; 4];
        let mut isum: Vec<[Reg<S32>; 4]> = (0..r.tiles).map(|_| zero().map(|v| b.mov(v))).collect();
        for (h, o) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
            let ql = [0, 1].map(|kk| piece(b, 4 * h + 2 * kk + o));
            let qh = piece(b, 8 + 2 * h + o);
            for k in 0..4 {
                let q = 8 * h + 2 * k + o;
                let a = [0, 1].map(|row| group_quants(b, [ql[0][row], ql[1][row]], qh[row], k));
                let (i, s) = (q / 4, q % 4);
                let sc = [0, 1].map(|row| {
                    let (_, w, _) = &rows[row];
                    let v = b.prmt(w[i], w[i + 1], lane[row].scale_sel[s]);
                    b.bitcast32::<S32, U32>(v)
                });
                for (n, isum) in isum.iter_mut().enumerate() {
                    let at = 16 * q as i64 + i64::from(Self::READS.tile_bytes()) * n as i64;
                    let x = b.ld::<U32, U32>(Space::Shared, act, at);
                    let c0 = zero().map(|v| b.mov(v));
                    let p = b.mma_m16n8k16_s8(a, x, c0);
                    for (j, s) in isum.iter_mut().enumerate() {
                        *s = b.mad(sc[j / 2], p[j], *s);
                    }
                }
            }
        }
        // d * isum, rows by d.
        isum.iter()
            .map(|isum| {
                std::array::from_fn(|j| {
                    let is = b.cvt::<F32, S32>(isum[j], Some(Rounding::Rn));
                    b.mul(rows[j / 2].2, is)
                })
            })
            .collect()
    }
}

/// Quarter `k`'s quants for one row as signed bytes `q - 32`, from the row's lined-up
/// pieces of the `ql` runs of quarters 0/2 and 1/3 and the `qh` run of one half and run.
fn group_quants(b: &mut KernelBuilder, ql: [Reg<U32>; 2], qh: Reg<U32>, k: usize) -> Reg<U32> {
    let ql = ql[k % 2];
    let low = if k >= 2 { b.shr(ql, 4u32) } else { ql };
    let low = b.and(low, 0x0F0F_0F0Fu32);
    // Bits 2k, 2k + 1 of each qh byte to bits 4, 5.
    let high = match k {
        0..=1 => b.shl(qh, 4 - 2 * k as u32),
        2 => qh,
        _ => b.shr(qh, 2u32),
    };
    let high = b.and(high, 0x3030_3030u32);
    let v = b.or(low, high);
    // v in 0..64 a byte: (v + 96) ^ 128 is v - 32 as a signed byte, with no carry out of
    // any byte.
    let v = b.add(v, 0x6060_6060u32);
    b.xor(v, 0x8080_8080u32)
}
