//! Instantiates every op body once per ISA inside a `#[target_feature]` function, and hands
//! out the instance for a backend only after detection proved the CPU can run it.
//!
//! The `Kernels` trait is the whole kernel surface: an op family is one method, an op is an
//! enum value passed to it. Adding an ISA is one `impl_kernels!` line here.

use crate::backend::Backend;
use crate::error::Result;
use crate::gemm::task::GemmTask;
use crate::ops::{self, BinaryOp, HalfFormat, Reduce2Op, ReduceOp, UnaryOp};
use crate::simd::Simd;
use crate::simd::scalar::Scalar;

/// The kernel families, each a safe method on a detected-ISA token.
///
/// Length contracts (checked by the public API before calling): every slice argument of
/// one call has the same length, except `fold`-style inputs which are compared among
/// themselves. `None` for an input means "read it from `dst`" (in-place forms).
pub(crate) trait Kernels: Sync {
    fn backend(&self) -> Backend;
    fn unary(&self, op: UnaryOp, dst: &mut [f32], src: Option<&[f32]>);
    fn binary(&self, op: BinaryOp, dst: &mut [f32], a: Option<&[f32]>, b: &[f32]);
    fn fma(&self, dst: &mut [f32], a: &[f32], b: &[f32], c: Option<&[f32]>);
    fn reduce(&self, op: ReduceOp, x: &[f32]) -> f64;
    fn reduce2(&self, op: Reduce2Op, a: &[f32], b: &[f32]) -> f64;
    fn dot_norms(&self, a: &[f32], b: &[f32]) -> [f64; 3];
    fn arg_extreme(&self, x: &[f32], is_max: bool) -> usize;
    fn softmax(&self, dst: &mut [f32], src: Option<&[f32]>);
    fn log_softmax(&self, dst: &mut [f32], src: Option<&[f32]>);
    fn exp_shift_sum(&self, dst: &mut [f32], src: Option<&[f32]>, m: f32) -> f64;
    fn widen(&self, fmt: HalfFormat, src: &[u16], dst: &mut [f32]);
    fn narrow(&self, fmt: HalfFormat, src: &[f32], dst: &mut [u16]);
    fn gemm(&self, task: &GemmTask<'_>);
}

/// Implements `Kernels` for an ISA token: each method calls the generic op body inside a
/// function compiled with the token's target features.
macro_rules! impl_kernels {
    ($token:ty $(, $features:literal)?) => {
        impl Kernels for $token {
            fn backend(&self) -> Backend {
                <$token as Simd>::BACKEND
            }
            impl_kernels!(@m $token $(, $features)?; unary(op: UnaryOp, dst: &mut [f32], src: Option<&[f32]>) => ops::elementwise::unary_vec);
            impl_kernels!(@m $token $(, $features)?; binary(op: BinaryOp, dst: &mut [f32], a: Option<&[f32]>, b: &[f32]) => ops::elementwise::binary_vec);
            impl_kernels!(@m $token $(, $features)?; fma(dst: &mut [f32], a: &[f32], b: &[f32], c: Option<&[f32]>) => ops::elementwise::fma_vec);
            impl_kernels!(@m $token $(, $features)?; reduce(op: ReduceOp, x: &[f32]) -> f64 => ops::reduce::reduce_vec);
            impl_kernels!(@m $token $(, $features)?; reduce2(op: Reduce2Op, a: &[f32], b: &[f32]) -> f64 => ops::reduce::reduce2_vec);
            impl_kernels!(@m $token $(, $features)?; dot_norms(a: &[f32], b: &[f32]) -> [f64; 3] => ops::reduce::dot_norms_vec);
            impl_kernels!(@m $token $(, $features)?; arg_extreme(x: &[f32], is_max: bool) -> usize => ops::reduce::arg_extreme_vec);
            impl_kernels!(@m $token $(, $features)?; softmax(dst: &mut [f32], src: Option<&[f32]>) => ops::softmax::softmax_vec);
            impl_kernels!(@m $token $(, $features)?; log_softmax(dst: &mut [f32], src: Option<&[f32]>) => ops::softmax::log_softmax_vec);
            impl_kernels!(@m $token $(, $features)?; exp_shift_sum(dst: &mut [f32], src: Option<&[f32]>, m: f32) -> f64 => ops::softmax::exp_shift_sum_vec);
            impl_kernels!(@m $token $(, $features)?; widen(fmt: HalfFormat, src: &[u16], dst: &mut [f32]) => ops::convert::widen_vec);
            impl_kernels!(@m $token $(, $features)?; narrow(fmt: HalfFormat, src: &[f32], dst: &mut [u16]) => ops::convert::narrow_vec);
            impl_kernels!(@m $token $(, $features)?; gemm(task: &GemmTask<'_>) => crate::gemm::gemm_vec);
        }
    };
    (@m $token:ty, $features:literal; $name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)? => $body:path) => {
        #[inline]
        fn $name(&self, $($arg: $ty),*) $(-> $ret)? {
            #[cfg(test)]
            trace::record(<$token as Simd>::BACKEND);
            #[target_feature(enable = $features)]
            fn $name(t: $token, $($arg: $ty),*) $(-> $ret)? {
                $body(t, $($arg),*)
            }
            // SAFETY: `self` is a token, which exists only after run-time detection found
            // every feature in its `target_feature` list on this CPU.
            unsafe { $name(*self, $($arg),*) }
        }
    };
    (@m $token:ty; $name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)? => $body:path) => {
        #[inline]
        fn $name(&self, $($arg: $ty),*) $(-> $ret)? {
            #[cfg(test)]
            trace::record(<$token as Simd>::BACKEND);
            $body(*self, $($arg),*)
        }
    };
}

impl_kernels!(Scalar);
#[cfg(target_arch = "x86_64")]
impl_kernels!(crate::simd::sse2::Sse2, "sse2");
#[cfg(target_arch = "x86_64")]
impl_kernels!(crate::simd::avx::Avx, "avx");
#[cfg(target_arch = "x86_64")]
impl_kernels!(crate::simd::avx2::Avx2, "avx2,fma,f16c");
#[cfg(target_arch = "x86_64")]
impl_kernels!(crate::simd::avx512::Avx512, "avx512f,avx2,fma,f16c");
#[cfg(target_arch = "aarch64")]
impl_kernels!(crate::simd::neon::Neon, "neon");
// A wasm module is validated whole: SIMD128 is a build-time choice, no per-function feature.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
impl_kernels!(crate::simd::wasm::Simd128);

/// The kernels of `backend`, or why this CPU cannot run them.
pub(crate) fn kernels_for(backend: Backend) -> Result<&'static dyn Kernels> {
    backend.check_available()?;
    let found: Option<&'static dyn Kernels> = match backend {
        Backend::Scalar => Some(&Scalar),
        #[cfg(target_arch = "x86_64")]
        Backend::Sse2 => crate::simd::sse2::Sse2::detect().map(leak),
        #[cfg(target_arch = "x86_64")]
        Backend::Avx => crate::simd::avx::Avx::detect().map(leak),
        #[cfg(target_arch = "x86_64")]
        Backend::Avx2 => crate::simd::avx2::Avx2::detect().map(leak),
        #[cfg(target_arch = "x86_64")]
        Backend::Avx512 => crate::simd::avx512::Avx512::detect().map(leak),
        #[cfg(target_arch = "aarch64")]
        Backend::Neon => crate::simd::neon::Neon::detect().map(leak),
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        Backend::WasmSimd128 => crate::simd::wasm::Simd128::detect().map(leak),
        _ => None,
    };
    // check_available and the tokens' detect test the same features; a mismatch is a bug
    // in this file, reported as unsupported rather than risking an illegal instruction.
    found.ok_or_else(|| crate::error::TruenoError::UnsupportedBackend {
        backend,
        reason: "no kernels for this backend in this build".to_string(),
    })
}

