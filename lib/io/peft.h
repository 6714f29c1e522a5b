// io/peft.h — --lora's adapters as Hugging Face's PEFT saves them (save_pretrained): a folder with
// adapter_model.safetensors, every A and B under its module's name, F32 (PEFT keeps the adapters
// fp32), and adapter_config.json beside it (LoraConfig's fields). PEFT's names:
//   Llama: base_model.model.model.layers.{l}.self_attn.q_proj.lora_A.weight   (R, in)
//                                               ...     .lora_B.weight   (out, R)
//   GPT-2: base_model.model.transformer.h.{l}.attn.c_attn.lora_A.weight      (R, in)
// (GPT-2's Conv1D stores its own weight (in, out); its adapters are nn.Linear's, (R, in) and
// (out, R), which adapter_config.json's fan_in_fan_out: true says.)
// --lora-init DIR reads such a folder back (peft_open, peft_read): io/safetensors.h's strict reader for the
// file (F32, BF16 or F16), io/json.h's for adapter_config.json; the maps are the ones the file holds.
// The file: an 8-byte little-endian header length, the JSON header (padded with spaces to a multiple
// of 8), then the tensors in gptmem's layout order (core/lora.h), each A then B. A Llama's q_proj and
// k_proj B has its rows in Hugging Face's order (peft_row), so PEFT adds B A to the model's own rows.
#ifndef GPTMEM_PEFT_H
#define GPTMEM_PEFT_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/config.h"
#include "core/lora.h"
#include "io/json.h"
#include "io/safetensors.h"

// Layer l's map k's A (b 0) or B (b 1): its name.
void peft_name(const GPTConfig *c, int l, int k, int b, char *out, size_t len) {
    snprintf(out, len, "base_model.model.%s.%d.%s.lora_%c.weight", is_llama(c) ? "model.layers" : "transformer.h", l,
             lora_module_names[k], b ? 'B' : 'A');
}

// Hugging Face stores a Llama's q and k with each head's rotated pairs in halves (io/safetensors.h
// hf_half_row), so the output rows of q_proj's and k_proj's B are in that order too: gptmem's row r of map
// k's B is the file's row peft_row(c, k, r).
size_t peft_row(const GPTConfig *c, int k, size_t r) {
    return k == LM_Q || k == LM_K ? hf_half_row(head_size(c), r) : r;
}

// The JSON header (its bytes padded to 8, into a malloc'd *out): every tensor's name, shape and place.
size_t peft_header(const GPTConfig *c, const LoraConfig *a, char **out) {
    size_t cap = 4096, len = 0;
    char *h = malloc(cap), name[160];
    len += (size_t)snprintf(h, cap, "{\"__metadata__\":{\"format\":\"pt\"}");
    long long data = 0;
    for (int l = 0; l < c->layers; l++)
        for (int k = 0; k < LORA_MAPS; k++) {
            if (!lora_targets(a, k)) continue;
            LoraMap mp = lora_map(c, k);
            for (int b = 0; b < 2; b++) {
                size_t rows = b ? (size_t)mp.rows : (size_t)a->rank, cols = b ? (size_t)a->rank : (size_t)mp.in;
                long long bytes = 4LL * (long long)(rows * cols);
                peft_name(c, l, k, b, name, sizeof name);
                if (cap - len < 512) h = realloc(h, cap *= 2);
                len += (size_t)snprintf(h + len, cap - len, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%zu,%zu],\"data_offsets\":"
                                        "[%lld,%lld]}", name, rows, cols, data, data + bytes);
                data += bytes;
            }
        }
    if (cap - len < 16) h = realloc(h, cap += 16);
    h[len++] = '}';
    while (len % 8) h[len++] = ' ';
    *out = h;
    return len;
}

// The bytes of adapter_model.safetensors.
long long peft_file_bytes(const GPTConfig *c, const LoraConfig *a) {
    char *h;
    size_t hn = peft_header(c, a, &h);
    free(h);
    return 8 + (long long)hn + 4LL * (long long)lora_param_count(c, a);
}

