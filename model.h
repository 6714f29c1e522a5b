// model.h — the GPT-2 model on the CPU: its config and presets, the flat
// parameter layout and its init, the model's buffers (weights, gradients,
// ZeRO's shard of them, the 16-bit working copies), and the forward and
// backward passes over the ops of ops.h, with --ckpt and --flash.
//
// Letters: B batch, T sequence length, C channels, H heads, L layers,
// V vocabulary, Vp = V padded to a multiple of 64, N = B*T rows.
#ifndef GPTMEM_MODEL_H
#define GPTMEM_MODEL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "core/clock.h"
#include "core/config.h"
#include "core/dtype.h"
#include "core/saved.h"
#include "core/sizes.h"
#include "cpu/ops.h"
#include "io/quant.h"
#include "memory/ledger.h"
#include "parallel/comm.h"
#include "parallel/zero.h"

typedef struct {
    float *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb;
    float *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
} LayerWeights;

// Pointers into one layer's block of 12 tensors, starting at p.
LayerWeights layer_weights_at(float *p, size_t C) {
    LayerWeights w;
    w.ln1w = p; p += C;
    w.ln1b = p; p += C;
    w.qkvw = p; p += 3 * C * C;
    w.qkvb = p; p += 3 * C;
    w.attprojw = p; p += C * C;
    w.attprojb = p; p += C;
    w.ln2w = p; p += C;
    w.ln2b = p; p += C;
    w.fcw = p; p += 4 * C * C;
    w.fcb = p; p += 4 * C;
    w.fcprojw = p; p += 4 * C * C;
    w.fcprojb = p;
    return w;
}

// Pointers into layer l's block of `base` (the params or the grads array).
LayerWeights layer_weights(float *base, const GPTConfig *c, int l) {
    return layer_weights_at(base + layer_offset(c, l), c->channels);
}

// Point w's two fields of op `op` at its weight and bias, which start at p.
void set_op_pointers(LayerWeights *w, int op, float *p, size_t C) {
    switch (op) {
    case OP_LN1: w->ln1w = p; w->ln1b = p + C; break;
    case OP_QKV: w->qkvw = p; w->qkvb = p + 3 * C * C; break;
    case OP_ATTPROJ: w->attprojw = p; w->attprojb = p + C * C; break;
    case OP_LN2: w->ln2w = p; w->ln2b = p + C; break;
    case OP_FC: w->fcw = p; w->fcb = p + 4 * C * C; break;
    default: w->fcprojw = p; w->fcprojb = p + 4 * C * C; break;  // OP_FCPROJ
    }
}

float *wte_of(float *base) { return base; }
float *wpe_of(float *base, const GPTConfig *c) { return base + (size_t)padded_vocab(c) * c->channels; }
float *lnf_of(float *base, const GPTConfig *c) { return base + layer_offset(c, c->layers); }

// ===========================================================================
// The model: forward and backward over the ops of ops.h.
//
// Storage and arithmetic (--dtype). The ops always compute in fp32. With
// --dtype fp32 they work directly on the stored tensors. With bf16 or fp16,
// weights, gradients and saved activations are stored in 16 bits, and each
// block computes in fp32 *working buffers* (ledger: scratch): weights are
// widened into them before use, every op's output is rounded to 16 bits when
// it is saved (and in the working copy too, so the next op reads exactly what
// was saved), and the backward widens the saved tensors again. The helpers
// below (push_saved, round_saved, load_saved, and fetch_params,
// grads_params, grads_params_done) are where that happens; for fp32 they hand back the stored
// tensors and do nothing.
// ===========================================================================

// The tensors one layer saves for its backward (saved.h lists them), indexed
// by their SV_ number (the final layernorm's use SV_LNF...). The named
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
    unsigned pushing;                  // SV_BIT()s of the tensors the running block_forward pushes
    void *saved[SAVED_PER_LAYER];
    float *view[SAVED_PER_LAYER];
    size_t count[SAVED_PER_LAYER];
} LayerActs;

// fp32 views of the weights that are not in a layer: embeddings and final layernorm.
typedef struct {
    float *wte, *wpe, *lnfw, *lnfb;
} GlobalWeights;

typedef struct {
    GPTConfig cfg;
    // --zero S over N ranks: which part of the flat array this rank owns and
    // which arrays it keeps whole (zero.h). One rank: stage 0, nothing sharded.
    Shard shard;
    int dtype;  // --dtype: DT_FP32, DT_BF16 or DT_FP16 (storage of weights, grads, activations)
    int flash;  // --flash: attention without the T x T matrix
    unsigned drops;  // --recompute / --ckpt: SV_BIT()s of the tensors a block drops and rebuilds (saved.h)
    double recompute_seconds;  // time spent rebuilding them (the price of the memory saved)
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
                                      // (16-bit runs: only HEAD_ROWS rows at a time, see head_forward)
    void *logits_saved;               // 16-bit runs: the logits on the stack (N,Vp)
    int B, T;                         // shape of the current forward pass
    int arena_mark;                   // stack mark before the forward pass
    // backward scratch, reused by every layer: sized for the training batch
    float *dres;   // (N,C)  gradient of the residual stream
    float *dln;    // (N,C)  gradient of a layernorm output
    float *dqkv;   // (N,3C)
    float *datty;  // (N,C)
    float *dfch;   // (N,4C) gradient of the MLP hidden (before and after GELU, in place)
    // --fused-ce: the LM head and the loss a tile at a time (head_forward_fused)
    int fused_ce;
    float *head_tile;   // HEAD_ROWS x VOCAB_CHUNK logits (and room for one whole row, for sampling)
    float *head_stats;  // (2,N): each row's running sum of exp, and its target's logit
    float *head_lse;    // (N) fp32 on the stack: each row's log-sum-exp, saved for the backward
    // The model moves through buffers a piece at a time: a piece is one op's
    // parameters (piece_count: the largest is fc's 4C^2 + 4C), or with
    // --fused-ce a chunk of VOCAB_CHUNK rows of the embedding table.
    size_t piece;       // floats in the largest piece
    float *w_piece;     // 16-bit runs: a piece's weights, widened to fp32 (ledger: scratch)
    float *g_piece;     // bucketed runs: a piece's fp32 gradients (scratch; comm at stages 2, 3)
    void *gather_piece; // stage 3: a piece's weights gathered from every rank (comm)
    // Without --fused-ce the LM head needs the whole table at once: wte, wpe and lnf, (Vp + maxT) C + 2C
    float *w_global;    // 16-bit runs: widened to fp32 (scratch)
    float *g_global;    // bucketed runs: their fp32 gradients (scratch; comm at stages 2, 3)
    void *gather_global;  // stage 3: gathered (comm)
    // 16-bit runs only: the fp32 working buffers (ledger: scratch)
    float *x_work;      // (N,C) the current block's input
    float *act_work;    // one block's 13 tensors, or the final ones, in fp32
    // ZeRO buffers (ledger: comm)
    int bucketed;       // gradients go through the fp32 buckets g_piece / g_global
    float *reduce_buf;  // stages 0, 1: N * REDUCE_CHUNK floats for the chunked gradient reduction
    // --eval-only (gpt_build_eval): a forward-only model, fp32 arithmetic, no gradients. Its weights
    // are the fp32 params, or with --quantize held in quant; each op reads its piece back (eval_weights).
    int eval;
    QuantWeights quant;  // the layout, and with --quantize the weights in bf16, int8 or int4
    FILE *from_file;     // set: read the weights from the state file instead (the comparison rows),
    long file_at;        //   whose fp32 weights start at this byte,
    int file_format;     //   each piece rounded through this format as it is read
} GPT;



