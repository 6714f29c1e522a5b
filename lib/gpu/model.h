// gpu/model.h — the model on the GPU (--device cuda): model.h with the
// cu_ ops of cuda/api.h on device memory, GPT-2's or Llama's (RMSNorm, RoPE
// in the qkv step, grouped-query attention, SwiGLU). The same steps, the same block,
// the same model, the same step plan (core/plan.h: ZeRO's pieces, the drops
// of --recompute and --ckpt, --fused-ce's tiles); read side by side with
// model.h, the two differ in the op prefixes, the pointer types and the
// rooms they ask: gpu/weights.h (local, or gathered by ZeRO; no widening: the
// kernels read 16 bits), gpu/storage.h (the stack on the GPU; no rounding:
// the kernels write 16 bits), gpu/head.h (the two ends, the batch's upload);
// and in one line of the block's backward, where the MLP's output and its
// activation are one step (gpu_mlp_out_backward: one GEMM on GPT-2).
//
// This file is C (train.c includes it); the kernels are in cuda/*.cu.
#ifndef GPTMEM_GPU_MODEL_H
#define GPTMEM_GPU_MODEL_H

#include "core/config.h"
#include "core/saved.h"
#include "cuda/api.h"
#include "gpu/gpt.h"
#include "gpu/head.h"
#include "gpu/kvcache.h"
#include "gpu/lora.h"
#include "gpu/optimizer.h"
#include "gpu/storage.h"
#include "gpu/tensor.h"
#include "gpu/weights.h"
#include "memory/ledger.h"

// --- the block's steps: one op each, with its weights and its saved output ----------------
// A step runs when its output is one the block computes now (all of them in
// the forward; the dropped ones when the backward rebuilds them).

// out, mean, rstd (tensors o, o+1, o+2) = layernorm(x) with op `op`'s weight and bias
// (Llama: RMSNorm, out and rstd; no mean, no bias)
void gpu_norm(GpuGPT *m, GpuActs *a, int l, int op, int o, const void *x) {
    if (!(a->pushing & (SV_BIT(o) | SV_BIT(o + 1) | SV_BIT(o + 2)))) return;
    int N = gpu_rows(m), C = m->cfg.channels;  // (--sp: the rank's N/t)
    GpuOpParams w = gpu_op_weights(m, l, op);
    cu_norm_forward_as(is_llama(&m->cfg), m->dtype, a->saved[o], a->saved[o + 1], a->saved[o + 2], x, w.w, w.b, N, C);
}

// out (tensor o) = inp W^T + b with op `op`'s weight and bias (with --lora, + s (inp A^T) B^T for each
// adapter of the op, before RoPE and the residual: gpu/lora.h), plus `residual` if given.
// Llama's qkv: q and k then rotated by their positions (RoPE), as model.h's linear.
// --tp: a row-parallel op's product is this rank's part of the sum, summed over its group (gpu/tensor.h)
// before the bias and the residual (Megatron's g: model.h's linear). --sp: a column-parallel op reads every
// row of its input, gathered from the group's slices, and a row-parallel op's sum is the rank's slice.
void gpu_linear(GpuGPT *m, GpuActs *a, int l, int op, int o, const void *inp, const void *residual) {
    if (!(a->pushing & SV_BIT(o))) return;
    const GPTConfig *c = &m->cfg;
    int N = m->B * m->T, n = gpu_rows(m), C = c->channels, adapted = gpu_lora_adapted(m, op);
    int tp = m->tp.size > 1, summed = tp && tp_row_parallel(op);
    GpuOpParams w = gpu_op_weights(m, l, op);
    void *out = summed && m->tp.sp > 1 ? m->seq_whole : a->saved[o];  // (--sp: the partial sums, every row)
    if (tp && tp_column_parallel(op)) inp = gpu_tp_whole_rows(m, m->seq_whole, inp, (size_t)N, (size_t)C);  // f (--sp)
    // GPT-2's fc with its GELU in the GEMM's epilogue (cuda/api.h cu_matmul_gelu_forward: off unless
    // GPTMEM_GELU_EPI=1), where both tensors are computed now: act is written, gpu_activate has nothing to do
    if (op == OP_FC && !is_llama(c) && !adapted && (a->pushing & SV_BIT(SV_FCH_GELU)) &&
        !cu_matmul_gelu_forward(m->dtype, a->saved[SV_FCH_GELU], out, inp, w.w, w.b, N, C, op_outputs(c, op))) {
        a->pushing &= ~SV_BIT(SV_FCH_GELU);
        return;
    }
    // the residual is added inside the GEMM (cuBLASLt's C with beta 1): rounded once, as model.h's
    // linear rounds once; the qkv step, the one RoPE rotates, has none (--lora: added after the adapters)
    cu_matmul_residual_forward(m->dtype, out, inp, w.w, summed ? NULL : w.b, adapted || summed ? NULL : residual, N,
                               op_inputs(c, op), op_outputs(c, op));
    if (summed) gpu_tp_sum_rows(m, a->saved[o], out, (size_t)N * C), cu_bias_forward(m->dtype, a->saved[o], w.b, n, C);  // g, + b
    if (adapted) gpu_lora_forward(m, l, op, a->saved[o], inp);  // + s (inp A^T) B^T   (--lora)
    if ((adapted || summed) && residual) cu_residual_forward(m->dtype, a->saved[o], a->saved[o], residual, (size_t)n * C);
    if (op == OP_QKV && is_llama(c)) {
        Rope r = cfg_rope(c);
        cu_rope_forward(m->dtype, a->saved[o], N, m->T, m->pos0, (int)qkv_width(c), rope_heads(c), head_size(c),
                        r.theta, r.scaled);
    }
}

