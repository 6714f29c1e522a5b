// tests/cuda_checks/ops.h — tests/test_cuda.c's checks of the embedding, layernorm, the GEMMs (a bias
// 8 bytes aligned too; cu_gemm's strides and bands), GELU and the residual.
#ifndef GPTMEM_TEST_CUDA_OPS_H
#define GPTMEM_TEST_CUDA_OPS_H

// --- the ops ---------------------------------------------------------------------

void test_encoder(int dt) {
    int B = 3, T = 17, C = 40, V = 70, N = B * T;
    int *inp = malloc(sizeof(int) * N);
    for (int i = 0; i < N; i++) inp[i] = (int)(rng_next(&test_rng) % 9);  // few tokens: many repeats
    float *wte = randv((size_t)V * C, 1, dt), *wpe = randv((size_t)T * C, 1, dt), *out = fvec((size_t)N * C);
    encoder_forward(out, inp, wte, wpe, B, T, C);
    int *d_inp = gpu_malloc(sizeof(int) * N, "inp");
    gpu_upload(d_inp, inp, sizeof(int) * N);
    void *d_wte = up(wte, (size_t)V * C, dt), *d_wpe = up(wpe, (size_t)T * C, dt), *d_out = poisoned((size_t)N * C, dt);
    cu_encoder_forward(dt, d_out, d_inp, d_wte, d_wpe, B, T, C);
    expect("encoder_forward", dt, d_out, out, (size_t)N * C);
    // backward: gradients accumulate into nonzero starting values
    float *dout = randv((size_t)N * C, 1, dt), *dwte = randv((size_t)V * C, 1, dt), *dwpe = randv((size_t)T * C, 1, dt);
    void *d_dout = up(dout, (size_t)N * C, dt), *d_dwte = up(dwte, (size_t)V * C, dt), *d_dwpe = up(dwpe, (size_t)T * C, dt);
    encoder_backward(dwte, dwpe, dout, inp, B, T, C);
    int *buckets = malloc(sizeof(int) * (3 * N + 1)), *count = malloc(sizeof(int) * V);
    int nb = bucket_tokens(inp, N, V, buckets, count);
    int *d_buckets = gpu_malloc(sizeof(int) * (3 * N + 1), "buckets");
    gpu_upload(d_buckets, buckets, sizeof(int) * (3 * N + 1));
    cu_encoder_backward(dt, d_dwte, d_dwpe, d_dout, d_buckets, d_buckets + N, d_buckets + 2 * N + 1, nb, B, T, C);
    expect("encoder_backward dwte", dt, d_dwte, dwte, (size_t)V * C);
    expect("encoder_backward dwpe", dt, d_dwpe, dwpe, (size_t)T * C);
    gpu_free(d_inp); gpu_free(d_wte); gpu_free(d_wpe); gpu_free(d_out); gpu_free(d_dout); gpu_free(d_dwte);
    gpu_free(d_dwpe); gpu_free(d_buckets);
    free(inp); free(wte); free(wpe); free(out); free(dout); free(dwte); free(dwpe); free(buckets); free(count);
}

// bucket_tokens (gpu/head.h, host C: runs without a GPU): 3000 positions, token 5 at every third, the
// rest over 64 tokens; every position in exactly one bucket, of its token, in order; the buckets largest
// first, ties by token
void test_bucket_tokens(void) {
    enum { N = 3000, V = 70 };
    int *inp = malloc(sizeof(int) * N), *out = malloc(sizeof(int) * (3 * N + 1)), *count = malloc(sizeof(int) * V);
    int *seen = calloc(N, sizeof(int)), *pos = out, *start = out + N, *tok = start + N + 1, good = 1, prev = N + 1;
    for (int i = 0; i < N; i++) inp[i] = i % 3 == 0 ? 5 : (int)(rng_next(&test_rng) % 64);
    int nb = bucket_tokens(inp, N, V, out, count), distinct = 0;
    for (int v = 0; v < V; v++) {
        int n = 0;
        for (int i = 0; i < N; i++) n += inp[i] == v;
        distinct += n > 0;
    }
    good &= nb == distinct && start[0] == 0 && start[nb] == N && tok[0] == 5;
    for (int u = 0; u < nb && good; u++) {
        int n = start[u + 1] - start[u];
        good &= n > 0 && (n < prev || (n == prev && tok[u] > tok[u - 1]));
        prev = n;
        for (int j = start[u]; j < start[u + 1]; j++) {
            good &= inp[pos[j]] == tok[u] && (j == start[u] || pos[j] > pos[j - 1]);
            seen[pos[j]]++;
        }
    }
    for (int i = 0; i < N; i++) good &= seen[i] == 1;
    check(good, "bucket_tokens", "%d buckets, token 5's %d positions first; each position once, in order, the buckets largest first (ties by token)", nb, start[1] - start[0]);
    free(inp); free(out); free(count); free(seen);
}

