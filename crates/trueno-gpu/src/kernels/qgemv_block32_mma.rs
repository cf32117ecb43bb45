//! Q8_0 and Q4_0 weights against a batch of Q8_K activation vectors on the integer tensor
//! cores (`mma.sync.m16n8k32.s8`), one product per 32-weight block (the span of its f16
//! scale), on the staged frame of qgemv_mma_staged.rs: eight blocks (272 or 144 bytes)
//! are one 256-weight span, one Q8_K activation block.
//!
//! A block is `d` then its quants (Q8_0: 32 signed bytes; Q4_0: 16 bytes whose low
//! nibbles are weights 0-15 and high ones 16-31, each minus 8). Blocks are 34 or 18
//! bytes, 2 mod 4, so within a span the even blocks' quants start `2 - o` bytes past a
//! word and the odd ones' `o`, `o` (0 or 2) the row's offset: a lane reads whole words and
//! lines its bytes up with a byte permute per parity. (Spans of 272 and 144 bytes keep
//! every row of a matrix 16-byte aligned, so `o` is 0 in practice; the permutes serve
//! either.) Lane `4g + t` takes, of each block
//! of rows `g` and `g + 8`, quant bytes `8t..8t + 8` (Q8_0) or the nibbles of bytes
//! `4t..4t + 4` (Q4_0: weights `4t..` and `16 + 4t..`) and the matching activation bytes,
//! the A and B fragments' two k runs; `P = A B` is exact in s32 and `d * P` is summed in
//! f32 over the span's blocks.

use super::qgemv::f16_bits;
use super::qgemv_mma_staged::{FragmentReads, Reads, StagedStep};
use crate::ptx::{F32, KernelBuilder, Reg, Rounding, Space, U16, U32};

/// Blocks a 256-weight span.
const BLOCKS: u32 = 8;

/// The Q8_0 (`FOUR_BIT` false) or Q4_0 step.
pub(super) struct Block32Step<const FOUR_BIT: bool>;

/// Per row, from its offset `o`: the extra bytes before the even blocks' words (`2o`),
/// the byte permutes that line up the even and the odd blocks' quants, and the shifts of
/// their `d` in its word.
pub(super) struct Block32Row {
    two_o: Reg<U32>,
    line_up: [Reg<U32>; 2],
    d_shift: [Reg<U32>; 2],
}

/// Bytes a block.
const fn block_bytes(four_bit: bool) -> u32 {
    if four_bit { 18 } else { 34 }
}

/// How the lanes read their activations: Q8_0's eight quant bytes at `8t` meet the
/// activations' eight bytes there; Q4_0's four bytes of nibbles (two sub-runs of four
/// weights, `4t` and `4t + 16`) their two words.
const fn fragment_reads(four_bit: bool) -> FragmentReads {
    if four_bit {
        FragmentReads::Words
    } else {
        FragmentReads::Pairs
    }
}

impl<const FOUR_BIT: bool> StagedStep for Block32Step<FOUR_BIT> {
    type Lane = [Block32Row; 2];
    const SPAN: u32 = BLOCKS * block_bytes(FOUR_BIT);
    const READS: FragmentReads = fragment_reads(FOUR_BIT);

    fn lane(&self, b: &mut KernelBuilder, r: &Reads) -> [Block32Row; 2] {
        lane_rows(b, r)
    }

    fn products(
        &self,
        b: &mut KernelBuilder,
        stage: Reg<U32>,
        r: &Reads,
        lane: &[Block32Row; 2],
    ) -> Vec<[Reg<F32>; 4]> {
        products(FOUR_BIT, b, stage, r, lane)
    }
}

fn lane_rows(b: &mut KernelBuilder, r: &Reads) -> [Block32Row; 2] {
    r.rows.each_ref().map(|row| {
        // Even blocks' quants sit 2 - o bytes past their word, odd ones' o; their d, o
        // and 2 - o bytes.
        let o_pairs = b.mul(row.o, 0x1111u32);
        let o_bits = b.shl(row.o, 3u32);
        Block32Row {
            two_o: b.shl(row.o, 1u32),
            line_up: [b.sub(0x5432u32, o_pairs), b.add(o_pairs, 0x3210u32)],
            d_shift: [o_bits, b.sub(16u32, o_bits)],
        }
    })
}

