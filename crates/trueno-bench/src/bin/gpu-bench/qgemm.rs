//! The `qgemm` section: a prefill's projections from quantized weights (weights
//! dequantized to transposed bf16, activations rounded to bf16, then the tensor-core
//! GEMM), the whole call and the weights' dequantization alone.

use half::bf16;
use trueno_gpu::Result;
use trueno_gpu::kernels::qgemv::QuantFormat;

use super::{Bench, random, random_blocks};

impl Bench {
    pub(super) fn qgemm(&mut self) -> Result<()> {
        let shapes: &[(usize, usize)] = if self.quick {
            &[(4096, 4096)]
        } else {
            &[(4096, 4096), (14336, 4096), (4096, 14336)]
        };
        let token_counts: &[usize] = if self.quick { &[512] } else { &[512, 2048] };
        for &(rows, cols) in shapes {
            for f in [QuantFormat::Q4K, QuantFormat::Q6K, QuantFormat::Q8_0] {
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
                    let ms = self.time(1, |s, _| s.qgemm(&w, &x, &y, tokens, &wt, &xh))?;
                    self.emit(format!(
                        r#"{{"kind":"qgemm","format":"{}","tokens":{tokens},"rows":{rows},"cols":{cols},"ms":{ms:.5},"dequant_ms":{dequant_ms:.5}}}"#,
                        f.name()
                    ));
                }
            }
        }
        Ok(())
    }
}
