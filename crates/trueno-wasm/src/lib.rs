//! trueno for WebAssembly hosts: a handful of C-ABI functions over the module's linear
//! memory, callable from JavaScript without bindings generators. Built for
//! `wasm32-unknown-unknown` with `-C target-feature=+simd128`, the ops run on trueno's
//! SIMD128 backend (`trueno_backend_name` says which backend runs).
//!
//! The host allocates buffers with [`trueno_alloc`], writes its f32 data through a
//! `Float32Array` view of `memory.buffer`, calls an op, and reads the result back. Every
//! op returns [`OK`] or a negative status ([`ERR_INPUT`]: a length or shape mismatch, an
//! empty input where one is required, or a non-finite result; [`ERR_NULL`]: a null buffer).
//!
//! ```
//! use trueno_wasm::*;
//! let (a, b) = (trueno_alloc(3), trueno_alloc(3));
//! // SAFETY: both buffers hold 3 f32, allocated just above.
//! unsafe {
//!     std::slice::from_raw_parts_mut(a, 3).copy_from_slice(&[1.0, 2.0, 3.0]);
//!     std::slice::from_raw_parts_mut(b, 3).copy_from_slice(&[4.0, 5.0, 6.0]);
//!     let mut out = 0.0f32;
//!     assert_eq!(trueno_dot(a, b, 3, &mut out), OK);
//!     assert_eq!(out, 32.0);
//!     trueno_free(a, 3);
//!     trueno_free(b, 3);
//! }
//! ```

use trueno::{MatMut, MatRef, OpClass, Transpose};
use trueno_quant::{MatvecPath, QuantFormat, matvec, quantize_rows};

/// Success.
pub const OK: i32 = 0;
/// Bad input: mismatched lengths or shapes, an empty input an op needs, a non-finite result.
pub const ERR_INPUT: i32 = -1;
/// A null pointer where a buffer was expected.
pub const ERR_NULL: i32 = -2;

/// `n` zeroed f32 in linear memory (never null; a dangling, aligned pointer for `n = 0`).
#[unsafe(no_mangle)]
pub extern "C" fn trueno_alloc(n: usize) -> *mut f32 {
    let mut v = vec![0.0f32; n].into_boxed_slice();
    let p = v.as_mut_ptr();
    std::mem::forget(v);
    p
}

/// Frees a buffer from [`trueno_alloc`].
///
/// # Safety
/// `p` and `n` are exactly a pointer and length [`trueno_alloc`] returned, not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn trueno_free(p: *mut f32, n: usize) {
    if !p.is_null() {
        // SAFETY: the caller passes back a boxed slice of `n` f32 leaked by `trueno_alloc`.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, n)) });
    }
}

/// Writes the name of the backend matrix products run on (`"wasm-simd128"` in a SIMD128
/// build) into `out` (capacity `cap` bytes); returns the name's length in bytes, or a
/// negative status.
///
/// # Safety
/// `out` addresses `cap` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn trueno_backend_name(out: *mut u8, cap: usize) -> i32 {
    let Ok(engine) = trueno::engine() else {
        return ERR_INPUT;
    };
    let name = engine.backend(OpClass::MatMul).name().as_bytes();
    if out.is_null() {
        return ERR_NULL;
    }
    let n = name.len().min(cap);
    // SAFETY: the caller's contract: `out` has `cap >= n` writable bytes.
    unsafe { std::ptr::copy_nonoverlapping(name.as_ptr(), out, n) };
    name.len() as i32
}

/// `n` f32 at `p` as a slice (`None` for a null pointer).
///
/// # Safety
/// `p` addresses `n` initialized f32 that nothing writes while the slice lives.
unsafe fn slice<'a>(p: *const f32, n: usize) -> Option<&'a [f32]> {
    // SAFETY: the caller's contract.
    (!p.is_null()).then(|| unsafe { std::slice::from_raw_parts(p, n) })
}

/// As [`slice`], writable.
///
/// # Safety
/// `p` addresses `n` f32 that nothing else reads or writes while the slice lives.
unsafe fn slice_mut<'a>(p: *mut f32, n: usize) -> Option<&'a mut [f32]> {
    // SAFETY: the caller's contract.
    (!p.is_null()).then(|| unsafe { std::slice::from_raw_parts_mut(p, n) })
}

fn status<T>(r: trueno::Result<T>) -> i32 {
    if r.is_ok() { OK } else { ERR_INPUT }
}

/// `*out = a · b` over `n` elements.
///
/// # Safety
/// `a` and `b` address `n` f32 each; `out` one writable f32.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn trueno_dot(a: *const f32, b: *const f32, n: usize, out: *mut f32) -> i32 {
    // SAFETY: the caller's contract.
    let (Some(a), Some(b), Some(out)) = (unsafe { slice(a, n) }, unsafe { slice(b, n) }, unsafe {
        slice_mut(out, 1)
    }) else {
        return ERR_NULL;
    };
    let Ok(engine) = trueno::engine() else {
        return ERR_INPUT;
    };
    match engine.dot(a, b) {
        Ok(d) => {
            out[0] = d;
            OK
        }
        Err(_) => ERR_INPUT,
    }
}

