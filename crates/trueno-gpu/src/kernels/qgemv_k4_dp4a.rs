//! The Q4_K / Q5_K lane of the integer matrix-vector products (frame, loop and
//! reduction: qgemv_dp4a.rs). Lane `8g + p` of super-block `g` takes quant bytes
//! `16p..16p + 16` (of chunk `c = p / 2`): their low nibbles are elements `16h..16h + 16`
//! (`h = p % 2`) of sub-block `2c`, their high ones the same of `2c + 1`; Q8_K's sums of
//! 16 then give exactly the lane's share of each sub-block's min term. Header, quants and
//! Q5_K's fifth bits are 16-byte loads (144 and 176 are multiples of 16).

use super::helpers::elem_addr;
use super::qgemv_dp4a::{ActLoads, ActPtrs, BLOCKS_PER_STEP, Frame, LaneStep};
use super::qgemv_k::{ChunkScales, chunk_scales, half_of, layout, quant_bytes, scale_min};
use crate::ptx::{F32, KernelBuilder, Reg, Rounding, S32, Space, U32, U64};

/// The lane's weight pointers at its part of super-block `g` (then `g + 4`, ...): the
/// block's header, its quant bytes, Q5_K's fifth bits (`qh` bytes `16h..`).
pub(super) struct K4Lane {
    blk: Reg<U64>,
    q: Reg<U64>,
    qh: Option<Reg<U64>>,
    act: ActPtrs,
    split: ChunkScales,
    bb: u32,
    /// Whether the header waits until after the pass's pin (an L1 hit by then: each
    /// header's 32-byte sector comes in with a quant load of the same warp step).
    late_head: bool,
}

/// One step's weight loads (the header `None` until loaded, where it waits for the pin).
pub(super) struct K4Weights {
    head: Option<[Reg<U32>; 4]>,
    q: [Reg<U32>; 4],
    qh: Option<[Reg<U32>; 4]>,
}

/// A step's weights unpacked: per quant word its low- and high-nibble sub-blocks' quant
/// bytes (fifth bits in), the two sub-blocks' 6-bit scales and mins, `d` and `dmin`.
pub(super) struct K4Unpacked {
    quants: [[Reg<U32>; 2]; 4],
    scales: [Reg<S32>; 2],
    mins: [Reg<S32>; 2],
    d: Reg<F32>,
    dmin: Reg<F32>,
}

impl K4Lane {
    /// The lane of a Q4_K (`five_bit` false) or Q5_K kernel, its headers loaded after the
    /// pin where `late_head` (Q4_K only: Q5_K's passes are not pinned).
    pub(super) fn new(
        b: &mut KernelBuilder,
        fr: &Frame,
        five_bit: bool,
        late_head: bool,
    ) -> K4Lane {
        let (bb, qs_at) = layout(five_bit);
        let c = b.shr(fr.p, 1u32);
        let h = b.and(fr.p, 1u32);
        let split = chunk_scales(b, c);
        let q_off = b.mad(fr.p, 16u32, qs_at);
        let h16 = b.shl(h, 4u32);
        let qh_off = b.add(h16, 16u32);
        let a_off = b.mad(c, 64u32, h16);
        let s_first = b.mad(c, 4u32, h);
        K4Lane {
            blk: fr.blk,
            q: elem_addr(b, fr.blk, q_off, 1),
            qh: five_bit.then(|| elem_addr(b, fr.blk, qh_off, 1)),
            act: ActPtrs {
                a: elem_addr(b, fr.act, a_off, 1),
                d: fr.d,
                sums: elem_addr(b, fr.sums, s_first, 4),
                second_quad: 32,
                second_sum: 8,
            },
            split,
            bb,
            late_head: late_head && !five_bit,
        }
    }

    /// Bytes from the lane's weight pointers to its step `s`.
    fn step_bytes(&self, s: i64) -> i64 {
        s * i64::from(BLOCKS_PER_STEP * self.bb)
    }
}

impl LaneStep for K4Lane {
    type Weights = K4Weights;
    type Unpacked = K4Unpacked;

    fn act(&self) -> &ActPtrs {
        &self.act
    }

