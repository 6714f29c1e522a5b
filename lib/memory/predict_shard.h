// memory/predict_shard.h — the predicted half: the predictor's part for ranks: how ZeRO (and
// --shard-group) shards the arrays, and what a step sends, in closed form from
// the plan's stage and ranks (parallel/zero.h does it; the tests hold the two equal).
#ifndef GPTMEM_PREDICT_SHARD_H
#define GPTMEM_PREDICT_SHARD_H

#include <stddef.h>
#include "core/plan.h"
#include "core/sizes.h"

// ZeRO on N ranks (parallel/zero.h's shard_layout, from the config alone): each rank
// owns a shard of S = ceil(P/N) parameters, rounded up to whole blocks of
// ADAM_BLOCK; the arrays that stay whole are padded to N*S (one rank: S = P,
// nothing padded, stage 0). With --shard-group K, N reads K: the group's
// ranks share the shards. The elements of each array a rank holds:
typedef struct {
    size_t ranks;      // the ranks sharing the shards (K with --shard-group)
    size_t groups;     // --shard-group: the groups holding replicas, N / K (1 without)
    int zero;          // the stage in effect (0 on one rank)
    size_t S;
    size_t weights_n;  // the compute weights: S at stage 3, else N*S
    size_t state_n;    // master weights, Adam m and v: S from stage 1
    size_t grads_n;    // the gradients: S from stage 2
} ShardSizes;

ShardSizes predict_shard(size_t P, const Plan *p) {
    ShardSizes z;
    z.ranks = (size_t)p->ranks;
    z.groups = (size_t)p->groups;
    z.zero = p->stage;
    z.S = (P + z.ranks - 1) / z.ranks;
    if (z.ranks > 1) z.S = (z.S + ADAM_BLOCK - 1) / ADAM_BLOCK * ADAM_BLOCK;
    size_t full = z.ranks > 1 ? z.S * z.ranks : P;
    z.weights_n = shards_weights(z.zero) ? z.S : full;
    z.state_n = shards_states(z.zero) ? z.S : full;
    z.grads_n = shards_grads(z.zero) ? z.S : full;
    return z;
}

// --shard-group: the bytes a rank sends in a step summing its gradients across
// the R groups (parallel/zero.h zero_reduce_across): n = the gradients its
// optimizer reads (P in a group of one, else S), in chunks of c = min(n,
// REDUCE_CHUNK), each R blocks of q = ceil(c / R) floats, reduce-scattered and
// all-gathered: ceil(n / c) x 2 (R - 1) q 4 bytes. The ring all-reduce of n
// floats sends 2 (R - 1) / R x 4n; the two differ by the blocks' padding.
long long predict_across_bytes(size_t P, const Plan *p) {
    ShardSizes z = predict_shard(P, p);
    if (z.groups <= 1) return 0;
    size_t n = !shards_states(z.zero) ? z.weights_n : z.S, c = n < REDUCE_CHUNK ? n : REDUCE_CHUNK, R = z.groups;
    return (long long)(((n + c - 1) / c) * 2 * (R - 1) * ((c + R - 1) / R) * 4);
}

// The textbook bytes a rank sends in one step (ring collectives: (N-1)/N of
// each) over `ranks` ranks at `stage`, Psi = P parameters, e bytes a stored
// weight, gradients reduced in fp32, A micro-batches (--fit's cost, and with
// --shard-group what a group sends inside itself):
//   stage 0: all-reduce of the gradients                    2 x 4 Psi
//   stage 1: reduce-scatter of them, all-gather of weights   4 Psi + e Psi
//   stage 2: reduce-scatter each micro-batch, all-gather     A x 4 Psi + e Psi
//   stage 3: each micro-batch, reduce-scatter and two gathers (three with --ckpt's rebuild)
//            A x (4 Psi + (2 or 3) e Psi); --fused-ce gathers the table once more and
//            reduce-scatters it twice, A x (e + 4) table
double ring_step_bytes(int stage, double e, int accum, int ckpt, int fused_ce, double P, double table, int ranks) {
    if (ranks <= 1) return 0;
    double ring = (ranks - 1.0) / ranks, A = accum, b;
    if (stage == 0) b = 2 * 4 * P;
    else if (stage == 1) b = 4 * P + e * P;
    else if (stage == 2) b = A * 4 * P + e * P;
    else b = A * (4 * P + (ckpt ? 3 : 2) * e * P + (fused_ce ? (e + 4) * table : 0));
    return ring * b;
}

