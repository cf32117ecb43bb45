//! Cache sizes detected at run time and the BLIS block sizes derived from them.

use std::sync::OnceLock;

/// Data cache sizes in bytes (per core for L1/L2, the whole cache for L3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheSizes {
    /// L1 data cache.
    pub l1: usize,
    /// L2 cache.
    pub l2: usize,
    /// Last-level cache.
    pub l3: usize,
}

impl CacheSizes {
    /// Read once: from `TRUENO_CACHE_SIZES=L1,L2,L3` if it is set and well formed (sizes
    /// in bytes, or with a `K` or `M` suffix as in `48K,2M,105M`; the L3 at least the
    /// L2), else from `/sys/devices/system/cpu/cpu0/cache` (Linux); elsewhere, or if it
    /// is unreadable, 32 KiB / 1 MiB / 8 MiB. The variable is for where those files do
    /// not describe the machine the code runs on: an emulator (qemu-user shows the
    /// host's caches to an aarch64 binary), a VM or container that hides them. `trueno
    /// info` shows the sizes in use.
    ///
    /// ```
    /// let c = trueno::gemm::CacheSizes::detect();
    /// assert!(c.l1 <= c.l2 && c.l2 <= c.l3);
    /// ```
    pub fn detect() -> CacheSizes {
        static C: OnceLock<CacheSizes> = OnceLock::new();
        *C.get_or_init(|| {
            std::env::var("TRUENO_CACHE_SIZES")
                .ok()
                .and_then(|v| CacheSizes::parse(&v))
                .or_else(sysfs)
                .unwrap_or(CacheSizes {
                    l1: 32 << 10,
                    l2: 1 << 20,
                    l3: 8 << 20,
                })
        })
    }

    /// `L1,L2,L3` as `TRUENO_CACHE_SIZES` takes it: none if malformed, zero, or out of
    /// order (each level at least the one before).
    ///
    /// ```
    /// use trueno::gemm::CacheSizes;
    /// let c = CacheSizes::parse("64K, 1M, 32M").unwrap();
    /// assert_eq!((c.l1, c.l2, c.l3), (64 << 10, 1 << 20, 32 << 20));
    /// assert_eq!(CacheSizes::parse("64K,1M"), None);
    /// assert_eq!(CacheSizes::parse("1M,64K,32M"), None);
    /// ```
    pub fn parse(text: &str) -> Option<CacheSizes> {
        let sizes: Vec<usize> = text.split(',').map(parse_size).collect::<Option<_>>()?;
        let &[l1, l2, l3] = sizes.as_slice() else {
            return None;
        };
        (0 < l1 && l1 <= l2 && l2 <= l3).then_some(CacheSizes { l1, l2, l3 })
    }
}

/// A cache size as sysfs writes it (`48K`, `2048K`, `105M`) or in bytes.
fn parse_size(text: &str) -> Option<usize> {
    let text = text.trim();
    let (digits, shift) = match text.as_bytes().last()? {
        b'K' | b'k' => (&text[..text.len() - 1], 10),
        b'M' | b'm' => (&text[..text.len() - 1], 20),
        _ => (text, 0),
    };
    digits.trim().parse::<usize>().ok()?.checked_mul(1 << shift)
}

fn sysfs() -> Option<CacheSizes> {
    let mut c = CacheSizes {
        l1: 0,
        l2: 0,
        l3: 0,
    };
    for idx in 0..8 {
        let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{idx}");
        let Ok(level) = std::fs::read_to_string(format!("{dir}/level")) else {
            break;
        };
        let kind = std::fs::read_to_string(format!("{dir}/type")).ok()?;
        if kind.trim() == "Instruction" {
            continue;
        }
        let size = std::fs::read_to_string(format!("{dir}/size")).ok()?;
        let bytes = parse_size(&size)?;
        match level.trim() {
            "1" => c.l1 = bytes,
            "2" => c.l2 = bytes,
            "3" => c.l3 = bytes,
            _ => {}
        }
    }
    (c.l1 > 0 && c.l2 > 0).then(|| CacheSizes {
        l3: c.l3.max(c.l2),
        ..c
    })
}

