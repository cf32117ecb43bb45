// The floor under a bandwidth-bound kernel of a given size on the lent GPU: a plain
// streaming read of N bytes (16-byte loads, every thread striding the buffer), 32 calls
// captured in a CUDA graph over 8 buffers in turn (so nothing is served from L2), µs a
// call; then the same with programmatic dependent launch (each call may start while the
// previous one drains: `griddepcontrol.wait` before its loads) and with the call's lines
// asked into L2 before that wait. Not part of trueno (which generates its own PTX): a
// probe of the hardware, built with the device machine's nvcc.
//
//   nvcc -O3 -arch=sm_90 -o stream_read_floor scripts/stream_read_floor.cu && ./stream_read_floor [BYTES...]
//
// With no sizes, those of Q4_K 4096x4096, Q8_0 4096x4096, Q4_K 14336x4096 and 32000x4096.
// Prints one JSON line per size, mode (0 plain, 1 PDL, 2 PDL + L2 prefetch) and block size.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <vector>

template <int MODE>
__global__ void stream_read(const uint4* __restrict__ src, size_t n16, float* out) {
    size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    if (MODE == 2) {
        // Ask for this thread's lines into L2 before waiting on the previous grid.
        for (size_t i = tid * 8; i < n16; i += stride * 8)
            asm volatile("prefetch.global.L2 [%0];" ::"l"(src + i));
    }
    if (MODE >= 1) {
        asm volatile("griddepcontrol.launch_dependents;");
        asm volatile("griddepcontrol.wait;" ::: "memory");
    }
    unsigned acc = 0;
    for (size_t i = tid; i < n16; i += stride) {
        uint4 v = src[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x12345678u) out[tid] = acc;
    if (tid == 0) out[0] = 1.0f;
}

int main(int argc, char** argv) {
    std::vector<size_t> sizes = {9437184, 17825792, 33030144, 73728000};
    if (argc > 1) {
        sizes.clear();
        for (int i = 1; i < argc; i++) sizes.push_back(strtoull(argv[i], nullptr, 10) / 16 * 16);
    }
    const int sets = 8, copies = 32;
    cudaStream_t s; cudaStreamCreate(&s);
    float* out; cudaMalloc(&out, 1 << 24);
    int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    for (size_t bytes : sizes) {
        std::vector<uint4*> bufs(sets);
        for (auto& b : bufs) { cudaMalloc(&b, bytes); cudaMemset(b, 1, bytes); }
        size_t n16 = bytes / 16;
        for (int mode = 0; mode < 3; mode++) {
          for (int threads : {256, 512}) {
            int blocks = sms * (2048 / threads);
            cudaGraph_t g; cudaGraphExec_t ge;
            cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
            for (int i = 0; i < copies; i++) {
                cudaLaunchConfig_t cfg = {};
                cfg.gridDim = blocks; cfg.blockDim = threads; cfg.stream = s;
                cudaLaunchAttribute at[1];
                at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
                at[0].val.programmaticStreamSerializationAllowed = 1;
                cfg.attrs = at; cfg.numAttrs = mode ? 1 : 0;
                cudaError_t e;
                if (mode == 0) e = cudaLaunchKernelEx(&cfg, stream_read<0>, (const uint4*)bufs[i % sets], n16, out);
                else if (mode == 1) e = cudaLaunchKernelEx(&cfg, stream_read<1>, (const uint4*)bufs[i % sets], n16, out);
                else e = cudaLaunchKernelEx(&cfg, stream_read<2>, (const uint4*)bufs[i % sets], n16, out);
                if (e) { printf("launch: %s\n", cudaGetErrorString(e)); return 1; }
            }
            cudaStreamEndCapture(s, &g);
            if (cudaGraphInstantiate(&ge, g, 0)) { printf("instantiate failed\n"); return 1; }
            for (int w = 0; w < 3; w++) cudaGraphLaunch(ge, s);
            cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
            float best = 1e9;
            for (int r = 0; r < 10; r++) {
                cudaEventRecord(a, s); cudaGraphLaunch(ge, s); cudaEventRecord(b, s);
                cudaEventSynchronize(b);
                float ms; cudaEventElapsedTime(&ms, a, b); if (ms < best) best = ms;
            }
            double us = best * 1000.0 / copies;
            printf("{\"bytes\":%zu,\"mode\":%d,\"threads\":%d,\"us\":%.3f,\"GBps\":%.0f}\n", bytes, mode, threads, us, bytes / us / 1e3);
            cudaGraphExecDestroy(ge); cudaGraphDestroy(g);
          }
        }
        for (auto b : bufs) cudaFree(b);
    }
    printf("err: %s\n", cudaGetErrorString(cudaGetLastError()));
}
