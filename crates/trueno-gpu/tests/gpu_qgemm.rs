//! A prefill's quantized projections on the GPU (`Stream::qgemm` and its parts,
//! `Stream::to_half` and `Stream::dequantize_transposed`): against the `half` crate's
//! rounding (bit for bit), trueno-quant's dequantization rounded to bf16, and an f64
//! product of the bf16-rounded weights and activations, every format, ragged token
//! counts and row tiles; the shape errors that come before a launch.
//!
//! Without a CUDA device each test prints SKIPPED and passes (`TRUENO_REQUIRE_GPU=1`
//! makes that a failure).

mod common;
use common::device::{POISON, Rng, cpu_format as cpu, ctx, poisoned, small, weight_cases};
use half::{bf16, f16};
use trueno_gpu::kernels::qgemv::QuantFormat;

fn dequantized(f: QuantFormat, w: &[u8], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0f32; rows * cols];
    trueno_quant::dequantize(cpu(f), w, &mut out).unwrap();
    out
}

/// Rounding to f16 and bf16 is the `half` crate's, bit for bit: ties, subnormals,
/// overflow to infinity, NaN, at lengths that take the four-wide path, its tail, or both.
#[test]
fn to_half_rounds_as_the_half_crate() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(0x4a1f);
    let mut edge = vec![
        0.0,
        -0.0,
        1.0 + 1.0 / 512.0, // a bf16 tie: to even
        1.0 + 3.0 / 512.0,
        1.0 + 1.0 / 4096.0, // an f16 tie
        1e-6,               // an f16 subnormal
        1e-9,               // under f16's range
        70000.0,            // over f16's range: infinity
        f32::MAX,
        f32::MIN_POSITIVE,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ];
    edge.extend(rng.vec(1027 - edge.len(), -3.0, 3.0));
    for n in [1usize, 3, 4, 5, 1027] {
        let x = &edge[..n];
        let xd = ctx.upload(x).unwrap();
        let (mut yb, mut yh) = (ctx.alloc::<bf16>(n).unwrap(), ctx.alloc::<f16>(n).unwrap());
        let mut s = ctx.stream().unwrap().record();
        s.to_half(&xd, &yb).unwrap();
        s.to_half(&xd, &yh).unwrap();
        s.sync().unwrap();
        let (gb, gh) = (yb.to_vec().unwrap(), yh.to_vec().unwrap());
        for (i, &v) in x.iter().enumerate() {
            let (wb, wh) = (bf16::from_f32(v), f16::from_f32(v));
            let same = |g: u16, w: u16, nan: bool| g == w || (nan && v.is_nan());
            assert!(
                same(gb[i].to_bits(), wb.to_bits(), gb[i].is_nan()),
                "bf16({v}) = {}",
                gb[i]
            );
            assert!(
                same(gh[i].to_bits(), wh.to_bits(), gh[i].is_nan()),
                "f16({v}) = {}",
                gh[i]
            );
        }
    }
}

/// `Wᵀ` in bf16: each value trueno-quant's rounded to bf16, within one bf16 step where
/// the device's f32 value (one rounding less or more) sits on the other side of a
/// rounding boundary.
#[test]
fn dequantize_transposed_is_trueno_quants_values_in_bf16() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(0x7a);
    for f in QuantFormat::ALL {
        // One row tile; a ragged second tile; columns of one and three groups.
        for (rows, cols) in [(8, 256), (72, 768), (136, 512)] {
            for (kind, w) in weight_cases(&mut rng, f, rows, cols) {
                let want = dequantized(f, &w, rows, cols);
                let wd = ctx.upload_quant(f, rows, cols, &w).unwrap();
                let mut wt = ctx.alloc::<bf16>(rows * cols).unwrap();
                let mut s = ctx.stream().unwrap().record();
                s.dequantize_transposed(&wd, &wt).unwrap();
                s.sync().unwrap();
                let got = wt.to_vec().unwrap();
                for r in 0..rows {
                    for c in 0..cols {
                        let (g, v) = (got[c * rows + r].to_f32(), want[r * cols + c]);
                        let step = (v.abs() / 128.0).max(f32::MIN_POSITIVE);
                        assert!(
                            (g - v).abs() <= step,
                            "{} {kind} {rows}x{cols} W[{r}, {c}]: {g} vs {v}",
                            f.name()
                        );
                    }
                }
            }
        }
    }
}

