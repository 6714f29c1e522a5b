// tests/cpu_checks/ops.h — tests/test_cpu.c's checks of each op's backward against central differences
// of a scalar loss, at odd sizes.
#ifndef GPTMEM_TEST_CPU_OPS_H
#define GPTMEM_TEST_CPU_OPS_H

// --- one global "case" per op; the loss functions read these -----------------
enum { TB = 2, TT = 7, TC = 12, TH = 3, TOC = 10, TV = 37, TVP = 64 };
float *in1, *in2, *in3, *w1, *b1, *outb, *rr, *mean_b, *rstd_b, *att_b;
int tok[TB * TT];

double loss_encoder(void) {
    encoder_forward(outb, tok, w1, b1, TB, TT, TC);
    return dot(outb, rr, TB * TT * TC);
}

void test_encoder(void) {
    size_t N = TB * TT;
    w1 = fvec(TV * TC); b1 = fvec(TT * TC); outb = fvec(N * TC); rr = fvec(N * TC);
    fill_normal(w1, TV * TC, 1); fill_normal(b1, TT * TC, 1); fill_normal(rr, N * TC, 1);
    for (size_t i = 0; i < N; i++) tok[i] = (int)(rng_next(&test_rng) % 5);  // repeats on purpose
    float *dw = fvec(TV * TC), *dp = fvec(TT * TC);
    encoder_backward(dw, dp, rr, tok, TB, TT, TC);
    fd_check("fd encoder dwte", loss_encoder, w1, dw, TV * TC);
    fd_check("fd encoder dwpe", loss_encoder, b1, dp, TT * TC);
    free(w1); free(b1); free(outb); free(rr); free(dw); free(dp);
}

double loss_layernorm(void) {
    layernorm_forward(outb, mean_b, rstd_b, in1, w1, b1, TB * TT, TC);
    return dot(outb, rr, TB * TT * TC);
}

void test_layernorm(void) {
    size_t N = TB * TT;
    in1 = fvec(N * TC); w1 = fvec(TC); b1 = fvec(TC); outb = fvec(N * TC); rr = fvec(N * TC);
    mean_b = fvec(N); rstd_b = fvec(N);
    fill_normal(in1, N * TC, 1); fill_normal(w1, TC, 1); fill_normal(b1, TC, 1); fill_normal(rr, N * TC, 1);
    float *dx = fvec(N * TC), *dw = fvec(TC), *db = fvec(TC);
    loss_layernorm();
    layernorm_backward(dx, dw, db, rr, in1, w1, mean_b, rstd_b, N, TC);
    fd_check("fd layernorm dinp", loss_layernorm, in1, dx, N * TC);
    fd_check("fd layernorm dw", loss_layernorm, w1, dw, TC);
    fd_check("fd layernorm db", loss_layernorm, b1, db, TC);
    free(in1); free(w1); free(b1); free(outb); free(rr); free(mean_b); free(rstd_b); free(dx); free(dw); free(db);
}

double loss_matmul(void) {
    matmul_forward(outb, in1, w1, b1, TB * TT, TC, TOC);
    return dot(outb, rr, TB * TT * TOC);
}

void test_matmul(void) {
    size_t N = TB * TT;
    in1 = fvec(N * TC); w1 = fvec(TOC * TC); b1 = fvec(TOC); outb = fvec(N * TOC); rr = fvec(N * TOC);
    fill_normal(in1, N * TC, 1); fill_normal(w1, TOC * TC, 1); fill_normal(b1, TOC, 1); fill_normal(rr, N * TOC, 1);
    float *dx = fvec(N * TC), *dw = fvec(TOC * TC), *db = fvec(TOC);
    matmul_backward(dx, dw, db, rr, in1, w1, N, TC, TOC);
    fd_check("fd matmul dinp", loss_matmul, in1, dx, N * TC);
    fd_check("fd matmul dw", loss_matmul, w1, dw, TOC * TC);
    fd_check("fd matmul dbias", loss_matmul, b1, db, TOC);
    free(in1); free(w1); free(b1); free(outb); free(rr); free(dx); free(dw); free(db);
}

// The blocked GEMM against a plain triple loop, on sizes that exercise every
// edge (rows not a multiple of 6, columns not a multiple of 32, K over KC).
void test_gemm_edges(void) {
    int sizes[][3] = {{1, 1, 1}, {7, 33, 5}, {13, 65, 300}, {64, 31, 257}, {390, 70, 513}};
    for (int s = 0; s < 5; s++) {
        int M = sizes[s][0], N = sizes[s][1], K = sizes[s][2];
        float *a = fvec((size_t)M * K), *b = fvec((size_t)K * N), *c = fvec((size_t)M * N);
        double *ref = calloc((size_t)M * N, sizeof(double));
        fill_normal(a, (size_t)M * K, 1); fill_normal(b, (size_t)K * N, 1); fill_normal(c, (size_t)M * N, 1);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double acc = c[(size_t)i * N + j];  // accumulate mode adds to C
                for (int k = 0; k < K; k++) acc += (double)a[(size_t)i * K + k] * b[(size_t)k * N + j];
                ref[(size_t)i * N + j] = acc;
            }
        gemm(M, N, K, a, K, 1, b, N, 1, c, N, 1);
        double e = rel_err(c, ref, (size_t)M * N);
        check(e < 1e-5, "gemm vs triple loop", "M %d N %d K %d: relative error %.2e", M, N, K, e);
        free(a); free(b); free(c); free(ref);
    }
}

double loss_attention(void) {
    attention_forward(outb, att_b, in1, TB, TT, TC, TH);
    return dot(outb, rr, TB * TT * TC);
}

