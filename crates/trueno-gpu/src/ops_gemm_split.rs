//! Split-K launches of the GEMMs ([`crate::kernels::gemm_split`]): when a product's
//! output tiles fill little of the GPU, its k-loop runs in ranges across the grid's
//! depth, each into an f32 slice of a scratch buffer, and a second kernel sums the slices
//! and applies the epilogue. The rule ([`split_count`], each kernel aiming at its own
//! [`SplitShape`]) picks the cut; the `_split` ops force one (benchmarks, tests).

use crate::driver::{Function, KernelArg, Recording, Stream};
use crate::error::{Result, shape_err};
use crate::kernels::gemm::{GemmKernel, GemmVariant, TILE};
use crate::kernels::gemm_mma::{GemmInput, HalfType, MmaTileK};
use crate::kernels::gemm_simt::SimtPipeline;
use crate::kernels::gemm_split::{MAX_SPLITS, SplitReduceKernel, splits_for};
use crate::kernels::gemm_wgmma::{TILE_M, WgmmaTileN, tile_k};
use crate::kernels::gemm_wgmma_kn::{TILE_COLS, TILE_K as KN_TILE_K};
use crate::kernels::qgemm_wgmma::{QgemmTileM, TILE_N as QGEMM_TILE_N};
use crate::kernels::{Family, Kernel, LaunchConfig};
use crate::memory::{DeviceBuffer, FloatElem};
use crate::ops::expect_len;
use crate::ops_gemm::GemmEpilogue;

/// A kernel's place in the split rule: its output tile, k-step, the blocks it aims to
/// have in flight per multiprocessor once cut, and the fewest k-steps worth a range of
/// their own.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SplitShape {
    pub tile: (usize, usize),
    pub tile_k: usize,
    /// Blocks a multiprocessor, over two (half a block: 1).
    pub target_halves: usize,
    pub min_k_tiles: usize,
}

impl SplitShape {
    /// An FP32 SIMT GEMM of pipeline `pipe` (`tile_m` x 128 tiles): one block a
    /// multiprocessor, half the two it holds, ranges of at least two k-steps.
    pub fn simt(pipe: SimtPipeline) -> SplitShape {
        SplitShape {
            tile: (pipe.tile_m as usize, TILE as usize),
            tile_k: pipe.tile_k as usize,
            target_halves: 2,
            min_k_tiles: 2,
        }
    }

    /// The wgmma GEMM for `input` at tile width `tile_n`: blocks for half the
    /// multiprocessors (it holds one each), ranges of at least four k-tiles (its ring
    /// holds four to six, and a range shorter than the ring spends most of its time
    /// filling it).
    pub fn wgmma(input: GemmInput, tile_n: WgmmaTileN) -> SplitShape {
        SplitShape {
            tile: (TILE_M as usize, tile_n.elems() as usize),
            tile_k: tile_k(input) as usize,
            target_halves: 1,
            min_k_tiles: 4,
        }
    }

    /// Hopper's TF32 GEMM with a row-major B at tile height `tile` (`R x 128` tiles),
    /// as the other wgmma kernel.
    pub fn wgmma_kn(tile: WgmmaTileN) -> SplitShape {
        SplitShape {
            tile: (tile.elems() as usize, TILE_COLS as usize),
            tile_k: KN_TILE_K as usize,
            target_halves: 1,
            min_k_tiles: 4,
        }
    }

    /// The sm_80 tensor-core GEMM (`mma.sync`) at k-step `tile_k`: 128 x 128 tiles,
    /// one block a multiprocessor (half the two it holds, as the SIMT GEMM), ranges of
    /// at least four k-tiles.
    pub fn mma(tile_k: MmaTileK) -> SplitShape {
        SplitShape {
            tile: (128, 128),
            tile_k: tile_k.elems() as usize,
            target_halves: 2,
            min_k_tiles: 4,
        }
    }

