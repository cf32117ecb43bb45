//! The Hopper (sm_90a) kernels in machine code (the ptxas / cuobjdump wheel, as
//! `ptxas.rs`): warpgroup products (HGMMA) from the copy engine's tiles (UTMALDG) on
//! transaction barriers, the register split between producer and consumer warpgroups,
//! no serialized products, and the staged epilogue. Without the tools the tests say so
//! and pass, unless `TRUENO_REQUIRE_PTXAS=1` (CI sets it).

mod common;
use common::sass::{Sass, assert_staged_epilogue, assert_staged_epilogues, assert_staged_stores};

use trueno_gpu::ptx::Target;

/// The Hopper GEMM's machine code (sm_90a, cuobjdump): its products are warpgroup
/// products (HGMMA of the tile's width: k16 for 16-bit inputs, k8 TF32 for f32), its
/// tiles arrive by the copy engine (UTMALDG, one box of A and `BN / 64` of 16-bit B, or
/// one of a `Bᵀ`, per k-tile) on transaction barriers (SYNCS), the warpgroups trade
/// registers (USETMAXREG), and no mma.sync path (HMMA) is left.
#[test]
fn the_hopper_gemm_runs_on_warpgroup_products_and_the_copy_engine() {
    let Some(sass) = Sass::find() else { return };
    use trueno_gpu::kernels::float_type::FloatType;
    use trueno_gpu::kernels::gemm_mma::{GemmInput, HalfType};
    use trueno_gpu::kernels::gemm_wgmma::{WgmmaGemmKernel, WgmmaTileN};
    for input in GemmInput::ALL {
        for (tn, out) in WgmmaTileN::ALL
            .into_iter()
            .flat_map(|tn| FloatType::ALL.map(|out| (tn, out)))
        {
            let k = WgmmaGemmKernel(input, tn, out);
            let (stem, code) = sass.of(&k, Target::Sm90a);
            let count = |op: &str| code.matches(op).count();
            let hgmma = format!(
                "HGMMA.64x{}x{}",
                tn.elems(),
                match input {
                    GemmInput::Half(HalfType::Bf16) | GemmInput::HalfBt(HalfType::Bf16) => {
                        "16.F32.BF16"
                    }
                    GemmInput::Half(HalfType::F16) | GemmInput::HalfBt(HalfType::F16) => {
                        "16.F32 "
                    }
                    GemmInput::Tf32 | GemmInput::Tf32Kn => "8.F32.TF32",
                }
            );
            // Four products per 128-byte k-tile.
            assert!(
                count(&hgmma) >= 4,
                "{stem}: {} {hgmma}\n{code}",
                count(&hgmma)
            );
            let boxes = match input.b_k_major() {
                true => 2,
                false => 1 + tn.elems() as usize / 64,
            };
            assert!(
                count("UTMALDG.2D") >= boxes,
                "{stem}: {} copy-engine loads",
                count("UTMALDG")
            );
            assert!(count("SYNCS.PHASECHK") >= 2, "{stem}: no barrier waits");
            assert!(count("USETMAXREG") >= 2, "{stem}: no register split");
            assert_eq!(
                count("HMMA"),
                0,
                "{stem}: an mma.sync product on the wgmma path"
            );
            assert_staged_epilogue(&stem, &code, out, tn.elems() as usize);
        }
    }
}

