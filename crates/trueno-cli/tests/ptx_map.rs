//! `trueno ptx map` end to end on small GGUF files written here: the text and JSON
//! maps of decode and prefill, llama and qwen2, and what it refuses.

mod common;
use common::{trueno, trueno_ok};

/// A two-layer llama-shaped GGUF (hidden 256, ffn 512, 4/2 heads of 64, vocab 320):
/// Q4_K weights, Q6_K value/down projections and output, as a Q4_K_M file has them.
fn tiny_llama(dir: &std::path::Path, arch: &str, bias: bool, drop: Option<&str>) -> String {
    use trueno_quant::gguf::{GgmlType, GgufValue, GgufWriter};
    use trueno_quant::{QuantFormat, quantize};
    let mut w = GgufWriter::new();
    let meta = |w: &mut GgufWriter, k: &str, v: u32| {
        w.add_metadata(&format!("{arch}.{k}"), GgufValue::U32(v))
            .unwrap()
    };
    w.add_metadata("general.architecture", GgufValue::String(arch.into()))
        .unwrap();
    meta(&mut w, "block_count", 2);
    meta(&mut w, "embedding_length", 256);
    meta(&mut w, "feed_forward_length", 512);
    meta(&mut w, "attention.head_count", 4);
    meta(&mut w, "attention.head_count_kv", 2);
    let mut add = |name: &str, cols: u64, rows: u64, q6: bool| {
        if drop == Some(name) {
            return;
        }
        let (f, t) = if q6 {
            (QuantFormat::Q6K, "Q6_K")
        } else {
            (QuantFormat::Q4K, "Q4_K")
        };
        let vals: Vec<f32> = (0..cols * rows)
            .map(|i| ((i % 17) as f32 - 8.0) / 8.0)
            .collect();
        let data = quantize(f, &vals).unwrap();
        w.add_tensor(name, &[cols, rows], GgmlType::from_name(t).unwrap(), data)
            .unwrap();
    };
    add("token_embd.weight", 256, 320, false);
    add("output.weight", 256, 320, true);
    for i in 0..2 {
        add(&format!("blk.{i}.attn_q.weight"), 256, 256, false);
        add(&format!("blk.{i}.attn_k.weight"), 256, 128, false);
        add(&format!("blk.{i}.attn_v.weight"), 256, 128, true);
        add(&format!("blk.{i}.attn_output.weight"), 256, 256, false);
        add(&format!("blk.{i}.ffn_gate.weight"), 256, 512, false);
        add(&format!("blk.{i}.ffn_up.weight"), 256, 512, false);
        add(&format!("blk.{i}.ffn_down.weight"), 512, 256, true);
    }
    if bias {
        w.add_tensor(
            "blk.0.attn_q.bias",
            &[256],
            GgmlType::from_name("F32").unwrap(),
            vec![0; 1024],
        )
        .unwrap();
    }
    let path = dir.join(format!("{arch}-{bias}-{}.gguf", drop.unwrap_or("all")));
    w.write(&path).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn ptx_map_lists_each_layers_launches_with_configs_bytes_and_a_roofline() {
    use trueno_gpu::kernels::Kernel;
    use trueno_gpu::kernels::qgemv::QuantFormat;
    use trueno_gpu::kernels::qgemv_q4k_mma_one::{QgemvQ8kMmaOneKernel, TileWarps};
    let dir = std::env::temp_dir().join(format!("trueno-cli-map-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let llama = tiny_llama(&dir, "llama", false, None);

    let out = trueno_ok(&["ptx", "map", &llama]);
    let text = String::from_utf8(out.stdout).unwrap();
    for want in [
        "llama, 2 layers, hidden 256, ffn 512, 4/2 heads x 64, vocab 320, rope normal",
        "layers 0-1 (each)",
        "trueno_quantize_q8k_f32",
        "trueno_qgemv_q4_k_q8k",
        "trueno_qgemv_q6_k_q8k",
        "trueno_decode_attn_mma_d64_f16",
        "trueno_argmax_f32",
        "trueno_dequant_rows_q4_k_f32",
        "43 launches per token (0 without a kernel yet)",
        "launch floor: 43 launches x 3.5 µs = 150.5 µs (above the roofline: launch-bound",
    ] {
        assert!(text.contains(want), "{want} missing from\n{text}");
    }
    // The H100 (the default device) runs the default Q6_K kernel; the H200, with more
    // bandwidth a multiprocessor, its late-activation one (`late_wins`).
    assert!(!text.contains("_q8k_late"), "{text}");

    let out = trueno_ok(&[
        "ptx", "map", &llama, "--json", "--device", "h200", "--kv", "bf16",
    ]);
    let json = String::from_utf8(out.stdout.clone()).unwrap();
    assert!(json.contains("\"trueno_qgemv_q6_k_q8k_late\""), "{json}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["totals"]["launches"], 43);
    assert_eq!(v["totals"]["steps_without_kernel"], 0);
    assert_eq!(v["kv_cache"], "bf16");
    assert_eq!(v["totals"]["launch_floor_us"], 43.0 * 3.5);
    let steps = v["layers"][0]["steps"].as_array().unwrap();
    assert_eq!(
        (
            v["layers"][0]["first"].clone(),
            v["layers"][0]["last"].clone()
        ),
        (0.into(), 1.into())
    );
    // The norm, the input's quantization (shared by q, k and v), then the projections.
    assert_eq!(steps.len(), 19);
    assert_eq!(steps[1]["kernel"], "trueno_quantize_q8k_f32");
    let q = &steps[2];
    assert_eq!(q["step"], "q projection");
    // 256 x 256 Q4_K: 256 rows of one 144-byte block; the input as one Q8_K block (256
    // quants, an f32 scale, sixteen i32 sums), y out in f32.
    let q8k = 256 + 4 + 16 * 4;
    assert_eq!(q["bytes"], 256 * 144 + q8k + 256 * 4);
    assert_eq!(q["flops"], 2 * 256 * 256);
    // On the tensor cores, sixteen warps a tile of 16 rows (16 tiles fit a wave).
    assert_eq!(q["kernel"], "trueno_qgemv_q4_k_q8k_mma1_w16");
    let cfg = QgemvQ8kMmaOneKernel(QuantFormat::Q4K, TileWarps::Sixteen)
        .launch_config(&[256, 256])
        .unwrap();
    assert_eq!(
        (q["grid"][0].clone(), q["block"][0].clone()),
        (16.into(), 512.into())
    );
    assert_eq!(q["grid"][0], cfg.grid.0);
    assert_eq!(q["block"][0], cfg.block.0);
    // Memory-bound at H200's 4800 GB/s.
    let us = q["roofline_us"].as_f64().unwrap();
    assert!(
        (us - (256.0 * 144.0 + 324.0 + 1024.0) / 4800e3).abs() < 1e-9,
        "{us}"
    );

    // A prefill: every step has a kernel, the projections three launches each.
    let out = trueno_ok(&[
        "ptx",
        "map",
        &llama,
        "--prefill",
        "--tokens",
        "64",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["totals"]["steps_without_kernel"], 0);
    assert!(
        v["layers"][0]["steps"]
            .as_array()
            .unwrap()
            .iter()
            // The default device is an H100: Hopper's FlashAttention kernel, at 64 tokens
            // (up to 1024) its two-warpgroup form.
            .any(|s| s["kernel"] == "trueno_flash_attn_wgmma_bf16_d64_wg2")
    );

    // qwen2: NeoX rotation and three bias adds a layer.
    let qwen = tiny_llama(&dir, "qwen2", true, None);
    let out = trueno_ok(&["ptx", "map", &qwen, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["model"]["rope"], "neox");
    assert_eq!(v["totals"]["launches"], 1 + 2 * 22 + 4);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn ptx_map_explains_what_it_cannot_map() {
    let dir = std::env::temp_dir().join(format!("trueno-cli-map-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases = [
        (tiny_llama(&dir, "gpt2", false, None), "architecture gpt2"),
        (
            tiny_llama(&dir, "llama", false, Some("blk.1.ffn_up.weight")),
            "no tensor blk.1.ffn_up.weight",
        ),
    ];
    for (file, want) in &cases {
        let out = trueno(&["ptx", "map", file]);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{err}");
    }
    let llama = tiny_llama(&dir, "llama", false, None);
    for (args, want) in [
        (vec!["--device", "v100"], "unknown device v100"),
        (vec!["--kv", "q8"], "unknown KV cache type q8"),
        (vec!["--context", "0"], "context of at least 1"),
        (vec!["--launch-us", "NaN"], "not a time"),
    ] {
        let mut all = vec!["ptx", "map", llama.as_str()];
        all.extend(args);
        let out = trueno(&all);
        assert!(!out.status.success(), "{all:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
