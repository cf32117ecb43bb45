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
//   nvcc -O3 -arch=sm_90 -o stream_read_overlap scripts/stream_read_overlap.cu && ./stream_read_overlap [BYTES...]
//
// Prints one JSON line per size and occupancy.
#include <cstdlib>
#include "stream_read_common.cuh"
int main(int argc, char** argv) {
    cudaStream_t s; cudaStreamCreate(&s);
    float* out; cudaMalloc(&out, 1 << 24);
    int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    std::vector<size_t> sizes = {9437184ul, 13784128ul, 17825792ul};
    if (argc > 1) sizes.clear();
    for (int i = 1; i < argc; i++) sizes.push_back(strtoull(argv[i], nullptr, 10));
    for (size_t bytes : sizes) {
        auto bufs = buffers(bytes);
        size_t n16 = bytes / 16;
        for (int per_sm : {512, 1024, 2048}) {
            dim3 shape(sms * per_sm / 256, 256);
            auto run = [&](bool pdl, auto kernel) {
                return chain_us<const uint4*>(s, 32, bufs, pdl, kernel, shape, 0, n16, out);
            };
            float t0 = run(false, rd_reg<0, 0>), t1 = run(true, rd_reg<1, 0>);
            float t2 = run(true, rd_reg<2, 1>), t3 = run(true, rd_reg<2, 2>), t4 = run(true, rd_reg<2, 4>);
            printf("{\"bytes\":%zu,\"threads_per_sm\":%d,\"plain\":%.3f,\"pdl\":%.3f,\"early1\":%.3f,\"early2\":%.3f,\"early4\":%.3f}\n", bytes, per_sm, t0, t1, t2, t3, t4);
        }
        for (auto b : bufs) cudaFree(b);
    }
    printf("err: %s\n", cudaGetErrorString(cudaGetLastError()));
}
