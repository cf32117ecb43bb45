//! Paged KV caches (the block-table layout of vLLM-style serving): keys and values live
//! in a pool of fixed-size pages, `[pool_pages, heads_kv, page_size, dim]` each (a page
//! holds `page_size` consecutive positions of every key/value head of one sequence), and
//! a block table `[batch, max_pages]` of page ids says which page holds positions
//! `i * page_size..(i + 1) * page_size` of sequence `b`. Sequences grow a page at a time
//! and share one pool, with no per-sequence capacity reserved up front.
//!
//! The kernels are the contiguous layout's (decode attention in `attention.rs`, the
//! append in `kv_cache.rs`) with each row's address looked up through the table; page
//! ids past the pool are clamped to its last page, so a bad table can give wrong rows
//! but never an access outside the pool.

use super::attention::{
    DecodeChunkKernel, DecodeShape, HEAD_DIMS, attend_f64, check_heads, fits_u32, heads_suffix,
};
use super::decode_chunk::build_chunk;
use super::float_type::FloatType;
use super::helpers::elem_addr;
use super::kv_cache::{self, KvAppendKernel};
use super::{Family, Kernel, LaunchConfig};
use crate::error::{Result, shape_err};
use crate::ptx::{KernelBuilder, KernelIr, Reg, Space, U32, U64};

/// Where a paged cache's rows live, for one sequence and key/value head (see
/// the module doc): its row of the block table and the per-page offsets.
pub(super) struct Pages {
    /// `&table[seq * max_pages]`.
    row: Reg<U64>,
    /// `max_pages - 1` and `pool_pages - 1` (the clamps).
    last_slot: Reg<U32>,
    last_page: Reg<U32>,
    /// log2 of the rows per page.
    shift: Reg<U32>,
    /// Rows from one page to the next (`heads_kv << shift`), and this head's first row
    /// within a page (`hkv << shift`).
    page_rows: Reg<U32>,
    head_rows: Reg<U32>,
}

impl Pages {
    /// The table row of sequence `seq` (`max_pages` entries a row) in a pool of `pool`
    /// pages of `1 << shift` rows, for key/value head `hkv` of `heads_kv`.
    pub(super) fn new(
        b: &mut KernelBuilder,
        table: Reg<U64>,
        (seq, max_pages): (Reg<U32>, Reg<U32>),
        (pool, shift): (Reg<U32>, Reg<U32>),
        (hkv, heads_kv): (Reg<U32>, Reg<U32>),
    ) -> Pages {
        let at = b.mul(seq, max_pages);
        let row = elem_addr(b, table, at, 4);
        let last_slot = b.sub(max_pages, 1u32);
        let last_page = b.sub(pool, 1u32);
        let page_rows = b.shl(heads_kv, shift);
        let head_rows = b.shl(hkv, shift);
        Pages {
            row,
            last_slot,
            last_page,
            shift,
            page_rows,
            head_rows,
        }
    }

    /// The pool row of position `p`: page `table[seq][p >> shift]`, row `p` mod the page
    /// size of this head's part of it. The page id is clamped to the pool and the table
    /// index to the table, so an address computed for a row that is never loaded stays in
    /// bounds.
    pub(super) fn row(&self, b: &mut KernelBuilder, p: Reg<U32>) -> Reg<U32> {
        let slot = b.shr(p, self.shift);
        let slot = b.min(slot, self.last_slot);
        let ta = elem_addr(b, self.row, slot, 4);
        let page = b.ld::<U32, U64>(Space::Global, ta, 0);
        let page = b.min(page, self.last_page);
        let first = b.shl(slot, self.shift);
        let within = b.sub(p, first);
        let base = b.mad(page, self.page_rows, self.head_rows);
        b.add(base, within)
    }
}

/// The shape of a paged decode step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PagedShape {
    /// Sequences.
    pub batch: usize,
    /// Query heads.
    pub heads_q: usize,
    /// Key/value heads (divides `heads_q`).
    pub heads_kv: usize,
    /// Head dimension: 64, 128 or 256.
    pub dim: usize,
    /// Positions per page: a power of two.
    pub page_size: usize,
    /// Table entries per sequence (its longest length is `max_pages * page_size`).
    pub max_pages: usize,
    /// Pages in the pool.
    pub pool_pages: usize,
}

impl PagedShape {
    /// Checks the shape; `kernel` names the error.
    pub fn check(&self, kernel: &str) -> Result<()> {
        let s = self;
        if [
            s.batch,
            s.heads_q,
            s.heads_kv,
            s.dim,
            s.page_size,
            s.max_pages,
            s.pool_pages,
        ]
        .contains(&0)
        {
            return shape_err(kernel, format!("zero-size shape {s:?}"));
        }
        if !s.page_size.is_power_of_two() {
            return shape_err(
                kernel,
                format!("page size {} is not a power of two", s.page_size),
            );
        }
        check_heads(kernel, (s.heads_q, s.heads_kv, s.dim))?;
        if s.batch > 65535 || s.heads_q > 65535 {
            return shape_err(kernel, format!("{s:?} exceeds the grid"));
        }
        let pool = fits_u32(&[s.pool_pages, s.heads_kv, s.page_size, s.dim]);
        if !pool || !fits_u32(&[s.batch, s.max_pages]) || !fits_u32(&[s.max_pages, s.page_size]) {
            return shape_err(kernel, format!("{s:?} exceeds 32-bit indexing"));
        }
        Ok(())
    }

