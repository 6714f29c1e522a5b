// io/hf_config.h — a model's shape from Hugging Face's config.json, the file
// every model folder on the Hub carries: GPT-2's fields (n_layer, n_head,
// n_embd, n_positions, vocab_size) or Llama's (num_hidden_layers,
// num_attention_heads, num_key_value_heads, hidden_size, intermediate_size,
// vocab_size, max_position_embeddings, rope_theta, rope_scaling,
// tie_word_embeddings). Mistral's config is Llama's (without a sliding window).
//
// What gptmem cannot express is refused with the field's name, never dropped:
// biases in a Llama's attention or MLP, another activation or norm epsilon, a
// sliding window, experts (MoE), a head size other than C / H, RoPE scaling
// other than Llama 3.1's. Fields that change no arithmetic (token ids, dtype,
// initializer_range, use_cache, ...) are read past.
//
// The JSON is read by a small recursive reader: one object of keys whose
// values are numbers, strings, true, false, null, arrays or objects; the
// top level's scalars and one nested object's (rope_scaling.factor) are kept.
#ifndef GPTMEM_HF_CONFIG_H
#define GPTMEM_HF_CONFIG_H

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/config.h"
#include <sys/stat.h>
#include "io/files.h"

enum { HF_MAX_FIELDS = 256, HF_KEY = 96, HF_NAME = 2 * HF_KEY + 2, HF_TEXT = 96 };
enum { HF_NULL, HF_NUMBER, HF_STRING, HF_BOOL, HF_ARRAY, HF_OBJECT };

typedef struct {
    char name[HF_NAME];  // "vocab_size", or "rope_scaling.factor" inside an object
    int kind;            // HF_*
    double number;       // a number; a bool's 0 or 1
    char text[HF_TEXT];  // a string (cut at HF_TEXT - 1 bytes); an array's first string
} HfField;

typedef struct {
    HfField f[HF_MAX_FIELDS];
    int n;
    const char *start, *p, *end;  // the text, the reader's place in it, its end
    char why[160];        // what is wrong with the JSON, where
} HfConfig;

static void hf_space(HfConfig *h) {
    while (h->p < h->end && isspace((unsigned char)*h->p)) h->p++;
}

static int hf_fail(HfConfig *h, const char *what) {
    if (!h->why[0]) snprintf(h->why, sizeof h->why, "%s at byte %ld", what, (long)(h->p - h->start));
    return -1;
}

// A string at h->p (past its opening quote on return), escapes kept as they are.
static int hf_string(HfConfig *h, char *out, size_t len) {
    size_t k = 0;
    if (h->p >= h->end || *h->p != '"') return hf_fail(h, "a string expected");
    for (h->p++; h->p < h->end && *h->p != '"'; h->p++) {
        if (*h->p == '\\' && h->p + 1 < h->end) h->p++;
        if (out && k + 1 < len) out[k++] = *h->p;
    }
    if (out) out[k] = 0;
    if (h->p >= h->end) return hf_fail(h, "a string never closed");
    h->p++;
    return 0;
}

static int hf_value(HfConfig *h, const char *name, int depth);

// An object's keys and values; those of the top level (depth 0) and of an object in it (depth 1) are kept.
static int hf_object(HfConfig *h, const char *prefix, int depth) {
    h->p++;  // '{'
    hf_space(h);
    if (h->p < h->end && *h->p == '}') return h->p++, 0;
    for (;;) {
        char key[HF_KEY], name[HF_NAME];
        hf_space(h);
        if (hf_string(h, key, sizeof key)) return -1;
        snprintf(name, sizeof name, "%.*s%s%s", HF_KEY, prefix, prefix[0] ? "." : "", key);
        hf_space(h);
        if (h->p >= h->end || *h->p != ':') return hf_fail(h, "':' expected after a key");
        h->p++;
        if (hf_value(h, name, depth)) return -1;
        hf_space(h);
        if (h->p < h->end && *h->p == ',') { h->p++; continue; }
        if (h->p < h->end && *h->p == '}') return h->p++, 0;
        return hf_fail(h, "',' or '}' expected");
    }
}

