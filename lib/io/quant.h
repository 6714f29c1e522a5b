// io/quant.h — weights in fewer bits, for evaluation and sampling (--eval-only
// --quantize bf16|int8|int4; doc/quantization.md), and --lora's frozen base
// (--base-dtype bf16|fp16|int8|nf4: QLoRA's NF4; doc/lora.md).
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
// nf4 (QLoRA, Dettmers et al. 2023, as bitsandbytes' quantize_4bit with quant_type "nf4"): blocks of 64
// as above, the scale the block's absmax, and each weight the nearest of the 16 NormalFloat values
// NF4_CODE (the quantiles of a normal distribution, scaled to [-1, 1], with an exact 0) to w / absmax,
// which bitsandbytes computes as w * (1 / absmax) and rounds by comparing with the midpoints of the
// code (its dQuantizeNF4); read back as NF4_CODE[q] * absmax. A block of zeros reads back as zeros.
// --double-quant (QLoRA's double quantization, as bitsandbytes' quantize_4bit with compress_statistics):
// the nf4 scales themselves in 8 bits. Of each matrix tensor, the mean of its blocks' absmax is kept
// (an fp32 offset); each absmax less the offset goes, in groups of DQ_GROUP (256) blocks, through
// bitsandbytes' quantize_blockwise: the group's largest |value| kept in fp32, each value the index of the
// nearest of the 256 values of its signed dynamic map (DQ_CODE, create_dynamic_map) to value * (1 /
// largest), clamped to [-1, 1] (a tie to the lower index). A block's absmax is read back as
// DQ_CODE[index] * largest + offset, each step rounded to fp32. 8 bits a block and 32 a group:
// 0.127 bits a weight for the scales in place of 0.5. The tensors are Hugging Face's (a Llama's q_proj,
// k_proj, v_proj ...: QuantTensor), each block taken in the order of the Hugging Face tensor's rows.
// fp16: every weight rounded to fp16, no scales.
// The vectors are held in bf16 (--eval-only) or, for a frozen base (--lora), in the compute dtype
// (fp32): quant_layout's vec_dtype. Which tensors are matrices is the caller's: --eval-only quantizes
// every matrix; --lora, as bitsandbytes' default for a causal LM, only the blocks' linear maps (the
// embedding and the head stay with the vectors).
//
// Storage, in the ledger's own rows (qweights, qscales):
//   codes:   the matrices in layout order: int8 one byte a weight, int4 two
//            weights a byte (the even one in the low half, stored as q + 8),
//            nf4 two a byte (the even one in the high half, as bitsandbytes packs them: the
//            code's index 0..15), bf16 and fp16 two bytes a weight
//   vectors: the vectors in layout order, bf16 (or fp32: vec_dtype)
//   scales:  int8/int4/nf4: one fp32 per block, the matrices' blocks in order; with --double-quant
//            one byte per block, an fp32 per group of DQ_GROUP blocks of a tensor and one per tensor,
//            and while the weights are stored, the absmax of one tensor's blocks (fp32, scratch)
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
#include "core/config.h"
#include "core/dtype.h"
#include "core/lora.h"
#include "memory/ledger.h"
#include "core/sizes.h"
#include "io/quant_codes.h"

// One tensor of the flat layout, as far as quantization cares (core/config.h's
// ParamTensor has the same first three fields, and the init's). --double-quant walks a matrix's blocks in
// Hugging Face's row order: a Llama's q or k holds its rows in gptmem's order (core/config.h hf_half_row),
// `halves` its head size (else 0), `row` its row length (a multiple of QUANT_BLOCK for the order to apply).
typedef struct {
    size_t offset, count;
    int is_matrix;
    int row, halves;
} QuantTensor;

