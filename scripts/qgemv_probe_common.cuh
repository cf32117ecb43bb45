// What the quantized-GEMV probes share (qgemv_q4k_forms.cu, qgemv_q6k_mma_forms.cu,
// qgemv_q8_0_forms.cu): Q8_K activations, weight sets that miss L2, the copy rate, a
// form checked against the CPU reference and timed in a CUDA graph. Not part of trueno
// (which generates its own PTX): probes of the hardware, built with the device machine's
// nvcc.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <vector>

#include "stream_read_common.cuh"

// The shapes a probe runs: `PROBE ROWS COLS [ROWS COLS]...` (one, for a profiler), else
// issue 9's four.
static std::vector<std::array<int, 2>> probe_shapes(int argc, char** argv) {
    std::vector<std::array<int, 2>> shapes = {{14336, 4096}, {4096, 14336}, {32000, 4096}, {4096, 4096}};
    if (argc > 2) shapes.clear();
    for (int i = 1; i + 1 < argc; i += 2) shapes.push_back({atoi(argv[i]), atoi(argv[i + 1])});
    return shapes;
}

// Threads a block, in every form of both probes.
constexpr int THREADS = 256;

struct Act {
    const int8_t* q;     // 256 quants a super-block
    const float* d;      // one scale a super-block
    const int32_t* s16;  // sums of 16: 16 a super-block
};

// The one-vector tensor-core forms' product: `c += A B` on `mma.m16n8k32` with unsigned
// weight bytes (A) and signed activation bytes (B).
__device__ __forceinline__ void mma_u8s8(int (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// The copy engine's forms (qgemv_q6k_bulk_forms.cuh, qgemv_q4k_staged_forms.cuh): a
// shared address, `bytes` from global memory into shared by one `cp.async.bulk` counted on
// barrier `bar` (its phase told to expect them), and a wait for a barrier's phase.
__device__ __forceinline__ uint32_t smem32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void bulk_into(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst), "l"(src), "r"(bytes),
                 "r"(bar)
                 : "memory");
}

__device__ __forceinline__ void bar_wait(uint32_t bar, uint32_t parity) {
    uint32_t done = 0;
    while (!done)
        asm volatile("{ .reg .pred q; mbarrier.try_wait.parity.shared::cta.b64 q, [%1], %2; selp.u32 %0, 1, 0, q; }"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
}

// Dynamic shared bytes of the copy engine's forms: S stages of a `blocks`-super-block
// row's 16-row tiles of `bb`-byte super-blocks; and whether `minb` blocks of them (with
// a block's ~2 KB of static shared memory) fit a multiprocessor's 227 KB.
inline size_t ring_smem(int S, int blocks, int bb) { return (size_t)S * 16 * blocks * bb; }
inline bool ring_fits(size_t smem, int minb) { return (smem + 2048) * minb <= 227 * 1024; }

// The staged forms' chunk map: chunk lane + 32i (i < N) of a warp's step is tile row
// c / CHUNKS (past the last: the last) and 16-byte chunk c % CHUNKS of it, as a byte
// offset from the tile's first row (c capped at the step's last chunk).
template <int CHUNKS, int N>
__device__ __forceinline__ void tile_chunks(uint32_t (&src)[N], int lane, int tile, int rows, uint32_t row_bytes) {
#pragma unroll
    for (int i = 0; i < N; i++) {
        int c = min(lane + 32 * i, 16 * CHUNKS - 1), r = min(tile * 16 + c / CHUNKS, rows - 1) - tile * 16;
        src[i] = (uint32_t)r * row_bytes + 16 * (c % CHUNKS);
    }
}

// A warp's row sum: its lanes' parts added across the warp, lane 0 storing y[row]
// (the register forms of both probes, qgemv_q4k_forms.cu and qgemv_q8_0_forms.cu).
__device__ __forceinline__ void store_row(float acc, float* y, int row, int lane) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) y[row] = acc;
}

