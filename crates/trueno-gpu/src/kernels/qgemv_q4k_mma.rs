//! Q4_K and Q5_K weights against a batch of Q8_K activation vectors on the integer tensor
//! cores (`mma.sync.m16n8k32.s8`): a block's 16 rows are the product's M, the batch's (up
//! to) eight vectors its N, and each 32-weight sub-block one k32 step. Why: past two
//! vectors the `dp4a` batch kernel ([`super::qgemv_dp4a::QgemvQ8kBatchKernel`]) is bound by
//! its own instructions (each vector's products one after another in the lane), where one
//! `mma` does a sub-block of sixteen rows for all eight vectors.
//!
//! A block of eight warps takes 16 rows; warp `w` takes super-blocks `w, w + 8, ...` and
//! the eight warps' sums meet in shared memory. The 16- and 32-vector kernels
//! ([`VectorTiles`]) multiply each unpacked A fragment by two or four tiles of eight
//! vectors. From four vectors ([`ActLoads`]) the activations go through shared memory
//! (the staged formats' copies): read straight, each warp load of B fragments took eight
//! vectors' 32-byte runs from eight cache lines, and Nsight Compute (H200) had the L1
//! 81-87% busy with DRAM at 26-52%. What is left at 32 vectors: every 16-row tile reads
//! all the batch's activations (3.5 times its Q4_K weight bytes), one block a
//! multiprocessor. Lane `4g + t` loads rows `g` and `g + 8` of the tile and vector `g` of
//! the batch: of each 32-byte run of quant bytes (the low nibbles sub-block `2i`, the
//! high ones `2i + 1`) bytes `8t..8t + 8`, and the same eight activation bytes of each
//! sub-block, as the A and B fragments' two k runs (the product sums over k, so any
//! placement of k serves that both operands share). Per sub-block:
//! `P = A B` exactly in s32, scaled by the rows' 6-bit scales into the super-block's
//! integer sum; the min term `m * sum(a)` is a second product whose A is each row's min
//! repeated in every byte, accumulated over the super-block with no scaling. Then, per
//! super-block, `dx * (d * isum - dmin * msum)` in f32 (GGML's `dot_q8` arithmetic). A
//! super-block's weight loads all leave before its first product (`PIN_LOADS`).
//!
//! The kernel type for every format ([`QgemvQ8kMmaKernel`]) and the batch routing
//! ([`BatchPath`]) are in qgemv_mma_batch.rs (re-exported here); the formats whose
//! blocks are only 2-byte aligned (Q6_K, whose scales also change every 16 weights, Q8_0
//! and Q4_0) copy the same tiles into shared memory first: qgemv_mma_staged.rs,
//! qgemv_q6k_mma.rs, qgemv_block32_mma.rs.
//!
//! Q5_K is the same product with each quant's fifth bit put in before the `mma`: the lane
//! also loads bytes `8t..8t + 8` of the super-block's 32 bytes of `qh`, whose bit `j` is
//! bit 4 of the same eight weights of sub-block `j`. Its quants then run 0..32, still
//! signed bytes.

use super::qgemv_dp4a::{Q8kParams, q8k_params};
use super::qgemv_k::{self, half_of};
pub use super::qgemv_mma_batch::{
    ActLoads, BatchPath, DIRECT_UP_TO, MMA_MAX_BATCH, QgemvQ8kMmaKernel, VectorTiles,
    mma_from_vectors,
};
use super::qgemv_mma_staged::{self as staged, FragmentReads};
use crate::ptx::{Cmp, F32, KernelBuilder, KernelIr, Reg, Rounding, S32, Space, U32, U64};

