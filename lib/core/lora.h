// core/lora.h — LoRA's adapters (Hu et al. 2021, "LoRA: Low-Rank Adaptation",
// as Hugging Face's PEFT builds them): which linear maps get one, their layout
// in one flat array, their count and their first values. No device, no allocator:
// the CPU model (cpu/lora.h), the predictor and the dry run read it.
//
// A targeted map W (out x in) of a layer keeps W frozen and gets two trained
// matrices, A (R x in) and B (out x R); its output becomes
//     y = x W^T + s (x A^T) B^T,        s = alpha / R
// (PEFT's LoraConfig: r, lora_alpha 8 by default, scaling = lora_alpha / r).
// A starts as PEFT's does, nn.init.kaiming_uniform_(a = sqrt(5)): uniform in
// +-1/sqrt(in); B starts at zero, so the model starts as the base model, bit
// for bit. Everything else (the norms, the embedding, the head) is frozen too.
//
// The maps are the linear layers of the Hugging Face model, each a band of
// output rows of one of gptmem's fused ops (core/config.h):
//   GPT-2: qkv (c_attn, all of qkv), proj (attn.c_proj), fc (c_fc), fcproj (mlp.c_proj)
//   Llama: q, k, v (q_proj, k_proj, v_proj: qkv's rows H hs, KVH hs, KVH hs), o (o_proj),
//          up, gate (up_proj, gate_proj: fc's first F rows, then its last F), down (down_proj)
// Layout: layer by layer; in a layer the targeted maps in that order, each A then B.
#ifndef GPTMEM_LORA_H
#define GPTMEM_LORA_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/config.h"
#include "core/rng.h"

