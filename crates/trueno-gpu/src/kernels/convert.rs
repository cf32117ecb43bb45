//! f32 to f16 or bf16 (round to nearest even): activations made the 16-bit operand of a
//! tensor-core product (a prefill's projections, FlashAttention's inputs).

use super::float_type::{store_elem, store_row};
use super::gemm_mma::HalfType;
use super::helpers::{elem_addr, grid_vec4};
use super::{Family, Kernel, LaunchConfig, blocks_for, check_dims};
use crate::error::Result;
use crate::ptx::{F32, KernelBuilder, KernelIr, PtxType, Space, U64};

/// Threads per block.
const THREADS: u32 = 256;

/// `y[i] = half(x[i])`. Parameters: `x` (f32), `y` (f16 or bf16), `n`.
#[derive(Clone, Copy, Debug)]
pub struct ToHalfKernel(pub HalfType);

impl Kernel for ToHalfKernel {
    fn name(&self) -> String {
        format!("trueno_f32_to_{}", self.0.name())
    }

    fn family(&self) -> Family {
        Family::Elementwise
    }

    fn build(&self) -> KernelIr {
        let ty = self.0;
        let mut b = KernelBuilder::new(self.name());
        b.max_threads(THREADS);
        let x = b.param_ptr("x", PtxType::F32);
        let y = b.param_ptr("y", ty.ptx());
        let n = b.param_u32("n");
        grid_vec4(&mut b, n, |b, i, width| {
            let src = elem_addr(b, x, i, 4);
            let dst = elem_addr(b, y, i, 2);
            if width == 4 {
                // Four values in, two words of two halves out (8-byte store).
                let v = b.ld_vec::<F32, U64, 4>(Space::Global, src, 0);
                store_row(b, dst, &v, ty.into());
            } else {
                let v = b.ld::<F32, U64>(Space::Global, src, 0);
                store_elem(b, dst, v, ty.into());
            }
        });
        b.ret();
        b.finish()
    }

    /// `dims = [n]`.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        check_dims(&self.name(), dims, 1)?;
        let blocks = blocks_for(
            &self.name(),
            dims[0].div_ceil(4),
            THREADS as usize,
            i32::MAX as u32,
        )?;
        Ok(LaunchConfig::linear(blocks.min(4096), THREADS))
    }
}

/// Both conversions.
pub fn all() -> Vec<Box<dyn Kernel>> {
    [HalfType::Bf16, HalfType::F16]
        .into_iter()
        .map(|t| Box::new(ToHalfKernel(t)) as Box<dyn Kernel>)
        .collect()
}
