// cpu/head.h — the two ends of the model on the CPU: the embedding lookup,
// and the final layernorm, the LM head (tied to wte) and the loss; each in
// the way the plan says (core/plan.h):
//   the whole table at once: the logits (N,Vp) kept on the stack (fp32), or
//     computed and kept head_rows rows at a time through an fp32 buffer (16-bit);
//   --fused-ce: the vocabulary a chunk of the table at a time, the rows a tile
//     at a time, each row's softmax kept online, no (N,Vp) logits at all; the
//     lookup and its gradient a chunk of the table at a time too.
#ifndef GPTMEM_CPU_HEAD_H
#define GPTMEM_CPU_HEAD_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "core/dtype.h"
#include "core/plan.h"
#include "core/saved.h"
#include "cpu/gpt.h"
#include "cpu/ops.h"
#include "cpu/storage.h"
#include "cpu/weights.h"
#include "memory/ledger.h"

// The start of a forward over a B x T batch: its mark on the stack and,
// without --fused-ce, the whole table (stage 3: gathered now; it stays until
// the LM head has run).
void forward_start(GPT *m, int B, int T) {
    if (!m->plan.tiled_head) m->globals = global_weights(m);
    m->B = B; m->T = T;
    m->tp.sp = m->cfg.seq_split > 1 && !m->kv.kv ? m->cfg.seq_split : 1;  // (--sp; a sample's forward: every row)
    m->arena_mark = arena_mark();
}

// --tp: the batch's tokens as rows of this rank's band of the vocabulary (parallel/tensor.h), a token of
// another rank's band as none (-1: no row of a table chunk matches it); else the tokens themselves.
static const int *band_tokens(GPT *m, const int *inp) {
    const GPTConfig *c = &m->cfg;
    if (c->vocab_split <= 1) return inp;
    int Vb = padded_vocab(c), first = tp_vocab_first(&m->tp, Vb);
    for (int i = 0; i < m->B * m->T; i++) m->band_tokens[i] = inp[i] >= first && inp[i] < first + Vb ? inp[i] - first : -1;
    return m->band_tokens;
}

// encoded (N,C) = wte[inp] + wpe[pos0 .. pos0+T) (pos0 0 but in a sample's
// forward with the KV cache): pushed on the stack (rounded to the storage
// dtype), computed in x_work for 16-bit runs. --tp: each rank looks up the tokens of its band (the
// positions on the group's first rank alone) and the group sums every row (--sp: into this rank's slice,
// N/t rows, from every row in seq_whole): the one process's bits.
void embed_forward(GPT *m, const int *inp) {
    const GPTConfig *c = &m->cfg;
    int B = m->B, T = m->T, C = c->channels, Vp = padded_vocab(c), rows = embedding_rows(c), split = c->vocab_split > 1;
    size_t N = (size_t)B * T, n = gpt_rows(m), e = dtype_size(m->dtype);
    ledger_where("embedding", 0);
    m->encoded = arena_push("encoded", n * C * e);
    float *own = m->dtype == DT_FP32 ? m->encoded : m->x_work, *enc = m->tp.sp > 1 ? m->seq_whole : own;
    int pos = split && m->tp.rank ? -(1 << 30) : Vp + m->pos0;  // position t's row, pos + t (-2^30: none here)
    if (split) inp = band_tokens(m, inp);
    if (m->plan.tiled_head || split) {  // a chunk of the table at a time (--tp: its band and the positions at once)
        memset(enc, 0, sizeof(float) * N * C);
        for (int k = 0; k < (m->plan.tiled_head ? table_chunks(&m->plan, rows) : 1); k++) {
            Rows r = m->plan.tiled_head ? table_rows(&m->plan, rows, k) : (Rows){0, rows};
            const float *w = m->plan.tiled_head ? table_chunk_weights(m, rows, k) : m->globals.wte;
            encoder_forward_chunk(enc, inp, w, r.lo, r.hi, pos, B, T, C);
        }
    } else {
        const float *wpe = m->globals.wpe ? m->globals.wpe + (size_t)m->pos0 * C : NULL;  // (Llama: none)
        encoder_forward(enc, inp, m->globals.wte, wpe, B, T, C);
    }
    if (split) tp_sum_rows(&m->tp, own, enc, N * C);  // the bands' rows summed (--sp: this rank's rows)
    dtype_round_store(own, m->encoded, n * C, m->dtype);
}

