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
#include <cstdint>
#include "stream_read_common.cuh"

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

int main() {
    cudaStream_t s;
    cudaStreamCreate(&s);
    float* out;
    cudaMalloc(&out, 1 << 24);
    int sms;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    const int copies = 32;
    print_copy_rate(s);
    for (auto k : {rd_smem<0>, rd_smem<1>, rd_smem<2>})
        cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
    for (size_t bytes : {9437184ul, 13784128ul, 17825792ul, 33030144ul}) {
        auto bufs = buffers(bytes);
        size_t n16 = bytes / 16;
        dim3 reg_shape(sms * 2048 / 256, 256);
        auto reg = [&](bool pdl, auto kernel) {
            return chain_us<const uint4*>(s, copies, bufs, pdl, kernel, reg_shape, 0, n16, out);
        };
        float plain = reg(false, rd_reg<0, 0>), early2 = reg(true, rd_reg<2, 2>);
        printf("{\"bytes\":%zu,\"reg_plain\":%.3f,\"reg_early2\":%.3f}\n", bytes, plain, early2);
        for (int per_sm : {1, 2, 3, 4, 6}) {
            for (int threads : {128, 256}) {
                int blocks = sms * per_sm;
                size_t share = (bytes + blocks - 1) / blocks;
                share = (share + 16 * CHUNKS - 1) / (16 * CHUNKS) * (16 * CHUNKS);
                if (share > 200 * 1024) continue;
                auto staged = [&](bool pdl, auto kernel) {
                    return chain_us<const char*>(s, copies, bufs, pdl, kernel, dim3(blocks, threads),
                                                 share, bytes, share, out);
                };
                float t0 = staged(false, rd_smem<0>), t1 = staged(true, rd_smem<1>);
                float t2 = staged(true, rd_smem<2>);
                float best = t0 < t1 ? (t0 < t2 ? t0 : t2) : (t1 < t2 ? t1 : t2);
                printf("{\"bytes\":%zu,\"blocks_per_sm\":%d,\"threads\":%d,\"share\":%zu,\"smem_plain\":%.3f,\"smem_wait_first\":%.3f,\"smem_copies_first\":%.3f,\"gbps_best\":%.1f}\n",
                       bytes, per_sm, threads, share, t0, t1, t2, bytes / (1e3 * best));
            }
        }
        for (auto b : bufs) cudaFree(b);
    }
    printf("err: %s\n", cudaGetErrorString(cudaGetLastError()));
}
