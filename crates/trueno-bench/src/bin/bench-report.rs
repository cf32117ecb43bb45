//! Turns the criterion results of `benches/vector_ops.rs` into the markdown table of
//! BENCHMARKS.md: per op and size, trueno and ndarray times, their ratio, trueno's GB/s,
//! and for memory-bound ops that GB/s as a share of the measured copy bandwidth.
//!
//! `cargo run -p trueno-bench --bin bench-report [CRITERION_DIR]`

use std::path::{Path, PathBuf};

use serde_json::Value;

fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// Mean time (ns) and bytes of throughput of one benchmark.
fn measurement(dir: &Path, id: &str, n: usize) -> Option<(f64, f64)> {
    let base = dir.join(id).join(n.to_string()).join("new");
    let mean = read_json(&base.join("estimates.json"))?["mean"]["point_estimate"].as_f64()?;
    let bytes = read_json(&base.join("benchmark.json"))?["throughput"]["Bytes"].as_f64()?;
    Some((mean, bytes))
}

fn fmt_time(ns: f64) -> String {
    match ns {
        ns if ns >= 1e6 => format!("{:.2} ms", ns / 1e6),
        ns if ns >= 1e3 => format!("{:.2} µs", ns / 1e3),
        ns => format!("{ns:.0} ns"),
    }
}

fn main() {
    let dir: PathBuf = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/criterion/ops")
        });
    let mut ops: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| {
            panic!(
                "reading {}: {e} (run `cargo bench -p trueno-bench` first)",
                dir.display()
            )
        })
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .into_string()
                .ok()?
                .strip_suffix("_trueno")
                .map(str::to_string)
        })
        .collect();
    let order = [
        "add", "mul", "dot", "sum", "max", "argmax", "relu", "exp", "sigmoid", "tanh", "gelu",
        "softmax", "norm_l2",
    ];
    ops.sort_by_key(|o| order.iter().position(|x| x == o).unwrap_or(usize::MAX));
    let sizes = [1_000usize, 10_000, 100_000, 1_000_000, 10_000_000];
    println!(
        "| op | elements | trueno | ndarray | speedup | trueno GB/s | % of copy GB/s (1 thread / all) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for op in &ops {
        for &n in &sizes {
            let (Some((t, bytes)), Some((nd, _))) = (
                measurement(&dir, &format!("{op}_trueno"), n),
                measurement(&dir, &format!("{op}_ndarray"), n),
            ) else {
                continue;
            };
            let gbs = bytes / t;
            let copy = |id: &str| measurement(&dir, id, n).map_or(f64::NAN, |(ct, cb)| cb / ct);
            let share = format!(
                "{:.0}% / {:.0}%",
                100.0 * gbs / copy("copy_memcpy"),
                100.0 * gbs / copy("copy_parallel")
            );
            println!(
                "| {op} | {n} | {} | {} | {:.2}x | {gbs:.1} | {share} |",
                fmt_time(t),
                fmt_time(nd),
                nd / t
            );
        }
    }
    println!();
    println!("| copy | elements | time | GB/s |");
    println!("|---|---:|---:|---:|");
    for id in ["copy_memcpy", "copy_parallel"] {
        for &n in &sizes {
            if let Some((t, b)) = measurement(&dir, id, n) {
                println!(
                    "| {} | {n} | {} | {:.1} |",
                    id.trim_start_matches("copy_"),
                    fmt_time(t),
                    b / t
                );
            }
        }
    }
}
