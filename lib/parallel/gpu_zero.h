// parallel/gpu_zero.h — ZeRO's collectives on the GPU: parallel/zero.h's, on
// device buffers in the storage dtype, over the backend --comm chose: NCCL on
// the device buffers (cuda/nccl.cu), or MPI through the page-locked staging
// buffer (parallel/staging.h), which sums in fp32 as the CPU does. The GPU
// model (gpu/weights.h) calls them at the points of the step the plan names,
// as the CPU model calls zero.h's; the layout (Shard, shard_pieces) is zero.h's.
#ifndef GPTMEM_GPU_ZERO_H
#define GPTMEM_GPU_ZERO_H

#include <stdio.h>
#include <stdlib.h>
#include "core/clock.h"
#include "core/dtype.h"
#include "core/traffic.h"
#include "cuda/api.h"
#include "memory/ledger.h"
#include "parallel/comm.h"
#include "parallel/staging.h"
#include "parallel/zero.h"

// A rank's GPU collectives: its shard (the layout and the group's
// communicators), the backend, the dtype of what they move.
typedef struct {
    const Shard *shard;
    Staging *staging;  // the MPI backend's page-locked host buffer
    int nccl;          // --comm nccl: on the device buffers
    int dtype;
} GpuComm;

// Element i of a device array in the dtype.
static void *dt_at(const GpuComm *c, const void *p, size_t i) { return (char *)p + i * dtype_size(c->dtype); }

// All-gather: rank r's part is bytes[r] bytes at data + at[r], this rank's in
// place; on return every part is. NCCL's bytes sent are counted here as
// parallel/comm.h counts MPI's (ring).
void gpu_zero_allgather(const GpuComm *c, void *data, const size_t *bytes, const size_t *at) {
    CommGroup *g = c->shard->comm;  // (NCCL's communicator is the group's: app/launch.h open_comm_backend)
    if (!c->nccl) {
        staged_allgather(c->staging, g, data, bytes, at);
        return;
    }
    gpu_nccl_allgather(NCCL_SHARDS, data, bytes, at, g->size);
    comm_count(g, (long long)bytes[g->rank] * (g->size - 1));
}

// Reduce-scatter: src holds nranks parts of counts[r] elements (dtype); this
// rank's summed part is written to dst, or with `accumulate` added into it.
// MPI sums in fp32 through the host buffer; NCCL sums in the dtype, in place in
// src (a bucket, or the gradients themselves), then adds it into dst.
void gpu_zero_reduce_scatter_parts(const GpuComm *c, void *src, const int *counts, void *dst, int accumulate) {
    CommGroup *g = c->shard->comm;
    if (!c->nccl) {
        staged_reduce_scatter(c->staging, g, src, counts, dst, c->dtype, accumulate);
        return;
    }
    int N = g->size, me = g->rank;
    size_t *n = malloc(sizeof(size_t) * N), before = 0, total = 0, e = dtype_size(c->dtype);
    for (int r = 0; r < N; r++) {
        if (r == me) before = total;
        n[r] = (size_t)counts[r], total += n[r];
    }
    gpu_nccl_reduce_scatter(NCCL_SHARDS, c->dtype, src, n, N);
    comm_count(g, (long long)(total - n[me]) * (long long)e);
    void *mine = dt_at(c, src, before);
    if (n[me] && accumulate) cu_add_into(c->dtype, dst, mine, n[me]);
    else if (n[me] && dst != mine) gpu_copy(dst, mine, n[me] * e);
    free(n);
}

