//! A caching allocator: freed device blocks go to size-bucketed free lists and are handed
//! out again, so steady-state inference allocates nothing from the driver.

use std::collections::BTreeMap;

use crate::driver::ffi;

/// Block sizes: powers of two up to 1 MiB, then multiples of 2 MiB.
pub(crate) fn block_size(bytes: usize) -> usize {
    const MIB: usize = 1 << 20;
    if bytes <= MIB {
        bytes.max(256).next_power_of_two()
    } else {
        bytes.div_ceil(2 * MIB) * 2 * MIB
    }
}

/// What the pool holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Bytes obtained from the driver and not yet returned (live + idle blocks).
    pub reserved_bytes: usize,
    /// Bytes of blocks backing live buffers.
    pub in_use_bytes: usize,
    /// Bytes the live buffers asked for (at most `in_use_bytes`).
    pub requested_bytes: usize,
    /// Bytes in idle blocks waiting for reuse.
    pub idle_bytes: usize,
    /// Idle blocks.
    pub idle_blocks: usize,
    /// Allocations served from an idle block.
    pub hits: u64,
    /// Allocations that went to the driver.
    pub misses: u64,
}

impl PoolStats {
    /// Share of reserved memory not holding requested data: idle blocks plus rounding
    /// waste inside live blocks. 0 when nothing is reserved.
    pub fn fragmentation(&self) -> f64 {
        if self.reserved_bytes == 0 {
            return 0.0;
        }
        let waste = self.idle_bytes + (self.in_use_bytes - self.requested_bytes);
        waste as f64 / self.reserved_bytes as f64
    }
}

/// Free lists by block size.
#[derive(Debug, Default)]
pub(crate) struct Pool {
    free: BTreeMap<usize, Vec<ffi::CuDevicePtr>>,
    pub(crate) stats: PoolStats,
}

impl Pool {
    /// An idle block of at least `block` bytes and at most twice that, if any.
    pub(crate) fn take(
        &mut self,
        block: usize,
        requested: usize,
    ) -> Option<(ffi::CuDevicePtr, usize)> {
        let (&size, list) = self
            .free
            .range_mut(block..=block * 2)
            .find(|(_, l)| !l.is_empty())?;
        let ptr = list.pop()?;
        self.stats.idle_bytes -= size;
        self.stats.idle_blocks -= 1;
        self.stats.in_use_bytes += size;
        self.stats.requested_bytes += requested;
        self.stats.hits += 1;
        Some((ptr, size))
    }

    /// Records a fresh driver allocation.
    pub(crate) fn note_new(&mut self, block: usize, requested: usize) {
        self.stats.reserved_bytes += block;
        self.stats.in_use_bytes += block;
        self.stats.requested_bytes += requested;
        self.stats.misses += 1;
    }

    /// Returns a live block.
    pub(crate) fn give(&mut self, ptr: ffi::CuDevicePtr, block: usize, requested: usize) {
        self.stats.in_use_bytes -= block;
        self.stats.requested_bytes -= requested;
        self.stats.idle_bytes += block;
        self.stats.idle_blocks += 1;
        self.free.entry(block).or_default().push(ptr);
    }

    /// Frees every idle block back to the driver (context must be current).
    pub(crate) fn release_all(&mut self) {
        for (size, list) in std::mem::take(&mut self.free) {
            for p in list {
                // SAFETY: `p` came from cuMemAlloc in this context and is idle.
                let _ = unsafe { ffi::cuMemFree_v2(p) };
                self.stats.reserved_bytes -= size;
            }
        }
        self.stats.idle_bytes = 0;
        self.stats.idle_blocks = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_sizes_round_up_and_cover_the_request() {
        for bytes in [
            1,
            255,
            256,
            257,
            4096,
            1 << 20,
            (1 << 20) + 1,
            3 << 21,
            100_000_000,
        ] {
            let b = block_size(bytes);
            assert!(b >= bytes, "{bytes} -> {b}");
            assert!(
                b <= 2 * bytes.max(256) || b - bytes < 2 << 20,
                "{bytes} -> {b}"
            );
        }
        assert_eq!(block_size(1000), 1024);
        assert_eq!(block_size(3 << 20), 4 << 20);
    }

    #[test]
    fn idle_blocks_are_reused_and_counted() {
        let mut p = Pool::default();
        p.note_new(1024, 1000);
        p.give(0xA000, 1024, 1000);
        assert_eq!(p.stats.idle_bytes, 1024);
        assert!((p.stats.fragmentation() - 1.0).abs() < 1e-12);
        // A 4 KiB block is not handed out for a 1 KiB request (more than twice).
        assert!(p.take(512, 500).is_some());
        assert_eq!(p.stats.hits, 1);
        assert_eq!(p.stats.in_use_bytes, 1024);
        assert_eq!(p.stats.requested_bytes, 500);
        assert!((p.stats.fragmentation() - 524.0 / 1024.0).abs() < 1e-12);
        assert!(p.take(512, 500).is_none());
        p.give(0xA000, 1024, 500);
        assert!(
            p.take(256, 200).is_none(),
            "a block over twice the request stays idle"
        );
    }
}
