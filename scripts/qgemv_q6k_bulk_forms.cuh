// The copy-engine form of qgemv_q6k_mma_forms.cu (included there after the staged forms,
// whose step products it reuses; `BULK=1`). Not part of trueno: a probe for the device
// machine's nvcc.
#pragma once

// MMA6B: a persistent grid whose blocks take tiles blockIdx.x, + gridDim.x, ...; a tile's
// 16 rows are contiguous (16 row lengths, 16-byte aligned at every width), so thread 0
// asks the copy engine for a whole tile in one `cp.async.bulk` into a ring of S stages
// (one mbarrier a stage), S tiles in flight a block from the start; the eight warps
// compute the tile in hand from its stage with MMA6A's products (warp w: super-blocks w,
// w + 8, ...), meet in shared memory, and thread 0 refills the stage with the tile S on.
// The memory sees one sequential stream a block, never a wave of warps that load and then
// all compute. Rows of whole 2048-column groups (a row 0 mod 16 bytes): a warp's offset
// past the 8-byte boundary is that of its super-blocks alone.
template <int O8>
__device__ __forceinline__ void tile_b(const uint8_t* st, uint32_t row_bytes, const Act& a, int blocks, int kw, int g, int t,
                                       const uint32_t (&m)[4], int eo, int last, float& acc0, float& acc1) {
    // Rows g and g + 8 (past the tile's last row: its last).
    const uint8_t* r0 = st + (size_t)min(g, last) * row_bytes;
    const uint8_t* r1 = st + (size_t)min(g + 8, last) * row_bytes;
#pragma unroll 1
    for (int sb = kw; sb < blocks; sb += 8) {
        StepAct x = step_act(a, sb, eo, t);
        int at = sb * QB, b8 = at & ~7;
        step_s<O8>(r0 + b8, r1 + b8, x, m, t, acc0, acc1);
    }
}

template <int S, int MINB>
__global__ void __launch_bounds__(THREADS, MINB) q6k_mma_b(const uint8_t* __restrict__ w, Act a, float* y, int rows, int blocks) {
    extern __shared__ __align__(128) uint8_t stg[];
    __shared__ float part[2][THREADS / 32][16];
    __shared__ __align__(8) uint64_t full[S];
    asm volatile("griddepcontrol.launch_dependents;");
    int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, kw = threadIdx.x >> 5;
    uint32_t row_bytes = (uint32_t)blocks * QB;
    const auto [m, eo] = b_mask(g, t);
    int o8 = (kw * QB) & 7;
    bulk_ring<S>(w, y, rows, row_bytes, stg, full, part, [&](const uint8_t* st, int last, float& acc0, float& acc1) {
        switch (o8) {
            case 0: tile_b<0>(st, row_bytes, a, blocks, kw, g, t, m, eo, last, acc0, acc1); break;
            case 2: tile_b<2>(st, row_bytes, a, blocks, kw, g, t, m, eo, last, acc0, acc1); break;
            case 4: tile_b<4>(st, row_bytes, a, blocks, kw, g, t, m, eo, last, acc0, acc1); break;
            default: tile_b<6>(st, row_bytes, a, blocks, kw, g, t, m, eo, last, acc0, acc1); break;
        }
    });
}

// MMA6BK: long rows (too long for a whole tile a stage): a block's 16-row tile in chunks
// of C super-blocks a row, each chunk 16 row copies of C * 210 bytes (rows 0 mod 16
// bytes: whole 2048-column groups) by lanes 0-15 of warp 0 into a ring of S stages, one
// transaction barrier a stage; warp w runs super-blocks w, w + 8, ... of each chunk, then
// arrives on the stage's `empty` barrier (eight arrivals a phase), which warp 0 waits on
// before refilling the stage with the chunk S on. One tile a block.
template <int C, int S, int MINB>
__global__ void __launch_bounds__(THREADS, MINB) q6k_mma_bk(const uint8_t* __restrict__ w, Act a, float* y, int rows, int blocks) {
    extern __shared__ __align__(128) uint8_t stg[];
    __shared__ float part[THREADS / 32][16];
    __shared__ __align__(8) uint64_t full[S], empty[S];
    asm volatile("griddepcontrol.launch_dependents;");
    constexpr uint32_t CHUNK_ROW = C * QB, STAGE = 16 * CHUNK_ROW;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, kw = warp;
    int tile = blockIdx.x;
    uint32_t row_bytes = (uint32_t)blocks * QB;
    int chunks = blocks / C, last = min(15, rows - 1 - 16 * tile);
    uint32_t st0 = smem32(stg), f0 = smem32(full), e0 = smem32(empty);
    // Chunk j into stage j % S: lane 0 expects the bytes, lanes 0-15 copy a row each.
    auto fill = [&](int j) {
        uint32_t bar = f0 + 8 * (j % S);
        if (lane == 0) asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(STAGE) : "memory");
        __syncwarp();
        if (lane < 16) {
            const uint8_t* src = w + ((size_t)tile * 16 + min(lane, last)) * row_bytes + (size_t)j * CHUNK_ROW;
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                             st0 + (j % S) * STAGE + lane * CHUNK_ROW),
                         "l"(src), "r"(CHUNK_ROW), "r"(bar)
                         : "memory");
        }
    };
    if (threadIdx.x == 0) {
        for (int i = 0; i < S; i++) {
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(f0 + 8 * i));
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 8;" ::"r"(e0 + 8 * i));
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (warp == 0)
        for (int j = 0; j < S && j < chunks; j++) fill(j);
    asm volatile("griddepcontrol.wait;" ::: "memory");
    const auto [m, eo] = b_mask(g, t);
    int o8 = (kw * QB) & 7;
    float acc0 = 0.f, acc1 = 0.f;
    for (int j = 0; j < chunks; j++) {
        bar_wait(f0 + 8 * (j % S), (j / S) & 1);
        const uint8_t* st = stg + (size_t)(j % S) * STAGE;
        const uint8_t* r0 = st + (size_t)g * CHUNK_ROW;
        const uint8_t* r1 = st + (size_t)(g + 8) * CHUNK_ROW;
#pragma unroll
        for (int u = kw; u < C; u += 8) {
            StepAct x = step_act(a, j * C + u, eo, t);
            int b8 = (u * QB) & ~7;
            switch (o8) {
                case 0: step_s<0>(r0 + b8, r1 + b8, x, m, t, acc0, acc1); break;
                case 2: step_s<2>(r0 + b8, r1 + b8, x, m, t, acc0, acc1); break;
                case 4: step_s<4>(r0 + b8, r1 + b8, x, m, t, acc0, acc1); break;
                default: step_s<6>(r0 + b8, r1 + b8, x, m, t, acc0, acc1); break;
            }
        }
        __syncwarp();
        if (lane == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(e0 + 8 * (j % S)) : "memory");
        if (warp == 0 && j + S < chunks) {
            bar_wait(e0 + 8 * (j % S), (j / S) & 1);
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            fill(j + S);
        }
    }
    store_tile<8>(part, acc0, acc1, y, rows);
}

inline size_t bulk_chunk_smem(int C, int S) { return (size_t)S * 16 * C * QB; }
