// memory/snapshot.h — one step's memory as PyTorch's memory snapshot (--mem-snapshot FILE):
// the file torch.cuda.memory._dump_snapshot writes and PyTorch's memory viewer
// (pytorch.org/memory_viz, torch/utils/viz/MemoryViz.js) draws.
//
// A snapshot is a pickle of {"segments": [...], "device_traces": [[...], ...]}.
// The segments are what the allocator holds when the snapshot is taken: each a
// reservation, its blocks tiling it, allocated or not. A device's trace is every
// allocation and free before that, in order. gptmem's ledger maps onto it:
//   - each buffer of the ledger is a segment of one block, made by a
//     segment_alloc and an alloc at the trace's start (as the model is built);
//   - the activation stack is one segment, its reservation; each tensor pushed
//     is an alloc at its offset in it, each tensor popped a free;
//   - a drop (--recompute, --ckpt) frees what it drops and moves what it keeps
//     down the stack (a free and an alloc a tensor moved), never below its end;
//   - the places are the viewer's devices: 0 the device, 1 the host, 2 pinned
//     memory, 3 the disk (--offload-to disk).
// The viewer's "reserved" is then what gptmem reserved (the buffers and the
// whole stack), its "allocated" what the ledger counts. PyTorch's caching
// allocator keeps freed blocks reserved to reuse them; gptmem's stack is that
// cache, sized once from the predictor.
// With a budget (the RAM a run was refused for, --fit's), the trace ends with an
// oom event where the next allocation would pass it: what was live then, and what
// it asked for, before anything ran out.
// The pickle (memory/pickle.h) is protocol 4 with only the opcodes MemoryViz.js reads (it refuses 5).
#ifndef GPTMEM_SNAPSHOT_H
#define GPTMEM_SNAPSHOT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "memory/ledger.h"
#include "memory/pickle.h"
#include "memory/timeline.h"

// --- what a snapshot is made of ------------------------------------------------------

typedef struct {  // a buffer of the ledger (a real run's), or a category's at a place (predicted)
    const char *name;
    int category, loc;
    size_t bytes;
} SnapBuffer;

typedef struct {
    const SnapBuffer *buf;
    int nbuf;
    size_t arena;          // the activation stack's reservation (on the device)
    const StackOp *ops;    // the step's pushes and pops, tensor by tensor
    int nops;
    size_t budget;         // 0: none; else an oom event where the places in budget_locs would pass it
    unsigned budget_locs;  // bit l: place l counts against the budget
} SnapSource;

typedef struct {  // one event of a place's trace
    const char *action;
    int loc, category;  // category -1: the snapshot's own event ("unknown")
    size_t addr, size, device_free;
    const char *name, *file;  // the frame the viewer shows: file:line:name
    int line;
} SnapEvent;

typedef struct {  // a tensor on the stack as the trace goes
    size_t offset, bytes;
    int category;
    const char *name;
} SnapLive;

typedef struct {
    SnapEvent *ev;
    int n, cap;
    size_t next[MEM_NLOC], *buf_addr, arena_addr;  // addresses: each place its own range
    int *made, arena_made;
    SnapLive *live;
    int nlive;
    size_t allocated[MEM_NLOC], peak[MEM_NLOC];
    const SnapSource *src;
    int oom;  // the budget was passed: the trace ends there
} SnapTrace;

void snap_event(SnapTrace *t, SnapEvent e) {
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 1024;
        t->ev = realloc(t->ev, sizeof(SnapEvent) * t->cap);
        if (!t->ev) ledger_bug("out of memory for the memory snapshot", "events");
    }
    t->ev[t->n++] = e;
}

