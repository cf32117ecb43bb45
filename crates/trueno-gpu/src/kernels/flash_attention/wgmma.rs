//! FlashAttention forward for Hopper (sm_90a): the same contract as the `mma.sync`
//! kernel (layouts, varlen, GQA, bottom-right causal mask, log-sum-exp), with both
//! products on warpgroup MMAs and the tiles moved by the bulk tensor copy engine.
//!
//! A block takes 64 query rows of one head per warpgroup (three warpgroups at head dim
//! 64, two above). Thread 0 asks the copy engine for the query tile once and for the
//! key/value tiles of the sequence into a ring of shared-memory stages (a transaction
//! barrier for the key tile's arrival, one for the value tile's, and an empty barrier a
//! stage; at head dim 64 one barrier for both tiles), refilling a stage as soon as every
//! warpgroup has released it. At head dims 128 and 256 it asks at the start for the
//! query tile and the first key/value tile only, and for the other stages once the
//! first scores are issued, so those arrive first, and the first scores wait for the
//! keys, not the values (a block's start is a large share of its time at 1K tokens;
//! `values_apart`). Each warpgroup computes `S = Q K^T` by `wgmma` with both operands
//! in shared memory (K k-major: a key's row is its k), the online softmax on the
//! accumulators, then `O += P V` by `wgmma` with the
//! probabilities as a register A fragment (the score accumulators' layout is that
//! fragment's, as with `mma.sync`) and V n-major (transposed by the product). Tile
//! `j`'s scores and tile `j - 1`'s `P V` are issued back to back, so the tensor cores
//! work on the second while the first's softmax runs (FlashAttention-3's overlap
//! within a warpgroup). The copies land in the 128-byte swizzled layout the
//! descriptors describe: boxes of 64 columns (128 bytes), rows of a box 128 bytes
//! apart, 8-row groups 1024.
//!
//! At head dim 128 (`prefetch_next_queries`) thread 0 also asks L2 for the query tile of
//! the block a wave later (`prefetch_later_queries`): keys and values are shared by a
//! head's query tiles and mostly found in L2, a query tile is read by its block alone.
//!
//! Q, K and V are read through 2-D tensor maps of `[tokens, heads * dim]`: a head's
//! 64-column box is at `x = head * dim + 64 j`, a tile's rows at the sequence's tokens.
//! Rows past the tensor's end arrive as zeros; rows past a sequence but inside the
//! tensor (the next sequence's) are masked out of the scores and, in the one value tile
//! that reaches them, zeroed before the product, so no other sequence's values (even
//! non-finite ones) reach an output.

use super::HalfType;
use super::rows::{
    BlockTile, Frags, OutRows, Params, block_tile, grouped_order, online_softmax,
    prefetch_later_queries, probs_a, rescale, store_rows,
};
use crate::error::Result;
use crate::kernels::gemm_wgmma_block::{EMPTY, FULL, Ring, descriptor};
use crate::kernels::{Family, Kernel, LaunchConfig};
use crate::ptx::{Cmp, F32, KernelBuilder, KernelIr, Reg, Space, Target, U32, U64};

use super::wgmma_shape::{ALIGN, VALUES_FULL, layout, values_apart};
pub use super::wgmma_shape::{
    BOX_COLS, SHORT_SEQ, block_rows, keys_per_tile, shared_bytes, threads, warpgroups,
};

/// The Hopper forward kernel for one input type, head dimension and warpgroup count
/// (64 query rows each; [`warpgroups`] unless a short-sequence variant): parameters
/// `map_q`, `map_k`, `map_v` (tensor maps of `[tokens, heads * dim]` in boxes of
/// [`block_rows`] (Q) or [`keys_per_tile`] (K, V) rows x [`BOX_COLS`]), then those of
/// [`FlashAttentionKernel`](super::FlashAttentionKernel) from `out` on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlashAttentionWgmmaKernel(pub HalfType, pub u32, pub u32);

impl FlashAttentionWgmmaKernel {
    /// The kernel for head dim `dim` with its usual warpgroup count.
    pub fn new(ty: HalfType, dim: u32) -> Self {
        FlashAttentionWgmmaKernel(ty, dim, warpgroups(dim))
    }

