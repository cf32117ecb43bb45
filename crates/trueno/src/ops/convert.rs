//! f16 / bf16 <-> f32 slice conversion over the `Simd` half-precision loads and stores.

use crate::simd::{MAX_LANES, Simd};

/// Half-precision formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HalfFormat {
    F16,
    Bf16,
}

/// Widens `src` into `dst` (equal lengths).
#[inline(always)]
pub(crate) fn widen_vec<S: Simd>(s: S, fmt: HalfFormat, src: &[u16], dst: &mut [f32]) {
    #[inline(always)]
    fn load<S: Simd>(s: S, fmt: HalfFormat, h: &[u16]) -> S::V {
        match fmt {
            HalfFormat::F16 => s.load_f16(h),
            HalfFormat::Bf16 => s.load_bf16(h),
        }
    }
    let l = S::LANES;
    let mut hs = src.chunks_exact(l);
    let mut ds = dst.chunks_exact_mut(l);
    for (h, d) in (&mut hs).zip(&mut ds) {
        s.store(load(s, fmt, h), d);
    }
    let (h, d) = (hs.remainder(), ds.into_remainder());
    if !h.is_empty() {
        let mut buf = [0u16; MAX_LANES];
        buf[..h.len()].copy_from_slice(h);
        s.store_partial(load(s, fmt, &buf), d);
    }
}

/// Narrows `src` into `dst` (equal lengths), round to nearest even.
#[inline(always)]
pub(crate) fn narrow_vec<S: Simd>(s: S, fmt: HalfFormat, src: &[f32], dst: &mut [u16]) {
    #[inline(always)]
    fn store<S: Simd>(s: S, fmt: HalfFormat, v: S::V, h: &mut [u16]) {
        match fmt {
            HalfFormat::F16 => s.store_f16(v, h),
            HalfFormat::Bf16 => s.store_bf16(v, h),
        }
    }
    let l = S::LANES;
    let mut xs = src.chunks_exact(l);
    let mut ds = dst.chunks_exact_mut(l);
    for (x, d) in (&mut xs).zip(&mut ds) {
        store(s, fmt, s.load(x), d);
    }
    let (x, d) = (xs.remainder(), ds.into_remainder());
    if !x.is_empty() {
        let mut buf = [0u16; MAX_LANES];
        store(s, fmt, s.load_partial(x, 0.0), &mut buf);
        d.copy_from_slice(&buf[..d.len()]);
    }
}
