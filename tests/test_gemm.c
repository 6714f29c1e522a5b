// tests/test_gemm.c — cpu/gemm.h on the instruction set it is compiled for (tests/gemm_isas.sh builds it for
// AVX-512, AVX2 + FMA and plain C): every product, at odd shapes and at the step's, equal bit for bit to the
// textbook loop that sums each output element in k order with one fused multiply-add a term, at 1 and 2
// threads. The same bits on every instruction set and thread count is what lets the tile be chosen per ISA.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cpu/gemm.h"

static float *random_floats(size_t n, unsigned *seed) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = (float)rand_r(seed) / RAND_MAX - 0.5f;
    return p;
}

int main(void) {
    // M N K and the kind of product: 0 forward (A (M,K) rows, B (N,K) rows), 1 input gradient (B (K,N)), 2 weight gradient
    // (A (K,M) transposed, accumulating)
    int shapes[][4] = {{1, 1, 1, 0}, {5, 7, 3, 0}, {6, 16, 256, 0}, {37, 53, 29, 0}, {97, 257, 300, 0}, {41, 19, 300, 1},
                       {128, 260, 513, 1}, {7, 45, 13, 2}, {200, 40, 70, 2}, {256, 768, 64, 0}, {64, 300, 768, 1},
                       {300, 96, 256, 2}, {5, 7, 0, 0}};
    int n = sizeof shapes / sizeof shapes[0], bad = 0;
    unsigned seed = 7;
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        for (int i = 0; i < n; i++) {
            int M = shapes[i][0], N = shapes[i][1], K = shapes[i][2], kind = shapes[i][3];
            float *A = random_floats((size_t)M * K, &seed), *B = random_floats((size_t)K * N, &seed);
            float *C = random_floats((size_t)M * N, &seed), *R = malloc(sizeof(float) * M * N);
            memcpy(R, C, sizeof(float) * M * N);
            long a_m = kind == 2 ? 1 : K, a_k = kind == 2 ? M : 1, b_k = kind == 0 ? 1 : N, b_n = kind == 0 ? K : 1;
            gemm(M, N, K, A, a_m, a_k, B, b_k, b_n, C, N, kind == 2);
            for (int m = 0; m < M; m++)
                for (int j = 0; j < N; j++) {
                    float s = kind == 2 ? R[(size_t)m * N + j] : 0.0f;
                    for (int k = 0; k < K; k++) s = fmaf(A[m * a_m + k * a_k], B[k * b_k + j * b_n], s);
                    R[(size_t)m * N + j] = s;
                }
            if (memcmp(C, R, sizeof(float) * M * N)) {
                printf("FAIL gemm (%s): %d x %d x %d, product %d, %d thread%s: not the textbook loop's bits\n", GEMM_ISA, M, N,
                       K, kind, threads, threads > 1 ? "s" : "");
                bad++;
            }
            free(A), free(B), free(C), free(R);
        }
    }
    if (!bad)
        printf("PASS gemm (%s): %d shapes x 3 products, 1 and 2 threads, bit for bit the k-order FMA loop\n", GEMM_ISA, n);
    return bad != 0;
}