/// The f64 dot product of two rows rounded to bf16, and the sum of its terms' sizes.
fn bf16_dot(xs: &[f32], ws: &[f32]) -> (f64, f64) {
    let b = |v: f32| bf16::from_f32(v).to_f64();
    let terms = xs.iter().zip(ws).map(|(&a, &w)| b(a) * b(w));
    (terms.clone().sum(), terms.map(f64::abs).sum())
}

/// The bound on `|y - dot|` for a product of `cols` terms whose sizes sum to `mass`:
/// `(k + 64) eps` of the f32 accumulation plus one bf16 step (2^-7) of the weights (the
/// device rounds its f32 dequantization, trueno-quant's may differ by a rounding).
fn product_bound(cols: usize, mass: f64) -> f64 {
    ((cols as f64 + 64.0) * f32::EPSILON as f64 + 1.0 / 128.0) * mass
}

/// The f64 sums of the bf16-rounded operands of `X Wᵀ` and their masses, row-major
/// `[tokens, rows]`: computed once per case, checked against every path's output.
fn reference(
    (x, wf): (&[f32], &[f32]),
    (tokens, rows, cols): (usize, usize, usize),
) -> Vec<(f64, f64)> {
    (0..tokens * rows)
        .map(|i| {
            let (t, r) = (i / rows, i % rows);
            bf16_dot(&x[t * cols..][..cols], &wf[r * cols..][..cols])
        })
        .collect()
}

/// `y = alpha X Wᵀ + beta y0` (`y0` absent: beta 0, `y` poisoned) against the
/// [`reference`] sums `want`.
fn assert_product(
    what: &str,
    y: &[f32],
    want: &[(f64, f64)],
    (tokens, rows, cols): (usize, usize, usize),
    (alpha, beta, y0): (f64, f64, Option<&[f32]>),
) {
    for t in 0..tokens {
        for r in 0..rows {
            let (dot, mass) = want[t * rows + r];
            let old = y0.map_or(0.0, |y0| y0[t * rows + r] as f64);
            let want = alpha * dot + beta * old;
            let bound = alpha.abs() * product_bound(cols, mass)
                + 2.0 * f32::EPSILON as f64 * (alpha * dot).abs().max((beta * old).abs());
            let got = y[t * rows + r];
            assert!(got.to_bits() != POISON, "{what} y[{t}, {r}] never written");
            assert!(
                (got as f64 - want).abs() <= bound,
                "{what} {tokens}x{rows}x{cols} y[{t}, {r}]: {got} vs {want} (bound {bound:e})"
            );
        }
    }
}

