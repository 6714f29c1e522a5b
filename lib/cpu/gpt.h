// cpu/gpt.h — the CPU model's state: its struct, and the one table of its
// buffers (name, ledger category, size) that building and freeing both read.
// memory/predict.h computes the same sizes on its own, from the settings and
// the plan: the check.
//
// Storage and arithmetic (--dtype). The ops always compute in fp32. With
// --dtype fp32 they work directly on the stored tensors. With bf16 or fp16,
// weights, gradients and saved activations are stored in 16 bits, and each
// block computes in fp32 *working buffers* (ledger: scratch): weights are
// widened into them before use (cpu/weights.h), every op's output is rounded
// to 16 bits when it is saved, and in the working copy too, so the next op
// reads exactly what was saved (cpu/storage.h); the backward widens the saved
// tensors again.
//
// Letters: B batch, T sequence length, C channels, H heads, L layers,
// V vocabulary, Vp = V padded to a multiple of 64, N = B*T rows.
#ifndef GPTMEM_CPU_GPT_H
#define GPTMEM_CPU_GPT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/config.h"
#include "core/dtype.h"
#include "core/plan.h"
#include "core/saved.h"
#include "core/settings.h"
#include "core/sizes.h"
#include "core/lora.h"
#include "cpu/attention.h"
#include "memory/ledger.h"
#include "optim/optimizer.h"
#include "optim/trained.h"
#include "parallel/tensor.h"
#include "parallel/zero.h"

// The tensors one layer saves for its backward (core/saved.h lists them),
// indexed by their SV_ number (the final layernorm's use SV_LNF...). The named
// pointers are the fp32 views the ops use; saved[] are the tensors on the
// activation stack in the storage dtype (fp32 runs, and the row statistics in
// every dtype: the same memory as the view), NULL where a tensor is not there
// (dropped by --recompute, or popped).
typedef struct {
    float *ln1, *ln1_mean, *ln1_rstd;  // (N,C), (N), (N)
    float *qkv;                        // (N,3C)
    float *att;                        // (B,H,T,T) probabilities (naive attention)
    float *lse;                        // (B,H,T) row log-sum-exp (--flash, instead of att)
    float *atty;                       // (N,C) attention output, before the projection
    float *res2;                       // (N,C) residual after attention
    float *ln2, *ln2_mean, *ln2_rstd;  // (N,C), (N), (N)
    float *fch, *fch_gelu;             // (N,4C) MLP hidden, before and after GELU
    float *res3;                       // (N,C) layer output = residual after the MLP
    int mark;                          // stack mark before this layer's pushes
    unsigned pushing;                  // SV_BIT()s of the tensors the running block_forward computes
    void *saved[SAVED_PER_LAYER];
    float *view[SAVED_PER_LAYER];
    size_t count[SAVED_PER_LAYER];
} Acts;

// fp32 views of the weights that are not in a layer (or of their gradients):
// the embeddings, the final norm and the LM head (wte itself when tied).
// Llama has no wpe and no lnfb (NULL).
typedef struct {
    float *wte, *wpe, *lnfw, *lnfb, *lm_head;
} Globals;

// A step's numbers, read after it (cpu/optimizer.h gpt_read_numbers).
typedef struct {
    double loss_sum;   // the mean losses of the forwards since the last read, added up
    double sumsq;      // the gradients' sum of squares, all ranks (gpt_grad_norm)
    float grad_scale;  // AdamW's gradient scale: core/adamw.h step_grad_scale; NaN skips the step
} StepNumbers;

