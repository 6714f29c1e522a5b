// gpu/weights.h — where an op's weights come from, and where its gradients go,
// on the GPU: cpu/weights.h's rooms with device pointers, in the dtype (no
// widening: the kernels read 16 bits). A piece of the flat array (core/
// plan.h) is the stored weights this rank holds, or gathered from every
// rank's shard just before the op that reads it (ZeRO stage 3); its
// gradients go into the stored gradients, or into a bucket reduce-scattered
// over the ranks as soon as the op's backward is done (stages 2, 3).
// ZeRO's collectives (parallel/zero.h's arithmetic; NCCL, or parallel/staging.h's
// host-staged MPI calls) at their points of the step:
//   stage 3, before a piece's weights are used (forward, rebuild, backward):  gpu_gather
//   stages 2, 3, when a piece's backward is done:                          gpu_reduce_scatter
//   stages 0, 1, after the whole backward:                                 gpu_gpt_reduce_grads
//   stages 1, 2, after the optimizer step (and init, resume):              gpu_allgather_blocks
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
#include "memory/ledger.h"
#include "parallel/comm.h"
#include "parallel/staging.h"
#include "parallel/zero.h"

// --- the collectives, on either backend (--comm) ------------------------------------------

// All-gather: rank r's part is bytes[r] bytes at data + at[r], this rank's in
// place; on return every part is. NCCL's bytes sent are counted here as
// parallel/comm.h counts MPI's (ring).
void gpu_allgather(GpuGPT *m, void *data, const size_t *bytes, const size_t *at) {
    if (!m->nccl) {
        staged_allgather(&m->staging, m->shard.comm, data, bytes, at);
        return;
    }
    CommGroup *g = m->shard.comm;  // (the communicator is the group's: app/launch.h open_comm_backend)
    gpu_nccl_allgather(data, bytes, at, g->size);
    comm_count(g, (long long)bytes[g->rank] * (g->size - 1));
}

// Reduce-scatter: src holds nranks parts of counts[r] elements (dtype); this
// rank's summed part is written to dst, or with `accumulate` added into it.
// MPI sums in fp32 through the host buffer; NCCL sums in the dtype, in place in
// src (a bucket, or the gradients themselves), then adds it into dst.
void gpu_reduce_scatter_parts(GpuGPT *m, void *src, const int *counts, void *dst, int accumulate) {
    if (!m->nccl) {
        staged_reduce_scatter(&m->staging, m->shard.comm, src, counts, dst, m->dtype, accumulate);
        return;
    }
    CommGroup *g = m->shard.comm;
    int N = g->size, me = g->rank;
    size_t *n = malloc(sizeof(size_t) * N), before = 0, total = 0;
    for (int r = 0; r < N; r++) {
        if (r == me) before = total;
        n[r] = (size_t)counts[r], total += n[r];
    }
    gpu_nccl_reduce_scatter(m->dtype, src, n, N);
    comm_count(g, (long long)(total - n[me]) * (long long)m->e);
    void *mine = at_elem(m, src, before);
    if (n[me] && accumulate) cu_add_into(m->dtype, dst, mine, n[me]);
    else if (n[me] && dst != mine) gpu_copy(dst, mine, n[me] * m->e);
    free(n);
}

// Stage 3: every rank's weights of [lo, hi) into dst (a gather buffer, in the
// dtype). With --offload opt,params this rank's part comes up from the
// page-locked weight shard first (queued: the host writes the shard only in
// the optimizer's step, after the step's numbers were read).
void gpu_gather(GpuGPT *m, void *dst, size_t lo, size_t hi) {
    const Shard *sh = &m->shard;
    int N = sh->nranks, me = sh->rank, *pieces = malloc(sizeof(int) * N);
    size_t *first = malloc(sizeof(size_t) * N), *bytes = malloc(sizeof(size_t) * N), *at = malloc(sizeof(size_t) * N);
    shard_pieces(sh, lo, hi, pieces, first);
    for (int r = 0; r < N; r++) at[r] = pieces[r] ? (first[r] - lo) * m->e : 0, bytes[r] = pieces[r] * m->e;
    void *own = at_elem(m, m->params, first[me] - m->params_base);
    if (bytes[me] && (m->plan.offload & OFFLOAD_PARAMS)) {
        double t0 = now_seconds();
        gpu_upload_queued((char *)dst + at[me], own, bytes[me]);
        traffic_add(TR_UP, (long long)bytes[me], now_seconds() - t0);
    } else if (bytes[me]) {
        gpu_copy((char *)dst + at[me], own, bytes[me]);
    }
    gpu_allgather(m, dst, bytes, at);
    free(pieces); free(first); free(bytes); free(at);
}

