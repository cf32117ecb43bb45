//! The ISA primitive layer: one small trait, one implementation per instruction set.
//!
//! Every operation in `ops/` is written once against [`Simd`]; the dispatch layer
//! instantiates it inside a `#[target_feature]` function per ISA. Intrinsics appear only in
//! the files of this module.
//!
//! # The contract
//! - An implementor is a zero-sized *token*. A token value exists only after run-time
//!   detection proved the CPU has the ISA (each file's `detect`), which is what makes the
//!   safe methods sound. Methods are `#[inline(always)]` so that, inlined into a
//!   `#[target_feature]` function, they compile to the bare instructions.
//! - `load`/`store` touch exactly the first [`Simd::LANES`] elements of the slice and panic
//!   if it is shorter (callers iterate with `chunks_exact`, where the check folds away).
//! - `max`/`min` on a NaN operand return *one of* the operands (x86 semantics); operations
//!   that promise NaN propagation build it from `is_nan` + `select`. `max(-0, +0)` may
//!   return either zero.
//! - `round` rounds half to even. `fma` is fused where the ISA has FMA and `a*b + c` with two
//!   roundings where it does not (SSE2, AVX).
//! - `pow2i(n)` needs `n` integral in `[-126, 127]`; `frexp(x)` needs `x` positive, normal
//!   and finite, and returns `(m, e)` with `x = m * 2^e`, `m` in `[1, 2)`.
//! - Horizontal reductions combine lanes pairwise (a tree), never left to right.

use crate::backend::Backend;

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx;
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2;
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512;
#[cfg(target_arch = "aarch64")]
pub(crate) mod neon;
pub(crate) mod scalar;
#[cfg(target_arch = "x86_64")]
pub(crate) mod sse2;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
pub(crate) mod wasm;

/// The widest vector any implementor has, in f32 lanes: sizes stack buffers for tails.
pub(crate) const MAX_LANES: usize = 16;

