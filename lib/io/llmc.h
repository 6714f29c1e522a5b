// io/llmc.h — llm.c's GPT-2 model file: read by --init (a tensor at a time,
// into whatever part of the weights a rank keeps), written by --export.
//
// Layout (little-endian): 256 int32 header — [0] magic 20240326, [1] version
// (3: fp32 weights, 5: bf16), [2] maxT, [3] V, [4] L, [5] H, [6] C, [7] Vp —
// then the 16 tensors, each whole, in this order: wte (Vp, C), wpe (maxT, C),
// ln1w (L, C), ln1b (L, C), qkvw (L, 3C, C), qkvb (L, 3C), attprojw (L, C, C),
// attprojb (L, C), ln2w (L, C), ln2b (L, C), fcw (L, 4C, C), fcb (L, 4C),
// fcprojw (L, C, 4C), fcprojb (L, C), lnfw (C), lnfb (C).
// The tensors are gptmem's (core/config.h), with the same (out, in) layout;
// only the order differs: gptmem keeps each layer's twelve together, llm.c
// each kind's L layers together. So gptmem's tensor (layer l, kind j) is one
// contiguous run of the file, and a range of gptmem's flat array is a few
// such runs.
#ifndef GPTMEM_LLMC_H
#define GPTMEM_LLMC_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/config.h"
#include "core/dtype.h"
#include "io/tokens.h"  // file_size, LLMC_HEADER_BYTES

#define LLMC_MODEL_MAGIC 20240326

typedef struct {
    char path[1024];
    int version;  // 3 fp32, 5 bf16
    int width;    // bytes a weight: 4 or 2
    GPTConfig cfg;
} LlmcModel;

// Where gptmem's tensor i (core/config.h param_tensors' order) starts in the
// file, in weights after the header. Tensor i > 1 below the final layernorm
// is layer (i - 2) / 12's kind (i - 2) % 12.
size_t llmc_tensor_at(const GPTConfig *c, int i) {
    size_t C = c->channels, L = c->layers, at = 0;
    size_t kind[12] = {C, C, 3 * C * C, 3 * C, C * C, C, C, C, 4 * C * C, 4 * C, 4 * C * C, C};
    if (i == 0) return 0;
    at = (size_t)padded_vocab(c) * C;
    if (i == 1) return at;
    at += (size_t)c->max_seq * C;
    int n = param_tensor_count(c);
    if (i >= n - 2) return at + L * layer_param_count(c) + (size_t)(i - (n - 2)) * C;
    int l = (i - 2) / 12, j = (i - 2) % 12;
    for (int k = 0; k < j; k++) at += L * kind[k];
    return at + (size_t)l * kind[j];
}

// Read and check the header of `path`: 0, or -1 with the problem in err.
int llmc_model_open(LlmcModel *m, const char *path, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    snprintf(m->path, sizeof m->path, "%s", path);
    int32_t h[256];
    FILE *f = fopen(path, "rb");
    int got = f && fread(h, sizeof h, 1, f) == 1;
    if (f) fclose(f);
    if (!f) return snprintf(err, errlen, "cannot read the model file '%s'", path), -1;
    if (!got) return snprintf(err, errlen, "'%s' is shorter than llm.c's 1024-byte model header", path), -1;
    if (h[0] != LLMC_MODEL_MAGIC)
        return snprintf(err, errlen, "'%s' has magic %d, not llm.c's GPT-2 model file's (%d)", path, h[0],
                        LLMC_MODEL_MAGIC), -1;
    if (h[1] != 3 && h[1] != 5)
        return snprintf(err, errlen, "'%s' is version %d; llm.c's GPT-2 model files are version 3 (fp32) or 5 (bf16)",
                        path, h[1]), -1;
    m->version = h[1], m->width = h[1] == 3 ? 4 : 2;
    m->cfg = (GPTConfig){.layers = h[4], .channels = h[6], .heads = h[5], .vocab = h[3], .max_seq = h[2]};
    const GPTConfig *c = &m->cfg;
    if (c->layers < 1 || c->channels < 1 || c->heads < 1 || c->vocab < 1 || c->max_seq < 1 || c->channels % c->heads)
        return snprintf(err, errlen, "'%s' has a shape no model has: L %d C %d H %d V %d maxT %d", path, c->layers,
                        c->channels, c->heads, c->vocab, c->max_seq), -1;
    if (h[7] != padded_vocab(c))
        return snprintf(err, errlen, "'%s' pads its vocabulary %d to %d rows; gptmem pads to a multiple of 64: %d",
                        path, c->vocab, h[7], padded_vocab(c)), -1;
    long long want = LLMC_HEADER_BYTES + (long long)param_count(c) * m->width, size = file_size(path);
    if (size != want)
        return snprintf(err, errlen, "'%s' has %lld bytes; its header (L %d C %d V %d maxT %d, %s) says %lld%s", path,
                        size, c->layers, c->channels, c->vocab, c->max_seq, m->width == 4 ? "fp32" : "bf16", want,
                        size < want ? ": it is truncated" : ""), -1;
    return 0;
}

