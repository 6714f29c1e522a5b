// io/state.h — the saved training state (--save, --resume; the messages call it
// a checkpoint): what a file holds, how it is written and read, and every
// check that refuses a file that does not belong to this run. Not to be
// confused with --ckpt (activation checkpointing, model.h), which saves
// memory inside one step.
//
// Layout (little-endian, as written by this machine):
//   "GPTMEMCK" magic, u32 version, i32 L C H V maxT B T, i32 step,
//   u64 data_rng, u64 sample_rng, u64 nparams, i32 dtype, i32 updates,
//   f32 loss_scale, i32 good_steps, i32 zero nranks rank, i32 pad (0), u64 lo hi,
//   i32 adam_bits (32, or 8: --adam-bits 8), i32 steps (the run's --steps; 0: not recorded),
//   f32 weights[hi - lo] (the fp32 weights: master copy for 16-bit runs),
//   f32 adam_m[hi - lo], f32 adam_v[hi - lo] (with --adam-bits 8: the values
//   its 8-bit codes stand for; read back, they give the same codes),
//   u64 FNV-1a checksum of every byte before it.
// Written to FILE.tmp and renamed, so a crash never leaves half a checkpoint.
// With several ranks each rank writes the parameters it owns: rank 0 to FILE,
// rank r to FILE.rank<r>; one rank writes everything to FILE.
#ifndef GPTMEM_STATE_H
#define GPTMEM_STATE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include "core/dtype.h"
#include "core/hash.h"
#include "cuda/api.h"
#include "io/data.h"  // file_size

#define STATE_MAGIC "GPTMEMCK"
#define STATE_VERSION 4u  // 4 added adam_bits; a version 3 file (the same header without it) still loads

typedef struct {
    int32_t L, C, H, V, maxT, B, T, step;
    uint64_t data_rng, sample_rng, nparams;
    int32_t dtype;       // the weights are fp32 (the master copy for 16-bit runs); dtype must match to resume
    int32_t updates;     // optimizer updates applied (fp16 skips steps): AdamW's bias-correction count
    float loss_scale;    // fp16 dynamic loss scale
    int32_t good_steps;  // fp16: steps since the scale last changed
    int32_t zero, nranks, rank;  // ZeRO: the file of rank `rank` of `nranks` at stage `zero`
    int32_t pad;                 // 0 (lo's 8-byte alignment, named so that it is written as zeros)
    uint64_t lo, hi;             // the parameters [lo, hi) this file holds (one rank: all of them)
    int32_t adam_bits;           // 32, or 8: Adam's m and v were kept in 8 bits (--adam-bits 8)
    int32_t steps;               // the run's --steps, which its learning-rate schedule follows (0: not recorded)
} StateHeader;

// The header's bytes in a file of this version (3: without adam_bits, steps).
size_t state_header_bytes(uint32_t version) { return version == 3 ? offsetof(StateHeader, adam_bits) : sizeof(StateHeader); }

// What a state file's arrays come from and go to: this rank's fp32 weights
// and Adam's m and v of the parameters [lo, hi) (element 0 is parameter lo),
// in host or device memory (on_gpu); with --adam-bits 8, m and v are read
// and written through the optimizer's accessors (optim/optimizer.h
// optimizer_moments_get/set), from its element moments_at, and the file holds
// the fp32 values its codes stand for.
// With --offload-to disk the weights, too, are read and written through
// accessors (cpu/offload.h, gpu/offload.h: the offload file, a record at a time).
typedef struct {
    float *w, *m, *v;
    size_t lo, hi;
    int on_gpu;
    void *moments;  // --adam-bits 8 or the offload file: what the accessors below read and write m and v of
    size_t moments_at;
    void (*moments_get)(const void *opt, int which, size_t at, float *dst, size_t n);
    void (*moments_set)(void *opt, int which, size_t at, const float *src, size_t n);
    void *weights;  // the offload file: what these read and write the weights of
    size_t weights_at;
    void (*weights_get)(const void *ctx, int which, size_t at, float *dst, size_t n);
    void (*weights_set)(void *ctx, int which, size_t at, const float *src, size_t n);
} NetState;

