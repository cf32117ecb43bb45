//! The integer matrix-vector products: quantized weights (every [`QuantFormat`]) against
//! activations quantized to Q8_K ([`super::quantize_q8k`]), four 8-bit products per
//! `dp4a`, exact integer sums per sub-block, scales applied once per lane and
//! super-block in f32 — GGML's method for the K-quants (trueno-quant's `dot_q8`), so the
//! result is that of the CPU's integer path up to the order of the f32 sums. Q8_0 and
//! Q4_0 take the same Q8_K activations (GGML pairs them with per-32 Q8_0/Q8_1 ones): one
//! quantized input then serves every projection of a mixed-format model, at the price of
//! one activation scale per 256 values instead of per 32. Also batched: up to
//! [`MAX_BATCH`] activation vectors against one read of the weights (batches take the
//! integer tensor cores instead by default: qgemv_q4k_mma.rs and the staged kernels).
//!
//! Why: the f32-activation kernels (qgemv.rs, qgemv_k.rs) spend several instructions per
//! weight unpacking scales and converting quants, and read four activation bytes per weight;
//! here a lane takes 32 weights per super-block, so the scale unpacking is paid once per
//! 32 weights and the activations cost one byte each.
//!
//! One warp per row; a warp step covers four consecutive super-blocks, eight lanes each.
//! This file holds what every format shares (`Frame`, the activation loads, the row
//! loop); each format's lane is its own file (qgemv_k4_dp4a.rs, qgemv_q6k_dp4a.rs,
//! qgemv_block32_dp4a.rs for Q8_0 and Q4_0, whose eight 32-weight blocks make a
//! super-block).

use super::helpers::{elem_addr, lane_and_warp};
use super::qgemv::{QuantFormat, store_sum};
use super::qgemv_block32_dp4a::{Block32Lane, group_bytes};
use super::qgemv_k::{self, THREADS};
use super::qgemv_k4_dp4a::K4Lane;
pub use super::qgemv_one_wave::{QgemvQ8kOneWaveKernel, one_wave_wins};
use super::{Family, Kernel, LaunchConfig, blocks_for};
use super::{qgemv_q6k, qgemv_q6k_dp4a};
use crate::error::Result;
use crate::ptx::{Cmp, F32, KernelBuilder, KernelIr, PtxType, Reg, S32, Space, U32, U64};

/// Super-blocks a warp covers per step.
pub(super) const BLOCKS_PER_STEP: u32 = 4;
/// Steps whose loads are issued before any of their math (one-vector kernels).
pub(super) const UNROLL: u32 = 2;
/// Bytes of activation quants, scales and sums per super-block.
const ACT_STEP: [u32; 3] = [256, 4, 16 * 4];
/// The most activation vectors a batched product takes.
pub const MAX_BATCH: usize = 8;

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
    rows: Reg<U32>,
    blocks: Reg<U32>,
    y: Reg<U64>,
    /// The batched kernels' vector count.
    vectors: Option<Reg<U32>>,
}

/// The integer products' parameters, in the order every launch of them passes: the
/// weights, the activations' quants, scales and sums of 16, the output, its rows, the
/// super-blocks a row, and for a batched kernel the vector count.
pub(super) struct Q8kParams {
    pub w: Reg<U64>,
    pub qs: Reg<U64>,
    pub d: Reg<U64>,
    pub bsums: Reg<U64>,
    pub y: Reg<U64>,
    pub rows: Reg<U32>,
    pub blocks: Reg<U32>,
    pub vectors: Option<Reg<U32>>,
}

/// Declares [`Q8kParams`] (`vectors` where `batched`).
pub(super) fn q8k_params(b: &mut KernelBuilder, batched: bool) -> Q8kParams {
    Q8kParams {
        w: b.param_ptr("w", PtxType::U16),
        qs: b.param_ptr("qs", PtxType::U32),
        d: b.param_ptr("d", PtxType::F32),
        bsums: b.param_ptr("bsums", PtxType::S32),
        y: b.param_ptr("y", PtxType::F32),
        rows: b.param_u32("rows"),
        blocks: b.param_u32("blocks"),
        vectors: batched.then(|| b.param_u32("vectors")),
    }
}

