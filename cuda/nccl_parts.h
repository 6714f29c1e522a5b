// cuda/nccl_parts.h — ZeRO's two collectives as groups of rooted calls, one
// call a rank's part: the loop that cuda/nccl.cu runs on NCCL and the emulated
// GPU (tests/host_gpu.c) runs on MPI, so the same code is what the tests run
// with 2-4 ranks on any machine.
//
// ZeRO's parts are uneven (a piece of the parameters cut by the shard
// boundaries, some parts empty), so neither call is NCCL's one-shot collective:
//   reduce-scatter: for every rank r, a reduce of part r to root r, in place
//                   (the sum in the stored dtype, added in the backend's order)
//   all-gather:     for every rank r, a broadcast of part r from root r, in place
// Every rank makes the same calls in the same order (the parts come from the
// shard layout, which every rank computes alike); an empty part makes no call.
#ifndef GPTMEM_NCCL_PARTS_H
#define GPTMEM_NCCL_PARTS_H

#include <stddef.h>

// The three calls a backend supplies.
typedef struct {
    void (*group)(int start);                                  // 1: open a group of calls, 0: run it
    void (*reduce)(void *p, size_t n, int dt, int root);       // in place: n elements of dtype dt summed on root
    void (*broadcast)(void *p, size_t bytes, int root);        // in place: root's bytes to every rank
} NcclCalls;

// data holds nranks parts of counts[r] elements (dtype dt: 0 fp32, else
// 16-bit), rank r's after rank r-1's; on return this rank's part holds the sum
// over the ranks of their part number rank.
void nccl_parts_reduce_scatter(const NcclCalls *nc, int dt, void *data, const size_t *counts, int nranks) {
    size_t e = dt == 0 ? 4 : 2, at = 0;
    char *p = (char *)data;
    nc->group(1);
    for (int r = 0; r < nranks; r++) {
        if (counts[r]) nc->reduce(p + at * e, counts[r], dt, r);
        at += counts[r];
    }
    nc->group(0);
}

// Rank r's part is bytes[r] bytes at data + displs[r], in place on rank r; on
// return every part is on every rank.
void nccl_parts_allgather(const NcclCalls *nc, void *data, const size_t *bytes, const size_t *displs, int nranks) {
    char *p = (char *)data;
    nc->group(1);
    for (int r = 0; r < nranks; r++)
        if (bytes[r]) nc->broadcast(p + displs[r], bytes[r], r);
    nc->group(0);
}

#endif
