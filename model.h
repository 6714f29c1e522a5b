// model.h — the GPT model on the CPU, as the lecture's slide: a block is
// its list of ops, the model is the embedding, the blocks, the final
// layernorm and the LM head; forward beside backward, shapes in the comments.
// GPT-2 and Llama 3 (core/config.h) run the same list; Llama differs from
// GPT-2 in three places, each marked "<- n Llama" where it happens (as llm.c's
// train_llama3.py marks them): 1 the norms are RMSNorm (no mean, no bias);
// 2 q and k are rotated by their positions (RoPE) in the qkv step, over KVH
// key-value heads each shared by H / KVH query heads (no position table);
// 3 the activation is SwiGLU (the MLP's hidden is gate and up, 2F) for GELU.
// Widths: hs = C / H, qkv = (H + 2 KVH) hs (GPT-2: 3C), F the MLP's hidden
// (GPT-2: 4C); "+ b" is GPT-2's bias (Llama has none).
//
// The config and the flat parameter layout are core/config.h; what a block
// saves is core/saved.h; the step plan (ZeRO's pieces, the drops of
// --recompute and --ckpt, --fused-ce's tiles) is core/plan.h. The ops are
// cpu/ops.h. Each op of the block goes through a step below that asks the
// rooms where its weights come from (cpu/weights.h: local, gathered by ZeRO,
// widened from 16 bits, read back from a quantized state) and where its output
// goes (cpu/storage.h: kept on the activation stack, rounded to 16 bits,
// dropped and rebuilt); the two ends of the model are cpu/head.h. The GPU
// model, gpu/model.h, is the same file with cu_ ops and device pointers.
//
// Letters: B batch, T sequence length, C channels, H heads, L layers,
// V vocabulary, Vp = V padded to a multiple of 64, N = B*T rows.
#ifndef GPTMEM_MODEL_H
#define GPTMEM_MODEL_H

#include "core/config.h"
#include "core/saved.h"
#include "cpu/gpt.h"
#include "cpu/head.h"
#include "cpu/kvcache.h"
#include "cpu/lora.h"
#include "cpu/ops.h"
#include "cpu/storage.h"
#include "cpu/weights.h"
#include "memory/ledger.h"

// --- the block's steps: one op each, with its weights and its saved output ----------------
// A step runs when its output is one the block computes now (all of them in
// the forward; the dropped ones when the backward rebuilds them, whose inputs
// are then on the stack: kept, or rebuilt by a step before).

// out, mean, rstd (tensors o, o+1, o+2: (N,C), (N), (N)) = layernorm(x) with op `op`'s weight and bias
// (Llama: RMSNorm, out and rstd; no mean, no bias)
void norm(GPT *m, Acts *a, int l, int op, int o, const float *x) {
    if (!(a->pushing & (SV_BIT(o) | SV_BIT(o + 1) | SV_BIT(o + 2)))) return;
    int N = gpt_rows(m), C = m->cfg.channels;  // (--sp: the rank's N/t)
    OpParams w = op_weights(m, l, op);
    norm_forward_as(is_llama(&m->cfg), LLAMA_NORM_EPS, a->view[o], a->view[o + 1], a->view[o + 2], x, w.w, w.b, N, C);
    round_saved(m, a, o);
}

