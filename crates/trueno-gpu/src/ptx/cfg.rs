//! Control flow and liveness at instruction granularity: successors from labels and
//! branches, and backward dataflow over register bitsets. Shared by validation, the
//! optimiser and the register allocator.

use std::collections::HashMap;

use super::ir::{Instr, Label, Op};
use super::types::VReg;

/// A fixed-size bitset over register ids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BitSet(Vec<u64>);

impl BitSet {
    /// Empty set able to hold ids below `n`.
    pub fn new(n: usize) -> Self {
        BitSet(vec![0; n.div_ceil(64)])
    }
    /// Adds `i`.
    pub fn insert(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    /// Removes `i`.
    pub fn remove(&mut self, i: usize) {
        self.0[i / 64] &= !(1 << (i % 64));
    }
    /// Membership.
    pub fn contains(&self, i: usize) -> bool {
        self.0[i / 64] >> (i % 64) & 1 == 1
    }
    /// `self |= other`; whether anything changed.
    pub fn union_with(&mut self, other: &BitSet) -> bool {
        let mut changed = false;
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            let n = *a | b;
            changed |= n != *a;
            *a = n;
        }
        changed
    }
    /// `self &= other`.
    pub fn intersect_with(&mut self, other: &BitSet) {
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a &= b;
        }
    }
    /// Members in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().enumerate().flat_map(|(w, &bits)| {
            let mut rest = bits;
            std::iter::from_fn(move || {
                if rest == 0 {
                    return None;
                }
                let b = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                Some(w * 64 + b)
            })
        })
    }
    /// `self &= !other`.
    pub fn subtract(&mut self, other: &BitSet) {
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a &= !b;
        }
    }
    /// Members also in `mask`.
    pub fn count_and(&self, mask: &BitSet) -> u32 {
        self.0
            .iter()
            .zip(&mask.0)
            .map(|(a, b)| (a & b).count_ones())
            .sum()
    }
    /// No members.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|&w| w == 0)
    }
}

/// Where each label is placed (index of its `Place` instruction).
pub fn label_positions(body: &[Instr]) -> HashMap<Label, usize> {
    body.iter()
        .enumerate()
        .filter(|(_, i)| i.op == Op::Place)
        .filter_map(|(k, i)| i.label().map(|l| (l, k)))
        .collect()
}

/// Successors of every instruction. Unplaced branch targets are ignored here (validation
/// reports them).
pub fn successors(body: &[Instr]) -> Vec<Vec<usize>> {
    let labels = label_positions(body);
    let n = body.len();
    body.iter()
        .enumerate()
        .map(|(k, i)| {
            let next = (k + 1 < n).then_some(k + 1);
            match i.op {
                Op::Bra { .. } => {
                    let target = i.label().and_then(|l| labels.get(&l).copied());
                    let mut s: Vec<usize> = target.into_iter().collect();
                    if i.guard.is_some() {
                        s.extend(next);
                    }
                    s
                }
                Op::Ret if i.guard.is_none() => Vec::new(),
                _ => next.into_iter().collect(),
            }
        })
        .collect()
}

/// Registers written by `i` that overwrite the old value on every path through it
/// (a guarded write may leave the old value in place).
pub fn kills(i: &Instr) -> &[VReg] {
    if i.guard.is_some() { &[] } else { &i.dsts }
}

/// Live-out register sets for each instruction.
pub fn live_out(body: &[Instr], nregs: usize) -> Vec<BitSet> {
    let succ = successors(body);
    let mut live_in = vec![BitSet::new(nregs); body.len()];
    let mut live_out = vec![BitSet::new(nregs); body.len()];
    let mut changed = true;
    while changed {
        changed = false;
        for k in (0..body.len()).rev() {
            let mut out = BitSet::new(nregs);
            for &s in &succ[k] {
                out.union_with(&live_in[s]);
            }
            let mut inn = out.clone();
            for d in kills(&body[k]) {
                inn.remove(d.id as usize);
            }
            for u in body[k].uses() {
                inn.insert(u.id as usize);
            }
            changed |= live_in[k].union_with(&inn);
            live_out[k] = out;
        }
    }
    live_out
}
