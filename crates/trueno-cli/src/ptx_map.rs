//! `trueno ptx map MODEL.gguf`: the kernels trueno-gpu would launch for a llama/qwen2-style
//! GGUF model, per layer, for one decode step or one prefill, with launch configurations,
//! bytes, FLOPs and the roofline floor on a named device (`trueno_gpu::plan`).

use std::io::Write;

use trueno_gpu::kernels::float_type::FloatType;
use trueno_gpu::kernels::rope::RopeMode;
use trueno_gpu::plan::{
    self, DEVICES, DevicePeak, LayerWeights, ModelShape, Phase, Plan, Step, WeightType,
};
use trueno_quant::gguf::{GgufFile, TensorInfo};

/// `trueno ptx map` arguments.
#[derive(clap::Args)]
pub struct Options {
    /// The .gguf file (llama or qwen2 architecture).
    file: String,
    /// Map a prefill of `--tokens` prompt tokens instead of a decode step.
    #[arg(long)]
    prefill: bool,
    /// Prompt length of the prefill.
    #[arg(long, default_value_t = 512)]
    tokens: usize,
    /// Positions in the KV cache for the decode step.
    #[arg(long, default_value_t = 4096)]
    context: usize,
    /// KV cache elements: f16, bf16 or f32.
    #[arg(long, default_value = "f16")]
    kv: String,
    /// Device the roofline is priced on: h100, h200 or a100 (datasheet rates).
    #[arg(long, default_value = "h100")]
    device: String,
    /// Host time to enqueue one launch, µs (3.5 measured for trueno on an H100 host,
    /// BENCHMARKS.md): with a launch per step, the step cannot be faster than this times
    /// the launches, whatever the roofline says.
    #[arg(long, default_value_t = 3.5)]
    launch_us: f64,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
}

type Error = Box<dyn std::error::Error>;

fn weight(t: &TensorInfo) -> WeightType {
    WeightType {
        name: t.ggml_type.name.into(),
        block_elems: t.ggml_type.block_elems,
        block_bytes: t.ggml_type.block_bytes,
    }
}

/// The tensor `name`, checked to be `cols x rows` (GGML order: the row length first).
fn tensor<'f>(
    f: &'f GgufFile,
    name: &str,
    cols: usize,
    rows: usize,
) -> Result<&'f TensorInfo, Error> {
    let t = f
        .tensors()
        .iter()
        .find(|t| t.name == name)
        .ok_or_else(|| format!("no tensor {name}"))?;
    let want = [cols as u64, rows as u64];
    if t.dims != want {
        return Err(format!("{name} is {:?}, expected {want:?}", t.dims).into());
    }
    Ok(t)
}

