//! Q6_K weights against a batch of Q8_K activation vectors on the integer tensor cores
//! (`mma.sync.m16n8k16.s8`): the Q4_K / Q5_K kernel's tiles ([`super::qgemv_q4k_mma`]: 16
//! rows a block, eight warps each taking every eighth super-block, the warps' sums met in
//! shared memory) with one product per group of 16 weights, the span of one of Q6_K's
//! signed 8-bit scales.
//!
//! A 210-byte super-block starts 2 bytes past a 4-byte word half the time, and the tensor
//! cores want each lane's bytes from eight rows at once: read straight from global memory
//! in 16-bit pieces that is eight cache lines an instruction. So the warp first copies its
//! 16 rows' super-blocks into shared memory with `cp.async`: 14 aligned 16-byte chunks a
//! row (the block and up to 14 bytes around it; the matrix's buffer ends in
//! [`crate::memory::SLACK_BYTES`] of zeros for the last block), seven chunks a lane, and
//! its eight vectors' activations and scales beside them (vectors past the batch
//! zero-filled); two stages, so the next super-block's copies are in flight while this
//! one's products run (12 copy instructions a step; a first form in 4-byte words took 37,
//! and with the missing vectors' activations read again, not zero-filled, two vectors at
//! 32000x4096 ran 73 us on an H200 against 41). The activations go through L1
//! (`cp.async.ca`): every row tile reads them, and that took eight vectors at 32000x4096
//! from 58.5 to 38.9 us (4096x4096 9.9 -> 7.8; two runs each, alternated).
//!
//! Lane `4g + t` then reads, for rows `g` and `g + 8`, bytes `4t..4t + 4` of each 16-byte
//! run of `ql` and `qh` (two words and a byte permute; the row's misalignment sets the
//! permute), and builds group `q`'s quants `(ql nibble | qh pair << 4) - 32` as signed
//! bytes; each group's `P = A B` is exact in s32, scaled by the rows' scales (a
//! sign-extending byte permute each) into the super-block's integer sum, then `dx * d *
//! isum` in f32.
//!
//! Group `q` of a super-block is elements `16q..16q + 16`: half `h = q / 8`, quarter `k =
//! (q / 2) % 4`, run `o = q % 2`; its low four bits are the low (`k < 2`) or high nibbles
//! of `ql[64h + 32 (k % 2) + 16o..]`, bits 4-5 bits `2k, 2k + 1` of `qh[32h + 16o..]`.

use super::qgemv::f16_bits;
use super::qgemv_dp4a::q8k_params;
use super::qgemv_q4k_mma::{Place, TILE_ROWS, VECTORS, WARPS, store};
use super::qgemv_q6k::BLOCK_BYTES;
use crate::ptx::{Cmp, F32, KernelBuilder, KernelIr, Reg, Rounding, S32, Space, U16, U32, U64};

/// Threads a block.
pub(super) const THREADS: u32 = 32 * WARPS;

