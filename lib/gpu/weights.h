// gpu/weights.h — where an op's weights come from, and where its gradients go,
// on the GPU: cpu/weights.h's rooms with device pointers, in the dtype (no
// widening: the kernels read 16 bits). A piece of the flat array (core/
// plan.h) is the stored weights this rank holds, or gathered from every
// rank's shard just before the op that reads it (ZeRO stage 3); its
// gradients go into the stored gradients, or into a bucket reduce-scattered
// over the ranks as soon as the op's backward is done (stages 2, 3). With
// --fp32-grads the kernels write a 16-bit bucket, widened into the fp32
// gradients (or the fp32 bucket) when the op's backward is done.
// ZeRO's collectives at their points of the step (parallel/gpu_zero.h does the
// work, on NCCL or through parallel/staging.h's host-staged MPI calls):
//   stage 3, before a piece's weights are used (forward, rebuild, backward):  gpu_gather_weights
//   stages 2, 3, when a piece's backward is done:                          gpu_reduce_scatter_grads
//   stages 0, 1, after the whole backward:                                 gpu_gpt_reduce_grads
//   stages 1, 2, after the optimizer step (and init, resume):              gpu_gpt_sync_params
#ifndef GPTMEM_GPU_WEIGHTS_H
#define GPTMEM_GPU_WEIGHTS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "core/clock.h"
#include "core/config.h"
#include "core/plan.h"
#include "core/rng.h"
#include "core/traffic.h"
#include "cuda/api.h"
#include "gpu/gpt.h"
#include "gpu/lora.h"
#include "gpu/tensor.h"
#include "memory/ledger.h"
#include "parallel/comm.h"
#include "parallel/gpu_zero.h"
#include "parallel/zero.h"

// --- ZeRO's collectives (parallel/gpu_zero.h) at their points of the step ------------------

// Stage 3: every rank's weights of [lo, hi) into dst (a gather buffer, in the
// dtype). With --offload opt,params this rank's part comes up from the
// page-locked weight shard.
void gpu_gather_weights(GpuGPT *m, void *dst, size_t lo, size_t hi) {
    gpu_zero_gather(&m->comm, dst, m->params, m->params_base, lo, hi, (m->plan.offload & OFFLOAD_PARAMS) != 0);
}

// Stages 2, 3: a bucket of gradients of [lo, hi), summed over the ranks into each rank's gradient shard.
void gpu_reduce_scatter_grads(GpuGPT *m, void *bucket, size_t lo, size_t hi) {
    gpu_zero_reduce_scatter(&m->grad_comm, bucket, lo, hi, m->grads, m->grads_base);
}

// Stages 0, 1 on several ranks: the full gradients of what the step trains, summed over the ranks
// (stages 2, 3 summed each piece's in the backward). With --shard-group that was inside the group: the
// part this rank's optimizer reads is then summed across the groups.
void gpu_gpt_reduce_grads(GpuGPT *m) {
    if (reduces_full_grads(&m->train.shard)) gpu_zero_reduce_full(m->train_grad_comm, m->train.g);
    gpu_zero_reduce_across(m->train_grad_comm, m->train.g);
}

// --- the weights' life across a step ---------------------------------------------------

// After the master weights changed (init, resume): round them into the
// 16-bit compute weights (fp32: they are the same array); at stages 1, 2
// every rank's updated block goes to every rank.
void gpu_gpt_sync_params(GpuGPT *m) {
    if (gpu_base_packed(m)) return;  // (--base-dtype: the frozen model is whole on every rank, and never changes)
    if (m->dtype != DT_FP32 && m->master_n && m->master)  // (--lora's frozen 16-bit model has no master)  // (a rank may own no parameters: a toy model on many ranks)
        cu_store_dtype(m->dtype, element(m, m->params, m->master_base - m->params_base), m->master, m->master_n);
    if (gathers_updates(&m->shard)) gpu_zero_allgather_blocks(&m->comm, m->params, m->elem_bytes);
}

// After the fp32 weights the step trains changed (a resume): round them into the 16-bit weights the forward
// reads (fp32: the same array); at stages 1, 2 every rank's updated block goes to every rank (optim/trained.h
// trained_sync's, on the GPU).
void gpu_trained_sync(GpuGPT *m) {
    Trained *t = &m->train;
    if (t->cdt != DT_FP32 && t->w && t->opt.hi > t->opt.lo)  // (a rank may own no parameters: a toy model on many ranks)
        cu_store_dtype(t->cdt, (char *)t->compute + (t->w_base - t->c_base) * dtype_size(t->cdt), t->w, t->opt.hi - t->opt.lo);
    if (gathers_updates(&t->shard)) gpu_zero_allgather_blocks(m->train_comm, t->compute, dtype_size(t->cdt));
}

