//! Basic blocks, the control-flow graph, dominators and post-dominators, natural loops,
//! liveness and reaching definitions of one function, over numbered registers.

use std::collections::HashMap;

use super::ast::{Function, Instruction, Operand, Stmt};
use super::isa;
use crate::ptx::cfg::BitSet;

pub use super::reaching::ReachingDefs;
pub use super::regs::{Fnv, NameMap, Registers, Width};

/// A basic block: instructions `start..end` of [`Flow::instrs`].
#[derive(Clone, Debug, Default)]
pub struct Block {
    /// First instruction.
    pub start: usize,
    /// One past the last.
    pub end: usize,
    /// Successor blocks.
    pub succs: Vec<usize>,
    /// Predecessor blocks.
    pub preds: Vec<usize>,
}

/// One function's control flow and dataflow facts.
#[derive(Clone, Debug)]
pub struct Flow<'f> {
    /// Instructions in order.
    pub instrs: Vec<&'f Instruction>,
    /// Registers each instruction writes (ids).
    pub defs: Vec<Vec<u32>>,
    /// Registers each instruction reads (ids, guard included).
    pub uses: Vec<Vec<u32>>,
    /// The numbered registers.
    pub regs: Registers,
    /// Basic blocks; block 0 is the entry.
    pub blocks: Vec<Block>,
    /// The block of each instruction.
    pub block_of: Vec<usize>,
    /// Whether each block is reachable from the entry.
    pub reachable: Vec<bool>,
    /// Branches to labels that do not exist (instruction index, label).
    pub missing_labels: Vec<(usize, String)>,
    /// Immediate dominator of each reachable block (the entry's is itself).
    pub idom: Vec<Option<usize>>,
    /// Immediate post-dominator of each block; `None` where no exit is reachable or the
    /// block is post-dominated only by the virtual exit.
    pub ipdom: Vec<Option<usize>>,
    /// Loop nesting depth of each block.
    pub loop_depth: Vec<u32>,
    /// Registers live on entry to each block.
    pub live_in: Vec<BitSet>,
    /// Registers live on exit from each block.
    pub live_out: Vec<BitSet>,
}

impl<'f> Flow<'f> {
    /// Builds blocks, the CFG, dominance, loops and liveness for `f`.
    pub fn new(f: &'f Function) -> Self {
        let mut regs = Registers::new(&f.regs);
        let mut instrs = Vec::new();
        let mut labels: HashMap<&str, usize> = HashMap::new();
        let mut leaders = vec![0usize];
        for s in &f.body {
            match s {
                Stmt::Label(l, _) => {
                    labels.insert(l, instrs.len());
                    leaders.push(instrs.len());
                }
                Stmt::Instr(i) => {
                    instrs.push(i);
                    if ends_block(i) {
                        leaders.push(instrs.len());
                    }
                }
            }
        }
        let n = instrs.len();
        let (mut defs, mut uses) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for i in &instrs {
            let (d, u) = isa::defs_uses(i);
            defs.push(d.iter().filter_map(|r| regs.id(r, &f.regs)).collect());
            uses.push(u.iter().filter_map(|r| regs.id(r, &f.regs)).collect());
        }
        leaders.retain(|&l| l < n);
        leaders.sort_unstable();
        leaders.dedup();
        let mut blocks: Vec<Block> = leaders
            .iter()
            .enumerate()
            .map(|(k, &s)| Block {
                start: s,
                end: leaders.get(k + 1).copied().unwrap_or(n),
                ..Block::default()
            })
            .collect();
        let mut block_of = vec![0; n];
        for (b, bl) in blocks.iter().enumerate() {
            block_of[bl.start..bl.end].fill(b);
        }
        let mut missing_labels = Vec::new();
        for b in 0..blocks.len() {
            let last = instrs[blocks[b].end - 1];
            let mut succs = Vec::new();
            let falls = !matches!(last.base(), "bra" | "brx" | "ret" | "exit" | "trap")
                || last.guard.is_some();
            if falls && b + 1 < blocks.len() {
                succs.push(b + 1);
            }
            if matches!(last.base(), "bra" | "brx") {
                for target in branch_targets(last) {
                    match labels.get(target) {
                        Some(&at) if at < n => succs.push(block_of[at]),
                        Some(_) => {} // a label at the very end: falls off the function
                        None => missing_labels.push((blocks[b].end - 1, target.to_string())),
                    }
                }
            }
            succs.sort_unstable();
            succs.dedup();
            blocks[b].succs = succs;
        }
        for b in 0..blocks.len() {
            for s in blocks[b].succs.clone() {
                blocks[s].preds.push(b);
            }
        }
        let mut flow = Flow {
            instrs,
            defs,
            uses,
            regs,
            reachable: vec![false; blocks.len()],
            idom: Vec::new(),
            ipdom: Vec::new(),
            loop_depth: vec![0; blocks.len()],
            live_in: Vec::new(),
            live_out: Vec::new(),
            blocks,
            block_of,
            missing_labels,
        };
        flow.dominance();
        flow.loops();
        flow.liveness();
        flow
    }

