// io/llmc.h — llm.c's model files, GPT-2's and Llama 3's: read by --init (a tensor at a time,
// into whatever part of the weights a rank keeps), written by --export.
//
// GPT-2 (train_gpt2.py's write_model; little-endian): 256 int32 header — [0] magic 20240326,
// [1] version (3: fp32 weights, 5: bf16), [2] maxT, [3] V, [4] L, [5] H, [6] C, [7] Vp — then
// the 16 tensors, each whole, in this order: wte (Vp, C), wpe (maxT, C), ln1w (L, C), ln1b (L, C),
// qkvw (L, 3C, C), qkvb (L, 3C), attprojw (L, C, C), attprojb (L, C), ln2w (L, C), ln2b (L, C),
// fcw (L, 4C, C), fcb (L, 4C), fcprojw (L, C, 4C), fcprojb (L, C), lnfw (C), lnfb (C).
//
// Llama 3 (train_llama3.py's write_model): 256 int32 header — [0] magic 20240803, [1] version,
// [2] maxT, [3] V (not padded), [4] L, [5] H, [6] KVH, [7] C, [8] ffn_dim_multiplier, [9]
// multiple_of, [10] norm_eps, [11] rope_theta, [12] use_scaled_rope, [13] max_gen_batch_size,
// [14] [15] the Llama version (3, 1). Every field is an int32, so the writer truncates the floats
// (1.3 -> 1, 1e-5 -> 0): the SwiGLU width F comes from the file's size instead. Then, each whole:
// wte (V, C); ln_1 (L, C); c_attn (L, (H + 2 KVH) hs, C); c_proj (L, C, C); ln_2 (L, C); c_fc
// (L, F, C), the up projection; c_fc2 (L, F, C), the gate; the MLP's c_proj (L, C, F); ln_f (C);
// lm_head (V, C), always a matrix of its own (a tied model writes wte there again: a file whose
// lm_head is wte byte for byte is read as tied, its head counted once).
//
// The tensors are gptmem's (core/config.h), with the same (out, in) layout; the order differs:
// gptmem keeps each layer's tensors together, llm.c each kind's L layers together, and gptmem's
// Llama fcw (2F, C) is llm.c's c_fc then c_fc2. So the file is a list of runs: a run of gptmem's
// flat array that is one contiguous run of the file. A range of gptmem's array is a few of them;
// the rows a padded vocabulary adds (gptmem pads V to a multiple of 64) are in none for Llama.
#ifndef GPTMEM_LLMC_H
#define GPTMEM_LLMC_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/config.h"
#include "core/dtype.h"
#include "core/sizes.h"
#include "io/files.h"
#include "io/tokens.h"  // LLMC_HEADER_BYTES, LLMC_MODEL_MAGIC

typedef struct {
    char path[1024];
    int version;     // 3 fp32, 5 bf16
    int width;       // bytes a weight: 4 or 2
    GPTConfig cfg;
    char note[512];  // what the reader took from elsewhere than the header (empty: nothing)
} LlmcModel;

// gptmem's weights [at, at + count) are the file's [file, file + count) (counted in weights after the header).
typedef struct {
    size_t at, count, file;
} LlmcRun;

// At most how many runs a model's file has.
int llmc_max_runs(const GPTConfig *c) { return 4 + 12 * c->layers; }

// Where gptmem's GPT-2 tensor i (core/config.h param_tensors' order) starts in the
// file. Tensor i > 1 below the final layernorm is layer (i - 2) / 12's kind (i - 2) % 12.
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

// The weights of a Llama file: V C twice (wte, lm_head), L (2C + qkv C + C C + 3 F C), C.
size_t llmc_llama_count(const GPTConfig *c) {
    size_t C = c->channels, F = cfg_ffn(c);
    return 2 * (size_t)c->vocab * C + (size_t)c->layers * (2 * C + qkv_width(c) * C + C * C + 3 * F * C) + C;
}

