//! The Hopper FlashAttention kernel's shape ([`super::wgmma`]): warpgroups and query
//! rows a block, keys a tile, and the shared-memory layout of the query tile, the
//! key/value stages and their barriers.

/// Warpgroups per block, 64 query rows each: three at head dim 64 (each key/value tile
/// then serves 192 rows, and 158 registers fit the 168 of 384 threads), two above.
/// Thread 0 also drives the copy engine: a producer warpgroup's register split
/// (`setmaxnreg`) made ptxas serialize the register-A products, and a ninth warp
/// leaves a multiprocessor quarter three warps (168 registers each).
pub fn warpgroups(dim: u32) -> u32 {
    if dim == 64 { 3 } else { 2 }
}

/// The longest query sequence for which head dim 64 takes two warpgroups (128 rows) a
/// block instead of three: at 1K tokens 192-row blocks leave a third of each sequence's
/// last block empty (1024 = 5 x 192 + 64), and two warpgroups ran 1.02-1.03x (causal
/// 1.07-1.10x) there, 0.88-0.97x at 4K and 16K (H100, 2026-11-27, alternated twice).
pub const SHORT_SEQ: usize = 1024;

/// Threads per block of `wg` warpgroups.
pub fn threads(wg: u32) -> u32 {
    128 * wg
}

/// Query rows per block of `wg` warpgroups.
pub fn block_rows(wg: u32) -> u32 {
    64 * wg
}
/// Columns per copy-engine box: one 128-byte swizzle row of 16-bit values.
pub const BOX_COLS: u32 = 64;
/// Slack to round the dynamic base up to the swizzle period.
pub(super) const ALIGN: u32 = 1024;
/// The most dynamic shared memory an sm_90 block may have.
pub(super) const SHARED_LIMIT: u32 = 227 * 1024;

/// Keys per tile: 128, or 80 at head dim 256, where the output alone is 128 registers a
/// thread and two stages of 80-key tiles are what fits shared memory beside the query
/// tile. Against 64 keys (H100, 2026-11-27, two calls alternating them): 1.02-1.08x at
/// 4K and 16K tokens, 1.01-1.05x at 1K, causal 1K the same; the scores' `wgmma` reads
/// 4.5 KiB of shared memory per 164 kFLOP instead of 4 KiB per 131, and a block takes
/// 1.25x fewer tiles through its fixed per-tile steps (222 registers, no spills).
pub fn keys_per_tile(dim: u32) -> u32 {
    if dim > 128 { 80 } else { 128 }
}

/// Bytes of the query tile, of one K (or V) tile, and the stages that fit beside them
/// (at most four): four at 64, three at 128, two at 256.
pub(super) fn layout(dim: u32, wg: u32) -> (u32, u32, u32) {
    let q = block_rows(wg) * dim * 2;
    let kv = keys_per_tile(dim) * dim * 2;
    let room = SHARED_LIMIT - ALIGN - q - 8;
    (q, kv, (room / (2 * kv + stage_barriers(dim) * 8)).min(4))
}

/// Whether a block asks for its first key/value tile alone at the start (the other
/// stages once its first scores are issued) and its values complete a barrier of their
/// own (`VALUES_FULL`), so that the first scores wait for the query and key tiles only.
/// Measured on an H100 (2026-11-27, two calls alternating with both in one barrier and
/// every stage asked for at the start): head dim 256 1.02-1.07x at every shape, 128
/// 1.02-1.06x at causal 1K (the rest within 3%); at 64 (four stages) 0.96-0.97x at 4K
/// and 16K, so dim 64 keeps the one barrier.
pub(super) fn values_apart(dim: u32) -> bool {
    dim >= 128
}

/// Barriers a stage: the ring's `FULL` (its tile has landed, or with `values_apart` its
/// key tile) and `EMPTY`, and with `values_apart` `VALUES_FULL`.
pub(super) fn stage_barriers(dim: u32) -> u32 {
    if values_apart(dim) { 3 } else { 2 }
}

/// [`Ring::barrier`](crate::kernels::gemm_wgmma_block::Ring::barrier)'s group of a stage's value barrier.
pub(super) const VALUES_FULL: u32 = 2;

/// Dynamic shared memory: alignment slack, the query tile, the stages and barriers.
pub fn shared_bytes(dim: u32, wg: u32) -> u32 {
    let (q, kv, stages) = layout(dim, wg);
    ALIGN + q + stages * (2 * kv + stage_barriers(dim) * 8) + 8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_memory_fits_and_holds_the_stages_written_out() {
        // Query tile + stages of K and V + 1 KiB slack + barriers (two a stage at 64,
        // three above): 24 KiB + 4 x 32 KiB at 64 (16 KiB + 4 x 32 KiB with two
        // warpgroups), 32 KiB + 3 x 64 KiB at 128, 64 KiB + 2 x 80 KiB at 256.
        let cases = [
            (64, 3, 24, 32, 4, 2),
            (64, 2, 16, 32, 4, 2),
            (128, 2, 32, 64, 3, 3),
            (256, 2, 64, 80, 2, 3),
        ];
        for (dim, wg, q, stage, stages, bars) in cases {
            let want = 1024 + q * 1024 + stages * (stage * 1024 + 8 * bars) + 8;
            assert_eq!(shared_bytes(dim, wg), want, "dim {dim}, {wg} warpgroups");
            assert!(shared_bytes(dim, wg) <= SHARED_LIMIT);
        }
    }
}
