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
#include "io/quant.h"
#include "memory/ledger.h"
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
} LayerActs;

// fp32 views of the weights that are not in a layer (or of their gradients):
// the embeddings and the final layernorm.
typedef struct {
    float *wte, *wpe, *lnfw, *lnfb;
} GlobalWeights;

typedef struct {
    GPTConfig cfg;
    Plan plan;  // core/plan.h: the pieces, the drops, the head's tiles
    // --zero S over N ranks: which part of the flat array this rank owns and
    // which arrays it keeps whole (parallel/zero.h). One rank: stage 0, nothing sharded.
    Shard shard;
    int dtype;  // --dtype: DT_FP32, DT_BF16 or DT_FP16 (storage of weights, grads, activations)
    int flash;  // --flash: attention without the T x T matrix
    double recompute_seconds;  // time spent rebuilding dropped tensors (the price of the memory saved)
    double rebuild_started;    // the clock when the running rebuild began
    size_t block_kept_bytes;   // measured: what block 0 kept on the stack after the last forward (--mem-ops)
    size_t nparams;
    float *params;     // fp32 weights: what the optimizer updates (ledger: params, or master with 16-bit)
    float *grads;      // fp32 gradients (fp32 runs only)
    void *params_lp;   // 16-bit runs: the weights the model computes with (ledger: params)
    void *grads_lp;    // 16-bit runs: the gradients (ledger: grads)
    size_t params_base, master_base, grads_base;  // flat index of element 0 (0, or own_lo if a shard)
    // activations of the current forward pass
    void *encoded;                    // (N,C) saved embedding output
    LayerActs *acts;                  // L entries
    LayerActs final;                  // lnf (N,C), lnf_mean, lnf_rstd (N), logits (N,Vp)
    float *logits;                    // fp32 view of the logits: logits, then probs, then dlogits
                                      // (16-bit runs: only head_rows rows at a time, cpu/head.h)
    void *logits_saved;               // 16-bit runs: the logits on the stack (N,Vp)
    int B, T;                         // shape of the current forward pass
    int arena_mark;                   // stack mark before the forward pass
    // backward scratch, reused by every layer: sized for the training batch
    float *dres;   // (N,C)  gradient of the residual stream
    float *dln;    // (N,C)  gradient of a layernorm output
    float *dqkv;   // (N,3C)
    float *datty;  // (N,C)
    float *dfch;   // (N,4C) gradient of the MLP hidden (before and after GELU, in place)
    // --fused-ce: the LM head and the loss a tile at a time (cpu/head.h)
    float *head_tile;   // head_rows x vocab_chunk logits (and room for one whole row, for sampling)
    float *head_stats;  // (2,N): each row's running sum of exp, and its target's logit
    float *head_lse;    // (N) fp32 on the stack: each row's log-sum-exp, saved for the backward
    // The parameters move through buffers a piece at a time (core/plan.h):
    size_t piece;       // floats in the largest piece
    float *w_piece;     // 16-bit runs: a piece's weights, widened to fp32 (ledger: scratch)
    float *g_piece;     // bucketed runs: a piece's fp32 gradients (scratch; comm at stages 2, 3)
    void *gather_piece; // stage 3: a piece's weights gathered from every rank (comm)
    // Without --fused-ce the LM head needs the whole table at once: wte, wpe and lnf, (Vp + maxT) C + 2C
    GlobalWeights globals, global_grads;  // where this forward reads them, and the backward adds up their gradients
    float *w_global;    // 16-bit runs: widened to fp32 (scratch)
    float *g_global;    // bucketed runs: their fp32 gradients (scratch; comm at stages 2, 3)
    void *gather_global;  // stage 3: gathered (comm)
    // 16-bit runs only: the fp32 working buffers (ledger: scratch)
    float *x_work;      // (N,C) the current block's input
    float *act_work;    // one block's 13 tensors, or the final ones, in fp32
    // ZeRO buffers (ledger: comm)
    int bucketed;       // gradients go through the fp32 buckets g_piece / g_global
    float *reduce_buf;  // stages 0, 1: N * REDUCE_CHUNK floats for the chunked gradient reduction
    float *across_buf;  // --shard-group: the sum across the groups' chunk (parallel/zero.h across_buffer_floats)
    // --eval-only (gpt_build_eval): a forward-only model, fp32 arithmetic, no gradients. Its weights
    // are the fp32 params, or with --quantize held in quant; each op reads its piece back (cpu/weights.h).
    int eval;
    QuantWeights quant;  // the layout, and with --quantize the weights in bf16, int8 or int4
    FILE *from_file;     // set: read the weights from the state file instead (the comparison rows),
    long file_at;        //   whose fp32 weights start at this byte,
    int file_format;     //   each piece rounded through this format as it is read
} GPT;

