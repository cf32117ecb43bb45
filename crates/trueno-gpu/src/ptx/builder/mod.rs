//! The kernel builder: typed registers in, IR out. Every method appends instructions; the
//! Rust types of the registers make a type mix-up a compile error.

mod control;
mod hopper;
mod memory;
mod tensor;

use super::ir::{
    AddrBase, Cmp, Dim, Imm, Instr, KernelIr, MulMode, Op, Operand, Param, Rounding, SpecialReg,
};
use super::types::{
    Arith, F32, F64, Float, Int, Pred, PtxType, Reg, RegType, S32, Space, U16, U32, U64,
};

/// A source operand of type `T`: a register or an immediate of the same type.
#[derive(Clone, Copy, Debug)]
pub enum Src<T: RegType> {
    /// A register.
    Reg(Reg<T>),
    /// An immediate.
    Imm(Imm),
}

impl<T: RegType> Src<T> {
    fn operand(self) -> Operand {
        match self {
            Src::Reg(r) => Operand::Reg(r.vreg()),
            Src::Imm(i) => Operand::Imm(i),
        }
    }
}

impl<T: RegType> From<Reg<T>> for Src<T> {
    fn from(r: Reg<T>) -> Self {
        Src::Reg(r)
    }
}
impl From<f32> for Src<F32> {
    fn from(v: f32) -> Self {
        Src::Imm(Imm::F32(v))
    }
}
impl From<f64> for Src<F64> {
    fn from(v: f64) -> Self {
        Src::Imm(Imm::F64(v))
    }
}
impl From<u32> for Src<U32> {
    fn from(v: u32) -> Self {
        Src::Imm(Imm::Int(v.into()))
    }
}
impl From<i32> for Src<S32> {
    fn from(v: i32) -> Self {
        Src::Imm(Imm::Int(v.into()))
    }
}
impl From<u16> for Src<U16> {
    fn from(v: u16) -> Self {
        Src::Imm(Imm::Int(v.into()))
    }
}
impl From<u64> for Src<U64> {
    fn from(v: u64) -> Self {
        // PTX integer immediates are 64-bit; the bit pattern is what matters.
        Src::Imm(Imm::Int(v as i64))
    }
}

/// Builds one kernel's IR.
#[derive(Debug)]
pub struct KernelBuilder {
    ir: KernelIr,
    next_label: u32,
    guard: Option<(Reg<Pred>, bool)>,
}

impl KernelBuilder {
    /// Starts a kernel named `name` (the `.entry` symbol).
    pub fn new(name: impl Into<String>) -> Self {
        KernelBuilder {
            ir: KernelIr {
                name: name.into(),
                params: Vec::new(),
                shared: Vec::new(),
                dynamic_shared: false,
                body: Vec::new(),
                max_threads: None,
                min_blocks: None,
                next_reg: 0,
            },
            next_label: 0,
            guard: None,
        }
    }

    /// The finished IR (not yet optimised or allocated; see [`super::compile`]).
    pub fn finish(self) -> KernelIr {
        self.ir
    }

    /// Promises the kernel is never launched with more than `n` threads per block
    /// (`.maxntid`), which lets ptxas budget registers.
    pub fn max_threads(&mut self, n: u32) {
        self.ir.max_threads = Some(n);
    }

    /// Promises at least `n` blocks of `max_threads` fit on one multiprocessor
    /// (`.minnctapersm`), which caps registers at entry.
    pub fn min_blocks(&mut self, n: u32) {
        self.ir.min_blocks = Some(n);
    }

    /// A fresh register.
    pub fn reg<T: RegType>(&mut self) -> Reg<T> {
        let r = Reg::new(self.ir.next_reg);
        self.ir.next_reg += 1;
        r
    }

    /// Appends a raw instruction (the current guard, if any, is applied).
    pub fn push(&mut self, mut i: Instr) {
        if i.guard.is_none() {
            i.guard = self.guard.map(|(p, n)| (p.vreg(), n));
        }
        self.ir.body.push(i);
    }

    fn op1<D: RegType>(
        &mut self,
        op: Op,
        ty: PtxType,
        rnd: Option<Rounding>,
        srcs: Vec<Operand>,
    ) -> Reg<D> {
        let d = self.reg::<D>();
        let mut i = Instr::new(op, Some(ty), vec![d.vreg()], srcs);
        i.rnd = rnd;
        self.push(i);
        d
    }

