//! Helpers shared by the trueno benchmarks.

pub use trueno::gemm::fma_peak_gflops;
