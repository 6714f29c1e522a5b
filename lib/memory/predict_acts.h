// memory/predict_acts.h — the predicted half: the activation stack after the forward and at its peak, on
// either device, from core/saved.h's tables and the step plan's drops (memory/predict.h adds it up with the
// rest; memory/predict_stack.h walks it event by event).
#ifndef GPTMEM_PREDICT_ACTS_H
#define GPTMEM_PREDICT_ACTS_H

#include <stddef.h>
#include "core/config.h"
#include "core/dtype.h"
#include "core/plan.h"
#include "core/saved.h"
#include "core/settings.h"
#include "core/sizes.h"

// The activation stack at its two moments that matter: after the forward
// (everything the backward will need is live) and at its peak (the largest it
// ever gets). The tensors are core/saved.h's tables, each stored in the --dtype,
// but the row statistics (layernorm mean and rstd, flash's lse) in fp32:
//   encoded                                   N*C
//   one block, all 13 tensors ("full"): ln1 N*C, ln1 mean+rstd 2N (fp32), qkv 3N*C,
//     attention: att B*H*T^2 (naive) or lse B*H*T (--flash, fp32),
//     atty N*C, res2 N*C, ln2 N*C, ln2 mean+rstd 2N (fp32), fch 4N*C, fch_gelu 4N*C, res3 N*C
//     = 16*N*C + (B*H*T^2) elements in the dtype, + 4N (+ B*H*T) in fp32
//   final: lnf N*C, lnf mean+rstd 2N (fp32), logits N*Vp (--tp: N*Vp/t, a band's, and their lse 4N)
//   (--sp: the residual path's tensors, encoded, ln1, res2, ln2, res3, lnf and the norms' statistics, hold
//   N/t rows each: N*C/t, 2N/t; core/saved.h saved_count)
//     (--fused-ce: no logits, but each row's log-sum-exp, N values in fp32 whatever the dtype:
//     the backward rebuilds the probabilities as exp(logit - lse), which a 16-bit lse would spoil)
// --recompute (--ckpt is its "block") drops some of a block's tensors after
// the block ran; "kept" is what stays, per block. Then (cpu/storage.h drop_saved, model.h rebuild):
//   after forward = encoded + L*kept + final
//   peak = max(after forward, encoded + (L-1)*kept + full)
// The second term is the forward of the last block, all 13 tensors on top of
// the kept ones below it. The backward never goes higher: it pops the final
// tensors, then at block l pops the block's output (the next block's input,
// no longer needed) and rebuilds its dropped tensors, encoded + l*kept +
// full - res3. Without --recompute kept = full, and the peak is after the forward.
typedef struct {
    size_t after_forward, peak;
} ActivationBytes;

// The stack from the bytes of its pieces, on either device.
ActivationBytes stack_of(size_t L, size_t encoded, size_t kept, size_t full, size_t final) {
    ActivationBytes a;
    a.after_forward = encoded + L * kept + final;
    size_t last_block = encoded + (L - 1) * kept + full;
    a.peak = a.after_forward > last_block ? a.after_forward : last_block;
    return a;
}

// A push on the CPU's stack: rounded up to CPU_ACT_ALIGN bytes, so the fp32
// row statistics after a 16-bit tensor of an odd size start aligned.
size_t cpu_act(size_t bytes) { return (bytes + CPU_ACT_ALIGN - 1) / CPU_ACT_ALIGN * CPU_ACT_ALIGN; }

// The bytes of tensor i of a table on the CPU's stack: row statistics in fp32.
size_t saved_bytes(const SavedTensor *t, const Settings *s) {
    size_t e = dtype_size(s->dtype);
    return cpu_act((saved_is_row_stat(t, s->flash) ? 4 : e) * saved_count(t, &s->cfg, s->batch, s->seq_len, s->flash));
}

