//! LayerNorm, RMSNorm and the fused residual-add + RMSNorm of pre-norm transformer blocks,
//! one block per row of a row-major f32 matrix. LayerNorm takes two passes for the
//! statistics (mean, then the mean of squared deviations: no cancellation), then writes.

use super::helpers::{self, block_reduce, col_loop, load_cols, row_ptr, store_cols};
use super::{Family, Kernel, LaunchConfig, blocks_for, check_rows};
use crate::error::Result;
use crate::ptx::{F32, KernelBuilder, KernelIr, PtxType, Reg, U32, U64};

/// Threads per block for rows shorter than [`WIDE_ROW`].
pub const THREADS: u32 = 256;
/// Threads per block for long rows.
pub const WIDE_THREADS: u32 = 1024;
/// Rows at least this long use [`WIDE_THREADS`].
pub const WIDE_ROW: usize = 8192;

/// The normalisations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NormOp {
    /// (x - mean) / sqrt(var + eps) * gamma + beta
    LayerNorm,
    /// x / sqrt(mean(x^2) + eps) * gamma
    RmsNorm,
    /// h = x + residual (written out), then rmsnorm(h) * gamma
    AddRmsNorm,
}

impl NormOp {
    /// Every normalisation.
    pub const ALL: [NormOp; 3] = [NormOp::LayerNorm, NormOp::RmsNorm, NormOp::AddRmsNorm];

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            NormOp::LayerNorm => "layernorm",
            NormOp::RmsNorm => "rmsnorm",
            NormOp::AddRmsNorm => "add_rmsnorm",
        }
    }
}

/// CPU reference for LayerNorm, in f64.
pub fn reference_layernorm(x: &[f32], gamma: &[f32], beta: &[f32], eps: f32) -> Vec<f32> {
    let cols = gamma.len();
    x.chunks(cols)
        .flat_map(|r| {
            let mean = r.iter().map(|&v| v as f64).sum::<f64>() / cols as f64;
            let var = r.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / cols as f64;
            let rstd = 1.0 / (var + eps as f64).sqrt();
            r.iter()
                .zip(gamma.iter().zip(beta))
                .map(move |(&v, (&g, &b))| ((v as f64 - mean) * rstd * g as f64 + b as f64) as f32)
        })
        .collect()
}

/// CPU reference for RMSNorm, in f64.
pub fn reference_rmsnorm(x: &[f32], gamma: &[f32], eps: f32) -> Vec<f32> {
    let cols = gamma.len();
    x.chunks(cols)
        .flat_map(|r| {
            let ms = r.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / cols as f64;
            let rstd = 1.0 / (ms + eps as f64).sqrt();
            r.iter()
                .zip(gamma)
                .map(move |(&v, &g)| (v as f64 * rstd * g as f64) as f32)
        })
        .collect()
}

/// A normalisation kernel. Parameters: LayerNorm `x, gamma, beta, out, rows, cols, eps`;
/// RMSNorm `x, gamma, out, rows, cols, eps`; AddRmsNorm `x, residual, gamma, out, h_out,
/// rows, cols, eps`. `vec4` needs `cols % 4 == 0`.
#[derive(Clone, Copy, Debug)]
pub struct NormKernel {
    /// Which normalisation.
    pub op: NormOp,
    /// 16-byte accesses.
    pub vec4: bool,
}

struct Params {
    x: Reg<U64>,
    residual: Option<Reg<U64>>,
    gamma: Reg<U64>,
    beta: Option<Reg<U64>>,
    out: Reg<U64>,
    h_out: Option<Reg<U64>>,
    cols: Reg<U32>,
    eps: Reg<F32>,
}

fn params(b: &mut KernelBuilder, op: NormOp) -> Params {
    let x = b.param_ptr("x", PtxType::F32);
    let residual = (op == NormOp::AddRmsNorm).then(|| b.param_ptr("residual", PtxType::F32));
    let gamma = b.param_ptr("gamma", PtxType::F32);
    let beta = (op == NormOp::LayerNorm).then(|| b.param_ptr("beta", PtxType::F32));
    let out = b.param_ptr("out", PtxType::F32);
    let h_out = (op == NormOp::AddRmsNorm).then(|| b.param_ptr("h_out", PtxType::F32));
    let _rows = b.param_u32("rows");
    let cols = b.param_u32("cols");
    let eps = b.param_f32("eps");
    Params {
        x,
        residual,
        gamma,
        beta,
        out,
        h_out,
        cols,
        eps,
    }
}

