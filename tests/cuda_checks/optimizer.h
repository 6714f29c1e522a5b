// tests/cuda_checks/optimizer.h — tests/test_cuda.c's checks of the step's numbers on the device and
// AdamW.
#ifndef GPTMEM_TEST_CUDA_OPTIMIZER_H
#define GPTMEM_TEST_CUDA_OPTIMIZER_H

// The step's numbers on the device: the loss sum (cu_loss_add) against the
// CPU's row-order mean, and AdamW's scale (cu_grad_scale) against optim/optimizer.h's
// step_grad_scale, bit for bit: unclipped, clipped, fp16's loss scale, and
// NaN for an infinite norm.
void test_step_numbers(void) {
    int N = 3001;
    float *losses = randv(N, 3.0f, DT_FP32);
    for (int i = 0; i < N; i++) losses[i] = fabsf(losses[i]) + 1.0f;
    double sum = 0.0, want = 0.0, got[GPU_STEP_NUMBERS];
    for (int i = 0; i < N; i++) sum += losses[i];
    want = 2.0 * (float)(sum / N);  // two micro-batches' means, as gpt_forward rounds each
    float *d_losses = up(losses, N, DT_FP32);
    double *d_num = gpu_malloc(sizeof got, "step numbers");
    cu_loss_add(d_num, d_losses, N);
    cu_loss_add(d_num, d_losses, N);
    gpu_download(got, d_num, sizeof got);
    check(fabs(got[STEP_LOSS] - want) <= 1e-6 * want, "loss_add", "%.9g vs CPU %.9g", got[STEP_LOSS], want);
    struct { double sumsq; float loss_scale, clip; } cases[] = {
        {0.25, 1.0f, 1.0f}, {400.0, 1.0f, 1.0f}, {400.0, 1.0f, 0.0f}, {3e9, 65536.0f, 1.0f}, {INFINITY, 1.0f, 1.0f}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        double parts[3] = {cases[k].sumsq / 4, cases[k].sumsq / 4, cases[k].sumsq / 2};
        double *d_parts = gpu_malloc(sizeof parts, "partials");
        gpu_upload(d_parts, parts, sizeof parts);
        cu_grad_scale(d_num, d_parts, 3, cases[k].loss_scale, cases[k].clip);
        gpu_download(got, d_num, sizeof got);
        double s = 0.0;
        for (int i = 0; i < 3; i++) s += parts[i];
        float want_scale = step_grad_scale(s, cases[k].loss_scale, cases[k].clip), got_scale = (float)got[STEP_SCALE];
        int same = isnan(want_scale) ? isnan(got_scale) : got_scale == want_scale;
        char name[128];
        snprintf(name, sizeof name, "grad_scale (sum %g, loss scale %g, clip %g)", cases[k].sumsq, cases[k].loss_scale,
                 cases[k].clip);
        check(same && (got[STEP_SUMSQ] == s || isinf(s)), name, "scale %.9g vs CPU %.9g, sum %.9g vs %.9g", got_scale,
              want_scale, got[STEP_SUMSQ], s);
        gpu_free(d_parts);
    }
    gpu_free(d_losses); gpu_free(d_num);
    free(losses);
}

