// memory/predict.h — the predicted half of the memory room: the closed-form memory
// predictor (with predict_*.h and fit.h; none of them sees memory/ledger.h).
//
// Computes every ledger category, at every phase, from the config and the step
// plan's decisions (core/plan.h: the stage, what a block drops, the head's
// tiles, what is offloaded; one plan, made by predict_memory and handed down).
// It never calls the allocator and never builds a model: each number is a
// formula, written out next to the code. A test runs the real trainer and
// checks that the ledger it measured equals this prediction to the byte; the
// activation stack is also *sized* from this prediction, so if the two ever
// disagree the trainer stops with an overflow that names the tensor.
//
// Letters: B batch, T seq len, C channels, H heads, L layers, V vocab,
// Vp = V padded to 64, maxT = learned positions, N = B*T, P = parameter count.
#ifndef GPTMEM_PREDICT_H
#define GPTMEM_PREDICT_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "memory/report.h"  // only the categories: the predictor never sees the allocator
#include "core/dtype.h"     // the dtypes' sizes
#include "core/sizes.h"     // the sizes the trainer allocates by
#include "core/saved.h"     // the tensors a block saves
#include "core/plan.h"      // the step plan's decisions: the stage, the drops, the tiles, the offload
#include "core/settings.h"  // the run's settings
#include "memory/predict_acts.h"     // the activation stack after the forward and at its peak
#include "memory/predict_infer.h"    // inference: the weights in each format, the KV cache
#include "memory/predict_offload.h"  // --offload's rows and traffic
#include "memory/predict_shard.h"    // ZeRO's shards and what a step sends

// The model's FLOPs a token (forward and backward): 6 per parameter and the
// attention's 6 L T C (causal), as the step line's MFU counts them (C: the heads' width H hs).
double model_flops_per_token(const GPTConfig *c, int T) {
    return 6.0 * predict_param_count(c) + 6.0 * c->layers * T * attn_width(c);
}

// ... for a run's settings: with --lora the model's weights get no gradient, 4 a parameter, and the
// adapters' own (core/lora.h lora_flops_per_token).
double run_flops_per_token(const Settings *s) {
    const GPTConfig *c = &s->cfg;
    if (!s->lora.rank) return model_flops_per_token(c, s->seq_len);
    return 4.0 * predict_param_count(c) + 6.0 * c->layers * s->seq_len * attn_width(c) + lora_flops_per_token(c, &s->lora);
}

// The model moves through buffers a piece at a time (cpu/weights.h, fetch_params; core/plan.h): one op's parameters,
// the largest fc's 4C^2 + 4C (Llama: qkv's (H + 2 KVH) hs C or fc's 2 F C), or with --fused-ce a chunk of
// min(VOCAB_CHUNK, Vp + maxT) rows of the table if larger. Without --fused-ce the LM head needs the whole table
// ("global": wte, wpe, lnf = (Vp + maxT) C + 2C; Llama: wte, lnfw, an untied head) at once, in buffers of its own:
size_t predict_largest_op(const GPTConfig *c) {  // one op's parameters, the largest
    size_t C = c->channels, qkv = qkv_width(c), fc = 2 * (size_t)cfg_ffn(c), F = cfg_ffn(c), A = attn_width(c);
    if (is_llama(c)) return C * (qkv > fc ? qkv : fc);
    size_t n[4] = {3 * A * C + 3 * A, C * A + C, F * C + F, C * F + C}, most = 0;  // qkv, attproj, fc, fcproj
    for (int i = 0; i < 4; i++) most = n[i] > most ? n[i] : most;  // (4C^2 + 4C, fc's, for --tp's share too up to t 4)
    return most;
}
size_t predict_globals(const GPTConfig *c) {  // the whole table and the tail
    size_t C = c->channels, Vp = padded_vocab(c);
    return is_llama(c) ? Vp * C * (c->untied ? 2 : 1) + C : (Vp + c->max_seq) * C + 2 * C;
}
size_t predict_moved(const GPTConfig *c, int fused_ce) {
    size_t C = c->channels, piece = predict_largest_op(c), global = predict_globals(c);
    size_t rows = padded_vocab(c) + (is_llama(c) ? 0 : c->max_seq), chunk = (rows < VOCAB_CHUNK ? rows : VOCAB_CHUNK) * C;
    if (fused_ce && chunk > piece) piece = chunk;
    return fused_ce ? piece : piece + global;
}

