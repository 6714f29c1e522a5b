// io/data.h — the corpus and the batches.
//
// A text file: every byte is one token (vocabulary 256), the whole file held
// in memory. Token files (io/tokens.h: llm.c's shards, nanoGPT's .bin): the
// tokens stay on disk and each window of T+1 tokens is read when a batch
// needs it, so a corpus bigger than memory trains in (T+1) tokens of buffer.
// Split: --val-data's tokens validate; without it the first 90% train and
// the last 10% validate.
// Training batches: B windows of T+1 tokens at positions drawn from an RNG
// seeded by --seed, or with --in-order one after another from the start (as
// llm.c's loader without shuffling: batch k is tokens [k B T, k B T + B T]);
// the RNG state, or the next window's number, is the "data position" a
// checkpoint saves.
// Validation batches: evenly spaced windows, the same every time; with
// --in-order the first ones in file order.
#ifndef GPTMEM_DATA_H
#define GPTMEM_DATA_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "memory/ledger.h"
#include "core/rng.h"
#include "io/tokenizer.h"
#include "io/tokens.h"

// Where a split's tokens are: the tokens [from, from + len) of the text or of a token set.
typedef struct {
    const TokenSet *set;  // NULL: the text's bytes
    long long from, len;
} Split;

typedef struct {
    int format;            // DATA_TEXT, DATA_LLMC or DATA_NANOGPT (io/tokens.h)
    unsigned char *bytes;  // text: the whole file (ledger: data)
    size_t n;              // its length
    TokenSet tokens, val_tokens;  // token files: --data's and --val-data's (nfiles 0: none)
    void *window;          // token files: one window's raw tokens, T+1 of them (ledger: data)
    Split train, val;
    int *inputs, *targets; // (B*T) each (ledger: data)
    int in_order;          // --in-order: windows in file order
    Tokenizer tokenizer;   // token files: what prints a sample as text (n 0: none, numbers are printed)
    uint64_t rng;          // position in the stream of training batches (--in-order: the next window)
} Dataset;

// What --data and --val-data name, as the settings give them.
typedef struct {
    const char *path, *val_path;  // val_path NULL: the last 10% of path's tokens validate
    int format;                   // --data-format, resolved (never DATA_AUTO)
    int vocab;                    // every token must be below it
    int in_order;
    const char *tokenizer;        // llm.c's tokenizer file for samples of tokens (NULL: none)
} DataSpec;

void data_missing_help(const char *path) {
    fprintf(stderr, "error: cannot read the data file '%s'.\n"
            "  Get the default corpus with `make data` (runs data/get_data.sh, which copies\n"
            "  ../shared/data/tinyshakespeare.txt or downloads it), or pass --data FILE.\n", path);
}

// The bytes --data's reading holds besides the batches: a text file whole,
// token files one window of T+1 tokens. The predictor's number (flags.h works
// it out once); data_load allocates exactly this.
size_t data_held_bytes(int format, int width, long long text_bytes, int T) {
    return format == DATA_TEXT ? (size_t)text_bytes : (size_t)(T + 1) * width;
}

// Each split must hold one window of T+1 tokens and one more.
int split_too_short(const Split *sp, const char *name, int T) {
    if (sp->len >= T + 2) return 0;
    fprintf(stderr, "error: the %s split of '%s' has %lld tokens; --seq-len %d needs at least %d (a longer file, "
            "or a smaller --seq-len)\n", sp->set ? "token" : "text", name, sp->len, T, T + 2);
    return 1;
}

// A text corpus whose first MiB is more than 5% control bytes (NUL among
// them) is likely tokens read as text (nanoGPT's uint16 files carry no
// header to find them by): a warning, since it trains all the same.
void text_looks_binary(const unsigned char *b, size_t n, const char *path) {
    size_t look = n < (1 << 20) ? n : (1 << 20), control = 0;
    for (size_t i = 0; i < look; i++) control += b[i] < 0x20 && b[i] != '\n' && b[i] != '\r' && b[i] != '\t';
    if (look && control * 20 > look)
        fprintf(stderr, "warning: --data '%s' is read as text, and %.0f%% of its first %zu bytes are control bytes: if "
                "it holds tokens, pass --data-format nanogpt (headerless uint16) or llmc\n", path,
                100.0 * control / look, look);
}

// The text file, whole (ledger: data): its first 90% train, the rest validates.
int load_text(Dataset *d, const char *path, int T) {
    long long size = file_size(path);
    FILE *f = size < 0 ? NULL : fopen(path, "rb");
    if (!f) { data_missing_help(path); return -1; }
    long long need = 10LL * (T + 2);  // both splits need at least one window of T+1 bytes
    if (size < need) {
        fprintf(stderr, "error: the data file '%s' has %lld bytes; --seq-len %d needs at least %lld "
                "(10%% of it, the validation split, must hold %d bytes)\n", path, size, T, need, T + 2);
        fclose(f);
        return -1;
    }
    d->n = (size_t)size;
    d->bytes = mem_alloc(MEM_DATA, d->n, "corpus");
    size_t got = fread(d->bytes, 1, d->n, f);
    fclose(f);
    if (got != d->n) { fprintf(stderr, "error: reading '%s' failed part-way\n", path); return -1; }
    text_looks_binary(d->bytes, d->n, path);
    long long n_train = (long long)(d->n / 10 * 9);
    d->train = (Split){NULL, 0, n_train};
    d->val = (Split){NULL, n_train, (long long)d->n - n_train};
    return 0;
}