// Its backward: d(encoded) (in dres) into the table's gradient; the globals'
// gradients (the LM head's, the final layernorm's, these) are complete now. --sp: the group's slices
// of d(encoded) gathered first, so every rank adds every row. --tp: each rank into its band's rows (the
// positions' gradient, whole, on every rank).
void embed_backward(GPT *m, const int *inp) {
    const GPTConfig *c = &m->cfg;
    int B = m->B, T = m->T, C = c->channels, Vp = padded_vocab(c), rows = embedding_rows(c), split = c->vocab_split > 1;
    ledger_where("embedding backward", 0);
    const float *dx = m->tp.sp > 1 ? tp_whole_rows(&m->tp, m->seq_whole, m->dres, (size_t)B * T, C) : m->dres;
    if (split) inp = band_tokens(m, inp);
    if (m->plan.tiled_head) {  // a chunk at a time, each handed on (reduce-scattered at stages 2, 3) when done
        for (int k = 0; k < table_chunks(&m->plan, rows); k++) {
            Rows r = table_rows(&m->plan, rows, k);
            float *g = grads_params(m, table_chunk(&m->plan, c, rows, k));
            encoder_backward_chunk(g, dx, inp, r.lo, r.hi, Vp, B, T, C);
            table_chunk_grads_done(m, rows, k);
        }
    } else {
        if (split) encoder_backward_chunk(m->global_grads.wte, dx, inp, 0, rows, Vp, B, T, C);
        else encoder_backward(m->global_grads.wte, m->global_grads.wpe, dx, inp, B, T, C);
        global_grads_done(m);
    }
    arena_pop_to(m->arena_mark, "encoded");
}

// lnf (N,C) = layernorm(x) (Llama: RMSNorm), pushed with its row statistics; returns its fp32 view.
// (--sp: over the rank's slice of the rows, N/t; the head gathers them.)
float *final_norm_forward(GPT *m, const float *x) {
    int N = gpt_rows(m), C = m->cfg.channels;
    Acts *f = &m->final;
    ledger_where("final layernorm and LM head", 0);
    f->mark = arena_mark();
    f->pushing = (1u << SAVED_FINAL) - 1;
    float *lnf = push_saved(m, f, final_saved, SV_LNF);
    float *mean = push_saved(m, f, final_saved, SV_LNF_MEAN), *rstd = push_saved(m, f, final_saved, SV_LNF_RSTD);
    if (m->plan.tiled_head) {
        const float *p = fetch_params(m, lnf_piece(&m->cfg));  // its weight, then (GPT-2) its bias
        norm_forward_as(is_llama(&m->cfg), LLAMA_NORM_EPS, lnf, mean, rstd, x, p, p + C, N, C);
    } else {
        norm_forward_as(is_llama(&m->cfg), LLAMA_NORM_EPS, lnf, mean, rstd, x, m->globals.lnfw, m->globals.lnfb, N, C);
    }
    round_saved(m, f, SV_LNF);
    return lnf;
}

