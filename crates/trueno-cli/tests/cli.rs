//! The `trueno` binary end to end: info (text and JSON), bench on one op, and bad input.

use std::process::Command;

mod common;
use common::{trueno, trueno_ok, trueno_with};

#[test]
fn info_json_lists_backends_and_a_backend_per_class() {
    let out = trueno_ok(&["info", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let backends: Vec<&str> = v["available_backends"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_str().unwrap())
        .collect();
    assert!(backends.contains(&"scalar"));
    let classes: Vec<&str> = v["per_class"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[0].as_str().unwrap())
        .collect();
    assert_eq!(
        classes,
        [
            "elementwise",
            "transcendental",
            "reduction",
            "conversion",
            "matmul"
        ]
    );
    let gemm = &v["gemm"];
    assert!(
        gemm["micro_kernel"].as_str().unwrap().contains('x'),
        "{gemm}"
    );
    assert!(
        gemm["kc"].as_u64().unwrap() > 0 && gemm["l1_kib"].as_u64().unwrap() > 0,
        "{gemm}"
    );
    for p in v["per_class"].as_array().unwrap() {
        assert!(
            backends.contains(&p[1].as_str().unwrap()),
            "chosen backend must be available"
        );
    }
}

/// `TRUENO_CACHE_SIZES` is the caches GEMM blocks for (an Arm server's here, whatever
/// this machine's are); a malformed one leaves the detected sizes in place.
#[test]
fn info_shows_the_cache_sizes_trueno_cache_sizes_sets() {
    let caches = |env: &[(&str, &str)]| {
        let out = trueno_with(&["info", "--json"], env);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let g = &v["gemm"];
        [&g["l1_kib"], &g["l2_kib"], &g["l3_kib"]].map(|x| x.as_u64().unwrap())
    };
    let set = |sizes| caches(&[("TRUENO_CACHE_SIZES", sizes)]);
    assert_eq!(set("64K,1M,32M"), [64, 1024, 32768]);
    assert_eq!(set("40960, 655360 ,2m"), [40, 640, 2048]);
    let detected = caches(&[]);
    assert_eq!(set("64K,1M"), detected);
    assert_eq!(set("1M,64K,32M"), detected);
}

#[test]
fn info_text_names_the_cpu_and_classes() {
    let out = trueno(&["info"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("CPU") && text.contains("transcendental"),
        "{text}"
    );
}

/// `trueno info | head -0`: the reader is gone before the first line is written (the child
/// is still starting when its pipe is closed), which must end quietly, not in a panic.
#[test]
fn info_into_a_closed_pipe_exits_cleanly() {
    for args in [&["info"][..], &["info", "--json"]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_trueno"))
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && !err.contains("panicked"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn bench_json_reports_every_backend_with_scalar_as_baseline() {
    let out = trueno_ok(&["bench", "--quick", "--json", "--ops", "add"]);
    let cells: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let backends = trueno::available_cpu_backends();
    assert_eq!(cells.len(), 4 * backends.len(), "4 sizes x every backend");
    for c in &cells {
        assert_eq!(c["op"], "add");
        assert!(c["ns_per_call"].as_f64().unwrap() > 0.0);
        assert!(c["gb_per_s"].as_f64().unwrap() > 0.0);
        if c["backend"] == "scalar" {
            assert_eq!(c["speedup_vs_scalar"].as_f64().unwrap(), 1.0);
        }
    }
}

#[test]
fn unknown_op_and_bad_backend_fail_with_a_message() {
    let out = trueno(&["bench", "--quick", "--ops", "nope"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown op"));
    let out = Command::new(env!("CARGO_BIN_EXE_trueno"))
        .args(["info"])
        .env("TRUENO_BACKEND", "avx9")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("avx9"));
}

#[test]
fn ptx_list_names_every_kernel_and_emit_prints_assemblable_ptx_text() {
    let out = trueno_ok(&["ptx", "list", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["name"].as_str().unwrap())
        .collect();
    for want in [
        "trueno_gelu_f32",
        "trueno_argmax_f32",
        "trueno_softmax_block_v4_f32",
        "trueno_add_rmsnorm_f32",
        "trueno_gemm_tiled_f32",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    for target in ["sm_80", "sm_90"] {
        let out = trueno(&["ptx", "emit", "trueno_gelu_f32", "--target", target]);
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains(&format!(".target {target}")));
        assert!(text.contains(".visible .entry trueno_gelu_f32("));
    }
}

#[test]
fn ptx_emit_rejects_unknown_kernels_and_targets() {
    let out = trueno(&["ptx", "emit", "no_such_kernel"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown kernel no_such_kernel"));
    let out = trueno(&["ptx", "emit", "trueno_add_f32", "--target", "sm_70"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown target sm_70"));
}

#[test]
fn info_reports_the_wgpu_adapter_or_why_there_is_none() {
    let out = trueno(&["info", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let w = &v["wgpu"];
    // Exactly one of the two; CI (lavapipe installed, TRUENO_REQUIRE_WGPU set) has an adapter.
    assert_ne!(w["adapter"].is_null(), w["error"].is_null(), "{w}");
    if std::env::var_os("TRUENO_REQUIRE_WGPU").is_some() {
        assert!(w["adapter"].is_string(), "{w}");
    }
}

#[test]
fn info_reports_cuda_devices_or_why_there_are_none() {
    let out = trueno(&["info", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let cuda = &v["cuda"];
    let devices = cuda["devices"].as_array().unwrap();
    // Either devices are listed, or the error says why not; never neither.
    assert_ne!(devices.is_empty(), cuda["error"].is_null(), "{cuda}");
}

#[test]
fn bench_gemm_reports_gflops_and_a_share_of_the_fma_peak_per_backend() {
    let out = trueno_ok(&["bench", "--quick", "--json", "--ops", "gemm"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let cells = v.as_array().unwrap();
    assert!(!cells.is_empty());
    for c in cells {
        assert_eq!(c["op"], "gemm");
        let gflops = c["gflops"].as_f64().unwrap();
        assert!(gflops > 0.0 && gflops.is_finite(), "{c}");
        assert!(c["percent_of_fma_peak"].as_f64().is_some(), "{c}");
    }
    let scalar: Vec<_> = cells.iter().filter(|c| c["backend"] == "scalar").collect();
    assert!(
        scalar
            .iter()
            .all(|c| (c["speedup_vs_scalar"].as_f64().unwrap() - 1.0).abs() < 1e-9)
    );
}

#[test]
fn gguf_inspect_prints_metadata_tensors_and_totals() {
    use trueno_quant::gguf::{GgmlType, GgufValue, GgufWriter};
    let dir = std::env::temp_dir().join(format!("trueno-cli-gguf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("m.gguf");
    let mut w = GgufWriter::new();
    w.add_metadata("general.name", GgufValue::String("tiny".into()))
        .unwrap();
    let q = trueno_quant::quantize(trueno_quant::QuantFormat::Q6K, &[0.25; 512]).unwrap();
    w.add_tensor(
        "blk.0.w",
        &[256, 2],
        GgmlType::from_name("Q6_K").unwrap(),
        q,
    )
    .unwrap();
    w.write(&path).unwrap();
    let p = path.to_str().unwrap();

    let out = trueno_ok(&["gguf", "inspect", p]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("general.name") && text.contains("\"tiny\""),
        "{text}"
    );
    assert!(text.contains("blk.0.w") && text.contains("Q6_K"), "{text}");
    assert!(text.contains("[256, 2]") && text.contains("420"), "{text}");

    let out = trueno(&["gguf", "inspect", p, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["tensors"][0]["bytes"], 420);
    assert_eq!(v["totals"][0]["type"], "Q6_K");
    assert_eq!(v["metadata"][0]["value"], "tiny");

    // A file cut short fails with the reason and a non-zero exit, no panic.
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 10]).unwrap();
    let out = trueno(&["gguf", "inspect", p]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("runs past the end"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

fn fixture(rel: &str) -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../trueno-gpu/tests/fixtures/ptx")
        .join(rel)
        .to_string_lossy()
        .into_owned()
}

#[test]
fn ptx_analyze_reports_json_and_bugs_with_an_exit_status() {
    let file = fixture("nvcc/kernels_sm_90.ptx");
    let out = trueno(&["ptx", "analyze", &file, "--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = v["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|k| k["name"].as_str())
        .collect();
    assert!(
        names.contains(&"sgemm_tiled") && names.contains(&"vec_add"),
        "{names:?}"
    );
    let k = &v["kernels"][1];
    assert!(k["registers"]["estimated"].as_u64().unwrap() > 0);
    assert!(k["occupancy"]["occupancy"].as_f64().unwrap() > 0.0);

    let text = trueno(&["ptx", "analyze", &file, "--verbose", "--target", "sm_80"]);
    assert!(text.status.success());
    let s = String::from_utf8_lossy(&text.stdout);
    assert!(
        s.contains("occupancy") && s.contains("coalescing") && s.contains("sm_80"),
        "{s}"
    );

    // A critical finding: exit status 2, one line per finding.
    let bug = fixture("bugs/missing-barrier.ptx");
    let out = trueno(&["ptx", "analyze", &bug, "--bugs"]);
    assert_eq!(out.status.code(), Some(2));
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.contains("critical [missing-barrier]") && s.contains(":21:"),
        "{s}"
    );
}

#[test]
fn ptx_analyze_bad_input_is_a_message_not_a_panic() {
    for args in [
        vec!["ptx", "analyze", "/nonexistent/file.ptx"],
        vec!["ptx", "analyze", env!("CARGO_MANIFEST_DIR"), "--json"],
    ] {
        let out = trueno(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("cannot read") && !err.contains("panicked"),
            "{err}"
        );
    }
    let bad = std::env::temp_dir().join(format!("trueno-bad-{}.ptx", std::process::id()));
    std::fs::write(&bad, ".entry k() {\n  mov.u32 %r1, %r2\n}\n").unwrap();
    let out = trueno(&["ptx", "analyze", bad.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(err.contains(":3:1:") && err.contains("expected"), "{err}");
    let out = trueno(&["ptx", "analyze", bad.to_str().unwrap(), "--target", "sm_52"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown target"));
    let _ = std::fs::remove_file(&bad);
}

/// With ptxas available (`PTXAS` or .venv-cuda), `--ptxas` sets its figures beside ours.
#[test]
fn ptx_analyze_with_ptxas_shows_its_registers() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let ptxas = trueno_gpu::analyze::ptxas::locate(&root);
    let Some(ptxas) = ptxas else {
        assert!(
            std::env::var("TRUENO_REQUIRE_PTXAS").is_err(),
            "ptxas required but missing"
        );
        eprintln!("SKIPPED: ptxas not found; run scripts/setup-ptxas.sh .venv-cuda");
        return;
    };
    let out = Command::new(env!("CARGO_BIN_EXE_trueno"))
        .args([
            "ptx",
            "analyze",
            &fixture("triton/add_kernel.ptx"),
            "--ptxas",
            "--json",
        ])
        .env("PTXAS", &ptxas)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["ptxas"][0]["registers"].as_u64().unwrap() > 0, "{v}");
}

#[test]
fn bench_crossover_reports_cpu_and_gpu_rows_or_says_why_not() {
    let out = trueno_ok(&["bench", "--quick", "--ops", "crossover", "--json"]);
    let cells: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    if cells.is_empty() {
        assert!(
            std::env::var_os("TRUENO_REQUIRE_WGPU").is_none(),
            "TRUENO_REQUIRE_WGPU is set but bench measured no crossover"
        );
        eprintln!("no wgpu adapter: crossover rows skipped");
        return;
    }
    for w in [
        "elementwise",
        "transcendental",
        "reduction",
        "matmul",
        "gemv",
    ] {
        let op = format!("crossover-{w}");
        let rows: Vec<_> = cells.iter().filter(|c| c["op"] == op.as_str()).collect();
        assert!(!rows.is_empty() && rows.len() % 2 == 0, "{op}: {rows:?}");
        for pair in rows.chunks(2) {
            assert_eq!(pair[0]["size"], pair[1]["size"]);
            assert_eq!(pair[1]["backend"], "gpu");
            let (cpu, gpu) = (
                pair[0]["ns_per_call"].as_f64().unwrap(),
                pair[1]["ns_per_call"].as_f64().unwrap(),
            );
            let ratio = pair[1]["gpu_speedup_vs_cpu"].as_f64().unwrap();
            assert!(
                (ratio - cpu / gpu).abs() <= 1e-6 * ratio + 1e-9,
                "{op}: {ratio} vs {cpu}/{gpu}"
            );
        }
    }
    // The text form ends with the line that pins what was measured.
    let out = trueno(&["bench", "--quick", "--ops", "crossover"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let pin = text.lines().last().unwrap_or("");
    assert!(
        pin.starts_with("TRUENO_GPU_CROSSOVER=elementwise="),
        "{text}"
    );
}

#[test]
fn a_bad_gpu_crossover_is_an_error_naming_the_variable() {
    if !cfg!(feature = "wgpu") {
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_trueno"))
        .args(["info"])
        .env_remove("TRUENO_BACKEND")
        .env("TRUENO_GPU_CROSSOVER", "matmul=lots")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("TRUENO_GPU_CROSSOVER") && err.contains("lots"),
        "{err}"
    );
}
