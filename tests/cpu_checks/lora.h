// tests/cpu_checks/lora.h — tests/test_cpu.c's checks of --lora (core/lora.h, cpu/lora.h): the counts PEFT
// prints, the base model's loss bit for bit at the start, the flags that must not change a step, and a tiny
// GPT-2 and Llama against a reference written apart in numpy (scripts/gen_fixture_lora.py).
#ifndef GPTMEM_TEST_CPU_LORA_H
#define GPTMEM_TEST_CPU_LORA_H

// --- the counts -----------------------------------------------------------------------------
// PEFT's print_trainable_parameters on Llama-3-8B: r 8 on q_proj, v_proj: 3,407,872 trainable of
// 8,033,669,120; r 16 on all seven maps: 41,943,040 (the numbers, as PEFT's docs and users print them).
void test_lora_counts(void) {
    GPTConfig c = {.layers = 32, .channels = 4096, .heads = 32, .vocab = 128256, .max_seq = 8192, .arch = ARCH_LLAMA,
                   .kv_heads = 8, .ffn = 14336, .untied = 1};
    LoraConfig qv = {8, 16.0f, 1u << LM_Q | 1u << LM_V}, all = {16, 32.0f, lora_all_maps(&c)};
    size_t a = lora_param_count(&c, &qv), b = lora_param_count(&c, &all), base = lora_base_param_count(&c);
    check(a == 3407872 && base + a == 8033669120ULL, "lora: Llama-3-8B, R 8 on q,v", "%zu trainable of %zu", a, base + a);
    check(b == 41943040, "lora: Llama-3-8B, R 16 on all seven maps", "%zu trainable", b);
    // the layout: the tensors tile [0, n) in order, A then B of each map
    int nt = lora_tensor_count(&c, &all);
    ParamTensor *t = malloc(sizeof(ParamTensor) * nt);
    int got = lora_tensors(&c, &all, t), tiled = got == nt && t[0].offset == 0;
    for (int i = 1; i < got; i++) tiled &= t[i].offset == t[i - 1].offset + t[i - 1].count;
    tiled &= t[got - 1].offset + t[got - 1].count == b;
    check(tiled && nt == 14 * 32, "lora: the adapters' tensors tile the array", "%d tensors", nt);
    free(t);
}

// --- the start is the base model, bit for bit ------------------------------------------------
// The same seed with and without --lora: the same logits and loss (B starts at zero), on every path of the head
// and the block's plan (--ckpt, --recompute, --flash, --fused-ce).
float lora_loss_of(const GPTConfig *c, LoraConfig lora, int flash, unsigned recompute, int fused_ce, float *logits) {
    Settings s = test_settings(c, 2, 7, DT_FP32, flash, recompute, fused_ce);
    s.lora = lora;
    tm_B = 2, tm_T = 7;
    build_model(&s);
    WeightSource src = seeded(99);
    model_init(&src);
    float l = gpt_forward(&tm, tm_in, tm_tg, 2, 7);
    if (!fused_ce) memcpy(logits, tm.logits, sizeof(float) * 14 * padded_vocab(c));
    gpt_discard_activations(&tm);
    model_teardown();
    return l;
}

void test_lora_starts_as_base(void) {
    GPTConfig gpt2 = {.layers = 2, .channels = 16, .heads = 4, .vocab = 70, .max_seq = 9};
    const GPTConfig *cfgs[] = {&gpt2, &llama_tied, &llama_untied};
    for (int i = 0; i < 14; i++) tm_in[i] = (i * 7 + 3) % 70, tm_tg[i] = (i * 5 + 1) % 70;
    int same = 1, runs = 0;
    for (int k = 0; k < 3; k++) {
        const GPTConfig *c = cfgs[k];
        size_t nl = (size_t)14 * padded_vocab(c);
        float *a = fvec(nl), *b = fvec(nl);
        LoraConfig lora = {2, 8.0f, lora_all_maps(c)};
        for (int v = 0; v < 4; v++) {
            int flash = v == 1, fused = v == 3;
            unsigned rec = v == 2 ? REC_BLOCK : 0;
            float l0 = lora_loss_of(c, (LoraConfig){0, 8.0f, 0}, flash, rec, fused, a);
            float l1 = lora_loss_of(c, lora, flash, rec, fused, b);
            same &= !memcmp(&l0, &l1, sizeof l0) && (fused || !memcmp(a, b, nl * sizeof(float)));
            runs++;
        }
        free(a), free(b);
    }
    check(same, "lora: step 0 is the base model, bit for bit", "%d runs (GPT-2, Llama tied and untied; plain, "
          "--flash, --ckpt, --fused-ce): loss and logits the same bits", runs);
}

