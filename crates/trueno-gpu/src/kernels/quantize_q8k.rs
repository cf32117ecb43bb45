//! Activations quantized to Q8_K on the device, once per vector, for the integer
//! matrix-vector products ([`super::qgemv_dp4a`]): every projection that reads the same
//! vector (Q, K and V; gate and up) then shares one quantization, and the products read
//! one byte per activation instead of four.
//!
//! The bytes are GGML's `quantize_row_q8_K` (trueno-quant's `quantize(Q8K, ..)`), bit for
//! bit: per 256 elements, `iscale = -128 / max` where `max` is the first element of the
//! largest magnitude, `q = min(round_ties_even(iscale * x), 127)`, `d = 1 / iscale`, and
//! the sum of each 16 quants; an all-zero block is zeros. trueno-quant refuses
//! non-finite values; here a block holding a NaN or an infinity gets a NaN scale (and
//! zero quants and sums), so every output it touches is NaN, as an f32 product's would be
//! NaN or infinite, never a silent finite number. The layout is the device's own: quants, scales and sums in three arrays (see
//! [`crate::memory::Q8kVector`]), so the quants stay 16-byte aligned.
//!
//! One warp per block; lane `l` takes elements `8l..8l + 8` (two 16-byte loads, one for
//! bf16 or f16 activations), so the sums of 16 are lane pairs.

use super::float_type::{FloatType, load_words, widen};
use super::helpers::{elem_addr, lane_and_warp};
use super::{Family, Kernel, LaunchConfig, blocks_for, check_dims};
use crate::error::{Result, shape_err};
use crate::ptx::{
    Cmp, F32, KernelBuilder, KernelIr, Pred, PtxType, Reg, Rounding, S32, ShflMode, Space, U32,
};

/// Elements per Q8_K block.
pub const BLOCK: usize = 256;
/// Threads per thread block: eight warps, one Q8_K block each.
const THREADS: u32 = 256;

/// Quantizes `x` (f32, bf16 or f16, a multiple of 256 long: 16-bit activations are
/// widened exactly, so they quantize as their f32 values would) to Q8_K. Parameters:
/// `x`, `qs` (the quants, four to a word), `d` (a scale per block), `bsums` (an `s32`
/// per 16 quants), `blocks`.
#[derive(Clone, Copy, Debug)]
pub struct QuantizeQ8kKernel(pub FloatType);

impl QuantizeQ8kKernel {
    /// One kernel per input type.
    pub const ALL: [QuantizeQ8kKernel; 3] = [
        QuantizeQ8kKernel(FloatType::F32),
        QuantizeQ8kKernel(FloatType::Bf16),
        QuantizeQ8kKernel(FloatType::F16),
    ];
}

impl Kernel for QuantizeQ8kKernel {
    fn name(&self) -> String {
        format!("trueno_quantize_q8k_{}", self.0.name())
    }

    fn family(&self) -> Family {
        Family::Qgemv
    }

