//! A prefill's projection from GGML-quantized weights on Hopper, dequantization fused:
//! `Y = act(alpha * X Wᵀ + beta * Y + bias)` with bf16 activations `X` (`[m, k]`),
//! quantized weights `W` (`[n, k]`, a row per output) and f32 accumulation.
//!
//! The Hopper GEMM ([`super::gemm_wgmma`]) with B's tiles written by its producers
//! instead of the copy engine. Two producer warpgroups take alternate k-tiles of 64, so
//! two tiles' loads are in flight at once; for each, one thread asks the copy engine for
//! A's rows, then the warpgroup's 128 threads dequantize the tile's 128 weight rows
//! (`dequant_chunk`: two to eight threads a row by format), round the values to
//! bf16 in pairs and store them in runs of four or eight into the 128-byte swizzled
//! k-major layout the copy engine would have written, fence the writes into the async
//! proxy and arrive on the stage's barrier (which waits for the copy's bytes and 129
//! arrivals). The weights are read as quantized bytes, once per block tile: no bf16
//! copy of them ever reaches global memory.
//!
//! 128 columns a block and 128 or 256 rows ([`QgemmTileM`]): with 256, each consumer
//! warpgroup multiplies two 64-row fragments, so a dequantized tile feeds twice the
//! products; the 128 accumulators a thread that takes come from the producers through
//! `setmaxnreg` (80 / 176 registers), where the 128-row tile keeps the launch's even
//! split. The producers' work per product is what limits the kernel (the issue slots of
//! their integer and float arithmetic, not memory): measured on the H100 it is
//! 1.03-1.30x the unfused path for Q4_K at 512-1024 tokens, not for Q6_K (BENCHMARKS.md).

use super::dequant_chunk::{chunk_runs, row_threads};
use super::float_type::FloatType;
use super::gemm_epilogue::GROUP_THREADS;
use super::gemm_mma::{GemmInput, HalfType, tensor_core_launch};
use super::gemm_wgmma::{
    BSource, DequantProducer, PRODUCER_GROUPS, TILE_K_BYTES, TILE_M, WgmmaTileN, build,
};
use super::gemm_wgmma_block::{EMPTY, FULL, Ring};
use super::qgemv::QuantFormat;
use super::{Family, Kernel, LaunchConfig};
use crate::error::{Result, shape_err};
use crate::ptx::{Cmp, KernelBuilder, KernelIr, PtxType, Reg, Space, Target, U32, U64};

/// The block tile's columns: rows of `W`.
pub const TILE_N: WgmmaTileN = WgmmaTileN::N128;
/// Values of k per group of quantized blocks a thread addresses (a K-quant super-block,
/// eight Q8_0 / Q4_0 blocks); `k` must be a multiple.
pub const GROUP: u32 = 256;
/// k per stage: one 128-byte swizzle row of bf16.
const TILE_K: u32 = TILE_K_BYTES / 2;
/// Rows of the block tile (tokens of the prompt).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QgemmTileM {
    /// 128 rows: 64 a consumer warpgroup.
    M128,
    /// 256 rows: two 64-row fragments a consumer, so each dequantized weight tile feeds
    /// twice the products (half the producers' work per product), at half the blocks.
    M256,
}

impl QgemmTileM {
    /// Rows per block.
    pub fn rows(self) -> u32 {
        self.frags() * TILE_M
    }

    fn frags(self) -> u32 {
        match self {
            QgemmTileM::M128 => 1,
            QgemmTileM::M256 => 2,
        }
    }
}

/// The fused quantized GEMM for one weight format, output type and tile height.
/// Parameters: `map_a` (a tensor map of the bf16 activations, boxes of
/// [`QgemmTileM::rows`] rows x 64), `w` (`u16` words of the `[n, k]` blocks), `c`,
/// `m`, `n`, `k`, then the epilogue's `alpha`, `beta`, `bias` (one per row of `W`) and
/// `epilogue` flags, as the GEMMs'.
#[derive(Clone, Copy, Debug)]
pub struct QgemmWgmmaKernel(pub QuantFormat, pub FloatType, pub QgemmTileM);

impl QgemmWgmmaKernel {
    fn source(self) -> BSource {
        BSource::Dequantized {
            format: self.0,
            frags: self.2.frags(),
        }
    }
}

