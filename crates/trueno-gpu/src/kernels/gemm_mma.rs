//! Tensor-core GEMM for sm_80 and later: `C = act(alpha * A B + beta * C + bias)` with
//! row-major f16 or bf16 `A` (m x k) and `B` (k x n), f32 accumulation and an f32, bf16
//! or f16 `C` (m x n); the epilogue is [`super::gemm_epilogue`]'s.
//!
//! A 128 x 128 block tile, 8 warps of 64 x 32, a k-step of 32 or 64 ([`MmaTileK`]).
//! Tiles move from global to shared memory by `cp.async` (16 bytes per copy, no
//! registers on the way) through three stages, so two tiles are in flight while one is
//! multiplied; `ldmatrix` reads the warp's fragments out of shared memory and
//! `mma.sync.m16n8k16` multiplies them (16 per warp per k16 step). Shared rows are XOR-swizzled in 16-byte chunks so both
//! the copies' writes and ldmatrix's eight-row reads hit eight different bank groups.
//!
//! Rows are copied in 16-byte chunks, so `k` and `n` must be multiples of 8 (a row of A
//! or B then starts on a 16-byte boundary); `m` is free. Ragged edges are zero-filled by
//! the copies (`src_bytes` 0) and masked at the store.

use super::float_type::FloatType;
use super::gemm::gemm_dims;
use super::gemm_epilogue::{CStore, GROUP_THREADS, staged_bytes};
use super::helpers::elem_addr;
use super::{Family, Kernel, LaunchConfig, blocks_for};
use crate::error::{Result, shape_err};
use crate::ptx::ir::{Dim, SpecialReg};
use crate::ptx::{Cmp, F32, KernelBuilder, KernelIr, Pred, PtxType, Reg, U32, U64};

/// Block tile rows and columns.
pub const TILE: u32 = 128;
/// Shared-memory stages (tiles in flight plus the one being multiplied).
pub const STAGES: u32 = 3;
/// Threads per block: 8 warps, 2 (rows) x 4 (columns).
pub const THREADS: u32 = 256;
/// Rows of C per warp (4 m16 fragments) and columns (4 n8 fragments).
const WARP_M: u32 = 64;
const WARP_N: u32 = 32;

/// The 16-bit input type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HalfType {
    /// IEEE binary16.
    F16,
    /// bfloat16.
    Bf16,
}

impl HalfType {
    pub(crate) fn ptx(self) -> PtxType {
        match self {
            HalfType::F16 => PtxType::F16,
            HalfType::Bf16 => PtxType::Bf16,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            HalfType::F16 => "f16",
            HalfType::Bf16 => "bf16",
        }
    }
}

/// The k-step of one stage: 64 halves the barriers and waits per multiply-add and
/// needs 96 KiB of shared memory (above the 48 KiB a kernel gets without opting in).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MmaTileK {
    /// 32: 16 KiB per stage.
    K32,
    /// 64: 32 KiB per stage.
    K64,
}

impl MmaTileK {
    /// The k-step in elements.
    pub fn elems(self) -> u32 {
        match self {
            MmaTileK::K32 => 32,
            MmaTileK::K64 => 64,
        }
    }

    /// Dynamic shared memory: all stages, or C staged for the epilogue (two groups of
    /// 64 rows) where that is more (k-step 32).
    pub fn shared_bytes(self) -> u32 {
        (STAGES * stage_bytes(self.elems())).max(2 * staged_bytes(TILE))
    }
}

/// One stage: an A tile (128 rows of `bk` halves) and a B tile (`bk` rows of 128).
fn stage_bytes(bk: u32) -> u32 {
    2 * TILE * bk * 2
}

/// The tensor-core GEMM for one input type, k-step and output type: parameters `a`,
/// `b`, `c`, `m`, `n`, `k`, then the epilogue's `alpha`, `beta` (`beta == 0` never reads
/// `c`), `bias`, `epilogue` ([`Activation::flags`](super::gemm_epilogue::Activation::flags)).
#[derive(Clone, Copy, Debug)]
pub struct MmaGemmKernel(pub HalfType, pub MmaTileK, pub FloatType);

/// Per-thread addressing of the copies into one stage: the shared offsets (within a
/// stage) and global pointers of this thread's A and B chunks (`bk / 16` of each).
struct Copies {
    a_smem: Reg<U32>,
    b_smem: Reg<U32>,
    a_ptr: Reg<U64>,
    b_ptr: Reg<U64>,
    a_rows_ok: Vec<Reg<Pred>>,
    b_col_ok: Reg<Pred>,
    a_k: Reg<U32>,
    b_k: Reg<U32>,
    a_next_rows: Reg<U64>,
    b_next_rows: Reg<U64>,
    b_tile_step: Reg<U64>,
}