// out (tensor o) = inp W^T + b with op `op`'s weight and bias (with --lora, + s (inp A^T) B^T for each
// adapter of the op, before RoPE and the residual, as PEFT's wraps the nn.Linear), plus `residual` if given.
// Llama's qkv: q and k then rotated by their positions (RoPE), here rather than in attend
// so that the saved qkv is the rotated one and a rebuild of att alone rotates nothing twice.
// --tp: a row-parallel op's product is this rank's part of the sum, summed over its group before the
// bias and the residual (Megatron's g: parallel/tensor.h). --sp: a column-parallel op reads every row of
// its input, gathered from the group's slices (Megatron's f), and a row-parallel op's sum is the rank's
// slice (N/t,C). Without --tp neither runs.
void linear(GPT *m, Acts *a, int l, int op, int o, const float *inp, const float *residual) {
    if (!(a->pushing & SV_BIT(o))) return;
    const GPTConfig *c = &m->cfg;
    int N = m->B * m->T, n = gpt_rows(m), C = c->channels, tp = m->tp.size > 1, summed = tp && tp_row_parallel(op);
    OpParams w = op_weights(m, l, op);
    float *out = summed && m->tp.sp > 1 ? m->seq_whole : a->view[o];  // (--sp: the partial sums, every row)
    if (tp && tp_column_parallel(op)) inp = tp_whole_rows(&m->tp, m->seq_whole, inp, N, C);  // f (--sp: gathered)
    matmul_forward(out, inp, w.w, summed ? NULL : w.b, N, op_inputs(c, op), op_outputs(c, op));
    if (summed) tp_sum_rows(&m->tp, a->view[o], out, (size_t)N * C), bias_forward(a->view[o], w.b, n, C);  // g, + b
    if (gpt_frozen(m)) lora_forward(m, l, op, a->view[o], inp);  // + s (inp A^T) B^T   (--lora: cpu/lora.h)
    if (op == OP_QKV && is_llama(c))
        rope_forward(a->view[o], N, m->T, m->pos0, qkv_width(c), rope_heads(c), head_size(c), cfg_rope(c));
    if (residual) residual_forward(a->view[o], a->view[o], residual, (size_t)n * C);
    round_saved(m, a, o);
}

// atty = softmax(q k^T / sqrt(hs), causal) v, each head: keeping the
// probabilities att (B,H,T,T), or with --flash only each row's log-sum-exp.
// Rebuilding att alone (--recompute attn) writes atty to scratch (dqkv: free
// until the backward needs it), not over the kept tensor. A sample's forward
// attends over the KV cache instead (cpu/kvcache.h: the positions before it too).
void attend(GPT *m, Acts *a, int l) {
    if (!(a->pushing & (SV_BIT(SV_ATT) | SV_BIT(SV_ATTY)))) return;
    int B = m->B, T = m->T;
    float *out = a->pushing & SV_BIT(SV_ATTY) ? a->atty : m->dqkv;
    if (m->kv.kv) attend_cached(m, a, l, out);
    else if (m->flash) flash_attention_forward_heads(out, a->lse, a->qkv, B, T, model_heads(&m->cfg));
    else attention_forward_heads(out, a->att, a->qkv, B, T, model_heads(&m->cfg));
    round_saved(m, a, SV_ATT);
    round_saved(m, a, SV_ATTY);
}

// out (tensor o, (N,4C)) = gelu(inp)   (Llama: (N,F) = swiglu(inp (N,2F)), up times silu(gate))
void activate(GPT *m, Acts *a, int o, const float *inp) {
    if (!(a->pushing & SV_BIT(o))) return;
    int N = m->B * m->T, F = cfg_ffn(&m->cfg);
    if (is_llama(&m->cfg)) swiglu_forward(a->view[o], inp, N, F);
    else gelu_forward(a->view[o], inp, (size_t)N * F);
    round_saved(m, a, o);
}

