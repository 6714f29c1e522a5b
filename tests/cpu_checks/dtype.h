// tests/cpu_checks/dtype.h — tests/test_cpu.c's checks of bf16 and fp16: the conversions (round to
// nearest even, subnormals, inf, NaN, overflow), a 16-bit model against fp32.
#ifndef GPTMEM_TEST_CPU_DTYPE_H
#define GPTMEM_TEST_CPU_DTYPE_H

// --- dtype conversions: round to nearest even, subnormals, inf, NaN, overflow ---
void test_conversions(void) {
    float one = 1.0f;
    uint16_t b[] = {bf16_from_float(one), bf16_from_float(1.0f + 0x1p-8f), bf16_from_float(1.0f + 3 * 0x1p-8f),
                    bf16_from_float(1.0f + 0x1p-8f + 0x1p-20f), bf16_from_float(INFINITY), bf16_from_float(-INFINITY),
                    bf16_from_float(3.4028235e38f), bf16_from_float(-0.0f)};
    uint16_t bw[] = {0x3F80, 0x3F80, 0x3F82, 0x3F81, 0x7F80, 0xFF80, 0x7F80, 0x8000};
    int ok = 1;
    for (int i = 0; i < 8; i++) ok &= b[i] == bw[i];
    // 1e-40 is an fp32 subnormal; the nearest bf16 (7 mantissa bits) is 0x0001 = 2^-133 = 9.18e-41
    check(ok && isnan(bf16_to_float(bf16_from_float(NAN))) && bf16_from_float(1e-40f) == 0x0001,
          "bf16 rounding edge cases", "ties to even, inf, max float -> inf, -0, NaN, subnormal 1e-40 -> %g",
          bf16_to_float(bf16_from_float(1e-40f)));
    uint16_t h[] = {fp16_from_float(1.0f), fp16_from_float(65504.0f), fp16_from_float(65519.0f),
                    fp16_from_float(65520.0f), fp16_from_float(1e6f), fp16_from_float(0x1p-24f),
                    fp16_from_float(0x1p-25f), fp16_from_float(3 * 0x1p-26f), fp16_from_float(0x1p-14f),
                    fp16_from_float(1023.5f * 0x1p-24f), fp16_from_float(1.0f + 0x1p-11f),
                    fp16_from_float(1.0f + 3 * 0x1p-11f), fp16_from_float(-INFINITY), fp16_from_float(1e-9f)};
    uint16_t hw[] = {0x3C00, 0x7BFF, 0x7BFF, 0x7C00, 0x7C00, 0x0001, 0x0000, 0x0001, 0x0400, 0x0400, 0x3C00,
                     0x3C02, 0xFC00, 0x0000};
    ok = 1;
    for (int i = 0; i < 14; i++) {
        if (h[i] != hw[i]) printf("  fp16 case %d: got 0x%04X want 0x%04X\n", i, h[i], hw[i]);
        ok &= h[i] == hw[i];
    }
    check(ok && isnan(fp16_to_float(fp16_from_float(NAN))), "fp16 rounding edge cases",
          "ties to even, 65520 -> inf, subnormals 2^-24 and 2^-25, carry into the smallest normal, NaN");
    // every 16-bit value widens and narrows back to itself (NaNs stay NaN)
    int bad_b = 0, bad_h = 0;
    for (uint32_t u = 0; u < 65536; u++) {
        float fb = bf16_to_float((uint16_t)u), fh = fp16_to_float((uint16_t)u);
        if (isnan(fb) ? !isnan(bf16_to_float(bf16_from_float(fb))) : bf16_from_float(fb) != u) bad_b++;
        if (isnan(fh) ? !isnan(fp16_to_float(fp16_from_float(fh))) : fp16_from_float(fh) != u) bad_h++;
    }
    check(bad_b == 0 && bad_h == 0, "16-bit round trips", "all 65536 values: %d bf16 and %d fp16 mismatches", bad_b, bad_h);
    check(fp16_to_float(0x0001) == 0x1p-24f && fp16_to_float(0x7BFF) == 65504.0f && fp16_to_float(0x3555) > 0.333f &&
          fp16_to_float(0x3555) < 0.3334f, "fp16 widening", "2^-24, 65504, 1/3");
}

// A 16-bit model really rounds: the loss differs from fp32 in its low bits, not more,
// and every saved activation is a representable 16-bit value.
void test_dtype_model(void) {
    GPTConfig c = {.layers = 2, .channels = 24, .heads = 3, .vocab = 77, .max_seq = 20};
    int B = 2, T = 11, in[22], tg[22];
    for (int i = 0; i < B * T; i++) { in[i] = (int)(rng_next(&test_rng) % 77); tg[i] = (int)(rng_next(&test_rng) % 77); }
    float loss[3];
    for (int dt = DT_FP32; dt <= DT_FP16; dt++) {
        Settings s = test_settings(&c, B, T, dt, 0, 0, 0);
        build_model(&s);
        init_params(tm.params, &c, 5);
        gpt_sync_params(&tm);
        gpt_zero_grad(&tm);
        loss[dt] = gpt_forward(&tm, in, tg, B, T);
        if (dt != DT_FP32) {
            // the fp32 working copy of the final layernorm (what the LM head read)
            // holds exactly the stored 16-bit numbers: round_saved() rounded both
            Acts *f = &tm.final;
            int exact = 1;
            for (size_t i = 0; i < (size_t)B * T * c.channels; i++) {
                uint16_t s = ((const uint16_t *)f->saved[0])[i];
                exact &= (dt == DT_BF16 ? bf16_to_float(s) : fp16_to_float(s)) == f->view[0][i];
            }
            check(exact, "16-bit activations saved exactly", "%s: lnf working copy == stored values", dtype_name[dt]);
        }
        gpt_backward(&tm, in, tg, 1.0f / (B * T));
        model_teardown();
    }
    check(loss[1] != loss[0] && fabsf(loss[1] - loss[0]) < 1e-2f && loss[2] != loss[0] &&
          fabsf(loss[2] - loss[0]) < 1e-2f, "16-bit loss close to fp32, not equal",
          "fp32 %.7f bf16 %.7f fp16 %.7f", loss[0], loss[1], loss[2]);
}

#endif
