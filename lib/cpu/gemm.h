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
// slice of the sum, the task copies ("packs") its MC x KC block of A into
// panels of MR rows, each panel's values in the order the kernel reads them
// (k by k, MR rows each: one stream, no stride), and its KC x NC block of Bm
// into panels of NR columns the same way. The micro-kernel then computes an
// MR x NR tile of the output from one A panel and one B panel, its MR x NR sums
// held in vector registers the whole time: each step of k loads NR values of
// B, broadcasts MR values of A and does MR x NR multiply-adds. The sizes follow
// the caches: a B panel (KC x NR) stays in L1 while the kernel sweeps down
// every A panel of the block (MC x KC, in L2), and the B block (KC x NC) stays
// in L2/L3 while the A panels are used against each of its panels
// (doc/performance.md draws it).
//
// The register tile is the instruction set's: its sums must fit the vector
// registers with room for the B values and the broadcast, or the compiler
// keeps them in memory (load and store around every multiply-add):
//   AVX-512 (32 registers of 16 floats): 6 x 32, 12 sums + 2 of B + 1 of A;
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

#if defined(__AVX512F__)
enum { GEMM_MR = 6, GEMM_NR = 32 };
#define GEMM_ISA "AVX-512, a 6 x 32 tile"
#elif defined(__AVX2__) && defined(__FMA__)
enum { GEMM_MR = 6, GEMM_NR = 16 };
#define GEMM_ISA "AVX2 + FMA, a 6 x 16 tile"
#else
enum { GEMM_MR = 4, GEMM_NR = 16 };
#define GEMM_ISA "plain C, a 4 x 16 tile"
#endif
// A B panel, KC x NR x 4 B (8 KiB with AVX2), in L1; an A block, MC x KC x 4 B (129 KiB), and a B block, KC x NC x 4 B
// (128 KiB), in L2. MC is 43 panels of 6 rows, 258: a step's N = B x T rows (256 at B4 T64) are one block, so each
// B block is packed once (measured on an AVX2 Zen 3 against other sizes: doc/performance.md).
enum { GEMM_KC = 128, GEMM_MC = 43 * GEMM_MR, GEMM_NC = 256 };

