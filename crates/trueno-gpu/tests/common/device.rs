//! The device side of the GPU suites: opening the device (or skipping without one),
//! reproducible random data, poisoned outputs and the closeness check.

use half::{bf16, f16};
use trueno_gpu::driver::Context;
use trueno_gpu::kernels::qgemv::QuantFormat;
use trueno_gpu::memory::{DeviceBuffer, HalfElem};

/// A NaN bit pattern no kernel produces: poison for outputs.
pub const POISON: u32 = 0x7FC0_0ABC;

pub fn ctx() -> Option<Context> {
    match Context::new(0) {
        Ok(c) => Some(c),
        Err(e) => {
            assert!(
                std::env::var("TRUENO_REQUIRE_GPU").is_err(),
                "TRUENO_REQUIRE_GPU set but no device: {e}"
            );
            eprintln!("SKIPPED: no CUDA device ({e})");
            None
        }
    }
}

pub fn small() -> bool {
    std::env::var("TRUENO_GPU_SMALL").is_ok()
}

/// splitmix64: reproducible random data without a dependency.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * ((self.next() >> 40) as f32 / (1u64 << 24) as f32)
    }
    pub fn vec(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }
}

/// `n` random 16-bit values in [-1, 1).
pub fn halves<T: Half>(rng: &mut Rng, n: usize) -> Vec<T> {
    rng.vec(n, -1.0, 1.0).into_iter().map(T::from_f32).collect()
}

/// The tensor-core GEMM suites' shapes (m, n, k): one row, a k below one k-tile, tiles
/// ragged in every dimension, more k-tiles than pipeline stages (the rings wrap), an
/// eight-column output; a large one unless `TRUENO_GPU_SMALL` (the sanitizers' runs).
pub fn gemm_shapes() -> Vec<(usize, usize, usize)> {
    let mut shapes = vec![
        (1, 8, 8),
        (7, 16, 24),
        (17, 24, 40),
        (128, 128, 32),
        (128, 128, 96),
        (129, 136, 72),
        (255, 264, 8),
        (300, 8, 520),
        (64, 1000, 1000),
    ];
    if !small() {
        shapes.push((520, 392, 2056));
    }
    shapes
}

pub fn poisoned(ctx: &Context, n: usize) -> DeviceBuffer<f32> {
    let mut b = ctx.alloc::<f32>(n).unwrap();
    b.fill_u32(POISON).unwrap();
    b
}

pub fn assert_close(what: &str, got: &[f32], want: &[f32], rel: f64, abs: f64) {
    assert_eq!(got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(g.to_bits() != POISON, "{what}: element {i} never written");
        if w.is_nan() {
            assert!(g.is_nan(), "{what}[{i}]: got {g}, want NaN");
            continue;
        }
        if w.is_infinite() {
            assert_eq!(g, w, "{what}[{i}]");
            continue;
        }
        let err = (g as f64 - w as f64).abs();
        assert!(
            err <= abs + rel * (w as f64).abs(),
            "{what}[{i}]: got {g}, want {w} (err {err:e})"
        );
    }
}

/// The 16-bit input types of the tensor-core kernels, as the suites build and read them.
pub trait Half: HalfElem {
    /// Unit roundoff (half the distance from 1 to the next value).
    const UNIT: f64;
    fn from_f32(x: f32) -> Self;
    fn to_f64(self) -> f64;
    fn to_bits(self) -> u16;
}
impl Half for bf16 {
    const UNIT: f64 = 1.0 / 256.0;
    fn from_f32(x: f32) -> Self {
        bf16::from_f32(x)
    }
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
    fn to_bits(self) -> u16 {
        self.to_bits()
    }
}
impl Half for f16 {
    const UNIT: f64 = 1.0 / 2048.0;
    fn from_f32(x: f32) -> Self {
        f16::from_f32(x)
    }
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
    fn to_bits(self) -> u16 {
        self.to_bits()
    }
}

/// f16 scales of both signs and a wide range of sizes (bit patterns: 1, 0.1, -0.5,
/// about 1e-3, -3.5).
const SCALES: [u16; 5] = [0x3C00, 0x2E66, 0xB800, 0x1419, 0xC300];

/// Raw blocks: random quant bytes (so Q8_0's -128, which quantization never writes, is
/// covered; for Q4_K every 6-bit scale and min too) with one of [`SCALES`] in each block's
/// f16 fields (Q4_K's `d` and `dmin`).
pub fn raw_blocks(rng: &mut Rng, f: QuantFormat, rows: usize, cols: usize) -> Vec<u8> {
    let mut w: Vec<u8> = (0..f.matrix_bytes(rows, cols).unwrap())
        .map(|_| rng.next() as u8)
        .collect();
    // Byte offsets of the f16 fields: Q4_K's d and dmin lead, Q6_K's d is last.
    let fields: &[usize] = match f {
        QuantFormat::Q4K | QuantFormat::Q5K => &[0, 2],
        QuantFormat::Q6K => &[208],
        _ => &[0],
    };
    for b in w.chunks_exact_mut(f.block_bytes()) {
        for &at in fields {
            let s = SCALES[(rng.next() % SCALES.len() as u64) as usize];
            b[at..at + 2].copy_from_slice(&s.to_le_bytes());
        }
    }
    w
}

/// trueno-quant's name for a GPU block format.
pub fn cpu_format(f: QuantFormat) -> trueno_quant::QuantFormat {
    use trueno_quant::QuantFormat as Cpu;
    match f {
        QuantFormat::Q8_0 => Cpu::Q8_0,
        QuantFormat::Q4_0 => Cpu::Q4_0,
        QuantFormat::Q4K => Cpu::Q4K,
        QuantFormat::Q5K => Cpu::Q5K,
        QuantFormat::Q6K => Cpu::Q6K,
    }
}

/// The two weight matrices every quantized product is tried on: random values in
/// [-2, 2) quantized by trueno-quant, and [`raw_blocks`].
pub fn weight_cases(
    rng: &mut Rng,
    f: QuantFormat,
    rows: usize,
    cols: usize,
) -> [(&'static str, Vec<u8>); 2] {
    let dense = rng.vec(rows * cols, -2.0, 2.0);
    let quantized = trueno_quant::quantize_rows(cpu_format(f), &dense, cols).unwrap();
    [
        ("quantized", quantized),
        ("raw", raw_blocks(rng, f, rows, cols)),
    ]
}