typedef struct QuantWeights {
    int format;                // QF_FP32 (nothing held here), QF_BF16, QF_INT8, QF_INT4, QF_NF4 or QF_FP16
    int vec_dtype;             // the vectors': DT_BF16 (quant_layout's), or DT_FP32
    QuantTensor *tensors;      // the layout
    int ntensors;
    size_t *first;             // per tensor: its first element among the matrices, or among the vectors
    size_t *first_block;       // per matrix tensor: its first block's scale
    size_t matrices, vectors, blocks;
    void *codes;               // the matrices (ledger: qweights)
    void *vec;                 // the vectors in vec_dtype (ledger: qweights)
    float *scales;             // int8, int4, nf4: a scale per block (ledger: qscales)
    int double_quant;          // --double-quant (nf4): the scales in 8 bits, below (and no `scales`)
    size_t *first_group;       // per matrix tensor: its first second-level scale
    size_t *matrix;            // per matrix tensor: its index among the matrices (its offset's)
    size_t groups, nmatrices, most_blocks;
    uint8_t *qscales;          // a byte per block: its absmax as an index into DQ_CODE (ledger: qscales)
    float *scales2;            // an fp32 per DQ_GROUP blocks of a tensor (ledger: qscales)
    float *offsets;            // an fp32 per matrix tensor: its blocks' mean absmax (ledger: qscales)
    float *pending;            // the absmax of the blocks of the tensor being stored (ledger: scratch)
} QuantWeights;

size_t quant_nblocks(size_t n) { return (n + QUANT_BLOCK - 1) / QUANT_BLOCK; }

// A format that keeps a scale per block: int8, int4, nf4 (bf16 and fp16 round each weight alone).
int quant_scaled(int format) { return format == QF_INT8 || format == QF_INT4 || format == QF_NF4; }

// The bytes of the codes of m matrix weights in a format.
size_t quant_code_bytes(int format, size_t m) {
    if (format == QF_INT4 || format == QF_NF4) return (m + 1) / 2;
    return format == QF_INT8 ? m : 2 * m;
}

// The layout: which tensors are matrices, where each one's codes and scales start.
void quant_layout(QuantWeights *q, const QuantTensor *tensors, int ntensors) {
    memset(q, 0, sizeof *q);
    q->vec_dtype = DT_BF16;
    q->ntensors = ntensors;
    q->tensors = malloc(sizeof(QuantTensor) * ntensors);
    q->first = malloc(sizeof(size_t) * ntensors);
    q->first_block = malloc(sizeof(size_t) * ntensors);
    q->first_group = malloc(sizeof(size_t) * ntensors);
    q->matrix = malloc(sizeof(size_t) * ntensors);
    memcpy(q->tensors, tensors, sizeof(QuantTensor) * ntensors);
    for (int i = 0; i < ntensors; i++) {
        const QuantTensor *t = &q->tensors[i];
        q->first_block[i] = q->blocks;
        q->first_group[i] = q->groups;
        q->matrix[i] = q->nmatrices;
        if (t->is_matrix) {
            size_t nb = quant_nblocks(t->count);
            q->first[i] = q->matrices;
            q->matrices += t->count;
            q->blocks += nb;
            q->groups += (nb + DQ_GROUP - 1) / DQ_GROUP;
            q->nmatrices++;
            q->most_blocks = nb > q->most_blocks ? nb : q->most_blocks;
        } else {
            q->first[i] = q->vectors;
            q->vectors += t->count;
        }
    }
}