// The first weights, the same numbers as the CPU's, made on the host a chunk at a time (gpu/tensor.h's
// GpuInit); the master's part of them (all, or this rank's share) is uploaded.
static void upload_chunk(void *ctx, size_t a, size_t b) {
    GpuInit *it = ctx;
    GpuGPT *m = it->m;
    if (m->master) { gpu_upload(m->master + (a - m->master_base), it->chunk, (b - a) * 4); return; }
    // --lora (no master): the frozen weights rounded on the host into the page-locked shard (opt,params), or
    // from a scratch on the GPU
    void *w = element(m, m->params, a - m->params_base);
    if (m->plan.offload & OFFLOAD_PARAMS) { dtype_store(w, it->chunk, b - a, m->dtype); return; }
    gpu_upload(m->gemm_workspace, it->chunk, (b - a) * 4);
    cu_store_dtype(m->dtype, w, m->gemm_workspace, b - a);
}

void gpu_gpt_init(GpuGPT *m, const WeightSource *src) {
    enum { CHUNK = 1 << 18 };
    if (m->tp.size > 1) {  // --tp: the whole model's weights, this rank's share of them kept (gpu/tensor.h)
        gpu_tp_init(m, src);
        gpu_gpt_sync_params(m);
        return;
    }
    GpuInit it = {m, malloc(sizeof(float) * CHUNK)};  // 1 MiB of host staging, not a model buffer
    if (m->master_n) init_params_chunks(it.chunk, CHUNK, m->master_base, m->master_base + m->master_n, &m->cfg, src,
                                        upload_chunk, &it);
    free(it.chunk);
    gpu_gpt_sync_params(m);
}

// --lora's first weights: the frozen model's (packed: gpu/lora.h gpu_base_init; else as above, without a
// master), then the adapters' (A drawn, B zero: gpu_lora_start).
void gpu_lora_gpt_init(GpuGPT *m, const WeightSource *src) {
    if (gpu_base_packed(m)) gpu_base_init(m, src);
    else gpu_gpt_init(m, src);
    gpu_lora_start(m);
}

// Do all ranks hold the same weights (stages 0 to 2)? The compute weights are
// hashed a staging buffer at a time on the host (parallel/zero.h's hash),
// every rank taking part; 1 on one rank and at stage 3.
int gpu_gpt_replicas_identical(GpuGPT *m) {
    const Trained *t = &m->train;  // (the weights the ranks train)
    const Shard *sh = &t->shard;
    if (sh->nranks == 1 || weights_sharded(sh)) return 1;  // (--tp: the replicas are the data-parallel ranks)
    size_t bytes = sh->nparams * dtype_size(t->cdt), piece = m->staging.cap / 8 * 8;
    const char *from = t->compute;
    uint64_t h = REPLICA_HASH_START;
    for (size_t at = 0; at < bytes; at += piece) {
        size_t n = bytes - at < piece ? bytes - at : piece;
        gpu_download(m->staging.host, from + at, n);
        h = replica_hash(h, m->staging.host, n);
    }
    return zero_hashes_agree(sh, h);
}

// How often --log runs that check on GPU ranks, which bring every weight to
// the host to hash it: every ceil(weight bytes / GPU_REPLICA_CHECK_BYTES)
// steps (GPT-2 in bf16: 249 MB, every 8); every step on one rank or at stage 3.
int gpu_replica_check_every(const GpuGPT *m) {
    if (m->shard.nranks == 1 || weights_sharded(&m->shard)) return 1;
    return (int)((m->nparams * m->elem_bytes + GPU_REPLICA_CHECK_BYTES - 1) / GPU_REPLICA_CHECK_BYTES);
}

// --- a piece at a time ---------------------------------------------------------------

