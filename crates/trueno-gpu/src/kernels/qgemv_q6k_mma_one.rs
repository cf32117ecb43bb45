//! One Q8_K activation vector against Q6_K weights on the integer tensor cores
//! (`mma.sync.m16n8k32.u8.s8`), in the Q4_K kernel's frame (qgemv_mma_tile.rs): a block
//! of eight warps takes a 16-row tile, warp `w` super-blocks `w, w + 8, ...`, the
//! sub-blocks the product's N. Why: the `dp4a` kernel spends about 400 SASS instructions
//! on a warp's 4096 weights, most of them lining up the 2-byte-aligned 210-byte
//! super-blocks (a select and a byte permute a word) and assembling 6-bit values; here
//! 240-280 by offset (sm_90). Loaded into registers ([`TileBlocks::Two`],
//! [`TileBlocks::Three`]), or, for long rows at two blocks a multiprocessor, copied into
//! shared memory first ([`TileBlocks::StagedTwo`], qgemv_q6k_mma_one_staged.rs), or, for
//! rows of 4096 columns on sm_90, each tile copied whole by the copy engine
//! ([`TileBlocks::Bulk`], qgemv_q6k_mma_one_bulk.rs). All three run a lane's loads and
//! products from qgemv_q6k_mma_lane.rs.
//!
//! A tile's sixteen rows all start at the same offset past an 8-byte boundary: adjacent
//! rows where a row is 0 mod 8 bytes (whole 1024-column groups: four super-blocks, 840
//! bytes), else rows 2 apart (rows 4 mod 8 bytes, e.g. Qwen2-7B's 3584 and 18944
//! columns) or 4 apart (2 or 6 mod 8), the tiles of a group of 32 or 64 rows taking one
//! offset each. Eight super-blocks, a warp's step, are 1680 bytes, 0 mod 8, so all of a
//! warp's super-blocks start the same `O` bytes (0, 2, 4 or 6) past a boundary. One
//! warp-uniform branch then picks a loop built for that `O`: an 8-byte piece of quants is
//! one 8-byte load at `O = 0`, two 4-byte loads at 4, an 8-byte and a 4- or 8-byte load
//! lined up by two byte permutes at 2 and 6.
//!
//! Lane `4g + t` takes rows `g` and `g + 8`, and in each half `h` of a super-block
//! elements `l = 8t..8t + 8` of its four quarters: `ql` bytes `64h + 8t` (quarters 0 and 2,
//! low and high nibbles) and `64h + 32 + 8t` (1 and 3), `qh` bytes `128 + 32h + 8t` (bit
//! pair `2e` for quarter `e`): each byte of the row is loaded by one lane. Step `e` of a
//! half is quarter `e`: A's first k run holds elements `8t..8t + 4`, its second `8t +
//! 4..8t + 8`, all of sub-block `2e + t / 2` (of the half's eight), each byte the 6-bit
//! value `nibble | pair << 4` (0..64, unsigned). B column `n` is the half's sub-block `n`:
//! lane `4g + t` gives its eight activation bytes only in the step where its k runs are
//! sub-block `g`, zeros elsewhere. After a half's four steps lane `4g + t` holds rows `g`,
//! `g + 8` of sub-blocks `2t`, `2t + 1` (quarter `t`): `sc (dot - 32 bsum)` with Q8_K's
//! sums of 16, and `dx d` once a super-block. H200, µs in a graph (session 56): 15.5 /
//! 15.8 / 30.0 at 14336x4096 / 4096x14336 / 32000x4096 against the `dp4a` kernels' 16.9
//! / 15.9 / 32.8 in the same runs (80-82%, 78-80%, 92-94% of torch's copies that day);
//! at Qwen2-7B's 3584x18944 / 18944x3584 / 152064x3584 (tiles of every other row) 19.8 /
//! 18.7 / 125.6 against 20.4 / 21.6 / 150.3 (session 57).

