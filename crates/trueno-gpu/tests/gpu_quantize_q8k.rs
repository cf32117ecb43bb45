//! Activations quantized to Q8_K on the GPU (`Stream::quantize_q8k`) against
//! trueno-quant's quantizer, byte for byte, edge values included, from f32, bf16 and f16
//! inputs. The products that read them: `gpu_qgemv_q8k.rs`.
//!
//! Without a CUDA device each test prints SKIPPED and passes (`TRUENO_REQUIRE_GPU=1`
//! makes that a failure).

mod common;
use common::device::{Rng, ctx, poisoned, small};
use trueno_gpu::kernels::qgemv::QuantFormat;
use trueno_quant::QuantFormat as CpuFormat;

/// Blocks of 256 that exercise the quantizer's corners, then random values.
fn edge_vector(rng: &mut Rng) -> Vec<f32> {
    let mut blocks: Vec<Vec<f32>> = vec![
        vec![0.0; 256],
        // Equal magnitudes of both signs: the first one sets the sign of the scale.
        (0..256)
            .map(|i| if i % 3 == 0 { -2.0 } else { 2.0 })
            .collect(),
        (0..256)
            .map(|i| if i % 3 == 1 { -2.0 } else { 2.0 })
            .collect(),
        // iscale = -1: every x.5 is a tie, rounded to even.
        (0..256).map(|i| (i as f32 - 128.0) / 2.0).collect(),
        // Subnormals: iscale overflows to infinity (0 * inf quantizes to 127).
        (0..256).map(|i| (i as f32 - 100.0) * 1e-41).collect(),
        // Non-finite values: the block's scale becomes NaN.
        vec![f32::NAN; 256],
        (0..256)
            .map(|i| if i == 7 { f32::INFINITY } else { i as f32 })
            .collect(),
        (0..256)
            .map(|i| if i == 200 { f32::NAN } else { i as f32 - 50.0 })
            .collect(),
    ];
    blocks.push(rng.vec(256, -1e-3, 1e-3));
    blocks.push(rng.vec(256, -300.0, 300.0));
    blocks.concat()
}

/// trueno-quant's Q8_K bytes for each finite block; for a block with a non-finite value
/// (which trueno-quant refuses) a NaN scale and zero quants and sums.
fn expected_q8k(x: &[f32]) -> Vec<Vec<u8>> {
    x.chunks(256)
        .map(|b| {
            if b.iter().all(|v| v.is_finite()) {
                trueno_quant::quantize(CpuFormat::Q8K, b).unwrap()
            } else {
                let mut out = vec![0u8; 292];
                out[..4].copy_from_slice(&f32::NAN.to_le_bytes());
                out
            }
        })
        .collect()
}

/// Q8_K blocks (292 bytes: the f32 scale, then quants and sums) equal `want`'s, the scale
/// bit for bit (any NaN matching any NaN).
fn assert_blocks(name: &str, got: &[u8], want: &[Vec<u8>]) {
    assert_eq!(got.len(), want.len() * 292, "{name}");
    for (blk, (g, w)) in got.chunks(292).zip(want).enumerate() {
        let d = |b: &[u8]| f32::from_le_bytes(b[..4].try_into().unwrap());
        let same_d = d(g).to_bits() == d(w).to_bits() || (d(g).is_nan() && d(w).is_nan());
        assert!(same_d, "{name}: block {blk} scale {} != {}", d(g), d(w));
        assert_eq!(&g[4..], &w[4..], "{name}: block {blk} differs");
    }
}

#[test]
fn quantize_q8k_is_trueno_quants_bit_for_bit() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(0x51ed);
    let mut inputs = vec![edge_vector(&mut rng), rng.vec(256, -1.0, 1.0)];
    inputs.push(rng.vec(17 * 256, -4.0, 4.0));
    if !small() {
        inputs.push(rng.vec(14336, -1.0, 1.0));
    }
    for x in &inputs {
        let want = expected_q8k(x);
        let xd = ctx.upload(x).unwrap();
        let mut q = ctx.alloc_q8k(x.len()).unwrap();
        let mut s = ctx.stream().unwrap().record();
        s.quantize_q8k(&xd, &q).unwrap();
        s.sync().unwrap();
        assert_blocks(
            &format!("{} values", x.len()),
            &q.to_blocks().unwrap(),
            &want,
        );
    }
}

/// bf16 and f16 activations quantize as their exact f32 values: the same bytes as
/// trueno-quant's quantization of the widened values (the edge blocks included, in the
/// 16-bit range: f16 holds no 300 and rounds the tiny values to subnormals or zero), and
/// a product from them is the f32 path's bit for bit.
#[test]
fn sixteen_bit_activations_quantize_as_their_f32_values() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(0x16b);
    let x = edge_vector(&mut rng);
    let (rows, cols) = (9, x.len());
    let dense = rng.vec(rows * cols, -2.0, 2.0);
    let w = trueno_quant::quantize_rows(CpuFormat::Q4K, &dense, cols).unwrap();
    let wd = ctx.upload_quant(QuantFormat::Q4K, rows, cols, &w).unwrap();
    let xb: Vec<half::bf16> = x.iter().map(|&v| half::bf16::from_f32(v)).collect();
    let xh: Vec<half::f16> = x.iter().map(|&v| half::f16::from_f32(v)).collect();
    let wide = [
        xb.iter().map(|v| v.to_f32()).collect::<Vec<f32>>(),
        xh.iter().map(|v| v.to_f32()).collect(),
    ];
    let (db, dh) = (ctx.upload(&xb).unwrap(), ctx.upload(&xh).unwrap());
    let (dwb, dwh) = (ctx.upload(&wide[0]).unwrap(), ctx.upload(&wide[1]).unwrap());
    let mut q: Vec<_> = (0..4).map(|_| ctx.alloc_q8k(cols).unwrap()).collect();
    let mut y: Vec<_> = (0..4).map(|_| poisoned(&ctx, rows)).collect();
    let mut s = ctx.stream().unwrap().record();
    s.quantize_q8k(&db, &q[0]).unwrap();
    s.quantize_q8k(&dwb, &q[1]).unwrap();
    s.quantize_q8k(&dh, &q[2]).unwrap();
    s.quantize_q8k(&dwh, &q[3]).unwrap();
    for i in 0..4 {
        s.qgemv_q8k(&wd, &q[i], &y[i]).unwrap();
    }
    s.sync().unwrap();
    for (k, name) in [(0, "bf16"), (2, "f16")] {
        assert_blocks(
            name,
            &q[k].to_blocks().unwrap(),
            &expected_q8k(&wide[k / 2]),
        );
        let bits = |v: Vec<f32>| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(y[k].to_vec().unwrap()),
            bits(y[k + 1].to_vec().unwrap()),
            "{name}: product"
        );
    }
}