// The model-sized part of the scratch: 16-bit runs (and --base-dtype's packed base) widen what is moved to
// fp32 (w_piece, w_global), and runs whose gradients go through fp32 buckets
// (16-bit gradients, or stages 2 and 3) count those as scratch at stages 0 and 1
// (at 2 and 3 they are comm).
size_t predict_model_scratch(const Settings *s, const Plan *p) {
    int zero = p->stage, wide = s->dtype != DT_FP32 || (s->lora.rank && s->base_bits < 32);
    int bucketed = (grad_dtype(s) != DT_FP32 || shards_grads(zero)) && !s->lora.rank;  // (--lora: the adapters' alone)
    size_t moved = predict_moved(&s->cfg, p->tiled_head);
    return 4 * ((wide ? moved : 0) + (bucketed && !shards_grads(zero) ? moved : 0));
}

// --fused-ce's scratch, elements: a tile of logits, `rows` (the plan's head rows) x min(Vp, VOCAB_CHUNK) (or
// one row of Vp for sampling, if larger), and two numbers per row: its running sum of exp and its target's logit.
size_t predict_head_tile(size_t rows, int Vp) {
    size_t tile = rows * ((size_t)Vp < VOCAB_CHUNK ? (size_t)Vp : VOCAB_CHUNK);
    return tile > (size_t)Vp ? tile : (size_t)Vp;
}

// The ZeRO paper's model states per rank (Rajbhandari et al. 2020): weights
// and gradients in the storage dtype (e bytes; the gradients 4 with --fp32-grads), K bytes of optimizer state
// (mixed precision: fp32 master + m + v = 12; fp32: m + v = 8), each divided
// by the N ranks from the stage that shards it. Psi = P, padded vocabulary included.
// With --adam-bits 8, m and v take 1 + 1 bytes and a scale each per ADAM_BLOCK: K = 2 + 8/256 (+ 4 master).
double paper_optimizer_bytes(const Settings *s) {
    return (s->dtype == DT_FP32 ? 0 : 4) + (s->adam_bits == 8 ? 2 + 8.0 / ADAM_BLOCK : 8);
}

double predict_paper_states(size_t P, const Settings *s, const Plan *p) {
    int zero = p->stage;  // --shard-group: over the group's K ranks, 16 Psi / K
    double e = dtype_size(s->dtype), g = dtype_size(grad_dtype(s)), K = paper_optimizer_bytes(s), n = p->ranks;
    return (double)P *
           (e / (shards_weights(zero) ? n : 1) + g / (shards_grads(zero) ? n : 1) + K / (shards_states(zero) ? n : 1));
}

// Fill the phases and peaks from the constant part `base` and the activations:
// after the forward, what the backward needs is on the stack; the backward
// pops it all, so after it (and the step) none is live. Every other category
// is constant; activations peak at act.peak, and so does the total, since
// nothing else changes while the stack is high.
void predict_phases(const MemSnapshot *base, const ActivationBytes *act, MemReport *r) {
    for (int ph = 0; ph < MEM_NPHASE; ph++) r->phase[ph] = *base;
    r->phase[PHASE_FORWARD].bytes[MEM_ACTIVATIONS] = act->after_forward;
    r->phase[PHASE_FORWARD].at[LOC_DEVICE][MEM_ACTIVATIONS] = act->after_forward;
    r->phase[PHASE_FORWARD].total += act->after_forward;
    for (int c = 0; c < MEM_NCAT; c++) r->peak[c] = base->bytes[c];
    r->peak[MEM_ACTIVATIONS] = r->stack_peak = act->peak;
    r->peak_total = base->total + act->peak;
    for (int l = 0; l < MEM_NLOC; l++) r->peak_at[l] = snapshot_at(base, l) + (l == LOC_DEVICE ? act->peak : 0);
}

