// cpu/weights.h — where an op's weights come from, and where its gradients go,
// on the CPU. The model asks for a piece of the flat parameter array (core/
// plan.h) just before the op that reads it runs, and gets fp32:
//   the stored weights themselves (fp32, this rank holds them),
//   gathered from every rank's shard first (ZeRO stage 3),
//   widened from 16 bits into a working buffer (--dtype bf16, fp16),
//   read back from where the eval model holds them (--eval-only: cpu/eval.h,
//   through the model's read_back).
// Its gradients go into the stored fp32 gradients (fp32 runs, --fp32-grads), or
// into an fp32 bucket that is added into the 16-bit gradients, or
// reduce-scattered over the ranks (stages 2, 3), once the op's backward is done;
// nowhere when the weights are frozen (--lora: NULL, and the ops skip them).
// ZeRO's collectives at their points of the step (parallel/zero.h does the work):
//   stage 3, before a piece's weights are used (forward, rebuild, backward):  gather_weights
//   stages 2, 3, when a piece's backward is done:                          reduce_scatter_grads
//   stages 0, 1, after the whole backward:                                 gpt_reduce_grads
//   stages 1, 2, after the optimizer step:                                 gpt_sync_params
#ifndef GPTMEM_CPU_WEIGHTS_H
#define GPTMEM_CPU_WEIGHTS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/config.h"
#include "core/dtype.h"
#include "core/plan.h"
#include "core/traffic.h"
#include "cpu/gpt.h"
#include "cpu/ops.h"
#include "memory/ledger.h"
#include "parallel/comm.h"
#include "parallel/zero.h"

// --- ZeRO's collectives, and the weights' life across a step ----------------------------

// After the fp32 weights this rank keeps changed (their init, AdamW): round them
// into the 16-bit weights (fp32: they are the same array), then, at stages 1
// and 2, all-gather every rank's updated shard into the full weights
// (optim/trained.h trained_sync, over the model's own weights).
void gpt_sync_params(GPT *m) { trained_sync(&m->train); }

// Initialize the weights (GPT-2 init from the seed, or --init's file) on every
// rank: each rank fills the fp32 weights it keeps (all, or its shard), then
// gpt_sync_params makes the 16-bit copy and, at stages 1 and 2, gathers the
// full weights. (--lora's frozen model: cpu/lora.h lora_gpt_init.)
// --tp: the whole model's weights drawn (or read) a window at a time, through the dres scratch, each
// kept where this rank's share holds it (parallel/tensor.h tp_local_index), into its fp32 weights [lo, hi).
typedef struct {
    GPT *m;
    size_t lo, hi;
} TpInit;

static void init_take_share(void *ctx, size_t a, size_t b) {
    TpInit *t = ctx;
    for (size_t i = a; i < b; i++) {
        long j = tp_local_index(&t->m->tp, &t->m->cfg, i);
        if (j >= (long)t->lo && j < (long)t->hi) t->m->params[j - t->lo] = t->m->dres[i - a];
    }
}

void gpt_init(GPT *m, const WeightSource *src) {
    const Shard *sh = &m->shard;
    int sharded = m->dtype == DT_FP32 ? weights_sharded(sh) : states_sharded(sh);  // the fp32 weights: the compute weights, or the master
    size_t lo = sharded ? sh->own_lo : 0, hi = sharded ? sh->own_hi : m->nparams;
    if (m->tp.size > 1) {
        TpInit t = {m, lo, hi};
        init_params_chunks(m->dres, (size_t)m->B * m->T * m->cfg.channels, 0, param_count(&m->tp.whole), &m->tp.whole,
                           src, init_take_share, &t);
    } else init_params_range(m->params, lo, hi, &m->cfg, src);
    gpt_sync_params(m);
}

// Stage 3: every rank's weights of [lo, hi) into dst (in the storage dtype).
// With --offload opt,params this rank's shard is in page-locked host memory:
// its part of the piece goes up first (the gather's own copy), over the link.
void gather_weights(GPT *m, void *dst, size_t lo, size_t hi) {
    const Shard *sh = &m->shard;
    if (m->plan.offload & OFFLOAD_PARAMS) {
        size_t a = lo > sh->own_lo ? lo : sh->own_lo, b = hi < sh->own_hi ? hi : sh->own_hi;
        if (b > a) traffic_add(TR_UP, (long long)((b - a) * dtype_size(m->dtype)), 0.0);
    }
    zero_gather(sh, dst, compute_weights(m), m->params_base, lo, hi, m->dtype);
}