/// Gives a zero-sized token a `'static` home (no allocation happens for a ZST).
#[cfg(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    all(target_arch = "wasm32", target_feature = "simd128")
))]
fn leak<T: Kernels + 'static>(t: T) -> &'static dyn Kernels {
    debug_assert_eq!(std::mem::size_of::<T>(), 0);
    Box::leak(Box::new(t))
}

/// Test-only record of which backend's kernels ran on this thread, so tests can prove a
/// pinned backend really executed (not merely that it was selected).
#[cfg(test)]
pub(crate) mod trace {
    use std::cell::RefCell;

    use crate::backend::Backend;

    thread_local! {
        static RAN: RefCell<Vec<Backend>> = const { RefCell::new(Vec::new()) };
    }

    pub(crate) fn record(b: Backend) {
        RAN.with(|r| r.borrow_mut().push(b));
    }

    /// The backends that ran since the last call, clearing the record.
    pub(crate) fn take() -> Vec<Backend> {
        RAN.with(|r| std::mem::take(&mut *r.borrow_mut()))
    }
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::trace;
    use crate::backend::{Backend, available_cpu_backends};

    /// Runs one op of every class through the process-wide engine, as `TRUENO_BACKEND`
    /// configured it, and returns the backends whose kernels ran.
    fn run_every_class() -> Vec<Backend> {
        let e = crate::engine().expect("engine");
        let x: Vec<f32> = (0..100).map(|i| i as f32 * 0.1).collect();
        let mut out = vec![0.0; 100];
        let mut half = vec![0u16; 100];
        trace::take();
        e.add_into(&x, &x, &mut out).unwrap();
        e.exp_into(&x, &mut out).unwrap();
        e.sum(&x).unwrap();
        e.f32_to_f16(&x, &mut half).unwrap();
        trace::take()
    }

