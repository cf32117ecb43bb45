// The staged forms of qgemv_q6k_mma_forms.cu (included there after MMA6A, whose pieces,
// half products and B masks they reuse). Not part of trueno: a probe for the device
// machine's nvcc.
#pragma once

// MMA6S: MMA6A's products, its weights copied into shared memory by `cp.async` first.
// A warp's step (its 16 rows' super-block `kw + 8j`) is 16 slots of 14 aligned 16-byte
// chunks (224 bytes: the super-block and the bytes before it back to a 16-byte
// boundary), seven `cp.async` a lane, consecutive lanes on consecutive chunks. S slots a
// warp: steps j + 1 .. j + S - 1 are in flight while step j's products read its slot, with
// no register held for them (MMA6A holds a super-block's 24 pieces in registers). Rows of
// whole 2048-column groups (0 mod 16 bytes), so a warp's offset past the 16-byte
// boundary is the same for its rows and steps. The activations of step j + 1 are loaded
// into registers during step j.
constexpr int SPITCH = 224;  // a row's slot; 56 words, so a half-warp's 8-byte reads of four rows miss each other's banks
constexpr int SCHUNKS = SPITCH / 16;
constexpr int STEP_BYTES = 16 * SPITCH;

__device__ __forceinline__ void cp16(uint32_t dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// A piece `O` bytes past the 8-byte boundary `p8` of a slot, as Piece<O>::load reads
// global memory.
template <int O>
__device__ __forceinline__ Piece<O> piece_s(const uint8_t* p8) {
    Piece<O> r;
    if (O == 0) {
        r.x = *(const uint2*)p8;
    } else if (O == 4) {
        r.x.x = *(const uint32_t*)(p8 + 4);
        r.x.y = *(const uint32_t*)(p8 + 8);
    } else if (O == 2) {
        r.x = *(const uint2*)p8;
        r.y.x = *(const uint32_t*)(p8 + 8);
    } else {
        r.x = *(const uint2*)p8;
        r.y = *(const uint2*)(p8 + 8);
    }
    return r;
}
template <int O>
__device__ __forceinline__ HalfRaw<O> load_half_s(const uint8_t* p8, int h, int t) {
    HalfRaw<O> r;
    r.p[0] = piece_s<O>(p8 + 64 * h + 8 * t);
    r.p[1] = piece_s<O>(p8 + 64 * h + 32 + 8 * t);
    r.p[2] = piece_s<O>(p8 + 128 + 32 * h + 8 * t);
    return r;
}

// A step's activations for lane 4g + t.
struct StepAct {
    uint2 x0, x1;
    int4 bs;  // sums of 16: half 0's pair, half 1's pair
    float dx;
};
__device__ __forceinline__ StepAct step_act(const Act& a, int sb, int eo, int t) {
    const int8_t* aq = a.q + (size_t)sb * 256 + 32 * eo + 8 * t;
    const int32_t* s16 = a.s16 + (size_t)sb * 16 + 2 * t;
    int2 b0 = *(const int2*)s16, b1 = *(const int2*)(s16 + 8);
    return StepAct{ld8(aq), ld8(aq + 128), make_int4(b0.x, b0.y, b1.x, b1.y), a.d[sb]};
}

// Step j's products from slot `s0` (row g, its 16-byte boundary) and `s0 + 8 SPITCH`
// (row g + 8); O8 the data's offset past the 8-byte boundary `s0 + (o & 8)`.
template <int O8>
__device__ __forceinline__ void step_s(const uint8_t* s0, const uint8_t* s1, const StepAct& x, const uint32_t (&m)[4], int t, float& acc0,
                                       float& acc1) {
    int isum[2] = {0, 0};
#pragma unroll
    for (int h = 0; h < 2; h++) {
        HalfRaw<O8> L[2] = {load_half_s<O8>(s0, h, t), load_half_s<O8>(s1, h, t)};
        int sc0 = *(const int16_t*)(s0 + O8 + 192 + 8 * h + 2 * t), sc1 = *(const int16_t*)(s1 + O8 + 192 + 8 * h + 2 * t);
        half_mma<O8>(L, h ? x.x1 : x.x0, m, sc0, sc1, h ? make_int2(x.bs.z, x.bs.w) : make_int2(x.bs.x, x.bs.y), isum);
    }
    unsigned short d0 = *(const unsigned short*)(s0 + O8 + 208), d1 = *(const unsigned short*)(s1 + O8 + 208);
    float df0, df1;
    asm("cvt.f32.f16 %0, %1;" : "=f"(df0) : "h"(d0));
    asm("cvt.f32.f16 %0, %1;" : "=f"(df1) : "h"(d1));
    acc0 += x.dx * df0 * (float)isum[0];
    acc1 += x.dx * df1 * (float)isum[1];
}
template <int O8>
__device__ __forceinline__ void step_s(const uint8_t* s0, const StepAct& x, const uint32_t (&m)[4], int t, float& acc0, float& acc1) {
    step_s<O8>(s0, s0 + 8 * SPITCH, x, m, t, acc0, acc1);
}

// The first S - 1 of a warp's `n` steps' copies (`issue(j)`), a group each (empty past
// the last, so the loop's waits count alike), then the wait for the previous grid (the
// weights are never a kernel's output; the activations may be).
template <int S, typename F>
__device__ __forceinline__ void start_ring(int n, F issue) {
#pragma unroll
    for (int s = 0; s + 1 < S; s++) {
        if (s < n) issue(s);
        cp_commit();
    }
    asm volatile("griddepcontrol.wait;" ::: "memory");
}

template <int S, int O8, int W>
__device__ __forceinline__ void q6k_loop_s(const uint8_t* tb, const uint32_t (&src)[7], uint32_t slots, const uint8_t* my, int o, const Act& a,
                                           int blocks, int kw, int g, int t, const uint32_t (&m)[4], int eo, float& acc0, float& acc1) {
    int n = (blocks - kw + W - 1) / W;
    // Step j's offset past the 16-byte boundary (W super-blocks are 0 or 8 mod 16 bytes).
    auto off = [&](int j) { return (o + j * W * QB) & 15; };
    auto issue = [&](int j) {
        const uint8_t* base = tb + (size_t)(kw + W * j) * QB - off(j);
        uint32_t dst = slots + (j % S) * STEP_BYTES + 16 * (threadIdx.x & 31);
#pragma unroll
        for (int i = 0; i < 7; i++) cp16(dst + 512 * i, base + src[i]);
    };
    start_ring<S>(n, issue);
    StepAct x = step_act(a, kw, eo, t);
#pragma unroll 1
    for (int j = 0; j < n; j++) {
        cp_wait<S - 2>();
        __syncwarp();
        if (j + S - 1 < n) issue(j + S - 1);
        cp_commit();
        StepAct xn = j + 1 < n ? step_act(a, kw + W * (j + 1), eo, t) : x;
        step_s<O8>(my + (j % S) * STEP_BYTES + g * SPITCH + (off(j) & 8), x, m, t, acc0, acc1);
        x = xn;
    }
}

template <int S, int MINB, int W = 8>
__global__ void __launch_bounds__(32 * W, MINB) q6k_mma_s(const uint8_t* __restrict__ w, Act a, float* y, int rows, int blocks) {
    constexpr int NT = 32 * W;  // one 16-row tile of W warps a block
    extern __shared__ __align__(16) uint8_t stg[];
    __shared__ float part[NT / 32][16];
    asm volatile("griddepcontrol.launch_dependents;");
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, kw = warp;
    int tile = blockIdx.x;
    uint32_t row_bytes = (uint32_t)blocks * QB;
    const uint8_t* tb = w + (size_t)tile * 16 * row_bytes;
    // Chunk lane + 32i of a step (224 chunks: 16 rows of 14).
    uint32_t src[7];
    tile_chunks<SCHUNKS>(src, lane, tile, rows, row_bytes);
    const uint8_t* my = stg + warp * S * STEP_BYTES;
    uint32_t slots = (uint32_t)__cvta_generic_to_shared(my);
    int o = (int)(((uintptr_t)w + (size_t)kw * QB) & 15);
    const auto [m, eo] = b_mask(g, t);
    float acc0 = 0.f, acc1 = 0.f;
    switch (o & 7) {
        case 0: q6k_loop_s<S, 0, W>(tb, src, slots, my, o, a, blocks, kw, g, t, m, eo, acc0, acc1); break;
        case 2: q6k_loop_s<S, 2, W>(tb, src, slots, my, o, a, blocks, kw, g, t, m, eo, acc0, acc1); break;
        case 4: q6k_loop_s<S, 4, W>(tb, src, slots, my, o, a, blocks, kw, g, t, m, eo, acc0, acc1); break;
        default: q6k_loop_s<S, 6, W>(tb, src, slots, my, o, a, blocks, kw, g, t, m, eo, acc0, acc1); break;
    }
    store_tile<W, NT>(part, acc0, acc1, y, rows);
}

// Dynamic shared bytes of MMA6S with S slots a warp.
constexpr size_t staged_smem(int S, int W = 8) { return (size_t)W * S * STEP_BYTES; }

// MMA6SP: MMA6S over a persistent grid (as many blocks as fit), each block taking tiles
// blockIdx.x, + gridDim.x, ...; a warp's steps run as one stream across its tiles, so
// the next tile's first copies are in flight while this tile's last products and sums
// run (MMA6PP did that in registers: 152 of them). Sums met in one of two shared
// buffers in turn.
template <int S, int O8>
__device__ __forceinline__ void q6k_loop_sp(const uint8_t* w, const uint32_t (&rc)[7], uint32_t slots, const uint8_t* my, int o, const Act& a,
                                            int rows, int blocks, int kw, int g, int t, const uint32_t (&m)[4], int eo, float* y,
                                            float (*part)[THREADS / 32][16]) {
    constexpr int W = 8;
    const uint32_t row_bytes = (uint32_t)blocks * QB;
    const int n = (blocks - kw + W - 1) / W, ntiles = (rows + 15) / 16;
    const int ntk = (ntiles - (int)blockIdx.x + (int)gridDim.x - 1) / (int)gridDim.x;
    const int steps = ntk * n;
    auto issue = [&](int j) {
        int tile = (int)blockIdx.x + (j / n) * (int)gridDim.x, sb = kw + W * (j % n);
        int last = rows - 1 - tile * 16;
        const uint8_t* base = w + (size_t)tile * 16 * row_bytes + (size_t)sb * QB - o;
        uint32_t dst = slots + (j % S) * STEP_BYTES + 16 * (threadIdx.x & 31);
#pragma unroll
        for (int i = 0; i < 7; i++) cp16(dst + 512 * i, base + min((int)(rc[i] >> 4), last) * row_bytes + 16 * (rc[i] & 15));
    };
    start_ring<S>(steps, issue);
    StepAct x = step_act(a, kw, eo, t);
    float acc0 = 0.f, acc1 = 0.f;
    int k = 0, s = 0;
#pragma unroll 1
    for (int j = 0; j < steps; j++) {
        cp_wait<S - 2>();
        __syncwarp();
        if (j + S - 1 < steps) issue(j + S - 1);
        cp_commit();
        int sn = s + 1 == n ? 0 : s + 1;
        StepAct xn = step_act(a, kw + W * sn, eo, t);
        step_s<O8>(my + (j % S) * STEP_BYTES + g * SPITCH + (o & 8), x, m, t, acc0, acc1);
        x = xn;
        if (sn == 0) {
            store_tile_from<8>(part[k & 1], acc0, acc1, y, rows, (int)blockIdx.x + k * (int)gridDim.x);
            acc0 = acc1 = 0.f;
            k++;
        }
        s = sn;
    }
}

template <int S, int MINB>
__global__ void __launch_bounds__(THREADS, MINB) q6k_mma_sp(const uint8_t* __restrict__ w, Act a, float* y, int rows, int blocks) {
    extern __shared__ __align__(16) uint8_t stg[];
    __shared__ float part[2][THREADS / 32][16];
    asm volatile("griddepcontrol.launch_dependents;");
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, kw = warp;
    // Chunk lane + 32i of a step: row (c / 14) << 4 | chunk c % 14.
    uint32_t rc[7];
#pragma unroll
    for (int i = 0; i < 7; i++) {
        int c = lane + 32 * i;
        rc[i] = (uint32_t)(c / SCHUNKS) << 4 | (c % SCHUNKS);
    }
    const uint8_t* my = stg + warp * S * STEP_BYTES;
    uint32_t slots = (uint32_t)__cvta_generic_to_shared(my);
    int o = (int)(((uintptr_t)w + (size_t)kw * QB) & 15);
    const auto [m, eo] = b_mask(g, t);
    switch (o & 7) {
        case 0: q6k_loop_sp<S, 0>(w, rc, slots, my, o, a, rows, blocks, kw, g, t, m, eo, y, part); break;
        case 2: q6k_loop_sp<S, 2>(w, rc, slots, my, o, a, rows, blocks, kw, g, t, m, eo, y, part); break;
        case 4: q6k_loop_sp<S, 4>(w, rc, slots, my, o, a, rows, blocks, kw, g, t, m, eo, y, part); break;
        default: q6k_loop_sp<S, 6>(w, rc, slots, my, o, a, rows, blocks, kw, g, t, m, eo, y, part); break;
    }
}
