//! The integer quantized matrix-vector path on the GPU: weights of every format against
//! Q8_K activations (against an f64 product of the dequantized weights and the
//! dequantized activations, `common::q8k`), at block counts below, at and past a warp's
//! step, batches, overlapped chains; the shape errors that come before a launch. The
//! kernel variants each device chooses: `gpu_qgemv_q8k_routing.rs`; the activations'
//! quantization itself: `gpu_quantize_q8k.rs`.
//!
//! Without a CUDA device each test prints SKIPPED and passes (`TRUENO_REQUIRE_GPU=1`
//! makes that a failure).

mod common;
use common::device::{POISON, Rng, cpu_format as cpu, ctx, poisoned, small, weight_cases};
use common::q8k::{assert_rows, quantize_and_multiply, reference};
use trueno_gpu::driver::{Recording, Stream};
use trueno_gpu::kernels::Family;
use trueno_gpu::kernels::qgemv::QuantFormat;
use trueno_gpu::kernels::qgemv_dp4a::QgemvQ8kKernel;
use trueno_gpu::kernels::qgemv_q4k_mma::{
    ActLoads, BatchPath, DIRECT_UP_TO, QgemvQ8kMmaKernel, VectorTiles,
};
use trueno_gpu::memory::{DeviceBuffer, Q8kVector, QuantMatrix};
use trueno_quant::QuantFormat as CpuFormat;

#[test]
fn qgemv_q8k_matches_the_dequantized_reference() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(0x4b38);
    for f in QgemvQ8kKernel::FORMATS {
        // Super-blocks per row: 1, 3 (under one warp step), 8 (two steps: one unrolled
        // pass), 12 (three steps: no four-step pass, three left), 30 (lanes with a
        // four-step pass and three left, beside ones with none left), 37 (ragged), 128;
        // then the LLM widths.
        let mut shapes = vec![(1, 256), (7, 3 * 256), (9, 8 * 256), (5, 12 * 256)];
        shapes.extend([(11, 30 * 256), (33, 37 * 256), (64, 128 * 256)]);
        if !small() {
            shapes.extend([(1031, 4096), (300, 14336)]);
        }
        for &(rows, cols) in &shapes {
            let mut x = rng.vec(cols, -1.0, 1.0);
            if cols > 256 {
                // An all-zero activation block (scale 0) in the middle of the row.
                x[256..512].fill(0.0);
            }
            let act = trueno_quant::quantize(CpuFormat::Q8K, &x).unwrap();
            for (kind, w) in weight_cases(&mut rng, f, rows, cols) {
                let wd = ctx.upload_quant(f, rows, cols, &w).unwrap();
                let (q, y) = quantize_and_multiply(&ctx, &wd, &x);
                assert!(q == act, "activations differ");
                let name = format!("{} {kind} {rows}x{cols}", f.name());
                assert_rows(&name, &y, &reference(f, &w, &act, rows, cols));
            }
        }
    }
}

#[test]
fn qgemv_q8k_batch_matches_the_reference_for_each_vector() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(0xba7c);
    for f in QgemvQ8kKernel::FORMATS {
        let mut shapes = vec![(5, 3 * 256), (33, 9 * 256)];
        if !small() {
            shapes.push((300, 4096));
        }
        for &(rows, cols) in &shapes {
            let dense = rng.vec(rows * cols, -2.0, 2.0);
            let w = trueno_quant::quantize_rows(cpu(f), &dense, cols).unwrap();
            let wd = ctx.upload_quant(f, rows, cols, &w).unwrap();
            for vectors in [1, 2, 3, 5, 8] {
                let mut x = rng.vec(vectors * cols, -1.0, 1.0);
                // Vector 1 (where there is one) has an all-zero block.
                let at = cols.min(x.len() - 256);
                x[at..at + 256].fill(0.0);
                let act = trueno_quant::quantize(CpuFormat::Q8K, &x).unwrap();
                let xd = ctx.upload(&x).unwrap();
                let q = ctx.alloc_q8k(vectors * cols).unwrap();
                let mut yd = poisoned(&ctx, vectors * rows);
                let mut s = ctx.stream().unwrap().record();
                s.quantize_q8k(&xd, &q).unwrap();
                s.qgemv_q8k_batch(&wd, &q, &yd, vectors).unwrap();
                s.sync().unwrap();
                let y = yd.to_vec().unwrap();
                let per = cols / 256 * 292;
                for v in 0..vectors {
                    let want = reference(f, &w, &act[v * per..][..per], rows, cols);
                    let name = format!("{} {rows}x{cols} vector {v} of {vectors}", f.name());
                    assert_rows(&name, &y[v * rows..][..rows], &want);
                }
            }
        }
    }
}

