//! Small products without packing: register tiles straight over op(A) and the rows of B,
//! or dot products when B is transposed.

use super::store::{scale_c, scale_row, update_c, with_beta};
use super::task::GemmTask;
use crate::simd::Simd;

/// Rows `i0..i0+R` x columns `j0..j0 + (NV-1)*LANES + last` of C from op(A) and the rows
/// of B directly (B not transposed), accumulated in registers over all of k.
#[inline(always)]
fn small_tile<S: Simd, const R: usize, const NV: usize>(
    s: S,
    t: &GemmTask,
    i0: usize,
    j0: usize,
    last: usize,
) {
    let l = S::LANES;
    let full = |v: usize| v + 1 < NV || last == l;
    let mut acc = [[s.zero(); NV]; R];
    // op(A)(i0 + r, p) is `adata[r * rs + p * cs]`: the extent checked once here, each
    // element then read unchecked. Checked per element, the R row offsets were spilled
    // and reloaded every k step wherever the inlining around this loop changed (16^3:
    // 150-160 ns against 98-103, Zen 5 VM).
    let (rs, cs) = if t.ta { (1, t.lda) } else { (t.lda, 1) };
    let first = i0 * rs;
    let adata = &t.a[first..first + (R - 1) * rs + (t.k - 1) * cs + 1];
    for p in 0..t.k {
        let brow = &t.b[p * t.ldb + j0..];
        let mut bv = [s.zero(); NV];
        for (v, b) in bv.iter_mut().enumerate() {
            *b = if full(v) {
                s.load(&brow[v * l..])
            } else {
                s.load_partial(&brow[v * l..v * l + last], 0.0)
            };
        }
        for (r, acc_r) in acc.iter_mut().enumerate() {
            // SAFETY: r < R and p < k, inside the extent checked above.
            let a = s.splat(unsafe { *adata.as_ptr().add(r * rs + p * cs) });
            for (x, &b) in acc_r.iter_mut().zip(&bv) {
                *x = s.fma(a, b, *x);
            }
        }
    }
    let (va, vb) = (s.splat(t.alpha), s.splat(t.beta));
    let width = (NV - 1) * l + last;
    for (r, acc_r) in acc.iter().enumerate() {
        // SAFETY: row i0 + r, columns j0..j0 + width of this task's block of C.
        let row = unsafe {
            std::slice::from_raw_parts_mut(t.c.ptr.add((i0 + r) * t.c.stride + j0), width)
        };
        for (v, &a) in acc_r.iter().enumerate() {
            let w = if full(v) { l } else { last };
            update_c(s, &mut row[v * l..v * l + w], a, va, vb, t.beta);
        }
    }
}

/// Small problems: no packing. Rows of C are updated with SIMD axpys over rows of op(B)
/// (op(B) not transposed), or filled with SIMD dot products of rows of A and B
/// (A plain, B transposed). Returns false for the layout it does not cover.
#[inline(always)]
pub(crate) fn gemm_small<S: Simd>(s: S, t: &GemmTask) -> bool {
    if t.m == 0 || t.n == 0 {
        return true;
    }
    if t.k == 0 {
        scale_c(t);
        return true;
    }
    let l = S::LANES;
    // One column of C with a contiguous B column is A·x: dot products, like B transposed.
    let column_vector = t.n == 1 && !t.tb && t.ldb == 1;
    if !t.tb && t.m < 4 && !column_vector {
        // A row or three of C (xᵀ·A): stream B once, row after row, adding each row,
        // scaled, into C's rows (which stay in L1).
        for i in 0..t.m {
            // SAFETY: row i of this task's block of C.
            let row = unsafe { std::slice::from_raw_parts_mut(t.c.ptr.add(i * t.c.stride), t.n) };
            scale_row(row, t.beta);
            for p in 0..t.k {
                let w = t.alpha * t.a_at(i, p);
                let vw = s.splat(w);
                let brow = &t.b[p * t.ldb..][..t.n];
                let mut cs = row.chunks_exact_mut(S::LANES);
                let mut bs = brow.chunks_exact(S::LANES);
                for (c, b) in (&mut cs).zip(&mut bs) {
                    s.store(s.fma(vw, s.load(b), s.load(c)), c);
                }
                for (c, &b) in cs.into_remainder().iter_mut().zip(bs.remainder()) {
                    *c = w.mul_add(b, *c);
                }
            }
        }
        return true;
    }
    if !t.tb && !column_vector {
        // Register tiles without packing: 4 rows x up to 4 vectors of columns (8 rows
        // when C is at most two vectors wide), so 8-16 independent accumulator chains
        // hide the FMA latency even for 16x16 products.
        // (Two vectors x 8 rows is 16 accumulators: only with 32 registers.)
        let narrow = t.n.div_ceil(l) <= if l >= 16 { 2 } else { 1 };
        let mut i = 0;
        while i < t.m {
            let rows = match t.m - i {
                r if r >= 8 && narrow => 8,
                r if r >= 4 => 4,
                _ => 1,
            };
            let mut j = 0;
            while j < t.n {
                let nv = (t.n - j).div_ceil(l).min(4);
                let last = (t.n - j).min(nv * l) - (nv - 1) * l;
                match (rows, nv) {
                    (8, 2) => small_tile::<S, 8, 2>(s, t, i, j, last),
                    (8, _) => small_tile::<S, 8, 1>(s, t, i, j, last),
                    (4, 4) => small_tile::<S, 4, 4>(s, t, i, j, last),
                    (4, 3) => small_tile::<S, 4, 3>(s, t, i, j, last),
                    (4, 2) => small_tile::<S, 4, 2>(s, t, i, j, last),
                    (4, _) => small_tile::<S, 4, 1>(s, t, i, j, last),
                    (_, 4) => small_tile::<S, 1, 4>(s, t, i, j, last),
                    (_, 3) => small_tile::<S, 1, 3>(s, t, i, j, last),
                    (_, 2) => small_tile::<S, 1, 2>(s, t, i, j, last),
                    _ => small_tile::<S, 1, 1>(s, t, i, j, last),
                }
                j += (nv - 1) * l + last;
            }
            i += rows;
        }
        return true;
    }
    if t.ta {
        return false;
    }
    let store = |i: usize, j: usize, d: f64| {
        // SAFETY: element (i, j) of this task's block of C.
        let c = unsafe { &mut *t.c.ptr.add(i * t.c.stride + j) };
        *c = with_beta(*c, t.alpha * d as f32, t.beta);
    };
    // B transposed (or one contiguous column): row j of op(B)ᵀ is contiguous.
    let mut i0 = 0;
    if t.n == 1 {
        // A·x: four rows of A a pass (x loaded once for four rows' loads, four streams
        // for the prefetcher; one row at a time read 4096^2 at 86% of the read bandwidth).
        let x = &t.b[..t.k];
        while i0 + 4 <= t.m {
            let rows: [&[f32]; 4] = std::array::from_fn(|r| &t.a[(i0 + r) * t.lda..][..t.k]);
            let d = crate::ops::reduce::dot4_vec(s, rows, x);
            for (r, &d) in d.iter().enumerate() {
                store(i0 + r, 0, d);
            }
            i0 += 4;
        }
    }
    for i in i0..t.m {
        let arow = &t.a[i * t.lda..][..t.k];
        for j in 0..t.n {
            let brow = &t.b[j * t.ldb..][..t.k];
            // The engine's blocked dot product (the GEMV loop): several accumulators,
            // bounded summation error.
            store(
                i,
                j,
                crate::ops::reduce::reduce2_vec(s, crate::ops::Reduce2Op::Dot, arow, brow),
            );
        }
    }
    true
}
