//! The GGUF parser: a bounds-checked cursor over the file's bytes, then the whole tensor
//! table validated against the file (types, block multiples, alignment, extents, overlaps)
//! before any view is handed out.

use std::collections::HashSet;
use std::path::Path;

use super::types::{GgmlType, GgufValue, TensorInfo, ValueType};
use super::{DEFAULT_ALIGNMENT, GGUF_MAGIC, GgufError};
use crate::QuantFormat;

type Result<T> = std::result::Result<T, GgufError>;

/// Deepest nesting of arrays accepted (GGML writes one level; this bounds recursion).
const MAX_ARRAY_DEPTH: usize = 8;
/// GGML's limit on tensor dimensions.
const MAX_DIMS: u32 = 4;

struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn corrupt<T>(&self, what: String) -> Result<T> {
        Err(GgufError::Corrupt {
            offset: self.at as u64,
            what,
        })
    }

    fn left(&self) -> usize {
        self.b.len() - self.at
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if n > self.left() {
            return self.corrupt(format!(
                "{what} needs {n} bytes but the file ends {} bytes later",
                self.left()
            ));
        }
        let s = &self.b[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        Ok(self.take(N, what)?.try_into().expect("N bytes"))
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A count of items of at least `min_size` bytes each, checked against what is left.
    fn count(&mut self, min_size: usize, what: &str) -> Result<usize> {
        let start = self.at;
        let n = self.u64(what)?;
        let fits = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_mul(min_size))
            .is_some_and(|bytes| bytes <= self.left());
        if !fits {
            self.at = start;
            return self.corrupt(format!(
                "{what} is {n}, more than the {} bytes left could hold",
                self.b.len() - start - 8
            ));
        }
        Ok(n as usize)
    }

    fn string(&mut self, what: &str) -> Result<String> {
        let start = self.at;
        let len = self.count(1, &format!("{what} length"))?;
        let bytes = self.take(len, what)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_string()),
            Err(e) => {
                self.at = start;
                self.corrupt(format!("{what} is not UTF-8 ({e})"))
            }
        }
    }

    fn value_type(&mut self, what: &str) -> Result<ValueType> {
        let code = self.u32(what)?;
        match ValueType::from_code(code) {
            Some(t) => Ok(t),
            None => {
                self.at -= 4;
                self.corrupt(format!("{what}: unknown value type {code}"))
            }
        }
    }

    fn value(&mut self, t: ValueType, key: &str, depth: usize) -> Result<GgufValue> {
        Ok(match t {
            ValueType::U8 => GgufValue::U8(self.array::<1>(key)?[0]),
            ValueType::I8 => GgufValue::I8(self.array::<1>(key)?[0] as i8),
            ValueType::U16 => GgufValue::U16(u16::from_le_bytes(self.array(key)?)),
            ValueType::I16 => GgufValue::I16(i16::from_le_bytes(self.array(key)?)),
            ValueType::U32 => GgufValue::U32(self.u32(key)?),
            ValueType::I32 => GgufValue::I32(i32::from_le_bytes(self.array(key)?)),
            ValueType::F32 => GgufValue::F32(f32::from_le_bytes(self.array(key)?)),
            ValueType::U64 => GgufValue::U64(self.u64(key)?),
            ValueType::I64 => GgufValue::I64(i64::from_le_bytes(self.array(key)?)),
            ValueType::F64 => GgufValue::F64(f64::from_le_bytes(self.array(key)?)),
            ValueType::Bool => {
                let b = self.array::<1>(key)?[0];
                if b > 1 {
                    self.at -= 1;
                    return self.corrupt(format!("{key}: bool byte is {b}, not 0 or 1"));
                }
                GgufValue::Bool(b == 1)
            }
            ValueType::String => GgufValue::String(self.string(key)?),
            ValueType::Array => {
                if depth >= MAX_ARRAY_DEPTH {
                    return self.corrupt(format!("{key}: arrays nested deeper than 8"));
                }
                let elem = self.value_type(&format!("{key} element type"))?;
                let n = self.count(elem.min_size(), &format!("{key} array count"))?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.value(elem, key, depth + 1)?);
                }
                GgufValue::Array(elem, items)
            }
        })
    }
}

/// A parsed GGUF file: header, metadata and tensor table, over its mapped bytes.
pub struct GgufFile {
    bytes: Backing,
    version: u32,
    metadata: Vec<(String, GgufValue)>,
    tensors: Vec<TensorInfo>,
    alignment: u64,
    data_offset: u64,
}

