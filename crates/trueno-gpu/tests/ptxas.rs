//! Every kernel configuration, emitted for sm_80 and sm_90, must assemble with ptxas with
//! no errors and no spills; register counts are pinned in a snapshot so a regression shows.
//!
//! ptxas comes from the `nvidia-cuda-nvcc` PyPI wheel (`scripts/setup-ptxas.sh`); set
//! `PTXAS` to its path, or leave the wheel in `.venv-cuda` at the workspace root. Without
//! it the test says so and passes, unless `TRUENO_REQUIRE_PTXAS=1` (CI sets it).

use std::path::Path;

mod common;
use common::sass::Sass;
use common::{assemble, assemble_each, ptxas};

use trueno_gpu::analyze::ptxas::parse_verbose;
use trueno_gpu::ptx::{
    self, Bf16, Cmp, F16, F32, F64, KernelBuilder, PtxType, Rounding, S32, ShflMode, Space, Target,
    U32, U64,
};

/// One kernel that uses every builder feature the shipped kernels do not: f16/bf16
/// conversions, f64, rounding modes, the special functions, atomics (add, CAS, the f32
/// max loop), votes, every shuffle mode, dynamic shared memory, 2-wide vectors, signed
/// shifts and integer division.
fn coverage_kernel() -> ptx::KernelIr {
    let mut b = KernelBuilder::new("trueno_ir_coverage");
    let x = b.param_ptr("x", PtxType::F32);
    let h = b.param_ptr("h", PtxType::U16);
    let n = b.param_u32("n");
    let t = b.tid_x();
    let v = b.ld::<F32, U64>(Space::Global, x, 0);
    let half: ptx::Reg<F16> = b.cvt(v, Some(Rounding::Rn));
    let bf: ptx::Reg<Bf16> = b.cvt(v, Some(Rounding::Rn));
    let back = b.cvt::<F32, F16>(half, None);
    let hb: ptx::Reg<ptx::U16> = b.cvt(half, Some(Rounding::Rzi));
    let _ = hb;
    b.st::<F16, U64>(Space::Global, h, 0, half);
    b.st::<Bf16, U64>(Space::Global, h, 2, bf);
    let d = b.cvt::<F64, F32>(back, None);
    let d2 = b.fma(d, d, 1.0f64);
    let d3 = b.sqrt(d2, Rounding::Rn);
    let f = b.cvt::<F32, F64>(d3, Some(Rounding::Rn));
    let r1 = b.rcp(f, Rounding::Approx);
    let r2 = b.div(r1, 3.0f32);
    let r3 = b.ex2(r2);
    let r4 = b.lg2(r3);
    let r5 = b.rsqrt(r4);
    let r6 = b.sqrt(r5, Rounding::Approx);
    let i = b.cvt::<S32, F32>(r6, Some(Rounding::Rzi));
    let i = b.shr(i, 2u32);
    let i = b.neg(i);
    let q = b.div_int(t, 3u32);
    let q = b.rem(q, 7u32);
    let q = b.xor(q, 0x55u32);
    let smem = b.dynamic_shared();
    let a = b.mad(t, 8u32, smem);
    let pair = [b.cvt::<F32, S32>(i, Some(Rounding::Rn)), r6];
    b.st_vec(Space::Shared, a, 0, &pair);
    b.bar_sync();
    let got = b.ld_vec::<F32, U32, 2>(Space::Shared, a, 0);
    let s = b.add(got[0], got[1]);
    let up = b.shfl(ShflMode::Up, s, 1u32);
    let down = b.shfl(ShflMode::Down, up, 2u32);
    let idx = b.shfl(ShflMode::Idx, down, q);
    let _old = b.atom_add::<F32, U64>(Space::Global, x, idx);
    b.atom_max_f32(Space::Global, x, idx);
    b.atom_max_f32(Space::Shared, smem, idx);
    let p = b.setp::<U32>(Cmp::Lt, t, n);
    let any = b.vote_any(p);
    let all = b.vote_all(p);
    let both = b.and_pred(any, all);
    let mask = b.ballot(both);
    let sel = b.selp(mask, 0u32, both);
    let o = b.mul_wide(sel, 4u32);
    let addr = b.add(x, o);
    b.predicated(both, |b| b.st::<F32, U64>(Space::Global, addr, 0, idx));
    b.ret();
    b.finish()
}