// Floats in one block's working set (its saved tensors, core/saved.h), and in
// the final one: the final layernorm's, and without --fused-ce a chunk of
// logits (16-bit runs compute the LM head and the loss head_rows rows at a
// time, so their fp32 working copy of the logits is head_rows x Vp).
// The row statistics need no working copy: they are stored in fp32.
size_t block_act_floats(const GPTConfig *c, int B, int T, int flash) {
    size_t n = 0;
    for (int i = 0; i < SAVED_PER_LAYER; i++)
        if (!saved_is_row_stat(&block_saved[i], flash))
            n += saved_count(&block_saved[i], B, T, c->channels, c->heads, padded_vocab(c), flash);
    return n;
}

size_t final_act_floats(const GPT *m, int B, int T) {
    size_t n = (size_t)B * T * m->cfg.channels;  // lnf
    return m->plan.tiled_head ? n : n + (size_t)m->plan.head_rows * padded_vocab(&m->cfg);
}

// --fused-ce's tile of logits: head_rows x min(Vp, vocab_chunk), or one whole
// row of Vp (sampling) if that is larger.
size_t head_tile_floats(const GPT *m) {
    size_t Vp = padded_vocab(&m->cfg), chunk = (size_t)m->plan.vocab_chunk;
    size_t tile = (size_t)m->plan.head_rows * (Vp < chunk ? Vp : chunk);
    return tile > Vp ? tile : Vp;
}

// One buffer of the model: where its pointer lives, its ledger category and
// name, its size for this model (0: this model has none), and where it lives
// (the device; --offload opt,params keeps the weight shard in pinned memory).
typedef struct {
    void **at;
    int category;
    const char *name;
    size_t bytes;
    int loc;
} Buffer;

enum { CPU_MAX_BUFFERS = 24 };