// Floats in one block's working set (its saved tensors, saved.h), and in the
// final one: the final layernorm's, and without --fused-ce a chunk of logits
// (16-bit runs compute the LM head and the loss HEAD_ROWS (sizes.h) rows at a
// time, so their fp32 working copy of the logits is HEAD_ROWS x Vp).
// The row statistics need no working copy: they are stored in fp32.
size_t block_act_floats(const GPTConfig *c, int B, int T, int flash) {
    size_t n = 0;
    for (int i = 0; i < SAVED_PER_LAYER; i++)
        if (!saved_is_row_stat(&block_saved[i], flash))
            n += saved_count(&block_saved[i], B, T, c->channels, c->heads, padded_vocab(c), flash);
    return n;
}

size_t final_act_floats(const GPTConfig *c, int B, int T, int fused_ce) {
    size_t N = (size_t)B * T, rows = N < HEAD_ROWS ? N : HEAD_ROWS, n = N * c->channels;  // lnf
    return fused_ce ? n : n + rows * padded_vocab(c);
}

// Floats in the largest piece: fc's 4C^2 + 4C, or with --fused-ce a chunk of
// the embedding table if that is larger: VOCAB_CHUNK rows (or all Vp + maxT
// of them, if fewer) of C.
size_t piece_floats(const GPTConfig *c, int fused_ce) {
    size_t C = c->channels, op = op_param_count(C, OP_FC), rows = (size_t)padded_vocab(c) + c->max_seq;
    size_t chunk = (rows < VOCAB_CHUNK ? rows : VOCAB_CHUNK) * C;
    return fused_ce && chunk > op ? chunk : op;
}

// --fused-ce's tile of logits: min(N, HEAD_ROWS) rows x min(Vp, VOCAB_CHUNK)
// columns, or one whole row of Vp (sampling) if that is larger.
size_t head_tile_floats(const GPTConfig *c, int B, int T) {
    size_t N = (size_t)B * T, Vp = padded_vocab(c);
    size_t tile = (N < HEAD_ROWS ? N : HEAD_ROWS) * (Vp < VOCAB_CHUNK ? Vp : VOCAB_CHUNK);
    return tile > Vp ? tile : Vp;
}

// Allocate weights, gradients and scratch (for micro-batches of B x T), for
// rank `rank` of `nranks` at ZeRO stage `zero`. What each rank holds
// (P~ = the padded full size, S = its shard; zero.h has the layout):
//   stage 0: everything full (P~)                      + comm: the reduction chunk buffer
//   stage 1: master, adam_m, adam_v: S; the rest full    + comm: the reduction chunk buffer
//   stage 2: also grads: S                              + comm: fp32 gradient buckets (a piece, the globals)
//   stage 3: also the weights: S                        + comm: buckets, and gather buffers (a piece, the globals)
// fp32 runs have no master: the fp32 weights are what the optimizer updates.
// With --fused-ce the globals need no buffers of their own: the table moves
// through the piece buffers a chunk at a time.
void gpt_build(GPT *model, const GPTConfig *cfg, int B, int T, int dtype, int flash, unsigned recompute, int fused_ce,
               int zero, int rank, int nranks) {
    memset(model, 0, sizeof *model);
    model->cfg = *cfg;
    model->dtype = dtype;
    model->flash = flash;
    model->drops = saved_dropped(recompute, flash);
    model->fused_ce = fused_ce;
    model->nparams = param_count(cfg);
    model->shard = shard_layout(model->nparams, zero, rank, nranks);
    const Shard *sh = &model->shard;
    size_t N = (size_t)B * T, C = cfg->channels, e = dtype_size(dtype);
    model->params_base = shard_weights_base(sh);
    model->grads_base = shard_grads_base(sh);
    if (dtype == DT_FP32) {
        // fp32: the weights are their own master; sharded only at stage 3
        model->params = mem_alloc(MEM_PARAMS, shard_weights_len(sh) * sizeof(float), "params");
        model->master_base = model->params_base;
        model->grads = mem_alloc(MEM_GRADS, shard_grads_len(sh) * sizeof(float), "grads");
    } else {
        model->params_lp = mem_alloc(MEM_PARAMS, shard_weights_len(sh) * 2, "params (16-bit)");
        model->params = mem_alloc(MEM_MASTER, shard_state_len(sh) * sizeof(float), "master weights");
        model->master_base = shard_state_base(sh);
        model->grads_lp = mem_alloc(MEM_GRADS, shard_grads_len(sh) * 2, "grads (16-bit)");
    }
    model->dres = mem_alloc(MEM_SCRATCH, N * C * sizeof(float), "dres");
    model->dln = mem_alloc(MEM_SCRATCH, N * C * sizeof(float), "dln");
    model->dqkv = mem_alloc(MEM_SCRATCH, N * 3 * C * sizeof(float), "dqkv");
    model->datty = mem_alloc(MEM_SCRATCH, N * C * sizeof(float), "datty");
    model->dfch = mem_alloc(MEM_SCRATCH, N * 4 * C * sizeof(float), "dfch");
    if (fused_ce) {
        model->head_tile = mem_alloc(MEM_SCRATCH, head_tile_floats(cfg, B, T) * sizeof(float), "logits tile");
        model->head_stats = mem_alloc(MEM_SCRATCH, 2 * N * sizeof(float), "head row stats");
    }
    size_t piece = model->piece = piece_floats(cfg, fused_ce), global = global_param_count(cfg);
    int whole_table = !fused_ce;  // the unfused LM head uses the whole table at once
    if (dtype != DT_FP32) {
        size_t block = block_act_floats(cfg, B, T, flash), final = final_act_floats(cfg, B, T, fused_ce);
        model->x_work = mem_alloc(MEM_SCRATCH, N * C * sizeof(float), "x work");
        model->act_work = mem_alloc(MEM_SCRATCH, (block > final ? block : final) * sizeof(float), "activation work");
        model->w_piece = mem_alloc(MEM_SCRATCH, piece * sizeof(float), "piece weights work");
        if (whole_table) model->w_global = mem_alloc(MEM_SCRATCH, global * sizeof(float), "global weights work");
    }
    // gradient buckets: 16-bit runs collect each piece's fp32 gradients there;
    // stages 2 and 3 reduce-scatter them there (then they are comm buffers)
    model->bucketed = dtype != DT_FP32 || sh->stage >= 2;
    if (model->bucketed) {
        int cat = sh->stage >= 2 ? MEM_COMM : MEM_SCRATCH;
        model->g_piece = mem_alloc(cat, piece * sizeof(float), "piece grads bucket");
        if (whole_table) model->g_global = mem_alloc(cat, global * sizeof(float), "global grads bucket");
    }
    if (sh->nranks > 1 && sh->stage <= 1) {
        size_t k = sh->size < REDUCE_CHUNK ? sh->size : REDUCE_CHUNK;
        model->reduce_buf = mem_alloc(MEM_COMM, (size_t)nranks * k * sizeof(float), "reduce chunk");
    }
    if (sh->stage == 3) {
        model->gather_piece = mem_alloc(MEM_COMM, piece * e, "piece gather");
        if (whole_table) model->gather_global = mem_alloc(MEM_COMM, global * e, "global gather");
    }
    model->acts = calloc(cfg->layers, sizeof(LayerActs));
}

