// io/tokens.h — token files: what --data and --val-data name when the corpus
// is tokens, not text. Opening a set of them reads only their headers; the
// tokens stay on disk and are read a window at a time (io/data.h).
//
// Formats (all little-endian):
//   llm.c's token shard: 256 int32 header — [0] magic 20240520 with [1]
//     version 1 (uint16 tokens: GPT-2) or magic 20240801 with version 7
//     (uint32 tokens: Llama 3), [2] the token count — then the tokens. The
//     count must fill the file exactly.
//   nanoGPT's train.bin / val.bin: no header, uint16 tokens (--data-format nanogpt).
// A name with * ? or [ is a pattern (llm.c's "fineweb_train_*.bin"): the files
// it matches, in name order, read as one stream of tokens.
#ifndef GPTMEM_TOKENS_H
#define GPTMEM_TOKENS_H

#include <glob.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "io/files.h"

enum { DATA_AUTO, DATA_TEXT, DATA_LLMC, DATA_NANOGPT };  // --data-format
const char *const data_format_name[] = {"auto", "text", "llmc", "nanogpt"};

#define LLMC_TOKENS_MAGIC 20240520  // version 1: uint16 tokens
#define LLMC_TOKENS32_MAGIC 20240801  // version 7: uint32 tokens
#define LLMC_HEADER_BYTES 1024      // 256 int32
#define LLMC_MODEL_MAGIC 20240326   // llm.c's model files (io/llmc.h): GPT-2's
#define LLMC_LLAMA_MAGIC 20240803   // ... and Llama 3's

// GPT-2's vocabulary (uint16 token files) and Llama 3's (uint32).
#define GPT2_VOCAB 50257
#define LLAMA3_VOCAB 128256

typedef struct {
    char path[1024];
    long long at;      // the byte where its first token is
    long long tokens;  // how many it holds
} TokenFile;

typedef struct {
    int format;          // DATA_LLMC or DATA_NANOGPT
    int version, width;  // llm.c's version (0: nanoGPT); bytes a token (2 or 4)
    int nfiles;
    TokenFile *files;
    long long tokens;    // in all files
} TokenSet;

int is_pattern(const char *name) { return strpbrk(name, "*?[") != NULL; }

// Does the file start with an llm.c token shard's magic? (The format auto finds.)
int has_llmc_magic(const char *path) {
    FILE *f = unreadable_why(path) ? NULL : fopen(path, "rb");  // (never open() a fifo: it waits for a writer)
    int32_t magic = 0;
    int got = f && fread(&magic, 4, 1, f) == 1;
    if (f) fclose(f);
    return got && (magic == LLMC_TOKENS_MAGIC || magic == LLMC_TOKENS32_MAGIC);
}

// One file's header (llm.c) or size (nanoGPT), checked: 0, or -1 with the
// problem in err.
int token_file_open(TokenFile *tf, int *version, int format, const char *path, char *err, size_t errlen) {
    if (strlen(path) >= sizeof tf->path)
        return snprintf(err, errlen, "the path '%.60s...' is %zu bytes long; gptmem takes paths up to %zu", path,
                        strlen(path), sizeof tf->path - 1), -1;
    snprintf(tf->path, sizeof tf->path, "%s", path);
    const char *why = unreadable_why(path);
    if (why) return snprintf(err, errlen, "cannot read the token file '%s': %s", path, why), -1;
    long long size = file_size(path);
    if (format == DATA_NANOGPT) {
        if (size % 2) return snprintf(err, errlen, "'%s' has %lld bytes, an odd number: nanoGPT's token files hold "
                                      "uint16 tokens", path, size), -1;
        *version = 0, tf->at = 0, tf->tokens = size / 2;
        return 0;
    }
    int32_t h[256];
    FILE *f = fopen(path, "rb");
    int got = f && fread(h, sizeof h, 1, f) == 1;
    if (f) fclose(f);
    if (!got) return snprintf(err, errlen, "'%s' is shorter than llm.c's 1024-byte token header", path), -1;
    if (h[0] != LLMC_TOKENS_MAGIC && h[0] != LLMC_TOKENS32_MAGIC)
        return snprintf(err, errlen, "'%s' has magic %d, not llm.c's token shard's (%d or %d)", path, h[0],
                        LLMC_TOKENS_MAGIC, LLMC_TOKENS32_MAGIC), -1;
    int want = h[0] == LLMC_TOKENS_MAGIC ? 1 : 7;
    if (h[1] != want)
        return snprintf(err, errlen, "'%s' has magic %d and version %d; llm.c's shards with that magic are version %d",
                        path, h[0], h[1], want), -1;
    long long width = want == 1 ? 2 : 4, body = size - LLMC_HEADER_BYTES;
    if (h[2] < 0 || body != h[2] * width)
        return snprintf(err, errlen, "'%s' says it holds %d tokens (%lld bytes) but has %lld bytes after its header%s",
                        path, h[2], h[2] * width, body, body < h[2] * width ? ": it is truncated" : ""), -1;
    *version = want, tf->at = LLMC_HEADER_BYTES, tf->tokens = h[2];
    return 0;
}

