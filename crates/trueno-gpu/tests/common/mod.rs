//! ptxas for the integration tests: found from `PTXAS` or the `.venv-cuda` wheel that
//! scripts/setup-ptxas.sh installs, and run with `-v` on PTX text.

#![allow(dead_code)] // each test crate uses part of this

pub mod device;
pub mod q8k;
pub mod sass;

use std::path::{Path, PathBuf};
use trueno_gpu::analyze::ptxas;
use trueno_gpu::ptx::Target;

/// The ptxas to use, if there is one.
pub fn ptxas() -> Option<PathBuf> {
    ptxas::locate(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

/// Runs ptxas on `ptx` for `target` (through `assemble_cached`); the log on failure.
pub fn assemble(ptxas: &Path, ptx: &str, target: Target) -> Result<String, String> {
    assemble_cached(ptxas, ptx, target).map(|(_, log)| log)
}

/// Every kernel configuration's PTX for each of its `checked_targets`: the names, and
/// the `(ptx, target)` jobs `assemble_each` takes, in the same order.
pub fn every_kernel_ptx() -> (Vec<String>, Vec<(String, Target)>) {
    trueno_gpu::kernels::all_kernels()
        .into_iter()
        .flat_map(|k| {
            checked_targets(&*k).into_iter().map(move |t| {
                let ptx = k
                    .emit_ptx(t)
                    .unwrap_or_else(|e| panic!("{}: {e}", k.name()));
                (k.name(), (ptx, t))
            })
        })
        .unzip()
}

/// `assemble` on each `(ptx, target)`, through `par_map`; the logs in order.
pub fn assemble_each(ptxas: &Path, jobs: &[(String, Target)]) -> Vec<Result<String, String>> {
    par_map(jobs, |(ptx, target)| assemble(ptxas, ptx, *target))
}

/// `f` on each item, as many at once as there are cores; the results in order. The
/// static checks run ptxas and cuobjdump once a kernel and target (cuobjdump takes half
/// a second on any cubin): one after another they were minutes of CI's two cores.
pub fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut done: Vec<(usize, R)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers.min(items.len()))
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(item) = items.get(i) else {
                            return mine;
                        };
                        mine.push((i, f(item)));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// ptxas on `ptx` for `target`: the cubin's path and the `-v` log (the log on failure).
/// Kept under the target folder, keyed by the PTX text, the target and the ptxas binary,
/// so the tests that read the same kernel (spills and registers, the register estimates,
/// the SASS checks) assemble it once: ptxas was most of the test run's time on 2 cores.
/// A hit is checked against the stored PTX text, not trusted to the hash.
pub fn assemble_cached(
    ptxas: &Path,
    ptx: &str,
    target: Target,
) -> Result<(PathBuf, String), String> {
    use std::hash::{Hash, Hasher};
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ptxas-cache");
    std::fs::create_dir_all(&dir).unwrap();
    let mut h = std::hash::DefaultHasher::new();
    (ptx, target.name(), ptxas).hash(&mut h);
    if let Ok(meta) = std::fs::metadata(ptxas) {
        (meta.len(), meta.modified().ok()).hash(&mut h);
    }
    let base = dir.join(format!("{:016x}", h.finish()));
    let path = |ext: &str| base.with_extension(ext);
    let same_ptx = || std::fs::read_to_string(path("ptx")).is_ok_and(|t| t == ptx);
    // The log is written last: once it is there, the PTX and the cubin are too.
    if let Ok(log) = std::fs::read_to_string(path("log"))
        && same_ptx()
    {
        return Ok((path("cubin"), log));
    }
    // Written under names of this thread's own, then renamed into place: test threads
    // and binaries may assemble the same kernel at once. Failures are not kept: ptxas
    // may have failed to start.
    let tag = format!("{}-{:?}", std::process::id(), std::thread::current().id())
        .replace(|c: char| !c.is_ascii_alphanumeric(), "");
    let own = |ext: &str| base.with_extension(format!("{tag}.{ext}"));
    std::fs::write(own("ptx"), ptx).unwrap();
    let log = ptxas::run_verbose(ptxas, &own("ptx"), target.name(), &own("cubin"))?;
    if !same_ptx() && path("ptx").exists() {
        // Another kernel's PTX under the same hash: keep this result out of the cache.
        return Ok((own("cubin"), log));
    }
    std::fs::rename(own("ptx"), path("ptx")).unwrap();
    std::fs::rename(own("cubin"), path("cubin")).unwrap();
    std::fs::write(own("log"), &log).unwrap();
    std::fs::rename(own("log"), path("log")).unwrap();
    Ok((path("cubin"), log))
}

/// Whether a missing ptxas must fail the test (CI sets `TRUENO_REQUIRE_PTXAS=1`).
pub fn required() -> bool {
    std::env::var("TRUENO_REQUIRE_PTXAS").is_ok_and(|v| v == "1")
}

/// The targets the static checks cover for `k`: sm_80 and sm_90 for portable kernels
/// (sm_90a compiles them as sm_90 does: the SASS of four mma.sync GEMMs for the two
/// differed only in the header flags, CUDA 13.5's ptxas and cuobjdump, 2026-12-02), the
/// kernel's own for architecture-specific ones.
pub fn checked_targets(k: &dyn trueno_gpu::kernels::Kernel) -> Vec<Target> {
    if k.targets().contains(&Target::Sm80) {
        vec![Target::Sm80, Target::Sm90]
    } else {
        k.targets().to_vec()
    }
}
