// tests/cpu_checks/optimizer.h — tests/test_cpu.c's checks of AdamW by hand, the schedule, the clip
// and the gradients' scale.
#ifndef GPTMEM_TEST_CPU_OPTIMIZER_H
#define GPTMEM_TEST_CPU_OPTIMIZER_H

// --- optimizer pieces ----------------------------------------------------------------
void test_adamw_by_hand(void) {
    // one weight p = 1 with decay, g = 0.5, then g = -0.25; lr 0.1, wd 0.1, b1 .9, b2 .95
    AdamWConfig o = {0.1f, 0.9f, 0.95f, 1e-8f, 0.1f, 0, 10, 0.1f};
    float p = 1.0f, g = 0.5f, m = 0, v = 0;
    adamw_update(&p, &g, &m, &v, 1, &o, 0.1f, 1, 1.0f, 1);
    // m = 0.05, v = 0.0125, mhat = 0.5, vhat = 0.25, p = 1 - 0.1 (0.5/0.5 + 0.1) = 0.89
    check(fabsf(m - 0.05f) < 1e-7f && fabsf(v - 0.0125f) < 1e-7f && fabsf(p - 0.89f) < 1e-6f, "adamw step 1 by hand",
          "m %.7f v %.7f p %.7f (want 0.05 0.0125 0.89)", m, v, p);
    g = -0.25f;
    adamw_update(&p, &g, &m, &v, 1, &o, 0.1f, 2, 1.0f, 1);
    // m = 0.9*0.05 - 0.025 = 0.02; v = 0.95*0.0125 + 0.05*0.0625 = 0.015
    // mhat = 0.02/0.19; vhat = 0.015/0.0975; p = 0.89 - 0.1 (mhat/(sqrt(vhat)+1e-8) + 0.1*0.89)
    double mh = 0.02 / 0.19, vh = 0.015 / 0.0975, want = 0.89 - 0.1 * (mh / (sqrt(vh) + 1e-8) + 0.089);
    check(fabs(p - want) < 1e-6, "adamw step 2 by hand", "p %.7f want %.7f", p, want);
    // without decay: a zero gradient leaves the weight alone
    float q = 2.0f, gz = 0, mz = 0, vz = 0;
    adamw_update(&q, &gz, &mz, &vz, 1, &o, 0.1f, 1, 1.0f, 0);
    check(q == 2.0f, "adamw no decay on 1-D", "p %.7f", q);
    // grad_scale (clipping) scales the gradient before the moments
    float p2 = 1.0f, g2 = 4.0f, m2 = 0, v2 = 0;
    adamw_update(&p2, &g2, &m2, &v2, 1, &o, 0.1f, 1, 0.125f, 1);
    check(fabsf(m2 - 0.05f) < 1e-7f, "adamw grad_scale", "m %.7f (4 * 0.125 * 0.1 = 0.05)", m2);
}

void test_schedule_and_clip(void) {
    AdamWConfig o = {1.0f, 0.9f, 0.95f, 1e-8f, 0, 10, 111, 0.1f};
    float a = lr_at(&o, 0), b = lr_at(&o, 9), c = lr_at(&o, 10), d = lr_at(&o, 60), e = lr_at(&o, 110);
    // warmup: (s+1)/10; cosine over 101 steps: progress (s-10)/100; at 0.5 -> 0.1 + 0.45 (1 + cos(pi/2)) = 0.55
    check(fabsf(a - 0.1f) < 1e-6f && fabsf(b - 1.0f) < 1e-6f && fabsf(c - 1.0f) < 1e-6f && fabsf(d - 0.55f) < 1e-6f &&
          fabsf(e - 0.1f) < 1e-6f, "lr schedule", "%.4f %.4f %.4f %.4f %.4f (want 0.1 1 1 0.55 0.1)", a, b, c, d, e);
    float g[1000];
    for (int i = 0; i < 1000; i++) g[i] = (i % 2) ? 3.0f : 4.0f;  // sum of squares = 500 * 25
    double ss = sum_squares(g, 1000);
    check(ss == 12500.0, "grad norm", "sum of squares %.1f (want 12500)", ss);
    float s1 = clip_scale(sqrt(ss), 1.0f), s2 = clip_scale(0.5, 1.0f), s3 = clip_scale(100.0, 0.0f);
    check(fabsf(s1 - 1.0f / sqrtf(12500.0f)) < 1e-6f && s2 == 1.0f && s3 == 1.0f, "clipping",
          "scale %.6f (want %.6f), 1 below the limit, 1 when off", s1, 1.0f / sqrtf(12500.0f));
    // AdamW's scale with fp16's loss scale 1024: the true norm is sqrt(ss)/1024 (clipped at 0.05 here,
    // not at 1); an infinite sum (an overflow) gives NaN, the skipped step
    float f1 = step_grad_scale(ss * 1024.0 * 1024.0, 1024.0f, 0.05f), f2 = step_grad_scale(ss, 1.0f, 1000.0f),
          f3 = step_grad_scale(INFINITY, 1024.0f, 1.0f);
    float want1 = 0.05f / sqrtf(12500.0f) / 1024.0f;
    check(fabsf(f1 - want1) < 1e-6f * want1 && f2 == 1.0f && isnan(f3), "step grad scale",
          "%.6g (want %.6g), %.6g (want 1), %.6g (want nan)", f1, want1, f2, f3);
}

#endif
