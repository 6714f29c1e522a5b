// cpu/attention.h — the CPU's attention ops, forward beside backward: naive
// (the T x T probabilities kept), over sampling's KV cache, and flash (never
// materializing T x T). Part of the ops (cpu/ops.h includes it), with their
// letters and their determinism: every output element by one thread, in a
// fixed order.
#ifndef GPTMEM_ATTENTION_H
#define GPTMEM_ATTENTION_H

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "core/dtype.h"
#include "core/sizes.h"

// Dot product of a[0..n) and b[0..n), summed in 8 independent lanes (lane j
// takes elements j, j+8, ...), then the lanes in order. A single running sum
// is a chain of dependent adds the compiler may not reorder; eight chains
// become one vector FMA per step. Deterministic, like every sum here.
float dot8(const float *a, const float *b, int n) {
    float lane[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) lane[j] += a[i + j] * b[i + j];
    float s = 0.0f;
    for (int j = 0; j < 8; j++) s += lane[j];
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

// A row of scores a[0..n), whose largest is maxv, into its softmax, in place:
// exp(a - maxv) summed in order, then each times 1/sum.
void softmax_row(float *a, int n, float maxv) {
    float sum = 0.0f;
    for (int j = 0; j < n; j++) { a[j] = expf(a[j] - maxv); sum += a[j]; }
    float inv = 1.0f / sum;
    for (int j = 0; j < n; j++) a[j] *= inv;
}

// --- causal self-attention (naive: keeps the T x T probabilities) ------------
// qkv[B,T,3C] holds q, k, v side by side; head h uses channels h*hs..(h+1)*hs.
// att[B,H,T,T]: softmax(q.k / sqrt(hs)) over t2 <= t (row t; entries t2 > t are 0)
// out[B,T,C]:   out[b,t,h] = sum_t2 att[b,h,t,t2] * v[b,t2,h]
void attention_forward(float *out, float *att, const float *qkv, int B, int T, int C, int H) {
    int hs = C / H;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for collapse(3) schedule(guided) if ((size_t)B * T * T * C / 64 >= PARALLEL_MIN)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * 3 * C + h * hs;
                float *a = att + (((size_t)b * H + h) * T + t) * T;
                float maxv = -INFINITY;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *k = qkv + ((size_t)b * T + t2) * 3 * C + C + h * hs;
                    float s = dot8(q, k, hs) * scale;
                    a[t2] = s;
                    if (s > maxv) maxv = s;
                }
                softmax_row(a, t + 1, maxv);
                for (int t2 = t + 1; t2 < T; t2++) a[t2] = 0.0f;
                float *o = out + ((size_t)b * T + t) * C + h * hs;
                for (int i = 0; i < hs; i++) o[i] = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *v = qkv + ((size_t)b * T + t2) * 3 * C + 2 * C + h * hs;
                    for (int i = 0; i < hs; i++) o[i] += a[t2] * v[i];
                }
            }
}

// --- attention over a KV cache (sampling, cpu/kvcache.h) -------------------------
// qkv[n,3C] holds n rows of batch 1 at positions p0 .. p0+n-1; kc and vc are
// one layer's cache, (Tc, C) each in dtype dt, holding the keys and values of
// positions 0 .. p0-1. The rows' keys and values go into it at p0 .. p0+n-1
// (rounded to dt); then row i is attention_forward's row t = p0+i: the same
// sums in the same order, its keys and values widened from the cache.
void attention_forward_cached(float *out, void *kc, void *vc, int dt, const float *qkv, int p0, int n, int C, int H) {
    int hs = C / H, T = p0 + n;
    float scale = 1.0f / sqrtf((float)hs);
    size_t e = dtype_size(dt);
    for (int i = 0; i < n; i++) {
        dtype_store((char *)kc + (size_t)(p0 + i) * C * e, qkv + (size_t)i * 3 * C + C, C, dt);
        dtype_store((char *)vc + (size_t)(p0 + i) * C * e, qkv + (size_t)i * 3 * C + 2 * C, C, dt);
    }
#pragma omp parallel for collapse(2) schedule(guided) if ((size_t)n * T * C / 64 >= PARALLEL_MIN)
    for (int i = 0; i < n; i++)
        for (int h = 0; h < H; h++) {
            int t = p0 + i;
            const float *q = qkv + (size_t)i * 3 * C + h * hs;
            float a[T], kv[hs];
            float maxv = -INFINITY;
            for (int t2 = 0; t2 <= t; t2++) {
                dtype_widen(kv, (const char *)kc + ((size_t)t2 * C + h * hs) * e, hs, dt);
                float s = dot8(q, kv, hs) * scale;
                a[t2] = s;
                if (s > maxv) maxv = s;
            }
            softmax_row(a, t + 1, maxv);
            float *o = out + (size_t)i * C + h * hs;
            for (int j = 0; j < hs; j++) o[j] = 0.0f;
            for (int t2 = 0; t2 <= t; t2++) {
                dtype_widen(kv, (const char *)vc + ((size_t)t2 * C + h * hs) * e, hs, dt);
                for (int j = 0; j < hs; j++) o[j] += a[t2] * kv[j];
            }
        }
}