/// The producers' k-loop (thread `t` of the first [`PRODUCER_GROUPS`] warpgroups):
/// warpgroup `g` fills the stages of k-tiles `g`, `g + PRODUCER_GROUPS`, ..., so that
/// many tiles' loads are in flight at once. For each: wait for the stage to be free,
/// start A's copy, dequantize B's 128 x 64 tile into it, fence, arrive.
pub(super) fn produce(
    b: &mut KernelBuilder,
    f: QuantFormat,
    ring: &Ring,
    p: &DequantProducer,
    t: Reg<U32>,
) {
    let a_bytes = p.a_bytes;
    let group = b.shr(t, GROUP_THREADS.trailing_zeros());
    let t = b.and(t, GROUP_THREADS - 1);
    let per_row = row_threads(f);
    let rows_per_pass = GROUP_THREADS / per_row;
    let i = b.and(t, per_row - 1);
    let r_base = b.shr(t, per_row.trailing_zeros());
    // Row r of the tile sits at r * 128 bytes, its 16-byte chunk j at chunk j ^ (r % 8);
    // this thread's rows r_base + rows_per_pass j (16 or 64 apart) all share r % 8.
    let swizzle = b.and(r_base, 7u32);
    let row_at = b.shl(r_base, 7u32);
    let block_elems = f.block_elems() as u32;
    let blocks = b.shr(p.k, block_elems.trailing_zeros());
    let row_bytes = b.mul(blocks, f.block_bytes() as u32);
    let group_bytes = GROUP / block_elems * f.block_bytes() as u32;
    // Rows past n read the last row (finite values whose products the store masks).
    let last = b.sub(p.n, 1u32);
    let rows: Vec<Reg<U64>> = (0..TILE_N.elems() / rows_per_pass)
        .map(|j| {
            let r = b.add(p.col0, j * rows_per_pass);
            let r = b.add(r, r_base);
            let r = b.min(r, last);
            let off = b.mul_wide(r, row_bytes);
            b.add(p.w, off)
        })
        .collect();
    let driver = b.setp::<U32>(Cmp::Eq, t, 0u32);
    b.for_loop(0u32, group, 1u32, false, |b, _| ring.advance(b));
    b.for_loop(group, p.k_tiles, PRODUCER_GROUPS, false, |b, kt| {
        // The range's tile kt is the matrix's k_first + kt.
        let kt = b.add(kt, p.k_first);
        let empty = ring.barrier(b, EMPTY);
        let free = b.xor(ring.phase, 1u32);
        b.mbar_wait(empty, free);
        let full = ring.barrier(b, FULL);
        let dst = b.add(p.base, ring.stage);
        b.predicated(driver, |b| {
            b.mbar_arrive_expect_tx(full, 0, a_bytes);
            let kx = b.mul(kt, TILE_K);
            b.tma_load_2d(dst, p.map_a, kx, p.row0, full);
        });
        let g = b.shr(kt, 2u32);
        let c = b.and(kt, 3u32);
        let g_off = b.mul_wide(g, group_bytes);
        let tile = b.add(dst, a_bytes);
        let tile = b.add(tile, row_at);
        for (j, row) in rows.iter().enumerate() {
            let grp = b.add(*row, g_off);
            let row_off = j as i64 * i64::from(rows_per_pass * TILE_K_BYTES);
            for run in chunk_runs(b, f, grp, c, i) {
                // Eight values fill a 16-byte chunk of the row, four half of one.
                let chunk = b.shr(run.at, 3u32);
                let chunk = b.xor(chunk, swizzle);
                let off = b.shl(chunk, 4u32);
                let addr = b.add(tile, off);
                let pairs: Vec<Reg<U32>> = run
                    .v
                    .chunks(2)
                    .map(|p| b.cvt_pack(PtxType::Bf16, p[0], p[1]))
                    .collect();
                if let [w0, w1, w2, w3] = pairs[..] {
                    b.st_vec::<U32, U32>(Space::Shared, addr, row_off, &[w0, w1, w2, w3]);
                } else if let [w0, w1] = pairs[..] {
                    let within = b.and(run.at, 7u32);
                    let addr = b.mad(within, 2u32, addr);
                    b.st_vec::<U32, U32>(Space::Shared, addr, row_off, &[w0, w1]);
                }
            }
        }
        b.fence_proxy_async();
        b.mbar_arrive(full, 0);
        for _ in 0..PRODUCER_GROUPS {
            ring.advance(b);
        }
    });
}

