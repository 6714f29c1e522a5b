// tests/cpu_checks/io.h — tests/test_cpu.c's checks of what is read and written: quantized weights
// (io/quant.h), the samples' text (escape_text).
#ifndef GPTMEM_TEST_CPU_IO_H
#define GPTMEM_TEST_CPU_IO_H

// --- quantization (io/quant.h) ---------------------------------------------------------
// A made-up layout: a matrix of 67 (a block of 64 and a short one of 3), a
// vector of 5, a matrix of 128 zeros (two zero blocks), a matrix of 1 (so
// the next starts on an odd int4 nibble), a matrix of 130 with one large weight.
void test_quantize(void) {
    QuantTensor layout[] = {{0, 67, 1, 0, 0}, {67, 5, 0, 0, 0}, {72, 128, 1, 0, 0}, {200, 1, 1, 0, 0}, {201, 130, 1, 0, 0}};
    size_t P = 331;
    float *w = fvec(P), *back = fvec(P), *rt = fvec(P);
    fill_normal(w, P, 0.05f);
    for (size_t i = 72; i < 200; i++) w[i] = 0.0f;
    w[250] = 3.0f;  // one large weight coarsens its own block only
    for (int f = QF_BF16; f < QF_EVAL_N; f++) {
        QuantWeights q;
        quant_layout(&q, layout, 5);
        quant_alloc(&q, f);
        // stored in two calls that split the first matrix at a block boundary
        size_t bad = quant_store(&q, w, 0, 64) + quant_store(&q, w + 64, 64, P - 64);
        quant_load(&q, back, 0, P);
        memcpy(rt, w, P * sizeof(float));
        quant_round_trip(&q, f, rt, 0, 67);  // in two ranges too: a tensor, then the rest
        quant_round_trip(&q, f, rt + 67, 67, P - 67);
        int worst_ok = 1, zeros = 1, same = !bad && !memcmp(back, rt, P * sizeof(float)), vec = 1;
        double worst = 0;
        for (int i = 0; i < 5; i++) {
            const QuantTensor *t = &layout[i];
            for (size_t b = 0; b < t->count; b += QUANT_BLOCK) {
                size_t len = t->count - b < QUANT_BLOCK ? t->count - b : QUANT_BLOCK;
                float absmax = 0;
                for (size_t j = 0; j < len; j++) absmax = fmaxf(absmax, fabsf(w[t->offset + b + j]));
                for (size_t j = 0; j < len; j++) {
                    size_t k = t->offset + b + j;
                    double err = fabs((double)back[k] - w[k]);
                    double bound = !t->is_matrix || f == QF_BF16 ? fabs(w[k]) / 256 : absmax / quant_qmax(f) / 2 * (1 + 1e-6);
                    if (err > bound) worst_ok = 0;
                    if (err > worst) worst = err;
                    if (w[k] == 0.0f && back[k] != 0.0f) zeros = 0;
                    if (!t->is_matrix && back[k] != bf16_to_float(bf16_from_float(w[k]))) vec = 0;
                }
            }
        }
        size_t bytes = g_ledger.live[MEM_QWEIGHTS] + g_ledger.live[MEM_QSCALES];
        size_t want = quant_code_bytes(f, 326) + 2 * 5 + (f == QF_BF16 ? 0 : 4 * (2 + 2 + 1 + 3));
        check(worst_ok && zeros && same && vec && bytes == want, "quantize round trip",
              "%s: every weight within half a step of its block (worst %.2e), zero blocks exact, vectors bf16, "
              "load == round trip, %zu B held (want %zu)", quant_name[f], worst, bytes, want);
        float poison[3] = {1.0f, NAN, 2.0f}, inf[2] = {INFINITY, 0.0f};
        size_t at_nan = quant_store(&q, poison, 64, 3), at_inf = quant_store(&q, inf, 72, 2);
        check(at_nan == 66 && at_inf == 73, "quantize refuses inf/nan", "%s: nan at parameter %zu, inf at %zu reported "
              "(want 65, 72, plus one)", quant_name[f], at_nan, at_inf);
        quant_free(&q);
    }
    free(w); free(back); free(rt);
}

// Samples print text as it is and every other byte as \xNN (io/data.h escape_text).
void test_escape_text(void) {
    struct { const char *in, *want, *what; } cases[] = {
        {"to be,\n\tor not", "to be,\n\tor not", "ASCII text, newline and tab"},
        {"\x1b[31mred", "\\x1B[31mred", "a terminal escape code"},
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "2, 3 and 4-byte UTF-8"},
        {"a\x80z", "a\\x80z", "a stray continuation byte"},
        {"\xc0\xaf", "\\xC0\\xAF", "an overlong sequence"},
        {"x\xe2\x82", "x\\xE2\\x82", "a sequence cut off at the end"},
        {"\xed\xa0\x80", "\\xED\\xA0\\x80", "a UTF-16 surrogate"},
        {"\xf4\x90\x80\x80", "\\xF4\\x90\\x80\\x80", "past U+10FFFF"},
        {"\x7f\r", "\\x7F\\x0D", "DEL and carriage return"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = strlen(cases[i].in);
        char *out = malloc(4 * n + 1);
        escape_text((const unsigned char *)cases[i].in, n, out);
        char name[96];
        snprintf(name, sizeof name, "escape_text: %s", cases[i].what);
        int ok = !strcmp(out, cases[i].want);
        check(ok, name, ok ? "%s" : "got '%s'", ok ? "as expected" : out);
        free(out);
    }
}

#endif
