use super::*;
use crate::kernels::gemm_mma::{MmaGemmKernel, MmaTileK};
use crate::kernels::qgemv_q4k_mma_one::{QgemvQ8kMmaOneKernel, TileWarps};
use crate::kernels::qgemv_q6k_mma_one::{QgemvQ6kMmaOneKernel, TileBlocks};

/// The devices the plans are priced on: Hopper (the fused quantized GEMM) and the A100.
const H100: &DevicePeak = &DEVICES[0];
const A100: &DevicePeak = &DEVICES[2];

fn wt(name: &str, block_elems: u64, block_bytes: u64) -> WeightType {
    WeightType {
        name: name.into(),
        block_elems,
        block_bytes,
    }
}

/// Llama 3 8B as a Q4_K_M file quantizes it: Q4_K, with Q6_K for the value and down
/// projections and the output.
fn llama3_8b() -> ModelShape {
    let (q4k, q6k) = (wt("Q4_K", 256, 144), wt("Q6_K", 256, 210));
    let layer = LayerWeights {
        q: q4k.clone(),
        k: q4k.clone(),
        v: q6k.clone(),
        o: q4k.clone(),
        gate: q4k.clone(),
        up: q4k.clone(),
        down: q6k.clone(),
    };
    ModelShape {
        arch: "llama".into(),
        layers: 32,
        hidden: 4096,
        ffn: 14336,
        heads_q: 32,
        heads_kv: 8,
        head_dim: 128,
        vocab: 128256,
        rope: RopeMode::Normal,
        qkv_bias: false,
        layer_weights: vec![layer; 32],
        embedding: q4k,
        output: q6k,
    }
}

/// The weight bytes of one layer and of the output, from the block sizes written out.
fn llama3_8b_weight_bytes() -> u64 {
    let q4k = |r: u64, c: u64| r * c / 256 * 144;
    let q6k = |r: u64, c: u64| r * c / 256 * 210;
    let layer = q4k(4096, 4096)
        + q4k(1024, 4096)
        + q6k(1024, 4096)
        + q4k(4096, 4096)
        + 2 * q4k(14336, 4096)
        + q6k(4096, 14336);
    32 * layer + q6k(128256, 4096)
}

#[test]
fn a_decode_step_is_nineteen_launches_a_layer_and_moves_the_weights_once() {
    let m = llama3_8b();
    let p = plan(&m, Phase::Decode { context: 4096 }, FloatType::F16, H100).unwrap();
    assert_eq!(p.layers.len(), 32);
    // Two norms, seven projections, two RoPEs, the cache append, attention's chunks and
    // merge, SwiGLU, and four quantizations of a projection input to Q8_K (shared by q,
    // k and v; the output projection's; shared by gate and up; down's).
    assert!(p.layers.iter().all(|l| l.len() == 19));
    let quantize = |l: &Vec<Step>| {
        l.iter()
            .filter(|s| s.kernel.as_deref() == Some("trueno_quantize_q8k_f32"))
            .count()
    };
    assert!(p.layers.iter().all(|l| quantize(l) == 4));
    // The embedding rows, 32 x 19 in the layers, the output norm, its quantization,
    // logits and argmax: every step has a kernel.
    assert_eq!(p.launches(), 1 + 32 * 19 + 4);
    assert_eq!(p.missing(), 0);
    let names: Vec<_> = p.layers[0]
        .iter()
        .filter_map(|s| s.kernel.clone())
        .collect();
    for k in [
        "trueno_add_rmsnorm_v4_f32",
        "trueno_quantize_q8k_f32",
        // Q4_K on the tensor cores: 16 warps a tile at 1024-4096 rows, 8 at 14336.
        "trueno_qgemv_q4_k_q8k_mma1_w16",
        "trueno_qgemv_q4_k_q8k_mma1",
        "trueno_qgemv_q6_k_q8k",
        "trueno_rope_normal_f32",
        "trueno_kv_append_f16",
        // A 16-bit cache: the tensor-core chunk kernel, as the stream runs it.
        "trueno_decode_attn_mma_d128_f16",
        "trueno_decode_merge_d128_f32",
        "trueno_swiglu_f32",
    ] {
        assert!(names.iter().any(|n| n == k), "{k} not in {names:?}");
    }
    let weights = llama3_8b_weight_bytes();
    let (bytes, flops, us) = p.totals(H100);
    // Weights once, plus activations, the cache (2 x 4096 x 8 x 128 f16 a layer) and
    // attention's chunk partials, written and read back (32 heads x 32 chunks of 128
    // positions x (128 + 2) f32 a layer: 32 splits of 8 blocks fill one wave of 396
    // with two tiles a block, as 49 would).
    let cache = 32 * 2 * 4096 * 8 * 128 * 2;
    let partials = 32 * 2 * 32 * 32 * 130 * 4;
    let moved = weights + cache + partials;
    assert!(bytes > moved && bytes < moved * 101 / 100, "{bytes}");
    // 2 FLOPs a weight (the embedding table's rows aside) and 4 per cached position,
    // query head and dimension (scores and the weighted sum).
    let params = 32 * (2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 14336 * 4096) + 128256 * 4096;
    let attention = 32 * 4 * 4096 * 32 * 128;
    let want = 2 * params + attention;
    assert!(
        flops >= want && flops < want * 101 / 100,
        "{flops} vs {want}"
    );
    // Memory-bound: the floor is the bytes at 3352 GB/s (about 1.5 ms).
    let floor_us = bytes as f64 / 3352e3;
    assert!(
        us >= floor_us * (1.0 - 1e-12) && us < floor_us * 1.05,
        "{us} vs {floor_us}"
    );
}

