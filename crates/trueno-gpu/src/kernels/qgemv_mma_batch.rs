//! The integer tensor-core batch kernels' type ([`QgemvQ8kMmaKernel`]: a format, a
//! width of 8, 16 or 32 vectors, where its activations are read), and which kernel a
//! batch runs ([`BatchPath`]). The
//! kernels themselves: qgemv_q4k_mma.rs (Q4_K, Q5_K, and the tiles' frame and store),
//! qgemv_mma_staged.rs with qgemv_q6k_mma.rs and qgemv_block32_mma.rs (the formats whose
//! blocks are only 2-byte aligned).

use super::qgemv::QuantFormat;
use super::qgemv_block32_mma as block32;
use super::qgemv_mma_staged as staged;
use super::qgemv_q4k_mma::{self as q4k, THREADS, TILE_ROWS, VECTORS};
use super::{Family, Kernel, LaunchConfig, blocks_for};
use crate::error::Result;
use crate::ptx::KernelIr;

/// `y[v] = W a[v]` for 1 to `8 * tiles` Q8_K activation vectors `a` (one after another)
/// and weights `W` of any format, on the integer tensor cores; parameters as
/// [`super::qgemv_dp4a::QgemvQ8kBatchKernel`]'s (`w`, `qs`, `d`, `bsums` (unread: the min
/// term is a product of its own), `y`, `rows`, `blocks`, `vectors`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QgemvQ8kMmaKernel(pub QuantFormat, pub VectorTiles, pub ActLoads);

impl QgemvQ8kMmaKernel {
    /// The weight formats with a tensor-core batch kernel.
    pub const FORMATS: [QuantFormat; 5] = QuantFormat::ALL;

    /// Whether this kernel reads its activations straight from global memory (Q4_K's
    /// and Q5_K's eight-vector kernel with [`ActLoads::Direct`]; every other combination
    /// stages them).
    pub fn direct(&self) -> bool {
        loads_weights(self.0) && self.1 == VectorTiles::One && self.2 == ActLoads::Direct
    }

    /// Every distinct tensor-core batch kernel: each format at each width, and Q4_K's
    /// and Q5_K's direct eight-vector kernels.
    ///
    /// ```
    /// use trueno_gpu::kernels::qgemv_q4k_mma::QgemvQ8kMmaKernel;
    ///
    /// // Five formats at three widths, and two direct kernels.
    /// assert_eq!(QgemvQ8kMmaKernel::all().len(), 17);
    /// ```
    pub fn all() -> Vec<QgemvQ8kMmaKernel> {
        let mut all = Vec::new();
        for f in Self::FORMATS {
            if loads_weights(f) {
                all.push(QgemvQ8kMmaKernel(f, VectorTiles::One, ActLoads::Direct));
            }
            for t in VectorTiles::ALL {
                all.push(QgemvQ8kMmaKernel(f, t, ActLoads::Staged));
            }
        }
        all
    }
}

/// Whether format `f`'s kernels load their weights straight into registers (Q4_K and
/// Q5_K, whose blocks are 4-byte aligned; the others copy their tiles into shared memory
/// first, so only these have a direct-activation kernel).
fn loads_weights(f: QuantFormat) -> bool {
    matches!(f, QuantFormat::Q4K | QuantFormat::Q5K)
}

/// Where a tensor-core batch kernel reads its activations.
///
/// ```
/// use trueno_gpu::kernels::qgemv::QuantFormat;
/// use trueno_gpu::kernels::qgemv_q4k_mma::{ActLoads, QgemvQ8kMmaKernel, VectorTiles};
///
/// let k = QgemvQ8kMmaKernel(QuantFormat::Q4K, VectorTiles::One, ActLoads::Direct);
/// assert!(k.direct());
/// // Q6_K always stages its tiles, activations included.
/// let k = QgemvQ8kMmaKernel(QuantFormat::Q6K, VectorTiles::One, ActLoads::Direct);
/// assert!(!k.direct());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActLoads {
    /// From global memory with each super-block's weights, before their products: where
    /// the batch is small, its activations' loads cost less than copying them. Only
    /// Q4_K's and Q5_K's eight-vector kernels; elsewhere the same as `Staged`.
    Direct,
    /// Copied into shared memory in 16-byte chunks, two stages a warp: each warp load
    /// of B fragments straight from global memory reads eight vectors' runs from eight
    /// cache lines.
    Staged,
}

