//! GEMM against a naive f64 reference: every size 0..=33 per dimension, random shapes up
//! to 300 (primes included), all four transpose combinations, row strides wider than the
//! matrix, alpha/beta in {0, 1, -1.5}, NaN-filled C when beta = 0, every ISA this CPU has,
//! one thread and the whole pool.

mod common;

use common::{Rng, engines};
use trueno::{Engine, MatMut, MatRef, Matrix, Transpose, TruenoError};

/// An operand stored with a row stride wider than its width (padding poisoned with NaN so
/// a read outside the view shows up).
struct Strided {
    data: Vec<f32>,
    rows: usize,
    cols: usize,
    stride: usize,
}

impl Strided {
    fn new(rng: &mut Rng, rows: usize, cols: usize, pad: usize) -> Self {
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
    fn view(&self) -> MatRef<'_> {
        let span = match self.rows {
            0 => 0,
            r => (r - 1) * self.stride + self.cols,
        };
        MatRef::new(&self.data[..span], self.rows, self.cols, self.stride).unwrap()
    }
    fn at(&self, i: usize, j: usize) -> f32 {
        self.data[i * self.stride + j]
    }
}

struct Case {
    m: usize,
    n: usize,
    k: usize,
    ta: Transpose,
    tb: Transpose,
    alpha: f32,
    beta: f32,
    pad: usize,
}

fn op_at(x: &Strided, t: Transpose, i: usize, j: usize) -> f32 {
    if t == Transpose::Yes {
        x.at(j, i)
    } else {
        x.at(i, j)
    }
}

/// Runs one case on `e`, checking every element against the f64 reference within
/// `(k + 2) * eps * (|alpha| sum|a||b| + |beta| |c|)`, and that C's padding is untouched.
fn check(e: &Engine, rng: &mut Rng, c: &Case, what: &str) {
    check_path(e, rng, c, what, false);
    check_path(e, rng, c, what, true);
}