// A row's chunks cover the block at any even misalignment, fit its slot, and split
// evenly between the lanes.
const _: () = assert!(ROW_CHUNKS * 16 >= BLOCK_BYTES + 14);
const _: () = assert!(ROW_PITCH * 4 >= ROW_CHUNKS * 16 && ROW_PITCH % 8 == 4);
const _: () = assert!(LANE_CHUNKS as u32 * 32 == TILE_ROWS * ROW_CHUNKS);
const _: () = assert!(crate::memory::SLACK_BYTES as u32 >= 14);
/// 16-byte chunks a row's super-block is copied in: bytes `-o..224 - o` of the block, `o`
/// (even, below 16) its start's offset past a 16-byte boundary.
const ROW_CHUNKS: u32 = 14;
/// Chunks a lane copies a step: the tile's 16 x 14, 32 lanes at a time.
const LANE_CHUNKS: usize = (TILE_ROWS * ROW_CHUNKS / 32) as usize;
/// Words between rows in shared memory: 4 mod 8, so the eight rows a fragment load reads
/// fall in distinct banks.
const ROW_PITCH: u32 = 60;
/// Bytes between vectors' activations in shared memory (256 and four words: distinct
/// banks for the eight vectors again).
const ACT_PITCH: u32 = 272;
/// Offsets in a stage: the 16 rows, then the eight vectors' quants, then their scales.
const ACT_AT: u32 = TILE_ROWS * ROW_PITCH * 4;
const DX_AT: u32 = ACT_AT + VECTORS * ACT_PITCH;
/// Bytes of one stage.
const STAGE_BYTES: u32 = DX_AT + VECTORS * 4;
/// Stages a warp cycles through.
const STAGES: u32 = 2;
/// Dynamic shared memory a block.
pub(super) const SHARED_BYTES: u32 = WARPS * STAGES * STAGE_BYTES;
/// Bytes of Q8_K activation quants per super-block.
const ACT_BYTES: u32 = 256;
/// Whether the activations' copies keep their lines in L1 (`cp.async.ca`): every row tile
/// reads the same activations, the weights once.
const ACT_THROUGH_L1: bool = true;

/// What the lane copies each step. Weight chunk `32i + lane` of the tile (row `/ 14`,
/// chunk `% 14`): its source at super-block 0 as an offset from `tile` (32 bits each,
/// where 64-bit pointers held the register estimate to one block a multiprocessor) and
/// its place in a stage. Activation chunk `32i + lane` (vector `2i + lane / 16`, bytes
/// `16 (lane % 16)..`) and, lanes 0-7, vector `lane`'s scale: vectors past the batch are
/// zero-filled, not read.
struct Copies {
    tile: Reg<U64>,
    src: [Reg<U32>; LANE_CHUNKS],
    dst: [Reg<U32>; LANE_CHUNKS],
    act: [Reg<U64>; 4],
    act_bytes: [Reg<U32>; 4],
    act_dst: Reg<U32>,
    dx: Reg<U64>,
    dx_bytes: Reg<U32>,
    dx_dst: Reg<U32>,
    has_dx: Reg<crate::ptx::Pred>,
}

/// How the lane reads one of its rows from a stage: the row's offset in the stage, the
/// byte permute that lines its pieces up, the sign-extending ones that take scale `4i +
/// s` from the pair of words `i, i + 1` (each `s`), and the shift of `d` in its word (all
/// from the row's misalignment).
struct RowRead {
    at: Reg<U32>,
    line_up: Reg<U32>,
    scale_sel: [Reg<U32>; 4],
    d_shift: Reg<U32>,
}

/// Where the lane reads in a stage: its rows, `4t` (its bytes of each run), its vector's
/// activations, its two output vectors' scales.
struct Reads {
    rows: [RowRead; 2],
    t4: Reg<U32>,
    act: Reg<U32>,
    dx: Reg<U32>,
}

