//! Tensor-core GEMM configurations tuned on the device: for a class of shapes, every
//! configuration that can run there is timed once and the fastest is kept, in the
//! context for the process and, where `TRUENO_GPU_TUNE_FILE` names a file, on disk for
//! the next one. The GEMM ops take a tuned choice where there is one and a measured
//! rule otherwise (see [`Stream::gemm_choice`](crate::driver::Stream::gemm_choice)).

use std::collections::HashMap;
use std::io::Write;

use crate::driver::Context;
use crate::error::{GpuError, Result};
use crate::kernels::float_type::FloatType;
use crate::kernels::gemm_mma::{GemmInput, MmaTileK};
use crate::kernels::gemm_wgmma::WgmmaTileN;
use crate::memory::{FloatElem, GemmElem};
use crate::ops_gemm::GemmEpilogue;

/// Which tensor-core kernel and tile run a GEMM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GemmConfig {
    /// The sm_80 path (`mma.sync`) with this k-step (TF32: 32 only).
    Mma(MmaTileK),
    /// Hopper's path (`wgmma`, sm_90a) with this tile width.
    Wgmma(WgmmaTileN),
}

impl GemmConfig {
    /// Every configuration, for parsing and listing.
    pub const ALL: [GemmConfig; 5] = [
        GemmConfig::Mma(MmaTileK::K32),
        GemmConfig::Mma(MmaTileK::K64),
        GemmConfig::Wgmma(WgmmaTileN::N64),
        GemmConfig::Wgmma(WgmmaTileN::N128),
        GemmConfig::Wgmma(WgmmaTileN::N256),
    ];

    /// `mma_k32`, `wgmma_n256`, ...
    pub fn name(self) -> String {
        match self {
            GemmConfig::Mma(k) => format!("mma_k{}", k.elems()),
            GemmConfig::Wgmma(n) => format!("wgmma_n{}", n.elems()),
        }
    }

    fn parse(s: &str) -> Option<GemmConfig> {
        GemmConfig::ALL.into_iter().find(|c| c.name() == s)
    }

    /// Whether this configuration runs `input` on a device (`sm90a`: Hopper).
    pub fn runs(self, input: GemmInput, sm90a: bool) -> bool {
        match self {
            GemmConfig::Mma(k) => !input.is_tf32() || k == MmaTileK::K32,
            GemmConfig::Wgmma(_) => sm90a,
        }
    }
}

/// The shapes one tuned choice covers: the input and output types and each of m, n, k
/// rounded up to a power of two (its exponent here).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmClass {
    /// What is multiplied.
    pub input: GemmInput,
    /// What is written.
    pub out: FloatType,
    /// log2 of m, n and k rounded up to powers of two.
    pub log2: [u32; 3],
}

impl GemmClass {
    /// The class of an `m x n x k` product.
    pub fn of(input: GemmInput, out: FloatType, m: usize, n: usize, k: usize) -> GemmClass {
        let l = |x: usize| x.max(1).next_power_of_two().trailing_zeros();
        GemmClass {
            input,
            out,
            log2: [l(m), l(n), l(k)],
        }
    }

    /// The tune file's line for this class and `config` on `device` (tab-separated:
    /// device, input, output, `MxNxK` of the class's powers of two, configuration).
    fn line(self, device: &str, config: GemmConfig) -> String {
        let [m, n, k] = self.log2.map(|e| 1u64 << e);
        let device = device.replace(['\t', '\n'], " ");
        format!(
            "{device}\t{}\t{}\t{m}x{n}x{k}\t{}",
            self.input.name(),
            self.out.name(),
            config.name()
        )
    }

    /// A line of the tune file, if it is for `device` and well formed.
    fn parse_line(line: &str, device: &str) -> Option<(GemmClass, GemmConfig)> {
        let f: Vec<&str> = line.trim_end().split('\t').collect();
        let [dev, input, out, shape, config] = f[..] else {
            return None;
        };
        if dev != device.replace(['\t', '\n'], " ") {
            return None;
        }
        let input = GemmInput::EVERY.into_iter().find(|i| i.name() == input)?;
        let out = FloatType::ALL.into_iter().find(|t| t.name() == out)?;
        let dims: Vec<u64> = shape
            .split('x')
            .map(|d| d.parse().ok())
            .collect::<Option<_>>()?;
        let log2: [u32; 3] = dims
            .iter()
            .map(|&d| d.is_power_of_two().then(|| d.trailing_zeros()))
            .collect::<Option<Vec<_>>>()?
            .try_into()
            .ok()?;
        Some((GemmClass { input, out, log2 }, GemmConfig::parse(config)?))
    }
}

