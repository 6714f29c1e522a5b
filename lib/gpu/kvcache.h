// gpu/kvcache.h — sampling's KV cache on the GPU: cpu/kvcache.h's room with
// the cu_ op. Each layer's keys and values of the positions a sample has so
// far, in device memory, so that a new token runs the model over one position
// and attends over the cache. gpu/model.h's gpu_gpt_forward is the same; with
// m->kv set, its rows are the positions from m->pos0 on, and gpu_attend calls
// gpu_attend_cached here.
//
// The cache holds, per layer, K and V of the T positions a sample runs: (T, C)
// each in the dtype (the values the whole forward's attention reads from
// qkv), 2 L T C e bytes in all, pushed on the GPU's activation stack under the
// sample's forwards (ledger: kv_cache; the predictor: memory/predict.h
// predict_sampling).
#ifndef GPTMEM_GPU_KVCACHE_H
#define GPTMEM_GPU_KVCACHE_H

#include "core/dtype.h"
#include "cuda/api.h"
#include "gpu/gpt.h"
#include "memory/ledger.h"

typedef struct GpuKVCache {
    void *kv;  // L x {K, V} x T x C elements of the dtype, device memory
    int T, dtype;
    size_t bytes;
    int mark;  // the stack's mark under it
} GpuKVCache;

void gpu_kv_open(GpuKVCache *c, const GpuGPT *m, int T) {
    c->T = T, c->dtype = m->dtype;
    c->bytes = 2 * (size_t)m->cfg.layers * T * m->cfg.channels * m->elem_bytes;
    c->mark = arena_mark();
    c->kv = arena_push_as(MEM_KVCACHE, "kv cache", c->bytes);
}

void gpu_kv_close(GpuKVCache *c) {
    arena_pop_to(c->mark, "kv cache");
    c->kv = NULL;
}

// Layer l's keys (which 0) or values (1): T rows of C.
void *gpu_kv_part(const GpuKVCache *c, int l, int which, int C) {
    return (char *)c->kv + ((size_t)l * 2 + which) * c->T * C * dtype_size(c->dtype);
}

// Attention of this forward's rows (positions pos0 .. pos0 + rows - 1, batch
// 1) over layer l's cache, their own keys and values put in it first, written
// to out (rows, C). No probabilities are stored: no backward follows.
void gpu_attend_cached(GpuGPT *m, GpuActs *a, int l, void *out) {
    GpuKVCache *c = m->kv;
    int C = m->cfg.channels, H = m->cfg.heads;
    cu_attention_forward_cached(m->dtype, out, gpu_kv_part(c, l, 0, C), gpu_kv_part(c, l, 1, C), a->qkv, m->pos0,
                                m->B * m->T, C, H);
}

#endif
