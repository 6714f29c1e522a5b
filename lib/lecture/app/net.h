// app/net.h, the lecture build's (make lecture): the model is the CPU's, model.h with cpu/optimizer.h at
// the end of its step, and every net_* is its one call. The full build's app/net.h is the same functions,
// each choosing the device (the GPU's twin, gpu/model.h) and taking --offload, --lora and --init's files
// where they come in; this build has none of those rooms (app/rooms.h refuses their flags).
#ifndef GPTMEM_NET_H
#define GPTMEM_NET_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/plan.h"
#include "core/settings.h"
#include "model.h"
#include "cpu/optimizer.h"
#include "io/state.h"
#include "parallel/zero.h"

typedef struct {
    GPT cpu;  // the model
} Net;

// The step's numbers, read after it (net_read_numbers).
typedef struct {
    double loss_sum;  // the forwards' mean losses added up
    double sumsq;     // the gradients' sum of squares (all ranks), times loss_scale^2 in fp16
} NetNumbers;

// The model for rank `rank` following `plan`, with an activation stack of `stack` bytes (the predicted
// peak), its weights drawn from --seed. 0.
int net_build(Net *n, const Settings *s, const Plan *plan, int rank, size_t stack) {
    memset(n, 0, sizeof *n);
    WeightSource src = seeded(s->seed);
    gpt_build(&n->cpu, s, plan, rank);
    arena_reserve(stack);
    gpt_init(&n->cpu, &src);
    return 0;
}

void net_free(Net *n) { gpt_free(&n->cpu), arena_release(); }

// The ZeRO stage the run really uses (0 on one rank).
int net_zero_stage(const Net *n) { return n->cpu.train.shard.stage; }

// The step, as train.c's loop calls it.
void net_zero_grad(Net *n) { gpt_zero_grad(&n->cpu); }
void net_forward(Net *n, const int *inp, const int *targets, int B, int T) { gpt_forward(&n->cpu, inp, targets, B, T); }
void net_backward(Net *n, const int *inp, const int *targets, float dloss) { gpt_backward(&n->cpu, inp, targets, dloss); }
void net_reduce(Net *n) { gpt_reduce_grads(&n->cpu); }
void net_grad_norm(Net *n, float loss_scale, float clip) { gpt_grad_norm(&n->cpu, loss_scale, clip); }
void net_step(Net *n, float lr, int t) { gpt_adamw_step(&n->cpu, lr, t); }

NetNumbers net_read_numbers(Net *n) {
    NetNumbers r;
    gpt_read_numbers(&n->cpu, &r.loss_sum, &r.sumsq);
    return r;
}

// Sampling: the KV cache (0 bytes with GPTMEM_SAMPLE_FULL set: the whole context again for every token),
// a forward over the context's last `rows` tokens, the logits of its last position.
void net_discard_activations(Net *n) { gpt_discard_activations(&n->cpu); }
size_t net_kv_open(Net *n, int T, int *dtype) { return getenv("GPTMEM_SAMPLE_FULL") ? 0 : kv_open(&n->cpu, T, dtype); }
void net_kv_close(Net *n) { kv_close(&n->cpu); }

const float *net_sample_forward(Net *n, const int *ctx, int pos0, int rows) {
    kv_at(&n->cpu, pos0);
    gpt_forward(&n->cpu, ctx + pos0, NULL, 1, rows);
    return gpt_logits_row(&n->cpu, rows - 1);
}

// What the step line, the ledger and --log read of the model.
int net_host_threads(const Net *n) { return (void)n, 1; }
size_t net_block_kept_bytes(const Net *n) { return n->cpu.block_kept_bytes; }
double net_recompute_seconds(Net *n) { return n->cpu.recompute_seconds; }
int net_replicas_identical(Net *n) { return gpt_replicas_identical(&n->cpu); }
int net_replica_check_every(const Net *n) { return (void)n, 1; }
int net_vocab(const Net *n) { return n->cpu.cfg.vocab; }
size_t net_weight_bytes(const Net *n) { return n->cpu.nparams * dtype_size(n->cpu.dtype); }

// This rank's part of the training state (io/state.h's NetState): --save writes it, --resume reads it back
// (then the compute weights follow the fp32 ones: net_state_loaded).
NetState net_state(Net *n) { return gpt_state(&n->cpu); }
void net_state_loaded(Net *n) { gpt_state_loaded(&n->cpu); }
void net_state_header(Net *n, const Settings *s, StateHeader *h) { (void)n, (void)s, (void)h; }  // (the model's own)
int net_export(Net *n, const Settings *s) { return (void)n, (void)s, 0; }

#endif