// The one-vector tensor-core forms' end: rows g and g + 8 summed over the four lanes t (their sub-block
// pairs), then over the tile's W warps in shared memory, into y (blocks of NT threads, the first of
// their NT / 32 / W tiles `first_tile`).
template <int W, int NT = THREADS>
__device__ __forceinline__ void store_tile_from(float (*part)[16], float acc0, float acc1, float* y, int rows, int first_tile) {
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    acc0 += __shfl_xor_sync(0xffffffffu, acc0, 1);
    acc0 += __shfl_xor_sync(0xffffffffu, acc0, 2);
    acc1 += __shfl_xor_sync(0xffffffffu, acc1, 1);
    acc1 += __shfl_xor_sync(0xffffffffu, acc1, 2);
    if (t == 0) {
        part[warp][g] = acc0;
        part[warp][g + 8] = acc1;
    }
    __syncthreads();
    int i = threadIdx.x;
    if (i < 16 * (NT / 32 / W)) {
        int lt = i / 16, r = i % 16;
        float sum = 0.f;
#pragma unroll
        for (int k = 0; k < W; k++) sum += part[lt * W + k][r];
        int row = (first_tile + lt) * 16 + r;
        if (row < rows) y[row] = sum;
    }
}

// `store_tile_from` for the block's own tiles.
template <int W, int NT = THREADS>
__device__ __forceinline__ void store_tile(float (*part)[16], float acc0, float acc1, float* y, int rows) {
    store_tile_from<W, NT>(part, acc0, acc1, y, rows, blockIdx.x * (NT / 32 / W));
}

// The copy engine's forms' persistent block (Q4_K's MMA1B, Q6_K's MMA6B): its 16-row
// tiles b, b + grid, ... copied whole (contiguous rows of `row_bytes`) by thread 0 into a
// ring of S stages of shared memory `stg`, one transaction barrier `full[s]` a stage,
// the first S before the wait for the previous grid (weights are never a kernel's
// output); `tile(st, last, acc0, acc1)` runs a tile's products from its stage `st` (its
// rows past `last` repeat it); the tile's sums meet in `part` (two buffers in turn), after
// which every warp is done with the stage and thread 0 refills it with the tile S on.
template <int S, class Tile>
__device__ __forceinline__ void bulk_ring(const uint8_t* w, float* y, int rows, uint32_t row_bytes, uint8_t* stg, uint64_t* full,
                                          float (*part)[THREADS / 32][16], Tile tile) {
    uint32_t tile_bytes = 16 * row_bytes;
    int ntiles = (rows + 15) / 16;
    int mine = ((int)blockIdx.x < ntiles) ? (ntiles - 1 - (int)blockIdx.x) / (int)gridDim.x + 1 : 0;
    uint32_t st0 = smem32(stg), bar0 = smem32(full);
    auto fill = [&](int i) {
        int t = (int)blockIdx.x + i * (int)gridDim.x, n = min(16, rows - 16 * t);
        bulk_into(st0 + (i % S) * tile_bytes, w + (size_t)t * tile_bytes, (uint32_t)n * row_bytes, bar0 + 8 * (i % S));
    };
    if (threadIdx.x == 0) {
        for (int i = 0; i < S; i++) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar0 + 8 * i));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        for (int i = 0; i < S && i < mine; i++) fill(i);
    }
    __syncthreads();
    asm volatile("griddepcontrol.wait;" ::: "memory");
    for (int i = 0; i < mine; i++) {
        int t = (int)blockIdx.x + i * (int)gridDim.x;
        bar_wait(bar0 + 8 * (i % S), (i / S) & 1);
        float acc0 = 0.f, acc1 = 0.f;
        tile(stg + (size_t)(i % S) * tile_bytes, min(15, rows - 1 - 16 * t), acc0, acc1);
        store_tile_from<8>(part[i & 1], acc0, acc1, y, rows, t);
        if (threadIdx.x == 0 && i + S < mine) {
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            fill(i + S);
        }
    }
}

