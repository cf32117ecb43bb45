//! The Q6_K matrix-vector kernel: 256-element super-blocks of 210 bytes (128 bytes of
//! low nibbles `ql`, 64 bytes of high bit pairs `qh`, sixteen signed 8-bit scales, the
//! f16 `d` last): `w = d * sc * (q - 32)`. 210 is 2 mod 4, so the weight loads are
//! 16-bit.
//!
//! One warp per row, one super-block per step (the frame is qgemv_k.rs's `row_warp`).
//! Lane `16h + i` takes half `h` of the block and the element pair `l = 2i, 2i + 1` of
//! each of its four 32-element quarters `k` (elements `128h + 32k + l`): the low four
//! bits from byte `64h + 32(k % 2) + l` of `ql` (its low nibble for `k < 2`, its high one
//! after), bits 4-5 from byte `32h + l` of `qh` (bits `2k, 2k + 1`), the scale from
//! `8h + 2k + l / 16`.

use super::float_type::FloatType;
use super::helpers::elem_addr;
use super::qgemv::{f16_bits, load_x};
use super::qgemv_k::{row_blocks, row_warp};
use crate::ptx::{F32, KernelBuilder, KernelIr, Reg, Rounding, S32, Space, Src, U16, U32, U64};

/// Bytes per super-block.
pub(super) const BLOCK_BYTES: u32 = 210;

/// The 16-bit word at `base + off`, widened.
fn word(b: &mut KernelBuilder, base: Reg<U64>, off: i64) -> Reg<U32> {
    let h = b.ld::<U16, U64>(Space::Global, base, off);
    b.cvt::<U32, U16>(h, None)
}

/// The quant of element pair member `j` (0 or 1) of quarter `k`, minus 32, as f32.
fn quant(b: &mut KernelBuilder, low: Reg<U32>, high: Reg<U32>, j: u32, k: u32) -> Reg<F32> {
    let nib = b.shr(low, 8 * j + 4 * (k / 2));
    let nib = b.and(nib, 15u32);
    let top = b.shr(high, 8 * j + 2 * k);
    let top = b.and(top, 3u32);
    let top = b.shl(top, 4u32);
    let q = b.or(nib, top);
    let f = b.cvt::<F32, U32>(q, Some(Rounding::Rn));
    b.sub(f, 32.0f32)
}

/// The signed byte of `w` at bit `sel8` (a register: 0 or 8).
pub(super) fn signed_byte(b: &mut KernelBuilder, w: Reg<U32>, sel8: Reg<U32>) -> Reg<S32> {
    let s = b.shr(w, sel8);
    let s = b.shl(s, 24u32);
    let s = b.bitcast32::<S32, U32>(s);
    b.shr(s, 24u32)
}

/// [`signed_byte`] as f32.
pub(super) fn scale(b: &mut KernelBuilder, w: Reg<U32>, sel8: Reg<U32>) -> Reg<F32> {
    let s = signed_byte(b, w, sel8);
    b.cvt::<F32, S32>(s, Some(Rounding::Rn))
}

/// The six-bit quants of four elements as bytes: the nibbles of `ql` at `nib_shift`
/// (0 or 4), and above them the bit pairs of `qh` at `pair + up`.
pub(super) fn quant_bytes6(
    b: &mut KernelBuilder,
    ql: Reg<U32>,
    nib_shift: impl Into<Src<U32>>,
    (qh, pair, up): (Reg<U32>, Reg<U32>, u32),
) -> Reg<U32> {
    let lo = b.shr(ql, nib_shift);
    let lo = b.and(lo, 0x0F0F_0F0Fu32);
    let s = b.add(pair, up);
    let hi = b.shr(qh, s);
    let hi = b.and(hi, 0x0303_0303u32);
    let hi = b.shl(hi, 4u32);
    b.or(lo, hi)
}

/// `d` times the signed scale at bit `sel8` of the 16-bit word at `[scp + off]`.
pub(super) fn scaled_d(
    b: &mut KernelBuilder,
    d: Reg<F32>,
    (scp, off): (Reg<U64>, i64),
    sel8: Reg<U32>,
) -> Reg<F32> {
    let w = b.ld::<U16, U64>(Space::Global, scp, off);
    let w = b.cvt::<U32, U16>(w, None);
    let sc = scale(b, w, sel8);
    b.mul(d, sc)
}

