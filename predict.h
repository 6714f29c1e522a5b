// predict.h — the closed-form memory predictor.
//
// Computes every ledger category, at every phase, from the config alone. It
// never calls the allocator and never builds a model: each number is a
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
#include <string.h>
#include "memory.h"

// What the prediction depends on besides the model shape.
typedef struct {
    int batch, seq_len;
    size_t corpus_bytes;  // the text file is held in memory as bytes
} RunShape;

// P = Vp*C + maxT*C + L*(12C^2 + 13C) + 2C
//   12C^2 per layer: qkv 3C^2 + attproj C^2 + fc 4C^2 + fcproj 4C^2
//   13C per layer:   ln1 2C + qkv bias 3C + attproj bias C + ln2 2C + fc bias 4C + fcproj bias C
//   2C:              the final layernorm
size_t predict_param_count(int L, int C, int Vp, int maxT) {
    return (size_t)Vp * C + (size_t)maxT * C + (size_t)L * (12 * (size_t)C * C + 13 * (size_t)C) + 2 * (size_t)C;
}

// Bytes the forward pass keeps on the activation stack, fp32:
//   encoded                                   N*C
//   per layer (13 tensors): ln1 N*C, ln1 mean+rstd 2N, qkv 3N*C, att B*H*T^2,
//     atty N*C, res2 N*C, ln2 N*C, ln2 mean+rstd 2N, fch 4N*C, fch_gelu 4N*C, res3 N*C
//     = 16*N*C + 4*N + B*H*T^2 floats
//   final: lnf N*C, lnf mean+rstd 2N, logits N*Vp
size_t predict_activation_bytes(int L, int C, int H, int Vp, int B, int T) {
    size_t N = (size_t)B * T;
    size_t per_layer = 16 * N * C + 4 * N + (size_t)B * H * T * T;
    size_t floats = N * C + (size_t)L * per_layer + N * C + 2 * N + N * Vp;
    return floats * 4;
}

// Fill `r` with the predicted ledger for one training run.
void predict_memory(int L, int C, int H, int V, int maxT, const RunShape *s, MemReport *r) {
    memset(r, 0, sizeof *r);
    int Vp = (V + 63) / 64 * 64;
    size_t P = predict_param_count(L, C, Vp, maxT);
    size_t N = (size_t)s->batch * s->seq_len;

    MemSnapshot base;
    memset(&base, 0, sizeof base);
    base.bytes[MEM_PARAMS] = 4 * P;  // fp32 weights
    base.bytes[MEM_GRADS] = 4 * P;   // fp32 gradients
    base.bytes[MEM_ADAM_M] = 4 * P;  // AdamW m and v: 8P together
    base.bytes[MEM_ADAM_V] = 4 * P;
    // backward scratch: dres N*C + dln N*C + dqkv 3N*C + datty N*C + dfch 4N*C = 10 N*C floats
    base.bytes[MEM_SCRATCH] = 4 * 10 * N * C;
    // data: the corpus bytes + inputs and targets, N int32 each
    base.bytes[MEM_DATA] = s->corpus_bytes + 2 * 4 * N;
    for (int c = 0; c < MEM_NCAT; c++) base.total += base.bytes[c];

    size_t act = predict_activation_bytes(L, C, H, Vp, s->batch, s->seq_len);
    for (int ph = 0; ph < MEM_NPHASE; ph++) r->phase[ph] = base;
    // after the forward, every saved tensor is still on the stack;
    // the backward pops them all, so after it (and the step) none are live
    r->phase[PHASE_FORWARD].bytes[MEM_ACTIVATIONS] = act;
    r->phase[PHASE_FORWARD].total += act;

    // every category peaks at its largest phase value; the total peaks after
    // the forward pass, when the whole stack is live
    for (int c = 0; c < MEM_NCAT; c++)
        for (int ph = 0; ph < MEM_NPHASE; ph++)
            if (r->phase[ph].bytes[c] > r->peak[c]) r->peak[c] = r->phase[ph].bytes[c];
    r->peak_total = r->phase[PHASE_FORWARD].total;
}

#endif
