// app/net.h — the model on its device: the CPU reference (model.h, with
// optim/optimizer.h's AdamW state) or the GPU (gpu/model.h, which keeps AdamW's
// state on the GPU too). train.c's loop calls only these functions; they are
// the only places that ask which device runs.
//
// A step's numbers (its loss, its gradients' norm, AdamW's gradient scale)
// stay where the model is, and the step is told them by net_read_numbers
// once it is over: on the GPU the host queues a whole step without waiting
// for any of it (with several ranks, the norm is the exception: the ranks add
// theirs on the host).
#ifndef GPTMEM_NET_H
#define GPTMEM_NET_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/plan.h"
#include "core/settings.h"
#include "model.h"
#include "cpu/offload.h"
#include "gpu/offload.h"
#include "optim/offload.h"
#include "optim/optimizer.h"
#include "parallel/comm.h"
#include "parallel/zero.h"
#include "cuda/api.h"
#include "gpu/model.h"
#include "app/outputs.h"
#include "io/llmc.h"
#include "io/state.h"

typedef struct {
    int cuda;       // --device cuda
    GPT cpu;        // --device cpu: the model
    Optimizer opt;  // AdamW: its config on both devices; its state on the CPU, or off either device (--offload)
    GpuGPT gpu;     // --device cuda: the model and AdamW's state
    float *row;     // --device cuda: one row of logits copied to the host for sampling (Vp floats)
    // --device cpu: the step's numbers (the GPU keeps them in device memory, GpuGPT.numbers)
    double loss_sum;   // the mean losses of the forwards since the last net_read_numbers, added up
    double sumsq;      // the gradients' sum of squares (net_grad_norm)
    float grad_scale;  // AdamW's gradient scale: core/adamw.h step_grad_scale; NaN skips the step
    HostOffload off;         // --offload: the optimizer's states off the device, its step on the host
    OffloadTarget off_file;  // --offload-to disk: what a saved state reads and writes them through
    KVCache kv;              // while a sample runs: its KV cache on the CPU (cpu/kvcache.h)
    GpuKVCache gpu_kv;       // ... on the GPU (gpu/kvcache.h)
} Net;

// The step's numbers, read after it (net_read_numbers).
typedef struct {
    double loss_sum;  // the forwards' mean losses added up
    double sumsq;     // the gradients' sum of squares (all ranks), times loss_scale^2 in fp16
} NetNumbers;

// The AdamW settings of the run (core/adamw.h).
AdamWConfig adamw_config(const Settings *s) {
    AdamWConfig a = {s->lr, s->beta1, s->beta2, 1e-8f, s->weight_decay, s->warmup, s->steps, s->min_lr_frac};
    return a;
}

// Build the model and its optimizer on the settings' device, for rank `rank`
// following `plan` (made for all the ranks), with an activation stack of
// `stack` bytes (the predicted peak), and initialize the weights from --seed
// or read them from --init's llm.c file (each rank reads only what it keeps).
// 0, or -1 after a message (--offload-to disk could not make its file).
int net_build(Net *n, const Settings *s, const Plan *plan, int rank, size_t stack) {
    memset(n, 0, sizeof *n);
    LlmcModel init_file;  // (its header was checked when the settings were resolved: app/flags.h)
    WeightSource src = seeded(s->seed);
    char err[1400];
    if (s->init) {
        if (llmc_model_open(&init_file, s->init, err, sizeof err)) {
            fprintf(stderr, "error: --init: %s\n", err);
            return -1;
        }
        src.read = llmc_read_range, src.file = &init_file;
    }
    n->cuda = s->cuda;
    n->opt.cfg = adamw_config(s);
    n->opt.bits = 32;
    if (s->cuda) {
        gpu_gpt_build(&n->gpu, s, plan, rank);
        n->gpu.comm.nccl = s->comm == COMM_NCCL;
        gpu_arena_reserve(stack);
        n->row = malloc(sizeof(float) * padded_vocab(&s->cfg));
    } else {
        gpt_build(&n->cpu, s, plan, rank);
        arena_reserve(stack);
    }
    const Shard *sh = s->cuda ? &n->gpu.shard : &n->cpu.shard;  // the optimizer's state: the shard from stage 1, else whole
    AdamWConfig adam = adamw_config(s);
    size_t lo, hi, n_alloc = shard_state_len(sh);
    shard_state_range(sh, &lo, &hi);
    if (plan->offload & OFFLOAD_OPT) {  // --offload: the optimizer's states off the device, and the init there
        OffloadLink link = s->cuda ? gpu_offload_link(&n->gpu) : cpu_offload_link(&n->cpu);
        n->off_file = (OffloadTarget){&n->off, &n->opt};
        int bad = host_offload_build(&n->off, &link, plan, &n->opt, &adam, &s->cfg, lo, hi, n_alloc, s->adam_bits,
                                     s->offload_dir, rank);
        if (comm_any(bad)) return -1;  // (every rank stops before the init's collectives)
        host_offload_init(&n->off, &n->opt, &s->cfg, &src);
        return 0;
    }
    if (s->cuda) {
        gpu_gpt_init(&n->gpu, &src);
        return 0;
    }
    GPT *model = &n->cpu;
    gpt_init(model, &src);
    optimizer_build(&n->opt, &adam, &s->cfg, lo, hi, n_alloc, s->adam_bits);
    return 0;
}

