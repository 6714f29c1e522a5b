// cpu/kvcache.h — sampling's KV cache: each layer's keys and values of the
// positions a sample has so far, so that a new token runs the model over one
// position and attends over the cache, instead of running the whole context
// again. model.h's gpt_forward is the same; with the cache open, its rows are
// the positions from m->pos0 on, and attend (model.h) calls attend_cached here.
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

// The cache for T positions on the activation stack (under the sample's
// forwards). Returns its bytes and sets *dtype to what it holds.
size_t kv_open(GPT *m, int T, int *dtype) {
    KVCache *c = &m->kv;
    c->T = T, c->dtype = *dtype = m->dtype;
    c->W = (int)kv_width(&m->cfg);
    c->bytes = 2 * (size_t)m->cfg.layers * T * c->W * dtype_size(m->dtype);
    c->mark = arena_mark();
    c->kv = arena_push_as(MEM_KVCACHE, "kv cache", c->bytes);
    return c->bytes;
}

void kv_close(GPT *m) {
    if (!m->kv.kv) return;
    arena_pop_to(m->kv.mark, "kv cache");
    m->kv.kv = NULL, m->pos0 = 0;
}

// The next forwards' rows are the positions from pos0 on, the cache holding
// the positions before (0 without a cache: positions 0 .. T-1).
void kv_at(GPT *m, int pos0) { m->pos0 = pos0; }

// Layer l's keys (which 0) or values (1): T rows of W.
void *kv_part(const KVCache *c, int l, int which) {
    return (char *)c->kv + ((size_t)l * 2 + which) * c->T * c->W * dtype_size(c->dtype);
}

// Attention of this forward's rows (positions pos0 .. pos0 + rows - 1, batch
// 1) over layer l's cache, their own keys and values put in it first, written
// to out (rows, C). The probabilities (or --flash's log-sum-exp) are not kept:
// no backward follows a sample's forward, so their tensor is zeroed.
void attend_cached(GPT *m, Acts *a, int l, float *out) {
    const KVCache *c = &m->kv;
    attention_forward_cached_heads(out, kv_part(c, l, 0), kv_part(c, l, 1), c->dtype, a->qkv, m->pos0, m->B * m->T,
                                   model_heads(&m->cfg));
    memset(a->view[SV_ATT], 0, a->count[SV_ATT] * sizeof(float));
}

#endif
