// cpu/optimizer.h — the end of a step on the CPU: the gradients' norm, AdamW
// (its state, m and v, is rows of the model's buffer table: cpu/gpt.h) and the
// step's numbers, which the host reads once the step is over. The twin of
// gpu/optimizer.h; the update itself is optim/optimizer.h's (core/adamw.h's
// arithmetic), which --offload runs on the same numbers (optim/offload.h).
#ifndef GPTMEM_CPU_OPTIMIZER_H
#define GPTMEM_CPU_OPTIMIZER_H

#include <math.h>
#include <string.h>
#include "core/adamw.h"
#include "cpu/gpt.h"
#include "cpu/weights.h"
#include "io/state_arrays.h"
#include "optim/state_view.h"
#include "optim/trained.h"
#include "parallel/comm.h"

// The gradients' norm and AdamW's scale (core/adamw.h step_grad_scale) into
// the step's numbers: the sum of squares of the (reduced) gradients each rank
// owns, added in rank order (one rank: all of them).
// --tp: the gradients' squares a run of the share at a time (parallel/tensor.h tp_sum_squares).
typedef struct {
    const char *g;  // the gradients, element 0 = parameter lo
    int dt;
} HostGrads;

static double host_squares(void *ctx, size_t at, size_t n) {
    const HostGrads *h = ctx;
    return sum_squares_dt(h->g + at * dtype_size(h->dt), n, h->dt);
}

void gpt_grad_norm(GPT *m, float loss_scale, float clip) {
    const Trained *t = &m->train;
    const Shard *sh = &t->shard;
    const char *g = (const char *)t->g + (sh->own_lo - t->g_base) * dtype_size(t->gdt);
    HostGrads h = {g, t->gdt};
    double mine = m->tp.size > 1 ? tp_sum_squares(&m->tp, &m->cfg, sh->own_lo, sh->own_hi, host_squares, &h)
                                 : sum_squares_dt(g, sh->own_hi - sh->own_lo, t->gdt);
    m->numbers.sumsq = comm_sum_ordered(sh->comm, mine);
    m->numbers.grad_scale = step_grad_scale(m->numbers.sumsq, loss_scale, clip);
}

// The scale of gpt_grad_norm (--offload's host step reads it).
float gpt_step_scale(const GPT *m) { return m->numbers.grad_scale; }

// The step's loss sum (the micro-batches' mean losses added up since the last
// read) and sum of squares. The loss sum starts again from 0.
void gpt_read_numbers(GPT *m, double *loss_sum, double *sumsq) {
    *loss_sum = m->numbers.loss_sum, *sumsq = m->numbers.sumsq;
    m->numbers.loss_sum = 0.0;
}

// One AdamW step (t 1-based) over the parameters this rank updates (its share
// from stage 1 on; all of them at stage 0, where every rank is a replica),
// with the scale of gpt_grad_norm; then the weights every rank computes with
// (the 16-bit copy; stages 1, 2 all-gather the updated shards). A NaN scale
// (an fp16 overflow) skips the step.
void gpt_adamw_step(GPT *m, float lr, int t) {
    if (isnan(m->numbers.grad_scale)) return;
    trained_step(&m->train, lr, t, m->numbers.grad_scale);
}

// This rank's part of a saved state (io/state_arrays.h): the fp32 weights and
// m and v of the parameters it owns (all of them on one rank); with --lora the
// adapters' (the frozen model is the --init's or the seed's).
NetState gpt_state(GPT *m) {
    Trained *t = &m->train;
    NetState st;
    memset(&st, 0, sizeof st);
    st.lo = t->shard.own_lo, st.hi = t->shard.own_hi;
    st.w = t->w + (st.lo - t->w_base);
    optimizer_state_moments(&t->opt, &st);
    return st;
}

// After a saved state was read into those arrays: at stage 0 on several ranks
// every rank gathers every rank's part (they are replicas); then the compute
// weights follow the fp32 weights.
void gpt_state_loaded(GPT *m) { trained_state_loaded(&m->train); }

#endif
