//! The kernel IR: a flat list of instructions over virtual registers, with labels and
//! branches for control flow. Every pass (validation, optimisation, register allocation)
//! and the one emitter read this form.

pub use super::ir_kernel::{DYNAMIC_SHARED, KernelIr, Param, SharedDecl};
use super::types::{PtxType, Space, VReg};

/// Immediate operands.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Imm {
    /// Integer immediate (printed in decimal).
    Int(i64),
    /// f32 immediate (printed as exact hex `0fXXXXXXXX`).
    F32(f32),
    /// f64 immediate (printed as exact hex `0dXXXXXXXXXXXXXXXX`).
    F64(f64),
}

/// Hardware registers read with `mov`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SpecialReg {
    /// `%tid.x|y|z`
    Tid(Dim),
    /// `%ntid.x|y|z`
    Ntid(Dim),
    /// `%ctaid.x|y|z`
    Ctaid(Dim),
    /// `%nctaid.x|y|z`
    Nctaid(Dim),
    /// `%laneid`
    LaneId,
    /// `%warpid`
    WarpId,
    /// `%globaltimer`: nanoseconds, 64 bits.
    GlobalTimer,
    /// `%nsmid`: one more than the highest multiprocessor id (the multiprocessor count,
    /// or a little over it where ids have gaps).
    Nsmid,
}

/// Grid/block dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    /// x
    X,
    /// y
    Y,
    /// z
    Z,
}

impl SpecialReg {
    /// PTX spelling.
    pub fn name(self) -> String {
        let d = |d: Dim| match d {
            Dim::X => "x",
            Dim::Y => "y",
            Dim::Z => "z",
        };
        match self {
            SpecialReg::Tid(x) => format!("%tid.{}", d(x)),
            SpecialReg::Ntid(x) => format!("%ntid.{}", d(x)),
            SpecialReg::Ctaid(x) => format!("%ctaid.{}", d(x)),
            SpecialReg::Nctaid(x) => format!("%nctaid.{}", d(x)),
            SpecialReg::LaneId => "%laneid".into(),
            SpecialReg::WarpId => "%warpid".into(),
            SpecialReg::GlobalTimer => "%globaltimer".into(),
            SpecialReg::Nsmid => "%nsmid".into(),
        }
    }
}

/// A branch target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Label(pub u32);

/// Base of a memory address.
#[derive(Clone, Debug, PartialEq)]
pub enum AddrBase {
    /// A register holding the address.
    Reg(VReg),
    /// A named variable (kernel parameter or shared array).
    Sym(String),
}

/// Instruction operands.
#[derive(Clone, Debug, PartialEq)]
pub enum Operand {
    /// A virtual register.
    Reg(VReg),
    /// An immediate.
    Imm(Imm),
    /// `[base+offset]`
    Addr(AddrBase, i64),
    /// `{a, b, ...}` for vector loads and stores.
    Vector(Vec<VReg>),
    /// A branch target.
    Label(Label),
    /// A special register.
    Special(SpecialReg),
    /// The address of a named variable (`mov.u32 %r, smem;`).
    Sym(String),
}

impl Operand {
    /// Registers this operand reads.
    pub fn regs(&self) -> Vec<VReg> {
        match self {
            Operand::Reg(r) => vec![*r],
            Operand::Addr(AddrBase::Reg(r), _) => vec![*r],
            Operand::Vector(v) => v.clone(),
            _ => Vec::new(),
        }
    }
}

/// Rounding and precision modifiers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rounding {
    /// Round to nearest even (`.rn`).
    Rn,
    /// Towards zero (`.rz`).
    Rz,
    /// Towards -inf (`.rm`).
    Rm,
    /// Towards +inf (`.rp`).
    Rp,
    /// Float to integer, nearest (`.rni`).
    Rni,
    /// Float to integer, towards zero (`.rzi`).
    Rzi,
    /// Float to integer, towards -inf (`.rmi`).
    Rmi,
    /// Fast approximation (`.approx`), with denormals flushed (`.approx.ftz`).
    Approx,
    /// `.approx.ftz`
    ApproxFtz,
    /// `div.full` (2 ulp, full range).
    Full,
}