// adapter_model.safetensors from the adapters (core/lora.h's layout, which is the file's order), a map at a
// time through `get`. 0, or -1.
int peft_write_from(FILE *f, const GPTConfig *c, const LoraConfig *a, LoraGet get, void *ctx) {
    char *h;
    size_t hn = peft_header(c, a, &h);
    uint8_t len[8];
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)((uint64_t)hn >> (8 * i));
    int bad = fwrite(len, 1, 8, f) != 8 || fwrite(h, 1, hn, f) != hn;
    for (int l = 0; l < c->layers && !bad; l++)
        for (int k = 0; k < LORA_MAPS && !bad; k++) {
            if (!lora_targets(a, k)) continue;
            LoraMap mp = lora_map(c, k);
            size_t na = (size_t)a->rank * mp.in, nb = (size_t)a->rank * mp.rows;
            float *map = malloc((na + 2 * nb) * sizeof(float)), *B = map + na, *rows = B + nb;  // B's rows in the file's order
            if (map) get(ctx, lora_offset(c, a, l, k), map, na + nb);
            for (size_t r = 0; map && r < (size_t)mp.rows; r++)
                memcpy(rows + peft_row(c, k, r) * a->rank, B + r * a->rank, a->rank * sizeof(float));
            bad = !map || fwrite(map, sizeof(float), na, f) != na || fwrite(rows, sizeof(float), nb, f) != nb;
            free(map);
        }
    free(h);
    return bad || ferror(f) ? -1 : 0;
}
int peft_write(FILE *f, const GPTConfig *c, const LoraConfig *a, const float *w) {
    return peft_write_from(f, c, a, lora_get_host, (void *)w);
}

// adapter_config.json: PEFT's LoraConfig for these adapters (its fields that gptmem's adapters fix).
int peft_write_config(FILE *f, const GPTConfig *c, const LoraConfig *a) {
    fprintf(f, "{\n  \"peft_type\": \"LORA\",\n  \"task_type\": \"CAUSAL_LM\",\n  \"base_model_name_or_path\": null,\n"
            "  \"r\": %d,\n  \"lora_alpha\": %.9g,\n  \"lora_dropout\": 0.0,\n  \"bias\": \"none\",\n"
            "  \"fan_in_fan_out\": %s,\n  \"use_rslora\": false,\n  \"use_dora\": false,\n  \"init_lora_weights\": true,\n"
            "  \"inference_mode\": true,\n  \"modules_to_save\": null,\n  \"target_modules\": [", a->rank, a->alpha,
            is_llama(c) ? "false" : "true");
    for (int k = lora_first_map(c), n = 0; k < lora_map_end(c); k++) {
        if (!lora_targets(a, k)) continue;
        const char *dot = strchr(lora_module_names[k], '.');
        fprintf(f, "%s\"%s\"", n++ ? ", " : "", is_llama(c) ? dot + 1 : lora_module_names[k]);
    }
    fprintf(f, "]\n}\n");
    return ferror(f) ? -1 : 0;
}

// adapter_config.json's target_modules when it is a list of names (PEFT matches a module whose name is
// one of them or ends in "." and one of them); n -1 for a pattern or "all-linear", which the tensors decide.
enum { PEFT_NAMES = 16 };
typedef struct {
    char names[PEFT_NAMES][64];
    int n;
} PeftTargets;

// Is the config's object field `name` ("alpha_pattern", ...) one with something in it?
static int peft_has_entries(const Json *j, const char *name) {
    size_t n = strlen(name);
    for (int i = 0; i < j->n; i++)
        if (!strncmp(j->f[i].name, name, n) && j->f[i].name[n] == '.') return 1;
    return 0;
}

