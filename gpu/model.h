// cuda/model_gpu.h — the model on the GPU (--device cuda): model.h's forward
// and backward, op for op, with the ops of cuda/ops.h on device memory.
//
// What is the same as on the CPU: the flat parameter layout (one array, the
// same offsets), the order of the ops, which tensors the forward saves and
// when the backward pops them (the activation stack of memory.h, here over
// device memory), --ckpt and --flash, the ledger categories, the
// checkpoint contents.
//
// What differs: with --dtype bf16/fp16 the GPU computes on the 16-bit
// tensors directly (cuBLASLt and the kernels widen to fp32 in registers), so
// there are no fp32 working copies; the backward buffers (dres, dln, ...) are
// stored in the dtype too. Kept in fp32 whatever the dtype: the layernorms'
// row mean and rstd and flash attention's row log-sum-exp (N or B*H*T floats;
// the backward recomputes from them, and a 16-bit lse would put every
// recomputed probability off by up to 1.6%). Every activation starts on a
// 256-byte boundary (GPU_ACT_ALIGN, sizes.h). predict.h's predict_memory_gpu has the
// resulting closed form.
//
// ZeRO over MPI ranks (issue 14): the same layout as the CPU (zero.h's Shard:
// which arrays are shards, their base indices) and the same schedule, a layer
// at a time where the CPU goes an op at a time: stage 3 gathers a layer's
// weights into gather_layer before its forward and again before its backward
// (but the last layer's, still there; and the embeddings and final layernorm
// into gather_global once a forward);
// stages 2, 3 collect a layer's gradients in grad_layer and reduce-scatter them
// into the rank's shard when its backward ends; stages 0, 1 reduce the whole
// gradient after the backward; stages 1, 2 all-gather the updated weights
// after the step. The collectives go through a host buffer (staging.h, MPI):
// the backend for ranks that share one GPU. Written and tested on the CPU
// (tests/train_host); not yet run on a GPU.
//
// This file is C (train.c includes it); the kernels are in cuda/*.cu.
#ifndef GPTMEM_MODEL_GPU_H
#define GPTMEM_MODEL_GPU_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/adamw.h"
#include "core/config.h"
#include "core/dtype.h"
#include "core/rng.h"
#include "core/saved.h"
#include "core/sizes.h"
#include "cuda/api.h"
#include "memory/ledger.h"
#include "parallel/comm.h"
#include "parallel/staging.h"
#include "parallel/zero.h"


// The tensors one layer saves (device pointers): in the dtype, except the
// row statistics (mean, rstd, lse), which are fp32.
typedef struct {
    void *ln1, *qkv, *att, *atty, *res2, *ln2, *fch, *fch_gelu, *res3;
    float *ln1_mean, *ln1_rstd, *lse, *ln2_mean, *ln2_rstd;
    int mark;  // stack mark before this layer's pushes
} GpuActs;

// One layer's 12 tensors inside a flat device array (weights or gradients).
typedef struct {
    void *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
} GpuLayer;

typedef struct {
    GPTConfig cfg;
    int dtype, flash, ckpt, fused_ce;
    size_t nparams, e;  // e: bytes per stored element (4 or 2)
    ParamTensor *tensors;
    int ntensors;
    // ZeRO: which arrays are shards (zero.h); element 0 of each array is parameter *_base
    Shard shard;
    size_t params_base, master_base, state_base, grads_base;
    size_t master_n;         // the master's elements that hold parameters (P, or this rank's share)
    size_t layer_n, global_n;  // parameters of one layer; of wte, wpe and the final layernorm
    // model states (ledger: params, master, grads, adam_m, adam_v)
    void *params;            // the weights the model computes with, in the dtype
    float *master;           // fp32 weights the optimizer updates: 16-bit runs' master copy; fp32: == params
    void *grads;             // in the dtype
    float *adam_m, *adam_v;  // AdamW state, fp32
    // ZeRO's buffers (ledger: comm), in the dtype, laid out as zero.h's pieces:
    void *gather_layer, *gather_global;  // stage 3: a layer's weights, and [wte | wpe | lnfw | lnfb], from every rank
    void *grad_layer, *grad_global;      // stages 2, 3: their gradients, until reduce-scattered into the shard
    int gathered;                        // stage 3: the layer gather_layer holds for this forward (-1: none)
    Staging staging;                     // more than one rank: the host buffer the MPI collectives (and the replica check) go through
    int nccl;                            // --comm nccl: the collectives run on the device buffers (cuda/nccl.cu)
    // activations of the current forward pass (on the activation stack)
    void *encoded, *lnf, *logits;
    float *lnf_mean, *lnf_rstd;
    GpuActs *acts;
    int B, T, arena_mark, final_mark;
    // backward buffers, reused by every layer (ledger: scratch), in the dtype
    void *dres, *dln, *dqkv, *datty, *dfch;
    float *losses;           // (N) per-row losses
    void *head_logits;       // --fused-ce: the logits of GPU_HEAD_ROWS rows at a time (scratch), never (N,Vp)
    float *flash_D;          // --flash: (B,H,T) rowsum(dout * out) for the backward
    double *norm_partials;   // GPU_NORM_BLOCKS partial sums of the gradient norm
    double *numbers;         // the step's numbers (ops.h STEP_*): loss sum, sum of squares, AdamW's scale
    float host_scale;        // more than one rank: the scale, also known to the host (it summed the ranks' norms)
    void *gemm_workspace;
    float *colsum;           // partial sums of the bias and layernorm weight gradients (64 x 4C)
    // the token batch on the device, and the positions bucketed by token for
    // the embedding backward (ledger: data): [pos (N) | start (N+1) | tok (N)]
    int *inputs, *targets, *buckets, nbuckets;
    // the batch on its way there: two page-locked host buffers used in turn, each
    // [inputs (N) | targets (N) | pos | start | tok] (5N+1 ints), an event after each one's
    // uploads (gpu_upload_batch); and a count per vocabulary entry for the bucketing
    int *batch_host[2], batch_turn, batch_sent[2];
    void *batch_event[2];
    int *token_count_host;
    // --ckpt: the recompute of layer l in micro-batch k of a step is timed by events
    // recompute_events[k][2l] and [2l+1] in the GPU's stream (a host wait per layer, or
    // per micro-batch, would stall the queue); gpu_gpt_recompute_seconds reads them after the step
    void ***recompute_events;
    int recompute_sets;     // micro-batches that have their events (grown as --accum needs)
    int recompute_used;     // micro-batches recorded and not yet added into recompute_seconds
    double recompute_seconds;
} GpuGPT;

