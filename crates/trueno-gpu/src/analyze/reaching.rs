//! Reaching definitions over a function's blocks: which writes of a register can be the one
//! a read sees (with "undefined at entry" as a write of its own).

use std::collections::HashMap;

use super::flow::Flow;
use crate::ptx::cfg::BitSet;

impl Flow<'_> {
    /// Reaching definitions: for every instruction, the definition sites that reach its
    /// reads. Definition sites are numbered: `0..regs` are the "undefined at entry"
    /// pseudo-definitions (one per register), the rest real writes. A write under a guard
    /// kills earlier definitions only when `guarded_kills` (the non-strict reading, which
    /// trusts `@p` and `@!p` writes to cover each other).
    pub fn reaching_definitions(&self, guarded_kills: bool) -> ReachingDefs {
        let nr = self.regs.len();
        let mut site_reg: Vec<u32> = (0..nr as u32).collect();
        let mut site_instr: Vec<Option<usize>> = vec![None; nr];
        let mut site_of: Vec<Vec<usize>> = Vec::with_capacity(self.instrs.len());
        let mut sites_of_reg: Vec<Vec<usize>> = (0..nr).map(|r| vec![r]).collect();
        for (k, defs) in self.defs.iter().enumerate() {
            let mut here = Vec::new();
            for &d in defs {
                sites_of_reg[d as usize].push(site_reg.len());
                here.push(site_reg.len());
                site_reg.push(d);
                site_instr.push(Some(k));
            }
            site_of.push(here);
        }
        let ns = site_reg.len();
        let nb = self.blocks.len();
        let kills = |k: usize| guarded_kills || self.instrs[k].guard.is_none();
        // Per register, the set of its sites: a killing write clears them in one pass.
        let masks: Vec<BitSet> = sites_of_reg
            .iter()
            .map(|sites| {
                let mut m = BitSet::new(ns);
                sites.iter().for_each(|&x| m.insert(x));
                m
            })
            .collect();
        let (mut gen_, mut kill) = (vec![BitSet::new(ns); nb], vec![BitSet::new(ns); nb]);
        for (b, bl) in self.blocks.iter().enumerate() {
            for (k, sites) in site_of.iter().enumerate().take(bl.end).skip(bl.start) {
                for &x in sites {
                    let r = site_reg[x] as usize;
                    if kills(k) {
                        gen_[b].subtract(&masks[r]);
                        kill[b].union_with(&masks[r]);
                    }
                    gen_[b].insert(x);
                }
            }
        }
        let mut out = vec![BitSet::new(ns); nb];
        let mut inn = vec![BitSet::new(ns); nb];
        let mut rpo = self.rpo();
        rpo.extend((0..nb).filter(|&b| !self.reachable[b]));
        let mut changed = true;
        while changed {
            changed = false;
            for &b in &rpo {
                let mut set = BitSet::new(ns);
                if b == 0 {
                    (0..nr).for_each(|r| set.insert(r));
                }
                for &p in &self.blocks[b].preds {
                    set.union_with(&out[p]);
                }
                inn[b] = set.clone();
                set.subtract(&kill[b]);
                set.union_with(&gen_[b]);
                if set != out[b] {
                    out[b] = set;
                    changed = true;
                }
            }
        }
        // Per read: the block's own earlier writes if any, else what enters the block.
        let mut at = vec![Vec::new(); self.instrs.len()];
        for (b, bl) in self.blocks.iter().enumerate() {
            let mut local: HashMap<u32, Vec<usize>> = HashMap::new();
            let entering = |r: u32| -> Vec<usize> {
                let mut m = masks[r as usize].clone();
                m.intersect_with(&inn[b]);
                m.iter().collect()
            };
            for k in bl.start..bl.end {
                at[k] = self.uses[k]
                    .iter()
                    .map(|&u| (u, local.get(&u).cloned().unwrap_or_else(|| entering(u))))
                    .collect();
                for &x in &site_of[k] {
                    let r = site_reg[x];
                    if kills(k) {
                        local.insert(r, vec![x]);
                    } else {
                        local.entry(r).or_insert_with(|| entering(r)).push(x);
                    }
                }
            }
        }
        ReachingDefs { site_instr, at }
    }
}

/// The result of [`Flow::reaching_definitions`].
#[derive(Clone, Debug)]
pub struct ReachingDefs {
    /// For each definition site, its instruction (`None` for the entry pseudo-definitions).
    pub site_instr: Vec<Option<usize>>,
    /// For each instruction, each register it reads with the sites that reach that read.
    pub at: Vec<Vec<(u32, Vec<usize>)>>,
}

impl ReachingDefs {
    /// The sites reaching instruction `k`'s read of `reg` (empty when `k` does not read it).
    pub fn reaching(&self, k: usize, reg: u32) -> &[usize] {
        self.at[k]
            .iter()
            .find(|(r, _)| *r == reg)
            .map_or(&[], |(_, s)| s.as_slice())
    }
}