enum Backing {
    #[cfg(not(target_arch = "wasm32"))]
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Backing {
    fn bytes(&self) -> &[u8] {
        match self {
            #[cfg(not(target_arch = "wasm32"))]
            Backing::Mapped(m) => m,
            Backing::Owned(v) => v,
        }
    }
}

impl GgufFile {
    /// Maps and parses the file at `path` (on wasm32, which has no memory maps, reads it).
    ///
    /// The mapping is read-only; as with any memory map, another process truncating or
    /// rewriting the file while it is open is outside what this can guard against.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile> {
        let path = path.as_ref();
        let io = |e: std::io::Error| GgufError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        };
        #[cfg(target_arch = "wasm32")]
        return GgufFile::parse(Backing::Owned(std::fs::read(path).map_err(io)?));
        #[cfg(not(target_arch = "wasm32"))]
        {
            let file = std::fs::File::open(path).map_err(io)?;
            // SAFETY: the map is read-only and lives as long as `GgufFile`; the file is not
            // modified by this process (see the doc comment for other processes).
            let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
            GgufFile::parse(Backing::Mapped(map))
        }
    }

    /// Parses a GGUF image held in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<GgufFile> {
        GgufFile::parse(Backing::Owned(bytes))
    }

    fn parse(backing: Backing) -> Result<GgufFile> {
        let b = backing.bytes();
        let mut c = Cursor { b, at: 0 };
        let magic = c.u32("magic")?;
        if magic != GGUF_MAGIC {
            c.at = 0;
            return c.corrupt(format!("magic is {magic:#010x}, not \"GGUF\""));
        }
        let version = c.u32("version")?;
        match version {
            2 | 3 => {}
            1 => {
                return Err(GgufError::Unsupported {
                    what: "GGUF v1 (32-bit counts)".into(),
                });
            }
            v if (2..=3).contains(&v.swap_bytes()) => {
                return Err(GgufError::Unsupported {
                    what: "big-endian GGUF".into(),
                });
            }
            v => {
                c.at = 4;
                return c.corrupt(format!("version {v} is not 2 or 3"));
            }
        }
        // The smallest tensor info is 8 (name) + 4 (dims) + 8 (one dim) + 4 + 8 bytes,
        // the smallest key/value 8 (key) + 4 (type) + 1.
        let n_tensors_at = c.at;
        let n_tensors = c.u64("tensor count")?;
        let n_kv = c.count(13, "metadata count")?;
        if n_tensors.saturating_mul(32) > c.left() as u64 {
            c.at = n_tensors_at;
            return c.corrupt(format!(
                "tensor count {n_tensors} is more than the file could hold"
            ));
        }
        let mut metadata = Vec::with_capacity(n_kv);
        let mut keys = HashSet::new();
        for _ in 0..n_kv {
            let at = c.at;
            let key = c.string("metadata key")?;
            let t = c.value_type(&format!("type of {key:?}"))?;
            let v = c.value(t, &key, 0)?;
            if !keys.insert(key.clone()) {
                c.at = at;
                return c.corrupt(format!("metadata key {key:?} appears twice"));
            }
            metadata.push((key, v));
        }
        let alignment = match metadata.iter().find(|(k, _)| k == "general.alignment") {
            None => DEFAULT_ALIGNMENT,
            Some((_, v)) => match v.as_u64() {
                Some(a) if a > 0 && a.is_power_of_two() => a,
                _ => {
                    return Err(GgufError::Corrupt {
                        offset: 0,
                        what: format!("general.alignment is {v}, not a power of two"),
                    });
                }
            },
        };
        let mut tensors = Vec::with_capacity(n_tensors as usize);
        let mut names = HashSet::new();
        for _ in 0..n_tensors {
            let at = c.at;
            let name = c.string("tensor name")?;
            let n_dims = c.u32(&format!("dimension count of {name:?}"))?;
            if n_dims == 0 || n_dims > MAX_DIMS {
                c.at -= 4;
                return c.corrupt(format!("{name:?} has {n_dims} dimensions (1 to 4 allowed)"));
            }
            let mut dims = Vec::with_capacity(n_dims as usize);
            for d in 0..n_dims {
                dims.push(c.u64(&format!("dimension {d} of {name:?}"))?);
            }
            let type_at = c.at;
            let id = c.u32(&format!("type of {name:?}"))?;
            let Some(ggml_type) = GgmlType::from_id(id) else {
                c.at = type_at;
                return c.corrupt(format!("{name:?} has unknown tensor type {id}"));
            };
            let offset = c.u64(&format!("data offset of {name:?}"))?;
            let size = tensor_size(&dims, ggml_type).map_err(|what| GgufError::Corrupt {
                offset: at as u64,
                what: format!("{name:?}: {what}"),
            })?;
            if !offset.is_multiple_of(alignment) {
                c.at -= 8;
                return c.corrupt(format!(
                    "{name:?} data offset {offset} is not a multiple of the alignment {alignment}"
                ));
            }
            if !names.insert(name.clone()) {
                c.at = at;
                return c.corrupt(format!("tensor {name:?} appears twice"));
            }
            tensors.push(TensorInfo {
                name,
                dims,
                ggml_type,
                offset,
                size,
            });
        }
        let data_offset = (c.at as u64).next_multiple_of(alignment);
        check_extents(&tensors, data_offset, b.len() as u64)?;
        Ok(GgufFile {
            bytes: backing,
            version,
            metadata,
            tensors,
            alignment,
            data_offset,
        })
    }

    /// The format version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Every metadata key and value, in file order.
    pub fn metadata(&self) -> &[(String, GgufValue)] {
        &self.metadata
    }

    /// The value of metadata key `key`.
    pub fn get(&self, key: &str) -> Option<&GgufValue> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Every tensor's info, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// Tensor data alignment in bytes.
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Byte offset of the data section in the file.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// Size of the file in bytes.
    pub fn file_size(&self) -> u64 {
        self.bytes.bytes().len() as u64
    }

    /// The tensor called `name`, with its bytes.
    pub fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        let info = self
            .tensors
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| GgufError::NotFound {
                kind: "tensor",
                name: name.to_string(),
            })?;
        // Extents were checked at parse time.
        let start = (self.data_offset + info.offset) as usize;
        Ok(TensorView {
            info,
            bytes: &self.bytes.bytes()[start..start + info.size as usize],
        })
    }
}

