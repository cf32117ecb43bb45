//! The `qgemv` section: matrix-vector products from quantized weights, every format, with
//! f32 and f16 activations and on the integer path (alone, batched, and with the
//! activations' quantization), at the issue's shapes or `--qgemv-shapes`.

use trueno_gpu::Result;
use trueno_gpu::kernels::qgemv::QuantFormat;
use trueno_gpu::kernels::qgemv_dp4a::{MAX_BATCH, QgemvQ8kKernel};
use trueno_gpu::kernels::qgemv_q4k_mma::{BatchPath, QgemvQ8kMmaKernel};
use trueno_gpu::kernels::qgemv_q4k_mma_one::tensor_core_kernel_for;
use trueno_gpu::memory::{DeviceBuffer, QuantMatrix};

use super::{Bench, random, random_blocks};

impl Bench {
    /// Matrix-vector products from quantized weights at LLM projection shapes (rows x
    /// cols = outputs x inputs), weights rotated through enough copies to miss L2.
    pub(super) fn qgemv(&mut self) -> Result<()> {
        let shapes: Vec<(usize, usize)> = match (&self.qgemv_shapes, self.quick) {
            (Some(s), _) => s.clone(),
            (None, true) => vec![(4096, 4096)],
            (None, false) => vec![(4096, 4096), (14336, 4096), (4096, 14336), (32000, 4096)],
        };
        for (rows, cols) in shapes {
            let x = self.ctx.upload(&random(cols, 3))?;
            let xh: Vec<half::f16> = random(cols, 3)
                .into_iter()
                .map(half::f16::from_f32)
                .collect();
            let xh = self.ctx.upload(&xh)?;
            let y = self.ctx.alloc::<f32>(rows)?;
            for f in QuantFormat::ALL {
                if self
                    .qgemv_formats
                    .as_ref()
                    .is_some_and(|only| !only.contains(&f))
                {
                    continue;
                }
                // A `--qgemv-shapes` width that is not whole super-blocks: nothing to time.
                let Some(bytes) = f.matrix_bytes(rows, cols).filter(|_| cols % 256 == 0) else {
                    eprintln!("gpu-bench: qgemv {rows}x{cols}: not whole blocks of 256, skipped");
                    continue;
                };
                let sets = self.sets(bytes);
                let host = random_blocks(f, bytes);
                let ws = (0..sets)
                    .map(|_| self.ctx.upload_quant(f, rows, cols, &host))
                    .collect::<Result<Vec<_>>>()?;
                let ms = self.time(sets, |s, i| s.qgemv(&ws[i], &x, &y))?;
                let moved = bytes + (cols + rows) * 4;
                self.emit(format!(
                    r#"{{"kind":"qgemv","format":"{}","rows":{rows},"cols":{cols},"ms":{ms:.5},"queued_ms":{:.5},"bytes":{moved}}}"#,
                    f.name(),
                    self.queued.get()
                ));
                // f16 activations: half the activation bytes, widened in the kernel.
                let ms = self.time(sets, |s, i| s.qgemv(&ws[i], &xh, &y))?;
                self.emit(format!(
                    r#"{{"kind":"qgemv","format":"{} f16x","rows":{rows},"cols":{cols},"ms":{ms:.5},"queued_ms":{:.5},"bytes":{}}}"#,
                    f.name(),
                    self.queued.get(),
                    bytes + cols * 2 + rows * 4
                ));
                if QgemvQ8kKernel::FORMATS.contains(&f) {
                    self.qgemv_q8k(f, &ws, &x, &y, bytes)?;
                }
            }
        }
        Ok(())
    }