/// The model's shape from its metadata, each weight checked against it.
pub fn model_shape(f: &GgufFile) -> Result<ModelShape, Error> {
    let arch = f
        .get("general.architecture")
        .and_then(|v| v.as_str())
        .ok_or("no general.architecture")?
        .to_string();
    let rope = match arch.as_str() {
        "llama" => RopeMode::Normal,
        "qwen2" => RopeMode::Neox,
        a => return Err(format!("architecture {a}: the map knows llama and qwen2").into()),
    };
    let num = |key: &str| -> Result<Option<usize>, Error> {
        match f.get(&format!("{arch}.{key}")) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(|x| Some(x as usize))
                .ok_or_else(|| format!("{arch}.{key} is {v}, not a count").into()),
        }
    };
    let need = |key: &str| -> Result<usize, Error> {
        num(key)?.ok_or_else(|| format!("no {arch}.{key}").into())
    };
    let layers = need("block_count")?;
    let hidden = need("embedding_length")?;
    let ffn = need("feed_forward_length")?;
    let heads_q = need("attention.head_count")?;
    let heads_kv = num("attention.head_count_kv")?.unwrap_or(heads_q);
    if heads_q == 0 || heads_kv == 0 {
        return Err("zero attention heads".into());
    }
    let head_dim = num("attention.key_length")?.unwrap_or(hidden / heads_q);
    let embd = f
        .tensors()
        .iter()
        .find(|t| t.name == "token_embd.weight")
        .ok_or("no tensor token_embd.weight")?;
    let vocab = *embd
        .dims
        .get(1)
        .ok_or("token_embd.weight is not a matrix")? as usize;
    let embedding = weight(tensor(f, "token_embd.weight", hidden, vocab)?);
    let output = match f.tensors().iter().any(|t| t.name == "output.weight") {
        true => weight(tensor(f, "output.weight", hidden, vocab)?),
        false => embedding.clone(),
    };
    let (q_rows, kv_rows) = (heads_q * head_dim, heads_kv * head_dim);
    let layer_weights = (0..layers)
        .map(|i| -> Result<LayerWeights, Error> {
            let w = |role: &str, cols: usize, rows: usize| {
                tensor(f, &format!("blk.{i}.{role}.weight"), cols, rows).map(weight)
            };
            Ok(LayerWeights {
                q: w("attn_q", hidden, q_rows)?,
                k: w("attn_k", hidden, kv_rows)?,
                v: w("attn_v", hidden, kv_rows)?,
                o: w("attn_output", q_rows, hidden)?,
                gate: w("ffn_gate", hidden, ffn)?,
                up: w("ffn_up", hidden, ffn)?,
                down: w("ffn_down", ffn, hidden)?,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let qkv_bias = f.tensors().iter().any(|t| t.name == "blk.0.attn_q.bias");
    Ok(ModelShape {
        arch,
        layers,
        hidden,
        ffn,
        heads_q,
        heads_kv,
        head_dim,
        vocab,
        rope,
        qkv_bias,
        layer_weights,
        embedding,
        output,
    })
}

fn step_json(s: &Step, d: &DevicePeak) -> serde_json::Value {
    serde_json::json!({
        "step": s.what,
        "kernel": s.kernel,
        "missing": s.missing,
        "grid": s.config.map(|c| [c.grid.0, c.grid.1, c.grid.2]),
        "block": s.config.map(|c| [c.block.0, c.block.1, c.block.2]),
        "shared_bytes": s.config.map(|c| c.shared_bytes),
        "bytes": s.bytes,
        "flops": s.flops,
        "roofline_us": s.roofline_us(d),
    })
}

/// Runs of identical layers: `(first, last, steps)`.
fn layer_groups(p: &Plan) -> Vec<(usize, usize, &[Step])> {
    let mut groups: Vec<(usize, usize, &[Step])> = Vec::new();
    for (i, l) in p.layers.iter().enumerate() {
        match groups.last_mut() {
            Some(g) if g.2 == l.as_slice() => g.1 = i,
            _ => groups.push((i, i, l)),
        }
    }
    groups
}

fn table(out: &mut impl Write, steps: &[Step], d: &DevicePeak) -> std::io::Result<()> {
    for s in steps {
        let (kernel, launch) = match (&s.kernel, s.config) {
            (Some(k), Some(c)) => (
                k.clone(),
                format!(
                    "{}x{}x{} x {}{}",
                    c.grid.0,
                    c.grid.1,
                    c.grid.2,
                    c.block.0,
                    if c.shared_bytes > 0 {
                        format!(" +{} KiB", c.shared_bytes / 1024)
                    } else {
                        String::new()
                    }
                ),
            ),
            _ => ("(no kernel)".into(), "-".into()),
        };
        writeln!(
            out,
            "  {:<42} {:<34} {:<22} {:>12} {:>13} {:>10.2}",
            s.what,
            kernel,
            launch,
            s.bytes,
            s.flops,
            s.roofline_us(d)
        )?;
    }
    Ok(())
}

/// Prints the map.
pub fn run(o: &Options) -> Result<(), Error> {
    let device = DEVICES
        .iter()
        .find(|d| d.name == o.device)
        .ok_or_else(|| format!("unknown device {} (h100, h200, a100)", o.device))?;
    let kv = match o.kv.as_str() {
        "f16" => FloatType::F16,
        "bf16" => FloatType::Bf16,
        "f32" => FloatType::F32,
        k => return Err(format!("unknown KV cache type {k} (f16, bf16, f32)").into()),
    };
    let phase = if o.prefill {
        Phase::Prefill { tokens: o.tokens }
    } else {
        Phase::Decode { context: o.context }
    };
    let file = GgufFile::open(&o.file)?;
    let m = model_shape(&file)?;
    let p = plan::plan(&m, phase, kv, device)?;
    let (bytes, flops, us) = p.totals(device);
    let tokens = match phase {
        Phase::Decode { .. } => 1.0,
        Phase::Prefill { tokens } => tokens as f64,
    };
    if !(o.launch_us >= 0.0 && o.launch_us.is_finite()) {
        return Err(format!("--launch-us {} is not a time", o.launch_us).into());
    }
    let launch_floor_us = p.launches() as f64 * o.launch_us;
    let mut out = std::io::stdout().lock();
    if o.json {
        let doc = serde_json::json!({
            "file": o.file,
            "model": {
                "arch": m.arch, "layers": m.layers, "hidden": m.hidden, "ffn": m.ffn,
                "heads_q": m.heads_q, "heads_kv": m.heads_kv, "head_dim": m.head_dim,
                "vocab": m.vocab, "rope": m.rope.name(), "qkv_bias": m.qkv_bias,
            },
            "phase": match phase {
                Phase::Decode { context } => serde_json::json!({"decode": {"context": context}}),
                Phase::Prefill { tokens } => serde_json::json!({"prefill": {"tokens": tokens}}),
            },
            "kv_cache": kv.name(),
            "device": {
                "name": device.label, "bandwidth_gbs": device.bandwidth_gbs,
                "bf16_tflops": device.bf16_tflops, "f32_tflops": device.f32_tflops,
            },
            "prologue": p.prologue.iter().map(|s| step_json(s, device)).collect::<Vec<_>>(),
            "layers": layer_groups(&p).iter().map(|(a, b, steps)| serde_json::json!({
                "first": a, "last": b,
                "steps": steps.iter().map(|s| step_json(s, device)).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "epilogue": p.epilogue.iter().map(|s| step_json(s, device)).collect::<Vec<_>>(),
            "totals": {
                "launches": p.launches(), "steps_without_kernel": p.missing(),
                "bytes": bytes, "flops": flops, "roofline_us": us,
                "tokens_per_s": tokens / (us * 1e-6),
                "launch_us": o.launch_us, "launch_floor_us": launch_floor_us,
            },
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        return Ok(());
    }
    writeln!(
        out,
        "{}: {}, {} layers, hidden {}, ffn {}, {}/{} heads x {}, vocab {}, rope {}{}",
        o.file,
        m.arch,
        m.layers,
        m.hidden,
        m.ffn,
        m.heads_q,
        m.heads_kv,
        m.head_dim,
        m.vocab,
        m.rope.name(),
        if m.qkv_bias { ", q/k/v biases" } else { "" }
    )?;
    let what = match phase {
        Phase::Decode { context } => format!("one decode step at context {context}"),
        Phase::Prefill { tokens } => format!("a prefill of {tokens} tokens"),
    };
    writeln!(
        out,
        "{what}, {} KV cache; roofline on {} ({:.0} GB/s, {:.0} bf16 / {:.1} f32 TFLOP/s, datasheet)\n",
        kv.name(),
        device.label,
        device.bandwidth_gbs,
        device.bf16_tflops,
        device.f32_tflops
    )?;
    writeln!(
        out,
        "  {:<42} {:<34} {:<22} {:>12} {:>13} {:>10}",
        "step", "kernel", "grid x block", "bytes", "FLOPs", "floor µs"
    )?;
    writeln!(out, "before the layers")?;
    table(&mut out, &p.prologue, device)?;
    for (a, b, steps) in layer_groups(&p) {
        match a == b {
            true => writeln!(out, "layer {a}")?,
            false => writeln!(out, "layers {a}-{b} (each)")?,
        }
        table(&mut out, steps, device)?;
    }
    writeln!(out, "after the layers")?;
    table(&mut out, &p.epilogue, device)?;
    writeln!(
        out,
        "\n{} launches{} ({} without a kernel yet), {:.3} GB, {:.2} GFLOP, roofline floor {:.1} µs \
         = {:.0} tokens/s",
        p.launches(),
        match phase {
            Phase::Decode { .. } => " per token",
            Phase::Prefill { .. } => "",
        },
        p.missing(),
        bytes as f64 / 1e9,
        flops as f64 / 1e9,
        us,
        tokens / (us * 1e-6)
    )?;
    writeln!(
        out,
        "launch floor: {} launches x {} µs = {:.1} µs ({}; CUDA graphs or fused kernels \
         lower it)",
        p.launches(),
        o.launch_us,
        launch_floor_us,
        if launch_floor_us > us {
            "above the roofline: launch-bound"
        } else {
            "below the roofline"
        }
    )?;
    let mut gaps: Vec<(&str, &str)> = p
        .steps()
        .filter_map(|s| Some((s.what.as_str(), s.missing.as_deref()?)))
        .collect();
    gaps.sort_unstable();
    gaps.dedup();
    for (what, why) in gaps {
        writeln!(out, "  no kernel: {what}: {why}")?;
    }
    Ok(())
}
