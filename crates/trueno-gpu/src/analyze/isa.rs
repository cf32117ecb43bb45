//! What each PTX instruction does, as far as the analyses need: which operands it writes,
//! its class for the instruction mix, its floating-point work, and its memory access.

use super::ast::{Instruction, Operand, Space, type_bytes};

/// Every PTX instruction name (ISA 9.0) the analyzer knows. Anything else is reported as
/// unknown and treated conservatively.
const KNOWN: &[&str] = &[
    "abs",
    "activemask",
    "add",
    "addc",
    "alloca",
    "and",
    "applypriority",
    "atom",
    "bar",
    "barrier",
    "bfe",
    "bfi",
    "bfind",
    "bmsk",
    "bra",
    "brev",
    "brkpt",
    "brx",
    "call",
    "clusterlaunchcontrol",
    "clz",
    "cnot",
    "copysign",
    "cos",
    "cp",
    "createpolicy",
    "cvt",
    "cvta",
    "discard",
    "div",
    "dp2a",
    "dp4a",
    "elect",
    "ex2",
    "exit",
    "fence",
    "fma",
    "fns",
    "getctarank",
    "griddepcontrol",
    "isspacep",
    "istypep",
    "ld",
    "ldmatrix",
    "ldu",
    "lg2",
    "lop3",
    "mad",
    "mad24",
    "madc",
    "mapa",
    "match",
    "max",
    "mbarrier",
    "membar",
    "min",
    "mma",
    "mov",
    "movmatrix",
    "mul",
    "mul24",
    "multimem",
    "nanosleep",
    "neg",
    "not",
    "or",
    "pmevent",
    "popc",
    "prefetch",
    "prefetchu",
    "prmt",
    "rcp",
    "red",
    "redux",
    "rem",
    "ret",
    "rsqrt",
    "sad",
    "selp",
    "set",
    "setmaxnreg",
    "setp",
    "shf",
    "shfl",
    "shl",
    "shr",
    "sin",
    "slct",
    "sqrt",
    "st",
    "stackrestore",
    "stacksave",
    "stmatrix",
    "sub",
    "subc",
    "suld",
    "suq",
    "sured",
    "sust",
    "szext",
    "tanh",
    "tcgen05",
    "tensormap",
    "testp",
    "tex",
    "tld4",
    "trap",
    "txq",
    "vabsdiff",
    "vabsdiff2",
    "vabsdiff4",
    "vadd",
    "vadd2",
    "vadd4",
    "vavrg2",
    "vavrg4",
    "vmad",
    "vmax",
    "vmax2",
    "vmax4",
    "vmin",
    "vmin2",
    "vmin4",
    "vote",
    "vset",
    "vset2",
    "vset4",
    "vshl",
    "vshr",
    "vsub",
    "vsub2",
    "vsub4",
    "wgmma",
    "wmma",
    "xor",
];

/// Instructions that write no register (their first operand is read, or they have none).
const NO_DEF: &[&str] = &[
    "st",
    "red",
    "bar",
    "barrier",
    "bra",
    "brx",
    "ret",
    "exit",
    "membar",
    "fence",
    "prefetch",
    "prefetchu",
    "trap",
    "brkpt",
    "nanosleep",
    "pmevent",
    "griddepcontrol",
    "setmaxnreg",
    "stmatrix",
    "sust",
    "sured",
    "discard",
    "applypriority",
    "cp",
    "multimem",
    "tensormap",
    "stackrestore",
];

/// Whether the analyzer knows `base`.
pub fn is_known(base: &str) -> bool {
    KNOWN.binary_search(&base).is_ok()
}

/// The register operands an instruction writes and reads (names; the caller keeps those
/// that are declared registers). The guard predicate is a read.
pub fn defs_uses(ins: &Instruction) -> (Vec<&str>, Vec<&str>) {
    let mut uses: Vec<&str> = ins.guard.iter().map(|g| g.reg.as_str()).collect();
    let first_is_address = matches!(ins.operands.first(), Some(Operand::Address { .. }));
    let base = ins.base();
    if NO_DEF.contains(&base) || first_is_address || ins.operands.is_empty() {
        ins.operands.iter().for_each(|o| uses.extend(o.names()));
        return (Vec::new(), uses);
    }
    let defs = ins.operands[0].names();
    ins.operands[1..]
        .iter()
        .for_each(|o| uses.extend(o.names()));
    // wgmma accumulates into its destination fragment.
    if base == "wgmma" && ins.has("mma_async") {
        uses.extend(defs.iter().copied());
    }
    (defs, uses)
}

/// The type modifier that sets an instruction's data width (its last type modifier).
pub fn data_type(ins: &Instruction) -> Option<&str> {
    ins.modifiers().filter(|m| type_bytes(m).is_some()).last()
}

