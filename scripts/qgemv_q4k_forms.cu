// Which form of a quantized GEMV keeps an H200's memory busiest? A Q4_K x Q8_K product
// written the way trueno's integer kernel computes it (one warp a row, four super-blocks
// a warp step, lane 8g + p taking quant bytes 16p..16p + 16 of super-block g, `dp4a` on
// nibbles, GGML's 6-bit scales and mins), in the forms that put more weight bytes in
// flight without holding registers for them, against the register form trueno ships:
//   REG     register loads, two steps' loads before their math (trueno's pass);
//   CP2     each lane's weight bytes for the next step copied by `cp.async` into its own
//           slots of a shared ring (a header copied by each of its eight lanes);
//   CPH     the same, a step's bytes copied once each (lane 8g copies header g), STAGES
//           steps in the ring; CPHP over a persistent warp's rows as one stream;
//   BULK    the copy engine (`cp.async.bulk`, one mbarrier a stage) filling a ring of
//           eight rows' next eight super-blocks per stage, persistent blocks; BULKA with
//           the activations copied into shared memory too (the ring leaves L1 little);
//   REG64   four lanes a super-block, 64 weights a lane and step (half the scale decode
//           and float math per weight);
//   ROLL    register loads as a rolling pipeline (step t + D loaded into the registers
//           step t hands to its math); ROLLP over a persistent warp's rows;
//   REGH    REG with cache qualifiers on its weight loads; REGM with fewer registers asked
//           for (6-8 blocks a multiprocessor); `HINTS=1` runs only these;
//   REGU    REG with one, three or four steps' loads before their math (`DEPTH=1`);
//   BAL     a persistent grid whose warps take equal runs of all the rows' steps, parts of
//           rows added into a zeroed `y` (`WAVES=1`, against REG and REG behind the same
//           zeroing, REGZ; give it several row counts to see how time grows by waves).
//   ROLLC   ROLL without its cursors and guards (one row a warp, two steps ahead; `ROLLC=1`);
//   PDL     REG launched to overlap its predecessor (programmatic dependent launch, as
//           trueno launches), the first two steps' weights before `griddepcontrol.wait`;
//           with more of the row asked into L2 before the wait (`PDL=1`).
//   MMA1    one vector on the integer tensor cores, the eight sub-blocks as the `mma`'s N
//           (16 rows a warp, W warps a tile, U super-blocks a pass); MMA2 with both k
//           runs of a step in one sub-block and two accumulators (`MMA=1`, against REG
//           and PDL; the form trueno took as `QgemvQ8kMmaOneKernel`).
//   MMA1S   MMA1 with each warp's step copied into a ring of S slots by `cp.async`
//           (`STAGED=1`); MMA1B whole 16-row tiles copied by the copy engine into a ring
//           of S stages of a persistent grid (`BULK=1`), as Q6_K's MMA6B
//           (qgemv_q4k_staged_forms.cuh; session 62: neither ported).
//   SWEEP   MMA1 at sixteen, fourteen and eight warps a tile, for rows whose super-blocks
//           do or do not split evenly among the warps (`SWEEP=1`, session 63).
//   MMA1H   MMA1 in half super-blocks (half the weights a unit in registers), at 8-32
//           warps a tile and 1-6 blocks a multiprocessor (`HALF=1`, session 63);
//   WAIT    MMA1 around the wait for the previous kernel: serialised, its activations
//           loaded before the wait (a measurement only), nothing before it, the next
//           passes asked into L2 or copied into shared memory, rotated rows (`WAIT=1`).
// 20 calls in a CUDA graph over four weight sets or more (160 MB: each call misses L2), µs a call,
// against cudaMemcpy of 1 GiB in the same process. Not part of trueno (which generates
// its own PTX): a probe, built with the device machine's nvcc. Findings: BENCHMARKS.md,
// "Weight bytes in flight without registers, tried on an H200" (session 38) and the
// sections after it (sessions 39, 40, 54).
//
//   nvcc -O3 -arch=sm_90 -o qgemv_q4k_forms scripts/qgemv_q4k_forms.cu && ./qgemv_q4k_forms [ROWS COLS]...
//
// Prints a JSON line per shape and form (registers, blocks a multiprocessor, µs, GB/s)
// with the largest relative difference from a CPU reference over 128 rows (the first 64, 64 spread).
#include "qgemv_probe_common.cuh"

constexpr int BB = 144;         // Q4_K super-block bytes
constexpr int STEP_BLOCKS = 4;  // super-blocks a warp step

// Byte k (0..11) of the 12 packed scale bytes, held in words s1, s2, s3 (no local array).
__device__ __forceinline__ int sbyte(uint4 h, int k) {
    uint32_t w = k < 4 ? h.y : (k < 8 ? h.z : h.w);
    return (w >> (8 * (k & 3))) & 255;
}

// 6-bit scale and min of sub-block j (GGML's layout).
__device__ __forceinline__ void scale_min(uint4 h, int j, int& sc, int& m) {
    if (j < 4) {
        sc = sbyte(h, j) & 63;
        m = sbyte(h, j + 4) & 63;
    } else {
        sc = (sbyte(h, j + 4) & 0xF) | ((sbyte(h, j - 4) >> 6) << 4);
        m = (sbyte(h, j + 4) >> 4) | ((sbyte(h, j) >> 6) << 4);
    }
}

// Sums of N quant words' low nibbles against `lo_a` and high nibbles against `hi_a`
// (four 8-bit products a `dp4a`): the two sub-blocks' integer dot products.
template <int N>
__device__ __forceinline__ void nibble_dots(const uint32_t (&qw)[N], const uint32_t (&lo_a)[N], const uint32_t (&hi_a)[N], int& lo, int& hi) {
    lo = 0;
    hi = 0;
#pragma unroll
    for (int i = 0; i < N; i++) {
        lo = __dp4a((int)(qw[i] & 0x0F0F0F0F), (int)lo_a[i], lo);
        hi = __dp4a((int)((qw[i] >> 4) & 0x0F0F0F0F), (int)hi_a[i], hi);
    }
}

// `dx * (d * (sc0 lo + sc1 hi) - dmin * (m0 s0 + m1 s1))` for chunk `c` (sub-blocks 2c and
// 2c + 1) of the super-block with header `h`, given its dot products and activation sums.
__device__ __forceinline__ float scaled(uint4 h, int c, int lo, int hi, int s0, int s1, float dx) {
    int sc0, m0, sc1, m1;
    scale_min(h, 2 * c, sc0, m0);
    scale_min(h, 2 * c + 1, sc1, m1);
    float d, dmin;
    asm("cvt.f32.f16 %0, %1;" : "=f"(d) : "h"((unsigned short)(h.x & 0xFFFF)));
    asm("cvt.f32.f16 %0, %1;" : "=f"(dmin) : "h"((unsigned short)(h.x >> 16)));
    float isum = (float)(sc0 * lo + sc1 * hi);
    float msum = (float)(m0 * s0 + m1 * s1);
    return dx * (d * isum - dmin * msum);
}

// The lane's share of super-block `g`: header `h` (16 bytes), its quant bytes `q`.
__device__ __forceinline__ float lane_part(uint4 h, uint4 q, const Act& a, int g, int p) {
    int c = p >> 1, hf = p & 1;
    const int8_t* aq = a.q + (size_t)g * 256 + 64 * c + 16 * hf;
    uint4 a0 = *(const uint4*)aq;
    uint4 a1 = *(const uint4*)(aq + 32);
    const int32_t* sums = a.s16 + (size_t)g * 16 + 4 * c + hf;
    int s0 = sums[0], s1 = sums[2];
    float dx = a.d[g];
    uint32_t qw[4] = {q.x, q.y, q.z, q.w};
    uint32_t x0[4] = {a0.x, a0.y, a0.z, a0.w};
    uint32_t x1[4] = {a1.x, a1.y, a1.z, a1.w};
    int lo, hi;
    nibble_dots(qw, x0, x1, lo, hi);
    return scaled(h, c, lo, hi, s0, s1, dx);
}

// A 16-byte weight load with cache qualifiers: 0 `ld.global.nc` (REG's __ldg), 1 with
// `.L1::no_allocate` (weights are read once: L1 kept for the activations), 2 with
// `.L2::256B` (the L2 asked for 256-byte runs), 3 both, 4 `.L1::no_allocate` with an L2 evict-first policy (`createpolicy`).
template <int HINT>
__device__ __forceinline__ uint4 ldw(const uint8_t* p) {
    uint4 v;
    if (HINT == 0) return __ldg((const uint4*)p);
    if (HINT == 1) asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    if (HINT == 2) asm("ld.global.nc.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    if (HINT == 3) asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    if (HINT == 4) {
        uint64_t pol;
        asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
        asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "l"(pol));
    }
    return v;
}