// atty = softmax(q k^T / sqrt(hs), causal) v, each head: keeping the
// probabilities att, or with --flash each row's log-sum-exp. Rebuilding att
// alone (--recompute attn) writes atty to scratch, not over the kept tensor.
// A sample's forward attends over the KV cache instead (gpu/kvcache.h: the
// positions before it too).
void gpu_attend(GpuGPT *m, GpuActs *a, int l) {
    if (!(a->pushing & (SV_BIT(SV_ATT) | SV_BIT(SV_ATTY)))) return;
    int B = m->B, T = m->T, C = (int)attn_width(&m->cfg), H = m->cfg.heads, KVH = cfg_kv_heads(&m->cfg);  // (--tp: a share)
    void *out = a->pushing & SV_BIT(SV_ATTY) ? a->atty : m->dqkv;
    if (m->kv.kv) gpu_attend_cached(m, a, l, out);
    else if (m->flash) cu_flash_forward(m->dtype, out, a->lse, a->qkv, B, T, C, H, KVH);
    else cu_attention_forward(m->dtype, out, a->att, a->qkv, B, T, C, H, KVH);
}

// out (tensor o, (N,4C)) = gelu(inp)   (Llama: (N,F) = swiglu(inp (N,2F)), up times silu(gate))
void gpu_activate(GpuGPT *m, GpuActs *a, int o, const void *inp) {
    if (!(a->pushing & SV_BIT(o))) return;
    int N = m->B * m->T, F = cfg_ffn(&m->cfg);
    if (is_llama(&m->cfg)) cu_swiglu_forward(m->dtype, a->saved[o], inp, N, F);
    else cu_gelu_forward(m->dtype, a->saved[o], inp, (size_t)N * F);
}

// Their backward, each beside the forward above:
// dinp = dout W (overwrites); dW += dout^T inp, db += column sums of dout.
// Llama's qkv: dout (dqkv, scratch) is first rotated back in place, RoPE's backward.
// --tp: a column-parallel op's dinp is this rank's part of the sum, summed over the group (Megatron's f;
// --sp: into the rank's slice of dinp's rows). --sp: the input a column-parallel op's weight gradient reads,
// and the output gradient a row-parallel op reads, are gathered again from the slices.
void gpu_linear_backward(GpuGPT *m, int l, int op, void *dinp, void *dout, const void *inp) {
    const GPTConfig *c = &m->cfg;
    int N = m->B * m->T, C = c->channels, tp = m->tp.size > 1;
    GpuOpParams w = gpu_op_weights(m, l, op), g = gpu_op_grads(m, l, op);
    if (op == OP_QKV && is_llama(c)) {
        Rope r = cfg_rope(c);
        cu_rope_backward(m->dtype, dout, N, m->T, m->pos0, (int)qkv_width(c), rope_heads(c), head_size(c), r.theta,
                         r.scaled);
    }
    if (tp && tp_column_parallel(op)) inp = gpu_tp_whole_rows(m, m->seq_whole, inp, (size_t)N, (size_t)C);      // (--sp)
    if (tp && tp_row_parallel(op)) dout = (void *)gpu_tp_whole_rows(m, m->seq_whole, dout, (size_t)N, (size_t)C);  // (--sp)
    cu_matmul_backward(m->dtype, dinp, g.w, g.b, dout, inp, w.w, N, op_inputs(c, op), op_outputs(c, op));
    if (gpu_lora_adapted(m, op)) gpu_lora_backward(m, l, op, dinp, dout, inp);  // dinp += s dout B A; dA, dB (--lora)
    if (tp && tp_column_parallel(op)) gpu_tp_sum_rows(m, dinp, dinp, (size_t)N * op_inputs(c, op));  // f's (--tp)
    gpu_op_grads_done(m, l, op);
}