static int hf_value(HfConfig *h, const char *name, int depth) {
    if (depth > 32) return hf_fail(h, "nested too deep");
    hf_space(h);
    if (h->p >= h->end) return hf_fail(h, "a value expected");
    HfField v = {.kind = HF_NULL};
    snprintf(v.name, sizeof v.name, "%s", name);
    char c = *h->p;
    if (c == '{') {
        v.kind = HF_OBJECT;
        if (hf_object(h, depth == 0 ? name : "", depth + 1)) return -1;
    } else if (c == '[') {
        v.kind = HF_ARRAY;
        h->p++;
        hf_space(h);
        if (h->p < h->end && *h->p == ']') h->p++;
        else
            for (int k = 0;; k++) {
                hf_space(h);
                if (k == 0 && h->p < h->end && *h->p == '"') { if (hf_string(h, v.text, sizeof v.text)) return -1; }
                else if (hf_value(h, "", depth + 2)) return -1;
                hf_space(h);
                if (h->p < h->end && *h->p == ',') { h->p++; continue; }
                if (h->p < h->end && *h->p == ']') { h->p++; break; }
                return hf_fail(h, "',' or ']' expected");
            }
    } else if (c == '"') {
        v.kind = HF_STRING;
        if (hf_string(h, v.text, sizeof v.text)) return -1;
    } else if (!strncmp(h->p, "true", 4) || !strncmp(h->p, "false", 5)) {
        v.kind = HF_BOOL, v.number = c == 't';
        h->p += c == 't' ? 4 : 5;
    } else if (!strncmp(h->p, "null", 4)) {
        h->p += 4;
    } else {
        char *after;
        v.kind = HF_NUMBER, v.number = strtod(h->p, &after);
        if (after == h->p || after > h->end) return hf_fail(h, "a value expected");
        h->p = after;
    }
    if (depth <= 1 && name[0] && h->n < HF_MAX_FIELDS) h->f[h->n++] = v;
    return 0;
}

// The field named `name`, or NULL.
const HfField *hf_field(const HfConfig *h, const char *name) {
    for (int i = 0; i < h->n; i++)
        if (!strcmp(h->f[i].name, name)) return &h->f[i];
    return NULL;
}

// Read `path` (a config.json, or a folder holding one) into h. 0, or -1 with
// the problem in err. The path read is left in `used`.
int hf_config_read(HfConfig *h, const char *path, char *used, size_t used_len, char *err, size_t errlen) {
    struct stat st;
    snprintf(used, used_len, "%s", path);
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) snprintf(used, used_len, "%s/config.json", path);
    const char *why = unreadable_why(used);
    if (why) return snprintf(err, errlen, "cannot read '%s': %s", used, why), -1;
    FILE *f = fopen(used, "rb");
    if (!f) return snprintf(err, errlen, "cannot open '%s'", used), -1;
    enum { MOST = 1 << 20 };
    char *text = malloc(MOST);
    size_t n = fread(text, 1, MOST, f);
    int too_long = n == MOST;
    fclose(f);
    memset(h, 0, sizeof *h);
    h->start = h->p = text, h->end = text + n;
    hf_space(h);
    int bad = too_long || h->p >= h->end || *h->p != '{' || hf_object(h, "", 0);
    if (!bad) {
        hf_space(h);
        bad = h->p != h->end && hf_fail(h, "text after the object");
    }
    free(text);
    if (too_long) return snprintf(err, errlen, "'%s' is over 1 MiB: not a model's config.json", used), -1;
    if (bad) return snprintf(err, errlen, "'%s' is not JSON gptmem can read (%s)", used, h->why[0] ? h->why : "'{' expected"), -1;
    return 0;
}

// --- the shape ------------------------------------------------------------------------

