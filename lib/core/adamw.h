// core/adamw.h — AdamW's update, the learning-rate schedule, gradient
// clipping and the fp16 loss scale: the arithmetic of a step, the same on
// both devices (the GPU's kernels in cuda/adamw.cu compute the same formulas;
// the optimizer's state lives with each device's model).
#ifndef GPTMEM_ADAMW_H
#define GPTMEM_ADAMW_H

#include <math.h>
#include <stddef.h>
#include "core/sizes.h"

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

// The factor AdamW multiplies a step's gradients by, from their sum of squares:
// 1/loss_scale (fp16 scales the loss up, --loss-scale) times the clip scale of
// the true norm sqrt(sumsq)/loss_scale. NaN when that norm is not finite (an
// fp16 overflow): AdamW then skips the step. cuda/adamw.cu's grad_scale_kernel
// computes the same on the GPU.
float step_grad_scale(double sumsq, float loss_scale, float max_norm) {
    double norm = sqrt(sumsq) / loss_scale;
    if (!isfinite(norm)) return NAN;
    return clip_scale(norm, max_norm) / loss_scale;
}

// One AdamW update of params[0..n) from grads (multiplied by grad_scale first,
// which carries the clipping). `decay` says whether this range is a 2-D weight.
// t is the 1-based step count, for bias correction.
//   g = grad * grad_scale
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   mhat = m / (1 - b1^t); vhat = v / (1 - b2^t)
//   p -= lr * (mhat / (sqrt(vhat) + eps) + wd * p)
// Each multiply-add is an fmaf (one rounding), the others round on their own: the roundings are
// the source's, not the compiler's choice, and cuda/adamw.cu's kernels spell the same ones, so the
// GPU's AdamW and this one (--offload's, on the host) give the same bits.
void adamw_update(float *params, const float *grads, float *m, float *v, size_t n, const AdamWConfig *cfg, float lr,
                  int t, float grad_scale, int decay) {
    float b1c = 1.0f - powf(cfg->beta1, (float)t), b2c = 1.0f - powf(cfg->beta2, (float)t);
    float wd = decay ? cfg->weight_decay : 0.0f;
    // the constants in locals: read through cfg, each store to m, v or params could have changed them
    // (the compiler cannot tell), which kept the loop from being vectorized
    const float b1 = cfg->beta1, b2 = cfg->beta2, eps = cfg->eps;
#pragma omp parallel for schedule(static) if (n >= PARALLEL_MIN)
    for (size_t i = 0; i < n; i++) {
        float g = grads[i] * grad_scale;
        float mi = fmaf(b1, m[i], (1.0f - b1) * g);      // b1 m + (1-b1) g
        float vi = fmaf(b2, v[i], (1.0f - b2) * g * g);  // b2 v + (1-b2) g^2
        m[i] = mi;
        v[i] = vi;
        float mhat = mi / b1c, vhat = vi / b2c;
        float u = fmaf(wd, params[i], mhat / (sqrtf(vhat) + eps));  // mhat / (sqrt(vhat) + eps) + wd p
        params[i] = fmaf(-lr, u, params[i]);                         // p - lr u
    }
}

// fp16 dynamic loss scaling: halve the scale on an overflow (the step was
// skipped), double it after LOSS_SCALE_WINDOW good steps in a row. bf16 needs
// none: it has fp32's exponent range, so its gradients neither overflow nor
// underflow.
enum { LOSS_SCALE_WINDOW = 1000 };

void update_loss_scale(float *loss_scale, int *good_steps, int skipped) {
    if (skipped) {
        *loss_scale = *loss_scale / 2 > 1.0f ? *loss_scale / 2 : 1.0f;
        *good_steps = 0;
    } else if (++*good_steps == LOSS_SCALE_WINDOW) {
        *loss_scale *= 2;
        *good_steps = 0;
    }
}

#endif
