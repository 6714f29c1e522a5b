// app/net.h — the model on its device: the CPU reference (model.h, with
// cpu/optimizer.h at the end of its step) or the GPU (gpu/model.h, with
// gpu/optimizer.h). Each model owns its buffers, AdamW's state, the step's
// numbers and sampling's KV cache; train.c's loop calls only these functions,
// each one line that names the device's twin, with --offload (optim/offload.h:
// the optimizer's states off either device) the one other branch.
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
#include "core/plan.h"
#include "core/settings.h"
#include "model.h"
#include "cpu/lora.h"
#include "cpu/offload.h"
#include "cpu/optimizer.h"
#include "gpu/offload.h"
#include "optim/offload.h"
#include "optim/optimizer.h"
#include "parallel/comm.h"
#include "parallel/zero.h"
#include "cuda/api.h"
#include "gpu/model.h"
#include "app/outputs.h"
#include "io/init_file.h"
#include "io/llmc.h"
#include "io/peft.h"
#include "io/state.h"

typedef struct {
    int cuda;         // --device cuda
    GPT cpu;          // --device cpu: the model
    GpuGPT gpu;       // --device cuda: the model
    HostOffload off;  // --offload: the optimizer's states off the device, its step on the host
} Net;

// The step's numbers, read after it (net_read_numbers).
typedef struct {
    double loss_sum;  // the forwards' mean losses added up
    double sumsq;     // the gradients' sum of squares (all ranks), times loss_scale^2 in fp16
} NetNumbers;

// Where the weights come from: GPT-2's init from --seed, or --init's file,
// llm.c's or a Hugging Face model (io/init_file.h; its header was checked
// when the settings were resolved: app/inputs.h). 0, or -1 after a message.
int weight_source(WeightSource *src, InitFile *file, const Settings *s) {
    char err[1400];
    *src = seeded(s->seed);
    memset(file, 0, sizeof *file);  // (nothing open: init_file_close then closes nothing)
    if (!s->init) return 0;
    if (init_file_open(file, s->init, err, sizeof err)) {
        fprintf(stderr, "error: --init: %s\n", err);
        return -1;
    }
    *src = init_file_source(file);
    return 0;
}

// The model on the settings' device, for rank `rank` following `plan` (made
// for all the ranks), with an activation stack of `stack` bytes (the
// predicted peak).
void net_build_model(Net *n, const Settings *s, const Plan *plan, int rank, size_t stack) {
    if (n->cuda) (s->lora.rank ? gpu_lora_gpt_build : gpu_gpt_build)(&n->gpu, s, plan, rank), gpu_arena_reserve(stack);
    else (s->lora.rank ? lora_gpt_build : gpt_build)(&n->cpu, s, plan, rank), arena_reserve(stack);  // (--lora: */lora.h)
}

// The shard layout of the run (parallel/zero.h).
const Shard *net_shard(const Net *n) {  // (what the step trains: the model's weights, or --lora's adapters)
    return n->cuda ? &n->gpu.train.shard : &n->cpu.train.shard;
}

// --lora-init DIR: PEFT's adapters read over the drawn ones, through `put` into the model's (the folder was
// checked when the flags were read, app/lora_flags.h: read again here, where --init's file is). Exits with a
// message if it changed since.
void adapters_from_folder(const Settings *s, LoraPut put, void *ctx) {
    if (!s->lora_init) return;
    StModel f;
    LoraConfig a = s->lora;
    char err[1400] = "a read failed";
    int bad = peft_open(&f, s->lora_init, &s->cfg, &a, err, sizeof err) || memcmp(&a, &s->lora, sizeof a) ||
              peft_read_to(&f, &s->cfg, &a, put, ctx);
    peft_close(&f);
    if (bad) {
        fprintf(stderr, "error: --lora-init '%s': %s (was it changed since the run began?)\n", s->lora_init, err);
        exit(1);
    }
}

// The model's first weights, from --seed or --init's file, on its device (--lora: the frozen model's, then
// the adapters': drawn, or --lora-init's folder).
void net_init(Net *n, const Settings *s, const WeightSource *src) {
    if (n->cuda) (s->lora.rank ? gpu_lora_gpt_init : gpu_gpt_init)(&n->gpu, src), adapters_from_folder(s, gpu_lora_put, &n->gpu);
    else if (s->lora.rank) lora_gpt_init(&n->cpu, src), adapters_from_folder(s, lora_put_host, n->cpu.lora.w);
    else gpt_init(&n->cpu, src);
}