// --- allocation through the ledger -----------------------------------------------

// Zeroed (gpu_malloc zeroes), like mem_alloc: Adam's m and v start at 0.
void *gpu_alloc(int category, size_t bytes, const char *name) {
    void *p = gpu_malloc(bytes, name);
    mem_track(p, category, bytes, name, 1);
    return p;
}

void gpu_release(void *p) {
    if (!p) return;
    if (mem_untrack(p)) ledger_bug("gpu_release of a pointer it does not know", "gpu_release");
    gpu_free(p);
}

void *at_elem(const GpuGPT *model, void *base, size_t i) { return (char *)base + i * model->e; }

// --fused-ce: the rows of the LM head's chunk for a micro-batch of N rows.
size_t gpu_head_rows(size_t N) { return N < GPU_HEAD_ROWS ? N : GPU_HEAD_ROWS; }

// The flat index of layer l's first parameter (after wte and wpe, 12 tensors a layer: model.h param_tensors).
size_t layer_lo(const GpuGPT *model, int l) { return model->tensors[2 + 12 * l].offset; }
size_t lnf_lo(const GpuGPT *model) { return model->tensors[model->ntensors - 2].offset; }
size_t emb_n(const GpuGPT *model) { return layer_lo(model, 0); }  // wte and wpe

// Where tensor i (param_tensors' order) of the weights (grads 0) or of the
// gradients (grads 1) is now: in the flat array (its shard), or, with ZeRO,
// in the gather buffers (stage 3 weights) or the gradient buckets (stages 2,
// 3), which hold the current layer, or the globals packed [wte | wpe | lnf].
void *gpu_tensor(const GpuGPT *model, int i, int grads) {
    const Shard *sh = &model->shard;
    size_t at = model->tensors[i].offset;
    void *layer = grads ? model->grad_layer : model->gather_layer, *global = grads ? model->grad_global : model->gather_global;
    if (grads ? sh->stage >= 2 : sh->stage == 3) {
        if (i < 2) return at_elem(model, global, at);
        if (i >= model->ntensors - 2) return at_elem(model, global, emb_n(model) + at - lnf_lo(model));
        return at_elem(model, layer, at - layer_lo(model, (i - 2) / 12));
    }
    return grads ? at_elem(model, model->grads, at - model->grads_base) : at_elem(model, model->params, at - model->params_base);
}

GpuLayer gpu_layer(const GpuGPT *model, int l, int grads) {
    void *p[12];
    for (int j = 0; j < 12; j++) p[j] = gpu_tensor(model, 2 + 12 * l + j, grads);
    GpuLayer w = {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11]};
    return w;
}

void *gpu_wte(const GpuGPT *model, int grads) { return gpu_tensor(model, 0, grads); }
void *gpu_wpe(const GpuGPT *model, int grads) { return gpu_tensor(model, 1, grads); }
void *gpu_lnfw(const GpuGPT *model, int grads) { return gpu_tensor(model, model->ntensors - 2, grads); }
void *gpu_lnfb(const GpuGPT *model, int grads) { return gpu_tensor(model, model->ntensors - 1, grads); }

