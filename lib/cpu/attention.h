// cpu/attention.h — the CPU's attention ops, forward beside backward: naive
// (the T x T probabilities kept), over sampling's KV cache, and flash (never
// materializing T x T), each for grouped-query heads too (Heads); and the
// rotary position embedding that Llama applies to q and k before them. Part of the ops (cpu/ops.h includes it), with their
// letters and their determinism: every output element by one thread, in a
// fixed order.
#ifndef GPTMEM_ATTENTION_H
#define GPTMEM_ATTENTION_H

#include <math.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "core/config.h"  // Rope
#include "core/dtype.h"
#include "core/sizes.h"
#include "cpu/exp.h"
#include "cpu/gemm.h"

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

// The same dot product summed in k order, one fused multiply-add a term: the order of each
// element of cpu/gemm.h's product, so that a score computed alone (the KV cache's) has the
// bits of the one attention_forward's GEMM computed.
float dot_k(const float *a, const float *b, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s = fmaf(a[i], b[i], s);
    return s;
}

// A row of scores a[0..n), whose largest is maxv, into its softmax, in place:
// exp(a - maxv) summed in order, then each times 1/sum.
void softmax_row(float *a, int n, float maxv) {
    for (int j = 0; j < n; j++) a[j] = exp_poly(a[j] - maxv);  // (apart from the sum: this loop vectorizes)
    float sum = 0.0f;
    for (int j = 0; j < n; j++) sum += a[j];
    float inv = 1.0f / sum;
    for (int j = 0; j < n; j++) a[j] *= inv;
}

// --- the heads' places in a row of qkv --------------------------------------------
// A row of qkv holds H query heads, then KVH key heads, then KVH value heads, hs channels
// each; GPT-2 has KVH = H (the row is 3C). With fewer key-value heads (grouped-query attention,
// Llama) query head h uses key and value head h / (H / KVH): the groups share them, never
// repeated in memory. The output row holds the H heads, H hs channels.
typedef struct {
    int H, KVH, hs;
} Heads;
Heads mha(int C, int H) { return (Heads){H, H, C / H}; }  // every query head its own K and V
size_t heads_row(Heads g) { return (size_t)(g.H + 2 * g.KVH) * g.hs; }
int q_at(Heads g, int h) { return h * g.hs; }
int k_at(Heads g, int h) { return (g.H + h / (g.H / g.KVH)) * g.hs; }
int v_at(Heads g, int h) { return (g.H + g.KVH + h / (g.H / g.KVH)) * g.hs; }

// --- causal self-attention (naive: keeps the T x T probabilities) ------------
// qkv[B,T,row] holds the heads as Heads says; for each query head h:
// att[B,H,T,T]: softmax(q.k / sqrt(hs)) over t2 <= t (row t; entries t2 > t are 0)
// out[B,T,H hs]: out[b,t,h] = sum_t2 att[b,h,t,t2] * v[b,t2,h's group]
// Both products are the GEMM's, a block of ATT_ROWS query rows at a time over the keys up
// to the block's last row (the causal half, and the few past the diagonal that the mask
// then zeroes: a zero times v adds nothing to a sum).
enum { ATT_ROWS = 64 };
void attention_forward_heads(float *out, float *att, const float *qkv, int B, int T, Heads g) {
    int H = g.H, hs = g.hs;
    size_t R = heads_row(g), C = (size_t)H * hs;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for collapse(2) schedule(dynamic) if ((size_t)B * T * T * C / 64 >= PARALLEL_MIN)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const float *x = qkv + (size_t)b * T * R;  // this sequence's rows
            float *a = att + ((size_t)b * H + h) * T * T;
            for (int t0 = 0; t0 < T; t0 += ATT_ROWS) {
                int rows = T - t0 < ATT_ROWS ? T - t0 : ATT_ROWS, keys = t0 + rows;
                // scores (rows, keys) = q (rows, hs) k^T (hs, keys)
                gemm(rows, keys, hs, x + (size_t)t0 * R + q_at(g, h), R, 1, x + k_at(g, h), 1, R, a + (size_t)t0 * T, T, 0);
                for (int t = t0; t < t0 + rows; t++) {
                    float *r = a + (size_t)t * T, maxv = -INFINITY;
                    for (int t2 = 0; t2 <= t; t2++) {
                        r[t2] *= scale;
                        if (r[t2] > maxv) maxv = r[t2];
                    }
                    softmax_row(r, t + 1, maxv);
                    for (int t2 = t + 1; t2 < T; t2++) r[t2] = 0.0f;
                }
                // out (rows, hs) = att (rows, keys) v (keys, hs)
                gemm(rows, hs, keys, a + (size_t)t0 * T, T, 1, x + v_at(g, h), R, 1, out + ((size_t)b * T + t0) * C + h * hs,
                     C, 0);
            }
        }
}
// GPT-2's: qkv[B,T,3C], H heads of C/H channels
void attention_forward(float *out, float *att, const float *qkv, int B, int T, int C, int H) {
    attention_forward_heads(out, att, qkv, B, T, mha(C, H));
}