// The part of the state that changes as training goes, besides the weights,
// Adam's state and the random streams: kept here during the run, written into
// the header when saving, read out of it when resuming.
typedef struct {
    int updates;       // optimizer updates applied (fp16 skips steps): AdamW's bias-correction count
    float loss_scale;  // fp16 dynamic loss scale (1 for fp32 and bf16)
    int good_steps;    // fp16: steps since the scale last changed
} LiveState;

// The header to write after `step` steps: the run's own (model, batch, dtype,
// ranks, shard) with where training is.
StateHeader state_at(const StateHeader *run, int step, const LiveState *live, uint64_t data_rng, uint64_t sample_rng) {
    StateHeader header = *run;
    header.step = step;
    header.updates = live->updates;
    header.loss_scale = live->loss_scale;
    header.good_steps = live->good_steps;
    header.data_rng = data_rng;
    header.sample_rng = sample_rng;
    return header;
}

LiveState state_live(const StateHeader *header) {
    LiveState live = {header->updates, header->loss_scale, header->good_steps};
    return live;
}


// A state file's fp32 weights (from byte `at`) as a WeightSource's file
// (core/config.h): what --eval-only's comparison rows read a piece at a time.
typedef struct {
    FILE *f;
    long at;
} StateWeights;

int state_weights_read(const void *file, float *dst, size_t lo, size_t hi) {
    const StateWeights *w = file;
    return fseek(w->f, w->at + (long)(lo * sizeof(float)), SEEK_SET) != 0 ||
           fread(dst, sizeof(float), hi - lo, w->f) != hi - lo ? -1 : 0;
}

int write_hashed(FILE *f, uint64_t *h, const void *p, size_t n) {
    *h = fnv1a(*h, p, n);
    return fwrite(p, 1, n, f) == n ? 0 : -1;
}

// The big arrays go through a 1 MiB host buffer, so that they can come from
// (or go to) GPU memory: on_gpu says which. CPU arrays are read in place.
enum { STATE_CHUNK = 1 << 20 };

int write_array(FILE *f, uint64_t *h, const float *src, size_t bytes, int on_gpu) {
    if (!on_gpu) return write_hashed(f, h, src, bytes);
    char *chunk = malloc(STATE_CHUNK);
    int bad = 0;
    for (size_t at = 0; at < bytes && !bad; at += STATE_CHUNK) {
        size_t n = bytes - at < STATE_CHUNK ? bytes - at : STATE_CHUNK;
        gpu_download(chunk, (const char *)src + at, n);
        bad = write_hashed(f, h, chunk, n);
    }
    free(chunk);
    return bad;
}

// n floats read through an accessor (get(ctx, which, at + i, ...)) a chunk at
// a time through a host buffer, written and hashed.
int write_accessed(FILE *f, uint64_t *h, void (*get)(const void *, int, size_t, float *, size_t), const void *ctx,
                   int which, size_t at0, size_t n) {
    float *chunk = malloc(STATE_CHUNK);
    size_t per = STATE_CHUNK / sizeof(float);  // a multiple of ADAM_BLOCK
    int bad = 0;
    for (size_t at = 0; at < n && !bad; at += per) {
        size_t len = n - at < per ? n - at : per;
        get(ctx, which, at0 + at, chunk, len);
        bad = write_hashed(f, h, chunk, len * sizeof(float));
    }
    free(chunk);
    return bad;
}

// Adam's m (which 0) or v (1) of the state st: an fp32 array as it is, or
// (--adam-bits 8, the offload file) through the accessor.
int write_moments(FILE *f, uint64_t *h, const NetState *st, int which) {
    size_t n = st->hi - st->lo;
    if (!st->moments) return write_array(f, h, which ? st->v : st->m, n * sizeof(float), st->on_gpu);
    return write_accessed(f, h, st->moments_get, st->moments, which, st->moments_at, n);
}

// The fp32 weights of the state st: an array, or (the offload file) through the accessor.
int write_weights(FILE *f, uint64_t *h, const NetState *st) {
    size_t n = st->hi - st->lo;
    if (!st->weights) return write_array(f, h, st->w, n * sizeof(float), st->on_gpu);
    return write_accessed(f, h, st->weights_get, st->weights, 0, st->weights_at, n);
}