// The runs of `c`'s file, in gptmem's order, into out[llmc_max_runs]; returns how many. With
// `tied_head`, a tied Llama's wte is also the file's lm_head (what --export writes for it).
int llmc_runs(const GPTConfig *c, LlmcRun *out, int tied_head) {
    int n = param_tensor_count(c), k = 0;
    ParamTensor *t = malloc(sizeof(ParamTensor) * n);
    param_tensors(c, t);
    if (!is_llama(c)) {
        for (int i = 0; i < n; i++) out[k++] = (LlmcRun){t[i].offset, t[i].count, llmc_tensor_at(c, i)};
        free(t);
        return k;
    }
    size_t C = c->channels, L = c->layers, V = c->vocab, F = cfg_ffn(c), Q = qkv_width(c);
    // where each kind's L layers begin in the file: ln_1, c_attn, c_proj, ln_2, c_fc, c_fc2, mlp c_proj
    size_t kind[7] = {C, Q * C, C * C, C, F * C, F * C, C * F}, start[7], at = V * C;
    for (int j = 0; j < 7; j++) start[j] = at, at += L * kind[j];
    out[k++] = (LlmcRun){0, V * C, 0};  // wte's real rows
    for (size_t l = 0; l < L; l++) {
        const ParamTensor *op = t + 1 + 6 * l;  // ln1w, qkvw, attprojw, ln2w, fcw, fcprojw
        for (int j = 0; j < 4; j++) out[k++] = (LlmcRun){op[j].offset, op[j].count, start[j] + l * kind[j]};
        out[k++] = (LlmcRun){op[4].offset, F * C, start[4] + l * kind[4]};          // fcw's up rows: c_fc
        out[k++] = (LlmcRun){op[4].offset + F * C, F * C, start[5] + l * kind[5]};  // its gate rows: c_fc2
        out[k++] = (LlmcRun){op[5].offset, op[5].count, start[6] + l * kind[6]};
    }
    out[k++] = (LlmcRun){t[1 + 6 * L].offset, C, at};  // ln_f
    if (c->untied) out[k++] = (LlmcRun){t[2 + 6 * L].offset, V * C, at + C};
    else if (tied_head) out[k++] = (LlmcRun){0, V * C, at + C};
    free(t);
    return k;
}

// The SwiGLU width train_llama3.py makes of C, ffn_dim_multiplier and multiple_of.
long long llama3_ffn(long long C, double multiplier, long long multiple_of) {
    long long hidden = (long long)(2 * 4 * C / 3.0);
    if (multiplier > 0) hidden = (long long)(multiplier * hidden);
    return multiple_of > 0 ? multiple_of * ((hidden + multiple_of - 1) / multiple_of) : hidden;
}

// Are a header's sizes in the ranges of the flags that set them (--layers,
// --channels, --heads, --vocab, --max-seq)? Checked before any arithmetic on
// them, so that no size computed from a header overflows.
int llmc_shape_in_range(const GPTConfig *c) {
    return c->layers >= 1 && c->layers <= 1024 && c->channels >= 1 && c->channels <= 65536 && c->heads >= 1 &&
           c->heads <= 1024 && c->vocab >= 1 && c->vocab <= (1 << 20) && c->max_seq >= 1 && c->max_seq <= MAX_POSITIONS;
}

#define LLMC_RANGES " (gptmem's: L to 1024, C to 65536, H to 1024 dividing C, V to 2^20, maxT to 131072)"

// Are the n bytes of `path` at offsets a and b the same? (read a MiB at a time; 0 on a read error)
int llmc_same_bytes(const char *path, long long a, long long b, long long n) {
    enum { CHUNK = 1 << 20 };
    FILE *f = fopen(path, "rb");
    char *x = malloc(CHUNK), *y = malloc(CHUNK);
    int same = f != NULL;
    for (long long at = 0; same && at < n; at += CHUNK) {
        size_t len = (size_t)(n - at < CHUNK ? n - at : CHUNK);
        same = !fseek(f, a + at, SEEK_SET) && fread(x, 1, len, f) == len && !fseek(f, b + at, SEEK_SET) &&
               fread(y, 1, len, f) == len && !memcmp(x, y, len);
    }
    if (f) fclose(f);
    free(x), free(y);
    return same;
}

