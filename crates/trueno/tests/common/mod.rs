//! Shared test helpers: deterministic random data, the engines of every backend this host
//! can run, the sizes and special values every op is swept over, and tolerant comparison.
#![allow(dead_code)]

use trueno::{Backend, Engine, OpClass, available_cpu_backends};

/// xorshift64*: deterministic, dependency-free test data.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [lo, hi).
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let u = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * u
    }
    pub fn vec(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }
}

/// One engine per CPU backend this host supports, each pinned with `Engine::new`; the test
/// asserts the engine really reports that backend for every class.
pub fn engines() -> Vec<(Backend, Engine)> {
    available_cpu_backends()
        .into_iter()
        .map(|b| {
            let e = Engine::new(b).unwrap();
            for c in OpClass::ALL {
                assert_eq!(e.backend(c), b);
            }
            (b, e)
        })
        .collect()
}

/// 0..=70 (every lane width ±1 up to 4 × 16), then sizes that cross unroll, block
/// (4096) and threading thresholds.
pub fn sizes() -> Vec<usize> {
    let mut v: Vec<usize> = (0..=70).collect();
    v.extend([127, 128, 129, 255, 1000, 4095, 4096, 4097, 8193, 40_007]);
    v
}

/// Values every op must handle: NaN, infinities, zeros, subnormals, extremes.
pub const SPECIALS: [f32; 14] = [
    f32::NAN,
    f32::INFINITY,
    f32::NEG_INFINITY,
    0.0,
    -0.0,
    1e-40,
    -1e-40,
    f32::MIN_POSITIVE,
    f32::MAX,
    f32::MIN,
    1.0,
    -1.0,
    0.5,
    -88.0,
];

/// |got - want| <= abs + rel * |want|, with NaN matching NaN and infinities matching exactly.
pub fn close(got: f32, want: f32, rel: f32, abs: f32) -> bool {
    if want.is_nan() || got.is_nan() {
        return want.is_nan() && got.is_nan();
    }
    if want.is_infinite() || got.is_infinite() {
        return got == want;
    }
    ((got as f64) - (want as f64)).abs() <= abs as f64 + rel as f64 * (want as f64).abs()
}

/// Asserts `close` elementwise, naming the context and the first bad index.
pub fn assert_all_close(ctx: &str, got: &[f32], want: &[f32], rel: f32, abs: f32) {
    assert_eq!(got.len(), want.len(), "{ctx}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            close(g, w, rel, abs),
            "{ctx}: index {i}: got {g:e}, want {w:e} (rel {rel}, abs {abs})"
        );
    }
}

/// A sub-slice starting `offset` elements into a fresh allocation, so kernels see
/// addresses that are not vector-aligned.
pub fn misaligned(data: &[f32], offset: usize) -> Vec<f32> {
    let mut v = vec![f32::NAN; offset];
    v.extend_from_slice(data);
    v
}
