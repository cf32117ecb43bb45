//! Elementwise kernels over f32: 16-byte vector loads and stores in a grid-stride loop,
//! then a scalar tail. Buffers must be 16-byte aligned (device allocations are 256).

use super::helpers::{grid_vec4, load_cols, store_cols};
use super::{Family, Kernel, LaunchConfig, blocks_for, check_dims, math};
use crate::error::Result;
use crate::ptx::{F32, KernelBuilder, KernelIr, PtxType, Reg};

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
            (ElementwiseOp::Relu, ..) => math::relu(b, x),
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

/// The kernel for one [`ElementwiseOp`]. Parameters: `x`, `y` (binary ops),
/// `out`, `n`, `alpha` (ops with a scale).
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
        b.overlap_neighbours();
        b.max_threads(THREADS);
        let x = b.param_ptr("x", PtxType::F32);
        let y = op.is_binary().then(|| b.param_ptr("y", PtxType::F32));
        let out = b.param_ptr("out", PtxType::F32);
        let n = b.param_u32("n");
        let alpha = op.has_alpha().then(|| b.param_f32("alpha"));
        grid_vec4(&mut b, n, |b, i, width| {
            let xv = load_cols(b, x, i, width);
            let yv = y.map(|y| load_cols(b, y, i, width));
            let r: Vec<Reg<F32>> = (0..xv.len())
                .map(|k| op.apply(b, xv[k], yv.as_ref().map(|v| v[k]), alpha))
                .collect();
            store_cols(b, out, i, &r);
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
