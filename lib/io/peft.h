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

// The adapters from and into host memory (core/lora.h's LoraGet and LoraPut).
static void lora_get_host(void *ctx, size_t at, float *dst, size_t n) { memcpy(dst, (const float *)ctx + at, n * sizeof(float)); }
static void lora_put_host(void *ctx, size_t at, const float *src, size_t n) { memcpy((float *)ctx + at, src, n * sizeof(float)); }

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

// --lora-init DIR: adapter_config.json's r and lora_alpha (a PEFT LoRA, without DoRA or rsLoRA's other
// scale) into *a. 0, or -1 with err.
static int peft_read_config(const char *dir, LoraConfig *a, char *err, size_t errlen) {
    char path[1200];
    size_t n;
    snprintf(path, sizeof path, "%.1000s/adapter_config.json", dir);
    char *text = st_slurp(path, 1 << 20, &n, err, errlen);
    if (!text) return -1;
    Json j;
    int bad = json_read(&j, text, n);
    free(text);
    if (bad) return snprintf(err, errlen, "'%s' is not JSON gptmem can read (%s)", path, j.why), -1;
    const JsonField *type = json_field(&j, "peft_type"), *r = json_field(&j, "r"), *alpha = json_field(&j, "lora_alpha");
    const JsonField *dora = json_field(&j, "use_dora"), *rs = json_field(&j, "use_rslora");
    if (!type || type->kind != JSON_STRING || strcmp(type->text, "LORA"))
        bad = snprintf(err, errlen, "'%s': peft_type is not \"LORA\": not a LoRA adapter", path);
    else if (!r || r->kind != JSON_NUMBER || !r->whole || r->number < 1 || r->number > 65536)
        bad = snprintf(err, errlen, "'%s': r is not a rank from 1 to 65536", path);
    else if (!alpha || alpha->kind != JSON_NUMBER || !(alpha->number > 0) || alpha->number > 1e9)
        bad = snprintf(err, errlen, "'%s': lora_alpha is not a number above 0", path);
    else if ((dora && dora->number) || (rs && rs->number))
        bad = snprintf(err, errlen, "'%s' is a %s adapter; gptmem trains plain LoRA (scale alpha / r)", path,
                       dora && dora->number ? "DoRA" : "rsLoRA");
    if (!bad) a->rank = (int)r->number, a->alpha = (float)alpha->number;
    json_free(&j);
    return bad ? -1 : 0;
}

// The adapters' tensors of DIR/adapter_model.safetensors into m (its header checked), the config's rank
// and alpha into *a, and the maps it holds into a->targets: each map's A (R, in) and B (out, R) in every
// layer of c, or in none; any other tensor refused. 0, or -1 with err naming what does not fit.
int peft_open(StModel *m, const char *dir, const GPTConfig *c, LoraConfig *a, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    m->cfg = *c;
    snprintf(m->files[0], sizeof m->files[0], "%.1000s/adapter_model.safetensors", dir);
    m->nfiles = 1;
    if (peft_read_config(dir, a, err, errlen) || st_read_header(m, 0, err, errlen)) return -1;
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
    return 0;
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
int peft_read(const StModel *m, const GPTConfig *c, const LoraConfig *a, float *w) {
    return peft_read_to(m, c, a, lora_put_host, w);
}

void peft_close(StModel *m) {
    for (int i = 0; i < m->nt; i++) free(m->t[i].name);
    free(m->t);
    m->t = NULL, m->nt = 0;
}

#endif
