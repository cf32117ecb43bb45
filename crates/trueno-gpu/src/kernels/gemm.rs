//! FP32 GEMM, C = A B for row-major A (m x k), B (k x n), C (m x n), any m, n, k.
//! `naive`: one thread per output, the reference on the device. `tiled`: 128x128 block
//! tiles, an 8x8 register tile per thread, k-tiles brought into shared memory by
//! `cp.async` while earlier ones are multiplied (gemm_simt.rs); `tiled_sliced` 64x128
//! tiles with two sets of 128 threads splitting each k-tile, for products whose 128-row
//! tiles number fewer than the multiprocessors.

use super::gemm_simt::{self, SimtPipeline};
use super::helpers::elem_addr;
use super::{Family, Kernel, LaunchConfig, blocks_for};
use crate::error::{Result, shape_err};
use crate::ptx::{Cmp, F32, KernelBuilder, KernelIr, Pred, PtxType, Reg, Space, U32, U64};

/// Block tile rows and columns of the tiled kernel.
pub const TILE: u32 = 128;
/// Threads per block of the naive and the 128 x 128 tiled kernels.
pub const THREADS: u32 = 256;

/// CPU reference in f64 accumulation.
pub fn reference(a: &[f32], b: &[f32], m: usize, n: usize, k: usize) -> Vec<f32> {
    let mut c = vec![0.0f32; m * n];
    for i in 0..m {
        let mut row = vec![0.0f64; n];
        for p in 0..k {
            let av = a[i * k + p] as f64;
            for (r, &bv) in row.iter_mut().zip(&b[p * n..(p + 1) * n]) {
                *r += av * bv as f64;
            }
        }
        c[i * n..(i + 1) * n]
            .iter_mut()
            .zip(row)
            .for_each(|(c, r)| *c = r as f32);
    }
    c
}

/// The GEMM kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GemmVariant {
    /// One thread per output element.
    Naive,
    /// Shared-memory tiles with register blocking. [`Stream::gemm`] runs
    /// [`TiledSliced`](Self::TiledSliced) instead where this kernel's 128 x 128 tiles
    /// number fewer than the multiprocessors.
    ///
    /// [`Stream::gemm`]: crate::driver::Stream::gemm
    Tiled,
    /// 64 x 128 tiles, each block two sets of 128 threads that take halves of every
    /// k-tile and add their sums at the end: twice the blocks of `Tiled` at the same 8
    /// warps a block, so a small product fills the GPU without cutting k as often.
    TiledSliced,
}

impl GemmVariant {
    /// The pipeline of a tiled variant.
    pub(crate) fn pipeline(self) -> Option<SimtPipeline> {
        match self {
            GemmVariant::Naive => None,
            GemmVariant::Tiled => Some(SimtPipeline::DEFAULT),
            GemmVariant::TiledSliced => Some(SimtPipeline::SLICED),
        }
    }
}

/// A GEMM kernel: parameters `a`, `b`, `c`, `m`, `n`, `k`.
#[derive(Clone, Copy, Debug)]
pub struct GemmKernel(pub GemmVariant);

/// The parameters both FP32 GEMM kernels take.
pub(super) struct Args {
    pub a: Reg<U64>,
    pub b: Reg<U64>,
    pub c: Reg<U64>,
    pub m: Reg<U32>,
    pub n: Reg<U32>,
    pub k: Reg<U32>,
}

/// Declares [`Args`].
pub(super) fn args(b: &mut KernelBuilder) -> Args {
    Args {
        a: b.param_ptr("a", PtxType::F32),
        b: b.param_ptr("b", PtxType::F32),
        c: b.param_ptr("c", PtxType::F32),
        m: b.param_u32("m"),
        n: b.param_u32("n"),
        k: b.param_u32("k"),
    }
}

fn build_naive(name: &str) -> KernelIr {
    let mut b = KernelBuilder::new(name);
    b.max_threads(THREADS);
    let g = args(&mut b);
    let tid = b.tid_x();
    let ty = b.shr(tid, 4u32);
    let tx = b.and(tid, 15u32);
    let (cx, cy) = (b.ctaid_x(), b.ctaid_y());
    let row = b.mad(cy, 16u32, ty);
    let col = b.mad(cx, 16u32, tx);
    let rin = b.setp::<U32>(Cmp::Lt, row, g.m);
    let cin = b.setp::<U32>(Cmp::Lt, col, g.n);
    let inside = b.and_pred(rin, cin);
    b.if_then(inside, false, |b| {
        let acc = b.mov(0.0f32);
        let arow = b.mul(row, g.k);
        b.for_loop(0u32, g.k, 1u32, false, |b, p| {
            let ai = b.add(arow, p);
            let bi = b.mad(p, g.n, col);
            let aa = elem_addr(b, g.a, ai, 4);
            let ba = elem_addr(b, g.b, bi, 4);
            let av = b.ld::<F32, U64>(Space::Global, aa, 0);
            let bv = b.ld::<F32, U64>(Space::Global, ba, 0);
            let r = b.fma(av, bv, acc);
            b.assign(acc, r);
        });
        let ci = b.mad(row, g.n, col);
        let ca = elem_addr(b, g.c, ci, 4);
        b.st::<F32, U64>(Space::Global, ca, 0, acc);
    });
    b.ret();
    b.finish()
}

