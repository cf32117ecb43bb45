//! How each register varies across the threads of a block: constant, uniform, uniform per
//! warp, affine in the lane (`c * lane + uniform`, the form coalescing and bank conflicts
//! depend on), or divergent; where its address points (a shared-window address, a generic
//! one made from shared, global...); and which branches split the block's threads, with
//! the blocks under each until the paths meet again.

use super::ast::{Function, Operand, Space};
use super::flow::{Flow, ReachingDefs};
pub use super::lattice::{Prov, Val};

/// A branch that splits the block's threads and the blocks it governs.
#[derive(Clone, Debug)]
pub struct DivergentBranch {
    /// The branch instruction.
    pub instr: usize,
    /// How its predicate varies (`WarpUniform`: whole warps part; otherwise lanes do).
    pub how: Val,
    /// Blocks executed by only some threads: reachable from the branch before the paths
    /// meet again (its immediate post-dominator).
    pub region: Vec<usize>,
    /// Whether each block of the function is in `region`.
    pub in_region: Vec<bool>,
}

/// The values of one function, per definition: a read sees the join of the definitions
/// that reach it, so a register the allocator reuses for unrelated values keeps each.
#[derive(Clone, Debug)]
pub struct Values {
    /// How each instruction's result varies.
    pub instr_val: Vec<Val>,
    /// Where each instruction's result points.
    pub instr_prov: Vec<Prov>,
    /// Branches on thread-dependent predicates.
    pub branches: Vec<DivergentBranch>,
    rd: ReachingDefs,
    vars: Vec<(String, Space)>,
    whole_warp_rows: bool,
}

/// A special register's variation. `whole_warp_rows`: the kernel requires a block width
/// that is a multiple of 32 (`.reqntid 64, 4`), so a warp never spans two `%tid.y` rows.
fn special(name: &str, whole_warp_rows: bool) -> Option<Val> {
    let base = name.split('.').next().unwrap_or(name);
    Some(match name {
        "%tid.x" | "%laneid" => Val::Affine(1),
        "%warpid" => Val::WarpUniform,
        "%tid.y" | "%tid.z" if whole_warp_rows => Val::WarpUniform,
        _ => match base {
            "%tid" => Val::Divergent,
            "%ntid"
            | "%ctaid"
            | "%nctaid"
            | "%clusterid"
            | "%nclusterid"
            | "%cluster_ctaid"
            | "%cluster_nctaid"
            | "%cluster_ctarank"
            | "%cluster_nctarank"
            | "%gridid"
            | "%nwarpid"
            | "%nsmid"
            | "%total_smem_size"
            | "%dynamic_smem_size"
            | "%aggr_smem_size"
            | "%is_explicit_cluster" => Val::Uniform,
            _ if base.starts_with("%envreg") => Val::Uniform,
            _ if name.starts_with('%') => Val::Divergent, // clocks, %smid, lane masks
            _ => return None,
        },
    })
}

impl Values {
    /// Runs the analysis to a fixed point.
    pub fn new(f: &Function, flow: &Flow, globals: &[super::ast::VarDecl]) -> Values {
        let n = flow.instrs.len();
        let mut v = Values {
            instr_val: vec![Val::Bottom; n],
            instr_prov: vec![Prov::None; n],
            branches: Vec::new(),
            rd: flow.reaching_definitions(true),
            whole_warp_rows: f.required_width.is_some_and(|w| w > 0 && w % 32 == 0),
            vars: globals
                .iter()
                .chain(&f.vars)
                .map(|d| (d.name.clone(), d.space))
                .chain(f.params.iter().map(|p| (p.name.clone(), Space::Param)))
                .collect(),
        };
        let mut forced: Vec<Val> = vec![Val::Bottom; n];
        for _round in 0..16 {
            v.instr_val = forced.clone();
            v.instr_prov = vec![Prov::None; n];
            v.propagate(flow);
            let before = forced.clone();
            v.find_branches(flow);
            for b in &v.branches {
                let meet = flow.ipdom[flow.block_of[b.instr]];
                let inside = |blk: usize| b.in_region[blk];
                let how = if b.how == Val::WarpUniform {
                    Val::WarpUniform
                } else {
                    Val::Divergent
                };
                for &blk in &b.region {
                    // Values written under the branch and read after the paths meet differ
                    // between the threads that took each path.
                    let bl = &flow.blocks[blk];
                    for (defs, f) in flow.defs[bl.start..bl.end]
                        .iter()
                        .zip(&mut forced[bl.start..bl.end])
                    {
                        let escapes = defs.iter().any(|&d| match meet {
                            Some(p) => flow.live_in[p].contains(d as usize),
                            None => bl_succs_outside(flow, blk, &inside, d),
                        });
                        if escapes {
                            *f = f.join(how);
                        }
                    }
                }
            }
            if forced == before {
                break;
            }
        }
        v
    }

