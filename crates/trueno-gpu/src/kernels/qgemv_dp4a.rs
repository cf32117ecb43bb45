//! The integer matrix-vector products: K-quant weights (Q4_K, Q5_K, and Q6_K, whose lane
//! is in qgemv_q6k_dp4a.rs) against activations quantized to Q8_K
//! ([`super::quantize_q8k`]), four 8-bit products per `dp4a`, exact
//! integer sums per sub-block, scales applied once per lane and super-block in f32 —
//! GGML's method (trueno-quant's `dot_q8`), so the result is that of the CPU's integer
//! path up to the order of the f32 sums.
//!
//! Why: the f32-activation kernels (qgemv_k.rs) spend about ten instructions per weight
//! unpacking scales and converting quants, and read four activation bytes per weight;
//! here a lane takes 32 weights per super-block with 16-byte loads, so the scale
//! unpacking is paid once per 32 weights and the activations cost one byte each.
//!
//! One warp per row; a warp step covers four consecutive super-blocks, eight lanes each
//! (the frame every format shares: [`Frame`], [`run`]). For Q4_K and Q5_K, lane `8g + p`
//! of super-block `g` takes quant bytes `16p..16p + 16` (of chunk
//! `c = p / 2`): their low nibbles are elements `16h..16h + 16` (`h = p % 2`) of
//! sub-block `2c`, their high ones the same of `2c + 1`; Q8_K's sums of 16 then give
//! exactly the lane's share of each sub-block's min term.

use super::qgemv::{QuantFormat, f16_bits, store_sum};
use super::qgemv_k::{
    BLOCK_BYTES, BLOCK_BYTES_Q5K, ChunkScales, THREADS, chunk_scales, quant_bytes, scale_min,
};
use super::{Family, Kernel, LaunchConfig, blocks_for, check_dims};
use super::{qgemv_q6k, qgemv_q6k_dp4a};
use crate::error::{Result, shape_err};
use crate::ptx::{
    Cmp, F32, KernelBuilder, KernelIr, Pred, PtxType, Reg, Rounding, S32, Space, U16, U32, U64,
};

/// Super-blocks a warp covers per step.
pub(super) const BLOCKS_PER_STEP: u32 = 4;
/// Steps whose loads are issued before any of their math.
const UNROLL: u32 = 2;

/// A lane's running pointers, at its part of super-block `g` (then `g + 4`, ...) of the
/// row: the block's header, the lane's quant bytes (and Q5_K's fifth bits: `qh` bytes
/// `16h..`), its activation quants of sub-block `2c` (those of `2c + 1` are 32 bytes
/// on), the activation block's scale, and its sums of 16 for the lane's half of
/// sub-block `2c` (`2c + 1`'s are two further).
struct Ptrs {
    blk: Reg<U64>,
    q: Reg<U64>,
    qh: Option<Reg<U64>>,
    a: Reg<U64>,
    d: Reg<U64>,
    sums: Reg<U64>,
}

/// Bytes of activation quants, scales and sums per super-block.
pub(super) const ACT_STEP: [u32; 3] = [256, 4, 16 * 4];

/// One step's loads for one lane.
struct Loads {
    head: [Reg<U32>; 4],
    q: [Reg<U32>; 4],
    qh: Option<[Reg<U32>; 4]>,
    a_lo: [Reg<U32>; 4],
    a_hi: [Reg<U32>; 4],
    dx: Reg<F32>,
    bs: [Reg<S32>; 2],
}

impl Ptrs {
    /// Step `s`'s loads under `valid`; zeros where it is past the row (then its part is
    /// exactly zero: `d`, `dmin` and the activation scale all are).
    fn load(&self, b: &mut KernelBuilder, valid: Reg<Pred>, s: i64, bb: u32) -> Loads {
        let zeros4 = |b: &mut KernelBuilder| -> [Reg<U32>; 4] {
            std::array::from_fn(|_| b.mov::<U32>(0u32))
        };
        let l = Loads {
            head: zeros4(b),
            q: zeros4(b),
            qh: self.qh.map(|_| zeros4(b)),
            a_lo: zeros4(b),
            a_hi: zeros4(b),
            dx: b.mov::<F32>(0.0f32),
            bs: [b.mov::<S32>(0i32), b.mov::<S32>(0i32)],
        };
        let w_off = s * i64::from(BLOCKS_PER_STEP * bb);
        let [a_off, d_off, s_off] = ACT_STEP.map(|n| s * i64::from(BLOCKS_PER_STEP * n));
        b.predicated(valid, |b| {
            let v4 = |b: &mut KernelBuilder, dst: [Reg<U32>; 4], p: Reg<U64>, off: i64| {
                let v = b.ld_vec::<U32, U64, 4>(Space::Global, p, off);
                for (d, v) in dst.into_iter().zip(v) {
                    b.assign(d, v);
                }
            };
            v4(b, l.head, self.blk, w_off);
            v4(b, l.q, self.q, w_off);
            if let (Some(dst), Some(p)) = (l.qh, self.qh) {
                v4(b, dst, p, w_off);
            }
            v4(b, l.a_lo, self.a, a_off);
            v4(b, l.a_hi, self.a, a_off + 32);
            let dx = b.ld::<F32, U64>(Space::Global, self.d, d_off);
            b.assign(l.dx, dx);
            for (k, &dst) in l.bs.iter().enumerate() {
                let v = b.ld::<S32, U64>(Space::Global, self.sums, s_off + 8 * k as i64);
                b.assign(dst, v);
            }
        });
        l
    }

