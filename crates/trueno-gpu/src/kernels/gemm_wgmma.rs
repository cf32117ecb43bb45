//! Tensor-core GEMM for Hopper (sm_90a): `C = act(alpha * A B + beta * C + bias)` with
//! row-major f16 or bf16 `A` (m x k) and `B` (k x n), or f32 `A` and `Bᵀ` (n x k)
//! multiplied as TF32, f32 accumulation and an f32, bf16 or f16 `C`, by warpgroup
//! products (`wgmma`) fed by the bulk tensor copy engine (TMA); the epilogue is
//! [`super::gemm_epilogue`]'s.
//!
//! One block computes a 128 x `BN` tile with three warpgroups. The first is the
//! producer: one of its threads asks the copy engine for the next k-tile of A (128 rows
//! x 128 bytes: 64 halves or 32 f32) and B (128 bytes of k by `BN`) into a ring of
//! shared-memory stages, each stage guarded by two transaction barriers (full: the bytes
//! have landed; empty: both consumers are done with it). The other two are consumers,
//! each multiplying 64 rows of the tile with `wgmma.m64n{BN}k16` (`k8` for TF32) straight
//! from shared memory, accumulators in registers. The producer gives registers back
//! (`setmaxnreg`) so the consumers can hold theirs.
//!
//! The copy engine writes the tiles in the 128-byte swizzled layout the products read:
//! A k-major (rows of 128 bytes, 8-row groups 1024 bytes apart); 16-bit B n-major (k-rows
//! of 64 halves per 64-column box, boxes 8 KiB apart); a `Bᵀ` k-major like A, in one box
//! of `BN` rows (TF32 always: `wgmma` transposes only 16-bit operands; 16-bit weights
//! stored `[out, in]` as a linear layer's are). Parts of a box outside the matrices
//! arrive as zeros, so ragged m, n and k need no masks until the store. Rows are read
//! through tensor maps whose strides must be multiples of 16 bytes: `k` and `n` are
//! multiples of 8.
//!
//! The same block, with the producer role played by two warpgroups that dequantize
//! GGML-quantized weights into B's stages and optionally two 64-row fragments a
//! consumer (`BSource::Dequantized`), is the fused quantized GEMM of
//! [`super::qgemm_wgmma`].

use super::float_type::FloatType;
use super::gemm_epilogue::{CStore, GROUP_THREADS, staged_bytes};
use super::gemm_mma::{GemmInput, tensor_core_launch};
use super::gemm_wgmma_block::{
    Block, CONSUMER_REGS, FULL, PRODUCER_REGS, Ring, block_setup, copy_producer, descriptor,
    release_previous,
};
use super::qgemv::QuantFormat;
use super::{Family, Kernel, LaunchConfig};
use crate::error::{Result, shape_err};
use crate::ptx::{Cmp, F32, KernelBuilder, KernelIr, Reg, Target, U32, U64};

/// Block tile rows (two consumer warpgroups of 64).
pub const TILE_M: u32 = 128;
/// The k-step of one stage in bytes: one 128-byte swizzle row (64 halves, 32 f32).
pub const TILE_K_BYTES: u32 = 128;
/// Threads per block: a producer warpgroup and two consumers.
pub const THREADS: u32 = 384;
/// Columns per copy-engine box of B (one 128-byte swizzle row).
pub const BOX_N: u32 = 64;
/// The split of a dequantizing kernel with two fragments a consumer: 2 x 128 x 80 +
/// 2 x 128 x 176 = 64 K.
const DEQUANT_PRODUCER_REGS: u32 = 80;
const DEQUANT_CONSUMER_REGS: u32 = 176;
/// Elements of k per stage for `input` (one 128-byte row: 64 halves or 32 TF32).
pub fn tile_k(input: GemmInput) -> u32 {
    TILE_K_BYTES / input.bytes()
}

/// The tile width (columns of C per block).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WgmmaTileN {
    /// 64 columns: 32 accumulators a thread, eight stages; twice the blocks of `N128`
    /// for products whose 128-wide tiles leave multiprocessors idle.
    N64,
    /// 128 columns: 64 accumulators a thread, six stages.
    N128,
    /// 256 columns: 128 accumulators a thread, four stages.
    N256,
}