    /// The reaching definitions the values were computed over (guarded writes kill).
    pub fn reaching(&self) -> &ReachingDefs {
        &self.rd
    }

    fn propagate(&mut self, flow: &Flow) {
        let order: Vec<usize> = flow
            .rpo()
            .into_iter()
            .flat_map(|b| flow.blocks[b].start..flow.blocks[b].end)
            .collect();
        for _ in 0..64 {
            let mut changed = false;
            for &k in &order {
                if flow.defs[k].is_empty() {
                    continue;
                }
                let (val, prov) = self.transfer(flow, k);
                let (nv, np) = (self.instr_val[k].join(val), self.instr_prov[k].join(prov));
                if nv != self.instr_val[k] || np != self.instr_prov[k] {
                    self.instr_val[k] = nv;
                    self.instr_prov[k] = np;
                    changed = true;
                }
            }
            if !changed {
                return;
            }
        }
    }

    /// How register `reg` varies where instruction `k` reads it.
    fn reg_at(&self, k: usize, reg: u32) -> (Val, Prov) {
        self.rd
            .reaching(k, reg)
            .iter()
            .filter_map(|&s| self.rd.site_instr[s])
            .fold((Val::Bottom, Prov::None), |(v, p), i| {
                (v.join(self.instr_val[i]), p.join(self.instr_prov[i]))
            })
    }

    /// How an operand of instruction `k` varies.
    pub fn operand(&self, flow: &Flow, k: usize, o: &Operand) -> Val {
        match o {
            Operand::Name(n) => match flow.regs.get(n) {
                Some(id) => self.reg_at(k, id).0,
                None => special(n, self.whole_warp_rows).unwrap_or(Val::Uniform), // a symbol's address
            },
            Operand::Int(i) => Val::Const(*i),
            Operand::Float | Operand::Sink => Val::Uniform,
            Operand::Not(x) => self.operand(flow, k, x),
            Operand::Address { base, .. } => base
                .as_ref()
                .map_or(Val::Uniform, |b| self.name(flow, k, b)),
            // A packed value varies however its most varying part does.
            Operand::Vector(xs) | Operand::List(xs) => match xs
                .iter()
                .map(|x| self.operand(flow, k, x))
                .fold(Val::Bottom, Val::join)
            {
                Val::Affine(_) => Val::Divergent,
                v => v,
            },
            Operand::Pair(a, b) => self.operand(flow, k, a).opaque(self.operand(flow, k, b)),
        }
    }

    /// How the register or symbol `name` varies where instruction `k` reads it.
    pub fn name(&self, flow: &Flow, k: usize, name: &str) -> Val {
        match flow.regs.get(name) {
            Some(id) => self.reg_at(k, id).0,
            None => special(name, self.whole_warp_rows).unwrap_or(Val::Uniform),
        }
    }

    /// Where `name` (a register read by instruction `k`, or a variable) points.
    pub fn provenance(&self, flow: &Flow, k: usize, name: &str) -> Prov {
        match flow.regs.get(name) {
            Some(id) => self.reg_at(k, id).1,
            None => match self.vars.iter().find(|(n, _)| n == name).map(|v| v.1) {
                Some(Space::Shared) => Prov::SharedWindow,
                Some(Space::Global) => Prov::Global,
                Some(Space::Local) => Prov::Local,
                _ => Prov::None,
            },
        }
    }