// The model's buffers, in the order they are made (for micro-batches of
// B x T; the eval model's too). What each rank holds (P~ = the padded full
// size, S = its shard; parallel/zero.h has the layout):
//   stage 0: everything full (P~)                      + comm: the reduction chunk buffer
//   stage 1: master, adam_m, adam_v: S; the rest full  + comm: the reduction chunk buffer
//   stage 2: also grads: S                            + comm: fp32 gradient buckets (a piece, the globals)
//   stage 3: also the weights: S                      + comm: buckets, and gather buffers (a piece, the globals)
// fp32 runs have no master: the fp32 weights are what the optimizer updates.
// With --fused-ce the globals need no buffers of their own: the table moves
// through the piece buffers a chunk at a time.
// With --offload opt the master weights are the offload room's (cpu/offload.h), not here.
int cpu_buffers(GPT *m, int B, int T, Buffer *b) {
    const Shard *sh = &m->shard;
    const GPTConfig *c = &m->cfg;
    size_t N = (size_t)B * T, C = c->channels, f = sizeof(float), e = dtype_size(m->dtype);
    int n = 0, lp = m->dtype != DT_FP32, train = !m->eval, whole_table = !m->plan.tiled_head;
    int comm_buckets = sh->stage >= 2 ? MEM_COMM : MEM_SCRATCH, offloaded = m->plan.offload & OFFLOAD_OPT;
    int wloc = m->plan.offload & OFFLOAD_PARAMS ? LOC_PINNED : LOC_DEVICE;  // the compute weights
    size_t block = block_act_floats(c, B, T, m->flash), final = final_act_floats(m, B, T);
#define BUF(ptr, cat, name, size) b[n++] = (Buffer){(void **)&m->ptr, cat, name, size, LOC_DEVICE}
#define BUF_AT(loc, ptr, cat, name, size) b[n++] = (Buffer){(void **)&m->ptr, cat, name, size, loc}
    BUF_AT(wloc, params, MEM_PARAMS, "params", !lp && (train || m->quant.format == QF_FP32) ? shard_weights_len(sh) * f : 0);
    BUF_AT(wloc, params_lp, MEM_PARAMS, "params (16-bit)", lp ? shard_weights_len(sh) * 2 : 0);
    BUF(params, MEM_MASTER, "master weights", lp && !offloaded ? shard_state_len(sh) * f : 0);
    BUF(grads, MEM_GRADS, "grads", train && !lp ? shard_grads_len(sh) * f : 0);
    BUF(grads_lp, MEM_GRADS, "grads (16-bit)", lp ? shard_grads_len(sh) * 2 : 0);
    BUF(dres, MEM_SCRATCH, "dres", train ? N * C * f : 0);
    BUF(dln, MEM_SCRATCH, "dln", train ? N * C * f : 0);
    BUF(dqkv, MEM_SCRATCH, "dqkv", train ? N * 3 * C * f : 0);
    BUF(datty, MEM_SCRATCH, "datty", train ? N * C * f : 0);
    BUF(dfch, MEM_SCRATCH, "dfch", train ? N * 4 * C * f : 0);
    BUF(w_piece, MEM_SCRATCH, "piece weights work", m->eval ? m->piece * f : 0);  // (the eval model's first)
    BUF(head_tile, MEM_SCRATCH, "logits tile", m->plan.tiled_head ? head_tile_floats(m) * f : 0);
    BUF(head_stats, MEM_SCRATCH, "head row stats", m->plan.tiled_head ? 2 * N * f : 0);
    BUF(w_global, MEM_SCRATCH, "global weights work", m->eval && whole_table ? m->plan.table * f : 0);
    BUF(x_work, MEM_SCRATCH, "x work", lp ? N * C * f : 0);
    BUF(act_work, MEM_SCRATCH, "activation work", lp ? (block > final ? block : final) * f : 0);
    BUF(w_piece, MEM_SCRATCH, "piece weights work", lp ? m->piece * f : 0);
    BUF(w_global, MEM_SCRATCH, "global weights work", lp && whole_table ? m->plan.table * f : 0);
    // gradient buckets: 16-bit runs collect each piece's fp32 gradients there;
    // stages 2 and 3 reduce-scatter them there (then they are comm buffers)
    BUF(g_piece, comm_buckets, "piece grads bucket", m->bucketed ? m->piece * f : 0);
    BUF(g_global, comm_buckets, "global grads bucket", m->bucketed && whole_table ? m->plan.table * f : 0);
    size_t k = sh->size < REDUCE_CHUNK ? sh->size : REDUCE_CHUNK;
    BUF(reduce_buf, MEM_COMM, "reduce chunk", sh->nranks > 1 && sh->stage <= 1 ? (size_t)sh->nranks * k * f : 0);
    BUF(across_buf, MEM_COMM, "across-groups chunk", across_buffer_floats(sh) * f);
    BUF(gather_piece, MEM_COMM, "piece gather", sh->stage == 3 ? m->piece * e : 0);
    BUF(gather_global, MEM_COMM, "global gather", sh->stage == 3 && whole_table ? m->plan.table * e : 0);
#undef BUF
#undef BUF_AT
    return n;
}

// Make every buffer of the table this model has (zeroed: mem_alloc zeroes).
void cpu_buffers_alloc(GPT *m, int B, int T) {
    Buffer b[CPU_MAX_BUFFERS];
    int n = cpu_buffers(m, B, T, b);
    for (int i = 0; i < n; i++)
        if (b[i].bytes) *b[i].at = mem_alloc_at(b[i].loc, b[i].category, b[i].bytes, b[i].name);
    m->acts = calloc(m->cfg.layers, sizeof(LayerActs));
}

