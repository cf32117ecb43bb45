//! Quantized rows to f32 on the device: the token-embedding lookup of a decode loop (the
//! rows named by a buffer of token ids, so the id argmax wrote never visits the host)
//! and whole-matrix dequantization (row `t` of the output is row `t` of the matrix).
//!
//! One warp per 256 output values of one row: a K-quant super-block, or eight Q8_0 /
//! Q4_0 blocks (the row's last group of eight may be short; its spare lanes leave). Each
//! lane writes two runs of four values in 16-byte stores, the runs its format's packing
//! hands one lane (a K-quant lane: the low and high nibbles of four quant bytes, as in the
//! matrix-vector kernels). An id past the table's rows gives a row of NaN, never a read
//! outside the table.

use super::helpers::{clamped_row, elem_addr, lane_and_warp, pair16};
use super::qgemv::{QuantFormat, byte_floats, f16_bits};
use super::qgemv_k::{chunk_scales, half_of, layout, quant_bytes, scale_min};
use super::qgemv_q6k::{self, quant_bytes6, scaled_d};
use super::{Family, Kernel, LaunchConfig, blocks_for};
use crate::error::Result;
use crate::ptx::{Cmp, F32, KernelBuilder, KernelIr, PtxType, Reg, Rounding, Space, U16, U32, U64};

/// Threads per block: eight warps, each 256 values.
const THREADS: u32 = 256;
/// Values a warp writes.
const WARP_VALUES: u32 = 256;

/// Rows of a `[table_rows, cols]` matrix of [`QuantFormat`] blocks (GGML's layout) as
/// f32: `y[t * cols + c] = W[ids[t], c]` (`gather` nonzero) or `W[t, c]`. Parameters:
/// `w` (`u16` words of the blocks), `ids`, `y`, `rows` (output rows), `blocks` (per
/// row), `table_rows`, `gather`.
#[derive(Clone, Copy, Debug)]
pub struct DequantRowsKernel(pub QuantFormat);

/// The eight values a lane writes: four at element `at[0]` of its 256, four at `at[1]`.
pub(super) struct LaneValues {
    pub at: [Reg<U32>; 2],
    pub v: [[Reg<F32>; 4]; 2],
}

/// Lane `lane`'s eight values of the 256 at `grp` (a K-quant super-block, or eight Q8_0
/// / Q4_0 blocks).
pub(super) fn lane_values(
    b: &mut KernelBuilder,
    f: QuantFormat,
    grp: Reg<U64>,
    lane: Reg<U32>,
) -> LaneValues {
    match f {
        QuantFormat::Q4K | QuantFormat::Q5K => k4_lane(b, grp, lane, f == QuantFormat::Q5K),
        QuantFormat::Q6K => q6k_lane(b, grp, lane),
        QuantFormat::Q8_0 | QuantFormat::Q4_0 => block32_lane(b, grp, lane, f),
    }
}

/// `scale * q - offset` for four quant floats.
fn affine(
    b: &mut KernelBuilder,
    q: [Reg<F32>; 4],
    scale: Reg<F32>,
    offset: Option<Reg<F32>>,
) -> [Reg<F32>; 4] {
    q.map(|q| match offset {
        Some(o) => {
            let no = b.neg(o);
            b.fma(scale, q, no)
        }
        None => b.mul(scale, q),
    })
}

/// Two 16-bit loads at `[p + off]` and `[p + off + 2]` as one word (the 2-byte aligned
/// blocks: Q8_0, Q4_0, Q6_K).
pub(super) fn word16(b: &mut KernelBuilder, p: Reg<U64>, off: i64) -> Reg<U32> {
    let lo = b.ld::<U16, U64>(Space::Global, p, off);
    let hi = b.ld::<U16, U64>(Space::Global, p, off + 2);
    pair16(b, lo, hi)
}

