// memory.h — the memory ledger: one tracked allocator and the activation stack.
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
// The predictor (predict.h) computes the same numbers from the config alone,
// without ever calling into this file; tests check the two agree to the byte.
#ifndef GPTMEM_MEMORY_H
#define GPTMEM_MEMORY_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum MemCategory {
    MEM_PARAMS,       // the model's weights in the compute dtype
    MEM_MASTER,       // fp32 master weights (mixed precision only)
    MEM_GRADS,        // gradients of the weights
    MEM_ADAM_M,       // AdamW first moment
    MEM_ADAM_V,       // AdamW second moment
    MEM_ACTIVATIONS,  // tensors saved by the forward pass for the backward pass
    MEM_SCRATCH,      // temporaries reused by every layer (backward buffers)
    MEM_COMM,         // communication buffers (ZeRO)
    MEM_DATA,         // the corpus and the token batches
    MEM_NCAT
};

const char *const mem_category_name[MEM_NCAT] = {
    "params", "master", "grads", "adam_m", "adam_v",
    "activations", "scratch", "comm", "data",
};

// A snapshot of the ledger: live bytes per category and their total.
typedef struct {
    size_t bytes[MEM_NCAT];
    size_t total;
} MemSnapshot;

// The phases at which train.c takes a snapshot; the predictor fills the same.
enum MemPhase { PHASE_INIT, PHASE_FORWARD, PHASE_BACKWARD, PHASE_STEP, MEM_NPHASE };
const char *const mem_phase_name[MEM_NPHASE] = {
    "after init", "after forward", "after backward", "after step",
};

// A full report: the four phase snapshots, per-category peaks, total peak.
typedef struct {
    MemSnapshot phase[MEM_NPHASE];
    size_t peak[MEM_NCAT];
    size_t peak_total;
} MemReport;

// One live allocation, so that mem_free knows its size and category and
// --mem can list every buffer by name.
typedef struct {
    void *ptr;
    size_t bytes;
    int category;
    const char *name;
    int on_gpu;  // a device buffer (--device cuda): allocated and freed by cuda/model_gpu.h
} MemBlock;

#define MEM_MAX_BLOCKS 256

typedef struct {
    size_t live[MEM_NCAT];
    size_t peak[MEM_NCAT];
    size_t total, peak_total;
    size_t gpu_reserved;  // bytes cudaMalloc'ed through the ledger (buffers + the activation arena)
    MemBlock blocks[MEM_MAX_BLOCKS];
    int nblocks;
    int trace;  // --trace: print every arena push and pop
} Ledger;

Ledger g_ledger;

void fatal(const char *fmt, const char *what) {
    fprintf(stderr, "error: ");
    fprintf(stderr, fmt, what);
    fprintf(stderr, "\n");
    exit(1);
}

// Count bytes in or out of a category and move the peaks.
void ledger_add(int category, size_t bytes) {
    g_ledger.live[category] += bytes;
    g_ledger.total += bytes;
    if (g_ledger.live[category] > g_ledger.peak[category]) g_ledger.peak[category] = g_ledger.live[category];
    if (g_ledger.total > g_ledger.peak_total) g_ledger.peak_total = g_ledger.total;
}

void ledger_sub(int category, size_t bytes) {
    g_ledger.live[category] -= bytes;
    g_ledger.total -= bytes;
}

// Record a buffer someone allocated: its category, size and name. mem_alloc
// uses it for host memory; the GPU path (cuda/model_gpu.h) for device memory,
// so both land in the same ledger and the same --mem table.
void mem_track(void *p, int category, size_t bytes, const char *name, int on_gpu) {
    if (g_ledger.nblocks == MEM_MAX_BLOCKS) fatal("too many tracked buffers (at %s)", name);
    MemBlock *b = &g_ledger.blocks[g_ledger.nblocks++];
    b->ptr = p; b->bytes = bytes; b->category = category; b->name = name; b->on_gpu = on_gpu;
    if (on_gpu) g_ledger.gpu_reserved += bytes;
    ledger_add(category, bytes);
}