    /// Blocks in reverse postorder from the entry (reachable ones only).
    pub fn rpo(&self) -> Vec<usize> {
        order(self.blocks.len(), 0, |b| &self.blocks[b].succs)
    }

    fn dominance(&mut self) {
        let nb = self.blocks.len();
        if nb == 0 {
            return;
        }
        let rpo = self.rpo();
        for &b in &rpo {
            self.reachable[b] = true;
        }
        self.idom = idoms(nb, &rpo, 0, |b| &self.blocks[b].preds);
        // Post-dominators: the reverse graph from a virtual exit (id nb) that every block
        // without successors flows into.
        let exits: Vec<usize> = (0..nb)
            .filter(|&b| self.blocks[b].succs.is_empty())
            .collect();
        let mut rsucc: Vec<Vec<usize>> = self.blocks.iter().map(|b| b.preds.clone()).collect();
        rsucc.push(exits.clone());
        let mut rpred: Vec<Vec<usize>> = self.blocks.iter().map(|b| b.succs.clone()).collect();
        for &e in &exits {
            rpred[e].push(nb);
        }
        rpred.push(Vec::new());
        let rorder = order(nb + 1, nb, |b| &rsucc[b]);
        let pd = idoms(nb + 1, &rorder, nb, |b| &rpred[b]);
        self.ipdom = pd[..nb].iter().map(|d| d.filter(|&d| d != nb)).collect();
    }

    /// Whether block `a` dominates block `b`.
    pub fn dominates(&self, a: usize, mut b: usize) -> bool {
        loop {
            if a == b {
                return true;
            }
            match self.idom.get(b).copied().flatten() {
                Some(d) if d != b => b = d,
                _ => return false,
            }
        }
    }

    fn loops(&mut self) {
        for b in 0..self.blocks.len() {
            for &h in &self.blocks[b].succs {
                if !self.reachable[b] || !self.dominates(h, b) {
                    continue;
                }
                // Back edge b -> h: the body is h plus whatever reaches b without h.
                let mut body = vec![false; self.blocks.len()];
                body[h] = true;
                let mut stack = vec![b];
                while let Some(x) = stack.pop() {
                    if !body[x] {
                        body[x] = true;
                        stack.extend(self.blocks[x].preds.iter().copied());
                    }
                }
                for (d, &inside) in self.loop_depth.iter_mut().zip(&body) {
                    *d += inside as u32;
                }
            }
        }
    }

