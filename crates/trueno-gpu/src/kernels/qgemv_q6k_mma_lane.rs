//! What a lane of the Q6_K one-vector tensor-core kernels loads and multiplies
//! (qgemv_q6k_mma_one.rs's doc has the layout): its 8-byte pieces of a super-block from
//! global memory or a stage of shared memory, lined up and assembled into 6-bit values,
//! the eight `mma` a super-block and the scaling. The register, staged and copy-engine
//! kernels all run these.

use super::qgemv::f16_bits;
use super::qgemv_dp4a::Q8kParams;
use super::qgemv_mma_tile::{scale_at, sums_at};
use crate::ptx::{Cmp, F32, KernelBuilder, Reg, RegType, Rounding, S32, Space, U16, U32, U64};

/// Where a lane's three 8-byte pieces of a half `h` start, from its first (`ql` byte `8t`
/// of the super-block): `ql` quarters 0 / 2, `ql` quarters 1 / 3, `qh`.
fn piece_offsets(h: i64) -> [i64; 3] {
    [64 * h, 64 * h + 32, 128 + 32 * h]
}

/// [`Weights::raw`]: both halves' three pieces for the lane's two rows, whose first
/// pieces' 8-byte boundaries are `at` (in `space`, `o` bytes before the pieces).
pub(super) fn load_halves<A: RegType>(
    b: &mut KernelBuilder,
    (space, o): (Space, u32),
    at: [Reg<A>; 2],
) -> [[Vec<Vec<Reg<U32>>>; 2]; 2] {
    [0, 1].map(|h| {
        at.map(|q| {
            piece_offsets(h)
                .iter()
                .map(|&off| load_piece(b, (space, o), q, off))
                .collect()
        })
    })
}

/// The words of an 8-byte piece `o` bytes past the 8-byte boundary `at + off` (in
/// `space`: global memory, or a stage of shared memory, [`super::qgemv_q6k_mma_one_staged`]),
/// as loaded (lined up later by [`line_up`], so that a pass's loads all come first).
/// Never past its super-block's scales, nor before the matrix (whose first super-block,
/// at the allocation's start, is at offset 0).
fn load_piece<A: RegType>(
    b: &mut KernelBuilder,
    (space, o): (Space, u32),
    at: Reg<A>,
    off: i64,
) -> Vec<Reg<U32>> {
    let ld4 = |b: &mut KernelBuilder, off| b.ld::<U32, A>(space, at, off);
    let ld8 = |b: &mut KernelBuilder, off| b.ld_vec::<U32, A, 2>(space, at, off);
    match o {
        0 => ld8(b, off).to_vec(),
        4 => vec![ld4(b, off + 4), ld4(b, off + 8)],
        2 => {
            let [x, y] = ld8(b, off);
            vec![x, y, ld4(b, off + 8)]
        }
        _ => [ld8(b, off), ld8(b, off + 8)].concat(),
    }
}

/// The piece's two words from what [`load_piece`] loaded.
fn line_up(b: &mut KernelBuilder, o: u32, w: &[Reg<U32>]) -> [Reg<U32>; 2] {
    // Bytes 2-5 of the pair (a, b).
    const TWO_ON: u32 = 0x5432;
    match o {
        0 | 4 => [w[0], w[1]],
        2 => [b.prmt(w[0], w[1], TWO_ON), b.prmt(w[1], w[2], TWO_ON)],
        _ => [b.prmt(w[1], w[2], TWO_ON), b.prmt(w[2], w[3], TWO_ON)],
    }
}

/// Quarter `e`'s 6-bit values of a word: its nibbles from the `ql` word (low for `e < 2`,
/// high for `e >= 2`), bit pair `2e` of the `qh` word above them.
fn quants(b: &mut KernelBuilder, e: u32, ql: Reg<U32>, qh: Reg<U32>) -> Reg<U32> {
    let nib = match e >= 2 {
        true => b.shr(ql, 4u32),
        false => ql,
    };
    let lo = b.and(nib, 0x0F0F_0F0Fu32);
    let hi = match e {
        0 => b.shl(qh, 4u32),
        1 => b.shl(qh, 2u32),
        2 => qh,
        _ => b.shr(qh, 2u32),
    };
    let hi = b.and(hi, 0x3030_3030u32);
    b.or(lo, hi)
}

