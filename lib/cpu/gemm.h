// cpu/gemm.h — the one matrix product the CPU ops are built on (cpu/ops.h's
// matmul, the fused classifier's tiles), fast without BLAS.
//
// Cm[m][n] (+)= sum_k A(m,k) * Bm(k,n), where A(m,k) = A[m*a_m + k*a_k] and
// Bm(k,n) = Bm[k*b_k + n*b_n]; the strides let one routine serve all three
// products of a linear layer (forward, input gradient, weight gradient)
// without transposing anything in memory.
//
// The algorithm is Goto's (the one BLIS and OpenBLAS use): the output is cut
// into blocks of MC rows by NC columns, one thread's task each; for each KC
// slice of the sum, the task copies ("packs") its KC x NC block of Bm into
// panels of NR columns, each panel's values in the order the kernel reads them
// (k by k, NR values each: one stream, no stride). The micro-kernel then
// computes an MR x NR tile of the output from MR rows of A and one B panel,
// its MR x NR sums held in vector registers the whole time: each step of k
// loads NR values of B, broadcasts MR values of A and does MR x NR
// multiply-adds. The sizes follow the caches: a B panel (KC x NR) stays in L1
// while the kernel sweeps down every MR rows of the block's A (MC x KC, in
// L2) (doc/performance.md draws it).
//
// A is read where it lies, not packed. Packing A pays when one A block serves
// many B panels of a wide task; here a step's A is its activations (B x T
// rows), read by every column block of a weight of 768 to 50,304 columns: a
// copy for each would move A hundreds of times (it was a sixth of a GPT-2
// step's time). Its MR rows are MR short streams the prefetcher follows; a
// weight gradient's A (the output gradient, transposed) is read MR values at
// a time, a packed panel's own order. B is packed: a panel read in place would
// be KC rows a weight's width apart, all in the same few cache sets.
//
// The register tile is the instruction set's: its sums must fit the vector
// registers with room for the B values and the broadcast, or the compiler
// keeps them in memory (load and store around every multiply-add):
//   AVX-512 (32 registers of 16 floats): 8 x 32, 16 sums + 2 of B + 1 of A
//     (8 rows: 256 = B x T rows of a small batch in whole tiles);
//   AVX2 with FMA (16 registers of 8):   6 x 16, 12 sums + 2 of B + 1 of A;
//   anything else (plain C, which gcc vectorizes: NEON's 32 registers of 4): 4 x 16.
// Each output element is owned by one task (one thread) and summed in k
// order, always, by one fused multiply-add a term: the same bits for any
// thread count, and on every instruction set (the ISA changes the tile, never
// an element's sum).
#ifndef GPTMEM_GEMM_H
#define GPTMEM_GEMM_H

#include <math.h>
#include <omp.h>
#include <string.h>
#include "core/sizes.h"
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

// The two vector instruction sets' kernel is one, over a vector of NR / 2 floats: its load, store, zero,
// broadcast of one float and fused multiply-add.
#if defined(__AVX512F__)
enum { GEMM_MR = 8, GEMM_NR = 32 };
#define GEMM_ISA "AVX-512, an 8 x 32 tile"
typedef __m512 GemmVec;
#define VEC_LOAD _mm512_loadu_ps
#define VEC_STORE _mm512_storeu_ps
#define VEC_ZERO _mm512_setzero_ps
#define VEC_SPLAT _mm512_set1_ps
#define VEC_FMA _mm512_fmadd_ps
#elif defined(__AVX2__) && defined(__FMA__)
enum { GEMM_MR = 6, GEMM_NR = 16 };
#define GEMM_ISA "AVX2 + FMA, a 6 x 16 tile"
typedef __m256 GemmVec;
#define VEC_LOAD _mm256_loadu_ps
#define VEC_STORE _mm256_storeu_ps
#define VEC_ZERO _mm256_setzero_ps
#define VEC_SPLAT _mm256_set1_ps
#define VEC_FMA _mm256_fmadd_ps
#else
enum { GEMM_MR = 4, GEMM_NR = 16 };
#define GEMM_ISA "plain C, a 4 x 16 tile"
#endif
// A B panel, KC x NR x 4 B (16 KiB with AVX-512), in L1; A's block, MC x KC x 4 B (128 KiB), in L2; the packed B block,
// KC x NC x 4 B (128 KiB), on the task's stack. MC is 256 rows rounded up to whole tiles: a step's B x T rows (256 at
// B4 T64) are one block, so each B block is packed once. A sum of at most 2 KC terms (a weight gradient's: K = B x T)
// is one slice, its B block half as wide: the output tile is stored once, not twice (doc/performance.md).
enum { GEMM_KC = 128, GEMM_MC = (256 + GEMM_MR - 1) / GEMM_MR * GEMM_MR, GEMM_NC = 256 };