// The cache (`kv`, as the stack rounds it) is pushed on the activation stack
// under the sample's forwards (`act`: the stack of the largest), so while a
// sample runs the stack holds kv + act; nothing else is on it then.
void predict_sampling(const Settings *s, size_t kv, size_t act, const MemSnapshot *base, MemReport *r) {
    if (!s->sample_len) return;
    size_t stack = kv + act, device = snapshot_at(base, LOC_DEVICE) + stack;
    r->peak[MEM_KVCACHE] = kv;
    if (act > r->peak[MEM_ACTIVATIONS]) r->peak[MEM_ACTIVATIONS] = act;
    if (stack > r->stack_peak) r->stack_peak = stack;
    if (base->total + stack > r->peak_total) r->peak_total = base->total + stack;
    if (device > r->peak_at[LOC_DEVICE]) r->peak_at[LOC_DEVICE] = device;
}

// --eval-only: the forward-only model (cpu/gpt.h, gpt_build_eval). fp32
// arithmetic; no gradients, Adam, master weights or backward buffers.
//   the weights: params 4P, or with --quantize
//     qweights = the matrices' codes (inference_weight_bytes, without the scales) + the vectors in bf16
//     qscales  = 4 bytes a block (int8, int4)
//   scratch: one piece in fp32 (fc's 4C^2 + 4C, or with --fused-ce a chunk of the table if larger),
//     rounded up to whole blocks of QUANT_BLOCK (the state is read through it); without --fused-ce
//     the whole table (Vp + maxT) C + 2C in fp32 for the LM head, with it the logits tile and row stats
//   activations: one forward's, in fp32, each block keeping only its output as with --ckpt; it is
//     discarded after, so the phases after it are the base
//   data: as in training
//   --lora: the adapters 4A (core/lora.h lora_param_count) and a map's x A^T, 4 N R of scratch
// Its plan is the forward's: fp32, --ckpt's drops, one process.
void predict_memory_eval(const Settings *s, MemReport *r) {
    memset(r, 0, sizeof *r);
    Settings fwd = *s;  // the forward's tensors in fp32, as with --ckpt
    fwd.dtype = DT_FP32, fwd.ckpt = 1, fwd.recompute = REC_BLOCK;
    Plan p = make_plan(&fwd, 1);
    int Vp = padded_vocab(&s->cfg);
    size_t N = (size_t)s->batch * s->seq_len, P = predict_param_count(&s->cfg);
    InferenceBytes inf = predict_inference(&s->cfg, 1, 1, 4);
    MemSnapshot base;
    memset(&base, 0, sizeof base);
    int bits = s->quant_bits;
    if (!bits) base.bytes[MEM_PARAMS] = 4 * P;
    if (bits) base.bytes[MEM_QWEIGHTS] = (inf.matrices * bits + 7) / 8 + 2 * inf.vectors;
    if (bits && bits < 16) base.bytes[MEM_QSCALES] = 4 * inf.scales;
    size_t piece = p.tiled_head ? predict_moved(&s->cfg, 1) : predict_largest_op(&s->cfg);
    size_t scratch = (piece + QUANT_BLOCK - 1) / QUANT_BLOCK * QUANT_BLOCK;
    if (p.tiled_head) scratch += predict_head_tile((size_t)p.head_rows, Vp) + 2 * N;
    else scratch += predict_globals(&s->cfg);
    if (s->lora.rank) {  // --lora: the adapters in fp32 on top of the frozen model, and a map's x A^T
        base.bytes[MEM_ADAPTERS] = 4 * lora_param_count(&s->cfg, &s->lora);
        scratch += N * s->lora.rank;
    }
    base.bytes[MEM_SCRATCH] = 4 * scratch;
    base.bytes[MEM_DATA] = s->corpus_bytes + 2 * 4 * N;
    snapshot_on_device(&base);
    ActivationBytes act = predict_activations(&fwd, &p);
    predict_phases(&base, &act, r);
    Settings one = sample_forward(s, &fwd);
    predict_sampling(s, cpu_act(sample_kv_bytes(s, fwd.dtype)), predict_activations(&one, &p).peak, &base, r);
}

