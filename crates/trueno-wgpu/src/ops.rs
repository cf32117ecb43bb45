//! The operations, as values: each variant carries its scalar parameters and knows the
//! WGSL expression that computes it. Bodies see `x = a[i]`, the other operands `b[i]`,
//! `c[i]`, the parameters `P.p0`, `P.p1`, and the helpers of `shaders/math.wgsl` (the CPU's
//! algorithms, so both backends meet the same error bounds).

/// One-input elementwise ops: the same set, names and semantics as `trueno::Engine`'s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum UnaryOp {
    /// `|x|`.
    Abs,
    /// `-x`.
    Neg,
    /// `sqrt(x)` (NaN for negative x).
    Sqrt,
    /// `1 / x`.
    Recip,
    /// `alpha * x`.
    Scale(f32),
    /// `x + c`.
    AddScalar(f32),
    /// `min(max(x, lo), hi)`; NaN stays NaN.
    Clamp(f32, f32),
    /// `e^x`.
    Exp,
    /// Natural logarithm.
    Ln,
    /// `max(x, 0)`, NaN-propagating.
    Relu,
    /// `x` for `x >= 0`, else `alpha * x`.
    LeakyRelu(f32),
    /// `x` for `x > 0`, else `alpha * (e^x - 1)`.
    Elu(f32),
    /// `1 / (1 + e^-x)`.
    Sigmoid,
    /// Hyperbolic tangent.
    Tanh,
    /// GELU, tanh approximation (PyTorch `approximate="tanh"`).
    Gelu,
    /// GELU, exact erf form.
    GeluErf,
    /// `x * sigmoid(x)`.
    Silu,
    /// `ln(1 + e^x)`.
    Softplus,
    /// `x * relu6(x + 3) / 6`.
    Hardswish,
    /// `x * tanh(softplus(x))`.
    Mish,
}

impl UnaryOp {
    /// Every op, with sample parameters (for tests, benches and `trueno bench`).
    pub const ALL: [UnaryOp; 20] = [
        UnaryOp::Abs,
        UnaryOp::Neg,
        UnaryOp::Sqrt,
        UnaryOp::Recip,
        UnaryOp::Scale(2.5),
        UnaryOp::AddScalar(1.5),
        UnaryOp::Clamp(-1.0, 1.0),
        UnaryOp::Exp,
        UnaryOp::Ln,
        UnaryOp::Relu,
        UnaryOp::LeakyRelu(0.01),
        UnaryOp::Elu(1.0),
        UnaryOp::Sigmoid,
        UnaryOp::Tanh,
        UnaryOp::Gelu,
        UnaryOp::GeluErf,
        UnaryOp::Silu,
        UnaryOp::Softplus,
        UnaryOp::Hardswish,
        UnaryOp::Mish,
    ];

    /// The op's name (as in `trueno::Engine`: `exp` for `exp_into`).
    pub fn name(self) -> &'static str {
        self.kernel().0
    }

    /// (name, WGSL body) of the op.
    pub(crate) fn kernel(self) -> (&'static str, &'static str) {
        use UnaryOp::*;
        match self {
            Abs => ("abs", "return abs(x);"),
            Neg => ("neg", "return -x;"),
            Sqrt => ("sqrt", "return select(sqrt(x), t_nan(), x < 0.0);"),
            Recip => ("recip", "return 1.0 / x;"),
            Scale(_) => ("scale", "return x * P.p0;"),
            AddScalar(_) => ("add_scalar", "return x + P.p0;"),
            Clamp(..) => ("clamp", "return t_min(P.p1, t_max(P.p0, x));"),
            Exp => ("exp", "return t_exp(x);"),
            Ln => ("ln", "return t_ln(x);"),
            Relu => ("relu", "return select(x, 0.0, x <= 0.0);"),
            LeakyRelu(_) => ("leaky_relu", "return select(x, x * P.p0, x < 0.0);"),
            Elu(_) => ("elu", "return select(x, P.p0 * t_expm1(x), x < 0.0);"),
            Sigmoid => ("sigmoid", "return t_sigmoid(x);"),
            Tanh => ("tanh", "return t_tanh(x);"),
            // 0.5 x (1 + tanh u) = x * sigmoid(2u): no cancellation for negative x.
            Gelu => (
                "gelu",
                "let u2 = fma(x * x * x, 0.044715, x) * 1.5957692;
    return t_limit_at_neg_inf(x, x / (1.0 + t_exp(-u2)));",
            ),
            GeluErf => (
                "gelu_erf",
                "return t_limit_at_neg_inf(x, x * t_normal_cdf(x));",
            ),
            Silu => (
                "silu",
                "return t_limit_at_neg_inf(x, x / (1.0 + t_exp(-x)));",
            ),
            Softplus => ("softplus", "return t_softplus(x);"),
            Hardswish => (
                "hardswish",
                "if (x <= -3.0) { return 0.0; }
    if (3.0 <= x) { return x; }
    return (x * (x + 3.0)) * (1.0 / 6.0);",
            ),
            Mish => (
                "mish",
                "return t_limit_at_neg_inf(x, x * t_tanh(t_softplus(x)));",
            ),
        }
    }

    /// The scalar parameters, as `P.p0` and `P.p1`.
    pub(crate) fn params(self) -> [f32; 2] {
        match self {
            UnaryOp::Scale(a) | UnaryOp::AddScalar(a) | UnaryOp::LeakyRelu(a) | UnaryOp::Elu(a) => {
                [a, 0.0]
            }
            UnaryOp::Clamp(lo, hi) => [lo, hi],
            _ => [0.0, 0.0],
        }
    }
}