void gpt_free(GPT *model) {
    void *bufs[] = {model->params, model->grads, model->params_lp, model->grads_lp, model->dres, model->dln, model->dqkv, model->datty, model->dfch,
                    model->head_tile, model->head_stats, model->w_piece, model->g_piece, model->gather_piece,
                    model->w_global, model->g_global, model->gather_global, model->x_work, model->act_work,
                    model->reduce_buf};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) mem_free(bufs[i]);
    if (model->eval) quant_free(&model->quant);
    free(model->acts);
}

void gpt_zero_grad(GPT *model) {
    if (model->dtype == DT_FP32) memset(model->grads, 0, shard_grads_len(&model->shard) * sizeof(float));
    else memset(model->grads_lp, 0, shard_grads_len(&model->shard) * 2);
}

// --- --eval-only: a forward-only model ---------------------------------------------
// Evaluation and sampling need the weights, the activations of one forward and
// the buffers each op's weights are read back into; no gradients, no Adam, no
// backward buffers. The arithmetic is fp32 whatever the weights are stored in.

// The layout as quant.h sees it: each tensor's place and whether it is a matrix.
void quant_layout_of(QuantWeights *q, const GPTConfig *c) {
    int n = param_tensor_count(c);
    ParamTensor *pt = malloc(sizeof(ParamTensor) * n);
    QuantTensor *qt = malloc(sizeof(QuantTensor) * n);
    param_tensors(c, pt);
    for (int i = 0; i < n; i++) qt[i] = (QuantTensor){pt[i].offset, pt[i].count, pt[i].is_matrix};
    quant_layout(q, qt, n);
    free(pt);
    free(qt);
}

// Floats in the eval model's piece buffer: the largest piece, rounded up to
// whole blocks of QUANT_BLOCK (the state is read through it a few blocks at a time).
size_t eval_piece_floats(const GPTConfig *c, int fused_ce) {
    return (piece_floats(c, fused_ce) + QUANT_BLOCK - 1) / QUANT_BLOCK * QUANT_BLOCK;
}

// Build the eval model for micro-batches of B x T, its weights held in
// `format` (QF_FP32: the params array; else quant.h's storage). Its forward
// is the training forward with --ckpt's drops: with no backward to come, a
// block keeps only its output (the next block's input) once it has run.
//   weights: params 4P (fp32), or qweights + qscales
//   scratch: w_piece (a piece, fp32), w_global (the whole table, without --fused-ce),
//            --fused-ce's logits tile and row stats
void gpt_build_eval(GPT *model, const GPTConfig *cfg, int B, int T, int flash, int fused_ce, int format) {
    memset(model, 0, sizeof *model);
    model->cfg = *cfg;
    model->eval = 1;
    model->dtype = DT_FP32;
    model->flash = flash;
    model->drops = saved_dropped(REC_BLOCK, flash);  // no backward: each block keeps only its output
    model->fused_ce = fused_ce;
    model->nparams = param_count(cfg);
    model->shard = shard_layout(model->nparams, 0, 0, 1);
    quant_layout_of(&model->quant, cfg);
    if (format == QF_FP32) model->params = mem_alloc(MEM_PARAMS, model->nparams * sizeof(float), "params");
    else quant_alloc(&model->quant, format);
    size_t N = (size_t)B * T;
    model->piece = eval_piece_floats(cfg, fused_ce);
    model->w_piece = mem_alloc(MEM_SCRATCH, model->piece * sizeof(float), "piece weights work");
    if (fused_ce) {
        model->head_tile = mem_alloc(MEM_SCRATCH, head_tile_floats(cfg, B, T) * sizeof(float), "logits tile");
        model->head_stats = mem_alloc(MEM_SCRATCH, 2 * N * sizeof(float), "head row stats");
    } else {
        model->w_global = mem_alloc(MEM_SCRATCH, global_param_count(cfg) * sizeof(float), "global weights work");
    }
    model->acts = calloc(cfg->layers, sizeof(LayerActs));
}

// Does the eval model read its weights back through eval_weights (quantized,
// or from the file) rather than use them where they are (fp32 params)?
int eval_reads_back(const GPT *model) { return model->eval && (model->quant.format != QF_FP32 || model->from_file); }

// The fp32 weights of the flat range [lo, lo + n), from where the eval model
// keeps them: the state file (each piece rounded through file_format as it is
// read, so the comparison rows need no memory of their own) or quant's storage.
void eval_weights(GPT *model, float *dst, size_t lo, size_t n) {
    if (model->from_file) {
        if (fseek(model->from_file, model->file_at + (long)(lo * sizeof(float)), SEEK_SET) != 0 ||
            fread(dst, sizeof(float), n, model->from_file) != n) {
            fprintf(stderr, "error: cannot read the weights back from the state file (was it changed during the run?)\n");
            exit(1);
        }
        quant_round_trip(&model->quant, model->file_format, dst, lo, n);
        return;
    }
    quant_load(&model->quant, dst, lo, n);
}

// Hold the weights [lo, lo + n) (src[0] = parameter lo) as the eval model
// keeps them. 0, or the flat index + 1 of a weight that is inf or nan.
size_t eval_store(GPT *model, const float *src, size_t lo, size_t n) {
    if (model->quant.format != QF_FP32) return quant_store(&model->quant, src, lo, n);
    for (size_t j = 0; j < n; j++)
        if (!isfinite(src[j])) return lo + j + 1;
    memcpy(model->params + lo, src, n * sizeof(float));
    return 0;
}

// The weights the model computes with, in the storage dtype.
void *compute_weights(const GPT *model) { return model->dtype == DT_FP32 ? (void *)model->params : model->params_lp; }

// After the optimizer changed the fp32 weights this rank updates: round them
// into the 16-bit weights (fp32: they are the same array), then, at stages 1
// and 2, all-gather every rank's updated shard into the full weights.
void gpt_sync_params(GPT *model) {
    const Shard *sh = &model->shard;
    if (model->dtype != DT_FP32) {
        size_t lo = sh->stage >= 1 ? sh->own_lo : 0, hi = sh->stage >= 1 ? sh->own_hi : model->nparams;
        dtype_store((uint16_t *)model->params_lp + (lo - model->params_base), model->params + (lo - model->master_base),
                    hi - lo, model->dtype);
    }
    zero_allgather_weights(sh, compute_weights(model), model->dtype);
}

// Initialize the weights (GPT-2 init from the seed) on every rank: each rank
// fills the fp32 weights it keeps (all, or its shard), then gpt_sync_params
// makes the 16-bit copy and, at stages 1 and 2, gathers the full weights.
void gpt_init(GPT *model, uint64_t seed) {
    const Shard *sh = &model->shard;
    int sharded = model->dtype == DT_FP32 ? sh->stage == 3 : sh->stage >= 1;
    init_params_range(model->params, sharded ? sh->own_lo : 0, sharded ? sh->own_hi : model->nparams, &model->cfg, seed);
    gpt_sync_params(model);
}

// The gradients as stored, in the storage dtype (for the norm and the optimizer).
void *gpt_grads(const GPT *model) { return model->dtype == DT_FP32 ? (void *)model->grads : model->grads_lp; }

// Sum of squares of the gradients of all ranks, for the global norm: each rank
// sums the parameters it owns (with one rank: all), added in rank order.
double gpt_grad_sum_squares(const GPT *model) {
    const Shard *sh = &model->shard;
    const char *g = gpt_grads(model);
    size_t at = sh->own_lo - model->grads_base;
    return comm_sum_ordered(sum_squares_dt(g + at * dtype_size(model->dtype), sh->own_hi - sh->own_lo, model->dtype));
}

