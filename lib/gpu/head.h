// gpu/head.h — the two ends of the model on the GPU: cpu/head.h's room with
// the cu_ ops. The embedding lookup, the final norm, the LM head (wte, or an
// untied head) and the loss, the way the plan says:
//   the whole table at once: the logits (N,Vp) kept on the stack, their loss
//     and gradient by the fused softmax + cross-entropy kernels;
//   --fused-ce: the vocabulary a chunk of the table at a time, the rows a tile
//     at a time, each row's softmax kept online (its running max, sum and
//     target logit), no (N,Vp) logits at all; the lookup and its gradient a
//     chunk of the table at a time too.
// The loss stays on the GPU (cu_loss_add into the step's numbers).
#ifndef GPTMEM_GPU_HEAD_H
#define GPTMEM_GPU_HEAD_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "core/dtype.h"
#include "core/plan.h"
#include "core/saved.h"
#include "cuda/api.h"
#include "gpu/gpt.h"
#include "gpu/storage.h"
#include "gpu/tensor.h"
#include "gpu/weights.h"
#include "memory/ledger.h"

// Bucket the positions 0..N-1 by the token they hold, for encoder_backward: a
// counting sort (positions stay in order within a token: deterministic).
// out = [pos (N) | start (N+1) | tok (N)]: bucket u holds token tok[u] at the
// positions pos[start[u] .. start[u+1]). The buckets come largest first (ties:
// the smaller token first), so a GPU starts a frequent token's long chain of
// additions before the short ones rather than after them; each bucket's sum is
// its own, so the order changes no bits. count: Vp ints of scratch. Returns
// the number of buckets.
int bucket_tokens(const int *inp, int N, int Vp, int *out, int *count) {
    int *pos = out, *start = pos + N, *tok = start + N + 1;
    memset(count, 0, sizeof(int) * Vp);
    for (int i = 0; i < N; i++) count[inp[i]]++;
    // the tokens by their count, largest first (a counting sort over counts 1..N; start is its scratch)
    memset(start, 0, sizeof(int) * (N + 1));
    for (int v = 0; v < Vp; v++) start[count[v]]++;
    int u = 0;
    for (int k = N; k >= 1; k--) {  // start[k]: where the first token seen N times goes
        int n = start[k];
        start[k] = u;
        u += n;
    }
    for (int v = 0; v < Vp; v++)
        if (count[v]) tok[start[count[v]]++] = v;
    int acc = 0;
    for (int b = 0; b < u; b++) {
        start[b] = acc;
        acc += count[tok[b]];
        count[tok[b]] = start[b];  // from now on: where this token's next position goes
    }
    start[u] = acc;
    for (int i = 0; i < N; i++) pos[count[inp[i]]++] = i;
    return u;
}

// Either norm, as the model's config says (cpu/ops.h norm_forward_as): layernorm (out, mean, rstd;
// weight w and bias b) or, with rms, RMSNorm (Llama's: out and rstd, w alone; mean and b unused).
// The backward likewise.
void cu_norm_forward_as(int rms, int dt, void *out, float *mean, float *rstd, const void *x, const void *w,
                        const void *b, int N, int C) {
    if (rms) cu_rmsnorm_forward(dt, out, rstd, x, w, N, C);
    else cu_layernorm_forward(dt, out, mean, rstd, x, w, b, N, C);
}
void cu_norm_backward_as(int rms, int dt, void *dinp, void *dw, void *db, const void *dout, const void *x,
                         const void *w, const float *mean, const float *rstd, int N, int C) {
    if (rms) cu_rmsnorm_backward(dt, dinp, dw, dout, x, w, rstd, N, C);
    else cu_layernorm_backward(dt, dinp, dw, db, dout, x, w, mean, rstd, N, C);
}

