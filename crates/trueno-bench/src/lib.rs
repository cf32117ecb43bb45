//! Helpers shared by the trueno benchmarks.

pub use trueno::gemm::fma_peak_gflops;

/// Where a device bench writes its JSON lines: the file after `--out`, or nowhere.
pub fn out_writer(args: &[String]) -> Box<dyn std::io::Write> {
    match args
        .iter()
        .position(|a| a == "--out")
        .and_then(|i| args.get(i + 1))
    {
        Some(p) => Box::new(std::fs::File::create(p).expect("create --out file")),
        None => Box::new(std::io::sink()),
    }
}

pub mod evict;
pub mod paired;
pub mod read_rate;
