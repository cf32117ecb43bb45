//! Appending keys and values to a contiguous KV cache (`[batch, heads_kv, capacity,
//! dim]`, f32, bf16 or f16; the paged layout's append is the same kernel with a
//! block-table lookup, see `paged.rs`): one decode step's, or a prompt's tokens in one
//! launch, from a start position per sequence read from a buffer, so a batch of
//! sequences at different lengths appends in one launch. The element types are
//! [`FloatType`]'s.

use super::float_type::{FloatType, store_elem};
use super::helpers::{elem_addr, global_index, grid_threads};
use super::{Family, Kernel, LaunchConfig, blocks_for, check_dims};
use crate::error::Result;
use crate::ptx::{Cmp, F32, KernelBuilder, KernelIr, PtxType, Space, U32, U64};

/// Threads per block.
pub const THREADS: u32 = 256;

/// CPU reference (f32 caches; a 16-bit cache holds each value rounded to nearest):
/// `cache` with row `positions[b] + t` of every head of sequence `b` replaced by
/// `new[b, t, h, :]` for `t < tokens` (rows at or past `capacity` are left out).
pub fn reference(
    cache: &[f32],
    new: &[f32],
    positions: &[u32],
    (heads_kv, capacity, dim): (usize, usize, usize),
    tokens: usize,
) -> Vec<f32> {
    let mut out = cache.to_vec();
    for (b, &start) in positions.iter().enumerate() {
        for t in 0..tokens {
            let p = start as usize + t;
            if p >= capacity {
                break;
            }
            for h in 0..heads_kv {
                let dst = ((b * heads_kv + h) * capacity + p) * dim;
                let src = ((b * tokens + t) * heads_kv + h) * dim;
                out[dst..dst + dim].copy_from_slice(&new[src..][..dim]);
            }
        }
    }
    out
}

/// The append kernel for one cache type. Parameters: `k_new`, `v_new` (f32,
/// `[batch, tokens, heads_kv, dim]`), `k_cache`, `v_cache`, `positions` (u32 per
/// sequence: the row of its first token), `heads_kv`, `capacity`, `dim`, `tokens`,
/// `total` (batch * tokens * heads_kv * dim). A decode step is one token; a prompt's
/// keys and values go in with one launch.
#[derive(Clone, Copy, Debug)]
pub struct KvAppendKernel(pub FloatType);