/// Byte `i` (0 or 1) of `w`, sign-extended.
fn signed_byte(b: &mut KernelBuilder, w: Reg<U32>, i: u32) -> Reg<S32> {
    // Selector nibbles: byte i, then its sign (bit 3) three times.
    let v = b.prmt(w, 0u32, 0x8880 | (0x1111 * i));
    b.bitcast32::<S32, U32>(v)
}

/// What lane `4g + t` keeps for the whole kernel: B's masks for steps 0-3 (step `e`'s k
/// runs are sub-block `2e + t / 2`; lane `4g + t`'s column `g` is that where `g == 2e +
/// t / 2`), `8t` (its first piece's offset), its activations' offset in a super-block's
/// (quarter `g / 2`'s, `8t` on), and `2t` (its scales' and sums' offset).
pub(super) struct LaneB {
    pub masks: [Reg<U32>; 4],
    pub t8: Reg<U32>,
    pub act_off: Reg<U32>,
    pub t2: Reg<U32>,
}

impl LaneB {
    pub(super) fn new(b: &mut KernelBuilder, g: Reg<U32>, t: Reg<U32>) -> LaneB {
        let half_t = b.shr(t, 1u32);
        let masks: [Reg<U32>; 4] = std::array::from_fn(|e| {
            let n = b.add(half_t, 2 * e as u32);
            let is = b.setp::<U32>(Cmp::Eq, g, n);
            b.selp(u32::MAX, 0u32, is)
        });
        let quarter = b.shr(g, 1u32);
        let t8 = b.shl(t, 3u32);
        LaneB {
            masks,
            t8,
            act_off: b.mad(quarter, 32u32, t8),
            t2: b.shl(t, 1u32),
        }
    }
}

/// A super-block's weights as the lane loaded them for its two rows: `raw[h][row]` the
/// three pieces of half `h` ([`load_piece`]), `d[row]`, `sc[row][h]` (the 16-bit pair of
/// 8-bit scales of the lane's sub-blocks `2t`, `2t + 1` in half `h`).
pub(super) struct Weights {
    pub raw: [[Vec<Vec<Reg<U32>>>; 2]; 2],
    pub d: [Reg<U16>; 2],
    pub sc: [[Reg<U16>; 2]; 2],
}

impl Weights {
    /// A super-block's weights from a stage of shared memory: `at` each of the lane's two
    /// rows' 8-byte boundary `o` bytes before the super-block (the staged and copy-engine
    /// kernels).
    pub(super) fn from_stage(
        b: &mut KernelBuilder,
        lane: &LaneB,
        o: u32,
        at: [Reg<U32>; 2],
    ) -> Weights {
        let pieces = at.map(|a| b.add(a, lane.t8));
        let raw = load_halves(b, (Space::Shared, o), pieces);
        // d and the scales at their bytes past the pieces' boundary.
        let past = |off: i64| i64::from(o) + off;
        let d = at.map(|a| b.ld::<U16, U32>(Space::Shared, a, past(208)));
        let sc = at.map(|a| {
            let a = b.add(a, lane.t2);
            [192, 200].map(|off| b.ld::<U16, U32>(Space::Shared, a, past(off)))
        });
        Weights { raw, d, sc }
    }
}

/// The lane's activation quants of a super-block, half by half, from its pointer
/// ([`super::qgemv_mma_tile::act_after_weights`]).
pub(super) fn act_words(b: &mut KernelBuilder, act: Reg<U64>) -> [[Reg<U32>; 2]; 2] {
    [0, 128].map(|off| b.ld_vec::<U32, U64, 2>(Space::Global, act, off))
}

