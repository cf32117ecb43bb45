//! The PTX analyzer on 10,000-line files (target: under 50 ms), against ptxas -v on the
//! same file in the same run when ptxas is installed (`PTXAS`, or scripts/setup-ptxas.sh
//! .venv-cuda): the peer that gives register figures today.
//!
//! `cargo bench -p trueno-bench --bench ptx_analyze` prints the BENCHMARKS.md table at the end.

use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion};
use trueno_gpu::analyze::{Config, analyze, parse, ptxas};
use trueno_gpu::kernels::find;
use trueno_gpu::ptx::Target;

/// One kernel of at least `lines` lines: the tiled GEMM's body repeated, labels renamed per
/// copy, so it keeps its loops, barriers, shared tiles and 130 live registers.
fn one_large_kernel(lines: usize) -> String {
    let ptx = find("trueno_gemm_tiled_f32")
        .and_then(|k| k.emit_ptx(Target::Sm90))
        .expect("the tiled GEMM emits");
    let all: Vec<&str> = ptx.lines().collect();
    let open = all.iter().position(|l| *l == "{").expect("a body");
    let first = open
        + all[open..]
            .iter()
            .position(|l| l.is_empty())
            .expect("a blank line")
        + 1;
    let close = all
        .iter()
        .rposition(|l| *l == "}")
        .expect("a closing brace");
    let body = &all[first..close];
    let mut out: Vec<String> = all[..first].iter().map(|s| s.to_string()).collect();
    let mut copy = 0;
    while out.len() < lines {
        out.extend(
            body.iter()
                .map(|l| l.replace("$L__", &format!("$L_c{copy}_"))),
        );
        copy += 1;
    }
    out.push("}".into());
    out.join("\n") + "\n"
}

/// Many functions of ordinary size: the nvcc fixture (eight kernels) repeated.
fn many_kernels(lines: usize) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../trueno-gpu/tests/fixtures/ptx/nvcc/kernels_sm_90.ptx");
    let text = std::fs::read_to_string(&path).expect("the nvcc fixture");
    let cut = text
        .find(".address_size")
        .map_or(0, |i| i + text[i..].find('\n').unwrap_or(0));
    let (head, rest) = text.split_at(cut);
    let mut out = head.to_string();
    let mut copy = 0;
    while out.lines().count() < lines {
        // Renamed so each copy's symbols are distinct, as ptxas requires.
        out += &rest
            .replace("_Z6hornerPKfif", &format!("_Z6horner{copy}PKfif"))
            .replace(".entry ", &format!(".entry c{copy}_"));
        copy += 1;
    }
    out
}

fn main() {
    let mut c = Criterion::default()
        .configure_from_args()
        .measurement_time(Duration::from_secs(4));
    let inputs = [
        ("one-kernel-10k", one_large_kernel(10_000)),
        ("many-kernels-10k", many_kernels(10_000)),
    ];
    let ptxas = ptxas::locate(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."));
    let dir = std::env::temp_dir().join(format!("trueno-ptx-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut rows = Vec::new();
    let mut g = c.benchmark_group("ptx_analyze");
    for (name, text) in &inputs {
        let lines = text.lines().count();
        assert!(analyze(text, &Config::default()).is_ok(), "{name} analyzes");
        g.bench_with_input(BenchmarkId::new("parse", name), text, |b, t| {
            b.iter(|| parse(t).unwrap())
        });
        g.bench_with_input(BenchmarkId::new("analyze", name), text, |b, t| {
            b.iter(|| analyze(t, &Config::default()).unwrap())
        });
        // The same-run ratio, from a direct median (criterion's own estimates are above).
        let ours = median(|| drop(analyze(text, &Config::default())), 15);
        let theirs = ptxas.as_ref().map(|p| {
            let file = dir.join(format!("{name}.ptx"));
            std::fs::write(&file, text).expect("write");
            median(
                || {
                    let log = ptxas::run_verbose(p, &file, "sm_90", Path::new("/dev/null"));
                    assert!(log.is_ok(), "{log:?}");
                },
                3,
            )
        });
        rows.push((name, lines, ours, theirs));
    }
    g.finish();
    c.final_summary();
    let _ = std::fs::remove_dir_all(&dir);
    println!("\n| input | lines | analyze ms | ptxas -v ms | ptxas / analyze |");
    println!("|---|---:|---:|---:|---:|");
    for (name, lines, ours, theirs) in rows {
        let (t, r) = theirs.map_or(("n/a".into(), "n/a".into()), |t| {
            (format!("{:.0}", t * 1e3), format!("{:.0}x", t / ours))
        });
        println!("| {name} | {lines} | {:.1} | {t} | {r} |", ours * 1e3);
    }
}

/// Median seconds of `n` runs.
fn median(mut f: impl FnMut(), n: usize) -> f64 {
    let mut t: Vec<f64> = (0..n)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[n / 2]
}
