// parallel/zero.h — ZeRO: how N ranks share the flat parameter array, and the
// collectives that move its pieces. Everything about sharding is here; the
// models (cpu/weights.h, gpu/weights.h) hold one Shard each and call these at the
// moments of the step the plan names (core/plan.h).
//
// The shard layout: P parameters, N ranks. Each rank owns S = ceil(P / N),
// rounded up to whole blocks of ADAM_BLOCK (so that --adam-bits 8 quantizes
// the same blocks on any number of ranks), consecutive parameters: rank r
// owns [r S, min((r + 1) S, P)). Arrays a rank
// keeps whole are padded to N S elements (the last rank's share is short), so
// that every rank allocates the same and a block all-gather fills them. Which
// arrays are sharded grows with the stage:
//   stage 0: nothing sharded (data parallel: gradients all-reduced after the backward)
//   stage 1: + the optimizer's fp32 state: master weights (16-bit runs), Adam m and v
//   stage 2: + the gradients: each layer's are reduce-scattered as soon as its backward ends
//   stage 3: + the weights: each layer's are all-gathered before they are used
// With one rank nothing is sharded whatever the stage (stage 0, S = P).
//
// --shard-group K (the sharding factor; FSDP's hybrid sharding): the shards are
// taken over the K ranks of a group (ranks gK .. gK+K-1), and the N/K groups
// hold replicas. Everything above then reads "K ranks" for "N ranks", and the
// collectives run inside the group (comm_in_group); after the gradients are
// reduced inside it, each rank's part of them is summed across the groups
// (comm_across: the ranks that hold the same shard), so every group steps on
// the gradients of all N ranks. K = N is plain ZeRO; K = 1 is data parallel
// (a group of one shards nothing) with the sum across all N ranks.
//
// The functions below work on host memory and call parallel/comm.h's collectives; the
// arithmetic (shard_layout, shard_pieces, the array lengths) is the part a
// GPU model reuses with device buffers and other collective calls.
#ifndef GPTMEM_ZERO_H
#define GPTMEM_ZERO_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "parallel/comm.h"
#include "core/dtype.h"
#include "core/hash.h"
#include "core/plan.h"
#include "memory/ledger.h"
#include "core/sizes.h"

typedef struct {
    int stage;              // --zero S, or 0 with one rank in the group (nothing to shard)
    int rank, nranks;       // this rank's place in its group, the group's ranks (K; all ranks without groups)
    int groups;             // --shard-group: the groups that hold replicas (N / K; 1 without)
    CommGroup *comm;        // the group's collectives (comm_in_group; comm_world without groups)
    CommGroup *across;      // the same shard's ranks in the other groups (comm_across)
    size_t nparams;         // P
    size_t size;            // S = ceil(P / N) in whole ADAM_BLOCKs: the parameters each rank owns (P with one rank)
    size_t own_lo, own_hi;  // this rank owns [own_lo, own_hi) of the flat array
    size_t padded;          // N S: the length of an array kept whole (P with one rank)
} Shard;

// The layout of rank `rank` (of all the ranks) for the plan's stage, over the
// plan's ranks: its group of K (plan->ranks) with --shard-group, else all of them.
Shard shard_layout(size_t P, const Plan *plan, int rank) {
    Shard s;
    int nranks = plan->ranks;
    s.groups = plan->groups;
    s.comm = s.groups > 1 ? &comm_in_group : comm_data;  // (--tp: the data-parallel ranks, one of each group)
    s.across = &comm_across;
    rank = (comm_data == &comm_world ? rank : comm_data->rank) % nranks;  // (--tp: from its place among the data-parallel ranks)
    s.stage = plan->stage;
    s.rank = rank;
    s.nranks = nranks;
    s.nparams = P;
    s.size = (P + nranks - 1) / nranks;
    if (nranks > 1) s.size = (s.size + ADAM_BLOCK - 1) / ADAM_BLOCK * ADAM_BLOCK;
    s.padded = nranks > 1 ? s.size * nranks : P;
    s.own_lo = nranks > 1 ? (size_t)rank * s.size : 0;
    s.own_hi = nranks > 1 ? (s.own_lo + s.size < P ? s.own_lo + s.size : P) : P;
    if (s.own_lo > P) s.own_lo = P;
    return s;
}

// The stage's questions, asked of a rank's layout: which arrays are this
// rank's shard (core/plan.h shards_*), and the consequences the step reads.
int states_sharded(const Shard *s) { return shards_states(s->stage); }    // the fp32 master weights, m and v
int grads_sharded(const Shard *s) { return shards_grads(s->stage); }      // the gradients
int weights_sharded(const Shard *s) { return shards_weights(s->stage); }  // the compute weights
// Stage 0 on several ranks: every rank a replica of every array.
int replicas(const Shard *s) { return s->nranks > 1 && !states_sharded(s); }
// Stages 0, 1 on several ranks: the full gradients are summed over the ranks after the backward.
int reduces_full_grads(const Shard *s) { return s->nranks > 1 && !grads_sharded(s); }
// Stages 1, 2: each rank updates its shard of weights every rank keeps whole, then all-gathers them.
int gathers_updates(const Shard *s) { return states_sharded(s) && !weights_sharded(s); }