// Stages 2, 3: a bucket of fp32 gradients of [lo, hi), summed over the ranks
// into each rank's gradient shard.
void reduce_scatter_grads(GPT *m, float *bucket, size_t lo, size_t hi) {
    zero_reduce_scatter(&m->shard, bucket, lo, hi, gpt_grads(m), m->grads_base, m->grad_dtype);
}

// Stages 0, 1 on several ranks: the full gradients of what the step trains, summed over the ranks
// (stages 2, 3 summed each piece's in the backward). With --shard-group that was inside the group: the
// part this rank's optimizer reads is then summed across the groups (optim/trained.h trained_reduce).
void gpt_reduce_grads(GPT *m) { trained_reduce(&m->train); }

// Are the trained weights the same on every rank (parallel/zero.h)? 1 yes, 0 no.
int gpt_replicas_identical(const GPT *m) { return trained_replicas_identical(&m->train); }

// --- a piece at a time ----------------------------------------------------------------

// The parameters of a piece as fp32, for the op about to run: the stored
// weights themselves (fp32), or widened into w_piece (16-bit). Stage 3 first
// gathers them from every rank's shard: before the op's forward, again before
// its backward, and before a rebuild. The pointer is good until the next
// fetch_params. (The eval model reads them back from where it holds them.)
float *fetch_params(GPT *m, Piece p) {
    if (m->read_back) {
        m->read_back(m, m->w_piece, p.lo, p.n);
        return m->w_piece;
    }
    const void *src = m->gather_piece;
    if (weights_sharded(&m->shard)) {
        char what[48];
        if (g_ledger.trace) printf("  gather %s: %zu B\n", piece_name(&m->cfg, p, what, sizeof what), p.n * dtype_size(m->dtype));
        gather_weights(m, m->gather_piece, p.lo, p.lo + p.n);
    } else {
        src = (const char *)compute_weights(m) + (p.lo - m->params_base) * dtype_size(m->dtype);
    }
    if (m->dtype == DT_FP32) return (float *)src;
    dtype_load(m->w_piece, src, p.n, m->dtype);
    return m->w_piece;
}

// Where the backward of a piece accumulates its fp32 gradients: into the
// stored fp32 grads, or into the bucket grad_piece (zeroed here), which
// grads_params_done hands on.
float *grads_params(GPT *m, Piece p) {
    if (gpt_frozen(m)) return NULL;
    if (!m->bucketed) return m->grads + (p.lo - m->grads_base);
    memset(m->grad_piece, 0, p.n * sizeof(float));
    return m->grad_piece;
}

// The piece's gradients are complete: stages 2, 3 reduce-scatter them now,
// so no rank ever holds more than a piece of unreduced gradients; 16-bit
// gradients at stages 0, 1 have them added in.
void grads_params_done(GPT *m, Piece p) {
    if (!m->bucketed || gpt_frozen(m)) return;
    if (grads_sharded(&m->shard)) {
        char what[48];
        if (g_ledger.trace) printf("  reduce-scatter %s: %zu B\n", piece_name(&m->cfg, p, what, sizeof what), p.n * sizeof(float));
        reduce_scatter_grads(m, m->grad_piece, p.lo, p.lo + p.n);
    } else {
        dtype_accumulate((uint16_t *)m->grads_lp + p.lo, m->grad_piece, p.n, m->grad_dtype);
    }
}

// One op's weight and bias (or their gradients), as fp32: the bias follows the weight.
typedef struct {
    float *w, *b;
} OpParams;

// Layer l's op `op`: its weights, its gradient bucket, and the end of its backward.
OpParams op_weights(GPT *m, int l, int op) {
    float *p = fetch_params(m, op_piece(&m->cfg, l, op));
    OpParams w = {p, op_has_bias(&m->cfg) ? p + op_weight_count(&m->cfg, op) : NULL};
    return w;
}

OpParams op_grads(GPT *m, int l, int op) {
    float *p = grads_params(m, op_piece(&m->cfg, l, op));
    OpParams g = {p, p && op_has_bias(&m->cfg) ? p + op_weight_count(&m->cfg, op) : NULL};
    return g;
}

void op_grads_done(GPT *m, int l, int op) { grads_params_done(m, op_piece(&m->cfg, l, op)); }

// --- the globals: the whole table at once (the LM head without --fused-ce) ------------------

