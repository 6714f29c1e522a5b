// io/quant.h — weights in fewer bits, for evaluation and sampling (--eval-only
// --quantize bf16|int8|int4; doc/quantization.md).
//
// What is quantized: the matrices (wte, wpe, and each layer's qkv, attproj,
// fc, fcproj weights: ParamTensor.is_matrix, 99.9% of GPT-2's parameters).
// The vectors (biases, layernorm weights) stay in bf16: they are few, and a
// layernorm gain rounded to 1/127 of its block's largest would shift every
// activation after it.
//
// int8 and int4: each matrix is cut into blocks of QUANT_BLOCK (64)
// consecutive weights, counted from the matrix's first element (its last
// block may be short). A block keeps one fp32 scale, absmax / 127 (int8) or
// absmax / 7 (int4), and each weight as q = round(w / scale), so
// w is read back as q * scale, off by at most half a step (scale / 2). A
// block of zeros has scale 0 and reads back as zeros. Symmetric (no zero
// point): the weights of a trained GPT are centred on 0.
// bf16: every weight rounded to bf16, no scales.
//
// Storage, in the ledger's own rows (qweights, qscales):
//   codes:   the matrices in layout order: int8 one byte a weight, int4 two
//            weights a byte (the even one in the low half, stored as q + 8),
//            bf16 two bytes a weight
//   vectors: the vectors in layout order, bf16
//   scales:  int8/int4: one fp32 per block, the matrices' blocks in order
// Reading weights back (quant_load) works on any range of the flat layout
// that starts and ends on block boundaries of the matrices in it: an op's
// weight and bias, a chunk of rows of the embedding table, the final
// layernorm. The model asks for exactly those (cpu/weights.h, fetch_params).
#ifndef GPTMEM_QUANT_H
#define GPTMEM_QUANT_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/dtype.h"
#include "memory/ledger.h"
#include "core/sizes.h"

enum { QF_FP32, QF_BF16, QF_INT8, QF_INT4, QF_N };
const char *const quant_name[QF_N] = {"fp32", "bf16", "int8", "int4"};
const int quant_bits[QF_N] = {32, 16, 8, 4};

// One tensor of the flat layout, as far as quantization cares (core/config.h's
// ParamTensor has the same three fields, and the init's).
typedef struct {
    size_t offset, count;
    int is_matrix;
} QuantTensor;

typedef struct {
    int format;                // QF_FP32 (nothing held here), QF_BF16, QF_INT8 or QF_INT4
    QuantTensor *tensors;      // the layout
    int ntensors;
    size_t *first;             // per tensor: its first element among the matrices, or among the vectors
    size_t *first_block;       // per matrix tensor: its first block's scale
    size_t matrices, vectors, blocks;
    void *codes;               // the matrices (ledger: qweights)
    uint16_t *vec;             // the vectors in bf16 (ledger: qweights)
    float *scales;             // int8, int4: a scale per block (ledger: qscales)
} QuantWeights;

size_t quant_nblocks(size_t n) { return (n + QUANT_BLOCK - 1) / QUANT_BLOCK; }

// The largest code: int8 -127..127, int4 -7..7.
int quant_qmax(int format) { return format == QF_INT8 ? 127 : 7; }

// One block of n (<= QUANT_BLOCK) weights to codes q[]: returns the scale.
float block_quantize(const float *w, int n, int qmax, int8_t *q) {
    float absmax = 0.0f;
    for (int i = 0; i < n; i++) absmax = fabsf(w[i]) > absmax ? fabsf(w[i]) : absmax;
    float scale = absmax / qmax;
    for (int i = 0; i < n; i++) {
        float x = scale > 0 ? roundf(w[i] / scale) : 0.0f;
        q[i] = (int8_t)(x > qmax ? qmax : x < -qmax ? -qmax : x);
    }
    return scale;
}

