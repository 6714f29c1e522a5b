// tests/host_gpu/gemm.h — tests/host_gpu.c's GEMMs (cuda/matmul.cu's cuBLASLt calls): each on
// cpu/ops.h's matmul or cpu/gemm.h's gemm; and the widening and rounding every emulated kernel does.
#ifndef GPTMEM_HOST_GPU_GEMM_H
#define GPTMEM_HOST_GPU_GEMM_H

#include "cuda/gemm_choices.h"

// --- widening and rounding --------------------------------------------------------

// A fresh fp32 copy of n elements stored in dt (NULL stays NULL).
static float *widen(int dt, const void *x, size_t n) {
    if (!x) return NULL;
    float *f = malloc(sizeof(float) * (n ? n : 1));
    dtype_load(f, x, n, dt);
    return f;
}

// Round f into dst (stored in dt) and free f.
static void narrow(int dt, void *dst, float *f, size_t n) {
    if (dst) dtype_store(dst, f, n, dt);
    free(f);
}

// --- GEMM -------------------------------------------------------------------------

// A GEMM choices file (cuda/gemm_choices.h) read and checked as cuda/matmul.cu does, for this GPU's name and
// cuBLASLt version 0 (none here); its algorithms change nothing: the emulation has one GEMM.
unsigned long cu_blas_version(void) { return 0; }
static int emu_choices;  // the loaded file's choices (no plan takes one here)
void cu_gemm_choices_counts(int *choices, int *taken) { *choices = emu_choices, *taken = 0; }
int cu_gemm_choices_load(const char *path, char *why, size_t why_len) {
    emu_choices = 0;
    if (!path) return 0;
    GemmChoice c[GEMM_CHOICES_MAX];
    return gemm_choices_load_file(path, gpu_name(), cu_blas_version(), c, &emu_choices, why, why_len);
}

void cu_matmul_setup(void *workspace, size_t bytes, float *colsum, size_t colsum_floats) {
    workspace = DEV(workspace), colsum = DEV(colsum);
    (void)workspace; (void)bytes; (void)colsum; (void)colsum_floats;
    char why[600];
    const char *choices = getenv("GPTMEM_GEMM_CHOICES");
    if (choices && choices[0] && cu_gemm_choices_load(choices, why, sizeof why)) {  // (set empty: as unset)
        fprintf(stderr, "error: GPTMEM_GEMM_CHOICES: %s\n", why);
        exit(1);
    }
}

// cuBLASLt's C = residual with beta 1: the fp32 sum rounded once
void cu_matmul_residual_forward(int dt, void *out, const void *inp, const void *w, const void *bias,
                                const void *residual, int N, int C, int OC) {
    LAUNCH(N);
    out = DEV(out), inp = DEV(inp), w = DEV(w), bias = DEV(bias), residual = DEV(residual);
    float *fi = widen(dt, inp, (size_t)N * C), *fw = widen(dt, w, (size_t)OC * C), *fb = widen(dt, bias, OC);
    float *fr = widen(dt, residual, (size_t)N * OC), *fo = malloc(sizeof(float) * N * OC);
    matmul_forward(fo, fi, fw, fb, N, C, OC);
    if (fr) residual_forward(fo, fo, fr, (size_t)N * OC);
    narrow(dt, out, fo, (size_t)N * OC);
    free(fi); free(fw); free(fb); free(fr);
}

void cu_bias_forward(int dt, void *out, const void *bias, int N, int OC) {
    if (!bias) return;
    LAUNCH(N);
    out = DEV(out), bias = DEV(bias);
    float *fo = widen(dt, out, (size_t)N * OC), *fb = widen(dt, bias, OC);
    bias_forward(fo, fb, N, OC);
    narrow(dt, out, fo, (size_t)N * OC);
    free(fb);
}

void cu_matmul_forward(int dt, void *out, const void *inp, const void *w, const void *bias, int N, int C, int OC) {
    cu_matmul_residual_forward(dt, out, inp, w, bias, NULL, N, C, OC);
}

// cuBLASLt's DGELU epilogue: GELU's derivative applied to the fp32 product, rounded once (the emulation
// always takes the epilogue)
static long long emu_dgelu_calls;
void cu_matmul_dgelu_counts(long long *fused, long long *apart) { *fused = emu_dgelu_calls, *apart = 0; }
void cu_matmul_dgelu_backward(int dt, void *dinp, void *dw, void *dbias, const void *dout, const void *inp,
                              const void *w, const void *pre, int N, int C, int OC) {
    LAUNCH(N);
    dinp = DEV(dinp), dw = DEV(dw), dbias = DEV(dbias), dout = DEV(dout), inp = DEV(inp), w = DEV(w), pre = DEV(pre);
    float *fd = widen(dt, dout, (size_t)N * OC), *fi = widen(dt, inp, (size_t)N * C), *fw = widen(dt, w, (size_t)OC * C);
    float *fdw = widen(dt, dw, (size_t)OC * C), *fdb = widen(dt, dbias, OC), *fp = widen(dt, pre, (size_t)N * C);
    float *fdi = malloc(sizeof(float) * N * C);
    emu_dgelu_calls++;
    matmul_backward(fdi, fdw, fdb, fd, fi, fw, N, C, OC);
    gelu_backward(fdi, fp, fdi, (size_t)N * C);
    narrow(dt, dinp, fdi, (size_t)N * C);
    narrow(dt, dw, fdw, (size_t)OC * C);
    narrow(dt, dbias, fdb, OC);
    free(fd); free(fi); free(fw); free(fp);
}

