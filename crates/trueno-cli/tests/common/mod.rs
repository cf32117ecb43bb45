//! Running the `trueno` binary from the integration tests.

use std::process::Command;

/// `trueno ARGS`, which must succeed (its stderr is the failure message).
pub fn trueno_ok(args: &[&str]) -> std::process::Output {
    let out = trueno(args);
    assert!(
        out.status.success(),
        "trueno {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `trueno ARGS`, whatever its exit status.
pub fn trueno(args: &[&str]) -> std::process::Output {
    trueno_with(args, &[])
}

/// `trueno ARGS` with the variables `env` set (and no TRUENO_BACKEND or
/// TRUENO_CACHE_SIZES from the caller's environment), whatever its exit status.
pub fn trueno_with(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_trueno"))
        .args(args)
        .env_remove("TRUENO_BACKEND")
        .env_remove("TRUENO_CACHE_SIZES")
        .envs(env.iter().copied())
        .output()
        .unwrap()
}