/// `Y = X Wᵀ` through `qgemm` (on Hopper the fused kernel for the formats and lengths
/// `qgemm_with` fuses) and through the unfused path spelled out (weights to a bf16 `Wᵀ`,
/// activations to bf16, the GEMM), so both are checked on every device.
#[test]
fn qgemm_matches_the_bf16_rounded_product() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(0x9e3);
    let mut shapes = vec![(1, 8, 256), (5, 72, 512), (33, 136, 768)];
    if !small() {
        shapes.push((130, 256, 2048));
    }
    for f in QuantFormat::ALL {
        for &(tokens, rows, cols) in &shapes {
            let w = &weight_cases(&mut rng, f, rows, cols)[0].1;
            let x = rng.vec(tokens * cols, -1.0, 1.0);
            let wf = dequantized(f, w, rows, cols);
            let wd = ctx.upload_quant(f, rows, cols, w).unwrap();
            let xd = ctx.upload(&x).unwrap();
            let wt = ctx.alloc::<bf16>(rows * cols).unwrap();
            let xh = ctx.alloc::<bf16>(tokens * cols).unwrap();
            let mut yd = poisoned(&ctx, tokens * rows);
            let mut yu = poisoned(&ctx, tokens * rows);
            let mut s = ctx.stream().unwrap().record();
            s.qgemm(&wd, &xd, &yd, tokens, &wt, &xh).unwrap();
            s.dequantize_transposed(&wd, &wt).unwrap();
            s.to_half(&xd, &xh).unwrap();
            s.gemm_mma(&xh, &wt, &yu, tokens, rows, cols, 1.0, 0.0)
                .unwrap();
            s.sync().unwrap();
            let shape = (tokens, rows, cols);
            let want = reference((&x, &wf), shape);
            let y = yd.to_vec().unwrap();
            assert_product(f.name(), &y, &want, shape, (1.0, 0.0, None));
            let y = yu.to_vec().unwrap();
            let what = format!("{} unfused", f.name());
            assert_product(&what, &y, &want, shape, (1.0, 0.0, None));
        }
    }
}

/// The Hopper context, or None (printing SKIPPED) elsewhere.
fn hopper() -> Option<trueno_gpu::driver::Context> {
    let ctx = ctx()?;
    if ctx.has_sm90a() {
        return Some(ctx);
    }
    eprintln!("SKIPPED: the fused quantized GEMM runs on sm_90a devices only");
    None
}

/// The fused kernel (`qgemm_wgmma_tiled`, dequantization in shared memory) at both tile
/// heights against the same reference: every format, token counts 1 to 300 (ragged row
/// tiles of 128 and 256), weight rows 8 to 264 (ragged 128-row column tiles, rows past
/// `n` read as the last), 256 to 2048 columns (up to 32 k-tiles through the rings of six
/// and four stages), and alpha/beta over a random `y`; each also with k cut into three
/// and five ranges of whole 256-column groups (past a short k, empty ones).
#[test]
fn qgemm_wgmma_matches_the_bf16_rounded_product() {
    use trueno_gpu::kernels::qgemm_wgmma::QgemmTileM;
    let Some(ctx) = hopper() else { return };
    let mut rng = Rng(0x9e5);
    let mut shapes = vec![(1, 8, 256), (5, 72, 512), (130, 136, 768)];
    if !small() {
        shapes.extend([(300, 264, 2048), (64, 512, 1536)]);
    }
    for f in QuantFormat::ALL {
        for &(tokens, rows, cols) in &shapes {
            for (kind, w) in weight_cases(&mut rng, f, rows, cols) {
                let x = rng.vec(tokens * cols, -1.0, 1.0);
                let xb: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
                let wf = dequantized(f, &w, rows, cols);
                let wd = ctx.upload_quant(f, rows, cols, &w).unwrap();
                let xh = ctx.upload(&xb).unwrap();
                let y0 = rng.vec(tokens * rows, -4.0, 4.0);
                let shape = (tokens, rows, cols);
                let want = reference((&x, &wf), shape);
                let e = trueno_gpu::GemmEpilogue::scaled(-1.5, 0.5);
                for tile in [QgemmTileM::M128, QgemmTileM::M256] {
                    let mut yd = poisoned(&ctx, tokens * rows);
                    let mut yb = ctx.upload(&y0).unwrap();
                    let mut s = ctx.stream().unwrap().record();
                    s.qgemm_wgmma_tiled(tile, &wd, &xh, &yd, tokens, Default::default())
                        .unwrap();
                    s.qgemm_wgmma_tiled(tile, &wd, &xh, &yb, tokens, e).unwrap();
                    s.sync().unwrap();
                    let what = format!("{} {kind} m{}", f.name(), tile.rows());
                    let y = yd.to_vec().unwrap();
                    assert_product(&what, &y, &want, shape, (1.0, 0.0, None));
                    let y = yb.to_vec().unwrap();
                    assert_product(&what, &y, &want, shape, (-1.5, 0.5, Some(&y0)));
                    for splits in [3, 5] {
                        let mut yd = poisoned(&ctx, tokens * rows);
                        let mut yb = ctx.upload(&y0).unwrap();
                        let mut s = ctx.stream().unwrap().record();
                        let d = Default::default();
                        s.qgemm_wgmma_with_split(tile, splits, &wd, &xh, &yd, tokens, d)
                            .unwrap();
                        s.qgemm_wgmma_with_split(tile, splits, &wd, &xh, &yb, tokens, e)
                            .unwrap();
                        s.sync().unwrap();
                        let what = format!("{what} in {splits}");
                        let y = yd.to_vec().unwrap();
                        assert_product(&what, &y, &want, shape, (1.0, 0.0, None));
                        let y = yb.to_vec().unwrap();
                        assert_product(&what, &y, &want, shape, (-1.5, 0.5, Some(&y0)));
                    }
                }
            }
        }
    }
}

