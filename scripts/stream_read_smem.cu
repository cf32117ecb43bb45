// Can a bandwidth-bound kernel of 9-18 MB in a chain of overlapped launches (programmatic
// dependent launch) read at the copy rate, if each block asks the copy engine for its whole
// share of the bytes into shared memory before its `griddepcontrol.wait`? A block's share
// is contiguous; thread 0 issues it as `cp.async.bulk` copies of a few chunks (one
// mbarrier each), then the block waits for the previous grid, then reads the chunks from
// shared memory as they land. With k blocks a multiprocessor and a share small enough that
// the next grid's blocks fit beside them, the next call's bytes are in flight while this
// one drains. 32 calls captured in a CUDA graph over 8 buffers in turn (so nothing is
// served from L2), µs a call, best of 15 replays; register-load reads (plain, and with two
// loads a thread before the wait, as `stream_read_overlap.cu`) and a device-to-device
// copy of 1 GiB in the same run. Not part of trueno (which generates its own PTX): a probe
// of the hardware, built with the device machine's nvcc.
//
//   nvcc -O3 -arch=sm_90 -o stream_read_smem scripts/stream_read_smem.cu && ./stream_read_smem
//
// Prints one JSON line per size and layout. On an H200 (2026-11-28, BENCHMARKS.md, "On an
// H200"): 9.4 MB in 2.26 µs a call with bulk copies before the wait against 3.34 µs for
// register loads, two before it; trueno's staged integer product built on it was slower
// than its register-load kernel (its arithmetic waits for the previous call), not kept.
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>
#include <vector>

constexpr int CHUNKS = 4;

// MODE 0: no overlap. 1: overlapped, wait before the copies. 2: copies before the wait.
template <int MODE>
__global__ void rd_smem(const char* __restrict__ src, size_t bytes, size_t share, float* out) {
    extern __shared__ __align__(128) char sm[];
    __shared__ __align__(8) uint64_t bar[CHUNKS];
    if (MODE >= 1) asm volatile("griddepcontrol.launch_dependents;");
    size_t begin = blockIdx.x * share;
    size_t mine = begin < bytes ? (bytes - begin < share ? bytes - begin : share) : 0;
    size_t chunk = share / CHUNKS;
    unsigned b0 = (unsigned)__cvta_generic_to_shared(bar);
    unsigned s0 = (unsigned)__cvta_generic_to_shared(sm);
    if (threadIdx.x == 0) {
        for (int c = 0; c < CHUNKS; c++)
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(b0 + 8 * c));
        asm volatile("fence.proxy.async.shared::cta;");
    }
    __syncthreads();
    if (MODE == 1) asm volatile("griddepcontrol.wait;" ::: "memory");
    if (threadIdx.x == 0) {
        for (int c = 0; c < CHUNKS; c++) {
            size_t off = c * chunk;
            unsigned n = off < mine ? (unsigned)(mine - off < chunk ? mine - off : chunk) : 0;
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b0 + 8 * c), "r"(n) : "memory");
            if (n)
                asm volatile(
                    "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                        s0 + (unsigned)off),
                    "l"(src + begin + off), "r"(n), "r"(b0 + 8 * c)
                    : "memory");
        }
    }
    if (MODE == 2) asm volatile("griddepcontrol.wait;" ::: "memory");
    unsigned acc = 0;
    for (int c = 0; c < CHUNKS; c++) {
        unsigned done = 0;
        while (!done)
            asm volatile(
                "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
                : "=r"(done)
                : "r"(b0 + 8 * c)
                : "memory");
        size_t off = c * chunk;
        size_t n = off < mine ? (mine - off < chunk ? mine - off : chunk) : 0;
        const uint4* p = (const uint4*)(sm + off);
        for (size_t i = threadIdx.x; i < n / 16; i += blockDim.x) {
            uint4 v = p[i];
            acc ^= v.x ^ v.y ^ v.z ^ v.w;
        }
    }
    if (acc == 0x12345678u) out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
    if (blockIdx.x == 0 && threadIdx.x == 0) out[0] = 1.0f;
}