void net_free(Net *n) {
    host_offload_free(&n->off);
    if (n->cuda) {
        if (n->gpu.comm.nccl) gpu_nccl_close();  // the communicator train.c opened (--comm nccl)
        optimizer_free(&n->opt);
        gpu_gpt_free(&n->gpu);
        gpu_arena_release();
        free(n->row);
    } else {
        optimizer_free(&n->opt);
        gpt_free(&n->cpu);
        arena_release();
    }
}

// The ZeRO stage the run really uses (0 on one rank).
int net_zero_stage(const Net *n) { return n->cuda ? n->gpu.shard.stage : n->cpu.shard.stage; }

// A new step: the gradients start from 0 (the loss sum did at the last net_read_numbers).
void net_zero_grad(Net *n) {
    if (n->cuda) gpu_gpt_zero_grad(&n->gpu);
    else gpt_zero_grad(&n->cpu);
    n->gpu.recompute_used = 0;  // forget the last step's recompute time
    n->cpu.recompute_seconds = n->gpu.recompute_seconds = 0.0;
}

// Forward over inp[B,T]; with targets, the mean loss is added into the loss
// sum where the model is (net_read_numbers reads it).
void net_forward(Net *n, const int *inp, const int *targets, int B, int T) {
    if (n->cuda) { gpu_gpt_forward(&n->gpu, inp, targets, B, T); return; }
    float loss = gpt_forward(&n->cpu, inp, targets, B, T);
    if (targets) n->loss_sum += loss;
}

void net_backward(Net *n, const int *inp, const int *targets, float dloss) {
    if (n->cuda) gpu_gpt_backward(&n->gpu, dloss);
    else gpt_backward(&n->cpu, inp, targets, dloss);
}

// After the backward, ZeRO stages 0 and 1 sum the full gradients over the
// ranks (stages 2 and 3 reduced each layer's during the backward).
void net_reduce(Net *n) {
    if (n->cuda) gpu_gpt_reduce_grads(&n->gpu);
    else gpt_reduce_grads(&n->cpu);
}

void net_discard_activations(Net *n) {
    if (n->cuda) gpu_gpt_discard_activations(&n->gpu);
    else gpt_discard_activations(&n->cpu);
}

const float *net_logits_row(Net *n, int i) {
    if (!n->cuda) return gpt_logits_row(&n->cpu, i);
    gpu_gpt_logits_row(&n->gpu, i, n->row);
    return n->row;
}

// Sampling's KV cache for T positions, on the model's device (cpu/kvcache.h,
// gpu/kvcache.h), on its activation stack. Returns its bytes and sets *dtype
// to what it holds; 0 without one: GPTMEM_SAMPLE_FULL set (the tests'
// reference sampler, running the whole context again for every token).
size_t net_kv_open(Net *n, int T, int *dtype) {
    if (getenv("GPTMEM_SAMPLE_FULL")) return 0;
    if (n->cuda) {
        gpu_kv_open(&n->gpu_kv, &n->gpu, T);
        *dtype = n->gpu_kv.dtype;
        return n->gpu_kv.bytes;
    }
    kv_open(&n->kv, &n->cpu, T);
    *dtype = n->kv.dtype;
    return n->kv.bytes;
}

