//! Plan tests of the quantized matrix-vector products: which kernel `Stream::qgemv_q8k`
//! would run for each projection, by format, width and device.

use super::*;
use crate::kernels::qgemv_dp4a::QgemvQ8kKernel;
use crate::kernels::qgemv_q4k_mma_one::{QgemvQ8kMmaOneKernel, TileWarps};
use crate::kernels::qgemv_q6k_mma_one::{QgemvQ6kMmaOneKernel, TileBlocks};

#[test]
fn q8_0_projections_take_the_integer_path_where_inputs_are_whole_q8k_blocks() {
    let q8 = wt("Q8_0", 32, 34);
    let mut m = llama3_8b();
    for l in &mut m.layer_weights {
        *l = LayerWeights {
            q: q8.clone(),
            k: q8.clone(),
            v: q8.clone(),
            o: q8.clone(),
            gate: q8.clone(),
            up: q8.clone(),
            down: q8.clone(),
        };
    }
    (m.embedding, m.output) = (q8.clone(), q8.clone());
    let kernels = |p: &Plan, what: &str| -> Vec<String> {
        p.layers[0]
            .iter()
            .filter(|s| s.what == what)
            .filter_map(|s| s.kernel.clone())
            .collect()
    };
    let p = plan(&m, Phase::Decode { context: 512 }, FloatType::F16, H100).unwrap();
    for what in ["q projection", "down projection"] {
        assert_eq!(kernels(&p, what), ["trueno_qgemv_q8_0_q8k"], "{what}");
    }
    // A Qwen2-0.5B-like width: 896 inputs are not whole blocks of 256 (the f32 path,
    // no quantization), the FFN's 4864 are (down takes the integer path).
    m.hidden = 896;
    m.heads_q = 14;
    m.heads_kv = 2;
    m.head_dim = 64;
    m.ffn = 4864;
    let p = plan(&m, Phase::Decode { context: 512 }, FloatType::F16, H100).unwrap();
    for what in ["q projection", "gate projection", "output projection"] {
        assert_eq!(kernels(&p, what), ["trueno_qgemv_q8_0_f32"], "{what}");
    }
    assert_eq!(kernels(&p, "down projection"), ["trueno_qgemv_q8_0_q8k"]);
    let quantize = p.layers[0]
        .iter()
        .filter(|s| s.kernel.as_deref() == Some("trueno_quantize_q8k_f32"))
        .count();
    assert_eq!(quantize, 1, "down's input alone");
    // A prefill: 896 columns are not whole groups of 256 for the quantized GEMM.
    let p = plan(&m, Phase::Prefill { tokens: 64 }, FloatType::F16, A100).unwrap();
    let q = p.layers[0]
        .iter()
        .find(|s| s.what == "q projection")
        .unwrap();
    assert!(q.missing.as_deref().unwrap().contains("896"), "{q:?}");
    // down (896 rows, 4864 columns): 7 tiles on 108 SMs, its k cut in 15.
    assert_eq!(
        kernels(&p, "down projection (GEMM, k in 15)"),
        ["trueno_gemm_mma_bf16_f32_k64"]
    );
}

/// A Q6_K down projection (4096 rows of 14336 columns: 256 tiles, long rows) takes the
/// tensor-core kernel at two blocks a multiprocessor, its weights staged in shared
/// memory, on an H100 (one wave of them) and an A100 (two), as `Stream::qgemv_q8k` does
/// (`q6k_mma_one_for`); the 1024-row value projection (64 tiles of 4096-column rows) the
/// default `dp4a` kernel on both.
#[test]
fn q6_k_products_name_the_kernel_the_stream_runs() {
    let m = llama3_8b();
    let named = |d: &DevicePeak, what: &str| -> String {
        let p = plan(&m, Phase::Decode { context: 512 }, FloatType::F16, d).unwrap();
        let s = p.layers[0].iter().find(|s| s.what == what).unwrap();
        s.kernel.clone().unwrap()
    };
    let two = QgemvQ6kMmaOneKernel(TileBlocks::StagedTwo).name();
    assert_eq!(named(H100, "down projection"), two);
    assert_eq!(named(A100, "down projection"), two);
    assert_eq!(named(H100, "v projection"), "trueno_qgemv_q6_k_q8k");
    assert_eq!(named(A100, "v projection"), "trueno_qgemv_q6_k_q8k");
}

/// Llama-3 8B's Q6_K output layer (128256 rows of 4096 columns) takes the copy engine's
/// tiles in a persistent ring of two on an H100 (bulk copies), the three-block register
/// form on an A100, as `Stream::qgemv_q8k` does (`bulk_ring_for`), its launch included.
#[test]
fn a_q6_k_output_layer_of_4096_columns_takes_the_copy_engines_tiles_on_hopper() {
    use crate::kernels::qgemv_q6k_mma_one_bulk::BulkRing;
    let m = llama3_8b();
    let logits = |d: &DevicePeak| {
        let p = plan(&m, Phase::Decode { context: 512 }, FloatType::F16, d).unwrap();
        let s = p
            .epilogue
            .iter()
            .find(|s| s.what == "output projection (logits)");
        let s = s.unwrap();
        (s.kernel.clone().unwrap(), s.config.unwrap())
    };
    let ring = QgemvQ6kMmaOneKernel(TileBlocks::Bulk(BulkRing::RING_OF_TWO.on(132)));
    let (name, config) = logits(H100);
    assert_eq!(name, ring.name());
    assert_eq!(
        (config.grid.0, config.shared_bytes),
        (264, 2 * 16 * 16 * 210)
    );
    assert_eq!(config, ring.launch_config(&[128256, 4096]).unwrap());
    let three = QgemvQ6kMmaOneKernel(TileBlocks::Three);
    assert_eq!(logits(A100).0, three.name());
}

