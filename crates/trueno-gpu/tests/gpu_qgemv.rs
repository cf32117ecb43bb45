//! Quantized matrix-vector products on the GPU against trueno-quant's dequantization and
//! an f64 dot product: quantized random rows and raw random blocks (every quant byte
//! value, scales of both signs), at block counts below, at and past a warp's step, and
//! the shape and aliasing errors that must come before a launch.
//!
//! Without a CUDA device each test prints SKIPPED and passes (`TRUENO_REQUIRE_GPU=1`
//! makes that a failure).

mod common;
use common::device::{POISON, Rng, cpu_format as cpu, ctx, poisoned, small, weight_cases};
use trueno_gpu::kernels::qgemv::QuantFormat;

/// `W x` through trueno-quant's dequantization, in f64, and the bound on an f32 sum of
/// the same products: each output's error stays below
/// `(blocks + 64) * eps * sum |w_i x_i|` (eight-term lane chains, one running sum per
/// lane, a five-step warp tree).
fn reference(f: QuantFormat, w: &[u8], x: &[f32], rows: usize) -> Vec<(f64, f64)> {
    let cols = x.len();
    let mut deq = vec![0f32; rows * cols];
    trueno_quant::dequantize(cpu(f), w, &mut deq).unwrap();
    let blocks = (cols / f.block_elems()) as f64;
    deq.chunks_exact(cols)
        .map(|r| {
            let dot: f64 = r.iter().zip(x).map(|(&a, &b)| a as f64 * b as f64).sum();
            let mass: f64 = r
                .iter()
                .zip(x)
                .map(|(&a, &b)| (a as f64 * b as f64).abs())
                .sum();
            (dot, (blocks + 64.0) * f32::EPSILON as f64 * mass)
        })
        .collect()
}

#[test]
fn qgemv_matches_the_dequantized_reference() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(0x9e37);
    for f in QuantFormat::ALL {
        // Blocks per row: 1, 3 (under a step), 6 (a K-quant pass of four and two left), 8
        // (one step), 37 (ragged), 128; then the LLM widths.
        let e = f.block_elems();
        let mut shapes = vec![(1, e), (7, 3 * e), (5, 6 * e), (9, 8 * e), (33, 37 * e)];
        shapes.push((64, 128 * e));
        if !small() {
            shapes.extend([(1031, 4096), (300, 14336)]);
        }
        for &(rows, cols) in &shapes {
            let x = rng.vec(cols, -1.0, 1.0);
            for (kind, w) in weight_cases(&mut rng, f, rows, cols) {
                let wd = ctx.upload_quant(f, rows, cols, &w).unwrap();
                let xd = ctx.upload(&x).unwrap();
                let mut yd = poisoned(&ctx, rows);
                let mut s = ctx.stream().unwrap().record();
                s.qgemv(&wd, &xd, &yd).unwrap();
                s.sync().unwrap();
                let y = yd.to_vec().unwrap();
                for (r, (&got, &(want, bound))) in
                    y.iter().zip(&reference(f, &w, &x, rows)).enumerate()
                {
                    assert!(
                        got.to_bits() != POISON,
                        "{} {kind} {rows}x{cols}: row {r} never written",
                        f.name()
                    );
                    let err = (got as f64 - want).abs();
                    assert!(
                        err <= bound,
                        "{} {kind} {rows}x{cols} row {r}: got {got}, want {want} (err {err:e} > {bound:e})",
                        f.name()
                    );
                }
            }
        }
    }
}

#[test]
fn qgemv_rejects_bad_shapes_before_launch() {
    let Some(ctx) = ctx() else { return };
    for f in QuantFormat::ALL {
        // Two blocks per row; 4 columns short of that is not a whole number of blocks.
        let c = 2 * f.block_elems();
        let bytes = vec![0u8; f.matrix_bytes(4, c).unwrap()];
        let short_bytes = &bytes[..bytes.len() - 2];
        assert!(ctx.upload_quant(f, 4, c - 4, &bytes).is_err(), "cols");
        assert!(ctx.upload_quant(f, 4, c, short_bytes).is_err(), "short");
        assert!(ctx.upload_quant(f, 0, c, &[]).is_err(), "empty");
        let w = ctx.upload_quant(f, 4, c, &bytes).unwrap();
        assert_eq!((w.rows(), w.cols(), w.bytes()), (4, c, bytes.len()));
        let x = ctx.alloc::<f32>(c).unwrap();
        let y = ctx.alloc::<f32>(4).unwrap();
        let short = ctx.alloc::<f32>(c - 1).unwrap();
        let square_bytes = vec![0u8; f.matrix_bytes(c, c).unwrap()];
        let square = ctx.upload_quant(f, c, c, &square_bytes).unwrap();
        let mut s = ctx.stream().unwrap().record();
        assert!(s.qgemv(&w, &short, &y).is_err(), "x length");
        assert!(s.qgemv(&w, &x, &short).is_err(), "y length");
        assert!(s.qgemv(&square, &x, &x).is_err(), "y aliasing x");
        s.sync().unwrap();
    }
}

/// bf16 and f16 activations are widened exactly as they are loaded: each format's product
/// from them is the f32 kernel's on the widened values, bit for bit (that kernel is held
/// to the dequantized reference above), at block counts below, at and past a warp step.
#[test]
fn sixteen_bit_activations_give_the_f32_product_of_their_values() {
    use half::{bf16, f16};
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(0x16a);
    for f in QuantFormat::ALL {
        let e = f.block_elems();
        for (rows, cols) in [(3, e), (17, 5 * e), (64, 33 * e)] {
            let w = &weight_cases(&mut rng, f, rows, cols)[0].1;
            let wd = ctx.upload_quant(f, rows, cols, w).unwrap();
            let x = rng.vec(cols, -2.0, 2.0);
            let xb: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
            let xh: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
            let wide_b: Vec<f32> = xb.iter().map(|v| v.to_f32()).collect();
            let wide_h: Vec<f32> = xh.iter().map(|v| v.to_f32()).collect();
            let (db, dh) = (ctx.upload(&xb).unwrap(), ctx.upload(&xh).unwrap());
            let (dwb, dwh) = (ctx.upload(&wide_b).unwrap(), ctx.upload(&wide_h).unwrap());
            let mut y: Vec<_> = (0..4).map(|_| poisoned(&ctx, rows)).collect();
            let mut s = ctx.stream().unwrap().record();
            s.qgemv(&wd, &db, &y[0]).unwrap();
            s.qgemv(&wd, &dwb, &y[1]).unwrap();
            s.qgemv(&wd, &dh, &y[2]).unwrap();
            s.qgemv(&wd, &dwh, &y[3]).unwrap();
            s.sync().unwrap();
            let bits = |v: Vec<f32>| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            for (k, name) in [(0, "bf16"), (2, "f16")] {
                let got = bits(y[k].to_vec().unwrap());
                assert!(got.iter().all(|&b| b != POISON), "{} {name}", f.name());
                assert_eq!(
                    got,
                    bits(y[k + 1].to_vec().unwrap()),
                    "{} {rows}x{cols} {name}",
                    f.name()
                );
            }
        }
    }
}
