// memory/predict_infer.h — the predicted half: the predictor's part for serving (--dry-run --infer,
// --eval-only --quantize): what the weights take in each number format, and the
// KV cache, in closed form from the shape.
#ifndef GPTMEM_PREDICT_INFER_H
#define GPTMEM_PREDICT_INFER_H

#include <stddef.h>
#include "core/sizes.h"

// For serving, only the weights and the attention's cached keys and values
// are held for long. The 2-D weights (wte, wpe, and per layer qkv 3C^2,
// attproj C^2, fc 4C^2, fcproj 4C^2) can be stored as int8 or int4: each block
// of QUANT_BLOCK consecutive weights of a matrix shares one fp32 scale
// (absmax / 127, or / 7). The vectors (biases, layernorms: 13C a layer + 2C)
// stay in 16 bits. The KV cache: K and V, (B, T, C) each, per layer, kv_elem
// bytes an element: the dtype the activations are stored in (what a sample's
// cache holds on the CPU, cpu/kvcache.h).
typedef struct {
    size_t matrices, vectors, scales;  // parameters in matrices, in vectors; fp32 scales of the block formats
    size_t kv_cache;                   // bytes: 2 L B T C x kv_elem
} InferenceBytes;

size_t quant_blocks(size_t n) { return (n + QUANT_BLOCK - 1) / QUANT_BLOCK; }

InferenceBytes predict_inference(int L, int C, int Vp, int maxT, int B, int T, int kv_elem) {
    InferenceBytes r;
    size_t c = C, c2 = c * c;
    r.matrices = (size_t)Vp * c + (size_t)maxT * c + (size_t)L * 12 * c2;
    r.vectors = (size_t)L * 13 * c + 2 * c;
    r.scales = quant_blocks((size_t)Vp * c) + quant_blocks((size_t)maxT * c) +
               (size_t)L * (quant_blocks(3 * c2) + quant_blocks(c2) + 2 * quant_blocks(4 * c2));
    r.kv_cache = 2 * (size_t)L * B * T * c * kv_elem;
    return r;
}

// Bytes of the weights in a format: bits 32 or 16 (every parameter), or 8, 4
// (the matrices, plus their fp32 scales; the vectors in 16 bits).
// (int4: two weights a byte, an odd count rounded up to a whole byte.)
size_t inference_weight_bytes(const InferenceBytes *r, int bits) {
    if (bits >= 16) return (r->matrices + r->vectors) * (bits / 8);
    return (r->matrices * bits + 7) / 8 + 4 * r->scales + 2 * r->vectors;
}

#endif