    // ---- parameters and special registers ------------------------------------------

    fn param(&mut self, name: &str, ty: PtxType, pointee: Option<PtxType>) -> Operand {
        self.ir.params.push(Param {
            name: name.into(),
            ty,
            pointee,
            tensor_map: false,
        });
        Operand::Addr(AddrBase::Sym(name.into()), 0)
    }

    /// A pointer parameter to device memory holding `elem`s, converted to a global address.
    pub fn param_ptr(&mut self, name: &str, elem: PtxType) -> Reg<U64> {
        let a = self.param(name, PtxType::U64, Some(elem));
        let generic: Reg<U64> = self.op1(Op::Ld(Space::Param), PtxType::U64, None, vec![a]);
        self.op1(
            Op::CvtaToGlobal,
            PtxType::U64,
            None,
            vec![Operand::Reg(generic.vreg())],
        )
    }

    /// A `u32` parameter (sizes, strides).
    pub fn param_u32(&mut self, name: &str) -> Reg<U32> {
        let a = self.param(name, PtxType::U32, None);
        self.op1(Op::Ld(Space::Param), PtxType::U32, None, vec![a])
    }

    /// An `f32` parameter (scales, epsilons).
    pub fn param_f32(&mut self, name: &str) -> Reg<F32> {
        let a = self.param(name, PtxType::F32, None);
        self.op1(Op::Ld(Space::Param), PtxType::F32, None, vec![a])
    }

    /// Reads a 32-bit special register.
    pub fn special(&mut self, s: SpecialReg) -> Reg<U32> {
        debug_assert!(s != SpecialReg::GlobalTimer, "%globaltimer is 64 bits");
        self.op1(Op::Mov, PtxType::U32, None, vec![Operand::Special(s)])
    }

    /// `%globaltimer`: the GPU's nanosecond clock (read afresh each time).
    pub fn global_timer(&mut self) -> Reg<U64> {
        let t = SpecialReg::GlobalTimer;
        self.op1(Op::Mov, PtxType::U64, None, vec![Operand::Special(t)])
    }

    /// `%tid.x`
    pub fn tid_x(&mut self) -> Reg<U32> {
        self.special(SpecialReg::Tid(Dim::X))
    }
    /// `%ntid.x`
    pub fn ntid_x(&mut self) -> Reg<U32> {
        self.special(SpecialReg::Ntid(Dim::X))
    }
    /// `%ctaid.x`
    pub fn ctaid_x(&mut self) -> Reg<U32> {
        self.special(SpecialReg::Ctaid(Dim::X))
    }
    /// `%ctaid.y`
    pub fn ctaid_y(&mut self) -> Reg<U32> {
        self.special(SpecialReg::Ctaid(Dim::Y))
    }
    /// `%nctaid.x`
    pub fn nctaid_x(&mut self) -> Reg<U32> {
        self.special(SpecialReg::Nctaid(Dim::X))
    }

    // ---- moves and arithmetic --------------------------------------------------------

    /// A register holding `v`.
    pub fn mov<T: RegType>(&mut self, v: impl Into<Src<T>>) -> Reg<T> {
        self.op1(Op::Mov, T::TY, None, vec![v.into().operand()])
    }

    /// Overwrites `dst` (loop counters, accumulators).
    pub fn assign<T: RegType>(&mut self, dst: Reg<T>, v: impl Into<Src<T>>) {
        self.push(Instr::new(
            Op::Mov,
            Some(T::TY),
            vec![dst.vreg()],
            vec![v.into().operand()],
        ));
    }

    fn bin<T: RegType>(&mut self, op: Op, rnd: Option<Rounding>, a: Src<T>, b: Src<T>) -> Reg<T> {
        self.op1(op, T::TY, rnd, vec![a.operand(), b.operand()])
    }