    fn transfer(&self, flow: &Flow, k: usize) -> (Val, Prov) {
        let ins = flow.instrs[k];
        let ops = &ins.operands;
        let arg = |i: usize| {
            ops.get(i)
                .map_or(Val::Uniform, |o| self.operand(flow, k, o))
        };
        let prov_of = |i: usize| match ops.get(i) {
            Some(Operand::Name(n)) => self.provenance(flow, k, n),
            _ => Prov::None,
        };
        let base = ins.base();
        let pointer = (1..ops.len()).fold(Prov::None, |p, i| p.join(prov_of(i)));
        let val = match base {
            "mov" | "cvt" => arg(1),
            "cvta" => {
                let to = ins.has("to");
                let p = match ins.modifiers().find_map(Space::from_part) {
                    Some(Space::Shared) if to => Prov::SharedWindow,
                    Some(Space::Shared) => Prov::SharedGeneric,
                    Some(Space::Global) => Prov::Global,
                    Some(Space::Local) => Prov::Local,
                    _ => Prov::None,
                };
                return (arg(1), p);
            }
            "add" => arg(1).add(arg(2), 1),
            "sub" => arg(1).add(arg(2), -1),
            "mul" | "mul24" => arg(1).mul(arg(2)),
            "mad" | "mad24" => arg(1).mul(arg(2)).add(arg(3), 1),
            "shl" => match arg(2) {
                Val::Const(s) if (0..63).contains(&s) => arg(1).mul(Val::Const(1 << s)),
                s => arg(1).opaque(s),
            },
            "shr" | "div" => {
                let d = match (base, arg(2)) {
                    ("shr", Val::Const(s)) if (0..63).contains(&s) => Some(1i64 << s),
                    ("div", Val::Const(d)) if d > 0 => Some(d),
                    _ => None,
                };
                match (arg(1), d) {
                    (Val::Const(a), Some(d)) => Val::Const(a.div_euclid(d)),
                    // Lanes 0..31 of a warp-aligned group share `lane * c / d`.
                    (Val::Affine(c), Some(d))
                        if c > 0 && c.checked_mul(32).is_some_and(|w| d % w == 0) =>
                    {
                        Val::WarpUniform
                    }
                    (a, _) => a.opaque(arg(2)),
                }
            }
            "and" | "rem" => {
                let m = match (base, arg(2)) {
                    ("and", Val::Const(m))
                        if m > 0 && m.checked_add(1).is_some_and(|p| p & m == 0) =>
                    {
                        Some(m + 1)
                    }
                    ("rem", Val::Const(d)) if d > 0 => Some(d),
                    _ => None,
                };
                match (arg(1), m) {
                    (Val::Const(a), Some(d)) => Val::Const(a.rem_euclid(d)),
                    // The lane index survives a modulus that is a multiple of the warp.
                    (Val::Affine(1), Some(d)) if d % 32 == 0 => Val::Affine(1),
                    (a, _) => a.opaque(arg(2)),
                }
            }
            "ld" | "ldu" => {
                let addr = ops.iter().find(|o| matches!(o, Operand::Address { .. }));
                match addr.map(|a| self.operand(flow, k, a)) {
                    _ if ins.has("volatile") => Val::Divergent,
                    Some(Val::Affine(_) | Val::Divergent) | None => Val::Divergent,
                    Some(Val::WarpUniform) => Val::WarpUniform,
                    Some(_) => Val::Uniform,
                }
            }
            "vote" | "redux" | "activemask" | "match" => Val::WarpUniform,
            "atom" | "shfl" | "elect" | "tex" | "tld4" | "suld" | "mma" | "wgmma" | "wmma"
            | "ldmatrix" | "call" | "alloca" | "stacksave" => Val::Divergent,
            _ => (1..ops.len()).fold(Val::Uniform, |a, i| a.opaque(arg(i))),
        };
        let prov = if matches!(base, "ld" | "ldu" | "atom" | "shfl") {
            Prov::None
        } else {
            pointer
        };
        (val, prov)
    }

    fn find_branches(&mut self, flow: &Flow) {
        self.branches.clear();
        for (k, ins) in flow.instrs.iter().enumerate() {
            if !matches!(ins.base(), "bra" | "brx") || !flow.reachable[flow.block_of[k]] {
                continue;
            }
            let mut how = ins
                .guard
                .as_ref()
                .map_or(Val::Uniform, |g| self.name(flow, k, &g.reg));
            if ins.base() == "brx" {
                how = how.join(
                    ins.operands
                        .first()
                        .map_or(Val::Uniform, |o| self.operand(flow, k, o)),
                );
            }
            if !how.varies() {
                continue;
            }
            let b = flow.block_of[k];
            let meet = flow.ipdom[b];
            let mut seen = vec![false; flow.blocks.len()];
            let mut stack: Vec<usize> = flow.blocks[b].succs.clone();
            let mut region = Vec::new();
            while let Some(x) = stack.pop() {
                if Some(x) == meet || seen[x] {
                    continue;
                }
                seen[x] = true;
                region.push(x);
                stack.extend(flow.blocks[x].succs.iter().copied());
            }
            region.sort_unstable();
            self.branches.push(DivergentBranch {
                instr: k,
                how,
                region,
                in_region: seen,
            });
        }
    }
}

