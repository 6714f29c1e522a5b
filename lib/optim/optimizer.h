// optim/optimizer.h — AdamW on the host, what both devices share: its state
// (fp32 m and v, or --adam-bits 8's block-quantized codes) and its step over a
// range of parameters, tensor by tensor. The CPU model holds the state in its
// buffer table (cpu/gpt.h) and steps through cpu/optimizer.h; --offload holds
// it off either device (optim/offload.h). The update itself is core/adamw.h's.
#ifndef GPTMEM_OPTIMIZER_H
#define GPTMEM_OPTIMIZER_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "core/adamw.h"
#include "core/config.h"
#include "core/dtype.h"
#include "core/settings.h"
#include "core/sizes.h"
#include "memory/ledger.h"
#include "parallel/comm.h"
#include "parallel/zero.h"

// ---------------------------------------------------------------------------
// The optimizer: AdamW state for every parameter, applied tensor by tensor so
// that weight decay reaches only the 2-D weights.

typedef struct {
    AdamWConfig cfg;
    size_t lo, hi;  // the parameters this rank updates: all of them, or its ZeRO shard
    int bits;       // --adam-bits: 32, or 8 (m8, v8 and their scales instead of m, v)
    float *m, *v;   // AdamW state; element 0 is parameter lo (ledger adam_m, adam_v)
    int8_t *m8;     // --adam-bits 8: m in a signed square code, a scale (m_scale) per ADAM_BLOCK
    uint8_t *v8;    //                v in an unsigned fourth-power code, a scale (v_scale) per ADAM_BLOCK
    float *m_scale, *v_scale;
    ParamTensor *tensors;
    int ntensors;
} Optimizer;

// The AdamW settings of the run (core/adamw.h).
AdamWConfig adamw_config(const Settings *s) {
    AdamWConfig a = {s->lr, s->beta1, s->beta2, 1e-8f, s->weight_decay, s->warmup, s->steps, s->min_lr_frac};
    return a;
}

// The bytes of AdamW's state for n elements in `bits` (32 or 8):
//   32: m and v in fp32, 4 + 4 bytes a parameter
//    8: m and v in one byte each, and an fp32 scale each per ADAM_BLOCK: 2 + 8/256 bytes a parameter
size_t adam_moment_bytes(size_t n, int bits) { return bits == 8 ? n : n * sizeof(float); }
size_t adam_scale_bytes(size_t n, int bits) { return bits == 8 ? (n + ADAM_BLOCK - 1) / ADAM_BLOCK * sizeof(float) : 0; }

// The optimizer of the parameters [lo, hi) in `bits`, without its state: the
// holder of the state points m and v (or m8, v8 and the scales) at it.
// The tensors are the model's (param_tensors), or what optimizer_setup_tensors is given (--lora's adapters).
void optimizer_setup_tensors(Optimizer *opt, const AdamWConfig *cfg, ParamTensor *tensors, int ntensors, size_t lo,
                             size_t hi, int bits) {
    memset(opt, 0, sizeof *opt);
    opt->cfg = *cfg;
    opt->lo = lo;
    opt->hi = hi;
    opt->bits = bits;
    opt->ntensors = ntensors;
    opt->tensors = tensors;
}

void optimizer_setup(Optimizer *opt, const AdamWConfig *cfg, const GPTConfig *model, size_t lo, size_t hi, int bits) {
    ParamTensor *t = malloc(sizeof(ParamTensor) * param_tensor_count(model));
    param_tensors(model, t);
    optimizer_setup_tensors(opt, cfg, t, param_tensor_count(model), lo, hi, bits);
}

