//! trueno-gpu on the device: every kernel family at the issue's shapes, timed with CUDA
//! events (median of per-run event pairs after warm-up, inputs rotated so they do not sit
//! in L2), plus PTX build and module load times and launch overhead. Writes one JSON
//! object per line; `scripts/gpu_bench_peer.py` times PyTorch on the same shapes in the
//! same command and prints the comparison table.
//!
//! Usage: `gpu-bench [--quick] [--serialised] [--out FILE] [--only SECTION,...]
//! [--qgemv-shapes ROWSxCOLS,...] [--qgemv-formats q6_k,...]` (`--serialised`: every
//! launch waits for the one before, no programmatic dependent launch; `--qgemv-shapes`:
//! the quantized products at these shapes instead of the issue's four; `--qgemv-formats`:
//! only these weight formats; sections: overheads,
//! elementwise, rows, gemm, gemm_mma, gemm_tf32, gemm_split, flash_attention, qgemv, dequant, qgemm, rope,
//! decode_attention, decode_layer, gemm_tune)

mod decode_layer;
mod dequant;
mod gemm;
mod gemm_split;
mod qgemm;
mod qgemv;
mod timing;

use std::io::Write;
use std::time::Instant;

use trueno_gpu::Result;
use trueno_gpu::driver::Context;
use trueno_gpu::kernels::Family;
use trueno_gpu::kernels::attention::DecodeShape;
use trueno_gpu::kernels::decode_split::DecodePath;
use trueno_gpu::kernels::elementwise::ElementwiseOp;
use trueno_gpu::kernels::flash_attention::{FlashPath, FlashShape};
use trueno_gpu::kernels::float_type::FloatType;
use trueno_gpu::kernels::paged::PagedShape;
use trueno_gpu::kernels::qgemv::QuantFormat;
use trueno_gpu::kernels::rope::{self, RopeMode};
use trueno_gpu::memory::DeviceBuffer;

/// Bytes of inputs to cycle through so repeated runs miss L2 (50-60 MB on Hopper).
const ROTATE_BYTES: usize = 256 << 20;

struct Bench {
    ctx: Context,
    out: Box<dyn Write>,
    quick: bool,
    /// `--qgemv-shapes`, where given.
    qgemv_shapes: Option<Vec<(usize, usize)>>,
    /// `--qgemv-formats`, where given.
    qgemv_formats: Option<Vec<QuantFormat>>,
    /// The last [`Bench::time`]'s runs queued back to back between one event pair,
    /// milliseconds a run: GPU time without the host's launch latency, which a single
    /// run's event pair includes (the peer script times PyTorch the same way, in a CUDA
    /// graph).
    queued: std::cell::Cell<f64>,
}

fn random(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
        })
        .collect()
}

/// `random(n, seed)` rounded to bf16: the tensor-core sections' 16-bit operands.
fn random_bf16(n: usize, seed: u64) -> Vec<half::bf16> {
    random(n, seed)
        .into_iter()
        .map(half::bf16::from_f32)
        .collect()
}

/// `bytes` of random quant bytes with a small positive f16 scale in every block (Q6_K
/// keeps its scale last).
fn random_blocks(f: QuantFormat, bytes: usize) -> Vec<u8> {
    let mut host: Vec<u8> = random(bytes / 4 + 1, bytes as u64)
        .iter()
        .flat_map(|v| v.to_bits().to_le_bytes())
        .take(bytes)
        .collect();
    let at = if f == QuantFormat::Q6K { 208 } else { 0 };
    for blk in host.chunks_exact_mut(f.block_bytes()) {
        blk[at..at + 2].copy_from_slice(&0x2E66u16.to_le_bytes());
    }
    host
}

impl Bench {
    fn sets(&self, bytes_per_set: usize) -> usize {
        ROTATE_BYTES.div_ceil(bytes_per_set).clamp(1, 16)
    }

    fn inputs(&self, n: usize, sets: usize) -> Result<Vec<DeviceBuffer<f32>>> {
        let host = random(n, n as u64);
        (0..sets).map(|_| self.ctx.upload(&host)).collect()
    }

    fn emit(&mut self, line: String) {
        println!("{line}");
        let _ = writeln!(self.out, "{line}");
    }

