//! The integer product (qgemv_dp4a.rs) with shallower passes, for matrices whose rows
//! all run in one wave with them and not with the default kernel's: latency-bound there,
//! so the pass depth that fits one wave decides (see [`QgemvQ8kOneWaveKernel`]).

use super::qgemv::QuantFormat;
use super::qgemv_dp4a::{PassPlan, UNROLL, build, variant_launch};
use super::{Family, Kernel, LaunchConfig};
use crate::error::Result;
use crate::ptx::KernelIr;

/// [`QgemvQ8kKernel`](super::qgemv_dp4a::QgemvQ8kKernel) with another number of steps a
/// pass, for matrices whose rows all run in one wave: the product is latency-bound there,
/// so the pass depth that fits one wave decides. Q6_K takes one step a pass (54 registers
/// against 80: four blocks of eight warps a multiprocessor instead of three, so 4096 rows
/// fit an H100's 132 multiprocessors in one wave instead of a second, mostly idle one).
/// With several waves the default kernel's passes stay. `Stream::qgemv_q8k` chooses
/// ([`one_wave_wins`]).
#[derive(Clone, Copy, Debug)]
pub struct QgemvQ8kOneWaveKernel(pub QuantFormat);

impl QgemvQ8kOneWaveKernel {
    /// The formats with a one-wave variant: those measured faster with it (H100, 4096
    /// rows: Q6_K at one step 1.045-1.085x). Q4_K ran 0.82-0.98x at one step and
    /// 0.89-0.91x at four; Q5_K at four steps (1.01-1.085x until the first pass's weights
    /// came to precede the wait for the previous grid) now needs 80 registers, three
    /// blocks a multiprocessor, and its default kernel with overlapped launches beats it
    /// (1.06-1.25x against 1.04-1.11x over the previous code); Q8_0 and Q4_0, whose lanes
    /// set their own depth, not tried. [`one_wave_wins`] takes the others' default kernels.
    pub const FORMATS: [QuantFormat; 1] = [QuantFormat::Q6K];

    /// Steps a pass: fewer than the default kernel's two (Q6_K); `None` for a format
    /// without a variant.
    pub fn steps(self) -> Option<u32> {
        match self.0 {
            QuantFormat::Q6K => Some(1),
            _ => None,
        }
    }

    /// Blocks of eight warps a multiprocessor holds of the default kernel and of this
    /// variant, for plans priced without a device (`trueno ptx map`): from ptxas's
    /// register counts on sm_80 and sm_90 (Q6_K: 80 against 54-57, so three blocks
    /// against four; a test holds them to the register snapshot). `Stream::qgemv_q8k`
    /// asks the driver instead. `None` for a format without a variant.
    pub fn planned_residency(self) -> Option<(u32, u32)> {
        self.steps().map(|_| (3, 4))
    }
}

impl Kernel for QgemvQ8kOneWaveKernel {
    fn name(&self) -> String {
        let steps = self.steps().unwrap_or(UNROLL);
        format!("trueno_qgemv_{}_q8k_step{steps}", self.0.name())
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
                steps: self.steps(),
                ..PassPlan::default()
            },
        )
    }

    /// `dims = [rows, cols]`; `cols` a multiple of 256; a format in [`Self::FORMATS`].
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        let has = (self.steps().is_some(), "one-wave");
        variant_launch(&self.name(), self.0, has, dims)
    }
}

/// Whether a one-vector product of `blocks` thread blocks runs faster on the one-wave
/// variant (shallower passes, fewer registers) than on the default kernel, on `sms`
/// multiprocessors holding `default` or `variant` blocks each (the occupancy calculator's
/// figures): where only the variant runs it in one wave. Where both do, or neither, the
/// default's deeper passes win.
///
/// ```
/// use trueno_gpu::kernels::qgemv_one_wave::one_wave_wins;
///
/// // An H100 (132 multiprocessors). Q6_K: three two-step blocks or four one-step ones
/// // each; 4096 rows (512 blocks of eight) fit one wave only with one step a pass.
/// assert!(one_wave_wins(512, 132, (3, 4)));
/// assert!(!one_wave_wins(14336 / 8, 132, (3, 4)));
/// ```
pub fn one_wave_wins(blocks: u32, sms: u32, (default, variant): (u32, u32)) -> bool {
    let fits = |per_sm: u32| u64::from(blocks) <= u64::from(per_sm) * u64::from(sms);
    fits(variant) && !fits(default)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::qgemv_dp4a::QgemvQ8kKernel;

    /// `dp4a` instructions in a kernel's PTX.
    fn products(k: &dyn Kernel) -> usize {
        let ptx = k.emit_ptx(crate::ptx::Target::Sm90).unwrap();
        ptx.lines()
            .filter(|l| l.trim_start().starts_with("dp4a"))
            .count()
    }

    #[test]
    fn a_one_wave_variant_has_its_steps_of_products() {
        // The first pass of `steps` (written apart: its wait for the previous grid sits
        // between its weights and its activations), the loop's pass of `steps` and, past
        // one step, a pass of one for the rest: the default kernel's products come in
        // 2 + 2 + 1 steps' worth.
        for k in QgemvQ8kOneWaveKernel::FORMATS.map(QgemvQ8kOneWaveKernel) {
            let steps = k.steps().unwrap() as usize;
            let in_code = 2 * steps + usize::from(steps > 1);
            let default = products(&QgemvQ8kKernel(k.0));
            assert_eq!(products(&k) * 5, default * in_code, "{}", k.name());
            let dims = [17, 512];
            let want = QgemvQ8kKernel(k.0).launch_config(&dims).unwrap();
            assert_eq!(k.launch_config(&dims).unwrap(), want);
        }
        assert!(
            QgemvQ8kOneWaveKernel(QuantFormat::Q4K)
                .launch_config(&[17, 512])
                .is_err()
        );
    }

    #[test]
    fn a_one_wave_variant_wins_where_only_it_fits_one_wave() {
        // H100: 132 multiprocessors. Q6_K: three two-step blocks or four one-step ones.
        let q6k = |rows: u32| one_wave_wins(rows.div_ceil(8), 132, (3, 4));
        assert!(
            q6k(4096),
            "3168 rows a wave against 4224: one wave instead of two"
        );
        assert!(!q6k(3168), "one wave either way: the deeper default");
        assert!(q6k(3169));
        assert!(q6k(4224));
        assert!(!q6k(4225), "two waves either way");
        assert!(!q6k(14336), "several waves: the default");
        assert!(!one_wave_wins(10, 0, (0, 0)), "no multiprocessors");
    }
}