/// The append kernel, contiguous or paged (`table` `[batch, max_pages]` of page ids into
/// a pool `[pool_pages, heads_kv, 2^page_shift, dim]`; see [`super::paged`]).
pub(super) fn build(name: &str, ty: FloatType, paged: bool) -> KernelIr {
    let mut b = KernelBuilder::new(name);
    b.overlap_neighbours();
    b.max_threads(THREADS);
    let k_new = b.param_ptr("k_new", PtxType::F32);
    let v_new = b.param_ptr("v_new", PtxType::F32);
    let k_cache = b.param_ptr("k_cache", ty.ptx());
    let v_cache = b.param_ptr("v_cache", ty.ptx());
    let positions = b.param_ptr("positions", PtxType::U32);
    let table = paged.then(|| b.param_ptr("table", PtxType::U32));
    let heads_kv = b.param_u32("heads_kv");
    let capacity = b.param_u32(if paged { "max_pages" } else { "capacity" });
    // Paged: the pool's last page and the rows per page as a shift and mask.
    let pages = table.map(|table| {
        let pool = b.param_u32("pool_pages");
        let shift = b.param_u32("page_shift");
        let last = b.sub(pool, 1u32);
        let one = b.mov(1u32);
        let size = b.shl(one, shift);
        let mask = b.sub(size, 1u32);
        (table, last, shift, mask)
    });
    let dim = b.param_u32("dim");
    let tokens = b.param_u32("tokens");
    let total = b.param_u32("total");
    let gid = global_index(&mut b);
    let stride = grid_threads(&mut b);
    let per_token = b.mul(heads_kv, dim);
    b.for_loop(gid, total, stride, false, |b, i| {
        // Element i of new[seq, t, head, e]: written at row positions[seq] + t.
        let token = b.div_int(i, per_token);
        let head_elem = b.rem(i, per_token);
        let seq = b.div_int(token, tokens);
        let t = b.rem(token, tokens);
        let pa = elem_addr(b, positions, seq, 4);
        let start = b.ld::<U32, U64>(Space::Global, pa, 0);
        let limit = match pages {
            Some((_, _, shift, _)) => b.shl(capacity, shift),
            None => capacity,
        };
        // start + t < limit, without the sum wrapping past 2^32.
        let starts_inside = b.setp::<U32>(Cmp::Lt, start, limit);
        let room = b.sub(limit, start);
        let fits = b.setp::<U32>(Cmp::Lt, t, room);
        let inside = b.and_pred(starts_inside, fits);
        let p = b.add(start, t);
        b.if_then(inside, false, |b| {
            // Row (seq * heads_kv + head) * capacity + p, element e; paged: row p & mask
            // of the head's part of page table[seq][p >> shift].
            let head = b.div_int(head_elem, dim);
            let e = b.rem(head_elem, dim);
            let row = match pages {
                None => {
                    let hrow = b.mad(seq, heads_kv, head);
                    b.mad(hrow, capacity, p)
                }
                Some((table, last, shift, mask)) => {
                    let slot = b.shr(p, shift);
                    let at = b.mad(seq, capacity, slot);
                    let ta = elem_addr(b, table, at, 4);
                    let page = b.ld::<U32, U64>(Space::Global, ta, 0);
                    let page = b.min(page, last);
                    let hrow = b.mad(page, heads_kv, head);
                    let base = b.shl(hrow, shift);
                    let within = b.and(p, mask);
                    b.add(base, within)
                }
            };
            let dst = b.mad(row, dim, e);
            for (new, cache) in [(k_new, k_cache), (v_new, v_cache)] {
                let sa = elem_addr(b, new, i, 4);
                let x = b.ld::<F32, U64>(Space::Global, sa, 0);
                let da = elem_addr(b, cache, dst, ty.bytes());
                store_elem(b, da, x, ty);
            }
        });
    });
    b.ret();
    b.finish()
}

impl Kernel for KvAppendKernel {
    fn name(&self) -> String {
        format!("trueno_kv_append_{}", self.0.name())
    }
    fn family(&self) -> Family {
        Family::Attention
    }
    fn build(&self) -> KernelIr {
        build(&self.name(), self.0, false)
    }
    /// `[batch * heads_kv * dim]`.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        check_dims(&self.name(), dims, 1)?;
        let blocks = blocks_for(&self.name(), dims[0], THREADS as usize, i32::MAX as u32)?;
        Ok(LaunchConfig::linear(blocks.min(4096), THREADS))
    }
}

/// The KV-cache kernels.
pub fn all() -> Vec<Box<dyn Kernel>> {
    FloatType::ALL
        .into_iter()
        .map(|t| Box::new(KvAppendKernel(t)) as Box<dyn Kernel>)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_writes_one_row_per_head_and_skips_full_caches() {
        let cache = vec![0.0f32; 2 * 2 * 3 * 2];
        let new: Vec<f32> = (1..=8).map(|x| x as f32).collect();
        let out = reference(&cache, &new, &[1, 3], (2, 3, 2), 1);
        // Sequence 0, heads 0 and 1, position 1; sequence 1 is at capacity.
        assert_eq!(&out[2..4], &[1.0, 2.0]);
        assert_eq!(&out[8..10], &[3.0, 4.0]);
        assert_eq!(out.iter().filter(|&&x| x != 0.0).count(), 4);
    }

    #[test]
    fn the_reference_writes_a_prompt_from_its_start_and_stops_at_capacity() {
        // One sequence, one head of 2, capacity 3, three tokens from position 1: the
        // first two land at rows 1 and 2, the third is past the cache.
        let cache = vec![0.0f32; 3 * 2];
        let new = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        let out = reference(&cache, &new, &[1], (1, 3, 2), 3);
        assert_eq!(out, vec![0.0, 0.0, 1.0, 2.0, 3.0, 4.0]);
    }
}
