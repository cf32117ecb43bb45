//! Fused dot products and matvecs against dequantize-then-f64 references, on every ISA,
//! with stated bounds:
//! - f32 path: |dot - ref| <= (n/16 + 8) * eps * sum |w x|  (16 lanes, then a lane tree).
//! - Int8 path: the activations are rounded to 8 bits first; against the reference over the
//!   rounded activations x~ the error is only the f32 scaling of exact integer block sums,
//!   <= 16 * eps * sum (|w| + max|w| of its block) |x~|; against exact x it adds
//!   sum |w| |x - x~|.

mod common;

use common::Rng;
use trueno_quant::{
    Isa, MatvecPath, QuantError, QuantFormat, activation_format, dequantize, dot_f32, dot_q8,
    matvec, matvec_col_major, quantize, quantize_rows, transpose_q4_k_for_matmul,
    transpose_q5_k_for_matmul, transpose_q6_k_for_matmul,
};

const EPS: f64 = f32::EPSILON as f64;

fn deq(format: QuantFormat, q: &[u8], n: usize) -> Vec<f32> {
    let mut w = vec![0.0; n];
    dequantize(format, q, &mut w).unwrap();
    w
}

fn dot64(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum()
}

fn abs_dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (*x as f64 * *y as f64).abs())
        .sum()
}

/// `sum (|w| + max|w| of its block) |x|`: bounds the f32 terms of a block's scaling.
fn scaled_mass(w: &[f32], x: &[f32], block: usize) -> f64 {
    w.chunks(block)
        .zip(x.chunks(block))
        .map(|(wb, xb)| {
            let m = wb.iter().fold(0.0f32, |a, v| a.max(v.abs())) as f64;
            wb.iter()
                .zip(xb)
                .map(|(a, b)| (a.abs() as f64 + m) * b.abs() as f64)
                .sum::<f64>()
        })
        .sum()
}

#[test]
fn dots_match_the_dequantized_reference_on_every_isa() {
    let mut rng = Rng(5);
    for format in QuantFormat::ALL {
        let be = format.info().block_elems;
        for blocks in [1, 3, 17] {
            let n = blocks * be;
            let (wf, x) = (rng.vec(n), rng.vec(n));
            let q = quantize(format, &wf).unwrap();
            let w = deq(format, &q, n);
            let exact = dot64(&w, &x);
            let mut seen: Option<(f32, Option<f32>)> = None;
            for (backend, isa) in Isa::available() {
                let what = format!("{format} x{blocks} on {}", backend.name());
                let d = dot_f32(isa, format, &q, &x).unwrap();
                let bound = ((n / 16 + 8) as f64) * EPS * abs_dot(&w, &x);
                assert!(
                    (d as f64 - exact).abs() <= bound,
                    "{what}: f32 dot {d} vs {exact} (bound {bound})"
                );
                let int = activation_format(format).map(|af| {
                    let act = quantize(af, &x).unwrap();
                    let xr = deq(af, &act, n);
                    let d8 = dot_q8(isa, format, &q, &act).unwrap();
                    let vs_rounded = dot64(&w, &xr);
                    let bound = 16.0 * EPS * scaled_mass(&w, &xr, be);
                    assert!(
                        (d8 as f64 - vs_rounded).abs() <= bound,
                        "{what}: int8 dot {d8} vs {vs_rounded} over rounded x (bound {bound})"
                    );
                    let act_err: f64 = w
                        .iter()
                        .zip(x.iter().zip(&xr))
                        .map(|(wi, (a, b))| (wi.abs() * (a - b).abs()) as f64)
                        .sum();
                    assert!(
                        (d8 as f64 - exact).abs() <= act_err + bound,
                        "{what}: int8 dot {d8} vs exact {exact}"
                    );
                    d8
                });
                // The f32 path runs the same operations in the same order on every ISA:
                // equal bits. The integer path's hand-vectorized kernels (AVX2 and up) sum
                // the per-block f32 terms in eight lanes: equal within the bound above.
                match seen {
                    None => seen = Some((d, int)),
                    Some((d0, i0)) => {
                        assert_eq!(d0, d, "{what}: f32 dot differs from the baseline");
                        if let (Some(a), Some(b)) = (i0, int) {
                            let bound = 32.0 * EPS * abs_dot(&w, &x).max(1e-30) + 1e-6;
                            assert!((a - b).abs() as f64 <= bound, "{what}: {a} vs {b}");
                        }
                    }
                }
            }
        }
    }
}