impl Rounding {
    /// PTX spelling without the leading dot.
    pub fn name(self) -> &'static str {
        match self {
            Rounding::Rn => "rn",
            Rounding::Rz => "rz",
            Rounding::Rm => "rm",
            Rounding::Rp => "rp",
            Rounding::Rni => "rni",
            Rounding::Rzi => "rzi",
            Rounding::Rmi => "rmi",
            Rounding::Approx => "approx",
            Rounding::ApproxFtz => "approx.ftz",
            Rounding::Full => "full",
        }
    }
}

/// Integer multiply width.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MulMode {
    /// Low half (`.lo`).
    Lo,
    /// High half (`.hi`).
    Hi,
    /// Double-width result (`.wide`).
    Wide,
}

/// Comparisons for `setp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cmp {
    /// ==
    Eq,
    /// !=
    Ne,
    /// <
    Lt,
    /// <=
    Le,
    /// >
    Gt,
    /// >=
    Ge,
    /// Unordered or != (true when either is NaN): float only.
    Neu,
    /// Unordered (either is NaN): float only.
    Nan,
    /// Unordered or > (true when either is NaN): float only.
    Gtu,
}

impl Cmp {
    /// PTX spelling; unsigned comparisons of integers use lo/ls/hi/hs.
    pub fn name(self, ty: PtxType) -> &'static str {
        let unsigned = !ty.is_float() && !ty.is_signed();
        match (self, unsigned) {
            (Cmp::Eq, _) => "eq",
            (Cmp::Ne, _) => "ne",
            (Cmp::Lt, true) => "lo",
            (Cmp::Le, true) => "ls",
            (Cmp::Gt, true) => "hi",
            (Cmp::Ge, true) => "hs",
            (Cmp::Lt, false) => "lt",
            (Cmp::Le, false) => "le",
            (Cmp::Gt, false) => "gt",
            (Cmp::Ge, false) => "ge",
            (Cmp::Neu, _) => "neu",
            (Cmp::Nan, _) => "nan",
            (Cmp::Gtu, _) => "gtu",
        }
    }
}

/// `shfl.sync` modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShflMode {
    /// Butterfly (xor lane).
    Bfly,
    /// From lane - delta.
    Up,
    /// From lane + delta.
    Down,
    /// From an absolute lane.
    Idx,
}

/// Atomic operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AtomOp {
    /// `add`
    Add,
    /// `max` (integers)
    Max,
    /// `min` (integers)
    Min,
    /// `exch`
    Exch,
    /// `cas` (compare and swap; two value operands)
    Cas,
}

/// `vote.sync` modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VoteMode {
    /// Any lane true.
    Any,
    /// All lanes true.
    All,
    /// A bitmask of the lanes' predicates.
    Ballot,
}

