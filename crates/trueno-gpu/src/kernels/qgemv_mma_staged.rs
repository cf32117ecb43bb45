//! The frame of the integer tensor-core batch kernels whose blocks are not 4-byte
//! aligned (Q6_K's 210 bytes, Q8_0's 34, Q4_0's 18): the tiles of
//! [`super::qgemv_q4k_mma`] (16 rows a block, eight warps each taking every eighth
//! 256-weight span, the warps' sums met in shared memory), with each span copied into
//! shared memory before its products ([`StagedStep`] does those per format).
//!
//! The tensor cores want each lane's bytes from eight rows at once: read straight from
//! global memory in 16-bit pieces, that is eight cache lines an instruction. So the warp
//! first copies its 16 rows' spans into shared memory with `cp.async` in aligned 16-byte
//! chunks (the span and up to 16 bytes around it; a quantized matrix's buffer ends in
//! [`crate::memory::SLACK_BYTES`] of zeros for the last row's last chunk), its eight
//! vectors' activations and scales beside them (vectors past the batch zero-filled; 16
//! or 32 vectors for the wider kernels, whose stages then fit one block a
//! multiprocessor); two
//! stages, so the next span's copies are in flight while this one's products run. A row's
//! spans `warp, warp + 8, ...` all start as far past a 16-byte boundary (eight spans of
//! Q6_K are 1680 bytes, of Q8_0 2176, of Q4_0 1152): the step reads each row from its slot
//! plus the whole words of that offset, and lines pieces up by the 0 or 2 bytes left.
//!
//! Q6_K, measured on an H200 (µs at 32000x4096, two / eight vectors): copies of 4-byte
//! words (37 instructions a step, where these take 12), the missing vectors' activations
//! read again, 73.1 / 51.2; 16-byte chunks, those zero-filled, 40.6 / 58.5; the
//! activations' copies through L1 (`cp.async.ca`: every row tile reads them) 36.5 / 38.9
//! (two runs each, alternated).

use super::qgemv_q4k_mma::{Frame, Partials, Place, TILE_ROWS, VECTORS, WARPS, frame, store};
use crate::ptx::{Cmp, F32, KernelBuilder, KernelIr, Reg, Space, U32, U64};

/// How a format's lanes read their B fragments' activation bytes from a stage, which sets
/// the bytes between vectors there ([`FragmentReads::pitch`]) so that a load's vectors
/// fall in distinct banks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FragmentReads {
    /// Eight bytes at `8t` (Q4_K, Q5_K, Q8_0): a 64-bit load is served a half-warp at a
    /// time, whose four vectors' 32-byte runs must tile the 32 banks.
    Pairs,
    /// Four-byte words at `4t` (Q4_0, Q6_K): a warp's eight vectors' 16-byte runs.
    Words,
}

impl FragmentReads {
    /// Bytes between vectors' activations in a stage: 256 and eight words (`Pairs`) or
    /// four (`Words`). With four words a half-warp's 64-bit loads met 2-way conflicts
    /// (Nsight Compute, Q4_K at 32 vectors on an H200: 6.0 wavefronts a shared load).
    pub(super) const fn pitch(self) -> u32 {
        match self {
            FragmentReads::Pairs => ACT_BYTES + 32,
            FragmentReads::Words => ACT_BYTES + 16,
        }
    }

    /// Bytes between tiles of eight vectors' activations in a stage.
    pub(super) const fn tile_bytes(self) -> u32 {
        VECTORS * self.pitch()
    }
}

/// Stages a warp cycles through.
pub(super) const STAGES: u32 = 2;
/// Bytes of Q8_K activation quants per 256 weights.
pub(super) const ACT_BYTES: u32 = 256;
/// Whether the activations' copies keep their lines in L1 (`cp.async.ca`): every row tile
/// reads the same activations, the weights once.
const ACT_THROUGH_L1: bool = true;