/// A Q4_K / Q5_K lane: chunk `c = lane / 8` of the super-block at `blk`, quant bytes
/// `4 (lane % 8)..` of it: elements `64c + 4 (lane % 8)..` (low nibbles, sub-block `2c`)
/// and 32 on (high nibbles, `2c + 1`), `d * sc * q - dmin * m` each.
fn k4_lane(b: &mut KernelBuilder, blk: Reg<U64>, lane: Reg<U32>, five_bit: bool) -> LaneValues {
    let (_, qs_at) = layout(five_bit);
    let c = b.shr(lane, 3u32);
    let i = b.and(lane, 7u32);
    let sp = chunk_scales(b, c);
    let head = b.ld_vec::<U32, U64, 4>(Space::Global, blk, 0);
    let q_off = b.shl(c, 5u32);
    let q_off = b.mad(i, 4u32, q_off);
    let qp = elem_addr(b, blk, q_off, 1);
    let q = b.ld::<U32, U64>(Space::Global, qp, i64::from(qs_at));
    let fifth = five_bit.then(|| {
        let hp = elem_addr(b, blk, i, 4);
        (b.ld::<U32, U64>(Space::Global, hp, 16), sp.j0)
    });
    let (lo, hi) = quant_bytes(b, q, fifth);
    let s = [head[1], head[2], head[3]];
    let d = half_of(b, head[0], false);
    let dmin = half_of(b, head[0], true);
    let half = |b: &mut KernelBuilder, bytes: Reg<U32>, shift: Reg<U32>| {
        let (sc, m) = scale_min(b, s, sp.low_pack, shift);
        let sc = b.cvt::<F32, U32>(sc, Some(Rounding::Rn));
        let m = b.cvt::<F32, U32>(m, Some(Rounding::Rn));
        let scale = b.mul(d, sc);
        let offset = b.mul(dmin, m);
        let q = byte_floats(b, bytes, 0.0);
        affine(b, q, scale, Some(offset))
    };
    let v = [half(b, lo, sp.shift0), half(b, hi, sp.shift1)];
    let at0 = b.shl(c, 6u32);
    let at0 = b.mad(i, 4u32, at0);
    let at1 = b.add(at0, 32u32);
    LaneValues { at: [at0, at1], v }
}

/// A Q6_K lane: half `h = lane / 16`, quarters `k = (lane / 8) % 2` and `k + 2`,
/// elements `e0 = 4 (lane % 8)..e0 + 4` of each (element `128h + 32k + e`): the low
/// nibbles of `ql` bytes `64h + 32k + e` for quarter `k`, their high ones for `k + 2`,
/// bits `2k, 2k + 1` (and `2k + 4, 2k + 5`) of `qh` bytes `32h + e`; `d * sc * (q - 32)`
/// with the signed scale of the element's group of 16.
fn q6k_lane(b: &mut KernelBuilder, blk: Reg<U64>, lane: Reg<U32>) -> LaneValues {
    let h = b.shr(lane, 4u32);
    let k = b.shr(lane, 3u32);
    let k = b.and(k, 1u32);
    let i = b.and(lane, 7u32);
    let e0 = b.shl(i, 2u32);
    let ql = b.mad(h, 64u32, e0);
    let ql = b.mad(k, 32u32, ql);
    let qlp = elem_addr(b, blk, ql, 1);
    let ql = word16(b, qlp, 0);
    let qh = b.mad(h, 32u32, e0);
    let qhp = elem_addr(b, blk, qh, 1);
    let qh = word16(b, qhp, 128);
    // The scales of quarters k and k + 2 for this lane's group of 16 (e0 / 16 = i / 4):
    // bytes 192 + 8h + 2k + i / 4 and 4 on, read as the 16-bit words holding them.
    let sc = b.mad(h, 8u32, 192u32);
    let sc = b.mad(k, 2u32, sc);
    let scp = elem_addr(b, blk, sc, 1);
    let sel8 = b.shr(i, 2u32);
    let sel8 = b.shl(sel8, 3u32);
    let d = qgemv_q6k::block_d(b, blk);
    let pair = b.shl(k, 1u32);
    let quarter = |b: &mut KernelBuilder, nib_shift: u32, up: u32, sc_off: i64| {
        let q = quant_bytes6(b, ql, nib_shift, (qh, pair, up));
        let scale = scaled_d(b, d, (scp, sc_off), sel8);
        let q = byte_floats(b, q, 32.0);
        affine(b, q, scale, None)
    };
    let v = [quarter(b, 0, 0, 0), quarter(b, 4, 4, 4)];
    let at0 = b.shl(h, 7u32);
    let at0 = b.mad(k, 32u32, at0);
    let at0 = b.add(at0, e0);
    let at1 = b.add(at0, 64u32);
    LaneValues { at: [at0, at1], v }
}