/// Declares the parameters ([`Q8kParams`]) and sets up the [`Frame`] for super-blocks of
/// `bb` bytes.
fn frame(b: &mut KernelBuilder, bb: u32, batched: bool) -> Frame {
    b.max_threads(THREADS);
    let Q8kParams {
        w,
        qs: aq,
        d: ad,
        bsums: abs,
        y,
        rows,
        blocks,
        vectors,
    } = q8k_params(b, batched);
    // The next kernel may start its blocks once all of these have: it waits for this
    // grid before reading anything this writes.
    b.allow_next_grid();
    let (lane, row) = lane_and_warp(b, THREADS);
    let past = b.setp::<U32>(Cmp::Ge, row, rows);
    b.exit_if(past);
    let g = b.shr(lane, 3u32);
    let p = b.and(lane, 7u32);
    let row_bytes = b.mul(blocks, bb);
    let row_off = b.mul_wide(row, row_bytes);
    let wr = b.add(w, row_off);
    let blk = elem_addr(b, wr, g, bb);
    let act = elem_addr(b, aq, g, 256);
    let d = elem_addr(b, ad, g, 4);
    let sums = elem_addr(b, abs, g, 16 * 4);
    Frame {
        blk,
        act,
        d,
        sums,
        p,
        g,
        lane,
        row,
        rows,
        blocks,
        y,
        vectors,
    }
}

/// A lane's activation pointers at its part of super-block `g`: its first 16 quants, the
/// block's scale, its first sum of 16; the second quad and sum are `second_quad` and
/// `second_sum` bytes on.
pub(super) struct ActPtrs {
    pub a: Reg<U64>,
    pub d: Reg<U64>,
    pub sums: Reg<U64>,
    pub second_quad: i64,
    pub second_sum: i64,
}

/// One step's activation loads: two quads of quants, the scale, two sums of 16.
pub(super) struct ActLoads {
    pub a: [[Reg<U32>; 4]; 2],
    pub dx: Reg<F32>,
    pub bs: [Reg<S32>; 2],
}

impl ActPtrs {
    /// Step `s`'s activations (of the vector `shift` bytes of quants, scales and sums
    /// on, for a batch).
    fn load(&self, b: &mut KernelBuilder, s: i64, shift: Option<[Reg<U64>; 3]>) -> ActLoads {
        let [a_off, d_off, s_off] = ACT_STEP.map(|n| s * i64::from(BLOCKS_PER_STEP * n));
        let [a, d, sums] = match shift {
            Some(sh) => [
                b.add(self.a, sh[0]),
                b.add(self.d, sh[1]),
                b.add(self.sums, sh[2]),
            ],
            None => [self.a, self.d, self.sums],
        };
        let quad = |b: &mut KernelBuilder, q: i64| {
            b.ld_vec::<U32, U64, 4>(Space::Global, a, a_off + self.second_quad * q)
        };
        let sum = |b: &mut KernelBuilder, q: i64| {
            b.ld::<S32, U64>(Space::Global, sums, s_off + self.second_sum * q)
        };
        ActLoads {
            a: [quad(b, 0), quad(b, 1)],
            dx: b.ld::<F32, U64>(Space::Global, d, d_off),
            bs: [sum(b, 0), sum(b, 1)],
        }
    }

    fn advance(&self, b: &mut KernelBuilder, steps: u32) {
        let [a, d, s] = ACT_STEP.map(|n| u64::from(steps * BLOCKS_PER_STEP * n));
        for (r, step) in [(self.a, a), (self.d, d), (self.sums, s)] {
            let n = b.add(r, step);
            b.assign(r, n);
        }
    }
}

