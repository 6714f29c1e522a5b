// cpu/ops.h — the CPU ops: every forward and its backward side by side, with
// shapes, on the GEMM of cpu/gemm.h (attention's: cpu/attention.h). Plain C11 + OpenMP, fp32 math. The GPU's
// twins are declared in cuda/api.h; tests/test_cuda.c checks each against
// the function of the same name here.
//
// Shapes use the usual letters:
//   B batch, T sequence length, C channels, H heads, hs = C/H head size,
//   V vocabulary, Vp vocabulary padded to a multiple of 64, N = B*T rows.
//
// Backward functions *accumulate* (+=) into weight gradients, so gradient
// accumulation over micro-batches is free; they overwrite or accumulate into
// input gradients as their comment says.
//
// Determinism: every output element is computed by exactly one thread with a
// fixed summation order, so results do not depend on the thread count. That is
// what lets resume, checkpointing and ZeRO be tested for bitwise equality.
#ifndef GPTMEM_OPS_H
#define GPTMEM_OPS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "core/dtype.h"
#include "core/sizes.h"
#include "cpu/attention.h"
#include "cpu/exp.h"
#include "cpu/gemm.h"

// --- encoder: token + position embedding ----------------------------------
// out[B,T,C] = wte[inp[b,t], :] + wpe[t, :]   (wpe NULL: the token's row alone, Llama's)
void encoder_forward(float *out, const int *inp, const float *wte, const float *wpe, int B, int T, int C) {
#pragma omp parallel for schedule(guided) if ((size_t)B * T * C >= PARALLEL_MIN)
    for (int bt = 0; bt < B * T; bt++) {
        const float *we = wte + (size_t)inp[bt] * C;
        float *o = out + (size_t)bt * C;
        if (!wpe) { memcpy(o, we, sizeof(float) * C); continue; }
        const float *pe = wpe + (size_t)(bt % T) * C;
        for (int c = 0; c < C; c++) o[c] = we[c] + pe[c];
    }
}

// dwte[inp[b,t], :] += dout[b,t,:];  dwpe[t,:] += dout[b,t,:] (when there is a wpe)
// Serial over positions: the same token can appear twice, and a fixed order
// keeps the sum deterministic.
void encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp, int B, int T, int C) {
    if (!dwte) return;  // a frozen table (--lora)
    for (int bt = 0; bt < B * T; bt++) {
        const float *d = dout + (size_t)bt * C;
        float *dwe = dwte + (size_t)inp[bt] * C;
        for (int c = 0; c < C; c++) dwe[c] += d[c];
        if (!dwpe) continue;
        float *dpe = dwpe + (size_t)(bt % T) * C;
        for (int c = 0; c < C; c++) dpe[c] += d[c];
    }
}

// --fused-ce's lookup: the same sums, a chunk of the table at a time. `rows`
// holds rows [r0, r1) of the table [wte | wpe]: Vp token rows, then maxT
// position rows. out (zeroed before the first chunk) gets a token's row and
// a position's row where they fall in the chunk; token rows come first, so
// with the chunks in order each sum is wte row + wpe row, as above. (Position
// t's row is Vp + t: a caller whose positions start at p0 passes Vp + p0.)
void encoder_forward_chunk(float *out, const int *inp, const float *rows, int r0, int r1, int Vp, int B, int T, int C) {
#pragma omp parallel for schedule(guided) if ((size_t)B * T * C >= PARALLEL_MIN)
    for (int bt = 0; bt < B * T; bt++) {
        int tok = inp[bt], pos = Vp + bt % T;
        float *o = out + (size_t)bt * C;
        if (tok >= r0 && tok < r1)
            for (int c = 0; c < C; c++) o[c] += rows[(size_t)(tok - r0) * C + c];
        if (pos >= r0 && pos < r1)
            for (int c = 0; c < C; c++) o[c] += rows[(size_t)(pos - r0) * C + c];
    }
}