void net_kv_close(Net *n) {
    if (n->gpu_kv.kv) gpu_kv_close(&n->gpu_kv);
    if (n->kv.kv) kv_close(&n->kv);
}

// A sample's forward over the context ctx[0 .. pos0 + rows): with the cache
// open, only its last `rows` tokens, at positions pos0 on, the cache holding
// the keys and values of the positions before; without, all of it (pos0 0).
// Returns the logits of the context's last position (fp32, Vp of them).
const float *net_sample_forward(Net *n, const int *ctx, int pos0, int rows) {
    if (!n->kv.kv && !n->gpu_kv.kv) {
        net_forward(n, ctx, NULL, 1, pos0 + rows);
        return net_logits_row(n, pos0 + rows - 1);
    }
    if (n->cuda) n->gpu.kv = &n->gpu_kv, n->gpu.pos0 = pos0;
    else n->cpu.kv = &n->kv, n->cpu.pos0 = pos0;
    net_forward(n, ctx + pos0, NULL, 1, rows);
    n->gpu.kv = NULL, n->gpu.pos0 = 0, n->cpu.kv = NULL, n->cpu.pos0 = 0;
    return net_logits_row(n, rows - 1);
}

// The gradients' global norm (their sum of squares over all ranks) and
// AdamW's gradient scale from it: 1/loss_scale, times the clip scale when the
// norm is over `clip` (core/adamw.h step_grad_scale).
void net_grad_norm(Net *n, float loss_scale, float clip) {
    if (n->cuda) { gpu_grad_norm(&n->gpu, loss_scale, clip); return; }
    n->sumsq = gpt_grad_sum_squares(&n->cpu);
    n->grad_scale = step_grad_scale(n->sumsq, loss_scale, clip);
}

// AdamW (step t, 1-based) over the parameters this rank owns, with the scale
// of net_grad_norm, then the weights every rank computes with. Nothing
// happens when the norm was not finite (fp16 overflow: the step is skipped).
void net_step(Net *n, float lr, int t) {
    if (n->cuda && !n->off.on) { gpu_adamw_step(&n->gpu, &n->opt.cfg, lr, t); return; }
    float scale = n->cuda ? gpu_step_scale(&n->gpu) : n->grad_scale;
    if (isnan(scale)) return;
    if (n->off.on) { host_offload_step(&n->off, &n->opt, lr, t, scale); return; }
    GPT *model = &n->cpu;
    optimizer_step(&n->opt, model->params, model->master_base, gpt_grads(model), model->grads_base, model->dtype, lr,
                   t, n->grad_scale);
    gpt_sync_params(model);  // stages 1, 2: all-gather the updated shards
}

// The loss sum and the sum of squares, after the step: on the GPU one copy,
// the host's one wait for it in a step. The loss sum starts again from 0.
NetNumbers net_read_numbers(Net *n) {
    NetNumbers r;
    if (n->cuda) {
        gpu_read_numbers(&n->gpu, &r.loss_sum, &r.sumsq);
        return r;
    }
    r.loss_sum = n->loss_sum, r.sumsq = n->sumsq;
    n->loss_sum = 0.0;
    return r;
}

// What block 0 kept on the stack after the last training forward (--mem-ops; the CPU's stack only).
size_t net_block_kept_bytes(const Net *n) { return n->cuda ? 0 : n->cpu.block_kept_bytes; }

double net_recompute_seconds(Net *n) { return n->cuda ? gpu_gpt_recompute_seconds(&n->gpu) : n->cpu.recompute_seconds; }

// Do all ranks hold the same weights? (every rank takes part; 1 on one rank)
int net_replicas_identical(Net *n) { return n->cuda ? gpu_gpt_replicas_identical(&n->gpu) : gpt_replicas_identical(&n->cpu); }

// How often --log runs that check: every step, but on GPU ranks, which bring
// every weight to the host to hash it, every ceil(weight bytes /
// GPU_REPLICA_CHECK_BYTES) steps (GPT-2 in bf16: 249 MB, every 8).
int net_replica_check_every(const Net *n) {
    const GpuGPT *g = &n->gpu;
    if (!n->cuda || g->shard.nranks == 1 || g->shard.stage == 3) return 1;
    return (int)((g->nparams * g->elem_bytes + GPU_REPLICA_CHECK_BYTES - 1) / GPU_REPLICA_CHECK_BYTES);
}