/// One format's lane: its weight loads for a step, its share of a super-block, and how
/// its weight pointers move.
pub(super) trait LaneStep {
    /// One step's weight registers, as loaded.
    type Weights;
    /// The same unpacked for products: quants as bytes, scales as integers and floats
    /// (once per step, whatever the number of vectors).
    type Unpacked;
    /// The lane's activation pointers.
    fn act(&self) -> &ActPtrs;
    /// Step `s`'s weights (`s * 4` super-blocks on).
    fn load(&self, b: &mut KernelBuilder, s: i64) -> Self::Weights;
    /// Step `s`'s weight loads left until after the pass's pin (none by default; Q4_K's
    /// headers in [`super::qgemv_wide::QgemvQ8kWideKernel`]).
    fn complete(&self, _b: &mut KernelBuilder, _s: i64, w: Self::Weights) -> Self::Weights {
        w
    }
    /// Unpacks a step's weights.
    fn unpack(&self, b: &mut KernelBuilder, w: &Self::Weights) -> Self::Unpacked;
    /// The lane's share of its super-block against one vector's activations.
    fn part(&self, b: &mut KernelBuilder, w: &Self::Unpacked, a: &ActLoads) -> Reg<F32>;
    /// Moves the weight pointers `steps` steps on.
    fn advance(&self, b: &mut KernelBuilder, steps: u32);
    /// Steps whose loads are issued before any of their math.
    fn unroll(&self) -> u32 {
        UNROLL
    }
    /// Whether a pass's loads end a basic block of their own ([`end_block`]).
    fn pin_loads(&self) -> bool {
        true
    }
}

/// How a one-vector kernel's passes load: steps a pass (the lane's own count where
/// `None`) and whether a pinned pass's activations wait until after its pin.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct PassPlan {
    /// Steps a pass.
    pub steps: Option<u32>,
    /// Activations after the pin ([`super::qgemv_late::QgemvQ8kLateKernel`] and
    /// [`super::qgemv_wide::QgemvQ8kWideKernel`]).
    pub late_act: bool,
    /// Q4_K's super-block headers after the pin ([`super::qgemv_wide::QgemvQ8kWideKernel`]).
    pub late_head: bool,
}

/// The one-vector row loop: passes of [`LaneStep::unroll`] steps (their loads, then
/// their math), then the lane's remaining steps one by one; every step is inside the row,
/// so no load is predicated (a predicated load must start from zeroed registers, which
/// ptxas then keeps live beside the loaded ones). The warp's sum goes to `y[row]`.
fn run(mut b: KernelBuilder, fr: &Frame, lane: &impl LaneStep, plan: PassPlan) -> KernelIr {
    let acc = b.mov::<F32>(0.0f32);
    // Activations after the pin (`QgemvQ8kLateKernel`, `QgemvQ8kWideKernel`): only a
    // pinned pass has one.
    let late = plan.late_act && lane.pin_loads();
    let unroll = plan.steps.unwrap_or_else(|| lane.unroll());
    debug_assert!(unroll.is_power_of_two());
    // The lane's steps: super-blocks g, g + 4, ... below `blocks`.
    let outside = b.setp::<U32>(Cmp::Ge, fr.g, fr.blocks);
    let left = b.sub(fr.blocks, fr.g);
    let left = b.add(left, BLOCKS_PER_STEP - 1);
    let steps = b.shr(left, BLOCKS_PER_STEP.trailing_zeros());
    let steps = b.selp(0u32, steps, outside);
    let passes = b.shr(steps, unroll.trailing_zeros());
    // `wait`: the pass's weights, then the wait for the previous grid, then the
    // activations (which it may have written): the first pass's weights stream in while
    // an overlapped predecessor drains. Weights are uploaded, never written by a kernel.
    // With `late` (`QgemvQ8kLateKernel`) a step's activations are loaded after the pin,
    // beside its math (L1 hits): only the weights wait in registers.
    let pass = |b: &mut KernelBuilder, n: u32, wait: bool| {
        let early =
            |b: &mut KernelBuilder, s: usize| (!late).then(|| lane.act().load(b, s as i64, None));
        let loads: Vec<_> = match wait {
            true => {
                let w: Vec<_> = (0..n).map(|s| lane.load(b, i64::from(s))).collect();
                b.wait_for_previous_grid();
                let act = |(s, w)| (w, early(b, s));
                w.into_iter().enumerate().map(act).collect()
            }
            false => (0..n as usize)
                .map(|s| {
                    let w = lane.load(b, s as i64);
                    (w, early(b, s))
                })
                .collect(),
        };
        if lane.pin_loads() {
            qgemv_k::end_block(b, (fr.y, fr.row), fr.blocks, lane.act().a, acc);
        }
        for (s, (w, a)) in loads.into_iter().enumerate() {
            let a = match a {
                Some(a) => a,
                None => lane.act().load(b, s as i64, None),
            };
            let w = lane.complete(b, s as i64, w);
            let w = lane.unpack(b, &w);
            let part = lane.part(b, &w, &a);
            let next = b.add(acc, part);
            b.assign(acc, next);
        }
        lane.advance(b, n);
        lane.act().advance(b, n);
    };
    let any = b.setp::<U32>(Cmp::Ne, passes, 0u32);
    b.if_else(
        any,
        false,
        |b| pass(b, unroll, true),
        |b| b.wait_for_previous_grid(),
    );
    b.for_loop(1u32, passes, 1u32, false, |b, _| pass(b, unroll, false));
    if unroll > 1 {
        let rest = b.and(steps, unroll - 1);
        b.for_loop(0u32, rest, 1u32, false, |b, _| pass(b, 1, false));
    }
    store_sum(&mut b, (fr.y, fr.row), acc, fr.lane, None);
    b.ret();
    b.finish()
}

