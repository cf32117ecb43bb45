//! ptxas for the integration tests: found from `PTXAS` or the `.venv-cuda` wheel that
//! scripts/setup-ptxas.sh installs, and run with `-v` on PTX text.

#![allow(dead_code)] // each test crate uses part of this

use std::path::{Path, PathBuf};
use std::process::Command;

use trueno_gpu::ptx::Target;

/// The ptxas to use, if there is one.
pub fn ptxas() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PTXAS") {
        return Some(p.into());
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let venv = std::fs::read_dir(root.join(".venv-cuda/lib")).ok()?;
    venv.flatten()
        .map(|d| d.path().join("site-packages/nvidia/cu13/bin/ptxas"))
        .find(|p| p.exists())
}

/// Runs ptxas on `ptx` for `target`; the log on failure.
pub fn assemble(ptxas: &Path, ptx: &str, target: Target, stem: &str) -> Result<String, String> {
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

/// Whether a missing ptxas must fail the test (CI sets `TRUENO_REQUIRE_PTXAS=1`).
pub fn required() -> bool {
    std::env::var("TRUENO_REQUIRE_PTXAS").is_ok_and(|v| v == "1")
}