// The weights [lo, hi) of gptmem's flat array (core/config.h) into dst[0 .. hi-lo)
// as fp32, read from the file a tensor's overlap at a time. A bf16 file's
// overlap is read into the upper half of its fp32 destination and widened in
// place from the front (element i is read before anything is written over
// it), so no buffer besides dst is needed. 0, or -1 if a read failed.
int llmc_read_range(const void *file, float *dst, size_t lo, size_t hi) {
    const LlmcModel *m = file;
    int n = param_tensor_count(&m->cfg), bad = 0;
    ParamTensor *t = malloc(sizeof(ParamTensor) * n);
    param_tensors(&m->cfg, t);
    FILE *f = fopen(m->path, "rb");
    bad = !f;
    for (int i = 0; i < n && !bad; i++) {
        size_t a = t[i].offset > lo ? t[i].offset : lo, b = t[i].offset + t[i].count < hi ? t[i].offset + t[i].count : hi;
        if (b <= a) continue;
        size_t len = b - a;
        float *out = dst + (a - lo);
        long long at = LLMC_HEADER_BYTES + (long long)(llmc_tensor_at(&m->cfg, i) + (a - t[i].offset)) * m->width;
        uint16_t *half = (uint16_t *)out + len;  // bf16: the upper half of out's bytes
        bad = fseek(f, at, SEEK_SET) != 0 || fread(m->width == 4 ? (void *)out : (void *)half, (size_t)m->width, len, f) != len;
        if (m->width == 2)
            for (size_t k = 0; k < len && !bad; k++) out[k] = bf16_to_float(half[k]);
    }
    if (f) fclose(f);
    free(t);
    return bad ? -1 : 0;
}

// --export's file: the header (version 3, fp32) written and the file sized,
// so that each rank can write its part of the weights into it in any order.
int llmc_export_begin(const char *tmp, const GPTConfig *c) {
    int32_t h[256] = {0};
    h[0] = LLMC_MODEL_MAGIC, h[1] = 3, h[2] = c->max_seq, h[3] = c->vocab, h[4] = c->layers, h[5] = c->heads;
    h[6] = c->channels, h[7] = padded_vocab(c);
    FILE *f = fopen(tmp, "wb");
    if (!f) return -1;
    int bad = fwrite(h, sizeof h, 1, f) != 1;
    long long end = LLMC_HEADER_BYTES + (long long)param_count(c) * 4;
    bad = bad || fseek(f, end - 1, SEEK_SET) != 0 || fputc(0, f) == EOF;  // the file at its full size
    return fclose(f) != 0 || bad ? -1 : 0;
}

// The weights [lo, hi) of gptmem's flat array, got a chunk at a time through
// get(ctx, at, dst, n) (at counted from lo), written where llm.c keeps them.
int llmc_export_range(const char *tmp, const GPTConfig *c, size_t lo, size_t hi,
                      void (*get)(const void *ctx, size_t at, float *dst, size_t n), const void *ctx) {
    enum { CHUNK = 1 << 18 };
    int n = param_tensor_count(c), bad = 0;
    ParamTensor *t = malloc(sizeof(ParamTensor) * n);
    float *chunk = malloc(sizeof(float) * CHUNK);  // 1 MiB of host staging, as the state files use
    param_tensors(c, t);
    FILE *f = fopen(tmp, "r+b");
    bad = !f;
    for (int i = 0; i < n && !bad; i++) {
        size_t a = t[i].offset > lo ? t[i].offset : lo, b = t[i].offset + t[i].count < hi ? t[i].offset + t[i].count : hi;
        long long at = LLMC_HEADER_BYTES + (long long)(llmc_tensor_at(c, i) + (a - t[i].offset)) * 4;
        if (b > a) bad = fseek(f, at, SEEK_SET) != 0;
        for (size_t k = a; k < b && !bad; k += CHUNK) {
            size_t len = b - k < CHUNK ? b - k : CHUNK;
            get(ctx, k - lo, chunk, len);
            bad = fwrite(chunk, sizeof(float), len, f) != len;
        }
    }
    if (f && fclose(f) != 0) bad = 1;
    free(chunk);
    free(t);
    return bad ? -1 : 0;
}

#endif