// Allocate everything for micro-batches of B x T, this rank's part with ZeRO
// stage `zero` over nranks (predict_memory_gpu has the sum).
void gpu_gpt_build(GpuGPT *model, const GPTConfig *cfg, int B, int T, int dtype, int flash, int ckpt, int fused_ce,
                   int zero, int rank, int nranks) {
    memset(model, 0, sizeof *model);
    model->cfg = *cfg;
    model->dtype = dtype;
    model->flash = flash;
    model->ckpt = ckpt;
    model->fused_ce = fused_ce;
    model->nparams = param_count(cfg);
    model->e = dtype_size(dtype);
    model->ntensors = param_tensor_count(cfg);
    model->tensors = malloc(sizeof(ParamTensor) * model->ntensors);
    param_tensors(cfg, model->tensors);
    size_t P = model->nparams, N = (size_t)B * T, C = cfg->channels, e = model->e;
    model->shard = shard_layout(P, zero, rank, nranks);
    const Shard *sh = &model->shard;
    model->params_base = shard_weights_base(sh);
    model->state_base = shard_state_base(sh);
    model->grads_base = shard_grads_base(sh);
    if (dtype == DT_FP32) {  // the fp32 weights are their own master: sharded only at stage 3
        model->params = gpu_alloc(MEM_PARAMS, shard_weights_len(sh) * 4, "params");
        model->master = model->params;
        model->master_base = model->params_base;
    } else {
        model->params = gpu_alloc(MEM_PARAMS, shard_weights_len(sh) * 2, "params (16-bit)");
        model->master = gpu_alloc(MEM_MASTER, shard_state_len(sh) * 4, "master weights");
        model->master_base = model->state_base;
    }
    size_t master_len = dtype == DT_FP32 ? shard_weights_len(sh) : shard_state_len(sh);
    model->master_n = P - model->master_base < master_len ? P - model->master_base : master_len;
    model->grads = gpu_alloc(MEM_GRADS, shard_grads_len(sh) * e, dtype == DT_FP32 ? "grads" : "grads (16-bit)");
    model->adam_m = gpu_alloc(MEM_ADAM_M, shard_state_len(sh) * 4, "adam_m");
    model->adam_v = gpu_alloc(MEM_ADAM_V, shard_state_len(sh) * 4, "adam_v");
    model->layer_n = param_count(cfg) - global_param_count(cfg);
    model->layer_n /= cfg->layers;
    model->global_n = global_param_count(cfg);
    if (sh->stage >= 2) {
        model->grad_layer = gpu_alloc(MEM_COMM, model->layer_n * e, "layer grads bucket");
        model->grad_global = gpu_alloc(MEM_COMM, model->global_n * e, "global grads bucket");
    }
    if (sh->stage == 3) {
        model->gather_layer = gpu_alloc(MEM_COMM, model->layer_n * e, "layer gather");
        model->gather_global = gpu_alloc(MEM_COMM, model->global_n * e, "global gather");
    }
    if (sh->nranks > 1) {  // page-locked host memory, in the ledger (comm) though not on the GPU
        model->staging.host = gpu_host_alloc(GPU_STAGING, "the staging buffer");
        mem_track(model->staging.host, MEM_COMM, GPU_STAGING, "staging (pinned host)", 0);
        model->staging.cap = GPU_STAGING;
        model->staging.on_gpu = 1;
    }
    model->dres = gpu_alloc(MEM_SCRATCH, N * C * e, "dres");
    model->dln = gpu_alloc(MEM_SCRATCH, N * C * e, "dln");
    model->dqkv = gpu_alloc(MEM_SCRATCH, N * 3 * C * e, "dqkv");
    model->datty = gpu_alloc(MEM_SCRATCH, N * C * e, "datty");
    model->dfch = gpu_alloc(MEM_SCRATCH, N * 4 * C * e, "dfch");
    model->losses = gpu_alloc(MEM_SCRATCH, N * 4, "losses");
    if (fused_ce) model->head_logits = gpu_alloc(MEM_SCRATCH, gpu_head_rows(N) * padded_vocab(cfg) * e, "logits of a row chunk");
    if (flash) model->flash_D = gpu_alloc(MEM_SCRATCH, (size_t)B * cfg->heads * T * 4, "flash D");
    model->norm_partials = gpu_alloc(MEM_SCRATCH, GPU_NORM_BLOCKS * sizeof(double), "norm partials");
    model->numbers = gpu_alloc(MEM_SCRATCH, GPU_STEP_NUMBERS * sizeof(double), "step numbers");
    model->gemm_workspace = gpu_alloc(MEM_SCRATCH, GPU_GEMM_WORKSPACE, "cuBLASLt workspace");
    // column sums are at most 4C wide (the fc bias; layernorm's dw|db is 2C)
    size_t colsum_floats = (size_t)GPU_COLSUM_CHUNKS * 4 * C;
    model->colsum = gpu_alloc(MEM_SCRATCH, colsum_floats * 4, "column-sum partials");
    cu_matmul_setup(model->gemm_workspace, GPU_GEMM_WORKSPACE, model->colsum, colsum_floats);
    model->inputs = gpu_alloc(MEM_DATA, N * 4, "inputs (GPU)");
    model->targets = gpu_alloc(MEM_DATA, N * 4, "targets (GPU)");
    model->buckets = gpu_alloc(MEM_DATA, (3 * N + 1) * 4, "token buckets (GPU)");
    for (int k = 0; k < 2; k++) {  // page-locked host memory, in the ledger (data) though not on the GPU
        model->batch_host[k] = gpu_host_alloc((5 * N + 1) * 4, "a token batch buffer");
        mem_track(model->batch_host[k], MEM_DATA, (5 * N + 1) * 4, "token batch (pinned host)", 0);
        model->batch_event[k] = gpu_event_new();
    }
    model->token_count_host = mem_alloc(MEM_DATA, (size_t)padded_vocab(cfg) * 4, "token counts");
    model->acts = calloc(cfg->layers, sizeof(GpuActs));
}

void gpu_gpt_free(GpuGPT *model) {
    void *dev[] = {model->params, model->grads, model->adam_m, model->adam_v, model->dres, model->dln, model->dqkv, model->datty, model->dfch,
                   model->losses, model->flash_D, model->norm_partials, model->numbers, model->gemm_workspace, model->colsum, model->inputs, model->targets, model->buckets,
                   model->grad_layer, model->grad_global, model->gather_layer, model->gather_global, model->head_logits};
    if (model->master != model->params) gpu_release(model->master);
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) gpu_release(dev[i]);
    for (int k = 0; k < 2; k++) {
        if (mem_untrack(model->batch_host[k])) ledger_bug("a token batch buffer is not in the ledger", "gpu_gpt_free");
        gpu_host_free(model->batch_host[k]);
        gpu_event_free(model->batch_event[k]);
    }
    mem_free(model->token_count_host);
    if (model->staging.host) {
        if (mem_untrack(model->staging.host)) ledger_bug("the staging buffer is not in the ledger", "gpu_gpt_free");
        gpu_host_free(model->staging.host);
    }
    for (int k = 0; k < model->recompute_sets; k++) {
        for (int i = 0; i < 2 * model->cfg.layers; i++) gpu_event_free(model->recompute_events[k][i]);
        free(model->recompute_events[k]);
    }
    free(model->recompute_events);
    free(model->acts);
    free(model->tensors);
}

// --ckpt: the events of the next micro-batch's recomputes (a new set the first
// time a step has this many micro-batches).
void **gpu_recompute_events(GpuGPT *model) {
    if (model->recompute_used == model->recompute_sets) {
        int k = model->recompute_sets++, n = 2 * model->cfg.layers;
        model->recompute_events = realloc(model->recompute_events, sizeof(void **) * model->recompute_sets);
        model->recompute_events[k] = malloc(sizeof(void *) * n);
        if (!model->recompute_events || !model->recompute_events[k]) {
            fprintf(stderr, "error: out of host memory for --ckpt's timing events\n");
            exit(1);
        }
        for (int i = 0; i < n; i++) model->recompute_events[k][i] = gpu_event_new();
    }
    return model->recompute_events[model->recompute_used++];
}

// --ckpt: the time spent recomputing blocks so far: adds the recomputes of the
// micro-batches since the last call (waiting for them, if they are still
// running: call it after the step) to the total.
double gpu_gpt_recompute_seconds(GpuGPT *model) {
    for (int k = 0; k < model->recompute_used; k++)
        for (int l = 0; l < model->cfg.layers; l++)
            model->recompute_seconds += gpu_event_ms(model->recompute_events[k][2 * l], model->recompute_events[k][2 * l + 1]) / 1e3;
    model->recompute_used = 0;
    return model->recompute_seconds;
}