/// A Q8_0 / Q4_0 lane: block `lane / 4` of the eight at `grp`, part `j = lane % 4`: Q8_0
/// quants `8j..8j + 8` (`d * q`), Q4_0 quant bytes `4j..4j + 4`, whose low nibbles are
/// elements `4j..` and high ones `16 + 4j..` (`d * (q - 8)`).
fn block32_lane(
    b: &mut KernelBuilder,
    grp: Reg<U64>,
    lane: Reg<U32>,
    f: QuantFormat,
) -> LaneValues {
    let blk = b.shr(lane, 2u32);
    let j = b.and(lane, 3u32);
    let bp = elem_addr(b, grp, blk, f.block_bytes() as u32);
    let d = b.ld::<U16, U64>(Space::Global, bp, 0);
    let d = f16_bits(b, d);
    let base = b.shl(blk, 5u32);
    if f == QuantFormat::Q8_0 {
        let qp = elem_addr(b, bp, j, 8);
        let words = [word16(b, qp, 2), word16(b, qp, 6)];
        let v = words.map(|w| {
            let w = b.xor(w, 0x8080_8080u32);
            let q = byte_floats(b, w, 128.0);
            affine(b, q, d, None)
        });
        let at0 = b.mad(j, 8u32, base);
        let at1 = b.add(at0, 4u32);
        LaneValues { at: [at0, at1], v }
    } else {
        let qp = elem_addr(b, bp, j, 4);
        let w = word16(b, qp, 2);
        let lo = b.and(w, 0x0F0F_0F0Fu32);
        let hi = b.shr(w, 4u32);
        let hi = b.and(hi, 0x0F0F_0F0Fu32);
        let v = [lo, hi].map(|q| {
            let q = byte_floats(b, q, 8.0);
            affine(b, q, d, None)
        });
        let at0 = b.mad(j, 4u32, base);
        let at1 = b.add(at0, 16u32);
        LaneValues { at: [at0, at1], v }
    }
}

