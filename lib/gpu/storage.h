// gpu/storage.h — where a block's saved tensors go on the GPU: cpu/storage.h's
// room with device memory. Pushed on the activation stack (memory/ledger.h's
// arena over device memory) in the dtype, the row statistics in fp32; after
// the block, the ones the plan drops leave the stack and the kept ones move
// down over them (--recompute, --ckpt); in the backward, the block's output is
// popped and the dropped ones rebuilt, their ops run again on the kept ones.
#ifndef GPTMEM_GPU_STORAGE_H
#define GPTMEM_GPU_STORAGE_H

#include <stdio.h>
#include <stdlib.h>
#include "core/saved.h"
#include "cuda/api.h"
#include "gpu/gpt.h"
#include "memory/ledger.h"

// Tensor t's bytes for the current B x T: in the dtype, or in fp32 for a row statistic (layernorm mean
// and rstd, flash's lse). (--sp: the running forward's slice of the residual path's rows.)
static size_t gpu_tensor_bytes(const GpuGPT *m, const SavedTensor *t) {
    GPTConfig c = m->cfg;
    c.seq_split = m->tp.sp;
    return saved_count(t, &c, m->B, m->T, m->flash) * (saved_is_row_stat(t, m->flash) ? sizeof(float) : m->elem_bytes);
}

// Push tensor t (core/saved.h) for the current B x T.
void *gpu_push_saved(GpuGPT *m, const SavedTensor *t) { return arena_push(saved_name(t, m->flash), gpu_tensor_bytes(m, t)); }

size_t gpu_saved_bytes_now(const GpuGPT *m, int i) { return gpu_tensor_bytes(m, &block_saved[i]); }

// The named views of a block's tensors.
void gpu_name_views(GpuActs *a, int flash) {
    void **p = a->saved;
    a->ln1 = p[SV_LN1], a->ln1_mean = p[SV_LN1_MEAN], a->ln1_rstd = p[SV_LN1_RSTD], a->qkv = p[SV_QKV];
    a->att = flash ? NULL : p[SV_ATT];
    a->lse = flash ? p[SV_ATT] : NULL;
    a->atty = p[SV_ATTY], a->res2 = p[SV_RES2];
    a->ln2 = p[SV_LN2], a->ln2_mean = p[SV_LN2_MEAN], a->ln2_rstd = p[SV_LN2_RSTD];
    a->fch = p[SV_FCH], a->fch_gelu = p[SV_FCH_GELU], a->res3 = p[SV_RES3];
}

// The input of block l: the embedding output or the previous block's output.
const void *gpu_block_input(GpuGPT *m, int l) { return l == 0 ? m->encoded : m->acts[l - 1].saved[SV_RES3]; }

// Block l's tensors that `todo` names on the stack (cpu/storage.h push_block).
GpuActs *gpu_push_block(GpuGPT *m, int l, unsigned todo) {
    GpuActs *a = &m->acts[l];
    if (todo == SV_ALL) a->mark = arena_mark();
    ledger_where(todo == SV_ALL ? "layer %d forward" : "layer %d rebuild", l);
    a->pushing = todo;
    for (int i = 0; i < SAVED_PER_LAYER; i++)
        if (todo & SV_BIT(i)) a->saved[i] = gpu_push_saved(m, &block_saved[i]);
    gpu_name_views(a, m->flash);
    return a;
}

// bytes from src down to dst < src: cudaMemcpy's ranges must not overlap, so
// in pieces no longer than the distance between them, from the front.
void gpu_copy_down(void *dst, const void *src, size_t bytes) {
    size_t step = (size_t)((const char *)src - (char *)dst);
    for (size_t at = 0; at < bytes; at += step)
        gpu_copy((char *)dst + at, (const char *)src + at, bytes - at < step ? bytes - at : step);
}

