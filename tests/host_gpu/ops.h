// tests/host_gpu/ops.h — tests/host_gpu.c's kernels: each cu_* op is its CPU twin from cpu/ops.h,
// 16-bit tensors widened to fp32 before and rounded after, as the kernels do in registers (with tests/host_gpu/gemm.h's
// widening and rounding; the GEMMs are there).
#ifndef GPTMEM_HOST_GPU_OPS_H
#define GPTMEM_HOST_GPU_OPS_H

// --- encoder ----------------------------------------------------------------------

void cu_encoder_forward(int dt, void *out, const int *inp, const void *wte, const void *wpe, int B, int T, int C) {
    LAUNCH(B * T);
    out = DEV(out), inp = DEV(inp), wte = DEV(wte), wpe = DEV(wpe);
    int V = 0;  // the rows of wte this batch reads: up to the largest token
    for (int i = 0; i < B * T; i++) V = inp[i] + 1 > V ? inp[i] + 1 : V;
    float *fte = widen(dt, wte, (size_t)V * C), *fpe = widen(dt, wpe, (size_t)T * C);
    float *fo = malloc(sizeof(float) * B * T * C);
    encoder_forward(fo, inp, fte, fpe, B, T, C);
    narrow(dt, out, fo, (size_t)B * T * C);
    free(fte); free(fpe);
}

