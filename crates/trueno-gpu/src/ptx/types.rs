//! PTX scalar types, state spaces and the typed register handles the builder hands out.

use std::fmt;
use std::marker::PhantomData;

/// A PTX scalar type as it appears in an instruction suffix or a register declaration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PtxType {
    /// Predicate (`.pred`).
    Pred,
    /// Untyped 16 bits.
    B16,
    /// Untyped 32 bits.
    B32,
    /// Untyped 64 bits.
    B64,
    /// Unsigned 16-bit integer.
    U16,
    /// Unsigned 32-bit integer.
    U32,
    /// Unsigned 64-bit integer.
    U64,
    /// Signed 32-bit integer.
    S32,
    /// Signed 64-bit integer.
    S64,
    /// IEEE half.
    F16,
    /// bfloat16.
    Bf16,
    /// IEEE single.
    F32,
    /// IEEE double.
    F64,
}

impl PtxType {
    /// The suffix without its dot (`f32`).
    pub fn name(self) -> &'static str {
        match self {
            PtxType::Pred => "pred",
            PtxType::B16 => "b16",
            PtxType::B32 => "b32",
            PtxType::B64 => "b64",
            PtxType::U16 => "u16",
            PtxType::U32 => "u32",
            PtxType::U64 => "u64",
            PtxType::S32 => "s32",
            PtxType::S64 => "s64",
            PtxType::F16 => "f16",
            PtxType::Bf16 => "bf16",
            PtxType::F32 => "f32",
            PtxType::F64 => "f64",
        }
    }

    /// Width in bits (predicates count as 1).
    pub fn bits(self) -> u32 {
        match self {
            PtxType::Pred => 1,
            PtxType::B16 | PtxType::U16 | PtxType::F16 | PtxType::Bf16 => 16,
            PtxType::B32 | PtxType::U32 | PtxType::S32 | PtxType::F32 => 32,
            PtxType::B64 | PtxType::U64 | PtxType::S64 | PtxType::F64 => 64,
        }
    }

    /// Size in bytes in memory.
    pub fn bytes(self) -> u32 {
        self.bits().div_ceil(8)
    }

    /// Floating-point arithmetic type.
    pub fn is_float(self) -> bool {
        matches!(
            self,
            PtxType::F16 | PtxType::Bf16 | PtxType::F32 | PtxType::F64
        )
    }

    /// Untyped bit container (`.bN`).
    pub fn is_bits(self) -> bool {
        matches!(self, PtxType::B16 | PtxType::B32 | PtxType::B64)
    }

    /// Signed integer.
    pub fn is_signed(self) -> bool {
        matches!(self, PtxType::S32 | PtxType::S64)
    }

    /// The register file a value of this type lives in: one declaration and one name
    /// prefix per class, so registers of a class can be reused for each other.
    pub fn reg_class(self) -> RegClass {
        match self {
            PtxType::Pred => RegClass::Pred,
            PtxType::B16 | PtxType::U16 | PtxType::F16 | PtxType::Bf16 => RegClass::B16,
            PtxType::B32 | PtxType::U32 | PtxType::S32 => RegClass::B32,
            PtxType::F32 => RegClass::F32,
            PtxType::B64 | PtxType::U64 | PtxType::S64 => RegClass::B64,
            PtxType::F64 => RegClass::F64,
        }
    }

    /// Whether a register of type `reg` may be an operand of an instruction typed `self`.
    /// PTX allows any register of the same width for `.bN` instructions; arithmetic types
    /// must agree in kind (float with float of the same width, integer with integer).
    pub fn accepts(self, reg: PtxType) -> bool {
        if self == PtxType::Pred || reg == PtxType::Pred {
            return self == reg;
        }
        if self.bits() != reg.bits() {
            return false;
        }
        if self.is_bits() || reg.is_bits() {
            return true;
        }
        if self.is_float() || reg.is_float() {
            return self == reg;
        }
        true
    }
}

