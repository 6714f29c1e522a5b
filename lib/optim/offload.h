// optim/offload.h — --offload: the optimizer's states off the device, and
// AdamW run on the host a chunk at a time (core/plan.h). This is the host's
// side, the same for both devices; the device's side is an OffloadLink, the
// few calls that reach its gradients and weights (cpu/offload.h: copies
// within RAM, kept apart as a GPU's would be; gpu/offload.h: copies over the
// link through page-locked buffers). The arithmetic is the no-offload CPU
// step's (optimizer_step) on the same numbers, so the bits are too.
//
//   --offload opt, --offload-to host: the fp32 master weights and Adam's m
//     and v of the parameters this rank updates in host memory; a chunk's
//     gradients come down through a page-locked landing buffer, its new
//     weights (rounded to the dtype) go up through a page-locked upload
//     buffer, two of each, used in turn.
//   --offload-to disk: the same states in the offload file (io/offload_file.h),
//     a chunk of them in host memory at a time.
//   --offload opt,params (ZeRO stage 3): the weight shard lives in page-locked
//     host memory (the link's shard); AdamW writes the new weights there, and
//     each gather uploads this rank's part of the piece. (--lora: the frozen
//     model's shard is pinned; the adapters go up as without params.)
//
// Rows (n: the states' elements, the optimizer's; c = min(OFFLOAD_CHUNK, n);
// e: the dtype's bytes):
//   host:   master 4n (none for fp32 with params: the shard is the master), adam_m, adam_v
//   disk:   master 4n, adam_m, adam_v in the file; host: one chunk of each
//   pinned: comm 2 c e of landing buffers, and 2 c e of upload buffers (none with params)
#ifndef GPTMEM_OPTIM_OFFLOAD_H
#define GPTMEM_OPTIM_OFFLOAD_H

#include <math.h>
#include <string.h>
#include "core/clock.h"
#include "core/config.h"
#include "core/dtype.h"
#include "core/plan.h"
#include "core/traffic.h"
#include "io/offload_file.h"
#include "memory/ledger.h"
#include "optim/optimizer.h"
#include "optim/state_view.h"
#include "parallel/comm.h"
#include "parallel/tensor.h"
#include "parallel/zero.h"

// The device's side: where the step's gradients come from and its weights go.
typedef struct {
    void *model;
    int dtype;       // the compute weights'
    int grad_dtype;  // the gradients': the dtype, or fp32 (--fp32-grads)
    // the gradients of parameters [a, b), in grad_dtype, into landing buffer `k` (0 or 1): may be
    // queued; `down_wait` returns when the buffer holds them
    void (*down)(void *model, int k, void *landing, size_t a, size_t b);
    void (*down_wait)(void *model, int k);
    // the new weights of [a, b), in the dtype, from upload buffer `k` (0 or 1) to the device's
    // compute weights: may be queued; `up_wait` returns when buffer k may be written again
    void (*up)(void *model, int k, const void *upload, size_t a, size_t b);
    void (*up_wait)(void *model, int k);
    void (*allgather)(void *model);  // ZeRO stages 1, 2: every rank's updated weights to every rank
    void *(*pinned)(size_t bytes, const char *name);  // page-locked host memory, in the ledger (comm)
    void (*unpin)(void *p);
    void *shard;        // --offload opt,params: the page-locked weight shard, in the dtype
    size_t shard_base;  // its element 0's parameter
} OffloadLink;

typedef struct {
    int on, disk;
    int params;  // the weights the step updates live in the link's pinned shard (opt,params; not --lora's
                 // adapters: there the pinned shard is the frozen model's, which the step does not touch)
    OffloadLink link;
    size_t lo, hi;        // the parameters the step updates: the optimizer's
    size_t n;             // the states' elements (element 0: parameter lo)
    size_t chunk;         // parameters a chunk: min(OFFLOAD_CHUNK, n)
    float *master;        // host: the fp32 master weights of [lo, lo + n); disk: one chunk of them
    int master_is_shard;  // fp32 with params: the pinned weight shard is the master
    void *landing[2], *upload[2];  // page-locked: a chunk of gradients, of new weights, each
    OffloadFile file;     // disk
    Optimizer opt;        // AdamW: its m and v, at the host (disk: one chunk of them)
} HostOffload;

