//! Cache-blocked transpose: 32 x 32 tiles, so both the rows read and the columns written
//! stay in L1 while a tile is moved (a naive transpose misses on every write of a large
//! matrix).

use crate::engine::Engine;
use crate::error::{Result, TruenoError};
use crate::matrix::{MatMut, MatRef, Matrix};

const TILE: usize = 32;

impl Engine {
    /// Writes `srcᵀ` into `dst` (`dst` is `src.cols() x src.rows()`; any row strides).
    ///
    /// ```
    /// use trueno::Matrix;
    /// let e = trueno::engine()?;
    /// let a = Matrix::from_vec(2, 3, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])?;
    /// let mut t = Matrix::zeros(3, 2)?;
    /// e.transpose(a.view(), &mut t.view_mut())?;
    /// assert_eq!(t.as_slice(), &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    /// # Ok::<(), trueno::TruenoError>(())
    /// ```
    pub fn transpose(&self, src: MatRef<'_>, dst: &mut MatMut<'_>) -> Result<()> {
        let (r, c) = (src.rows(), src.cols());
        if dst.rows() != c || dst.cols() != r {
            return Err(TruenoError::ShapeMismatch {
                op: "transpose",
                reason: format!(
                    "source is {r}x{c}, destination {}x{} (want {c}x{r})",
                    dst.rows(),
                    dst.cols()
                ),
            });
        }
        transpose_blocked(src, dst);
        Ok(())
    }
}

/// The tiled copy; shapes already checked.
fn transpose_blocked(src: MatRef<'_>, dst: &mut MatMut<'_>) {
    let (r, c) = (src.rows(), src.cols());
    let (ss, ds) = (src.stride(), dst.stride());
    for i0 in (0..r).step_by(TILE) {
        for j0 in (0..c).step_by(TILE) {
            let (i1, j1) = ((i0 + TILE).min(r), (j0 + TILE).min(c));
            for j in j0..j1 {
                let out = &mut dst.data[j * ds + i0..j * ds + i1];
                for (o, i) in out.iter_mut().zip(i0..i1) {
                    *o = src.data[i * ss + j];
                }
            }
        }
    }
}

impl Matrix {
    /// The transpose, as a new matrix.
    ///
    /// ```
    /// use trueno::Matrix;
    /// let a = Matrix::from_vec(1, 2, vec![1.0, 2.0])?;
    /// assert_eq!(a.transpose().as_slice(), &[1.0, 2.0]);
    /// assert_eq!(a.transpose().rows(), 2);
    /// # Ok::<(), trueno::TruenoError>(())
    /// ```
    pub fn transpose(&self) -> Matrix {
        let mut t = Matrix {
            rows: self.cols,
            cols: self.rows,
            data: vec![0.0; self.data.len()],
        };
        transpose_blocked(self.view(), &mut t.view_mut());
        t
    }
}
