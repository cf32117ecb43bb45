//! ptxas for the integration tests: found from `PTXAS` or the `.venv-cuda` wheel that
//! scripts/setup-ptxas.sh installs, and run with `-v` on PTX text.

#![allow(dead_code)] // each test crate uses part of this

pub mod device;
pub mod sass;

use std::path::{Path, PathBuf};
use trueno_gpu::analyze::ptxas;
use trueno_gpu::ptx::Target;

/// The ptxas to use, if there is one.
pub fn ptxas() -> Option<PathBuf> {
    ptxas::locate(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

/// Runs ptxas on `ptx` for `target`; the log on failure.
pub fn assemble(ptxas: &Path, ptx: &str, target: Target, stem: &str) -> Result<String, String> {
    let dir = std::env::temp_dir().join(format!("trueno-ptxas-{}-{stem}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{stem}_{}.ptx", target.name()));
    std::fs::write(&file, ptx).unwrap();
    let log = ptxas::run_verbose(ptxas, &file, target.name(), &file.with_extension("cubin"));
    let _ = std::fs::remove_dir_all(&dir);
    log
}

/// Whether a missing ptxas must fail the test (CI sets `TRUENO_REQUIRE_PTXAS=1`).
pub fn required() -> bool {
    std::env::var("TRUENO_REQUIRE_PTXAS").is_ok_and(|v| v == "1")
}

/// The targets the static checks cover for `k`: sm_80 and sm_90 for portable kernels
/// (sm_90a compiles them as sm_90 does), the kernel's own for architecture-specific ones.
pub fn checked_targets(k: &dyn trueno_gpu::kernels::Kernel) -> Vec<Target> {
    if k.targets().contains(&Target::Sm80) {
        vec![Target::Sm80, Target::Sm90]
    } else {
        k.targets().to_vec()
    }
}