/// A class for the instruction mix.
pub fn class(ins: &Instruction) -> &'static str {
    let base = ins.base();
    if base == "wmma" && (ins.has("load") || ins.has("store")) {
        return "memory";
    }
    match base {
        "ld" | "ldu" | "st" | "prefetch" | "prefetchu" | "cp" | "ldmatrix" | "stmatrix"
        | "movmatrix" => "memory",
        "atom" | "red" | "multimem" => "atomic",
        "bar" | "barrier" | "membar" | "fence" | "mbarrier" => "sync",
        "shfl" | "vote" | "redux" | "match" | "activemask" | "elect" => "warp",
        "bra" | "brx" | "call" | "ret" | "exit" | "trap" | "brkpt" => "control",
        "mma" | "wgmma" | "wmma" | "tcgen05" => "tensor",
        "tex" | "tld4" | "suld" | "sust" | "sured" | "suq" | "txq" => "texture",
        "ex2" | "lg2" | "rcp" | "rsqrt" | "sqrt" | "sin" | "cos" | "tanh" => "special",
        "setp" | "selp" | "slct" | "set" => "compare",
        "mov" => "move",
        "cvt" | "cvta" => "convert",
        "add" | "sub" | "mul" | "mad" | "fma" | "div" | "rem" | "abs" | "neg" | "min" | "max"
        | "copysign" => match data_type(ins) {
            Some("f32") => "fp32",
            Some("f64") => "fp64",
            Some("f16" | "f16x2" | "bf16" | "bf16x2") => "fp16",
            _ => "integer",
        },
        _ if is_known(base) => "integer",
        _ => "unknown",
    }
}

/// Floating-point operations one thread's execution of `ins` performs (FMA counts 2;
/// packed halves count per lane; a warp-wide `mma` is split over its 32 threads, a
/// warpgroup `wgmma` over 128).
pub fn flops(ins: &Instruction) -> f64 {
    let base = ins.base();
    if matches!(base, "mma" | "wgmma") || (base == "wmma" && ins.has("mma")) {
        let threads = if base == "wgmma" { 128.0 } else { 32.0 };
        return ins
            .modifiers()
            .find_map(mma_shape)
            .map_or(0.0, |(m, n, k)| 2.0 * (m * n * k) as f64 / threads);
    }
    let lanes = match data_type(ins) {
        Some("f32" | "f64" | "f16" | "bf16") => 1.0,
        Some("f16x2" | "bf16x2") => 2.0,
        _ => return 0.0,
    };
    let per = match base {
        "fma" | "mad" => 2.0,
        "add" | "sub" | "mul" | "div" | "min" | "max" | "ex2" | "lg2" | "rcp" | "rsqrt"
        | "sqrt" | "sin" | "cos" | "tanh" => 1.0,
        _ => 0.0,
    };
    per * lanes
}

/// `m16n8k16` -> (16, 8, 16).
fn mma_shape(m: &str) -> Option<(u64, u64, u64)> {
    let rest = m.strip_prefix('m')?;
    let (mm, rest) = rest.split_once('n')?;
    let (nn, kk) = rest.split_once('k')?;
    Some((mm.parse().ok()?, nn.parse().ok()?, kk.parse().ok()?))
}

/// Load, store or read-modify-write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Access {
    /// Reads memory.
    Load,
    /// Writes memory.
    Store,
    /// Atomic or reduction.
    Atomic,
}

/// One memory reference of an instruction.
#[derive(Clone, Debug, PartialEq)]
pub struct MemRef<'i> {
    /// Read, write or both.
    pub access: Access,
    /// The state space (`Generic` when none is given).
    pub space: Space,
    /// Bytes per thread (0 when unknown, as for bulk copies).
    pub bytes: u64,
    /// The address's register or symbol.
    pub base: Option<&'i str>,
    /// The address's constant offset.
    pub offset: i64,
}

fn address(o: Option<&Operand>) -> (Option<&str>, i64) {
    match o {
        Some(Operand::Address { base, offset }) => (base.as_deref(), *offset),
        _ => (None, 0),
    }
}

/// The memory references of `ins` (two for `cp.async`: the global read and shared write).
pub fn memory(ins: &Instruction) -> Vec<MemRef<'_>> {
    let base = ins.base();
    let space = ins
        .modifiers()
        .find_map(Space::from_part)
        .unwrap_or(Space::Generic);
    let vector: u64 = ins
        .modifiers()
        .find_map(|m| m.strip_prefix('v').and_then(|v| v.parse().ok()))
        .unwrap_or(1);
    let elem = data_type(ins).and_then(type_bytes).unwrap_or(0);
    let first_addr = || {
        address(
            ins.operands
                .iter()
                .find(|o| matches!(o, Operand::Address { .. })),
        )
    };
    let one = |access, space, bytes| {
        let (b, offset) = first_addr();
        vec![MemRef {
            access,
            space,
            bytes,
            base: b,
            offset,
        }]
    };
    match base {
        "ld" | "ldu" => one(Access::Load, space, vector * elem),
        "st" => one(Access::Store, space, vector * elem),
        "atom" | "red" => one(Access::Atomic, space, vector * elem),
        // A fragment: each thread moves its registers' worth.
        "wmma" if ins.has("load") || ins.has("store") => {
            let regs = ins
                .operands
                .iter()
                .find_map(|o| match o {
                    Operand::Vector(v) => Some(v.len() as u64),
                    _ => None,
                })
                .unwrap_or(0);
            let access = if ins.has("load") {
                Access::Load
            } else {
                Access::Store
            };
            one(access, space, 4 * regs)
        }
        "ldmatrix" | "stmatrix" => {
            let regs = ins
                .modifiers()
                .find_map(|m| m.strip_prefix('x').and_then(|v| v.parse::<u64>().ok()))
                .unwrap_or(1);
            let access = if base == "ldmatrix" {
                Access::Load
            } else {
                Access::Store
            };
            one(access, Space::Shared, 4 * regs)
        }
        "cp" if ins.has("async") && !ins.has("bulk") => {
            let bytes = match ins.operands.get(2) {
                Some(Operand::Int(n)) => (*n).max(0) as u64,
                _ => 0,
            };
            let (db, doff) = address(ins.operands.first());
            let (sb, soff) = address(ins.operands.get(1));
            vec![
                MemRef {
                    access: Access::Load,
                    space: Space::Global,
                    bytes,
                    base: sb,
                    offset: soff,
                },
                MemRef {
                    access: Access::Store,
                    space: Space::Shared,
                    bytes,
                    base: db,
                    offset: doff,
                },
            ]
        }
        _ => Vec::new(),
    }
}