use super::qgemv::QuantFormat;
use super::qgemv_k;
use super::qgemv_mma_tile::{
    PassWait, TILE_ROWS, TileLane, TileRows, act_after_weights, tile_loop, tiles_for,
};
use super::qgemv_q6k::BLOCK_BYTES;
use super::qgemv_q6k_mma_lane::{LaneB, Weights, act_words, load_halves, super_block};
use super::qgemv_q6k_mma_one_bulk::{BulkRing, bulk_ring_for};
use super::{Family, Kernel, LaunchConfig, blocks_for};
use crate::error::{Result, shape_err};
use crate::ptx::{Cmp, KernelBuilder, KernelIr, Reg, Space, Target, U16, U32, U64};

/// Warps a tile.
pub(super) const WARPS: u32 = 8;
/// Blocks of eight warps a multiprocessor asked of ptxas, which caps the registers (and
/// so how much of a pass's loads ptxas keeps in flight before its products), and where
/// the weights wait for their products.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TileBlocks {
    /// Two (up to 128 registers; ptxas takes about 96): every load of a super-block
    /// before its first product. For products whose tiles fit one wave so (H200, the
    /// probe's forms: 15.3 against 19.0 µs at 4096x14336, 5.5 against 6.0 at 4096x4096).
    Two,
    /// Three (80 registers): more warps in flight for products of several waves (14.8
    /// against 16.7 µs at 14336x4096, 29.5 against 34.0 at 32000x4096).
    Three,
    /// Two, the weights copied into shared memory by `cp.async` a step ahead of their
    /// products ([`super::qgemv_q6k_mma_one_staged`]): for long rows, where a warp has
    /// many steps to overlap (H200, µs in a graph against [`TileBlocks::Two`] in the same
    /// runs: 14.4 against 15.8 at 4096x14336, 7.4 against 9.8 at 1024x14336, 18.1 against
    /// 19.9 at 3584x18944; with rows of 16 super-blocks, two steps a warp, a first build
    /// lost, 10.8 against 9.9 at 8192x4096).
    StagedTwo,
    /// Whole tiles copied into shared memory by the copy engine, `stages` a block
    /// ([`super::qgemv_q6k_mma_one_bulk`]; sm_90 and later, rows of whole 1024-column
    /// groups): where rows are 4096 columns and the tiles fill every multiprocessor (H200,
    /// µs in a graph against the kernels routed before, alternated in one call: 13.8
    /// against 15.2 at 14336x4096, 28.4 against 30.2 at 32000x4096, 8.9 against 9.9 at
    /// 8192x4096, 5.0 against 5.5 at 4096x4096, 107.7 against 110.9 at Llama-3's
    /// 128256x4096 output layer).
    Bulk(BulkRing),
}

impl TileBlocks {
    /// The blocks a multiprocessor asked of ptxas.
    ///
    /// ```
    /// use trueno_gpu::kernels::qgemv_q6k_mma_one::TileBlocks;
    ///
    /// assert_eq!(TileBlocks::Three.per_multiprocessor(), 3);
    /// ```
    pub const fn per_multiprocessor(self) -> u32 {
        match self {
            TileBlocks::Two | TileBlocks::StagedTwo => 2,
            TileBlocks::Three => 3,
            TileBlocks::Bulk(ring) => ring.blocks,
        }
    }
}

/// What the tensor-core GEMV's routing asks of a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QgemvDevice {
    /// Multiprocessors.
    pub sms: u32,
    /// Shared memory a block may take (opt-in), bytes.
    pub shared_per_block: u32,
    /// sm_90 or later: the copy engine's bulk copies (`cp.async.bulk`).
    pub bulk_copies: bool,
}

impl QgemvDevice {
    /// An H100 or H200: 132 multiprocessors, 227 KiB a block, bulk copies.
    pub const HOPPER_132: QgemvDevice = QgemvDevice {
        sms: 132,
        shared_per_block: 227 * 1024,
        bulk_copies: true,
    };

    /// An A100: 108 multiprocessors, 163 KiB a block, no bulk copies.
    pub const A100_108: QgemvDevice = QgemvDevice {
        sms: 108,
        shared_per_block: 163 * 1024,
        bulk_copies: false,
    };
}

/// `y = W a` for Q6_K weights `W` and one Q8_K activation vector `a`, on the integer
/// tensor cores (see the module's doc); parameters as
/// [`super::qgemv_dp4a::QgemvQ8kKernel`]'s. `Stream::qgemv_q8k` takes it as
/// [`q6k_mma_one_for`] says.
#[derive(Clone, Copy, Debug)]
pub struct QgemvQ6kMmaOneKernel(pub TileBlocks);

