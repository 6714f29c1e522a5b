// cuda/host.c — the GPU API of cuda/ops.h, run on the CPU: "device" memory is
// host memory, and every cu_* op is its CPU twin from ops.h, with 16-bit
// tensors widened to fp32 before and rounded after, as the kernels do in
// registers.
//
// Why: cuda/model_gpu.h is host code (allocation through the ledger, the
// activation stack, the order of the ops, checkpoints and, with issue 14,
// ZeRO's shards and collectives) that otherwise runs only where a GPU is
// lent. Linked with this file instead of cuda/kernels.o, train.c becomes
// tests/train_host, whose --device cuda runs model_gpu.h on any machine, so
// CPU-only CI checks that logic: the GPU ledger predicted == measured, resume,
// ZeRO on N ranks == one rank. It checks nothing about the kernels:
// tests/test_cuda.c does that, on a GPU.
//
// One function per declaration of cuda/ops.h, in the same order.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "ops.h"
#include "../ops.h"  // the CPU ops (one translation unit with train.c: tests/train_host.c)

int gpu_built(void) { return 1; }

// Every process has a GPU of its own (its memory), so as many as the ranks on
// this machine, unless GPTMEM_HOST_GPUS says how many to pretend (tests of
// ranks sharing a GPU: the fits-check, --fit).
int gpu_count(char *why, size_t why_len) {
    (void)why; (void)why_len;
    return env_number("GPTMEM_HOST_GPUS", NULL, comm_local_size());
}

int gpu_open(int local_rank, char *why, size_t why_len) {
    (void)local_rank; (void)why; (void)why_len;
    return 0;
}

const char *gpu_name(void) { return "host emulation (cuda/host.c: no GPU, for tests)"; }

// A nominal peak (for the step line's MFU only): 1 TFLOP/s whatever the dtype.
double gpu_peak_flops(int dt) {
    (void)dt;
    return 1e12;
}

// "Device" memory is host memory; what it holds in all is what
// gpu_mem_info reports as used, so the runtime row (outside the ledger) is 0.
// Its size: 64 GiB, or GPTMEM_HOST_GPU_MIB (tests of the fits-check and --fit).
enum { EMULATED_GPU_MIB = 64 << 10 };
static size_t allocated;

typedef struct { size_t bytes; } Header;  // before every allocation: its size, for gpu_free

void *gpu_malloc(size_t bytes, const char *name) {
    Header *h = malloc(sizeof(Header) + (bytes ? bytes : 1));
    if (!h) {
        fprintf(stderr, "error: out of (emulated) GPU memory allocating %s (%zu bytes)\n", name, bytes);
        exit(1);
    }
    h->bytes = bytes;
    allocated += bytes;
    memset(h + 1, 0, bytes);  // zeroed, as cuda/runtime.cu's gpu_malloc does
    return h + 1;
}

void gpu_free(void *p) {
    if (!p) return;
    Header *h = (Header *)p - 1;
    allocated -= h->bytes;
    free(h);
}

void *gpu_host_alloc(size_t bytes, const char *name) {  // plain host memory here
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "error: cannot allocate %s (%zu bytes of host memory)\n", name, bytes);
        exit(1);
    }
    return p;
}

void gpu_host_free(void *p) { free(p); }

static long waits;  // gpu_waits: the calls that wait for the GPU on a real one
long gpu_waits(void) { return waits; }
void gpu_upload(void *dst, const void *host_src, size_t bytes) { waits++; memcpy(dst, host_src, bytes); }
void gpu_upload_queued(void *dst, const void *host_src, size_t bytes) { memcpy(dst, host_src, bytes); }
void gpu_download(void *host_dst, const void *src, size_t bytes) { waits++; memcpy(host_dst, src, bytes); }
void gpu_copy(void *dst, const void *src, size_t bytes) { memmove(dst, src, bytes); }
void gpu_zero(void *p, size_t bytes) { memset(p, 0, bytes); }
void gpu_sync(const char *what) { (void)what; waits++; }

void gpu_mem_info(size_t *free_bytes, size_t *total_bytes) {
    *total_bytes = (size_t)env_number("GPTMEM_HOST_GPU_MIB", NULL, EMULATED_GPU_MIB) << 20;
    *free_bytes = allocated < *total_bytes ? *total_bytes - allocated : 0;
}

// Events: the host clock when recorded (every op has finished by then).
void *gpu_event_new(void) { return calloc(1, sizeof(struct timespec)); }
void gpu_event_record(void *event) { clock_gettime(CLOCK_MONOTONIC, event); }
float gpu_event_ms(void *start, void *stop) {
    const struct timespec *a = start, *b = stop;
    waits++;
    return (float)((b->tv_sec - a->tv_sec) * 1e3 + (b->tv_nsec - a->tv_nsec) / 1e6);
}
void gpu_event_free(void *event) { free(event); }

