//! Canonical definitions: what every backend's operation means, in plain f64 arithmetic
//! rounded once to f32. They are the accuracy reference of the test suite, independent of
//! the SIMD approximations (different formulas, double precision), and document the
//! special-value semantics every backend follows.
//!
//! ```
//! use trueno::activations;
//! assert_eq!(activations::relu(-2.0), 0.0);
//! assert!((activations::gelu_erf(1.0) - 0.841_344_7).abs() < 1e-6);
//! ```

/// e^x.
pub fn exp(x: f32) -> f32 {
    (x as f64).exp() as f32
}

/// Natural logarithm; NaN for x < 0, -inf at 0.
pub fn ln(x: f32) -> f32 {
    (x as f64).ln() as f32
}

/// max(x, 0); NaN stays NaN.
pub fn relu(x: f32) -> f32 {
    if x <= 0.0 { 0.0 } else { x }
}

/// x for x >= 0, alpha * x otherwise.
pub fn leaky_relu(x: f32, alpha: f32) -> f32 {
    if x < 0.0 { alpha * x } else { x }
}

/// x for x > 0, alpha * (e^x - 1) otherwise.
pub fn elu(x: f32, alpha: f32) -> f32 {
    if x < 0.0 {
        (alpha as f64 * (x as f64).exp_m1()) as f32
    } else {
        x
    }
}

/// 1 / (1 + e^-x).
pub fn sigmoid(x: f32) -> f32 {
    (1.0 / (1.0 + (-(x as f64)).exp())) as f32
}

/// tanh x.
pub fn tanh(x: f32) -> f32 {
    (x as f64).tanh() as f32
}

/// x * f(x) with the limit 0 at x = -inf, where the product would be -inf * 0.
fn times_vanishing(x: f32, f: impl Fn(f64) -> f64) -> f32 {
    if x == f32::NEG_INFINITY {
        -0.0
    } else {
        (x as f64 * f(x as f64)) as f32
    }
}

/// GELU, tanh approximation: 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
/// evaluated as x / (1 + e^(-2u)) (the same function, without the cancellation of
/// 1 + tanh(u) for negative x).
pub fn gelu_tanh(x: f32) -> f32 {
    let k = (2.0 / std::f64::consts::PI).sqrt();
    times_vanishing(x, |x| {
        1.0 / (1.0 + (-2.0 * k * (x + 0.044715 * x * x * x)).exp())
    })
}

/// GELU, exact: x * Phi(x) = x * erfc(-x / sqrt 2) / 2.
pub fn gelu_erf(x: f32) -> f32 {
    times_vanishing(x, |x| 0.5 * erfc(-x / std::f64::consts::SQRT_2))
}

/// SiLU (swish): x * sigmoid(x).
pub fn silu(x: f32) -> f32 {
    times_vanishing(x, |x| 1.0 / (1.0 + (-x).exp()))
}

/// ln(1 + e^x).
pub fn softplus(x: f32) -> f32 {
    let x = x as f64;
    (x.max(0.0) + (-x.abs()).exp().ln_1p()) as f32
}

/// x * min(max(x + 3, 0), 6) / 6.
pub fn hardswish(x: f32) -> f32 {
    if x <= -3.0 {
        0.0
    } else if x >= 3.0 {
        x
    } else {
        (x as f64 * (x as f64 + 3.0) / 6.0) as f32
    }
}

/// Mish: x * tanh(softplus(x)).
pub fn mish(x: f32) -> f32 {
    times_vanishing(x, |x| (x.max(0.0) + (-x.abs()).exp().ln_1p()).tanh())
}

/// erf x in f64 (Maclaurin series below 2.5, continued fraction above).
pub fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x < 0.0 {
        return -erf(-x);
    }
    if x < 2.5 {
        erf_series(x)
    } else {
        1.0 - erfc_cf(x)
    }
}

/// erfc x in f64, with relative accuracy in the upper tail.
pub fn erfc(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x < 2.5 { 1.0 - erf(x) } else { erfc_cf(x) }
}

fn erf_series(x: f64) -> f64 {
    // erf x = 2/sqrt(pi) * sum_n (-1)^n x^(2n+1) / (n! (2n+1))
    let mut term = x;
    let mut sum = x;
    let x2 = x * x;
    for n in 1..200 {
        term *= -x2 / n as f64;
        let add = term / (2 * n + 1) as f64;
        sum += add;
        if add.abs() < 1e-17 * sum.abs() {
            break;
        }
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

fn erfc_cf(x: f64) -> f64 {
    if x == f64::INFINITY {
        return 0.0;
    }
    // erfc x = e^{-x^2}/sqrt(pi) * 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))), evaluated
    // bottom-up from a depth that converges for x >= 2.5.
    let mut f = x;
    for k in (1..120).rev() {
        f = x + (k as f64 / 2.0) / f;
    }
    (-x * x).exp() / std::f64::consts::PI.sqrt() / f
}

/// Softmax in f64 (the reference for `Engine::softmax_into`).
pub fn softmax(x: &[f32]) -> Vec<f32> {
    let m = x.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
    let e: Vec<f64> = x.iter().map(|&v| (v as f64 - m).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|v| (v / s) as f32).collect()
}

/// Log-softmax in f64.
pub fn log_softmax(x: &[f32]) -> Vec<f32> {
    let m = x.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
    let s: f64 = x.iter().map(|&v| (v as f64 - m).exp()).sum();
    x.iter().map(|&v| (v as f64 - m - s.ln()) as f32).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_known_values() {
        // Values from Abramowitz & Stegun table 7.1.
        for (x, want) in [
            (0.5, 0.520_499_877_8),
            (1.0, 0.842_700_792_9),
            (2.0, 0.995_322_265_0),
        ] {
            assert!((erf(x) - want).abs() < 1e-9, "erf({x})");
        }
        // erfc(3) = 2.209049699858544e-05, erfc(5) = 1.5374597944280349e-12.
        assert!((erfc(3.0) / 2.209_049_699_858_544e-5 - 1.0).abs() < 1e-12);
        assert!((erfc(5.0) / 1.537_459_794_428_035e-12 - 1.0).abs() < 1e-12);
        assert!((erf(2.4999) - erf(2.5001)).abs() < 1e-5);
    }

    #[test]
    fn limits_at_infinity() {
        assert_eq!(silu(f32::NEG_INFINITY), 0.0);
        assert_eq!(gelu_erf(f32::INFINITY), f32::INFINITY);
        assert_eq!(mish(f32::NEG_INFINITY), 0.0);
        assert_eq!(softplus(f32::NEG_INFINITY), 0.0);
        assert!(relu(f32::NAN).is_nan());
    }
}
