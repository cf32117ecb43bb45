//! trueno-wgpu on whatever adapter opens (a GPU through Vulkan/Metal/DX12, or lavapipe):
//! matmul at 1024..8192, elementwise add / scale and a buffer copy at 64M elements (the
//! copy is the device's own bandwidth yardstick), then the crossover against trueno's CPU
//! SIMD path: the same op called with host slices (upload, run, read back) on both, sizes
//! doubling until the GPU wins. One JSON object per line; `scripts/wgpu_bench_peer.py`
//! adds PyTorch and trueno-gpu (CUDA) from the same command and prints the tables.
//!
//! Usage: `wgpu-bench [--quick] [--out FILE]`

use std::io::Write;
use std::time::Instant;

use trueno::{Matrix, Transpose};
use trueno_wgpu::{Batch, BinaryOp, Gpu, GpuBuffer, Result, UnaryOp};

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

struct Bench {
    gpu: Gpu,
    out: Box<dyn Write>,
    quick: bool,
}

impl Bench {
    fn emit(&mut self, line: String) {
        println!("{line}");
        let _ = writeln!(self.out, "{line}");
    }

    fn upload(&self, data: &[f32]) -> Result<GpuBuffer> {
        let mut b = self.gpu.batch();
        let d = b.upload(data)?;
        b.finish()?;
        Ok(d)
    }

    /// Seconds per op: `record` appends `reps` ops to a batch; one warm-up batch (which
    /// also zero-fills new outputs), then the best of several timed batches, each sized to
    /// about 0.2 s so that submission and the wait are a small share.
    fn time(&self, mut record: impl FnMut(&mut Batch, usize) -> Result<()>) -> Result<f64> {
        let run = |reps: usize, record: &mut dyn FnMut(&mut Batch, usize) -> Result<()>| {
            let mut b = self.gpu.batch();
            record(&mut b, reps)?;
            let t = Instant::now();
            b.finish()?;
            Ok::<f64, trueno_wgpu::GpuError>(t.elapsed().as_secs_f64())
        };
        let one = run(1, &mut record)?;
        let reps = ((0.2 / one) as usize).clamp(1, 200);
        let mut best = f64::MAX;
        for _ in 0..if self.quick { 2 } else { 4 } {
            best = best.min(run(reps, &mut record)? / reps as f64);
        }
        Ok(best)
    }

    fn matmul(&mut self) -> Result<()> {
        let sizes: &[usize] = if self.quick {
            &[1024, 2048]
        } else {
            &[1024, 2048, 4096, 8192]
        };
        for &n in sizes {
            if (n * n * 4) as u64 > self.gpu.info().max_binding_bytes {
                continue;
            }
            let a = self.upload(&random(n * n, 1))?;
            let b = self.upload(&random(n * n, 2))?;
            let c = self.upload(&vec![0.0; n * n])?;
            let s = self
                .time(|bt, reps| (0..reps).try_for_each(|_| bt.matmul_into(&a, &b, &c, n, n, n)))?;
            let tflops = 2.0 * (n as f64).powi(3) / s / 1e12;
            self.emit(format!(
                r#"{{"kind":"wgpu_matmul","size":{n},"ms":{:.5},"tflops":{tflops:.3}}}"#,
                s * 1e3
            ));
        }
        Ok(())
    }

    fn elementwise(&mut self) -> Result<()> {
        let want = if self.quick { 16 << 20 } else { 64 << 20 };
        let n = want.min((self.gpu.info().max_binding_bytes / 4) as usize);
        let x = self.upload(&random(n, 3))?;
        let y = self.upload(&random(n, 4))?;
        let out = self.upload(&vec![0.0; n])?;
        let cases: [(&str, usize); 3] = [("copy", 2), ("scale", 2), ("add", 3)];
        for (name, words) in cases {
            let s = self.time(|b, reps| {
                (0..reps).try_for_each(|_| match name {
                    "copy" => b.copy(&x, &out),
                    "scale" => b.unary_into(UnaryOp::Scale(1.5), &x, &out),
                    _ => b.binary_into(BinaryOp::Add, &x, &y, &out),
                })
            })?;
            let gbs = (words * n * 4) as f64 / s / 1e9;
            self.emit(format!(
                r#"{{"kind":"wgpu_elementwise","op":"{name}","n":{n},"ms":{:.5},"gbs":{gbs:.1}}}"#,
                s * 1e3
            ));
        }
        Ok(())
    }

