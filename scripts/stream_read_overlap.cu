// The floor under a bandwidth-bound kernel of 9-18 MB in a chain of overlapped launches
// (programmatic dependent launch) on the lent GPU: a plain 16-byte streaming read
// (grid-stride, 256-thread blocks), 32 calls captured in a CUDA graph over 8 buffers in
// turn, µs a call (best of 15 replays), at 512, 1024 and 2048 resident threads a
// multiprocessor (a grid that leaves room for the next one, or none), serialised
// ("plain"), overlapped with the wait first ("pdl"), and overlapped with each thread's
// first 1, 2 or 4 loads issued before its `griddepcontrol.wait` ("early1/2/4"), as
// trueno's integer qgemv issues its first pass's weights. Not part of trueno (which
// generates its own PTX): a probe of the hardware, built with the device machine's nvcc.
//
//   nvcc -O3 -arch=sm_90 -o stream_read_overlap scripts/stream_read_overlap.cu && ./stream_read_overlap
//
// Prints one JSON line per size and occupancy.
#include <cstdio>
#include <cuda_runtime.h>
#include <vector>
template <int MODE, int EARLY>
__global__ void rd(const uint4* __restrict__ src, size_t n16, float* out) {
    size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    unsigned acc = 0;
    uint4 e[EARLY > 0 ? EARLY : 1];
    if (MODE >= 1) asm volatile("griddepcontrol.launch_dependents;");
    size_t i = tid;
    if (MODE == 2) {
#pragma unroll
        for (int k = 0; k < EARLY; k++) { size_t j = tid + k * stride; e[k] = j < n16 ? src[j] : make_uint4(0,0,0,0); }
        i = tid + EARLY * stride;
    }
    if (MODE >= 1) asm volatile("griddepcontrol.wait;" ::: "memory");
    if (MODE == 2) {
#pragma unroll
        for (int k = 0; k < EARLY; k++) acc ^= e[k].x ^ e[k].y ^ e[k].z ^ e[k].w;
    }
    for (; i < n16; i += stride) { uint4 v = src[i]; acc ^= v.x ^ v.y ^ v.z ^ v.w; }
    if (acc == 0x12345678u) out[tid] = acc;
    if (tid == 0) out[0] = 1.0f;
}
template <int MODE, int EARLY>
float run(cudaStream_t s, std::vector<uint4*>& bufs, size_t n16, float* out, int blocks, int threads) {
    const int copies = 32, sets = bufs.size();
    cudaGraph_t g; cudaGraphExec_t ge;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    for (int i = 0; i < copies; i++) {
        cudaLaunchConfig_t cfg = {}; cfg.gridDim = blocks; cfg.blockDim = threads; cfg.stream = s;
        cudaLaunchAttribute at[1]; at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[0].val.programmaticStreamSerializationAllowed = 1; cfg.attrs = at; cfg.numAttrs = MODE ? 1 : 0;
        cudaLaunchKernelEx(&cfg, rd<MODE, EARLY>, (const uint4*)bufs[i % sets], n16, out);
    }
    cudaStreamEndCapture(s, &g);
    if (cudaGraphInstantiate(&ge, g, 0)) { printf("inst fail\n"); return -1; }
    for (int w = 0; w < 3; w++) cudaGraphLaunch(ge, s);
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    float best = 1e9;
    for (int r = 0; r < 15; r++) {
        cudaEventRecord(a, s); cudaGraphLaunch(ge, s); cudaEventRecord(b, s); cudaEventSynchronize(b);
        float ms; cudaEventElapsedTime(&ms, a, b); if (ms < best) best = ms;
    }
    cudaGraphExecDestroy(ge); cudaGraphDestroy(g);
    return best * 1000.0f / copies;
}
int main() {
    cudaStream_t s; cudaStreamCreate(&s);
    float* out; cudaMalloc(&out, 1 << 24);
    int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    for (size_t bytes : {9437184ul, 13784128ul, 17825792ul}) {
        std::vector<uint4*> bufs(8);
        for (auto& b : bufs) { cudaMalloc(&b, bytes); cudaMemset(b, 1, bytes); }
        size_t n16 = bytes / 16;
        for (int per_sm : {512, 1024, 2048}) {
            int threads = 256, blocks = sms * per_sm / threads;
            float t0 = run<0,0>(s, bufs, n16, out, blocks, threads);
            float t1 = run<1,0>(s, bufs, n16, out, blocks, threads);
            float t2 = run<2,1>(s, bufs, n16, out, blocks, threads);
            float t3 = run<2,2>(s, bufs, n16, out, blocks, threads);
            float t4 = run<2,4>(s, bufs, n16, out, blocks, threads);
            printf("{\"bytes\":%zu,\"threads_per_sm\":%d,\"plain\":%.3f,\"pdl\":%.3f,\"early1\":%.3f,\"early2\":%.3f,\"early4\":%.3f}\n", bytes, per_sm, t0, t1, t2, t3, t4);
        }
        for (auto b : bufs) cudaFree(b);
    }
    printf("err: %s\n", cudaGetErrorString(cudaGetLastError()));
}