    /// `a + b`
    pub fn add<T: Arith>(&mut self, a: impl Into<Src<T>>, b: impl Into<Src<T>>) -> Reg<T> {
        self.bin(Op::Add, None, a.into(), b.into())
    }
    /// `a - b`
    pub fn sub<T: Arith>(&mut self, a: impl Into<Src<T>>, b: impl Into<Src<T>>) -> Reg<T> {
        self.bin(Op::Sub, None, a.into(), b.into())
    }
    /// `a * b` (low half for integers).
    pub fn mul<T: Arith>(&mut self, a: impl Into<Src<T>>, b: impl Into<Src<T>>) -> Reg<T> {
        let mode = (!T::TY.is_float()).then_some(MulMode::Lo);
        self.bin(Op::Mul(mode), None, a.into(), b.into())
    }
    /// `min(a, b)`; for floats a NaN operand yields the other (IEEE minNum).
    pub fn min<T: Arith>(&mut self, a: impl Into<Src<T>>, b: impl Into<Src<T>>) -> Reg<T> {
        self.bin(Op::Min, None, a.into(), b.into())
    }
    /// `max(a, b)`; for floats a NaN operand yields the other (IEEE maxNum).
    pub fn max<T: Arith>(&mut self, a: impl Into<Src<T>>, b: impl Into<Src<T>>) -> Reg<T> {
        self.bin(Op::Max, None, a.into(), b.into())
    }
    /// Full 64-bit product of two `u32`s (index to byte offset).
    pub fn mul_wide(&mut self, a: Reg<U32>, b: impl Into<Src<U32>>) -> Reg<U64> {
        let b = b.into().operand();
        self.op1(
            Op::Mul(Some(MulMode::Wide)),
            PtxType::U32,
            None,
            vec![Operand::Reg(a.vreg()), b],
        )
    }
    /// `a * b + c` (integers, low half).
    pub fn mad<T: Int>(
        &mut self,
        a: impl Into<Src<T>>,
        b: impl Into<Src<T>>,
        c: impl Into<Src<T>>,
    ) -> Reg<T> {
        let srcs = vec![a.into().operand(), b.into().operand(), c.into().operand()];
        self.op1(Op::Mad(MulMode::Lo), T::TY, None, srcs)
    }
    /// Fused `a * b + c`, rounded once.
    pub fn fma<T: Float>(
        &mut self,
        a: impl Into<Src<T>>,
        b: impl Into<Src<T>>,
        c: impl Into<Src<T>>,
    ) -> Reg<T> {
        let srcs = vec![a.into().operand(), b.into().operand(), c.into().operand()];
        self.op1(Op::Fma, T::TY, Some(Rounding::Rn), srcs)
    }
    /// `a / b` correctly rounded.
    pub fn div<T: Float>(&mut self, a: impl Into<Src<T>>, b: impl Into<Src<T>>) -> Reg<T> {
        self.bin(Op::Div, Some(Rounding::Rn), a.into(), b.into())
    }
    /// `a / b` within 2 ulp over the full range (`div.full`: a reciprocal and a
    /// product, where the correctly rounded division takes a refinement and a slow-path
    /// check).
    pub fn div_full(&mut self, a: impl Into<Src<F32>>, b: impl Into<Src<F32>>) -> Reg<F32> {
        self.bin(Op::Div, Some(Rounding::Full), a.into(), b.into())
    }
    /// Integer `a / b`.
    pub fn div_int<T: Int>(&mut self, a: impl Into<Src<T>>, b: impl Into<Src<T>>) -> Reg<T> {
        self.bin(Op::Div, None, a.into(), b.into())
    }
    /// Integer `a % b`.
    pub fn rem<T: Int>(&mut self, a: impl Into<Src<T>>, b: impl Into<Src<T>>) -> Reg<T> {
        self.bin(Op::Rem, None, a.into(), b.into())
    }

    fn unary<T: RegType>(&mut self, op: Op, rnd: Option<Rounding>, a: Src<T>) -> Reg<T> {
        self.op1(op, T::TY, rnd, vec![a.operand()])
    }

