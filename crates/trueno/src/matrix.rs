//! Row-major f32 matrices and borrowed views with a row stride, so a sub-matrix is a view,
//! not a copy.

use crate::aligned::AlignedF32;
use crate::error::{Result, TruenoError};

fn shape_err<T>(op: &'static str, reason: String) -> Result<T> {
    Err(TruenoError::ShapeMismatch { op, reason })
}

/// Elements a `rows x cols` view with row stride `stride` spans (0 when empty).
fn span(rows: usize, cols: usize, stride: usize) -> Option<usize> {
    if rows == 0 || cols == 0 {
        return Some(0);
    }
    (rows - 1).checked_mul(stride)?.checked_add(cols)
}

fn check_view(op: &'static str, len: usize, rows: usize, cols: usize, stride: usize) -> Result<()> {
    if stride < cols && rows > 1 {
        return shape_err(
            op,
            format!("row stride {stride} is less than the width {cols}"),
        );
    }
    match span(rows, cols, stride) {
        Some(need) if need <= len => Ok(()),
        Some(need) => shape_err(
            op,
            format!("{rows}x{cols} with stride {stride} needs {need} elements, buffer has {len}"),
        ),
        None => shape_err(op, format!("{rows}x{cols} with stride {stride} overflows")),
    }
}

/// Where the `rows x cols` block at `(i, j)` of a `(rows, cols, stride)` view starts, or
/// the error saying it does not fit.
fn block_start(
    op: &'static str,
    (r, c, stride): (usize, usize, usize),
    i: usize,
    j: usize,
    rows: usize,
    cols: usize,
) -> Result<usize> {
    if i.checked_add(rows).is_none_or(|e| e > r) || j.checked_add(cols).is_none_or(|e| e > c) {
        return shape_err(op, format!("block ({i},{j}) {rows}x{cols} outside {r}x{c}"));
    }
    Ok(if rows == 0 || cols == 0 {
        0
    } else {
        i * stride + j
    })
}

/// An owned row-major matrix. The ones trueno allocates (`zeros`, `identity`, `from_fn`,
/// clones, transposes) start on a 64-byte cache line, as faer's do, and from 4 MiB on
/// Linux are advised onto transparent huge pages (the GEMM's reads of rows pages apart
/// then stay within the TLB); `from_vec` keeps the caller's buffer where it is, as it is.
///
/// ```
/// use trueno::Matrix;
/// let a = Matrix::from_vec(2, 3, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])?;
/// assert_eq!(a.get(1, 2), Some(6.0));
/// let right = a.view().sub(0, 1, 2, 2)?;          // columns 1..3, no copy
/// assert_eq!(right.row(1), &[5.0, 6.0]);
/// # Ok::<(), trueno::TruenoError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Matrix {
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) data: AlignedF32,
}

impl Matrix {
    /// A `rows x cols` matrix of zeros.
    pub fn zeros(rows: usize, cols: usize) -> Result<Self> {
        let n = rows
            .checked_mul(cols)
            .ok_or_else(|| TruenoError::ShapeMismatch {
                op: "Matrix::zeros",
                reason: format!("{rows}x{cols} overflows"),
            })?;
        Ok(Matrix {
            rows,
            cols,
            data: AlignedF32::zeros(n),
        })
    }

    /// The `n x n` identity.
    pub fn identity(n: usize) -> Result<Self> {
        let mut m = Self::zeros(n, n)?;
        (0..n).for_each(|i| m.data[i * n + i] = 1.0);
        Ok(m)
    }

    /// Takes `data` as `rows x cols`, row-major; its length must be `rows * cols`.
    pub fn from_vec(rows: usize, cols: usize, data: Vec<f32>) -> Result<Self> {
        match rows.checked_mul(cols) {
            Some(n) if n == data.len() => Ok(Matrix {
                rows,
                cols,
                data: AlignedF32::from_vec(data),
            }),
            _ => shape_err(
                "Matrix::from_vec",
                format!(
                    "{rows}x{cols} needs {} elements, got {}",
                    rows.saturating_mul(cols),
                    data.len()
                ),
            ),
        }
    }