// --lora --base-dtype's layout (cpu/gpt.h, gpu/gpt.h): the blocks' linear maps are the matrices, each
// the Hugging Face tensor it is (core/lora.h lora_map: a Llama's fused qkv as q_proj, k_proj and
// v_proj, its fc as up_proj and gate_proj), as bitsandbytes quantizes each nn.Linear; everything else
// (the embedding, the head, the norms, the biases) a vector, held in the compute dtype `vec_dtype`.
void lora_base_layout(QuantWeights *q, const GPTConfig *c, int vec_dtype, int double_quant) {
    int n = param_tensor_count(c), nq = 0;
    ParamTensor *pt = malloc(sizeof(ParamTensor) * n);
    QuantTensor *qt = malloc(sizeof(QuantTensor) * (n + 3 * (size_t)c->layers));  // qkv in 3, fc in 2
    param_tensors(c, pt);
    size_t lo = layer_offset(c, 0), hi = layer_offset(c, c->layers);  // the blocks: one range of the layout
    for (int i = 0; i < n; i++) {
        if (!pt[i].is_matrix || pt[i].offset < lo || pt[i].offset >= hi) {
            qt[nq++] = (QuantTensor){pt[i].offset, pt[i].count, 0, 0, 0};
            continue;
        }
        int l = (int)((pt[i].offset - lo) / layer_param_count(c));
        for (int k = lora_first_map(c); k < lora_map_end(c); k++) {
            LoraMap mp = lora_map(c, k);
            if (op_param_offset(c, l, mp.op) != pt[i].offset) continue;
            qt[nq++] = (QuantTensor){pt[i].offset + (size_t)mp.row0 * mp.in, (size_t)mp.rows * mp.in, 1, mp.in,
                                     k == LM_Q || k == LM_K ? head_size(c) : 0};
        }
    }
    quant_layout(q, qt, nq);
    q->vec_dtype = vec_dtype;
    q->double_quant = double_quant;
    free(pt), free(qt);
}

// The tensor that holds parameter x (the last that starts at or before it).
int quant_tensor_of(const QuantWeights *q, size_t x) {
    int lo = 0, hi = q->ntensors - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (q->tensors[mid].offset <= x) lo = mid; else hi = mid - 1;
    }
    return lo;
}

// The ledger's name for the vectors' buffer.
const char *quant_vec_name(const QuantWeights *q) {
    return q->vec_dtype == DT_FP32 ? "vectors (fp32)" : q->vec_dtype == DT_FP16 ? "vectors (fp16)" : "vectors (bf16)";
}

// The storage for the weights in `format`; every buffer in the ledger.
void quant_alloc(QuantWeights *q, int format) {
    q->format = format;
    q->codes = mem_alloc(MEM_QWEIGHTS, quant_code_bytes(format, q->matrices), "quantized matrices");
    q->vec = mem_alloc(MEM_QWEIGHTS, dtype_size(q->vec_dtype) * q->vectors, quant_vec_name(q));
    if (q->double_quant) {
        dq_code_make();
        q->qscales = mem_alloc(MEM_QSCALES, q->blocks, "scales in 8 bits (double quant)");
        q->scales2 = mem_alloc(MEM_QSCALES, 4 * q->groups, "their scales, one per 256 (double quant)");
        q->offsets = mem_alloc(MEM_QSCALES, 4 * q->nmatrices, "their offsets, one per tensor (double quant)");
        q->pending = mem_alloc(MEM_SCRATCH, 4 * q->most_blocks, "a tensor's scales while stored (double quant)");
    } else if (quant_scaled(format)) {
        q->scales = mem_alloc(MEM_QSCALES, 4 * q->blocks, "quantization scales");
    }
}

// The layout's arrays (host memory; quant_free frees them with the storage).
void quant_layout_free(QuantWeights *q) {
    free(q->tensors);
    free(q->first);
    free(q->first_block);
    free(q->first_group);
    free(q->matrix);
}

void quant_free(QuantWeights *q) {
    mem_free(q->codes);
    mem_free(q->vec);
    mem_free(q->scales);
    mem_free(q->qscales);
    mem_free(q->scales2);
    mem_free(q->offsets);
    mem_free(q->pending);
    quant_layout_free(q);
}

// --double-quant: block b of matrix tensor t is the how-manieth of the Hugging Face tensor's blocks.
size_t dq_position(const QuantTensor *t, size_t b) {
    if (!t->halves || t->row % QUANT_BLOCK) return b;
    size_t per_row = (size_t)t->row / QUANT_BLOCK;
    return hf_half_row((size_t)t->halves, b / per_row) * per_row + b % per_row;
}

