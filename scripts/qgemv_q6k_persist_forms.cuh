// The persistent forms of qgemv_q6k_mma_forms.cu (included there after MMA6A, whose
// loop and loads they reuse). Not part of trueno: a probe for the device machine's nvcc.
#pragma once

// Persistent forms (MMA6P): a grid of as many blocks as fit the multiprocessors, each
// block taking tiles blockIdx.x, + gridDim.x, ... (MMA6A's loop a tile, its sums met in
// one of two shared buffers in turn, so a tile's readers never race the next tile's
// writers). MMA6PP also pipelines a warp's steps across its tiles: the next step's
// weights, scales and activations are loaded before this step's products, so a tile's
// end (its sums and barrier) and the next tile's first loads overlap. Both need rows
// of whole 2048-column groups (each warp the same count of steps a tile).
template <int MINB>
__global__ void __launch_bounds__(THREADS, MINB) q6k_persist(const uint8_t* __restrict__ w, Act a, float* y, int rows, int blocks) {
    __shared__ float part[2][THREADS / 32][16];
    asm volatile("griddepcontrol.launch_dependents;");
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, kw = warp;
    size_t row_bytes = (size_t)blocks * QB;
    int o = (int)(((uintptr_t)w + (size_t)kw * QB) & 7);
    const auto [m, eo] = b_mask(g, t);
    int ntiles = (rows + 15) / 16, it = 0;
#pragma unroll 1
    for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x, it++) {
        const uint8_t* w0 = w + (size_t)min(tile * 16 + g, rows - 1) * row_bytes;
        const uint8_t* w1 = w + (size_t)min(tile * 16 + g + 8, rows - 1) * row_bytes;
        float acc0 = 0.f, acc1 = 0.f;
        switch (o) {
            case 0: q6k_loop_a<8, 2, false, 0>(w0, w1, a, blocks, kw, t, m, eo, acc0, acc1); break;
            case 2: q6k_loop_a<8, 2, false, 2>(w0, w1, a, blocks, kw, t, m, eo, acc0, acc1); break;
            case 4: q6k_loop_a<8, 2, false, 4>(w0, w1, a, blocks, kw, t, m, eo, acc0, acc1); break;
            default: q6k_loop_a<8, 2, false, 6>(w0, w1, a, blocks, kw, t, m, eo, acc0, acc1); break;
        }
        store_tile_from<8>(part[it & 1], acc0, acc1, y, rows, tile);
    }
}

template <int O>
struct StepW {
    HalfRaw<O> h[2][2];  // [half][row]
    uint32_t d[2];
    uint32_t sc[2][2];  // [half][row]
};
struct StepX {
    uint2 x[2];
    int2 bs[2];
    float dx;
};

template <int O>
__device__ __forceinline__ void load_w(StepW<O>& s, const uint8_t* b0, const uint8_t* b1, int t) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
        s.h[h][0] = load_half_a<O>(b0 - O, h, t);
        s.h[h][1] = load_half_a<O>(b1 - O, h, t);
    }
    s.d[0] = ld2(b0 + 208);
    s.d[1] = ld2(b1 + 208);
#pragma unroll
    for (int h = 0; h < 2; h++) {
        s.sc[h][0] = ld2(b0 + 192 + 8 * h + 2 * t);
        s.sc[h][1] = ld2(b1 + 192 + 8 * h + 2 * t);
    }
}

__device__ __forceinline__ void load_x(StepX& x, const Act& a, int sb, int eo, int t) {
    const int8_t* aq = a.q + (size_t)sb * 256 + 32 * eo + 8 * t;
    x.x[0] = ld8(aq);
    x.x[1] = ld8(aq + 128);
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int32_t* p = a.s16 + (size_t)sb * 16 + 8 * h + 2 * t;
        asm volatile("ld.global.nc.v2.s32 {%0,%1}, [%2];" : "=r"(x.bs[h].x), "=r"(x.bs[h].y) : "l"(p));
    }
    asm volatile("ld.global.nc.f32 %0, [%1];" : "=f"(x.dx) : "l"(a.d + sb));
}

template <int H, int O>
__device__ __forceinline__ void half_p(const StepW<O>& s, const StepX& x, const uint32_t (&m)[4], int (&isum)[2]) {
    half_mma<O>(s.h[H], x.x[H], m, (int)(int16_t)s.sc[H][0], (int)(int16_t)s.sc[H][1], x.bs[H], isum);
}

template <int O>
__device__ __forceinline__ void pipe_loop(const uint8_t* w, const Act& a, float* y, int rows, int blocks, float (*part)[THREADS / 32][16],
                                          const uint32_t (&m)[4], int eo, int g, int t, int kw) {
    int ntiles = (rows + 15) / 16, tile = blockIdx.x, sb = kw;
    if (tile >= ntiles) return;
    size_t rb = (size_t)blocks * QB;
    auto rowp = [&](int tl, int r) { return w + (size_t)min(tl * 16 + r, rows - 1) * rb; };
    StepW<O> cw, nw;
    StepX cx, nx;
    load_w<O>(cw, rowp(tile, g) + (size_t)sb * QB, rowp(tile, g + 8) + (size_t)sb * QB, t);
    asm volatile("griddepcontrol.wait;" ::: "memory");
    load_x(cx, a, sb, eo, t);
    float acc0 = 0.f, acc1 = 0.f;
    int it = 0;
#pragma unroll 1
    while (true) {
        int nsb = sb + 8, ntile = tile;
        bool end = nsb >= blocks;
        if (end) {
            nsb = kw;
            ntile = tile + gridDim.x;
        }
        bool more = ntile < ntiles;
        if (more) {
            load_w<O>(nw, rowp(ntile, g) + (size_t)nsb * QB, rowp(ntile, g + 8) + (size_t)nsb * QB, t);
            load_x(nx, a, nsb, eo, t);
        }
        int isum[2] = {0, 0};
        half_p<0, O>(cw, cx, m, isum);
        half_p<1, O>(cw, cx, m, isum);
        float df0, df1;
        asm("cvt.f32.f16 %0, %1;" : "=f"(df0) : "h"((unsigned short)cw.d[0]));
        asm("cvt.f32.f16 %0, %1;" : "=f"(df1) : "h"((unsigned short)cw.d[1]));
        acc0 += cx.dx * df0 * (float)isum[0];
        acc1 += cx.dx * df1 * (float)isum[1];
        if (end) {
            store_tile_from<8>(part[it & 1], acc0, acc1, y, rows, tile);
            acc0 = acc1 = 0.f;
            it++;
        }
        if (!more) break;
        cw = nw;
        cx = nx;
        sb = nsb;
        tile = ntile;
    }
}

template <int MINB>
__global__ void __launch_bounds__(THREADS, MINB) q6k_persist_pipe(const uint8_t* __restrict__ w, Act a, float* y, int rows, int blocks) {
    __shared__ float part[2][THREADS / 32][16];
    asm volatile("griddepcontrol.launch_dependents;");
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, kw = warp;
    int o = (int)(((uintptr_t)w + (size_t)kw * QB) & 7);
    const auto [m, eo] = b_mask(g, t);
    switch (o) {
        case 0: pipe_loop<0>(w, a, y, rows, blocks, part, m, eo, g, t, kw); break;
        case 2: pipe_loop<2>(w, a, y, rows, blocks, part, m, eo, g, t, kw); break;
        case 4: pipe_loop<4>(w, a, y, rows, blocks, part, m, eo, g, t, kw); break;
        default: pipe_loop<6>(w, a, y, rows, blocks, part, m, eo, g, t, kw); break;
    }
}