    /// `1 / a` with the given rounding (`Rn` exact, `Approx` fast).
    pub fn rcp<T: Float>(&mut self, a: impl Into<Src<T>>, rnd: Rounding) -> Reg<T> {
        self.unary(Op::Rcp, Some(rnd), a.into())
    }
    /// `sqrt(a)` with the given rounding.
    pub fn sqrt<T: Float>(&mut self, a: impl Into<Src<T>>, rnd: Rounding) -> Reg<T> {
        self.unary(Op::Sqrt, Some(rnd), a.into())
    }
    /// Approximate `1 / sqrt(a)`.
    pub fn rsqrt(&mut self, a: impl Into<Src<F32>>) -> Reg<F32> {
        self.unary(Op::Rsqrt, Some(Rounding::Approx), a.into())
    }
    /// Approximate `2^a` (2 ulp, full range).
    pub fn ex2(&mut self, a: impl Into<Src<F32>>) -> Reg<F32> {
        self.unary(Op::Ex2, Some(Rounding::Approx), a.into())
    }
    /// Approximate `2^a` with subnormal inputs and results flushed to zero: one
    /// `MUFU.EX2`, where the full-range form costs a compare and two predicated
    /// multiplies around it. For weights such as softmax probabilities, where a result
    /// under 2^-126 is as good as 0.
    pub fn ex2_ftz(&mut self, a: impl Into<Src<F32>>) -> Reg<F32> {
        self.unary(Op::Ex2, Some(Rounding::ApproxFtz), a.into())
    }
    /// Approximate `sin(a)` (absolute error about 2^-20.9 for `a` in [-pi, pi]; reduce
    /// larger arguments first).
    pub fn sin(&mut self, a: impl Into<Src<F32>>) -> Reg<F32> {
        self.unary(Op::Sin, Some(Rounding::Approx), a.into())
    }
    /// Approximate `cos(a)` (as [`Self::sin`]).
    pub fn cos(&mut self, a: impl Into<Src<F32>>) -> Reg<F32> {
        self.unary(Op::Cos, Some(Rounding::Approx), a.into())
    }
    /// Approximate `log2(a)`.
    pub fn lg2(&mut self, a: impl Into<Src<F32>>) -> Reg<F32> {
        self.unary(Op::Lg2, Some(Rounding::Approx), a.into())
    }
    /// `-a`
    pub fn neg<T: Arith>(&mut self, a: impl Into<Src<T>>) -> Reg<T> {
        self.unary(Op::Neg, None, a.into())
    }
    /// `|a|`
    pub fn abs<T: Arith>(&mut self, a: impl Into<Src<T>>) -> Reg<T> {
        self.unary(Op::Abs, None, a.into())
    }
    fn bitwise<T: Int>(&mut self, op: Op, a: Src<T>, b: Src<T>) -> Reg<T> {
        self.op1(op, bits_of(T::TY), None, vec![a.operand(), b.operand()])
    }

    /// Bitwise and.
    pub fn and<T: Int>(&mut self, a: impl Into<Src<T>>, b: impl Into<Src<T>>) -> Reg<T> {
        self.bitwise(Op::And, a.into(), b.into())
    }
    /// Bitwise or.
    pub fn or<T: Int>(&mut self, a: impl Into<Src<T>>, b: impl Into<Src<T>>) -> Reg<T> {
        self.bitwise(Op::Or, a.into(), b.into())
    }
    /// Bitwise xor.
    pub fn xor<T: Int>(&mut self, a: impl Into<Src<T>>, b: impl Into<Src<T>>) -> Reg<T> {
        self.bitwise(Op::Xor, a.into(), b.into())
    }
    /// Shift left by a 32-bit amount.
    pub fn shl<T: Int>(&mut self, a: Reg<T>, by: impl Into<Src<U32>>) -> Reg<T> {
        self.op1(
            Op::Shl,
            bits_of(T::TY),
            None,
            vec![Operand::Reg(a.vreg()), by.into().operand()],
        )
    }
    /// Shift right (arithmetic for signed types).
    pub fn shr<T: Int>(&mut self, a: Reg<T>, by: impl Into<Src<U32>>) -> Reg<T> {
        self.op1(
            Op::Shr,
            T::TY,
            None,
            vec![Operand::Reg(a.vreg()), by.into().operand()],
        )
    }

    /// Converts between types; float<->int and narrowing float conversions need a
    /// rounding (validation rejects a missing one).
    pub fn cvt<D: RegType, S: RegType>(&mut self, a: Reg<S>, rnd: Option<Rounding>) -> Reg<D> {
        self.op1(
            Op::Cvt { from: S::TY },
            D::TY,
            rnd,
            vec![Operand::Reg(a.vreg())],
        )
    }

