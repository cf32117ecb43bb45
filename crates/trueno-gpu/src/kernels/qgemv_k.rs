//! The K-quant matrix-vector kernel for Q4_K and Q5_K: 256-element super-blocks of 144
//! bytes (f16 `d` and `dmin`, twelve bytes of packed 6-bit scales and mins for eight
//! 32-element sub-blocks, 128 bytes of 4-bit quants) and of 176 (the same with 32 bytes
//! of fifth bits, `qh`, before the quants: bit `j` of `qh[l]` is bit 4 of weight `l` of
//! sub-block `j`). Both blocks are whole numbers of 32-bit words, so every load here is
//! one.
//!
//! One warp per row, one super-block per step (staging four super-blocks' loads before
//! their math measured 10-20% slower on the H100: 88 registers against 40). Lane `l`
//! takes the four quant bytes at `32c + 4(l % 8)` of chunk `c = l / 8`, whose low
//! nibbles are elements `64c + 4(l % 8)..` of sub-block `2c` and high nibbles the same 32
//! further on, of sub-block `2c + 1`; it unpacks those two sub-blocks' scales and mins
//! itself (GGML's `get_scale_min_k4`).
//! Each sub-block contributes `d * sc * sum(x q) - dmin * m * sum(x)`.

use super::float_type::FloatType;
use super::helpers::elem_addr;
use super::qgemv::{Prologue, byte_floats, f16_bits, load_x, prologue, store_sum};
use crate::ptx::{Cmp, F32, KernelBuilder, KernelIr, Pred, Reg, Rounding, Space, U16, U32, U64};

/// Threads per block (eight warps, one row each).
pub(super) const THREADS: u32 = 256;
/// Bytes per Q4_K super-block.
pub(super) const BLOCK_BYTES: u32 = 144;
/// Bytes per Q5_K super-block.
pub(super) const BLOCK_BYTES_Q5K: u32 = 176;

/// The f16 in the low (`high == false`) or high half of `w`, as f32.
pub(super) fn half_of(b: &mut KernelBuilder, w: Reg<U32>, high: bool) -> Reg<F32> {
    let w = if high { b.shr(w, 16u32) } else { w };
    let h = b.cvt::<U16, U32>(w, None);
    f16_bits(b, h)
}

/// The byte of `w` at bit `shift` (a register: 0, 8, 16 or 24).
fn byte(b: &mut KernelBuilder, w: Reg<U32>, shift: Reg<U32>) -> Reg<U32> {
    let s = b.shr(w, shift);
    b.and(s, 0xFFu32)
}

/// Four nibble values (bytes of `nibbles`, each 0-15) dotted with `x`: `(sum x q, sum x)`.
fn dot4(b: &mut KernelBuilder, nibbles: Reg<U32>, x: &[Reg<F32>; 4]) -> (Reg<F32>, Reg<F32>) {
    let q = byte_floats(b, nibbles, 0.0);
    let mut s = b.mul(x[0], q[0]);
    for (&x, &q) in x.iter().zip(&q).skip(1) {
        s = b.fma(x, q, s);
    }
    let sx = b.add(x[0], x[1]);
    let t = b.add(x[2], x[3]);
    (s, b.add(sx, t))
}

/// A Q4_K (`five_bit` false) or Q5_K super-block's bytes and where its quants start
/// (after `d`, `dmin`, the scales and, for Q5_K, the 32 bytes of fifth bits).
pub(super) fn layout(five_bit: bool) -> (u32, u32) {
    if five_bit {
        (BLOCK_BYTES_Q5K, 48)
    } else {
        (BLOCK_BYTES, 16)
    }
}