// REG: two steps' loads, then their math. `blocks` a multiple of 4. With HINT, its weight
// loads through `ldw<HINT>` (REGH); with MINB, at least that many blocks a multiprocessor
// asked of ptxas (REGM). MINB 0 asks nothing: ptxas then gives REG 47 registers, where
// asking for one block gives 51 (four blocks a multiprocessor instead of five).
// The lane's share of steps `s..e` of a row whose super-blocks start at `base` (the
// lane's super-block `g` of step 0): U steps' loads, then their math (REG: two).
template <int HINT, int U = 2>
__device__ __forceinline__ float row_steps(const uint8_t* base, const Act& a, int g, int p, int s, int e) {
    float acc = 0.f;
    // Two steps written out (as the step arrays below, ptxas gave REG 40 registers, not 47).
    for (; U == 2 && s + 2 <= e; s += 2) {
        const uint8_t* b0 = base + (size_t)s * STEP_BLOCKS * BB;
        const uint8_t* b1 = b0 + STEP_BLOCKS * BB;
        uint4 h0 = ldw<HINT>(b0), q0 = ldw<HINT>(b0 + 16 + 16 * p);
        uint4 h1 = ldw<HINT>(b1), q1 = ldw<HINT>(b1 + 16 + 16 * p);
        acc += lane_part(h0, q0, a, g + s * STEP_BLOCKS, p);
        acc += lane_part(h1, q1, a, g + (s + 1) * STEP_BLOCKS, p);
    }
    for (; U != 2 && s + U <= e; s += U) {
        uint4 h[U], q[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const uint8_t* b = base + (size_t)(s + u) * STEP_BLOCKS * BB;
            h[u] = ldw<HINT>(b);
            q[u] = ldw<HINT>(b + 16 + 16 * p);
        }
#pragma unroll
        for (int u = 0; u < U; u++) acc += lane_part(h[u], q[u], a, g + (s + u) * STEP_BLOCKS, p);
    }
    for (; s < e; s++) {
        const uint8_t* b0 = base + (size_t)s * STEP_BLOCKS * BB;
        uint4 h0 = ldw<HINT>(b0), q0 = ldw<HINT>(b0 + 16 + 16 * p);
        acc += lane_part(h0, q0, a, g + s * STEP_BLOCKS, p);
    }
    return acc;
}

// REG: one row a warp, `row_steps` over all of it. `blocks` a multiple of 4. With HINT,
// its weight loads through `ldw<HINT>` (REGH); with MINB, at least that many blocks a
// multiprocessor asked of ptxas (REGM). MINB 0 asks nothing: ptxas then gives REG 47
// registers, where asking for one block gives 51 (four blocks a multiprocessor, not five).
template <int HINT = 0, int MINB = 0, int U = 2>
__global__ void __launch_bounds__(THREADS, MINB) q4k_reg(const uint8_t* __restrict__ w, Act a, float* y, int rows, int blocks) {
    int lane = threadIdx.x & 31;
    int row = (blockIdx.x * THREADS + threadIdx.x) >> 5;
    if (row >= rows) return;
    int g = lane >> 3, p = lane & 7;
    const uint8_t* base = w + (size_t)row * blocks * BB + (size_t)g * BB;
    float acc = row_steps<HINT, U>(base, a, g, p, 0, blocks / STEP_BLOCKS);
    store_row(acc, y, row, lane);
}

// PDL: REG launched to overlap its predecessor (programmatic dependent launch, as
// trueno launches its products): `launch_dependents` first, the first two steps' weights
// before `griddepcontrol.wait` (weights are never written by a kernel; the activations
// may be), the rest after. PF asks L2 for the rest of the row before the wait too:
// 1 `prefetch.global.L2` a 128-byte line (lanes in turn), 2 one bulk prefetch of it all
// (`cp.async.bulk.prefetch.L2`, lane 0), 3 as 1 with `evict_last`; WIN > 0 asks only for
// the WIN steps after the first two. Rows of at least two steps, an even count.
template <int PF, int WIN = 0>
__global__ void __launch_bounds__(THREADS) q4k_pdl(const uint8_t* __restrict__ w, Act a, float* y, int rows, int blocks) {
    asm volatile("griddepcontrol.launch_dependents;");
    int lane = threadIdx.x & 31;
    int row = (blockIdx.x * THREADS + threadIdx.x) >> 5;
    if (row >= rows) return;
    int g = lane >> 3, p = lane & 7;
    const uint8_t* rowp = w + (size_t)row * blocks * BB;
    const uint8_t* base = rowp + (size_t)g * BB;
    const uint8_t* b1 = base + STEP_BLOCKS * BB;
    uint4 h0 = ldw<0>(base), q0 = ldw<0>(base + 16 + 16 * p);
    uint4 h1 = ldw<0>(b1), q1 = ldw<0>(b1 + 16 + 16 * p);
    const uint8_t* rest = rowp + 2 * STEP_BLOCKS * BB;
    const uint8_t* end = rowp + (size_t)blocks * BB;
    if (WIN > 0 && rest + WIN * STEP_BLOCKS * BB < end) end = rest + WIN * STEP_BLOCKS * BB;
    if (PF == 1 || PF == 3)
        for (const uint8_t* x = rest + lane * 128; x < end; x += 32 * 128) {
            if (PF == 1) asm volatile("prefetch.global.L2 [%0];" ::"l"(x));
            else asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(x));
        }
    if (PF == 2 && lane == 0 && end > rest)
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(rest), "r"((unsigned)(end - rest)) : "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
    float acc = lane_part(h0, q0, a, g, p) + lane_part(h1, q1, a, g + STEP_BLOCKS, p);
    acc += row_steps<0>(base, a, g, p, 2, blocks / STEP_BLOCKS);
    store_row(acc, y, row, lane);
}

// ROLLC: the rolling pipeline without ROLL's cursors and guards: one row a warp, two
// steps loaded ahead, each step's registers reloaded with the step two on as soon as its
// math has them (an even step count of at least two).
__global__ void __launch_bounds__(THREADS) q4k_rollc(const uint8_t* __restrict__ w, Act a, float* y, int rows, int blocks) {
    int lane = threadIdx.x & 31;
    int row = (blockIdx.x * THREADS + threadIdx.x) >> 5;
    if (row >= rows) return;
    int g = lane >> 3, p = lane & 7;
    const uint8_t* base = w + (size_t)row * blocks * BB + (size_t)g * BB;
    int steps = blocks / STEP_BLOCKS;
    const size_t step = STEP_BLOCKS * BB;
    uint4 h0 = ldw<0>(base), q0 = ldw<0>(base + 16 + 16 * p);
    uint4 h1 = ldw<0>(base + step), q1 = ldw<0>(base + step + 16 + 16 * p);
    float acc = 0.f;
    for (int s = 0; s + 2 < steps; s += 2) {
        const uint8_t* b2 = base + (size_t)(s + 2) * step;
        uint4 ch = h0, cq = q0;
        h0 = ldw<0>(b2);
        q0 = ldw<0>(b2 + 16 + 16 * p);
        acc += lane_part(ch, cq, a, g + s * STEP_BLOCKS, p);
        ch = h1;
        cq = q1;
        h1 = ldw<0>(b2 + step);
        q1 = ldw<0>(b2 + step + 16 + 16 * p);
        acc += lane_part(ch, cq, a, g + (s + 1) * STEP_BLOCKS, p);
    }
    acc += lane_part(h0, q0, a, g + (steps - 2) * STEP_BLOCKS, p);
    acc += lane_part(h1, q1, a, g + (steps - 1) * STEP_BLOCKS, p);
    store_row(acc, y, row, lane);
}

// BAL: a persistent grid whose warps take equal runs of the matrix's warp steps (rows x
// steps, row after row), so no wave ends with some multiprocessors idle: a run's first
// and last rows may be parts, added into `y` (zeroed before the call); its whole rows
// are stored. MINB as in REG (BAL alone takes 59 registers: four blocks a multiprocessor).
template <int MINB = 0>
__global__ void __launch_bounds__(THREADS, MINB) q4k_bal(const uint8_t* __restrict__ w, Act a, float* y, int rows, int blocks) {
    int lane = threadIdx.x & 31;
    long long wg = (blockIdx.x * THREADS + threadIdx.x) >> 5, nw = (long long)gridDim.x * THREADS / 32;
    int g = lane >> 3, p = lane & 7, steps = blocks / STEP_BLOCKS;
    long long total = (long long)rows * steps, u = total * wg / nw, u1 = total * (wg + 1) / nw;
    while (u < u1) {
        int row = (int)(u / steps), s = (int)(u - (long long)row * steps);
        long long left = u1 - (long long)row * steps;
        int e = left < steps ? (int)left : steps;
        const uint8_t* base = w + (size_t)row * blocks * BB + (size_t)g * BB;
        float acc = row_steps<0>(base, a, g, p, s, e);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (lane == 0) {
            if (s == 0 && e == steps) y[row] = acc;
            else atomicAdd(y + row, acc);
        }
        u = (long long)row * steps + e;
    }
}