// A piece's weights, in the dtype, for the op about to run: where this rank
// keeps them, or at stage 3 gathered into gather_piece first (before the op's
// forward, again before its backward, and before a rebuild). Good until the
// next gpu_fetch_params.
void *gpu_fetch_params(GpuGPT *m, Piece p) {
    if (gpu_base_packed(m)) {  // --base-dtype: read back from io/quant.h's storage (gpu/lora.h)
        gpu_base_load(m, m->lora.piece, p.lo, p.n);
        return m->lora.piece;
    }
    if (!weights_sharded(&m->shard)) return element(m, m->params, p.lo - m->params_base);
    char what[48];
    if (g_ledger.trace) printf("  gather %s: %zu B\n", piece_name(&m->cfg, p, what, sizeof what), p.n * m->elem_bytes);
    gpu_gather_weights(m, m->gather_piece, p.lo, p.lo + p.n);
    return m->gather_piece;
}

// --fp32-grads: the kernels' 16-bit gradients go through a bucket of their own.
static int widens_grads(const GpuGPT *m) { return m->grad_bytes != m->elem_bytes; }

// Where the backward of a piece adds its gradients: the stored gradients, or
// at stages 2, 3 the bucket grad_piece, or with --fp32-grads the 16-bit
// bucket grad_lp_piece (a bucket is zeroed here); gpu_grads_params_done hands it on.
void *gpu_grads_params(GpuGPT *m, Piece p) {
    if (gpu_frozen(m)) return NULL;  // --lora: no gradients for the model's weights
    void *bucket = widens_grads(m) ? m->grad_lp_piece : grads_sharded(&m->shard) ? m->grad_piece : NULL;
    if (!bucket) return grad_element(m, m->grads, p.lo - m->grads_base);
    gpu_zero(bucket, p.n * m->elem_bytes);
    return bucket;
}

// The gradients of parameters [lo, lo + n) are complete: with --fp32-grads the
// 16-bit `lp` is widened, added into the fp32 gradients, or at stages 2, 3
// written into the fp32 `bucket`; stages 2, 3 reduce-scatter `bucket`.
static void gpu_grads_range_done(GpuGPT *m, const void *lp, void *bucket, size_t lo, size_t n) {
    int sharded = grads_sharded(&m->shard);
    if (lp) cu_widen_into(m->dtype, sharded ? bucket : grad_element(m, m->grads, lo - m->grads_base), lp, n, !sharded);
    if (sharded) gpu_reduce_scatter_grads(m, bucket, lo, lo + n);
}

void gpu_grads_params_done(GpuGPT *m, Piece p) {
    if ((!grads_sharded(&m->shard) && !widens_grads(m)) || gpu_frozen(m)) return;
    char what[48];
    if (g_ledger.trace && grads_sharded(&m->shard))
        printf("  reduce-scatter %s: %zu B\n", piece_name(&m->cfg, p, what, sizeof what), p.n * m->grad_bytes);
    gpu_grads_range_done(m, widens_grads(m) ? m->grad_lp_piece : NULL, m->grad_piece, p.lo, p.n);
}

// One op's weight and bias (or their gradients) on the device: the bias follows the weight.
typedef struct {
    void *w, *b;
} GpuOpParams;

GpuOpParams gpu_op_weights(GpuGPT *m, int l, int op) {
    void *p = gpu_fetch_params(m, op_piece(&m->cfg, l, op));
    GpuOpParams w = {p, op_has_bias(&m->cfg) ? element(m, p, op_weight_count(&m->cfg, op)) : NULL};  // (Llama: none)
    return w;
}

GpuOpParams gpu_op_grads(GpuGPT *m, int l, int op) {
    void *p = gpu_grads_params(m, op_piece(&m->cfg, l, op));  // (--lora: NULL, and the bias's too)
    GpuOpParams g = {p, p && op_has_bias(&m->cfg) ? element(m, p, op_weight_count(&m->cfg, op)) : NULL};
    return g;
}

void gpu_op_grads_done(GpuGPT *m, int l, int op) { gpu_grads_params_done(m, op_piece(&m->cfg, l, op)); }

// --- the globals: the whole table at once (the LM head without --fused-ce) ------------------