// dqkv[B,T,3C] = gradient of q, k, v (overwrites). Per row t of head h:
//   datt[t2] = dout[t] . v[t2]
//   dscore[t2] = att[t2] * (datt[t2] - sum_j att[j] datt[j])   (softmax backward)
//   dq[t] += scale * dscore[t2] k[t2];  dk[t2] += scale * dscore[t2] q[t];  dv[t2] += att[t2] dout[t]
// One thread per (b, h): k and v gradients sum over rows t, in row order.
void attention_backward(float *dqkv, const float *dout, const float *qkv, const float *att, int B, int T, int C,
                        int H) {
    int hs = C / H;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for collapse(2) schedule(guided) if ((size_t)B * T * T * C / 64 >= PARALLEL_MIN)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            // per-thread row scratch: datt (T floats) and a dq accumulator (hs floats)
            float *datt = malloc(sizeof(float) * ((size_t)T + hs)), *dq_acc = datt + T;
            for (int t = 0; t < T; t++)
                for (int j = 0; j < 3; j++)
                    memset(dqkv + ((size_t)b * T + t) * 3 * C + j * C + h * hs, 0, sizeof(float) * hs);
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * 3 * C + h * hs;
                const float *a = att + (((size_t)b * H + h) * T + t) * T;
                const float *d = dout + ((size_t)b * T + t) * C + h * hs;
                float dot = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *v = qkv + ((size_t)b * T + t2) * 3 * C + 2 * C + h * hs;
                    float s = dot8(d, v, hs);
                    datt[t2] = s;
                    dot += a[t2] * s;
                }
                for (int i = 0; i < hs; i++) dq_acc[i] = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) {
                    // restrict: q, k and the three gradient rows never overlap, which
                    // lets the compiler vectorize these loops
                    const float *restrict k = qkv + ((size_t)b * T + t2) * 3 * C + C + h * hs;
                    float *restrict dk = dqkv + ((size_t)b * T + t2) * 3 * C + C + h * hs;
                    float *restrict dv = dqkv + ((size_t)b * T + t2) * 3 * C + 2 * C + h * hs;
                    float ds = a[t2] * (datt[t2] - dot) * scale;
                    for (int i = 0; i < hs; i++) dq_acc[i] += ds * k[i];
                    for (int i = 0; i < hs; i++) dk[i] += ds * q[i];
                    for (int i = 0; i < hs; i++) dv[i] += a[t2] * d[i];
                }
                float *dq = dqkv + ((size_t)b * T + t) * 3 * C + h * hs;
                for (int i = 0; i < hs; i++) dq[i] = dq_acc[i];
            }
            free(datt);
        }
}

// --- flash attention: the same function, never materializing T x T ---------------
// out[B,T,C] as attention_forward; lse[B,H,T] = log sum_t2 exp(score[t,t2]) per row.
// Each query row visits the keys in tiles of FLASH_TILE and keeps a running
// max m, a running sum l of exp(score - m) and a running output o (hs floats);
// when a tile raises the max, l and o are rescaled by exp(m_old - m_new) (the
// "online softmax"). At the end out = o / l and lse = m + log l. Only out and
// lse are saved: B*H*T floats instead of the B*H*T*T probabilities.
enum { FLASH_TILE = 64 };