// Stages 2, 3: `bucket` holds this rank's gradients of [lo, hi) (dtype); sum
// them over the ranks, each rank adding the part it owns into its gradient shard.
void gpu_reduce_scatter(GpuGPT *m, void *bucket, size_t lo, size_t hi) {
    const Shard *sh = &m->shard;
    int N = sh->nranks, me = sh->rank, *counts = malloc(sizeof(int) * N);
    size_t *first = malloc(sizeof(size_t) * N);
    shard_pieces(sh, lo, hi, counts, first);
    void *mine = counts[me] ? at_elem(m, m->grads, first[me] - m->grads_base) : m->grads;
    gpu_reduce_scatter_parts(m, bucket, counts, mine, 1);
    free(counts); free(first);
}

// An array kept whole (padded to N S elements of elem_bytes): every rank's block of S to every rank.
void gpu_allgather_blocks(GpuGPT *m, void *array, size_t elem_bytes) {
    const Shard *sh = &m->shard;
    int N = sh->nranks;
    size_t *bytes = malloc(sizeof(size_t) * N), *at = malloc(sizeof(size_t) * N);
    for (int r = 0; r < N; r++) bytes[r] = sh->size * elem_bytes, at[r] = r * sh->size * elem_bytes;
    gpu_allgather(m, array, bytes, at);
    free(bytes); free(at);
}

// --shard-group: the gradients this rank's optimizer reads, summed across
// the groups through the staging buffer (parallel/staging.h staged_sum_across).
void gpu_reduce_across(GpuGPT *m) {
    const Shard *sh = &m->shard;
    if (sh->groups == 1) return;
    if (g_ledger.trace)
        printf("  all-reduce the gradients across %d groups: %zu B\n", sh->groups, across_len(sh) * 4);
    staged_sum_across(&m->staging, sh->across, at_elem(m, m->grads, across_at(sh)), across_len(sh), m->dtype);
}

// Stages 0, 1, after the backward: sum the whole gradient over the ranks (a
// reduce-scatter gives each rank the sum of its block); stage 0 then
// all-gathers the sums, stage 1 keeps its own (its optimizer reads no other).
// With --shard-group that was inside the group; then across the groups.
void gpu_gpt_reduce_grads(GpuGPT *m) {
    const Shard *sh = &m->shard;
    if (sh->nranks == 1 || sh->stage >= 2) { gpu_reduce_across(m); return; }
    if (g_ledger.trace)
        printf("  %s the gradients: %zu B\n", sh->stage == 0 ? "all-reduce (reduce-scatter + all-gather)" : "reduce-scatter",
               sh->padded * m->e);
    int *counts = malloc(sizeof(int) * sh->nranks);
    for (int r = 0; r < sh->nranks; r++) counts[r] = (int)sh->size;
    void *mine = at_elem(m, m->grads, (size_t)sh->rank * sh->size);  // this rank's block (own_lo stops at P)
    gpu_reduce_scatter_parts(m, m->grads, counts, mine, 0);
    free(counts);
    if (sh->stage == 0) gpu_allgather_blocks(m, m->grads, m->e);
    gpu_reduce_across(m);
}

// --- the weights' life across a step ---------------------------------------------------

// After the master weights changed (init, resume): round them into the
// 16-bit compute weights (fp32: they are the same array); at stages 1, 2
// every rank's updated block goes to every rank.
void gpu_gpt_sync_params(GpuGPT *m) {
    if (m->dtype != DT_FP32 && m->master_n)  // (a rank may own no parameters: a toy model on many ranks)
        cu_store_dtype(m->dtype, at_elem(m, m->params, m->master_base - m->params_base), m->master, m->master_n);
    if (m->shard.stage == 1 || m->shard.stage == 2) gpu_allgather_blocks(m, m->params, m->e);
}

