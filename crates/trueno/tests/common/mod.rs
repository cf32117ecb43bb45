//! Shared test helpers: deterministic random data, the engines of every backend this host
//! can run, the sizes and special values every op is swept over, and tolerant comparison.
#![allow(dead_code)]

use trueno::{Backend, Engine, OpClass, available_cpu_backends};

mod data;
pub mod gemm_ref;
#[allow(unused_imports)] // each test binary uses its own subset
pub use data::{Rng, SPECIALS, flush, gpu_sum_bound};

/// One engine per CPU backend this host supports, each pinned with `Engine::new`; the test
/// asserts the engine really reports that backend for every class. With the `gpu` feature,
/// also `Backend::Gpu` (every op on the GPU at every size) when an adapter opens: required
/// when `TRUENO_REQUIRE_WGPU` is set (CI, on lavapipe), else skipped with a note.
pub fn engines() -> Vec<(Backend, Engine)> {
    let mut v: Vec<(Backend, Engine)> = available_cpu_backends()
        .into_iter()
        .map(|b| {
            let e = Engine::new(b).unwrap();
            for c in OpClass::ALL {
                assert_eq!(e.backend(c), b);
            }
            (b, e)
        })
        .collect();
    v.extend(gpu_engine().map(|e| (Backend::Gpu, e)));
    v
}

/// `Engine::new(Backend::Gpu)` if this build and machine have it (see [`engines`]).
pub fn gpu_engine() -> Option<Engine> {
    if !cfg!(feature = "gpu") {
        return None;
    }
    match Engine::new(Backend::Gpu) {
        Ok(e) => {
            for c in OpClass::ALL {
                let want = if c == OpClass::Conversion {
                    e.backend(c)
                } else {
                    Backend::Gpu
                };
                assert_eq!(e.backend(c), want);
            }
            Some(e)
        }
        Err(err) if std::env::var_os("TRUENO_REQUIRE_WGPU").is_some() => {
            panic!("TRUENO_REQUIRE_WGPU is set but the GPU backend failed: {err}")
        }
        Err(err) => {
            static NOTE: std::sync::Once = std::sync::Once::new();
            NOTE.call_once(|| eprintln!("Backend::Gpu skipped: {err}"));
            None
        }
    }
}

/// Whether `b` is a device backend, whose results the suites hold to the contract
/// trueno-wgpu documents, WGSL's: f32 tree sums, division and square root within 2.5 ulp,
/// fma fused or not, and subnormals that may flush to zero (NVIDIA's Vulkan driver does
/// all of these; lavapipe none). See [`device_close`].
pub fn is_device(b: Backend) -> bool {
    !b.is_cpu()
}

/// The device contract's extra room for one elementwise result `got` on a device backend:
/// within `rel` + 3 ulp of `want`, or of `want_flushed` (the reference on flushed inputs),
/// or zero where `want` is below 2^-120 (WGSL's x / y is only accurate for divisors up to
/// 2^126, and a flushed output is zero). Always false on the CPU backends, which keep
/// their exact contract.
pub fn device_close(
    backend: Backend,
    got: f32,
    want: f32,
    want_flushed: f32,
    rel: f32,
    abs: f32,
) -> bool {
    let rel = rel + 3.0 * f32::EPSILON;
    is_device(backend)
        && (close(got, want, rel, abs)
            || close(got, want_flushed, rel, abs)
            || (got == 0.0 && want.abs() < 2f32.powi(-120)))
}

/// 0..=70 (every lane width ±1 up to 4 × 16), then sizes that cross unroll, block
/// (4096) and threading thresholds.
pub fn sizes() -> Vec<usize> {
    let mut v: Vec<usize> = (0..=70).collect();
    v.extend([127, 128, 129, 255, 1000, 4095, 4096, 4097, 8193, 40_007]);
    v
}

/// |got - want| <= abs + rel * |want|, with NaN matching NaN and infinities matching exactly.
pub fn close(got: f32, want: f32, rel: f32, abs: f32) -> bool {
    if want.is_nan() || got.is_nan() {
        return want.is_nan() && got.is_nan();
    }
    if want.is_infinite() || got.is_infinite() {
        return got == want;
    }
    ((got as f64) - (want as f64)).abs() <= abs as f64 + rel as f64 * (want as f64).abs()
}

/// Asserts `close` elementwise, naming the context and the first bad index.
pub fn assert_all_close(ctx: &str, got: &[f32], want: &[f32], rel: f32, abs: f32) {
    assert_eq!(got.len(), want.len(), "{ctx}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            close(g, w, rel, abs),
            "{ctx}: index {i}: got {g:e}, want {w:e} (rel {rel}, abs {abs})"
        );
    }
}

/// A sub-slice starting `offset` elements into a fresh allocation, so kernels see
/// addresses that are not vector-aligned.
pub fn misaligned(data: &[f32], offset: usize) -> Vec<f32> {
    let mut v = vec![f32::NAN; offset];
    v.extend_from_slice(data);
    v
}
