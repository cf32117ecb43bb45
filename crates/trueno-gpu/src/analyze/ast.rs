//! The parsed form of a PTX module: directives, functions, declarations, statements.
//! Registers are kept by name here; [`super::flow`] numbers them.

/// A source position, 1-based.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Pos {
    /// Line.
    pub line: u32,
    /// Column.
    pub col: u32,
}

/// A whole `.ptx` file.
#[derive(Clone, Debug, Default)]
pub struct Module {
    /// `.version` (`"8.5"`), if present.
    pub version: Option<String>,
    /// `.target` list (`["sm_90"]`).
    pub target: Vec<String>,
    /// `.address_size` (64 when absent).
    pub address_size: u32,
    /// Module-scope variables (`.global`, `.shared`, `.const`).
    pub globals: Vec<VarDecl>,
    /// `.entry` and `.func` definitions (declarations without a body are skipped).
    pub functions: Vec<Function>,
}

/// A state space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Space {
    /// Device memory.
    Global,
    /// Block-shared memory (`.shared`, `.shared::cta`, `.shared::cluster`).
    Shared,
    /// Per-thread memory (stack, spills).
    Local,
    /// Kernel parameters.
    Param,
    /// Constant bank.
    Const,
    /// No space given: a generic address.
    Generic,
}

impl Space {
    /// From one directive or opcode part (`.global`, `shared::cta`...).
    pub fn from_part(part: &str) -> Option<Space> {
        let p = part.trim_start_matches('.');
        let p = p.split("::").next().unwrap_or(p);
        Some(match p {
            "global" => Space::Global,
            "shared" => Space::Shared,
            "local" => Space::Local,
            "param" => Space::Param,
            "const" => Space::Const,
            _ => return None,
        })
    }

    /// `global`, `shared`...
    pub fn name(self) -> &'static str {
        match self {
            Space::Global => "global",
            Space::Shared => "shared",
            Space::Local => "local",
            Space::Param => "param",
            Space::Const => "const",
            Space::Generic => "generic",
        }
    }
}

/// A variable: `.shared .align 16 .b8 tile[4096];`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VarDecl {
    /// Its state space.
    pub space: Space,
    /// Element type (`b8`, `f32`...), without the dot.
    pub ty: String,
    /// Its name.
    pub name: String,
    /// Total bytes (element size times the array length; 0 for `name[]`, an extern array).
    pub bytes: u64,
    /// Where it was declared.
    pub pos: Pos,
}

/// `.reg .f32 %f<8>;` (count 8, names `%f0`..`%f7`) or `.reg .b32 %r;` (count 0: the name
/// itself).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegDecl {
    /// Register type (`pred`, `b32`, `f64`...), without the dot.
    pub ty: String,
    /// Vector width from `.v2`/`.v4` (1 otherwise).
    pub vector: u32,
    /// The name, or the prefix of a `<N>` range.
    pub name: String,
    /// The `<N>` of a range, or `None` for a single register.
    pub range: Option<u32>,
    /// Where.
    pub pos: Pos,
}

/// A kernel parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamDecl {
    /// Its type (`u64`, `b8`...).
    pub ty: String,
    /// Its name.
    pub name: String,
    /// Bytes (element size times the array length).
    pub bytes: u64,
}

/// An instruction operand.
#[derive(Clone, Debug, PartialEq)]
pub enum Operand {
    /// A register, special register, label or symbol: `%r1`, `%tid.x`, `$L__BB0_1`, `smem`.
    Name(String),
    /// An integer literal (hex and decimal; `-` folded in).
    Int(i64),
    /// A floating literal (`1.5`, `0f3F800000`): only its presence matters here.
    Float,
    /// `[base+offset]` (`base` absent for `[16]`).
    Address {
        /// The register or symbol.
        base: Option<String>,
        /// The byte offset.
        offset: i64,
    },
    /// `{a, b, c, d}`.
    Vector(Vec<Operand>),
    /// `(a, b)`: a call's argument or return list.
    List(Vec<Operand>),
    /// `!%p`: a negated predicate.
    Not(Box<Operand>),
    /// `%p|%q`: the two results of `setp` (or value and predicate of `shfl`).
    Pair(Box<Operand>, Box<Operand>),
    /// `_`: a sink.
    Sink,
}

