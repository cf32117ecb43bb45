//! The `decode_layer` section: one llama-style decoder layer at a decode step, every
//! launch trueno makes for it chained as a model runs them, in a CUDA graph: residual add
//! and RMSNorm, the activations' Q8_K quantization, the Q4_K projections on the integer
//! path, RoPE, the bf16 KV cache's append and attention, SwiGLU. Llama-3-8B's shapes
//! (hidden 4096, 32 query and 8 key/value heads of 128, FFN 14336), context 4096. µs a
//! layer, against the bytes it must read (the roofline's floor at the copy bandwidth the
//! peer script measures). `--serialised` runs the same chain without overlapped launches.

use half::bf16;
use trueno_gpu::Result;
use trueno_gpu::driver::{Recording, Stream};
use trueno_gpu::kernels::attention::DecodeShape;
use trueno_gpu::kernels::elementwise::ElementwiseOp;
use trueno_gpu::kernels::qgemv::QuantFormat;
use trueno_gpu::kernels::rope::{RopeMode, inv_freq};
use trueno_gpu::memory::{DeviceBuffer, Q8kVector, QuantMatrix};

use super::{Bench, random, random_blocks};

const HIDDEN: usize = 4096;
const HEADS_Q: usize = 32;
const HEADS_KV: usize = 8;
const DIM: usize = 128;
const FFN: usize = 14336;
const CONTEXT: usize = 4096;

/// A layer's weights and the buffers its step writes.
struct Layer {
    /// q, k, v, o, gate, up, down.
    w: Vec<QuantMatrix>,
    gamma: [DeviceBuffer<f32>; 2],
    /// x, residual, normed, h, q, k, v, attention, o, h2, gate, up, act, down.
    f: Vec<DeviceBuffer<f32>>,
    /// The quantized inputs: normed (hidden), attention (hidden), ffn normed, act (ffn).
    q: [Q8kVector; 4],
    cache: [DeviceBuffer<bf16>; 2],
    pos: DeviceBuffer<u32>,
    lens: DeviceBuffer<u32>,
    inv_freq: DeviceBuffer<f32>,
}

const X: usize = 0;
const RES: usize = 1;
const NORMED: usize = 2;
const H: usize = 3;
const Q: usize = 4;
const K: usize = 5;
const V: usize = 6;
const ATT: usize = 7;
const O: usize = 8;
const H2: usize = 9;
const GATE: usize = 10;
const UP: usize = 11;
const ACT: usize = 12;
const DOWN: usize = 13;

fn shape() -> DecodeShape {
    DecodeShape {
        batch: 1,
        heads_q: HEADS_Q,
        heads_kv: HEADS_KV,
        capacity: CONTEXT,
        dim: DIM,
    }
}

/// One decode step through the layer: 18 launches (decode attention is two).
fn step<'a>(s: &mut Stream<Recording<'a>>, l: &'a Layer) -> Result<()> {
    let (f, w, q) = (&l.f, &l.w, &l.q);
    let eps = 1e-5;
    s.add_rmsnorm(
        &f[X],
        &f[RES],
        &l.gamma[0],
        &f[NORMED],
        &f[H],
        1,
        HIDDEN,
        eps,
    )?;
    s.quantize_q8k(&f[NORMED], &q[0])?;
    for (wi, out) in [(0, Q), (1, K), (2, V)] {
        s.qgemv_q8k(&w[wi], &q[0], &f[out])?;
    }
    for (x, heads) in [(Q, HEADS_Q), (K, HEADS_KV)] {
        s.rope(
            RopeMode::Neox,
            &f[x],
            &l.pos,
            &l.inv_freq,
            &f[x],
            1,
            heads,
            DIM,
        )?;
    }
    let [kc, vc] = &l.cache;
    s.kv_append(&f[K], &f[V], kc, vc, &l.pos, shape())?;
    let scale = 1.0 / (DIM as f32).sqrt();
    s.decode_attention(&f[Q], kc, vc, &l.lens, &f[ATT], shape(), scale)?;
    s.quantize_q8k(&f[ATT], &q[1])?;
    s.qgemv_q8k(&w[3], &q[1], &f[O])?;
    s.add_rmsnorm(
        &f[O],
        &f[H],
        &l.gamma[1],
        &f[NORMED],
        &f[H2],
        1,
        HIDDEN,
        eps,
    )?;
    s.quantize_q8k(&f[NORMED], &q[2])?;
    s.qgemv_q8k(&w[4], &q[2], &f[GATE])?;
    s.qgemv_q8k(&w[5], &q[2], &f[UP])?;
    s.elementwise(ElementwiseOp::Swiglu, &f[GATE], Some(&f[UP]), &f[ACT], 1.0)?;
    s.quantize_q8k(&f[ACT], &q[3])?;
    s.qgemv_q8k(&w[6], &q[3], &f[DOWN])
}

