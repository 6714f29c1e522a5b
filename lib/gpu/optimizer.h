// gpu/optimizer.h — the end of a step on the GPU: the gradients' norm, AdamW
// (its state, m and v, lives on the GPU with the model) and the step's
// numbers, which stay on the GPU until the host reads them once, after the step.
#ifndef GPTMEM_GPU_OPTIMIZER_H
#define GPTMEM_GPU_OPTIMIZER_H

#include <math.h>
#include <string.h>
#include "core/adamw.h"
#include "cuda/api.h"
#include "gpu/gpt.h"
#include "gpu/head.h"
#include "gpu/weights.h"
#include "parallel/tensor.h"
#include "io/state_arrays.h"
#include "parallel/comm.h"

// The sum of squares of g[0..n) (dt, on the GPU), on the host: the kernel's partial sums added in order.
static double gpu_host_sum_squares(GpuGPT *m, int dt, const void *g, size_t n) {
    double part[GPU_NORM_BLOCKS], s = 0.0;
    cu_sum_squares_partials(dt, m->norm_partials, g, n);
    gpu_download(part, m->norm_partials, sizeof part);
    for (int i = 0; i < GPU_NORM_BLOCKS; i++) s += part[i];
    return s;
}

// --tp: the gradients' squares a run of the share at a time, each run's summed on the GPU
// (parallel/tensor.h tp_sum_squares; g: element 0 = parameter lo, in dt).
typedef struct {
    GpuGPT *m;
    const char *g;
    int dt;
} GpuGrads;

static double gpu_squares(void *ctx, size_t at, size_t n) {
    const GpuGrads *q = ctx;
    return gpu_host_sum_squares(q->m, q->dt, q->g + at * dtype_size(q->dt), n);
}

// The gradients' norm and AdamW's scale (core/adamw.h step_grad_scale) into
// the step's numbers: the sum of squares of the (reduced) gradients this rank
// owns, all of them on one rank. On one rank it all stays on the GPU. With
// several (or --tp), the sums come to the host (a wait: the ranks must add
// their sums, in rank order), and the total and the scale go back.
void gpu_gpt_grad_norm(GpuGPT *m, float loss_scale, float clip) {
    const Trained *t = &m->train;
    const Shard *sh = &t->shard;
    const void *g = (const char *)t->g + (sh->own_lo - t->g_base) * dtype_size(t->gdt);
    size_t n = sh->own_hi - sh->own_lo;
    double mine;
    GpuGrads q = {m, (const char *)g, t->gdt};
    if (m->tp.size > 1) mine = tp_sum_squares(&m->tp, &m->cfg, sh->own_lo, sh->own_hi, gpu_squares, &q);
    else if (sh->nranks == 1) {
        cu_sum_squares_partials(t->gdt, m->norm_partials, g, n);
        cu_grad_scale(m->numbers, m->norm_partials, GPU_NORM_BLOCKS, loss_scale, clip);
        return;
    } else mine = gpu_host_sum_squares(m, t->gdt, g, n);
    double total = comm_sum_ordered(m->shard.comm, mine);
    m->host_scale = step_grad_scale(total, loss_scale, clip);
    double two[2] = {total, m->host_scale};  // STEP_SUMSQ, STEP_SCALE
    gpu_upload(m->numbers + STEP_SUMSQ, two, sizeof two);
}

// The scale of gpu_gpt_grad_norm on the host (--offload's host step reads it): a
// copy from the GPU on one rank (a wait for the step so far), and known
// already on several (gpu_gpt_grad_norm summed the ranks' norms there).
float gpu_gpt_step_scale(GpuGPT *m) {
    if (m->shard.nranks > 1) return m->host_scale;
    double v[GPU_STEP_NUMBERS];
    gpu_download(v, m->numbers, sizeof v);
    return (float)v[STEP_SCALE];
}

// The step's loss sum (the micro-batches' mean losses added up since the last
// read) and sum of squares, in one copy: the host's one wait for the GPU in a
// step. The loss sum starts again from 0.
void gpu_gpt_read_numbers(GpuGPT *m, double *loss_sum, double *sumsq) {
    double v[GPU_STEP_NUMBERS];
    gpu_head_loss(m);  // (a forward's loss still due: gpu/head.h)
    gpu_download(v, m->numbers, sizeof v);
    *loss_sum = v[STEP_LOSS], *sumsq = v[STEP_SUMSQ];
    gpu_zero(m->numbers + STEP_LOSS, sizeof(double));
}

