//! The `gemm_split` section: GEMMs whose tiles fill few multiprocessors (the SGEMM, both
//! tensor-core paths, the fused quantized GEMM on a short prompt), at each cut of k into
//! ranges (`Stream::gemm_split`, `Stream::gemm_with_split`,
//! `Stream::qgemm_wgmma_with_split`) and at the split rule's, against cuBLAS on the same
//! shape (the peer script): where the rule's choice comes from.

use trueno_gpu::GemmEpilogue;
use trueno_gpu::Result;
use trueno_gpu::gemm_tune::GemmConfig;
use trueno_gpu::kernels::float_type::FloatType;
use trueno_gpu::kernels::gemm::GemmVariant;
use trueno_gpu::kernels::gemm_mma::{GemmInput, HalfType, MmaTileK};
use trueno_gpu::kernels::gemm_wgmma::WgmmaTileN;
use trueno_gpu::kernels::qgemm_wgmma::QgemmTileM;
use trueno_gpu::kernels::qgemv::QuantFormat;

use super::{Bench, random, random_bf16, random_blocks};

/// The cuts timed at every shape (the rule's is timed as well where it is not one).
const SPLITS: [u32; 6] = [1, 2, 3, 4, 8, 16];

impl Bench {
    pub(super) fn gemm_split(&mut self) -> Result<()> {
        let sgemm: &[usize] = if self.quick { &[512] } else { &[512, 1024] };
        for &s in sgemm {
            let a = self.ctx.upload(&random(s * s, 1))?;
            let b = self.ctx.upload(&random(s * s, 2))?;
            let c = self.ctx.alloc::<f32>(s * s)?;
            let rule = self.rule_ms(|st| st.gemm(GemmVariant::Tiled, &a, &b, &c, s, s, s))?;
            // The 128 x 128 kernel and the sliced 64 x 128 one at every cut.
            let kernels = [
                ("sgemm", GemmVariant::Tiled),
                ("sgemm sliced", GemmVariant::TiledSliced),
            ];
            for (what, v) in kernels {
                for splits in SPLITS {
                    self.time(1, |st, _| st.gemm_split(v, splits, &a, &b, &c, s, s, s))?;
                    self.emit_split(what, (s, s, s), splits, rule);
                }
            }
        }
        // The sm_80 path (mma.sync, the 64-wide k-step) on the same 16-bit shapes: what
        // an A100 runs, on whatever device this is.
        let mma_shapes: &[(usize, usize, usize)] = if self.quick {
            &[(128, 4096, 4096)]
        } else {
            &[(1024, 1024, 1024), (128, 4096, 4096), (128, 4096, 14336)]
        };
        for &shape in mma_shapes {
            self.half_sweep("bf16 mma.sync", Some(GemmConfig::Mma(MmaTileK::K64)), shape)?;
        }
        if !self.ctx.has_sm90a() {
            return Ok(());
        }
        let shapes: &[(usize, usize, usize)] = if self.quick {
            &[(1024, 1024, 1024)]
        } else {
            &[
                (1024, 1024, 1024),
                (128, 4096, 4096),
                (256, 4096, 4096),
                (128, 4096, 14336),
            ]
        };
        for &shape in shapes {
            self.half_sweep("bf16", None, shape)?;
            let n64 = Some(GemmConfig::Wgmma(WgmmaTileN::N64));
            self.half_sweep("bf16 n64", n64, shape)?;
        }
        // The fused quantized GEMM (Q4_K weights, bf16 activations) on a short prompt:
        // tokens x rows x cols.
        let qshapes: &[(usize, usize, usize)] = if self.quick {
            &[(128, 4096, 4096)]
        } else {
            &[
                (64, 4096, 4096),
                (128, 4096, 4096),
                (128, 14336, 4096),
                (128, 4096, 14336),
            ]
        };
        let f = QuantFormat::Q4K;
        for &(tokens, rows, cols) in qshapes {
            let bytes = f.matrix_bytes(rows, cols).expect("bench shapes fit");
            let w = self
                .ctx
                .upload_quant(f, rows, cols, &random_blocks(f, bytes))?;
            let xb = self.ctx.upload(&random_bf16(tokens * cols, 12))?;
            let y = self.ctx.alloc::<f32>(tokens * rows)?;
            let e = GemmEpilogue::default();
            // qgemm_wgmma's tile for prompts of at most 128 tokens.
            let tile = QgemmTileM::M128;
            let rule = self.rule_ms(|st| st.qgemm_wgmma(&w, &xb, &y, tokens, e))?;
            for splits in SPLITS {
                self.time(1, |st, _| {
                    st.qgemm_wgmma_with_split(tile, splits, &w, &xb, &y, tokens, e)
                })?;
                self.emit_split("q4_k fused", (tokens, rows, cols), splits, rule);
            }
        }
        Ok(())
    }

    /// One bf16 product (bf16 out) at every cut and at the rule's, on `config` (the
    /// device's untuned choice where `None`).
    fn half_sweep(
        &mut self,
        what: &str,
        config: Option<GemmConfig>,
        (m, n, k): (usize, usize, usize),
    ) -> Result<()> {
        let bf16_in = GemmInput::Half(HalfType::Bf16);
        let config = match config {
            Some(c) => c,
            None => {
                let st = self.ctx.stream()?.record();
                st.gemm_choice(bf16_in, FloatType::Bf16, (m, n, k))
            }
        };
        let a = self.ctx.upload(&random_bf16(m * k, 1))?;
        let b = self.ctx.upload(&random_bf16(k * n, 2))?;
        let c = self.ctx.alloc::<half::bf16>(m * n)?;
        let e = GemmEpilogue::default();
        let rule =
            self.rule_ms(|st| st.gemm_with_config(bf16_in, config, &a, &b, &c, m, n, k, e))?;
        for splits in SPLITS {
            self.time(1, |st, _| {
                st.gemm_with_split(bf16_in, config, splits, &a, &b, &c, m, n, k, e)
            })?;
            self.emit_split(what, (m, n, k), splits, rule);
        }
        Ok(())
    }

    /// The default op's queued time.
    fn rule_ms<'a>(
        &self,
        mut run: impl FnMut(
            &mut trueno_gpu::driver::Stream<trueno_gpu::driver::Recording<'a>>,
        ) -> Result<()>,
    ) -> Result<f64> {
        self.time(1, |st, _| run(st))?;
        Ok(self.queued.get())
    }

    fn emit_split(&mut self, what: &str, (m, n, k): (usize, usize, usize), splits: u32, rule: f64) {
        let q = self.queued.get();
        let tflops = 2.0 * (m * n * k) as f64 / (q * 1e-3) / 1e12;
        self.emit(format!(
            r#"{{"kind":"gemm_split","type":"{what}","m":{m},"n":{n},"k":{k},"splits":{splits},"ms":{q:.5},"queued_ms":{q:.5},"rule_ms":{rule:.5},"tflops":{tflops:.3}}}"#
        ));
    }
}
