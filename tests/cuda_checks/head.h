// tests/cuda_checks/head.h — tests/test_cuda.c's checks of the LM head's loss: softmax with
// cross-entropy, and --fused-ce's tiles.
#ifndef GPTMEM_TEST_CUDA_HEAD_H
#define GPTMEM_TEST_CUDA_HEAD_H

// Vp 320: cuda/crossentropy.cu's 16-byte pieces (V 300 ends inside one); Vp 305: a logit a thread; the
// forward, the backward, and both in one kernel
static void test_crossentropy_at(int dt, int N, int V, int Vp) {
    float *logits = randv((size_t)N * Vp, 2, dt), *probs = fvec((size_t)N * Vp);
    int *tg = malloc(sizeof(int) * N);
    for (int i = 0; i < N; i++) tg[i] = (int)(rng_next(&test_rng) % V);
    memcpy(probs, logits, sizeof(float) * N * Vp);
    float loss = crossentropy_forward(probs, tg, N, V, Vp);
    void *d_logits = up(logits, (size_t)N * Vp, dt);
    int *d_tg = gpu_malloc(sizeof(int) * N, "targets");
    gpu_upload(d_tg, tg, sizeof(int) * N);
    float *d_losses = poisoned(N, DT_FP32);
    cu_crossentropy_forward(dt, d_losses, d_logits, d_tg, N, V, Vp);
    float *losses = down(d_losses, N, DT_FP32);
    double sum = 0;
    for (int i = 0; i < N; i++) sum += losses[i];
    double err = fabs(sum / N - loss) / loss;
    char name[64];
    snprintf(name, sizeof name, "crossentropy_forward Vp%d %s", Vp, dtype_name[dt]);
    check(err < 1e-5, name, "mean loss %.6f vs CPU %.6f (the loss is fp32 on both)", sum / N, loss);
    float dloss = 1.0f / N;
    crossentropy_backward(probs, tg, N, Vp, dloss);
    cu_crossentropy_backward(dt, d_logits, d_losses, d_tg, N, V, Vp, dloss);
    snprintf(name, sizeof name, "crossentropy_backward Vp%d", Vp);
    expect(name, dt, d_logits, probs, (size_t)N * Vp);
    // both in one kernel (GPTMEM_CE_FUSED): the two kernels' losses and dlogits, bit for bit
    void *d_fused = up(logits, (size_t)N * Vp, dt);
    float *d_flosses = poisoned(N, DT_FP32);
    cu_crossentropy_fused(dt, d_flosses, d_fused, d_tg, N, V, Vp, dloss);
    float *fl = down(d_flosses, N, DT_FP32), *fd = down(d_fused, (size_t)N * Vp, dt), *two = down(d_logits, (size_t)N * Vp, dt);
    int same = !memcmp(fl, losses, sizeof(float) * N) && !memcmp(fd, two, sizeof(float) * N * Vp);
    snprintf(name, sizeof name, "crossentropy_fused Vp%d %s", Vp, dtype_name[dt]);
    check(same, name, "%s", same ? "the two kernels' losses and dlogits, bit for bit" : "not the two kernels' bits");
    gpu_free(d_fused); gpu_free(d_flosses); free(fl); free(fd); free(two);
    gpu_free(d_logits); gpu_free(d_tg); gpu_free(d_losses);
    free(logits); free(probs); free(tg); free(losses);
}
void test_crossentropy(int dt) {
    test_crossentropy_at(dt, 29, 300, 320);
    test_crossentropy_at(dt, 29, 300, 305);
}

