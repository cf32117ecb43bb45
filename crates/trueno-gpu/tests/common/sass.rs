//! Kernels' machine code for the SASS assertions (tests/ptxas.rs): assembled by ptxas,
//! disassembled by the cuobjdump of the same PyPI wheel.

use trueno_gpu::ptx::Target;

use super::ptxas;

/// ptxas and the cuobjdump beside it (the same PyPI wheel): a kernel's machine code as
/// text. `find` says SKIPPED (or fails under TRUENO_REQUIRE_PTXAS) when either is
/// missing.
pub struct Sass {
    ptxas: std::path::PathBuf,
    cuobjdump: std::path::PathBuf,
}

impl Sass {
    pub fn find() -> Option<Sass> {
        let Some(ptxas) = ptxas() else {
            assert!(
                !super::required(),
                "TRUENO_REQUIRE_PTXAS is set but ptxas was not found"
            );
            eprintln!("SKIPPED: ptxas not found");
            return None;
        };
        let cuobjdump = ptxas.with_file_name("cuobjdump");
        if !cuobjdump.exists() {
            assert!(
                !super::required(),
                "no cuobjdump beside {}",
                ptxas.display()
            );
            eprintln!("SKIPPED: no cuobjdump beside ptxas");
            return None;
        }
        Some(Sass { ptxas, cuobjdump })
    }

    /// `kernel` assembled for `target`: its `name_target` stem and its SASS.
    pub fn of(&self, kernel: &dyn trueno_gpu::kernels::Kernel, target: Target) -> (String, String) {
        let (stem, cubin, _) = self.assemble(kernel, target);
        let out = std::process::Command::new(&self.cuobjdump)
            .arg("-sass")
            .arg(&cubin)
            .output()
            .unwrap();
        (stem, String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The registers a thread of `kernel` holds on `target`, as ptxas reports them.
    #[allow(dead_code)]
    pub fn registers(&self, kernel: &dyn trueno_gpu::kernels::Kernel, target: Target) -> u32 {
        let (stem, _, log) = self.assemble(kernel, target);
        let stats = trueno_gpu::analyze::ptxas::parse_verbose(&log);
        stats
            .first()
            .unwrap_or_else(|| panic!("{stem}: no statistics\n{log}"))
            .registers
    }

    /// `kernel` assembled for `target`: its stem, cubin and ptxas log.
    fn assemble(
        &self,
        kernel: &dyn trueno_gpu::kernels::Kernel,
        target: Target,
    ) -> (String, std::path::PathBuf, String) {
        let stem = format!("{}_{}", kernel.name(), target.name());
        let (cubin, log) =
            super::assemble_cached(&self.ptxas, &kernel.emit_ptx(target).unwrap(), target)
                .unwrap_or_else(|log| panic!("{stem}: {log}"));
        (stem, cubin, log)
    }
}