/// The kind of core, where the best block sizes depend on more than its cache sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoreFamily {
    /// AMD Zen: its L2 feeds the micro-kernel a B panel too deep for L1 at the FMA rate
    /// (measured on Zen 4 and Zen 5).
    Zen,
    /// Any other core (the measured ones: Intel Sapphire and Emerald Rapids).
    Other,
}

impl CoreFamily {
    /// The running core's family, from the CPU vendor string (`cpuid` leaf 0), read once:
    /// in a VM each `cpuid` traps to the hypervisor (about 2 us, measured here: per call
    /// it took a 64^3 product from 0.96x faer to 0.34x).
    ///
    /// ```
    /// use trueno::gemm::{Blocking, CacheSizes, CoreFamily};
    /// // Any AMD x86-64 core counts as Zen, and takes the 512-deep panel.
    /// let b = Blocking::new(8, 32, CacheSizes::detect(), CoreFamily::detect());
    /// assert!(CoreFamily::detect() != CoreFamily::Zen || b.kc == 512);
    /// ```
    pub fn detect() -> CoreFamily {
        static F: OnceLock<CoreFamily> = OnceLock::new();
        *F.get_or_init(|| {
            #[cfg(target_arch = "x86_64")]
            {
                let r = std::arch::x86_64::__cpuid(0);
                let vendor = [r.ebx, r.edx, r.ecx].map(u32::to_le_bytes);
                if vendor.concat() == b"AuthenticAMD" {
                    return CoreFamily::Zen;
                }
            }
            CoreFamily::Other
        })
    }
}

/// Block sizes of the three cache loops, for one micro-kernel shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blocking {
    /// Micro-tile rows.
    pub mr: usize,
    /// Micro-tile columns.
    pub nr: usize,
    /// Depth of a packed panel: a KC x NR sliver of B stays in L1 (or a fast L2, see
    /// `Blocking::new`) while MR x KC slivers of A stream past it.
    pub kc: usize,
    /// Rows of the packed A block (MC x KC, half of L2).
    pub mc: usize,
    /// Columns of the packed B block (KC x NC, a share of L3).
    pub nc: usize,
    /// Depth of the panels when A is one block (at most MC rows), see `Blocking::new`.
    pub kc_one_block: usize,
    /// Columns of the packed B block when A is one block (at most MC rows, a thin
    /// product): each B block is then swept once, right after its packing, so it is
    /// kept to half of L2 (it would come back from L3 otherwise), unless that cuts B's
    /// rows into pieces under a 4 KiB page; then NC.
    pub nc_one_block: usize,
    /// Depth of the blocks of a thin product (B at most four panels wide, A read in place
    /// whatever its size) of three or four B panels: each MR-row panel of A is then what
    /// stays in L1 across B's few panels, so KC is as deep as keeps it in two thirds of
    /// L1 with the packed KC x 4 NR of B in half of L2 (never under `kc`). A B of one
    /// or two panels runs four or two times as deep (`thin_kc` in the kernel).
    pub kc_thin_b: usize,
    /// Rows of a row-major B its packing reads side by side, each front to back, when
    /// the packed rows follow one another in memory (a block spanning B's whole rows):
    /// the block is then one stream. Any other B is read four rows side by side.
    pub pack_b_rows_one_stream: usize,
}

