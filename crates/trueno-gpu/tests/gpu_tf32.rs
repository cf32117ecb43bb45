//! The TF32 GEMM (`Stream::gemm_tf32`: the sm_80 mma.sync path and Hopper's wgmma path)
//! and the f32 transpose on the device: the product against an f64 product of the full
//! f32 inputs, within the error TF32 allows (each operand keeps 10 of its 23 mantissa
//! bits), at ragged shapes, with alpha/beta, a NaN-poisoned C under beta = 0, a bias and
//! activation, a 16-bit output, a row-major B transposed on the device first or read as
//! stored (`gemm_tf32_kn`); the transpose exactly; the shape errors. Skipped without a
//! GPU (the wgmma paths also without an sm_90 one).

mod common;
use common::device::{POISON, Rng, ctx, gemm_shapes, poisoned};

use half::bf16;
use trueno_gpu::GemmEpilogue;
use trueno_gpu::driver::Context;
use trueno_gpu::gemm_tune::GemmConfig;
use trueno_gpu::kernels::gemm_epilogue::{self, Activation};
use trueno_gpu::kernels::gemm_mma::{GemmInput, HalfType, MmaTileK};
use trueno_gpu::kernels::gemm_wgmma::WgmmaTileN;

/// `x` (rows x cols, row-major) transposed on the host.
fn transposed(x: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut t = vec![0.0; x.len()];
    for r in 0..rows {
        for c in 0..cols {
            t[c * rows + r] = x[r * cols + c];
        }
    }
    t
}

/// f64 `a b` (B row-major k x n) and, per element, `sum |a| |b|`.
fn product(a: &[f32], b: &[f32], (m, n, k): (usize, usize, usize)) -> (Vec<f64>, Vec<f64>) {
    let mut out = vec![0.0; m * n];
    let mut mag = vec![0.0; m * n];
    for i in 0..m {
        for p in 0..k {
            let av = a[i * k + p] as f64;
            for j in 0..n {
                let t = av * b[p * n + j] as f64;
                out[i * n + j] += t;
                mag[i * n + j] += t.abs();
            }
        }
    }
    (out, mag)
}

/// How far a TF32 product with f32 sums may be from the exact one, for a term of
/// magnitude sum `mag`: each operand loses up to 2^-10 of itself (truncated to 10
/// mantissa bits; 2^-11 if rounded), so each product up to about 2^-9; the k f32
/// additions 2^-24 each of the running sum.
fn tf32_bound(mag: f64, k: usize) -> f64 {
    (2f64.powi(-9) + (k as f64 + 2.0) * 2f64.powi(-24)) * mag
}

/// Which kernel, and how B is passed: transposed (`gemm_with_config`) or as stored
/// (`gemm_tf32_kn_with_config`: the Hopper kernel that reads it so, or the sm_80 path
/// gathering its fragments).
#[derive(Clone, Copy, Debug)]
enum Path {
    Mma,
    Wgmma(WgmmaTileN),
    KnMma,
    KnWgmma(WgmmaTileN),
}

/// One TF32 product `c = alpha a b + beta c` on `path`.
fn check(ctx: &Context, rng: &mut Rng, path: Path, shape: (usize, usize, usize), ab: (f32, f32)) {
    let (m, n, k) = shape;
    let (alpha, beta) = ab;
    let a = rng.vec(m * k, -1.0, 1.0);
    let b = rng.vec(k * n, -1.0, 1.0);
    let c0 = rng.vec(m * n, -2.0, 2.0);
    let (prod, mag) = product(&a, &b, shape);
    let da = ctx.upload(&a).unwrap();
    let as_stored = matches!(path, Path::KnMma | Path::KnWgmma(_));
    let db = match as_stored {
        true => ctx.upload(&b).unwrap(),
        false => ctx.upload(&transposed(&b, k, n)).unwrap(),
    };
    let mut dc = if beta == 0.0 {
        poisoned(ctx, m * n)
    } else {
        ctx.upload(&c0).unwrap()
    };
    let mut s = ctx.stream().unwrap().record();
    let e = GemmEpilogue::scaled(alpha, beta);
    let config = match path {
        Path::Mma | Path::KnMma => GemmConfig::Mma(MmaTileK::K32),
        Path::Wgmma(tile) | Path::KnWgmma(tile) => GemmConfig::Wgmma(tile),
    };
    match as_stored {
        true => s.gemm_tf32_kn_with_config(config, &da, &db, &dc, m, n, k, e),
        false => s.gemm_with_config(GemmInput::Tf32, config, &da, &db, &dc, m, n, k, e),
    }
    .unwrap();
    s.sync().unwrap();
    let got = dc.to_vec().unwrap();
    let what = format!("tf32 {path:?} {m}x{n}x{k} alpha {alpha} beta {beta}");
    for (i, &g) in got.iter().enumerate() {
        assert!(g.to_bits() != POISON, "{what}: element {i} never written");
        let bc = if beta == 0.0 {
            0.0
        } else {
            beta as f64 * c0[i] as f64
        };
        let want = alpha as f64 * prod[i] + bc;
        let bound = tf32_bound(alpha.abs() as f64 * mag[i], k) + 2f64.powi(-22) * bc.abs() + 1e-30;
        assert!(
            (g as f64 - want).abs() <= bound,
            "{what}[{} {}]: got {g}, want {want} (bound {bound:e})",
            i / n,
            i % n
        );
    }
}

