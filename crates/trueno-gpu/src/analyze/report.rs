//! The measurements of one kernel: registers, pressure and occupancy, instruction mix,
//! memory accesses with their coalescing and bank-conflict estimates, and arithmetic
//! intensity against a device's roofline.

use std::collections::BTreeMap;

use super::arch::Arch;
use super::ast::{Function, Pos, Space};
use super::flow::Flow;
use super::isa::{self, Access};
use super::values::{Val, Values};
use crate::ptx::cfg::BitSet;

/// Registers: declared, used, and the most live at once.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RegisterReport {
    /// Declared registers per type (`f32` -> 12), ranges counted whole.
    pub declared: BTreeMap<String, u32>,
    /// Registers the body mentions, per type.
    pub used: BTreeMap<String, u32>,
    /// Most 32-bit register slots live at one instruction (64-bit values count 2).
    pub max_live: u32,
    /// Where that maximum is reached.
    pub max_live_at: Pos,
    /// Most predicates live at one instruction.
    pub max_live_predicates: u32,
    /// The estimate of what ptxas will allocate: `max_live` plus [`REGISTER_OVERHEAD`],
    /// at most the architecture's per-thread limit.
    pub estimated: u32,
}

/// Registers ptxas needs beyond the PTX values live at once (address arithmetic it
/// rematerialises, and the registers it reserves), in the estimate that
/// [`RegisterReport::estimated`] gives.
pub const REGISTER_OVERHEAD: u32 = 4;

/// How a warp's 32 lanes address memory at one instruction.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case", tag = "kind"))]
pub enum Pattern {
    /// Every lane the same address (one transaction, a broadcast).
    Uniform,
    /// Consecutive lanes, consecutive elements.
    Coalesced,
    /// A fixed distance between lanes other than the element size.
    Strided {
        /// Bytes from one lane's address to the next.
        bytes_per_lane: i64,
    },
    /// Not a form the analysis follows (data-dependent, or not affine in the lane).
    Irregular,
}

/// One memory access.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct MemAccess {
    /// Where.
    pub pos: Pos,
    /// Read, write or atomic.
    pub access: Access,
    /// The state space (a generic access whose address is known to be shared or global is
    /// counted there).
    pub space: Space,
    /// Bytes per thread.
    pub bytes: u64,
    /// How the warp's lanes address it.
    pub pattern: Pattern,
    /// For global accesses: bytes used over bytes moved in 32-byte sectors (1.0 is ideal).
    pub sector_efficiency: Option<f64>,
    /// For shared accesses: the worst number of distinct words one bank serves (1 = no
    /// conflict).
    pub bank_ways: Option<u32>,
    /// Loop nesting depth (the weight it gets in the intensity estimate).
    pub loop_depth: u32,
}

impl MemAccess {
    /// Device memory: `.global`, or a generic address not known to be shared or local.
    pub fn is_global(&self) -> bool {
        matches!(self.space, Space::Global | Space::Generic)
    }
}

/// Loads, stores and bytes per space (static counts).
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct SpaceTotals {
    /// Load instructions.
    pub loads: u32,
    /// Store instructions.
    pub stores: u32,
    /// Atomics and reductions.
    pub atomics: u32,
    /// Bytes per thread over all of them, once each.
    pub bytes: u64,
}

/// Arithmetic intensity and where the kernel sits on a roofline.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Intensity {
    /// Floating-point operations per thread, loop bodies weighted.
    pub flops: f64,
    /// Global-memory bytes per thread, loop bodies weighted alike.
    pub global_bytes: f64,
    /// `flops / global_bytes`.
    pub flops_per_byte: f64,
    /// The device's ridge point (peak FLOP/s over bandwidth).
    pub ridge: f64,
    /// `memory-bound`, `compute-bound`, or `no global memory`.
    pub class: &'static str,
}

/// Weight of a block nested `depth` loops deep (a static trip-count guess).
pub const LOOP_WEIGHT: f64 = 16.0;

/// The peak the roofline is drawn with.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Device {
    /// Peak floating-point rate, FLOP/s.
    pub peak_flops: f64,
    /// Memory bandwidth, bytes/s.
    pub bandwidth: f64,
}

impl Default for Device {
    /// H100 SXM: 66.9 TFLOP/s FP32 (non-tensor), 3.35 TB/s HBM3.
    fn default() -> Self {
        Device {
            peak_flops: 66.9e12,
            bandwidth: 3.35e12,
        }
    }
}

