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

// What the step updates, as the link moves it: the trained set's weights as the forward reads them (in
// their dtype) and its gradients (in theirs), each array with the flat index of its element 0.
typedef struct {
    char *w, *g;
    size_t w_base, g_base, we, ge;
    int dtype;  // the weights'
    const Shard *shard;
} Updated;

static Updated updated(GPT *m) {
    const Trained *t = &m->train;
    return (Updated){t->compute, t->g, t->c_base, t->g_base, dtype_size(t->cdt), dtype_size(t->gdt), t->cdt, &t->shard};
}

static void cpu_down(void *model, int k, void *landing, size_t a, size_t b) {
    Updated u = updated(model);
    (void)k;
    double t0 = now_seconds();
    memcpy(landing, u.g + (a - u.g_base) * u.ge, (b - a) * u.ge);
    traffic_add(TR_DOWN, (long long)((b - a) * u.ge), now_seconds() - t0);
}

static void cpu_up(void *model, int k, const void *upload, size_t a, size_t b) {
    Updated u = updated(model);
    (void)k;
    double t0 = now_seconds();
    memcpy(u.w + (a - u.w_base) * u.we, upload, (b - a) * u.we);
    traffic_add(TR_UP, (long long)((b - a) * u.we), now_seconds() - t0);
}

static void cpu_wait(void *model, int k) { (void)model, (void)k; }  // a memcpy is done when it returns

static void cpu_allgather(void *model) {
    Updated u = updated(model);
    zero_allgather_weights(u.shard, u.w, u.dtype);
}

static void *cpu_pinned(size_t bytes, const char *name) { return mem_alloc_at(LOC_PINNED, MEM_COMM, bytes, name); }

// The pinned shard of opt,params is the model's weights: the link's when they are what the step trains (with
// --lora they are frozen, and the step writes none of them).
OffloadLink cpu_offload_link(GPT *m) {
    const Trained *t = &m->train;
    OffloadLink l = {m, t->cdt, t->gdt, cpu_down, cpu_wait, cpu_up, cpu_wait, cpu_allgather, cpu_pinned, mem_free, NULL, 0};
    if ((m->plan.offload & OFFLOAD_PARAMS) && t->compute == compute_weights(m)) l.shard = t->compute, l.shard_base = t->c_base;
    return l;
}

#endif
