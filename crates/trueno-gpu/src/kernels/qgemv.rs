//! Matrix-vector products straight from GGML-quantized weights: each block is dequantized
//! in registers as it streams in, so the weights cross the memory bus once, at their
//! quantized size. Decode (one token) is bound by exactly those bytes.
//!
//! One warp per weight row. Four lanes share a 32-element block (each takes a quarter of
//! its quants and the matching activations), so a warp step covers eight consecutive
//! blocks, and the loads of [`UNROLL`] steps are all issued before any of their math:
//! enough bytes in flight per warp to cover DRAM latency at LLM widths. Lanes keep f32
//! partial sums (one per block, scaled once), reduced across the warp at the end.
//!
//! Weights live in a `u16` buffer: every GGML block is a whole number of 16-bit words
//! (Q8_0: 34 bytes, Q4_0: 18) but not of 32-bit ones, so 16 bits is the widest access that
//! is always aligned.

use super::helpers::warp_reduce;
use super::{Family, Kernel, LaunchConfig, blocks_for, check_dims};
use crate::error::{Result, shape_err};
use crate::ptx::{
    Cmp, F16, F32, KernelBuilder, KernelIr, Pred, PtxType, Reg, Rounding, S32, Space, U16, U32, U64,
};

/// Threads per block: eight warps, eight rows.
pub const THREADS: u32 = 256;
/// Rows per block (one per warp).
const ROWS_PER_BLOCK: u32 = THREADS / 32;
/// Quantized blocks a warp covers per step (four lanes each).
const BLOCKS_PER_STEP: u32 = 8;
/// Steps whose loads are issued together.
pub const UNROLL: u32 = 4;
/// Elements per quantized block (both formats).
pub const BLOCK_ELEMS: usize = 32;

/// The GGML block formats with a GPU matrix-vector kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuantFormat {
    /// 32 signed 8-bit quants and an f16 scale: `w = d * q`.
    Q8_0,
    /// 32 4-bit quants and an f16 scale: `w = d * (q - 8)`; byte `j` holds element `j` in
    /// its low nibble and element `j + 16` in its high one.
    Q4_0,
}

impl QuantFormat {
    /// Every format.
    pub const ALL: [QuantFormat; 2] = [QuantFormat::Q8_0, QuantFormat::Q4_0];

    /// GGML's name, lower case.
    pub fn name(self) -> &'static str {
        match self {
            QuantFormat::Q8_0 => "q8_0",
            QuantFormat::Q4_0 => "q4_0",
        }
    }

    /// Bytes per block of [`BLOCK_ELEMS`] weights.
    pub fn block_bytes(self) -> usize {
        match self {
            QuantFormat::Q8_0 => 34,
            QuantFormat::Q4_0 => 18,
        }
    }

    /// Bytes of a `rows x cols` matrix (`cols` a multiple of [`BLOCK_ELEMS`]).
    pub fn matrix_bytes(self, rows: usize, cols: usize) -> Option<usize> {
        (cols / BLOCK_ELEMS)
            .checked_mul(self.block_bytes())?
            .checked_mul(rows)
    }

    /// Quant bytes one lane reads per block (a quarter of the block's).
    fn lane_bytes(self) -> u32 {
        match self {
            QuantFormat::Q8_0 => 8,
            QuantFormat::Q4_0 => 4,
        }
    }

    /// Where a lane's activations start within the block, per quarter, in elements.
    fn lane_elems(self) -> u32 {
        self.lane_bytes()
    }
}

/// `y = W x` for a row-major `rows x cols` matrix `W` of [`QuantFormat`] blocks (each row
/// `cols / 32` consecutive blocks, GGML's layout) and f32 `x`, `y`. Parameters: `w`
/// (`u16` words of the blocks), `x`, `y`, `rows`, `blocks` (per row).
#[derive(Clone, Copy, Debug)]
pub struct QgemvKernel(pub QuantFormat);

/// One lane's loads for one block.
struct Loaded {
    d: Reg<U16>,
    q: Vec<Reg<U16>>,
    x: [Reg<F32>; 8],
}

