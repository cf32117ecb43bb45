//! The GEMM tests' reference: operands stored with padded row strides (padding poisoned
//! with NaN), one product case, and the check of every element against an f64 product
//! within `(k + 2) * eps * (|alpha| sum|a||b| + |beta| |c|)`.

use super::Rng;
use trueno::{Backend, Engine, MatMut, MatRef, Transpose};

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

/// The (alpha, beta) pairs the path tests take in turn: beta 0 over a NaN-filled C,
/// then C read back with beta 1 and with a negative beta.
pub const ALPHA_BETA: [(f32, f32); 3] = [(1.0, 0.0), (-1.5, 1.0), (0.5, -1.5)];

impl Case {
    /// `op(A) op(B)` with op(A) `m x k`, op(B) `k x n` and rows `pad` floats past their
    /// width; alpha and beta are `ALPHA_BETA[turn % 3]`.
    pub fn taking_turn(
        (m, n, k): (usize, usize, usize),
        (ta, tb): (Transpose, Transpose),
        turn: usize,
        pad: usize,
    ) -> Case {
        let (alpha, beta) = ALPHA_BETA[turn % 3];
        Case {
            m,
            n,
            k,
            ta,
            tb,
            alpha,
            beta,
            pad,
        }
    }
}

pub fn op_at(x: &Strided, t: Transpose, i: usize, j: usize) -> f32 {
    if t == Transpose::Yes {
        x.at(j, i)
    } else {
        x.at(i, j)
    }
}

/// Runs one case on `e`, the default path and the packed one on the same operands,
/// checking every element against the f64 reference within
/// `(k + 2) * eps * (|alpha| sum|a||b| + |beta| |c|)`, and that C's padding is untouched.
pub fn check(e: &Engine, rng: &mut Rng, c: &Case, what: &str) {
    let p = Product::new(rng, c);
    p.check(e, what, false);
    p.check(e, what, true);
}

/// `check` on each engine in turn, all on one set of operands, so the f64 reference (the
/// costly part of a big case, most of all under qemu) is computed once; each run on one
/// thread. `large`: the default path only (a case sized past a cache level runs the
/// packed loops already, so the forced run would repeat the same work).
pub fn check_each(engines: &[(Backend, Engine)], rng: &mut Rng, c: &Case, what: &str, large: bool) {
    if engines.is_empty() {
        return;
    }
    let p = Product::new(rng, c);
    for (backend, e) in engines {
        let what = format!("{} {what}", backend.name());
        one_thread(|| {
            p.check(e, &what, false);
            if !large {
                p.check(e, &what, true);
            }
        });
    }
}

/// `check` on each engine in turn inside `pool` (its threads splitting each product), the
/// operands and reference drawn anew for each.
pub fn check_each_in(
    pool: &rayon::ThreadPool,
    engines: &[(Backend, Engine)],
    rng: &mut Rng,
    c: &Case,
    what: &str,
) {
    for (backend, e) in engines {
        let what = format!("{} {what}", backend.name());
        pool.install(|| check(e, rng, c, &what));
    }
}

/// One case's operands (C's initial contents included) and the f64 reference for each
/// element of C: the expected value and its error bound.
pub struct Product<'c> {
    case: &'c Case,
    a: Strided,
    b: Strided,
    c0: Strided,
    want: Vec<(f64, f64)>,
}

impl<'c> Product<'c> {
    /// Random operands in [-1, 1] with the case's row padding; C NaN-filled when beta = 0.
    pub fn new(rng: &mut Rng, c: &'c Case) -> Self {
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
        let mut c0 = Strided::new(rng, c.m, c.n, c.pad);
        if c.beta == 0.0 {
            for i in 0..c.m {
                c0.data[i * c0.stride..i * c0.stride + c.n].fill(f32::NAN);
            }
        }
        let want = reference(c, &a, &b, &c0);
        Product {
            case: c,
            a,
            b,
            c0,
            want,
        }
    }

    /// Runs the product on `e` into a copy of C and checks every element and the padding.
    pub fn check(&self, e: &Engine, what: &str, packed: bool) {
        let c = self.case;
        let stride = self.c0.stride;
        let mut data = self.c0.data.clone();
        let mut cv = MatMut::new(&mut data, c.m, c.n, stride).unwrap();
        let (a, b) = (self.a.view(), self.b.view());
        if packed {
            e.gemm_packed_path(c.alpha, a, c.ta, b, c.tb, c.beta, &mut cv)
                .unwrap();
        } else {
            e.gemm(c.alpha, a, c.ta, b, c.tb, c.beta, &mut cv).unwrap();
        }
        for i in 0..c.m {
            for j in 0..c.n {
                let (want, bound) = self.want[i * c.n + j];
                let got = data[i * stride + j] as f64;
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
                if i * stride + j < data.len() {
                    assert!(
                        data[i * stride + j].to_bits() == self.c0.data[i * stride + j].to_bits(),
                        "{what}: padding ({i},{j}) written"
                    );
                }
            }
        }
    }
}

