//! The tensor-core GEMMs (the sm_80 mma.sync path and Hopper's wgmma path) on the device
//! against an f64 product of the same 16-bit inputs (so the only error allowed is f32
//! accumulation), at ragged shapes, with alpha/beta, a NaN-poisoned C under beta = 0, the
//! epilogue's bias, activations and 16-bit outputs, and the shape errors. Skipped without
//! a GPU (the wgmma tests also without an sm_90 one).

mod common;
use common::device::{Half, POISON, Rng, ctx, gemm_shapes, halves, poisoned};

use half::{bf16, f16};
use trueno_gpu::GemmEpilogue;
use trueno_gpu::driver::Context;
use trueno_gpu::gemm_tune::GemmConfig;
use trueno_gpu::kernels::gemm_epilogue::{self, Activation};
use trueno_gpu::kernels::gemm_mma::{GemmInput, HalfType, MmaTileK};
use trueno_gpu::kernels::gemm_wgmma::WgmmaTileN;

/// Which kernel and configuration; `Bt`: B uploaded transposed (`gemm_mma_bt`).
#[derive(Clone, Copy, Debug)]
enum Path {
    Mma(MmaTileK),
    Wgmma(WgmmaTileN),
    Bt(GemmConfig),
    /// A configuration with k cut into this many ranges.
    Split(GemmConfig, u32),
}

/// `b` (k x n) as the path reads it: transposed to n x k for `Bt`.
fn b_for<T: Copy>(path: Path, b: &[T], k: usize, n: usize) -> Vec<T> {
    match path {
        Path::Bt(_) => (0..n * k).map(|i| b[(i % k) * n + i / k]).collect(),
        _ => b.to_vec(),
    }
}

/// One bf16 product on the default path, which picks its configuration
/// (`gemm_mma_with`, or `gemm_mma_bt` with B uploaded transposed), against the f64
/// reference.
fn check_default_path(ctx: &Context, rng: &mut Rng, (m, n, k): (usize, usize, usize), bt: bool) {
    let a: Vec<bf16> = halves(rng, m * k);
    let b: Vec<bf16> = halves(rng, k * n);
    let (af, bf): (Vec<f64>, Vec<f64>) = (
        a.iter().map(|x| x.to_f64()).collect(),
        b.iter().map(|x| x.to_f64()).collect(),
    );
    let (want, mag) = reference(&af, &bf, None, (m, n, k), 1.0, 0.0);
    let path = match bt {
        true => Path::Bt(GemmConfig::Mma(MmaTileK::K32)),
        false => Path::Mma(MmaTileK::K32),
    };
    let (da, db) = (
        ctx.upload(&a).unwrap(),
        ctx.upload(&b_for(path, &b, k, n)).unwrap(),
    );
    let mut dc = poisoned(ctx, m * n);
    let mut s = ctx.stream().unwrap().record();
    let e = GemmEpilogue::default();
    match bt {
        true => s.gemm_mma_bt(&da, &db, &dc, m, n, k, e),
        false => s.gemm_mma_with(&da, &db, &dc, m, n, k, e),
    }
    .unwrap();
    s.sync().unwrap();
    for (i, g) in dc.to_vec().unwrap().into_iter().enumerate() {
        let bound = (k as f64 + 2.0) * 2f64.powi(-23) * mag[i] + 1e-30;
        assert!(
            (g as f64 - want[i]).abs() <= bound,
            "bt {bt} {m}x{n}x{k} [{i}]: {g} vs {}",
            want[i]
        );
    }
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
    let (da, db) = (
        ctx.upload(&a).unwrap(),
        ctx.upload(&b_for(path, &b, k, n)).unwrap(),
    );
    let mut dc = if beta == 0.0 {
        poisoned(ctx, m * n)
    } else {
        ctx.upload(&c0).unwrap()
    };
    let mut s = ctx.stream().unwrap().record();
    run(
        &mut s,
        path,
        (&da, &db, &dc),
        (m, n, k),
        GemmEpilogue::scaled(alpha, beta),
    )
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

/// The product on `path`.
fn run<'a, T: Half, O: trueno_gpu::memory::FloatElem>(
    s: &mut trueno_gpu::driver::Stream<trueno_gpu::driver::Recording<'a>>,
    path: Path,
    (a, b, c): (
        &'a trueno_gpu::memory::DeviceBuffer<T>,
        &'a trueno_gpu::memory::DeviceBuffer<T>,
        &'a trueno_gpu::memory::DeviceBuffer<O>,
    ),
    (m, n, k): (usize, usize, usize),
    e: GemmEpilogue<'a>,
) -> trueno_gpu::Result<()> {
    match path {
        Path::Mma(tk) => s.gemm_mma_tiled(tk, a, b, c, m, n, k, e),
        Path::Wgmma(tn) => s.gemm_wgmma_tiled(tn, a, b, c, m, n, k, e),
        Path::Split(config, splits) => {
            s.gemm_with_split(T::TYPE.into(), config, splits, a, b, c, m, n, k, e)
        }
        Path::Bt(config) => {
            s.gemm_with_config(GemmInput::HalfBt(T::TYPE), config, a, b, c, m, n, k, e)
        }
    }
}