// NCCL, emulated with MPI on the host memory (each rank is its own process with
// its own "GPU"): the same parts move, so --comm nccl's path through
// cuda/model_gpu.h is tested on the CPU. The sums are taken in fp32 and rounded
// once (NCCL adds bf16 and fp16 in their own format). The bytes sent are left
// to the caller to count, as with the real NCCL.
int gpu_nccl_built(void) { return 1; }
size_t gpu_nccl_id_bytes(void) { return 16; }
void gpu_nccl_unique_id(void *id) { memset(id, 0x4E, 16); }
int gpu_nccl_open(const void *id, int nranks, int rank, char *why, size_t why_len) {
    (void)id; (void)why; (void)why_len;
    return nranks == comm_nranks && rank == comm_rank_id ? 0 : -1;
}
void gpu_nccl_close(void) {}

void gpu_nccl_reduce_scatter(int dt, void *data, const size_t *counts, int nranks) {
    size_t total = 0, before = 0, e = dtype_size(dt);
    int *cnt = malloc(sizeof(int) * nranks);
    for (int r = 0; r < nranks; r++) {
        if (r == comm_rank_id) before = total;
        cnt[r] = (int)counts[r], total += counts[r];
    }
    float *sum = malloc(sizeof(float) * (total + 1));
    dtype_load(sum, data, total, dt);
    long long sent = comm_bytes_sent;
    comm_reduce_scatter(sum, cnt);
    comm_bytes_sent = sent;
    dtype_store((char *)data + before * e, sum, counts[comm_rank_id], dt);
    free(sum); free(cnt);
}

void gpu_nccl_allgather(void *data, const size_t *bytes, const size_t *displs, int nranks) {
    int *cnt = malloc(sizeof(int) * nranks), *at = malloc(sizeof(int) * nranks);
    for (int r = 0; r < nranks; r++) cnt[r] = (int)bytes[r], at[r] = (int)displs[r];
    long long sent = comm_bytes_sent;
    comm_allgather(data, cnt, at);
    comm_bytes_sent = sent;
    free(cnt); free(at);
}

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

void cu_matmul_setup(void *workspace, size_t bytes, float *colsum, size_t colsum_floats) {
    (void)workspace; (void)bytes; (void)colsum; (void)colsum_floats;
}

void cu_matmul_forward(int dt, void *out, const void *inp, const void *w, const void *bias, int N, int C, int OC) {
    float *fi = widen(dt, inp, (size_t)N * C), *fw = widen(dt, w, (size_t)OC * C), *fb = widen(dt, bias, OC);
    float *fo = malloc(sizeof(float) * N * OC);
    matmul_forward(fo, fi, fw, fb, N, C, OC);
    narrow(dt, out, fo, (size_t)N * OC);
    free(fi); free(fw); free(fb);
}

void cu_matmul_backward(int dt, void *dinp, void *dw, void *dbias, const void *dout, const void *inp, const void *w,
                        int N, int C, int OC) {
    float *fd = widen(dt, dout, (size_t)N * OC), *fi = widen(dt, inp, (size_t)N * C), *fw = widen(dt, w, (size_t)OC * C);
    float *fdw = widen(dt, dw, (size_t)OC * C), *fdb = widen(dt, dbias, OC);
    float *fdi = dinp ? malloc(sizeof(float) * N * C) : NULL;
    matmul_backward(fdi, fdw, fdb, fd, fi, fw, N, C, OC);
    narrow(dt, dinp, fdi, (size_t)N * C);
    narrow(dt, dw, fdw, (size_t)OC * C);
    narrow(dt, dbias, fdb, OC);
    free(fd); free(fi); free(fw);
}

void cu_gemm_nt(int dt, void *c, const void *a, const void *b, int M, int N, int K) {
    cu_matmul_forward(dt, c, a, b, NULL, M, K, N);
}

// --- encoder ----------------------------------------------------------------------

void cu_encoder_forward(int dt, void *out, const int *inp, const void *wte, const void *wpe, int B, int T, int C) {
    int V = 0;  // the rows of wte this batch reads: up to the largest token
    for (int i = 0; i < B * T; i++) V = inp[i] + 1 > V ? inp[i] + 1 : V;
    float *fte = widen(dt, wte, (size_t)V * C), *fpe = widen(dt, wpe, (size_t)T * C);
    float *fo = malloc(sizeof(float) * B * T * C);
    encoder_forward(fo, inp, fte, fpe, B, T, C);
    narrow(dt, out, fo, (size_t)B * T * C);
    free(fte); free(fpe);
}