void gpt_free(GPT *m) {
    Buffer b[CPU_MAX_BUFFERS];
    int n = cpu_buffers(m, m->B, m->T, b);
    for (int i = 0; i < n; i++)
        if (b[i].bytes && *b[i].at) { mem_free(*b[i].at); *b[i].at = NULL; }
    if (m->eval) quant_free(&m->quant);
    free(m->acts);
}

// The model for micro-batches of B x T (Settings' batch and seq_len), for
// rank `rank` at the plan's ZeRO stage; its weights are made by gpt_init
// (cpu/weights.h).
void gpt_build(GPT *m, const Settings *s, const Plan *plan, int rank) {
    memset(m, 0, sizeof *m);
    m->cfg = s->cfg;
    m->plan = *plan;
    m->dtype = s->dtype;
    m->flash = s->flash;
    m->nparams = param_count(&m->cfg);
    m->shard = shard_layout(m->nparams, plan, rank);
    const Shard *sh = &m->shard;
    m->params_base = shard_weights_base(sh);
    m->grads_base = shard_grads_base(sh);
    m->master_base = m->dtype == DT_FP32 ? m->params_base : shard_state_base(sh);
    m->piece = plan->piece;
    m->bucketed = m->dtype != DT_FP32 || sh->stage >= 2;
    m->B = s->batch, m->T = s->seq_len;
    cpu_buffers_alloc(m, s->batch, s->seq_len);
}

// --eval-only: a forward-only model for micro-batches of B x T, its weights
// held in --quantize's format (QF_FP32: the params array; else io/quant.h's
// storage). Its forward is the training forward with --ckpt's drops: with no
// backward to come, a block keeps only its output (the next block's input)
// once it has run. No gradients, no Adam, no backward buffers; fp32
// arithmetic whatever the weights are stored in.
//   weights: params 4P (fp32), or qweights + qscales
//   scratch: w_piece (a piece, fp32, in whole blocks of QUANT_BLOCK: the state is read through it),
//            w_global (the whole table, without --fused-ce), --fused-ce's logits tile and row stats
void gpt_build_eval(GPT *m, const Settings *s) {
    memset(m, 0, sizeof *m);
    Settings forward = *s;
    forward.dtype = DT_FP32, forward.recompute = REC_BLOCK, forward.ckpt = 1, forward.zero = 0;
    m->cfg = s->cfg;
    m->plan = make_plan(&forward, 1);
    m->eval = 1;
    m->dtype = DT_FP32;
    m->flash = s->flash;
    m->nparams = param_count(&m->cfg);
    m->shard = shard_layout(m->nparams, &m->plan, 0);
    int n = param_tensor_count(&m->cfg);  // the layout as io/quant.h sees it
    ParamTensor *pt = malloc(sizeof(ParamTensor) * n);
    QuantTensor *qt = malloc(sizeof(QuantTensor) * n);
    param_tensors(&m->cfg, pt);
    for (int i = 0; i < n; i++) qt[i] = (QuantTensor){pt[i].offset, pt[i].count, pt[i].is_matrix};
    quant_layout(&m->quant, qt, n);
    free(pt);
    free(qt);
    m->piece = (m->plan.piece + QUANT_BLOCK - 1) / QUANT_BLOCK * QUANT_BLOCK;
    m->B = s->batch, m->T = s->seq_len;
    if (s->quantize != QF_FP32) quant_alloc(&m->quant, s->quantize);
    cpu_buffers_alloc(m, s->batch, s->seq_len);
}

// The weights the model computes with, and its gradients, in the storage dtype.
void *compute_weights(const GPT *m) { return m->dtype == DT_FP32 ? (void *)m->params : m->params_lp; }
void *gpt_grads(const GPT *m) { return m->dtype == DT_FP32 ? (void *)m->grads : m->grads_lp; }

void gpt_zero_grad(GPT *m) { memset(gpt_grads(m), 0, shard_grads_len(&m->shard) * dtype_size(m->dtype)); }

#endif
