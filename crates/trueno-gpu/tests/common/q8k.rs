//! The integer path's checks that the GPU tests of `Stream::qgemv_q8k` share
//! (gpu_qgemv_q8k.rs, gpu_qgemv_q8k_routing.rs): the f64 reference with its error bound,
//! a product through the GPU's own quantization, a random product checked row by row.

use super::device::{POISON, Rng, cpu_format as cpu, poisoned};
use trueno_gpu::driver::Context;
use trueno_gpu::kernels::qgemv::QuantFormat;
use trueno_gpu::memory::QuantMatrix;
use trueno_quant::QuantFormat as CpuFormat;

/// `W a` in f64 from the dequantized weights and activations, and a bound on the f32
/// error: `(blocks + 64) * eps` times the sum of `|d * sc * q * a| + |dmin * m * a|`
/// (Q4_K / Q5_K: the scale and min parts apart, found by dequantizing with `dmin`, then
/// `d`, zeroed; the other formats have only the first).
pub fn reference(
    f: QuantFormat,
    w: &[u8],
    act: &[u8],
    rows: usize,
    cols: usize,
) -> Vec<(f64, f64)> {
    let deq = |bytes: &[u8], format: CpuFormat, n: usize| {
        let mut out = vec![0f32; n];
        trueno_quant::dequantize(format, bytes, &mut out).unwrap();
        out
    };
    let zeroed = |at: usize| {
        let mut v = w.to_vec();
        for b in v.chunks_exact_mut(f.block_bytes()) {
            b[at..at + 2].fill(0);
        }
        deq(&v, cpu(f), rows * cols)
    };
    let full = deq(w, cpu(f), rows * cols);
    // Only Q4_K and Q5_K have a min term; the other formats' weights are their scale part.
    let (scaled, mins) = if matches!(f, QuantFormat::Q4K | QuantFormat::Q5K) {
        (zeroed(2), zeroed(0))
    } else {
        (full.clone(), vec![0.0; rows * cols])
    };
    let a = deq(act, CpuFormat::Q8K, cols);
    let blocks = (cols / 256) as f64;
    (0..rows)
        .map(|r| {
            let row = r * cols..(r + 1) * cols;
            let dot: f64 = full[row.clone()]
                .iter()
                .zip(&a)
                .map(|(&w, &a)| w as f64 * a as f64)
                .sum();
            let mass: f64 = scaled[row.clone()]
                .iter()
                .zip(&mins[row])
                .zip(&a)
                .map(|((&s, &m), &a)| (s as f64 * a as f64).abs() + (m as f64 * a as f64).abs())
                .sum();
            (dot, (blocks + 64.0) * f32::EPSILON as f64 * mass)
        })
        .collect()
}

/// `x` quantized to Q8_K on the GPU and multiplied by `w` (`Stream::qgemv_q8k`, into an
/// output poisoned first): the activation blocks' bytes and the output.
pub fn quantize_and_multiply(ctx: &Context, w: &QuantMatrix, x: &[f32]) -> (Vec<u8>, Vec<f32>) {
    let xd = ctx.upload(x).unwrap();
    let mut q = ctx.alloc_q8k(x.len()).unwrap();
    let mut yd = poisoned(ctx, w.rows());
    let mut s = ctx.stream().unwrap().record();
    s.quantize_q8k(&xd, &q).unwrap();
    s.qgemv_q8k(w, &q, &yd).unwrap();
    s.sync().unwrap();
    (q.to_blocks().unwrap(), yd.to_vec().unwrap())
}

/// Every row written and within its bound of the reference.
pub fn assert_rows(name: &str, y: &[f32], want: &[(f64, f64)]) {
    assert_eq!(y.len(), want.len());
    for (r, (&got, &(want, bound))) in y.iter().zip(want).enumerate() {
        assert!(got.to_bits() != POISON, "{name}: row {r} never written");
        let err = (got as f64 - want).abs();
        assert!(
            err <= bound,
            "{name} row {r}: got {got}, want {want} (err {err:e} > {bound:e})"
        );
    }
}

/// A random `rows x cols` matrix of format `f` against a random vector through
/// `Stream::qgemv_q8k`, every row checked against the reference; returns the kernel the
/// context chose for it.
pub fn random_product_matches(
    ctx: &Context,
    rng: &mut Rng,
    f: QuantFormat,
    (rows, cols): (usize, usize),
) -> String {
    let x = rng.vec(cols, -1.0, 1.0);
    let act = trueno_quant::quantize(CpuFormat::Q8K, &x).unwrap();
    let dense = rng.vec(rows * cols, -2.0, 2.0);
    let w = trueno_quant::quantize_rows(cpu(f), &dense, cols).unwrap();
    let wd = ctx.upload_quant(f, rows, cols, &w).unwrap();
    let chosen = ctx.qgemv_q8k_kernel(&wd).unwrap().name();
    let (_, y) = quantize_and_multiply(ctx, &wd, &x);
    let want = reference(f, &w, &act, rows, cols);
    assert_rows(&format!("{chosen} {rows}x{cols}"), &y, &want);
    chosen
}
