// parallel/staging.h — host staging: parallel/comm.h's collectives on data in device memory,
// through a host buffer.
//
// For ZeRO on the GPU with MPI (several ranks on one GPU, which
// NCCL refuses): MPI works on host memory, so a collective on device data goes
// through a host buffer of `cap` bytes (pinned, when a GPU model allocates it;
// ledger: comm) a chunk at a time: each rank's part of the chunk is copied
// down, the MPI collective runs on the host buffer, the result is copied up.
// Chunk c holds elements [c k, (c + 1) k) of every rank's part, k = cap / N
// (per rank), so parts of any length, 0 included, work. The chunking is the
// same whatever memory the data is in; with on_gpu 0 the copies are memcpy,
// which is how tests/test_comm.c checks it on the CPU against the direct
// collectives. The bytes sent are counted by the collectives it calls: the
// same total as the direct call.
#ifndef GPTMEM_STAGING_H
#define GPTMEM_STAGING_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "parallel/comm.h"
#include "core/dtype.h"
#include "core/sizes.h"
#include "cuda/api.h"  // the host-device copies

typedef struct {
    void *host;  // the staging buffer
    size_t cap;  // its bytes: at least one element a rank ((4 + e) N for the reduce-scatter, e per stored element)
    int on_gpu;  // the data is in device memory (cuda/api.h's copies), else host memory
} Staging;

void staging_down(const Staging *st, void *host, const void *data, size_t bytes) {
    if (st->on_gpu) gpu_download(host, data, bytes);
    else memcpy(host, data, bytes);
}

void staging_up(const Staging *st, void *data, const void *host, size_t bytes) {
    if (st->on_gpu) gpu_upload(data, host, bytes);
    else memcpy(data, host, bytes);
}

// k, the elements of each rank's part a chunk holds: at least one, or the
// buffer is too small for N ranks (a bug in the caller: it sizes the buffer).
// The elements of element_bytes each of `ranks` ranks can put in the buffer at once.
size_t staging_chunk(const Staging *st, size_t element_bytes, int ranks) {
    size_t k = st->cap / element_bytes / (size_t)ranks;
    if (k == 0) {
        fprintf(stderr, "error: a staging buffer of %zu bytes is too small for %d ranks; this is a bug in gptmem\n",
                st->cap, ranks);
        exit(1);
    }
    return k;
}

// How many elements of a part of `count` chunk c holds, chunks of k (k fits an int: the buffer's share).
int chunk_count(size_t count, size_t c, size_t k) {
    return c * k >= count ? 0 : count - c * k < k ? (int)(count - c * k) : (int)k;
}

// comm_reduce_scatter on data in device (or host) memory, stored as dtype
// (core/dtype.h): src holds sum(counts) elements, rank r's part after rank r-1's.
// The sum is taken in fp32, as parallel/zero.h does on the CPU: a chunk of each part
// is copied down (into `down`, then widened into `sum`), reduced, and this
// rank's summed part goes to dst[0..counts[rank]), rounded to dtype: written
// over it, or with `accumulate` added to what dst holds (a gradient shard).
// dst may lie inside src at this rank's part, or at src itself: writing
// chunk c of the result over elements [c k, (c + 1) k) of either only
// overwrites what chunks up to c have read.
void staged_reduce_scatter(const Staging *st, CommGroup *g, const void *src, const int *counts, void *dst, int dtype,
                           int accumulate) {
    int N = g->size, most = 0;
    size_t e = dtype_size(dtype), k = staging_chunk(st, sizeof(float) + e, N);
    float *sum = st->host;                         // N k floats: the MPI call's buffer
    char *down = (char *)st->host + N * k * 4;     // N k elements in dtype: what was copied down
    int *cnt = malloc(sizeof(int) * N);
    for (int r = 0; r < N; r++) most = counts[r] > most ? counts[r] : most;
    for (size_t c = 0; c * k < (size_t)most; c++) {
        size_t part = 0, at = 0;  // where rank r's part starts in src, and its chunk in the host buffers
        for (int r = 0; r < N; r++) {
            cnt[r] = chunk_count(counts[r], c, k);
            staging_down(st, down + at * e, (const char *)src + (part + c * k) * e, cnt[r] * e);
            dtype_load(sum + at, down + at * e, cnt[r], dtype);
            part += counts[r], at += cnt[r];
        }
        comm_reduce_scatter(g, sum, cnt);
        size_t mine = cnt[g->rank], bytes = mine * e;
        char *out = (char *)dst + c * k * e;
        if (accumulate) {
            staging_down(st, down, out, bytes);
            dtype_accumulate(down, sum, mine, dtype);
        } else {
            dtype_store(down, sum, mine, dtype);
        }
        staging_up(st, out, down, bytes);
    }
    free(cnt);
}

