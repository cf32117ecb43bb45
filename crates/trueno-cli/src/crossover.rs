//! `trueno bench`'s GPU section: each workload timed on the CPU engine and through the wgpu
//! route at growing sizes ([`trueno::gpu::Crossover::measure`]), the thresholds the default
//! engine would route by, and the `TRUENO_GPU_CROSSOVER` line that pins them.

use crate::bench::Cell;

/// The crossover rows (a CPU and a GPU cell per size) and the printed report, or why there
/// are none (no `wgpu` feature, no adapter, a device error).
#[cfg(feature = "wgpu")]
pub fn measure() -> Result<(Vec<Cell>, String), String> {
    let gpu = trueno::gpu::shared().map_err(|e| e.to_string())?;
    let cpu = trueno::Engine::auto();
    let report = trueno::gpu::Crossover::measure(gpu, &cpu).map_err(|e| e.to_string())?;
    let cpu_name = cpu.backend(trueno::OpClass::Elementwise).name();
    let mut cells = Vec::new();
    for s in &report.samples {
        let op = match s.workload {
            trueno::gpu::Workload::Elementwise => "crossover-elementwise",
            trueno::gpu::Workload::Transcendental => "crossover-transcendental",
            trueno::gpu::Workload::Reduction => "crossover-reduction",
            trueno::gpu::Workload::MatMul => "crossover-matmul",
            trueno::gpu::Workload::Gemv => "crossover-gemv",
        };
        for (backend, t) in [(cpu_name, s.cpu), ("gpu", s.gpu)] {
            let ns = t.as_nanos().max(1) as f64;
            cells.push(Cell {
                op,
                size: s.size,
                backend,
                ns_per_call: ns,
                gb_per_s: 0.0,
                gelem_per_s: s.work as f64 / ns,
                speedup_vs_scalar: None,
                gflops: None,
                percent_of_fma_peak: None,
                gpu_speedup_vs_cpu: (backend == "gpu")
                    .then(|| s.cpu.as_secs_f64() / s.gpu.as_secs_f64().max(1e-12)),
            });
        }
    }
    let text = format!(
        "GPU crossover ({}), host slices in and out, against the CPU engine \
         (work: elements; multiply-adds for matmul and gemv)\n{report}",
        gpu.info()
    );
    Ok((cells, text))
}

/// Without the `wgpu` feature there is no GPU route to measure.
#[cfg(not(feature = "wgpu"))]
pub fn measure() -> Result<(Vec<Cell>, String), String> {
    Err("this build has no wgpu feature".into())
}
