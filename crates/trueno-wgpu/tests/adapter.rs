//! Adapter choice by `TRUENO_WGPU_ADAPTER`. Its own test binary: it sets the variable,
//! which would change what the other suites open.

use trueno_wgpu::{ADAPTER_ENV, Gpu, GpuError};

#[test]
fn the_adapter_variable_picks_by_name_and_names_the_choices_when_nothing_matches() {
    // SAFETY: this binary has one test, so no other thread reads the environment meanwhile.
    unsafe { std::env::remove_var(ADAPTER_ENV) };
    let default = match Gpu::new() {
        Ok(g) => g,
        Err(e) if std::env::var_os("TRUENO_REQUIRE_WGPU").is_some() => {
            panic!("TRUENO_REQUIRE_WGPU is set but no adapter opened: {e}")
        }
        Err(e) => {
            eprintln!("skipped: no wgpu adapter ({e})");
            return;
        }
    };
    let name = default.info().name.clone();
    drop(default);
    // A case-changed piece of the name still finds it.
    let piece: String = name.chars().take(6).collect::<String>().to_uppercase();
    // SAFETY: as above.
    unsafe { std::env::set_var(ADAPTER_ENV, &piece) };
    let picked = Gpu::new().unwrap();
    assert!(picked.info().name.to_uppercase().contains(&piece));
    drop(picked);
    // SAFETY: as above.
    unsafe { std::env::set_var(ADAPTER_ENV, "no-such-adapter-anywhere") };
    match Gpu::new() {
        Err(GpuError::NoAdapter { wanted, found }) => {
            assert_eq!(wanted.as_deref(), Some("no-such-adapter-anywhere"));
            assert!(found.contains(&name), "{found}");
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(g) => panic!("opened {}", g.info().name),
    }
    // SAFETY: as above.
    unsafe { std::env::remove_var(ADAPTER_ENV) };
}
