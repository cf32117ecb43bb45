//! The tensor-core GEMMs (the sm_80 mma.sync path and Hopper's wgmma path) on the device
//! against an f64 product of the same 16-bit inputs (so the only error allowed is f32
//! accumulation), at ragged shapes, with alpha/beta, a NaN-poisoned C under beta = 0, and
//! the shape errors. Skipped without a GPU (the wgmma tests also without an sm_90 one).

mod common;
use common::device::{Half, POISON, Rng, ctx, halves, poisoned, small};

use half::{bf16, f16};
use trueno_gpu::kernels::gemm_mma::MmaTileK;
use trueno_gpu::kernels::gemm_wgmma::WgmmaTileN;

/// Which kernel and configuration.
#[derive(Clone, Copy, Debug)]
enum Path {
    Mma(MmaTileK),
    Wgmma(WgmmaTileN),
}

/// f64 `alpha * a b + beta * c` and, per element, `sum |a| |b|` (the scale of the
/// rounding error an f32 accumulation may make).
fn reference(
    a: &[f64],
    b: &[f64],
    c: Option<&[f32]>,
    (m, n, k): (usize, usize, usize),
    alpha: f64,
    beta: f64,
) -> (Vec<f64>, Vec<f64>) {
    let mut out = vec![0.0; m * n];
    let mut mag = vec![0.0; m * n];
    for i in 0..m {
        for p in 0..k {
            let av = a[i * k + p];
            for j in 0..n {
                out[i * n + j] += av * b[p * n + j];
                mag[i * n + j] += (av * b[p * n + j]).abs();
            }
        }
    }
    for (idx, o) in out.iter_mut().enumerate() {
        *o *= alpha;
        if let Some(c) = c {
            *o += beta * c[idx] as f64;
        }
    }
    (out, mag)
}

fn check<T: Half>(
    ctx: &trueno_gpu::driver::Context,
    rng: &mut Rng,
    path: Path,
    (m, n, k): (usize, usize, usize),
    alpha: f32,
    beta: f32,
) {
    let a: Vec<T> = halves(rng, m * k);
    let b: Vec<T> = halves(rng, k * n);
    let c0 = rng.vec(m * n, -2.0, 2.0);
    let (af, bf): (Vec<f64>, Vec<f64>) = (
        a.iter().map(|x| x.to_f64()).collect(),
        b.iter().map(|x| x.to_f64()).collect(),
    );
    let (want, mag) = reference(
        &af,
        &bf,
        (beta != 0.0).then_some(&c0[..]),
        (m, n, k),
        alpha as f64,
        beta as f64,
    );
    let (da, db) = (ctx.upload(&a).unwrap(), ctx.upload(&b).unwrap());
    let mut dc = if beta == 0.0 {
        poisoned(ctx, m * n)
    } else {
        ctx.upload(&c0).unwrap()
    };
    let mut s = ctx.stream().unwrap().record();
    match path {
        Path::Mma(tk) => s.gemm_mma_tiled(tk, &da, &db, &dc, m, n, k, alpha, beta),
        Path::Wgmma(tn) => s.gemm_wgmma_tiled(tn, &da, &db, &dc, m, n, k, alpha, beta),
    }
    .unwrap();
    s.sync().unwrap();
    let got = dc.to_vec().unwrap();
    let what = format!(
        "{} {path:?} {m}x{n}x{k} alpha {alpha} beta {beta}",
        std::any::type_name::<T>()
    );
    for (i, (&g, (&w, &s))) in got.iter().zip(want.iter().zip(&mag)).enumerate() {
        assert!(g.to_bits() != POISON, "{what}: element {i} never written");
        // Products of 16-bit values are exact in f32; each of the k additions may round
        // (2^-24 of the running sum, bounded by sum |a||b|), the beta term once more.
        let bound = (k as f64 + 2.0) * 2f64.powi(-23) * (alpha.abs() as f64 * s)
            + 2f64.powi(-22) * (beta.abs() as f64 * 2.0)
            + 1e-30;
        assert!(
            (g as f64 - w).abs() <= bound,
            "{what}[{} {}]: got {g}, want {w} (bound {bound:e})",
            i / n,
            i % n
        );
    }
}

fn ragged_shapes() -> Vec<(usize, usize, usize)> {
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

fn check_all(ctx: &trueno_gpu::driver::Context, rng: &mut Rng, path: Path) {
    for &shape in &ragged_shapes() {
        check::<bf16>(ctx, rng, path, shape, 1.0, 0.0);
        check::<f16>(ctx, rng, path, shape, 1.0, 0.0);
    }
    for &(alpha, beta) in &[(0.5f32, -1.5f32), (-1.0, 1.0), (2.0, 0.0)] {
        check::<bf16>(ctx, rng, path, (129, 136, 72), alpha, beta);
        check::<f16>(ctx, rng, path, (33, 40, 264), alpha, beta);
    }
}

#[test]
fn tensor_core_gemm_matches_an_f64_product_at_ragged_shapes() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(91);
    for tk in [MmaTileK::K32, MmaTileK::K64] {
        check_all(&ctx, &mut rng, Path::Mma(tk));
    }
}

/// More k-tiles than stages (the ring wraps and phases flip), tiles ragged in every
/// dimension, k below one k-tile.
#[test]
fn hopper_gemm_matches_an_f64_product_at_ragged_shapes() {
    let Some(ctx) = ctx() else { return };
    if !ctx.has_sm90a() {
        eprintln!(
            "SKIPPED: {} is not sm_90 (wgmma needs sm_90a)",
            ctx.device().name
        );
        return;
    }
    let mut rng = Rng(92);
    for tn in [WgmmaTileN::N128, WgmmaTileN::N256] {
        check_all(&ctx, &mut rng, Path::Wgmma(tn));
    }
}

#[test]
fn tensor_core_gemm_rejects_shapes_it_cannot_copy_and_wrong_lengths() {
    let Some(ctx) = ctx() else { return };
    let a = ctx.upload(&vec![bf16::ONE; 16 * 16]).unwrap();
    let b = ctx.upload(&vec![bf16::ONE; 16 * 16]).unwrap();
    let c = poisoned(&ctx, 16 * 16);
    let mut s = ctx.stream().unwrap().record();
    // n = 12 is not a multiple of 8 (the shape is checked before the lengths).
    let e = s.gemm_mma(&a, &b, &c, 16, 12, 16, 1.0, 0.0).unwrap_err();
    assert!(e.to_string().contains("multiples of 8"), "{e}");
    let e = s.gemm_mma(&a, &b, &c, 0, 16, 16, 1.0, 0.0).unwrap_err();
    assert!(e.to_string().contains("zero-size"), "{e}");
    // A too short for 32 rows.
    assert!(s.gemm_mma(&a, &b, &c, 32, 8, 16, 1.0, 0.0).is_err());
    if ctx.has_sm90a() {
        let e = s.gemm_wgmma(&a, &b, &c, 16, 12, 16, 1.0, 0.0).unwrap_err();
        assert!(e.to_string().contains("multiples of 8"), "{e}");
        assert!(s.gemm_wgmma(&a, &b, &c, 32, 8, 16, 1.0, 0.0).is_err());
    } else {
        // Not a Hopper: a clear error, not a failed module load.
        let e = s.gemm_wgmma(&a, &b, &c, 16, 16, 16, 1.0, 0.0).unwrap_err();
        assert!(e.to_string().contains("sm_90a"), "{e}");
    }
    s.sync().unwrap();
}