// drows[row - r0, :] += dout[b,t,:] for the token's and the position's row,
// where they fall in [r0, r1): encoder_backward, a chunk of the table at a time.
void encoder_backward_chunk(float *drows, const float *dout, const int *inp, int r0, int r1, int Vp, int B, int T,
                            int C) {
    for (int bt = 0; drows && bt < B * T; bt++) {  // (drows NULL: a frozen table, --lora)
        const float *d = dout + (size_t)bt * C;
        int tok = inp[bt], pos = Vp + bt % T;
        if (tok >= r0 && tok < r1)
            for (int c = 0; c < C; c++) drows[(size_t)(tok - r0) * C + c] += d[c];
        if (pos >= r0 && pos < r1)
            for (int c = 0; c < C; c++) drows[(size_t)(pos - r0) * C + c] += d[c];
    }
}

// --- layernorm ---------------------------------------------------------------
// For each of the N rows x[C]: out = (x - mean) * rstd * w + b, rstd = 1/sqrt(var + 1e-5).
// Saves mean[N] and rstd[N] for the backward.
void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b,
                       int N, int C) {
#pragma omp parallel for schedule(guided) if ((size_t)N * C >= PARALLEL_MIN)
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C;
        float mu = 0.0f;
        for (int c = 0; c < C; c++) mu += x[c];
        mu /= C;
        float v = 0.0f;
        for (int c = 0; c < C; c++) v += (x[c] - mu) * (x[c] - mu);
        v /= C;
        float s = 1.0f / sqrtf(v + 1e-5f);
        float *o = out + (size_t)i * C;
        for (int c = 0; c < C; c++) o[c] = (x[c] - mu) * s * w[c] + b[c];
        mean[i] = mu;
        rstd[i] = s;
    }
}

// dinp[N,C] += ..., dw[C] += sum_rows dout * xhat, db[C] += sum_rows dout.
// With xhat = (x - mean) * rstd and g = dout * w:
//   dx = rstd * (g - mean_c(g) - xhat * mean_c(g * xhat))
void layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w,
                        const float *mean, const float *rstd, int N, int C) {
#pragma omp parallel for schedule(guided) if ((size_t)N * C >= PARALLEL_MIN)
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C, *d = dout + (size_t)i * C;
        float mu = mean[i], s = rstd[i];
        float g_mean = 0.0f, gx_mean = 0.0f;
        for (int c = 0; c < C; c++) {
            float g = d[c] * w[c];
            g_mean += g;
            gx_mean += g * (x[c] - mu) * s;
        }
        g_mean /= C;
        gx_mean /= C;
        float *dx = dinp + (size_t)i * C;
        for (int c = 0; c < C; c++) dx[c] += s * (d[c] * w[c] - g_mean - (x[c] - mu) * s * gx_mean);
    }
    // weight and bias gradients: a fixed row order, vectorized over channels (none for a frozen norm: dw NULL)
    for (int i = 0; dw && i < N; i++) {
        const float *x = inp + (size_t)i * C, *d = dout + (size_t)i * C;
        float mu = mean[i], s = rstd[i];
        for (int c = 0; c < C; c++) {
            dw[c] += d[c] * (x[c] - mu) * s;
            db[c] += d[c];
        }
    }
}

// --- RMSNorm (Llama) -------------------------------------------------------------------
// For each of the N rows x[C]: out = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps). No mean is
// taken out and there is no bias. Saves rstd[N] for the backward.
void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *w, int N, int C, float eps) {
#pragma omp parallel for schedule(guided) if ((size_t)N * C >= PARALLEL_MIN)
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C;
        float ss = 0.0f;
        for (int c = 0; c < C; c++) ss += x[c] * x[c];
        float s = 1.0f / sqrtf(ss / C + eps);
        float *o = out + (size_t)i * C;
        for (int c = 0; c < C; c++) o[c] = x[c] * s * w[c];
        rstd[i] = s;
    }
}

// dinp[N,C] += ..., dw[C] += sum_rows dout * xhat. With xhat = x * rstd and g = dout * w:
//   dx = rstd * (g - xhat * mean_c(g * xhat))     (layernorm's, with the mean terms gone)
void rmsnorm_backward(float *dinp, float *dw, const float *dout, const float *inp, const float *w, const float *rstd,
                      int N, int C) {
#pragma omp parallel for schedule(guided) if ((size_t)N * C >= PARALLEL_MIN)
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C, *d = dout + (size_t)i * C;
        float s = rstd[i], gx_mean = 0.0f;
        for (int c = 0; c < C; c++) gx_mean += d[c] * w[c] * x[c] * s;
        gx_mean /= C;
        float *dx = dinp + (size_t)i * C;
        for (int c = 0; c < C; c++) dx[c] += s * (d[c] * w[c] - x[c] * s * gx_mean);
    }
    for (int i = 0; dw && i < N; i++) {  // the weight's gradient (frozen: dw NULL): a fixed row order, vectorized over channels
        const float *x = inp + (size_t)i * C, *d = dout + (size_t)i * C;
        for (int c = 0; c < C; c++) dw[c] += d[c] * x[c] * rstd[i];
    }
}