// dinp += d norm(inp) over the rows the rank holds; dw, db += the weight's and the bias's gradients (NULL:
// frozen). --sp: those rows are the rank's slice, so the two are first made apart, in seq_whole, summed
// over the group, and then added (cpu/head.h norm_backward_rows).
void gpu_norm_backward_rows(GpuGPT *m, void *dinp, void *dw, void *db, const void *dout, const void *x, const void *w,
                            const float *mean, const float *rstd) {
    int n = gpu_rows(m), C = m->cfg.channels, dt = m->dtype, rms = is_llama(&m->cfg);
    if (m->tp.sp <= 1 || !dw) {
        cu_norm_backward_as(rms, dt, dinp, dw, db, dout, x, w, mean, rstd, n, C);
        return;
    }
    void *part = m->seq_whole, *part_b = db ? element(m, part, C) : NULL;  // [dw | db]
    gpu_zero(part, 2 * (size_t)C * m->elem_bytes);
    cu_norm_backward_as(rms, dt, dinp, part, part_b, dout, x, w, mean, rstd, n, C);
    gpu_tp_sum(m, part, (size_t)(db ? 2 : 1) * C);
    cu_residual_forward(dt, dw, dw, part, C);
    if (db) cu_residual_forward(dt, db, db, part_b, C);
}

// Upload a token batch; with targets (training), also its token buckets. The
// copies queue behind the work already there (the last micro-batch's backward
// still reads the device buffers they overwrite), from page-locked memory, so
// the host does not wait: it fills the two host buffers in turn, and before it
// refills one it waits for the event recorded after that buffer's uploads (two
// micro-batches ago: long done). All the host's work (the bucketing) comes
// before the first upload.
void gpu_upload_batch(GpuGPT *m, const int *inp, const int *targets, int N) {
    int k = m->batch_turn, *h = m->batch_host[k];
    m->batch_turn ^= 1;
    if (m->batch_sent[k]) gpu_event_wait(m->batch_event[k]);
    memcpy(h, inp, (size_t)N * 4);
    if (targets) {  // (--tp: each target counted from this rank's band of the vocabulary, its first token 0)
        int first = tp_vocab_first(&m->tp, padded_vocab(&m->cfg));
        for (int i = 0; i < N; i++) h[N + i] = targets[i] - first;
        m->nbuckets = bucket_tokens(inp, N, padded_vocab(&m->tp.whole), h + 2 * N, m->token_count_host);
    }
    gpu_upload_queued(m->inputs, h, (size_t)N * 4);
    if (targets) {
        gpu_upload_queued(m->targets, h + N, (size_t)N * 4);
        gpu_upload_queued(m->buckets, h + 2 * N, (size_t)(3 * N + 1) * 4);
    }
    gpu_event_record(m->batch_event[k]);
    m->batch_sent[k] = 1;
}

// The start of a forward over a B x T batch: its mark on the stack and,
// without --fused-ce, the whole table (stage 3: gathered now; it stays until
// the LM head has run).
void gpu_forward_start(GpuGPT *m, int B, int T) {
    if (!m->plan.tiled_head) m->globals = gpu_global_weights(m);
    m->B = B; m->T = T;
    m->tp.sp = m->cfg.seq_split > 1 && !m->kv.kv ? m->cfg.seq_split : 1;  // (--sp; a sample's forward: every row)
    m->arena_mark = arena_mark();
}

// Rows [lo, hi) of the table (w: row lo) added into out for each position's token and its position,
// and their backward (cu_encoder_*_chunk: a token's row is the token, position t's `at` + t). --tp: the
// share's table is the band's Vb rows, then (GPT-2) the positions'; the GPU's tokens are the whole
// vocabulary's, so a chunk is its band part (tokens first + j) and its positions part (rows Vw + t past
// the whole vocabulary's Vw, which no token reaches), the positions added by the group's first rank alone
// and their gradient, whole, on every rank.
static void gpu_lookup_chunk(GpuGPT *m, void *out, const void *w, int lo, int hi) {
    int Vb = padded_vocab(&m->cfg), first = tp_vocab_first(&m->tp, Vb), Vw = padded_vocab(&m->tp.whole);
    int B = m->B, T = m->T, C = m->cfg.channels, dt = m->dtype, at = m->tp.rank ? -(1 << 30) : Vw + m->pos0, mid;
    if (m->tp.size <= 1) {
        cu_encoder_forward_chunk(dt, out, m->inputs, w, lo, hi, Vb + m->pos0, B, T, C);
        return;
    }
    mid = hi < Vb ? hi : Vb;
    if (lo < mid) cu_encoder_forward_chunk(dt, out, m->inputs, w, first + lo, first + mid, at, B, T, C);
    mid = lo > Vb ? lo : Vb;
    if (mid < hi) cu_encoder_forward_chunk(dt, out, m->inputs, element(m, (void *)w, (size_t)(mid - lo) * C),
                                           Vw + mid - Vb, Vw + hi - Vb, at, B, T, C);
}

