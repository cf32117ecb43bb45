//! Tests of the IR validator.

use super::*;
use crate::ptx::ir::{Imm, Instr, Op, Operand};
use crate::ptx::{Cmp, F32, KernelBuilder, PtxType, U32, VReg};

fn messages(k: &KernelIr) -> String {
    validate(k)
        .iter()
        .map(|f| f.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_well_formed_kernel_has_no_faults() {
    let mut b = KernelBuilder::new("ok");
    let n = b.param_u32("n");
    let t = b.tid_x();
    let p = b.setp::<U32>(Cmp::Lt, t, n);
    b.if_then(p, false, |b| {
        let _ = b.add(t, 1u32);
    });
    b.bar_sync();
    b.ret();
    assert_eq!(messages(&b.finish()), "");
}

#[test]
fn a_type_mix_up_is_rejected() {
    let mut b = KernelBuilder::new("mixup");
    let f = b.mov::<F32>(1.0f32);
    let u = b.mov::<U32>(2u32);
    let mut k = b.finish();
    // add.u32 reading an f32 register: the builder cannot express it; raw IR can.
    let d = VReg {
        id: k.next_reg,
        ty: PtxType::U32,
    };
    k.next_reg += 1;
    k.body.push(Instr::new(
        Op::Add,
        Some(PtxType::U32),
        vec![d],
        vec![Operand::Reg(f.vreg()), Operand::Reg(u.vreg())],
    ));
    let m = messages(&k);
    assert!(m.contains("u32-typed instruction reads"), "{m}");
}

#[test]
fn a_half_precision_load_typed_f16_is_rejected() {
    let mut b = KernelBuilder::new("ld_f16");
    let p = b.param_ptr("p", PtxType::U16);
    let mut k = b.finish();
    let d = VReg {
        id: k.next_reg,
        ty: PtxType::F16,
    };
    k.next_reg += 1;
    let addr = Operand::Addr(crate::ptx::ir::AddrBase::Reg(p.vreg()), 0);
    k.body.push(Instr::new(
        Op::Ld(crate::ptx::Space::Global),
        Some(PtxType::F16),
        vec![d],
        vec![addr],
    ));
    assert!(messages(&k).contains("move as .b16"), "{}", messages(&k));
}

#[test]
fn a_missing_rounding_mode_is_rejected() {
    let mut b = KernelBuilder::new("rounding");
    let x = b.mov::<F32>(2.0f32);
    let mut k = b.finish();
    let d = VReg {
        id: k.next_reg,
        ty: PtxType::F32,
    };
    k.next_reg += 1;
    k.body.push(Instr::new(
        Op::Div,
        Some(PtxType::F32),
        vec![d],
        vec![Operand::Reg(x.vreg()), Operand::Imm(Imm::F32(3.0))],
    ));
    assert!(
        messages(&k).contains("needs a rounding"),
        "{}",
        messages(&k)
    );
}

#[test]
fn use_before_definition_is_rejected() {
    let mut b = KernelBuilder::new("undef");
    let never_written = b.reg::<F32>();
    let _ = b.add(never_written, 1.0f32);
    b.ret();
    let m = messages(&b.finish());
    assert!(m.contains("read before any write"), "{m}");
}

#[test]
fn a_value_written_on_one_branch_only_is_rejected() {
    let mut b = KernelBuilder::new("one_branch");
    let t = b.tid_x();
    let x = b.reg::<U32>();
    let p = b.setp::<U32>(Cmp::Eq, t, 0u32);
    b.if_then(p, false, |b| b.assign(x, 5u32));
    let _ = b.add(x, 1u32);
    b.ret();
    assert!(messages(&b.finish()).contains("read before any write"));
}

#[test]
fn an_early_exit_before_a_barrier_is_rejected() {
    let mut b = KernelBuilder::new("early_exit");
    let n = b.param_u32("n");
    let t = b.tid_x();
    let past = b.setp::<U32>(Cmp::Ge, t, n);
    b.exit_if(past);
    b.bar_sync();
    b.ret();
    let m = messages(&b.finish());
    assert!(m.contains("conditional exit before a barrier"), "{m}");
}

#[test]
fn a_barrier_inside_a_divergent_branch_is_rejected_and_a_uniform_one_accepted() {
    for uniform in [false, true] {
        let mut b = KernelBuilder::new("divergent");
        let t = b.tid_x();
        let p = b.setp::<U32>(Cmp::Lt, t, 16u32);
        b.if_then(p, uniform, |b| b.bar_sync());
        b.ret();
        let m = messages(&b.finish());
        assert_eq!(
            m.contains("divergent branch"),
            !uniform,
            "uniform={uniform}: {m}"
        );
    }
}

#[test]
fn a_predicated_barrier_is_rejected() {
    let mut b = KernelBuilder::new("guarded_bar");
    let t = b.tid_x();
    let p = b.setp::<U32>(Cmp::Lt, t, 16u32);
    b.predicated(p, |b| b.bar_sync());
    b.ret();
    assert!(messages(&b.finish()).contains("barrier under a predicate"));
}

#[test]
fn a_branch_to_an_unplaced_label_is_rejected() {
    let mut b = KernelBuilder::new("nolabel");
    let l = b.new_label();
    b.bra(l);
    b.ret();
    assert!(messages(&b.finish()).contains("never placed"));
}

#[test]
fn dp4a_validates_and_spells_each_operands_signedness() {
    let mut b = KernelBuilder::new("dp4a");
    let y = b.param_ptr("y", PtxType::S32);
    let w = b.mov::<U32>(0x0F0F_0F0Fu32);
    let a = b.mov::<U32>(0x8001_7F02u32);
    let s = b.dp4a(w, a, 5i32, false, true);
    let s = b.dp4a(a, a, s, true, true);
    b.st::<crate::ptx::S32, _>(crate::ptx::Space::Global, y, 0, s);
    b.ret();
    let k = b.finish();
    assert_eq!(messages(&k), "");
    let ptx = crate::ptx::emit_module(crate::ptx::Target::Sm80, &[crate::ptx::compile(k).unwrap()]);
    assert!(ptx.contains("dp4a.u32.s32"), "{ptx}");
    assert!(ptx.contains("dp4a.s32.s32"), "{ptx}");

    // An f32 accumulator is not an s32 one.
    let mut b = KernelBuilder::new("dp4a_f32");
    let f = b.mov::<F32>(1.0f32);
    let mut k = b.finish();
    let d = VReg {
        id: k.next_reg,
        ty: PtxType::S32,
    };
    k.next_reg += 1;
    k.body.push(Instr::new(
        Op::Dp4a {
            a_signed: false,
            b_signed: true,
        },
        Some(PtxType::S32),
        vec![d],
        vec![
            Operand::Imm(Imm::Int(1)),
            Operand::Imm(Imm::Int(1)),
            Operand::Reg(f.vreg()),
        ],
    ));
    assert!(
        messages(&k).contains("s32-typed instruction reads"),
        "{}",
        messages(&k)
    );
}

/// A kernel that loads, waits for the previous grid, then stores (or stores first).
fn grid_wait_kernel(store_first: bool) -> KernelIr {
    use crate::ptx::{Space, U64};
    let mut b = KernelBuilder::new("overlapped");
    let p = b.param_ptr("p", PtxType::F32);
    b.allow_next_grid();
    let v = b.ld::<F32, U64>(Space::Global, p, 0);
    if store_first {
        b.st::<F32, U64>(Space::Global, p, 4, v);
    }
    b.wait_for_previous_grid();
    b.st::<F32, U64>(Space::Global, p, 0, v);
    b.ret();
    b.finish()
}

#[test]
fn a_write_before_the_grid_wait_is_rejected_and_a_load_accepted() {
    let ok = grid_wait_kernel(false);
    assert_eq!(messages(&ok), "");
    assert!(ok.waits_for_previous_grid());
    let m = messages(&grid_wait_kernel(true));
    assert!(m.contains("before its griddepcontrol.wait"), "{m}");
}

#[test]
fn grid_dependency_control_is_written_for_sm_90_only() {
    use crate::ptx::{Target, compile, emit_module};
    let k = compile(grid_wait_kernel(false)).unwrap();
    for (t, written) in [
        (Target::Sm80, false),
        (Target::Sm90, true),
        (Target::Sm90a, true),
    ] {
        let ptx = emit_module(t, std::slice::from_ref(&k));
        assert_eq!(
            ptx.contains("griddepcontrol.wait;"),
            written,
            "{}",
            t.name()
        );
        assert_eq!(
            ptx.contains("griddepcontrol.launch_dependents;"),
            written,
            "{}",
            t.name()
        );
    }
}

#[test]
fn a_bulk_copy_takes_a_u32_byte_count_and_its_barrier_a_run_time_one() {
    let mut b = KernelBuilder::new("bulk");
    let src = b.param_ptr("src", PtxType::U32);
    let n = b.param_u32("n");
    let smem = b.dynamic_shared();
    let bar = b.shared_array("bar", 8, 8);
    b.mbar_init(bar, 0, 1);
    b.fence_mbar_init();
    b.mbar_arrive_expect_tx_reg(bar, 0, n);
    b.bulk_copy(smem, src, n, bar);
    let parity = b.mov(0u32);
    b.mbar_wait(bar, parity);
    b.ret();
    let mut k = b.finish();
    assert_eq!(messages(&k), "");
    // The byte count as a 64-bit register: rejected.
    let wide = src.vreg();
    let copy = k.body.iter_mut().find(|i| i.op == Op::BulkCopy).unwrap();
    copy.srcs[2] = Operand::Reg(wide);
    let m = messages(&k);
    assert!(m.contains("bulk copy operands"), "{m}");
}