/// Registers declared and used, and the liveness maximum.
pub fn registers(f: &Function, flow: &Flow, arch: &Arch) -> RegisterReport {
    let mut declared = BTreeMap::new();
    for d in &f.regs {
        *declared.entry(d.ty.clone()).or_insert(0) += d.range.unwrap_or(1);
    }
    let mut used = BTreeMap::new();
    for t in &flow.regs.types {
        *used.entry(t.clone()).or_insert(0) += 1;
    }
    // One mask per register width, so a live set's size is a few popcounts.
    let n = flow.regs.len();
    let mut masks: BTreeMap<u32, BitSet> = BTreeMap::new();
    let mut pred_mask = BitSet::new(n);
    for r in 0..n {
        if flow.regs.is_pred[r] {
            pred_mask.insert(r);
        } else {
            masks
                .entry(flow.regs.slots[r])
                .or_insert_with(|| BitSet::new(n))
                .insert(r);
        }
    }
    let (mut max_live, mut max_at, mut max_pred) = (0u32, f.pos, 0u32);
    flow.walk_live(|k, live| {
        if !flow.reachable[flow.block_of[k]] {
            return;
        }
        let mut slots: u32 = masks.iter().map(|(w, m)| w * live.count_and(m)).sum();
        let preds = live.count_and(&pred_mask);
        // The instruction's own results occupy registers while it issues.
        for &d in &flow.defs[k] {
            if !live.contains(d as usize) {
                slots += flow.regs.slots[d as usize];
            }
        }
        if slots > max_live {
            max_live = slots;
            max_at = flow.instrs[k].pos;
        }
        max_pred = max_pred.max(preds);
    });
    RegisterReport {
        declared,
        used,
        max_live,
        max_live_at: max_at,
        max_live_predicates: max_pred,
        estimated: (max_live + REGISTER_OVERHEAD).min(arch.max_regs_per_thread),
    }
}

/// Instruction classes and their static counts, most frequent first.
pub fn mix(flow: &Flow) -> Vec<(&'static str, u32)> {
    let mut counts: BTreeMap<&'static str, u32> = BTreeMap::new();
    for i in &flow.instrs {
        *counts.entry(isa::class(i)).or_insert(0) += 1;
    }
    let mut v: Vec<_> = counts.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    v
}

/// Every memory access with its pattern.
pub fn accesses(flow: &Flow, values: &Values) -> Vec<MemAccess> {
    let mut out = Vec::new();
    for (k, ins) in flow.instrs.iter().enumerate() {
        for m in isa::memory(ins) {
            let space = match (m.space, m.base.map(|b| values.provenance(flow, k, b))) {
                (Space::Generic, Some(super::values::Prov::SharedGeneric)) => Space::Shared,
                (Space::Generic, Some(super::values::Prov::Local)) => Space::Local,
                (s, _) => s,
            };
            let val = m.base.map_or(Val::Uniform, |b| values.name(flow, k, b));
            let pattern = match val {
                Val::Const(_) | Val::Uniform | Val::WarpUniform => Pattern::Uniform,
                Val::Affine(c) if c.unsigned_abs() == m.bytes => Pattern::Coalesced,
                Val::Affine(c) => Pattern::Strided { bytes_per_lane: c },
                Val::Bottom | Val::Divergent => Pattern::Irregular,
            };
            let stride = match pattern {
                Pattern::Uniform => Some(0),
                Pattern::Coalesced | Pattern::Strided { .. } => match val {
                    Val::Affine(c) => Some(c),
                    _ => None,
                },
                Pattern::Irregular => None,
            };
            let global = matches!(space, Space::Global | Space::Generic);
            out.push(MemAccess {
                pos: ins.pos,
                access: m.access,
                space,
                bytes: m.bytes,
                pattern,
                sector_efficiency: stride
                    .filter(|_| global && m.bytes > 0)
                    .map(|c| sector_efficiency(c, m.bytes)),
                bank_ways: stride
                    .filter(|_| space == Space::Shared && m.bytes > 0)
                    .map(|c| bank_ways(c, m.bytes)),
                loop_depth: flow.loop_depth[flow.block_of[k]],
            });
        }
    }
    out
}

/// Useful bytes over bytes in the 32-byte sectors 32 lanes touch, `stride` bytes apart.
pub fn sector_efficiency(stride: i64, bytes: u64) -> f64 {
    let mut sectors: Vec<i64> = Vec::new();
    for lane in 0..32i64 {
        let start = lane.wrapping_mul(stride);
        let end = start.saturating_add(bytes.min(1 << 20) as i64 - 1);
        sectors.extend(start.div_euclid(32)..=end.div_euclid(32));
    }
    sectors.sort_unstable();
    sectors.dedup();
    let used = if stride == 0 { bytes } else { 32 * bytes };
    (used as f64 / (sectors.len() as f64 * 32.0)).min(1.0)
}

/// The worst bank conflict of 32 lanes accessing `bytes` each, `stride` bytes apart: the
/// warp is served in phases (32 lanes for 4-byte accesses, 16 for 8, 8 for 16), and within
/// a phase a bank serving k distinct words takes k passes.
pub fn bank_ways(stride: i64, bytes: u64) -> u32 {
    bank_ways_at(|lane| lane.wrapping_mul(stride), bytes)
}