// cuBLASLt's GELU_AUX_BIAS epilogue, where it is on (GPTMEM_GELU_EPI=1) and the width a multiple of 8: pre =
// the product plus the bias, rounded once; act = GELU of pre as stored, as the two calls compute it (cuBLASLt
// takes its GELU of the fp32 sum, and its own tanh: the lease says whether its bits are the kernel's)
static int emu_gelu_epi = -1;
void cu_matmul_gelu_epilogue(int on) { emu_gelu_epi = on; }
int cu_matmul_gelu_forward(int dt, void *act, void *pre, const void *inp, const void *w, const void *bias, int N, int C,
                           int OC) {
    if (emu_gelu_epi < 0) emu_gelu_epi = getenv("GPTMEM_GELU_EPI") && atoi(getenv("GPTMEM_GELU_EPI")) == 1;
    if (!emu_gelu_epi || N <= 0 || !bias || OC % 8) return -1;
    cu_matmul_forward(dt, pre, inp, w, bias, N, C, OC);
    LAUNCH(N);
    float *f = widen(dt, DEV(pre), (size_t)N * OC);
    gelu_forward(f, f, (size_t)N * OC);
    narrow(dt, DEV(act), f, (size_t)N * OC);
    return 0;
}

void cu_matmul_backward(int dt, void *dinp, void *dw, void *dbias, const void *dout, const void *inp, const void *w,
                        int N, int C, int OC) {
    LAUNCH(N);
    dinp = DEV(dinp), dw = DEV(dw), dbias = DEV(dbias), dout = DEV(dout), inp = DEV(inp), w = DEV(w);
    float *fd = widen(dt, dout, (size_t)N * OC), *fi = widen(dt, inp, (size_t)N * C), *fw = widen(dt, w, (size_t)OC * C);
    float *fdw = widen(dt, dw, (size_t)OC * C), *fdb = widen(dt, dbias, OC);
    float *fdi = dinp ? malloc(sizeof(float) * N * C) : NULL;
    matmul_backward(fdi, fdw, fdb, fd, fi, fw, N, C, OC);
    narrow(dt, dinp, fdi, (size_t)N * C);
    narrow(dt, dw, fdw, (size_t)OC * C);
    narrow(dt, dbias, fdb, OC);
    free(fd); free(fi); free(fw);
}

void cu_matmul_backward_into(int dt, void *dinp, void *dw, const void *dout, const void *inp, const void *w, int N,
                             int C, int OC, int add) {
    LAUNCH(N);
    dinp = DEV(dinp), dw = DEV(dw), dout = DEV(dout), inp = DEV(inp), w = DEV(w);
    float *fd = widen(dt, dout, (size_t)N * OC), *fi = widen(dt, inp, (size_t)N * C), *fw = widen(dt, w, (size_t)OC * C);
    float *fdw = widen(dt, dw, (size_t)OC * C), *fdi = add ? widen(dt, dinp, (size_t)N * C) : calloc((size_t)N * C, 4);
    gemm(N, C, OC, fd, OC, 1, fw, C, 1, fdi, C, add);  // dinp (+)= dout w
    if (fdw) gemm(OC, C, N, fd, 1, OC, fi, C, 1, fdw, C, 1);  // dw += dout^T inp (NULL: frozen)
    narrow(dt, dinp, fdi, (size_t)N * C);
    narrow(dt, dw, fdw, (size_t)OC * C);
    free(fd); free(fi); free(fw);
}

void cu_gemm_nt(int dt, void *c, const void *a, const void *b, int M, int N, int K) {  // (its arguments: untagged below)
    cu_matmul_forward(dt, c, a, b, NULL, M, K, N);
}

// cuBLASLt's alpha and beta: the fp32 product added into C (beta 1) or scaled by alpha (beta 0), rounded once,
// in cpu/gemm.h's order (cpu/lora.h's products: the same bits in fp32)
void cu_gemm(int dt, int M, int N, int K, float alpha, const void *a, int a_rs, int a_cs, const void *b, int b_rs,
             int b_cs, float beta, void *c, int ldc) {
    LAUNCH(M);
    a = DEV(a), b = DEV(b), c = DEV(c);
    if (a_rs != 1 && a_cs != 1) emu_stop(__func__, "neither of A's strides is 1 (%s)", "a_rs, a_cs");
    if (b_rs != 1 && b_cs != 1) emu_stop(__func__, "neither of B's strides is 1 (%s)", "b_rs, b_cs");
    if (!(beta == 0.0f || (beta == 1.0f && alpha == 1.0f)))
        emu_stop(__func__, "%s other than (s, 0) and (1, 1), which the model asks for", "alpha and beta");
    size_t na = (size_t)(M - 1) * a_rs + (size_t)(K - 1) * a_cs + 1, nb = (size_t)(K - 1) * b_rs + (size_t)(N - 1) * b_cs + 1;
    size_t nc = (size_t)(M - 1) * ldc + N;
    float *fa = widen(dt, a, na), *fb = widen(dt, b, nb), *fc = widen(dt, c, nc);  // (C's other columns kept)
    gemm(M, N, K, fa, a_rs, a_cs, fb, b_rs, b_cs, fc, ldc, beta != 0.0f);
    for (int i = 0; i < M && alpha != 1.0f; i++)
        for (int j = 0; j < N; j++) fc[(size_t)i * ldc + j] *= alpha;
    narrow(dt, c, fc, nc);
    free(fa); free(fb);
}

// --gemm-shapes times cuBLASLt's algorithms: the emulation has none to offer
// One algorithm offered, of no time and all-zero bytes (a GEMM choices file's round trip runs here too).
int cu_gemm_probe(int dt, const GemmShape *g, int reps, GemmProbe *out) {
    (void)dt, (void)g, (void)reps;
    memset(out, 0, sizeof *out);
    out->algos = 1;
    return 0;
}

#endif
