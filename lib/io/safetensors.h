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
// The names, and how each becomes gptmem's tensor (core/config.h's layout; io/safetensors_model.h):
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
// tensor whose dtype, shape or offsets do not fit, or a name given twice.
//
// A downloaded folder is hostile input: the header (and the index) is read by
// io/json.h's strict, bounded reader, at most ST_MAX_HEADER bytes (a real
// model's header or index is at most a few MB: the largest, an index of some
// 90,000 tensors, is about 9 MB); the tensors' byte ranges must tile the data,
// no gap, no overlap; a shard the index names is a plain file name in the
// folder (no '/', no '..'), so nothing outside the folder is read, while a
// symlink inside it is followed (Hugging Face's cache links snapshots to blobs).
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
enum { ST_MAX_FILES = 64, ST_MAX_HEADER = 32 << 20, ST_NAME = 160, ST_PATH = 4096 };

typedef struct {
    char *name;            // (its own copy)
    int dtype, file;       // ST_*; which of the model's files holds it
    size_t rows, cols;     // (rows, cols); a vector: (1, n)
    long long at, end;     // where its bytes begin and end in that file
} StTensor;

typedef struct {
    char files[ST_MAX_FILES][ST_PATH];  // (a path of up to 4095 bytes, Linux's PATH_MAX, and a file's name)
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

static int st_by_name(const void *a, const void *b) {
    return strcmp(((const StTensor *)a)->name, ((const StTensor *)b)->name);
}

static int st_by_offset(const void *a, const void *b) {
    const StTensor *x = a, *y = b;
    return (x->at > y->at) - (x->at < y->at);
}

// A tensor by name (m->t is sorted by name once every header is read), or NULL.
static const StTensor *st_find(const StModel *m, const char *name) {
    StTensor key = {.name = (char *)name};
    return m->nt ? bsearch(&key, m->t, (size_t)m->nt, sizeof key, st_by_name) : NULL;
}

// A whole file's text (an index): NULL with err if it is no regular file, cannot be read, or is over `most` bytes.
static char *st_slurp(const char *path, size_t most, size_t *n, char *err, size_t errlen) {
    const char *why = unreadable_why(path), *name = strrchr(path, '/');
    long long size = file_size(path);
    if (why) return snprintf(err, errlen, "cannot read '%s': %s", path, why), NULL;
    if (size > (long long)most)
        return snprintf(err, errlen, "'%s' has %lld bytes, over the %zu MiB %s needs", path, size, most >> 20,
                        !strcmp(name ? name + 1 : path, "adapter_config.json") ? "an adapter_config.json"
                                                                               : "a model's index"), NULL;
    FILE *f = fopen(path, "rb");
    char *text = f ? malloc(size ? (size_t)size : 1) : NULL;
    *n = text ? fread(text, 1, (size_t)size, f) : 0;
    if (f) fclose(f);
    if (!text || *n != (size_t)size) return free(text), snprintf(err, errlen, "cannot read '%s'", path), NULL;
    return text;
}

// One tensor's entry of a header ({dtype, shape, data_offsets}) into t. 0, or -1 with err.
static int st_tensor(const Json *j, const JsonField *o, const char *path, long long data, long long room, StTensor *t,
                     char *err, size_t errlen) {
    char key[JSON_KEY + 32];
    const char *nm = o->name;
    snprintf(key, sizeof key, "%s.dtype", nm);
    const JsonField *dt = json_field(j, key);
    snprintf(key, sizeof key, "%s.shape", nm);
    const JsonField *sh = json_field(j, key);
    snprintf(key, sizeof key, "%s.data_offsets", nm);
    const JsonField *off = json_field(j, key);
    if (o->kind != JSON_OBJECT) return snprintf(err, errlen, "'%s': \"%.200s\" is no tensor (not an object)", path, nm), -1;
    if (!dt || dt->kind != JSON_STRING) return snprintf(err, errlen, "'%s': tensor %.200s has no dtype string", path, nm), -1;
    if (!sh || sh->kind != JSON_ARRAY || !sh->whole)
        return snprintf(err, errlen, "'%s': tensor %.200s has no shape of whole numbers", path, nm), -1;
    if (sh->count > 4)
        return snprintf(err, errlen, "'%s': tensor %.200s has %d dimensions; gptmem reads up to 4", path, nm, sh->count), -1;
    if (!off || off->kind != JSON_ARRAY || !off->whole || off->count != 2 || off->numbers[1] < off->numbers[0])
        return snprintf(err, errlen, "'%s': tensor %.200s's data_offsets are not [begin, end) with begin <= end", path,
                        nm), -1;
    long long begin = (long long)off->numbers[0], end = (long long)off->numbers[1];
    if (off->numbers[1] > (double)room)
        return snprintf(err, errlen, "'%s': tensor %.200s has data_offsets [%lld, %lld), past the file's %lld bytes of "
                        "data", path, nm, begin, end, room), -1;
    t->dtype = !strcmp(dt->text, "F32") ? ST_F32 : !strcmp(dt->text, "BF16") ? ST_BF16 : !strcmp(dt->text, "F16") ? ST_F16 : -1;
    double elems = 1;
    for (int d = 0; d < sh->count; d++) elems *= sh->numbers[d];
    t->rows = sh->count == 2 ? (size_t)sh->numbers[0] : 1, t->cols = sh->count == 2 ? (size_t)sh->numbers[1] : (size_t)elems;
    t->at = data + begin, t->end = data + end;
    size_t es = t->dtype == ST_F32 ? 4 : 2;
    if (t->dtype >= 0 && elems * (double)es != (double)(end - begin))
        return snprintf(err, errlen, "'%s': tensor %.200s's shape and dtype say %.0f bytes; its offsets hold %lld", path,
                        nm, elems * (double)es, end - begin), -1;
    if (t->dtype < 0 && !st_is_buffer(nm))
        return snprintf(err, errlen, "'%s': tensor %.200s is %.40s; gptmem reads F32, BF16 and F16", path, nm, dt->text), -1;
    return 0;
}

// Do this file's tensors (m->t[first..]) tile its data, from 0 to its end, no gap and no overlap? 0, or -1 with err.
static int st_tiled(StModel *m, int first, const char *path, long long data, long long size, char *err, size_t errlen) {
    StTensor *t = m->t + first;
    int n = m->nt - first;
    qsort(t, (size_t)n, sizeof *t, st_by_offset);
    long long at = data;
    for (int i = 0; i < n; at = t[i++].end)
        if (t[i].at != at)
            return snprintf(err, errlen, "'%s': tensor %.200s's bytes begin at %lld of its data, %s", path, t[i].name,
                            t[i].at - data, t[i].at < at ? "inside the tensor before it (overlapping bytes)" :
                            "past the tensor before it (a gap no tensor holds)"), -1;
    if (at != size)
        return snprintf(err, errlen, "'%s': its tensors hold %lld bytes of data, and the file has %lld after its header",
                        path, at - data, size - data), -1;
    return 0;
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
        return snprintf(err, errlen, "'%s' is not a safetensors file: its first 8 bytes are no header length that fits "
                        "its %lld bytes (and a header of at most %d MiB)", path, size, ST_MAX_HEADER >> 20), -1;
    }
    char *text = malloc(N);
    got = text && fread(text, 1, N, f) == N;
    fclose(f);
    Json j;
    int bad = !got || json_read(&j, text, N);
    free(text);
    if (bad) return snprintf(err, errlen, "'%s': its header is not JSON gptmem can read (%s)", path, got ? j.why : "a short read"), -1;
    long long data = 8 + (long long)N;
    int first = m->nt;
    for (int i = 0; i < j.n && !bad; i++) {
        const JsonField *o = &j.f[i];
        if (o->level != 0 || !strcmp(o->name, "__metadata__")) continue;
        StTensor t = {.file = file};
        bad = st_tensor(&j, o, path, data, size - data, &t, err, errlen);
        if (!bad && m->nt % 64 == 0) {
            StTensor *grown = realloc(m->t, sizeof(StTensor) * (size_t)(m->nt + 64));
            if (!grown) bad = snprintf(err, errlen, "'%s': out of memory for its tensors", path);
            else m->t = grown;
        }
        if (!bad && !(t.name = strdup(o->name))) bad = snprintf(err, errlen, "'%s': out of memory", path);
        if (!bad) m->t[m->nt++] = t;
    }
    json_free(&j);
    return bad || st_tiled(m, first, path, data, size, err, errlen) ? -1 : 0;
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
    char index[ST_PATH];
    if (strlen(path) + 1 + 255 >= ST_PATH)  // (a folder and a file's name in it: the longest path Linux takes)
        return snprintf(err, errlen, "the folder's path is %zu bytes long; gptmem takes a model folder's path up to %d "
                        "bytes", strlen(path), ST_PATH - 1 - 256), -1;
    if (snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir) >= (int)sizeof index) return -1;  // (it fits)
    if (path_missing(index)) {
        if (snprintf(m->files[0], sizeof m->files[0], "%s/model.safetensors", dir) >= ST_PATH) return -1;
        m->nfiles = 1;
        return 0;
    }
    size_t n;
    char *text = st_slurp(index, ST_MAX_HEADER, &n, err, errlen);
    if (!text) return -1;
    Json j;
    if (json_read(&j, text, n)) {
        free(text);
        return snprintf(err, errlen, "'%s' is not an index gptmem can read (%s)", index, j.why), -1;
    }
    free(text);
    for (int i = 0; i < j.n; i++) {
        if (strncmp(j.f[i].name, "weight_map.", 11) || j.f[i].level != 1) continue;
        const char *shard = j.f[i].text;
        if (j.f[i].kind != JSON_STRING || !shard[0] || strchr(shard, '/') || !strcmp(shard, ".") ||
            !strcmp(shard, "..") || strlen(shard) > 255) {
            snprintf(err, errlen, "'%s' maps %.200s to \"%.200s\": a shard is a file name in the model's folder (no "
                     "'/', not '..'), so nothing outside the folder is read", index, j.f[i].name + 11, shard);
            json_free(&j);
            return -1;
        }
        int seen = 0;
        char file[ST_PATH];
        if (snprintf(file, sizeof file, "%s/%s", dir, shard) >= (int)sizeof file) return -1;  // (it fits: both lengths checked)
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

#endif