// --- the flags: --ckpt and --recompute rebuild the same bits; --accum is one big batch -----------
void lora_step_grads(const GPTConfig *c, unsigned recompute, int accum, float *g) {
    int B = 2 / accum, T = 7;
    Settings s = test_settings(c, B, T, DT_FP32, 0, recompute, 0);
    s.lora = (LoraConfig){3, 5.0f, lora_all_maps(c)};
    tm_B = B, tm_T = T;
    build_model(&s);
    WeightSource src = seeded(5);
    model_init(&src);
    for (size_t i = 0; i < tm.lora.n; i++) tm.lora.w[i] += 0.01f * (float)((i * 37) % 11) - 0.05f;  // B nonzero
    gpt_zero_grad(&tm);
    for (int k = 0; k < accum; k++) {
        gpt_forward(&tm, tm_in + k * B * T, tm_tg + k * B * T, B, T);
        gpt_backward(&tm, tm_in + k * B * T, tm_tg + k * B * T, 1.0f / (2 * T));
    }
    memcpy(g, tm.lora.g, tm.lora.n * sizeof(float));
    model_teardown();
}

void test_lora_flags(void) {
    const GPTConfig *c = &llama_untied;
    LoraConfig lora = {3, 5.0f, lora_all_maps(c)};
    size_t n = lora_param_count(c, &lora);
    float *plain = fvec(n), *ckpt = fvec(n), *rec = fvec(n), *acc = fvec(n);
    lora_step_grads(c, 0, 1, plain);
    lora_step_grads(c, REC_BLOCK, 1, ckpt);
    lora_step_grads(c, REC_ATTN | REC_GELU, 1, rec);
    lora_step_grads(c, 0, 2, acc);
    double nz = sum_squares(plain, n), e = rel_err_ff(acc, plain, n);
    check(nz > 0 && !memcmp(plain, ckpt, n * sizeof(float)) && !memcmp(plain, rec, n * sizeof(float)),
          "lora: --ckpt and --recompute give the adapters' gradients bit for bit", "%zu gradients", n);
    check(nz > 0 && e < 1e-6, "lora: --accum 2 of B 1 is one batch of B 2", "relative error %.2e", e);
    free(plain), free(ckpt), free(rec), free(acc);
}