    /// The kernel `Stream::flash_attention` runs for query sequences of at most
    /// `max_seqlen_q` tokens: two warpgroups at head dim 64 up to [`SHORT_SEQ`].
    pub fn for_sequences(ty: HalfType, dim: u32, max_seqlen_q: usize) -> Self {
        match dim == 64 && max_seqlen_q <= SHORT_SEQ {
            true => FlashAttentionWgmmaKernel(ty, dim, 2),
            false => Self::new(ty, dim),
        }
    }

    /// Query rows a block.
    pub fn block_rows(&self) -> u32 {
        block_rows(self.2)
    }
}

impl Kernel for FlashAttentionWgmmaKernel {
    fn name(&self) -> String {
        let (ty, dim, wg) = (self.0.name(), self.1, self.2);
        match wg == warpgroups(dim) {
            true => format!("trueno_flash_attn_wgmma_{ty}_d{dim}"),
            false => format!("trueno_flash_attn_wgmma_{ty}_d{dim}_wg{wg}"),
        }
    }
    fn family(&self) -> Family {
        Family::FlashAttentionWgmma
    }
    fn build(&self) -> KernelIr {
        build(&self.name(), self.0, self.1, self.2)
    }
    fn targets(&self) -> &'static [Target] {
        &[Target::Sm90a]
    }
    /// `[max_seqlen_q, heads_q, batch]`.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        let (dim, wg) = (self.1, self.2);
        // Two warpgroups at every dim; three only at 64 (registers: 158 a thread fit 384
        // threads, 195 at 128 do not).
        if !(wg == 2 || (wg == 3 && dim == 64)) {
            return crate::error::shape_err(
                &self.name(),
                format!("{wg} warpgroups at head dim {dim} (2, or 3 at head dim 64)"),
            );
        }
        let block = (block_rows(wg), threads(wg), shared_bytes(dim, wg));
        super::launch(&self.name(), dims, block)
    }
}

/// Whether a block asks L2 for the query tile of the block a wave after it. A block
/// waits at its start for its query tile, the one operand no other block has brought
/// into L2: 11% of the warps' stall samples at causal 1K x 128 (Nsight Compute, H200).
/// Measured on an H200 (2026-11-28, three calls alternating with and without): head dim
/// 128 at 1K 1.025-1.049x (causal 1.026-1.027x: 350-357 -> 358-366 TFLOP/s), 4K and
/// 16K 0.99-1.02x on GPU time; head dim 256 at 1K 0.984x, so 128 only (64 takes the
/// grid's order, which `tile_of_rank` does not describe).
fn prefetch_next_queries(dim: u32) -> bool {
    dim == 128 && grouped_order(dim)
}

/// Every Hopper FlashAttention configuration.
pub fn all() -> Vec<Box<dyn Kernel>> {
    let mut v: Vec<Box<dyn Kernel>> = Vec::new();
    for t in [HalfType::Bf16, HalfType::F16] {
        for d in super::HEAD_DIMS {
            v.push(Box::new(FlashAttentionWgmmaKernel::new(t, d)));
        }
        v.push(Box::new(FlashAttentionWgmmaKernel::for_sequences(
            t, 64, SHORT_SEQ,
        )));
    }
    v
}