// A Llama file's header into m->cfg: 0, or -1 with the problem in err.
int llmc_llama_header(LlmcModel *m, const int32_t *h, long long size, char *err, size_t errlen) {
    const char *path = m->path;
    GPTConfig *c = &m->cfg;
    *c = (GPTConfig){.layers = h[4], .channels = h[7], .heads = h[5], .vocab = h[3], .max_seq = h[2],
                     .arch = ARCH_LLAMA, .kv_heads = h[6], .untied = 1, .rope_scaled = h[12] ? 8 : 0};  // (llm.c's
                     // use_scaled_rope: Llama 3.1's factor)
    if (!llmc_shape_in_range(c) || c->kv_heads < 1 || c->kv_heads > c->heads || c->channels % c->heads ||
        c->heads % c->kv_heads || head_size(c) % 2)
        return snprintf(err, errlen, "'%s' has a shape no Llama has: L %d C %d H %d KVH %d V %d maxT %d" LLMC_RANGES, path,
                        c->layers, c->channels, c->heads, c->kv_heads, c->vocab, c->max_seq), -1;
    if (h[11] == 3 && h[14] == 0)  // [8] multiple_of, [9] use_scaled_rope, [10] tied, [11] 3: the C trainer's form
        return snprintf(err, errlen, "'%s' has the 2048-byte header llm.c's train_llama3.cu writes (an int half and a "
                        "float half); gptmem reads the 1024-byte one of train_llama3.py's write_model", path), -1;
    if (h[11] < 1)
        return snprintf(err, errlen, "'%s' has RoPE's theta %d, not a positive base", path, h[11]), -1;
    c->rope_theta = h[11] == (int32_t)LLAMA_ROPE_THETA ? 0 : h[11];
    if (h[12] != 0 && h[12] != 1)
        return snprintf(err, errlen, "'%s' has use_scaled_rope %d, not 0 or 1", path, h[12]), -1;
    // F from the size: everything else is known, and F weighs 3 L C weights.
    long long body = size - LLMC_HEADER_BYTES, per = 3LL * c->layers * c->channels;
    c->ffn = 1;
    long long fixed = (long long)llmc_llama_count(c) - per;
    if (body < 0 || body % m->width || (body / m->width - fixed) % per || body / m->width - fixed <= 0)
        return snprintf(err, errlen, "'%s' has %lld bytes: no SwiGLU width makes a Llama of L %d C %d H %d KVH %d V %d "
                        "(%s) that size%s", path, size, c->layers, c->channels, c->heads, c->kv_heads, c->vocab,
                        m->width == 4 ? "fp32" : "bf16", body / m->width <= fixed ? ": it is truncated" : ""), -1;
    if ((body / m->width - fixed) / per > (1 << 20))
        return snprintf(err, errlen, "'%s' has %lld bytes: its SwiGLU width would be %lld, past any model's (at most "
                        "%d)", path, size, (body / m->width - fixed) / per, 1 << 20), -1;
    c->ffn = (int)((body / m->width - fixed) / per);
    long long said = llama3_ffn(c->channels, h[8], h[9]), table = (long long)c->vocab * c->channels * m->width;
    if (said != c->ffn)
        snprintf(m->note, sizeof m->note, "the SwiGLU width %d comes from the file's size (its header's "
                 "ffn_dim_multiplier %d and multiple_of %d, integers, give %lld); RMSNorm's epsilon is Llama 3's "
                 "1e-5 (the header's is %d)", c->ffn, h[8], h[9], said, h[10]);
    c->untied = !llmc_same_bytes(path, LLMC_HEADER_BYTES, size - table, table);  // lm_head is the file's last tensor
    return 0;
}

