//! The Q6_K lane of the integer matrix-vector products (frame, loop and reduction:
//! qgemv_dp4a.rs). A 210-byte super-block is 2 mod 8 bytes long, so a block starts 0, 2,
//! 4 or 6 bytes past an 8-byte boundary, and a lane's two 16-byte runs of quants are read
//! one of two ways ([`Q6kRuns`]):
//! - the one-vector kernel: three aligned 8-byte loads around each run, the words lined
//!   up with a select and a byte permute each, whose controls are the lane's own (a step
//!   moves four blocks, 840 bytes, 0 mod 8, so the lane's misalignment never changes):
//!   nine loads a step where 16-bit loads took nineteen, which held the L1 at 89% of its
//!   throughput (Nsight Compute, 32000x4096) with DRAM at 56%; on the H100 (medians of
//!   seven runs) 1.15x faster at 32000x4096, 1.13x at 14336x4096, 1.04x at 4096x14336;
//! - the batched kernel: 16-bit loads paired into words. With four to eight vectors of
//!   long rows (4096x14336) the aligned loads were 1.25-1.35x slower (more bytes through
//!   the L1 beside eight vectors' activations, our reading), though 1.05-1.08x faster at
//!   32000x4096.
//!
//! Lane `p` of its super-block takes half `h = p / 4`, quarters `k = (p % 4) / 2` and
//! `k + 2`, and elements `l0 = 16 (p % 2)..l0 + 16` of each (element `128h + 32k + l`):
//! the low four bits from byte `64h + 32 (k % 2) + l` of `ql` — its low nibble for
//! quarter `k` (< 2), its high one for `k + 2`, so one load serves both — bits 4-5 from
//! byte `32h + l` of `qh` (bits `2k, 2k + 1` and `2k + 4, 2k + 5`), and one signed scale
//! per quarter, that of the group of 16 `8h + 2k + p % 2` (and `+ 4`): the group Q8_K's
//! sums of 16 cover, so `sum (q - 32) a = sum q a - 32 * bsum` with `q` in 0..64
//! unsigned for `dp4a`. The two scales and `d` are 16-bit loads either way.

use super::helpers::{elem_addr, pair16};
use super::qgemv::f16_bits;
use super::qgemv_dp4a::{ActLoads, ActPtrs, BLOCKS_PER_STEP, Frame, LaneStep};
use super::qgemv_k::quant_bytes;
use super::qgemv_q6k::{BLOCK_BYTES, signed_byte};
use crate::ptx::{Cmp, F32, KernelBuilder, Pred, Reg, Rounding, S32, Space, U16, U32, U64};

/// How a lane reads its two 16-byte runs of quants (see the module's doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Q6kRuns {
    /// Eight 16-bit loads a run, paired into four words.
    Halves,
    /// Three 8-byte loads from the 8-byte boundary at or before the run, lined up.
    AlignedPairs,
}

/// How [`Q6kRuns::AlignedPairs`] lines a run up from its six loaded words.
struct LineUp {
    /// `o >= 4` (the block `o` bytes past the boundary): the run's first word is the
    /// second loaded.
    skip_word: Reg<Pred>,
    /// The byte permute that takes a word `o % 4` bytes into a pair of words.
    shift: Reg<U32>,
}

/// The lane's place in its super-block: byte offsets of its `ql` (16 bytes) and `qh` (16
/// bytes) runs, its scales (the 16-bit word holding quarter `k`'s; `k + 2`'s is four bytes
/// on) and `d` (last), all from `base` (the block, or for aligned runs the 8-byte
/// boundary at or before it); its activation quants (quarter `k`'s; `k + 2`'s 64 on), the
/// activation scale, and its sums of 16 (quarter `k + 2`'s four on).
pub(super) struct Q6kLane {
    ql: Reg<U32>,
    qh: Reg<U32>,
    sc: Reg<U32>,
    /// `d`'s offset when aligned (for halves, the block's last two bytes).
    d: Option<Reg<U32>>,
    base: Reg<U64>,
    act: ActPtrs,
    /// `2k`: quarter `k`'s bit pair in `qh` (`k + 2`'s is four bits up).
    pair: Reg<U32>,
    /// `8 * (p % 2)`: the scale's byte in its 16-bit word.
    sel8: Reg<U32>,
    /// Present for [`Q6kRuns::AlignedPairs`].
    line_up: Option<LineUp>,
}