impl QgemvQ6kMmaOneKernel {
    /// Every form.
    pub const ALL: [Self; 6] = [
        Self(TileBlocks::Two),
        Self(TileBlocks::Three),
        Self(TileBlocks::StagedTwo),
        Self(TileBlocks::Bulk(BulkRing::ONE_OF_THREE)),
        Self(TileBlocks::Bulk(BulkRing::ONE_OF_FOUR)),
        Self(TileBlocks::Bulk(BulkRing::RING_OF_TWO)),
    ];
}

/// The tensor-core kernel for a `rows` x `cols` Q6_K product on device `dev`, or `None`
/// where the `dp4a` kernels keep up. Rows of 4096 columns take the copy engine's tiles
/// where the device has them ([`bulk_ring_for`]). Else: `None` for tiles that fit one
/// wave at two blocks a multiprocessor with rows of fewer than [`LONG_ROW_BLOCKS`]
/// super-blocks; two blocks a multiprocessor up to two waves of them (the weights staged
/// in shared memory where rows are that long and two such blocks fit the device's
/// shared memory), three past. The one place
/// `Stream::qgemv_q8k` and `trueno ptx map` decide it. H200 (132
/// multiprocessors: 264 tiles a wave at two blocks), `gpu-bench` in a graph, µs against
/// the `dp4a` kernels in the same run (session 56, rows of whole 1024-column groups, each
/// pass's first unrolled apart; one loop a case since, 1.00-1.02x):
///
/// | rows x cols | two blocks | three | `dp4a` |
/// |---|---:|---:|---:|
/// | 1024 x 4096 | 3.44 | 3.64 | **3.22** |
/// | 2048 x 4096 | 4.40 | 4.50 | **4.35** |
/// | 4096 x 4096 | 5.58 | 5.75 | **5.48** |
/// | 1024 x 14336 | **9.74** | 10.05 | 10.00 |
/// | 4096 x 14336 | **15.72** | 19.20 | 15.90 |
/// | 8192 x 4096 | **9.88** | 10.72 | 10.94 |
/// | 14336 x 4096 | 17.00 | **15.62** | 16.83 |
/// | 32000 x 4096 | 33.87 | **29.92** | 32.63 |
///
/// Where rows are long the two blocks stage their weights since session 61
/// ([`TileBlocks::StagedTwo`]; 1.10-1.31x the register form at 4096 x 14336, 1024 x 14336
/// and 3584 x 18944).
///
/// ```
/// use trueno_gpu::kernels::qgemv_q6k_mma_one::{QgemvDevice, TileBlocks, q6k_mma_one_for};
/// use trueno_gpu::kernels::qgemv_q6k_mma_one_bulk::BulkRing;
///
/// let blocks = |rows, cols, dev| q6k_mma_one_for(rows, cols, dev).map(|k| k.0);
/// // An H200, and a device of as many multiprocessors without bulk copies.
/// let h200 = QgemvDevice::HOPPER_132;
/// let sm80 = QgemvDevice { bulk_copies: false, ..h200 };
/// assert_eq!(blocks(4096, 14336, h200), Some(TileBlocks::StagedTwo));
/// let ring = BulkRing::RING_OF_TWO.on(132);
/// assert_eq!(blocks(14336, 4096, h200), Some(TileBlocks::Bulk(ring)));
/// assert_eq!(blocks(8192, 4096, h200), Some(TileBlocks::Bulk(BulkRing::ONE_OF_FOUR)));
/// assert_eq!(blocks(4096, 4096, h200), Some(TileBlocks::Bulk(BulkRing::ONE_OF_THREE)));
/// // Without bulk copies, the register forms.
/// assert_eq!(blocks(8192, 4096, sm80), Some(TileBlocks::Two));
/// assert_eq!(blocks(14336, 4096, sm80), Some(TileBlocks::Three));
/// assert_eq!(blocks(4096, 4096, sm80), None);
/// // Qwen2-7B's output layer: rows of 3584 columns, two alignments.
/// assert_eq!(blocks(152064, 3584, h200), Some(TileBlocks::Three));
/// // Long rows on a device where two staged blocks do not fit (sm_89: 99 KiB a block).
/// let sm89 = QgemvDevice { shared_per_block: 99 * 1024, ..sm80 };
/// assert_eq!(blocks(4096, 14336, sm89), Some(TileBlocks::Two));
/// ```
pub fn q6k_mma_one_for(rows: usize, cols: usize, dev: QgemvDevice) -> Option<QgemvQ6kMmaOneKernel> {
    if let Some(ring) = bulk_ring_for(rows, cols, dev) {
        return Some(QgemvQ6kMmaOneKernel(TileBlocks::Bulk(ring)));
    }
    let tiles = tiles(rows, cols) as u64;
    let wave = u64::from(dev.sms) * u64::from(TileBlocks::Two.per_multiprocessor());
    let long = cols / 256 >= LONG_ROW_BLOCKS;
    let blocks = match tiles {
        t if t <= wave && !long => return None,
        t if t <= 2 * wave && long && super::qgemv_q6k_mma_one_staged::fits(dev) => {
            TileBlocks::StagedTwo
        }
        t if t <= 2 * wave => TileBlocks::Two,
        _ => TileBlocks::Three,
    };
    Some(QgemvQ6kMmaOneKernel(blocks))
}