// Either norm, as the model's config says: layernorm (out, mean, rstd; weight w and bias b) or, with
// rms, RMSNorm (Llama's: out and rstd, w alone, eps; mean and b unused). The backward likewise.
void norm_forward_as(int rms, float eps, float *out, float *mean, float *rstd, const float *inp, const float *w,
                     const float *b, int N, int C) {
    if (rms) rmsnorm_forward(out, rstd, inp, w, N, C, eps);
    else layernorm_forward(out, mean, rstd, inp, w, b, N, C);
}
void norm_backward_as(int rms, float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w,
                      const float *mean, const float *rstd, int N, int C) {
    if (rms) rmsnorm_backward(dinp, dw, dout, inp, w, rstd, N, C);
    else layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
}

// --- matmul (on cpu/gemm.h's GEMM) -------------------------------------------------
// out[N,OC] += bias[OC] on every row (bias may be NULL)
void bias_forward(float *out, const float *bias, int N, int OC) {
    if (!bias) return;
#pragma omp parallel for schedule(guided) if ((size_t)N * OC >= PARALLEL_MIN)
    for (int i = 0; i < N; i++)
        for (int o = 0; o < OC; o++) out[(size_t)i * OC + o] += bias[o];
}

// out[N,OC] = inp[N,C] @ w[OC,C]^T + bias[OC]   (bias may be NULL)
void matmul_forward(float *out, const float *inp, const float *w, const float *bias, int N, int C, int OC) {
    gemm(N, OC, C, inp, C, 1, w, 1, C, out, OC, 0);
    bias_forward(out, bias, N, OC);
}

// dinp[N,C] = dout[N,OC] @ w[OC,C]          (overwrites)
// dw[OC,C] += dout^T[OC,N] @ inp[N,C]       (accumulates)
// dbias[OC] += sum over rows of dout        (accumulates; may be NULL)
// (dw NULL: a frozen weight, --lora; its bias is frozen too)
void matmul_backward(float *dinp, float *dw, float *dbias, const float *dout, const float *inp, const float *w,
                     int N, int C, int OC) {
    if (dinp) gemm(N, C, OC, dout, OC, 1, w, C, 1, dinp, C, 0);
    if (dw) gemm(OC, C, N, dout, 1, OC, inp, C, 1, dw, C, 1);
    if (dbias) {
#pragma omp parallel for schedule(guided) if ((size_t)N * OC >= PARALLEL_MIN)
        for (int o0 = 0; o0 < OC; o0 += 64) {
            int o1 = o0 + 64 < OC ? o0 + 64 : OC;
            for (int i = 0; i < N; i++)
                for (int o = o0; o < o1; o++) dbias[o] += dout[(size_t)i * OC + o];
        }
    }
}

// --- GELU (tanh approximation) --------------------------------------------------
// out[n] = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
// tanh(u) is computed as 1 - 2 / (1 + exp(2u)): one exp instead of tanhf,
// which costs twice as much; at large |u| it saturates to +-1 exactly.
#define GELU_K 0.7978845608028654f  // sqrt(2/pi)
float tanh_via_exp(float u) { return 1.0f - 2.0f / (1.0f + exp_poly(2.0f * u)); }

void gelu_forward(float *out, const float *inp, size_t n) {
#pragma omp parallel for schedule(guided) if (n >= PARALLEL_MIN)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanh_via_exp(GELU_K * (x + 0.044715f * x * x * x)));
    }
}

// dinp[n] = gelu'(inp) * dout   (overwrites; dinp may be dout, in place)
void gelu_backward(float *dinp, const float *inp, const float *dout, size_t n) {
#pragma omp parallel for schedule(guided) if (n >= PARALLEL_MIN)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float th = tanh_via_exp(GELU_K * (x + 0.044715f * x * x * x));
        float sech2 = 1.0f - th * th;
        float grad = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] = grad * dout[i];
    }
}