pub(super) fn build(name: String) -> KernelIr {
    let mut b = KernelBuilder::new(name);
    b.max_threads(THREADS);
    let params = q8k_params(&mut b, true);
    let (w, aq, ad, y) = (params.w, params.qs, params.d, params.y);
    let (rows, blocks) = (params.rows, params.blocks);
    let vectors = params.vectors.expect("a batched kernel's vector count");
    b.allow_next_grid();
    let tid = b.tid_x();
    let warp = b.shr(tid, 5u32);
    let lane = b.and(tid, 31u32);
    let g = b.shr(lane, 2u32);
    let t = b.and(lane, 3u32);
    let tile = b.ctaid_x();
    let last = b.sub(rows, 1u32);
    let last_v = b.sub(vectors, 1u32);
    let row_bytes = b.mul(blocks, BLOCK_BYTES);
    let row0 = b.mul(tile, TILE_ROWS);
    // How far row `r`'s super-blocks `warp, warp + 8, ...` start past a 16-byte
    // boundary: the same for every one (eight blocks are 1680 bytes; mod 16, the low 32
    // bits of the address do). Rows past the last stand for the last one (their sums are
    // never stored).
    let w_lo = b.cvt::<U32, U64>(w, None);
    let sb_lo = b.mad(warp, BLOCK_BYTES, w_lo);
    let row_at = |b: &mut KernelBuilder, r: Reg<U32>| {
        let r = b.add(row0, r);
        let r = b.min(r, last);
        let at = b.mad(r, row_bytes, sb_lo);
        (r, b.and(at, 15u32))
    };
    // The tile's first row at super-block `warp`, 16 bytes back (each chunk's offset
    // steps back from it by its row's misalignment).
    let tile_off = b.mul_wide(row0, row_bytes);
    let tile_src = b.add(w, tile_off);
    let sb_off = b.mul_wide(warp, BLOCK_BYTES);
    let tile_src = b.add(tile_src, sb_off);
    let tile_src = b.sub(tile_src, 16u64);
    let (mut src, mut dst) = (Vec::new(), Vec::new());
    for i in 0..LANE_CHUNKS as u32 {
        let f = b.add(lane, 32 * i);
        let r = b.div_int(f, ROW_CHUNKS);
        let c = b.rem(f, ROW_CHUNKS);
        let c16 = b.mad(c, 16u32, 16u32);
        let (row, o) = row_at(&mut b, r);
        let rel = b.sub(row, row0);
        let off = b.mad(rel, row_bytes, c16);
        src.push(b.sub(off, o));
        let at = b.mul(r, ROW_PITCH * 4);
        dst.push(b.mad(c, 16u32, at));
    }
    let act_stride = b.mul(blocks, ACT_BYTES);
    let half = b.shr(lane, 4u32);
    let chunk = b.and(lane, 15u32);
    let chunk16 = b.shl(chunk, 4u32);
    let chunk16w = b.cvt::<U64, U32>(chunk16, None);
    let mut act_bytes = Vec::new();
    let act_src: [Reg<U64>; 4] = std::array::from_fn(|i| {
        let v = b.add(half, 2 * i as u32);
        let inside = b.setp::<U32>(Cmp::Le, v, last_v);
        act_bytes.push(b.selp(16u32, 0u32, inside));
        let v = b.min(v, last_v);
        let off = b.mul_wide(v, act_stride);
        let p = b.add(aq, off);
        b.add(p, chunk16w)
    });
    // The activation chunk's place in a stage: vector lane / 16 (+ 2i), bytes 16 (lane % 16).
    let act_dst = b.mad(half, ACT_PITCH, ACT_AT);
    let act_dst = b.add(act_dst, chunk16);
    let d_stride = b.mul(blocks, 4u32);
    let dv = b.min(lane, last_v);
    let dx_off = b.mul_wide(dv, d_stride);
    let in_batch = b.setp::<U32>(Cmp::Le, lane, last_v);
    let copies = Copies {
        tile: tile_src,
        src: src.try_into().expect("a chunk each"),
        dst: dst.try_into().expect("a chunk each"),
        act: act_src,
        act_bytes: act_bytes.try_into().expect("four chunks"),
        act_dst,
        dx: b.add(ad, dx_off),
        dx_bytes: b.selp(4u32, 0u32, in_batch),
        dx_dst: b.mad(lane, 4u32, DX_AT),
        has_dx: b.setp::<U32>(Cmp::Lt, lane, VECTORS),
    };
    // The lane's two rows as it reads them.
    let row_reads = [0u32, 8].map(|extra| {
        let rr = b.add(g, extra);
        let (_, o16) = row_at(&mut b, rr);
        // The block starts o16 bytes into the row's slot: whole words of it move the
        // row's base, the rest (0 or 2 bytes) the permutes. o = 0: a piece is the first
        // word of its pair; o = 2: bytes 2..6.
        let words = b.and(o16, 12u32);
        let o = b.and(o16, 3u32);
        let shift = b.mul(o, 0x1111u32);
        let line_up = b.add(shift, 0x3210u32);
        // Scale byte s + o of the pair, its sign in the three bytes above.
        let scale_sel = std::array::from_fn(|s| b.add(shift, 0x8880 + 0x1111 * s as u32));
        RowRead {
            at: b.mad(rr, ROW_PITCH * 4, words),
            line_up,
            scale_sel,
            d_shift: b.shl(o, 3u32),
        }
    });
    let act = b.mad(g, ACT_PITCH, ACT_AT);
    let t4 = b.shl(t, 2u32);
    let reads = Reads {
        rows: row_reads,
        t4,
        act: b.add(act, t4),
        dx: b.mad(t, 8u32, DX_AT),
    };
    let acc: [Reg<F32>; 4] = std::array::from_fn(|_| b.mov(0.0f32));
    let smem = b.dynamic_shared();
    let mine = b.mad(warp, STAGES * STAGE_BYTES, smem);
    let cur = b.mov(mine);
    let next = b.add(mine, STAGE_BYTES);
    // The activations may come from the previous kernel.
    b.wait_for_previous_grid();
    let has_first = b.setp::<U32>(Cmp::Lt, warp, blocks);
    b.if_then(has_first, true, |b| copy(b, &copies, warp, warp, cur));
    b.cp_async_commit();
    b.for_loop(warp, blocks, WARPS, true, |b, sb| {
        let ahead = b.add(sb, WARPS);
        let more = b.setp::<U32>(Cmp::Lt, ahead, blocks);
        b.if_then(more, true, |b| copy(b, &copies, warp, ahead, next));
        b.cp_async_commit();
        b.cp_async_wait(1);
        b.bar_warp_sync();
        super_block(b, cur, &reads, acc);
        // Every lane done with this stage before the next step's copies land in it.
        b.bar_warp_sync();
        let swap = b.mov(cur);
        b.assign(cur, next);
        b.assign(next, swap);
    });
    b.cp_async_wait(0);
    let at = Place {
        tid,
        warp,
        g,
        t,
        tile,
    };
    store(&mut b, (y, rows, vectors), &at, acc);
    b.ret();
    b.finish()
}