/// The kernel's tiles (blocks) for `rows` rows of `cols` columns: the grid, and what the
/// routing counts waves of.
fn tiles(rows: usize, cols: usize) -> usize {
    tiles_for(
        rows,
        cols / 256 * BLOCK_BYTES as usize,
        TileRows::SameAlignment,
    )
}

/// Super-blocks a row from which the tensor-core kernel wins even where its tiles fill
/// less than a wave (14336 columns, 56, in the table above; 4096, 16, loses).
pub const LONG_ROW_BLOCKS: usize = 32;

impl Kernel for QgemvQ6kMmaOneKernel {
    fn name(&self) -> String {
        let form = match self.0 {
            TileBlocks::StagedTwo => "_staged".into(),
            TileBlocks::Bulk(ring) => format!("_bulk_s{}", ring.stages),
            _ => String::new(),
        };
        format!(
            "trueno_qgemv_q6_k_q8k_mma1_b{}{form}",
            self.0.per_multiprocessor()
        )
    }

    fn family(&self) -> Family {
        Family::Qgemv
    }

    fn build(&self) -> KernelIr {
        match self.0 {
            TileBlocks::StagedTwo => super::qgemv_q6k_mma_one_staged::build(self.name()),
            TileBlocks::Bulk(ring) => super::qgemv_q6k_mma_one_bulk::build(self.name(), ring),
            TileBlocks::Two | TileBlocks::Three => build_registers(self.name(), self.0),
        }
    }

    /// The copy engine's bulk copies: sm_90 and later.
    fn targets(&self) -> &'static [Target] {
        match self.0 {
            TileBlocks::Bulk(_) => &[Target::Sm90, Target::Sm90a],
            _ => &[Target::Sm80, Target::Sm90, Target::Sm90a],
        }
    }

    /// `dims = [rows, cols]`, `cols` a multiple of 256: a block per 16 rows (and up to
    /// three more where the rows' alignments differ, see the module's doc); for
    /// [`TileBlocks::Bulk`], `cols` a multiple of 1024 and at most its ring's grid.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        let name = self.name();
        let (rows, cols) = QuantFormat::Q6K.check_matrix(&name, dims, 256)?;
        if let TileBlocks::Bulk(ring) = self.0 {
            return bulk_launch(&name, ring, rows, cols);
        }
        let tiles = blocks_for(&name, tiles(rows, cols), 1, i32::MAX as u32)?;
        let mut cfg = LaunchConfig::linear(tiles, 32 * WARPS);
        if self.0 == TileBlocks::StagedTwo {
            cfg.shared_bytes = super::qgemv_q6k_mma_one_staged::SHARED_BYTES;
        }
        Ok(cfg)
    }
}