/// `p ? 16 : 0` bytes and the address to read (`base` when nothing is read).
pub(super) fn cp_chunk(
    b: &mut KernelBuilder,
    p: Reg<Pred>,
    ptr: Reg<U64>,
    base: Reg<U64>,
) -> (Reg<U32>, Reg<U64>) {
    let bytes = b.selp::<U32>(16u32, 0u32, p);
    let src = b.selp::<U64>(ptr, base, p);
    (bytes, src)
}

/// Block-rows per launch group of [`raster`].
const RASTER_ROWS: u32 = 8;

/// The (column, row) tile of this block. Blocks run roughly in launch order; taken
/// row-major, the ~260 resident blocks of an 8192-wide product span two block-rows and
/// every column, so each B panel is fetched from memory by every row in turn. Launch
/// order here walks groups of `RASTER_ROWS` block-rows column by column: the resident
/// blocks cover a few columns of eight rows, and their A and B panels stay in L2.
pub(super) fn raster(b: &mut KernelBuilder) -> (Reg<U32>, Reg<U32>) {
    let (cx, cy) = (b.ctaid_x(), b.ctaid_y());
    let gx = b.nctaid_x();
    let gy = b.special(SpecialReg::Nctaid(Dim::Y));
    let pid = b.mad(cy, gx, cx);
    let per_group = b.mul(gx, RASTER_ROWS);
    let group = b.div_int(pid, per_group);
    let first = b.mul(group, RASTER_ROWS);
    let left = b.sub(gy, first);
    let rows = b.min(left, RASTER_ROWS);
    let within = b.rem(pid, per_group);
    let dy = b.rem(within, rows);
    let y = b.add(first, dy);
    let x = b.div_int(within, rows);
    (x, y)
}

