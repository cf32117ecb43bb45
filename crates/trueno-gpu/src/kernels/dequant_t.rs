//! Quantized weights to a transposed bf16 matrix, the tensor-core operand of a prefill's
//! projections: `W` is `[out, in]` (GGML's layout, a row per output), the GEMM wants
//! `Y = X Wᵀ` with `Wᵀ` row-major `[in, out]` (`Stream::gemm_mma`'s `b`).
//!
//! A thread block takes 64 rows of `W` and one group of 256 columns: each warp
//! dequantizes eight of the rows (the lanes as in [`super::dequant`]), rounds to bf16 and
//! writes them transposed into shared memory; after a barrier each warp writes 32 of the
//! 256 rows of `Wᵀ`, 64 values (128 bytes) each, in 4-byte stores: both global sides
//! coalesced.

use super::dequant::lane_values;
use super::helpers::elem_addr;
use super::qgemv::QuantFormat;
use super::{Family, Kernel, LaunchConfig};
use crate::error::{GpuError, Result, shape_err};
use crate::ptx::{Bf16, Cmp, F32, KernelBuilder, KernelIr, PtxType, Rounding, Space, U32, U64};

/// Threads per block: eight warps.
const THREADS: u32 = 256;
/// Rows of `W` (columns of `Wᵀ`) per block.
const TILE_ROWS: u32 = 64;
/// Columns of `W` per block (one super-block, or eight 32-value blocks).
const GROUP: u32 = 256;
/// Shared row stride in bf16 values: 64 plus 2, so the transposed writes of a warp's
/// lanes spread over the banks and the 4-byte reads stay aligned.
const STRIDE: u32 = TILE_ROWS + 2;

/// `wt[c * rows + r] = bf16(W[r, c])` for a `[rows, cols]` matrix `W` of [`QuantFormat`]
/// blocks. Parameters: `w` (`u16` words of the blocks), `wt`, `rows`, `blocks` (per
/// row).
#[derive(Clone, Copy, Debug)]
pub struct DequantTransposedKernel(pub QuantFormat);

impl DequantTransposedKernel {
    fn build_ir(&self) -> KernelIr {
        let f = self.0;
        let mut b = KernelBuilder::new(self.name());
        b.overlap_neighbours();
        b.max_threads(THREADS);
        let w = b.param_ptr("w", PtxType::U16);
        let wt = b.param_ptr("wt", PtxType::Bf16);
        let rows = b.param_u32("rows");
        let blocks = b.param_u32("blocks");
        let tile = b.shared_array("tile", GROUP * STRIDE * 2, 16);
        let tid = b.tid_x();
        let lane = b.and(tid, 31u32);
        let warp = b.shr(tid, 5u32);
        let bx = b.ctaid_x();
        let g = b.ctaid_y();
        let row0 = b.mul(bx, TILE_ROWS);
        let per_group = GROUP / f.block_elems() as u32;
        let group_bytes = per_group * f.block_bytes() as u32;
        let row_bytes = b.mul(blocks, f.block_bytes() as u32);
        // Rows warp, warp + 8, ... of the tile (a loop, not unrolled: one row's loads in
        // flight per warp, the other warps and blocks cover the latency).
        b.for_loop(warp, TILE_ROWS, 8u32, false, |b, r_local| {
            let r = b.add(row0, r_local);
            let inside = b.setp::<U32>(Cmp::Lt, r, rows);
            b.if_then(inside, false, |b| {
                let row_off = b.mul_wide(r, row_bytes);
                let wr = b.add(w, row_off);
                let grp = elem_addr(b, wr, g, group_bytes);
                let lv = lane_values(b, f, grp, lane);
                for (at, v) in lv.at.iter().zip(&lv.v) {
                    for (j, &x) in v.iter().enumerate() {
                        // tile[(at + j) * STRIDE + r_local], two bytes each.
                        let c = b.add(*at, j as u32);
                        let slot = b.mad(c, STRIDE, r_local);
                        let addr = b.mad(slot, 2u32, tile);
                        let h = b.cvt::<Bf16, F32>(x, Some(Rounding::Rn));
                        b.st::<Bf16, U32>(Space::Shared, addr, 0, h);
                    }
                }
            });
        });
        b.bar_sync();
        // Rows g * 256 + c of Wᵀ, columns row0 + 2 lane and the next.
        let o = b.mad(lane, 2u32, row0);
        let inside = b.setp::<U32>(Cmp::Lt, o, rows);
        b.if_then(inside, false, |b| {
            let c0 = b.shl(warp, 5u32);
            let col0 = b.mad(g, GROUP, c0);
            b.for_loop(0u32, 32u32, 1u32, false, |b, j| {
                let c = b.add(c0, j);
                let slot = b.mad(c, STRIDE, 0u32);
                let slot = b.mad(lane, 2u32, slot);
                let addr = b.mad(slot, 2u32, tile);
                let pair = b.ld::<U32, U32>(Space::Shared, addr, 0);
                let col = b.add(col0, j);
                let at = b.mad(col, rows, o);
                let dst = elem_addr(b, wt, at, 2);
                b.st::<U32, U64>(Space::Global, dst, 0, pair);
            });
        });
        b.ret();
        b.finish()
    }
}

impl Kernel for DequantTransposedKernel {
    fn name(&self) -> String {
        format!("trueno_dequant_t_{}_bf16", self.0.name())
    }

    fn family(&self) -> Family {
        Family::Qgemv
    }

    fn build(&self) -> KernelIr {
        self.build_ir()
    }

    /// `dims = [rows, cols]` of `W`: `rows` a multiple of 8, `cols` of 256.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        let name = self.name();
        let (rows, cols) = self.0.check_matrix(&name, dims, GROUP as usize)?;
        if !rows.is_multiple_of(8) {
            return shape_err(&name, format!("rows {rows} is not a multiple of 8"));
        }
        let tiles =
            u32::try_from(rows.div_ceil(TILE_ROWS as usize)).map_err(|_| GpuError::Shape {
                kernel: name.clone(),
                reason: format!("{rows} rows"),
            })?;
        let groups = cols / GROUP as usize;
        if groups > 65535 {
            return shape_err(&name, format!("{cols} columns are over 65535 groups"));
        }
        Ok(LaunchConfig {
            grid: (tiles, groups as u32, 1),
            block: (THREADS, 1, 1),
            shared_bytes: 0,
        })
    }
}

/// One transposed-dequantization kernel per format.
pub fn all() -> Vec<Box<dyn Kernel>> {
    QuantFormat::ALL
        .iter()
        .map(|&f| Box::new(DequantTransposedKernel(f)) as Box<dyn Kernel>)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_per_64_rows_and_256_columns() {
        for f in QuantFormat::ALL {
            let k = DequantTransposedKernel(f);
            let c = k.launch_config(&[4096, 14336]).unwrap();
            assert_eq!((c.grid, c.block.0), ((64, 56, 1), THREADS));
            assert_eq!(k.launch_config(&[72, 256]).unwrap().grid, (2, 1, 1));
            assert!(
                k.launch_config(&[12, 256]).is_err(),
                "rows not a multiple of 8"
            );
            assert!(
                k.launch_config(&[64, 96]).is_err(),
                "columns not whole groups"
            );
            assert!(k.launch_config(&[0, 256]).is_err());
        }
    }
}