static void gpu_lookup_chunk_backward(GpuGPT *m, void *g, const void *dx, int lo, int hi) {
    int Vb = padded_vocab(&m->cfg), first = tp_vocab_first(&m->tp, Vb), Vw = padded_vocab(&m->tp.whole);
    int B = m->B, T = m->T, C = m->cfg.channels, dt = m->dtype, N = B * T, mid;
    int *pos = m->buckets, *start = pos + N, *tok = start + N + 1, u = m->nbuckets;
    if (m->tp.size <= 1) {
        cu_encoder_backward_chunk(dt, g, dx, pos, start, tok, u, lo, hi, Vb, B, T, C);
        return;
    }
    mid = hi < Vb ? hi : Vb;
    if (lo < mid) cu_encoder_backward_chunk(dt, g, dx, pos, start, tok, u, first + lo, first + mid, Vw, B, T, C);
    mid = lo > Vb ? lo : Vb;
    if (mid < hi) cu_encoder_backward_chunk(dt, element(m, g, (size_t)(mid - lo) * C), dx, pos, start, tok, u,
                                            Vw + mid - Vb, Vw + hi - Vb, Vw, B, T, C);
}

// encoded (N,C) = wte[inp] + wpe[pos0 .. pos0+T) (pos0 0 but in a sample's
// forward with the KV cache; Llama: wte[inp] alone), pushed on the stack: the whole table at once, or
// (--fused-ce) a chunk of it at a time. --tp: the group sums its bands' rows (--sp: into this rank's
// slice, N/t rows, from every row in seq_whole).
void gpu_embed_forward(GpuGPT *m) {
    const GPTConfig *c = &m->cfg;
    int B = m->B, T = m->T, C = c->channels, rows = embedding_rows(c), tiled = m->plan.tiled_head, split = m->tp.size > 1;
    ledger_where("embedding", 0);
    m->encoded = arena_push("encoded", (size_t)gpu_rows(m) * C * m->elem_bytes);
    if (!tiled && !split) {
        const void *wpe = m->globals.wpe ? element(m, m->globals.wpe, (size_t)m->pos0 * C) : NULL;
        cu_encoder_forward(m->dtype, m->encoded, m->inputs, m->globals.wte, wpe, B, T, C);
        return;
    }
    void *enc = m->tp.sp > 1 ? m->seq_whole : m->encoded;
    gpu_zero(enc, (size_t)B * T * C * m->elem_bytes);
    for (int k = 0; k < (tiled ? table_chunks(&m->plan, rows) : 1); k++) {
        Rows r = tiled ? table_rows(&m->plan, rows, k) : (Rows){0, rows};
        gpu_lookup_chunk(m, enc, tiled ? gpu_table_chunk_weights(m, rows, k) : m->globals.wte, r.lo, r.hi);
    }
    if (split) gpu_tp_sum_rows(m, m->encoded, enc, (size_t)B * T * C);  // the bands' rows summed
}

// Its backward: d(encoded) (in dres) into the table's gradient; the globals'
// gradients (the LM head's, the final layernorm's, these) are complete now; with --fused-ce a chunk at a
// time, each handed on (reduce-scattered at stages 2, 3) when done. (--sp: the group's slices of
// d(encoded) gathered first, so every rank adds every row.)
void gpu_embed_backward(GpuGPT *m) {
    const GPTConfig *c = &m->cfg;
    int B = m->B, T = m->T, C = c->channels, rows = embedding_rows(c), N = B * T, tiled = m->plan.tiled_head;
    int *pos = m->buckets, *start = pos + N, *tok = start + N + 1;
    ledger_where("embedding backward", 0);
    if (gpu_frozen(m)) {  // --lora: the table is frozen, nothing to add into
    } else if (!tiled && m->tp.size <= 1) {
        cu_encoder_backward(m->dtype, m->global_grads.wte, m->global_grads.wpe, m->dres, pos, start, tok, m->nbuckets, B,
                            T, C);
        gpu_global_grads_done(m);
    } else {
        const void *dx = gpu_tp_whole_rows(m, m->seq_whole, m->dres, (size_t)N, (size_t)C);
        for (int k = 0; k < (tiled ? table_chunks(&m->plan, rows) : 1); k++) {
            Rows r = tiled ? table_rows(&m->plan, rows, k) : (Rows){0, rows};
            gpu_lookup_chunk_backward(m, tiled ? gpu_grads_params(m, table_chunk(&m->plan, c, rows, k)) : m->global_grads.wte,
                                      dx, r.lo, r.hi);
            if (tiled) gpu_table_chunk_grads_done(m, rows, k);
        }
        if (!tiled) gpu_global_grads_done(m);
    }
    arena_pop_to(m->arena_mark, "encoded");
}