// cu_encoder_pack16(1): the embedding in 16-byte pieces against the kernels in use, for a token at 1,000
// positions (a bucket past the wte kernel's 8 in flight, over 2 slices of a row in fp32): the same bits,
// the backward whole and in --fused-ce's chunks, and the forward; and against cpu/ops.h
void test_encoder16(int dt) {
    int B = 3, T = 1000, C = 200, V = 64, N = B * T, rows = V + T;
    int *inp = malloc(sizeof(int) * N), *buckets = malloc(sizeof(int) * (3 * N + 1)), *count = malloc(sizeof(int) * V);
    for (int i = 0; i < N; i++) inp[i] = i % 3 == 0 ? 5 : (int)(rng_next(&test_rng) % V);
    int nb = bucket_tokens(inp, N, V, buckets, count), *d_b = gpu_malloc(sizeof(int) * (3 * N + 1), "buckets");
    gpu_upload(d_b, buckets, sizeof(int) * (3 * N + 1));
    float *dout = randv((size_t)N * C, 1, dt), *table = randv((size_t)rows * C, 1, dt), *got[4];
    void *d_dout = up(dout, (size_t)N * C, dt);
    for (int k = 0; k < 4; k++) {  // whole (off, on), in chunks of 48 rows (off, on)
        void *d_t = up(table, (size_t)rows * C, dt);
        cu_encoder_pack16(k % 2);
        if (k < 2) cu_encoder_backward(dt, d_t, (char *)d_t + (size_t)V * C * dtype_size(dt), d_dout, d_b, d_b + N, d_b + 2 * N + 1, nb, B, T, C);
        for (int r0 = 0; k >= 2 && r0 < rows; r0 += 48)
            cu_encoder_backward_chunk(dt, (char *)d_t + (size_t)r0 * C * dtype_size(dt), d_dout, d_b, d_b + N, d_b + 2 * N + 1,
                                      nb, r0, r0 + 48 < rows ? r0 + 48 : rows, V, B, T, C);
        cu_encoder_pack16(-1);
        got[k] = down(d_t, (size_t)rows * C, dt);
        gpu_free(d_t);
    }
    encoder_backward(table, table + (size_t)V * C, dout, inp, B, T, C);
    void *d_want = up(got[1], (size_t)rows * C, dt);
    expect("encoder_backward in 16-byte pieces (a token at 1000 positions)", dt, d_want, table, (size_t)rows * C);
    char name[96];
    for (int k = 1; k < 4; k += 2) {
        int same = !memcmp(got[k - 1], got[k], (size_t)rows * C * sizeof(float));
        snprintf(name, sizeof name, "encoder_backward%s in 16-byte pieces, bits %s", k == 3 ? "_chunk" : "", dtype_name[dt]);
        check(same, name, "%s", same ? "the 2-byte kernel's" : "not the 2-byte kernel's");
    }
    {  // the forward in 16-byte pieces: the same bits
        int *d_inp = gpu_malloc(sizeof(int) * N, "inp");
        gpu_upload(d_inp, inp, sizeof(int) * N);
        void *d_t = up(table, (size_t)rows * C, dt), *o[2];
        float *f[2];
        for (int on = 0; on <= 1; on++) {
            o[on] = poisoned((size_t)N * C, dt);
            cu_encoder_pack16(on);
            cu_encoder_forward(dt, o[on], d_inp, d_t, (char *)d_t + (size_t)V * C * dtype_size(dt), B, T, C);
            f[on] = down(o[on], (size_t)N * C, dt);
        }
        cu_encoder_pack16(-1);
        int same = !memcmp(f[0], f[1], (size_t)N * C * sizeof(float)) && isfinite(f[1][N * C - 1]);
        snprintf(name, sizeof name, "encoder_forward in 16-byte pieces, bits %s", dtype_name[dt]);
        check(same, name, "%s", same ? "the 2-byte kernel's" : "not the 2-byte kernel's");
        for (int on = 0; on <= 1; on++) free(f[on]), gpu_free(o[on]);
        gpu_free(d_inp), gpu_free(d_t);
    }
    for (int k = 0; k < 4; k++) free(got[k]);
    gpu_free(d_b); gpu_free(d_dout); gpu_free(d_want);
    free(inp); free(buckets); free(count); free(dout); free(table);
}