    /// Moves every pointer `steps` steps on.
    fn advance(&self, b: &mut KernelBuilder, steps: u32, bb: u32) {
        let w = u64::from(steps * BLOCKS_PER_STEP * bb);
        let [a, d, s] = ACT_STEP.map(|n| u64::from(steps * BLOCKS_PER_STEP * n));
        let all = [
            (self.blk, w),
            (self.q, w),
            (self.a, a),
            (self.d, d),
            (self.sums, s),
        ];
        for (r, step) in all.into_iter().chain(self.qh.map(|p| (p, w))) {
            let n = b.add(r, step);
            b.assign(r, n);
        }
    }
}

impl Loads {
    /// The lane's share of its super-block: `dx * (d * sum_j sc_j * sum(q a) - dmin *
    /// sum_j m_j * sum(a))` over its halves of sub-blocks `2c` and `2c + 1`.
    fn part(&self, b: &mut KernelBuilder, sp: &ChunkScales) -> Reg<F32> {
        let mut dot_lo = b.mov::<S32>(0i32);
        let mut dot_hi = b.mov::<S32>(0i32);
        for i in 0..4 {
            let fifth = self.qh.map(|qh| (qh[i], sp.j0));
            let (lo, hi) = quant_bytes(b, self.q[i], fifth);
            dot_lo = b.dp4a(lo, self.a_lo[i], dot_lo, false, true);
            dot_hi = b.dp4a(hi, self.a_hi[i], dot_hi, false, true);
        }
        let s = [self.head[1], self.head[2], self.head[3]];
        let signed = |b: &mut KernelBuilder, (sc, m): (Reg<U32>, Reg<U32>)| {
            (b.bitcast32::<S32, U32>(sc), b.bitcast32::<S32, U32>(m))
        };
        let sm0 = scale_min(b, s, sp.low_pack, sp.shift0);
        let (sc0, m0) = signed(b, sm0);
        let sm1 = scale_min(b, s, sp.low_pack, sp.shift1);
        let (sc1, m1) = signed(b, sm1);
        // Exact: |isum| < 2 * 63 * 16 * 31 * 128 < 2^24, |msum| < 2 * 63 * 16 * 128.
        let isum = b.mul(sc0, dot_lo);
        let isum = b.mad(sc1, dot_hi, isum);
        let msum = b.mul(m0, self.bs[0]);
        let msum = b.mad(m1, self.bs[1], msum);
        let isum = b.cvt::<F32, S32>(isum, Some(Rounding::Rn));
        let msum = b.cvt::<F32, S32>(msum, Some(Rounding::Rn));
        let d16 = b.cvt::<U16, U32>(self.head[0], None);
        let d = f16_bits(b, d16);
        let dm = b.shr(self.head[0], 16u32);
        let dm16 = b.cvt::<U16, U32>(dm, None);
        let dmin = f16_bits(b, dm16);
        let dxd = b.mul(self.dx, d);
        let dxm = b.mul(self.dx, dmin);
        let part = b.mul(dxd, isum);
        let ndxm = b.neg(dxm);
        b.fma(ndxm, msum, part)
    }
}