impl Bench {
    pub(super) fn decode_layer(&mut self) -> Result<()> {
        let c = &self.ctx;
        let f = QuantFormat::Q4K;
        // q, k, v, o, gate, up (rows x cols), down.
        let dims = [
            (HEADS_Q * DIM, HIDDEN),
            (HEADS_KV * DIM, HIDDEN),
            (HEADS_KV * DIM, HIDDEN),
            (HIDDEN, HEADS_Q * DIM),
            (FFN, HIDDEN),
            (FFN, HIDDEN),
            (HIDDEN, FFN),
        ];
        let bytes_of = |(r, k): (usize, usize)| f.matrix_bytes(r, k).expect("layer shapes fit");
        let weight_bytes: usize = dims.iter().map(|&d| bytes_of(d)).sum();
        let w = dims
            .iter()
            .map(|&(r, k)| c.upload_quant(f, r, k, &random_blocks(f, bytes_of((r, k)))))
            .collect::<Result<Vec<_>>>()?;
        let sizes = [
            HIDDEN,
            HIDDEN,
            HIDDEN,
            HIDDEN,
            HEADS_Q * DIM,
            HEADS_KV * DIM,
            HEADS_KV * DIM,
            HEADS_Q * DIM,
            HIDDEN,
            HIDDEN,
            FFN,
            FFN,
            FFN,
            HIDDEN,
        ];
        let f32s = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| c.upload(&random(n, 40 + i as u64)))
            .collect::<Result<Vec<_>>>()?;
        let cache_len = HEADS_KV * CONTEXT * DIM;
        let cache = |seed| -> Result<DeviceBuffer<bf16>> {
            let v: Vec<bf16> = random(cache_len, seed)
                .into_iter()
                .map(bf16::from_f32)
                .collect();
            c.upload(&v)
        };
        let layer = Layer {
            w,
            gamma: [
                c.upload(&random(HIDDEN, 30))?,
                c.upload(&random(HIDDEN, 31))?,
            ],
            f: f32s,
            q: [
                c.alloc_q8k(HIDDEN)?,
                c.alloc_q8k(HEADS_Q * DIM)?,
                c.alloc_q8k(HIDDEN)?,
                c.alloc_q8k(FFN)?,
            ],
            cache: [cache(50)?, cache(51)?],
            // The new token is the context's last position.
            pos: c.upload(&[(CONTEXT - 1) as u32])?,
            lens: c.upload(&[CONTEXT as u32])?,
            inv_freq: c.upload(&inv_freq(500000.0, DIM))?,
        };
        // Weights (past L2 at 123 MB) and the caches read once a step.
        let bytes = weight_bytes + 2 * cache_len * 2;
        let layers = 4;
        let ms = self.graph_ms((1, layers), |s, _| step(s, &layer))?;
        let queued = self.time(1, |s, _| step(s, &layer))?;
        self.emit(format!(
            r#"{{"kind":"decode_layer","model":"llama3-8b","format":"{}","context":{CONTEXT},"launches":18,"graph_ms":{ms:.5},"ms":{queued:.5},"bytes":{bytes},"overlapped":{}}}"#,
            f.name(),
            self.ctx.overlapped_launches()
        ));
        Ok(())
    }
}