// REG64: four lanes a super-block, each taking a whole chunk c = p (sub-blocks 2c and
// 2c + 1, 64 weights: 32 quant bytes), so a step covers eight super-blocks and each
// lane's scale decode and float math serve twice the weights. LATE: the activations are
// loaded beside the math (L1 hits), only the weights before it.
__device__ __forceinline__ float lane_part64(uint4 h, uint4 q0, uint4 q1, const Act& a, int g, int c) {
    const uint4* aq = (const uint4*)(a.q + (size_t)g * 256 + 64 * c);
    uint4 x0 = aq[0], x1 = aq[1], x2 = aq[2], x3 = aq[3];
    int4 sm = *(const int4*)(a.s16 + (size_t)g * 16 + 4 * c);
    float dx = a.d[g];
    uint32_t qw[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
    uint32_t lo_a[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
    uint32_t hi_a[8] = {x2.x, x2.y, x2.z, x2.w, x3.x, x3.y, x3.z, x3.w};
    int lo, hi;
    nibble_dots(qw, lo_a, hi_a, lo, hi);
    return scaled(h, c, lo, hi, sm.x + sm.y, sm.z + sm.w, dx);
}

template <int UNROLL>
__global__ void __launch_bounds__(THREADS) q4k_reg64(const uint8_t* __restrict__ w, Act a, float* y, int rows, int blocks) {
    int lane = threadIdx.x & 31;
    int row = (blockIdx.x * THREADS + threadIdx.x) >> 5;
    if (row >= rows) return;
    int g = lane >> 2, c = lane & 3;
    const uint8_t* base = w + (size_t)row * blocks * BB + (size_t)g * BB;
    int steps = blocks / 8;
    float acc = 0.f;
    int s = 0;
    for (; s + UNROLL <= steps; s += UNROLL) {
        uint4 h[UNROLL], q0[UNROLL], q1[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const uint8_t* b = base + (size_t)(s + u) * 8 * BB;
            h[u] = __ldg((const uint4*)b);
            q0[u] = __ldg((const uint4*)(b + 16 + 32 * c));
            q1[u] = __ldg((const uint4*)(b + 32 + 32 * c));
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) acc += lane_part64(h[u], q0[u], q1[u], a, g + (s + u) * 8, c);
    }
    for (; s < steps; s++) {
        const uint8_t* b = base + (size_t)s * 8 * BB;
        uint4 h = __ldg((const uint4*)b), q0 = __ldg((const uint4*)(b + 16 + 32 * c)), q1 = __ldg((const uint4*)(b + 32 + 32 * c));
        acc += lane_part64(h, q0, q1, a, g + s * 8, c);
    }
    store_row(acc, y, row, lane);
}

// MMA1: one vector on the integer tensor cores (`mma.sync.m16n8k32.u8.s8`), the
// sub-blocks as the product's N. A warp takes 16 rows (M) and every W-th super-block;
// lane 4g + t loads rows g and g + 8, all 32 bytes of quant group t (two 16-byte loads a
// row) and both rows' 16-byte headers. Step e (of eight) gives the A fragment word e of
// the group: low nibbles in its first k run (sub-block 2t), high nibbles left in place
// (16x, so u8) in its second (sub-block 2t + 1). B column n is sub-block n: lane 4g + t
// holds activation words only where its k run is sub-block g (g == 2t: first run,
// g == 2t + 1: second), zeros elsewhere, written once and never again, so no masking a
// step. After eight steps C[row, n] is the row's integer dot with sub-block n: lane
// 4g + t holds rows g, g + 8 of sub-blocks 2t, 2t + 1, scales them once a super-block
// (four 6-bit scales and mins a lane, no sub-block loop). The W warps of a 16-row tile
// meet in shared memory. U super-blocks' loads a pass. (Its `mma` and end:
// qgemv_probe_common.cuh.)

// A lane's constants for the 6-bit scales and mins of its two sub-blocks (2t, 2t + 1),
// whose bytes sit side by side in the header: no branch and no per-sub-block shift.
struct LaneScales {
    int hi;            // sub-blocks 4..7 (t >= 2)
    uint32_t sh;       // 16 (t % 2): the pair's bytes
    uint32_t mA, mB;   // low bits' mask (six or four), high bits' mask (none or two)
    __device__ explicit LaneScales(int t) : hi(t >= 2), sh(16 * (t & 1)), mA(t >= 2 ? 0x0F0Fu : 0x3F3Fu), mB(t >= 2 ? 0x3030u : 0u) {}
};

// `dx (d (sc0 c0 + sc1 c1 / 16) - dmin (m0 s0 + m1 s1))` for the lane's two sub-blocks of
// the super-block with header `h` (c1 holds the high nibbles' products, 16x).
__device__ __forceinline__ float mma_scaled(uint4 h, const LaneScales& k, int c0, int c1, int s0, int s1, float dx) {
    uint32_t a = k.hi ? h.w : h.y, b = k.hi ? h.w >> 4 : h.z;
    uint32_t scp = ((a >> k.sh) & k.mA) | ((h.y >> (k.sh + 2)) & k.mB);
    uint32_t mp = ((b >> k.sh) & k.mA) | ((h.z >> (k.sh + 2)) & k.mB);
    float d, dmin;
    asm("cvt.f32.f16 %0, %1;" : "=f"(d) : "h"((unsigned short)(h.x & 0xFFFF)));
    asm("cvt.f32.f16 %0, %1;" : "=f"(dmin) : "h"((unsigned short)(h.x >> 16)));
    int isum = (int)(scp & 255) * c0 + (int)(scp >> 8) * (c1 >> 4);
    int msum = (int)(mp & 255) * s0 + (int)(mp >> 8) * s1;
    return dx * (d * (float)isum - dmin * (float)msum);
}

// The MMA forms' place: lane 4g + t of warp `kw` of its 16-row tile (W warps a tile),
// and its rows g and g + 8 (past the last, the last: their sums are never stored).
template <int W, int NT = THREADS>
struct MmaPlace {
    int g, t, kw;
    const uint8_t* w0;
    const uint8_t* w1;
    __device__ MmaPlace(const uint8_t* w, int rows, int blocks) {
        int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
        g = lane >> 2;
        t = lane & 3;
        kw = warp % W;
        int tile = blockIdx.x * (NT / 32 / W) + warp / W;
        size_t row_bytes = (size_t)blocks * BB;
        w0 = w + (size_t)min(tile * 16 + g, rows - 1) * row_bytes;
        w1 = w + (size_t)min(tile * 16 + g + 8, rows - 1) * row_bytes;
    }
};

// A 16-byte load that stays where it is written among the other `asm volatile`s (so a
// pass's loads all leave before its first product), and one issued only where `p`
// (else the registers keep what they held).
__device__ __forceinline__ uint4 ldv(const void* ptr) {
    uint4 v;
    asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(ptr));
    return v;
}
__device__ __forceinline__ void ldv_if(bool p, uint32_t* r, const void* ptr) {
    asm volatile("{ .reg .pred q; setp.ne.u32 q, %4, 0; @q ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%5]; }"
                 : "+r"(r[0]), "+r"(r[1]), "+r"(r[2]), "+r"(r[3]) : "r"((uint32_t)p), "l"(ptr));
}

template <int W, int U, int MINB = 0, bool PDL = false, int NT = THREADS, bool ACT_EARLY = false, int L2NEXT = 0, int STASH = 0, bool WAIT_FIRST = false, int ROT = 0>
__global__ void __launch_bounds__(NT, MINB) q4k_mma1(const uint8_t* __restrict__ w, Act a, float* y, int rows, int blocks) {
    __shared__ float part[NT / 32][16];
    extern __shared__ uint4 stash[];
    if (PDL) asm volatile("griddepcontrol.launch_dependents;");
    // WAIT_FIRST: nothing loaded before the wait (the weights then go out with the
    // activations, in one round trip).
    if (PDL && WAIT_FIRST) asm volatile("griddepcontrol.wait;" ::: "memory");
    MmaPlace<W, NT> at(w, rows, blocks);
    int g = at.g, t = at.t, kw = at.kw;
    const uint8_t *w0 = at.w0, *w1 = at.w1;
    bool first = g == 2 * t, second = g == 2 * t + 1;
    // ROT: tile b starts its row at super-block (b * ROT) mod blocks, so the blocks that
    // leave the wait together read different parts of the activation vector.
    int rot = ROT ? (int)(((long long)blockIdx.x * ROT) % blocks) : 0;
    LaneScales ls(t);
    // B: the lane's sub-block g of activations, kept in the k run that is sub-block g
    // (first or second) and zeroed in the other (and in both where neither is).
    uint32_t xs[8];
    uint32_t m0 = first ? ~0u : 0u, m1 = second ? ~0u : 0u;
    float acc0 = 0.f, acc1 = 0.f;
    for (int sb = kw; sb < blocks; sb += U * W) {
        int n = min(U, (blocks - sb + W - 1) / W);
        uint4 h0[U], h1[U], q0a[U], q0b[U], q1a[U], q1b[U];
        if (STASH && U == 1 && sb == kw + W) {
            // The second pass: its weights were copied into the lane's stash before the
            // wait (below).
            asm volatile("cp.async.wait_all;" ::: "memory");
            const uint4* st = stash + threadIdx.x * 6;
            q0a[0] = st[0]; q0b[0] = st[1]; q1a[0] = st[2]; q1b[0] = st[3]; h0[0] = st[4]; h1[0] = st[5];
        } else {
#pragma unroll
            for (int u = 0; u < U; u++) {
                int s = u < n ? sb + u * W : sb;
                if (ROT) s = s + rot < blocks ? s + rot : s + rot - blocks;
                const uint8_t* p0 = w0 + (size_t)s * BB;
                const uint8_t* p1 = w1 + (size_t)s * BB;
                q0a[u] = ldv(p0 + 16 + 32 * t);
                q0b[u] = ldv(p0 + 32 + 32 * t);
                q1a[u] = ldv(p1 + 16 + 32 * t);
                q1b[u] = ldv(p1 + 32 + 32 * t);
                h0[u] = ldv(p0);
                h1[u] = ldv(p1);
            }
        }
        // STASH: the second pass's weights copied by `cp.async` into the lane's six
        // 16-byte slots of shared memory, before the wait (1) or after it and the first
        // pass's activation loads (2), so they stream in while those activations make
        // their round trip (no registers held).
        auto stash_next = [&]() {
            const uint8_t* p0 = w0 + (size_t)(sb + W) * BB;
            const uint8_t* p1 = w1 + (size_t)(sb + W) * BB;
            const uint8_t* src[6] = {p0 + 16 + 32 * t, p0 + 32 + 32 * t, p1 + 16 + 32 * t, p1 + 32 + 32 * t, p0, p1};
            uint32_t dst = smem32(stash + threadIdx.x * 6);
#pragma unroll
            for (int i = 0; i < 6; i++) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst + 16 * i), "l"(src[i]));
            asm volatile("cp.async.commit_group;" ::: "memory");
        };
        if (STASH == 1 && U == 1 && sb == kw && sb + W < blocks) stash_next();
        // L2NEXT: the lane's bytes of the next |L2NEXT| passes asked into L2, before the
        // wait (L2NEXT > 0; weights are never written, so this is safe) or after it and
        // the first pass's activation loads (L2NEXT < 0), so the memory stays busy while
        // those activations make their round trip.
        auto ask_next = [&]() {
#pragma unroll
            for (int j = 1; j <= (L2NEXT < 0 ? -L2NEXT : L2NEXT); j++) {
                int s2 = sb + j * U * W;
                if (s2 < blocks) {
                    const uint8_t* p0 = w0 + (size_t)s2 * BB;
                    const uint8_t* p1 = w1 + (size_t)s2 * BB;
                    asm volatile("prefetch.global.L2 [%0];" ::"l"(p0 + 16 + 32 * t));
                    asm volatile("prefetch.global.L2 [%0];" ::"l"(p0 + 32 + 32 * t));
                    asm volatile("prefetch.global.L2 [%0];" ::"l"(p1 + 16 + 32 * t));
                    asm volatile("prefetch.global.L2 [%0];" ::"l"(p1 + 32 + 32 * t));
                    if (t == 0) {
                        asm volatile("prefetch.global.L2 [%0];" ::"l"(p0));
                        asm volatile("prefetch.global.L2 [%0];" ::"l"(p1));
                    }
                }
            }
        };
        // L2NEXT < 0: the same asks after the wait and the first pass's activation loads.
        if (PDL && L2NEXT > 0 && sb == kw) ask_next();
        // Overlapped launches: the first pass's weights leave before the wait (no kernel
        // writes weights), the activations after it.
        if (PDL && !ACT_EARLY && !WAIT_FIRST && sb == kw) asm volatile("griddepcontrol.wait;" ::: "memory");
        int4 sm[U];
        float dx[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            int s = u < n ? sb + u * W : sb;
            if (ROT) s = s + rot < blocks ? s + rot : s + rot - blocks;
            const int8_t* aq = a.q + (size_t)s * 256 + 32 * g;
            // One vector's B: only the super-block in hand's (U > 1 overwrites them, so
            // U > 1 loads them again after the first product; see below).
            if (u == 0) {
                uint4 v0 = ldv(aq), v1 = ldv(aq + 16);
                xs[0] = v0.x; xs[1] = v0.y; xs[2] = v0.z; xs[3] = v0.w;
                xs[4] = v1.x; xs[5] = v1.y; xs[6] = v1.z; xs[7] = v1.w;
            }
            uint4 v = ldv(a.s16 + (size_t)s * 16 + 4 * t);
            sm[u] = make_int4((int)v.x, (int)v.y, (int)v.z, (int)v.w);
            dx[u] = a.d[s];
        }
        // ACT_EARLY (a measurement only: the activations are then read before the
        // previous kernel is known done, which only this probe's constant vector allows).
        if (PDL && ACT_EARLY && sb == kw) asm volatile("griddepcontrol.wait;" ::: "memory");
        if (PDL && L2NEXT < 0 && sb == kw) ask_next();
        // STASH == 2: the same copies after the wait, behind the first pass's activations.
        if (STASH == 2 && U == 1 && sb == kw && sb + W < blocks) stash_next();
        // The pin: a branch never taken that reads every loaded word, so ptxas cannot
        // sink a load below it among the products (as trueno's kernels pin a pass).
        if (rows < 0) {
            uint32_t x = 0;
#pragma unroll
            for (int u = 0; u < U; u++)
                x ^= h0[u].x ^ h0[u].y ^ h0[u].z ^ h0[u].w ^ h1[u].x ^ h1[u].y ^ h1[u].z ^ h1[u].w ^ q0a[u].x ^ q0a[u].y ^ q0a[u].z ^ q0a[u].w ^
                     q0b[u].x ^ q0b[u].y ^ q0b[u].z ^ q0b[u].w ^ q1a[u].x ^ q1a[u].y ^ q1a[u].z ^ q1a[u].w ^ q1b[u].x ^ q1b[u].y ^
                     q1b[u].z ^ q1b[u].w ^ (uint32_t)sm[u].x ^ (uint32_t)sm[u].w ^ __float_as_uint(dx[u]);
#pragma unroll
            for (int e = 0; e < 8; e++) x ^= xs[e];
            y[0] = __uint_as_float(x);
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (u >= n) break;
            if (u > 0) {
                const int8_t* aq = a.q + (size_t)(sb + u * W) * 256 + 32 * g;
                uint4 v0 = ldv(aq), v1 = ldv(aq + 16);
                xs[0] = v0.x; xs[1] = v0.y; xs[2] = v0.z; xs[3] = v0.w;
                xs[4] = v1.x; xs[5] = v1.y; xs[6] = v1.z; xs[7] = v1.w;
            }
            uint32_t r0w[8] = {q0a[u].x, q0a[u].y, q0a[u].z, q0a[u].w, q0b[u].x, q0b[u].y, q0b[u].z, q0b[u].w};
            uint32_t r1w[8] = {q1a[u].x, q1a[u].y, q1a[u].z, q1a[u].w, q1b[u].x, q1b[u].y, q1b[u].z, q1b[u].w};
            int c[4] = {0, 0, 0, 0};
#pragma unroll
            for (int e = 0; e < 8; e++)
                mma_u8s8(c, r0w[e] & 0x0F0F0F0F, r1w[e] & 0x0F0F0F0F, r0w[e] & 0xF0F0F0F0, r1w[e] & 0xF0F0F0F0, xs[e] & m0, xs[e] & m1);
            int s0 = sm[u].x + sm[u].y, s1 = sm[u].z + sm[u].w;
            acc0 += mma_scaled(h0[u], ls, c[0], c[1], s0, s1, dx[u]);
            acc1 += mma_scaled(h1[u], ls, c[2], c[3], s0, s1, dx[u]);
        }
    }
    store_tile<W, NT>(part, acc0, acc1, y, rows);
}