// a check's name with its width C ("layernorm_backward dinp C200")
static const char *at_c(const char *what, int C) {
    static char name[96];
    snprintf(name, sizeof name, "%s C%d", what, C);
    return name;
}

// C 200: the backward's 16-byte pieces (cuda/layernorm.cu's dx16 kernel, every dtype); C 203: a channel a lane
static void test_layernorm_at(int dt, int N, int C) {
    float *x = randv((size_t)N * C, 2, dt), *w = randv(C, 1, dt), *b = randv(C, 1, dt);
    float *out = fvec((size_t)N * C), *mean = fvec(N), *rstd = fvec(N);
    layernorm_forward(out, mean, rstd, x, w, b, N, C);
    void *d_x = up(x, (size_t)N * C, dt), *d_w = up(w, C, dt), *d_b = up(b, C, dt);
    void *d_out = poisoned((size_t)N * C, dt), *d_mean = poisoned(N, DT_FP32), *d_rstd = poisoned(N, DT_FP32);
    cu_layernorm_forward(dt, d_out, d_mean, d_rstd, d_x, d_w, d_b, N, C);
    expect(at_c("layernorm_forward out", C), dt, d_out, out, (size_t)N * C);
    expect_stored(at_c("layernorm_forward mean (fp32)", C), dt, DT_FP32, d_mean, mean, N);
    expect_stored(at_c("layernorm_forward rstd (fp32)", C), dt, DT_FP32, d_rstd, rstd, N);
    {  // cu_layernorm_pieces(8): the P 8 instance where it holds the row, the default's bits (R5)
        void *o8 = poisoned((size_t)N * C, dt), *m8 = poisoned(N, DT_FP32), *r8 = poisoned(N, DT_FP32);
        cu_layernorm_pieces(8);
        cu_layernorm_forward(dt, o8, m8, r8, d_x, d_w, d_b, N, C);
        cu_layernorm_pieces(0);
        float *a[3] = {down(d_out, (size_t)N * C, dt), down(d_mean, N, DT_FP32), down(d_rstd, N, DT_FP32)};
        float *p8[3] = {down(o8, (size_t)N * C, dt), down(m8, N, DT_FP32), down(r8, N, DT_FP32)};
        size_t len[3] = {(size_t)N * C, (size_t)N, (size_t)N};
        int same = 1;
        for (int k = 0; k < 3; k++) same &= !memcmp(a[k], p8[k], len[k] * sizeof(float)), free(a[k]), free(p8[k]);
        check(same, at_c("layernorm_forward, pieces 8", C), "%s", same ? "the bits of the default kernel" : "other bits than the default kernel");
        gpu_free(o8), gpu_free(m8), gpu_free(r8);
    }
    // the backward reads the saved mean and rstd as the GPU stored them
    float *mean_s = down(d_mean, N, DT_FP32), *rstd_s = down(d_rstd, N, DT_FP32);
    float *dout = randv((size_t)N * C, 1, dt), *dinp = randv((size_t)N * C, 1, dt), *dw = randv(C, 1, dt),
          *db = randv(C, 1, dt);
    void *d_dout = up(dout, (size_t)N * C, dt), *d_dinp = up(dinp, (size_t)N * C, dt), *d_dw = up(dw, C, dt),
         *d_db = up(db, C, dt);
    layernorm_backward(dinp, dw, db, dout, x, w, mean_s, rstd_s, N, C);
    cu_layernorm_backward(dt, d_dinp, d_dw, d_db, d_dout, d_x, d_w, d_mean, d_rstd, N, C);
    expect(at_c("layernorm_backward dinp", C), dt, d_dinp, dinp, (size_t)N * C);
    expect(at_c("layernorm_backward dw", C), dt, d_dw, dw, C);
    expect(at_c("layernorm_backward db", C), dt, d_db, db, C);
    void *dev[] = {d_x, d_w, d_b, d_out, d_mean, d_rstd, d_dout, d_dinp, d_dw, d_db};
    for (int i = 0; i < 10; i++) gpu_free(dev[i]);
    free(x); free(w); free(b); free(out); free(mean); free(rstd); free(mean_s); free(rstd_s);
    free(dout); free(dinp); free(dw); free(db);
}
// The forward's kernels: C 200 its 16-byte pieces, at most 4 a lane; 203 the kernel of 2-byte loads;
// 1024 in 16-bit the most rows of 4 pieces a lane, in fp32 16; 4096 in 16-bit the most pieces a lane
// holds (16), in fp32 past them (the 2-byte kernel)
void test_layernorm(int dt) {
    test_layernorm_at(dt, 37, 200);
    test_layernorm_at(dt, 37, 203);
    test_layernorm_at(dt, 5, 1024);
    test_layernorm_at(dt, 5, 2048);  // (16-bit: the P 8 instance's widest row)
    test_layernorm_at(dt, 5, 4096);
}