// --- attention over a KV cache (sampling, cpu/kvcache.h) -------------------------
// qkv[n,row] holds n rows of batch 1 at positions p0 .. p0+n-1, its heads as Heads
// says; kc and vc are one layer's cache, (Tc, KVH hs) each in dtype dt (GPT-2: (Tc, C)),
// holding the keys and values of positions 0 .. p0-1. The rows' key and value heads go
// into it at p0 .. p0+n-1 (rounded to dt); then row i is attention_forward's row
// t = p0+i: the same sums in the same order, its keys and values widened from the cache.
void attention_forward_cached_heads(float *out, void *kc, void *vc, int dt, const float *qkv, int p0, int n, Heads g) {
    int H = g.H, hs = g.hs, T = p0 + n, per = g.H / g.KVH;
    size_t e = dtype_size(dt), row = heads_row(g), kvw = (size_t)g.KVH * hs;
    float scale = 1.0f / sqrtf((float)hs);
    for (int i = 0; i < n; i++) {
        dtype_store((char *)kc + (size_t)(p0 + i) * kvw * e, qkv + (size_t)i * row + (size_t)H * hs, kvw, dt);
        dtype_store((char *)vc + (size_t)(p0 + i) * kvw * e, qkv + (size_t)i * row + (size_t)(H + g.KVH) * hs, kvw, dt);
    }
#pragma omp parallel for collapse(2) schedule(guided) if ((size_t)n * T * H * hs / 64 >= PARALLEL_MIN)
    for (int i = 0; i < n; i++)
        for (int h = 0; h < H; h++) {
            int t = p0 + i;
            const float *q = qkv + (size_t)i * row + q_at(g, h);
            size_t at = (size_t)(h / per) * hs;  // its key-value head in a cache row
            float a[T], kv[hs];
            float maxv = -INFINITY;
            for (int t2 = 0; t2 <= t; t2++) {
                dtype_widen(kv, (const char *)kc + ((size_t)t2 * kvw + at) * e, hs, dt);
                float s = dot_k(q, kv, hs) * scale;  // (attention_forward's GEMM's sum)
                a[t2] = s;
                if (s > maxv) maxv = s;
            }
            softmax_row(a, t + 1, maxv);
            float *o = out + (size_t)i * H * hs + (size_t)h * hs;
            for (int j = 0; j < hs; j++) o[j] = 0.0f;
            for (int t2 = 0; t2 <= t; t2++) {
                dtype_widen(kv, (const char *)vc + ((size_t)t2 * kvw + at) * e, hs, dt);
                for (int j = 0; j < hs; j++) o[j] += a[t2] * kv[j];
            }
        }
}
void attention_forward_cached(float *out, void *kc, void *vc, int dt, const float *qkv, int p0, int n, int C, int H) {
    attention_forward_cached_heads(out, kc, vc, dt, qkv, p0, n, mha(C, H));
}