// Token files: their headers read and every token checked against the
// vocabulary; the tokens themselves stay on disk.
int open_tokens(TokenSet *ts, const char *name, int format, int vocab) {
    char err[1400];
    if (token_set_open(ts, name, format, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        return -1;
    }
    if (token_set_check(ts, vocab, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        token_set_free(ts);
        return -1;
    }
    return 0;
}

int load_tokens(Dataset *d, const DataSpec *spec, int T) {
    if (open_tokens(&d->tokens, spec->path, spec->format, spec->vocab)) return -1;
    if (spec->val_path && open_tokens(&d->val_tokens, spec->val_path, spec->format, spec->vocab)) return -1;
    if (spec->val_path && d->val_tokens.width != d->tokens.width) {
        fprintf(stderr, "error: --data '%s' has %d-byte tokens and --val-data '%s' %d-byte ones: one tokenizer "
                "made both?\n", spec->path, d->tokens.width, spec->val_path, d->val_tokens.width);
        return -1;
    }
    long long n = d->tokens.tokens, n_train = spec->val_path ? n : n / 10 * 9;
    d->train = (Split){&d->tokens, 0, n_train};
    d->val = spec->val_path ? (Split){&d->val_tokens, 0, d->val_tokens.tokens} : (Split){&d->tokens, n_train, n - n_train};
    if (split_too_short(&d->train, spec->path, T) || split_too_short(&d->val, spec->val_path ? spec->val_path : spec->path, T))
        return -1;
    d->window = mem_alloc(MEM_DATA, data_held_bytes(d->format, d->tokens.width, 0, T), "token window");
    return 0;
}

// Load --data (and --val-data); returns 0, or prints what is wrong and returns -1.
int data_load(Dataset *d, const DataSpec *spec, int B, int T, uint64_t seed) {
    memset(d, 0, sizeof *d);
    d->format = spec->format;
    d->in_order = spec->in_order;
    if (d->format == DATA_TEXT ? load_text(d, spec->path, T) : load_tokens(d, spec, T)) return -1;
    if (spec->tokenizer && tokenizer_load(&d->tokenizer, spec->tokenizer)) return -1;
    d->inputs = mem_alloc(MEM_DATA, sizeof(int) * (size_t)B * T, "inputs");
    d->targets = mem_alloc(MEM_DATA, sizeof(int) * (size_t)B * T, "targets");
    d->rng = d->in_order ? 0 : rng_seed(seed ^ 0xDA7A);
    return 0;
}

void data_free(Dataset *d) {
    mem_free(d->bytes); mem_free(d->window); mem_free(d->inputs); mem_free(d->targets);
    token_set_free(&d->tokens);
    token_set_free(&d->val_tokens);
    tokenizer_free(&d->tokenizer);
}

// Copy the T+1 tokens at `start` of a split into row b of inputs/targets:
// inputs are tokens 0..T-1, targets 1..T.
void data_window(Dataset *d, const Split *sp, int b, int T, long long start) {
    int *in = d->inputs + (size_t)b * T, *out = d->targets + (size_t)b * T;
    if (!sp->set) {
        const unsigned char *x = d->bytes + sp->from + start;
        for (int t = 0; t < T; t++) in[t] = x[t], out[t] = x[t + 1];
        return;
    }
    if (token_set_read(sp->set, sp->from + start, d->window, T + 1)) {  // (the files were read whole at load)
        fprintf(stderr, "error: reading the token file '%s' failed during training\n", sp->set->files[0].path);
        exit(1);
    }
    int w = sp->set->width;
    for (int t = 0; t < T; t++) in[t] = token_at(d->window, w, t), out[t] = token_at(d->window, w, t + 1);
}

// The next training micro-batch of this rank: the global micro-batch is
// nranks * B windows (every rank draws all of them, so all ranks stay in
// step); rank r keeps windows r*B .. r*B + B - 1. So N ranks of B see exactly
// the windows one process with N*B would. Random: each window's start drawn
// from the RNG. --in-order: the windows one after another (the next is the
// first that follows), back to the start when the global batch does not fit.
void data_next_train(Dataset *d, int B, int T, int rank, int nranks) {
    long long span = d->train.len - T - 1, windows = (long long)nranks * B;
    if (d->in_order && ((long long)d->rng + windows) * T + 1 > d->train.len) d->rng = 0;
    for (long long k = 0; k < windows; k++) {
        long long start = d->in_order ? (long long)(d->rng + k) * T : (long long)(rng_next(&d->rng) % (uint64_t)span);
        if (k / B == rank) data_window(d, &d->train, (int)(k % B), T, start);
    }
    if (d->in_order) d->rng += (uint64_t)windows;
}

// Validation batch k of n_batches: B*n_batches windows spread evenly over the
// validation split, or with --in-order the split's first windows one after
// another (round again from the start if they do not fit).
void data_val_batch(Dataset *d, int B, int T, int k, int n_batches) {
    long long span = d->val.len - T - 1, windows = (long long)B * n_batches, fit = (d->val.len - 1) / T;
    for (int b = 0; b < B; b++) {
        long long w = (long long)k * B + b;
        data_window(d, &d->val, b, T, d->in_order ? (w % fit) * T : span * w / windows);
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
