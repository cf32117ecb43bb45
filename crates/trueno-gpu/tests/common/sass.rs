//! Kernels' machine code for the SASS assertions (tests/ptxas.rs, sass_hopper.rs,
//! sass_quant.rs): assembled by ptxas,
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

/// A tensor-core GEMM's epilogue in machine code: the accumulators staged in shared
/// memory as pairs (STS.64: a quarter of the tile's `cols` a thread, 32 for 128 x 128
/// tiles), then [`assert_staged_stores`] for one staged 64-row tile a warpgroup.
pub fn assert_staged_epilogue(
    stem: &str,
    code: &str,
    out: trueno_gpu::kernels::float_type::FloatType,
    cols: usize,
) {
    assert_staged_epilogues(stem, code, (out, cols), 1, 0)
}

/// [`assert_staged_epilogue`] for `tiles` staged 64-row tiles a warpgroup, in a kernel
/// whose main loop packs `main_packs` pairs of its own (F2FP).
pub fn assert_staged_epilogues(
    stem: &str,
    code: &str,
    (out, cols): (trueno_gpu::kernels::float_type::FloatType, usize),
    tiles: usize,
    main_packs: usize,
) {
    let count = code.matches("STS.64").count();
    assert!(count >= cols / 4, "{stem}: {count} staging stores");
    assert_staged_stores(stem, code, out, tiles, main_packs);
}

/// The stores of a staged epilogue (`tiles` calls of the common store a warpgroup):
/// the staged tile read back 16 bytes at a time (LDS.128) and stored coalesced, 16 bytes
/// of f32 (STG.E.128) or 8 of 16-bit values packed in pairs (F2FP, STG.E.64), in a loop of
/// two rows a step: two store instructions a call, not one per accumulator pair.
pub fn assert_staged_stores(
    stem: &str,
    code: &str,
    out: trueno_gpu::kernels::float_type::FloatType,
    tiles: usize,
    main_packs: usize,
) {
    use trueno_gpu::kernels::float_type::FloatType;
    let count = |op: &str| code.matches(op).count();
    assert!(
        count("LDS.128") >= 1,
        "{stem}: no 16-byte reads of the staged tile"
    );
    // Two rows a loop step: two stores (and two pairs of packs) of each kind.
    let (store, packs) = match out {
        FloatType::F32 => ("STG.E.128", 0),
        _ => ("STG.E.64", 4),
    };
    assert_eq!(
        count("STG."),
        count(store),
        "{stem}: stores other than {store}"
    );
    assert_eq!(count(store), 2 * tiles, "{stem}: {store}");
    assert_eq!(
        count("F2FP"),
        packs * tiles + main_packs,
        "{stem}: F2FP packs"
    );
}