    /// The integer path for one weight format: the product alone (activations quantized
    /// once beforehand, as the projections sharing an input do), then quantization and
    /// product together (what a lone projection pays).
    fn qgemv_q8k(
        &mut self,
        f: QuantFormat,
        ws: &[QuantMatrix],
        x: &DeviceBuffer<f32>,
        y: &DeviceBuffer<f32>,
        bytes: usize,
    ) -> Result<()> {
        let (rows, cols) = (ws[0].rows(), ws[0].cols());
        let q = self.ctx.alloc_q8k(cols)?;
        let mut s = self.ctx.stream()?.record();
        s.quantize_q8k(x, &q)?;
        s.sync()?;
        // Quants, a scale per 256 and an i32 sum per 16, then y.
        let act = cols + cols / 256 * 4 + cols / 16 * 4;
        let single = self.time(ws.len(), |s, i| s.qgemv_q8k(&ws[i], &q, y))?;
        let queued = self.queued.get();
        // In a graph (each weight set in turn, eight calls at least), as the peer's
        // cuBLAS GEMV is.
        let copies = ws.len().max(8);
        let graph = self.graph_ms((ws.len(), copies), |s, i| s.qgemv_q8k(&ws[i], &q, y))?;
        // Where the product runs a tensor-core kernel, the `dp4a` kernels it replaced in
        // the same run.
        let dev = self.ctx.device().qgemv_device();
        let dp4a = match tensor_core_kernel_for(f, rows, cols, dev).is_some() {
            true => {
                self.ctx.set_qgemv_tensor_cores(false);
                let ms = self.graph_ms((ws.len(), copies), |s, i| s.qgemv_q8k(&ws[i], &q, y));
                self.ctx.set_qgemv_tensor_cores(true);
                format!(r#","dp4a_graph_ms":{:.5}"#, ms?)
            }
            false => String::new(),
        };
        self.emit(format!(
            r#"{{"kind":"qgemv","format":"{} q8k","rows":{rows},"cols":{cols},"ms":{single:.5},"queued_ms":{queued:.5},"graph_ms":{graph:.5},"bytes":{}{dp4a}}}"#,
            f.name(),
            bytes + act + rows * 4
        ));
        // Batches: n different vectors against one read of the weights (past eight, the
        // tensor cores' wider kernels only).
        for n in [2usize, 3, 4, 8, 16, 32] {
            let qn = self.ctx.alloc_q8k(n * cols)?;
            let xn = self.ctx.upload(&random(n * cols, 5))?;
            let yn = self.ctx.alloc::<f32>(n * rows)?;
            let mut s = self.ctx.stream()?.record();
            s.quantize_q8k(&xn, &qn)?;
            s.sync()?;
            // Where the format has a tensor-core batch kernel, it and dp4a side by side.
            let paths: &[(BatchPath, &str)] = match QgemvQ8kMmaKernel::FORMATS.contains(&f) {
                true if n > MAX_BATCH => &[(BatchPath::TensorCores, " mma")],
                true => &[(BatchPath::TensorCores, " mma"), (BatchPath::Dp4a, "")],
                false if n > MAX_BATCH => &[],
                false => &[(BatchPath::Auto, "")],
            };
            // From eight vectors, what else a caller has for them: the prefill GEMM from
            // f32 activations (`qgemm`, as routed), against this path's quantization and
            // product together.
            let alt = match n >= 8 && !paths.is_empty() {
                true => {
                    let xh = self.ctx.alloc::<half::bf16>(n * cols)?;
                    let wt = self.ctx.alloc::<half::bf16>(rows * cols)?;
                    // GPU time (queued behind a hold), as the batch's `queued_ms`.
                    self.time(ws.len(), |s, i| s.qgemm(&ws[i], &xn, &yn, n, &wt, &xh))?;
                    let qgemm = self.queued.get();
                    self.time(ws.len(), |s, i| {
                        s.quantize_q8k(&xn, &qn)?;
                        s.qgemv_q8k_batch(&ws[i], &qn, &yn, n)
                    })?;
                    let quantized = self.queued.get();
                    format!(r#","qgemm_queued_ms":{qgemm:.5},"quantized_queued_ms":{quantized:.5}"#)
                }
                false => String::new(),
            };
            for &(path, label) in paths {
                let ms = self.time(ws.len(), |s, i| {
                    s.qgemv_q8k_batch_with(&ws[i], &qn, &yn, n, path)
                })?;
                self.emit(format!(
                    r#"{{"kind":"qgemv_batch","format":"{} q8k{label}","rows":{rows},"cols":{cols},"vectors":{n},"ms":{ms:.5},"queued_ms":{:.5},"single_ms":{single:.5},"bytes":{}{}}}"#,
                    f.name(),
                    self.queued.get(),
                    bytes + n * (act + rows * 4),
                    if label.is_empty() { "" } else { &alt }
                ));
            }
        }
        let ms = self.time(ws.len(), |s, i| {
            s.quantize_q8k(x, &q)?;
            s.qgemv_q8k(&ws[i], &q, y)
        })?;
        let queued = self.queued.get();
        // A decode step's pair of launches, chained in a graph.
        let graph = self.graph_ms((ws.len(), copies), |s, i| {
            s.quantize_q8k(x, &q)?;
            s.qgemv_q8k(&ws[i], &q, y)
        })?;
        self.emit(format!(
            r#"{{"kind":"qgemv","format":"{} q8k+quantize","rows":{rows},"cols":{cols},"ms":{ms:.5},"queued_ms":{queued:.5},"graph_ms":{graph:.5},"bytes":{}}}"#,
            f.name(),
            bytes + cols * 4 + rows * 4
        ));
        Ok(())
    }
}

/// `"8192x4096,32000x4096"` as `(rows, cols)` pairs; every size at least 1.
pub(super) fn parse_shapes(list: &str) -> std::result::Result<Vec<(usize, usize)>, String> {
    list.split(',')
        .map(|s| {
            let dims = s
                .split_once('x')
                .and_then(|(r, c)| Some((r.parse().ok()?, c.parse().ok()?)));
            match dims {
                Some((r, c)) if r > 0 && c > 0 => Ok((r, c)),
                _ => Err(format!("{s:?} is not ROWSxCOLS")),
            }
        })
        .collect()
}

/// `"q6_k,Q4_K"` as formats (GGML's names, any case); every name known.
pub(super) fn parse_formats(list: &str) -> std::result::Result<Vec<QuantFormat>, String> {
    list.split(',')
        .map(|s| {
            QuantFormat::ALL
                .into_iter()
                .find(|f| f.name().eq_ignore_ascii_case(s.trim()))
                .ok_or_else(|| {
                    let names = QuantFormat::ALL.map(|f| f.name()).join(", ");
                    format!("{s:?} is not one of {names}")
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{QuantFormat, parse_formats, parse_shapes};

    #[test]
    fn format_lists_parse_by_ggml_name_in_any_case() {
        assert_eq!(
            parse_formats("q6_k,Q4_K"),
            Ok(vec![QuantFormat::Q6K, QuantFormat::Q4K])
        );
        for bad in ["", "q6", "q6_k,", "q8_1"] {
            assert!(parse_formats(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn shape_lists_parse_or_say_which_entry_is_wrong() {
        assert_eq!(
            parse_shapes("8192x4096,32000x4096"),
            Ok(vec![(8192, 4096), (32000, 4096)])
        );
        for bad in ["1x", "x4096", "0x4096", "4096x0", "4096", "ax3", "8x8,"] {
            assert!(parse_shapes(bad).is_err(), "{bad}");
        }
    }
}
