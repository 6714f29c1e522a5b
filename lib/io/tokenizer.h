// io/tokenizer.h — llm.c's tokenizer file, for printing samples of tokens as
// text (scripts/tokenize.py writes one beside the shards it makes).
//
// Layout (little-endian): 256 int32 header — [0] magic 20240328, [1] version
// (1, or 2 which adds [3] the end-of-text token), [2] the number of tokens —
// then each token as one length byte and that many bytes.
// The whole body is held (ledger: data, "tokenizer"), with an offset a token.
#ifndef GPTMEM_TOKENIZER_H
#define GPTMEM_TOKENIZER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "io/files.h"
#include "io/tokens.h"  // LLMC_HEADER_BYTES
#include "memory/ledger.h"

#define LLMC_TOKENIZER_MAGIC 20240328

typedef struct {
    int n;              // tokens
    int eot;            // the end-of-text token (version 1: n - 1, GPT-2's place for it)
    unsigned char *body;  // the file after its header: length byte, bytes, for each token (ledger: data)
    uint32_t *at;         // where token k's length byte is in body (ledger: data)
} Tokenizer;

// The bytes a tokenizer file's table holds in memory (the predictor's number):
// its body and an offset a token. Its token count and end-of-text token in
// *n_tokens and *eot, each checked against the file (a count the file cannot
// hold, an end-of-text token outside the table). -1 with the problem in err.
long long tokenizer_bytes(const char *path, int *n_tokens, int *eot, char *err, size_t errlen) {
    int32_t h[256];
    const char *why = unreadable_why(path);
    if (why) return snprintf(err, errlen, "cannot read llm.c's tokenizer file '%s': %s", path, why), -1;
    long long size = file_size(path);
    FILE *f = fopen(path, "rb");
    int got = f && fread(h, sizeof h, 1, f) == 1;
    if (f) fclose(f);
    if (!got) return snprintf(err, errlen, "'%s' is shorter than llm.c's 1024-byte tokenizer header", path), -1;
    if (h[0] != LLMC_TOKENIZER_MAGIC || (h[1] != 1 && h[1] != 2))
        return snprintf(err, errlen, "'%s' is not llm.c's tokenizer file (magic %d version %d; want %d, version 1 or 2)",
                        path, h[0], h[1], LLMC_TOKENIZER_MAGIC), -1;
    if (h[2] < 1 || h[2] > size - LLMC_HEADER_BYTES)  // each token takes at least its length byte
        return snprintf(err, errlen, "'%s' says it holds %d tokens, and its %lld bytes after the header hold at most "
                        "%lld", path, h[2], size - LLMC_HEADER_BYTES, size - LLMC_HEADER_BYTES), -1;
    *n_tokens = h[2];
    *eot = h[1] == 2 ? h[3] : h[2] - 1;
    if (*eot < 0 || *eot >= h[2])
        return snprintf(err, errlen, "'%s' says its end-of-text token is %d, but it has %d tokens (0 to %d)", path,
                        *eot, h[2], h[2] - 1), -1;
    return size - LLMC_HEADER_BYTES + 4LL * h[2];
}

// Load it; 0, or -1 after a message (a table that runs past the file's end).
int tokenizer_load(Tokenizer *t, const char *path) {
    memset(t, 0, sizeof *t);
    char err[1400];
    int32_t h[256];
    if (tokenizer_bytes(path, &t->n, &t->eot, err, sizeof err) < 0) { fprintf(stderr, "error: %s\n", err); return -1; }
    size_t body = (size_t)(file_size(path) - LLMC_HEADER_BYTES);
    FILE *f = fopen(path, "rb");
    t->body = mem_alloc(MEM_DATA, body, "tokenizer");
    t->at = mem_alloc(MEM_DATA, sizeof(uint32_t) * (size_t)t->n, "tokenizer offsets");
    int ok = f && fread(h, sizeof h, 1, f) == 1 && fread(t->body, 1, body, f) == body;
    if (f) fclose(f);
    size_t p = 0;
    for (int k = 0; k < t->n && ok; k++) {
        t->at[k] = (uint32_t)p;
        ok = p < body && p + 1 + t->body[p] <= body;
        if (ok) p += 1 + (size_t)t->body[p];
    }
    if (!ok) fprintf(stderr, "error: llm.c's tokenizer file '%s' ends inside its table\n", path);
    return ok ? 0 : -1;
}

void tokenizer_free(Tokenizer *t) {
    mem_free(t->body);
    mem_free(t->at);
    memset(t, 0, sizeof *t);
}

// Token k's bytes (*len of them), or NULL if the table has no token k.
const unsigned char *tokenizer_decode(const Tokenizer *t, int k, int *len) {
    if (!t->body || k < 0 || k >= t->n) return NULL;
    *len = t->body[t->at[k]];
    return t->body + t->at[k] + 1;
}

#endif