/// Rows a block: the product's M.
pub(super) const TILE_ROWS: u32 = 16;
/// Warps a block, each taking every `WARPS`-th super-block. A warp's loads of one
/// super-block are all it has in flight, so the rows' super-blocks are spread wide: on an
/// H200 (eight vectors, GPU time, before the loads were pinned), four warps took 11.7 /
/// 16.5 / 34.5 / 37.6 us at 4096x4096 / 14336x4096 / 4096x14336 / 32000x4096, eight 8.1 /
/// 18.4 / 20.7 / 32.3, sixteen 7.8 / 21.4 / 21.4 / 45.9; two super-blocks' loads a step
/// (eight warps) ran 1.00-1.04x slower.
pub(super) const WARPS: u32 = 8;
/// Whether a super-block's loads end a basic block of their own
/// ([`qgemv_k::end_block`]): ptxas otherwise sinks them among the products, each waiting
/// for the one before. H200, GPU time, eight vectors at 4096x4096 / 14336x4096 /
/// 4096x14336 / 32000x4096: 8.7 / 18.2 / 20.8 / 32.5 us -> 8.7-8.9 / 16.4 / 18.5 / 29.0,
/// two vectors 6.9 / 15.5 / 17.3 / 28.1 -> 6.5 / 13.3 / 14.6 / 24.5 (77-80 registers
/// against 70-72).
const PIN_LOADS: bool = true;
/// How the lanes read their B fragments from a stage of activations: eight bytes at
/// `8t`, the same eight of each sub-block's run as the A fragment's quants.
pub(super) const ACT_READS: FragmentReads = FragmentReads::Pairs;
/// Threads a block.
pub(super) const THREADS: u32 = 32 * WARPS;
/// The vectors of one product: its N.
pub(super) const VECTORS: u32 = 8;

/// The lane's pointers at super-block 0: both rows' headers, its quant runs' offset from
/// them (and, for Q5_K, where its fifth bits sit from its quant run: an immediate, where
/// a register pointer spilled on sm_80).
struct Ptrs {
    heads: [Reg<U64>; 2],
    quants: Reg<U64>,
    fifth: Option<i64>,
}

/// Where the thread sits: its index in the block, warp, `g` and `t` of lane `4g + t`, and
/// the block's tile of rows.
pub(super) struct Place {
    pub tid: Reg<U32>,
    pub warp: Reg<U32>,
    pub g: Reg<U32>,
    pub t: Reg<U32>,
    pub tile: Reg<U32>,
}

/// One lane's loads of one super-block: both rows' headers and quant runs (and Q5_K's
/// fifth bits of those eight positions).
struct Loads {
    head: [[Reg<U32>; 4]; 2],
    quants: [[[Reg<U32>; 2]; 4]; 2],
    fifth: Option<[[Reg<U32>; 2]; 2]>,
}

/// Where the lane reads a stage of activations: its vector `g` of each tile, `8t` bytes
/// into each sub-block's run, and its outputs' two scales (vectors `2t`, `2t + 1`).
#[derive(Clone, Copy)]
struct ActReads {
    act: Reg<U32>,
    dx: Reg<U32>,
}

/// The direct kernel's activation offsets (one tile): its vector's quants and its
/// outputs' two scales, in bytes from `aq` and `ad` at super-block 0.
struct DirectAct {
    aq: Reg<U64>,
    act: Reg<U32>,
    ad: Reg<U64>,
    dx: [Reg<U32>; 2],
}

/// Where a super-block's B fragments and activation scales are: loaded with its weights
/// (the direct kernel), or in a stage of shared memory.
enum Acts {
    Loaded {
        runs: [[Reg<U32>; 2]; 8],
        dx: [Reg<F32>; 2],
    },
    Staged(Reg<U32>, ActReads),
}

/// What every tensor-core batch kernel starts with: the batch parameters, the vector
/// count, the thread's place and lane, the last row and vector.
pub(super) struct Frame {
    pub params: Q8kParams,
    pub vectors: Reg<U32>,
    pub at: Place,
    pub lane: Reg<U32>,
    pub last: Reg<U32>,
    pub last_v: Reg<U32>,
}

