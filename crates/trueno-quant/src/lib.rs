//! trueno-quant: GGML's quantized block formats, byte for byte, on every CPU ISA.
//!
//! - [`blocks`]: one `#[repr(C)]` struct per format (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K,
//!   Q5_K, Q6_K, Q8_K, and QLoRA's NF4) and the [`FORMATS`] registry.
//! - [`dequantize`]: blocks to f32, equal bit for bit to GGML's reference.
//! - [`quantize`]: f32 rows to blocks; Q4_0..Q8_0 byte-identical to the reference, the
//!   K-quants with a least-squares scale/min search.
//! - [`dot_f32`], [`dot_q8`], [`matvec`], [`matvec_col_major`]: fused products on the
//!   quantized bytes (blocks expanded in registers, or integer products against 8-bit
//!   activations as GGML does), parallel over rows.
//! - [`gguf`]: GGUF v2/v3 files, memory-mapped and checked, and a writer.
//!
//! ```
//! use trueno_quant::{QuantFormat, dequantize, quantize};
//! let row: Vec<f32> = (0..256).map(|i| (i as f32 * 0.37).sin()).collect();
//! let q = quantize(QuantFormat::Q6K, &row)?;
//! assert_eq!(q.len(), QuantFormat::Q6K.info().block_bytes);
//! let mut back = vec![0.0; 256];
//! dequantize(QuantFormat::Q6K, &q, &mut back)?;
//! let err = row.iter().zip(&back).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
//! assert!(err < 0.02);
//! # Ok::<(), trueno_quant::QuantError>(())
//! ```

//!
//! A quantized matvec, as an inference engine runs one:
//!
//! ```
//! use trueno_quant::{MatvecPath, QuantFormat, dequantize, matvec, quantize_rows};
//!
//! let (rows, cols) = (8, 256);
//! let w: Vec<f32> = (0..rows * cols).map(|i| ((i % 13) as f32 - 6.0) * 0.01).collect();
//! let q = quantize_rows(QuantFormat::Q4K, &w, cols)?;   // 144 bytes per 256 weights
//! let x = vec![1.0f32; cols];
//! let mut y = vec![0.0f32; rows];
//! matvec(QuantFormat::Q4K, &q, rows, cols, &x, &mut y, MatvecPath::Int8)?;
//! let mut back = vec![0.0f32; rows * cols];
//! dequantize(QuantFormat::Q4K, &q, &mut back)?;
//! let exact: f32 = back[..cols].iter().sum();
//! assert!((y[0] - exact).abs() < 1e-3);
//! # Ok::<(), trueno_quant::QuantError>(())
//! ```

pub mod blocks;
mod dequant;
mod dot;
mod error;
mod format;
pub mod gguf;
mod isa;
mod quantize;

pub use dequant::{
    dequantize, dequantize_nf4_to_f32, dequantize_q4_0_to_f32, dequantize_q4_1_to_f32,
    dequantize_q4_k_to_f32, dequantize_q5_0_to_f32, dequantize_q5_1_to_f32, dequantize_q5_k_to_f32,
    dequantize_q6_k_to_f32, dequantize_q8_0_to_f32, dequantize_q8_k_to_f32, dequantize_with,
};
pub use dot::{
    MatvecPath, activation_format, dot_f32, dot_q8, matvec, matvec_col_major, matvec_nf4_f32,
    matvec_q4_0_f32, matvec_q4_1_f32, matvec_q4_k_f32, matvec_q5_0_f32, matvec_q5_1_f32,
    matvec_q5_k_f32, matvec_q6_k_f32, matvec_q8_0_f32, matvec_q8_k_f32, transpose_q4_k_for_matmul,
    transpose_q5_k_for_matmul, transpose_q6_k_for_matmul,
};
pub use error::{QuantError, Result};
pub use format::{FORMATS, FormatInfo, QuantFormat};
pub use isa::Isa;
pub use quantize::{quantize, quantize_into, quantize_rows};
