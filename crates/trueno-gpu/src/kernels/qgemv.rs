//! Matrix-vector products straight from GGML-quantized weights: each block is dequantized
//! in registers as it streams in, so the weights cross the memory bus once, at their
//! quantized size. Decode (one token) is bound by exactly those bytes.
//!
//! Each warp takes [`ROWS_PER_WARP`] rows, so every activation it loads serves that many
//! rows (the activations are f32: without the reuse they would be most of the traffic).
//! Eight lanes share a 32-element block, four elements each, so one 16-byte activation
//! load per lane reads four whole 128-byte lines per warp (bf16/f16 activations: 8-byte
//! loads, widened exactly when the math needs them); a warp step covers four
//! consecutive blocks of each row, and the loads of [`UNROLL`] steps are issued before any
//! of their math (enough bytes in flight per warp to cover DRAM latency). Lanes keep f32
//! partial sums (one per block, scaled once), reduced across the warp at the end.
//!
//! Weights live in a `u16` buffer: every GGML block is a whole number of 16-bit words,
//! and Q8_0's 34 bytes and Q4_0's 18 are not of 32-bit ones, so 16 bits is the widest
//! access that is always aligned there. The K-quants have their own kernels, one row per
//! warp: Q4_K's 144 bytes and Q5_K's 176 take 32-bit loads (qgemv_k.rs), Q6_K's 210 take
//! 16-bit ones (qgemv_q6k.rs).

use super::float_type::{FloatType, widen};
use super::helpers::{lane_and_warp, warp_reduce};
use super::qgemv_dp4a::{QgemvQ8kBatchKernel, QgemvQ8kKernel, QgemvQ8kOneWaveKernel};
use super::qgemv_late::QgemvQ8kLateKernel;
use super::qgemv_q4k_mma::QgemvQ8kMmaKernel;
use super::qgemv_q4k_mma_one::{QgemvQ8kMmaOneKernel, TileWarps};
use super::qgemv_q6k_mma_one::QgemvQ6kMmaOneKernel;
use super::qgemv_wide::QgemvQ8kWideKernel;
use super::quantize_q8k::QuantizeQ8kKernel;
use super::{Family, Kernel, LaunchConfig, blocks_for, check_dims};
use super::{qgemv_k, qgemv_q6k};
use crate::error::{Result, shape_err};
use crate::ptx::{
    Cmp, F16, F32, KernelBuilder, KernelIr, Pred, PtxType, Reg, Space, U16, U32, U64,
};

/// Threads per block: eight warps.
pub const THREADS: u32 = 256;
/// Rows each warp computes (sharing its activation loads).
pub const ROWS_PER_WARP: u32 = 2;
/// Rows per block.
const ROWS_PER_BLOCK: u32 = THREADS / 32 * ROWS_PER_WARP;
/// Lanes per quantized block (four elements each).
const LANES_PER_BLOCK: u32 = 8;
/// Quantized blocks of a row a warp covers per step.
const BLOCKS_PER_STEP: u32 = 32 / LANES_PER_BLOCK;
/// Steps whose loads are issued together.
pub const UNROLL: u32 = 8;
/// 2^23: a float in [2^23, 2^24) has unit spacing, so its low mantissa byte is an integer.
const MAGIC: f32 = 8_388_608.0;
/// Elements per block of the 32-element formats (Q8_0, Q4_0).
const BLOCK_ELEMS: usize = 32;

/// The GGML block formats with a GPU matrix-vector kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuantFormat {
    /// 32 signed 8-bit quants and an f16 scale: `w = d * q`.
    Q8_0,
    /// 32 4-bit quants and an f16 scale: `w = d * (q - 8)`; byte `j` holds element `j` in
    /// its low nibble and element `j + 16` in its high one.
    Q4_0,
    /// 256-element super-blocks: f16 `d` and `dmin`, 6-bit scale and min per 32-element
    /// sub-block, 4-bit quants: `w = d * sc * q - dmin * m`.
    Q4K,
    /// As Q4_K with a fifth bit per quant (`q` in 0..32).
    Q5K,
    /// 256-element super-blocks: signed 8-bit scale per 16 weights, 6-bit quants (low
    /// nibbles and high bit pairs apart), f16 `d` last: `w = d * sc * (q - 32)`.
    Q6K,
}