// The gradient rows of key-value head kv's group (its query heads, its key and value head) at every
// position of batch row b set to 0: the part of dqkv one thread of the backwards below owns.
void zero_group_grads(float *dqkv, int b, int T, Heads g, int kv) {
    int per = g.H / g.KVH;
    for (int h = kv * per; h < (kv + 1) * per; h++)
        for (int t = 0; t < T; t++) {
            float *row = dqkv + ((size_t)b * T + t) * heads_row(g);
            memset(row + q_at(g, h), 0, sizeof(float) * g.hs);
            memset(row + k_at(g, h), 0, sizeof(float) * g.hs);
            memset(row + v_at(g, h), 0, sizeof(float) * g.hs);
        }
}

// dqkv[B,T,row] = gradient of q, k, v (overwrites). Per row t of query head h:
//   datt[t2] = dout[t] . v[t2]
//   dscore[t2] = att[t2] * (datt[t2] - sum_j att[j] datt[j])   (softmax backward)
//   dq[t] += scale * dscore[t2] k[t2];  dk[t2] += scale * dscore[t2] q[t];  dv[t2] += att[t2] dout[t]
// One thread per (b, key-value head): its K and V gradients sum over its query heads in order, and
// in each over rows t in order. The four products are the GEMM's, ATT_ROWS query rows at a time
// over the keys up to the block's last row (a zero of att or dscore past the diagonal adds nothing);
// datt and then dscore in a scratch of ATT_ROWS rows of T.
void attention_backward_heads(float *dqkv, const float *dout, const float *qkv, const float *att, int B, int T,
                              Heads g) {
    int H = g.H, KVH = g.KVH, hs = g.hs, per = H / KVH;
    size_t R = heads_row(g), C = (size_t)H * hs;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for collapse(2) schedule(dynamic) if ((size_t)B * T * T * C / 64 >= PARALLEL_MIN)
    for (int b = 0; b < B; b++)
        for (int kv = 0; kv < KVH; kv++) {
            float *ds = malloc(sizeof(float) * ATT_ROWS * (size_t)T);  // (rows, keys), row stride T
            if (!ds) {  // (a thread's 64 rows of T: 256 KiB at T 1024, small beside att's T x T a head)
                fprintf(stderr, "error: out of memory for attention's backward scratch (%zu bytes a thread)\n",
                        sizeof(float) * ATT_ROWS * (size_t)T);
                exit(1);
            }
            const float *x = qkv + (size_t)b * T * R, *d = dout + (size_t)b * T * C;
            float *dx = dqkv + (size_t)b * T * R;
            zero_group_grads(dqkv, b, T, g, kv);
            for (int h = kv * per; h < (kv + 1) * per; h++)
                for (int t0 = 0; t0 < T; t0 += ATT_ROWS) {
                    int rows = T - t0 < ATT_ROWS ? T - t0 : ATT_ROWS, keys = t0 + rows;
                    const float *a = att + (((size_t)b * H + h) * T + t0) * T;  // the block's rows of att
                    const float *dblk = d + (size_t)t0 * C + h * hs, *q = x + (size_t)t0 * R + q_at(g, h);
                    gemm(rows, keys, hs, dblk, C, 1, x + v_at(g, h), 1, R, ds, T, 0);  // datt = dout v^T
                    for (int i = 0; i < rows; i++) {                                  // -> dscore, in place
                        float *r = ds + (size_t)i * T, dot = 0.0f;
                        const float *ar = a + (size_t)i * T;
                        for (int t2 = 0; t2 <= t0 + i; t2++) dot += ar[t2] * r[t2];
                        for (int t2 = 0; t2 < keys; t2++) r[t2] = t2 <= t0 + i ? ar[t2] * (r[t2] - dot) * scale : 0.0f;
                    }
                    gemm(rows, hs, keys, ds, T, 1, x + k_at(g, h), R, 1, dx + (size_t)t0 * R + q_at(g, h), R, 0);  // dq
                    gemm(keys, hs, rows, ds, 1, T, q, R, 1, dx + k_at(g, h), R, 1);                        // dk +=
                    gemm(keys, hs, rows, a, 1, T, dblk, C, 1, dx + v_at(g, h), R, 1);                      // dv +=
                }
            free(ds);
        }
}
void attention_backward(float *dqkv, const float *dout, const float *qkv, const float *att, int B, int T, int C,
                        int H) {
    attention_backward_heads(dqkv, dout, qkv, att, B, T, mha(C, H));
}

