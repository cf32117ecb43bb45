//! Hopper instructions (sm_90, and sm_90a for `wgmma` and `setmaxnreg`): transaction
//! barriers, the bulk tensor copy engine and warpgroup matrix products.

use super::KernelBuilder;
use crate::ptx::ir::{AddrBase, Imm, Instr, Op, Operand, Param};
use crate::ptx::types::{F32, Pred, PtxType, Reg, U32, U64};

impl KernelBuilder {
    /// A 128-byte tensor map passed by value (`.param .align 64 .b8 name[128]`, what
    /// `__grid_constant__ CUtensorMap` compiles to); returns its generic address, the
    /// form the copy instructions take.
    pub fn param_tensor_map(&mut self, name: &str) -> Reg<U64> {
        self.ir.params.push(Param {
            name: name.into(),
            ty: PtxType::U64,
            pointee: None,
            tensor_map: true,
        });
        let sym = self.reg::<U64>();
        self.push(Instr::new(
            Op::Mov,
            Some(PtxType::U64),
            vec![sym.vreg()],
            vec![Operand::Sym(name.into())],
        ));
        let generic = self.reg::<U64>();
        self.push(Instr::new(
            Op::CvtaParam,
            Some(PtxType::U64),
            vec![generic.vreg()],
            vec![Operand::Reg(sym.vreg())],
        ));
        generic
    }

    fn bar_op(&mut self, op: Op, bar: Reg<U32>, off: i64, extra: Option<u32>) {
        let mut srcs = vec![Operand::Addr(AddrBase::Reg(bar.vreg()), off)];
        srcs.extend(extra.map(|v| Operand::Imm(Imm::Int(v.into()))));
        self.push(Instr::new(op, None, Vec::new(), srcs));
    }

    /// Initialises the 8-byte barrier at `[bar + off]` (shared) to expect `count`
    /// arrivals per phase.
    pub fn mbar_init(&mut self, bar: Reg<U32>, off: i64, count: u32) {
        self.bar_op(Op::MbarInit, bar, off, Some(count));
    }

    /// Makes barrier initialisations visible to the copy engine (before a block barrier).
    pub fn fence_mbar_init(&mut self) {
        self.push(Instr::new(Op::FenceMbarInit, None, Vec::new(), Vec::new()));
    }

    /// Makes this thread's ordinary shared-memory writes visible to the async proxy:
    /// between writing a tile with `st.shared` and the `wgmma` that reads it.
    pub fn fence_proxy_async(&mut self) {
        self.push(Instr::new(
            Op::FenceProxyAsync,
            None,
            Vec::new(),
            Vec::new(),
        ));
    }

    /// Arrives on `[bar + off]` and adds `bytes` to the copies its phase waits for.
    pub fn mbar_arrive_expect_tx(&mut self, bar: Reg<U32>, off: i64, bytes: u32) {
        self.bar_op(Op::MbarArriveExpectTx, bar, off, Some(bytes));
    }

    /// [`mbar_arrive_expect_tx`](Self::mbar_arrive_expect_tx) with a byte count known
    /// only at run time.
    pub fn mbar_arrive_expect_tx_reg(&mut self, bar: Reg<U32>, off: i64, bytes: Reg<U32>) {
        self.push(Instr::new(
            Op::MbarArriveExpectTx,
            None,
            Vec::new(),
            vec![
                Operand::Addr(AddrBase::Reg(bar.vreg()), off),
                Operand::Reg(bytes.vreg()),
            ],
        ));
    }

