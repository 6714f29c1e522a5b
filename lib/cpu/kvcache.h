// cpu/kvcache.h — sampling's KV cache: each layer's keys and values of the
// positions a sample has so far, so that a new token runs the model over one
// position and attends over the cache, instead of running the whole context
// again. model.h's gpt_forward is the same; with m->kv set, its rows are the
// positions from m->pos0 on, and attend (model.h) calls attend_cached here.
//
// The cache holds, per layer, K and V of the T positions a sample runs: (T, C)
// each in the storage dtype (the values the full forward's attention reads
// from qkv, already rounded to it), 2 L T C e bytes in all; with grouped-query
// attention (Llama) the key-value heads' width KVH hs instead of C, and the
// keys as RoPE rotated them (the qkv step rotates each row at its position). It is pushed on
// the activation stack when a sample starts, under its forwards, and popped
// when it ends (ledger: kv_cache; the predictor: memory/predict.h
// predict_sampling; --dry-run --infer's row).
#ifndef GPTMEM_CPU_KVCACHE_H
#define GPTMEM_CPU_KVCACHE_H

#include <string.h>
#include "core/dtype.h"
#include "cpu/gpt.h"
#include "cpu/ops.h"
#include "memory/ledger.h"

typedef struct KVCache {
    void *kv;  // L x {K, V} x T x W elements of the dtype, W = KVH hs (C for GPT-2)
    int T, W, dtype;
    size_t bytes;
    int mark;  // the stack's mark under it
} KVCache;

void kv_open(KVCache *c, const GPT *m, int T) {
    size_t e = dtype_size(m->dtype);
    c->T = T, c->dtype = m->dtype, c->W = cfg_kv_heads(&m->cfg) * (m->cfg.channels / m->cfg.heads);
    c->bytes = 2 * (size_t)m->cfg.layers * T * c->W * e;
    c->mark = arena_mark();
    c->kv = arena_push_as(MEM_KVCACHE, "kv cache", c->bytes);
}

void kv_close(KVCache *c) {
    arena_pop_to(c->mark, "kv cache");
    c->kv = NULL;
}

// Layer l's keys (which 0) or values (1): T rows of W.
void *kv_part(const KVCache *c, int l, int which) {
    return (char *)c->kv + ((size_t)l * 2 + which) * c->T * c->W * dtype_size(c->dtype);
}

// Attention of this forward's rows (positions pos0 .. pos0 + rows - 1, batch
// 1) over layer l's cache, their own keys and values put in it first, written
// to out (rows, C). The probabilities (or --flash's log-sum-exp) are not kept:
// no backward follows a sample's forward, so their tensor is zeroed.
void attend_cached(GPT *m, Acts *a, int l, float *out) {
    KVCache *c = m->kv;
    attention_forward_cached_heads(out, kv_part(c, l, 0), kv_part(c, l, 1), c->dtype, a->qkv, m->pos0, m->B * m->T,
                                   model_heads(&m->cfg));
    memset(a->view[SV_ATT], 0, a->count[SV_ATT] * sizeof(float));
}

#endif
