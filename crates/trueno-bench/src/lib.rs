//! Helpers shared by the trueno benchmarks.