// The bytes of the codes of m matrix weights in a format.
size_t quant_code_bytes(int format, size_t m) {
    if (format == QF_INT4) return (m + 1) / 2;
    return format == QF_INT8 ? m : 2 * m;
}

// The layout: which tensors are matrices, where each one's codes and scales start.
void quant_layout(QuantWeights *q, const QuantTensor *tensors, int ntensors) {
    memset(q, 0, sizeof *q);
    q->ntensors = ntensors;
    q->tensors = malloc(sizeof(QuantTensor) * ntensors);
    q->first = malloc(sizeof(size_t) * ntensors);
    q->first_block = malloc(sizeof(size_t) * ntensors);
    memcpy(q->tensors, tensors, sizeof(QuantTensor) * ntensors);
    for (int i = 0; i < ntensors; i++) {
        const QuantTensor *t = &q->tensors[i];
        q->first_block[i] = q->blocks;
        if (t->is_matrix) {
            q->first[i] = q->matrices;
            q->matrices += t->count;
            q->blocks += quant_nblocks(t->count);
        } else {
            q->first[i] = q->vectors;
            q->vectors += t->count;
        }
    }
}

// The storage for the weights in `format` (bf16, int8, int4); every buffer in the ledger.
void quant_alloc(QuantWeights *q, int format) {
    q->format = format;
    q->codes = mem_alloc(MEM_QWEIGHTS, quant_code_bytes(format, q->matrices), "quantized matrices");
    q->vec = mem_alloc(MEM_QWEIGHTS, 2 * q->vectors, "vectors (bf16)");
    if (format != QF_BF16) q->scales = mem_alloc(MEM_QSCALES, 4 * q->blocks, "quantization scales");
}

void quant_free(QuantWeights *q) {
    mem_free(q->codes);
    mem_free(q->vec);
    mem_free(q->scales);
    free(q->tensors);
    free(q->first);
    free(q->first_block);
}

// Store or read one block: codes k .. k+n-1 of the matrices, scale s.
void put_codes(QuantWeights *q, size_t k, const int8_t *codes, int n) {
    for (int i = 0; i < n; i++, k++) {
        if (q->format == QF_INT8) { ((int8_t *)q->codes)[k] = codes[i]; continue; }
        uint8_t *byte = (uint8_t *)q->codes + k / 2, nib = (uint8_t)(codes[i] + 8);
        *byte = k % 2 ? (uint8_t)((*byte & 0x0F) | nib << 4) : (uint8_t)((*byte & 0xF0) | nib);
    }
}

int get_code(const QuantWeights *q, size_t k) {
    if (q->format == QF_INT8) return ((const int8_t *)q->codes)[k];
    uint8_t byte = ((const uint8_t *)q->codes)[k / 2];
    return (k % 2 ? byte >> 4 : byte & 0x0F) - 8;
}

// The part [a, b) of tensor i: blocks must start at a (the tensor's start or a
// block boundary) and end at b (a block boundary or the tensor's end).
int quant_range_ok(const QuantTensor *t, size_t a, size_t b) {
    return (a - t->offset) % QUANT_BLOCK == 0 && ((b - t->offset) % QUANT_BLOCK == 0 || b == t->offset + t->count);
}

// The part [a, b) of tensor t that lies in [lo, hi); 0 if there is none.
int tensor_part(const QuantTensor *t, size_t lo, size_t hi, size_t *a, size_t *b) {
    *a = t->offset > lo ? t->offset : lo;
    *b = t->offset + t->count < hi ? t->offset + t->count : hi;
    return *a < *b;
}

