//! Rotary position embedding (RoPE) of Llama-family attention: each pair of a head's
//! elements rotated by `position * inv_freq[i]`, positions read from a buffer (so one
//! launch serves a decode step or a whole prefill batch, any positions). Two pairings:
//! adjacent elements `(2i, 2i+1)` (GPT-J, llama.cpp's normal mode) and halves
//! `(i, i + dim/2)` (GPT-NeoX, Hugging Face's `rotate_half`).
//!
//! The frequencies are an input, not a base: scaled schemes (linear, NTK, YaRN, Llama 3)
//! only change them. The angle is an f32 product as in every f32 implementation; it is
//! reduced to [-pi, pi] against a three-part 2*pi (exact to about 3e-7 rad for positions
//! to 2^16 cycles) before the hardware's `sin.approx`/`cos.approx`.

use super::helpers::{elem_addr, global_index};
use super::{Family, Kernel, LaunchConfig, blocks_for, check_dims};
use crate::error::{Result, shape_err};
use crate::ptx::{Cmp, F32, KernelBuilder, KernelIr, PtxType, Reg, Rounding, Space, U32, U64};

/// Threads per block (one pair each).
pub const THREADS: u32 = 256;

/// 2*pi in three parts: `TWO_PI_HI` has 8 significant bits, so `k * TWO_PI_HI` is exact
/// for `k < 2^16`; the other two carry the rest.
const TWO_PI_HI: f32 = 6.281_25;
const TWO_PI_MID: f32 = 0.001_935_307_2;
const TWO_PI_LO: f32 = 1.025_313_2e-11;

/// Which elements of a head form a rotated pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RopeMode {
    /// `(2i, 2i + 1)`: GPT-J, llama.cpp's default.
    Normal,
    /// `(i, i + dim / 2)`: GPT-NeoX, Hugging Face's `rotate_half` (Llama, Qwen2 in HF form).
    Neox,
}

impl RopeMode {
    /// Both modes.
    pub const ALL: [RopeMode; 2] = [RopeMode::Normal, RopeMode::Neox];

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            RopeMode::Normal => "normal",
            RopeMode::Neox => "neox",
        }
    }

    /// Element indices of pair `i` within a head of `dim` elements.
    pub fn pair(self, i: usize, dim: usize) -> (usize, usize) {
        match self {
            RopeMode::Normal => (2 * i, 2 * i + 1),
            RopeMode::Neox => (i, i + dim / 2),
        }
    }
}

/// The standard frequencies `base^(-2i/dim)` for `i < dim / 2`, computed in f64 and
/// rounded once (the `inv_freq` buffer of Hugging Face models).
pub fn inv_freq(base: f64, dim: usize) -> Vec<f32> {
    (0..dim / 2)
        .map(|i| base.powf(-2.0 * i as f64 / dim as f64) as f32)
        .collect()
}

/// CPU reference in f64: `x` is `[tokens, heads, dim]`, one position per token.
pub fn reference(
    mode: RopeMode,
    x: &[f32],
    positions: &[u32],
    inv_freq: &[f32],
    heads: usize,
) -> Vec<f32> {
    let dim = 2 * inv_freq.len();
    let mut out = x.to_vec();
    for (row, head) in out.chunks_mut(dim).enumerate() {
        let pos = positions[row / heads] as f64;
        for (i, &f) in inv_freq.iter().enumerate() {
            let (j, k) = mode.pair(i, dim);
            let (s, c) = (pos * f as f64).sin_cos();
            let (a, b) = (head[j] as f64, head[k] as f64);
            head[j] = (a * c - b * s) as f32;
            head[k] = (a * s + b * c) as f32;
        }
    }
    out
}

/// The RoPE kernel for one [`RopeMode`]. Parameters: `x`, `positions` (u32 per token),
/// `inv_freq` (`dim / 2` f32), `out` (may be `x`), `pairs` (tokens * heads * dim / 2),
/// `heads`, `half` (dim / 2).
#[derive(Clone, Copy, Debug)]
pub struct RopeKernel(pub RopeMode);

/// `theta` reduced to about [-pi, pi].
fn reduce_angle(b: &mut KernelBuilder, theta: Reg<F32>) -> Reg<F32> {
    let turns = b.mul(theta, std::f32::consts::FRAC_1_PI * 0.5);
    let k = b.cvt::<F32, F32>(turns, Some(Rounding::Rni));
    let nk = b.neg(k);
    let r = b.fma(nk, TWO_PI_HI, theta);
    let r = b.fma(nk, TWO_PI_MID, r);
    b.fma(nk, TWO_PI_LO, r)
}

impl Kernel for RopeKernel {
    fn name(&self) -> String {
        format!("trueno_rope_{}_f32", self.0.name())
    }

    fn family(&self) -> Family {
        Family::Rope
    }

