//! The Q4_K integer product (qgemv_dp4a.rs) for matrices of many 4096-wide rows, such as
//! an LLM's output layer: a row's four steps in one pass, their quants loaded before the
//! pass's pin, the super-block headers and the activations after it, beside the math
//! (L1 hits by then: each header's 32-byte sector comes in with a quant load of the same
//! warp step, and every warp reads the same activations).
//!
//! Why: the default kernel holds two steps' quants, headers and activations across its
//! pin (63 registers on sm_90), about 36 bytes of weights a lane in flight; this one
//! holds four steps' quants, 64 bytes, in 50. On an H200, past 32000 rows each further
//! row costs what torch's device copy would (3.95-3.98 TB/s at the margin, against the
//! default kernel's 3.58), but each call pays more, each step's math waiting on its L1
//! round trips: against the default at 4096 columns, 0.87x at 8192 rows, even at 20480,
//! 1.02-1.08x from 24576 to 128256; with 8192 columns (two passes a row) 0.86-0.98x.
//! [`wide_wins`] takes it where it won: rows of exactly one pass, five waves and more, on
//! devices with an H200's bandwidth a multiprocessor (it was not measured elsewhere).

use super::qgemv::QuantFormat;
use super::qgemv_dp4a::{BLOCKS_PER_STEP, PassPlan, build, variant_launch};
use super::qgemv_late::late_wins;
use super::{Family, Kernel, LaunchConfig};
use crate::error::Result;
use crate::ptx::KernelIr;

/// Steps a pass: a 4096-wide row's sixteen super-blocks.
pub const WIDE_STEPS: u32 = 4;

/// Waves of blocks from which [`QgemvQ8kWideKernel`] runs (H200, 4096 columns: even
/// with the default kernel at 4.85 waves, 1.02x at 5.8).
pub const WIDE_MIN_WAVES: u64 = 5;

/// The Q4_K integer product with a row's whole weights in one pass, for many rows of
/// 4096 (see the module's doc). Parameters as [`super::qgemv_dp4a::QgemvQ8kKernel`]'s;
/// any shape it takes is computed right, but rows of other widths gain nothing from it.
/// `Stream::qgemv_q8k` chooses it where [`wide_wins`].
#[derive(Clone, Copy, Debug)]
pub struct QgemvQ8kWideKernel(pub QuantFormat);

impl QgemvQ8kWideKernel {
    /// The formats with this variant: Q4_K (Q5_K's passes are not pinned; Q6_K and Q8_0
    /// hold their activations after the pin already on such devices).
    pub const FORMATS: [QuantFormat; 1] = [QuantFormat::Q4K];
}

/// Whether a `[rows, cols]` product of format `f`, `blocks` thread blocks of the default
/// kernel's eight rows, runs [`QgemvQ8kWideKernel`] on a device of `sms` multiprocessors
/// holding `per_sm` of its blocks each and `bandwidth_gbs` of datasheet bandwidth: a
/// format it has, rows of exactly one pass (4096 columns), at least [`WIDE_MIN_WAVES`]
/// waves, and a device where [`late_wins`].
///
/// ```
/// use trueno_gpu::kernels::qgemv::QuantFormat;
/// use trueno_gpu::kernels::qgemv_wide::wide_wins;
///
/// // An H200: 132 multiprocessors, four blocks each. 32000 rows are 4000 blocks.
/// assert!(wide_wins(QuantFormat::Q4K, [32000, 4096], 4000, (132, 4), 4800.0));
/// assert!(!wide_wins(QuantFormat::Q4K, [14336, 4096], 1792, (132, 4), 4800.0));
/// assert!(!wide_wins(QuantFormat::Q4K, [32000, 8192], 4000, (132, 4), 4800.0));
/// ```
pub fn wide_wins(
    f: QuantFormat,
    dims: [usize; 2],
    blocks: u32,
    (sms, per_sm): (u32, u32),
    bandwidth_gbs: f64,
) -> bool {
    let wave = u64::from(sms) * u64::from(per_sm);
    wide_may_win(f, dims, sms, bandwidth_gbs)
        && wave > 0
        && u64::from(blocks) >= WIDE_MIN_WAVES * wave
}