/// A kernel of [`THREADS`] threads with the batch kernels' parameters (the sums of 16 go
/// unread: the K-quants' min term is a product of its own), and where its thread sits.
pub(super) fn frame(b: &mut KernelBuilder) -> Frame {
    b.max_threads(THREADS);
    let params = q8k_params(b, true);
    let vectors = params.vectors.expect("a batched kernel's vector count");
    b.allow_next_grid();
    let tid = b.tid_x();
    let warp = b.shr(tid, 5u32);
    let lane = b.and(tid, 31u32);
    let at = Place {
        tid,
        warp,
        g: b.shr(lane, 2u32),
        t: b.and(lane, 3u32),
        tile: b.ctaid_x(),
    };
    Frame {
        last: b.sub(params.rows, 1u32),
        last_v: b.sub(vectors, 1u32),
        params,
        vectors,
        at,
        lane,
    }
}

/// The kernel of `nt` tiles of vectors, its activations copied into shared memory
/// (`staged_act`) or loaded straight with the weights (one tile).
pub(super) fn build(name: String, five_bit: bool, nt: usize, staged_act: bool) -> KernelIr {
    assert!(staged_act || nt == 1, "the direct kernel takes one tile");
    let mut b = KernelBuilder::new(name);
    let fr = frame(&mut b);
    let params = &fr.params;
    let (w, y) = (params.w, params.y);
    let (rows, blocks, vectors) = (params.rows, params.blocks, fr.vectors);
    let Place {
        warp, g, t, tile, ..
    } = fr.at;
    let row0 = b.mad(tile, TILE_ROWS, g);
    // Rows past the last load the last one (their sums are never stored).
    let last = fr.last;
    let (bb, qs_at) = qgemv_k::layout(five_bit);
    let row_bytes = b.mul(blocks, bb);
    let t8 = b.shl(t, 3u32);
    let lane_q = b.add(t8, qs_at);
    let row_ptr = |b: &mut KernelBuilder, extra: u32| {
        let r = b.add(row0, extra);
        let r = b.min(r, last);
        let off = b.mul_wide(r, row_bytes);
        b.add(w, off)
    };
    let heads = [row_ptr(&mut b, 0), row_ptr(&mut b, 8)];
    // The quant runs' offset from a super-block's start (a pointer a row would cost two
    // registers each: on sm_80 ptxas then spilled at its 64-register cap).
    let quants = b.cvt::<U64, U32>(lane_q, None);
    // Q5_K's `qh` (after the header's 16 bytes): the same eight positions.
    let fifth = five_bit.then_some(16 - i64::from(qs_at));
    if !staged_act {
        return build_direct(b, &fr, (heads, quants, fifth), bb, (row0, t8));
    }
    // The activations go through shared memory: copied in 16-byte chunks (each warp
    // load of B fragments straight from global memory read eight vectors' runs from
    // eight cache lines, and kept the L1 81-87% busy), two stages a warp.
    let tiles = nt as u32;
    let stage = staged::act_stage_bytes(tiles, ACT_READS);
    let dx_at = tiles * ACT_READS.tile_bytes();
    let copies = staged::act_copies(&mut b, &fr, (VECTORS * tiles, ACT_READS), [0, dx_at]);
    let reads = ActReads {
        act: b.mad(g, ACT_READS.pitch(), t8),
        dx: b.mad(t, 8u32, dx_at),
    };
    let acc: Vec<[Reg<F32>; 4]> = (0..nt)
        .map(|_| std::array::from_fn(|_| b.mov(0.0f32)))
        .collect();
    let smem = b.dynamic_shared();
    let mine = b.mad(warp, staged::STAGES * stage, smem);
    let cur = b.mov(mine);
    let next = b.add(mine, stage);
    // The activations may come from the previous kernel; the weights never do, but the
    // loop reads both.
    b.wait_for_previous_grid();
    staged::prefetch(&mut b, (warp, blocks), |b| {
        staged::copy_act(b, &copies, warp, cur)
    });
    let ptrs = Ptrs {
        heads,
        quants,
        fifth,
    };
    // The dead branch that pins the loads writes (were it ever taken) only y[row0]
    // (`row0` clamped: the lane's first row, vector 0), before the real stores.
    let pin_row = b.min(row0, last);
    b.for_loop(warp, blocks, WARPS, true, |b, sb| {
        let ahead = b.add(sb, WARPS);
        staged::prefetch(b, (ahead, blocks), |b| {
            staged::copy_act(b, &copies, ahead, next)
        });
        let l = load(b, sb, &ptrs, bb);
        if PIN_LOADS {
            qgemv_k::end_block(b, (y, pin_row), blocks, w, acc[0][0]);
        }
        staged::wait_stage(b);
        super_block(b, &l, &Acts::Staged(cur, reads), &acc);
        staged::swap_stages(b, [cur, next]);
    });
    staged::drain(&mut b);
    // The sums go where each warp's stages were (all its copies have landed).
    assert!(partial_bytes(nt) <= staged::STAGES * stage);
    let partials = Partials {
        base: smem,
        stride: staged::STAGES * stage,
    };
    store(&mut b, (y, rows, vectors), &fr.at, &acc, partials);
    b.ret();
    b.finish()
}

