//! Validation: what the JIT would reject (type mix-ups, missing rounding modes, undefined
//! registers, unplaced labels) and what it would accept but run wrong (a barrier that some
//! threads of the block can skip).

use std::fmt;

use super::cfg;
use super::ir::{AddrBase, Imm, Instr, KernelIr, Op, Operand, Rounding, SpecialReg};
use super::types::{PtxType, Space};

/// One problem found in a kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// Kernel name.
    pub kernel: String,
    /// Instruction index (`None` for whole-kernel faults).
    pub at: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.at {
            Some(i) => write!(f, "{}: instruction {i}: {}", self.kernel, self.message),
            None => write!(f, "{}: {}", self.kernel, self.message),
        }
    }
}

/// Every fault in `k` (empty when it is well formed).
pub fn validate(k: &KernelIr) -> Vec<Fault> {
    let mut found: Vec<(Option<usize>, String)> = Vec::new();
    let fault = |found: &mut Vec<_>, at: Option<usize>, message: String| found.push((at, message));
    for (n, i) in k.body.iter().enumerate() {
        if let Err(m) = check_types(i) {
            fault(&mut found, Some(n), m);
        }
        if i.uses().iter().chain(&i.dsts).any(|r| r.id >= k.next_reg) {
            fault(
                &mut found,
                Some(n),
                "register id beyond the kernel's allocation".into(),
            );
        }
    }
    let labels = cfg::label_positions(&k.body);
    let placed = k.body.iter().filter(|i| i.op == Op::Place).count();
    if placed != labels.len() {
        fault(&mut found, None, "a label is placed more than once".into());
    }
    for (n, i) in k.body.iter().enumerate() {
        if let (Op::Bra { .. }, Some(l)) = (&i.op, i.label())
            && !labels.contains_key(&l)
        {
            fault(
                &mut found,
                Some(n),
                format!("branch to label {} that is never placed", l.0),
            );
        }
    }
    if found.is_empty() {
        for (n, r) in use_before_def(k) {
            fault(
                &mut found,
                Some(n),
                format!("register {} ({}) read before any write", r.id, r.ty),
            );
        }
        for (n, m) in barrier_faults(&k.body) {
            fault(&mut found, Some(n), m);
        }
        if let Some(n) = write_before_grid_wait(&k.body) {
            fault(
                &mut found,
                Some(n),
                "writes memory before its griddepcontrol.wait: under programmatic dependent \
                 launch the previous kernel may still be reading it"
                    .into(),
            );
        }
    }
    found
        .into_iter()
        .map(|(at, message)| Fault {
            kernel: k.name.clone(),
            at,
            message,
        })
        .collect()
}

fn reg_ok(ty: PtxType, op: &Operand) -> bool {
    match op {
        Operand::Reg(r) => ty.accepts(r.ty),
        Operand::Vector(v) => v.iter().all(|r| ty.accepts(r.ty)),
        Operand::Imm(_) => ty != PtxType::Pred,
        _ => false,
    }
}

fn dsts_ok(i: &Instr, ty: PtxType) -> Result<(), String> {
    match i.dsts.iter().find(|d| !ty.accepts(d.ty)) {
        Some(d) => Err(format!(
            "{}-typed instruction writes a {} register",
            ty, d.ty
        )),
        None => Ok(()),
    }
}

fn srcs_ok(i: &Instr, ty: PtxType, srcs: &[Operand]) -> Result<(), String> {
    match srcs.iter().find(|s| !reg_ok(ty, s)) {
        Some(s) => Err(format!("{}-typed instruction reads {:?}", ty, s)),
        None => Ok(()),
    }
    .and_then(|_| {
        if i.dsts.len() > 1 {
            Err("several results from a scalar op".into())
        } else {
            Ok(())
        }
    })
}

