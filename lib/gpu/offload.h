// gpu/offload.h — --offload on the GPU: the device's side of optim/offload.h.
// The host runs AdamW a chunk at a time; these calls move a chunk over the
// link, through page-locked buffers (cudaMallocHost, in the ledger at the
// `pinned` location), so the copy engine reads and writes them directly.
// Every copy is queued on the one stream with an event after it, and the host
// waits for an event only when it needs that copy done:
//   down: a chunk's gradients into landing buffer k & 1; the host steps chunk
//         k after waiting for its event, having queued chunk k + 1's download
//         first, so that copy runs while the host steps chunk k;
//   up:   a chunk's new weights from upload buffer k & 1; the host writes that
//         buffer again (chunk k + 2) after waiting for its event, so the upload
//         of chunk k runs while the host steps chunk k + 1.
// The stream runs the copies in the order they were queued (down k + 1, up k,
// down k + 2, ...), so before waiting for chunk k's download the host waits
// for chunk k - 2's upload, which the stream runs first: each wait is then
// charged to its own row (--timing's "link down" and "link up": the host's
// waits, not the copies, which overlap host AdamW).
// With opt,params the weight shard itself is page-locked (gpu/gpt.h) and the
// gathers upload this rank's part (gpu_gather_weights).
#ifndef GPTMEM_GPU_OFFLOAD_H
#define GPTMEM_GPU_OFFLOAD_H

#include <math.h>
#include "core/clock.h"
#include "core/traffic.h"
#include "cuda/api.h"
#include "gpu/gpt.h"
#include "gpu/weights.h"
#include "memory/ledger.h"
#include "optim/offload.h"

// What the step updates, as the link moves it: the trained set's weights as the forward reads them (in their
// dtype) and its gradients (in theirs), each array with the flat index of its element 0 (cpu/offload.h's).
typedef struct {
    char *w, *g;
    size_t w_base, g_base, we, ge;
} GpuUpdated;

static GpuUpdated gpu_updated(GpuGPT *m) {
    const Trained *t = &m->train;
    return (GpuUpdated){t->compute, t->g, t->c_base, t->g_base, dtype_size(t->cdt), dtype_size(t->gdt)};
}

static void gpu_down(void *model, int k, void *landing, size_t a, size_t b) {
    GpuGPT *m = model;
    GpuUpdated u = gpu_updated(m);
    double t0 = now_seconds();
    gpu_download_queued(landing, u.g + (a - u.g_base) * u.ge, (b - a) * u.ge);
    gpu_event_record(m->offload_down_event[k]);
    m->offload_down_sent[k] = 1;
    g_traffic.queued = 1;
    traffic_add(TR_DOWN, (long long)((b - a) * u.ge), now_seconds() - t0);
}

// The time the host waits here is the download's, as seen from the host.
static void gpu_down_wait(void *model, int k) {
    GpuGPT *m = model;
    if (!m->offload_down_sent[k]) return;
    double t0 = now_seconds();
    gpu_event_wait(m->offload_down_event[k]);
    m->offload_down_sent[k] = 0;
    traffic_add(TR_DOWN, 0, now_seconds() - t0);
}

static void gpu_up(void *model, int k, const void *upload, size_t a, size_t b) {
    GpuGPT *m = model;
    GpuUpdated u = gpu_updated(m);
    double t0 = now_seconds();
    gpu_upload_queued(u.w + (a - u.w_base) * u.we, upload, (b - a) * u.we);
    gpu_event_record(m->offload_event[k]);
    m->offload_sent[k] = 1;
    traffic_add(TR_UP, (long long)((b - a) * u.we), now_seconds() - t0);
}

// The time the host waits here is the upload's, as seen from the host.
static void gpu_up_wait(void *model, int k) {
    GpuGPT *m = model;
    if (!m->offload_sent[k]) return;
    double t0 = now_seconds();
    gpu_event_wait(m->offload_event[k]);
    m->offload_sent[k] = 0;
    traffic_add(TR_UP, 0, now_seconds() - t0);
}

static void gpu_offload_allgather(void *model) {
    GpuGPT *m = model;
    const Trained *t = &m->train;
    if (gathers_updates(&t->shard)) gpu_zero_allgather_blocks(m->train_comm, t->compute, dtype_size(t->cdt));
}

static void *gpu_pinned(size_t bytes, const char *name) {
    void *p = gpu_host_alloc(bytes, name);
    mem_track(p, MEM_COMM, bytes, name, LOC_PINNED);
    return p;
}

static void gpu_unpin(void *p) {
    if (mem_untrack(p)) ledger_bug("an offload buffer is not in the ledger", "gpu_unpin");
    gpu_host_free(p);
}

// The pinned shard of opt,params is the model's weights: the link's when they are what the step trains (with
// --lora they are frozen, and the step writes none of them).
OffloadLink gpu_offload_link(GpuGPT *m) {
    const Trained *t = &m->train;
    OffloadLink l = {m, t->cdt, t->gdt, gpu_down, gpu_down_wait, gpu_up, gpu_up_wait, gpu_offload_allgather, gpu_pinned,
                     gpu_unpin, NULL, 0};
    if ((m->plan.offload & OFFLOAD_PARAMS) && t->compute == m->params) l.shard = t->compute, l.shard_base = t->c_base;
    return l;
}

// --lora: the adapters [at, at + n) of the layout down to the host (optim/offload.h host_offload_init_by)
void gpu_lora_down_to(void *ctx, size_t at, float *dst, size_t n) {
    GpuGPT *m = ctx;
    gpu_download(dst, m->lora.w + (at - shard_weights_base(&m->train.shard)), n * sizeof(float));
}

#endif
