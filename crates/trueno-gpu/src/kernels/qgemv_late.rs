//! The integer matrix-vector product (qgemv_dp4a.rs) with a pass's activations loaded
//! after its weights' pin, beside the math: they are L1 hits, so only the weights wait in
//! registers, and the kernel holds fewer (Q6_K 80 -> 64, Q8_0 115 -> 64 on sm_90): four
//! blocks of eight warps a multiprocessor instead of three and two.
//!
//! Why a device choice: on an H200 (4.8 TB/s over 132 multiprocessors) the extra warps
//! keep more of its bandwidth busy, and this ran 1.084-1.089x at Q6_K 32000x4096 (79% ->
//! 86% of the device copy) and 1.013-1.040x for Q8_0 at three of the four shapes
//! (0.998-0.999x at 4096x14336). On an H100 (3.35 TB/s, before overlapped launches) the same placement ran
//! 0.85-0.99x at every shape (session 32). [`late_wins`] draws the line between them by
//! bandwidth a multiprocessor.

use super::qgemv::QuantFormat;
use super::qgemv_dp4a::{PassPlan, QgemvQ8kKernel, build, variant_launch};
use super::{Family, Kernel, LaunchConfig};
use crate::error::Result;
use crate::ptx::KernelIr;

/// Memory bandwidth a multiprocessor (GB/s) from which [`QgemvQ8kLateKernel`] runs: the
/// H200's 36, not the H100's 25 (datasheet figures).
pub const LATE_BANDWIDTH_PER_SM: f64 = 30.0;

/// [`super::qgemv_dp4a::QgemvQ8kKernel`]'s product with each pass's activations loaded
/// after the pin (see the module's doc). Parameters as the default kernel's.
/// `Stream::qgemv_q8k` chooses it on devices where [`late_wins`], for the formats in
/// [`Self::FORMATS`], where the one-wave variant does not win against the default kernel
/// (Q6_K at 4096 rows keeps its one-step variant: the late kernel ran 0.917-0.925x of it
/// there on an H200).
#[derive(Clone, Copy, Debug)]
pub struct QgemvQ8kLateKernel(pub QuantFormat);

impl QgemvQ8kLateKernel {
    /// The formats measured faster with it (H200): Q6_K and Q8_0. Q4_K ran 0.88-0.97x
    /// and Q4_0 0.87-1.02x (their default kernels already hold four and five blocks);
    /// Q5_K's passes are not pinned, so it has no such variant.
    pub const FORMATS: [QuantFormat; 2] = [QuantFormat::Q6K, QuantFormat::Q8_0];

    /// Format `f`'s kernel on a device of `bandwidth_gbs` (datasheet) over `sms`
    /// multiprocessors where no one-wave variant wins: this one for [`Self::FORMATS`]
    /// where [`late_wins`], else the default. The one place `Stream::qgemv_q8k` and
    /// `trueno ptx map` decide it.
    pub fn or_default(f: QuantFormat, bandwidth_gbs: f64, sms: u32) -> Box<dyn Kernel> {
        match Self::FORMATS.contains(&f) && late_wins(bandwidth_gbs, sms) {
            true => Box::new(QgemvQ8kLateKernel(f)),
            false => Box::new(QgemvQ8kKernel(f)),
        }
    }
}

/// Whether a device of `bandwidth_gbs` (datasheet) over `sms` multiprocessors runs the
/// late-activation kernel: from [`LATE_BANDWIDTH_PER_SM`].
///
/// ```
/// use trueno_gpu::kernels::qgemv_late::late_wins;
///
/// assert!(late_wins(4800.0, 132)); // H200
/// assert!(!late_wins(3352.0, 132)); // H100
/// ```
pub fn late_wins(bandwidth_gbs: f64, sms: u32) -> bool {
    sms > 0 && bandwidth_gbs / f64::from(sms) >= LATE_BANDWIDTH_PER_SM
}

impl Kernel for QgemvQ8kLateKernel {
    fn name(&self) -> String {
        format!("trueno_qgemv_{}_q8k_late", self.0.name())
    }

    fn family(&self) -> Family {
        Family::Qgemv
    }

    fn build(&self) -> KernelIr {
        build(
            self.name(),
            self.0,
            false,
            PassPlan {
                late_act: true,
                ..PassPlan::default()
            },
        )
    }

    /// `dims = [rows, cols]`; `cols` a multiple of 256; a format in [`Self::FORMATS`].
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        let has = (Self::FORMATS.contains(&self.0), "late-activation");
        variant_launch(&self.name(), self.0, has, dims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptx::Target;

    #[test]
    fn the_line_falls_between_the_h100_and_the_h200() {
        assert!(late_wins(4800.0, 132), "H200: 36 GB/s a multiprocessor");
        assert!(!late_wins(3352.0, 132), "H100: 25");
        assert!(!late_wins(2039.0, 108), "A100: 19");
        assert!(!late_wins(4800.0, 0));
        let name = |f, bw| QgemvQ8kLateKernel::or_default(f, bw, 132).name();
        assert_eq!(name(QuantFormat::Q6K, 4800.0), "trueno_qgemv_q6_k_q8k_late");
        assert_eq!(name(QuantFormat::Q6K, 3352.0), "trueno_qgemv_q6_k_q8k");
        assert_eq!(name(QuantFormat::Q4K, 4800.0), "trueno_qgemv_q4_k_q8k");
    }

    #[test]
    fn activations_load_after_the_pin_with_the_same_products() {
        for f in QgemvQ8kLateKernel::FORMATS {
            let ptx = |k: &dyn Kernel| k.emit_ptx(Target::Sm90).unwrap();
            let (late, default) = (ptx(&QgemvQ8kLateKernel(f)), ptx(&QgemvQ8kKernel(f)));
            let count = |t: &str, what: &str| t.lines().filter(|l| l.contains(what)).count();
            assert_eq!(
                count(&late, "dp4a"),
                count(&default, "dp4a"),
                "{}",
                f.name()
            );
            // In each pass the first activation load (a v4 of quants) follows the
            // pin's test of the activation pointer; in the default kernel it precedes it.
            let first = |t: &str, what: &str| t.find(what).unwrap();
            let pin = |t: &str| first(t, "setp.eq.u64");
            let act = |t: &str| first(t, "ld.global.v4.u32");
            assert!(act(&late) > pin(&late), "{}", f.name());
            assert!(act(&default) < pin(&default), "{}", f.name());
            let dims = [17, 512];
            let want = QgemvQ8kKernel(f).launch_config(&dims).unwrap();
            assert_eq!(QgemvQ8kLateKernel(f).launch_config(&dims).unwrap(), want);
        }
        let q4k = QgemvQ8kLateKernel(QuantFormat::Q4K);
        assert!(q4k.launch_config(&[17, 512]).is_err());
    }
}
