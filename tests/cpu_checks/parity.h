// tests/cpu_checks/parity.h — tests/test_cpu.c's checks of the model against PyTorch
// (tests/fixtures/torch_tiny.txt, a tiny GPT-2; torch_llama_tied.txt and torch_llama_untied.txt,
// a tiny Llama): losses, logits, gradients, steps.
#ifndef GPTMEM_TEST_CPU_PARITY_H
#define GPTMEM_TEST_CPU_PARITY_H

// --- parity with PyTorch ----------------------------------------------------------
float *read_fixture_array(FILE *f, const char *name, int *count) {
    char got[64];
    if (fscanf(f, "%63s %d", got, count) != 2 || strcmp(got, name)) return NULL;
    float *a = malloc(sizeof(float) * (*count > 0 ? *count : 1));
    for (int i = 0; i < *count; i++)
        if (fscanf(f, "%f", &a[i]) != 1) { free(a); return NULL; }
    return a;
}

// A fixture: its config line is GPT-2's shape, then for a Llama "llama kv_heads KVH ffn F untied U";
// then its arrays. 0, or -1 after a failed check.
typedef struct {
    GPTConfig c;
    int B, T, steps, np, ni, nt, nl, nlog, ng, ns;
    float lr, wd, clip;
    float *params, *inp, *tgt, *loss, *logits, *grads, *step_losses;
} Fixture;

void fixture_free(Fixture *x) {
    free(x->params); free(x->inp); free(x->tgt); free(x->loss); free(x->logits); free(x->grads); free(x->step_losses);
}

int fixture_read(Fixture *x, const char *path) {
    memset(x, 0, sizeof *x);
    FILE *f = fopen(path, "r");
    if (!f) { check(0, "torch parity", "cannot open %s (run from the project root)", path); return -1; }
    char line[512];
    if (!fgets(line, sizeof line, f)) line[0] = 0;  // the comment line
    GPTConfig *c = &x->c;
    if (fscanf(f, " config L %d C %d H %d V %d maxT %d B %d T %d steps %d lr %f wd %f clip %f", &c->layers,
               &c->channels, &c->heads, &c->vocab, &c->max_seq, &x->B, &x->T, &x->steps, &x->lr, &x->wd, &x->clip) != 11) {
        check(0, "torch parity", "bad fixture header in %s", path);
        fclose(f);
        return -1;
    }
    if (fscanf(f, " llama kv_heads %d ffn %d untied %d", &c->kv_heads, &c->ffn, &c->untied) == 3) c->arch = ARCH_LLAMA;
    x->params = read_fixture_array(f, "params", &x->np), x->inp = read_fixture_array(f, "inputs", &x->ni);
    x->tgt = read_fixture_array(f, "targets", &x->nt), x->loss = read_fixture_array(f, "loss", &x->nl);
    x->logits = read_fixture_array(f, "logits", &x->nlog), x->grads = read_fixture_array(f, "grads", &x->ng);
    x->step_losses = read_fixture_array(f, "step_losses", &x->ns);
    fclose(f);
    if (!x->params || !x->inp || !x->tgt || !x->loss || !x->logits || !x->grads || !x->step_losses ||
        (size_t)x->np != param_count(c)) {
        check(0, "torch parity", "%s: fixture arrays missing or the wrong size", path);
        fixture_free(x);
        return -1;
    }
    return 0;
}

void torch_parity(const char *path, const char *model) {
    char what[96];
    Fixture fx;
    if (fixture_read(&fx, path)) return;
    GPTConfig c = fx.c;
    int B = fx.B, T = fx.T, steps = fx.steps, np = fx.np, ni = fx.ni;
    float lr = fx.lr, wd = fx.wd, clip = fx.clip;
    float *params = fx.params, *inp = fx.inp, *tgt = fx.tgt, *loss = fx.loss, *logits = fx.logits, *grads = fx.grads;
    float *step_losses = fx.step_losses;
    for (int i = 0; i < ni; i++) { tm_in[i] = (int)inp[i]; tm_tg[i] = (int)tgt[i]; }
    model_setup(&c, B, T);
    memcpy(tm.params, params, sizeof(float) * np);
    int Vp = padded_vocab(&c);
    gpt_forward(&tm, tm_in, NULL, B, T);
    double e_logits = rel_err_ff(tm.logits, logits, (size_t)B * T * Vp);
    gpt_discard_activations(&tm);
    snprintf(what, sizeof what, "torch parity logits, %s", model);
    check(e_logits < 1e-5, what, "relative error %.2e", e_logits);
    gpt_zero_grad(&tm);
    float l = gpt_forward(&tm, tm_in, tm_tg, B, T);
    gpt_backward(&tm, tm_in, tm_tg, 1.0f / (B * T));
    snprintf(what, sizeof what, "torch parity loss, %s", model);
    check(fabsf(l - loss[0]) < 1e-5f * loss[0], what, "%.7f vs torch %.7f", l, loss[0]);
    double e_grads = rel_err_ff(tm.grads, grads, np);
    snprintf(what, sizeof what, "torch parity gradients, %s", model);
    check(e_grads < 1e-5, what, "relative error %.2e over %d", e_grads, np);
    // 10 AdamW steps with clipping on the same batch, constant lr
    Optimizer opt;
    AdamWConfig ac = {lr, 0.9f, 0.95f, 1e-8f, wd, 0, steps, 1.0f};
    optimizer_build(&opt, &ac, &c, 0, param_count(&c), param_count(&c), 32);
    double worst = 0;
    for (int s = 0; s < steps; s++) {
        gpt_zero_grad(&tm);
        float ls = gpt_forward(&tm, tm_in, tm_tg, B, T);
        gpt_backward(&tm, tm_in, tm_tg, 1.0f / (B * T));
        double norm = sqrt(sum_squares(tm.grads, tm.nparams));
        optimizer_step(&opt, tm.params, 0, tm.grads, 0, DT_FP32, lr, s + 1, clip_scale(norm, clip));
        double e = fabs(ls - step_losses[s]) / step_losses[s];
        if (e > worst) worst = e;
    }
    snprintf(what, sizeof what, "torch parity 10 AdamW steps, %s", model);
    check(worst < 1e-5, what, "worst relative loss difference %.2e (last %.6f)", worst, step_losses[steps - 1]);
    optimizer_free(&opt);
    model_teardown();
    fixture_free(&fx);
}

