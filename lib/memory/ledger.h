// memory/ledger.h — the measured half of the memory room: the ledger, one tracked allocator
// and the activation stack.
//
// Every large buffer in gptmem is allocated here with a category. The ledger
// keeps, per category, the bytes live now and the most ever live, plus the
// peak of the *total* (which is not the sum of the per-category peaks: grads
// and activations, say, need not peak at the same moment).
//
// Activations are special: they live on a stack arena. The forward pass
// pushes each layer's saved tensors, the backward pass pops them, so the live
// activation bytes rise through the forward and fall through the backward,
// exactly like the picture in the lecture. The arena's capacity is reserved
// once (sized from the predictor); what the ledger counts as "activations" is
// what is pushed on it, so its high-water mark is the measured peak.
//
// The predictor (memory/predict.h) computes the same numbers from the config alone;
// it includes only memory/report.h (the categories and tables), never this file, so
// the compiler checks that it cannot call the allocator. Tests check the two
// agree to the byte.
#ifndef GPTMEM_MEMORY_H
#define GPTMEM_MEMORY_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "memory/report.h"
#include "core/clock.h"
#include "core/sizes.h"

// One live allocation, so that mem_free knows its size and category and
// --mem can list every buffer by name.
typedef struct {
    void *ptr;
    size_t bytes;
    int category;
    const char *name;
    int loc;  // MemLocation: where it lives
} MemBlock;

#define MEM_MAX_BLOCKS 256

typedef struct {
    size_t live[MEM_NCAT];
    size_t peak[MEM_NCAT];
    size_t total, peak_total;
    size_t live_at[MEM_NLOC][MEM_NCAT];  // the live bytes by location
    size_t total_at[MEM_NLOC], peak_at[MEM_NLOC];
    int on_gpu;           // the device is a GPU: its LOC_DEVICE buffers are cudaMalloc'ed
    int host_loc;         // where mem_alloc's buffers live: the device on the CPU, the host beside a GPU
    size_t window_peak;   // the largest total since ledger_window_start (one step's peak, for the step line)
    size_t window_peak_at[MEM_NLOC];  // ... of each place's total (--log's columns)
    size_t gpu_reserved;  // bytes cudaMalloc'ed through the ledger (buffers + the activation arena)
    MemBlock blocks[MEM_MAX_BLOCKS];
    int nblocks;
    int trace;  // --trace: print every arena push and pop
    char where[48];  // the op running now (ledger_where): for --mem-timeline and the peak's receipt
    void (*on_where)(const char *where);  // told when the part of the step changes (--trace-json), if set
} Ledger;

Ledger g_ledger;

// A bookkeeping error: the code, not the input, is wrong. Say so and stop.
void ledger_bug(const char *what, const char *name) {
    fprintf(stderr, "error: memory ledger: %s (%s); this is a bug in gptmem\n", what, name);
    exit(1);
}

// Count bytes in or out of a category at a location and move the peaks.
void ledger_add(int category, size_t bytes, int loc) {
    g_ledger.live[category] += bytes;
    g_ledger.total += bytes;
    g_ledger.live_at[loc][category] += bytes;
    g_ledger.total_at[loc] += bytes;
    if (g_ledger.live[category] > g_ledger.peak[category]) g_ledger.peak[category] = g_ledger.live[category];
    if (g_ledger.total > g_ledger.peak_total) g_ledger.peak_total = g_ledger.total;
    if (g_ledger.total_at[loc] > g_ledger.peak_at[loc]) g_ledger.peak_at[loc] = g_ledger.total_at[loc];
    if (g_ledger.total > g_ledger.window_peak) g_ledger.window_peak = g_ledger.total;
    if (g_ledger.total_at[loc] > g_ledger.window_peak_at[loc]) g_ledger.window_peak_at[loc] = g_ledger.total_at[loc];
}