// The gradient norm and one AdamW update against core/adamw.h and optim/optimizer.h (AdamW in its
// bits: both spell out their roundings); a NaN scale (a skipped step) changes nothing.
void test_optimizer(int dt) {
    size_t n = 100003;
    float *g = randv(n, 1e-2f, dt), *w = randv(n, 1, DT_FP32), *m = randv(n, 1e-3f, DT_FP32), *v = fvec(n);
    for (size_t i = 0; i < n; i++) v[i] = 1e-4f * (1 + i % 7);
    double want = sum_squares(g, n), part[GPU_NORM_BLOCKS], got = 0;
    void *d_g = up(g, n, dt);
    double *d_part = gpu_malloc(sizeof part, "partials");
    cu_sum_squares_partials(dt, d_part, d_g, n);
    gpu_download(part, d_part, sizeof part);
    for (int i = 0; i < GPU_NORM_BLOCKS; i++) got += part[i];
    char name[64];
    snprintf(name, sizeof name, "sum_squares %s", dtype_name[dt]);
    check(fabs(got - want) / want < 1e-9, name, "%.12g vs CPU %.12g", got, want);
    // from the second element: a pointer off the 16-byte pieces takes the one-by-one kernel
    cu_sum_squares_partials(dt, d_part, (char *)d_g + dtype_size(dt), n - 1);
    gpu_download(part, d_part, sizeof part);
    got = 0;
    for (int i = 0; i < GPU_NORM_BLOCKS; i++) got += part[i];
    want = sum_squares(g + 1, n - 1);
    snprintf(name, sizeof name, "sum_squares %s, unaligned", dtype_name[dt]);
    check(fabs(got - want) / want < 1e-9, name, "%.12g vs CPU %.12g", got, want);
    double scales[GPU_STEP_NUMBERS] = {0};
    double *d_scale = gpu_malloc(sizeof scales, "step numbers");
    scales[STEP_SCALE] = NAN;  // a skipped step first: nothing may change
    gpu_upload(d_scale, scales, sizeof scales);
    AdamWConfig cfg = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0, 10, 0.1f};
    float *d_w = up(w, n, DT_FP32), *d_m = up(m, n, DT_FP32), *d_v = up(v, n, DT_FP32);
    void *d_lp = dt == DT_FP32 ? NULL : poisoned(n, dt);
    int t = 3;
    float b1c = 1.0f - powf(cfg.beta1, (float)t), b2c = 1.0f - powf(cfg.beta2, (float)t);
    cu_adamw(dt, d_w, d_lp, d_g, d_m, d_v, n, 1e-3f, cfg.beta1, cfg.beta2, cfg.eps, cfg.weight_decay, b1c, b2c,
             d_scale + STEP_SCALE);
    {
        float *gw = down(d_w, n, DT_FP32), *gm = down(d_m, n, DT_FP32);
        snprintf(name, sizeof name, "adamw %s skipped (NaN scale)", dtype_name[dt]);
        int kept = memcmp(gw, w, n * 4) == 0 && memcmp(gm, m, n * 4) == 0;
        check(kept, name, "%s", kept ? "the weights and m as they were" : "the weights or m changed");
        free(gw); free(gm);
    }
    adamw_update(w, g, m, v, n, &cfg, 1e-3f, t, 0.5f, 1);
    scales[STEP_SCALE] = 0.5;
    gpu_upload(d_scale, scales, sizeof scales);
    cu_adamw(dt, d_w, d_lp, d_g, d_m, d_v, n, 1e-3f, cfg.beta1, cfg.beta2, cfg.eps, cfg.weight_decay, b1c, b2c,
             d_scale + STEP_SCALE);
    {
        float *gw = down(d_w, n, DT_FP32), *gm = down(d_m, n, DT_FP32), *gv = down(d_v, n, DT_FP32);
        double ew = rel(gw, w, n), em = rel(gm, m, n), ev = rel(gv, v, n);
        int same = !memcmp(gw, w, n * 4) && !memcmp(gm, m, n * 4) && !memcmp(gv, v, n * 4);
        snprintf(name, sizeof name, "adamw %s", dtype_name[dt]);
        check(same, name, "%s: master %.1e, m %.1e, v %.1e", same ? "core/adamw.h's bits" : "not core/adamw.h's bits",
              ew, em, ev);
        if (d_lp) expect("adamw 16-bit weights", dt, d_lp, w, n);
        free(gw); free(gm); free(gv);
    }
    gpu_free(d_g); gpu_free(d_part); gpu_free(d_scale); gpu_free(d_w); gpu_free(d_m); gpu_free(d_v);
    if (d_lp) gpu_free(d_lp);
    free(g); free(w); free(m); free(v);
}

// The step's numbers on the device, AdamW's gradient scale `scale` among them.
static double *step_numbers_scaled(double scale) {
    double numbers[GPU_STEP_NUMBERS] = {0};
    numbers[STEP_SCALE] = scale;
    double *d_num = gpu_malloc(sizeof numbers, "step numbers");
    gpu_upload(d_num, numbers, sizeof numbers);
    return d_num;
}