fn check_path(e: &Engine, rng: &mut Rng, c: &Case, what: &str, packed: bool) {
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
    for i in 0..c.m {
        for j in 0..c.n {
            let (mut s, mut mag) = (0.0f64, 0.0f64);
            for p in 0..c.k {
                let prod = op_at(&a, c.ta, i, p) as f64 * op_at(&b, c.tb, p, j) as f64;
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

const OPS: [(Transpose, Transpose); 4] = [
    (Transpose::No, Transpose::No),
    (Transpose::No, Transpose::Yes),
    (Transpose::Yes, Transpose::No),
    (Transpose::Yes, Transpose::Yes),
];

fn one_thread<R: Send>(f: impl FnOnce() -> R + Send) -> R {
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

#[test]
fn every_size_up_to_33_in_each_dimension_on_every_isa() {
    let mut rng = Rng::new(11);
    for (backend, e) in engines() {
        for dim in 0..3 {
            for v in 0..=33 {
                let (m, n, k) = match dim {
                    0 => (v, 17, 13),
                    1 => (9, v, 21),
                    _ => (19, 11, v),
                };
                for (ta, tb) in OPS {
                    let case = Case {
                        m,
                        n,
                        k,
                        ta,
                        tb,
                        alpha: 1.5,
                        beta: -1.5,
                        pad: 3,
                    };
                    check(&e, &mut rng, &case, backend.name());
                }
            }
        }
    }
}

#[test]
fn alpha_and_beta_combinations_and_nan_filled_c_when_beta_is_zero() {
    let mut rng = Rng::new(12);
    for (backend, e) in engines() {
        for alpha in [0.0, 1.0, -1.5] {
            for beta in [0.0, 1.0, -1.5] {
                for (m, n, k) in [(5, 7, 3), (33, 47, 29), (70, 65, 130)] {
                    for (ta, tb) in OPS {
                        let case = Case {
                            m,
                            n,
                            k,
                            ta,
                            tb,
                            alpha,
                            beta,
                            pad: 1,
                        };
                        check(&e, &mut rng, &case, backend.name());
                    }
                }
            }
        }
    }
}

#[test]
fn random_shapes_up_to_300_single_and_multi_threaded() {
    let mut rng = Rng::new(13);
    let primes = [1, 2, 3, 5, 7, 31, 61, 127, 131, 257, 293];
    let e = trueno::engine().unwrap();
    for round in 0..24 {
        let pick = |rng: &mut Rng| {
            if rng.next_u64().is_multiple_of(3) {
                primes[(rng.next_u64() % primes.len() as u64) as usize]
            } else {
                1 + (rng.next_u64() % 300) as usize
            }
        };
        let (m, n, k) = (pick(&mut rng), pick(&mut rng), pick(&mut rng));
        let (ta, tb) = OPS[round % 4];
        let case = Case {
            m,
            n,
            k,
            ta,
            tb,
            alpha: -1.5,
            beta: if round % 2 == 0 { 0.0 } else { 1.0 },
            pad: round % 5,
        };
        check(e, &mut rng, &case, "pool");
        let mut rng2 = Rng::new(round as u64);
        one_thread(|| check(e, &mut rng2, &case, "1 thread"));
    }
    // A contiguous column vector B (row stride 1): the A·x path of `gemm`.
    for (backend, e) in engines() {
        for (ta, tb) in OPS {
            let case = Case {
                m: 130,
                n: 1,
                k: 257,
                ta,
                tb,
                alpha: -1.5,
                beta: 1.0,
                pad: 0,
            };
            check(&e, &mut rng, &case, backend.name());
        }
    }
    // Shapes that cross the cache blocks (KC, MC, NC) on every ISA.
    for (backend, e) in engines() {
        let b = trueno::gemm::blocking_for(backend);
        let case = Case {
            m: b.mc + 3,
            n: 2 * b.nr + 5,
            k: b.kc + 7,
            ta: Transpose::No,
            tb: Transpose::No,
            alpha: 1.0,
            beta: 0.5,
            pad: 2,
        };
        check(&e, &mut rng, &case, backend.name());
    }
}

#[test]
fn shape_errors_are_reported() {
    let e = trueno::engine().unwrap();
    let a = Matrix::zeros(2, 3).unwrap();
    let b = Matrix::zeros(4, 2).unwrap();
    let mut c = Matrix::zeros(2, 2).unwrap();
    let err = e
        .gemm(
            1.0,
            a.view(),
            Transpose::No,
            b.view(),
            Transpose::No,
            0.0,
            &mut c.view_mut(),
        )
        .unwrap_err();
    assert!(matches!(err, TruenoError::ShapeMismatch { .. }), "{err}");
    let b = Matrix::zeros(3, 5).unwrap();
    let err = e
        .gemm(
            1.0,
            a.view(),
            Transpose::No,
            b.view(),
            Transpose::No,
            0.0,
            &mut c.view_mut(),
        )
        .unwrap_err();
    assert!(err.to_string().contains("C is 2x2"), "{err}");
    assert!(Matrix::from_vec(2, 2, vec![1.0; 3]).is_err());
    assert!(
        MatRef::new(&[0.0; 10], 3, 4, 3).is_err(),
        "stride below width"
    );
    assert!(
        MatRef::new(&[0.0; 10], 3, 4, 4).is_err(),
        "buffer too short"
    );
    assert!(
        MatRef::new(&[0.0; 11], 3, 3, 4).is_ok(),
        "the last row needs no padding"
    );
    assert!(a.view().sub(1, 1, 2, 2).is_err());
}

#[test]
fn gemv_and_its_transpose_match_the_reference_on_every_isa() {
    let mut rng = Rng::new(21);
    for (backend, e) in engines() {
        for (m, k) in [
            (0, 5),
            (1, 1),
            (3, 17),
            (17, 3),
            (33, 65),
            (130, 257),
            (257, 130),
        ] {
            let a = Strided::new(&mut rng, m, k, 3);
            let x = rng.vec(k, -1.0, 1.0);
            let xt = rng.vec(m, -1.0, 1.0);
            for (alpha, beta) in [(1.0, 0.0), (-1.5, 1.0), (0.5, -1.5)] {
                let y0 = rng.vec(m, -1.0, 1.0);
                let mut y = if beta == 0.0 {
                    vec![f32::NAN; m]
                } else {
                    y0.clone()
                };
                e.gemv(alpha, a.view(), &x, beta, &mut y).unwrap();
                for i in 0..m {
                    let (s, mag): (f64, f64) = (0..k)
                        .map(|p| a.at(i, p) as f64 * x[p] as f64)
                        .fold((0.0, 0.0), |(s, g), v| (s + v, g + v.abs()));
                    let want = alpha as f64 * s
                        + if beta == 0.0 {
                            0.0
                        } else {
                            beta as f64 * y0[i] as f64
                        };
                    let bound = (k as f64 + 2.0)
                        * f32::EPSILON as f64
                        * (alpha.abs() as f64 * mag + (beta as f64 * y0[i] as f64).abs())
                        + 1e-30;
                    assert!(
                        (y[i] as f64 - want).abs() <= bound,
                        "{} gemv {m}x{k}: y[{i}] = {} want {want}",
                        backend.name(),
                        y[i]
                    );
                }
                let y1 = rng.vec(k, -1.0, 1.0);
                let mut yt = if beta == 0.0 {
                    vec![f32::NAN; k]
                } else {
                    y1.clone()
                };
                e.gemv_t(alpha, &xt, a.view(), beta, &mut yt).unwrap();
                for j in 0..k {
                    let (s, mag): (f64, f64) = (0..m)
                        .map(|i| xt[i] as f64 * a.at(i, j) as f64)
                        .fold((0.0, 0.0), |(s, g), v| (s + v, g + v.abs()));
                    let want = alpha as f64 * s
                        + if beta == 0.0 {
                            0.0
                        } else {
                            beta as f64 * y1[j] as f64
                        };
                    let bound = (m as f64 + 2.0)
                        * f32::EPSILON as f64
                        * (alpha.abs() as f64 * mag + (beta as f64 * y1[j] as f64).abs())
                        + 1e-30;
                    assert!(
                        (yt[j] as f64 - want).abs() <= bound,
                        "{} gemv_t {m}x{k}: y[{j}] = {} want {want}",
                        backend.name(),
                        yt[j]
                    );
                }
            }
        }
        let a = Matrix::zeros(3, 4).unwrap();
        assert!(matches!(
            e.gemv(1.0, a.view(), &[0.0; 3], 0.0, &mut [0.0; 3]),
            Err(TruenoError::LengthMismatch { .. })
        ));
        assert!(matches!(
            e.gemv_t(1.0, &[0.0; 3], a.view(), 0.0, &mut [0.0; 3]),
            Err(TruenoError::LengthMismatch { .. })
        ));
    }
}

#[test]
fn thin_products_with_b_transposed_match_the_reference_on_every_isa() {
    // x·Wᵀ shapes (few rows of C, B stored n x k) run as Cᵀ = op(B)ᵀ op(A)ᵀ, with C
    // written through its transpose: 2-16 rows take the one-vector kernel, up to 128 the
    // full one; k past one KC block (later blocks add into the transposed C), ragged
    // tiles on every side, both layouts of A, beta 0 over NaN and beta != 0.
    let mut rng = Rng::new(31);
    for (backend, e) in engines() {
        for (i, &(m, n, k)) in [
            (2, 67, 300),
            (7, 129, 600),
            (8, 96, 1030),
            (16, 200, 257),
            (17, 300, 600),
            (40, 333, 129),
            (128, 257, 520),
        ]
        .iter()
        .enumerate()
        {
            for ta in [Transpose::No, Transpose::Yes] {
                let (alpha, beta) = [(1.0, 0.0), (-1.5, 1.0), (0.5, -1.5)][i % 3];
                let case = Case {
                    m,
                    n,
                    k,
                    ta,
                    tb: Transpose::Yes,
                    alpha,
                    beta,
                    pad: i % 4,
                };
                let what = format!("{} x·Wᵀ", backend.name());
                one_thread(|| check(&e, &mut rng, &case, &what));
            }
        }
    }
}

#[test]
fn a_past_one_block_read_in_place_for_a_thin_b_matches_the_reference() {
    // At most four B panels wide: A is read in place however many rows it has (more than
    // any MC block here), panel by panel across B's panels; row strides of 1024 floats
    // (all rows on one L1 set) and ragged ones, both layouts of B.
    let mut rng = Rng::new(37);
    for (backend, e) in engines() {
        for (i, &(m, n, k, pad)) in [(1030, 100, 520, 0), (1100, 33, 1024, 0), (1029, 7, 300, 3)]
            .iter()
            .enumerate()
        {
            for tb in [Transpose::No, Transpose::Yes] {
                let (alpha, beta) = [(1.0, 0.0), (-1.5, 1.0), (0.5, -1.5)][i % 3];
                let case = Case {
                    m,
                    n,
                    k,
                    ta: Transpose::No,
                    tb,
                    alpha,
                    beta,
                    pad,
                };
                let what = format!("{} thin B", backend.name());
                one_thread(|| check(&e, &mut rng, &case, &what));
            }
        }
    }
}

#[test]
fn thin_products_split_over_the_inner_dimension_match_the_reference() {
    // Few rows of C, a long k: each thread of the pool takes a range of k into its own
    // copy of C (the first with beta), summed afterwards. Two and three threads (ranges
    // of unequal length), every transpose pair, beta 0 over a NaN-filled C and beta != 0.
    if cfg!(target_arch = "wasm32") {
        return;
    }
    let mut rng = Rng::new(29);
    let e = trueno::engine().unwrap();
    for threads in [2, 3] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        for (i, &(m, n, k)) in [
            (7, 300, 1100),
            (128, 33, 1501),
            (1, 2100, 1100),
            (31, 97, 2000),
        ]
        .iter()
        .enumerate()
        {
            for (j, (ta, tb)) in OPS.into_iter().enumerate() {
                let (alpha, beta) = [(-1.5, 0.0), (1.0, 1.0), (0.5, -1.5)][(i + j) % 3];
                let case = Case {
                    m,
                    n,
                    k,
                    ta,
                    tb,
                    alpha,
                    beta,
                    pad: (i + j) % 4,
                };
                pool.install(|| check(e, &mut rng, &case, "split k"));
            }
        }
    }
}

#[test]
fn gemv_keeps_a_non_finite_row_to_its_own_output() {
    // A·x runs four rows a pass: a NaN or Inf in one row must reach that row's y only.
    let mut rng = Rng::new(23);
    let (m, k) = (11, 70);
    for (backend, e) in engines() {
        for (bad_row, bad) in [(1, f32::NAN), (5, f32::INFINITY), (10, f32::NEG_INFINITY)] {
            let mut a = Strided::new(&mut rng, m, k, 2);
            let col = 37;
            a.data[bad_row * a.stride + col] = bad;
            let x: Vec<f32> = (0..k).map(|p| if p == col { 1.0 } else { 0.5 }).collect();
            let mut y = vec![0.0f32; m];
            e.gemv(1.0, a.view(), &x, 0.0, &mut y).unwrap();
            for (i, &yi) in y.iter().enumerate() {
                if i == bad_row {
                    assert!(
                        yi.is_nan() == bad.is_nan() && (bad.is_nan() || yi == bad),
                        "{} row {i}: {yi}",
                        backend.name()
                    );
                } else {
                    let want: f64 = (0..k).map(|p| a.at(i, p) as f64 * x[p] as f64).sum();
                    assert!(
                        (yi as f64 - want).abs() <= 1e-4,
                        "{} row {i}: {yi} want {want}",
                        backend.name()
                    );
                }
            }
        }
    }
}

#[test]
fn transpose_is_exact_at_ragged_sizes_and_strides_on_every_isa() {
    let mut rng = Rng::new(22);
    for (backend, e) in engines() {
        for (r, c) in [
            (0, 3),
            (1, 1),
            (1, 33),
            (31, 1),
            (7, 9),
            (8, 8),
            (9, 7),
            (32, 32),
            (33, 65),
            (40, 17),
            (100, 257),
        ] {
            let a = Strided::new(&mut rng, r, c, 5);
            let ds = r + 2;
            let mut out = vec![f32::NAN; c * ds];
            let mut dv = MatMut::new(&mut out, c, r, ds).unwrap();
            e.transpose(a.view(), &mut dv).unwrap();
            for j in 0..c {
                for i in 0..r {
                    assert_eq!(
                        out[j * ds + i].to_bits(),
                        a.at(i, j).to_bits(),
                        "{} {r}x{c} ({i},{j})",
                        backend.name()
                    );
                }
                // The destination's row padding is never written.
                assert!(out[j * ds + r..(j + 1) * ds].iter().all(|v| v.is_nan()));
            }
        }
    }
    for (r, c) in [(1, 33), (33, 65), (100, 257)] {
        let a = Strided::new(&mut rng, r, c, 5);
        let owned = a.view().to_matrix().transpose();
        assert_eq!((owned.rows(), owned.cols()), (c, r));
        for i in 0..r {
            for j in 0..c {
                assert_eq!(owned.get(j, i), Some(a.at(i, j)));
            }
        }
    }
    let e = trueno::engine().unwrap();
    let a = Matrix::zeros(2, 3).unwrap();
    let mut wrong = Matrix::zeros(2, 3).unwrap();
    assert!(matches!(
        e.transpose(a.view(), &mut wrong.view_mut()),
        Err(TruenoError::ShapeMismatch { .. })
    ));
}

#[test]
fn batched_matmul_over_3d_and_4d_shapes_and_a_shared_b() {
    let mut rng = Rng::new(23);
    let e = trueno::engine().unwrap();
    let reference = |a: &[f32], b: &[f32], m: usize, n: usize, k: usize| -> Vec<f64> {
        (0..m * n)
            .map(|ij| {
                (0..k)
                    .map(|p| a[(ij / n) * k + p] as f64 * b[p * n + ij % n] as f64)
                    .sum()
            })
            .collect()
    };
    for (batch, shared) in [
        (vec![3], false),
        (vec![2, 3], false),
        (vec![4], true),
        (vec![1], false),
        (vec![0], false),
    ] {
        let (m, n, k) = (5, 7, 9);
        let nb: usize = batch.iter().product();
        let a = rng.vec(nb * m * k, -1.0, 1.0);
        let b = rng.vec(if shared { k * n } else { nb * k * n }, -1.0, 1.0);
        let mut ash = batch.clone();
        ash.extend([m, k]);
        let bsh = if shared {
            vec![k, n]
        } else {
            batch.iter().copied().chain([k, n]).collect()
        };
        let (c, csh) = e.batched_matmul(&a, &ash, &b, &bsh).unwrap();
        let mut want_shape = batch.clone();
        want_shape.extend([m, n]);
        assert_eq!(csh, want_shape);
        for i in 0..nb {
            let bi = if shared {
                &b[..]
            } else {
                &b[i * k * n..(i + 1) * k * n]
            };
            let want = reference(&a[i * m * k..(i + 1) * m * k], bi, m, n, k);
            for (g, w) in c[i * m * n..(i + 1) * m * n].iter().zip(want) {
                assert!(
                    (*g as f64 - w).abs() <= 1e-5,
                    "batch {batch:?} entry {i}: {g} vs {w}"
                );
            }
        }
    }
    assert!(
        e.batched_matmul(&[0.0; 6], &[6], &[0.0; 6], &[2, 3])
            .is_err(),
        "1-D input"
    );
    assert!(
        e.batched_matmul(&[0.0; 12], &[2, 2, 3], &[0.0; 12], &[3, 2, 2])
            .is_err(),
        "batch dims differ"
    );
    assert!(
        e.batched_matmul(&[0.0; 12], &[2, 2, 3], &[0.0; 8], &[2, 2, 2])
            .is_err(),
        "inner dims differ"
    );
    assert!(matches!(
        e.batched_matmul(&[0.0; 11], &[2, 2, 3], &[0.0; 6], &[3, 2]),
        Err(TruenoError::LengthMismatch { .. })
    ));
}
