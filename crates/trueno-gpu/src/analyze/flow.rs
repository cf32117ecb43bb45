//! Basic blocks, the control-flow graph, dominators and post-dominators, natural loops,
//! liveness and reaching definitions of one function, over numbered registers.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::ast::{Function, Instruction, Operand, RegDecl, Stmt};
use super::isa;
use crate::ptx::cfg::BitSet;

/// A register's width class, for pressure and the predicate limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Width {
    /// `.pred`.
    Pred,
    /// 8 to 32 bits: one hardware register.
    B32,
    /// 64 bits: two.
    B64,
    /// 128 bits: four.
    B128,
}

impl Width {
    fn of(ty: &str) -> Width {
        match ty {
            "pred" => Width::Pred,
            t if t.ends_with("64") => Width::B64,
            t if t.ends_with("128") => Width::B128,
            _ => Width::B32,
        }
    }

    /// 32-bit hardware registers a value of this width takes (0 for predicates).
    pub fn slots(self) -> u32 {
        match self {
            Width::Pred => 0,
            Width::B32 => 1,
            Width::B64 => 2,
            Width::B128 => 4,
        }
    }
}

/// FNV-1a: register names are short and trusted to be what the file says; SipHash's
/// flood resistance buys nothing here and costs a third of the lookups' time.
#[derive(Default)]
pub struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

/// A map keyed by names, hashed with [`Fnv`].
pub type NameMap<V> = HashMap<String, V, BuildHasherDefault<Fnv>>;

/// The function's registers, numbered in order of first mention.
#[derive(Clone, Debug, Default)]
pub struct Registers {
    /// Name of each register id.
    pub names: Vec<String>,
    /// Declared type (`f32`, `pred`...) of each.
    pub types: Vec<String>,
    /// Width class of each (times its vector width).
    pub slots: Vec<u32>,
    /// Whether each is a predicate.
    pub is_pred: Vec<bool>,
    ids: NameMap<u32>,
    singles: NameMap<usize>,
    ranges: NameMap<(u32, usize)>,
}

impl Registers {
    fn new(decls: &[RegDecl]) -> Self {
        let mut r = Registers::default();
        for (k, d) in decls.iter().enumerate() {
            match d.range {
                Some(n) => {
                    r.ranges.insert(d.name.clone(), (n, k));
                }
                None => {
                    r.singles.insert(d.name.clone(), k);
                }
            }
        }
        r
    }

    /// The id of a declared register, numbering it on first sight.
    fn id(&mut self, name: &str, decls: &[RegDecl]) -> Option<u32> {
        if let Some(&id) = self.ids.get(name) {
            return Some(id);
        }
        let decl = match self.singles.get(name) {
            Some(&k) => k,
            None => {
                let digits = name.len() - name.bytes().rev().take_while(u8::is_ascii_digit).count();
                let (prefix, index) = name.split_at(digits);
                let index: u64 = index.parse().ok()?;
                let &(n, k) = self.ranges.get(prefix)?;
                // `%r<6>` declares %r0..%r5.
                if index >= n as u64 || (index > 0 && name.as_bytes()[digits] == b'0') {
                    return None;
                }
                k
            }
        };
        let d = &decls[decl];
        let id = self.names.len() as u32;
        self.names.push(name.to_string());
        self.types.push(d.ty.clone());
        let w = Width::of(&d.ty);
        self.slots.push(w.slots() * d.vector.max(1));
        self.is_pred.push(w == Width::Pred);
        self.ids.insert(name.to_string(), id);
        Some(id)
    }

    /// How many registers were numbered.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether none were.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The id of `name`, if it is a register this function mentions.
    pub fn get(&self, name: &str) -> Option<u32> {
        self.ids.get(name).copied()
    }
}

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
