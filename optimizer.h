// optimizer.h — AdamW, the learning-rate schedule, and gradient clipping.
#ifndef GPTMEM_OPTIMIZER_H
#define GPTMEM_OPTIMIZER_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include "memory.h"
#include "model.h"
#include "dtype.h"

typedef struct {
    float lr;            // peak learning rate
    float beta1, beta2;  // 0.9, 0.95
    float eps;           // 1e-8
    float weight_decay;  // applied only to 2-D weights (matrices and embeddings)
    int warmup;          // linear warmup steps
    int total_steps;     // cosine decay reaches min_lr at the last step
    float min_lr_frac;   // min_lr = lr * min_lr_frac
} AdamWConfig;

// Learning rate at step s (0-based): linear warmup from lr/warmup to lr over
// `warmup` steps, then cosine decay from lr to min_lr at the last step.
float lr_at(const AdamWConfig *cfg, int s) {
    if (s < cfg->warmup) return cfg->lr * (float)(s + 1) / (float)cfg->warmup;
    int decay_steps = cfg->total_steps - cfg->warmup;
    if (decay_steps <= 1) return cfg->lr;
    float progress = (float)(s - cfg->warmup) / (float)(decay_steps - 1);
    if (progress > 1.0f) progress = 1.0f;
    float min_lr = cfg->lr * cfg->min_lr_frac;
    return min_lr + 0.5f * (cfg->lr - min_lr) * (1.0f + cosf(3.14159265358979f * progress));
}


// Scale that clips the global gradient norm to max_norm (1 if no clipping needed
// or clipping is off, max_norm <= 0).
float clip_scale(double grad_norm, float max_norm) {
    if (max_norm <= 0.0f || grad_norm <= max_norm) return 1.0f;
    return (float)(max_norm / (grad_norm + 1e-6));
}

// One AdamW update of params[0..n) from grads (multiplied by grad_scale first,
// which carries the clipping). `decay` says whether this range is a 2-D weight.
// t is the 1-based step count, for bias correction.
//   g = grad * grad_scale
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   mhat = m / (1 - b1^t); vhat = v / (1 - b2^t)
//   p -= lr * (mhat / (sqrt(vhat) + eps) + wd * p)
void adamw_update(float *params, const float *grads, float *m, float *v, size_t n, const AdamWConfig *cfg, float lr,
                  int t, float grad_scale, int decay) {
    float b1c = 1.0f - powf(cfg->beta1, (float)t), b2c = 1.0f - powf(cfg->beta2, (float)t);
    float wd = decay ? cfg->weight_decay : 0.0f;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float g = grads[i] * grad_scale;
        float mi = cfg->beta1 * m[i] + (1.0f - cfg->beta1) * g;
        float vi = cfg->beta2 * v[i] + (1.0f - cfg->beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        float mhat = mi / b1c, vhat = vi / b2c;
        params[i] -= lr * (mhat / (sqrtf(vhat) + cfg->eps) + wd * params[i]);
    }
}

// ---------------------------------------------------------------------------
// The optimizer: AdamW state for every parameter, applied tensor by tensor so
// that weight decay reaches only the 2-D weights.

typedef struct {
    AdamWConfig cfg;
    size_t lo, hi;  // the parameters this rank updates: all of them, or its ZeRO shard
    float *m, *v;   // AdamW state; element 0 is parameter lo (ledger adam_m, adam_v)
    ParamTensor *tensors;
    int ntensors;
} Optimizer;

// State for the parameters [lo, hi), n_alloc elements each (>= hi - lo: a
// ZeRO shard is padded so every rank allocates the same).
void optimizer_build(Optimizer *opt, const AdamWConfig *cfg, const GPTConfig *model, size_t lo, size_t hi,
                     size_t n_alloc) {
    opt->cfg = *cfg;
    opt->lo = lo;
    opt->hi = hi;
    opt->m = mem_alloc(MEM_ADAM_M, n_alloc * sizeof(float), "adam_m");
    opt->v = mem_alloc(MEM_ADAM_V, n_alloc * sizeof(float), "adam_v");
    opt->ntensors = param_tensor_count(model);
    opt->tensors = malloc(sizeof(ParamTensor) * opt->ntensors);
    param_tensors(model, opt->tensors);
}

void optimizer_free(Optimizer *opt) {
    mem_free(opt->m);
    mem_free(opt->v);
    free(opt->tensors);
}

// One AdamW step at learning rate lr over this optimizer's parameters; t is
// the 1-based update count, grad_scale multiplies every gradient first (it
// carries the clipping and, with fp16, the loss-scale division). The fp32
// weights w and the gradients g (stored as dtype gdt) are arrays whose
// element 0 is parameter w_base / g_base. 16-bit gradients are widened
// GRAD_BLOCK at a time into a buffer on the stack.
void optimizer_step(Optimizer *opt, float *w, size_t w_base, const void *g, size_t g_base, int gdt, float lr, int t,
                    float grad_scale) {
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

#endif