// Say which op runs now (the model calls it as it goes): --mem-timeline's rows
// and the peak's receipt name it.
void ledger_where(const char *fmt, int layer) {
    char was[sizeof g_ledger.where];
    memcpy(was, g_ledger.where, sizeof was);
    snprintf(g_ledger.where, sizeof g_ledger.where, fmt, layer);
    if (g_ledger.trace && strcmp(was, g_ledger.where)) printf(" %s:\n", g_ledger.where);  // --trace: a heading per part
    if (g_ledger.on_where && strcmp(was, g_ledger.where)) g_ledger.on_where(g_ledger.where);
}

// Start a new window (a step): its peak starts at what is live now.
void ledger_window_start(void) {
    g_ledger.window_peak = g_ledger.total;
    memcpy(g_ledger.window_peak_at, g_ledger.total_at, sizeof g_ledger.window_peak_at);
}

void ledger_sub(int category, size_t bytes, int loc) {
    g_ledger.live[category] -= bytes;
    g_ledger.total -= bytes;
    g_ledger.live_at[loc][category] -= bytes;
    g_ledger.total_at[loc] -= bytes;
}

// Record a buffer someone allocated: its category, size, name and location.
// mem_alloc uses it for host memory; the GPU path (gpu/gpt.h) for device and
// page-locked memory, so all land in the same ledger and the same --mem table.
// A file's bytes (--offload-to disk) are recorded with a key of its own as p.
void mem_track(void *p, int category, size_t bytes, const char *name, int loc) {
    if (g_ledger.nblocks == MEM_MAX_BLOCKS) ledger_bug("too many tracked buffers", name);
    MemBlock *b = &g_ledger.blocks[g_ledger.nblocks++];
    b->ptr = p; b->bytes = bytes; b->category = category; b->name = name; b->loc = loc;
    if (loc == LOC_DEVICE && g_ledger.on_gpu) g_ledger.gpu_reserved += bytes;
    ledger_add(category, bytes, loc);
}

// Forget a tracked buffer (the caller frees it); 0, or -1 if it was not tracked.
int mem_untrack(void *p) {
    for (int i = 0; i < g_ledger.nblocks; i++) {
        MemBlock *b = &g_ledger.blocks[i];
        if (b->ptr != p) continue;
        ledger_sub(b->category, b->bytes, b->loc);
        if (b->loc == LOC_DEVICE && g_ledger.on_gpu) g_ledger.gpu_reserved -= b->bytes;
        *b = g_ledger.blocks[--g_ledger.nblocks];
        return 0;
    }
    return -1;
}

// Allocate `bytes` zeroed bytes of host memory in `category`, at location
// `loc` (LOC_HOST or LOC_DEVICE on the CPU; LOC_PINNED where no GPU pins it).
// 64-byte aligned for SIMD. The ledger counts exactly the bytes asked for
// (alignment padding is the C library's business and the same for every run).
void *mem_alloc_at(int loc, int category, size_t bytes, const char *name) {
    size_t rounded = (bytes + 63) / 64 * 64;
    if (rounded == 0) rounded = 64;
    void *p = aligned_alloc(64, rounded);
    if (!p) {
        fprintf(stderr, "error: out of memory allocating %s (%zu bytes, %.1f MiB); "
                "try a smaller --model, --batch or --seq-len (see --dry-run)\n",
                name, bytes, bytes / 1048576.0);
        exit(1);
    }
    memset(p, 0, rounded);
    mem_track(p, category, bytes, name, loc);
    return p;
}

// The same where this run keeps its host memory: the device on the CPU, the
// host beside a GPU (ledger_device_is_gpu says so when a GPU run starts).
void *mem_alloc(int category, size_t bytes, const char *name) {
    return mem_alloc_at(g_ledger.host_loc, category, bytes, name);
}

// --device cuda: from now on mem_alloc's buffers are host memory beside the GPU.
void ledger_device_is_gpu(void) {
    g_ledger.on_gpu = 1;
    g_ledger.host_loc = LOC_HOST;
}

void mem_free(void *p) {
    if (!p) return;
    if (mem_untrack(p)) ledger_bug("mem_free of a pointer it does not know", "mem_free");
    free(p);
}

