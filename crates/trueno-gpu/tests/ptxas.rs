//! Every kernel configuration, emitted for sm_80 and sm_90, must assemble with ptxas with
//! no errors and no spills; register counts are pinned in a snapshot so a regression shows.
//!
//! ptxas comes from the `nvidia-cuda-nvcc` PyPI wheel (`scripts/setup-ptxas.sh`); set
//! `PTXAS` to its path, or leave the wheel in `.venv-cuda` at the workspace root. Without
//! it the test says so and passes, unless `TRUENO_REQUIRE_PTXAS=1` (CI sets it).

use std::path::Path;

mod common;
use common::sass::{Sass, assert_staged_epilogue};
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
/// operand stored n-major; a `Bᵀ` is k-major, so none transposed; an f32 B stored
/// n-major by plain shared loads, LDS), on every target
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
    for input in GemmInput::EVERY {
        let (spelling, transposed) = match input {
            GemmInput::Half(t) => (hmma(t), true),
            GemmInput::HalfBt(t) => (hmma(t), false),
            GemmInput::Tf32 | GemmInput::Tf32Kn => ("HMMA.1688.F32.TF32", false),
        };
        for tk in [MmaTileK::K32, MmaTileK::K64] {
            if input.is_tf32() && tk == MmaTileK::K64 {
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
        // An f32 B as stored: its fragments one 32-bit shared load a value (four k8
        // steps a k-tile, four n8 fragments, b0 and b1), A's still by ldmatrix.
        if stem.contains("tf32_kn") {
            assert!(
                count("LDS ") >= 32,
                "{stem}: {} gathered B loads",
                count("LDS ")
            );
        }
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
