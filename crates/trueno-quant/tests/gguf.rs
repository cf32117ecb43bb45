//! GGUF: a file from the `gguf` package's GGUFWriter read back exactly; our writer and
//! reader round-trip every value type; truncated, bit-flipped and hostile files give
//! errors, never panics (a proptest mutator over valid files, bounded in cases).

mod common;

use common::fixtures;
use proptest::prelude::*;
use serde_json::Value;
use trueno_quant::gguf::{GgmlType, GgufError, GgufFile, GgufValue, GgufWriter, ValueType};

fn fnv64(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf29ce484222325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    })
}

/// The value the oracle's JSON describes, typed as GGUF stores it.
fn expected(type_name: &str, v: &Value) -> GgufValue {
    let int = || v.as_i64().unwrap();
    match type_name {
        "UINT8" => GgufValue::U8(int() as u8),
        "INT8" => GgufValue::I8(int() as i8),
        "UINT16" => GgufValue::U16(int() as u16),
        "INT16" => GgufValue::I16(int() as i16),
        "UINT32" => GgufValue::U32(int() as u32),
        "INT32" => GgufValue::I32(int() as i32),
        "UINT64" => GgufValue::U64(v.as_u64().unwrap()),
        "INT64" => GgufValue::I64(int()),
        "FLOAT32" => GgufValue::F32(v.as_f64().unwrap() as f32),
        "FLOAT64" => GgufValue::F64(v.as_f64().unwrap()),
        "BOOL" => GgufValue::Bool(v.as_bool().unwrap()),
        "STRING" => GgufValue::String(v.as_str().unwrap().to_string()),
        "ARRAY" => {
            let sub = v["sub"].as_str().unwrap();
            let items = v["items"].as_array().unwrap();
            if sub == "ARRAY" {
                // The package writes nested integer lists as arrays of INT32.
                let inner = items
                    .iter()
                    .map(|i| {
                        GgufValue::Array(
                            ValueType::I32,
                            i.as_array()
                                .unwrap()
                                .iter()
                                .map(|x| expected("INT32", x))
                                .collect(),
                        )
                    })
                    .collect();
                GgufValue::Array(ValueType::Array, inner)
            } else {
                let t = expected(sub, &items[0]).value_type();
                GgufValue::Array(t, items.iter().map(|x| expected(sub, x)).collect())
            }
        }
        other => panic!("unknown type {other}"),
    }
}