// AdamW over several ranges in one launch (cu_adamw_segments) against one cu_adamw a range:
// the same bits, each range with its own decay; an empty range is skipped, a range of one
// parameter and one past a block's 256 are updated.
// by8: cu_adamw_pack16's kernel (8 parameters a thread, 16-byte pieces where aligned: ranges 1, 3 and 4
// start off a 16-byte boundary, 3 and 4 end inside a thread's 8), in the same bits too
void test_adamw_segments(int dt, int by8) {
    size_t n = 70001, e = dtype_size(dt);
    float *g = randv(n, 1e-2f, dt), *w = randv(n, 1, DT_FP32), *m = randv(n, 1e-3f, DT_FP32), *v = fvec(n);
    for (size_t i = 0; i < n; i++) v[i] = 1e-4f * (1 + i % 5);
    AdamwSegment segs[] = {{0, 30000, 0.1f}, {30000, 1, 0.0f}, {30001, 0, 0.1f}, {30001, 257, 0.0f},
                           {30258, 70001 - 30258, 0.1f}};
    int ns = (int)(sizeof segs / sizeof segs[0]);
    double *d_num = step_numbers_scaled(0.5);
    void *d_g = up(g, n, dt);
    float *wa = up(w, n, DT_FP32), *ma = up(m, n, DT_FP32), *va = up(v, n, DT_FP32);
    float *wb = up(w, n, DT_FP32), *mb = up(m, n, DT_FP32), *vb = up(v, n, DT_FP32);
    void *la = dt == DT_FP32 ? NULL : poisoned(n, dt), *lb = dt == DT_FP32 ? NULL : poisoned(n, dt);
    float lr = 1e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, b1c = 0.271f, b2c = 0.1426f;
    for (int s = 0; s < ns; s++) {
        size_t o = segs[s].offset;
        if (segs[s].n)
            cu_adamw(dt, wa + o, la ? (char *)la + o * e : NULL, (char *)d_g + o * e, ma + o, va + o, segs[s].n, lr, b1, b2,
                     eps, segs[s].weight_decay, b1c, b2c, d_num + STEP_SCALE);
    }
    cu_adamw_pack16(by8);
    cu_adamw_segments(dt, dt, wb, lb, d_g, mb, vb, segs, ns, lr, b1, b2, eps, b1c, b2c, d_num + STEP_SCALE);
    cu_adamw_pack16(-1);
    float *x[2][4] = {{down(wa, n, DT_FP32), down(ma, n, DT_FP32), down(va, n, DT_FP32), la ? down(la, n, dt) : NULL},
                      {down(wb, n, DT_FP32), down(mb, n, DT_FP32), down(vb, n, DT_FP32), lb ? down(lb, n, dt) : NULL}};
    int same = 1, changed = memcmp(x[0][0], w, n * 4) != 0;
    for (int k = 0; k < 4; k++)
        if (x[0][k] && memcmp(x[0][k], x[1][k], n * 4) != 0) same = 0;
    char name[64];
    snprintf(name, sizeof name, "adamw in one launch over 5 ranges%s %s", by8 ? ", 8 a thread" : "", dtype_name[dt]);
    check(same && changed, name, "%s", !changed ? "nothing was updated"
                                       : same   ? "the same bits as one cu_adamw a range"
                                                : "differs from one cu_adamw a range");
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 4; k++) free(x[r][k]);
    gpu_free(d_num); gpu_free(d_g);
    gpu_free(wa); gpu_free(ma); gpu_free(va); gpu_free(wb); gpu_free(mb); gpu_free(vb);
    if (la) gpu_free(la), gpu_free(lb);
    free(g); free(w); free(m); free(v);
}