// The activation stack on the device: `capacity` bytes (the predicted peak).
// Each push is handed to gpu_fill_fresh (the emulated GPU fills it with NaN,
// so a read before a write shows; GPTMEM_POISON=1 makes a real GPU do it too).
void gpu_arena_reserve(size_t capacity) {
    arena_adopt(gpu_malloc(capacity, "the activation stack"), capacity, GPU_ACT_ALIGN);
    g_arena.fresh = gpu_fill_fresh;
    g_ledger.gpu_reserved += capacity;
}

void gpu_arena_release(void) {
    g_ledger.gpu_reserved -= g_arena.capacity;
    gpu_free(g_arena.base);
    arena_release();
}

// --- ZeRO's collectives (zero.h's arithmetic; NCCL, or staging.h's host-staged MPI calls) ----
//   stage 3, before a layer's weights are used (forward, backward, recompute):  gpu_gather_layer
//   stages 2, 3, when a layer's (or the globals') backward is done:            gpu_reduce_scatter
//   stages 0, 1, after the whole backward:                                     gpu_gpt_reduce_grads
//   stages 1, 2, after the optimizer step (and init, resume):                  gpu_allgather_blocks

// The two collectives, on either backend (--comm). All-gather: rank r's part
// is bytes[r] bytes at data + at[r], this rank's in place; on return every
// part is. NCCL's bytes sent are counted here as comm.h counts MPI's (ring).
void gpu_allgather(GpuGPT *model, void *data, const size_t *bytes, const size_t *at) {
    if (!model->nccl) {
        staged_allgather(&model->staging, data, bytes, at);
        return;
    }
    gpu_nccl_allgather(data, bytes, at, comm_nranks);
    comm_bytes_sent += (long long)bytes[comm_rank_id] * (comm_nranks - 1);
}

// Reduce-scatter: src holds nranks parts of counts[r] elements (dtype); this
// rank's summed part is written to dst, or with `accumulate` added into it.
// MPI sums in fp32 through the host buffer; NCCL sums in the dtype, in place in
// src (a bucket, or the gradients themselves), then adds it into dst.
void gpu_reduce_scatter_parts(GpuGPT *model, void *src, const int *counts, void *dst, int accumulate) {
    if (!model->nccl) {
        staged_reduce_scatter(&model->staging, src, counts, dst, model->dtype, accumulate);
        return;
    }
    int N = comm_nranks, me = comm_rank_id;
    size_t *n = malloc(sizeof(size_t) * N), before = 0, total = 0;
    for (int r = 0; r < N; r++) {
        if (r == me) before = total;
        n[r] = (size_t)counts[r], total += n[r];
    }
    gpu_nccl_reduce_scatter(model->dtype, src, n, N);
    comm_bytes_sent += (long long)(total - n[me]) * (long long)model->e;
    void *mine = at_elem(model, src, before);
    if (n[me] && accumulate) cu_add_into(model->dtype, dst, mine, n[me]);
    else if (n[me] && dst != mine) gpu_copy(dst, mine, n[me] * model->e);
    free(n);
}

// Stage 3: every rank's weights of [lo, hi) into dst (a gather buffer, in the dtype).
void gpu_gather(GpuGPT *model, void *dst, size_t lo, size_t hi) {
    const Shard *sh = &model->shard;
    int N = sh->nranks, me = sh->rank, *pieces = malloc(sizeof(int) * N);
    size_t *first = malloc(sizeof(size_t) * N), *bytes = malloc(sizeof(size_t) * N), *at = malloc(sizeof(size_t) * N);
    shard_pieces(sh, lo, hi, pieces, first);
    for (int r = 0; r < N; r++) at[r] = pieces[r] ? (first[r] - lo) * model->e : 0, bytes[r] = pieces[r] * model->e;
    if (bytes[me]) gpu_copy((char *)dst + at[me], at_elem(model, model->params, first[me] - model->params_base), bytes[me]);
    gpu_allgather(model, dst, bytes, at);
    free(pieces); free(first); free(bytes); free(at);
}

// Stages 2, 3: `bucket` holds this rank's gradients of [lo, hi) (dtype); sum
// them over the ranks, each rank adding the part it owns into its gradient shard.
void gpu_reduce_scatter(GpuGPT *model, void *bucket, size_t lo, size_t hi) {
    const Shard *sh = &model->shard;
    int N = sh->nranks, me = sh->rank, *counts = malloc(sizeof(int) * N);
    size_t *first = malloc(sizeof(size_t) * N);
    shard_pieces(sh, lo, hi, counts, first);
    void *mine = counts[me] ? at_elem(model, model->grads, first[me] - model->grads_base) : model->grads;
    gpu_reduce_scatter_parts(model, bucket, counts, mine, 1);
    free(counts); free(first);
}

// Stage 3: layer l's weights, or the globals [wte | wpe | lnfw | lnfb], from every rank.
// The backward starts with the layer the forward gathered last: it is still there.
void gpu_gather_layer(GpuGPT *model, int l) {
    if (model->shard.stage != 3 || model->gathered == l) return;
    model->gathered = l;
    if (g_ledger.trace) printf("  gather layer %d: %zu B\n", l, model->layer_n * model->e);
    gpu_gather(model, model->gather_layer, layer_lo(model, l), layer_lo(model, l) + model->layer_n);
}

void gpu_gather_globals(GpuGPT *model) {
    if (model->shard.stage != 3) return;
    if (g_ledger.trace) printf("  gather embeddings and final layernorm: %zu B\n", model->global_n * model->e);
    gpu_gather(model, model->gather_global, 0, emb_n(model));
    gpu_gather(model, at_elem(model, model->gather_global, emb_n(model)), lnf_lo(model), model->nparams);
}

// Stages 2, 3: layer l's gradients (in grad_layer), or the globals' (in grad_global), into the shards.
void gpu_reduce_layer(GpuGPT *model, int l) {
    if (model->shard.stage < 2) return;
    if (g_ledger.trace) printf("  reduce-scatter layer %d's gradients: %zu B\n", l, model->layer_n * model->e);
    gpu_reduce_scatter(model, model->grad_layer, layer_lo(model, l), layer_lo(model, l) + model->layer_n);
}

