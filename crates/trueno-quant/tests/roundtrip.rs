//! Quantize -> dequantize error per format within a budget derived from its bits; bad input
//! rejected with the row and element named; every ISA equal to the baseline on every format
//! (including Q8_K and NF4, which the oracle lacks, checked against their formulas here).

mod common;

use common::Rng;
use proptest::prelude::*;
use trueno_quant::blocks::NF4_LEVELS;
use trueno_quant::{Isa, QuantError, QuantFormat, dequantize, dequantize_with, quantize};

/// Relative RMS error `|x - deq(q(x))| / |x|` over rows of standard normal weights.
fn relative_rms_error(format: QuantFormat, rng: &mut Rng) -> f64 {
    let x: Vec<f32> = (0..64 * 256).map(|_| rng.normal()).collect();
    let q = quantize(format, &x).unwrap();
    let mut y = vec![0.0; x.len()];
    dequantize(format, &q, &mut y).unwrap();
    let err: f64 = x
        .iter()
        .zip(&y)
        .map(|(a, b)| ((a - b) as f64).powi(2))
        .sum();
    let norm: f64 = x.iter().map(|a| (*a as f64).powi(2)).sum();
    (err / norm).sqrt()
}

/// The budget: a uniform quantizer with step `D` errs by `D / sqrt(12)` RMS. For standard
/// normal data, a block's step is its range over its number of levels; the expected range
/// of `n` normal samples is about 2 * (0.6 + 0.47 * ln n) (2.0 sigma each side at n = 32,
/// 1.9 at 16, 2.9 at 256). The budget is that error plus 30% for the scale's own
/// quantization (f16 or 6-bit codes) and NF4's non-uniform levels.
fn budget(format: QuantFormat) -> f64 {
    let half_range = |n: f64| 0.6 + 0.47 * n.ln();
    let step = match format {
        QuantFormat::Q4_0 => half_range(32.0) / 8.0,
        QuantFormat::Q4_1 | QuantFormat::Q4K => 2.0 * half_range(32.0) / 15.0,
        QuantFormat::Q5_0 => half_range(32.0) / 16.0,
        QuantFormat::Q5_1 | QuantFormat::Q5K => 2.0 * half_range(32.0) / 31.0,
        QuantFormat::Q8_0 => half_range(32.0) / 127.0,
        QuantFormat::Q6K => half_range(16.0) / 32.0,
        QuantFormat::Q8K => half_range(256.0) / 128.0,
        QuantFormat::Nf4 => 2.0 * half_range(64.0) / 15.0,
    };
    1.3 * step / 12f64.sqrt()
}

#[test]
fn round_trip_error_is_within_the_budget_of_each_format() {
    let mut rng = Rng(7);
    for format in QuantFormat::ALL {
        let e = relative_rms_error(format, &mut rng);
        let b = budget(format);
        eprintln!("{format}: relative RMS error {e:.5} (budget {b:.5})");
        assert!(
            e <= b,
            "{format}: relative RMS error {e} over the budget {b}"
        );
    }
}

#[test]
fn k_quants_beat_the_one_scale_formats_of_equal_bits() {
    // Q4_K spends its bits on 6-bit sub-block scales and mins instead of f16 ones: its
    // error must stay at or below Q4_1's, and Q5_K's at or below Q5_1's.
    let mut rng = Rng(8);
    for (k, legacy) in [
        (QuantFormat::Q4K, QuantFormat::Q4_1),
        (QuantFormat::Q5K, QuantFormat::Q5_1),
    ] {
        let (ek, el) = (
            relative_rms_error(k, &mut Rng(9)),
            relative_rms_error(legacy, &mut rng),
        );
        assert!(ek <= el * 1.02, "{k} error {ek} vs {legacy} {el}");
    }
}

#[test]
fn zero_and_constant_rows_come_back_exactly() {
    for format in QuantFormat::ALL {
        let n = format.info().block_elems * 2;
        let zeros = vec![0.0f32; n];
        let mut back = vec![f32::NAN; n];
        dequantize(format, &quantize(format, &zeros).unwrap(), &mut back).unwrap();
        assert!(back.iter().all(|&v| v == 0.0), "{format} zeros: {back:?}");
    }
    // A constant power of two is exact where the scale it implies is one (Q8_0's 4/127
    // is not exact in f16).
    for format in [
        QuantFormat::Q4_0,
        QuantFormat::Q4_1,
        QuantFormat::Q8K,
        QuantFormat::Nf4,
    ] {
        let n = format.info().block_elems;
        let x = vec![-4.0f32; n];
        let mut back = vec![0.0; n];
        dequantize(format, &quantize(format, &x).unwrap(), &mut back).unwrap();
        assert!(back.iter().all(|&v| v == -4.0), "{format}: {back:?}");
    }
}