// Stage 3: every rank contributes the weights of [lo, hi) it owns (from its
// shard `weights`, element 0 = parameter weights_base); dst receives all of
// them. With `pinned` (--offload opt,params) the shard is page-locked host
// memory: this rank's part goes up first, queued (the host writes the shard
// only in the optimizer's step, after the step's numbers were read).
void gpu_zero_gather(const GpuComm *c, void *dst, const void *weights, size_t weights_base, size_t lo, size_t hi,
                     int pinned) {
    const Shard *sh = c->shard;
    size_t e = dtype_size(c->dtype);
    int N = sh->nranks, me = sh->rank, *pieces = malloc(sizeof(int) * N);
    size_t *first = malloc(sizeof(size_t) * N), *bytes = malloc(sizeof(size_t) * N), *at = malloc(sizeof(size_t) * N);
    shard_pieces(sh, lo, hi, pieces, first);
    for (int r = 0; r < N; r++) at[r] = pieces[r] ? (first[r] - lo) * e : 0, bytes[r] = pieces[r] * e;
    const void *own = dt_at(c, weights, first[me] - weights_base);
    if (bytes[me] && pinned) {
        double t0 = now_seconds();
        gpu_upload_queued((char *)dst + at[me], own, bytes[me]);
        traffic_add(TR_UP, (long long)bytes[me], now_seconds() - t0);
    } else if (bytes[me]) {
        gpu_copy((char *)dst + at[me], own, bytes[me]);
    }
    gpu_zero_allgather(c, dst, bytes, at);
    free(pieces); free(first); free(bytes); free(at);
}

// Stages 2, 3: `bucket` holds this rank's gradients of [lo, hi) (dtype); sum
// them over the ranks, each rank adding the part it owns into its gradient
// shard `grads` (element 0 = parameter grads_base).
void gpu_zero_reduce_scatter(const GpuComm *c, void *bucket, size_t lo, size_t hi, void *grads, size_t grads_base) {
    const Shard *sh = c->shard;
    int N = sh->nranks, me = sh->rank, *counts = malloc(sizeof(int) * N);
    size_t *first = malloc(sizeof(size_t) * N);
    shard_pieces(sh, lo, hi, counts, first);
    void *mine = counts[me] ? dt_at(c, grads, first[me] - grads_base) : grads;
    gpu_zero_reduce_scatter_parts(c, bucket, counts, mine, 1);
    free(counts); free(first);
}

// An array kept whole (padded to N S elements of elem_bytes): every rank's block of S to every rank
// (the weights after the optimizer step at stages 1, 2; the gradients' sums at stage 0).
void gpu_zero_allgather_blocks(const GpuComm *c, void *array, size_t elem_bytes) {
    const Shard *sh = c->shard;
    int N = sh->nranks;
    size_t *bytes = malloc(sizeof(size_t) * N), *at = malloc(sizeof(size_t) * N);
    for (int r = 0; r < N; r++) bytes[r] = sh->size * elem_bytes, at[r] = r * sh->size * elem_bytes;
    gpu_zero_allgather(c, array, bytes, at);
    free(bytes); free(at);
}

// Stages 0, 1: sum the whole gradient over the ranks (a reduce-scatter gives
// each rank the sum of its block); stage 0 then all-gathers the sums, stage 1
// keeps its own (its optimizer reads no other).
void gpu_zero_reduce_full(const GpuComm *c, void *grads) {
    const Shard *sh = c->shard;
    if (g_ledger.trace)
        printf("  %s the gradients: %zu B\n", sh->stage == 0 ? "all-reduce (reduce-scatter + all-gather)" : "reduce-scatter",
               sh->padded * dtype_size(c->dtype));
    int *counts = malloc(sizeof(int) * sh->nranks);
    for (int r = 0; r < sh->nranks; r++) counts[r] = (int)sh->size;
    void *mine = dt_at(c, grads, (size_t)sh->rank * sh->size);  // this rank's block (own_lo stops at P)
    gpu_zero_reduce_scatter_parts(c, grads, counts, mine, 0);
    free(counts);
    if (sh->stage == 0) gpu_zero_allgather_blocks(c, grads, dtype_size(c->dtype));
}

// --shard-group, after the gradients were reduced inside the group: the ones
// this rank's optimizer reads, summed across the groups through the staging
// buffer (parallel/staging.h staged_sum_across).
void gpu_zero_reduce_across(const GpuComm *c, void *grads) {
    const Shard *sh = c->shard;
    if (sh->groups == 1) return;
    if (g_ledger.trace)
        printf("  all-reduce the gradients across %d groups: %zu B\n", sh->groups, across_len(sh) * 4);
    staged_sum_across(c->staging, sh->across, dt_at(c, grads, across_at(sh)), across_len(sh), c->dtype);
}

#endif
