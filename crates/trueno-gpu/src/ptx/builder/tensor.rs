//! Tensor-core instructions (sm_80+): asynchronous global-to-shared copies, `ldmatrix`
//! and `mma.sync`.

use super::KernelBuilder;
use crate::ptx::ir::{AddrBase, Imm, Instr, Op, Operand, Rounding};
use crate::ptx::types::{F32, PtxType, Reg, RegType, S32, U32, U64};

impl KernelBuilder {
    /// Starts a 16-byte copy of `[src]` (global) into `[dst]` (shared, 16-byte aligned);
    /// `src_bytes` is 16 to copy or 0 to zero-fill without reading `src`.
    pub fn cp_async_16(&mut self, dst: Reg<U32>, src: Reg<U64>, src_bytes: Reg<U32>) {
        self.cp_async(16, false, dst, src, src_bytes);
    }

    /// [`Self::cp_async_16`] through L1 (`cp.async.ca`): for data that other blocks on
    /// the multiprocessor copy too (a batch's activations, read by every row tile).
    pub fn cp_async_16_l1(&mut self, dst: Reg<U32>, src: Reg<U64>, src_bytes: Reg<U32>) {
        self.cp_async(16, true, dst, src, src_bytes);
    }

    /// Starts a 4-byte copy (`cp.async.ca`, through L1): one element into a place of the
    /// kernel's choosing, so a tile can land transposed or from rows with no alignment;
    /// `src_bytes` is 4 to copy or 0 to zero-fill without reading `src`.
    pub fn cp_async_4(&mut self, dst: Reg<U32>, src: Reg<U64>, src_bytes: Reg<U32>) {
        self.cp_async(4, true, dst, src, src_bytes);
    }

    fn cp_async(&mut self, size: i64, l1: bool, dst: Reg<U32>, src: Reg<U64>, src_bytes: Reg<U32>) {
        self.push(Instr::new(
            Op::CpAsync { l1 },
            None,
            Vec::new(),
            vec![
                Operand::Addr(AddrBase::Reg(dst.vreg()), 0),
                Operand::Addr(AddrBase::Reg(src.vreg()), 0),
                Operand::Imm(Imm::Int(size)),
                Operand::Reg(src_bytes.vreg()),
            ],
        ));
    }

    /// Closes the group of copies issued since the last commit.
    pub fn cp_async_commit(&mut self) {
        self.push(Instr::new(Op::CpAsyncCommit, None, Vec::new(), Vec::new()));
    }

    /// Waits until at most `pending` committed groups of this thread are in flight (their
    /// data is then visible to this thread; a barrier makes it visible to the block).
    pub fn cp_async_wait(&mut self, pending: u32) {
        self.push(Instr::new(
            Op::CpAsyncWait(pending),
            None,
            Vec::new(),
            Vec::new(),
        ));
    }

    /// `ldmatrix.x4`: four 8x8 matrices of 16-bit values from shared memory, lanes
    /// `8q..8q+7` giving the row addresses (16 bytes each) of matrix `q`.
    pub fn ldmatrix_x4(&mut self, addr: Reg<U32>, off: i64, trans: bool) -> [Reg<U32>; 4] {
        let regs: [Reg<U32>; 4] = std::array::from_fn(|_| self.reg::<U32>());
        self.push(Instr::new(
            Op::Ldmatrix { trans },
            None,
            regs.iter().map(|r| r.vreg()).collect(),
            vec![Operand::Addr(AddrBase::Reg(addr.vreg()), off)],
        ));
        regs
    }

    /// `lo` and `hi` rounded (to nearest) into one register of two `ty` values (f16 or
    /// bf16), `lo` in the low half: an f32 accumulator fragment becomes the next
    /// product's 16-bit operand without a trip through shared memory.
    pub fn cvt_pack(&mut self, ty: PtxType, lo: Reg<F32>, hi: Reg<F32>) -> Reg<U32> {
        let d = self.reg::<U32>();
        let mut i = Instr::new(
            Op::CvtPack,
            Some(ty),
            vec![d.vreg()],
            vec![Operand::Reg(hi.vreg()), Operand::Reg(lo.vreg())],
        );
        i.rnd = Some(Rounding::Rn);
        self.push(i);
        d
    }