/// The most vectors [`BatchPath::Auto`] gives Q4_K's and Q5_K's direct kernel. H200,
/// GPU time, Q4_K staged against direct at 4096x4096 / 14336x4096 / 4096x14336 /
/// 32000x4096: two vectors 1.12x / 0.97x / 0.91x / 0.93x, three 1.13x / 0.98x / 0.99x
/// / 0.93x, four 1.21x / 1.00x / 1.02x / 0.96x, eight 1.38x / 1.21x / 1.16x / 1.07x
/// (Q5_K alike).
pub const DIRECT_UP_TO: usize = 3;

/// How many tiles of eight vectors (the `mma`'s N) a tensor-core batch kernel multiplies
/// each decoded weight fragment by: a launch takes up to eight times as many vectors, and
/// the weights are read and unpacked once for all of them.
///
/// ```
/// use trueno_gpu::kernels::qgemv_q4k_mma::VectorTiles;
///
/// assert_eq!(VectorTiles::for_vectors(8), Some(VectorTiles::One));
/// assert_eq!(VectorTiles::for_vectors(9), Some(VectorTiles::Two));
/// assert_eq!(VectorTiles::for_vectors(17).map(VectorTiles::max_vectors), Some(32));
/// assert_eq!(VectorTiles::for_vectors(33), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VectorTiles {
    /// Up to 8 vectors.
    One,
    /// Up to 16.
    Two,
    /// Up to 32.
    Four,
}

impl VectorTiles {
    /// Every width, narrowest first.
    pub const ALL: [VectorTiles; 3] = [VectorTiles::One, VectorTiles::Two, VectorTiles::Four];

    /// Tiles of eight vectors.
    pub const fn count(self) -> usize {
        match self {
            VectorTiles::One => 1,
            VectorTiles::Two => 2,
            VectorTiles::Four => 4,
        }
    }

    /// The most vectors a launch of this width takes.
    pub const fn max_vectors(self) -> usize {
        VECTORS as usize * self.count()
    }

    /// The narrowest width that takes `vectors` vectors at once (`None` past
    /// [`MMA_MAX_BATCH`]).
    pub fn for_vectors(vectors: usize) -> Option<VectorTiles> {
        Self::ALL.into_iter().find(|t| vectors <= t.max_vectors())
    }
}

/// The most vectors one tensor-core batch launch takes.
pub const MMA_MAX_BATCH: usize = VectorTiles::Four.max_vectors();

impl Kernel for QgemvQ8kMmaKernel {
    fn name(&self) -> String {
        let width = match self.1 {
            VectorTiles::One => String::new(),
            t => t.max_vectors().to_string(),
        };
        let staged = if loads_weights(self.0) && !self.direct() && self.1 == VectorTiles::One {
            "_staged"
        } else {
            ""
        };
        format!("trueno_qgemv_{}_q8k_mma{width}{staged}", self.0.name())
    }

    fn family(&self) -> Family {
        Family::Qgemv
    }

    fn build(&self) -> KernelIr {
        let (name, nt) = (self.name(), self.1.count());
        match self.0 {
            QuantFormat::Q4K => q4k::build(name, false, nt, !self.direct()),
            QuantFormat::Q5K => q4k::build(name, true, nt, !self.direct()),
            QuantFormat::Q6K => staged::build(name, &super::qgemv_q6k_mma::Q6kStep, nt),
            QuantFormat::Q8_0 => staged::build(name, &block32::Block32Step::<false>, nt),
            QuantFormat::Q4_0 => staged::build(name, &block32::Block32Step::<true>, nt),
        }
    }