    /// Asks the copy engine for `bytes` (a multiple of 16) from global `src` into shared
    /// `dst` (both 16-byte aligned); they complete on barrier `bar`, whose phase must
    /// expect them ([`mbar_arrive_expect_tx_reg`](Self::mbar_arrive_expect_tx_reg)).
    /// sm_90 and later.
    pub fn bulk_copy(&mut self, dst: Reg<U32>, src: Reg<U64>, bytes: Reg<U32>, bar: Reg<U32>) {
        self.push(Instr::new(
            Op::BulkCopy,
            None,
            Vec::new(),
            vec![
                Operand::Addr(AddrBase::Reg(dst.vreg()), 0),
                Operand::Addr(AddrBase::Reg(src.vreg()), 0),
                Operand::Reg(bytes.vreg()),
                Operand::Addr(AddrBase::Reg(bar.vreg()), 0),
            ],
        ));
    }

    /// Arrives on `[bar + off]`.
    pub fn mbar_arrive(&mut self, bar: Reg<U32>, off: i64) {
        self.bar_op(Op::MbarArrive, bar, off, None);
    }

    /// Spins until the phase of parity `parity` (0 or 1) of barrier `bar` has completed.
    pub fn mbar_wait(&mut self, bar: Reg<U32>, parity: Reg<U32>) {
        let again = self.new_label();
        self.place(again);
        let done = self.reg::<Pred>();
        self.push(Instr::new(
            Op::MbarTryWait,
            None,
            vec![done.vreg()],
            vec![
                Operand::Addr(AddrBase::Reg(bar.vreg()), 0),
                Operand::Reg(parity.vreg()),
            ],
        ));
        self.bra_if(done, true, again, false);
    }

    /// Copies the box at `(x, y)` (x the innermost coordinate, in elements) of the tensor
    /// map at `map` into shared memory at `dst`; its bytes complete on barrier `bar`.
    /// Parts of the box outside the tensor arrive as zeros.
    pub fn tma_load_2d(
        &mut self,
        dst: Reg<U32>,
        map: Reg<U64>,
        x: Reg<U32>,
        y: Reg<U32>,
        bar: Reg<U32>,
    ) {
        self.push(Instr::new(
            Op::TmaLoad2d,
            None,
            Vec::new(),
            vec![
                Operand::Addr(AddrBase::Reg(dst.vreg()), 0),
                Operand::Reg(map.vreg()),
                Operand::Reg(x.vreg()),
                Operand::Reg(y.vreg()),
                Operand::Addr(AddrBase::Reg(bar.vreg()), 0),
            ],
        ));
    }

    /// Asks the copy engine to bring the box at `(x, y)` of the tensor map at `map` into
    /// L2, for a later [`tma_load_2d`](Self::tma_load_2d) (another block's) to find
    /// there. Nothing waits for it; a box outside the tensor asks for nothing.
    pub fn tma_prefetch_2d(&mut self, map: Reg<U64>, x: Reg<U32>, y: Reg<U32>) {
        self.push(Instr::new(
            Op::TmaPrefetch2d,
            None,
            Vec::new(),
            vec![
                Operand::Reg(map.vreg()),
                Operand::Reg(x.vreg()),
                Operand::Reg(y.vreg()),
            ],
        ));
    }

    /// `wgmma.fence`: needed before the first product that reads accumulators written by
    /// other instructions.
    pub fn wgmma_fence(&mut self) {
        self.push(Instr::new(Op::WgmmaFence, None, Vec::new(), Vec::new()));
    }

    /// Closes the group of products issued since the last commit.
    pub fn wgmma_commit(&mut self) {
        self.push(Instr::new(Op::WgmmaCommit, None, Vec::new(), Vec::new()));
    }

    /// Waits until at most `pending` committed groups are in flight.
    pub fn wgmma_wait(&mut self, pending: u32) {
        self.push(Instr::new(
            Op::WgmmaWait(pending),
            None,
            Vec::new(),
            Vec::new(),
        ));
    }

