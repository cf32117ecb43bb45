//! Rows of a dense f32, bf16 or f16 table gathered by id into f32: the token-embedding
//! lookup for a model whose embedding table is not quantized (the quantized ones:
//! [`super::dequant`]). An id past the table gives a row of NaN, never a read outside it.

use super::float_type::{FloatType, widen};
use super::helpers::{clamped_row, elem_addr, global_index, grid_threads};
use super::{Family, Kernel, LaunchConfig, blocks_for, check_dims};
use crate::error::Result;
use crate::ptx::{F32, KernelBuilder, KernelIr, PtxType, Space, U16, U32, U64};

/// Threads per block.
const THREADS: u32 = 256;

/// `y[t * cols + c] = table[ids[t] * cols + c]` as f32. Parameters: `table`, `ids`, `y`,
/// `cols`, `table_rows`, `total` (ids x cols).
#[derive(Clone, Copy, Debug)]
pub struct GatherRowsKernel(pub FloatType);

impl Kernel for GatherRowsKernel {
    fn name(&self) -> String {
        format!("trueno_gather_rows_{}", self.0.name())
    }

    fn family(&self) -> Family {
        Family::Qgemv
    }

    fn build(&self) -> KernelIr {
        let ty = self.0;
        let mut b = KernelBuilder::new(self.name());
        b.overlap_neighbours();
        b.max_threads(THREADS);
        let table = b.param_ptr("table", ty.ptx());
        let ids = b.param_ptr("ids", PtxType::U32);
        let y = b.param_ptr("y", PtxType::F32);
        let cols = b.param_u32("cols");
        let table_rows = b.param_u32("table_rows");
        let total = b.param_u32("total");
        let gid = global_index(&mut b);
        let stride = grid_threads(&mut b);
        b.for_loop(gid, total, stride, false, |b, i| {
            let t = b.div_int(i, cols);
            let c = b.rem(i, cols);
            let ip = elem_addr(b, ids, t, 4);
            let id = b.ld::<U32, U64>(Space::Global, ip, 0);
            // An id past the table reads its last row and writes NaN.
            let (row, bad) = clamped_row(b, id, table_rows);
            let at = b.mul_wide(row, cols);
            let c64 = b.cvt::<U64, U32>(c, None);
            let at = b.add(at, c64);
            let at = b.mul(at, u64::from(ty.bytes()));
            let src = b.add(table, at);
            let v = match ty {
                FloatType::F32 => b.ld::<F32, U64>(Space::Global, src, 0),
                _ => {
                    let h = b.ld::<U16, U64>(Space::Global, src, 0);
                    let w = b.cvt::<U32, U16>(h, None);
                    widen(b, &[w], ty)[0]
                }
            };
            let v = b.selp(f32::NAN, v, bad);
            let dst = elem_addr(b, y, i, 4);
            b.st::<F32, U64>(Space::Global, dst, 0, v);
        });
        b.ret();
        b.finish()
    }

    /// `dims = [ids, cols]`.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        check_dims(&self.name(), dims, 2)?;
        let n = dims[0] * dims[1];
        let blocks = blocks_for(&self.name(), n, THREADS as usize, i32::MAX as u32)?;
        Ok(LaunchConfig::linear(blocks.min(4096), THREADS))
    }
}

/// One gather per table type.
pub fn all() -> Vec<Box<dyn Kernel>> {
    FloatType::ALL
        .into_iter()
        .map(|t| Box::new(GatherRowsKernel(t)) as Box<dyn Kernel>)
        .collect()
}