// The fields PEFT acts on that change what the adapter does, each either the plain LoRA gptmem trains or
// refused by name (never read as another model): use_dora, use_rslora false or null; alpha_pattern,
// rank_pattern empty; layers_to_transform null, modules_to_save null or empty; bias "none". 0, or -1 with err.
static int peft_plain_lora(const Json *j, const char *path, char *err, size_t errlen) {
    const char *flags[] = {"use_dora", "use_rslora"}, *what[] = {"DoRA", "rsLoRA (scale alpha / sqrt(r))"};
    for (int i = 0; i < 2; i++) {
        const JsonField *f = json_field(j, flags[i]);
        if (f && !(f->kind == JSON_NULL || (f->kind == JSON_BOOL && !f->number)))
            return snprintf(err, errlen, "'%s': %s is %s: %s, which gptmem does not train (plain LoRA, scale alpha / r); "
                            "an adapter of it is refused, not read as another", path, flags[i],
                            f->kind == JSON_BOOL ? "true" : "not false or null (PEFT reads such a value as true)",
                            f->kind == JSON_BOOL ? what[i] : "so it is not plain LoRA"), -1;
    }
    const char *patterns[] = {"alpha_pattern", "rank_pattern"};
    for (int i = 0; i < 2; i++) {
        const JsonField *f = json_field(j, patterns[i]);
        if (f && (f->kind != JSON_NULL && f->kind != JSON_OBJECT))
            return snprintf(err, errlen, "'%s': %s is not an object (PEFT's {module: value})", path, patterns[i]), -1;
        if (f && peft_has_entries(j, patterns[i]))
            return snprintf(err, errlen, "'%s' has %s: some maps at another %s than the config's; gptmem gives every map "
                            "one r and one lora_alpha, so such an adapter is not built", path,
                            i ? "a rank_pattern" : "an alpha_pattern", i ? "rank" : "scale"), -1;
    }
    const char *whole[] = {"layers_to_transform", "modules_to_save"};
    for (int i = 0; i < 2; i++) {  // (an empty layers_to_transform is no layer at all; an empty modules_to_save none)
        const JsonField *f = json_field(j, whole[i]);
        if (f && f->kind != JSON_NULL && !(i == 1 && f->kind == JSON_ARRAY && f->count == 0))
            return snprintf(err, errlen, "'%s' has %s: %s; gptmem's adapters are on every layer's maps and nothing else, "
                            "so such an adapter is not built", path, whole[i],
                            i ? "whole modules trained beside the adapters" : "adapters on some layers only"), -1;
    }
    const JsonField *bias = json_field(j, "bias");
    if (bias && !(bias->kind == JSON_STRING && !strcmp(bias->text, "none")))
        return snprintf(err, errlen, "'%s': bias is not \"none\": PEFT trains biases with it, which gptmem's adapters "
                        "do not hold", path), -1;
    return 0;
}

// --lora-init DIR: adapter_config.json's r and lora_alpha (a plain PEFT LoRA: peft_plain_lora) into *a, its
// target_modules into *t. 0, or -1 with err.
static int peft_read_config(const char *dir, LoraConfig *a, PeftTargets *t, char *err, size_t errlen) {
    char path[4200];
    size_t n;
    if (strlen(dir) + sizeof "/adapter_model.safetensors" > ST_PATH)  // (its longest file's path, Linux's longest)
        return snprintf(err, errlen, "the folder's path is %zu bytes long; gptmem takes an adapter folder's path up to "
                        "%zu bytes", strlen(dir), ST_PATH - sizeof "/adapter_model.safetensors"), -1;
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    char *text = st_slurp(path, 1 << 20, &n, err, errlen);
    if (!text) return -1;
    Json j;
    int bad = json_read(&j, text, n);
    if (bad) {
        free(text);
        return snprintf(err, errlen, "'%s' is not JSON gptmem can read (%s)", path, j.why), -1;
    }
    const JsonField *type = json_field(&j, "peft_type"), *r = json_field(&j, "r"), *alpha = json_field(&j, "lora_alpha");
    const JsonField *targets = json_field(&j, "target_modules");
    if (!type || type->kind != JSON_STRING || strcmp(type->text, "LORA"))
        bad = snprintf(err, errlen, "'%s': peft_type is not \"LORA\": not a LoRA adapter", path);
    else if (!r || r->kind != JSON_NUMBER || !r->whole || r->number < 1 || r->number > 65536)
        bad = snprintf(err, errlen, "'%s': r is not a rank from 1 to 65536", path);
    else if (!alpha || alpha->kind != JSON_NUMBER || !(alpha->number > 0) || alpha->number > 1e9)
        bad = snprintf(err, errlen, "'%s': lora_alpha is not a number above 0", path);
    else bad = peft_plain_lora(&j, path, err, errlen);
    t->n = -1;
    if (!bad && targets && targets->kind == JSON_ARRAY) {
        if (targets->count > PEFT_NAMES)
            bad = snprintf(err, errlen, "'%s': target_modules names %d modules; a block has at most 7 linear maps", path,
                           targets->count);
        for (int i = 0; !bad && i < targets->count; i++)
            if (!json_array_string(&j, targets, i, t->names[i], sizeof t->names[0]))
                bad = snprintf(err, errlen, "'%s': target_modules' element %d is not a module's name", path, i + 1);
        if (!bad) t->n = targets->count;
    }
    if (!bad) a->rank = (int)r->number, a->alpha = (float)alpha->number;
    json_free(&j);
    free(text);
    return bad ? -1 : 0;
}