// Would an allocation of `size` at `loc` pass the budget? Then the oom event, and 0.
int snap_fits(SnapTrace *t, int loc, size_t size, int cat, const char *name, const char *file, int line) {
    size_t counted = 0;
    for (int l = 0; l < MEM_NLOC; l++)
        if (t->src->budget_locs & (1u << l)) counted += t->allocated[l];
    if (!t->src->budget || !(t->src->budget_locs & (1u << loc)) || counted + size <= t->src->budget) return 1;
    snap_event(t, (SnapEvent){"oom", loc, cat, 0, size, t->src->budget - counted, name, file, line});
    t->oom = 1;
    return 0;
}

void snap_made(SnapTrace *t, int loc, size_t addr, size_t size, int cat, const char *name, const char *file, int line) {
    snap_event(t, (SnapEvent){"alloc", loc, cat, addr, size, 0, name, file, line});
    t->allocated[loc] += size;
    if (t->allocated[loc] > t->peak[loc]) t->peak[loc] = t->allocated[loc];
}

void snap_free(SnapTrace *t, int loc, size_t addr, size_t size, int cat, const char *name, const char *file, int line) {
    snap_event(t, (SnapEvent){"free_requested", loc, cat, addr, size, 0, name, file, line});
    snap_event(t, (SnapEvent){"free_completed", loc, cat, addr, size, 0, name, file, line});
    t->allocated[loc] -= size;
}

// A tensor pushed: an alloc at its offset, and on the live list.
int snap_push(SnapTrace *t, const StackOp *o, int line) {
    if (!snap_fits(t, LOC_DEVICE, o->bytes, o->category, o->name, o->where, line)) return 0;
    snap_made(t, LOC_DEVICE, t->arena_addr + o->offset, o->bytes, o->category, o->name, o->where, line);
    t->live[t->nlive++] = (SnapLive){o->offset, o->bytes, o->category, o->name};
    return 1;
}

void snap_pop(SnapTrace *t, const StackOp *o, int line) {
    for (int i = t->nlive - 1; i >= 0; i--)
        if (t->live[i].offset == o->offset) {
            snap_free(t, LOC_DEVICE, t->arena_addr + o->offset, o->bytes, o->category, o->name, o->where, line);
            memmove(&t->live[i], &t->live[i + 1], sizeof(SnapLive) * (t->nlive - i - 1));
            t->nlive--;
            return;
        }
    ledger_bug("a pop of a tensor the snapshot does not hold", o->name);
}

// A drop, ops[a..b): the arena popped the block and pushed back what it keeps.
// Written as what changes: the dropped tensors freed, then each kept tensor
// that moved down freed where it was and allocated where it is.
int snap_drop(SnapTrace *t, const StackOp *ops, int a, int b) {
    int *pushed = malloc(sizeof(int) * (b - a)), ok = 1;  // ops[i] (a pop) comes back as ops[pushed[i - a]] (a push)
    if (!pushed) ledger_bug("out of memory for the memory snapshot", "a drop");
    for (int i = a; i < b; i++) {
        pushed[i - a] = -1;
        if (ops[i].op != '-') continue;
        for (int j = a; j < b; j++) {
            int taken = 0;
            for (int k = a; k < i; k++) taken |= pushed[k - a] == j;
            if (ops[j].op == '+' && !taken && !strcmp(ops[j].name, ops[i].name)) { pushed[i - a] = j; break; }
        }
    }
    for (int i = a; i < b; i++)
        if (ops[i].op == '-' && pushed[i - a] < 0) snap_pop(t, &ops[i], i);
    for (int j = a; j < b; j++) {
        if (ops[j].op != '+') continue;
        int from = -1;
        for (int i = a; i < b; i++)
            if (ops[i].op == '-' && pushed[i - a] == j) from = i;
        if (from >= 0 && ops[from].offset == ops[j].offset) continue;  // it stays where it is
        if (from >= 0) snap_pop(t, &ops[from], from);
        if (!(ok = snap_push(t, &ops[j], j))) break;
    }
    free(pushed);
    return ok;
}