// --- the micro-kernel: c (an MR x NR tile, row stride ldc) = (first ? 0 : c) + ap^T bp over kc ------------
// ap: kc steps of MR values of A; bp: kc steps of NR values of B.
#if defined(__AVX512F__)
void gemm_kernel(int kc, const float *ap, const float *bp, float *c, long ldc, int first) {
    __m512 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
    if (first) {
        c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = _mm512_setzero_ps();
    } else {
        c00 = _mm512_loadu_ps(c), c01 = _mm512_loadu_ps(c + 16);
        c10 = _mm512_loadu_ps(c + ldc), c11 = _mm512_loadu_ps(c + ldc + 16);
        c20 = _mm512_loadu_ps(c + 2 * ldc), c21 = _mm512_loadu_ps(c + 2 * ldc + 16);
        c30 = _mm512_loadu_ps(c + 3 * ldc), c31 = _mm512_loadu_ps(c + 3 * ldc + 16);
        c40 = _mm512_loadu_ps(c + 4 * ldc), c41 = _mm512_loadu_ps(c + 4 * ldc + 16);
        c50 = _mm512_loadu_ps(c + 5 * ldc), c51 = _mm512_loadu_ps(c + 5 * ldc + 16);
    }
    for (int k = 0; k < kc; k++, ap += GEMM_MR, bp += GEMM_NR) {
        __m512 b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bp + 16), a;
        a = _mm512_set1_ps(ap[0]), c00 = _mm512_fmadd_ps(a, b0, c00), c01 = _mm512_fmadd_ps(a, b1, c01);
        a = _mm512_set1_ps(ap[1]), c10 = _mm512_fmadd_ps(a, b0, c10), c11 = _mm512_fmadd_ps(a, b1, c11);
        a = _mm512_set1_ps(ap[2]), c20 = _mm512_fmadd_ps(a, b0, c20), c21 = _mm512_fmadd_ps(a, b1, c21);
        a = _mm512_set1_ps(ap[3]), c30 = _mm512_fmadd_ps(a, b0, c30), c31 = _mm512_fmadd_ps(a, b1, c31);
        a = _mm512_set1_ps(ap[4]), c40 = _mm512_fmadd_ps(a, b0, c40), c41 = _mm512_fmadd_ps(a, b1, c41);
        a = _mm512_set1_ps(ap[5]), c50 = _mm512_fmadd_ps(a, b0, c50), c51 = _mm512_fmadd_ps(a, b1, c51);
    }
    _mm512_storeu_ps(c, c00), _mm512_storeu_ps(c + 16, c01);
    _mm512_storeu_ps(c + ldc, c10), _mm512_storeu_ps(c + ldc + 16, c11);
    _mm512_storeu_ps(c + 2 * ldc, c20), _mm512_storeu_ps(c + 2 * ldc + 16, c21);
    _mm512_storeu_ps(c + 3 * ldc, c30), _mm512_storeu_ps(c + 3 * ldc + 16, c31);
    _mm512_storeu_ps(c + 4 * ldc, c40), _mm512_storeu_ps(c + 4 * ldc + 16, c41);
    _mm512_storeu_ps(c + 5 * ldc, c50), _mm512_storeu_ps(c + 5 * ldc + 16, c51);
}
#elif defined(__AVX2__) && defined(__FMA__)
void gemm_kernel(int kc, const float *ap, const float *bp, float *c, long ldc, int first) {
    __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
    if (first) {
        c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = _mm256_setzero_ps();
    } else {
        c00 = _mm256_loadu_ps(c), c01 = _mm256_loadu_ps(c + 8);
        c10 = _mm256_loadu_ps(c + ldc), c11 = _mm256_loadu_ps(c + ldc + 8);
        c20 = _mm256_loadu_ps(c + 2 * ldc), c21 = _mm256_loadu_ps(c + 2 * ldc + 8);
        c30 = _mm256_loadu_ps(c + 3 * ldc), c31 = _mm256_loadu_ps(c + 3 * ldc + 8);
        c40 = _mm256_loadu_ps(c + 4 * ldc), c41 = _mm256_loadu_ps(c + 4 * ldc + 8);
        c50 = _mm256_loadu_ps(c + 5 * ldc), c51 = _mm256_loadu_ps(c + 5 * ldc + 8);
    }
    for (int k = 0; k < kc; k++, ap += GEMM_MR, bp += GEMM_NR) {
        __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8), a;
        a = _mm256_broadcast_ss(ap), c00 = _mm256_fmadd_ps(a, b0, c00), c01 = _mm256_fmadd_ps(a, b1, c01);
        a = _mm256_broadcast_ss(ap + 1), c10 = _mm256_fmadd_ps(a, b0, c10), c11 = _mm256_fmadd_ps(a, b1, c11);
        a = _mm256_broadcast_ss(ap + 2), c20 = _mm256_fmadd_ps(a, b0, c20), c21 = _mm256_fmadd_ps(a, b1, c21);
        a = _mm256_broadcast_ss(ap + 3), c30 = _mm256_fmadd_ps(a, b0, c30), c31 = _mm256_fmadd_ps(a, b1, c31);
        a = _mm256_broadcast_ss(ap + 4), c40 = _mm256_fmadd_ps(a, b0, c40), c41 = _mm256_fmadd_ps(a, b1, c41);
        a = _mm256_broadcast_ss(ap + 5), c50 = _mm256_fmadd_ps(a, b0, c50), c51 = _mm256_fmadd_ps(a, b1, c51);
    }
    _mm256_storeu_ps(c, c00), _mm256_storeu_ps(c + 8, c01);
    _mm256_storeu_ps(c + ldc, c10), _mm256_storeu_ps(c + ldc + 8, c11);
    _mm256_storeu_ps(c + 2 * ldc, c20), _mm256_storeu_ps(c + 2 * ldc + 8, c21);
    _mm256_storeu_ps(c + 3 * ldc, c30), _mm256_storeu_ps(c + 3 * ldc + 8, c31);
    _mm256_storeu_ps(c + 4 * ldc, c40), _mm256_storeu_ps(c + 4 * ldc + 8, c41);
    _mm256_storeu_ps(c + 5 * ldc, c50), _mm256_storeu_ps(c + 5 * ldc + 8, c51);
}
#else
// Four named rows of sums (a 2-D array of them gets spilled to the stack), each a loop gcc vectorizes.
void gemm_kernel(int kc, const float *ap, const float *bp, float *c, long ldc, int first) {
    float c0[GEMM_NR], c1[GEMM_NR], c2[GEMM_NR], c3[GEMM_NR];
    for (int j = 0; j < GEMM_NR; j++) {
        c0[j] = first ? 0.0f : c[j], c1[j] = first ? 0.0f : c[ldc + j];
        c2[j] = first ? 0.0f : c[2 * ldc + j], c3[j] = first ? 0.0f : c[3 * ldc + j];
    }
    for (int k = 0; k < kc; k++, ap += GEMM_MR, bp += GEMM_NR)
        for (int j = 0; j < GEMM_NR; j++) {
            c0[j] = fmaf(ap[0], bp[j], c0[j]), c1[j] = fmaf(ap[1], bp[j], c1[j]);
            c2[j] = fmaf(ap[2], bp[j], c2[j]), c3[j] = fmaf(ap[3], bp[j], c3[j]);
        }
    for (int j = 0; j < GEMM_NR; j++) c[j] = c0[j], c[ldc + j] = c1[j], c[2 * ldc + j] = c2[j], c[3 * ldc + j] = c3[j];
}
#endif