// --- ZeRO's collectives, at the points of the schedule (zero.h does the work) ----
//   stage 3, before a layer's weights are used (forward, backward, recompute):  gather_weights
//   stages 2, 3, when a layer's (or the globals') backward is done:          reduce_scatter_grads
//   stages 0, 1, after the whole backward:                                   gpt_reduce_grads
//   stages 1, 2, after the optimizer step:                                   gpt_sync_params

// Stage 3: every rank's weights of [lo, hi) into dst (in the storage dtype).
void gather_weights(GPT *model, void *dst, size_t lo, size_t hi) {
    zero_gather(&model->shard, dst, compute_weights(model), model->params_base, lo, hi, model->dtype);
}

// Stages 2, 3: a bucket of fp32 gradients of [lo, hi), summed over the ranks
// into each rank's gradient shard.
void reduce_scatter_grads(GPT *model, float *bucket, size_t lo, size_t hi) {
    zero_reduce_scatter(&model->shard, bucket, lo, hi, gpt_grads(model), model->grads_base, model->dtype);
}

// Stages 0, 1 on several ranks: the full gradients, summed over the ranks.
void gpt_reduce_grads(GPT *model) {
    if (model->shard.nranks > 1 && model->shard.stage <= 1)
        zero_reduce_full(&model->shard, gpt_grads(model), model->reduce_buf, model->dtype);
}

// Are the weights the same on every rank (zero.h)? 1 yes, 0 no.
int gpt_replicas_identical(const GPT *model) {
    return zero_replicas_identical(&model->shard, compute_weights(model), model->dtype);
}

// --- the dtype helpers ---------------------------------------------------------

// --- a piece at a time: where ZeRO's stage 3 gathers and stages 2, 3 reduce ------

// The parameters [lo, lo + n) of the flat array (one piece) as fp32, for the
// op about to run: the stored weights themselves (fp32), or widened into
// w_piece (16-bit). Stage 3 first gathers them from every rank's shard: before
// the op's forward, again before its backward, and before a --ckpt recompute.
// The pointer is good until the next fetch_params. `what` names the piece
// for --trace.
float *fetch_params(GPT *model, size_t lo, size_t n, const char *what) {
    if (eval_reads_back(model)) {
        eval_weights(model, model->w_piece, lo, n);
        return model->w_piece;
    }
    const void *src = model->gather_piece;
    if (model->shard.stage == 3) {
        if (g_ledger.trace) printf("  gather %s: %zu B\n", what, n * dtype_size(model->dtype));
        gather_weights(model, model->gather_piece, lo, lo + n);
    } else {
        src = (const char *)compute_weights(model) + (lo - model->params_base) * dtype_size(model->dtype);
    }
    if (model->dtype == DT_FP32) return (float *)src;
    dtype_load(model->w_piece, src, n, model->dtype);
    return model->w_piece;
}

// Where the backward of the piece [lo, lo + n) accumulates its fp32
// gradients: into the stored fp32 grads, or into the bucket g_piece (zeroed
// here), which grads_params_done hands on.
float *grads_params(GPT *model, size_t lo, size_t n) {
    if (!model->bucketed) return model->grads + (lo - model->grads_base);
    memset(model->g_piece, 0, n * sizeof(float));
    return model->g_piece;
}

// The piece's gradients are complete: stages 2, 3 reduce-scatter them now,
// so no rank ever holds more than a piece of unreduced gradients; 16-bit runs
// at stages 0, 1 add them into the 16-bit grads.
void grads_params_done(GPT *model, size_t lo, size_t n, const char *what) {
    if (!model->bucketed) return;
    if (model->shard.stage >= 2) {
        if (g_ledger.trace) printf("  reduce-scatter %s: %zu B\n", what, n * sizeof(float));
        reduce_scatter_grads(model, model->g_piece, lo, lo + n);
    } else {
        dtype_accumulate((uint16_t *)model->grads_lp + lo, model->g_piece, n, model->dtype);
    }
}

// The three above for op `op` of layer l: its weight and bias go into w's
// (or g's) two fields for that op; the other fields are left as they were
// (and are stale: each op fetches its own just before it runs).
void fetch_op(GPT *model, int l, int op, LayerWeights *w) {
    char what[48] = "";  // --trace names the piece; nothing to format otherwise
    if (g_ledger.trace) snprintf(what, sizeof what, "layer %d %s", l, op_names[op]);
    size_t C = model->cfg.channels, lo = op_param_offset(&model->cfg, l, op);
    set_op_pointers(w, op, fetch_params(model, lo, op_param_count(C, op), what), C);
}

void op_grads(GPT *model, int l, int op, LayerWeights *g) {
    size_t C = model->cfg.channels, lo = op_param_offset(&model->cfg, l, op);
    set_op_pointers(g, op, grads_params(model, lo, op_param_count(C, op)), C);
}

void op_grads_done(GPT *model, int l, int op) {
    char what[48] = "";  // --trace names the piece; nothing to format otherwise
    if (g_ledger.trace) snprintf(what, sizeof what, "layer %d %s", l, op_names[op]);
    size_t C = model->cfg.channels, lo = op_param_offset(&model->cfg, l, op);
    grads_params_done(model, lo, op_param_count(C, op), what);
}

// Where wte, wpe and the final layernorm sit: in an array with the flat
// parameter layout (fp32 runs), or in a working buffer packed as
// [wte | wpe | lnfw lnfb] (16-bit runs).
GlobalWeights globals_in_flat(float *base, const GPTConfig *c) {
    GlobalWeights g = {wte_of(base), wpe_of(base, c), lnf_of(base, c), lnf_of(base, c) + c->channels};
    return g;
}

GlobalWeights globals_in_work(float *work, const GPTConfig *c) {
    float *lnf = work + ((size_t)padded_vocab(c) + c->max_seq) * c->channels;
    GlobalWeights g = {work, work + (size_t)padded_vocab(c) * c->channels, lnf, lnf + c->channels};
    return g;
}

// The embeddings and final layernorm as fp32 (widened into w_global for 16-bit).
GlobalWeights global_weights(GPT *model) {
    const GPTConfig *c = &model->cfg;
    size_t emb = ((size_t)padded_vocab(c) + c->max_seq) * c->channels, lnf = layer_offset(c, c->layers);
    size_t e = dtype_size(model->dtype);
    if (eval_reads_back(model)) {  // [wte | wpe] and lnf, read back
        eval_weights(model, model->w_global, 0, emb);
        eval_weights(model, model->w_global + emb, lnf, 2 * c->channels);
        return globals_in_work(model->w_global, c);
    }
    if (model->shard.stage == 3) {  // gather [wte | wpe] and the final layernorm, packed
        if (g_ledger.trace) printf("  gather embeddings and final layernorm: %zu B\n", global_param_count(c) * e);
        gather_weights(model, model->gather_global, 0, emb);
        gather_weights(model, (char *)model->gather_global + emb * e, lnf, lnf + 2 * c->channels);
        if (model->dtype == DT_FP32) return globals_in_work(model->gather_global, c);
        dtype_load(model->w_global, model->gather_global, global_param_count(c), model->dtype);
        return globals_in_work(model->w_global, c);
    }
    if (model->dtype == DT_FP32) return globals_in_flat(model->params, c);
    dtype_load(model->w_global, model->params_lp, emb, model->dtype);
    dtype_load(model->w_global + emb, (const uint16_t *)model->params_lp + lnf, 2 * c->channels, model->dtype);
    return globals_in_work(model->w_global, c);
}