// A field that must be present: a whole number in [lo, hi] into *out. 0, or -1 with err.
static int hf_int(const HfConfig *h, const char *name, int lo, int hi, int *out, char *err, size_t errlen) {
    const HfField *f = hf_field(h, name);
    if (!f) return snprintf(err, errlen, "has no \"%s\"", name), -1;
    if (f->kind != HF_NUMBER || f->number != floor(f->number) || f->number < lo || f->number > hi)
        return snprintf(err, errlen, "has \"%s\" %g: gptmem takes a whole number from %d to %d", name, f->number, lo,
                        hi), -1;
    *out = (int)f->number;
    return 0;
}

// A field gptmem has no room for unless it holds the value gptmem computes with:
// absent or null, or equal to `want` (a number, or a string with want_text).
static int hf_must(const HfConfig *h, const char *name, double want, const char *want_text, const char *why,
                   char *err, size_t errlen) {
    const HfField *f = hf_field(h, name);
    if (!f || f->kind == HF_NULL) return 0;
    int ok = want_text ? f->kind == HF_STRING && !strcmp(f->text, want_text)
                       : (f->kind == HF_NUMBER || f->kind == HF_BOOL) && fabs(f->number - want) <= 1e-6 * fabs(want);
    if (ok) return 0;
    if (f->kind == HF_STRING) return snprintf(err, errlen, "has \"%s\" \"%s\": %s", name, f->text, why), -1;
    return snprintf(err, errlen, "has \"%s\" %g: %s", name, f->number, why), -1;
}

// RoPE's scaling: none, or Llama 3.1's (factor 8, low and high frequency factors 1 and 4, 8192
// original positions), the one gptmem rotates with (cpu/attention.h rope_frequency).
static int hf_rope_scaling(const HfConfig *h, GPTConfig *c, char *err, size_t errlen) {
    const HfField *f = hf_field(h, "rope_scaling");
    if (!f || f->kind == HF_NULL) return 0;
    const char *why = "gptmem's scaled RoPE is Llama 3.1's (rope_type llama3, factor 8, low_freq_factor 1, "
                      "high_freq_factor 4, original_max_position_embeddings 8192)";
    const HfField *t = hf_field(h, "rope_scaling.rope_type");
    if (!t) t = hf_field(h, "rope_scaling.type");
    if (!t || t->kind != HF_STRING || strcmp(t->text, "llama3"))
        return snprintf(err, errlen, "has \"rope_scaling\" of type \"%s\": %s", t && t->kind == HF_STRING ? t->text : "?",
                        why), -1;
    if (hf_must(h, "rope_scaling.factor", 8, NULL, why, err, errlen) ||
        hf_must(h, "rope_scaling.low_freq_factor", 1, NULL, why, err, errlen) ||
        hf_must(h, "rope_scaling.high_freq_factor", 4, NULL, why, err, errlen) ||
        hf_must(h, "rope_scaling.original_max_position_embeddings", 8192, NULL, why, err, errlen))
        return -1;
    c->rope_scaled = 1;
    return 0;
}

static int hf_gpt2(const HfConfig *h, GPTConfig *c, char *err, size_t errlen) {
    *c = (GPTConfig){.arch = ARCH_GPT2};
    if (hf_int(h, "n_layer", 1, 1024, &c->layers, err, errlen) || hf_int(h, "n_head", 1, 1024, &c->heads, err, errlen) ||
        hf_int(h, "n_embd", 1, 65536, &c->channels, err, errlen) ||
        hf_int(h, "n_positions", 1, 65536, &c->max_seq, err, errlen) ||
        hf_int(h, "vocab_size", 1, 1 << 20, &c->vocab, err, errlen))
        return -1;
    const char *why = "gptmem's GPT-2 has an MLP of 4C, the tanh GELU (gelu_new), layernorm's 1e-5, attention scaled by "
                      "1/sqrt(hs) and no cross-attention";
    return hf_must(h, "n_inner", 4.0 * c->channels, NULL, why, err, errlen) ||
                   hf_must(h, "activation_function", 0, "gelu_new", why, err, errlen) ||
                   hf_must(h, "layer_norm_epsilon", 1e-5, NULL, why, err, errlen) ||
                   hf_must(h, "scale_attn_weights", 1, NULL, why, err, errlen) ||
                   hf_must(h, "scale_attn_by_inverse_layer_idx", 0, NULL, why, err, errlen) ||
                   hf_must(h, "add_cross_attention", 0, NULL, why, err, errlen)
               ? -1
               : 0;
}