impl fmt::Display for PtxType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Register files, one `.reg` declaration each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RegClass {
    /// `%p`
    Pred,
    /// `%h` (16-bit: f16, bf16, u16)
    B16,
    /// `%r` (32-bit integers)
    B32,
    /// `%f` (f32)
    F32,
    /// `%rd` (64-bit integers, addresses)
    B64,
    /// `%fd` (f64)
    F64,
}

impl RegClass {
    /// All classes, in declaration order.
    pub const ALL: [RegClass; 6] = [
        RegClass::Pred,
        RegClass::B16,
        RegClass::B32,
        RegClass::F32,
        RegClass::B64,
        RegClass::F64,
    ];

    /// Name prefix in emitted PTX.
    pub fn prefix(self) -> &'static str {
        match self {
            RegClass::Pred => "%p",
            RegClass::B16 => "%h",
            RegClass::B32 => "%r",
            RegClass::F32 => "%f",
            RegClass::B64 => "%rd",
            RegClass::F64 => "%fd",
        }
    }

    /// Type used in the `.reg` declaration.
    pub fn decl_type(self) -> &'static str {
        match self {
            RegClass::Pred => ".pred",
            RegClass::B16 => ".b16",
            RegClass::B32 => ".b32",
            RegClass::F32 => ".f32",
            RegClass::B64 => ".b64",
            RegClass::F64 => ".f64",
        }
    }
}

/// A PTX state space for loads, stores and atomics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Space {
    /// Device memory.
    Global,
    /// Block-shared memory.
    Shared,
    /// Kernel parameters.
    Param,
}

impl Space {
    /// The space's suffix without its dot.
    pub fn name(self) -> &'static str {
        match self {
            Space::Global => "global",
            Space::Shared => "shared",
            Space::Param => "param",
        }
    }
}

/// An untyped virtual register in the IR: an id and the PTX type it was created with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VReg {
    /// Unique within one kernel.
    pub id: u32,
    /// Declared type.
    pub ty: PtxType,
}

/// Marker types that give a register its PTX type at compile time.
pub trait RegType: Copy + 'static {
    /// The PTX type.
    const TY: PtxType;
}

macro_rules! reg_types {
    ($($(#[$m:meta])* $name:ident => $ty:ident),* $(,)?) => {$(
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub struct $name;
        impl RegType for $name {
            const TY: PtxType = PtxType::$ty;
        }
    )*};
}

reg_types! {
    /// `.pred`
    Pred => Pred,
    /// `.u32`
    U32 => U32,
    /// `.s32`
    S32 => S32,
    /// `.u64` (addresses)
    U64 => U64,
    /// `.f32`
    F32 => F32,
    /// `.f64`
    F64 => F64,
    /// `.f16` (held in a 16-bit register)
    F16 => F16,
    /// `.bf16` (held in a 16-bit register)
    Bf16 => Bf16,
    /// `.u16`
    U16 => U16,
}

/// A register whose PTX type is part of its Rust type: mixing an `f32` register into a
/// `u32` add does not compile.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Reg<T: RegType> {
    pub(crate) id: u32,
    _ty: PhantomData<T>,
}

impl<T: RegType> Clone for Reg<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: RegType> Copy for Reg<T> {}

impl<T: RegType> Reg<T> {
    pub(crate) fn new(id: u32) -> Self {
        Reg {
            id,
            _ty: PhantomData,
        }
    }

    /// The untyped IR register.
    pub fn vreg(self) -> VReg {
        VReg {
            id: self.id,
            ty: T::TY,
        }
    }
}

/// Integer and float types that have add/sub/mul/min/max.
pub trait Arith: RegType {}
impl Arith for U32 {}
impl Arith for S32 {}
impl Arith for U64 {}
impl Arith for F32 {}
impl Arith for F64 {}

/// Float types with fma, division and the special functions.
pub trait Float: Arith {}
impl Float for F32 {}
impl Float for F64 {}

/// Integer types with bitwise operations and shifts.
pub trait Int: Arith {}
impl Int for U32 {}
impl Int for S32 {}
impl Int for U64 {}
