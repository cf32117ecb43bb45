//! Tensor-core GEMM for sm_80 and later: `C = act(alpha * A B + beta * C + bias)` with
//! row-major f16 or bf16 `A` (m x k) and `B` (k x n), or f32 `A` and `B` or `Bᵀ` (n x k)
//! multiplied as TF32 ([`GemmInput`]), f32 accumulation and an f32, bf16 or f16 `C`
//! (m x n); the epilogue is [`super::gemm_epilogue`]'s.
//!
//! A 128 x 128 block tile, 8 warps of 64 x 32, a k-step of 32 or 64 ([`MmaTileK`]).
//! Tiles move from global to shared memory by `cp.async` (16 bytes per copy, no
//! registers on the way) through three stages, so two tiles are in flight while one is
//! multiplied; `ldmatrix` reads the warp's fragments out of shared memory and
//! `mma.sync` multiplies them (`m16n8k16` for 16-bit inputs, `m16n8k8` for TF32: 16 per
//! warp per 32 bytes of k). Shared rows are XOR-swizzled in 16-byte chunks so both the
//! copies' writes and ldmatrix's eight-row reads hit eight different bank groups. A
//! 16-bit B is stored n-major as it arrives and read with `ldmatrix.trans`; a `Bᵀ` (TF32,
//! or 16-bit weights stored `[out, in]`) k-major like A, and read as A is; an f32 B as it
//! arrives, n-major, whose 32-bit values `ldmatrix` cannot transpose, one shared load a
//! value (eight a warp's k8 step, against two `ldmatrix` for a `Bᵀ`).
//!
//! Rows are copied in 16-byte chunks, so `k` and `n` must be multiples of 8 (a row of A
//! or B then starts on a 16-byte boundary); `m` is free. Ragged edges are zero-filled by
//! the copies (`src_bytes` 0) and masked at the store.

use super::float_type::FloatType;
use super::gemm::gemm_dims;
use super::gemm_copies::{TileStep, issue_copies, k_major_copies, n_major_copies};

use super::gemm_epilogue::{CStore, GROUP_THREADS, staged_bytes};
use super::gemm_mma_frags::BFrags;
use super::gemm_split::{k_range, split_output};
use super::helpers;
use super::{Family, Kernel, LaunchConfig, blocks_for};
use crate::error::{Result, shape_err};
use crate::ptx::ir::{Dim, SpecialReg};
use crate::ptx::{F32, KernelBuilder, KernelIr, PtxType, Reg, U32, U64};

/// Block tile rows and columns.
pub const TILE: u32 = 128;
/// Shared-memory stages (tiles in flight plus the one being multiplied).
pub const STAGES: u32 = 3;
/// Threads per block: 8 warps, 2 (rows) x 4 (columns).
pub const THREADS: u32 = 256;
/// Rows of C per warp (4 m16 fragments) and columns (4 n8 fragments).
const WARP_M: u32 = 64;
pub(super) const WARP_N: u32 = 32;

/// The 16-bit input type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HalfType {
    /// IEEE binary16.
    F16,
    /// bfloat16.
    Bf16,
}

/// What a tensor-core GEMM multiplies, and so how B is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GemmInput {
    /// f16 or bf16 `A` (m x k) and `B` (k x n), both row-major.
    Half(HalfType),
    /// f16 or bf16 `A` (m x k) and `Bᵀ` (n x k), both row-major: a linear layer's
    /// `[out, in]` weights as they are stored, no transpose.
    HalfBt(HalfType),
    /// f32 `A` (m x k) and `Bᵀ` (n x k), both row-major, multiplied as TF32 (the
    /// products read 10 of the 23 mantissa bits; sums stay f32). The tensor cores read
    /// TF32 operands only k-major, so B comes transposed: the `[out, in]` layout of a
    /// linear layer's weights.
    Tf32,
    /// f32 `A` (m x k) and `B` (k x n), both row-major as stored, multiplied as TF32.
    /// The sm_80 kernel reads B's 32-bit values into its fragments one at a time
    /// (`ldmatrix` cannot transpose them); Hopper's `wgmma` runs it as its own kernel
    /// ([`super::gemm_wgmma_kn`]), so it is not in [`GemmInput::ALL`].
    Tf32Kn,
}