void test_attention(void) {
    size_t N = TB * TT;
    in1 = fvec(N * 3 * TC); outb = fvec(N * TC); rr = fvec(N * TC); att_b = fvec(TB * TH * TT * TT);
    fill_normal(in1, N * 3 * TC, 1); fill_normal(rr, N * TC, 1);
    float *dqkv = fvec(N * 3 * TC);
    loss_attention();
    attention_backward(dqkv, rr, in1, att_b, TB, TT, TC, TH);
    fd_check("fd attention dqkv", loss_attention, in1, dqkv, N * 3 * TC);
    // causality: the output at t must not change when a later token's k or v changes
    float keep = in1[(TT - 1) * 3 * TC + TC];  // k of the last position, batch 0
    loss_attention();
    float before = outb[0];
    in1[(TT - 1) * 3 * TC + TC] = keep + 5.0f;
    loss_attention();
    check(outb[0] == before, "attention is causal", "output at t=0 unchanged by a change at t=%d", TT - 1);
    in1[(TT - 1) * 3 * TC + TC] = keep;
    free(in1); free(outb); free(rr); free(att_b); free(dqkv);
}

// cpu/exp.h's exp_poly against libm's expf: floats spread over the range it computes (a step of 4099 through the
// bit patterns of each sign), within 1 ulp; its ends and NaN; and the same bits for an element wherever a loop puts
// it (GELU at an offset of 1: other lanes of the vector, another tail).
int32_t ulp_order(float f) {
    int32_t i;
    memcpy(&i, &f, sizeof i);
    return i < 0 ? INT32_MIN - i : i;
}

void test_exp_poly(void) {
    long worst = 0, n = 0;
    float at = 0;
    for (uint32_t sign = 0; sign <= 1; sign++)
        for (uint32_t b = 0; b < 0x7f800000u; b += 4099) {
            uint32_t u = b | sign << 31;
            float x;
            memcpy(&x, &u, sizeof x);
            if (x < -87.33f || x > 88.37f) continue;
            long d = labs((long)ulp_order(exp_poly(x)) - ulp_order(expf(x)));
            if (d > worst) worst = d, at = x;
            n++;
        }
    check(worst <= 1, "exp_poly within 1 ulp of expf", "%ld floats in [-87.33, 88.37], worst %ld ulp (at %g)", n, worst,
          at);
    check(exp_poly(-100.0f) == 0.0f && isinf(exp_poly(100.0f)) && isnan(exp_poly(NAN)) && exp_poly(0.0f) == 1.0f &&
              isinf(exp_poly(INFINITY)) && exp_poly(-INFINITY) == 0.0f,
          "exp_poly's ends", "0 below -87.33, infinity above 88.37, NaN for NaN, e^0 = 1");
    size_t len = 1003;
    float *x = fvec(len + 1), *y0 = fvec(len + 1), *y1 = fvec(len + 1);
    fill_normal(x, len + 1, 3);
    gelu_forward(y0, x, len + 1);
    gelu_forward(y1, x + 1, len);
    check(memcmp(y0 + 1, y1, len * sizeof(float)) == 0, "GELU's bits wherever the loop puts an element",
          "%zu elements, at offsets 1 and 0", len);
    free(x); free(y0); free(y1);
}

double loss_gelu(void) {
    gelu_forward(outb, in1, TB * TT * TC);
    return dot(outb, rr, TB * TT * TC);
}

void test_gelu(void) {
    size_t n = TB * TT * TC;
    in1 = fvec(n); outb = fvec(n); rr = fvec(n);
    fill_normal(in1, n, 2); fill_normal(rr, n, 1);
    float *dx = fvec(n);
    gelu_backward(dx, in1, rr, n);
    fd_check("fd gelu", loss_gelu, in1, dx, n);
    free(in1); free(outb); free(rr); free(dx);
}

double loss_residual(void) {
    residual_forward(outb, in1, in2, TB * TT * TC);
    return dot(outb, rr, TB * TT * TC);
}

void test_residual(void) {
    size_t n = TB * TT * TC;
    in1 = fvec(n); in2 = fvec(n); outb = fvec(n); rr = fvec(n);
    fill_normal(in1, n, 1); fill_normal(in2, n, 1); fill_normal(rr, n, 1);
    float *da = fvec(n), *db = fvec(n);
    residual_backward(da, db, rr, n);
    fd_check("fd residual da", loss_residual, in1, da, n);
    fd_check("fd residual db", loss_residual, in2, db, n);
    free(in1); free(in2); free(outb); free(rr); free(da); free(db);
}

double loss_crossentropy(void) {
    size_t n = (size_t)TB * TT * TVP;
    memcpy(outb, in1, n * sizeof(float));  // forward works in place
    return crossentropy_forward(outb, tok, TB * TT, TV, TVP);
}

void test_crossentropy(void) {
    size_t n = (size_t)TB * TT * TVP;
    in1 = fvec(n); outb = fvec(n);
    fill_normal(in1, n, 2);
    for (int i = 0; i < TB * TT; i++) tok[i] = (int)(rng_next(&test_rng) % TV);
    // crossentropy_forward returns the mean, so each row's loss has weight dloss = 1/N
    loss_crossentropy();
    crossentropy_backward(outb, tok, TB * TT, TVP, 1.0f / (TB * TT));
    float *d = fvec(n);
    memcpy(d, outb, n * sizeof(float));
    fd_check("fd softmax-crossentropy", loss_crossentropy, in1, d, n);
    double pad = 0;
    for (int i = 0; i < TB * TT; i++)
        for (int v = TV; v < TVP; v++) pad += fabsf(d[(size_t)i * TVP + v]);
    check(pad == 0.0, "padded logits masked", "sum |dlogits| over padded vocab = %g", pad);
    free(in1); free(outb); free(d);
}

#endif