fn needs_rounding(i: &Instr, ty: PtxType) -> Result<(), String> {
    let r = i.rnd;
    let approx = matches!(r, Some(Rounding::Approx | Rounding::ApproxFtz));
    let ieee = matches!(
        r,
        Some(Rounding::Rn | Rounding::Rz | Rounding::Rm | Rounding::Rp)
    );
    let ok = match i.op {
        Op::Div if ty.is_float() => ieee || approx || r == Some(Rounding::Full),
        Op::Rcp | Op::Sqrt => ieee || approx,
        Op::Fma => ieee,
        Op::Rsqrt | Op::Ex2 | Op::Lg2 | Op::Sin | Op::Cos => approx,
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{:?}.{} needs a rounding or approximation modifier",
            i.op, ty
        ))
    }
}

fn address_ok(space: Space, op: Option<&Operand>) -> Result<(), String> {
    match (space, op) {
        (Space::Param, Some(Operand::Addr(AddrBase::Sym(_), _))) => Ok(()),
        (Space::Global, Some(Operand::Addr(AddrBase::Reg(r), _)))
            if r.ty.bits() == 64 && !r.ty.is_float() =>
        {
            Ok(())
        }
        (Space::Shared, Some(Operand::Addr(AddrBase::Reg(r), _)))
            if matches!(r.ty.bits(), 32 | 64) && !r.ty.is_float() =>
        {
            Ok(())
        }
        (Space::Shared, Some(Operand::Addr(AddrBase::Sym(_), _))) => Ok(()),
        _ => Err(format!("bad {} address {:?}", space.name(), op)),
    }
}

fn cvt_ok(i: &Instr, to: PtxType, from: PtxType) -> Result<(), String> {
    let r = i.rnd;
    let int_round = matches!(r, Some(Rounding::Rni | Rounding::Rzi | Rounding::Rmi));
    let float_round = matches!(
        r,
        Some(Rounding::Rn | Rounding::Rz | Rounding::Rm | Rounding::Rp)
    );
    let ok = match (from.is_float(), to.is_float()) {
        (true, false) => int_round,
        (false, true) => float_round,
        (true, true) if to.bits() < from.bits() => float_round,
        (true, true) => r.is_none() || int_round,
        (false, false) => r.is_none(),
    };
    if !ok {
        return Err(format!("cvt.{to}.{from} with rounding {r:?}"));
    }
    dsts_ok(i, to)?;
    srcs_ok(i, from, &i.srcs)
}