fn build(name: &str, ty: HalfType, dim: u32, wg: u32) -> KernelIr {
    let bn = keys_per_tile(dim);
    let boxes = dim / BOX_COLS;
    let (q_bytes, kv_bytes, stages) = layout(dim, wg);
    let stage_bytes = 2 * kv_bytes;
    let pt = ty.ptx();
    let mut b = KernelBuilder::new(name);
    let (threads, block_rows) = (threads(wg), block_rows(wg));
    b.max_threads(threads);
    b.min_blocks(1);
    let map_q = b.param_tensor_map("map_q");
    let map_k = b.param_tensor_map("map_k");
    let map_v = b.param_tensor_map("map_v");
    let Params {
        out: go,
        cu_q,
        cu_k,
        total_q,
        total_k,
        heads_q,
        heads_kv: _,
        group,
        scale_log2,
        causal,
    } = Params::declare(&mut b, pt);
    // Shared memory: the query tile, the stages, then q_full and the ring's barriers.
    let raw = b.dynamic_shared();
    let q_tile = b.add(raw, ALIGN - 1);
    let q_tile = b.and(q_tile, !(ALIGN - 1));
    let stage0 = b.add(q_tile, q_bytes);
    let bars = b.add(stage0, stages * stage_bytes);
    let ring_bars = b.add(bars, 8u32);

    let BlockTile {
        h,
        hk,
        q_start,
        k_start,
        q0,
        limits,
        keys_needed,
        done,
    } = block_tile(
        &mut b,
        (cu_q, cu_k),
        (total_q, total_k),
        (group, causal),
        (block_rows, dim),
    );
    let len_q = limits.len_q;
    let len_k = limits.len_k;
    let n_tiles = b.add(keys_needed, bn - 1);
    let n_tiles = match bn.is_power_of_two() {
        true => b.shr(n_tiles, bn.trailing_zeros()),
        false => b.div_int(n_tiles, bn),
    };

    let t = b.tid_x();
    let kv_x = b.mul(hk, dim);
    // A stage's `VALUES_FULL` barrier from its `FULL` one (`Ring::barrier`'s layout).
    let values_full =
        move |b: &mut KernelBuilder, full: Reg<U32>| b.add(full, 8 * stages * (VALUES_FULL - FULL));
    let apart = values_apart(dim);
    // Asks the copy engine for key/value tile `kt` into the stage at byte offset
    // `stage`: both complete barrier `full`, or with `apart` the keys `full` and the
    // values its `VALUES_FULL`.
    let issue_tile = |b: &mut KernelBuilder, kt: Reg<U32>, stage: Reg<U32>, full: Reg<U32>| {
        let vfull = match apart {
            true => {
                b.mbar_arrive_expect_tx(full, 0, kv_bytes);
                let vfull = values_full(b, full);
                b.mbar_arrive_expect_tx(vfull, 0, kv_bytes);
                vfull
            }
            false => {
                b.mbar_arrive_expect_tx(full, 0, stage_bytes);
                full
            }
        };
        let dst = b.add(stage0, stage);
        let y = b.mad(kt, bn, k_start);
        for (m, map) in [map_k, map_v].into_iter().enumerate() {
            for j in 0..boxes {
                let d = b.add(dst, m as u32 * kv_bytes + j * bn * 128);
                let x = b.add(kv_x, j * BOX_COLS);
                b.tma_load_2d(d, map, x, y, if m == 0 { full } else { vfull });
            }
        }
    };
    // Tiles `from..min(n_tiles, stages)`, each into its own stage (the ring's start).
    let issue_stages = |b: &mut KernelBuilder, from: u32| {
        let end = b.min(n_tiles, stages);
        b.for_loop(from, end, 1u32, false, |b, kt| {
            let stage = b.mul(kt, stage_bytes);
            let full = b.mad(kt, 8u32, ring_bars);
            issue_tile(b, kt, stage, full);
        });
    };
    let ring = Ring::new(&mut b, ring_bars, stages, stage_bytes);
    let issuer = b.setp::<U32>(Cmp::Eq, t, 0u32);
    // Thread 0 sets up the barriers and asks for the query tile and the first stages'
    // tiles; it refills each stage once every warpgroup is done with it (below).
    b.if_then(issuer, false, |b| {
        b.mbar_init(bars, 0, 1);
        for s in 0..stages {
            b.mbar_init(ring_bars, 8 * s as i64, 1);
            b.mbar_init(ring_bars, 8 * (stages + s) as i64, threads / 32);
            if apart {
                b.mbar_init(ring_bars, 8 * (VALUES_FULL * stages + s) as i64, 1);
            }
        }
        b.fence_mbar_init();
        b.mbar_arrive_expect_tx(bars, 0, q_bytes);
        let q_y = b.add(q_start, q0);
        let q_x = b.mul(h, dim);
        for j in 0..boxes {
            let dst = b.add(q_tile, j * block_rows * 128);
            let x = b.add(q_x, j * BOX_COLS);
            b.tma_load_2d(dst, map_q, x, q_y, bars);
        }
        match apart {
            true => {
                let (any, zero) = (b.setp::<U32>(Cmp::Gt, n_tiles, 0u32), b.mov(0u32));
                b.if_then(any, false, |b| issue_tile(b, zero, zero, ring_bars));
            }
            false => issue_stages(b, 0),
        }
    });
    b.bar_sync();
    if prefetch_next_queries(dim) {
        let issuer = b.setp::<U32>(Cmp::Eq, t, 0u32);
        prefetch_later_queries(&mut b, issuer, (map_q, cu_q), (block_rows, dim, BOX_COLS));
    }

    // ---- each warpgroup: 64 query rows -----------------------------------------------
    let c = b.shr(t, 7u32);
    let lane = b.and(t, 31u32);
    let warp = b.shr(t, 5u32);
    let warp = b.and(warp, 3u32);
    let g = b.shr(lane, 2u32);
    let tq = b.and(lane, 3u32);
    let first_row = b.mad(c, 64u32, q0);
    let row_base = b.mad(warp, 16u32, first_row);
    let row_base = b.add(row_base, g);
    let first_lim = limits.lim(&mut b, first_row);
    let col0 = b.shl(tq, 1u32);
    let zero = b.mov(0u32);
    b.mbar_wait(bars, zero);

    // Descriptors (addresses in 16-byte units): this warpgroup's 64 rows of Q (8 KiB a
    // warpgroup into each box of the block's rows), K k-major (`bn` rows a box), V n-major (its boxes of 64
    // columns `bn` k-rows apart; a k16 step is 16 k-rows, 2048 bytes).
    let q_rows = b.mad(c, 64 * 128, q_tile);
    let q_desc = descriptor(&mut b, q_rows, 16);
    let k_desc0 = descriptor(&mut b, stage0, 16);
    let v_tile0 = b.add(stage0, kv_bytes);
    let v_desc0 = descriptor(&mut b, v_tile0, bn * 128);
    // Predicates are few (seven in hardware): the loop's are made where they are used.
    let neg_inf = f32::NEG_INFINITY;
    let m_run: Vec<Reg<F32>> = (0..2).map(|_| b.mov(neg_inf)).collect();
    let l_run: Vec<Reg<F32>> = (0..2).map(|_| b.mov(0.0f32)).collect();
    let frags = |b: &mut KernelBuilder, cols: u32| -> Frags {
        vec![
            (0..cols / 8)
                .map(|_| std::array::from_fn(|_| b.mov(0.0f32)))
                .collect(),
        ]
    };
    let acc = frags(&mut b, dim);
    let s = frags(&mut b, bn);
    let flat = |f: &Frags| -> Vec<Reg<F32>> { f[0].iter().flatten().copied().collect() };
    let (acc_regs, s_regs) = (flat(&acc), flat(&s));
    let chunks_per_row = dim / 8;

    // Tile kt's scores: waits for its stage, issues `S = Q K^T` over dim / 16 k-steps
    // (the first overwrites S) and commits them as one group.
    let issue_scores = |b: &mut KernelBuilder| {
        let full = ring.barrier(b, FULL);
        b.mbar_wait(full, ring.phase);
        let offset = b.shr(ring.stage, 4u32);
        let offset = b.cvt::<U64, U32>(offset, None);
        let k_desc = b.add(k_desc0, offset);
        let (yes, no) = (b.setp::<U32>(Cmp::Eq, t, t), b.setp::<U32>(Cmp::Ne, t, t));
        for ks in 0..dim / 16 {
            let (bx, within) = (ks / 4, (ks % 4) * 32);
            let qd = b.add(q_desc, ((bx * block_rows * 128 + within) / 16) as u64);
            let kd = b.add(k_desc, ((bx * bn * 128 + within) / 16) as u64);
            b.wgmma(pt, false, &s_regs, qd, kd, if ks == 0 { no } else { yes });
        }
        b.wgmma_commit();
    };
    // Tile kt's softmax once its scores are in: the masks where it reaches past a row's
    // last key, then the running max and sum; returns the output's corrections.
    let softmax = |b: &mut KernelBuilder, kt: Reg<U32>| {
        let first_key = b.mul(kt, bn);
        let tile_end = b.add(first_key, bn);
        let partial = b.setp::<U32>(Cmp::Gt, tile_end, first_lim);
        let key0 = b.add(first_key, col0);
        b.if_then(partial, false, |b| limits.mask(b, &s, row_base, key0));
        online_softmax(b, &s, (&m_run, &l_run), scale_log2)
    };
    // The value rows of tile kt's keys past the sequence (the next sequence's tokens, or
    // zeros past the tensor) are zeroed by the warpgroups together before any
    // multiplies them (once they have landed): a probability of 0 times a non-finite
    // value is NaN.
    let zero_value_tail = |b: &mut KernelBuilder, kt: Reg<U32>| {
        let first_key = b.mul(kt, bn);
        let tile_end = b.add(first_key, bn);
        let past_seq = b.setp::<U32>(Cmp::Gt, tile_end, len_k);
        b.if_then(past_seq, true, |b| {
            if apart {
                let vfull = ring.barrier(b, VALUES_FULL);
                b.mbar_wait(vfull, ring.phase);
            }
            let valid = b.sub(len_k, first_key);
            let rows_left = b.sub(bn, valid);
            let chunks = b.mul(rows_left, chunks_per_row);
            let v_tile = b.add(v_tile0, ring.stage);
            let zeros: Vec<Reg<U32>> = (0..4).map(|_| b.mov(0u32)).collect();
            b.for_loop(t, chunks, threads, false, |b, i| {
                let r = b.shr(i, chunks_per_row.trailing_zeros());
                let r = b.add(r, valid);
                let ch = b.and(i, chunks_per_row - 1);
                let bx = b.shr(ch, 3u32);
                let c8 = b.and(ch, 7u32);
                let sw = b.and(r, 7u32);
                let c8 = b.xor(c8, sw);
                let at = b.mad(bx, bn * 128, v_tile);
                let at = b.mad(r, 128u32, at);
                let at = b.mad(c8, 16u32, at);
                b.st_vec(Space::Shared, at, 0, &zeros);
            });
            b.fence_proxy_async();
            b.bar_sync();
        });
    };
    // The probabilities of 16 keys a k-step as register A fragments.
    let pack = |b: &mut KernelBuilder| -> Vec<[Reg<U32>; 4]> {
        (0..(bn / 16) as usize)
            .map(|kk| probs_a(b, pt, &s, kk)[0])
            .collect()
    };
    // `O += P V` for the tile of stage `prev` (byte offset, barriers, phase) once its
    // values have landed, one group.
    let issue_values = |b: &mut KernelBuilder, p: &[[Reg<U32>; 4]], prev: [Reg<U32>; 4]| {
        let [stage, full, _, phase] = prev;
        if apart {
            let vfull = values_full(b, full);
            b.mbar_wait(vfull, phase);
        }
        let offset = b.shr(stage, 4u32);
        let offset = b.cvt::<U64, U32>(offset, None);
        let v_desc = b.add(v_desc0, offset);
        let yes = b.setp::<U32>(Cmp::Eq, t, t);
        for (kk, a) in p.iter().enumerate() {
            let vd = b.add(v_desc, (kk as u32 * 2048 / 16) as u64);
            b.wgmma_rs(pt, true, &acc_regs, *a, vd, yes);
        }
        b.wgmma_commit();
    };
    // Releases the stage of tile `kt` (its products done); thread 0 refills it with tile
    // kt + stages once every warpgroup has.
    let release = |b: &mut KernelBuilder, kt: Reg<U32>, prev: [Reg<U32>; 4]| {
        let [stage, full, empty, phase] = prev;
        let lane0 = b.setp::<U32>(Cmp::Eq, lane, 0u32);
        b.predicated(lane0, |b| b.mbar_arrive(empty, 0));
        let next = b.add(kt, stages);
        let more = b.setp::<U32>(Cmp::Lt, next, n_tiles);
        let issuer = b.setp::<U32>(Cmp::Eq, t, 0u32);
        let refill = b.and_pred(more, issuer);
        b.if_then(refill, false, |b| {
            b.mbar_wait(empty, phase);
            issue_tile(b, next, stage, full);
        });
    };

    // Tile 0 alone; then each step issues tile kt's scores and tile kt - 1's `P V`
    // back to back, so the tensor cores take the second while the scores' softmax
    // waits on the first (FlashAttention-3's overlap within a warpgroup).
    let has_tiles = b.setp::<U32>(Cmp::Gt, n_tiles, 0u32);
    let p: Vec<[Reg<U32>; 4]> = (0..(bn / 16) as usize)
        .map(|_| std::array::from_fn(|_| b.mov(0u32)))
        .collect();
    let prev = [b.mov(0u32), b.mov(0u32), b.mov(0u32), b.mov(0u32)];
    // After tile kt's softmax, value tail and rescale: its probabilities packed for the
    // next step's `P V`, its stage and barriers kept as `prev`.
    let close_tile = |b: &mut KernelBuilder| {
        for (d, x) in p.iter().zip(pack(b)) {
            for (d, x) in d.iter().zip(x) {
                b.assign(*d, x);
            }
        }
        let full = ring.barrier(b, FULL);
        let empty = ring.barrier(b, EMPTY);
        for (d, x) in prev.iter().zip([ring.stage, full, empty, ring.phase]) {
            b.assign(*d, x);
        }
        ring.advance(b);
    };
    b.if_then(has_tiles, true, |b| {
        b.wgmma_fence();
        issue_scores(b);
        if apart {
            // Now the other stages' tiles, behind the first.
            let issuer = b.setp::<U32>(Cmp::Eq, t, 0u32);
            b.if_then(issuer, false, |b| issue_stages(b, 1));
        }
        b.wgmma_wait(0);
        let (corrs, same) = softmax(b, zero);
        rescale(b, &acc, &corrs, same);
        zero_value_tail(b, zero);
        close_tile(b);
    });
    let held: Vec<Reg<U32>> = p.iter().flatten().copied().collect();
    b.for_loop(1u32, n_tiles, 1u32, true, |b, kt| {
        b.wgmma_fence();
        issue_scores(b);
        issue_values(b, &p, prev);
        b.wgmma_wait_holding(1, &held);
        let (corrs, same) = softmax(b, kt);
        // The value tail's branch also ends the softmax's basic block: in one block with
        // the wait for `P V`, ptxas scheduled that wait above the softmax (nothing
        // overlapped it); across the branch the softmax runs while `P V` does.
        zero_value_tail(b, kt);
        b.wgmma_wait_holding(0, &held);
        let prev_kt = b.sub(kt, 1u32);
        release(b, prev_kt, prev);
        rescale(b, &acc, &corrs, same);
        close_tile(b);
    });
    // The last tile's `P V`.
    let has_tiles = b.setp::<U32>(Cmp::Gt, n_tiles, 0u32);
    b.if_then(has_tiles, true, |b| {
        b.wgmma_fence();
        issue_values(b, &p, prev);
        b.wgmma_wait_holding(0, &held);
    });

    let q_stride = b.mul(heads_q, dim * 2);
    let rows = OutRows {
        out: go,
        head: h,
        q_start,
        len_q,
        total_q,
        q_stride,
        row_bytes: dim * 2,
        row_base,
        tq,
    };
    store_rows(&mut b, pt, &acc, (&m_run, &l_run), &rows);
    b.place(done);
    b.ret();
    b.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptx::{compile, emit_module};

    #[test]
    fn blocks_launch_with_their_warpgroups_rows() {
        let launch = |k: FlashAttentionWgmmaKernel| k.launch_config(&[1000, 12, 3]).unwrap();
        let c = launch(FlashAttentionWgmmaKernel::new(HalfType::Bf16, 128));
        assert_eq!((c.grid, c.block.0), ((8, 12, 3), 256));
        let c = launch(FlashAttentionWgmmaKernel::new(HalfType::Bf16, 64));
        assert_eq!((c.grid, c.block.0), ((6, 12, 3), 384));
    }

    #[test]
    fn head_dim_64_takes_two_warpgroups_for_sequences_up_to_1k() {
        let short = FlashAttentionWgmmaKernel::for_sequences(HalfType::F16, 64, 1024);
        assert_eq!(short, FlashAttentionWgmmaKernel(HalfType::F16, 64, 2));
        assert_eq!(short.name(), "trueno_flash_attn_wgmma_f16_d64_wg2");
        let c = short.launch_config(&[1000, 12, 3]).unwrap();
        assert_eq!(
            (c.grid, c.block.0, c.shared_bytes),
            ((8, 12, 3), 256, 148_552)
        );
        let long = FlashAttentionWgmmaKernel::for_sequences(HalfType::F16, 64, 1025);
        assert_eq!(long, FlashAttentionWgmmaKernel::new(HalfType::F16, 64));
        assert_eq!(long.name(), "trueno_flash_attn_wgmma_f16_d64");
        for dim in [128, 256] {
            let k = FlashAttentionWgmmaKernel::for_sequences(HalfType::F16, dim, 1);
            assert_eq!(k, FlashAttentionWgmmaKernel::new(HalfType::F16, dim));
        }
        for (dim, wg) in [(128, 3), (64, 1), (64, 4), (256, 3)] {
            let k = FlashAttentionWgmmaKernel(HalfType::F16, dim, wg);
            assert!(k.launch_config(&[1000, 12, 3]).is_err(), "{dim} x {wg}");
        }
    }

    #[test]
    fn the_kernel_multiplies_on_warpgroup_products_from_registers_and_shared_memory() {
        let k = compile(FlashAttentionWgmmaKernel::new(HalfType::F16, 128).build()).unwrap();
        let text = emit_module(Target::Sm90a, &[k]);
        // S: 64 x 128 x 16 from two descriptors; O: 64 x 128 x 16 with A in four
        // registers and V transposed, 128 / 16 products where the loop issues them and
        // as many for the last tile after it.
        assert!(text.contains("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"));
        let rs = text
            .lines()
            .filter(|l| l.contains("wgmma.mma_async") && l.contains("}, {%r"))
            .count();
        assert_eq!(rs, 2 * 128 / 16, "{text}");
        assert!(text.contains("cp.async.bulk.tensor.2d"));
    }

    #[test]
    fn head_dim_128_asks_l2_for_the_query_tile_of_the_block_a_wave_later() {
        let text = |dim| {
            let k = compile(FlashAttentionWgmmaKernel::new(HalfType::Bf16, dim).build()).unwrap();
            emit_module(Target::Sm90a, &[k])
        };
        let prefetches = |t: &str| {
            t.lines()
                .filter(|l| l.contains("cp.async.bulk.prefetch.tensor.2d.L2.global.tile"))
                .count()
        };
        // One prefetch a 64-column box of the 128-row query tile, a wave (the
        // multiprocessors) later in launch order.
        let t128 = text(128);
        assert_eq!(prefetches(&t128), 128 / 64, "{t128}");
        assert!(t128.contains("%nsmid"));
        for dim in [64, 256] {
            assert_eq!(prefetches(&text(dim)), 0, "head dim {dim}");
        }
    }

    #[test]
    fn head_dim_256_scores_80_keys_a_tile() {
        let k = compile(FlashAttentionWgmmaKernel::new(HalfType::Bf16, 256).build()).unwrap();
        let text = emit_module(Target::Sm90a, &[k]);
        // S: 64 x 80 over 256 / 16 k-steps, for the first tile and in the loop; O: 64 x
        // 256 over 80 / 16 k-steps of the probabilities, in the loop and after it.
        let count = |pat: &str| text.lines().filter(|l| l.contains(pat)).count();
        assert_eq!(
            count("wgmma.mma_async.sync.aligned.m64n80k16.f32.bf16.bf16"),
            2 * 16
        );
        assert_eq!(
            count("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16"),
            2 * 5
        );
    }
}
