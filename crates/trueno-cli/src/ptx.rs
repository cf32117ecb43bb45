//! `trueno ptx`: the kernels trueno-gpu writes, and their PTX.

use std::io::Write;

use trueno_gpu::kernels::{Kernel, all_kernels, find};
use trueno_gpu::ptx::{self, Target};

/// One line per kernel configuration: name, family, parameters, IR size and registers.
pub fn list(json: bool) -> Result<(), Box<dyn std::error::Error>> {
    let mut rows = Vec::new();
    for k in all_kernels() {
        let c = ptx::compile(k.build())?;
        let params: Vec<String> =
            c.ir.params
                .iter()
                .map(|p| match p.pointee {
                    _ if p.tensor_map => format!("{}: tensor map", p.name),
                    Some(e) => format!("{}: *{e}", p.name),
                    None => format!("{}: {}", p.name, p.ty),
                })
                .collect();
        rows.push(serde_json::json!({
            "name": k.name(),
            "family": k.family().name(),
            "params": params,
            "instructions": c.ir.body.len(),
            "virtual_registers": c.stats.virtual_regs,
            "ptx_registers": c.stats.allocated_regs,
            "fused_fma": c.stats.fused_fma,
        }));
    }
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(());
    }
    writeln!(
        out,
        "{:<30} {:<16} {:>6} {:>9}  params",
        "kernel", "module", "instrs", "ptx regs"
    )?;
    for r in &rows {
        let params: Vec<&str> = r["params"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p.as_str())
            .collect();
        writeln!(
            out,
            "{:<30} {:<16} {:>6} {:>9}  ({})",
            r["name"].as_str().unwrap_or(""),
            r["family"].as_str().unwrap_or(""),
            r["instructions"].as_u64().unwrap_or(0),
            r["ptx_registers"].as_u64().unwrap_or(0),
            params.join(", ")
        )?;
    }
    Ok(())
}

/// Prints one kernel's PTX for `target`.
pub fn emit(name: &str, target: &str) -> Result<(), Box<dyn std::error::Error>> {
    let target = Target::parse(target)
        .ok_or_else(|| format!("unknown target {target} (sm_80, sm_90 or sm_90a)"))?;
    let kernel: Box<dyn Kernel> =
        find(name).map_err(|e| format!("{e}; `trueno ptx list` names them all"))?;
    write!(std::io::stdout().lock(), "{}", kernel.emit_ptx(target)?)?;
    Ok(())
}