/// The super-block's `d` (the f16 it ends with) at `blk`, as f32.
pub(super) fn block_d(b: &mut KernelBuilder, blk: Reg<U64>) -> Reg<F32> {
    let d = b.ld::<U16, U64>(Space::Global, blk, i64::from(BLOCK_BYTES) - 2);
    f16_bits(b, d)
}

/// The Q6_K kernel. Parameters as the other formats': `w`, `x`, `y`, `rows`, `blocks`.
pub(super) fn build_q6k(name: String, act: FloatType) -> KernelIr {
    let mut b = KernelBuilder::new(name);
    b.overlap_neighbours();
    let rw = row_warp(&mut b, BLOCK_BYTES, act);
    let (lane, blk) = (rw.lane, rw.blk);
    let h = b.shr(lane, 4u32);
    let i = b.and(lane, 15u32);
    let l0 = b.shl(i, 1u32);
    // Byte offsets in the block: ql pair, qh pair, the even word holding the scales.
    let ql_off = b.mad(h, 64u32, l0);
    let qh_off = b.mad(h, 32u32, l0);
    let qh_off = b.add(qh_off, 128u32);
    let sc_off = b.mad(h, 8u32, 192u32);
    // Which byte of each scale word: l / 16, as a shift.
    let sel = b.shr(l0, 4u32);
    let sel8 = b.shl(sel, 3u32);

    let x_elem = b.mad(h, 128u32, l0);
    let xp = elem_addr(&mut b, rw.x, x_elem, act.bytes());
    let offs: Vec<Reg<U64>> = [ql_off, qh_off, sc_off]
        .into_iter()
        .map(|o| b.cvt::<U64, U32>(o, None))
        .collect();

    let qlp = b.add(blk, offs[0]);
    let qhp = b.add(blk, offs[1]);
    let scp = b.add(blk, offs[2]);
    let load = |b: &mut KernelBuilder, s: u32| {
        let w = i64::from(s * BLOCK_BYTES);
        let x = 256 * i64::from(s);
        Loaded {
            ql: [word(b, qlp, w), word(b, qlp, w + 32)],
            qh: word(b, qhp, w),
            sc: std::array::from_fn(|k| word(b, scp, w + 2 * k as i64)),
            d: b.ld::<U16, U64>(Space::Global, blk, w + 208),
            xs: std::array::from_fn(|k| load_x(b, act, xp, x + 32 * k as i64, 2)),
        }
    };
    // Two super-blocks a pass: with the pass's loads in a block of their own, four
    // held 92 registers and ran 0.88-0.99x at 14336 and 32000 rows; two (56 registers)
    // ran 1.02-1.32x the unpinned four at every shape (H100, f32 and f16 activations).
    row_blocks(b, &rw, (xp, 2), &[qlp, qhp, scp], load, |b, l| {
        let mut sum: Option<Reg<F32>> = None;
        for k in 0..4u32 {
            let low = l.ql[(k % 2) as usize];
            let q0 = quant(b, low, l.qh, 0, k);
            let q1 = quant(b, low, l.qh, 1, k);
            let xk = &l.xs[k as usize];
            let part = b.mul(q0, xk[0]);
            let part = b.fma(q1, xk[1], part);
            let s = scale(b, l.sc[k as usize], sel8);
            sum = Some(match sum {
                None => b.mul(s, part),
                Some(acc) => b.fma(s, part, acc),
            });
        }
        let d = f16_bits(b, l.d);
        b.mul(d, sum.expect("four quarters"))
    })
}

/// One lane's loads for one super-block: its two `ql` words, its `qh` word, the four
/// scale words, `d`, and two activations of each quarter.
struct Loaded {
    ql: [Reg<U32>; 2],
    qh: Reg<U32>,
    sc: [Reg<U32>; 4],
    d: Reg<U16>,
    xs: [Vec<Reg<F32>>; 4],
}