// MMA1H: MMA1 in half super-blocks, for more warps a tile at fewer registers. Unit u of
// a row's 2 * blocks is super-block u / 2, half u % 2: the lane's first or second 16
// bytes of quant group t (steps 0-3 or 4-7 of MMA1) against the matching 16 bytes of its
// activations, so a unit holds half MMA1's weights in registers. A unit's partial dots
// are scaled as MMA1's whole ones (the sum of the halves' `sc c` terms is the whole's);
// the mins' term goes with half 0 alone. W warps a 16-row tile (W = 24: 768 threads, two
// blocks a multiprocessor at 42 registers or fewer).
template <int W, int MINB, int NT>
__global__ void __launch_bounds__(NT, MINB) q4k_mma1h(const uint8_t* __restrict__ w, Act a, float* y, int rows, int blocks) {
    __shared__ float part[NT / 32][16];
    asm volatile("griddepcontrol.launch_dependents;");
    MmaPlace<W, NT> at(w, rows, blocks);
    int g = at.g, t = at.t, kw = at.kw;
    const uint8_t *w0 = at.w0, *w1 = at.w1;
    bool first = g == 2 * t, second = g == 2 * t + 1;
    LaneScales ls(t);
    uint32_t m0 = first ? ~0u : 0u, m1 = second ? ~0u : 0u;
    float acc0 = 0.f, acc1 = 0.f;
    int units = 2 * blocks;
    for (int u = kw; u < units; u += W) {
        int sb = u >> 1, h = u & 1;
        const uint8_t* p0 = w0 + (size_t)sb * BB;
        const uint8_t* p1 = w1 + (size_t)sb * BB;
        uint4 q0 = ldv(p0 + 16 + 32 * t + 16 * h);
        uint4 q1 = ldv(p1 + 16 + 32 * t + 16 * h);
        uint4 h0 = ldv(p0), h1 = ldv(p1);
        // The first unit's weights leave before the wait, the activations after it.
        if (u == kw) asm volatile("griddepcontrol.wait;" ::: "memory");
        uint4 x = ldv(a.q + (size_t)sb * 256 + 32 * g + 16 * h);
        uint4 v = ldv(a.s16 + (size_t)sb * 16 + 4 * t);
        float dx = a.d[sb];
        if (rows < 0) {
            y[0] = __uint_as_float(q0.x ^ q0.y ^ q0.z ^ q0.w ^ q1.x ^ q1.y ^ q1.z ^ q1.w ^ h0.x ^ h0.y ^ h0.z ^ h0.w ^ h1.x ^ h1.y ^ h1.z ^ h1.w ^
                                   x.x ^ x.y ^ x.z ^ x.w ^ v.x ^ v.w ^ __float_as_uint(dx));
        }
        uint32_t r0w[4] = {q0.x, q0.y, q0.z, q0.w};
        uint32_t r1w[4] = {q1.x, q1.y, q1.z, q1.w};
        uint32_t xs[4] = {x.x, x.y, x.z, x.w};
        int c[4] = {0, 0, 0, 0};
#pragma unroll
        for (int e = 0; e < 4; e++)
            mma_u8s8(c, r0w[e] & 0x0F0F0F0F, r1w[e] & 0x0F0F0F0F, r0w[e] & 0xF0F0F0F0, r1w[e] & 0xF0F0F0F0, xs[e] & m0, xs[e] & m1);
        int s0 = h ? 0 : (int)v.x + (int)v.y, s1 = h ? 0 : (int)v.z + (int)v.w;
        acc0 += mma_scaled(h0, ls, c[0], c[1], s0, s1, dx);
        acc1 += mma_scaled(h1, ls, c[2], c[3], s0, s1, dx);
    }
    if (kw >= units) asm volatile("griddepcontrol.wait;" ::: "memory");
    store_tile<W, NT>(part, acc0, acc1, y, rows);
}