/// Where things sit for a format whose 256 weights take `span` bytes a row, with `tiles`
/// tiles of eight vectors.
#[derive(Clone, Copy)]
struct Layout {
    /// 16-byte chunks a row's span is copied in: bytes `-o..16 chunks - o`, `o` (even,
    /// below 16) its start's offset past a 16-byte boundary.
    chunks: u32,
    /// Words between rows in a stage: 4 mod 8, so the eight rows a fragment load reads
    /// fall in distinct banks.
    pitch: u32,
    tiles: u32,
    reads: FragmentReads,
}

impl Layout {
    const fn of(span: u32, tiles: u32, reads: FragmentReads) -> Layout {
        let chunks = (span + 14).div_ceil(16);
        // Even, so the tile's chunks split evenly between the lanes.
        let chunks = chunks + chunks % 2;
        let words = 4 * chunks;
        let pitch = words + (12 - words % 8) % 8;
        assert!(chunks * 16 - span <= crate::memory::SLACK_BYTES as u32);
        Layout {
            chunks,
            pitch,
            tiles,
            reads,
        }
    }

    /// Chunks a lane copies a step: the tile's 16 rows', 32 lanes at a time.
    const fn lane_chunks(self) -> u32 {
        TILE_ROWS * self.chunks / 32
    }

    /// Where the activations start in a stage.
    const fn act_at(self) -> u32 {
        TILE_ROWS * self.pitch * 4
    }

    /// Vectors a stage holds.
    const fn vectors(self) -> u32 {
        VECTORS * self.tiles
    }

    /// Where the vectors' scales start in a stage.
    const fn dx_at(self) -> u32 {
        self.act_at() + self.tiles * self.reads.tile_bytes()
    }

    const fn stage_bytes(self) -> u32 {
        self.dx_at() + self.vectors() * 4
    }
}

/// Dynamic shared memory a block of the kernel whose 256 weights take `span` bytes a row,
/// for `tiles` tiles of eight vectors read as `reads`.
pub(super) const fn shared_bytes(span: u32, tiles: u32, reads: FragmentReads) -> u32 {
    WARPS * STAGES * Layout::of(span, tiles, reads).stage_bytes()
}

/// One of the lane's rows in a stage: its slot plus the whole words of its spans'
/// offset (from the stage), and the 0 or 2 bytes left.
pub(super) struct RowBase {
    pub at: Reg<U32>,
    pub o: Reg<U32>,
}

/// Where lane `4g + t` reads in a stage: rows `g` and `g + 8`, `t`, vector `g`'s
/// activations (tile `n`'s vector `8n + g` [`FragmentReads::tile_bytes`] times `n`
/// further), and how many tiles there are.
pub(super) struct Reads {
    pub rows: [RowBase; 2],
    pub t: Reg<U32>,
    pub act: Reg<U32>,
    pub tiles: usize,
}

/// A format's products over one staged span.
pub(super) trait StagedStep {
    /// The lane's loop-invariant values (byte permutes from its rows' offsets).
    type Lane;
    /// Bytes of a row's 256 weights.
    const SPAN: u32;
    /// How the lanes read their activation bytes.
    const READS: FragmentReads;
    fn lane(&self, b: &mut KernelBuilder, r: &Reads) -> Self::Lane;
    /// The span's products for the lane's four outputs a tile of vectors, rows `g`, `g +
    /// 8` by the tile's vectors `2t`, `2t + 1` (the `mma` result's order), before the
    /// activation scale; the stage at `stage`. Each A fragment serves every tile.
    fn products(
        &self,
        b: &mut KernelBuilder,
        stage: Reg<U32>,
        r: &Reads,
        lane: &Self::Lane,
    ) -> Vec<[Reg<F32>; 4]>;
}

/// What the lane copies each step. Weight chunk `32i + lane` of the tile (row `/
/// chunks`, chunk `% chunks`): its source at super-block 0 as an offset from `tile` (32 bits each,
/// where 64-bit pointers held the register estimate to one block a multiprocessor) and
/// its place in a stage; then the activations.
struct Copies {
    span: u32,
    tile: Reg<U64>,
    src: Vec<Reg<U32>>,
    dst: Vec<Reg<U32>>,
    act: ActCopies,
}