#[test]
fn launch_configs_are_the_kernels_own() {
    let m = llama3_8b();
    let p = plan(&m, Phase::Decode { context: 32768 }, FloatType::Bf16, H100).unwrap();
    let step = |name: &str| {
        p.layers[0]
            .iter()
            .find(|s| s.kernel.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("{name}"))
            .clone()
    };
    let q = step("trueno_qgemv_q4_k_q8k_mma1_w16");
    assert_eq!(
        q.config,
        Some(
            QgemvQ8kMmaOneKernel(QuantFormat::Q4K, TileWarps::Sixteen)
                .launch_config(&[4096, 4096])
                .unwrap()
        )
    );
    // 256 tiles of 16 rows, sixteen warps each.
    assert_eq!(q.config.map(|c| (c.grid.0, c.block.0)), Some((256, 512)));
    // The hidden state's 16 blocks of 256, a warp each, eight to a thread block.
    let quantize = step("trueno_quantize_q8k_f32");
    assert_eq!(quantize.config.unwrap().grid, (2, 1, 1));
    // 8 key/value heads (a block each: groups of four fit one tile of 16 heads), 512
    // tiles of 64 positions, three blocks a SM (72 KB each): one wave of 396 places
    // holds 49 splits of 8 blocks, and 47 splits of 11 tiles (704 positions) take as
    // many tiles a block as 49 do.
    let chunks = step("trueno_decode_attn_mma_d128_bf16");
    assert_eq!(chunks.config.unwrap().grid, (8, 47, 1));
    // An f32 cache keeps the SIMT kernel: four heads a chunk block, the same 8 x 64.
    let p = plan(&m, Phase::Decode { context: 32768 }, FloatType::F32, H100).unwrap();
    let simt = p.layers[0]
        .iter()
        .find(|s| s.kernel.as_deref() == Some("trueno_decode_attn_d128_f32_h4"))
        .expect("the SIMT chunk kernel");
    assert_eq!(simt.config.unwrap().grid, (8, 64, 1));
}

