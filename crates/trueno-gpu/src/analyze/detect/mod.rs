//! Bug detectors over one function's control flow, liveness, reaching definitions and
//! value classes. Each finding has a detector id, a severity and a line. Non-strict mode
//! allows patterns that are usually intended (listed per detector); `strict` reports them.

use super::arch::{Arch, Occupancy};
use super::ast::{Function, Pos, Space};
use super::flow::{Flow, ReachingDefs};
use super::isa;
use super::report::{MemAccess, RegisterReport};
use super::values::{Prov, Values};

mod sync;
use sync::{barriers_and_exits, missing_barrier};

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Severity {
    /// Worth knowing.
    Info,
    /// Slow, or likely a mistake.
    Warning,
    /// Wrong results, a hang or undefined behaviour.
    Critical,
}

impl Severity {
    /// `info`, `warning`, `critical`.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

/// One finding.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Finding {
    /// The detector (`missing-barrier`...; [`DETECTORS`] lists them).
    pub detector: &'static str,
    /// How bad.
    pub severity: Severity,
    /// Where.
    pub pos: Pos,
    /// What and why.
    pub message: String,
}

/// Every detector id, with what it looks for.
pub const DETECTORS: [(&str, &str); 12] = [
    (
        "shared-generic-address",
        "shared memory reached through a generic (64-bit) address",
    ),
    (
        "missing-barrier",
        "a shared load may read another thread's store with no barrier between",
    ),
    (
        "exit-before-barrier",
        "exit on a thread-dependent path while other threads reach a barrier",
    ),
    (
        "divergent-barrier",
        "a block barrier inside thread-divergent control flow",
    ),
    (
        "undefined-read",
        "a register read before any definition on some path",
    ),
    (
        "predicate-limit",
        "more predicates live at once than the 7 the hardware has",
    ),
    ("unused-load", "a loaded value that is never used"),
    (
        "dead-code",
        "instructions no path reaches (after an unconditional branch or exit)",
    ),
    (
        "bank-conflict",
        "shared accesses whose lanes collide on banks",
    ),
    ("local-memory", "local memory: stack arrays or spills"),
    (
        "register-pressure",
        "more registers than the target occupancy allows",
    ),
    ("missing-label", "a branch to a label that does not exist"),
];

/// Hardware predicate registers per thread (P0-P6).
pub const HARDWARE_PREDICATES: u32 = 7;

/// What the detectors need.
pub struct Context<'a, 'f> {
    /// The function.
    pub f: &'f Function,
    /// Its flow facts.
    pub flow: &'a Flow<'f>,
    /// Its value classes.
    pub values: &'a Values,
    /// Its memory accesses (in instruction order).
    pub accesses: &'a [MemAccess],
    /// Its register figures.
    pub registers: &'a RegisterReport,
    /// Its occupancy.
    pub occupancy: &'a Occupancy,
    /// The architecture.
    pub arch: &'a Arch,
    /// Threads per block (declared, or the configured default).
    pub block_size: u32,
    /// Occupancy below which register pressure is reported.
    pub min_occupancy: f64,
    /// Report usually-intended patterns too.
    pub strict: bool,
}

/// Runs every detector.
pub fn run(cx: &Context) -> Vec<Finding> {
    // Non-strict trusts guarded writes, as the value analysis does: reuse its result.
    let strict_rd;
    let rd = if cx.strict {
        strict_rd = cx.flow.reaching_definitions(false);
        &strict_rd
    } else {
        cx.values.reaching()
    };
    let mut out = Vec::new();
    shared_generic(cx, &mut out);
    missing_barrier(cx, rd, &mut out);
    barriers_and_exits(cx, &mut out);
    undefined_reads(cx, rd, &mut out);
    liveness_findings(cx, &mut out);
    dead_code(cx, &mut out);
    memory_findings(cx, &mut out);
    for (k, label) in &cx.flow.missing_labels {
        out.push(finding(
            "missing-label",
            Severity::Critical,
            cx.flow.instrs[*k].pos,
            format!("branch to `{label}`, which is not defined in this function"),
        ));
    }
    out.sort_by_key(|f| (f.pos, f.detector));
    merge_repeats(out)
}