// GELU's backward in the dinp GEMM (cuBLASLt's DGELU epilogue, or where it does not run the GEMM and
// the GELU kernel) against matmul_backward then gelu_backward: its GELU must be model.h's tanh approximation
void test_matmul_dgelu(int dt, int N, int C, int OC) {
    float *x = randv((size_t)N * C, 1, dt), *w = randv((size_t)OC * C, 0.1f, dt), *dout = randv((size_t)N * OC, 1, dt);
    float *pre = randv((size_t)N * C, 2, dt), *dw2 = randv((size_t)OC * C, 1, dt), *db2 = randv(OC, 1, dt);
    float *dinp = fvec((size_t)N * C);
    void *d_x = up(x, (size_t)N * C, dt), *d_w = up(w, (size_t)OC * C, dt), *d_dout = up(dout, (size_t)N * OC, dt);
    void *d_pre = up(pre, (size_t)N * C, dt), *d_dw2 = up(dw2, (size_t)OC * C, dt), *d_db2 = up(db2, OC, dt);
    void *d_dinp2 = poisoned((size_t)N * C, dt);
    matmul_backward(dinp, dw2, db2, dout, x, w, N, C, OC);
    gelu_backward(dinp, pre, dinp, (size_t)N * C);
    cu_matmul_dgelu_backward(dt, d_dinp2, d_dw2, d_db2, d_dout, d_x, d_w, d_pre, N, C, OC);
    // in fp32 the epilogue's GELU' is cuBLASLt's own approximation of the tanh formula's: within 3.6e-6 of the
    // largest value on an H100 (cuBLASLt of CUDA 12), 1.16e-5 on an H200 (CUDA 13.0); the fallback (C 76) ours
    double tol = dt == DT_FP32 && C % 8 == 0 ? 5e-5 : tolerance[dt];
    expect_within(at_c("matmul_dgelu_backward dinp", C), dt, dt, d_dinp2, dinp, (size_t)N * C, tol);
    expect(at_c("matmul_dgelu_backward dw", C), dt, d_dw2, dw2, (size_t)OC * C);
    expect(at_c("matmul_dgelu_backward dbias", C), dt, d_db2, db2, OC);
    void *dev[] = {d_x, d_w, d_dout, d_pre, d_dw2, d_db2, d_dinp2};
    for (int i = 0; i < 7; i++) gpu_free(dev[i]);
    free(x); free(w); free(dout); free(pre); free(dw2); free(db2); free(dinp);
}