    /// `dims = [rows, cols]` (the vector count is a parameter); `cols` a multiple of 256.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        let name = self.name();
        let (rows, _) = self.0.check_matrix(&name, dims, 256)?;
        let tiles = blocks_for(&name, rows, TILE_ROWS as usize, i32::MAX as u32)?;
        let mut cfg = LaunchConfig::linear(tiles, THREADS);
        let nt = self.1.count() as u32;
        cfg.shared_bytes = match self.0 {
            _ if self.direct() => 0,
            QuantFormat::Q4K | QuantFormat::Q5K => {
                let stage = staged::act_stage_bytes(nt, q4k::ACT_READS);
                super::qgemv_q4k_mma::WARPS * staged::STAGES * stage
            }
            QuantFormat::Q6K => shared_bytes::<super::qgemv_q6k_mma::Q6kStep>(nt),
            QuantFormat::Q8_0 => shared_bytes::<block32::Block32Step<false>>(nt),
            QuantFormat::Q4_0 => shared_bytes::<block32::Block32Step<true>>(nt),
        };
        Ok(cfg)
    }
}

/// A staged format's shared memory a block, for `nt` tiles of vectors.
fn shared_bytes<S: staged::StagedStep>(nt: u32) -> u32 {
    staged::shared_bytes(S::SPAN, nt, S::READS)
}

/// Which kernel a batched integer product runs
/// ([`crate::driver::Stream::qgemv_q8k_batch_with`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchPath {
    /// The tensor-core kernel where the batch has at least [`mma_from_vectors`] vectors,
    /// else `dp4a`.
    Auto,
    /// `dp4a` ([`super::qgemv_dp4a::QgemvQ8kBatchKernel`]), every format.
    Dp4a,
    /// The integer tensor cores ([`QgemvQ8kMmaKernel`]), every format.
    TensorCores,
    /// The integer tensor cores with the activations staged in shared memory at every
    /// batch size ([`ActLoads::Staged`]): what `TensorCores` runs from
    /// [`DIRECT_UP_TO`]` + 1` vectors, here also below (Q4_K and Q5_K; the other formats
    /// always stage). For comparisons and tests.
    TensorCoresStaged,
}

/// The fewest vectors of format `f` [`BatchPath::Auto`] gives the tensor cores: where
/// they ran faster than `dp4a` at every measured shape (H200, GPU time, 4096x4096 to
/// 32000x4096, the tensor cores' time against `dp4a`'s): two for the K-quants and Q4_0
/// (two vectors 0.59-0.88x for Q4_K, 0.57-0.89x Q5_K, 0.62-0.76x Q6_K, 0.71-0.83x Q4_0;
/// eight 0.27-0.54x, 0.30-0.56x, 0.29-0.41x, 0.27-0.38x), three for Q8_0 (two vectors
/// 0.85-1.08x: both kernels at the copy rate of reading its 8.5 bits a weight; three
/// 0.72-0.91x, eight 0.39-0.53x).
///
/// ```
/// use trueno_gpu::kernels::qgemv::QuantFormat;
/// use trueno_gpu::kernels::qgemv_q4k_mma::mma_from_vectors;
///
/// assert_eq!(mma_from_vectors(QuantFormat::Q4K), 2);
/// assert_eq!(mma_from_vectors(QuantFormat::Q8_0), 3);
/// ```
pub fn mma_from_vectors(f: QuantFormat) -> usize {
    match f {
        QuantFormat::Q8_0 => 3,
        _ => 2,
    }
}