// n of the state's fp32 weights from element `at` (counted from lo) into dst:
// from host memory, the GPU, or (the offload file) through the accessor.
void state_weights_get(const void *ctx, size_t at, float *dst, size_t n) {
    const NetState *st = ctx;
    if (st->weights) st->weights_get(st->weights, 0, st->weights_at + at, dst, n);
    else if (st->on_gpu) gpu_download(dst, st->w + at, n * sizeof(float));
    else memcpy(dst, st->w + at, n * sizeof(float));
}

// Is `path` something a save may replace: missing, or a regular file? A
// device, directory or fifo is refused (writing PATH.tmp and renaming it over
// /dev/full, say, would replace the device node with a file).
int state_path_ok(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return errno == ENOENT;
    return S_ISREG(st.st_mode);
}

// Can a save go to `path` (and its path.tmp)? 0, or -1 after a message. The
// run checks this before training, so nothing is lost, and again when saving.
int state_check_target(const char *path) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (!state_path_ok(path) || !state_path_ok(tmp)) {
        fprintf(stderr, "error: cannot write checkpoint '%s': it exists and is not a regular file (a device, "
                "directory or fifo); pass --save a file path\n", state_path_ok(path) ? tmp : path);
        return -1;
    }
    FILE *f = fopen(tmp, "wb");  // the folder exists and takes a file: try it (the save writes tmp first, too)
    if (!f) {
        fprintf(stderr, "error: cannot write checkpoint '%s': %s; pass --save a path in a folder you can write\n", tmp,
                strerror(errno));
        return -1;
    }
    fclose(f);
    remove(tmp);
    return 0;
}

// The write itself: magic, version, header, the three arrays, the checksum.
int write_state_file(const char *path, const char *tmp, const StateHeader *header, const NetState *st) {
    FILE *f = fopen(tmp, "wb");
    if (!f) { fprintf(stderr, "error: cannot write checkpoint '%s': %s\n", tmp, strerror(errno)); return -1; }
    uint64_t h = 0xCBF29CE484222325ULL;
    uint32_t version = STATE_VERSION;
    int bad = write_hashed(f, &h, STATE_MAGIC, 8) | write_hashed(f, &h, &version, 4) |
              write_hashed(f, &h, header, sizeof *header) | write_weights(f, &h, st);
    if (getenv("GPTMEM_INTERRUPT_SAVE")) { fflush(f); raise(SIGINT); }
    bad |= write_moments(f, &h, st, 0) | write_moments(f, &h, st, 1);
    bad |= fwrite(&h, 8, 1, f) != 1;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        fprintf(stderr, "error: writing checkpoint '%s' failed (disk full?)\n", path);
        remove(tmp);
        return -1;
    }
    return 0;
}

// Ctrl-C (or a kill) while a state is being written: remove the unfinished
// path.tmp, say that the previous file is intact, and stop. Only
// async-signal-safe calls (unlink, write, _exit) happen in the handler.
static char g_saving_tmp[4096];

static void interrupted_while_saving(int sig) {
    unlink(g_saving_tmp);
    const char msg[] = "\nerror: interrupted while saving a checkpoint: the unfinished file was removed; the "
                       "previous checkpoint (if any) is intact\n";
    ssize_t ignored = write(2, msg, sizeof msg - 1);
    (void)ignored;
    _exit(128 + sig);
}

// Write the state to path (through path.tmp, renamed when complete): 0, or -1
// after a message. (GPTMEM_INTERRUPT_SAVE set in the environment interrupts
// the write half-way, as Ctrl-C would: the tests' way to check the handler.)
int save_state(const char *path, const StateHeader *header, const NetState *st) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (state_check_target(path)) return -1;
    snprintf(g_saving_tmp, sizeof g_saving_tmp, "%s", tmp);
    struct sigaction on_signal, old_int, old_term;
    memset(&on_signal, 0, sizeof on_signal);
    on_signal.sa_handler = interrupted_while_saving;
    sigaction(SIGINT, &on_signal, &old_int);
    sigaction(SIGTERM, &on_signal, &old_term);
    int result = write_state_file(path, tmp, header, st);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    return result;
}

int read_hashed(FILE *f, uint64_t *h, void *p, size_t n) {
    if (fread(p, 1, n, f) != n) return -1;
    *h = fnv1a(*h, p, n);
    return 0;
}