// --lora --base-dtype: the frozen model held packed (io/quant.h). The blocks' linear maps, M weights
// (L (qkv + attproj + fc + fcproj) weights), in the format's bits, M/2 bytes for nf4 and int8's M, 2M for
// bf16 and fp16; the other P - M parameters (embedding, head, norms, biases) in the --dtype, e each; with int8 and nf4
// an fp32 scale per block of QUANT_BLOCK of each Hugging Face tensor (core/lora.h lora_map: a Llama's q_proj,
// k_proj ... apart; nf4: 0.5 bits a weight). No params row.
// --double-quant: a byte per block, an fp32 per DQ_GROUP blocks of a tensor and one per tensor (qscales),
// and the blocks' absmax of the largest tensor in fp32 while it is stored (scratch, in bytes: returned).
size_t predict_packed_base(const Settings *s, MemSnapshot *b) {
    const GPTConfig *c = &s->cfg;
    size_t M = 0, blocks = 0, groups = 0, tensors = 0, most = 0;
    for (int k = lora_first_map(c); k < lora_map_end(c); k++) {
        size_t w = (size_t)lora_map(c, k).rows * lora_map(c, k).in, nb = (w + QUANT_BLOCK - 1) / QUANT_BLOCK;
        M += c->layers * w, blocks += c->layers * nb, tensors += c->layers;
        groups += c->layers * ((nb + DQ_GROUP - 1) / DQ_GROUP), most = nb > most ? nb : most;
    }
    size_t codes = s->base_bits == 4 ? (M + 1) / 2 : M * (size_t)(s->base_bits / 8);
    b->bytes[MEM_PARAMS] = 0;
    b->bytes[MEM_QWEIGHTS] = codes + dtype_size(s->dtype) * (param_count(c) - M);
    b->bytes[MEM_QSCALES] = s->double_quant ? blocks + 4 * groups + 4 * tensors : s->base_bits <= 8 ? 4 * blocks : 0;
    return s->double_quant ? 4 * most : 0;
}

// The parameters the optimizer trains: the model's (the predictor's own count), or with --lora the
// adapters' (core/lora.h); core/settings.h trained_param_count is the run's side of it.
size_t predict_trained_count(const Settings *s) {
    return s->lora.rank ? lora_param_count(&s->cfg, &s->lora) : predict_param_count(&s->cfg);
}

