//! Batched matrix products over 3-D and 4-D (or any-rank) row-major tensors: the leading
//! dimensions are the batch, the last two the matrices. Small matrices go to threads one
//! batch entry each; large ones split inside `gemm`.

use super::api::Transpose;
use crate::engine::Engine;
use crate::error::{Result, TruenoError};
use crate::matrix::{MatMut, MatRef};

fn shape_err<T>(reason: String) -> Result<T> {
    Err(TruenoError::ShapeMismatch {
        op: "batched_matmul",
        reason,
    })
}

impl Engine {
    /// `C[..] = A[..] · B[..]` for `a` of shape `[batch.., m, k]` and `b` of shape
    /// `[batch.., k, n]` (the same batch dimensions) or `[k, n]` (one B for every entry).
    /// Returns C and its shape `[batch.., m, n]`.
    ///
    /// ```
    /// let e = trueno::engine()?;
    /// // Two 1x2 · 2x1 products.
    /// let (c, shape) = e.batched_matmul(&[1.0, 2.0, 3.0, 4.0], &[2, 1, 2], &[1.0, 1.0, 1.0, -1.0], &[2, 2, 1])?;
    /// assert_eq!((c, shape), (vec![3.0, -1.0], vec![2, 1, 1]));
    /// # Ok::<(), trueno::TruenoError>(())
    /// ```
    pub fn batched_matmul(
        &self,
        a: &[f32],
        a_shape: &[usize],
        b: &[f32],
        b_shape: &[usize],
    ) -> Result<(Vec<f32>, Vec<usize>)> {
        if a_shape.len() < 2 || b_shape.len() < 2 {
            return shape_err(format!(
                "shapes {a_shape:?} and {b_shape:?} need at least 2 dimensions"
            ));
        }
        let (abatch, am) = a_shape.split_at(a_shape.len() - 2);
        let (bbatch, bm) = b_shape.split_at(b_shape.len() - 2);
        let (m, k, n) = (am[0], am[1], bm[1]);
        if bm[0] != k {
            return shape_err(format!(
                "A matrices are {m}x{k} but B matrices are {}x{n}",
                bm[0]
            ));
        }
        let shared_b = bbatch.is_empty();
        if !shared_b && abatch != bbatch {
            return shape_err(format!("batch dimensions {abatch:?} and {bbatch:?} differ"));
        }
        let count = |dims: &[usize]| dims.iter().try_fold(1usize, |p, &d| p.checked_mul(d));
        let (Some(batch), Some(a_len), Some(b_len), Some(c_one)) = (
            count(abatch),
            count(a_shape),
            count(b_shape),
            m.checked_mul(n),
        ) else {
            return shape_err(format!("shapes {a_shape:?}, {b_shape:?} overflow"));
        };
        if a.len() != a_len {
            return Err(TruenoError::LengthMismatch {
                op: "batched_matmul",
                what: "a",
                expected: a_len,
                got: a.len(),
            });
        }
        if b.len() != b_len {
            return Err(TruenoError::LengthMismatch {
                op: "batched_matmul",
                what: "b",
                expected: b_len,
                got: b.len(),
            });
        }
        let mut c = vec![0.0f32; batch * c_one];
        let mut shape = abatch.to_vec();
        shape.extend([m, n]);
        if c.is_empty() {
            return Ok((c, shape));
        }
        let one = |i: usize, ci: &mut [f32]| -> Result<()> {
            let ai = MatRef::new(&a[i * m * k..(i + 1) * m * k], m, k, k.max(1))?;
            let bi = if shared_b {
                b
            } else {
                &b[i * k * n..(i + 1) * k * n]
            };
            let bi = MatRef::new(bi, k, n, n.max(1))?;
            let mut cv = MatMut::new(ci, m, n, n.max(1))?;
            self.gemm(1.0, ai, Transpose::No, bi, Transpose::No, 0.0, &mut cv)
        };
        #[cfg(feature = "parallel")]
        if batch > 1
            && crate::parallel::threads_for(
                crate::OpClass::MatMul,
                m.saturating_mul(n).saturating_mul(k),
            ) == 1
        {
            use rayon::prelude::*;
            c.par_chunks_mut(c_one)
                .enumerate()
                .try_for_each(|(i, ci)| one(i, ci))?;
            return Ok((c, shape));
        }
        for (i, ci) in c.chunks_mut(c_one).enumerate() {
            one(i, ci)?;
        }
        Ok((c, shape))
    }
}