void flash_attention_forward(float *out, float *lse, const float *qkv, int B, int T, int C, int H) {
    int hs = C / H;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for collapse(2) schedule(guided) if ((size_t)B * T * T * C / 64 >= PARALLEL_MIN)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            float s[FLASH_TILE];
            float *o = malloc(sizeof(float) * hs);  // the running output of one row
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * 3 * C + h * hs;
                float m = -INFINITY, l = 0.0f;
                for (int i = 0; i < hs; i++) o[i] = 0.0f;
                for (int j0 = 0; j0 <= t; j0 += FLASH_TILE) {
                    int j1 = j0 + FLASH_TILE <= t + 1 ? j0 + FLASH_TILE : t + 1;
                    float tile_max = -INFINITY;
                    for (int j = j0; j < j1; j++) {
                        s[j - j0] = dot8(q, qkv + ((size_t)b * T + j) * 3 * C + C + h * hs, hs) * scale;
                        if (s[j - j0] > tile_max) tile_max = s[j - j0];
                    }
                    float m_new = m > tile_max ? m : tile_max;
                    float correction = expf(m - m_new);  // 0 on the first tile (m = -inf)
                    l *= correction;
                    for (int i = 0; i < hs; i++) o[i] *= correction;
                    for (int j = j0; j < j1; j++) {
                        float p = expf(s[j - j0] - m_new);
                        const float *restrict v = qkv + ((size_t)b * T + j) * 3 * C + 2 * C + h * hs;
                        l += p;
                        for (int i = 0; i < hs; i++) o[i] += p * v[i];
                    }
                    m = m_new;
                }
                float *y = out + ((size_t)b * T + t) * C + h * hs;
                for (int i = 0; i < hs; i++) y[i] = o[i] / l;
                lse[((size_t)b * H + h) * T + t] = m + logf(l);
            }
            free(o);
        }
}

// dqkv[B,T,3C] (overwrites), from dout, the saved out and lse. The scores are
// recomputed tile by tile; each probability is p = exp(score - lse). With
// D[t] = dout[t] . out[t] (equal to sum_t2 p[t2] (dout[t] . v[t2])), the
// softmax backward is ds = p (dout[t] . v[t2] - D[t]), and then as in
// attention_backward. One thread per (b, h).
void flash_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *out, const float *lse,
                              int B, int T, int C, int H) {
    int hs = C / H;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for collapse(2) schedule(guided) if ((size_t)B * T * T * C / 64 >= PARALLEL_MIN)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            float *dq_acc = malloc(sizeof(float) * hs);
            for (int t = 0; t < T; t++)
                for (int j = 0; j < 3; j++)
                    memset(dqkv + ((size_t)b * T + t) * 3 * C + j * C + h * hs, 0, sizeof(float) * hs);
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * 3 * C + h * hs;
                const float *d = dout + ((size_t)b * T + t) * C + h * hs;
                float D = dot8(d, out + ((size_t)b * T + t) * C + h * hs, hs);
                float row_lse = lse[((size_t)b * H + h) * T + t];
                for (int i = 0; i < hs; i++) dq_acc[i] = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *restrict k = qkv + ((size_t)b * T + t2) * 3 * C + C + h * hs;
                    const float *restrict v = qkv + ((size_t)b * T + t2) * 3 * C + 2 * C + h * hs;
                    float *restrict dk = dqkv + ((size_t)b * T + t2) * 3 * C + C + h * hs;
                    float *restrict dv = dqkv + ((size_t)b * T + t2) * 3 * C + 2 * C + h * hs;
                    float p = expf(dot8(q, k, hs) * scale - row_lse);
                    float ds = p * (dot8(d, v, hs) - D) * scale;
                    for (int i = 0; i < hs; i++) dq_acc[i] += ds * k[i];
                    for (int i = 0; i < hs; i++) dk[i] += ds * q[i];
                    for (int i = 0; i < hs; i++) dv[i] += p * d[i];
                }
                float *dq = dqkv + ((size_t)b * T + t) * 3 * C + h * hs;
                for (int i = 0; i < hs; i++) dq[i] = dq_acc[i];
            }
            free(dq_acc);
        }
}

#endif
