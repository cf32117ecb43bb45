// One Q8_K activation vector against Q8_0 weights, four ways of getting the bytes to the
// lanes, on the lent GPU. Why: Nsight Compute (H200, session 64) found trueno's Q8_0
// kernel (`trueno_qgemv_q8_0_q8k_late`) with its L1 87-89% busy at 14336x4096 and 71% at
// 4096x4096 at ncu's locked clock: each lane loads its own 34-byte block in nine 4-byte
// words, so one warp load touches ~29 sectors over nine lines, and every sector is asked
// for nine times. Forms:
//
//   LANE   trueno's: warp per row, lane l takes block 32s + l of step s, nine 32-bit loads
//          from the word boundary at or before it, four steps' loads before any math.
//   LANEP  the same with each pass's activations asked into L1 after the wait.
//   STAGE  the warp's pass (four steps, 4352 bytes) loaded as 16-byte chunks, chunk
//          lane + 32i (whole lines a load), stored to the warp's shared memory; then each
//          lane reads its blocks' nine words there.
//   ASYNC  the same chunks by `cp.async` straight into shared memory (no registers), at
//          four or six blocks a multiprocessor.
//
// Each pass's weights leave before the wait for the previous grid (overlapped launches),
// the activations after it, as in trueno. Not part of trueno (which generates its own
// PTX): a probe of the hardware, built with the device machine's nvcc.
//
//   cd scripts && nvcc -O3 -arch=sm_90 -o /tmp/q8 qgemv_q8_0_forms.cu && /tmp/q8 [ROWS COLS]...
//
// Prints one JSON line per shape and form (µs a call in a graph of overlapped launches).
#include <cuda_fp16.h>

#include "qgemv_probe_common.cuh"

constexpr int BLK = 34;                // bytes of a Q8_0 block (f16 scale, 32 quants)
constexpr int STEPS = 4;               // steps a pass: 4 x 32 blocks
constexpr int PASS_BYTES = STEPS * 32 * BLK;  // 4352, a multiple of 16
constexpr int CHUNKS = PASS_BYTES / 16;       // 272

__device__ __forceinline__ float half_bits(uint32_t h) {
    return __half2float(__ushort_as_half((unsigned short)(h & 0xFFFF)));
}

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
    uint32_t r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
    return r;
}

// A block's share: its nine words `w` (from the word boundary at or before it; `odd`
// blocks start two bytes past one) against its 32 activation quants, scaled.
__device__ __forceinline__ float block_part(const uint32_t (&w)[9], bool odd, const int8_t* aq, const float* ad, int gb) {
    uint32_t sel = odd ? 0x7654u : 0x5432u;
    float d = half_bits(odd ? w[0] >> 16 : w[0]);
    const int4* a = (const int4*)(aq + 32 * (size_t)gb);
    int4 a0 = a[0], a1 = a[1];
    int av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
    int dot = 0;
#pragma unroll
    for (int k = 0; k < 8; k++) dot = __dp4a((int)prmt(w[k], w[k + 1], sel), av[k], dot);
    return ad[gb / 8] * d * (float)dot;
}

// LANE: trueno's loads. PF (`LANEP`): each pass's activations (the same for every row)
// asked into L1 by `prefetch.global.L1` once its weights are asked for and the previous
// grid is waited for, a line a lane, so the first warps of a multiprocessor do not wait
// on L2 for them after their weights arrive; no registers held.
template <bool PF>
__global__ void __launch_bounds__(THREADS, 4) q8_lane(const uint8_t* w, const int8_t* aq, const float* ad, float* y, int rows, int nblk) {
    asm volatile("griddepcontrol.launch_dependents;");
    int lane = threadIdx.x & 31, row = blockIdx.x * (THREADS / 32) + (threadIdx.x >> 5);
    if (row >= rows) return;
    const uint8_t* wr = w + (size_t)row * nblk * BLK;
    float acc = 0.f;
    for (int base = 0, pass = 0; base < nblk; base += 32 * STEPS, pass++) {
        uint32_t wv[STEPS][9];
#pragma unroll
        for (int s = 0; s < STEPS; s++) {
            int b = min(base + 32 * s + lane, nblk - 1);
            const uint32_t* p = (const uint32_t*)(wr + BLK * b - 2 * (b & 1));
#pragma unroll
            for (int k = 0; k < 9; k++) wv[s][k] = p[k];
        }
        if (pass == 0) asm volatile("griddepcontrol.wait;" ::: "memory");
        if (PF) {
            // 128 blocks' quants are 4096 bytes: 32 lines; their scales one more.
            if (32 * base + 128 * lane < 32 * nblk) asm volatile("prefetch.global.L1 [%0];" ::"l"(aq + 32 * (size_t)base + 128 * lane));
            if (lane == 0) asm volatile("prefetch.global.L1 [%0];" ::"l"(ad + base / 8));
        }
#pragma unroll
        for (int s = 0; s < STEPS; s++) {
            int b = base + 32 * s + lane;
            if (b < nblk) acc += block_part(wv[s], b & 1, aq, ad, b);
        }
    }
    store_row(acc, y, row, lane);
}

