// tests/cuda_checks/attention.h — tests/test_cuda.c's checks of attention, naive and flash, and the
// tensor-core flash kernels against the reference ones.
#ifndef GPTMEM_TEST_CUDA_ATTENTION_H
#define GPTMEM_TEST_CUDA_ATTENTION_H

// Naive and flash attention, forward and backward, on one shape: H query heads over KVH key-value
// heads (KVH = H: GPT-2's; fewer: Llama's grouped-query attention).
void test_attention(int dt, int B, int T, int H, int KVH, int hs) {
    Heads g = {H, KVH, hs};
    int C = H * hs, N = B * T;
    size_t W = heads_row(g);
    char shape[80];
    snprintf(shape, sizeof shape, "B%d T%d H%d KVH%d hs%d%s", B, T, H, KVH, hs,
             cu_flash_uses_mma(dt, hs) ? " (flash: mma)" : "");
    float *qkv = randv((size_t)N * W, 1, dt), *out = fvec((size_t)N * C), *att = fvec((size_t)B * H * T * T);
    attention_forward_heads(out, att, qkv, B, T, g);
    void *d_qkv = up(qkv, (size_t)N * W, dt), *d_out = poisoned((size_t)N * C, dt),
         *d_att = poisoned((size_t)B * H * T * T, dt);
    cu_attention_forward(dt, d_out, d_att, d_qkv, B, T, C, H, KVH);
    expect(label("attention_forward out", shape), dt, d_out, out, (size_t)N * C);
    expect(label("attention_forward att", shape), dt, d_att, att, (size_t)B * H * T * T);
    float *att_s = down(d_att, (size_t)B * H * T * T, dt);  // the backward reads att as stored
    float *dout = randv((size_t)N * C, 1, dt), *dqkv = fvec((size_t)N * W);
    void *d_dout = up(dout, (size_t)N * C, dt), *d_dqkv = poisoned((size_t)N * W, dt);
    attention_backward_heads(dqkv, dout, qkv, att_s, B, T, g);
    cu_attention_backward(dt, d_dqkv, d_dout, d_qkv, d_att, B, T, C, H, KVH);
    expect(label("attention_backward", shape), dt, d_dqkv, dqkv, (size_t)N * W);

    float *lse = fvec((size_t)B * H * T);
    flash_attention_forward_heads(out, lse, qkv, B, T, g);
    void *d_lse = poisoned((size_t)B * H * T, DT_FP32);
    float *D = gpu_malloc(sizeof(float) * B * H * T, "D");
    gpu_free(d_out);
    d_out = poisoned((size_t)N * C, dt);
    cu_flash_forward(dt, d_out, d_lse, d_qkv, B, T, C, H, KVH);
    expect(label("flash_forward out", shape), dt, d_out, out, (size_t)N * C);
    expect_stored(label("flash_forward lse (fp32)", shape), dt, DT_FP32, d_lse, lse, (size_t)B * H * T);
    float *out_s = down(d_out, (size_t)N * C, dt), *lse_s = down(d_lse, (size_t)B * H * T, DT_FP32);
    flash_attention_backward_heads(dqkv, dout, qkv, out_s, lse_s, B, T, g);
    gpu_free(d_dqkv);
    d_dqkv = poisoned((size_t)N * W, dt);
    cu_flash_backward(dt, d_dqkv, d_dout, d_qkv, d_out, d_lse, D, B, T, C, H, KVH);
    expect(label("flash_backward", shape), dt, d_dqkv, dqkv, (size_t)N * W);
    gpu_free(d_qkv); gpu_free(d_out); gpu_free(d_att); gpu_free(d_dout); gpu_free(d_dqkv); gpu_free(d_lse);
    gpu_free(D);
    free(qkv); free(out); free(att); free(att_s); free(dout); free(dqkv); free(lse); free(out_s); free(lse_s);
}