static int hf_llama(const HfConfig *h, GPTConfig *c, char *err, size_t errlen) {
    *c = (GPTConfig){.arch = ARCH_LLAMA};
    int theta = 0;
    if (hf_int(h, "num_hidden_layers", 1, 1024, &c->layers, err, errlen) ||
        hf_int(h, "num_attention_heads", 1, 1024, &c->heads, err, errlen) ||
        hf_int(h, "hidden_size", 1, 65536, &c->channels, err, errlen) ||
        hf_int(h, "intermediate_size", 1, 1 << 20, &c->ffn, err, errlen) ||
        hf_int(h, "vocab_size", 1, 1 << 20, &c->vocab, err, errlen) ||
        hf_int(h, "max_position_embeddings", 1, 65536, &c->max_seq, err, errlen))
        return -1;
    c->kv_heads = c->heads;
    if (hf_field(h, "num_key_value_heads") && hf_int(h, "num_key_value_heads", 1, c->heads, &c->kv_heads, err, errlen))
        return -1;
    if (hf_field(h, "rope_theta") && hf_int(h, "rope_theta", 1, 1000000000, &theta, err, errlen)) return -1;
    c->rope_theta = theta == (int)LLAMA_ROPE_THETA ? 0 : theta;
    const HfField *tied = hf_field(h, "tie_word_embeddings");  // (Hugging Face's default: tied)
    c->untied = tied && tied->kind == HF_BOOL && tied->number == 0;
    const char *why = "gptmem's Llama has no biases, SwiGLU (silu), RMSNorm's 1e-5, attention over all positions, "
                      "one MLP (no experts) and a head size of hidden_size / num_attention_heads";
    if (hf_must(h, "attention_bias", 0, NULL, why, err, errlen) || hf_must(h, "mlp_bias", 0, NULL, why, err, errlen) ||
        hf_must(h, "hidden_act", 0, "silu", why, err, errlen) ||
        hf_must(h, "rms_norm_eps", LLAMA_NORM_EPS, NULL, why, err, errlen) ||
        hf_must(h, "sliding_window", 0, "", why, err, errlen) ||
        hf_must(h, "num_local_experts", 1, NULL, why, err, errlen) ||
        hf_must(h, "num_experts", 1, NULL, why, err, errlen) ||
        hf_must(h, "head_dim", c->channels % c->heads ? -1 : c->channels / c->heads, NULL, why, err, errlen))
        return -1;
    return hf_rope_scaling(h, c, err, errlen);
}

// The model a config describes, into *c: 0, or -1 with the problem (the field, what to do) in err.
int hf_config_model(const HfConfig *h, GPTConfig *c, char *err, size_t errlen) {
    const HfField *t = hf_field(h, "model_type");
    if (!t || t->kind != HF_STRING) return snprintf(err, errlen, "has no \"model_type\" (gpt2, llama or mistral)"), -1;
    if (!strcmp(t->text, "gpt2")) return hf_gpt2(h, c, err, errlen);
    if (!strcmp(t->text, "llama") || !strcmp(t->text, "mistral")) return hf_llama(h, c, err, errlen);
    return snprintf(err, errlen, "has \"model_type\" \"%s\": gptmem builds gpt2, llama and mistral (Llama-shaped) "
                    "models", t->text), -1;
}

#endif