// dinp += d norm(inp) over the rows the rank holds; dw, db += the weight's and the bias's gradients (Llama: no
// bias; NULL: frozen). --sp: those rows are the rank's slice, so the two (C each) are first made apart, in
// seq_whole, summed over the group (every rank then adds the same bits), and then added.
void norm_backward_rows(GPT *m, float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w,
                        const float *mean, const float *rstd) {
    int n = gpt_rows(m), C = m->cfg.channels, llama = is_llama(&m->cfg);
    if (m->tp.sp <= 1 || !dw) {
        norm_backward_as(llama, dinp, dw, db, dout, inp, w, mean, rstd, n, C);
        return;
    }
    float *part = m->seq_whole;  // [dw | db]
    memset(part, 0, sizeof(float) * 2 * C);
    norm_backward_as(llama, dinp, part, db ? part + C : NULL, dout, inp, w, mean, rstd, n, C);
    tp_sum(&m->tp, part, (size_t)(db ? 2 : 1) * C);
    for (int i = 0; i < C; i++) dw[i] += part[i];
    for (int i = 0; db && i < C; i++) db[i] += part[C + i];
}

// Its backward: d(x) (into dres, zeroed first) from d(lnf) (in dln: --sp, the rank's rows); then
// every final tensor leaves the stack.
void final_norm_backward(GPT *m) {
    int C = m->cfg.channels;
    Acts *f = &m->final;
    const float *x = block_input(m, m->cfg.layers), *mean = f->view[SV_LNF_MEAN], *rstd = f->view[SV_LNF_RSTD];
    const float *dlnf = m->dln;
    memset(m->dres, 0, sizeof(float) * (size_t)gpt_rows(m) * C);
    if (m->plan.tiled_head) {
        Piece lnf = lnf_piece(&m->cfg);
        const float *p = fetch_params(m, lnf);
        float *g = grads_params(m, lnf);
        norm_backward_rows(m, m->dres, g, g && !is_llama(&m->cfg) ? g + C : NULL, dlnf, x, p, mean, rstd);
        grads_params_done(m, lnf);
    } else {
        Globals *w = &m->globals, *g = &m->global_grads;
        norm_backward_rows(m, m->dres, g->lnfw, g->lnfb, dlnf, x, w->lnfw, mean, rstd);
    }
    arena_pop_to(f->mark, "final");
}

// --tp: the vocabulary's band this rank's logits are columns of: its first token (0: the whole of it).
static int band_first(const GPT *m) { return tp_vocab_first(&m->tp, padded_vocab(&m->cfg)); }

// Each row's log-sum-exp, lse = m + log s from the running max m (in lse) and sum s, over this rank's
// columns; --tp: over the whole vocabulary, the group's bands combined with their target logits z
// (parallel/tensor.h tp_vocab_lse). Returns the mean loss, lse - z a row.
static float head_rows_loss(GPT *m, float *lse, const float *s, float *z, int N) {
    for (int i = 0; i < N; i++) lse[i] += logf(s[i]);  // lse = m + log s
    if (m->cfg.vocab_split > 1) tp_vocab_lse(&m->tp, lse, z, m->band_lse, N);
    double loss = 0.0;
    for (int i = 0; i < N; i++) loss += lse[i] - z[i];
    return (float)(loss / N);
}

// --fused-ce: the LM head and the loss without the (N,Vp) logits: the
// vocabulary a chunk of the head (wte, or an untied head) at a time (the outer loop, so stage 3 gathers each
// chunk once), the rows head_rows at a time (the inner loop), through one tile
// of logits (head_tile). Each tile updates every row's online softmax
// (cpu/ops.h, crossentropy_tile_forward). Leaves each row's log-sum-exp in lse
// (N, fp32) for the backward; returns the mean loss. Cost: the backward
// computes the logits again, 2 N C Vp more FLOPs a step. (--tp: the chunks of this rank's band.)
float head_forward_tiled(GPT *m, const float *lnf, const int *targets, int N, float *lse) {
    const GPTConfig *c = &m->cfg;
    int C = c->channels, Vp = padded_vocab(c), R = m->plan.head_rows, first = band_first(m);
    float *s = m->head_stats, *z = m->head_stats + N;
    for (int i = 0; i < N; i++) lse[i] = -INFINITY, s[i] = 0.0f, z[i] = 0.0f;
    for (int k = 0; k < table_chunks(&m->plan, Vp); k++) {
        Rows v = table_rows(&m->plan, Vp, k);
        int v0 = first + v.lo, nv = v.hi - v.lo;
        const float *w = head_chunk_weights(m, k);  // the head's rows [v0, v0 + nv): (nv, C)
        for (int r0 = 0; r0 < N && v0 < c->vocab; r0 += R) {  // (a chunk of padding alone: nothing to add)
            int rows = N - r0 < R ? N - r0 : R;
            matmul_forward(m->head_tile, lnf + (size_t)r0 * C, w, NULL, rows, C, nv);  // (rows, nv)
            crossentropy_tile_forward(m->head_tile, rows, nv, v0, c->vocab, targets + r0, lse + r0, s + r0, z + r0);
        }
    }
    return head_rows_loss(m, lse, s, z, N);
}