// The host's side for the plan's offload and the optimizer `opt` (set up over its tensors and its range
// lo, hi: the model's, or --lora's adapters'; n_alloc its state's elements); the optimizer's state is
// made here, at the host (on disk, a chunk of it). 0, or -1 after a message (the offload file could not be made).
int host_offload_build(HostOffload *off, const OffloadLink *link, const Plan *plan, const Optimizer *opt,
                       size_t n_alloc, const char *dir, int rank) {
    memset(off, 0, sizeof *off);
    off->on = 1;
    off->link = *link;
    off->params = (plan->offload & OFFLOAD_PARAMS) && link->shard;
    off->disk = plan->offload_disk;
    size_t lo = opt->lo, hi = opt->hi;
    int adam_bits = opt->bits;
    off->lo = lo, off->hi = hi, off->n = n_alloc;
    off->chunk = n_alloc < plan->offload_chunk ? n_alloc : plan->offload_chunk;
    if (!off->chunk) off->chunk = ADAM_BLOCK;  // a rank with nothing to update still builds
    size_t e = dtype_size(link->dtype), ge = dtype_size(link->grad_dtype), per = off->disk ? off->chunk : n_alloc;
    off->master_is_shard = off->params && link->dtype == DT_FP32 && !off->disk;
    if (off->master_is_shard) off->master = (float *)link->shard + (lo - link->shard_base);
    else off->master = mem_alloc_at(LOC_HOST, MEM_MASTER, per * sizeof(float), off->disk ? "master (a chunk)" : "master weights");
    off->opt = *opt;
    optimizer_alloc_at(&off->opt, per, LOC_HOST);
    // two of each: one chunk's copy in flight while the host works on the other
    static const char *landing_name[2] = {"offload landing 1 of 2 (grads)", "offload landing 2 of 2 (grads)"};
    static const char *upload_name[2] = {"offload upload 1 of 2 (weights)", "offload upload 2 of 2 (weights)"};
    for (int i = 0; i < 2; i++) {
        off->landing[i] = link->pinned(off->chunk * ge, landing_name[i]);
        if (!off->params) off->upload[i] = link->pinned(off->chunk * e, upload_name[i]);
    }
    if (off->disk && offload_file_open(&off->file, dir, rank, n_alloc, off->chunk, adam_bits)) return -1;
    return 0;
}

void host_offload_free(HostOffload *off) {
    if (!off->on) return;
    if (!off->master_is_shard) mem_free(off->master);
    for (int i = 0; i < 2; i++) {
        if (off->landing[i]) off->link.unpin(off->landing[i]);
        if (off->upload[i]) off->link.unpin(off->upload[i]);
    }
    offload_file_close(&off->file);
    optimizer_free(&off->opt);
    memset(off, 0, sizeof *off);
}

// Record k of the file: the chunk buffers its parts are read into and written from.
RecordParts chunk_record(const HostOffload *off, size_t k, float *w) {
    const Optimizer *opt = &off->opt;
    size_t len = record_len(&off->file, k);
    if (opt->bits == 8) return record_parts(len, 8, w, opt->m8, opt->m_scale, opt->v8, opt->v_scale);
    return record_parts(len, 32, w, opt->m, NULL, opt->v, NULL);
}

// Chunk k's states: where its master weights, m and v are (host arrays, or the
// chunk buffers the file's record was read into), as an optimizer view.
typedef struct {
    float *w;
    Optimizer view;
} ChunkStates;