fn build(name: &str, input: HalfType, tile_k: MmaTileK, out: FloatType) -> KernelIr {
    let bk = tile_k.elems();
    // 16-byte chunks per A row, copies per thread of each operand, bytes per A row.
    let (a_chunks, per_thread, a_row_bytes) = (bk / 8, bk / 16, bk * 2);
    let a_tile_bytes = TILE * a_row_bytes;
    let stage = stage_bytes(bk);
    let mut b = KernelBuilder::new(name);
    b.max_threads(THREADS);
    // Two blocks a multiprocessor (128 registers a thread): left to itself, ptxas gave
    // an epilogue unrolled four rows a step up to 177 registers, halving the main
    // loop's occupancy.
    b.min_blocks(2);
    let ga = b.param_ptr("a", input.ptx());
    let gb = b.param_ptr("b", input.ptx());
    let gc = b.param_ptr("c", out.ptx());
    let m = b.param_u32("m");
    let n = b.param_u32("n");
    let k = b.param_u32("k");
    let smem = b.dynamic_shared();

    let t = b.tid_x();
    let lane = b.and(t, 31u32);
    let warp = b.shr(t, 5u32);
    let wm = b.shr(warp, 2u32);
    let wn = b.and(warp, 3u32);
    let (cx, cy) = raster(&mut b);
    let row0 = b.mul(cy, TILE);
    let col0 = b.mul(cx, TILE);

    // Copies. A: chunk (row r, 16-byte column q) for r = t / a_chunks + j * a_row_step,
    // q = t % a_chunks, stored at chunk q ^ swizzle(r) of its row: (r / 2) % 4 for 4
    // chunks a row, r % 8 for 8 (eight consecutive rows read by one ldmatrix then land
    // in eight different 16-byte bank groups). B: k-row t / 16 + 16 j, chunk t % 16,
    // stored at chunk q ^ (row % 8) of its 256-byte row.
    let a_row_step = THREADS / a_chunks;
    let a_swizzle = |b: &mut KernelBuilder, row: Reg<U32>| -> Reg<U32> {
        if a_chunks == 4 {
            let h = b.shr(row, 1u32);
            b.and(h, 3u32)
        } else {
            b.and(row, 7u32)
        }
    };
    let cp = {
        let ar = b.shr(t, a_chunks.trailing_zeros());
        let aq = b.and(t, a_chunks - 1);
        let sw = a_swizzle(&mut b, ar);
        let sq = b.xor(aq, sw);
        let a_smem = b.mul(ar, a_row_bytes);
        let a_smem = b.mad(sq, 16u32, a_smem);
        let a_row = b.add(row0, ar);
        let a_rows_ok = (0..per_thread)
            .map(|j| {
                let r = b.add(a_row, j * a_row_step);
                b.setp::<U32>(Cmp::Lt, r, m)
            })
            .collect();
        let a_k = b.shl(aq, 3u32);
        let a_idx = b.mad(a_row, k, a_k);
        let a_ptr = elem_addr(&mut b, ga, a_idx, 2);
        let a_next_rows = b.mul_wide(k, a_row_step * 2);

        let br = b.shr(t, 4u32);
        let bq = b.and(t, 15u32);
        let sw = b.and(br, 7u32);
        let sq = b.xor(bq, sw);
        let b_smem = b.shl(br, 8u32);
        let b_smem = b.mad(sq, 16u32, b_smem);
        let b_smem = b.add(b_smem, a_tile_bytes);
        let b_col = b.shl(bq, 3u32);
        let b_col = b.add(col0, b_col);
        let b_col_ok = b.setp::<U32>(Cmp::Lt, b_col, n);
        let b_idx = b.mad(br, n, b_col);
        let b_ptr = elem_addr(&mut b, gb, b_idx, 2);
        let b_next_rows = b.mul_wide(n, 16 * 2);
        let b_tile_step = b.mul_wide(n, bk * 2);
        Copies {
            a_smem,
            b_smem,
            a_ptr,
            b_ptr,
            a_rows_ok,
            b_col_ok,
            a_k,
            b_k: br,
            a_next_rows,
            b_next_rows,
            b_tile_step,
        }
    };
    // Issues the copies of k-tile `kt` (pointers already advanced to it) into the stage
    // at byte offset `stage`, and commits them as one group. Past `k`, zero-fill.
    let issue =
        |b: &mut KernelBuilder, stage: Reg<U32>, k0: Reg<U32>, a: Reg<U64>, bp: Reg<U64>| {
            let base = b.add(smem, stage);
            let ak = b.add(k0, cp.a_k);
            let ak_ok = b.setp::<U32>(Cmp::Lt, ak, k);
            let a_dst = b.add(base, cp.a_smem);
            let mut ptr = a;
            for (j, &row_ok) in cp.a_rows_ok.iter().enumerate() {
                let p = b.and_pred(row_ok, ak_ok);
                if j > 0 {
                    ptr = b.add(ptr, cp.a_next_rows);
                }
                let (bytes, src) = cp_chunk(b, p, ptr, ga);
                let dst = b.add(a_dst, j as u32 * a_row_step * a_row_bytes);
                b.cp_async_16(dst, src, bytes);
            }
            let b0 = b.add(k0, cp.b_k);
            let b_dst = b.add(base, cp.b_smem);
            let mut ptr = bp;
            for j in 0..per_thread {
                let bk = b.add(b0, 16 * j);
                let k_ok = b.setp::<U32>(Cmp::Lt, bk, k);
                let p = b.and_pred(cp.b_col_ok, k_ok);
                if j > 0 {
                    ptr = b.add(ptr, cp.b_next_rows);
                }
                let (bytes, src) = cp_chunk(b, p, ptr, gb);
                let dst = b.add(b_dst, j * 16 * 256);
                b.cp_async_16(dst, src, bytes);
            }
            b.cp_async_commit();
        };

    // Fragment reads. A (ldmatrix.x4): lane l addresses row (l/8 % 2) * 8 + l % 8 of
    // the warp's m16 fragment, chunk 2 * ks + l / 16, swizzled by the row's swizzle,
    // which is that of l % 8 because the other row terms are multiples of 8.
    let q = b.shr(lane, 3u32);
    let l8 = b.and(lane, 7u32);
    let a_frag: Vec<Reg<U32>> = {
        let qlo = b.and(q, 1u32);
        let r = b.mad(qlo, 8u32, l8);
        let wrow = b.mul(wm, WARP_M);
        let r = b.add(r, wrow);
        let rbytes = b.mul(r, a_row_bytes);
        let sw = a_swizzle(&mut b, l8);
        let qhi = b.shr(q, 1u32);
        (0..bk / 16)
            .map(|ks| {
                let c = b.add(qhi, 2 * ks);
                let c = b.xor(c, sw);
                b.mad(c, 16u32, rbytes)
            })
            .collect()
    };
    // B (ldmatrix.x4.trans): lane l addresses k-row (l/8 % 2) * 8 + l % 8 and column
    // chunk 4 * wn + 2 * np + l / 16 (np: which pair of n8 fragments), swizzled by the
    // row % 8 = l % 8; k16 step ks adds 16 rows (4096 bytes, same swizzle).
    let b_frag: [Reg<U32>; 2] = {
        let qlo = b.and(q, 1u32);
        let r = b.mad(qlo, 8u32, l8);
        let rbytes = b.shl(r, 8u32);
        let rbytes = b.add(rbytes, a_tile_bytes);
        let qhi = b.shr(q, 1u32);
        let c0 = b.mad(wn, 4u32, qhi);
        std::array::from_fn(|np| {
            let c = b.add(c0, 2 * np as u32);
            let c = b.xor(c, l8);
            b.mad(c, 16u32, rbytes)
        })
    };

    let acc: [[[Reg<F32>; 4]; 4]; 4] =
        std::array::from_fn(|_| std::array::from_fn(|_| std::array::from_fn(|_| b.mov(0.0f32))));
    let k_tiles = b.add(k, bk - 1);
    let k_tiles = b.shr(k_tiles, bk.trailing_zeros());

    // The copies run two tiles ahead of the multiplies: their pointers, k offset and
    // stage, each advanced by `next_tile` after a tile's copies are issued.
    let a_next = b.mov(cp.a_ptr);
    let b_next = b.mov(cp.b_ptr);
    let k_next = b.mov(0u32);
    let load_stage = b.mov(0u32);
    let use_stage = b.mov(0u32);
    let zero = b.mov(0u32);
    let next_stage = |b: &mut KernelBuilder, s: Reg<U32>| {
        let next = b.add(s, stage);
        let wrap = b.setp::<U32>(Cmp::Ge, next, STAGES * stage);
        let next = b.selp::<U32>(0u32, next, wrap);
        b.assign(s, next);
    };
    let issue_next = |b: &mut KernelBuilder| {
        issue(b, load_stage, k_next, a_next, b_next);
        let an = b.add(a_next, (bk * 2) as u64);
        let bn = b.add(b_next, cp.b_tile_step);
        let kn = b.add(k_next, bk);
        b.assign(a_next, an);
        b.assign(b_next, bn);
        b.assign(k_next, kn);
        next_stage(b, load_stage);
    };
    // Prologue: tiles 0 and 1 in flight.
    issue_next(&mut b);
    issue_next(&mut b);

    b.for_loop(0u32, k_tiles, 1u32, true, |b, _| {
        // Tile kt has landed (at most the one issued after it is still in flight), and
        // every warp is done with the stage the next copies overwrite.
        b.cp_async_wait(1);
        b.bar_sync();
        issue_next(b);

        let base = b.add(smem, use_stage);
        for (ks, &a_off) in a_frag.iter().enumerate() {
            let mut bf: [[Reg<U32>; 2]; 4] = [[zero; 2]; 4];
            for (np, &off) in b_frag.iter().enumerate() {
                let addr = b.add(base, off);
                let r = b.ldmatrix_x4(addr, (ks as i64) * 16 * 256, true);
                bf[2 * np] = [r[0], r[1]];
                bf[2 * np + 1] = [r[2], r[3]];
            }
            let a_addr = b.add(base, a_off);
            for (mi, acc_m) in acc.iter().enumerate() {
                let af = b.ldmatrix_x4(a_addr, (mi as i64) * 16 * a_row_bytes as i64, false);
                for (ni, acc_mn) in acc_m.iter().enumerate() {
                    let d = b.mma_m16n8k16(input.ptx(), af, bf[ni], *acc_mn);
                    for (x, y) in acc_mn.iter().zip(d) {
                        b.assign(*x, y);
                    }
                }
            }
        }
        next_stage(b, use_stage);
    });
    b.cp_async_wait(0);
    // Every warp is done with the stages: the epilogue stages C there.
    b.bar_sync();

    // The epilogue's parameters come last in the list and are read only now, so
    // nothing of theirs is held through the main loop.
    let store = CStore::declare(&mut b, gc, out, m, n);
    // Fragment (mi, ni) holds rows 16 mi + lane/4 (+ 8) of the warp's 64, columns
    // 8 ni + 2 (lane % 4) (+ 1) of its 32. The warps of one row (wm) are a group of
    // 128 threads with 64 rows. The tile's corner is computed again rather than held
    // through the loop (where it cost a spill at 128 registers).
    let area = b.mad(wm, staged_bytes(TILE), smem);
    let g = b.shr(lane, 2u32);
    let tq = b.and(lane, 3u32);
    let col = b.mul(wn, WARP_N);
    let col = b.mad(tq, 2u32, col);
    let pairs = acc.iter().enumerate().flat_map(|(mi, acc_m)| {
        acc_m.iter().enumerate().flat_map(move |(ni, f)| {
            (0..2).map(move |h| {
                let pair = [f[2 * h], f[2 * h + 1]];
                ((mi * 16 + h * 8) as u32, (ni * 8) as u32, pair)
            })
        })
    });
    store.stage(&mut b, (area, TILE), (g, col), pairs);
    b.bar_sync();
    let (cx, cy) = raster(&mut b);
    let row0 = b.mul(cy, TILE);
    let row0 = b.mad(wm, WARP_M, row0);
    let col0 = b.mul(cx, TILE);
    let t_group = b.and(t, GROUP_THREADS - 1);
    store.store(&mut b, (area, TILE), (row0, col0), t_group);
    b.ret();
    b.finish()
}