impl WgmmaTileN {
    /// Every tile width.
    pub const ALL: [WgmmaTileN; 3] = [WgmmaTileN::N64, WgmmaTileN::N128, WgmmaTileN::N256];

    /// Columns per block.
    pub fn elems(self) -> u32 {
        match self {
            WgmmaTileN::N64 => 64,
            WgmmaTileN::N128 => 128,
            WgmmaTileN::N256 => 256,
        }
    }

    /// Shared-memory stages in the ring.
    pub fn stages(self) -> u32 {
        match self {
            WgmmaTileN::N64 => 8,
            WgmmaTileN::N128 => 6,
            WgmmaTileN::N256 => 4,
        }
    }

    /// Dynamic shared memory: the stages, two barriers per stage, alignment slack.
    pub fn shared_bytes(self) -> u32 {
        Ring::shared_bytes(self, 1)
    }
}

/// The Hopper GEMM for one input, tile width and output: parameters `map_a`, `map_b`
/// (tensor maps, see [`KernelArg::tensor_map`](crate::driver::KernelArg::tensor_map): A
/// in boxes of 128 rows x [`tile_k`]; 16-bit B in boxes of `tile_k` rows x
/// [`BOX_N`], TF32 `Bᵀ` in boxes of `BN` rows x `tile_k`), `c`, `m`, `n`, `k`, then the
/// epilogue's `alpha`, `beta` (`beta == 0` never reads `c`), `bias`, `epilogue`
/// ([`Activation::flags`](super::gemm_epilogue::Activation::flags)); `c` of the output
/// type.
#[derive(Clone, Copy, Debug)]
pub struct WgmmaGemmKernel(pub GemmInput, pub WgmmaTileN, pub FloatType);

/// Where a stage's B tile comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum BSource {
    /// The copy engine, from the tensor map `map_b`.
    CopyEngine,
    /// GGML-quantized `[n, k]` weights (parameter `w`), dequantized to bf16 into the
    /// stage by [`PRODUCER_GROUPS`] whole warpgroups ([`super::qgemm_wgmma`]); each
    /// consumer multiplies `frags` fragments of 64 rows (1 or 2: a block tile of 128 or
    /// 256 rows, the second halving the dequantization per product).
    Dequantized {
        /// The weights' format.
        format: QuantFormat,
        /// 64-row fragments per consumer.
        frags: u32,
    },
}

/// Producer warpgroups that dequantize, each filling every second stage: two k-tiles'
/// loads in flight at once (one warpgroup waits on its loads, then on its arithmetic,
/// a stage at a time).
pub const PRODUCER_GROUPS: u32 = 2;

impl BSource {
    /// Producer warpgroups ahead of the two consumers.
    pub fn producer_groups(self) -> u32 {
        match self {
            BSource::CopyEngine => 1,
            BSource::Dequantized { .. } => PRODUCER_GROUPS,
        }
    }

    /// 64-row fragments per consumer warpgroup.
    pub fn frags(self) -> u32 {
        match self {
            BSource::CopyEngine => 1,
            BSource::Dequantized { frags, .. } => frags,
        }
    }

    /// Per-thread register limits of the producers and the consumers after the split,
    /// if the kernel splits them: the copy engine's driver needs few; two fragments of
    /// accumulators need more than the launch's even share (128 a thread at 512).
    fn register_split(self) -> Option<(u32, u32)> {
        match self {
            BSource::CopyEngine => Some((PRODUCER_REGS, CONSUMER_REGS)),
            BSource::Dequantized { frags: 1, .. } => None,
            BSource::Dequantized { .. } => Some((DEQUANT_PRODUCER_REGS, DEQUANT_CONSUMER_REGS)),
        }
    }

    /// Threads per block.
    pub fn threads(self) -> u32 {
        (self.producer_groups() + 2) * GROUP_THREADS
    }
}