fn check_all(ctx: &trueno_gpu::driver::Context, rng: &mut Rng, path: Path) {
    for &shape in &gemm_shapes() {
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
    for tn in WgmmaTileN::ALL {
        check_all(&ctx, &mut rng, Path::Wgmma(tn));
    }
}

/// k cut into ranges (forced), on both paths: products, alpha/beta and every epilogue
/// through the reduce; 16 ranges of a short k leave most of them empty; the cuts that
/// cannot run.
#[test]
fn split_k_gemm_matches_the_reference_with_every_epilogue() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(99);
    let (k32, k64) = (
        GemmConfig::Mma(MmaTileK::K32),
        GemmConfig::Mma(MmaTileK::K64),
    );
    let mut cuts = vec![(k32, 3), (k64, 16)];
    let n128 = GemmConfig::Wgmma(WgmmaTileN::N128);
    if ctx.has_sm90a() {
        let n256 = GemmConfig::Wgmma(WgmmaTileN::N256);
        cuts.extend([(n128, 2), (n256, 3), (n128, 16)]);
    } else {
        eprintln!("SKIPPED (wgmma): {} is not sm_90", ctx.device().name);
    }
    for &(config, splits) in &cuts {
        check_all(&ctx, &mut rng, Path::Split(config, splits));
    }
    check_epilogues(&ctx, &mut rng, Path::Split(k64, 3));
    if ctx.has_sm90a() {
        check_epilogues(&ctx, &mut rng, Path::Split(n128, 3));
    }
    let x = ctx.upload(&vec![bf16::ONE; 64 * 64]).unwrap();
    let c = poisoned(&ctx, 64 * 64);
    let mut s = ctx.stream().unwrap().record();
    let half = GemmInput::from(HalfType::Bf16);
    let e = GemmEpilogue::default();
    for splits in [0, 17] {
        let r = s.gemm_with_split(half, k32, splits, &x, &x, &c, 64, 64, 64, e);
        assert!(r.is_err(), "{splits}");
    }
}

/// B given transposed (`[out, in]` weights): every configuration, products and
/// epilogues, against the same references.
#[test]
fn tensor_core_gemm_with_b_transposed_matches_the_reference() {
    let Some(ctx) = ctx() else { return };
    let mut configs = vec![
        GemmConfig::Mma(MmaTileK::K32),
        GemmConfig::Mma(MmaTileK::K64),
    ];
    if ctx.has_sm90a() {
        configs.extend([
            GemmConfig::Wgmma(WgmmaTileN::N128),
            GemmConfig::Wgmma(WgmmaTileN::N256),
        ]);
    } else {
        eprintln!("SKIPPED (wgmma): {} is not sm_90", ctx.device().name);
    }
    let mut rng = Rng(98);
    for config in configs {
        check_all(&ctx, &mut rng, Path::Bt(config));
        check_epilogues(&ctx, &mut rng, Path::Bt(config));
    }
    // The default path picks its configuration.
    check_default_path(&ctx, &mut rng, (64, 40, 24), true);
}

