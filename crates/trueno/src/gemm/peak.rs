//! The physical limit GEMM is measured against: independent FMAs in registers, no memory
//! traffic, on one core and on every core.

#[cfg(target_arch = "x86_64")]
use std::time::Instant;

/// GFLOP/s of back-to-back independent FMAs on `threads` threads (each counted as 2
/// flops), with the widest FMA this CPU has (AVX-512, else AVX2+FMA, else 0). Takes about
/// 30 ms (an AVX-512 core at 2 GHz).
///
/// ```
/// let peak = trueno::gemm::fma_peak_gflops(1);
/// assert!(peak >= 0.0);
/// ```
pub fn fma_peak_gflops(threads: usize) -> f64 {
    fma_rate_gflops(threads, 10_000_000)
}

/// [`fma_peak_gflops`] over `iters` rounds of 12 FMAs a thread (it runs 10 million, about
/// 30 ms): a probe short enough to alternate with the calls it is the limit
/// of, on a machine whose speed drifts (a shared VM's one-thread probe read 85-131
/// GFLOP/s over ten runs within a second).
///
/// ```
/// let rate = trueno::gemm::fma_rate_gflops(1, 100_000);
/// assert!(rate >= 0.0);
/// ```
pub fn fma_rate_gflops(threads: usize, iters: u64) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        let per_thread = || {
            let t = Instant::now();
            let flops = run(iters);
            flops / t.elapsed().as_secs_f64()
        };
        let rates: Vec<f64> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads).map(|_| s.spawn(per_thread)).collect();
            hs.into_iter().map(|h| h.join().unwrap_or(0.0)).collect()
        });
        rates.iter().sum::<f64>() / 1e9
    }
    // No FMA loop for this architecture yet; and no thread spawning is compiled in, so a
    // wasm32 build never links `pthread_create` (WASI C libraries without threads lack it).
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (threads, iters);
        0.0
    }
}

#[cfg(target_arch = "x86_64")]
fn run(iters: u64) -> f64 {
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: AVX-512F was detected on this CPU just above.
        return unsafe { fma512(iters) };
    }
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: AVX2 and FMA were detected on this CPU just above.
        return unsafe { fma256(iters) };
    }
    0.0
}

macro_rules! fma_loop {
    ($name:ident, $feat:literal, $v:ty, $set:ident, $fma:ident, $add:ident, $store:ident, $lanes:expr) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $feat)]
        fn $name(iters: u64) -> f64 {
            use std::arch::x86_64::*;
            const N: usize = 12;
            let mut acc: [$v; N] = [$set(0.0); N];
            let (a, b) = ($set(1.000_000_1), $set(0.999_999_9));
            for _ in 0..iters {
                for x in acc.iter_mut() {
                    *x = $fma(*x, a, b);
                }
            }
            let mut s = acc[0];
            for x in &acc[1..] {
                s = $add(s, *x);
            }
            let mut out = [0.0f32; $lanes];
            // SAFETY: `out` holds exactly one vector.
            unsafe { $store(out.as_mut_ptr(), s) };
            std::hint::black_box(out);
            (iters * N as u64 * $lanes * 2) as f64
        }
    };
}

fma_loop!(
    fma512,
    "avx512f",
    __m512,
    _mm512_set1_ps,
    _mm512_fmadd_ps,
    _mm512_add_ps,
    _mm512_storeu_ps,
    16
);
fma_loop!(
    fma256,
    "avx2,fma",
    __m256,
    _mm256_set1_ps,
    _mm256_fmadd_ps,
    _mm256_add_ps,
    _mm256_storeu_ps,
    8
);