void gpu_reduce_globals(GpuGPT *model) {
    if (model->shard.stage < 2) return;
    if (g_ledger.trace) printf("  reduce-scatter the globals' gradients: %zu B\n", model->global_n * model->e);
    gpu_reduce_scatter(model, model->grad_global, 0, emb_n(model));
    gpu_reduce_scatter(model, at_elem(model, model->grad_global, emb_n(model)), lnf_lo(model), model->nparams);
}

// An array kept whole (padded to N S elements of elem_bytes): every rank's block of S to every rank.
void gpu_allgather_blocks(GpuGPT *model, void *array, size_t elem_bytes) {
    const Shard *sh = &model->shard;
    int N = sh->nranks;
    size_t *bytes = malloc(sizeof(size_t) * N), *at = malloc(sizeof(size_t) * N);
    for (int r = 0; r < N; r++) bytes[r] = sh->size * elem_bytes, at[r] = r * sh->size * elem_bytes;
    gpu_allgather(model, array, bytes, at);
    free(bytes); free(at);
}

// Stages 0, 1, after the backward: sum the whole gradient over the ranks (a
// reduce-scatter gives each rank the sum of its block); stage 0 then
// all-gathers the sums, stage 1 keeps its own (its optimizer reads no other).
void gpu_gpt_reduce_grads(GpuGPT *model) {
    const Shard *sh = &model->shard;
    if (sh->nranks == 1 || sh->stage >= 2) return;
    if (g_ledger.trace)
        printf("  %s the gradients: %zu B\n", sh->stage == 0 ? "all-reduce (reduce-scatter + all-gather)" : "reduce-scatter",
               sh->padded * model->e);
    int *counts = malloc(sizeof(int) * sh->nranks);
    for (int r = 0; r < sh->nranks; r++) counts[r] = (int)sh->size;
    void *mine = at_elem(model, model->grads, (size_t)sh->rank * sh->size);  // this rank's block (own_lo stops at P)
    gpu_reduce_scatter_parts(model, model->grads, counts, mine, 0);
    free(counts);
    if (sh->stage == 0) gpu_allgather_blocks(model, model->grads, model->e);
}

// After the master weights changed (init, resume): round them into the
// 16-bit compute weights (fp32: they are the same array); at stages 1, 2
// every rank's updated block goes to every rank.
void gpu_gpt_sync_params(GpuGPT *model) {
    if (model->dtype != DT_FP32 && model->master_n)  // (a rank may own no parameters: a toy model on many ranks)
        cu_store_dtype(model->dtype, at_elem(model, model->params, model->master_base - model->params_base), model->master,
                       model->master_n);
    if (model->shard.stage == 1 || model->shard.stage == 2) gpu_allgather_blocks(model, model->params, model->e);
}

// GPT-2 init, the same numbers as model.h's init_params (same generator, same
// order), made on the host a chunk at a time; the master's part of them
// (all, or this rank's share) is uploaded.
void gpu_gpt_init(GpuGPT *model, uint64_t seed) {
    enum { CHUNK = 1 << 18 };
    float *chunk = malloc(sizeof(float) * CHUNK);  // 1 MiB of host staging, not a model buffer
    uint64_t s = rng_seed(seed);
    size_t filled = 0, at = 0, flat = 0, lo = model->master_base, hi = lo + model->master_n;
    for (int i = 0; i < model->ntensors; i++)
        for (size_t j = 0; j < model->tensors[i].count; j++, flat++) {
            float x = init_value(&model->tensors[i], i, j, &model->cfg, &s);  // every value drawn, to keep the sequence
            if (flat < lo || flat >= hi) continue;
            chunk[filled++] = x;
            if (filled == CHUNK) { gpu_upload(model->master + at, chunk, filled * 4); at += filled; filled = 0; }
        }
    gpu_upload(model->master + at, chunk, filled * 4);
    free(chunk);
    gpu_gpt_sync_params(model);
}

void gpu_gpt_zero_grad(GpuGPT *model) { gpu_zero(model->grads, shard_grads_len(&model->shard) * model->e); }

// Bucket the positions 0..N-1 by the token they hold, for encoder_backward: a
// counting sort (positions stay in order within a token: deterministic).
// out = [pos (N) | start (N+1) | tok (N)]: bucket u holds token tok[u] at the
// positions pos[start[u] .. start[u+1]). count: Vp ints of scratch. Returns
// the number of buckets.
int bucket_tokens(const int *inp, int N, int Vp, int *out, int *count) {
    int *pos = out, *start = pos + N, *tok = start + N + 1;
    memset(count, 0, sizeof(int) * Vp);
    for (int i = 0; i < N; i++) count[inp[i]]++;
    int u = 0, acc = 0;
    for (int v = 0; v < Vp; v++) {
        if (!count[v]) continue;
        tok[u] = v;
        start[u++] = acc;
        int first = acc;
        acc += count[v];
        count[v] = first;  // from now on: where this token's next position goes
    }
    start[u] = acc;
    for (int i = 0; i < N; i++) pos[count[inp[i]]++] = i;
    return u;
}

// Upload a token batch; with targets (training), also its token buckets. The
// copies queue behind the work already there (the last micro-batch's backward
// still reads the device buffers they overwrite), from page-locked memory, so
// the host does not wait: it fills the two host buffers in turn, and before it
// refills one it waits for the event recorded after that buffer's uploads (two
// micro-batches ago: long done). All the host's work (the bucketing) comes
// before the first upload.
void gpu_upload_batch(GpuGPT *model, const int *inp, const int *targets, int N) {
    int k = model->batch_turn, *h = model->batch_host[k];
    model->batch_turn ^= 1;
    if (model->batch_sent[k]) gpu_event_wait(model->batch_event[k]);
    memcpy(h, inp, (size_t)N * 4);
    if (targets) {
        memcpy(h + N, targets, (size_t)N * 4);
        model->nbuckets = bucket_tokens(inp, N, padded_vocab(&model->cfg), h + 2 * N, model->token_count_host);
    }
    gpu_upload_queued(model->inputs, h, (size_t)N * 4);
    if (targets) {
        gpu_upload_queued(model->targets, h + N, (size_t)N * 4);
        gpu_upload_queued(model->buckets, h + 2 * N, (size_t)(3 * N + 1) * 4);
    }
    gpu_event_record(model->batch_event[k]);
    model->batch_sent[k] = 1;
}

