//! Shared with trueno-wgpu's suites (which include this file by path): a small PRNG, the
//! special values every op must handle, and the two facts of the GPU contract both
//! crates' tests apply (the f32 tree sum's error bound, subnormal flushing).

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

/// Error bound of trueno-wgpu's f32 sum of `n` terms against the exact sum, relative to
/// the sum of magnitudes: each thread adds its share in sequence, then 8 tree levels per
/// workgroup, 4 sequential folds of at most 1024 partials and 8 more levels; each step
/// rounds once.
pub fn gpu_sum_bound(n: usize) -> f64 {
    let groups = n.div_ceil(1024).clamp(1, 1024);
    let per_thread = n.div_ceil(256 * groups);
    (per_thread + 8 + 4 + 8) as f64 * f32::EPSILON as f64
}

/// `x` with a subnormal flushed to a zero of its sign, as a GPU may read it.
pub fn flush(x: f32) -> f32 {
    if x != 0.0 && x.abs() < f32::MIN_POSITIVE {
        0.0f32.copysign(x)
    } else {
        x
    }
}