#[test]
fn tensor_core_gemm_rejects_shapes_it_cannot_copy_and_wrong_lengths() {
    let Some(ctx) = ctx() else { return };
    let a = ctx.upload(&vec![bf16::ONE; 16 * 16]).unwrap();
    let b = ctx.upload(&vec![bf16::ONE; 16 * 16]).unwrap();
    let c = poisoned(&ctx, 16 * 16);
    let short = ctx.upload(&[0.0f32; 15]).unwrap();
    let bias = ctx.upload(&[0.0f32; 16]).unwrap();
    let mut s = ctx.stream().unwrap().record();
    // n = 12 is not a multiple of 8 (the shape is checked before the lengths).
    let e = s.gemm_mma(&a, &b, &c, 16, 12, 16, 1.0, 0.0).unwrap_err();
    assert!(e.to_string().contains("multiples of 8"), "{e}");
    let e = s.gemm_mma(&a, &b, &c, 0, 16, 16, 1.0, 0.0).unwrap_err();
    assert!(e.to_string().contains("zero-size"), "{e}");
    // A too short for 32 rows.
    assert!(s.gemm_mma(&a, &b, &c, 32, 8, 16, 1.0, 0.0).is_err());
    if ctx.has_sm90a() {
        let none = GemmEpilogue::default();
        let e = s.gemm_wgmma(&a, &b, &c, 16, 12, 16, none).unwrap_err();
        assert!(e.to_string().contains("multiples of 8"), "{e}");
        assert!(s.gemm_wgmma(&a, &b, &c, 32, 8, 16, none).is_err());
    } else {
        // Not a Hopper: a clear error, not a failed module load.
        let e = s
            .gemm_wgmma(&a, &b, &c, 16, 16, 16, GemmEpilogue::default())
            .unwrap_err();
        assert!(e.to_string().contains("sm_90a"), "{e}");
    }
    // A bias of the wrong length; an output aliasing an input or the bias.
    let e = s
        .gemm_mma_with(
            &a,
            &b,
            &c,
            16,
            16,
            16,
            GemmEpilogue::default().with_bias(&short),
        )
        .unwrap_err();
    assert!(e.to_string().contains("bias"), "{e}");
    let e = s.gemm_mma(&a, &b, &a, 16, 16, 16, 1.0, 0.0).unwrap_err();
    assert!(e.to_string().contains("alias"), "{e}");
    let e = s
        .gemm_mma_with(
            &a,
            &b,
            &bias,
            16,
            16,
            16,
            GemmEpilogue::default().with_bias(&bias),
        )
        .unwrap_err();
    assert!(e.to_string().contains("alias"), "{e}");
    s.sync().unwrap();
}