MemSnapshot ledger_snapshot(void) {
    MemSnapshot s;
    memcpy(s.bytes, g_ledger.live, sizeof s.bytes);
    memcpy(s.at, g_ledger.live_at, sizeof s.at);
    s.total = g_ledger.total;
    return s;
}

// One buffer of a model's table (cpu/gpt.h, gpu/gpt.h, cpu/eval.h): where its
// pointer lives, where the buffer lives (MemLocation), its ledger category and
// name, and its size for this model. The table is read by building and freeing.
typedef struct {
    void **at;
    int where, category;
    const char *name;
    size_t bytes;  // 0: this model has none
} Buffer;

// Make every buffer of a host table (zeroed: mem_alloc zeroes), and free them.
void table_alloc(const Buffer *b, int n) {
    for (int i = 0; i < n; i++)
        if (b[i].bytes) *b[i].at = mem_alloc_at(b[i].where, b[i].category, b[i].bytes, b[i].name);
}

void table_free(const Buffer *b, int n) {
    for (int i = 0; i < n; i++)
        if (b[i].bytes && *b[i].at) { mem_free(*b[i].at); *b[i].at = NULL; }
}

// The process's peak resident set (VmHWM in /proc/self/status), in bytes;
// 0 where it cannot be read. What the ledger does not see shows as the
// difference: the program and its libraries, thread stacks, the C library's
// own heap. Printed beside the ledger, never folded into it.
size_t process_peak_rss(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    size_t kib = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %zu kB", &kib) == 1) break;
    fclose(f);
    return kib * 1024;
}

// ---------------------------------------------------------------------------
// The activation stack.
//
// One block of memory reserved up front; push hands out the next `bytes`,
// pop_to returns to an earlier mark. Pushing past the end is a fatal error
// naming the tensor: the arena is sized from the predictor, so an overflow
// means the predictor and the code disagree, which is a bug to fix, never to
// paper over. What it holds is activations, but for a sample's KV cache
// (cpu/kvcache.h), pushed under the sample's forwards in a category of its own.

#define ARENA_MAX_TENSORS 4096

typedef struct {
    char *base;
    int adopted;  // the memory is someone else's (the GPU's): not freed here
    size_t align;  // every push starts on a multiple of this (1: packed, as on the CPU)
    size_t capacity;
    size_t top;
    int n;                                  // tensors on the stack
    const char *names[ARENA_MAX_TENSORS];  // for --trace and error messages
    size_t sizes[ARENA_MAX_TENSORS];
    int categories[ARENA_MAX_TENSORS];     // the ledger's category of each (MEM_ACTIVATIONS, MEM_KVCACHE)
    size_t high;                           // the highest top so far (the report's stack_peak)
    void (*fresh)(void *p, size_t bytes);   // called on each push, if set (the GPU's: cuda/api.h gpu_fill_fresh)
    int dropping;                           // inside arena_drop_begin/end: one event, not each push and pop
    size_t drop_from;                       // the top when the drop began
} Arena;

Arena g_arena;

// Reserve the arena. Its bytes are not counted until pushed: the ledger's
// "activations" row is what the forward pass really keeps.
void arena_reserve(size_t capacity) {
    g_arena.capacity = capacity;
    g_arena.base = aligned_alloc(64, (capacity + 63) / 64 * 64 + 64);
    if (!g_arena.base) {
        fprintf(stderr, "error: out of memory reserving %.1f MiB for activations; "
                "try a smaller --batch or --seq-len (see --dry-run)\n", capacity / 1048576.0);
        exit(1);
    }
    g_arena.align = CPU_ACT_ALIGN;  // a 16-bit tensor of an odd size would leave the next fp32 one misaligned
    g_arena.top = g_arena.high = 0;
    g_arena.n = 0;
}

// The same stack over memory the caller reserved (device memory for
// --device cuda): push and pop only do arithmetic on the addresses. Each push
// is rounded up to `align` bytes, so every tensor starts aligned (the GPU's
// GEMMs and vector loads want 16 bytes or more, whatever the tensor's size).
void arena_adopt(void *base, size_t capacity, size_t align) {
    g_arena.base = base;
    g_arena.adopted = 1;
    g_arena.align = align;
    g_arena.capacity = capacity;
    g_arena.top = g_arena.high = 0;
    g_arena.n = 0;
}

