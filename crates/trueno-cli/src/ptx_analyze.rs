//! `trueno ptx analyze FILE.ptx`: the analyzer's report (or only its findings), as text or
//! JSON, with ptxas's register and spill figures beside ours when asked.

use std::io::Write;
use std::path::Path;

use trueno_gpu::analyze::ptxas::{PtxasFigures, locate, parse_verbose, run_verbose};
use trueno_gpu::analyze::{
    Analysis, Arch, Config, Device, KernelReport, Pattern, Severity, analyze,
};

/// What `trueno ptx analyze` was asked.
#[derive(clap::Args)]
pub struct Options {
    /// The .ptx file.
    pub file: String,
    /// Also report patterns that are usually intended (warp-synchronous shared
    /// exchanges, guarded writes that cover each other, counted named barriers...).
    #[arg(long)]
    pub strict: bool,
    /// Only the findings, one per line (`file:line:col: severity [detector] message`).
    #[arg(long)]
    pub bugs: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Every memory access, and registers by type.
    #[arg(long)]
    pub verbose: bool,
    /// Architecture for occupancy (sm_70 to sm_120); ptxas gets the file's own .target.
    #[arg(long, default_value = "sm_90")]
    pub target: String,
    /// Run ptxas -v (from $PTXAS or PATH) and show its registers and spills beside ours.
    #[arg(long)]
    pub ptxas: bool,
    /// Threads per block for kernels without .maxntid/.reqntid.
    #[arg(long, default_value_t = 256)]
    pub block_size: u32,
    /// Occupancy below which register pressure is reported (0 to 1).
    #[arg(long, default_value_t = 0.25)]
    pub min_occupancy: f64,
    /// Peak FLOP/s of the roofline, in TFLOP/s (default: H100 SXM FP32).
    #[arg(long, default_value_t = Device::default().peak_flops / 1e12)]
    pub peak_tflops: f64,
    /// Memory bandwidth of the roofline, in GB/s (default: H100 SXM HBM3).
    #[arg(long, default_value_t = Device::default().bandwidth / 1e9)]
    pub bandwidth_gbs: f64,
}

/// The result: whether any finding was critical (the exit status says so).
pub fn run(o: &Options) -> Result<bool, Box<dyn std::error::Error>> {
    let arch = Arch::parse(&o.target).ok_or_else(|| {
        format!(
            "unknown target {} (one of {})",
            o.target,
            Arch::names().join(", ")
        )
    })?;
    if !(o.peak_tflops > 0.0 && o.bandwidth_gbs > 0.0) {
        return Err("--peak-tflops and --bandwidth-gbs must be positive".into());
    }
    if !(0.0..=1.0).contains(&o.min_occupancy) {
        return Err("--min-occupancy is a fraction between 0 and 1".into());
    }
    if o.block_size == 0 || o.block_size > 1024 {
        return Err("--block-size must be 1 to 1024 threads".into());
    }
    let text =
        std::fs::read_to_string(&o.file).map_err(|e| format!("cannot read {}: {e}", o.file))?;
    let config = Config {
        arch,
        block_size: o.block_size,
        min_occupancy: o.min_occupancy,
        device: Device {
            peak_flops: o.peak_tflops * 1e12,
            bandwidth: o.bandwidth_gbs * 1e9,
        },
        strict: o.strict,
    };
    let analysis = analyze(&text, &config).map_err(|e| format!("{}:{e}", o.file))?;
    let ptxas = if o.ptxas {
        // ptxas compiles only for the file's own .target family (sm_90a PTX needs sm_90a).
        let arch = analysis
            .target
            .iter()
            .find(|t| t.starts_with("sm_"))
            .map_or(o.target.as_str(), String::as_str);
        Some(run_ptxas(&o.file, arch)?)
    } else {
        None
    };
    let critical = analysis
        .kernels
        .iter()
        .any(|k| k.worst() == Some(Severity::Critical));
    let mut out = std::io::stdout().lock();
    if o.json {
        let mut v = serde_json::to_value(&analysis)?;
        if let (Some(p), Some(obj)) = (&ptxas, v.as_object_mut()) {
            obj.insert("ptxas".into(), serde_json::to_value(p)?);
        }
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
    } else if o.bugs {
        write_findings(&mut out, &o.file, &analysis)?;
    } else {
        write_report(&mut out, &o.file, &analysis, ptxas.as_deref(), o.verbose)?;
    }
    Ok(critical)
}

/// `ptxas -v` on the file for `target`: `$PTXAS`, the workspace's wheel, or PATH.
fn run_ptxas(file: &str, target: &str) -> Result<Vec<PtxasFigures>, Box<dyn std::error::Error>> {
    let here = std::env::current_dir().unwrap_or_default();
    let exe = locate(&here).ok_or("--ptxas: no ptxas (set PTXAS or put it on PATH)")?;
    let null = Path::new(if cfg!(windows) { "NUL" } else { "/dev/null" });
    let log = run_verbose(&exe, Path::new(file), target, null)
        .map_err(|log| format!("--ptxas: ptxas rejected {file}:\n{}", log.trim()))?;
    Ok(parse_verbose(&log))
}

