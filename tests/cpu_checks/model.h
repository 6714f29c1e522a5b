// tests/cpu_checks/model.h — tests/test_cpu.c's checks of the whole model: its finite differences;
// --ckpt, --recompute, --flash and --accum against the plain step; the parameter count.
#ifndef GPTMEM_TEST_CPU_MODEL_H
#define GPTMEM_TEST_CPU_MODEL_H

// --- the whole model -----------------------------------------------------------
GPT tm;
int tm_in[64], tm_tg[64];
int tm_B, tm_T;

double loss_model(void) {
    double l = gpt_forward(&tm, tm_in, tm_tg, tm_B, tm_T);
    gpt_discard_activations(&tm);
    return l;
}

// The settings of a one-rank model of config c for micro-batches of B x T.
Settings test_settings(const GPTConfig *c, int B, int T, int dtype, int flash, unsigned recompute, int fused_ce) {
    Settings s = default_settings();
    s.cfg = *c, s.batch = B, s.seq_len = T, s.dtype = dtype, s.flash = flash, s.recompute = recompute;
    s.ckpt = (recompute & REC_BLOCK) != 0, s.fused_ce = fused_ce, s.ranks = 1;
    return s;
}

// Build tm for these settings, with an activation stack of the predicted peak.
void build_model(const Settings *s) {
    Plan p = make_plan(s, 1);
    (s->lora.rank ? lora_gpt_build : gpt_build)(&tm, s, &p, 0);  // (--lora: cpu/lora.h, as app/net.h builds it)
    arena_reserve(predict_activations(s, &p).peak);
}

// tm's first weights (--lora: the frozen model's, then the adapters', as app/net.h net_init makes them).
void model_init(const WeightSource *src) { gpt_frozen(&tm) ? lora_gpt_init(&tm, src) : gpt_init(&tm, src); }

void model_setup(const GPTConfig *c, int B, int T) {
    tm_B = B; tm_T = T;
    Settings s = test_settings(c, B, T, DT_FP32, 0, 0, 0);
    build_model(&s);
}

void model_teardown(void) { gpt_free(&tm), lora_gpt_free(&tm), arena_release(); }

// Llama's checks run the model on these: 4 query heads sharing 2 key-value heads (head size 4,
// even for RoPE), F 20, the head tied and untied.
const GPTConfig llama_tied = {.layers = 2, .channels = 16, .heads = 4, .vocab = 70, .max_seq = 9, .arch = ARCH_LLAMA,
                              .kv_heads = 2, .ffn = 20};
const GPTConfig llama_untied = {.layers = 2, .channels = 16, .heads = 4, .vocab = 70, .max_seq = 9,
                                .arch = ARCH_LLAMA, .kv_heads = 2, .ffn = 20, .untied = 1};

// Every tensor of the layout against central differences of the loss, on a sample of its elements.
void model_fd(const GPTConfig *cfg, const char *name) {
    GPTConfig c = *cfg;
    int V = c.vocab, C = c.channels;
    model_setup(&c, 2, 7);
    init_params(tm.params, &c, 7);
    // 3x the init scale so every path carries signal; eps 3e-3 keeps the
    // truncation error of the central difference well under the tolerance
    for (size_t i = 0; i < tm.nparams; i++) tm.params[i] *= 3.0f;
    for (int i = 0; i < 14; i++) { tm_in[i] = (int)(rng_next(&test_rng) % V); tm_tg[i] = (int)(rng_next(&test_rng) % V); }
    gpt_zero_grad(&tm);
    gpt_forward(&tm, tm_in, tm_tg, 2, 7);
    gpt_backward(&tm, tm_in, tm_tg, 1.0f / 14);
    // every tensor of the layout gets checked on a sample of its elements
    int nt = param_tensor_count(&c);
    ParamTensor *t = malloc(sizeof(ParamTensor) * nt);
    param_tensors(&c, t);
    size_t picked[600];
    int np = 0;
    for (int i = 0; i < nt && np < 600; i++)
        for (int k = 0; k < 12 && np < 600; k++) {
            size_t off = t[i].offset + (size_t)(rng_next(&test_rng) % t[i].count);
            int table = i == 0 || (c.untied && i == nt - 1);  // wte, an untied LM head
            if (table && off >= t[i].offset + (size_t)V * C) continue;  // their padded rows: no gradient by design
            picked[np++] = off;
        }
    float *x = fvec(np), *an = fvec(np);
    double *num = malloc(sizeof(double) * np);
    const float eps = 3e-3f;
    for (int i = 0; i < np; i++) {
        float keep = tm.params[picked[i]];
        tm.params[picked[i]] = keep + eps;
        double lp = loss_model();
        tm.params[picked[i]] = keep - eps;
        double lm = loss_model();
        tm.params[picked[i]] = keep;
        num[i] = (lp - lm) / (2 * eps);
        an[i] = tm.grads[picked[i]];
    }
    double e = rel_err(an, num, np);
    char what[64];
    snprintf(what, sizeof what, "fd whole model, %s", name);
    check(e < 1e-2, what, "relative error %.2e over %d parameters in all %d tensors", e, np, nt);
    free(t); free(x); free(an); free(num);
    model_teardown();
}

