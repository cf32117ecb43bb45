// Transcendentals shared by every trueno-wgpu shader: the same algorithms and coefficients
// as the CPU ISAs (crates/trueno/src/ops/math.rs), so every backend meets one error bound
// instead of each GPU vendor's own exp/log accuracy (WGSL allows exp 3 + 2|x| ulp).
// Special values come from bit patterns: WGSL constant expressions cannot hold inf or NaN.

const LOG2E: f32 = 1.44269504;
const LN2_HI: f32 = 0.693359375;
const LN2_LO: f32 = -2.12194440e-4;

fn t_inf() -> f32 { return bitcast<f32>(0x7f800000u); }
fn t_nan() -> f32 { return bitcast<f32>(0x7fc00000u); }
fn t_is_nan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }

// x86 min/max semantics (the second operand when either is NaN), as the CPU kernels use.
// The NaN test is on the bits: drivers turn `select(b, a, a > b)` into a max instruction
// that drops NaN (NVIDIA's Vulkan driver does).
fn t_min(a: f32, b: f32) -> f32 {
    if (t_is_nan(a) || t_is_nan(b)) { return b; }
    return select(b, a, a < b);
}
fn t_max(a: f32, b: f32) -> f32 {
    if (t_is_nan(a) || t_is_nan(b)) { return b; }
    return select(b, a, a > b);
}

// An integer-valued n as a value the compiler cannot prove equal to n. Shader compilers
// may reassociate float math (WGSL marks nothing exact): Mesa rewrote the Cody-Waite pair
// n * LN2_HI + n * LN2_LO as n * (LN2_HI + LN2_LO), which costs exp 4e-6 relative error at
// x = 72. Factoring needs the same n in both products; f32(i32(n)) is not foldable to n.
fn t_opaque_copy(n: f32) -> f32 { return f32(i32(n)); }

// 2^n for an integer-valued n in [-126, 127], built from its bits.
fn t_pow2i(n: f32) -> f32 { return bitcast<f32>(u32(i32(n) + 127) << 23u); }

fn t_exp(x_in: f32) -> f32 {
    if (t_is_nan(x_in)) { return x_in; }
    let x = min(88.8, max(-104.0, x_in));
    let n = round(x * LOG2E);
    var r = fma(n, -LN2_HI, x);
    r = fma(t_opaque_copy(n), -LN2_LO, r);
    var p = 1.9875691e-4;
    p = fma(p, r, 1.3981999e-3);
    p = fma(p, r, 8.333452e-3);
    p = fma(p, r, 4.1665796e-2);
    p = fma(p, r, 1.6666665e-1);
    p = fma(p, r, 5e-1);
    let er = fma(p, r * r, r) + 1.0;
    let n1 = round(n * 0.5);
    let n2 = n - n1;
    return (er * t_pow2i(n1)) * t_pow2i(n2);
}

// ln((1 + f) * 2^e) for f in [sqrt(1/2) - 1, sqrt(2) - 1]: the CPU's polynomial.
fn t_ln_core(f: f32, e: f32) -> f32 {
    let z = f * f;
    var p = 7.0376836e-2;
    p = fma(p, f, -1.151461e-1);
    p = fma(p, f, 1.1676999e-1);
    p = fma(p, f, -1.2420141e-1);
    p = fma(p, f, 1.4249323e-1);
    p = fma(p, f, -1.6668058e-1);
    p = fma(p, f, 2.0000714e-1);
    p = fma(p, f, -2.4999994e-1);
    p = fma(p, f, 3.333333e-1);
    var y = (p * f) * z;
    y = fma(t_opaque_copy(e), LN2_LO, y);
    y = fma(z, -0.5, y);
    return fma(e, LN2_HI, f + y);
}

fn t_ln(x: f32) -> f32 {
    if (t_is_nan(x) || x < 0.0) { return t_nan(); }
    if (x == 0.0) { return -t_inf(); }
    if (x == t_inf()) { return x; }
    let sub = x < 1.17549435e-38;
    let xs = select(x, x * 8388608.0, sub);
    let bits = bitcast<u32>(xs);
    var e = f32(i32((bits >> 23u) & 0xffu) - 127);
    var m = bitcast<f32>((bits & 0x007fffffu) | 0x3f800000u);
    e = select(e, e - 23.0, sub);
    let big = m > 1.41421356;
    m = select(m, m * 0.5, big);
    e = select(e, e + 1.0, big);
    return t_ln_core(m - 1.0, e);
}

fn t_tanh(x: f32) -> f32 {
    let ax = abs(x);
    if (ax < 0.625) {
        let z = x * x;
        var p = -5.7049887e-3;
        p = fma(p, z, 2.063909e-2);
        p = fma(p, z, -5.3739716e-2);
        p = fma(p, z, 1.3331442e-1);
        p = fma(p, z, -3.333328e-1);
        return fma(p * z, x, x);
    }
    if (t_is_nan(x)) { return x; }
    let e = t_exp(ax + ax);
    let large = 1.0 - 2.0 / (e + 1.0);
    return select(large, -large, x < 0.0);
}

fn t_sigmoid(x: f32) -> f32 { return 1.0 / (1.0 + t_exp(-x)); }

fn t_expm1(x: f32) -> f32 {
    let u = t_exp(x);
    if (u == 1.0) { return x; }
    let um1 = u - 1.0;
    if (um1 == -1.0 || u == t_inf()) { return um1; }
    return (um1 * x) / t_ln(u);
}

// ln(1 + y) for y >= 0. Below sqrt(2) - 1 the polynomial takes y itself, so the rounding
// of 1 + y never enters (the CPU's compensation ln(u) * y / (u - 1) does not survive
// shader compilers, which may fold (1 + y) - 1 to y).
fn t_log1p_nonneg(y: f32) -> f32 {
    if (y < 0.41421356) { return t_ln_core(y, 0.0); }
    return t_ln(1.0 + y);
}

// erfc z for z >= 0.
fn t_erfc_nonneg(z: f32) -> f32 {
    if (z == t_inf()) { return 0.0; }
    let t = 1.0 / fma(0.5, z, 1.0);
    var p = 0.17087277;
    p = fma(p, t, -0.82215223);
    p = fma(p, t, 1.4885159);
    p = fma(p, t, -1.135204);
    p = fma(p, t, 0.27886807);
    p = fma(p, t, -0.18628806);
    p = fma(p, t, 0.09678418);
    p = fma(p, t, 0.37409196);
    p = fma(p, t, 1.0000237);
    p = fma(p, t, -1.2655122);
    return t * t_exp(p - z * z);
}

fn t_normal_cdf(x: f32) -> f32 {
    let tail = 0.5 * t_erfc_nonneg(abs(x) * 0.70710678);
    return select(1.0 - tail, tail, x < 0.0);
}

fn t_softplus(x: f32) -> f32 {
    return t_max(0.0, x) + t_log1p_nonneg(t_exp(-abs(x)));
}

// Products x * g(x) with g(-inf) = 0 are 0 in the limit, not NaN.
fn t_limit_at_neg_inf(x: f32, r: f32) -> f32 { return select(r, -0.0, x == -t_inf()); }
