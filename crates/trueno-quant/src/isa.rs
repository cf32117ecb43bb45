//! Per-ISA instances of the quantized kernels. Each kernel body is written once as plain
//! Rust over fixed-size blocks; `per_isa!` compiles it again inside a `#[target_feature]`
//! function for every x86 level, where the compiler vectorizes it for that ISA (AVX-512
//! with byte shuffles, AVX2+FMA+F16C, AVX, and the SSE2 baseline). An [`Isa`] value exists
//! only after run-time detection found every feature its instance was compiled with.
//!
//! Independently of the level, an `Isa` may carry VNNI (`vpdpbusd`: AVX-512 VNNI on the
//! AVX-512 level, AVX-VNNI on the AVX2 level), which only the hand-written integer dots use.

use trueno::{Backend, OpClass, TruenoError};

/// A detected instruction-set level that the quantized kernels run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Isa {
    level: Level,
    vnni: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Level {
    Baseline,
    #[cfg(target_arch = "x86_64")]
    Avx,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Isa {
    /// The level matching trueno's `backend` (scalar and SSE2 share the baseline build),
    /// with VNNI where the CPU has it for that level, or why this CPU cannot run it.
    pub fn new(backend: Backend) -> crate::Result<Isa> {
        let unsupported = |reason: String| {
            Err(crate::QuantError::Trueno(TruenoError::UnsupportedBackend {
                backend,
                reason,
            }))
        };
        backend.check_available()?;
        let level = match backend {
            // On AArch64 and wasm32 the baseline build is the SIMD one: NEON is part of
            // AArch64, and a wasm module is compiled with SIMD128 as a whole.
            Backend::Scalar | Backend::Sse2 | Backend::Neon | Backend::WasmSimd128 => {
                Level::Baseline
            }
            #[cfg(target_arch = "x86_64")]
            Backend::Avx => Level::Avx,
            #[cfg(target_arch = "x86_64")]
            Backend::Avx2 => Level::Avx2,
            #[cfg(target_arch = "x86_64")]
            Backend::Avx512 => Level::Avx512,
            _ => return unsupported("no quantized kernels for this backend".into()),
        };
        if !level_detected(level) {
            return unsupported(format!("this CPU lacks a feature of {level:?}"));
        }
        Ok(Isa {
            level,
            vnni: vnni_detected(level),
        })
    }

    /// The same level without VNNI (to measure or test the `vpmaddubsw` kernels on a VNNI
    /// CPU).
    ///
    /// ```
    /// use trueno_quant::{Isa, QuantFormat, dot_q8, quantize};
    /// let isa = Isa::current()?;
    /// let w = quantize(QuantFormat::Q8_0, &[0.5f32; 32])?;
    /// let x = quantize(QuantFormat::Q8_0, &[2.0f32; 32])?;
    /// // Both paths sum the same integers exactly; only the f32 scaling may round apart.
    /// let (a, b) = (dot_q8(isa, QuantFormat::Q8_0, &w, &x)?, dot_q8(isa.without_vnni(), QuantFormat::Q8_0, &w, &x)?);
    /// assert!((a - 32.0).abs() < 0.1 && (a - b).abs() <= 1e-5 * a.abs());
    /// assert!(!isa.without_vnni().vnni());
    /// # Ok::<(), trueno_quant::QuantError>(())
    /// ```
    pub fn without_vnni(self) -> Isa {
        Isa {
            vnni: false,
            ..self
        }
    }

    /// Whether the integer dots use VNNI's `vpdpbusd`.
    pub fn vnni(self) -> bool {
        self.vnni
    }

    /// The level of trueno's process-wide engine (honours `TRUENO_BACKEND`).
    pub fn current() -> crate::Result<Isa> {
        static CURRENT: std::sync::OnceLock<crate::Result<Isa>> = std::sync::OnceLock::new();
        CURRENT
            .get_or_init(|| Isa::new(trueno::engine()?.backend(OpClass::MatMul)))
            .clone()
    }

    /// Every level this CPU can run, baseline first, each with and (where detected)
    /// without VNNI (for tests and benchmarks).
    pub fn available() -> Vec<(Backend, Isa)> {
        let mut all = Vec::new();
        let baseline = match trueno::select_best_available_backend() {
            b @ (Backend::Neon | Backend::WasmSimd128) => b,
            _ => Backend::Scalar,
        };
        for b in [baseline, Backend::Avx, Backend::Avx2, Backend::Avx512] {
            if let Ok(isa) = Isa::new(b) {
                if isa.vnni {
                    all.push((b, isa.without_vnni()));
                }
                all.push((b, isa));
            }
        }
        all
    }
}

#[cfg(target_arch = "x86_64")]
fn level_detected(level: Level) -> bool {
    use std::arch::is_x86_feature_detected as has;
    match level {
        Level::Baseline => true,
        Level::Avx => has!("avx"),
        Level::Avx2 => has!("avx2") && has!("fma") && has!("f16c"),
        Level::Avx512 => {
            has!("avx512f")
                && has!("avx512bw")
                && has!("avx512vl")
                && has!("avx2")
                && has!("fma")
                && has!("f16c")
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn vnni_detected(level: Level) -> bool {
    use std::arch::is_x86_feature_detected as has;
    match level {
        Level::Avx2 => has!("avxvnni"),
        Level::Avx512 => has!("avx512vnni"),
        _ => false,
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn level_detected(_: Level) -> bool {
    true
}

#[cfg(not(target_arch = "x86_64"))]
fn vnni_detected(_: Level) -> bool {
    false
}

impl std::fmt::Display for Isa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self.level {
            Level::Baseline if cfg!(target_arch = "aarch64") => "neon",
            Level::Baseline if cfg!(target_feature = "simd128") => "simd128",
            Level::Baseline => "baseline",
            #[cfg(target_arch = "x86_64")]
            Level::Avx => "avx",
            #[cfg(target_arch = "x86_64")]
            Level::Avx2 => "avx2",
            #[cfg(target_arch = "x86_64")]
            Level::Avx512 => "avx512",
        };
        write!(f, "{name}{}", if self.vnni { "+vnni" } else { "" })
    }
}

/// `per_isa!(pub(crate) fn name<generics>(args) -> ret = body);` defines `name(isa, args)`
/// which runs `body::<generics>(args)` compiled for `isa`'s level.
macro_rules! per_isa {
    ($vis:vis fn $name:ident<$($g:ident: $bound:path),*>($($arg:ident: $ty:ty),*) $(-> $ret:ty)? = $body:ident) => {
        #[allow(clippy::too_many_arguments)]
        $vis fn $name<$($g: $bound),*>(isa: $crate::isa::Isa, $($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx")]
                fn avx<$($g: $bound),*>($($arg: $ty),*) $(-> $ret)? { $body::<$($g),*>($($arg),*) }
                #[target_feature(enable = "avx2,fma,f16c")]
                fn avx2<$($g: $bound),*>($($arg: $ty),*) $(-> $ret)? { $body::<$($g),*>($($arg),*) }
                #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
                fn avx512<$($g: $bound),*>($($arg: $ty),*) $(-> $ret)? { $body::<$($g),*>($($arg),*) }
                match isa.level() {
                    // SAFETY: an `Isa` of this level exists only after `level_detected`
                    // found every feature enabled on `avx`.
                    $crate::isa::LevelTag::Avx => return unsafe { avx::<$($g),*>($($arg),*) },
                    // SAFETY: as above, for `avx2`'s features.
                    $crate::isa::LevelTag::Avx2 => return unsafe { avx2::<$($g),*>($($arg),*) },
                    // SAFETY: as above, for `avx512`'s features.
                    $crate::isa::LevelTag::Avx512 => return unsafe { avx512::<$($g),*>($($arg),*) },
                    $crate::isa::LevelTag::Baseline => {}
                }
            }
            let _ = isa;
            $body::<$($g),*>($($arg),*)
        }
    };
}
pub(crate) use per_isa;

/// The level, as the macro matches it.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LevelTag {
    /// The build's baseline (SSE2 on x86-64).
    Baseline,
    /// AVX.
    Avx,
    /// AVX2 + FMA + F16C.
    Avx2,
    /// AVX-512 F/BW/VL.
    Avx512,
}

impl Isa {
    #[doc(hidden)]
    pub fn level(self) -> LevelTag {
        match self.level {
            Level::Baseline => LevelTag::Baseline,
            #[cfg(target_arch = "x86_64")]
            Level::Avx => LevelTag::Avx,
            #[cfg(target_arch = "x86_64")]
            Level::Avx2 => LevelTag::Avx2,
            #[cfg(target_arch = "x86_64")]
            Level::Avx512 => LevelTag::Avx512,
        }
    }
}
