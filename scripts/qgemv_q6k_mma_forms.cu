// Can one Q8_K vector against Q6_K weights run on the integer tensor cores the way
// trueno's QgemvQ8kMmaOneKernel runs Q4_K (the sub-blocks as the `mma`'s N)? Q6_K's
// 210-byte super-blocks are only 2-byte aligned, so each lane's bytes arrive in aligned
// 8-byte loads lined up by a byte permute, and its 16-weight sub-blocks take two halves
// of a super-block (eight sub-blocks, the `mma`'s N, a half).
//
//   MMA6   a warp takes 16 rows (M) and every W-th super-block; lane 4g + t loads rows g
//          and g + 8: in each half h, elements l = 8t..8t + 8 of the four quarters (ql
//          bytes 64h + 8t and 64h + 32 + 8t, qh bytes 128 + 32h + 8t: 24 bytes, each
//          byte of the row loaded by one lane), each 8-byte piece as two aligned 8-byte
//          loads around it (a lane's offset past the boundary never changes: W
//          super-blocks are 0 mod 8 bytes), lined up by selects and byte permutes. Step
//          e (of four a half) is quarter e: the A fragment's first k run elements 8t..8t
//          + 4, the second 8t + 4..8t + 8, both of sub-block 2e + t / 2, its bytes
//          `ql nibble | qh pair << 4` (0..64, unsigned). B column n is sub-block n of the
//          half: lane 4g + t holds its 8 activation bytes only in the step where its
//          k runs are sub-block g, zeros elsewhere. After a half's four steps lane 4g + t
//          holds rows g, g + 8 of sub-blocks 2t, 2t + 1: `sc (dot - 32 bsum)` with Q8_K's
//          sums of 16, then `d dx` a super-block. U halves' loads a pass (U = 2: the
//          whole super-block's before its products; U = 4, MMA6A only: two
//          super-blocks' loads a pass).
//   MMA6A  MMA6 where rows are whole 1024-column groups: a warp's offset past the 8-byte
//          boundary is then warp-uniform, and a branch picks a loop built for it (no
//          selects; one load a piece at offset 0). MMA6A2: its 6-bit values never
//          assembled, the high bit pairs a second `mma` (see the form). W16: sixteen
//          warps a tile (512 threads); W4: four (W4_ONLY=1 with PERSIST=1 stops there).
//   MMA6P  MMA6A's tiles taken by a persistent grid (as many blocks as fit), MMA6PP with
//          each warp's next step loaded before this step's products, across tiles; and
//          LOADS, MMA6A's loads alone (the products replaced by an xor: not a product).
//          Run with PERSIST=1 (LOADS_ONLY=1: the committed residencies and LOADS only);
//          FORM=NAME runs one form, for a profiler.
//   MMA6S  MMA6A's products with the weights copied into shared memory by `cp.async` (S
//          slots a warp, steps j + 1 .. j + S - 1 in flight during step j's products, no
//          register held for them); W4: four warps a tile; MMA6SP over a persistent grid
//          (STAGED_P=1). Run with STAGED=1 (qgemv_q6k_staged_forms.cuh; session 61:
//          MMA6S S2 at two blocks ported as trueno's staged kernel).
//   MMA6B  a persistent grid, each block's tiles copied whole by the copy engine
//          (`cp.async.bulk`) into a ring of S stages, MMA6A's products read from them
//          (qgemv_q6k_bulk_forms.cuh; BULK=1); MMA6BK long rows' tiles in chunks of C
//          super-blocks, 16 row copies a stage, with stage-release barriers (BULK_LONG=1).
//
// 20 calls in a CUDA graph over enough weight sets that each call misses L2, µs a call,
// against cudaMemcpy of 1 GiB in the same process. Not part of trueno (which generates
// its own PTX): a probe, built with the device machine's nvcc. Findings: BENCHMARKS.md,
// "Sixteen warps a tile where the tiles fit a wave; Q6_K on the tensor cores tried"
// (session 55: MMA6 0.98-1.05x trueno's `dp4a` kernels, not ported) and "Q6_K on the
// tensor cores where rows are whole 1024-column groups" (session 56: MMA6A, ported as
// trueno's QgemvQ6kMmaOneKernel; the main loop runs MMA6 only as the baseline now) and
// "Where Q6_K's time goes against a plain read" (session 60: the persistent forms slower,
// LOADS at 1.10x a plain read at 14336x4096, the products 12% more).
//
//   nvcc -O3 -arch=sm_90 -o qgemv_q6k_mma_forms scripts/qgemv_q6k_mma_forms.cu && ./qgemv_q6k_mma_forms [ROWS COLS]...
//
// Prints a JSON line per shape and form (registers, blocks a multiprocessor, µs, GB/s)
// with the largest relative difference from a CPU reference over 128 rows.
#include "qgemv_probe_common.cuh"

constexpr int QB = 210;  // Q6_K super-block bytes