/// The lane's activation sums of 16 (a pair a half) and scale of a super-block.
pub(super) type ActSums = ([[Reg<S32>; 2]; 2], Reg<F32>);

/// Where [`super_block`] finds the lane's sums and scale: loaded a step ahead, or at their
/// pointer and scale (each half's pair then loaded just before its scaling).
enum Sums {
    Ahead(ActSums),
    At(Reg<U64>, Reg<F32>),
}

/// Super-block `sb`'s [`ActSums`].
pub(super) fn act_sums(
    b: &mut KernelBuilder,
    (p, lane): (&Q8kParams, &LaneB),
    sb: Reg<U32>,
) -> ActSums {
    let sp = sums_at(b, p, sb, lane.t2);
    let bs = [0, 1].map(|h| b.ld_vec::<S32, U64, 2>(Space::Global, sp, 32 * h as i64));
    (bs, scale_at(b, p, sb))
}

/// Super-block `sb`'s products for the lane's two rows, added into `acc`: `o` the
/// pieces' offset past their 8-byte boundary, `xs` the lane's activations
/// ([`act_words`]), and its sums and scale where loaded ahead ([`act_sums`]; else
/// loaded here, each half's sums before its scales).
pub(super) fn super_block(
    b: &mut KernelBuilder,
    (p, lane, o): (&Q8kParams, &LaneB, u32),
    (sb, xs, ahead): (Reg<U32>, [[Reg<U32>; 2]; 2], Option<ActSums>),
    w: &Weights,
    acc: [Reg<F32>; 2],
) {
    let sums = match ahead {
        Some(loaded) => Sums::Ahead(loaded),
        None => {
            let sp = sums_at(b, p, sb, lane.t2);
            Sums::At(sp, scale_at(b, p, sb))
        }
    };
    let dx = match sums {
        Sums::Ahead((_, dx)) | Sums::At(_, dx) => dx,
    };
    let mut isum: [Option<Reg<S32>>; 2] = [None, None];
    for (h, raw) in w.raw.iter().enumerate() {
        // words[row][piece] = the piece's two words.
        let words = raw
            .each_ref()
            .map(|r| std::array::from_fn::<_, 3, _>(|i| line_up(b, o, &r[i])));
        let mut c = [0i32; 4].map(|v| b.mov(v));
        for e in 0..4u32 {
            let q = |b: &mut KernelBuilder, row: usize, k: usize| {
                let w = &words[row];
                quants(b, e, w[(e & 1) as usize][k], w[2][k])
            };
            let a = [q(b, 0, 0), q(b, 1, 0), q(b, 0, 1), q(b, 1, 1)];
            let bf = xs[h].map(|x| b.and(x, lane.masks[e as usize]));
            c = b.mma_m16n8k32_u8s8(a, bf, c);
        }
        let bs = match sums {
            Sums::Ahead((bs, _)) => bs[h],
            Sums::At(sp, _) => b.ld_vec::<S32, U64, 2>(Space::Global, sp, 32 * h as i64),
        };
        let z = bs.map(|s| b.shl(s, 5u32));
        for row in 0..2 {
            let w = b.cvt::<U32, U16>(w.sc[row][h], None);
            for i in 0..2 {
                let s = signed_byte(b, w, i as u32);
                let centred = b.sub(c[2 * row + i], z[i]);
                isum[row] = Some(match isum[row] {
                    None => b.mul(s, centred),
                    Some(acc) => b.mad(s, centred, acc),
                });
            }
        }
    }
    for row in 0..2 {
        let is = isum[row].expect("two halves");
        let is = b.cvt::<F32, S32>(is, Some(Rounding::Rn));
        let dd = f16_bits(b, w.d[row]);
        let dd = b.mul(dx, dd);
        let next = b.fma(dd, is, acc[row]);
        b.assign(acc[row], next);
    }
}