impl Operand {
    /// Every name this operand mentions (registers, symbols), in order.
    pub fn names(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.collect_names(&mut out);
        out
    }

    fn collect_names<'a>(&'a self, out: &mut Vec<&'a str>) {
        match self {
            Operand::Name(n) => out.push(n),
            Operand::Address { base: Some(b), .. } => out.push(b),
            Operand::Vector(v) | Operand::List(v) => v.iter().for_each(|o| o.collect_names(out)),
            Operand::Not(o) => o.collect_names(out),
            Operand::Pair(a, b) => {
                a.collect_names(out);
                b.collect_names(out);
            }
            _ => {}
        }
    }
}

/// `@%p` or `@!%p`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Guard {
    /// The predicate register.
    pub reg: String,
    /// `@!`.
    pub negated: bool,
}

/// One instruction.
#[derive(Clone, Debug, PartialEq)]
pub struct Instruction {
    /// Its guard predicate, if any.
    pub guard: Option<Guard>,
    /// The full opcode with its modifiers (`ld.global.nc.v4.f32`).
    pub opcode: String,
    /// Operands in source order.
    pub operands: Vec<Operand>,
    /// Where it starts.
    pub pos: Pos,
    /// Length of the opcode's first part (`ld` in `ld.global.f32`), found once: the
    /// analyses ask for it on every instruction many times.
    pub base_len: usize,
}

impl Instruction {
    /// An instruction from its parts.
    pub fn new(guard: Option<Guard>, opcode: String, operands: Vec<Operand>, pos: Pos) -> Self {
        let base_len = opcode.find('.').unwrap_or(opcode.len());
        Instruction {
            guard,
            opcode,
            operands,
            pos,
            base_len,
        }
    }

    /// The opcode without modifiers (`ld`).
    pub fn base(&self) -> &str {
        &self.opcode[..self.base_len]
    }

    /// The modifiers (`global`, `nc`, `v4`, `f32`), without dots.
    pub fn modifiers(&self) -> impl Iterator<Item = &str> {
        self.opcode.split('.').skip(1)
    }

    /// Whether `m` is one of the modifiers.
    pub fn has(&self, m: &str) -> bool {
        self.modifiers().any(|x| x == m)
    }
}

/// A statement of a function body.
#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    /// `name:`.
    Label(String, Pos),
    /// An instruction.
    Instr(Instruction),
}

/// `.entry` or `.func`.
#[derive(Clone, Debug, Default)]
pub struct Function {
    /// Its name.
    pub name: String,
    /// A kernel (`.entry`) rather than a device function.
    pub is_entry: bool,
    /// Parameters.
    pub params: Vec<ParamDecl>,
    /// `.reg` declarations (the body's, nested scopes included).
    pub regs: Vec<RegDecl>,
    /// `.shared`, `.local`, `.const` and `.global` variables declared in the body.
    pub vars: Vec<VarDecl>,
    /// `.maxntid` / `.reqntid`: threads per block, multiplied out.
    pub max_threads: Option<u32>,
    /// `.reqntid`'s x dimension: the block's exact width, when the kernel requires one.
    pub required_width: Option<u32>,
    /// `.minnctapersm`.
    pub min_blocks_per_sm: Option<u32>,
    /// `.maxnreg`.
    pub max_registers: Option<u32>,
    /// Labels and instructions in order.
    pub body: Vec<Stmt>,
    /// Where `.entry`/`.func` is.
    pub pos: Pos,
    /// The line of its closing brace.
    pub end_line: u32,
}

/// Bytes of one element of a PTX type (`f32` -> 4, `b128` -> 16, `pred` -> 0 as memory).
pub fn type_bytes(ty: &str) -> Option<u64> {
    let ty = ty.trim_start_matches('.');
    Some(match ty {
        "pred" => 0,
        "b8" | "s8" | "u8" | "e4m3" | "e5m2" => 1,
        "b16" | "s16" | "u16" | "f16" | "bf16" | "e4m3x2" | "e5m2x2" => 2,
        "b32" | "s32" | "u32" | "f32" | "f16x2" | "bf16x2" | "tf32" => 4,
        "b64" | "s64" | "u64" | "f64" => 8,
        "b128" => 16,
        _ => return None,
    })
}