/// Opcodes. Operand layout per opcode is documented on each variant; the builder is the
/// normal way to produce them.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// `mov` dst <- src (register, immediate, special register or symbol).
    Mov,
    /// `add` dst <- a + b
    Add,
    /// `sub` dst <- a - b
    Sub,
    /// `mul` dst <- a * b (mode for integers)
    Mul(Option<MulMode>),
    /// `mad` dst <- a * b + c (integers)
    Mad(MulMode),
    /// `fma` dst <- a * b + c (floats, rounding required)
    Fma,
    /// `min`
    Min,
    /// `max`
    Max,
    /// `div` (floats need a rounding or `.approx`/`.full`)
    Div,
    /// `rem` (integers)
    Rem,
    /// `rcp` (rounding or approx)
    Rcp,
    /// `sqrt` (rounding or approx)
    Sqrt,
    /// `rsqrt.approx`
    Rsqrt,
    /// `ex2.approx` (2^x)
    Ex2,
    /// `lg2.approx` (log2 x)
    Lg2,
    /// `sin.approx` (argument in radians, best within [-pi, pi])
    Sin,
    /// `cos.approx` (argument in radians, best within [-pi, pi])
    Cos,
    /// `neg`
    Neg,
    /// `abs`
    Abs,
    /// `and`
    And,
    /// `or`
    Or,
    /// `xor`
    Xor,
    /// `not`
    Not,
    /// `shl` (shift amount is 32-bit)
    Shl,
    /// `shr` (arithmetic for signed types)
    Shr,
    /// `prmt.b32` dst <- bytes of (a, b) picked by a selector (srcs: a, b, selector)
    Prmt,
    /// `dp4a.{a}.{b}` dst <- c + the dot product of the four bytes of a and of b, each
    /// byte signed or unsigned as named (srcs: a, b, c; dst and c s32 when either is
    /// signed)
    Dp4a {
        /// The bytes of `a` are signed.
        a_signed: bool,
        /// The bytes of `b` are signed.
        b_signed: bool,
    },
    /// `cvt.{dst}.{from}`
    Cvt {
        /// Source type.
        from: PtxType,
    },
    /// `cvt.rn.{ty}x2.f32` dst <- two f32 rounded into one b32 of two 16-bit floats
    /// (ty: f16 or bf16; srcs: the upper half's value, then the lower's).
    CvtPack,
    /// `cvta.to.global.u64` dst <- generic address
    CvtaToGlobal,
    /// `setp.cmp.ty` pred <- a cmp b
    Setp(Cmp),
    /// `selp.ty` dst <- p ? a : b (srcs: a, b, p)
    Selp,
    /// `ld.space.ty` dst(s) <- `[addr]`
    Ld(Space),
    /// `st.space.ty` `[addr]` <- value(s) (srcs: addr, value)
    St(Space),
    /// `bar.sync 0`
    BarSync,
    /// `bar.warp.sync -1`: the warp's lanes meet; orders their shared-memory accesses.
    BarWarpSync,
    /// `bar.sync id, threads`: a named barrier for a subset of the block (a warpgroup),
    /// `threads` a multiple of 32. Validation's barrier-safety check covers `bar.sync 0`
    /// only; the subsets are the kernel's to keep apart.
    BarSyncNamed {
        /// Barrier 1-15 (0 is the block's).
        id: u32,
        /// Threads that arrive.
        threads: u32,
    },
    /// `shfl.sync.mode.b32` dst <- (a, b, c, mask)
    Shfl(ShflMode),
    /// `atom.space.op.ty` dst <- `[addr]` (srcs: addr, value, and new for cas)
    Atom(Space, AtomOp),
    /// `vote.sync.mode` dst <- (pred, mask)
    Vote(VoteMode),
    /// `bra` / `bra.uni` to a label (srcs: label). `uni` promises all threads of the
    /// block take the same direction; validation relies on it for barrier safety.
    Bra {
        /// Block-uniform branch.
        uni: bool,
    },
    /// A label definition (srcs: label).
    Place,
    /// `cp.async.{cg,ca}.shared.global [dst], [src], size, src_bytes`: a 4- or 16-byte
    /// global to shared copy in the background, zero-filled past `src_bytes` (srcs:
    /// shared address, global address, size, src_bytes).
    CpAsync {
        /// Through L1 (`.ca`; 4-byte copies always are).
        l1: bool,
    },
    /// `cp.async.commit_group`: closes the group of copies issued since the last one.
    CpAsyncCommit,
    /// `cp.async.wait_group n`: waits until at most `n` committed groups are in flight.
    CpAsyncWait(u32),
    /// `ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16`: four 8x8 b16 matrices, one
    /// row address per lane (lanes 8q..8q+7 address matrix q), into four b32 registers.
    Ldmatrix {
        /// Transposed (`.trans`): each lane gets a column pair instead of a row pair.
        trans: bool,
    },
    /// `mma.sync.aligned.m16n8k16.row.col.f32.{ty}.{ty}.f32` (ty: f16 or bf16): four f32
    /// results <- (a: four b32, b: two b32, c: four f32). With `ty` f32 the operands are
    /// TF32: `m16n8k8.row.col.f32.tf32.tf32.f32`, the same registers. `ty` s32: signed
    /// bytes, four a register (`m16n8k32.row.col.s32.s8.s8.s32`), c and results s32, or
    /// `m16n8k16` with two A registers and one B; `ty` u32: A's bytes unsigned (`.u8.s8`).
    Mma,
    /// `mbarrier.init.shared::cta.b64 [bar], count` (srcs: barrier address, arrival
    /// count immediate).
    MbarInit,
    /// `mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], bytes`: one arrival that also
    /// tells the barrier to wait for `bytes` of copies (srcs: address, bytes immediate).
    MbarArriveExpectTx,
    /// `mbarrier.arrive.shared::cta.b64 _, [bar]` (srcs: address).
    MbarArrive,
    /// `mbarrier.try_wait.parity.shared::cta.b64 p, [bar], parity`: `p` is true once the
    /// phase of that parity has completed (dst: pred; srcs: address, parity u32).
    MbarTryWait,
    /// `fence.mbarrier_init.release.cluster`: barrier initialisations visible to the
    /// copy engine before anyone uses them.
    FenceMbarInit,
    /// `fence.proxy.async.shared::cta`: this thread's ordinary shared-memory writes
    /// made visible to the async proxy (`wgmma`'s operand reads, the copy engine).
    FenceProxyAsync,
    /// `cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
    /// [dst], [map, {x, y}], [bar]`: one box of a tensor map copied by the copy engine,
    /// its bytes counted on the barrier (srcs: shared dst, map address (u64 generic),
    /// x (innermost coordinate), y, barrier address).
    TmaLoad2d,
    /// `cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [dst], [src],
    /// bytes, [bar]`: `bytes` (a multiple of 16, both addresses 16-byte aligned) copied
    /// by the copy engine, counted on the barrier (srcs: shared dst, global src (u64),
    /// bytes (u32), barrier address). sm_90 and later.
    BulkCopy,
    /// `cp.async.bulk.prefetch.tensor.2d.L2.global.tile [map, {x, y}]`: one box of a
    /// tensor map asked into L2 by the copy engine; nothing waits for it (srcs: map
    /// address (u64 generic), x (innermost coordinate), y).
    TmaPrefetch2d,
    /// `cvta.param.u64 dst, sym`: the generic address of a kernel parameter (a tensor map
    /// passed by value).
    CvtaParam,
    /// `wgmma.fence.sync.aligned`: orders register accesses before warpgroup products.
    WgmmaFence,
    /// `wgmma.commit_group.sync.aligned`: closes a group of warpgroup products.
    WgmmaCommit,
    /// `wgmma.wait_group.sync.aligned n`: waits until at most `n` groups are in flight.
    /// Its sources (not printed) are registers a product in flight reads as its A
    /// fragment: listed here, they stay live (and unshared) until the wait.
    WgmmaWait(u32),
    /// `wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ty}.{ty} {d}, a_desc, b_desc, p, 1,
    /// 1, 0, trans_b`: a warpgroup's 64 x n product from two shared-memory descriptors,
    /// added to `d` when `p` (dsts: the n / 2 accumulators; srcs: the same accumulators,
    /// A's descriptor, B's, the scale-d predicate). With `ty` f32 the operands are read
    /// as TF32: `m64n{n}k8.f32.tf32.tf32`, both k-major, no transpose flags.
    Wgmma {
        /// The product's width (8 to 256, a multiple of 8).
        n: u32,
        /// B stored n-major (row-major `k x n`) rather than k-major.
        trans_b: bool,
        /// A is a fragment in four 32-bit registers (a vector source in place of its
        /// descriptor; 16-bit inputs only), as `mma.sync`'s A operand per warp: the
        /// form whose A was computed in registers (FlashAttention's probabilities).
        a_regs: bool,
    },
    /// `setmaxnreg.{inc,dec}.sync.aligned.u32 regs`: a warpgroup takes or gives back
    /// registers (producer warps need few, the product warps many).
    SetMaxNreg {
        /// Raise (true) or lower the limit.
        inc: bool,
        /// The new per-thread limit (24 to 256, a multiple of 8).
        regs: u32,
    },
    /// `griddepcontrol.wait`: waits until the grids this one depends on have completed
    /// and their memory is visible. Under programmatic dependent launch (the driver's
    /// `Function::overlaps_previous`) a grid may start while the stream's previous kernel
    /// still runs: nothing it reads from an earlier kernel, and nothing it writes, may
    /// come before this. Written for sm_90 and later; for sm_80, where launches are
    /// always serialised, it is left out.
    GridDepWait,
    /// `griddepcontrol.launch_dependents`: the stream's next kernel, if launched with
    /// programmatic dependent launch, may start once every block of this grid has issued
    /// this or exited (its blocks then run up to their own [`Op::GridDepWait`]). sm_90
    /// and later, as above.
    GridDepLaunch,
    /// `ret`: the thread exits.
    Ret,
}

