// What C's updates cost trueno's AVX-512 GEMM at 1024^3, in a model of its blocking with
// nothing else in it: KC 256, MC 512, NC 1024, 8x32 tiles, B panels outside (each in L1
// while the block's A panels pass it from L2), A and B already laid out as packed panels
// (no packing), one thread. The same sweep runs with C's updates in six forms:
//
//   as trueno   C read from the second k block on, its tile's 16 lines prefetched one
//               every 8 k steps from the tile's start; written every block
//   no C        each tile stored to one L1-resident scratch instead
//   stores      C written, never read (every block as if beta were 0)
//   loads       C read and prefetched as trueno does, the tile stored to the scratch
//   C in L2     as trueno, on a C of 128 rows (512 KiB) that the tiles wrap over
//   late        as trueno, the 16 lines asked for over the last 64 k steps instead
//
// Build and run (x86-64 with AVX-512; GFLOP/s, best of six products per form, three rounds):
//   g++ -O3 -mavx512f -mfma -o /tmp/c_updates scripts/gemm_c_updates_model.cpp
//   /tmp/c_updates [LDC]        # C's row stride in floats (default 1024)
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { KC = 256, MC = 512, N = 1024, K = 1024, M = 1024, LINES = 16 };
enum Form { AS_TRUENO, NO_C, STORES, LOADS, C_IN_L2, LATE, FORMS };
static const char *NAMES[FORMS] = {"as trueno", "no C", "stores", "loads", "C in L2", "late"};

static int form;
static long ldc = N;
static float *A, *B, *C;
static float scratch[8 * 32] __attribute__((aligned(64)));

static double now() {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

// Line q (0..15) of the 8 x 32 tile at c: row q / 2, its first or second 64 bytes.
static inline const char *tile_line(const float *c, int q) {
    return (const char *)(c + (q >> 1) * ldc) + (q & 1) * 64;
}

// One 8 x 32 tile over KC steps; `beta1`: add C's old value (every block but the first).
__attribute__((noinline)) static void tile(const float *a, const float *b, float *c, int beta1) {
    __m512 acc[8][2];
    for (int i = 0; i < 8; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    if (form == STORES) beta1 = 0;
    const int prefetch = beta1 && form != NO_C;
    for (int p = 0; p < KC; p++) {
        if (prefetch && form != LATE && (p & 7) == 0 && (p >> 3) < LINES)
            _mm_prefetch(tile_line(c, p >> 3), _MM_HINT_T0);
        if (prefetch && form == LATE && p >= KC - 4 * LINES && (p & 3) == 0)
            _mm_prefetch(tile_line(c, (p - (KC - 4 * LINES)) >> 2), _MM_HINT_T0);
        __m512 b0 = _mm512_load_ps(b + p * 32), b1 = _mm512_load_ps(b + p * 32 + 16);
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) {
            __m512 ai = _mm512_set1_ps(a[p * 8 + i]);
            acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
        }
    }
    for (int i = 0; i < 8; i++) {
        float *d = c + i * ldc;
        if (beta1 && form != NO_C) {
            acc[i][0] = _mm512_add_ps(acc[i][0], _mm512_load_ps(d));
            acc[i][1] = _mm512_add_ps(acc[i][1], _mm512_load_ps(d + 16));
        }
        float *out = (form == NO_C || form == LOADS) ? scratch + i * 32 : d;
        _mm512_store_ps(out, acc[i][0]);
        _mm512_store_ps(out + 16, acc[i][1]);
    }
}

static void gemm() {
    for (int pc = 0; pc < K; pc += KC)
        for (int ic = 0; ic < M; ic += MC) {
            const float *ablock = A + (long)(ic / MC) * MC * KC;
            for (int jr = 0; jr < N / 32; jr++)
                for (int ir = 0; ir < MC / 8; ir++) {
                    long row = form == C_IN_L2 ? (ic + ir * 8) % 128 : ic + ir * 8;
                    tile(ablock + (long)ir * 8 * KC, B + (long)jr * KC * 32, C + row * ldc + jr * 32,
                         pc > 0);
                }
        }
}

int main(int argc, char **argv) {
    if (argc > 1) ldc = atol(argv[1]);
    if (ldc < N || ldc % 16) {
        fprintf(stderr, "LDC must be a multiple of 16 and at least %d\n", N);
        return 2;
    }
    A = (float *)aligned_alloc(64, (long)M * KC * 4);
    B = (float *)aligned_alloc(64, (long)KC * N * 4);
    C = (float *)aligned_alloc(64, (long)M * ldc * 4);
    for (long i = 0; i < (long)M * KC; i++) A[i] = (i % 7) * 0.01f;
    for (long i = 0; i < (long)KC * N; i++) B[i] = (i % 5) * 0.01f;
    memset(C, 0, (long)M * ldc * 4);
    printf("C row stride %ld floats\n", ldc);
    for (int round = 0; round < 3; round++) {
        for (form = 0; form < FORMS; form++) {
            double best = 1e30;
            for (int i = 0; i < 6; i++) {
                double t = now();
                gemm();
                t = now() - t;
                if (t < best) best = t;
            }
            printf("%-10s %6.1f GFLOP/s%s", NAMES[form], 2.0 * M * N * K / best / 1e9,
                   form + 1 < FORMS ? " | " : "\n");
        }
    }
    return 0;
}