/// `out = a + b` elementwise over `n` elements (`out` may not alias `a` or `b`).
///
/// # Safety
/// `a`, `b` and `out` address `n` f32 each, `out` writable and disjoint from the others.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn trueno_add(a: *const f32, b: *const f32, out: *mut f32, n: usize) -> i32 {
    // SAFETY: the caller's contract.
    let (Some(a), Some(b), Some(out)) = (unsafe { slice(a, n) }, unsafe { slice(b, n) }, unsafe {
        slice_mut(out, n)
    }) else {
        return ERR_NULL;
    };
    status(trueno::engine().and_then(|e| e.add_into(a, b, out)))
}

/// `out = softmax(x)` over `n > 0` elements.
///
/// # Safety
/// `x` and `out` address `n` f32 each, `out` writable and disjoint from `x`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn trueno_softmax(x: *const f32, out: *mut f32, n: usize) -> i32 {
    // SAFETY: the caller's contract.
    let (Some(x), Some(out)) = (unsafe { slice(x, n) }, unsafe { slice_mut(out, n) }) else {
        return ERR_NULL;
    };
    status(trueno::engine().and_then(|e| e.softmax_into(x, out)))
}

/// `C = A B` for row-major `A` (`m x k`), `B` (`k x n`), `C` (`m x n`).
///
/// # Safety
/// `a`, `b`, `c` address `m*k`, `k*n` and `m*n` f32, `c` writable and disjoint.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn trueno_gemm(
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
) -> i32 {
    let (Some(mk), Some(kn), Some(mn)) = (m.checked_mul(k), k.checked_mul(n), m.checked_mul(n))
    else {
        return ERR_INPUT;
    };
    // SAFETY: the caller's contract.
    let (Some(a), Some(b), Some(c)) = (unsafe { slice(a, mk) }, unsafe { slice(b, kn) }, unsafe {
        slice_mut(c, mn)
    }) else {
        return ERR_NULL;
    };
    let mut run = move || -> trueno::Result<()> {
        let (a, b) = (MatRef::new(a, m, k, k)?, MatRef::new(b, k, n, n)?);
        let mut c = MatMut::new(c, m, n, n)?;
        trueno::engine()?.gemm(1.0, a, Transpose::No, b, Transpose::No, 0.0, &mut c)
    };
    status(run())
}

/// `y = W x` with `W` (`rows x cols`, row-major f32) quantized to Q4_K first, then the fused
/// integer matvec (activations quantized to Q8_K): the quantized path an inference engine
/// runs, on this build's ISA. `cols` must be a multiple of 256.
///
/// # Safety
/// `w`, `x`, `y` address `rows*cols`, `cols` and `rows` f32, `y` writable and disjoint.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn trueno_matvec_q4k(
    rows: usize,
    cols: usize,
    w: *const f32,
    x: *const f32,
    y: *mut f32,
) -> i32 {
    let Some(rc) = rows.checked_mul(cols) else {
        return ERR_INPUT;
    };
    // SAFETY: the caller's contract.
    let (Some(w), Some(x), Some(y)) =
        (unsafe { slice(w, rc) }, unsafe { slice(x, cols) }, unsafe {
            slice_mut(y, rows)
        })
    else {
        return ERR_NULL;
    };
    let mut run = move || -> trueno_quant::Result<()> {
        let q = quantize_rows(QuantFormat::Q4K, w, cols)?;
        matvec(QuantFormat::Q4K, &q, rows, cols, x, y, MatvecPath::Int8)
    };
    if run().is_ok() { OK } else { ERR_INPUT }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buf(v: &[f32]) -> *mut f32 {
        let p = trueno_alloc(v.len());
        // SAFETY: `p` holds v.len() f32.
        unsafe { std::slice::from_raw_parts_mut(p, v.len()) }.copy_from_slice(v);
        p
    }

    #[test]
    fn ops_match_plain_loops_and_bad_input_is_a_status() {
        let a: Vec<f32> = (0..37).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..37).map(|i| (i as f32 * 0.11).cos()).collect();
        let (pa, pb, po) = (buf(&a), buf(&b), trueno_alloc(37));
        // SAFETY: each buffer holds 37 f32.
        unsafe {
            let mut d = 0.0;
            assert_eq!(trueno_dot(pa, pb, 37, &mut d), OK);
            let want: f64 = a.iter().zip(&b).map(|(x, y)| *x as f64 * *y as f64).sum();
            assert!((d as f64 - want).abs() < 1e-5);
            assert_eq!(trueno_add(pa, pb, po, 37), OK);
            let sum = std::slice::from_raw_parts(po, 37);
            for i in 0..37 {
                assert_eq!(sum[i], a[i] + b[i]);
            }
            assert_eq!(trueno_softmax(pa, po, 0), ERR_INPUT);
            assert_eq!(trueno_dot(std::ptr::null(), pb, 37, &mut d), ERR_NULL);
            assert_eq!(trueno_gemm(usize::MAX, 2, 2, pa, pb, po), ERR_INPUT);
            assert_eq!(trueno_matvec_q4k(1, 37, pa, pb, po), ERR_INPUT);
            let mut name = [0u8; 32];
            let len = trueno_backend_name(name.as_mut_ptr(), 32);
            assert!(len > 0);
            let got = std::str::from_utf8(&name[..len as usize]).unwrap();
            assert_eq!(
                got,
                trueno::engine().unwrap().backend(OpClass::MatMul).name()
            );
            for p in [pa, pb, po] {
                trueno_free(p, 37);
            }
        }
    }
}
