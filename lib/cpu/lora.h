// cpu/lora.h — --lora's adapters on the CPU (core/lora.h has their maps and
// layout): each targeted map's low-rank path beside its frozen weight, forward
// and backward, on cpu/gemm.h's GEMM. A map is a band of rows [row0, row0 +
// rows) of its op's output, whose row stride is the op's outputs OC; s = alpha / R.
// The product x A^T is not saved for the backward: it is computed again from x,
// which the op's input keeps anyway (N in R multiply-adds, R / rows of the map's own).
// Over ranks the adapters have a shard layout of their own (parallel/zero.h): they are the model's trained
// set (m->train), and an op's adapters are a piece of its layout, gathered before the op at stage 3 and
// their gradients reduce-scattered after it from stage 2.
#ifndef GPTMEM_CPU_LORA_H
#define GPTMEM_CPU_LORA_H

#include "core/config.h"
#include "core/hash.h"
#include "core/lora.h"
#include "cpu/gemm.h"
#include "cpu/gpt.h"
#include "io/quant.h"
#include "memory/ledger.h"
#include "parallel/zero.h"


// --base-dtype: the frozen model in io/quant.h's storage (io/quant.h lora_base_layout: the blocks' linear
// maps in `format`, everything else in the --dtype), read back a piece at a time through the model's
// read_back (cpu/weights.h fetch_params).
static void lora_base_read(struct GPT *m, float *dst, size_t lo, size_t n) { quant_load(m->lora.base, dst, lo, n); }

// --lora: the model, its weights frozen, with the adapters as what the step trains (optim/trained.h): the
// adapters (fp32, their own master), their gradients, AdamW over every A and B, in a shard layout of their
// own; with --base-dtype the frozen model packed. Its buffers made (cpu/gpt.h gpt_build's twin).
void lora_gpt_build(GPT *m, const Settings *s, const Plan *plan, int rank) {
    gpt_setup(m, s, plan, rank);
    m->lora.cfg = s->lora, m->lora.seed = s->seed;
    m->lora.n = lora_param_count(&m->cfg, &s->lora), m->lora.op_most = lora_op_most(&m->cfg, &s->lora);
    if (s->base_format != QF_FP32) {
        m->lora.base = calloc(1, sizeof(QuantWeights));
        lora_base_layout(m->lora.base, &m->cfg, m->dtype, s->double_quant);
        quant_alloc(m->lora.base, s->base_format);
        m->read_back = lora_base_read;
    }
    Shard ls = shard_layout(m->lora.n, plan, rank);
    AdamWConfig adam = adamw_config(s);
    size_t lo, hi, f = sizeof(float);
    shard_state_range(&ls, &lo, &hi);
    Trained *t = &m->train;
    *t = (Trained){.shard = ls, .w_base = shard_weights_base(&ls), .cdt = DT_FP32, .c_base = shard_weights_base(&ls),
                   .gdt = DT_FP32, .g_base = shard_grads_base(&ls)};
    optimizer_setup_tensors(&t->opt, &adam, lora_tensors_alloc(&m->cfg, &s->lora), lora_tensor_count(&m->cfg, &s->lora),
                            lo, hi, s->adam_bits);
    t->rows = (TrainedRows){(void **)&m->lora.w, (void **)&m->lora.g, (void **)&m->lora.w, MEM_ADAPTERS, "adapters",
                            "adapter grads", "adapter reduce chunk", "adapter across-groups chunk",
                            shard_weights_len(&ls) * f, shard_grads_len(&ls) * f, trained_reduce_bytes(&ls),
                            across_buffer_floats(&ls) * f, m->plan.offload & OFFLOAD_OPT ? 0 : shard_state_len(&ls), 1};
    buffers_alloc(m, s->batch, s->seq_len);
}

void lora_gpt_free(GPT *m) {
    if (m->lora.base) quant_free(m->lora.base), free(m->lora.base);
    m->lora.base = NULL;
}

// The adapters' first values: A drawn from the run's seed and B zero (core/lora.h lora_init; --lora-init's
// folder is read over them where --init's file is: app/net.h). ZeRO-3 keeps its shard of the drawn ones.
void lora_start(GPT *m) {
    const Shard *ls = &m->train.shard;
    size_t lo = shard_weights_base(ls);
    lora_init(m->lora.w, lo, weights_sharded(ls) ? ls->own_hi : m->lora.n, &m->cfg, &m->lora.cfg, m->lora.seed);
}

// The frozen model's weights as they come (init_params_chunks' windows): into --base-dtype's storage, or
// rounded into the 16-bit weights (no master: ZeRO-3 keeps its shard of them).
typedef struct {
    QuantStream stream;
    const float *window;  // init_params_chunks' buffer: the window [a, b)
} PackedInit;

static void init_take_packed(void *ctx, size_t a, size_t b) {
    PackedInit *p = ctx;
    if (quant_stream(&p->stream, p->window, a, b - a)) ledger_bug("a weight that is not finite", "init_take_packed");
}

