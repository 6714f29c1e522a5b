// io/safetensors.h — a Hugging Face model folder as --init reads it:
// config.json (io/hf_config.h: the shape) and the weights in safetensors, one
// model.safetensors or the shards model.safetensors.index.json names.
//
// A safetensors file: a u64 (little-endian) N, N bytes of JSON {name: {dtype,
// shape, data_offsets: [begin, end)}, "__metadata__": {...}}, then the tensors'
// bytes, row-major, begin and end counted from the end of the JSON. gptmem reads
// F32, BF16 and F16, a run of a row at a time into the flat array's range a rank
// asks for (as io/llmc.h does for llm.c's files), never a whole tensor.
//
// The names, and how each becomes gptmem's tensor (core/config.h's layout):
//   GPT-2 (GPT2LMHeadModel's "transformer." before each name, or none): wte.weight
//     (V, C) into wte's first V rows, wpe, h.{l}.ln_1, attn.c_attn, attn.c_proj,
//     ln_2, mlp.c_fc, mlp.c_proj (weights and biases), ln_f. The four matrices are
//     Conv1D's, stored (in, out): read transposed into gptmem's (out, in).
//   Llama: model.embed_tokens, model.layers.{l}.input_layernorm, self_attn.q_proj,
//     k_proj, v_proj (one qkvw of q's rows, k's, v's), o_proj, post_attention_layernorm,
//     mlp.up_proj and gate_proj (one fcw: up's F rows, then gate's), down_proj,
//     model.norm, lm_head (untied only). Hugging Face stores q and k with each
//     head's rotated pairs split in halves (row j of the first half pairs with row
//     j of the second); gptmem, Meta and llm.c interleave them (rows 2j, 2j + 1):
//     row 2j + s of a head is Hugging Face's row s hs/2 + j.
// Buffers that are no weights (GPT-2's attn.bias and attn.masked_bias masks, a
// Llama's rotary_emb.inv_freq) are read past; any other name is refused, as is a
// tensor whose dtype, shape or offsets do not fit.
#ifndef GPTMEM_SAFETENSORS_H
#define GPTMEM_SAFETENSORS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "core/config.h"
#include "core/dtype.h"
#include "io/files.h"
#include "io/hf_config.h"
#include "io/json.h"

enum { ST_F32, ST_BF16, ST_F16 };
enum { ST_MAX_FILES = 64, ST_MAX_HEADER = 100 << 20 };

typedef struct {
    char name[JSON_NAME];
    int dtype, file;       // ST_*; which of the model's files holds it
    size_t rows, cols;     // (rows, cols); a vector: (1, n)
    long long at;          // where its bytes begin in that file
} StTensor;

typedef struct {
    char files[ST_MAX_FILES][1100];
    int nfiles;
    StTensor *t;
    int nt;
    GPTConfig cfg;
    const char *prefix;  // GPT-2's names: "transformer." or ""
} StModel;

static int st_is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

// Is `path` a Hugging Face model (a folder holding config.json and safetensors, or a .safetensors file)?
int st_is_model(const char *path) {
    size_t n = strlen(path);
    return st_is_dir(path) || (n > 12 && !strcmp(path + n - 12, ".safetensors"));
}

// A tensor that is no weight: GPT-2's causal masks (h.{l}.attn.bias, attn.masked_bias), a Llama's inv_freq.
static int st_is_buffer(const char *name) {
    static const char *ends[] = {".attn.bias", ".attn.masked_bias", ".rotary_emb.inv_freq"};
    size_t n = strlen(name);
    for (int k = 0; k < 3; k++)
        if (n >= strlen(ends[k]) && !strcmp(name + n - strlen(ends[k]), ends[k])) return 1;
    return 0;
}

static const StTensor *st_find(const StModel *m, const char *name) {
    for (int i = 0; i < m->nt; i++)
        if (!strcmp(m->t[i].name, name)) return &m->t[i];
    return NULL;
}

// A whole file's text, at most `most` bytes (NULL if it could not be read or is longer).
static char *st_slurp(const char *path, size_t most, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *text = malloc(most + 1);
    *n = fread(text, 1, most + 1, f);
    fclose(f);
    if (*n > most) { free(text); return NULL; }
    return text;
}