// MMA2: MMA1 with both k runs of a step in one sub-block (steps 0-3 the group's low
// nibbles, words 2e and 2e + 1; steps 4-7 its high ones) and two accumulators (low, high),
// so B column 2t is sub-block 2t (low) or 2t + 1 (high) in every step: lane 4g + t with
// g == 2t loads its two sub-blocks' 64 activation bytes once a super-block, in pairs the
// `mma` takes as they are (no mask a step); every other lane's B stays zero. Columns
// 2t + 1 of both accumulators are zero.
template <int W, int MINB = 0, bool PDL = false>
__global__ void __launch_bounds__(THREADS, MINB) q4k_mma2(const uint8_t* __restrict__ w, Act a, float* y, int rows, int blocks) {
    __shared__ float part[THREADS / 32][16];
    if (PDL) asm volatile("griddepcontrol.launch_dependents;");
    MmaPlace<W> at(w, rows, blocks);
    int g = at.g, t = at.t, kw = at.kw;
    const uint8_t *w0 = at.w0, *w1 = at.w1;
    bool active = g == 2 * t;
    LaneScales ls(t);
    uint32_t xs[16];
#pragma unroll
    for (int e = 0; e < 16; e++) xs[e] = 0;
    float acc0 = 0.f, acc1 = 0.f;
    for (int sb = kw; sb < blocks; sb += W) {
        const uint8_t* p0 = w0 + (size_t)sb * BB;
        const uint8_t* p1 = w1 + (size_t)sb * BB;
        uint4 q0a = ldv(p0 + 16 + 32 * t), q0b = ldv(p0 + 32 + 32 * t);
        uint4 q1a = ldv(p1 + 16 + 32 * t), q1b = ldv(p1 + 32 + 32 * t);
        uint4 h0 = ldv(p0), h1 = ldv(p1);
        if (PDL && sb == kw) asm volatile("griddepcontrol.wait;" ::: "memory");
        const int8_t* aq = a.q + (size_t)sb * 256 + 64 * t;
#pragma unroll
        for (int i = 0; i < 4; i++) ldv_if(active, xs + 4 * i, aq + 16 * i);
        uint4 v = ldv(a.s16 + (size_t)sb * 16 + 4 * t);
        float dx = a.d[sb];
        if (rows < 0) {
            uint32_t x = h0.x ^ h0.y ^ h0.z ^ h0.w ^ h1.x ^ h1.y ^ h1.z ^ h1.w ^ q0a.x ^ q0a.y ^ q0a.z ^ q0a.w ^ q0b.x ^ q0b.y ^ q0b.z ^
                         q0b.w ^ q1a.x ^ q1a.y ^ q1a.z ^ q1a.w ^ q1b.x ^ q1b.y ^ q1b.z ^ q1b.w ^ v.x ^ v.w ^ __float_as_uint(dx);
#pragma unroll
            for (int e = 0; e < 16; e++) x ^= xs[e];
            y[0] = __uint_as_float(x);
        }
        uint32_t r0w[8] = {q0a.x, q0a.y, q0a.z, q0a.w, q0b.x, q0b.y, q0b.z, q0b.w};
        uint32_t r1w[8] = {q1a.x, q1a.y, q1a.z, q1a.w, q1b.x, q1b.y, q1b.z, q1b.w};
        int lo[4] = {0, 0, 0, 0}, hi[4] = {0, 0, 0, 0};
#pragma unroll
        for (int e = 0; e < 4; e++)
            mma_u8s8(lo, r0w[2 * e] & 0x0F0F0F0F, r1w[2 * e] & 0x0F0F0F0F, r0w[2 * e + 1] & 0x0F0F0F0F, r1w[2 * e + 1] & 0x0F0F0F0F, xs[2 * e], xs[2 * e + 1]);
#pragma unroll
        for (int e = 0; e < 4; e++)
            mma_u8s8(hi, r0w[2 * e] & 0xF0F0F0F0, r1w[2 * e] & 0xF0F0F0F0, r0w[2 * e + 1] & 0xF0F0F0F0, r1w[2 * e + 1] & 0xF0F0F0F0, xs[8 + 2 * e], xs[9 + 2 * e]);
        int s0 = (int)v.x + (int)v.y, s1 = (int)v.z + (int)v.w;
        acc0 += mma_scaled(h0, ls, lo[0], hi[0], s0, s1, dx);
        acc1 += mma_scaled(h1, ls, lo[2], hi[2], s0, s1, dx);
    }
    store_tile<W>(part, acc0, acc1, y, rows);
}

// A warp's place in its stream of steps: row `row`, step `step`. After a row's last
// step it moves `stride` rows on (the grid's warps for a persistent warp, else `rows`,
// which ends it); `next` says whether a row just ended.
struct Cursor {
    int row, step;
    __device__ bool next(int steps, int stride) {
        if (++step < steps) return false;
        step = 0;
        row += stride;
        return true;
    }
};

// ROLL: register loads as a rolling pipeline instead of passes: step t + D's loads are
// issued into the registers step t has just handed to its math, so D steps are always in
// flight (a pass of two drains before the next starts). PERSIST: a warp's rows one after
// another as one stream of steps, the next row's first loads behind this row's last math.
__device__ __forceinline__ void ld_step(const uint8_t* w, size_t row_bytes, int row, int s, int g, int p, uint4& h, uint4& q) {
    const uint8_t* b = w + (size_t)row * row_bytes + ((size_t)s * STEP_BLOCKS + g) * BB;
    h = __ldg((const uint4*)b);
    q = __ldg((const uint4*)(b + 16 + 16 * p));
}

template <int D, bool PERSIST>
__global__ void __launch_bounds__(THREADS) q4k_roll(const uint8_t* __restrict__ w, Act a, float* y, int rows, int blocks) {
    int lane = threadIdx.x & 31;
    int warp = (blockIdx.x * THREADS + threadIdx.x) >> 5;
    if (warp >= rows) return;
    int W = PERSIST ? gridDim.x * (THREADS / 32) : rows;
    int g = lane >> 3, p = lane & 7;
    int steps = blocks / STEP_BLOCKS;
    size_t row_bytes = (size_t)blocks * BB;
    int total = ((rows - 1 - warp) / W + 1) * steps;
    uint4 h[D], q[D];
    Cursor ld{warp, 0}, at{warp, 0};  // the next step to load, the next to compute
#pragma unroll
    for (int i = 0; i < D; i++) {
        if (i < total) {
            ld_step(w, row_bytes, ld.row, ld.step, g, p, h[i], q[i]);
            ld.next(steps, W);
        }
    }
    float acc = 0.f;
    for (int t = 0; t < total; t += D) {
#pragma unroll
        for (int i = 0; i < D; i++) {
            if (t + i < total) {
                uint4 ch = h[i], cq = q[i];
                if (t + i + D < total) {
                    ld_step(w, row_bytes, ld.row, ld.step, g, p, h[i], q[i]);
                    ld.next(steps, W);
                }
                acc += lane_part(ch, cq, a, at.step * STEP_BLOCKS + g, p);
                int row = at.row;
                if (at.next(steps, W)) {
                    store_row(acc, y, row, lane);
                    acc = 0.f;
                }
            }
        }
    }
}

__device__ __forceinline__ void cp16(void* smem, const void* gmem) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void wait_group() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

