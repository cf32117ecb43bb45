//! The GEMM tests' reference: operands stored with padded row strides (padding poisoned
//! with NaN), one product case, and the check of every element against an f64 product
//! within `(k + 2) * eps * (|alpha| sum|a||b| + |beta| |c|)`.

use super::Rng;
use trueno::{Engine, MatMut, MatRef, Transpose};

/// An operand stored with a row stride wider than its width (padding poisoned with NaN so
/// a read outside the view shows up).
pub struct Strided {
    pub data: Vec<f32>,
    pub rows: usize,
    pub cols: usize,
    pub stride: usize,
}

impl Strided {
    pub fn new(rng: &mut Rng, rows: usize, cols: usize, pad: usize) -> Self {
        let stride = cols + pad;
        let mut data = vec![f32::NAN; rows * stride + pad];
        for i in 0..rows {
            for j in 0..cols {
                data[i * stride + j] = rng.uniform(-1.0, 1.0);
            }
        }
        Strided {
            data,
            rows,
            cols,
            stride,
        }
    }
    /// The view over exactly the elements it spans, so a kernel that reads past its last
    /// row (a ragged tile's missing rows) fails on the slice's bounds.
    pub fn view(&self) -> MatRef<'_> {
        let span = match self.rows {
            0 => 0,
            r => (r - 1) * self.stride + self.cols,
        };
        MatRef::new(&self.data[..span], self.rows, self.cols, self.stride).unwrap()
    }
    pub fn at(&self, i: usize, j: usize) -> f32 {
        self.data[i * self.stride + j]
    }
}

pub struct Case {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub ta: Transpose,
    pub tb: Transpose,
    pub alpha: f32,
    pub beta: f32,
    pub pad: usize,
}

pub fn op_at(x: &Strided, t: Transpose, i: usize, j: usize) -> f32 {
    if t == Transpose::Yes {
        x.at(j, i)
    } else {
        x.at(i, j)
    }
}

/// Runs one case on `e`, checking every element against the f64 reference within
/// `(k + 2) * eps * (|alpha| sum|a||b| + |beta| |c|)`, and that C's padding is untouched.
pub fn check(e: &Engine, rng: &mut Rng, c: &Case, what: &str) {
    check_path(e, rng, c, what, false);
    check_path(e, rng, c, what, true);
}

pub fn check_path(e: &Engine, rng: &mut Rng, c: &Case, what: &str, packed: bool) {
    let (ar, ac) = if c.ta == Transpose::Yes {
        (c.k, c.m)
    } else {
        (c.m, c.k)
    };
    let (br, bc) = if c.tb == Transpose::Yes {
        (c.n, c.k)
    } else {
        (c.k, c.n)
    };
    let a = Strided::new(rng, ar, ac, c.pad);
    let b = Strided::new(rng, br, bc, c.pad);
    let mut cm = Strided::new(rng, c.m, c.n, c.pad);
    if c.beta == 0.0 {
        for i in 0..c.m {
            cm.data[i * cm.stride..i * cm.stride + c.n].fill(f32::NAN);
        }
    }
    let before = cm.data.clone();
    let stride = cm.stride;
    let mut cv = MatMut::new(&mut cm.data, c.m, c.n, stride).unwrap();
    if packed {
        e.gemm_packed_path(c.alpha, a.view(), c.ta, b.view(), c.tb, c.beta, &mut cv)
            .unwrap();
    } else {
        e.gemm(c.alpha, a.view(), c.ta, b.view(), c.tb, c.beta, &mut cv)
            .unwrap();
    }
    // op(A)'s rows and op(B)'s columns as contiguous f64 runs, so the reference's inner
    // loop reads both in order (strided, it was most of the big cases' time under qemu).
    let (ra, rb) = (&a, &b);
    let a_rows: Vec<f64> = (0..c.m)
        .flat_map(|i| (0..c.k).map(move |p| op_at(ra, c.ta, i, p) as f64))
        .collect();
    let b_cols: Vec<f64> = (0..c.n)
        .flat_map(|j| (0..c.k).map(move |p| op_at(rb, c.tb, p, j) as f64))
        .collect();
    for i in 0..c.m {
        for j in 0..c.n {
            let (mut s, mut mag) = (0.0f64, 0.0f64);
            let (ar, bc) = (&a_rows[i * c.k..][..c.k], &b_cols[j * c.k..][..c.k]);
            for (&x, &y) in ar.iter().zip(bc) {
                let prod = x * y;
                s += prod;
                mag += prod.abs();
            }
            let c0 = before[i * stride + j] as f64;
            let (want, bound_c) = if c.beta == 0.0 {
                (c.alpha as f64 * s, 0.0)
            } else {
                (
                    c.alpha as f64 * s + c.beta as f64 * c0,
                    (c.beta as f64 * c0).abs(),
                )
            };
            let got = cm.data[i * stride + j] as f64;
            let bound =
                (c.k as f64 + 2.0) * f32::EPSILON as f64 * ((c.alpha as f64).abs() * mag + bound_c)
                    + 1e-30;
            assert!(
                (got - want).abs() <= bound,
                "{what} packed={packed}: {}x{}x{} ta={:?} tb={:?} alpha={} beta={} pad={}: C({i},{j}) = {got}, want {want} (bound {bound:e})",
                c.m,
                c.n,
                c.k,
                c.ta,
                c.tb,
                c.alpha,
                c.beta,
                c.pad
            );
        }
        // Padding past the row's end is never written.
        for j in c.n..stride {
            if i * stride + j < cm.data.len() {
                assert!(
                    cm.data[i * stride + j].to_bits() == before[i * stride + j].to_bits(),
                    "{what}: padding ({i},{j}) written"
                );
            }
        }
    }
}

pub const OPS: [(Transpose, Transpose); 4] = [
    (Transpose::No, Transpose::No),
    (Transpose::No, Transpose::Yes),
    (Transpose::Yes, Transpose::No),
    (Transpose::Yes, Transpose::Yes),
];

pub fn one_thread<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    // wasm32 has no threads to spawn a pool on: everything already runs on one.
    if cfg!(target_arch = "wasm32") {
        return f();
    }
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap()
        .install(f)
}
