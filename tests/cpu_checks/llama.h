// tests/cpu_checks/llama.h — tests/test_cpu.c's checks of Llama's ops and layout: RMSNorm, SwiGLU,
// the rotary embedding and grouped-query attention, each backward against central differences at
// odd sizes; grouped-query attention against full attention with each group's K and V repeated;
// flash against naive with groups; the parameter layout against the published model sizes.
#ifndef GPTMEM_TEST_CPU_LLAMA_H
#define GPTMEM_TEST_CPU_LLAMA_H

double loss_rmsnorm(void) {
    rmsnorm_forward(outb, rstd_b, in1, w1, TB * TT, TC, 1e-5f);
    return dot(outb, rr, TB * TT * TC);
}

void test_rmsnorm(void) {
    size_t N = TB * TT;
    in1 = fvec(N * TC); w1 = fvec(TC); outb = fvec(N * TC); rr = fvec(N * TC); rstd_b = fvec(N);
    fill_normal(in1, N * TC, 1); fill_normal(w1, TC, 1); fill_normal(rr, N * TC, 1);
    float *dx = fvec(N * TC), *dw = fvec(TC);
    loss_rmsnorm();
    rmsnorm_backward(dx, dw, rr, in1, w1, rstd_b, N, TC);
    fd_check("fd rmsnorm dinp", loss_rmsnorm, in1, dx, N * TC);
    fd_check("fd rmsnorm dw", loss_rmsnorm, w1, dw, TC);
    free(in1); free(w1); free(outb); free(rr); free(rstd_b); free(dx); free(dw);
}

enum { TF = 11 };  // SwiGLU's hidden width: odd
double loss_swiglu(void) {
    swiglu_forward(outb, in1, TB * TT, TF);
    return dot(outb, rr, TB * TT * TF);
}

void test_swiglu(void) {
    size_t N = TB * TT;
    in1 = fvec(N * 2 * TF); outb = fvec(N * TF); rr = fvec(N * TF);
    fill_normal(in1, N * 2 * TF, 2); fill_normal(rr, N * TF, 1);
    float *dx = fvec(N * 2 * TF);
    swiglu_backward(dx, in1, rr, N, TF);
    fd_check("fd swiglu dinp (up and gate)", loss_swiglu, in1, dx, N * 2 * TF);
    free(in1); free(outb); free(rr); free(dx);
}

// RoPE on a row of 2 query heads, 1 key head and 1 value head (hs 6): only the first 3 heads turn
enum { RP_HEADS = 4, RP_ROT = 3, RP_HS = 6, RP_ROW = RP_HEADS * RP_HS };
double loss_rope(void) {
    memcpy(outb, in1, sizeof(float) * TB * TT * RP_ROW);
    rope_forward(outb, TB * TT, TT, 3, RP_ROW, RP_ROT, RP_HS, (Rope){10000.0f, 0});
    return dot(outb, rr, TB * TT * RP_ROW);
}

void test_rope(void) {
    size_t N = TB * TT, n = N * RP_ROW;
    in1 = fvec(n); outb = fvec(n); rr = fvec(n);
    fill_normal(in1, n, 1); fill_normal(rr, n, 1);
    float *dx = fvec(n);
    memcpy(dx, rr, sizeof(float) * n);
    rope_backward(dx, N, TT, 3, RP_ROW, RP_ROT, RP_HS, (Rope){10000.0f, 0});
    fd_check("fd rope (the rotation back)", loss_rope, in1, dx, n);
    // each pair keeps its length; the value head and position 0 (p0 0) stay as they were
    loss_rope();
    double worst = 0;
    for (size_t i = 0; i + 1 < n; i += 2) {
        double a = hypot(in1[i], in1[i + 1]), b = hypot(outb[i], outb[i + 1]);
        if (fabs(a - b) / a > worst) worst = fabs(a - b) / a;
    }
    int value_same = 1;
    for (size_t r = 0; r < N; r++)
        value_same &= !memcmp(outb + r * RP_ROW + RP_ROT * RP_HS, in1 + r * RP_ROW + RP_ROT * RP_HS, sizeof(float) * RP_HS);
    memcpy(outb, in1, sizeof(float) * n);
    rope_forward(outb, N, TT, 0, RP_ROW, RP_ROT, RP_HS, (Rope){10000.0f, 0});
    int zero_same = !memcmp(outb, in1, sizeof(float) * RP_ROW);
    check(worst < 1e-6 && value_same && zero_same, "rope rotates pairs",
          "lengths kept (worst %.1e), the value head untouched, position 0 unturned", worst);
    free(in1); free(outb); free(rr); free(dx);
}

