//! `trueno info`.

use serde::Serialize;
use std::io::Write;
use trueno::{Backend, Engine, OpClass};

#[derive(Serialize)]
struct Info {
    cpu: String,
    arch: &'static str,
    features: Vec<(&'static str, bool)>,
    available_backends: Vec<&'static str>,
    best_backend: &'static str,
    backend_override: Option<String>,
    per_class: Vec<(&'static str, &'static str)>,
    threads: usize,
    gemm: Gemm,
    cuda: Cuda,
    wgpu: Wgpu,
}

/// The GEMM configuration chosen here: ISA, micro-kernel, cache blocks.
#[derive(Serialize)]
struct Gemm {
    backend: &'static str,
    micro_kernel: String,
    /// The tile of thin products that read a large A in place (or make a narrow C) and
    /// its depth, where not `micro_kernel`.
    thin_micro_kernel: Option<String>,
    thin_kc: Option<usize>,
    kc: usize,
    mc: usize,
    nc: usize,
    /// KC when A is one block (at most MC rows).
    kc_one_block: usize,
    /// NC for a thin product (A one block of at most MC rows).
    nc_one_block: usize,
    /// KC for a thin B (at most four micro-panels wide, A read in place).
    kc_thin_b: usize,
    /// Rows of a row-major B packed side by side when its rows make one stream.
    pack_b_rows_one_stream: usize,
    l1_kib: usize,
    l2_kib: usize,
    l3_kib: usize,
}

fn gemm(engine: &Engine) -> Gemm {
    let b = engine.backend(OpClass::MatMul);
    let bl = trueno::gemm::blocking_for(b);
    let thin = trueno::gemm::thin_blocking_for(b);
    let c = trueno::gemm::CacheSizes::detect();
    Gemm {
        backend: b.name(),
        micro_kernel: format!("{}x{}", bl.mr, bl.nr),
        thin_micro_kernel: thin.map(|t| format!("{}x{}", t.mr, t.nr)),
        thin_kc: thin.map(|t| t.kc_thin_b),
        kc: bl.kc,
        mc: bl.mc,
        nc: bl.nc,
        kc_one_block: bl.kc_one_block,
        nc_one_block: bl.nc_one_block,
        kc_thin_b: bl.kc_thin_b,
        pack_b_rows_one_stream: bl.pack_b_rows_one_stream,
        l1_kib: c.l1 >> 10,
        l2_kib: c.l2 >> 10,
        l3_kib: c.l3 >> 10,
    }
}

/// CUDA devices, or why there are none.
#[derive(Serialize)]
struct Cuda {
    driver_version: Option<i32>,
    devices: Vec<CudaDevice>,
    error: Option<String>,
}

#[derive(Serialize)]
struct CudaDevice {
    ordinal: usize,
    name: String,
    compute_capability: String,
    multiprocessors: u32,
    memory_gib: f64,
    l2_mib: f64,
}

fn cuda() -> Cuda {
    match trueno_gpu::driver::devices() {
        Ok(d) => Cuda {
            driver_version: trueno_gpu::driver::driver_version().ok(),
            devices: d
                .into_iter()
                .map(|d| CudaDevice {
                    ordinal: d.ordinal,
                    name: d.name,
                    compute_capability: format!(
                        "{}.{}",
                        d.compute_capability.0, d.compute_capability.1
                    ),
                    multiprocessors: d.multiprocessors,
                    memory_gib: d.total_memory as f64 / (1u64 << 30) as f64,
                    l2_mib: d.l2_bytes as f64 / (1u64 << 20) as f64,
                })
                .collect(),
            error: None,
        },
        Err(e) => Cuda {
            driver_version: None,
            devices: Vec::new(),
            error: Some(e.to_string()),
        },
    }
}

/// The adapter trueno-wgpu opens (`TRUENO_WGPU_ADAPTER` picks one by name), or why none.
#[derive(Serialize)]
struct Wgpu {
    adapter: Option<String>,
    error: Option<String>,
}

#[cfg(feature = "wgpu")]
fn wgpu() -> Wgpu {
    match trueno_wgpu::Gpu::new() {
        Ok(g) => Wgpu {
            adapter: Some(g.info().to_string()),
            error: None,
        },
        Err(e) => Wgpu {
            adapter: None,
            error: Some(e.to_string()),
        },
    }
}

#[cfg(not(feature = "wgpu"))]
fn wgpu() -> Wgpu {
    Wgpu {
        adapter: None,
        error: Some("this build has no wgpu feature".into()),
    }
}

/// The CPU's marketing name, from /proc/cpuinfo where there is one.
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name") || l.starts_with("Model"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".to_string())
}

