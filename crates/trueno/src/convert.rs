//! f16 and bf16 slice conversion on [`Engine`]. Half-precision values are passed as their
//! `u16` bit patterns, so callers holding `half::f16` / `half::bf16` slices can cast them
//! (`bytemuck::cast_slice`) without trueno depending on a half-float crate.

use crate::backend::OpClass;
use crate::engine::Engine;
use crate::error::{Result, check_len};
use crate::ops::HalfFormat;

impl Engine {
    /// IEEE binary16 bits to f32 (exact). F16C / AVX-512 where present.
    pub fn f16_to_f32(&self, src: &[u16], dst: &mut [f32]) -> Result<()> {
        check_len("f16_to_f32", "dst", src.len(), dst.len())?;
        self.k(OpClass::Conversion).widen(HalfFormat::F16, src, dst);
        Ok(())
    }

    /// f32 to IEEE binary16 bits, round to nearest even; overflow gives ±inf, NaN stays NaN.
    pub fn f32_to_f16(&self, src: &[f32], dst: &mut [u16]) -> Result<()> {
        check_len("f32_to_f16", "dst", src.len(), dst.len())?;
        self.k(OpClass::Conversion)
            .narrow(HalfFormat::F16, src, dst);
        Ok(())
    }

    /// bfloat16 bits to f32 (exact).
    pub fn bf16_to_f32(&self, src: &[u16], dst: &mut [f32]) -> Result<()> {
        check_len("bf16_to_f32", "dst", src.len(), dst.len())?;
        self.k(OpClass::Conversion)
            .widen(HalfFormat::Bf16, src, dst);
        Ok(())
    }

    /// f32 to bfloat16 bits, round to nearest even; NaN stays a (quiet) NaN.
    pub fn f32_to_bf16(&self, src: &[f32], dst: &mut [u16]) -> Result<()> {
        check_len("f32_to_bf16", "dst", src.len(), dst.len())?;
        self.k(OpClass::Conversion)
            .narrow(HalfFormat::Bf16, src, dst);
        Ok(())
    }
}