impl From<HalfType> for GemmInput {
    fn from(t: HalfType) -> Self {
        GemmInput::Half(t)
    }
}

impl GemmInput {
    /// The kernel-name part (`bf16`, `f16`, `tf32`).
    pub fn name(self) -> &'static str {
        match self {
            GemmInput::Half(t) => t.name(),
            GemmInput::HalfBt(HalfType::F16) => "f16_bt",
            GemmInput::HalfBt(HalfType::Bf16) => "bf16_bt",
            GemmInput::Tf32 => "tf32",
            GemmInput::Tf32Kn => "tf32_kn",
        }
    }

    /// The element type in memory (f32 for TF32).
    pub(crate) fn ptx(self) -> PtxType {
        match self {
            GemmInput::Half(t) | GemmInput::HalfBt(t) => t.ptx(),
            GemmInput::Tf32 | GemmInput::Tf32Kn => PtxType::F32,
        }
    }

    /// Bytes per element.
    pub fn bytes(self) -> u32 {
        self.ptx().bytes()
    }

    /// Whether B is stored k-major (`Bᵀ` row-major) rather than n-major.
    pub fn b_k_major(self) -> bool {
        !matches!(self, GemmInput::Half(_) | GemmInput::Tf32Kn)
    }

    /// Whether the products are TF32 (f32 operands).
    pub fn is_tf32(self) -> bool {
        matches!(self, GemmInput::Tf32 | GemmInput::Tf32Kn)
    }

    /// Every input the sm_80 and Hopper kernels share: 16-bit with B as stored or
    /// transposed, and TF32 with `Bᵀ` (TF32 with B as stored: [`GemmInput::Tf32Kn`]).
    pub const ALL: [GemmInput; 5] = [
        GemmInput::Half(HalfType::Bf16),
        GemmInput::Half(HalfType::F16),
        GemmInput::HalfBt(HalfType::Bf16),
        GemmInput::HalfBt(HalfType::F16),
        GemmInput::Tf32,
    ];

    /// [`GemmInput::ALL`] and TF32 with B as stored: every input the sm_80 kernel (and
    /// the tune file) takes.
    pub const EVERY: [GemmInput; 6] = [
        GemmInput::Half(HalfType::Bf16),
        GemmInput::Half(HalfType::F16),
        GemmInput::HalfBt(HalfType::Bf16),
        GemmInput::HalfBt(HalfType::F16),
        GemmInput::Tf32,
        GemmInput::Tf32Kn,
    ];
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

    /// Dynamic shared memory for 16-bit inputs: all stages, or C staged for the
    /// epilogue (two groups of 64 rows) where that is more (k-step 32).
    pub fn shared_bytes(self) -> u32 {
        self.shared_bytes_for(HalfType::Bf16.into())
    }

    /// Dynamic shared memory for `input`'s elements.
    pub fn shared_bytes_for(self, input: GemmInput) -> u32 {
        (STAGES * stage_bytes(self.elems() * input.bytes())).max(2 * staged_bytes(TILE))
    }
}

/// One stage: an A tile (128 rows of `row_bytes`) and a B tile of as many bytes (`bk`
/// rows of 128 halves, or 128 k-major rows of `bk` TF32 values).
fn stage_bytes(row_bytes: u32) -> u32 {
    2 * TILE * row_bytes
}

/// The tensor-core GEMM for one input, k-step and output type: parameters `a`, `b`
/// (`Bᵀ` for TF32), `c`, `m`, `n`, `k`, then the epilogue's `alpha`, `beta` (`beta == 0`
/// never reads `c`), `bias`, `epilogue`
/// ([`Activation::flags`](super::gemm_epilogue::Activation::flags)). TF32 runs with the
/// 32-wide k-step only (64 would need 192 KiB of shared memory).
#[derive(Clone, Copy, Debug)]
pub struct MmaGemmKernel(pub GemmInput, pub MmaTileK, pub FloatType);

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

