//! Every kernel configuration, emitted for sm_80 and sm_90, must assemble with ptxas with
//! no errors and no spills; register counts are pinned in a snapshot so a regression shows.
//!
//! ptxas comes from the `nvidia-cuda-nvcc` PyPI wheel (`scripts/setup-ptxas.sh`); set
//! `PTXAS` to its path, or leave the wheel in `.venv-cuda` at the workspace root. Without
//! it the test says so and passes, unless `TRUENO_REQUIRE_PTXAS=1` (CI sets it).

use std::path::{Path, PathBuf};
use std::process::Command;

use trueno_gpu::kernels::all_kernels;
use trueno_gpu::ptx::Target;

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
