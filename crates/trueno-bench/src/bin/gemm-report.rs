//! The GEMM table of BENCHMARKS.md from criterion's results of `benches/gemm.rs`: GFLOP/s
//! of trueno, ndarray and faer per shape, trueno's ratios, and trueno's share of the FMA
//! peak measured in the same run; then faer on trueno's own bytes (`faer-same-*`), and
//! trueno and faer interleaved in the same rounds (`paired_faer.json`).
//!
//! `cargo run -p trueno-bench --bin gemm-report [CRITERION_DIR]`

use std::path::{Path, PathBuf};

use serde_json::Value;

fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// GFLOP/s of one benchmark, from its mean time and its element (flop) throughput.
fn gflops(dir: &Path, id: &str, shape: &str) -> Option<f64> {
    let base = dir.join(id).join(shape).join("new");
    let mean_ns = read_json(&base.join("estimates.json"))?["mean"]["point_estimate"].as_f64()?;
    let flops = read_json(&base.join("benchmark.json"))?["throughput"]["Elements"].as_f64()?;
    Some(flops / mean_ns)
}

/// GB/s of one `gemm_extra` benchmark (bytes throughput over mean time).
fn gbps(dir: &Path, id: &str, n: usize) -> Option<f64> {
    let base = dir.join(id).join(n.to_string()).join("new");
    let mean_ns = read_json(&base.join("estimates.json"))?["mean"]["point_estimate"].as_f64()?;
    let bytes = read_json(&base.join("benchmark.json"))?["throughput"]["Bytes"].as_f64()?;
    Some(bytes / mean_ns)
}

fn extra(dir: &Path) {
    let dir = dir.with_file_name("gemm_extra");
    let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    println!(
        "\n| transpose n x n | trueno GB/s | ndarray GB/s | speedup | trueno 1 thread GB/s | speedup |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for n in [512, 2048] {
        let (t, a, t1) = (
            gbps(&dir, "transpose-trueno", n),
            gbps(&dir, "transpose-ndarray", n),
            gbps(&dir, "transpose-trueno-1t", n),
        );
        let r = |t: Option<f64>| {
            t.zip(a)
                .map_or("-".into(), |(t, a)| format!("{:.2}x", t / a))
        };
        println!(
            "| {n} | {} | {} | {} | {} | {} |",
            f(t),
            f(a),
            r(t),
            f(t1),
            r(t1)
        );
    }
    // The read ceiling: the faster of one stream (`Engine::sum`) and eight rows side by
    // side (`read_rate::sum_rows_interleaved`).
    println!(
        "\n| GEMV 4096x4096 | GEMV GB/s | read, one stream (sum) GB/s | read, eight rows side by side GB/s | share of the faster read |"
    );
    println!("|---|---:|---:|---:|---:|");
    for (label, g, r, st) in [
        (
            "1 thread",
            "gemv-trueno-1t",
            "read-sum-1t",
            "read-streams-1t",
        ),
        (
            "all threads",
            "gemv-trueno-all",
            "read-sum-all",
            "read-streams-all",
        ),
    ] {
        let (g, r, st) = (
            gbps(&dir, g, 4096),
            gbps(&dir, r, 4096),
            gbps(&dir, st, 4096),
        );
        let ceiling = match (r, st) {
            (Some(r), Some(st)) => Some(r.max(st)),
            (r, st) => r.or(st),
        };
        let share = g
            .zip(ceiling)
            .map_or("-".into(), |(g, c)| format!("{:.0}%", 100.0 * g / c));
        println!("| {label} | {} | {} | {} | {share} |", f(g), f(r), f(st));
    }
    // The same pair timed in the same rounds (`gemv_share` in benches/gemm.rs).
    let Some(sh) = read_json(&dir.with_file_name("gemm").join("gemv_share.json")) else {
        return;
    };
    println!(
        "\n| GEMV 4096x4096, interleaved (medians of {} rounds) | GEMV GB/s | read, one stream (sum) GB/s | read, eight rows side by side GB/s | share of the faster read |",
        sh["rounds"]
    );
    println!("|---|---:|---:|---:|---:|");
    for (label, key) in [
        ("1 thread, warm", "one_thread_warm"),
        ("1 thread, from memory", "one_thread_memory"),
        ("all threads, warm", "all_threads_warm"),
        ("all threads, from memory", "all_threads_memory"),
    ] {
        let v = |k: &str| sh[key][k].as_f64();
        let share = v("share").map_or("-".into(), |s| format!("{:.0}%", 100.0 * s));
        println!(
            "| {label} | {} | {} | {} | {share} |",
            f(v("gemv_gbps")),
            f(v("sum_gbps")),
            f(v("streams_gbps"))
        );
    }
}