impl QuantFormat {
    /// Every format.
    pub const ALL: [QuantFormat; 5] = [
        QuantFormat::Q8_0,
        QuantFormat::Q4_0,
        QuantFormat::Q4K,
        QuantFormat::Q5K,
        QuantFormat::Q6K,
    ];

    /// GGML's name, lower case.
    pub fn name(self) -> &'static str {
        match self {
            QuantFormat::Q8_0 => "q8_0",
            QuantFormat::Q4_0 => "q4_0",
            QuantFormat::Q4K => "q4_k",
            QuantFormat::Q5K => "q5_k",
            QuantFormat::Q6K => "q6_k",
        }
    }

    /// Weights per block.
    pub fn block_elems(self) -> usize {
        match self {
            QuantFormat::Q8_0 | QuantFormat::Q4_0 => BLOCK_ELEMS,
            QuantFormat::Q4K | QuantFormat::Q5K | QuantFormat::Q6K => 256,
        }
    }

    /// Bytes per block of [`Self::block_elems`] weights.
    pub fn block_bytes(self) -> usize {
        match self {
            QuantFormat::Q8_0 => 34,
            QuantFormat::Q4_0 => 18,
            QuantFormat::Q4K => qgemv_k::BLOCK_BYTES as usize,
            QuantFormat::Q5K => qgemv_k::BLOCK_BYTES_Q5K as usize,
            QuantFormat::Q6K => qgemv_q6k::BLOCK_BYTES as usize,
        }
    }

    /// Rows one block of threads computes.
    fn rows_per_block(self) -> u32 {
        match self {
            QuantFormat::Q4K | QuantFormat::Q5K | QuantFormat::Q6K => qgemv_k::THREADS / 32,
            _ => ROWS_PER_BLOCK,
        }
    }

    /// Bytes of a `rows x cols` matrix (`cols` a multiple of [`Self::block_elems`]).
    pub fn matrix_bytes(self, rows: usize, cols: usize) -> Option<usize> {
        (cols / self.block_elems())
            .checked_mul(self.block_bytes())?
            .checked_mul(rows)
    }

    /// `dims = [rows, cols]` of a matrix of these blocks as kernel `name` takes it:
    /// non-empty, `cols` a multiple of `per` (the block size, or more where a kernel
    /// needs whole groups), a row under 4 GiB. Returns `(rows, cols)`.
    pub(super) fn check_matrix(
        self,
        name: &str,
        dims: &[usize],
        per: usize,
    ) -> Result<(usize, usize)> {
        check_dims(name, dims, 2)?;
        let (rows, cols) = (dims[0], dims[1]);
        if !cols.is_multiple_of(per) {
            return shape_err(name, format!("cols {cols} is not a multiple of {per}"));
        }
        match self.matrix_bytes(1, cols) {
            Some(b) if b <= u32::MAX as usize => Ok((rows, cols)),
            _ => shape_err(name, format!("a row of {cols} is over 4 GiB")),
        }
    }
}

/// The parameters every quantized matrix-vector kernel takes (`w`, `x`, `y`, `rows`,
/// `blocks` per row), the lane and the warp's index in the grid.
pub(super) struct Prologue {
    pub w: Reg<U64>,
    pub x: Reg<U64>,
    pub y: Reg<U64>,
    pub rows: Reg<U32>,
    pub blocks: Reg<U32>,
    pub lane: Reg<U32>,
    pub warp: Reg<U32>,
}