enum { LM_QKV, LM_PROJ, LM_FC, LM_FCPROJ, LM_Q, LM_K, LM_V, LM_O, LM_UP, LM_GATE, LM_DOWN, LORA_MAPS };
const char *const lora_map_names[LORA_MAPS] = {"qkv", "proj", "fc", "fcproj", "q", "k", "v", "o", "up", "gate", "down"};
// Their modules' names in a Hugging Face model (PEFT's target_modules)
const char *const lora_module_names[LORA_MAPS] = {"attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj",
                                                  "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                                  "self_attn.o_proj", "mlp.up_proj", "mlp.gate_proj", "mlp.down_proj"};
#define LORA_ALPHA_DEFAULT 8.0f  // PEFT's LoraConfig.lora_alpha

typedef struct {
    int rank;          // R (0: no LoRA, every weight trained)
    float alpha;       // the scale is alpha / R
    unsigned targets;  // 1 << LM_*: the maps that get an adapter
} LoraConfig;

// One map: rows [row0, row0 + rows) of op `op`'s output, from its `in` inputs.
typedef struct {
    int op, row0, rows, in;
} LoraMap;

// The maps of a config's architecture: [first, first + 4) GPT-2's, [first, first + 7) Llama's.
int lora_first_map(const GPTConfig *c) { return is_llama(c) ? LM_Q : LM_QKV; }
int lora_map_end(const GPTConfig *c) { return is_llama(c) ? LORA_MAPS : LM_Q; }
unsigned lora_all_maps(const GPTConfig *c) { return ((1u << lora_map_end(c)) - 1) & ~((1u << lora_first_map(c)) - 1); }

LoraMap lora_map(const GPTConfig *c, int k) {
    int C = c->channels, hs = head_size(c), q = c->heads * hs, kv = cfg_kv_heads(c) * hs, F = cfg_ffn(c);
    switch (k) {
    case LM_QKV: return (LoraMap){OP_QKV, 0, (int)qkv_width(c), C};
    case LM_PROJ: case LM_O: return (LoraMap){OP_ATTPROJ, 0, C, q};
    case LM_FC: return (LoraMap){OP_FC, 0, F, C};
    case LM_FCPROJ: case LM_DOWN: return (LoraMap){OP_FCPROJ, 0, C, F};
    case LM_Q: return (LoraMap){OP_QKV, 0, q, C};
    case LM_K: return (LoraMap){OP_QKV, q, kv, C};
    case LM_V: return (LoraMap){OP_QKV, q + kv, kv, C};
    case LM_UP: return (LoraMap){OP_FC, 0, F, C};
    default: return (LoraMap){OP_FC, F, F, C};  // LM_GATE
    }
}

int lora_targets(const LoraConfig *a, int k) { return a->rank > 0 && (a->targets >> k & 1); }
float lora_scale(const LoraConfig *a) { return a->alpha / a->rank; }

// The linear ops of a frozen model that no adapter reaches (1 << OP_*; 0 without --lora): nothing in
// the backward reads their inputs (core/saved.h saved_unread).
unsigned lora_bare_ops(const GPTConfig *c, const LoraConfig *a) {
    if (!a->rank) return 0;
    unsigned bare = 1u << OP_QKV | 1u << OP_ATTPROJ | 1u << OP_FC | 1u << OP_FCPROJ;
    for (int k = lora_first_map(c); k < lora_map_end(c); k++)
        if (lora_targets(a, k)) bare &= ~(1u << lora_map(c, k).op);
    return bare;
}

// A map's adapter: R (in + rows) parameters, A's then B's.
size_t lora_map_count(const GPTConfig *c, const LoraConfig *a, int k) {
    LoraMap mp = lora_map(c, k);
    return (size_t)a->rank * ((size_t)mp.in + mp.rows);
}

size_t lora_layer_count(const GPTConfig *c, const LoraConfig *a) {
    size_t n = 0;
    for (int k = 0; k < LORA_MAPS; k++)
        if (lora_targets(a, k)) n += lora_map_count(c, a, k);
    return n;
}

// All of them: what LoRA trains (PEFT's "trainable params").
size_t lora_param_count(const GPTConfig *c, const LoraConfig *a) { return (size_t)c->layers * lora_layer_count(c, a); }

// The model's parameters as PEFT counts them (its "all params" less the adapters): the real
// vocabulary's rows, not the padding gptmem adds to a multiple of 64.
size_t lora_base_param_count(const GPTConfig *c) {
    return param_count(c) - (size_t)(padded_vocab(c) - c->vocab) * c->channels * (1 + (c->untied != 0));
}

// FLOPs a token with the base frozen: 4 a weight (the forward's 2, the input gradient's 2; no weight
// gradient), and a map's adapter 8 R in + 6 R out (the forward's 2 R (in + out); the backward's
// x A^T again, dB, d(x A^T), dA and d(x)).
double lora_flops_per_token(const GPTConfig *c, const LoraConfig *a) {
    double f = 0;
    for (int k = 0; k < LORA_MAPS; k++)
        if (lora_targets(a, k)) f += (double)a->rank * (8.0 * lora_map(c, k).in + 6.0 * lora_map(c, k).rows);
    return f * c->layers;
}

// The targeted maps in words: "q,v".
const char *lora_targets_words(const GPTConfig *c, const LoraConfig *a, char *out, size_t len) {
    size_t n = 0;
    out[0] = 0;
    for (int k = lora_first_map(c); k < lora_map_end(c) && n < len; k++)
        if (lora_targets(a, k)) n += (size_t)snprintf(out + n, len - n, "%s%s", n ? "," : "", lora_map_names[k]);
    return out;
}

// Where layer l's adapter of map k starts (its A; B follows after R in).
size_t lora_offset(const GPTConfig *c, const LoraConfig *a, int l, int k) {
    size_t off = (size_t)l * lora_layer_count(c, a);
    for (int j = 0; j < k; j++)
        if (lora_targets(a, j)) off += lora_map_count(c, a, j);
    return off;
}

// The adapters as tensors for AdamW (core/config.h ParamTensor): every A and B a matrix, so
// weight decay reaches them all (PEFT trains no bias). `out` holds 2 L maps; returns the count.
int lora_tensors(const GPTConfig *c, const LoraConfig *a, ParamTensor *out) {
    int n = 0;
    for (int l = 0; l < c->layers; l++)
        for (int k = 0; k < LORA_MAPS; k++) {
            if (!lora_targets(a, k)) continue;
            LoraMap mp = lora_map(c, k);
            size_t at = lora_offset(c, a, l, k), na = (size_t)a->rank * mp.in;
            out[n++] = (ParamTensor){at, na, 1, 0.0f, 0};
            out[n++] = (ParamTensor){at + na, (size_t)a->rank * mp.rows, 1, 0.0f, 0};
        }
    return n;
}
int lora_tensor_count(const GPTConfig *c, const LoraConfig *a) {
    int maps = 0;
    for (int k = 0; k < LORA_MAPS; k++) maps += lora_targets(a, k);
    return 2 * maps * c->layers;
}
// ... in a table of their own (an optimizer's, which frees it)
ParamTensor *lora_tensors_alloc(const GPTConfig *c, const LoraConfig *a) {
    ParamTensor *t = malloc(sizeof(ParamTensor) * lora_tensor_count(c, a));
    lora_tensors(c, a, t);
    return t;
}

// Layer l's adapters of op `op` (its maps' are consecutive in the layout): [*lo, *hi), empty when no map of
// the op is targeted. What ZeRO moves a piece at a time over the adapters (stage 2 reduce-scatters an op's
// gradients when its backward is done, stage 3 gathers an op's adapters before it runs).
void lora_op_range(const GPTConfig *c, const LoraConfig *a, int l, int op, size_t *lo, size_t *hi) {
    *lo = *hi = 0;
    for (int k = lora_first_map(c); k < lora_map_end(c); k++) {
        if (!lora_targets(a, k) || lora_map(c, k).op != op) continue;
        if (*hi == *lo) *lo = lora_offset(c, a, l, k);
        *hi = lora_offset(c, a, l, k) + lora_map_count(c, a, k);
    }
}

// The most adapters one op has (its piece; the buffers stages 2 and 3 move them through).
size_t lora_op_most(const GPTConfig *c, const LoraConfig *a) {
    size_t most = 0, lo, hi;
    for (int op = 0; op < LAYER_OPS; op++) {
        lora_op_range(c, a, 0, op, &lo, &hi);
        if (hi - lo > most) most = hi - lo;
    }
    return most;
}

// The adapters' first values in layout order, a stretch at a time: each A uniform in +-1/sqrt(in), drawn
// from a stream of its own (the base weights draw the same with and without --lora), each B zero.
#define LORA_SEED_STREAM 0x4C6F5241ULL  // "LoRA"
typedef struct {
    uint64_t rng;
    size_t at;  // the flat index of the next value
} LoraDraw;
LoraDraw lora_draw_start(uint64_t seed) {
    LoraDraw d = {rng_seed(seed ^ LORA_SEED_STREAM), 0};
    return d;
}

// The next n values into w (NULL: drawn and dropped).
void lora_draw(LoraDraw *d, float *w, size_t n, const GPTConfig *c, const LoraConfig *a) {
    size_t per = lora_layer_count(c, a), end = d->at + n;
    while (d->at < end) {
        size_t at = d->at / per * per, count = 0;  // the map holding d->at starts at `at`
        int k = 0;
        for (; k < LORA_MAPS; k++) {
            if (!lora_targets(a, k)) continue;
            if (d->at < at + (count = lora_map_count(c, a, k))) break;
            at += count;
        }
        LoraMap mp = lora_map(c, k);
        size_t na = (size_t)a->rank * mp.in, i = d->at - at, stop = end - at < count ? end - at : count;
        float bound = 1.0f / sqrtf((float)mp.in);
        for (; i < stop; i++, d->at++) {
            float v = i < na ? (2.0f * rng_uniform(&d->rng) - 1.0f) * bound : 0.0f;
            if (w) *w++ = v;
        }
    }
}

// The adapters' values [at, at + n) of the layout, to or from wherever a run holds them (host memory, a GPU's):
// `get` copies them out into dst, `put` copies src in.
typedef void (*LoraGet)(void *ctx, size_t at, float *dst, size_t n);
typedef void (*LoraPut)(void *ctx, size_t at, const float *src, size_t n);

// ... from and into an array in host memory (ctx: its element 0).
void lora_get_host(void *ctx, size_t at, float *dst, size_t n) { memcpy(dst, (const float *)ctx + at, n * sizeof(float)); }
void lora_put_host(void *ctx, size_t at, const float *src, size_t n) { memcpy((float *)ctx + at, src, n * sizeof(float)); }

// PEFT's merge_and_unload on n weights of the flat layout from `at`, dst holding the frozen ones in fp32: on a
// targeted map's band W[row][col] += s sum_r B[row - row0][r] A[r][col], each map's A and B through `get`.
void lora_merge_add(const GPTConfig *c, const LoraConfig *a, float *dst, size_t at, size_t n, LoraGet get, void *ctx) {
    int R = a->rank;
    float s = lora_scale(a);
    for (int l = 0; l < c->layers; l++)
        for (int k = lora_first_map(c); k < lora_map_end(c); k++) {
            LoraMap mp = lora_map(c, k);
            if (!lora_targets(a, k)) continue;
            size_t w0 = op_param_offset(c, l, mp.op) + (size_t)mp.row0 * mp.in, w1 = w0 + (size_t)mp.rows * mp.in;
            size_t lo = at > w0 ? at : w0, hi = at + n < w1 ? at + n : w1;
            if (lo >= hi) continue;
            float *A = malloc(sizeof(float) * lora_map_count(c, a, k)), *B = A + (size_t)R * mp.in;  // (the map's)
            get(ctx, lora_offset(c, a, l, k), A, lora_map_count(c, a, k));
            for (size_t i = lo; i < hi; i++) {
                size_t row = (i - w0) / mp.in, col = (i - w0) % mp.in;
                float d = 0;
                for (int r = 0; r < R; r++) d += B[row * R + r] * A[(size_t)r * mp.in + col];
                dst[i - at] += s * d;
            }
            free(A);
        }
}

// The first values of the adapters [lo, hi) into w[0 .. hi - lo): every rank draws the whole sequence up
// to hi and keeps its part (ZeRO-3: its shard).
void lora_init(float *w, size_t lo, size_t hi, const GPTConfig *c, const LoraConfig *a, uint64_t seed) {
    LoraDraw d = lora_draw_start(seed);
    lora_draw(&d, NULL, lo, c, a);
    lora_draw(&d, w, hi - lo, c, a);
}

#endif