// The model's vocabulary V (the logits past it are padding).
int net_vocab(const Net *n) { return n->cuda ? n->gpu.cfg.vocab : n->cpu.cfg.vocab; }

// The bytes of the weights the model computes with, all of them (that check hashes them).
size_t net_weight_bytes(const Net *n) {
    return n->cuda ? n->gpu.nparams * n->gpu.elem_bytes : n->cpu.nparams * dtype_size(n->cpu.dtype);
}

// This rank's part of the training state, what a saved state holds
// (io/state.h's NetState): the fp32 weights and Adam's m and v of the parameters
// [lo, hi) (all of them on one rank), in host or device memory; with
// --adam-bits 8 the moments are read and written through the optimizer.
NetState net_state(Net *n) {
    NetState st;
    memset(&st, 0, sizeof st);
    if (n->cuda && !n->off.on) {
        GpuGPT *g = &n->gpu;
        st.lo = g->shard.own_lo, st.hi = g->shard.own_hi, st.on_gpu = 1;
        st.w = g->master + (st.lo - g->master_base);
        st.m = g->adam_m + (st.lo - g->state_base), st.v = g->adam_v + (st.lo - g->state_base);
        return st;
    }
    GPT *model = &n->cpu;
    Optimizer *opt = &n->opt;
    const Shard *sh = n->cuda ? &n->gpu.shard : &model->shard;
    st.lo = sh->own_lo, st.hi = sh->own_hi, st.on_gpu = 0;
    if (!n->off.on) st.w = model->params + (st.lo - model->master_base);
    if (n->off.on && n->off.disk) {  // --offload-to disk: all three through the file
        st.w = NULL;
        st.weights = st.moments = &n->off_file;
        st.weights_at = st.moments_at = st.lo - n->off.lo;
        st.weights_get = offload_weights_get, st.weights_set = offload_weights_set;
        st.moments_get = offload_moments_get, st.moments_set = offload_moments_set;
        return st;
    }
    if (n->off.on) st.w = n->off.master + (st.lo - n->off.lo);  // --offload-to host: the host's arrays
    if (opt->bits == 8) {  // m and v read and written through the optimizer, as fp32
        st.moments = opt, st.moments_at = st.lo - opt->lo;
        st.moments_get = optimizer_moments_get, st.moments_set = optimizer_moments_set;
    }
    else st.m = opt->m + (st.lo - opt->lo), st.v = opt->v + (st.lo - opt->lo);
    return st;
}

// --export FILE: the fp32 weights as llm.c's model file (app/outputs.h
// export_llmc), each rank writing the weights it keeps (net_state's [lo, hi):
// together the ranks' parts are all of them, at every stage). 0 (also
// without --export), or 1 after a message (every rank returns the same).
int net_export(Net *n, const Settings *s) {
    if (!s->export_to) return 0;
    NetState st = net_state(n);
    return export_llmc(s->export_to, &s->cfg, st.lo, st.hi, state_weights_get, &st);
}

// After a saved state was read into net_state's arrays: at stage 0 every rank
// gathers every rank's part (they are replicas); then the compute weights
// (16-bit copies, and the gathers of stages 1 and 2) follow the fp32 weights.
void net_state_loaded(Net *n) {
    if (n->off.on) {
        const Shard *sh = n->cuda ? &n->gpu.shard : &n->cpu.shard;
        if (sh->stage == 0 && sh->nranks > 1) {
            if (n->off.disk) offload_file_allgather(&n->off_file, sh);
            else optimizer_state_allgather(&n->opt, n->off.master, sh);
        }
        host_offload_weights_follow(&n->off, &n->opt);
        return;
    }
    if (n->cuda) {
        GpuGPT *g = &n->gpu;
        if (g->shard.stage == 0 && g->shard.nranks > 1) {
            gpu_zero_allgather_blocks(&g->comm, g->master, sizeof(float));
            gpu_zero_allgather_blocks(&g->comm, g->adam_m, sizeof(float));
            gpu_zero_allgather_blocks(&g->comm, g->adam_v, sizeof(float));
        }
        gpu_gpt_sync_params(g);
        return;
    }
    GPT *model = &n->cpu;
    const Shard *sh = &model->shard;
    if (sh->stage == 0 && sh->nranks > 1) optimizer_state_allgather(&n->opt, model->params, sh);
    gpt_sync_params(model);
}

#endif