    /// The fused quantized GEMM at tile height `tile`: 128-wide tiles of 64-k steps,
    /// a block on every multiprocessor, ranges of at least one 256-column group.
    pub fn qgemm(tile: QgemmTileM) -> SplitShape {
        SplitShape {
            tile: (tile.rows() as usize, QGEMM_TILE_N.elems() as usize),
            tile_k: tile_k(GemmInput::HalfBt(HalfType::Bf16)) as usize,
            target_halves: 2,
            min_k_tiles: 4,
        }
    }
}

/// How many ranges the split rule cuts an `m x n x k` product on a kernel of `shape`
/// into on a device of `sms` multiprocessors ([`splits_for`]); 1 where the reduce
/// cannot take the output (`n` not a multiple of 4).
pub(crate) fn split_count(shape: SplitShape, sms: usize, (m, n, k): (usize, usize, usize)) -> u32 {
    if !n.is_multiple_of(4) {
        return 1;
    }
    let tiles = m.div_ceil(shape.tile.0) * n.div_ceil(shape.tile.1);
    let k_tiles = k.div_ceil(shape.tile_k);
    splits_for(
        tiles,
        k_tiles,
        sms * shape.target_halves / 2,
        shape.min_k_tiles,
    )
}

/// The tiled SGEMM's kernel for an `m x n` output on a device of `sms` multiprocessors:
/// the sliced one (64 x 128 tiles) where 128 x 128 tiles would number fewer than the
/// multiprocessors, the 128 x 128 one elsewhere (where both fill the GPU, a sliced
/// variant trailed it by 2% at 2048^3 on an H100).
pub(crate) fn simt_variant(sms: usize, (m, n): (usize, usize)) -> GemmVariant {
    let tiles = m.div_ceil(TILE as usize) * n.div_ceil(TILE as usize);
    match tiles < sms {
        true => GemmVariant::TiledSliced,
        false => GemmVariant::Tiled,
    }
}

impl<'a> Stream<Recording<'a>> {
    /// [`split_count`] on this device.
    pub(crate) fn gemm_splits(&self, shape: SplitShape, mnk: (usize, usize, usize)) -> u32 {
        split_count(shape, self.sms(), mnk)
    }

    /// [`gemm`](Self::gemm) on tiled kernel `variant` (`Tiled` or `TiledSliced`, taken
    /// as given) with its k-loop cut into `splits` ranges (1: not cut; at most
    /// [`MAX_SPLITS`], `n` a multiple of 4 when cut). The partial products take `splits *
    /// m * n` f32 of scratch until the stream is synchronised. `gemm` cuts and picks the
    /// kernel by the device's rule; this forces both (benchmarks, tests).
    ///
    /// ```
    /// use trueno_gpu::driver::Context;
    /// use trueno_gpu::kernels::gemm::GemmVariant;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// let (m, n, k) = (64, 32, 300);
    /// let a = ctx.upload(&vec![0.5f32; m * k])?;
    /// let b = ctx.upload(&vec![2.0f32; k * n])?;
    /// let mut c = ctx.alloc::<f32>(m * n)?;
    /// let mut s = ctx.stream()?.record();
    /// s.gemm_split(GemmVariant::TiledSliced, 4, &a, &b, &c, m, n, k)?;
    /// s.sync()?;
    /// assert_eq!(c.to_vec()?[0], 300.0);
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_split(
        &mut self,
        variant: GemmVariant,
        splits: u32,
        a: &'a DeviceBuffer<f32>,
        b: &'a DeviceBuffer<f32>,
        c: &'a DeviceBuffer<f32>,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<()> {
        self.simt_gemm(&GemmKernel(variant), splits, (a, b, c), (m, n, k))
    }

