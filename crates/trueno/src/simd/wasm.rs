//! WebAssembly SIMD128: 4 f32 lanes. Compiled only into modules built with `+simd128`
//! (a wasm engine validates the whole module up front, so there is no run-time detection:
//! the token exists iff the build enabled it). No fused multiply-add outside the relaxed-SIMD
//! proposal, so `fma` rounds twice, as on SSE2. f16 runs lane by lane.

use std::arch::wasm32::*;

use super::Simd;
use super::lanewise::lanewise_f16_methods;
use crate::backend::Backend;

/// Token proving SIMD128 (this module was built with it).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Simd128(());

impl Simd128 {
    /// The token: always, in a `+simd128` build (the only build this file is in).
    pub(crate) fn detect() -> Option<Self> {
        Some(Simd128(()))
    }
}

/// Evaluates SIMD128 intrinsics that read or write memory.
macro_rules! wasm_mem {
    ($e:expr) => {{
        // SAFETY: every pointer passed is taken from a slice already sliced to the bytes
        // the instruction touches; unaligned access is allowed in wasm.
        unsafe { $e }
    }};
}

impl Simd for Simd128 {
    const BACKEND: Backend = Backend::WasmSimd128;
    const LANES: usize = 4;
    type V = v128;
    type M = v128;

    #[inline(always)]
    fn splat(self, x: f32) -> v128 {
        f32x4_splat(x)
    }
    #[inline(always)]
    fn load(self, src: &[f32]) -> v128 {
        let src = &src[..4];
        wasm_mem!(v128_load(src.as_ptr().cast()))
    }
    #[inline(always)]
    fn store(self, v: v128, dst: &mut [f32]) {
        let dst = &mut dst[..4];
        wasm_mem!(v128_store(dst.as_mut_ptr().cast(), v))
    }
    #[inline(always)]
    fn add(self, a: v128, b: v128) -> v128 {
        f32x4_add(a, b)
    }
    #[inline(always)]
    fn sub(self, a: v128, b: v128) -> v128 {
        f32x4_sub(a, b)
    }
    #[inline(always)]
    fn mul(self, a: v128, b: v128) -> v128 {
        f32x4_mul(a, b)
    }
    #[inline(always)]
    fn div(self, a: v128, b: v128) -> v128 {
        f32x4_div(a, b)
    }
    #[inline(always)]
    fn fma(self, a: v128, b: v128, c: v128) -> v128 {
        f32x4_add(f32x4_mul(a, b), c)
    }
    #[inline(always)]
    fn max(self, a: v128, b: v128) -> v128 {
        f32x4_max(a, b)
    }
    #[inline(always)]
    fn min(self, a: v128, b: v128) -> v128 {
        f32x4_min(a, b)
    }
    #[inline(always)]
    fn abs(self, a: v128) -> v128 {
        f32x4_abs(a)
    }
    #[inline(always)]
    fn neg(self, a: v128) -> v128 {
        f32x4_neg(a)
    }
    #[inline(always)]
    fn sqrt(self, a: v128) -> v128 {
        f32x4_sqrt(a)
    }
    #[inline(always)]
    fn round(self, a: v128) -> v128 {
        // f32x4.nearest: ties to even, whatever the magnitude.
        f32x4_nearest(a)
    }
    #[inline(always)]
    fn copysign(self, mag: v128, sign: v128) -> v128 {
        v128_bitselect(sign, mag, f32x4_splat(-0.0))
    }
    #[inline(always)]
    fn lt(self, a: v128, b: v128) -> v128 {
        f32x4_lt(a, b)
    }
    #[inline(always)]
    fn le(self, a: v128, b: v128) -> v128 {
        f32x4_le(a, b)
    }
    #[inline(always)]
    fn eq(self, a: v128, b: v128) -> v128 {
        f32x4_eq(a, b)
    }
    #[inline(always)]
    fn is_nan(self, a: v128) -> v128 {
        f32x4_ne(a, a)
    }
    #[inline(always)]
    fn mask_or(self, a: v128, b: v128) -> v128 {
        v128_or(a, b)
    }
    #[inline(always)]
    fn any(self, m: v128) -> bool {
        v128_any_true(m)
    }
    #[inline(always)]
    fn select(self, m: v128, a: v128, b: v128) -> v128 {
        v128_bitselect(a, b, m)
    }
    #[inline(always)]
    fn pow2i(self, n: v128) -> v128 {
        let e = i32x4_add(i32x4_trunc_sat_f32x4(n), i32x4_splat(127));
        i32x4_shl(e, 23)
    }
    #[inline(always)]
    fn frexp(self, x: v128) -> (v128, v128) {
        let e = i32x4_sub(u32x4_shr(x, 23), i32x4_splat(127));
        let m = v128_or(
            v128_and(x, u32x4_splat(0x007f_ffff)),
            u32x4_splat(0x3f80_0000),
        );
        (m, f32x4_convert_i32x4(e))
    }
    // Reductions pair lane i with lane i + 2, then the two sums: the SSE2 tree.
    #[inline(always)]
    fn reduce_add(self, v: v128) -> f32 {
        let s = f32x4_add(v, i32x4_shuffle::<2, 3, 0, 1>(v, v));
        f32x4_extract_lane::<0>(s) + f32x4_extract_lane::<1>(s)
    }
    #[inline(always)]
    fn reduce_max(self, v: v128) -> f32 {
        let s = f32x4_max(v, i32x4_shuffle::<2, 3, 0, 1>(v, v));
        f32x4_extract_lane::<0>(f32x4_max(s, i32x4_shuffle::<1, 0, 3, 2>(s, s)))
    }
    #[inline(always)]
    fn reduce_min(self, v: v128) -> f32 {
        let s = f32x4_min(v, i32x4_shuffle::<2, 3, 0, 1>(v, v));
        f32x4_extract_lane::<0>(f32x4_min(s, i32x4_shuffle::<1, 0, 3, 2>(s, s)))
    }

    lanewise_f16_methods!();

    #[inline(always)]
    fn load_bf16(self, src: &[u16]) -> v128 {
        let src = &src[..4];
        let h = wasm_mem!(u32x4_load_extend_u16x4(src.as_ptr()));
        i32x4_shl(h, 16)
    }
    #[inline(always)]
    fn store_bf16(self, v: v128, dst: &mut [u16]) {
        let dst = &mut dst[..4];
        let lsb = v128_and(u32x4_shr(v, 16), u32x4_splat(1));
        let rounded = i32x4_add(v, i32x4_add(lsb, u32x4_splat(0x7fff)));
        let quiet_nan = v128_or(v, u32x4_splat(0x0040_0000));
        let r = v128_bitselect(quiet_nan, rounded, self.is_nan(v));
        // The top half of each 32-bit lane, packed into the low 8 bytes.
        let packed = i8x16_shuffle::<2, 3, 6, 7, 10, 11, 14, 15, 2, 3, 6, 7, 10, 11, 14, 15>(r, r);
        wasm_mem!(v128_store64_lane::<0>(packed, dst.as_mut_ptr().cast()))
    }
}