#[test]
fn the_ir_feature_coverage_kernel_validates_and_assembles() {
    let k = ptx::compile(coverage_kernel()).unwrap_or_else(|e| panic!("{e}"));
    let Some(ptxas) = ptxas() else {
        assert!(
            std::env::var("TRUENO_REQUIRE_PTXAS").is_err(),
            "TRUENO_REQUIRE_PTXAS is set but ptxas was not found"
        );
        eprintln!("SKIPPED: ptxas not found");
        return;
    };
    for target in [Target::Sm80, Target::Sm90, Target::Sm90a] {
        let text = ptx::emit_module(target, std::slice::from_ref(&k));
        if let Err(log) = assemble(&ptxas, &text, target) {
            panic!("{}:\n{log}\n{text}", target.name());
        }
    }
}

#[test]
fn every_kernel_assembles_without_spills_and_matches_the_register_snapshot() {
    let Some(ptxas) = ptxas() else {
        assert!(
            std::env::var("TRUENO_REQUIRE_PTXAS").is_err(),
            "TRUENO_REQUIRE_PTXAS is set but ptxas was not found (run scripts/setup-ptxas.sh .venv-cuda)"
        );
        eprintln!("SKIPPED: ptxas not found; run scripts/setup-ptxas.sh .venv-cuda or set PTXAS");
        return;
    };
    let mut lines = Vec::new();
    let mut failures = Vec::new();
    let (names, jobs) = common::every_kernel_ptx();
    let logs = assemble_each(&ptxas, &jobs);
    for ((name, (_, target)), log) in names.iter().zip(&jobs).zip(logs) {
        let log = match log {
            Ok(log) => log,
            Err(log) => {
                failures.push(format!("{name} {}: ptxas failed:\n{log}", target.name()));
                continue;
            }
        };
        let f = parse_verbose(&log).into_iter().next().unwrap_or_default();
        let (regs, spill_st, spill_ld, stack) =
            (f.registers, f.spill_stores, f.spill_loads, f.stack_frame);
        if spill_st + spill_ld + stack > 0 {
            failures.push(format!(
                "{name} {}: spills {spill_st}/{spill_ld} bytes, stack {stack}",
                target.name()
            ));
        }
        lines.push(format!("{name} {} registers={regs}", target.name()));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let snapshot_path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/ptxas_registers.txt");
    let got = lines.join("\n") + "\n";
    if std::env::var("TRUENO_UPDATE_SNAPSHOTS").is_ok() {
        std::fs::write(&snapshot_path, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&snapshot_path).unwrap_or_default();
    assert_eq!(
        got, want,
        "register counts changed; if intended, rerun with TRUENO_UPDATE_SNAPSHOTS=1"
    );
}

/// The tensor-core kernels' machine code, read back with cuobjdump (same wheel folder as
/// ptxas): their multiplies are HMMA (tensor-core) instructions, their tiles arrive by
/// LDGSTS (cp.async) and their fragments by LDSM (ldmatrix, transposed for a 16-bit
/// operand stored n-major; a `Bᵀ` is k-major, so none transposed), on every target
/// they claim; attention's probabilities (FlashAttention's, decode's) become 16-bit
/// operands by F2FP packs, in registers.
#[test]
fn the_tensor_core_kernels_run_on_tensor_cores_in_the_machine_code() {
    let Some(sass) = Sass::find() else { return };
    use trueno_gpu::kernels::Kernel;
    use trueno_gpu::kernels::flash_attention::{FlashAttentionKernel, HEAD_DIMS};
    use trueno_gpu::kernels::float_type::FloatType;
    use trueno_gpu::kernels::gemm_mma::{GemmInput, HalfType, MmaGemmKernel, MmaTileK};
    let hmma = |ty| match ty {
        HalfType::Bf16 => "HMMA.16816.F32.BF16",
        HalfType::F16 => "HMMA.16816.F32 ",
    };
    // (kernel, its HMMA spelling, the GEMM's output type (attention packs P to 16 bits),
    // whether an operand is read transposed: a 16-bit n-major B, attention's V)
    type Case = (Box<dyn Kernel>, &'static str, Option<FloatType>, bool);
    let mut kernels: Vec<Case> = Vec::new();
    for input in GemmInput::ALL {
        let (spelling, transposed) = match input {
            GemmInput::Half(t) => (hmma(t), true),
            GemmInput::HalfBt(t) => (hmma(t), false),
            GemmInput::Tf32 => ("HMMA.1688.F32.TF32", false),
        };
        for tk in [MmaTileK::K32, MmaTileK::K64] {
            if input == GemmInput::Tf32 && tk == MmaTileK::K64 {
                continue;
            }
            for out in FloatType::ALL {
                let k = MmaGemmKernel(input, tk, out);
                kernels.push((Box::new(k), spelling, Some(out), transposed));
            }
        }
    }
    for ty in [HalfType::Bf16, HalfType::F16] {
        for d in HEAD_DIMS {
            kernels.push((Box::new(FlashAttentionKernel(ty, d)), hmma(ty), None, true));
        }
    }
    // Decode attention's tensor-core chunk kernels: the same shape of code (a group's
    // heads as the rows, V read transposed, the probabilities packed in registers).
    for paged in [false, true] {
        for ty in [HalfType::Bf16, HalfType::F16] {
            for dim in HEAD_DIMS {
                let k = trueno_gpu::kernels::decode_mma::DecodeMmaKernel { dim, ty, paged };
                kernels.push((Box::new(k), hmma(ty), None, true));
            }
        }
    }
    let jobs: Vec<_> = kernels
        .iter()
        .flat_map(|case| {
            common::checked_targets(&*case.0)
                .into_iter()
                .map(move |t| (case, t))
        })
        .collect();
    let codes = common::par_map(&jobs, |((k, ..), target)| sass.of(&**k, *target));
    for (((_, hmma, out, transposed), _), (stem, code)) in jobs.iter().zip(codes) {
        let count = |op: &str| code.matches(op).count();
        // The GEMM's loop body: 4 x 4 fragments x 2 k16 steps per k-tile; attention's
        // at least 64 (Q K^T and P V of one key tile); decode's 32 at head dimension
        // 64 (each product once per 16-bit part of its operand).
        assert!(count(hmma) >= 32, "{stem}: {} {hmma}\n{code}", count(hmma));
        assert!(count("LDGSTS") >= 4, "{stem}: no cp.async copies (LDGSTS)");
        assert!(count("LDSM") >= 12, "{stem}: no ldmatrix (LDSM)");
        let least = if *transposed { 4 } else { 0 };
        assert!(
            count("LDSM.16.MT88.4") >= least,
            "{stem}: no transposed ldmatrix"
        );
        match out {
            Some(out) => assert_staged_epilogue(&stem, &code, *out, 128),
            None => assert!(count("F2FP") >= 16, "{stem}: no register packs (F2FP)"),
        }
    }
}

/// The tensor-core quantized batch products' machine code: their products a super-block
/// (Q4_K, Q5_K: eight of quants, eight of mins; Q6_K: one a group of 16; Q8_0, Q4_0: one
/// a block; each once a tile of eight vectors) are IMMA (integer tensor-core) instructions on every target they claim, no
/// `dp4a` (IDP) is left, and the staged formats' tiles arrive by asynchronous copies
/// (LDGSTS) with no direct global load.
#[test]
fn the_tensor_core_quantized_batch_runs_on_integer_tensor_cores() {
    let Some(sass) = Sass::find() else { return };
    use trueno_gpu::kernels::qgemv::QuantFormat;
    use trueno_gpu::kernels::qgemv_q4k_mma::QgemvQ8kMmaKernel;
    for k in QgemvQ8kMmaKernel::all() {
        let QgemvQ8kMmaKernel(f, tiles, _) = k;
        for target in common::checked_targets(&k) {
            let (stem, code) = sass.of(&k, target);
            let count = |op: &str| code.matches(op).count();
            // Q6_K: one k16 product a group of 16 (its scales' span); Q8_0 and Q4_0 one
            // k32 product a block; Q4_K and Q5_K one of quants and one of mins a
            // sub-block of 32; each of those once a tile of eight vectors.
            let (imma, n) = match f {
                QuantFormat::Q6K => ("IMMA.16816.S8.S8", 16),
                QuantFormat::Q8_0 | QuantFormat::Q4_0 => ("IMMA.16832.S8.S8", 8),
                QuantFormat::Q4K | QuantFormat::Q5K => ("IMMA.16832.S8.S8", 16),
            };
            assert_eq!(count(imma), n * tiles.count(), "{stem}\n{code}");
            if !matches!(f, QuantFormat::Q4K | QuantFormat::Q5K) {
                // A step's weight chunks, 4 activation chunks and scale a lane, in the
                // prologue and the loop; nothing read from global memory straight.
                assert!(count("LDGSTS") >= 2 * 6, "{stem}: not copied async\n{code}");
                assert_eq!(count("LDG.E"), 0, "{stem}: a direct global load");
            } else if !k.direct() {
                // The activations copied (4 chunks a tile and a scale, prologue and
                // loop), the weights loaded straight.
                assert!(count("LDGSTS") >= 2 * 5, "{stem}: not copied async\n{code}");
                assert!(count("LDG.E") >= 10, "{stem}: weights not loaded\n{code}");
            } else {
                assert_eq!(count("LDGSTS"), 0, "{stem}: copies in the direct kernel");
            }
            assert_eq!(count("IDP"), 0, "{stem}: a dp4a product");
        }
    }
}

/// A tensor-core GEMM's epilogue in machine code: the accumulators staged in shared
/// memory as pairs (STS.64: a quarter of the tile's `cols` a thread, 32 for 128 x 128
/// tiles), read back 16 bytes at a
/// time (LDS.128) and stored coalesced, 16 bytes of f32 (STG.E.128) or 8 of 16-bit
/// values packed in pairs (F2FP, STG.E.64), in a loop of two rows a step: two store
/// instructions, not one
/// per accumulator pair.
fn assert_staged_epilogue(
    stem: &str,
    code: &str,
    out: trueno_gpu::kernels::float_type::FloatType,
    cols: usize,
) {
    assert_staged_epilogues(stem, code, (out, cols), 1, 0)
}

/// [`assert_staged_epilogue`] for `tiles` staged 64-row tiles a warpgroup, in a kernel
/// whose main loop packs `main_packs` pairs of its own (F2FP).
fn assert_staged_epilogues(
    stem: &str,
    code: &str,
    (out, cols): (trueno_gpu::kernels::float_type::FloatType, usize),
    tiles: usize,
    main_packs: usize,
) {
    use trueno_gpu::kernels::float_type::FloatType;
    let count = |op: &str| code.matches(op).count();
    assert!(
        count("STS.64") >= cols / 4,
        "{stem}: {} staging stores",
        count("STS.64")
    );
    assert!(
        count("LDS.128") >= 1,
        "{stem}: no 16-byte reads of the staged tile"
    );
    // Two rows a loop step: two stores (and two pairs of packs) of each kind.
    let (store, packs) = match out {
        FloatType::F32 => ("STG.E.128", 0),
        _ => ("STG.E.64", 4),
    };
    assert_eq!(
        count("STG."),
        count(store),
        "{stem}: stores other than {store}"
    );
    assert_eq!(count(store), 2 * tiles, "{stem}: {store}");
    assert_eq!(
        count("F2FP"),
        packs * tiles + main_packs,
        "{stem}: F2FP packs"
    );
}

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
                    GemmInput::Tf32 => "8.F32.TF32",
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
        assert!(
            count("LDS.128") >= 1,
            "{stem}: no 16-byte reads of the staged tile"
        );
        let store = match out {
            FloatType::F32 => "STG.E.128",
            _ => "STG.E.64",
        };
        // Each consumer stores every second group of 64 rows, two rows a loop step.
        let calls = (r / 64).div_ceil(2);
        assert_eq!(
            count("STG."),
            count(store),
            "{stem}: stores other than {store}"
        );
        assert_eq!(count(store), 2 * calls, "{stem}: {store}");
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

/// The FP32 SIMT GEMM's tiles reach shared memory by `cp.async` alone, on every target:
/// element copies (LDGSTS.E: A transposed, and every edge tile), 16-byte ones for a whole
/// tile's B (LDGSTS.E.BYPASS.128), no shared stores (nothing staged through registers),
/// one barrier a k-tile, and 32 k of 8x8 products unrolled in the loop.
#[test]
fn the_simt_gemm_copies_its_tiles_asynchronously() {
    let Some(sass) = Sass::find() else { return };
    use trueno_gpu::kernels::gemm::{GemmKernel, GemmVariant};
    for target in common::checked_targets(&GemmKernel(GemmVariant::Tiled)) {
        let (stem, code) = sass.of(&GemmKernel(GemmVariant::Tiled), target);
        let count = |op: &str| code.matches(op).count();
        assert!(count("LDGSTS.E ") >= 32, "{stem}: element copies\n{code}");
        assert!(
            count("LDGSTS.E.BYPASS.128 ") >= 4,
            "{stem}: 16-byte copies\n{code}"
        );
        assert_eq!(count(" STS"), 0, "{stem}: shared stores\n{code}");
        assert_eq!(count("BAR.SYNC"), 1, "{stem}: barriers\n{code}");
        assert!(
            count("FFMA ") >= 32 * 64,
            "{stem}: {} FFMA\n{code}",
            count("FFMA ")
        );
    }
}
