//! Interleaved best-of-N: trueno vs faer, square sizes (tuning aid; both use rayon's
//! pool, so RAYON_NUM_THREADS=1 runs both on one thread).
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, Par};
use std::time::Instant;
use trueno::{Matrix, Transpose};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|s| s.parse().ok())
        .collect();
    let sizes = if args.is_empty() {
        vec![256, 512, 1024]
    } else {
        args
    };
    // Seconds per size, alternating the two in ~5 ms bursts: best-of over many bursts
    // finds the VM's quiet moments for both.
    let secs: f64 = std::env::var("SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1.5);
    let e = trueno::engine()?;
    // faer's threads follow rayon's pool size (RAYON_NUM_THREADS), like trueno's.
    let par = match rayon::current_num_threads() {
        1 => Par::Seq,
        t => Par::rayon(t),
    };
    for n in sizes {
        let a = Matrix::from_fn(n, n, |i, j| ((i * 7 + j * 3) % 13) as f32 * 0.1 - 0.6)?;
        let b = Matrix::from_fn(n, n, |i, j| ((i * 5 + j * 11) % 17) as f32 * 0.1 - 0.8)?;
        // C on a 64-byte boundary when ALIGN_C is set (faer aligns its own storage).
        let mut cbuf = vec![0.0f32; n * n + 16];
        let off = if std::env::var_os("ALIGN_C").is_some() {
            cbuf.as_ptr().align_offset(64)
        } else {
            (cbuf.as_ptr().align_offset(64) + 4) % 16
        };
        let fa = Mat::<f32>::from_fn(n, n, |i, j| ((i * 7 + j * 3) % 13) as f32 * 0.1 - 0.6);
        let fb = Mat::<f32>::from_fn(n, n, |i, j| ((i * 5 + j * 11) % 17) as f32 * 0.1 - 0.8);
        let mut fc = Mat::<f32>::zeros(n, n);
        let (mut bt, mut bf) = (f64::MAX, f64::MAX);
        let fl = 2.0 * (n * n * n) as f64 / 1e9;
        let reps = ((0.005 * 100.0 / fl) as usize).max(1);
        let start = Instant::now();
        while start.elapsed().as_secs_f64() < secs {
            for _ in 0..reps {
                let t = Instant::now();
                let mut cv = trueno::MatMut::new(&mut cbuf[off..off + n * n], n, n, n)?;
                e.gemm(
                    1.0,
                    a.view(),
                    Transpose::No,
                    b.view(),
                    Transpose::No,
                    0.0,
                    &mut cv,
                )?;
                bt = bt.min(t.elapsed().as_secs_f64());
            }
            for _ in 0..reps {
                let t = Instant::now();
                matmul(
                    fc.as_mut(),
                    Accum::Replace,
                    fa.as_ref(),
                    fb.as_ref(),
                    1.0,
                    par,
                );
                bf = bf.min(t.elapsed().as_secs_f64());
            }
        }
        println!(
            "{n}: trueno {:.1}  faer {:.1} GFLOP/s  ratio {:.2}",
            fl / bt,
            fl / bf,
            bf / bt
        );
    }
    Ok(())
}
