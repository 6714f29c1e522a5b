// cpu/gemm.h — the one matrix product the CPU ops are built on (cpu/ops.h's
// matmul, the fused classifier's tiles), fast without BLAS.
#ifndef GPTMEM_GEMM_H
#define GPTMEM_GEMM_H

#include <string.h>
#include "core/sizes.h"

// Cm[m][n] (+)= sum_k A(m,k) * Bm(k,n), where A(m,k) = A[m*a_m + k*a_k] and
// Bm(k,n) = Bm[k*b_k + n*b_n]; the strides let one routine serve all three
// products of a linear layer (forward, input gradient, weight gradient)
// without transposing anything in memory.
//
// How it is fast without BLAS: the output is cut into column tiles NR = 32
// wide. For each tile, a KC x NR slice of Bm is copied ("packed") into a small
// contiguous buffer on the stack that stays in L1 cache; then six rows of the
// output are computed at once, keeping a 6 x 32 block of sums in registers:
// each step reads 32 packed values and 6 values of A and does 192
// multiply-adds. The six rows are six named arrays because that is the shape
// gcc keeps in vector registers (a 2-D acc[6][32] gets spilled to the stack
// and runs 8x slower; measured).
// Each output element is owned by one thread and summed in k order, always.
enum { GEMM_MR = 6, GEMM_NR = 32, GEMM_KC = 256, GEMM_MCHUNK = 384 };

// Six rows of Cm (at cm, row stride ldc) += A rows (at a) times the packed
// tile bp (kc x NR). (Always loading Cm, never a conditional zero, is another
// thing that keeps the sums in registers.)
void gemm_block6(int kc, const float *a, long a_m, long a_k, const float *bp, float *cm, long ldc) {
    float c0[GEMM_NR], c1[GEMM_NR], c2[GEMM_NR], c3[GEMM_NR], c4[GEMM_NR], c5[GEMM_NR];
    for (int j = 0; j < GEMM_NR; j++) {
        c0[j] = cm[j]; c1[j] = cm[ldc + j]; c2[j] = cm[2 * ldc + j];
        c3[j] = cm[3 * ldc + j]; c4[j] = cm[4 * ldc + j]; c5[j] = cm[5 * ldc + j];
    }
    for (int k = 0; k < kc; k++) {
        const float *b = bp + (size_t)k * GEMM_NR;
        float a0 = a[k * a_k], a1 = a[a_m + k * a_k], a2 = a[2 * a_m + k * a_k];
        float a3 = a[3 * a_m + k * a_k], a4 = a[4 * a_m + k * a_k], a5 = a[5 * a_m + k * a_k];
        for (int j = 0; j < GEMM_NR; j++) {
            c0[j] += a0 * b[j]; c1[j] += a1 * b[j]; c2[j] += a2 * b[j];
            c3[j] += a3 * b[j]; c4[j] += a4 * b[j]; c5[j] += a5 * b[j];
        }
    }
    for (int j = 0; j < GEMM_NR; j++) {
        cm[j] = c0[j]; cm[ldc + j] = c1[j]; cm[2 * ldc + j] = c2[j];
        cm[3 * ldc + j] = c3[j]; cm[4 * ldc + j] = c4[j]; cm[5 * ldc + j] = c5[j];
    }
}

// The same for one row and only the first nr columns: the edges of the output.
void gemm_block1(int nr, int kc, const float *a, long a_k, const float *bp, float *cm) {
    float c0[GEMM_NR];
    for (int j = 0; j < GEMM_NR; j++) c0[j] = j < nr ? cm[j] : 0.0f;
    for (int k = 0; k < kc; k++) {
        const float *b = bp + (size_t)k * GEMM_NR;
        float a0 = a[k * a_k];
        for (int j = 0; j < GEMM_NR; j++) c0[j] += a0 * b[j];
    }
    for (int j = 0; j < nr; j++) cm[j] = c0[j];
}

// Copy Bm[k0:k0+kc, n0:n0+nr] into the contiguous tile bp (kc x NR),
// zero-padding columns past nr. The loop order follows whichever index of Bm
// is contiguous in memory; rows that are contiguous are copied whole.
void gemm_pack(float *bp, const float *Bm, long b_k, long b_n, int k0, int kc, int n0, int nr) {
    if (b_n == 1 && nr == GEMM_NR) {
        for (int k = 0; k < kc; k++) memcpy(bp + k * GEMM_NR, Bm + (long)(k0 + k) * b_k + n0, sizeof(float) * GEMM_NR);
    } else if (b_k == 1) {
        for (int j = 0; j < GEMM_NR; j++) {
            const float *src = Bm + (long)(n0 + j) * b_n + k0;
            if (j < nr) for (int k = 0; k < kc; k++) bp[k * GEMM_NR + j] = src[k];
            else for (int k = 0; k < kc; k++) bp[k * GEMM_NR + j] = 0.0f;
        }
    } else {
        for (int k = 0; k < kc; k++)
            for (int j = 0; j < GEMM_NR; j++)
                bp[k * GEMM_NR + j] = j < nr ? Bm[(long)(k0 + k) * b_k + (long)(n0 + j) * b_n] : 0.0f;
    }
}

void gemm(int M, int N, int K, const float *A, long a_m, long a_k, const float *Bm, long b_k, long b_n, float *Cm,
          long ldc, int accumulate) {
    int parallel = (size_t)M * N * K / 64 >= PARALLEL_MIN;  // (the same tiles and sums either way)
    int ntiles = (N + GEMM_NR - 1) / GEMM_NR;
    int mchunks = (M + GEMM_MCHUNK - 1) / GEMM_MCHUNK;
#pragma omp parallel for collapse(2) schedule(dynamic) if (parallel)
    for (int mc = 0; mc < mchunks; mc++) {      // a chunk of rows of A stays in L2 cache
        for (int nt = 0; nt < ntiles; nt++) {   // while every column tile is computed
            float bp[GEMM_KC * GEMM_NR];
            int n0 = nt * GEMM_NR, nr = N - n0 < GEMM_NR ? N - n0 : GEMM_NR;
            int m0 = mc * GEMM_MCHUNK, m1 = m0 + GEMM_MCHUNK < M ? m0 + GEMM_MCHUNK : M;
            if (!accumulate)
                for (int m = m0; m < m1; m++) memset(Cm + (long)m * ldc + n0, 0, sizeof(float) * nr);
            for (int k0 = 0; k0 < K; k0 += GEMM_KC) {
                int kc = K - k0 < GEMM_KC ? K - k0 : GEMM_KC;
                gemm_pack(bp, Bm, b_k, b_n, k0, kc, n0, nr);
                int m = m0;
                if (nr == GEMM_NR)  // full tiles: six rows at a time
                    for (; m + GEMM_MR <= m1; m += GEMM_MR)
                        gemm_block6(kc, A + m * a_m + k0 * a_k, a_m, a_k, bp, Cm + m * ldc + n0, ldc);
                for (; m < m1; m++)  // the rows left over, and the last partial tile
                    gemm_block1(nr, kc, A + m * a_m + k0 * a_k, a_k, bp, Cm + m * ldc + n0);
            }
        }
    }
}

#endif