// The model states of one rank, on either device (ZeRO's shards, sh), in the
// storage dtype's e bytes a weight or gradient (a gradient g = 4 with --fp32-grads):
//   params e*weights_n; master 4*state_n with 16-bit storage (fp32 weights are their own
//   master); grads g*grads_n; adam_m, adam_v 4*state_n each, or with --adam-bits 8 a byte
//   each and an fp32 scale per block of ADAM_BLOCK
// so mixed precision on one rank is the ZeRO paper's 2 + 2 + (4 + 4 + 4) = 16 bytes per parameter,
// and stage 1 is 2P + 2P + 12P/N, stage 2 2P + (2 + 12)P/N, stage 3 (2 + 2 + 12)P/N (plus padding);
// with --fp32-grads Megatron-LM's 2 + 4 + 12 = 18.
// --lora: the model's weights frozen, params e*P and nothing else of theirs; the adapters' A
//   parameters (core/lora.h lora_param_count) in fp32, 4A, with their gradients 4A and m and v 4A each:
//   4P + 16A bytes in all (PEFT's bill for full-precision LoRA). Over N ranks the adapters have a layout
//   of their own (ad: S = ceil(A/N) in whole ADAM_BLOCKs): adapters and gradients whole, 4NS each, m and
//   v 4S each from stage 1.
void predict_states(const Settings *s, const ShardSizes *sh, const ShardSizes *ad, MemSnapshot *b) {
    size_t e = dtype_size(s->dtype), n = sh->state_n;
    b->bytes[MEM_PARAMS] = e * sh->weights_n;
    if (s->lora.rank) {
        size_t n = ad->state_n;
        b->bytes[MEM_ADAPTERS] = 4 * ad->weights_n, b->bytes[MEM_GRADS] = 4 * ad->grads_n;
        b->bytes[MEM_ADAM_M] = b->bytes[MEM_ADAM_V] = s->adam_bits == 8 ? n + 4 * ((n + ADAM_BLOCK - 1) / ADAM_BLOCK) : 4 * n;
        if (s->base_bits < 32) b->bytes[MEM_SCRATCH] += predict_packed_base(s, b);  // (else the frozen model in the dtype: e P, no master)
        return;
    }
    b->bytes[MEM_MASTER] = s->dtype == DT_FP32 ? 0 : 4 * n;
    b->bytes[MEM_GRADS] = dtype_size(grad_dtype(s)) * sh->grads_n;
    b->bytes[MEM_ADAM_M] = b->bytes[MEM_ADAM_V] = s->adam_bits == 8 ? n + 4 * ((n + ADAM_BLOCK - 1) / ADAM_BLOCK) : 4 * n;
}

// The CPU's comm row: the buffers ZeRO moves gradients and weights through (parallel/zero.h).
//   stages 0, 1 on several ranks: the full gradients reduced in chunks of K = min(S, REDUCE_CHUNK) a rank, N*K
//   stages 2, 3: fp32 gradient buckets of what is moved (predict_moved); stage 3: as much again, gathered, in e
//   --lora: the frozen model has no gradients; the adapters' own pieces (an op's: core/lora.h lora_op_most, O)
//     go through a bucket of 4 O from stage 2 and a gather of 4 O at stage 3, beside the model's e moved
//   --shard-group: the sum across the R groups of the gradients a rank's optimizer reads (all of them in a
//     group of one, else its shard), a chunk c = min(that, REDUCE_CHUNK) at a time, in R blocks of ceil(c / R)
size_t predict_comm(const Settings *s, const Plan *p, const ShardSizes *sh) {
    size_t bytes = 0, S = sh->S, e = dtype_size(s->dtype);
    int zero = p->stage;
    if (sh->ranks > 1 && !shards_grads(zero)) bytes = 4 * sh->ranks * (S < REDUCE_CHUNK ? S : REDUCE_CHUNK);
    size_t moved = predict_moved(&s->cfg, p->tiled_head);
    size_t lora_op = s->lora.rank ? 4 * lora_op_most(&s->cfg, &s->lora) : 0;  // --lora: an op's adapters, fp32
    if (shards_grads(zero)) bytes = s->lora.rank ? lora_op : 4 * moved;
    if (shards_weights(zero)) bytes += e * moved + lora_op;
    if (sh->groups > 1) {
        size_t n = !shards_states(zero) ? sh->weights_n : S, c = n < REDUCE_CHUNK ? n : REDUCE_CHUNK, R = sh->groups;
        bytes += 4 * R * ((c + R - 1) / R);
    }
    return bytes;
}