/// Declares the parameters (`x` of type `act`) and indexes the warp, for blocks of
/// `threads`.
pub(super) fn prologue(b: &mut KernelBuilder, threads: u32, act: FloatType) -> Prologue {
    b.max_threads(threads);
    let w = b.param_ptr("w", PtxType::U16);
    let x = b.param_ptr("x", act.ptx());
    let y = b.param_ptr("y", PtxType::F32);
    let rows = b.param_u32("rows");
    let blocks = b.param_u32("blocks");
    let (lane, warp) = lane_and_warp(b, threads);
    Prologue {
        w,
        x,
        y,
        rows,
        blocks,
        lane,
        warp,
    }
}

/// The four bytes of `bytes` as floats minus `bias`: each byte placed under the exponent
/// of 2^23 (bytes 0x4B, 0, 0, u: the float 2^23 + u), then 2^23 + `bias` subtracted,
/// exactly, with no integer-to-float `cvt` (a quarter-rate instruction on Hopper).
pub(super) fn byte_floats(b: &mut KernelBuilder, bytes: Reg<U32>, bias: f32) -> [Reg<F32>; 4] {
    std::array::from_fn(|k| {
        let f = b.prmt(bytes, 0x4B00_0000u32, 0x7540 | k as u32);
        let f = b.bitcast32::<F32, U32>(f);
        b.sub(f, MAGIC + bias)
    })
}

/// `n` (2 or 4) activations of type `act` at element `off` from `p`, as f32: f32 in one
/// 8- or 16-byte load, bf16/f16 in half the bytes, widened exactly.
pub(super) fn load_x(
    b: &mut KernelBuilder,
    act: FloatType,
    p: Reg<U64>,
    off: i64,
    n: usize,
) -> Vec<Reg<F32>> {
    let bytes = off * i64::from(act.bytes());
    match (act, n) {
        (FloatType::F32, 2) => b.ld_vec::<F32, U64, 2>(Space::Global, p, bytes).to_vec(),
        (FloatType::F32, _) => b.ld_vec::<F32, U64, 4>(Space::Global, p, bytes).to_vec(),
        (_, 2) => {
            let w = b.ld::<U32, U64>(Space::Global, p, bytes);
            widen(b, &[w], act)
        }
        _ => {
            let w = b.ld_vec::<U32, U64, 2>(Space::Global, p, bytes);
            widen(b, &w, act)
        }
    }
}

/// Raw f16 bits as an f32.
pub(super) fn f16_bits(b: &mut KernelBuilder, h: Reg<U16>) -> Reg<F32> {
    let h = b.bitcast16::<F16, U16>(h);
    b.cvt::<F32, F16>(h, None)
}

/// Reduces the warp's partial sums and has lane 0 store them to `y[row]` where `store`
/// (and the lane is 0) holds.
pub(super) fn store_sum(
    b: &mut KernelBuilder,
    (y, row): (Reg<U64>, Reg<U32>),
    acc: Reg<F32>,
    lane: Reg<U32>,
    store: Option<Reg<Pred>>,
) {
    let total = warp_reduce(b, acc, super::helpers::add);
    let lane0 = b.setp::<U32>(Cmp::Eq, lane, 0u32);
    let store = match store {
        Some(p) => b.and_pred(lane0, p),
        None => lane0,
    };
    b.predicated(store, |b| {
        let at = b.mul_wide(row, 4u32);
        let at = b.add(y, at);
        b.st::<F32, U64>(Space::Global, at, 0, total);
    });
}

/// `y = W x` for a row-major `rows x cols` matrix `W` of [`QuantFormat`] blocks (each row
/// `cols / block_elems` consecutive blocks, GGML's layout), `x` of the second field's type
/// (f32, or bf16/f16, widened exactly as loaded) and f32 `y`. Parameters: `w` (`u16`
/// words of the blocks), `x`, `y`, `rows`, `blocks` (per row).
#[derive(Clone, Copy, Debug)]
pub struct QgemvKernel(pub QuantFormat, pub FloatType);