// Forget a tracked buffer (the caller frees it); 0, or -1 if it was not tracked.
int mem_untrack(void *p) {
    for (int i = 0; i < g_ledger.nblocks; i++) {
        if (g_ledger.blocks[i].ptr != p) continue;
        ledger_sub(g_ledger.blocks[i].category, g_ledger.blocks[i].bytes);
        if (g_ledger.blocks[i].on_gpu) g_ledger.gpu_reserved -= g_ledger.blocks[i].bytes;
        g_ledger.blocks[i] = g_ledger.blocks[--g_ledger.nblocks];
        return 0;
    }
    return -1;
}

// Allocate `bytes` zeroed bytes in `category`. 64-byte aligned for SIMD.
// The ledger counts exactly the bytes asked for (alignment padding is the C
// library's business and is the same for every run).
void *mem_alloc(int category, size_t bytes, const char *name) {
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
    mem_track(p, category, bytes, name, 0);
    return p;
}

void mem_free(void *p) {
    if (!p) return;
    if (mem_untrack(p)) fatal("mem_free of a pointer the ledger does not know (%s)", "bug");
    free(p);
}

MemSnapshot ledger_snapshot(void) {
    MemSnapshot s;
    memcpy(s.bytes, g_ledger.live, sizeof s.bytes);
    s.total = g_ledger.total;
    return s;
}

// ---------------------------------------------------------------------------
// The activation stack.
//
// One block of memory reserved up front; push hands out the next `bytes`,
// pop_to returns to an earlier mark. Pushing past the end is a fatal error
// naming the tensor: the arena is sized from the predictor, so an overflow
// means the predictor and the code disagree, which is a bug to fix, never to
// paper over.

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
    g_arena.align = 1;
    g_arena.top = 0;
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
    g_arena.top = 0;
    g_arena.n = 0;
}

void arena_release(void) {
    if (!g_arena.adopted) free(g_arena.base);
    memset(&g_arena, 0, sizeof g_arena);
}

// Push `bytes` (rounded up to the arena's alignment: the ledger counts the
// rounded size, since that is what the tensor occupies).
void *arena_push(const char *name, size_t bytes) {
    if (g_arena.align > 1) bytes = (bytes + g_arena.align - 1) / g_arena.align * g_arena.align;
    if (g_arena.top + bytes > g_arena.capacity || g_arena.n == ARENA_MAX_TENSORS) {
        fprintf(stderr, "error: activation stack overflow pushing '%s' (%zu bytes) at %zu of %zu "
                "reserved bytes: the predictor and the forward pass disagree (a bug)\n",
                name, bytes, g_arena.top, g_arena.capacity);
        exit(1);
    }
    void *p = g_arena.base + g_arena.top;
    g_arena.top += bytes;
    g_arena.names[g_arena.n] = name;
    g_arena.sizes[g_arena.n] = bytes;
    g_arena.n++;
    ledger_add(MEM_ACTIVATIONS, bytes);
    if (g_ledger.trace)
        printf("  push %-10s %10zu B  live activations %10zu B\n", name, bytes, g_arena.top);
    return p;
}

// A mark is the number of tensors on the stack; pop back down to it.
int arena_mark(void) { return g_arena.n; }

void arena_pop_to(int mark, const char *why) {
    size_t freed = 0;
    while (g_arena.n > mark) {
        g_arena.n--;
        g_arena.top -= g_arena.sizes[g_arena.n];
        freed += g_arena.sizes[g_arena.n];
    }
    ledger_sub(MEM_ACTIVATIONS, freed);
    if (g_ledger.trace && freed)
        printf("  pop  %-10s %10zu B  live activations %10zu B\n", why, freed, g_arena.top);
}

// ---------------------------------------------------------------------------
// Printing: the table --mem shows and the JSON --mem-json writes.

double mib(size_t b) { return b / 1048576.0; }

void print_size(FILE *f, size_t b) {
    if (b >= (size_t)1 << 30) fprintf(f, "%9.2f GiB", b / 1073741824.0);
    else fprintf(f, "%9.2f MiB", mib(b));
}