    /// One `m16n8k16` tensor-core product: `a` (16x16, row) times `b` (16x8, column) of
    /// `input` (f16 or bf16) pairs, plus `c`, in f32.
    pub fn mma_m16n8k16(
        &mut self,
        input: PtxType,
        a: [Reg<U32>; 4],
        b: [Reg<U32>; 2],
        c: [Reg<F32>; 4],
    ) -> [Reg<F32>; 4] {
        self.mma(input, a, b, c)
    }

    /// An `mma.sync` of type `ty` (see [`Op::Mma`]) into four fresh accumulators.
    fn mma<T: RegType>(
        &mut self,
        ty: PtxType,
        a: [Reg<U32>; 4],
        b: [Reg<U32>; 2],
        c: [Reg<T>; 4],
    ) -> [Reg<T>; 4] {
        self.mma_fragments(ty, &a, &b, c)
    }

    /// [`Self::mma`] with fragments of any length (the k16 integer product's are half).
    fn mma_fragments<T: RegType>(
        &mut self,
        ty: PtxType,
        a: &[Reg<U32>],
        b: &[Reg<U32>],
        c: [Reg<T>; 4],
    ) -> [Reg<T>; 4] {
        let d: [Reg<T>; 4] = std::array::from_fn(|_| self.reg::<T>());
        self.push(Instr::new(
            Op::Mma,
            Some(ty),
            d.iter().map(|r| r.vreg()).collect(),
            vec![
                Operand::Vector(a.iter().map(|r| r.vreg()).collect()),
                Operand::Vector(b.iter().map(|r| r.vreg()).collect()),
                Operand::Vector(c.iter().map(|r| r.vreg()).collect()),
            ],
        ));
        d
    }

    /// One `m16n8k32` integer tensor-core product: `a` (16x32, row) times `b` (32x8,
    /// column) of signed bytes, four a register with the lowest k in the low byte, plus
    /// `c`, exactly in s32. Lane `4g + t` holds `a` rows `g` (registers 0, 2) and `g + 8`
    /// (1, 3) at k `4t..4t + 4` (0, 1) and `16 + 4t..` (2, 3), `b` column `g` at the same
    /// two k runs, and the result's rows `g` (0, 1) and `g + 8` (2, 3) at columns `2t`,
    /// `2t + 1`. A dot product over k is the same under any permutation of k applied to
    /// both operands, so the two runs need not be those k: a quantized GEMV takes each
    /// lane's eight consecutive bytes instead.
    pub fn mma_m16n8k32_s8(
        &mut self,
        a: [Reg<U32>; 4],
        b: [Reg<U32>; 2],
        c: [Reg<S32>; 4],
    ) -> [Reg<S32>; 4] {
        self.mma(PtxType::S32, a, b, c)
    }

    /// [`Self::mma_m16n8k32_s8`] with `a`'s bytes unsigned (0..=255), `b`'s signed: for
    /// weights whose values need all eight bits of a byte (Q4_K's high nibbles masked in
    /// place, 16 times their value).
    pub fn mma_m16n8k32_u8s8(
        &mut self,
        a: [Reg<U32>; 4],
        b: [Reg<U32>; 2],
        c: [Reg<S32>; 4],
    ) -> [Reg<S32>; 4] {
        self.mma(PtxType::U32, a, b, c)
    }

    /// One `m16n8k16` integer tensor-core product: `a` (16x16, row) times `b` (16x8,
    /// column) of signed bytes, plus `c`, exactly in s32. Lane `4g + t` holds `a` rows `g`
    /// (register 0) and `g + 8` (1) at k `4t..4t + 4`, `b` column `g` at the same k, and
    /// the result as [`Self::mma_m16n8k32_s8`]'s. Half the k of that product, for weights
    /// whose scales change every 16 (Q6_K).
    pub fn mma_m16n8k16_s8(
        &mut self,
        a: [Reg<U32>; 2],
        b: Reg<U32>,
        c: [Reg<S32>; 4],
    ) -> [Reg<S32>; 4] {
        self.mma_fragments(PtxType::S32, &a, &[b], c)
    }