/// [`bank_ways`] for any placement: lane `l` accesses `bytes` at byte `at(l)` (a tile's
/// fragment loads, where lane `4g + t` reads row `g` at column `t`).
///
/// ```
/// use trueno_gpu::analyze::report::bank_ways_at;
///
/// // Lane 4g + t reads 8 bytes at 8t of row g, rows 272 bytes apart: 2-way; 288: 1.
/// assert_eq!(bank_ways_at(|l| (l / 4) * 272 + 8 * (l % 4), 8), 2);
/// assert_eq!(bank_ways_at(|l| (l / 4) * 288 + 8 * (l % 4), 8), 1);
/// ```
pub fn bank_ways_at(at: impl Fn(i64) -> i64, bytes: u64) -> u32 {
    let lanes_per_phase = (128 / bytes.clamp(4, 16)) as i64;
    let mut worst = 1;
    for phase in 0..32 / lanes_per_phase {
        let mut words: Vec<(i64, i64)> = Vec::new(); // (bank, word)
        for lane in phase * lanes_per_phase..(phase + 1) * lanes_per_phase {
            let first = at(lane).div_euclid(4);
            for w in first..first + bytes.div_ceil(4) as i64 {
                words.push((w.rem_euclid(32), w));
            }
        }
        words.sort_unstable();
        words.dedup();
        let mut per_bank = [0u32; 32];
        for (bank, _) in words {
            per_bank[bank as usize] += 1;
        }
        worst = worst.max(per_bank.into_iter().max().unwrap_or(1));
    }
    worst
}

/// Arithmetic intensity, loop bodies weighted by [`LOOP_WEIGHT`] per level.
pub fn intensity(flow: &Flow, accesses: &[MemAccess], device: &Device) -> Intensity {
    let weight = |depth: u32| LOOP_WEIGHT.powi(depth.min(4) as i32);
    let flops: f64 = flow
        .instrs
        .iter()
        .enumerate()
        .map(|(k, i)| isa::flops(i) * weight(flow.loop_depth[flow.block_of[k]]))
        .sum();
    let global_bytes: f64 = accesses
        .iter()
        .filter(|a| a.is_global())
        .map(|a| a.bytes as f64 * weight(a.loop_depth))
        .sum();
    let ridge = device.peak_flops / device.bandwidth;
    let flops_per_byte = if global_bytes > 0.0 {
        flops / global_bytes
    } else {
        0.0
    };
    Intensity {
        flops,
        global_bytes,
        flops_per_byte,
        ridge,
        class: if global_bytes == 0.0 {
            "no global memory"
        } else if flops_per_byte < ridge {
            "memory-bound"
        } else {
            "compute-bound"
        },
    }
}

/// Per-space totals of `accesses`.
pub fn totals(accesses: &[MemAccess]) -> BTreeMap<Space, SpaceTotals> {
    let mut t: BTreeMap<Space, SpaceTotals> = BTreeMap::new();
    for a in accesses {
        let e = t.entry(a.space).or_default();
        match a.access {
            Access::Load => e.loads += 1,
            Access::Store => e.stores += 1,
            Access::Atomic => e.atomics += 1,
        }
        e.bytes += a.bytes;
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sector_efficiency_of_common_strides() {
        assert_eq!(sector_efficiency(4, 4), 1.0); // 128 bytes in 4 sectors
        assert_eq!(sector_efficiency(16, 16), 1.0);
        assert_eq!(sector_efficiency(8, 4), 0.5);
        assert_eq!(sector_efficiency(128, 4), 4.0 / 32.0); // a sector per lane
        assert_eq!(sector_efficiency(0, 4), 4.0 / 32.0); // one sector, 4 bytes used
    }

    /// Worked examples from the CUDA programming guide's shared-memory section.
    #[test]
    fn bank_conflicts_of_classic_strides() {
        assert_eq!(bank_ways(4, 4), 1); // unit stride
        assert_eq!(bank_ways(8, 4), 2); // stride 2 words: two-way
        assert_eq!(bank_ways(12, 4), 1); // odd stride: conflict-free
        assert_eq!(bank_ways(128, 4), 32); // a column of a 32-wide float tile
        assert_eq!(bank_ways(132, 4), 1); // the padded tile (33 floats per row)
        assert_eq!(bank_ways(0, 4), 1); // broadcast
        assert_eq!(bank_ways(8, 8), 1); // doubles, unit stride: two phases, no conflict
        assert_eq!(bank_ways(16, 16), 1); // float4, unit stride
        assert_eq!(bank_ways(32, 16), 2); // float4 every other slot
    }

    #[test]
    fn extreme_strides_do_not_overflow() {
        for stride in [i64::MAX, i64::MIN, 1 << 62, -(1 << 62), -4] {
            assert!(bank_ways(stride, 16) >= 1);
            assert!(sector_efficiency(stride, 16) > 0.0);
        }
    }
}