    fn liveness(&mut self) {
        let (nb, nr) = (self.blocks.len(), self.regs.len());
        let mut gen_ = vec![BitSet::new(nr); nb];
        let mut kill = vec![BitSet::new(nr); nb];
        for (b, bl) in self.blocks.iter().enumerate() {
            for k in (bl.start..bl.end).rev() {
                for &d in &self.defs[k] {
                    gen_[b].remove(d as usize);
                    kill[b].insert(d as usize);
                }
                for &u in &self.uses[k] {
                    gen_[b].insert(u as usize);
                }
            }
        }
        self.live_in = gen_.clone();
        self.live_out = vec![BitSet::new(nr); nb];
        let mut post = self.rpo();
        post.reverse();
        // Unreachable blocks still get facts (the detectors look at them too).
        post.extend((0..nb).filter(|&b| !self.reachable[b]));
        let mut changed = true;
        while changed {
            changed = false;
            for &b in &post {
                let mut out = BitSet::new(nr);
                for &s in &self.blocks[b].succs {
                    out.union_with(&self.live_in[s]);
                }
                let mut inn = out.clone();
                inn.subtract(&kill[b]);
                inn.union_with(&gen_[b]);
                if inn != self.live_in[b] {
                    self.live_in[b] = inn;
                    changed = true;
                }
                self.live_out[b] = out;
            }
        }
    }

    /// Registers live just after each instruction, visited block by block from the end;
    /// `visit(k, live_after)` for every instruction `k`.
    pub fn walk_live(&self, mut visit: impl FnMut(usize, &BitSet)) {
        for (b, bl) in self.blocks.iter().enumerate() {
            let mut live = self.live_out[b].clone();
            for k in (bl.start..bl.end).rev() {
                visit(k, &live);
                for &d in &self.defs[k] {
                    live.remove(d as usize);
                }
                for &u in &self.uses[k] {
                    live.insert(u as usize);
                }
            }
        }
    }
}

fn ends_block(i: &Instruction) -> bool {
    matches!(i.base(), "bra" | "brx" | "ret" | "exit" | "trap")
}