    /// One `m16n8k8` TF32 product: `a` (16x8, row) times `b` (8x8, column) of f32 values
    /// read as TF32 (one per register), plus `c`, in f32. The fragments are laid out as
    /// the 16-bit product's with each 32-bit word one value instead of a pair, so the
    /// same `ldmatrix` reads fill them from k-major tiles.
    pub fn mma_m16n8k8_tf32(
        &mut self,
        a: [Reg<U32>; 4],
        b: [Reg<U32>; 2],
        c: [Reg<F32>; 4],
    ) -> [Reg<F32>; 4] {
        self.mma_m16n8k16(PtxType::F32, a, b, c)
    }
}

#[cfg(test)]
mod tests {
    use crate::ptx::ir::{Instr, Op, Operand};
    use crate::ptx::{KernelBuilder, PtxType, Target, U32, compile, emit_module, validate};

    fn tiny(bad_mma: bool) -> crate::ptx::KernelIr {
        let mut b = KernelBuilder::new("mma_tiny");
        let g = b.param_ptr("g", PtxType::Bf16);
        let smem = b.shared_array("s", 512, 128);
        let sixteen = b.mov(16u32);
        b.cp_async_16(smem, g, sixteen);
        b.cp_async_16_l1(smem, g, sixteen);
        b.cp_async_commit();
        b.cp_async_wait(0);
        b.bar_sync();
        let a = b.ldmatrix_x4(smem, 0, false);
        let t = b.ldmatrix_x4(smem, 256, true);
        let c = std::array::from_fn(|_| b.mov(0.0f32));
        let d = b.mma_m16n8k16(PtxType::Bf16, a, [t[0], t[1]], c);
        let d = b.mma_m16n8k8_tf32(a, [t[2], t[3]], d);
        let zero = std::array::from_fn(|_| b.mov(0i32));
        let e = b.mma_m16n8k32_s8(a, [t[0], t[1]], zero);
        let e = b.mma_m16n8k32_s8(a, [t[2], t[3]], e);
        let e = b.mma_m16n8k16_s8([a[0], a[1]], t[2], e);
        b.bar_warp_sync();
        let st = b.add(smem, 64u32);
        b.st_vec(crate::ptx::Space::Shared, st, 0, &e);
        if bad_mma {
            // Three A registers instead of four.
            let x = b.reg::<U32>();
            b.push(Instr::new(
                Op::Mma,
                Some(PtxType::Bf16),
                d.iter().map(|r| r.vreg()).collect(),
                vec![
                    Operand::Vector(vec![a[0].vreg(), a[1].vreg(), x.vreg()]),
                    Operand::Vector(vec![t[0].vreg(), t[1].vreg()]),
                    Operand::Vector(d.iter().map(|r| r.vreg()).collect()),
                ],
            ));
        }
        let st = b.add(smem, 0u32);
        b.st_vec(crate::ptx::Space::Shared, st, 0, &d);
        let pair = b.cvt_pack(PtxType::F16, d[0], d[1]);
        b.st(crate::ptx::Space::Shared, st, 16, pair);
        b.ret();
        b.finish()
    }

    #[test]
    fn tensor_instructions_validate_and_emit_their_ptx_spelling() {
        let k = compile(tiny(false)).unwrap();
        let text = emit_module(Target::Sm80, &[k]);
        for want in [
            "cp.async.cg.shared.global \t[%r",
            "cp.async.ca.shared.global \t[%r",
            "cp.async.commit_group;",
            "cp.async.wait_group 0;",
            "ldmatrix.sync.aligned.m8n8.x4.shared.b16 \t{%r",
            "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 \t{%f",
            "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 \t{%f",
            "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 \t{%r",
            "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 \t{%r",
            "bar.warp.sync -1;",
            "cvt.rn.f16x2.f32 \t%r",
        ] {
            assert!(text.contains(want), "{want} missing from\n{text}");
        }
    }

    #[test]
    fn an_mma_with_the_wrong_operand_shapes_is_rejected() {
        let faults = validate::validate(&tiny(true));
        assert!(
            faults.iter().any(|f| f.to_string().contains("mma reads")),
            "{faults:?}"
        );
    }
}