// --offload: the optimizer's states off the device (its range: this rank's
// shard from stage 1, else all of them), and the weights' init there, from
// where the compute weights are made. 0, or -1 after a message.
// The trained set's AdamW (the model's built it: optim/trained.h) runs there. --lora: the adapters' states,
// first made on the device (the frozen model's init and the adapters' own), then taken down.
int net_offload_build(Net *n, const Settings *s, const Plan *plan, int rank, const WeightSource *src) {
    const Shard *sh = net_shard(n);
    int gpu = n->cuda;  // (the device, asked once)
    OffloadLink link = gpu ? gpu_offload_link(&n->gpu) : cpu_offload_link(&n->cpu);
    const Optimizer *trained = gpu ? &n->gpu.train.opt : &n->cpu.train.opt;
    const TensorSplit *tp = gpu ? &n->gpu.tp : &n->cpu.tp;
    Optimizer opt = *trained;  // (with its own copy of the tensors: host_offload_free frees it)
    opt.tensors = memcpy(malloc(sizeof(ParamTensor) * opt.ntensors), trained->tensors, sizeof(ParamTensor) * opt.ntensors);
    int bad = host_offload_build(&n->off, &link, plan, &opt, shard_state_len(sh), s->offload_dir, rank);
    if (comm_any(bad)) return -1;  // (every rank stops before the init's collectives)
    if (s->tp > 1) host_offload_init_share(&n->off, tp, &s->cfg, src);  // (--tp: a share's)
    else if (!s->lora.rank) host_offload_init(&n->off, &s->cfg, src);
    if (!s->lora.rank) return 0;
    net_init(n, s, src);  // (the frozen model and the adapters on the device, then the adapters taken down)
    host_offload_init_by(&n->off, gpu ? gpu_lora_down_to : lora_down_to, gpu ? (void *)&n->gpu : (void *)&n->cpu);
    return 0;
}

// Build the model and its optimizer, and initialize the weights from --seed
// or read them from --init's file (each rank reads only what it keeps).
// 0, or -1 after a message (--init unreadable, --offload-to disk's file not made).
int net_build(Net *n, const Settings *s, const Plan *plan, int rank, size_t stack) {
    memset(n, 0, sizeof *n);
    InitFile init_file;
    WeightSource src;
    if (weight_source(&src, &init_file, s)) return -1;
    n->cuda = s->cuda;
    net_build_model(n, s, plan, rank, stack);
    int bad = plan->offload & OFFLOAD_OPT ? net_offload_build(n, s, plan, rank, &src) : 0;
    if (!(plan->offload & OFFLOAD_OPT)) net_init(n, s, &src);
    init_file_close(&init_file);
    return bad;
}

void net_free(Net *n) {
    host_offload_free(&n->off);
    if (n->cuda) gpu_gpt_free(&n->gpu), gpu_lora_gpt_free(&n->gpu), gpu_arena_release();
    else gpt_free(&n->cpu), lora_gpt_free(&n->cpu), arena_release();
}

// What a saved state records of the trained set beyond the model's shape: with --lora, the adapters'
// rank, maps and alpha, the frozen model's format and, when a state is written or read, its hash
// (cpu/lora.h lora_base_hash, gpu/lora.h's): a resume on another frozen model is refused.
void net_state_header(Net *n, const Settings *s, StateHeader *h) {
    if (!s->lora.rank) return;
    h->lora_rank = s->lora.rank, h->lora_targets = (int32_t)s->lora.targets;
    h->lora_alpha = s->lora.alpha, h->base_format = s->base_format;
    h->double_quant = s->double_quant;
    if (s->save || s->resume) h->base_hash = n->cuda ? gpu_lora_base_hash(&n->gpu) : lora_base_hash(&n->cpu);
}

// The ZeRO stage the run really uses (0 on one rank).
int net_zero_stage(const Net *n) { return net_shard(n)->stage; }

// A new step: the gradients start from 0 (the loss sum did at the last net_read_numbers).
void net_zero_grad(Net *n) { n->cuda ? gpu_gpt_zero_grad(&n->gpu) : gpt_zero_grad(&n->cpu); }

// Forward over inp[B,T]; with targets, the mean loss is added into the loss
// sum where the model is (net_read_numbers reads it).
void net_forward(Net *n, const int *inp, const int *targets, int B, int T) {
    n->cuda ? gpu_gpt_forward(&n->gpu, inp, targets, B, T) : (void)gpt_forward(&n->cpu, inp, targets, B, T);
}