impl QgemvKernel {
    /// Issues one block's loads under `valid` (registers zeroed first, so a skipped block
    /// adds exactly nothing).
    fn load(
        &self,
        b: &mut KernelBuilder,
        valid: Reg<Pred>,
        block: Reg<U64>,
        quants: Reg<U64>,
        xs: Reg<U64>,
        step: u32,
    ) -> Loaded {
        let f = self.0;
        let w_off = i64::from(step * BLOCKS_PER_STEP) * f.block_bytes() as i64;
        let x_off = i64::from(step * BLOCKS_PER_STEP) * (BLOCK_ELEMS as i64 * 4);
        let d = b.mov::<U16>(0u16);
        let q: Vec<Reg<U16>> = (0..f.lane_bytes() / 2)
            .map(|_| b.mov::<U16>(0u16))
            .collect();
        let x: [Reg<F32>; 8] = std::array::from_fn(|_| b.mov::<F32>(0.0f32));
        // Q8_0: elements 8q..8q+8 are adjacent; Q4_0: 4q..4q+4 and 16+4q..16+4q+4.
        let second_half = match f {
            QuantFormat::Q8_0 => 16,
            QuantFormat::Q4_0 => 64,
        };
        b.predicated(valid, |b| {
            let dv = b.ld::<U16, U64>(Space::Global, block, w_off);
            b.assign(d, dv);
            for (i, &r) in q.iter().enumerate() {
                let v = b.ld::<U16, U64>(Space::Global, quants, w_off + 2 * i as i64);
                b.assign(r, v);
            }
            let lo = b.ld_vec::<F32, U64, 4>(Space::Global, xs, x_off);
            let hi = b.ld_vec::<F32, U64, 4>(Space::Global, xs, x_off + second_half);
            for (k, v) in lo.into_iter().chain(hi).enumerate() {
                b.assign(x[k], v);
            }
        });
        Loaded { d, q, x }
    }

    /// `d * sum(x_k * q_k)` over the lane's eight elements of one block.
    fn block_dot(&self, b: &mut KernelBuilder, l: &Loaded) -> Reg<F32> {
        let words: Vec<Reg<U32>> =
            l.q.chunks(2)
                .map(|pair| {
                    let lo = b.cvt::<U32, U16>(pair[0], None);
                    let hi = b.cvt::<U32, U16>(pair[1], None);
                    let hi = b.shl(hi, 16u32);
                    b.or(lo, hi)
                })
                .collect();
        // The eight quants as f32, in the order of `l.x`.
        let quants: Vec<Reg<F32>> = match self.0 {
            QuantFormat::Q8_0 => (0..8)
                .map(|k| {
                    // Sign-extend byte k % 4 of its word: shift it to the top, then
                    // arithmetic-shift it back down.
                    let w = b.bitcast32::<S32, U32>(words[k / 4]);
                    let up = b.shl(w, 24 - 8 * (k as u32 % 4));
                    let v = b.shr(up, 24u32);
                    b.cvt::<F32, S32>(v, Some(Rounding::Rn))
                })
                .collect(),
            QuantFormat::Q4_0 => (0..8)
                .map(|k| {
                    // Low nibbles of bytes 0..4 first, then their high nibbles.
                    let shift = 8 * (k as u32 % 4) + 4 * (k as u32 / 4);
                    let s = b.shr(words[0], shift);
                    let n = b.and(s, 0xFu32);
                    let v = b.cvt::<F32, U32>(n, Some(Rounding::Rn));
                    b.sub(v, 8.0f32)
                })
                .collect(),
        };
        let mut sum = b.mul(l.x[0], quants[0]);
        for (&x, &q) in l.x.iter().zip(&quants).skip(1) {
            sum = b.fma(x, q, sum);
        }
        let dh = b.bitcast16::<F16, U16>(l.d);
        let d = b.cvt::<F32, F16>(dh, None);
        b.mul(d, sum)
    }
}

impl Kernel for QgemvKernel {
    fn name(&self) -> String {
        format!("trueno_qgemv_{}_f32", self.0.name())
    }

    fn family(&self) -> Family {
        Family::Qgemv
    }