/// The epilogue on the unfused path (the three launches spelled out) and on Hopper the
/// fused `qgemm_wgmma`: a bias per output row of `W`, SiLU, a bf16 `Y`,
/// against the f64 sums of bf16-rounded operands plus the bias; the stored value lies
/// between the bf16 roundings of the reference widened by the bound of the test above
/// (SiLU's slope is at most 1.1; its `ex2.approx` adds 3e-5 relative).
#[test]
fn qgemm_with_a_bias_and_activation_writes_bf16() {
    use trueno_gpu::GemmEpilogue;
    use trueno_gpu::kernels::gemm_epilogue::Activation;
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(0x9e4);
    let (tokens, rows, cols) = (33, 136, 768);
    let paths = [false].into_iter().chain(ctx.has_sm90a().then_some(true));
    let cases = paths.flat_map(|fused| [(fused, QuantFormat::Q4K), (fused, QuantFormat::Q8_0)]);
    for (fused, f) in cases {
        let w = &weight_cases(&mut rng, f, rows, cols)[0].1;
        let x = rng.vec(tokens * cols, -1.0, 1.0);
        let bias = rng.vec(rows, -2.0, 2.0);
        let wf = dequantized(f, w, rows, cols);
        let wd = ctx.upload_quant(f, rows, cols, w).unwrap();
        let (xd, bd) = (ctx.upload(&x).unwrap(), ctx.upload(&bias).unwrap());
        let wt = ctx.alloc::<bf16>(rows * cols).unwrap();
        let xh = ctx.alloc::<bf16>(tokens * cols).unwrap();
        let mut yd = ctx.upload(&vec![bf16::NAN; tokens * rows]).unwrap();
        let e = GemmEpilogue::default()
            .with_bias(&bd)
            .with_activation(Activation::Silu);
        let mut s = ctx.stream().unwrap().record();
        if fused {
            s.to_half(&xd, &xh).unwrap();
            s.qgemm_wgmma(&wd, &xh, &yd, tokens, e).unwrap();
        } else {
            s.dequantize_transposed(&wd, &wt).unwrap();
            s.to_half(&xd, &xh).unwrap();
            s.gemm_mma_with(&xh, &wt, &yd, tokens, rows, cols, e)
                .unwrap();
        }
        s.sync().unwrap();
        let y = yd.to_vec().unwrap();
        for t in 0..tokens {
            for r in 0..rows {
                let (dot, mass) = bf16_dot(&x[t * cols..][..cols], &wf[r * cols..][..cols]);
                let pre = dot + bias[r] as f64;
                let want = trueno::activations::silu(pre as f32) as f64;
                let bound = 1.1 * (product_bound(cols, mass) + f32::EPSILON as f64 * pre.abs())
                    + 3e-5 * want.abs();
                let lo = bf16::from_f64(want - bound).to_f64();
                let hi = bf16::from_f64(want + bound).to_f64();
                let got = y[t * rows + r].to_f64();
                assert!(
                    lo <= got && got <= hi,
                    "{} fused {fused} y[{t}, {r}]: {got} vs {want} ({lo}..={hi})",
                    f.name()
                );
            }
        }
    }
}

