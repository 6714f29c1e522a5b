// cpu/offload.h — --offload on the CPU: the device's side of optim/offload.h.
// On the CPU the device and the host are the same RAM, so the host's side
// keeps what a GPU would need apart in arrays of its own, and these calls
// copy between them where a GPU would copy over the link (memcpy, counted and
// timed as the link's traffic): the ledger's rows and the traffic are a GPU's.
// The page-locked buffers are RAM tracked at the ledger's `pinned` location. With --lora the states
// offloaded are the adapters'.
#ifndef GPTMEM_CPU_OFFLOAD_H
#define GPTMEM_CPU_OFFLOAD_H

#include <string.h>
#include "core/clock.h"
#include "core/dtype.h"
#include "core/traffic.h"
#include "cpu/gpt.h"
#include "memory/ledger.h"
#include "optim/offload.h"
#include "parallel/zero.h"

static void cpu_down(void *model, int k, void *landing, size_t a, size_t b) {
    GPT *m = model;
    (void)k;
    size_t e = dtype_size(m->grad_dtype);
    double t0 = now_seconds();
    memcpy(landing, (const char *)gpt_grads(m) + (a - m->grads_base) * e, (b - a) * e);
    traffic_add(TR_DOWN, (long long)((b - a) * e), now_seconds() - t0);
}

static void cpu_up(void *model, int k, const void *upload, size_t a, size_t b) {
    GPT *m = model;
    size_t e = dtype_size(m->dtype);
    (void)k;
    double t0 = now_seconds();
    memcpy((char *)compute_weights(m) + (a - m->params_base) * e, upload, (b - a) * e);
    traffic_add(TR_UP, (long long)((b - a) * e), now_seconds() - t0);
}

static void cpu_wait(void *model, int k) { (void)model, (void)k; }  // a memcpy is done when it returns

static void cpu_allgather(void *model) {
    GPT *m = model;
    zero_allgather_weights(&m->shard, compute_weights(m), m->dtype);
}

static void *cpu_pinned(size_t bytes, const char *name) { return mem_alloc_at(LOC_PINNED, MEM_COMM, bytes, name); }

// --lora: what the step updates is the adapters (fp32, their own shard layout): their gradients down,
// their new values up, and at ZeRO stages 1 and 2 every rank's all-gathered.
static void cpu_lora_down(void *model, int k, void *landing, size_t a, size_t b) {
    GPT *m = model;
    (void)k;
    double t0 = now_seconds();
    memcpy(landing, m->lora.g + (a - shard_grads_base(&m->lora.shard)), (b - a) * sizeof(float));
    traffic_add(TR_DOWN, (long long)((b - a) * sizeof(float)), now_seconds() - t0);
}

static void cpu_lora_up(void *model, int k, const void *upload, size_t a, size_t b) {
    GPT *m = model;
    (void)k;
    double t0 = now_seconds();
    memcpy(m->lora.w + (a - shard_weights_base(&m->lora.shard)), upload, (b - a) * sizeof(float));
    traffic_add(TR_UP, (long long)((b - a) * sizeof(float)), now_seconds() - t0);
}

static void cpu_lora_allgather(void *model) {
    GPT *m = model;
    zero_allgather_weights(&m->lora.shard, m->lora.w, DT_FP32);
}

OffloadLink cpu_offload_link(GPT *m) {
    if (gpt_frozen(m))
        return (OffloadLink){m, DT_FP32, DT_FP32, cpu_lora_down, cpu_wait, cpu_lora_up, cpu_wait, cpu_lora_allgather,
                             cpu_pinned, mem_free, NULL, 0};
    OffloadLink l = {m, m->dtype, m->grad_dtype, cpu_down, cpu_wait, cpu_up, cpu_wait, cpu_allgather, cpu_pinned, mem_free, NULL, 0};
    if (m->plan.offload & OFFLOAD_PARAMS) l.shard = compute_weights(m), l.shard_base = m->params_base;
    return l;
}

#endif