// Its state, n_alloc elements each (>= hi - lo: a ZeRO shard is padded so every rank allocates the
// same), at location `loc` (memory/report.h).
void optimizer_alloc_at(Optimizer *opt, size_t n_alloc, int loc) {
    int bits = opt->bits;
    size_t moment = adam_moment_bytes(n_alloc, bits), scales = adam_scale_bytes(n_alloc, bits);
    if (bits == 8) {
        opt->m8 = mem_alloc_at(loc, MEM_ADAM_M, moment, "adam_m (8-bit)");
        opt->m_scale = mem_alloc_at(loc, MEM_ADAM_M, scales, "adam_m scales");
        opt->v8 = mem_alloc_at(loc, MEM_ADAM_V, moment, "adam_v (8-bit)");
        opt->v_scale = mem_alloc_at(loc, MEM_ADAM_V, scales, "adam_v scales");
    } else {
        opt->m = mem_alloc_at(loc, MEM_ADAM_M, moment, "adam_m");
        opt->v = mem_alloc_at(loc, MEM_ADAM_V, moment, "adam_v");
    }
}

// The model's optimizer with its state.
void optimizer_build_at(Optimizer *opt, const AdamWConfig *cfg, const GPTConfig *model, size_t lo, size_t hi,
                        size_t n_alloc, int bits, int loc) {
    optimizer_setup(opt, cfg, model, lo, hi, bits);
    optimizer_alloc_at(opt, n_alloc, loc);
}

void optimizer_build(Optimizer *opt, const AdamWConfig *cfg, const GPTConfig *model, size_t lo, size_t hi,
                     size_t n_alloc, int bits) {
    optimizer_build_at(opt, cfg, model, lo, hi, n_alloc, bits, g_ledger.host_loc);
}

// The optimizer over [a, b) of its parameters (a - lo a multiple of
// ADAM_BLOCK), its state at m and v (or m8, v8 and the scales) given for that
// range: what --offload steps a chunk at a time.
Optimizer optimizer_view(const Optimizer *opt, size_t a, size_t b, void *m, void *v, float *m_scale, float *v_scale) {
    Optimizer view = *opt;
    view.lo = a, view.hi = b;
    if (opt->bits == 8) view.m8 = m, view.v8 = v, view.m_scale = m_scale, view.v_scale = v_scale;
    else view.m = m, view.v = v;
    return view;
}

void optimizer_free(Optimizer *opt) {
    void *bufs[] = {opt->m, opt->v, opt->m8, opt->v8, opt->m_scale, opt->v_scale};
    for (int i = 0; i < 6; i++) mem_free(bufs[i]);
    free(opt->tensors);
}

// --- --adam-bits 8: the moments in 8 bits, block-wise ----------------------------
// As in Dettmers et al. 2022 (8-bit optimizers via block-wise quantization):
// each block of ADAM_BLOCK elements keeps an fp32 scale, its largest value,
// and every element as a code relative to it; the update widens a block to
// fp32, runs the usual AdamW on it, and stores it back. The update is
// m / sqrt(v), so both codes give more levels to small values than a linear
// code would:
//   m (signed):      q = round(127 sqrt(|m| / max|m|)), with m's sign;  m = sign (q/127)^2 max|m|
//                    (the smallest step is max / 16129; near the max, 1.6%)
//   v (v >= 0):      q = round(255 (v / max v)^(1/4));                  v = (q/255)^4 max v
//                    (sqrt(v), the update's divisor, in a square code: 0.8% steps near the max;
//                    a v > 0 never becomes 0, which would blow the update up: it keeps q >= 1)
// Deterministic rounding: a resumed run computes the same codes (a saved
// state holds the values the codes stand for, which read back to the same codes).

void adam8_encode(const float *m, const float *v, int n, int8_t *mq, uint8_t *vq, float *mscale, float *vscale) {
    float mmax = 0, vmax = 0;
    for (int i = 0; i < n; i++) {
        mmax = fabsf(m[i]) > mmax ? fabsf(m[i]) : mmax;
        vmax = v[i] > vmax ? v[i] : vmax;
    }
    for (int i = 0; i < n; i++) {
        float qm = mmax > 0 ? roundf(127.0f * sqrtf(fabsf(m[i]) / mmax)) : 0.0f;
        float qv = vmax > 0 ? roundf(255.0f * sqrtf(sqrtf(v[i] / vmax))) : 0.0f;
        if (qv == 0 && v[i] > 0) qv = 1;
        mq[i] = (int8_t)(m[i] < 0 ? -qm : qm);
        vq[i] = (uint8_t)qv;
    }
    *mscale = mmax;
    *vscale = vmax;
}