    fn elementwise(&mut self) -> Result<()> {
        let n = if self.quick { 1 << 24 } else { 64 << 20 };
        let sets = self.sets(n * 4).min(2);
        let xs = self.inputs(n, sets)?;
        let ys = self.inputs(n, sets)?;
        let out = self.ctx.alloc::<f32>(n)?;
        for op in ElementwiseOp::ALL {
            let ms = self.time(sets, |s, i| {
                s.elementwise(op, &xs[i], op.is_binary().then(|| &ys[i]), &out, 1.5)
            })?;
            let bytes = (if op.is_binary() { 3 } else { 2 }) * n * 4;
            self.emit(format!(
                r#"{{"kind":"elementwise","op":"{}","n":{n},"ms":{ms:.5},"bytes":{bytes}}}"#,
                op.name()
            ));
        }
        for (name, f) in [("sum", 0), ("max", 1), ("argmax", 2)] {
            let r = self.ctx.alloc::<f32>(1)?;
            let ri = self.ctx.alloc::<u32>(1)?;
            let ms = self.time(sets, |s, i| match f {
                0 => s.sum(&xs[i], &r),
                1 => s.max(&xs[i], &r),
                _ => s.argmax(&xs[i], &ri),
            })?;
            self.emit(format!(
                r#"{{"kind":"reduce","op":"{name}","n":{n},"ms":{ms:.5},"bytes":{}}}"#,
                n * 4
            ));
        }
        Ok(())
    }

    fn rows(&mut self) -> Result<()> {
        let shapes: &[(usize, usize)] = if self.quick {
            &[(4096, 1024)]
        } else {
            &[(4096, 1024), (8192, 4096), (1024, 32768)]
        };
        for &(rows, cols) in shapes {
            let n = rows * cols;
            let sets = self.sets(n * 4);
            let xs = self.inputs(n, sets)?;
            let rs = self.inputs(n, sets)?;
            let g = self.ctx.upload(&random(cols, 7))?;
            let b = self.ctx.upload(&random(cols, 8))?;
            let out = self.ctx.alloc::<f32>(n)?;
            let h = self.ctx.alloc::<f32>(n)?;
            let cases: [(&str, usize); 4] = [
                ("softmax", 2),
                ("layernorm", 2),
                ("rmsnorm", 2),
                ("add_rmsnorm", 4),
            ];
            for (name, streams) in cases {
                let ms = self.time(sets, |s, i| match name {
                    "softmax" => s.softmax(&xs[i], &out, rows, cols),
                    "layernorm" => s.layernorm(&xs[i], &g, &b, &out, rows, cols, 1e-5),
                    "rmsnorm" => s.rmsnorm(&xs[i], &g, &out, rows, cols, 1e-5),
                    _ => s.add_rmsnorm(&xs[i], &rs[i], &g, &out, &h, rows, cols, 1e-5),
                })?;
                self.emit(format!(
                    r#"{{"kind":"rows","op":"{name}","rows":{rows},"cols":{cols},"ms":{ms:.5},"queued_ms":{:.5},"bytes":{}}}"#,
                    self.queued.get(),
                    streams * n * 4
                ));
            }
        }
        Ok(())
    }

    /// Decode attention (one query token, 32 query heads over 8 key/value heads of 128,
    /// Llama 3 8B's) at contexts 4K, 32K and 128K, the cache full, with f32 and bf16
    /// caches; at 32K also groups of eight (64/8, Llama 3 70B's) and of seven (28/4,
    /// Qwen2.5 7B's: a head a block) on bf16 caches.
    fn decode_attention(&mut self) -> Result<()> {
        let contexts: &[usize] = if self.quick {
            &[4096]
        } else {
            &[4096, 32768, 131072]
        };
        let bf16 = half::bf16::from_f32;
        for &cap in contexts {
            self.decode_attention_at(cap, (32, 8), "f32", |x| x)?;
            self.decode_attention_at(cap, (32, 8), "bf16", bf16)?;
        }
        if !self.quick {
            self.decode_attention_at(32768, (64, 8), "bf16", bf16)?;
            self.decode_attention_at(32768, (28, 4), "bf16", bf16)?;
        }
        Ok(())
    }

