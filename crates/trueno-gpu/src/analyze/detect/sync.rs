//! The synchronisation detectors: shared stores read by other threads without a barrier,
//! barriers that divergent threads skip, and exits that leave a barrier waiting.

use super::{Context, Finding, Severity, finding};
use crate::analyze::ast::Space;
use crate::analyze::flow::{Flow, ReachingDefs};
use crate::analyze::isa::{self, Access};
use crate::analyze::values::{Prov, Val};
use crate::ptx::cfg::BitSet;

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
pub(super) fn missing_barrier(cx: &Context, rd: &ReachingDefs, out: &mut Vec<Finding>) {
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
    // A `cp.async` store lands when its thread waits for it (`cp.async.wait_group` /
    // `wait_all`), not where it is issued: until then it sits in the second half of the
    // set (bits ns..2ns), which a barrier does not clear and loads do not look at; the
    // wait moves it into the first half, the completed stores a barrier must separate
    // from other threads' loads.
    let is_async = |k: usize| {
        let ins = flow.instrs[k];
        ins.base() == "cp" && ins.has("async")
    };
    let async_store: Vec<bool> = (0..n)
        .map(|k| slot[k] != usize::MAX && is_async(k))
        .collect();
    let async_wait: Vec<bool> = (0..n)
        .map(|k| {
            is_async(k) && (flow.instrs[k].has("wait_group") || flow.instrs[k].has("wait_all"))
        })
        .collect();
    let transfer = |k: usize, pending: &mut BitSet| {
        if sync[k] {
            for s in 0..ns {
                pending.remove(s);
            }
        } else if async_wait[k] {
            let landed: Vec<usize> = pending.iter().filter(|&s| s >= ns).collect();
            for s in landed {
                pending.remove(s);
                pending.insert(s - ns);
            }
        } else if async_store[k] {
            pending.insert(ns + slot[k]);
        } else if slot[k] != usize::MAX {
            pending.insert(slot[k]);
        }
    };
    let mut out_sets = vec![BitSet::new(2 * ns); nb];
    let rpo = flow.rpo();
    let mut changed = true;
    while changed {
        changed = false;
        for &b in &rpo {
            let mut set = BitSet::new(2 * ns);
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
        let mut set = BitSet::new(2 * ns);
        for &p in &flow.blocks[b].preds {
            set.union_with(&out_sets[p]);
        }
        let block = flow.blocks[b].start..flow.blocks[b].end;
        for (k, access) in shared.iter().enumerate().take(block.end).skip(block.start) {
            if let Some((Access::Load, lbase, loff)) = access {
                let ins = flow.instrs[k];
                let skip_volatile = !cx.strict && ins.has("volatile");
                let other =
                    set.iter()
                        .filter(|&s| s < ns)
                        .map(|s| &stores[s])
                        .find(|(sk, sbase, soff)| {
                            !skip_volatile
                                && !same_address(cx, rd, (*sk, sbase, *soff), (k, lbase, *loff))
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
pub(super) fn barriers_and_exits(cx: &Context, out: &mut Vec<Finding>) {
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
            .filter(|&k| br.in_region[flow.block_of[k]])
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