/// The activations' part of a step's copies. Chunk `32i + lane` (vector `2i + lane /
/// 16`, bytes `16 (lane % 16)..`; its source as an offset from `act`) and, lanes below
/// the stage's vector count, vector `lane`'s scale: vectors past the batch are
/// zero-filled, not read.
pub(super) struct ActCopies {
    pitch: u32,
    act: Reg<U64>,
    src: Vec<Reg<U32>>,
    bytes: Vec<Reg<U32>>,
    dst: Reg<U32>,
    dx: Reg<U64>,
    dx_bytes: Reg<U32>,
    dx_dst: Reg<U32>,
    has_dx: Reg<crate::ptx::Pred>,
}

/// A stage of activations alone (the K-quants' kernels, whose weights go to registers):
/// `tiles` tiles of eight vectors' quants read as `reads`, then their scales.
pub(super) const fn act_stage_bytes(tiles: u32, reads: FragmentReads) -> u32 {
    tiles * (reads.tile_bytes() + VECTORS * 4)
}

/// The lane's activation copies for `vectors` vectors a stage, read as `reads`, their
/// quants `act_at` and scales `dx_at` bytes into it.
pub(super) fn act_copies(
    b: &mut KernelBuilder,
    fr: &Frame,
    (vectors, reads): (u32, FragmentReads),
    at: [u32; 2],
) -> ActCopies {
    let [act_at, dx_at] = at;
    let (lane, last_v, blocks) = (fr.lane, fr.last_v, fr.params.blocks);
    let act_stride = b.mul(blocks, ACT_BYTES);
    let half = b.shr(lane, 4u32);
    let chunk = b.and(lane, 15u32);
    let chunk16 = b.shl(chunk, 4u32);
    let (mut src, mut bytes) = (Vec::new(), Vec::new());
    for i in 0..vectors / 2 {
        let v = b.add(half, 2 * i);
        let inside = b.setp::<U32>(Cmp::Le, v, last_v);
        bytes.push(b.selp(16u32, 0u32, inside));
        let v = b.min(v, last_v);
        src.push(b.mad(v, act_stride, chunk16));
    }
    // The chunk's place in a stage: vector lane / 16 (+ 2i), bytes 16 (lane % 16).
    let dst = b.mad(half, reads.pitch(), act_at);
    let dst = b.add(dst, chunk16);
    let d_stride = b.mul(blocks, 4u32);
    let dv = b.min(lane, last_v);
    let dx_off = b.mul_wide(dv, d_stride);
    let in_batch = b.setp::<U32>(Cmp::Le, lane, last_v);
    ActCopies {
        pitch: reads.pitch(),
        act: fr.params.qs,
        src,
        bytes,
        dst,
        dx: b.add(fr.params.d, dx_off),
        dx_bytes: b.selp(4u32, 0u32, in_batch),
        dx_dst: b.mad(lane, 4u32, dx_at),
        has_dx: b.setp::<U32>(Cmp::Lt, lane, vectors),
    }
}