// One AdamW step over the parameters this rank updates (its share from stage
// 1 on; all of them at stage 0, where every rank is a replica), tensor by
// tensor so weight decay reaches only 2-D weights (optim/optimizer.h
// optimizer_step), up to CU_ADAMW_SEGMENTS tensors a launch; the 16-bit weights
// are rewritten from the master. Stages 1, 2 then all-gather every rank's
// updated block. The gradients' scale is in the step's numbers (gpu_gpt_grad_norm):
// a NaN there skips the step in the kernels, and, with several ranks, here
// already (no gathers). The trained set's arrays (optim/trained.h): the model's
// master and 16-bit weights, or --lora's adapters (fp32, their own master).
static void gpu_adamw_launch(GpuGPT *m, size_t a0, const AdamwSegment *segs, int n, float lr, float b1c,
                             float b2c) {  // segs' offsets count from element a0
    const AdamWConfig *adam = &m->adam;
    Trained *t = &m->train;
    size_t st = a0 - t->opt.lo;
    cu_adamw_segments(t->cdt, t->gdt, t->w + (a0 - t->w_base),
                      t->cdt == DT_FP32 ? NULL : (char *)t->compute + (a0 - t->c_base) * dtype_size(t->cdt),
                      (char *)t->g + (a0 - t->g_base) * dtype_size(t->gdt), t->opt.m + st, t->opt.v + st, segs, n, lr,
                      adam->beta1, adam->beta2, adam->eps, b1c, b2c, m->numbers + STEP_SCALE);
}
void gpu_gpt_adamw_step(GpuGPT *m, float lr, int t) {
    const Trained *tr = &m->train;
    const Shard *sh = &tr->shard;
    const AdamWConfig *adam = &m->adam;
    if (sh->nranks > 1 && isnan(m->host_scale)) return;
    float b1c = 1.0f - powf(adam->beta1, (float)t), b2c = 1.0f - powf(adam->beta2, (float)t);
    size_t lo, hi, a0 = 0;
    shard_state_range(sh, &lo, &hi);
    AdamwSegment segs[CU_ADAMW_SEGMENTS];
    int n = 0;
    for (int i = 0; i < tr->opt.ntensors; i++) {
        const ParamTensor *pt = &tr->opt.tensors[i];
        size_t a = pt->offset > lo ? pt->offset : lo, b = pt->offset + pt->count < hi ? pt->offset + pt->count : hi;
        if (a >= b) continue;
        if (n == 0) a0 = a;
        segs[n++] = (AdamwSegment){a - a0, b - a, pt->is_matrix ? adam->weight_decay : 0.0f};
        if (n == CU_ADAMW_SEGMENTS) gpu_adamw_launch(m, a0, segs, n, lr, b1c, b2c), n = 0;
    }
    if (n) gpu_adamw_launch(m, a0, segs, n, lr, b1c, b2c);
    if (gathers_updates(sh)) gpu_zero_allgather_blocks(m->train_comm, tr->compute, dtype_size(tr->cdt));
}

// This rank's part of a saved state (io/state_arrays.h), in device memory: the
// fp32 weights and m and v of the parameters it owns (all of them on one rank);
// with --lora the adapters' (the frozen model is the --init's or the seed's).
NetState gpu_gpt_state(GpuGPT *m) {
    const Trained *t = &m->train;
    NetState st;
    memset(&st, 0, sizeof st);
    st.lo = t->shard.own_lo, st.hi = t->shard.own_hi, st.on_gpu = 1;
    st.w = t->w + (st.lo - t->w_base);
    st.m = t->opt.m + (st.lo - t->opt.lo), st.v = t->opt.v + (st.lo - t->opt.lo);
    return st;
}

// After a saved state was read into those arrays: at stage 0 on several ranks
// every rank gathers every rank's part (they are replicas); then the compute
// weights follow the fp32 weights.
void gpu_gpt_state_loaded(GpuGPT *m) {
    Trained *t = &m->train;
    if (replicas(&t->shard)) {
        gpu_zero_allgather_blocks(m->train_comm, t->w, sizeof(float));
        gpu_zero_allgather_blocks(m->train_comm, t->opt.m, sizeof(float));
        gpu_zero_allgather_blocks(m->train_comm, t->opt.v, sizeof(float));
    }
    gpu_trained_sync(m);
}

#endif
