//! The tensor-core GEMMs' epilogue: each accumulated product `p` of row `r`, column `j`
//! becomes `act(alpha * p + beta * C[r, j] + bias[j])`, stored as the output's type (f32,
//! or bf16/f16 rounded to nearest). One implementation for the mma.sync and wgmma
//! kernels, which differ only in which lane holds which accumulator.
//!
//! The accumulators go through shared memory first (the main loop's stages are free by
//! then): each group of four warps writes its 64 rows there, then walks them four
//! columns a thread at a time in a loop, with 16-byte reads and coalesced 16-byte (f32)
//! or 8-byte (16-bit) stores.
//! The loop is what keeps the code small: applied in the registers the accumulators
//! sit in, every value needs its own copy of the epilogue, and a 128 x 256 tile's
//! unrolled GELU ran to hundreds of KiB of machine code, fetched from L2 as it ran.
//!
//! The activation and the bias are chosen at run time (one `epilogue` word of flags,
//! the same in every thread, so its branches are uniform); only the output type is
//! compiled in. A bias or activation then costs nothing when not asked for, and the
//! kernel count grows by output type only.

use super::elementwise::ElementwiseOp;
use super::float_type::{FloatType, load_row, store_row};
use super::helpers::elem_addr;
use super::math;
use crate::ptx::{Cmp, F32, KernelBuilder, PtxType, Reg, Space, U32, U64};

/// The function applied to each output value last (after alpha, beta and the bias).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Activation {
    /// The value as is.
    #[default]
    Identity,
    /// max(x, 0), NaN kept.
    Relu,
    /// x * Φ(x), the exact (erf) form, as [`ElementwiseOp::Gelu`].
    Gelu,
    /// x * sigmoid(x), as [`ElementwiseOp::Silu`].
    Silu,
    /// GELU's tanh approximation (`trueno::activations::gelu_tanh`; PyTorch's
    /// `approximate="tanh"`, cuBLASLt's GELU epilogue): no erfc polynomial, fewer
    /// instructions than the exact form.
    GeluTanh,
}

/// Rows of C one group of warps stages and stores together.
pub(super) const GROUP_ROWS: u32 = 64;
/// Threads of a group (four warps: a warpgroup).
pub(super) const GROUP_THREADS: u32 = 128;
/// Bytes added to each staged row: rows then start eight banks apart, so the eight rows
/// a warp's 8-byte pair stores touch (half a warp at a time) never share a bank.
const ROW_PAD: u32 = 32;
/// The pad for a group that stages its accumulators one at a time
/// ([`super::gemm_wgmma_kn`]: a warp's store writes rows 0, 2, 4 and 6, each at columns
/// `c..c + 4` and `c + 16..c + 20`): rows four banks apart, which leaves two-way
/// conflicts, the fewest a 16-byte-aligned row allows for that pattern.
pub(super) const ROW_PAD_SINGLES: u32 = 16;

/// Bytes of shared memory one group's staged rows take, `cols` f32 columns each.
pub(super) fn staged_bytes(cols: u32) -> u32 {
    GROUP_ROWS * (cols * 4 + ROW_PAD)
}

/// The flag bit of the `epilogue` parameter that says a bias is passed.
pub const BIAS_FLAG: u32 = 1 << 8;

impl Activation {
    /// Every activation.
    pub const ALL: [Activation; 5] = [
        Activation::Identity,
        Activation::Relu,
        Activation::Gelu,
        Activation::Silu,
        Activation::GeluTanh,
    ];

    /// Its code in the low byte of the kernels' `epilogue` parameter.
    pub fn code(self) -> u32 {
        self as u32
    }

    /// The CPU reference (the elementwise kernels' where they have the function).
    pub fn reference(self, x: f32) -> f32 {
        let op = |op: ElementwiseOp| op.reference(x, 0.0, 0.0);
        match self {
            Activation::Identity => x,
            Activation::Relu => op(ElementwiseOp::Relu),
            Activation::Gelu => op(ElementwiseOp::Gelu),
            Activation::Silu => op(ElementwiseOp::Silu),
            Activation::GeluTanh => trueno::activations::gelu_tanh(x),
        }
    }

    fn build(self, b: &mut KernelBuilder, x: Reg<F32>) -> Reg<F32> {
        match self {
            Activation::Identity => x,
            Activation::Relu => math::relu(b, x),
            Activation::Gelu => math::gelu(b, x),
            Activation::Silu => math::silu(b, x),
            Activation::GeluTanh => math::gelu_tanh(b, x),
        }
    }