/// One product to check: its shape and (alpha, beta).
type Case = ((usize, usize, usize), (f32, f32));

/// The sm_80 path and, on sm_90a, the wgmma kernel at every tile width (`tiled`), for
/// the ragged shapes and three alpha/beta pairs, then `extra` shapes.
fn check_paths(rng: u64, sm80: Path, tiled: fn(WgmmaTileN) -> Path, extra: &[Case]) {
    let Some(ctx) = ctx() else { return };
    let mut paths = vec![sm80];
    if ctx.has_sm90a() {
        paths.extend(WgmmaTileN::ALL.map(tiled));
    } else {
        eprintln!("SKIPPED (wgmma): {} is not sm_90", ctx.device().name);
    }
    let mut rng = Rng(rng);
    for path in paths {
        for &shape in &gemm_shapes() {
            check(&ctx, &mut rng, path, shape, (1.0, 0.0));
        }
        for ab in [(0.5f32, -1.5f32), (-1.0, 1.0), (2.0, 0.0)] {
            check(&ctx, &mut rng, path, (129, 136, 72), ab);
        }
        for &(shape, ab) in extra {
            check(&ctx, &mut rng, path, shape, ab);
        }
    }
}

/// More k-tiles than stages, tiles ragged in every dimension, k below one k-tile, on
/// both paths.
#[test]
fn tf32_gemm_matches_an_f64_product_at_ragged_shapes() {
    check_paths(94, Path::Mma, Path::Wgmma, &[]);
}

/// B as stored (`gemm_tf32_kn`) on Hopper's kernel at every tile height and on the
/// sm_80 path: the ragged shapes (k from 8, one k-tile's odd tail to many
/// pairs of them), alpha/beta over a NaN-poisoned or random C, and tall-k products the
/// split rule cuts (one or two tiles and 130-160 k-tiles: the ranges' partial products
/// summed by the reduce).
#[test]
fn tf32_gemm_with_b_as_stored_matches_an_f64_product() {
    let split: [Case; 2] = [((64, 64, 4096), (1.0, 0.0)), ((200, 136, 5000), (0.5, 1.0))];
    check_paths(97, Path::KnMma, Path::KnWgmma, &split);
}

/// A row-major B with a bias and SiLU into bf16 on the device's default paths, both
/// ways: transposed on the device then `gemm_tf32`, and as stored through
/// `gemm_tf32_kn` (the epilogue is the 16-bit GEMMs'; this checks it is wired to the
/// TF32 kernels, the transposed staging of the row-major one included).
#[test]
fn tf32_gemm_of_a_row_major_b_with_bias_silu_and_bf16_output() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(95);
    let (m, n, k) = (200, 136, 264);
    let a = rng.vec(m * k, -1.0, 1.0);
    let b = rng.vec(k * n, -1.0, 1.0);
    let bias = rng.vec(n, -1.5, 1.5);
    let (prod, mag) = product(&a, &b, (m, n, k));
    let (da, db, dbias) = (
        ctx.upload(&a).unwrap(),
        ctx.upload(&b).unwrap(),
        ctx.upload(&bias).unwrap(),
    );
    let dbt = poisoned(&ctx, k * n);
    let e = GemmEpilogue::default()
        .with_bias(&dbias)
        .with_activation(Activation::Silu);
    for as_stored in [false, true] {
        let mut dc = ctx.upload(&vec![bf16::from_bits(0x7FC5); m * n]).unwrap();
        let mut s = ctx.stream().unwrap().record();
        if as_stored {
            s.gemm_tf32_kn(&da, &db, &dc, m, n, k, e).unwrap();
        } else {
            s.transpose(&db, &dbt, k, n).unwrap();
            s.gemm_tf32(&da, &dbt, &dc, m, n, k, e).unwrap();
        }
        s.sync().unwrap();
        for (i, g) in dc.to_vec().unwrap().into_iter().enumerate() {
            assert_ne!(g.to_bits(), 0x7FC5, "element {i} never written");
            let want = gemm_epilogue::reference(
                prod[i],
                0.0,
                (1.0, 0.0),
                Some(bias[i % n]),
                Activation::Silu,
            ) as f64;
            // SiLU's slope is at most 1.1; ex2.approx and div.full add 3e-5 of the value.
            let bound = 1.1 * (tf32_bound(mag[i], k) + 2f64.powi(-21) * (prod[i].abs() + 2.0))
                + 3e-5 * want.abs()
                + 1e-30;
            let lo = bf16::from_f64(want - bound).to_f64();
            let hi = bf16::from_f64(want + bound).to_f64();
            let g = g.to_f64();
            assert!(
                lo <= g && g <= hi,
                "as stored {as_stored} [{} {}]: got {g}, want {want} ({lo}..={hi})",
                i / n,
                i % n
            );
        }
    }
}