#[test]
fn batches_on_the_tensor_cores_match_the_reference_for_each_vector() {
    // The integer tensor-core kernel of each format, forced (and `Auto`, which takes it
    // from `mma_from_vectors`): rows in whole 16-row tiles and ragged ones (5, 17, 613),
    // super-blocks fewer than the block's eight warps (1, 3) and ragged among them (9,
    // 16 + 1), every batch size 1-8 (the missing columns of the eight-column product)
    // beside the dp4a kernel on the same data, and the 16- and 32-vector kernels full
    // and ragged (9, 16, 17, 31, 32 vectors); Q4_K's and Q5_K's staged eight-vector
    // kernel also at one to three vectors.
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(0x1ab5);
    let mut shapes = vec![(5, 256), (16, 3 * 256), (17, 9 * 256), (48, 17 * 256)];
    if !small() {
        shapes.push((613, 4096));
    }
    for (f, &(rows, cols)) in QgemvQ8kMmaKernel::FORMATS
        .into_iter()
        .flat_map(|f| shapes.iter().map(move |s| (f, s)))
    {
        let dense = rng.vec(rows * cols, -2.0, 2.0);
        let w = trueno_quant::quantize_rows(cpu(f), &dense, cols).unwrap();
        let wd = ctx.upload_quant(f, rows, cols, &w).unwrap();
        for vectors in (1..=8).chain([9, 16, 17, 31, 32]) {
            let mut x = rng.vec(vectors * cols, -1.0, 1.0);
            // The last vector's first block all zero (scale 0).
            let at = (vectors - 1) * cols;
            x[at..at + 256].fill(0.0);
            let act = trueno_quant::quantize(CpuFormat::Q8K, &x).unwrap();
            let xd = ctx.upload(&x).unwrap();
            let q = ctx.alloc_q8k(vectors * cols).unwrap();
            let paths = [BatchPath::TensorCores, BatchPath::Auto, BatchPath::Dp4a];
            let mut paths = paths[..if vectors > 8 { 2 } else { 3 }].to_vec();
            // The staged eight-vector kernel below four vectors, where Q4_K and Q5_K
            // otherwise run the direct one.
            let direct = QgemvQ8kMmaKernel(f, VectorTiles::One, ActLoads::Direct).direct();
            if direct && vectors <= DIRECT_UP_TO {
                paths.push(BatchPath::TensorCoresStaged);
            }
            for path in paths {
                let mut yd = poisoned(&ctx, vectors * rows);
                let mut s = ctx.stream().unwrap().record();
                s.quantize_q8k(&xd, &q).unwrap();
                s.qgemv_q8k_batch_with(&wd, &q, &yd, vectors, path).unwrap();
                s.sync().unwrap();
                let y = yd.to_vec().unwrap();
                let per = cols / 256 * 292;
                for v in 0..vectors {
                    let want = reference(f, &w, &act[v * per..][..per], rows, cols);
                    let name = format!(
                        "{} {path:?} {rows}x{cols} vector {v} of {vectors}",
                        f.name()
                    );
                    assert_rows(&name, &y[v * rows..][..rows], &want);
                }
            }
        }
    }
}