// --lora (core/lora.h; cpu/lora.h builds and runs them): the model's weights are frozen, these are trained
// (they are the model's trained set, m->train: its layout, AdamW's state and the chunk buffers are there).
typedef struct {
    LoraConfig cfg;   // rank 0: no LoRA, every weight trained
    uint64_t seed;    // A's first values are drawn from it (lora_init; --lora-init's folder is read over them: app/net.h)
    size_t n;         // their parameters: lora_param_count
    size_t op_most;   // the most adapter parameters one op has (lora_op_most): a piece's buffers
    float *w, *g;     // the adapters (ledger: adapters) and their gradients (grads)
    float *u, *du;    // (N,R): a map's x A^T, and its gradient, reused by every map (scratch)
    // --ranks N: ZeRO over the adapters (parallel/zero.h), the trained set's own shard layout: at stages 0 and
    // 1 every rank holds them and their gradients whole (padded to N S), its shard of m and v from stage 1;
    // stage 2 keeps its shard of the gradients, an op's reduce-scattered from `bucket` when its backward is
    // done; stage 3 its shard of the adapters too, an op's gathered into `gathered` before it runs (comm)
    float *bucket, *gathered;
    // --base-dtype (not fp32): the frozen model held in io/quant.h's storage (ledger: qweights, qscales),
    // the blocks' linear maps in that format, the rest in the --dtype, each piece read back into w_piece
    // through the model's read_back (cpu/lora.h holds it); NULL otherwise
    struct QuantWeights *base;
} Lora;

typedef struct GPT {
    GPTConfig cfg;
    Trained train;  // what the step trains (optim/trained.h): the model's own weights, or --lora's adapters
    Lora lora;  // --lora: the adapters; with them every other weight is frozen (gpt_frozen)
    TensorSplit tp;  // --tp: this rank's share of every layer (cfg is the share; parallel/tensor.h)
    Plan plan;  // core/plan.h: the pieces, the drops, the head's tiles
    // --zero S over N ranks: which part of the flat array this rank owns and
    // which arrays it keeps whole (parallel/zero.h). One rank: stage 0, nothing sharded.
    Shard shard;
    int dtype;  // --dtype: DT_FP32, DT_BF16 or DT_FP16 (storage of weights, grads, activations)
    int grad_dtype;  // the gradients': the dtype, or fp32 with --fp32-grads (core/settings.h grad_dtype)
    int flash;  // --flash: attention without the T x T matrix
    double recompute_seconds;  // time spent rebuilding dropped tensors (the price of the memory saved)
    double rebuild_started;    // the clock when the running rebuild began
    size_t block_kept_bytes;   // measured: what block 0 kept on the stack after the last forward (--mem-ops)
    size_t nparams;
    float *params;     // fp32 weights: fp32 runs' (ledger: params); 16-bit runs' master, what AdamW updates (master)
    float *grads;      // fp32 gradients (fp32 runs, and --fp32-grads), when the model is what is trained
    void *params_lp;   // 16-bit runs: the weights the model computes with (ledger: params)
    void *grads_lp;    // 16-bit runs without --fp32-grads: the gradients (ledger: grads)
    size_t params_base, master_base, grads_base;  // flat index of element 0 (0, or own_lo if a shard)
    // activations of the current forward pass
    void *encoded;                    // (N,C) saved embedding output
    Acts *acts;                  // L entries
    Acts final;                  // lnf (N,C), lnf_mean, lnf_rstd (N), logits (N,Vp)
    float *logits;                    // fp32 view of the logits: logits, then probs, then dlogits
                                      // (16-bit runs: only head_rows rows at a time, cpu/head.h)
    void *logits_saved;               // 16-bit runs: the logits on the stack (N,Vp)
    int B, T;                         // shape of the current forward pass
    int arena_mark;                   // stack mark before the forward pass
    // sampling (cpu/kvcache.h): while a sample runs, its cache holds the keys and values of the
    // positions before this forward, which starts at position pos0 (0 otherwise)
    KVCache kv;
    int pos0;
    // the end of the step (cpu/optimizer.h): the step's numbers (AdamW's state is the trained set's)
    StepNumbers numbers;
    // backward scratch, reused by every layer: sized for the training batch
    float *dres;   // (N,C)  gradient of the residual stream
    float *dln;    // (N,C)  gradient of a layernorm output
    float *dqkv;   // (N,3C)   (Llama: (N, (H + 2 KVH) hs))
    float *datty;  // (N,H hs): (N,C) but for --tp's share of the heads
    float *dfch;   // (N,4C) gradient of the MLP hidden (before and after GELU, in place; Llama: (N,2F), before SwiGLU)
    float *dact;   // the gradient of the activation's output: dfch itself for GPT-2; Llama's (N,F) of its own
    float *seq_whole;  // --sp: (N,C) the whole sequence a split layer reads (its input, or its output gradient),
                       // gathered from the group's slices, or the partial products a reduce-scatter sums (parallel/tensor.h)
    // --fused-ce: the LM head and the loss a tile at a time (cpu/head.h)
    float *head_tile;   // head_rows x vocab_chunk logits (and room for one whole row, for sampling)
    float *head_stats;  // (2,N): each row's running sum of exp, and its target's logit
    // --tp: the vocabulary a band of Vp/t rows a rank (cpu/head.h): the batch's tokens as rows of the band (N,
    // another rank's: none), every rank's log-sum-exp of each row (t,N), and a sample's row of logits (Vp)
    int *band_tokens;
    float *band_lse, *logits_row;
    float *head_lse;    // (N) fp32 on the stack: each row's log-sum-exp, saved for the backward
    // The parameters move through buffers a piece at a time (core/plan.h):
    size_t piece;       // floats in the largest piece
    float *w_piece;     // 16-bit runs: a piece's weights, widened to fp32 (ledger: scratch)
    float *grad_piece;     // bucketed runs: a piece's fp32 gradients (scratch; comm at stages 2, 3)
    void *gather_piece; // stage 3: a piece's weights gathered from every rank (comm)
    // Without --fused-ce the LM head needs the whole table at once: wte, wpe and lnf, (Vp + maxT) C + 2C
    Globals globals, global_grads;  // where this forward reads them, and the backward adds up their gradients
    float *w_global;    // 16-bit runs: widened to fp32 (scratch)
    float *grad_global;    // bucketed runs: their fp32 gradients (scratch; comm at stages 2, 3)
    void *gather_global;  // stage 3: gathered (comm)
    // 16-bit runs only: the fp32 working buffers (ledger: scratch)
    float *x_work;      // (N,C) the current block's input
    float *act_work;    // one block's 13 tensors, or the final ones, in fp32
    int bucketed;       // gradients go through the fp32 buckets grad_piece / grad_global
    // --eval-only (cpu/eval.h): a forward-only model, fp32 arithmetic, no gradients, whose weights
    // may be held elsewhere (quantized, or in the state file); NULL in training. Where they are,
    // each fetch reads its piece back through read_back (NULL: the fp32 params hold them).
    struct EvalWeights *eval;
    void (*read_back)(struct GPT *m, float *dst, size_t lo, size_t n);
} GPT;