/// Starts the copies of super-block `sb` into the stage at `stage`: the tile's rows in
/// 16-byte chunks, the vectors' 256 quant bytes and scales.
fn copy(b: &mut KernelBuilder, c: &Copies, warp: Reg<U32>, sb: Reg<U32>, stage: Reg<U32>) {
    let rel = b.sub(sb, warp);
    let w_off = b.mul_wide(rel, BLOCK_BYTES);
    let step = b.add(c.tile, w_off);
    let sixteen = b.mov(16u32);
    for (&src, &dst) in c.src.iter().zip(&c.dst) {
        let src = b.cvt::<U64, U32>(src, None);
        let src = b.add(step, src);
        let at = b.add(stage, dst);
        b.cp_async_16(at, src, sixteen);
    }
    let a_off = b.mul_wide(sb, ACT_BYTES);
    let act_dst = b.add(stage, c.act_dst);
    for (i, (&p, &n)) in c.act.iter().zip(&c.act_bytes).enumerate() {
        let src = b.add(p, a_off);
        let at = b.add(act_dst, 2 * i as u32 * ACT_PITCH);
        if ACT_THROUGH_L1 {
            b.cp_async_16_l1(at, src, n);
        } else {
            b.cp_async_16(at, src, n);
        }
    }
    b.if_then(c.has_dx, false, |b| {
        let d_off = b.mul_wide(sb, 4u32);
        let src = b.add(c.dx, d_off);
        let at = b.add(stage, c.dx_dst);
        b.cp_async_4(at, src, c.dx_bytes);
    });
}