/// What the integer kernels share: the parameters, the warp's row (warps past the last
/// leave whole), the lane's super-block `g` of each step and its place `p` in it, and
/// pointers at super-block `g`: of the row's weights, and of the activations' quants,
/// scales and sums of 16 (without the lane's offsets, which are each format's).
pub(super) struct Frame {
    /// The row's super-block `g`.
    pub blk: Reg<U64>,
    /// Activation quants of super-block `g`.
    pub act: Reg<U64>,
    /// Its activation scale.
    pub d: Reg<U64>,
    /// Its activation sums of 16.
    pub sums: Reg<U64>,
    /// The lane's place among the eight of its super-block.
    pub p: Reg<U32>,
    g: Reg<U32>,
    lane: Reg<U32>,
    row: Reg<U32>,
    blocks: Reg<U32>,
    y: Reg<U64>,
}

/// `base + off * scale` for a 32-bit `off`.
pub(super) fn add_u32(
    b: &mut KernelBuilder,
    base: Reg<U64>,
    off: Reg<U32>,
    scale: u32,
) -> Reg<U64> {
    let off = b.mul_wide(off, scale);
    b.add(base, off)
}

/// Declares the parameters (`w`, `qs`, `d`, `bsums`, `y`, `rows`, `blocks`) and sets up
/// the [`Frame`] for super-blocks of `bb` bytes.
pub(super) fn frame(b: &mut KernelBuilder, bb: u32) -> Frame {
    b.max_threads(THREADS);
    let w = b.param_ptr("w", PtxType::U16);
    let aq = b.param_ptr("qs", PtxType::U32);
    let ad = b.param_ptr("d", PtxType::F32);
    let abs = b.param_ptr("bsums", PtxType::S32);
    let y = b.param_ptr("y", PtxType::F32);
    let rows = b.param_u32("rows");
    let blocks = b.param_u32("blocks");
    let tid = b.tid_x();
    let lane = b.and(tid, 31u32);
    let in_block = b.shr(tid, 5u32);
    let cta = b.ctaid_x();
    let row = b.mad(cta, THREADS / 32, in_block);
    let past = b.setp::<U32>(Cmp::Ge, row, rows);
    b.exit_if(past);
    let g = b.shr(lane, 3u32);
    let p = b.and(lane, 7u32);
    let row_bytes = b.mul(blocks, bb);
    let row_off = b.mul_wide(row, row_bytes);
    let wr = b.add(w, row_off);
    let blk = add_u32(b, wr, g, bb);
    let act = add_u32(b, aq, g, 256);
    let d = add_u32(b, ad, g, 4);
    let sums = add_u32(b, abs, g, 16 * 4);
    Frame {
        blk,
        act,
        d,
        sums,
        p,
        g,
        lane,
        row,
        blocks,
        y,
    }
}

/// One format's lane: its loads for a step, its share of a super-block, and how its
/// pointers move.
pub(super) trait LaneStep {
    /// One step's loaded registers.
    type Loads;
    /// Step `s`'s loads (`s * 4` super-blocks on) under `valid`, zeros where it is past
    /// the row (its part must then be exactly zero).
    fn load(&self, b: &mut KernelBuilder, valid: Reg<Pred>, s: i64) -> Self::Loads;
    /// The lane's share of its super-block.
    fn part(&self, b: &mut KernelBuilder, l: &Self::Loads) -> Reg<F32>;
    /// Moves every pointer `steps` steps on.
    fn advance(&self, b: &mut KernelBuilder, steps: u32);
    /// Steps whose loads are issued before any of their math.
    fn unroll(&self) -> u32 {
        UNROLL
    }
}

/// The row loop (the loads of [`LaneStep::unroll`] steps, then their math), the warp's
/// sum into `y[row]`.
pub(super) fn run(mut b: KernelBuilder, fr: &Frame, lane: &impl LaneStep) -> KernelIr {
    let acc = b.mov::<F32>(0.0f32);
    let unroll = lane.unroll();
    b.for_loop(fr.g, fr.blocks, BLOCKS_PER_STEP * unroll, false, |b, k| {
        let loads: Vec<_> = (0..unroll)
            .map(|s| {
                let ks = b.add(k, s * BLOCKS_PER_STEP);
                let valid = b.setp::<U32>(Cmp::Lt, ks, fr.blocks);
                lane.load(b, valid, i64::from(s))
            })
            .collect();
        for l in &loads {
            let part = lane.part(b, l);
            let next = b.add(acc, part);
            b.assign(acc, next);
        }
        lane.advance(b, unroll);
    });
    store_sum(&mut b, (fr.y, fr.row), acc, fr.lane, None);
    b.ret();
    b.finish()
}

/// The Q4_K / Q5_K lane.
struct K4Lane {
    ptrs: Ptrs,
    split: ChunkScales,
    bb: u32,
}

