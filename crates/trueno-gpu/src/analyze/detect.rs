//! Bug detectors over one function's control flow, liveness, reaching definitions and
//! value classes. Each finding has a detector id, a severity and a line. Non-strict mode
//! allows patterns that are usually intended (listed per detector); `strict` reports them.

use super::arch::{Arch, Occupancy};
use super::ast::{Function, Pos, Space};
use super::flow::{Flow, ReachingDefs};
use super::isa::{self, Access};
use super::report::{MemAccess, RegisterReport};
use super::values::{Prov, Val, Values};
use crate::ptx::cfg::BitSet;

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

fn is_shared_store_or_load(cx: &Context, k: usize) -> Option<(Access, Option<String>, i64)> {
    let ins = cx.flow.instrs[k];
    isa::memory(ins).into_iter().find_map(|m| {
        let shared = m.space == Space::Shared
            || (m.space == Space::Generic
                && m.base.is_some_and(|b| {
                    matches!(
                        cx.values.provenance(cx.flow, k, b),
                        Prov::SharedGeneric | Prov::SharedWindow
                    )
                }));
        (shared && m.access != Access::Atomic)
            .then(|| (m.access, m.base.map(String::from), m.offset))
    })
}

/// Whether instruction `k` orders shared memory between the block's threads.
fn is_sync(cx: &Context, k: usize) -> bool {
    let ins = cx.flow.instrs[k];
    isa::is_block_barrier(ins)
        || (!cx.strict
            && ((matches!(ins.base(), "bar") && ins.has("warp"))
                || (ins.base() == "mbarrier" && (ins.has("try_wait") || ins.has("test_wait")))))
}

/// A shared load reachable from a shared store with no barrier on the way, unless both use
/// the same address of the same thread (same register, same definitions, same offset).
fn missing_barrier(cx: &Context, rd: &ReachingDefs, out: &mut Vec<Finding>) {
    let flow = cx.flow;
    let n = flow.instrs.len();
    // Classified once: each instruction's shared access, store slot, and whether it syncs.
    let shared: Vec<Option<(Access, Option<String>, i64)>> =
        (0..n).map(|k| is_shared_store_or_load(cx, k)).collect();
    let mut slot = vec![usize::MAX; n];
    let mut stores: Vec<(usize, Option<String>, i64)> = Vec::new();
    for (k, a) in shared.iter().enumerate() {
        if let Some((Access::Store, base, off)) = a
            && (cx.strict || !flow.instrs[k].has("volatile"))
        {
            slot[k] = stores.len();
            stores.push((k, base.clone(), *off));
        }
    }
    if stores.is_empty() {
        return;
    }
    let sync: Vec<bool> = (0..n).map(|k| is_sync(cx, k)).collect();
    let nb = flow.blocks.len();
    let ns = stores.len();
    let transfer = |k: usize, pending: &mut BitSet| {
        if sync[k] {
            *pending = BitSet::new(ns);
        } else if slot[k] != usize::MAX {
            pending.insert(slot[k]);
        }
    };
    let mut out_sets = vec![BitSet::new(ns); nb];
    let rpo = flow.rpo();
    let mut changed = true;
    while changed {
        changed = false;
        for &b in &rpo {
            let mut set = BitSet::new(ns);
            for &p in &flow.blocks[b].preds {
                set.union_with(&out_sets[p]);
            }
            for k in flow.blocks[b].start..flow.blocks[b].end {
                transfer(k, &mut set);
            }
            if set != out_sets[b] {
                out_sets[b] = set;
                changed = true;
            }
        }
    }
    for &b in &rpo {
        let mut set = BitSet::new(ns);
        for &p in &flow.blocks[b].preds {
            set.union_with(&out_sets[p]);
        }
        let block = flow.blocks[b].start..flow.blocks[b].end;
        for (k, access) in shared.iter().enumerate().take(block.end).skip(block.start) {
            if let Some((Access::Load, lbase, loff)) = access {
                let ins = flow.instrs[k];
                let skip_volatile = !cx.strict && ins.has("volatile");
                let other = set.iter().map(|s| &stores[s]).find(|(sk, sbase, soff)| {
                    !skip_volatile && !same_address(cx, rd, (*sk, sbase, *soff), (k, lbase, *loff))
                });
                if let Some((sk, _, _)) = other {
                    out.push(finding(
                        "missing-barrier",
                        Severity::Critical,
                        ins.pos,
                        format!(
                            "shared load may read what another thread stored at line {} with \
                             no barrier (`bar.sync`) between them",
                            flow.instrs[*sk].pos.line
                        ),
                    ));
                }
            }
            transfer(k, &mut set);
        }
    }
}

/// Whether two accesses use the same address in the same thread, for a thread-private
/// address (not one every lane shares, unless non-strict).
fn same_address(
    cx: &Context,
    rd: &ReachingDefs,
    (sk, sbase, soff): (usize, &Option<String>, i64),
    (lk, lbase, loff): (usize, &Option<String>, i64),
) -> bool {
    if soff != loff || sbase != lbase {
        return false;
    }
    let Some(name) = sbase else {
        return !cx.strict; // the same symbol: one address for every thread
    };
    let Some(reg) = cx.flow.regs.get(name) else {
        return !cx.strict;
    };
    let private = matches!(cx.values.name(cx.flow, sk, name), Val::Affine(_));
    rd.reaching(sk, reg) == rd.reaching(lk, reg) && (private || !cx.strict)
}

