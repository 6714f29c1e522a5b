// io/offload_file.h — --offload-to disk: the optimizer's states in a file, a
// chunk at a time (ZeRO-Infinity's NVMe tier). The file holds, for each chunk
// of `chunk` parameters, one record: the chunk's fp32 master weights, then
// Adam's m, then v (fp32, or --adam-bits 8's codes and a scale per
// ADAM_BLOCK); every record but the last is whole, so record k starts at
// k x the whole record's bytes, and the file is exactly the bytes the states
// would take in memory. Memory holds one chunk (cpu/offload.h, gpu/offload.h).
//
// The file is made in DIR and unlinked at once: it takes disk space while
// the run lives and none after, however the run ends. Its space is reserved
// before training (a full disk stops the run then, with nothing lost). Each
// record's hash is kept in memory when it is written and checked when it is
// read: a file changed under the run stops it, naming the record, before a
// wrong state is trained on or saved.
#ifndef GPTMEM_OFFLOAD_FILE_H
#define GPTMEM_OFFLOAD_FILE_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/clock.h"
#include "core/hash.h"
#include "core/sizes.h"
#include "core/traffic.h"
#include "memory/ledger.h"

typedef struct {
    int fd;
    char path[4200];
    size_t n;          // the states' elements
    size_t chunk;      // elements in a whole record
    int bits;          // Adam's m and v: 32 or 8
    size_t nrec;
    uint64_t *hash;    // each record's hash, as written
    char keys[3];      // the ledger's keys for the file's three rows
} OffloadFile;

// Bytes of m (or v) for len elements: fp32, or a code each and a scale per ADAM_BLOCK.
size_t moment_bytes(size_t len, int bits) {
    return bits == 8 ? len + 4 * ((len + ADAM_BLOCK - 1) / ADAM_BLOCK) : 4 * len;
}

size_t record_len(const OffloadFile *f, size_t k) {
    size_t a = k * f->chunk;
    return f->n - a < f->chunk ? f->n - a : f->chunk;
}

size_t record_bytes(const OffloadFile *f, size_t len) { return 4 * len + 2 * moment_bytes(len, f->bits); }

