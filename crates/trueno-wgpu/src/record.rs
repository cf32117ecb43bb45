//! The ops of a [`Batch`]: each records its dispatches and returns its output buffer,
//! which later ops of the same batch can take as input.

use crate::batch::{Batch, MAX_GROUPS, groups_for};
use crate::buffer::GpuBuffer;
use crate::error::{GpuError, Result, check_len};
use crate::kernels::{self, Fold, RowKernel};
use crate::ops::{BinaryOp, Reduce2Op, ReduceOp, UnaryOp, VectorOp};

/// Threads per workgroup in the 1-D kernels.
const WG: usize = 256;
/// Partial results of a reduction's first pass: enough workgroups to fill a large GPU,
/// few enough for one workgroup to fold in the second pass.
const MAX_PARTIALS: usize = 1024;

/// Words of a parameter block: n, two f32 parameters, a flag.
fn words(n: usize, p: [f32; 2], flag: u32) -> [u32; 4] {
    [n as u32, p[0].to_bits(), p[1].to_bits(), flag]
}

/// Elements a kernel can index with a u32.
fn check_count(op: &'static str, n: usize) -> Result<()> {
    if n > u32::MAX as usize {
        return Err(GpuError::Shape {
            op,
            reason: format!("{n} elements exceed the 2^32 a GPU kernel indexes"),
        });
    }
    Ok(())
}

fn empty(op: &'static str) -> GpuError {
    GpuError::Shape {
        op,
        reason: "empty input".into(),
    }
}

/// A reduction kernel: `elem` maps element i (`x = a[i]`, also `b[i]`, `aux[0]`), `fold`
/// combines, `finish` maps the total `v` (`P.p0` holds n as f32). `name` keys the cache,
/// so each distinct `elem` has its own.
struct Reduction {
    name: &'static str,
    elem: &'static str,
    fold: Fold,
    finish: &'static str,
}

const fn red(
    name: &'static str,
    elem: &'static str,
    fold: Fold,
    finish: &'static str,
) -> Reduction {
    Reduction {
        name,
        elem,
        fold,
        finish,
    }
}

const SUM: Reduction = red("id", "return x;", Fold::Sum, "return v;");
const MEAN: Reduction = red("id", "return x;", Fold::Sum, "return v / P.p0;");
const MAX: Reduction = red("id", "return x;", Fold::Max, "return v;");
const MIN: Reduction = red("id", "return x;", Fold::Min, "return v;");
const SUM_ABS: Reduction = red("abs", "return abs(x);", Fold::Sum, "return v;");
const MAX_ABS: Reduction = red("abs", "return abs(x);", Fold::Max, "return v;");
/// Squares of x / max|x| (aux): no overflow or underflow whenever the norm is finite.
const SCALED_NORM: Reduction = red(
    "scaled-sq",
    "let m = aux[0];\n    if (m == 0.0 || m == t_inf()) { return 0.0; }\n    let s = x / m;\n    return s * s;",
    Fold::Sum,
    "let m = aux[0];\n    if (m == 0.0 || m == t_inf() || t_is_nan(m)) { return m; }\n    return sqrt(v) * m;",
);
/// Squared deviations from the mean (aux): the second pass of the variance.
const VARIANCE: Reduction = red(
    "sq-dev",
    "let d = x - aux[0];\n    return d * d;",
    Fold::Sum,
    "return v / P.p0;",
);
const STDDEV: Reduction = red(
    "sq-dev",
    "let d = x - aux[0];\n    return d * d;",
    Fold::Sum,
    "return sqrt(v / P.p0);",
);
const DOT: Reduction = red("dot", "return x * b[i];", Fold::Sum, "return v;");
const SQ_DIST: Reduction = red(
    "sq-dist",
    "let d = x - b[i];\n    return d * d;",
    Fold::Sum,
    "return sqrt(v);",
);
const ABS_DIST: Reduction = red("abs-dist", "return abs(x - b[i]);", Fold::Sum, "return v;");
/// Softmax's denominator: sum of e^(x - max), max in aux.
const SUM_EXP_SHIFTED: Reduction = red(
    "exp-shift",
    "return t_exp(x - aux[0]);",
    Fold::Sum,
    "return v;",
);