fn build(name: &str, input: GemmInput, tile_k: MmaTileK, out: FloatType) -> KernelIr {
    let bk = tile_k.elems();
    let eb = input.bytes();
    let b_k_major = input.b_k_major();
    // 16-byte chunks per k-major row, bytes per k-major row.
    let (a_chunks, a_row_bytes) = (bk * eb / 16, bk * eb);
    let a_tile_bytes = TILE * a_row_bytes;
    let stage = stage_bytes(a_row_bytes);
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

    // Copies. A (and a TF32 Bᵀ): see `k_major_copies`; the swizzle is (r / 2) % 4 for 4
    // chunks a row, r % 8 for 8 (eight consecutive rows read by one ldmatrix then land
    // in eight different 16-byte bank groups). A 16-bit B: k-row t / 16 + 16 j, chunk
    // t % 16, stored at chunk q ^ (row % 8) of its 256-byte row.
    let a_swizzle = |b: &mut KernelBuilder, row: Reg<U32>| -> Reg<U32> {
        if a_chunks == 4 {
            let h = b.shr(row, 1u32);
            b.and(h, 3u32)
        } else {
            b.and(row, 7u32)
        }
    };
    let a_cp = k_major_copies(
        &mut b,
        t,
        ga,
        (row0, m, k),
        a_row_bytes,
        eb,
        0,
        true,
        a_swizzle,
    );
    let b_cp = if b_k_major {
        let (at, rb) = (a_tile_bytes, a_row_bytes);
        k_major_copies(&mut b, t, gb, (col0, n, k), rb, eb, at, false, a_swizzle)
    } else {
        n_major_copies(&mut b, t, gb, (col0, n), bk, eb, a_tile_bytes)
    };
    // This block's share of k (all of it unless the grid splits k: split-K).
    let range = k_range(&mut b, k, bk, 1);
    // Issues the copies of k-tile `kt` (pointers already advanced to it) into the stage
    // at byte offset `stage`, and commits them as one group. Past the range, zero-fill.
    let issue =
        |b: &mut KernelBuilder, stage: Reg<U32>, k0: Reg<U32>, a: Reg<U64>, bp: Reg<U64>| {
            let base = b.add(smem, stage);
            for (cp, first, g) in [(&a_cp, a, ga), (&b_cp, bp, gb)] {
                issue_copies(b, cp, base, (k0, range.end), first, g);
            }
            b.cp_async_commit();
        };

    // Fragment reads. A (ldmatrix.x4): lane l addresses row (l/8 % 2) * 8 + l % 8 of
    // the warp's m16 fragment, chunk 2 * ks + l / 16, swizzled by the row's swizzle,
    // which is that of l % 8 because the other row terms are multiples of 8.
    let q = b.shr(lane, 3u32);
    let l8 = b.and(lane, 7u32);
    let k_steps = a_row_bytes / 32;
    let a_frag: Vec<Reg<U32>> = {
        let qlo = b.and(q, 1u32);
        let r = b.mad(qlo, 8u32, l8);
        let wrow = b.mul(wm, WARP_M);
        let r = b.add(r, wrow);
        let rbytes = b.mul(r, a_row_bytes);
        let sw = a_swizzle(&mut b, l8);
        let qhi = b.shr(q, 1u32);
        (0..k_steps)
            .map(|ks| {
                let c = b.add(qhi, 2 * ks);
                let c = b.xor(c, sw);
                b.mad(c, 16u32, rbytes)
            })
            .collect()
    };
    let b_frag = BFrags::new(
        &mut b,
        input,
        (lane, wn),
        (a_row_bytes, a_tile_bytes),
        a_swizzle,
    );

    let acc: [[[Reg<F32>; 4]; 4]; 4] =
        std::array::from_fn(|_| std::array::from_fn(|_| std::array::from_fn(|_| b.mov(0.0f32))));
    let k_tiles = range.tiles;

    // The copies run two tiles ahead of the multiplies: their pointers, k offset and
    // stage, each advanced by `next_tile` after a tile's copies are issued.
    let at_range = |b: &mut KernelBuilder, ptr: Reg<U64>, step: TileStep| match step {
        TileStep::Bytes(x) => {
            let off = b.mul_wide(range.first, x as u32);
            b.add(ptr, off)
        }
        TileStep::Reg(r) => {
            let first = b.cvt::<U64, U32>(range.first, None);
            let off = b.mul(r, first);
            b.add(ptr, off)
        }
    };
    let a_next = at_range(&mut b, a_cp.ptr, a_cp.tile_step);
    let b_next = at_range(&mut b, b_cp.ptr, b_cp.tile_step);
    let k_next = b.mov(range.begin);
    let load_stage = b.mov(0u32);
    let use_stage = b.mov(0u32);
    let next_stage = |b: &mut KernelBuilder, s: Reg<U32>| helpers::next_stage(b, s, stage, STAGES);
    let issue_next = |b: &mut KernelBuilder| {
        issue(b, load_stage, k_next, a_next, b_next);
        let step = |b: &mut KernelBuilder, p: Reg<U64>, s: TileStep| match s {
            TileStep::Bytes(x) => b.add(p, x),
            TileStep::Reg(r) => b.add(p, r),
        };
        let an = step(b, a_next, a_cp.tile_step);
        let bn = step(b, b_next, b_cp.tile_step);
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
            let bf = b_frag.load(b, base, ks);
            let a_addr = b.add(base, a_off);
            for (mi, acc_m) in acc.iter().enumerate() {
                let af = b.ldmatrix_x4(a_addr, (mi as i64) * 16 * a_row_bytes as i64, false);
                for (ni, acc_mn) in acc_m.iter().enumerate() {
                    // mma_m16n8k16 with f32 operands is the m16n8k8 TF32 product.
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
    let gc = split_output(&mut b, gc, (m, n), out.bytes());
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
        if self.0.is_tf32() && self.1 != MmaTileK::K32 {
            return shape_err(
                &self.name(),
                "TF32 runs with the 32-wide k-step (64 would need 192 KiB of shared memory)",
            );
        }
        tensor_core_launch(
            &self.name(),
            dims,
            (TILE, TILE),
            THREADS,
            self.1.shared_bytes_for(self.0),
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
    for input in GemmInput::EVERY {
        for kt in [MmaTileK::K32, MmaTileK::K64] {
            if input.is_tf32() && kt == MmaTileK::K64 {
                continue;
            }
            for out in FloatType::ALL {
                v.push(Box::new(MmaGemmKernel(input, kt, out)));
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
        let k = MmaGemmKernel(HalfType::Bf16.into(), MmaTileK::K64, FloatType::F32);
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
        let ir = MmaGemmKernel(HalfType::F16.into(), MmaTileK::K32, FloatType::Bf16).build();
        assert!(ir.dynamic_shared && ir.shared.is_empty());
        // Three 16 KiB stages, less than two groups of 64 staged rows of 128 + 8 floats.
        assert_eq!(MmaTileK::K32.shared_bytes(), 2 * 64 * (128 * 4 + 32));
        assert_eq!(MmaTileK::K64.shared_bytes(), 3 * 32 * 1024);
        // TF32's 32-wide k-step: 128-byte rows, 32 KiB stages.
        assert_eq!(
            MmaTileK::K32.shared_bytes_for(GemmInput::Tf32),
            3 * 32 * 1024
        );
        let tf32 = MmaGemmKernel(GemmInput::Tf32, MmaTileK::K64, FloatType::F32);
        assert!(tf32.launch_config(&[128, 128, 128]).is_err());
        // B as stored: 32 k-rows of 128 f32, as many bytes as the k-major tile.
        let kn = MmaGemmKernel(GemmInput::Tf32Kn, MmaTileK::K32, FloatType::F32);
        let c = kn.launch_config(&[128, 128, 128]).unwrap();
        assert_eq!(c.shared_bytes, 3 * 32 * 1024);
        let kn = MmaGemmKernel(GemmInput::Tf32Kn, MmaTileK::K64, FloatType::F32);
        assert!(kn.launch_config(&[128, 128, 128]).is_err());
    }
}
