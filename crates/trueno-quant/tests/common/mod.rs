//! Shared by the integration tests: where the oracle fixtures are (see
//! scripts/setup-quant-oracle.sh) and a deterministic sample source.
#![allow(dead_code)]

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

/// Deterministic samples from a 64-bit LCG (Box-Muller for normals): an input source
/// independent of the code under test.
pub struct Rng(pub u64);

impl Rng {
    /// Uniform in (0, 1).
    pub fn uniform(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    /// Standard normal.
    pub fn normal(&mut self) -> f32 {
        let (u, v) = (self.uniform(), self.uniform());
        ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
    }
    /// Heavy-tailed (a normal over a random spread), as LLM weights are.
    pub fn heavy(&mut self) -> f32 {
        let spread = (-self.uniform().ln()) as f32;
        self.normal() * spread
    }
    /// `n` standard normals.
    pub fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.normal()).collect()
    }
}

/// Runs `f` on a one-thread rayon pool (wasm32 has no threads: everything runs on one).
pub fn one_thread<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    if cfg!(target_arch = "wasm32") {
        return f();
    }
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("a one-thread pool")
        .install(f)
}
