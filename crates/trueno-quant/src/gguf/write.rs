//! A GGUF v3 writer: metadata and tensors in, a file image out (for tests and tools).

use super::types::{GgmlType, GgufValue, ValueType};
use super::{DEFAULT_ALIGNMENT, GGUF_MAGIC, GgufError};

/// Collects metadata and tensors, then writes them as GGUF v3.
///
/// ```
/// use trueno_quant::gguf::{GgmlType, GgufFile, GgufValue, GgufWriter};
/// let mut w = GgufWriter::new();
/// w.add_metadata("general.name", GgufValue::String("tiny".into()))?;
/// let f32_type = GgmlType::from_name("F32").unwrap();
/// let data: Vec<u8> = [1.0f32, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
/// w.add_tensor("w", &[2], f32_type, data)?;
/// let file = GgufFile::from_bytes(w.to_bytes()?)?;
/// assert_eq!(file.get("general.name").and_then(|v| v.as_str()), Some("tiny"));
/// assert_eq!(file.tensor("w")?.to_f32()?, vec![1.0, 2.0]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Default)]
pub struct GgufWriter {
    metadata: Vec<(String, GgufValue)>,
    tensors: Vec<(String, Vec<u64>, GgmlType, Vec<u8>)>,
}

fn invalid<T>(what: String) -> Result<T, GgufError> {
    Err(GgufError::Invalid { what })
}

impl GgufWriter {
    /// An empty file.
    pub fn new() -> GgufWriter {
        GgufWriter::default()
    }

    /// Adds a metadata entry (keys must be unique; arrays must hold items of their type).
    pub fn add_metadata(&mut self, key: &str, value: GgufValue) -> Result<(), GgufError> {
        if self.metadata.iter().any(|(k, _)| k == key) {
            return invalid(format!("metadata key {key:?} added twice"));
        }
        check_array(&value)?;
        if key == "general.alignment"
            && !value.as_u64().is_some_and(|a| a > 0 && a.is_power_of_two())
        {
            return invalid(format!("general.alignment {value} is not a power of two"));
        }
        self.metadata.push((key.to_string(), value));
        Ok(())
    }

    /// Adds a tensor of `dims` (GGML order) whose `data` is exactly its encoded bytes.
    pub fn add_tensor(
        &mut self,
        name: &str,
        dims: &[u64],
        ggml_type: GgmlType,
        data: Vec<u8>,
    ) -> Result<(), GgufError> {
        if self.tensors.iter().any(|t| t.0 == name) {
            return invalid(format!("tensor {name:?} added twice"));
        }
        if dims.is_empty() || dims.len() > 4 {
            return invalid(format!("{name:?} has {} dimensions (1 to 4)", dims.len()));
        }
        let size = super::read::tensor_size_for_writer(dims, ggml_type)
            .map_err(|what| GgufError::Invalid { what })?;
        if data.len() as u64 != size {
            return invalid(format!(
                "{name:?}: {} bytes given, {dims:?} of {} takes {size}",
                data.len(),
                ggml_type.name
            ));
        }
        self.tensors
            .push((name.to_string(), dims.to_vec(), ggml_type, data));
        Ok(())
    }

    /// The file image.
    pub fn to_bytes(&self) -> Result<Vec<u8>, GgufError> {
        let alignment = self
            .metadata
            .iter()
            .find(|(k, _)| k == "general.alignment")
            .and_then(|(_, v)| v.as_u64())
            .unwrap_or(DEFAULT_ALIGNMENT);
        let mut out = Vec::new();
        out.extend(GGUF_MAGIC.to_le_bytes());
        out.extend(3u32.to_le_bytes());
        out.extend((self.tensors.len() as u64).to_le_bytes());
        out.extend((self.metadata.len() as u64).to_le_bytes());
        for (k, v) in &self.metadata {
            put_string(&mut out, k);
            out.extend((v.value_type() as u32).to_le_bytes());
            put_value(&mut out, v);
        }
        let mut offset = 0u64;
        let mut offsets = Vec::with_capacity(self.tensors.len());
        for (name, dims, t, data) in &self.tensors {
            put_string(&mut out, name);
            out.extend((dims.len() as u32).to_le_bytes());
            for d in dims {
                out.extend(d.to_le_bytes());
            }
            out.extend(t.id.to_le_bytes());
            out.extend(offset.to_le_bytes());
            offsets.push(offset);
            offset = (offset + data.len() as u64).next_multiple_of(alignment);
        }
        let data_start = (out.len() as u64).next_multiple_of(alignment);
        out.resize(data_start as usize, 0);
        for ((_, _, _, data), off) in self.tensors.iter().zip(offsets) {
            out.resize((data_start + off) as usize, 0);
            out.extend(data);
        }
        Ok(out)
    }

    /// Writes the file image to `path`.
    pub fn write(&self, path: impl AsRef<std::path::Path>) -> Result<(), GgufError> {
        let path = path.as_ref();
        std::fs::write(path, self.to_bytes()?).map_err(|e| GgufError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })
    }
}

fn check_array(v: &GgufValue) -> Result<(), GgufError> {
    if let GgufValue::Array(t, items) = v {
        for item in items {
            if item.value_type() != *t {
                return invalid(format!(
                    "array of {t:?} holds a {:?} item",
                    item.value_type()
                ));
            }
            check_array(item)?;
        }
    }
    Ok(())
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

fn put_value(out: &mut Vec<u8>, v: &GgufValue) {
    match v {
        GgufValue::U8(x) => out.push(*x),
        GgufValue::I8(x) => out.push(*x as u8),
        GgufValue::U16(x) => out.extend(x.to_le_bytes()),
        GgufValue::I16(x) => out.extend(x.to_le_bytes()),
        GgufValue::U32(x) => out.extend(x.to_le_bytes()),
        GgufValue::I32(x) => out.extend(x.to_le_bytes()),
        GgufValue::F32(x) => out.extend(x.to_le_bytes()),
        GgufValue::Bool(x) => out.push(*x as u8),
        GgufValue::String(s) => put_string(out, s),
        GgufValue::U64(x) => out.extend(x.to_le_bytes()),
        GgufValue::I64(x) => out.extend(x.to_le_bytes()),
        GgufValue::F64(x) => out.extend(x.to_le_bytes()),
        GgufValue::Array(t, items) => {
            out.extend((*t as u32).to_le_bytes());
            out.extend((items.len() as u64).to_le_bytes());
            for item in items {
                put_value(out, item);
            }
        }
    }
}

const _: () = assert!(ValueType::F64 as u32 == 12);