impl LaneStep for K4Lane {
    type Loads = Loads;
    fn load(&self, b: &mut KernelBuilder, valid: Reg<Pred>, s: i64) -> Loads {
        self.ptrs.load(b, valid, s, self.bb)
    }
    fn part(&self, b: &mut KernelBuilder, l: &Loads) -> Reg<F32> {
        l.part(b, &self.split)
    }
    fn advance(&self, b: &mut KernelBuilder, steps: u32) {
        self.ptrs.advance(b, steps, self.bb)
    }
}

/// `y = W a` for K-quant weights `W` (GGML's layout, as [`super::qgemv::QgemvKernel`]) and
/// Q8_K activations `a`. Parameters: `w`, `qs`, `d`, `bsums` (the activations, see
/// [`crate::memory::Q8kVector`]), `y`, `rows`, `blocks` (super-blocks per row).
#[derive(Clone, Copy, Debug)]
pub struct QgemvQ8kKernel(pub QuantFormat);

impl QgemvQ8kKernel {
    /// The weight formats with an integer kernel.
    pub const FORMATS: [QuantFormat; 3] = [QuantFormat::Q4K, QuantFormat::Q5K, QuantFormat::Q6K];
}

impl Kernel for QgemvQ8kKernel {
    fn name(&self) -> String {
        format!("trueno_qgemv_{}_q8k", self.0.name())
    }

    fn family(&self) -> Family {
        Family::Qgemv
    }

    fn build(&self) -> KernelIr {
        let mut b = KernelBuilder::new(self.name());
        if self.0 == QuantFormat::Q6K {
            let fr = frame(&mut b, qgemv_q6k::BLOCK_BYTES);
            let lane = qgemv_q6k_dp4a::Q6kLane::new(&mut b, &fr);
            return run(b, &fr, &lane);
        }
        let five_bit = self.0 == QuantFormat::Q5K;
        let (bb, qs_at) = if five_bit {
            (BLOCK_BYTES_Q5K, 48u32)
        } else {
            (BLOCK_BYTES, 16u32)
        };
        let fr = frame(&mut b, bb);
        let c = b.shr(fr.p, 1u32);
        let h = b.and(fr.p, 1u32);
        let split = chunk_scales(&mut b, c);
        let q_off = b.mad(fr.p, 16u32, qs_at);
        let q_off = b.cvt::<U64, U32>(q_off, None);
        let qp = b.add(fr.blk, q_off);
        let h16 = b.shl(h, 4u32);
        let qh_off = b.add(h16, 16u32);
        let qh_off = b.cvt::<U64, U32>(qh_off, None);
        let qhp = b.add(fr.blk, qh_off);
        let a_off = b.mad(c, 64u32, h16);
        let ap = add_u32(&mut b, fr.act, a_off, 1);
        let s_first = b.mad(c, 4u32, h);
        let sp = add_u32(&mut b, fr.sums, s_first, 4);
        let lane = K4Lane {
            ptrs: Ptrs {
                blk: fr.blk,
                q: qp,
                qh: five_bit.then_some(qhp),
                a: ap,
                d: fr.d,
                sums: sp,
            },
            split,
            bb,
        };
        run(b, &fr, &lane)
    }

    /// `dims = [rows, cols]`; `cols` a multiple of 256.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        let name = self.name();
        if !Self::FORMATS.contains(&self.0) {
            return shape_err(&name, "no integer kernel for this format");
        }
        check_dims(&name, dims, 2)?;
        let (rows, cols) = (dims[0], dims[1]);
        if !cols.is_multiple_of(256) {
            return shape_err(&name, format!("cols {cols} is not a multiple of 256"));
        }
        match self.0.matrix_bytes(1, cols) {
            Some(b) if b <= u32::MAX as usize => {}
            _ => return shape_err(&name, format!("a row of {cols} is over 4 GiB")),
        }
        Ok(LaunchConfig::linear(
            blocks_for(&name, rows, (THREADS / 32) as usize, i32::MAX as u32)?,
            THREADS,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_k_quants_and_whole_super_blocks() {
        assert!(
            QgemvQ8kKernel(QuantFormat::Q8_0)
                .launch_config(&[4, 256])
                .is_err()
        );
        for f in QgemvQ8kKernel::FORMATS {
            let k = QgemvQ8kKernel(f);
            assert!(k.launch_config(&[4, 255]).is_err());
            assert!(k.launch_config(&[4, 384]).is_err());
            assert!(k.launch_config(&[0, 256]).is_err());
            let c = k.launch_config(&[17, 512]).unwrap();
            assert_eq!((c.grid.0, c.block.0), (3, THREADS));
        }
    }
}
