//! The sm_80 tensor-core GEMM's global-to-shared copies (`cp.async`, 16 bytes each):
//! per-thread addressing of an operand's chunks into a pipeline stage, k-major (A, a
//! TF32 `Bᵀ`) or n-major (B as stored, 16-bit or f32), and the issue of one k-tile's
//! copies with the ragged edges zero-filled.

use super::gemm_mma::{THREADS, TILE};
use super::helpers::elem_addr;
use crate::ptx::{Cmp, KernelBuilder, Pred, Reg, U32, U64};

/// How far an operand's copy pointer moves from one k-tile to the next: a constant
/// along k-major rows, a register (`bk` rows of `n`) down an n-major B.
#[derive(Clone, Copy)]
pub(super) enum TileStep {
    Bytes(u64),
    Reg(Reg<U64>),
}

/// Which of a thread's chunks lie inside the matrix (before the k check).
enum ChunkOk {
    /// One predicate per chunk, computed once and held through the loop.
    Held(Vec<Reg<Pred>>),
    /// The rows left in the matrix from the thread's first row (0 past it): chunk `j`,
    /// `j * step` rows on, is inside when `left > j * step`. Tested at each copy, so a
    /// second k-major operand (TF32's `Bᵀ`) adds no predicates to A's held ones (the
    /// hardware has seven).
    RowsLeft {
        left: Reg<U32>,
        step: u32,
        chunks: u32,
    },
}

impl ChunkOk {
    fn chunks(&self) -> u32 {
        match self {
            ChunkOk::Held(v) => v.len() as u32,
            ChunkOk::RowsLeft { chunks, .. } => *chunks,
        }
    }

    fn get(&self, b: &mut KernelBuilder, j: u32) -> Reg<Pred> {
        match self {
            ChunkOk::Held(v) => v[j as usize],
            ChunkOk::RowsLeft { left, step, .. } => b.setp::<U32>(Cmp::Gt, *left, j * step),
        }
    }
}

/// Per-thread addressing of one operand's copies into a stage: the shared offset
/// (within the stage) and global pointer of this thread's first chunk, what each later
/// chunk adds, and which chunks lie inside the matrix: chunk `j` copies when `ok` says
/// so and its k, `k0 + k_first + j * k_stride`, is below `k`.
pub(super) struct OperandCopies {
    smem: Reg<U32>,
    smem_step: u32,
    pub ptr: Reg<U64>,
    next: Reg<U64>,
    pub tile_step: TileStep,
    ok: ChunkOk,
    k_first: Reg<U32>,
    k_stride: u32,
}

/// The copies of a k-major operand (A, or a TF32 `Bᵀ`): 128 rows from `row0` (of
/// `rows`) of `row_bytes` each, chunk (row r, 16-byte column q) for r = t / chunks + j *
/// row_step, q = t % chunks, stored at chunk q ^ swizzle(r) of its row from `smem_at`;
/// the row checks held as predicates or tested at each copy (`held`).
#[allow(clippy::too_many_arguments)]
pub(super) fn k_major_copies(
    b: &mut KernelBuilder,
    t: Reg<U32>,
    g: Reg<U64>,
    (row0, rows, k): (Reg<U32>, Reg<U32>, Reg<U32>),
    row_bytes: u32,
    eb: u32,
    smem_at: u32,
    held: bool,
    swizzle: impl Fn(&mut KernelBuilder, Reg<U32>) -> Reg<U32>,
) -> OperandCopies {
    let chunks = row_bytes / 16;
    let row_step = THREADS / chunks;
    let per_thread = TILE * chunks / THREADS;
    let r = b.shr(t, chunks.trailing_zeros());
    let q = b.and(t, chunks - 1);
    let sw = swizzle(b, r);
    let sq = b.xor(q, sw);
    let smem = b.mul(r, row_bytes);
    let mut smem = b.mad(sq, 16u32, smem);
    if smem_at != 0 {
        smem = b.add(smem, smem_at);
    }
    let row = b.add(row0, r);
    let ok = if held {
        ChunkOk::Held(
            (0..per_thread)
                .map(|j| {
                    let rj = b.add(row, j * row_step);
                    b.setp::<U32>(Cmp::Lt, rj, rows)
                })
                .collect(),
        )
    } else {
        let top = b.max(rows, row);
        ChunkOk::RowsLeft {
            left: b.sub(top, row),
            step: row_step,
            chunks: per_thread,
        }
    };
    let k_first = b.shl(q, (16 / eb).trailing_zeros());
    let idx = b.mad(row, k, k_first);
    let ptr = elem_addr(b, g, idx, eb);
    let next = b.mul_wide(k, row_step * eb);
    OperandCopies {
        smem,
        smem_step: row_step * row_bytes,
        ptr,
        next,
        tile_step: TileStep::Bytes((row_bytes) as u64),
        ok,
        k_first,
        k_stride: 0,
    }
}

