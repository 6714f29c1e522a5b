// optim/trained.h — what a step trains: the model's own parameters, or with
// --lora its adapters (the rest frozen), chosen once where the model is built
// (nanoGPT hands AdamW the parameters that require a gradient; PEFT freezes
// all but the adapters). The end of the step reads this set and nothing else:
//
//   zero-grad        g = 0
//   the reduction    stages 0, 1: g summed over the ranks, through the chunk buffers
//   the norm         sqrt(sum g^2) over the part this rank owns, added in rank order
//   AdamW            w -= lr (m^ / (sqrt(v^) + eps) + wd w), over this rank's part
//   the sync         the weights the forward reads follow w (rounded to 16 bits;
//                    stages 1, 2 all-gather every rank's updated part)
//   a saved state    w, m and v of this rank's part (cpu/optimizer.h gpt_state)
//
// In the buffer table it is the lecture's formula: 16 bytes a trained
// parameter in mixed precision (w in fp32 4, g 2, m 4, v 4) beside the frozen
// model's 2 (or QLoRA's half a byte), and 16 in fp32 (w is then the weights
// the forward reads). Both devices hold one; the CPU's functions are here, the
// GPU's read the same fields (gpu/optimizer.h).
#ifndef GPTMEM_OPTIM_TRAINED_H
#define GPTMEM_OPTIM_TRAINED_H

#include <string.h>
#include "core/dtype.h"
#include "memory/ledger.h"
#include "optim/optimizer.h"
#include "parallel/zero.h"

// How the buffer table holds a trained set: the arrays that are its own (w when it is not the weights
// the forward reads, g, AdamW's m and v, the chunk buffers), each into the field `at` points at, its
// name, category and size; a size of 0 is a row not made (w the forward's own weights; nothing to sum).
typedef struct {
    void **w, **g, **compute;  // (compute: the weights the forward reads, the model's row or w)
    int w_category;
    const char *w_name, *g_name, *reduce_name, *across_name;
    size_t w_bytes, g_bytes, reduce_bytes, across_bytes;
    size_t state;  // AdamW's m and v: this rank's part S (0: off the device, --offload opt)
    int adapters;  // AdamW's rows named as the adapters' (cpu/gpt.h adam_buffers)
} TrainedRows;

typedef struct {
    Shard shard;                    // its layout over the ranks (parallel/zero.h)
    float *w;                       // fp32: what AdamW updates; element 0 is parameter w_base
    size_t w_base;
    void *compute;                  // the weights the forward reads: w itself, or a 16-bit copy (cdt)
    int cdt;
    size_t c_base;
    void *g;                        // the gradients, in gdt
    int gdt;
    size_t g_base;
    Optimizer opt;                  // AdamW's m and v, over the set's tensors (optim/optimizer.h)
    float *reduce_buf, *across_buf; // stages 0, 1: the chunk that sums g over the ranks; --shard-group's
    TrainedRows rows;
} Trained;

// AdamW's m and v of S parameters (fp32, or with --adam-bits 8 codes and an fp32 scale per ADAM_BLOCK):
// the model's (names[0]) or --lora's adapters' (names[1]). Returns the buffers' count, n and 6 more.
int adam_buffers(Optimizer *o, Buffer *b, int n, size_t S, int adapters) {
    static const char *const names[2][6] = {
        {"adam_m", "adam_v", "adam_m (8-bit)", "adam_m scales", "adam_v (8-bit)", "adam_v scales"},
        {"adapter adam_m", "adapter adam_v", "adapter adam_m (8-bit)", "adapter adam_m scales", "adapter adam_v (8-bit)",
         "adapter adam_v scales"}};
    const char *const *w = names[adapters];
    int codes = o->bits == 8;
    size_t moment = adam_moment_bytes(S, o->bits), scales = adam_scale_bytes(S, o->bits);
    b[n++] = (Buffer){(void **)&o->m, LOC_DEVICE, MEM_ADAM_M, w[0], codes ? 0 : moment};
    b[n++] = (Buffer){(void **)&o->v, LOC_DEVICE, MEM_ADAM_V, w[1], codes ? 0 : moment};
    b[n++] = (Buffer){(void **)&o->m8, LOC_DEVICE, MEM_ADAM_M, w[2], codes ? moment : 0};
    b[n++] = (Buffer){(void **)&o->m_scale, LOC_DEVICE, MEM_ADAM_M, w[3], scales};
    b[n++] = (Buffer){(void **)&o->v8, LOC_DEVICE, MEM_ADAM_V, w[4], codes ? moment : 0};
    b[n++] = (Buffer){(void **)&o->v_scale, LOC_DEVICE, MEM_ADAM_V, w[5], scales};
    return n;
}