    fn build(&self) -> KernelIr {
        let f = self.0;
        let mut b = KernelBuilder::new(self.name());
        b.max_threads(THREADS);
        let w = b.param_ptr("w", PtxType::U16);
        let x = b.param_ptr("x", PtxType::F32);
        let y = b.param_ptr("y", PtxType::F32);
        let rows = b.param_u32("rows");
        let blocks = b.param_u32("blocks");

        let tid = b.tid_x();
        let warp = b.shr(tid, 5u32);
        let lane = b.and(tid, 31u32);
        let cta = b.ctaid_x();
        let row = b.mad(cta, ROWS_PER_BLOCK, warp);
        // Whole warps leave together, so the shuffles below see full warps.
        let past = b.setp::<U32>(Cmp::Ge, row, rows);
        b.exit_if(past);

        let quarter = b.and(lane, 3u32);
        let first = b.shr(lane, 2u32);
        // This lane's first block, its quant bytes, and its activations.
        let row_bytes = b.mul(blocks, f.block_bytes() as u32);
        let row_off = b.mul_wide(row, row_bytes);
        let row_ptr = b.add(w, row_off);
        let blk_off = b.mul_wide(first, f.block_bytes() as u32);
        let block_ptr = b.add(row_ptr, blk_off);
        let lane_q = b.mad(quarter, f.lane_bytes(), 2u32);
        let lane_q = b.cvt::<U64, U32>(lane_q, None);
        let quant_ptr = b.add(block_ptr, lane_q);
        let first_elem = b.shl(first, 5u32);
        let lane_elem = b.mad(quarter, f.lane_elems(), first_elem);
        let x_ptr = b.mul_wide(lane_elem, 4u32);
        let x_ptr = b.add(x, x_ptr);

        let acc = b.mov::<F32>(0.0f32);
        let group = BLOCKS_PER_STEP * UNROLL;
        let w_step = u64::from(group) * f.block_bytes() as u64;
        let x_step = u64::from(group) * BLOCK_ELEMS as u64 * 4;
        b.for_loop(first, blocks, group, false, |b, blk| {
            let loads: Vec<Loaded> = (0..UNROLL)
                .map(|s| {
                    let k = b.add(blk, s * BLOCKS_PER_STEP);
                    let valid = b.setp::<U32>(Cmp::Lt, k, blocks);
                    self.load(b, valid, block_ptr, quant_ptr, x_ptr, s)
                })
                .collect();
            for l in &loads {
                let part = self.block_dot(b, l);
                let next = b.add(acc, part);
                b.assign(acc, next);
            }
            for (p, step) in [(block_ptr, w_step), (quant_ptr, w_step), (x_ptr, x_step)] {
                let n = b.add(p, step);
                b.assign(p, n);
            }
        });
        let total = warp_reduce(&mut b, acc, super::helpers::add);
        let lane0 = b.setp::<U32>(Cmp::Eq, lane, 0u32);
        b.predicated(lane0, |b| {
            let at = b.mul_wide(row, 4u32);
            let at = b.add(y, at);
            b.st::<F32, U64>(Space::Global, at, 0, total);
        });
        b.ret();
        b.finish()
    }

    /// `dims = [rows, cols]`; `cols` must be a multiple of 32.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        let name = self.name();
        check_dims(&name, dims, 2)?;
        let (rows, cols) = (dims[0], dims[1]);
        if !cols.is_multiple_of(BLOCK_ELEMS) {
            return shape_err(&name, format!("cols {cols} is not a multiple of 32"));
        }
        match self.0.matrix_bytes(1, cols) {
            Some(b) if b <= u32::MAX as usize => {}
            _ => return shape_err(&name, format!("a row of {cols} is over 4 GiB")),
        }
        Ok(LaunchConfig::linear(
            blocks_for(&name, rows, ROWS_PER_BLOCK as usize, i32::MAX as u32)?,
            THREADS,
        ))
    }
}

/// Every quantized matrix-vector kernel.
pub fn all() -> Vec<Box<dyn Kernel>> {
    QuantFormat::ALL
        .iter()
        .map(|&f| Box::new(QgemvKernel(f)) as Box<dyn Kernel>)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_that_are_not_whole_blocks_are_errors() {
        for f in QuantFormat::ALL {
            let k = QgemvKernel(f);
            assert!(k.launch_config(&[4, 33]).is_err());
            assert!(k.launch_config(&[0, 32]).is_err());
            assert!(k.launch_config(&[4, 0]).is_err());
            let c = k.launch_config(&[9, 64]).unwrap();
            assert_eq!(c.grid.0, 2, "9 rows need two 8-row blocks");
            assert_eq!(c.block.0, THREADS);
        }
    }

    #[test]
    fn block_sizes_are_ggmls() {
        // 2-byte f16 scale plus the packed quants.
        assert_eq!(QuantFormat::Q8_0.block_bytes(), 2 + 32);
        assert_eq!(QuantFormat::Q4_0.block_bytes(), 2 + 16);
        assert_eq!(QuantFormat::Q4_0.matrix_bytes(3, 64), Some(3 * 2 * 18));
    }
}