ChunkStates chunk_states(HostOffload *off, size_t k, int read) {
    const Optimizer *opt = &off->opt;
    size_t a = off->lo + k * off->chunk, b = a + off->chunk < off->lo + off->n ? a + off->chunk : off->lo + off->n;
    size_t at = off->disk ? 0 : k * off->chunk;  // the chunk's first element in the state arrays
    ChunkStates c;
    c.w = off->master + at;
    if (opt->bits == 8)
        c.view = optimizer_view(opt, a, b, opt->m8 + at, opt->v8 + at, opt->m_scale + at / ADAM_BLOCK,
                                opt->v_scale + at / ADAM_BLOCK);
    else c.view = optimizer_view(opt, a, b, opt->m + at, opt->v + at, NULL, NULL);
    if (off->disk && read) offload_file_read(&off->file, k, chunk_record(off, k, c.w));
    return c;
}

void chunk_store(HostOffload *off, size_t k, ChunkStates *c) {
    if (off->disk) offload_file_write(&off->file, k, chunk_record(off, k, c->w));
}

// The compute weights of [a, b) from the master weights w: rounded to the
// dtype, up to the device through upload buffer k & 1, or (params) straight
// into the pinned shard, which the gathers upload from.
void weights_up(HostOffload *off, size_t k, size_t a, size_t b, const float *w) {
    const OffloadLink *l = &off->link;
    size_t len = b - a;
    if (off->params) {
        char *dst = (char *)l->shard + (a - l->shard_base) * dtype_size(l->dtype);
        if (l->dtype != DT_FP32) dtype_store(dst, w, len, l->dtype);
        else if (!off->master_is_shard) memcpy(dst, w, len * 4);
        return;
    }
    void *up = off->upload[k & 1];
    l->up_wait(l->model, (int)(k & 1));
    if (l->dtype == DT_FP32) memcpy(up, w, len * 4);
    else dtype_store(up, w, len, l->dtype);
    l->up(l->model, (int)(k & 1), up, a, b);
}

// The end of the chunk that starts at parameter a.
static size_t chunk_end(const HostOffload *off, size_t a) { return a + off->chunk < off->hi ? a + off->chunk : off->hi; }

// The step: for each chunk of [lo, hi), its gradients down, AdamW on the host
// (the no-offload step's arithmetic, on the same numbers), its states back to
// the file (disk), its new weights up; then ZeRO stages 1, 2 all-gather them.
// The next chunk's gradients are on their way down while the host steps this
// one (two landing buffers, used in turn; gpu/offload.h says the order on a GPU).
// A NaN grad_scale (an fp16 overflow) skips the step, as without offload.
void host_offload_step(HostOffload *off, float lr, int t, float grad_scale) {
    const OffloadLink *l = &off->link;
    if (isnan(grad_scale)) return;
    if (off->lo < off->hi) l->down(l->model, 0, off->landing[0], off->lo, chunk_end(off, off->lo));
    for (size_t k = 0, a = off->lo; a < off->hi; k++, a += off->chunk) {
        size_t b = chunk_end(off, a);
        void *land = off->landing[k & 1];
        if (!off->params) l->up_wait(l->model, (int)(k & 1));  // chunk k - 2's upload, queued before this download
        l->down_wait(l->model, (int)(k & 1));
        if (b < off->hi) l->down(l->model, (int)((k + 1) & 1), off->landing[(k + 1) & 1], b, chunk_end(off, b));
        ChunkStates c = chunk_states(off, k, 1);
        c.view.hi = b;  // the chunk's parameters this step updates
        double t0 = now_seconds();
        optimizer_step(&c.view, c.w, a, land, a, l->grad_dtype, lr, t, grad_scale);
        g_traffic.adam_seconds += now_seconds() - t0;
        chunk_store(off, k, &c);
        weights_up(off, k, a, b, c.w);
    }
    for (int i = 0; i < 2 && !off->params; i++) l->up_wait(l->model, i);
    l->allgather(l->model);
}