// --- llm.c's Llama 3 file ----------------------------------------------------------
// tests/fixtures/llmc_llama_untied.bin holds torch_llama_untied.txt's weights as llm.c's
// train_llama3.py writes them (written apart, in Python, by the LLaMA module's names), with
// use_scaled_rope 1; llmc_llama_untied.txt its loss and Llama 3.1's frequencies (hs 128).

static const float *export_src;
static void export_get(const void *ctx, size_t at, float *dst, size_t n) {
    memcpy(dst, export_src + *(const size_t *)ctx + at, n * sizeof(float));
}

// The weights [lo, hi) of `c` written as llm.c's file to `path` (in two parts, as two ranks would).
int export_weights(const char *path, const GPTConfig *c, const float *w) {
    size_t n = param_count(c), mid = n / 3;
    export_src = w;
    size_t lo0 = 0, lo1 = mid;
    FILE *made = fopen(path, "wb");  // (a run's temp exists before it is sized: io/files.h temp_create)
    if (!made || fclose(made)) return -1;
    return llmc_export_begin(path, c) || llmc_export_range(path, c, mid, n, export_get, &lo1) ||
           llmc_export_range(path, c, 0, mid, export_get, &lo0) || llmc_export_finish(path, c);
}

void test_llmc_llama_file(void) {
    Fixture fx, tied;
    if (fixture_read(&fx, "tests/fixtures/torch_llama_untied.txt")) return;
    char err[1400], line[512];
    LlmcModel m;
    int opened = llmc_model_open(&m, "tests/fixtures/llmc_llama_untied.bin", err, sizeof err) == 0;
    check(opened, "llm.c Llama 3 file: the header", "%s", opened ? "read" : err);
    if (!opened) { fixture_free(&fx); return; }
    GPTConfig want = fx.c;
    want.rope_scaled = 8;  // (the file's use_scaled_rope 1: Llama 3.1's factor)
    check(!memcmp(&m.cfg, &want, sizeof want) && m.note[0], "llm.c Llama 3 file: the shape",
          "L%d C%d H%d KVH%d F%d (from the size: %s) V%d maxT %d, untied, scaled RoPE %d", m.cfg.layers, m.cfg.channels,
          m.cfg.heads, m.cfg.kv_heads, m.cfg.ffn, m.note, m.cfg.vocab, m.cfg.max_seq, m.cfg.rope_scaled);
    // the weights, whole and as a piece that starts and ends inside tensors
    size_t n = param_count(&m.cfg), lo = 517, hi = n - 333;
    float *w = malloc(n * sizeof(float)), *piece = malloc(n * sizeof(float));
    int whole = llmc_read_range(&m, w, 0, n) == 0 && !memcmp(w, fx.params, n * sizeof(float));
    int part = llmc_read_range(&m, piece, lo, hi) == 0 && !memcmp(piece, fx.params + lo, (hi - lo) * sizeof(float));
    check(whole && part, "llm.c Llama 3 file: the weights are PyTorch's, bit for bit",
          "all %zu (the padded vocabulary's rows 0) and [%zu, %zu)", n, lo, hi);
    // Llama 3.1's frequencies against Python's, where they differ from Llama 3's
    FILE *f = fopen("tests/fixtures/llmc_llama_untied.txt", "r");
    float scaled_loss = 0;
    int nf = 0;
    while (f && fgets(line, sizeof line, f) && line[0] == '#') {}
    int got = f && sscanf(line, "loss_scaled_rope %f", &scaled_loss) == 1;
    float *freq = f && got ? read_fixture_array(f, "frequencies_scaled_hs128", &nf) : NULL;
    if (f) fclose(f);
    double worst = 0;
    int slowed = 0;
    for (int i = 0; freq && i < nf; i++) {
        float ours = rope_frequency(i, 128, (Rope){LLAMA_ROPE_THETA, 8});
        worst = fmax(worst, fabs(ours - freq[i]) / freq[i]);
        slowed += ours < 0.9f * rope_frequency(i, 128, (Rope){LLAMA_ROPE_THETA, 0});
    }
    check(freq && nf == 64 && worst < 1e-5 && slowed > 10, "rope: Llama 3.1's scaled frequencies",
          "64 pairs of a head of 128 within %.1e of Python's; %d of them slower than Llama 3's", worst, slowed);
    // Llama 3.2's (factor 32) against transformers' formula, written apart (scripts/gen_fixture_rope.py)
    FILE *f32 = fopen("tests/fixtures/rope_llama32.txt", "r");
    int n32 = 0;
    while (f32 && fgets(line, sizeof line, f32) && line[0] == '#') {}
    float *freq32 = NULL;
    if (f32) fseek(f32, -(long)strlen(line), SEEK_CUR), freq32 = read_fixture_array(f32, "frequencies_scaled32_hs64", &n32);
    if (f32) fclose(f32);
    double worst32 = 0;
    for (int i = 0; freq32 && i < n32; i++)
        worst32 = fmax(worst32, fabs(rope_frequency(i, 64, (Rope){LLAMA_ROPE_THETA, 32}) - freq32[i]) / freq32[i]);
    check(freq32 && n32 == 32 && worst32 < 1e-5, "rope: Llama 3.2's scaled frequencies (factor 32)",
          "32 pairs of a head of 64 within %.1e of transformers' formula", worst32);
    free(freq32);
    // the file's model, its loss with the scaled frequencies
    for (int i = 0; i < fx.ni; i++) { tm_in[i] = (int)fx.inp[i]; tm_tg[i] = (int)fx.tgt[i]; }
    model_setup(&m.cfg, fx.B, fx.T);
    memcpy(tm.params, w, n * sizeof(float));
    float l = gpt_forward(&tm, tm_in, tm_tg, fx.B, fx.T);
    gpt_discard_activations(&tm);
    model_teardown();
    check(got && fabsf(l - scaled_loss) < 1e-5f * scaled_loss, "llm.c Llama 3 file: the loss, scaled RoPE",
          "%.7f vs torch %.7f", l, scaled_loss);
    // --export's writer gives back the same bytes (the header's ffn_dim_multiplier aside: 0 there, 1 ours)
    const char *out = "/tmp/gptmem_test_llmc_llama.bin";
    int32_t a[256], b[256];
    long long size = file_size(m.path);
    char *fa = malloc(size), *fb = malloc(size);
    FILE *x = fopen(m.path, "rb"), *y = NULL;
    int same = export_weights(out, &m.cfg, w) == 0 && file_size(out) == size && (y = fopen(out, "rb")) &&
               fread(fa, 1, size, x) == (size_t)size && fread(fb, 1, size, y) == (size_t)size;
    memcpy(a, fa, sizeof a), memcpy(b, fb, sizeof b);
    int theirs = a[8];
    a[8] = b[8];
    same = same && !memcmp(a, b, sizeof a) && !memcmp(fa + sizeof a, fb + sizeof a, size - sizeof a);
    if (x) fclose(x);
    if (y) fclose(y);
    check(same, "llm.c Llama 3 file: --export writes it back", "%lld bytes, the same but ffn_dim_multiplier, an int: "
          "the file's %d (0.5715), ours %d", size, theirs, b[8]);
    // a tied model's file holds wte twice (its lm_head is wte byte for byte): read back tied, the same weights
    if (!fixture_read(&tied, "tests/fixtures/torch_llama_tied.txt")) {
        LlmcModel t;
        size_t V = tied.c.vocab, C = tied.c.channels, nt = param_count(&tied.c);
        int ok = export_weights(out, &tied.c, tied.params) == 0 && llmc_model_open(&t, out, err, sizeof err) == 0 &&
                 !t.cfg.untied && param_count(&t.cfg) == nt &&
                 file_size(out) == LLMC_HEADER_BYTES + (long long)(llmc_llama_count(&t.cfg) * sizeof(float));
        float *back = ok ? malloc(nt * sizeof(float)) : NULL;
        ok = ok && llmc_read_range(&t, back, 0, nt) == 0 && !memcmp(back, tied.params, nt * sizeof(float));
        check(ok, "llm.c Llama 3 file: a tied model's", "exported (wte twice, %zu x %zu) and read back tied: the same %zu "
              "weights", V, C, nt);
        free(back);
        fixture_free(&tied);
    }
    remove(out);
    free(fa); free(fb); free(freq); free(w); free(piece);
    fixture_free(&fx);
}

void test_torch_parity(void) {
    torch_parity("tests/fixtures/torch_tiny.txt", "GPT-2");
    torch_parity("tests/fixtures/torch_llama_tied.txt", "Llama, tied head");
    torch_parity("tests/fixtures/torch_llama_untied.txt", "Llama, untied head");
    test_llmc_llama_file();
}

#endif