#[test]
fn qgemm_shapes_are_checked_before_launch() {
    let Some(ctx) = ctx() else { return };
    let w = ctx
        .upload_quant(QuantFormat::Q4K, 16, 256, &vec![0u8; 16 * 144])
        .unwrap();
    let w12 = ctx
        .upload_quant(QuantFormat::Q4K, 12, 256, &vec![0u8; 12 * 144])
        .unwrap();
    let w96 = ctx
        .upload_quant(QuantFormat::Q8_0, 8, 96, &vec![0u8; 8 * 3 * 34])
        .unwrap();
    let x = ctx.upload(&vec![0.5f32; 2 * 256]).unwrap();
    let y = ctx.alloc::<f32>(2 * 16).unwrap();
    let wt = ctx.alloc::<bf16>(16 * 256).unwrap();
    let wt_short = ctx.alloc::<bf16>(16 * 256 - 1).unwrap();
    let xh = ctx.alloc::<bf16>(2 * 256).unwrap();
    let short = ctx.alloc::<f16>(3).unwrap();
    let bias15 = ctx.alloc::<f32>(15).unwrap();
    let (xh96, xh1) = (
        ctx.alloc::<bf16>(96).unwrap(),
        ctx.alloc::<bf16>(256).unwrap(),
    );
    let (y8, b16) = (ctx.alloc::<f32>(8).unwrap(), ctx.alloc::<f32>(16).unwrap());
    let mut s = ctx.stream().unwrap().record();
    assert!(s.to_half(&x, &short).is_err(), "to_half length");
    assert!(s.qgemm(&w, &x, &y, 0, &wt, &xh).is_err(), "no tokens");
    assert!(s.qgemm(&w, &x, &y, 3, &wt, &xh).is_err(), "input length");
    assert!(
        s.qgemm(&w, &x, &y, 2, &wt_short, &xh).is_err(),
        "scratch length"
    );
    assert!(
        s.dequantize_transposed(&w12, &wt).is_err(),
        "rows not a multiple of 8"
    );
    assert!(
        s.dequantize_transposed(&w96, &wt).is_err(),
        "columns not whole groups"
    );
    let e = trueno_gpu::GemmEpilogue::default().with_bias(&bias15);
    let err = s.qgemm_with(&w, &x, &y, 2, (&wt, &xh), e).unwrap_err();
    assert!(err.to_string().contains("bias"), "{err}");
    // The output aliasing an input is refused before anything is launched.
    let err = s.qgemm(&w, &x, &x, 2, &wt, &xh).unwrap_err();
    assert!(err.to_string().contains("alias"), "{err}");
    // The fused kernel's own checks (and its refusal off Hopper).
    let d = trueno_gpu::GemmEpilogue::default();
    if ctx.has_sm90a() {
        assert!(s.qgemm_wgmma(&w, &xh, &y, 0, d).is_err(), "no tokens");
        assert!(s.qgemm_wgmma(&w, &xh, &y, 3, d).is_err(), "input length");
        assert!(s.qgemm_wgmma(&w96, &xh96, &y8, 1, d).is_err(), "k of 96");
        let err = s
            .qgemm_wgmma(&w, &xh, &y, 2, d.with_bias(&bias15))
            .unwrap_err();
        assert!(err.to_string().contains("bias"), "{err}");
        let err = s
            .qgemm_wgmma(&w, &xh1, &b16, 1, d.with_bias(&b16))
            .unwrap_err();
        assert!(err.to_string().contains("alias"), "{err}");
        s.qgemm_wgmma(&w, &xh, &y, 2, d).unwrap();
    } else {
        let err = s.qgemm_wgmma(&w, &xh, &y, 2, d).unwrap_err();
        assert!(err.to_string().contains("sm_90a"), "{err}");
    }
    s.qgemm(&w, &x, &y, 2, &wt, &xh).unwrap();
    s.sync().unwrap();
}