// How many elements each array holds on this rank (stage 3 shards the compute
// weights, stage 1 the optimizer's fp32 state, stage 2 the gradients), and
// the flat index of its element 0: own_lo for a shard, 0 for a whole array.
size_t shard_weights_len(const Shard *s) { return weights_sharded(s) ? s->size : s->padded; }
size_t shard_state_len(const Shard *s) { return states_sharded(s) ? s->size : s->padded; }
size_t shard_grads_len(const Shard *s) { return grads_sharded(s) ? s->size : s->padded; }
size_t shard_weights_base(const Shard *s) { return weights_sharded(s) ? s->own_lo : 0; }
size_t shard_state_base(const Shard *s) { return states_sharded(s) ? s->own_lo : 0; }
size_t shard_grads_base(const Shard *s) { return grads_sharded(s) ? s->own_lo : 0; }

// The parameters [lo, hi) this rank's optimizer updates: its own from stage 1
// on, all of them at stage 0 (every rank a replica).
void shard_state_range(const Shard *s, size_t *lo, size_t *hi) {
    *lo = states_sharded(s) ? s->own_lo : 0;
    *hi = states_sharded(s) ? s->own_hi : s->nparams;
}

// counts[r] = how many of the parameters [lo, hi) rank r owns; first[r] = the
// first of them (flat index). Ranks own consecutive shards, so the pieces of
// [lo, hi) are consecutive too, rank by rank.
void shard_pieces(const Shard *s, size_t lo, size_t hi, int *counts, size_t *first) {
    for (int r = 0; r < s->nranks; r++) {
        size_t a = (size_t)r * s->size, b = a + s->size;
        size_t x = lo > a ? lo : a, y = hi < b ? hi : b;
        counts[r] = y > x ? (int)(y - x) : 0;
        first[r] = x;
    }
}

// Stages 2, 3: `bucket` holds this rank's fp32 gradients of the parameters
// [lo, hi). Sum them over the ranks, each rank receiving the part it owns, and
// add that part into its gradient shard `grads` (stored as dtype, element 0
// = parameter grads_base).
void zero_reduce_scatter(const Shard *s, float *bucket, size_t lo, size_t hi, void *grads, size_t grads_base,
                         int dtype) {
    int *counts = malloc(sizeof(int) * s->nranks);
    size_t *first = malloc(sizeof(size_t) * s->nranks);
    shard_pieces(s, lo, hi, counts, first);
    comm_reduce_scatter(s->comm, bucket, counts);
    int mine = counts[s->rank];
    if (mine > 0) dtype_accumulate((char *)grads + (first[s->rank] - grads_base) * dtype_size(dtype), bucket, mine, dtype);
    free(counts);
    free(first);
}

// Stage 3: every rank contributes the weights of [lo, hi) it owns (from its
// shard `weights`, element 0 = parameter weights_base); dst receives all of
// them, in the storage dtype.
void zero_gather(const Shard *s, void *dst, const void *weights, size_t weights_base, size_t lo, size_t hi,
                 int dtype) {
    size_t e = dtype_size(dtype);
    int *counts = malloc(sizeof(int) * s->nranks), *displs = malloc(sizeof(int) * s->nranks);
    size_t *first = malloc(sizeof(size_t) * s->nranks);
    shard_pieces(s, lo, hi, counts, first);
    for (int r = 0; r < s->nranks; r++) {
        displs[r] = counts[r] ? (int)((first[r] - lo) * e) : 0;
        counts[r] = (int)(counts[r] * e);
    }
    if (counts[s->rank])
        memcpy((char *)dst + displs[s->rank], (const char *)weights + (first[s->rank] - weights_base) * e,
               counts[s->rank]);
    comm_allgather(s->comm, dst, counts, displs);
    free(counts); free(displs); free(first);
}

// Stages 0, 1: sum the full gradient arrays (padded, stored as dtype) over the
// ranks, REDUCE_CHUNK elements of every rank's shard at a time, through the
// fp32 buffer reduce_buf (nranks x min(S, REDUCE_CHUNK) floats): a
// reduce-scatter gives each rank the sum of its own chunk; stage 0 then
// all-gathers the sums so every rank has the whole reduced gradient, stage 1
// keeps only its own (its optimizer reads no other).
void zero_reduce_full(const Shard *s, void *grads, float *reduce_buf, int dtype) {
    int N = s->nranks;
    size_t S = s->size, K = S < REDUCE_CHUNK ? S : REDUCE_CHUNK, e = dtype_size(dtype);
    char *g = grads;
    if (g_ledger.trace)
        printf("  %s the gradients: %zu B in chunks of %zu floats per rank\n",
               s->stage == 0 ? "all-reduce (reduce-scatter + all-gather)" : "reduce-scatter", S * N * sizeof(float), K);
    for (size_t c0 = 0; c0 < S; c0 += K) {
        size_t k = S - c0 < K ? S - c0 : K;
        for (int r = 0; r < N; r++) dtype_load(reduce_buf + (size_t)r * k, g + ((size_t)r * S + c0) * e, k, dtype);
        comm_reduce_scatter_block(s->comm, reduce_buf, (int)k);
        if (s->stage == 0) {
            memmove(reduce_buf + (size_t)s->rank * k, reduce_buf, k * sizeof(float));
            comm_allgather_block(s->comm, reduce_buf, (long long)k * sizeof(float));
            for (int r = 0; r < N; r++) dtype_store(g + ((size_t)r * S + c0) * e, reduce_buf + (size_t)r * k, k, dtype);
        } else {
            dtype_store(g + ((size_t)s->rank * S + c0) * e, reduce_buf, k, dtype);
        }
    }
}