// The whole trace: the buffers made, the stack reserved, the step's ops, the snapshot.
void snap_build(SnapTrace *t, const SnapSource *src) {
    memset(t, 0, sizeof *t);
    t->src = src;
    t->buf_addr = calloc(src->nbuf + 1, sizeof(size_t));
    t->made = calloc(src->nbuf + 1, sizeof(int));
    t->live = malloc(sizeof(SnapLive) * (src->nops + 1));
    if (!t->buf_addr || !t->made || !t->live) ledger_bug("out of memory for the memory snapshot", "its trace");
    for (int l = 0; l < MEM_NLOC; l++) t->next[l] = (size_t)(l + 1) << 40;
    for (int i = 0; i < src->nbuf && !t->oom; i++) {
        const SnapBuffer *b = &src->buf[i];
        t->buf_addr[i] = t->next[b->loc];
        if (!snap_fits(t, b->loc, b->bytes, b->category, b->name, mem_location_name[b->loc], 0)) break;
        snap_event(t, (SnapEvent){"segment_alloc", b->loc, b->category, t->buf_addr[i], b->bytes, 0, b->name,
                                  mem_location_name[b->loc], 0});
        snap_made(t, b->loc, t->buf_addr[i], b->bytes, b->category, b->name, mem_location_name[b->loc], 0);
        t->made[i] = 1;
        t->next[b->loc] += (b->bytes + 511) / 512 * 512;
    }
    if (!t->oom && src->arena) {
        t->arena_addr = t->next[LOC_DEVICE];
        t->arena_made = 1;
        snap_event(t, (SnapEvent){"segment_alloc", LOC_DEVICE, MEM_ACTIVATIONS, t->arena_addr, src->arena, 0,
                                  "the activation stack", "reserved", 0});
    }
    for (int i = 0; i < src->nops && !t->oom;) {
        if (src->ops[i].drop) {
            int j = i;
            while (j < src->nops && src->ops[j].drop) j++;
            snap_drop(t, src->ops, i, j);
            i = j;
            continue;
        }
        if (src->ops[i].op == '+') snap_push(t, &src->ops[i], i);
        else snap_pop(t, &src->ops[i], i);
        i++;
    }
    snap_event(t, (SnapEvent){"snapshot", LOC_DEVICE, -1, 0, 0, 0, "the snapshot", "gptmem", 0});
}

void snap_free_trace(SnapTrace *t) { free(t->ev), free(t->buf_addr), free(t->made), free(t->live); }

// --- writing it ----------------------------------------------------------------------

void pk_frames(FILE *f, const char *file, int line, const char *name) {
    pk_list(f);
    pk_dict(f);
    pk_key_str(f, "filename", file), pk_key_uint(f, "line", (size_t)line), pk_key_str(f, "name", name);
    pk_end_dict(f);
    pk_end_list(f);
}

void pk_block(FILE *f, size_t addr, size_t size, const char *state, const char *file, const char *name) {
    pk_dict(f);
    pk_key_uint(f, "address", addr), pk_key_uint(f, "size", size), pk_key_uint(f, "requested_size", size);
    pk_key_str(f, "state", state);
    pk_str(f, "frames");
    if (file) pk_frames(f, file, 0, name);
    else pk_list(f), pk_end_list(f);
    pk_end_dict(f);
}

void pk_segment_head(FILE *f, int loc, size_t addr, size_t size, size_t allocated) {
    pk_key_uint(f, "device", (size_t)loc), pk_key_uint(f, "address", addr), pk_key_uint(f, "total_size", size);
    pk_key_uint(f, "allocated_size", allocated), pk_key_uint(f, "active_size", allocated);
    pk_key_uint(f, "requested_size", allocated), pk_key_uint(f, "stream", 0);
    pk_key_str(f, "segment_type", "large");
    pk_str(f, "is_expandable"), fputc(0x89, f);  // NEWFALSE
}