/// The span's products (see [`StagedStep::products`]).
fn products(
    four_bit: bool,
    b: &mut KernelBuilder,
    stage: Reg<U32>,
    r: &Reads,
    lane: &[Block32Row; 2],
) -> Vec<[Reg<F32>; 4]> {
    let bb = block_bytes(four_bit) as i64;
    // The lane's bytes of a block: eight quant bytes, or four bytes of nibbles.
    let (shift, run) = if four_bit { (2u32, 4) } else { (3, 8) };
    let lane_off = b.shl(r.t, shift);
    // Per row: its base in the stage (odd blocks' words and even blocks' d from it),
    // and 2o further (even blocks' words, odd blocks' d).
    let rows: [[Reg<U32>; 2]; 2] = std::array::from_fn(|k| {
        let at = b.add(stage, r.rows[k].at);
        let at2 = b.add(at, lane[k].two_o);
        [at, at2]
    });
    let quant_at: [[Reg<U32>; 2]; 2] = std::array::from_fn(|k| {
        let [at, at2] = rows[k];
        [b.add(at2, lane_off), b.add(at, lane_off)]
    });
    let act = b.add(stage, r.act);
    let act = b.add(act, lane_off);
    let mut sums: Vec<Option<[Reg<F32>; 4]>> = vec![None; r.tiles];
    for j in 0..BLOCKS as i64 {
        let parity = (j % 2) as usize;
        // The quants start 2 bytes into block j: an even block's words from its own
        // start (2o on), an odd block's from 2 bytes in.
        let word = if parity == 0 { bb * j } else { bb * j + 2 };
        let a: [[Reg<U32>; 2]; 2] = std::array::from_fn(|k| {
            let p = quant_at[k][parity];
            let sel = lane[k].line_up[parity];
            let words: Vec<Reg<U32>> = (0..=(run / 4))
                .map(|i| b.ld::<U32, U32>(Space::Shared, p, word + 4 * i as i64))
                .collect();
            let lined: Vec<Reg<U32>> = words.windows(2).map(|w| b.prmt(w[0], w[1], sel)).collect();
            if four_bit {
                nibble_runs(b, lined[0])
            } else {
                [lined[0], lined[1]]
            }
        });
        // Block j's d for each row: even blocks' at the row's base, odd ones' 2o on
        // and 2 bytes back.
        let d = std::array::from_fn::<_, 2, _>(|k| {
            let (base, off) = match parity {
                0 => (rows[k][0], bb * j),
                _ => (rows[k][1], bb * j - 2),
            };
            let w = b.ld::<U32, U32>(Space::Shared, base, off);
            let w = b.shr(w, lane[k].d_shift[parity]);
            let h = b.cvt::<U16, U32>(w, None);
            f16_bits(b, h)
        });
        for (n, sums) in sums.iter_mut().enumerate() {
            let at = 32 * j + i64::from(fragment_reads(four_bit).tile_bytes()) * n as i64;
            let x = if four_bit {
                [0, 16].map(|k| b.ld::<U32, U32>(Space::Shared, act, at + k))
            } else {
                b.ld_vec::<U32, U32, 2>(Space::Shared, act, at)
            };
            let zero = [0i32; 4].map(|v| b.mov(v));
            let p = b.mma_m16n8k32_s8([a[0][0], a[1][0], a[0][1], a[1][1]], x, zero);
            let prod = std::array::from_fn(|i| {
                let pf = b.cvt::<F32, _>(p[i], Some(Rounding::Rn));
                match sums {
                    None => b.mul(d[i / 2], pf),
                    Some(s) => b.fma(d[i / 2], pf, s[i]),
                }
            });
            *sums = Some(prod);
        }
    }
    sums.into_iter().map(|s| s.expect("eight blocks")).collect()
}

/// Q4_0's four bytes of nibbles as the two k runs of signed bytes: the low nibbles, then
/// the high ones, each minus 8 (`(n + 120) ^ 128` a byte, no carry out of any byte).
fn nibble_runs(b: &mut KernelBuilder, w: Reg<U32>) -> [Reg<U32>; 2] {
    let hi = b.shr(w, 4u32);
    [w, hi].map(|v| {
        let n = b.and(v, 0x0F0F_0F0Fu32);
        let n = b.add(n, 0x7878_7878u32);
        b.xor(n, 0x8080_8080u32)
    })
}
