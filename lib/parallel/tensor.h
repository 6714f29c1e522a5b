// parallel/tensor.h — --tp T: tensor parallelism, Megatron-LM's split of a layer over the T ranks of a
// group (Shoeybi et al. 2019, "Megatron-LM", section 3). Each rank holds a share of every block:
//
//   qkv     column-parallel: the rows of its H/T query heads and KVH/T key-value heads (and their bias)
//   attend  its own heads, nothing shared: attention never mixes heads
//   attproj row-parallel: the columns that read its heads; its product is a partial sum   -> g
//   fc      column-parallel: its F/T rows of the hidden width (Llama: of up and of gate)
//   act     its own part of the hidden width
//   fcproj  row-parallel: the columns that read its part; a partial sum                      -> g
//
// g sums the partial products over the group (an all-reduce) before the bias and the residual, so every
// rank leaves the block with the whole output; its backward is the identity. f, at a block's column-
// parallel inputs (ln1's and ln2's outputs), is the identity forward, and in the backward sums the input
// gradients, each rank's a partial sum over its own rows. The norms and the residual stream are whole on
// every rank (--sp: a slice of the rows each, below), their gradients the same bits on every rank. The
// embedding and the LM head hold a band of the vocabulary's rows each (below), and the loss is made across
// the group. A rank's share is a model of its own shape (core/config.h tp_share: H/T heads of the model's
// hs, F/T, Vp/T), so the ops, the buffers, the ledger and the predictor read it as they read any model.
//
// The sums are made once each (a reduce-scatter, then an all-gather: every rank ends with the same
// bits), so the ranks of a group never drift apart. Against one process the partial products add in
// another order: the same to fp32 rounding.
#ifndef GPTMEM_TENSOR_H
#define GPTMEM_TENSOR_H

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/config.h"
#include "memory/ledger.h"
#include "parallel/comm.h"

typedef struct {
    int size, rank;   // T and this rank's place in its group (1 and 0: no split)
    int sp;           // --sp: T, the residual path's rows cut in T slices, this rank's the rank-th (1: whole)
    CommGroup *comm;  // the group's collectives (comm_tensor)
    GPTConfig whole;  // the model the group holds together (the rank's share: tp_share(&whole, size))
} TensorSplit;

// Is op `op` row-parallel (a partial product, summed by g) or column-parallel (its input gradient a
// partial sum, summed by f's backward)?
int tp_row_parallel(int op) { return op == OP_ATTPROJ || op == OP_FCPROJ; }
int tp_column_parallel(int op) { return op == OP_QKV || op == OP_FC; }

// x[0..n) summed over the group, the same bits on every rank: a reduce-scatter gives each rank the
// sum of its part (made once), an all-gather gives every rank every part.
void tp_sum(const TensorSplit *tp, float *x, size_t n) {
    if (tp->size <= 1) return;
    if (g_ledger.trace) printf("  all-reduce over the tensor-parallel group of %d: %zu B\n", tp->size, n * sizeof(float));
    int T = tp->size, *counts = calloc(T, sizeof(int)), *displs = calloc(T, sizeof(int));
    for (int r = 0, at = 0; r < T; at += counts[r], r++) counts[r] = (int)(n / T + ((size_t)r < n % T)), displs[r] = at;
    comm_reduce_scatter(tp->comm, x, counts);
    memmove(x + displs[tp->rank], x, sizeof(float) * counts[tp->rank]);
    for (int r = 0; r < T; r++) counts[r] *= (int)sizeof(float), displs[r] *= (int)sizeof(float);
    comm_allgather(tp->comm, x, counts, displs);
    free(counts);
    free(displs);
}

// --- --sp: sequence parallelism (Korthikanti et al. 2022, "Reducing activation recomputation", section 4.2.2) --
// The norms, the residuals and what they save are the same on every rank of the group under --tp alone, each
// rank computing all N rows. Under --sp a rank holds rows [rank N/T, (rank + 1) N/T) of them, and the split
// layer's two ends change: before a column-parallel op the slices are gathered into the whole sequence (an
// all-gather for the identity), and after a row-parallel op the partial products are summed into each rank's
// slice (a reduce-scatter for g's all-reduce). The backward swaps them: a reduce-scatter of the column-parallel
// op's input gradient (f's all-reduce), an all-gather of the output gradient a row-parallel op reads. Each
// moves (T - 1)/T of the tensor, half an all-reduce; the whole sequence is a scratch, gathered again when the
// backward needs it, never saved.