// One table: category | predicted | measured | difference, for one phase or
// for the peaks. `measured` may be NULL (a dry run: prediction only).
void print_mem_rows(FILE *f, const char *title, const size_t *pred, size_t pred_total,
                           const size_t *meas, size_t meas_total) {
    fprintf(f, "  %s\n", title);
    if (meas) fprintf(f, "    %-12s %16s %13s %16s %13s %10s\n", "category", "predicted B", "", "measured B", "", "diff B");
    else fprintf(f, "    %-12s %16s %13s\n", "category", "predicted B", "");
    for (int c = 0; c <= MEM_NCAT; c++) {
        int is_total = c == MEM_NCAT;
        size_t p = is_total ? pred_total : pred[c];
        const char *name = is_total ? (meas ? "total" : "total") : mem_category_name[c];
        if (is_total) fprintf(f, "    %s\n", "------------");
        fprintf(f, "    %-12s %16zu ", name, p);
        print_size(f, p);
        if (meas) {
            size_t m = is_total ? meas_total : meas[c];
            fprintf(f, " %16zu ", m);
            print_size(f, m);
            fprintf(f, " %10lld", (long long)m - (long long)p);
        }
        fprintf(f, "\n");
    }
}

void print_mem_report(FILE *f, const MemReport *pred, const MemReport *meas) {
    for (int ph = 0; ph < MEM_NPHASE; ph++)
        print_mem_rows(f, mem_phase_name[ph], pred->phase[ph].bytes, pred->phase[ph].total,
                       meas ? meas->phase[ph].bytes : NULL, meas ? meas->phase[ph].total : 0);
    print_mem_rows(f, "peak (per category; total = peak of the sum)", pred->peak, pred->peak_total,
                   meas ? meas->peak : NULL, meas ? meas->peak_total : 0);
}

// The prediction alone, compact: one row per category, one column per phase,
// then the peak in MiB and in bytes. This is what --dry-run prints.
void print_prediction(FILE *f, const MemReport *r) {
    fprintf(f, "  %-12s", "MiB");
    for (int ph = 0; ph < MEM_NPHASE; ph++) fprintf(f, " %14s", mem_phase_name[ph]);
    fprintf(f, " %12s %14s\n", "peak", "peak bytes");
    for (int c = 0; c <= MEM_NCAT; c++) {
        int is_total = c == MEM_NCAT;
        fprintf(f, "  %-12s", is_total ? "total" : mem_category_name[c]);
        for (int ph = 0; ph < MEM_NPHASE; ph++)
            fprintf(f, " %14.2f", mib(is_total ? r->phase[ph].total : r->phase[ph].bytes[c]));
        size_t peak = is_total ? r->peak_total : r->peak[c];
        fprintf(f, " %12.2f %14zu\n", mib(peak), peak);
    }
}

void json_sizes(FILE *f, const size_t *b, size_t total) {
    fprintf(f, "{");
    for (int c = 0; c < MEM_NCAT; c++) fprintf(f, "\"%s\": %zu, ", mem_category_name[c], b[c]);
    fprintf(f, "\"total\": %zu}", total);
}

void json_report(FILE *f, const MemReport *r) {
    fprintf(f, "{");
    for (int ph = 0; ph < MEM_NPHASE; ph++) {
        fprintf(f, "\"%s\": ", mem_phase_name[ph]);
        json_sizes(f, r->phase[ph].bytes, r->phase[ph].total);
        fprintf(f, ", ");
    }
    fprintf(f, "\"peak\": ");
    json_sizes(f, r->peak, r->peak_total);
    fprintf(f, "}");
}

// Both reports as JSON: {"predicted": {...}, "measured": {...} or null}.
int write_mem_json(const char *path, const MemReport *pred, const MemReport *meas) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "{\"predicted\": ");
    json_report(f, pred);
    fprintf(f, ",\n \"measured\": ");
    if (meas) json_report(f, meas);
    else fprintf(f, "null");
    fprintf(f, "}\n");
    return fclose(f);
}

#endif
