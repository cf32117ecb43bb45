// The staged form of qgemv_q4k_forms.cu's MMA1 (included there after it; `STAGED=1`).
// Not part of trueno: a probe for the device machine's nvcc.
#pragma once

// MMA1S: MMA1's products (U = 1), its weights copied into shared memory by `cp.async`
// first. A warp's step (its 16 rows' super-block `kw + W j`) is 16 slots of 144 bytes
// (Q4_K's super-blocks are 16-byte aligned at every row and block: 144 = 9 x 16), 144
// chunks a step, copied by lanes in turn (chunk `lane + 32 i` is row `/ 9`, chunk `% 9`:
// the stage is the 16 rows' super-blocks back to back). S slots a warp: steps j + 1 ..
// j + S - 1 are in flight while step j's products read its slot, no register held for
// them (MMA1 holds a super-block's six 16-byte pieces a lane). The 144-byte pitch puts
// each quarter-warp's 16-byte reads (rows g, g + 1, quant groups t) in distinct banks.
// The next step's activations wait in registers during this step's products.
constexpr int KSTEP = 16 * BB;  // a warp's step: 2304 bytes

// A step's activations for lane 4g + t: sub-block g's 32 quants, its pair's sums, the scale.
struct StepActK {
    uint4 x0, x1;
    int s0, s1;
    float dx;
};
__device__ __forceinline__ StepActK step_act_k(const Act& a, int sb, int g, int t) {
    const int8_t* aq = a.q + (size_t)sb * 256 + 32 * g;
    int4 sm = *(const int4*)(a.s16 + (size_t)sb * 16 + 4 * t);
    return StepActK{*(const uint4*)aq, *(const uint4*)(aq + 16), sm.x + sm.y, sm.z + sm.w, a.d[sb]};
}

// A step's products from rows g and g + 8 of a stage (`r0`, `r1`: their super-blocks).
__device__ __forceinline__ void q4k_step_s(const uint8_t* r0, const uint8_t* r1, const StepActK& x, const LaneScales& ls, int t, uint32_t m0,
                                           uint32_t m1, float& acc0, float& acc1) {
    uint4 q0a = *(const uint4*)(r0 + 16 + 32 * t), q0b = *(const uint4*)(r0 + 32 + 32 * t);
    uint4 q1a = *(const uint4*)(r1 + 16 + 32 * t), q1b = *(const uint4*)(r1 + 32 + 32 * t);
    uint32_t r0w[8] = {q0a.x, q0a.y, q0a.z, q0a.w, q0b.x, q0b.y, q0b.z, q0b.w};
    uint32_t r1w[8] = {q1a.x, q1a.y, q1a.z, q1a.w, q1b.x, q1b.y, q1b.z, q1b.w};
    uint32_t xs[8] = {x.x0.x, x.x0.y, x.x0.z, x.x0.w, x.x1.x, x.x1.y, x.x1.z, x.x1.w};
    int c[4] = {0, 0, 0, 0};
#pragma unroll
    for (int e = 0; e < 8; e++)
        mma_u8s8(c, r0w[e] & 0x0F0F0F0F, r1w[e] & 0x0F0F0F0F, r0w[e] & 0xF0F0F0F0, r1w[e] & 0xF0F0F0F0, xs[e] & m0, xs[e] & m1);
    uint4 h0 = *(const uint4*)r0, h1 = *(const uint4*)r1;
    acc0 += mma_scaled(h0, ls, c[0], c[1], x.s0, x.s1, x.dx);
    acc1 += mma_scaled(h1, ls, c[2], c[3], x.s0, x.s1, x.dx);
}

