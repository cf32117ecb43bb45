//! The `qgemm` section: a prefill's projections from quantized weights, the unfused
//! path (weights dequantized to transposed bf16, activations rounded to bf16, then the
//! tensor-core GEMM: the three launches, and the weights' dequantization alone) and on
//! Hopper the fused kernel (`qgemm_wgmma_tiled`, both tile heights) from bf16
//! activations.

use half::bf16;
use trueno_gpu::kernels::qgemm_wgmma::QgemmTileM;
use trueno_gpu::kernels::qgemv::QuantFormat;
use trueno_gpu::{GemmEpilogue, Result};

use super::{Bench, random, random_bf16, random_blocks};

impl Bench {
    pub(super) fn qgemm(&mut self) -> Result<()> {
        let shapes: &[(usize, usize)] = if self.quick {
            &[(4096, 4096)]
        } else {
            &[(4096, 4096), (14336, 4096), (4096, 14336)]
        };
        let token_counts: &[usize] = if self.quick {
            &[512]
        } else {
            &[128, 256, 512, 1024, 2048]
        };
        for &(rows, cols) in shapes {
            for f in QuantFormat::ALL {
                let bytes = f.matrix_bytes(rows, cols).expect("bench shapes fit");
                let w = self
                    .ctx
                    .upload_quant(f, rows, cols, &random_blocks(f, bytes))?;
                let wt = self.ctx.alloc::<bf16>(rows * cols)?;
                let dequant_ms = self.time(1, |s, _| s.dequantize_transposed(&w, &wt))?;
                for &tokens in token_counts {
                    let x = self.ctx.upload(&random(tokens * cols, 11))?;
                    let xh = self.ctx.alloc::<bf16>(tokens * cols)?;
                    let y = self.ctx.alloc::<f32>(tokens * rows)?;
                    // The unfused path as `qgemm_with` runs it off Hopper.
                    let ms = self.time(1, |s, _| {
                        s.dequantize_transposed(&w, &wt)?;
                        s.to_half(&x, &xh)?;
                        s.gemm_mma(&xh, &wt, &y, tokens, rows, cols, 1.0, 0.0)
                    })?;
                    let q = self.queued.get();
                    // The op as callers run it (on Hopper fused where it measured faster),
                    // and the activations' rounding alone.
                    let routed_ms = self.time(1, |s, _| s.qgemm(&w, &x, &y, tokens, &wt, &xh))?;
                    let routed_q = self.queued.get();
                    let round_ms = self.time(1, |s, _| s.to_half(&x, &xh))?;
                    self.emit(format!(
                        r#"{{"kind":"qgemm","format":"{}","tokens":{tokens},"rows":{rows},"cols":{cols},"ms":{ms:.5},"queued_ms":{q:.5},"dequant_ms":{dequant_ms:.5},"routed_ms":{routed_ms:.5},"routed_queued_ms":{routed_q:.5},"round_ms":{round_ms:.5}}}"#,
                        f.name()
                    ));
                    if self.ctx.has_sm90a() {
                        // The fused kernel from bf16 activations, as cuBLAS takes them,
                        // at both tile heights.
                        let xb = self.ctx.upload(&random_bf16(tokens * cols, 12))?;
                        let e = GemmEpilogue::default();
                        for tile in [QgemmTileM::M128, QgemmTileM::M256] {
                            let ms = self.time(1, |s, _| {
                                s.qgemm_wgmma_tiled(tile, &w, &xb, &y, tokens, e)
                            })?;
                            let q = self.queued.get();
                            self.emit(format!(
                                r#"{{"kind":"qgemm_fused","format":"{}","tile":{},"tokens":{tokens},"rows":{rows},"cols":{cols},"ms":{ms:.5},"queued_ms":{q:.5}}}"#,
                                f.name(),
                                tile.rows()
                            ));
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