// Their gradients: the stored fp32 ones, or g_global (zeroed here; added into
// the 16-bit grads by global_grads_done).
GlobalWeights global_grads(GPT *model) {
    if (!model->bucketed) return globals_in_flat(model->grads, &model->cfg);
    memset(model->g_global, 0, global_param_count(&model->cfg) * sizeof(float));
    return globals_in_work(model->g_global, &model->cfg);
}

void global_grads_done(GPT *model) {
    if (!model->bucketed) return;
    const GPTConfig *c = &model->cfg;
    size_t emb = ((size_t)padded_vocab(c) + c->max_seq) * c->channels, lnf = layer_offset(c, c->layers);
    if (model->shard.stage >= 2) {
        if (g_ledger.trace) printf("  reduce-scatter embeddings and final layernorm: %zu B\n",
                                   global_param_count(c) * sizeof(float));
        reduce_scatter_grads(model, model->g_global, 0, emb);
        reduce_scatter_grads(model, model->g_global + emb, lnf, lnf + 2 * c->channels);
        return;
    }
    dtype_accumulate(model->grads_lp, model->g_global, emb, model->dtype);
    dtype_accumulate((uint16_t *)model->grads_lp + lnf, model->g_global + emb, 2 * c->channels, model->dtype);
}

// Is tensor i of `table` stored in fp32 (fp32 runs; the row statistics always)?
int stored_fp32(const GPT *model, const SavedTensor *table, int i) {
    return model->dtype == DT_FP32 || saved_is_row_stat(&table[i], model->flash);
}

// Tensor i of `table` (block_saved or final_saved), for the current B x T.
size_t tensor_count(const GPT *model, const SavedTensor *table, int i) {
    const GPTConfig *c = &model->cfg;
    return saved_count(&table[i], model->B, model->T, c->channels, c->heads, padded_vocab(c), model->flash);
}

// 16-bit runs: where tensor i's fp32 view sits in act_work, after the views
// of the tensors before it that have one. A fixed place per tensor, so the
// backward's rebuilt tensors and reloaded ones land where the forward had them.
float *work_view(GPT *model, const SavedTensor *table, int i) {
    size_t off = 0;
    for (int k = 0; k < i; k++)
        if (!stored_fp32(model, table, k)) off += tensor_count(model, table, k);
    return model->act_work + off;
}

// Push tensor i of `table` on the stack (in the storage dtype; row
// statistics in fp32) and return the fp32 view the ops write: the tensor
// itself, or its place in the working buffer.
float *push_saved(GPT *model, LayerActs *a, const SavedTensor *table, int i) {
    size_t count = tensor_count(model, table, i);
    int fp32 = stored_fp32(model, table, i);
    a->saved[i] = arena_push(saved_name(&table[i], model->flash), count * (fp32 ? 4 : 2));
    a->count[i] = count;
    a->view[i] = fp32 ? a->saved[i] : work_view(model, table, i);
    return a->view[i];
}

// An op has written tensor i's view: round it to the storage dtype, in the
// saved tensor and in the view itself, so the next op reads exactly what the
// backward will. (Stored in fp32, or not being pushed now: nothing to do.)
void round_saved(GPT *model, LayerActs *a, int i) {
    if ((a->pushing & SV_BIT(i)) && a->view[i] != a->saved[i])
        dtype_round_store(a->view[i], a->saved[i], a->count[i], model->dtype);
}

// Widen the first n saved tensors of a that are on the stack back into their
// fp32 views, for the backward.
void load_saved(GPT *model, LayerActs *a, int n) {
    for (int i = 0; i < n; i++)
        if (a->saved[i] && a->view[i] != a->saved[i]) dtype_load(a->view[i], a->saved[i], a->count[i], model->dtype);
}

// The named views of a block's tensors.
void name_views(LayerActs *a, int flash) {
    a->ln1 = a->view[SV_LN1], a->ln1_mean = a->view[SV_LN1_MEAN], a->ln1_rstd = a->view[SV_LN1_RSTD];
    a->qkv = a->view[SV_QKV];
    a->att = flash ? NULL : a->view[SV_ATT];
    a->lse = flash ? a->view[SV_ATT] : NULL;
    a->atty = a->view[SV_ATTY], a->res2 = a->view[SV_RES2];
    a->ln2 = a->view[SV_LN2], a->ln2_mean = a->view[SV_LN2_MEAN], a->ln2_rstd = a->view[SV_LN2_RSTD];
    a->fch = a->view[SV_FCH], a->fch_gelu = a->view[SV_FCH_GELU], a->res3 = a->view[SV_RES3];
}

// The fp32 input of block l: the embedding output or the previous block's
// output; for 16-bit runs, widened from the stack into x_work.
const float *block_input(GPT *model, int l) {
    const void *saved = l == 0 ? model->encoded : model->acts[l - 1].saved[SV_RES3];
    if (model->dtype == DT_FP32) return saved;
    dtype_load(model->x_work, saved, (size_t)model->B * model->T * model->cfg.channels, model->dtype);
    return model->x_work;
}

// --- the blocks -------------------------------------------------------------------

// One transformer block, forward: x (N,C) -> a->res3 (N,C). `push` (SV_BIT()s)
// says which of its 13 tensors to push and compute: all of them in the
// forward; in the backward, the ones --recompute dropped (rebuild_block).
// An op runs when one of its outputs is pushed; the tensors it reads are
// then on the stack already (kept, or rebuilt by an op before it).
void block_forward(GPT *model, int l, const float *x, int B, int T, unsigned push) {
    const GPTConfig *c = &model->cfg;
    int C = c->channels, H = c->heads, N = B * T;
    LayerWeights w;  // each op fetches its own weights just before it runs (fetch_op)
    LayerActs *a = &model->acts[l];
    unsigned all = (1u << SAVED_PER_LAYER) - 1, ln1 = SV_BIT(SV_LN1) | SV_BIT(SV_LN1_MEAN) | SV_BIT(SV_LN1_RSTD);
    unsigned ln2 = SV_BIT(SV_LN2) | SV_BIT(SV_LN2_MEAN) | SV_BIT(SV_LN2_RSTD);
    if (push == all) a->mark = arena_mark();  // the forward; a rebuild pushes on top of the kept tensors
    ledger_where(push == all ? "layer %d forward" : "layer %d rebuild", l);
    a->pushing = push;
    for (int i = 0; i < SAVED_PER_LAYER; i++)
        if (push & SV_BIT(i)) push_saved(model, a, block_saved, i);
    name_views(a, model->flash);

    if (push & ln1) {
        fetch_op(model, l, OP_LN1, &w);
        layernorm_forward(a->ln1, a->ln1_mean, a->ln1_rstd, x, w.ln1w, w.ln1b, N, C);
        round_saved(model, a, SV_LN1);
    }
    if (push & SV_BIT(SV_QKV)) {
        fetch_op(model, l, OP_QKV, &w);
        matmul_forward(a->qkv, a->ln1, w.qkvw, w.qkvb, N, C, 3 * C);
        round_saved(model, a, SV_QKV);
    }
    if (push & (SV_BIT(SV_ATT) | SV_BIT(SV_ATTY))) {
        // rebuilding att alone ("attn"): atty is kept, so the output goes to scratch (dqkv: free until the
        // backward needs it), not over the kept tensor's view
        float *out = push & SV_BIT(SV_ATTY) ? a->atty : model->dqkv;
        if (model->flash) flash_attention_forward(out, a->lse, a->qkv, B, T, C, H);
        else attention_forward(out, a->att, a->qkv, B, T, C, H);
        round_saved(model, a, SV_ATT);
        round_saved(model, a, SV_ATTY);
    }
    if (push & SV_BIT(SV_RES2)) {
        fetch_op(model, l, OP_ATTPROJ, &w);
        matmul_forward(a->res2, a->atty, w.attprojw, w.attprojb, N, C, C);
        residual_forward(a->res2, a->res2, x, (size_t)N * C);              // res2 = x + attn(x)
        round_saved(model, a, SV_RES2);
    }
    if (push & ln2) {
        fetch_op(model, l, OP_LN2, &w);
        layernorm_forward(a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, w.ln2w, w.ln2b, N, C);
        round_saved(model, a, SV_LN2);
    }
    if (push & SV_BIT(SV_FCH)) {
        fetch_op(model, l, OP_FC, &w);
        matmul_forward(a->fch, a->ln2, w.fcw, w.fcb, N, C, 4 * C);
        round_saved(model, a, SV_FCH);
    }
    if (push & SV_BIT(SV_FCH_GELU)) {
        gelu_forward(a->fch_gelu, a->fch, (size_t)N * 4 * C);
        round_saved(model, a, SV_FCH_GELU);
    }
    if (push & SV_BIT(SV_RES3)) {
        fetch_op(model, l, OP_FCPROJ, &w);
        matmul_forward(a->res3, a->fch_gelu, w.fcprojw, w.fcprojb, N, 4 * C, C);
        residual_forward(a->res3, a->res3, a->res2, (size_t)N * C);        // res3 = res2 + mlp(res2)
        round_saved(model, a, SV_RES3);
    }
    a->pushing = 0;
}