void net_backward(Net *n, const int *inp, const int *targets, float dloss) {
    n->cuda ? gpu_gpt_backward(&n->gpu, dloss) : gpt_backward(&n->cpu, inp, targets, dloss);
}

// After the backward, ZeRO stages 0 and 1 sum the full gradients over the
// ranks (stages 2 and 3 reduced each layer's during the backward).
void net_reduce(Net *n) { n->cuda ? gpu_gpt_reduce_grads(&n->gpu) : gpt_reduce_grads(&n->cpu); }

void net_discard_activations(Net *n) {
    n->cuda ? gpu_gpt_discard_activations(&n->gpu) : gpt_discard_activations(&n->cpu);
}

// Row i of the last forward's logits, fp32 on the host (Vp of them).
const float *net_logits_row(Net *n, int i) {
    return n->cuda ? gpu_gpt_logits_row(&n->gpu, i) : gpt_logits_row(&n->cpu, i);
}

// Sampling's KV cache for T positions, on the model's device (cpu/kvcache.h,
// gpu/kvcache.h), on its activation stack. Returns its bytes and sets *dtype
// to what it holds; 0 without one: GPTMEM_SAMPLE_FULL set (the tests'
// reference sampler, running the whole context again for every token).
size_t net_kv_open(Net *n, int T, int *dtype) {
    if (getenv("GPTMEM_SAMPLE_FULL")) return 0;
    return n->cuda ? gpu_kv_open(&n->gpu, T, dtype) : kv_open(&n->cpu, T, dtype);
}

void net_kv_close(Net *n) { n->cuda ? gpu_kv_close(&n->gpu) : kv_close(&n->cpu); }

// A sample's forward over the context ctx[0 .. pos0 + rows): with the cache
// open, only its last `rows` tokens, at positions pos0 on, the cache holding
// the keys and values of the positions before; without, all of it (pos0 0).
// Returns the logits of the context's last position (fp32, Vp of them).
const float *net_sample_forward(Net *n, const int *ctx, int pos0, int rows) {
    n->cuda ? gpu_kv_at(&n->gpu, pos0) : kv_at(&n->cpu, pos0);
    net_forward(n, ctx + pos0, NULL, 1, rows);
    return net_logits_row(n, rows - 1);
}

// The gradients' global norm (their sum of squares over all ranks) and
// AdamW's gradient scale from it: 1/loss_scale, times the clip scale when the
// norm is over `clip` (core/adamw.h step_grad_scale).
void net_grad_norm(Net *n, float loss_scale, float clip) {
    n->cuda ? gpu_gpt_grad_norm(&n->gpu, loss_scale, clip) : gpt_grad_norm(&n->cpu, loss_scale, clip);
}

// The scale of net_grad_norm, on the host (--offload's step).
float net_step_scale(Net *n) { return n->cuda ? gpu_gpt_step_scale(&n->gpu) : gpt_step_scale(&n->cpu); }

// AdamW (step t, 1-based) over the parameters this rank owns, with the scale
// of net_grad_norm, then the weights every rank computes with. Nothing
// happens when the norm was not finite (fp16 overflow: the step is skipped).
void net_step(Net *n, float lr, int t) {
    if (n->off.on) host_offload_step(&n->off, lr, t, net_step_scale(n));
    else n->cuda ? gpu_gpt_adamw_step(&n->gpu, lr, t) : gpt_adamw_step(&n->cpu, lr, t);
}

// The loss sum and the sum of squares, after the step: on the GPU one copy,
// the host's one wait for it in a step. The loss sum starts again from 0.
NetNumbers net_read_numbers(Net *n) {
    NetNumbers r;
    n->cuda ? gpu_gpt_read_numbers(&n->gpu, &r.loss_sum, &r.sumsq) : gpt_read_numbers(&n->cpu, &r.loss_sum, &r.sumsq);
    return r;
}

// Does the host's team of threads do the model's arithmetic (the CPU), or not (the GPU)?
int net_host_threads(const Net *n) { return !n->cuda; }

// What block 0 kept on the stack after the last training forward (--mem-ops; the CPU's stack only).
size_t net_block_kept_bytes(const Net *n) { return n->cuda ? 0 : n->cpu.block_kept_bytes; }

