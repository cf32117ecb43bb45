//! trueno's kernels where the PTX analyzer's findings or register estimate depart from
//! ptxas on purpose, each with its reason (tests/analyze.rs holds the tests).

/// Findings on trueno's own kernels (by name prefix and suffix) that are true and
/// intended: the tiled GEMMs (128 x 128 and the sliced 64 x 128) hold an 8x8
/// accumulator block per thread (ptxas allocates 118-128 registers, occupancy 12.5% at
/// 256 threads) and keep ten bounds predicates live across their tile loads; FlashAttention holds 32 rows' output (up to 128 f32 per
/// thread) and scores in registers, as FlashAttention-2 does, and runs two blocks of four
/// warps per SM where shared memory allows; the fused quantized GEMM's 256-row tile holds
/// 128 accumulators a consumer thread, more than 512 threads' even share, and moves
/// registers from its producers with `setmaxnreg` (which the estimate does not model;
/// ptxas assembles it without spills, and tests/sass_hopper.rs proves the split in the SASS),
/// and so does Hopper's TF32 GEMM with a row-major B at 256-row tiles (128 accumulators
/// and two sets of 16 fragment values a consumer thread);
/// Hopper's FlashAttention holds a warpgroup's scores, output and probabilities in
/// registers with one block a multiprocessor (its shared memory allows no second; the
/// estimate runs above ptxas, which fits 156-204 registers without spills);
/// decode attention's blocks of several query heads keep each head's query slice and
/// accumulators in registers (reading each cache row once for all of them was worth the
/// occupancy: 32K bf16 105 -> 78 us on an H100); its tensor-core kernel holds 16 heads'
/// output a warp, shared memory its limit anyway (three blocks a SM at 64-128); the
/// integer tensor-core batch kernels of 16 and 32 vectors keep two or four tiles' sums a
/// lane against each unpacked weight fragment (the staged formats' shared memory allows
/// one block a multiprocessor at those widths anyway); Q4_K's one-vector tensor-core
/// kernel asks for four blocks a multiprocessor (`.minnctapersm 4`; two of sixteen warps
/// for its `_w16` form), and ptxas fits it in 64 registers without spills where the
/// estimate, which keeps a super-block's loaded words live beside each step's masked
/// fragments, says 81 ([`scheduled_apart`]; Q5_K's, at 128, needs no exception); Q6_K's
/// asks for two or three (`_b2`, `_b3`), its pass's loads (24 to 36 words a lane) all
/// before its products, and ptxas fits the three blocks' cap of 80 registers without
/// spills where the estimate says 95.
pub const INTENDED: &[(&str, &str, &str)] = &[
    ("trueno_decode_attn_", "_h2", "register-pressure"),
    ("trueno_decode_attn_", "_h4", "register-pressure"),
    ("trueno_decode_attn_", "_h8", "register-pressure"),
    ("trueno_decode_attn_mma_", "", "register-pressure"),
    ("trueno_gemm_tiled_", "_f32", "register-pressure"),
    ("trueno_gemm_tiled_", "_f32", "predicate-limit"),
    ("trueno_flash_attn_fwd_", "", "register-pressure"),
    ("trueno_flash_attn_wgmma_", "", "register-pressure"),
    ("trueno_qgemm_wgmma_", "_m256", "register-pressure"),
    ("trueno_gemm_wgmma_tf32_kn_", "_r256", "register-pressure"),
    ("trueno_qgemv_", "_q8k_mma16", "register-pressure"),
    ("trueno_qgemv_", "_q8k_mma32", "register-pressure"),
    ("trueno_qgemv_q4_k_q8k_mma1", "", "register-pressure"),
    ("trueno_qgemv_q6_k_q8k_mma1", "", "register-pressure"),
];

/// Which way a kernel's register estimate may stray from ptxas's count without bound
/// (the other way stays within the margin).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stray {
    /// The estimate above ptxas ([`scheduled_apart`]).
    EstimateAbove,
    /// ptxas above the estimate ([`spends_free_registers`]).
    PtxasAbove,
}

/// The kernels whose estimate may stray one way, which way, and why.
pub fn one_sided(name: &str) -> Option<(Stray, &'static str)> {
    if spends_free_registers(name) {
        return Some((Stray::PtxasAbove, "one block a multiprocessor"));
    }
    scheduled_apart(name).map(|why| (Stray::EstimateAbove, why))
}

/// Kernels whose loads ptxas moves next to their uses, below what the PTX keeps live:
/// Q5_K's one-vector integer product issues two steps' weight loads (its fifth bits too)
/// and activation loads together (the estimate 79), ptxas spreads them through the
/// steps' math (51 registers on sm_80, 59 on sm_90; the other formats' products, and the
/// float-activation ones, now fall within the margin: 2026-11-28, ptxas from the CUDA 13
/// wheel); decode attention's chunk kernels a step's cache rows' keys and values (paged:
/// up to 19 registers under the estimate; contiguous at 16 lanes a row: 13 at d64 bf16),
/// and their merge a round's splits (14 at d128). There the estimate need only not fall
/// short of ptxas by more than the margin.
fn scheduled_apart(name: &str) -> Option<&'static str> {
    if name == "trueno_qgemv_q5_k_q8k" {
        return Some("ptxas sinks the loads to their uses");
    }
    // Four steps' headers and activations, loaded after the pin, each step's beside its
    // math (L1 hits).
    if name == "trueno_qgemv_q4_k_q8k_wide" {
        return Some("ptxas sinks the header and activation loads to their uses");
    }
    // Q4_K's and Q5_K's eight-vector tensor-core batches (activations direct or
    // staged): every weight load of a super-block pinned (SASS: all LDG before the first
    // IMMA), but ptxas writes each product over its A fragment's registers (`IMMA R40,
    // R40.ROW`), where the estimate keeps both (93-97 against 72-80 registers).
    let eight = ["mma", "mma_staged"];
    if ["q4_k", "q5_k"].iter().any(|f| {
        eight
            .iter()
            .any(|e| name == format!("trueno_qgemv_{f}_q8k_{e}"))
    }) {
        return Some("ptxas writes the products over their A fragments");
    }
    // A step's rows' key and value loads issued together (paged: each row's address from
    // its page; contiguous: 16-byte loads where 16 lanes share a row).
    // Q4_K's one-vector tensor-core kernel: each step's masked A and B fragments made
    // beside its product, under the cap of 64 registers (81 estimated) at either width.
    if name.starts_with("trueno_qgemv_q4_k_q8k_mma1") {
        return Some("ptxas masks each step's fragments beside its product, at its cap");
    }
    // Q6_K's copy-engine form at four blocks a multiprocessor: its pieces read from
    // shared memory next to their products under the cap of 64 registers (96 estimated;
    // no spill, tests/ptxas.rs).
    if name == "trueno_qgemv_q6_k_q8k_mma1_b4_bulk_s1" {
        return Some("ptxas reads each piece from shared memory beside its product, at its cap");
    }
    (name.starts_with("trueno_decode_attn_") || name.starts_with("trueno_decode_merge_"))
        .then_some("ptxas sinks the value loads to their uses")
}

/// Kernels that promise one block a multiprocessor (`.minnctapersm 1`, where their
/// shared memory allows no second): ptxas hoists shared-memory loads into the registers
/// that leaves free (the 32-vector staged tensor-core batches: 154-219 registers against
/// an estimate of 136-151).
fn spends_free_registers(name: &str) -> bool {
    ["q6_k", "q8_0", "q4_0"]
        .iter()
        .any(|f| name == format!("trueno_qgemv_{f}_q8k_mma32"))
}