// The stack's pieces, in bytes: one block's 13 tensors, what a block keeps
// after the forward, the embedding output, the final tensors.
typedef struct {
    size_t full, kept, encoded, final;
} StackParts;

StackParts predict_stack_parts(const Settings *s, const Plan *plan) {
    size_t B = s->batch, T = s->seq_len, e = dtype_size(s->dtype), C = s->cfg.channels, Vp = padded_vocab(&s->cfg);
    StackParts p = {0, 0, cpu_act(e * seq_rows(&s->cfg, B * T) * C), 0};  // (--sp: the encoded slice, N/t rows)
    for (int i = 0; i < SAVED_PER_LAYER; i++) {
        size_t b = saved_bytes(&block_saved[i], s);
        p.full += b;
        if (!(plan->drops & SV_BIT(i))) p.kept += b;
    }
    for (int i = 0; i < SV_LOGITS; i++) p.final += saved_bytes(&final_saved[i], s);
    p.final += plan->tiled_head ? 4 * B * T : e * B * T * Vp;  // the logits' log-sum-exp (fp32), or the logits
    if (!plan->tiled_head && s->cfg.vocab_split > 1) p.final += 4 * B * T;  // (--tp: their band's, and the lse)
    return p;
}

size_t gpu_act(size_t bytes) { return (bytes + GPU_ACT_ALIGN - 1) / GPU_ACT_ALIGN * GPU_ACT_ALIGN; }

size_t gpu_saved_bytes(const SavedTensor *t, const Settings *s) {
    size_t e = dtype_size(s->dtype), per = saved_is_row_stat(t, s->flash) ? 4 : e;
    return gpu_act(per * saved_count(t, &s->cfg, s->batch, s->seq_len, s->flash));
}

ActivationBytes predict_activations(const Settings *s, const Plan *plan) {
    StackParts p = predict_stack_parts(s, plan);
    return stack_of(s->cfg.layers, p.encoded, p.kept, p.full, p.final);
}

// The GPU's activation stack (gpu/storage.h): the same tensors as above and
// the same plan (what a block drops after its forward and rebuilds in its
// backward), with two differences. The row statistics (layernorm mean and
// rstd, flash's lse) are fp32 whatever the dtype, and every tensor starts on
// a 256-byte boundary, so each push is rounded up: A(x) = x rounded up to
// GPU_ACT_ALIGN.
//   one block = A(e N C) [ln1] + 4 A(4N) [ln1, ln2 mean and rstd] + A(3 e N C) [qkv]
//             + A(e B H T^2) [att] or A(4 B H T) [lse] + 4 A(e N C) [atty, res2, ln2, res3]
//             + 2 A(4 e N C) [fch, fch_gelu];  kept: the tensors the plan keeps
//   encoded A(e N C) (--sp: N/t rows, as ln1, res2, ln2, res3, lnf); final A(e N C) + 2 A(4N) + A(e N Vp) [logits] or A(4N) [--fused-ce: lse]
//   after forward = encoded + L*kept + final; peak = max(after forward, encoded + (L-1)*kept + full)
ActivationBytes predict_activations_gpu(const Settings *s, const Plan *p) {
    size_t full = 0, kept = 0, final = 0, e = dtype_size(s->dtype), C = s->cfg.channels, N = (size_t)s->batch * s->seq_len;
    size_t L = s->cfg.layers;
    for (int i = 0; i < SAVED_PER_LAYER; i++) {
        size_t b = gpu_saved_bytes(&block_saved[i], s);
        full += b;
        if (!(p->drops & SV_BIT(i))) kept += b;
    }
    for (int i = 0; i < SV_LOGITS; i++) final += gpu_saved_bytes(&final_saved[i], s);
    final += p->tiled_head ? gpu_act(4 * N) : gpu_saved_bytes(&final_saved[SV_LOGITS], s);
    return stack_of(L, gpu_act(e * seq_rows(&s->cfg, N) * C), kept, full, final);  // (--sp: the encoded slice)
}

#endif
