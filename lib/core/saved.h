// core/saved.h — what one transformer block saves for its backward, and what the
// final layernorm and the LM head save: the tensors in push order, with their
// shapes. The CPU model (model.h), the GPU model (gpu/model.h) and the
// predictor (memory/predict.h) all read these tables, so the three cannot disagree
// on what is kept.
#ifndef GPTMEM_SAVED_H
#define GPTMEM_SAVED_H

#include <stddef.h>
#include "core/config.h"

// Shapes, for a micro-batch of N = B*T rows: (N,C) (--sp: (N/t,C), a slice of the rows, as the row statistics); the attention's output (N, H hs): (N,C) but for --tp's
// share of the heads; qkv (N,3C) (Llama: (N, (H + 2 KVH) hs));
// the first MLP matmul's output (N,4C) (Llama: (N,2F), up and gate) and the activation's (N,4C)
// (Llama: (N,F)); one value per row (N: the norms' rstd); the layernorm's mean, one per row (N;
// Llama's RMSNorm keeps none: 0); the attention probabilities (B,H,T,T), or with --flash their row
// log-sum-exp (B,H,T); the logits (N,Vp).
enum { SAVED_NC, SAVED_QKV, SAVED_FC, SAVED_FF, SAVED_ROWS, SAVED_MEAN, SAVED_ATTN, SAVED_LOGITS, SAVED_ATTY };

typedef struct {
    const char *name;
    int shape;
} SavedTensor;

// One block's tensors, in push order (model.h block_forward), and after the
// last block the final layernorm's and the LM head's (gpt_forward).
enum {
    SV_LN1, SV_LN1_MEAN, SV_LN1_RSTD, SV_QKV, SV_ATT, SV_ATTY, SV_RES2, SV_LN2, SV_LN2_MEAN, SV_LN2_RSTD, SV_FCH,
    SV_FCH_GELU, SV_RES3, SAVED_PER_LAYER
};
enum { SV_LNF, SV_LNF_MEAN, SV_LNF_RSTD, SV_LOGITS, SAVED_FINAL };

const SavedTensor block_saved[SAVED_PER_LAYER] = {
    [SV_LN1] = {"ln1", SAVED_NC},           [SV_LN1_MEAN] = {"ln1_mean", SAVED_MEAN},
    [SV_LN1_RSTD] = {"ln1_rstd", SAVED_ROWS}, [SV_QKV] = {"qkv", SAVED_QKV},
    [SV_ATT] = {"att", SAVED_ATTN},         // "lse" with --flash
    [SV_ATTY] = {"atty", SAVED_ATTY},         [SV_RES2] = {"res2", SAVED_NC},
    [SV_LN2] = {"ln2", SAVED_NC},           [SV_LN2_MEAN] = {"ln2_mean", SAVED_MEAN},
    [SV_LN2_RSTD] = {"ln2_rstd", SAVED_ROWS}, [SV_FCH] = {"fch", SAVED_FC},
    [SV_FCH_GELU] = {"fch_gelu", SAVED_FF}, [SV_RES3] = {"res3", SAVED_NC},
};

const SavedTensor final_saved[SAVED_FINAL] = {
    [SV_LNF] = {"lnf", SAVED_NC}, [SV_LNF_MEAN] = {"lnf_mean", SAVED_MEAN}, [SV_LNF_RSTD] = {"lnf_rstd", SAVED_ROWS},
    [SV_LOGITS] = {"logits", SAVED_LOGITS},
};

// The name a tensor is pushed under (the attention entry depends on --flash).
const char *saved_name(const SavedTensor *t, int flash) {
    return t->shape == SAVED_ATTN && flash ? "lse" : t->name;
}

// Its number of elements for a B x T micro-batch of model c.
size_t saved_count(const SavedTensor *t, const GPTConfig *c, size_t B, size_t T, int flash) {
    size_t N = B * T, H = c->heads, n = seq_rows(c, N);  // (--sp: the residual path's n = N/t rows)
    switch (t->shape) {
    case SAVED_NC: return n * c->channels;
    case SAVED_ATTY: return N * attn_width(c);
    case SAVED_QKV: return N * qkv_width(c);
    case SAVED_FC: return N * op_outputs(c, OP_FC);
    case SAVED_FF: return N * cfg_ffn(c);
    case SAVED_ROWS: return n;
    case SAVED_MEAN: return is_llama(c) ? 0 : n;
    case SAVED_ATTN: return flash ? B * H * T : B * H * T * T;
    default: return N * padded_vocab(c);  // SAVED_LOGITS
    }
}

// A row statistic (the norms' mean and rstd, flash's lse): one value per row,
// which the backward recomputes from. Both the CPU and the GPU keep these in
// fp32 whatever the storage dtype: they are O(N) bytes, and a 16-bit lse or
// rstd would spoil every gradient computed from it.
int saved_is_row_stat(const SavedTensor *t, int flash) {
    return t->shape == SAVED_ROWS || t->shape == SAVED_MEAN || (t->shape == SAVED_ATTN && flash);
}