// One file's header into m's tensor table. 0, or -1 with err.
static int st_read_header(StModel *m, int file, char *err, size_t errlen) {
    const char *path = m->files[file];
    const char *why = unreadable_why(path);
    if (why) return snprintf(err, errlen, "cannot read '%s': %s", path, why), -1;
    long long size = file_size(path);
    uint64_t N = 0;
    FILE *f = fopen(path, "rb");
    int got = f && fread(&N, 8, 1, f) == 1;
    if (!got || N < 2 || N > ST_MAX_HEADER || (long long)N > size - 8) {
        if (f) fclose(f);
        return snprintf(err, errlen, "'%s' is not a safetensors file: its first 8 bytes give a header of %llu bytes "
                        "(the file has %lld)", path, (unsigned long long)N, size), -1;
    }
    char *text = malloc(N);
    got = fread(text, 1, N, f) == N;
    fclose(f);
    Json j;
    int bad = !got || json_read(&j, text, N);
    free(text);
    if (bad) return snprintf(err, errlen, "'%s': its header is not JSON gptmem can read (%s)", path, j.why), -1;
    long long data = 8 + (long long)N, room = size - data;
    for (int i = 0; i < j.n && !bad; i++) {
        char key[JSON_NAME + 16];
        const JsonField *o = &j.f[i];
        snprintf(key, sizeof key, "%s.data_offsets", o->name);
        const JsonField *off = o->kind == JSON_OBJECT ? json_field(&j, key) : NULL;
        if (!off) continue;  // (__metadata__, and the objects' own fields)
        snprintf(key, sizeof key, "%s.dtype", o->name);
        const JsonField *dt = json_field(&j, key);
        snprintf(key, sizeof key, "%s.shape", o->name);
        const JsonField *sh = json_field(&j, key);
        StTensor t = {.file = file};
        snprintf(t.name, sizeof t.name, "%s", o->name);
        t.dtype = !dt ? -1 : !strcmp(dt->text, "F32") ? ST_F32 : !strcmp(dt->text, "BF16") ? ST_BF16
                : !strcmp(dt->text, "F16") ? ST_F16 : -1;
        size_t elems = 1;
        for (int d = 0; sh && d < sh->count && d < JSON_NUMBERS; d++) elems *= (size_t)sh->numbers[d];
        t.rows = sh && sh->count == 2 ? (size_t)sh->numbers[0] : 1, t.cols = sh && sh->count == 2 ? (size_t)sh->numbers[1] : elems;
        long long begin = (long long)off->numbers[0], end = (long long)off->numbers[1];
        size_t es = t.dtype == ST_F32 ? 4 : 2;
        t.at = data + begin;
        if (off->count != 2 || begin < 0 || end < begin || end > room)
            bad = snprintf(err, errlen, "'%s': tensor %s has data_offsets past the file's %lld bytes of data", path,
                           t.name, room);
        else if (t.dtype >= 0 && (!sh || sh->count > 4 || (long long)(elems * es) != end - begin))
            bad = snprintf(err, errlen, "'%s': tensor %s's shape and dtype say %zu bytes; its offsets hold %lld", path,
                           t.name, elems * es, end - begin);
        else if (m->nt % 64 == 0) m->t = realloc(m->t, sizeof(StTensor) * (m->nt + 64));
        if (!bad) m->t[m->nt++] = t;
        if (!bad && t.dtype < 0 && !st_is_buffer(t.name))
            bad = snprintf(err, errlen, "'%s': tensor %s is %s; gptmem reads F32, BF16 and F16", path, t.name,
                           dt ? dt->text : "of no dtype");
    }
    json_free(&j);
    return bad ? -1 : 0;
}