    /// `f(i, j)` for every element.
    pub fn from_fn(
        rows: usize,
        cols: usize,
        mut f: impl FnMut(usize, usize) -> f32,
    ) -> Result<Self> {
        let mut m = Self::zeros(rows, cols)?;
        for i in 0..rows {
            for j in 0..cols {
                m.data[i * cols + j] = f(i, j);
            }
        }
        Ok(m)
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Columns.
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// The elements, row-major.
    pub fn as_slice(&self) -> &[f32] {
        &self.data
    }
    /// The elements, row-major, mutable.
    pub fn as_mut_slice(&mut self) -> &mut [f32] {
        &mut self.data
    }
    /// The elements, row-major, as a `Vec` (one copy for a matrix trueno allocated, to
    /// move them off its cache-line offset; none for one built by `from_vec`).
    pub fn into_vec(self) -> Vec<f32> {
        self.data.into_vec()
    }
    /// Element `(i, j)`, or `None` outside the matrix.
    pub fn get(&self, i: usize, j: usize) -> Option<f32> {
        (i < self.rows && j < self.cols).then(|| self.data[i * self.cols + j])
    }
    /// A view of the whole matrix.
    pub fn view(&self) -> MatRef<'_> {
        MatRef {
            data: &self.data,
            rows: self.rows,
            cols: self.cols,
            stride: self.cols,
        }
    }
    /// A mutable view of the whole matrix.
    pub fn view_mut(&mut self) -> MatMut<'_> {
        MatMut {
            rows: self.rows,
            cols: self.cols,
            stride: self.cols,
            data: &mut self.data,
        }
    }
}

/// A borrowed `rows x cols` matrix whose rows start `stride` elements apart.
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a> {
    pub(crate) data: &'a [f32],
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) stride: usize,
}

impl<'a> MatRef<'a> {
    /// A view of `data` as `rows x cols` with row stride `stride` (at least `cols`).
    pub fn new(data: &'a [f32], rows: usize, cols: usize, stride: usize) -> Result<Self> {
        check_view("MatRef::new", data.len(), rows, cols, stride)?;
        Ok(MatRef {
            data,
            rows,
            cols,
            stride,
        })
    }
    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Columns.
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// Distance between row starts.
    pub fn stride(&self) -> usize {
        self.stride
    }
    /// Row `i` (panics only if `i >= rows`, like slice indexing).
    pub fn row(&self, i: usize) -> &'a [f32] {
        &self.data[i * self.stride..i * self.stride + self.cols]
    }
    /// Element `(i, j)`, or `None` outside.
    pub fn get(&self, i: usize, j: usize) -> Option<f32> {
        (i < self.rows && j < self.cols).then(|| self.data[i * self.stride + j])
    }
    /// The `rows x cols` block starting at `(i, j)`, sharing memory.
    pub fn sub(&self, i: usize, j: usize, rows: usize, cols: usize) -> Result<MatRef<'a>> {
        let start = block_start(
            "MatRef::sub",
            (self.rows, self.cols, self.stride),
            i,
            j,
            rows,
            cols,
        )?;
        Ok(MatRef {
            data: &self.data[start..],
            rows,
            cols,
            stride: self.stride,
        })
    }
    /// An owned copy (on a cache line, as `Matrix::zeros`).
    pub fn to_matrix(&self) -> Matrix {
        let mut data = AlignedF32::zeros(self.rows * self.cols);
        for i in 0..self.rows {
            data[i * self.cols..][..self.cols].copy_from_slice(self.row(i));
        }
        Matrix {
            rows: self.rows,
            cols: self.cols,
            data,
        }
    }
}

/// A mutable borrowed matrix with a row stride.
#[derive(Debug)]
pub struct MatMut<'a> {
    pub(crate) data: &'a mut [f32],
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) stride: usize,
}

