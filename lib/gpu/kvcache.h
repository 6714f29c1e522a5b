// gpu/kvcache.h — sampling's KV cache on the GPU: cpu/kvcache.h's room with
// the cu_ op. Each layer's keys and values of the positions a sample has so
// far, in device memory, so that a new token runs the model over one position
// and attends over the cache. gpu/model.h's gpu_gpt_forward is the same; with
// m->kv set, its rows are the positions from m->pos0 on, and gpu_attend calls
// gpu_attend_cached here.
//
// The cache holds, per layer, K and V of the T positions a sample runs: (T, Ck)
// each in the dtype, Ck = KVH C/H the key-value heads' channels (C for GPT-2;
// the values the whole forward's attention reads from qkv), 2 L T Ck e bytes in all, pushed on the GPU's activation stack under the
// sample's forwards (ledger: kv_cache; the predictor: memory/predict.h
// predict_sampling).
#ifndef GPTMEM_GPU_KVCACHE_H
#define GPTMEM_GPU_KVCACHE_H

#include "core/dtype.h"
#include "cuda/api.h"
#include "gpu/gpt.h"
#include "memory/ledger.h"

typedef struct GpuKVCache {
    void *kv;  // L x {K, V} x T x Ck elements of the dtype, device memory
    int T, dtype;
    size_t bytes;
    int mark;  // the stack's mark under it
} GpuKVCache;

void gpu_kv_open(GpuKVCache *c, const GpuGPT *m, int T) {
    c->T = T, c->dtype = m->dtype;
    size_t Ck = (size_t)cfg_kv_heads(&m->cfg) * (m->cfg.channels / m->cfg.heads);
    c->bytes = 2 * (size_t)m->cfg.layers * T * Ck * m->elem_bytes;
    c->mark = arena_mark();
    c->kv = arena_push_as(MEM_KVCACHE, "kv cache", c->bytes);
}

void gpu_kv_close(GpuKVCache *c) {
    arena_pop_to(c->mark, "kv cache");
    c->kv = NULL;
}

// Layer l's keys (which 0) or values (1): T rows of Ck.
void *gpu_kv_part(const GpuKVCache *c, int l, int which, int Ck) {
    return (char *)c->kv + ((size_t)l * 2 + which) * c->T * Ck * dtype_size(c->dtype);
}

// Attention of this forward's rows (positions pos0 .. pos0 + rows - 1, batch
// 1) over layer l's cache, their own keys and values put in it first, written
// to out (rows, C). No probabilities are stored: no backward follows.
void gpu_attend_cached(GpuGPT *m, GpuActs *a, int l, void *out) {
    GpuKVCache *c = m->kv;
    int C = m->cfg.channels, H = m->cfg.heads, KVH = cfg_kv_heads(&m->cfg), Ck = KVH * (C / H);
    cu_attention_forward_cached(m->dtype, out, gpu_kv_part(c, l, 0, Ck), gpu_kv_part(c, l, 1, Ck), a->qkv, m->pos0,
                                m->B * m->T, C, H, KVH);
}

#endif