void adam8_decode(const int8_t *mq, const uint8_t *vq, int n, float mscale, float vscale, float *m, float *v) {
    for (int i = 0; i < n; i++) {
        float a = mq[i] / 127.0f, b = vq[i] / 255.0f;
        m[i] = (a < 0 ? -a * a : a * a) * mscale;
        v[i] = b * b * b * b * vscale;
    }
}

// The moments as fp32: elements [at, at + n) of this optimizer's state
// (at a multiple of ADAM_BLOCK), m (which 0) or v (1), read or written. For
// saving and resuming (io/state.h); both bit widths.
void optimizer_moments_get(const void *optimizer, int which, size_t at, float *dst, size_t n) {
    const Optimizer *opt = optimizer;
    if (opt->bits != 8) { memcpy(dst, (which ? opt->v : opt->m) + at, n * sizeof(float)); return; }
    for (size_t b = 0; b < n; b += ADAM_BLOCK) {
        int len = (int)(n - b < ADAM_BLOCK ? n - b : ADAM_BLOCK);
        float other[ADAM_BLOCK];
        size_t k = (at + b) / ADAM_BLOCK;
        adam8_decode(opt->m8 + at + b, opt->v8 + at + b, len, opt->m_scale[k], opt->v_scale[k], which ? other : dst + b,
                     which ? dst + b : other);
    }
}

// Writing v (which 1) after m: the codes of a block are made from both.
void optimizer_moments_set(void *optimizer, int which, size_t at, const float *src, size_t n) {
    Optimizer *opt = optimizer;
    if (opt->bits != 8) { memcpy((which ? opt->v : opt->m) + at, src, n * sizeof(float)); return; }
    for (size_t b = 0; b < n; b += ADAM_BLOCK) {
        int len = (int)(n - b < ADAM_BLOCK ? n - b : ADAM_BLOCK);
        float m[ADAM_BLOCK], v[ADAM_BLOCK];
        size_t k = (at + b) / ADAM_BLOCK;
        adam8_decode(opt->m8 + at + b, opt->v8 + at + b, len, opt->m_scale[k], opt->v_scale[k], m, v);
        memcpy(which ? v : m, src + b, len * sizeof(float));
        adam8_encode(m, v, len, opt->m8 + at + b, opt->v8 + at + b, &opt->m_scale[k], &opt->v_scale[k]);
    }
}

// One AdamW step at learning rate lr over this optimizer's parameters; t is
// the 1-based update count, grad_scale multiplies every gradient first (it
// carries the clipping and, with fp16, the loss-scale division). The fp32
// weights w and the gradients g (stored as dtype gdt) are arrays whose
// element 0 is parameter w_base / g_base. 16-bit gradients are widened
// GRAD_BLOCK at a time into a buffer on the stack.
void optimizer_step_8bit(Optimizer *opt, float *w, size_t w_base, const void *g, size_t g_base, int gdt, float lr,
                         int t, float grad_scale);

void optimizer_step(Optimizer *opt, float *w, size_t w_base, const void *g, size_t g_base, int gdt, float lr, int t,
                    float grad_scale) {
    if (opt->bits == 8) { optimizer_step_8bit(opt, w, w_base, g, g_base, gdt, lr, t, grad_scale); return; }
    for (int i = 0; i < opt->ntensors; i++) {
        const ParamTensor *pt = &opt->tensors[i];
        size_t a = pt->offset > opt->lo ? pt->offset : opt->lo;                       // this tensor's part
        size_t b = pt->offset + pt->count < opt->hi ? pt->offset + pt->count : opt->hi;  // of [lo, hi)
        if (a >= b) continue;
        if (gdt == DT_FP32) {
            adamw_update(w + (a - w_base), (const float *)g + (a - g_base), opt->m + (a - opt->lo), opt->v + (a - opt->lo),
                         b - a, &opt->cfg, lr, t, grad_scale, pt->is_matrix);
            continue;
        }
        long nblocks = (long)((b - a + GRAD_BLOCK - 1) / GRAD_BLOCK);
#pragma omp parallel for schedule(static)  // the regions inside run on one thread each
        for (long k = 0; k < nblocks; k++) {
            float buf[GRAD_BLOCK];
            size_t off = a + (size_t)k * GRAD_BLOCK, len = b - off < GRAD_BLOCK ? b - off : GRAD_BLOCK;
            dtype_load(buf, (const uint16_t *)g + (off - g_base), len, gdt);
            adamw_update(w + (off - w_base), buf, opt->m + (off - opt->lo), opt->v + (off - opt->lo), len, &opt->cfg, lr, t,
                         grad_scale, pt->is_matrix);
        }
    }
}