/// One step's weight loads: the words of the `ql` and `qh` runs (four paired from
/// halves, or the six 8-byte-aligned ones around the run), the two scales' words and `d`.
pub(super) struct Q6kWeights {
    ql: Vec<Reg<U32>>,
    qh: Vec<Reg<U32>>,
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
    pub(super) fn new(b: &mut KernelBuilder, fr: &Frame, runs: Q6kRuns) -> Q6kLane {
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
        let act = ActPtrs {
            a: elem_addr(b, fr.act, a, 1),
            d: fr.d,
            sums: elem_addr(b, fr.sums, s, 4),
            second_quad: 64,
            second_sum: 16,
        };
        let (pair, sel8) = (k2, b.shl(odd, 3u32));
        let d = BLOCK_BYTES - 2;
        if runs == Q6kRuns::Halves {
            let (d, base, line_up) = (None, fr.blk, None);
            return Q6kLane {
                ql,
                qh,
                sc,
                d,
                base,
                act,
                pair,
                sel8,
                line_up,
            };
        }
        // The block's misalignment `o` (0, 2, 4 or 6): the runs (16-byte multiples from
        // the block) share it; the scales and `d` are `o` bytes further from `base`.
        let lo = b.cvt::<U32, U64>(fr.blk, None);
        let o = b.and(lo, 7u32);
        let o64 = b.cvt::<U64, U32>(o, None);
        let o2 = b.and(o, 3u32);
        let line_up = LineUp {
            skip_word: b.setp::<U32>(Cmp::Ge, o, 4u32),
            shift: b.mad(o2, 0x1111u32, 0x3210u32),
        };
        Q6kLane {
            ql,
            qh,
            sc: b.add(sc, o),
            d: Some(b.add(o, d)),
            base: b.sub(fr.blk, o64),
            act,
            pair,
            sel8,
            line_up: Some(line_up),
        }
    }

    /// A run's words at `p`, step offset `w_off`, as [`Q6kWeights`] holds them.
    fn load_run(&self, b: &mut KernelBuilder, p: Reg<U64>, w_off: i64) -> Vec<Reg<U32>> {
        if self.line_up.is_some() {
            (0..3)
                .flat_map(|i| b.ld_vec::<U32, U64, 2>(Space::Global, p, w_off + 8 * i))
                .collect()
        } else {
            (0..4)
                .map(|j| {
                    let lo = b.ld::<U16, U64>(Space::Global, p, w_off + 4 * j);
                    let hi = b.ld::<U16, U64>(Space::Global, p, w_off + 4 * j + 2);
                    pair16(b, lo, hi)
                })
                .collect()
        }
    }

    /// A run's four words from what [`Self::load_run`] loaded.
    fn words(&self, b: &mut KernelBuilder, w: &[Reg<U32>]) -> [Reg<U32>; 4] {
        match &self.line_up {
            None => std::array::from_fn(|j| w[j]),
            Some(l) => {
                let v: [Reg<U32>; 5] = std::array::from_fn(|i| b.selp(w[i + 1], w[i], l.skip_word));
                std::array::from_fn(|j| b.prmt(v[j], v[j + 1], l.shift))
            }
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
        let at = |b: &mut KernelBuilder, off: Reg<U32>| elem_addr(b, self.base, off, 1);
        let (ql, qh, sc) = (at(b, self.ql), at(b, self.qh), at(b, self.sc));
        let ld16 = |b: &mut KernelBuilder, p: Reg<U64>, off: i64| {
            b.ld::<U16, U64>(Space::Global, p, w_off + off)
        };
        Q6kWeights {
            ql: self.load_run(b, ql, w_off),
            qh: self.load_run(b, qh, w_off),
            sc: [ld16(b, sc, 0), ld16(b, sc, 4)],
            d: match self.d {
                Some(d) => {
                    let d = at(b, d);
                    ld16(b, d, 0)
                }
                None => ld16(b, self.base, i64::from(BLOCK_BYTES) - 2),
            },
        }
    }

    fn unpack(&self, b: &mut KernelBuilder, l: &Q6kWeights) -> Q6kUnpacked {
        let pair_hi = b.add(self.pair, 4u32);
        // Per word: quarter k's quants (low nibbles) and k + 2's (high ones), bits 4-5 in.
        let (ql, qh) = (self.words(b, &l.ql), self.words(b, &l.qh));
        let words: [[Reg<U32>; 2]; 4] = std::array::from_fn(|j| {
            let (lo, hi) = quant_bytes(b, ql[j], None);
            [(lo, self.pair), (hi, pair_hi)].map(|(nibbles, pair)| {
                let t = b.shr(qh[j], pair);
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
        let n = b.add(self.base, w);
        b.assign(self.base, n);
    }
}
