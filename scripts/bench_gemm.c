// scripts/bench_gemm.c — `make bench-cpu`'s first half: cpu/gemm.h's GEMM on each shape of a GPT-2 124M
// step at B4 T64 (N = 256 rows), as cpu/ops.h calls it (forward, input gradient, weight gradient), beside
// OpenBLAS's cblas_sgemm on the same operands and transposes (built with -DWITH_BLAS: Debian's libopenblas,
// a benchmark-only dependency, never linked into ./train), and this machine's measured fp32 FMA peak.
// A benchmark, not a test: it prints numbers of the machine it runs on, and checks nothing but that both
// products agree.
//
//   bench_gemm [THREADS...]      (default: 1 2), each shape: the best of 5 runs, in CPU seconds at 1 thread
//                                (immune to other jobs' time slices), wall seconds beyond
//   BENCH_ROWS=2048 bench_gemm   the shapes at another B x T (default 256; the best of 2 runs past 512)
#include <math.h>
#include <omp.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cpu/gemm.h"
#ifdef WITH_BLAS
#include <cblas.h>
void openblas_set_num_threads(int);
#endif
#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

typedef struct {
    const char *name;
    int M, N, K, kind, per_step;  // kind: 0 forward, 1 input gradient, 2 weight gradient
} Shape;

static double seconds(int cpu_time) {
    struct timespec t;
    clock_gettime(cpu_time ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

// n floats, or a message and exit 1 when they cannot be had.
static float *floats(size_t n) {
    float *p = malloc(n * sizeof(float));
    if (!p) {
        fprintf(stderr, "bench_gemm: cannot allocate %zu bytes (%.1f GiB): give a smaller BENCH_ROWS\n", n * sizeof(float),
                n * sizeof(float) / 1073741824.0);
        exit(1);
    }
    return p;
}

// A whole number from lo to hi, or a message naming `what` and exit 2.
static int whole_number(const char *text, const char *what, long lo, long hi) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < lo || v > hi) {
        fprintf(stderr, "bench_gemm: %s must be a whole number from %ld to %ld (got '%s')\n", what, lo, hi, text);
        exit(2);
    }
    return (int)v;
}

static float *random_floats(size_t n) {
    float *p = floats(n);
    for (size_t i = 0; i < n; i++) p[i] = (float)rand() / RAND_MAX - 0.5f;
    return p;
}

// The product as cpu/ops.h asks for it: out = inp W^T, dinp = dout W, dW += dout^T inp.
static void ours(const Shape *s, const float *A, const float *B, float *C) {
    if (s->kind == 0) gemm(s->M, s->N, s->K, A, s->K, 1, B, 1, s->K, C, s->N, 0);
    else if (s->kind == 1) gemm(s->M, s->N, s->K, A, s->K, 1, B, s->N, 1, C, s->N, 0);
    else gemm(s->M, s->N, s->K, A, 1, s->M, B, s->N, 1, C, s->N, 1);
}

#ifdef WITH_BLAS
static void blas(const Shape *s, const float *A, const float *B, float *C) {
    if (s->kind == 0) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s->M, s->N, s->K, 1, A, s->K, B, s->K, 0, C, s->N);
    else if (s->kind == 1) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->M, s->N, s->K, 1, A, s->K, B, s->N, 0, C, s->N);
    else cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s->M, s->N, s->K, 1, A, s->M, B, s->N, 1, C, s->N);
}
#endif

// The best of `reps` runs of f, in seconds (CPU time with one thread).
static double best(void (*f)(const Shape *, const float *, const float *, float *), const Shape *s, const float *A,
                   const float *B, float *C, int threads, int reps) {
    double t = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = seconds(threads == 1);
        f(s, A, B, C);
        double d = seconds(threads == 1) - t0;
        if (d < t) t = d;
    }
    return t;
}

// This core's fp32 multiply-add peak, measured: 12 independent chains of vector FMAs (GFLOP/s a core).
static double fma_peak(void) {
#if defined(__AVX512F__) || defined(__AVX2__)
#if defined(__AVX512F__)
    typedef __m512 V;
#define VSET(x) _mm512_set1_ps(x)
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VSUM(v) _mm512_reduce_add_ps(v)
    const int lanes = 16;
#else
    typedef __m256 V;
#define VSET(x) _mm256_set1_ps(x)
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define VSUM(v) (((float *)&v)[0])
    const int lanes = 8;
#endif
    V acc[12], a = VSET(0.999999f), b = VSET(1e-7f);
    for (int i = 0; i < 12; i++) acc[i] = VSET((float)i);
    long n = 2000000;
    double t = 1e30;
    for (int r = 0; r < 25; r++) {  // (the best of 25: a shared machine's slices only ever slow a run)
        double t0 = seconds(1);
        for (long k = 0; k < n; k++)
            for (int i = 0; i < 12; i++) acc[i] = VFMA(acc[i], a, b);
        double d = seconds(1) - t0;
        if (d < t) t = d;
    }
    float sink = 0;
    for (int i = 0; i < 12; i++) sink += VSUM(acc[i]);
    if (sink == 12345.f) printf(" ");
    return 2.0 * lanes * 12 * n / t / 1e9;
#else
    return 0;
#endif
}