/// The rest of the direct kernel (one tile of vectors): the lane's vector's activations
/// and its outputs' scales loaded with each super-block's weights, before the pin.
/// `row0` is the lane's first row, `t8` its byte in each activation run (from `build`).
fn build_direct(
    mut b: KernelBuilder,
    fr: &Frame,
    (heads, quants, fifth): ([Reg<U64>; 2], Reg<U64>, Option<i64>),
    bb: u32,
    (row0, t8): (Reg<U32>, Reg<U32>),
) -> KernelIr {
    let params = &fr.params;
    let (w, y, blocks) = (params.w, params.y, params.blocks);
    let Place { warp, g, t, .. } = fr.at;
    let last_v = fr.last_v;
    let act_stride = b.mul(blocks, staged::ACT_BYTES);
    let d_stride = b.mul(blocks, 4u32);
    let vg = b.min(g, last_v);
    let v0 = b.shl(t, 1u32);
    let dx = [0u32, 1].map(|i| {
        let v = b.add(v0, i);
        let v = b.min(v, last_v);
        b.mul(v, d_stride)
    });
    let direct = DirectAct {
        aq: params.qs,
        act: b.mad(vg, act_stride, t8),
        ad: params.d,
        dx,
    };
    let acc = [std::array::from_fn(|_| b.mov(0.0f32))];
    b.wait_for_previous_grid();
    let ptrs = Ptrs {
        heads,
        quants,
        fifth,
    };
    let pin_row = b.min(row0, fr.last);
    b.for_loop(warp, blocks, WARPS, true, |b, sb| {
        let l = load(b, sb, &ptrs, bb);
        let acts = direct_loads(b, sb, &direct);
        if PIN_LOADS {
            qgemv_k::end_block(b, (y, pin_row), blocks, w, acc[0][0]);
        }
        super_block(b, &l, &acts, &acc);
    });
    let partials = partials_array(&mut b);
    store(&mut b, (y, params.rows, fr.vectors), &fr.at, &acc, partials);
    b.ret();
    b.finish()
}

/// The direct kernel's activation loads of super-block `sb`.
fn direct_loads(b: &mut KernelBuilder, sb: Reg<U32>, d: &DirectAct) -> Acts {
    let at = |b: &mut KernelBuilder, base: Reg<U64>, off: Reg<U32>, step: Reg<U32>| {
        let o = b.add(off, step);
        let o = b.cvt::<U64, U32>(o, None);
        b.add(base, o)
    };
    let ao = b.mul(sb, staged::ACT_BYTES);
    let a = at(b, d.aq, d.act, ao);
    let runs = std::array::from_fn(|j| b.ld_vec::<U32, U64, 2>(Space::Global, a, 32 * j as i64));
    let dxo = b.shl(sb, 2u32);
    let dx = d.dx.map(|off| {
        let p = at(b, d.ad, off, dxo);
        b.ld::<F32, U64>(Space::Global, p, 0)
    });
    Acts::Loaded { runs, dx }
}