/// Primitive vector operations over f32 lanes. See the module docs for the contract.
pub(crate) trait Simd: Copy + Send + Sync + 'static {
    /// Which backend this token stands for.
    const BACKEND: Backend;
    /// f32 lanes per vector.
    const LANES: usize;
    /// Whether `load_tail` is a masked load rather than a copy through the stack: only
    /// then does a loop over a ragged edge run near full speed.
    const MASKED_TAIL: bool = false;
    /// A vector of `LANES` f32.
    type V: Copy;
    /// A lane mask produced by comparisons.
    type M: Copy;

    fn splat(self, x: f32) -> Self::V;
    fn load(self, src: &[f32]) -> Self::V;
    fn store(self, v: Self::V, dst: &mut [f32]);

    fn add(self, a: Self::V, b: Self::V) -> Self::V;
    fn sub(self, a: Self::V, b: Self::V) -> Self::V;
    fn mul(self, a: Self::V, b: Self::V) -> Self::V;
    fn div(self, a: Self::V, b: Self::V) -> Self::V;
    /// `a * b + c`.
    fn fma(self, a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    fn max(self, a: Self::V, b: Self::V) -> Self::V;
    fn min(self, a: Self::V, b: Self::V) -> Self::V;
    fn abs(self, a: Self::V) -> Self::V;
    fn neg(self, a: Self::V) -> Self::V;
    fn sqrt(self, a: Self::V) -> Self::V;
    fn round(self, a: Self::V) -> Self::V;
    /// `|mag|` with the sign bit of `sign`.
    fn copysign(self, mag: Self::V, sign: Self::V) -> Self::V;

    fn lt(self, a: Self::V, b: Self::V) -> Self::M;
    fn le(self, a: Self::V, b: Self::V) -> Self::M;
    fn eq(self, a: Self::V, b: Self::V) -> Self::M;
    fn is_nan(self, a: Self::V) -> Self::M;
    fn mask_or(self, a: Self::M, b: Self::M) -> Self::M;
    /// Whether any lane of the mask is true.
    fn any(self, m: Self::M) -> bool;
    /// Lane-wise `if m { a } else { b }`.
    fn select(self, m: Self::M, a: Self::V, b: Self::V) -> Self::V;

    /// `2^n` for integral `n` in `[-126, 127]`.
    fn pow2i(self, n: Self::V) -> Self::V;
    /// `(m, e)` with `x = m * 2^e`, `m` in `[1, 2)`, for positive normal finite `x`.
    fn frexp(self, x: Self::V) -> (Self::V, Self::V);

    fn reduce_add(self, v: Self::V) -> f32;
    fn reduce_max(self, v: Self::V) -> f32;
    fn reduce_min(self, v: Self::V) -> f32;

    /// Widens `LANES` IEEE binary16 values.
    fn load_f16(self, src: &[u16]) -> Self::V;
    /// Narrows to IEEE binary16, round to nearest even; NaN stays NaN.
    fn store_f16(self, v: Self::V, dst: &mut [u16]);
    /// Widens `LANES` bfloat16 values (exact).
    fn load_bf16(self, src: &[u16]) -> Self::V;
    /// Narrows to bfloat16, round to nearest even; NaN stays a quiet NaN.
    fn store_bf16(self, v: Self::V, dst: &mut [u16]);

    /// Loads `src` (shorter than `LANES`) padded with `pad`.
    #[inline(always)]
    fn load_partial(self, src: &[f32], pad: f32) -> Self::V {
        let mut buf = [pad; MAX_LANES];
        buf[..src.len()].copy_from_slice(src);
        self.load(&buf)
    }

    /// The first `src.len()` lanes from `src`, the rest zero, in a loop that repeats it with
    /// one length (a GEMM tile's right edge, each k step): `load_partial` by default; where
    /// masked loads do not cost a stack copy each time, a masked load whose mask the loop
    /// computes once.
    #[inline(always)]
    fn load_tail(self, src: &[f32]) -> Self::V {
        match src.len() >= Self::LANES {
            true => self.load(src),
            false => self.load_partial(src, 0.0),
        }
    }

    /// Stores the first `dst.len()` lanes of `v` (all of them from `LANES`), once per row of
    /// a tile's edge: `store_partial` (masked on AVX-512; on AVX a masked store cost more
    /// than the copy, see `avx.rs`).
    #[inline(always)]
    fn store_tail(self, v: Self::V, dst: &mut [f32]) {
        match dst.len() >= Self::LANES {
            true => self.store(v, dst),
            false => self.store_partial(v, dst),
        }
    }

    /// Stores the first `dst.len()` (< `LANES`) lanes of `v`.
    #[inline(always)]
    fn store_partial(self, v: Self::V, dst: &mut [f32]) {
        let mut buf = [0.0; MAX_LANES];
        self.store(v, &mut buf);
        let n = dst.len();
        dst.copy_from_slice(&buf[..n]);
    }

    #[inline(always)]
    fn zero(self) -> Self::V {
        self.splat(0.0)
    }

    /// Runs `body` in a function of its own, compiled with this ISA's features and never
    /// inlined, so that a hot loop gets the register allocator to itself. This default (an
    /// ISA with no features to name) runs it inline.
    #[inline(always)]
    fn outlined<B: OutOfLine<Self>>(self, body: B) -> B::Out {
        body.run(self)
    }
}

/// A body for [`Simd::outlined`]. `run` must be `#[inline(always)]`, so that it compiles
/// inside the outlined function with its features (as a closure would not).
pub(crate) trait OutOfLine<S: Simd> {
    type Out;
    fn run(self, s: S) -> Self::Out;
}

