//! f32 rows to blocks. Every row is checked first (whole blocks, finite weights), so a bad
//! input is an error naming the row and element, never a garbled block.

mod kquant;
mod legacy;

use crate::blocks::*;
use crate::{QuantError, QuantFormat, Result};

/// A block that can be built from `ELEMS` f32 weights.
pub(crate) trait Quantize: Block {
    /// Quantizes `x[..ELEMS]` (all finite).
    fn quantize_block(x: &[f32]) -> Self;
}

fn check_row(format: QuantFormat, row: usize, x: &[f32]) -> Result<()> {
    if !x.len().is_multiple_of(format.info().block_elems) {
        return Err(QuantError::RowLength {
            format,
            row,
            len: x.len(),
        });
    }
    if let Some((index, &value)) = x.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(QuantError::NonFinite {
            format,
            row,
            index,
            value,
        });
    }
    Ok(())
}

fn quantize_blocks<B: Quantize>(x: &[f32], out: &mut [u8]) {
    for (xs, o) in x.chunks_exact(B::ELEMS).zip(out.chunks_exact_mut(B::BYTES)) {
        B::quantize_block(xs).write(o);
    }
}

/// Quantizes one row (whole blocks of `format`) into `out`, which must hold exactly its
/// bytes.
pub fn quantize_into(format: QuantFormat, row: &[f32], out: &mut [u8]) -> Result<()> {
    check_row(format, 0, row)?;
    let want = format.row_bytes(row.len())?;
    if out.len() != want {
        return Err(QuantError::BufferSize {
            op: "quantize",
            what: "output",
            expected: want,
            got: out.len(),
        });
    }
    match format {
        QuantFormat::Q4_0 => quantize_blocks::<BlockQ4_0>(row, out),
        QuantFormat::Q4_1 => quantize_blocks::<BlockQ4_1>(row, out),
        QuantFormat::Q5_0 => quantize_blocks::<BlockQ5_0>(row, out),
        QuantFormat::Q5_1 => quantize_blocks::<BlockQ5_1>(row, out),
        QuantFormat::Q8_0 => quantize_blocks::<BlockQ8_0>(row, out),
        QuantFormat::Q4K => quantize_blocks::<BlockQ4K>(row, out),
        QuantFormat::Q5K => quantize_blocks::<BlockQ5K>(row, out),
        QuantFormat::Q6K => quantize_blocks::<BlockQ6K>(row, out),
        QuantFormat::Q8K => quantize_blocks::<BlockQ8K>(row, out),
        QuantFormat::Nf4 => quantize_blocks::<BlockNf4>(row, out),
    }
    Ok(())
}

/// Quantizes one row into a new buffer.
pub fn quantize(format: QuantFormat, row: &[f32]) -> Result<Vec<u8>> {
    check_row(format, 0, row)?;
    let mut out = vec![0u8; format.row_bytes(row.len())?];
    quantize_into(format, row, &mut out)?;
    Ok(out)
}

/// Quantizes a row-major matrix of `row_len`-wide rows, row after row (GGUF's layout).
/// Errors name the first bad row.
///
/// ```
/// use trueno_quant::{QuantError, QuantFormat, quantize_rows};
/// let mut w = vec![0.5f32; 64];
/// assert_eq!(quantize_rows(QuantFormat::Q8_0, &w, 32)?.len(), 2 * 34);
/// w[40] = f32::NAN;
/// assert!(matches!(
///     quantize_rows(QuantFormat::Q8_0, &w, 32),
///     Err(QuantError::NonFinite { row: 1, index: 8, .. })
/// ));
/// # Ok::<(), QuantError>(())
/// ```
pub fn quantize_rows(format: QuantFormat, data: &[f32], row_len: usize) -> Result<Vec<u8>> {
    if row_len == 0 || !data.len().is_multiple_of(row_len) {
        return Err(QuantError::BufferSize {
            op: "quantize_rows",
            what: "data (rows of row_len)",
            expected: data.len().next_multiple_of(row_len.max(1)),
            got: data.len(),
        });
    }
    for (r, row) in data.chunks_exact(row_len).enumerate() {
        check_row(format, r, row)?;
    }
    let rb = format.row_bytes(row_len)?;
    let mut out = vec![0u8; data.len() / row_len * rb];
    for (row, o) in data.chunks_exact(row_len).zip(out.chunks_exact_mut(rb)) {
        quantize_into(format, row, o)?;
    }
    Ok(out)
}