/// Arbitrary bytes for `blocks` blocks of `format`, with each f16 (or f32) scale field set to
/// a finite value: every quant and bit pattern occurs, including -128 in the 8-bit formats.
fn raw_blocks(rng: &mut Rng, format: QuantFormat, blocks: usize, fill: Option<u8>) -> Vec<u8> {
    let info = format.info();
    let mut q: Vec<u8> = (0..blocks * info.block_bytes)
        .map(|_| fill.unwrap_or((rng.uniform() * 256.0) as u8))
        .collect();
    // (offset, is f32) of each scale field.
    let scales: &[(usize, bool)] = match format {
        QuantFormat::Q4_1 | QuantFormat::Q5_1 | QuantFormat::Q4K | QuantFormat::Q5K => {
            &[(0, false), (2, false)]
        }
        QuantFormat::Q6K => &[(208, false)],
        QuantFormat::Q8K | QuantFormat::Nf4 => &[(0, true)],
        _ => &[(0, false)],
    };
    for b in q.chunks_exact_mut(info.block_bytes) {
        for &(at, wide) in scales {
            let v = (rng.uniform() as f32 - 0.5) * 0.1;
            if wide {
                b[at..at + 4].copy_from_slice(&v.to_le_bytes());
            } else {
                b[at..at + 2].copy_from_slice(&half::f16::from_f32(v).to_le_bytes());
            }
        }
    }
    if format == QuantFormat::Q8K {
        // The 16-sums are part of the format: make them those of the quants.
        for b in q.chunks_exact_mut(info.block_bytes) {
            for g in 0..16 {
                let s: i16 = b[4 + 16 * g..20 + 16 * g]
                    .iter()
                    .map(|&v| v as i8 as i16)
                    .sum();
                b[260 + 2 * g..262 + 2 * g].copy_from_slice(&s.to_le_bytes());
            }
        }
    }
    q
}

/// Any weight bytes against any activation bytes (-128 included, where `vpmaddubsw`'s
/// sign trick would wrap): each ISA's integer dot equals the f64 dot of the dequantized
/// blocks within the Int8 bound (the integer sums are exact; only f32 scaling rounds).
#[test]
fn integer_dots_hold_on_arbitrary_block_bytes() {
    let mut rng = Rng(11);
    for format in QuantFormat::ALL {
        let Some(af) = activation_format(format) else {
            continue;
        };
        let blocks = 2048 / format.info().block_elems;
        let n = blocks * format.info().block_elems;
        let act_blocks = n / af.info().block_elems;
        for fill in [None, Some(0x80), Some(0x7f)] {
            let q = raw_blocks(&mut rng, format, blocks, fill);
            let act = raw_blocks(&mut rng, af, act_blocks, fill);
            let (w, xr) = (deq(format, &q, n), deq(af, &act, n));
            let want = dot64(&w, &xr);
            let bound = 16.0 * EPS * scaled_mass(&w, &xr, format.info().block_elems);
            for (_, isa) in Isa::available() {
                let got = dot_q8(isa, format, &q, &act).unwrap() as f64;
                assert!(
                    (got - want).abs() <= bound,
                    "{format} on {isa}, fill {fill:?}: {got} vs {want} (bound {bound})"
                );
            }
        }
    }
}