#[test]
fn q8k_shapes_are_checked_before_launch() {
    let Some(ctx) = ctx() else { return };
    assert!(ctx.alloc_q8k(0).is_err(), "empty");
    assert!(ctx.alloc_q8k(300).is_err(), "not whole blocks");
    let x = ctx.upload(&[0.5f32; 512]).unwrap();
    let x_ragged = ctx.alloc::<f32>(500).unwrap();
    let q = ctx.alloc_q8k(512).unwrap();
    let q_short = ctx.alloc_q8k(256).unwrap();
    let y = ctx.alloc::<f32>(4).unwrap();
    let y_short = ctx.alloc::<f32>(3).unwrap();
    let y_batch = ctx.alloc::<f32>(8).unwrap();
    let ws: Vec<_> = QuantFormat::ALL
        .iter()
        .map(|&f| {
            let bytes = vec![0u8; f.matrix_bytes(4, 512).unwrap()];
            ctx.upload_quant(f, 4, 512, &bytes).unwrap()
        })
        .collect();
    // 384 columns are whole Q8_0 blocks, but not whole Q8_K activation blocks.
    let w384 = ctx
        .upload_quant(QuantFormat::Q8_0, 4, 384, &vec![0u8; 4 * 12 * 34])
        .unwrap();
    let mut s = ctx.stream().unwrap().record();
    assert!(s.quantize_q8k(&x, &q_short).is_err(), "length mismatch");
    assert!(s.quantize_q8k(&x_ragged, &q).is_err(), "not whole blocks");
    s.quantize_q8k(&x, &q).unwrap();
    for w in &ws {
        assert!(s.qgemv_q8k(w, &q_short, &y).is_err(), "activation length");
        assert!(s.qgemv_q8k(w, &q, &y_short).is_err(), "output length");
        s.qgemv_q8k(w, &q, &y).unwrap();
        // 512 activations are two vectors of 256 columns, not one of 512.
        let y8 = &y_batch;
        assert!(s.qgemv_q8k_batch(w, &q, y8, 0).is_err(), "no vectors");
        assert!(s.qgemv_q8k_batch(w, &q, y8, 33).is_err(), "33 vectors");
        assert!(
            s.qgemv_q8k_batch(w, &q, y8, usize::MAX).is_err(),
            "a count whose products overflow"
        );
        let dp4a = BatchPath::Dp4a;
        assert!(
            s.qgemv_q8k_batch_with(w, &q, y8, 9, dp4a).is_err(),
            "nine vectors on dp4a"
        );
        assert!(
            s.qgemv_q8k_batch(w, &q, y8, 2).is_err(),
            "activation length"
        );
        assert!(s.qgemv_q8k_batch(w, &q, &y, 1).is_ok(), "one vector");
    }
    assert!(
        s.qgemv_q8k(&w384, &q, &y).is_err(),
        "384 columns: not whole Q8_K blocks"
    );
    s.sync().unwrap();
}

#[test]
fn a_non_finite_activation_makes_every_output_nan() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(0xbad);
    for f in QgemvQ8kKernel::FORMATS {
        let (rows, cols) = (5, 3 * 256);
        let dense = rng.vec(rows * cols, -2.0, 2.0);
        let w = trueno_quant::quantize_rows(cpu(f), &dense, cols).unwrap();
        let wd = ctx.upload_quant(f, rows, cols, &w).unwrap();
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let mut x = rng.vec(cols, -1.0, 1.0);
            x[300] = bad;
            let (_, y) = quantize_and_multiply(&ctx, &wd, &x);
            assert!(
                y.iter().all(|v| v.is_nan() && v.to_bits() != POISON),
                "{} with {bad}: {y:?}",
                f.name()
            );
        }
    }
}