#[test]
fn a_file_from_the_oracle_writer_reads_back_exactly() {
    let Some(dir) = fixtures("oracle.gguf") else {
        return;
    };
    let file = GgufFile::open(dir.join("oracle.gguf")).unwrap();
    let want: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("oracle_gguf.json")).unwrap())
            .unwrap();
    assert_eq!(file.version(), 3);
    assert_eq!(
        file.get("general.architecture").and_then(|v| v.as_str()),
        Some("trueno-test")
    );
    for kv in want["kv"].as_array().unwrap() {
        let key = kv[0].as_str().unwrap();
        let value = expected(kv[1].as_str().unwrap(), &kv[2]);
        assert_eq!(file.get(key), Some(&value), "{key}");
    }
    let tensors = want["tensors"].as_array().unwrap();
    assert_eq!(file.tensors().len(), tensors.len());
    for t in tensors {
        let name = t["name"].as_str().unwrap();
        let view = file.tensor(name).unwrap();
        let dims: Vec<u64> = t["dims"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap())
            .collect();
        assert_eq!(view.info.dims, dims, "{name}");
        assert_eq!(
            view.info.ggml_type.name,
            t["type"].as_str().unwrap(),
            "{name}"
        );
        assert_eq!(
            view.bytes.len() as u64,
            t["bytes"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(fnv64(view.bytes), t["fnv64"].as_u64().unwrap(), "{name}");
        assert_eq!(
            view.to_f32().unwrap().len() as u64,
            dims.iter().product::<u64>()
        );
    }
}

fn every_value_type() -> Vec<(&'static str, GgufValue)> {
    vec![
        ("u8", GgufValue::U8(7)),
        ("i8", GgufValue::I8(-7)),
        ("u16", GgufValue::U16(700)),
        ("i16", GgufValue::I16(-700)),
        ("u32", GgufValue::U32(70000)),
        ("i32", GgufValue::I32(-70000)),
        ("f32", GgufValue::F32(f32::MIN_POSITIVE)),
        ("bool", GgufValue::Bool(false)),
        ("string", GgufValue::String("ünïcode".into())),
        ("u64", GgufValue::U64(u64::MAX)),
        ("i64", GgufValue::I64(i64::MIN)),
        ("f64", GgufValue::F64(-0.0)),
        ("empty", GgufValue::Array(ValueType::F32, vec![])),
        (
            "nested",
            GgufValue::Array(
                ValueType::Array,
                vec![
                    GgufValue::Array(ValueType::String, vec![GgufValue::String("x".into())]),
                    GgufValue::Array(ValueType::U8, vec![]),
                ],
            ),
        ),
    ]
}

/// A small valid file: every value type, alignment 64, an F32 and a Q4_0 tensor.
fn sample() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.add_metadata("general.alignment", GgufValue::U32(64))
        .unwrap();
    for (k, v) in every_value_type() {
        w.add_metadata(k, v).unwrap();
    }
    let f32_t = GgmlType::from_name("F32").unwrap();
    let data: Vec<u8> = (0..24).flat_map(|i| (i as f32).to_le_bytes()).collect();
    w.add_tensor("a", &[8, 3], f32_t, data).unwrap();
    // -4 is exact in Q4_0 (scale 0.5, level 0).
    let q = trueno_quant::quantize(trueno_quant::QuantFormat::Q4_0, &[-4.0; 64]).unwrap();
    w.add_tensor("b", &[32, 2], GgmlType::from_name("Q4_0").unwrap(), q)
        .unwrap();
    w.to_bytes().unwrap()
}

#[test]
fn our_writer_and_reader_round_trip_every_value_type() {
    let file = GgufFile::from_bytes(sample()).unwrap();
    assert_eq!(file.alignment(), 64);
    assert_eq!(file.data_offset() % 64, 0);
    for (k, v) in every_value_type() {
        assert_eq!(file.get(k), Some(&v), "{k}");
    }
    let a = file.tensor("a").unwrap();
    assert_eq!((a.row_len(), a.rows()), (8, 3));
    assert_eq!(
        a.to_f32().unwrap(),
        (0..24).map(|i| i as f32).collect::<Vec<_>>()
    );
    assert_eq!(file.tensor("b").unwrap().to_f32().unwrap(), vec![-4.0; 64]);
    assert!(matches!(
        file.tensor("c"),
        Err(GgufError::NotFound { kind: "tensor", .. })
    ));
}

#[test]
fn the_writer_refuses_what_it_cannot_encode() {
    let mut w = GgufWriter::new();
    let f32_t = GgmlType::from_name("F32").unwrap();
    assert!(w.add_tensor("x", &[4], f32_t, vec![0; 15]).is_err());
    assert!(w.add_tensor("x", &[], f32_t, vec![]).is_err());
    let q4k = GgmlType::from_name("Q4_K").unwrap();
    assert!(w.add_tensor("x", &[100], q4k, vec![]).is_err());
    let mixed = GgufValue::Array(ValueType::U8, vec![GgufValue::I8(1)]);
    assert!(w.add_metadata("m", mixed).is_err());
    assert!(
        w.add_metadata("general.alignment", GgufValue::U32(48))
            .is_err()
    );
    w.add_metadata("k", GgufValue::Bool(true)).unwrap();
    assert!(w.add_metadata("k", GgufValue::Bool(true)).is_err());
}

fn corrupt_at(bytes: Vec<u8>) -> (u64, String) {
    match GgufFile::from_bytes(bytes) {
        Err(GgufError::Corrupt { offset, what }) => (offset, what),
        Err(e) => panic!("expected Corrupt, got {e}"),
        Ok(_) => panic!("expected an error"),
    }
}