/// Where a tiled kernel's thread holds its 8 x 8 register tile: block (cx, cy) of
/// `rows` x 128 tiles, thread (tx, ty).
pub(super) struct Tile {
    pub block: (Reg<U32>, Reg<U32>),
    pub thread: (Reg<U32>, Reg<U32>),
    pub rows: u32,
}

/// The epilogue of a block tile: rows `keep` of thread (tx, ty)'s 8x8 register tile
/// (all eight: 0..8) to rows ty*4 + i and rows/2 + ty*4 + i, columns tx*4 + j and 64 +
/// tx*4 + j, inside m x n.
pub(super) fn store_tile(
    b: &mut KernelBuilder,
    g: &Args,
    tile: &Tile,
    acc: &[[Reg<F32>; 8]; 8],
    keep: std::ops::Range<usize>,
) {
    let ((cx, cy), (tx, ty)) = (tile.block, tile.thread);
    let r_base = b.mad(cy, tile.rows, 0u32);
    let r_base = b.mad(ty, 4u32, r_base);
    let c_base = b.mad(cx, TILE, 0u32);
    let c_base = b.mad(tx, 4u32, c_base);
    let half = |i: usize, size: u32| (i / 4) as u32 * size / 2 + (i % 4) as u32;
    let cols: Vec<(Reg<U32>, Reg<Pred>)> = (0..8)
        .map(|j| {
            let c = b.add(c_base, half(j, TILE));
            let ok = b.setp::<U32>(Cmp::Lt, c, g.n);
            (c, ok)
        })
        .collect();
    for (i, acc_row) in acc.iter().enumerate().filter(|(i, _)| keep.contains(i)) {
        let r = b.add(r_base, half(i, tile.rows));
        let r_ok = b.setp::<U32>(Cmp::Lt, r, g.m);
        let row_start = b.mul(r, g.n);
        for (j, &(c, c_ok)) in cols.iter().enumerate() {
            let ok = b.and_pred(r_ok, c_ok);
            let idx = b.add(row_start, c);
            let addr = elem_addr(b, g.c, idx, 4);
            b.predicated(ok, |b| b.st::<F32, U64>(Space::Global, addr, 0, acc_row[j]));
        }
    }
}

impl Kernel for GemmKernel {
    fn name(&self) -> String {
        match self.0 {
            GemmVariant::Naive => "trueno_gemm_naive_f32".into(),
            GemmVariant::Tiled => "trueno_gemm_tiled_f32".into(),
            GemmVariant::TiledSliced => "trueno_gemm_tiled_sliced_f32".into(),
        }
    }
    fn family(&self) -> Family {
        Family::Gemm
    }
    fn build(&self) -> KernelIr {
        match self.0.pipeline() {
            None => build_naive(&self.name()),
            Some(pipe) => gemm_simt::build(&self.name(), pipe),
        }
    }
    /// `[m, n, k]`.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        let name = self.name();
        let [m, n, _] = gemm_dims(&name, dims, 0)?;
        let pipe = self.0.pipeline();
        let (rows, cols) = pipe.map_or((16, 16), |p| (p.tile_m as usize, TILE as usize));
        let gx = blocks_for(&name, n, cols, i32::MAX as u32)?;
        let gy = blocks_for(&name, m, rows, 65535)?;
        Ok(LaunchConfig {
            grid: (gx, gy, 1),
            block: (pipe.map_or(THREADS, SimtPipeline::threads), 1, 1),
            shared_bytes: pipe.map_or(0, SimtPipeline::shared_bytes),
        })
    }
}

/// `[m, n, k]` of a GEMM launch: three non-zero sizes whose index products, with `m`
/// rounded up by `m_pad` rows (a kernel that addresses whole tiles past the end),
/// fit in 32 bits.
pub(super) fn gemm_dims(name: &str, dims: &[usize], m_pad: usize) -> Result<[usize; 3]> {
    let &[m, n, k] = dims else {
        return shape_err(name, format!("expected [m, n, k], got {dims:?}"));
    };
    if m == 0 || n == 0 || k == 0 {
        return shape_err(name, format!("zero-size GEMM {m}x{n}x{k}"));
    }
    let fits = |a: usize, b: usize| a.checked_mul(b).is_some_and(|p| p <= u32::MAX as usize);
    let rows = m.saturating_add(m_pad);
    if !(fits(rows, k) && fits(k, n) && fits(rows, n)) {
        return shape_err(name, format!("{m}x{n}x{k} exceeds 32-bit indexing"));
    }
    Ok([m, n, k])
}

/// Every GEMM configuration.
pub fn all() -> Vec<Box<dyn Kernel>> {
    vec![
        Box::new(GemmKernel(GemmVariant::Naive)),
        Box::new(GemmKernel(GemmVariant::Tiled)),
        Box::new(GemmKernel(GemmVariant::TiledSliced)),
    ]
}