/// The docs' example, worked by hand: a Q4_K row of ones (d = 1, dmin = 0, every scale 1,
/// every quant 1) against 256 x 0.25 and 256 x 0.5, each its block's largest magnitude, so
/// quantized exactly (-128 times -1/512 and -1/256): 64 and 128, one vector or a batch.
#[test]
fn a_row_of_ones_sums_exactly() {
    let Some(ctx) = ctx() else { return };
    let mut block = vec![0u8; 144];
    block[..2].copy_from_slice(&half::f16::ONE.to_le_bytes());
    block[4..8].fill(1);
    block[12..16].fill(1);
    block[16..].fill(0x11);
    let w = ctx.upload_quant(QuantFormat::Q4K, 1, 256, &block).unwrap();
    let x: Vec<f32> = [0.25f32, 0.5].iter().flat_map(|&v| [v; 256]).collect();
    let xd = ctx.upload(&x).unwrap();
    let x1 = ctx.upload(&x[..256]).unwrap();
    let (q, q1) = (ctx.alloc_q8k(512).unwrap(), ctx.alloc_q8k(256).unwrap());
    let (mut y, mut y1) = (poisoned(&ctx, 2), poisoned(&ctx, 1));
    let mut s = ctx.stream().unwrap().record();
    s.quantize_q8k(&xd, &q).unwrap();
    s.quantize_q8k(&x1, &q1).unwrap();
    s.qgemv_q8k_batch(&w, &q, &y, 2).unwrap();
    s.qgemv_q8k(&w, &q1, &y1).unwrap();
    s.sync().unwrap();
    assert_eq!(y.to_vec().unwrap(), vec![64.0, 128.0]);
    assert_eq!(y1.to_vec().unwrap(), vec![64.0]);
}

/// Q8_0 and Q4_0 rows worked by hand: activations of 0.25 (each block's largest magnitude,
/// so quantized exactly: -128 times -1/512) against known quants, every block (odd ones
/// start 2 bytes past a word) with its own scale; the sums are exact in f32.
#[test]
fn q8_0_and_q4_0_rows_sum_exactly() {
    let Some(ctx) = ctx() else { return };
    let blocks = 16; // two super-blocks: every lane of a group, odd blocks included
    let scale = |blk: usize| 0.5 * (blk + 1) as f32; // exact in f16
    // Q8_0: quant j of block blk is (j + 3 blk) % 41 - 20.
    let q8 = |blk: usize, j: usize| ((j + 3 * blk) % 41) as i32 - 20;
    let mut w8 = Vec::new();
    // Q4_0: weight j < 16 is the low nibble of byte j, weight j + 16 its high one.
    let q4 = |blk: usize, j: usize| ((j * 5 + blk) % 16) as i32;
    let mut w4 = Vec::new();
    let (mut want8, mut want4) = (0f64, 0f64);
    for blk in 0..blocks {
        let d = half::f16::from_f32(scale(blk)).to_le_bytes();
        w8.extend_from_slice(&d);
        w8.extend((0..32).map(|j| q8(blk, j) as i8 as u8));
        w4.extend_from_slice(&d);
        w4.extend((0..16).map(|j| (q4(blk, j) | q4(blk, j + 16) << 4) as u8));
        for j in 0..32 {
            want8 += 0.25 * scale(blk) as f64 * q8(blk, j) as f64;
            want4 += 0.25 * scale(blk) as f64 * (q4(blk, j) - 8) as f64;
        }
    }
    let x = ctx.upload(&vec![0.25f32; 512]).unwrap();
    let q = ctx.alloc_q8k(512).unwrap();
    for (f, w, want) in [
        (QuantFormat::Q8_0, w8, want8),
        (QuantFormat::Q4_0, w4, want4),
    ] {
        // Two identical rows: the second starts where the first's last block ends.
        let wd = ctx
            .upload_quant(f, 2, 512, &[w.clone(), w].concat())
            .unwrap();
        let (mut y, mut yb) = (poisoned(&ctx, 2), poisoned(&ctx, 2));
        let mut s = ctx.stream().unwrap().record();
        s.quantize_q8k(&x, &q).unwrap();
        s.qgemv_q8k(&wd, &q, &y).unwrap();
        s.qgemv_q8k_batch(&wd, &q, &yb, 1).unwrap();
        s.sync().unwrap();
        let want = vec![want as f32; 2];
        assert_eq!(y.to_vec().unwrap(), want, "{}", f.name());
        assert_eq!(yb.to_vec().unwrap(), want, "{} batch", f.name());
    }
}