/// What the producers of a dequantizing kernel are handed: A's bytes a stage, the
/// tiles' base, A's tensor map, the weights, the tile's first row (of A) and column (row
/// of the weights), `n`, `k`, the count of k-tiles in the block's range and its first.
pub(super) struct DequantProducer {
    pub a_bytes: u32,
    pub base: Reg<U32>,
    pub map_a: Reg<U64>,
    pub w: Reg<U64>,
    pub row0: Reg<U32>,
    pub col0: Reg<U32>,
    pub n: Reg<U32>,
    pub k: Reg<U32>,
    pub k_tiles: Reg<U32>,
    /// The first k-tile of the block's range (split-K), a multiple of four.
    pub k_first: Reg<U32>,
}

pub(super) fn build(
    name: &str,
    input: GemmInput,
    tile_n: WgmmaTileN,
    out: FloatType,
    source: BSource,
) -> KernelIr {
    let bn = tile_n.elems();
    let tile_k = tile_k(input);
    let b_k_major = input.b_k_major();
    let frags = source.frags();
    let block_m = frags * TILE_M;
    let layout = Ring::layout(tile_n, frags);
    let a_bytes = block_m * TILE_K_BYTES;
    let mut b = KernelBuilder::new(name);
    b.max_threads(source.threads());
    b.min_blocks(1);
    let blk = block_setup(&mut b, source, (block_m, bn), tile_k, layout, out);
    let Block {
        map_a,
        map_b,
        gc,
        m,
        n,
        k,
        base,
        t,
        row0,
        col0,
        warpgroup,
        ..
    } = blk;
    let ring = &blk.ring;
    let k_tiles = blk.range.tiles;

    let consumer = b.new_label();
    let producers = source.producer_groups();
    let producer_role = b.setp::<U32>(Cmp::Lt, warpgroup, producers);
    b.bra_if(producer_role, true, consumer, false);

    // ---- producer -------------------------------------------------------------------
    match source {
        BSource::CopyEngine => copy_producer(&mut b, &blk, tile_k, |b, dst, kx, full| {
            b.tma_load_2d(dst, map_a, kx, row0, full);
            if b_k_major {
                let dst = b.add(dst, a_bytes);
                b.tma_load_2d(dst, map_b, kx, col0, full);
            } else {
                for j in 0..bn / BOX_N {
                    let dst = b.add(dst, a_bytes + j * BOX_N * TILE_K_BYTES);
                    let x = b.add(col0, j * BOX_N);
                    b.tma_load_2d(dst, map_b, x, kx, full);
                }
            }
        }),
        BSource::Dequantized { format, .. } => {
            if let Some((regs, _)) = source.register_split() {
                b.setmaxnreg(false, regs);
            }
            let p = DequantProducer {
                a_bytes,
                base,
                map_a,
                w: map_b,
                row0,
                col0,
                n,
                k,
                k_tiles,
                k_first: blk.range.first,
            };
            super::qgemm_wgmma::produce(&mut b, format, ring, &p, t);
        }
    }
    b.ret();

    // ---- consumers: 64 rows a fragment ----------------------------------------------
    b.place(consumer);
    if let Some((_, regs)) = source.register_split() {
        b.setmaxnreg(true, regs);
    }
    let rows = b.sub(warpgroup, producers);
    let acc: Vec<Vec<Reg<F32>>> = (0..frags)
        .map(|_| (0..bn / 2).map(|_| b.mov(0.0f32)).collect())
        .collect();
    // scale-d: always accumulate (the accumulators start at zero above).
    let accumulate = b.setp::<U32>(Cmp::Eq, t, t);
    // Consumer `rows` multiplies rows `64 frags rows..` of the block tile.
    let a_tile = b.mad(rows, frags * TILE_M / 2 * TILE_K_BYTES, base);
    let a_desc0 = descriptor(&mut b, a_tile, 16);
    let b_tile = b.add(base, a_bytes);
    let b_leading = if b_k_major { 16 } else { BOX_N * TILE_K_BYTES };
    let b_desc0 = descriptor(&mut b, b_tile, b_leading);
    // One product's k: 32 bytes along a k-major row (16 halves or 8 TF32); down an
    // n-major B, 16 k-rows (two 8-row groups, 2048 bytes).
    let k_step = 32 / input.bytes();
    let b_step = if b_k_major { 32 } else { 2048 };
    let lane = b.and(t, 31u32);
    let lane0 = b.setp::<U32>(Cmp::Eq, lane, 0u32);
    // The empty barrier of the k-tile before this one: released once its products are
    // done (`wait_group 1`), while this tile's products run.
    let prev_empty = b.mov(0u32);
    b.for_loop(0u32, k_tiles, 1u32, false, |b, kt| {
        let full = ring.barrier(b, FULL);
        b.mbar_wait(full, ring.phase);
        let offset = b.shr(ring.stage, 4u32);
        let offset = b.cvt::<U64, U32>(offset, None);
        let a_desc = b.add(a_desc0, offset);
        let b_desc = b.add(b_desc0, offset);
        b.wgmma_fence();
        for ks in 0..tile_k / k_step {
            // Descriptor addresses are in 16-byte units; fragment f's rows start 64
            // rows (8 KiB) after the previous one's.
            let ads: Vec<Reg<U64>> = (0..frags)
                .map(|f| b.add(a_desc, ((ks * 32 + f * 64 * TILE_K_BYTES) / 16) as u64))
                .collect();
            let bd = b.add(b_desc, (ks * b_step / 16) as u64);
            for (acc, ad) in acc.iter().zip(ads) {
                b.wgmma(input.ptx(), !b_k_major, acc, ad, bd, accumulate);
            }
        }
        b.wgmma_commit();
        b.wgmma_wait(1);
        let not_first = b.setp::<U32>(Cmp::Ne, kt, 0u32);
        release_previous(b, ring, Some(not_first), lane0, prev_empty);
    });
    b.wgmma_wait(0);
    // Both consumers are done with the ring: the epilogue stages C there.
    b.bar_sync_named(1, 2 * GROUP_THREADS);

    // The epilogue's parameters come last in the list and are read only now, so
    // nothing of theirs is held through the main loop.
    let store = CStore::declare(&mut b, gc, out, m, n);
    // Warp w of the warpgroup holds rows 16 w + lane / 4 (+ 8) of its 64; accumulators
    // 4 i .. 4 i + 3 are columns 8 i + 2 (lane % 4) (+ 1) of those two rows.
    // Each fragment is staged in its own area of the ring.
    let area = b.mad(rows, frags * staged_bytes(bn), base);
    let warp = b.shr(t, 5u32);
    let warp = b.and(warp, 3u32);
    let g = b.shr(lane, 2u32);
    let row = b.mad(warp, 16u32, g);
    let tq = b.and(lane, 3u32);
    let col = b.shl(tq, 1u32);
    let areas: Vec<Reg<U32>> = (0..frags)
        .map(|f| match f {
            0 => area,
            _ => b.add(area, f * staged_bytes(bn)),
        })
        .collect();
    for (acc, &area) in acc.iter().zip(&areas) {
        let pairs = acc.chunks(4).enumerate().flat_map(|(i, f)| {
            (0..2).map(move |h| ((h * 8) as u32, (i * 8) as u32, [f[2 * h], f[2 * h + 1]]))
        });
        store.stage(&mut b, (area, bn), (row, col), pairs);
    }
    b.bar_sync_named(1, 2 * GROUP_THREADS);
    let row0 = b.mad(rows, frags * TILE_M / 2, row0);
    let t_group = b.and(t, GROUP_THREADS - 1);
    for (f, &area) in areas.iter().enumerate() {
        let row0 = match f {
            0 => row0,
            _ => b.add(row0, f as u32 * TILE_M / 2),
        };
        store.store(&mut b, (area, bn), (row0, col0), t_group);
    }
    b.ret();
    b.finish()
}