int live_by_offset(const void *a, const void *b) {
    size_t x = ((const SnapLive *)a)->offset, y = ((const SnapLive *)b)->offset;
    return x < y ? -1 : x > y;
}

// The segments as the trace leaves them: the buffers made, the stack with what is on it.
void pk_segments(FILE *f, const SnapTrace *t) {
    pk_list(f);
    for (int i = 0; i < t->src->nbuf; i++) {
        if (!t->made[i]) continue;
        const SnapBuffer *b = &t->src->buf[i];
        pk_dict(f);
        pk_segment_head(f, b->loc, t->buf_addr[i], b->bytes, b->bytes);
        pk_str(f, "frames"), pk_frames(f, mem_location_name[b->loc], 0, b->name);
        pk_str(f, "blocks"), pk_list(f);
        pk_block(f, t->buf_addr[i], b->bytes, "active_allocated", mem_location_name[b->loc], b->name);
        pk_end_list(f);
        pk_end_dict(f);
    }
    if (t->arena_made) {
        SnapLive *live = malloc(sizeof(SnapLive) * (t->nlive + 1));
        if (!live) ledger_bug("out of memory for the memory snapshot", "the stack's blocks");
        memcpy(live, t->live, sizeof(SnapLive) * t->nlive);
        qsort(live, t->nlive, sizeof(SnapLive), live_by_offset);
        size_t on = 0, at = 0;
        for (int i = 0; i < t->nlive; i++) on += live[i].bytes;
        pk_dict(f);
        pk_segment_head(f, LOC_DEVICE, t->arena_addr, t->src->arena, on);
        pk_str(f, "frames"), pk_frames(f, "reserved", 0, "the activation stack");
        pk_str(f, "blocks"), pk_list(f);
        for (int i = 0; i < t->nlive; at = live[i].offset + live[i].bytes, i++) {
            if (live[i].offset > at) pk_block(f, t->arena_addr + at, live[i].offset - at, "inactive", NULL, NULL);
            pk_block(f, t->arena_addr + live[i].offset, live[i].bytes, "active_allocated", "on the stack", live[i].name);
        }
        if (t->src->arena > at) pk_block(f, t->arena_addr + at, t->src->arena - at, "inactive", NULL, NULL);
        pk_end_list(f);
        pk_end_dict(f);
        free(live);
    }
    pk_end_list(f);
}

void pk_traces(FILE *f, const SnapTrace *t) {
    int places = 1;
    for (int i = 0; i < t->n; i++)
        if (t->ev[i].loc + 1 > places) places = t->ev[i].loc + 1;
    pk_list(f);
    for (int l = 0; l < places; l++) {
        pk_list(f);
        for (int i = 0; i < t->n; i++) {
            const SnapEvent *e = &t->ev[i];
            if (e->loc != l) continue;
            pk_dict(f);
            pk_key_str(f, "action", e->action), pk_key_uint(f, "addr", e->addr), pk_key_uint(f, "size", e->size);
            pk_key_uint(f, "stream", 0);
            pk_key_str(f, "category", e->category < 0 ? "unknown" : mem_category_name[e->category]);
            if (!strcmp(e->action, "oom")) pk_key_uint(f, "device_free", e->device_free);
            pk_str(f, "frames"), pk_frames(f, e->file, e->line, e->name);
            pk_end_dict(f);
        }
        pk_end_list(f);
    }
    pk_end_list(f);
}

// Write the snapshot to f; fills `t` (the caller frees it with snap_free_trace).
void write_snapshot(FILE *f, const SnapSource *src, SnapTrace *t) {
    snap_build(t, src);
    fputc(0x80, f), fputc(4, f);  // PROTO 4
    pk_dict(f);
    pk_str(f, "segments"), pk_segments(f, t);
    pk_str(f, "device_traces"), pk_traces(f, t);
    pk_end_dict(f);
    fputc('.', f);  // STOP
}

// --- the two sources -----------------------------------------------------------------

