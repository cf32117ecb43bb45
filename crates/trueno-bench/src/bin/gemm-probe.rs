//! Quick GEMM throughput probe for tuning (criterion's `gemm` bench is the record):
//! `gemm-probe SIZE [REPS]`, single thread unless RAYON_NUM_THREADS says otherwise;
//! `TRUENO_GEMM_MICRO=RxC` picks a micro-kernel shape; `TRUENO_PROBE_BT=1` stores B as
//! n x k and multiplies by its transpose (`x·Wᵀ`); `TRUENO_PROBE_EVICT=MiB` reads that
//! many MiB of other data before each call, as the interleaved comparison's peer calls
//! do (its operands then come from L3, not L2); `TRUENO_PROBE_LDC=FLOATS` gives C (both
//! the timed and the profiled calls' C) that row stride instead of its width.

use std::time::Instant;
use trueno::{Matrix, Transpose};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(512);
    // Optional rectangular shape: M N K from TRUENO_PROBE_MNK.
    let (m, nn, kk) = std::env::var("TRUENO_PROBE_MNK")
        .ok()
        .and_then(|v| {
            let p: Vec<usize> = v.split(',').filter_map(|x| x.parse().ok()).collect();
            (p.len() == 3).then(|| (p[0], p[1], p[2]))
        })
        .unwrap_or((n, n, n));
    let reps: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(5);
    let e = trueno::engine()?;
    let a = Matrix::from_fn(m, kk, |i, j| ((i * 7 + j * 3) % 13) as f32 * 0.1 - 0.6)?;
    let bt = std::env::var_os("TRUENO_PROBE_BT").is_some();
    let (tb, b) = match bt {
        true => (
            Transpose::Yes,
            Matrix::from_fn(nn, kk, |j, i| ((i * 5 + j * 11) % 17) as f32 * 0.1 - 0.8)?,
        ),
        false => (
            Transpose::No,
            Matrix::from_fn(kk, nn, |i, j| ((i * 5 + j * 11) % 17) as f32 * 0.1 - 0.8)?,
        ),
    };
    let ldc: usize = std::env::var("TRUENO_PROBE_LDC")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(nn)
        .max(nn);
    let mut c = vec![0.0f32; m * ldc];
    let mut best = f64::MAX;
    let align = std::env::var("TRUENO_PROBE_ALIGN").is_ok();
    let mut cbuf = vec![0.0f32; m * ldc + 16];
    let off = if align {
        cbuf.as_ptr().align_offset(64)
    } else {
        0
    };
    eprintln!(
        "C at {:p} (mod 64 = {})",
        cbuf[off..].as_ptr(),
        cbuf[off..].as_ptr() as usize % 64
    );
    let other = trueno_bench::evict::OtherData::from_env("TRUENO_PROBE_EVICT");
    let evict = || other.read();
    for _ in 0..reps {
        let mut cv = trueno::MatMut::new(&mut cbuf[off..], m, nn, ldc)?;
        evict();
        let t = Instant::now();
        e.gemm(1.0, a.view(), Transpose::No, b.view(), tb, 0.0, &mut cv)?;
        best = best.min(t.elapsed().as_secs_f64());
    }
    let gf = 2.0 * m as f64 * nn as f64 * kk as f64 / best / 1e9;
    let bk = trueno::gemm::blocking_for(e.backend(trueno::OpClass::MatMul));
    println!("{n}: {gf:.1} GFLOP/s  {bk:?}");
    // Each level's best over `reps` profiled calls (one call alone reads well above the
    // best-of timing: the first touches of its buffers, the VM's noise).
    let mut p = None::<trueno::GemmProfile>;
    for _ in 0..reps {
        evict();
        let q = e.gemm_profiled(
            1.0,
            a.view(),
            Transpose::No,
            b.view(),
            tb,
            0.0,
            &mut trueno::MatMut::new(&mut c, m, nn, ldc)?,
        )?;
        p = Some(match p {
            None => q,
            Some(so_far) => trueno::GemmProfile {
                pack_a: so_far.pack_a.min(q.pack_a),
                pack_b: so_far.pack_b.min(q.pack_b),
                kernel: so_far.kernel.min(q.kernel),
                total: so_far.total.min(q.total),
            },
        });
    }
    if let Some(p) = p {
        println!(
            "  profile (each level's best of {reps}): pack A {:?}, pack B {:?}, kernel {:?}, total {:?}",
            p.pack_a, p.pack_b, p.kernel, p.total
        );
    }
    if args.iter().any(|a| a == "--peak") {
        println!(
            "FMA peak 1 thread {:.1} GFLOP/s, 2 threads {:.1}",
            trueno_bench::fma_peak_gflops(1),
            trueno_bench::fma_peak_gflops(2)
        );
    }
    Ok(())
}