/// [`Partials`] in an array of their own (the direct kernel has no stages to reuse).
fn partials_array(b: &mut KernelBuilder) -> Partials {
    let stride = partial_bytes(1);
    Partials {
        base: b.shared_array("partial", WARPS * stride, 16),
        stride,
    }
}

/// Super-block `sb`'s weight loads for the lane (`bb` bytes a super-block).
fn load(b: &mut KernelBuilder, sb: Reg<U32>, p: &Ptrs, bb: u32) -> Loads {
    let wo = b.mul_wide(sb, bb);
    let quants = p.quants;
    let blk = p.heads.map(|h| b.add(h, wo));
    let head = blk.map(|p| b.ld_vec::<U32, U64, 4>(Space::Global, p, 0));
    let runs = blk.map(|p| b.add(p, quants));
    let quants = runs
        .map(|q| std::array::from_fn(|i| b.ld_vec::<U32, U64, 2>(Space::Global, q, 32 * i as i64)));
    let fifth = p
        .fifth
        .map(|at| runs.map(|q| b.ld_vec::<U32, U64, 2>(Space::Global, q, at)));
    Loads {
        head,
        quants,
        fifth,
    }
}

/// Each row's eight 6-bit scales and mins, four to a word (sub-blocks 0-3, then 4-7),
/// from its three scale words `s` (GGML's `get_scale_min_k4`, four at once: every
/// sub-block's are needed here, where the dp4a lanes take one or two each through
/// [`qgemv_k::scale_min`]).
fn scales_mins(b: &mut KernelBuilder, s: [Reg<U32>; 3]) -> ([Reg<U32>; 2], [Reg<U32>; 2]) {
    let sc_lo = b.and(s[0], 0x3F3F_3F3Fu32);
    let m_lo = b.and(s[1], 0x3F3F_3F3Fu32);
    let top = |b: &mut KernelBuilder, w: Reg<U32>| {
        let x = b.shr(w, 2u32);
        b.and(x, 0x3030_3030u32)
    };
    let low4 = b.and(s[2], 0x0F0F_0F0Fu32);
    let t0 = top(b, s[0]);
    let sc_hi = b.or(low4, t0);
    let high4 = b.shr(s[2], 4u32);
    let high4 = b.and(high4, 0x0F0F_0F0Fu32);
    let t1 = top(b, s[1]);
    let m_hi = b.or(high4, t1);
    ([sc_lo, sc_hi], [m_lo, m_hi])
}

/// Bit `j` of each byte of `qh` put in as bit 4 of the same byte of `nibbles` (Q5_K's
/// fifth bits of sub-block `j`).
fn with_fifth_bits(b: &mut KernelBuilder, nibbles: Reg<U32>, qh: Reg<U32>, j: u32) -> Reg<U32> {
    let to_bit4 = match j {
        0..=3 => b.shl(qh, 4 - j),
        4 => qh,
        _ => b.shr(qh, j - 4),
    };
    let bits = b.and(to_bit4, 0x1010_1010u32);
    b.or(nibbles, bits)
}