impl Kernel for WgmmaGemmKernel {
    fn name(&self) -> String {
        format!(
            "trueno_gemm_wgmma_{}_{}_n{}",
            self.0.name(),
            self.2.name(),
            self.1.elems()
        )
    }
    fn family(&self) -> Family {
        Family::GemmWgmma
    }
    fn build(&self) -> KernelIr {
        build(&self.name(), self.0, self.1, self.2, BSource::CopyEngine)
    }
    fn targets(&self) -> &'static [Target] {
        &[Target::Sm90a]
    }
    /// `[m, n, k]`; `n` and `k` multiples of 8 (as the sm_80 GEMM's). Not for
    /// [`GemmInput::Tf32Kn`]: `wgmma` reads TF32 from shared memory only k-major, so a
    /// row-major B runs on its own kernel ([`super::gemm_wgmma_kn`]).
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        if self.0 == GemmInput::Tf32Kn {
            return shape_err(
                &self.name(),
                "TF32 with a row-major B runs on WgmmaTf32KnKernel (wgmma reads TF32 \
                 from shared memory only k-major)",
            );
        }
        tensor_core_launch(
            &self.name(),
            dims,
            (TILE_M, self.1.elems()),
            THREADS,
            self.1.shared_bytes(),
        )
    }
}

/// Every Hopper GEMM configuration.
pub fn all() -> Vec<Box<dyn Kernel>> {
    let mut v: Vec<Box<dyn Kernel>> = Vec::new();
    for t in GemmInput::ALL {
        for n in WgmmaTileN::ALL {
            for out in FloatType::ALL {
                v.push(Box::new(WgmmaGemmKernel(t, n, out)));
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::gemm_mma::HalfType;

    #[test]
    fn launch_config_covers_ragged_shapes_and_rejects_what_the_copies_cannot_read() {
        let k = WgmmaGemmKernel(HalfType::Bf16.into(), WgmmaTileN::N256, FloatType::F16);
        let c = k.launch_config(&[129, 264, 72]).unwrap();
        assert_eq!((c.grid, c.block.0), ((2, 2, 1), 384));
        // A row-major TF32 B is its own kernel's.
        let kn = WgmmaGemmKernel(GemmInput::Tf32Kn, WgmmaTileN::N128, FloatType::F32);
        assert!(kn.launch_config(&[128, 128, 128]).is_err());
        // 4 stages of 16 KiB (A) + 32 KiB (B), 8 barrier bytes twice per stage, 1 KiB slack.
        assert_eq!(c.shared_bytes, 4 * (48 * 1024 + 16) + 1024);
        assert_eq!(WgmmaTileN::N128.shared_bytes(), 6 * (32 * 1024 + 16) + 1024);
        assert_eq!(WgmmaTileN::N64.shared_bytes(), 8 * (24 * 1024 + 16) + 1024);
        // The epilogue stages both consumers' 64 rows in the ring.
        for t in WgmmaTileN::ALL {
            let (stages, bytes) = Ring::layout(t, 1);
            assert!(2 * staged_bytes(t.elems()) <= stages * bytes);
        }
        // Two fragments a consumer (the dequantizing kernel's 256-row tile): four 64-row
        // areas in four stages of 48 KiB.
        let (stages, bytes) = Ring::layout(WgmmaTileN::N128, 2);
        assert_eq!((stages, bytes), (4, 48 * 1024));
        assert!(4 * staged_bytes(128) <= stages * bytes);
        for bad in [[16, 12, 16], [16, 16, 12], [0, 8, 8], [8, 8, 0]] {
            assert!(k.launch_config(&bad).is_err(), "{bad:?}");
        }
        assert!(k.launch_config(&[8, 8]).is_err());
    }

    #[test]
    fn the_kernel_is_written_for_sm_90a_only_and_splits_registers() {
        let k = WgmmaGemmKernel(HalfType::F16.into(), WgmmaTileN::N128, FloatType::F32);
        assert_eq!(k.targets(), &[Target::Sm90a]);
        let ir = k.build();
        assert_eq!((ir.max_threads, ir.min_blocks), (Some(THREADS), Some(1)));
        assert!(ir.params.iter().filter(|p| p.tensor_map).count() == 2);
    }
}
