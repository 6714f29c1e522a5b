// app/sends.h — what a step sends between the ranks, predicted, as the run's lines say it: inside and
// across --shard-group's groups (the stage's ring formula, gptmem's chunks), and inside --tp's group.
#ifndef GPTMEM_APP_SENDS_H
#define GPTMEM_APP_SENDS_H

#include <stdio.h>
#include "core/plan.h"
#include "core/settings.h"
#include "memory/predict.h"

// --shard-group: what a step sends inside a group (`inside`, the stage's ring formula) and across
// the groups, each rank.
void print_group_sends(const Settings *s, const Plan *plan, double inside) {
    int ranks = plan->ranks, R = plan->groups;
    size_t P = trained_param_count(s);
    ShardSizes z = predict_shard(P, plan);
    double n = z.zero == 0 ? (double)z.weights_n : (double)z.S;
    long long across = predict_across_bytes(P, plan);
    if (ranks == 1) printf("  --shard-group 1: a group of one shards nothing, data parallel over %d ranks; a step sums "
                           "each rank's gradients (%.0f) across them:\n", R, n);
    else if (s->shard_group_node)
        printf("  --shard-group node, %d ranks a machine: the states sharded over the ranks of a machine, the %d "
               "machines replicas; a step sums each rank's gradients (%.0f) across the machines (the groups):\n",
               ranks, R, n);
    else printf("  --shard-group %d: the states sharded over the %d ranks of a group, the %d groups replicas; a step "
                "sums each rank's gradients (%.0f) across the groups:\n", ranks, ranks, R, n);
    printf("  %-56s %14.0f B %10.2f MiB\n", "  inside the group: the stage's ring formula", inside, inside / 1048576.0);
    printf("  %-56s %14.0f B %10.2f MiB\n", "  across: ring all-reduce, 2 (R-1)/R x 4 x those",
           2.0 * (R - 1) / R * 4 * n, 2.0 * (R - 1) / R * 4 * n / 1048576.0);
    printf("  %-56s %14lld B %10.2f MiB\n", "  across: gptmem sends (chunks, R blocks each)", across, across / 1048576.0);
}

// --tp: a value's bytes in the group's collectives: fp32 through the host, or the dtype's on the GPUs with
// --comm nccl (gpu/tensor.h).
size_t tp_value_bytes(const Settings *s) { return s->cuda && s->comm == COMM_NCCL ? dtype_size(s->dtype) : 4; }

// --tp: what a step sends inside the tensor-parallel group (rank 0's share of the collectives:
// memory/predict_shard.h), and in *per_layer the (N,C) collectives a layer and micro-batch.
long long tp_step_bytes(const Settings *s, const Plan *plan, int *per_layer) {
    size_t N = (size_t)s->batch * s->seq_len, C = s->cfg.channels, norm = (is_llama(&s->cfg) ? 1 : 2) * C, e = tp_value_bytes(s);
    *per_layer = s->sp ? sp_collectives_a_layer(plan->rebuilds) : tp_sums_a_layer(plan->rebuilds);
    return s->sp ? predict_sp_bytes(s->tp, 0, N, C, norm, s->cfg.layers, s->accum, plan->rebuilds, e)
                 : predict_tp_bytes(s->tp, 0, N, C, s->cfg.layers, s->accum, plan->rebuilds, e);
}

// ... in the dry run, beside ZeRO's ring formula.
void print_tp_step(const Settings *s, const Plan *plan) {
    int k;
    double t = (double)tp_step_bytes(s, plan, &k);
    printf("  %-56s %14.0f B %10.2f MiB\n", "a step sends inside its tensor-parallel group", t, t / 1048576.0);
}

// ... and what rank 0's first step sent there, beside the collectives' count.
void print_tp_sends(const Settings *s, const Plan *plan, long long sent) {
    int sp = s->sp, k;
    long long want = tp_step_bytes(s, plan, &k);
    size_t e = tp_value_bytes(s);
    printf("  of which inside its tensor-parallel group of %d: %lld B (predicted %lld B: %s%d %s of (N,C) %s a layer and "
           "micro-batch, %s x %zu N C B each, %d at the model's ends%s, the loss's lse and target logit)\n", s->tp, sent, want,
           sp ? "--sp's " : "", k, sp ? "all-gathers and reduce-scatters" : "all-reduces", e == 4 ? "fp32" : dtype_name[s->dtype],
           sp ? "(t-1)/t" : "2 (t-1)/t", e, sp ? 5 : 2, sp ? ", the norms' gradients summed" : "");
}

#endif
