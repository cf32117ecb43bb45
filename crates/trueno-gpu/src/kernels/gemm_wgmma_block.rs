//! The machinery every Hopper (sm_90a) GEMM block shares: the ring of shared-memory
//! stages and its transaction barriers, the block's setup (parameters, barriers, tile,
//! split range), the copy engine's producer, a consumer's release of a finished stage, and
//! the shared-memory descriptors `wgmma` reads the swizzled tiles through. The GEMM
//! ([`super::gemm_wgmma`]), its row-major-B TF32 form ([`super::gemm_wgmma_kn`]), the
//! fused quantized GEMM ([`super::qgemm_wgmma`]) and Hopper's FlashAttention build on it.

use super::float_type::FloatType;
use super::gemm_epilogue::GROUP_THREADS;
use super::gemm_mma::raster;
use super::gemm_split::{KRange, k_range, split_output};
use super::gemm_wgmma::{BSource, TILE_K_BYTES, TILE_M, WgmmaTileN};
use crate::ptx::{Cmp, KernelBuilder, Pred, PtxType, Reg, U32, U64};

/// Register limits after the split: the producer keeps few, the consumers take the rest
/// (128 x 40 + 256 x 232 <= 64 K).
pub(super) const PRODUCER_REGS: u32 = 40;
pub(super) const CONSUMER_REGS: u32 = 232;
/// Consumer warps arriving on an empty barrier.
pub(super) const CONSUMER_WARPS: u32 = 8;
/// Bytes of shared memory kept to round the dynamic base up to 1024 (the swizzle
/// pattern repeats every 1024 bytes and the descriptors assume tiles start on it).
pub(super) const ALIGN_SLACK: u32 = 1024;

/// The fixed upper half of a 128-byte-swizzle descriptor: swizzle mode 1 (bits 62-63)
/// and a stride of 1024 bytes between 8-row groups (bits 32-45, in 16-byte units).
const DESC_HI: u64 = (1 << 62) | ((1024 >> 4) << 32);

/// A shared-memory matrix descriptor for the tile at `addr` (1024-byte aligned):
/// `leading` is the byte offset between the operand's repeats along its leading
/// dimension (unused for k-major A, the 8 KiB between B's 64-column boxes).
pub(super) fn descriptor(b: &mut KernelBuilder, addr: Reg<U32>, leading: u32) -> Reg<U64> {
    let lo = b.shr(addr, 4u32);
    let lo = b.and(lo, 0x3FFFu32);
    let lo = b.or(lo, (leading >> 4) << 16);
    let lo = b.cvt::<U64, U32>(lo, None);
    b.or(lo, DESC_HI)
}

/// The ring of stages as both roles walk it: the current slot, its byte offset and the
/// parity of its current phase, advanced after each k-tile by both alike.
pub(super) struct Ring {
    slot: Reg<U32>,
    /// Byte offset of the current slot's stage from the tiles' base.
    pub stage: Reg<U32>,
    /// Parity of the current slot's phase.
    pub phase: Reg<U32>,
    bars: Reg<U32>,
    stages: u32,
    stage_bytes: u32,
}

impl Ring {
    /// Stages and bytes per stage for tile width `tile_n` and `frags` 64-row fragments a
    /// consumer (A: `128 frags` rows of 128 bytes; B: `BN` rows or k-rows of 128 bytes):
    /// six stages of 32 KiB or four of 48 KiB.
    pub fn layout(tile_n: WgmmaTileN, frags: u32) -> (u32, u32) {
        let bytes = (frags * TILE_M + tile_n.elems()) * TILE_K_BYTES;
        let stages = if bytes > 32 * 1024 {
            4
        } else {
            tile_n.stages()
        };
        (stages, bytes)
    }

    /// Dynamic shared memory: the stages, two barriers per stage, alignment slack.
    pub fn shared_bytes(tile_n: WgmmaTileN, frags: u32) -> u32 {
        let (stages, bytes) = Self::layout(tile_n, frags);
        ALIGN_SLACK + stages * (bytes + 16)
    }

    pub(super) fn new(
        b: &mut KernelBuilder,
        bars: Reg<U32>,
        stages: u32,
        stage_bytes: u32,
    ) -> Ring {
        Ring {
            slot: b.mov(0u32),
            stage: b.mov(0u32),
            phase: b.mov(0u32),
            bars,
            stages,
            stage_bytes,
        }
    }

    /// Moves to the next slot (wrapping, and flipping the parity on the wrap).
    pub fn advance(&self, b: &mut KernelBuilder) {
        let next = b.add(self.slot, 1u32);
        let wrap = b.setp::<U32>(Cmp::Ge, next, self.stages);
        let next = b.selp::<U32>(0u32, next, wrap);
        let flipped = b.xor(self.phase, 1u32);
        let ph = b.selp::<U32>(flipped, self.phase, wrap);
        let off = b.mul(next, self.stage_bytes);
        b.assign(self.slot, next);
        b.assign(self.stage, off);
        b.assign(self.phase, ph);
    }

    /// The current slot's barrier: `FULL` (its bytes have landed) or `EMPTY` (both
    /// consumers are done with it).
    pub fn barrier(&self, b: &mut KernelBuilder, group: u32) -> Reg<U32> {
        let at = b.mad(self.slot, 8u32, self.bars);
        b.add(at, 8 * self.stages * group)
    }
}

/// [`Ring::barrier`]'s groups.
pub(super) const FULL: u32 = 0;
pub(super) const EMPTY: u32 = 1;

