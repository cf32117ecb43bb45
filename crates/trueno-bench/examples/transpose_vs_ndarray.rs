//! trueno's transpose against ndarray's `t().as_standard_layout()`, interleaved:
//! `transpose_vs_ndarray [N]...` (default 512 2048).
//!
//! As in `gemm_vs_faer`, the two alternate in short bursts for `SECS` seconds per size
//! (default 1.5) and each keeps its best call, so both are timed in the same quiet
//! moments of a VM whose speed drifts over seconds. A plain copy of the same matrix
//! (`copy_from_slice`) runs in the same bursts: the memory system's limit for moving
//! those bytes on one thread. trueno splits a transpose of 128K floats or more across
//! rayon's pool (`RAYON_NUM_THREADS=1` keeps it on one thread); ndarray's and the copy
//! run on one.

use std::time::Instant;
use trueno::Matrix;

fn value(i: usize, j: usize) -> f32 {
    ((i * 7 + j * 13) % 29) as f32 * 0.05 - 0.7
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut sizes = Vec::new();
    for arg in std::env::args().skip(1) {
        sizes.push(arg.parse::<usize>().map_err(|_| format!("not N: {arg}"))?);
    }
    if sizes.is_empty() {
        sizes = vec![512, 2048];
    }
    let secs: f64 = std::env::var("SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1.5);
    let e = trueno::engine()?;
    let threads = rayon::current_num_threads();
    println!(
        "| n | threads | trueno GiB/s | ndarray GiB/s | trueno / ndarray | copy GiB/s (1 thread) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    for n in sizes {
        let a = Matrix::from_fn(n, n, value)?;
        let mut t = Matrix::zeros(n, n)?;
        let na = ndarray::Array2::from_shape_fn((n, n), |(i, j)| value(i, j));
        let mut copy = vec![0.0f32; n * n];
        let (mut bt, mut bn, mut bc) = (f64::MAX, f64::MAX, f64::MAX);
        let reps = ((4e6 / (n * n) as f64) as usize).max(1);
        let start = Instant::now();
        while start.elapsed().as_secs_f64() < secs {
            for _ in 0..reps {
                let s = Instant::now();
                e.transpose(a.view(), &mut t.view_mut())?;
                bt = bt.min(s.elapsed().as_secs_f64());
            }
            for _ in 0..reps {
                let s = Instant::now();
                let out = na.t().as_standard_layout().into_owned();
                bn = bn.min(s.elapsed().as_secs_f64());
                std::hint::black_box(out);
            }
            for _ in 0..reps {
                let s = Instant::now();
                copy.copy_from_slice(a.as_slice());
                bc = bc.min(s.elapsed().as_secs_f64());
                std::hint::black_box(&copy);
            }
        }
        // Bytes moved: the source read and the destination written.
        let gib = (2 * n * n * 4) as f64 / (1u64 << 30) as f64;
        println!(
            "| {n} | {threads} | {:.1} | {:.1} | {:.2}x | {:.1} |",
            gib / bt,
            gib / bn,
            bn / bt,
            gib / bc
        );
    }
    Ok(())
}
