//! Running and reading `ptxas -v`: the registers and spills ptxas reports per function, to
//! set beside the analyzer's own figures. ptxas is found from `PTXAS`, the PyPI wheel that
//! scripts/setup-ptxas.sh installs in a workspace's `.venv-cuda`, or `PATH`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The ptxas to run: `$PTXAS`, else the wheel in `<workspace>/.venv-cuda`, else `ptxas`
/// if `PATH` has it.
pub fn locate(workspace: &Path) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PTXAS") {
        return Some(p.into());
    }
    let wheel = std::fs::read_dir(workspace.join(".venv-cuda/lib"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|d| d.path().join("site-packages/nvidia/cu13/bin/ptxas"))
        .find(|p| p.exists());
    wheel.or_else(|| {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join("ptxas"))
                .find(|p| p.is_file())
        })
    })
}

/// `ptxas -v -arch <target> -o <output> <file>`: its log (stderr then stdout), as the
/// error when ptxas fails or cannot start.
pub fn run_verbose(
    ptxas: &Path,
    file: &Path,
    target: &str,
    output: &Path,
) -> Result<String, String> {
    let out = Command::new(ptxas)
        .args(["-v", "-arch", target, "-o"])
        .arg(output)
        .arg(file)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", ptxas.display()))?;
    let log =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    if out.status.success() {
        Ok(log)
    } else {
        Err(log)
    }
}

/// What `ptxas -v` says about one function.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct PtxasFigures {
    /// The function.
    pub function: String,
    /// Registers per thread.
    pub registers: u32,
    /// Bytes of spill stores.
    pub spill_stores: u32,
    /// Bytes of spill loads.
    pub spill_loads: u32,
    /// Bytes of stack frame.
    pub stack_frame: u32,
}

/// Parses the log of `ptxas -v` into one entry per function, in log order.
///
/// ```
/// let log = "ptxas info    : Compiling entry function 'k' for 'sm_90'\n\
///            ptxas info    : Function properties for k\n\
///            \x20   8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n\
///            ptxas info    : Used 40 registers, used 1 barriers, 368 bytes cmem[0]\n";
/// let f = trueno_gpu::analyze::ptxas::parse_verbose(log);
/// assert_eq!((f[0].function.as_str(), f[0].registers, f[0].spill_stores), ("k", 40, 4));
/// ```
pub fn parse_verbose(log: &str) -> Vec<PtxasFigures> {
    let mut out: Vec<PtxasFigures> = Vec::new();
    let number_before = |line: &str, key: &str| -> Option<u32> {
        let at = line.find(key)?;
        line[..at].split_whitespace().last()?.parse().ok()
    };
    for line in log.lines() {
        let quoted = line.split('\'').nth(1);
        if line.contains("Compiling entry function") || line.contains("Compiling function") {
            if let Some(name) = quoted {
                out.push(PtxasFigures {
                    function: name.to_string(),
                    ..PtxasFigures::default()
                });
            }
            continue;
        }
        if let Some(name) = line.split("Function properties for ").nth(1) {
            let name = name.trim();
            if out.last().is_none_or(|f| f.function != name) {
                out.push(PtxasFigures {
                    function: name.to_string(),
                    ..PtxasFigures::default()
                });
            }
            continue;
        }
        let Some(cur) = out.last_mut() else { continue };
        if let Some(n) = number_before(line, "bytes stack frame") {
            cur.stack_frame = n;
        }
        if let Some(n) = number_before(line, "bytes spill stores") {
            cur.spill_stores = n;
        }
        if let Some(n) = number_before(line, "bytes spill loads") {
            cur.spill_loads = n;
        }
        if line.contains("Used ")
            && let Some(n) = number_before(line, "registers")
        {
            cur.registers = n;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_functions_in_one_log() {
        let log = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'a' for 'sm_80'
ptxas info    : Function properties for a
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 18 registers, 380 bytes cmem[0]
ptxas info    : Compiling entry function 'b' for 'sm_80'
ptxas info    : Function properties for b
    16 bytes stack frame, 12 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 380 bytes cmem[0]
";
        let f = parse_verbose(log);
        assert_eq!(f.len(), 2);
        assert_eq!((f[0].function.as_str(), f[0].registers), ("a", 18));
        assert_eq!(
            f[1],
            PtxasFigures {
                function: "b".into(),
                registers: 255,
                spill_stores: 12,
                spill_loads: 8,
                stack_frame: 16
            }
        );
    }
}
