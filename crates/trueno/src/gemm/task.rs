//! One GEMM problem (or a piece of one) as the ISA kernels receive it: operands as slices
//! with strides and transpose flags, C as a raw pointer so pieces of one C can go to
//! different threads.

use super::blocking::Blocking;

/// Where C lives: the address of C(0, 0) of this task and the row stride; or, when
/// `trans`, the column stride: the task computes Cᵀ into memory laid out as C (see
/// `GemmTask::transposed`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct CPtr {
    pub ptr: *mut f32,
    pub stride: usize,
    pub trans: bool,
}

impl CPtr {
    /// The address of element `(r, c)`.
    #[inline(always)]
    pub fn at(self, r: usize, c: usize) -> CPtr {
        let off = match self.trans {
            true => c * self.stride + r,
            false => r * self.stride + c,
        };
        // SAFETY: callers pass (r, c) inside (or one past) their block of C, so the offset
        // stays within the allocation the pointer came from.
        let ptr = unsafe { self.ptr.add(off) };
        CPtr { ptr, ..self }
    }
}

// SAFETY: tasks made from one C cover disjoint (row, column) blocks of it (see
// `GemmTask::split`), so no two threads touch the same element; the pointer's provenance
// is a `&mut [f32]` that outlives every task.
unsafe impl Send for CPtr {}
// SAFETY: as above.
unsafe impl Sync for CPtr {}

/// `C = alpha * op(A) op(B) + beta * C` for an `m x n` C and inner dimension `k`.
/// `op(A)(i, p)` is `a[i * lda + p]`, or `a[p * lda + i]` when `ta`; likewise for B.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GemmTask<'a> {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// The inner dimension of the whole product this task is a piece of: `split_k`'s
    /// ranges keep it, so each range still sees a B that streams from memory as one.
    pub whole_k: usize,
    pub alpha: f32,
    pub beta: f32,
    pub a: &'a [f32],
    pub lda: usize,
    pub ta: bool,
    pub b: &'a [f32],
    pub ldb: usize,
    pub tb: bool,
    pub c: CPtr,
    /// Block sizes for the kernel that runs it (filled in by the dispatcher).
    pub blocking: Option<Blocking>,
    /// Which loops run it.
    pub path: GemmPath,
    /// Per-level time counters, when profiling.
    pub profile: Option<&'a ProfileCounters>,
}

impl GemmTask<'_> {
    /// Bytes of the whole B this task reads a part of: `whole_k` rows `ldb` floats apart,
    /// or, transposed, its `n` rows (a thread's band of columns is judged by its own).
    #[inline(always)]
    pub fn b_bytes(&self) -> usize {
        let rows = if self.tb { self.n } else { self.whole_k };
        rows.saturating_mul(self.ldb).saturating_mul(4)
    }

    /// Bytes of this task's C (m x n floats, gaps between rows not counted).
    #[inline(always)]
    pub fn c_bytes(&self) -> usize {
        self.m.saturating_mul(self.n).saturating_mul(4)
    }

    /// Bytes of this task's A, B and C together (m x k, k x n and m x n floats, gaps
    /// between rows not counted): what passes through L2 over the task.
    #[inline(always)]
    pub fn operand_bytes(&self) -> usize {
        let (a, b) = (self.m.saturating_mul(self.k), self.k.saturating_mul(self.n));
        a.saturating_add(b)
            .saturating_mul(4)
            .saturating_add(self.c_bytes())
    }
}