// GPT-2's fc with GELU in the GEMM (cu_matmul_gelu_forward, GPTMEM_GELU_EPI's switch): off, -1 and nothing
// written; on, pre and act against matmul_forward then gelu_forward (or, where cuBLASLt has no such algorithm,
// -1 and nothing written: a note); at a width off 8, -1. How many of its bits differ from the two calls' is
// the line the lease reads (gpu-round-7's item 6: --recompute gelu rebuilds act with the kernel).
static int untouched(const void *dev, size_t n, int dt) {
    float *got = down(dev, n, dt);
    int nan = !isfinite(got[0]) && !isfinite(got[n - 1]);
    free(got);
    return nan;
}
void test_matmul_gelu(int dt, int N, int C, int OC) {
    size_t n = (size_t)N * OC, e = dtype_size(dt);
    float *x = randv((size_t)N * C, 1, dt), *w = randv((size_t)OC * C, 0.1f, dt), *bias = randv(OC, 1, dt);
    float *pre = fvec(n), *act = fvec(n);
    matmul_forward(pre, x, w, bias, N, C, OC);
    gelu_forward(act, pre, n);
    void *d_x = up(x, (size_t)N * C, dt), *d_w = up(w, (size_t)OC * C, dt), *d_b = up(bias, OC, dt);
    void *d_pre = poisoned(n, dt), *d_act = poisoned(n, dt), *d_pre2 = poisoned(n, dt), *d_act2 = poisoned(n, dt);
    cu_matmul_gelu_epilogue(-1);
    int off = cu_matmul_gelu_forward(dt, d_act, d_pre, d_x, d_w, d_b, N, C, OC);
    check(off == -1 && untouched(d_act, n, dt) && untouched(d_pre, n, dt), label("matmul_gelu_forward off", dtype_name[dt]),
          "returns -1 and writes nothing");
    cu_matmul_gelu_epilogue(1);
    int r = cu_matmul_gelu_forward(dt, d_act, d_pre, d_x, d_w, d_b, N, C, OC);
    cu_matmul_gelu_epilogue(-1);
    if (OC % 8) {
        check(r == -1 && untouched(d_act, n, dt), label("matmul_gelu_forward at a width off 8", dtype_name[dt]),
              "returns -1 and writes nothing (cuBLASLt's aux wants 8)");
    } else if (r == 0) {
        expect("matmul_gelu_forward pre", dt, d_pre, pre, n);
        expect("matmul_gelu_forward act", dt, d_act, act, n);
        cu_matmul_forward(dt, d_pre2, d_x, d_w, d_b, N, C, OC);
        cu_gelu_forward(dt, d_act2, d_pre2, n);
        unsigned char *h[4];
        void *d[4] = {d_pre, d_pre2, d_act, d_act2};
        for (int i = 0; i < 4; i++) h[i] = malloc(n * e), gpu_download(h[i], d[i], n * e);
        size_t pre_differ = 0, act_differ = 0;
        for (size_t i = 0; i < n; i++)
            pre_differ += memcmp(h[0] + i * e, h[1] + i * e, e) != 0, act_differ += memcmp(h[2] + i * e, h[3] + i * e, e) != 0;
        printf("note: matmul_gelu_forward %s (%d x %d x %d): against cu_matmul_forward then cu_gelu_forward, %zu of %zu "
               "pre and %zu act elements differ\n", dtype_name[dt], N, C, OC, pre_differ, n, act_differ);
        for (int i = 0; i < 4; i++) free(h[i]);
    } else {
        check(untouched(d_act, n, dt), label("matmul_gelu_forward refused", dtype_name[dt]), "writes nothing");
        printf("note: cuBLASLt has no GELU_AUX_BIAS algorithm for %d x %d x %d (%s): the model takes the two calls\n", N,
               C, OC, dtype_name[dt]);
    }
    void *dev[] = {d_x, d_w, d_b, d_pre, d_act, d_pre2, d_act2};
    for (int i = 0; i < 7; i++) gpu_free(dev[i]);
    free(x); free(w); free(bias); free(pre); free(act);
}