// --adam-bits 8: the same update, a block of ADAM_BLOCK state elements at a
// time: widen its m and v, update each tensor's part of the block (with its
// own weight decay), store the block back in 8 bits.
int tensor_containing(const Optimizer *opt, size_t at) {
    int lo = 0, hi = opt->ntensors - 1;  // the last tensor whose offset is <= at
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (opt->tensors[mid].offset <= at) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

void optimizer_step_8bit(Optimizer *opt, float *w, size_t w_base, const void *g, size_t g_base, int gdt, float lr,
                         int t, float grad_scale) {
    long nblocks = (long)((opt->hi - opt->lo + ADAM_BLOCK - 1) / ADAM_BLOCK);
#pragma omp parallel for schedule(static)  // the regions inside run on one thread each
    for (long k = 0; k < nblocks; k++) {
        float m[ADAM_BLOCK], v[ADAM_BLOCK], gbuf[ADAM_BLOCK];
        size_t a = opt->lo + (size_t)k * ADAM_BLOCK, b = a + ADAM_BLOCK < opt->hi ? a + ADAM_BLOCK : opt->hi;
        int len = (int)(b - a);
        adam8_decode(opt->m8 + (a - opt->lo), opt->v8 + (a - opt->lo), len, opt->m_scale[k], opt->v_scale[k], m, v);
        for (int i = tensor_containing(opt, a); i < opt->ntensors && opt->tensors[i].offset < b; i++) {
            const ParamTensor *pt = &opt->tensors[i];
            size_t x = pt->offset > a ? pt->offset : a, y = pt->offset + pt->count < b ? pt->offset + pt->count : b;
            const float *gx = (const float *)g + (x - g_base);
            if (gdt != DT_FP32) {  // 16-bit gradients, widened
                dtype_load(gbuf, (const uint16_t *)g + (x - g_base), y - x, gdt);
                gx = gbuf;
            }
            adamw_update(w + (x - w_base), gx, m + (x - a), v + (x - a), y - x, &opt->cfg, lr, t, grad_scale,
                         pt->is_matrix);
        }
        adam8_encode(m, v, len, opt->m8 + (a - opt->lo), opt->v8 + (a - opt->lo), &opt->m_scale[k], &opt->v_scale[k]);
    }
}

// After a saved state was read, at ZeRO stage 0 on several ranks: each rank
// read its own block of S parameters into w (the fp32 weights) and the
// moments; every rank's block goes to every rank (they are replicas).
void optimizer_state_allgather(Optimizer *opt, float *w, const Shard *sh) {
    long long bytes = (long long)sh->size * sizeof(float);
    comm_allgather_block(sh->comm, w, bytes);
    if (opt->bits == 8) {  // the codes, and a scale per ADAM_BLOCK (S is whole blocks)
        long long scales = (long long)(sh->size / ADAM_BLOCK) * sizeof(float);
        comm_allgather_block(sh->comm, opt->m8, (long long)sh->size);
        comm_allgather_block(sh->comm, opt->v8, (long long)sh->size);
        comm_allgather_block(sh->comm, opt->m_scale, scales);
        comm_allgather_block(sh->comm, opt->v_scale, scales);
    } else {
        comm_allgather_block(sh->comm, opt->m, bytes);
        comm_allgather_block(sh->comm, opt->v, bytes);
    }
}

#endif
