//! A PTX analyzer: parses PTX text (trueno's, nvcc's, Triton's) into a control-flow graph
//! per kernel and reports what a kernel author needs before running it: registers and the
//! most live at once, occupancy, instruction mix, memory accesses with coalescing and bank
//! conflicts, arithmetic intensity against a roofline, and bugs that hang or corrupt
//! (missing barriers, barriers under divergence, exits before barriers, undefined reads...).
//!
//! Lane patterns (coalescing, bank conflicts) assume `%tid.x` runs along the warp, that is
//! `blockDim.x` is a multiple of 32; `%tid.y`/`%tid.z` are treated as varying in no known
//! way, unless `.reqntid` fixes a width that is a multiple of 32 (then they are uniform
//! across each warp). Figures are static: loop bodies are weighted, not executed.
//!
//! ```
//! use trueno_gpu::analyze::{Config, Pattern, Space, analyze};
//!
//! let ptx = ".version 8.0\n.target sm_90\n.address_size 64\n\
//!     .visible .entry k(.param .u64 p) {\n\
//!       .reg .b32 %r<2>; .reg .b64 %rd<3>; .reg .f32 %f<2>;\n\
//!       ld.param.u64 %rd0, [p];\n\
//!       mov.u32 %r0, %tid.x;\n\
//!       mul.wide.u32 %rd1, %r0, 4;\n\
//!       add.u64 %rd2, %rd0, %rd1;\n\
//!       ld.global.f32 %f0, [%rd2];\n\
//!       add.f32 %f1, %f0, %f0;\n\
//!       st.global.f32 [%rd2], %f1;\n\
//!       ret;\n\
//!     }";
//! let a = analyze(ptx, &Config::default())?;
//! let k = &a.kernels[0];
//! assert_eq!(k.name, "k");
//! assert!(k.findings.is_empty());
//! // Lane i reads element i: one 128-byte line per warp.
//! let load = k.memory.iter().find(|m| m.space == Space::Global).unwrap();
//! assert_eq!(load.pattern, Pattern::Coalesced);
//! # Ok::<(), trueno_gpu::analyze::ParseError>(())
//! ```

mod arch;
pub mod ast;
mod detect;
pub mod flow;
pub mod isa;
mod lattice;
mod lex;
mod parse;
pub mod ptxas;
mod reaching;
mod regs;
pub mod report;
pub mod values;

use std::collections::BTreeMap;

pub use arch::{Arch, Occupancy};
pub use ast::{Pos, Space};
pub use detect::{DETECTORS, Finding, HARDWARE_PREDICATES, Severity};
pub use parse::{ParseError, parse};
pub use report::{Device, Intensity, MemAccess, Pattern, RegisterReport, SpaceTotals};

/// What to analyze for.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Occupancy limits of this architecture.
    pub arch: Arch,
    /// Threads per block where a kernel does not declare `.maxntid`/`.reqntid`.
    pub block_size: u32,
    /// Occupancy below which register pressure is reported (unless `.minnctapersm` says).
    pub min_occupancy: f64,
    /// The roofline's device.
    pub device: Device,
    /// Report patterns that are usually intended too.
    pub strict: bool,
}

impl Default for Config {
    /// sm_90 (H100) with 256 threads per block, a 25% occupancy floor, non-strict.
    fn default() -> Self {
        Config {
            arch: Arch::parse("sm_90").expect("sm_90 is in the table"),
            block_size: 256,
            min_occupancy: 0.25,
            device: Device::default(),
            strict: false,
        }
    }
}