    /// The contiguous shape with the same longest sequence (for the split into chunks).
    pub fn as_decode(&self) -> DecodeShape {
        DecodeShape {
            batch: self.batch,
            heads_q: self.heads_q,
            heads_kv: self.heads_kv,
            capacity: self.max_pages.saturating_mul(self.page_size),
            dim: self.dim,
        }
    }

    /// Elements of each pool (keys, or values).
    pub fn pool_len(&self) -> usize {
        self.pool_pages * self.heads_kv * self.page_size * self.dim
    }

    /// The pool element index of element 0 of position `p` of key/value head `h` of
    /// sequence `b`, where the table has a page for it.
    pub fn row_index(&self, table: &[u32], b: usize, h: usize, p: usize) -> Option<usize> {
        let page = *table.get(b * self.max_pages + p / self.page_size)? as usize;
        (page < self.pool_pages && p < self.max_pages * self.page_size)
            .then(|| ((page * self.heads_kv + h) * self.page_size + p % self.page_size) * self.dim)
    }
}

/// The paged chunk kernel (head dimension, pool type, query heads a block):
/// [`DecodeChunkKernel`]'s parameters with `table` after `lens` and `max_pages`,
/// `pool_pages`, `page_shift` in place of `capacity`.
#[derive(Clone, Copy, Debug)]
pub struct PagedDecodeChunkKernel(pub u32, pub FloatType, pub u32);

impl Kernel for PagedDecodeChunkKernel {
    fn name(&self) -> String {
        let h = heads_suffix(self.2);
        format!("trueno_decode_attn_paged_d{}_{}{h}", self.0, self.1.name())
    }
    fn family(&self) -> Family {
        Family::decode_chunks(self.2)
    }
    fn build(&self) -> KernelIr {
        build_chunk(&self.name(), self.0, self.1, true, self.2)
    }
    /// `[splits, heads_q, batch]`, as the contiguous kernel.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        DecodeChunkKernel(self.0, self.1, self.2).launch_config(dims)
    }
}

/// The paged append: [`KvAppendKernel`]'s parameters with `table` after `positions` and
/// `max_pages`, `pool_pages`, `page_shift` in place of `capacity`. A position at or past
/// `max_pages * page_size` is left out.
#[derive(Clone, Copy, Debug)]
pub struct PagedKvAppendKernel(pub FloatType);

impl Kernel for PagedKvAppendKernel {
    fn name(&self) -> String {
        format!("trueno_kv_append_paged_{}", self.0.name())
    }
    fn family(&self) -> Family {
        Family::Attention
    }
    fn build(&self) -> KernelIr {
        kv_cache::build(&self.name(), self.0, true)
    }
    /// `[batch * heads_kv * dim]`.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        KvAppendKernel(self.0).launch_config(dims)
    }
}

/// Every paged-cache kernel of one head a block (the merge of the chunks is the
/// contiguous layout's; chunk kernels of several heads a block: [`super::attention::grouped`]).
pub fn all() -> Vec<Box<dyn Kernel>> {
    let mut v: Vec<Box<dyn Kernel>> = Vec::new();
    for t in FloatType::ALL {
        for d in HEAD_DIMS {
            v.push(Box::new(PagedDecodeChunkKernel(d, t, 1)));
        }
        v.push(Box::new(PagedKvAppendKernel(t)));
    }
    v
}

/// CPU reference in f64 over paged pools (f32 values): as
/// [`attention::reference`](super::attention::reference), positions `0..lens[b]` (capped
/// at `max_pages * page_size`) found through the table. Every position attended must
/// have a page in the pool.
pub fn reference(
    q: &[f32],
    (k, v): (&[f32], &[f32]),
    table: &[u32],
    lens: &[u32],
    shape: &PagedShape,
    scale: f32,
) -> Vec<f32> {
    let (hq, d) = (shape.heads_q, shape.dim);
    let group = hq / shape.heads_kv;
    let mut out = vec![0.0f32; q.len()];
    for (b, &len) in lens.iter().enumerate() {
        let n = (len as usize).min(shape.max_pages * shape.page_size);
        for h in 0..hq {
            let at = (b * hq + h) * d;
            let row = |p: usize| {
                shape
                    .row_index(table, b, h / group, p)
                    .expect("every attended position has a page")
            };
            attend_f64(&q[at..][..d], (k, v), n, row, scale, &mut out[at..][..d]);
        }
    }
    out
}

