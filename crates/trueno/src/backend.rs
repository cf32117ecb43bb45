//! Backends, CPU feature detection, and which backend each class of operation runs on.
//!
//! Selection happens once per process (see `dispatch`). `TRUENO_BACKEND` pins one backend for
//! every operation class; naming a backend this CPU cannot run is an error, never a fallback.

use std::fmt;
use std::str::FromStr;

use crate::error::{Result, TruenoError};

/// An instruction set (or device) an operation can run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Backend {
    /// Portable Rust, one element at a time: the reference every other backend is tested against.
    Scalar,
    /// x86-64 SSE2, 4 lanes (every x86-64 CPU has it).
    Sse2,
    /// x86-64 AVX, 8 lanes, without FMA or 256-bit integer operations.
    Avx,
    /// x86-64 AVX2 + FMA + F16C, 8 lanes.
    Avx2,
    /// x86-64 AVX-512F, 16 lanes.
    Avx512,
    /// AArch64 NEON, 4 lanes (baseline on every AArch64 CPU).
    Neon,
    /// WebAssembly SIMD128, 4 lanes (in modules built with `-C target-feature=+simd128`).
    WasmSimd128,
    /// Any GPU through wgpu (the trueno-wgpu crate).
    Gpu,
    /// NVIDIA GPUs through generated PTX (the trueno-gpu crate).
    Cuda,
}

/// The names `TRUENO_BACKEND` and [`Backend::from_str`] accept.
pub const BACKEND_NAMES: &str =
    "auto, scalar, sse2, avx, avx2, avx512, neon, wasm-simd128, gpu, cuda";

impl Backend {
    /// Every backend, in order of preference from worst to best CPU backend, then devices.
    pub const ALL: [Backend; 9] = [
        Backend::Scalar,
        Backend::Sse2,
        Backend::Avx,
        Backend::Avx2,
        Backend::Avx512,
        Backend::Neon,
        Backend::WasmSimd128,
        Backend::Gpu,
        Backend::Cuda,
    ];

    /// The lower-case name used by `TRUENO_BACKEND`, the CLI and JSON output.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Scalar => "scalar",
            Backend::Sse2 => "sse2",
            Backend::Avx => "avx",
            Backend::Avx2 => "avx2",
            Backend::Avx512 => "avx512",
            Backend::Neon => "neon",
            Backend::WasmSimd128 => "wasm-simd128",
            Backend::Gpu => "gpu",
            Backend::Cuda => "cuda",
        }
    }

    /// Vector width in f32 lanes (1 for scalar, 0 for devices).
    pub fn lanes(self) -> usize {
        match self {
            Backend::Scalar => 1,
            Backend::Sse2 | Backend::Neon | Backend::WasmSimd128 => 4,
            Backend::Avx | Backend::Avx2 => 8,
            Backend::Avx512 => 16,
            Backend::Gpu | Backend::Cuda => 0,
        }
    }

    /// Whether this is a CPU instruction set (as opposed to a GPU device path).
    pub fn is_cpu(self) -> bool {
        !matches!(self, Backend::Gpu | Backend::Cuda)
    }

    /// `Ok(())` if this process can run the backend, else the reason it cannot: the CPU
    /// lacks the instruction set, or (for `Gpu`) the build has no `gpu` feature or no
    /// adapter opens. `Cuda` is never available here: it lives in the trueno-gpu crate.
    pub fn check_available(self) -> Result<()> {
        let missing = |reason: &str| {
            Err(TruenoError::UnsupportedBackend {
                backend: self,
                reason: reason.to_string(),
            })
        };
        match self {
            Backend::Scalar => Ok(()),
            Backend::Sse2 | Backend::Avx | Backend::Avx2 | Backend::Avx512 => x86_check(self),
            Backend::Neon => neon_check(),
            Backend::WasmSimd128 => {
                if cfg!(all(target_arch = "wasm32", target_feature = "simd128")) {
                    Ok(())
                } else if cfg!(target_arch = "wasm32") {
                    missing("this module was built without -C target-feature=+simd128")
                } else {
                    missing("SIMD128 is a WebAssembly instruction set")
                }
            }
            // Opens the shared device (once per process) to find out.
            #[cfg(feature = "gpu")]
            Backend::Gpu => crate::gpu::shared().map(drop),
            #[cfg(not(feature = "gpu"))]
            Backend::Gpu => missing("trueno was built without the `gpu` feature (trueno-wgpu)"),
            Backend::Cuda => missing("CUDA ops live in the trueno-gpu crate, not the CPU engine"),
        }
    }

    /// Whether [`Backend::check_available`] succeeds.
    pub fn is_available(self) -> bool {
        self.check_available().is_ok()
    }
}

#[cfg(target_arch = "aarch64")]
fn neon_check() -> Result<()> {
    if std::arch::is_aarch64_feature_detected!("neon") {
        Ok(())
    } else {
        Err(TruenoError::UnsupportedBackend {
            backend: Backend::Neon,
            reason: "this CPU lacks neon".to_string(),
        })
    }
}