// Read and check the header of `path`: 0, or -1 with the problem in err.
int llmc_model_open(LlmcModel *m, const char *path, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    if (strlen(path) >= sizeof m->path)
        return snprintf(err, errlen, "the path '%.60s...' is %zu bytes long; gptmem takes paths up to %zu", path,
                        strlen(path), sizeof m->path - 1), -1;
    snprintf(m->path, sizeof m->path, "%s", path);
    const char *why = unreadable_why(path);
    if (why) return snprintf(err, errlen, "cannot read the model file '%s': %s", path, why), -1;
    int32_t h[256];
    FILE *f = fopen(path, "rb");
    int got = f && fread(h, sizeof h, 1, f) == 1;
    if (f) fclose(f);
    if (!f) return snprintf(err, errlen, "cannot read the model file '%s': %s", path, strerror(errno)), -1;
    if (!got) return snprintf(err, errlen, "'%s' is shorter than llm.c's 1024-byte model header", path), -1;
    if (h[0] != LLMC_MODEL_MAGIC && h[0] != LLMC_LLAMA_MAGIC)
        return snprintf(err, errlen, "'%s' has magic %d, not an llm.c model file's (%d GPT-2, %d Llama 3)", path, h[0],
                        LLMC_MODEL_MAGIC, LLMC_LLAMA_MAGIC), -1;
    if (h[1] != 3 && h[1] != 5)
        return snprintf(err, errlen, "'%s' is version %d; llm.c's model files are version 3 (fp32) or 5 (bf16)",
                        path, h[1]), -1;
    m->version = h[1], m->width = h[1] == 3 ? 4 : 2;
    long long size = file_size(path);
    if (h[0] == LLMC_LLAMA_MAGIC) return llmc_llama_header(m, h, size, err, errlen);
    m->cfg = (GPTConfig){.layers = h[4], .channels = h[6], .heads = h[5], .vocab = h[3], .max_seq = h[2]};
    const GPTConfig *c = &m->cfg;
    if (!llmc_shape_in_range(c) || c->channels % c->heads)
        return snprintf(err, errlen, "'%s' has a shape no model has: L %d C %d H %d V %d maxT %d" LLMC_RANGES, path, c->layers,
                        c->channels, c->heads, c->vocab, c->max_seq), -1;
    if (h[7] != padded_vocab(c))
        return snprintf(err, errlen, "'%s' pads its vocabulary %d to %d rows; gptmem pads to a multiple of 64: %d",
                        path, c->vocab, h[7], padded_vocab(c)), -1;
    long long want = LLMC_HEADER_BYTES + (long long)param_count(c) * m->width;
    if (size != want)
        return snprintf(err, errlen, "'%s' has %lld bytes; its header (L %d C %d V %d maxT %d, %s) says %lld%s", path,
                        size, c->layers, c->channels, c->vocab, c->max_seq, m->width == 4 ? "fp32" : "bf16", want,
                        size < want ? ": it is truncated" : ""), -1;
    return 0;
}

// The weights [lo, hi) of gptmem's flat array (core/config.h) into dst[0 .. hi-lo)
// as fp32, read from the file a run's overlap at a time (weights in no run, a
// padded vocabulary's rows, are 0). A bf16 file's overlap is read into the upper
// half of its fp32 destination and widened in place from the front (element i
// is read before anything is written over it), so no buffer besides dst is
// needed. 0, or -1 if a read failed.
int llmc_read_range(const void *file, float *dst, size_t lo, size_t hi) {
    const LlmcModel *m = file;
    LlmcRun *run = malloc(sizeof(LlmcRun) * llmc_max_runs(&m->cfg));
    int n = llmc_runs(&m->cfg, run, 0), bad = 0;
    memset(dst, 0, sizeof(float) * (hi - lo));
    FILE *f = fopen(m->path, "rb");
    bad = !f;
    for (int i = 0; i < n && !bad; i++) {
        size_t a = run[i].at > lo ? run[i].at : lo, b = run[i].at + run[i].count < hi ? run[i].at + run[i].count : hi;
        if (b <= a) continue;
        size_t len = b - a;
        float *out = dst + (a - lo);
        long long at = LLMC_HEADER_BYTES + (long long)(run[i].file + (a - run[i].at)) * m->width;
        uint16_t *half = (uint16_t *)out + len;  // bf16: the upper half of out's bytes
        bad = fseek(f, at, SEEK_SET) != 0 || fread(m->width == 4 ? (void *)out : (void *)half, (size_t)m->width, len, f) != len;
        if (m->width == 2)
            for (size_t k = 0; k < len && !bad; k++) out[k] = bf16_to_float(half[k]);
    }
    if (f) fclose(f);
    free(run);
    return bad ? -1 : 0;
}

