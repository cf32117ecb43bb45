//! `trueno gguf inspect`: a GGUF file's metadata, tensor table and totals by type.

use std::collections::BTreeMap;
use std::io::Write;

use trueno_quant::gguf::{GgufFile, GgufValue};

/// A metadata value as JSON (arrays in full: `--json` is for machines).
fn value_json(v: &GgufValue) -> serde_json::Value {
    use serde_json::json;
    match v {
        GgufValue::U8(x) => json!(x),
        GgufValue::I8(x) => json!(x),
        GgufValue::U16(x) => json!(x),
        GgufValue::I16(x) => json!(x),
        GgufValue::U32(x) => json!(x),
        GgufValue::I32(x) => json!(x),
        GgufValue::F32(x) => json!(x),
        GgufValue::Bool(x) => json!(x),
        GgufValue::String(x) => json!(x),
        GgufValue::U64(x) => json!(x),
        GgufValue::I64(x) => json!(x),
        GgufValue::F64(x) => json!(x),
        GgufValue::Array(_, items) => items.iter().map(value_json).collect(),
    }
}

fn human_bytes(b: u64) -> String {
    match b {
        b if b >= 1 << 30 => format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.2} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

/// Prints the file's contents; every structural problem is reported by the parser.
pub fn inspect(path: &str, json: bool) -> Result<(), Box<dyn std::error::Error>> {
    let f = GgufFile::open(path)?;
    // Totals per type: (tensors, elements, bytes).
    let mut totals: BTreeMap<&str, (u64, u64, u64)> = BTreeMap::new();
    for t in f.tensors() {
        let e = totals.entry(t.ggml_type.name).or_default();
        *e = (e.0 + 1, e.1 + t.elements(), e.2 + t.size);
    }
    let mut out = std::io::stdout().lock();
    if json {
        let doc = serde_json::json!({
            "file": path,
            "version": f.version(),
            "file_bytes": f.file_size(),
            "alignment": f.alignment(),
            "data_offset": f.data_offset(),
            "metadata": f.metadata().iter().map(|(k, v)| serde_json::json!({
                "key": k, "type": format!("{:?}", v.value_type()), "value": value_json(v),
            })).collect::<Vec<_>>(),
            "tensors": f.tensors().iter().map(|t| serde_json::json!({
                "name": t.name, "type": t.ggml_type.name, "dims": t.dims,
                "elements": t.elements(), "bytes": t.size, "offset": t.offset,
            })).collect::<Vec<_>>(),
            "totals": totals.iter().map(|(ty, (n, e, b))| serde_json::json!({
                "type": ty, "tensors": n, "elements": e, "bytes": b,
            })).collect::<Vec<_>>(),
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        return Ok(());
    }
    writeln!(
        out,
        "{path}: GGUF v{}, {} ({} bytes), alignment {}, data at byte {}",
        f.version(),
        human_bytes(f.file_size()),
        f.file_size(),
        f.alignment(),
        f.data_offset()
    )?;
    writeln!(out, "\nmetadata ({} keys)", f.metadata().len())?;
    for (k, v) in f.metadata() {
        let mut s = v.to_string();
        if s.chars().count() > 100 {
            s = s.chars().take(97).collect::<String>() + "...";
        }
        writeln!(out, "  {k:<40} {s}")?;
    }
    writeln!(out, "\ntensors ({})", f.tensors().len())?;
    writeln!(
        out,
        "  {:<40} {:<8} {:<24} {:>12} {:>14}",
        "name", "type", "shape", "bytes", "offset"
    )?;
    for t in f.tensors() {
        let shape = format!("{:?}", t.dims);
        writeln!(
            out,
            "  {:<40} {:<8} {:<24} {:>12} {:>14}",
            t.name, t.ggml_type.name, shape, t.size, t.offset
        )?;
    }
    writeln!(out, "\ntotals by type")?;
    for (ty, (n, e, b)) in &totals {
        writeln!(
            out,
            "  {ty:<8} {n:>6} tensors {e:>14} elements {:>12}",
            human_bytes(*b)
        )?;
    }
    Ok(())
}