/// The kernel of `step`'s format.
pub(super) fn build<S: StagedStep>(name: String, step: &S, tiles: usize) -> KernelIr {
    let lay = Layout::of(S::SPAN, tiles as u32, S::READS);
    let mut b = KernelBuilder::new(name);
    let fr = frame(&mut b);
    if tiles == 4 {
        // Its shared memory leaves room for one block a multiprocessor: ptxas may take
        // the registers of one (it capped Q4_0's at 128 and spilled).
        b.min_blocks(1);
    }
    let params = &fr.params;
    let (w, y) = (params.w, params.y);
    let (rows, blocks, vectors) = (params.rows, params.blocks, fr.vectors);
    let Place {
        warp, g, t, tile, ..
    } = fr.at;
    let (lane, last) = (fr.lane, fr.last);
    let row_bytes = b.mul(blocks, S::SPAN);
    let row0 = b.mul(tile, TILE_ROWS);
    // How far row `r`'s spans `warp, warp + 8, ...` start past a 16-byte boundary (mod
    // 16, the low 32 bits of the address do). Rows past the last stand for the last one
    // (their sums are never stored).
    let w_lo = b.cvt::<U32, U64>(w, None);
    let sb_lo = b.mad(warp, S::SPAN, w_lo);
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
    let sb_off = b.mul_wide(warp, S::SPAN);
    let tile_src = b.add(tile_src, sb_off);
    let tile_src = b.sub(tile_src, 16u64);
    let (mut src, mut dst) = (Vec::new(), Vec::new());
    for i in 0..lay.lane_chunks() {
        let f = b.add(lane, 32 * i);
        let r = b.div_int(f, lay.chunks);
        let c = b.rem(f, lay.chunks);
        let c16 = b.mad(c, 16u32, 16u32);
        let (row, o) = row_at(&mut b, r);
        let rel = b.sub(row, row0);
        let off = b.mad(rel, row_bytes, c16);
        src.push(b.sub(off, o));
        let at = b.mul(r, lay.pitch * 4);
        dst.push(b.mad(c, 16u32, at));
    }
    let copies = Copies {
        tile: tile_src,
        span: S::SPAN,
        src,
        dst,
        act: act_copies(
            &mut b,
            &fr,
            (lay.vectors(), S::READS),
            [lay.act_at(), lay.dx_at()],
        ),
    };
    // The lane's two rows as it reads them.
    let lane_rows = [0u32, 8].map(|extra| {
        let rr = b.add(g, extra);
        let (_, o16) = row_at(&mut b, rr);
        let words = b.and(o16, 12u32);
        RowBase {
            at: b.mad(rr, lay.pitch * 4, words),
            o: b.and(o16, 3u32),
        }
    });
    let reads = Reads {
        rows: lane_rows,
        t,
        act: b.mad(g, S::READS.pitch(), lay.act_at()),
        tiles,
    };
    let lane_vals = step.lane(&mut b, &reads);
    let dx_read = b.mad(t, 8u32, lay.dx_at());
    let acc: Vec<[Reg<F32>; 4]> = (0..tiles)
        .map(|_| std::array::from_fn(|_| b.mov(0.0f32)))
        .collect();
    let smem = b.dynamic_shared();
    let mine = b.mad(warp, STAGES * lay.stage_bytes(), smem);
    let cur = b.mov(mine);
    let next = b.add(mine, lay.stage_bytes());
    // The activations may come from the previous kernel.
    b.wait_for_previous_grid();
    prefetch(&mut b, (warp, blocks), |b| {
        copy(b, &copies, warp, warp, cur)
    });
    b.for_loop(warp, blocks, WARPS, true, |b, sb| {
        let ahead = b.add(sb, WARPS);
        prefetch(b, (ahead, blocks), |b| copy(b, &copies, warp, ahead, next));
        wait_stage(b);
        let sums = step.products(b, cur, &reads, &lane_vals);
        // Times the vectors' scales into the lane's sums.
        let dx_at = b.add(cur, dx_read);
        for (n, (tile, sums)) in acc.iter().zip(&sums).enumerate() {
            let dx = b.ld_vec::<F32, U32, 2>(Space::Shared, dx_at, 4 * (VECTORS * n as u32) as i64);
            for (j, (&a, &s)) in tile.iter().zip(sums).enumerate() {
                let next = b.fma(dx[j % 2], s, a);
                b.assign(a, next);
            }
        }
        swap_stages(b, [cur, next]);
    });
    drain(&mut b);
    // The sums go where each warp's stages were (all its copies have landed): a static
    // array beside them would keep two of Q8_0's blocks from one multiprocessor.
    assert!(super::qgemv_q4k_mma::partial_bytes(tiles) <= STAGES * lay.stage_bytes());
    let partials = Partials {
        base: smem,
        stride: STAGES * lay.stage_bytes(),
    };
    store(&mut b, (y, rows, vectors), &fr.at, &acc, partials);
    b.ret();
    b.finish()
}