/// Type rules per opcode.
fn check_types(i: &Instr) -> Result<(), String> {
    if let Some((p, _)) = i.guard
        && p.ty != PtxType::Pred
    {
        return Err(format!("guard register is {}, not pred", p.ty));
    }
    let Some(ty) = i.ty else {
        return match i.op {
            Op::Bra { .. } | Op::Place | Op::Ret | Op::BarSync | Op::BarWarpSync => Ok(()),
            Op::BarSyncNamed { id, threads } => {
                if (1..16).contains(&id) && threads > 0 && threads.is_multiple_of(32) {
                    Ok(())
                } else {
                    Err(format!("named barrier {id} for {threads} threads"))
                }
            }
            Op::CpAsyncCommit | Op::CpAsyncWait(_) => Ok(()),
            Op::CpAsync { .. } => match i.srcs.as_slice() {
                [dst, src, Operand::Imm(Imm::Int(4 | 16)), n] if reg_ok(PtxType::U32, n) => {
                    address_ok(Space::Shared, Some(dst))?;
                    address_ok(Space::Global, Some(src))
                }
                s => Err(format!("cp.async operands {s:?}")),
            },
            Op::Ldmatrix { .. } => {
                address_ok(Space::Shared, i.srcs.first())?;
                if i.dsts.len() != 4 || i.srcs.len() != 1 {
                    return Err("ldmatrix.x4 writes four registers from one address".into());
                }
                dsts_ok(i, PtxType::B32)
            }
            Op::FenceMbarInit
            | Op::FenceProxyAsync
            | Op::GridDepWait
            | Op::GridDepLaunch
            | Op::WgmmaFence
            | Op::WgmmaCommit
            | Op::WgmmaWait(_) => Ok(()),
            Op::SetMaxNreg { regs, .. } if (24..=256).contains(&regs) && regs % 8 == 0 => Ok(()),
            Op::SetMaxNreg { regs, .. } => Err(format!(
                "setmaxnreg to {regs}: 24 to 256 registers, a multiple of 8"
            )),
            Op::MbarInit | Op::MbarArriveExpectTx | Op::MbarArrive => {
                address_ok(Space::Shared, i.srcs.first())?;
                let want = if i.op == Op::MbarArrive { 1 } else { 2 };
                match i.srcs.get(1) {
                    _ if i.srcs.len() != want || !i.dsts.is_empty() => {
                        Err(format!("{:?} operands {:?}", i.op, i.srcs))
                    }
                    None | Some(Operand::Imm(Imm::Int(1..))) => Ok(()),
                    // A byte count known only at run time.
                    Some(o) if i.op == Op::MbarArriveExpectTx && reg_ok(PtxType::U32, o) => Ok(()),
                    Some(o) => Err(format!("{:?} count {o:?}", i.op)),
                }
            }
            Op::MbarTryWait => {
                address_ok(Space::Shared, i.srcs.first())?;
                dsts_ok(i, PtxType::Pred)?;
                if i.dsts.len() != 1 || i.srcs.len() != 2 {
                    return Err("mbarrier.try_wait writes one predicate".into());
                }
                srcs_ok(i, PtxType::U32, &i.srcs[1..])
            }
            Op::TmaLoad2d => match i.srcs.as_slice() {
                [dst, map, x, y, bar]
                    if reg_ok(PtxType::U64, map)
                        && reg_ok(PtxType::U32, x)
                        && reg_ok(PtxType::U32, y) =>
                {
                    address_ok(Space::Shared, Some(dst))?;
                    address_ok(Space::Shared, Some(bar))
                }
                s => Err(format!("tensor copy operands {s:?}")),
            },
            Op::BulkCopy => match i.srcs.as_slice() {
                [dst, src, bytes, bar] if reg_ok(PtxType::U32, bytes) => {
                    address_ok(Space::Shared, Some(dst))?;
                    address_ok(Space::Global, Some(src))?;
                    address_ok(Space::Shared, Some(bar))
                }
                s => Err(format!("bulk copy operands {s:?}")),
            },
            Op::TmaPrefetch2d => match i.srcs.as_slice() {
                [map, x, y]
                    if reg_ok(PtxType::U64, map)
                        && reg_ok(PtxType::U32, x)
                        && reg_ok(PtxType::U32, y) =>
                {
                    Ok(())
                }
                s => Err(format!("tensor prefetch operands {s:?}")),
            },
            _ => Err(format!("{:?} without a type", i.op)),
        };
    };
    needs_rounding(i, ty)?;
    match &i.op {
        Op::Mov => {
            dsts_ok(i, ty)?;
            match i.srcs.as_slice() {
                [Operand::Special(SpecialReg::GlobalTimer)] => match ty {
                    PtxType::U64 => Ok(()),
                    _ => Err(format!("mov.{ty} from %globaltimer (64 bits)")),
                },
                [Operand::Special(_)] if ty.bits() == 32 => Ok(()),
                [Operand::Sym(_)] if matches!(ty, PtxType::U32 | PtxType::U64) => Ok(()),
                [s] if reg_ok(ty, s) => Ok(()),
                s => Err(format!("mov.{ty} from {s:?}")),
            }
        }
        Op::Mul(Some(super::ir::MulMode::Wide)) => {
            if i.dsts
                .iter()
                .any(|d| d.ty.bits() != 2 * ty.bits() || d.ty.is_float())
            {
                return Err("mul.wide result must be twice the operand width".into());
            }
            srcs_ok(i, ty, &i.srcs)
        }
        Op::Shl | Op::Shr => {
            dsts_ok(i, ty)?;
            srcs_ok(i, ty, &i.srcs[..1])?;
            srcs_ok(i, PtxType::U32, &i.srcs[1..])
        }
        Op::Setp(_) => {
            dsts_ok(i, PtxType::Pred)?;
            srcs_ok(i, ty, &i.srcs)
        }
        Op::Selp => {
            dsts_ok(i, ty)?;
            srcs_ok(i, ty, &i.srcs[..2])?;
            srcs_ok(i, PtxType::Pred, &i.srcs[2..])
        }
        Op::Cvt { from } => cvt_ok(i, ty, *from),
        Op::CvtPack => {
            if !matches!(ty, PtxType::F16 | PtxType::Bf16) || i.rnd != Some(Rounding::Rn) {
                return Err(format!(
                    "cvt.{:?}.{ty}x2.f32: pairs are f16 or bf16, rounded .rn",
                    i.rnd
                ));
            }
            dsts_ok(i, PtxType::B32)?;
            if i.srcs.len() != 2 {
                return Err("cvt to a pair reads two f32 values".into());
            }
            srcs_ok(i, PtxType::F32, &i.srcs)
        }
        Op::CvtaParam => {
            dsts_ok(i, PtxType::U64)?;
            srcs_ok(i, PtxType::U64, &i.srcs)
        }
        Op::Wgmma { n, trans_b, a_regs } => {
            if !matches!(ty, PtxType::F16 | PtxType::Bf16 | PtxType::F32) {
                return Err(format!(
                    "wgmma inputs are f16, bf16 or f32 (as tf32), not {ty}"
                ));
            }
            if ty == PtxType::F32 && *trans_b {
                return Err("a tf32 wgmma reads B k-major only (no transpose)".into());
            }
            if !(8..=256).contains(n) || n % 8 != 0 {
                return Err(format!("wgmma m64n{n}: n is 8 to 256, a multiple of 8"));
            }
            if i.dsts.len() != *n as usize / 2 || i.dsts.iter().any(|d| d.ty != PtxType::F32) {
                return Err(format!("wgmma m64n{n} writes {} f32 registers", n / 2));
            }
            let a_ok = |a: &Operand| match a {
                Operand::Vector(v) if *a_regs => {
                    v.len() == 4
                        && v.iter()
                            .all(|r| r.ty.reg_class() == PtxType::U32.reg_class())
                }
                a => !*a_regs && reg_ok(PtxType::U64, a),
            };
            match i.srcs.as_slice() {
                [Operand::Vector(acc), a, b, p]
                    if *acc == i.dsts
                        && a_ok(a)
                        && reg_ok(PtxType::U64, b)
                        && matches!(p, Operand::Reg(r) if r.ty == PtxType::Pred) =>
                {
                    Ok(())
                }
                s => Err(format!(
                    "wgmma reads its accumulators, two descriptors and a predicate, not {s:?}"
                )),
            }
        }
        Op::CvtaToGlobal => {
            dsts_ok(i, PtxType::U64)?;
            srcs_ok(i, PtxType::U64, &i.srcs)
        }
        Op::Ld(_) | Op::St(_) if matches!(ty, PtxType::F16 | PtxType::Bf16) => Err(format!(
            "ld/st take no .{ty} type; half-precision values move as .b16"
        )),
        Op::Ld(space) => {
            address_ok(*space, i.srcs.first())?;
            if !matches!(i.dsts.len(), 1 | 2 | 4) || (i.dsts.len() == 4 && ty.bits() == 64) {
                return Err(format!("ld of {} registers", i.dsts.len()));
            }
            dsts_ok(i, ty)
        }
        Op::St(space) => {
            address_ok(*space, i.srcs.first())?;
            let n = match i.srcs.get(1) {
                Some(Operand::Vector(v)) => v.len(),
                _ => 1,
            };
            if !matches!(n, 1 | 2 | 4) || (n == 4 && ty.bits() == 64) || i.srcs.len() != 2 {
                return Err(format!("st of {n} values"));
            }
            srcs_ok(i, ty, &i.srcs[1..])
        }
        Op::Shfl(_) => {
            if ty.bits() != 32 {
                return Err("shfl moves 32-bit values".into());
            }
            dsts_ok(i, ty)?;
            srcs_ok(i, ty, &i.srcs[..1])?;
            srcs_ok(i, PtxType::U32, &i.srcs[1..])
        }
        Op::Atom(space, _) => {
            address_ok(*space, i.srcs.first())?;
            dsts_ok(i, ty)?;
            srcs_ok(i, ty, &i.srcs[1..])
        }
        Op::Vote(_) => {
            dsts_ok(i, ty)?;
            srcs_ok(i, PtxType::Pred, &i.srcs[..1])
        }
        Op::Bra { .. }
        | Op::Place
        | Op::Ret
        | Op::BarSync
        | Op::BarWarpSync
        | Op::BarSyncNamed { .. } => Err(format!("{:?} takes no type", i.op)),
        Op::CpAsync { .. } | Op::CpAsyncCommit | Op::CpAsyncWait(_) | Op::Ldmatrix { .. } => {
            Err(format!("{:?} takes no type", i.op))
        }
        Op::MbarInit
        | Op::MbarArriveExpectTx
        | Op::MbarArrive
        | Op::MbarTryWait
        | Op::FenceMbarInit
        | Op::FenceProxyAsync
        | Op::GridDepWait
        | Op::GridDepLaunch
        | Op::TmaLoad2d
        | Op::BulkCopy
        | Op::TmaPrefetch2d
        | Op::WgmmaFence
        | Op::WgmmaCommit
        | Op::WgmmaWait(_)
        | Op::SetMaxNreg { .. } => Err(format!("{:?} takes no type", i.op)),
        Op::Mma => {
            if !matches!(
                ty,
                PtxType::F16 | PtxType::Bf16 | PtxType::F32 | PtxType::S32 | PtxType::U32
            ) {
                return Err(format!(
                    "mma inputs are f16, bf16, f32 (as tf32), s32 (as s8 bytes) or u32 (u8 \
                     by s8 bytes), not {ty}"
                ));
            }
            // The integer products accumulate in s32, the others in f32.
            let acc = match ty {
                PtxType::S32 | PtxType::U32 => PtxType::S32,
                _ => PtxType::F32,
            };
            let vec_of = |o: Option<&Operand>, n: usize, class: PtxType| match o {
                Some(Operand::Vector(v)) => {
                    v.len() == n && v.iter().all(|r| r.ty.reg_class() == class.reg_class())
                }
                _ => false,
            };
            if i.dsts.len() != 4 || i.dsts.iter().any(|d| d.ty != acc) {
                return Err(format!("mma writes four {acc} registers"));
            }
            // The integer product also comes in k16 (two A registers, one B).
            let k16 = ty == PtxType::S32 && vec_of(i.srcs.first(), 2, PtxType::B32);
            let (na, nb) = if k16 { (2, 1) } else { (4, 2) };
            if i.srcs.len() != 3
                || !vec_of(i.srcs.first(), na, PtxType::B32)
                || !vec_of(i.srcs.get(1), nb, PtxType::B32)
                || !vec_of(i.srcs.get(2), 4, acc)
            {
                return Err(format!(
                    "mma reads {{a: 4 b32}}, {{b: 2 b32}}, {{c: 4 {acc}}} (s8 k16: 2 a, 1 b)"
                ));
            }
            Ok(())
        }
        _ => {
            if ty == PtxType::Pred && !matches!(i.op, Op::And | Op::Or | Op::Xor | Op::Not) {
                return Err(format!("{:?} on predicates", i.op));
            }
            if ty.is_float()
                && matches!(
                    i.op,
                    Op::And | Op::Or | Op::Xor | Op::Not | Op::Rem | Op::Mad(_)
                )
            {
                return Err(format!("{:?} on {ty}", i.op));
            }
            if !ty.is_float()
                && matches!(
                    i.op,
                    Op::Fma
                        | Op::Rcp
                        | Op::Sqrt
                        | Op::Rsqrt
                        | Op::Ex2
                        | Op::Lg2
                        | Op::Sin
                        | Op::Cos
                )
            {
                return Err(format!("{:?} on {ty}", i.op));
            }
            dsts_ok(i, ty)?;
            srcs_ok(i, ty, &i.srcs)
        }
    }
}

#[path = "validate_flow.rs"]
mod flow;
use flow::{barrier_faults, use_before_def, write_before_grid_wait};

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