/// One lane's loads for one step: the block's scale and the lane's four quant bytes,
/// per row, and the lane's four activations.
struct Loaded {
    rows: Vec<(Reg<U16>, [Reg<U16>; 2])>,
    x: LoadedX,
}

/// A step's four activations as loaded: f32 values, or the two raw words of four 16-bit
/// ones (widened only when the math needs them, so every step's loads go out first).
enum LoadedX {
    F32([Reg<F32>; 4]),
    Half([Reg<U32>; 2], FloatType),
}

impl LoadedX {
    fn values(&self, b: &mut KernelBuilder) -> [Reg<F32>; 4] {
        match self {
            LoadedX::F32(x) => *x,
            LoadedX::Half(w, ty) => widen(b, w, *ty).try_into().expect("four values"),
        }
    }
}

/// Per-row running pointers: the lane's block and its quant bytes within it.
struct RowPtrs {
    block: Reg<U64>,
    quants: Reg<U64>,
}

impl QgemvKernel {
    /// Issues one step's loads: all of them, or (a group that runs past the row's end)
    /// under `valid`, into registers zeroed first so a step past the end adds exactly
    /// nothing. Unpredicated loads let ptxas put every step's loads ahead of any math;
    /// predicated ones it may issue just before their step's math (it did for Q4_0 with
    /// 16-bit activations: 2.1x slower than with f32 ones).
    fn load(
        &self,
        b: &mut KernelBuilder,
        valid: Option<Reg<Pred>>,
        rows: &[RowPtrs],
        xs: Reg<U64>,
        step: u32,
    ) -> Loaded {
        let w_off = i64::from(step * BLOCKS_PER_STEP) * self.0.block_bytes() as i64;
        let x_off = i64::from(step * BLOCKS_PER_STEP) * BLOCK_ELEMS as i64;
        let f32_act = self.1 == FloatType::F32;
        let issue = |b: &mut KernelBuilder| {
            let regs: Vec<(Reg<U16>, [Reg<U16>; 2])> = rows
                .iter()
                .map(|p| {
                    let d = b.ld::<U16, U64>(Space::Global, p.block, w_off);
                    let q = std::array::from_fn(|i| {
                        b.ld::<U16, U64>(Space::Global, p.quants, w_off + 2 * i as i64)
                    });
                    (d, q)
                })
                .collect();
            // f32 activations load as floats; 16-bit ones as their two raw words.
            let x = match f32_act {
                true => LoadedX::F32(load_x(b, self.1, xs, x_off, 4).try_into().expect("four")),
                false => {
                    let bytes = x_off * i64::from(self.1.bytes());
                    LoadedX::Half(b.ld_vec::<U32, U64, 2>(Space::Global, xs, bytes), self.1)
                }
            };
            Loaded { rows: regs, x }
        };
        let Some(valid) = valid else {
            return issue(b);
        };
        // Zero bits are 0.0 in every activation type.
        let regs: Vec<(Reg<U16>, [Reg<U16>; 2])> = rows
            .iter()
            .map(|_| (b.mov::<U16>(0u16), [b.mov::<U16>(0u16), b.mov::<U16>(0u16)]))
            .collect();
        let x: [Reg<F32>; 4] = std::array::from_fn(|_| b.mov::<F32>(0.0f32));
        let words: [Reg<U32>; 2] = std::array::from_fn(|_| b.mov::<U32>(0u32));
        b.predicated(valid, |b| {
            let got = issue(b);
            for ((d, q), (gd, gq)) in regs.iter().zip(&got.rows) {
                b.assign(*d, *gd);
                for (r, g) in q.iter().zip(gq) {
                    b.assign(*r, *g);
                }
            }
            match got.x {
                LoadedX::F32(v) => v.iter().zip(&x).for_each(|(v, r)| b.assign(*r, *v)),
                LoadedX::Half(w, _) => w.iter().zip(&words).for_each(|(w, r)| b.assign(*r, *w)),
            }
        });
        let x = match f32_act {
            true => LoadedX::F32(x),
            false => LoadedX::Half(words, self.1),
        };
        Loaded { rows: regs, x }
    }