// lnf (N,C) = layernorm(x) (Llama: RMSNorm), pushed with its row statistics (fp32). (--sp: over the
// rank's slice of the rows, N/t; the head gathers them.)
void *gpu_final_norm_forward(GpuGPT *m, const void *x) {
    int N = gpu_rows(m), C = m->cfg.channels, dt = m->dtype, rms = is_llama(&m->cfg);
    ledger_where("final layernorm and LM head", 0);
    m->final_mark = arena_mark();
    m->lnf = gpu_push_saved(m, &final_saved[SV_LNF]);
    m->lnf_mean = gpu_push_saved(m, &final_saved[SV_LNF_MEAN]);
    m->lnf_rstd = gpu_push_saved(m, &final_saved[SV_LNF_RSTD]);
    if (m->plan.tiled_head) {
        void *p = gpu_fetch_params(m, lnf_piece(&m->cfg));  // its weight, then (GPT-2) its bias
        cu_norm_forward_as(rms, dt, m->lnf, m->lnf_mean, m->lnf_rstd, x, p, element(m, p, C), N, C);
    } else {
        cu_norm_forward_as(rms, dt, m->lnf, m->lnf_mean, m->lnf_rstd, x, m->globals.lnfw, m->globals.lnfb, N, C);
    }
    return m->lnf;
}

// Its backward: d(x) (into dres, zeroed first) from d(lnf) (in dln: --sp, the rank's rows); then
// every final tensor leaves the stack.
void gpu_final_norm_backward(GpuGPT *m) {
    int N = gpu_rows(m), C = m->cfg.channels, rms = is_llama(&m->cfg);
    const void *x = gpu_block_input(m, m->cfg.layers);
    gpu_zero(m->dres, (size_t)N * C * m->elem_bytes);
    if (m->plan.tiled_head) {
        Piece lnf = lnf_piece(&m->cfg);
        void *p = gpu_fetch_params(m, lnf), *g = gpu_grads_params(m, lnf);  // (--lora: g NULL, frozen)
        gpu_norm_backward_rows(m, m->dres, g, g && !rms ? element(m, g, C) : NULL, m->dln, x, p, m->lnf_mean, m->lnf_rstd);
        gpu_grads_params_done(m, lnf);
    } else {
        gpu_norm_backward_rows(m, m->dres, m->global_grads.lnfw, m->global_grads.lnfb, m->dln, x, m->globals.lnfw,
                               m->lnf_mean, m->lnf_rstd);
    }
    arena_pop_to(m->final_mark, "final");
}

// The mean cross-entropy loss of the logits on the stack, added into the step's numbers on the GPU (no wait
// here), if it is still due. With GPTMEM_CE_FUSED=1 a forward leaves it due: a training step's backward
// computes it and the logits' gradient in one read of the logits (cu_crossentropy_fused, llm.c's fused
// classifier), and a forward with no backward after it (an evaluation) computes it here, when its
// activations go (gpu_gpt_discard_activations) or the step's numbers are read.
void gpu_head_loss(GpuGPT *m) {
    if (!m->loss_due) return;
    int N = m->B * m->T;
    cu_crossentropy_forward(m->dtype, m->losses, m->logits, m->targets, N, m->cfg.vocab, padded_vocab(&m->cfg));
    cu_loss_add(m->numbers, m->losses, N);
    m->loss_due = 0;
}