void test_model_fd(void) {
    // odd sizes: C = 18 (not a power of two), H = 3 (head size 6), T = 7, V = 70 (padded to 128)
    GPTConfig gpt2 = {.layers = 2, .channels = 18, .heads = 3, .vocab = 70, .max_seq = 9};
    model_fd(&gpt2, "GPT-2");
    model_fd(&llama_tied, "Llama (RMSNorm, RoPE, GQA, SwiGLU), tied head");
    model_fd(&llama_untied, "Llama, untied head");
}

// Gradients of one step for a model built with (flash, ckpt), B x T tokens
// from tokens[] split into `micro` micro-batches; returns the mean loss.
float grads_of(const GPTConfig *c, int flash, int ckpt, int B, int T, int micro, const int *in, const int *tg,
               float *grads_out) {
    int b = B / micro;
    Settings s = test_settings(c, b, T, DT_FP32, flash, ckpt ? REC_BLOCK : 0, 0);
    build_model(&s);
    init_params(tm.params, c, 11);
    gpt_zero_grad(&tm);
    float loss = 0;
    for (int k = 0; k < micro; k++) {
        loss += gpt_forward(&tm, in + k * b * T, tg + k * b * T, b, T) / micro;
        gpt_backward(&tm, in + k * b * T, tg + k * b * T, 1.0f / (b * T * micro));
    }
    memcpy(grads_out, tm.grads, tm.nparams * sizeof(float));
    model_teardown();
    return loss;
}

// max |a - b| / max |b|: relative to the largest gradient, so tiny elements
// do not turn rounding into a large ratio
double max_rel_diff(const float *a, const float *b, size_t n) {
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        if (fabs((double)a[i] - b[i]) > d) d = fabs((double)a[i] - b[i]);
        if (fabs(b[i]) > m) m = fabs(b[i]);
    }
    return d / (m > 0 ? m : 1);
}

void flags_equivalence(const GPTConfig *cfg, const char *name) {
    GPTConfig c = *cfg;
    int B = 8, T = 19, in[8 * 19], tg[8 * 19], V = c.vocab;
    for (int i = 0; i < B * T; i++) { in[i] = (int)(rng_next(&test_rng) % V); tg[i] = (int)(rng_next(&test_rng) % V); }
    char what[96];
    size_t P = param_count(&c);
    float *g_ref = fvec(P), *g = fvec(P);
    float l_ref = grads_of(&c, 0, 0, B, T, 1, in, tg, g_ref);
    float l_ck = grads_of(&c, 0, 1, B, T, 1, in, tg, g);
    snprintf(what, sizeof what, "%s ckpt: bitwise identical gradients and loss", name);
    check(l_ck == l_ref && !memcmp(g, g_ref, P * sizeof(float)), what, "loss %.7f vs %.7f", l_ck, l_ref);
    float l_fl = grads_of(&c, 1, 0, B, T, 1, in, tg, g_ref);
    float l_flck = grads_of(&c, 1, 1, B, T, 1, in, tg, g);
    snprintf(what, sizeof what, "%s flash+ckpt: bitwise identical to flash", name);
    check(l_flck == l_fl && !memcmp(g, g_ref, P * sizeof(float)), what, "loss %.7f vs %.7f", l_flck, l_fl);
    float *g_naive = fvec(P);
    grads_of(&c, 0, 0, B, T, 1, in, tg, g_naive);
    double e0 = max_rel_diff(g_ref, g_naive, P);
    snprintf(what, sizeof what, "%s flash == naive attention", name);
    check(e0 < 1e-4, what, "gradients max relative difference %.2e", e0);
    free(g_naive);
    l_ref = grads_of(&c, 0, 0, B, T, 1, in, tg, g_ref);
    float l_acc = grads_of(&c, 0, 0, B, T, 4, in, tg, g);
    double e = max_rel_diff(g, g_ref, P);
    snprintf(what, sizeof what, "%s accum 4 x batch 2 == batch 8", name);
    check(e < 1e-5 && fabsf(l_acc - l_ref) < 1e-5f * l_ref, what,
          "gradients max relative difference %.2e, loss %.7f vs %.7f", e, l_acc, l_ref);
    free(g_ref); free(g);
}

void test_flags_equivalence(void) {
    GPTConfig gpt2 = {.layers = 3, .channels = 24, .heads = 3, .vocab = 77, .max_seq = 20};
    GPTConfig llama = {.layers = 3, .channels = 24, .heads = 6, .vocab = 77, .max_seq = 20, .arch = ARCH_LLAMA,
                       .kv_heads = 2, .ffn = 40};
    flags_equivalence(&gpt2, "GPT-2");
    flags_equivalence(&llama, "Llama");
}