// --- against numpy ---------------------------------------------------------------------------
void lora_parity(const char *path, const char *model) {
    char what[96], targets[96], line[512];
    FILE *f = fopen(path, "r");
    GPTConfig c = {0};
    int B, T, steps, np = 0, na = 0, ni = 0, nt = 0, nl = 0, ng = 0, ns = 0, naa = 0;
    float lr, wd, clip;
    LoraConfig lora = {0, 0, 0};
    char cl[512], ll[256];
    int ok = f && fgets(line, sizeof line, f) && fgets(cl, sizeof cl, f) && fgets(ll, sizeof ll, f) &&
             sscanf(cl, "config L %d C %d H %d V %d maxT %d B %d T %d steps %d lr %f wd %f clip %f", &c.layers,
                    &c.channels, &c.heads, &c.vocab, &c.max_seq, &B, &T, &steps, &lr, &wd, &clip) == 11;
    const char *ls = ok ? strstr(cl, " llama ") : NULL;
    if (ls && sscanf(ls, " llama kv_heads %d ffn %d untied %d", &c.kv_heads, &c.ffn, &c.untied) == 3) c.arch = ARCH_LLAMA;
    ok = ok && sscanf(ll, "lora rank %d alpha %f targets %95s", &lora.rank, &lora.alpha, targets) == 3;
    float *params = ok ? read_fixture_array(f, "params", &np) : NULL, *ad = ok ? read_fixture_array(f, "adapters", &na) : NULL;
    float *inp = ok ? read_fixture_array(f, "inputs", &ni) : NULL, *tgt = ok ? read_fixture_array(f, "targets", &nt) : NULL;
    float *loss = ok ? read_fixture_array(f, "loss", &nl) : NULL, *grads = ok ? read_fixture_array(f, "grads", &ng) : NULL;
    float *sl = ok ? read_fixture_array(f, "step_losses", &ns) : NULL, *after = ok ? read_fixture_array(f, "adapters_after", &naa) : NULL;
    if (f) fclose(f);
    for (char *p = strtok(targets, ","); ok && p; p = strtok(NULL, ","))
        for (int k = 0; k < LORA_MAPS; k++)
            if (!strcmp(p, lora_map_names[k])) lora.targets |= 1u << k;
    snprintf(what, sizeof what, "lora parity with numpy, %s", model);
    if (!ok || !after || (size_t)np != param_count(&c) || (size_t)na != lora_param_count(&c, &lora) || naa != na ||
        ng != na || ni != B * T || ns != steps) {
        check(0, what, "%s: fixture missing or the wrong size (run from the project root)", path);
    } else {
        for (int i = 0; i < ni; i++) tm_in[i] = (int)inp[i], tm_tg[i] = (int)tgt[i];
        Settings s = test_settings(&c, B, T, DT_FP32, 0, 0, 0);
        s.lora = lora, s.lr = lr, s.weight_decay = wd, s.clip = clip;
        tm_B = B, tm_T = T;
        build_model(&s);
        memcpy(tm.params, params, np * sizeof(float));
        memcpy(tm.lora.w, ad, na * sizeof(float));
        gpt_zero_grad(&tm);
        float l = gpt_forward(&tm, tm_in, tm_tg, B, T);
        gpt_backward(&tm, tm_in, tm_tg, 1.0f / (B * T));
        double eg = rel_err_ff(tm.lora.g, grads, na), worst = 0;
        for (int t = 1; t <= steps; t++) {
            gpt_zero_grad(&tm);
            float ls = gpt_forward(&tm, tm_in, tm_tg, B, T);
            gpt_backward(&tm, tm_in, tm_tg, 1.0f / (B * T));
            double norm = sqrt(sum_squares(tm.lora.g, tm.lora.n));  // (cpu/optimizer.h's gpt_grad_norm, gpt_adamw_step)
            optimizer_step(&tm.train.opt, tm.lora.w, 0, tm.lora.g, 0, DT_FP32, lr, t, clip_scale(norm, clip));
            worst = fmax(worst, fabs(ls - sl[t - 1]) / sl[t - 1]);
        }
        double ea = rel_err_ff(tm.lora.w, after, na);
        int frozen = !memcmp(tm.params, params, np * sizeof(float));
        check(fabsf(l - loss[0]) < 1e-5f * loss[0] && eg < 1e-5 && worst < 1e-5 && ea < 1e-5 && frozen, what,
              "loss %.7f vs %.7f; the adapters' %d gradients within %.1e; %d AdamW steps: losses within %.1e, A and B "
              "within %.1e; the base weights %s", l, loss[0], na, eg, steps, worst, ea, frozen ? "untouched" : "CHANGED");
        model_teardown();
    }
    free(params), free(ad), free(inp), free(tgt), free(loss), free(grads), free(sl), free(after);
}

// --- --base-dtype: NF4 as bitsandbytes computes it, the stream that stores the init, the start --------
float *nf4_fixture(FILE *f, const char *name, int *n) { return f ? read_fixture_array(f, name, n) : NULL; }

