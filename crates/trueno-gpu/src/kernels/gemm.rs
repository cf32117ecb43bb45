//! FP32 GEMM, C = A B for row-major A (m x k), B (k x n), C (m x n), any m, n, k.
//! `naive`: one thread per output, the reference on the device. `tiled`: 128x128 block
//! tiles with a k-step of 8 through shared memory (A stored transposed and padded against
//! bank conflicts), an 8x8 register tile per thread in two 4-wide halves so the shared
//! loads are 16 bytes and conflict-free, and the next k-tile fetched into registers while
//! the current one is multiplied.

use super::helpers::elem_addr;
use super::{Family, Kernel, LaunchConfig, blocks_for};
use crate::error::{Result, shape_err};
use crate::ptx::{Cmp, F32, KernelBuilder, KernelIr, Pred, PtxType, Reg, Space, U32, U64};

/// Block tile rows and columns of the tiled kernel.
pub const TILE: u32 = 128;
/// K-step of the tiled kernel.
pub const TILE_K: u32 = 8;
/// Threads per block (both kernels).
pub const THREADS: u32 = 256;
/// Padded row of the transposed A tile in shared memory (floats).
const A_STRIDE: u32 = TILE + 4;

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
    /// Shared-memory tiles with register blocking.
    Tiled,
}

/// A GEMM kernel: parameters `a`, `b`, `c`, `m`, `n`, `k`.
#[derive(Clone, Copy, Debug)]
pub struct GemmKernel(pub GemmVariant);

struct Args {
    a: Reg<U64>,
    b: Reg<U64>,
    c: Reg<U64>,
    m: Reg<U32>,
    n: Reg<U32>,
    k: Reg<U32>,
}

fn args(b: &mut KernelBuilder) -> Args {
    Args {
        a: b.param_ptr("a", PtxType::F32),
        b: b.param_ptr("b", PtxType::F32),
        c: b.param_ptr("c", PtxType::F32),
        m: b.param_u32("m"),
        n: b.param_u32("n"),
        k: b.param_u32("k"),
    }
}

