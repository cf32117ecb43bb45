//! The engine's ops on host slices, run through trueno-wgpu: the core op enums mapped to
//! trueno-wgpu's (the same ops, named as the WGSL kernels are), results copied into the
//! caller's output. Arguments are already checked by the engine.

use std::borrow::Cow;

use trueno_wgpu::{BinaryOp as G2, Gpu, UnaryOp as G1, VectorOp};

use super::device_err;
use crate::backend::OpClass;
use crate::engine::Engine;
use crate::error::Result;
use crate::gemm::api::Transpose;
use crate::matrix::{MatMut, MatRef};
use crate::ops::{BinaryOp, UnaryOp};

pub(crate) use trueno_wgpu::{Reduce2Op, ReduceOp};

fn unary_op(op: UnaryOp) -> G1 {
    use UnaryOp::*;
    match op {
        Abs => G1::Abs,
        Neg => G1::Neg,
        Sqrt => G1::Sqrt,
        Recip => G1::Recip,
        Scale(a) => G1::Scale(a),
        AddScalar(c) => G1::AddScalar(c),
        Clamp(lo, hi) => G1::Clamp(lo, hi),
        Exp => G1::Exp,
        Ln => G1::Ln,
        Relu => G1::Relu,
        LeakyRelu(a) => G1::LeakyRelu(a),
        Elu(a) => G1::Elu(a),
        Sigmoid => G1::Sigmoid,
        Tanh => G1::Tanh,
        GeluTanh => G1::Gelu,
        GeluErf => G1::GeluErf,
        Silu => G1::Silu,
        Softplus => G1::Softplus,
        Hardswish => G1::Hardswish,
        Mish => G1::Mish,
    }
}

fn binary_op(op: BinaryOp) -> G2 {
    match op {
        BinaryOp::Add => G2::Add,
        BinaryOp::Sub => G2::Sub,
        BinaryOp::Mul => G2::Mul,
        BinaryOp::Div => G2::Div,
        BinaryOp::Min => G2::Minimum,
        BinaryOp::Max => G2::Maximum,
        BinaryOp::Axpy(a) => G2::Axpy(a),
        BinaryOp::Lerp(t) => G2::Lerp(t),
    }
}

/// `dst = op(src)`, or `op(dst)` in place.
pub(crate) fn unary(g: &Gpu, op: UnaryOp, dst: &mut [f32], src: Option<&[f32]>) -> Result<()> {
    let y = g
        .unary(unary_op(op), src.unwrap_or(dst))
        .map_err(device_err)?;
    dst.copy_from_slice(&y);
    Ok(())
}

/// `dst = op(a, b)`, with `a` read from `dst` when `None`.
pub(crate) fn binary(
    g: &Gpu,
    op: BinaryOp,
    dst: &mut [f32],
    a: Option<&[f32]>,
    b: &[f32],
) -> Result<()> {
    let y = g
        .binary(binary_op(op), a.unwrap_or(dst), b)
        .map_err(device_err)?;
    dst.copy_from_slice(&y);
    Ok(())
}

/// `dst = a * b + c`, with `c` read from `dst` when `None`.
pub(crate) fn fma(g: &Gpu, dst: &mut [f32], a: &[f32], b: &[f32], c: Option<&[f32]>) -> Result<()> {
    let y = g.fma(a, b, c.unwrap_or(dst)).map_err(device_err)?;
    dst.copy_from_slice(&y);
    Ok(())
}

/// A reduction of `x` to a scalar.
pub(crate) fn reduce(g: &Gpu, op: ReduceOp, x: &[f32]) -> Result<f32> {
    g.reduce(op, x).map_err(device_err)
}

/// A reduction of two equal-length vectors to a scalar.
pub(crate) fn reduce2(g: &Gpu, op: Reduce2Op, a: &[f32], b: &[f32]) -> Result<f32> {
    g.reduce2(op, a, b).map_err(device_err)
}

/// argmax (`is_max`) or argmin of non-empty `x`.
pub(crate) fn arg_extreme(g: &Gpu, x: &[f32], is_max: bool) -> Result<usize> {
    if is_max { g.argmax(x) } else { g.argmin(x) }.map_err(device_err)
}

/// Softmax, log-softmax or normalize of `src` (or of `dst` in place) into `dst`.
pub(crate) fn vector(g: &Gpu, op: VectorOp, dst: &mut [f32], src: Option<&[f32]>) -> Result<()> {
    let y = g.vector_op(op, src.unwrap_or(dst)).map_err(device_err)?;
    dst.copy_from_slice(&y);
    Ok(())
}

/// `op(x)` as a dense row-major buffer: borrowed when `x` already is one, else gathered on
/// the CPU (a transpose is the engine's blocked one: O(rows * cols) against the product's
/// O(m * n * k)).
fn dense<'a>(e: &Engine, x: MatRef<'a>, t: Transpose) -> Result<Cow<'a, [f32]>> {
    let (r, c) = (x.rows(), x.cols());
    Ok(match t {
        Transpose::No if x.stride() == c || r <= 1 => Cow::Borrowed(&x.data[..r * c]),
        Transpose::No => Cow::Owned((0..r).flat_map(|i| x.row(i)).copied().collect()),
        Transpose::Yes => {
            let mut out = vec![0.0; r * c];
            e.transpose(x, &mut MatMut::new(&mut out, c, r, r.max(1))?)?;
            Cow::Owned(out)
        }
    })
}

/// `C = alpha * op(A) op(B) + beta * C` (`m x n`, inner `k`, all non-zero; shapes checked):
/// the product on the GPU (matmul, or GEMV when `m` or `n` is 1), the `alpha`/`beta`
/// update on the CPU as the rows come back. `beta == 0` never reads C (and alpha = 1 is
/// then an exact copy: scaling by 1 is exact).
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm(
    g: &Gpu,
    e: &Engine,
    alpha: f32,
    a: MatRef<'_>,
    ta: Transpose,
    b: MatRef<'_>,
    tb: Transpose,
    beta: f32,
    c: &mut MatMut<'_>,
) -> Result<()> {
    let (m, n) = (c.rows(), c.cols());
    let k = if ta == Transpose::Yes {
        a.rows()
    } else {
        a.cols()
    };
    let (opa, opb) = (dense(e, a, ta)?, dense(e, b, tb)?);
    let p = if n == 1 {
        g.gemv(&opa, &opb, m, k)
    } else if m == 1 {
        g.gemv_t(&opb, &opa, k, n)
    } else {
        g.matmul(&opa, &opb, m, n, k)
    }
    .map_err(device_err)?;
    // alpha / beta with the CPU's elementwise kernels (the engine's own methods would send
    // these rows back to the GPU on a `Backend::Gpu` engine).
    let k = e.k(OpClass::Elementwise);
    for (i, prow) in p.chunks_exact(n).enumerate() {
        let crow = &mut c.row_mut(i)[..n];
        if beta == 0.0 {
            k.unary(UnaryOp::Scale(alpha), crow, Some(prow));
        } else {
            k.unary(UnaryOp::Scale(beta), crow, None);
            k.binary(BinaryOp::Axpy(alpha), crow, None, prow);
        }
    }
    Ok(())
}