/// The analysis of one `.entry` or `.func`.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct KernelReport {
    /// Its name.
    pub name: String,
    /// `.entry` (a kernel) or `.func`.
    pub is_entry: bool,
    /// Where it starts and the line of its closing brace.
    pub pos: Pos,
    /// Its last line.
    pub end_line: u32,
    /// Instructions.
    pub instructions: usize,
    /// Basic blocks.
    pub blocks: usize,
    /// Natural loops' deepest nesting.
    pub max_loop_depth: u32,
    /// Register figures.
    pub registers: RegisterReport,
    /// Static shared memory per block (bytes; module-scope `.shared` included, dynamic
    /// shared not).
    pub shared_bytes: u64,
    /// Threads per block assumed.
    pub block_size: u32,
    /// Occupancy with the estimated registers.
    pub occupancy: Occupancy,
    /// Instruction classes with their counts, most frequent first.
    pub mix: Vec<(&'static str, u32)>,
    /// Every memory access.
    pub memory: Vec<MemAccess>,
    /// Per-space totals.
    pub memory_totals: BTreeMap<Space, SpaceTotals>,
    /// Arithmetic intensity and roofline class.
    pub intensity: Intensity,
    /// Bugs and hazards, in line order.
    pub findings: Vec<Finding>,
    /// Opcodes the analyzer does not know, with where each first appears.
    pub unknown_opcodes: Vec<(String, Pos)>,
}

impl KernelReport {
    /// The worst severity among the findings.
    pub fn worst(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).max()
    }
}

/// A whole module's analysis.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Analysis {
    /// `.version`.
    pub version: Option<String>,
    /// `.target`.
    pub target: Vec<String>,
    /// `.address_size`.
    pub address_size: u32,
    /// The architecture the figures are for.
    pub arch: &'static str,
    /// Whether strict mode was on.
    pub strict: bool,
    /// One report per function with a body.
    pub kernels: Vec<KernelReport>,
}

/// Parses and analyzes PTX text. Only a malformed file is an error; unknown opcodes and
/// directives are reported in the result.
pub fn analyze(src: &str, config: &Config) -> Result<Analysis, ParseError> {
    let module = parse(src)?;
    let module_shared: u64 = module
        .globals
        .iter()
        .filter(|g| g.space == Space::Shared)
        .map(|g| g.bytes)
        .sum();
    let kernels = module
        .functions
        .iter()
        .map(|f| analyze_function(f, &module, module_shared, config))
        .collect();
    Ok(Analysis {
        version: module.version.clone(),
        target: module.target.clone(),
        address_size: module.address_size,
        arch: config.arch.name,
        strict: config.strict,
        kernels,
    })
}

fn analyze_function(
    f: &ast::Function,
    module: &ast::Module,
    module_shared: u64,
    config: &Config,
) -> KernelReport {
    let flow = flow::Flow::new(f);
    let values = values::Values::new(f, &flow, &module.globals);
    let registers = report::registers(f, &flow, &config.arch);
    let shared_bytes = module_shared
        + f.vars
            .iter()
            .filter(|v| v.space == Space::Shared)
            .map(|v| v.bytes)
            .sum::<u64>();
    let block_size = f.max_threads.unwrap_or(config.block_size);
    let occupancy = config
        .arch
        .occupancy(registers.estimated, block_size, shared_bytes);
    let memory = report::accesses(&flow, &values);
    let findings = detect::run(&detect::Context {
        f,
        flow: &flow,
        values: &values,
        accesses: &memory,
        registers: &registers,
        occupancy: &occupancy,
        arch: &config.arch,
        block_size,
        min_occupancy: config.min_occupancy,
        strict: config.strict,
    });
    let mut unknown_opcodes: Vec<(String, Pos)> = Vec::new();
    for i in &flow.instrs {
        if !isa::is_known(i.base()) && !unknown_opcodes.iter().any(|(o, _)| o == i.base()) {
            unknown_opcodes.push((i.base().to_string(), i.pos));
        }
    }
    KernelReport {
        name: f.name.clone(),
        is_entry: f.is_entry,
        pos: f.pos,
        end_line: f.end_line,
        instructions: flow.instrs.len(),
        blocks: flow.blocks.len(),
        max_loop_depth: flow.loop_depth.iter().copied().max().unwrap_or(0),
        shared_bytes,
        block_size,
        occupancy,
        mix: report::mix(&flow),
        memory_totals: report::totals(&memory),
        intensity: report::intensity(&flow, &memory, &config.device),
        memory,
        findings,
        unknown_opcodes,
        registers,
    }
}