/// [`tensor_size`] for the writer's checks.
pub(super) fn tensor_size_for_writer(
    dims: &[u64],
    t: GgmlType,
) -> std::result::Result<u64, String> {
    tensor_size(dims, t)
}

/// Bytes of a tensor of `dims` elements of type `t`: rows must be whole blocks.
fn tensor_size(dims: &[u64], t: GgmlType) -> std::result::Result<u64, String> {
    let elements = dims
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .ok_or_else(|| format!("dimensions {dims:?} overflow 64 bits"))?;
    if !dims[0].is_multiple_of(t.block_elems) {
        return Err(format!(
            "row length {} is not a multiple of {}'s block of {}",
            dims[0], t.name, t.block_elems
        ));
    }
    (elements / t.block_elems)
        .checked_mul(t.block_bytes)
        .ok_or_else(|| format!("size of {dims:?} x {} overflows 64 bits", t.name))
}

/// Every tensor's data lies inside the file, and no two overlap.
fn check_extents(tensors: &[TensorInfo], data_offset: u64, file_len: u64) -> Result<()> {
    let mut spans: Vec<(u64, u64, &str)> = Vec::with_capacity(tensors.len());
    for t in tensors {
        let end = data_offset
            .checked_add(t.offset)
            .and_then(|s| s.checked_add(t.size));
        match end {
            Some(end) if end <= file_len => {
                spans.push((data_offset + t.offset, end, &t.name));
            }
            _ => {
                return Err(GgufError::Corrupt {
                    offset: data_offset.saturating_add(t.offset),
                    what: format!(
                        "tensor {:?} ({} bytes at data offset {}) runs past the end of the \
                         {file_len}-byte file",
                        t.name, t.size, t.offset
                    ),
                });
            }
        }
    }
    spans.sort_unstable();
    for w in spans.windows(2) {
        if w[1].0 < w[0].1 {
            return Err(GgufError::Corrupt {
                offset: w[1].0,
                what: format!("tensors {:?} and {:?} overlap", w[0].2, w[1].2),
            });
        }
    }
    Ok(())
}

/// One tensor's info and its bytes in the file.
#[derive(Clone, Copy, Debug)]
pub struct TensorView<'a> {
    /// The tensor table entry.
    pub info: &'a TensorInfo,
    /// Its data.
    pub bytes: &'a [u8],
}

impl<'a> TensorView<'a> {
    /// The block format of its data, where trueno-quant has one.
    pub fn format(&self) -> Option<QuantFormat> {
        self.info.ggml_type.quant_format()
    }

    /// Elements per row (`dims[0]`).
    pub fn row_len(&self) -> usize {
        self.info.dims[0] as usize
    }

    /// Number of rows (every dimension after the first).
    pub fn rows(&self) -> usize {
        self.info.dims[1..].iter().product::<u64>() as usize
    }

    /// The values as f32: F32, F16, BF16 and every block format with a dequantizer.
    pub fn to_f32(&self) -> crate::Result<Vec<f32>> {
        let n = self.info.elements() as usize;
        let words = |w: usize| self.bytes.chunks_exact(w);
        Ok(match (self.info.ggml_type.name, self.format()) {
            ("F32", _) => words(4)
                .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
                .collect(),
            ("F16", _) => words(2)
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            ("BF16", _) => words(2)
                .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            (_, Some(f)) => {
                let mut out = vec![0.0; n];
                crate::dequantize(f, self.bytes, &mut out)?;
                out
            }
            (name, None) => {
                return Err(crate::QuantError::Gguf(GgufError::Invalid {
                    what: format!("no f32 conversion for tensor type {name}"),
                }));
            }
        })
    }
}