void token_set_free(TokenSet *ts) {
    free(ts->files);
    ts->files = NULL;
}

// Open every file `name` names (one, or a pattern's matches), all of one
// format and version: 0, or -1 with the problem in err.
int token_set_open(TokenSet *ts, const char *name, int format, char *err, size_t errlen) {
    memset(ts, 0, sizeof *ts);
    glob_t g = {0};
    if (is_pattern(name)) {
        if (glob(name, 0, NULL, &g) != 0 || g.gl_pathc == 0) {
            globfree(&g);
            return snprintf(err, errlen, "the pattern '%s' matches no file", name), -1;
        }
    }
    int n = is_pattern(name) ? (int)g.gl_pathc : 1;
    ts->format = format, ts->nfiles = n;
    ts->files = calloc((size_t)n, sizeof(TokenFile));
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        int version = 0;
        rc = token_file_open(&ts->files[i], &version, format, n > 1 || is_pattern(name) ? g.gl_pathv[i] : name, err, errlen);
        if (rc == 0 && i > 0 && version != ts->version)
            rc = -1, snprintf(err, errlen, "'%s' is version %d but '%s' is version %d: one set of shards has one "
                              "token width", ts->files[i].path, version, ts->files[0].path, ts->version);
        ts->version = version;
        ts->tokens += ts->files[i].tokens;
    }
    globfree(&g);
    ts->width = ts->version == 7 ? 4 : 2;
    if (rc) token_set_free(ts);
    return rc;
}

// The format of --data NAME under --data-format f: f itself, or for auto an
// llm.c shard when the (first) file has its magic, else text. A pattern is
// always token files.
int data_format_of(const char *name, int f) {
    if (f != DATA_AUTO) return f;
    if (!is_pattern(name)) return has_llmc_magic(name) ? DATA_LLMC : DATA_TEXT;
    glob_t g = {0};
    int fmt = glob(name, 0, NULL, &g) == 0 && g.gl_pathc && !has_llmc_magic(g.gl_pathv[0]) ? DATA_TEXT : DATA_LLMC;
    globfree(&g);
    return fmt;
}

// Read n raw tokens (n * width bytes) from token `at` on, counting through
// the set's files as one stream, into raw; 0, or -1 if a read failed.
int token_set_read(const TokenSet *ts, long long at, void *raw, long long n) {
    long long done = 0;
    for (int i = 0; i < ts->nfiles && done < n; i++) {
        const TokenFile *tf = &ts->files[i];
        if (at >= tf->tokens) { at -= tf->tokens; continue; }
        long long take = tf->tokens - at < n - done ? tf->tokens - at : n - done;
        FILE *f = fopen(tf->path, "rb");
        int ok = f && fseek(f, tf->at + at * ts->width, SEEK_SET) == 0 &&
                 fread((char *)raw + done * ts->width, (size_t)ts->width, (size_t)take, f) == (size_t)take;
        if (f) fclose(f);
        if (!ok) return -1;
        done += take, at = 0;
    }
    return done == n ? 0 : -1;
}

// Token k of raw tokens of `width` bytes.
int token_at(const void *raw, int width, long long k) {
    return width == 2 ? ((const uint16_t *)raw)[k] : (int)((const uint32_t *)raw)[k];
}

// Every token below the vocabulary V? Reads each file from start to end
// through a 64 KiB buffer. 0, or -1 with the first bad token (file, position) in err.
int token_set_check(const TokenSet *ts, int V, char *err, size_t errlen) {
    static unsigned char buf[1 << 16];
    long long per = (long long)sizeof buf / ts->width;
    for (int i = 0; i < ts->nfiles; i++) {
        const TokenFile *tf = &ts->files[i];
        FILE *f = fopen(tf->path, "rb");
        if (!f || fseek(f, tf->at, SEEK_SET) != 0) {
            if (f) fclose(f);
            return snprintf(err, errlen, "cannot read the token file '%s'", tf->path), -1;
        }
        for (long long k = 0; k < tf->tokens; k += per) {
            long long n = tf->tokens - k < per ? tf->tokens - k : per;
            if (fread(buf, (size_t)ts->width, (size_t)n, f) != (size_t)n) {
                fclose(f);
                return snprintf(err, errlen, "reading '%s' failed part-way", tf->path), -1;
            }
            for (long long j = 0; j < n; j++) {
                uint32_t t = ts->width == 2 ? ((const uint16_t *)buf)[j] : ((const uint32_t *)buf)[j];
                if (t >= (uint32_t)V) {
                    fclose(f);
                    if (t >= (1u << 20))
                        return snprintf(err, errlen, "'%s': the token at position %lld is %u, past any vocabulary "
                                        "(at most %d): is it a token file of this format?", tf->path, k + j, t,
                                        1 << 20), -1;
                    return snprintf(err, errlen, "'%s': the token at position %lld is %u, not below the vocabulary %d "
                                    "(a --vocab of at least %u, or another --model, would hold it)", tf->path, k + j,
                                    t, V, t + 1), -1;
                }
            }
        }
        fclose(f);
    }
    return 0;
}

#endif
