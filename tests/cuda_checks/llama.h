// tests/cuda_checks/llama.h — tests/test_cuda.c's checks of Llama's kernels against their CPU ops:
// RMSNorm (cuda/layernorm.cu with RMS), SwiGLU and RoPE (cuda/llama.cu).
#ifndef GPTMEM_TEST_CUDA_LLAMA_H
#define GPTMEM_TEST_CUDA_LLAMA_H

// C 200: the backward's 16-byte pieces; C 203: a channel a lane (as layernorm's)
static void test_rmsnorm_at(int dt, int N, int C) {
    float *x = randv((size_t)N * C, 2, dt), *w = randv(C, 1, dt), *out = fvec((size_t)N * C), *rstd = fvec(N);
    rmsnorm_forward(out, rstd, x, w, N, C, LLAMA_NORM_EPS);
    void *d_x = up(x, (size_t)N * C, dt), *d_w = up(w, C, dt);
    void *d_out = poisoned((size_t)N * C, dt), *d_rstd = poisoned(N, DT_FP32);
    cu_rmsnorm_forward(dt, d_out, d_rstd, d_x, d_w, N, C);
    expect(at_c("rmsnorm_forward out", C), dt, d_out, out, (size_t)N * C);
    expect_stored(at_c("rmsnorm_forward rstd (fp32)", C), dt, DT_FP32, d_rstd, rstd, N);
    float *rstd_s = down(d_rstd, N, DT_FP32);  // the backward reads rstd as the GPU stored it
    float *dout = randv((size_t)N * C, 1, dt), *dinp = randv((size_t)N * C, 1, dt), *dw = randv(C, 1, dt);
    void *d_dout = up(dout, (size_t)N * C, dt), *d_dinp = up(dinp, (size_t)N * C, dt), *d_dw = up(dw, C, dt);
    rmsnorm_backward(dinp, dw, dout, x, w, rstd_s, N, C);
    cu_rmsnorm_backward(dt, d_dinp, d_dw, d_dout, d_x, d_w, d_rstd, N, C);
    expect(at_c("rmsnorm_backward dinp", C), dt, d_dinp, dinp, (size_t)N * C);
    expect(at_c("rmsnorm_backward dw", C), dt, d_dw, dw, C);
    void *dev[] = {d_x, d_w, d_out, d_rstd, d_dout, d_dinp, d_dw};
    for (int i = 0; i < 7; i++) gpu_free(dev[i]);
    free(x); free(w); free(out); free(rstd); free(rstd_s); free(dout); free(dinp); free(dw);
}

// F 203: rows no multiple of anything
static void test_swiglu_kernels(int dt) {
    int N = 37, F = 203;
    size_t n = (size_t)N * F;
    float *x = randv(2 * n, 2, dt), *dout = randv(n, 1, dt), *out = fvec(n), *dinp = fvec(2 * n);
    void *d_x = up(x, 2 * n, dt), *d_dout = up(dout, n, dt), *d_out = poisoned(n, dt), *d_dinp = poisoned(2 * n, dt);
    swiglu_forward(out, x, N, F);
    cu_swiglu_forward(dt, d_out, d_x, N, F);
    expect("swiglu_forward", dt, d_out, out, n);
    swiglu_backward(dinp, x, dout, N, F);
    cu_swiglu_backward(dt, d_dinp, d_x, d_dout, N, F);
    expect("swiglu_backward (up and gate)", dt, d_dinp, dinp, 2 * n);
    gpu_free(d_x); gpu_free(d_dout); gpu_free(d_out); gpu_free(d_dinp);
    free(x); free(dout); free(out); free(dinp);
}

// 4 query heads and 2 key heads of 24 turned, 2 value heads untouched; T 17 from position 3;
// Llama 3's frequencies and Llama 3.1's
static void test_rope_kernels(int dt, int scaled) {
    int B = 2, T = 17, hs = 24, H = 4, KVH = 2, row = (H + 2 * KVH) * hs, N = B * T, p0 = 3;
    size_t n = (size_t)N * row;
    Rope rope = {LLAMA_ROPE_THETA, scaled};
    float *x = randv(n, 1, dt), *want = fvec(n);
    memcpy(want, x, n * sizeof(float));
    rope_forward(want, N, T, p0, row, H + KVH, hs, rope);
    void *d_x = up(x, n, dt);
    cu_rope_forward(dt, d_x, N, T, p0, row, H + KVH, hs, rope.theta, scaled);
    expect(scaled ? "rope_forward, Llama 3.1's frequencies" : "rope_forward", dt, d_x, want, n);
    memcpy(want, x, n * sizeof(float));
    rope_backward(want, N, T, p0, row, H + KVH, hs, rope);
    gpu_free(d_x);
    d_x = up(x, n, dt);
    cu_rope_backward(dt, d_x, N, T, p0, row, H + KVH, hs, rope.theta, scaled);
    expect(scaled ? "rope_backward, Llama 3.1's frequencies" : "rope_backward", dt, d_x, want, n);
    gpu_free(d_x);
    free(x); free(want);
}

// RoPE far into the context: each device computes the angle p * theta^(-2i/hs) in fp32 with its own
// powf, sinf and cosf, and an fp32 angle near p 8K resolves to about 5e-4 radians, so the two agree
// to the angle's resolution there, not to fp32's 1e-5: fp32, head size 128, positions 8000 to 8016,
// within 2e-3 (a wrong position, one step of p, is off by up to 2).
static void test_rope_far(int scaled) {
    int B = 1, T = 17, hs = 128, H = 4, KVH = 1, row = (H + 2 * KVH) * hs, N = B * T, p0 = 8000;
    size_t n = (size_t)N * row;
    Rope rope = {LLAMA_ROPE_THETA, scaled};
    float *x = randv(n, 1, DT_FP32), *want = fvec(n);
    memcpy(want, x, n * sizeof(float));
    rope_forward(want, N, T, p0, row, H + KVH, hs, rope);
    void *d_x = up(x, n, DT_FP32);
    cu_rope_forward(DT_FP32, d_x, N, T, p0, row, H + KVH, hs, rope.theta, scaled);
    float *got = down(d_x, n, DT_FP32);
    double err = rel(got, want, n), max_err = worst(got, want, n);
    check(err < 2e-3 && max_err < 2e-3, scaled ? "rope_forward at positions 8000-8016, Llama 3.1's frequencies" :
          "rope_forward at positions 8000-8016", "relative error %.2e, worst element %.2e (tolerance 2e-3: the fp32 "
          "angle's resolution at p 8K)", err, max_err);
    memcpy(got, x, n * sizeof(float));  // the check's power: the CPU's own rotation one position later fails it
    rope_forward(got, N, T, p0 + 1, row, H + KVH, hs, rope);
    check(worst(got, want, n) > 2e-3, "rope at 8000-8016: one position off is outside the tolerance",
          "worst element %.2e", worst(got, want, n));
    gpu_free(d_x);
    free(x); free(want); free(got);
}

void test_llama_kernels(int dt) {
    test_rmsnorm_at(dt, 37, 200);
    test_rmsnorm_at(dt, 37, 203);
    test_swiglu_kernels(dt);
    test_rope_kernels(dt, 0);
    test_rope_kernels(dt, 1);
    if (dt == DT_FP32) test_rope_far(0), test_rope_far(1);
}

#endif