int read_array(FILE *f, uint64_t *h, float *dst, size_t bytes, int on_gpu) {
    if (!on_gpu) return read_hashed(f, h, dst, bytes);
    char *chunk = malloc(STATE_CHUNK);
    int bad = 0;
    for (size_t at = 0; at < bytes && !bad; at += STATE_CHUNK) {
        size_t n = bytes - at < STATE_CHUNK ? bytes - at : STATE_CHUNK;
        bad = read_hashed(f, h, chunk, n);
        if (!bad) gpu_upload((char *)dst + at, chunk, n);
    }
    free(chunk);
    return bad;
}

// Reading a state: open it and check its header against this run
// (state_open), read its arrays in order (state_read), then check the
// checksum (state_close). Every problem exits with a message naming the file.
typedef struct {
    FILE *f;
    const char *path;
    uint64_t h;       // FNV-1a of every byte read so far
    StateHeader header;
    long data_at;     // the byte where the weights start
} StateReader;

// What the run that reads it is: RESUME_TRAINING checks dtype and ranks as a
// resume must; READ_WEIGHTS (--eval-only) takes any dtype, from one rank.
enum { RESUME_TRAINING, READ_WEIGHTS };

// The ranks that saved the state whose rank-0 file is `path` (from its
// header), or -1 if it cannot be read as one (load_state then says why).
int state_ranks(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    char magic[8];
    uint32_t version = 0;
    StateHeader header;
    memset(&header, 0, sizeof header);
    int ok = fread(magic, 1, 8, f) == 8 && !memcmp(magic, STATE_MAGIC, 8) && fread(&version, 4, 1, f) == 1 &&
             (version == STATE_VERSION || version == 3) && fread(&header, state_header_bytes(version), 1, f) == 1;
    fclose(f);
    return ok ? header.nranks : -1;
}

// A header read from `path`, checked against this run (`want`) for the
// purpose: the dtype and the ranks' shares for a resume, one file holding
// every weight for --eval-only, the model always. Exits with a message.
void state_check_header(const char *path, const StateHeader *h, const StateHeader *want, int purpose) {
    if (purpose == RESUME_TRAINING && h->dtype != want->dtype) {
        fprintf(stderr, "error: checkpoint '%s' was trained with --dtype %s; pass --dtype %s to resume it\n", path,
                h->dtype >= 0 && h->dtype <= DT_FP16 ? dtype_name[h->dtype] : "?",
                h->dtype >= 0 && h->dtype <= DT_FP16 ? dtype_name[h->dtype] : "?");
        exit(1);
    }
    if (h->L != want->L || h->C != want->C || h->H != want->H || h->V != want->V || h->maxT != want->maxT ||
        h->nparams != want->nparams) {
        fprintf(stderr, "error: checkpoint '%s' is for a different model (L%d C%d H%d V%d maxT %d) than this "
                "run (L%d C%d H%d V%d maxT %d); pass the same --model and overrides\n", path, h->L, h->C, h->H,
                h->V, h->maxT, want->L, want->C, want->H, want->V, want->maxT);
        exit(1);
    }
    if (purpose == READ_WEIGHTS && (h->nranks != 1 || h->lo != 0 || h->hi != h->nparams)) {
        fprintf(stderr, "error: checkpoint '%s' is rank %d of %d (--zero %d): it holds a part of the weights; "
                "--eval-only reads a state saved by one process (resume it on %d ranks and --save from a "
                "run without --zero, or evaluate it there)\n", path, h->rank, h->nranks, h->zero, h->nranks);
        exit(1);
    }
    if (purpose == RESUME_TRAINING && (h->zero != want->zero || h->nranks != want->nranks || h->rank != want->rank ||
                                       h->lo != want->lo || h->hi != want->hi)) {
        fprintf(stderr, "error: checkpoint '%s' is rank %d of %d at --zero %d, holding parameters [%llu, %llu); this is "
                "rank %d of %d at --zero %d, needing [%llu, %llu): resume with the same mpirun -np, --zero and "
                "--shard-group\n", path, h->rank, h->nranks, h->zero, (unsigned long long)h->lo,
                (unsigned long long)h->hi, want->rank, want->nranks, want->zero, (unsigned long long)want->lo,
                (unsigned long long)want->hi);
        exit(1);
    }
}

