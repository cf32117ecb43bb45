// What the streaming-read probes share (stream_read_overlap.cu, stream_read_smem.cu;
// qgemv_q4k_forms.cu its launch and timing): the register-load read and a chain of
// launches timed in a CUDA graph. Not part of
// trueno (which generates its own PTX): probes of the hardware, built with the device
// machine's nvcc.
#pragma once
#include <cstdio>
#include <cuda_runtime.h>
#include <vector>

// A plain 16-byte streaming read (grid-stride). MODE 0: no overlap; 1: overlapped
// (programmatic dependent launch), the wait first; 2: overlapped, each thread's first
// EARLY loads issued before its `griddepcontrol.wait`.
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

// The fastest of `reps` runs of `work` on `s`, ms between CUDA events.
template <typename F>
float best_ms(cudaStream_t s, int reps, F work) {
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    float best = 1e9;
    for (int r = 0; r < reps; r++) {
        cudaEventRecord(a, s);
        work();
        cudaEventRecord(b, s);
        cudaEventSynchronize(b);
        float ms;
        cudaEventElapsedTime(&ms, a, b);
        if (ms < best) best = ms;
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return best;
}

// Launches `kernel` on `s` (`grid` blocks of `block` threads, `smem` dynamic bytes), with
// the programmatic-serialization attribute where `pdl` (it may then overlap the stream's
// previous kernel up to its `griddepcontrol.wait`).
template <typename K, typename... Args>
void launch(cudaStream_t s, bool pdl, K kernel, dim3 grid, dim3 block, size_t smem, Args... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = pdl ? 1 : 0;
    cudaLaunchKernelEx(&cfg, kernel, args...);
}

// µs a call of `copies` launches of `kernel` (blocks x threads, `smem` dynamic bytes),
// the i-th reading `bufs[i % bufs.size()]` as a `Ptr` followed by `rest`, with the
// programmatic-serialization attribute where `pdl`: captured in a CUDA graph, three
// warm-up replays, best of 15.
template <typename Ptr, typename K, typename... Rest>
float chain_us(cudaStream_t s, int copies, const std::vector<char*>& bufs, bool pdl, K kernel,
               dim3 shape, size_t smem, Rest... rest) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    for (int i = 0; i < copies; i++)
        launch(s, pdl, kernel, dim3(shape.x), dim3(shape.y), smem, (Ptr)bufs[i % bufs.size()], rest...);
    cudaStreamEndCapture(s, &g);
    if (cudaGraphInstantiate(&ge, g, 0)) {
        printf("inst fail %s\n", cudaGetErrorString(cudaGetLastError()));
        return -1;
    }
    for (int w = 0; w < 3; w++) cudaGraphLaunch(ge, s);
    float best = best_ms(s, 15, [&] { cudaGraphLaunch(ge, s); });
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    return best * 1000.0f / copies;
}

// Eight buffers of `bytes` (so 32 calls over them miss L2), filled.
inline std::vector<char*> buffers(size_t bytes) {
    std::vector<char*> bufs(8);
    for (auto& b : bufs) {
        cudaMalloc(&b, bytes);
        cudaMemset(b, 1, bytes);
    }
    return bufs;
}

// `cudaMemcpy` of 1 GiB on `s`, printed as the JSON line `{"copy_GBps":...}`.
inline void print_copy_rate(cudaStream_t s) {
    size_t n = 1ull << 30;
    void *x, *z;
    cudaMalloc(&x, n);
    cudaMalloc(&z, n);
    cudaMemset(x, 1, n);
    float best = best_ms(s, 10, [&] { cudaMemcpyAsync(z, x, n, cudaMemcpyDeviceToDevice, s); });
    printf("{\"copy_GBps\":%.0f}\n", 2.0 * n / best / 1e6);
    cudaFree(x);
    cudaFree(z);
}