// --recompute (and --ckpt, which is "block"), in the forward, after block l
// ran: keep only the tensors it does not drop. The kept ones are copied down
// over the dropped ones, in push order, and everything above them popped; so
// the stack holds, per block, just what the backward cannot cheaply rebuild.
void drop_saved(GPT *model, int l) {
    LayerActs *a = &model->acts[l];
    void *old[SAVED_PER_LAYER];
    memcpy(old, a->saved, sizeof old);
    arena_pop_to(a->mark, "recompute");
    for (int i = 0; i < SAVED_PER_LAYER; i++) {
        if (model->drops & SV_BIT(i)) { a->saved[i] = NULL; continue; }
        int fp32 = stored_fp32(model, block_saved, i);
        size_t bytes = a->count[i] * (fp32 ? 4 : 2);
        a->saved[i] = arena_push(saved_name(&block_saved[i], model->flash), bytes);
        if (a->saved[i] != old[i]) memmove(a->saved[i], old[i], bytes);  // down the stack, over dropped ones
        if (fp32) a->view[i] = a->saved[i];
    }
    name_views(a, model->flash);
}

// In the backward of block l: its output res3 was the next block's input, and
// that block's backward is done, so it is popped first (it is on top); then the
// kept tensors are widened (16-bit runs), and the dropped ones rebuilt from
// them by running their ops again, pushed on the stack until the block's
// backward is done. Bit for bit what the forward computed: the same ops on the
// same inputs.
void rebuild_block(GPT *model, int l, const float *x) {
    LayerActs *a = &model->acts[l];
    ledger_where("layer %d backward", l);
    arena_pop_to(arena_mark() - 1, "output");
    a->saved[SV_RES3] = NULL;
    load_saved(model, a, SAVED_PER_LAYER);
    if (!model->drops) return;
    if (g_ledger.trace) printf("  rebuild layer %d\n", l);
    double t0 = now_seconds();
    block_forward(model, l, x, model->B, model->T, model->drops);
    model->recompute_seconds += now_seconds() - t0;
}

// One transformer block, backward. On entry model->dres holds d(res3); on exit it
// holds d(x). Weight gradients accumulate into the model's gradients.
void block_backward(GPT *model, int l, const float *x, int B, int T) {
    const GPTConfig *c = &model->cfg;
    int C = c->channels, H = c->heads, N = B * T;
    LayerWeights w, g;  // each op's weights and gradient bucket, fetched as its backward starts
    LayerActs *a = &model->acts[l];  // its tensors: on the stack, widened (rebuild_block)
    // res3 = res2 + fcproj(gelu(fc(ln2(res2)))): d(res2) starts as d(res3), kept in dres
    fetch_op(model, l, OP_FCPROJ, &w); op_grads(model, l, OP_FCPROJ, &g);
    matmul_backward(model->dfch, g.fcprojw, g.fcprojb, model->dres, a->fch_gelu, w.fcprojw, N, 4 * C, C);
    op_grads_done(model, l, OP_FCPROJ);
    gelu_backward(model->dfch, a->fch, model->dfch, (size_t)N * 4 * C);
    fetch_op(model, l, OP_FC, &w); op_grads(model, l, OP_FC, &g);
    matmul_backward(model->dln, g.fcw, g.fcb, model->dfch, a->ln2, w.fcw, N, C, 4 * C);
    op_grads_done(model, l, OP_FC);
    fetch_op(model, l, OP_LN2, &w); op_grads(model, l, OP_LN2, &g);
    layernorm_backward(model->dres, g.ln2w, g.ln2b, model->dln, a->res2, w.ln2w, a->ln2_mean, a->ln2_rstd, N, C);
    op_grads_done(model, l, OP_LN2);
    // res2 = x + attproj(attention(qkv(ln1(x)))): d(x) starts as d(res2), kept in dres
    fetch_op(model, l, OP_ATTPROJ, &w); op_grads(model, l, OP_ATTPROJ, &g);
    matmul_backward(model->datty, g.attprojw, g.attprojb, model->dres, a->atty, w.attprojw, N, C, C);
    op_grads_done(model, l, OP_ATTPROJ);
    if (model->flash) flash_attention_backward(model->dqkv, model->datty, a->qkv, a->atty, a->lse, B, T, C, H);
    else attention_backward(model->dqkv, model->datty, a->qkv, a->att, B, T, C, H);
    fetch_op(model, l, OP_QKV, &w); op_grads(model, l, OP_QKV, &g);
    matmul_backward(model->dln, g.qkvw, g.qkvb, model->dqkv, a->ln1, w.qkvw, N, C, 3 * C);
    op_grads_done(model, l, OP_QKV);
    fetch_op(model, l, OP_LN1, &w); op_grads(model, l, OP_LN1, &g);
    layernorm_backward(model->dres, g.ln1w, g.ln1b, model->dln, x, w.ln1w, a->ln1_mean, a->ln1_rstd, N, C);
    op_grads_done(model, l, OP_LN1);
}

// 16-bit runs: the LM head and the loss HEAD_ROWS rows at a time, through the
// fp32 buffer model->logits (HEAD_ROWS x Vp); each chunk's logits (probabilities,
// with targets) are rounded into the saved 16-bit logits. Returns the mean loss.
float head_forward_chunked(GPT *model, const float *lnf, const float *wte, const int *targets, int N) {
    int C = model->cfg.channels, Vp = padded_vocab(&model->cfg);
    double loss = 0.0;
    for (int r0 = 0; r0 < N; r0 += HEAD_ROWS) {
        int rows = N - r0 < HEAD_ROWS ? N - r0 : HEAD_ROWS;
        matmul_forward(model->logits, lnf + (size_t)r0 * C, wte, NULL, rows, C, Vp);
        if (targets) loss += (double)crossentropy_forward(model->logits, targets + r0, rows, model->cfg.vocab, Vp) * rows;
        dtype_round_store(model->logits, (uint16_t *)model->logits_saved + (size_t)r0 * Vp, (size_t)rows * Vp, model->dtype);
    }
    return (float)(loss / N);
}