/// The tune file named by `TRUENO_GPU_TUNE_FILE`, if any.
fn tune_file() -> Option<std::path::PathBuf> {
    std::env::var_os("TRUENO_GPU_TUNE_FILE").map(Into::into)
}

/// This device's entries of the tune file (later lines win), empty without one.
pub(crate) fn load(device: &str) -> HashMap<GemmClass, GemmConfig> {
    let Some(text) = tune_file().and_then(|p| std::fs::read_to_string(p).ok()) else {
        return HashMap::new();
    };
    text.lines()
        .filter_map(|l| GemmClass::parse_line(l, device))
        .collect()
}

/// Random values in [-1, 1) as `T` (a fixed sequence: timing, not testing).
fn filler<T: GemmElem>(n: usize) -> Vec<T> {
    let mut s = 0x2545_F491_4F6C_DD1Du64;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            T::from_f32((s >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
        })
        .collect()
}

impl Context {
    /// The tuned configuration for `class`, if one was chosen in this process or read
    /// from the tune file.
    pub fn tuned_gemm(&self, class: GemmClass) -> Option<GemmConfig> {
        let t = self
            .inner
            .gemm_tuned
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        t.get(&class).copied()
    }

    /// Times every configuration that runs `T` inputs into `C` outputs on this device at
    /// `m x n x k` (two warm-up launches, then the median of five, on random operands),
    /// keeps the fastest for the shape's [`GemmClass`] (`gemm_mma`, `gemm_mma_with`,
    /// `gemm_wgmma` and, for f32, `gemm_tf32` use it from then on; `gemm_mma_bt`'s and
    /// `gemm_tf32_kn`'s classes are their own, tuned by
    /// [`tune_gemm_for`](Self::tune_gemm_for)) and appends it to the tune file where
    /// `TRUENO_GPU_TUNE_FILE` names one.
    /// Returns every configuration's time in milliseconds and the choice. Needs room
    /// for the operands (`(m k + k n) * size_of::<T>() + m n * size_of::<C>()` bytes).
    ///
    /// ```
    /// use half::bf16;
    /// use trueno_gpu::driver::Context;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// let (times, best) = ctx.tune_gemm::<bf16, bf16>(512, 4096, 4096)?;
    /// assert!(times.iter().any(|&(c, _)| c == best));
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    #[allow(clippy::type_complexity)]
    pub fn tune_gemm<T: GemmElem, C: FloatElem>(
        &self,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<(Vec<(GemmConfig, f64)>, GemmConfig)> {
        self.tune_gemm_for::<T, C>(T::INPUT, m, n, k)
    }

    /// [`tune_gemm`](Self::tune_gemm) for a product named by its input rather than its
    /// element type: `GemmInput::HalfBt` (B transposed, which
    /// [`Stream::gemm_mma_bt`](crate::driver::Stream::gemm_mma_bt) then takes) or
    /// `GemmInput::Tf32Kn` (TF32 with B as stored,
    /// [`Stream::gemm_tf32_kn`](crate::driver::Stream::gemm_tf32_kn): Hopper's row-major
    /// kernel at each tile height and the sm_80 path), each under a class of its own;
    /// `T` must be the input's element type (an error otherwise, from the first launch).
    ///
    /// ```
    /// use trueno_gpu::driver::Context;
    /// use trueno_gpu::kernels::gemm_mma::GemmInput;
    ///
    /// let Ok(ctx) = Context::new(0) else { return Ok(()) }; // no GPU here: nothing to run
    /// let (times, best) = ctx.tune_gemm_for::<f32, f32>(GemmInput::Tf32Kn, 128, 4096, 4096)?;
    /// assert!(times.iter().any(|&(c, _)| c == best));
    /// # Ok::<(), trueno_gpu::GpuError>(())
    /// ```
    #[allow(clippy::type_complexity)]
    pub fn tune_gemm_for<T: GemmElem, C: FloatElem>(
        &self,
        input: GemmInput,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<(Vec<(GemmConfig, f64)>, GemmConfig)> {
        let a = self.upload(&filler::<T>(m * k))?;
        let b = self.upload(&filler::<T>(k * n))?;
        let c = self.alloc::<C>(m * n)?;
        let mut times = Vec::new();
        for config in GemmConfig::ALL {
            if !config.runs(input, self.has_sm90a()) {
                continue;
            }
            let mut s = self.stream()?.record();
            let e = GemmEpilogue::default();
            for _ in 0..2 {
                s.gemm_with_config(input, config, &a, &b, &c, m, n, k, e)?;
            }
            let mut ms = Vec::new();
            for _ in 0..5 {
                let t0 = s.record_event()?;
                s.gemm_with_config(input, config, &a, &b, &c, m, n, k, e)?;
                let t1 = s.record_event()?;
                ms.push(t0.elapsed_ms(&t1)? as f64);
            }
            s.sync()?;
            ms.sort_by(f64::total_cmp);
            times.push((config, ms[ms.len() / 2]));
        }
        // The sm_80 path runs every input, so there is always a time; the error is for
        // form's sake.
        let best = times
            .iter()
            .min_by(|x, y| x.1.total_cmp(&y.1))
            .map(|x| x.0)
            .ok_or_else(|| GpuError::UnknownKernel(format!("a GEMM for {}", input.name())))?;
        let class = GemmClass::of(input, C::TYPE, m, n, k);
        self.inner
            .gemm_tuned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(class, best);
        if let Some(path) = tune_file() {
            let line = class.line(&self.device().name, best);
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|e| GpuError::Io(format!("{}: {e}", path.display())))?;
            writeln!(f, "{line}").map_err(|e| GpuError::Io(format!("{}: {e}", path.display())))?;
        }
        Ok((times, best))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::gemm_mma::HalfType;

    #[test]
    fn classes_round_each_dimension_up_to_a_power_of_two() {
        let bf16 = GemmInput::Half(HalfType::Bf16);
        let c = GemmClass::of(bf16, FloatType::F32, 4096, 4097, 1);
        assert_eq!(c.log2, [12, 13, 0]);
        assert_eq!(c, GemmClass::of(bf16, FloatType::F32, 2049, 8192, 1));
        assert_ne!(c, GemmClass::of(bf16, FloatType::Bf16, 4096, 4097, 1));
    }

    #[test]
    fn a_tune_line_reads_back_for_its_device_only() {
        let class = GemmClass::of(GemmInput::Tf32, FloatType::Bf16, 500, 4096, 14336);
        let line = class.line("NVIDIA H100 80GB HBM3", GemmConfig::Wgmma(WgmmaTileN::N128));
        assert_eq!(
            line,
            "NVIDIA H100 80GB HBM3\ttf32\tbf16\t512x4096x16384\twgmma_n128"
        );
        assert_eq!(
            GemmClass::parse_line(&line, "NVIDIA H100 80GB HBM3"),
            Some((class, GemmConfig::Wgmma(WgmmaTileN::N128)))
        );
        assert_eq!(GemmClass::parse_line(&line, "NVIDIA A100"), None);
        // TF32 with B as stored is a class of its own.
        let kn = GemmClass::of(GemmInput::Tf32Kn, FloatType::F32, 128, 4096, 4096);
        let line = kn.line("NVIDIA H200", GemmConfig::Mma(MmaTileK::K32));
        assert_eq!(line, "NVIDIA H200\ttf32_kn\tf32\t128x4096x4096\tmma_k32");
        assert_eq!(
            GemmClass::parse_line(&line, "NVIDIA H200"),
            Some((kn, GemmConfig::Mma(MmaTileK::K32)))
        );
        assert_ne!(
            kn,
            GemmClass::of(GemmInput::Tf32, FloatType::F32, 128, 4096, 4096)
        );
        for bad in [
            "NVIDIA H100 80GB HBM3\ttf32\tbf16\t500x4096x16384\twgmma_n128",
            "NVIDIA H100 80GB HBM3\tfp8\tbf16\t512x4096x16384\twgmma_n128",
            "NVIDIA H100 80GB HBM3\ttf32\tbf16\t512x4096\twgmma_n128",
            "NVIDIA H100 80GB HBM3\ttf32\tbf16\t512x4096x16384\twgmma_n96",
            "",
        ] {
            assert_eq!(
                GemmClass::parse_line(bad, "NVIDIA H100 80GB HBM3"),
                None,
                "{bad}"
            );
        }
    }

    #[test]
    fn every_config_has_a_distinct_name_and_tf32_skips_the_64_step() {
        let names: std::collections::HashSet<_> = GemmConfig::ALL.map(|c| c.name()).into();
        assert_eq!(names.len(), 5);
        assert!(!GemmConfig::Mma(MmaTileK::K64).runs(GemmInput::Tf32, true));
        assert!(GemmConfig::Mma(MmaTileK::K64).runs(HalfType::F16.into(), false));
        assert!(!GemmConfig::Wgmma(WgmmaTileN::N256).runs(GemmInput::Tf32, false));
        assert!(!GemmConfig::Mma(MmaTileK::K64).runs(GemmInput::Tf32Kn, false));
        assert!(GemmConfig::Mma(MmaTileK::K32).runs(GemmInput::Tf32Kn, false));
    }
}