    /// One warpgroup product `acc += A B` (`acc = A B` where `accumulate` is false) of
    /// shape 64 x `acc.len() * 2` x 16, both operands in shared memory described by
    /// `a_desc` (k-major) and `b_desc` (n-major when `trans_b`). `input` f32 multiplies
    /// f32 operands as TF32, 64 x `acc.len() * 2` x 8, B k-major (`trans_b` false). The
    /// accumulators are written in the background until [`wgmma_wait`](Self::wgmma_wait).
    pub fn wgmma(
        &mut self,
        input: PtxType,
        trans_b: bool,
        acc: &[Reg<F32>],
        a_desc: Reg<U64>,
        b_desc: Reg<U64>,
        accumulate: Reg<Pred>,
    ) {
        let a = Operand::Reg(a_desc.vreg());
        self.push_wgmma(input, trans_b, acc, a, b_desc, accumulate);
    }

    /// Both forms' instruction: `a` a descriptor register or a vector of four.
    fn push_wgmma(
        &mut self,
        input: PtxType,
        trans_b: bool,
        acc: &[Reg<F32>],
        a: Operand,
        b_desc: Reg<U64>,
        accumulate: Reg<Pred>,
    ) {
        let d: Vec<_> = acc.iter().map(|r| r.vreg()).collect();
        self.push(Instr::new(
            Op::Wgmma {
                n: 2 * acc.len() as u32,
                trans_b,
                a_regs: matches!(a, Operand::Vector(_)),
            },
            Some(input),
            d.clone(),
            vec![
                Operand::Vector(d),
                a,
                Operand::Reg(b_desc.vreg()),
                Operand::Reg(accumulate.vreg()),
            ],
        ));
    }

    /// [`wgmma`](Self::wgmma) with A a fragment in registers: per warp of the
    /// warpgroup, rows `16 w..16 w + 16` of the 64 laid out as `mma.sync`'s A operand.
    /// 16-bit inputs (m16n8k16): `a[0]` row `lane / 4`, k `2 (lane % 4)` and the next;
    /// `a[1]` eight rows down; `a[2]`, `a[3]` eight k on. TF32 (f32 `input`, m16n8k8,
    /// one value a register): `a[0]` row `lane / 4`, k `lane % 4`; `a[1]` eight rows
    /// down; `a[2]`, `a[3]` four k on. The registers are read in the background: wait
    /// with [`wgmma_wait_holding`](Self::wgmma_wait_holding) before writing them again.
    pub fn wgmma_rs(
        &mut self,
        input: PtxType,
        trans_b: bool,
        acc: &[Reg<F32>],
        a: [Reg<U32>; 4],
        b_desc: Reg<U64>,
        accumulate: Reg<Pred>,
    ) {
        let a = Operand::Vector(a.iter().map(|r| r.vreg()).collect());
        self.push_wgmma(input, trans_b, acc, a, b_desc, accumulate);
    }

    /// [`wgmma_wait`](Self::wgmma_wait) that keeps `held` (the A fragments of products
    /// in flight) live until it: the allocator would otherwise give their registers to
    /// values written while the products still read them.
    pub fn wgmma_wait_holding(&mut self, pending: u32, held: &[Reg<U32>]) {
        self.push(Instr::new(
            Op::WgmmaWait(pending),
            None,
            Vec::new(),
            held.iter().map(|r| Operand::Reg(r.vreg())).collect(),
        ));
    }

    /// Raises (`inc`) or lowers this warpgroup's per-thread register limit to `regs`.
    pub fn setmaxnreg(&mut self, inc: bool, regs: u32) {
        self.push(Instr::new(
            Op::SetMaxNreg { inc, regs },
            None,
            Vec::new(),
            Vec::new(),
        ));
    }
}

#[cfg(test)]
mod tests {
    use crate::ptx::{KernelBuilder, PtxType, Target, compile, emit_module, validate};

