//! Matrix-vector products on the GEMM machinery's unpacked loops: `A·x` as one SIMD dot
//! product per row (four accumulators), `xᵀ·A` as SIMD axpys over the rows of A. Both read
//! A exactly once, which is what bounds them.

use super::api::Transpose;
use super::task::GemmPath;
use crate::engine::Engine;
use crate::error::{Result, TruenoError};
use crate::matrix::{MatMut, MatRef};

fn len_err<T>(what: &'static str, expected: usize, got: usize) -> Result<T> {
    Err(TruenoError::LengthMismatch {
        op: "gemv",
        what,
        expected,
        got,
    })
}

impl Engine {
    /// `y = alpha * A x + beta * y` for an `m x k` A (any row stride). `beta == 0` never
    /// reads y.
    ///
    /// ```
    /// use trueno::Matrix;
    /// let e = trueno::engine()?;
    /// let a = Matrix::from_vec(2, 3, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])?;
    /// let mut y = [0.0; 2];
    /// e.gemv(1.0, a.view(), &[1.0, 0.0, -1.0], 0.0, &mut y)?;
    /// assert_eq!(y, [-2.0, -2.0]);
    /// # Ok::<(), trueno::TruenoError>(())
    /// ```
    pub fn gemv(
        &self,
        alpha: f32,
        a: MatRef<'_>,
        x: &[f32],
        beta: f32,
        y: &mut [f32],
    ) -> Result<()> {
        let (m, k) = (a.rows(), a.cols());
        if x.len() != k {
            return len_err("x", k, x.len());
        }
        if y.len() != m {
            return len_err("y", m, y.len());
        }
        let xv = MatRef::new(x, 1, k, k.max(1))?;
        let mut yv = MatMut::new(y, m, 1, 1)?;
        self.gemm_impl(
            alpha,
            a,
            Transpose::No,
            xv,
            Transpose::Yes,
            beta,
            &mut yv,
            GemmPath::Unpacked,
            None,
        )
    }

    /// `y = alpha * xᵀ A + beta * y` for an `m x n` A: y has `n` elements, x has `m`.
    ///
    /// ```
    /// use trueno::Matrix;
    /// let e = trueno::engine()?;
    /// let a = Matrix::from_vec(2, 3, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])?;
    /// let mut y = [0.0; 3];
    /// e.gemv_t(1.0, &[1.0, -1.0], a.view(), 0.0, &mut y)?;
    /// assert_eq!(y, [-3.0, -3.0, -3.0]);
    /// # Ok::<(), trueno::TruenoError>(())
    /// ```
    pub fn gemv_t(
        &self,
        alpha: f32,
        x: &[f32],
        a: MatRef<'_>,
        beta: f32,
        y: &mut [f32],
    ) -> Result<()> {
        let (m, n) = (a.rows(), a.cols());
        if x.len() != m {
            return len_err("x", m, x.len());
        }
        if y.len() != n {
            return len_err("y", n, y.len());
        }
        let xv = MatRef::new(x, 1, m, m.max(1))?;
        let mut yv = MatMut::new(y, 1, n, n.max(1))?;
        self.gemm_impl(
            alpha,
            xv,
            Transpose::No,
            a,
            Transpose::No,
            beta,
            &mut yv,
            GemmPath::Unpacked,
            None,
        )
    }
}