    fn decode_attention_at<C: trueno_gpu::memory::FloatElem>(
        &mut self,
        cap: usize,
        (heads_q, heads_kv): (usize, usize),
        name: &str,
        from_f32: fn(f32) -> C,
    ) -> Result<()> {
        let dim = 128;
        let shape = DecodeShape {
            batch: 1,
            heads_q,
            heads_kv,
            capacity: cap,
            dim,
        };
        let cache = heads_kv * cap * dim;
        let conv = |v: Vec<f32>| -> Vec<C> { v.into_iter().map(from_f32).collect() };
        let k = self.ctx.upload(&conv(random(cache, 7)))?;
        let v = self.ctx.upload(&conv(random(cache, 8)))?;
        let q = self.ctx.upload(&random(heads_q * dim, 9))?;
        let lens = self.ctx.upload(&[cap as u32])?;
        let out = self.ctx.alloc::<f32>(heads_q * dim)?;
        let scale = 1.0 / (dim as f32).sqrt();
        let bytes = 2 * cache * size_of::<C>();
        // The same cache as 16-position pages in reversed order (every page lookup
        // leaves its neighbour), through a block table.
        let paged = PagedShape {
            batch: 1,
            heads_q,
            heads_kv,
            dim,
            page_size: 16,
            max_pages: cap / 16,
            pool_pages: cap / 16,
        };
        let table: Vec<u32> = (0..paged.max_pages as u32).rev().collect();
        let table = self.ctx.upload(&table)?;
        // Both chunk kernels where the cache is 16-bit (the tensor cores take only those).
        let paths: &[DecodePath] = match C::TYPE {
            FloatType::F32 => &[DecodePath::Simt],
            _ => &[DecodePath::Simt, DecodePath::Mma],
        };
        for &path in paths {
            let label = format!("{path:?}").to_lowercase();
            // Each call takes its partials' scratch from the context's pool, given back at
            // the stream's sync: a first timing loop grows the pool to the loop's 35 calls
            // (a decode loop that syncs every token needs one), the second is the one
            // reported.
            let mut ms = 0.0;
            for _ in 0..2 {
                ms = self.time(1, |s, _| {
                    s.decode_attention_with(path, (&q, &k, &v), &lens, &out, shape, scale)
                })?;
            }
            let queued = self.queued.get();
            // Eight calls captured in a graph, as the peer's SDPA is.
            let graph = self.graph_ms((1, 8), |s, _| {
                s.decode_attention_with(path, (&q, &k, &v), &lens, &out, shape, scale)
            })?;
            self.emit(format!(
                r#"{{"kind":"decode_attn","cache":"{name}","path":"{label}","context":{cap},"heads_q":{heads_q},"heads_kv":{heads_kv},"dim":{dim},"ms":{ms:.5},"queued_ms":{queued:.5},"graph_ms":{graph:.5},"bytes":{bytes}}}"#
            ));
            let ms = self.time(1, |s, _| {
                s.decode_attention_paged_with(
                    path,
                    (&q, &k, &v),
                    (&table, &lens),
                    &out,
                    paged,
                    scale,
                )
            })?;
            self.emit(format!(
                r#"{{"kind":"decode_attn","cache":"{name} paged16","path":"{label}","context":{cap},"heads_q":{heads_q},"heads_kv":{heads_kv},"dim":{dim},"ms":{ms:.5},"queued_ms":{:.5},"bytes":{bytes}}}"#,
                self.queued.get()
            ));
        }
        Ok(())
    }