/// `Simd::outlined` for a token whose features are `$features` (its `target_feature` list).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
macro_rules! outlined_with_features {
    ($token:ty, $features:literal) => {
        #[inline(always)]
        fn outlined<B: $crate::simd::OutOfLine<Self>>(self, body: B) -> B::Out {
            #[target_feature(enable = $features)]
            #[inline(never)]
            fn run<B: $crate::simd::OutOfLine<$token>>(s: $token, body: B) -> B::Out {
                body.run(s)
            }
            // Called through a pointer LLVM cannot see through: `inline(never)` alone did not
            // hold (a trial that ran each GEMM tile out of line found two of the twenty
            // inlined back into their caller).
            let run: unsafe fn($token, B) -> B::Out = run::<B>;
            // SAFETY: a token exists only after run-time detection found every feature in
            // its list on this CPU.
            unsafe { std::hint::black_box(run)(self, body) }
        }
    };
}
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) use outlined_with_features;

/// Lane-at-a-time conversions shared by ISAs without native half-precision instructions and
/// by the scalar backend: the bit-exact reference for f16/bf16.
pub(crate) mod half_bits {
    /// IEEE binary16 bits to f32 (exact, subnormals included).
    #[inline(always)]
    pub(crate) fn f16_to_f32(h: u16) -> f32 {
        let sign = ((h as u32) & 0x8000) << 16;
        let exp = ((h >> 10) & 0x1f) as u32;
        let man = (h & 0x3ff) as u32;
        let bits = match (exp, man) {
            (0, 0) => sign,
            (0, m) => {
                // Subnormal: value = m * 2^-24, exact in f32.
                let v = m as f32 * f32::from_bits(0x3380_0000);
                return if sign != 0 { -v } else { v };
            }
            (0x1f, 0) => sign | 0x7f80_0000,
            (0x1f, m) => sign | 0x7fc0_0000 | (m << 13),
            (e, m) => sign | ((e + 112) << 23) | (m << 13),
        };
        f32::from_bits(bits)
    }

    /// f32 to IEEE binary16 bits, round to nearest even, overflow to infinity.
    #[inline(always)]
    pub(crate) fn f32_to_f16(x: f32) -> u16 {
        let bits = x.to_bits();
        let sign = ((bits >> 16) & 0x8000) as u16;
        let exp = ((bits >> 23) & 0xff) as i32;
        let man = bits & 0x7f_ffff;
        if exp == 0xff {
            // Inf stays Inf; NaN keeps its top payload bits and is forced quiet.
            return if man == 0 {
                sign | 0x7c00
            } else {
                sign | 0x7e00 | (man >> 13) as u16
            };
        }
        let e = exp - 127 + 15;
        if e >= 0x1f {
            return sign | 0x7c00;
        }
        if e <= 0 {
            // Subnormal (or zero) result: shift the full significand down with rounding.
            if e < -10 {
                return sign;
            }
            let full = man | 0x80_0000;
            let shift = (14 - e) as u32;
            let half = 1u32 << (shift - 1);
            let rest = full & ((1u32 << shift) - 1);
            let mut h = full >> shift;
            if rest > half || (rest == half && (h & 1) == 1) {
                h += 1;
            }
            return sign | h as u16;
        }
        let mut h = ((e as u32) << 10) | (man >> 13);
        let rest = man & 0x1fff;
        if rest > 0x1000 || (rest == 0x1000 && (h & 1) == 1) {
            h += 1; // may carry into the exponent, up to infinity: both correct
        }
        sign | h as u16
    }

    /// bfloat16 bits to f32 (exact).
    #[inline(always)]
    pub(crate) fn bf16_to_f32(h: u16) -> f32 {
        f32::from_bits((h as u32) << 16)
    }

    /// f32 to bfloat16 bits, round to nearest even; NaN forced quiet.
    #[inline(always)]
    pub(crate) fn f32_to_bf16(x: f32) -> u16 {
        let bits = x.to_bits();
        if x.is_nan() {
            return ((bits >> 16) | 0x40) as u16;
        }
        let lsb = (bits >> 16) & 1;
        (bits.wrapping_add(0x7fff + lsb) >> 16) as u16
    }
}

/// Half-precision loads and stores one lane at a time, for ISAs without conversion
/// instructions (SSE2, AVX, NEON and SIMD128 here): the bit-exact `half_bits` routines
/// around a vector load/store. A build with none of those (wasm32 without SIMD128) has no
/// user.
#[cfg_attr(
    not(any(
        target_arch = "x86_64",
        target_arch = "aarch64",
        target_feature = "simd128"
    )),
    allow(dead_code, unused_macros, unused_imports)
)]
pub(crate) mod lanewise {
    use super::{MAX_LANES, Simd};