/// Whether `ins` is a block-wide barrier (`bar.sync`, `barrier.sync`, `bar.red`...), not
/// the warp-level `bar.warp.sync`.
pub fn is_block_barrier(ins: &Instruction) -> bool {
    matches!(ins.base(), "bar" | "barrier")
        && !ins.has("warp")
        && !ins.has("arrive")
        && !ins.has("cluster")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::parse;

    /// One parsed instruction (leaked: tests only, so borrows of it outlive the call).
    fn ins(text: &str) -> &'static Instruction {
        let m = parse(&format!(".entry k() {{ {text} }}")).unwrap();
        match &m.functions[0].body[0] {
            crate::analyze::ast::Stmt::Instr(i) => Box::leak(Box::new(i.clone())),
            s => panic!("{s:?}"),
        }
    }

    #[test]
    fn the_known_list_is_sorted_for_binary_search() {
        assert!(KNOWN.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn defs_and_uses() {
        let (d, u) = defs_uses(ins("@%p1 add.f32 %f1, %f2, %f3;"));
        assert_eq!((d, u), (vec!["%f1"], vec!["%p1", "%f2", "%f3"]));
        let (d, u) = defs_uses(ins("st.global.v2.f32 [%rd1+8], {%f1, %f2};"));
        assert_eq!((d, u), (vec![], vec!["%rd1", "%f1", "%f2"]));
        let (d, _) = defs_uses(ins("setp.lt.f32 %p1|%p2, %f1, %f2;"));
        assert_eq!(d, vec!["%p1", "%p2"]);
        let (d, u) = defs_uses(ins("atom.global.add.u32 %r1, [%rd1], 1;"));
        assert_eq!((d, u), (vec!["%r1"], vec!["%rd1"]));
        let (d, u) = defs_uses(ins(
            "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2}, %rd1, %rd2, 1, 1, 1, 0, 0;",
        ));
        assert_eq!(d, vec!["%f1", "%f2"]);
        assert!(u.contains(&"%f1") && u.contains(&"%rd2"));
    }

    #[test]
    fn classes_and_flops() {
        assert_eq!(class(ins("fma.rn.f32 %f1, %f2, %f3, %f4;")), "fp32");
        assert_eq!(flops(ins("fma.rn.f32 %f1, %f2, %f3, %f4;")), 2.0);
        assert_eq!(flops(ins("add.rn.f16x2 %r1, %r2, %r3;")), 2.0);
        assert_eq!(class(ins("mad.lo.s32 %r1, %r2, %r3, %r4;")), "integer");
        assert_eq!(flops(ins("mad.lo.s32 %r1, %r2, %r3, %r4;")), 0.0);
        let mma =
            ins("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1}, {%r1}, {%r2}, {%f1};");
        assert_eq!(class(mma), "tensor");
        assert_eq!(flops(mma), 2.0 * 16.0 * 8.0 * 16.0 / 32.0);
        assert_eq!(class(ins("frobnicate.b32 %r1;")), "unknown");
    }

    #[test]
    fn memory_widths_and_spaces() {
        let m = memory(ins("ld.global.nc.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1+16];"));
        assert_eq!(m.len(), 1);
        assert_eq!(
            (m[0].space, m[0].bytes, m[0].base, m[0].offset),
            (Space::Global, 16, Some("%rd1"), 16)
        );
        let m = memory(ins("st.f32 [%rd2], %f1;"));
        assert_eq!(
            (m[0].access, m[0].space, m[0].bytes),
            (Access::Store, Space::Generic, 4)
        );
        let m = memory(ins("cp.async.cg.shared.global [%r1], [%rd1], 16;"));
        assert_eq!(m.len(), 2);
        assert_eq!(
            (m[1].space, m[1].bytes, m[1].base),
            (Space::Shared, 16, Some("%r1"))
        );
        assert!(is_block_barrier(ins("bar.sync 0;")));
        assert!(!is_block_barrier(ins("bar.warp.sync -1;")));
    }
}