// The rows of the residual path the running forward holds: all N = B T, or under --sp this rank's slice,
// N / t (forward_start sets tp.sp: a sample's forward, a row or a prompt at a time, holds them all).
int gpt_rows(const GPT *m) { return m->B * m->T / m->tp.sp; }

// Are the model's own weights frozen (--lora)? Then they have no gradients and no optimizer state.
int gpt_frozen(const GPT *m) { return m->lora.cfg.rank > 0; }
// ... and held in fewer bits (--base-dtype), read back a piece at a time?
int gpt_base_packed(const GPT *m) { return m->lora.base != NULL; }

// The attention heads of a config: H query heads sharing KVH key-value heads (GPT-2: KVH = H).
Heads model_heads(const GPTConfig *c) { return (Heads){c->heads, cfg_kv_heads(c), head_size(c)}; }

// Floats in one block's working set (its saved tensors, core/saved.h), and in
// the final one: the final layernorm's, and without --fused-ce a chunk of
// logits (16-bit runs compute the LM head and the loss head_rows rows at a
// time, so their fp32 working copy of the logits is head_rows x Vp).
// The row statistics need no working copy: they are stored in fp32. Every row has room (--sp's slices
// fit, and a sample's forward holds all of its rows).
size_t block_act_floats(const GPTConfig *c, int B, int T, int flash) {
    GPTConfig all_rows = *c;
    all_rows.seq_split = 0;
    size_t n = 0;
    for (int i = 0; i < SAVED_PER_LAYER; i++)
        if (!saved_is_row_stat(&block_saved[i], flash))
            n += saved_count(&block_saved[i], &all_rows, B, T, flash);
    return n;
}