// --fp32-grads (16-bit runs): a bucket of 16-bit gradients widened into fp32 (cu_widen_into),
// overwritten and then added, exactly as the CPU adds; and AdamW reading fp32 gradients ==
// AdamW reading the same values stored in the dtype (every 16-bit value is an fp32 value).
void test_fp32_grads(int dt) {
    size_t n = 70001;
    float *g = randv(n, 1e-2f, dt), *acc = randv(n, 1, DT_FP32), *want = fvec(n);
    void *d_g = up(g, n, dt);
    float *d_acc = up(acc, n, DT_FP32);
    char name[64];
    cu_widen_into(dt, d_acc, d_g, n, 0);
    float *got = down(d_acc, n, DT_FP32);
    snprintf(name, sizeof name, "widen_into %s, overwrite", dtype_name[dt]);
    int ok = memcmp(got, g, n * 4) == 0;
    check(ok, name, "%s %zu values", ok ? "the widened values, bit for bit:" : "not the widened values:", n);
    free(got);
    gpu_upload(d_acc, acc, n * 4);
    cu_widen_into(dt, d_acc, d_g, n, 1);
    for (size_t i = 0; i < n; i++) want[i] = acc[i] + g[i];
    got = down(d_acc, n, DT_FP32);
    snprintf(name, sizeof name, "widen_into %s, add", dtype_name[dt]);
    ok = memcmp(got, want, n * 4) == 0;
    check(ok, name, "%s %zu values", ok ? "the CPU's fp32 sums, bit for bit:" : "not the CPU's fp32 sums:", n);
    free(got);
    float *w = randv(n, 1, DT_FP32), *m = randv(n, 1e-3f, DT_FP32), *v = fvec(n);
    for (size_t i = 0; i < n; i++) v[i] = 1e-4f * (1 + i % 5);
    double *d_num = step_numbers_scaled(0.5);
    float *d_g32 = up(g, n, DT_FP32);
    for (int by8 = 0; by8 <= 1; by8++) {  // (by8: the fp32 gradients through cu_adamw_pack16's kernel)
        float *wa = up(w, n, DT_FP32), *ma = up(m, n, DT_FP32), *va = up(v, n, DT_FP32);
        float *wb = up(w, n, DT_FP32), *mb = up(m, n, DT_FP32), *vb = up(v, n, DT_FP32);
        void *la = poisoned(n, dt), *lb = poisoned(n, dt);
        AdamwSegment segs[] = {{0, 40000, 0.1f}, {40000, 30001, 0.0f}};
        cu_adamw_segments(dt, dt, wa, la, d_g, ma, va, segs, 2, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.271f, 0.1426f, d_num + STEP_SCALE);
        cu_adamw_pack16(by8);
        cu_adamw_segments(dt, DT_FP32, wb, lb, d_g32, mb, vb, segs, 2, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.271f, 0.1426f,
                          d_num + STEP_SCALE);
        cu_adamw_pack16(-1);
        float *x[2][4] = {{down(wa, n, DT_FP32), down(ma, n, DT_FP32), down(va, n, DT_FP32), down(la, n, dt)},
                          {down(wb, n, DT_FP32), down(mb, n, DT_FP32), down(vb, n, DT_FP32), down(lb, n, dt)}};
        int same = memcmp(x[0][0], w, n * 4) != 0;
        for (int k = 0; k < 4; k++)
            if (memcmp(x[0][k], x[1][k], n * 4) != 0) same = 0;
        snprintf(name, sizeof name, "adamw %s with fp32 gradients%s", dtype_name[dt], by8 ? ", 8 a thread" : "");
        check(same, name, "%s the bits of the same gradients stored in %s%s", same ? "weights, m, v and the 16-bit copy:" : "not",
              dtype_name[dt], same ? "" : " (or nothing updated)");
        for (int r = 0; r < 2; r++)
            for (int k = 0; k < 4; k++) free(x[r][k]);
        gpu_free(la); gpu_free(lb);
        gpu_free(wa); gpu_free(ma); gpu_free(va); gpu_free(wb); gpu_free(mb); gpu_free(vb);
    }
    gpu_free(d_num); gpu_free(d_g); gpu_free(d_g32); gpu_free(d_acc);
    free(g); free(acc); free(want); free(w); free(m); free(v);
}

#endif