/// Whether register `d` written in `blk` is live into a successor outside the region.
fn bl_succs_outside(flow: &Flow, blk: usize, inside: &dyn Fn(usize) -> bool, d: u32) -> bool {
    flow.blocks[blk]
        .succs
        .iter()
        .any(|&s| !inside(s) && flow.live_in[s].contains(d as usize))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::parse;

    fn values(src: &str) -> (crate::analyze::ast::Module, Vec<(String, Val)>, usize) {
        let m = parse(src).unwrap();
        let f = &m.functions[0];
        let flow = Flow::new(f);
        let v = Values::new(f, &flow, &m.globals);
        // Each register's value where the last instruction reads it... approximated by the
        // join of every definition's value.
        let named = flow
            .regs
            .names
            .iter()
            .enumerate()
            .map(|(r, n)| {
                let val = (0..flow.instrs.len())
                    .filter(|&k| flow.defs[k].contains(&(r as u32)))
                    .fold(Val::Bottom, |a, k| a.join(v.instr_val[k]));
                (n.clone(), val)
            })
            .collect();
        let n = v.branches.len();
        (m, named, n)
    }

    fn val(named: &[(String, Val)], r: &str) -> Val {
        named.iter().find(|(n, _)| n == r).unwrap().1
    }

    #[test]
    fn addresses_affine_in_the_lane() {
        let (_, v, _) = values(
            ".entry k(.param .u64 p) { .reg .b32 %r<8>; .reg .b64 %rd<4>;
            ld.param.u64 %rd0, [p];
            mov.u32 %r0, %tid.x;
            mov.u32 %r1, %ctaid.x;
            mov.u32 %r2, %ntid.x;
            mad.lo.s32 %r3, %r1, %r2, %r0;
            mul.wide.u32 %rd1, %r3, 4;
            add.s64 %rd2, %rd0, %rd1;
            shr.u32 %r4, %r0, 5;
            and.b32 %r5, %r0, 31;
            mul.lo.u32 %r6, %r0, %r0;
            shl.b32 %r7, %r5, 3;
            ret; }",
        );
        assert_eq!(val(&v, "%rd0"), Val::Uniform);
        assert_eq!(val(&v, "%r3"), Val::Affine(1));
        assert_eq!(val(&v, "%rd2"), Val::Affine(4));
        assert_eq!(val(&v, "%r4"), Val::WarpUniform);
        assert_eq!(val(&v, "%r5"), Val::Affine(1));
        assert_eq!(val(&v, "%r6"), Val::Divergent);
        assert_eq!(val(&v, "%r7"), Val::Affine(8));
    }

    #[test]
    fn loop_counters_and_strided_loops() {
        let (_, v, branches) = values(
            ".entry k(.param .u32 n) { .reg .pred %p<2>; .reg .b32 %r<6>;
            ld.param.u32 %r0, [n];
            mov.u32 %r1, 0;
            mov.u32 %r2, %tid.x;
            mov.u32 %r4, 0;
        $L: setp.ge.u32 %p0, %r1, %r0;
            @%p0 bra $E;
            add.u32 %r1, %r1, 1;
            add.u32 %r2, %r2, 128;
            bra.uni $L;
        $M: add.u32 %r4, %r4, 1;
            setp.lt.u32 %p1, %r2, %r0;
            @%p1 bra $M;
        $E: ret; }",
        );
        assert_eq!(val(&v, "%r1"), Val::Uniform);
        assert_eq!(val(&v, "%r2"), Val::Affine(1));
        assert_eq!(branches, 0, "the uniform loop exit is not divergent");
        // The second loop runs a lane-dependent number of times: its counter diverges.
        let (_, v, branches) = values(
            ".entry k(.param .u32 n) { .reg .pred %p<2>; .reg .b32 %r<6>;
            ld.param.u32 %r0, [n];
            mov.u32 %r2, %tid.x;
            mov.u32 %r4, 0;
        $M: add.u32 %r4, %r4, 1;
            add.u32 %r2, %r2, 1;
            setp.lt.u32 %p1, %r2, %r0;
            @%p1 bra $M;
            st.global.u32 [%r4], %r4;
            ret; }",
        );
        assert_eq!(branches, 1);
        assert_eq!(val(&v, "%r4"), Val::Divergent);
    }

    #[test]
    fn provenance_of_shared_addresses() {
        let src = ".entry k() { .reg .b64 %rd<4>; .reg .b32 %r<2>; .shared .b8 s[64];
            mov.u64 %rd0, s;
            cvta.shared.u64 %rd1, %rd0;
            add.s64 %rd2, %rd1, 8;
            mov.u32 %r0, s;
            ret; }";
        let m = parse(src).unwrap();
        let f = &m.functions[0];
        let flow = Flow::new(f);
        let v = Values::new(f, &flow, &m.globals);
        let prov = |r: &str| {
            let k = flow
                .defs
                .iter()
                .position(|d| d.contains(&flow.regs.get(r).unwrap()))
                .unwrap();
            v.instr_prov[k]
        };
        assert_eq!(prov("%rd0"), Prov::SharedWindow);
        assert_eq!(prov("%rd1"), Prov::SharedGeneric);
        assert_eq!(prov("%rd2"), Prov::SharedGeneric);
        assert_eq!(prov("%r0"), Prov::SharedWindow);
        assert_eq!(v.provenance(&flow, 0, "s"), Prov::SharedWindow);
    }
}