size_t final_act_floats(const GPT *m, int B, int T) {
    size_t n = (size_t)B * T * m->cfg.channels;  // lnf
    return m->plan.tiled_head ? n : n + (size_t)m->plan.head_rows * padded_vocab(&m->cfg);
}

enum { MAX_BUFFERS = 52 };

// The LM head's scratch (cpu/head.h) and --tp's: --fused-ce's tile of logits and each row's two running
// numbers; --sp's whole sequence; the vocabulary's band (vocab_split): the batch's tokens as its rows, the
// group's log-sum-exps of each row, and a sample's whole row of logits. Returns the buffers' count, n and 6 more.
int head_buffers(GPT *m, Buffer *b, int n, size_t N) {
    const GPTConfig *c = &m->cfg;
    size_t f = sizeof(float), t = c->vocab_split > 1 ? (size_t)c->vocab_split : 0, tiled = m->plan.tiled_head;
#define BUF(ptr, name, size) b[n++] = (Buffer){(void **)&m->ptr, LOC_DEVICE, MEM_SCRATCH, name, size}
    BUF(head_tile, "logits tile", tiled ? head_tile_elems(&m->plan, c) * f : 0);
    BUF(head_stats, "head row stats", tiled || t ? 2 * N * f : 0);
    BUF(seq_whole, "sequence gather", c->seq_split > 1 ? N * c->channels * f : 0);
    BUF(band_tokens, "band tokens", t ? N * sizeof(int) : 0);
    BUF(band_lse, "band log-sum-exps", N * t * f);
    BUF(logits_row, "logits row", (size_t)padded_vocab(c) * t * f);
#undef BUF
    return n;
}

// --lora's own rows: an op's adapters and their gradients at stages 3 and 2 (the trained set's layout), and
// (N,R) twice of scratch. Returns the buffers' count, n and 4 more.
int lora_buffers(GPT *m, Buffer *b, int n, size_t N) {
    size_t R = m->lora.cfg.rank, f = sizeof(float), op_most = m->lora.op_most;
#define BUF(ptr, cat, name, size) b[n++] = (Buffer){(void **)&m->lora.ptr, LOC_DEVICE, cat, name, size}
    BUF(bucket, MEM_COMM, "adapter grads bucket", grads_sharded(&m->train.shard) ? op_most * f : 0);
    BUF(gathered, MEM_COMM, "adapter gather", weights_sharded(&m->train.shard) ? op_most * f : 0);
    BUF(u, MEM_SCRATCH, "lora x A^T", N * R * f);
    BUF(du, MEM_SCRATCH, "lora its gradient", N * R * f);
#undef BUF
    return n;
}

