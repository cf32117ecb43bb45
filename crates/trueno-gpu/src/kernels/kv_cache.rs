//! Appending one decode step's keys and values to a contiguous KV cache
//! (`[batch, heads_kv, capacity, dim]`, f32), at a position per sequence read from a
//! buffer, so a batch of sequences at different lengths appends in one launch.

use super::helpers::{elem_addr, global_index, grid_threads};
use super::{Family, Kernel, LaunchConfig, blocks_for, check_dims};
use crate::error::Result;
use crate::ptx::{Cmp, F32, KernelBuilder, KernelIr, PtxType, Space, U32, U64};

/// Threads per block.
pub const THREADS: u32 = 256;

/// CPU reference: `cache` with row `positions[b]` of every head of sequence `b` replaced
/// by `new[b, h, :]` (positions at or past `capacity` are left out).
pub fn reference(
    cache: &[f32],
    new: &[f32],
    positions: &[u32],
    (heads_kv, capacity, dim): (usize, usize, usize),
) -> Vec<f32> {
    let mut out = cache.to_vec();
    for (b, &p) in positions.iter().enumerate() {
        if p as usize >= capacity {
            continue;
        }
        for h in 0..heads_kv {
            let dst = ((b * heads_kv + h) * capacity + p as usize) * dim;
            out[dst..dst + dim].copy_from_slice(&new[(b * heads_kv + h) * dim..][..dim]);
        }
    }
    out
}

/// The append kernel. Parameters: `k_new`, `v_new` (`[batch, heads_kv, dim]`),
/// `k_cache`, `v_cache`, `positions` (u32 per sequence), `heads_kv`, `capacity`, `dim`,
/// `total` (batch * heads_kv * dim).
#[derive(Clone, Copy, Debug)]
pub struct KvAppendKernel;

fn build(name: &str) -> KernelIr {
    let mut b = KernelBuilder::new(name);
    b.max_threads(THREADS);
    let k_new = b.param_ptr("k_new", PtxType::F32);
    let v_new = b.param_ptr("v_new", PtxType::F32);
    let k_cache = b.param_ptr("k_cache", PtxType::F32);
    let v_cache = b.param_ptr("v_cache", PtxType::F32);
    let positions = b.param_ptr("positions", PtxType::U32);
    let heads_kv = b.param_u32("heads_kv");
    let capacity = b.param_u32("capacity");
    let dim = b.param_u32("dim");
    let total = b.param_u32("total");
    let gid = global_index(&mut b);
    let stride = grid_threads(&mut b);
    let per_seq = b.mul(heads_kv, dim);
    b.for_loop(gid, total, stride, false, |b, i| {
        let seq = b.div_int(i, per_seq);
        let head_elem = b.rem(i, per_seq);
        let pa = elem_addr(b, positions, seq, 4);
        let p = b.ld::<U32, U64>(Space::Global, pa, 0);
        let inside = b.setp::<U32>(Cmp::Lt, p, capacity);
        b.if_then(inside, false, |b| {
            // Row (seq * heads_kv + head) * capacity + p, element e.
            let head = b.div_int(head_elem, dim);
            let e = b.rem(head_elem, dim);
            let hrow = b.mad(seq, heads_kv, head);
            let row = b.mad(hrow, capacity, p);
            let dst = b.mad(row, dim, e);
            for (new, cache) in [(k_new, k_cache), (v_new, v_cache)] {
                let sa = elem_addr(b, new, i, 4);
                let x = b.ld::<F32, U64>(Space::Global, sa, 0);
                let da = elem_addr(b, cache, dst, 4);
                b.st::<F32, U64>(Space::Global, da, 0, x);
            }
        });
    });
    b.ret();
    b.finish()
}

impl Kernel for KvAppendKernel {
    fn name(&self) -> String {
        "trueno_kv_append_f32".into()
    }
    fn family(&self) -> Family {
        Family::Attention
    }
    fn build(&self) -> KernelIr {
        build(&self.name())
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
    vec![Box::new(KvAppendKernel)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_writes_one_row_per_head_and_skips_full_caches() {
        let cache = vec![0.0f32; 2 * 2 * 3 * 2];
        let new: Vec<f32> = (1..=8).map(|x| x as f32).collect();
        let out = reference(&cache, &new, &[1, 3], (2, 3, 2));
        // Sequence 0, heads 0 and 1, position 1; sequence 1 is at capacity.
        assert_eq!(&out[2..4], &[1.0, 2.0]);
        assert_eq!(&out[8..10], &[3.0, 4.0]);
        assert_eq!(out.iter().filter(|&&x| x != 0.0).count(), 4);
    }
}