double net_recompute_seconds(Net *n) { return n->cuda ? gpu_gpt_recompute_seconds(&n->gpu) : n->cpu.recompute_seconds; }

// Do all ranks hold the same weights? (every rank takes part; 1 on one rank)
int net_replicas_identical(Net *n) { return n->cuda ? gpu_gpt_replicas_identical(&n->gpu) : gpt_replicas_identical(&n->cpu); }

// How often --log runs that check: every step, but less often on GPU ranks (gpu/weights.h).
int net_replica_check_every(const Net *n) { return n->cuda ? gpu_replica_check_every(&n->gpu) : 1; }

// The model's vocabulary V (the logits past it are padding).
int net_vocab(const Net *n) { return n->cuda ? n->gpu.cfg.vocab : n->cpu.cfg.vocab; }

// The bytes of the weights the model computes with, all of them (that check hashes them).
size_t net_weight_bytes(const Net *n) {
    return n->cuda ? n->gpu.nparams * n->gpu.elem_bytes : n->cpu.nparams * dtype_size(n->cpu.dtype);
}

// This rank's part of the training state, what a saved state holds
// (io/state.h's NetState): the fp32 weights and Adam's m and v of the
// parameters this rank owns (all of them on one rank), in host or device
// memory, or with --offload where the offload keeps them.
NetState net_state(Net *n) {
    if (n->off.on) return host_offload_state(&n->off, net_shard(n)->own_lo, net_shard(n)->own_hi);
    return n->cuda ? gpu_gpt_state(&n->gpu) : gpt_state(&n->cpu);
}

// --export FILE: the fp32 weights as llm.c's model file, or with FILE.safetensors
// as a Hugging Face model (app/outputs.h export_weights), each rank writing the
// weights it keeps (net_state's [lo, hi): together the ranks' parts are all of
// them, at every stage). 0 (also without --export), or 1 after a message
// (every rank returns the same).
// --tp: a rank's share is scattered over the whole model's layout; it writes the weights it owns in runs
// of consecutive places there (the tensors whole on every rank: the group's first rank alone).
int tp_export(const Net *n, const Settings *s, const NetState *st) {
    const TensorSplit *tp = n->cuda ? &n->gpu.tp : &n->cpu.tp;
    const GPTConfig *share = &s->cfg;  // (the settings' model is the rank's share: app/flags.h)
    ExportRun *runs = NULL;
    int nr = 0, cap = 0;
    for (size_t j = st->lo, w; j < st->hi; j++) {
        int split;
        w = tp_whole_index(tp, share, j, &split);
        if (!split && tp->rank) continue;
        if (nr && runs[nr - 1].hi == w && runs[nr - 1].from + (w - runs[nr - 1].lo) == j - st->lo) {
            runs[nr - 1].hi++;
            continue;
        }
        if (nr == cap) runs = realloc(runs, sizeof *runs * (size_t)(cap = cap ? 2 * cap : 256));
        runs[nr++] = (ExportRun){w, w + 1, j - st->lo};
    }
    int bad = export_weights_runs(s->export_to, &tp->whole, runs, nr, state_weights_get, st);
    free(runs);
    return bad;
}

int net_export(Net *n, const Settings *s) {
    if (!s->export_to) return 0;
    int gpu = n->cuda;  // (the device, asked once: --lora's adapters read from it)
    void *model = gpu ? (void *)&n->gpu : (void *)&n->cpu;
    if (s->lora.rank && s->merge)
        return export_weights(s->export_to, &s->cfg, 0, param_count(&s->cfg), gpu ? gpu_lora_merged_get : lora_merged_get, model);
    if (s->lora.rank)  // (PEFT's files)
        return export_adapters(s->export_to, &s->cfg, &s->lora, gpu ? gpu_lora_get : lora_down_to, model);
    NetState st = net_state(n);
    if (s->tp > 1) return tp_export(n, s, &st);
    return export_weights(s->export_to, &s->cfg, st.lo, st.hi, state_weights_get, &st);
}

// After a saved state was read into net_state's arrays: at stage 0 every rank
// gathers every rank's part (they are replicas); then the compute weights
// (16-bit copies, and the gathers of stages 1 and 2) follow the fp32 weights.
void net_state_loaded(Net *n) {
    if (n->off.on) host_offload_state_loaded(&n->off, net_shard(n));
    else n->cuda ? gpu_gpt_state_loaded(&n->gpu) : gpt_state_loaded(&n->cpu);
}

#endif