void arena_release(void) {
    if (!g_arena.adopted) free(g_arena.base);
    memset(&g_arena, 0, sizeof g_arena);
}

// Push `bytes` (rounded up to the arena's alignment: the ledger counts the
// rounded size, since that is what the tensor occupies).
// --mem-timeline and the peak's receipt: while recording (train.c records
// the first step), every push and pop appends an event with the live bytes
// per category after it, and each new high of the total keeps a copy of the
// stack's tensors and the op that was running. Small bookkeeping (a few
// hundred rows), allocated outside the ledger like the arena's name table.
typedef struct {
    char op;           // '+' push, '-' pop, 'd' drop (arena_drop_end)
    const char *name;  // the tensor pushed, or what the pop or drop ends
    size_t bytes;      // pushed, or freed (a drop: net)
    size_t live[MEM_NCAT], total;
    char where[48];
    double t;          // when (now_seconds)
} MemEvent;

// The same step tensor by tensor, for --mem-snapshot (memory/snapshot.h): each
// push and each tensor a pop frees, at its offset in the arena, a drop's own
// pops and pushes too (marked), which the events above fold into one.
typedef struct {
    char op;     // '+' pushed, '-' popped
    char drop;   // part of a drop (arena_drop_begin .. arena_drop_end)
    int category;
    const char *name;
    size_t offset, bytes;
    char where[48];
} StackOp;

typedef struct {
    int on;
    MemEvent *events;
    int n, cap;
    StackOp *ops;  // tensor by tensor
    int nops, ops_cap;
    size_t peak_total;                         // the highest total while recording
    int peak_event;                            // the event that reached it
    int peak_n;                                // the stack then: its tensors
    const char *peak_names[ARENA_MAX_TENSORS];
    size_t peak_sizes[ARENA_MAX_TENSORS];
} MemRecording;

MemRecording g_recording;

void record_start(void) {
    g_recording.on = 1;
    g_recording.n = g_recording.nops = 0;
    g_recording.peak_total = 0;
    g_recording.peak_event = -1;
}

void record_stop(void) { g_recording.on = 0; }

void record_event(char op, const char *name, size_t bytes) {
    if (!g_recording.on) return;
    if (g_recording.n == g_recording.cap) {
        g_recording.cap = g_recording.cap ? 2 * g_recording.cap : 1024;
        g_recording.events = realloc(g_recording.events, sizeof(MemEvent) * g_recording.cap);
        if (!g_recording.events) ledger_bug("out of memory for the memory timeline", name);
    }
    MemEvent *e = &g_recording.events[g_recording.n++];
    e->op = op, e->name = name, e->bytes = bytes, e->total = g_ledger.total;
    memcpy(e->live, g_ledger.live, sizeof e->live);
    memcpy(e->where, g_ledger.where, sizeof e->where);
    e->t = now_seconds();
    if (g_ledger.total > g_recording.peak_total) {
        g_recording.peak_total = g_ledger.total;
        g_recording.peak_event = g_recording.n - 1;
        g_recording.peak_n = g_arena.n;
        memcpy(g_recording.peak_names, g_arena.names, sizeof(const char *) * g_arena.n);
        memcpy(g_recording.peak_sizes, g_arena.sizes, sizeof(size_t) * g_arena.n);
    }
}

void record_op(char op, int category, const char *name, size_t offset, size_t bytes) {
    if (!g_recording.on) return;
    if (g_recording.nops == g_recording.ops_cap) {
        g_recording.ops_cap = g_recording.ops_cap ? 2 * g_recording.ops_cap : 1024;
        g_recording.ops = realloc(g_recording.ops, sizeof(StackOp) * g_recording.ops_cap);
        if (!g_recording.ops) ledger_bug("out of memory for the memory snapshot", name);
    }
    StackOp *o = &g_recording.ops[g_recording.nops++];
    *o = (StackOp){op, (char)g_arena.dropping, category, name, offset, bytes, ""};
    memcpy(o->where, g_ledger.where, sizeof o->where);
}

