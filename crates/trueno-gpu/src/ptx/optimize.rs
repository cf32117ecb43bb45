//! IR passes that run before register allocation: multiply-add fusion and dead-code
//! removal.

use std::collections::HashMap;

use super::ir::{Instr, KernelIr, Op, Operand, Rounding};
use super::types::VReg;

fn use_counts(body: &[Instr]) -> HashMap<u32, usize> {
    let mut c = HashMap::new();
    for i in body {
        for r in i.uses() {
            *c.entry(r.id).or_insert(0) += 1;
        }
    }
    c
}

/// Fuses `t = a * b; d = t + c` into `d = fma.rn(a, b, c)` when `t` has no other reader,
/// neither instruction is predicated or carries an explicit rounding, and nothing between
/// them redefines `a` or `b` or transfers control. The fused result is rounded once, so it
/// is never less accurate than the pair (a rounding-mode-qualified mul/add is left alone,
/// as PTX promises those are not contracted). Returns the number of fusions.
pub fn fuse_fma(k: &mut KernelIr) -> usize {
    let counts = use_counts(&k.body);
    let mut fused = 0;
    let mut remove = vec![false; k.body.len()];
    #[allow(clippy::needless_range_loop)] // `k.body[a]` is rewritten inside the loop
    for m in 0..k.body.len() {
        let mul = &k.body[m];
        let (Op::Mul(None), Some(ty), None, None) = (&mul.op, mul.ty, mul.guard, mul.rnd) else {
            continue;
        };
        if !ty.is_float() || counts.get(&mul.dsts[0].id) != Some(&1) {
            continue;
        }
        let t = mul.dsts[0];
        let factors = mul.srcs.clone();
        let factor_regs: Vec<VReg> = factors.iter().flat_map(Operand::regs).collect();
        for a in m + 1..k.body.len() {
            let add = &k.body[a];
            let reads_t = add.uses().contains(&t);
            if reads_t {
                let addend = match add.srcs.as_slice() {
                    [Operand::Reg(x), c] if *x == t => Some(c.clone()),
                    [c, Operand::Reg(x)] if *x == t => Some(c.clone()),
                    _ => None,
                };
                if let (Op::Add, Some(c), None, None, Some(aty)) =
                    (&add.op, addend, add.guard, add.rnd, add.ty)
                    && aty == ty
                {
                    let mut f = Instr::new(
                        Op::Fma,
                        Some(ty),
                        add.dsts.clone(),
                        vec![factors[0].clone(), factors[1].clone(), c],
                    );
                    f.rnd = Some(Rounding::Rn);
                    k.body[a] = f;
                    remove[m] = true;
                    fused += 1;
                }
                break;
            }
            let clobbers = add.dsts.iter().any(|d| factor_regs.contains(d));
            if clobbers || matches!(add.op, Op::Bra { .. } | Op::Place | Op::Ret) {
                break;
            }
        }
    }
    let mut idx = 0;
    k.body.retain(|_| {
        idx += 1;
        !remove[idx - 1]
    });
    fused
}

/// Removes instructions without side effects whose results nobody reads, until none is
/// left. Returns the number removed.
pub fn remove_dead_code(k: &mut KernelIr) -> usize {
    let mut removed = 0;
    loop {
        let counts = use_counts(&k.body);
        let before = k.body.len();
        k.body.retain(|i| {
            i.op.has_side_effects()
                || i.dsts.is_empty()
                || i.dsts.iter().any(|d| counts.contains_key(&d.id))
        });
        let n = before - k.body.len();
        if n == 0 {
            return removed;
        }
        removed += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptx::{F32, KernelBuilder, PtxType, Space, U64};

    #[test]
    fn a_single_use_multiply_feeding_an_add_becomes_fma_and_dead_code_goes() {
        let mut b = KernelBuilder::new("fuse");
        let out = b.param_ptr("out", PtxType::F32);
        let x = b.ld::<F32, U64>(Space::Global, out, 0);
        let m = b.mul(x, 3.0f32);
        let s = b.add(m, 1.0f32);
        let _unused = b.mul(x, x);
        b.st::<F32, U64>(Space::Global, out, 0, s);
        b.ret();
        let mut k = b.finish();
        assert_eq!(fuse_fma(&mut k), 1);
        assert!(k.body.iter().any(|i| i.op == Op::Fma));
        assert_eq!(remove_dead_code(&mut k), 1);
        assert!(!k.body.iter().any(|i| matches!(i.op, Op::Mul(_))));
    }

    #[test]
    fn a_multiply_with_two_readers_is_not_fused() {
        let mut b = KernelBuilder::new("nofuse");
        let out = b.param_ptr("out", PtxType::F32);
        let x = b.ld::<F32, U64>(Space::Global, out, 0);
        let m = b.mul(x, 3.0f32);
        let s = b.add(m, 1.0f32);
        let t = b.add(m, s);
        b.st::<F32, U64>(Space::Global, out, 0, t);
        b.ret();
        let mut k = b.finish();
        assert_eq!(fuse_fma(&mut k), 0);
    }
}