/// A decode-like chain: `y[0] = W q(x)`, `y[i + 1] = W q(y[i])`, every quantization
/// into the one shared Q8_K vector the next product reads.
fn chain<'a>(
    s: &mut Stream<Recording<'a>>,
    (w, x, q): (&'a QuantMatrix, &'a DeviceBuffer<f32>, &'a Q8kVector),
    ys: &'a [DeviceBuffer<f32>],
) -> trueno_gpu::Result<()> {
    for (i, y) in ys.iter().enumerate() {
        s.quantize_q8k(if i == 0 { x } else { &ys[i - 1] }, q)?;
        s.qgemv_q8k(w, q, y)?;
    }
    Ok(())
}

/// The chain with launches serialised, against the reference from the GPU's own inputs
/// link by link; then overlapped (programmatic dependent launch: on by default from
/// sm_90), on a stream and in a graph, bit for bit against the serialised run. A product
/// that read the quants before their quantization finished, or a quantization that
/// overwrote them while the product before still read them, multiplies the wrong vector.
#[test]
fn overlapped_launches_keep_a_chain_of_products_exact() {
    let Some(ctx) = ctx() else { return };
    if ctx.device().compute_capability.0 >= 9
        && trueno_gpu::driver::driver_version().unwrap() >= 12030
    {
        assert!(ctx.overlapped_launches(), "on by default on sm_90");
    }
    let mut rng = Rng(0xc4a1);
    let n = if small() { 1024 } else { 2048 };
    let links = 6;
    for f in [QuantFormat::Q4K, QuantFormat::Q6K, QuantFormat::Q8_0] {
        let dense = rng.vec(n * n, -1.0, 1.0);
        let w = trueno_quant::quantize_rows(cpu(f), &dense, n).unwrap();
        let wd = ctx.upload_quant(f, n, n, &w).unwrap();
        let x_host = rng.vec(n, -1.0, 1.0);
        let x = ctx.upload(&x_host).unwrap();
        let q = ctx.alloc_q8k(n).unwrap();
        // The kernel the chain runs (Q4_K's on the tensor cores; Q6_K's rows, 4 or 8
        // super-blocks in one wave, on `dp4a`).
        let chosen = ctx.qgemv_q8k_kernel(&wd).unwrap().name();
        let run = |overlap: bool, graph: bool| {
            ctx.set_overlapped_launches(overlap);
            let f = ctx.function(Family::Qgemv, &chosen).unwrap();
            assert_eq!(f.overlaps_previous(), overlap && ctx.overlapped_launches());
            let ys: Vec<_> = (0..links).map(|_| poisoned(&ctx, n)).collect();
            let mut s = ctx.stream().unwrap();
            let captured = graph.then(|| s.capture(|s| chain(s, (&wd, &x, &q), &ys)).unwrap());
            let mut rec = s.record();
            match &captured {
                Some(g) => g.launch(&mut rec).unwrap(),
                None => chain(&mut rec, (&wd, &x, &q), &ys).unwrap(),
            }
            rec.sync().unwrap();
            drop(captured);
            let mut ys = ys;
            ys.iter_mut()
                .map(|y| y.to_vec().unwrap())
                .collect::<Vec<_>>()
        };
        let serial = run(false, false);
        for (i, y) in serial.iter().enumerate() {
            let input = if i == 0 { &x_host } else { &serial[i - 1] };
            let act = trueno_quant::quantize(CpuFormat::Q8K, input).unwrap();
            let name = format!("{} link {i}", f.name());
            assert_rows(&name, y, &reference(f, &w, &act, n, n));
        }
        for graph in [false, true] {
            let got = run(true, graph);
            for (i, (g, want)) in got.iter().zip(&serial).enumerate() {
                let bits = |v: &[f32]| v.iter().map(|a| a.to_bits()).collect::<Vec<_>>();
                assert!(
                    bits(g) == bits(want),
                    "{} link {i}: overlapped ({}) differs from serialised",
                    f.name(),
                    if graph { "graph" } else { "stream" }
                );
            }
        }
    }
}