    /// FlashAttention forward, bf16, 16K tokens a batch (sequences of 1K, 4K or 16K),
    /// hidden size 2048 (32 heads of 64, 16 of 128, 8 of 256), causal and not: the
    /// FlashAttention-2 paper's benchmark grid (which stops at 128); each kernel the device
    /// runs (`mma.sync`, and Hopper's wgmma kernel there).
    fn flash_attention(&mut self) -> Result<()> {
        let mut paths = vec![FlashPath::Mma];
        if self.ctx.has_sm90a() {
            paths.push(FlashPath::Wgmma);
        }
        let seqs: &[usize] = if self.quick {
            &[4096]
        } else {
            &[1024, 4096, 16384]
        };
        for dim in [64usize, 128, 256] {
            let heads = 2048 / dim;
            for &seq in seqs {
                let batch = 16384 / seq;
                let n = batch * seq * heads * dim;
                let q = self.ctx.upload(&random_bf16(n, 11))?;
                let k = self.ctx.upload(&random_bf16(n, 12))?;
                let v = self.ctx.upload(&random_bf16(n, 13))?;
                let out = self.ctx.alloc::<half::bf16>(n)?;
                let cu: Vec<u32> = (0..=batch).map(|b| (b * seq) as u32).collect();
                let cu = self.ctx.upload(&cu)?;
                for causal in [false, true] {
                    let shape = FlashShape {
                        batch,
                        heads_q: heads,
                        heads_kv: heads,
                        dim,
                        total_q: batch * seq,
                        total_k: batch * seq,
                        max_seqlen_q: seq,
                        causal,
                    };
                    let scale = 1.0 / (dim as f32).sqrt();
                    for path in paths.iter().copied() {
                        let ms = self.time(1, |s, _| {
                            let io = (&q, &k, &v, &out);
                            s.flash_attention_with(path, io, None, (&cu, &cu), shape, scale)
                        })?;
                        let flops = 4.0 * (batch * seq * seq * heads * dim) as f64
                            / if causal { 2.0 } else { 1.0 };
                        let tflops = flops / (ms * 1e-3) / 1e12;
                        let path = format!("{path:?}").to_lowercase();
                        self.emit(format!(
                            r#"{{"kind":"flash_attn","path":"{path}","batch":{batch},"seq":{seq},"heads":{heads},"dim":{dim},"causal":{causal},"ms":{ms:.5},"queued_ms":{:.5},"tflops":{tflops:.2}}}"#,
                            self.queued.get()
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// RoPE at a decode step (one token, 32 heads of 128) and a prefill batch (4096
    /// tokens), NeoX pairing (Hugging Face's), positions from a buffer.
    fn rope(&mut self) -> Result<()> {
        let shapes: &[(usize, usize, usize)] = if self.quick {
            &[(1, 32, 128), (512, 32, 128)]
        } else {
            &[(1, 32, 128), (4096, 32, 128)]
        };
        for &(tokens, heads, dim) in shapes {
            let n = tokens * heads * dim;
            let sets = self.sets(n * 4);
            let xs = self.inputs(n, sets)?;
            let positions: Vec<u32> = (0..tokens as u32).collect();
            let pd = self.ctx.upload(&positions)?;
            let fd = self.ctx.upload(&rope::inv_freq(10000.0, dim))?;
            let out = self.ctx.alloc::<f32>(n)?;
            let ms = self.time(sets, |s, i| {
                s.rope(RopeMode::Neox, &xs[i], &pd, &fd, &out, tokens, heads, dim)
            })?;
            self.emit(format!(
                r#"{{"kind":"rope","tokens":{tokens},"heads":{heads},"dim":{dim},"ms":{ms:.5},"queued_ms":{:.5},"bytes":{}}}"#,
                self.queued.get(),
                2 * n * 4
            ));
        }
        Ok(())
    }

    fn overheads(&mut self) -> Result<()> {
        // Module build (IR -> PTX, first use in this process) and JIT load per family,
        // in a fresh context so nothing is cached by the driver for it.
        let fresh = Context::new(0)?;
        for f in Family::ALL {
            if f.required_target().is_some() && !fresh.has_sm90a() {
                continue;
            }
            let (build, load) = fresh.module_times(f)?;
            self.emit(format!(
                r#"{{"kind":"module","family":"{}","build_ms":{:.3},"load_ms":{:.3}}}"#,
                f.name(),
                build.as_secs_f64() * 1e3,
                load.as_secs_f64() * 1e3
            ));
        }
        // Launch overhead: many tiny launches back to back, host time per launch.
        let x = self.ctx.upload(&[1.0f32; 4])?;
        let out = self.ctx.alloc::<f32>(4)?;
        let n = 20_000;
        let mut s = self.ctx.stream()?.record();
        for _ in 0..100 {
            s.elementwise(ElementwiseOp::Add, &x, Some(&x), &out, 0.0)?;
        }
        let s = s.sync()?;
        let mut s = s.record();
        let t = Instant::now();
        for _ in 0..n {
            s.elementwise(ElementwiseOp::Add, &x, Some(&x), &out, 0.0)?;
        }
        let enqueue = t.elapsed().as_secs_f64() / n as f64 * 1e6;
        s.sync()?;
        let total = t.elapsed().as_secs_f64() / n as f64 * 1e6;
        self.emit(format!(
            r#"{{"kind":"launch","enqueue_us":{enqueue:.3},"total_us":{total:.3}}}"#
        ));
        Ok(())
    }
}

/// The list after `flag` in `args`, parsed, or `None` without the flag; exits with a
/// message where the list is missing or does not parse.
fn list_arg<T>(
    args: &[String],
    flag: &str,
    item: &str,
    parse: impl Fn(&str) -> std::result::Result<Vec<T>, String>,
) -> Option<Vec<T>> {
    let i = args.iter().position(|a| a == flag)?;
    match args.get(i + 1).map(|v| parse(v)) {
        Some(Ok(list)) => Some(list),
        Some(Err(e)) => {
            eprintln!("gpu-bench: {flag}: {e}");
            std::process::exit(2);
        }
        None => {
            eprintln!("gpu-bench: {flag} needs {item},...");
            std::process::exit(2);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let qgemv_shapes = list_arg(&args, "--qgemv-shapes", "ROWSxCOLS", qgemv::parse_shapes);
    let qgemv_formats = list_arg(&args, "--qgemv-formats", "NAME", qgemv::parse_formats);
    let ctx = match Context::new(0) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("gpu-bench: {e}");
            std::process::exit(2);
        }
    };
    let serialised = args.iter().any(|a| a == "--serialised");
    if serialised {
        ctx.set_overlapped_launches(false);
    }
    let overlapped = ctx.overlapped_launches();
    let out = trueno_bench::out_writer(&args);
    let d = ctx.device().clone();
    let mut b = Bench {
        ctx,
        out,
        quick,
        qgemv_shapes,
        qgemv_formats,
        queued: std::cell::Cell::new(0.0),
    };
    b.emit(format!(
        r#"{{"kind":"device","name":"{}","sm":"{}.{}","sms":{},"memory_gib":{:.1},"quick":{quick},"overlapped_launches":{overlapped}}}"#,
        d.name,
        d.compute_capability.0,
        d.compute_capability.1,
        d.multiprocessors,
        d.total_memory as f64 / (1u64 << 30) as f64
    ));
    // `--only a,b` runs just those sections (the names below).
    let only: Option<Vec<String>> = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .map(|s| s.split(',').map(str::to_string).collect());
    let wants = |name: &str| only.as_ref().is_none_or(|o| o.iter().any(|x| x == name));
    let run = || -> Result<()> {
        type Section = fn(&mut Bench) -> Result<()>;
        let sections: [(&str, Section); 15] = [
            ("overheads", Bench::overheads),
            ("elementwise", Bench::elementwise),
            ("rows", Bench::rows),
            ("gemm", Bench::gemm),
            ("gemm_mma", Bench::gemm_mma),
            ("gemm_tf32", Bench::gemm_tf32),
            ("gemm_split", Bench::gemm_split),
            ("flash_attention", Bench::flash_attention),
            ("qgemv", Bench::qgemv),
            ("dequant", Bench::dequant),
            ("qgemm", Bench::qgemm),
            ("rope", Bench::rope),
            ("decode_attention", Bench::decode_attention),
            ("decode_layer", Bench::decode_layer),
            // Last: the GEMM ops take the configurations it tunes from then on, which
            // would move every later section's GEMMs off the untuned rule.
            ("gemm_tune", Bench::gemm_tune),
        ];
        for (name, f) in sections {
            if wants(name) {
                f(&mut b)?;
            }
        }
        Ok(())
    };
    let mut run = run;
    if let Err(e) = run() {
        eprintln!("gpu-bench: {e}");
        std::process::exit(1);
    }
}