/// Quarter `k`'s quants for one row as signed bytes `q - 32`, from the row's lined-up
/// pieces of the `ql` runs of quarters 0/2 and 1/3 and the `qh` run of one half and run.
fn group_quants(b: &mut KernelBuilder, ql: [Reg<U32>; 2], qh: Reg<U32>, k: usize) -> Reg<U32> {
    let ql = ql[k % 2];
    let low = if k >= 2 { b.shr(ql, 4u32) } else { ql };
    let low = b.and(low, 0x0F0F_0F0Fu32);
    // Bits 2k, 2k + 1 of each qh byte to bits 4, 5.
    let high = match k {
        0..=1 => b.shl(qh, 4 - 2 * k as u32),
        2 => qh,
        _ => b.shr(qh, 2u32),
    };
    let high = b.and(high, 0x3030_3030u32);
    let v = b.or(low, high);
    // v in 0..64 a byte: (v + 96) ^ 128 is v - 32 as a signed byte, with no carry out of
    // any byte.
    let v = b.add(v, 0x6060_6060u32);
    b.xor(v, 0x8080_8080u32)
}

/// One super-block's products from the stage at `stage` into the lane's four sums: rows
/// `g`, `g + 8` by vectors `2t`, `2t + 1` (the `mma` result's order). Runs are read per
/// half and run, just before the four groups that share them (the register estimate
/// then follows ptxas's, which reads shared memory where it is used).
fn super_block(b: &mut KernelBuilder, stage: Reg<U32>, r: &Reads, acc: [Reg<F32>; 4]) {
    // Per row: the words holding its scales (bytes 192..208 from `-o`) and d (208..210),
    // d as f32, and where its pieces are.
    let rows = r.rows.each_ref().map(|row| {
        let at = b.add(stage, row.at);
        let words: [Reg<U32>; 5] =
            std::array::from_fn(|i| b.ld::<U32, U32>(Space::Shared, at, 192 + 4 * i as i64));
        let d = b.shr(words[4], row.d_shift);
        let d = b.cvt::<U16, U32>(d, None);
        (b.add(at, r.t4), words, f16_bits(b, d))
    });
    // Run `j`'s piece of each row, lined up.
    let piece = |b: &mut KernelBuilder, j: usize| {
        [0, 1].map(|k| {
            let (mine, _, _) = rows[k];
            let lo = b.ld::<U32, U32>(Space::Shared, mine, 16 * j as i64);
            let hi = b.ld::<U32, U32>(Space::Shared, mine, 16 * j as i64 + 4);
            b.prmt(lo, hi, r.rows[k].line_up)
        })
    };
    let act = b.add(stage, r.act);
    let zero = || [0i32; 4];
    let mut isum: [Reg<S32>; 4] = zero().map(|v| b.mov(v));
    for (h, o) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
        let ql = [0, 1].map(|kk| piece(b, 4 * h + 2 * kk + o));
        let qh = piece(b, 8 + 2 * h + o);
        for k in 0..4 {
            let q = 8 * h + 2 * k + o;
            let a = [0, 1].map(|row| group_quants(b, [ql[0][row], ql[1][row]], qh[row], k));
            let x = b.ld::<U32, U32>(Space::Shared, act, 16 * q as i64);
            let c0 = zero().map(|v| b.mov(v));
            let p = b.mma_m16n8k16_s8(a, x, c0);
            let (i, s) = (q / 4, q % 4);
            let sc = [0, 1].map(|row| {
                let (_, w, _) = &rows[row];
                let v = b.prmt(w[i], w[i + 1], r.rows[row].scale_sel[s]);
                b.bitcast32::<S32, U32>(v)
            });
            for (j, s) in isum.iter_mut().enumerate() {
                *s = b.mad(sc[j / 2], p[j], *s);
            }
        }
    }
    // dx * d * isum, rows by d, vectors by dx.
    let dx_at = b.add(stage, r.dx);
    let dx = b.ld_vec::<F32, U32, 2>(Space::Shared, dx_at, 0);
    for (j, &a) in acc.iter().enumerate() {
        let is = b.cvt::<F32, S32>(isum[j], Some(Rounding::Rn));
        let scaled = b.mul(rows[j / 2].2, is);
        let next = b.fma(dx[j % 2], scaled, a);
        b.assign(a, next);
    }
}
