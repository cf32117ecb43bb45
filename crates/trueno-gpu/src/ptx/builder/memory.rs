//! Loads, stores, shared memory, barriers, shuffles, atomics and votes.

use super::{KernelBuilder, Src};
use crate::ptx::ir::{
    AddrBase, AtomOp, Cmp, DYNAMIC_SHARED, Imm, Instr, Op, Operand, SharedDecl, ShflMode, VoteMode,
};
use crate::ptx::types::{Arith, F32, Pred, PtxType, Reg, RegType, Space, U32};

impl KernelBuilder {
    fn addr<A: RegType>(a: Reg<A>, off: i64) -> Operand {
        Operand::Addr(AddrBase::Reg(a.vreg()), off)
    }

    /// Loads one `T` from `[addr + off]` in `space` (`U64` addresses for global, `U32`
    /// for shared).
    pub fn ld<T: RegType, A: RegType>(&mut self, space: Space, addr: Reg<A>, off: i64) -> Reg<T> {
        self.op1(
            Op::Ld(space),
            mem_type(T::TY),
            None,
            vec![Self::addr(addr, off)],
        )
    }

    /// Loads `N` (2 or 4) consecutive `T`s in one access; the address must be aligned to
    /// `N * size_of::<T>()`.
    pub fn ld_vec<T: RegType, A: RegType, const N: usize>(
        &mut self,
        space: Space,
        addr: Reg<A>,
        off: i64,
    ) -> [Reg<T>; N] {
        let regs: [Reg<T>; N] = std::array::from_fn(|_| self.reg::<T>());
        let dsts = regs.iter().map(|r| r.vreg()).collect();
        self.push(Instr::new(
            Op::Ld(space),
            Some(T::TY),
            dsts,
            vec![Self::addr(addr, off)],
        ));
        regs
    }

    /// Stores `v` to `[addr + off]`.
    pub fn st<T: RegType, A: RegType>(
        &mut self,
        space: Space,
        addr: Reg<A>,
        off: i64,
        v: impl Into<Src<T>>,
    ) {
        let srcs = vec![Self::addr(addr, off), v.into().operand()];
        self.push(Instr::new(
            Op::St(space),
            Some(mem_type(T::TY)),
            Vec::new(),
            srcs,
        ));
    }

    /// Stores 2 or 4 registers in one access.
    pub fn st_vec<T: RegType, A: RegType>(
        &mut self,
        space: Space,
        addr: Reg<A>,
        off: i64,
        v: &[Reg<T>],
    ) {
        let srcs = vec![
            Self::addr(addr, off),
            Operand::Vector(v.iter().map(|r| r.vreg()).collect()),
        ];
        self.push(Instr::new(Op::St(space), Some(T::TY), Vec::new(), srcs));
    }

    /// Declares a static shared array and returns its (32-bit shared) address.
    pub fn shared_array(&mut self, name: &str, bytes: u32, align: u32) -> Reg<U32> {
        self.ir.shared.push(SharedDecl {
            name: name.into(),
            bytes,
            align,
        });
        self.op1(Op::Mov, PtxType::U32, None, vec![Operand::Sym(name.into())])
    }

    /// The dynamic shared array (sized at launch) and its address.
    pub fn dynamic_shared(&mut self) -> Reg<U32> {
        self.ir.dynamic_shared = true;
        self.op1(
            Op::Mov,
            PtxType::U32,
            None,
            vec![Operand::Sym(DYNAMIC_SHARED.into())],
        )
    }

    /// `bar.sync 0`: every thread of the block must reach it.
    pub fn bar_sync(&mut self) {
        self.push(Instr::new(Op::BarSync, None, Vec::new(), Vec::new()));
    }

    /// `bar.warp.sync -1`: every lane of the warp must reach it; orders the lanes'
    /// shared-memory accesses (one warp reading what its lanes copied in).
    pub fn bar_warp_sync(&mut self) {
        self.push(Instr::new(Op::BarWarpSync, None, Vec::new(), Vec::new()));
    }

    /// `bar.sync id, threads`: the `threads` (a multiple of 32) that use barrier `id`
    /// (1-15) wait for each other; the rest of the block goes on (validation rejects
    /// other ids and counts).
    pub fn bar_sync_named(&mut self, id: u32, threads: u32) {
        self.push(Instr::new(
            Op::BarSyncNamed { id, threads },
            None,
            Vec::new(),
            Vec::new(),
        ));
    }