// The CPU's scratch row, floats (and the model-sized part, predict_model_scratch, in bytes):
//   backward buffers: dres N*C + dln N*C + dqkv 3N*C + datty N*C + dfch 4N*C = 10 N*C
//     (Llama: dqkv N (H + 2 KVH) hs, dfch 2N*F and dact N*F: N (3C + (H + 2 KVH) hs + 3F));
//     with W = the qkv width and A = H hs (C, but for --tp's share of the heads): N (2C + W + A + F),
//     Llama N (2C + W + A + 3F)
//   --fused-ce: a tile of logits and two numbers a row (predict_head_tile)
//   --lora: a map's x A^T and its gradient, 2 N R
//   --sp: the whole sequence, gathered from the group's slices, N*C
//   --tp (the vocabulary a band of Vp/t a rank, Vp here the band): each row's two running numbers (as
//     --fused-ce's), the batch's tokens as band rows, every rank's log-sum-exp of each row, and a sample's
//     whole row of logits: (2N without --fused-ce) + N + N t + Vp t
//   16-bit runs compute in fp32 working buffers (cpu/gpt.h, buffers): x_work N*C; act_work =
//     the fp32 views of max(one block's 13 tensors, the final layernorm and a chunk of logits),
//     less the row statistics (stored in fp32, their own views):
//       block = 16*N*C (Llama: N (5C + (H + 2 KVH) hs + 3F)) (+ B*H*T^2 naive attention);
//         with W and A: N (4C + W + A + 2F), Llama N (4C + W + A + 3F)
//       final = N*C + head_rows*Vp (--fused-ce: no logits here, N*C)
size_t predict_scratch(const Settings *s, const Plan *p) {
    size_t B = s->batch, T = s->seq_len, N = B * T, C = s->cfg.channels, H = s->cfg.heads, Vp = padded_vocab(&s->cfg);
    size_t W = qkv_width(&s->cfg), A = attn_width(&s->cfg), F = cfg_ffn(&s->cfg), llama = is_llama(&s->cfg);
    size_t scratch = N * (2 * C + W + A + (llama ? 3 : 1) * F), block = N * (4 * C + W + A + (llama ? 3 : 2) * F);
    if (p->tiled_head) scratch += predict_head_tile((size_t)p->head_rows, (int)Vp) + 2 * N;
    if (s->cfg.seq_split > 1) scratch += N * C;  // --sp: the whole sequence a split layer reads
    size_t t = s->cfg.vocab_split > 1 ? (size_t)s->cfg.vocab_split : 0;  // --tp's band of the vocabulary:
    if (t) scratch += (p->tiled_head ? 0 : 2 * N) + N + N * t + Vp * t;   // (cpu/gpt.h head_buffers)
    scratch += 2 * N * (size_t)s->lora.rank;
    if (s->dtype != DT_FP32) {
        block += s->flash ? 0 : B * H * T * T;
        size_t final = N * C + (p->tiled_head ? 0 : (size_t)p->head_rows * Vp);
        scratch += N * C + (block > final ? block : final);
    }
    return 4 * scratch + predict_model_scratch(s, p);
}

// One training run on the CPU, with its plan: the constant part (states, comm, scratch, data: the
// corpus bytes + inputs and targets, N int32 each; --offload's rows off the device), then the stack.
void predict_memory_cpu(const Settings *s, const Plan *p, MemReport *r) {
    memset(r, 0, sizeof *r);
    size_t N = (size_t)s->batch * s->seq_len;
    ShardSizes sh = predict_shard(predict_param_count(&s->cfg), p), ad = predict_shard(predict_trained_count(s), p);
    MemSnapshot base;
    memset(&base, 0, sizeof base);
    predict_states(s, &sh, &ad, &base);
    base.bytes[MEM_COMM] = predict_comm(s, p, &ad);  // (the trained parameters' layout: the model's, or --lora's)
    base.bytes[MEM_SCRATCH] += predict_scratch(s, p);
    base.bytes[MEM_DATA] = s->corpus_bytes + 2 * 4 * N;
    snapshot_on_device(&base);
    predict_offload_rows(s, p, s->lora.rank ? ad.state_n : sh.state_n, &base);  // --offload: the optimizer's states off the device
    snapshot_totals(&base);
    ActivationBytes act = predict_activations(s, p);
    predict_phases(&base, &act, r);
    Settings one = sample_forward(s, s);
    predict_sampling(s, cpu_act(sample_kv_bytes(s, s->dtype)), predict_activations(&one, p).peak, &base, r);
}