/// One finding per detector and message: an unrolled loop repeats the same hazard on
/// every copy, so later lines are listed on the first.
fn merge_repeats(findings: Vec<Finding>) -> Vec<Finding> {
    let mut out: Vec<(Finding, Vec<u32>)> = Vec::new();
    for f in findings {
        match out
            .iter_mut()
            .find(|(g, _)| g.detector == f.detector && g.message == f.message)
        {
            Some((_, lines)) => lines.push(f.pos.line),
            None => out.push((f, Vec::new())),
        }
    }
    out.into_iter()
        .map(|(mut f, lines)| {
            if !lines.is_empty() {
                let shown: Vec<String> = lines.iter().take(8).map(u32::to_string).collect();
                let more = lines.len().saturating_sub(8);
                f.message += &format!(
                    " (also at line{} {}{})",
                    if lines.len() > 1 { "s" } else { "" },
                    shown.join(", "),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                );
            }
            f
        })
        .collect()
}

fn finding(detector: &'static str, severity: Severity, pos: Pos, message: String) -> Finding {
    Finding {
        detector,
        severity,
        pos,
        message,
    }
}

/// Generic `ld`/`st`/`atom` whose address came from shared memory.
fn shared_generic(cx: &Context, out: &mut Vec<Finding>) {
    for (k, ins) in cx.flow.instrs.iter().enumerate() {
        for m in isa::memory(ins) {
            let Some(base) = m.base.filter(|_| m.space == Space::Generic) else {
                continue;
            };
            match cx.values.provenance(cx.flow, k, base) {
                Prov::SharedWindow => out.push(finding(
                    "shared-generic-address",
                    Severity::Critical,
                    ins.pos,
                    format!(
                        "generic `{}` through `{base}`, a shared-window address: as a generic \
                         address it points elsewhere (use `.shared`, or `cvta.shared` first)",
                        ins.opcode
                    ),
                )),
                Prov::SharedGeneric => out.push(finding(
                    "shared-generic-address",
                    Severity::Warning,
                    ins.pos,
                    format!(
                        "shared memory through the 64-bit generic address `{base}`: \
                         `{}.shared` with a 32-bit address avoids the generic-to-shared check",
                        ins.base()
                    ),
                )),
                _ => {}
            }
        }
    }
}

/// Reads that the function entry's "undefined" reaches.
fn undefined_reads(cx: &Context, rd: &ReachingDefs, out: &mut Vec<Finding>) {
    let flow = cx.flow;
    let mut reported = vec![false; flow.regs.len()];
    for (k, uses) in rd.at.iter().enumerate() {
        if !flow.reachable[flow.block_of[k]] {
            continue;
        }
        for (reg, sites) in uses {
            let r = *reg as usize;
            if reported[r] || !sites.contains(&r) {
                continue;
            }
            reported[r] = true;
            let never = sites.len() == 1;
            out.push(finding(
                "undefined-read",
                if never {
                    Severity::Critical
                } else {
                    Severity::Warning
                },
                flow.instrs[k].pos,
                format!(
                    "`{}` is read {} defined",
                    flow.regs.names[r],
                    if never { "but never" } else { "before it is" }
                ) + if never { "" } else { " on some path" },
            ));
        }
    }
}

/// Dead loads and the predicate limit, from liveness.
fn liveness_findings(cx: &Context, out: &mut Vec<Finding>) {
    let flow = cx.flow;
    flow.walk_live(|k, live| {
        let ins = flow.instrs[k];
        if !flow.reachable[flow.block_of[k]] || !matches!(ins.base(), "ld" | "ldu") {
            return;
        }
        if !cx.strict && ins.has("volatile") {
            return;
        }
        let defs = &flow.defs[k];
        let dead = defs.iter().filter(|&&d| !live.contains(d as usize)).count();
        if !defs.is_empty() && (dead == defs.len() || (cx.strict && dead > 0)) {
            out.push(finding(
                "unused-load",
                Severity::Warning,
                ins.pos,
                if dead == defs.len() {
                    format!("the value `{}` loads is never used", ins.opcode)
                } else {
                    format!(
                        "{dead} of the {} values `{}` loads are never used",
                        defs.len(),
                        ins.opcode
                    )
                },
            ));
        }
    });
    let preds = cx.registers.max_live_predicates;
    if preds > HARDWARE_PREDICATES {
        out.push(finding(
            "predicate-limit",
            Severity::Warning,
            cx.f.pos,
            format!(
                "{preds} predicates live at once; the hardware has {HARDWARE_PREDICATES}, so \
                 ptxas keeps the rest in general registers"
            ),
        ));
    }
}