    /// Warp shuffle of a 32-bit value over all 32 lanes.
    pub fn shfl<T: RegType>(
        &mut self,
        mode: ShflMode,
        v: Reg<T>,
        lane: impl Into<Src<U32>>,
    ) -> Reg<T> {
        let clamp = if mode == ShflMode::Up { 0 } else { 31 };
        let srcs = vec![
            Operand::Reg(v.vreg()),
            lane.into().operand(),
            Operand::Imm(Imm::Int(clamp)),
            Operand::Imm(Imm::Int(-1)),
        ];
        self.op1(Op::Shfl(mode), PtxType::B32, None, srcs)
    }

    /// Atomic add at `[addr]`, returning the old value.
    pub fn atom_add<T: Arith, A: RegType>(
        &mut self,
        space: Space,
        addr: Reg<A>,
        v: impl Into<Src<T>>,
    ) -> Reg<T> {
        self.op1(
            Op::Atom(space, AtomOp::Add),
            T::TY,
            None,
            vec![Self::addr(addr, 0), v.into().operand()],
        )
    }

    /// Atomic compare-and-swap of 32 bits, returning the old value.
    pub fn atom_cas<A: RegType>(
        &mut self,
        space: Space,
        addr: Reg<A>,
        cmp: Reg<U32>,
        new: Reg<U32>,
    ) -> Reg<U32> {
        let srcs = vec![
            Self::addr(addr, 0),
            Operand::Reg(cmp.vreg()),
            Operand::Reg(new.vreg()),
        ];
        self.op1(Op::Atom(space, AtomOp::Cas), PtxType::B32, None, srcs)
    }

    /// Atomic float max through a compare-and-swap loop (PTX has no float `atom.max`).
    /// NaN wins: once stored, a NaN stays.
    pub fn atom_max_f32<A: RegType>(&mut self, space: Space, addr: Reg<A>, v: Reg<F32>) {
        let old = self.ld::<U32, A>(space, addr, 0);
        let head = self.new_label();
        let done = self.new_label();
        self.place(head);
        let old_f: Reg<F32> = self.bitcast32(old);
        // Stop when the stored value already wins (it is >= v, or it is NaN).
        let keep = self.setp::<F32>(Cmp::Ge, old_f, v);
        let stored_nan = self.setp::<F32>(Cmp::Nan, old_f, old_f);
        let keep = self.or_pred(keep, stored_nan);
        self.bra_if(keep, false, done, false);
        let new: Reg<U32> = self.bitcast32(v);
        let seen = self.atom_cas(space, addr, old, new);
        let lost = self.setp::<U32>(Cmp::Ne, seen, old);
        self.assign(old, seen);
        self.bra_if(lost, false, head, false);
        self.place(done);
    }

    /// `vote.sync.any` over the warp.
    pub fn vote_any(&mut self, p: Reg<Pred>) -> Reg<Pred> {
        self.vote(VoteMode::Any, p)
    }
    /// `vote.sync.all` over the warp.
    pub fn vote_all(&mut self, p: Reg<Pred>) -> Reg<Pred> {
        self.vote(VoteMode::All, p)
    }
    fn vote(&mut self, mode: VoteMode, p: Reg<Pred>) -> Reg<Pred> {
        self.op1(
            Op::Vote(mode),
            PtxType::Pred,
            None,
            vec![Operand::Reg(p.vreg()), Operand::Imm(Imm::Int(-1))],
        )
    }
    /// `vote.sync.ballot`: bit i set when lane i's predicate holds.
    pub fn ballot(&mut self, p: Reg<Pred>) -> Reg<U32> {
        self.op1(
            Op::Vote(VoteMode::Ballot),
            PtxType::B32,
            None,
            vec![Operand::Reg(p.vreg()), Operand::Imm(Imm::Int(-1))],
        )
    }
}

/// ld/st have no f16/bf16 types: half-precision values move as `.b16`.
fn mem_type(ty: PtxType) -> PtxType {
    if matches!(ty, PtxType::F16 | PtxType::Bf16) {
        PtxType::B16
    } else {
        ty
    }
}
