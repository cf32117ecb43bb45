//! How a decode step splits its cache and which chunk kernel takes it: the SIMT kernels'
//! rule (`DecodeShape::chunk`, in `attention.rs`) and the tensor-core kernel's
//! (`DecodeShape::mma_chunk`: whole waves of the SM's places), the path a cache type
//! takes by default, and the blocks a SM holds.

use super::attention::DecodeShape;
use super::decode_mma::{TILE_ROWS, shared_bytes, tiles_per_group};
use super::float_type::FloatType;
use super::gemm_mma::HalfType;

/// Which chunk kernel runs a decode step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodePath {
    /// The SIMT kernels (`DecodeChunkKernel`, `PagedDecodeChunkKernel`): f32 math on
    /// every element, any cache type.
    Simt,
    /// [`DecodeMmaKernel`](super::decode_mma::DecodeMmaKernel): 16-bit caches only.
    Mma,
}

impl DecodePath {
    /// The path a cache of element type `ty` takes by default: the tensor cores for
    /// 16-bit caches, SIMT for f32 ones.
    pub fn for_cache(ty: FloatType) -> DecodePath {
        match ty {
            FloatType::F32 => DecodePath::Simt,
            _ => DecodePath::Mma,
        }
    }
}

/// The 16-bit type of a cache, if it has one.
pub fn half_type(ty: FloatType) -> Option<HalfType> {
    match ty {
        FloatType::Bf16 => Some(HalfType::Bf16),
        FloatType::F16 => Some(HalfType::F16),
        FloatType::F32 => None,
    }
}

/// Blocks of the tensor-core kernel a SM holds at head dimension `dim`, on a device whose
/// blocks may take `max_shared_per_block` bytes (each block reserves 1 KB more, the SM
/// that much over the block's limit): shared memory is the bound at every dimension
/// (registers would allow 5, 4 and 2 at 64, 128 and 256: ptxas's counts).
pub fn blocks_per_sm(dim: u32, max_shared_per_block: u32) -> usize {
    super::blocks_by_shared_memory(shared_bytes(dim) as usize, max_shared_per_block).max(1)
}

/// The most chunks a cache is split into (the merge reads each).
const MOST_SPLITS: usize = 1024;

impl DecodeShape {
    /// Positions per chunk, and the launch's second dimension (the SIMT kernels' query
    /// heads, each tiling them by its own count; the tensor-core kernel's blocks of a
    /// chunk), for `path` on a device of `sms` multiprocessors whose blocks may take
    /// `max_shared_per_block` bytes.
    pub fn split_for(
        &self,
        path: DecodePath,
        sms: usize,
        max_shared_per_block: u32,
    ) -> (usize, usize) {
        match path {
            DecodePath::Simt => (self.chunk(sms), self.heads_q),
            DecodePath::Mma => {
                let group = self.heads_q / self.heads_kv.max(1);
                let slots = sms.max(1) * blocks_per_sm(self.dim as u32, max_shared_per_block);
                (
                    self.mma_chunk(slots),
                    self.heads_kv * tiles_per_group(group),
                )
            }
        }
    }