#[test]
fn matvec_rows_equal_row_dots_single_and_multi_threaded() {
    let mut rng = Rng(6);
    // 1024 x 1024 crosses the parallel threshold; 3 x 256 stays on one thread.
    for (rows, cols) in [(3, 256), (1024, 1024)] {
        for format in [
            QuantFormat::Q4K,
            QuantFormat::Q6K,
            QuantFormat::Q8_0,
            QuantFormat::Nf4,
        ] {
            // Arbitrary blocks: the quantizer is tested elsewhere.
            let q = raw_blocks(
                &mut rng,
                format,
                rows * cols / format.info().block_elems,
                None,
            );
            let x = rng.vec(cols);
            let rb = format.row_bytes(cols).unwrap();
            let isa = Isa::current().unwrap();
            for path in [MatvecPath::F32, MatvecPath::Int8] {
                let mut y = vec![f32::NAN; rows];
                matvec(format, &q, rows, cols, &x, &mut y, path).unwrap();
                let mut y1 = vec![f32::NAN; rows];
                common::one_thread(|| matvec(format, &q, rows, cols, &x, &mut y1, path)).unwrap();
                assert_eq!(
                    y, y1,
                    "{format} {path:?} {rows}x{cols}: threads changed bits"
                );
                let act = activation_format(format).map(|af| quantize(af, &x).unwrap());
                for (r, &yr) in y.iter().enumerate() {
                    let row = &q[r * rb..(r + 1) * rb];
                    let want = match (path, &act) {
                        (MatvecPath::Int8, Some(a)) => dot_q8(isa, format, row, a).unwrap(),
                        _ => dot_f32(isa, format, row, &x).unwrap(),
                    };
                    assert_eq!(yr, want, "{format} {path:?} row {r}");
                }
            }
        }
    }
}

#[test]
fn column_major_matvec_agrees_with_the_reference() {
    let mut rng = Rng(7);
    for (rows, cols) in [(256, 3), (512, 700), (1024, 1024)] {
        for format in [QuantFormat::Q4K, QuantFormat::Q5_0, QuantFormat::Nf4] {
            // Stored as `cols` columns of `rows` weights: arbitrary blocks (the quantizer,
            // tested elsewhere, took most of this test's time under qemu).
            let q = raw_blocks(
                &mut rng,
                format,
                rows * cols / format.info().block_elems,
                None,
            );
            let colmajor = deq(format, &q, rows * cols);
            let x = rng.vec(cols);
            let mut y = vec![f32::NAN; rows];
            matvec_col_major(format, &q, rows, cols, &x, &mut y).unwrap();
            for (r, &yr) in y.iter().enumerate() {
                let terms: Vec<f64> = (0..cols)
                    .map(|c| colmajor[c * rows + r] as f64 * x[c] as f64)
                    .collect();
                let exact: f64 = terms.iter().sum();
                let mass: f64 = terms.iter().map(|t| t.abs()).sum();
                let bound = (cols as f64 + 2.0) * EPS * mass;
                assert!(
                    (yr as f64 - exact).abs() <= bound,
                    "{format} {rows}x{cols} row {r}: {yr} vs {exact}"
                );
            }
        }
    }
}

/// A column-major K-quant matrix made row-major by `transpose` dequantizes to the
/// transpose of the original within `budget` (one more quantization of already-quantized
/// values: the round-trip budgets of tests/roundtrip.rs); columns that are not whole
/// blocks are an error. One test per format, so they run side by side (the quantizer is
/// most of their time, a minute a format under qemu).
fn transpose_within_budget(
    format: QuantFormat,
    transpose: fn(&[u8], usize, usize) -> trueno_quant::Result<Vec<u8>>,
    budget: f64,
    seed: u64,
) {
    let mut rng = Rng(seed);
    let (rows, cols) = (512, 768);
    let wf = rng.vec(rows * cols);
    let q = quantize_rows(format, &wf, rows).unwrap();
    let colmajor = deq(format, &q, rows * cols);
    let t = transpose(&q, rows, cols).unwrap();
    let rowmajor = deq(format, &t, rows * cols);
    let (mut err, mut norm) = (0.0f64, 0.0f64);
    for r in 0..rows {
        for c in 0..cols {
            let a = colmajor[c * rows + r] as f64;
            err += (a - rowmajor[r * cols + c] as f64).powi(2);
            norm += a * a;
        }
    }
    let rel = (err / norm).sqrt();
    assert!(rel <= budget, "{format}: requantized transpose error {rel}");
    assert!(transpose(&q, rows, 100).is_err());
}