impl Kernel for NormKernel {
    fn name(&self) -> String {
        format!(
            "trueno_{}{}_f32",
            self.op.name(),
            if self.vec4 { "_v4" } else { "" }
        )
    }
    fn family(&self) -> Family {
        Family::Norm
    }
    fn build(&self) -> KernelIr {
        let op = self.op;
        let w = if self.vec4 { 4 } else { 1 };
        let mut b = KernelBuilder::new(self.name());
        b.overlap_neighbours();
        b.max_threads(WIDE_THREADS);
        let p = params(&mut b, op);
        let smem = b.shared_array("red", 33 * 4, 16);
        let row = b.ctaid_x();
        let tid = b.tid_x();
        let nt = b.ntid_x();
        let xr = row_ptr(&mut b, p.x, row, p.cols);
        // The row being normalised: x, or x + residual (stored to h_out, then re-read).
        let src = match (p.residual, p.h_out) {
            (Some(res), Some(h)) => {
                let rr = row_ptr(&mut b, res, row, p.cols);
                let hr = row_ptr(&mut b, h, row, p.cols);
                col_loop(&mut b, p.cols, tid, nt, w, |b, c| {
                    let a = load_cols(b, xr, c, w);
                    let r = load_cols(b, rr, c, w);
                    let s: Vec<Reg<F32>> = a.iter().zip(&r).map(|(&a, &r)| b.add(a, r)).collect();
                    store_cols(b, hr, c, &s);
                });
                hr
            }
            _ => xr,
        };
        let ncols = b.cvt::<F32, U32>(p.cols, Some(crate::ptx::Rounding::Rn));
        let inv_n = b.div(1.0f32, ncols);
        let mean = if op == NormOp::LayerNorm {
            let acc = b.mov(0.0f32);
            col_loop(&mut b, p.cols, tid, nt, w, |b, c| {
                for v in load_cols(b, src, c, w) {
                    let s = b.add(acc, v);
                    b.assign(acc, s);
                }
            });
            let total = block_reduce(&mut b, acc, helpers::add, 0.0, smem);
            Some(b.mul(total, inv_n))
        } else {
            None
        };
        let acc = b.mov(0.0f32);
        col_loop(&mut b, p.cols, tid, nt, w, |b, c| {
            for v in load_cols(b, src, c, w) {
                let d = match mean {
                    Some(m) => b.sub(v, m),
                    None => v,
                };
                let s = b.fma(d, d, acc);
                b.assign(acc, s);
            }
        });
        let total = block_reduce(&mut b, acc, helpers::add, 0.0, smem);
        let var = b.mul(total, inv_n);
        let ve = b.add(var, p.eps);
        let rstd = b.rsqrt(ve);
        let or = row_ptr(&mut b, p.out, row, p.cols);
        col_loop(&mut b, p.cols, tid, nt, w, |b, c| {
            let v = load_cols(b, src, c, w);
            let g = load_cols(b, p.gamma, c, w);
            let bt = p.beta.map(|bp| load_cols(b, bp, c, w));
            let r: Vec<Reg<F32>> = (0..v.len())
                .map(|k| {
                    let d = match mean {
                        Some(m) => b.sub(v[k], m),
                        None => v[k],
                    };
                    let n = b.mul(d, rstd);
                    match &bt {
                        Some(bt) => b.fma(n, g[k], bt[k]),
                        None => b.mul(n, g[k]),
                    }
                })
                .collect();
            store_cols(b, or, c, &r);
        });
        b.ret();
        b.finish()
    }
    /// `[rows, cols]`.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        let name = self.name();
        check_rows(&name, dims, self.vec4)?;
        let threads = if dims[1] >= WIDE_ROW {
            WIDE_THREADS
        } else {
            THREADS
        };
        Ok(LaunchConfig::linear(
            blocks_for(&name, dims[0], 1, i32::MAX as u32)?,
            threads,
        ))
    }
}

impl NormKernel {
    /// The configuration for a row length.
    pub fn for_cols(op: NormOp, cols: usize) -> Self {
        NormKernel {
            op,
            vec4: cols.is_multiple_of(4),
        }
    }
}

/// Every normalisation configuration.
pub fn all() -> Vec<Box<dyn Kernel>> {
    let mut v: Vec<Box<dyn Kernel>> = Vec::new();
    for op in NormOp::ALL {
        for vec4 in [false, true] {
            v.push(Box::new(NormKernel { op, vec4 }));
        }
    }
    v
}
