//! Runs the PTX analyzer over every kernel trueno ships, as `trueno ptx analyze` would over
//! a file: estimated registers, occupancy on H100, roofline class, coalescing and findings.
//!
//! ```sh
//! cargo run -p trueno-gpu --example analyze_kernels
//! ```

use trueno_gpu::analyze::{Config, Pattern, analyze};
use trueno_gpu::kernels::all_kernels;
use trueno_gpu::ptx::Target;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!(
        "{:<30} {:>5} {:>6} {:>9} {:>15} {:>8}",
        "kernel", "regs", "occ", "coalesced", "roofline", "findings"
    );
    for k in all_kernels() {
        // Hopper's own target for the kernels written only for it (wgmma), else sm_90.
        let target = match k.targets() {
            [only] => *only,
            _ => Target::Sm90,
        };
        let ptx = k.emit_ptx(target)?;
        let analysis = analyze(&ptx, &Config::default())?;
        for r in &analysis.kernels {
            let global: Vec<_> = r.memory.iter().filter(|m| m.is_global()).collect();
            let coalesced = global
                .iter()
                .filter(|m| m.pattern == Pattern::Coalesced)
                .count();
            println!(
                "{:<30} {:>5} {:>5.0}% {:>4}/{:<4} {:>15} {:>8}",
                r.name,
                r.registers.estimated,
                r.occupancy.occupancy * 100.0,
                coalesced,
                global.len(),
                r.intensity.class,
                r.findings.len()
            );
            for f in &r.findings {
                println!(
                    "    {} {} [{}] {}",
                    f.severity.name(),
                    f.pos.line,
                    f.detector,
                    f.message
                );
            }
        }
    }
    Ok(())
}