// The compute weights follow the master weights (after init, after a resume):
// every chunk of [lo, hi) up, then the all-gather of stages 1, 2.
void host_offload_weights_follow(HostOffload *off) {
    for (size_t k = 0, a = off->lo; a < off->hi; k++, a += off->chunk) {
        ChunkStates c = chunk_states(off, k, 1);
        weights_up(off, k, a, chunk_end(off, a), c.w);
    }
    for (int i = 0; i < 2 && !off->params; i++) off->link.up_wait(off->link.model, i);
    off->link.allgather(off->link.model);
}

// The first master weights of [lo, hi), GPT-2's init or --init's file (in
// the offload file, a record at a time, with m and v at 0), then the compute weights from them.
static void init_record(void *ctx, size_t a, size_t b) {
    HostOffload *off = ctx;
    size_t k = (a - off->lo) / off->chunk;
    (void)b;
    ChunkStates c = chunk_states(off, k, 0);
    chunk_store(off, k, &c);
}

void host_offload_init(HostOffload *off, const GPTConfig *cfg, const WeightSource *src) {
    if (off->disk) init_params_chunks(off->master, off->chunk, off->lo, off->hi, cfg, src, init_record, off);
    else if (off->hi > off->lo) init_params_range(off->master, off->lo, off->hi, cfg, src);
    host_offload_weights_follow(off);
}

// ... or (--tp) a share's, from the whole model's sequence (its init, or --init's file) a window at a time
// through 1 MiB of host staging (not a model buffer): each weight of [lo, hi) where tp_local_index puts it.
// They come in increasing order of the share's layout, so the offload file's records fill one by one.
typedef struct {
    HostOffload *off;
    const TensorSplit *tp;
    const GPTConfig *share;
    const float *window;
} ShareInit;

static void offload_take_share(void *ctx, size_t a, size_t b) {
    ShareInit *t = ctx;
    HostOffload *off = t->off;
    for (size_t i = a; i < b; i++) {
        long j = tp_local_index(t->tp, t->share, i);
        if (j < (long)off->lo || j >= (long)off->hi) continue;
        size_t at = (size_t)j - off->lo, k = at / off->chunk;
        off->master[off->disk ? at % off->chunk : at] = t->window[i - a];
        if (off->disk && ((at + 1) % off->chunk == 0 || (size_t)j + 1 == off->hi)) {
            ChunkStates c = chunk_states(off, k, 0);
            chunk_store(off, k, &c);
        }
    }
}

void host_offload_init_share(HostOffload *off, const TensorSplit *tp, const GPTConfig *share, const WeightSource *src) {
    enum { WINDOW = 1 << 18 };
    ShareInit t = {off, tp, share, malloc(sizeof(float) * WINDOW)};
    init_params_chunks((float *)t.window, WINDOW, 0, param_count(&tp->whole), &tp->whole, src, offload_take_share, &t);
    free((float *)t.window);
    host_offload_weights_follow(off);
}

// ... or (--lora: the adapters, made on the device by their own init) from the device's weights w, whose
// element 0 is parameter w_base: [lo, hi) down into the master weights (with m and v at 0).
void host_offload_init_by(HostOffload *off, void (*get)(void *ctx, size_t at, float *dst, size_t n), void *ctx) {
    for (size_t k = 0, a = off->lo; a < off->hi; k++, a += off->chunk) {
        ChunkStates c = chunk_states(off, k, 0);
        get(ctx, a, c.w, chunk_end(off, a) - a);
        chunk_store(off, k, &c);
    }
}
typedef struct {
    const float *w;
    size_t w_base;
} HostArray;
static void host_array_get(void *ctx, size_t at, float *dst, size_t n) {
    const HostArray *h = ctx;
    memcpy(dst, h->w + (at - h->w_base), n * sizeof(float));
}
void host_offload_init_from(HostOffload *off, const float *w, size_t w_base) {
    HostArray h = {w, w_base};
    host_offload_init_by(off, host_array_get, &h);
}