// cu_gemm, --lora's five products (gpu/lora.h) on a band of a wider output: A and B read plain and
// transposed (a row stride of 1), alpha, beta 0 (C written) and beta 1 (added into; the columns around
// the band untouched). Each against cpu/gemm.h's gemm on the GPU's own inputs.
void test_gemm(int dt) {
    int N = 45, R = 3, in = 40, OC = 100, row0 = 20, rows = 36;  // (the band 40 bytes in, in 16 bits)
    size_t e = dtype_size(dt);
    float s = 8.0f / R, *x = randv((size_t)N * in, 1, dt), *A = randv((size_t)R * in, 0.2f, dt);
    float *B = randv((size_t)rows * R, 0.2f, dt), *out = randv((size_t)N * OC, 1, dt), *dA = randv((size_t)R * in, 1, dt);
    float *dB = randv((size_t)rows * R, 1, dt), *u = fvec((size_t)N * R), *du = fvec((size_t)N * R);
    void *d_x = up(x, (size_t)N * in, dt), *d_A = up(A, (size_t)R * in, dt), *d_B = up(B, (size_t)rows * R, dt);
    void *d_out = up(out, (size_t)N * OC, dt), *d_dA = up(dA, (size_t)R * in, dt), *d_dB = up(dB, (size_t)rows * R, dt);
    void *d_u = poisoned((size_t)N * R, dt), *d_du = poisoned((size_t)N * R, dt);
    void *band = (char *)d_out + row0 * e;
    gemm(N, R, in, x, in, 1, A, 1, in, u, R, 0);  // u = s x A^T
    for (int i = 0; i < N * R; i++) u[i] *= s;
    cu_gemm(dt, N, R, in, s, d_x, in, 1, d_A, 1, in, 0.0f, d_u, R);
    expect("gemm u = s x A^T (alpha; B transposed)", dt, d_u, u, (size_t)N * R);
    float *us = down(d_u, (size_t)N * R, dt);
    gemm(N, rows, R, us, R, 1, B, 1, R, out + row0, OC, 1);  // out[:, band] += u B^T
    cu_gemm(dt, N, rows, R, 1.0f, d_u, R, 1, d_B, 1, R, 1.0f, band, OC);
    expect("gemm out[:, band] += u B^T (beta 1, rows OC apart, the other columns untouched)", dt, d_out, out,
           (size_t)N * OC);
    float *os = down(d_out, (size_t)N * OC, dt);
    gemm(rows, R, N, os + row0, 1, OC, us, R, 1, dB, R, 1);  // dB += dout_band^T u
    cu_gemm(dt, rows, R, N, 1.0f, band, 1, OC, d_u, R, 1, 1.0f, d_dB, R);
    expect("gemm dB += dout[:, band]^T u (A transposed, strided)", dt, d_dB, dB, (size_t)rows * R);
    gemm(N, R, rows, os + row0, OC, 1, B, R, 1, du, R, 0);  // du = s dout_band B
    for (int i = 0; i < N * R; i++) du[i] *= s;
    cu_gemm(dt, N, R, rows, s, band, OC, 1, d_B, R, 1, 0.0f, d_du, R);
    expect("gemm du = s dout[:, band] B (A strided)", dt, d_du, du, (size_t)N * R);
    float *dus = down(d_du, (size_t)N * R, dt);
    gemm(R, in, N, dus, 1, R, x, in, 1, dA, in, 1);  // dA += du^T x
    cu_gemm(dt, R, in, N, 1.0f, d_du, 1, R, d_x, in, 1, 1.0f, d_dA, in);
    expect("gemm dA += du^T x (A transposed)", dt, d_dA, dA, (size_t)R * in);
    void *dev[] = {d_x, d_A, d_B, d_out, d_dA, d_dB, d_u, d_du};
    for (int i = 0; i < 8; i++) gpu_free(dev[i]);
    free(x); free(A); free(B); free(out); free(dA); free(dB); free(u); free(du); free(us); free(os); free(dus);
}

