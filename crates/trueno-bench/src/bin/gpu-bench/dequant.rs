//! The `dequant` section: quantized rows to f32, a whole matrix (bound by the bytes read
//! and written) and token-embedding lookups from a vocabulary-sized table.

use trueno_gpu::Result;
use trueno_gpu::kernels::qgemv::QuantFormat;

use super::{Bench, random, random_blocks};

impl Bench {
    pub(super) fn dequant(&mut self) -> Result<()> {
        let (rows, cols) = if self.quick {
            (4096, 4096)
        } else {
            (4096, 14336)
        };
        for f in QuantFormat::ALL {
            let bytes = f.matrix_bytes(rows, cols).expect("bench shapes fit");
            let host = random_blocks(f, bytes);
            let sets = self.sets(bytes + rows * cols * 4);
            let ws = (0..sets)
                .map(|_| self.ctx.upload_quant(f, rows, cols, &host))
                .collect::<Result<Vec<_>>>()?;
            let outs = (0..sets)
                .map(|_| self.ctx.alloc::<f32>(rows * cols))
                .collect::<Result<Vec<_>>>()?;
            let ms = self.time(sets, |s, i| s.dequantize(&ws[i], &outs[i]))?;
            self.emit(format!(
                r#"{{"kind":"dequant","format":"{}","rows":{rows},"cols":{cols},"ms":{ms:.5},"queued_ms":{:.5},"bytes":{}}}"#,
                f.name(),
                self.queued.get(),
                bytes + rows * cols * 4
            ));
        }
        // Llama 3's vocabulary by 4096: a decode step's one row, a prefill's 512.
        let (vocab, cols) = (128256, 4096);
        for f in [QuantFormat::Q4K, QuantFormat::Q8_0] {
            let bytes = f.matrix_bytes(vocab, cols).expect("bench shapes fit");
            let table = self
                .ctx
                .upload_quant(f, vocab, cols, &random_blocks(f, bytes))?;
            for tokens in [1usize, 512] {
                let ids: Vec<u32> = random(tokens, 7)
                    .iter()
                    .map(|v| ((v.abs() * 1e6) as u32) % vocab as u32)
                    .collect();
                let ids = self.ctx.upload(&ids)?;
                let out = self.ctx.alloc::<f32>(tokens * cols)?;
                let ms = self.time(1, |s, _| s.embedding_rows(&table, &ids, &out))?;
                self.emit(format!(
                    r#"{{"kind":"embedding","format":"{}","vocab":{vocab},"cols":{cols},"tokens":{tokens},"ms":{ms:.5},"queued_ms":{:.5},"bytes":{}}}"#,
                    f.name(),
                    self.queued.get(),
                    f.matrix_bytes(tokens, cols).expect("fits") + tokens * (cols * 4 + 4)
                ));
            }
        }
        Ok(())
    }
}