// Does target_modules' name `t` name map k (PEFT: the module's name is t, or ends in "." t)?
static int peft_names_map(const char *t, int k) {
    size_t a = strlen(lora_module_names[k]), b = strlen(t);
    return b <= a && !strcmp(lora_module_names[k] + a - b, t) && (a == b || lora_module_names[k][a - b - 1] == '.');
}

// target_modules (a list) against the maps the file holds: each map held named by it, each name a map held.
// 0, or -1 with err.
static int peft_targets_agree(const PeftTargets *t, const GPTConfig *c, unsigned held, const char *path, char *err,
                              size_t errlen) {
    if (t->n < 0) return 0;
    for (int k = lora_first_map(c); k < lora_map_end(c); k++) {
        int named = 0;
        for (int i = 0; i < t->n; i++) named |= peft_names_map(t->names[i], k);
        if (named != (int)((held >> k) & 1))
            return snprintf(err, errlen, "'%s': target_modules %s %s, and the file holds %s adapter: the config and the "
                            "tensors disagree", path, named ? "names" : "does not name", lora_module_names[k],
                            named ? "no such" : "its"), -1;
    }
    for (int i = 0; i < t->n; i++) {
        int any = 0;
        for (int k = lora_first_map(c); k < lora_map_end(c); k++) any |= peft_names_map(t->names[i], k);
        if (!any)
            return snprintf(err, errlen, "'%s': target_modules names '%.60s', which is no linear map of a %s block that "
                            "gptmem adapts", path, t->names[i], is_llama(c) ? "Llama" : "GPT-2"), -1;
    }
    return 0;
}

// The adapters' tensors of DIR/adapter_model.safetensors into m (its header checked), the config's rank
// and alpha into *a, and the maps it holds into a->targets: each map's A (R, in) and B (out, R) in every
// layer of c, or in none; any other tensor refused. 0, or -1 with err naming what does not fit.
int peft_open(StModel *m, const char *dir, const GPTConfig *c, LoraConfig *a, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    m->cfg = *c;
    PeftTargets named;
    if (peft_read_config(dir, a, &named, err, errlen)) return -1;  // (its path's length checked first)
    snprintf(m->files[0], sizeof m->files[0], "%s/adapter_model.safetensors", dir);
    m->nfiles = 1;
    if (st_read_header(m, 0, err, errlen)) return -1;
    qsort(m->t, (size_t)m->nt, sizeof *m->t, st_by_name);
    a->targets = 0;
    int found = 0;
    char name[ST_NAME];
    for (int k = lora_first_map(c); k < lora_map_end(c); k++) {
        LoraMap mp = lora_map(c, k);
        int have = 0;
        for (int l = 0; l < c->layers; l++)
            for (int b = 0; b < 2; b++) {
                peft_name(c, l, k, b, name, sizeof name);
                const StTensor *t = st_find(m, name);
                size_t rows = b ? (size_t)mp.rows : (size_t)a->rank, cols = b ? (size_t)a->rank : (size_t)mp.in;
                if (!t) continue;
                if (t->dtype < 0 || t->rows != rows || t->cols != cols)
                    return snprintf(err, errlen, "'%s': %s is (%zu, %zu); this model's %s adapter at r %d is (%zu, %zu): "
                                    "the adapter is for another model or rank", m->files[0], name, t->rows, t->cols,
                                    lora_map_names[k], a->rank, rows, cols), -1;
                have++;
            }
        if (have && have != 2 * c->layers)
            return snprintf(err, errlen, "'%s' holds %d of the %d A and B tensors of the %s maps (a map's adapter in "
                            "every layer, or in none): the adapter is for another model", m->files[0], have,
                            2 * c->layers, lora_map_names[k]), -1;
        if (have) a->targets |= 1u << k, found += have;
    }
    if (found != m->nt) {
        for (int i = 0; i < m->nt; i++) {
            int ours = 0;
            for (int l = 0; l < c->layers && !ours; l++)
                for (int k = lora_first_map(c); k < lora_map_end(c) && !ours; k++)
                    for (int b = 0; b < 2 && !ours; b++) peft_name(c, l, k, b, name, sizeof name), ours = !strcmp(name, m->t[i].name);
            if (!ours)
                return snprintf(err, errlen, "'%s': %.200s is no LoRA adapter of a %d-layer %s's linear maps: the adapter is "
                                "for another model", m->files[0], m->t[i].name, c->layers, is_llama(c) ? "Llama" : "GPT-2"), -1;
        }
    }
    if (!a->targets) return snprintf(err, errlen, "'%s' holds no adapter", m->files[0]), -1;
    char config[4200];
    snprintf(config, sizeof config, "%s/adapter_config.json", dir);
    return peft_targets_agree(&named, c, a->targets, config, err, errlen);
}