// cu_bias_pack16's column sums (16-byte loads) against the 2-byte kernel's: the same bits, at a width of
// 33 16-byte pieces (a block of 32 and one more) over rows in several chunks
void test_bias16(int dt) {
    int N = 333, C = 40, OC = 264;
    float *x = randv((size_t)N * C, 1, dt), *dout = randv((size_t)N * OC, 1, dt), *db = randv(OC, 1, dt);
    void *d_x = up(x, (size_t)N * C, dt), *d_dout = up(dout, (size_t)N * OC, dt), *d_dw = poisoned((size_t)OC * C, dt);
    void *d_db[2];
    float *got[2];
    for (int by16 = 0; by16 <= 1; by16++) {
        d_db[by16] = up(db, OC, dt);
        gpu_zero(d_dw, (size_t)OC * C * dtype_size(dt));
        cu_bias_pack16(by16);
        cu_matmul_backward(dt, NULL, d_dw, d_db[by16], d_dout, d_x, NULL, N, C, OC);
        cu_bias_pack16(-1);
        got[by16] = down(d_db[by16], OC, dt);
    }
    char name[64];
    snprintf(name, sizeof name, "bias gradient in 16-byte loads %s", dtype_name[dt]);
    int same = !memcmp(got[0], got[1], OC * sizeof(float)), moved = memcmp(got[0], db, OC * sizeof(float)) != 0;
    check(same && moved, name, "%s (%d columns, %d rows)", !moved ? "nothing was added" : same ? "the bits of the 2-byte kernel" : "differs from the 2-byte kernel", OC, N);
    for (int k = 0; k < 2; k++) free(got[k]), gpu_free(d_db[k]);
    gpu_free(d_x); gpu_free(d_dout); gpu_free(d_dw);
    free(x); free(dout); free(db);
}