fn branch_targets(i: &Instruction) -> Vec<&str> {
    i.operands
        .iter()
        .flat_map(|o| match o {
            Operand::Name(n) => vec![n.as_str()],
            Operand::Vector(v) | Operand::List(v) => v
                .iter()
                .filter_map(|x| match x {
                    Operand::Name(n) => Some(n.as_str()),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        })
        .filter(|n| !n.starts_with('%'))
        .collect()
}

/// Reverse postorder of the nodes reachable from `start`.
fn order<'a>(n: usize, start: usize, succs: impl Fn(usize) -> &'a Vec<usize>) -> Vec<usize> {
    if start >= n {
        return Vec::new();
    }
    let mut seen = vec![false; n];
    let mut post = Vec::with_capacity(n);
    let mut stack = vec![(start, 0usize)];
    seen[start] = true;
    while let Some((b, k)) = stack.pop() {
        match succs(b).get(k) {
            Some(&s) => {
                stack.push((b, k + 1));
                if !seen[s] {
                    seen[s] = true;
                    stack.push((s, 0));
                }
            }
            None => post.push(b),
        }
    }
    post.reverse();
    post
}

/// Immediate dominators (Cooper, Harvey and Kennedy's iteration) over `rpo`, rooted at
/// `root`; nodes not in `rpo` get `None`.
fn idoms<'a>(
    n: usize,
    rpo: &[usize],
    root: usize,
    preds: impl Fn(usize) -> &'a Vec<usize>,
) -> Vec<Option<usize>> {
    let mut index = vec![usize::MAX; n];
    for (k, &b) in rpo.iter().enumerate() {
        index[b] = k;
    }
    let mut idom: Vec<Option<usize>> = vec![None; n];
    idom[root] = Some(root);
    let intersect = |idom: &[Option<usize>], mut a: usize, mut b: usize| {
        while a != b {
            while index[a] > index[b] {
                a = idom[a].unwrap_or(root);
            }
            while index[b] > index[a] {
                b = idom[b].unwrap_or(root);
            }
        }
        a
    };
    let mut changed = true;
    while changed {
        changed = false;
        for &b in rpo.iter().skip(1) {
            let mut new: Option<usize> = None;
            for &p in preds(b) {
                if index[p] == usize::MAX || idom[p].is_none() {
                    continue;
                }
                new = Some(match new {
                    None => p,
                    Some(q) => intersect(&idom, p, q),
                });
            }
            if new.is_some() && idom[b] != new {
                idom[b] = new;
                changed = true;
            }
        }
    }
    idom
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::parse;

    const LOOP: &str = ".entry k(.param .u32 n) {
        .reg .pred %p<2>; .reg .b32 %r<4>; .reg .f32 %f<3>;
        ld.param.u32 %r0, [n];
        mov.u32 %r1, 0;
        mov.f32 %f0, 0f00000000;
    $LOOP:
        setp.ge.u32 %p0, %r1, %r0;
        @%p0 bra $DONE;
        add.f32 %f0, %f0, 0f3F800000;
        add.u32 %r1, %r1, 1;
        bra.uni $LOOP;
    $DONE:
        mov.f32 %f1, %f2;
        ret;
        add.u32 %r3, %r3, 1;
    }";

    #[test]
    fn blocks_edges_loops_and_dominance() {
        let m = parse(LOOP).unwrap();
        let f = Flow::new(&m.functions[0]);
        // entry | header (setp, bra) | body | exit (mov, ret) | dead
        assert_eq!(f.blocks.len(), 5);
        assert_eq!(f.blocks[1].succs, vec![2, 3]);
        assert_eq!(f.blocks[2].succs, vec![1]);
        assert!(f.blocks[3].succs.is_empty());
        assert_eq!(f.reachable, vec![true, true, true, true, false]);
        assert_eq!(f.loop_depth, vec![0, 1, 1, 0, 0]);
        assert_eq!(f.idom[3], Some(1));
        assert_eq!(f.ipdom[1], Some(3));
        assert_eq!(f.ipdom[2], Some(1));
        assert!(f.dominates(1, 2) && !f.dominates(2, 3));
    }

    #[test]
    fn liveness_across_the_back_edge() {
        let m = parse(LOOP).unwrap();
        let f = Flow::new(&m.functions[0]);
        let live: Vec<&str> = f.live_in[1]
            .iter()
            .map(|r| f.regs.names[r].as_str())
            .collect();
        assert_eq!(live, vec!["%r0", "%r1", "%f0", "%f2"]);
        assert!(!f.live_out[3].contains(f.regs.get("%f1").unwrap() as usize));
    }

    #[test]
    fn reaching_definitions_see_the_entry_on_undefined_reads() {
        let m = parse(LOOP).unwrap();
        let f = Flow::new(&m.functions[0]);
        let rd = f.reaching_definitions(true);
        let f2 = f.regs.get("%f2").unwrap();
        let mov = f
            .instrs
            .iter()
            .position(|i| i.opcode == "mov.f32" && i.operands[0] == Operand::Name("%f1".into()))
            .unwrap();
        assert_eq!(rd.reaching(mov, f2), &[f2 as usize]); // only the entry: never written
        let r1 = f.regs.get("%r1").unwrap();
        let setp = f.instrs.iter().position(|i| i.base() == "setp").unwrap();
        let sites: Vec<_> = rd
            .reaching(setp, r1)
            .iter()
            .map(|&s| rd.site_instr[s])
            .collect();
        assert_eq!(sites, vec![Some(1), Some(6)]); // the mov before the loop and the add
    }

    #[test]
    fn range_names_outside_the_declaration_are_not_registers() {
        let m = parse(".entry k() { .reg .b32 %r<2>; mov.u32 %r5, %r01; mov.u32 %r1, %tid.x; }")
            .unwrap();
        let f = Flow::new(&m.functions[0]);
        assert_eq!(f.regs.names, vec!["%r1"]);
    }
}