// All of tensor i's blocks are stored, their absmax in `pending`: its offset (their mean, summed in double
// in Hugging Face's order and rounded once), and each group's scale and bytes.
void dq_finish(QuantWeights *q, int i) {
    const QuantTensor *t = &q->tensors[i];
    size_t nb = quant_nblocks(t->count), *at = malloc(sizeof(size_t) * nb);  // at[position] = block
    for (size_t b = 0; b < nb; b++) at[dq_position(t, b)] = b;
    double sum = 0;
    for (size_t j = 0; j < nb; j++) sum += q->pending[at[j]];
    float offset = (float)(sum / (double)nb);
    q->offsets[q->matrix[i]] = offset;
    for (size_t g = 0; g * DQ_GROUP < nb; g++) {
        size_t j0 = g * DQ_GROUP, j1 = j0 + DQ_GROUP < nb ? j0 + DQ_GROUP : nb;
        float largest = 0.0f;
        for (size_t j = j0; j < j1; j++) largest = fmaxf(largest, fabsf(q->pending[at[j]] - offset));
        float inv = 1.0f / largest;
        for (size_t j = j0; j < j1; j++) {
            float x = (q->pending[at[j]] - offset) * inv;  // a group of equal values: 0 * inf, nan: index 0
            x = x > 1.0f ? 1.0f : x < -1.0f ? -1.0f : x;
            q->qscales[q->first_block[i] + at[j]] = (uint8_t)(x == x ? dq_nearest(x) : 0);
        }
        q->scales2[q->first_group[i] + g] = largest;
    }
    free(at);
}

// Block `blk` of tensor i's scale: the fp32 one, or read back from --double-quant's byte.
float quant_scale(const QuantWeights *q, int i, size_t blk) {
    if (!q->double_quant) return q->scales[blk];
    size_t b = blk - q->first_block[i];
    volatile float part = DQ_CODE[q->qscales[blk]] * q->scales2[q->first_group[i] + dq_position(&q->tensors[i], b) / DQ_GROUP];
    return part + q->offsets[q->matrix[i]];
}

// Store or read one block: codes k .. k+n-1 of the matrices, scale s.
void put_codes(QuantWeights *q, size_t k, const int8_t *codes, int n) {
    for (int i = 0; i < n; i++, k++) {
        if (q->format == QF_INT8) { ((int8_t *)q->codes)[k] = codes[i]; continue; }
        int high = q->format == QF_NF4 ? k % 2 == 0 : k % 2 == 1;  // (nf4: bitsandbytes' order)
        uint8_t *byte = (uint8_t *)q->codes + k / 2, nib = (uint8_t)(q->format == QF_NF4 ? codes[i] : codes[i] + 8);
        *byte = high ? (uint8_t)((*byte & 0x0F) | nib << 4) : (uint8_t)((*byte & 0xF0) | nib);
    }
}

int get_code(const QuantWeights *q, size_t k) {
    if (q->format == QF_INT8) return ((const int8_t *)q->codes)[k];
    uint8_t byte = ((const uint8_t *)q->codes)[k / 2];
    if (q->format == QF_NF4) return k % 2 ? byte & 0x0F : byte >> 4;
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
            dtype_store((char *)q->vec + k * dtype_size(q->vec_dtype), w, b - a, q->vec_dtype);
            continue;
        }
        if (!quant_scaled(q->format)) {
            dtype_store((uint16_t *)q->codes + k, w, b - a, q->format == QF_FP16 ? DT_FP16 : DT_BF16);
            continue;
        }
        if (!quant_range_ok(t, a, b)) ledger_bug("quantized range not on block boundaries", "quant_store");
        size_t blk = q->first_block[i] + (a - t->offset) / QUANT_BLOCK;
        for (size_t at = 0; at < b - a; at += QUANT_BLOCK, blk++) {
            int len = (int)(b - a - at < QUANT_BLOCK ? b - a - at : QUANT_BLOCK);
            int8_t codes[QUANT_BLOCK];
            float scale = q->format == QF_NF4 ? block_quantize_nf4(w + at, len, codes)
                                              : block_quantize(w + at, len, quant_qmax(q->format), codes);
            if (q->double_quant) q->pending[blk - q->first_block[i]] = scale;
            else q->scales[blk] = scale;
            put_codes(q, k + at, codes, len);
        }
        if (q->double_quant && b == t->offset + t->count) dq_finish(q, i);  // its last block: its constants
    }
    return 0;
}