static void init_take_16bit(void *ctx, size_t a, size_t b) {
    GPT *m = ctx;
    dtype_store((uint16_t *)m->params_lp + (a - m->params_base), m->w_piece, b - a, m->dtype);
}

// --lora's first weights: the frozen model's (GPT-2's init from the seed, or --init's file: packed, 16-bit or
// fp32, each rank the part it keeps), then the adapters' (lora_start). cpu/weights.h gpt_init's twin.
void lora_gpt_init(GPT *m, const WeightSource *src) {
    const Shard *sh = &m->shard;
    size_t hi = weights_sharded(sh) ? sh->own_hi : m->nparams;
    if (gpt_base_packed(m)) {
        PackedInit p = {.stream = {.q = m->lora.base}, .window = m->w_piece};
        init_params_chunks(m->w_piece, m->piece, 0, m->nparams, &m->cfg, src, init_take_packed, &p);
    } else if (m->dtype != DT_FP32) {
        init_params_chunks(m->w_piece, m->piece, m->params_base, hi, &m->cfg, src, init_take_16bit, m);
    } else {
        init_params_range(m->params, weights_sharded(sh) ? sh->own_lo : 0, hi, &m->cfg, src);
        zero_allgather_weights(sh, m->params, DT_FP32);  // (the frozen weights as every rank holds them)
    }
    lora_start(m);
}

// Layer l's adapters of op `op` (its maps' A and B), and where their gradients go: `w` holds flat index
// `wbase` of the adapters' layout (core/lora.h lora_offset) at element 0, `g` flat index `gbase`.
typedef struct {
    const float *w;
    float *g;
    size_t wbase, gbase, lo, hi;  // the op's adapters are [lo, hi)
} LoraOp;

// The op's adapters as the rank holds them: all of them (stages 0 to 2), or gathered from every rank's
// shard into `gathered` (stage 3: before the op's forward, again before its backward and a rebuild).
LoraOp lora_fetch(GPT *m, int l, int op) {
    const Shard *ls = &m->train.shard;
    LoraOp o = {m->lora.w, m->lora.g, 0, 0, 0, 0};
    lora_op_range(&m->cfg, &m->lora.cfg, l, op, &o.lo, &o.hi);
    if (o.hi > o.lo && weights_sharded(ls)) {
        if (g_ledger.trace) printf("  gather layer %d %s adapters: %zu B\n", l, op_names[op], (o.hi - o.lo) * sizeof(float));
        zero_gather(ls, m->lora.gathered, m->lora.w, shard_weights_base(ls), o.lo, o.hi, DT_FP32);
        o.w = m->lora.gathered, o.wbase = o.lo;
    }
    return o;
}

// ... and for its backward, where the gradients go: the whole gradients (stages 0, 1), or the bucket
// (stages 2, 3: zeroed here, and reduce-scattered into this rank's shard by lora_grads_done).
LoraOp lora_fetch_grads(GPT *m, int l, int op) {
    LoraOp o = lora_fetch(m, l, op);
    if (o.hi > o.lo && grads_sharded(&m->train.shard)) {
        memset(m->lora.bucket, 0, (o.hi - o.lo) * sizeof(float));
        o.g = m->lora.bucket, o.gbase = o.lo;
    }
    return o;
}

void lora_grads_done(GPT *m, const LoraOp *o) {
    const Shard *ls = &m->train.shard;
    if (o->hi == o->lo || !grads_sharded(ls)) return;
    if (g_ledger.trace) printf("  reduce-scatter the adapters' gradients: %zu B\n", (o->hi - o->lo) * sizeof(float));
    zero_reduce_scatter(ls, m->lora.bucket, o->lo, o->hi, m->lora.g, shard_grads_base(ls), DT_FP32);
}

// u (N,R) = s inp A^T, into the adapters' scratch: the map's input brought down to R channels, scaled.
float *lora_down(GPT *m, const LoraMap *mp, const float *A, const float *inp) {
    int N = m->B * m->T, R = m->lora.cfg.rank;
    float *u = m->lora.u, s = lora_scale(&m->lora.cfg);
    gemm(N, R, mp->in, inp, mp->in, 1, A, 1, mp->in, u, R, 0);
    for (size_t i = 0; i < (size_t)N * R; i++) u[i] *= s;
    return u;
}

// out (N,OC) band += s (inp A^T) B^T, for each targeted map of layer l's op `op`:
//   u (N,R) = s inp A^T;  out[:, row0 ..] += u B^T (N, rows)
void lora_forward(GPT *m, int l, int op, float *out, const float *inp) {
    const GPTConfig *c = &m->cfg;
    const LoraConfig *a = &m->lora.cfg;
    int N = m->B * m->T, R = a->rank, OC = op_outputs(c, op);
    LoraOp o = lora_fetch(m, l, op);
    for (int k = lora_first_map(c); k < lora_map_end(c); k++) {
        LoraMap mp = lora_map(c, k);
        if (mp.op != op || !lora_targets(a, k)) continue;
        const float *A = o.w + (lora_offset(c, a, l, k) - o.wbase), *B = A + (size_t)R * mp.in;
        gemm(N, mp.rows, R, lora_down(m, &mp, A, inp), R, 1, B, 1, R, out + mp.row0, OC, 1);
    }
}