/// An output type of the epilogue, as the test builds and reads it.
trait Out: trueno_gpu::memory::FloatElem {
    /// `x` rounded to this type (to nearest even), as f64.
    fn round(x: f64) -> f64;
    fn to_f64(self) -> f64;
    fn from_f32(x: f32) -> Self;
    /// A NaN no kernel writes.
    fn poison() -> Self;
    fn bits(self) -> u32;
}
impl Out for f32 {
    fn round(x: f64) -> f64 {
        x as f32 as f64
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f32(x: f32) -> Self {
        x
    }
    fn poison() -> Self {
        f32::from_bits(POISON)
    }
    fn bits(self) -> u32 {
        self.to_bits()
    }
}
macro_rules! out16 {
    ($t:ty, $nan:expr) => {
        impl Out for $t {
            fn round(x: f64) -> f64 {
                <$t>::from_f64(x).to_f64()
            }
            fn to_f64(self) -> f64 {
                <$t>::to_f64(self)
            }
            fn from_f32(x: f32) -> Self {
                <$t>::from_f32(x)
            }
            fn poison() -> Self {
                <$t>::from_bits($nan)
            }
            fn bits(self) -> u32 {
                self.to_bits() as u32
            }
        }
    };
}
out16!(bf16, 0x7FC5);
out16!(f16, 0x7E05);

/// One epilogue on `path`: `act(alpha p + beta c + bias)` stored as `O`, against the f64
/// product through `gemm_epilogue::reference`. The GPU's value before the activation is
/// within the accumulation bound of the exact one; the activation (slope at most 1.13,
/// `ex2.approx` inside) widens that; the stored value must then lie between the
/// roundings to `O` of the interval's ends (rounding is monotonic).
#[allow(clippy::too_many_arguments)]
fn check_epilogue<T: Half, O: Out>(
    ctx: &Context,
    rng: &mut Rng,
    path: Path,
    (m, n, k): (usize, usize, usize),
    (alpha, beta): (f32, f32),
    with_bias: bool,
    act: Activation,
) {
    let a: Vec<T> = halves(rng, m * k);
    let b: Vec<T> = halves(rng, k * n);
    let c0: Vec<O> = rng
        .vec(m * n, -2.0, 2.0)
        .into_iter()
        .map(O::from_f32)
        .collect();
    let c0f: Vec<f32> = c0.iter().map(|&x| x.to_f64() as f32).collect();
    let bias = rng.vec(n, -1.5, 1.5);
    let (af, bf): (Vec<f64>, Vec<f64>) = (
        a.iter().map(|x| x.to_f64()).collect(),
        b.iter().map(|x| x.to_f64()).collect(),
    );
    let (prod, mag) = reference(&af, &bf, None, (m, n, k), 1.0, 0.0);
    let (da, db) = (
        ctx.upload(&a).unwrap(),
        ctx.upload(&b_for(path, &b, k, n)).unwrap(),
    );
    let dbias = ctx.upload(&bias).unwrap();
    let start: Vec<O> = if beta == 0.0 {
        vec![O::poison(); m * n]
    } else {
        c0.clone()
    };
    let mut dc = ctx.upload(&start).unwrap();
    let mut e = GemmEpilogue::scaled(alpha, beta).with_activation(act);
    if with_bias {
        e = e.with_bias(&dbias);
    }
    let mut s = ctx.stream().unwrap().record();
    run(&mut s, path, (&da, &db, &dc), (m, n, k), e).unwrap();
    s.sync().unwrap();
    let got = dc.to_vec().unwrap();
    let what = format!(
        "{} -> {} {path:?} {m}x{n}x{k} alpha {alpha} beta {beta} bias {with_bias} {act:?}",
        std::any::type_name::<T>(),
        std::any::type_name::<O>(),
    );
    for (i, &g) in got.iter().enumerate() {
        assert!(
            g.bits() != O::poison().bits(),
            "{what}: element {i} never written"
        );
        let bias_j = with_bias.then(|| bias[i % n]);
        let want = gemm_epilogue::reference(prod[i], c0f[i], (alpha, beta), bias_j, act) as f64;
        let pre = (alpha as f64 * prod[i]).abs() + 4.0;
        let pre_bound = (k as f64 + 2.0) * 2f64.powi(-23) * (alpha.abs() as f64 * mag[i])
            + 2f64.powi(-21) * pre;
        let bound = 1.13 * pre_bound + 3e-5 * want.abs() + 1e-30;
        let (lo, hi) = (O::round(want - bound), O::round(want + bound));
        let g = g.to_f64();
        assert!(
            lo <= g && g <= hi,
            "{what}[{} {}]: got {g}, want {want} (bound {bound:e}: {lo}..={hi})",
            i / n,
            i % n
        );
    }
}

fn check_epilogues(ctx: &Context, rng: &mut Rng, path: Path) {
    let shape = (129, 136, 72);
    for act in Activation::ALL {
        check_epilogue::<bf16, bf16>(ctx, rng, path, shape, (1.0, 0.0), true, act);
        check_epilogue::<f16, f16>(
            ctx,
            rng,
            path,
            shape,
            (0.5, 0.0),
            act == Activation::Gelu,
            act,
        );
        check_epilogue::<bf16, f32>(ctx, rng, path, shape, (1.0, 0.0), true, act);
    }
    // beta reads the 16-bit C; a long k; a single row.
    check_epilogue::<bf16, bf16>(ctx, rng, path, shape, (1.0, -0.5), true, Activation::Silu);
    check_epilogue::<f16, f16>(
        ctx,
        rng,
        path,
        (33, 40, 264),
        (-1.0, 1.0),
        false,
        Activation::Identity,
    );
    check_epilogue::<f16, bf16>(
        ctx,
        rng,
        path,
        (1, 264, 520),
        (1.0, 0.0),
        true,
        Activation::Relu,
    );
}

#[test]
fn tensor_core_gemm_epilogues_match_the_reference() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(93);
    for tk in [MmaTileK::K32, MmaTileK::K64] {
        check_epilogues(&ctx, &mut rng, Path::Mma(tk));
    }
    if !ctx.has_sm90a() {
        eprintln!(
            "SKIPPED (wgmma epilogues): {} is not sm_90",
            ctx.device().name
        );
        return;
    }
    for tn in WgmmaTileN::ALL {
        check_epilogues(&ctx, &mut rng, Path::Wgmma(tn));
    }
}