    fn build(&self) -> KernelIr {
        let mut b = KernelBuilder::new(self.name());
        b.max_threads(THREADS);
        let x = b.param_ptr("x", self.0.ptx());
        let qs = b.param_ptr("qs", PtxType::U32);
        let dp = b.param_ptr("d", PtxType::F32);
        let bsums = b.param_ptr("bsums", PtxType::S32);
        let blocks = b.param_u32("blocks");
        // Overlapped launches (sm_90): the next kernel (the products that read these
        // quants) may start its blocks now; this one reads `x` and overwrites the
        // quants only after the previous kernel is done with both.
        b.overlap_neighbours();
        let (lane, blk) = lane_and_warp(&mut b, THREADS);
        // Whole warps leave together: the shuffles below see full warps.
        let past = b.setp::<U32>(Cmp::Ge, blk, blocks);
        b.exit_if(past);

        let lane_first = b.shl(lane, 3u32);
        let first = b.mad(blk, BLOCK as u32, lane_first);
        let v: Vec<Reg<F32>> = match self.0 {
            FloatType::F32 => {
                let xp = elem_addr(&mut b, x, first, 4);
                let lo = b.ld_vec::<F32, _, 4>(Space::Global, xp, 0);
                let hi = b.ld_vec::<F32, _, 4>(Space::Global, xp, 16);
                lo.into_iter().chain(hi).collect()
            }
            // Eight 16-bit values: one 16-byte load, widened exactly.
            ty => {
                let xp = elem_addr(&mut b, x, first, 2);
                let words = load_words(&mut b, xp, 8, ty);
                widen(&mut b, &words, ty)
            }
        };

        // The first element of the largest magnitude: in order within the lane (strictly
        // larger replaces), then across lanes, the lower lane on ties.
        let amax = b.mov::<F32>(0.0f32);
        let max = b.mov::<F32>(0.0f32);
        // Non-finite: |x| unordered with or above the largest float.
        let mut bad: Option<Reg<Pred>> = None;
        for &e in &v {
            let a = b.abs(e);
            let nf = b.setp::<F32>(Cmp::Gtu, a, f32::MAX);
            bad = Some(match bad {
                None => nf,
                Some(p) => b.or_pred(p, nf),
            });
            let gt = b.setp::<F32>(Cmp::Gt, a, amax);
            let na = b.selp(a, amax, gt);
            let nm = b.selp(e, max, gt);
            b.assign(amax, na);
            b.assign(max, nm);
        }
        let src = b.mov::<U32>(lane);
        for d in [16u32, 8, 4, 2, 1] {
            let oa = b.shfl(ShflMode::Bfly, amax, d);
            let om = b.shfl(ShflMode::Bfly, max, d);
            let os = b.shfl(ShflMode::Bfly, src, d);
            let gt = b.setp::<F32>(Cmp::Gt, oa, amax);
            let eq = b.setp::<F32>(Cmp::Eq, oa, amax);
            let lower = b.setp::<U32>(Cmp::Lt, os, src);
            let tie = b.and_pred(eq, lower);
            let take = b.or_pred(gt, tie);
            let na = b.selp(oa, amax, take);
            let nm = b.selp(om, max, take);
            let ns = b.selp(os, src, take);
            b.assign(amax, na);
            b.assign(max, nm);
            b.assign(src, ns);
        }
        let bad = b.vote_any(bad.expect("eight values"));
        let zero = b.setp::<F32>(Cmp::Eq, amax, 0.0f32);
        let zero = b.or_pred(zero, bad);
        let iscale = b.div(-128.0f32, max);

        // q = min(round(iscale * x), 127), saturating below (-inf from a huge iscale):
        // clamping before the rounding is the same, and turns NaN (0 * inf, when a
        // subnormal maximum makes iscale infinite) into 127 as min does.
        let q: Vec<Reg<S32>> = v
            .iter()
            .map(|&e| {
                let t = b.mul(iscale, e);
                let t = b.min(t, 127.0f32);
                let t = b.max(t, -128.0f32);
                let q = b.cvt::<S32, F32>(t, Some(Rounding::Rni));
                b.selp(0i32, q, zero)
            })
            .collect();
        let sum = q[1..].iter().fold(q[0], |s, &e| b.add(s, e));
        let pair = b.shfl(ShflMode::Bfly, sum, 1u32);
        let sum16 = b.add(sum, pair);

        let words: Vec<Reg<U32>> = q
            .chunks_exact(4)
            .map(|c| {
                let c: Vec<Reg<U32>> = c.iter().map(|&r| b.bitcast32::<U32, S32>(r)).collect();
                // Bytes 0 of each: (c0, c1) and (c2, c3) side by side, then the pairs.
                let p01 = b.prmt(c[0], c[1], 0x0040);
                let p23 = b.prmt(c[2], c[3], 0x0040);
                b.prmt(p01, p23, 0x5410)
            })
            .collect();
        let qp = elem_addr(&mut b, qs, first, 1);
        b.st_vec::<U32, _>(Space::Global, qp, 0, &words);

        let even = b.and(lane, 1u32);
        let even = b.setp::<U32>(Cmp::Eq, even, 0u32);
        b.predicated(even, |b| {
            let g = b.shr(first, 4u32);
            let at = elem_addr(b, bsums, g, 4);
            b.st::<S32, _>(Space::Global, at, 0, sum16);
        });
        let lane0 = b.setp::<U32>(Cmp::Eq, lane, 0u32);
        b.predicated(lane0, |b| {
            let d = b.div(1.0f32, iscale);
            let d = b.selp(0.0f32, d, zero);
            let d = b.selp(f32::NAN, d, bad);
            let at = elem_addr(b, dp, blk, 4);
            b.st::<F32, _>(Space::Global, at, 0, d);
        });
        b.ret();
        b.finish()
    }

    /// `dims = [n]`, a multiple of 256.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        let name = self.name();
        check_dims(&name, dims, 1)?;
        if !dims[0].is_multiple_of(BLOCK) {
            return shape_err(
                &name,
                format!("length {} is not a multiple of {BLOCK}", dims[0]),
            );
        }
        let blocks = dims[0] / BLOCK;
        Ok(LaunchConfig::linear(
            blocks_for(&name, blocks, (THREADS / 32) as usize, i32::MAX as u32)?,
            THREADS,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_that_are_not_whole_blocks_are_errors() {
        let k = QuantizeQ8kKernel(FloatType::F32);
        assert!(k.launch_config(&[0]).is_err());
        assert!(k.launch_config(&[255]).is_err());
        assert!(k.launch_config(&[256 + 32]).is_err());
        // 17 blocks, eight per thread block.
        let c = k.launch_config(&[17 * 256]).unwrap();
        assert_eq!((c.grid.0, c.block.0), (3, THREADS));
    }
}