void test_matmul(int dt) {
    int N = 45, C = 72, OC = 100;  // odd sizes: cuBLASLt must handle unaligned edges
    float *x = randv((size_t)N * C, 1, dt), *w = randv((size_t)OC * C, 0.1f, dt), *bias = randv(OC, 1, dt);
    float *out = fvec((size_t)N * OC);
    matmul_forward(out, x, w, bias, N, C, OC);
    void *d_x = up(x, (size_t)N * C, dt), *d_w = up(w, (size_t)OC * C, dt), *d_bias = up(bias, OC, dt);
    void *d_out = poisoned((size_t)N * OC, dt);
    cu_matmul_forward(dt, d_out, d_x, d_w, d_bias, N, C, OC);
    expect("matmul_forward", dt, d_out, out, (size_t)N * OC);
    // a bias 8 bytes past a 256-byte boundary (ZeRO stages 1-2 on a toy model put one there): cuBLASLt's
    // bias epilogue is not told its alignment, so cu_matmul_forward adds such a bias itself
    size_t skew = 8 / dtype_size(dt);
    void *d_bias_skew = gpu_malloc((OC + skew) * dtype_size(dt), "bias, skewed");
    gpu_copy((char *)d_bias_skew + 8, d_bias, OC * dtype_size(dt));
    void *d_out_skew = poisoned((size_t)N * OC, dt);
    cu_matmul_forward(dt, d_out_skew, d_x, d_w, (char *)d_bias_skew + 8, N, C, OC);
    expect("matmul_forward, bias 8-byte aligned", dt, d_out_skew, out, (size_t)N * OC);
    gpu_free(d_bias_skew);
    gpu_free(d_out_skew);
    // a bias 16 and 32 bytes past a 256-byte boundary takes cuBLASLt's bias epilogue, with a plan made for
    // that alignment (the heuristic reads it from the bias pointer; the plan's key holds it)
    for (size_t off = 16; off <= 32; off += 16) {
        void *d_b = gpu_malloc(OC * dtype_size(dt) + off, "bias, 16 or 32 bytes off"), *d_o = poisoned((size_t)N * OC, dt);
        gpu_copy((char *)d_b + off, d_bias, OC * dtype_size(dt));
        cu_matmul_forward(dt, d_o, d_x, d_w, (char *)d_b + off, N, C, OC);
        expect(off == 16 ? "matmul_forward, bias 16-byte aligned" : "matmul_forward, bias 32-byte aligned", dt, d_o, out,
               (size_t)N * OC);
        gpu_free(d_b);
        gpu_free(d_o);
    }
    float *dout = randv((size_t)N * OC, 1, dt), *dinp = fvec((size_t)N * C), *dw = randv((size_t)OC * C, 1, dt),
          *db = randv(OC, 1, dt);
    void *d_dout = up(dout, (size_t)N * OC, dt), *d_dinp = poisoned((size_t)N * C, dt),
         *d_dw = up(dw, (size_t)OC * C, dt), *d_db = up(db, OC, dt);
    matmul_backward(dinp, dw, db, dout, x, w, N, C, OC);
    cu_matmul_backward(dt, d_dinp, d_dw, d_db, d_dout, d_x, d_w, N, C, OC);
    expect("matmul_backward dinp", dt, d_dinp, dinp, (size_t)N * C);
    expect("matmul_backward dw", dt, d_dw, dw, (size_t)OC * C);
    expect("matmul_backward dbias", dt, d_db, db, OC);
    // the residual added inside the GEMM (C = residual, beta 1): apart from out, and in place
    float *res = randv((size_t)N * OC, 1, dt);
    void *d_res = up(res, (size_t)N * OC, dt), *d_out_res = poisoned((size_t)N * OC, dt);
    residual_forward(out, out, res, (size_t)N * OC);
    cu_matmul_residual_forward(dt, d_out_res, d_x, d_w, d_bias, d_res, N, C, OC);
    expect("matmul_residual_forward", dt, d_out_res, out, (size_t)N * OC);
    cu_matmul_residual_forward(dt, d_res, d_x, d_w, d_bias, d_res, N, C, OC);
    expect("matmul_residual_forward in place", dt, d_res, out, (size_t)N * OC);
    void *dev[] = {d_x, d_w, d_bias, d_out, d_dout, d_dinp, d_dw, d_db, d_res, d_out_res};
    for (int i = 0; i < 10; i++) gpu_free(dev[i]);
    free(x); free(w); free(bias); free(out); free(dout); free(dinp); free(dw); free(db); free(res);
    test_matmul_dgelu(dt, N, C, OC);
    test_matmul_dgelu(dt, N, 76, OC);  // a width of 4 mod 8: not cuBLASLt's DGELU (its aux needs 8), the kernels
    test_matmul_gelu(dt, N, C, 96);
    test_matmul_gelu(dt, N, C, OC);    // (100: off 8)
}

// n 10007: GELU's 16-byte pieces (cuda/elementwise.cu) and the elements past the last whole one
void test_elementwise(int dt) {
    size_t n = 10007;
    float *x = randv(n, 2, dt), *y = randv(n, 1, dt), *out = fvec(n), *dinp = fvec(n);
    void *d_x = up(x, n, dt), *d_y = up(y, n, dt), *d_out = poisoned(n, dt);
    gelu_forward(out, x, n);
    cu_gelu_forward(dt, d_out, d_x, n);
    expect("gelu_forward", dt, d_out, out, n);
    gelu_backward(dinp, x, y, n);
    cu_gelu_backward(dt, d_out, d_x, d_y, n);
    expect("gelu_backward", dt, d_out, dinp, n);
    void *d_inplace = up(y, n, dt);  // the model's backward writes over dout
    cu_gelu_backward(dt, d_inplace, d_x, d_inplace, n);
    expect("gelu_backward in place", dt, d_inplace, dinp, n);
    gpu_free(d_inplace);
    residual_forward(out, x, y, n);
    cu_residual_forward(dt, d_out, d_x, d_y, n);
    expect("residual_forward", dt, d_out, out, n);
    gpu_free(d_x); gpu_free(d_y); gpu_free(d_out);
    free(x); free(y); free(out); free(dinp);
}

#endif