// Make the file for n elements of states in `dir` (rank's own), reserve its
// space, and put its rows in the ledger. 0, or -1 after a message naming the
// problem (nothing is left behind).
int offload_file_open(OffloadFile *f, const char *dir, int rank, size_t n, size_t chunk, int bits) {
    memset(f, 0, sizeof *f);
    f->fd = -1, f->n = n, f->chunk = chunk, f->bits = bits;
    f->nrec = (n + chunk - 1) / chunk;
    if (snprintf(f->path, sizeof f->path, "%s/gptmem-offload.%ld.rank%d", dir, (long)getpid(), rank) >= 4096) {
        fprintf(stderr, "error: --offload-to disk: the folder's path is %zu bytes long; gptmem takes paths up to 4095 "
                "bytes\n", strlen(dir));
        return -1;
    }
    f->fd = open(f->path, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (f->fd < 0) {
        fprintf(stderr, "error: --offload-to disk: cannot make the offload file in '%s': %s; name a folder that exists "
                "and is writable (--offload-to disk:DIR)\n", dir, strerror(errno));
        return -1;
    }
    unlink(f->path);  // the space is the run's while it lives, and nobody's after
    size_t bytes = record_bytes(f, n);
    int err = posix_fallocate(f->fd, 0, (off_t)bytes);
    if (err) {
        fprintf(stderr, "error: --offload-to disk: cannot reserve %zu bytes (%.2f GiB) for the optimizer's states in "
                "'%s': %s; free that much there, or name another folder (--offload-to disk:DIR)\n", bytes,
                bytes / 1073741824.0, dir, strerror(err));
        close(f->fd);
        f->fd = -1;
        return -1;
    }
    f->hash = calloc(f->nrec, sizeof(uint64_t));
    mem_track(&f->keys[0], MEM_MASTER, 4 * n, "master (offload file)", LOC_DISK);
    mem_track(&f->keys[1], MEM_ADAM_M, moment_bytes(n, bits), "adam_m (offload file)", LOC_DISK);
    mem_track(&f->keys[2], MEM_ADAM_V, moment_bytes(n, bits), "adam_v (offload file)", LOC_DISK);
    return 0;
}

void offload_file_close(OffloadFile *f) {
    if (f->fd < 0) return;
    for (int i = 0; i < 3; i++) mem_untrack(&f->keys[i]);
    close(f->fd);
    free(f->hash);
    f->fd = -1;
}

// Where record k's bytes come from or go to: up to five segments, in file
// order (the master weights; m's values, or its codes then its scales; the
// same for v). record_parts makes them for a chunk of len elements.
typedef struct {
    void *seg[5];
    size_t bytes[5];
    int n;
} RecordParts;

RecordParts record_parts(size_t len, int bits, float *w, void *m, float *m_scale, void *v, float *v_scale) {
    RecordParts r = {{w}, {4 * len}, 1};
    size_t scales = 4 * ((len + ADAM_BLOCK - 1) / ADAM_BLOCK);
    void *moment[2] = {m, v};
    float *scale[2] = {m_scale, v_scale};
    for (int i = 0; i < 2; i++) {
        r.seg[r.n] = moment[i], r.bytes[r.n++] = bits == 8 ? len : 4 * len;
        if (bits == 8) r.seg[r.n] = scale[i], r.bytes[r.n++] = scales;
    }
    return r;
}

static int record_io(int write, const OffloadFile *f, size_t k, RecordParts *r) {
    off_t at = (off_t)(k * record_bytes(f, f->chunk));
    for (int i = 0; i < r->n; i++) {
        char *b = r->seg[i];
        size_t n = r->bytes[i];
        while (n) {
            ssize_t got = write ? pwrite(f->fd, b, n, at) : pread(f->fd, b, n, at);
            if (got <= 0) return -1;
            b += got, n -= (size_t)got, at += got;
        }
    }
    return 0;
}

uint64_t record_hash(const RecordParts *r) {
    uint64_t h = REPLICA_HASH_START;
    for (int i = 0; i < r->n; i++) h = replica_hash(h, r->seg[i], r->bytes[i]);
    return h;
}

// Read record k into r, checking its hash; a record never written reads as zeros.
void offload_file_read(OffloadFile *f, size_t k, RecordParts r) {
    size_t len = record_len(f, k);
    double t0 = now_seconds();
    int bad = record_io(0, f, k, &r);
    traffic_add(TR_DISK_READ, (long long)record_bytes(f, len), now_seconds() - t0);
    if (bad) {
        fprintf(stderr, "error: --offload-to disk: cannot read the optimizer's states back (record %zu): %s; the run "
                "stops here (a state saved before is intact)\n", k, strerror(errno));
        exit(1);
    }
    if (f->hash[k] && record_hash(&r) != f->hash[k]) {
        fprintf(stderr, "error: --offload-to disk: the offload file was changed under the run (record %zu of %zu, "
                "parameters %zu..%zu, does not hash as it was written); the run stops before training on it (a state "
                "saved before is intact)\n", k, f->nrec, k * f->chunk, k * f->chunk + len);
        exit(1);
    }
}

// Write record k from r, and keep its hash.
void offload_file_write(OffloadFile *f, size_t k, RecordParts r) {
    size_t len = record_len(f, k);
    double t0 = now_seconds();
    int bad = record_io(1, f, k, &r);
    traffic_add(TR_DISK_WRITE, (long long)record_bytes(f, len), now_seconds() - t0);
    if (bad) {
        fprintf(stderr, "error: --offload-to disk: cannot write the optimizer's states (record %zu): %s; the run stops "
                "here (a state saved before is intact)\n", k, strerror(errno));
        exit(1);
    }
    f->hash[k] = record_hash(&r);
    if (!f->hash[k]) f->hash[k] = 1;  // 0 means "never written"
}

#endif