// Attention over sampling's KV cache: a prompt of `prefill` rows in one call, then the rest one row
// at a time, against cpu/attention.h's op doing the same: every row's output, and the cache after
// (KVH hs channels a row: the key-value heads').
void test_attention_cached(int dt, int T, int H, int KVH, int hs, int prefill) {
    Heads g = {H, KVH, hs};
    int C = H * hs;
    size_t e = dtype_size(dt), W = heads_row(g), Ck = (size_t)KVH * hs;
    char shape[80];
    snprintf(shape, sizeof shape, "T%d H%d KVH%d hs%d, a prompt of %d", T, H, KVH, hs, prefill);
    float *qkv = randv((size_t)T * W, 1, dt), *out = fvec((size_t)T * C);
    void *kc = calloc((size_t)T * Ck, e), *vc = calloc((size_t)T * Ck, e);
    void *d_qkv = up(qkv, (size_t)T * W, dt), *d_out = poisoned((size_t)T * C, dt);
    void *d_kc = poisoned((size_t)T * Ck, dt), *d_vc = poisoned((size_t)T * Ck, dt);
    for (int p = 0; p < T;) {
        int n = p == 0 ? prefill : 1;
        attention_forward_cached_heads(out + (size_t)p * C, kc, vc, dt, qkv + (size_t)p * W, p, n, g);
        cu_attention_forward_cached(dt, (char *)d_out + (size_t)p * C * e, d_kc, d_vc, (char *)d_qkv + (size_t)p * W * e,
                                    p, n, C, H, KVH);
        p += n;
    }
    float *k = fvec((size_t)T * Ck), *v = fvec((size_t)T * Ck);
    dtype_load(k, kc, (size_t)T * Ck, dt);
    dtype_load(v, vc, (size_t)T * Ck, dt);
    expect(label("attention_forward_cached out", shape), dt, d_out, out, (size_t)T * C);
    expect(label("attention_forward_cached keys", shape), dt, d_kc, k, (size_t)T * Ck);
    expect(label("attention_forward_cached values", shape), dt, d_vc, v, (size_t)T * Ck);
    gpu_free(d_qkv); gpu_free(d_out); gpu_free(d_kc); gpu_free(d_vc);
    free(qkv); free(out); free(kc); free(vc); free(k); free(v);
}