/// The batched row loop: each step's weights once, then vector `v`'s activations and
/// part for each `v < vectors` (vector `v` is `v * cols` quants on); the warp's sums
/// into `y[v * rows + row]`.
fn run_batch(mut b: KernelBuilder, fr: &Frame, lane: &impl LaneStep) -> KernelIr {
    let vectors = fr.vectors.expect("a batched frame");
    let accs: Vec<Reg<F32>> = (0..MAX_BATCH).map(|_| b.mov::<F32>(0.0f32)).collect();
    // Whether vector `v` is there: tested where used (eight predicates live at once
    // would be more than the hardware's seven).
    let present = |b: &mut KernelBuilder, v: usize| b.setp::<U32>(Cmp::Lt, v as u32, vectors);
    // One vector on: its quants, scales and sums.
    let stride = ACT_STEP.map(|n| b.mul_wide(fr.blocks, n));
    b.wait_for_previous_grid();
    // One step a pass: the loop's own test keeps it inside the row.
    b.for_loop(fr.g, fr.blocks, BLOCKS_PER_STEP, false, |b, _| {
        let w = lane.load(b, 0);
        let w = lane.complete(b, 0, w);
        let w = lane.unpack(b, &w);
        // Each vector's offsets from the last one's, in the loop: hoisted as constants
        // they would hold three register pairs a vector.
        let mut shift: Option<[Reg<U64>; 3]> = None;
        for (v, &acc) in accs.iter().enumerate() {
            if v > 0 {
                shift = Some(match shift {
                    None => stride,
                    Some(sh) => std::array::from_fn(|i| b.add(sh[i], stride[i])),
                });
            }
            let here = present(b, v);
            b.if_then(here, false, |b| {
                let a = lane.act().load(b, 0, shift);
                let part = lane.part(b, &w, &a);
                let next = b.add(acc, part);
                b.assign(acc, next);
            });
        }
        lane.advance(b, 1);
        lane.act().advance(b, 1);
    });
    for (v, &acc) in accs.iter().enumerate() {
        let here = present(&mut b, v);
        b.if_then(here, false, |b| {
            let at = b.mad(fr.rows, v as u32, fr.row);
            store_sum(b, (fr.y, at), acc, fr.lane, None);
        });
    }
    b.ret();
    b.finish()
}

/// The frame and lane of format `f`, built into a one-vector kernel with passes as `plan`
/// lays them out, or a batched one (`plan` unused).
pub(super) fn build(name: String, f: QuantFormat, batched: bool, plan: PassPlan) -> KernelIr {
    let mut b = KernelBuilder::new(name);
    match f {
        QuantFormat::Q6K => {
            let fr = frame(&mut b, qgemv_q6k::BLOCK_BYTES, batched);
            let runs = if batched {
                qgemv_q6k_dp4a::Q6kRuns::Halves
            } else {
                qgemv_q6k_dp4a::Q6kRuns::AlignedPairs
            };
            let lane = qgemv_q6k_dp4a::Q6kLane::new(&mut b, &fr, runs);
            if batched {
                run_batch(b, &fr, &lane)
            } else {
                run(b, &fr, &lane, plan)
            }
        }
        QuantFormat::Q4K | QuantFormat::Q5K => {
            let five_bit = f == QuantFormat::Q5K;
            let fr = frame(&mut b, qgemv_k::layout(five_bit).0, batched);
            let lane = K4Lane::new(&mut b, &fr, five_bit, plan.late_head && !batched);
            if batched {
                run_batch(b, &fr, &lane)
            } else {
                run(b, &fr, &lane, plan)
            }
        }
        QuantFormat::Q8_0 | QuantFormat::Q4_0 => {
            let four_bit = f == QuantFormat::Q4_0;
            let fr = frame(&mut b, group_bytes(four_bit), batched);
            let lane = Block32Lane::new(&mut b, &fr, four_bit);
            if batched {
                run_batch(b, &fr, &lane)
            } else {
                run(b, &fr, &lane, plan)
            }
        }
    }
}