// CP: a warp's weight bytes for STAGES - 1 steps ahead copied by `cp.async` into a ring
// of STAGES slots in shared memory while one step is computed. ONCE false (CP): each lane
// copies its header and quant bytes into its own 32 bytes of the slot (a header copied by
// all eight of its lanes); ONCE true (CPH): a step's bytes copied once each (the slot is
// the step's four headers, lane 8g copying header g, then the 32 lanes' quant bytes), a
// `__syncwarp` after the wait making the other lanes' headers visible. PERSIST (CPHP): a
// warp takes rows row, row + warps, ... as one stream of steps.
template <int STAGES, bool PERSIST, bool ONCE>
__global__ void __launch_bounds__(THREADS) q4k_cp(const uint8_t* __restrict__ w, Act a, float* y, int rows, int blocks) {
    constexpr int SLOT = ONCE ? 36 : 64;  // 16-byte pieces a slot holds
    extern __shared__ uint4 ring[];       // [warp][stage][slot]
    int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
    int warp = (blockIdx.x * THREADS + threadIdx.x) >> 5;
    if (warp >= rows) return;
    int stride = PERSIST ? gridDim.x * (THREADS / 32) : rows;
    int g = lane >> 3, p = lane & 7;
    int steps = blocks / STEP_BLOCKS;
    uint4* wring = ring + (size_t)wib * STAGES * SLOT;
    int head_at = ONCE ? g : 2 * lane, quant_at = ONCE ? 4 + lane : 2 * lane + 1;
    Cursor ld{warp, 0};
    auto issue = [&](int slot) {
        if (ld.row < rows) {
            const uint8_t* b = w + ((size_t)ld.row * blocks + (size_t)ld.step * STEP_BLOCKS + g) * BB;
            if (!ONCE || p == 0) cp16(wring + slot * SLOT + head_at, b);
            cp16(wring + slot * SLOT + quant_at, b + 16 + 16 * p);
            ld.next(steps, stride);
        }
        commit();
    };
#pragma unroll
    for (int i = 0; i < STAGES - 1; i++) issue(i);
    float acc = 0.f;
    Cursor at{warp, 0};
    for (int t = 0; at.row < rows; t++) {
        issue((t + STAGES - 1) % STAGES);
        wait_group<STAGES - 1>();
        if (ONCE) __syncwarp();
        int slot = t % STAGES;
        uint4 h = wring[slot * SLOT + head_at], q = wring[slot * SLOT + quant_at];
        acc += lane_part(h, q, a, g + at.step * STEP_BLOCKS, p);
        // The slot is refilled next iteration: every lane's reads of it first.
        if (ONCE) __syncwarp();
        int row = at.row;
        if (at.next(steps, stride)) {
            store_row(acc, y, row, lane);
            acc = 0.f;
        }
    }
}

// BULK: the copy engine fills a ring of STAGES stages per block, each stage a group of
// eight rows' next CH super-blocks (eight `cp.async.bulk` copies of CH * 144 bytes, one
// mbarrier); the block's eight warps compute their rows from shared memory with REG's
// lanes. Persistent: block b takes row groups b, b + grid, ...; thread 0 refills a stage
// once all warps are past it (a block barrier), so STAGES - 1 stages are always in flight
// and no register holds a weight before it has landed.
constexpr int CH = 8;  // super-blocks a stage takes of each row (two warp steps)
constexpr int STAGE_BYTES = 8 * CH * BB;

__device__ __forceinline__ unsigned smem_u32(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

template <int STAGES, bool ACT_SMEM>
__global__ void __launch_bounds__(THREADS) q4k_bulk(const uint8_t* __restrict__ w, Act ga, float* y, int rows, int blocks) {
    extern __shared__ uint4 ring16[];
    uint8_t* ring = (uint8_t*)ring16;
    __shared__ __align__(8) uint64_t full[STAGES];
    __shared__ __align__(8) uint64_t actbar;
    // ACT_SMEM: the activations copied once into shared memory after the ring (the ring
    // leaves L1 too little room to keep them).
    uint8_t* act_sm = ring + STAGES * STAGE_BYTES;
    Act a = ga;
    if (ACT_SMEM) {
        a.q = (const int8_t*)act_sm;
        a.s16 = (const int32_t*)(act_sm + blocks * 256);
        a.d = (const float*)(act_sm + blocks * 320);
    }
    int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
    int g = lane >> 3, p = lane & 7;
    int chunks = blocks / CH;
    int groups = (rows + 7) / 8;
    // Jobs of this block: (group, chunk) in order; job j is group b + (j / chunks) * grid.
    int my_groups = blockIdx.x < groups ? (groups - 1 - blockIdx.x) / gridDim.x + 1 : 0;
    int jobs = my_groups * chunks;
    size_t row_bytes = (size_t)blocks * BB;
    auto fill = [&](int j) {
        int slot = j % STAGES;
        int grp = blockIdx.x + (j / chunks) * gridDim.x, ch = j % chunks;
        int r0 = grp * 8, n = min(8, rows - r0);
        unsigned bar = smem_u32(&full[slot]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(n * CH * BB) : "memory");
        for (int r = 0; r < n; r++)
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                             smem_u32(ring + slot * STAGE_BYTES + r * CH * BB)),
                         "l"(w + (size_t)(r0 + r) * row_bytes + (size_t)ch * CH * BB), "r"(CH * BB), "r"(bar)
                         : "memory");
    };
    if (threadIdx.x == 0) {
        for (int i = 0; i < STAGES; i++) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(&full[i])));
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(&actbar)));
        asm volatile("fence.mbarrier_init.release.cluster;");
        asm volatile("fence.proxy.async.shared::cta;");
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        if (ACT_SMEM) {
            unsigned bar = smem_u32(&actbar);
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(blocks * 324) : "memory");
            const void* src[3] = {ga.q, ga.s16, ga.d};
            int off[3] = {0, blocks * 256, blocks * 320}, len[3] = {blocks * 256, blocks * 64, blocks * 4};
            for (int i = 0; i < 3; i++)
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                                 smem_u32(act_sm + off[i])),
                             "l"(src[i]), "r"(len[i]), "r"(bar)
                             : "memory");
        }
        for (int j = 0; j < STAGES && j < jobs; j++) fill(j);
    }
    if (ACT_SMEM) {
        unsigned done = 0;
        while (!done)
            asm volatile("{ .reg .pred q; mbarrier.try_wait.parity.shared::cta.b64 q, [%1], 0; selp.u32 %0, 1, 0, q; }"
                         : "=r"(done)
                         : "r"(smem_u32(&actbar))
                         : "memory");
    }
    float acc = 0.f;
    for (int j = 0; j < jobs; j++) {
        int slot = j % STAGES;
        unsigned parity = (j / STAGES) & 1;
        unsigned done = 0;
        while (!done)
            asm volatile("{ .reg .pred q; mbarrier.try_wait.parity.shared::cta.b64 q, [%1], %2; selp.u32 %0, 1, 0, q; }"
                         : "=r"(done)
                         : "r"(smem_u32(&full[slot])), "r"(parity)
                         : "memory");
        int grp = blockIdx.x + (j / chunks) * gridDim.x, ch = j % chunks;
        int row = grp * 8 + wib;
        if (row < rows) {
            const uint8_t* st = ring + slot * STAGE_BYTES + wib * CH * BB;
#pragma unroll
            for (int u = 0; u < CH / STEP_BLOCKS; u++) {
                const uint8_t* b = st + (u * STEP_BLOCKS + g) * BB;
                uint4 h = *(const uint4*)b, q = *(const uint4*)(b + 16 + 16 * p);
                acc += lane_part(h, q, a, ch * CH + u * STEP_BLOCKS + g, p);
            }
            if (ch == chunks - 1) {
                store_row(acc, y, row, lane);
                acc = 0.f;
            }
        }
        __syncthreads();
        if (threadIdx.x == 0 && j + STAGES < jobs) fill(j + STAGES);
    }
}

#include "qgemv_q4k_staged_forms.cuh"

static float ref_row(const uint8_t* w, const int8_t* aq, const float* ad, int row, int blocks) {
    double acc = 0;
    for (int gb = 0; gb < blocks; gb++) {
        const uint8_t* b = w + ((size_t)row * blocks + gb) * BB;
        uint16_t hd, hm;
        memcpy(&hd, b, 2);
        memcpy(&hm, b + 2, 2);
        float d = h2f(hd), dmin = h2f(hm);
        const uint8_t* sc = b + 4;
        for (int j = 0; j < 8; j++) {
            int s, m;
            if (j < 4) { s = sc[j] & 63; m = sc[j + 4] & 63; }
            else { s = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4); m = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4); }
            int c = j / 2;
            for (int e = 0; e < 32; e++) {
                uint8_t qb = b[16 + 32 * c + e];
                int qv = (j & 1) ? qb >> 4 : qb & 15;
                double wv = (double)d * s * qv - (double)dmin * m;
                acc += wv * ad[gb] * aq[(size_t)gb * 256 + 32 * j + e];
            }
        }
    }
    return (float)acc;
}