void test_nf4(void) {
    FILE *f = fopen("tests/fixtures/nf4.txt", "r");
    char line[256];
    if (f && !fgets(line, sizeof line, f)) line[0] = 0;
    int nw = 0, nc = 0, nb = 0, ns = 0, nv = 0;
    float *w = nf4_fixture(f, "weights", &nw), *codes = nf4_fixture(f, "codes", &nc), *bytes = nf4_fixture(f, "bytes", &nb);
    float *scales = nf4_fixture(f, "scales", &ns), *values = nf4_fixture(f, "values", &nv);
    if (f) fclose(f);
    if (!values || nc != nw || nv != nw || nb != (nw + 1) / 2 || ns != (nw + QUANT_BLOCK - 1) / QUANT_BLOCK) {
        check(0, "nf4: bitsandbytes' codes and values", "tests/fixtures/nf4.txt missing or the wrong size");
    } else {
        QuantWeights q;
        QuantTensor t = {0, (size_t)nw, 1, 0, 0};
        quant_layout(&q, &t, 1);
        quant_alloc(&q, QF_NF4);
        quant_store(&q, w, 0, nw);
        float *back = fvec(nw);
        quant_load(&q, back, 0, nw);
        int same_codes = 1, same_bytes = 1, same_scales = 1, same_values = 1;
        for (int i = 0; i < nw; i++)
            same_codes &= get_code(&q, i) == (int)codes[i], same_values &= !memcmp(&back[i], &values[i], 4);
        for (int i = 0; i < nb; i++) same_bytes &= ((uint8_t *)q.codes)[i] == (uint8_t)bytes[i];
        for (int i = 0; i < ns; i++) same_scales &= !memcmp(&q.scales[i], &scales[i], 4);
        check(same_codes && same_bytes && same_scales && same_values, "nf4: bitsandbytes' codes and values",
              "%d weights (a block of zeros, a short block, a value on a midpoint): codes %s, packed bytes %s, absmax %s, "
              "read back %s", nw, same_codes ? "equal" : "DIFFER", same_bytes ? "equal" : "DIFFER",
              same_scales ? "equal" : "DIFFER", same_values ? "the same bits" : "DIFFER");
        // the same weights arriving in windows of any size (the init's): the same storage
        QuantWeights r;
        QuantTensor lay[3] = {{0, 5, 0, 0, 0}, {5, (size_t)nw - 10, 1, 0, 0}, {(size_t)nw - 5, 5, 0, 0, 0}};
        quant_free(&q);
        quant_layout(&q, lay, 3), quant_layout(&r, lay, 3);
        q.vec_dtype = r.vec_dtype = DT_FP32;
        quant_alloc(&q, QF_NF4), quant_alloc(&r, QF_NF4);
        quant_store(&q, w, 0, nw);
        QuantStream st = {.q = &r};
        for (size_t at = 0, k = 0; at < (size_t)nw; k++) {
            size_t len = (size_t)(k * 37 % 71) + 1;
            len = at + len < (size_t)nw ? len : (size_t)nw - at;
            quant_stream(&st, w + at, at, len);
            at += len;
        }
        int same = !memcmp(q.codes, r.codes, quant_code_bytes(QF_NF4, q.matrices)) &&
                   !memcmp(q.scales, r.scales, 4 * q.blocks) && !memcmp(q.vec, r.vec, 4 * q.vectors);
        check(same, "nf4: weights stored in windows of 1 to 71 (the init's) as in one piece", "%d weights", nw);
        quant_free(&q), quant_free(&r);
        free(back);
    }
    free(w), free(codes), free(bytes), free(scales), free(values);
}

// --double-quant: tests/fixtures/nf4_dq.txt (scripts/gen_fixture_nf4_dq.py, numpy from bitsandbytes' definitions):
// the dynamic map, each block's byte and scale read back, each group's scale, each tensor's offset, and a hash of
// every weight read back. The weights are the generator's weight_of; a q_proj's rows go in in gptmem's order.
float dq_weight_of(int t, size_t i) {
    if (t == 2) return 0.0f;
    size_t u = (i * 40503 + (size_t)t * 7919) % 65536;
    return (float)((long)u - 32768) / 32768.0f * ((float)(1 + (i / 64 * 37 + (size_t)t) % 23) / 64.0f);
}