// [wte | wpe] and the tail (what follows the layers: lnfw lnfb, or Llama's lnfw [lm_head]) packed in a
// buffer (stage 3's gather, stages 2 and 3's bucket), or in the flat layout (the stored arrays):
// cpu/weights.h globals_at's places.
GpuGlobals gpu_globals_at(const GpuGPT *m, void *emb, void *tail) {
    const GPTConfig *c = &m->cfg;
    int llama = is_llama(c);
    GpuGlobals g = {emb, llama ? NULL : element(m, emb, (size_t)padded_vocab(c) * c->channels), tail,
                    llama ? NULL : element(m, tail, c->channels),
                    c->untied ? element(m, tail, final_norm_param_count(c)) : emb};
    return g;
}
GpuGlobals gpu_globals_packed(const GpuGPT *m, void *base) {
    return gpu_globals_at(m, base, element(m, base, embedding_param_count(&m->cfg)));
}
GpuGlobals gpu_globals_flat(const GpuGPT *m, void *base) {  // (an array holding every parameter)
    return gpu_globals_at(m, base, element(m, base, layer_offset(&m->cfg, m->cfg.layers)));
}

// The globals' weights (stage 3: gathered now).
GpuGlobals gpu_global_weights(GpuGPT *m) {
    const GPTConfig *c = &m->cfg;
    if (gpu_base_packed(m))  // --base-dtype: the globals are vectors, in the dtype where they are held (gpu/lora.h)
        return gpu_globals_at(m, gpu_base_vector(m, 0), gpu_base_vector(m, layer_offset(c, c->layers)));
    if (!weights_sharded(&m->shard)) return gpu_globals_flat(m, m->params);
    size_t emb = embedding_param_count(c), lnf = layer_offset(c, c->layers);
    if (g_ledger.trace) printf("  gather embeddings and final layernorm: %zu B\n", m->plan.table * m->elem_bytes);
    gpu_gather_weights(m, m->gather_global, 0, emb);
    gpu_gather_weights(m, element(m, m->gather_global, emb), lnf, lnf + tail_param_count(c));
    return gpu_globals_packed(m, m->gather_global);
}

// Their gradients: the stored ones, or a bucket as for a piece (zeroed
// here): at stages 2, 3 grad_global, with --fp32-grads grad_lp_global;
// gpu_global_grads_done hands it on.
GpuGlobals gpu_global_grads(GpuGPT *m) {
    if (gpu_frozen(m)) return (GpuGlobals){NULL, NULL, NULL, NULL, NULL};  // (--lora)
    void *bucket = widens_grads(m) ? m->grad_lp_global : grads_sharded(&m->shard) ? m->grad_global : NULL;
    if (!bucket) return gpu_globals_flat(m, m->grads);
    gpu_zero(bucket, m->plan.table * m->elem_bytes);
    return gpu_globals_packed(m, bucket);
}

void gpu_global_grads_done(GpuGPT *m) {
    if ((!grads_sharded(&m->shard) && !widens_grads(m)) || gpu_frozen(m)) return;
    const GPTConfig *c = &m->cfg;
    size_t emb = embedding_param_count(c), lnf = layer_offset(c, c->layers);
    if (g_ledger.trace && grads_sharded(&m->shard))
        printf("  reduce-scatter embeddings and final layernorm: %zu B\n", m->plan.table * m->grad_bytes);
    const void *lp = widens_grads(m) ? m->grad_lp_global : NULL;  // [wte | wpe] then the tail, packed
    void *bucket = m->grad_global;
    gpu_grads_range_done(m, lp, bucket, 0, emb);
    gpu_grads_range_done(m, lp ? element(m, (void *)lp, emb) : NULL, bucket ? grad_element(m, bucket, emb) : NULL, lnf,
                         tail_param_count(c));
}

// --- --fused-ce: the table a chunk of rows at a time ------------------------------------

// Chunk k of the table's first `rows` rows: its weights, and the end of its backward.
void *gpu_table_chunk_weights(GpuGPT *m, int rows, int k) {
    return gpu_fetch_params(m, table_chunk(&m->plan, &m->cfg, rows, k));
}

void gpu_table_chunk_grads_done(GpuGPT *m, int rows, int k) {
    gpu_grads_params_done(m, table_chunk(&m->plan, &m->cfg, rows, k));
}

// The LM head's chunk k (core/plan.h head_chunk: wte's, or an untied head's): its weights, its
// gradients, and the end of its backward.
void *gpu_head_chunk_weights(GpuGPT *m, int k) { return gpu_fetch_params(m, head_chunk(&m->plan, &m->cfg, k)); }
void *gpu_head_chunk_grads(GpuGPT *m, int k) { return gpu_grads_params(m, head_chunk(&m->plan, &m->cfg, k)); }
void gpu_head_chunk_grads_done(GpuGPT *m, int k) { gpu_grads_params_done(m, head_chunk(&m->plan, &m->cfg, k)); }

#endif
