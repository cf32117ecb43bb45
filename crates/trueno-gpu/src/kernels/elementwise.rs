//! Elementwise kernels over f32: 16-byte vector loads and stores in a grid-stride loop,
//! then a scalar tail. Buffers must be 16-byte aligned (device allocations are 256).

use super::helpers::{elem_addr, global_index, grid_threads};
use super::{Family, Kernel, LaunchConfig, blocks_for, check_dims, math};
use crate::error::Result;
use crate::ptx::{Cmp, F32, KernelBuilder, KernelIr, PtxType, Reg, Space, U32, U64};

/// Threads per block.
pub const THREADS: u32 = 256;
/// Elements per vector access.
const VEC: u32 = 4;

/// The elementwise operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElementwiseOp {
    /// x + y
    Add,
    /// x * y
    Mul,
    /// alpha * x
    Scale,
    /// max(x, 0), NaN kept
    Relu,
    /// x * Φ(x) (exact, erf form)
    Gelu,
    /// x * sigmoid(x)
    Silu,
    /// silu(gate) * up: the gated FFN activation of Llama-family models
    Swiglu,
}

impl ElementwiseOp {
    /// Every op.
    pub const ALL: [ElementwiseOp; 7] = [
        ElementwiseOp::Add,
        ElementwiseOp::Mul,
        ElementwiseOp::Scale,
        ElementwiseOp::Relu,
        ElementwiseOp::Gelu,
        ElementwiseOp::Silu,
        ElementwiseOp::Swiglu,
    ];

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            ElementwiseOp::Add => "add",
            ElementwiseOp::Mul => "mul",
            ElementwiseOp::Scale => "scale",
            ElementwiseOp::Relu => "relu",
            ElementwiseOp::Gelu => "gelu",
            ElementwiseOp::Silu => "silu",
            ElementwiseOp::Swiglu => "swiglu",
        }
    }

    /// Two inputs (x, y) or one.
    pub fn is_binary(self) -> bool {
        matches!(
            self,
            ElementwiseOp::Add | ElementwiseOp::Mul | ElementwiseOp::Swiglu
        )
    }

    /// Takes the `alpha` scalar parameter.
    pub fn has_alpha(self) -> bool {
        self == ElementwiseOp::Scale
    }

    /// The CPU reference, evaluated in f64 where it matters.
    pub fn reference(self, x: f32, y: f32, alpha: f32) -> f32 {
        use trueno::activations as a;
        match self {
            ElementwiseOp::Add => x + y,
            ElementwiseOp::Mul => x * y,
            ElementwiseOp::Scale => alpha * x,
            ElementwiseOp::Relu => {
                if x.is_nan() {
                    x
                } else {
                    x.max(0.0)
                }
            }
            ElementwiseOp::Gelu => a::gelu_erf(x),
            ElementwiseOp::Silu => a::silu(x),
            ElementwiseOp::Swiglu => (a::silu(x) as f64 * y as f64) as f32,
        }
    }

    fn apply(
        self,
        b: &mut KernelBuilder,
        x: Reg<F32>,
        y: Option<Reg<F32>>,
        alpha: Option<Reg<F32>>,
    ) -> Reg<F32> {
        match (self, y, alpha) {
            (ElementwiseOp::Add, Some(y), _) => b.add(x, y),
            (ElementwiseOp::Mul, Some(y), _) => b.mul(x, y),
            (ElementwiseOp::Scale, _, Some(a)) => b.mul(a, x),
            (ElementwiseOp::Relu, ..) => {
                // x > 0 or x is NaN: keep x.
                let keep = b.setp::<F32>(Cmp::Gtu, x, 0.0f32);
                b.selp(x, 0.0f32, keep)
            }
            (ElementwiseOp::Gelu, ..) => math::gelu(b, x),
            (ElementwiseOp::Silu, ..) => math::silu(b, x),
            (ElementwiseOp::Swiglu, Some(y), _) => {
                let s = math::silu(b, x);
                b.mul(s, y)
            }
            _ => unreachable!("operands follow is_binary and has_alpha"),
        }
    }
}

/// The kernel for one [`ElementwiseOp`]. Parameters: `x`, [`y`], `out`, `n`, [`alpha`].
#[derive(Clone, Copy, Debug)]
pub struct ElementwiseKernel(pub ElementwiseOp);

impl Kernel for ElementwiseKernel {
    fn name(&self) -> String {
        format!("trueno_{}_f32", self.0.name())
    }

    fn family(&self) -> Family {
        Family::Elementwise
    }

    fn build(&self) -> KernelIr {
        let op = self.0;
        let mut b = KernelBuilder::new(self.name());
        b.max_threads(THREADS);
        let x = b.param_ptr("x", PtxType::F32);
        let y = op.is_binary().then(|| b.param_ptr("y", PtxType::F32));
        let out = b.param_ptr("out", PtxType::F32);
        let n = b.param_u32("n");
        let alpha = op.has_alpha().then(|| b.param_f32("alpha"));
        let gid = global_index(&mut b);
        let stride = grid_threads(&mut b);
        let n_vec = b.shr(n, 2u32);
        b.for_loop(gid, n_vec, stride, false, |b, i| {
            let xa = elem_addr(b, x, i, 16);
            let xv = b.ld_vec::<F32, U64, 4>(Space::Global, xa, 0);
            let yv = y.map(|y| {
                let ya = elem_addr(b, y, i, 16);
                b.ld_vec::<F32, U64, 4>(Space::Global, ya, 0)
            });
            let r: [Reg<F32>; 4] =
                std::array::from_fn(|k| op.apply(b, xv[k], yv.map(|v| v[k]), alpha));
            let oa = elem_addr(b, out, i, 16);
            b.st_vec(Space::Global, oa, 0, &r);
        });
        // The last n % 4 elements, one per thread of the first few.
        let head = b.shl(n_vec, 2u32);
        let j = b.add(head, gid);
        let in_tail = b.setp::<U32>(Cmp::Lt, j, n);
        b.if_then(in_tail, false, |b| {
            let xa = elem_addr(b, x, j, 4);
            let xs = b.ld::<F32, U64>(Space::Global, xa, 0);
            let ys = y.map(|y| {
                let ya = elem_addr(b, y, j, 4);
                b.ld::<F32, U64>(Space::Global, ya, 0)
            });
            let r = op.apply(b, xs, ys, alpha);
            let oa = elem_addr(b, out, j, 4);
            b.st::<F32, U64>(Space::Global, oa, 0, r);
        });
        b.ret();
        b.finish()
    }

    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        check_dims(&self.name(), dims, 1)?;
        // One vector (4 elements) per thread; at least one block for the tail.
        let work = dims[0].div_ceil(VEC as usize);
        Ok(LaunchConfig::linear(
            blocks_for(&self.name(), work, THREADS as usize, i32::MAX as u32)?,
            THREADS,
        ))
    }
}

/// Every elementwise kernel.
pub fn all() -> Vec<Box<dyn Kernel>> {
    ElementwiseOp::ALL
        .iter()
        .map(|&op| Box::new(ElementwiseKernel(op)) as Box<dyn Kernel>)
        .collect()
}