// GPT-2 init, the same numbers as core/config.h's init_params (same generator,
// same order), made on the host a chunk at a time; the master's part of them
// (all, or this rank's share) is uploaded.
void gpu_gpt_init(GpuGPT *m, uint64_t seed) {
    enum { CHUNK = 1 << 18 };
    float *chunk = malloc(sizeof(float) * CHUNK);  // 1 MiB of host staging, not a model buffer
    uint64_t s = rng_seed(seed);
    size_t filled = 0, at = 0, flat = 0, lo = m->master_base, hi = lo + m->master_n;
    for (int i = 0; i < m->ntensors; i++)
        for (size_t j = 0; j < m->tensors[i].count; j++, flat++) {
            float x = init_value(&m->tensors[i], i, j, &m->cfg, &s);  // every value drawn, to keep the sequence
            if (flat < lo || flat >= hi) continue;
            chunk[filled++] = x;
            if (filled == CHUNK) { gpu_upload(m->master + at, chunk, filled * 4); at += filled; filled = 0; }
        }
    gpu_upload(m->master + at, chunk, filled * 4);
    free(chunk);
    gpu_gpt_sync_params(m);
}

void gpu_gpt_zero_grad(GpuGPT *m) { gpu_zero(m->grads, shard_grads_len(&m->shard) * m->e); }

// Do all ranks hold the same weights (stages 0 to 2)? The compute weights are
// hashed a staging buffer at a time on the host (parallel/zero.h's hash),
// every rank taking part; 1 on one rank and at stage 3.
int gpu_replicas_identical(GpuGPT *m) {
    const Shard *sh = &m->shard;
    if (comm_nranks == 1 || sh->stage == 3) return 1;
    size_t bytes = m->nparams * m->e, piece = m->staging.cap / 8 * 8;
    uint64_t h = REPLICA_HASH_START;
    for (size_t at = 0; at < bytes; at += piece) {
        size_t n = bytes - at < piece ? bytes - at : piece;
        gpu_download(m->staging.host, (char *)m->params + at, n);
        h = replica_hash(h, m->staging.host, n);
    }
    return zero_hashes_agree(sh, h);
}

// --- a piece at a time ---------------------------------------------------------------

// A piece's weights, in the dtype, for the op about to run: where this rank
// keeps them, or at stage 3 gathered into gather_piece first (before the op's
// forward, again before its backward, and before a rebuild). Good until the
// next gpu_fetch_params.
void *gpu_fetch_params(GpuGPT *m, Piece p, const char *what) {
    if (m->shard.stage != 3) return at_elem(m, m->params, p.lo - m->params_base);
    if (g_ledger.trace) printf("  gather %s: %zu B\n", what, p.n * m->e);
    gpu_gather(m, m->gather_piece, p.lo, p.lo + p.n);
    return m->gather_piece;
}

// Where the backward of a piece adds its gradients: the stored gradients, or
// at stages 2, 3 the bucket grad_piece (zeroed here), which
// gpu_grads_params_done reduce-scatters.
void *gpu_grads_params(GpuGPT *m, Piece p) {
    if (m->shard.stage < 2) return at_elem(m, m->grads, p.lo - m->grads_base);
    gpu_zero(m->grad_piece, p.n * m->e);
    return m->grad_piece;
}

void gpu_grads_params_done(GpuGPT *m, Piece p, const char *what) {
    if (m->shard.stage < 2) return;
    if (g_ledger.trace) printf("  reduce-scatter %s: %zu B\n", what, p.n * m->e);
    gpu_reduce_scatter(m, m->grad_piece, p.lo, p.lo + p.n);
}

// One op's weight and bias (or their gradients) on the device: the bias follows the weight.
typedef struct {
    void *w, *b;
} GpuOpParams;

GpuOpParams gpu_op_weights(GpuGPT *m, int l, int op) {
    char what[48] = "";  // --trace names the piece; nothing to format otherwise
    if (g_ledger.trace) snprintf(what, sizeof what, "layer %d %s", l, op_names[op]);
    void *p = gpu_fetch_params(m, op_piece(&m->cfg, l, op), what);
    GpuOpParams w = {p, at_elem(m, p, op_weight_count(m->cfg.channels, op))};
    return w;
}

GpuOpParams gpu_op_grads(GpuGPT *m, int l, int op) {
    void *p = gpu_grads_params(m, op_piece(&m->cfg, l, op));
    GpuOpParams g = {p, at_elem(m, p, op_weight_count(m->cfg.channels, op))};
    return g;
}

