// gpu/kvcache.h — sampling's KV cache on the GPU: cpu/kvcache.h's room with
// the cu_ op. Each layer's keys and values of the positions a sample has so
// far, in device memory, so that a new token runs the model over one position
// and attends over the cache. gpu/model.h's gpu_gpt_forward is the same; with
// the cache open, its rows are the positions from m->pos0 on, and gpu_attend calls
// gpu_attend_cached here.
//
// The cache holds, per layer, K and V of the T positions a sample runs: (T, W)
// each in the dtype, W = KVH hs the key-value heads' channels (C for GPT-2;
// the values the whole forward's attention reads from qkv), 2 L T W e bytes
// in all, pushed on the GPU's activation stack under the sample's forwards
// (ledger: kv_cache; the predictor: memory/predict.h predict_sampling).
#ifndef GPTMEM_GPU_KVCACHE_H
#define GPTMEM_GPU_KVCACHE_H

#include "core/dtype.h"
#include "cuda/api.h"
#include "gpu/gpt.h"
#include "memory/ledger.h"

// The cache for T positions on the GPU's stack (under the sample's forwards).
// Returns its bytes and sets *dtype to what it holds.
size_t gpu_kv_open(GpuGPT *m, int T, int *dtype) {
    KVCache *c = &m->kv;
    c->T = T, c->dtype = *dtype = m->dtype;
    c->W = (int)kv_width(&m->cfg);
    c->bytes = 2 * (size_t)m->cfg.layers * T * c->W * m->elem_bytes;
    c->mark = arena_mark();
    c->kv = arena_push_as(MEM_KVCACHE, "kv cache", c->bytes);
    return c->bytes;
}

void gpu_kv_close(GpuGPT *m) {
    if (!m->kv.kv) return;
    arena_pop_to(m->kv.mark, "kv cache");
    m->kv.kv = NULL, m->pos0 = 0;
}

// The next forwards' rows are the positions from pos0 on, the cache holding
// the positions before (0 without a cache: positions 0 .. T-1).
void gpu_kv_at(GpuGPT *m, int pos0) { m->pos0 = pos0; }

// Layer l's keys (which 0) or values (1): T rows of W.
void *gpu_kv_part(const KVCache *c, int l, int which) {
    return (char *)c->kv + ((size_t)l * 2 + which) * c->T * c->W * dtype_size(c->dtype);
}

// Attention of this forward's rows (positions pos0 .. pos0 + rows - 1, batch
// 1) over layer l's cache, their own keys and values put in it first, written
// to out (rows, C). No probabilities are stored: no backward follows.
void gpu_attend_cached(GpuGPT *m, GpuActs *a, int l, void *out) {
    const KVCache *c = &m->kv;
    int C = (int)attn_width(&m->cfg), H = m->cfg.heads, KVH = cfg_kv_heads(&m->cfg);  // (C: the heads' width)
    cu_attention_forward_cached(m->dtype, out, gpu_kv_part(c, l, 0), gpu_kv_part(c, l, 1), a->qkv, m->pos0,
                                m->B * m->T, C, H, KVH);
}

#endif