impl<'a> MatMut<'a> {
    /// A mutable view of `data` as `rows x cols` with row stride `stride`.
    pub fn new(data: &'a mut [f32], rows: usize, cols: usize, stride: usize) -> Result<Self> {
        check_view("MatMut::new", data.len(), rows, cols, stride)?;
        Ok(MatMut {
            data,
            rows,
            cols,
            stride,
        })
    }
    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Columns.
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// Distance between row starts.
    pub fn stride(&self) -> usize {
        self.stride
    }
    /// A read-only view.
    pub fn as_ref(&self) -> MatRef<'_> {
        MatRef {
            data: self.data,
            rows: self.rows,
            cols: self.cols,
            stride: self.stride,
        }
    }
    /// The mutable `rows x cols` block at `(i, j)`.
    pub fn sub_mut(&mut self, i: usize, j: usize, rows: usize, cols: usize) -> Result<MatMut<'_>> {
        let start = block_start(
            "MatMut::sub_mut",
            (self.rows, self.cols, self.stride),
            i,
            j,
            rows,
            cols,
        )?;
        Ok(MatMut {
            data: &mut self.data[start..],
            rows,
            cols,
            stride: self.stride,
        })
    }
    /// Row `i`, mutable.
    pub fn row_mut(&mut self, i: usize) -> &mut [f32] {
        &mut self.data[i * self.stride..i * self.stride + self.cols]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on_a_line(m: &Matrix) -> bool {
        crate::aligned::on_a_line(m.as_slice())
    }

    #[test]
    fn matrices_trueno_allocates_start_on_a_cache_line() {
        // 512 x 512 is a 1 MiB buffer: glibc's mmap'd chunks put a plain Vec 16 bytes
        // past a line.
        for (r, c) in [(1, 1), (3, 5), (512, 512)] {
            let z = Matrix::zeros(r, c).unwrap();
            let f = Matrix::from_fn(r, c, |i, j| (i * c + j) as f32).unwrap();
            let t = f.transpose();
            let copy = f.view().sub(0, 0, r, c).unwrap().to_matrix();
            for (what, m) in [("zeros", &z), ("from_fn", &f), ("transpose", &t)] {
                assert!(on_a_line(m), "{what} {r}x{c}");
            }
            assert!(on_a_line(&f.clone()) && on_a_line(&copy), "{r}x{c}");
            assert_eq!(copy, f);
            assert!(on_a_line(&Matrix::identity(r).unwrap()));
            // A strided sub-view copies row by row: element (i, j) is f's (i + 1, j + 1).
            let part = f.view().sub(1, 1, r - 1, c - 1).unwrap().to_matrix();
            assert_eq!((part.rows(), part.cols()), (r - 1, c - 1));
            for i in 0..r - 1 {
                for j in 0..c - 1 {
                    assert_eq!(part.get(i, j), Some(((i + 1) * c + j + 1) as f32));
                }
            }
        }
    }

    #[test]
    fn a_callers_buffer_is_kept_and_every_matrix_comes_back_as_its_elements() {
        let v: Vec<f32> = (0..6).map(|x| x as f32).collect();
        let given = v.clone();
        let at = given.as_ptr();
        let m = Matrix::from_vec(2, 3, given).unwrap();
        assert_eq!(m.as_slice().as_ptr(), at);
        assert_eq!(m.clone(), m);
        let back = m.into_vec();
        assert_eq!((back.as_ptr(), &back[..]), (at, &v[..]));
        // An allocated one comes back as exactly its elements, in order.
        let f = Matrix::from_fn(2, 3, |i, j| (i * 3 + j) as f32).unwrap();
        assert_eq!(f.into_vec(), v);
        assert_eq!(
            format!("{:?}", Matrix::zeros(1, 2).unwrap().as_slice()),
            "[0.0, 0.0]"
        );
    }
}