// --- SwiGLU (Llama's MLP) ------------------------------------------------------------------
// inp[N,2F] holds the two projections of a row side by side, up (the first F) and gate (the
// next F); out[N,F] = up * silu(gate), silu(g) = g * sigmoid(g). Then a linear takes F to C.
float sigmoidf(float x) { return 1.0f / (1.0f + exp_poly(-x)); }

void swiglu_forward(float *out, const float *inp, int N, int F) {
#pragma omp parallel for schedule(guided) if ((size_t)N * F >= PARALLEL_MIN)
    for (int i = 0; i < N; i++) {
        const float *up = inp + (size_t)i * 2 * F, *g = up + F;
        float *o = out + (size_t)i * F;
        for (int j = 0; j < F; j++) o[j] = up[j] * g[j] * sigmoidf(g[j]);
    }
}

// dinp[N,2F] (overwrites) from dout[N,F]: d(up) = dout * silu(gate),
// d(gate) = dout * up * silu'(gate), silu'(g) = sigmoid(g) (1 + g (1 - sigmoid(g))).
void swiglu_backward(float *dinp, const float *inp, const float *dout, int N, int F) {
#pragma omp parallel for schedule(guided) if ((size_t)N * F >= PARALLEL_MIN)
    for (int i = 0; i < N; i++) {
        const float *up = inp + (size_t)i * 2 * F, *g = up + F, *d = dout + (size_t)i * F;
        float *dup = dinp + (size_t)i * 2 * F, *dg = dup + F;
        for (int j = 0; j < F; j++) {
            float sg = sigmoidf(g[j]);
            dup[j] = d[j] * g[j] * sg;
            dg[j] = d[j] * up[j] * sg * (1.0f + g[j] * (1.0f - sg));
        }
    }
}

// --- residual add ----------------------------------------------------------------
// out[n] = a[n] + b[n]  (out may alias a or b)
void residual_forward(float *out, const float *a, const float *b, size_t n) {
#pragma omp parallel for schedule(guided) if (n >= PARALLEL_MIN)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

// da += dout, db += dout. The model never calls this: the gradient of a sum is
// the same for both branches, so the backward pass just keeps using one buffer
// (dres) for the residual stream. It is here so the test pins that identity.
void residual_backward(float *da, float *db, const float *dout, size_t n) {
    for (size_t i = 0; i < n; i++) { da[i] += dout[i]; db[i] += dout[i]; }
}

// --- softmax + cross-entropy, fused ------------------------------------------------
// logits[N,Vp] -> probs, in place (the logits are not needed again, so the
// probabilities never need a buffer of their own). Only the first V entries
// of a row are real; the padded ones get probability 0.
// Returns the mean over rows of -log probs[target].
float crossentropy_forward(float *logits, const int *targets, int N, int V, int Vp) {
    double loss = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : loss)
    for (int i = 0; i < N; i++) {
        float *x = logits + (size_t)i * Vp;
        float maxv = -INFINITY;
        for (int v = 0; v < V; v++) if (x[v] > maxv) maxv = x[v];
        for (int v = 0; v < V; v++) x[v] = exp_poly(x[v] - maxv);  // (apart from the sum: this loop vectorizes)
        float sum = 0.0f;
        for (int v = 0; v < V; v++) sum += x[v];
        float inv = 1.0f / sum;
        for (int v = 0; v < V; v++) x[v] *= inv;
        for (int v = V; v < Vp; v++) x[v] = 0.0f;
        loss += -logf(!(x[targets[i]] <= 1e-30f) ? x[targets[i]] : 1e-30f);  // (a NaN stays NaN: reported, not hidden)
    }
    return (float)(loss / N);
}

// probs[N,Vp] -> dlogits, in place: dlogits = (probs - onehot(target)) * dloss.
// dloss is the gradient of the final loss w.r.t. each row's loss (1/N for a mean).
void crossentropy_backward(float *probs, const int *targets, int N, int Vp, float dloss) {
#pragma omp parallel for schedule(guided) if ((size_t)N * Vp >= PARALLEL_MIN)
    for (int i = 0; i < N; i++) {
        float *p = probs + (size_t)i * Vp;
        for (int v = 0; v < Vp; v++) p[v] *= dloss;
        p[targets[i]] -= dloss;
    }
}