// --fused-ce's pieces on the GPU against their CPU twins: the lookup and its
// gradient a chunk of the table at a time (chunks cut through the token rows,
// and one holds both the last token rows and the first position rows), and
// the loss a tile of logits at a time: the running max, sum and target logit
// over 3 vocabulary tiles (the last one short, with padding), the finished
// log-sum-exp and losses, and each tile's dlogits; and d(lnf) added up over
// the tiles (cu_matmul_backward_into).
void test_fused_ce_ops(int dt) {
    int B = 3, T = 11, C = 24, V = 150, Vp = 192, N = B * T, rows = Vp + T, chunk = 80;
    int *inp = malloc(sizeof(int) * N), *tg = malloc(sizeof(int) * N);
    for (int i = 0; i < N; i++) inp[i] = (int)(rng_next(&test_rng) % V), tg[i] = (int)(rng_next(&test_rng) % V);
    int *d_inp = gpu_malloc(sizeof(int) * N, "inp"), *d_tg = gpu_malloc(sizeof(int) * N, "targets");
    gpu_upload(d_inp, inp, sizeof(int) * N);
    gpu_upload(d_tg, tg, sizeof(int) * N);
    int *buckets = malloc(sizeof(int) * (3 * N + 1)), *count = malloc(sizeof(int) * Vp);
    int nb = bucket_tokens(inp, N, Vp, buckets, count);
    int *d_b = gpu_malloc(sizeof(int) * (3 * N + 1), "buckets");
    gpu_upload(d_b, buckets, sizeof(int) * (3 * N + 1));
    float *table = randv((size_t)rows * C, 1, dt), *out = fvec((size_t)N * C), *dout = randv((size_t)N * C, 1, dt);
    float *dtable = randv((size_t)rows * C, 1, dt);
    void *d_out = up(out, (size_t)N * C, dt), *d_dout = up(dout, (size_t)N * C, dt);
    void *d_dtable = up(dtable, (size_t)rows * C, dt);
    for (int r0 = 0; r0 < rows; r0 += chunk) {
        int r1 = r0 + chunk < rows ? r0 + chunk : rows;
        void *d_rows = up(table + (size_t)r0 * C, (size_t)(r1 - r0) * C, dt);
        encoder_forward_chunk(out, inp, table + (size_t)r0 * C, r0, r1, Vp, B, T, C);
        cu_encoder_forward_chunk(dt, d_out, d_inp, d_rows, r0, r1, Vp, B, T, C);
        encoder_backward_chunk(dtable + (size_t)r0 * C, dout, inp, r0, r1, Vp, B, T, C);
        cu_encoder_backward_chunk(dt, (char *)d_dtable + (size_t)r0 * C * dtype_size(dt), d_dout, d_b, d_b + N,
                                  d_b + 2 * N + 1, nb, r0, r1, Vp, B, T, C);
        gpu_free(d_rows);
    }
    expect("encoder_forward_chunk (3 chunks)", dt, d_out, out, (size_t)N * C);
    expect("encoder_backward_chunk (3 chunks)", dt, d_dtable, dtable, (size_t)rows * C);
    // the loss, tile by tile: logits (N, nv) of each vocabulary chunk of 64
    int nvc = 64;
    float *logits = randv((size_t)N * Vp, 2, dt), *m = fvec(N), *sum = fvec(N), *z = fvec(N);
    for (int i = 0; i < N; i++) m[i] = -INFINITY;
    float *d_m = poisoned(N, DT_FP32), *d_s = poisoned(N, DT_FP32), *d_z = poisoned(N, DT_FP32);
    float *d_losses = poisoned(N, DT_FP32);
    for (int v0 = 0; v0 < Vp; v0 += nvc) {
        float *tile = fvec((size_t)N * nvc);
        for (int i = 0; i < N; i++) memcpy(tile + (size_t)i * nvc, logits + (size_t)i * Vp + v0, sizeof(float) * nvc);
        crossentropy_tile_forward(tile, N, nvc, v0, V, tg, m, sum, z);
        void *d_tile = up(tile, (size_t)N * nvc, dt);
        cu_crossentropy_tile_forward(dt, d_tile, N, nvc, v0, V, d_tg, d_m, d_s, d_z);
        gpu_free(d_tile);
        free(tile);
    }
    expect_stored("crossentropy_tile_forward max (fp32)", dt, DT_FP32, d_m, m, N);
    expect_stored("crossentropy_tile_forward sum (fp32)", dt, DT_FP32, d_s, sum, N);
    expect_stored("crossentropy_tile_forward target logit (fp32)", dt, DT_FP32, d_z, z, N);
    float *lse = fvec(N), *losses = fvec(N);
    for (int i = 0; i < N; i++) lse[i] = m[i] + logf(sum[i]), losses[i] = lse[i] - z[i];
    cu_crossentropy_tile_finish(d_m, d_s, d_z, d_losses, N);
    expect_stored("crossentropy_tile_finish lse (fp32)", dt, DT_FP32, d_m, lse, N);
    expect_stored("crossentropy_tile_finish losses (fp32)", dt, DT_FP32, d_losses, losses, N);
    // the backward of one tile (the last: short, padded), and d(lnf) += dlogits w over two tiles
    float *lnf = randv((size_t)N * C, 1, dt), *w = randv((size_t)Vp * C, 1, dt), *dlnf = fvec((size_t)N * C);
    float *dw = fvec((size_t)Vp * C);
    void *d_lnf = up(lnf, (size_t)N * C, dt), *d_w = up(w, (size_t)Vp * C, dt), *d_dlnf = poisoned((size_t)N * C, dt);
    void *d_dw = up(dw, (size_t)Vp * C, dt);
    float *d_lse = up(lse, N, DT_FP32);
    for (int v0 = 0, k = 0; v0 < Vp; v0 += nvc, k++) {
        float *tile = fvec((size_t)N * nvc);
        for (int i = 0; i < N; i++) memcpy(tile + (size_t)i * nvc, logits + (size_t)i * Vp + v0, sizeof(float) * nvc);
        void *d_tile = up(tile, (size_t)N * nvc, dt);
        crossentropy_tile_backward(tile, N, nvc, v0, V, tg, lse, 1.0f / N);
        cu_crossentropy_tile_backward(dt, d_tile, N, nvc, v0, V, d_tg, d_lse, 1.0f / N);
        if (v0 + nvc >= Vp) expect("crossentropy_tile_backward (the last tile)", dt, d_tile, tile, (size_t)N * nvc);
        gemm(N, C, nvc, tile, nvc, 1, w + (size_t)v0 * C, C, 1, dlnf, C, k > 0);
        gemm(nvc, C, N, tile, 1, nvc, lnf, C, 1, dw + (size_t)v0 * C, C, 1);
        cu_matmul_backward_into(dt, d_dlnf, (char *)d_dw + (size_t)v0 * C * dtype_size(dt), d_tile, d_lnf,
                                (char *)d_w + (size_t)v0 * C * dtype_size(dt), N, C, nvc, k > 0);
        gpu_free(d_tile);
        free(tile);
    }
    expect("matmul_backward_into d(lnf), added over 3 tiles", dt, d_dlnf, dlnf, (size_t)N * C);
    expect("matmul_backward_into d(w) of each tile", dt, d_dw, dw, (size_t)Vp * C);
    gpu_free(d_inp); gpu_free(d_tg); gpu_free(d_b); gpu_free(d_out); gpu_free(d_dout); gpu_free(d_dtable);
    gpu_free(d_m); gpu_free(d_s); gpu_free(d_z); gpu_free(d_losses); gpu_free(d_lnf); gpu_free(d_w);
    gpu_free(d_dlnf); gpu_free(d_dw); gpu_free(d_lse);
    free(inp); free(tg); free(buckets); free(count); free(table); free(out); free(dout); free(dtable); free(logits);
    free(m); free(sum); free(z); free(lse); free(losses); free(lnf); free(w); free(dlnf); free(dw);
}

#endif
