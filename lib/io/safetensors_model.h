// io/safetensors_model.h — gptmem's tensors from a Hugging Face model's (io/safetensors.h reads its files):
// each of core/config.h's tensors as the parts Hugging Face stores it in (GPT-2's Conv1D transposed, a
// Llama's q, k, v stacked, its q and k rows interleaved), read a run of a row at a time, and the checks
// that the folder holds exactly the model its config.json describes (st_model_open).
#ifndef GPTMEM_SAFETENSORS_MODEL_H
#define GPTMEM_SAFETENSORS_MODEL_H

#include "io/safetensors.h"

// --- gptmem's tensors, from Hugging Face's ---------------------------------------------

// A Hugging Face tensor that makes (part of) one of gptmem's, and the shape it must have as stored.
typedef struct {
    char name[ST_NAME];
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
            *row = p[k].halves ? hf_half_row(hs, r) : r;
            return st_find(m, p[k].name);
        }
    return NULL;
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

// Do two stored tensors hold the same values (as fp32), a chunk at a time? 1 or 0; -1 if a read failed.
static int st_same_values(const StModel *m, const StTensor *a, const StTensor *b) {
    size_t n = a->rows * a->cols, chunk = 1 << 16;
    if (n != b->rows * b->cols) return 0;
    float *x = malloc(sizeof(float) * chunk), *y = malloc(sizeof(float) * chunk);
    FILE *fa = NULL, *fb = NULL;
    int oa = -1, ob = -1, same = x && y ? 1 : -1;
    for (size_t e = 0; e < n && same == 1; e += chunk) {
        size_t k = n - e < chunk ? n - e : chunk;
        if (st_read_elems(m, &fa, &oa, a, e, x, k) || st_read_elems(m, &fb, &ob, b, e, y, k)) same = -1;
        else same = !memcmp(x, y, k * sizeof(float));
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    free(x), free(y);
    return same;
}

// Is every tensor gptmem reads there, with the shape the config says, and every other one a buffer (or a tied
// head's copy of the embedding)?
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
            if (!t)
                bad = snprintf(err, errlen, "'%s' has no tensor %s%s", dir, p[k].name, strcmp(p[k].name, "lm_head.weight") ? "" :
                               " (its config.json leaves the head untied: tie_word_embeddings false, which a Llama's "
                               "config means when it does not say, as transformers reads it)");
            else if (t->rows != p[k].rows || t->cols != p[k].cols)
                bad = snprintf(err, errlen, "'%s': tensor %s is (%zu, %zu); the config's model has (%zu, %zu) there",
                               dir, p[k].name, t->rows, t->cols, p[k].rows, p[k].cols);
            else used[t - m->t] = 1;
        }
    }
    const StTensor *head = st_find(m, "lm_head.weight"), *table = st_find(m, is_llama(c) ? "model.embed_tokens.weight" : "wte.weight");
    if (!table && !is_llama(c)) table = st_find(m, "transformer.wte.weight");
    if (!bad && head && !c->untied && table) {  // a tied head stored beside the embedding: its copy, or refused
        int same = st_same_values(m, head, table);
        if (same < 0) bad = snprintf(err, errlen, "cannot read '%s'", m->files[head->file]);
        else if (!same)
            bad = snprintf(err, errlen, "'%s' has lm_head.weight, and it differs from %s, while its config.json ties the "
                           "head to the embedding (tie_word_embeddings true%s): two models in one folder; set "
                           "\"tie_word_embeddings\": false for the model the file holds", dir, table->name,
                           is_llama(c) ? "" : ": GPT-2 always ties");
        else used[head - m->t] = 1;
    }
    for (int i = 0; i < m->nt && !bad; i++) {
        const char *nm = m->t[i].name;
        if (!used[i] && !st_is_buffer(nm))
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
    char dir[ST_PATH], used[ST_PATH + 16], why[ST_PATH + 200];
    if (st_files(m, path, dir, sizeof dir, err, errlen)) return -1;
    Json h;
    if (hf_config_read(&h, dir, used, sizeof used, why, sizeof why))
        return snprintf(err, errlen, "'%s' needs its config.json beside it: %s", path, why), -1;
    int bad = hf_config_model(&h, &m->cfg, why, sizeof why);
    json_free(&h);
    if (bad) return snprintf(err, errlen, "'%s' %s", used, why), -1;
    for (int k = 0; k < m->nfiles; k++)
        if (st_read_header(m, k, err, errlen)) return -1;
    if (m->nt) qsort(m->t, (size_t)m->nt, sizeof *m->t, st_by_name);
    for (int i = 1; i < m->nt; i++)
        if (!strcmp(m->t[i].name, m->t[i - 1].name))
            return snprintf(err, errlen, "'%s' has tensor %.200s twice (in '%s' and '%s')", dir, m->t[i].name,
                            m->files[m->t[i - 1].file], m->files[m->t[i].file]), -1;
    return st_check(m, dir, err, errlen);
}

void st_model_close(StModel *m) {
    for (int i = 0; i < m->nt; i++) free(m->t[i].name);
    free(m->t);
    m->t = NULL, m->nt = 0;
}

#endif