    /// The FP32 GEMMs' launch: shape and aliasing checked, then `kern` (unsplit), or
    /// the tiled kernel's ranges and the reduce.
    pub(crate) fn simt_gemm(
        &mut self,
        kern: &GemmKernel,
        splits: u32,
        (a, b, c): (
            &'a DeviceBuffer<f32>,
            &'a DeviceBuffer<f32>,
            &'a DeviceBuffer<f32>,
        ),
        (m, n, k): (usize, usize, usize),
    ) -> Result<()> {
        if c.device_ptr() == a.device_ptr() || c.device_ptr() == b.device_ptr() {
            return shape_err(&kern.name(), "the output may not alias an input");
        }
        let cfg = kern.launch_config(&[m, n, k])?;
        expect_len("gemm a", a, m * k)?;
        expect_len("gemm b", b, k * n)?;
        expect_len("gemm c", c, m * n)?;
        if splits != 1 && kern.0 == GemmVariant::Naive {
            return shape_err(&kern.name(), "only the tiled kernels split k");
        }
        let f = self.context().function(Family::Gemm, &kern.name())?;
        let launch = |s: &mut Self, cfg: LaunchConfig, out: KernelArg<'a>| {
            s.launch(&f)
                .config(cfg)
                .arg(KernelArg::buf(a))
                .arg(KernelArg::buf(b))
                .arg(out)
                .arg(KernelArg::U32(m as u32))
                .arg(KernelArg::U32(n as u32))
                .arg(KernelArg::U32(k as u32))
                .run()
        };
        match splits {
            1 => launch(self, cfg, KernelArg::buf_mut(c)),
            _ => self.split_k(cfg, splits, c, (m, n), GemmEpilogue::default(), launch),
        }
    }

    /// Runs `partial` (a GEMM kernel's launch with `cfg` deepened to `splits` and its
    /// output the scratch of partial products, to be written with no epilogue) and then
    /// the reduce into `c` with `epilogue`; the scratch lives until the stream is
    /// synchronised.
    pub(crate) fn split_k<C: FloatElem>(
        &mut self,
        cfg: LaunchConfig,
        splits: u32,
        c: &'a DeviceBuffer<C>,
        (m, n): (usize, usize),
        epilogue: GemmEpilogue<'a>,
        partial: impl FnOnce(&mut Self, LaunchConfig, KernelArg<'a>) -> Result<()>,
    ) -> Result<()> {
        let reduce = SplitReduceKernel(C::TYPE);
        if !(1..=MAX_SPLITS).contains(&splits) {
            let what = format!("{splits} splits of k (1 to {MAX_SPLITS})");
            return shape_err(&reduce.name(), what);
        }
        let reduce_cfg = reduce.launch_config(&[m, n])?;
        let Some(len) = (splits as usize).checked_mul(m * n) else {
            return shape_err(&reduce.name(), format!("{splits} slices of {m} x {n}"));
        };
        let f = self.context().function(Family::Gemm, &reduce.name())?;
        let parts = self.context().alloc::<f32>(len)?;
        let deep = LaunchConfig {
            grid: (cfg.grid.0, cfg.grid.1, splits),
            ..cfg
        };
        let run = partial(self, deep, KernelArg::scratch(&parts))
            .and_then(|()| self.reduce_splits(&f, reduce_cfg, &parts, splits, c, (m, n), epilogue));
        self.keep_alive(parts);
        run
    }

    #[allow(clippy::too_many_arguments)]
    fn reduce_splits<C: FloatElem>(
        &mut self,
        f: &Function,
        cfg: LaunchConfig,
        parts: &DeviceBuffer<f32>,
        splits: u32,
        c: &'a DeviceBuffer<C>,
        (m, n): (usize, usize),
        epilogue: GemmEpilogue<'a>,
    ) -> Result<()> {
        let tail = self.epilogue_args(epilogue)?;
        let launch = self
            .launch(f)
            .config(cfg)
            .arg(KernelArg::scratch(parts))
            .arg(KernelArg::U32(splits))
            .arg(KernelArg::buf_mut(c))
            .arg(KernelArg::U32(m as u32))
            .arg(KernelArg::U32(n as u32));
        tail.into_iter().fold(launch, |l, x| l.arg(x)).run()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each kernel's target on an H100 (132 SMs) and an A100 (108), at the shapes the
    /// rule was measured on (BENCHMARKS.md "Split-K").
    #[test]
    fn each_kernel_cuts_toward_its_own_target() {
        let bf16 = GemmInput::Half(HalfType::Bf16);
        let n128 = SplitShape::wgmma(bf16, WgmmaTileN::N128);
        let simt = SplitShape::simt(SimtPipeline::DEFAULT);
        let sliced = SplitShape::simt(SimtPipeline::SLICED);
        // SGEMM: one block a multiprocessor. 128 x 128 tiles: 512^3 16 tiles -> 8,
        // 1024^3 64 -> 2; the sliced kernel's 64 x 128: 32 -> 4, 128 uncut.
        assert_eq!(split_count(simt, 132, (512, 512, 512)), 8);
        assert_eq!(split_count(simt, 132, (1024, 1024, 1024)), 2);
        assert_eq!(split_count(sliced, 132, (512, 512, 512)), 4);
        assert_eq!(split_count(sliced, 132, (1024, 1024, 1024)), 1);
        // wgmma: half the multiprocessors. 128 tokens: 32 tiles -> 2; 1024^3: uncut.
        assert_eq!(split_count(n128, 132, (128, 4096, 4096)), 2);
        assert_eq!(split_count(n128, 132, (1024, 1024, 1024)), 1);
        // The fused quantized GEMM: every multiprocessor. 32 tiles -> 4; 112 uncut.
        let q = SplitShape::qgemm(QgemmTileM::M128);
        assert_eq!(split_count(q, 132, (128, 4096, 4096)), 4);
        assert_eq!(split_count(q, 132, (128, 14336, 4096)), 1);
        // mma.sync on an A100: 4 x 8 tiles of a 512-token k/v projection -> 3.
        let mma = SplitShape::mma(MmaTileK::K64);
        assert_eq!(split_count(mma, 108, (512, 1024, 4096)), 3);
        // An n the reduce cannot read four columns at a time: uncut.
        assert_eq!(split_count(simt, 132, (512, 510, 512)), 1);
    }

    /// The wgmma tile widths on an H100's 132 SMs: 64 where 128-wide tiles would fill
    /// at most half of them, 128 where 256-wide ones would fill less than half, else 256.
    #[test]
    fn the_wgmma_tile_widens_as_the_product_grows() {
        use crate::ops_gemm::wgmma_tile_for;
        // 1024^2: 8 x 8 tiles of 128 (64 <= 66); 128 tokens x 4096: 1 x 32.
        assert_eq!(wgmma_tile_for(132, 1024, 1024), WgmmaTileN::N64);
        assert_eq!(wgmma_tile_for(132, 128, 4096), WgmmaTileN::N64);
        assert_eq!(wgmma_tile_for(132, 256, 4096), WgmmaTileN::N64);
        // 512 tokens x 4096: 4 x 32 = 128 tiles of 128, 4 x 16 = 64 of 256.
        assert_eq!(wgmma_tile_for(132, 512, 4096), WgmmaTileN::N128);
        // 2048^2: 16 x 8 = 128 tiles of 256.
        assert_eq!(wgmma_tile_for(132, 2048, 2048), WgmmaTileN::N256);
        // 1088^2: 9 x 9 = 81 tiles of 128 (162 > 132), 9 x 5 = 45 of 256 (90 < 132).
        assert_eq!(wgmma_tile_for(132, 1088, 1088), WgmmaTileN::N128);
    }

    /// The sliced SGEMM where 128 x 128 tiles number fewer than the multiprocessors.
    #[test]
    fn the_sgemm_slices_small_products() {
        // 1024^2: 64 tiles of 128 x 128; 512^2: 16.
        assert_eq!(simt_variant(132, (1024, 1024)), GemmVariant::TiledSliced);
        assert_eq!(simt_variant(132, (512, 512)), GemmVariant::TiledSliced);
        // 11 x 12 tiles are as many as an H100's SMs, 11 x 11 fewer; 2048^2: 256.
        assert_eq!(simt_variant(132, (1408, 1536)), GemmVariant::Tiled);
        assert_eq!(simt_variant(132, (1408, 1408)), GemmVariant::TiledSliced);
        assert_eq!(simt_variant(132, (2048, 2048)), GemmVariant::Tiled);
        assert_eq!(simt_variant(108, (1280, 1280)), GemmVariant::TiledSliced);
    }
}