// The positions come bucketed by token (model_gpu.h bucket_tokens): each
// bucket's rows of wte, and every position's row of wpe, accumulate in
// position order.
void cu_encoder_backward(int dt, void *dwte, void *dwpe, const void *dout, const int *pos, const int *start,
                         const int *tok, int nbuckets, int B, int T, int C) {
    size_t e = dtype_size(dt);
    float *fd = widen(dt, dout, (size_t)B * T * C), *fpe = widen(dt, dwpe, (size_t)T * C);
    for (int i = 0; i < B * T; i++)
        for (int c = 0; c < C; c++) fpe[(size_t)(i % T) * C + c] += fd[(size_t)i * C + c];
    narrow(dt, dwpe, fpe, (size_t)T * C);
    for (int u = 0; u < nbuckets; u++) {
        void *row = (char *)dwte + (size_t)tok[u] * C * e;
        float *fr = widen(dt, row, C);
        for (int j = start[u]; j < start[u + 1]; j++)
            for (int c = 0; c < C; c++) fr[c] += fd[(size_t)pos[j] * C + c];
        narrow(dt, row, fr, C);
    }
    free(fd);
}

// --- layernorm ----------------------------------------------------------------------

void cu_layernorm_forward(int dt, void *out, float *mean, float *rstd, const void *inp, const void *w, const void *b,
                          int N, int C) {
    float *fi = widen(dt, inp, (size_t)N * C), *fw = widen(dt, w, C), *fb = widen(dt, b, C);
    float *fo = malloc(sizeof(float) * N * C);
    layernorm_forward(fo, mean, rstd, fi, fw, fb, N, C);
    narrow(dt, out, fo, (size_t)N * C);
    free(fi); free(fw); free(fb);
}

void cu_layernorm_backward(int dt, void *dinp, void *dw, void *db, const void *dout, const void *inp, const void *w,
                           const float *mean, const float *rstd, int N, int C) {
    float *fdi = widen(dt, dinp, (size_t)N * C), *fdw = widen(dt, dw, C), *fdb = widen(dt, db, C);
    float *fd = widen(dt, dout, (size_t)N * C), *fi = widen(dt, inp, (size_t)N * C), *fw = widen(dt, w, C);
    layernorm_backward(fdi, fdw, fdb, fd, fi, fw, mean, rstd, N, C);
    narrow(dt, dinp, fdi, (size_t)N * C);
    narrow(dt, dw, fdw, C);
    narrow(dt, db, fdb, C);
    free(fd); free(fi); free(fw);
}

// --- GELU, residual -------------------------------------------------------------------

void cu_gelu_forward(int dt, void *out, const void *inp, size_t n) {
    float *fi = widen(dt, inp, n), *fo = malloc(sizeof(float) * n);
    gelu_forward(fo, fi, n);
    narrow(dt, out, fo, n);
    free(fi);
}

void cu_gelu_backward(int dt, void *dinp, const void *inp, const void *dout, size_t n) {
    float *fi = widen(dt, inp, n), *fd = widen(dt, dout, n), *fo = malloc(sizeof(float) * (n ? n : 1));
    gelu_backward(fo, fi, fd, n);
    narrow(dt, dinp, fo, n);
    free(fi); free(fd);
}

void cu_residual_forward(int dt, void *out, const void *a, const void *b, size_t n) {
    float *fa = widen(dt, a, n), *fb = widen(dt, b, n), *fo = malloc(sizeof(float) * n);
    residual_forward(fo, fa, fb, n);
    narrow(dt, out, fo, n);
    free(fa); free(fb);
}

void cu_add_into(int dt, void *dst, const void *src, size_t n) { cu_residual_forward(dt, dst, dst, src, n); }

// --- attention ------------------------------------------------------------------------

void cu_attention_forward(int dt, void *out, void *att, const void *qkv, int B, int T, int C, int H) {
    size_t n = (size_t)B * T * C, na = (size_t)B * H * T * T;
    float *fq = widen(dt, qkv, 3 * n), *fo = malloc(sizeof(float) * n), *fa = malloc(sizeof(float) * na);
    attention_forward(fo, fa, fq, B, T, C, H);
    narrow(dt, out, fo, n);
    narrow(dt, att, fa, na);
    free(fq);
}