    /// Byte permute (`prmt.b32`): byte `i` of the result is byte `(selector >> 4i) & 7` of
    /// the eight bytes `b:a` (`a` is bytes 0-3). One instruction places a quant byte under
    /// a float exponent, where a `cvt` from an integer runs at a quarter of the rate. The
    /// selector may be a register (a per-lane byte shift, say).
    pub fn prmt(
        &mut self,
        a: Reg<U32>,
        b: impl Into<Src<U32>>,
        selector: impl Into<Src<U32>>,
    ) -> Reg<U32> {
        let srcs = vec![
            Operand::Reg(a.vreg()),
            b.into().operand(),
            selector.into().operand(),
        ];
        self.op1(Op::Prmt, PtxType::B32, None, srcs)
    }

    /// `c + sum_k a[k] * b[k]` over the four bytes of `a` and `b`, exactly (`dp4a`): four
    /// 8-bit products per instruction, the integer path of quantized dot products.
    /// `a_signed` / `b_signed` say how each operand's bytes are read.
    pub fn dp4a(
        &mut self,
        a: Reg<U32>,
        b: Reg<U32>,
        c: impl Into<Src<S32>>,
        a_signed: bool,
        b_signed: bool,
    ) -> Reg<S32> {
        let srcs = vec![
            Operand::Reg(a.vreg()),
            Operand::Reg(b.vreg()),
            c.into().operand(),
        ];
        self.op1(Op::Dp4a { a_signed, b_signed }, PtxType::S32, None, srcs)
    }

    /// Reinterprets the bits of a 32-bit register (`mov.b32`).
    pub fn bitcast32<D: RegType, S: RegType>(&mut self, a: Reg<S>) -> Reg<D> {
        self.op1(Op::Mov, PtxType::B32, None, vec![Operand::Reg(a.vreg())])
    }

    /// Reinterprets the bits of a 16-bit register (`mov.b16`): raw half-precision bits
    /// loaded as `u16` become an `f16` operand for `cvt`.
    pub fn bitcast16<D: RegType, S: RegType>(&mut self, a: Reg<S>) -> Reg<D> {
        self.op1(Op::Mov, PtxType::B16, None, vec![Operand::Reg(a.vreg())])
    }

    // ---- predicates --------------------------------------------------------------

    /// `a cmp b` (unsigned comparisons for unsigned types).
    pub fn setp<T: RegType>(
        &mut self,
        cmp: Cmp,
        a: impl Into<Src<T>>,
        b: impl Into<Src<T>>,
    ) -> Reg<Pred> {
        self.op1(
            Op::Setp(cmp),
            T::TY,
            None,
            vec![a.into().operand(), b.into().operand()],
        )
    }
    /// `p ? a : b`
    pub fn selp<T: RegType>(
        &mut self,
        a: impl Into<Src<T>>,
        b: impl Into<Src<T>>,
        p: Reg<Pred>,
    ) -> Reg<T> {
        self.op1(
            Op::Selp,
            T::TY,
            None,
            vec![
                a.into().operand(),
                b.into().operand(),
                Operand::Reg(p.vreg()),
            ],
        )
    }
    /// `a && b` on predicates.
    pub fn and_pred(&mut self, a: Reg<Pred>, b: Reg<Pred>) -> Reg<Pred> {
        self.op1(
            Op::And,
            PtxType::Pred,
            None,
            vec![Operand::Reg(a.vreg()), Operand::Reg(b.vreg())],
        )
    }
    /// `a || b` on predicates.
    pub fn or_pred(&mut self, a: Reg<Pred>, b: Reg<Pred>) -> Reg<Pred> {
        self.op1(
            Op::Or,
            PtxType::Pred,
            None,
            vec![Operand::Reg(a.vreg()), Operand::Reg(b.vreg())],
        )
    }

    /// `!a` on predicates.
    pub fn not_pred(&mut self, a: Reg<Pred>) -> Reg<Pred> {
        self.op1(Op::Not, PtxType::Pred, None, vec![Operand::Reg(a.vreg())])
    }
}

fn bits_of(ty: PtxType) -> PtxType {
    match ty.bits() {
        16 => PtxType::B16,
        64 => PtxType::B64,
        _ => PtxType::B32,
    }
}