#[cfg(not(target_arch = "aarch64"))]
fn neon_check() -> Result<()> {
    Err(TruenoError::UnsupportedBackend {
        backend: Backend::Neon,
        reason: "NEON is an AArch64 instruction set".to_string(),
    })
}

#[cfg(target_arch = "x86_64")]
fn x86_check(backend: Backend) -> Result<()> {
    let needed: &[&str] = match backend {
        Backend::Sse2 => &["sse2"],
        Backend::Avx => &["avx"],
        Backend::Avx2 => &["avx2", "fma", "f16c"],
        Backend::Avx512 => &["avx512f"],
        _ => &[],
    };
    let missing: Vec<&str> = needed.iter().copied().filter(|f| !x86_feature(f)).collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(TruenoError::UnsupportedBackend {
            backend,
            reason: format!("this CPU lacks {}", missing.join(", ")),
        })
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn x86_check(backend: Backend) -> Result<()> {
    Err(TruenoError::UnsupportedBackend {
        backend,
        reason: format!("{} is an x86-64 instruction set", backend.name()),
    })
}

/// Run-time detection of one x86 feature by name (only the names trueno uses).
#[cfg(target_arch = "x86_64")]
pub fn x86_feature(name: &str) -> bool {
    match name {
        "sse2" => std::arch::is_x86_feature_detected!("sse2"),
        "sse4.1" => std::arch::is_x86_feature_detected!("sse4.1"),
        "avx" => std::arch::is_x86_feature_detected!("avx"),
        "avx2" => std::arch::is_x86_feature_detected!("avx2"),
        "fma" => std::arch::is_x86_feature_detected!("fma"),
        "f16c" => std::arch::is_x86_feature_detected!("f16c"),
        "avx512f" => std::arch::is_x86_feature_detected!("avx512f"),
        "avx512bw" => std::arch::is_x86_feature_detected!("avx512bw"),
        "avx512vl" => std::arch::is_x86_feature_detected!("avx512vl"),
        "avx512dq" => std::arch::is_x86_feature_detected!("avx512dq"),
        "avx512bf16" => std::arch::is_x86_feature_detected!("avx512bf16"),
        "avx512fp16" => std::arch::is_x86_feature_detected!("avx512fp16"),
        _ => false,
    }
}

/// The x86 feature names [`x86_feature`] knows, for `trueno info`.
#[cfg(target_arch = "x86_64")]
pub const X86_FEATURES: [&str; 12] = [
    "sse2",
    "sse4.1",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512dq",
    "avx512bf16",
    "avx512fp16",
];

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Backend {
    type Err = TruenoError;

    /// Parses a backend name as `TRUENO_BACKEND` spells it (case-insensitive; `_` = `-`).
    fn from_str(s: &str) -> Result<Self> {
        let norm = s.trim().to_ascii_lowercase().replace('_', "-");
        let found = Backend::ALL
            .into_iter()
            .find(|b| b.name() == norm)
            .or(match norm.as_str() {
                "avx-512" | "avx512f" => Some(Backend::Avx512),
                "wasm" | "simd128" => Some(Backend::WasmSimd128),
                _ => None,
            });
        found.ok_or_else(|| TruenoError::UnknownBackend {
            name: s.to_string(),
            expected: BACKEND_NAMES,
        })
    }
}

/// Every CPU backend this process can run, worst first.
pub fn available_cpu_backends() -> Vec<Backend> {
    Backend::ALL
        .into_iter()
        .filter(|b| b.is_cpu() && b.is_available())
        .collect()
}

/// The widest CPU backend this machine can run.
pub fn select_best_available_backend() -> Backend {
    available_cpu_backends()
        .into_iter()
        .max()
        .unwrap_or(Backend::Scalar)
}

/// Groups of operations that share a bottleneck, and so share the best ISA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpClass {
    /// Cheap per element, bound by memory: add, mul, scale, relu, clamp, ...
    Elementwise,
    /// Many instructions per element: exp, ln, tanh, sigmoid, gelu, softmax, ...
    Transcendental,
    /// One pass to a scalar: sum, dot, max, argmax, norms, variance, ...
    Reduction,
    /// f16 / bf16 to and from f32.
    Conversion,
    /// Matrix products (GEMM): compute-bound, register-tiled.
    MatMul,
}

impl OpClass {
    /// Every class, in a fixed order (index = position in per-class tables).
    pub const ALL: [OpClass; 5] = [
        OpClass::Elementwise,
        OpClass::Transcendental,
        OpClass::Reduction,
        OpClass::Conversion,
        OpClass::MatMul,
    ];