#[cfg(target_arch = "x86_64")]
fn features() -> Vec<(&'static str, bool)> {
    trueno::backend::X86_FEATURES
        .iter()
        .map(|&f| (f, trueno::backend::x86_feature(f)))
        .collect()
}

#[cfg(target_arch = "aarch64")]
fn features() -> Vec<(&'static str, bool)> {
    use std::arch::is_aarch64_feature_detected as has;
    vec![
        ("neon", has!("neon")),
        ("fp16", has!("fp16")),
        ("dotprod", has!("dotprod")),
        ("i8mm", has!("i8mm")),
        ("sve", has!("sve")),
    ]
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn features() -> Vec<(&'static str, bool)> {
    vec![("simd128", cfg!(target_feature = "simd128"))]
}

pub fn run(json: bool) -> Result<(), Box<dyn std::error::Error>> {
    let mut out = std::io::stdout().lock();
    let engine: Engine = *trueno::engine()?;
    let info = Info {
        cpu: cpu_model(),
        arch: std::env::consts::ARCH,
        features: features(),
        available_backends: trueno::available_cpu_backends()
            .into_iter()
            .map(Backend::name)
            .collect(),
        best_backend: trueno::select_best_available_backend().name(),
        backend_override: std::env::var("TRUENO_BACKEND").ok(),
        per_class: OpClass::ALL
            .iter()
            .map(|&c| (c.name(), engine.backend(c).name()))
            .collect(),
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        gemm: gemm(&engine),
        cuda: cuda(),
        wgpu: wgpu(),
    };
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&info)?)?;
        return Ok(());
    }
    writeln!(
        out,
        "CPU          {} ({}, {} threads)",
        info.cpu, info.arch, info.threads
    )?;
    let on: Vec<&str> = info.features.iter().filter(|f| f.1).map(|f| f.0).collect();
    let off: Vec<&str> = info.features.iter().filter(|f| !f.1).map(|f| f.0).collect();
    writeln!(out, "features     {}", on.join(" "))?;
    if !off.is_empty() {
        writeln!(out, "missing      {}", off.join(" "))?;
    }
    writeln!(out, "backends     {}", info.available_backends.join(" "))?;
    match &info.backend_override {
        Some(b) => writeln!(out, "override     TRUENO_BACKEND={b}")?,
        None => writeln!(out, "override     none (set TRUENO_BACKEND to pin one)")?,
    }
    writeln!(out, "per class")?;
    for (class, backend) in &info.per_class {
        writeln!(out, "  {class:<15} {backend}")?;
    }
    let g = &info.gemm;
    writeln!(
        out,
        "gemm         {} {} micro-kernel, KC {} MC {} NC {} (A one block: KC {} NC {}; B thin: {}KC {}; B packed {} row(s) at a time when one stream) (caches L1 {} KiB, L2 {} KiB, L3 {} KiB)",
        g.backend,
        g.micro_kernel,
        g.kc,
        g.mc,
        g.nc,
        g.kc_one_block,
        g.nc_one_block,
        g.thin_micro_kernel
            .as_ref()
            .map_or(String::new(), |k| format!("{k} micro-kernel, ")),
        g.thin_kc.unwrap_or(g.kc_thin_b),
        g.pack_b_rows_one_stream,
        g.l1_kib,
        g.l2_kib,
        g.l3_kib
    )?;
    match (&info.cuda.error, info.cuda.driver_version) {
        (Some(e), _) => writeln!(out, "cuda         none ({e})")?,
        (None, v) => {
            let v = v.map_or("?".to_string(), |v| {
                format!("{}.{}", v / 1000, v % 1000 / 10)
            });
            writeln!(
                out,
                "cuda         driver {v}, {} device(s)",
                info.cuda.devices.len()
            )?;
            for d in &info.cuda.devices {
                writeln!(
                    out,
                    "  [{}] {} (sm {}, {} SMs, {:.1} GiB, L2 {:.0} MiB)",
                    d.ordinal,
                    d.name,
                    d.compute_capability,
                    d.multiprocessors,
                    d.memory_gib,
                    d.l2_mib
                )?;
            }
        }
    }
    match (&info.wgpu.adapter, &info.wgpu.error) {
        (Some(a), _) => writeln!(out, "wgpu         {a}")?,
        (None, e) => writeln!(out, "wgpu         none ({})", e.as_deref().unwrap_or("?"))?,
    }
    Ok(())
}