/// [`QgemvQ6kMmaOneKernel::launch_config`] for the copy engine's tiles.
fn bulk_launch(name: &str, ring: BulkRing, rows: usize, cols: usize) -> Result<LaunchConfig> {
    if !cols.is_multiple_of(1024) {
        return shape_err(
            name,
            format!("{cols} columns: rows of whole 1024-column groups"),
        );
    }
    let grid = ring.grid(rows.div_ceil(TILE_ROWS as usize));
    let grid = blocks_for(name, grid, 1, i32::MAX as u32)?;
    let shared = u32::try_from(ring.shared_bytes(cols / 256)).or_else(|_| {
        shape_err(
            name,
            format!("{cols} columns: tiles past any shared memory"),
        )
    })?;
    let mut cfg = LaunchConfig::linear(grid, 32 * WARPS);
    cfg.shared_bytes = shared;
    Ok(cfg)
}

/// The kernel with every load of a super-block in registers before its products
/// ([`TileBlocks::Two`], [`TileBlocks::Three`]).
fn build_registers(name: String, blocks: TileBlocks) -> KernelIr {
    let residency = (32 * WARPS, blocks.per_multiprocessor());
    let (mut b, p, tl) = TileLane::begin(name, residency, BLOCK_BYTES, TileRows::SameAlignment);
    let TileLane {
        warp, g, t, heads, ..
    } = tl;
    let lane = LaneB::new(&mut b, g, t);
    let t2_64 = b.cvt::<U64, U32>(lane.t2, None);
    let t8_64 = b.cvt::<U64, U32>(lane.t8, None);
    let acc = [b.mov(0.0f32), b.mov(0.0f32)];
    // The warp's offset past an 8-byte boundary: the same for its rows and super-blocks.
    let first = b.mul_wide(warp, BLOCK_BYTES);
    let first = b.add(heads[0], first);
    let first = b.cvt::<U32, U64>(first, None);
    let o_warp = b.and(first, 7u32);
    for o in [0u32, 2, 4, 6] {
        let is = b.setp::<U32>(Cmp::Eq, o_warp, o);
        b.if_then(is, true, |b| {
            // The lane's first piece's 8-byte boundary in each row's first super-block.
            let pieces = heads.map(|h| {
                let at = b.add(h, t8_64);
                b.sub(at, u64::from(o))
            });
            let pass = |b: &mut KernelBuilder, sb: Reg<U32>, wait: PassWait| {
                let wo = b.mul_wide(sb, BLOCK_BYTES);
                let blk = heads.map(|h| b.add(h, wo));
                let at = pieces.map(|q| b.add(q, wo));
                let raw = load_halves(b, (Space::Global, o), at);
                let d = blk.map(|x| b.ld::<U16, U64>(Space::Global, x, 208));
                let sc = blk.map(|x| {
                    let x = b.add(x, t2_64);
                    [192, 200].map(|off| b.ld::<U16, U64>(Space::Global, x, off))
                });
                let a = act_after_weights(b, &p, sb, lane.act_off, wait);
                let xs = act_words(b, a);
                qgemv_k::end_block(b, (p.y, tl.pin_row), p.blocks, a, acc[0]);
                let w = Weights { raw, d, sc };
                super_block(b, (&p, &lane, o), (sb, xs, None), &w, acc);
            };
            tile_loop(b, warp, WARPS, p.blocks, pass);
        });
    }
    tl.store(&mut b, &p, WARPS, acc);
    b.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_takes_sixteen_rows_of_whole_column_groups() {
        let k = QgemvQ6kMmaOneKernel(TileBlocks::Three);
        let cfg = k.launch_config(&[33, 2048]).unwrap();
        assert_eq!((cfg.grid.0, cfg.block.0), (3, 256));
        // Rows of 5 super-blocks (1050 bytes, 2 mod 8) start at four offsets mod 8, one
        // a row in turn: 33 rows are one group of 64 in four tiles.
        let cfg = k.launch_config(&[33, 1280]).unwrap();
        assert_eq!(cfg.grid.0, 4);
        // Rows of 6 (1260 bytes, 4 mod 8): two offsets; 65 rows, three groups of 32.
        assert_eq!(k.launch_config(&[65, 1536]).unwrap().grid.0, 6);
        assert!(k.launch_config(&[16, 1000]).is_err());
        assert!(k.launch_config(&[16]).is_err());
    }
}
