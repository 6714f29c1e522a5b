// gpu/tensor.h — --tp T on the GPU: parallel/tensor.h's collectives for device tensors. Each rank's model
// is its share of every layer (cfg is the share, as on the CPU), and the group's sums go through the host:
// a tensor comes down, is widened to fp32, summed over the group by parallel/tensor.h's own tp_sum (a
// reduce-scatter, then an all-gather: every rank the same bits), rounded and goes back up. The same
// functions as the CPU's, so an fp32 run's sums are the CPU's bits; the price is the link both ways at
// each sum (an NCCL group would keep them on the GPUs).
#ifndef GPTMEM_GPU_TENSOR_H
#define GPTMEM_GPU_TENSOR_H

#include <stdlib.h>
#include <string.h>
#include "core/config.h"
#include "core/dtype.h"
#include "cuda/api.h"
#include "gpu/gpt.h"
#include "parallel/comm.h"
#include "parallel/tensor.h"

// x[0..n) (the dtype, on the GPU) into the host's fp32 room, widened; and back up from it, rounded.
static float *gpu_tp_down(GpuGPT *m, const void *x, size_t n) {
    float *h = m->tp_host;
    if (n > m->tp_cap) ledger_bug("a tensor-parallel sum past the host's room", "gpu_tp_down");
    if (m->dtype == DT_FP32) return gpu_download(h, x, n * sizeof(float)), h;
    void *raw = h + m->tp_cap;  // (the bytes as the GPU holds them, past the fp32 room)
    gpu_download(raw, x, n * m->elem_bytes);
    dtype_load(h, raw, n, m->dtype);
    return h;
}

static void gpu_tp_up(GpuGPT *m, void *x, size_t n) {
    float *h = m->tp_host;
    if (m->dtype == DT_FP32) {
        gpu_upload(x, h, n * sizeof(float));
        return;
    }
    void *raw = h + m->tp_cap;
    dtype_store(raw, h, n, m->dtype);
    gpu_upload(x, raw, n * m->elem_bytes);
}

// --comm nccl: the group's collectives on the GPUs (NCCL's NCCL_TENSOR communicator), in the dtype and in
// place: x[0..n) reduce-scattered in T parts cut as tp_sum cuts them (n/T, one more for the first n mod T
// ranks), this rank's part summed at its place, then (`gather`) all-gathered. The bytes sent are counted as
// parallel/comm.h counts MPI's, e a value.
static void gpu_tp_sum_nccl(GpuGPT *m, void *x, size_t n, int gather) {
    int T = m->tp.size, me = m->tp.rank;
    size_t e = m->elem_bytes, *parts = malloc(3 * sizeof(size_t) * (size_t)T), *bytes = parts + T, *at = bytes + T;
    size_t k = 0;
    for (int r = 0; r < T; r++) parts[r] = n / T + ((size_t)r < n % T), at[r] = k * e, bytes[r] = parts[r] * e, k += parts[r];
    gpu_nccl_reduce_scatter(NCCL_TENSOR, m->dtype, x, parts, T);
    comm_count(m->tp.comm, (long long)((n - parts[me]) * e));
    if (gather) gpu_nccl_allgather(NCCL_TENSOR, x, bytes, at, T), comm_count(m->tp.comm, (long long)(bytes[me] * (T - 1)));
    free(parts);
}

// x[0..n) (the dtype, on the GPU) summed over the group, in place: Megatron's g after a row-parallel op,
// f's backward after a column-parallel one, the embedding's bands, the LM head's input gradient.
void gpu_tp_sum(GpuGPT *m, void *x, size_t n) {
    if (m->tp.size <= 1) return;
    if (m->comm.nccl) {
        gpu_tp_sum_nccl(m, x, n, 1);
        return;
    }
    tp_sum(&m->tp, gpu_tp_down(m, x, n), n);
    gpu_tp_up(m, x, n);
}