/// Tuning times every configuration the device runs, keeps the fastest for the shape's
/// class, and the GEMM ops then run it (and still compute the product).
#[test]
fn tuning_keeps_the_fastest_configuration_and_the_ops_take_it() {
    use trueno_gpu::gemm_tune::{GemmClass, GemmConfig};
    use trueno_gpu::kernels::float_type::FloatType;
    use trueno_gpu::kernels::gemm_mma::GemmInput;
    let Some(ctx) = ctx() else { return };
    let hopper = ctx.has_sm90a();
    let (m, n, k) = (200, 264, 136);
    let (times, best) = ctx.tune_gemm::<bf16, f32>(m, n, k).unwrap();
    let ran: Vec<GemmConfig> = times.iter().map(|t| t.0).collect();
    assert_eq!(ran.len(), if hopper { 5 } else { 2 }, "{times:?}");
    let fastest = times.iter().min_by(|a, b| a.1.total_cmp(&b.1)).unwrap().0;
    assert_eq!(best, fastest);
    assert!(
        times.iter().all(|t| t.1 > 0.0 && t.1.is_finite()),
        "{times:?}"
    );
    let class = GemmClass::of(HalfType::Bf16.into(), FloatType::F32, m, n, k);
    assert_eq!(ctx.tuned_gemm(class), Some(best));
    // Another shape of the same class (each dimension rounds up to the same power of
    // two) runs the tuned configuration, and still multiplies correctly.
    let (m, n, k) = (256, 264, 144);
    let s = ctx.stream().unwrap().record();
    assert_eq!(
        s.gemm_choice(HalfType::Bf16.into(), FloatType::F32, (m, n, k)),
        best
    );
    drop(s);
    check_default_path(&ctx, &mut Rng(97), (m, n, k), false);
    // TF32 has one sm_80 configuration (the 32-wide k-step).
    let (times, _) = ctx.tune_gemm::<f32, bf16>(128, 256, 64).unwrap();
    assert_eq!(times.len(), if hopper { 4 } else { 1 }, "{times:?}");
    assert!(times.iter().all(|t| t.0.runs(GemmInput::Tf32, hopper)));
    // B transposed (`gemm_mma_bt`) is a class of its own, tuned by `tune_gemm_for`.
    let bt = GemmInput::HalfBt(HalfType::Bf16);
    let (times, best) = ctx.tune_gemm_for::<bf16, bf16>(bt, 128, 256, 64).unwrap();
    assert_eq!(times.len(), if hopper { 5 } else { 2 }, "{times:?}");
    let class = GemmClass::of(bt, FloatType::Bf16, 128, 256, 64);
    assert_eq!(ctx.tuned_gemm(class), Some(best));
    let s = ctx.stream().unwrap().record();
    assert_eq!(s.gemm_choice(bt, FloatType::Bf16, (100, 200, 64)), best);
    drop(s);
    // The element type must be the input's.
    let e = ctx
        .tune_gemm_for::<bf16, f32>(GemmInput::Tf32, 128, 128, 64)
        .unwrap_err();
    assert!(e.to_string().contains("bf16 inputs for a tf32"), "{e}");
}