#[test]
fn bad_input_is_an_error_naming_the_row_and_element() {
    for format in QuantFormat::ALL {
        let n = format.info().block_elems;
        assert!(matches!(
            quantize(format, &vec![1.0; n + 1]),
            Err(QuantError::RowLength { len, .. }) if len == n + 1
        ));
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let mut x = vec![1.0; 3 * n];
            x[2 * n + 5] = bad;
            let e = trueno_quant::quantize_rows(format, &x, n).unwrap_err();
            assert!(
                matches!(
                    e,
                    QuantError::NonFinite {
                        row: 2,
                        index: 5,
                        ..
                    }
                ),
                "{format}: {e}"
            );
            assert!(e.to_string().contains("row 2"), "{e}");
        }
        let bytes = format.info().block_bytes;
        let mut out = vec![0.0; n];
        assert!(matches!(
            dequantize(format, &vec![0u8; bytes + 1], &mut out),
            Err(QuantError::NotWholeBlocks { .. })
        ));
        assert!(matches!(
            dequantize(format, &vec![0u8; bytes], &mut out[..n - 1]),
            Err(QuantError::BufferSize { .. })
        ));
        // Empty input is zero blocks, not an error.
        assert_eq!(quantize(format, &[]).unwrap(), Vec::<u8>::new());
        dequantize(format, &[], &mut []).unwrap();
    }
}

/// Random block bytes with the f32 scales of Q8_K and NF4 kept finite.
fn random_bytes(format: QuantFormat, blocks: usize, rng: &mut Rng) -> Vec<u8> {
    let info = format.info();
    let mut b: Vec<u8> = (0..blocks * info.block_bytes)
        .map(|_| (rng.uniform() * 256.0) as u8)
        .collect();
    if matches!(format, QuantFormat::Q8K | QuantFormat::Nf4) {
        for blk in b.chunks_exact_mut(info.block_bytes) {
            blk[..4].copy_from_slice(&(rng.normal() * 3.0).to_le_bytes());
        }
    }
    b
}

#[test]
fn every_isa_equals_the_baseline_and_q8k_nf4_follow_their_formulas() {
    let mut rng = Rng(10);
    for format in QuantFormat::ALL {
        let info = format.info();
        // Ragged block counts: 1, and around a multiple of the vector width.
        for blocks in [1, 3, 16, 17] {
            let bytes = random_bytes(format, blocks, &mut rng);
            let n = blocks * info.block_elems;
            let isas = Isa::available();
            let mut base = vec![0.0; n];
            dequantize_with(isas[0].1, format, &bytes, &mut base).unwrap();
            for (backend, isa) in &isas[1..] {
                let mut got = vec![0.0; n];
                dequantize_with(*isa, format, &bytes, &mut got).unwrap();
                for (i, (g, w)) in got.iter().zip(&base).enumerate() {
                    assert!(
                        g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                        "{format} on {}: element {i}: {g} vs {w}",
                        backend.name()
                    );
                }
            }
            let formula: Option<Vec<f32>> = match format {
                QuantFormat::Q8K => Some(
                    bytes
                        .chunks_exact(info.block_bytes)
                        .flat_map(|b| {
                            let d = f32::from_le_bytes(b[..4].try_into().unwrap());
                            b[4..260].iter().map(move |&q| d * q as i8 as f32)
                        })
                        .collect(),
                ),
                QuantFormat::Nf4 => Some(
                    bytes
                        .chunks_exact(info.block_bytes)
                        .flat_map(|b| {
                            let a = f32::from_le_bytes(b[..4].try_into().unwrap());
                            let qs = &b[4..36];
                            (0..64).map(move |i| {
                                let code = if i < 32 { qs[i] & 15 } else { qs[i - 32] >> 4 };
                                a * NF4_LEVELS[code as usize]
                            })
                        })
                        .collect(),
                ),
                _ => None,
            };
            if let Some(want) = formula {
                assert_eq!(base, want, "{format}");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Q8_0 rounds each weight to the nearest of 255 levels of its block: the error is at
    /// most half a step, plus the f16 rounding of the scale (2^-11 relative) on |q| <= 127.
    #[test]
    fn q8_0_error_is_at_most_half_a_step(
        mut x in proptest::collection::vec(-100.0f32..100.0, 32),
        big in 1.0f32..100.0,
    ) {
        x[0] = big;
        let q = quantize(QuantFormat::Q8_0, &x).unwrap();
        let mut y = vec![0.0; 32];
        dequantize(QuantFormat::Q8_0, &q, &mut y).unwrap();
        let amax = x.iter().fold(0.0f32, |a, v| a.max(v.abs()));
        let step = amax / 127.0;
        for (a, b) in x.iter().zip(&y) {
            prop_assert!((a - b).abs() <= step * (0.5 + 127.0 / 2048.0) * 1.0001);
        }
    }

    /// Quantizing is deterministic and rows are independent: a row quantized alone equals
    /// the same row inside a matrix.
    #[test]
    fn rows_quantize_independently(seed in 0u64..1000) {
        let mut rng = Rng(seed);
        let x: Vec<f32> = (0..3 * 256).map(|_| rng.normal()).collect();
        for format in [QuantFormat::Q4K, QuantFormat::Q6K, QuantFormat::Q5_0] {
            let all = trueno_quant::quantize_rows(format, &x, 256).unwrap();
            let one = quantize(format, &x[256..512]).unwrap();
            let rb = format.row_bytes(256).unwrap();
            prop_assert_eq!(&all[rb..2 * rb], &one[..]);
        }
    }
}