// --sp (parallel/tensor.h's two ends of a split layer, on the GPU): the whole (n_rows, width) tensor into
// `full` from every rank's slice (this rank's `own`), or without --sp `own` itself: gathered on the host
// in fp32, as parallel/tensor.h tp_whole_rows gathers the CPU's (the widening and the rounding back
// change no bit; the bytes sent are the CPU's).
const void *gpu_tp_whole_rows(GpuGPT *m, void *full, const void *own, size_t n_rows, size_t width) {
    if (m->tp.sp <= 1) return own;
    size_t part = n_rows / m->tp.sp * width;
    if (m->comm.nccl) {  // (on the GPUs, the dtype's bytes)
        size_t b = part * m->elem_bytes, *bytes = malloc(2 * sizeof(size_t) * (size_t)m->tp.size), *at = bytes + m->tp.size;
        for (int r = 0; r < m->tp.size; r++) bytes[r] = b, at[r] = (size_t)r * b;
        gpu_copy((char *)full + at[m->tp.rank], own, b);
        gpu_nccl_allgather(NCCL_TENSOR, full, bytes, at, m->tp.size);
        comm_count(m->tp.comm, (long long)(b * (size_t)(m->tp.size - 1)));
        free(bytes);
        return full;
    }
    float *h = m->tp_host, *mine = gpu_tp_down(m, own, part);  // (the room's first part)
    memmove(h + (size_t)m->tp.rank * part, mine, part * sizeof(float));
    if (g_ledger.trace) printf("  all-gather the rows over the tensor-parallel group of %d: %zu B\n", m->tp.size, part * sizeof(float));
    comm_allgather_block(m->tp.comm, h, (long long)(part * sizeof(float)));
    gpu_tp_up(m, full, part * m->tp.sp);
    return full;
}

// The partial products x[0..n) (whole rows) summed over the group into this rank's slice `own` (--sp: a
// reduce-scatter, parallel/tensor.h tp_sum_rows), or every row on every rank, in place (gpu_tp_sum).
void gpu_tp_sum_rows(GpuGPT *m, void *own, void *x, size_t n) {
    if (m->tp.sp <= 1) {
        gpu_tp_sum(m, x, n);
        return;
    }
    if (m->comm.nccl) {  // (the rank's part summed at its place, then moved to `own`)
        size_t b = n / m->tp.sp * m->elem_bytes;
        gpu_tp_sum_nccl(m, x, n, 0);
        if ((char *)own != (char *)x + m->tp.rank * b) gpu_copy(own, (char *)x + m->tp.rank * b, b);
        return;
    }
    float *h = gpu_tp_down(m, x, n);
    tp_sum_rows(&m->tp, h, h, n);
    gpu_tp_up(m, own, n / m->tp.sp);
}

// The loss across the vocabulary's bands: lse[0..N) each row's log-sum-exp over this rank's band on entry,
// over the whole vocabulary on return; z[0..N) the row's target logit where the band holds the target,
// else 0; losses[0..N) = lse - z (all on the GPU). parallel/tensor.h tp_vocab_lse combines the bands.
void gpu_tp_loss(GpuGPT *m, float *lse, const float *z, float *losses, int N) {
    float *h = m->tp_host, *hz = h + N, *all = hz + N;  // N (T + 2) floats (core/sizes.h gpu_tp_host_floats)
    gpu_download(h, lse, (size_t)N * sizeof(float));
    gpu_download(hz, z, (size_t)N * sizeof(float));
    tp_vocab_lse(&m->tp, h, hz, all, N);
    gpu_upload(lse, h, (size_t)N * sizeof(float));
    for (int i = 0; i < N; i++) hz[i] = h[i] - hz[i];
    gpu_upload(losses, hz, (size_t)N * sizeof(float));
}

// The first weights are made on the host a window at a time (core/config.h init_params_chunks: GPT-2's
// init, or --init's file) into `chunk`, and uploaded (gpu/weights.h gpu_gpt_init).
typedef struct {
    GpuGPT *m;
    float *chunk;
} GpuInit;

// --tp: the whole model's window, each weight kept where this rank's share holds it (parallel/tensor.h
// tp_local_index), in runs of consecutive places uploaded into the master (all of the share, or its shard).
static void upload_share(void *ctx, size_t a, size_t b) {
    GpuInit *it = ctx;
    GpuGPT *m = it->m;
    long lo = (long)m->master_base, hi = lo + (long)m->master_n;
    for (size_t i = a; i < b;) {
        long j = tp_local_index(&m->tp, &m->cfg, i);
        if (j < lo || j >= hi) { i++; continue; }
        size_t k = i + 1;
        while (k < b && j + (long)(k - i) < hi && tp_local_index(&m->tp, &m->cfg, k) == j + (long)(k - i)) k++;
        gpu_upload(m->master + (j - lo), it->chunk + (i - a), (k - i) * sizeof(float));
        i = k;
    }
}

void gpu_tp_init(GpuGPT *m, const WeightSource *src) {
    enum { CHUNK = 1 << 18 };
    GpuInit it = {m, malloc(sizeof(float) * CHUNK)};  // 1 MiB of host staging, not a model buffer
    init_params_chunks(it.chunk, CHUNK, 0, param_count(&m->tp.whole), &m->tp.whole, src, upload_share, &it);
    free(it.chunk);
}

#endif