void test_nf4_double_quant(void) {
    FILE *f = fopen("tests/fixtures/nf4_dq.txt", "r");
    char line[256];
    if (f && !fgets(line, sizeof line, f)) line[0] = 0;
    int nl = 0, nm = 0, nq = 0, ng = 0, no = 0, nb = 0, nh = 0;
    float *lay = nf4_fixture(f, "layout", &nl), *map = nf4_fixture(f, "dynamic_map", &nm), *bytes = nf4_fixture(f, "scale_bytes", &nq);
    float *groups = nf4_fixture(f, "group_scales", &ng), *offs = nf4_fixture(f, "offsets", &no);
    float *back = nf4_fixture(f, "scales_back", &nb), *hash = nf4_fixture(f, "values_hash", &nh);
    if (f) fclose(f);
    if (!hash || nl != 9 || nm != 256 || nh != 4 || nq != nb) {
        check(0, "nf4 double quant: bitsandbytes' constants", "tests/fixtures/nf4_dq.txt missing or the wrong size");
    } else {
        QuantTensor t[3];
        size_t n = 0;
        for (int i = 0; i < 3; i++, n += t[i - 1].count)
            t[i] = (QuantTensor){n, (size_t)lay[3 * i], 1, (int)lay[3 * i + 1], (int)lay[3 * i + 2]};
        float *w = fvec(n), *got = fvec(n), *hf = fvec(n);
        for (int i = 0; i < 3; i++)  // gptmem's row r of a q_proj is Hugging Face's row hf_half_row(hs, r)
            for (size_t j = 0; j < t[i].count; j++) {
                size_t r = j / t[i].row, hr = t[i].halves ? hf_half_row(t[i].halves, r) : r;
                w[t[i].offset + j] = dq_weight_of(i, hr * t[i].row + j % t[i].row);
            }
        QuantWeights q, r;
        quant_layout(&q, t, 3), quant_layout(&r, t, 3);
        q.double_quant = r.double_quant = 1;
        quant_alloc(&q, QF_NF4), quant_alloc(&r, QF_NF4);
        quant_store(&q, w, 0, n);
        int same_map = !memcmp(DQ_CODE, map, sizeof DQ_CODE), same_bytes = 1, same_back = 1, same_groups = ng == (int)q.groups;
        for (int i = 0; i < ng && same_groups; i++) same_groups &= !memcmp(&q.scales2[i], &groups[i], 4);
        int same_offsets = no == 3 && !memcmp(q.offsets, offs, 12);
        for (int i = 0; i < 3; i++)
            for (size_t b = 0, nbk = quant_nblocks(t[i].count); b < nbk; b++) {
                size_t blk = q.first_block[i] + b, at = q.first_block[i] + dq_position(&t[i], b);
                float sc = quant_scale(&q, i, blk);
                same_bytes &= q.qscales[blk] == (uint8_t)bytes[at], same_back &= !memcmp(&sc, &back[at], 4);
            }
        quant_load(&q, got, 0, n);
        for (int i = 0; i < 3; i++)  // back into Hugging Face's order, for the hash
            for (size_t j = 0; j < t[i].count; j++) {
                size_t rr = j / t[i].row, hr = t[i].halves ? hf_half_row(t[i].halves, rr) : rr;
                hf[t[i].offset + hr * t[i].row + j % t[i].row] = got[t[i].offset + j];
            }
        uint32_t h = 2166136261u;
        for (size_t j = 0; j < n; j++) {
            uint32_t x;
            memcpy(&x, &hf[j], 4);
            for (int k = 0; k < 4; k++) h = (h ^ (x >> (8 * k) & 0xFF)) * 16777619u;
        }
        int same_values = 1;
        for (int k = 0; k < 4; k++) same_values &= (h >> (8 * k) & 0xFF) == (uint32_t)hash[k];
        check(same_map && same_bytes && same_back && same_groups && same_offsets && same_values,
              "nf4 double quant: bitsandbytes' constants and values",
              "%zu weights, 3 tensors (a q_proj in gptmem's row order, a tensor of zeros): the dynamic map %s, %zu scale bytes %s, "
              "read back %s, %zu group scales %s, offsets %s, the weights read back %s", n, same_map ? "equal" : "DIFFERS",
              q.blocks, same_bytes ? "equal" : "DIFFER", same_back ? "the same bits" : "DIFFER", q.groups,
              same_groups ? "equal" : "DIFFER", same_offsets ? "equal" : "DIFFER", same_values ? "the same bits" : "DIFFER");
        QuantStream st = {.q = &r};  // in windows of 1 to 71, as the init stores them: the same storage
        for (size_t at = 0, k = 0; at < n; k++) {
            size_t len = (size_t)(k * 37 % 71) + 1;
            len = at + len < n ? len : n - at;
            quant_stream(&st, w + at, at, len);
            at += len;
        }
        int same = !memcmp(q.codes, r.codes, quant_code_bytes(QF_NF4, q.matrices)) && !memcmp(q.qscales, r.qscales, q.blocks) &&
                   !memcmp(q.scales2, r.scales2, 4 * q.groups) && !memcmp(q.offsets, r.offsets, 4 * q.nmatrices);
        check(same, "nf4 double quant: weights stored in windows of 1 to 71 as in one piece", "%zu weights", n);
        quant_free(&q), quant_free(&r);
        free(w), free(got), free(hf);
    }
    free(lay), free(map), free(bytes), free(groups), free(offs), free(back), free(hash);
}

