//! Where the sm_80 tensor-core GEMM's lanes read their B fragments out of a pipeline
//! stage, for each way B is stored there: k-major rows (a `Bᵀ`) and n-major 16-bit rows
//! through `ldmatrix`, n-major f32 rows one 32-bit load a value.

use super::gemm_mma::{GemmInput, TILE, WARP_N};
use crate::ptx::{KernelBuilder, Reg, Space, U32};

/// Where each lane reads its B fragments in a stage (byte offsets): k-major rows by
/// `ldmatrix` (per k-step, per pair of n8 fragments), n-major 16-bit rows by
/// `ldmatrix.trans` (per pair; k-steps an immediate apart), or n-major f32 values one
/// 32-bit load each (per n8 fragment; k-steps and `b1` immediates apart).
pub(super) enum BFrags {
    KMajor(Vec<[Reg<U32>; 2]>),
    Trans([Reg<U32>; 2]),
    Gather([Reg<U32>; 4]),
}

impl BFrags {
    /// The lane's offsets for `input`'s B; `lane` and `wn` (the warp's column) place the
    /// lane, A's k-major rows are `a_row_bytes` long with the B tile `a_tile_bytes` on,
    /// swizzled by `a_swizzle`.
    ///
    /// B, 16-bit (ldmatrix.x4.trans): lane l addresses k-row (l/8 % 2) * 8 + l % 8 and
    /// column chunk 4 * wn + 2 * np + l / 16 (np: which pair of n8 fragments), swizzled by
    /// the row % 8 = l % 8; k16 step ks adds 16 rows (4096 bytes, same swizzle), an
    /// immediate offset. TF32 (ldmatrix.x4 on k-major rows, as A): lane l addresses n-row
    /// 32 wn + 16 np + (l / 16) * 8 + l % 8, chunk 2 ks + (l/8 % 2), swizzled as A's rows
    /// (by l % 8); one address per (np, ks). TF32 as stored (one 32-bit load a value):
    /// fragment ni's b0 is k-row l % 4 (b1 four rows on), column 32 wn + 8 ni + l / 4,
    /// in chunk 8 wn + 2 ni + l / 16 swizzled by 2 (l % 4) (the k-row's); one address per
    /// ni, the k8 step ks 8 rows (4096 bytes) on, an immediate offset.
    pub(super) fn new(
        b: &mut KernelBuilder,
        input: GemmInput,
        (lane, wn): (Reg<U32>, Reg<U32>),
        (a_row_bytes, a_tile_bytes): (u32, u32),
        a_swizzle: impl Fn(&mut KernelBuilder, Reg<U32>) -> Reg<U32>,
    ) -> BFrags {
        let eb = input.bytes();
        // The ldmatrix arms' lane split: matrix `q` of the four, row `l8` of it.
        let quad = |b: &mut KernelBuilder| (b.shr(lane, 3u32), b.and(lane, 7u32));
        let k_steps = a_row_bytes / 32;
        match input {
            GemmInput::Tf32Kn => {
                let g = b.shr(lane, 2u32);
                let tq = b.and(lane, 3u32);
                let rbytes = b.mad(tq, TILE * eb, a_tile_bytes);
                let within = b.and(g, 3u32);
                let rbytes = b.mad(within, eb, rbytes);
                let sw = b.shl(tq, 1u32);
                let c0 = b.shr(g, 2u32);
                let c0 = b.mad(wn, WARP_N / 4, c0);
                BFrags::Gather(std::array::from_fn(|ni| {
                    let c = b.add(c0, 2 * ni as u32);
                    let c = b.xor(c, sw);
                    b.mad(c, 16u32, rbytes)
                }))
            }
            _ if input.b_k_major() => {
                let (q, l8) = quad(b);
                let qlo = b.and(q, 1u32);
                let qhi = b.shr(q, 1u32);
                let r = b.mad(qhi, 8u32, l8);
                let r = b.mad(wn, WARP_N, r);
                let rbytes = b.mul(r, a_row_bytes);
                let rbytes = b.add(rbytes, a_tile_bytes);
                let sw = a_swizzle(b, l8);
                BFrags::KMajor(
                    (0..k_steps)
                        .map(|ks| {
                            let c = b.add(qlo, 2 * ks);
                            let c = b.xor(c, sw);
                            let at = b.mad(c, 16u32, rbytes);
                            std::array::from_fn(|np| b.add(at, np as u32 * 16 * a_row_bytes))
                        })
                        .collect(),
                )
            }
            _ => {
                let (q, l8) = quad(b);
                let qlo = b.and(q, 1u32);
                let r = b.mad(qlo, 8u32, l8);
                let rbytes = b.shl(r, 8u32);
                let rbytes = b.add(rbytes, a_tile_bytes);
                let qhi = b.shr(q, 1u32);
                let c0 = b.mad(wn, 4u32, qhi);
                BFrags::Trans(std::array::from_fn(|np| {
                    let c = b.add(c0, 2 * np as u32);
                    let c = b.xor(c, l8);
                    b.mad(c, 16u32, rbytes)
                }))
            }
        }
    }