    fn tiny(acc_regs: usize) -> crate::ptx::KernelIr {
        let mut b = KernelBuilder::new("hopper_tiny");
        b.max_threads(256);
        b.min_blocks(1);
        let map = b.param_tensor_map("map");
        let smem = b.dynamic_shared();
        let zero = b.mov(0u32);
        b.mbar_init(smem, 1024, 1);
        b.fence_mbar_init();
        b.bar_sync();
        b.setmaxnreg(true, 232);
        b.mbar_arrive_expect_tx(smem, 1024, 8192);
        let bar = b.add(smem, 1024u32);
        b.tma_load_2d(smem, map, zero, zero, bar);
        let sms = b.special(crate::ptx::ir::SpecialReg::Nsmid);
        b.tma_prefetch_2d(map, zero, sms);
        b.mbar_wait(bar, zero);
        let acc: Vec<_> = (0..acc_regs).map(|_| b.mov(0.0f32)).collect();
        let desc = b.mov(0u64);
        let yes = b.setp::<crate::ptx::U32>(crate::ptx::Cmp::Eq, zero, 0u32);
        b.wgmma_fence();
        b.wgmma(PtxType::Bf16, true, &acc, desc, desc, yes);
        b.wgmma(PtxType::F32, false, &acc[..8], desc, desc, yes);
        b.wgmma_commit();
        b.wgmma_wait(0);
        b.mbar_arrive(smem, 1024);
        b.st_vec(crate::ptx::Space::Shared, smem, 0, &acc[..2]);
        b.ret();
        b.finish()
    }

    #[test]
    fn hopper_instructions_validate_and_emit_their_ptx_spelling() {
        let k = compile(tiny(64)).unwrap();
        let text = emit_module(Target::Sm90a, &[k]);
        for want in [
            ".param .align 64 .b8 map[128]",
            ".minnctapersm 1",
            "cvta.param.u64 \t%rd",
            "mbarrier.init.shared::cta.b64 \t[%r",
            "fence.mbarrier_init.release.cluster;",
            "setmaxnreg.inc.sync.aligned.u32 232;",
            "mbarrier.arrive.expect_tx.shared::cta.b64 \t_, [%r",
            "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes \t[%r",
            "mov.u32 \t%r",
            ", %nsmid;",
            "cp.async.bulk.prefetch.tensor.2d.L2.global.tile \t[%rd",
            "mbarrier.try_wait.parity.shared::cta.b64 \t%p",
            "wgmma.fence.sync.aligned;",
            "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 \t{%f",
            ", 1, 1, 0, 1;",
            "wgmma.mma_async.sync.aligned.m64n16k8.f32.tf32.tf32 \t{%f",
            "wgmma.commit_group.sync.aligned;",
            "wgmma.wait_group.sync.aligned 0;",
            "mbarrier.arrive.shared::cta.b64 \t_, [%r",
        ] {
            assert!(text.contains(want), "{want} missing from\n{text}");
        }
        // The copy's tensor operand: the map's address and the two coordinates.
        assert!(text.contains("[%rd") && text.contains(", {%r"), "{text}");
    }

    #[test]
    fn a_tf32_wgmma_takes_no_transpose_flags() {
        let text = emit_module(Target::Sm90a, &[compile(tiny(64)).unwrap()]);
        let tf32 = text
            .lines()
            .find(|l| l.contains("k8.f32.tf32.tf32"))
            .unwrap();
        assert!(tf32.trim_end().ends_with(", 1, 1;"), "{tf32}");
        let mut b = KernelBuilder::new("tf32_transposed");
        let acc: Vec<_> = (0..4).map(|_| b.mov(0.0f32)).collect();
        let desc = b.mov(0u64);
        let zero = b.mov(0u32);
        let yes = b.setp::<crate::ptx::U32>(crate::ptx::Cmp::Eq, zero, 0u32);
        b.wgmma(PtxType::F32, true, &acc, desc, desc, yes);
        b.ret();
        let faults = validate::validate(&b.finish());
        assert!(
            faults.iter().any(|f| f.to_string().contains("k-major")),
            "{faults:?}"
        );
    }