impl Kernel for MmaGemmKernel {
    fn name(&self) -> String {
        format!(
            "trueno_gemm_mma_{}_{}_k{}",
            self.0.name(),
            self.2.name(),
            self.1.elems()
        )
    }
    fn family(&self) -> Family {
        Family::GemmMma
    }
    fn build(&self) -> KernelIr {
        build(&self.name(), self.0, self.1, self.2)
    }
    /// `[m, n, k]`; `n` and `k` multiples of 8.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        tensor_core_launch(
            &self.name(),
            dims,
            (TILE, TILE),
            THREADS,
            self.1.shared_bytes(),
        )
    }
}

/// The launch of a tensor-core GEMM over `[m, n, k]`: one block of `threads` per
/// `tile.0 x tile.1` tile of C (row indices may reach the end of the last tile: A's
/// copies and C's stores compute them before their bounds predicates). Rows are copied
/// in 16-byte chunks, so `n` and `k` must be multiples of 8; `gemm_dims` bounds the
/// products by 2^32, so with `n, k >= 8` every dimension is below 2^29 (the copy
/// engine's signed 32-bit coordinates included).
pub(super) fn tensor_core_launch(
    name: &str,
    dims: &[usize],
    (tile_m, tile_n): (u32, u32),
    threads: u32,
    shared_bytes: u32,
) -> Result<LaunchConfig> {
    let [m, n, k] = gemm_dims(name, dims, tile_m as usize)?;
    if !n.is_multiple_of(8) || !k.is_multiple_of(8) {
        return shape_err(
            name,
            format!(
                "n = {n} and k = {k} must be multiples of 8 (rows are copied in 16-byte \
                 chunks); pad them or use the f32 GEMM"
            ),
        );
    }
    let gx = blocks_for(name, n, tile_n as usize, i32::MAX as u32)?;
    let gy = blocks_for(name, m, tile_m as usize, 65535)?;
    Ok(LaunchConfig {
        grid: (gx, gy, 1),
        block: (threads, 1, 1),
        shared_bytes,
    })
}

