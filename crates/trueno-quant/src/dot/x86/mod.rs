//! Hand-written x86 integer dots for every format with an integer dot (all but NF4), as
//! GGML computes them for speed: 32 weights at a time as bytes, multiplied by the 8-bit
//! activations with `vpmaddubsw` + `vpmaddwd` (AVX2) or VNNI's `vpdpbusd`, summed exactly
//! in i32, the block scales applied in f32. `int8.rs` is the reference they are tested
//! against; the integer sums are the same, only the f32 accumulation order differs.
//!
//! Each kernel is written once (`kernels.rs`) over a byte-dot [`unit`] and compiled per
//! level below. The AVX-512 level runs the same 256-bit kernels with EVEX encodings and 32
//! registers: a 64-byte vector would straddle two sub-blocks whose activations are not
//! adjacent (Q4_K's low and high nibbles), and the 256-bit kernels already outrun memory.

mod kernels;
mod unit;

use crate::QuantFormat;
use crate::isa::{Isa, LevelTag};
use unit::{Maddubs, VnniEvex, VnniVex};

/// Compiles `kernels::row_dot` for one feature set and byte-dot unit.
macro_rules! instance {
    ($name:ident, $features:literal, $unit:ty) => {
        #[target_feature(enable = $features)]
        fn $name(format: QuantFormat, row: &[u8], act: &[u8]) -> Option<f32> {
            // SAFETY: this function enables the features `row_dot` needs for `$unit`.
            unsafe { kernels::row_dot::<$unit>(format, row, act) }
        }
    };
}

instance!(avx2, "avx2,fma,f16c", Maddubs);
instance!(avx2_vnni, "avx2,fma,f16c,avxvnni", VnniVex);
instance!(avx512, "avx512f,avx512bw,avx512vl,avx2,fma,f16c", Maddubs);
instance!(
    avx512_vnni,
    "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c",
    VnniEvex
);

/// The hand-written row dot of `format` on `isa`, if there is one for that level and the
/// lengths are whole matching blocks (else the generic kernel runs).
pub(crate) fn row_dot(isa: Isa, format: QuantFormat, row: &[u8], act: &[u8]) -> Option<f32> {
    match (isa.level(), isa.vnni()) {
        // SAFETY: an `Isa` of a level, and with `vnni` set, exists only after run-time
        // detection found every feature the instance enables (`isa::level_detected`,
        // `isa::vnni_detected`).
        (LevelTag::Avx2, false) => unsafe { avx2(format, row, act) },
        // SAFETY: as above.
        (LevelTag::Avx2, true) => unsafe { avx2_vnni(format, row, act) },
        // SAFETY: as above.
        (LevelTag::Avx512, false) => unsafe { avx512(format, row, act) },
        // SAFETY: as above.
        (LevelTag::Avx512, true) => unsafe { avx512_vnni(format, row, act) },
        _ => None,
    }
}