/// Barriers under divergent branches, and exits on thread-dependent paths that other
/// threads answer with a barrier.
fn barriers_and_exits(cx: &Context, out: &mut Vec<Finding>) {
    let flow = cx.flow;
    let barriers: Vec<usize> = (0..flow.instrs.len())
        .filter(|&k| isa::is_block_barrier(flow.instrs[k]) && flow.reachable[flow.block_of[k]])
        .collect();
    if barriers.is_empty() {
        return;
    }
    let varies = |k: usize| {
        flow.instrs[k]
            .guard
            .as_ref()
            .is_some_and(|g| cx.values.name(flow, k, &g.reg).varies())
    };
    let mut reported_exit = vec![false; flow.instrs.len()];
    for br in &cx.values.branches {
        let inside: Vec<usize> = barriers
            .iter()
            .copied()
            .filter(|&k| br.region.contains(&flow.block_of[k]))
            .filter(|&k| {
                // `bar.sync id, count` under a whole-warp branch: a named barrier for a
                // subset of warps (warp specialisation), allowed unless strict.
                let counted = flow.instrs[k].operands.len() >= 2;
                cx.strict || !(counted && br.how == Val::WarpUniform)
            })
            .collect();
        let Some(&first) = inside.first() else {
            continue;
        };
        let line = flow.instrs[br.instr].pos.line;
        // Threads that leave on a barrier-free path before the paths meet (or where they
        // meet at a bare `ret`) never arrive: an early exit, not a skipped barrier.
        let meet = flow.ipdom[flow.block_of[br.instr]];
        if let Some(e) = exit_without_barrier(flow, flow.block_of[br.instr], br.instr + 1, meet) {
            if !std::mem::replace(&mut reported_exit[e], true) {
                out.push(exit_finding(flow, e, line, first));
            }
            continue;
        }
        for k in inside {
            out.push(finding(
                "divergent-barrier",
                Severity::Critical,
                flow.instrs[k].pos,
                format!(
                    "barrier inside control flow that depends on the thread (branch at line                      {line}): threads that skip it leave the others waiting"
                ),
            ));
        }
    }
    for (k, &ins) in flow.instrs.iter().enumerate() {
        if !varies(k) || !flow.reachable[flow.block_of[k]] {
            continue;
        }
        if isa::is_block_barrier(ins) {
            out.push(finding(
                "divergent-barrier",
                Severity::Critical,
                ins.pos,
                "barrier under a thread-dependent predicate".to_string(),
            ));
        } else if matches!(ins.base(), "ret" | "exit")
            && !reported_exit[k]
            && let Some(bar) = barrier_reachable(flow, flow.block_of[k], &barriers)
        {
            out.push(exit_finding(flow, k, ins.pos.line, bar));
        }
    }
}

fn exit_finding(flow: &Flow, exit: usize, branch_line: u32, barrier: usize) -> Finding {
    finding(
        "exit-before-barrier",
        Severity::Critical,
        flow.instrs[exit].pos,
        format!(
            "`{}` on a thread-dependent path (line {branch_line}) while other threads go on to \
             the barrier at line {}",
            flow.instrs[exit].opcode, flow.instrs[barrier].pos.line
        ),
    )
}

/// An exit (`ret`/`exit`) reachable from instruction `from` (in `block`) on some path that
/// meets no block barrier first, before the block `meet` (or as `meet`'s first instruction).
fn exit_without_barrier(
    flow: &Flow,
    block: usize,
    from: usize,
    meet: Option<usize>,
) -> Option<usize> {
    let mut seen = vec![false; flow.blocks.len()];
    let mut stack = flow.blocks[block].succs.clone();
    let scan = |start: usize, end: usize| -> Result<Option<usize>, ()> {
        for k in start..end {
            let ins = flow.instrs[k];
            if isa::is_block_barrier(ins) {
                return Err(()); // this path arrives
            }
            if matches!(ins.base(), "ret" | "exit") {
                return Ok(Some(k));
            }
        }
        Ok(None)
    };
    // The rest of the branch's own block first (a predicated exit after the branch).
    let end = flow.blocks[block].end;
    if let Ok(Some(k)) = scan(from.min(end), end) {
        return Some(k);
    }
    while let Some(b) = stack.pop() {
        if std::mem::replace(&mut seen[b], true) {
            continue;
        }
        if Some(b) == meet {
            let first = flow.blocks[b].start;
            if matches!(flow.instrs[first].base(), "ret" | "exit") {
                return Some(first);
            }
            continue;
        }
        match scan(flow.blocks[b].start, flow.blocks[b].end) {
            Ok(Some(k)) => return Some(k),
            Ok(None) => stack.extend(flow.blocks[b].succs.iter().copied()),
            Err(()) => {}
        }
    }
    None
}

/// The first barrier reachable from the start of `block` (itself included).
fn barrier_reachable(flow: &Flow, block: usize, barriers: &[usize]) -> Option<usize> {
    let mut seen = vec![false; flow.blocks.len()];
    let mut stack = vec![block];
    while let Some(b) = stack.pop() {
        if std::mem::replace(&mut seen[b], true) {
            continue;
        }
        let bl = &flow.blocks[b];
        if let Some(&k) = barriers.iter().find(|&&k| (bl.start..bl.end).contains(&k)) {
            return Some(k);
        }
        stack.extend(bl.succs.iter().copied());
    }
    None
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
                let warps = cx.f.max_threads.unwrap_or(256).div_ceil(32);
                (b * warps) as f64 / cx.arch.max_warps as f64
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
