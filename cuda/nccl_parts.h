// cuda/nccl_parts.h — ZeRO's two collectives as groups of NCCL's rooted
// calls, one call a rank's part: the loop that cuda/nccl.cu runs on NCCL and
// cuda/host.c (the emulated GPU) runs on MPI, so the same code is what the
// tests run with 2-4 ranks on any machine.
//
// ZeRO's parts are uneven (a layer's range cut by the shard boundaries, some
// parts empty), so neither call is NCCL's one-shot collective:
//   reduce-scatter: for every rank r, a reduce of part r to root r, in place
//                   (the sum in the stored dtype, added in the backend's order)
//   all-gather:     for every rank r, a broadcast of part r from root r, in place
// Every rank makes the same calls in the same order (the parts come from the
// shard layout, which every rank computes alike); an empty part makes no call.
//
// The file that includes this one defines the three primitives first:
//   nccl_group(int start)                          1: open a group of calls, 0: run it
//   nccl_reduce_part(void *p, size_t n, int dt, int root)   in place, n elements of dt
//   nccl_broadcast_part(void *p, size_t bytes, int root)    in place
#ifndef GPTMEM_NCCL_PARTS_H
#define GPTMEM_NCCL_PARTS_H

#include <stddef.h>

// data holds nranks parts of counts[r] elements (dt), rank r's after rank
// r-1's; on return this rank's part holds the sum over the ranks of their part
// number rank (cuda/ops.h gpu_nccl_reduce_scatter).
void gpu_nccl_reduce_scatter(int dt, void *data, const size_t *counts, int nranks) {
    size_t e = dt == 0 ? 4 : 2, at = 0;  // dtype.h: 0 is fp32, the others 16-bit
    char *p = (char *)data;
    nccl_group(1);
    for (int r = 0; r < nranks; r++) {
        if (counts[r]) nccl_reduce_part(p + at * e, counts[r], dt, r);
        at += counts[r];
    }
    nccl_group(0);
}

// Rank r's part is bytes[r] bytes at data + displs[r], in place on rank r; on
// return every part is on every rank (cuda/ops.h gpu_nccl_allgather).
void gpu_nccl_allgather(void *data, const size_t *bytes, const size_t *displs, int nranks) {
    char *p = (char *)data;
    nccl_group(1);
    for (int r = 0; r < nranks; r++)
        if (bytes[r]) nccl_broadcast_part(p + displs[r], bytes[r], r);
    nccl_group(0);
}

#endif