/// The launch of a `[rows, cols]` product of format `f` by kernel `name`: one warp per
/// row, eight per block; `cols` whole super-blocks, a row under 4 GiB.
pub(super) fn launch(name: &str, f: QuantFormat, dims: &[usize]) -> Result<LaunchConfig> {
    let (rows, _) = f.check_matrix(name, dims, 256)?;
    Ok(LaunchConfig::linear(
        blocks_for(name, rows, (THREADS / 32) as usize, i32::MAX as u32)?,
        THREADS,
    ))
}

/// [`launch`] for a variant kernel `name` that format `f` has only where `has`; else a
/// shape error naming the variant (`what`).
pub(super) fn variant_launch(
    name: &str,
    f: QuantFormat,
    (has, what): (bool, &str),
    dims: &[usize],
) -> Result<LaunchConfig> {
    if !has {
        let why = format!("{} has no {what} variant", f.name());
        return crate::error::shape_err(name, why);
    }
    launch(name, f, dims)
}

/// `y = W a` for quantized weights `W` (GGML's layout, as [`super::qgemv::QgemvKernel`])
/// and Q8_K activations `a`. Parameters: `w`, `qs`, `d`, `bsums` (the activations, see
/// [`crate::memory::Q8kVector`]), `y`, `rows`, `blocks` (256-weight super-blocks per
/// row: eight Q8_0 / Q4_0 blocks).
#[derive(Clone, Copy, Debug)]
pub struct QgemvQ8kKernel(pub QuantFormat);

impl QgemvQ8kKernel {
    /// The weight formats with an integer kernel: all of them.
    pub const FORMATS: [QuantFormat; 5] = QuantFormat::ALL;
}

impl Kernel for QgemvQ8kKernel {
    fn name(&self) -> String {
        format!("trueno_qgemv_{}_q8k", self.0.name())
    }

    fn family(&self) -> Family {
        Family::Qgemv
    }

    fn build(&self) -> KernelIr {
        build(self.name(), self.0, false, PassPlan::default())
    }

    /// `dims = [rows, cols]`; `cols` a multiple of 256.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        launch(&self.name(), self.0, dims)
    }
}

/// [`QgemvQ8kKernel`] for 1 to [`MAX_BATCH`] activation vectors at once, the weights read
/// once: `y[v] = W a[v]`, the vectors one after another in `a` and in `y`. Parameters as
/// the one-vector kernel's, then `vectors`.
#[derive(Clone, Copy, Debug)]
pub struct QgemvQ8kBatchKernel(pub QuantFormat);

impl Kernel for QgemvQ8kBatchKernel {
    fn name(&self) -> String {
        format!("trueno_qgemv_{}_q8k_batch", self.0.name())
    }

    fn family(&self) -> Family {
        Family::Qgemv
    }

    fn build(&self) -> KernelIr {
        build(self.name(), self.0, true, PassPlan::default())
    }

    /// `dims = [rows, cols]` (the vector count is a parameter); `cols` a multiple of 256.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        launch(&self.name(), self.0, dims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_takes_whole_super_blocks_of_256() {
        for f in QgemvQ8kKernel::FORMATS {
            let k = QgemvQ8kKernel(f);
            assert!(k.launch_config(&[4, 255]).is_err());
            // 384 is whole Q8_0 / Q4_0 blocks, but not whole Q8_K activation blocks.
            assert!(k.launch_config(&[4, 384]).is_err());
            assert!(k.launch_config(&[0, 256]).is_err());
            let c = k.launch_config(&[17, 512]).unwrap();
            assert_eq!((c.grid.0, c.block.0), (3, THREADS));
            assert_eq!(QgemvQ8kBatchKernel(f).launch_config(&[17, 512]).unwrap(), c);
        }
    }
}
