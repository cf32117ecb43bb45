//! Where the oracle fixtures are (see scripts/setup-quant-oracle.sh).

use std::path::PathBuf;

/// The fixture directory if it holds `file`: `TRUENO_QUANT_FIXTURES` (a relative path is
/// taken from the workspace root, where .ci/run and the scripts run) or
/// `target/quant-fixtures`. Missing fixtures skip the test, saying so, unless
/// `TRUENO_REQUIRE_ORACLE=1` makes that a failure.
pub fn fixtures(file: &str) -> Option<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = std::env::var_os("TRUENO_QUANT_FIXTURES")
        .map(|d| root.join(d))
        .unwrap_or_else(|| root.join("target/quant-fixtures"));
    if dir.join(file).exists() {
        return Some(dir);
    }
    assert!(
        std::env::var("TRUENO_REQUIRE_ORACLE").as_deref() != Ok("1"),
        "TRUENO_REQUIRE_ORACLE=1 but {} has no {file}: run scripts/setup-quant-oracle.sh",
        dir.display()
    );
    eprintln!("skipping: no oracle fixtures (run scripts/setup-quant-oracle.sh to make them)");
    None
}