// The files: model.safetensors.index.json's shards, or model.safetensors, in the folder; or the one file.
static int st_files(StModel *m, const char *path, char *dir, size_t dirlen, char *err, size_t errlen) {
    if (!st_is_dir(path)) {
        snprintf(dir, dirlen, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0;
        else snprintf(dir, dirlen, ".");
        snprintf(m->files[0], sizeof m->files[0], "%s", path);
        m->nfiles = 1;
        return 0;
    }
    snprintf(dir, dirlen, "%s", path);
    char index[1100];
    snprintf(index, sizeof index, "%.1000s/model.safetensors.index.json", dir);
    if (path_missing(index)) {
        snprintf(m->files[0], sizeof m->files[0], "%.1000s/model.safetensors", dir);
        m->nfiles = 1;
        return 0;
    }
    size_t n;
    char *text = st_slurp(index, 64 << 20, &n);
    Json j;
    if (!text || json_read(&j, text, n)) {
        free(text);
        return snprintf(err, errlen, "'%s' is not an index gptmem can read", index), -1;
    }
    free(text);
    for (int i = 0; i < j.n; i++) {
        if (strncmp(j.f[i].name, "weight_map.", 11) || j.f[i].kind != JSON_STRING) continue;
        int seen = 0;
        char file[1100];
        snprintf(file, sizeof file, "%.800s/%.255s", dir, j.f[i].text);
        for (int k = 0; k < m->nfiles; k++) seen |= !strcmp(m->files[k], file);
        if (!seen && m->nfiles == ST_MAX_FILES) {
            json_free(&j);
            return snprintf(err, errlen, "'%s' names over %d files", index, ST_MAX_FILES), -1;
        }
        if (!seen) snprintf(m->files[m->nfiles++], sizeof m->files[0], "%s", file);
    }
    json_free(&j);
    return m->nfiles ? 0 : (snprintf(err, errlen, "'%s' maps no tensor to a file", index), -1);
}

// --- gptmem's tensors, from Hugging Face's ---------------------------------------------

// A Hugging Face tensor that makes (part of) one of gptmem's, and the shape it must have as stored.
typedef struct {
    char name[JSON_KEY];
    size_t rows, cols;
    int halves;  // Llama's q or k: each head's rotated pairs stored as two halves (st_row interleaves them)
} StPart;

// gptmem's tensor i (param_tensors' order) as Hugging Face's parts, stacked by rows (Llama's qkvw: q, k,
// v; its fcw: up, gate; a table's rows past V are gptmem's padding, zeros). *transposed: GPT-2's Conv1D
// matrices, stored (in, out). Returns how many parts; *rows, *cols: the tensor as gptmem keeps it.
static int st_parts(const StModel *m, int i, StPart *p, int *transposed, size_t *rows, size_t *cols) {
    const GPTConfig *c = &m->cfg;
    int llama = is_llama(c), n = param_tensor_count(c), per = llama ? LAYER_OPS : 2 * LAYER_OPS, first = llama ? 1 : 2;
    size_t C = c->channels, V = c->vocab, hs = head_size(c), F = cfg_ffn(c), kvw = kv_width(c);
    const char *pre = m->prefix;
    *transposed = 0, *rows = 1, *cols = C;
    memset(p, 0, sizeof(StPart) * 3);
#define PART(k, r, cl, ...) (snprintf(p[k].name, sizeof p[k].name, __VA_ARGS__), p[k].rows = (r), p[k].cols = (cl))
    if (i == 0) return *rows = padded_vocab(c), llama ? PART(0, V, C, "model.embed_tokens.weight") : PART(0, V, C, "%swte.weight", pre), 1;
    if (llama && c->untied && i == n - 1) return *rows = padded_vocab(c), PART(0, V, C, "lm_head.weight"), 1;
    if (i == 1 && !llama) return *rows = c->max_seq, PART(0, c->max_seq, C, "%swpe.weight", pre), 1;
    if (i >= first + per * c->layers) {
        if (llama) return PART(0, 1, C, "model.norm.weight"), 1;
        return PART(0, 1, C, "%sln_f.%s", pre, i == n - 1 ? "bias" : "weight"), 1;
    }
    int l = (i - first) / per, k = (i - first) % per, op = llama ? k : k / 2, bias = !llama && k % 2;
    int norm = op == OP_LN1 || op == OP_LN2;
    size_t out = op_outputs(c, op), in = op_inputs(c, op);
    if (!llama) {
        static const char *gpt2[LAYER_OPS] = {"ln_1", "attn.c_attn", "attn.c_proj", "ln_2", "mlp.c_fc", "mlp.c_proj"};
        if (norm || bias) return *cols = norm ? C : out, PART(0, 1, *cols, "%sh.%d.%s.%s", pre, l, gpt2[op], bias ? "bias" : "weight"), 1;
        *rows = out, *cols = in, *transposed = 1;
        return PART(0, in, out, "%sh.%d.%s.weight", pre, l, gpt2[op]), 1;
    }
    static const char *norms[LAYER_OPS] = {"input_layernorm", "", "", "post_attention_layernorm", "", ""};
    if (norm) return PART(0, 1, C, "model.layers.%d.%s.weight", l, norms[op]), 1;
    *rows = out, *cols = in;
    if (op == OP_QKV) {
        PART(0, c->heads * hs, C, "model.layers.%d.self_attn.q_proj.weight", l);
        PART(1, kvw, C, "model.layers.%d.self_attn.k_proj.weight", l);
        PART(2, kvw, C, "model.layers.%d.self_attn.v_proj.weight", l);
        p[0].halves = p[1].halves = 1;
        return 3;
    }
    if (op == OP_FC) return PART(0, F, C, "model.layers.%d.mlp.up_proj.weight", l), PART(1, F, C, "model.layers.%d.mlp.gate_proj.weight", l), 2;
    return PART(0, out, in, "model.layers.%d.%s.weight", l, op == OP_ATTPROJ ? "self_attn.o_proj" : "mlp.down_proj"), 1;
#undef PART
}

// Row r of gptmem's tensor (its parts p[0..np)): row `row` of which stored tensor (NULL: padding, zeros).
static const StTensor *st_row(const StModel *m, const StPart *p, int np, size_t r, size_t *row) {
    size_t hs = head_size(&m->cfg);
    for (int k = 0; k < np; r -= p[k].rows, k++)
        if (r < p[k].rows) {
            *row = p[k].halves ? r / hs * hs + (r % hs % 2) * (hs / 2) + r % hs / 2 : r;  // pair j of a head: rows j, j + hs/2
            return st_find(m, p[k].name);
        }
    return NULL;
}

// n elements of a stored tensor's bytes from element e, as fp32 into out.
static int st_read_elems(const StModel *m, FILE **f, int *open, const StTensor *t, size_t e, float *out, size_t n) {
    if (*open != t->file) {
        if (*f) fclose(*f);
        *f = fopen(m->files[t->file], "rb"), *open = t->file;
        if (!*f) return -1;
    }
    size_t es = t->dtype == ST_F32 ? 4 : 2;
    uint16_t *half = (uint16_t *)out + n;  // 16-bit: the upper half of out's bytes
    if (fseek(*f, t->at + (long long)(e * es), SEEK_SET) || fread(es == 4 ? (void *)out : (void *)half, es, n, *f) != n)
        return -1;
    for (size_t q = 0; q < n && es == 2; q++) out[q] = t->dtype == ST_BF16 ? bf16_to_float(half[q]) : fp16_to_float(half[q]);
    return 0;
}

// gptmem's tensor's elements [a, b) into out: a row's run at a time; a transposed tensor (GPT-2's Conv1D,
// at most 4C^2 weights) read whole once and transposed.
static int st_read_tensor(const StModel *m, int i, FILE **f, int *open, size_t a, size_t b, float *out) {
    StPart p[3];
    int transposed, bad = 0;
    size_t rows, cols;
    int np = st_parts(m, i, p, &transposed, &rows, &cols);
    if (transposed) {
        const StTensor *t = st_find(m, p[0].name);
        float *whole = malloc(sizeof(float) * rows * cols);
        bad = st_read_elems(m, f, open, t, 0, whole, rows * cols);
        for (size_t e = a; e < b && !bad; e++) out[e - a] = whole[(e % cols) * rows + e / cols];
        free(whole);
        return bad;
    }
    for (size_t e = a; e < b && !bad;) {
        size_t r = e / cols, c0 = e % cols, c1 = b - r * cols < cols ? b - r * cols : cols, row;
        const StTensor *t = st_row(m, p, np, r, &row);
        if (t) bad = st_read_elems(m, f, open, t, row * t->cols + c0, out + (e - a), c1 - c0);
        else memset(out + (e - a), 0, (c1 - c0) * sizeof(float));
        e += c1 - c0;
    }
    return bad;
}

// --init's reader (core/config.h WeightSource): the flat array's [lo, hi) as fp32.
int st_read_range(const void *file, float *dst, size_t lo, size_t hi) {
    const StModel *m = file;
    int n = param_tensor_count(&m->cfg), open = -1, bad = 0;
    ParamTensor *pt = malloc(sizeof(ParamTensor) * n);
    param_tensors(&m->cfg, pt);
    FILE *f = NULL;
    for (int i = 0; i < n && !bad; i++) {
        size_t a = pt[i].offset > lo ? pt[i].offset : lo, b = pt[i].offset + pt[i].count < hi ? pt[i].offset + pt[i].count : hi;
        if (b > a) bad = st_read_tensor(m, i, &f, &open, a - pt[i].offset, b - pt[i].offset, dst + (a - lo));
    }
    if (f) fclose(f);
    free(pt);
    return bad ? -1 : 0;
}

// Is every tensor gptmem reads there, with the shape the config says, and every other one a buffer?
static int st_check(StModel *m, const char *dir, char *err, size_t errlen) {
    const GPTConfig *c = &m->cfg;
    int n = param_tensor_count(c), bad = 0;
    m->prefix = !is_llama(c) && !st_find(m, "wte.weight") && st_find(m, "transformer.wte.weight") ? "transformer." : "";
    int *used = calloc(m->nt + 1, sizeof(int));
    for (int i = 0; i < n && !bad; i++) {
        StPart p[3];
        int transposed;
        size_t rows, cols;
        int np = st_parts(m, i, p, &transposed, &rows, &cols);
        for (int k = 0; k < np && !bad; k++) {
            const StTensor *t = st_find(m, p[k].name);
            if (!t) bad = snprintf(err, errlen, "'%s' has no tensor %s", dir, p[k].name);
            else if (t->rows != p[k].rows || t->cols != p[k].cols)
                bad = snprintf(err, errlen, "'%s': tensor %s is (%zu, %zu); the config's model has (%zu, %zu) there",
                               dir, p[k].name, t->rows, t->cols, p[k].rows, p[k].cols);
            else used[t - m->t] = 1;
        }
    }
    for (int i = 0; i < m->nt && !bad; i++) {
        const char *nm = m->t[i].name;
        int buffer = st_is_buffer(nm) || (!strcmp(nm, "lm_head.weight") && !c->untied);  // (a tied head's copy)
        if (!used[i] && !buffer)
            bad = snprintf(err, errlen, "'%s' has tensor %s, which the config's model (%s) has no place for", dir, nm,
                           is_llama(c) ? "Llama" : "GPT-2");
    }
    free(used);
    return bad ? -1 : 0;
}

// Open a Hugging Face model: its config.json (beside the file, or in the folder) and the tensors' table.
// 0, or -1 with err.
int st_model_open(StModel *m, const char *path, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    char dir[1100], used[1100], why[600];
    if (st_files(m, path, dir, sizeof dir, err, errlen)) return -1;
    Json h;
    if (hf_config_read(&h, dir, used, sizeof used, why, sizeof why))
        return snprintf(err, errlen, "'%s' needs its config.json beside it: %s", path, why), -1;
    int bad = hf_config_model(&h, &m->cfg, why, sizeof why);
    json_free(&h);
    if (bad) return snprintf(err, errlen, "'%s' %s", used, why), -1;
    for (int k = 0; k < m->nfiles; k++)
        if (st_read_header(m, k, err, errlen)) return -1;
    return st_check(m, dir, err, errlen);
}

void st_model_close(StModel *m) {
    free(m->t);
    m->t = NULL, m->nt = 0;
}

#endif