impl Kernel for QgemmWgmmaKernel {
    fn name(&self) -> String {
        format!(
            "trueno_qgemm_wgmma_{}_{}_m{}",
            self.0.name(),
            self.1.name(),
            self.2.rows()
        )
    }

    fn family(&self) -> Family {
        Family::QgemmWgmma
    }

    fn build(&self) -> KernelIr {
        build(
            &self.name(),
            GemmInput::HalfBt(HalfType::Bf16),
            TILE_N,
            self.1,
            self.source(),
        )
    }

    fn targets(&self) -> &'static [Target] {
        &[Target::Sm90a]
    }

    /// `[m, n, k]`: `m` tokens, `n` rows of `W` (a multiple of 8), `k` its columns (a
    /// multiple of 256).
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        let name = self.name();
        let cfg = tensor_core_launch(
            &name,
            dims,
            (self.2.rows(), TILE_N.elems()),
            self.source().threads(),
            Ring::shared_bytes(TILE_N, self.2.frags()),
        )?;
        if !dims[2].is_multiple_of(GROUP as usize) {
            return shape_err(
                &name,
                format!("k = {} is not a multiple of {GROUP}", dims[2]),
            );
        }
        Ok(cfg)
    }
}

/// One fused quantized GEMM per weight format, output type and tile height.
pub fn all() -> Vec<Box<dyn Kernel>> {
    let mut v: Vec<Box<dyn Kernel>> = Vec::new();
    for f in QuantFormat::ALL {
        for out in FloatType::ALL {
            for tile in [QgemmTileM::M128, QgemmTileM::M256] {
                v.push(Box::new(QgemmWgmmaKernel(f, out, tile)));
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launches_a_block_per_128_square_and_refuses_partial_groups() {
        let k = QgemmWgmmaKernel(QuantFormat::Q4K, FloatType::Bf16, QgemmTileM::M128);
        let c = k.launch_config(&[129, 4096, 4096]).unwrap();
        assert_eq!((c.grid, c.block.0), ((32, 2, 1), 512));
        assert_eq!(c.shared_bytes, TILE_N.shared_bytes());
        let tall = QgemmWgmmaKernel(QuantFormat::Q4K, FloatType::Bf16, QgemmTileM::M256);
        let c = tall.launch_config(&[257, 4096, 4096]).unwrap();
        assert_eq!((c.grid, c.block.0), ((32, 2, 1), 512));
        assert_eq!(c.shared_bytes, 1024 + 4 * (48 * 1024 + 16));
        assert!(k.launch_config(&[1, 8, 256]).is_ok());
        for bad in [[8, 8, 128], [8, 12, 256], [0, 8, 256], [8, 8, 0]] {
            assert!(k.launch_config(&bad).is_err(), "{bad:?}");
        }
        assert_eq!(k.targets(), &[Target::Sm90a]);
    }

    #[test]
    fn every_producer_thread_arrives_after_fencing_its_writes() {
        let k = QgemmWgmmaKernel(QuantFormat::Q6K, FloatType::F32, QgemmTileM::M128);
        let ir = k.build();
        assert_eq!(ir.params.iter().filter(|p| p.tensor_map).count(), 1);
        assert_eq!(ir.params[1].name, "w");
        let ptx = k.emit_ptx(Target::Sm90a).unwrap();
        // Full barriers wait for the copy's driver and one warpgroup of producers.
        assert!(ptx.contains(", 129;"), "{ptx}");
        let fence = ptx.find("fence.proxy.async.shared::cta").unwrap();
        let arrive = ptx.find("mbarrier.arrive.shared::cta").unwrap();
        assert!(fence < arrive);
        assert!(!ptx.contains("setmaxnreg"));
        // The tall tile moves registers from the producers to the accumulators.
        let tall = QgemmWgmmaKernel(QuantFormat::Q6K, FloatType::F32, QgemmTileM::M256);
        let ptx = tall.emit_ptx(Target::Sm90a).unwrap();
        assert!(ptx.contains("setmaxnreg.dec.sync.aligned.u32 80"), "{ptx}");
        assert!(ptx.contains("setmaxnreg.inc.sync.aligned.u32 176"));
    }
}