/// Two-input elementwise ops `f(a, b)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BinaryOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b`.
    Div,
    /// NaN-propagating minimum.
    Minimum,
    /// NaN-propagating maximum.
    Maximum,
    /// `a + alpha * b` (BLAS axpy with `a` as y).
    Axpy(f32),
    /// `a + t * (b - a)`.
    Lerp(f32),
}

impl BinaryOp {
    /// Every op, with sample parameters.
    pub const ALL: [BinaryOp; 8] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Minimum,
        BinaryOp::Maximum,
        BinaryOp::Axpy(-0.75),
        BinaryOp::Lerp(0.25),
    ];

    /// The op's name.
    pub fn name(self) -> &'static str {
        self.kernel().0
    }

    pub(crate) fn kernel(self) -> (&'static str, &'static str) {
        use BinaryOp::*;
        match self {
            Add => ("add", "return x + b[i];"),
            Sub => ("sub", "return x - b[i];"),
            Mul => ("mul", "return x * b[i];"),
            Div => ("div", "return x / b[i];"),
            Minimum => ("minimum", "return select(t_min(x, b[i]), x, t_is_nan(x));"),
            Maximum => ("maximum", "return select(t_max(x, b[i]), x, t_is_nan(x));"),
            Axpy(_) => ("axpy", "return fma(P.p0, b[i], x);"),
            Lerp(_) => ("lerp", "return fma(P.p0, b[i] - x, x);"),
        }
    }

    pub(crate) fn params(self) -> [f32; 2] {
        match self {
            BinaryOp::Axpy(a) | BinaryOp::Lerp(a) => [a, 0.0],
            _ => [0.0, 0.0],
        }
    }
}

/// Reductions of one vector to a scalar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceOp {
    /// `sum x_i` (0 for empty input).
    Sum,
    /// Arithmetic mean (error on empty input).
    Mean,
    /// Largest element, NaN if any is NaN (error on empty input).
    Max,
    /// Smallest element, NaN if any is NaN (error on empty input).
    Min,
    /// `sum |x_i|`.
    NormL1,
    /// `sqrt(sum x_i^2)`, scaled by the largest magnitude so that it is finite whenever the
    /// true norm is.
    NormL2,
    /// `max |x_i|`.
    NormLinf,
    /// Population variance, two passes (error on empty input).
    Variance,
    /// Population standard deviation (error on empty input).
    Stddev,
}

impl ReduceOp {
    /// Every reduction.
    pub const ALL: [ReduceOp; 9] = [
        ReduceOp::Sum,
        ReduceOp::Mean,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::NormL1,
        ReduceOp::NormL2,
        ReduceOp::NormLinf,
        ReduceOp::Variance,
        ReduceOp::Stddev,
    ];

    /// Whether an empty input is an error (as on the CPU).
    pub(crate) fn needs_input(self) -> bool {
        matches!(
            self,
            ReduceOp::Mean | ReduceOp::Max | ReduceOp::Min | ReduceOp::Variance | ReduceOp::Stddev
        )
    }
}

/// Reductions of two equal-length vectors to a scalar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduce2Op {
    /// `sum a_i b_i`.
    Dot,
    /// `|a - b|_2`.
    Euclidean,
    /// `|a - b|_1`.
    Manhattan,
    /// `a·b / (|a| |b|)` clamped to [-1, 1]; 0 when either is zero; error on empty input.
    Cosine,
}

impl Reduce2Op {
    /// Every two-vector reduction.
    pub const ALL: [Reduce2Op; 4] = [
        Reduce2Op::Dot,
        Reduce2Op::Euclidean,
        Reduce2Op::Manhattan,
        Reduce2Op::Cosine,
    ];
}

/// Whole-vector maps: each output element depends on a reduction over the whole input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VectorOp {
    /// `e^(x_i - max) / sum_j e^(x_j - max)`.
    Softmax,
    /// `x_i - max - ln(sum_j e^(x_j - max))`.
    LogSoftmax,
    /// `x / |x|_2`; a zero vector stays zero.
    Normalize,
}

impl VectorOp {
    /// Every whole-vector map.
    pub const ALL: [VectorOp; 3] = [VectorOp::Softmax, VectorOp::LogSoftmax, VectorOp::Normalize];
}