/// Starts span `sb`'s copies (`copy`) where it is one of the row's `blocks`, and closes
/// the group (empty past the row, so a step's wait always counts one group behind).
pub(super) fn prefetch(
    b: &mut KernelBuilder,
    (sb, blocks): (Reg<U32>, Reg<U32>),
    copy: impl FnOnce(&mut KernelBuilder),
) {
    let more = b.setp::<U32>(Cmp::Lt, sb, blocks);
    b.if_then(more, true, copy);
    b.cp_async_commit();
}

/// The current stage's copies landed (the next stage's may still be in flight) and
/// seen by the whole warp.
pub(super) fn wait_stage(b: &mut KernelBuilder) {
    b.cp_async_wait(1);
    b.bar_warp_sync();
}

/// The end of a step: every lane done with the current stage (before the next step's
/// copies land in it), then the two stages trade places.
pub(super) fn swap_stages(b: &mut KernelBuilder, [cur, next]: [Reg<U32>; 2]) {
    b.bar_warp_sync();
    let swap = b.mov(cur);
    b.assign(cur, next);
    b.assign(next, swap);
}

/// After the loop: every copy landed and seen by the whole warp (its stages may then hold
/// other things).
pub(super) fn drain(b: &mut KernelBuilder) {
    b.cp_async_wait(0);
    b.bar_warp_sync();
}

/// Starts the copies of span `sb` into the stage at `stage`: the tile's rows in 16-byte
/// chunks, the vectors' 256 quant bytes and scales.
fn copy(b: &mut KernelBuilder, c: &Copies, warp: Reg<U32>, sb: Reg<U32>, stage: Reg<U32>) {
    let rel = b.sub(sb, warp);
    let w_off = b.mul_wide(rel, c.span);
    let step = b.add(c.tile, w_off);
    let sixteen = b.mov(16u32);
    for (&src, &dst) in c.src.iter().zip(&c.dst) {
        let src = b.cvt::<U64, U32>(src, None);
        let src = b.add(step, src);
        let at = b.add(stage, dst);
        b.cp_async_16(at, src, sixteen);
    }
    copy_act(b, &c.act, sb, stage);
}

/// Starts the copies of the vectors' 256 quant bytes and scales of span `sb` into the
/// stage at `stage`.
pub(super) fn copy_act(b: &mut KernelBuilder, c: &ActCopies, sb: Reg<U32>, stage: Reg<U32>) {
    let a_off = b.mul(sb, ACT_BYTES);
    let act_dst = b.add(stage, c.dst);
    for (i, (&p, &n)) in c.src.iter().zip(&c.bytes).enumerate() {
        let off = b.add(p, a_off);
        let off = b.cvt::<U64, U32>(off, None);
        let src = b.add(c.act, off);
        let at = b.add(act_dst, 2 * i as u32 * c.pitch);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::report::bank_ways_at;

    #[test]
    fn a_fragment_load_of_activations_is_one_wavefront_a_phase() {
        // Lane 4g + t reads vector g, `t` steps into the run, at every sub-block and tile:
        // 8 bytes at 8t (Pairs), or 4 bytes at 4t and 4t + 16 (Words).
        let lane = |r: FragmentReads, base: u32, step: i64| {
            move |l: i64| i64::from(base) + (l / 4) * i64::from(r.pitch()) + step * (l % 4)
        };
        for j in 0..8 {
            for n in 0..4 {
                let base = |r: FragmentReads| 32 * j + n * r.tile_bytes();
                let pairs = FragmentReads::Pairs;
                assert_eq!(bank_ways_at(lane(pairs, base(pairs), 8), 8), 1, "{j} {n}");
                let words = FragmentReads::Words;
                for k in [0, 16] {
                    let at = lane(words, base(words) + k, 4);
                    assert_eq!(bank_ways_at(at, 4), 1, "{j} {n} {k}");
                }
            }
        }
        // The 8-byte loads at the 4-byte readers' pitch: 2-way.
        assert_eq!(bank_ways_at(lane(FragmentReads::Words, 0, 8), 8), 2);
    }
}