    /// The `epilogue` parameter for this activation, with or without a bias.
    pub fn flags(self, bias: bool) -> u32 {
        self.code() | if bias { BIAS_FLAG } else { 0 }
    }
}

/// CPU reference of one output value from its exact product `p` (and the old `c`, read
/// only when `beta != 0`), before the rounding to the output type.
pub fn reference(
    p: f64,
    c: f32,
    (alpha, beta): (f32, f32),
    bias: Option<f32>,
    act: Activation,
) -> f32 {
    let mut v = alpha as f64 * p;
    if beta != 0.0 {
        v += beta as f64 * c as f64;
    }
    v += bias.unwrap_or(0.0) as f64;
    act.reference(v as f32)
}

/// The C side of a tensor-core epilogue: the epilogue's parameters, and the two steps
/// ([`CStore::stage`], then [`CStore::store`]) that take a group's accumulators to C.
pub(super) struct CStore {
    gc: Reg<U64>,
    out: FloatType,
    m: Reg<U32>,
    n: Reg<U32>,
    alpha: Reg<F32>,
    beta: Reg<F32>,
    bias: Reg<U64>,
    flags: Reg<U32>,
    row_pad: u32,
}

impl CStore {
    /// Declares the epilogue's parameters after the kernel's own: `alpha`, `beta`,
    /// `bias` (f32, one per column; read only when flagged) and `epilogue`
    /// ([`Activation::flags`]). `gc` is the output (`out` elements, row-major m x n).
    /// Call it after the main loop: the parameters are read where declared.
    pub(super) fn declare(
        b: &mut KernelBuilder,
        gc: Reg<U64>,
        out: FloatType,
        m: Reg<U32>,
        n: Reg<U32>,
    ) -> CStore {
        let alpha = b.param_f32("alpha");
        let beta = b.param_f32("beta");
        let bias = b.param_ptr("bias", PtxType::F32);
        let flags = b.param_u32("epilogue");
        CStore {
            gc,
            out,
            m,
            n,
            alpha,
            beta,
            bias,
            flags,
            row_pad: ROW_PAD,
        }
    }

    /// The same with `pad` bytes after each staged row instead of the pairs' 32.
    pub(super) fn with_row_pad(self, pad: u32) -> CStore {
        debug_assert!(pad.is_multiple_of(16));
        CStore {
            row_pad: pad,
            ..self
        }
    }

    /// Bytes from one staged row to the next.
    pub(super) fn stride(&self, cols: u32) -> u32 {
        cols * 4 + self.row_pad
    }

    /// Writes this thread's accumulators into its group's staging `area` (shared,
    /// [`staged_bytes`] of `cols` for each 64 rows, or [`stride`](Self::stride) a row):
    /// each `(dr, dc, run)` is the run of
    /// `N` (1 or 2) at row `row + dr`, columns `col + dc` on, within the staged rows.
    pub(super) fn stage<const N: usize>(
        &self,
        b: &mut KernelBuilder,
        (area, cols): (Reg<U32>, u32),
        (row, col): (Reg<U32>, Reg<U32>),
        runs: impl Iterator<Item = (u32, u32, [Reg<F32>; N])>,
    ) {
        let stride = self.stride(cols);
        let at = b.mad(row, stride, area);
        let at = b.mad(col, 4u32, at);
        for (dr, dc, run) in runs {
            let off = (dr * stride + dc * 4) as i64;
            match run.as_slice() {
                &[one] => b.st::<F32, U32>(Space::Shared, at, off, one),
                run => b.st_vec::<F32, U32>(Space::Shared, at, off, run),
            }
        }
    }