// The whole (n_rows, width) tensor into `full`, from every rank's slice (this rank's is `own`); without
// --sp the rows are whole already: `own` itself.
const float *tp_whole_rows(const TensorSplit *tp, float *full, const float *own, size_t n_rows, size_t width) {
    if (tp->sp <= 1) return own;
    size_t part = n_rows / tp->sp * width;
    if (g_ledger.trace) printf("  all-gather the rows over the tensor-parallel group of %d: %zu B\n", tp->size, part * sizeof(float));
    memcpy(full + (size_t)tp->rank * part, own, part * sizeof(float));
    comm_allgather_block(tp->comm, full, (long long)(part * sizeof(float)));
    return full;
}

// The partial products x[0..n) (n_rows whole rows) summed over the group: into this rank's slice `own` (--sp;
// a reduce-scatter), or every row on every rank, in place (tp_sum). `own` may be x.
void tp_sum_rows(const TensorSplit *tp, float *own, float *x, size_t n) {
    if (tp->sp <= 1) {
        tp_sum(tp, x, n);
        return;
    }
    size_t part = n / tp->sp;
    if (g_ledger.trace) printf("  reduce-scatter the rows over the tensor-parallel group of %d: %zu B\n", tp->size, n * sizeof(float));
    comm_reduce_scatter_block(tp->comm, x, (int)part);
    if (own != x) memcpy(own, x, part * sizeof(float));
}

// --- the vocabulary: a band of Vp/T rows of the embedding and of the LM head a rank (Megatron's
// VocabParallelEmbedding and vocab-parallel cross-entropy) ---------------------------------------------
// The lookup: each rank adds the rows of the tokens in its band (the others' rows stay 0) and the group
// sums (g); the positions, whole, are added by the group's first rank alone, so the sum has them once and
// each row is the one process's to the bit. The LM head: each rank's logits are its band's columns (N,
// Vp/T), no rank holds a row's whole; each row's log-sum-exp over the vocabulary comes from the bands' own
// (tp_vocab_lse), and the input gradient is a sum over the bands (f's backward).

// The first token of this rank's band, of Vb = Vp/T.
int tp_vocab_first(const TensorSplit *tp, int Vb) { return tp->size > 1 ? tp->rank * Vb : 0; }

// lse[0..N): each row's log-sum-exp over this rank's band on entry, over the whole vocabulary on return
// (every rank's gathered into `all`, N T floats, and combined in rank order: the same bits on every rank);
// z[0..N): the row's target logit where the rank holds the target, else 0, on return every rank's sum.
void tp_vocab_lse(const TensorSplit *tp, float *lse, float *z, float *all, int N) {
    if (tp->size <= 1) return;
    memcpy(all + (size_t)tp->rank * N, lse, sizeof(float) * N);
    comm_allgather_block(tp->comm, all, (long long)N * (long long)sizeof(float));
    for (int i = 0; i < N; i++) {
        float most = -INFINITY, sum = 0.0f;
        for (int r = 0; r < tp->size; r++) most = all[(size_t)r * N + i] > most ? all[(size_t)r * N + i] : most;
        for (int r = 0; r < tp->size; r++) sum += expf(all[(size_t)r * N + i] - most);
        lse[i] = most + logf(sum);
    }
    tp_sum(tp, z, N);
}

// --- the layout: where the model's weights go -----------------------------------------------------

// Rank `rank`'s band of n rows (or columns) cut in t: [rank n/t, (rank + 1) n/t).
static int tp_band(size_t i, size_t n, int t, int rank, size_t *local) {
    size_t w = n / t;
    if (i / w != (size_t)rank) return 0;
    *local = i % w;
    return 1;
}

// Row `row` of the model's fused qkv (H query heads, then KVH key heads, then KVH value heads, hs rows
// each): its row in the rank's share, if the rank holds its head.
static int tp_qkv_row(const GPTConfig *c, int t, int rank, size_t row, size_t *local) {
    size_t hs = head_size(c), q = (size_t)c->heads * hs, kv = (size_t)cfg_kv_heads(c) * hs;
    size_t sec = row < q ? 0 : row < q + kv ? 1 : 2, at = sec == 0 ? 0 : sec == 1 ? q : q + kv, n = sec ? kv : q;
    size_t before = sec == 0 ? 0 : sec == 1 ? q / t : q / t + kv / t;  // the share's rows of the sections before
    if (!tp_band(row - at, n, t, rank, local)) return 0;
    *local += before;
    return 1;
}