// logits (N,Vp) = lnf head^T (the head: wte, or an untied one) and, with targets, the mean cross-entropy loss,
// added into the step's numbers on the GPU (cu_loss_add). Without --fused-ce
// the logits stay on the stack (sampling reads them); with it, each row's
// log-sum-exp does, the vocabulary a chunk of the head at a time (the outer loop,
// so stage 3 gathers each chunk once), the rows head_rows at a time. (--sp: the head reads every row of
// lnf, gathered from the group's slices.)
void gpu_head_forward(GpuGPT *m, const void *lnf, int has_targets) {
    const GPTConfig *c = &m->cfg;
    int N = m->B * m->T, C = c->channels, Vp = padded_vocab(c), R = m->plan.head_rows, dt = m->dtype;
    if (m->tp.sp > 1) lnf = gpu_tp_whole_rows(m, m->seq_whole, lnf, (size_t)N, (size_t)C);
    if (!m->plan.tiled_head) {
        m->logits = gpu_push_saved(m, &final_saved[SV_LOGITS]);
        cu_matmul_forward(dt, m->logits, lnf, m->globals.lm_head, NULL, N, C, Vp);
        if (!has_targets) return;
        if (m->tp.size > 1) {  // --tp: the band's softmax statistics, combined over the group (gpu/tensor.h)
            float *lse = m->band_stats, *s = lse + N, *z = s + N;
            int real = c->vocab - tp_vocab_first(&m->tp, Vp);  // (the band's columns past V are padding)
            cu_crossentropy_tile_forward(dt, m->logits, N, Vp, 0, real, m->targets, lse, s, z);
            cu_crossentropy_tile_finish(lse, s, z, m->losses, N);
            gpu_tp_loss(m, lse, z, m->losses, N);
            cu_loss_add(m->numbers, m->losses, N);
            return;
        }
        m->loss_due = 1;  // computed by the backward with its gradient, or else by gpu_head_loss
        if (!cu_crossentropy_fused_on()) gpu_head_loss(m);
        return;
    }
    m->head_lse = arena_push("logits_lse", (size_t)N * sizeof(float));
    if (!has_targets) return;  // (sampling: gpu_gpt_logits_row computes its row)
    float *s = m->head_stats, *z = m->head_stats + N;
    int real = c->vocab - tp_vocab_first(&m->tp, Vp);  // (--tp: the band's columns past V are padding)
    for (int k = 0; k < table_chunks(&m->plan, Vp); k++) {
        Rows v = table_rows(&m->plan, Vp, k);
        int v0 = v.lo, nv = v.hi - v.lo;
        const void *w = gpu_head_chunk_weights(m, k);  // the head's rows [v0, v0 + nv): (nv, C)
        for (int r0 = 0; r0 < N; r0 += R) {
            int rows = N - r0 < R ? N - r0 : R;
            cu_matmul_forward(dt, m->head_tile, element(m, (void *)lnf, (size_t)r0 * C), w, NULL, rows, C, nv);
            cu_crossentropy_tile_forward(dt, m->head_tile, rows, nv, v0, real, m->targets + r0, m->head_lse + r0, s + r0,
                                         z + r0);
        }
    }
    cu_crossentropy_tile_finish(m->head_lse, s, z, m->losses, N);  // lse = m + log s; loss = lse - z
    if (m->tp.size > 1) gpu_tp_loss(m, m->head_lse, z, m->losses, N);  // (--tp: the bands' combined)
    cu_loss_add(m->numbers, m->losses, N);
}

