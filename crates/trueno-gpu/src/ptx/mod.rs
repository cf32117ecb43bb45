//! PTX generation: a typed IR built in Rust, checked, optimised, register-allocated and
//! written out by one emitter. No nvcc, no NVRTC.

mod builder;
pub mod cfg;
mod emit;
pub mod ir;
mod ir_kernel;
pub mod optimize;
pub mod regalloc;
mod types;
pub mod validate;

pub use builder::{KernelBuilder, Src};
pub use emit::PTX_VERSION;
pub use ir::{Cmp, KernelIr, Param, Rounding, ShflMode};
pub use regalloc::Allocation;
pub use types::{
    Arith, Bf16, F16, F32, F64, Float, Int, Pred, PtxType, Reg, RegClass, RegType, S32, Space, U16,
    U32, U64, VReg,
};

use crate::error::{GpuError, Result};

/// The GPU architecture a module is written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// Ampere (A100): the baseline every kernel here supports.
    Sm80,
    /// Hopper (H100, H200).
    Sm90,
    /// Hopper with its architecture-specific instructions (wgmma).
    Sm90a,
}

impl Target {
    /// `sm_80`, `sm_90`, `sm_90a`.
    pub fn name(self) -> &'static str {
        match self {
            Target::Sm80 => "sm_80",
            Target::Sm90 => "sm_90",
            Target::Sm90a => "sm_90a",
        }
    }

    /// Parses `sm_80` / `sm_90` / `sm_90a`.
    pub fn parse(s: &str) -> Option<Target> {
        match s {
            "sm_80" => Some(Target::Sm80),
            "sm_90" => Some(Target::Sm90),
            "sm_90a" => Some(Target::Sm90a),
            _ => None,
        }
    }

    /// Whether code for this target may use `griddepcontrol` (programmatic dependent
    /// launch, sm_90 and later); for sm_80 the IR's grid waits are left out.
    pub fn has_grid_dependency_control(self) -> bool {
        self != Target::Sm80
    }

    /// The best target for a device of compute capability `major.minor`, or `None` when it
    /// predates sm_80.
    pub fn for_capability(major: i32, minor: i32) -> Option<Target> {
        match (major, minor) {
            (m, _) if m >= 9 => Some(Target::Sm90),
            (8, _) => Some(Target::Sm80),
            _ => None,
        }
    }
}

/// What the passes did to one kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PassStats {
    /// mul+add pairs fused into fma.
    pub fused_fma: usize,
    /// Instructions removed as dead.
    pub dead_removed: usize,
    /// Virtual registers before allocation.
    pub virtual_regs: u32,
    /// PTX registers declared after allocation.
    pub allocated_regs: u32,
}

/// A kernel that passed validation, optimised and allocated, ready to emit.
#[derive(Clone, Debug)]
pub struct CompiledKernel {
    /// The optimised IR.
    pub ir: KernelIr,
    /// Its register names.
    pub alloc: Allocation,
    /// Pass statistics.
    pub stats: PassStats,
}

/// Validates, optimises (fma fusion, dead code) and allocates one kernel.
pub fn compile(mut ir: KernelIr) -> Result<CompiledKernel> {
    check(&ir)?;
    let fused_fma = optimize::fuse_fma(&mut ir);
    let dead_removed = optimize::remove_dead_code(&mut ir);
    check(&ir)?;
    let alloc = regalloc::allocate(&ir);
    let stats = PassStats {
        fused_fma,
        dead_removed,
        virtual_regs: ir.next_reg,
        allocated_regs: alloc.total(),
    };
    Ok(CompiledKernel { ir, alloc, stats })
}

fn check(ir: &KernelIr) -> Result<()> {
    let faults = validate::validate(ir);
    if faults.is_empty() {
        return Ok(());
    }
    let text: Vec<String> = faults.iter().map(|f| f.to_string()).collect();
    Err(GpuError::Validation(text.join("\n")))
}

/// Emits a module of compiled kernels for `target`.
pub fn emit_module(target: Target, kernels: &[CompiledKernel]) -> String {
    let pairs: Vec<(KernelIr, Allocation)> = kernels
        .iter()
        .map(|k| (k.ir.clone(), k.alloc.clone()))
        .collect();
    emit::module(target, &pairs)
}