// grouped-query attention: 4 query heads over 2 key-value heads of 3 channels, odd T
Heads gq = {4, 2, 3};
double loss_gqa(void) {
    attention_forward_heads(outb, att_b, in1, TB, TT, gq);
    return dot(outb, rr, (size_t)TB * TT * gq.H * gq.hs);
}
double loss_gqa_flash(void) {
    flash_attention_forward_heads(outb, att_b, in1, TB, TT, gq);
    return dot(outb, rr, (size_t)TB * TT * gq.H * gq.hs);
}

// qkv with each group's K and V repeated for its query heads: the rows full attention reads
static void repeat_kv(float *full, const float *qkv, size_t N, Heads g) {
    Heads m = {g.H, g.H, g.hs};
    for (size_t r = 0; r < N; r++)
        for (int h = 0; h < g.H; h++) {
            memcpy(full + r * heads_row(m) + q_at(m, h), qkv + r * heads_row(g) + q_at(g, h), sizeof(float) * g.hs);
            memcpy(full + r * heads_row(m) + k_at(m, h), qkv + r * heads_row(g) + k_at(g, h), sizeof(float) * g.hs);
            memcpy(full + r * heads_row(m) + v_at(m, h), qkv + r * heads_row(g) + v_at(g, h), sizeof(float) * g.hs);
        }
}

void test_gqa(void) {
    size_t N = TB * TT, R = heads_row(gq), C = (size_t)gq.H * gq.hs;
    in1 = fvec(N * R); outb = fvec(N * C); rr = fvec(N * C); att_b = fvec((size_t)TB * gq.H * TT * TT);
    fill_normal(in1, N * R, 1); fill_normal(rr, N * C, 1);
    float *dqkv = fvec(N * R);
    loss_gqa();
    attention_backward_heads(dqkv, rr, in1, att_b, TB, TT, gq);
    fd_check("fd grouped-query attention dqkv (2 query heads a KV head)", loss_gqa, in1, dqkv, N * R);
    loss_gqa_flash();
    flash_attention_backward_heads(dqkv, rr, in1, outb, att_b, TB, TT, gq);
    fd_check("fd grouped-query flash attention dqkv", loss_gqa_flash, in1, dqkv, N * R);
    free(in1); free(outb); free(rr); free(att_b); free(dqkv);

    // against full attention on the repeated K and V (the group's K and V gradient: the sum of its
    // heads'), and flash against naive, at a T that crosses a flash tile
    int B = 2, T = 75;
    Heads g = {6, 2, 5}, m = {6, 6, 5};
    N = (size_t)B * T; R = heads_row(g); C = (size_t)g.H * g.hs;
    float *qkv = fvec(N * R), *full = fvec(N * heads_row(m)), *dout = fvec(N * C), *att = fvec((size_t)B * g.H * T * T);
    float *o_g = fvec(N * C), *o_m = fvec(N * C), *o_f = fvec(N * C), *lse = fvec((size_t)B * g.H * T);
    float *d_g = fvec(N * R), *d_m = fvec(N * heads_row(m)), *d_f = fvec(N * R), *d_sum = fvec(N * R);
    fill_normal(qkv, N * R, 1.5f); fill_normal(dout, N * C, 1);
    repeat_kv(full, qkv, N, g);
    attention_forward_heads(o_g, att, qkv, B, T, g);
    attention_backward_heads(d_g, dout, qkv, att, B, T, g);
    attention_forward_heads(o_m, att, full, B, T, m);
    attention_backward_heads(d_m, dout, full, att, B, T, m);
    for (size_t r = 0; r < N; r++)
        for (int h = 0; h < g.H; h++) {
            const float *src = d_m + r * heads_row(m);
            float *dst = d_sum + r * R;
            for (int i = 0; i < g.hs; i++) {
                dst[q_at(g, h) + i] = src[q_at(m, h) + i];
                dst[k_at(g, h) + i] += src[k_at(m, h) + i];
                dst[v_at(g, h) + i] += src[v_at(m, h) + i];
            }
        }
    double eo = rel_err_ff(o_g, o_m, N * C), ed = rel_err_ff(d_g, d_sum, N * R);
    check(eo == 0 && ed < 1e-6, "grouped-query attention == full attention on repeated K and V",
          "H 6 KVH 2 T %d: forward %.1e (the same sums), backward %.2e", T, eo, ed);
    flash_attention_forward_heads(o_f, lse, qkv, B, T, g);
    flash_attention_backward_heads(d_f, dout, qkv, o_f, lse, B, T, g);
    double ef = rel_err_ff(o_f, o_g, N * C), eb = rel_err_ff(d_f, d_g, N * R);
    check(ef < 1e-5 && eb < 1e-5, "grouped-query flash == naive", "H 6 KVH 2 T %d: forward %.2e, backward %.2e", T, ef, eb);
    free(qkv); free(full); free(dout); free(att); free(o_g); free(o_m); free(o_f); free(lse);
    free(d_g); free(d_m); free(d_f); free(d_sum);
}