void gpu_op_grads_done(GpuGPT *m, int l, int op) {
    char what[48] = "";
    if (g_ledger.trace) snprintf(what, sizeof what, "layer %d %s", l, op_names[op]);
    gpu_grads_params_done(m, op_piece(&m->cfg, l, op), what);
}

// --- the globals: the whole table at once (the LM head without --fused-ce) ------------------

// [wte | wpe] and the final layernorm packed in a buffer (stage 3's gather,
// stages 2 and 3's bucket), or in the flat layout (the stored arrays).
GpuGlobals gpu_globals_packed(const GpuGPT *m, void *base) {
    size_t emb = ((size_t)padded_vocab(&m->cfg) + m->cfg.max_seq) * m->cfg.channels;
    GpuGlobals g = {base, at_elem(m, base, (size_t)padded_vocab(&m->cfg) * m->cfg.channels), at_elem(m, base, emb),
                    at_elem(m, base, emb + m->cfg.channels)};
    return g;
}

GpuGlobals gpu_globals_flat(const GpuGPT *m, void *base) {  // (an array holding every parameter)
    size_t lnf = layer_offset(&m->cfg, m->cfg.layers);
    GpuGlobals g = {base, at_elem(m, base, (size_t)padded_vocab(&m->cfg) * m->cfg.channels), at_elem(m, base, lnf),
                    at_elem(m, base, lnf + m->cfg.channels)};
    return g;
}

// The globals' weights (stage 3: gathered now).
GpuGlobals gpu_global_weights(GpuGPT *m) {
    if (m->shard.stage != 3) return gpu_globals_flat(m, m->params);
    const GPTConfig *c = &m->cfg;
    size_t emb = ((size_t)padded_vocab(c) + c->max_seq) * c->channels, lnf = layer_offset(c, c->layers);
    if (g_ledger.trace) printf("  gather embeddings and final layernorm: %zu B\n", m->plan.table * m->e);
    gpu_gather(m, m->gather_global, 0, emb);
    gpu_gather(m, at_elem(m, m->gather_global, emb), lnf, lnf + 2 * c->channels);
    return gpu_globals_packed(m, m->gather_global);
}

// Their gradients: the stored ones, or at stages 2, 3 grad_global (zeroed
// here), reduce-scattered by gpu_global_grads_done.
GpuGlobals gpu_global_grads(GpuGPT *m) {
    if (m->shard.stage < 2) return gpu_globals_flat(m, m->grads);
    gpu_zero(m->grad_global, m->plan.table * m->e);
    return gpu_globals_packed(m, m->grad_global);
}

void gpu_global_grads_done(GpuGPT *m) {
    if (m->shard.stage < 2) return;
    const GPTConfig *c = &m->cfg;
    size_t emb = ((size_t)padded_vocab(c) + c->max_seq) * c->channels, lnf = layer_offset(c, c->layers);
    if (g_ledger.trace) printf("  reduce-scatter embeddings and final layernorm: %zu B\n", m->plan.table * m->e);
    gpu_reduce_scatter(m, m->grad_global, 0, emb);
    gpu_reduce_scatter(m, at_elem(m, m->grad_global, emb), lnf, lnf + 2 * c->channels);
}

// --- --fused-ce: the table a chunk of rows at a time ------------------------------------

void *gpu_table_chunk_weights(GpuGPT *m, int rows, int k) {
    Piece p = table_chunk(&m->plan, &m->cfg, rows, k);
    char what[48] = "";
    size_t C = m->cfg.channels;
    if (g_ledger.trace) snprintf(what, sizeof what, "table rows %zu..%zu", p.lo / C, (p.lo + p.n) / C - 1);
    return gpu_fetch_params(m, p, what);
}

void gpu_table_chunk_grads_done(GpuGPT *m, int rows, int k) {
    Piece p = table_chunk(&m->plan, &m->cfg, rows, k);
    char what[48] = "";
    size_t C = m->cfg.channels;
    if (g_ledger.trace) snprintf(what, sizeof what, "table rows %zu..%zu", p.lo / C, (p.lo + p.n) / C - 1);
    gpu_grads_params_done(m, p, what);
}

#endif