// The GPU's scratch row: no fp32 working copies (the GPU computes on the 16-bit tensors);
//   backward buffers dres, dln, dqkv, datty, dfch = 10 N*C in the dtype (Llama: dqkv N (H + 2 KVH) hs,
//     dfch 2N*F and dact N*F: N (3C + (H + 2 KVH) hs + 3F); --tp: the share's heads and width),
//   per-row losses 4N, the norm's GPU_NORM_BLOCKS partial sums (doubles),
//   the step's GPU_STEP_NUMBERS numbers (doubles: loss, sum of squares, scale),
//   cuBLASLt's 32 MiB workspace, the column sums' partials GPU_COLSUM_CHUNKS x 4C floats, and with
//   --flash D = rowsum(dout * out), 4*B*H*T
//   --fused-ce a tile of logits, e * predict_head_tile(head_rows), and each row's running sum and
//     target logit, 2 * 4N
//   --fp32-grads the 16-bit buckets the kernels write the gradients of what is moved into, e * moved
//   --lora a map's x A^T and its gradient, 2 e N R, and in 16 bits an op's adapters and their gradients
//     (the most an op has, O: core/lora.h lora_op_most), 2 e O
//   --base-dtype the piece a frozen op's weights are read back into, e * piece, and with --double-quant
//     a tensor's absmax while it is stored (predict_packed_base), on the GPU as on the CPU
//   --tp the loss's statistics over the rank's band of the vocabulary, 3 * 4N; --sp the whole sequence a
//     split layer reads, e N C
size_t predict_scratch_gpu(const Settings *s, const Plan *p) {
    MemSnapshot packed;
    size_t base = s->lora.rank && s->base_bits < 32 ? dtype_size(s->dtype) * p->piece + predict_packed_base(s, &packed) : 0;
    size_t B = s->batch, T = s->seq_len, N = B * T, C = s->cfg.channels, H = s->cfg.heads, e = dtype_size(s->dtype);
    size_t F = cfg_ffn(&s->cfg), W = qkv_width(&s->cfg), R = s->lora.rank;
    size_t backward = N * (2 * C + W + attn_width(&s->cfg) + (size_t)op_outputs(&s->cfg, OP_FC) + (is_llama(&s->cfg) ? F : 0));
    if (R) backward += 2 * N * R + (e != 4 ? 2 * lora_op_most(&s->cfg, &s->lora) : 0);  // (--lora, in the dtype too)
    base += s->tp > 1 ? 3 * 4 * N : 0;  // (--tp: each row's max, sum and target logit over the band)
    base += s->cfg.seq_split > 1 ? e * N * C : 0;  // (--sp: the whole sequence a split layer reads)
    return base + backward * e + 4 * N + 8 * (GPU_NORM_BLOCKS + GPU_STEP_NUMBERS) + GPU_GEMM_WORKSPACE +
           4 * GPU_COLSUM_CHUNKS * 4 * C + (s->flash ? 4 * B * H * T : 0) +
           (p->tiled_head ? e * predict_head_tile((size_t)p->head_rows, padded_vocab(&s->cfg)) + 2 * 4 * N : 0) +
           (grad_dtype(s) != s->dtype ? e * predict_moved(&s->cfg, p->tiled_head) : 0);
}