// comm_allgather on data in device (or host) memory: rank r's part is
// counts[r] bytes at data + displs[r]; this rank's is in place; on return
// every part is. Sizes are size_t (an array of gpt2-xl's weights is over
// 2 GiB); each MPI call moves one chunk, well under.
void staged_allgather(const Staging *st, CommGroup *g, void *data, const size_t *counts, const size_t *displs) {
    int N = g->size;
    size_t k = staging_chunk(st, 1, N), most = 0;
    int *cnt = malloc(sizeof(int) * N), *at = malloc(sizeof(int) * N);
    char *host = st->host, *d = data;
    for (int r = 0; r < N; r++) most = counts[r] > most ? counts[r] : most;
    for (size_t c = 0; c * k < most; c++) {
        for (int r = 0; r < N; r++) {
            cnt[r] = chunk_count(counts[r], c, k);
            at[r] = r ? at[r - 1] + cnt[r - 1] : 0;
        }
        int me = g->rank;
        staging_down(st, host + at[me], d + displs[me] + c * k, cnt[me]);
        comm_allgather(g, host, cnt, at);
        for (int r = 0; r < N; r++)
            if (r != me) staging_up(st, d + displs[r] + c * k, host + at[r], cnt[r]);
    }
    free(cnt);
    free(at);
}

// --shard-group on the GPU: n elements (dtype) of data summed over group g
// (the same shard's ranks in every group), as parallel/zero.h's
// zero_reduce_across does on the CPU, with the same chunks and blocks (so the
// same bits and bytes): a chunk of c = min(n, REDUCE_CHUNK) copied down,
// widened into R blocks of q = ceil(c / R) floats, reduce-scattered and
// all-gathered, rounded back and copied up.
void staged_sum_across(const Staging *st, CommGroup *g, void *data, size_t n, int dtype) {
    size_t e = dtype_size(dtype), c = n < REDUCE_CHUNK ? n : REDUCE_CHUNK, R = (size_t)g->size, q = (c + R - 1) / R;
    float *sum = st->host;                       // R q floats
    char *down = (char *)st->host + R * q * 4;   // c elements in dtype
    if (R * q * 4 + c * e > st->cap) {
        fprintf(stderr, "error: a staging buffer of %zu bytes is too small for %zu groups; this is a bug in gptmem\n",
                st->cap, R);
        exit(1);
    }
    for (size_t c0 = 0; c0 < n; c0 += c) {
        size_t k = n - c0 < c ? n - c0 : c;
        staging_down(st, down, (const char *)data + c0 * e, k * e);
        memset(sum, 0, R * q * sizeof(float));
        dtype_load(sum, down, k, dtype);
        comm_reduce_scatter_block(g, sum, (int)q);
        memmove(sum + (size_t)g->rank * q, sum, q * sizeof(float));
        comm_allgather_block(g, sum, (long long)q * sizeof(float));
        dtype_store(down, sum, k, dtype);
        staging_up(st, (char *)data + c0 * e, down, k * e);
    }
}

#endif
