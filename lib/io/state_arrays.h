// io/state_arrays.h — a saved state's big arrays (io/state.h): this rank's
// fp32 weights and Adam's m and v, written and read through a 1 MiB host
// buffer (so that they can live on the GPU) or through accessors (--adam-bits
// 8's codes, --offload-to disk's file), hashed as they go (FNV-1a, the
// file's checksum).
#ifndef GPTMEM_STATE_ARRAYS_H
#define GPTMEM_STATE_ARRAYS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/hash.h"
#include "cuda/api.h"

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

#endif