/// The f64 product, element by element, with its bound: `(want, bound)` in row-major order.
fn reference(c: &Case, a: &Strided, b: &Strided, c0: &Strided) -> Vec<(f64, f64)> {
    // op(A)'s rows and op(B)'s columns as contiguous f64 runs, so the inner loop reads both
    // in order (strided, it was most of the big cases' time under qemu). The loop re-reads
    // the smaller of the two for each element of the other, so the larger streams once
    // (a B of 100 MiB past L3 is read once, not once per row of C).
    let a_rows: Vec<f64> = (0..c.m)
        .flat_map(|i| (0..c.k).map(move |p| op_at(a, c.ta, i, p) as f64))
        .collect();
    let b_cols: Vec<f64> = (0..c.n)
        .flat_map(|j| (0..c.k).map(move |p| op_at(b, c.tb, p, j) as f64))
        .collect();
    let mut out = vec![(0.0, 0.0); c.m * c.n];
    let mut one = |i: usize, j: usize| {
        let (s, mag) = dot_and_magnitude(&a_rows[i * c.k..][..c.k], &b_cols[j * c.k..][..c.k]);
        let c_in = c0.at(i, j) as f64;
        let (want, bound_c) = if c.beta == 0.0 {
            (c.alpha as f64 * s, 0.0)
        } else {
            (
                c.alpha as f64 * s + c.beta as f64 * c_in,
                (c.beta as f64 * c_in).abs(),
            )
        };
        let bound =
            (c.k as f64 + 2.0) * f32::EPSILON as f64 * ((c.alpha as f64).abs() * mag + bound_c)
                + 1e-30;
        out[i * c.n + j] = (want, bound);
    };
    if c.m <= c.n {
        for j in 0..c.n {
            for i in 0..c.m {
                one(i, j);
            }
        }
    } else {
        for i in 0..c.m {
            for j in 0..c.n {
                one(i, j);
            }
        }
    }
    out
}

/// `(sum x y, sum |x y|)` in f64 (each product of two f32 values is exact), in four
/// independent partial sums: one running sum waits on each addition's latency, four keep
/// the adder busy (the big cases' references are billions of terms).
fn dot_and_magnitude(x: &[f64], y: &[f64]) -> (f64, f64) {
    let (mut s, mut mag) = ([0.0f64; 4], [0.0f64; 4]);
    let (xs, ys) = (x.chunks_exact(4), y.chunks_exact(4));
    let (x_tail, y_tail) = (xs.remainder(), ys.remainder());
    for (x4, y4) in xs.zip(ys) {
        for l in 0..4 {
            let p = x4[l] * y4[l];
            s[l] += p;
            mag[l] += p.abs();
        }
    }
    for (&xv, &yv) in x_tail.iter().zip(y_tail) {
        let p = xv * yv;
        s[0] += p;
        mag[0] += p.abs();
    }
    (
        s[0] + s[1] + (s[2] + s[3]),
        mag[0] + mag[1] + (mag[2] + mag[3]),
    )
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
    pool(1).install(f)
}

/// A rayon pool of `threads` threads (not on wasm32, which has none to spawn).
pub fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
}

/// Row-major A and B at each `(m, n, k, row padding)` on every ISA (one data set and
/// reference a shape), one thread, alpha and beta taking turns over (1, 0), (-1.5, 1) and
/// (0.5, -1.5); `large`: the default path only (see `check_each`).
pub fn check_row_major(
    seed: u64,
    shapes: &[(usize, usize, usize, usize)],
    what: &str,
    large: bool,
) {
    let mut rng = Rng::new(seed);
    let engines = super::engines();
    for (i, &(m, n, k, pad)) in shapes.iter().enumerate() {
        let case = Case::taking_turn((m, n, k), (Transpose::No, Transpose::No), i, pad);
        check_each(&engines, &mut rng, &case, what, large);
    }
}

/// Asserts that an `m x n x k` product of a row-major A and op(B) (`tb`) on one thread, on
/// the best ISA, packs no B by a pass (`gemm_profiled`'s pack B time zero): whole B
/// panels only (`n` a multiple of the tile's width), as a ragged last one is packed by a
/// pass.
pub fn assert_no_b_pass((m, n, k): (usize, usize, usize), tb: Transpose) {
    let pack_b = b_pass_time((m, n, k), tb);
    assert_eq!(pack_b, std::time::Duration::ZERO, "B packed by a pass");
}

/// The time an `m x n x k` product of a row-major A and op(B) (`tb`) on one thread, on
/// the best ISA, spends packing B by a pass (`gemm_profiled`'s pack B time).
pub fn b_pass_time((m, n, k): (usize, usize, usize), tb: Transpose) -> std::time::Duration {
    let e = trueno::engine().unwrap();
    let a = trueno::Matrix::from_fn(m, k, |i, j| (i + j) as f32 * 1e-3).unwrap();
    let b = match tb {
        Transpose::No => trueno::Matrix::from_fn(k, n, |i, j| (i ^ j) as f32 * 1e-3),
        Transpose::Yes => trueno::Matrix::from_fn(n, k, |i, j| (i ^ j) as f32 * 1e-3),
    }
    .unwrap();
    let mut c = trueno::Matrix::zeros(m, n).unwrap();
    let (no, cv) = (Transpose::No, &mut c.view_mut());
    let p = one_thread(|| e.gemm_profiled(1.0, a.view(), no, b.view(), tb, 0.0, cv)).unwrap();
    p.pack_b
}