    /// Child half of `override_pins_every_class_and_that_backend_runs`, run by it in a fresh
    /// process (the backend choice is made once per process); ignored in ordinary runs.
    #[test]
    #[ignore = "run by override_pins_every_class_and_that_backend_runs in a child process"]
    fn override_child() {
        let expect = std::env::var("TRUENO_TEST_EXPECT").expect("set by the parent test");
        if expect == "error" {
            assert!(
                crate::engine().is_err(),
                "an invalid TRUENO_BACKEND must be an error"
            );
            return;
        }
        let ran = run_every_class();
        assert_eq!(ran.len(), 4);
        for b in ran {
            assert_eq!(b.name(), expect, "a kernel of the wrong backend ran");
        }
    }

    fn child(backend: &str, expect: &str) -> std::process::Output {
        // Under an emulator (cross tests), the child starts through it too.
        let exe = std::env::current_exe().unwrap();
        let mut cmd = match std::env::var_os("TRUENO_TEST_RUNNER") {
            Some(runner) => {
                let mut c = Command::new(runner);
                c.arg(exe);
                c
            }
            None => Command::new(exe),
        };
        cmd.args([
            "--exact",
            "dispatch::tests::override_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("TRUENO_BACKEND", backend)
        .env("TRUENO_TEST_EXPECT", expect)
        .output()
        .unwrap()
    }

    #[test]
    #[cfg_attr(target_os = "wasi", ignore = "WASI cannot start a child process")]
    fn override_pins_every_class_and_that_backend_runs() {
        for b in available_cpu_backends() {
            let out = child(b.name(), b.name());
            assert!(
                out.status.success(),
                "TRUENO_BACKEND={b}: {}",
                String::from_utf8_lossy(&out.stdout)
            );
            assert!(
                String::from_utf8_lossy(&out.stdout).contains("1 passed"),
                "child did not run"
            );
        }
        let foreign = if cfg!(target_arch = "aarch64") {
            "avx2"
        } else {
            "neon"
        };
        for bad in ["avx9000", foreign, "cuda"] {
            let out = child(bad, "error");
            assert!(
                out.status.success(),
                "TRUENO_BACKEND={bad}: {}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
    }

    /// On every target the best SIMD backend's kernels are the ones that execute: NEON
    /// under qemu-aarch64, SIMD128 under node, not a scalar fallback.
    #[test]
    fn the_targets_simd_kernels_run() {
        use crate::OpClass::*;
        let e = crate::engine().expect("engine");
        let want: Vec<Backend> = [Elementwise, Transcendental, Reduction, Conversion]
            .map(|c| e.backend(c))
            .to_vec();
        assert_eq!(run_every_class(), want);
        let simd = if cfg!(target_arch = "aarch64") {
            Some(Backend::Neon)
        } else if cfg!(all(target_arch = "wasm32", target_feature = "simd128")) {
            Some(Backend::WasmSimd128)
        } else {
            None
        };
        if let Some(simd) = simd {
            assert!(want.iter().all(|&b| b == simd), "{want:?} ran, not {simd}");
        }
    }

    #[test]
    fn auto_engine_runs_the_preferred_backend_per_class() {
        let e = crate::Engine::auto();
        for class in crate::OpClass::ALL {
            assert_eq!(e.backend(class), class.preferred_backend());
        }
    }
}