/// Qwen2-7B's Q6_K products, whose rows are not whole 1024-column groups (3584 and 18944
/// columns, 4 mod 8 bytes a row), take the tensor-core kernel too: the down projection
/// (3584 rows of 18944 columns: long rows) at two blocks a multiprocessor, staged, the output
/// layer (152064 rows, many waves) at three; the 512-row value projection `dp4a`.
#[test]
fn q6_k_products_of_rows_off_the_8_byte_grid_name_the_tensor_core_kernel() {
    let mut m = llama3_8b();
    (m.arch, m.hidden, m.ffn, m.vocab) = ("qwen2".into(), 3584, 18944, 152064);
    (m.heads_q, m.heads_kv, m.qkv_bias, m.rope) = (28, 4, true, RopeMode::Neox);
    let p = plan(&m, Phase::Decode { context: 512 }, FloatType::F16, H100).unwrap();
    let named = |what: &str| -> String {
        let s = p.steps().find(|s| s.what == what).unwrap();
        s.kernel.clone().unwrap()
    };
    assert_eq!(
        named("down projection"),
        QgemvQ6kMmaOneKernel(TileBlocks::StagedTwo).name()
    );
    assert_eq!(
        named("output projection (logits)"),
        QgemvQ6kMmaOneKernel(TileBlocks::Three).name()
    );
    assert_eq!(named("v projection"), "trueno_qgemv_q6_k_q8k");
}

/// The residency the plan assumes for the one-wave variants follows from ptxas's register
/// counts in the snapshot `tests/ptxas.rs` keeps (256 threads a block, 64K registers a
/// multiprocessor, allocated eight at a time).
#[test]
fn planned_residency_matches_the_register_snapshot() {
    use crate::kernels::qgemv_dp4a::QgemvQ8kOneWaveKernel;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots/ptxas_registers.txt");
    let snapshot = std::fs::read_to_string(path).unwrap();
    let blocks = |kernel: &str, target: &str| -> u32 {
        let line = snapshot
            .lines()
            .find(|l| l.starts_with(&format!("{kernel} {target} ")))
            .unwrap_or_else(|| panic!("{kernel} {target} not in the snapshot"));
        let regs: u32 = line.rsplit('=').next().unwrap().parse().unwrap();
        (65536 / (regs.div_ceil(8) * 8 * 256)).min(2048 / 256)
    };
    for f in QgemvQ8kOneWaveKernel::FORMATS {
        let variant = QgemvQ8kOneWaveKernel(f);
        let planned = variant.planned_residency().unwrap();
        for target in ["sm_80", "sm_90"] {
            let measured = (
                blocks(&QgemvQ8kKernel(f).name(), target),
                blocks(&variant.name(), target),
            );
            assert_eq!(planned, measured, "{} on {target}", variant.name());
        }
    }
}

/// Q4_K products take the tensor-core kernel on both devices (132 multiprocessors), as
/// `Stream::qgemv_q8k` does (`mma_one_for`): eight warps a tile for an output layer
/// (128256 rows of 4096, which took the one-pass `dp4a` kernel on an H200 before) and
/// the gate projection (14336 rows), sixteen for the q projection's 4096 rows and the k
/// projection's 1024, whose tiles fit one wave at two a multiprocessor.
#[test]
fn q4_k_products_take_the_tensor_core_kernel_at_the_width_their_rows_want() {
    const H200: &DevicePeak = &DEVICES[1];
    let mut m = llama3_8b();
    m.output = wt("Q4_K", 256, 144);
    let named = |d: &DevicePeak, what: &str| -> String {
        let p = plan(&m, Phase::Decode { context: 512 }, FloatType::F16, d).unwrap();
        let s = p
            .layers
            .iter()
            .flatten()
            .chain(p.epilogue.iter())
            .find(|s| s.what == what)
            .unwrap();
        s.kernel.clone().unwrap()
    };
    for d in [H100, H200] {
        assert_eq!(d.sms, 132);
        for (what, warps) in [
            ("output projection (logits)", TileWarps::Eight),
            ("gate projection", TileWarps::Eight),
            ("q projection", TileWarps::Sixteen),
            ("k projection", TileWarps::Sixteen),
        ] {
            let k = QgemvQ8kMmaOneKernel(QuantFormat::Q4K, warps);
            assert_eq!(named(d, what), k.name(), "{what}");
        }
    }
}