/// `v = p ? [addr] : 0.0`
fn load_or_zero(b: &mut KernelBuilder, p: Reg<Pred>, addr: Reg<U64>) -> Reg<F32> {
    let v = b.mov(0.0f32);
    b.predicated(p, |b| {
        let l = b.ld::<F32, U64>(Space::Global, addr, 0);
        b.assign(v, l);
    });
    v
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

fn build_tiled(name: &str) -> KernelIr {
    let mut b = KernelBuilder::new(name);
    b.max_threads(THREADS);
    let g = args(&mut b);
    let smem_a = b.shared_array("tile_a", TILE_K * A_STRIDE * 4, 16);
    let smem_b = b.shared_array("tile_b", TILE_K * TILE * 4, 16);
    let t = b.tid_x();
    let tx = b.and(t, 15u32);
    let ty = b.shr(t, 4u32);
    let (cx, cy) = (b.ctaid_x(), b.ctaid_y());
    let row0 = b.mul(cy, TILE);
    let col0 = b.mul(cx, TILE);

    // Global -> shared mapping. A: 4 loads per thread, rows t/8 + 32j, k-offset t%8.
    let a_k = b.and(t, 7u32);
    let a_r = b.shr(t, 3u32);
    let a_row = b.add(row0, a_r);
    let a_row_ok: [Reg<Pred>; 4] = std::array::from_fn(|j| {
        let r = b.add(a_row, 32 * j as u32);
        b.setp::<U32>(Cmp::Lt, r, g.m)
    });
    let a_idx = b.mad(a_row, g.k, a_k);
    let a_ptr = elem_addr(&mut b, g.a, a_idx, 4);
    let a_jstep = b.mul_wide(g.k, 32 * 4);
    // B: 4 loads per thread, k-rows t/128 + 2j, column t%128.
    let b_c = b.and(t, 127u32);
    let b_k = b.shr(t, 7u32);
    let b_col = b.add(col0, b_c);
    let b_col_ok = b.setp::<U32>(Cmp::Lt, b_col, g.n);
    let b_idx = b.mad(b_k, g.n, b_col);
    let b_ptr = elem_addr(&mut b, g.b, b_idx, 4);
    let b_jstep = b.mul_wide(g.n, 2 * 4);
    let b_tile_step = b.mul_wide(g.n, TILE_K * 4);
    // Shared store addresses.
    let sa_idx = b.mad(a_k, A_STRIDE, a_r);
    let sa_st = b.mad(sa_idx, 4u32, smem_a);
    let sb_idx = b.mad(b_k, TILE, b_c);
    let sb_st = b.mad(sb_idx, 4u32, smem_b);
    // Shared read bases for the register tile.
    let sa_rd = b.mad(ty, 16u32, smem_a);
    let sb_rd = b.mad(tx, 16u32, smem_b);

    let a_offs: [Reg<U64>; 4] = std::array::from_fn(|j| b.mul(a_jstep, j as u64));
    let b_offs: [Reg<U64>; 4] = std::array::from_fn(|j| b.mul(b_jstep, j as u64));
    let staged: [Reg<F32>; 8] = std::array::from_fn(|_| b.mov(0.0f32));
    let fetch = |b: &mut KernelBuilder, k0: Reg<U32>, a_tile: Reg<U64>, b_tile: Reg<U64>| {
        let ak = b.add(k0, a_k);
        let ak_ok = b.setp::<U32>(Cmp::Lt, ak, g.k);
        for j in 0..4 {
            let p = b.and_pred(a_row_ok[j], ak_ok);
            let addr = b.add(a_tile, a_offs[j]);
            let v = load_or_zero(b, p, addr);
            b.assign(staged[j], v);
        }
        for j in 0..4 {
            let bk = b.add(k0, b_k);
            let bk = b.add(bk, 2 * j as u32);
            let k_ok = b.setp::<U32>(Cmp::Lt, bk, g.k);
            let p = b.and_pred(b_col_ok, k_ok);
            let addr = b.add(b_tile, b_offs[j]);
            let v = load_or_zero(b, p, addr);
            b.assign(staged[4 + j], v);
        }
    };
    let stage = |b: &mut KernelBuilder| {
        for j in 0..4 {
            b.st::<F32, U32>(Space::Shared, sa_st, (j * 32 * 4) as i64, staged[j]);
            b.st::<F32, U32>(
                Space::Shared,
                sb_st,
                (j as u32 * 2 * TILE * 4) as i64,
                staged[4 + j],
            );
        }
    };
    let zero = b.mov(0u32);
    fetch(&mut b, zero, a_ptr, b_ptr);
    stage(&mut b);
    b.bar_sync();

    let acc: [[Reg<F32>; 8]; 8] = std::array::from_fn(|_| std::array::from_fn(|_| b.mov(0.0f32)));
    let k_tiles = b.add(g.k, TILE_K - 1);
    let k_tiles = b.shr(k_tiles, 3u32);
    let a_tile = b.mov(a_ptr);
    let b_tile = b.mov(b_ptr);
    // Every thread runs the same number of k-tiles: the loop is block-uniform.
    b.for_loop(0u32, k_tiles, 1u32, true, |b, kt| {
        let next_a = b.add(a_tile, (TILE_K * 4) as u64);
        let next_b = b.add(b_tile, b_tile_step);
        b.assign(a_tile, next_a);
        b.assign(b_tile, next_b);
        let kt1 = b.add(kt, 1u32);
        let k0 = b.shl(kt1, 3u32);
        fetch(b, k0, a_tile, b_tile);
        for kk in 0..TILE_K as i64 {
            let a_off = kk * (A_STRIDE as i64) * 4;
            let b_off = kk * (TILE as i64) * 4;
            let a_lo = b.ld_vec::<F32, U32, 4>(Space::Shared, sa_rd, a_off);
            let a_hi = b.ld_vec::<F32, U32, 4>(Space::Shared, sa_rd, a_off + 64 * 4);
            let b_lo = b.ld_vec::<F32, U32, 4>(Space::Shared, sb_rd, b_off);
            let b_hi = b.ld_vec::<F32, U32, 4>(Space::Shared, sb_rd, b_off + 64 * 4);
            let av: Vec<Reg<F32>> = a_lo.iter().chain(&a_hi).copied().collect();
            let bv: Vec<Reg<F32>> = b_lo.iter().chain(&b_hi).copied().collect();
            for i in 0..8 {
                for j in 0..8 {
                    let r = b.fma(av[i], bv[j], acc[i][j]);
                    b.assign(acc[i][j], r);
                }
            }
        }
        b.bar_sync();
        stage(b);
        b.bar_sync();
    });

    // Epilogue: rows ty*4 + i and 64 + ty*4 + i, columns likewise with tx.
    let r_base = b.mad(cy, TILE, 0u32);
    let r_base = b.mad(ty, 4u32, r_base);
    let c_base = b.mad(cx, TILE, 0u32);
    let c_base = b.mad(tx, 4u32, c_base);
    let half = |i: usize| (i / 4) as u32 * 64 + (i % 4) as u32;
    let cols: Vec<(Reg<U32>, Reg<Pred>)> = (0..8)
        .map(|j| {
            let c = b.add(c_base, half(j));
            let ok = b.setp::<U32>(Cmp::Lt, c, g.n);
            (c, ok)
        })
        .collect();
    for (i, acc_row) in acc.iter().enumerate() {
        let r = b.add(r_base, half(i));
        let r_ok = b.setp::<U32>(Cmp::Lt, r, g.m);
        let row_start = b.mul(r, g.n);
        for (j, &(c, c_ok)) in cols.iter().enumerate() {
            let ok = b.and_pred(r_ok, c_ok);
            let idx = b.add(row_start, c);
            let addr = elem_addr(&mut b, g.c, idx, 4);
            b.predicated(ok, |b| b.st::<F32, U64>(Space::Global, addr, 0, acc_row[j]));
        }
    }
    b.ret();
    b.finish()
}

impl Kernel for GemmKernel {
    fn name(&self) -> String {
        match self.0 {
            GemmVariant::Naive => "trueno_gemm_naive_f32".into(),
            GemmVariant::Tiled => "trueno_gemm_tiled_f32".into(),
        }
    }
    fn family(&self) -> Family {
        Family::Gemm
    }
    fn build(&self) -> KernelIr {
        match self.0 {
            GemmVariant::Naive => build_naive(&self.name()),
            GemmVariant::Tiled => build_tiled(&self.name()),
        }
    }
    /// `[m, n, k]`.
    fn launch_config(&self, dims: &[usize]) -> Result<LaunchConfig> {
        let name = self.name();
        let [m, n, _] = gemm_dims(&name, dims, 0)?;
        let tile = match self.0 {
            GemmVariant::Naive => 16,
            GemmVariant::Tiled => TILE as usize,
        };
        let gx = blocks_for(&name, n, tile, i32::MAX as u32)?;
        let gy = blocks_for(&name, m, tile, 65535)?;
        Ok(LaunchConfig {
            grid: (gx, gy, 1),
            block: (THREADS, 1, 1),
            shared_bytes: 0,
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
    ]
}