int main(int argc, char** argv) {
    auto shapes = probe_shapes(argc, argv);
    const int calls = 20;
    cudaStream_t s;
    cudaStreamCreate(&s);
    int sms;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    print_copy_rate(s);
    for (auto& sh : shapes) {
        int rows = sh[0], cols = sh[1], blocks = cols / 256;
        size_t wbytes = (size_t)rows * blocks * BB;
        std::vector<uint8_t> hw(wbytes);
        Lcg rnd;
        for (size_t i = 0; i < wbytes; i++) hw[i] = (uint8_t)rnd();
        for (size_t b = 0; b < (size_t)rows * blocks; b++) {
            uint16_t d = f2h(0.001f * (1 + rnd() % 100)), m = f2h(0.0005f * (1 + rnd() % 100));
            memcpy(&hw[b * BB], &d, 2);
            memcpy(&hw[b * BB + 2], &m, 2);
        }
        ProbeData p(hw, rows, blocks, calls, rnd);
        p.reference(hw, ref_row);
        Act act = p.act;
        float* y = p.y;
        const auto& ws = p.ws;
        int sets = (int)ws.size();
        // `slot16`: 16-byte slots a warp's ring holds.
        // A kernel of `nt`-thread blocks with `smem` dynamic bytes: its blocks a
        // multiprocessor, then (`measure`) one checked call on a grid of `grid` blocks and
        // the graph of `calls` (each zeroing y first where `zero`), printed.
        auto occupancy = [&](auto kern, int nt, size_t smem) {
            if (smem) cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
            int per_sm = 0;
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, nt, smem);
            return per_sm;
        };
        auto measure = [&](const char* name, auto kern, int grid, int nt, size_t smem, int per_sm, bool pdl, bool zero) {
            cudaFuncAttributes fa;
            cudaFuncGetAttributes(&fa, kern);
            cudaMemset(y, 0, rows * 4);
            kern<<<grid, nt, smem, s>>>(ws[0], act, y, rows, blocks);
            cudaStreamSynchronize(s);
            double err = p.max_rel_err();
            double us = graph_us(s, calls, [&](int i) {
                if (zero) cudaMemsetAsync(y, 0, rows * 4, s);
                launch(s, pdl, kern, dim3(grid), dim3(nt), smem, (const uint8_t*)ws[i % sets], act, y, rows, blocks);
            });
            print_form(p, cols, name, fa.numRegs, per_sm, grid, us, err);
        };
        auto run = [&](const char* name, auto kern, int slot16, bool persist, bool zero = false, bool pdl = false, int rows_a_block = 0) {
            size_t smem = (size_t)(THREADS / 32) * slot16 * 16;
            int per_sm = occupancy(kern, THREADS, smem);
            int grid = (rows * 32 + THREADS - 1) / THREADS;
            if (rows_a_block) grid = (rows + rows_a_block - 1) / rows_a_block;
            if (persist) grid = std::min(grid, sms * per_sm);
            measure(name, kern, grid, THREADS, smem, per_sm, pdl, zero);
        };
        // A tile's forms: one 16-row tile a block of `nt` threads, `smem` dynamic bytes.
        // `persist`: a grid of as many blocks as fit, each taking tiles b, b + grid, ...
        auto run_tile = [&](const char* name, auto kern, int nt, size_t smem, bool pdl, bool persist = false) {
            if (getenv("FORM") && strcmp(getenv("FORM"), name) != 0) return;
            int per_sm = occupancy(kern, nt, smem);
            int grid = (rows + 15) / 16;
            if (persist) grid = std::min(grid, per_sm * sms);
            measure(name, kern, grid, nt, smem, per_sm, pdl, false);
        };
        // STAGED=1: trueno's two register forms (eight warps at four blocks, sixteen at
        // two) against the staged forms, two rounds.
        for (int round = 0; getenv("STAGED") && round < 2; round++) {
            run_tile("MMA1-W8-M4", q4k_mma1<8, 1, 4, true>, 256, 0, true);
            run_tile("MMA1-W16-M2", q4k_mma1<16, 1, 2, true, 512>, 512, 0, true);
            run_tile("MMA1S-W8-S2-M2", q4k_mma_s<8, 2, 2>, 256, q4k_staged_smem(8, 2), true);
            run_tile("MMA1S-W8-S2-M3", q4k_mma_s<8, 2, 3>, 256, q4k_staged_smem(8, 2), true);
            run_tile("MMA1S-W8-S2-M4", q4k_mma_s<8, 2, 4>, 256, q4k_staged_smem(8, 2), true);
            run_tile("MMA1S-W8-S3-M2", q4k_mma_s<8, 3, 2>, 256, q4k_staged_smem(8, 3), true);
            run_tile("MMA1S-W8-S3-M3", q4k_mma_s<8, 3, 3>, 256, q4k_staged_smem(8, 3), true);
            run_tile("MMA1S-W8-S4-M2", q4k_mma_s<8, 4, 2>, 256, q4k_staged_smem(8, 4), true);
            run_tile("MMA1S-W16-S2-M1", q4k_mma_s<16, 2, 1>, 512, q4k_staged_smem(16, 2), true);
            run_tile("MMA1S-W16-S2-M2", q4k_mma_s<16, 2, 2>, 512, q4k_staged_smem(16, 2), true);
            run_tile("MMA1S-W4-S2-M6", q4k_mma_s<4, 2, 6>, 128, q4k_staged_smem(4, 2), true);
            run_tile("MMA1S-W4-S3-M6", q4k_mma_s<4, 3, 6>, 128, q4k_staged_smem(4, 3), true);
        }
        // BULK=1: trueno's register forms against the copy engine's whole tiles, two rounds.
        // SWEEP=1: the register forms at rows whose super-blocks do or do not divide
        // evenly among a tile's warps (sixteen; fourteen for 56 super-blocks a row).
        for (int round = 0; getenv("SWEEP") && round < 2; round++) {
            run_tile("MMA1-W16-M2", q4k_mma1<16, 1, 2, true, 512>, 512, 0, true);
            run_tile("MMA1-W14-M2", q4k_mma1<14, 1, 2, true, 448>, 448, 0, true);
            run_tile("MMA1-W8-M4", q4k_mma1<8, 1, 4, true>, 256, 0, true);
        }
        // HALF=1 (session 63): half super-blocks a unit, more warps a tile.
        for (int round = 0; getenv("HALF") && round < 2; round++) {
            run_tile("MMA1-W16-M2", q4k_mma1<16, 1, 2, true, 512>, 512, 0, true);
            run_tile("MMA1-W8-M4", q4k_mma1<8, 1, 4, true>, 256, 0, true);
            run_tile("MMA1H-W16-M2", q4k_mma1h<16, 2, 512>, 512, 0, true);
            run_tile("MMA1H-W24-M2", q4k_mma1h<24, 2, 768>, 768, 0, true);
            run_tile("MMA1H-W32-M1", q4k_mma1h<32, 1, 1024>, 1024, 0, true);
            run_tile("MMA1H-W16-M3", q4k_mma1h<16, 3, 512>, 512, 0, true);
            run_tile("MMA1H-W8-M6", q4k_mma1h<8, 6, 256>, 256, 0, true);
            run_tile("MMA1-W24-M2", q4k_mma1<24, 1, 2, true, 768>, 768, 0, true);
        }
        // WAIT=1 (session 63): around the wait for the previous kernel, the sixteen- and
        // eight-warp forms as trueno runs them, serialised, with the activations loaded
        // before the wait (ACT-EARLY: a measurement only, the activations then being read
        // before the kernel that writes them is known done, which only this probe's
        // constant vector allows), with nothing loaded before it, with the next one or two
        // passes asked into L2 before or after it, with the next pass copied into shared
        // memory before or after it, and with each tile's row started at a rotated
        // super-block.
        for (int round = 0; getenv("WAIT") && round < 2; round++) {
            run_tile("MMA1-W16-M2", q4k_mma1<16, 1, 2, true, 512>, 512, 0, true);
            run_tile("MMA1-W16-M2-SERIAL", q4k_mma1<16, 1, 2, false, 512>, 512, 0, false);
            run_tile("MMA1-W16-M2-ACT-EARLY", q4k_mma1<16, 1, 2, true, 512, true>, 512, 0, true);
            run_tile("MMA1-W16-M2-WAIT-FIRST", q4k_mma1<16, 1, 2, true, 512, false, 0, 0, true>, 512, 0, true);
            run_tile("MMA1-W16-M2-L2N1", q4k_mma1<16, 1, 2, true, 512, false, 1>, 512, 0, true);
            run_tile("MMA1-W16-M2-L2N2", q4k_mma1<16, 1, 2, true, 512, false, 2>, 512, 0, true);
            run_tile("MMA1-W16-M2-L2N1-AFTER", q4k_mma1<16, 1, 2, true, 512, false, -1>, 512, 0, true);
            run_tile("MMA1-W16-M2-STASH", q4k_mma1<16, 1, 2, true, 512, false, 0, 1>, 512, 512 * 96, true);
            run_tile("MMA1-W16-M2-STASH-AFTER", q4k_mma1<16, 1, 2, true, 512, false, 0, 2>, 512, 512 * 96, true);
            run_tile("MMA1-W16-M2-ROT1", q4k_mma1<16, 1, 2, true, 512, false, 0, 0, false, 1>, 512, 0, true);
            run_tile("MMA1-W8-M4", q4k_mma1<8, 1, 4, true>, 256, 0, true);
            run_tile("MMA1-W8-M4-SERIAL", q4k_mma1<8, 1, 4, false>, 256, 0, false);
            run_tile("MMA1-W8-M4-ACT-EARLY", q4k_mma1<8, 1, 4, true, THREADS, true>, 256, 0, true);
            run_tile("MMA1-W8-M4-WAIT-FIRST", q4k_mma1<8, 1, 4, true, THREADS, false, 0, 0, true>, 256, 0, true);
            run_tile("MMA1-W8-M4-L2N1", q4k_mma1<8, 1, 4, true, THREADS, false, 1>, 256, 0, true);
            run_tile("MMA1-W8-M4-L2N1-AFTER", q4k_mma1<8, 1, 4, true, THREADS, false, -1>, 256, 0, true);
            run_tile("MMA1-W8-M4-STASH", q4k_mma1<8, 1, 4, true, THREADS, false, 0, 1>, 256, 256 * 96, true);
            run_tile("MMA1-W8-M4-STASH-AFTER", q4k_mma1<8, 1, 4, true, THREADS, false, 0, 2>, 256, 256 * 96, true);
            run_tile("MMA1-W8-M4-ROT1", q4k_mma1<8, 1, 4, true, THREADS, false, 0, 0, false, 1>, 256, 0, true);
        }
        for (int round = 0; getenv("BULK") && round < 2; round++) {
            run_tile("MMA1-W8-M4", q4k_mma1<8, 1, 4, true>, 256, 0, true);
            run_tile("MMA1-W16-M2", q4k_mma1<16, 1, 2, true, 512>, 512, 0, true);
            auto bulk = [&](const char* name, auto kern, int stages, int minb) {
                size_t smem = ring_smem(stages, blocks, BB);
                if (ring_fits(smem, minb)) run_tile(name, kern, THREADS, smem, true, true);
            };
            bulk("MMA1B-S1-M3", q4k_mma_b<1, 3>, 1, 3);
            bulk("MMA1B-S1-M4", q4k_mma_b<1, 4>, 1, 4);
            bulk("MMA1B-S1-M5", q4k_mma_b<1, 5>, 1, 5);
            bulk("MMA1B-S2-M2", q4k_mma_b<2, 2>, 2, 2);
            bulk("MMA1B-S2-M3", q4k_mma_b<2, 3>, 2, 3);
            bulk("MMA1B-S3-M2", q4k_mma_b<3, 2>, 3, 2);
            bulk("MMA1B-S4-M1", q4k_mma_b<4, 1>, 4, 1);
        }
        // MMA=1: REG against the one-vector tensor-core form, three rounds.
        for (int round = 0; getenv("MMA") && round < 3; round++) {
            run("REG", q4k_reg<>, 0, false);
            run("MMA1-W8U1", q4k_mma1<8, 1>, 0, false, false, false, 16);
            run("MMA1-W8U1-M3", q4k_mma1<8, 1, 3>, 0, false, false, false, 16);
            run("MMA1-W8U1-M4", q4k_mma1<8, 1, 4>, 0, false, false, false, 16);
            run("MMA1-W8U2", q4k_mma1<8, 2>, 0, false, false, false, 16);
            run("MMA1-W4U1", q4k_mma1<4, 1>, 0, false, false, false, 32);
            run("MMA1-W4U1-M3", q4k_mma1<4, 1, 3>, 0, false, false, false, 32);
            run("MMA1-W4U2", q4k_mma1<4, 2>, 0, false, false, false, 32);
            run("MMA1-W2U2", q4k_mma1<2, 2>, 0, false, false, false, 64);
            run("PDL", q4k_pdl<0>, 0, false, false, true);
            run("MMA1-W8U1-M4-PDL", q4k_mma1<8, 1, 4, true>, 0, false, false, true, 16);
            run("MMA1-W8U1-PDL", q4k_mma1<8, 1, 0, true>, 0, false, false, true, 16);
            run("MMA1-W4U1-M3-PDL", q4k_mma1<4, 1, 3, true>, 0, false, false, true, 32);
            run("MMA2-W8", q4k_mma2<8>, 0, false, false, false, 16);
            run("MMA2-W8-M4", q4k_mma2<8, 4>, 0, false, false, false, 16);
            run("MMA2-W8-M4-PDL", q4k_mma2<8, 4, true>, 0, false, false, true, 16);
            run("MMA2-W8-PDL", q4k_mma2<8, 0, true>, 0, false, false, true, 16);
        }
        // WAVES=1: REG against BAL (and REG behind the same zeroing of y), three rounds.
        for (int round = 0; getenv("WAVES") && round < 3; round++) {
            run("REG", q4k_reg<>, 0, false);
            run("REGZ", q4k_reg<>, 0, false, true);
            run("BAL", q4k_bal<>, 0, true, true);
            run("BAL5", q4k_bal<5>, 0, true, true);
        }
        // PDL=1: REG and its overlapped launch, with and without L2 prefetches before the wait.
        for (int round = 0; getenv("PDL") && round < 3; round++) {
            run("REG", q4k_reg<>, 0, false);
            run("PDL", q4k_pdl<0>, 0, false, false, true);
            run("PDL-pf", q4k_pdl<1>, 0, false, false, true);
            run("PDL-bulkpf", q4k_pdl<2>, 0, false, false, true);
            run("PDL-pf-evictlast", q4k_pdl<3>, 0, false, false, true);
            run("PDL-pf-next2", q4k_pdl<1, 2>, 0, false, false, true);
            run("PDL-pf-next4", q4k_pdl<1, 4>, 0, false, false, true);
            run("PDL-pf-evictlast-next2", q4k_pdl<3, 2>, 0, false, false, true);
        }
        // ROLLC=1: REG against the clean rolling pipeline.
        for (int round = 0; getenv("ROLLC") && round < 3; round++) {
            run("REG", q4k_reg<>, 0, false);
            run("ROLLC", q4k_rollc, 0, false);
        }
        // DEPTH=1: REG with one to four steps' loads before their math.
        for (int round = 0; getenv("DEPTH") && round < 3; round++) {
            run("REG", q4k_reg<>, 0, false);
            run("REGU1", q4k_reg<0, 0, 1>, 0, false);
            run("REGU3", q4k_reg<0, 0, 3>, 0, false);
            run("REGU4", q4k_reg<0, 0, 4>, 0, false);
        }
        // HINTS=1: only the register form and its load qualifiers, three rounds.
        for (int round = 0; getenv("HINTS") && round < 3; round++) {
            run("REG", q4k_reg<>, 0, false);
            run("REGH1-noalloc", q4k_reg<1>, 0, false);
            run("REGH2-256B", q4k_reg<2>, 0, false);
            run("REGH3-noalloc-256B", q4k_reg<3>, 0, false);
            run("REGH4-noalloc-evictfirst", q4k_reg<4>, 0, false);
            run("REGM6", q4k_reg<0, 6>, 0, false);
            run("REGM7", q4k_reg<0, 7>, 0, false);
            run("REGM8", q4k_reg<0, 8>, 0, false);
        }
        for (int round = 0; !getenv("HINTS") && !getenv("WAVES") && !getenv("DEPTH") && !getenv("PDL") && !getenv("ROLLC") && !getenv("MMA") && !getenv("STAGED") && !getenv("BULK") && !getenv("SWEEP") && !getenv("WAIT") && !getenv("HALF") && round < 2; round++) {
            run("REG", q4k_reg<>, 0, false);
            run("CP2", q4k_cp<2, false, false>, 2 * 64, false);
            run("CPH2", q4k_cp<2, false, true>, 2 * 36, false);
            run("CPH4", q4k_cp<4, false, true>, 4 * 36, false);
            run("CPHP3", q4k_cp<3, true, true>, 3 * 36, true);
            run("CPHP6", q4k_cp<6, true, true>, 6 * 36, true);
            // (`slot16` is a warp's share: a block's ring over its eight warps.)
            int act16 = blocks * 324 / 16;
            run("BULK2", q4k_bulk<2, false>, 2 * STAGE_BYTES / 16 / 8, true);
            run("BULK3", q4k_bulk<3, false>, 3 * STAGE_BYTES / 16 / 8, true);
            run("BULK8", q4k_bulk<8, false>, 8 * STAGE_BYTES / 16 / 8, true);
            run("BULKA2", q4k_bulk<2, true>, (2 * STAGE_BYTES / 16 + act16 + 7) / 8, true);
            run("BULKA3", q4k_bulk<3, true>, (3 * STAGE_BYTES / 16 + act16 + 7) / 8, true);
            run("REG64x1", q4k_reg64<1>, 0, false);
            run("REG64x2", q4k_reg64<2>, 0, false);
            run("ROLL2", q4k_roll<2, false>, 0, false);
            run("ROLL3", q4k_roll<3, false>, 0, false);
            run("ROLL4", q4k_roll<4, false>, 0, false);
            run("ROLLP2", q4k_roll<2, true>, 0, true);
            run("ROLLP3", q4k_roll<3, true>, 0, true);
            run("ROLLP4", q4k_roll<4, true>, 0, true);
        }
    }
    printf("{\"err\":\"%s\"}\n", cudaGetErrorString(cudaGetLastError()));
}