// Its arrays once the buffer table made them (the weights the forward reads are the model's, or w).
void trained_view(Trained *t) {
    t->w = *t->rows.w, t->g = *t->rows.g, t->compute = *t->rows.compute;
}

// Its rows of the buffer table, in three places of it (the order the buffers are made in): w (its own
// fp32 copy) and g; the chunks that sum g over the ranks; AdamW's m and v. Each returns the buffers'
// count: n and 2 more, 2 more, 6 more.
int trained_arrays(Trained *t, Buffer *b, int n) {
    const TrainedRows *r = &t->rows;
    b[n++] = (Buffer){r->w, LOC_DEVICE, r->w_category, r->w_name, r->w_bytes};
    b[n++] = (Buffer){r->g, LOC_DEVICE, MEM_GRADS, r->g_name, r->g_bytes};
    return n;
}
int trained_chunks(Trained *t, Buffer *b, int n) {
    const TrainedRows *r = &t->rows;
    b[n++] = (Buffer){(void **)&t->reduce_buf, LOC_DEVICE, MEM_COMM, r->reduce_name, r->reduce_bytes};
    b[n++] = (Buffer){(void **)&t->across_buf, LOC_DEVICE, MEM_COMM, r->across_name, r->across_bytes};
    return n;
}
int trained_moments(Trained *t, Buffer *b, int n) { return adam_buffers(&t->opt, b, n, t->rows.state, t->rows.adapters); }

// The chunk buffers' bytes for gradients of the layout sh: stages 0, 1 sum them N chunks at a time, and
// --shard-group across the groups (parallel/zero.h).
size_t trained_reduce_bytes(const Shard *sh) {
    size_t k = sh->size < REDUCE_CHUNK ? sh->size : REDUCE_CHUNK;
    return reduces_full_grads(sh) ? (size_t)sh->nranks * k * sizeof(float) : 0;
}

// A new step: the gradients start from 0.
void trained_zero_grad(Trained *t) { memset(t->g, 0, shard_grads_len(&t->shard) * dtype_size(t->gdt)); }

// Stages 0, 1 on several ranks: the whole gradients summed over the ranks (stages 2, 3 summed each piece's
// in the backward); with --shard-group, inside the group, then the part this rank's AdamW reads across them.
void trained_reduce(Trained *t) {
    if (reduces_full_grads(&t->shard)) zero_reduce_full(&t->shard, t->g, t->reduce_buf, t->gdt);
    zero_reduce_across(&t->shard, t->g, t->across_buf, t->gdt);
}

// The weights the forward reads follow the updated w: rounded into the 16-bit copy (fp32: the same
// array), then at stages 1, 2 every rank's updated part all-gathered.
void trained_sync(Trained *t) {
    if (t->cdt != DT_FP32) {
        size_t lo, hi;
        shard_state_range(&t->shard, &lo, &hi);
        dtype_store((uint16_t *)t->compute + (lo - t->c_base), t->w + (lo - t->w_base), hi - lo, t->cdt);
    }
    zero_allgather_weights(&t->shard, t->compute, t->cdt);
}

// One AdamW step (t 1-based) over the part this rank updates, with the gradients' scale; then the sync.
void trained_step(Trained *t, float lr, int step, float grad_scale) {
    optimizer_step(&t->opt, t->w, t->w_base, t->g, t->g_base, t->gdt, lr, step, grad_scale);
    trained_sync(t);
}

// Are the weights the forward reads the same on every rank (parallel/zero.h)? 1 yes, 0 no.
int trained_replicas_identical(const Trained *t) { return zero_replicas_identical(&t->shard, t->compute, t->cdt); }

// After a saved state was read into those arrays: at stage 0 on several ranks every rank gathers every
// rank's part (they are replicas); then the sync.
void trained_state_loaded(Trained *t) {
    if (replicas(&t->shard)) optimizer_state_allgather(&t->opt, t->w, &t->shard);
    trained_sync(t);
}

#endif
