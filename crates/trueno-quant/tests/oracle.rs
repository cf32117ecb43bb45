//! Bit-for-bit agreement with the `gguf` package's numpy ports of GGML's formats, from the
//! fixtures `scripts/setup-quant-oracle.sh` writes (to `target/quant-fixtures`, or wherever
//! `TRUENO_QUANT_FIXTURES` points). Without them these tests skip and say so, unless
//! `TRUENO_REQUIRE_ORACLE=1` (set by .ci/run, which generates them) makes that a failure.

mod common;

use std::path::PathBuf;

use common::fixtures;
use trueno_quant::{Isa, QuantFormat, dequantize_with, quantize};

fn read_f32(path: PathBuf) -> Vec<f32> {
    std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

fn assert_bits_equal(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
            "{what}: element {i} is {g:e}, the oracle has {w:e}"
        );
    }
}

/// The formats the `gguf` package implements (all but Q8_K and NF4); its first five it
/// can also quantize.
fn oracle_formats() -> Vec<QuantFormat> {
    QuantFormat::ALL
        .into_iter()
        .filter(|f| !matches!(f, QuantFormat::Q8K | QuantFormat::Nf4))
        .collect()
}

#[test]
fn dequantization_equals_the_oracle_bit_for_bit_on_every_isa() {
    let Some(dir) = fixtures("meta.json") else {
        return;
    };
    for format in oracle_formats() {
        let name = format.info().name;
        let raw = std::fs::read(dir.join(format!("{name}.raw.q"))).unwrap();
        let want = read_f32(dir.join(format!("{name}.raw.deq")));
        for (backend, isa) in Isa::available() {
            let mut got = vec![f32::NAN; want.len()];
            dequantize_with(isa, format, &raw, &mut got).unwrap();
            assert_bits_equal(&format!("{name} on {}", backend.name()), &got, &want);
        }
    }
}

#[test]
fn legacy_quantization_equals_the_oracle_bytes() {
    let Some(dir) = fixtures("meta.json") else {
        return;
    };
    for format in &oracle_formats()[..5] {
        let name = format.info().name;
        let x = read_f32(dir.join(format!("{name}.f32")));
        let want = std::fs::read(dir.join(format!("{name}.q"))).unwrap();
        let got = quantize(*format, &x).unwrap();
        let bb = format.info().block_bytes;
        for (b, (g, w)) in got.chunks(bb).zip(want.chunks(bb)).enumerate() {
            assert_eq!(g, w, "{name} block {b}");
        }
        let deq = read_f32(dir.join(format!("{name}.deq")));
        let mut back = vec![0.0; x.len()];
        dequantize_with(Isa::current().unwrap(), *format, &got, &mut back).unwrap();
        assert_bits_equal(name, &back, &deq);
    }
}