    #[inline(always)]
    pub(crate) fn load_with<S: Simd>(s: S, src: &[u16], widen: fn(u16) -> f32) -> S::V {
        let mut buf = [0.0f32; MAX_LANES];
        for (b, &h) in buf.iter_mut().zip(&src[..S::LANES]) {
            *b = widen(h);
        }
        s.load(&buf)
    }

    #[inline(always)]
    pub(crate) fn store_with<S: Simd>(s: S, v: S::V, dst: &mut [u16], narrow: fn(f32) -> u16) {
        let mut buf = [0.0f32; MAX_LANES];
        s.store(v, &mut buf);
        for (d, &x) in dst[..S::LANES].iter_mut().zip(&buf) {
            *d = narrow(x);
        }
    }

    /// Implements the two f16 methods of `Simd` lane by lane (ISAs without F16C).
    macro_rules! lanewise_f16_methods {
        () => {
            #[inline(always)]
            fn load_f16(self, src: &[u16]) -> Self::V {
                $crate::simd::lanewise::load_with(self, src, $crate::simd::half_bits::f16_to_f32)
            }
            #[inline(always)]
            fn store_f16(self, v: Self::V, dst: &mut [u16]) {
                $crate::simd::lanewise::store_with(
                    self,
                    v,
                    dst,
                    $crate::simd::half_bits::f32_to_f16,
                )
            }
        };
    }
    pub(crate) use lanewise_f16_methods;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `load_tail` of every length from 0 to LANES gives those lanes then zeros, and
    /// `store_tail` writes exactly those lanes (the rest of the buffer keeps its NaNs).
    fn tails_touch_only_their_lanes<S: Simd>(s: S) {
        let l = S::LANES;
        let src: Vec<f32> = (0..2 * l).map(|i| i as f32 + 1.0).collect();
        for len in 0..=l {
            // From an offset of 1 as well: a vector need not start on its alignment.
            for off in [0, 1] {
                let mut got = [f32::NAN; MAX_LANES];
                s.store(s.load_tail(&src[off..off + len]), &mut got);
                for (i, &g) in got[..l].iter().enumerate() {
                    let want = if i < len { src[off + i] } else { 0.0 };
                    assert_eq!(g, want, "{:?} load_tail len {len} lane {i}", S::BACKEND);
                }
                let mut dst = vec![f32::NAN; 2 * l];
                s.store_tail(s.load(&src[l..]), &mut dst[off..off + len]);
                for (i, &d) in dst.iter().enumerate() {
                    match i >= off && i < off + len {
                        true => assert_eq!(d, src[l + i - off], "{:?} store_tail", S::BACKEND),
                        false => assert!(
                            d.is_nan(),
                            "{:?} store_tail len {len} wrote {i}",
                            S::BACKEND
                        ),
                    }
                }
            }
        }
    }

    #[test]
    fn tail_loads_and_stores_on_every_isa() {
        tails_touch_only_their_lanes(scalar::Scalar);
        #[cfg(target_arch = "x86_64")]
        {
            if let Some(t) = sse2::Sse2::detect() {
                tails_touch_only_their_lanes(t);
            }
            if let Some(t) = avx::Avx::detect() {
                tails_touch_only_their_lanes(t);
            }
            if let Some(t) = avx2::Avx2::detect() {
                tails_touch_only_their_lanes(t);
            }
            if let Some(t) = avx512::Avx512::detect() {
                tails_touch_only_their_lanes(t);
            }
        }
        #[cfg(target_arch = "aarch64")]
        if let Some(t) = neon::Neon::detect() {
            tails_touch_only_their_lanes(t);
        }
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        if let Some(t) = wasm::Simd128::detect() {
            tails_touch_only_their_lanes(t);
        }
    }
}