// The positions come bucketed by token (gpu/head.h bucket_tokens): each
// bucket's rows of wte, and every position's row of wpe, accumulate in
// position order.
void cu_encoder_backward(int dt, void *dwte, void *dwpe, const void *dout, const int *pos, const int *start,
                         const int *tok, int nbuckets, int B, int T, int C) {
    LAUNCH(B * T);
    dwte = DEV(dwte), dwpe = DEV(dwpe), dout = DEV(dout), pos = DEV(pos), start = DEV(start), tok = DEV(tok);
    size_t e = dtype_size(dt);
    float *fd = widen(dt, dout, (size_t)B * T * C), *fpe = widen(dt, dwpe, (size_t)T * C);
    for (int i = 0; i < B * T && fpe; i++)  // (Llama: no position table)
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

void cu_encoder_forward_chunk(int dt, void *out, const int *inp, const void *rows, int r0, int r1, int Vp, int B,
                              int T, int C) {
    LAUNCH(B * T);
    out = DEV(out), inp = DEV(inp), rows = DEV(rows);
    float *fo = widen(dt, out, (size_t)B * T * C), *fr = widen(dt, rows, (size_t)(r1 - r0) * C);
    encoder_forward_chunk(fo, inp, fr, r0, r1, Vp, B, T, C);
    narrow(dt, out, fo, (size_t)B * T * C);
    free(fr);
}

// The chunk's token rows bucket by bucket, in position order (as cu_encoder_backward), then its position rows.
void cu_encoder_backward_chunk(int dt, void *drows, const void *dout, const int *pos, const int *start, const int *tok,
                               int nbuckets, int r0, int r1, int Vp, int B, int T, int C) {
    LAUNCH(B * T);
    drows = DEV(drows), dout = DEV(dout), pos = DEV(pos), start = DEV(start), tok = DEV(tok);
    size_t e = dtype_size(dt);
    float *fd = widen(dt, dout, (size_t)B * T * C);
    for (int u = 0; u < nbuckets; u++) {
        if (tok[u] < r0 || tok[u] >= r1) continue;
        void *row = (char *)drows + (size_t)(tok[u] - r0) * C * e;
        float *fr = widen(dt, row, C);
        for (int j = start[u]; j < start[u + 1]; j++)
            for (int c = 0; c < C; c++) fr[c] += fd[(size_t)pos[j] * C + c];
        narrow(dt, row, fr, C);
    }
    for (int t = r0 > Vp ? r0 - Vp : 0; t < T && Vp + t < r1; t++) {
        void *row = (char *)drows + (size_t)(Vp + t - r0) * C * e;
        float *fr = widen(dt, row, C);
        for (int b = 0; b < B; b++)
            for (int c = 0; c < C; c++) fr[c] += fd[((size_t)b * T + t) * C + c];
        narrow(dt, row, fr, C);
    }
    free(fd);
}

// --- layernorm ----------------------------------------------------------------------

void cu_layernorm_forward(int dt, void *out, float *mean, float *rstd, const void *inp, const void *w, const void *b,
                          int N, int C) {
    LAUNCH(N);
    out = DEV(out), mean = DEV(mean), rstd = DEV(rstd), inp = DEV(inp), w = DEV(w), b = DEV(b);
    float *fi = widen(dt, inp, (size_t)N * C), *fw = widen(dt, w, C), *fb = widen(dt, b, C);
    float *fo = malloc(sizeof(float) * N * C);
    layernorm_forward(fo, mean, rstd, fi, fw, fb, N, C);
    narrow(dt, out, fo, (size_t)N * C);
    free(fi); free(fw); free(fb);
}

void cu_layernorm_backward(int dt, void *dinp, void *dw, void *db, const void *dout, const void *inp, const void *w,
                           const float *mean, const float *rstd, int N, int C) {
    LAUNCH(N);
    dinp = DEV(dinp), dw = DEV(dw), db = DEV(db), dout = DEV(dout), inp = DEV(inp), w = DEV(w), mean = DEV(mean);
    rstd = DEV(rstd);
    float *fdi = widen(dt, dinp, (size_t)N * C), *fdw = widen(dt, dw, C), *fdb = widen(dt, db, C);
    float *fd = widen(dt, dout, (size_t)N * C), *fi = widen(dt, inp, (size_t)N * C), *fw = widen(dt, w, C);
    layernorm_backward(fdi, fdw, fdb, fd, fi, fw, mean, rstd, N, C);
    narrow(dt, dinp, fdi, (size_t)N * C);
    narrow(dt, dw, fdw, C);
    narrow(dt, db, fdb, C);
    free(fd); free(fi); free(fw);
}

void cu_rmsnorm_forward(int dt, void *out, float *rstd, const void *inp, const void *w, int N, int C) {
    LAUNCH(N);
    out = DEV(out), rstd = DEV(rstd), inp = DEV(inp), w = DEV(w);
    float *fi = widen(dt, inp, (size_t)N * C), *fw = widen(dt, w, C), *fo = malloc(sizeof(float) * N * C);
    rmsnorm_forward(fo, rstd, fi, fw, N, C, LLAMA_NORM_EPS);
    narrow(dt, out, fo, (size_t)N * C);
    free(fi); free(fw);
}

void cu_rmsnorm_backward(int dt, void *dinp, void *dw, const void *dout, const void *inp, const void *w,
                         const float *rstd, int N, int C) {
    LAUNCH(N);
    dinp = DEV(dinp), dw = DEV(dw), dout = DEV(dout), inp = DEV(inp), w = DEV(w), rstd = DEV(rstd);
    float *fdi = widen(dt, dinp, (size_t)N * C), *fdw = widen(dt, dw, C), *fd = widen(dt, dout, (size_t)N * C);
    float *fi = widen(dt, inp, (size_t)N * C), *fw = widen(dt, w, C);
    rmsnorm_backward(fdi, fdw, fd, fi, fw, rstd, N, C);
    narrow(dt, dinp, fdi, (size_t)N * C);
    narrow(dt, dw, fdw, C);
    free(fd); free(fi); free(fw);
}

// --- SwiGLU, RoPE ---------------------------------------------------------------------

void cu_swiglu_forward(int dt, void *out, const void *inp, int N, int F) {
    LAUNCH((size_t)N * F);
    out = DEV(out), inp = DEV(inp);
    float *fi = widen(dt, inp, (size_t)N * 2 * F), *fo = malloc(sizeof(float) * N * F);
    swiglu_forward(fo, fi, N, F);
    narrow(dt, out, fo, (size_t)N * F);
    free(fi);
}

void cu_swiglu_backward(int dt, void *dinp, const void *inp, const void *dout, int N, int F) {
    LAUNCH((size_t)N * F);
    dinp = DEV(dinp), inp = DEV(inp), dout = DEV(dout);
    float *fi = widen(dt, inp, (size_t)N * 2 * F), *fd = widen(dt, dout, (size_t)N * F);
    float *fo = malloc(sizeof(float) * N * 2 * F);
    swiglu_backward(fo, fi, fd, N, F);
    narrow(dt, dinp, fo, (size_t)N * 2 * F);
    free(fi); free(fd);
}

static void rope_dt(int dt, void *qkv, int N, int T, int p0, int row, int nheads, int hs, float theta, int scaled,
                    float dir) {
    float *f = widen(dt, qkv, (size_t)N * row);
    if (dir > 0) rope_forward(f, N, T, p0, row, nheads, hs, (Rope){theta, scaled});
    else rope_backward(f, N, T, p0, row, nheads, hs, (Rope){theta, scaled});
    narrow(dt, qkv, f, (size_t)N * row);
}
void cu_rope_forward(int dt, void *qkv, int N, int T, int p0, int row, int nheads, int hs, float theta, int scaled) {
    LAUNCH((size_t)N * nheads * (hs / 2));
    rope_dt(dt, DEV(qkv), N, T, p0, row, nheads, hs, theta, scaled, 1.0f);
}
void cu_rope_backward(int dt, void *dqkv, int N, int T, int p0, int row, int nheads, int hs, float theta, int scaled) {
    LAUNCH((size_t)N * nheads * (hs / 2));
    rope_dt(dt, DEV(dqkv), N, T, p0, row, nheads, hs, theta, scaled, -1.0f);
}

// --- GELU, residual -------------------------------------------------------------------

void cu_gelu_forward(int dt, void *out, const void *inp, size_t n) {
    LAUNCH(n);
    out = DEV(out), inp = DEV(inp);
    float *fi = widen(dt, inp, n), *fo = malloc(sizeof(float) * n);
    gelu_forward(fo, fi, n);
    narrow(dt, out, fo, n);
    free(fi);
}

void cu_gelu_backward(int dt, void *dinp, const void *inp, const void *dout, size_t n) {
    LAUNCH(n);
    dinp = DEV(dinp), inp = DEV(inp), dout = DEV(dout);
    float *fi = widen(dt, inp, n), *fd = widen(dt, dout, n), *fo = malloc(sizeof(float) * (n ? n : 1));
    gelu_backward(fo, fi, fd, n);
    narrow(dt, dinp, fo, n);
    free(fi); free(fd);
}

void cu_residual_forward(int dt, void *out, const void *a, const void *b, size_t n) {
    LAUNCH(n);
    out = DEV(out), a = DEV(a), b = DEV(b);
    float *fa = widen(dt, a, n), *fb = widen(dt, b, n), *fo = malloc(sizeof(float) * n);
    residual_forward(fo, fa, fb, n);
    narrow(dt, out, fo, n);
    free(fa); free(fb);
}

void cu_add_into(int dt, void *dst, const void *src, size_t n) { cu_residual_forward(dt, dst, dst, src, n); }

void cu_widen_into(int dt, float *dst, const void *src, size_t n, int add) {
    LAUNCH(n);
    dst = DEV(dst), src = DEV(src);
    float *fs = widen(dt, src, n);
    for (size_t i = 0; i < n; i++) dst[i] = add ? dst[i] + fs[i] : fs[i];
    free(fs);
}

// --- attention ------------------------------------------------------------------------

// H query heads over KVH key-value heads: the CPU's *_heads ops (rows (H + 2 KVH) hs wide)
static Heads emu_heads(int C, int H, int KVH) { return (Heads){H, KVH, C / H}; }

void cu_attention_forward(int dt, void *out, void *att, const void *qkv, int B, int T, int C, int H, int KVH) {
    LAUNCH(B * T);
    out = DEV(out), att = DEV(att), qkv = DEV(qkv);
    Heads g = emu_heads(C, H, KVH);
    size_t n = (size_t)B * T * C, na = (size_t)B * H * T * T, nq = (size_t)B * T * heads_row(g);
    float *fq = widen(dt, qkv, nq), *fo = malloc(sizeof(float) * n), *fa = malloc(sizeof(float) * na);
    attention_forward_heads(fo, fa, fq, B, T, g);
    narrow(dt, out, fo, n);
    narrow(dt, att, fa, na);
    free(fq);
}

void cu_attention_backward(int dt, void *dqkv, const void *dout, const void *qkv, void *att, int B, int T, int C,
                           int H, int KVH) {
    LAUNCH(B * T);
    dqkv = DEV(dqkv), dout = DEV(dout), qkv = DEV(qkv), att = DEV(att);
    Heads g = emu_heads(C, H, KVH);
    size_t n = (size_t)B * T * C, na = (size_t)B * H * T * T, nq = (size_t)B * T * heads_row(g);
    float *fd = widen(dt, dout, n), *fq = widen(dt, qkv, nq), *fa = widen(dt, att, na);
    float *fdq = calloc(nq, sizeof(float));
    attention_backward_heads(fdq, fd, fq, fa, B, T, g);
    narrow(dt, dqkv, fdq, nq);
    free(fd); free(fq); free(fa);
}

// The rows' keys and values into the cache and their attention over it: cpu/attention.h's op,
// which reads and writes the cache in its dtype
void cu_attention_forward_cached(int dt, void *out, void *kc, void *vc, const void *qkv, int p0, int n, int C, int H,
                                 int KVH) {
    LAUNCH(n);
    out = DEV(out), kc = DEV(kc), vc = DEV(vc), qkv = DEV(qkv);
    Heads g = emu_heads(C, H, KVH);
    float *fq = widen(dt, qkv, (size_t)n * heads_row(g)), *fo = malloc(sizeof(float) * n * C);
    attention_forward_cached_heads(fo, kc, vc, dt, fq, p0, n, g);
    narrow(dt, out, fo, (size_t)n * C);
    free(fq);
}

int cu_flash_uses_mma(int dt, int hs) {
    (void)dt; (void)hs;
    return 0;
}

void cu_flash_force_reference(int on) { (void)on; }
void cu_flash_diag(int on) { (void)on; }  // (no tensor cores here)
void cu_flash_m2(int on) { (void)on; }
void cu_flash_d16(int on) { (void)on; }

void cu_flash_forward(int dt, void *out, float *lse, const void *qkv, int B, int T, int C, int H, int KVH) {
    LAUNCH(B * T);
    out = DEV(out), lse = DEV(lse), qkv = DEV(qkv);
    Heads g = emu_heads(C, H, KVH);
    size_t n = (size_t)B * T * C, nq = (size_t)B * T * heads_row(g);
    float *fq = widen(dt, qkv, nq), *fo = malloc(sizeof(float) * n);
    flash_attention_forward_heads(fo, lse, fq, B, T, g);
    narrow(dt, out, fo, n);
    free(fq);
}

void cu_flash_backward(int dt, void *dqkv, const void *dout, const void *qkv, const void *out, const float *lse,
                       float *D, int B, int T, int C, int H, int KVH) {
    LAUNCH(B * T);
    dqkv = DEV(dqkv), dout = DEV(dout), qkv = DEV(qkv), out = DEV(out), lse = DEV(lse), D = DEV(D);
    (void)D;  // the CPU op computes its D row by row
    Heads g = emu_heads(C, H, KVH);
    size_t n = (size_t)B * T * C, nq = (size_t)B * T * heads_row(g);
    float *fd = widen(dt, dout, n), *fq = widen(dt, qkv, nq), *fo = widen(dt, out, n);
    float *fdq = malloc(sizeof(float) * nq);
    flash_attention_backward_heads(fdq, fd, fq, fo, lse, B, T, g);
    narrow(dt, dqkv, fdq, nq);
    free(fd); free(fq); free(fo);
}

// --- softmax + cross-entropy --------------------------------------------------------------

void cu_crossentropy_forward(int dt, float *losses, const void *logits, const int *targets, int N, int V, int Vp) {
    LAUNCH(N);
    losses = DEV(losses), logits = DEV(logits), targets = DEV(targets);
    for (int i = 0; i < N; i++) {  // a copy of the row: the CPU op writes the probabilities over it
        float *x = widen(dt, (const char *)logits + (size_t)i * Vp * dtype_size(dt), Vp);
        losses[i] = crossentropy_forward(x, targets + i, 1, V, Vp);
        free(x);
    }
}

void cu_crossentropy_backward(int dt, void *logits, const float *losses, const int *targets, int N, int V, int Vp,
                              float dloss) {
    LAUNCH(N);
    logits = DEV(logits), targets = DEV(targets);
    (void)DEV(losses);  // the kernel reads each row's log-sum-exp from its loss; the CPU op recomputes it
    for (int i = 0; i < N; i++) {
        void *row = (char *)logits + (size_t)i * Vp * dtype_size(dt);
        float *x = widen(dt, row, Vp);
        crossentropy_forward(x, targets + i, 1, V, Vp);  // x -> probabilities (0 on the padding)
        crossentropy_backward(x, targets + i, 1, Vp, dloss);
        narrow(dt, row, x, Vp);
    }
}

// Both in one: the forward's losses and the backward's dlogits, each computed as the two ops above do.
void cu_crossentropy_fused(int dt, float *losses, void *logits, const int *targets, int N, int V, int Vp, float dloss) {
    cu_crossentropy_forward(dt, losses, logits, targets, N, V, Vp);
    cu_crossentropy_backward(dt, logits, losses, targets, N, V, Vp, dloss);
}
// GPTMEM_CE_FUSED as cuda/crossentropy.cu reads it: the model's other order runs here too
static int emu_ce_fused = -1;
void cu_crossentropy_fuse(int on) { emu_ce_fused = on; }
int cu_crossentropy_fused_on(void) {
    if (emu_ce_fused < 0) emu_ce_fused = getenv("GPTMEM_CE_FUSED") && atoi(getenv("GPTMEM_CE_FUSED")) != 0;
    return emu_ce_fused;
}

void cu_crossentropy_tile_forward(int dt, const void *tile, int rows, int nv, int v0, int V, const int *targets,
                                  float *m, float *s, float *z) {
    LAUNCH(rows);
    tile = DEV(tile), targets = DEV(targets), m = DEV(m), s = DEV(s), z = DEV(z);
    if (v0 == 0)  // the first tile starts each row
        for (int i = 0; i < rows; i++) m[i] = -INFINITY, s[i] = 0.0f, z[i] = 0.0f;
    float *ft = widen(dt, tile, (size_t)rows * nv);
    crossentropy_tile_forward(ft, rows, nv, v0, V, targets, m, s, z);
    free(ft);
}

void cu_crossentropy_tile_finish(float *lse, const float *s, const float *z, float *losses, int N) {
    LAUNCH(N);
    lse = DEV(lse), s = DEV(s), z = DEV(z), losses = DEV(losses);
    for (int i = 0; i < N; i++) {
        lse[i] += logf(s[i]);
        losses[i] = lse[i] - z[i];
    }
}

void cu_crossentropy_tile_backward(int dt, void *tile, int rows, int nv, int v0, int V, const int *targets,
                                   const float *lse, float dloss) {
    LAUNCH(rows);
    tile = DEV(tile), targets = DEV(targets), lse = DEV(lse);
    float *ft = widen(dt, tile, (size_t)rows * nv);
    crossentropy_tile_backward(ft, rows, nv, v0, V, targets, lse, dloss);
    narrow(dt, tile, ft, (size_t)rows * nv);
}

// --- optimizer -------------------------------------------------------------------------------

void cu_loss_add(double *numbers, const float *losses, int N) {
    LAUNCH(N);
    numbers = DEV(numbers), losses = DEV(losses);
    double sum = 0.0;
    for (int i = 0; i < N; i++) sum += losses[i];  // in row order, as gpt_forward
    numbers[STEP_LOSS] += (float)(sum / N);
}

void cu_sum_squares_partials(int dt, double *partials, const void *g, size_t n) {
    partials = DEV(partials), g = DEV(g);
    memset(partials, 0, sizeof(double) * GPU_NORM_BLOCKS);
    partials[0] = sum_squares_dt(g, n, dt);
}

void cu_grad_scale(double *numbers, const double *partials, int nparts, float loss_scale, float clip) {
    numbers = DEV(numbers), partials = DEV(partials);
    double s = 0.0;
    for (int i = 0; i < nparts; i++) s += partials[i];
    numbers[STEP_SUMSQ] = s;
    numbers[STEP_SCALE] = step_grad_scale(s, loss_scale, clip);
}

// AdamW on n parameters whose gradients are stored in gdt (cu_adamw: dt; --fp32-grads: fp32).
static void adamw_range(int dt, int gdt, float *master, void *weights, const void *grads, float *m, float *v, size_t n,
                        float lr, float beta1, float beta2, float eps, float weight_decay, float b1_correction,
                        float b2_correction, const double *scale) {
    LAUNCH(n);
    master = DEV(master), weights = DEV(weights), grads = DEV(grads), m = DEV(m), v = DEV(v), scale = DEV(scale);
    float grad_scale = (float)*scale;
    if (isnan(grad_scale)) return;  // a skipped step
    float *fg = widen(gdt, grads, n);
    for (size_t i = 0; i < n; i++) {  // the formula of cuda/adamw.cu and core/adamw.h, their roundings
        float g = fg[i] * grad_scale;
        m[i] = fmaf(beta1, m[i], (1.0f - beta1) * g);
        v[i] = fmaf(beta2, v[i], (1.0f - beta2) * g * g);
        float u = fmaf(weight_decay, master[i], (m[i] / b1_correction) / (sqrtf(v[i] / b2_correction) + eps));
        master[i] = fmaf(-lr, u, master[i]);
    }
    free(fg);
    if (weights && dt != DT_FP32) dtype_store(weights, master, n, dt);
}

void cu_adamw(int dt, float *master, void *weights, const void *grads, float *m, float *v, size_t n, float lr,
              float beta1, float beta2, float eps, float weight_decay, float b1_correction, float b2_correction,
              const double *scale) {
    adamw_range(dt, dt, master, weights, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, b1_correction,
                b2_correction, scale);
}

void cu_adamw_segments(int dt, int gdt, float *master, void *weights, const void *grads, float *m, float *v,
                       const AdamwSegment *segs, int nsegs, float lr, float beta1, float beta2, float eps,
                       float b1_correction, float b2_correction, const double *scale) {
    size_t e = dtype_size(dt), ge = dtype_size(gdt);
    for (int s = 0; s < nsegs && s < CU_ADAMW_SEGMENTS; s++) {
        size_t o = segs[s].offset;
        if (!segs[s].n) continue;  // the kernel skips an empty range
        adamw_range(dt, gdt, master + o, weights ? (char *)weights + o * e : NULL, (const char *)grads + o * ge, m + o,
                    v + o, segs[s].n, lr, beta1, beta2, eps, segs[s].weight_decay, b1_correction, b2_correction, scale);
    }
}

void cu_adamw_pack16(int on) { (void)on; }  // (one way here)
void cu_bias_pack16(int on) { (void)on; }
void cu_layernorm_pieces(int p) { (void)p; }
void cu_encoder_pack16(int on) { (void)on; }  // (one way here: the same bits either way on a GPU)

void cu_store_dtype(int dt, void *dst, const float *src, size_t n) {
    LAUNCH(n);
    dst = DEV(dst), src = DEV(src);
    if (dst != src) dtype_store(dst, src, n, dt);
}

#endif