// The frozen model held packed starts as an fp32 model holding what it reads back: the same loss bits;
// the embedding, the head and the norms are the init's own values (kept in fp32).
void test_lora_packed_base(void) {
    const GPTConfig *c = &llama_untied;
    int formats[] = {QF_NF4, QF_INT8, QF_BF16, QF_FP16}, same = 1, kept = 1;
    size_t P = param_count(c);
    float *back = fvec(P), *init = fvec(P);
    init_params(init, c, 99);
    for (int k = 0; k < 4; k++) {
        Settings s = test_settings(c, 2, 7, DT_FP32, 0, 0, 0);
        s.lora = (LoraConfig){2, 8.0f, lora_all_maps(c)}, s.base_format = formats[k], s.base_bits = quant_bits[formats[k]];
        tm_B = 2, tm_T = 7;
        build_model(&s);
        WeightSource src = seeded(99);
        model_init(&src);
        float l1 = gpt_forward(&tm, tm_in, tm_tg, 2, 7);
        quant_load(tm.lora.base, back, 0, P);
        for (int i = 0; i < tm.lora.base->ntensors; i++) {
            const QuantTensor *t = &tm.lora.base->tensors[i];
            if (!t->is_matrix) kept &= !memcmp(back + t->offset, init + t->offset, t->count * sizeof(float));
        }
        model_teardown();
        model_setup(c, 2, 7);
        memcpy(tm.params, back, P * sizeof(float));
        float l0 = gpt_forward(&tm, tm_in, tm_tg, 2, 7);
        model_teardown();
        same &= !memcmp(&l0, &l1, sizeof l0);
    }
    check(same && kept, "lora --base-dtype nf4, int8, bf16, fp16: step 0 is the model it holds",
          "the loss bits of an fp32 model of the weights read back; the embedding, head and norms the init's own, in fp32");
    free(back), free(init);
}

void test_lora(void) {
    test_nf4();
    test_nf4_double_quant();
    test_lora_packed_base();
    test_lora_counts();
    test_lora_starts_as_base();
    test_lora_flags();
    lora_parity("tests/fixtures/lora_gpt2.txt", "a tiny GPT-2 (R 3 on qkv, fc, fcproj)");
    lora_parity("tests/fixtures/lora_llama.txt", "a tiny Llama (R 2 on all seven maps)");
}

#endif