    /// The four n8 fragments' (b0, b1) of k-step `ks` in the stage at `base`.
    pub(super) fn load(
        &self,
        b: &mut KernelBuilder,
        base: Reg<U32>,
        ks: usize,
    ) -> [[Reg<U32>; 2]; 4] {
        match self {
            BFrags::KMajor(v) => ldmatrix_pairs(b, base, v[ks], 0, false),
            BFrags::Trans(v) => ldmatrix_pairs(b, base, *v, (ks as i64) * 16 * 256, true),
            BFrags::Gather(v) => {
                // f32 values: k-step ks is 8 rows on, b1 4 rows past b0.
                let row = (TILE * 4) as i64;
                v.map(|off| {
                    let addr = b.add(base, off);
                    [0, 4].map(|r| b.ld::<U32, U32>(Space::Shared, addr, (8 * ks as i64 + r) * row))
                })
            }
        }
    }
}

/// Four n8 fragments' (b0, b1) from two `ldmatrix.x4` at `base + offs[np] + imm`, each
/// a pair as r[0..2] and r[2..4] (k-major, its matrices are (n 0-7, k lo), (n 0-7, k
/// hi), (n 8-15, ..)).
fn ldmatrix_pairs(
    b: &mut KernelBuilder,
    base: Reg<U32>,
    offs: [Reg<U32>; 2],
    imm: i64,
    trans: bool,
) -> [[Reg<U32>; 2]; 4] {
    let r = offs.map(|off| {
        let addr = b.add(base, off);
        b.ldmatrix_x4(addr, imm, trans)
    });
    [
        [r[0][0], r[0][1]],
        [r[0][2], r[0][3]],
        [r[1][0], r[1][1]],
        [r[1][2], r[1][3]],
    ]
}

#[cfg(test)]
mod tests {
    /// An f32 B stored n-major: k-row r, column j of the tile at byte
    /// `512 r + 16 ((j / 4) ^ 2 (r % 4)) + 4 (j % 4)` of the B tile. A warp's fragment
    /// load (lane l: k-row 8 ks + l % 4 (+ 4 for b1), column 32 wn + 8 ni + l / 4) then
    /// touches each of the 32 banks once; without the swizzle four lanes share a bank.
    #[test]
    fn gathered_tf32_fragments_read_every_bank_once() {
        let at = |r: u32, j: u32, swizzled: bool| {
            let sw = if swizzled { 2 * (r % 4) } else { 0 };
            512 * r + 16 * ((j / 4) ^ sw) + 4 * (j % 4)
        };
        for wn in 0..4 {
            for ni in 0..4 {
                for row in [0, 4, 8, 28] {
                    let banks = |swizzled| {
                        let mut seen = [0u32; 32];
                        for l in 0..32 {
                            let (r, j) = (row + l % 4, 32 * wn + 8 * ni + l / 4);
                            seen[(at(r, j, swizzled) / 4 % 32) as usize] += 1;
                        }
                        seen
                    };
                    assert_eq!(banks(true), [1; 32], "wn {wn} ni {ni} row {row}");
                    assert_eq!(*banks(false).iter().max().unwrap(), 4);
                }
            }
        }
    }
}