/// One super-block's products into the lane's sums, four a tile: rows `g`, `g + 8` by
/// the tile's vectors `2t`, `2t + 1` (the `mma` result's order). Each sub-block's A
/// fragments are unpacked once for every tile.
fn super_block(b: &mut KernelBuilder, l: &Loads, acts: &Acts, acc: &[[Reg<F32>; 4]]) {
    // The B fragments: the loaded runs, or the lane's place in the stage.
    let src = match *acts {
        Acts::Loaded { runs, .. } => Ok(runs),
        Acts::Staged(stage, at) => Err(b.add(stage, at.act)),
    };
    let sm = l.head.map(|h| scales_mins(b, [h[1], h[2], h[3]]));
    let zero = || [0i32; 4];
    let mut isum: Vec<[Reg<S32>; 4]> = acc.iter().map(|_| zero().map(|v| b.mov(v))).collect();
    let mut msum: Vec<[Reg<S32>; 4]> = acc.iter().map(|_| zero().map(|v| b.mov(v))).collect();
    for j in 0..8usize {
        let (pair, high) = (j / 2, j % 2 == 1);
        let (word, byte) = (j / 4, (j % 4) as u32);
        // A: rows g, g + 8 at the first k run, then both at the second.
        let nibbles = |b: &mut KernelBuilder, q: Reg<U32>| {
            let q = if high { b.shr(q, 4u32) } else { q };
            b.and(q, 0x0F0F_0F0Fu32)
        };
        let [r0, r1] = l.quants.map(|q| q[pair]);
        let mut a = [r0[0], r1[0], r0[1], r1[1]].map(|q| nibbles(b, q));
        if let Some([f0, f1]) = l.fifth {
            for (a, qh) in a.iter_mut().zip([f0[0], f1[0], f0[1], f1[1]]) {
                *a = with_fifth_bits(b, *a, qh, j as u32);
            }
        }
        // The rows' scales of sub-block j as integers, their mins in every byte: made
        // after the first product (before it they would be live beside its zeros).
        let mut scales = None;
        for n in 0..acc.len() {
            let off = 32 * j as i64 + i64::from(ACT_READS.tile_bytes()) * n as i64;
            let bf = match src {
                Ok(runs) => runs[j],
                Err(act) => b.ld_vec::<U32, U32, 2>(Space::Shared, act, off),
            };
            let c0 = zero().map(|v| b.mov(v));
            let p = b.mma_m16n8k32_s8(a, bf, c0);
            let (sc, mins) = *scales.get_or_insert_with(|| {
                let sc = sm.map(|(sc, _)| {
                    let v = b.prmt(sc[word], 0u32, 0x4440 | byte);
                    b.bitcast32::<S32, U32>(v)
                });
                (sc, sm.map(|(_, m)| b.prmt(m[word], 0u32, 0x1111 * byte)))
            });
            for (i, s) in isum[n].iter_mut().enumerate() {
                *s = b.mad(sc[i / 2], p[i], *s);
            }
            msum[n] = b.mma_m16n8k32_s8([mins[0], mins[1], mins[0], mins[1]], bf, msum[n]);
        }
    }
    // dx * (d * isum - dmin * msum), rows by the header's halves, vectors by dx.
    let dx: Vec<[Reg<F32>; 2]> = match *acts {
        Acts::Loaded { dx, .. } => vec![dx],
        Acts::Staged(stage, at) => {
            let dx_at = b.add(stage, at.dx);
            (0..acc.len())
                .map(|n| {
                    let v = b.ld_vec::<F32, U32, 2>(Space::Shared, dx_at, 32 * n as i64);
                    [v[0], v[1]]
                })
                .collect()
        }
    };
    let d = l.head.map(|h| half_of(b, h[0], false));
    let neg_dmin = l.head.map(|h| {
        let dmin = half_of(b, h[0], true);
        b.neg(dmin)
    });
    for (n, tile) in acc.iter().enumerate() {
        for (i, &a) in tile.iter().enumerate() {
            let (row, v) = (i / 2, i % 2);
            let is = b.cvt::<F32, S32>(isum[n][i], Some(Rounding::Rn));
            let ms = b.cvt::<F32, S32>(msum[n][i], Some(Rounding::Rn));
            let scaled = b.mul(d[row], is);
            let part = b.fma(neg_dmin[row], ms, scaled);
            let next = b.fma(dx[n][v], part, a);
            b.assign(a, next);
        }
    }
}

/// Shared memory for the warps' sums: `8 nt` vectors' 16 rows of floats a warp,
/// [`PARTIAL_PITCH`] words a vector, `stride` bytes apart from `base` (their own array,
/// or space the kernel is done with).
pub(super) struct Partials {
    pub base: Reg<U32>,
    pub stride: u32,
}

/// Words between vectors' sums in [`Partials`]: 16 rows and four words, so a store's
/// lanes (rows `g`, vectors `2t`) fall in distinct banks (eight words a `t`) and a read's
/// half-warps (16 rows of two vectors) overlap in four banks. Sums stored a row of
/// vectors at a time, as the `mma` leaves them, met 8-way conflicts on the stores and
/// 16-way on the reads (Nsight Compute, 32 vectors on an H200: half the kernel's shared
/// wavefronts).
const PARTIAL_PITCH: u32 = TILE_ROWS + 4;