    /// `d * sum(x_k * q_k)` over the lane's four elements of one block. `nibble_shift`
    /// (Q4_0) is 0 for the low nibbles, 4 for the high ones.
    fn block_dot(
        &self,
        b: &mut KernelBuilder,
        (d, q): (Reg<U16>, [Reg<U16>; 2]),
        x: &[Reg<F32>; 4],
        nibble_shift: Option<Reg<U32>>,
    ) -> Reg<F32> {
        let lo = b.cvt::<U32, U16>(q[0], None);
        let hi = b.cvt::<U32, U16>(q[1], None);
        let hi = b.shl(hi, 16u32);
        let word = b.or(lo, hi);
        // Each quant as an unsigned byte u with q = u - bias: Q8_0 flips the sign bits
        // (u = q + 128), Q4_0 keeps its nibbles (u = q + 8, in the low or high halves).
        let (bytes, bias) = match (self.0, nibble_shift) {
            (QuantFormat::Q8_0, _) => (b.xor(word, 0x8080_8080u32), 128.0),
            (QuantFormat::Q4_0, Some(shift)) => {
                let w = b.shr(word, shift);
                (b.and(w, 0x0F0F_0F0Fu32), 8.0)
            }
            (QuantFormat::Q4_0 | QuantFormat::Q4K | QuantFormat::Q5K | QuantFormat::Q6K, _) => {
                unreachable!("Q4_0 passes its nibble shift; the K-quants have their own kernels")
            }
        };
        let quants = byte_floats(b, bytes, bias);
        let mut sum = b.mul(x[0], quants[0]);
        for (&x, &q) in x.iter().zip(&quants).skip(1) {
            sum = b.fma(x, q, sum);
        }
        let d = f16_bits(b, d);
        b.mul(d, sum)
    }
}

impl Kernel for QgemvKernel {
    fn name(&self) -> String {
        format!("trueno_qgemv_{}_{}", self.0.name(), self.1.name())
    }

    fn family(&self) -> Family {
        Family::Qgemv
    }