impl DequantRowsKernel {
    fn build_ir(&self) -> KernelIr {
        let f = self.0;
        let mut b = KernelBuilder::new(self.name());
        b.overlap_neighbours();
        b.max_threads(THREADS);
        let w = b.param_ptr("w", PtxType::U16);
        let ids = b.param_ptr("ids", PtxType::U32);
        let y = b.param_ptr("y", PtxType::F32);
        let rows = b.param_u32("rows");
        let blocks = b.param_u32("blocks");
        let table_rows = b.param_u32("table_rows");
        let gather = b.param_u32("gather");
        let (lane, warp) = lane_and_warp(&mut b, THREADS);
        // The warp's output row and its group of 256 values in it.
        let per_group = WARP_VALUES / f.block_elems() as u32;
        let groups = b.add(blocks, per_group - 1);
        let groups = b.div_int(groups, per_group);
        let t = b.div_int(warp, groups);
        let g = b.rem(warp, groups);
        let past = b.setp::<U32>(Cmp::Ge, t, rows);
        b.exit_if(past);
        if per_group > 1 {
            // The row's last group may hold fewer than eight blocks.
            let blk = b.shr(lane, 2u32);
            let blk = b.mad(g, per_group, blk);
            let spare = b.setp::<U32>(Cmp::Ge, blk, blocks);
            b.exit_if(spare);
        }
        let by_id = b.setp::<U32>(Cmp::Ne, gather, 0u32);
        let id = b.mov::<U32>(t);
        b.predicated(by_id, |b| {
            let ip = elem_addr(b, ids, t, 4);
            let v = b.ld::<U32, U64>(Space::Global, ip, 0);
            b.assign(id, v);
        });
        // An id past the table reads its last row and writes NaN.
        let (row, bad) = clamped_row(&mut b, id, table_rows);
        let row_bytes = b.mul(blocks, f.block_bytes() as u32);
        let row_off = b.mul_wide(row, row_bytes);
        let wr = b.add(w, row_off);
        let grp = elem_addr(&mut b, wr, g, per_group * f.block_bytes() as u32);
        let lv = lane_values(&mut b, f, grp, lane);
        // Output element t * cols + 256 g + at: under 2^32 (launch_config checks).
        let cols = b.mul(blocks, f.block_elems() as u32);
        let group_at = b.mul(g, WARP_VALUES);
        let row_at = b.mad(t, cols, group_at);
        for (at, v) in lv.at.iter().zip(&lv.v) {
            let at = b.add(row_at, *at);
            let p = elem_addr(&mut b, y, at, 4);
            let v = v.map(|x| b.selp(f32::NAN, x, bad));
            b.st_vec::<F32, U64>(Space::Global, p, 0, &v);
        }
        b.ret();
        b.finish()
    }
}

impl Kernel for DequantRowsKernel {
    fn name(&self) -> String {
        format!("trueno_dequant_rows_{}_f32", self.0.name())
    }

    fn family(&self) -> Family {
        Family::Qgemv
    }

    fn build(&self) -> KernelIr {
        self.build_ir()
    }

    /// `dims = [rows, cols]` of the output; `cols` whole blocks, a table row under 4 GiB.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        let name = self.name();
        let (rows, cols) = self.0.check_matrix(&name, dims, self.0.block_elems())?;
        let warps = rows
            .checked_mul(cols.div_ceil(WARP_VALUES as usize))
            .filter(|&w| w <= u32::MAX as usize)
            .ok_or_else(|| crate::error::GpuError::Shape {
                kernel: name.clone(),
                reason: format!("{rows} rows of {cols} are over 2^32 warps"),
            })?;
        Ok(LaunchConfig::linear(
            blocks_for(&name, warps, (THREADS / 32) as usize, i32::MAX as u32)?,
            THREADS,
        ))
    }
}

/// One row-dequantization kernel per format.
pub fn all() -> Vec<Box<dyn Kernel>> {
    QuantFormat::ALL
        .iter()
        .map(|&f| Box::new(DequantRowsKernel(f)) as Box<dyn Kernel>)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launches_cover_every_group_of_256_and_refuse_ragged_blocks() {
        for f in QuantFormat::ALL {
            let k = DequantRowsKernel(f);
            let e = f.block_elems();
            assert!(k.launch_config(&[3, e + 1]).is_err());
            assert!(k.launch_config(&[0, e]).is_err());
            assert!(k.launch_config(&[3, 0]).is_err());
            // 17 rows of 512: 34 warps in 5 blocks of eight.
            let c = k.launch_config(&[17, 512]).unwrap();
            assert_eq!((c.grid.0, c.block.0), (5, THREADS), "{}", f.name());
        }
        // 896 columns: 28 blocks of 32, four groups (the last of four blocks).
        let c = DequantRowsKernel(QuantFormat::Q8_0)
            .launch_config(&[8, 896])
            .unwrap();
        assert_eq!(c.grid.0, 4);
    }
}