fn main() {
    let dir: PathBuf = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/criterion/gemm")
        });
    let peak = read_json(&dir.join("fma_peak.json")).unwrap_or_default();
    let p1 = peak["one_thread_gflops"].as_f64().unwrap_or(f64::NAN);
    let pall = peak["all_threads_gflops"].as_f64().unwrap_or(f64::NAN);
    let threads = peak["threads"].as_u64().unwrap_or(0);
    println!(
        "FMA peak measured in the same run: {p1:.1} GFLOP/s on one thread, {pall:.1} on {threads}.\n"
    );
    println!(
        "| shape (m x k x n) | trueno 1t | ndarray 1t | faer 1t | vs ndarray | vs faer 1t | % of 1-core peak | trueno {threads}t | faer {threads}t | vs faer {threads}t | {threads}t / 1t |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut same = String::from(
        "\nfaer again on trueno's own bytes (A and C row-major, B as trueno stores it), in the same run:\n\n",
    );
    same += &format!(
        "| shape (m x k x n) | trueno 1t | faer 1t, trueno's bytes | vs it | trueno {threads}t | faer {threads}t, trueno's bytes | vs it |\n"
    );
    same += "|---|---:|---:|---:|---:|---:|---:|\n";
    let shapes = [
        "16",
        "32",
        "64",
        "128",
        "256",
        "512",
        "1024",
        "2048",
        "1x4096x4096",
        "32x4096x4096",
        "128x4096x11008",
        "1x4096x4096-wt",
        "32x4096x4096-wt",
        "128x4096x11008-wt",
        "64x32x4096-wt",
        "1024x128x4096",
        "128x128x16384",
    ];
    for s in shapes {
        let g = |id: &str| gflops(&dir, id, s);
        let (t1, n1, f1, ta, fa) = (
            g("trueno-1t"),
            g("ndarray-1t"),
            g("faer-1t"),
            g("trueno-all"),
            g("faer-all"),
        );
        let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
        let r = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => format!("{:.2}x", a / b),
            _ => "-".into(),
        };
        let pct = t1.map_or("-".to_string(), |t| format!("{:.0}%", 100.0 * t / p1));
        let shape = shape_name(s);
        println!(
            "| {shape} | {} | {} | {} | {} | {} | {pct} | {} | {} | {} | {} |",
            f(t1),
            f(n1),
            f(f1),
            r(t1, n1),
            r(t1, f1),
            f(ta),
            f(fa),
            r(ta, fa),
            r(ta, t1)
        );
        let (s1, sa) = (g("faer-same-1t"), g("faer-same-all"));
        same += &format!(
            "| {shape} | {} | {} | {} | {} | {} | {} |\n",
            f(t1),
            f(s1),
            r(t1, s1),
            f(ta),
            f(sa),
            r(ta, sa)
        );
    }
    print!("{same}");
    paired_table(&dir, &shapes, threads);
    extra(&dir);
}

/// trueno against faer on its own layout, the two interleaved in the same rounds
/// (`paired_faer.json` from benches/gemm.rs): medians of the rounds.
fn paired_table(dir: &Path, shapes: &[&str], threads: u64) {
    let Some(p) = read_json(&dir.join("paired_faer.json")) else {
        return;
    };
    println!(
        "\ntrueno and faer (its own layout) interleaved in the same rounds, {} rounds, the order turned each round (GFLOP/s of the median call; ratio: median of the rounds' ratios):\n",
        p["rounds"]
    );
    println!(
        "| shape (m x k x n) | trueno 1t | faer 1t | vs faer 1t | trueno {threads}t | faer {threads}t | vs faer {threads}t |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for s in shapes {
        let v = |t: &str, k: &str| p[*s][t][k].as_f64();
        let f = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.1}"));
        let r = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.2}x"));
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            shape_name(s),
            f(v("one_thread", "trueno_gflops")),
            f(v("one_thread", "faer_gflops")),
            r(v("one_thread", "ratio")),
            f(v("all_threads", "trueno_gflops")),
            f(v("all_threads", "faer_gflops")),
            r(v("all_threads", "ratio")),
        );
    }
}

/// The table's name for a criterion shape label ("1024", "32x4096x4096", "...-wt").
fn shape_name(s: &str) -> String {
    if let Some(base) = s.strip_suffix("-wt") {
        format!("{base} x·Wᵀ")
    } else if s.contains('x') {
        s.to_string()
    } else {
        format!("{s}x{s}x{s}")
    }
}
