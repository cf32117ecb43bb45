//! Shared helpers of the trueno-wgpu tests: the one device every test shares, the CPU
//! scalar reference engine, random data and tolerant comparison.
#![allow(dead_code)]

use std::sync::OnceLock;
use trueno::{Backend, Engine};
use trueno_wgpu::Gpu;

/// The shared device, or `None` (with a note on stderr) where no adapter exists. With
/// `TRUENO_REQUIRE_WGPU=1` (CI sets it) a missing adapter fails the test instead, so the
/// suite cannot pass by skipping.
pub fn gpu() -> Option<&'static Gpu> {
    static GPU: OnceLock<Option<Gpu>> = OnceLock::new();
    let g = GPU.get_or_init(|| match Gpu::new() {
        Ok(g) => {
            eprintln!("trueno-wgpu tests on {}", g.info());
            Some(g)
        }
        Err(e) if std::env::var_os("TRUENO_REQUIRE_WGPU").is_some() => {
            panic!("TRUENO_REQUIRE_WGPU is set but no adapter opened: {e}")
        }
        Err(e) => {
            eprintln!("skipped: no wgpu adapter ({e})");
            None
        }
    });
    g.as_ref()
}

/// The reference every GPU result is compared with: trueno's portable scalar backend.
pub fn scalar() -> Engine {
    Engine::new(Backend::Scalar).expect("the scalar backend always exists")
}

/// Ragged sizes: empty, one, around the 256-thread workgroup and the 1024-element
/// reduction chunk, and large enough that the grid-stride loops and the 1024-partial cap
/// both engage.
pub const SIZES: [usize; 11] = [0, 1, 2, 7, 255, 256, 257, 1023, 4099, 70_001, 300_007];

/// The core crate's deterministic test data (xorshift64*), so both suites draw alike.
#[path = "../../../trueno/tests/common/data.rs"]
mod core_common;
#[allow(unused_imports)] // each test binary uses its own subset
pub use core_common::{Rng, SPECIALS, flush, gpu_sum_bound};

/// Whether `got` matches `want` within `rel` relative error. NaN matches NaN, equal values
/// (infinities too) match, and anything below the smallest normal float matches zero: a
/// GPU may flush subnormals (WGSL leaves it to the device).
pub fn close(got: f32, want: f32, rel: f64) -> bool {
    if got.is_nan() || want.is_nan() {
        return got.is_nan() && want.is_nan();
    }
    if got == want {
        return true;
    }
    let (g, w) = (got as f64, want as f64);
    if w.abs() < f32::MIN_POSITIVE as f64 && g.abs() < f32::MIN_POSITIVE as f64 {
        return true;
    }
    (g - w).abs() <= rel * w.abs()
}

/// Asserts elementwise closeness, naming the first mismatch.
pub fn assert_all_close(what: &str, got: &[f32], want: &[f32], input: &[f32], rel: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            close(g, w, rel),
            "{what}[{i}] of {}: gpu {g:e}, cpu {w:e} (input {:e}), tolerance {rel:e}",
            got.len(),
            input.get(i).copied().unwrap_or(f32::NAN)
        );
    }
}
