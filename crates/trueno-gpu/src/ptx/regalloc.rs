//! Register allocation: liveness-based interference within each register class, then
//! greedy colouring, so values whose lifetimes do not overlap share a PTX register and the
//! declarations stay small.

use std::collections::HashMap;

use super::cfg::{self, BitSet};
use super::ir::KernelIr;
use super::types::RegClass;

/// The physical name of every virtual register and the count per class.
#[derive(Clone, Debug, Default)]
pub struct Allocation {
    /// Virtual id -> (class, index).
    pub names: HashMap<u32, (RegClass, u32)>,
    /// Registers used per class.
    pub counts: HashMap<RegClass, u32>,
}

impl Allocation {
    /// Total registers declared.
    pub fn total(&self) -> u32 {
        self.counts.values().sum()
    }
}

/// Allocates `k`'s virtual registers.
pub fn allocate(k: &KernelIr) -> Allocation {
    let n = k.next_reg as usize;
    let mut class = vec![None; n];
    for i in &k.body {
        for r in i.uses().iter().chain(&i.dsts) {
            class[r.id as usize] = Some(r.ty.reg_class());
        }
    }
    let live_out = cfg::live_out(&k.body, n);
    let mut interferes = vec![BitSet::new(n); n];
    for (i, ins) in k.body.iter().enumerate() {
        for d in &ins.dsts {
            for l in live_out[i].iter() {
                if l != d.id as usize {
                    interferes[d.id as usize].insert(l);
                    interferes[l].insert(d.id as usize);
                }
            }
            // Several results of one instruction (vector loads) are written together.
            for e in &ins.dsts {
                if e.id != d.id {
                    interferes[d.id as usize].insert(e.id as usize);
                }
            }
        }
    }
    let mut alloc = Allocation::default();
    let mut color = vec![u32::MAX; n];
    for v in 0..n {
        let Some(c) = class[v] else { continue };
        let taken: Vec<u32> = interferes[v]
            .iter()
            .filter(|&u| class[u] == Some(c) && color[u] != u32::MAX)
            .map(|u| color[u])
            .collect();
        let pick = (0..).find(|x| !taken.contains(x)).unwrap_or(0);
        color[v] = pick;
        alloc.names.insert(v as u32, (c, pick));
        let e = alloc.counts.entry(c).or_insert(0);
        *e = (*e).max(pick + 1);
    }
    alloc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptx::{Cmp, F32, KernelBuilder, Space, U32, U64, compile};

    #[test]
    fn registers_with_disjoint_lifetimes_share_a_name() {
        // A chain of 50 dependent adds: each value dies at the next, so two f32
        // registers suffice however long the chain.
        let mut b = KernelBuilder::new("chain");
        let out = b.param_ptr("out", crate::ptx::PtxType::F32);
        let mut v = b.mov::<F32>(1.0f32);
        for _ in 0..50 {
            v = b.add(v, 1.0f32);
        }
        b.st::<F32, U64>(Space::Global, out, 0, v);
        b.ret();
        let k = compile(b.finish()).unwrap();
        assert!(k.stats.virtual_regs > 50);
        assert!(k.alloc.counts[&RegClass::F32] <= 2, "{:?}", k.alloc.counts);
    }

    #[test]
    fn registers_live_at_the_same_time_get_different_names() {
        let mut b = KernelBuilder::new("overlap");
        let out = b.param_ptr("out", crate::ptx::PtxType::F32);
        let vals: Vec<_> = (0..8).map(|i| b.mov::<F32>(i as f32)).collect();
        let mut s = vals[0];
        for &v in &vals[1..] {
            s = b.add(s, v);
        }
        b.st::<F32, U64>(Space::Global, out, 0, s);
        b.ret();
        let k = compile(b.finish()).unwrap();
        let names: std::collections::HashSet<_> =
            vals.iter().map(|v| k.alloc.names[&v.vreg().id]).collect();
        assert_eq!(names.len(), 8, "all 8 constants are live together");
    }

    #[test]
    fn a_value_live_around_a_loop_is_not_reused_inside_it() {
        let mut b = KernelBuilder::new("loop");
        let out = b.param_ptr("out", crate::ptx::PtxType::U32);
        let n = b.param_u32("n");
        let keep = b.mov::<U32>(7u32);
        let acc = b.mov::<U32>(0u32);
        b.for_loop(0u32, n, 1u32, true, |b, i| {
            let t = b.mul(i, 3u32);
            let s = b.add(acc, t);
            b.assign(acc, s);
        });
        let r = b.add(acc, keep);
        let p = b.setp::<U32>(Cmp::Ne, r, 0u32);
        b.predicated(p, |b| b.st::<U32, U64>(Space::Global, out, 0, r));
        b.ret();
        let k = compile(b.finish()).unwrap();
        let keep_name = k.alloc.names[&keep.vreg().id];
        let body_names: Vec<_> =
            k.ir.body
                .iter()
                .flat_map(|i| i.dsts.iter())
                .map(|d| k.alloc.names[&d.id])
                .collect();
        let writes_to_keep = body_names.iter().filter(|&&n| n == keep_name).count();
        assert_eq!(
            writes_to_keep, 1,
            "only the mov that defines `keep` writes its register"
        );
    }
}