// STAGE and ASYNC: the pass's chunks into the warp's shared memory, by registers or by
// `cp.async`, then each lane's blocks from there.
template <bool ASYNC, int MINB>
__global__ void __launch_bounds__(THREADS, MINB) q8_staged(const uint8_t* w, const int8_t* aq, const float* ad, float* y, int rows, int nblk) {
    extern __shared__ __align__(16) uint8_t smem[];
    asm volatile("griddepcontrol.launch_dependents;");
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, row = blockIdx.x * (THREADS / 32) + warp;
    if (row >= rows) return;
    uint8_t* buf = smem + warp * (PASS_BYTES + 16);
    const uint8_t* wr = w + (size_t)row * nblk * BLK;
    float acc = 0.f;
    for (int base = 0, pass = 0; base < nblk; base += 32 * STEPS, pass++) {
        int n = min(32 * STEPS, nblk - base), chunks = n * BLK / 16;  // whole chunks: n is a multiple of 8
        const uint8_t* src = wr + (size_t)base * BLK;
        if (ASYNC) {
#pragma unroll
            for (int i = 0; i < (CHUNKS + 31) / 32; i++) {
                int c = lane + 32 * i;
                if (c < chunks)
                    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem32(buf + 16 * c)), "l"(src + 16 * c) : "memory");
            }
            asm volatile("cp.async.commit_group;" ::: "memory");
            if (pass == 0) asm volatile("griddepcontrol.wait;" ::: "memory");
            asm volatile("cp.async.wait_group 0;" ::: "memory");
        } else {
            uint4 v[(CHUNKS + 31) / 32];
#pragma unroll
            for (int i = 0; i < (CHUNKS + 31) / 32; i++) {
                int c = lane + 32 * i;
                if (c < chunks) v[i] = *(const uint4*)(src + 16 * c);
            }
            if (pass == 0) asm volatile("griddepcontrol.wait;" ::: "memory");
#pragma unroll
            for (int i = 0; i < (CHUNKS + 31) / 32; i++) {
                int c = lane + 32 * i;
                if (c < chunks) *(uint4*)(buf + 16 * c) = v[i];
            }
        }
        __syncwarp();
#pragma unroll
        for (int s = 0; s < STEPS; s++) {
            int b = 32 * s + lane;
            if (b < n) {
                const uint32_t* p = (const uint32_t*)(buf + BLK * b - 2 * (b & 1));
                uint32_t wv[9];
#pragma unroll
                for (int k = 0; k < 9; k++) wv[k] = p[k];
                acc += block_part(wv, b & 1, aq, ad, base + b);
            }
        }
        __syncwarp();
    }
    store_row(acc, y, row, lane);
}

// The CPU reference: GGML's Q8_0 block against the Q8_K quants, in double.
static float ref_row(const uint8_t* w, const int8_t* aq, const float* ad, int row, int sblocks) {
    int nblk = sblocks * 8;
    const uint8_t* r = w + (size_t)row * nblk * BLK;
    double sum = 0;
    for (int b = 0; b < nblk; b++) {
        const uint8_t* blk = r + b * BLK;
        double d = h2f((uint16_t)(blk[0] | blk[1] << 8));
        long dot = 0;
        for (int e = 0; e < 32; e++) dot += (long)(int8_t)blk[2 + e] * aq[32 * b + e];
        sum += d * ad[b / 8] * (double)dot;
    }
    return (float)sum;
}

int main(int argc, char** argv) {
    cudaStream_t s;
    cudaStreamCreate(&s);
    print_copy_rate(s);
    Lcg rnd;
    for (auto shape : probe_shapes(argc, argv)) {
        int rows = shape[0], cols = shape[1];
        int nblk = cols / 32, sblocks = cols / 256;
        std::vector<uint8_t> hw((size_t)rows * nblk * BLK);
        for (size_t b = 0; b < (size_t)rows * nblk; b++) {
            uint16_t d = f2h(0.001f * (1 + rnd() % 50));
            hw[b * BLK] = d & 255;
            hw[b * BLK + 1] = d >> 8;
            for (int e = 0; e < 32; e++) hw[b * BLK + 2 + e] = (uint8_t)(rnd() % 255 - 127);
        }
        const int calls = 20;
        ProbeData p(hw, rows, sblocks, calls, rnd);
        p.reference(hw, ref_row);
        int grid = (rows + THREADS / 32 - 1) / (THREADS / 32);
        size_t smem = (THREADS / 32) * (PASS_BYTES + 16);
        auto run = [&](const char* name, auto kernel, size_t sm) {
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm);
            cudaFuncAttributes fa;
            cudaFuncGetAttributes(&fa, kernel);
            int per_sm = 0;
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, THREADS, sm);
            launch(s, false, kernel, dim3(grid), dim3(THREADS), sm, (const uint8_t*)p.ws[0], p.act.q, p.act.d, p.y, rows, nblk);
            cudaStreamSynchronize(s);
            double err = p.max_rel_err();
            double us = graph_us(s, calls, [&](int i) {
                launch(s, true, kernel, dim3(grid), dim3(THREADS), sm, (const uint8_t*)p.ws[i % p.ws.size()], p.act.q, p.act.d, p.y, rows, nblk);
            });
            print_form(p, cols, name, fa.numRegs, per_sm, grid, us, err);
        };
        for (int round = 0; round < 2; round++) {
            run("LANE", q8_lane<false>, 0);
            run("LANEP", q8_lane<true>, 0);
            run("STAGE", q8_staged<false, 4>, smem);
            run("ASYNC", q8_staged<true, 4>, smem);
            run("ASYNC6", q8_staged<true, 6>, smem);
        }
    }
    printf("err: %s\n", cudaGetErrorString(cudaGetLastError()));
}