#[test]
fn q4_k_transpose_for_matmul_is_the_transpose_within_budget() {
    transpose_within_budget(QuantFormat::Q4K, transpose_q4_k_for_matmul, 0.11, 8);
}

#[test]
fn q5_k_transpose_for_matmul_is_the_transpose_within_budget() {
    transpose_within_budget(QuantFormat::Q5K, transpose_q5_k_for_matmul, 0.055, 9);
}

#[test]
fn q6_k_transpose_for_matmul_is_the_transpose_within_budget() {
    transpose_within_budget(QuantFormat::Q6K, transpose_q6_k_for_matmul, 0.025, 10);
}

#[test]
fn bad_shapes_and_inputs_are_errors() {
    let q = quantize(QuantFormat::Q4K, &[0.5; 512]).unwrap();
    let isa = Isa::current().unwrap();
    let mut y = vec![0.0; 2];
    assert!(matches!(
        matvec(
            QuantFormat::Q4K,
            &q,
            2,
            256,
            &[0.0; 255],
            &mut y,
            MatvecPath::F32
        ),
        Err(QuantError::BufferSize { what: "x", .. })
    ));
    assert!(matches!(
        matvec(
            QuantFormat::Q4K,
            &q,
            3,
            256,
            &[0.0; 256],
            &mut y,
            MatvecPath::F32
        ),
        Err(QuantError::BufferSize { .. })
    ));
    assert!(matches!(
        matvec(
            QuantFormat::Q4K,
            &q,
            2,
            200,
            &[0.0; 200],
            &mut y,
            MatvecPath::F32
        ),
        Err(QuantError::RowLength { .. })
    ));
    // Column-major: x has `cols` entries, y `rows`; a wrong x is named as x.
    let mut yc = vec![0.0; 256];
    assert!(matches!(
        matvec_col_major(QuantFormat::Q4K, &q, 256, 2, &[0.0; 3], &mut yc),
        Err(QuantError::BufferSize {
            what: "x",
            expected: 2,
            got: 3,
            ..
        })
    ));
    let mut x = vec![1.0; 256];
    x[9] = f32::INFINITY;
    assert!(matches!(
        matvec(QuantFormat::Q4K, &q, 2, 256, &x, &mut y, MatvecPath::Int8),
        Err(QuantError::NonFinite { index: 9, .. })
    ));
    let nf4 = quantize(QuantFormat::Nf4, &[0.5; 64]).unwrap();
    assert!(matches!(
        dot_q8(isa, QuantFormat::Nf4, &nf4, &[]),
        Err(QuantError::Unsupported { .. })
    ));
    assert!(dot_f32(isa, QuantFormat::Q4K, &q[..100], &[0.0; 256]).is_err());
    assert!(dot_q8(isa, QuantFormat::Q4K, &q, &[0; 10]).is_err());
    // Empty rows: a zero-length product is zero.
    assert_eq!(dot_f32(isa, QuantFormat::Q8_0, &[], &[]).unwrap(), 0.0);
    let mut empty: [f32; 0] = [];
    matvec(
        QuantFormat::Q8_0,
        &[],
        0,
        32,
        &[0.0; 32],
        &mut empty,
        MatvecPath::Int8,
    )
    .unwrap();
}
