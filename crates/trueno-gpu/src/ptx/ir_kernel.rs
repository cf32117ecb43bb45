//! A kernel in the IR ([`super::ir`]): its parameters, shared arrays and instruction
//! stream, what the builder finishes and every pass takes.

use super::ir::{Instr, Op};
use super::types::PtxType;

/// A kernel parameter: a name and its PTX type (`u64` for pointers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// Name in the PTX.
    pub name: String,
    /// Type as declared.
    pub ty: PtxType,
    /// Pointer to device memory of this element type (for launch argument checks).
    pub pointee: Option<PtxType>,
    /// A 128-byte tensor map passed by value (`.param .align 64 .b8 name[128]`); `ty`
    /// is then unused.
    pub tensor_map: bool,
}

/// A statically sized shared-memory array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedDecl {
    /// Name in the PTX.
    pub name: String,
    /// Size in bytes.
    pub bytes: u32,
    /// Alignment in bytes.
    pub align: u32,
}

/// One kernel (`.entry`).
#[derive(Clone, Debug, PartialEq)]
pub struct KernelIr {
    /// Entry name.
    pub name: String,
    /// Parameters in order.
    pub params: Vec<Param>,
    /// Static shared arrays.
    pub shared: Vec<SharedDecl>,
    /// Uses `.extern .shared` dynamic memory, sized at launch.
    pub dynamic_shared: bool,
    /// Instruction stream.
    pub body: Vec<Instr>,
    /// `.maxntid` hint: the largest block this kernel is launched with.
    pub max_threads: Option<u32>,
    /// `.minnctapersm`: blocks that must fit on one multiprocessor (with `max_threads`,
    /// the register cap `setmaxnreg` needs at entry).
    pub min_blocks: Option<u32>,
    /// Next free register id.
    pub next_reg: u32,
}

impl KernelIr {
    /// Whether the kernel waits for the grids before it ([`Op::GridDepWait`]): only then
    /// may it be launched to overlap the stream's previous kernel.
    pub fn waits_for_previous_grid(&self) -> bool {
        self.body.iter().any(|i| i.op == Op::GridDepWait)
    }
}

/// Name of the dynamic shared-memory array in emitted PTX.
pub const DYNAMIC_SHARED: &str = "trueno_dyn_smem";
