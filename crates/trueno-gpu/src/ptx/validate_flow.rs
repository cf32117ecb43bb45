//! The validator's checks along the instruction stream and its control flow, apart
//! from the per-instruction type checks: registers read before every path writes them,
//! barriers some threads can skip, and memory written before a kernel waits for the grid
//! before it.

use super::super::cfg::{self, BitSet};
use super::super::ir::{Instr, KernelIr, Op};
use super::super::types::{Space, VReg};

/// Reads of registers that are not written on every path from the entry.
pub(super) fn use_before_def(k: &KernelIr) -> Vec<(usize, VReg)> {
    let n = k.next_reg as usize;
    let succ = cfg::successors(&k.body);
    let mut preds = vec![Vec::new(); k.body.len()];
    for (i, s) in succ.iter().enumerate() {
        for &t in s {
            preds[t].push(i);
        }
    }
    // Forward must-analysis: defined on entry to i = intersection over predecessors.
    let full = {
        let mut b = BitSet::new(n);
        (0..n).for_each(|r| b.insert(r));
        b
    };
    let mut def_out = vec![full; k.body.len()];
    let mut changed = true;
    while changed {
        changed = false;
        for i in 0..k.body.len() {
            let inn = def_in(i, &preds, &def_out, n);
            let mut out = inn;
            k.body[i]
                .dsts
                .iter()
                .for_each(|d| out.insert(d.id as usize));
            if out != def_out[i] {
                def_out[i] = out;
                changed = true;
            }
        }
    }
    let mut bad = Vec::new();
    for i in 0..k.body.len() {
        let inn = def_in(i, &preds, &def_out, n);
        if let Some(r) = k.body[i]
            .uses()
            .into_iter()
            .find(|r| !inn.contains(r.id as usize))
        {
            bad.push((i, r));
        }
    }
    bad
}

fn def_in(i: usize, preds: &[Vec<usize>], def_out: &[BitSet], n: usize) -> BitSet {
    if i == 0 {
        return BitSet::new(n);
    }
    let mut it = preds[i].iter();
    let Some(&first) = it.next() else {
        // Unreachable: nothing to report.
        let mut all = BitSet::new(n);
        (0..n).for_each(|r| all.insert(r));
        return all;
    };
    let mut inn = def_out[first].clone();
    it.for_each(|&p| inn.intersect_with(&def_out[p]));
    inn
}

/// Barrier safety: at every point where threads can part ways (a non-uniform conditional
/// branch, a guarded exit), both sides must reach the same barriers; and no barrier may be
/// guarded. Otherwise some threads wait at a `bar.sync` others never reach.
pub(super) fn barrier_faults(body: &[Instr]) -> Vec<(usize, String)> {
    let bars: Vec<usize> = (0..body.len())
        .filter(|&i| body[i].op == Op::BarSync)
        .collect();
    if bars.is_empty() {
        return Vec::new();
    }
    let succ = cfg::successors(body);
    // reach[i]: barriers reachable from i (i included).
    let mut reach = vec![BitSet::new(bars.len()); body.len()];
    let mut changed = true;
    while changed {
        changed = false;
        for i in (0..body.len()).rev() {
            let mut r = BitSet::new(bars.len());
            if let Some(b) = bars.iter().position(|&b| b == i) {
                r.insert(b);
            }
            for &s in &succ[i] {
                r.union_with(&reach[s]);
            }
            changed |= reach[i].union_with(&r);
        }
    }
    let empty = BitSet::new(bars.len());
    let mut faults = Vec::new();
    for (i, ins) in body.iter().enumerate() {
        let after = |k: usize| reach.get(k).unwrap_or(&empty);
        match (&ins.op, ins.guard) {
            (Op::BarSync, Some(_)) => faults.push((i, "barrier under a predicate".into())),
            (Op::Ret, Some(_)) if !after(i + 1).is_empty() => faults.push((
                i,
                "conditional exit before a barrier the remaining threads wait at".into(),
            )),
            (Op::Bra { uni: false }, Some(_)) => {
                let s = &succ[i];
                if s.len() == 2 && after(s[0]) != after(s[1]) {
                    faults.push((
                        i,
                        "divergent branch: its two sides reach different barriers".into(),
                    ));
                }
            }
            _ => {}
        }
    }
    faults
}

/// The first global write (store, atomic) placed before a kernel's first
/// [`Op::GridDepWait`], in program order, if the kernel waits at all. Loads before the
/// wait are the kernel's to justify (memory no earlier kernel writes).
pub(super) fn write_before_grid_wait(body: &[Instr]) -> Option<usize> {
    let wait = body.iter().position(|i| i.op == Op::GridDepWait)?;
    body[..wait]
        .iter()
        .position(|i| matches!(i.op, Op::St(Space::Global) | Op::Atom(Space::Global, _)))
}