impl BatchPath {
    /// The kernel this path runs for `vectors` vectors of format `f` (the tensor cores'
    /// widest past [`MMA_MAX_BATCH`], `dp4a`'s eight-vector one past eight: the stream's
    /// calls reject those counts).
    ///
    /// ```
    /// use trueno_gpu::kernels::Kernel;
    /// use trueno_gpu::kernels::qgemv::QuantFormat;
    /// use trueno_gpu::kernels::qgemv_q4k_mma::BatchPath;
    ///
    /// // Two Q4_K vectors: activations loaded straight; eight: staged.
    /// let k = BatchPath::Auto.kernel(QuantFormat::Q4K, 2);
    /// assert_eq!(k.name(), "trueno_qgemv_q4_k_q8k_mma");
    /// let k = BatchPath::Auto.kernel(QuantFormat::Q4K, 8);
    /// assert_eq!(k.name(), "trueno_qgemv_q4_k_q8k_mma_staged");
    /// let k = BatchPath::Auto.kernel(QuantFormat::Q8_0, 1);
    /// assert_eq!(k.name(), "trueno_qgemv_q8_0_q8k_batch");
    /// let k = BatchPath::Auto.kernel(QuantFormat::Q6K, 12);
    /// assert_eq!(k.name(), "trueno_qgemv_q6_k_q8k_mma16");
    /// let k = BatchPath::TensorCoresStaged.kernel(QuantFormat::Q4K, 2);
    /// assert_eq!(k.name(), "trueno_qgemv_q4_k_q8k_mma_staged");
    /// ```
    pub fn kernel(self, f: QuantFormat, vectors: usize) -> Box<dyn Kernel> {
        let mma = match self {
            BatchPath::Auto => vectors >= mma_from_vectors(f),
            BatchPath::Dp4a => false,
            BatchPath::TensorCores | BatchPath::TensorCoresStaged => true,
        };
        match mma {
            true => {
                let tiles = VectorTiles::for_vectors(vectors).unwrap_or(VectorTiles::Four);
                let direct = vectors <= DIRECT_UP_TO && self != BatchPath::TensorCoresStaged;
                let act = match direct {
                    true => ActLoads::Direct,
                    false => ActLoads::Staged,
                };
                Box::new(QgemvQ8kMmaKernel(f, tiles, act))
            }
            false => Box::new(super::qgemv_dp4a::QgemvQ8kBatchKernel(f)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_has_the_tensor_core_kernel_in_16_row_tiles() {
        for k in QgemvQ8kMmaKernel::all() {
            let QgemvQ8kMmaKernel(f, tiles, _) = k;
            let c = k.launch_config(&[17, 512]).unwrap();
            assert_eq!((c.grid.0, c.block.0), (2, THREADS), "{}", k.name());
            // Q4_K's and Q5_K's direct kernels read global memory straight, their
            // others stage only the activations (eight vectors' under 48 KiB); the other
            // formats also their weight tiles. Two blocks of eight vectors' stages fit an
            // H100's 227 KiB, one block of 32's.
            let staged = !loads_weights(f);
            assert_eq!(c.shared_bytes == 0, k.direct(), "{}", k.name());
            if tiles == VectorTiles::One {
                assert_eq!(c.shared_bytes > 48 * 1024, staged, "{}", k.name());
            }
            let blocks = if tiles == VectorTiles::Four { 1 } else { 2 };
            let blocks = if staged && tiles != VectorTiles::One {
                1
            } else {
                blocks
            };
            assert!(
                blocks * (c.shared_bytes + 1024) <= 227 * 1024,
                "{}",
                k.name()
            );
            assert!(
                k.launch_config(&[16, 384]).is_err(),
                "not whole super-blocks"
            );
            assert!(k.launch_config(&[0, 256]).is_err(), "no rows");
        }
    }

    #[test]
    fn the_batch_routing_takes_the_narrowest_kernel_that_holds_the_batch() {
        for f in QuantFormat::ALL {
            let name = |p: BatchPath, n| p.kernel(f, n).name();
            let from = mma_from_vectors(f);
            assert!(name(BatchPath::Auto, from).ends_with("_mma"));
            assert!(name(BatchPath::Auto, from - 1).ends_with("_batch"));
            assert!(name(BatchPath::Auto, 1).ends_with("_batch"));
            assert!(name(BatchPath::Dp4a, 8).ends_with("_batch"));
            assert!(name(BatchPath::TensorCores, 1).ends_with("_mma"));
            // Q4_K and Q5_K: activations straight up to DIRECT_UP_TO vectors.
            let eight = if loads_weights(f) {
                "_mma_staged"
            } else {
                "_mma"
            };
            assert!(name(BatchPath::Auto, DIRECT_UP_TO + 1).ends_with(eight));
            assert!(name(BatchPath::Auto, 8).ends_with(eight));
            assert!(name(BatchPath::Auto, DIRECT_UP_TO).ends_with("_mma"));
            for (n, width) in [
                (9, "_mma16"),
                (16, "_mma16"),
                (17, "_mma32"),
                (32, "_mma32"),
            ] {
                assert!(name(BatchPath::Auto, n).ends_with(width), "{n}");
                assert!(name(BatchPath::TensorCores, n).ends_with(width), "{n}");
            }
        }
        let widths: Vec<usize> = VectorTiles::ALL.map(VectorTiles::max_vectors).to_vec();
        assert_eq!(widths, [8, 16, 32]);
        assert_eq!(MMA_MAX_BATCH, 32);
    }
}
