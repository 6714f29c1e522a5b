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
#include "io/peft.h"
#include "memory/ledger.h"
#include "parallel/zero.h"


// The adapters' first values: A drawn from the run's seed and B zero (core/lora.h lora_init), or what
// PEFT's folder holds (--lora-init, checked when the flags were read: read again here). ZeRO-3 keeps its
// shard of the drawn ones (--lora-init is refused there: the folder is read whole).
void lora_start(GPT *m) {
    const Shard *ls = &m->train.shard;
    size_t lo = shard_weights_base(ls);
    lora_init(m->lora.w, lo, weights_sharded(ls) ? ls->own_hi : m->lora.n, &m->cfg, &m->lora.cfg, m->lora.seed);
    if (!m->lora.from) return;
    StModel f;
    LoraConfig a = m->lora.cfg;
    char err[1400] = "a read failed";
    int bad = peft_open(&f, m->lora.from, &m->cfg, &a, err, sizeof err) ||
              memcmp(&a, &m->lora.cfg, sizeof a) || peft_read(&f, &m->cfg, &a, m->lora.w);
    peft_close(&f);
    if (bad) {
        fprintf(stderr, "error: --lora-init '%s': %s (was it changed since the run began?)\n", m->lora.from, err);
        exit(1);
    }
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
    const QuantWeights *q = &m->lora.base;
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