/// CPU reference of the paged append (f32 pool): row `positions[b] + t` of every head
/// of sequence `b` replaced by `new[b, t, h, :]` for `t < tokens`, positions past the
/// table left out.
pub fn append_reference(
    pool: &[f32],
    new: &[f32],
    table: &[u32],
    positions: &[u32],
    shape: &PagedShape,
    tokens: usize,
) -> Vec<f32> {
    let mut out = pool.to_vec();
    let (hkv, d) = (shape.heads_kv, shape.dim);
    for (b, &start) in positions.iter().enumerate() {
        for t in 0..tokens {
            for h in 0..hkv {
                if let Some(dst) = shape.row_index(table, b, h, start as usize + t) {
                    let src = ((b * tokens + t) * hkv + h) * d;
                    out[dst..dst + d].copy_from_slice(&new[src..][..d]);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> PagedShape {
        PagedShape {
            batch: 2,
            heads_q: 4,
            heads_kv: 2,
            dim: 64,
            page_size: 16,
            max_pages: 3,
            pool_pages: 5,
        }
    }

    #[test]
    fn shapes_are_checked() {
        let s = shape();
        assert!(s.check("k").is_ok());
        assert_eq!(s.as_decode().capacity, 48);
        assert_eq!(s.pool_len(), 5 * 2 * 16 * 64);
        for bad in [
            PagedShape { page_size: 12, ..s },
            PagedShape { pool_pages: 0, ..s },
            PagedShape { heads_kv: 3, ..s },
            PagedShape { dim: 96, ..s },
            PagedShape {
                pool_pages: 1 << 20,
                page_size: 1 << 10,
                ..s
            },
        ] {
            assert!(bad.check("k").is_err(), "{bad:?}");
        }
    }

    #[test]
    fn rows_are_found_through_the_table_and_out_of_range_is_none() {
        let s = shape();
        // Sequence 1's second page is pool page 4.
        let table = [2, 0, 1, 3, 4, 9];
        // Position 20 of sequence 1 = row 4 of page 4, head 1.
        assert_eq!(
            s.row_index(&table, 1, 1, 20),
            Some(((4 * 2 + 1) * 16 + 4) * 64)
        );
        // Page id 9 is past the pool; position 48 is past the table.
        assert_eq!(s.row_index(&table, 1, 0, 33), None);
        assert_eq!(s.row_index(&table, 0, 0, 48), None);
    }

    #[test]
    fn the_paged_reference_equals_the_contiguous_one_on_the_same_rows() {
        let s = shape();
        let table = [2u32, 0, 1, 3, 4, 1];
        let (hkv, d, cap) = (s.heads_kv, s.dim, 48);
        // A contiguous cache [batch, heads_kv, 48, dim] and the pools holding the same
        // rows where the table puts them.
        let val = |i: usize| ((i * 37 % 101) as f32 - 50.0) / 64.0;
        let kc: Vec<f32> = (0..2 * hkv * cap * d).map(val).collect();
        let vc: Vec<f32> = (0..2 * hkv * cap * d).map(|i| val(i + 7)).collect();
        let (mut kp, mut vp) = (vec![0.0; s.pool_len()], vec![0.0; s.pool_len()]);
        let lens = [40u32, 17];
        // Sequence 1's third table entry (page 1, sequence 0's) is past its length.
        for (b, &len) in lens.iter().enumerate() {
            for h in 0..hkv {
                for p in 0..len as usize {
                    let src = ((b * hkv + h) * cap + p) * d;
                    let dst = s.row_index(&table, b, h, p).unwrap();
                    kp[dst..dst + d].copy_from_slice(&kc[src..src + d]);
                    vp[dst..dst + d].copy_from_slice(&vc[src..src + d]);
                }
            }
        }
        let q: Vec<f32> = (0..2 * 4 * d).map(|i| val(i + 3)).collect();
        let want = super::super::attention::reference(&q, &kc, &vc, &lens, (4, hkv, cap, d), 0.125);
        let got = reference(&q, (&kp, &vp), &table, &lens, &s, 0.125);
        assert_eq!(got, want);
    }

    #[test]
    fn the_append_reference_writes_through_the_table() {
        let s = PagedShape {
            dim: 2,
            heads_kv: 1,
            heads_q: 1,
            page_size: 2,
            max_pages: 2,
            pool_pages: 3,
            batch: 2,
        };
        let pool = vec![0.0f32; s.pool_len()];
        // Sequence 0 at position 3 (page 1 of its table = pool page 2, row 1); sequence 1
        // at position 4, past its table: left out.
        let new = [1.0, 2.0, 3.0, 4.0];
        let out = append_reference(&pool, &new, &[0, 2, 1, 0], &[3, 4], &s, 1);
        assert_eq!(&out[(2 * 2 + 1) * 2..][..2], &[1.0, 2.0]);
        assert_eq!(out.iter().filter(|&&x| x != 0.0).count(), 2);
    }
}