#[test]
fn transpose_moves_every_value_at_ragged_shapes() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(96);
    for (rows, cols) in [
        (1, 1),
        (1, 33),
        (33, 1),
        (31, 33),
        (64, 64),
        (100, 257),
        (1000, 37),
    ] {
        let x = rng.vec(rows * cols, -4.0, 4.0);
        let dx = ctx.upload(&x).unwrap();
        let mut out = poisoned(&ctx, rows * cols);
        let mut s = ctx.stream().unwrap().record();
        s.transpose(&dx, &out, rows, cols).unwrap();
        s.sync().unwrap();
        let got = out.to_vec().unwrap();
        let want = transposed(&x, rows, cols);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.to_bits(), w.to_bits(), "{rows}x{cols}: element {i}");
        }
    }
}

#[test]
fn tf32_gemm_and_transpose_reject_bad_shapes() {
    let Some(ctx) = ctx() else { return };
    let a = ctx.upload(&vec![1.0f32; 16 * 16]).unwrap();
    let b = ctx.upload(&vec![1.0f32; 16 * 16]).unwrap();
    let c = poisoned(&ctx, 16 * 16);
    let short = ctx.upload(&vec![1.0f32; 16 * 8]).unwrap();
    let mut s = ctx.stream().unwrap().record();
    let none = GemmEpilogue::default();
    let tf32 = GemmInput::Tf32;
    let mma = GemmConfig::Mma(MmaTileK::K32);
    let e = s.gemm_tf32(&a, &b, &c, 16, 12, 16, none).unwrap_err();
    assert!(e.to_string().contains("multiples of 8"), "{e}");
    let e = s
        .gemm_with_config(tf32, mma, &a, &b, &c, 16, 16, 12, none)
        .unwrap_err();
    assert!(e.to_string().contains("multiples of 8"), "{e}");
    // A too short for 32 rows; the output aliasing B.
    assert!(s.gemm_tf32(&a, &b, &c, 32, 8, 16, none).is_err());
    assert!(
        s.gemm_with_config(tf32, mma, &a, &b, &c, 32, 8, 16, none)
            .is_err()
    );
    let e = s.gemm_tf32(&a, &b, &b, 16, 16, 16, none).unwrap_err();
    assert!(e.to_string().contains("alias"), "{e}");
    // TF32 has no 64-wide k-step; f32 buffers are not a bf16 product's.
    let k64 = GemmConfig::Mma(MmaTileK::K64);
    assert!(
        s.gemm_with_config(tf32, k64, &a, &b, &c, 16, 16, 16, none)
            .is_err()
    );
    let bf16_in = GemmInput::Half(HalfType::Bf16);
    let e = s
        .gemm_with_config(bf16_in, mma, &a, &b, &c, 16, 16, 16, none)
        .unwrap_err();
    assert!(e.to_string().contains("f32 inputs for a bf16"), "{e}");
    if !ctx.has_sm90a() {
        let wgmma = GemmConfig::Wgmma(WgmmaTileN::N128);
        let e = s
            .gemm_with_config(tf32, wgmma, &a, &b, &c, 16, 16, 16, none)
            .unwrap_err();
        assert!(e.to_string().contains("sm_90a"), "{e}");
    }
    // B as stored: the same shape, length and alias errors on both paths.
    for config in [mma, GemmConfig::Wgmma(WgmmaTileN::N256)] {
        if config != mma && !ctx.has_sm90a() {
            let e = s
                .gemm_tf32_kn_with_config(config, &a, &b, &c, 16, 16, 16, none)
                .unwrap_err();
            assert!(e.to_string().contains("sm_90a"), "{e}");
            continue;
        }
        let kn = |s: &mut trueno_gpu::driver::Stream<_>, (m, n, k), c| {
            s.gemm_tf32_kn_with_config(config, &a, &b, c, m, n, k, none)
        };
        let e = kn(&mut s, (16, 12, 16), &c).unwrap_err();
        assert!(e.to_string().contains("multiples of 8"), "{config:?}: {e}");
        let e = s
            .gemm_tf32_kn_with_config(config, &a, &short, &c, 16, 16, 16, none)
            .unwrap_err();
        assert!(e.to_string().contains("gemm_tf32_kn b"), "{config:?}: {e}");
        assert!(kn(&mut s, (32, 8, 16), &c).is_err(), "{config:?}: A short");
        let e = kn(&mut s, (16, 16, 16), &b).unwrap_err();
        assert!(e.to_string().contains("alias"), "{config:?}: {e}");
    }
    let k64 = GemmConfig::Mma(MmaTileK::K64);
    assert!(
        s.gemm_tf32_kn_with_config(k64, &a, &b, &c, 16, 16, 16, none)
            .is_err()
    );
    let e = s.transpose(&a, &c, 16, 17).unwrap_err();
    assert!(e.to_string().contains("transpose x"), "{e}");
    let e = s.transpose(&a, &a, 16, 16).unwrap_err();
    assert!(e.to_string().contains("alias"), "{e}");
    assert!(s.transpose(&a, &c, 0, 16).is_err());
    s.sync().unwrap();
}