// Row `row` of the model's fc (GPT-2: F rows; Llama: up's F, then gate's F): its row in the share.
static int tp_fc_row(const GPTConfig *c, int t, int rank, size_t row, size_t *local) {
    size_t F = cfg_ffn(c), half = row >= F;
    if (!tp_band(row - half * F, F, t, rank, local)) return 0;
    *local += half * (F / t);
    return 1;
}

// Element k of op `op`'s weight (out x in) or, past it, of its bias, in model c: its place in the rank's
// share s of the same op, if the rank holds it. Column-parallel ops keep their rows, row-parallel ones
// their columns (and the whole bias).
static int tp_op_place(const GPTConfig *c, const GPTConfig *s, int t, int rank, int op, size_t k, size_t *local) {
    size_t in = (size_t)op_inputs(c, op), wc = op_weight_count(c, op), sin = (size_t)op_inputs(s, op), x = 0;
    if (op == OP_LN1 || op == OP_LN2) return *local = k, 1;
    if (tp_row_parallel(op)) {
        if (k >= wc) return *local = op_weight_count(s, op) + (k - wc), 1;  // the bias, whole
        if (!tp_band(k % in, in, t, rank, &x)) return 0;
        return *local = k / in * sin + x, 1;
    }
    int bias = k >= wc;
    size_t row = bias ? k - wc : k / in;
    if (!(op == OP_QKV ? tp_qkv_row(c, t, rank, row, &x) : tp_fc_row(c, t, rank, row, &x))) return 0;
    return *local = bias ? op_weight_count(s, op) + x : x * in + k % in, 1;
}

// A row of the embedding's tokens or of an untied LM head, [0, Vp) of the whole model's (`k`: an element of
// the table, C a row): its element in the rank's band of Vb rows, if the rank holds it.
static int tp_vocab_place(const TensorSplit *tp, const GPTConfig *s, size_t k, size_t *local) {
    size_t C = (size_t)s->channels, Vb = (size_t)padded_vocab(s);
    if (k / C / Vb != (size_t)tp->rank) return 0;
    return *local = k - (size_t)tp->rank * Vb * C, 1;
}

// Parameter `at` of the whole model's flat layout: its index in the rank's share's layout, or -1 if
// another rank holds it. The embedding's token rows and an untied LM head's are the rank's band of the
// vocabulary; the positions (GPT-2's wpe) and the final norm are the same in both.
long tp_local_index(const TensorSplit *tp, const GPTConfig *s, size_t at) {
    const GPTConfig *c = &tp->whole;
    size_t emb = embedding_param_count(c), end = layer_offset(c, c->layers), per = layer_param_count(c);
    size_t wte = (size_t)padded_vocab(c) * c->channels, lnf = final_norm_param_count(c), v;
    if (at < wte) return tp_vocab_place(tp, s, at, &v) ? (long)v : -1;
    if (at < emb) return (long)(at - wte + (size_t)padded_vocab(s) * s->channels);
    if (at >= end + lnf) return tp_vocab_place(tp, s, at - end - lnf, &v) ? (long)(layer_offset(s, s->layers) + lnf + v) : -1;
    if (at >= end) return (long)(at - end + layer_offset(s, s->layers));
    size_t l = (at - emb) / per, k = (at - emb) % per, local;
    int op = 0;
    while (k >= op_param_count(c, op)) k -= op_param_count(c, op), op++;
    if (!tp_op_place(c, s, tp->size, tp->rank, op, k, &local)) return -1;
    return (long)(op_param_offset(s, (int)l, op) + local);
}