// Where they sit: in an array with the flat parameter layout (fp32 runs), or
// in a working buffer packed as [wte | wpe | the tail] (16-bit runs, stage 3),
// the tail being what follows the layers: lnfw lnfb (GPT-2), lnfw [lm_head] (Llama).
Globals globals_at(float *emb, float *tail, const GPTConfig *c) {
    size_t C = c->channels, table = (size_t)padded_vocab(c) * C;
    int llama = is_llama(c);
    Globals g = {emb, llama ? NULL : emb + table, tail, llama ? NULL : tail + C,
                 c->untied ? tail + final_norm_param_count(c) : emb};
    return g;
}
Globals globals_flat(float *base, const GPTConfig *c) {
    return globals_at(base, base + layer_offset(c, c->layers), c);
}
Globals globals_packed(float *work, const GPTConfig *c) {
    return globals_at(work, work + embedding_param_count(c), c);
}

// The embeddings and final layernorm as fp32 (widened into w_global for 16-bit; stage 3: gathered).
Globals global_weights(GPT *m) {
    const GPTConfig *c = &m->cfg;
    size_t emb = embedding_param_count(c), lnf = layer_offset(c, c->layers), tail = tail_param_count(c);
    size_t e = dtype_size(m->dtype);
    if (m->read_back) {  // (the eval model) [wte | wpe] and the tail, read back
        m->read_back(m, m->w_global, 0, emb);
        m->read_back(m, m->w_global + emb, lnf, tail);
        return globals_packed(m->w_global, c);
    }
    if (weights_sharded(&m->shard)) {  // gather [wte | wpe] and the final layernorm, packed
        if (g_ledger.trace) printf("  gather embeddings and final layernorm: %zu B\n", m->plan.table * e);
        gather_weights(m, m->gather_global, 0, emb);
        gather_weights(m, (char *)m->gather_global + emb * e, lnf, lnf + tail);
        if (m->dtype == DT_FP32) return globals_packed(m->gather_global, c);
        dtype_load(m->w_global, m->gather_global, m->plan.table, m->dtype);
        return globals_packed(m->w_global, c);
    }
    if (m->dtype == DT_FP32) return globals_flat(m->params, c);
    dtype_load(m->w_global, m->params_lp, emb, m->dtype);
    dtype_load(m->w_global + emb, (const uint16_t *)m->params_lp + lnf, tail, m->dtype);
    return globals_packed(m->w_global, c);
}

// Their gradients: the stored fp32 ones, or grad_global (zeroed here; added into
// the 16-bit grads, or reduce-scattered, by global_grads_done).
Globals global_grads(GPT *m) {
    if (gpt_frozen(m)) return (Globals){NULL, NULL, NULL, NULL, NULL};
    if (!m->bucketed) return globals_flat(m->grads, &m->cfg);
    memset(m->grad_global, 0, m->plan.table * sizeof(float));
    return globals_packed(m->grad_global, &m->cfg);
}

void global_grads_done(GPT *m) {
    if (!m->bucketed || gpt_frozen(m)) return;
    const GPTConfig *c = &m->cfg;
    size_t emb = embedding_param_count(c), lnf = layer_offset(c, c->layers), tail = tail_param_count(c);
    if (grads_sharded(&m->shard)) {
        if (g_ledger.trace)
            printf("  reduce-scatter embeddings and final layernorm: %zu B\n", m->plan.table * sizeof(float));
        reduce_scatter_grads(m, m->grad_global, 0, emb);
        reduce_scatter_grads(m, m->grad_global + emb, lnf, lnf + tail);
        return;
    }
    dtype_accumulate(m->grads_lp, m->grad_global, emb, m->grad_dtype);
    dtype_accumulate((uint16_t *)m->grads_lp + lnf, m->grad_global + emb, tail, m->grad_dtype);
}

// --- --fused-ce: the table a chunk of rows at a time ------------------------------------

// Chunk k of the table's first `rows` rows: its weights, and the end of its backward.
float *table_chunk_weights(GPT *m, int rows, int k) { return fetch_params(m, table_chunk(&m->plan, &m->cfg, rows, k)); }

void table_chunk_grads_done(GPT *m, int rows, int k) { grads_params_done(m, table_chunk(&m->plan, &m->cfg, rows, k)); }

// The LM head's chunk k (wte's, or an untied head's): its weights, and the end of its backward.
float *head_chunk_weights(GPT *m, int k) { return fetch_params(m, head_chunk(&m->plan, &m->cfg, k)); }

void head_chunk_grads_done(GPT *m, int k) { grads_params_done(m, head_chunk(&m->plan, &m->cfg, k)); }

#endif