// Its backward: the same tiles again, each turned into dlogits
// (crossentropy_tile_backward), then
//   d(lnf) rows (N,C)  += dlogits (rows, nv) @ w (nv, C)      (over the chunks)
//   d(w) (nv, C)       += dlogits^T (nv, rows) @ lnf rows (rows, C)
// (matmul_backward's two products, the first one summed over the chunks).
// Each chunk's gradient is handed on as soon as its rows are done.
void head_backward_tiled(GPT *m, float *dlnf, const float *lnf, const float *lse, const int *targets, int N,
                         float dloss) {
    const GPTConfig *c = &m->cfg;
    int C = c->channels, Vp = padded_vocab(c), R = m->plan.head_rows, first = band_first(m);
    for (int k = 0; k < table_chunks(&m->plan, Vp); k++) {
        Rows v = table_rows(&m->plan, Vp, k);
        int v0 = v.lo, nv = v.hi - v.lo;
        const float *w = head_chunk_weights(m, k);
        float *g = grads_params(m, head_chunk(&m->plan, c, k));
        for (int r0 = 0; r0 < N; r0 += R) {
            int rows = N - r0 < R ? N - r0 : R;
            float *tile = m->head_tile;
            matmul_forward(tile, lnf + (size_t)r0 * C, w, NULL, rows, C, nv);
            crossentropy_tile_backward(tile, rows, nv, first + v0, c->vocab, targets + r0, lse + r0, dloss);
            gemm(rows, C, nv, tile, nv, 1, w, C, 1, dlnf + (size_t)r0 * C, C, k > 0);  // the first chunk overwrites
            if (g) gemm(nv, C, rows, tile, 1, nv, lnf + (size_t)r0 * C, C, 1, g, C, 1);  // (frozen: none)
        }
        head_chunk_grads_done(m, k);
    }
}

// 16-bit runs: the LM head and the loss head_rows rows at a time, through the
// fp32 buffer m->logits (head_rows x Vp); each chunk's logits (probabilities,
// with targets) are rounded into the saved 16-bit logits. Returns the mean loss.
// (--tp: the logits rounded, then their band's running sums for head_band_loss.)
float head_forward_rows(GPT *m, const float *lnf, const float *wte, const int *targets, int N) {
    int C = m->cfg.channels, Vp = padded_vocab(&m->cfg), R = m->plan.head_rows, split = m->cfg.vocab_split > 1;
    double loss = 0.0;
    for (int r0 = 0; r0 < N; r0 += R) {
        int rows = N - r0 < R ? N - r0 : R;
        matmul_forward(m->logits, lnf + (size_t)r0 * C, wte, NULL, rows, C, Vp);
        if (targets && !split) loss += (double)crossentropy_forward(m->logits, targets + r0, rows, m->cfg.vocab, Vp) * rows;
        dtype_round_store(m->logits, (uint16_t *)m->logits_saved + (size_t)r0 * Vp, (size_t)rows * Vp, m->dtype);
        if (targets && split && band_first(m) < m->cfg.vocab)
            crossentropy_tile_forward(m->logits, rows, Vp, band_first(m), m->cfg.vocab, targets + r0, m->head_lse + r0,
                                      m->head_stats + r0, m->head_stats + N + r0);
    }
    return (float)(loss / N);
}