// Its backward, after the frozen weight's (which wrote dinp = dout W), for each targeted map:
//   u (N,R) = s inp A^T (again);  dB (rows,R) += dout_band^T u
//   du (N,R) = s dout_band B;     dA (R,in)   += du^T inp;      dinp (N,in) += du A
void lora_backward(GPT *m, int l, int op, float *dinp, const float *dout, const float *inp) {
    const GPTConfig *c = &m->cfg;
    const LoraConfig *a = &m->lora.cfg;
    int N = m->B * m->T, R = a->rank, OC = op_outputs(c, op);
    LoraOp o = lora_fetch_grads(m, l, op);
    for (int k = lora_first_map(c); k < lora_map_end(c); k++) {
        LoraMap mp = lora_map(c, k);
        if (mp.op != op || !lora_targets(a, k)) continue;
        size_t at = lora_offset(c, a, l, k), na = (size_t)R * mp.in;
        const float *A = o.w + (at - o.wbase), *B = A + na;
        float *dA = o.g + (at - o.gbase), *dB = dA + na, *du = m->lora.du, s = lora_scale(a);
        gemm(mp.rows, R, N, dout + mp.row0, 1, OC, lora_down(m, &mp, A, inp), R, 1, dB, R, 1);
        gemm(N, R, mp.rows, dout + mp.row0, OC, 1, B, R, 1, du, R, 0);
        for (size_t i = 0; i < (size_t)N * R; i++) du[i] *= s;
        gemm(R, mp.in, N, du, 1, R, inp, mp.in, 1, dA, mp.in, 1);
        gemm(N, mp.in, R, du, R, 1, A, mp.in, 1, dinp, mp.in, 1);
    }
    lora_grads_done(m, &o);
}

// The frozen model as the run holds it, hashed (FNV-1a): the fp32 weights, their 16-bit copy, or
// --base-dtype's storage. A --lora state records it, and a resume checks that its model is the same.
// ZeRO-3 holds a shard of it: every rank gathers it a piece at a time (gather_piece) and hashes the
// same bytes, so the hash is the one-process run's.
uint64_t lora_base_hash(GPT *m) {
    uint64_t h = 0xCBF29CE484222325ULL;
    const QuantWeights *q = m->lora.base;
    if (gpt_base_packed(m)) {
        h = fnv1a(h, q->codes, quant_code_bytes(q->format, q->matrices));
        h = fnv1a(h, q->vec, dtype_size(q->vec_dtype) * q->vectors);
        if (q->scales) h = fnv1a(h, q->scales, 4 * q->blocks);
        if (q->double_quant)
            h = fnv1a(fnv1a(fnv1a(h, q->qscales, q->blocks), q->scales2, 4 * q->groups), q->offsets, 4 * q->nmatrices);
        return h;
    }
    size_t e = dtype_size(m->dtype);
    if (!weights_sharded(&m->shard)) return fnv1a(h, compute_weights(m), e * m->nparams);
    for (size_t lo = 0; lo < m->nparams; lo += m->piece) {
        size_t hi = m->nparams - lo < m->piece ? m->nparams : lo + m->piece;
        zero_gather(&m->shard, m->gather_piece, compute_weights(m), m->params_base, lo, hi, m->dtype);
        h = fnv1a(h, m->gather_piece, e * (hi - lo));
    }
    return h;
}

// The adapters [at, at + n) of the layout, from this rank's array (its element 0 is the trained set's
// weights' base), to the host's dst: gpu/lora.h gpu_lora_get's and gpu/offload.h gpu_lora_down_to's twin.
void lora_down_to(void *ctx, size_t at, float *dst, size_t n) {
    const GPT *m = ctx;
    memcpy(dst, m->lora.w + (at - shard_weights_base(&m->train.shard)), n * sizeof(float));
}

// --lora --merge: n weights of the merged model from flat index `at` (ctx: the GPT), for --export: each
// frozen weight as the run computes with it (fp32, the 16-bit copy, or read back from --base-dtype's
// storage), and on a targeted map's band + s B A (core/lora.h lora_merge_add: PEFT's merge_and_unload).
void lora_merged_get(const void *ctx, size_t at, float *dst, size_t n) {
    GPT *m = (GPT *)ctx;
    if (m->read_back) m->read_back(m, dst, at, n);
    else if (m->dtype != DT_FP32) dtype_load(dst, (const uint16_t *)m->params_lp + at, n, m->dtype);
    else memcpy(dst, m->params + at, n * sizeof(float));
    lora_merge_add(&m->cfg, &m->lora.cfg, dst, at, n, lora_get_host, m->lora.w);
}

#endif