// The model's buffers, in the order they are made (for micro-batches of
// B x T; the eval model's are cpu/eval.h's): the weights the forward reads,
// what the step trains (m->train, optim/trained.h: its own fp32 weights and
// gradients, the chunks that sum them, AdamW's m and v), the backward's
// scratch, ZeRO's buffers. What each rank holds (P~ = the padded full size,
// S = its shard; parallel/zero.h has the layout):
//   stage 0: everything full (P~)                      + comm: the reduction chunk buffer
//   stage 1: master, adam_m, adam_v: S; the rest full  + comm: the reduction chunk buffer
//            (AdamW's m and v in fp32, or with --adam-bits 8 in 8-bit codes and a scale per ADAM_BLOCK)
//   stage 2: also grads: S                            + comm: fp32 gradient buckets (a piece, the globals)
//   stage 3: also the weights: S                      + comm: buckets, and gather buffers (a piece, the globals)
// fp32 runs have no master: the fp32 weights are what the optimizer updates.
// With --fused-ce the globals need no buffers of their own: the table moves
// through the piece buffers a chunk at a time.
// With --offload opt the master weights and m and v are the offload room's (optim/offload.h), not here.
int buffers(GPT *m, int B, int T, Buffer *b) {
    const Shard *sh = &m->shard;
    const GPTConfig *c = &m->cfg;
    size_t N = (size_t)B * T, C = c->channels, f = sizeof(float), e = dtype_size(m->dtype);
    int n = 0, mixed = m->dtype != DT_FP32, whole_table = !m->plan.tiled_head;
    int packed = gpt_base_packed(m), widened = mixed || packed;  // --base-dtype: read back into w_piece, w_global
    int comm_buckets = grads_sharded(sh) ? MEM_COMM : MEM_SCRATCH;
    int wloc = m->plan.offload & OFFLOAD_PARAMS ? LOC_PINNED : LOC_DEVICE;  // the compute weights
    size_t block = block_act_floats(c, B, T, m->flash), final = final_act_floats(m, B, T);
#define BUF(ptr, cat, name, size) b[n++] = (Buffer){(void **)&m->ptr, LOC_DEVICE, cat, name, size}
#define BUF_AT(where, ptr, cat, name, size) b[n++] = (Buffer){(void **)&m->ptr, where, cat, name, size}
    BUF_AT(wloc, params, MEM_PARAMS, "params", !mixed && !packed ? shard_weights_len(sh) * f : 0);
    BUF_AT(wloc, params_lp, MEM_PARAMS, "params (16-bit)", mixed && !packed ? shard_weights_len(sh) * 2 : 0);
    n = trained_arrays(&m->train, b, n);  // what the step trains: its own fp32 weights (or the ones above), gradients
    BUF(dres, MEM_SCRATCH, "dres", N * C * f);
    BUF(dln, MEM_SCRATCH, "dln", N * C * f);
    BUF(dqkv, MEM_SCRATCH, "dqkv", N * qkv_width(c) * f);
    BUF(datty, MEM_SCRATCH, "datty", N * attn_width(c) * f);
    BUF(dfch, MEM_SCRATCH, "dfch", N * op_outputs(c, OP_FC) * f);
    BUF(dact, MEM_SCRATCH, "dact", is_llama(c) ? N * cfg_ffn(c) * f : 0);
    n = head_buffers(m, b, n, N);
    BUF(x_work, MEM_SCRATCH, "x work", mixed ? N * C * f : 0);
    BUF(act_work, MEM_SCRATCH, "activation work", mixed ? (block > final ? block : final) * f : 0);
    BUF(w_piece, MEM_SCRATCH, "piece weights work", widened ? m->piece * f : 0);
    BUF(w_global, MEM_SCRATCH, "global weights work", widened && whole_table ? m->plan.table * f : 0);
    // gradient buckets: 16-bit gradients are collected a piece at a time in fp32 there;
    // stages 2 and 3 reduce-scatter them there (then they are comm buffers)
    BUF(grad_piece, comm_buckets, "piece grads bucket", m->bucketed ? m->piece * f : 0);
    BUF(grad_global, comm_buckets, "global grads bucket", m->bucketed && whole_table ? m->plan.table * f : 0);
    n = trained_chunks(&m->train, b, n);  // stages 0, 1: the chunks that sum its gradients over the ranks
    BUF(gather_piece, MEM_COMM, "piece gather", weights_sharded(sh) ? m->piece * e : 0);
    BUF(gather_global, MEM_COMM, "global gather", weights_sharded(sh) && whole_table ? m->plan.table * e : 0);
#undef BUF
#undef BUF_AT
    n = trained_moments(&m->train, b, n);  // AdamW's m and v (optim/offload.h's with --offload opt)
    return lora_buffers(m, b, n, N);
}