// --- Llama's parameter layout (core/config.h) ---------------------------------------------
// The published sizes: Llama 3 8B and 70B (untied head), Llama 3.2 1B and 3B (tied); every tensor
// in its place; init: norms 1, the padded rows of both tables 0.
void test_llama_layout(void) {
    struct { const char *name; GPTConfig c; size_t published; } shapes[] = {
        {"llama3-8b", {.layers = 32, .channels = 4096, .heads = 32, .vocab = 128256, .max_seq = 8192,
                       .arch = ARCH_LLAMA, .kv_heads = 8, .ffn = 14336, .untied = 1}, 8030261248u},
        {"llama3-70b", {.layers = 80, .channels = 8192, .heads = 64, .vocab = 128256, .max_seq = 8192,
                        .arch = ARCH_LLAMA, .kv_heads = 8, .ffn = 28672, .untied = 1}, 70553706496u},
        {"llama3.2-1b", {.layers = 16, .channels = 2048, .heads = 32, .vocab = 128256, .max_seq = 131072,
                         .arch = ARCH_LLAMA, .kv_heads = 8, .ffn = 8192}, 1235814400u},
        {"llama3.2-3b", {.layers = 28, .channels = 3072, .heads = 24, .vocab = 128256, .max_seq = 131072,
                         .arch = ARCH_LLAMA, .kv_heads = 8, .ffn = 8192}, 3212749824u},
    };
    for (int i = 0; i < 4; i++) {
        const GPTConfig *c = &shapes[i].c;
        int nt = param_tensor_count(c);
        ParamTensor *t = malloc(sizeof(ParamTensor) * nt);
        param_tensors(c, t);
        size_t sum = t[nt - 1].offset + t[nt - 1].count, fc = op_param_count(c, OP_FC);
        free(t);
        check(param_count(c) == shapes[i].published && sum == param_count(c) && nt == 2 + 6 * c->layers + c->untied &&
              fc == 2 * (size_t)c->ffn * c->channels && predict_param_count(c) == param_count(c), "llama layout",
              "%s: %zu parameters (published %zu), tensors %zu, predictor %zu", shapes[i].name, param_count(c),
              shapes[i].published, sum, predict_param_count(c));
    }
    GPTConfig c = {.layers = 2, .channels = 8, .heads = 4, .vocab = 70, .max_seq = 16, .arch = ARCH_LLAMA,
                   .kv_heads = 2, .ffn = 12, .untied = 1};  // Vp 128: 58 padded rows in each table
    size_t P = param_count(&c), C = c.channels, Vp = padded_vocab(&c);
    float *p = fvec(P);
    init_params(p, &c, 7);
    size_t ln2 = op_param_offset(&c, 1, OP_LN2), head = P - Vp * C;
    int ones = 1, pad_zero = 1;
    for (size_t j = 0; j < C; j++) ones &= p[ln2 + j] == 1.0f && p[layer_offset(&c, 2) + j] == 1.0f;  // ln2, lnf
    for (size_t j = (size_t)c.vocab * C; j < Vp * C; j++) pad_zero &= p[j] == 0.0f && p[head + j] == 0.0f;
    check(P == Vp * C * 2 + 2 * (2 * C + 16 * C + C * C + 3 * 12 * C) + C && ones && pad_zero && p[head] != 0.0f,
          "llama init", "%zu parameters (H 4 KVH 2 hs 2: qkv 16 rows); norms 1; the tables' padded rows 0", P);
    free(p);
}

#endif