/// The bytes of one warp's sums for `nt` tiles of vectors.
pub(super) const fn partial_bytes(nt: usize) -> u32 {
    VECTORS * nt as u32 * PARTIAL_PITCH * 4
}

/// The block's warps' sums (four a tile of vectors, `acc`) through shared memory, then
/// the outputs a thread at a time: `y[v * rows + row]` for the tile's rows below `rows`
/// and `v < vectors`.
pub(super) fn store(
    b: &mut KernelBuilder,
    (y, rows, vectors): (Reg<U64>, Reg<U32>, Reg<U32>),
    at: &Place,
    acc: &[[Reg<F32>; 4]],
    partials: Partials,
) {
    let Place {
        tid,
        warp,
        g,
        t,
        tile,
    } = *at;
    let width = VECTORS * acc.len() as u32;
    let Partials { base, stride } = partials;
    // The lane's sums: rows g + 8h of vectors 8n + 2t + e, sum 2h + e of tile n.
    let mine = b.mad(warp, stride, base);
    let v2 = b.mul(t, 2 * PARTIAL_PITCH);
    let at = b.add(v2, g);
    let addr = b.mad(at, 4u32, mine);
    for (n, sums) in acc.iter().enumerate() {
        for (i, &sum) in sums.iter().enumerate() {
            let (h, e) = (i as u32 / 2, i as u32 % 2);
            let word = (VECTORS * n as u32 + e) * PARTIAL_PITCH + 8 * h;
            b.st::<F32, U32>(Space::Shared, addr, 4 * i64::from(word), sum);
        }
    }
    b.bar_sync();
    // Output i = tid (+ THREADS a pass): vector i / 16, row i % 16 (consecutive threads,
    // consecutive rows of y), where both are in the product.
    for pass in 0..(TILE_ROWS * width).div_ceil(THREADS) {
        let i = b.add(tid, THREADS * pass);
        let v = b.shr(i, 4u32);
        let r = b.and(i, TILE_ROWS - 1);
        let row = b.mad(tile, TILE_ROWS, r);
        let in_rows = b.setp::<U32>(Cmp::Lt, row, rows);
        let in_batch = b.setp::<U32>(Cmp::Lt, v, vectors);
        let keep = b.and_pred(in_rows, in_batch);
        b.if_then(keep, false, |b| {
            let at = b.mad(v, PARTIAL_PITCH, r);
            let addr = b.mad(at, 4u32, base);
            let mut sum = b.ld::<F32, U32>(Space::Shared, addr, 0);
            for w in 1..WARPS {
                let x = b.ld::<F32, U32>(Space::Shared, addr, i64::from(w * stride));
                sum = b.add(sum, x);
            }
            let out = b.mad(v, rows, row);
            let off = b.mul_wide(out, 4u32);
            let p = b.add(y, off);
            b.st::<F32, U64>(Space::Global, p, 0, sum);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::report::bank_ways_at;

    #[test]
    fn the_warps_sums_go_into_shared_memory_without_bank_conflicts() {
        // `store`'s scalar stores: lane 4g + t writes row g + 8h of vector 8n + 2t + e.
        for n in 0..4 {
            for (h, e) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                let at = |l: i64| {
                    let v = i64::from(VECTORS) * n + 2 * (l % 4) + e;
                    4 * (v * i64::from(PARTIAL_PITCH) + l / 4 + 8 * h)
                };
                assert_eq!(bank_ways_at(at, 4), 1, "{n} {h} {e}");
            }
        }
        // The reads: thread i takes row i % 16 of vector i / 16, at most 2-way.
        for v0 in (0..32).step_by(2) {
            let at = |l: i64| 4 * ((v0 + l / 16) * i64::from(PARTIAL_PITCH) + l % 16);
            assert!(bank_ways_at(at, 4) <= 2, "{v0}");
        }
    }
}