// The trained set of a model that trains its own weights: the fp32 weights (16-bit runs: the master, a row
// of its own, off the device with --offload opt), the gradients in theirs, AdamW over every tensor.
Trained model_trained(GPT *m, const AdamWConfig *adam, int adam_bits) {
    const Shard *sh = &m->shard;
    int mixed = m->dtype != DT_FP32, wide = m->grad_dtype == DT_FP32, offloaded = m->plan.offload & OFFLOAD_OPT;
    Trained t = {.shard = *sh, .w_base = m->master_base, .cdt = m->dtype, .c_base = m->params_base,
                 .gdt = m->grad_dtype, .g_base = m->grads_base};
    size_t lo, hi, f = sizeof(float);
    shard_state_range(sh, &lo, &hi);
    optimizer_setup(&t.opt, adam, &m->cfg, lo, hi, adam_bits);
    t.rows = (TrainedRows){(void **)&m->params, wide ? (void **)&m->grads : &m->grads_lp,
                           mixed ? &m->params_lp : (void **)&m->params, MEM_MASTER, "master weights",
                           wide ? "grads" : "grads (16-bit)", "reduce chunk", "across-groups chunk",
                           mixed && !offloaded ? shard_state_len(sh) * f : 0, shard_grads_len(sh) * (wide ? f : 2),
                           trained_reduce_bytes(sh), across_buffer_floats(sh) * f, offloaded ? 0 : shard_state_len(sh), 0};
    return t;
}

void buffers_alloc(GPT *m, int B, int T) {
    Buffer b[MAX_BUFFERS];
    table_alloc(b, buffers(m, B, T, b));
    trained_view(&m->train);
    if (!m->dact) m->dact = m->dfch;  // GELU's backward works in place
    m->acts = calloc(m->cfg.layers, sizeof(Acts));
}

void buffers_free(GPT *m, int B, int T) {
    Buffer b[MAX_BUFFERS];
    table_free(b, buffers(m, B, T, b));
}

void gpt_free(GPT *m) {
    buffers_free(m, m->B, m->T);
    free(m->acts);
    free(m->train.opt.tensors);
}

// The model for micro-batches of B x T (Settings' batch and seq_len), for
// rank `rank` at the plan's ZeRO stage, its buffers not made yet (gpt_build:
// training its own weights; cpu/lora.h lora_gpt_build: --lora's adapters).
void gpt_setup(GPT *m, const Settings *s, const Plan *plan, int rank) {
    memset(m, 0, sizeof *m);
    m->cfg = s->cfg;
    m->tp = (TensorSplit){s->tp, s->tp > 1 ? comm_tensor.rank : 0, 1, &comm_tensor, *model_whole(s)};
    m->plan = *plan;
    m->dtype = s->dtype;
    m->grad_dtype = grad_dtype(s);
    m->flash = s->flash;
    m->nparams = param_count(&m->cfg);
    m->shard = shard_layout(m->nparams, plan, rank);
    const Shard *sh = &m->shard;
    m->params_base = shard_weights_base(sh);
    m->grads_base = shard_grads_base(sh);
    m->master_base = m->dtype == DT_FP32 ? m->params_base : shard_state_base(sh);
    m->piece = plan->piece;
    m->bucketed = (m->grad_dtype != DT_FP32 || grads_sharded(sh)) && !s->lora.rank;  // (--lora: no model gradients)
    m->B = s->batch, m->T = s->seq_len;
}

// ... with AdamW over the parameters it updates (its shard from stage 1 on, else all of them), its
// buffers made; its weights are made by gpt_init (cpu/weights.h).
void gpt_build(GPT *m, const Settings *s, const Plan *plan, int rank) {
    gpt_setup(m, s, plan, rank);
    AdamWConfig adam = adamw_config(s);
    m->train = model_trained(m, &adam, s->adam_bits);
    buffers_alloc(m, s->batch, s->seq_len);
}

// The weights the model computes with, in the storage dtype, and its gradients, in theirs.
void *compute_weights(const GPT *m) { return m->dtype == DT_FP32 ? (void *)m->params : m->params_lp; }
void *gpt_grads(const GPT *m) { return m->grad_dtype == DT_FP32 ? (void *)m->grads : m->grads_lp; }

// A new step: the gradients start from 0, and the rebuilds' time from nothing.
void gpt_zero_grad(GPT *m) {
    trained_zero_grad(&m->train);
    m->recompute_seconds = 0.0;
}

#endif