impl Op {
    /// Instructions that must stay even if nothing reads their result.
    pub fn has_side_effects(&self) -> bool {
        matches!(
            self,
            Op::St(_)
                | Op::BarSync
                | Op::BarWarpSync
                | Op::BarSyncNamed { .. }
                | Op::Atom(..)
                | Op::Bra { .. }
                | Op::Place
                | Op::Ret
                | Op::Shfl(_)
                | Op::Vote(_)
                | Op::CpAsync { .. }
                | Op::CpAsyncCommit
                | Op::CpAsyncWait(_)
                | Op::MbarInit
                | Op::MbarArriveExpectTx
                | Op::MbarArrive
                | Op::FenceMbarInit
                | Op::FenceProxyAsync
                | Op::TmaLoad2d
                | Op::BulkCopy
                | Op::TmaPrefetch2d
                | Op::WgmmaFence
                | Op::WgmmaCommit
                | Op::WgmmaWait(_)
                | Op::Wgmma { .. }
                | Op::SetMaxNreg { .. }
                | Op::GridDepWait
                | Op::GridDepLaunch
        )
    }
}

/// One instruction: optional guard predicate, opcode, modifiers, type, operands.
#[derive(Clone, Debug, PartialEq)]
pub struct Instr {
    /// `@p` (false) or `@!p` (true).
    pub guard: Option<(VReg, bool)>,
    /// The opcode.
    pub op: Op,
    /// Rounding / approximation modifier.
    pub rnd: Option<Rounding>,
    /// Instruction type (`None` for control flow and barriers).
    pub ty: Option<PtxType>,
    /// Registers written (a vector load writes several).
    pub dsts: Vec<VReg>,
    /// Operands read.
    pub srcs: Vec<Operand>,
}

impl Instr {
    /// A plain instruction.
    pub fn new(op: Op, ty: Option<PtxType>, dsts: Vec<VReg>, srcs: Vec<Operand>) -> Self {
        Instr {
            guard: None,
            op,
            rnd: None,
            ty,
            dsts,
            srcs,
        }
    }

    /// Registers read, the guard included.
    pub fn uses(&self) -> Vec<VReg> {
        let mut v: Vec<VReg> = self.srcs.iter().flat_map(Operand::regs).collect();
        if let Some((p, _)) = self.guard {
            v.push(p);
        }
        v
    }

    /// The branch target of a `bra` or the label a `Place` defines.
    pub fn label(&self) -> Option<Label> {
        match (&self.op, self.srcs.first()) {
            (Op::Bra { .. } | Op::Place, Some(Operand::Label(l))) => Some(*l),
            _ => None,
        }
    }
}