// --- --fused-ce: the vocabulary a chunk at a time --------------------------------------
// The embedding table [wte | wpe] is Vp + maxT rows of C, from flat index 0. The
// LM head reads its first Vp rows (wte, tied), the lookup all of them. Each
// chunk of VOCAB_CHUNK rows is one piece (fetch_params: gathered at stage 3,
// widened for 16-bit runs), so no buffer ever holds the whole table.

// The rows [r0, r1) of the table: how many chunks, and chunk k's first row.
int table_chunks(int rows) { return (rows + VOCAB_CHUNK - 1) / VOCAB_CHUNK; }

float *fetch_table_rows(GPT *model, int r0, int r1) {
    char what[48] = "";
    if (g_ledger.trace) snprintf(what, sizeof what, "table rows %d..%d", r0, r1 - 1);
    size_t C = model->cfg.channels;
    return fetch_params(model, (size_t)r0 * C, (size_t)(r1 - r0) * C, what);
}

void table_grads_done(GPT *model, int r0, int r1) {
    char what[48] = "";
    if (g_ledger.trace) snprintf(what, sizeof what, "table rows %d..%d", r0, r1 - 1);
    size_t C = model->cfg.channels;
    grads_params_done(model, (size_t)r0 * C, (size_t)(r1 - r0) * C, what);
}

// The lookup, out (N,C) = wte[token] + wpe[position], a chunk of the table at a time.
void embed_forward_chunked(GPT *model, float *out, const int *inp, int B, int T) {
    const GPTConfig *c = &model->cfg;
    int C = c->channels, Vp = padded_vocab(c), rows = Vp + c->max_seq;
    memset(out, 0, sizeof(float) * (size_t)B * T * C);
    for (int k = 0; k < table_chunks(rows); k++) {
        int r0 = k * VOCAB_CHUNK, r1 = r0 + VOCAB_CHUNK < rows ? r0 + VOCAB_CHUNK : rows;
        encoder_forward_chunk(out, inp, fetch_table_rows(model, r0, r1), r0, r1, Vp, B, T, C);
    }
}

// Its backward: d(out) (N,C) into the table's gradient, a chunk at a time,
// each chunk's handed on (reduce-scattered at stages 2, 3) when it is done.
void embed_backward_chunked(GPT *model, const float *dout, const int *inp, int B, int T) {
    const GPTConfig *c = &model->cfg;
    int C = c->channels, Vp = padded_vocab(c), rows = Vp + c->max_seq;
    for (int k = 0; k < table_chunks(rows); k++) {
        int r0 = k * VOCAB_CHUNK, r1 = r0 + VOCAB_CHUNK < rows ? r0 + VOCAB_CHUNK : rows;
        float *g = grads_params(model, (size_t)r0 * C, (size_t)(r1 - r0) * C);
        encoder_backward_chunk(g, dout, inp, r0, r1, Vp, B, T, C);
        table_grads_done(model, r0, r1);
    }
}

// The LM head and the loss without the (N,Vp) logits: the vocabulary a chunk
// of wte at a time (the outer loop, so stage 3 gathers each chunk once), the
// rows HEAD_ROWS at a time (the inner loop), through one tile of logits
// (head_tile, HEAD_ROWS x VOCAB_CHUNK). Each tile updates every row's online
// softmax (ops.h, crossentropy_tile_forward). Leaves each row's log-sum-exp in
// lse (N, fp32) for the backward; returns the mean loss.
// Cost: the backward computes the logits again, 2 N C Vp more FLOPs a step.
float head_forward_fused(GPT *model, const float *lnf, const int *targets, int N, float *lse) {
    const GPTConfig *c = &model->cfg;
    int C = c->channels, Vp = padded_vocab(c);
    float *s = model->head_stats, *z = model->head_stats + N;
    for (int i = 0; i < N; i++) lse[i] = -INFINITY, s[i] = 0.0f, z[i] = 0.0f;
    for (int k = 0; k < table_chunks(Vp); k++) {
        int v0 = k * VOCAB_CHUNK, nv = Vp - v0 < VOCAB_CHUNK ? Vp - v0 : VOCAB_CHUNK;
        const float *w = fetch_table_rows(model, v0, v0 + nv);  // wte rows [v0, v0 + nv): (nv, C)
        for (int r0 = 0; r0 < N; r0 += HEAD_ROWS) {
            int rows = N - r0 < HEAD_ROWS ? N - r0 : HEAD_ROWS;
            matmul_forward(model->head_tile, lnf + (size_t)r0 * C, w, NULL, rows, C, nv);  // (rows, nv)
            crossentropy_tile_forward(model->head_tile, rows, nv, v0, c->vocab, targets + r0, lse + r0, s + r0, z + r0);
        }
    }
    double loss = 0.0;
    for (int i = 0; i < N; i++) {
        lse[i] += logf(s[i]);  // lse = m + log s
        loss += lse[i] - z[i];
    }
    return (float)(loss / N);
}

// Its backward: the same tiles again, each turned into dlogits
// (crossentropy_tile_backward), then
//   d(lnf) rows (N,C)  += dlogits (rows, nv) @ w (nv, C)      (over the chunks)
//   d(w) (nv, C)       += dlogits^T (nv, rows) @ lnf rows (rows, C)
// (matmul_backward's two products, the first one summed over the chunks).
// Each chunk's gradient is handed on as soon as its rows are done.
void head_backward_fused(GPT *model, float *dlnf, const float *lnf, const float *lse, const int *targets, int N,
                         float dloss) {
    const GPTConfig *c = &model->cfg;
    int C = c->channels, Vp = padded_vocab(c);
    for (int k = 0; k < table_chunks(Vp); k++) {
        int v0 = k * VOCAB_CHUNK, nv = Vp - v0 < VOCAB_CHUNK ? Vp - v0 : VOCAB_CHUNK;
        const float *w = fetch_table_rows(model, v0, v0 + nv);
        float *g = grads_params(model, (size_t)v0 * C, (size_t)nv * C);
        for (int r0 = 0; r0 < N; r0 += HEAD_ROWS) {
            int rows = N - r0 < HEAD_ROWS ? N - r0 : HEAD_ROWS;
            float *tile = model->head_tile;
            matmul_forward(tile, lnf + (size_t)r0 * C, w, NULL, rows, C, nv);
            crossentropy_tile_backward(tile, rows, nv, v0, c->vocab, targets + r0, lse + r0, dloss);
            gemm(rows, C, nv, tile, nv, 1, w, C, 1, dlnf + (size_t)r0 * C, C, k > 0);  // the first chunk overwrites
            gemm(nv, C, rows, tile, 1, nv, lnf + (size_t)r0 * C, C, 1, g, C, 1);
        }
        table_grads_done(model, v0, v0 + nv);
    }
}

