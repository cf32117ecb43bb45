//! GGUF's value types, metadata values, GGML tensor types and tensor infos.

use crate::QuantFormat;

/// A metadata value's type code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ValueType {
    /// u8
    U8 = 0,
    /// i8
    I8 = 1,
    /// u16
    U16 = 2,
    /// i16
    I16 = 3,
    /// u32
    U32 = 4,
    /// i32
    I32 = 5,
    /// f32
    F32 = 6,
    /// bool (one byte, 0 or 1)
    Bool = 7,
    /// UTF-8 string with a u64 length
    String = 8,
    /// typed array with a u64 count
    Array = 9,
    /// u64
    U64 = 10,
    /// i64
    I64 = 11,
    /// f64
    F64 = 12,
}

impl ValueType {
    /// The type with code `code`.
    pub fn from_code(code: u32) -> Option<ValueType> {
        use ValueType::*;
        [
            U8, I8, U16, I16, U32, I32, F32, Bool, String, Array, U64, I64, F64,
        ]
        .get(code as usize)
        .copied()
    }

    /// Bytes of one value of a fixed-size type (`None` for strings and arrays).
    pub fn fixed_size(self) -> Option<usize> {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => Some(1),
            U16 | I16 => Some(2),
            U32 | I32 | F32 => Some(4),
            U64 | I64 | F64 => Some(8),
            String | Array => None,
        }
    }

    /// The smallest encoding of one value (a string or array needs at least its length).
    pub(crate) fn min_size(self) -> usize {
        match self {
            ValueType::String => 8,
            ValueType::Array => 12,
            t => t.fixed_size().unwrap_or(1),
        }
    }
}

/// One metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum GgufValue {
    /// u8
    U8(u8),
    /// i8
    I8(i8),
    /// u16
    U16(u16),
    /// i16
    I16(i16),
    /// u32
    U32(u32),
    /// i32
    I32(i32),
    /// f32
    F32(f32),
    /// bool
    Bool(bool),
    /// string
    String(String),
    /// An array of values of one type (arrays may nest).
    Array(ValueType, Vec<GgufValue>),
    /// u64
    U64(u64),
    /// i64
    I64(i64),
    /// f64
    F64(f64),
}

impl GgufValue {
    /// This value's type code.
    pub fn value_type(&self) -> ValueType {
        match self {
            GgufValue::U8(_) => ValueType::U8,
            GgufValue::I8(_) => ValueType::I8,
            GgufValue::U16(_) => ValueType::U16,
            GgufValue::I16(_) => ValueType::I16,
            GgufValue::U32(_) => ValueType::U32,
            GgufValue::I32(_) => ValueType::I32,
            GgufValue::F32(_) => ValueType::F32,
            GgufValue::Bool(_) => ValueType::Bool,
            GgufValue::String(_) => ValueType::String,
            GgufValue::Array(..) => ValueType::Array,
            GgufValue::U64(_) => ValueType::U64,
            GgufValue::I64(_) => ValueType::I64,
            GgufValue::F64(_) => ValueType::F64,
        }
    }

    /// The value as an unsigned integer, if it is a non-negative integer of any width.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            GgufValue::U8(v) => Some(v.into()),
            GgufValue::U16(v) => Some(v.into()),
            GgufValue::U32(v) => Some(v.into()),
            GgufValue::U64(v) => Some(v),
            GgufValue::I8(v) => u64::try_from(v).ok(),
            GgufValue::I16(v) => u64::try_from(v).ok(),
            GgufValue::I32(v) => u64::try_from(v).ok(),
            GgufValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a string slice, if it is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            GgufValue::String(s) => Some(s),
            _ => None,
        }
    }
}