int main(int argc, char **argv) {
    const char *rows = getenv("BENCH_ROWS");
    int r = rows && rows[0] ? whole_number(rows, "BENCH_ROWS (B x T)", 1, 1 << 20) : 256;  // B x T
    Shape sh[] = {{"qkv fwd", r, 2304, 768, 0, 12},      {"attproj fwd", r, 768, 768, 0, 12},
                  {"fc fwd", r, 3072, 768, 0, 12},       {"fcproj fwd", r, 768, 3072, 0, 12},
                  {"head fwd", r, 50304, 768, 0, 1},     {"qkv dinp", r, 768, 2304, 1, 12},
                  {"attproj dinp", r, 768, 768, 1, 12},  {"fc dinp", r, 768, 3072, 1, 12},
                  {"fcproj dinp", r, 3072, 768, 1, 12},  {"head dinp", r, 768, 50304, 1, 1},
                  {"qkv dW", 2304, 768, r, 2, 12},       {"attproj dW", 768, 768, r, 2, 12},
                  {"fc dW", 3072, 768, r, 2, 12},        {"fcproj dW", 768, 3072, r, 2, 12},
                  {"head dW", 50304, 768, r, 2, 1}};
    int ns = sizeof sh / sizeof sh[0], nthreads = argc > 1 ? argc - 1 : 2, reps = r > 512 ? 2 : 5;
    int threads[8] = {1, 2};
    if (argc > 9) {
        fprintf(stderr, "bench_gemm: at most 8 thread counts (got %d)\nusage: bench_gemm [THREADS ...]\n", argc - 1);
        return 2;
    }
    for (int i = 1; i < argc; i++) threads[i - 1] = whole_number(argv[i], "a thread count", 1, 4096);
    double peak = fma_peak();
    printf("cpu/gemm.h: %s; this core's measured fp32 FMA peak: %.1f GFLOP/s\n", GEMM_ISA, peak);
#ifndef WITH_BLAS
    printf("(built without OpenBLAS: bash scripts/setup.sh installs libopenblas-dev, then make bench-cpu)\n");
#endif
    for (int ti = 0; ti < nthreads; ti++) {
        int th = threads[ti];
        omp_set_num_threads(th);
#ifdef WITH_BLAS
        openblas_set_num_threads(th);
#endif
        printf("\n%d thread%s (%s)     M      N      K |  gptmem GF/s  %% peak | OpenBLAS GF/s  %% peak | gptmem / OpenBLAS\n",
               th, th > 1 ? "s" : " ", th == 1 ? "CPU time" : "wall");
        double tot[2] = {0, 0};
        for (int i = 0; i < ns; i++) {
            const Shape *s = &sh[i];
            float *A = random_floats((size_t)s->M * s->K), *B = random_floats((size_t)s->K * s->N);
            float *C = random_floats((size_t)s->M * s->N);
            double tg = best(ours, s, A, B, C, th, reps), flops = 2.0 * s->M * s->N * s->K, tb = 0;
#ifdef WITH_BLAS
            float *D = floats((size_t)s->M * s->N);
            memcpy(D, C, (size_t)s->M * s->N * sizeof(float));
            ours(s, A, B, C), blas(s, A, B, D);  // (one more of each: both products agree, to fp32's rounding of sums)
            double worst = 0;
            for (size_t e = 0; e < (size_t)s->M * s->N; e++) worst = fmax(worst, fabs(C[e] - D[e]) / (1 + fabs(D[e])));
            if (worst > 1e-3) printf("  (gptmem and OpenBLAS differ by %.1e on %s)\n", worst, s->name);
            tb = best(blas, s, A, B, D, th, reps);
            free(D);
#endif
            double pk = peak * th;
            printf("  %-14s %6d %6d %6d | %11.1f %7.1f | %13.1f %7.1f | %.2f\n", s->name, s->M, s->N, s->K, flops / tg / 1e9,
                   pk > 0 ? 100 * flops / tg / 1e9 / pk : 0, tb > 0 ? flops / tb / 1e9 : 0, pk > 0 && tb > 0 ? 100 * flops / tb / 1e9 / pk : 0,
                   tb > 0 ? (flops / tg) / (flops / tb) : 0);
            tot[0] += tg * s->per_step, tot[1] += tb * s->per_step;
            free(A), free(B), free(C);
        }
        printf("  a step's GEMMs (each shape x its count): gptmem %.0f ms", 1e3 * tot[0]);
        if (tot[1] > 0) printf(", OpenBLAS %.0f ms (gptmem at %.0f%% of OpenBLAS's speed)", 1e3 * tot[1], 100 * tot[1] / tot[0]);
        printf("\n");
    }
    return 0;
}