// The adapters' values (core/lora.h's layout for *a, which peft_open filled), a map at a time through `put`.
// 0, or -1 if a read failed.
int peft_read_to(const StModel *m, const GPTConfig *c, const LoraConfig *a, LoraPut put, void *ctx) {
    FILE *f = NULL;
    int open = -1, bad = 0;
    char name[ST_NAME];
    for (int l = 0; l < c->layers && !bad; l++)
        for (int k = 0; k < LORA_MAPS && !bad; k++) {
            if (!lora_targets(a, k)) continue;
            size_t na = (size_t)a->rank * lora_map(c, k).in, nb = (size_t)a->rank * lora_map(c, k).rows;
            float *map = malloc((na + 2 * nb) * sizeof(float)), *rows = map ? map + na + nb : NULL;
            peft_name(c, l, k, 0, name, sizeof name);
            bad = !map || st_read_elems(m, &f, &open, st_find(m, name), 0, map, na);
            peft_name(c, l, k, 1, name, sizeof name);
            bad = bad || st_read_elems(m, &f, &open, st_find(m, name), 0, rows, nb);
            for (size_t r = 0; !bad && r < nb / a->rank; r++)  // (B's rows from the file's order)
                memcpy(map + na + r * a->rank, rows + peft_row(c, k, r) * a->rank, a->rank * sizeof(float));
            if (!bad) put(ctx, lora_offset(c, a, l, k), map, na + nb);
            free(map);
        }
    if (f) fclose(f);
    return bad ? -1 : 0;
}
// Every value of the adapters finite and no larger than --init's weights may be (INIT_WEIGHT_MOST): a NaN
// or 3e38 in a downloaded adapter is a damaged file, named here by tensor before anything runs. 0, or -1 with err.
int peft_check_values(const StModel *m, char *err, size_t errlen) {
    FILE *f = NULL;
    int open = -1, bad = 0;
    for (int i = 0; i < m->nt && !bad; i++) {
        size_t n = m->t[i].rows * m->t[i].cols;
        float *v = malloc(n * sizeof(float));
        bad = !v || st_read_elems(m, &f, &open, &m->t[i], 0, v, n);
        if (bad) snprintf(err, errlen, "'%s': %s could not be read", m->files[0], m->t[i].name);
        for (size_t k = 0; k < n && !bad; k++)
            if (!isfinite(v[k]) || fabsf(v[k]) > INIT_WEIGHT_MOST)
                bad = snprintf(err, errlen, "'%s': %s holds %s (element %zu): no trained adapter does, so the file is "
                               "damaged", m->files[0], m->t[i].name, isnan(v[k]) ? "nan" : isinf(v[k]) ? "an infinite "
                               "value" : "a value past 1e8", k) > 0;
        free(v);
    }
    if (f) fclose(f);
    return bad ? -1 : 0;
}

int peft_read(const StModel *m, const GPTConfig *c, const LoraConfig *a, float *w) {
    return peft_read_to(m, c, a, lora_put_host, w);
}

void peft_close(StModel *m) {
    for (int i = 0; i < m->nt; i++) free(m->t[i].name);
    free(m->t);
    m->t = NULL, m->nt = 0;
}

#endif
