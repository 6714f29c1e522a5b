// io/safetensors_out.h — --export FILE.safetensors: a Hugging Face model
// written from gptmem's weights, io/safetensors.h's names and layouts the
// other way: one F32 file, its tensors in gptmem's order (Hugging Face's parts
// of each, so GPT-2's Conv1D matrices stored (in, out) and Llama's q and k in
// halves), the header last, as --export writes llm.c's file; config.json beside
// it (st_export_config).
#ifndef GPTMEM_SAFETENSORS_OUT_H
#define GPTMEM_SAFETENSORS_OUT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/config.h"
#include "io/files.h"
#include "io/safetensors_model.h"

// Every Hugging Face tensor of c's model, with its data offset; *header: the JSON header (padded to 8
// bytes) and its length. The caller frees both.
static StPart *st_export_layout(const GPTConfig *c, long long **at, char **header, size_t *hn, int *count) {
    StModel *m = calloc(1, sizeof *m);
    m->cfg = *c, m->prefix = "";
    int n = param_tensor_count(c), k = 0;
    StPart *out = malloc(sizeof(StPart) * 3 * n);
    *at = malloc(sizeof(long long) * 3 * n);
    size_t cap = 4096, len = 0;
    char *h = malloc(cap);
    len += snprintf(h, cap, "{\"__metadata__\":{\"format\":\"pt\"}");
    long long data = 0;
    for (int i = 0; i < n; i++) {
        int transposed;
        size_t rows, cols;
        int np = st_parts(m, i, out + k, &transposed, &rows, &cols);
        for (int q = 0; q < np; q++, k++) {
            if (cap - len < 512) h = realloc(h, cap *= 2);
            long long bytes = 4LL * (long long)(out[k].rows * out[k].cols);
            if (out[k].rows == 1)
                len += snprintf(h + len, cap - len, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%zu],\"data_offsets\":[%lld,%lld]}",
                                out[k].name, out[k].cols, data, data + bytes);
            else
                len += snprintf(h + len, cap - len, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%zu,%zu],\"data_offsets\":"
                                "[%lld,%lld]}", out[k].name, out[k].rows, out[k].cols, data, data + bytes);
            (*at)[k] = data, data += bytes;
        }
    }
    if (cap - len < 16) h = realloc(h, cap += 16);
    h[len++] = '}';
    while (len % 8) h[len++] = ' ';
    free(m);
    *header = h, *hn = len, *count = k;
    return out;
}

// The bytes of --export's safetensors file.
long long st_export_bytes(const GPTConfig *c) {
    long long *at;
    char *h;
    size_t hn;
    int n;
    StPart *p = st_export_layout(c, &at, &h, &hn, &n);
    long long bytes = 8 + (long long)hn + at[n - 1] + 4LL * (long long)(p[n - 1].rows * p[n - 1].cols);
    free(p), free(at), free(h);
    return bytes;
}

// The file sized (zeros), so each rank can write its part in any order; its header comes last.
int st_export_begin(const char *tmp, const GPTConfig *c) { return file_of_zeros(tmp, st_export_bytes(c)); }

int st_export_finish(const char *tmp, const GPTConfig *c) {
    long long *at;
    char *h;
    size_t hn;
    int n;
    StPart *p = st_export_layout(c, &at, &h, &hn, &n);
    uint64_t N = hn;
    FILE *f = temp_reopen(tmp);
    int bad = !f || fwrite(&N, 8, 1, f) != 1 || fwrite(h, 1, hn, f) != hn;
    if (f && fclose(f) != 0) bad = 1;
    free(p), free(at), free(h);
    return bad ? -1 : 0;
}