// Weights that arrive in consecutive windows of any size, in layout order (core/config.h
// init_params_chunks' takes): each block a window ends inside waits in `carry` until the next
// window completes it, so that quant_store always sees whole blocks.
typedef struct {
    QuantWeights *q;
    float carry[QUANT_BLOCK];
    size_t carry_lo;  // the flat index of carry[0]
    int carry_n;
} QuantStream;

// The block that holds parameter x, [*start, *end) (a vector's parameters are blocks of one).
void quant_block_of(const QuantWeights *q, size_t x, size_t *start, size_t *end) {
    const QuantTensor *t = &q->tensors[quant_tensor_of(q, x)];
    *start = x, *end = x + 1;
    if (!t->is_matrix) return;
    *start = t->offset + (x - t->offset) / QUANT_BLOCK * QUANT_BLOCK;
    *end = *start + QUANT_BLOCK < t->offset + t->count ? *start + QUANT_BLOCK : t->offset + t->count;
}

// Store the window [lo, lo + n) (src[0] = parameter lo); the windows come in order, without gaps.
// 0, or the flat index + 1 of a weight that is inf or nan.
size_t quant_stream(QuantStream *s, const float *src, size_t lo, size_t n) {
    size_t at = lo, end = lo + n, bad, start, stop;
    if (s->carry_n) {  // finish the block the last window ended inside
        quant_block_of(s->q, s->carry_lo, &start, &stop);
        size_t need = stop - (s->carry_lo + s->carry_n), take = need < n ? need : n;
        memcpy(s->carry + s->carry_n, src, take * sizeof(float));
        s->carry_n += (int)take, at += take;
        if (take < need) return 0;
        if ((bad = quant_store(s->q, s->carry, s->carry_lo, s->carry_n))) return bad;
        s->carry_n = 0;
    }
    if (at == end) return 0;
    quant_block_of(s->q, end - 1, &start, &stop);
    size_t cut = stop == end ? end : start > at ? start : at;  // whole blocks now, the last one's part later
    if (cut > at && (bad = quant_store(s->q, src + (at - lo), at, cut - at))) return bad;
    memcpy(s->carry, src + (cut - lo), (end - cut) * sizeof(float));
    s->carry_lo = cut, s->carry_n = (int)(end - cut);
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
            dtype_load(w, (const char *)q->vec + k * dtype_size(q->vec_dtype), b - a, q->vec_dtype);
            continue;
        }
        if (!quant_scaled(q->format)) {
            dtype_load(w, (const uint16_t *)q->codes + k, b - a, q->format == QF_FP16 ? DT_FP16 : DT_BF16);
            continue;
        }
        if (!quant_range_ok(t, a, b)) ledger_bug("quantized range not on block boundaries", "quant_load");
        size_t blk0 = q->first_block[i] + (a - t->offset) / QUANT_BLOCK;
        for (size_t at = 0, blk = blk0; at < b - a; at += QUANT_BLOCK, blk++) {
            size_t end = b - a - at < QUANT_BLOCK ? b - a : at + QUANT_BLOCK;
            float scale = quant_scale(q, i, blk);
            if (q->format == QF_NF4)
                for (size_t j = at; j < end; j++) w[j] = NF4_CODE[get_code(q, k + j)] * scale;
            else
                for (size_t j = at; j < end; j++) w[j] = (float)get_code(q, k + j) * scale;
        }
    }
}

#endif