/// The 6-bit (scale, min) of sub-block `j` from the three scale words `s` of a Q4_K /
/// Q5_K super-block (GGML's `get_scale_min_k4`): `shift` is `8 * (j % 4)`, `low_pack`
/// whether `j < 4` (both scale and min sit whole in bytes `j` and `j + 4`; above, their
/// low four bits in byte `j + 4` of the last word and their top two in the top bits of
/// bytes `j - 4` and `j`).
pub(super) fn scale_min(
    b: &mut KernelBuilder,
    s: [Reg<U32>; 3],
    low_pack: Reg<Pred>,
    shift: Reg<U32>,
) -> (Reg<U32>, Reg<U32>) {
    let b0 = byte(b, s[0], shift);
    let b1 = byte(b, s[1], shift);
    let b2 = byte(b, s[2], shift);
    let sc_lo = b.and(b0, 63u32);
    let m_lo = b.and(b1, 63u32);
    let top0 = b.shr(b0, 6u32);
    let top0 = b.shl(top0, 4u32);
    let low2 = b.and(b2, 15u32);
    let sc_hi = b.or(low2, top0);
    let top1 = b.shr(b1, 6u32);
    let top1 = b.shl(top1, 4u32);
    let high2 = b.shr(b2, 4u32);
    let m_hi = b.or(high2, top1);
    (b.selp(sc_lo, sc_hi, low_pack), b.selp(m_lo, m_hi, low_pack))
}

/// Where the scales of chunk `c`'s sub-blocks `2c` and `2c + 1` sit: bytes `(2c) % 4`
/// and `(2c + 1) % 4` of the three scale words, in the low (`c < 2`) or high packing.
pub(super) struct ChunkScales {
    /// `c < 2`.
    pub low_pack: Reg<Pred>,
    /// `8 * ((2c) % 4)`, the shift of sub-block `2c`'s bytes.
    pub shift0: Reg<U32>,
    /// The same for `2c + 1`.
    pub shift1: Reg<U32>,
    /// `2c` (Q5_K's fifth bits of the low nibbles are bit `2c` of each `qh` byte).
    pub j0: Reg<U32>,
}

/// [`ChunkScales`] of chunk `c`.
pub(super) fn chunk_scales(b: &mut KernelBuilder, c: Reg<U32>) -> ChunkScales {
    let low_pack = b.setp::<U32>(Cmp::Lt, c, 2u32);
    let j0 = b.shl(c, 1u32);
    let jj0 = b.and(j0, 3u32);
    let shift0 = b.shl(jj0, 3u32);
    let shift1 = b.add(shift0, 8u32);
    ChunkScales {
        low_pack,
        shift0,
        shift1,
        j0,
    }
}

/// The quants of four bytes `q` of a chunk, as bytes: its low nibbles (sub-block `2c`)
/// and its high ones (`2c + 1`); for Q5_K, `fifth` is the matching `qh` word and `2c`,
/// whose bits `2c` and `2c + 1` of each byte become bit 4 of the two.
pub(super) fn quant_bytes(
    b: &mut KernelBuilder,
    q: Reg<U32>,
    fifth: Option<(Reg<U32>, Reg<U32>)>,
) -> (Reg<U32>, Reg<U32>) {
    let mut lo = b.and(q, 0x0F0F_0F0Fu32);
    let hi = b.shr(q, 4u32);
    let mut hi = b.and(hi, 0x0F0F_0F0Fu32);
    if let Some((qh, sub)) = fifth {
        for (half, extra) in [(&mut lo, 0u32), (&mut hi, 1)] {
            let s = b.add(sub, extra);
            let bits = b.shr(qh, s);
            let bits = b.and(bits, 0x0101_0101u32);
            let bits = b.shl(bits, 4u32);
            *half = b.or(*half, bits);
        }
    }
    (lo, hi)
}

/// Four loaded values as an array.
fn four(v: Vec<Reg<F32>>) -> [Reg<F32>; 4] {
    v.try_into().expect("four values")
}

/// One lane's loads for one super-block.
struct Loaded {
    head: Reg<U32>,
    s: [Reg<U32>; 3],
    q: Reg<U32>,
    /// Q5_K's fifth bits for the lane's four positions (bytes `4(l % 8)..` of `qh`).
    qh: Option<Reg<U32>>,
    xl: [Reg<F32>; 4],
    xh: [Reg<F32>; 4],
}