/// What every Hopper GEMM block holds once set up, before its roles part: the
/// parameters (`map_a`, `map_b` or the quantized `w`, `c`, `m`, `n`, `k`), the aligned
/// base of the ring's stages, the thread, the tile's first row and column, its split's
/// k-range, the ring and the thread's warpgroup.
pub(super) struct Block {
    pub map_a: Reg<U64>,
    pub map_b: Reg<U64>,
    pub gc: Reg<U64>,
    pub m: Reg<U32>,
    pub n: Reg<U32>,
    pub k: Reg<U32>,
    pub base: Reg<U32>,
    pub t: Reg<U32>,
    pub row0: Reg<U32>,
    pub col0: Reg<U32>,
    pub range: KRange,
    pub ring: Ring,
    pub warpgroup: Reg<U32>,
}

/// The parameters, the ring's barriers (initialised by thread 0 before a block-wide
/// barrier), the tile's place (rastered) and the split's range, for a block of
/// `source`'s roles computing a `tile` (rows x columns) of C at `tile_k` elements of k a
/// stage. `out` is C's element type.
pub(super) fn block_setup(
    b: &mut KernelBuilder,
    source: BSource,
    tile: (u32, u32),
    tile_k: u32,
    (stages, stage_bytes): (u32, u32),
    out: FloatType,
) -> Block {
    let map_a = b.param_tensor_map("map_a");
    let map_b = match source {
        BSource::CopyEngine => b.param_tensor_map("map_b"),
        BSource::Dequantized { .. } => b.param_ptr("w", PtxType::U16),
    };
    let gc = b.param_ptr("c", out.ptx());
    let m = b.param_u32("m");
    let n = b.param_u32("n");
    let k = b.param_u32("k");
    let raw = b.dynamic_shared();
    let base = b.add(raw, ALIGN_SLACK - 1);
    let base = b.and(base, !(ALIGN_SLACK - 1));
    // full[s] at bars + 8 s, empty[s] at bars + 8 (stages + s).
    let bars = b.add(base, stages * stage_bytes);
    // Arrivals that fill a stage: the copy engine's driver, and with dequantized
    // weights every producer thread after its writes.
    let full_arrivals = match source {
        BSource::CopyEngine => 1,
        BSource::Dequantized { .. } => 1 + GROUP_THREADS,
    };

    let t = b.tid_x();
    let first = b.setp::<U32>(Cmp::Eq, t, 0u32);
    b.if_then(first, false, |b| {
        for s in 0..stages {
            b.mbar_init(bars, 8 * s as i64, full_arrivals);
            b.mbar_init(bars, 8 * (stages + s) as i64, CONSUMER_WARPS);
        }
        b.fence_mbar_init();
    });
    b.bar_sync();

    let (cx, cy) = raster(b);
    let row0 = b.mul(cy, tile.0);
    let col0 = b.mul(cx, tile.1);
    // The kernel takes its share of k from the grid's depth (split-K,
    // [`super::gemm_split`]) and writes that share's slice of the output. A dequantizing
    // producer's ranges start on whole groups of weight blocks.
    let align = match source {
        BSource::CopyEngine => 1,
        BSource::Dequantized { .. } => super::qgemm_wgmma::GROUP / tile_k,
    };
    let range = k_range(b, k, tile_k, align);
    let gc = split_output(b, gc, (m, n), out.bytes());
    let warpgroup = b.shr(t, 7u32);
    let ring = Ring::new(b, bars, stages, stage_bytes);
    Block {
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
        range,
        ring,
        warpgroup,
    }
}

/// The copy engine's producer: one thread (the others exit), with few registers, waits
/// for each stage to be free, arms its full barrier for the stage's bytes and has
/// `loads` ask for the k-tile at `kx` into the stage at `dst`.
pub(super) fn copy_producer(
    b: &mut KernelBuilder,
    blk: &Block,
    tile_k: u32,
    loads: impl Fn(&mut KernelBuilder, Reg<U32>, Reg<U32>, Reg<U32>),
) {
    let ring = &blk.ring;
    b.setmaxnreg(false, PRODUCER_REGS);
    let idle = b.setp::<U32>(Cmp::Ne, blk.t, 0u32);
    b.exit_if(idle);
    b.for_loop(0u32, blk.range.tiles, 1u32, false, |b, kt| {
        let empty = ring.barrier(b, EMPTY);
        let free = b.xor(ring.phase, 1u32);
        b.mbar_wait(empty, free);
        let full = ring.barrier(b, FULL);
        b.mbar_arrive_expect_tx(full, 0, ring.stage_bytes);
        let dst = b.add(blk.base, ring.stage);
        let kx = b.mad(kt, tile_k, blk.range.begin);
        loads(b, dst, kx, full);
        ring.advance(b);
    });
}

/// A consumer's step once a k-tile's products are issued and the tile before them is
/// done (`wait_group 1`): lane 0 of each warp arrives on that tile's empty barrier
/// `prev_empty` (not before the first tile: `not_first`, where the step may be it),
/// which then becomes this tile's, and the ring moves on.
pub(super) fn release_previous(
    b: &mut KernelBuilder,
    ring: &Ring,
    not_first: Option<Reg<Pred>>,
    lane0: Reg<Pred>,
    prev_empty: Reg<U32>,
) {
    let release = match not_first {
        Some(p) => b.and_pred(lane0, p),
        None => lane0,
    };
    b.predicated(release, |b| b.mbar_arrive(prev_empty, 0));
    let empty = ring.barrier(b, EMPTY);
    b.assign(prev_empty, empty);
    ring.advance(b);
}