    /// Positions per chunk for the tensor-core kernel on a device that holds `slots`
    /// blocks at once: the split (a multiple of its 64-row tiles) whose blocks take the
    /// fewest tiles in turn, waves of `slots` blocks times the tiles each (plus one for a
    /// block's own start and end), ties to fewer chunks. Memory-bound blocks finish
    /// together, so a last wave that fills a part of the GPU costs nearly a whole one.
    /// Against chunks of a power of two (as the SIMT kernels', 1.3 waves at 32K): 3-7%
    /// faster at 128K and 14% at 4K on an H100, the same at 32K.
    pub fn mma_chunk(&self, slots: usize) -> usize {
        let per_split = self.heads_kv * tiles_per_group(self.heads_q / self.heads_kv.max(1));
        let per_split = per_split.saturating_mul(self.batch).max(1);
        let tiles = self.capacity.div_ceil(TILE_ROWS as usize).max(1);
        let cost = |splits: usize| {
            // A block's prologue and epilogue (the query, the first copies' latency, the
            // warps' merge) count as one more tile.
            let each = tiles.div_ceil(splits) + 1;
            let waves = splits.saturating_mul(per_split).div_ceil(slots.max(1));
            (waves.saturating_mul(each), splits)
        };
        // Only the fewest splits of each tiles-a-block count can be best (more splits
        // with as many tiles each take as many waves or more): about 2 sqrt(tiles)
        // candidates: 0.6 us of host time a call at 128K on this x86 VM, where trying
        // all 1024 split counts took 3 us.
        let most = tiles.min(MOST_SPLITS);
        let (mut best, mut splits) = (cost(1), 1);
        while splits <= most {
            best = best.min(cost(splits));
            let each = tiles.div_ceil(splits);
            if each == 1 {
                break;
            }
            splits = tiles.div_ceil(each - 1);
        }
        tiles.div_ceil(best.1) * TILE_ROWS as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_a_sm_follow_the_shared_memory() {
        // 227 KB + 1 KB (H100) over 68, 72 and 144 KB (+ 1 KB); A100's 163.
        let h100 = 227 * 1024;
        let per_sm: Vec<usize> = [64, 128, 256].map(|d| blocks_per_sm(d, h100)).to_vec();
        assert_eq!(per_sm, [3, 3, 1]);
        assert_eq!(blocks_per_sm(128, 163 * 1024), 2);
    }

    #[test]
    fn chunks_fill_whole_waves_with_the_fewest_tiles_a_block() {
        let shape = |heads_q, heads_kv, capacity| DecodeShape {
            batch: 1,
            heads_q,
            heads_kv,
            capacity,
            dim: 128,
        };
        // 396 places (132 SMs x 3); a block costs its tiles + 1. 32/8 at 32K: 8 blocks
        // a split, 512 tiles; 49 splits fill one wave at ceil(512 / 49) = 11 tiles a
        // block, and 47 (704 positions) is the fewest that do. 128K: 2048 tiles, 49
        // splits of 42 (2688 positions; 98 in two waves of 21 cost 44, not 43). 28/4: 4
        // blocks a split, 99 in a wave at 6 tiles, 86 the fewest (384). 4K: 64 tiles, 2
        // a block from 32 splits (64 splits: two waves of 1, 4 against 3).
        for (s, want) in [
            (shape(32, 8, 32768), 704),
            (shape(64, 8, 32768), 704),
            (shape(32, 8, 131072), 2688),
            (shape(28, 4, 32768), 384),
            (shape(32, 8, 4096), 128),
            (shape(32, 8, 1), 64),
        ] {
            assert_eq!(s.mma_chunk(396), want, "{s:?}");
        }
        // Group 17 (two tiles a group) at 8 key/value heads: 16 blocks a split, 24 in a
        // wave, 3 tiles a block from 22 splits (192 positions). A batch of 64 is 512
        // blocks a split, past one wave: 1 split costs 2 waves of 65 (130), 3 splits 4
        // waves of 23 (92; 6: 8 x 12 = 96, 64: 83 x 2 = 166), so 1408 positions.
        assert_eq!(shape(136, 8, 4096).mma_chunk(396), 192);
        let batch = DecodeShape {
            batch: 64,
            ..shape(32, 8, 4096)
        };
        assert_eq!(batch.mma_chunk(396), 1408);
    }

    #[test]
    fn the_candidates_find_what_trying_every_split_finds() {
        // The rule spelled out: every split count 1..=min(tiles, 1024), cost waves x
        // (tiles each + 1), ties to fewer splits.
        let every = |tiles: usize, per_split: usize, slots: usize| {
            let cost = |s: usize| {
                let waves = (s * per_split).div_ceil(slots);
                (waves * (tiles.div_ceil(s) + 1), s)
            };
            let s = (1..=tiles.min(MOST_SPLITS))
                .min_by_key(|&s| cost(s))
                .unwrap();
            tiles.div_ceil(s) * TILE_ROWS as usize
        };
        for capacity in [
            1,
            63,
            64,
            65,
            1000,
            4096,
            9000,
            32768,
            100_000,
            131072,
            1 << 20,
        ] {
            for (heads_q, heads_kv, batch) in [(32, 8, 1), (28, 4, 1), (64, 8, 3), (8, 1, 64)] {
                for slots in [132, 264, 396, 108] {
                    let s = DecodeShape {
                        batch,
                        heads_q,
                        heads_kv,
                        capacity,
                        dim: 128,
                    };
                    let tiles = capacity.div_ceil(TILE_ROWS as usize);
                    let per_split = heads_kv * tiles_per_group(heads_q / heads_kv) * batch;
                    assert_eq!(
                        s.mma_chunk(slots),
                        every(tiles, per_split, slots),
                        "{s:?} {slots}"
                    );
                }
            }
        }
    }
}