// --device cuda (gpu/gpt.h, gpu_buffers), with its plan. The activation stack
// above; the fixed part:
//   the model states as on the CPU (predict_states; S = ceil(P/N) in whole ADAM_BLOCKs, arrays kept
//     whole padded to N*S)
//   comm: stages 2, 3: the gradient buckets of a piece and, without --fused-ce, of the globals,
//     g*moved (predict_moved; g the gradients' bytes: e, or 4 with --fp32-grads); stage 3: e*moved
//     for the gathered weights (--lora: no model gradients; an op's adapters' bucket from stage 2 and
//     their gather at stage 3, 4 O each, as on the CPU); page-locked, the
//     host staging buffer GPU_STAGING (more than one rank)
//   scratch: predict_scratch_gpu
//   data: on the GPU the batches 8N and the positions bucketed by token
//     4(3N+1); on the host the corpus, the host batches 8N (as on the CPU) and
//     a count per vocabulary entry 4*Vp; page-locked, the two buffers the batch
//     is uploaded from, 2 x 4(5N+1) (inputs, targets, buckets)
//   --tp: on the host the room the group's sums pass through, a row block (N,C) in fp32 and in the
//     dtype (core/sizes.h gpu_tp_host_floats)
// What the ledger cannot see (the CUDA context, cuBLASLt's own state) is
// measured at run time and printed as its own "runtime" row.
void predict_memory_gpu(const Settings *s, const Plan *p, MemReport *r) {
    memset(r, 0, sizeof *r);
    int Vp = padded_vocab(model_whole(s));  // (the token counts: the whole vocabulary's, --tp or not)
    size_t N = (size_t)s->batch * s->seq_len, e = dtype_size(s->dtype);
    ShardSizes sh = predict_shard(predict_param_count(&s->cfg), p), ad = predict_shard(predict_trained_count(s), p);
    MemSnapshot base;
    memset(&base, 0, sizeof base);
    predict_states(s, &sh, &ad, &base);
    size_t moved = predict_moved(&s->cfg, p->tiled_head);
    size_t g = dtype_size(grad_dtype(s));
    size_t lora_op = s->lora.rank ? 4 * lora_op_most(&s->cfg, &s->lora) : 0;  // (--lora: an op's adapters, fp32)
    base.bytes[MEM_COMM] = (shards_grads(p->stage) ? (s->lora.rank ? lora_op : g * moved) : 0) +
                           (shards_weights(p->stage) ? e * moved + lora_op : 0);
    base.bytes[MEM_SCRATCH] = predict_scratch_gpu(s, p);
    base.bytes[MEM_DATA] = 2 * 4 * N + 4 * (3 * N + 1);  // on the GPU: the batch, the token buckets
    memcpy(base.at[LOC_DEVICE], base.bytes, sizeof base.bytes);
    base.at[LOC_HOST][MEM_DATA] = s->corpus_bytes + 2 * 4 * N + 4 * (size_t)Vp;  // the corpus, its batches, counts
    if (s->tp > 1)  // --tp: the group's sums through the host (gpu/tensor.h), fp32 and the dtype's bytes
        base.at[LOC_HOST][MEM_COMM] = gpu_tp_host_floats(N, (size_t)s->cfg.channels, (size_t)s->tp) * (e == 4 ? 4 : 4 + e);
    base.at[LOC_PINNED][MEM_DATA] = 2 * 4 * (5 * N + 1);                          // the two upload buffers
    base.at[LOC_PINNED][MEM_COMM] = sh.ranks > 1 || sh.groups > 1 ? GPU_STAGING : 0;  // the staging buffer
    predict_offload_rows(s, p, s->lora.rank ? ad.state_n : sh.state_n, &base);  // (--lora: the adapters' states)
    snapshot_totals(&base);
    ActivationBytes act = predict_activations_gpu(s, p);
    predict_phases(&base, &act, r);
    Settings one = sample_forward(s, s);
    predict_sampling(s, gpu_act(sample_kv_bytes(s, s->dtype)), predict_activations_gpu(&one, p).peak, &base, r);
}

// Fill `r` with the predicted ledger for one run of these settings (rank 0's,
// with its --offload traffic; train.c asks for each rank's own traffic). The
// one plan of the prediction is made here and handed down.
void predict_memory(const Settings *s, MemReport *r) {
    if (s->eval_only && !s->cuda) { predict_memory_eval(s, r); return; }
    Plan p = make_plan(s, s->ranks);
    if (s->cuda) predict_memory_gpu(s, &p, r);
    else predict_memory_cpu(s, &p, r);
    predict_traffic(s, &p, 0, r->traffic);
}

#endif