// Quantize the flat range [lo, lo + n) of the weights, src[0] = parameter lo.
// Returns 0, or the flat index + 1 of the first weight that is inf or nan
// (nothing sensible can be stored for it; the caller refuses the file).
size_t quant_store(QuantWeights *q, const float *src, size_t lo, size_t n) {
    for (size_t j = 0; j < n; j++)
        if (!isfinite(src[j])) return lo + j + 1;
    for (int i = 0; i < q->ntensors; i++) {
        const QuantTensor *t = &q->tensors[i];
        size_t a, b;
        if (!tensor_part(t, lo, lo + n, &a, &b)) continue;
        const float *w = src + (a - lo);
        size_t k = q->first[i] + (a - t->offset);
        if (!t->is_matrix) {
            for (size_t j = 0; j < b - a; j++) q->vec[k + j] = bf16_from_float(w[j]);
            continue;
        }
        if (q->format == QF_BF16) {
            for (size_t j = 0; j < b - a; j++) ((uint16_t *)q->codes)[k + j] = bf16_from_float(w[j]);
            continue;
        }
        if (!quant_range_ok(t, a, b)) ledger_bug("quantized range not on block boundaries", "quant_store");
        size_t blk = q->first_block[i] + (a - t->offset) / QUANT_BLOCK;
        for (size_t at = 0; at < b - a; at += QUANT_BLOCK, blk++) {
            int len = (int)(b - a - at < QUANT_BLOCK ? b - a - at : QUANT_BLOCK);
            int8_t codes[QUANT_BLOCK];
            q->scales[blk] = block_quantize(w + at, len, quant_qmax(q->format), codes);
            put_codes(q, k + at, codes, len);
        }
    }
    return 0;
}

// Read the flat range [lo, lo + n) back as fp32 into dst (dst[0] = parameter lo).
void quant_load(const QuantWeights *q, float *dst, size_t lo, size_t n) {
    for (int i = 0; i < q->ntensors; i++) {
        const QuantTensor *t = &q->tensors[i];
        size_t a, b;
        if (!tensor_part(t, lo, lo + n, &a, &b)) continue;
        float *w = dst + (a - lo);
        size_t k = q->first[i] + (a - t->offset);
        if (!t->is_matrix) {
            for (size_t j = 0; j < b - a; j++) w[j] = bf16_to_float(q->vec[k + j]);
            continue;
        }
        if (q->format == QF_BF16) {
            for (size_t j = 0; j < b - a; j++) w[j] = bf16_to_float(((const uint16_t *)q->codes)[k + j]);
            continue;
        }
        if (!quant_range_ok(t, a, b)) ledger_bug("quantized range not on block boundaries", "quant_load");
        size_t blk0 = q->first_block[i] + (a - t->offset) / QUANT_BLOCK;
        for (size_t j = 0; j < b - a; j++) w[j] = (float)get_code(q, k + j) * q->scales[blk0 + j / QUANT_BLOCK];
    }
}

// The same numbers without the storage: round the fp32 weights x (x[0] =
// parameter lo) through `format` in place, block by block as quant_store
// would, so that they equal what quant_load would give. The eval run's
// comparison rows use it on weights read from the state file.
void quant_round_trip(const QuantWeights *q, int format, float *x, size_t lo, size_t n) {
    if (format == QF_FP32) return;
    for (int i = 0; i < q->ntensors; i++) {
        const QuantTensor *t = &q->tensors[i];
        size_t a, b;
        if (!tensor_part(t, lo, lo + n, &a, &b)) continue;
        float *w = x + (a - lo);
        if (format == QF_BF16 || !t->is_matrix) {
            for (size_t j = 0; j < b - a; j++) w[j] = bf16_to_float(bf16_from_float(w[j]));
            continue;
        }
        if (!quant_range_ok(t, a, b)) ledger_bug("quantized range not on block boundaries", "quant_round_trip");
        for (size_t at = 0; at < b - a; at += QUANT_BLOCK) {
            int len = (int)(b - a - at < QUANT_BLOCK ? b - a - at : QUANT_BLOCK);
            int8_t codes[QUANT_BLOCK];
            float scale = block_quantize(w + at, len, quant_qmax(format), codes);
            for (int j = 0; j < len; j++) w[at + j] = (float)codes[j] * scale;
        }
    }
}

#endif
