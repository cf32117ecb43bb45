//! The GEMM sections: `gemm` (the FP32 SIMT kernels), `gemm_mma` (the tensor-core
//! kernels at each configuration, then the default path's epilogues with a bf16 output)
//! and `gemm_tf32` (f32 inputs on Hopper's tensor cores).

use trueno_gpu::gemm_tune::GemmConfig;
use trueno_gpu::kernels::float_type::FloatType;
use trueno_gpu::kernels::gemm::GemmVariant;
use trueno_gpu::kernels::gemm_epilogue::Activation;
use trueno_gpu::kernels::gemm_mma::{GemmInput, HalfType, MmaTileK};
use trueno_gpu::kernels::gemm_wgmma::WgmmaTileN;
use trueno_gpu::{GemmEpilogue, Result};

use super::{Bench, random, random_bf16};

/// A prefill's projections, tokens x out x in: 128 to 2048 tokens of a 4096-wide model
/// and its 14336-wide MLP, both ways.
const PREFILL_SHAPES: [(usize, usize, usize); 5] = [
    (128, 4096, 4096),
    (512, 4096, 4096),
    (512, 14336, 4096),
    (512, 4096, 14336),
    (2048, 4096, 4096),
];

impl Bench {
    pub(super) fn gemm(&mut self) -> Result<()> {
        let sizes: &[usize] = if self.quick {
            &[1024]
        } else {
            &[512, 1024, 2048, 4096, 8192]
        };
        for &s in sizes {
            let a = self.ctx.upload(&random(s * s, 1))?;
            let b = self.ctx.upload(&random(s * s, 2))?;
            let c = self.ctx.alloc::<f32>(s * s)?;
            for v in [GemmVariant::Tiled, GemmVariant::Naive] {
                if v == GemmVariant::Naive && s > 2048 {
                    continue;
                }
                let ms = self.time(1, |st, _| st.gemm(v, &a, &b, &c, s, s, s))?;
                let q = self.queued.get();
                let tflops = 2.0 * (s as f64).powi(3) / (ms * 1e-3) / 1e12;
                self.emit(format!(r#"{{"kind":"gemm","variant":"{v:?}","size":{s},"ms":{ms:.5},"queued_ms":{q:.5},"tflops":{tflops:.3}}}"#));
            }
        }
        Ok(())
    }

    /// The tensor-core GEMMs (bf16 in, f32 accumulation and output), square sizes: the
    /// mma.sync path, and on sm_90 the wgmma path; then the default path (`gemm_mma_with`)
    /// with a bf16 output, plain and with a bias and GELU fused.
    pub(super) fn gemm_mma(&mut self) -> Result<()> {
        let sizes: &[usize] = if self.quick {
            &[1024]
        } else {
            &[1024, 2048, 4096, 8192]
        };
        for &s in sizes {
            let a = self.ctx.upload(&random_bf16(s * s, 1))?;
            let b = self.ctx.upload(&random_bf16(s * s, 2))?;
            let c = self.ctx.alloc::<f32>(s * s)?;
            for tk in [MmaTileK::K32, MmaTileK::K64] {
                let ms = self.time(1, |st, _| {
                    st.gemm_mma_tiled(tk, &a, &b, &c, s, s, s, GemmEpilogue::default())
                })?;
                let q = self.queued.get();
                let tflops = 2.0 * (s as f64).powi(3) / (ms * 1e-3) / 1e12;
                self.emit(format!(
                    r#"{{"kind":"gemm_mma","type":"bf16 k{}","size":{s},"ms":{ms:.5},"queued_ms":{q:.5},"tflops":{tflops:.3}}}"#,
                    tk.elems()
                ));
            }
            if !self.ctx.has_sm90a() {
                continue;
            }
            for tn in [WgmmaTileN::N128, WgmmaTileN::N256] {
                let ms = self.time(1, |st, _| {
                    st.gemm_wgmma_tiled(tn, &a, &b, &c, s, s, s, GemmEpilogue::default())
                })?;
                let q = self.queued.get();
                let tflops = 2.0 * (s as f64).powi(3) / (ms * 1e-3) / 1e12;
                self.emit(format!(
                    r#"{{"kind":"gemm_mma","type":"bf16 wgmma n{}","size":{s},"ms":{ms:.5},"queued_ms":{q:.5},"tflops":{tflops:.3}}}"#,
                    tn.elems()
                ));
            }
        }
        for &s in sizes {
            let a = self.ctx.upload(&random_bf16(s * s, 1))?;
            let b = self.ctx.upload(&random_bf16(s * s, 2))?;
            let c = self.ctx.alloc::<half::bf16>(s * s)?;
            let bias = self.ctx.upload(&random(s, 3))?;
            let plain = GemmEpilogue::default();
            let act = |a| plain.with_activation(a);
            // (row, epilogue, the torch op it is timed against)
            let rows = [
                ("bf16 out", plain, "matmul"),
                ("bf16 out +bias", plain.with_bias(&bias), "addmm"),
                ("bf16 out +silu", act(Activation::Silu), "matmul"),
                ("bf16 out +gelu", act(Activation::Gelu), "matmul"),
                (
                    "bf16 out +bias+gelu_tanh",
                    act(Activation::GeluTanh).with_bias(&bias),
                    "addmm_gelu",
                ),
                (
                    "bf16 out +bias+gelu",
                    act(Activation::Gelu).with_bias(&bias),
                    "addmm_gelu",
                ),
            ];
            // B given transposed (square, so the same buffer serves as Bᵀ): against
            // torch's `a @ b.t()`.
            let ms = self.time(1, |st, _| st.gemm_mma_bt(&a, &b, &c, s, s, s, plain))?;
            let q = self.queued.get();
            let plain_ms = self.time(1, |st, _| st.gemm_mma_with(&a, &b, &c, s, s, s, plain))?;
            let tflops = 2.0 * (s as f64).powi(3) / (ms * 1e-3) / 1e12;
            self.emit(format!(
                r#"{{"kind":"gemm_mma","type":"bf16 out, a bT","peer":"matmul_bt","size":{s},"ms":{ms:.5},"queued_ms":{q:.5},"plain_ms":{plain_ms:.5},"tflops":{tflops:.3}}}"#
            ));
            // Each epilogue timed next to the plain product: at 8192 the times drift by
            // up to 12% over a sequence of rows (a repeat of the first row measured it),
            // which a lone row would put on its epilogue.
            for (what, e, peer) in rows {
                let ms = self.time(1, |st, _| st.gemm_mma_with(&a, &b, &c, s, s, s, e))?;
                let q = self.queued.get();
                let plain_ms =
                    self.time(1, |st, _| st.gemm_mma_with(&a, &b, &c, s, s, s, plain))?;
                let tflops = 2.0 * (s as f64).powi(3) / (ms * 1e-3) / 1e12;
                self.emit(format!(
                    r#"{{"kind":"gemm_mma","type":"{what}","peer":"{peer}","size":{s},"ms":{ms:.5},"queued_ms":{q:.5},"plain_ms":{plain_ms:.5},"tflops":{tflops:.3}}}"#
                ));
            }
        }
        Ok(())
    }

    /// The TF32 GEMM (on sm_90a, where both paths run), square sizes: `a bᵀ` with B
    /// given transposed (the layout the tensor cores read) on the mma.sync path and at
    /// each wgmma tile width; then a row-major B read as stored (`gemm_tf32_kn`: the
    /// Hopper kernel at each tile height, the default path, the sm_80 path), and
    /// through the device transpose first on the default path and on the sm_80 path
    /// (both launches timed together).
    pub(super) fn gemm_tf32(&mut self) -> Result<()> {
        if !self.ctx.has_sm90a() {
            return Ok(());
        }
        let sizes: &[usize] = if self.quick {
            &[1024]
        } else {
            &[1024, 2048, 4096, 8192]
        };
        for &s in sizes {
            let a = self.ctx.upload(&random(s * s, 1))?;
            let b = self.ctx.upload(&random(s * s, 2))?;
            let bt = self.ctx.alloc::<f32>(s * s)?;
            let c = self.ctx.alloc::<f32>(s * s)?;
            let e = GemmEpilogue::default();
            let tf32 = GemmInput::Tf32;
            let tflops = |ms: f64| 2.0 * (s as f64).powi(3) / (ms * 1e-3) / 1e12;
            let ms = self.time(1, |st, _| {
                st.gemm_with_config(tf32, GemmConfig::Mma(MmaTileK::K32), &a, &b, &c, s, s, s, e)
            })?;
            let q = self.queued.get();
            self.emit(format!(
                r#"{{"kind":"gemm_tf32","layout":"nt","type":"tf32 a bT mma.sync","size":{s},"ms":{ms:.5},"queued_ms":{q:.5},"tflops":{:.3}}}"#,
                tflops(ms)
            ));
            for tn in WgmmaTileN::ALL {
                let ms = self.time(1, |st, _| {
                    st.gemm_with_config(tf32, GemmConfig::Wgmma(tn), &a, &b, &c, s, s, s, e)
                })?;
                let q = self.queued.get();
                self.emit(format!(
                    r#"{{"kind":"gemm_tf32","layout":"nt","type":"tf32 a bT n{}","size":{s},"ms":{ms:.5},"queued_ms":{q:.5},"tflops":{:.3}}}"#,
                    tn.elems(),
                    tflops(ms)
                ));
            }
            for tn in WgmmaTileN::ALL {
                let ms = self.time(1, |st, _| {
                    st.gemm_tf32_kn_with_config(GemmConfig::Wgmma(tn), &a, &b, &c, s, s, s, e)
                })?;
                let q = self.queued.get();
                self.emit(format!(
                    r#"{{"kind":"gemm_tf32","layout":"nn","type":"tf32 a b r{}","size":{s},"ms":{ms:.5},"queued_ms":{q:.5},"tflops":{:.3}}}"#,
                    tn.elems(),
                    tflops(ms)
                ));
            }
            let ms = self.time(1, |st, _| st.gemm_tf32_kn(&a, &b, &c, s, s, s, e))?;
            let q = self.queued.get();
            self.emit(format!(
                r#"{{"kind":"gemm_tf32","layout":"nn","type":"tf32 a b (gemm_tf32_kn)","size":{s},"ms":{ms:.5},"queued_ms":{q:.5},"tflops":{:.3}}}"#,
                tflops(ms)
            ));
            // The sm_80 path (every device from sm_80) with B as stored, its fragments
            // gathered, against the transpose it replaced and the same path's `a bᵀ`.
            let mma = GemmConfig::Mma(MmaTileK::K32);
            let ms = self.time(1, |st, _| {
                st.gemm_tf32_kn_with_config(mma, &a, &b, &c, s, s, s, e)
            })?;
            let q = self.queued.get();
            self.emit(format!(
                r#"{{"kind":"gemm_tf32","layout":"nn","type":"tf32 a b mma.sync","size":{s},"ms":{ms:.5},"queued_ms":{q:.5},"tflops":{:.3}}}"#,
                tflops(ms)
            ));
            let ms = self.time(1, |st, _| {
                st.transpose(&b, &bt, s, s)?;
                st.gemm_with_config(tf32, mma, &a, &bt, &c, s, s, s, e)
            })?;
            let q = self.queued.get();
            self.emit(format!(
                r#"{{"kind":"gemm_tf32","layout":"nn","type":"tf32 a b (transpose + a bT mma.sync)","size":{s},"ms":{ms:.5},"queued_ms":{q:.5},"tflops":{:.3}}}"#,
                tflops(ms)
            ));
            let ms = self.time(1, |st, _| {
                st.transpose(&b, &bt, s, s)?;
                st.gemm_tf32(&a, &bt, &c, s, s, s, e)
            })?;
            let q = self.queued.get();
            let tms = self.time(1, |st, _| st.transpose(&b, &bt, s, s))?;
            self.emit(format!(
                r#"{{"kind":"gemm_tf32","layout":"nn","type":"tf32 a b (transpose + a bT)","size":{s},"ms":{ms:.5},"queued_ms":{q:.5},"transpose_ms":{tms:.5},"tflops":{:.3}}}"#,
                tflops(ms)
            ));
        }
        self.gemm_tf32_prefill()
    }

    /// The TF32 GEMM's default paths at a prefill's shapes (tokens x out x in): f32
    /// weights stored `[out, in]` (`gemm_tf32`, PyTorch's `x @ w.t()`) and stored
    /// `[in, out]` (`gemm_tf32_kn`, `x @ w`), the latter again once tuned for the shape.
    fn gemm_tf32_prefill(&mut self) -> Result<()> {
        let shapes: &[(usize, usize, usize)] = match self.quick {
            true => &PREFILL_SHAPES[..1],
            false => &PREFILL_SHAPES,
        };
        for &(m, n, k) in shapes {
            let x = self.ctx.upload(&random(m * k, 1))?;
            let w = self.ctx.upload(&random(n * k, 2))?;
            let c = self.ctx.alloc::<f32>(m * n)?;
            let e = GemmEpilogue::default();
            let tflops = |ms: f64| 2.0 * (m * n * k) as f64 / (ms * 1e-3) / 1e12;
            for layout in ["nt", "nn"] {
                let ms = self.time(1, |st, _| match layout {
                    "nt" => st.gemm_tf32(&x, &w, &c, m, n, k, e),
                    _ => st.gemm_tf32_kn(&x, &w, &c, m, n, k, e),
                })?;
                let q = self.queued.get();
                self.emit(format!(
                    r#"{{"kind":"gemm_tf32_shape","layout":"{layout}","m":{m},"n":{n},"k":{k},"ms":{ms:.5},"queued_ms":{q:.5},"tflops":{:.3}}}"#,
                    tflops(ms)
                ));
            }
            // The row-major product tuned for the shape (`tune_gemm_for`), then its default
            // path again, which now takes the tuned choice.
            let rule = self.ctx.stream()?.record().gemm_choice(
                GemmInput::Tf32Kn,
                FloatType::F32,
                (m, n, k),
            );
            let (times, best) = self
                .ctx
                .tune_gemm_for::<f32, f32>(GemmInput::Tf32Kn, m, n, k)?;
            let ms = self.time(1, |st, _| st.gemm_tf32_kn(&x, &w, &c, m, n, k, e))?;
            let q = self.queued.get();
            self.emit(format!(
                r#"{{"kind":"gemm_tf32_shape","layout":"nn","m":{m},"n":{n},"k":{k},"ms":{ms:.5},"queued_ms":{q:.5},"tflops":{:.3},"tuned":"{}","rule":"{}","tune_ms":{}}}"#,
                tflops(ms),
                best.name(),
                rule.name(),
                tune_ms_json(&times)
            ));
        }
        Ok(())
    }

    /// Tuning (`Context::tune_gemm`), bf16 in and out: square sizes and a prefill's
    /// shapes (tokens x out x in), each configuration's time, the rule's choice and
    /// the tuned one; the tuned choice is then timed on the default path (`gemm_mma`).
    pub(super) fn gemm_tune(&mut self) -> Result<()> {
        let squares = [1024, 2048, 4096, 8192].map(|s| (s, s, s));
        let shapes: Vec<(usize, usize, usize)> = match self.quick {
            true => squares[..1].to_vec(),
            false => [&squares[..], &PREFILL_SHAPES, &[(2048, 14336, 4096)]].concat(),
        };
        type B = half::bf16;
        for (m, n, k) in shapes {
            let s0 = self.ctx.stream()?.record();
            let bf16_in = GemmInput::Half(HalfType::Bf16);
            let rule = s0.gemm_choice(bf16_in, FloatType::Bf16, (m, n, k));
            drop(s0);
            let (times, best) = self.ctx.tune_gemm::<B, B>(m, n, k)?;
            let a = self.ctx.upload(&random_bf16(m * k, 1))?;
            let b = self.ctx.upload(&random_bf16(k * n, 2))?;
            let c = self.ctx.alloc::<B>(m * n)?;
            let e = GemmEpilogue::default();
            let ms = self.time(1, |st, _| st.gemm_mma_with(&a, &b, &c, m, n, k, e))?;
            let q = self.queued.get();
            let rule_ms = self.time(1, |st, _| {
                st.gemm_with_config(bf16_in, rule, &a, &b, &c, m, n, k, e)
            })?;
            let tflops = 2.0 * (m * n * k) as f64 / (ms * 1e-3) / 1e12;
            self.emit(format!(
                r#"{{"kind":"gemm_tune","m":{m},"n":{n},"k":{k},"ms":{ms:.5},"queued_ms":{q:.5},"tflops":{tflops:.3},"tuned":"{}","rule":"{}","rule_ms":{rule_ms:.5},"tune_ms":{}}}"#,
                best.name(),
                rule.name(),
                tune_ms_json(&times)
            ));
        }
        Ok(())
    }
}

/// A tuner's times as a JSON object: `{"mma_k32":0.04290,...}` (milliseconds).
fn tune_ms_json(times: &[(GemmConfig, f64)]) -> String {
    let all: Vec<String> = times
        .iter()
        .map(|(c, t)| format!(r#""{}":{t:.5}"#, c.name()))
        .collect();
    format!("{{{}}}", all.join(","))
}