/// Hopper's TF32 GEMM with a row-major B in machine code (sm_90a): its products are
/// warpgroup products `m64nRk8` TF32 with A (B's values) from registers (`HGMMA.. Rd,
/// Ra, gdesc..`), four a k-tile in each of the paired loop's two steps and the odd
/// tile's; the values arrive by plain 32-bit shared loads (16 a k-tile); A's box and
/// B's four by the copy engine; the products are not serialized (one `wait_group` a
/// k-tile and the last: a WARPGROUP.DEPBAR after each product would mean ptxas saw a
/// fragment rewritten while read); the accumulators staged one at a time (STS) and
/// stored as the other GEMMs' (16-byte reads, two stores a loop step).
#[test]
fn the_hopper_tf32_gemm_with_a_row_major_b_takes_its_values_from_registers() {
    let Some(sass) = Sass::find() else { return };
    use trueno_gpu::kernels::float_type::FloatType;
    use trueno_gpu::kernels::gemm_wgmma::WgmmaTileN;
    use trueno_gpu::kernels::gemm_wgmma_kn::WgmmaTf32KnKernel;
    for (tile, out) in WgmmaTileN::ALL
        .into_iter()
        .flat_map(|t| FloatType::ALL.map(|out| (t, out)))
    {
        let k = WgmmaTf32KnKernel(tile, out);
        let r = tile.elems() as usize;
        let (stem, code) = sass.of(&k, Target::Sm90a);
        let count = |op: &str| code.matches(op).count();
        let hgmma = format!("HGMMA.64x{r}x8.F32.TF32");
        let from_regs = code
            .lines()
            .filter(|l| l.contains(&hgmma))
            .filter(|l| {
                let ops: Vec<&str> = l.split(", ").collect();
                ops.len() > 2 && ops[1].trim_start().starts_with('R')
            })
            .count();
        assert_eq!(count(&hgmma), 12, "{stem}\n{code}");
        assert_eq!(from_regs, 12, "{stem}: products with A not from registers");
        assert_eq!(count("LDS "), 48, "{stem}: fragment loads");
        assert_eq!(count("WARPGROUP.DEPBAR"), 4, "{stem}: serialized products");
        assert!(
            count("UTMALDG.2D") >= 5,
            "{stem}: {} copies",
            count("UTMALDG")
        );
        assert!(count("SYNCS.PHASECHK") >= 2, "{stem}: no barrier waits");
        assert!(count("USETMAXREG") >= 2, "{stem}: no register split");
        assert_eq!(count("HMMA"), 0, "{stem}: an mma.sync product");
        assert_eq!(count("STS "), r / 2, "{stem}: staging stores");
        // Each consumer stores every second group of 64 rows.
        assert_staged_stores(&stem, &code, out, (r / 64).div_ceil(2), 0);
    }
}

/// Hopper's FlashAttention in machine code (sm_90a): `Q K^T` as HGMMA from two
/// shared-memory descriptors (a 64 x keys product per k16 step), `P V` as HGMMA with A
/// in registers (`R..` before the descriptor) and V transposed (`.tnspB`), one per 16
/// keys; Q, K and V by the copy engine (UTMALDG: Q's boxes once, K's and V's per tile)
/// on transaction barriers; the probabilities packed to 16 bits (F2FP); no mma.sync and
/// no serialized products (a WARPGROUP.DEPBAR after each would mean ptxas ran short of
/// registers for the pipeline, as it does under a producer warpgroup's setmaxnreg).
#[test]
fn hopper_flash_attention_runs_on_warpgroup_products_and_the_copy_engine() {
    let Some(sass) = Sass::find() else { return };
    use trueno_gpu::kernels::flash_attention::HEAD_DIMS;
    use trueno_gpu::kernels::flash_attention::wgmma::{
        FlashAttentionWgmmaKernel, SHORT_SEQ, keys_per_tile,
    };
    use trueno_gpu::kernels::gemm_mma::HalfType;
    for ty in [HalfType::Bf16, HalfType::F16] {
        // Every head dim's kernel, then head dim 64's two-warpgroup one.
        let kernels = HEAD_DIMS
            .iter()
            .map(|&d| FlashAttentionWgmmaKernel::new(ty, d))
            .chain([FlashAttentionWgmmaKernel::for_sequences(ty, 64, SHORT_SEQ)]);
        for k in kernels {
            let d = k.1;
            let (stem, code) = sass.of(&k, Target::Sm90a);
            let count = |op: &str| code.matches(op).count();
            let kind = match ty {
                HalfType::Bf16 => "16.F32.BF16",
                HalfType::F16 => "16.F32 ",
            };
            let bn = keys_per_tile(d);
            let scores = format!("HGMMA.64x{bn}x{kind}");
            let values = format!("HGMMA.64x{d}x{kind}");
            let lines = |want: &str| code.lines().filter(|l| l.contains(want)).count();
            assert!(
                lines(&scores) >= (d / 16) as usize,
                "{stem}: {scores}\n{code}"
            );
            // `HGMMA.. Rd, Ra, gdesc[..].tnspB, ..`: the second operand a register.
            let from_regs = code
                .lines()
                .filter(|l| l.contains(&values) && l.contains(".tnspB"))
                .filter(|l| {
                    let ops: Vec<&str> = l.split(", ").collect();
                    ops.len() > 2 && ops[1].trim_start().starts_with('R')
                })
                .count();
            assert!(
                from_regs >= (bn / 16) as usize,
                "{stem}: {from_regs} register-A P V products\n{code}"
            );
            let boxes = (d / 64) as usize;
            assert!(
                count("UTMALDG.2D") >= 3 * boxes,
                "{stem}: {} copy-engine loads",
                count("UTMALDG")
            );
            assert!(count("SYNCS.PHASECHK") >= 2, "{stem}: no barrier waits");
            assert!(
                count("F2FP") >= (bn / 4) as usize,
                "{stem}: no register packs (F2FP)"
            );
            assert_eq!(
                count("HMMA"),
                0,
                "{stem}: an mma.sync product on the wgmma path"
            );
            // Each exponential one MUFU.EX2 (`ex2.approx.ftz`): the full-range form wraps
            // every one in a compare and two predicated multiplies.
            let wrapped = code
                .lines()
                .filter(|l| l.contains(" FMUL ") && l.contains("@"))
                .count();
            assert!(
                count("MUFU.EX2") >= (bn / 2) as usize && wrapped * 8 < count("MUFU.EX2"),
                "{stem}: {} MUFU.EX2, {wrapped} predicated FMUL",
                count("MUFU.EX2")
            );
            // The softmax between the loop's two waits (scores in, then the previous
            // tile's `P V`), where it overlaps that `P V`: every MUFU.EX2 of a tile.
            let mut overlapped = Vec::new();
            let mut between: Option<usize> = None;
            for l in code.lines() {
                if l.contains("DEPBAR.LE gsb0, 0x1") {
                    between = Some(0);
                } else if l.contains("DEPBAR.LE gsb0, 0x0") {
                    overlapped.extend(between.take());
                } else if l.contains("MUFU.EX2") {
                    between = between.map(|n| n + 1);
                }
            }
            assert!(
                overlapped == [bn as usize / 2 + 2],
                "{stem}: exponentials between the loop's waits {overlapped:?}"
            );
            // Waits for groups, not products: after the first tile's scores, two in the
            // loop (its scores, then the previous tile's P V), after the last P V.
            assert!(
                count("WARPGROUP.DEPBAR") <= 4,
                "{stem}: serialized products\n{code}"
            );
        }
    }
}

