// memory/step_time.h — time beside the bytes (--gpu NAME): how long a step would take on the card in
// mind, from the FLOPs the step does and the rate the card does them at.
//
//   a step's FLOPs   = D x (F + the rebuilds' FLOPs a token),  D = the step's tokens on one GPU
//                      (--batch x --seq-len x --accum), F = the model's FLOPs a token: 6 P for the
//                      weights' forward and backward (Kaplan et al.'s 6ND over a run) and 6 L T C for
//                      attention's two T x T products (memory/predict.h model_flops_per_token; with
//                      --lora the frozen weights' 4 P and the adapters' own: run_flops_per_token)
//   the rate         = the card's dense peak for the dtype (core/gpus.h: tensor cores for bf16 and
//                      fp16, CUDA cores for fp32) x MFU
//   MFU              = --mfu, else what gptmem measured on that card (GPT-2 124M, bf16 --flash: its
//                      tokens a second x its F, over the card's bf16 peak), else MFU_ASSUMED
//
// The compute alone, at that MFU: gptmem's naive attention and fp32 reference kernels run far below
// it (doc/cuda.md), and --offload's link time is apart (the dry run's link line).
#ifndef GPTMEM_STEP_TIME_H
#define GPTMEM_STEP_TIME_H

#include <stdio.h>
#include <string.h>
#include "core/clock.h"
#include "core/config.h"
#include "core/gpus.h"
#include "core/plan.h"
#include "core/saved.h"
#include "core/settings.h"
#include "memory/predict.h"

// Large dense training runs reach 40-50% of the peak (PaLM 46%, Megatron-LM's GPT runs 40-52%); gptmem
// assumes the lower end where it has not measured the card itself.
static const double MFU_ASSUMED = 0.40;

typedef struct {
    double peak;        // FLOP/s, the card's dense peak for the dtype
    double mfu;         // the fraction of it assumed
    char source[160];   // where the MFU comes from
    double extra;       // the FLOPs a token the plan adds (rebuilds, --fused-ce's second pass)
    double step_flops;  // a step's FLOPs on one GPU
    double seconds;     // a step's time
    double run_tokens;  // the tokens --steps trains: a step's on each data-parallel rank (--tp: each group), all of them
} StepTime;

// The MFU gptmem measured on card g: GPT-2 124M's FLOPs a token at T 1024 x the tokens a second, over
// the bf16 peak; 0 where it never ran there.
double card_measured_mfu(const GpuModel *g) {
    const GPTConfig *gpt2 = NULL;
    for (int i = 0; i < n_model_presets; i++)
        if (!strcmp(model_presets[i].name, "gpt2")) gpt2 = &model_presets[i].cfg;
    if (!g->measured_tok_s || !gpt2) return 0;
    return g->measured_tok_s * model_flops_per_token(gpt2, 1024) / (g->tflops16 * 1e12);
}

// The FLOPs a token the plan adds to the model's: the tensors its backward rebuilds (core/saved.h) and
// --fused-ce's second pass over the head, 2 C Vp (--fit's "extra FLOPs").
double plan_extra_token_flops(const Settings *s, const Plan *p) {
    const GPTConfig *c = &s->cfg;
    return c->layers * recompute_flops_per_token_layer(c, p->rebuilds, s->seq_len) +
           (p->tiled_head ? 2.0 * c->channels * padded_vocab(c) : 0);
}

// A step of these settings on card g, with `extra_token_flops` more FLOPs a token (what the plan rebuilds,
// --fused-ce's second pass): its FLOPs, the rate and the time.
StepTime step_time(const Settings *s, const GpuModel *g, double extra_token_flops) {
    StepTime t;
    double measured = card_measured_mfu(g);
    t.peak = (s->dtype == DT_FP32 ? g->tflops32 : g->tflops16) * 1e12;
    t.mfu = s->mfu > 0 ? s->mfu : measured > 0 ? measured : MFU_ASSUMED;
    if (s->mfu > 0) snprintf(t.source, sizeof t.source, "--mfu %g", s->mfu);
    else if (measured > 0)
        snprintf(t.source, sizeof t.source, "what gptmem measured on this card, GPT-2 124M bf16 --flash at %.0f tok/s (%s); --mfu sets another", g->measured_tok_s,
                 g->measured);
    else snprintf(t.source, sizeof t.source, "assumed, a large dense run's (gptmem has not run on this card); --mfu sets another");
    double tokens = (double)s->batch * s->seq_len * s->accum;
    t.extra = extra_token_flops;
    t.step_flops = tokens * (run_flops_per_token(s) + extra_token_flops);
    t.seconds = t.step_flops / (t.peak * t.mfu);
    int replicas = (s->ranks > 1 ? s->ranks : 1) / (s->tp > 1 ? s->tp : 1);  // (a --tp group of T GPUs trains one batch)
    t.run_tokens = tokens * replicas * s->steps;
    return t;
}

// ... with the FLOPs the run's own plan adds.
StepTime run_step_time(const Settings *s, const GpuModel *g) {
    Plan plan = make_plan(s, s->ranks);
    return step_time(s, g, plan_extra_token_flops(s, &plan));
}

// --gpu: a step's time beside its bytes, and --steps' on every GPU.
void print_step_time(const Settings *s, const StepTime *st) {
    StepTime t = *st;
    int gpus = s->ranks > 1 ? s->ranks : 1;
    double tokens = (double)s->batch * s->seq_len * s->accum;
    char run[32];
    format_duration(run, sizeof run, t.seconds * s->steps);
    printf("time on it (memory/step_time.h): a step is %.3g FLOPs a GPU, %.0f tokens x %.3g (%s a token%s%s); "
           "at %.0f TFLOP/s (its %s dense peak) x %.1f%% MFU: %.3g s a step\n", t.step_flops, tokens, t.step_flops / tokens,
           s->lora.rank ? "4 P + the adapters' + 6 L T C" : "6 P + 6 L T C",
           s->lora.rank ? ", the frozen model getting no weight gradient" : "", t.extra > 0 ? ", and what the plan rebuilds" : "",
           t.peak / 1e12, dtype_name[s->dtype], 100 * t.mfu, t.seconds);
    printf("  the MFU: %s; --steps %d, %.3g tokens: %s, %.3g GPU-hours on %d GPU%s\n", t.source, s->steps, t.run_tokens, run,
           t.seconds * s->steps * gpus / 3600, gpus, gpus > 1 ? "s" : "");
}

#endif