#[test]
fn a_prefill_runs_every_step_with_the_projections_on_the_tensor_cores() {
    let m = llama3_8b();
    // An A100: no fused quantized GEMM, every projection takes the unfused path.
    let p = plan(&m, Phase::Prefill { tokens: 512 }, FloatType::F16, A100).unwrap();
    let l = &p.layers[0];
    assert_eq!(p.missing(), 0);
    // Each of the seven projections: weights to bf16, input to bf16, the GEMM.
    let named = |what: &str| l.iter().find(|s| s.what == what).unwrap().clone();
    let weights = named("q projection (weights to bf16)");
    assert_eq!(
        weights.kernel.as_deref(),
        Some("trueno_dequant_t_q4_k_bf16")
    );
    assert_eq!(weights.bytes, 4096 * 4096 / 256 * 144 + 4096 * 4096 * 2);
    let input = named("down projection (input to bf16)");
    assert_eq!(input.kernel.as_deref(), Some("trueno_f32_to_bf16"));
    assert_eq!(input.bytes, 512 * 14336 * 6);
    let gemm = named("q projection (GEMM)");
    assert_eq!(gemm.math, Math::Tensor);
    assert_eq!(gemm.flops, 2 * 512 * 4096 * 4096);
    assert_eq!(
        gemm.config,
        Some(
            MmaGemmKernel(HalfType::Bf16.into(), MmaTileK::K64, FloatType::F32)
                .launch_config(&[512, 4096, 4096])
                .unwrap()
        )
    );
    // Seven GEMMs; k's and v's (1024 rows: 4 x 8 tiles for 108 SMs) cut in three,
    // each followed by the reduce (split-K, as `gemm_mma_with` runs them).
    assert_eq!(l.iter().filter(|s| s.what.contains("(GEMM")).count(), 7);
    let k = named("k projection (GEMM, k in 3)");
    assert_eq!(k.config.unwrap().grid.2, 3);
    assert_eq!(k.kernel, gemm.kernel);
    let sum = named("k projection (sum of the 3 ranges)");
    assert_eq!(sum.kernel.as_deref(), Some("trueno_gemm_split_reduce_f32"));
    // The prompt's 512 rows of 8 heads x 128, keys and values, in one launch.
    let write = l
        .iter()
        .find(|s| s.what.starts_with("kv cache write"))
        .unwrap();
    assert_eq!(write.kernel.as_deref(), Some("trueno_kv_append_f16"));
    assert_eq!(
        write.config,
        Some(
            KvAppendKernel(FloatType::F16)
                .launch_config(&[512 * 8 * 128])
                .unwrap()
        )
    );
    assert_eq!(write.bytes, 2 * 512 * 8 * 128 * (4 + 2) + 4);
    let fa = l
        .iter()
        .find(|s| s.kernel.as_deref() == Some("trueno_flash_attn_fwd_bf16_d128"))
        .unwrap();
    assert_eq!(fa.math, Math::Tensor);
    // 2 x 512^2 x 32 heads x 128 (causal: half of 4 n^2 h d).
    assert_eq!(fa.flops, 2 * 512 * 512 * 32 * 128);
    // Logits only for the last position: one vector, quantized, then the Q6_K product.
    assert_eq!(
        p.epilogue[1].kernel.as_deref(),
        Some("trueno_quantize_q8k_f32")
    );
    assert_eq!(
        p.epilogue[2].config,
        Some(
            QgemvQ6kMmaOneKernel(TileBlocks::Three)
                .launch_config(&[128256, 4096])
                .unwrap()
        )
    );
}

#[test]
fn qwen2_biases_neox_rotation_and_formats_without_kernels() {
    let mut m = llama3_8b();
    m.arch = "qwen2".into();
    m.qkv_bias = true;
    m.rope = RopeMode::Neox;
    m.layer_weights[3].gate = wt("IQ2_XS", 256, 74);
    let p = plan(&m, Phase::Decode { context: 100 }, FloatType::F32, H100).unwrap();
    assert!(
        p.layers[0]
            .iter()
            .filter(|s| s.what.ends_with("bias"))
            .count()
            == 3
    );
    assert!(
        p.layers[0]
            .iter()
            .any(|s| s.kernel.as_deref() == Some("trueno_rope_neox_f32"))
    );
    let gate = p.layers[3]
        .iter()
        .find(|s| s.what == "gate projection")
        .unwrap();
    assert_eq!(gate.kernel, None);
    assert!(gate.missing.as_deref().unwrap().contains("IQ2_XS"));
    // Its bytes still count: 14336 x 4096 / 256 blocks of 74 bytes.
    assert!(gate.bytes > 14336 * 4096 / 256 * 74);
    assert_eq!(p.missing(), 1);
    // A prefill takes the biases into the q/k/v GEMMs' epilogue: no add launches, and
    // each GEMM reads its bias (one f32 per output row) besides what it read before.
    let p = plan(&m, Phase::Prefill { tokens: 64 }, FloatType::F32, A100).unwrap();
    let l0 = &p.layers[0];
    assert!(!l0.iter().any(|s| s.what.ends_with(" bias")));
    // (At 64 tokens each of them is cut, so the reduce after the ranges adds it.)
    let fused: Vec<_> = l0.iter().filter(|s| s.what.ends_with("+ bias)")).collect();
    assert_eq!(fused.len(), 3);
    assert!(fused[0].what.starts_with("q projection (sum of the"));
    m.qkv_bias = false;
    let plain = plan(&m, Phase::Prefill { tokens: 64 }, FloatType::F32, A100).unwrap();
    let without = fused[0].what.replace(" + bias", "");
    let q = plain.layers[0].iter().find(|s| s.what == without).unwrap();
    assert_eq!(fused[0].bytes, q.bytes + 4096 * 4);
    assert_eq!(l0.len(), plain.layers[0].len());
}

