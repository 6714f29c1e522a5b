// io/reshard.h — a state saved on N ranks at one ZeRO stage, resumed on M ranks at any stage
// (DeepSpeed calls it a universal checkpoint). Every saved state, at every stage, is a partition
// of the flat parameter array: rank k's file holds the fp32 weights, Adam's m and v of its
// parameters [lo_k, hi_k). A rank of the new run needs its own [lo, hi) (io/state.h NetState): it
// reads the overlap of each file that holds some of them, from that file's three arrays, into
// wherever it keeps them (host, GPU, the offload file, 8-bit codes). So nothing is converted: the
// numbers are the saved ones. What changes is the run after it: another rank count sums the
// gradients across ranks in another order (a difference in the last bits, doc/zero.md), and
// another global batch (ranks x --batch) draws other batches.
#ifndef GPTMEM_RESHARD_H
#define GPTMEM_RESHARD_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "io/state_load.h"

// n floats from byte `at` of f into the state's array `which` (0 the weights, 1 m, 2 v) from
// parameter a (counted in the flat array) on: an array in host or GPU memory, or an accessor.
// 0, or -1 if a read failed.
int read_span(FILE *f, long long at, NetState *st, int which, size_t a, size_t n) {
    uint64_t h = 0;
    size_t off = a - st->lo;
    if (fseek(f, (long)at, SEEK_SET) != 0) return -1;
    void (*set)(void *, int, size_t, const float *, size_t) = which ? st->moments_set : st->weights_set;
    void *ctx = which ? st->moments : st->weights;
    if (!ctx) {
        float *dst = which == 0 ? st->w : which == 1 ? st->m : st->v;
        return read_array(f, &h, dst + off, n * sizeof(float), st->on_gpu);
    }
    float *chunk = malloc(STATE_CHUNK);
    size_t per = STATE_CHUNK / sizeof(float), base = which ? st->moments_at : st->weights_at;
    int bad = 0;
    for (size_t k = 0; k < n && !bad; k += per) {
        size_t len = n - k < per ? n - k : per;
        bad = fread(chunk, sizeof(float), len, f) != len;
        if (!bad) set(ctx, which ? which - 1 : 0, base + off + k, chunk, len);
    }
    free(chunk);
    return bad ? -1 : 0;
}

// The save id at a version 5 file's end (0 before).
uint64_t state_save_id(FILE *f, uint32_t version, long long size) {
    uint64_t id = 0;
    if (version < 5 || fseek(f, (long)(size - 16), SEEK_SET) != 0 || fread(&id, 8, 1, f) != 1) return 0;
    return id;
}

// File k of the state whose rank-0 file is `base`: opened and checked (the model, the dtype,
// ranges, size), one of the n ranks' files of file 0's save; its part [lo, hi) that this rank
// keeps read into st (with its checksum verified first), unless an earlier file held the same
// part (--shard-group: each group of K ranks saved the whole, the groups are replicas; seen[]
// holds each earlier file's lo). Returns how many parameters it gave. Exits with a message
// naming the file.
size_t reshard_file(const char *base, int k, const StateHeader *first, uint64_t first_id, const StateHeader *want,
                    NetState *st, uint64_t *seen) {
    char path[4096];
    snprintf(path, sizeof path, k ? "%s.rank%d" : "%s", base, k);
    StateReader r = state_open(path, want, RESUME_RESHARDED);
    const StateHeader *h = &r.header;
    uint64_t id = state_save_id(r.f, r.version, file_size(path));
    if (h->nranks != first->nranks || h->rank != k || h->step != first->step || id != first_id) {
        fprintf(stderr, "error: '%s' was saved by another save (step %d, rank %d of %d, save id %016llx) than '%s' "
                "(step %d, %d ranks, save id %016llx): resume from the files of one save\n", path, h->step, h->rank,
                h->nranks, (unsigned long long)id, base, first->step, first->nranks, (unsigned long long)first_id);
        exit(1);
    }
    size_t a = h->lo > st->lo ? h->lo : st->lo, b = h->hi < st->hi ? h->hi : st->hi, n = h->hi - h->lo;
    seen[k] = h->lo;
    for (int j = 0; j < k && b > a; j++)
        if (seen[j] == h->lo) b = a;  // a replica's part: read from file j already
    if (b > a && state_corrupt(path)) state_damaged(path, "");
    for (int which = 0; which < 3 && b > a; which++) {
        long long at = r.data_at + 4LL * (long long)(which * n + (a - h->lo));
        if (read_span(r.f, at, st, which, a, b - a)) {
            fprintf(stderr, "error: reading checkpoint '%s' failed part-way\n", path);
            exit(1);
        }
    }
    fclose(r.f);
    return b > a ? b - a : 0;
}

// Is `path` this rank's own file of a state, saved by as many ranks at the same stage with the
// same part (the state is read as it is, io/state.h load_state)? 0 when it is not, or cannot be read.
// A --tp run's always: its state is a share of every layer, never resharded, so each rank reads its own
// file, whose checks say what is wrong with it (missing, another rank's, another save's, another layout).
int state_is_mine(const char *path, const StateHeader *want) {
    if (want->tp > 1) return 1;
    FILE *f = unreadable_why(path) ? NULL : fopen(path, "rb");
    uint64_t h = 0;
    uint32_t version;
    StateHeader header;
    int ok = f && state_read_header(f, &h, &version, &header) == 0;
    if (f) fclose(f);
    return ok && header.nranks == want->nranks && header.zero == want->zero && header.rank == want->rank &&
           header.lo == want->lo && header.hi == want->hi;
}

// Load the state whose rank-0 file is `base`, saved on any number of ranks at any stage, into
// this rank's st: each of its parameters from the file that holds it. Returns rank 0's header,
// its save id in *save_id; exits with a message if a file is missing, damaged, of another
// model, dtype or save, or if the files do not hold every parameter this rank keeps.
StateHeader load_state_resharded(const char *base, const StateHeader *want, NetState *st, uint64_t *save_id) {
    StateReader r = state_open(base, want, RESUME_RESHARDED);
    StateHeader first = r.header;
    *save_id = state_save_id(r.f, r.version, file_size(base));
    fclose(r.f);
    size_t got = 0;
    uint64_t *seen = calloc((size_t)first.nranks, sizeof(uint64_t));
    for (int k = 0; k < first.nranks; k++) got += reshard_file(base, k, &first, *save_id, want, st, seen);
    free(seen);
    if (got != st->hi - st->lo) {
        fprintf(stderr, "error: the %d files of '%s' hold %zu of the %zu parameters rank %d keeps: they are not one "
                "save's whole state\n", first.nranks, base, got, st->hi - st->lo, want->rank);
        exit(1);
    }
    return first;
}

#endif