// After block l ran in the forward: keep only the tensors the plan does not
// drop, copied down over the dropped ones in push order (cpu/storage.h
// drop_saved). They are moved, not fresh: pushed without the fill that
// marks a fresh tensor (its bytes would land on the ones being moved).
void gpu_drop_saved(GpuGPT *m, int l) {
    if (!m->plan.drops) return;
    GpuActs *a = &m->acts[l];
    void *old[SAVED_PER_LAYER];
    memcpy(old, a->saved, sizeof old);
    void (*fresh)(void *, size_t) = g_arena.fresh;
    g_arena.fresh = NULL;
    arena_drop_begin();
    arena_pop_to(a->mark, "recompute");
    for (int i = 0; i < SAVED_PER_LAYER; i++) {
        if (m->plan.drops & SV_BIT(i)) { a->saved[i] = NULL; continue; }
        size_t bytes = gpu_saved_bytes_now(m, i);
        a->saved[i] = arena_push(saved_name(&block_saved[i], m->flash), bytes);
        if (a->saved[i] != old[i]) gpu_copy_down(a->saved[i], old[i], bytes);
    }
    g_arena.fresh = fresh;
    arena_drop_end("recompute");
    gpu_name_views(a, m->flash);
}

// The events that time the rebuilds of the next micro-batch (a new set the
// first time a step has this many micro-batches).
void **gpu_recompute_events(GpuGPT *m) {
    if (m->recompute_used == m->recompute_sets) {
        int k = m->recompute_sets++, n = 2 * m->cfg.layers;
        m->recompute_events = realloc(m->recompute_events, sizeof(void **) * m->recompute_sets);
        if (m->recompute_events) m->recompute_events[k] = malloc(sizeof(void *) * n);
        if (!m->recompute_events || !m->recompute_events[k]) {
            fprintf(stderr, "error: out of host memory for the rebuilds' timing events\n");
            exit(1);
        }
        for (int i = 0; i < n; i++) m->recompute_events[k][i] = gpu_event_new();
    }
    return m->recompute_events[m->recompute_used++];
}

// The time spent rebuilding so far: adds the rebuilds of the micro-batches
// since the last call (waiting for them, if they are still running: call it
// after the step) to the total.
double gpu_gpt_recompute_seconds(GpuGPT *m) {
    for (int k = 0; k < m->recompute_used; k++)
        for (int l = 0; l < m->cfg.layers; l++)
            m->recompute_seconds += gpu_event_ms(m->recompute_events[k][2 * l], m->recompute_events[k][2 * l + 1]) / 1e3;
    m->recompute_used = 0;
    return m->recompute_seconds;
}

// In the backward of block l: pop its output (the next block's input, whose
// backward is done); what it dropped is rebuilt next, on the slide (gpu/model.h
// gpu_rebuild). (No widening: the kernels read the 16-bit tensors.)
void gpu_reload_block(GpuGPT *m, int l) {
    ledger_where("layer %d backward", l);
    arena_pop_to(arena_mark() - 1, "output");
    m->acts[l].saved[SV_RES3] = NULL;
}

// The rebuild's clock: events in the stream around block l's ops (a host wait
// per layer would stall the queue), read after the step. The backward rebuilds
// from the last layer down: its first rebuild takes the micro-batch's set.
void gpu_rebuild_begin(GpuGPT *m, int l) {
    if (l == m->cfg.layers - 1) m->rebuild_events = gpu_recompute_events(m);
    gpu_event_record(m->rebuild_events[2 * l]);
}

void gpu_rebuild_end(GpuGPT *m, int l) {
    gpu_event_record(m->rebuild_events[2 * l + 1]);
    ledger_where("layer %d backward", l);  // the rebuild is done: the block's backward runs
}

// Its backward is done: everything it pushed leaves the stack.
void gpu_pop_block(GpuGPT *m, int l) { arena_pop_to(m->acts[l].mark, "layer"); }

// The activation stack on the device: `capacity` bytes (the predicted peak).
// Each push is handed to gpu_fill_fresh (the emulated GPU fills it with NaN,
// so a read before a write shows; GPTMEM_POISON=1 makes a real GPU do it too).
void gpu_arena_reserve(size_t capacity) {
    arena_adopt(gpu_malloc(capacity, "the activation stack"), capacity, GPU_ACT_ALIGN);
    g_arena.fresh = gpu_fill_fresh;
    g_ledger.gpu_reserved += capacity;
}

void gpu_arena_release(void) {
    g_ledger.gpu_reserved -= g_arena.capacity;
    gpu_free(g_arena.base);
    arena_release();
}

#endif
