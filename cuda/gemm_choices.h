// cuda/gemm_choices.h — #95's item 8: a GEMM's algorithm timed on this GPU rather than cuBLASLt's
// heuristic's first choice. `tests/test_cuda --gemm-shapes FILE` times each GEMM of a GPT-2 step with
// every algorithm cuBLASLt offers and writes the fastest of each into FILE; GPTMEM_GEMM_CHOICES=FILE
// ./train makes cuda/matmul.cu's plans of those shapes take them. An algorithm is cuBLASLt's
// cublasLtMatmulAlgo_t, 64 bytes that its header says can be saved and restored for the same cuBLAS
// version: the file names the GPU and the cuBLASLt version it was timed with, and a run on another refuses
// it. The same file, the same algorithms: the same bits run after run; other bits than cuBLASLt's first
// choices wherever an algorithm differs. Plain C: tests/test_cuda's host checks read and write it too.
//   gptmem gemm choices 1
//   gpu <the GPU's name>
//   cublaslt <version>
//   <dtype> <m> <n> <k> <transa> <transb> <lda> <ldb> <ldd> <epilogue> <the algorithm: 128 hex digits>
#ifndef GPTMEM_GEMM_CHOICES_H
#define GPTMEM_GEMM_CHOICES_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { GEMM_CHOICES_MAX = 64 };
typedef struct {
    int dt, m, n, k, transa, transb, lda, ldb, ldd, epi;  // the shape, as cuda/matmul.cu's plan key has it
    uint64_t algo[8];                                     // cublasLtMatmulAlgo_t's bytes
} GemmChoice;

// One line's choice: 0, or -1 when the line is not one.
static inline int gemm_choice_parse(const char *line, GemmChoice *c) {
    char hex[129] = "";
    int used = 0;
    if (sscanf(line, "%d %d %d %d %d %d %d %d %d %d %128s%n", &c->dt, &c->m, &c->n, &c->k, &c->transa, &c->transb,
               &c->lda, &c->ldb, &c->ldd, &c->epi, hex, &used) != 11 || line[used] != 0 || strlen(hex) != 128 ||
        strspn(hex, "0123456789abcdef") != 128)
        return -1;
    for (int w = 0; w < 8; w++) {
        char word[17];
        memcpy(word, hex + 16 * w, 16);
        word[16] = 0;
        c->algo[w] = (uint64_t)strtoull(word, NULL, 16);
    }
    return 0;
}

// Read the choices, timed on GPU `gpu` with cuBLASLt `version`, from f (`name` for messages) into
// out[0 .. *n): 0, or -1 with the reason in why (not this format, a line that is not a choice, more than
// GEMM_CHOICES_MAX, another GPU or cuBLASLt).
static inline int gemm_choices_read(FILE *f, const char *name, const char *gpu, unsigned long version, GemmChoice *out,
                             int *n, char *why, size_t why_len) {
    char line[512], timed_on[256] = "";
    unsigned long timed_with = 0;
    int format = 0, lineno = 0, bad = 0, many = 0;
    *n = 0;
    while (!bad && fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        if (len && line[len - 1] == '\n') line[--len] = 0;
        if (lineno == 1) bad = sscanf(line, "gptmem gemm choices %d", &format) != 1 || format != 1;
        else if (lineno == 2) bad = strncmp(line, "gpu ", 4) != 0 || len - 4 >= sizeof timed_on;
        else if (lineno == 3) bad = sscanf(line, "cublaslt %lu", &timed_with) != 1;
        else bad = (many = *n == GEMM_CHOICES_MAX) || gemm_choice_parse(line, &out[(*n)++]) != 0;
        if (lineno == 2 && !bad) memcpy(timed_on, line + 4, len - 3);
    }
    if (many) {
        *n = 0;
        snprintf(why, why_len, "%s, line %d: more than %d choices (a run has fewer GEMM shapes than that: a file "
                 "tests/test_cuda --gemm-shapes FILE wrote has one a shape)", name, lineno, GEMM_CHOICES_MAX);
        return -1;
    }
    if (bad || lineno < 3) {
        *n = 0;
        snprintf(why, why_len, "%s, line %d: not a GEMM choices file (tests/test_cuda --gemm-shapes FILE writes one)",
                 name, bad ? lineno : lineno + 1);
        return -1;
    }
    if (strcmp(timed_on, gpu) != 0 || timed_with != version) {
        *n = 0;
        snprintf(why, why_len, "%s was timed on %s with cuBLASLt %lu, and this is %s with cuBLASLt %lu: time this "
                 "GPU's (tests/test_cuda --gemm-shapes FILE) or unset GPTMEM_GEMM_CHOICES", name, timed_on, timed_with,
                 gpu, version);
        return -1;
    }
    return 0;
}

// The same from the file at path: a regular file only (a fifo would be waited on for ever, a device read
// without end), then gemm_choices_read.
static inline int gemm_choices_load_file(const char *path, const char *gpu, unsigned long version, GemmChoice *out,
                                         int *n, char *why, size_t why_len) {
    struct stat st;
    int missing = stat(path, &st) != 0;
    FILE *f = missing || !S_ISREG(st.st_mode) ? NULL : fopen(path, "r");
    *n = 0;
    if (!f) {
        snprintf(why, why_len, "cannot read %s: %s", path, missing || S_ISREG(st.st_mode) ? strerror(errno)
                                                                                     : "not a regular file");
        return -1;
    }
    int rc = gemm_choices_read(f, path, gpu, version, out, n, why, why_len);
    fclose(f);
    return rc;
}

// The file's text for n choices timed on `gpu` with cuBLASLt `version`.
static inline void gemm_choices_print(FILE *f, const char *gpu, unsigned long version, const GemmChoice *c, int n) {
    fprintf(f, "gptmem gemm choices 1\ngpu %s\ncublaslt %lu\n", gpu, version);
    for (int i = 0; i < n; i++) {
        fprintf(f, "%d %d %d %d %d %d %d %d %d %d ", c[i].dt, c[i].m, c[i].n, c[i].k, c[i].transa, c[i].transb,
                c[i].lda, c[i].ldb, c[i].ldd, c[i].epi);
        for (int w = 0; w < 8; w++) fprintf(f, "%016llx", (unsigned long long)c[i].algo[w]);
        fputc('\n', f);
    }
}

#endif