fn write_findings(out: &mut impl Write, file: &str, a: &Analysis) -> std::io::Result<()> {
    for k in &a.kernels {
        for f in &k.findings {
            writeln!(
                out,
                "{file}:{}:{}: {} [{}] {} (in {})",
                f.pos.line,
                f.pos.col,
                f.severity.name(),
                f.detector,
                f.message,
                k.name
            )?;
        }
    }
    Ok(())
}

fn write_report(
    out: &mut impl Write,
    file: &str,
    a: &Analysis,
    ptxas: Option<&[PtxasFigures]>,
    verbose: bool,
) -> std::io::Result<()> {
    writeln!(
        out,
        "{file}: PTX {} for {}, {} function(s), figures for {}{}",
        a.version.as_deref().unwrap_or("?"),
        a.target.join(","),
        a.kernels.len(),
        a.arch,
        if a.strict { " (strict)" } else { "" }
    )?;
    for k in &a.kernels {
        writeln!(out)?;
        kernel(
            out,
            k,
            ptxas.and_then(|p| p.iter().find(|f| f.function == k.name)),
            verbose,
        )?;
    }
    Ok(())
}

fn kernel(
    out: &mut impl Write,
    k: &KernelReport,
    ptxas: Option<&PtxasFigures>,
    verbose: bool,
) -> std::io::Result<()> {
    writeln!(
        out,
        "{} {} (lines {}-{}): {} instructions, {} blocks, loops nested {} deep",
        if k.is_entry { ".entry" } else { ".func" },
        k.name,
        k.pos.line,
        k.end_line,
        k.instructions,
        k.blocks,
        k.max_loop_depth
    )?;
    let r = &k.registers;
    let theirs = ptxas.map_or(String::new(), |p| {
        format!(
            "; ptxas: {} registers, {} B spill stores, {} B spill loads",
            p.registers, p.spill_stores, p.spill_loads
        )
    });
    writeln!(
        out,
        "  registers   ~{} (at most {} slots live, line {}; {} predicates){theirs}",
        r.estimated, r.max_live, r.max_live_at.line, r.max_live_predicates
    )?;
    let o = &k.occupancy;
    writeln!(
        out,
        "  occupancy   {:.0}% at {} threads/block: {} blocks, {} warps per SM (limited by {}); {} B static shared",
        o.occupancy * 100.0,
        k.block_size,
        o.blocks_per_sm,
        o.warps_per_sm,
        o.limiter,
        k.shared_bytes
    )?;
    let totals: Vec<String> = k
        .memory_totals
        .iter()
        .map(|(s, t)| {
            format!(
                "{} {}ld/{}st/{}atom",
                s.name(),
                t.loads,
                t.stores,
                t.atomics
            )
        })
        .collect();
    writeln!(
        out,
        "  memory      {}",
        if totals.is_empty() {
            "none".into()
        } else {
            totals.join(", ")
        }
    )?;
    let global: Vec<_> = k.memory.iter().filter(|m| m.is_global()).collect();
    if !global.is_empty() {
        let count = |p: fn(&Pattern) -> bool| global.iter().filter(|m| p(&m.pattern)).count();
        writeln!(
            out,
            "  coalescing  {} global accesses: {} coalesced, {} uniform, {} strided, {} irregular",
            global.len(),
            count(|p| matches!(p, Pattern::Coalesced)),
            count(|p| matches!(p, Pattern::Uniform)),
            count(|p| matches!(p, Pattern::Strided { .. })),
            count(|p| matches!(p, Pattern::Irregular)),
        )?;
    }
    let i = &k.intensity;
    writeln!(
        out,
        "  intensity   {:.2} FLOP/byte (ridge {:.1}): {}",
        i.flops_per_byte, i.ridge, i.class
    )?;
    let mix: Vec<String> = k.mix.iter().map(|(c, n)| format!("{c} {n}")).collect();
    writeln!(out, "  mix         {}", mix.join(", "))?;
    if !k.unknown_opcodes.is_empty() {
        let u: Vec<String> = k
            .unknown_opcodes
            .iter()
            .map(|(o, p)| format!("{o} (line {})", p.line))
            .collect();
        writeln!(out, "  unknown     {}", u.join(", "))?;
    }
    if verbose {
        let by_type = |m: &std::collections::BTreeMap<String, u32>| {
            m.iter()
                .map(|(t, n)| format!("{t} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        writeln!(out, "  declared    {}", by_type(&r.declared))?;
        writeln!(out, "  used        {}", by_type(&r.used))?;
        for m in &k.memory {
            let extra = match (m.sector_efficiency, m.bank_ways) {
                (Some(e), _) => format!(", {:.0}% of sector bytes used", e * 100.0),
                (_, Some(w)) => format!(", {w}-way banks"),
                _ => String::new(),
            };
            writeln!(
                out,
                "    line {:>5}  {:?} {} {} B  {:?}{extra}",
                m.pos.line,
                m.access,
                m.space.name(),
                m.bytes,
                m.pattern
            )?;
        }
    }
    if k.findings.is_empty() {
        writeln!(out, "  findings    none")?;
    } else {
        writeln!(out, "  findings")?;
        for f in &k.findings {
            writeln!(
                out,
                "    {:>8} {}:{} [{}] {}",
                f.severity.name(),
                f.pos.line,
                f.pos.col,
                f.detector,
                f.message
            )?;
        }
    }
    Ok(())
}