// Their backward, each beside the forward above:
// dinp = dout W (overwrites); dW += dout^T inp, db += column sums of dout.
// Llama's qkv: dout (dqkv, scratch) is first rotated back in place, RoPE's backward.
// --tp: a column-parallel op's dinp is this rank's part of the sum over the group's rows (Megatron's f),
// summed (--sp: into the rank's slice of dinp's rows). --sp: the input a column-parallel op's weight
// gradient reads, and the output gradient a row-parallel op reads, are gathered again from the slices.
void linear_backward(GPT *m, int l, int op, float *dinp, float *dout, const float *inp) {
    const GPTConfig *c = &m->cfg;
    int N = m->B * m->T, C = c->channels, tp = m->tp.size > 1;
    OpParams w = op_weights(m, l, op), g = op_grads(m, l, op);
    if (op == OP_QKV && is_llama(c))
        rope_backward(dout, N, m->T, m->pos0, qkv_width(c), rope_heads(c), head_size(c), cfg_rope(c));
    if (tp && tp_column_parallel(op)) inp = tp_whole_rows(&m->tp, m->seq_whole, inp, N, C);          // (--sp)
    if (tp && tp_row_parallel(op)) dout = (float *)tp_whole_rows(&m->tp, m->seq_whole, dout, N, C);  // (--sp)
    matmul_backward(dinp, g.w, g.b, dout, inp, w.w, N, op_inputs(c, op), op_outputs(c, op));
    if (gpt_frozen(m)) lora_backward(m, l, op, dinp, dout, inp);  // dinp += s dout B A; dA, dB (--lora)
    if (tp && tp_column_parallel(op)) tp_sum_rows(&m->tp, dinp, dinp, (size_t)N * op_inputs(c, op));  // f's backward
    op_grads_done(m, l, op);
}

// dinp += d layernorm(inp); dW, db += ...   (Llama: RMSNorm's; mean unused)
void norm_backward(GPT *m, int l, int op, float *dinp, const float *dout, const float *inp, const float *mean,
                   const float *rstd) {
    OpParams w = op_weights(m, l, op), g = op_grads(m, l, op);
    norm_backward_rows(m, dinp, g.w, g.b, dout, inp, w.w, mean, rstd);  // (--sp: the weight's gradient summed, cpu/head.h)
    op_grads_done(m, l, op);
}

// dqkv = d attention (overwrites): from the probabilities, or --flash's recompute from lse
void attend_backward(GPT *m, Acts *a, float *dqkv, const float *datty) {
    int B = m->B, T = m->T;
    if (m->flash) flash_attention_backward_heads(dqkv, datty, a->qkv, a->atty, a->lse, B, T, model_heads(&m->cfg));
    else attention_backward_heads(dqkv, datty, a->qkv, a->att, B, T, model_heads(&m->cfg));
}

// dinp = gelu'(inp) dout (GPT-2: dinp may be dout; Llama: swiglu's, dinp (N,2F) apart from dout (N,F))
void activate_backward(GPT *m, float *dinp, const float *inp, const float *dout) {
    int N = m->B * m->T, F = cfg_ffn(&m->cfg);
    if (is_llama(&m->cfg)) swiglu_backward(dinp, inp, dout, N, F);
    else gelu_backward(dinp, inp, dout, (size_t)N * F);
}

// --- the block ---------------------------------------------------------------------------

// One transformer block, forward: x (N,C) -> res3 (N,C). `todo` (SV_BIT()s)
// names the tensors to compute: SV_ALL in the forward, the plan's rebuilds
// when the backward rebuilds them (rebuild, below).
void block_forward(GPT *m, int l, const float *x, unsigned todo) {
    Acts *a = push_block(m, l, todo);
    norm(m, a, l, OP_LN1, SV_LN1, x);                           // ln1 = norm(x)                  (N,C)    <- 1 Llama
    linear(m, a, l, OP_QKV, SV_QKV, a->ln1, NULL);              // qkv = ln1 Wqkv^T + b           (N,qkv)  <- 2 Llama
    attend(m, a, l);                                            // atty = attention(q, k, v)      (N,C)
    linear(m, a, l, OP_ATTPROJ, SV_RES2, a->atty, x);           // res2 = x + atty Wproj^T + b    (N,C)
    norm(m, a, l, OP_LN2, SV_LN2, a->res2);                     // ln2 = norm(res2)               (N,C)    <- 1 Llama
    linear(m, a, l, OP_FC, SV_FCH, a->ln2, NULL);               // fch = ln2 Wfc^T + b            (N,F)    Llama (N,2F)
    activate(m, a, SV_FCH_GELU, a->fch);                        // act = gelu(fch)                (N,F)    <- 3 Llama
    linear(m, a, l, OP_FCPROJ, SV_RES3, a->fch_gelu, a->res2);  // res3 = res2 + act Wfcproj^T + b (N,C)
    a->pushing = 0;
}