    #[test]
    fn a_register_a_wgmma_lists_its_fragment_and_keeps_it_until_the_wait() {
        let mut b = KernelBuilder::new("wgmma_rs");
        let acc: Vec<_> = (0..64).map(|_| b.mov(0.0f32)).collect();
        let desc = b.mov(0u64);
        let zero = b.mov(0u32);
        let yes = b.setp::<crate::ptx::U32>(crate::ptx::Cmp::Eq, zero, 0u32);
        let x = b.mov(1.0f32);
        let a: [crate::ptx::Reg<crate::ptx::U32>; 4] =
            std::array::from_fn(|_| b.cvt_pack(PtxType::Bf16, x, x));
        b.wgmma_fence();
        b.wgmma_rs(PtxType::Bf16, true, &acc, a, desc, yes);
        b.wgmma_commit();
        // Written while the product still reads the fragment: it may not take one of
        // the fragment's registers.
        let during = b.add(zero, 7u32);
        b.st_vec(crate::ptx::Space::Shared, zero, 0, &[during]);
        b.wgmma_wait_holding(0, &a);
        b.st_vec(crate::ptx::Space::Shared, zero, 0, &acc[..2]);
        b.ret();
        let text = emit_module(Target::Sm90a, &[compile(b.finish()).unwrap()]);
        let line = text
            .lines()
            .find(|l| l.contains("wgmma.mma_async"))
            .unwrap();
        // d, {a0..a3}, b-desc, p, scale-a, scale-b, trans-b (no trans-a for register A).
        assert!(line.contains("m64n128k16.f32.bf16.bf16"), "{line}");
        assert!(line.contains("}, {%r"), "{line}");
        assert!(line.trim_end().ends_with(", 1, 1, 1;"), "{line}");
        assert!(text.contains("wgmma.wait_group.sync.aligned 0;"), "{text}");
        let fragment: Vec<&str> = line
            .split('{')
            .nth(2)
            .unwrap()
            .split('}')
            .next()
            .unwrap()
            .split(", ")
            .collect();
        let written = text
            .lines()
            .find(|l| l.contains("add.u32") && l.contains(", 7;"))
            .and_then(|l| l.split_whitespace().nth(1))
            .map(|r| r.trim_end_matches(','))
            .unwrap();
        assert!(
            !fragment.contains(&written),
            "{written} reuses {fragment:?}\n{text}"
        );
        // TF32 takes A from registers too (four 32-bit values, k8), without the
        // transpose immediate.
        let mut b = KernelBuilder::new("tf32_rs");
        let acc: Vec<_> = (0..4).map(|_| b.mov(0.0f32)).collect();
        let desc = b.mov(0u64);
        let zero = b.mov(0u32);
        let yes = b.setp::<crate::ptx::U32>(crate::ptx::Cmp::Eq, zero, 0u32);
        b.wgmma_fence();
        b.wgmma_rs(PtxType::F32, false, &acc, [zero; 4], desc, yes);
        b.wgmma_commit();
        b.wgmma_wait_holding(0, &[zero]);
        b.st_vec(crate::ptx::Space::Shared, zero, 0, &acc[..2]);
        b.ret();
        let text = emit_module(Target::Sm90a, &[compile(b.finish()).unwrap()]);
        let line = text
            .lines()
            .find(|l| l.contains("wgmma.mma_async"))
            .unwrap();
        assert!(line.contains("m64n8k8.f32.tf32.tf32"), "{line}");
        assert!(line.contains("}, {%r"), "{line}");
        assert!(line.trim_end().ends_with(", 1, 1;"), "{line}");
        assert!(!line.trim_end().ends_with(", 1, 1, 1;"), "{line}");
    }

    #[test]
    fn a_wgmma_of_an_unsupported_width_is_rejected() {
        // 300 accumulators would be a 64 x 600 product; the widest is 256.
        let faults = validate::validate(&tiny(300));
        assert!(
            faults.iter().any(|f| f.to_string().contains("wgmma")),
            "{faults:?}"
        );
    }
}