    /// Host slices in and out on both sides: the cost `Backend::Auto` would weigh. Sizes
    /// double until the GPU is faster (or the largest is reached).
    fn crossover(&mut self) -> Result<()> {
        let e = trueno::engine().expect("cpu engine");
        let best = |f: &mut dyn FnMut() -> Result<()>| -> Result<f64> {
            f()?;
            let mut b = f64::MAX;
            for _ in 0..5 {
                let t = Instant::now();
                f()?;
                b = b.min(t.elapsed().as_secs_f64());
            }
            Ok(b)
        };
        let top = if self.quick { 1 << 20 } else { 1 << 24 };
        for op in ["add", "exp", "sum"] {
            let mut n = 1 << 12;
            while n <= top {
                let (x, y) = (random(n, 5), random(n, 6));
                let mut o = vec![0.0; n];
                let cpu = best(&mut || {
                    match op {
                        "add" => e.add_into(&x, &y, &mut o).map(drop),
                        "exp" => e.exp_into(&x, &mut o).map(drop),
                        _ => e.sum(&x).map(drop),
                    }
                    .map_err(|err| trueno_wgpu::GpuError::Readback(err.to_string()))
                })?;
                let gpu = best(&mut || match op {
                    "add" => self.gpu.binary(BinaryOp::Add, &x, &y).map(drop),
                    "exp" => self.gpu.unary(UnaryOp::Exp, &x).map(drop),
                    _ => self.gpu.reduce(trueno_wgpu::ReduceOp::Sum, &x).map(drop),
                })?;
                self.emit(format!(
                    r#"{{"kind":"crossover","op":"{op}","n":{n},"cpu_ms":{:.4},"gpu_ms":{:.4}}}"#,
                    cpu * 1e3,
                    gpu * 1e3
                ));
                if gpu < cpu {
                    break;
                }
                n *= 4;
            }
        }
        let top = if self.quick { 512 } else { 2048 };
        let mut n = 64;
        while n <= top {
            let (a, b) = (random(n * n, 7), random(n * n, 8));
            let (ma, mb) = (
                Matrix::from_vec(n, n, a.clone()).expect("shape"),
                Matrix::from_vec(n, n, b.clone()).expect("shape"),
            );
            let mut mc = Matrix::zeros(n, n).expect("shape");
            let cpu = best(&mut || {
                e.gemm(
                    1.0,
                    ma.view(),
                    Transpose::No,
                    mb.view(),
                    Transpose::No,
                    0.0,
                    &mut mc.view_mut(),
                )
                .map_err(|err| trueno_wgpu::GpuError::Readback(err.to_string()))
            })?;
            let gpu = best(&mut || self.gpu.matmul(&a, &b, n, n, n).map(drop))?;
            self.emit(format!(
                r#"{{"kind":"crossover","op":"matmul","n":{n},"cpu_ms":{:.4},"gpu_ms":{:.4}}}"#,
                cpu * 1e3,
                gpu * 1e3
            ));
            if gpu < cpu {
                break;
            }
            n *= 2;
        }
        Ok(())
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let gpu = match Gpu::new() {
        Ok(g) => g,
        Err(e) => {
            eprintln!("wgpu-bench: {e}");
            std::process::exit(1);
        }
    };
    let out = trueno_bench::out_writer(&args);
    let i = gpu.info().clone();
    let mut b = Bench { gpu, out, quick };
    b.emit(format!(
        r#"{{"kind":"wgpu_device","name":"{}","backend":"{}","type":"{}","driver":"{}"}}"#,
        i.name, i.backend, i.device_type, i.driver
    ));
    let mut run = || -> Result<()> {
        b.matmul()?;
        b.elementwise()?;
        b.crossover()
    };
    if let Err(e) = run() {
        eprintln!("wgpu-bench: {e}");
        std::process::exit(1);
    }
}