/// `p ? 16 : 0` bytes and the address to read (`base` when nothing is read).
pub(super) fn cp_chunk(
    b: &mut KernelBuilder,
    p: Reg<Pred>,
    ptr: Reg<U64>,
    base: Reg<U64>,
) -> (Reg<U32>, Reg<U64>) {
    let bytes = b.selp::<U32>(16u32, 0u32, p);
    let src = b.selp::<U64>(ptr, base, p);
    (bytes, src)
}

/// The copies of an n-major B (`bk` k-rows of 128 columns from `col0`): 16-bit rows of
/// 256 bytes (16 chunks: k-row t / 16 + 16 j, chunk t % 16) or f32 rows of 512 bytes
/// (32 chunks: k-row t / 32 + 8 j, chunk t % 32), chunk q stored at chunk
/// q ^ [`n_major_swizzle`] of its row, after A's tile (`a_tile_bytes`).
pub(super) fn n_major_copies(
    b: &mut KernelBuilder,
    t: Reg<U32>,
    gb: Reg<U64>,
    (col0, n): (Reg<U32>, Reg<U32>),
    bk: u32,
    eb: u32,
    a_tile_bytes: u32,
) -> OperandCopies {
    let chunks = TILE * eb / 16;
    let rows_per_pass = THREADS / chunks;
    let row_bytes = TILE * eb;
    let br = b.shr(t, chunks.trailing_zeros());
    let bq = b.and(t, chunks - 1);
    let sw = n_major_swizzle(b, br, eb);
    let sq = b.xor(bq, sw);
    let b_smem = b.shl(br, row_bytes.trailing_zeros());
    let b_smem = b.mad(sq, 16u32, b_smem);
    let b_smem = b.add(b_smem, a_tile_bytes);
    let b_col = b.shl(bq, (16 / eb).trailing_zeros());
    let b_col = b.add(col0, b_col);
    let b_col_ok = b.setp::<U32>(Cmp::Lt, b_col, n);
    let b_idx = b.mad(br, n, b_col);
    let b_ptr = elem_addr(b, gb, b_idx, eb);
    let b_next_rows = b.mul_wide(n, rows_per_pass * eb);
    let b_tile_step = b.mul_wide(n, bk * eb);
    OperandCopies {
        smem: b_smem,
        smem_step: rows_per_pass * row_bytes,
        ptr: b_ptr,
        next: b_next_rows,
        tile_step: TileStep::Reg(b_tile_step),
        ok: ChunkOk::Held(vec![b_col_ok; (bk / rows_per_pass) as usize]),
        k_first: br,
        k_stride: rows_per_pass,
    }
}

/// The 16-byte-chunk swizzle of an n-major B's k-row `row`: `row % 8` for 16-bit rows
/// (the eight rows one `ldmatrix.trans` reads land in eight bank groups), `2 (row % 4)`
/// for f32 rows (a TF32 fragment read spans four k-rows at two adjacent chunks each, an
/// even one and the next: the eight land in eight bank groups).
pub(super) fn n_major_swizzle(b: &mut KernelBuilder, row: Reg<U32>, eb: u32) -> Reg<U32> {
    match eb {
        2 => b.and(row, 7u32),
        _ => {
            let r = b.and(row, 3u32);
            b.shl(r, 1u32)
        }
    }
}

/// Issues one operand's copies of the k-tile at `k0` (its pointer `first` already
/// advanced there) into the stage at `base`; chunks outside the matrix or past `k`
/// copy nothing and zero-fill (`g` stands in as their source address).
pub(super) fn issue_copies(
    b: &mut KernelBuilder,
    cp: &OperandCopies,
    base: Reg<U32>,
    (k0, k): (Reg<U32>, Reg<U32>),
    first: Reg<U64>,
    g: Reg<U64>,
) {
    let k_first = b.add(k0, cp.k_first);
    // Along k-major rows every chunk has the same k; down an n-major B each its own.
    let row_k_ok = (cp.k_stride == 0).then(|| b.setp::<U32>(Cmp::Lt, k_first, k));
    let dst = b.add(base, cp.smem);
    let mut ptr = first;
    for j in 0..cp.ok.chunks() {
        let ok = cp.ok.get(b, j);
        let k_ok = match row_k_ok {
            Some(p) => p,
            None => {
                let kj = b.add(k_first, j * cp.k_stride);
                b.setp::<U32>(Cmp::Lt, kj, k)
            }
        };
        let p = b.and_pred(ok, k_ok);
        if j > 0 {
            ptr = b.add(ptr, cp.next);
        }
        let (bytes, src) = cp_chunk(b, p, ptr, g);
        let dst = b.add(dst, j * cp.smem_step);
        b.cp_async_16(dst, src, bytes);
    }
}