// --fused-ce == the unfused classifier: one forward and backward of a model
// built with (dtype, fused_ce); returns the loss, the gradients widened to fp32.
float grads_dt(const GPTConfig *c, int dtype, int flash, int fused, int B, int T, const int *in, const int *tg,
               float *out) {
    Settings s = test_settings(c, B, T, dtype, flash, 0, fused);
    build_model(&s);
    init_params(tm.params, c, 13);
    gpt_sync_params(&tm);
    gpt_zero_grad(&tm);
    float loss = gpt_forward(&tm, in, tg, B, T);
    gpt_backward(&tm, in, tg, 1.0f / (B * T));
    dtype_load(out, gpt_grads(&tm), tm.nparams, dtype);
    model_teardown();
    return loss;
}

// The worst, over the tensors of the layout, of ||a - b|| / ||b|| (a tensor
// whose gradient is all zeros in both counts as 0).
double worst_tensor_err(const GPTConfig *c, const float *a, const float *b) {
    int nt = param_tensor_count(c);
    ParamTensor *t = malloc(sizeof(ParamTensor) * nt);
    param_tensors(c, t);
    double worst = 0;
    for (int i = 0; i < nt; i++) {
        double e = rel_err_ff(a + t[i].offset, b + t[i].offset, t[i].count);
        if (e > worst) worst = e;
    }
    free(t);
    return worst;
}

// The predictor's parameter count equals the layout's, for every preset.
void test_param_count(void) {
    for (int i = 0; i < n_model_presets; i++) {
        const GPTConfig *c = &model_presets[i].cfg;
        size_t a = param_count(c), b = predict_param_count(c);
        int nt = param_tensor_count(c);
        ParamTensor *t = malloc(sizeof(ParamTensor) * nt);
        param_tensors(c, t);
        size_t sum = t[nt - 1].offset + t[nt - 1].count;
        free(t);
        check(a == b && a == sum, "param count", "%s: layout %zu, tensors %zu, predictor %zu", model_presets[i].name,
              a, sum, b);
    }
    check(param_count(&model_presets[1].cfg) == 124475904, "gpt2 is 124M", "%zu", param_count(&model_presets[1].cfg));
}

// Sampling with the KV cache (cpu/kvcache.h): position by position, and a
// prompt of 5 in one pass then 4 positions one at a time, the logits of every
// position against the full forward's row for it: fp32 within 1e-5 (naive and
// --flash, with and without --fused-ce), bf16 within its rounding.
double kv_worst(const float *ref, int Vp, int T, int prefill) {
    int dt;
    kv_open(&tm, T, &dt);
    double worst = 0, scale = 0;
    for (int k = 0; k < T * Vp; k++) scale = fabs(ref[k]) > scale ? fabs(ref[k]) : scale;
    for (int p = 0; p < T;) {
        int rows = p == 0 ? prefill : 1;
        kv_at(&tm, p);
        gpt_forward(&tm, tm_in + p, NULL, 1, rows);
        for (int r = 0; r < rows; r++) {
            const float *row = gpt_logits_row(&tm, r);
            for (int v = 0; v < Vp; v++) {
                double d = fabs(row[v] - ref[(size_t)(p + r) * Vp + v]) / scale;
                worst = d > worst ? d : worst;
            }
        }
        gpt_discard_activations(&tm);
        p += rows;
    }
    kv_close(&tm);
    return worst;
}

void kv_cache_check(const GPTConfig *cfg, const char *name) {
    GPTConfig c = *cfg;
    int T = 9, Vp = padded_vocab(&c);
    const int dtypes[3] = {DT_FP32, DT_FP32, DT_BF16}, flashes[3] = {0, 1, 0};
    for (int k = 0; k < 3; k++)
        for (int fused = 0; fused < 2; fused++) {
            Settings st = test_settings(&c, 1, T, dtypes[k], flashes[k], 0, fused);
            build_model(&st);
            init_params(tm.params, &c, 21);
            gpt_sync_params(&tm);
            for (int i = 0; i < T; i++) tm_in[i] = (int)(rng_next(&test_rng) % c.vocab);
            float *ref = malloc(sizeof(float) * T * Vp);
            gpt_forward(&tm, tm_in, NULL, 1, T);
            for (int r = 0; r < T; r++) memcpy(ref + (size_t)r * Vp, gpt_logits_row(&tm, r), sizeof(float) * Vp);
            gpt_discard_activations(&tm);
            double one = kv_worst(ref, Vp, T, 1), prompt = kv_worst(ref, Vp, T, 5), tol = dtypes[k] == DT_FP32 ? 1e-5 : 1e-2;
            check(one <= tol && prompt <= tol, "KV cache logits vs the full forward", "%s %s%s%s: position by position "
                  "%.1e, a prompt of 5 then one at a time %.1e (tolerance %.0e)", name, dtype_name[dtypes[k]],
                  flashes[k] ? " --flash" : "", fused ? " --fused-ce" : "", one, prompt, tol);
            free(ref);
            model_teardown();
        }
}

void test_kv_cache(void) {
    GPTConfig gpt2 = {.layers = 2, .channels = 18, .heads = 3, .vocab = 70, .max_seq = 9};
    kv_cache_check(&gpt2, "GPT-2");
    kv_cache_check(&llama_untied, "Llama (RoPE at each position, 2 key-value heads cached)");
}

#endif