// --- the chunked classifier (--fused-ce) -------------------------------------------
// The loss of row i is lse_i - x_i[target], lse_i = log sum_v exp(x_i[v]), over
// the real vocabulary v < V. The logits x come a tile at a time: rows
// [r0, r0 + rows) by vocabulary columns [v0, v0 + nv). Like flash attention's
// softmax, each row keeps a running max m (here stored in lse until the end),
// the running sum s of exp(x - m), rescaled when m grows, and its target's
// logit z when the target's column passes by.

// Fold one tile (rows x nv, row stride nv) into the rows' running m, s, z.
void crossentropy_tile_forward(const float *tile, int rows, int nv, int v0, int V, const int *targets, float *m,
                               float *s, float *z) {
    int real = V - v0 < nv ? V - v0 : nv;  // columns of the tile in the real vocabulary
#pragma omp parallel for schedule(guided) if ((size_t)rows * nv >= PARALLEL_MIN)
    for (int i = 0; i < rows; i++) {
        const float *x = tile + (size_t)i * nv;
        float mx = m[i];
        for (int v = 0; v < real; v++) if (x[v] > mx) mx = x[v];
        float sum = s[i] * exp_poly(m[i] - mx);  // s was a sum of exp(x - m): rescale it to exp(x - mx)
        for (int v = 0; v < real; v++) sum += exp_poly(x[v] - mx);
        m[i] = mx, s[i] = sum;
        int t = targets[i] - v0;
        if (t >= 0 && t < real) z[i] = x[t];
    }
}

// A tile of logits -> its dlogits, in place: (exp(x - lse) - onehot(target)) * dloss,
// and 0 in the padded columns (v >= V), as crossentropy_backward.
void crossentropy_tile_backward(float *tile, int rows, int nv, int v0, int V, const int *targets, const float *lse,
                                float dloss) {
#pragma omp parallel for schedule(guided) if ((size_t)rows * nv >= PARALLEL_MIN)
    for (int i = 0; i < rows; i++) {
        float *x = tile + (size_t)i * nv;
        for (int v = 0; v < nv; v++) x[v] = v0 + v < V ? exp_poly(x[v] - lse[i]) * dloss : 0.0f;
        int t = targets[i] - v0;
        if (t >= 0 && t < nv) x[t] -= dloss;
    }
}

// --- sum of squares (the gradient norm) ------------------------------------------
// Sum of squares of g[0..n) (stored as dtype dt) in double, in a fixed order
// (independent of the thread count): 64 fixed chunks; each is widened to fp32
// GRAD_BLOCK values at a time and summed in 8 independent lanes (lane i takes
// every 8th element, so the compiler can use vector registers without
// reordering any sum); then lanes and chunks are added in order.

double sum_squares_dt(const void *g, size_t n, int dt) {
    enum { CHUNKS = 64, LANES = 8 };
    double part[CHUNKS];
#pragma omp parallel for schedule(guided) if (n >= PARALLEL_MIN)
    for (int c = 0; c < CHUNKS; c++) {
        float buf[GRAD_BLOCK];
        size_t i0 = n * c / CHUNKS, i1 = n * (c + 1) / CHUNKS;
        double lane[LANES] = {0}, s = 0.0;
        for (size_t b0 = i0; b0 < i1; b0 += GRAD_BLOCK) {
            size_t len = i1 - b0 < GRAD_BLOCK ? i1 - b0 : GRAD_BLOCK, i = 0;
            const float *x = buf;
            if (dt == DT_FP32) x = (const float *)g + b0;
            else for (size_t j = 0; j < len; j++)
                buf[j] = dt == DT_BF16 ? bf16_to_float(((const uint16_t *)g)[b0 + j]) : fp16_to_float(((const uint16_t *)g)[b0 + j]);
            for (; i + LANES <= len; i += LANES)
                for (int j = 0; j < LANES; j++) lane[j] += (double)x[i + j] * x[i + j];
            for (; i < len; i++) s += (double)x[i] * x[i];
        }
        for (int j = 0; j < LANES; j++) s += lane[j];
        part[c] = s;
    }
    double s = 0.0;
    for (int c = 0; c < CHUNKS; c++) s += part[c];
    return s;
}

double sum_squares(const float *g, size_t n) { return sum_squares_dt(g, n, DT_FP32); }

#endif