// --tp without --fused-ce: the band's logits (N, Vp/t) stay logits, beside each row's log-sum-exp over the
// whole vocabulary (pushed after them, in every forward: the backward's crossentropy_tile_backward turns
// them into dlogits).
// head_stats first start the running sums; the loss once every row's are in (fp32: the logits at once).
static float *band_lse_push(GPT *m, int N) {
    float *lse = m->head_lse = arena_push("logits_lse", (size_t)N * sizeof(float));
    for (int i = 0; i < N; i++) lse[i] = -INFINITY, m->head_stats[i] = 0.0f, m->head_stats[N + i] = 0.0f;
    return lse;
}

// logits (N,Vp) = lnf wte^T (the LM head, tied to wte); with targets, the
// mean cross-entropy loss, the logits turned into probabilities. Without
// --fused-ce the logits stay on the stack (model->logits is their fp32 view:
// sampling reads them); with it, each row's log-sum-exp does. (--sp: the head reads every row of lnf,
// gathered from the group's slices; --tp: the columns of the rank's band, above.)
static float head_forward_loss(GPT *m, const float *lnf, const int *targets) {
    const GPTConfig *c = &m->cfg;
    int N = m->B * m->T, C = c->channels, Vp = padded_vocab(c), split = c->vocab_split > 1;
    if (m->tp.sp > 1) lnf = tp_whole_rows(&m->tp, m->seq_whole, lnf, N, C);
    if (m->plan.tiled_head) {  // no logits: each row's log-sum-exp, in fp32 whatever the dtype
        m->head_lse = arena_push("logits_lse", (size_t)N * sizeof(float));
        return targets ? head_forward_tiled(m, lnf, targets, N, m->head_lse) : 0.0f;
    }
    if (m->dtype != DT_FP32) {  // the logits are saved in 16 bits but computed in chunks of rows
        m->logits_saved = arena_push("logits", (size_t)N * Vp * 2);
        m->logits = work_view(m, final_saved, SV_LOGITS);
        if (split) band_lse_push(m, N);
        float loss = head_forward_rows(m, lnf, m->globals.lm_head, targets, N);
        return split && targets ? head_rows_loss(m, m->head_lse, m->head_stats, m->head_stats + N, N) : loss;
    }
    m->logits = push_saved(m, &m->final, final_saved, SV_LOGITS);
    matmul_forward(m->logits, lnf, m->globals.lm_head, NULL, N, C, Vp);
    float *lse = split ? band_lse_push(m, N) : NULL, *s = m->head_stats, *z = m->head_stats + N;
    if (!targets) return 0.0f;
    if (!split) return crossentropy_forward(m->logits, targets, N, c->vocab, Vp);
    if (band_first(m) < c->vocab) crossentropy_tile_forward(m->logits, N, Vp, band_first(m), c->vocab, targets, lse, s, z);
    return head_rows_loss(m, lse, s, z, N);
}

// ... and the mean loss added into the step's numbers (cpu/optimizer.h
// gpt_read_numbers), as the GPU's head adds it on the GPU.
float head_forward(GPT *m, const float *lnf, const int *targets) {
    float loss = head_forward_loss(m, lnf, targets);
    if (targets) m->numbers.loss_sum += loss;
    return loss;
}