// --- forward ----------------------------------------------------------------------

void *gpu_push(GpuGPT *model, const char *name, size_t count) { return arena_push(name, count * model->e); }

// Push the saved tensor t (saved.h) for the current B x T: in the dtype, or in
// fp32 for a row statistic (layernorm mean and rstd, flash's lse).
void *gpu_push_saved(GpuGPT *model, const SavedTensor *t) {
    const GPTConfig *c = &model->cfg;
    size_t count = saved_count(t, model->B, model->T, c->channels, c->heads, padded_vocab(c), model->flash);
    size_t bytes = count * (saved_is_row_stat(t, model->flash) ? sizeof(float) : model->e);
    return arena_push(saved_name(t, model->flash), bytes);
}

// One transformer block, forward: x (N,C) -> a->res3. Pushes its 13 tensors (model.h block_forward).
void gpu_block_forward(GpuGPT *model, int l, const void *x, int B, int T) {
    const GPTConfig *c = &model->cfg;
    int C = c->channels, H = c->heads, N = B * T, dt = model->dtype;
    GpuLayer w = gpu_layer(model, l, 0);
    GpuActs *a = &model->acts[l];
    a->mark = arena_mark();
    void *p[SAVED_PER_LAYER];
    for (int i = 0; i < SAVED_PER_LAYER; i++) p[i] = gpu_push_saved(model, &block_saved[i]);
    a->ln1 = p[SV_LN1], a->ln1_mean = p[SV_LN1_MEAN], a->ln1_rstd = p[SV_LN1_RSTD], a->qkv = p[SV_QKV];
    if (model->flash) a->lse = p[SV_ATT];
    else a->att = p[SV_ATT];
    a->atty = p[SV_ATTY], a->res2 = p[SV_RES2];
    a->ln2 = p[SV_LN2], a->ln2_mean = p[SV_LN2_MEAN], a->ln2_rstd = p[SV_LN2_RSTD];
    a->fch = p[SV_FCH], a->fch_gelu = p[SV_FCH_GELU], a->res3 = p[SV_RES3];

    cu_layernorm_forward(dt, a->ln1, a->ln1_mean, a->ln1_rstd, x, w.ln1w, w.ln1b, N, C);
    cu_matmul_forward(dt, a->qkv, a->ln1, w.qkvw, w.qkvb, N, C, 3 * C);
    if (model->flash) cu_flash_forward(dt, a->atty, a->lse, a->qkv, B, T, C, H);
    else cu_attention_forward(dt, a->atty, a->att, a->qkv, B, T, C, H);
    cu_matmul_forward(dt, a->res2, a->atty, w.attprojw, w.attprojb, N, C, C);
    cu_residual_forward(dt, a->res2, a->res2, x, (size_t)N * C);            // res2 = x + attn(x)
    cu_layernorm_forward(dt, a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, w.ln2w, w.ln2b, N, C);
    cu_matmul_forward(dt, a->fch, a->ln2, w.fcw, w.fcb, N, C, 4 * C);
    cu_gelu_forward(dt, a->fch_gelu, a->fch, (size_t)N * 4 * C);
    cu_matmul_forward(dt, a->res3, a->fch_gelu, w.fcprojw, w.fcprojb, N, 4 * C, C);
    cu_residual_forward(dt, a->res3, a->res3, a->res2, (size_t)N * C);      // res3 = res2 + mlp(res2)
}

// --ckpt: keep only the block's output, moved down to where its first tensor
// began (model.h ckpt_keep_output). The backward pops it before it recomputes the block.
void gpu_ckpt_keep_output(GpuGPT *model, int l) {
    GpuActs *a = &model->acts[l];
    size_t bytes = (size_t)model->B * model->T * model->cfg.channels * model->e;
    const void *out = a->res3;
    arena_pop_to(a->mark, "ckpt");
    void *kept = arena_push("block_out", bytes);
    // kept starts where ln1 began, far below res3 (ln1, qkv, atty, res2, ln2,
    // fch and fch_gelu, each at least as large, lie between): no overlap
    gpu_copy(kept, out, bytes);
    a->res3 = kept;
}

const void *gpu_block_input(GpuGPT *model, int l) { return l == 0 ? model->encoded : model->acts[l - 1].res3; }

// Forward over inp[B,T] (host). Leaves the logits (N,Vp) on the stack. With
// targets, adds the mean loss (model.h gpt_forward's value) into the step's
// numbers on the device, where gpu_read_numbers finds it.
void gpu_gpt_forward(GpuGPT *model, const int *inp, const int *targets, int B, int T) {
    const GPTConfig *c = &model->cfg;
    int C = c->channels, N = B * T, Vp = padded_vocab(c), dt = model->dtype;
    gpu_upload_batch(model, inp, targets, N);
    model->B = B; model->T = T;
    model->arena_mark = arena_mark();
    model->encoded = gpu_push(model, "encoded", (size_t)N * C);
    gpu_gather_globals(model);  // stage 3; they stay until the next forward
    model->gathered = -1;       // the weights may have changed since (a step, a resume): gather every layer again
    cu_encoder_forward(dt, model->encoded, model->inputs, gpu_wte(model, 0), gpu_wpe(model, 0), B, T, C);
    for (int l = 0; l < c->layers; l++) {
        gpu_gather_layer(model, l);
        gpu_block_forward(model, l, gpu_block_input(model, l), B, T);
        if (model->ckpt) gpu_ckpt_keep_output(model, l);
    }
    model->final_mark = arena_mark();
    model->lnf = gpu_push_saved(model, &final_saved[SV_LNF]);
    model->lnf_mean = gpu_push_saved(model, &final_saved[SV_LNF_MEAN]);
    model->lnf_rstd = gpu_push_saved(model, &final_saved[SV_LNF_RSTD]);
    cu_layernorm_forward(dt, model->lnf, model->lnf_mean, model->lnf_rstd, gpu_block_input(model, c->layers),
                         gpu_lnfw(model, 0), gpu_lnfb(model, 0), N, C);
    if (model->fused_ce) {  // no logits on the stack: the LM head and the loss a chunk of rows at a time
        if (!targets) return;  // (sampling: gpu_logits_row computes its one row)
        for (int r0 = 0; r0 < N; r0 += GPU_HEAD_ROWS) {
            int rows = N - r0 < GPU_HEAD_ROWS ? N - r0 : GPU_HEAD_ROWS;
            cu_matmul_forward(dt, model->head_logits, at_elem(model, model->lnf, (size_t)r0 * C), gpu_wte(model, 0), NULL, rows,
                              C, Vp);
            cu_crossentropy_forward(dt, model->losses + r0, model->head_logits, model->targets + r0, rows, c->vocab, Vp);
        }
    } else {
        model->logits = gpu_push_saved(model, &final_saved[SV_LOGITS]);
        cu_matmul_forward(dt, model->logits, model->lnf, gpu_wte(model, 0), NULL, N, C, Vp);  // LM head tied to wte
        if (!targets) return;
        cu_crossentropy_forward(dt, model->losses, model->logits, model->targets, N, c->vocab, Vp);
    }
    cu_loss_add(model->numbers, model->losses, N);  // stays on the GPU: no wait here
}

