// tests/cpu_checks/parity.h — tests/test_cpu.c's checks of the model against PyTorch
// (tests/fixtures/torch_tiny.txt, a tiny GPT-2; torch_llama_tied.txt and torch_llama_untied.txt,
// a tiny Llama): losses, logits, gradients, steps.
#ifndef GPTMEM_TEST_CPU_PARITY_H
#define GPTMEM_TEST_CPU_PARITY_H

// --- parity with PyTorch ----------------------------------------------------------
float *read_array(FILE *f, const char *name, int *count) {
    char got[64];
    if (fscanf(f, "%63s %d", got, count) != 2 || strcmp(got, name)) return NULL;
    float *a = malloc(sizeof(float) * (*count > 0 ? *count : 1));
    for (int i = 0; i < *count; i++)
        if (fscanf(f, "%f", &a[i]) != 1) { free(a); return NULL; }
    return a;
}

// One fixture: its config line is GPT-2's shape, then for a Llama "llama kv_heads KVH ffn F untied U".
void torch_parity(const char *path, const char *model) {
    char what[96];
    FILE *f = fopen(path, "r");
    if (!f) { check(0, "torch parity", "cannot open %s (run from the project root)", path); return; }
    char line[512];
    if (!fgets(line, sizeof line, f)) line[0] = 0;  // the comment line
    GPTConfig c = {0};
    int B, T, steps;
    float lr, wd, clip;
    if (fscanf(f, " config L %d C %d H %d V %d maxT %d B %d T %d steps %d lr %f wd %f clip %f", &c.layers,
               &c.channels, &c.heads, &c.vocab, &c.max_seq, &B, &T, &steps, &lr, &wd, &clip) != 11) {
        check(0, "torch parity", "bad fixture header in %s", path);
        fclose(f);
        return;
    }
    if (fscanf(f, " llama kv_heads %d ffn %d untied %d", &c.kv_heads, &c.ffn, &c.untied) == 3) c.arch = ARCH_LLAMA;
    int np, ni, nt, nl, nlog, ng, ns;
    float *params = read_array(f, "params", &np), *inp = read_array(f, "inputs", &ni);
    float *tgt = read_array(f, "targets", &nt), *loss = read_array(f, "loss", &nl);
    float *logits = read_array(f, "logits", &nlog), *grads = read_array(f, "grads", &ng);
    float *step_losses = read_array(f, "step_losses", &ns);
    fclose(f);
    if (!params || !inp || !tgt || !loss || !logits || !grads || !step_losses || (size_t)np != param_count(&c)) {
        check(0, "torch parity", "%s: fixture arrays missing or the wrong size", path);
        return;
    }
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
    free(params); free(inp); free(tgt); free(loss); free(logits); free(grads); free(step_losses);
}

void test_torch_parity(void) {
    torch_parity("tests/fixtures/torch_tiny.txt", "GPT-2");
    torch_parity("tests/fixtures/torch_llama_tied.txt", "Llama, tied head");
    torch_parity("tests/fixtures/torch_llama_untied.txt", "Llama, untied head");
}

#endif