// The largest power of two up to 1024 that divides F: the multiple_of an exported Llama's header
// says (with ffn_dim_multiplier 1, what train_llama3.py writes for Llama 3's 1.3 too).
int llama3_multiple_of(int F) {
    int m = 1;
    while (m < 1024 && F % (2 * m) == 0) m *= 2;
    return m;
}

// The weights an exported file holds (a Llama's head always a matrix of its own).
size_t llmc_export_count(const GPTConfig *c) { return is_llama(c) ? llmc_llama_count(c) : param_count(c); }

// The bytes of --export's file.
long long llmc_export_bytes(const GPTConfig *c) { return LLMC_HEADER_BYTES + 4LL * (long long)llmc_export_count(c); }

// --export's file sized (zeros), so that each rank can write its part of the
// weights into it in any order; its header comes last (llmc_export_finish),
// so a file cut short by a failure or a signal has no magic and is no model.
int llmc_export_begin(const char *tmp, const GPTConfig *c) { return file_of_zeros(tmp, llmc_export_bytes(c)); }

// The header (version 3, fp32), once every weight is in the file.
int llmc_export_finish(const char *tmp, const GPTConfig *c) {
    int32_t h[256] = {0};
    if (is_llama(c)) {
        h[0] = LLMC_LLAMA_MAGIC, h[1] = 3, h[2] = c->max_seq, h[3] = c->vocab, h[4] = c->layers, h[5] = c->heads;
        h[6] = cfg_kv_heads(c), h[7] = c->channels, h[8] = 1, h[9] = llama3_multiple_of(cfg_ffn(c)), h[10] = 0;
        h[11] = (int32_t)cfg_rope(c).theta, h[12] = c->rope_scaled != 0, h[13] = 4, h[14] = 3, h[15] = 1;
    } else {
        h[0] = LLMC_MODEL_MAGIC, h[1] = 3, h[2] = c->max_seq, h[3] = c->vocab, h[4] = c->layers, h[5] = c->heads;
        h[6] = c->channels, h[7] = padded_vocab(c);
    }
    FILE *f = temp_reopen(tmp);
    if (!f) return -1;
    int bad = fwrite(h, sizeof h, 1, f) != 1;
    return fclose(f) != 0 || bad ? -1 : 0;
}

// The weights [lo, hi) of gptmem's flat array, got a chunk at a time through
// get(ctx, at, dst, n) (at counted from lo), written where llm.c keeps them.
int llmc_export_range(const char *tmp, const GPTConfig *c, size_t lo, size_t hi,
                      void (*get)(const void *ctx, size_t at, float *dst, size_t n), const void *ctx) {
    enum { CHUNK = 1 << 18 };
    LlmcRun *run = malloc(sizeof(LlmcRun) * llmc_max_runs(c));
    int n = llmc_runs(c, run, 1), bad = 0;
    float *chunk = malloc(sizeof(float) * CHUNK);  // 1 MiB of host staging, as the state files use
    FILE *f = temp_reopen(tmp);
    bad = !f;
    for (int i = 0; i < n && !bad; i++) {
        size_t a = run[i].at > lo ? run[i].at : lo, b = run[i].at + run[i].count < hi ? run[i].at + run[i].count : hi;
        long long at = LLMC_HEADER_BYTES + (long long)(run[i].file + (a - run[i].at)) * 4;
        if (b > a) bad = fseek(f, at, SEEK_SET) != 0;
        for (size_t k = a; k < b && !bad; k += CHUNK) {
            size_t len = b - k < CHUNK ? b - k : CHUNK;
            get(ctx, k - lo, chunk, len);
            bad = fwrite(chunk, sizeof(float), len, f) != len;
        }
    }
    if (f && fclose(f) != 0) bad = 1;
    free(chunk);
    free(run);
    return bad ? -1 : 0;
}

#endif