// The same for --lora: the stage's formula over the A adapters in fp32 (gathered at stage 3 as the model's
// weights are, the table aside), and at stage 3 the frozen model's Psi = P weights gathered for the
// forward and the backward (and --ckpt's rebuild), A x (2 or 3) e Psi, with --fused-ce the table once more.
double lora_ring_step_bytes(int stage, double e, int accum, int ckpt, int fused_ce, double A, double P, double table,
                            int ranks) {
    if (ranks <= 1) return 0;
    double frozen = stage == 3 ? accum * ((ckpt ? 3 : 2) * e * P + (fused_ce ? e * table : 0)) : 0;
    return ring_step_bytes(stage, 4, accum, ckpt, 0, A, 0, ranks) + (ranks - 1.0) / ranks * frozen;
}

// --tp: the bytes rank r of a group of t sends inside it in one step (Megatron's f and g, parallel/
// tensor.h): per micro-batch and layer an all-reduce of the (N,C) fp32 activations for each g (after
// attproj and after fcproj, and again where a rebuild runs them) and each f's backward (at qkv's and fc's
// inputs), each a reduce-scatter, (n - n_r) 4 B, then an all-gather, n_r (t - 1) 4 B (n = N C, n_r = its
// part: n / t, one more for the first n mod t ranks): 2 (t-1)/t 4n when t divides n. `rebuilds`: the plan's
// (core/plan.h), whose res2 and res3 run attproj and fcproj again. The vocabulary's bands add, a micro-batch,
// the embedding's sum and the LM head's input gradient's sum, two more (N,C) all-reduces, and for the loss
// each row's log-sum-exp gathered from every rank (N (t-1) 4 B) and its target's logit summed (N floats).
// `e`: a value's bytes, 4 (the sums through the host in fp32: MPI), or on the GPU with --comm nccl the dtype's
// (NCCL sums on the GPUs in the dtype; the loss's numbers stay fp32 on the host).
int tp_sums_a_layer(unsigned rebuilds) { return 4 + !!(rebuilds & SV_BIT(SV_RES2)) + !!(rebuilds & SV_BIT(SV_RES3)); }
static long long tp_sum_bytes(int t, int r, size_t n, size_t e) {  // one all-reduce of n values, as above
    size_t own = n / t + ((size_t)r < n % t);
    return (long long)(e * (n - own) + e * own * (size_t)(t - 1));
}
static long long tp_loss_bytes(int t, int r, size_t N) { return (long long)(4 * N * (size_t)(t - 1)) + tp_sum_bytes(t, r, N, 4); }
long long predict_tp_bytes(int t, int r, size_t N, size_t C, int layers, int accum, unsigned rebuilds, size_t e) {
    if (t <= 1) return 0;
    return accum * (tp_sum_bytes(t, r, N * C, e) * (layers * tp_sums_a_layer(rebuilds) + 2) + tp_loss_bytes(t, r, N));
}

// --sp: the same group's bytes with the residual path cut in t slices of rows (parallel/tensor.h). Per layer
// and micro-batch 10 collectives of the (N,C) fp32, each (t-1)/t 4n, half an all-reduce: in the forward an
// all-gather before qkv and before fc and a reduce-scatter after attproj and after fcproj; in the backward
// the output gradients of fcproj and attproj gathered, the inputs of fc and qkv gathered again (their weight
// gradients read them), the input gradients of fc and qkv reduce-scattered; one more for each of qkv,
// attproj, fc and fcproj a rebuild runs again. Each norm's weight gradient (and bias: `norm` floats, 2C,
// Llama's C) is summed, an all-reduce per layer's two norms and the final one. The model's ends, 5 more: the
// embedding's bands summed into the slices, the final norm's output gathered for the head in the forward
// and again in the backward, the head's input gradient summed into the slices, and the embedding's output
// gradient gathered; and the loss's, as above.
int sp_collectives_a_layer(unsigned rebuilds) {
    return 10 + !!(rebuilds & SV_BIT(SV_QKV)) + !!(rebuilds & SV_BIT(SV_RES2)) + !!(rebuilds & SV_BIT(SV_FCH)) +
           !!(rebuilds & SV_BIT(SV_RES3));
}
long long predict_sp_bytes(int t, int r, size_t N, size_t C, size_t norm, int layers, int accum, unsigned rebuilds,
                           size_t e) {
    if (t <= 1) return 0;
    long long half = (long long)(e * (N * C / t) * (size_t)(t - 1));
    return accum * ((half * sp_collectives_a_layer(rebuilds) + 2 * tp_sum_bytes(t, r, norm, e)) * layers + 5 * half +
                    tp_sum_bytes(t, r, norm, e) + tp_loss_bytes(t, r, N));
}

#endif