template <int MODE, int EARLY>
__global__ void rd_reg(const uint4* __restrict__ src, size_t n16, float* out) {
    size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    unsigned acc = 0;
    uint4 e[EARLY > 0 ? EARLY : 1];
    if (MODE >= 1) asm volatile("griddepcontrol.launch_dependents;");
    size_t i = tid;
    if (MODE == 2) {
#pragma unroll
        for (int k = 0; k < EARLY; k++) {
            size_t j = tid + k * stride;
            e[k] = j < n16 ? src[j] : make_uint4(0, 0, 0, 0);
        }
        i = tid + EARLY * stride;
    }
    if (MODE >= 1) asm volatile("griddepcontrol.wait;" ::: "memory");
    if (MODE == 2) {
#pragma unroll
        for (int k = 0; k < EARLY; k++) acc ^= e[k].x ^ e[k].y ^ e[k].z ^ e[k].w;
    }
    for (; i < n16; i += stride) {
        uint4 v = src[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x12345678u) out[tid] = acc;
    if (tid == 0) out[0] = 1.0f;
}

template <typename F>
float timed(cudaStream_t s, F launch_all, int copies) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    launch_all();
    cudaStreamEndCapture(s, &g);
    if (cudaGraphInstantiate(&ge, g, 0)) {
        printf("inst fail %s\n", cudaGetErrorString(cudaGetLastError()));
        return -1;
    }
    for (int w = 0; w < 3; w++) cudaGraphLaunch(ge, s);
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    float best = 1e9;
    for (int r = 0; r < 15; r++) {
        cudaEventRecord(a, s);
        cudaGraphLaunch(ge, s);
        cudaEventRecord(b, s);
        cudaEventSynchronize(b);
        float ms;
        cudaEventElapsedTime(&ms, a, b);
        if (ms < best) best = ms;
    }
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    return best * 1000.0f / copies;
}

template <typename K, typename... Args>
void launch(cudaStream_t s, bool pdl, K kernel, int blocks, int threads, size_t smem, Args... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = blocks;
    cfg.blockDim = threads;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = pdl ? 1 : 0;
    cudaLaunchKernelEx(&cfg, kernel, args...);
}

int main() {
    cudaStream_t s;
    cudaStreamCreate(&s);
    float* out;
    cudaMalloc(&out, 1 << 24);
    int sms;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    const int copies = 32;
    {
        size_t big = 1ull << 30;
        char *a, *b;
        cudaMalloc(&a, big);
        cudaMalloc(&b, big);
        cudaMemset(a, 1, big);
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0);
        cudaEventCreate(&e1);
        float best = 1e9;
        for (int r = 0; r < 10; r++) {
            cudaEventRecord(e0, s);
            cudaMemcpyAsync(b, a, big, cudaMemcpyDeviceToDevice, s);
            cudaEventRecord(e1, s);
            cudaEventSynchronize(e1);
            float ms;
            cudaEventElapsedTime(&ms, e0, e1);
            if (ms < best) best = ms;
        }
        printf("{\"copy_gbps\":%.1f}\n", 2.0 * big / (best * 1e6));
        cudaFree(a);
        cudaFree(b);
    }
    for (auto k : {rd_smem<0>, rd_smem<1>, rd_smem<2>})
        cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
    for (size_t bytes : {9437184ul, 13784128ul, 17825792ul, 33030144ul}) {
        std::vector<char*> bufs(8);
        for (auto& b : bufs) {
            cudaMalloc(&b, bytes);
            cudaMemset(b, 1, bytes);
        }
        size_t n16 = bytes / 16;
        int rthreads = 256, rblocks = sms * 2048 / rthreads;
        float plain = timed(s, [&] { for (int i = 0; i < copies; i++) launch(s, false, rd_reg<0, 0>, rblocks, rthreads, 0, (const uint4*)bufs[i % 8], n16, out); }, copies);
        float early2 = timed(s, [&] { for (int i = 0; i < copies; i++) launch(s, true, rd_reg<2, 2>, rblocks, rthreads, 0, (const uint4*)bufs[i % 8], n16, out); }, copies);
        printf("{\"bytes\":%zu,\"reg_plain\":%.3f,\"reg_early2\":%.3f}\n", bytes, plain, early2);
        for (int per_sm : {1, 2, 3, 4, 6}) {
            for (int threads : {128, 256}) {
                int blocks = sms * per_sm;
                size_t share = (bytes + blocks - 1) / blocks;
                share = (share + 16 * CHUNKS - 1) / (16 * CHUNKS) * (16 * CHUNKS);
                if (share > 200 * 1024) continue;
                float t0 = timed(s, [&] { for (int i = 0; i < copies; i++) launch(s, false, rd_smem<0>, blocks, threads, share, (const char*)bufs[i % 8], bytes, share, out); }, copies);
                float t1 = timed(s, [&] { for (int i = 0; i < copies; i++) launch(s, true, rd_smem<1>, blocks, threads, share, (const char*)bufs[i % 8], bytes, share, out); }, copies);
                float t2 = timed(s, [&] { for (int i = 0; i < copies; i++) launch(s, true, rd_smem<2>, blocks, threads, share, (const char*)bufs[i % 8], bytes, share, out); }, copies);
                printf("{\"bytes\":%zu,\"blocks_per_sm\":%d,\"threads\":%d,\"share\":%zu,\"smem_plain\":%.3f,\"smem_wait_first\":%.3f,\"smem_copies_first\":%.3f,\"gbps_best\":%.1f}\n",
                       bytes, per_sm, threads, share, t0, t1, t2, bytes / (1e3 * (t2 < t1 ? (t2 < t0 ? t2 : t0) : (t1 < t0 ? t1 : t0))));
            }
        }
        for (auto b : bufs) cudaFree(b);
    }
    printf("err: %s\n", cudaGetErrorString(cudaGetLastError()));
}
