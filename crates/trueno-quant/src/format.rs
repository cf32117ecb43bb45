//! The format registry: one row per block format (name, GGML type id, block geometry).

use crate::blocks::QK_K;

/// A quantized block format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuantFormat {
    /// GGML Q4_0.
    Q4_0,
    /// GGML Q4_1.
    Q4_1,
    /// GGML Q5_0.
    Q5_0,
    /// GGML Q5_1.
    Q5_1,
    /// GGML Q8_0.
    Q8_0,
    /// GGML Q4_K.
    Q4K,
    /// GGML Q5_K.
    Q5K,
    /// GGML Q6_K.
    Q6K,
    /// GGML Q8_K (the activation format of the K-quant integer dot products).
    Q8K,
    /// QLoRA NF4, block 64 with an f32 absmax (no GGML id).
    Nf4,
}

/// One registry row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FormatInfo {
    /// The format.
    pub format: QuantFormat,
    /// GGML's name (`"Q4_K"`), as `gguf` tools print it.
    pub name: &'static str,
    /// GGML's type id in GGUF tensor infos, if GGML has the format.
    pub ggml_type: Option<u32>,
    /// Weights per block.
    pub block_elems: usize,
    /// Bytes per block.
    pub block_bytes: usize,
}

impl FormatInfo {
    /// Storage cost in bits per weight.
    pub fn bits_per_weight(&self) -> f64 {
        self.block_bytes as f64 * 8.0 / self.block_elems as f64
    }
}

/// Every format, in GGML type-id order (NF4 last).
pub const FORMATS: [FormatInfo; 10] = [
    row(QuantFormat::Q4_0, "Q4_0", Some(2), 32, 18),
    row(QuantFormat::Q4_1, "Q4_1", Some(3), 32, 20),
    row(QuantFormat::Q5_0, "Q5_0", Some(6), 32, 22),
    row(QuantFormat::Q5_1, "Q5_1", Some(7), 32, 24),
    row(QuantFormat::Q8_0, "Q8_0", Some(8), 32, 34),
    row(QuantFormat::Q4K, "Q4_K", Some(12), QK_K, 144),
    row(QuantFormat::Q5K, "Q5_K", Some(13), QK_K, 176),
    row(QuantFormat::Q6K, "Q6_K", Some(14), QK_K, 210),
    row(QuantFormat::Q8K, "Q8_K", Some(15), QK_K, 292),
    row(QuantFormat::Nf4, "NF4", None, 64, 36),
];

const fn row(
    format: QuantFormat,
    name: &'static str,
    ggml_type: Option<u32>,
    block_elems: usize,
    block_bytes: usize,
) -> FormatInfo {
    FormatInfo {
        format,
        name,
        ggml_type,
        block_elems,
        block_bytes,
    }
}

impl QuantFormat {
    /// Every format.
    pub const ALL: [QuantFormat; 10] = [
        QuantFormat::Q4_0,
        QuantFormat::Q4_1,
        QuantFormat::Q5_0,
        QuantFormat::Q5_1,
        QuantFormat::Q8_0,
        QuantFormat::Q4K,
        QuantFormat::Q5K,
        QuantFormat::Q6K,
        QuantFormat::Q8K,
        QuantFormat::Nf4,
    ];

    /// This format's registry row.
    ///
    /// ```
    /// use trueno_quant::QuantFormat;
    /// let q = QuantFormat::Q4K.info();
    /// assert_eq!((q.name, q.block_elems, q.block_bytes), ("Q4_K", 256, 144));
    /// assert_eq!(q.bits_per_weight(), 4.5);
    /// ```
    pub fn info(self) -> FormatInfo {
        FORMATS[self as usize]
    }

    /// The format GGUF type id `id` names, if it is one of these.
    ///
    /// ```
    /// use trueno_quant::QuantFormat;
    /// assert_eq!(QuantFormat::from_ggml_type(14), Some(QuantFormat::Q6K));
    /// assert_eq!(QuantFormat::from_ggml_type(0), None); // F32 is not a block format
    /// ```
    pub fn from_ggml_type(id: u32) -> Option<QuantFormat> {
        FORMATS
            .iter()
            .find(|f| f.ggml_type == Some(id))
            .map(|f| f.format)
    }

    /// The format called `name` (GGML's spelling, case-insensitive).
    pub fn from_name(name: &str) -> Option<QuantFormat> {
        FORMATS
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(name))
            .map(|f| f.format)
    }

    /// Bytes that `elems` weights take (an error if `elems` is not whole blocks).
    pub fn row_bytes(self, elems: usize) -> crate::Result<usize> {
        let i = self.info();
        if !elems.is_multiple_of(i.block_elems) {
            return Err(crate::QuantError::RowLength {
                format: self,
                row: 0,
                len: elems,
            });
        }
        Ok(elems / i.block_elems * i.block_bytes)
    }
}

impl std::fmt::Display for QuantFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.info().name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blocks::*;

    #[test]
    fn registry_rows_match_the_block_structs() {
        fn check<B: Block>() {
            let i = B::FORMAT.info();
            assert_eq!(i.format, B::FORMAT);
            assert_eq!(
                (i.block_elems, i.block_bytes),
                (B::ELEMS, B::BYTES),
                "{}",
                i.name
            );
        }
        check::<BlockQ4_0>();
        check::<BlockQ4_1>();
        check::<BlockQ5_0>();
        check::<BlockQ5_1>();
        check::<BlockQ8_0>();
        check::<BlockQ4K>();
        check::<BlockQ5K>();
        check::<BlockQ6K>();
        check::<BlockQ8K>();
        check::<BlockNf4>();
        for (i, f) in QuantFormat::ALL.iter().enumerate() {
            assert_eq!(FORMATS[i].format, *f);
            assert_eq!(QuantFormat::from_name(f.info().name), Some(*f));
        }
        let bpw: Vec<f64> = FORMATS.iter().map(|f| f.bits_per_weight()).collect();
        assert_eq!(bpw, [4.5, 5.0, 5.5, 6.0, 8.5, 4.5, 5.5, 6.5625, 9.125, 4.5]);
    }
}