/// Tuning the row-major product times Hopper's kernel at each tile height and the sm_80
/// path, keeps the fastest under its own class (not `gemm_tf32`'s), and `gemm_tf32_kn`
/// then runs it at another shape of the class, still within the TF32 bound.
#[test]
fn tuning_the_row_major_product_keeps_its_own_class() {
    use trueno_gpu::gemm_tune::GemmClass;
    use trueno_gpu::kernels::float_type::FloatType;
    let Some(ctx) = ctx() else { return };
    let hopper = ctx.has_sm90a();
    let (times, best) = ctx
        .tune_gemm_for::<f32, f32>(GemmInput::Tf32Kn, 200, 264, 136)
        .unwrap();
    assert_eq!(times.len(), if hopper { 4 } else { 1 }, "{times:?}");
    assert!(times.iter().all(|t| t.0.runs(GemmInput::Tf32Kn, hopper)));
    let fastest = times.iter().min_by(|a, b| a.1.total_cmp(&b.1)).unwrap().0;
    assert_eq!(best, fastest);
    let kn = GemmClass::of(GemmInput::Tf32Kn, FloatType::F32, 200, 264, 136);
    assert_eq!(ctx.tuned_gemm(kn), Some(best));
    let bt = GemmClass::of(GemmInput::Tf32, FloatType::F32, 200, 264, 136);
    assert_eq!(ctx.tuned_gemm(bt), None);
    let (m, n, k) = (256, 264, 144);
    let s = ctx.stream().unwrap().record();
    assert_eq!(
        s.gemm_choice(GemmInput::Tf32Kn, FloatType::F32, (m, n, k)),
        best
    );
    drop(s);
    let mut rng = Rng(98);
    let (a, b) = (rng.vec(m * k, -1.0, 1.0), rng.vec(k * n, -1.0, 1.0));
    let (prod, mag) = product(&a, &b, (m, n, k));
    let (da, db) = (ctx.upload(&a).unwrap(), ctx.upload(&b).unwrap());
    let mut dc = poisoned(&ctx, m * n);
    let mut s = ctx.stream().unwrap().record();
    s.gemm_tf32_kn(&da, &db, &dc, m, n, k, GemmEpilogue::default())
        .unwrap();
    s.sync().unwrap();
    for (i, g) in dc.to_vec().unwrap().into_iter().enumerate() {
        let bound = tf32_bound(mag[i], k) + 1e-30;
        assert!(
            (g as f64 - prod[i]).abs() <= bound,
            "[{i}] {g} vs {}",
            prod[i]
        );
    }
}