// The other way: parameter j of the share's layout, its index in the whole model's, and (*split) whether
// it is a part only this rank holds rather than a tensor whole on every rank.
size_t tp_whole_index(const TensorSplit *tp, const GPTConfig *s, size_t j, int *split) {
    const GPTConfig *c = &tp->whole;
    size_t emb = embedding_param_count(s), end = layer_offset(s, s->layers), per = layer_param_count(s);
    size_t band = (size_t)padded_vocab(s) * s->channels, lnf = final_norm_param_count(s);
    size_t first = (size_t)tp->rank * band;  // the band's first element in the whole table
    *split = j < band || j >= end + lnf;
    if (j < band) return first + j;
    if (j < emb) return j - band + (size_t)padded_vocab(c) * c->channels;
    if (j >= end + lnf) return layer_offset(c, c->layers) + lnf + first + (j - end - lnf);
    if (j >= end) return j - end + layer_offset(c, c->layers);
    size_t l = (j - emb) / per, k = (j - emb) % per, in = 0, row, w = 0, t = (size_t)tp->size, r = (size_t)tp->rank;
    int op = 0;
    while (k >= op_param_count(s, op)) k -= op_param_count(s, op), op++;
    size_t wc = op_weight_count(s, op), whole_wc = op_weight_count(c, op);
    if (op == OP_LN1 || op == OP_LN2) w = k;
    else if (tp_row_parallel(op)) {
        in = (size_t)op_inputs(s, op);
        *split = k < wc;
        w = k < wc ? k / in * (size_t)op_inputs(c, op) + r * in + k % in : whole_wc + (k - wc);
    } else {
        in = (size_t)op_inputs(s, op), row = k < wc ? k / in : k - wc, *split = 1;
        if (op == OP_QKV) {  // the share's q rows, then its k rows, then its v rows
            size_t hs = head_size(c), q = (size_t)c->heads * hs / t, kv = (size_t)cfg_kv_heads(c) * hs / t;
            size_t sec = row < q ? 0 : row < q + kv ? 1 : 2, base = sec == 0 ? 0 : sec == 1 ? q : q + kv;
            row = (sec == 0 ? 0 : sec == 1 ? q * t : q * t + kv * t) + r * (sec ? kv : q) + (row - base);
        } else {  // fc: the share's F/t rows (Llama: of up, then of gate)
            size_t f = (size_t)cfg_ffn(s), half = row >= f;
            row = half * f * t + r * f + (row - half * f);
        }
        w = k < wc ? row * in + k % in : whole_wc + row;
    }
    return op_param_offset(c, (int)l, op) + w;
}

// The share's flat layout in runs [a, b) of one kind: a split tensor (a part only this rank holds) or a
// whole one (the norms, the row-parallel biases, the embedding, the head: the same on every rank), in
// layout order. A gradient norm counts the whole ones once.
void tp_runs(const GPTConfig *s, void (*visit)(void *ctx, size_t a, size_t b, int split), void *ctx) {
    size_t at = embedding_param_count(s), band = (size_t)padded_vocab(s) * s->channels;
    visit(ctx, 0, band, 1);  // the vocabulary's band of token rows, then (GPT-2) the positions
    visit(ctx, band, at, 0);
    for (int l = 0; l < s->layers; l++)
        for (int op = 0; op < LAYER_OPS; op++) {
            size_t wc = op_weight_count(s, op), n = op_param_count(s, op);
            visit(ctx, at, at + wc, tp_column_parallel(op) || tp_row_parallel(op));
            visit(ctx, at + wc, at + n, tp_column_parallel(op));
            at += n;
        }
    visit(ctx, at, at + final_norm_param_count(s), 0);
    visit(ctx, at + final_norm_param_count(s), param_count(s), 1);  // an untied LM head's band
}

// The sum of squares of this rank's values [lo, hi) of its share's flat layout (a gradient norm's part),
// the whole tensors' (the same on every rank of the group) counted by the group's first rank alone, then
// added over the group in rank order. `squares(ctx, at, n)` sums n values from the one at `at` - lo: on the
// host (cpu/optimizer.h) or on the GPU (gpu/optimizer.h).
typedef double (*TpSquaresOf)(void *ctx, size_t at, size_t n);
typedef struct {
    TpSquaresOf squares;
    void *ctx;
    int first;
    size_t lo, hi;
    double sum;
} TpSquares;

static void tp_add_squares(void *ctx, size_t a, size_t b, int split) {
    TpSquares *q = ctx;
    a = a > q->lo ? a : q->lo, b = b < q->hi ? b : q->hi;
    if (b > a && (split || q->first)) q->sum += q->squares(q->ctx, a - q->lo, b - a);
}

double tp_sum_squares(const TensorSplit *tp, const GPTConfig *share, size_t lo, size_t hi, TpSquaresOf squares, void *ctx) {
    TpSquares q = {squares, ctx, tp->rank == 0, lo, hi, 0.0};
    tp_runs(share, tp_add_squares, &q);
    return comm_sum_ordered(tp->comm, q.sum);
}

#endif