    /// Lower-case name for reports.
    pub fn name(self) -> &'static str {
        match self {
            OpClass::Elementwise => "elementwise",
            OpClass::Transcendental => "transcendental",
            OpClass::Reduction => "reduction",
            OpClass::Conversion => "conversion",
            OpClass::MatMul => "matmul",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The backend this class runs on when nothing is forced: the widest ISA, except where
    /// a measurement on AVX-512 hardware showed AVX2 faster (see BENCHMARKS.md).
    pub fn preferred_backend(self) -> Backend {
        let best = select_best_available_backend();
        if best == Backend::Avx512 && !AVX512_WINS.contains(&self) {
            Backend::Avx2
        } else {
            best
        }
    }
}

/// Classes where AVX-512 beat AVX2 in `cargo bench -p trueno-bench --bench isa` (Xeon,
/// Sapphire Rapids class, 2 vCPU KVM guest, 2026-11-22; table in BENCHMARKS.md):
/// transcendental and reduction won at every size (1.05x-2.6x), conversion won or tied,
/// elementwise won at 1K (1.3x-1.9x) and tied within noise from 10K (0.86x-1.05x, L2-bound
/// on both). A class measured slower on AVX-512 is left out of this list and runs on AVX2.
const AVX512_WINS: &[OpClass] = &[
    OpClass::Elementwise,
    OpClass::Transcendental,
    OpClass::Reduction,
    OpClass::Conversion,
    OpClass::MatMul,
];

/// Reads `TRUENO_BACKEND`: `None` when unset, empty or `auto`.
pub fn backend_override() -> Result<Option<Backend>> {
    match std::env::var("TRUENO_BACKEND") {
        Ok(v) if v.trim().is_empty() || v.trim().eq_ignore_ascii_case("auto") => Ok(None),
        Ok(v) => {
            let b: Backend = v.parse()?;
            b.check_available()?;
            Ok(Some(b))
        }
        Err(_) => Ok(None),
    }
}

/// The ISA and thread count trueno picks for `work` units of an operation of `class`
/// (elements; multiply-adds for `MatMul`): the process-wide engine's CPU backend for the
/// class and the parallel thresholds measured for it, or `(Backend::Gpu, 0)` when that
/// engine sends this much work to the GPU (feature `gpu`; see [`crate::Engine::on_gpu`]).
///
/// ```
/// use trueno::{OpClass, select_backend_for_operation};
/// let (_, threads) = select_backend_for_operation(OpClass::MatMul, 16 * 16 * 16)?;
/// assert_eq!(threads, 1, "a 16^3 product stays on one thread");
/// # Ok::<(), trueno::TruenoError>(())
/// ```
pub fn select_backend_for_operation(class: OpClass, work: usize) -> Result<(Backend, usize)> {
    let e = crate::engine()?;
    if e.on_gpu(class, work) {
        return Ok((Backend::Gpu, 0));
    }
    Ok((
        e.k(class).backend(),
        crate::parallel::threads_for(class, work),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for b in Backend::ALL {
            assert_eq!(b.name().parse::<Backend>().unwrap(), b);
        }
        assert_eq!("AVX_512".parse::<Backend>().unwrap(), Backend::Avx512);
        assert!(matches!(
            "avx9".parse::<Backend>(),
            Err(TruenoError::UnknownBackend { .. })
        ));
    }

    #[test]
    fn scalar_always_available_and_devices_never_in_cpu_engine() {
        assert!(Backend::Scalar.is_available());
        #[cfg(not(feature = "gpu"))]
        assert!(!Backend::Gpu.is_available());
        assert!(!Backend::Cuda.is_available());
        assert!(available_cpu_backends().contains(&Backend::Scalar));
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn detection_matches_std() {
        assert!(Backend::Sse2.is_available());
        assert_eq!(
            Backend::Avx512.is_available(),
            std::arch::is_x86_feature_detected!("avx512f")
        );
        let avx2 = std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c");
        assert_eq!(Backend::Avx2.is_available(), avx2);
        assert!(select_best_available_backend() >= Backend::Sse2);
    }

    #[test]
    fn unavailable_backend_is_an_error_naming_it() {
        // The instruction set of another architecture than this build's.
        let foreign = if cfg!(target_arch = "aarch64") {
            Backend::Avx2
        } else {
            Backend::Neon
        };
        match foreign.check_available() {
            Err(TruenoError::UnsupportedBackend { backend, .. }) => assert_eq!(backend, foreign),
            other => panic!("expected UnsupportedBackend, got {other:?}"),
        }
    }

    /// Which SIMD backend each target must select: proves NEON / SIMD128 are the paths
    /// that run under qemu and node, not a scalar fallback.
    #[test]
    fn the_target_selects_its_simd_backend() {
        let best = select_best_available_backend();
        if cfg!(target_arch = "aarch64") {
            assert_eq!(best, Backend::Neon);
        } else if cfg!(all(target_arch = "wasm32", target_feature = "simd128")) {
            assert_eq!(best, Backend::WasmSimd128);
        } else if cfg!(target_arch = "x86_64") {
            assert!(best >= Backend::Sse2 && best <= Backend::Avx512);
        } else {
            assert_eq!(best, Backend::Scalar);
        }
        if !cfg!(target_arch = "x86_64") {
            for class in OpClass::ALL {
                assert_eq!(class.preferred_backend(), best);
            }
        }
    }
}