template <int W, int S, int MINB>
__global__ void __launch_bounds__(32 * W, MINB) q4k_mma_s(const uint8_t* __restrict__ w, Act a, float* y, int rows, int blocks) {
    constexpr int NT = 32 * W;  // one 16-row tile of W warps a block
    extern __shared__ __align__(16) uint8_t stg[];
    __shared__ float part[NT / 32][16];
    asm volatile("griddepcontrol.launch_dependents;");
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, kw = warp;
    int tile = blockIdx.x;
    uint32_t row_bytes = (uint32_t)blocks * BB;
    const uint8_t* tb = w + (size_t)tile * 16 * row_bytes;
    // Chunk lane + 32i of a step (i < 4 every lane, i = 4 lanes 0-15: 144 chunks).
    uint32_t src[5];
    tile_chunks<9>(src, lane, tile, rows, row_bytes);
    uint8_t* my = stg + warp * S * KSTEP;
    int n = (blocks - kw + W - 1) / W;
    auto issue = [&](int j) {
        const uint8_t* base = tb + (size_t)(kw + W * j) * BB;
        uint8_t* dst = my + (j % S) * KSTEP + 16 * lane;
#pragma unroll
        for (int i = 0; i < 4; i++) cp16(dst + 512 * i, base + src[i]);
        if (lane < 16) cp16(dst + 2048, base + src[4]);
    };
#pragma unroll
    for (int s = 0; s + 1 < S; s++) {
        if (s < n) issue(s);
        commit();
    }
    // The weights are never a kernel's output; the activations may be.
    asm volatile("griddepcontrol.wait;" ::: "memory");
    uint32_t m0 = g == 2 * t ? ~0u : 0u, m1 = g == 2 * t + 1 ? ~0u : 0u;
    LaneScales ls(t);
    float acc0 = 0.f, acc1 = 0.f;
    StepActK x = step_act_k(a, min(kw, blocks - 1), g, t);
#pragma unroll 1
    for (int j = 0; j < n; j++) {
        wait_group<S - 2>();
        __syncwarp();
        if (j + S - 1 < n) issue(j + S - 1);
        commit();
        StepActK xn = j + 1 < n ? step_act_k(a, kw + W * (j + 1), g, t) : x;
        const uint8_t* r0 = my + (j % S) * KSTEP + g * BB;
        q4k_step_s(r0, r0 + 8 * BB, x, ls, t, m0, m1, acc0, acc1);
        x = xn;
    }
    wait_group<0>();
    store_tile<W, NT>(part, acc0, acc1, y, rows);
}

// Dynamic shared bytes of MMA1S with W warps of S slots.
constexpr size_t q4k_staged_smem(int W, int S) { return (size_t)W * S * KSTEP; }

// MMA1B: qgemv_q6k_bulk_forms.cuh's MMA6B for Q4_K: a persistent grid, each block's
// 16-row tiles (contiguous; 144-byte super-blocks, so any width) copied whole by the copy
// engine into a ring of S stages, MMA1's products read from the stage (warp w:
// super-blocks w, w + 8, ...), the tile's sums met in shared memory, then the stage
// refilled with the tile S on.
template <int S, int MINB>
__global__ void __launch_bounds__(THREADS, MINB) q4k_mma_b(const uint8_t* __restrict__ w, Act a, float* y, int rows, int blocks) {
    extern __shared__ __align__(128) uint8_t stg[];
    __shared__ float part[2][THREADS / 32][16];
    __shared__ __align__(8) uint64_t full[S];
    asm volatile("griddepcontrol.launch_dependents;");
    int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, kw = threadIdx.x >> 5;
    uint32_t row_bytes = (uint32_t)blocks * BB;
    uint32_t m0 = g == 2 * t ? ~0u : 0u, m1 = g == 2 * t + 1 ? ~0u : 0u;
    LaneScales ls(t);
    bulk_ring<S>(w, y, rows, row_bytes, stg, full, part, [&](const uint8_t* st, int last, float& acc0, float& acc1) {
        const uint8_t* r0 = st + (size_t)min(g, last) * row_bytes;
        const uint8_t* r1 = st + (size_t)min(g + 8, last) * row_bytes;
#pragma unroll 1
        for (int sb = kw; sb < blocks; sb += 8) q4k_step_s(r0 + sb * BB, r1 + sb * BB, step_act_k(a, sb, g, t), ls, t, m0, m1, acc0, acc1);
    });
}
