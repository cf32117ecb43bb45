//! Matrix transpose, `out[j][i] = x[i][j]` for f32: the k-major `Bᵀ` a TF32 product
//! reads (the tensor cores transpose only 16-bit operands), made from a row-major B.
//!
//! A block moves one 32 x 32 tile through shared memory: coalesced 128-byte reads of
//! the tile's rows, coalesced writes of its columns. The shared rows are 33 words
//! apart, so a warp reading a column touches 32 different banks.

use super::helpers::elem_addr;
use super::{Family, Kernel, LaunchConfig, blocks_for, check_dims};
use crate::error::Result;
use crate::ptx::{Cmp, F32, KernelBuilder, KernelIr, PtxType, Reg, Space, U32};

/// Tile side.
const TILE: u32 = 32;
/// Rows of the tile a pass of the block covers (blocks of 32 x 8 threads).
const ROWS_PER_PASS: u32 = 8;
/// Shared words per tile row: one more than the tile, against bank conflicts.
const PITCH: u32 = TILE + 1;

/// `out = xᵀ` for a row-major `rows x cols` f32 `x` (`out` is `cols x rows`).
/// Parameters: `x`, `out`, `rows`, `cols`.
#[derive(Clone, Copy, Debug)]
pub struct TransposeKernel;

impl Kernel for TransposeKernel {
    fn name(&self) -> String {
        "trueno_transpose_f32".into()
    }

    fn family(&self) -> Family {
        Family::Elementwise
    }

    fn build(&self) -> KernelIr {
        let mut b = KernelBuilder::new(self.name());
        b.max_threads(TILE * ROWS_PER_PASS);
        let x = b.param_ptr("x", PtxType::F32);
        let out = b.param_ptr("out", PtxType::F32);
        let rows = b.param_u32("rows");
        let cols = b.param_u32("cols");
        let tile = b.shared_array("tile", TILE * PITCH * 4, 4);
        let t = b.tid_x();
        let tx = b.and(t, TILE - 1);
        let ty = b.shr(t, TILE.trailing_zeros());
        let (bx, by) = (b.ctaid_x(), b.ctaid_y());
        let col0 = b.mul(bx, TILE);
        let row0 = b.mul(by, TILE);
        // Read: thread (tx, ty) takes column col0 + tx of rows row0 + ty + 8 i.
        passes(
            &mut b,
            (ty, tx),
            (row0, rows),
            (col0, cols),
            |b, r_local, r, c| {
                let idx = b.mad(r, cols, c);
                let src = elem_addr(b, x, idx, 4);
                let v = b.ld::<F32, _>(Space::Global, src, 0);
                let slot = b.mad(r_local, PITCH, tx);
                let at = b.mad(slot, 4u32, tile);
                b.st::<F32, U32>(Space::Shared, at, 0, v);
            },
        );
        b.bar_sync();
        // Write: thread (tx, ty) writes row col0 + ty + 8 i of `out`, column row0 + tx.
        passes(
            &mut b,
            (ty, tx),
            (col0, cols),
            (row0, rows),
            |b, c_local, orow, oc| {
                let slot = b.mad(tx, PITCH, c_local);
                let at = b.mad(slot, 4u32, tile);
                let v = b.ld::<F32, U32>(Space::Shared, at, 0);
                let idx = b.mad(orow, rows, oc);
                let dst = elem_addr(b, out, idx, 4);
                b.st::<F32, _>(Space::Global, dst, 0, v);
            },
        );
        b.ret();
        b.finish()
    }

    /// `dims = [rows, cols]` of `x`.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        let name = self.name();
        check_dims(&name, dims, 2)?;
        let gx = blocks_for(&name, dims[1], TILE as usize, i32::MAX as u32)?;
        let gy = blocks_for(&name, dims[0], TILE as usize, 65535)?;
        Ok(LaunchConfig {
            grid: (gx, gy, 1),
            block: (TILE * ROWS_PER_PASS, 1, 1),
            shared_bytes: 0,
        })
    }
}

/// The tile's passes over its rows, both ways: thread (tx, ty) visits rows `ty + 8 i`
/// from `row0` (of `rows`) at column `col0 + tx` (of `cols`), calling `f(b, local row,
/// row, column)` where both lie inside the matrix.
fn passes(
    b: &mut KernelBuilder,
    (ty, tx): (Reg<U32>, Reg<U32>),
    (row0, rows): (Reg<U32>, Reg<U32>),
    (col0, cols): (Reg<U32>, Reg<U32>),
    f: impl Fn(&mut KernelBuilder, Reg<U32>, Reg<U32>, Reg<U32>),
) {
    let c = b.add(col0, tx);
    let c_in = b.setp::<U32>(Cmp::Lt, c, cols);
    for i in 0..TILE / ROWS_PER_PASS {
        let local = b.add(ty, i * ROWS_PER_PASS);
        let r = b.add(row0, local);
        let r_in = b.setp::<U32>(Cmp::Lt, r, rows);
        let inside = b.and_pred(r_in, c_in);
        b.if_then(inside, false, |b| f(b, local, r, c));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_block_per_32_by_32_tile_and_limits_checked() {
        let k = TransposeKernel;
        let c = k.launch_config(&[33, 100]).unwrap();
        assert_eq!((c.grid, c.block.0), ((4, 2, 1), 256));
        assert!(k.launch_config(&[0, 4]).is_err());
        assert!(k.launch_config(&[4]).is_err());
        // 65536 tiles of rows: over the grid's y limit.
        assert!(k.launch_config(&[65536 * 32, 1]).is_err());
    }
}