// IEEE half <-> float on the host (normal values only: the probes' scales are).
static float h2f(uint16_t h) {
    uint32_t e = (h >> 10) & 31, m = h & 1023, sgn = (uint32_t)(h >> 15) << 31;
    uint32_t bits = e == 0 ? sgn : sgn | ((e + 112) << 23) | (m << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
static uint16_t f2h(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    int e = (int)((b >> 23) & 255) - 112;
    if (e <= 0) return 0;
    return (uint16_t)(((b >> 16) & 0x8000) | (e << 10) | ((b >> 13) & 1023));
}

// The probes' random numbers (one stream: weights, then activations).
struct Lcg {
    uint32_t st = 12345;
    uint32_t operator()() {
        st = st * 1664525u + 1013904223u;
        return st >> 8;
    }
};

// One shape's data on the device: weight sets copied from `hw` (enough that a call never
// finds its weights in L2, 50 MB: four, or as many as 160 MB takes, at most `calls`),
// random Q8_K activations of `blocks` super-blocks (host copies kept for the reference),
// the output, and the rows checked (the first 64, then 64 spread over the matrix).
struct ProbeData {
    int rows, blocks;
    size_t wbytes;
    std::vector<uint8_t*> ws;
    std::vector<int8_t> haq;
    std::vector<float> had;
    std::vector<int32_t> hs;
    Act act{};
    float* y = nullptr;
    std::vector<int> chk;
    std::vector<float> ref;

    ProbeData(const std::vector<uint8_t>& hw, int rows_, int blocks_, int calls, Lcg& rnd)
        : rows(rows_), blocks(blocks_), wbytes(hw.size()), haq((size_t)blocks_ * 256), had(blocks_), hs((size_t)blocks_ * 16), chk(128) {
        for (auto& v : haq) v = (int8_t)(rnd() % 255 - 127);
        for (auto& v : had) v = 0.01f * (1 + rnd() % 10);
        for (int i = 0; i < blocks * 16; i++) {
            int t = 0;
            for (int e = 0; e < 16; e++) t += haq[i * 16 + e];
            hs[i] = t;
        }
        int sets = std::min(calls, std::max(4, (int)((160e6 + wbytes - 1) / wbytes)));
        ws.resize(sets);
        for (auto& p : ws) {
            cudaMalloc(&p, wbytes + 256);  // slack: the staged forms copy whole 16-byte chunks past the last block
            cudaMemcpy(p, hw.data(), wbytes, cudaMemcpyHostToDevice);
        }
        int8_t* aq;
        float* ad;
        int32_t* as;
        cudaMalloc(&aq, haq.size());
        cudaMalloc(&ad, blocks * 4);
        cudaMalloc(&as, hs.size() * 4);
        cudaMalloc(&y, rows * 4);
        cudaMemcpy(aq, haq.data(), haq.size(), cudaMemcpyHostToDevice);
        cudaMemcpy(ad, had.data(), blocks * 4, cudaMemcpyHostToDevice);
        cudaMemcpy(as, hs.data(), hs.size() * 4, cudaMemcpyHostToDevice);
        act = Act{aq, ad, as};
        for (int r = 0; r < 128; r++) chk[r] = r < 64 ? r : (int)((long long)(r - 64) * rows / 64 + 37) % rows;
    }

    // `ref_row(w, aq, ad, row, blocks)` for every checked row.
    template <typename R>
    void reference(const std::vector<uint8_t>& hw, R ref_row) {
        ref.resize(128);
        for (int r = 0; r < 128; r++) ref[r] = ref_row(hw.data(), haq.data(), had.data(), chk[r], blocks);
    }

    // The largest relative difference from the reference over the checked rows.
    double max_rel_err() const {
        std::vector<float> hy(rows);
        cudaMemcpy(hy.data(), y, rows * 4, cudaMemcpyDeviceToHost);
        double err = 0;
        for (int r = 0; r < 128; r++) err = std::max(err, (double)fabsf(hy[chk[r]] - ref[r]) / (fabsf(ref[r]) + 1e-3));
        return err;
    }

    ~ProbeData() {
        for (auto p : ws) cudaFree(p);
        cudaFree((void*)act.q);
        cudaFree((void*)act.d);
        cudaFree((void*)act.s16);
        cudaFree(y);
    }
};

// µs a call of `calls` launches `launch_i(i)` captured in a CUDA graph on `s`: three
// replays to warm up, then the fastest of 15.
template <typename F>
double graph_us(cudaStream_t s, int calls, F launch_i) {
    cudaGraph_t gr;
    cudaGraphExec_t ge;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    for (int i = 0; i < calls; i++) launch_i(i);
    cudaStreamEndCapture(s, &gr);
    cudaGraphInstantiate(&ge, gr, 0);
    for (int i = 0; i < 3; i++) cudaGraphLaunch(ge, s);
    float best = best_ms(s, 15, [&] { cudaGraphLaunch(ge, s); });
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(gr);
    return best * 1000.0 / calls;
}

// The JSON line of one shape and form.
static void print_form(const ProbeData& p, int cols, const char* name, int regs, int per_sm, int grid, double us, double err) {
    printf("{\"shape\":\"%dx%d\",\"form\":\"%s\",\"regs\":%d,\"blocks_per_sm\":%d,\"grid\":%d,\"us\":%.3f,\"GBps\":%.0f,\"max_rel_err\":%.2e}\n",
           p.rows, cols, name, regs, per_sm, grid, us, p.wbytes / us / 1e3, err);
}