    /// Stores a staged group: `t` (0..[`GROUP_THREADS`]) takes four columns of rows
    /// `row0..row0 + 64` (C's rows; those past `m` skipped), columns `col0..col0 +
    /// cols`, the same four in every row it visits (a row is at most 512 columns, so
    /// the group's 128 threads cover whole rows), so their bias is loaded once. Two
    /// rows a step, their loads first (four made ptxas spill in the 16-bit-output
    /// kernels). Every thread runs the same steps, so the flags' branches stay uniform.
    pub(super) fn store(
        &self,
        b: &mut KernelBuilder,
        (area, cols): (Reg<U32>, u32),
        (row0, col0): (Reg<U32>, Reg<U32>),
        t: Reg<U32>,
    ) {
        const ROWS_A_STEP: u32 = 2;
        let stride = self.stride(cols);
        let quads = cols / 4;
        let row_step = GROUP_THREADS / quads;
        debug_assert!(GROUP_THREADS.is_multiple_of(quads));
        debug_assert!((GROUP_ROWS / row_step).is_multiple_of(ROWS_A_STEP));
        let read_c = b.setp::<F32>(Cmp::Ne, self.beta, 0.0f32);
        let bias_bit = b.and(self.flags, BIAS_FLAG);
        let has_bias = b.setp::<U32>(Cmp::Ne, bias_bit, 0u32);
        let act = b.and(self.flags, 0xFFu32);
        let q = b.and(t, quads - 1);
        let first = b.shr(t, quads.trailing_zeros());
        let col = b.mad(q, 4u32, col0);
        // n is a multiple of 8: four columns are in or out together.
        let c_ok = b.setp::<U32>(Cmp::Lt, col, self.n);
        let bias = [(); 4].map(|_| b.mov(0.0f32));
        let with_bias = b.and_pred(c_ok, has_bias);
        let bias_at = elem_addr(b, self.bias, col, 4);
        b.predicated(with_bias, |b| {
            let x = b.ld_vec::<F32, U64, 4>(Space::Global, bias_at, 0);
            for (&v, x) in bias.iter().zip(x) {
                b.assign(v, x);
            }
        });
        let from0 = b.mad(first, stride, area);
        let from0 = b.mad(q, 16u32, from0);
        let step = row_step * ROWS_A_STEP;
        b.for_loop(first, GROUP_ROWS, step, true, |b, r| {
            let from = b.sub(r, first);
            let from = b.mad(from, stride, from0);
            let rows: Vec<_> = (0..ROWS_A_STEP)
                .map(|u| {
                    let x = b.ld_vec::<F32, U32, 4>(
                        Space::Shared,
                        from,
                        (u * row_step * stride) as i64,
                    );
                    let row = b.add(row0, r);
                    let row = b.add(row, u * row_step);
                    let r_ok = b.setp::<U32>(Cmp::Lt, row, self.m);
                    let ok = b.and_pred(r_ok, c_ok);
                    let idx = b.mad(row, self.n, col);
                    let addr = elem_addr(b, self.gc, idx, self.out.bytes());
                    let v = x.map(|x| b.mul(self.alpha, x));
                    let with_c = b.and_pred(ok, read_c);
                    b.predicated(with_c, |b| {
                        let old = load_row(b, addr, 4, self.out);
                        for (&v, old) in v.iter().zip(old) {
                            let w = b.fma(self.beta, old, v);
                            b.assign(v, w);
                        }
                    });
                    b.predicated(has_bias, |b| {
                        for (&v, &add) in v.iter().zip(&bias) {
                            let w = b.add(v, add);
                            b.assign(v, w);
                        }
                    });
                    (row, addr, v)
                })
                .collect();
            for f in &Activation::ALL[1..] {
                let chosen = b.setp::<U32>(Cmp::Eq, act, f.code());
                b.if_then(chosen, true, |b| {
                    for &v in rows.iter().flat_map(|(_, _, v)| v) {
                        let w = f.build(b, v);
                        b.assign(v, w);
                    }
                });
            }
            // Each row's bounds predicate again: held across the activation, four of
            // them would outnumber the seven predicate registers there are.
            for (row, addr, v) in rows {
                let r_ok = b.setp::<U32>(Cmp::Lt, row, self.m);
                let ok = b.and_pred(r_ok, c_ok);
                b.predicated(ok, |b| store_row(b, addr, &v, self.out));
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_keep_the_activation_in_the_low_byte_and_the_bias_above() {
        assert_eq!(Activation::Gelu.flags(true), 2 | BIAS_FLAG);
        assert_eq!(Activation::Identity.flags(false), 0);
        let codes: Vec<u32> = Activation::ALL.iter().map(|a| a.code()).collect();
        assert_eq!(codes, [0, 1, 2, 3, 4]);
    }

    #[test]
    fn the_reference_applies_alpha_beta_bias_then_the_activation() {
        // 2 * 3 + 0.5 * 4 - 10 = -2 -> relu 0; beta 0 ignores a NaN C.
        let r = reference(3.0, 4.0, (2.0, 0.5), Some(-10.0), Activation::Relu);
        assert_eq!(r, 0.0);
        let r = reference(3.0, f32::NAN, (2.0, 0.0), None, Activation::Identity);
        assert_eq!(r, 6.0);
        let r = reference(1.0, 0.0, (1.0, 0.0), None, Activation::Silu);
        assert!((r - 0.731_058_6).abs() < 1e-6, "{r}");
        let r = reference(1.0, 0.0, (1.0, 0.0), None, Activation::Gelu);
        assert!((r - 0.841_344_7).abs() < 1e-6, "{r}");
    }
}
