//! The quantized-matvec tables of BENCHMARKS.md from criterion's results of
//! `benches/quant.rs`: fused matvec against dequantize-then-GEMV and against a read of the
//! same bytes, one thread and all; dequantization throughput per format.
//!
//! `cargo run --release -p trueno-bench --bin quant-report [CRITERION_DIR]`

use std::path::{Path, PathBuf};

use serde_json::Value;

fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// (mean seconds, bytes of throughput) of one benchmark.
fn measure(dir: &Path, group: &str, id: &str, label: &str) -> Option<(f64, f64)> {
    let base = dir.join(group).join(id).join(label).join("new");
    let ns = read_json(&base.join("estimates.json"))?["mean"]["point_estimate"].as_f64()?;
    let bytes = read_json(&base.join("benchmark.json"))?["throughput"]["Bytes"].as_f64()?;
    Some((ns * 1e-9, bytes))
}

fn main() {
    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target/criterion"));
    println!(
        "| weights | shape (rows x cols) | threads | fused ms | dequant+GEMV ms | fused speedup | \
         fused GB/s | read GB/s | fused / read |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---:|---:|");
    for shape in ["4096x4096", "11008x4096", "32000x4096"] {
        for format in ["Q4_K", "Q6_K", "Q8_0"] {
            let label = format!("{format}-{shape}");
            for threads in ["1t", "all"] {
                let get =
                    |id: &str| measure(&dir, "quant_matvec", &format!("{id}-{threads}"), &label);
                let (Some(f), Some(d), Some(r)) = (get("fused"), get("dequant-gemv"), get("read"))
                else {
                    continue;
                };
                let (fgb, rgb) = (f.1 / f.0 / 1e9, r.1 / r.0 / 1e9);
                println!(
                    "| {format} | {shape} | {threads} | {:.2} | {:.2} | {:.2}x | {fgb:.1} | {rgb:.1} | {:.0}% |",
                    f.0 * 1e3,
                    d.0 * 1e3,
                    d.0 / f.0,
                    100.0 * fgb / rgb
                );
            }
        }
    }
    println!();
    println!("| format | dequantize GB/s of f32 output (one thread) |");
    println!("|---|---:|");
    for format in [
        "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "NF4",
    ] {
        if let Some((s, b)) = measure(&dir, "quant_dequantize", "dequantize", format) {
            println!("| {format} | {:.1} |", b / s / 1e9);
        }
    }
}
