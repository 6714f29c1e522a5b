// io/data.h — the corpus, the byte tokenizer and the batches.
//
// Tokenizer: every byte of the text file is one token (vocabulary 256).
// Split: the first 90% of the bytes train, the last 10% validate.
// Training batches: B windows of T+1 bytes at positions drawn from an RNG
// seeded by --seed; the RNG state is the "data position" a checkpoint saves.
// Validation batches: fixed, evenly spaced windows, the same every time.
#ifndef GPTMEM_DATA_H
#define GPTMEM_DATA_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "memory/ledger.h"
#include "core/rng.h"

typedef struct {
    unsigned char *bytes;  // the whole file (ledger: data)
    size_t n;              // its length
    size_t n_train;        // bytes [0, n_train) train, [n_train, n) validate
    int *inputs, *targets; // (B*T) each (ledger: data)
    uint64_t rng;          // position in the stream of training batches
} Dataset;

// Size of a file in bytes, or -1 if it cannot be read. Used by --dry-run too.
long long file_size(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return -1;
    return (long long)st.st_size;
}

void data_missing_help(const char *path) {
    fprintf(stderr, "error: cannot read the data file '%s'.\n"
            "  Get the default corpus with `make data` (runs data/get_data.sh, which copies\n"
            "  ../shared/data/tinyshakespeare.txt or downloads it), or pass --data FILE.\n", path);
}

// Load `path`; returns 0, or prints what is wrong and returns -1.
int data_load(Dataset *d, const char *path, int B, int T, uint64_t seed) {
    memset(d, 0, sizeof *d);
    long long size = file_size(path);
    FILE *f = size < 0 ? NULL : fopen(path, "rb");
    if (!f) { data_missing_help(path); return -1; }
    // both splits need at least one window of T+1 bytes
    long long need = 10LL * (T + 2);
    if (size < need) {
        fprintf(stderr, "error: the data file '%s' has %lld bytes; --seq-len %d needs at least %lld "
                "(10%% of it, the validation split, must hold %d bytes)\n", path, size, T, need, T + 2);
        fclose(f);
        return -1;
    }
    d->n = (size_t)size;
    d->bytes = mem_alloc(MEM_DATA, d->n, "corpus");
    if (fread(d->bytes, 1, d->n, f) != d->n) {
        fprintf(stderr, "error: reading '%s' failed part-way\n", path);
        fclose(f);
        return -1;
    }
    fclose(f);
    d->n_train = d->n / 10 * 9;
    d->inputs = mem_alloc(MEM_DATA, sizeof(int) * (size_t)B * T, "inputs");
    d->targets = mem_alloc(MEM_DATA, sizeof(int) * (size_t)B * T, "targets");
    d->rng = rng_seed(seed ^ 0xDA7A);
    return 0;
}

void data_free(Dataset *d) {
    mem_free(d->bytes); mem_free(d->inputs); mem_free(d->targets);
}

// Copy the window at `start` into row b of inputs/targets.
void data_window(Dataset *d, int b, int T, size_t start) {
    for (int t = 0; t < T; t++) {
        d->inputs[b * T + t] = d->bytes[start + t];
        d->targets[b * T + t] = d->bytes[start + t + 1];
    }
}

// The next training micro-batch of this rank: the global micro-batch is
// nranks * B random windows from the training split (every rank draws all of
// them, so all ranks stay in step); rank r keeps windows r*B .. r*B + B - 1.
// So N ranks of B see exactly the windows one process with N*B would.
void data_next_train(Dataset *d, int B, int T, int rank, int nranks) {
    size_t span = d->n_train - (size_t)T - 1;
    for (int k = 0; k < nranks * B; k++) {
        size_t start = (size_t)(rng_next(&d->rng) % span);
        if (k / B == rank) data_window(d, k % B, T, start);
    }
}

// Validation batch k of n_batches: B*n_batches windows spread evenly over the
// validation split.
void data_val_batch(Dataset *d, int B, int T, int k, int n_batches) {
    size_t span = d->n - d->n_train - (size_t)T - 1;
    size_t windows = (size_t)B * n_batches;
    for (int b = 0; b < B; b++) {
        size_t w = (size_t)k * B + b;
        data_window(d, b, T, d->n_train + span * w / windows);
    }
}

// The bytes of generated text as something safe to print: valid UTF-8 text
// (with newlines and tabs) as it is, every other byte (control bytes, stray
// continuation bytes, overlong or truncated sequences, surrogates, code points
// past U+10FFFF) as \xNN, so a sample never sends a terminal or a log parser
// escape codes or broken characters. out must hold 4n + 1 bytes; returns the
// length written (out is NUL-terminated).
size_t escape_text(const unsigned char *in, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        unsigned char b = in[i];
        size_t len = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
        uint32_t cp = len == 1 ? b : len == 2 ? b & 0x1F : len == 3 ? b & 0x0F : b & 0x07;
        int ok = len > 0 && i + len <= n;
        for (size_t k = 1; ok && k < len; k++) {
            ok = (in[i + k] & 0xC0) == 0x80;
            cp = cp << 6 | (in[i + k] & 0x3F);
        }
        uint32_t smallest[5] = {0, 0, 0x80, 0x800, 0x10000};  // below these, a sequence is overlong
        if (ok && len > 1) ok = cp >= smallest[len] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
        if (ok && len == 1) ok = (b >= 0x20 && b != 0x7F) || b == '\n' || b == '\t';
        if (!ok) {
            o += (size_t)sprintf(out + o, "\\x%02X", b);
            i++;
            continue;
        }
        memcpy(out + o, in + i, len);
        o += len;
        i += len;
    }
    out[o] = 0;
    return o;
}

#endif