/// [`wide_wins`] but for the row count: whether the residency is worth asking for (the
/// launch path asks only then).
///
/// ```
/// use trueno_gpu::kernels::qgemv::QuantFormat;
/// use trueno_gpu::kernels::qgemv_wide::wide_may_win;
///
/// assert!(wide_may_win(QuantFormat::Q4K, [8, 4096], 132, 4800.0)); // rows: not yet asked
/// assert!(!wide_may_win(QuantFormat::Q4K, [32000, 4096], 132, 3352.0)); // an H100
/// ```
pub fn wide_may_win(f: QuantFormat, [_, cols]: [usize; 2], sms: u32, bandwidth_gbs: f64) -> bool {
    let one_pass = (BLOCKS_PER_STEP * WIDE_STEPS * 256) as usize;
    QgemvQ8kWideKernel::FORMATS.contains(&f) && cols == one_pass && late_wins(bandwidth_gbs, sms)
}

impl Kernel for QgemvQ8kWideKernel {
    fn name(&self) -> String {
        format!("trueno_qgemv_{}_q8k_wide", self.0.name())
    }

    fn family(&self) -> Family {
        Family::Qgemv
    }

    fn build(&self) -> KernelIr {
        let plan = PassPlan {
            steps: Some(WIDE_STEPS),
            late_act: true,
            late_head: true,
        };
        build(self.name(), self.0, false, plan)
    }

    /// `dims = [rows, cols]`; `cols` a multiple of 256; a format in [`Self::FORMATS`].
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        let has = (Self::FORMATS.contains(&self.0), "one-pass");
        variant_launch(&self.name(), self.0, has, dims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::qgemv_dp4a::QgemvQ8kKernel;
    use crate::ptx::Target;

    #[test]
    fn only_many_one_pass_rows_on_an_h200_class_device_take_it() {
        let q4k = QuantFormat::Q4K;
        let h200 = |dims: [usize; 2], blocks| wide_wins(q4k, dims, blocks, (132, 4), 4800.0);
        // Five waves of 528 blocks: 2640 blocks, 21120 rows.
        assert!(h200([21120, 4096], 2640));
        assert!(!h200([21112, 4096], 2639));
        assert!(h200([128256, 4096], 16032));
        assert!(!h200([32000, 4352], 4000), "a step past one pass");
        assert!(!h200([32000, 3840], 4000), "lanes without a whole pass");
        assert!(
            !wide_wins(q4k, [32000, 4096], 4000, (132, 4), 3352.0),
            "H100"
        );
        assert!(!wide_wins(q4k, [32000, 4096], 4000, (0, 4), 4800.0));
        assert!(!wide_wins(q4k, [32000, 4096], 4000, (132, 0), 4800.0));
        for f in [QuantFormat::Q5K, QuantFormat::Q6K, QuantFormat::Q8_0] {
            assert!(!wide_wins(f, [32000, 4096], 4000, (132, 4), 4800.0));
        }
    }

    /// Counts of a PTX text's lines holding `what`, before and after the first pass's pin
    /// (the `setp.eq.u64` of its never-taken branch).
    fn around_the_pin(ptx: &str, what: &str) -> (usize, usize) {
        let pin = ptx.find("setp.eq.u64").expect("a pinned pass");
        let count = |t: &str| t.lines().filter(|l| l.contains(what)).count();
        (count(&ptx[..pin]), count(&ptx[pin..]))
    }

    #[test]
    fn four_steps_of_quants_precede_the_pin_and_headers_follow_it() {
        let ptx = |k: &dyn Kernel| k.emit_ptx(Target::Sm90).unwrap();
        let (wide, default) = (
            ptx(&QgemvQ8kWideKernel(QuantFormat::Q4K)),
            ptx(&QgemvQ8kKernel(QuantFormat::Q4K)),
        );
        // 16-byte loads before the first pin: the default kernel's two steps of header
        // and quants and two quads of activations each (8); this one's four steps of
        // quants alone.
        assert_eq!(around_the_pin(&default, "ld.global.v4.u32").0, 8);
        assert_eq!(around_the_pin(&wide, "ld.global.v4.u32").0, 4);
        // The same products: its passes of four (the first written apart from the loop's)
        // against the default's 2 + 2 + 1; the wide kernel's rest loop is of one step too.
        let dp4a = |t: &str| {
            t.lines()
                .filter(|l| l.trim_start().starts_with("dp4a"))
                .count()
        };
        assert_eq!(dp4a(&wide) * 5, dp4a(&default) * 9);
        let dims = [17, 512];
        let want = QgemvQ8kKernel(QuantFormat::Q4K)
            .launch_config(&dims)
            .unwrap();
        assert_eq!(
            QgemvQ8kWideKernel(QuantFormat::Q4K)
                .launch_config(&dims)
                .unwrap(),
            want
        );
        assert!(
            QgemvQ8kWideKernel(QuantFormat::Q6K)
                .launch_config(&dims)
                .is_err()
        );
    }
}
