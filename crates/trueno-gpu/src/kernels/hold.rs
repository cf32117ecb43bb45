//! A kernel that keeps its stream busy for a set time, read from the GPU's nanosecond
//! clock (`%globaltimer`): work queued behind it starts only when it ends, so a
//! benchmark can queue its calls first and have them run back to back, with no gaps
//! where the GPU waits on the host's launches (nvbench's "blocking kernel" idea).

use super::{Family, Kernel, LaunchConfig, check_dims};
use crate::error::Result;
use crate::ptx::{Cmp, KernelBuilder, KernelIr, U32, U64};

/// One thread that waits until `ns` nanoseconds have passed since it started (alone, so
/// its loop's branch is uniform by construction). Parameter: `ns` (u32: up to about
/// 4.29 s).
#[derive(Clone, Copy, Debug)]
pub struct HoldKernel;

impl Kernel for HoldKernel {
    fn name(&self) -> String {
        "trueno_hold".into()
    }

    fn family(&self) -> Family {
        Family::Elementwise
    }

    fn build(&self) -> KernelIr {
        let mut b = KernelBuilder::new(self.name());
        b.max_threads(1);
        let ns = b.param_u32("ns");
        let ns = b.cvt::<U64, U32>(ns, None);
        let start = b.global_timer();
        let again = b.new_label();
        b.place(again);
        let now = b.global_timer();
        let spent = b.sub(now, start);
        let waiting = b.setp::<U64>(Cmp::Lt, spent, ns);
        b.bra_if(waiting, false, again, true);
        b.ret();
        b.finish()
    }

    /// `[]`: one thread.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        check_dims(&self.name(), dims, 0)?;
        Ok(LaunchConfig {
            grid: (1, 1, 1),
            block: (1, 1, 1),
            shared_bytes: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptx::Target;

    #[test]
    fn one_thread_reads_the_clock_in_its_loop() {
        let k = HoldKernel;
        let c = k.launch_config(&[]).unwrap();
        assert_eq!((c.grid, c.block), ((1, 1, 1), (1, 1, 1)));
        assert!(k.launch_config(&[1]).is_err());
        let ptx = k.emit_ptx(Target::Sm80).unwrap();
        // Read twice: once before the loop, once in it.
        assert_eq!(ptx.matches("%globaltimer").count(), 2, "{ptx}");
    }
}