/// The fused quantized GEMM's machine code (sm_90a): warpgroup products (HGMMA, two
/// fragments' worth for the tall tile), A by the copy engine (UTMALDG), the weights
/// read as quantized bytes and written to shared memory as bf16 in 16-byte stores (runs
/// of eight: STS.128; Q4_0's and Q6_K's runs of four in STS.64) after F2FP packs, fenced
/// into the async proxy (FENCE.VIEW.ASYNC) before the barrier arrival, no mma.sync, the
/// tall tile's register split, and the staged epilogue once per fragment (its packs
/// besides the producers' 32 a stage: 64 values of 128 rows, a pair per pack, over 128
/// threads).
#[test]
fn the_fused_quantized_gemm_dequantizes_into_shared_memory_for_warpgroup_products() {
    let Some(sass) = Sass::find() else { return };
    use trueno_gpu::kernels::float_type::FloatType;
    use trueno_gpu::kernels::qgemm_wgmma::{QgemmTileM, QgemmWgmmaKernel};
    use trueno_gpu::kernels::qgemv::QuantFormat;
    for f in QuantFormat::ALL {
        for tile in [QgemmTileM::M128, QgemmTileM::M256] {
            for out in FloatType::ALL {
                let k = QgemmWgmmaKernel(f, out, tile);
                let (stem, code) = sass.of(&k, Target::Sm90a);
                let count = |op: &str| code.matches(op).count();
                let frags = tile.rows() as usize / 128;
                let hgmma = "HGMMA.64x128x16.F32.BF16";
                assert!(
                    count(hgmma) >= 4 * frags,
                    "{stem}: {} {hgmma}",
                    count(hgmma)
                );
                assert!(count("UTMALDG.2D") >= 1, "{stem}: A not by the copy engine");
                assert!(count("LDG.E") >= 1, "{stem}: no weight loads");
                let run_stores = match f {
                    QuantFormat::Q4_0 | QuantFormat::Q6K => "STS.64",
                    _ => "STS.128",
                };
                assert!(
                    count(run_stores) >= 2,
                    "{stem}: no {run_stores} of bf16 runs"
                );
                assert!(count("FENCE.VIEW.ASYNC.S") >= 2, "{stem}: no proxy fence");
                assert!(count("SYNCS.ARRIVE") >= 2, "{stem}: no barrier arrivals");
                assert_eq!(count("HMMA"), 0, "{stem}: an mma.sync product");
                assert_eq!(
                    count("USETMAXREG") >= 2,
                    frags == 2,
                    "{stem}: the register split belongs to the tall tile"
                );
                assert_staged_epilogues(&stem, &code, (out, 128), frags, 32);
            }
        }
    }
}