// Row i of the last forward's logits, widened to fp32 into host[Vp] (sampling).
// With --fused-ce there are none: the row is computed now, into the chunk buffer.
void gpu_logits_row(GpuGPT *model, int i, float *host) {
    int C = model->cfg.channels, Vp = padded_vocab(&model->cfg);
    const void *logits = model->fused_ce ? model->head_logits : at_elem(model, model->logits, (size_t)i * Vp);
    if (model->fused_ce)
        cu_matmul_forward(model->dtype, model->head_logits, at_elem(model, model->lnf, (size_t)i * C), gpu_wte(model, 0), NULL,
                          1, C, Vp);
    if (model->dtype == DT_FP32) { gpu_download(host, logits, (size_t)Vp * 4); return; }
    uint16_t *row = malloc(2 * (size_t)Vp);
    gpu_download(row, logits, 2 * (size_t)Vp);
    dtype_load(host, row, Vp, model->dtype);
    free(row);
}

void gpu_discard_activations(GpuGPT *model) { arena_pop_to(model->arena_mark, "forward"); }

// --- backward ---------------------------------------------------------------------

// One block, backward: model->dres holds d(res3) on entry, d(x) on exit (model.h block_backward).
void gpu_block_backward(GpuGPT *model, int l, const void *x, int B, int T) {
    const GPTConfig *c = &model->cfg;
    int C = c->channels, H = c->heads, N = B * T, dt = model->dtype;
    GpuLayer w = gpu_layer(model, l, 0), g = gpu_layer(model, l, 1);
    GpuActs *a = &model->acts[l];
    cu_matmul_backward(dt, model->dfch, g.fcprojw, g.fcprojb, model->dres, a->fch_gelu, w.fcprojw, N, 4 * C, C);
    cu_gelu_backward(dt, model->dfch, a->fch, model->dfch, (size_t)N * 4 * C);
    cu_matmul_backward(dt, model->dln, g.fcw, g.fcb, model->dfch, a->ln2, w.fcw, N, C, 4 * C);
    cu_layernorm_backward(dt, model->dres, g.ln2w, g.ln2b, model->dln, a->res2, w.ln2w, a->ln2_mean, a->ln2_rstd, N, C);
    cu_matmul_backward(dt, model->datty, g.attprojw, g.attprojb, model->dres, a->atty, w.attprojw, N, C, C);
    if (model->flash) cu_flash_backward(dt, model->dqkv, model->datty, a->qkv, a->atty, a->lse, model->flash_D, B, T, C, H);
    else cu_attention_backward(dt, model->dqkv, model->datty, a->qkv, a->att, B, T, C, H);  // consumes att
    cu_matmul_backward(dt, model->dln, g.qkvw, g.qkvb, model->dqkv, a->ln1, w.qkvw, N, C, 3 * C);
    cu_layernorm_backward(dt, model->dres, g.ln1w, g.ln1b, model->dln, x, w.ln1w, a->ln1_mean, a->ln1_rstd, N, C);
}

// Backward for the last gpu_gpt_forward (with targets); dloss as in model.h.
void gpu_gpt_backward(GpuGPT *model, float dloss) {
    const GPTConfig *c = &model->cfg;
    int B = model->B, T = model->T, C = c->channels, N = B * T, Vp = padded_vocab(c), dt = model->dtype;
    if (model->shard.stage >= 2) gpu_zero(model->grad_global, model->global_n * model->e);
    if (model->fused_ce) {  // each chunk's logits again, then as below, a chunk of rows at a time
        for (int r0 = 0; r0 < N; r0 += GPU_HEAD_ROWS) {
            int rows = N - r0 < GPU_HEAD_ROWS ? N - r0 : GPU_HEAD_ROWS;
            const void *lnf = at_elem(model, model->lnf, (size_t)r0 * C);
            cu_matmul_forward(dt, model->head_logits, lnf, gpu_wte(model, 0), NULL, rows, C, Vp);
            cu_crossentropy_backward(dt, model->head_logits, model->targets + r0, rows, c->vocab, Vp, dloss);
            cu_matmul_backward(dt, at_elem(model, model->dln, (size_t)r0 * C), gpu_wte(model, 1), NULL, model->head_logits, lnf,
                               gpu_wte(model, 0), rows, C, Vp);
        }
    } else {
        cu_crossentropy_backward(dt, model->logits, model->targets, N, c->vocab, Vp, dloss);  // logits -> dlogits in place
        cu_matmul_backward(dt, model->dln, gpu_wte(model, 1), NULL, model->logits, model->lnf, gpu_wte(model, 0), N, C, Vp);
    }
    gpu_zero(model->dres, (size_t)N * C * model->e);
    cu_layernorm_backward(dt, model->dres, gpu_lnfw(model, 1), gpu_lnfb(model, 1), model->dln,
                          gpu_block_input(model, c->layers), gpu_lnfw(model, 0), model->lnf_mean, model->lnf_rstd, N, C);
    arena_pop_to(model->final_mark, "final");
    void **events = model->ckpt ? gpu_recompute_events(model) : NULL;  // this micro-batch's
    for (int l = c->layers - 1; l >= 0; l--) {
        int mark = model->acts[l].mark;
        const void *x = gpu_block_input(model, l);
        gpu_gather_layer(model, l);  // stage 3: again, for the recompute and the backward
        if (model->shard.stage >= 2) gpu_zero(model->grad_layer, model->layer_n * model->e);
        if (model->ckpt) {
            arena_pop_to(mark, "ckpt output");  // the block's kept output: its gradient is in dres, the value unused
            if (g_ledger.trace) printf("  recompute layer %d\n", l);
            gpu_event_record(events[2 * l]);
            gpu_block_forward(model, l, x, B, T);
            gpu_event_record(events[2 * l + 1]);
        }
        gpu_block_backward(model, l, x, B, T);
        gpu_reduce_layer(model, l);  // stages 2, 3
        arena_pop_to(mark, "layer");
    }
    int *pos = model->buckets, *start = pos + N, *tok = start + N + 1;
    cu_encoder_backward(dt, gpu_wte(model, 1), gpu_wpe(model, 1), model->dres, pos, start, tok, model->nbuckets, B, T, C);
    gpu_reduce_globals(model);  // stages 2, 3
    arena_pop_to(model->arena_mark, "encoded");
}