// dinp += d layernorm(inp); dW, db += ...   (Llama: RMSNorm's; mean unused)
void gpu_norm_backward(GpuGPT *m, int l, int op, void *dinp, const void *dout, const void *inp, const float *mean,
                       const float *rstd) {
    GpuOpParams w = gpu_op_weights(m, l, op), g = gpu_op_grads(m, l, op);
    gpu_norm_backward_rows(m, dinp, g.w, g.b, dout, inp, w.w, mean, rstd);  // (--sp: the weight's gradient summed, gpu/head.h)
    gpu_op_grads_done(m, l, op);
}

// dqkv = d attention (overwrites): from the probabilities (consumed: they
// become the score gradients), or --flash's recompute from lse
void gpu_attend_backward(GpuGPT *m, GpuActs *a, void *dqkv, const void *datty) {
    int B = m->B, T = m->T, C = (int)attn_width(&m->cfg), H = m->cfg.heads, KVH = cfg_kv_heads(&m->cfg);  // (--tp: a share)
    if (m->flash) cu_flash_backward(m->dtype, dqkv, datty, a->qkv, a->atty, a->lse, m->flash_D, B, T, C, H, KVH);
    else cu_attention_backward(m->dtype, dqkv, datty, a->qkv, a->att, B, T, C, H, KVH);
}

// The MLP's output and its activation, backward, where model.h has two steps (linear_backward,
// activate_backward): d(act) = dout Wfcproj, dWfcproj, dbfcproj += ...; then d(fch) = act'(fch) d(act).
// GPT-2: one GEMM, GELU's derivative applied in cuBLASLt's epilogue (d(act) is never written, nor
// read back); Llama: the two steps (SwiGLU's backward widens (N,F) to (N,2F), which no epilogue does).
void gpu_mlp_out_backward(GpuGPT *m, int l, void *dfch, void *dout, const void *act, const void *fch) {
    const GPTConfig *c = &m->cfg;
    int N = m->B * m->T;
    if (is_llama(c)) {
        gpu_linear_backward(m, l, OP_FCPROJ, m->dact, dout, act);     // d(act)            (N,F)
        cu_swiglu_backward(m->dtype, dfch, fch, m->dact, N, cfg_ffn(c));  // d(fch), apart  (N,2F)
        return;
    }
    if (gpu_lora_adapted(m, OP_FCPROJ)) {  // --lora: d(act) has the adapters' part too, then GELU's backward
        gpu_linear_backward(m, l, OP_FCPROJ, dfch, dout, act);            // d(act), in dfch   (N,F)
        cu_gelu_backward(m->dtype, dfch, fch, dfch, (size_t)N * cfg_ffn(c));  // d(fch), in place
        return;
    }
    GpuOpParams w = gpu_op_weights(m, l, OP_FCPROJ), g = gpu_op_grads(m, l, OP_FCPROJ);
    if (m->tp.sp > 1) dout = (void *)gpu_tp_whole_rows(m, m->seq_whole, dout, (size_t)N, (size_t)c->channels);  // (--sp)
    cu_matmul_dgelu_backward(m->dtype, dfch, g.w, g.b, dout, act, w.w, fch, N, op_inputs(c, OP_FCPROJ),
                             op_outputs(c, OP_FCPROJ));
    gpu_op_grads_done(m, l, OP_FCPROJ);
}

// --- the block ---------------------------------------------------------------------------

// One transformer block, forward: x (N,C) -> res3 (N,C). `todo` (SV_BIT()s)
// names the tensors to compute: all in the forward, the plan's rebuilds when the
// backward rebuilds them (gpu_rebuild, below).
void gpu_block_forward(GpuGPT *m, int l, const void *x, unsigned todo) {
    GpuActs *a = gpu_push_block(m, l, todo);
    gpu_norm(m, a, l, OP_LN1, SV_LN1, x);                           // ln1 = norm(x)                 (N,C)   <- 1 Llama
    gpu_linear(m, a, l, OP_QKV, SV_QKV, a->ln1, NULL);              // qkv = ln1 Wqkv^T + b          (N,qkv) <- 2 Llama
    gpu_attend(m, a, l);                                            // atty = attention(q, k, v)     (N,C)
    gpu_linear(m, a, l, OP_ATTPROJ, SV_RES2, a->atty, x);           // res2 = x + atty Wproj^T + b   (N,C)
    gpu_norm(m, a, l, OP_LN2, SV_LN2, a->res2);                     // ln2 = norm(res2)              (N,C)   <- 1 Llama
    gpu_linear(m, a, l, OP_FC, SV_FCH, a->ln2, NULL);               // fch = ln2 Wfc^T + b           (N,F)   Llama (N,2F)
    gpu_activate(m, a, SV_FCH_GELU, a->fch);                        // act = gelu(fch)               (N,F)   <- 3 Llama
    gpu_linear(m, a, l, OP_FCPROJ, SV_RES3, a->fch_gelu, a->res2);  // res3 = res2 + act Wfcproj^T + b (N,C)
    a->pushing = 0;
}