#[cfg(test)]
impl<'a> GemmTask<'a> {
    /// The unit tests' task: `C (m x n, rows n apart) = A B` over `k`, A and B row-major
    /// (rows `lda` and `ldb` apart), alpha 1, beta 0, the packed path, no blocking given.
    pub fn for_test(
        (m, n, k): (usize, usize, usize),
        (a, lda): (&'a [f32], usize),
        (b, ldb): (&'a [f32], usize),
        c: *mut f32,
    ) -> GemmTask<'a> {
        GemmTask {
            m,
            n,
            k,
            whole_k: k,
            alpha: 1.0,
            beta: 0.0,
            a,
            lda,
            ta: false,
            b,
            ldb,
            tb: false,
            c: CPtr {
                ptr: c,
                stride: n,
                trans: false,
            },
            blocking: None,
            path: GemmPath::Packed,
            profile: None,
        }
    }
}

impl<'a> GemmTask<'a> {
    /// `op(A)(i, p)`.
    #[inline(always)]
    pub fn a_at(&self, i: usize, p: usize) -> f32 {
        if self.ta {
            self.a[p * self.lda + i]
        } else {
            self.a[i * self.lda + p]
        }
    }

    /// The piece of this task covering rows `r0..r1` and columns `c0..c1` of C.
    pub fn split(&self, r0: usize, r1: usize, c0: usize, c1: usize) -> GemmTask<'a> {
        let a_off = if r0 == r1 || self.k == 0 {
            0
        } else if self.ta {
            r0
        } else {
            r0 * self.lda
        };
        let b_off = if c0 == c1 || self.k == 0 {
            0
        } else if self.tb {
            c0 * self.ldb
        } else {
            c0
        };
        GemmTask {
            m: r1 - r0,
            n: c1 - c0,
            a: &self.a[a_off..],
            b: &self.b[b_off..],
            c: self.c.at(r0, c0),
            ..*self
        }
    }

    /// The same product as `Cᵀ = op(B)ᵀ op(A)ᵀ`: m and n swap, A and B swap with their
    /// transpose flags flipped, and C is written through its transpose. The kernel then
    /// broadcasts from what was B and vectorises over what was A.
    pub fn transposed(&self) -> GemmTask<'a> {
        GemmTask {
            m: self.n,
            n: self.m,
            a: self.b,
            lda: self.ldb,
            ta: !self.tb,
            b: self.a,
            ldb: self.lda,
            tb: !self.ta,
            c: CPtr {
                trans: !self.c.trans,
                ..self.c
            },
            ..*self
        }
    }

    /// The piece of this task over inner indices `p0..p1` (all of C), writing `c` with
    /// `beta`.
    #[cfg_attr(not(feature = "parallel"), allow(dead_code))]
    pub fn split_k(&self, p0: usize, p1: usize, c: CPtr, beta: f32) -> GemmTask<'a> {
        let (a_off, b_off) = match p0 == p1 || self.m == 0 || self.n == 0 {
            true => (0, 0),
            false => (
                if self.ta { p0 * self.lda } else { p0 },
                if self.tb { p0 } else { p0 * self.ldb },
            ),
        };
        GemmTask {
            k: p1 - p0,
            a: &self.a[a_off..],
            b: &self.b[b_off..],
            c,
            beta,
            ..*self
        }
    }
}

/// The packed BLIS loops, the unpacked loops, or whichever suits the size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GemmPath {
    /// Unpacked below `SMALL_MACS` when the layout allows, packed otherwise.
    Auto,
    /// Always packed (tests hold the micro-kernels to every shape).
    Packed,
    /// Unpacked: GEMV shapes, where packing would read A twice.
    Unpacked,
}

/// Nanoseconds spent per level of the packed loops, summed over threads.
#[derive(Debug, Default)]
pub(crate) struct ProfileCounters {
    pub pack_a: std::sync::atomic::AtomicU64,
    pub pack_b: std::sync::atomic::AtomicU64,
    pub kernel: std::sync::atomic::AtomicU64,
}

impl ProfileCounters {
    /// Adds the time since `t0` to `counter`, if profiling.
    #[inline(always)]
    pub fn add(
        p: Option<&ProfileCounters>,
        pick: fn(&ProfileCounters) -> &std::sync::atomic::AtomicU64,
        t0: Option<std::time::Instant>,
    ) {
        if let (Some(p), Some(t0)) = (p, t0) {
            pick(p).fetch_add(
                t0.elapsed().as_nanos() as u64,
                std::sync::atomic::Ordering::Relaxed,
            );
        }
    }
}