/// The lane's share of one super-block: its two sub-blocks'
/// `d * sc * sum(x q) - dmin * m * sum(x)`.
fn super_block_dot(b: &mut KernelBuilder, l: &Loaded, cs: &ChunkScales) -> Reg<F32> {
    let d = half_of(b, l.head, false);
    let dmin = half_of(b, l.head, true);
    let as_f32 = |b: &mut KernelBuilder, (sc, m): (Reg<U32>, Reg<U32>)| {
        (
            b.cvt::<F32, U32>(sc, Some(Rounding::Rn)),
            b.cvt::<F32, U32>(m, Some(Rounding::Rn)),
        )
    };
    let sm0 = scale_min(b, l.s, cs.low_pack, cs.shift0);
    let (sc0, m0) = as_f32(b, sm0);
    let sm1 = scale_min(b, l.s, cs.low_pack, cs.shift1);
    let (sc1, m1) = as_f32(b, sm1);
    let (lo, hi) = quant_bytes(b, l.q, l.qh.map(|qh| (qh, cs.j0)));
    let (s0, sx0) = dot4(b, lo, &l.xl);
    let (s1, sx1) = dot4(b, hi, &l.xh);
    let qs = b.mul(sc0, s0);
    let qs = b.fma(sc1, s1, qs);
    let ms = b.mul(m0, sx0);
    let ms = b.fma(m1, sx1, ms);
    let dq = b.mul(d, qs);
    let nm = b.neg(dmin);
    b.fma(nm, ms, dq)
}

/// The frame of the one-row-per-warp K-quant kernels: the parameters, the warp's row
/// (warps past the last one leave whole) and the address of its first super-block.
pub(super) struct RowWarp {
    /// The activations.
    pub x: Reg<U64>,
    /// The lane in the warp.
    pub lane: Reg<U32>,
    /// The current super-block of the row (advanced by [`row_blocks`]).
    pub blk: Reg<U64>,
    y: Reg<U64>,
    row: Reg<U32>,
    blocks: Reg<U32>,
    block_bytes: u32,
    /// The activations' type.
    pub act: FloatType,
}

/// Starts a K-quant kernel over super-blocks of `block_bytes`, activations of `act`.
pub(super) fn row_warp(b: &mut KernelBuilder, block_bytes: u32, act: FloatType) -> RowWarp {
    let Prologue {
        w,
        x,
        y,
        rows,
        blocks,
        lane,
        warp: row,
    } = prologue(b, THREADS, act);
    let past = b.setp::<U32>(Cmp::Ge, row, rows);
    b.exit_if(past);
    let row_bytes = b.mul(blocks, block_bytes);
    let row_off = b.mul_wide(row, row_bytes);
    let blk = b.add(w, row_off);
    RowWarp {
        x,
        lane,
        blk,
        y,
        row,
        blocks,
        block_bytes,
        act,
    }
}

/// Ends the basic block after a pass's loads with a branch that is never taken (`act`,
/// a lane's activation pointer, is never null; its body a loop of `trips`, so ptxas
/// cannot turn it into predicated stores and drop the branch; were it ever taken, it
/// would only write the warp's own `y[row]` before the row's real store). ptxas
/// schedules within a block and had spread a pass's loads among its products: the loads
/// after the first product waited for the earlier ones' data before they issued. Split,
/// every load of the pass leaves before any product, for more registers (H100, in a
/// graph, at 4096x4096, 14336x4096, 4096x14336 and 32000x4096: integer path Q4_K
/// 0.99-1.11x, Q6_K 1.00-1.11x, Q8_0 1.02-1.04x, Q4_0 1.04-1.14x; f32 and f16
/// activations Q4_K 1.01-1.16x, Q5_K 0.98-1.16x).
pub(super) fn end_block(
    b: &mut KernelBuilder,
    (y, row): (Reg<U64>, Reg<U32>),
    trips: Reg<U32>,
    act: Reg<U64>,
    acc: Reg<F32>,
) {
    let null = b.setp::<U64>(Cmp::Eq, act, 0u64);
    b.if_then(null, false, |b| {
        let at = elem_addr(b, y, row, 4);
        b.for_loop(0u32, trips, 1u32, false, |b, _| {
            b.st::<F32, U64>(Space::Global, at, 0, acc);
        });
    });
}

/// Super-blocks a pass of [`row_blocks`] loads before its math (Q4_K, Q5_K). Against one
/// a pass (H100, two runs each, before [`end_block`]) 4 took 5-20% off the f32 and f16
/// kernels at 14336x4096, 4096x14336 and 32000x4096, 4096x4096 the same within the
/// noise; 2 in between. Q6_K takes two ([`super::qgemv_q6k`]).
pub(super) const ROW_UNROLL: u32 = 4;