// Loads that stay where they are written among the other `asm volatile`s (so a pass's
// loads all leave before its first product).
__device__ __forceinline__ uint2 ld8(const void* p) {
    uint2 v;
    asm volatile("ld.global.nc.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
    return v;
}
__device__ __forceinline__ uint32_t ld2(const void* p) {
    unsigned short v;
    asm volatile("ld.global.nc.u16 %0, [%1];" : "=h"(v) : "l"(p));
    return v;
}

// A lane's line-up of an 8-byte piece `o` (0, 2, 4, 6) bytes past the 8-byte boundary
// where its two loads start: skip the first word where o >= 4, then a byte permute.
struct Line {
    bool skip;
    uint32_t sel;
};
__device__ __forceinline__ void line_up(const Line& L, uint2 x, uint2 y, uint32_t& w0, uint32_t& w1) {
    uint32_t u0 = L.skip ? x.y : x.x, u1 = L.skip ? y.x : x.y, u2 = L.skip ? y.y : y.x;
    w0 = __byte_perm(u0, u1, L.sel);
    w1 = __byte_perm(u1, u2, L.sel);
}

// A half's raw loads for one row: three pieces (ql 0/2, ql 1/3, qh), two loads each.
struct HalfLoads {
    uint2 v[3][2];
};
__device__ __forceinline__ HalfLoads load_half(const uint8_t* blk8, int h, int t) {
    HalfLoads r;
    const int at[3] = {64 * h + 8 * t, 64 * h + 32 + 8 * t, 128 + 32 * h + 8 * t};
#pragma unroll
    for (int p = 0; p < 3; p++) {
        r.v[p][0] = ld8(blk8 + at[p]);
        r.v[p][1] = ld8(blk8 + at[p] + 8);
    }
    return r;
}

// Quarter e's A word k (elements 8t + 4k..) from the lined-up ql and qh words.
template <int E>
__device__ __forceinline__ uint32_t quants(uint32_t ql, uint32_t qh) {
    uint32_t lo = (E >= 2 ? ql >> 4 : ql) & 0x0F0F0F0Fu;
    uint32_t hi = E == 0 ? qh << 4 : E == 1 ? qh << 2 : E == 2 ? qh : qh >> 2;
    return lo | (hi & 0x30303030u);
}

// A half's products and scales for the lane's two rows: `isum[row] += sc (c - 32 bsum)`.
template <int H>
__device__ __forceinline__ void half_products(const HalfLoads (&L)[2], const Line& line, uint2 x, const uint32_t (&m)[4], const uint8_t* b0,
                                              const uint8_t* b1, const int32_t* s16, int t, int (&isum)[2]) {
    uint32_t q[2][3][2];
#pragma unroll
    for (int r = 0; r < 2; r++)
#pragma unroll
        for (int p = 0; p < 3; p++) line_up(line, L[r].v[p][0], L[r].v[p][1], q[r][p][0], q[r][p][1]);
    int c[4] = {0, 0, 0, 0};
#define STEP(E)                                                                                                                 \
    mma_u8s8(c, quants<E>(q[0][E & 1][0], q[0][2][0]), quants<E>(q[1][E & 1][0], q[1][2][0]), quants<E>(q[0][E & 1][1], q[0][2][1]), \
             quants<E>(q[1][E & 1][1], q[1][2][1]), x.x & m[E], x.y & m[E]);
    STEP(0) STEP(1) STEP(2) STEP(3)
#undef STEP
    int2 bs = *(const int2*)(s16 + 8 * H + 2 * t);
    int sc0 = (int)(int16_t)ld2(b0 + 192 + 8 * H + 2 * t), sc1 = (int)(int16_t)ld2(b1 + 192 + 8 * H + 2 * t);
    int lo0 = (int)(int8_t)(sc0 & 255), hi0 = sc0 >> 8, lo1 = (int)(int8_t)(sc1 & 255), hi1 = sc1 >> 8;
    int z0 = 32 * bs.x, z1 = 32 * bs.y;
    isum[0] += lo0 * (c[0] - z0) + hi0 * (c[1] - z1);
    isum[1] += lo1 * (c[2] - z0) + hi1 * (c[3] - z1);
}

// Lane 4g + t's B fragment masks: step e's k runs are sub-block 2e + t / 2, and column g
// is that in the step e = (g - t / 2) / 2 where that is whole, else never; `eo` that
// step (0 where none: its activations are then masked off in every step).
struct BMask {
    uint32_t m[4];
    int eo;
};
__device__ __forceinline__ BMask b_mask(int g, int t) {
    int ea = (g - (t >> 1)) >> 1;
    bool has = ((g - (t >> 1)) & 1) == 0;
    BMask b;
#pragma unroll
    for (int e = 0; e < 4; e++) b.m[e] = has && ea == e ? ~0u : 0u;
    b.eo = has ? ea : 0;
    return b;
}

// Lane 4g + t of warp `kw` (of W) in its tile, and its rows g and g + 8 (past the last:
// the last), in blocks of NT threads.
struct TileRows {
    int g, t, kw;
    const uint8_t *w0, *w1;
};
template <int W, int NT>
__device__ __forceinline__ TileRows tile_rows(const uint8_t* w, int rows, int blocks) {
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int g = lane >> 2, tile = blockIdx.x * (NT / 32 / W) + warp / W;
    size_t row_bytes = (size_t)blocks * QB;
    const uint8_t* w0 = w + (size_t)min(tile * 16 + g, rows - 1) * row_bytes;
    const uint8_t* w1 = w + (size_t)min(tile * 16 + g + 8, rows - 1) * row_bytes;
    return TileRows{g, lane & 3, warp % W, w0, w1};
}

template <int W, int U, int MINB = 0, bool PDL = false>
__global__ void __launch_bounds__(THREADS, MINB) q6k_mma(const uint8_t* __restrict__ w, Act a, float* y, int rows, int blocks) {
    __shared__ float part[THREADS / 32][16];
    if (PDL) asm volatile("griddepcontrol.launch_dependents;");
    auto [g, t, kw, w0, w1] = tile_rows<W, THREADS>(w, rows, blocks);
    // The lane's offset past an 8-byte boundary at super-block kw: the same at kw + W,
    // kw + 2W, ... and for row g + 8 (eight rows are 0 mod 8 bytes).
    int o = (int)(((uintptr_t)w0 + (size_t)kw * QB) & 7);
    Line line{o >= 4, (o & 2) ? 0x5432u : 0x3210u};
    const auto [m, eo] = b_mask(g, t);
    float acc0 = 0.f, acc1 = 0.f;
    bool first = true;
#pragma unroll 1
    for (int sb = kw; sb < blocks; sb += W) {
        const uint8_t* b0 = w0 + (size_t)sb * QB;
        const uint8_t* b1 = w1 + (size_t)sb * QB;
        const uint8_t* p0 = b0 - o;
        const uint8_t* p1 = b1 - o;
        HalfLoads L0[2], L1[2];
        L0[0] = load_half(p0, 0, t);
        L0[1] = load_half(p1, 0, t);
        if (U == 2) {
            L1[0] = load_half(p0, 1, t);
            L1[1] = load_half(p1, 1, t);
        }
        uint32_t d0 = ld2(b0 + 208), d1 = ld2(b1 + 208);
        if (PDL && first) asm volatile("griddepcontrol.wait;" ::: "memory");
        first = false;
        const int8_t* aq = a.q + (size_t)sb * 256 + 32 * eo + 8 * t;
        uint2 x0 = ld8(aq), x1 = ld8(aq + 128);
        const int32_t* s16 = a.s16 + (size_t)sb * 16;
        float dx = a.d[sb];
        int isum[2] = {0, 0};
        half_products<0>(L0, line, x0, m, b0, b1, s16, t, isum);
        if (U == 1) {
            L1[0] = load_half(p0, 1, t);
            L1[1] = load_half(p1, 1, t);
        }
        half_products<1>(L1, line, x1, m, b0, b1, s16, t, isum);
        float df0, df1;
        asm("cvt.f32.f16 %0, %1;" : "=f"(df0) : "h"((unsigned short)d0));
        asm("cvt.f32.f16 %0, %1;" : "=f"(df1) : "h"((unsigned short)d1));
        acc0 += dx * df0 * (float)isum[0];
        acc1 += dx * df1 * (float)isum[1];
    }
    store_tile<W>(part, acc0, acc1, y, rows);
}

// MMA6A: MMA6 where a row is 0 mod 8 bytes (blocks a multiple of 4): a warp's offset `O`
// past the 8-byte boundary is then the same for its sixteen rows and, W being 0 mod 4,
// for all its super-blocks, so one warp-uniform branch picks a loop compiled for it: a
// piece is one 8-byte load at O = 0, two 4-byte loads at 4, two loads and two byte
// permutes at 2 and 6, no selects. TWO: quarter e's 6-bit values never assembled; a
// second `mma` a step takes the high bit pairs masked in place (4^e times theirs) beside
// the nibbles (the high nibbles masked in place, 16 times theirs), lane 4g + t's columns
// being quarter t's alone: `cn + F ch` with F = 16 or 4 is the dot product times 1
// (t < 2) or 16 (t >= 2).
__device__ __forceinline__ uint32_t ld4(const void* p) {
    uint32_t v;
    asm volatile("ld.global.nc.u32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}

// An 8-byte piece `O` bytes past the 8-byte boundary `p8`: loaded raw, lined up later.
template <int O>
struct Piece {
    uint2 x, y;
    __device__ __forceinline__ void load(const uint8_t* p8) {
        if (O == 0) {
            x = ld8(p8);
        } else if (O == 4) {
            x.x = ld4(p8 + 4);
            x.y = ld4(p8 + 8);
        } else if (O == 2) {
            x = ld8(p8);
            y.x = ld4(p8 + 8);
        } else {
            x = ld8(p8);
            y = ld8(p8 + 8);
        }
    }
    __device__ __forceinline__ uint32_t w(int i) const {
        if (O == 0 || O == 4) return i ? x.y : x.x;
        if (O == 2) return i ? __byte_perm(x.y, y.x, 0x5432) : __byte_perm(x.x, x.y, 0x5432);
        return i ? __byte_perm(y.x, y.y, 0x5432) : __byte_perm(x.y, y.x, 0x5432);
    }
};

template <int O>
struct HalfRaw {
    Piece<O> p[3];
};
template <int O>
__device__ __forceinline__ HalfRaw<O> load_half_a(const uint8_t* p8, int h, int t) {
    HalfRaw<O> r;
    r.p[0].load(p8 + 64 * h + 8 * t);
    r.p[1].load(p8 + 64 * h + 32 + 8 * t);
    r.p[2].load(p8 + 128 + 32 * h + 8 * t);
    return r;
}

// The lane's two rows' words of a half, lined up.
template <int O>
__device__ __forceinline__ void half_words(const HalfRaw<O> (&L)[2], uint32_t (&q)[2][3][2]) {
#pragma unroll
    for (int r = 0; r < 2; r++)
#pragma unroll
        for (int p = 0; p < 3; p++)
#pragma unroll
            for (int i = 0; i < 2; i++) q[r][p][i] = L[r].p[p].w(i);
}

// MMA6A's half: four `mma` steps on the 6-bit values, then `isum[row] += sc (dot - 32
// bsum)` with the rows' 16-bit scale pairs `sc0`, `sc1` and the sums of 16 `bs`.
template <int O>
__device__ __forceinline__ void half_mma(const HalfRaw<O> (&L)[2], uint2 x, const uint32_t (&m)[4], int sc0, int sc1, int2 bs,
                                         int (&isum)[2]) {
    uint32_t q[2][3][2];
    half_words<O>(L, q);
    int c[4] = {0, 0, 0, 0};
#define STEP(E)                                                                                                                 \
    mma_u8s8(c, quants<E>(q[0][E & 1][0], q[0][2][0]), quants<E>(q[1][E & 1][0], q[1][2][0]), quants<E>(q[0][E & 1][1], q[0][2][1]), \
             quants<E>(q[1][E & 1][1], q[1][2][1]), x.x & m[E], x.y & m[E]);
    STEP(0) STEP(1) STEP(2) STEP(3)
#undef STEP
    int lo0 = (int)(int8_t)(sc0 & 255), hi0 = sc0 >> 8, lo1 = (int)(int8_t)(sc1 & 255), hi1 = sc1 >> 8;
    int z0 = 32 * bs.x, z1 = 32 * bs.y;
    isum[0] += lo0 * (c[0] - z0) + hi0 * (c[1] - z1);
    isum[1] += lo1 * (c[2] - z0) + hi1 * (c[3] - z1);
}

template <int H, int O, bool TWO>
__device__ __forceinline__ void half_products_a(const HalfRaw<O> (&L)[2], uint2 x, const uint32_t (&m)[4], const uint8_t* b0,
                                                const uint8_t* b1, const int32_t* s16, int t, int (&isum)[2]) {
    int2 bs = *(const int2*)(s16 + 8 * H + 2 * t);
    int sc0 = (int)(int16_t)ld2(b0 + 192 + 8 * H + 2 * t), sc1 = (int)(int16_t)ld2(b1 + 192 + 8 * H + 2 * t);
    if (!TWO) return half_mma<O>(L, x, m, sc0, sc1, bs, isum);
    uint32_t q[2][3][2];
    half_words<O>(L, q);
    int lo0 = (int)(int8_t)(sc0 & 255), hi0 = sc0 >> 8, lo1 = (int)(int8_t)(sc1 & 255), hi1 = sc1 >> 8;
    int cn[4] = {0, 0, 0, 0}, ch[4] = {0, 0, 0, 0};
#define STEP2(E)                                                                                                               \
    {                                                                                                                          \
        const uint32_t nm = E >= 2 ? 0xF0F0F0F0u : 0x0F0F0F0Fu, hm = 0x03030303u << (2 * E);                                  \
        uint32_t b0w = x.x & m[E], b1w = x.y & m[E];                                                                           \
        mma_u8s8(cn, q[0][E & 1][0] & nm, q[1][E & 1][0] & nm, q[0][E & 1][1] & nm, q[1][E & 1][1] & nm, b0w, b1w);           \
        mma_u8s8(ch, q[0][2][0] & hm, q[1][2][0] & hm, q[0][2][1] & hm, q[1][2][1] & hm, b0w, b1w);                           \
    }
    STEP2(0) STEP2(1) STEP2(2) STEP2(3)
#undef STEP2
    int f = (t & 1) ? 4 : 16, zs = t >= 2 ? 9 : 5;
    int z0 = bs.x << zs, z1 = bs.y << zs;
    isum[0] += lo0 * (cn[0] + f * ch[0] - z0) + hi0 * (cn[1] + f * ch[1] - z1);
    isum[1] += lo1 * (cn[2] + f * ch[2] - z0) + hi1 * (cn[3] + f * ch[3] - z1);
}

// LOADS: every load of MMA6A, the products replaced by an xor of what was loaded (a
// timing probe of the load pattern alone; its sums are not the product's).
template <int H, int O>
__device__ __forceinline__ void half_loads_only(const HalfRaw<O> (&L)[2], uint2 x, const uint8_t* b0, const uint8_t* b1,
                                                const int32_t* s16, int t, int (&isum)[2]) {
    uint32_t q[2][3][2];
    half_words<O>(L, q);
    uint32_t acc = x.x ^ x.y;
#pragma unroll
    for (int r = 0; r < 2; r++)
#pragma unroll
        for (int p = 0; p < 3; p++) acc ^= q[r][p][0] ^ q[r][p][1];
    int2 bs = *(const int2*)(s16 + 8 * H + 2 * t);
    int sc0 = (int)ld2(b0 + 192 + 8 * H + 2 * t), sc1 = (int)ld2(b1 + 192 + 8 * H + 2 * t);
    isum[0] += (int)acc ^ sc0 ^ bs.x;
    isum[1] += sc1 ^ bs.y;
}

// U = 4: two super-blocks' loads (sb and sb + W) a pass, all before either's products.
template <int W, int O>
__device__ __forceinline__ void q6k_loop_pair(const uint8_t* w0, const uint8_t* w1, const Act& a, int blocks, int kw, int t,
                                              const uint32_t (&m)[4], int eo, float& acc0, float& acc1) {
    bool first = true;
#pragma unroll 1
    for (int sb = kw; sb < blocks; sb += 2 * W) {
        const int sb2 = sb + W < blocks ? sb + W : sb;
        const int at[2] = {sb, sb2};
        HalfRaw<O> L[2][2][2];  // [super-block][half][row]
        uint32_t d[2][2];
#pragma unroll
        for (int j = 0; j < 2; j++) {
            const uint8_t* b0 = w0 + (size_t)at[j] * QB;
            const uint8_t* b1 = w1 + (size_t)at[j] * QB;
#pragma unroll
            for (int h = 0; h < 2; h++) {
                L[j][h][0] = load_half_a<O>(b0 - O, h, t);
                L[j][h][1] = load_half_a<O>(b1 - O, h, t);
            }
            d[j][0] = ld2(b0 + 208);
            d[j][1] = ld2(b1 + 208);
        }
        if (first) asm volatile("griddepcontrol.wait;" ::: "memory");
        first = false;
#pragma unroll
        for (int j = 0; j < 2; j++) {
            if (j == 1 && sb2 == sb) break;
            const uint8_t* b0 = w0 + (size_t)at[j] * QB;
            const uint8_t* b1 = w1 + (size_t)at[j] * QB;
            const int8_t* aq = a.q + (size_t)at[j] * 256 + 32 * eo + 8 * t;
            uint2 x0 = ld8(aq), x1 = ld8(aq + 128);
            const int32_t* s16 = a.s16 + (size_t)at[j] * 16;
            float dx = a.d[at[j]];
            int isum[2] = {0, 0};
            half_products_a<0, O, false>(L[j][0], x0, m, b0, b1, s16, t, isum);
            half_products_a<1, O, false>(L[j][1], x1, m, b0, b1, s16, t, isum);
            float df0, df1;
            asm("cvt.f32.f16 %0, %1;" : "=f"(df0) : "h"((unsigned short)d[j][0]));
            asm("cvt.f32.f16 %0, %1;" : "=f"(df1) : "h"((unsigned short)d[j][1]));
            acc0 += dx * df0 * (float)isum[0];
            acc1 += dx * df1 * (float)isum[1];
        }
    }
}

template <int W, int U, bool TWO, int O, bool LOADS = false>
__device__ __forceinline__ void q6k_loop_a(const uint8_t* w0, const uint8_t* w1, const Act& a, int blocks, int kw, int t,
                                           const uint32_t (&m)[4], int eo, float& acc0, float& acc1) {
    // Lanes t >= 2 of the two-`mma` form hold 16 times their dot products.
    if (U == 4) return q6k_loop_pair<W, O>(w0, w1, a, blocks, kw, t, m, eo, acc0, acc1);
    const float fs = TWO && t >= 2 ? 0.0625f : 1.0f;
    bool first = true;
#pragma unroll 1
    for (int sb = kw; sb < blocks; sb += W) {
        const uint8_t* b0 = w0 + (size_t)sb * QB;
        const uint8_t* b1 = w1 + (size_t)sb * QB;
        const uint8_t* p0 = b0 - O;
        const uint8_t* p1 = b1 - O;
        HalfRaw<O> L0[2], L1[2];
        L0[0] = load_half_a<O>(p0, 0, t);
        L0[1] = load_half_a<O>(p1, 0, t);
        if (U == 2) {
            L1[0] = load_half_a<O>(p0, 1, t);
            L1[1] = load_half_a<O>(p1, 1, t);
        }
        uint32_t d0 = ld2(b0 + 208), d1 = ld2(b1 + 208);
        if (first) asm volatile("griddepcontrol.wait;" ::: "memory");
        first = false;
        const int8_t* aq = a.q + (size_t)sb * 256 + 32 * eo + 8 * t;
        uint2 x0 = ld8(aq), x1 = ld8(aq + 128);
        const int32_t* s16 = a.s16 + (size_t)sb * 16;
        float dx = a.d[sb] * fs;
        int isum[2] = {0, 0};
        if (LOADS) {
            half_loads_only<0, O>(L0, x0, b0, b1, s16, t, isum);
            half_loads_only<1, O>(L1, x1, b0, b1, s16, t, isum);
        } else {
            half_products_a<0, O, TWO>(L0, x0, m, b0, b1, s16, t, isum);
            if (U == 1) {
                L1[0] = load_half_a<O>(p0, 1, t);
                L1[1] = load_half_a<O>(p1, 1, t);
            }
            half_products_a<1, O, TWO>(L1, x1, m, b0, b1, s16, t, isum);
        }
        float df0, df1;
        asm("cvt.f32.f16 %0, %1;" : "=f"(df0) : "h"((unsigned short)d0));
        asm("cvt.f32.f16 %0, %1;" : "=f"(df1) : "h"((unsigned short)d1));
        acc0 += dx * df0 * (float)isum[0];
        acc1 += dx * df1 * (float)isum[1];
    }
}

template <int W, int U, int MINB, bool TWO, int NT = THREADS, bool LOADS = false>
__global__ void __launch_bounds__(NT, MINB) q6k_mma_a(const uint8_t* __restrict__ w, Act a, float* y, int rows, int blocks) {
    static_assert(W % 4 == 0, "W super-blocks must be 0 mod 8 bytes");
    __shared__ float part[NT / 32][16];
    asm volatile("griddepcontrol.launch_dependents;");
    auto [g, t, kw, w0, w1] = tile_rows<W, NT>(w, rows, blocks);
    // Warp-uniform where rows are 0 mod 8 bytes (the caller's promise: blocks % 4 == 0).
    int o = (int)(((uintptr_t)w + (size_t)kw * QB) & 7);
    const auto [m, eo] = b_mask(g, t);
    float acc0 = 0.f, acc1 = 0.f;
    switch (o) {
        case 0: q6k_loop_a<W, U, TWO, 0, LOADS>(w0, w1, a, blocks, kw, t, m, eo, acc0, acc1); break;
        case 2: q6k_loop_a<W, U, TWO, 2, LOADS>(w0, w1, a, blocks, kw, t, m, eo, acc0, acc1); break;
        case 4: q6k_loop_a<W, U, TWO, 4, LOADS>(w0, w1, a, blocks, kw, t, m, eo, acc0, acc1); break;
        default: q6k_loop_a<W, U, TWO, 6, LOADS>(w0, w1, a, blocks, kw, t, m, eo, acc0, acc1); break;
    }
    store_tile<W, NT>(part, acc0, acc1, y, rows);
}

#include "qgemv_q6k_persist_forms.cuh"
#include "qgemv_q6k_staged_forms.cuh"
#include "qgemv_q6k_bulk_forms.cuh"

// GGML's dequantize_row_q6_K, against the activations, in double.
static float ref_row(const uint8_t* w, const int8_t* aq, const float* ad, int row, int blocks) {
    double acc = 0;
    for (int gb = 0; gb < blocks; gb++) {
        const uint8_t* b = w + ((size_t)row * blocks + gb) * QB;
        uint16_t hd;
        memcpy(&hd, b + 208, 2);
        double d = h2f(hd);
        for (int n = 0; n < 2; n++) {
            const uint8_t* ql = b + 64 * n;
            const uint8_t* qh = b + 128 + 32 * n;
            const int8_t* sc = (const int8_t*)(b + 192 + 8 * n);
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                int q[4] = {(ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4), (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4),
                            (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4), (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)};
                for (int j = 0; j < 4; j++) {
                    double wv = d * sc[is + 2 * j] * (q[j] - 32);
                    acc += wv * ad[gb] * aq[(size_t)gb * 256 + 128 * n + 32 * j + l];
                }
            }
        }
    }
    return (float)acc;
}

int main(int argc, char** argv) {
    auto shapes = probe_shapes(argc, argv);
    const int calls = 20;
    cudaStream_t s;
    cudaStreamCreate(&s);
    print_copy_rate(s);
    for (auto& sh : shapes) {
        int rows = sh[0], cols = sh[1], blocks = cols / 256;
        size_t wbytes = (size_t)rows * blocks * QB;
        std::vector<uint8_t> hw(wbytes);
        Lcg rnd;
        for (size_t i = 0; i < wbytes; i++) hw[i] = (uint8_t)rnd();
        for (size_t b = 0; b < (size_t)rows * blocks; b++) {
            uint16_t d = f2h(0.001f * (1 + rnd() % 100));
            memcpy(&hw[b * QB + 208], &d, 2);
        }
        ProbeData p(hw, rows, blocks, calls, rnd);
        p.reference(hw, ref_row);
        int sms = 0;
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
        auto run = [&](const char* name, auto kern, int rows_a_block, bool pdl, int nt = THREADS, bool persist = false, size_t smem = 0) {
            // FORM=NAME runs that form alone (for a profiler).
            if (getenv("FORM") && strcmp(getenv("FORM"), name) != 0) return;
            int per_sm = 0;
            if (smem > 48 * 1024) cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, nt, smem);
            int grid = (rows + rows_a_block - 1) / rows_a_block;
            if (persist) grid = std::min(grid, per_sm * sms);
            cudaFuncAttributes fa;
            cudaFuncGetAttributes(&fa, kern);
            cudaMemset(p.y, 0, rows * 4);
            kern<<<grid, nt, smem, s>>>(p.ws[0], p.act, p.y, rows, blocks);
            cudaStreamSynchronize(s);
            double err = p.max_rel_err();
            double us = graph_us(s, calls, [&](int i) {
                launch(s, pdl, kern, dim3(grid), dim3(nt), smem, (const uint8_t*)p.ws[i % p.ws.size()], p.act, p.y, rows, blocks);
            });
            print_form(p, cols, name, fa.numRegs, per_sm, grid, us, err);
        };
        for (int round = 0; round < 2; round++) {
            if (getenv("BULK_LONG") && blocks % 8 == 0) {
                run("MMA6A-W8U2-M2", q6k_mma_a<8, 2, 2, false>, 16, true);
                run("MMA6S-S2-M2", q6k_mma_s<2, 2>, 16, true, THREADS, false, staged_smem(2));
                run("MMA6BK-C8-S2-M2", q6k_mma_bk<8, 2, 2>, 16, true, THREADS, false, bulk_chunk_smem(8, 2));
                run("MMA6BK-C8-S3-M2", q6k_mma_bk<8, 3, 2>, 16, true, THREADS, false, bulk_chunk_smem(8, 3));
                run("MMA6BK-C8-S4-M2", q6k_mma_bk<8, 4, 2>, 16, true, THREADS, false, bulk_chunk_smem(8, 4));
                if (blocks % 16 == 0) run("MMA6BK-C16-S2-M2", q6k_mma_bk<16, 2, 2>, 16, true, THREADS, false, bulk_chunk_smem(16, 2));
                run("MMA6BK-C8-S6-M1", q6k_mma_bk<8, 6, 1>, 16, true, THREADS, false, bulk_chunk_smem(8, 6));
                if (blocks % 16 == 0) run("MMA6BK-C16-S3-M1", q6k_mma_bk<16, 3, 1>, 16, true, THREADS, false, bulk_chunk_smem(16, 3));
                continue;
            }
            if (getenv("BULK") && blocks % 8 == 0) {
                run("MMA6A-W8U2-M2", q6k_mma_a<8, 2, 2, false>, 16, true);
                run("MMA6A-W8U2-M3", q6k_mma_a<8, 2, 3, false>, 16, true);
                if (blocks >= 32) run("MMA6S-S2-M2", q6k_mma_s<2, 2>, 16, true, THREADS, false, staged_smem(2));
                auto bulk = [&](const char* name, auto kern, int stages, int minb) {
                    size_t smem = ring_smem(stages, blocks, QB);
                    if (ring_fits(smem, minb)) run(name, kern, 16, true, THREADS, true, smem);
                };
                bulk("MMA6B-S1-M4", q6k_mma_b<1, 4>, 1, 4);
                bulk("MMA6B-S1-M3", q6k_mma_b<1, 3>, 1, 3);
                bulk("MMA6B-S2-M2", q6k_mma_b<2, 2>, 2, 2);
                bulk("MMA6B-S2-M1", q6k_mma_b<2, 1>, 2, 1);
                bulk("MMA6B-S3-M1", q6k_mma_b<3, 1>, 3, 1);
                bulk("MMA6B-S4-M1", q6k_mma_b<4, 1>, 4, 1);
                bulk("MMA6B-S1-M2", q6k_mma_b<1, 2>, 1, 2);
                continue;
            }
            if (getenv("STAGED") && blocks % 8 == 0) {
                run("MMA6A-W8U2-M2", q6k_mma_a<8, 2, 2, false>, 16, true);
                run("MMA6A-W8U2-M3", q6k_mma_a<8, 2, 3, false>, 16, true);
                run("MMA6S-S2-M3", q6k_mma_s<2, 3>, 16, true, THREADS, false, staged_smem(2));
                run("MMA6S-S2-M2", q6k_mma_s<2, 2>, 16, true, THREADS, false, staged_smem(2));
                run("MMA6S-S3-M2", q6k_mma_s<3, 2>, 16, true, THREADS, false, staged_smem(3));
                run("MMA6S-S4-M1", q6k_mma_s<4, 1>, 16, true, THREADS, false, staged_smem(4));
                run("MMA6S-W4S2-M6", q6k_mma_s<2, 6, 4>, 16, true, 128, false, staged_smem(2, 4));
                run("MMA6S-W4S3-M5", q6k_mma_s<3, 5, 4>, 16, true, 128, false, staged_smem(3, 4));
                run("MMA6S-W4S2-M4", q6k_mma_s<2, 4, 4>, 16, true, 128, false, staged_smem(2, 4));
                run("MMA6S-W4S4-M3", q6k_mma_s<4, 3, 4>, 16, true, 128, false, staged_smem(4, 4));
                if (getenv("STAGED_P")) {
                    run("MMA6SP-S2-M3", q6k_mma_sp<2, 3>, 16, true, THREADS, true, staged_smem(2));
                    run("MMA6SP-S2-M2", q6k_mma_sp<2, 2>, 16, true, THREADS, true, staged_smem(2));
                }
                continue;
            }
            if (getenv("PERSIST") && blocks % 8 == 0) {
                run("MMA6A-W8U2-M2", q6k_mma_a<8, 2, 2, false>, 16, true);
                run("MMA6A-W8U2-M3", q6k_mma_a<8, 2, 3, false>, 16, true);
                run("MMA6A-W4U2-M6-T128", q6k_mma_a<4, 2, 6, false, 128>, 16, true, 128);
                run("MMA6A-W4U2-M3-T256", q6k_mma_a<4, 2, 3, false, 256>, 32, true, 256);
                run("MMA6A-W4U2-M8-T128", q6k_mma_a<4, 2, 8, false, 128>, 16, true, 128);
                if (getenv("W4_ONLY")) continue;
                run("MMA6A-W8U4-M1", q6k_mma_a<8, 4, 1, false>, 16, true);
                run("MMA6A-W8U4-M2", q6k_mma_a<8, 4, 2, false>, 16, true);
                run("MMA6A-W8U4-M3", q6k_mma_a<8, 4, 3, false>, 16, true);
                run("LOADS-W8U2-M2", q6k_mma_a<8, 2, 2, false, THREADS, true>, 16, true);
                run("LOADS-W8U2-M3", q6k_mma_a<8, 2, 3, false, THREADS, true>, 16, true);
                run("LOADS-W8U2-M4", q6k_mma_a<8, 2, 4, false, THREADS, true>, 16, true);
                if (getenv("LOADS_ONLY")) continue;
                run("MMA6P-M2", q6k_persist<2>, 16, true, THREADS, true);
                run("MMA6P-M3", q6k_persist<3>, 16, true, THREADS, true);
                run("MMA6PP-M1", q6k_persist_pipe<1>, 16, true, THREADS, true);
                run("MMA6PP-M2", q6k_persist_pipe<2>, 16, true, THREADS, true);
                run("MMA6PP-M3", q6k_persist_pipe<3>, 16, true, THREADS, true);
                continue;
            }
            run("MMA6-W8U2-PDL", q6k_mma<8, 2, 0, true>, 16, true);
            run("MMA6-W8U2-M3-PDL", q6k_mma<8, 2, 3, true>, 16, true);
            if (blocks % 4 != 0) continue;
            run("MMA6A-W8U2", q6k_mma_a<8, 2, 0, false>, 16, true);
            run("MMA6A-W8U2-M2", q6k_mma_a<8, 2, 2, false>, 16, true);
            run("MMA6A-W8U2-M3", q6k_mma_a<8, 2, 3, false>, 16, true);
            run("MMA6A-W8U1-M4", q6k_mma_a<8, 1, 4, false>, 16, true);
            run("MMA6A2-W8U2", q6k_mma_a<8, 2, 0, true>, 16, true);
            run("MMA6A2-W8U2-M2", q6k_mma_a<8, 2, 2, true>, 16, true);
            run("MMA6A2-W8U2-M3", q6k_mma_a<8, 2, 3, true>, 16, true);
            run("MMA6A-W16U2-M1", q6k_mma_a<16, 2, 1, false, 512>, 16, true, 512);
            run("MMA6A-W16U2-M2", q6k_mma_a<16, 2, 2, false, 512>, 16, true, 512);
            run("MMA6A2-W16U2-M1", q6k_mma_a<16, 2, 1, true, 512>, 16, true, 512);
            run("MMA6A2-W16U2-M2", q6k_mma_a<16, 2, 2, true, 512>, 16, true, 512);
        }
    }
    printf("{\"err\":\"%s\"}\n", cudaGetErrorString(cudaGetLastError()));
}
