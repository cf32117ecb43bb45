//! Per-SM limits of each NVIDIA architecture (CUDA occupancy tables) and the occupancy a
//! kernel reaches under them.

/// What one SM of an architecture offers a kernel.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Arch {
    /// `sm_90`...
    pub name: &'static str,
    /// 32-bit registers per SM.
    pub regs_per_sm: u32,
    /// Registers one thread may use.
    pub max_regs_per_thread: u32,
    /// Resident warps per SM.
    pub max_warps: u32,
    /// Resident blocks per SM.
    pub max_blocks: u32,
    /// Shared memory per SM (bytes) available to blocks.
    pub shared_per_sm: u32,
    /// Shared memory the system reserves per block (bytes).
    pub shared_reserved_per_block: u32,
}

const fn arch(name: &'static str, warps: u32, blocks: u32, shared_kib: u32, reserved: u32) -> Arch {
    Arch {
        name,
        regs_per_sm: 65536,
        max_regs_per_thread: 255,
        max_warps: warps,
        max_blocks: blocks,
        shared_per_sm: shared_kib * 1024,
        shared_reserved_per_block: reserved,
    }
}

const ARCHS: [Arch; 9] = [
    arch("sm_70", 64, 32, 96, 0),
    arch("sm_75", 32, 16, 64, 0),
    arch("sm_80", 64, 32, 164, 1024),
    arch("sm_86", 48, 16, 100, 1024),
    arch("sm_89", 48, 24, 100, 1024),
    arch("sm_90", 64, 32, 228, 1024),
    arch("sm_90a", 64, 32, 228, 1024),
    arch("sm_100", 64, 32, 228, 1024),
    arch("sm_120", 48, 32, 100, 1024),
];

impl Arch {
    /// The limits of `sm_XX` (`sm_80`, `sm_90a`...), or `None` for one not in the table.
    pub fn parse(name: &str) -> Option<Arch> {
        ARCHS.iter().copied().find(|a| a.name == name)
    }

    /// Every architecture in the table, by name.
    pub fn names() -> Vec<&'static str> {
        ARCHS.iter().map(|a| a.name).collect()
    }

    /// Resident blocks and occupancy of a kernel with `regs` registers per thread,
    /// `threads` per block and `shared` bytes of shared memory per block.
    pub fn occupancy(&self, regs: u32, threads: u32, shared: u64) -> Occupancy {
        let warps = threads.max(1).div_ceil(32);
        // Registers are handed out per warp in units of 256.
        let regs_per_warp = (regs.clamp(1, self.max_regs_per_thread) * 32).div_ceil(256) * 256;
        let by_regs = self.regs_per_sm / regs_per_warp / warps;
        let by_warps = self.max_warps / warps;
        let by_shared = if shared == 0 {
            u32::MAX
        } else {
            (self.shared_per_sm as u64 / (shared + self.shared_reserved_per_block as u64)) as u32
        };
        let candidates = [
            (by_regs, "registers"),
            (by_shared, "shared memory"),
            (by_warps, "threads"),
            (self.max_blocks, "blocks"),
        ];
        let (blocks, limiter) = candidates
            .iter()
            .copied()
            .min_by_key(|c| c.0)
            .unwrap_or((0, "threads"));
        Occupancy {
            blocks_per_sm: blocks,
            warps_per_sm: blocks * warps,
            occupancy: (blocks * warps) as f64 / self.max_warps as f64,
            limiter,
        }
    }
}

/// How many blocks and warps fit on one SM.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Occupancy {
    /// Resident blocks.
    pub blocks_per_sm: u32,
    /// Resident warps.
    pub warps_per_sm: u32,
    /// Resident warps over the most the SM holds.
    pub occupancy: f64,
    /// What stops more blocks: `registers`, `shared memory`, `threads` or `blocks`.
    pub limiter: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Figures from NVIDIA's occupancy calculator (CUDA_Occupancy_Calculator.xls, compute
    /// capability 8.0 and 9.0 sheets).
    #[test]
    fn matches_the_occupancy_calculator() {
        let h100 = Arch::parse("sm_90").unwrap();
        // 256 threads, 32 registers, no shared memory: 8 blocks, 64 warps, 100%.
        let o = h100.occupancy(32, 256, 0);
        assert_eq!((o.blocks_per_sm, o.warps_per_sm), (8, 64));
        assert_eq!(o.occupancy, 1.0);
        // 128 registers at 256 threads: 65536 / (128*32*8) = 2 blocks, 25%.
        let o = h100.occupancy(128, 256, 0);
        assert_eq!((o.blocks_per_sm, o.limiter), (2, "registers"));
        assert_eq!(o.occupancy, 0.25);
        // 37 registers round up to 40 per thread (1280 per warp): 51 warps -> 6 blocks.
        let o = h100.occupancy(37, 256, 0);
        assert_eq!(o.blocks_per_sm, 6);
        // 48 KiB of shared per block on A100: 164 KiB / 49 KiB = 3 blocks.
        let a100 = Arch::parse("sm_80").unwrap();
        let o = a100.occupancy(16, 128, 48 * 1024);
        assert_eq!((o.blocks_per_sm, o.limiter), (3, "shared memory"));
        // 32 threads per block on A100: the 32-block limit binds at 50%.
        let o = a100.occupancy(16, 32, 0);
        assert_eq!(
            (o.blocks_per_sm, o.limiter, o.occupancy),
            (32, "blocks", 0.5)
        );
        assert!(Arch::parse("sm_52").is_none());
    }
}