// ... as `category` (arena_push: activations).
void *arena_push_as(int category, const char *name, size_t bytes) {
    if (g_arena.align > 1) bytes = (bytes + g_arena.align - 1) / g_arena.align * g_arena.align;
    if (g_arena.top + bytes > g_arena.capacity || g_arena.n == ARENA_MAX_TENSORS) {
        fprintf(stderr, "error: activation stack overflow pushing '%s' (%zu bytes) at %zu of %zu "
                "reserved bytes: the predictor and the forward pass disagree (a bug)\n",
                name, bytes, g_arena.top, g_arena.capacity);
        exit(1);
    }
    void *p = g_arena.base + g_arena.top;
    if (g_arena.fresh) g_arena.fresh(p, bytes);
    g_arena.top += bytes;
    if (g_arena.top > g_arena.high) g_arena.high = g_arena.top;
    g_arena.names[g_arena.n] = name;
    g_arena.sizes[g_arena.n] = bytes;
    g_arena.categories[g_arena.n] = category;
    g_arena.n++;
    ledger_add(category, bytes, LOC_DEVICE);
    record_op('+', category, name, g_arena.top - bytes, bytes);
    if (g_arena.dropping) return p;  // part of a drop: arena_drop_end tells it
    if (g_ledger.trace)
        printf("  push %-10s %10zu B  live activations %10zu B\n", name, bytes, g_arena.top);
    record_event('+', name, bytes);
    return p;
}

void *arena_push(const char *name, size_t bytes) { return arena_push_as(MEM_ACTIVATIONS, name, bytes); }

// Sampling's KV cache (cpu/kvcache.h, gpu/kvcache.h): each layer's keys and
// values of the positions a sample has so far, pushed on the activation stack
// (the host's or the GPU's) while the sample runs.
typedef struct {
    void *kv;  // L x {K, V} x T x W elements of the dtype, W = KVH hs (C for GPT-2); NULL: no cache open
    int T, W, dtype;
    size_t bytes;
    int mark;  // the stack's mark under it
} KVCache;

// A mark is the number of tensors on the stack; pop back down to it.
int arena_mark(void) { return g_arena.n; }

// The bytes of the tensors pushed between two marks.
size_t arena_bytes(int from, int to) {
    size_t b = 0;
    for (int i = from; i < to; i++) b += g_arena.sizes[i];
    return b;
}

void arena_pop_to(int mark, const char *why) {
    size_t freed = 0;
    while (g_arena.n > mark) {
        g_arena.n--;
        g_arena.top -= g_arena.sizes[g_arena.n];
        freed += g_arena.sizes[g_arena.n];
        ledger_sub(g_arena.categories[g_arena.n], g_arena.sizes[g_arena.n], LOC_DEVICE);
        record_op('-', g_arena.categories[g_arena.n], g_arena.names[g_arena.n], g_arena.top, g_arena.sizes[g_arena.n]);
    }
    if (g_arena.dropping) return;  // part of a drop: arena_drop_end tells it
    if (g_ledger.trace && freed)
        printf("  pop  %-10s %10zu B  live activations %10zu B\n", why, freed, g_arena.top);
    if (freed) record_event('-', why, freed);
}

// A block's drop (cpu/storage.h drop_saved): the stack pops the whole block
// and pushes back the tensors the plan keeps, copied down over the dropped
// ones. That is one change to what is live, not a fall to the block's start
// and a climb back (memory never is that low): between the begin and the end
// the pushes and pops are neither printed (--trace) nor recorded
// (--mem-timeline), and the end prints and records one drop, its net bytes.
void arena_drop_begin(void) {
    g_arena.dropping = 1;
    g_arena.drop_from = g_arena.top;
}

void arena_drop_end(const char *why) {
    g_arena.dropping = 0;
    size_t freed = g_arena.drop_from - g_arena.top;
    if (g_ledger.trace)
        printf("  drop %-10s %10zu B  live activations %10zu B\n", why, freed, g_arena.top);
    record_event('d', why, freed);
}

#endif