    fn build(&self) -> KernelIr {
        let f = self.0;
        match f {
            QuantFormat::Q4K => return qgemv_k::build_k(self.name(), false, self.1),
            QuantFormat::Q5K => return qgemv_k::build_k(self.name(), true, self.1),
            QuantFormat::Q6K => return qgemv_q6k::build_q6k(self.name(), self.1),
            _ => {}
        }
        let bb = f.block_bytes() as u32;
        let mut b = KernelBuilder::new(self.name());
        b.overlap_neighbours();
        let Prologue {
            w,
            x,
            y,
            rows,
            blocks,
            lane,
            warp: warp_global,
        } = prologue(&mut b, THREADS, self.1);
        let row0 = b.mul(warp_global, ROWS_PER_WARP);
        // Whole warps leave together, so the shuffles below see full warps.
        let past = b.setp::<U32>(Cmp::Ge, row0, rows);
        b.exit_if(past);

        let j = b.and(lane, LANES_PER_BLOCK - 1);
        let first = b.shr(lane, LANES_PER_BLOCK.trailing_zeros());
        // The lane's quant bytes: Q8_0 bytes 4j..4j+4 (elements 4j..4j+4); Q4_0 bytes
        // 4(j%4).. hold elements 4j..4j+4 in their low (j < 4) or high (j >= 4) nibbles.
        let (quant_byte, nibble_shift) = match f {
            QuantFormat::Q4_0 => {
                let jj = b.and(j, 3u32);
                let half = b.shr(j, 2u32);
                (b.mad(jj, 4u32, 2u32), Some(b.shl(half, 2u32)))
            }
            _ => (b.mad(j, 4u32, 2u32), None),
        };
        let quant_byte = b.cvt::<U64, U32>(quant_byte, None);
        let row_bytes = b.mul(blocks, bb);
        let last_row = b.sub(rows, 1u32);
        let first_off = b.mul_wide(first, bb);
        // Rows past the end (the warp's second row of an odd count) read the last row
        // again and store nothing.
        let ptrs: Vec<RowPtrs> = (0..ROWS_PER_WARP)
            .map(|r| {
                let row = b.add(row0, r);
                let row = b.min(row, last_row);
                let off = b.mul_wide(row, row_bytes);
                let base = b.add(w, off);
                let block = b.add(base, first_off);
                let quants = b.add(block, quant_byte);
                RowPtrs { block, quants }
            })
            .collect();
        let first_elem = b.shl(first, 5u32);
        let lane_elem = b.mad(j, 4u32, first_elem);
        let x_off = b.mul_wide(lane_elem, self.1.bytes());
        let x_ptr = b.add(x, x_off);

        let acc: Vec<Reg<F32>> = (0..ROWS_PER_WARP).map(|_| b.mov::<F32>(0.0f32)).collect();
        let group = BLOCKS_PER_STEP * UNROLL;
        let w_step = u64::from(group * bb);
        let x_step = u64::from(group) * BLOCK_ELEMS as u64 * u64::from(self.1.bytes());
        // One group of UNROLL steps from block `blk` of the lane: every step's loads, then
        // their math; `checked` where the group may run past the row's end.
        let group_pass = |b: &mut KernelBuilder, blk: Reg<U32>, checked: bool| {
            let loads: Vec<Loaded> = (0..UNROLL)
                .map(|s| {
                    let valid = checked.then(|| {
                        let k = b.add(blk, s * BLOCKS_PER_STEP);
                        b.setp::<U32>(Cmp::Lt, k, blocks)
                    });
                    self.load(b, valid, &ptrs, x_ptr, s)
                })
                .collect();
            // Every step's activations as floats once all the loads are out.
            let xs: Vec<[Reg<F32>; 4]> = loads.iter().map(|l| l.x.values(b)).collect();
            for (l, x) in loads.iter().zip(&xs) {
                for (&a, &row) in acc.iter().zip(&l.rows) {
                    let part = self.block_dot(b, row, x, nibble_shift);
                    let next = b.add(a, part);
                    b.assign(a, next);
                }
            }
            for p in &ptrs {
                for r in [p.block, p.quants] {
                    let n = b.add(r, w_step);
                    b.assign(r, n);
                }
            }
            let n = b.add(x_ptr, x_step);
            b.assign(x_ptr, n);
        };
        // Whole groups (every lane's eight steps inside the row), then the rest, if any.
        let whole = b.shr(blocks, group.trailing_zeros());
        let blk = b.mov(first);
        b.for_loop(0u32, whole, 1u32, false, |b, _| {
            group_pass(b, blk, false);
            let n = b.add(blk, group);
            b.assign(blk, n);
        });
        let rest = b.and(blocks, group - 1);
        let some = b.setp::<U32>(Cmp::Ne, rest, 0u32);
        b.if_then(some, false, |b| group_pass(b, blk, true));
        for (r, &a) in acc.iter().enumerate() {
            let row = b.add(row0, r as u32);
            let inside = b.setp::<U32>(Cmp::Lt, row, rows);
            store_sum(&mut b, (y, row), a, lane, Some(inside));
        }
        b.ret();
        b.finish()
    }

    /// `dims = [rows, cols]`; `cols` must be a whole number of blocks.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        let name = self.name();
        let (rows, _) = self.0.check_matrix(&name, dims, self.0.block_elems())?;
        Ok(LaunchConfig::linear(
            blocks_for(
                &name,
                rows,
                self.0.rows_per_block() as usize,
                i32::MAX as u32,
            )?,
            THREADS,
        ))
    }
}