impl Blocking {
    /// BLIS-style sizes for an `mr x nr` micro-kernel on caches `c` of a `core`.
    ///
    /// ```
    /// use trueno::gemm::{Blocking, CacheSizes, CoreFamily};
    /// let zen5 = CacheSizes { l1: 48 << 10, l2: 1 << 20, l3: 32 << 20 };
    /// let b = Blocking::new(8, 32, zen5, CoreFamily::Zen);
    /// // A 512-deep panel from L2; the packed 256 x 512 A block is half of L2.
    /// assert_eq!((b.kc, b.mc, b.kc_one_block), (512, 256, 256));
    /// ```
    pub fn new(mr: usize, nr: usize, c: CacheSizes, core: CoreFamily) -> Blocking {
        // The KC x NR micro-panel of B is the one operand the micro-kernel re-reads from
        // L1 for every A panel, so it takes two thirds of L1 and the A panel streaming
        // past it the rest. Measured on the Sapphire Rapids VM (48 KiB L1), the 8x32
        // kernel alone on L1-resident panels: 137 GFLOP/s at KC 128 and 256 (the FMA
        // peak), 102-107 at KC 512, where the 64 KiB panel comes from L2; and in the
        // whole product at 512^3, KC 256 against 512: 0.97x against 0.85-0.90x faer.
        // Where two thirds of L1 cannot hold a 256-deep panel (32 KiB L1 and NR 32: the
        // Zen 4 VM), the panel comes from L2 at any depth that amortises the C tile's
        // update, and depth is all that is left to choose: KC 512 there (1024^3 0.95x ->
        // 0.99-1.00x faer, 2048^3 1.02x; 168, the L1 rule, ran 6-8% slower than 256, and
        // 768-1024 were within the noise of 512).
        //
        // A Zen core's L2 feeds the kernel a 512-deep panel even where L1 holds a 256-deep
        // one: on the Zen 5 VM (48 KiB L1, 1 MiB L2), interleaved against faer, KC 256 ->
        // 512 took 384^3 from 0.68-0.69x to 0.96x (k cut 256 + 128 at KC 256), 1024^3
        // 0.94-0.95x -> 0.97-0.98x in one pair of rounds (0.98-1.00x both in another),
        // 2048^3 0.99-1.02x -> 1.02-1.06x; KC 1024 ran within the noise of 512.
        let l1_depth = c.l1 * 2 / 3 / (nr * 4);
        let kc_l1 = if l1_depth >= 256 {
            l1_depth.min(512)
        } else {
            512
        } / 8
            * 8;
        let kc = match core {
            CoreFamily::Zen => 512,
            CoreFamily::Other => kc_l1,
        };
        // A one-block product (A at most MC rows) uses each B panel for few A panels and
        // packs B straight from memory when B is a layer's weights: there the L1 rule
        // holds on Zen too (Zen 5 VM, 32x4096x4096, three rounds: 121-124 GFLOP/s at KC
        // 256, 118-120 at 512).
        let kc_one_block = kc_l1;
        // The packed A block (MC x KC) takes half of L2, at most 512 KiB. Both measured
        // machines put their best block there: the Zen 4 VM (1 MiB L2, KC 512) at half
        // of L2, MC 256; the Emerald Rapids VM (2 MiB L2, KC 256) at MC 256-512, where
        // half of L2 (MC 1024) ran 0.84-0.89x faer at 1024^3-2048^3 against 0.90-1.00x
        // (our reading, not profiled: C's column band, a line pair per row at a
        // power-of-two stride, shares L2's sets with the block, and a VM's L2 may be
        // shared with another guest's sibling thread).
        let a_bytes = (c.l2 / 2).min(512 << 10);
        let mc = ((a_bytes / (kc * 4)) / mr * mr).clamp(mr, 1024 / mr * mr);
        let nc = ((c.l3 / 4 / (kc * 4)) / nr * nr).clamp(nr, 4096 / nr * nr);
        // Emerald Rapids VM (2 MiB L2, KC 256: 1024 columns), interleaved against faer
        // over three rounds, one and two threads: 8x4096x4096 0.88-0.94x -> 1.04-1.15x,
        // 32x4096x4096 0.74-0.81x -> 0.83-0.86x. On the Zen 4 VM (1 MiB L2, KC 512) the
        // half-L2 block is 256 columns, 1 KiB pieces of each row, and packing them ran at
        // half the speed of whole rows: NC stays there.
        let in_l2 = (c.l2 / 2 / (kc_one_block * 4)) / nr * nr;
        let nc_one_block = if in_l2 * 4 >= 4096 { in_l2.min(nc) } else { nc };
        // A thin product reads A in place, one run of KC floats from each of MR rows per
        // visit, rows often pages apart (a linear layer's W, 16-43 KiB); at KC 256 that
        // is a 1 KiB piece of a page per visit and the kernel waited on it. Emerald
        // Rapids VM, `x·Wᵀ` interleaved against faer, one thread (`TRUENO_GEMM_BLOCKS`,
        // two runs at 256, four at 1024): KC 256 -> 1024 took 32x4096x4096 from
        // 0.82-0.85x to 1.21-1.55x, 128x4096x11008 0.66-0.69x -> 0.81-0.99x,
        // 128x11008x4096 0.64-0.68x -> 0.89-1.00x (1536-2048, past the L1 rule: within
        // the noise of 1024).
        let thin_l1 = c.l1 * 2 / 3 / (mr * 4);
        let thin_l2 = c.l2 / 2 / (super::kernel::THIN_PANELS * nr * 4);
        let kc_thin_b = (thin_l1.min(thin_l2) / 64 * 64).max(kc);
        // A B block of whole rows is one stream through memory (64 MiB for 32x4096x4096).
        // On the Zen 5 VM, a lone loop packing it: one row after another 29-36 GB/s, two
        // or four side by side 22-24; in the product, alternated twice against faer:
        // 32x4096x4096 0.81-0.83x -> 1.07-1.09x, 128x4096x11008 0.92-0.94x -> 1.03-1.04x,
        // 1024^3 0.96-0.97x -> 0.97-0.98x. On the Emerald Rapids VM four side by side had
        // beaten whole rows one after another (see `pack_b`), so other cores keep four.
        let pack_b_rows_one_stream = match core {
            CoreFamily::Zen => 1,
            CoreFamily::Other => 4,
        };
        Blocking {
            mr,
            nr,
            kc,
            kc_one_block,
            mc,
            nc,
            nc_one_block,
            kc_thin_b,
            pack_b_rows_one_stream,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_sizes_parse_as_sysfs_writes_them_and_reject_the_rest() {
        let c = |l1, l2, l3| Some(CacheSizes { l1, l2, l3 });
        assert_eq!(
            CacheSizes::parse("48K,2048K,105M"),
            c(49152, 2097152, 110100480)
        );
        assert_eq!(
            CacheSizes::parse(" 32768 , 1m ,8M\n"),
            c(32768, 1048576, 8388608)
        );
        assert_eq!(CacheSizes::parse("64K,64K,64K"), c(65536, 65536, 65536));
        for bad in [
            "",
            "48K",
            "48K,2M",
            "48K,2M,105M,1G",
            "48K,2M,",
            "0,2M,105M",
            "2M,48K,105M",
            "48K,2M,1M",
            "48KB,2M,105M",
            "-1,2M,105M",
            "48K,2M,99999999999999999999M",
            "48K,2M,18014398509481984M",
        ] {
            assert_eq!(CacheSizes::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn block_sizes_are_multiples_of_the_micro_tile_and_fit_their_caches() {
        for c in [
            CacheSizes {
                l1: 32 << 10,
                l2: 256 << 10,
                l3: 8 << 20,
            },
            CacheSizes {
                l1: 48 << 10,
                l2: 2 << 20,
                l3: 105 << 20,
            },
            CacheSizes {
                l1: 64 << 10,
                l2: 512 << 10,
                l3: 32 << 20,
            },
        ] {
            for (mr, nr) in [(14, 32), (6, 16), (4, 8), (4, 4)] {
                let b = Blocking::new(mr, nr, c, CoreFamily::Other);
                let zen = Blocking::new(mr, nr, c, CoreFamily::Zen);
                // A Zen core: the 512-deep panel, the same one-block depth and MC for
                // its deeper block.
                assert_eq!(zen.kc, 512, "{zen:?}");
                assert_eq!(zen.kc_one_block, b.kc_one_block, "{zen:?}");
                assert!(
                    zen.mc * zen.kc * 4 <= (c.l2 / 2).min(512 << 10).max(mr * 512 * 4),
                    "{zen:?}"
                );
                assert_eq!(b.kc_one_block, b.kc, "{b:?}");
                assert_eq!(b.mc % mr, 0, "{b:?}");
                assert_eq!(b.nc % nr, 0, "{b:?}");
                assert!(
                    b.nc_one_block.is_multiple_of(nr) && b.nc_one_block <= b.nc,
                    "{b:?}"
                );
                assert!(
                    b.kc >= 256 && b.kc <= 512 && b.kc.is_multiple_of(8),
                    "{b:?}"
                );
                // The thin depth: never shallower than KC; deeper only as far as an A
                // panel fits two thirds of L1 and four packed B panels half of L2.
                assert!(
                    b.kc_thin_b >= b.kc && b.kc_thin_b.is_multiple_of(8),
                    "{b:?}"
                );
                assert!(
                    b.kc_thin_b == b.kc
                        || (b.kc_thin_b * b.mr * 4 <= c.l1 * 2 / 3
                            && b.kc_thin_b * 4 * b.nr * 4 <= c.l2 / 2),
                    "{b:?}"
                );
                // A panel two thirds of L1 holds, or the full 512 where it cannot hold 256.
                let panel = b.kc * b.nr * 4;
                assert!(
                    panel <= c.l1 * 2 / 3 || (b.kc == 512 && 256 * b.nr * 4 > c.l1 * 2 / 3),
                    "{b:?}"
                );
                assert!(
                    b.mc * b.kc * 4 <= (c.l2 / 2).min(512 << 10).max(b.mr * b.kc * 4),
                    "{b:?}"
                );
            }
        }
        let d = CacheSizes::detect();
        assert!(d.l1 >= 4096 && d.l2 >= d.l1 && d.l3 >= d.l2, "{d:?}");
    }

    #[test]
    fn block_sizes_of_the_measured_machines() {
        // Zen 4 VM: 32 KiB L1 cannot keep a 256-deep 32-wide panel, so KC 512; MC fills
        // half of the 1 MiB L2 (512 KiB / (512 * 4 B)).
        let zen4 = CacheSizes {
            l1: 32 << 10,
            l2: 1 << 20,
            l3: 32 << 20,
        };
        for core in [CoreFamily::Zen, CoreFamily::Other] {
            let b = Blocking::new(8, 32, zen4, core);
            assert_eq!((b.kc, b.mc, b.nc, b.nc_one_block), (512, 256, 4096, 4096));
            assert_eq!(b.kc_one_block, 512);
        }
        let b = Blocking::new(8, 32, zen4, CoreFamily::Zen);
        // A thin product's depth: an 8-row A panel in two thirds of 32 KiB, 640 deep.
        assert_eq!(b.kc_thin_b, 640);
        // Sapphire and Emerald Rapids VMs: 48 KiB L1 holds 256 x 32 in two thirds; the
        // A block's 512 KiB cap gives MC 512 (2 MiB L2; half of it would be 1024).
        for l3 in [105 << 20, 260 << 20] {
            let rapids = CacheSizes {
                l1: 48 << 10,
                l2: 2 << 20,
                l3,
            };
            let b = Blocking::new(8, 32, rapids, CoreFamily::Other);
            // A thin product's B block: 256 x 1024, half of the 2 MiB L2.
            assert_eq!((b.kc, b.mc, b.nc, b.nc_one_block), (256, 512, 4096, 1024));
            // Thin: an 8 x 1024 A panel is two thirds of 48 KiB; 1024 x 128 of B, 512 KiB.
            assert_eq!(b.kc_thin_b, 1024);
        }
        // Zen 5 VM: 48 KiB L1 holds the 256-deep panel, but a Zen core takes 512 (MC 256
        // for the 512 KiB block); a one-block product keeps 256, whose half-L2 block of
        // B (512 columns) would cut rows under a page, so NC.
        let zen5 = CacheSizes {
            l1: 48 << 10,
            l2: 1 << 20,
            l3: 32 << 20,
        };
        let b = Blocking::new(8, 32, zen5, CoreFamily::Zen);
        assert_eq!((b.kc, b.kc_one_block, b.mc, b.nc), (512, 256, 256, 4096));
        assert_eq!((b.nc_one_block, b.kc_thin_b), (4096, 1024));
    }

    #[test]
    fn the_core_family_matches_the_kernels_vendor_id() {
        // Linux's /proc/cpuinfo, read independently of cpuid here.
        let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
            return;
        };
        let amd = info
            .lines()
            .find(|l| l.starts_with("vendor_id"))
            .is_some_and(|l| l.contains("AuthenticAMD"));
        let want = if amd && cfg!(target_arch = "x86_64") {
            CoreFamily::Zen
        } else {
            CoreFamily::Other
        };
        assert_eq!(CoreFamily::detect(), want);
    }
}