// Saved states through the file (--offload-to disk): element `at` of the
// states on, n of them; which 0 is the weights (weights_get/set) or m (moments),
// 1 v. Each touches the records it spans: read (checked), and for a set
// changed and written back.
static void file_access(HostOffload *off, int weights, int which, size_t at, float *get, const float *set, size_t n) {
    for (size_t done = 0; done < n;) {
        size_t k = (at + done) / off->chunk, in = (at + done) % off->chunk;
        size_t len = off->chunk - in < n - done ? off->chunk - in : n - done;
        ChunkStates c = chunk_states(off, k, 1);
        if (weights) {
            if (get) memcpy(get + done, c.w + in, len * 4);
            else memcpy(c.w + in, set + done, len * 4);
        } else if (get) {
            optimizer_moments_get(&c.view, which, in, get + done, len);
        } else {
            optimizer_moments_set(&c.view, which, in, set + done, len);
        }
        if (set) chunk_store(off, k, &c);
        done += len;
    }
}

void offload_weights_get(const void *ctx, int which, size_t at, float *dst, size_t n) {
    file_access((HostOffload *)ctx, 1, which, at, dst, NULL, n);
}
void offload_weights_set(void *ctx, int which, size_t at, const float *src, size_t n) {
    file_access(ctx, 1, which, at, NULL, src, n);
}
void offload_moments_get(const void *ctx, int which, size_t at, float *dst, size_t n) {
    file_access((HostOffload *)ctx, 0, which, at, dst, NULL, n);
}
void offload_moments_set(void *ctx, int which, size_t at, const float *src, size_t n) {
    file_access(ctx, 0, which, at, NULL, src, n);
}

// ZeRO stage 0 on several ranks, after a resume: each rank read its own part
// of the saved state into its file; every rank needs all of them (the ranks
// are replicas), so each part goes to every rank's file, through a 1 MiB host
// buffer (as a saved state does, io/state.h): its rank reads it and
// broadcasts, the others write it.
static void offload_file_allgather(HostOffload *off, const Shard *sh) {
    enum { PER = (1 << 20) / sizeof(float) };
    float *buf = malloc(PER * sizeof(float));
    for (int r = 0; r < sh->nranks; r++) {
        size_t a = (size_t)r * sh->size, b = a + sh->size < sh->nparams ? a + sh->size : sh->nparams;
        for (size_t at = a; at < b; at += PER) {
            size_t len = b - at < PER ? b - at : PER;
            for (int part = 0; part < 3; part++) {  // the weights, m, v
                int weights = part == 0, moment = part == 2;
                if (sh->rank == r) file_access(off, weights, moment, at - off->lo, buf, NULL, len);
                comm_broadcast(buf, len * sizeof(float), r);
                if (sh->rank != r) file_access(off, weights, moment, at - off->lo, NULL, buf, len);
            }
        }
    }
    free(buf);
}

// This rank's part of a saved state (io/state_arrays.h), the parameters
// [lo, hi) it owns: on the host, the master weights and m and v (the 8-bit
// codes through the optimizer's accessors); on disk, all three through the file.
NetState host_offload_state(HostOffload *off, size_t lo, size_t hi) {
    NetState st;
    memset(&st, 0, sizeof st);
    st.lo = lo, st.hi = hi;
    if (off->disk) {
        st.weights = st.moments = off;
        st.weights_at = st.moments_at = lo - off->lo;
        st.weights_get = offload_weights_get, st.weights_set = offload_weights_set;
        st.moments_get = offload_moments_get, st.moments_set = offload_moments_set;
        return st;
    }
    st.w = off->master + (lo - off->lo);
    optimizer_state_moments(&off->opt, &st);
    return st;
}

// After a saved state was read into those arrays: at stage 0 on several
// ranks every rank gathers every rank's part (they are replicas); then the
// compute weights follow the master weights.
void host_offload_state_loaded(HostOffload *off, const Shard *sh) {
    if (replicas(sh)) {
        if (off->disk) offload_file_allgather(off, sh);
        else optimizer_state_allgather(&off->opt, off->master, sh);
    }
    host_offload_weights_follow(off);
}

#endif