// A tile at an edge of the output (mr < MR rows or nr < NR columns): through a full tile of
// scratch, so the kernel (and each element's sum) is the same as inside.
void gemm_kernel_edge(int kc, const float *ap, const float *bp, float *c, long ldc, int first, int mr, int nr) {
    float t[GEMM_MR * GEMM_NR] = {0};
    for (int i = 0; i < mr && !first; i++) memcpy(t + i * GEMM_NR, c + i * ldc, sizeof(float) * nr);
    gemm_kernel(kc, ap, bp, t, GEMM_NR, first);
    for (int i = 0; i < mr; i++) memcpy(c + i * ldc, t + i * GEMM_NR, sizeof(float) * nr);
}

// --- packing ---------------------------------------------------------------------------------------------

// A(m0.., k0..) (mc x kc) into panels of MR rows: panel p holds, for each k, rows p MR .. p MR + MR - 1
// (zeros past mc). Read along whichever of A's strides is contiguous.
void gemm_pack_a(float *ap, const float *A, long a_m, long a_k, int m0, int mc, int k0, int kc) {
    for (int p = 0; p < mc; p += GEMM_MR, ap += (size_t)GEMM_MR * kc) {
        int mr = mc - p < GEMM_MR ? mc - p : GEMM_MR;
        const float *a = A + (long)(m0 + p) * a_m + (long)k0 * a_k;
        if (a_k == 1)
            for (int i = 0; i < GEMM_MR; i++)
                for (int k = 0; k < kc; k++) ap[k * GEMM_MR + i] = i < mr ? a[i * a_m + k] : 0.0f;
        else
            for (int k = 0; k < kc; k++)
                for (int i = 0; i < GEMM_MR; i++) ap[k * GEMM_MR + i] = i < mr ? a[i * a_m + k * a_k] : 0.0f;
    }
}

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

// --- the product -------------------------------------------------------------------------------------------

// One task: the output block of rows [m0, m0 + mc) and columns [n0, n0 + nc), the whole sum, KC at a time.
void gemm_block(int mc, int nc, int K, const float *A, long a_m, long a_k, const float *Bm, long b_k, long b_n,
                float *Cm, long ldc, int accumulate, int m0, int n0) {
    float ap[GEMM_MC * GEMM_KC], bp[GEMM_KC * GEMM_NC];
    for (int k0 = 0; k0 < K; k0 += GEMM_KC) {
        int kc = K - k0 < GEMM_KC ? K - k0 : GEMM_KC, first = k0 == 0 && !accumulate;
        gemm_pack_a(ap, A, a_m, a_k, m0, mc, k0, kc);
        gemm_pack_b(bp, Bm, b_k, b_n, k0, kc, n0, nc);
        for (int q = 0; q < nc; q += GEMM_NR) {  // a B panel in L1 ...
            int nr = nc - q < GEMM_NR ? nc - q : GEMM_NR;
            for (int p = 0; p < mc; p += GEMM_MR) {  // ... against every A panel of the block
                int mr = mc - p < GEMM_MR ? mc - p : GEMM_MR;
                float *c = Cm + (long)(m0 + p) * ldc + n0 + q;
                const float *a = ap + (size_t)p * kc, *b = bp + (size_t)q * kc;
                if (mr == GEMM_MR && nr == GEMM_NR) gemm_kernel(kc, a, b, c, ldc, first);
                else gemm_kernel_edge(kc, a, b, c, ldc, first, mr, nr);
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
    int parallel = (size_t)M * N * K / 64 >= PARALLEL_MIN;  // (which task computes an element never changes its sum)
    int mblocks = (M + GEMM_MC - 1) / GEMM_MC, nc = GEMM_NC;
    while (parallel && nc > 2 * GEMM_NR && mblocks * ((N + nc - 1) / nc) < 4 * omp_get_max_threads())
        nc /= 2;  // narrower column blocks, so that the threads share the tasks evenly (a step's 768 columns: 6, not 3)
    int nblocks = (N + nc - 1) / nc;
#pragma omp parallel for collapse(2) schedule(dynamic) if (parallel)
    for (int mb = 0; mb < mblocks; mb++)
        for (int nb = 0; nb < nblocks; nb++) {
            int m0 = mb * GEMM_MC, n0 = nb * nc;
            gemm_block(M - m0 < GEMM_MC ? M - m0 : GEMM_MC, N - n0 < nc ? N - n0 : nc, K, A, a_m, a_k, Bm, b_k, b_n, Cm,
                       ldc, accumulate, m0, n0);
        }
}

#endif