#[test]
fn specific_corruptions_are_named_with_their_offset() {
    let good = sample();
    let mut b = good.clone();
    b[0] = b'X';
    assert!(corrupt_at(b).1.contains("magic"));
    let mut b = good.clone();
    b[4..8].copy_from_slice(&1u32.to_le_bytes());
    assert!(matches!(
        GgufFile::from_bytes(b),
        Err(GgufError::Unsupported { .. })
    ));
    let mut b = good.clone();
    b[4..8].copy_from_slice(&3u32.to_be_bytes());
    assert!(
        matches!(GgufFile::from_bytes(b), Err(GgufError::Unsupported { what }) if what.contains("big-endian"))
    );
    // A metadata count no file this size could hold.
    let mut b = good.clone();
    b[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
    let (off, what) = corrupt_at(b);
    assert_eq!(off, 16);
    assert!(what.contains("metadata count"), "{what}");
    // The first key's type code (after the 8-byte length and "general.alignment").
    let mut b = good.clone();
    let type_at = 24 + 8 + "general.alignment".len();
    b[type_at..type_at + 4].copy_from_slice(&99u32.to_le_bytes());
    let (off, what) = corrupt_at(b);
    assert_eq!(off as usize, type_at);
    assert!(what.contains("unknown value type 99"), "{what}");
    // Truncating inside the last tensor's data.
    let (_, what) = corrupt_at(good[..good.len() - 1].to_vec());
    assert!(what.contains("runs past the end"), "{what}");
    // A tensor offset moved onto the other's data (still aligned): overlap.
    let file = GgufFile::from_bytes(good.clone()).unwrap();
    let info_b_offset_at = find_tensor_offset_field(&good, "b");
    let mut b = good.clone();
    b[info_b_offset_at..info_b_offset_at + 8].copy_from_slice(&0u64.to_le_bytes());
    assert!(corrupt_at(b).1.contains("overlap"));
    // Misaligned.
    let mut b = good.clone();
    b[info_b_offset_at..info_b_offset_at + 8]
        .copy_from_slice(&(file.tensors()[1].offset + 4).to_le_bytes());
    assert!(corrupt_at(b).1.contains("alignment"));
}

/// Byte position of tensor `name`'s data-offset field in the tensor table.
fn find_tensor_offset_field(file: &[u8], name: &str) -> usize {
    let mut pat = (name.len() as u64).to_le_bytes().to_vec();
    pat.extend(name.as_bytes());
    let at = file
        .windows(pat.len())
        .rposition(|w| w == pat.as_slice())
        .unwrap();
    let n_dims = u32::from_le_bytes(file[at + pat.len()..at + pat.len() + 4].try_into().unwrap());
    at + pat.len() + 4 + 8 * n_dims as usize + 4
}

/// Whatever parses must also be safe to use.
fn exercise(bytes: Vec<u8>) {
    if let Ok(f) = GgufFile::from_bytes(bytes) {
        for t in f.tensors().to_vec() {
            let v = f.tensor(&t.name).unwrap();
            let _ = v.to_f32();
            let _ = (v.rows(), v.row_len());
        }
        for (_, v) in f.metadata() {
            let _ = v.to_string();
        }
    }
}

#[test]
fn every_truncation_is_an_error_never_a_panic() {
    let good = sample();
    let data_end = good.len();
    for len in 0..data_end {
        let r = GgufFile::from_bytes(good[..len].to_vec());
        assert!(r.is_err(), "a {len}-byte prefix parsed");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn flipped_bytes_never_panic(flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8)) {
        let mut b = sample();
        let n = b.len();
        for (at, x) in flips {
            b[at % n] ^= x.max(1);
        }
        exercise(b);
    }

    #[test]
    fn hostile_integers_never_panic(at in any::<usize>(), v in prop_oneof![
        Just(u64::MAX), Just(u64::MAX / 2), Just(1u64 << 40), Just(0u64), any::<u64>()
    ]) {
        let mut b = sample();
        let at = at % (b.len() - 8);
        b[at..at + 8].copy_from_slice(&v.to_le_bytes());
        exercise(b);
    }
}