// The logits of `rows` rows from r0 (their fp32 view in m->logits) -> dlogits, in place: the probabilities
// less the target's one, times dloss (--tp: the band's, from the rows' log-sum-exp).
static void head_dlogits(GPT *m, const int *targets, int r0, int rows, float dloss) {
    const GPTConfig *c = &m->cfg;
    int Vp = padded_vocab(c);
    if (c->vocab_split > 1)
        crossentropy_tile_backward(m->logits, rows, Vp, band_first(m), c->vocab, targets + r0, m->head_lse + r0, dloss);
    else crossentropy_backward(m->logits, targets + r0, rows, Vp, dloss);
}

// Its backward: d(lnf) into dln, and wte's gradient (without --fused-ce, into
// the globals' gradients, which the embedding's backward completes). --tp: d(lnf) is this rank's band's
// part, summed over the group (--sp: into the rank's slice of the rows, the final norm's own).
void head_backward(GPT *m, const int *targets, float dloss) {
    const GPTConfig *c = &m->cfg;
    int N = m->B * m->T, C = c->channels, Vp = padded_vocab(c);
    Acts *f = &m->final;
    ledger_where("LM head backward", 0);
    load_saved(m, f, SV_LOGITS);  // lnf and its statistics (the logits: below, a chunk at a time)
    const float *lnf = m->tp.sp > 1 ? tp_whole_rows(&m->tp, m->seq_whole, f->view[SV_LNF], N, C) : f->view[SV_LNF];  // (--sp)
    if (m->plan.tiled_head) {
        head_backward_tiled(m, m->dln, lnf, m->head_lse, targets, N, dloss);
    } else {
        m->globals = global_weights(m), m->global_grads = global_grads(m);
        const float *head = m->globals.lm_head;  // wte, or an untied head
        float *dhead = m->global_grads.lm_head;
        int R = m->dtype == DT_FP32 ? N : m->plan.head_rows;
        for (int r0 = 0; r0 < N; r0 += R) {  // (16 bits: head_rows rows at a time, as head_forward_rows)
            int rows = N - r0 < R ? N - r0 : R;
            if (m->dtype != DT_FP32)
                dtype_load(m->logits, (const uint16_t *)m->logits_saved + (size_t)r0 * Vp, (size_t)rows * Vp, m->dtype);
            head_dlogits(m, targets, r0, rows, dloss);
            matmul_backward(m->dln + (size_t)r0 * C, dhead, NULL, m->logits, lnf + (size_t)r0 * C, head, rows, C, Vp);
        }
    }
    if (c->vocab_split > 1) tp_sum_rows(&m->tp, m->dln, m->dln, (size_t)N * C);  // f's backward (--tp)
}

// The logits of row i of the last forward pass, fp32 (for sampling). With
// --fused-ce they are computed now, a chunk of the head at a time, into head_tile. --tp: the bands' rows
// gathered from the group into logits_row, Vp of the whole vocabulary.
const float *gpt_logits_row(GPT *m, int i) {
    const GPTConfig *c = &m->cfg;
    int C = c->channels, Vp = padded_vocab(c);
    const float *row;
    if (m->plan.tiled_head) {
        const float *x = m->final.view[SV_LNF] + (size_t)i * C;
        for (int k = 0; k < table_chunks(&m->plan, Vp); k++) {
            Rows v = table_rows(&m->plan, Vp, k);
            int v0 = v.lo, nv = v.hi - v.lo;
            matmul_forward(m->head_tile + v0, x, head_chunk_weights(m, k), NULL, 1, C, nv);
        }
        row = m->head_tile;
    } else if (m->dtype == DT_FP32) {
        row = m->logits + (size_t)i * Vp;
    } else {
        dtype_load(m->logits, (const uint16_t *)m->logits_saved + (size_t)i * Vp, Vp, m->dtype);
        row = m->logits;
    }
    if (c->vocab_split <= 1) return row;
    memcpy(m->logits_row + band_first(m), row, sizeof(float) * Vp);
    comm_allgather_block(m->tp.comm, m->logits_row, (long long)Vp * (long long)sizeof(float));
    return m->logits_row;
}

#endif