// Stages 1, 2, after the optimizer updated this rank's shard of the (whole,
// padded) compute weights: every rank's updated shard goes to every rank.
void zero_allgather_weights(const Shard *s, void *weights, int dtype) {
    if (s->stage != 1 && s->stage != 2) return;
    if (g_ledger.trace) printf("  all-gather the updated weights: %zu B\n", s->padded * dtype_size(dtype));
    comm_allgather_block(s->comm, weights, (long long)s->size * dtype_size(dtype));
}

// --shard-group: the elements of the gradients this rank's optimizer reads
// (all of them at stage 0, a group of one; its shard from stage 1) and where
// they start in its gradient array.
size_t across_len(const Shard *s) { return s->stage == 0 ? s->padded : s->size; }
size_t across_at(const Shard *s) { return s->stage == 1 ? s->own_lo : 0; }

// The fp32 buffer zero_reduce_across works in: R blocks of q = ceil(c / R)
// floats, c = min(across_len, REDUCE_CHUNK) (R: the groups).
size_t across_buffer_floats(const Shard *s) {
    size_t n = across_len(s), c = n < REDUCE_CHUNK ? n : REDUCE_CHUNK, R = (size_t)s->groups;
    return s->groups > 1 ? R * ((c + R - 1) / R) : 0;
}

// --shard-group, after the gradients were reduced inside the group: sum this
// rank's part of them (stored as dtype in grads) over the groups, a chunk of
// c elements at a time through buf (across_buffer_floats): the chunk widened
// into R blocks of q, a reduce-scatter gives each rank one block's sum, an
// all-gather gives every rank all of them. Each sum is made once, so every
// group ends with the very same bits; a rank sends 2 q 4 bytes a chunk,
// the ring all-reduce's 2 (R-1)/R of the chunk.
void zero_reduce_across(const Shard *s, void *grads, float *buf, int dtype) {
    if (s->groups == 1) return;
    size_t n = across_len(s), c = n < REDUCE_CHUNK ? n : REDUCE_CHUNK, R = (size_t)s->groups, q = (c + R - 1) / R;
    size_t e = dtype_size(dtype);
    char *g = (char *)grads + across_at(s) * e;
    if (g_ledger.trace) printf("  all-reduce the gradients across %zu groups: %zu B in chunks of %zu floats\n", R, n * 4, c);
    for (size_t c0 = 0; c0 < n; c0 += c) {
        size_t k = n - c0 < c ? n - c0 : c;
        memset(buf, 0, R * q * sizeof(float));
        dtype_load(buf, g + c0 * e, k, dtype);
        comm_reduce_scatter_block(s->across, buf, (int)q);
        memmove(buf + (size_t)s->across->rank * q, buf, q * sizeof(float));
        comm_allgather_block(s->across, buf, (long long)q * sizeof(float));
        dtype_store(g + c0 * e, buf, k, dtype);
    }
}

// Are the weights the same on every rank? Each rank hashes the weights it
// holds whole (stages 0 to 2; at stage 3 each rank holds only its shard, so
// there is nothing to compare; core/hash.h's replica_hash) and rank 0
// compares: 1 yes, 0 no.
// Every rank passes its hash; rank 0 gets 1 if all are equal, 0 if not (the others get 1).
// (--tp: the replicas are the data-parallel ranks, one of each group; each group's first rank compares
// theirs, and every rank gets whether all agree.)
int zero_hashes_agree(const Shard *s, uint64_t h) {
    (void)s;  // every rank, in every group
    CommGroup *g = comm_data;
    uint64_t *all = malloc(sizeof(uint64_t) * g->size);
    comm_gather_in(g, &h, all, sizeof h, 0);
    int same = 1;
    for (int r = 1; r < g->size && g->rank == 0; r++) same &= all[r] == all[0];
    free(all);
    return comm_data == &comm_world ? same : !comm_any(!same);
}

int zero_replicas_identical(const Shard *s, const void *weights, int dtype) {
    if (comm_data_ranks() == 1 || s->stage == 3) return 1;
    return zero_hashes_agree(s, replica_hash(REPLICA_HASH_START, weights, s->nparams * dtype_size(dtype)));
}

#endif