StateReader state_open(const char *path, const StateHeader *want, int purpose) {
    StateReader r = {fopen(path, "rb"), path, 0xCBF29CE484222325ULL, {0}, 0};
    StateHeader header;
    memset(&header, 0, sizeof header);
    if (!r.f) { fprintf(stderr, "error: cannot open checkpoint '%s': %s\n", path, strerror(errno)); exit(1); }
    long long size = file_size(path);
    char magic[8];
    uint32_t version = 0;
    if (read_hashed(r.f, &r.h, magic, 8) || memcmp(magic, STATE_MAGIC, 8)) {
        fprintf(stderr, "error: '%s' is not a gptmem checkpoint (bad magic)\n", path);
        exit(1);
    }
    if (read_hashed(r.f, &r.h, &version, 4) || (version != STATE_VERSION && version != 3)) {
        fprintf(stderr, "error: checkpoint '%s' has version %u; this build reads versions 3 and %u\n", path, version,
                STATE_VERSION);
        exit(1);
    }
    size_t header_bytes = state_header_bytes(version);
    if (read_hashed(r.f, &r.h, &header, header_bytes)) {
        fprintf(stderr, "error: checkpoint '%s' is truncated (no complete header)\n", path);
        exit(1);
    }
    if (version == 3) header.adam_bits = 32;
    state_check_header(path, &header, want, purpose);
    size_t n = (header.hi - header.lo) * sizeof(float);
    long long expect = 8 + 4 + (long long)header_bytes + 3LL * (long long)n + 8;
    if (size != expect) {
        fprintf(stderr, "error: checkpoint '%s' has %lld bytes, expected %lld: it is %s\n", path, size, expect,
                size < expect ? "truncated" : "longer than its header says");
        exit(1);
    }
    r.header = header;
    r.data_at = (long)(8 + 4 + header_bytes);
    return r;
}

// The next `bytes` of the file's arrays into dst (host or device memory).
void state_read(StateReader *r, float *dst, size_t bytes, int on_gpu) {
    if (read_array(r->f, &r->h, dst, bytes, on_gpu)) {
        fprintf(stderr, "error: checkpoint '%s' is truncated\n", r->path);
        exit(1);
    }
}

// Adam's m (which 0) or v (1) into the state st: into an fp32 array, or
// (--adam-bits 8) a chunk at a time through a host buffer into the codes.
void read_accessed(StateReader *r, void (*set)(void *, int, size_t, const float *, size_t), void *ctx, int which,
                   size_t at0, size_t n) {
    float *chunk = malloc(STATE_CHUNK);
    size_t per = STATE_CHUNK / sizeof(float);
    for (size_t at = 0; at < n; at += per) {
        size_t len = n - at < per ? n - at : per;
        state_read(r, chunk, len * sizeof(float), 0);
        set(ctx, which, at0 + at, chunk, len);
    }
    free(chunk);
}

void read_moments(StateReader *r, NetState *st, int which) {
    size_t n = st->hi - st->lo;
    if (!st->moments) { state_read(r, which ? st->v : st->m, n * sizeof(float), st->on_gpu); return; }
    read_accessed(r, st->moments_set, st->moments, which, st->moments_at, n);
}

// The end: the stored checksum must equal the hash of everything before it.
void state_close(StateReader *r) {
    uint64_t stored;
    if (fread(&stored, 8, 1, r->f) != 1 || stored != r->h) {
        fprintf(stderr, "error: checkpoint '%s' is corrupt (checksum mismatch)\n", r->path);
        exit(1);
    }
    fclose(r->f);
}

// Load a checkpoint into st's weights and moments after checking it matches `want`.
// Exits with a clear error if the file is missing, truncated, corrupt or for
// another model; returns the header.
StateHeader load_state(const char *path, const StateHeader *want, NetState *st) {
    StateReader r = state_open(path, want, RESUME_TRAINING);
    if (st->weights) read_accessed(&r, st->weights_set, st->weights, 0, st->weights_at, r.header.hi - r.header.lo);
    else state_read(&r, st->w, (r.header.hi - r.header.lo) * sizeof(float), st->on_gpu);
    read_moments(&r, st, 0);
    read_moments(&r, st, 1);
    state_close(&r);
    if (r.header.B != want->B || r.header.T != want->T)
        fprintf(stderr, "warning: checkpoint was trained with batch %d x %d, this run uses %d x %d\n", r.header.B, r.header.T,
                want->B, want->T);
    return r.header;
}

#endif