// Measured: the ledger's buffers now, and the first step's ops (g_recording).
SnapSource measured_snapshot(SnapBuffer *buf) {
    int n = 0;
    for (int b = 0; b < g_ledger.nblocks; b++)
        if (g_ledger.blocks[b].bytes)
            buf[n++] = (SnapBuffer){g_ledger.blocks[b].name, g_ledger.blocks[b].category, g_ledger.blocks[b].loc,
                                    g_ledger.blocks[b].bytes};
    return (SnapSource){buf, n, g_arena.capacity, g_recording.ops, g_recording.nops, 0, 0};
}

// Predicted: a buffer for each category at each place (the predictor counts
// categories, not buffers), and predict_stack_events replayed on a stack, tensor
// by tensor: a pop frees the tensors above its mark, a drop the block's tensors,
// then pushes back those it keeps. `ops` is malloc'd (the caller frees it).
SnapSource predicted_snapshot(const MemReport *pred, const PredictedTimeline *tl, SnapBuffer *buf, StackOp **ops) {
    static char names[MEM_NLOC][MEM_NCAT][48];
    int n = 0, nops = 0, depth = 0, cap = 2 * tl->n + SAVED_PER_LAYER;
    for (int l = 0; l < MEM_NLOC; l++)
        for (int c = 0; c < MEM_NCAT; c++) {
            size_t bytes = pred->phase[PHASE_INIT].at[l][c];
            if (c == MEM_ACTIVATIONS || !bytes) continue;
            snprintf(names[l][c], sizeof names[l][c], "%s (predicted)", mem_category_name[c]);
            buf[n++] = (SnapBuffer){names[l][c], c, l, bytes};
        }
    StackOp *o = malloc(sizeof(StackOp) * cap), *stack = malloc(sizeof(StackOp) * (tl->n + 1));
    if (!o || !stack) ledger_bug("out of memory for the memory snapshot", "predicted ops");
    size_t top = 0;
    for (int i = 0; i < tl->n; i++) {
        const StackEvent *e = &tl->ev[i];
        if (nops + 2 * SAVED_PER_LAYER + depth >= cap) {
            cap = 2 * (cap + depth);
            if (!(o = realloc(o, sizeof(StackOp) * cap))) ledger_bug("out of memory for the memory snapshot", "predicted ops");
        }
        StackOp op = {'+', 0, MEM_ACTIVATIONS, e->name, top, e->bytes, ""};
        snprintf(op.where, sizeof op.where, "%s", e->where);
        if (e->op == '+') { stack[depth++] = op, o[nops++] = op, top += e->bytes; continue; }
        if (e->op == '-') {
            for (size_t freed = 0; freed < e->bytes && depth > 0; freed += stack[depth].bytes) {
                StackOp p = stack[--depth];
                top = p.offset;
                p.op = '-', memcpy(p.where, op.where, sizeof p.where), o[nops++] = p;
            }
            continue;
        }
        int base = depth - SAVED_PER_LAYER;  // a drop: the block's tensors are on top
        StackOp block[SAVED_PER_LAYER];
        memcpy(block, &stack[base], sizeof block);
        for (int k = SAVED_PER_LAYER - 1; k >= 0; k--) {
            StackOp p = block[k];
            p.op = '-', p.drop = 1, memcpy(p.where, op.where, sizeof p.where), o[nops++] = p;
        }
        depth = base, top = block[0].offset;
        for (int k = 0; k < SAVED_PER_LAYER; k++) {
            if (!(e->keep & SV_BIT(k))) continue;
            StackOp p = block[k];
            p.op = '+', p.drop = 1, p.offset = top, memcpy(p.where, op.where, sizeof p.where);
            stack[depth++] = p, o[nops++] = p, top += p.bytes;
        }
    }
    free(stack);
    *ops = o;
    return (SnapSource){buf, n, pred->stack_peak, o, nops, 0, 0};
}

#endif
