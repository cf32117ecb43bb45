//! GEMM against a naive f64 reference: every size 0..=33 per dimension, random shapes up
//! to 300 (primes included), all four transpose combinations, row strides wider than the
//! matrix, alpha/beta in {0, 1, -1.5}, NaN-filled C when beta = 0, every ISA this CPU has,
//! one thread and the whole pool; shape errors, the transpose op and batched products.
//! GEMV is in `gemv.rs`, the shape-specific paths (x·Wᵀ, thin B, k split) in
//! `gemm_paths.rs`, the shared reference in `common/gemm_ref.rs`.

mod common;

use common::gemm_ref::{Case, OPS, Strided, check, one_thread, pool};
use common::{Rng, engines};
use trueno::{MatMut, MatRef, Matrix, Transpose, TruenoError};

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

/// A destination at every float offset in a cache line, its stride whole lines (the case
/// where the transpose leaves the first rows to its element loop so the rest write whole
/// lines), including sources shorter than that lead; and a transpose big enough to be
/// split across threads (three, so the pieces are uneven), on every ISA.
#[test]
fn transpose_is_exact_at_every_destination_line_offset_and_when_split_across_threads() {
    let mut rng = Rng::new(23);
    // `whole`: the view takes the buffer to its end, past its last row.
    let check =
        |e: &trueno::Engine, a: &Strided, offset: usize, ds: usize, whole: bool, what: &str| {
            let (r, c) = (a.rows, a.cols);
            // With `whole`, a hundred more rows' room: past where a split's last piece ends.
            let room = if whole { 100 * ds } else { 0 };
            let mut buf = vec![f32::NAN; c * ds + 32 + room];
            let base = buf.as_ptr().align_offset(64) + offset;
            // The view ends at the last row's last element: a write past it fails the slice.
            let span = if c == 0 { 0 } else { (c - 1) * ds + r };
            let end = if whole { buf.len() } else { base + span };
            let mut dv = MatMut::new(&mut buf[base..end], c, r, ds).unwrap();
            e.transpose(a.view(), &mut dv).unwrap();
            for j in 0..c {
                for i in 0..r {
                    assert_eq!(
                        buf[base + j * ds + i].to_bits(),
                        a.at(i, j).to_bits(),
                        "{what} {r}x{c} offset {offset} ({i},{j})"
                    );
                }
                let pad_end = (base + (j + 1) * ds).min(buf.len());
                assert!(buf[base + j * ds + r..pad_end].iter().all(|v| v.is_nan()));
            }
            assert!(
                buf[base + span..].iter().all(|v| v.is_nan()),
                "{what} wrote past the view"
            );
            assert!(
                buf[..base].iter().all(|v| v.is_nan()),
                "{what} wrote before the view"
            );
        };
    for (backend, e) in engines() {
        for (r, c) in [(3, 40), (15, 9), (37, 50), (300, 70)] {
            let a = Strided::new(&mut rng, r, c, 3);
            let ds = r.next_multiple_of(16) + 16;
            for offset in 0..16 {
                check(&e, &a, offset, ds, false, backend.name());
            }
        }
        // 1030 x 700 (721K floats) and 390 x 350 (137K, just past the split threshold
        // of 128K), padded rows.
        for (offset, (r, c)) in [(0, (1030, 700)), (5, (1030, 700)), (3, (390, 350))] {
            let a = Strided::new(&mut rng, r, c, 6);
            match cfg!(target_arch = "wasm32") {
                // No threads to spawn a pool on there.
                true => check(&e, &a, offset, r + 10, true, backend.name()),
                false => pool(3).install(|| check(&e, &a, offset, r + 10, true, backend.name())),
            }
            one_thread(|| check(&e, &a, offset, r + 3, false, backend.name()));
        }
    }
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

/// A product of more multiply-adds than a 32-bit `usize` counts (1626^3 > 2^32) on
/// operands of 10 MiB each: on wasm32 the choice of path once overflowed computing that
/// count (an overflow panic in the test profile). Elements sampled at random against f64
/// dot products.
#[test]
fn a_product_of_more_multiply_adds_than_u32_counts_matches_sampled_references() {
    let n = 1626;
    assert!((n as u64).pow(3) > u64::from(u32::MAX));
    let mut rng = Rng::new(97);
    let (a, b) = (rng.vec(n * n, -1.0, 1.0), rng.vec(n * n, -1.0, 1.0));
    let mut c = vec![f32::NAN; n * n];
    let e = trueno::engine().unwrap();
    let (av, bv) = (
        MatRef::new(&a, n, n, n).unwrap(),
        MatRef::new(&b, n, n, n).unwrap(),
    );
    let mut cv = MatMut::new(&mut c, n, n, n).unwrap();
    e.gemm(1.0, av, Transpose::No, bv, Transpose::No, 0.0, &mut cv)
        .unwrap();
    for _ in 0..64 {
        let (i, j) = (rng.next_u64() as usize % n, rng.next_u64() as usize % n);
        let terms = (0..n).map(|p| a[i * n + p] as f64 * b[p * n + j] as f64);
        let (want, mass) = terms.fold((0.0, 0.0), |(s, m), t| (s + t, m + t.abs()));
        let bound = 2.0 * n as f64 * f32::EPSILON as f64 * mass;
        let got = c[i * n + j] as f64;
        assert!(
            (got - want).abs() <= bound,
            "C({i},{j}) = {got}, want {want} (bound {bound:e})"
        );
    }
}