/// On an H100 a prefill's projections follow `Stream::qgemm_with`: Q4_K's take the fused
/// kernel (the input rounded to bf16, then one GEMM that reads the quantized weights,
/// with the tile height and cut `qgemm_wgmma` picks) up to 1024 tokens, as Q4_0's do;
/// Q8_0's up to 512, Q6_K's up to 256, past that the three launches; the q/k/v biases
/// ride in the GEMM (or the reduce after a cut one).
#[test]
fn on_hopper_a_prefill_fuses_the_projections_that_qgemm_with_fuses() {
    use crate::kernels::qgemm_wgmma::{QgemmTileM, QgemmWgmmaKernel};
    let mut m = llama3_8b();
    let p = plan(&m, Phase::Prefill { tokens: 512 }, FloatType::F16, H100).unwrap();
    let l = &p.layers[0];
    assert_eq!(p.missing(), 0);
    let named = |what: &str| l.iter().find(|s| s.what == what).cloned();
    // q (Q4_K, 4096 rows): the 256-row tile, its 2 x 32 blocks for 132 SMs cut in two,
    // the reduce after them.
    let q = named("q projection (fused GEMM, k in 2)").unwrap();
    let tall = QgemmWgmmaKernel(QuantFormat::Q4K, FloatType::F32, QgemmTileM::M256);
    assert_eq!(q.kernel, Some(tall.name()));
    let mut cut = tall.launch_config(&[512, 4096, 4096]).unwrap();
    cut.grid.2 = 2;
    assert_eq!(q.config, Some(cut));
    assert_eq!(q.math, Math::Tensor);
    assert_eq!(
        q.bytes,
        4096 * 4096 / 256 * 144 + 512 * 4096 * 2 + 2 * 512 * 4096 * 4
    );
    assert!(named("q projection (sum of the 2 ranges)").is_some());
    assert!(named("q projection (weights to bf16)").is_none());
    assert!(named("q projection (input to bf16)").is_some());
    // Attention on Hopper's FlashAttention kernel, as `Stream::flash_attention` runs it.
    let fa = l
        .iter()
        .find(|s| s.what.starts_with("flash attention"))
        .unwrap();
    let fa_kernel =
        crate::kernels::flash_attention::wgmma::FlashAttentionWgmmaKernel::new(HalfType::Bf16, 128);
    assert_eq!(fa.kernel, Some(fa_kernel.name()));
    assert_eq!(
        fa.config,
        Some(fa_kernel.launch_config(&[512, 32, 1]).unwrap())
    );
    // gate (Q4_K, 14336 rows): 2 x 112 tall blocks, uncut.
    let gate = named("gate projection (fused GEMM)").unwrap();
    assert_eq!(gate.kernel, Some(tall.name()));
    // v and down (Q6_K): the unfused path, the GEMM as `gemm_mma_with` runs it on
    // Hopper: wgmma at the rule's tile width; v's 4 x 8 tiles of 128 x 128 would fill a
    // quarter of the 132 SMs, so it runs 64-wide tiles (4 x 16), uncut; down's 4 x 32
    // fill them at 128.
    for what in ["v", "down"] {
        assert!(named(&format!("{what} projection (weights to bf16)")).is_some());
    }
    use crate::kernels::gemm_wgmma::{WgmmaGemmKernel, WgmmaTileN};
    let half = HalfType::Bf16.into();
    let down = named("down projection (GEMM)").unwrap();
    let n128 = WgmmaGemmKernel(half, WgmmaTileN::N128, FloatType::F32);
    assert_eq!(down.kernel, Some(n128.name()));
    let v = named("v projection (GEMM)").unwrap();
    let n64 = WgmmaGemmKernel(half, WgmmaTileN::N64, FloatType::F32);
    let uncut = n64.launch_config(&[512, 1024, 4096]).unwrap();
    assert_eq!(uncut.grid, (16, 4, 1));
    assert_eq!((v.kernel, v.config), (Some(n64.name()), Some(uncut)));
    assert_eq!(v.bytes, 512 * 4096 * 2 + 1024 * 4096 * 2 + 512 * 1024 * 4);
    assert!(named("v projection (sum of the 2 ranges)").is_none());
    // Seven GEMMs, five fused; two weight conversions.
    assert_eq!(l.iter().filter(|s| s.what.contains("GEMM")).count(), 7);
    assert_eq!(
        l.iter().filter(|s| s.what.contains("fused GEMM")).count(),
        5
    );
    // A 64-token prompt (one 128-row tile): every projection fused, Q6_K's too; q's
    // fused GEMM has 32 tiles, its k cut in four (blocks for every multiprocessor).
    let short = plan(&m, Phase::Prefill { tokens: 64 }, FloatType::F16, H100).unwrap();
    let sl = &short.layers[0];
    let q = sl
        .iter()
        .find(|s| s.what == "q projection (fused GEMM, k in 4)")
        .unwrap();
    let short_tile = QgemmWgmmaKernel(QuantFormat::Q4K, FloatType::F32, QgemmTileM::M128);
    let mut cut = short_tile.launch_config(&[64, 4096, 4096]).unwrap();
    cut.grid.2 = 4;
    assert_eq!(
        (q.kernel.clone(), q.config),
        (Some(short_tile.name()), Some(cut))
    );
    assert!(
        sl.iter()
            .any(|s| s.what == "q projection (sum of the 4 ranges)")
    );
    let fused = sl.iter().filter(|s| s.what.contains("fused GEMM")).count();
    assert_eq!(fused, 7);
    assert!(!sl.iter().any(|s| s.what.ends_with("(weights to bf16)")));
    // Q4_0 q weights, Q8_0 k weights, with biases: q fused up to 1024 tokens, with
    // its bias; not at 2048; k not past 512.
    let (q4, q8) = (wt("Q4_0", 32, 18), wt("Q8_0", 32, 34));
    for l in &mut m.layer_weights {
        (l.q, l.k) = (q4.clone(), q8.clone());
    }
    m.qkv_bias = true;
    for (tokens, fused) in [(1024, true), (2048, false)] {
        let p = plan(&m, Phase::Prefill { tokens }, FloatType::F16, H100).unwrap();
        let found = |what: &str| p.layers[0].iter().any(|s| s.what == what);
        assert_eq!(found("q projection (fused GEMM + bias)"), fused, "{tokens}");
        assert_eq!(found("q projection (GEMM + bias)"), !fused, "{tokens}");
        assert!(found("k projection (GEMM + bias)"), "{tokens}");
        assert!(!found("q bias"));
    }
}

