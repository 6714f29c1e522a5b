// memory/predict_infer.h — the predicted half: the parameter count, and the predictor's part for
// serving (--dry-run --infer, --eval-only --quantize): what the weights take in each number
// format, and the KV cache, in closed form from the shape.
#ifndef GPTMEM_PREDICT_INFER_H
#define GPTMEM_PREDICT_INFER_H

#include <stddef.h>
#include "core/config.h"
#include "core/dtype.h"
#include "core/settings.h"
#include "core/sizes.h"

// For serving, only the weights and the attention's cached keys and values
// are held for long. The 2-D weights (wte, wpe, and per layer qkv 3C^2,
// attproj C^2, fc 4C^2, fcproj 4C^2) can be stored as int8 or int4: each block
// of QUANT_BLOCK consecutive weights of a matrix shares one fp32 scale
// (absmax / 127, or / 7). The vectors (biases, layernorms: 13C a layer + 2C)
// stay in 16 bits. The KV cache: K and V, (B, T, C) each, per layer, kv_elem
// bytes an element: the dtype the activations are stored in (what a sample's
// cache holds on the CPU, cpu/kvcache.h). Llama: the matrices wte (and an
// untied head), per layer qkv (H + 2 KVH) hs C, attproj C^2, fc 2FC, fcproj FC;
// the vectors the norms' 2C a layer + C; the cache's rows KVH hs wide. (--tp: a rank's share, with
// A = H hs and F its widths and Vp its band: GPT-2's qkv 3AC, attproj CA, fc and fcproj FC each.)
typedef struct {
    size_t matrices, vectors, scales;  // parameters in matrices, in vectors; fp32 scales of the block formats
    size_t kv_cache;                   // bytes: 2 L B T C x kv_elem
} InferenceBytes;

// The parameter count P, in closed form (core/config.h's param_count adds up the layout;
// tests/cpu_checks/model.h holds the two equal for every preset):
// GPT-2: P = Vp*C + maxT*C + L*(12C^2 + 13C) + 2C
//   12C^2 per layer: qkv 3C^2 + attproj C^2 + fc 4C^2 + fcproj 4C^2
//   13C per layer:   ln1 2C + qkv bias 3C + attproj bias C + ln2 2C + fc bias 4C + fcproj bias C
//   2C:              the final layernorm
// Llama: P = Vp*C (x2 with an untied head) + L*(C^2 + 2 KVH hs C + C^2 + 3 F C + 2C) + C
//   per layer: q C^2, k and v 2 KVH hs C, attproj C^2, up, gate and down 3 F C, two RMSNorms 2C; no biases
//   C:         the final RMSNorm
size_t predict_param_count(const GPTConfig *c) {
    size_t L = c->layers, C = c->channels, Vp = padded_vocab(c), maxT = c->max_seq, F = cfg_ffn(c), A = attn_width(c);
    // GPT-2: 12 C^2 + 13 C a layer; with A = H hs and F (C and 4C but for --tp's share): 4AC + 2FC + 3A + F + 6C
    if (!is_llama(c)) return Vp * C + maxT * C + L * (4 * A * C + 2 * F * C + 3 * A + F + 6 * C) + 2 * C;
    size_t kvw = kv_width(c);
    return Vp * C * (1 + (c->untied != 0)) + L * (A * C + 2 * kvw * C + C * A + 3 * F * C + 2 * C) + C;
}

size_t quant_blocks(size_t n) { return (n + QUANT_BLOCK - 1) / QUANT_BLOCK; }

InferenceBytes predict_inference(const GPTConfig *cfg, int B, int T, int kv_elem) {
    InferenceBytes r;
    size_t L = cfg->layers, c = cfg->channels, Vp = padded_vocab(cfg), maxT = cfg->max_seq;
    size_t A = attn_width(cfg), F = cfg_ffn(cfg), kvw = kv_width(cfg);  // (C, 4C, C but for --tp's share)
    if (is_llama(cfg)) {
        size_t heads = cfg->untied ? 2 : 1;
        r.matrices = heads * Vp * c + L * ((A + 2 * kvw) * c + c * A + 3 * F * c);
        r.vectors = L * 2 * c + c;
        r.scales = heads * quant_blocks(Vp * c) + L * (quant_blocks((A + 2 * kvw) * c) + quant_blocks(c * A) +
                                                       quant_blocks(2 * F * c) + quant_blocks(F * c));
        r.kv_cache = 2 * L * B * T * kvw * kv_elem;
        return r;
    }
    r.matrices = Vp * c + maxT * c + L * (3 * A * c + c * A + 2 * F * c);  // 12 C^2 a layer
    r.vectors = L * (6 * c + 3 * A + F) + 2 * c;                            // 13 C a layer
    r.scales = quant_blocks(Vp * c) + quant_blocks(maxT * c) +
               L * (quant_blocks(3 * A * c) + quant_blocks(c * A) + 2 * quant_blocks(F * c));
    r.kv_cache = 2 * L * B * T * kvw * kv_elem;
    return r;
}

// Bytes of the weights in a format: bits 32 or 16 (every parameter), or 8, 4
// (the matrices, plus their fp32 scales; the vectors in 16 bits).
// (int4: two weights a byte, an odd count rounded up to a whole byte.)
size_t inference_weight_bytes(const InferenceBytes *r, int bits) {
    if (bits >= 16) return (r->matrices + r->vectors) * (bits / 8);
    return (r->matrices * bits + 7) / 8 + 4 * r->scales + 2 * r->vectors;
}

// Sampling (app/sample.h: the model's forward with the KV cache, cpu/kvcache.h
// and gpu/kvcache.h). The cache holds every layer's keys and values of the
// positions the sample runs, in the activations' dtype: 2 L P C e bytes (with
// grouped-query attention C is the key-value heads' KVH hs), P the
// context's T = seq_len, or fewer when the start (prompt_len tokens) and the
// sample are shorter: prompt_len + sample_len - 1 (the last token is drawn,
// never run). (--dry-run --infer's row, for batch 1 and a length of P.) A
// sample's largest forward is its first, over the start's R = prompt_len
// tokens, unless the context fills (prompt_len + sample_len - 1 > T): then
// each new token shifts the learned positions and the whole window of R = T
// tokens goes through again. sample_forward gives that forward's settings
// (batch 1 x R, with `fwd`'s dtype and flags).
Settings sample_forward(const Settings *s, const Settings *fwd) {
    Settings one = *fwd;
    one.batch = 1;
    one.cfg.seq_split = 0;  // (--sp: a sample's forward holds every row)
    one.seq_len = s->prompt_len + s->sample_len - 1 > s->seq_len ? s->seq_len : s->prompt_len;
    return one;
}

size_t sample_kv_bytes(const Settings *s, int dtype) {
    size_t P = s->prompt_len + s->sample_len - 1 < s->seq_len ? s->prompt_len + s->sample_len - 1 : s->seq_len;
    size_t width = kv_width(&s->cfg);  // C, or Llama's KVH hs
    return 2 * (size_t)s->cfg.layers * P * width * dtype_size(dtype);
}

#endif