// --- flash attention: the same function, never materializing T x T ---------------
// out[B,T,C] as attention_forward; lse[B,H,T] = log sum_t2 exp(score[t,t2]) per row.
// Each query row visits the keys in tiles of FLASH_TILE and keeps a running
// max m, a running sum l of exp(score - m) and a running output o (hs floats);
// when a tile raises the max, l and o are rescaled by exp(m_old - m_new) (the
// "online softmax"). At the end out = o / l and lse = m + log l. Only out and
// lse are saved: B*H*T floats instead of the B*H*T*T probabilities.
enum { FLASH_TILE = 64 };

void flash_attention_forward_heads(float *out, float *lse, const float *qkv, int B, int T, Heads g) {
    int H = g.H, hs = g.hs;
    size_t R = heads_row(g), C = (size_t)H * hs;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for collapse(2) schedule(guided) if ((size_t)B * T * T * C / 64 >= PARALLEL_MIN)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            float s[FLASH_TILE];
            float *o = malloc(sizeof(float) * hs);  // the running output of one row
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * R + q_at(g, h);
                float m = -INFINITY, l = 0.0f;
                for (int i = 0; i < hs; i++) o[i] = 0.0f;
                for (int j0 = 0; j0 <= t; j0 += FLASH_TILE) {
                    int j1 = j0 + FLASH_TILE <= t + 1 ? j0 + FLASH_TILE : t + 1;
                    float tile_max = -INFINITY;
                    for (int j = j0; j < j1; j++) {
                        s[j - j0] = dot8(q, qkv + ((size_t)b * T + j) * R + k_at(g, h), hs) * scale;
                        if (s[j - j0] > tile_max) tile_max = s[j - j0];
                    }
                    float m_new = m > tile_max ? m : tile_max;
                    float correction = exp_poly(m - m_new);  // 0 on the first tile (m = -inf)
                    l *= correction;
                    for (int i = 0; i < hs; i++) o[i] *= correction;
                    for (int j = j0; j < j1; j++) {
                        float p = exp_poly(s[j - j0] - m_new);
                        const float *restrict v = qkv + ((size_t)b * T + j) * R + v_at(g, h);
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
void flash_attention_forward(float *out, float *lse, const float *qkv, int B, int T, int C, int H) {
    flash_attention_forward_heads(out, lse, qkv, B, T, mha(C, H));
}

// dqkv[B,T,row] (overwrites), from dout, the saved out and lse. The scores are
// recomputed tile by tile; each probability is p = exp(score - lse). With
// D[t] = dout[t] . out[t] (equal to sum_t2 p[t2] (dout[t] . v[t2])), the
// softmax backward is ds = p (dout[t] . v[t2] - D[t]), and then as in
// attention_backward. One thread per (b, key-value head), as there.
void flash_attention_backward_heads(float *dqkv, const float *dout, const float *qkv, const float *out,
                                    const float *lse, int B, int T, Heads g) {
    int H = g.H, KVH = g.KVH, hs = g.hs, per = H / KVH;
    size_t R = heads_row(g), C = (size_t)H * hs;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for collapse(2) schedule(guided) if ((size_t)B * T * T * C / 64 >= PARALLEL_MIN)
    for (int b = 0; b < B; b++)
        for (int kv = 0; kv < KVH; kv++) {
            float *dq_acc = malloc(sizeof(float) * hs);
            zero_group_grads(dqkv, b, T, g, kv);
            for (int h = kv * per; h < (kv + 1) * per; h++)
                for (int t = 0; t < T; t++) {
                    const float *q = qkv + ((size_t)b * T + t) * R + q_at(g, h);
                    const float *d = dout + ((size_t)b * T + t) * C + h * hs;
                    float D = dot8(d, out + ((size_t)b * T + t) * C + h * hs, hs);
                    float row_lse = lse[((size_t)b * H + h) * T + t];
                    for (int i = 0; i < hs; i++) dq_acc[i] = 0.0f;
                    for (int t2 = 0; t2 <= t; t2++) {
                        const float *restrict k = qkv + ((size_t)b * T + t2) * R + k_at(g, h);
                        const float *restrict v = qkv + ((size_t)b * T + t2) * R + v_at(g, h);
                        float *restrict dk = dqkv + ((size_t)b * T + t2) * R + k_at(g, h);
                        float *restrict dv = dqkv + ((size_t)b * T + t2) * R + v_at(g, h);
                        float p = exp_poly(dot8(q, k, hs) * scale - row_lse);
                        float ds = p * (dot8(d, v, hs) - D) * scale;
                        for (int i = 0; i < hs; i++) dq_acc[i] += ds * k[i];
                        for (int i = 0; i < hs; i++) dk[i] += ds * q[i];
                        for (int i = 0; i < hs; i++) dv[i] += p * d[i];
                    }
                    float *dq = dqkv + ((size_t)b * T + t) * R + q_at(g, h);
                    for (int i = 0; i < hs; i++) dq[i] = dq_acc[i];
                }
            free(dq_acc);
        }
}
void flash_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *out, const float *lse,
                              int B, int T, int C, int H) {
    flash_attention_backward_heads(dqkv, dout, qkv, out, lse, B, T, mha(C, H));
}

// --- rotary position embedding (Llama) ---------------------------------------------------
// The angle pair i of a head (of hs channels) turns by, per position: theta^(-2i/hs). Llama 3.1
// (rope.scaled = 8; llm.c's use_scaled_rope) stretches the slow ones for its 128K context: a pair
// whose wavelength 2 pi / f is over 8192 positions (Llama 3's context) turns 8 times slower, one
// under 8192 / 4 as before, and those between by a blend of the two, linear in 8192 / wavelength.
// Llama 3.2's 1B and 3B do the same with a factor of 32.
float rope_frequency(int i, int hs, Rope rope) {
    float f = powf(rope.theta, -2.0f * i / hs);
    if (!rope.scaled) return f;
    const float factor = (float)rope.scaled, low = 1.0f, high = 4.0f, context = 8192.0f;
    float wavelength = 6.28318531f / f;  // 2 pi / f
    if (wavelength < context / high) return f;
    if (wavelength > context / low) return f / factor;
    float smooth = (context / wavelength - low) / (high - low);
    return (1.0f - smooth) * f / factor + smooth * f;
}

// In each row of qkv[N,row] (rows b*T + t, at position p0 + t), the first `nheads` heads of hs
// channels (the query heads and the key heads) are rotated: the pair (2i, 2i+1) of a head as a
// complex number, by the angle (p0 + t) * rope_frequency(i) (Meta's layout). In place: attention
// reads the rotated q and k. The backward rotates the gradient back, by the opposite angle.
void rope_rotate(float *qkv, int N, int T, int p0, size_t row, int nheads, int hs, Rope rope, float dir) {
#pragma omp parallel for schedule(guided) if ((size_t)N * nheads * hs >= PARALLEL_MIN)
    for (int n = 0; n < N; n++) {
        float pos = (float)(p0 + n % T);
        for (int i = 0; i < hs / 2; i++) {
            float angle = pos * rope_frequency(i, hs, rope), c = cosf(angle), s = dir * sinf(angle);
            for (int h = 0; h < nheads; h++) {
                float *x = qkv + (size_t)n * row + (size_t)h * hs + 2 * i;
                float x0 = x[0], x1 = x[1];
                x[0] = x0 * c - x1 * s;
                x[1] = x0 * s + x1 * c;
            }
        }
    }
}
void rope_forward(float *qkv, int N, int T, int p0, size_t row, int nheads, int hs, Rope rope) {
    rope_rotate(qkv, N, T, p0, row, nheads, hs, rope, 1.0f);
}
void rope_backward(float *dqkv, int N, int T, int p0, size_t row, int nheads, int hs, Rope rope) {
    rope_rotate(dqkv, N, T, p0, row, nheads, hs, rope, -1.0f);
}

#endif
