// tests/cpu_checks/fused_ce.h — tests/test_cpu.c's checks of --fused-ce: the tiled LM head and loss
// against the whole head.
#ifndef GPTMEM_TEST_CPU_FUSED_CE_H
#define GPTMEM_TEST_CPU_FUSED_CE_H

void test_fused_ce(void) {
    // V 2100: two chunks of the table (2048 + 64 padded rows); N 300: a tile of 256 rows and one of 44;
    // V 300 and B*T = 1: one chunk, one row
    // Llama: its lookup table is wte alone; an untied head goes its own chunks (2 of them at V 2100)
    struct { GPTConfig c; int B, T; } cases[] = {
        {{.layers = 2, .channels = 16, .heads = 2, .vocab = 2100, .max_seq = 100}, 3, 100},
        {{.layers = 1, .channels = 24, .heads = 3, .vocab = 300, .max_seq = 9}, 1, 1},
        {{.layers = 2, .channels = 16, .heads = 4, .vocab = 259, .max_seq = 33}, 5, 33},
        {{.layers = 2, .channels = 16, .heads = 4, .vocab = 2100, .max_seq = 40, .arch = ARCH_LLAMA, .kv_heads = 2,
          .ffn = 24, .untied = 1}, 2, 37},
        {{.layers = 1, .channels = 16, .heads = 4, .vocab = 259, .max_seq = 33, .arch = ARCH_LLAMA, .kv_heads = 1,
          .ffn = 20}, 5, 33}};
    double tol[3] = {1e-6, 1e-2, 2e-3};  // fp32; bf16, fp16: the unfused path rounds its probabilities to 16 bits
    for (int k = 0; k < (int)(sizeof cases / sizeof cases[0]); k++) {
        GPTConfig *c = &cases[k].c;
        int B = cases[k].B, T = cases[k].T, N = B * T;
        int *in = malloc(sizeof(int) * N), *tg = malloc(sizeof(int) * N);
        for (int i = 0; i < N; i++) { in[i] = (int)(rng_next(&test_rng) % c->vocab); tg[i] = (int)(rng_next(&test_rng) % c->vocab); }
        size_t P = param_count(c);
        float *g0 = fvec(P), *g1 = fvec(P);
        for (int dt = DT_FP32; dt <= DT_FP16; dt++) {
            float l0 = grads_dt(c, dt, 0, 0, B, T, in, tg, g0), l1 = grads_dt(c, dt, 0, 1, B, T, in, tg, g1);
            double e = worst_tensor_err(c, g1, g0), le = fabs((double)l1 - l0) / l0;
            char name[96];
            snprintf(name, sizeof name, "--fused-ce == unfused, %s%s, V %d, N %d", is_llama(c) ? "Llama, " : "",
                     dtype_name[dt], c->vocab, N);
            check(le < tol[dt] && e < tol[dt], name, "loss %.7f vs %.7f (relative %.1e), worst tensor's gradient %.1e",
                  l1, l0, le, e);
        }
        free(in); free(tg); free(g0); free(g1);
    }
}

#endif