// Forward pass over tokens inp[B,T]. Leaves the logits (N,Vp) on the stack
// (model->logits is their fp32 view), so the caller can sample from them. With
// targets, turns them into probabilities and returns the mean loss; without,
// returns 0 and leaves raw logits.
float gpt_forward(GPT *model, const int *inp, const int *targets, int B, int T) {
    const GPTConfig *c = &model->cfg;
    int C = c->channels, N = B * T, Vp = padded_vocab(c);
    GlobalWeights gw = {0};
    if (!model->fused_ce) gw = global_weights(model);  // the whole table (stage 3: gathered now)
    model->B = B; model->T = T;
    model->arena_mark = arena_mark();
    ledger_where("embedding", 0);
    model->encoded = arena_push("encoded", (size_t)N * C * dtype_size(model->dtype));
    float *enc = model->dtype == DT_FP32 ? model->encoded : model->x_work;
    if (model->fused_ce) embed_forward_chunked(model, enc, inp, B, T);
    else encoder_forward(enc, inp, gw.wte, gw.wpe, B, T, C);
    dtype_round_store(enc, model->encoded, (size_t)N * C, model->dtype);
    for (int l = 0; l < c->layers; l++) {
        block_forward(model, l, block_input(model, l), B, T, (1u << SAVED_PER_LAYER) - 1);
        if (model->drops) drop_saved(model, l);  // --recompute, --ckpt
    }
    model->block_kept_bytes = arena_bytes(model->acts[0].mark, c->layers > 1 ? model->acts[1].mark : arena_mark());
    const float *x = block_input(model, c->layers);
    LayerActs *f = &model->final;
    ledger_where("final layernorm and LM head", 0);
    f->mark = arena_mark();
    f->pushing = (1u << SAVED_FINAL) - 1;
    float *lnf = push_saved(model, f, final_saved, SV_LNF);
    float *lnf_mean = push_saved(model, f, final_saved, SV_LNF_MEAN);
    float *lnf_rstd = push_saved(model, f, final_saved, SV_LNF_RSTD);
    if (model->fused_ce) {
        const float *p = fetch_params(model, layer_offset(c, c->layers), 2 * (size_t)C, "final layernorm");
        layernorm_forward(lnf, lnf_mean, lnf_rstd, x, p, p + C, N, C);
    } else {
        layernorm_forward(lnf, lnf_mean, lnf_rstd, x, gw.lnfw, gw.lnfb, N, C);
    }
    round_saved(model, f, SV_LNF);
    if (model->fused_ce) {  // no logits: each row's log-sum-exp, in fp32 whatever the dtype
        model->head_lse = arena_push("logits_lse", (size_t)N * sizeof(float));
        return targets ? head_forward_fused(model, lnf, targets, N, model->head_lse) : 0.0f;
    }
    if (model->dtype != DT_FP32) {  // the logits are saved in 16 bits but computed in chunks of rows
        model->logits_saved = arena_push("logits", (size_t)N * Vp * 2);
        model->logits = work_view(model, final_saved, SV_LOGITS);
        return head_forward_chunked(model, lnf, gw.wte, targets, N);
    }
    model->logits = push_saved(model, f, final_saved, SV_LOGITS);
    matmul_forward(model->logits, lnf, gw.wte, NULL, N, C, Vp);  // LM head tied to wte
    if (!targets) return 0.0f;
    return crossentropy_forward(model->logits, targets, N, c->vocab, Vp);
}

// The logits of row i of the last forward pass, fp32 (for sampling). With
// --fused-ce they are computed now, a chunk of wte at a time, into head_tile.
const float *gpt_logits_row(GPT *model, int i) {
    const GPTConfig *c = &model->cfg;
    int C = c->channels, Vp = padded_vocab(c);
    if (model->fused_ce) {
        const float *x = model->final.view[SV_LNF] + (size_t)i * C;
        for (int k = 0; k < table_chunks(Vp); k++) {
            int v0 = k * VOCAB_CHUNK, nv = Vp - v0 < VOCAB_CHUNK ? Vp - v0 : VOCAB_CHUNK;
            matmul_forward(model->head_tile + v0, x, fetch_table_rows(model, v0, v0 + nv), NULL, 1, C, nv);
        }
        return model->head_tile;
    }
    if (model->dtype == DT_FP32) return model->logits + (size_t)i * Vp;
    dtype_load(model->logits, (const uint16_t *)model->logits_saved + (size_t)i * Vp, Vp, model->dtype);
    return model->logits;
}

// Drop the activations of a forward pass without a backward (eval, sampling).
void gpt_discard_activations(GPT *model) { arena_pop_to(model->arena_mark, "forward"); }

// Backward pass for the last gpt_forward (which must have had targets).
// dloss is d(total loss)/d(each row's loss): 1/N for a plain mean (times the
// loss scale with fp16). Accumulates into the gradients and pops the
// activation stack as it goes.
void gpt_backward(GPT *model, const int *inp, const int *targets, float dloss) {
    const GPTConfig *c = &model->cfg;
    int B = model->B, T = model->T, C = c->channels, N = B * T, Vp = padded_vocab(c);
    LayerActs *f = &model->final;
    ledger_where("LM head backward", 0);
    load_saved(model, f, SV_LOGITS);  // lnf and its statistics (the logits: below, a chunk at a time)
    float *lnf = f->view[SV_LNF], *lnf_mean = f->view[SV_LNF_MEAN], *lnf_rstd = f->view[SV_LNF_RSTD];
    GlobalWeights gw = {0}, gg = {0};
    if (model->fused_ce) {
        // the LM head and the loss, a tile at a time: d(lnf) into dln, wte's gradient chunk by chunk
        head_backward_fused(model, model->dln, lnf, model->head_lse, targets, N, dloss);
        size_t lo = layer_offset(c, c->layers), n = 2 * (size_t)C;
        const float *p = fetch_params(model, lo, n, "final layernorm");
        float *g = grads_params(model, lo, n);
        memset(model->dres, 0, sizeof(float) * (size_t)N * C);
        layernorm_backward(model->dres, g, g + C, model->dln, block_input(model, c->layers), p, lnf_mean, lnf_rstd, N, C);
        grads_params_done(model, lo, n, "final layernorm");
    } else {
        gw = global_weights(model), gg = global_grads(model);
        if (model->dtype == DT_FP32) {
            crossentropy_backward(model->logits, targets, N, Vp, dloss);
            matmul_backward(model->dln, gg.wte, NULL, model->logits, lnf, gw.wte, N, C, Vp);
        } else {  // the same, HEAD_ROWS rows at a time (head_forward_chunked)
            for (int r0 = 0; r0 < N; r0 += HEAD_ROWS) {
                int rows = N - r0 < HEAD_ROWS ? N - r0 : HEAD_ROWS;
                dtype_load(model->logits, (const uint16_t *)model->logits_saved + (size_t)r0 * Vp, (size_t)rows * Vp,
                           model->dtype);
                crossentropy_backward(model->logits, targets + r0, rows, Vp, dloss);
                matmul_backward(model->dln + (size_t)r0 * C, gg.wte, NULL, model->logits, lnf + (size_t)r0 * C, gw.wte,
                                rows, C, Vp);
            }
        }
        memset(model->dres, 0, sizeof(float) * (size_t)N * C);
        layernorm_backward(model->dres, gg.lnfw, gg.lnfb, model->dln, block_input(model, c->layers), gw.lnfw, lnf_mean,
                           lnf_rstd, N, C);
    }
    arena_pop_to(f->mark, "final");
    for (int l = c->layers - 1; l >= 0; l--) {
        const float *x = block_input(model, l);
        rebuild_block(model, l, x);  // pop its output; widen what it kept, rebuild what it dropped
        block_backward(model, l, x, B, T);
        arena_pop_to(model->acts[l].mark, "layer");
    }
    ledger_where("embedding backward", 0);
    if (model->fused_ce) {
        embed_backward_chunked(model, model->dres, inp, B, T);
    } else {
        encoder_backward(gg.wte, gg.wpe, model->dres, inp, B, T, C);
        global_grads_done(model);
    }
    arena_pop_to(model->arena_mark, "encoded");
}

#endif