/// Unreachable blocks. Non-strict: a block holding only `ret`/`exit`/`bra` (an epilogue
/// compilers leave after a loop) is allowed.
fn dead_code(cx: &Context, out: &mut Vec<Finding>) {
    let flow = cx.flow;
    for (b, bl) in flow.blocks.iter().enumerate() {
        if flow.reachable[b] {
            continue;
        }
        let only_exits = (bl.start..bl.end)
            .all(|k| matches!(flow.instrs[k].base(), "ret" | "exit" | "bra" | "trap"));
        if only_exits && !cx.strict {
            continue;
        }
        let after = bl.start.checked_sub(1).map(|k| flow.instrs[k]);
        out.push(finding(
            "dead-code",
            Severity::Warning,
            flow.instrs[bl.start].pos,
            format!(
                "{} instruction(s) no path reaches{}",
                bl.end - bl.start,
                after.map_or(String::new(), |i| format!(
                    " (after `{}` at line {})",
                    i.opcode, i.pos.line
                ))
            ),
        ));
    }
}

/// Bank conflicts, local memory and register pressure.
fn memory_findings(cx: &Context, out: &mut Vec<Finding>) {
    for a in cx.accesses {
        if let (Some(ways), super::report::Pattern::Strided { bytes_per_lane }) =
            (a.bank_ways, a.pattern)
            && ways > 1
        {
            out.push(finding(
                "bank-conflict",
                Severity::Warning,
                a.pos,
                format!(
                    "{ways}-way shared-memory bank conflict: lanes {bytes_per_lane} bytes apart \
                     with {}-byte accesses (pad the row or swizzle)",
                    a.bytes
                ),
            ));
        }
    }
    let local_vars: u64 =
        cx.f.vars
            .iter()
            .filter(|v| v.space == Space::Local)
            .map(|v| v.bytes)
            .sum();
    let local_ops = cx
        .accesses
        .iter()
        .filter(|a| a.space == Space::Local)
        .count();
    if local_vars > 0 || local_ops > 0 {
        let at = cx
            .accesses
            .iter()
            .find(|a| a.space == Space::Local)
            .map_or(cx.f.pos, |a| a.pos);
        out.push(finding(
            "local-memory",
            Severity::Warning,
            at,
            format!(
                "local memory: {local_vars} bytes declared, {local_ops} access(es); it lives in \
                 device memory behind L1 (stack arrays or spills)"
            ),
        ));
    }
    let r = cx.registers;
    let target =
        cx.f.min_blocks_per_sm
            .map(|b| {
                let warps = cx.block_size.div_ceil(32) as f64;
                (b as f64 * warps / cx.arch.max_warps as f64).min(1.0)
            })
            .unwrap_or(cx.min_occupancy);
    let o = cx.occupancy;
    let over_limit = r.max_live + super::report::REGISTER_OVERHEAD > cx.arch.max_regs_per_thread;
    if over_limit || (o.limiter == "registers" && o.occupancy < target) {
        out.push(finding(
            "register-pressure",
            Severity::Warning,
            r.max_live_at,
            if over_limit {
                format!(
                    "{} register slots live here: past the {} per thread {} allows, ptxas will spill",
                    r.max_live, cx.arch.max_regs_per_thread, cx.arch.name
                )
            } else {
                format!(
                    "about {} registers per thread hold occupancy to {:.0}% on {} (target {:.0}%); \
                     {} register slots are live here",
                    r.estimated,
                    o.occupancy * 100.0,
                    cx.arch.name,
                    target * 100.0,
                    r.max_live
                )
            },
        ));
    }
}