// --- the optimizer -------------------------------------------------------------------

// The gradients' norm and AdamW's scale (optimizer.h step_grad_scale) into
// the step's numbers: the sum of squares of the (reduced) gradients this rank
// owns, all of them on one rank. On one rank it all stays on the GPU. With
// several, the partial sums come to the host (a wait: the ranks must add their
// sums, in rank order), and the total and the scale go back.
void gpu_grad_norm(GpuGPT *model, float loss_scale, float clip) {
    const Shard *sh = &model->shard;
    cu_sum_squares_partials(model->dtype, model->norm_partials, at_elem(model, model->grads, sh->own_lo - model->grads_base),
                            sh->own_hi - sh->own_lo);
    if (sh->nranks == 1) {
        cu_grad_scale(model->numbers, model->norm_partials, GPU_NORM_BLOCKS, loss_scale, clip);
        return;
    }
    double part[GPU_NORM_BLOCKS], s = 0.0;
    gpu_download(part, model->norm_partials, sizeof part);
    for (int i = 0; i < GPU_NORM_BLOCKS; i++) s += part[i];
    double total = comm_sum_ordered(s);
    model->host_scale = step_grad_scale(total, loss_scale, clip);
    double two[2] = {total, model->host_scale};  // STEP_SUMSQ, STEP_SCALE
    gpu_upload(model->numbers + STEP_SUMSQ, two, sizeof two);
}

// The step's loss sum (the micro-batches' mean losses added up since the last
// read) and sum of squares, in one copy: the host's one wait for the GPU in a
// step. The loss sum starts again from 0.
void gpu_read_numbers(GpuGPT *model, double *loss_sum, double *sumsq) {
    double v[GPU_STEP_NUMBERS];
    gpu_download(v, model->numbers, sizeof v);
    *loss_sum = v[STEP_LOSS], *sumsq = v[STEP_SUMSQ];
    gpu_zero(model->numbers + STEP_LOSS, sizeof(double));
}

// One AdamW step over the parameters this rank updates (its share from stage
// 1 on; all of them at stage 0, where every rank is a replica), tensor by
// tensor so weight decay reaches only 2-D weights (optimizer.h
// optimizer_step); the 16-bit weights are rewritten from the master. Stages
// 1, 2 then all-gather every rank's updated block. The gradients' scale is in
// the step's numbers (gpu_grad_norm): a NaN there skips the step in the
// kernels, and, with several ranks, here already (no gathers).
void gpu_adamw_step(GpuGPT *model, const AdamWConfig *o, float lr, int t) {
    const Shard *sh = &model->shard;
    if (sh->nranks > 1 && isnan(model->host_scale)) return;
    float b1c = 1.0f - powf(o->beta1, (float)t), b2c = 1.0f - powf(o->beta2, (float)t);
    size_t lo = sh->stage >= 1 ? sh->own_lo : 0, hi = sh->stage >= 1 ? sh->own_hi : model->nparams;
    for (int i = 0; i < model->ntensors; i++) {
        const ParamTensor *pt = &model->tensors[i];
        size_t a = pt->offset > lo ? pt->offset : lo, b = pt->offset + pt->count < hi ? pt->offset + pt->count : hi;
        if (a >= b) continue;
        cu_adamw(model->dtype, model->master + (a - model->master_base),
                 model->dtype == DT_FP32 ? NULL : at_elem(model, model->params, a - model->params_base),
                 at_elem(model, model->grads, a - model->grads_base), model->adam_m + (a - model->state_base),
                 model->adam_v + (a - model->state_base), b - a, lr, o->beta1, o->beta2, o->eps,
                 pt->is_matrix ? o->weight_decay : 0.0f, b1c, b2c, model->numbers + STEP_SCALE);
    }
    if (sh->stage == 1 || sh->stage == 2) gpu_allgather_blocks(model, model->params, model->e);
}

// Do all ranks hold the same weights (stages 0 to 2)? The compute weights are
// hashed a staging buffer at a time on the host (zero.h's hash), every rank
// taking part; 1 on one rank and at stage 3.
int gpu_replicas_identical(GpuGPT *model) {
    const Shard *sh = &model->shard;
    if (sh->nranks == 1 || sh->stage == 3) return 1;
    size_t bytes = model->nparams * model->e, piece = model->staging.cap / 8 * 8;
    uint64_t h = REPLICA_HASH_START;
    for (size_t at = 0; at < bytes; at += piece) {
        size_t n = bytes - at < piece ? bytes - at : piece;
        gpu_download(model->staging.host, (char *)model->params + at, n);
        h = replica_hash(h, model->staging.host, n);
    }
    return zero_hashes_agree(sh, h);
}

#endif