    fn load(&self, b: &mut KernelBuilder, s: i64) -> K4Weights {
        let off = self.step_bytes(s);
        let v4 =
            |b: &mut KernelBuilder, p: Reg<U64>| b.ld_vec::<U32, U64, 4>(Space::Global, p, off);
        K4Weights {
            head: (!self.late_head).then(|| v4(b, self.blk)),
            q: v4(b, self.q),
            qh: self.qh.map(|p| v4(b, p)),
        }
    }

    fn complete(&self, b: &mut KernelBuilder, s: i64, w: K4Weights) -> K4Weights {
        let head = match w.head {
            Some(h) => h,
            None => b.ld_vec::<U32, U64, 4>(Space::Global, self.blk, self.step_bytes(s)),
        };
        K4Weights {
            head: Some(head),
            ..w
        }
    }

    fn unpack(&self, b: &mut KernelBuilder, w: &K4Weights) -> K4Unpacked {
        let head = w.head.expect("`complete` loads a late header");
        let sp = &self.split;
        let quants = std::array::from_fn(|i| {
            let fifth = w.qh.map(|qh| (qh[i], sp.j0));
            let (lo, hi) = quant_bytes(b, w.q[i], fifth);
            [lo, hi]
        });
        let s = [head[1], head[2], head[3]];
        let signed = |b: &mut KernelBuilder, (sc, m): (Reg<U32>, Reg<U32>)| {
            (b.bitcast32::<S32, U32>(sc), b.bitcast32::<S32, U32>(m))
        };
        let sm0 = scale_min(b, s, sp.low_pack, sp.shift0);
        let (sc0, m0) = signed(b, sm0);
        let sm1 = scale_min(b, s, sp.low_pack, sp.shift1);
        let (sc1, m1) = signed(b, sm1);
        K4Unpacked {
            quants,
            scales: [sc0, sc1],
            mins: [m0, m1],
            d: half_of(b, head[0], false),
            dmin: half_of(b, head[0], true),
        }
    }

    /// `dx * (d * sum_j sc_j * sum(q a) - dmin * sum_j m_j * sum(a))` over the lane's
    /// halves of sub-blocks `2c` and `2c + 1`.
    fn part(&self, b: &mut KernelBuilder, w: &K4Unpacked, a: &ActLoads) -> Reg<F32> {
        let mut dot_lo = b.mov::<S32>(0i32);
        let mut dot_hi = b.mov::<S32>(0i32);
        for (i, [lo, hi]) in w.quants.iter().enumerate() {
            dot_lo = b.dp4a(*lo, a.a[0][i], dot_lo, false, true);
            dot_hi = b.dp4a(*hi, a.a[1][i], dot_hi, false, true);
        }
        // Exact: |isum| < 2 * 63 * 16 * 31 * 128 < 2^24, |msum| < 2 * 63 * 16 * 128.
        let isum = b.mul(w.scales[0], dot_lo);
        let isum = b.mad(w.scales[1], dot_hi, isum);
        let msum = b.mul(w.mins[0], a.bs[0]);
        let msum = b.mad(w.mins[1], a.bs[1], msum);
        let isum = b.cvt::<F32, S32>(isum, Some(Rounding::Rn));
        let msum = b.cvt::<F32, S32>(msum, Some(Rounding::Rn));
        let dxd = b.mul(a.dx, w.d);
        let dxm = b.mul(a.dx, w.dmin);
        let part = b.mul(dxd, isum);
        let ndxm = b.neg(dxm);
        b.fma(ndxm, msum, part)
    }

    /// Q5_K keeps ptxas's order: with its high bits' loads too, the pinned pass ran
    /// 0.96-1.04x (H100) at 78 registers against 46.
    fn pin_loads(&self) -> bool {
        self.qh.is_none()
    }

    fn advance(&self, b: &mut KernelBuilder, steps: u32) {
        let w = u64::from(steps * BLOCKS_PER_STEP * self.bb);
        for r in [self.blk, self.q].into_iter().chain(self.qh) {
            let n = b.add(r, w);
            b.assign(r, n);
        }
    }
}