// The weights [lo, hi) of gptmem's flat array, got through get(ctx, at, dst, n) (at counted from lo),
// each written where Hugging Face keeps it: a row's run at a time; a Conv1D matrix's rows, gathered
// from its columns.
int st_export_range(const char *tmp, const GPTConfig *c, size_t lo, size_t hi,
                    void (*get)(const void *ctx, size_t at, float *dst, size_t n), const void *ctx) {
    long long *at;
    char *h;
    size_t hn;
    int count, n = param_tensor_count(c), k = 0, bad = 0;
    StPart *parts = st_export_layout(c, &at, &h, &hn, &count);
    StModel *m = calloc(1, sizeof *m);
    m->cfg = *c, m->prefix = "";
    ParamTensor *pt = malloc(sizeof(ParamTensor) * n);
    param_tensors(c, pt);
    FILE *f = temp_reopen(tmp);
    bad = !f;
    long long data = 8 + (long long)hn;
    for (int i = 0; i < n && !bad; i++) {
        StPart p[3];
        int transposed;
        size_t rows, cols;
        int np = st_parts(m, i, p, &transposed, &rows, &cols), first = k;
        k += np;
        size_t a = pt[i].offset > lo ? pt[i].offset : lo, b = pt[i].offset + pt[i].count < hi ? pt[i].offset + pt[i].count : hi;
        if (b <= a) continue;
        float *v = malloc(sizeof(float) * (b - a));
        get(ctx, a - lo, v, b - a);
        a -= pt[i].offset, b -= pt[i].offset;
        if (transposed) {  // stored (in, out): gptmem's element (r, q) is stored row q's element r
            size_t r0 = (a + cols - 1) / cols, r1 = b / cols > r0 ? b / cols : r0;  // the rows [a, b) holds whole
            float *run = malloc(sizeof(float) * (r1 - r0 + 1));
            for (size_t q = 0; q < cols && r1 > r0 && !bad; q++) {  // a run of each stored row
                for (size_t r = r0; r < r1; r++) run[r - r0] = v[r * cols + q - a];
                bad = fseek(f, data + at[first] + 4LL * (long long)(q * rows + r0), SEEK_SET) != 0 ||
                      fwrite(run, sizeof(float), r1 - r0, f) != r1 - r0;
            }
            for (size_t e = a; e < b && !bad; e++) {  // the parts of rows at the ends, an element at a time
                if (e >= r0 * cols && e < r1 * cols) continue;
                bad = fseek(f, data + at[first] + 4LL * (long long)((e % cols) * rows + e / cols), SEEK_SET) != 0 ||
                      fwrite(v + (e - a), sizeof(float), 1, f) != 1;
            }
            free(run);
        }
        for (size_t e = a; e < b && !bad && !transposed;) {  // each of gptmem's rows: a run of a stored row
            size_t r = e / cols, c0 = e % cols, c1 = b - r * cols < cols ? b - r * cols : cols, row = r, hs = head_size(c);
            int part = 0;
            while (part < np && row >= p[part].rows) row -= p[part].rows, part++;
            if (part < np) {  // (past the parts: a table's padding rows, not stored)
                if (p[part].halves) row = hf_half_row(hs, row);
                bad = fseek(f, data + at[first + part] + 4LL * (long long)(row * p[part].cols + c0), SEEK_SET) != 0 ||
                      fwrite(v + (e - a), sizeof(float), c1 - c0, f) != c1 - c0;
            }
            e += c1 - c0;
        }
        free(v);
    }
    if (f && fclose(f) != 0) bad = 1;
    free(parts), free(at), free(h), free(pt), free(m);
    return bad ? -1 : 0;
}

// config.json for c's model, as Hugging Face's GPT2Config or LlamaConfig write their fields. 0, or -1 if a write failed.
int st_export_config(FILE *f, const GPTConfig *c) {
    if (is_llama(c)) {
        Rope r = cfg_rope(c);
        fprintf(f, "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"model_type\": \"llama\",\n  \"hidden_act\": \"silu\",\n"
                "  \"attention_bias\": false,\n  \"mlp_bias\": false,\n  \"num_hidden_layers\": %d,\n  \"hidden_size\": %d,\n"
                "  \"num_attention_heads\": %d,\n  \"num_key_value_heads\": %d,\n  \"intermediate_size\": %d,\n"
                "  \"vocab_size\": %d,\n  \"max_position_embeddings\": %d,\n  \"rms_norm_eps\": 1e-05,\n"
                "  \"rope_theta\": %.1f,\n  \"rope_scaling\": %s%.0d%s,\n  \"tie_word_embeddings\": %s,\n"
                "  \"torch_dtype\": \"float32\"\n}\n", c->layers, c->channels, c->heads, cfg_kv_heads(c), cfg_ffn(c),
                c->vocab, c->max_seq, r.theta, c->rope_scaled ? "{\"rope_type\": \"llama3\", \"factor\": " : "null", c->rope_scaled,
                c->rope_scaled ? ".0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                "\"original_max_position_embeddings\": 8192}" : "",
                c->untied ? "false" : "true");
    } else {
        fprintf(f, "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n  \"n_layer\": %d,\n"
                "  \"n_head\": %d,\n  \"n_embd\": %d,\n  \"n_positions\": %d,\n  \"n_ctx\": %d,\n  \"vocab_size\": %d,\n"
                "  \"layer_norm_epsilon\": 1e-05,\n  \"activation_function\": \"gelu_new\",\n  \"torch_dtype\": \"float32\"\n}\n",
                c->layers, c->heads, c->channels, c->max_seq, c->max_seq, c->vocab);
    }
    return ferror(f) ? -1 : 0;
}

#endif