    fn build(&self) -> KernelIr {
        let mut b = KernelBuilder::new(self.name());
        b.overlap_neighbours();
        b.max_threads(THREADS);
        let x = b.param_ptr("x", PtxType::F32);
        let positions = b.param_ptr("positions", PtxType::U32);
        let freqs = b.param_ptr("inv_freq", PtxType::F32);
        let out = b.param_ptr("out", PtxType::F32);
        let pairs = b.param_u32("pairs");
        let heads = b.param_u32("heads");
        let half = b.param_u32("half");

        let idx = global_index(&mut b);
        let past = b.setp::<U32>(Cmp::Ge, idx, pairs);
        b.exit_if(past);
        let row = b.div_int(idx, half);
        let first = b.mul(row, half);
        let i = b.sub(idx, first);
        let token = b.div_int(row, heads);

        let pa = elem_addr(&mut b, positions, token, 4);
        let pos = b.ld::<U32, U64>(Space::Global, pa, 0);
        let pos = b.cvt::<F32, U32>(pos, Some(Rounding::Rn));
        let fa = elem_addr(&mut b, freqs, i, 4);
        let f = b.ld::<F32, U64>(Space::Global, fa, 0);
        let theta = b.mul(pos, f);
        let r = reduce_angle(&mut b, theta);
        let (s, c) = (b.sin(r), b.cos(r));

        // Element indices of the pair: 2 * idx (adjacent), or row * dim + i and + half.
        let (j, k) = match self.0 {
            RopeMode::Normal => {
                let j = b.shl(idx, 1u32);
                (j, b.add(j, 1u32))
            }
            RopeMode::Neox => {
                let j = b.mad(row, half, idx);
                (j, b.add(j, half))
            }
        };
        let (ja, ka) = (elem_addr(&mut b, x, j, 4), elem_addr(&mut b, x, k, 4));
        let a = b.ld::<F32, U64>(Space::Global, ja, 0);
        let v = b.ld::<F32, U64>(Space::Global, ka, 0);
        let bs = b.mul(v, s);
        let na = b.neg(bs);
        let ra = b.fma(a, c, na);
        let a_s = b.mul(a, s);
        let rb = b.fma(v, c, a_s);
        let (jo, ko) = (elem_addr(&mut b, out, j, 4), elem_addr(&mut b, out, k, 4));
        b.st::<F32, U64>(Space::Global, jo, 0, ra);
        b.st::<F32, U64>(Space::Global, ko, 0, rb);
        b.ret();
        b.finish()
    }

    /// `dims = [tokens, heads, dim]`; `dim` must be even.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        let name = self.name();
        check_dims(&name, dims, 3)?;
        if !dims[2].is_multiple_of(2) {
            return shape_err(&name, format!("head dim {} is odd", dims[2]));
        }
        let pairs = dims[0] * dims[1] * dims[2] / 2;
        Ok(LaunchConfig::linear(
            blocks_for(&name, pairs, THREADS as usize, i32::MAX as u32)?,
            THREADS,
        ))
    }
}

/// Both RoPE kernels.
pub fn all() -> Vec<Box<dyn Kernel>> {
    RopeMode::ALL
        .iter()
        .map(|&m| Box::new(RopeKernel(m)) as Box<dyn Kernel>)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_pi_splits_into_its_three_parts() {
        let sum = TWO_PI_HI as f64 + TWO_PI_MID as f64 + TWO_PI_LO as f64;
        assert!((sum - std::f64::consts::TAU).abs() < 1e-15, "{sum}");
        // The high part has at most 8 significant bits (its low 16 mantissa bits are
        // zero), so its product with any k < 2^16 fits f32's 24 and is exact.
        assert_eq!(TWO_PI_HI.to_bits() & 0xFFFF, 0);
        let k = 65_535.0f32;
        assert_eq!((k * TWO_PI_HI) as f64, 65_535.0 * TWO_PI_HI as f64);
    }

    #[test]
    fn odd_head_dims_and_empty_shapes_are_errors() {
        for m in RopeMode::ALL {
            let k = RopeKernel(m);
            assert!(k.launch_config(&[2, 4, 63]).is_err());
            assert!(k.launch_config(&[0, 4, 64]).is_err());
            assert_eq!(k.launch_config(&[3, 2, 128]).unwrap().grid.0, 2);
        }
    }

    #[test]
    fn the_reference_rotates_by_position_times_frequency() {
        // One head of dim 2 at position 1 with frequency pi/2: (1, 0) -> (0, 1).
        let f = [std::f32::consts::FRAC_PI_2];
        let r = reference(RopeMode::Normal, &[1.0, 0.0], &[1], &f, 1);
        assert!(r[0].abs() < 1e-7 && (r[1] - 1.0).abs() < 1e-7, "{r:?}");
        assert_eq!(inv_freq(10000.0, 4), vec![1.0, 0.01]);
        assert_eq!(RopeMode::Neox.pair(1, 8), (1, 5));
    }
}