/// Every tensor-core GEMM configuration.
pub fn all() -> Vec<Box<dyn Kernel>> {
    let mut v: Vec<Box<dyn Kernel>> = Vec::new();
    for t in [HalfType::Bf16, HalfType::F16] {
        for kt in [MmaTileK::K32, MmaTileK::K64] {
            for out in FloatType::ALL {
                v.push(Box::new(MmaGemmKernel(t, kt, out)));
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_config_covers_ragged_m_and_rejects_what_the_copies_cannot_do() {
        let k = MmaGemmKernel(HalfType::Bf16, MmaTileK::K64, FloatType::F32);
        let c = k.launch_config(&[129, 264, 72]).unwrap();
        assert_eq!(c.shared_bytes, 3 * 32 * 1024);
        assert_eq!((c.grid, c.block.0), ((3, 2, 1), THREADS));
        for bad in [[16, 12, 16], [16, 16, 12], [0, 8, 8], [8, 8, 0]] {
            assert!(k.launch_config(&bad).is_err(), "{bad:?}");
        }
        assert!(k.launch_config(&[8, 8]).is_err());
        assert!(k.launch_config(&[1 << 20, 1 << 13, 1 << 13]).is_err());
    }

    #[test]
    fn the_stages_use_dynamic_shared_memory_sized_at_launch() {
        let ir = MmaGemmKernel(HalfType::F16, MmaTileK::K32, FloatType::Bf16).build();
        assert!(ir.dynamic_shared && ir.shared.is_empty());
        // Three 16 KiB stages, less than two groups of 64 staged rows of 128 + 8 floats.
        assert_eq!(MmaTileK::K32.shared_bytes(), 2 * 64 * (128 * 4 + 32));
        assert_eq!(MmaTileK::K64.shared_bytes(), 3 * 32 * 1024);
    }
}