// Its backward: d(lnf) into dln, and the head's gradient (without --fused-ce into
// the globals' gradients, which the embedding's backward completes; with it a
// chunk at a time, each handed on as soon as its rows are done: the same
// tiles again, each turned into dlogits, then d(lnf) += dlogits w and
// d(w) += dlogits^T lnf). --tp: d(lnf) is this rank's band's part, summed over the group (--sp: into
// the rank's slice of the rows, the final norm's own, lnf gathered again first).
void gpu_head_backward(GpuGPT *m, float dloss) {
    const GPTConfig *c = &m->cfg;
    int N = m->B * m->T, C = c->channels, Vp = padded_vocab(c), R = m->plan.head_rows, dt = m->dtype;
    void *lnf = m->tp.sp > 1 ? (void *)gpu_tp_whole_rows(m, m->seq_whole, m->lnf, (size_t)N, (size_t)C) : m->lnf;
    ledger_where("LM head backward", 0);
    if (!m->plan.tiled_head) {
        m->globals = gpu_global_weights(m), m->global_grads = gpu_global_grads(m);
        if (m->tp.size > 1)  // --tp: from the whole vocabulary's log-sum-exp (the band's columns past V: padding)
            cu_crossentropy_tile_backward(dt, m->logits, N, Vp, 0, c->vocab - tp_vocab_first(&m->tp, Vp), m->targets,
                                          m->band_stats, dloss);
        else if (m->loss_due) {  // the loss and dlogits (in place) from one read of the logits
            cu_crossentropy_fused(dt, m->losses, m->logits, m->targets, N, c->vocab, Vp, dloss);
            cu_loss_add(m->numbers, m->losses, N);
            m->loss_due = 0;
        } else cu_crossentropy_backward(dt, m->logits, m->losses, m->targets, N, c->vocab, Vp, dloss);  // -> dlogits in place
        cu_matmul_backward(dt, m->dln, m->global_grads.lm_head, NULL, m->logits, lnf, m->globals.lm_head, N, C, Vp);
        gpu_tp_sum_rows(m, m->dln, m->dln, (size_t)N * C);  // f's backward (--tp: each band's part of d(lnf))
        return;
    }
    for (int k = 0; k < table_chunks(&m->plan, Vp); k++) {
        Rows v = table_rows(&m->plan, Vp, k);
        int v0 = v.lo, nv = v.hi - v.lo;
        const void *w = gpu_head_chunk_weights(m, k);
        void *g = gpu_head_chunk_grads(m, k);
        for (int r0 = 0; r0 < N; r0 += R) {
            int rows = N - r0 < R ? N - r0 : R;
            void *x = element(m, lnf, (size_t)r0 * C);
            cu_matmul_forward(dt, m->head_tile, x, w, NULL, rows, C, nv);
            cu_crossentropy_tile_backward(dt, m->head_tile, rows, nv, v0, c->vocab - tp_vocab_first(&m->tp, Vp),
                                          m->targets + r0, m->head_lse + r0, dloss);
            cu_matmul_backward_into(dt, element(m, m->dln, (size_t)r0 * C), g, m->head_tile, x, w, rows, C, nv, k > 0);
        }
        gpu_head_chunk_grads_done(m, k);
    }
    gpu_tp_sum_rows(m, m->dln, m->dln, (size_t)N * C);  // f's backward (--tp)
}

// Row i of the last forward's logits, widened to fp32 into the host's row
// (Vp floats; sampling). With --fused-ce there are none: the row is computed
// now, a chunk of the head at a time, into the tile buffer.
const float *gpu_gpt_logits_row(GpuGPT *m, int i) {
    float *host = m->row;
    int C = m->cfg.channels, Vp = padded_vocab(&m->cfg);
    const void *row = m->plan.tiled_head ? m->head_tile : element(m, m->logits, (size_t)i * Vp);
    if (m->plan.tiled_head) {
        const void *x = element(m, m->lnf, (size_t)i * C);
        for (int k = 0; k < table_chunks(&m->plan, Vp); k++) {
            Rows v = table_rows(&m->plan, Vp, k);
            int v0 = v.lo, nv = v.hi - v.lo;
            cu_matmul_forward(m->dtype, element(m, m->head_tile, v0), x, gpu_head_chunk_weights(m, k), NULL, 1, C, nv);
        }
        row = m->head_tile;
    }
    float *band = host + tp_vocab_first(&m->tp, Vp);  // (--tp: this rank's band of the row, then every rank's)
    if (m->dtype == DT_FP32) gpu_download(band, row, (size_t)Vp * 4);
    else {
        uint16_t *h = malloc(2 * (size_t)Vp);
        gpu_download(h, row, 2 * (size_t)Vp);
        dtype_load(band, h, Vp, m->dtype);
        free(h);
    }
    if (m->tp.size > 1) comm_allgather_block(m->tp.comm, host, (long long)Vp * (long long)sizeof(float));
    return host;
}

#endif