// --- the micro-kernel: c (an MR x NR tile, row stride ldc) = (first ? 0 : c) + A^T bp over kc ---------------
// A's MR rows are read where they are: A(i, k) = a[i a_m + k a_k] (a packed panel is a_m 1, a_k MR); bp: kc
// steps of NR values of B.
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
void gemm_kernel(int kc, const float *a, long a_m, long a_k, const float *bp, float *c, long ldc, int first) {
    enum { H = GEMM_NR / 2 };
    GemmVec s0[GEMM_MR], s1[GEMM_MR];  // row i's NR sums: s0[i] (columns 0 .. H-1), s1[i] (H .. NR-1)
#pragma GCC unroll 8
    for (int i = 0; i < GEMM_MR; i++) {
        s0[i] = first ? VEC_ZERO() : VEC_LOAD(c + i * ldc);
        s1[i] = first ? VEC_ZERO() : VEC_LOAD(c + i * ldc + H);
    }
    for (long k = 0; k < kc * a_k; k += a_k, bp += GEMM_NR) {
        GemmVec b0 = VEC_LOAD(bp), b1 = VEC_LOAD(bp + H);
#pragma GCC unroll 8
        for (int i = 0; i < GEMM_MR; i++) {
            GemmVec x = VEC_SPLAT(a[i * a_m + k]);
            s0[i] = VEC_FMA(x, b0, s0[i]), s1[i] = VEC_FMA(x, b1, s1[i]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < GEMM_MR; i++) VEC_STORE(c + i * ldc, s0[i]), VEC_STORE(c + i * ldc + H, s1[i]);
}
#else
// Four named rows of sums (a 2-D array of them gets spilled to the stack), each a loop gcc vectorizes.
void gemm_kernel(int kc, const float *a, long a_m, long a_k, const float *bp, float *c, long ldc, int first) {
    float c0[GEMM_NR], c1[GEMM_NR], c2[GEMM_NR], c3[GEMM_NR];
    for (int j = 0; j < GEMM_NR; j++) {
        c0[j] = first ? 0.0f : c[j], c1[j] = first ? 0.0f : c[ldc + j];
        c2[j] = first ? 0.0f : c[2 * ldc + j], c3[j] = first ? 0.0f : c[3 * ldc + j];
    }
    const float *a0 = a, *a1 = a + a_m, *a2 = a + 2 * a_m, *a3 = a + 3 * a_m;
    for (long k = 0; k < kc * a_k; k += a_k, bp += GEMM_NR)
        for (int j = 0; j < GEMM_NR; j++) {
            c0[j] = fmaf(a0[k], bp[j], c0[j]), c1[j] = fmaf(a1[k], bp[j], c1[j]);
            c2[j] = fmaf(a2[k], bp[j], c2[j]), c3[j] = fmaf(a3[k], bp[j], c3[j]);
        }
    for (int j = 0; j < GEMM_NR; j++) c[j] = c0[j], c[ldc + j] = c1[j], c[2 * ldc + j] = c2[j], c[3 * ldc + j] = c3[j];
}
#endif

// A tile at an edge of the output (mr < MR rows or nr < NR columns): its rows of A copied into a panel
// with zeros past mr (reading MR rows in place would run past A), its sums through a full tile of scratch,
// so the kernel (and each element's sum) is the same as inside.
void gemm_kernel_edge(int kc, const float *a, long a_m, long a_k, const float *bp, float *c, long ldc, int first,
                      int mr, int nr) {
    float ap[GEMM_MR * 2 * GEMM_KC], t[GEMM_MR * GEMM_NR] = {0};
    for (int k = 0; k < kc; k++)
        for (int i = 0; i < GEMM_MR; i++) ap[k * GEMM_MR + i] = i < mr ? a[i * a_m + k * a_k] : 0.0f;
    for (int i = 0; i < mr && !first; i++) memcpy(t + i * GEMM_NR, c + i * ldc, sizeof(float) * nr);
    gemm_kernel(kc, ap, 1, GEMM_MR, bp, t, GEMM_NR, first);
    for (int i = 0; i < mr; i++) memcpy(c + i * ldc, t + i * GEMM_NR, sizeof(float) * nr);
}

// --- packing ---------------------------------------------------------------------------------------------

// Bm(k0.., n0..) (kc x nc) into panels of NR columns: panel q holds, for each k, columns q NR .. q NR + NR - 1
// (zeros past nc).
void gemm_pack_b(float *bp, const float *Bm, long b_k, long b_n, int k0, int kc, int n0, int nc) {
    for (int q = 0; q < nc; q += GEMM_NR, bp += (size_t)GEMM_NR * kc) {
        int nr = nc - q < GEMM_NR ? nc - q : GEMM_NR;
        const float *b = Bm + (long)k0 * b_k + (long)(n0 + q) * b_n;
        if (b_n == 1 && nr == GEMM_NR)
            for (int k = 0; k < kc; k++) memcpy(bp + k * GEMM_NR, b + k * b_k, sizeof(float) * GEMM_NR);
        else if (b_k == 1)
            for (int j = 0; j < GEMM_NR; j++)
                for (int k = 0; k < kc; k++) bp[k * GEMM_NR + j] = j < nr ? b[j * b_n + k] : 0.0f;
        else
            for (int k = 0; k < kc; k++)
                for (int j = 0; j < GEMM_NR; j++) bp[k * GEMM_NR + j] = j < nr ? b[k * b_k + j * b_n] : 0.0f;
    }
}

// The source of the block gemm_pack_b will pack next, asked of the memory now (a prefetch a cache line), so that it
// arrives while the kernel works on this one: a weight is read from memory once a GEMM, and without this the packing
// waits for it.
void gemm_prefetch_b(const float *Bm, long b_k, long b_n, int k0, int kc, int n0, int nc) {
    if (b_n == 1)
        for (int k = 0; k < kc; k++)
            for (int j = 0; j < nc; j += 16) __builtin_prefetch(Bm + (long)(k0 + k) * b_k + n0 + j);
    else if (b_k == 1)
        for (int j = 0; j < nc; j++)
            for (int k = 0; k < kc; k += 16) __builtin_prefetch(Bm + (long)(n0 + j) * b_n + k0 + k);
}

// --- the product -------------------------------------------------------------------------------------------

// One task: the output block of rows [m0, m0 + mc) and columns [n0, n0 + nc), the whole sum, ks terms at a time.
void gemm_block(int mc, int nc, int K, int ks, const float *A, long a_m, long a_k, const float *Bm, long b_k, long b_n,
                float *Cm, long ldc, int accumulate, int m0, int n0) {
    float bp[GEMM_KC * GEMM_NC];
    for (int k0 = 0; k0 < K; k0 += ks) {
        int kc = K - k0 < ks ? K - k0 : ks, first = k0 == 0 && !accumulate;
        gemm_pack_b(bp, Bm, b_k, b_n, k0, kc, n0, nc);
        if (k0 + kc < K) gemm_prefetch_b(Bm, b_k, b_n, k0 + kc, K - k0 - kc < ks ? K - k0 - kc : ks, n0, nc);
        for (int q = 0; q < nc; q += GEMM_NR) {  // a B panel in L1 ...
            int nr = nc - q < GEMM_NR ? nc - q : GEMM_NR;
            for (int p = 0; p < mc; p += GEMM_MR) {  // ... against every A panel of the block
                int mr = mc - p < GEMM_MR ? mc - p : GEMM_MR;
                float *c = Cm + (long)(m0 + p) * ldc + n0 + q;
                const float *a = A + (long)(m0 + p) * a_m + (long)k0 * a_k, *b = bp + (size_t)q * kc;
                if (mr == GEMM_MR && nr == GEMM_NR) gemm_kernel(kc, a, a_m, a_k, b, c, ldc, first);
                else gemm_kernel_edge(kc, a, a_m, a_k, b, c, ldc, first, mr, nr);
            }
        }
    }
}

void gemm(int M, int N, int K, const float *A, long a_m, long a_k, const float *Bm, long b_k, long b_n, float *Cm,
          long ldc, int accumulate) {
    if (K == 0) {  // (an empty sum: the output is zero, or as it was)
        for (int m = 0; m < M && !accumulate; m++) memset(Cm + (long)m * ldc, 0, sizeof(float) * N);
        return;
    }
    // (which task computes an element never changes its sum; inside another loop's thread, one thread: attention's)
    int parallel = (size_t)M * N * K / 64 >= PARALLEL_MIN && !omp_in_parallel();
    int ks = K <= 2 * GEMM_KC ? K : GEMM_KC;  // the slice of the sum; the B block ks x nc fits GEMM_KC x GEMM_NC
    int mblocks = (M + GEMM_MC - 1) / GEMM_MC, nc = ks > GEMM_KC ? GEMM_NC / 2 : GEMM_NC;
    while (parallel && nc > 2 * GEMM_NR && mblocks * ((N + nc - 1) / nc) < 4 * omp_get_max_threads())
        nc /= 2;  // narrower column blocks, so that the threads share the tasks evenly (a step's 768 columns: 6, not 3)
    int nblocks = (N + nc - 1) / nc;
#pragma omp parallel for collapse(2) schedule(dynamic) if (parallel)
    for (int mb = 0; mb < mblocks; mb++)
        for (int nb = 0; nb < nblocks; nb++) {
            int m0 = mb * GEMM_MC, n0 = nb * nc;
            gemm_block(M - m0 < GEMM_MC ? M - m0 : GEMM_MC, N - n0 < nc ? N - n0 : nc, K, ks, A, a_m, a_k, Bm, b_k, b_n, Cm,
                       ldc, accumulate, m0, n0);
        }
}

#endif