impl std::fmt::Display for GgufValue {
    /// Scalars in full; arrays as their type and length with the first few items.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GgufValue::U8(v) => write!(f, "{v}"),
            GgufValue::I8(v) => write!(f, "{v}"),
            GgufValue::U16(v) => write!(f, "{v}"),
            GgufValue::I16(v) => write!(f, "{v}"),
            GgufValue::U32(v) => write!(f, "{v}"),
            GgufValue::I32(v) => write!(f, "{v}"),
            GgufValue::F32(v) => write!(f, "{v:?}"),
            GgufValue::Bool(v) => write!(f, "{v}"),
            GgufValue::String(v) => write!(f, "{v:?}"),
            GgufValue::U64(v) => write!(f, "{v}"),
            GgufValue::I64(v) => write!(f, "{v}"),
            GgufValue::F64(v) => write!(f, "{v:?}"),
            GgufValue::Array(t, items) => {
                write!(f, "[{t:?}; {}]", items.len())?;
                let shown: Vec<String> = items.iter().take(4).map(|v| v.to_string()).collect();
                if !shown.is_empty() {
                    write!(f, " {}", shown.join(", "))?;
                    if items.len() > 4 {
                        write!(f, ", ...")?;
                    }
                }
                Ok(())
            }
        }
    }
}

/// A GGML tensor type: its id in GGUF, name, and block geometry (every type GGML defines
/// as of GGUF v3, so any file's sizes can be checked; only some have kernels here).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GgmlType {
    /// The id in tensor infos.
    pub id: u32,
    /// GGML's name.
    pub name: &'static str,
    /// Elements per block (1 for plain types).
    pub block_elems: u64,
    /// Bytes per block.
    pub block_bytes: u64,
}

const fn t(id: u32, name: &'static str, block_elems: u64, block_bytes: u64) -> GgmlType {
    GgmlType {
        id,
        name,
        block_elems,
        block_bytes,
    }
}

/// Every GGML tensor type, by id (sizes as in GGML's type traits).
pub const GGML_TYPES: [GgmlType; 34] = [
    t(0, "F32", 1, 4),
    t(1, "F16", 1, 2),
    t(2, "Q4_0", 32, 18),
    t(3, "Q4_1", 32, 20),
    t(6, "Q5_0", 32, 22),
    t(7, "Q5_1", 32, 24),
    t(8, "Q8_0", 32, 34),
    t(9, "Q8_1", 32, 40),
    t(10, "Q2_K", 256, 84),
    t(11, "Q3_K", 256, 110),
    t(12, "Q4_K", 256, 144),
    t(13, "Q5_K", 256, 176),
    t(14, "Q6_K", 256, 210),
    t(15, "Q8_K", 256, 292),
    t(16, "IQ2_XXS", 256, 66),
    t(17, "IQ2_XS", 256, 74),
    t(18, "IQ3_XXS", 256, 98),
    t(19, "IQ1_S", 256, 50),
    t(20, "IQ4_NL", 32, 18),
    t(21, "IQ3_S", 256, 110),
    t(22, "IQ2_S", 256, 82),
    t(23, "IQ4_XS", 256, 136),
    t(24, "I8", 1, 1),
    t(25, "I16", 1, 2),
    t(26, "I32", 1, 4),
    t(27, "I64", 1, 8),
    t(28, "F64", 1, 8),
    t(29, "IQ1_M", 256, 56),
    t(30, "BF16", 1, 2),
    t(34, "TQ1_0", 256, 54),
    t(35, "TQ2_0", 256, 66),
    t(39, "MXFP4", 32, 17),
    t(40, "NVFP4", 64, 36),
    t(41, "Q1_0", 128, 18),
];

impl GgmlType {
    /// The type with id `id`.
    pub fn from_id(id: u32) -> Option<GgmlType> {
        GGML_TYPES.iter().find(|t| t.id == id).copied()
    }

    /// The type called `name` (case-insensitive).
    pub fn from_name(name: &str) -> Option<GgmlType> {
        GGML_TYPES
            .iter()
            .find(|t| t.name.eq_ignore_ascii_case(name))
            .copied()
    }

    /// The block format of this type, where trueno-quant has one.
    pub fn quant_format(self) -> Option<QuantFormat> {
        QuantFormat::from_ggml_type(self.id)
    }
}

/// One tensor's entry in the file's tensor table.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    /// Its name.
    pub name: String,
    /// Its dimensions, GGML order: `dims[0]` is the contiguous (row) length.
    pub dims: Vec<u64>,
    /// Its element type.
    pub ggml_type: GgmlType,
    /// Byte offset of its data from the start of the data section.
    pub offset: u64,
    /// Bytes of data (whole blocks of each row).
    pub size: u64,
}

impl TensorInfo {
    /// Number of elements.
    pub fn elements(&self) -> u64 {
        self.dims.iter().product()
    }
}
