//! Labels, branches and the structured forms built on them (if, for, predication).

use super::{KernelBuilder, Src};
use crate::ptx::ir::{Cmp, Instr, Label, Op, Operand};
use crate::ptx::types::{Int, Pred, Reg};

impl KernelBuilder {
    /// A new, not yet placed label.
    pub fn new_label(&mut self) -> Label {
        self.next_label += 1;
        Label(self.next_label - 1)
    }
    /// Places `l` here.
    pub fn place(&mut self, l: Label) {
        self.ir.body.push(Instr::new(
            Op::Place,
            None,
            Vec::new(),
            vec![Operand::Label(l)],
        ));
    }
    /// Unconditional jump.
    pub fn bra(&mut self, l: Label) {
        self.push(Instr::new(
            Op::Bra { uni: true },
            None,
            Vec::new(),
            vec![Operand::Label(l)],
        ));
    }
    /// Jump when `p` (or `!p` if `negate`). `uniform` promises every thread of the block
    /// agrees on `p`.
    pub fn bra_if(&mut self, p: Reg<Pred>, negate: bool, l: Label, uniform: bool) {
        let mut i = Instr::new(
            Op::Bra { uni: uniform },
            None,
            Vec::new(),
            vec![Operand::Label(l)],
        );
        i.guard = Some((p.vreg(), negate));
        self.ir.body.push(i);
    }
    /// Threads where `p` holds exit here.
    pub fn exit_if(&mut self, p: Reg<Pred>) {
        let mut i = Instr::new(Op::Ret, None, Vec::new(), Vec::new());
        i.guard = Some((p.vreg(), false));
        self.ir.body.push(i);
    }
    /// `ret`
    pub fn ret(&mut self) {
        self.ir
            .body
            .push(Instr::new(Op::Ret, None, Vec::new(), Vec::new()));
    }

    /// `griddepcontrol.wait` ([`Op::GridDepWait`]): from here on the previous kernels'
    /// results are visible and their reads done. Before it, a kernel launched to overlap
    /// its predecessor may only read memory no kernel writes (uploaded weights).
    pub fn wait_for_previous_grid(&mut self) {
        self.push(Instr::new(Op::GridDepWait, None, Vec::new(), Vec::new()));
    }

    /// `griddepcontrol.launch_dependents` ([`Op::GridDepLaunch`]): the next kernel may
    /// start its blocks (up to their own wait) once every block here has passed this.
    pub fn allow_next_grid(&mut self) {
        self.push(Instr::new(Op::GridDepLaunch, None, Vec::new(), Vec::new()));
    }

    /// Both, first thing: the kernel's launch may overlap the previous kernel's tail and
    /// the next kernel's launch this one's, and nothing here touches memory before the
    /// previous kernel is done (for the short kernels of a decode step, whose launch ramp
    /// and drain are a large share of their time).
    pub fn overlap_neighbours(&mut self) {
        self.allow_next_grid();
        self.wait_for_previous_grid();
    }

    /// Runs `then` where `p` holds and `otherwise` where it does not.
    pub fn if_else(
        &mut self,
        p: Reg<Pred>,
        uniform: bool,
        then: impl FnOnce(&mut Self),
        otherwise: impl FnOnce(&mut Self),
    ) {
        let (other, end) = (self.new_label(), self.new_label());
        self.bra_if(p, true, other, uniform);
        then(self);
        self.bra(end);
        self.place(other);
        otherwise(self);
        self.place(end);
    }

    /// Runs `body` only where `p` holds, by branching around it.
    pub fn if_then(&mut self, p: Reg<Pred>, uniform: bool, body: impl FnOnce(&mut Self)) {
        let skip = self.new_label();
        self.bra_if(p, true, skip, uniform);
        body(self);
        self.place(skip);
    }

    /// Predicates every instruction `body` emits with `p` (no branch; for short bodies).
    pub fn predicated(&mut self, p: Reg<Pred>, body: impl FnOnce(&mut Self)) {
        let saved = self.guard.replace((p, false));
        body(self);
        self.guard = saved;
    }

    /// `for (i = start; i < end; i += step) body(i)`. `uniform` promises the trip count
    /// is the same for every thread of the block (needed for a barrier inside).
    pub fn for_loop<T: Int>(
        &mut self,
        start: impl Into<Src<T>>,
        end: impl Into<Src<T>>,
        step: impl Into<Src<T>>,
        uniform: bool,
        body: impl FnOnce(&mut Self, Reg<T>),
    ) {
        let (end, step) = (end.into(), step.into());
        let i = self.mov::<T>(start);
        let head = self.new_label();
        let exit = self.new_label();
        self.place(head);
        let done = self.setp::<T>(Cmp::Ge, i, end);
        self.bra_if(done, false, exit, uniform);
        body(self, i);
        let next = self.add::<T>(i, step);
        self.assign(i, next);
        self.bra(head);
        self.place(exit);
    }
}