/// Loops over the row's super-blocks: `load(b, s)` issues the lane's loads of the one `s`
/// super-blocks past the current (its weights `s * block_bytes` bytes past `blk` and the
/// pointers in `per_block`, its activations `256 s` values past `xp`), `dot` turns them
/// into the lane's share. Passes of `unroll` super-blocks (a power of two), every load of
/// the pass issued before any math (a basic block of their own, [`end_block`]), then the
/// rest one at a time. Then the warp's sum goes to `y[row]` and the kernel ends.
pub(super) fn row_blocks<L>(
    mut b: KernelBuilder,
    rw: &RowWarp,
    (xp, unroll): (Reg<U64>, u32),
    per_block: &[Reg<U64>],
    load: impl Fn(&mut KernelBuilder, u32) -> L,
    dot: impl Fn(&mut KernelBuilder, &L) -> Reg<F32>,
) -> KernelIr {
    let acc = b.mov::<F32>(0.0f32);
    debug_assert!(unroll.is_power_of_two());
    let pass = |b: &mut KernelBuilder, n: u32| {
        let loads: Vec<L> = (0..n).map(|s| load(b, s)).collect();
        end_block(b, (rw.y, rw.row), rw.blocks, xp, acc);
        for l in &loads {
            let part = dot(b, l);
            let next = b.add(acc, part);
            b.assign(acc, next);
        }
        let step = u64::from(n * rw.block_bytes);
        let advance = std::iter::once((rw.blk, step))
            .chain(per_block.iter().map(|&r| (r, step)))
            .chain([(xp, u64::from(n) * 256 * u64::from(rw.act.bytes()))]);
        for (r, step) in advance {
            let n = b.add(r, step);
            b.assign(r, n);
        }
    };
    let passes = b.shr(rw.blocks, unroll.trailing_zeros());
    b.for_loop(0u32, passes, 1u32, false, |b, _| pass(b, unroll));
    let rest = b.and(rw.blocks, unroll - 1);
    b.for_loop(0u32, rest, 1u32, false, |b, _| pass(b, 1));
    store_sum(&mut b, (rw.y, rw.row), acc, rw.lane, None);
    b.ret();
    b.finish()
}

/// The Q4_K (`five_bit` false) or Q5_K kernel, activations of `act`. Parameters as the
/// other formats': `w`, `x`, `y`, `rows`, `blocks`.
pub(super) fn build_k(name: String, five_bit: bool, act: FloatType) -> KernelIr {
    let (block_bytes, qs_at) = layout(five_bit);
    let mut b = KernelBuilder::new(name);
    b.overlap_neighbours();
    let rw = row_warp(&mut b, block_bytes, act);
    let (lane, blk) = (rw.lane, rw.blk);
    let c = b.shr(lane, 3u32);
    let p = b.and(lane, 7u32);
    let p4 = b.shl(p, 2u32);
    let cs = chunk_scales(&mut b, c);

    let q_off = b.mad(c, 32u32, p4);
    let q_off = b.add(q_off, qs_at);
    // Q5_K: the lane's qh word (its positions 4(l % 8)..) and sub-block 2c's bit.
    let qh_off = b.add(p4, 16u32);
    let qh_off = b.cvt::<U64, U32>(qh_off, None);
    let qhp = b.add(blk, qh_off);
    let q_off = b.cvt::<U64, U32>(q_off, None);
    let qp = b.add(blk, q_off);
    let x_elem = b.mad(c, 64u32, p4);
    let xp = elem_addr(&mut b, rw.x, x_elem, act.bytes());

    let per_block: &[Reg<U64>] = if five_bit { &[qp, qhp] } else { &[qp] };
    let load = |b: &mut KernelBuilder, s: u32| {
        let w = i64::from(s * block_bytes);
        let x = 256 * i64::from(s);
        Loaded {
            head: b.ld::<U32, U64>(Space::Global, blk, w),
            s: std::array::from_fn(|k| b.ld::<U32, U64>(Space::Global, blk, w + 4 + 4 * k as i64)),
            q: b.ld::<U32, U64>(Space::Global, qp, w),
            qh: five_bit.then(|| b.ld::<U32, U64>(Space::Global, qhp, w)),
            xl: four(load_x(b, act, xp, x, 4)),
            xh: four(load_x(b, act, xp, x + 32, 4)),
        }
    };
    row_blocks(b, &rw, (xp, ROW_UNROLL), per_block, load, |b, l| {
        super_block_dot(b, l, &cs)
    })
}