// Its backward: dres holds d(res3) on entry and d(x) on exit; the weights'
// gradients go where cpu/weights.h says. The residual stream carries the
// gradient through: d(res2) starts as d(res3), d(x) as d(res2), both in dres.
void block_backward(GPT *m, int l, const float *x) {
    Acts *a = &m->acts[l];
    linear_backward(m, l, OP_FCPROJ, m->dact, m->dres, a->fch_gelu);                 // d(act)               (N,F)
    activate_backward(m, m->dfch, a->fch, m->dact);                                  // d(fch)               (N,F)
    linear_backward(m, l, OP_FC, m->dln, m->dfch, a->ln2);                           // d(ln2)               (N,C)
    norm_backward(m, l, OP_LN2, m->dres, m->dln, a->res2, a->ln2_mean, a->ln2_rstd); // d(res2) += ...       (N,C)
    linear_backward(m, l, OP_ATTPROJ, m->datty, m->dres, a->atty);                   // d(atty)              (N,C)
    attend_backward(m, a, m->dqkv, m->datty);                                        // d(qkv)               (N,qkv)
    linear_backward(m, l, OP_QKV, m->dln, m->dqkv, a->ln1);                          // d(ln1)               (N,C)
    norm_backward(m, l, OP_LN1, m->dres, m->dln, x, a->ln1_mean, a->ln1_rstd);       // d(x) += ...          (N,C)
}

// --ckpt, --recompute: the tensors block l dropped after its forward that its
// backward reads (the plan's rebuilds), computed again by the block's own ops on the tensors it kept. The same
// ops on the same inputs: the same bits. Its time is the step line's "recompute".
void rebuild(GPT *m, int l, const float *x) {
    rebuild_begin(m, l);
    block_forward(m, l, x, m->plan.rebuilds);  // only the tensors to rebuild: `todo` = the plan's rebuilds
    rebuild_end(m, l);
}

// --- the model ---------------------------------------------------------------------------

// Forward over tokens inp (B,T). Leaves what the backward needs on the
// activation stack (and, without --fused-ce, the logits, which sampling
// reads). With targets, returns the mean loss; without, 0.
float gpt_forward(GPT *m, const int *inp, const int *targets, int B, int T) {
    int L = m->cfg.layers;
    forward_start(m, B, T);
    embed_forward(m, inp);                                  // encoded = wte[inp] + wpe (GPT-2)        (N,C)
    for (int l = 0; l < L; l++) {
        block_forward(m, l, block_input(m, l), SV_ALL);     // res3 = block(x)                         (N,C)
        drop_saved(m, l);                                   // keep what the plan keeps (--recompute, --ckpt)
    }
    float *lnf = final_norm_forward(m, block_input(m, L));  // lnf = norm(x)                           (N,C)
    return head_forward(m, lnf, targets);                   // loss = cross-entropy(lnf head^T)        (N,Vp)
}

// Backward for the last gpt_forward (which had targets). dloss is d(total
// loss)/d(each row's loss): 1/N for a plain mean (times the loss scale with
// fp16). Adds into the gradients and pops the activation stack as it goes.
void gpt_backward(GPT *m, const int *inp, const int *targets, float dloss) {
    head_backward(m, targets, dloss);  // d(lnf) into dln; wte's gradient
    final_norm_backward(m);            // d(x) of the last block into dres
    for (int l = m->cfg.layers - 1; l >= 0; l--) {
        const float *x = block_input(m, l);
        reload_block(m, l);                    // pop its output; widen what it kept
        if (m->plan.rebuilds) rebuild(m, l, x);   // run its ops again for what it dropped
        block_backward(m, l, x);               // d(res3) -> d(x), in dres
        pop_block(m, l);
    }
    embed_backward(m, inp);            // the table's gradient
}

// Drop the activations of a forward pass without a backward (eval, sampling).
void gpt_discard_activations(GPT *m) { arena_pop_to(m->arena_mark, "forward"); }

#endif