// Its backward: dres holds d(res3) on entry and d(x) on exit.
void gpu_block_backward(GpuGPT *m, int l, const void *x) {
    GpuActs *a = &m->acts[l];
    gpu_mlp_out_backward(m, l, m->dfch, m->dres, a->fch_gelu, a->fch);                   // d(act), d(fch)   (N,F)
    gpu_linear_backward(m, l, OP_FC, m->dln, m->dfch, a->ln2);                           // d(ln2)           (N,C)
    gpu_norm_backward(m, l, OP_LN2, m->dres, m->dln, a->res2, a->ln2_mean, a->ln2_rstd); // d(res2) += ...   (N,C)
    gpu_linear_backward(m, l, OP_ATTPROJ, m->datty, m->dres, a->atty);                   // d(atty)          (N,C)
    gpu_attend_backward(m, a, m->dqkv, m->datty);                                        // d(qkv)           (N,qkv)
    gpu_linear_backward(m, l, OP_QKV, m->dln, m->dqkv, a->ln1);                          // d(ln1)           (N,C)
    gpu_norm_backward(m, l, OP_LN1, m->dres, m->dln, x, a->ln1_mean, a->ln1_rstd);       // d(x) += ...      (N,C)
}

// --ckpt, --recompute: the tensors block l dropped after its forward, computed
// again by the block's own ops on the kept ones (model.h rebuild).
void gpu_rebuild(GpuGPT *m, int l, const void *x) {
    gpu_rebuild_begin(m, l);
    gpu_block_forward(m, l, x, m->plan.rebuilds);  // only the tensors to rebuild: `todo` = the plan's rebuilds
    gpu_rebuild_end(m, l);
}

// --- the model ---------------------------------------------------------------------------

// Forward over tokens inp (B,T) (host memory). Leaves what the backward needs
// on the activation stack. With targets, the mean loss (model.h gpt_forward's
// value) is added into the step's numbers on the GPU.
void gpu_gpt_forward(GpuGPT *m, const int *inp, const int *targets, int B, int T) {
    int L = m->cfg.layers;
    gpu_upload_batch(m, inp, targets, B * T);
    gpu_forward_start(m, B, T);
    gpu_embed_forward(m);                                           // encoded = wte[inp] + wpe (GPT-2)  (N,C)
    for (int l = 0; l < L; l++) {
        gpu_block_forward(m, l, gpu_block_input(m, l), SV_ALL);     // res3 = block(x)                  (N,C)
        gpu_drop_saved(m, l);                                       // keep what the plan keeps
    }
    const void *lnf = gpu_final_norm_forward(m, gpu_block_input(m, L));  // lnf = norm(x)                (N,C)
    gpu_head_forward(m, lnf, targets != NULL);                      // loss = cross-entropy(lnf head^T)  (N,Vp)
}

// Backward for the last gpu_gpt_forward (with targets); dloss as in model.h.
void gpu_gpt_backward(GpuGPT *m, float dloss) {
    gpu_head_backward(m, dloss);   // d(lnf) into dln; wte's gradient
    gpu_final_norm_backward(m);    // d(x) of the last block into dres
    for (int l = m->cfg.layers - 1; l >= 0; l--) {
        const void *x = gpu_block_input(m, l);
        gpu_reload_block(m, l);                    // pop its output
        if (m->plan.rebuilds) gpu_rebuild(m, l, x);   // run its ops again for what it dropped
        gpu_block_backward(m, l, x);               // d(res3) -> d(x), in dres
        gpu_pop_block(m, l);
    }
    gpu_embed_backward(m);         // the table's gradient
}

void gpu_gpt_discard_activations(GpuGPT *m) {
    gpu_head_loss(m);  // (an evaluation's loss, if still due: from the logits, before they go)
    arena_pop_to(m->arena_mark, "forward");
}

#endif