#[test]
fn the_embedding_rows_are_a_kernel_for_quantized_and_dense_tables() {
    let mut m = llama3_8b();
    let p = plan(&m, Phase::Prefill { tokens: 100 }, FloatType::F16, H100).unwrap();
    let embed = &p.prologue[0];
    assert_eq!(
        embed.kernel.as_deref(),
        Some("trueno_dequant_rows_q4_k_f32")
    );
    assert_eq!(
        embed.config,
        Some(
            DequantRowsKernel(QuantFormat::Q4K)
                .launch_config(&[100, 4096])
                .unwrap()
        )
    );
    // 100 rows of 16 Q4_K blocks, their f32 values and the ids.
    assert_eq!(embed.bytes, 100 * 16 * 144 + 100 * 4096 * 4 + 100 * 4);
    // Dense tables are gathered; other formats are a gap.
    m.embedding = wt("F16", 1, 2);
    let p = plan(&m, Phase::Decode { context: 10 }, FloatType::F16, H100).unwrap();
    assert_eq!(
        p.prologue[0].kernel.as_deref(),
        Some("trueno_gather_rows_f16")
    );
    assert_eq!(p.prologue[0].bytes, 4096 * 2 + 4096 * 4 + 4);
    m.embedding = wt("IQ2_XS", 256, 74);
    let p = plan(&m, Phase::Decode { context: 10 }, FloatType::F16, H100).unwrap();
    assert_eq!(p.prologue[0].kernel, None);
    assert!(p.prologue[0].missing.as_deref().unwrap().contains("IQ2_XS"));
}

#[test]
fn head_dims_without_attention_kernels_are_gaps_not_errors() {
    let mut m = llama3_8b();
    m.heads_q = 40;
    m.heads_kv = 8;
    m.head_dim = 96;
    let p = plan(&m, Phase::Decode { context: 512 }, FloatType::F16, H100).unwrap();
    let att = p.layers[0]
        .iter()
        .find(|s| s.what == "decode attention")
        .unwrap();
    assert!(att.missing.as_deref().unwrap().contains("96"));
}

#[test]
fn bad_shapes_are_errors() {
    let m = llama3_8b();
    let mut odd_groups = m.clone();
    odd_groups.heads_kv = 5;
    let mut no_layers = m.clone();
    no_layers.layers = 0;
    let mut short = m.clone();
    short.layer_weights.pop();
    for bad in [odd_groups, no_layers, short] {
        assert!(plan(&bad, Phase::Decode { context: 8 }, FloatType::F16, H100).is_err());
    }
    assert!(plan(&m, Phase::Decode { context: 0 }, FloatType::F16, H100).is_err());
    assert!(plan(&m, Phase::Prefill { tokens: 0 }, FloatType::F16, H100).is_err());
}

/// The quantized products' kernels (`products.rs`' integer routing), by format.
#[path = "plan_tests_qgemv.rs"]
mod qgemv;