void cu_attention_backward(int dt, void *dqkv, const void *dout, const void *qkv, void *att, int B, int T, int C,
                           int H) {
    size_t n = (size_t)B * T * C, na = (size_t)B * H * T * T;
    float *fd = widen(dt, dout, n), *fq = widen(dt, qkv, 3 * n), *fa = widen(dt, att, na);
    float *fdq = calloc(3 * n, sizeof(float));
    attention_backward(fdq, fd, fq, fa, B, T, C, H);
    narrow(dt, dqkv, fdq, 3 * n);
    free(fd); free(fq); free(fa);
}

int cu_flash_uses_mma(int dt, int hs) {
    (void)dt; (void)hs;
    return 0;
}

void cu_flash_force_reference(int on) { (void)on; }

void cu_flash_forward(int dt, void *out, float *lse, const void *qkv, int B, int T, int C, int H) {
    size_t n = (size_t)B * T * C;
    float *fq = widen(dt, qkv, 3 * n), *fo = malloc(sizeof(float) * n);
    flash_attention_forward(fo, lse, fq, B, T, C, H);
    narrow(dt, out, fo, n);
    free(fq);
}

void cu_flash_backward(int dt, void *dqkv, const void *dout, const void *qkv, const void *out, const float *lse,
                       float *D, int B, int T, int C, int H) {
    (void)D;  // the CPU op computes its D row by row
    size_t n = (size_t)B * T * C;
    float *fd = widen(dt, dout, n), *fq = widen(dt, qkv, 3 * n), *fo = widen(dt, out, n);
    float *fdq = malloc(sizeof(float) * 3 * n);
    flash_attention_backward(fdq, fd, fq, fo, lse, B, T, C, H);
    narrow(dt, dqkv, fdq, 3 * n);
    free(fd); free(fq); free(fo);
}

// --- softmax + cross-entropy --------------------------------------------------------------

void cu_crossentropy_forward(int dt, float *losses, const void *logits, const int *targets, int N, int V, int Vp) {
    for (int i = 0; i < N; i++) {  // a copy of the row: the CPU op writes the probabilities over it
        float *x = widen(dt, (const char *)logits + (size_t)i * Vp * dtype_size(dt), Vp);
        losses[i] = crossentropy_forward(x, targets + i, 1, V, Vp);
        free(x);
    }
}

void cu_crossentropy_backward(int dt, void *logits, const int *targets, int N, int V, int Vp, float dloss) {
    for (int i = 0; i < N; i++) {
        void *row = (char *)logits + (size_t)i * Vp * dtype_size(dt);
        float *x = widen(dt, row, Vp);
        crossentropy_forward(x, targets + i, 1, V, Vp);  // x -> probabilities (0 on the padding)
        crossentropy_backward(x, targets + i, 1, Vp, dloss);
        narrow(dt, row, x, Vp);
    }
}

// --- optimizer -------------------------------------------------------------------------------

void cu_loss_add(double *numbers, const float *losses, int N) {
    double sum = 0.0;
    for (int i = 0; i < N; i++) sum += losses[i];  // in row order, as gpt_forward
    numbers[STEP_LOSS] += (float)(sum / N);
}

void cu_sum_squares_partials(int dt, double *partials, const void *g, size_t n) {
    memset(partials, 0, sizeof(double) * GPU_NORM_BLOCKS);
    partials[0] = sum_squares_dt(g, n, dt);
}

void cu_grad_scale(double *numbers, const double *partials, int nparts, float loss_scale, float clip) {
    double s = 0.0;
    for (int i = 0; i < nparts; i++) s += partials[i];
    numbers[STEP_SUMSQ] = s;
    numbers[STEP_SCALE] = step_grad_scale(s, loss_scale, clip);
}

void cu_adamw(int dt, float *master, void *weights, const void *grads, float *m, float *v, size_t n, float lr,
              float beta1, float beta2, float eps, float weight_decay, float b1_correction, float b2_correction,
              const double *scale) {
    float grad_scale = (float)*scale;
    if (isnan(grad_scale)) return;  // a skipped step
    float *fg = widen(dt, grads, n);
    for (size_t i = 0; i < n; i++) {  // the formula of cuda/adamw.cu and optimizer.h
        float g = fg[i] * grad_scale;
        m[i] = beta1 * m[i] + (1.0f - beta1) * g;
        v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
        master[i] -= lr * ((m[i] / b1_correction) / (sqrtf(v[i] / b2_correction) + eps) + weight_decay * master[i]);
    }
    free(fg);
    if (weights && dt != DT_FP32) dtype_store(weights, master, n, dt);
}

void cu_store_dtype(int dt, void *dst, const float *src, size_t n) {
    if (dst != src) dtype_store(dst, src, n, dt);
}