/// Every quantized matrix-vector kernel: f32, bf16 and f16 activations, then the integer
/// ones and the activation quantization they read.
pub fn all() -> Vec<Box<dyn Kernel>> {
    let f32_act = FloatType::ALL.iter().flat_map(|&t| {
        QuantFormat::ALL
            .iter()
            .map(move |&f| Box::new(QgemvKernel(f, t)) as Box<dyn Kernel>)
    });
    let int = QgemvQ8kKernel::FORMATS.iter().flat_map(|&f| {
        [
            Box::new(QgemvQ8kKernel(f)) as Box<dyn Kernel>,
            Box::new(QgemvQ8kBatchKernel(f)),
        ]
    });
    let one_wave = QgemvQ8kOneWaveKernel::FORMATS
        .iter()
        .map(|&f| Box::new(QgemvQ8kOneWaveKernel(f)) as Box<dyn Kernel>);
    let late = QgemvQ8kLateKernel::FORMATS
        .iter()
        .map(|&f| Box::new(QgemvQ8kLateKernel(f)) as Box<dyn Kernel>);
    let wide = QgemvQ8kWideKernel::FORMATS
        .iter()
        .map(|&f| Box::new(QgemvQ8kWideKernel(f)) as Box<dyn Kernel>);
    let mma = QgemvQ8kMmaKernel::all()
        .into_iter()
        .map(|k| Box::new(k) as Box<dyn Kernel>);
    let mma_one = QgemvQ8kMmaOneKernel::FORMATS.into_iter().flat_map(|f| {
        [TileWarps::Eight, TileWarps::Sixteen]
            .map(|w| Box::new(QgemvQ8kMmaOneKernel(f, w)) as Box<dyn Kernel>)
    });
    f32_act
        .chain(int)
        .chain(one_wave)
        .chain(late)
        .chain(wide)
        .chain(mma)
        .chain(mma_one)
        .chain(QgemvQ6kMmaOneKernel::ALL.map(|k| Box::new(k) as Box<dyn Kernel>))
        .chain(
            QuantizeQ8kKernel::ALL
                .into_iter()
                .map(|k| Box::new(k) as Box<dyn Kernel>),
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_that_are_not_whole_blocks_are_errors() {
        for f in QuantFormat::ALL {
            let k = QgemvKernel(f, FloatType::F32);
            let e = f.block_elems();
            assert!(k.launch_config(&[4, e + 1]).is_err());
            assert!(k.launch_config(&[4, e / 2]).is_err());
            assert!(k.launch_config(&[0, e]).is_err());
            assert!(k.launch_config(&[4, 0]).is_err());
            let c = k.launch_config(&[17, 2 * e]).unwrap();
            let per = f.rows_per_block() as usize;
            assert_eq!(c.grid.0 as usize, 17usize.div_ceil(per), "{}", f.name());
            assert_eq!(c.block.0, THREADS);
        }
    }

    #[test]
    fn block_sizes_are_ggmls() {
        // 2-byte f16 scale plus the packed quants.
        assert_eq!(QuantFormat::Q8_0.block_bytes(), 2 + 32);
        assert_eq!(QuantFormat::Q4_0.block_bytes(), 2 + 16);
        assert_eq!(QuantFormat::Q4_0.matrix_bytes(3, 64), Some(3 * 2 * 18));
        // f16 d and dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles.
        assert_eq!(QuantFormat::Q4K.block_bytes(), 2 + 2 + 12 + 128);
        assert_eq!(QuantFormat::Q4K.block_elems(), 256);
        assert_eq!(QuantFormat::Q6K.block_bytes(), 128 + 64 + 16 + 2);
        assert_eq!(QuantFormat::Q5K.block_bytes(), 2 + 2 + 12 + 32 + 128);
        assert_eq!(QuantFormat::Q6K.matrix_bytes(2, 512), Some(2 * 2 * 210));
    }
}