// --recompute: which of a block's tensors each choice drops in the forward
// and rebuilds in the backward (a bit per SV_ index). --ckpt is "block".
enum { REC_GELU = 1 << 0, REC_LN = 1 << 1, REC_ATTN = 1 << 2, REC_MLP = 1 << 3, REC_BLOCK = 1 << 4 };
#define SV_BIT(i) (1u << (i))
#define SV_ALL ((1u << SAVED_PER_LAYER) - 1)  // all of a block's tensors: what its forward computes

typedef struct {
    const char *name;
    unsigned flag;    // REC_*
    unsigned drops;   // SV_BIT()s of the tensors dropped
    const char *what; // for --help and the tables
} RecomputeChoice;

const RecomputeChoice recompute_choices[] = {
    {"gelu", REC_GELU, SV_BIT(SV_FCH_GELU), "the GELU output fch_gelu (N,4C), rebuilt from fch"},
    {"ln", REC_LN, SV_BIT(SV_LN1) | SV_BIT(SV_LN2), "both layernorm outputs ln1, ln2 (N,C), rebuilt from their inputs"},
    {"attn", REC_ATTN, SV_BIT(SV_ATT),
     "the attention probabilities att (B,H,T,T), rebuilt from qkv (Megatron's selective recomputation; "
     "nothing to drop under --flash)"},
    {"mlp", REC_MLP, SV_BIT(SV_LN2) | SV_BIT(SV_FCH) | SV_BIT(SV_FCH_GELU),
     "the MLP's input ln2 and its hidden fch, fch_gelu, rebuilt from res2"},
    {"block", REC_BLOCK, SV_ALL & ~SV_BIT(SV_RES3),
     "every tensor but the block's output res3, the block rerun from its input (--ckpt)"},
};
enum { N_RECOMPUTE_CHOICES = sizeof recompute_choices / sizeof recompute_choices[0] };

// The tensors a block drops for the REC_* choices in `recompute`. Under
// --flash the attention slot holds lse, which only "block" drops.
unsigned saved_dropped(unsigned recompute, int flash) {
    unsigned drops = 0;
    for (int k = 0; k < N_RECOMPUTE_CHOICES; k++)
        if (recompute & recompute_choices[k].flag) drops |= recompute_choices[k].drops;
    if (flash && !(recompute & REC_BLOCK)) drops &= ~SV_BIT(SV_ATT);
    return drops;
}

// --lora: a linear op's input is saved for the op's weight gradient and its adapters' A gradient only
// (the layernorms' backward reads their inputs, not their outputs; GELU's and SwiGLU's read fch). With
// the weight frozen and no adapter on the op, no backward reads it: the block drops it after its forward
// and nothing rebuilds it. `bare` holds a 1 << OP_* for each such op (core/lora.h lora_bare_ops).
// --flash's backward reads atty itself (D = rowsum(d atty * atty)), so attproj's input stays with it.
unsigned saved_unread(unsigned bare, int flash) {
    unsigned u = 0;
    if (bare >> OP_QKV & 1) u |= SV_BIT(SV_LN1);
    if ((bare >> OP_ATTPROJ & 1) && !flash) u |= SV_BIT(SV_ATTY);
    if (bare >> OP_FC & 1) u |= SV_BIT(SV_LN2);
    if (bare >> OP_FCPROJ & 1) u |= SV_BIT(SV_FCH_GELU);
    return u;
}

// Of the tensors --recompute drops, the ones the backward rebuilds: all but the unread ones, unless a
// rebuilt op reads one as its input (--ckpt's rebuild of qkv computes ln1 first, and keeps it).
unsigned saved_rebuilt(unsigned dropped, unsigned unread) {
    unsigned inputs = 0;
    if (dropped & SV_BIT(SV_QKV)) inputs |= SV_BIT(SV_LN1);
    if (dropped & SV_BIT(SV_RES2)) inputs |= SV_BIT(SV_ATTY);
    if (dropped & SV_BIT(SV_FCH)) inputs |= SV_BIT(SV_LN2);
    if (dropped & SV_BIT(SV_RES3)) inputs |= SV_BIT(SV_FCH_GELU);
    return dropped & ~(unread & ~inputs);
}

// A matmul op's forward FLOPs per token: 2 x its inputs x its outputs.
double op_flops_per_token(const GPTConfig *c, int op) { return 2.0 * op_inputs(c, op) * op_outputs(c, op); }

// Extra forward FLOPs per token to rebuild the dropped tensors of one layer
// (matmuls and attention; the norms and the activation are not counted): qkv
// (GPT-2 6C^2; Llama 2C (H + 2 KVH) hs), attention's QK^T and PV 2TC (causal:
// half of 4TC), attproj 2C^2, fc (GPT-2 8C^2; Llama 4CF).
double recompute_flops_per_token_layer(const GPTConfig *c, unsigned drops, int T) {
    double f = 0;
    if (drops & SV_BIT(SV_QKV)) f += op_flops_per_token(c, OP_QKV);
    if (drops & (SV_BIT(SV_ATT) | SV_BIT(SV_ATTY))) f += 2.0 * T * attn_width(c);
    if (drops & SV_BIT(SV_RES2)) f += op_flops_per_token(c, OP_ATTPROJ);
    if (drops & SV_BIT(SV_FCH)) f += op_flops_per_token(c, OP_FC);
    return f;
}

#endif