impl Batch<'_> {
    /// `op(x)` elementwise into a new buffer.
    pub fn unary(&mut self, op: UnaryOp, x: &GpuBuffer) -> Result<GpuBuffer> {
        let out = self.alloc("unary", x.len)?;
        self.unary_into(op, x, &out)?;
        Ok(out)
    }

    /// `op(x)` elementwise into `out` (same length, not `x` itself). Reusing an output
    /// buffer also spares the zero fill wgpu gives every new buffer on first use.
    pub fn unary_into(&mut self, op: UnaryOp, x: &GpuBuffer, out: &GpuBuffer) -> Result<()> {
        let (name, body) = op.kernel();
        if let UnaryOp::Clamp(lo, hi) = op
            && (lo.is_nan() || hi.is_nan() || lo > hi)
        {
            return Err(GpuError::Shape {
                op: "clamp",
                reason: format!("bounds must be ordered and not NaN, got {lo}, {hi}"),
            });
        }
        self.map(
            &kernels::elementwise(name, body),
            [x, x, x],
            op.params(),
            out,
        )
    }

    /// `op(a, b)` elementwise into a new buffer (equal lengths).
    pub fn binary(&mut self, op: BinaryOp, a: &GpuBuffer, b: &GpuBuffer) -> Result<GpuBuffer> {
        let out = self.alloc("binary", a.len)?;
        self.binary_into(op, a, b, &out)?;
        Ok(out)
    }

    /// `op(a, b)` elementwise into `out` (equal lengths, not an input).
    pub fn binary_into(
        &mut self,
        op: BinaryOp,
        a: &GpuBuffer,
        b: &GpuBuffer,
        out: &GpuBuffer,
    ) -> Result<()> {
        let (name, body) = op.kernel();
        check_len(name, "b", a.len, b.len)?;
        self.map(
            &kernels::elementwise(name, body),
            [a, b, a],
            op.params(),
            out,
        )
    }

    /// `a * b + c` elementwise, fused (equal lengths).
    pub fn fma(&mut self, a: &GpuBuffer, b: &GpuBuffer, c: &GpuBuffer) -> Result<GpuBuffer> {
        check_len("fma", "b", a.len, b.len)?;
        check_len("fma", "c", a.len, c.len)?;
        let out = self.alloc("fma", a.len)?;
        let k = kernels::elementwise("fma", "return fma(x, b[i], c[i]);");
        self.map(&k, [a, b, c], [0.0; 2], &out)?;
        Ok(out)
    }

    /// One elementwise dispatch over `abc[0]`'s length into `out`; `aux` reads `a`.
    fn map(
        &mut self,
        k: &kernels::Kernel,
        abc: [&GpuBuffer; 3],
        p: [f32; 2],
        out: &GpuBuffer,
    ) -> Result<()> {
        let a = abc[0];
        check_count("elementwise", a.len)?;
        check_out("elementwise", out, a.len, &abc)?;
        if a.len > 0 {
            let params = self.params(words(a.len, p, 0));
            let binds = [&a.buf, &abc[1].buf, &abc[2].buf, &out.buf, &params, &a.buf];
            let g = a.len.div_ceil(WG).min(MAX_GROUPS as usize) as u32;
            self.dispatch(k, &binds, (g, 1))?;
        }
        Ok(())
    }

    /// Two passes of `r` into a one-element buffer: partials per workgroup, then one
    /// workgroup folds them and applies `r.finish`. `b` and `aux` are the kernel's second
    /// operand and its device-side scalar (pass `a` where unused).
    fn fold(
        &mut self,
        r: &Reduction,
        a: &GpuBuffer,
        b: &GpuBuffer,
        aux: &GpuBuffer,
    ) -> Result<GpuBuffer> {
        check_count("reduce", a.len)?;
        let groups = a.len.div_ceil(WG * 4).clamp(1, MAX_PARTIALS);
        let partial = self.alloc("reduce", groups)?;
        let out = self.alloc("reduce", 1)?;
        let p1 = self.params(words(a.len, [a.len as f32, 0.0], 0));
        let k1 = kernels::reduce(r.name, r.elem, r.fold, "return v;");
        self.dispatch(
            &k1,
            &[&a.buf, &b.buf, &aux.buf, &partial.buf, &p1],
            (groups as u32, 1),
        )?;
        let p2 = self.params(words(groups, [a.len as f32, 0.0], 0));
        let k2 = kernels::reduce("fold", "return x;", r.fold, r.finish);
        self.dispatch(
            &k2,
            &[&partial.buf, &partial.buf, &aux.buf, &out.buf, &p2],
            (1, 1),
        )?;
        Ok(out)
    }

    /// A reduction of `x` into a one-element buffer.
    pub fn reduce(&mut self, op: ReduceOp, x: &GpuBuffer) -> Result<GpuBuffer> {
        if x.len == 0 && op.needs_input() {
            return Err(empty("reduce"));
        }
        match op {
            ReduceOp::Sum => self.fold(&SUM, x, x, x),
            ReduceOp::Mean => self.fold(&MEAN, x, x, x),
            ReduceOp::Max => self.fold(&MAX, x, x, x),
            ReduceOp::Min => self.fold(&MIN, x, x, x),
            ReduceOp::NormL1 => self.fold(&SUM_ABS, x, x, x),
            // Empty: 0 (the max fold's identity is -inf).
            ReduceOp::NormLinf | ReduceOp::NormL2 if x.len == 0 => self.upload(&[0.0]),
            ReduceOp::NormLinf => self.fold(&MAX_ABS, x, x, x),
            ReduceOp::NormL2 => {
                let big = self.fold(&MAX_ABS, x, x, x)?;
                self.fold(&SCALED_NORM, x, x, &big)
            }
            ReduceOp::Variance | ReduceOp::Stddev => {
                let mean = self.fold(&MEAN, x, x, x)?;
                let r = if op == ReduceOp::Variance {
                    &VARIANCE
                } else {
                    &STDDEV
                };
                self.fold(r, x, x, &mean)
            }
        }
    }

    /// A reduction of two equal-length vectors into a one-element buffer.
    pub fn reduce2(&mut self, op: Reduce2Op, a: &GpuBuffer, b: &GpuBuffer) -> Result<GpuBuffer> {
        check_len("reduce2", "b", a.len, b.len)?;
        match op {
            Reduce2Op::Dot => self.fold(&DOT, a, b, a),
            Reduce2Op::Euclidean => self.fold(&SQ_DIST, a, b, a),
            Reduce2Op::Manhattan => self.fold(&ABS_DIST, a, b, a),
            Reduce2Op::Cosine => {
                if a.len == 0 {
                    return Err(empty("cosine"));
                }
                let d = self.fold(&DOT, a, b, a)?;
                let na = self.reduce(ReduceOp::NormL2, a)?;
                let nb = self.reduce(ReduceOp::NormL2, b)?;
                let k = kernels::elementwise(
                    "cosine",
                    "let d = b[0] * c[0];\n    return select(clamp(x / d, -1.0, 1.0), 0.0, d == 0.0);",
                );
                let out = self.alloc("cosine", 1)?;
                self.map(&k, [&d, &na, &nb], [0.0; 2], &out)?;
                Ok(out)
            }
        }
    }

    /// Index of the first largest (`max`) or smallest element, or of the first NaN, as a
    /// one-element u32 buffer (read it with [`crate::Outputs::u32`]).
    pub fn arg_extreme(&mut self, x: &GpuBuffer, max: bool) -> Result<GpuBuffer> {
        if x.len == 0 {
            return Err(empty(if max { "argmax" } else { "argmin" }));
        }
        check_count("argmax", x.len)?;
        let groups = x.len.div_ceil(WG * 4).clamp(1, MAX_PARTIALS);
        let (pv, pi) = (self.alloc("argmax", groups)?, self.alloc("argmax", groups)?);
        let (ov, oi) = (self.alloc("argmax", 1)?, self.alloc("argmax", 1)?);
        let k = kernels::argreduce();
        let p1 = self.params([x.len as u32, max as u32, 1, 0]);
        self.dispatch(
            &k,
            &[&x.buf, &x.buf, &pv.buf, &pi.buf, &p1],
            (groups as u32, 1),
        )?;
        let p2 = self.params([groups as u32, max as u32, 0, 0]);
        self.dispatch(&k, &[&pv.buf, &pi.buf, &ov.buf, &oi.buf, &p2], (1, 1))?;
        Ok(oi)
    }

    /// A whole-vector map (softmax, log-softmax, normalize) into a new buffer.
    pub fn vector_op(&mut self, op: VectorOp, x: &GpuBuffer) -> Result<GpuBuffer> {
        match op {
            VectorOp::Softmax | VectorOp::LogSoftmax => {
                if x.len == 0 {
                    return Err(empty("softmax"));
                }
                let m = self.fold(&MAX, x, x, x)?;
                let s = self.fold(&SUM_EXP_SHIFTED, x, x, &m)?;
                let k = if op == VectorOp::Softmax {
                    kernels::elementwise("softmax", "return t_exp(x - b[0]) / c[0];")
                } else {
                    kernels::elementwise("log_softmax", "return (x - b[0]) - t_ln(c[0]);")
                };
                let out = self.alloc("softmax", x.len)?;
                self.map(&k, [x, &m, &s], [0.0; 2], &out)?;
                Ok(out)
            }
            VectorOp::Normalize => {
                let nrm = self.reduce(ReduceOp::NormL2, x)?;
                let k = kernels::elementwise(
                    "normalize",
                    "let r = b[0];\n    return select(x / r, x, r == 0.0);",
                );
                let out = self.alloc("normalize", x.len)?;
                self.map(&k, [x, &nrm, &nrm], [0.0; 2], &out)?;
                Ok(out)
            }
        }
    }

    /// `C = A B` for row-major `A` (m x k) and `B` (k x n), into a new m x n buffer.
    pub fn matmul(
        &mut self,
        a: &GpuBuffer,
        b: &GpuBuffer,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<GpuBuffer> {
        shape("matmul", "A", a, m, k)?;
        shape("matmul", "B", b, k, n)?;
        let c = self.alloc("matmul", m.saturating_mul(n))?;
        self.matmul_into(a, b, &c, m, n, k)?;
        Ok(c)
    }

    /// `C = A B` into `c` (m x n, not an input).
    pub fn matmul_into(
        &mut self,
        a: &GpuBuffer,
        b: &GpuBuffer,
        c: &GpuBuffer,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<()> {
        shape("matmul", "A", a, m, k)?;
        shape("matmul", "B", b, k, n)?;
        shape("matmul", "C", c, m, n)?;
        check_out("matmul", c, m * n, &[a, b])?;
        // The kernel runs without loop counters (kernels::matmul): its k loop must not wrap.
        if k >= 1 << 31 {
            return Err(GpuError::Shape {
                op: "matmul",
                reason: format!("k = {k} is beyond the kernel's 2^31"),
            });
        }
        if m * n == 0 {
            return Ok(());
        }
        let (gx, gy) = (n.div_ceil(128), m.div_ceil(128));
        if gx > MAX_GROUPS as usize || gy > MAX_GROUPS as usize {
            return Err(GpuError::Shape {
                op: "matmul",
                reason: format!("{m} x {n} needs more than {MAX_GROUPS} 128-wide tiles per side"),
            });
        }
        // K = 0: the k loop never runs and C is all zeros, as the product of empty sums.
        let d = self.params([m as u32, n as u32, k as u32, 0]);
        let binds = [&a.buf, &b.buf, &c.buf, &d];
        self.dispatch(&kernels::matmul(), &binds, (gx as u32, gy as u32))
    }

    /// `y = A x` for row-major `A` (m x k): a new m-element buffer.
    pub fn gemv(&mut self, a: &GpuBuffer, x: &GpuBuffer, m: usize, k: usize) -> Result<GpuBuffer> {
        shape("gemv", "A", a, m, k)?;
        check_len("gemv", "x", k, x.len)?;
        self.rows(RowKernel::Gemv, a, x, x, m, k, 0.0, m)
    }

    /// `y = xᵀ A` for row-major `A` (m x n): a new n-element buffer.
    pub fn gemv_t(
        &mut self,
        a: &GpuBuffer,
        x: &GpuBuffer,
        m: usize,
        n: usize,
    ) -> Result<GpuBuffer> {
        shape("gemv_t", "A", a, m, n)?;
        check_len("gemv_t", "x", m, x.len)?;
        let y = self.alloc("gemv_t", n)?;
        if n > 0 {
            let p = self.params([m as u32, n as u32, 0, 0]);
            let g = n.div_ceil(WG).min(MAX_GROUPS as usize) as u32;
            self.dispatch(
                &kernels::gemv_cols(),
                &[&a.buf, &x.buf, &x.buf, &y.buf, &p],
                (g, 1),
            )?;
        }
        Ok(y)
    }

    /// RMSNorm of each row of `x` (rows x cols): `x / sqrt(mean(x^2) + eps) * w`.
    pub fn rmsnorm(
        &mut self,
        x: &GpuBuffer,
        w: &GpuBuffer,
        rows: usize,
        cols: usize,
        eps: f32,
    ) -> Result<GpuBuffer> {
        shape("rmsnorm", "x", x, rows, cols)?;
        check_len("rmsnorm", "weight", cols, w.len)?;
        self.rows(RowKernel::RmsNorm, x, w, w, rows, cols, eps, rows * cols)
    }

    /// LayerNorm of each row: `(x - mean) / sqrt(var + eps) * w + bias`.
    #[allow(clippy::too_many_arguments)]
    pub fn layernorm(
        &mut self,
        x: &GpuBuffer,
        w: &GpuBuffer,
        bias: &GpuBuffer,
        rows: usize,
        cols: usize,
        eps: f32,
    ) -> Result<GpuBuffer> {
        shape("layernorm", "x", x, rows, cols)?;
        check_len("layernorm", "weight", cols, w.len)?;
        check_len("layernorm", "bias", cols, bias.len)?;
        self.rows(
            RowKernel::LayerNorm,
            x,
            w,
            bias,
            rows,
            cols,
            eps,
            rows * cols,
        )
    }

    /// One workgroup per row of a rows x cols operand; `out_len` elements out.
    #[allow(clippy::too_many_arguments)]
    fn rows(
        &mut self,
        kind: RowKernel,
        x: &GpuBuffer,
        w: &GpuBuffer,
        bias: &GpuBuffer,
        rows: usize,
        cols: usize,
        eps: f32,
        out_len: usize,
    ) -> Result<GpuBuffer> {
        if !eps.is_finite() || eps < 0.0 {
            return Err(GpuError::Shape {
                op: "norm",
                reason: format!("eps must be finite and >= 0, got {eps}"),
            });
        }
        let y = self.alloc("rows", out_len)?;
        if rows == 0 {
            return Ok(y);
        }
        let p = self.params([rows as u32, cols as u32, eps.to_bits(), 0]);
        self.dispatch(
            &kernels::rows(kind),
            &[&x.buf, &w.buf, &bias.buf, &y.buf, &p],
            groups_for(rows, 1),
        )?;
        Ok(y)
    }
}

/// `buf` must hold a rows x cols matrix, and its element count must fit a u32 index.
fn shape(op: &'static str, what: &str, buf: &GpuBuffer, rows: usize, cols: usize) -> Result<()> {
    let want = rows.checked_mul(cols).ok_or_else(|| GpuError::Shape {
        op,
        reason: format!("{what} is {rows} x {cols}, which overflows"),
    })?;
    check_len(op, what, want, buf.len)?;
    check_count(op, want)
}

/// An output buffer must have `len` elements and be none of the inputs (a buffer cannot be
/// read and written by one dispatch).
fn check_out(op: &'static str, out: &GpuBuffer, len: usize, inputs: &[&GpuBuffer]) -> Result<()> {
    check_len(op, "out", len, out.len)?;
    if inputs.iter().any(|i| i.buf == out.buf) {
        return Err(GpuError::Shape {
            op,
            reason: "the output buffer is also an input (write to another buffer)".into(),
        });
    }
    Ok(())
}