// The tensor-core flash kernels against the reference kernels (attention.cu),
// on the same inputs, at shapes with partial tiles: out, lse and dqkv (KVH < H: grouped heads).
void test_flash_mma_vs_reference(int dt, int B, int T, int H, int KVH, int hs) {
    int C = H * hs, N = B * T;
    size_t W = (size_t)(H + 2 * KVH) * hs;
    char shape[64];
    snprintf(shape, sizeof shape, "B%d T%d H%d KVH%d hs%d", B, T, H, KVH, hs);
    float *qkv = randv((size_t)N * W, 1, dt), *dout = randv((size_t)N * C, 1, dt);
    void *d_qkv = up(qkv, (size_t)N * W, dt), *d_dout = up(dout, (size_t)N * C, dt);
    float *D = gpu_malloc(sizeof(float) * B * H * T, "D");
    void *out[2], *lse[2], *dqkv[2];
    for (int ref = 0; ref < 2; ref++) {  // 0: tensor cores, 1: the reference
        out[ref] = poisoned((size_t)N * C, dt);
        lse[ref] = poisoned((size_t)B * H * T, DT_FP32);
        dqkv[ref] = poisoned((size_t)N * W, dt);
        cu_flash_force_reference(ref);
        cu_flash_forward(dt, out[ref], lse[ref], d_qkv, B, T, C, H, KVH);
        cu_flash_backward(dt, dqkv[ref], d_dout, d_qkv, out[ref], lse[ref], D, B, T, C, H, KVH);
    }
    cu_flash_force_reference(0);
    float *want_out = down(out[1], (size_t)N * C, dt), *want_lse = down(lse[1], (size_t)B * H * T, DT_FP32),
          *want_dqkv = down(dqkv[1], (size_t)N * W, dt);
    expect(label("flash mma vs reference: out", shape), dt, out[0], want_out, (size_t)N * C);
    expect_stored(label("flash mma vs reference: lse (fp32)", shape), dt, DT_FP32, lse[0], want_lse, (size_t)B * H * T);
    expect(label("flash mma vs reference: dqkv", shape), dt, dqkv[0], want_dqkv, (size_t)N * W);
    {  // the mask on the diagonal's tiles alone (the default, out[0]...) against every tile masked: the same bits
        void *o = poisoned((size_t)N * C, dt), *l = poisoned((size_t)B * H * T, DT_FP32), *d = poisoned((size_t)N * W, dt);
        cu_flash_diag(0);
        cu_flash_forward(dt, o, l, d_qkv, B, T, C, H, KVH);
        cu_flash_backward(dt, d, d_dout, d_qkv, o, l, D, B, T, C, H, KVH);
        cu_flash_diag(-1);
        void *a[3] = {out[0], lse[0], dqkv[0]}, *b[3] = {o, l, d};
        size_t n[3] = {(size_t)N * C, (size_t)B * H * T, (size_t)N * W};
        int same = 1;
        for (int k = 0; k < 3; k++) {
            float *x = down(a[k], n[k], k == 1 ? DT_FP32 : dt), *y = down(b[k], n[k], k == 1 ? DT_FP32 : dt);
            same &= !memcmp(x, y, n[k] * sizeof(float)), free(x), free(y), gpu_free(b[k]);
        }
        check(same, label("flash mma, mask on the diagonal's tiles alone:", shape), "%s", same ? "out, lse and dqkv in the bits of every tile masked" : "other bits than every tile masked");
    }
    if (hs == 64) {  // cu_flash_m2(1): two row tiles a warp in the forward, out and lse in one tile's bits
        void *o = poisoned((size_t)N * C, dt), *l = poisoned((size_t)B * H * T, DT_FP32);
        cu_flash_m2(1);
        cu_flash_forward(dt, o, l, d_qkv, B, T, C, H, KVH);
        cu_flash_m2(-1);
        float *x[2] = {down(out[0], (size_t)N * C, dt), down(o, (size_t)N * C, dt)};
        float *y[2] = {down(lse[0], (size_t)B * H * T, DT_FP32), down(l, (size_t)B * H * T, DT_FP32)};
        int same = !memcmp(x[0], x[1], sizeof(float) * N * C) && !memcmp(y[0], y[1], sizeof(float) * B * H * T);
        check(same, label("flash mma, two row tiles a warp:", shape), "%s", same ? "out and lse in one row tile's bits" : "other bits than one row tile a warp");
        free(x[0]), free(x[1]), free(y[0]), free(y[1]), gpu_free(o), gpu_free(l);
    }
    {  // cu_flash_d16(1): D in 16-byte loads, the 2-byte kernel's D and so dqkv's bits
        void *d = poisoned((size_t)N * W, dt);
        cu_flash_d16(0);
        cu_flash_backward(dt, d, d_dout, d_qkv, out[0], lse[0], D, B, T, C, H, KVH);
        float *D2 = down(D, (size_t)B * H * T, DT_FP32), *g2 = down(d, (size_t)N * W, dt);
        cu_flash_d16(1);
        cu_flash_backward(dt, d, d_dout, d_qkv, out[0], lse[0], D, B, T, C, H, KVH);
        cu_flash_d16(-1);
        float *D16 = down(D, (size_t)B * H * T, DT_FP32), *g16 = down(d, (size_t)N * W, dt);
        int same = !memcmp(D2, D16, sizeof(float) * B * H * T) && !memcmp(g2, g16, sizeof(float) * N * W);
        check(same, label("flash mma, D in 16-byte loads:", shape), "%s", same ? "D and dqkv in the 2-byte kernel's bits" : "other bits than the 2-byte kernel's");
        free(D2), free(D16), free(g2), free(g16), gpu_free(d);
    }
    // qkv one element past a 16-byte boundary: the tensor-core kernels' 16-byte loads cannot take it, so the
    // dispatch gives it to the reference kernels (not a "misaligned address" fault): the reference's numbers
    float *shifted = fvec((size_t)N * W + 1);
    memcpy(shifted + 1, qkv, sizeof(float) * (size_t)N * W);
    void *d_shifted = up(shifted, (size_t)N * W + 1, dt), *off_qkv = (char *)d_shifted + dtype_size(dt);
    void *off_out = poisoned((size_t)N * C, dt), *off_lse = poisoned((size_t)B * H * T, DT_FP32);
    void *off_dqkv = poisoned((size_t)N * W, dt);
    cu_flash_forward(dt, off_out, off_lse, off_qkv, B, T, C, H, KVH);
    cu_flash_backward(dt, off_dqkv, d_dout, off_qkv, off_out, off_lse, D, B, T, C, H, KVH);
    expect(label("flash, qkv off 16 bytes: the reference's out", shape), dt, off_out, want_out, (size_t)N * C);
    expect(label("flash, qkv off 16 bytes: the reference's dqkv", shape), dt, off_dqkv, want_dqkv, (size_t)N * W);
    gpu_free(d_shifted); gpu_free(off_out); gpu_free(off_lse); gpu_free(off_dqkv);
    free(shifted);
    for (int ref = 0; ref < 2; ref++) { gpu_free(out[ref]); gpu_free(lse[ref]); gpu_free(dqkv[ref]); }
    gpu_free(d_qkv); gpu_free(d_dout); gpu_free(D);
    free(qkv); free(dout); free(want_out); free(want_lse); free(want_dqkv);
}

#endif
