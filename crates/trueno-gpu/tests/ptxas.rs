//! Every kernel configuration, emitted for sm_80 and sm_90, must assemble with ptxas with
//! no errors and no spills; register counts are pinned in a snapshot so a regression shows.
//!
//! ptxas comes from the `nvidia-cuda-nvcc` PyPI wheel (`scripts/setup-ptxas.sh`); set
//! `PTXAS` to its path, or leave the wheel in `.venv-cuda` at the workspace root. Without
//! it the test says so and passes, unless `TRUENO_REQUIRE_PTXAS=1` (CI sets it).

use std::path::{Path, PathBuf};
use std::process::Command;

use trueno_gpu::kernels::all_kernels;
use trueno_gpu::ptx::{
    self, Bf16, Cmp, F16, F32, F64, KernelBuilder, PtxType, Rounding, S32, ShflMode, Space, Target,
    U32, U64,
};

fn ptxas() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PTXAS") {
        return Some(p.into());
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let venv = std::fs::read_dir(root.join(".venv-cuda/lib")).ok()?;
    venv.flatten()
        .map(|d| d.path().join("site-packages/nvidia/cu13/bin/ptxas"))
        .find(|p| p.exists())
}

/// (registers, spill store bytes, spill load bytes, stack frame bytes) from `ptxas -v`.
fn resources(log: &str) -> (u32, u32, u32, u32) {
    let num_before = |key: &str| -> u32 {
        log.find(key)
            .and_then(|i| log[..i].split_whitespace().last())
            .and_then(|w| w.parse().ok())
            .unwrap_or(0)
    };
    (
        num_before("registers"),
        num_before("bytes spill stores"),
        num_before("bytes spill loads"),
        num_before("bytes stack frame"),
    )
}

/// Runs ptxas on `ptx` for `target`; the log on failure.
fn assemble(ptxas: &Path, ptx: &str, target: Target, stem: &str) -> Result<String, String> {
    let dir = std::env::temp_dir().join(format!("trueno-ptxas-{}-{stem}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{stem}_{}.ptx", target.name()));
    std::fs::write(&file, ptx).unwrap();
    let out = Command::new(ptxas)
        .args(["-v", "-arch", target.name(), "-o"])
        .arg(file.with_extension("cubin"))
        .arg(&file)
        .output()
        .expect("run ptxas");
    let _ = std::fs::remove_dir_all(&dir);
    let log =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    if out.status.success() {
        Ok(log)
    } else {
        Err(log)
    }
}

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
        if let Err(log) = assemble(&ptxas, &text, target, "coverage") {
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
    let dir = std::env::temp_dir().join(format!("trueno-ptxas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut lines = Vec::new();
    let mut failures = Vec::new();
    for k in all_kernels() {
        for target in [Target::Sm80, Target::Sm90] {
            let ptx = k
                .emit_ptx(target)
                .unwrap_or_else(|e| panic!("{}: {e}", k.name()));
            let file = dir.join(format!("{}_{}.ptx", k.name(), target.name()));
            std::fs::write(&file, &ptx).unwrap();
            let out = Command::new(&ptxas)
                .args(["-v", "-arch", target.name(), "-o"])
                .arg(file.with_extension("cubin"))
                .arg(&file)
                .output()
                .expect("run ptxas");
            let log = String::from_utf8_lossy(&out.stderr).to_string()
                + &String::from_utf8_lossy(&out.stdout);
            if !out.status.success() {
                failures.push(format!(
                    "{} {}: ptxas failed:\n{log}",
                    k.name(),
                    target.name()
                ));
                continue;
            }
            let (regs, spill_st, spill_ld, stack) = resources(&log);
            if spill_st + spill_ld + stack > 0 {
                failures.push(format!(
                    "{} {}: spills {spill_st}/{spill_ld} bytes, stack {stack}",
                    k.name(),
                    target.name()
                ));
            }
            lines.push(format!("{} {} registers={regs}", k.name(), target.name()));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
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
