// io/hf_config.h — a model's shape from Hugging Face's config.json, the file
// every model folder on the Hub carries: GPT-2's fields (n_layer, n_head,
// n_embd, n_positions, vocab_size) or Llama's (num_hidden_layers,
// num_attention_heads, num_key_value_heads, hidden_size, intermediate_size,
// vocab_size, max_position_embeddings, rope_theta, rope_scaling,
// tie_word_embeddings). Mistral's config is Llama's (without a sliding window).
//
// A model is what its file says, as transformers reads it: a field that is
// absent (or null) takes the default of transformers' config class for that
// model_type (GPT2Config, LlamaConfig, MistralConfig: the tables below, and
// doc/llama.md's), so a Llama without tie_word_embeddings is untied, as
// transformers builds it, and one without rms_norm_eps has 1e-6 (which gptmem
// refuses, computing with 1e-5). What gptmem cannot express is refused with
// the field's name, never dropped: biases in a Llama's attention or MLP,
// another activation or norm epsilon, a sliding window, experts (MoE), a head
// size other than C / H, RoPE scaling other than Llama 3.1's, GPT-2 untied.
// Fields that change no arithmetic (token ids, dtype, initializer_range,
// use_cache, ...) are read past.
//
// The JSON is read by io/json.h.
#ifndef GPTMEM_HF_CONFIG_H
#define GPTMEM_HF_CONFIG_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "core/config.h"
#include "core/sizes.h"
#include "io/files.h"
#include "io/json.h"

// Read `path` (a config.json, or a folder holding one) into h. 0, or -1 with
// the problem in err. The path read is left in `used`. (json_free(h) after.)
int hf_config_read(Json *h, const char *path, char *used, size_t used_len, char *err, size_t errlen) {
    struct stat st;
    memset(h, 0, sizeof *h);
    snprintf(used, used_len, "%s", path);
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) snprintf(used, used_len, "%s/config.json", path);
    const char *why = unreadable_why(used);
    if (why) return snprintf(err, errlen, "cannot read '%s': %s", used, why), -1;
    FILE *f = fopen(used, "rb");
    if (!f) return snprintf(err, errlen, "cannot open '%s'", used), -1;
    enum { MOST = 1 << 20 };
    char *text = malloc(MOST);
    size_t n = fread(text, 1, MOST, f);
    fclose(f);
    int too_long = n == MOST, bad = !too_long && json_read(h, text, n);
    free(text);
    if (too_long) return snprintf(err, errlen, "'%s' is over 1 MiB: not a model's config.json", used), -1;
    if (bad) return snprintf(err, errlen, "'%s' is not JSON gptmem can read (%s)", used, h->why), -1;
    return 0;
}

// --- the shape ------------------------------------------------------------------------

// transformers' default for a field of a config class: a number (a bool as 0 or 1) or a string.
typedef struct {
    const char *field;
    double value;
    const char *text;
} HfDefault;

// The defaults of the fields gptmem reads, as transformers' config classes set them (n_inner,
// num_key_value_heads and head_dim default to what the other fields make: 4 n_embd, the heads, C / H).
static const HfDefault hf_gpt2_defaults[] = {
    {"vocab_size", 50257, NULL}, {"n_positions", 1024, NULL}, {"n_embd", 768, NULL}, {"n_layer", 12, NULL},
    {"n_head", 12, NULL}, {"activation_function", 0, "gelu_new"}, {"layer_norm_epsilon", 1e-5, NULL},
    {"scale_attn_weights", 1, NULL}, {"scale_attn_by_inverse_layer_idx", 0, NULL}, {"add_cross_attention", 0, NULL},
    {"tie_word_embeddings", 1, NULL}, {NULL, 0, NULL}};
static const HfDefault hf_llama_defaults[] = {
    {"vocab_size", 32000, NULL}, {"hidden_size", 4096, NULL}, {"intermediate_size", 11008, NULL},
    {"num_hidden_layers", 32, NULL}, {"num_attention_heads", 32, NULL}, {"hidden_act", 0, "silu"},
    {"max_position_embeddings", 2048, NULL}, {"rms_norm_eps", 1e-6, NULL}, {"tie_word_embeddings", 0, NULL},
    {"rope_theta", 10000, NULL}, {"attention_bias", 0, NULL}, {"mlp_bias", 0, NULL}, {NULL, 0, NULL}};
static const HfDefault hf_mistral_defaults[] = {
    {"vocab_size", 32000, NULL}, {"hidden_size", 4096, NULL}, {"intermediate_size", 14336, NULL},
    {"num_hidden_layers", 32, NULL}, {"num_attention_heads", 32, NULL}, {"num_key_value_heads", 8, NULL},
    {"hidden_act", 0, "silu"}, {"max_position_embeddings", 131072, NULL}, {"rms_norm_eps", 1e-6, NULL},
    {"tie_word_embeddings", 0, NULL}, {"rope_theta", 10000, NULL}, {"sliding_window", 4096, NULL}, {NULL, 0, NULL}};

// A config read with its class's defaults.
typedef struct {
    const Json *json;
    const HfDefault *defaults;
    const char *cls;  // "LlamaConfig", ...
} HfConfig;

// A field as transformers reads it: the file's, or (absent or null) the class's default, marked by
// *dflt's name; NULL when the class has none.
static const JsonField *hf_field(const HfConfig *h, const char *name, JsonField *dflt) {
    const JsonField *f = json_field(h->json, name);
    if (f && f->kind != JSON_NULL) return f;
    for (const HfDefault *d = h->defaults; d->field; d++)
        if (!strcmp(d->field, name)) {
            *dflt = (JsonField){.name = "(default)", .kind = d->text ? JSON_STRING : JSON_NUMBER, .number = d->value,
                                .text = d->text ? d->text : "", .whole = 1};
            return dflt;
        }
    return NULL;
}

// "has "name" V" or, for a default, "has no "name" (LlamaConfig's default then: V)"; into buf.
static const char *hf_said(const HfConfig *h, const char *name, const JsonField *f, char *buf, size_t len) {
    char v[300];
    if (f->kind == JSON_STRING) snprintf(v, sizeof v, "\"%.200s\"", f->text);
    else snprintf(v, sizeof v, "%g", f->number);
    if (!strcmp(f->name, "(default)")) snprintf(buf, len, "has no \"%s\" (%s's default then: %s)", name, h->cls, v);
    else snprintf(buf, len, "has \"%s\" %s", name, v);
    return buf;
}

// A whole number in [lo, hi] into *out: the file's, or the class's default. 0, or -1 with err.
static int hf_int(const HfConfig *h, const char *name, int lo, int hi, int *out, char *err, size_t errlen) {
    JsonField d;
    char said[400];
    const JsonField *f = hf_field(h, name, &d);
    if (!f) return snprintf(err, errlen, "has no \"%s\"", name), -1;
    if (f->kind != JSON_NUMBER || f->number != floor(f->number) || f->number < lo || f->number > hi)
        return snprintf(err, errlen, "%s: gptmem takes a whole number from %d to %d", hf_said(h, name, f, said, sizeof said),
                        lo, hi), -1;
    *out = (int)f->number;
    return 0;
}

// A field gptmem has no room for unless it holds the value gptmem computes with, `want` (a number,
// or a string with want_text): the file's value, or the class's default; absent with no default: fine.
static int hf_must(const HfConfig *h, const char *name, double want, const char *want_text, const char *why,
                   char *err, size_t errlen) {
    JsonField d;
    char said[400];
    const JsonField *f = hf_field(h, name, &d);
    if (!f) return 0;
    int ok = want_text ? f->kind == JSON_STRING && !strcmp(f->text, want_text)
                       : (f->kind == JSON_NUMBER || f->kind == JSON_BOOL) && fabs(f->number - want) <= 1e-6 * fabs(want);
    if (ok) return 0;
    return snprintf(err, errlen, "%s: %s", hf_said(h, name, f, said, sizeof said), why), -1;
}

// RoPE's scaling: none, or Llama 3.1's and 3.2's (rope_type llama3: factor 8 or 32, low and high
// frequency factors 1 and 4, 8192 original positions), the ones gptmem rotates with
// (cpu/attention.h rope_frequency).
static int hf_rope_scaling(const HfConfig *hc, GPTConfig *c, char *err, size_t errlen) {
    const Json *h = hc->json;
    const JsonField *f = json_field(h, "rope_scaling");
    if (!f || f->kind == JSON_NULL) return 0;
    const char *why = "gptmem's scaled RoPE is Llama 3.1's and 3.2's (rope_type llama3, factor 8 or 32, "
                      "low_freq_factor 1, high_freq_factor 4, original_max_position_embeddings 8192)";
    const JsonField *t = json_field(h, "rope_scaling.rope_type");
    if (!t) t = json_field(h, "rope_scaling.type");
    if (!t || t->kind != JSON_STRING || strcmp(t->text, "llama3"))
        return snprintf(err, errlen, "has \"rope_scaling\" of type \"%s\": %s", t && t->kind == JSON_STRING ? t->text : "?",
                        why), -1;
    const JsonField *factor = json_field(h, "rope_scaling.factor");
    int k = factor && factor->kind == JSON_NUMBER && factor->number == 32 ? 32 : 8;  // (else refused as not 8 below)
    if (hf_must(hc, "rope_scaling.factor", k, NULL, why, err, errlen) ||
        hf_must(hc, "rope_scaling.low_freq_factor", 1, NULL, why, err, errlen) ||
        hf_must(hc, "rope_scaling.high_freq_factor", 4, NULL, why, err, errlen) ||
        hf_must(hc, "rope_scaling.original_max_position_embeddings", 8192, NULL, why, err, errlen))
        return -1;
    c->rope_scaled = k;
    return 0;
}

static int hf_gpt2(const HfConfig *h, GPTConfig *c, char *err, size_t errlen) {
    *c = (GPTConfig){.arch = ARCH_GPT2};
    if (hf_int(h, "n_layer", 1, 1024, &c->layers, err, errlen) || hf_int(h, "n_head", 1, 1024, &c->heads, err, errlen) ||
        hf_int(h, "n_embd", 1, 65536, &c->channels, err, errlen) ||
        hf_int(h, "n_positions", 1, MAX_POSITIONS, &c->max_seq, err, errlen) ||
        hf_int(h, "vocab_size", 1, 1 << 20, &c->vocab, err, errlen))
        return -1;
    const char *why = "gptmem's GPT-2 has an MLP of 4C, the tanh GELU (gelu_new), layernorm's 1e-5, attention scaled by "
                      "1/sqrt(hs), no cross-attention and its head tied to the embedding";
    return hf_must(h, "n_inner", 4.0 * c->channels, NULL, why, err, errlen) ||
                   hf_must(h, "tie_word_embeddings", 1, NULL, why, err, errlen) ||
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
        hf_int(h, "max_position_embeddings", 1, MAX_POSITIONS, &c->max_seq, err, errlen))
        return -1;
    c->kv_heads = c->heads;  // (LlamaConfig's default: as many as the query heads)
    JsonField d;
    if (hf_field(h, "num_key_value_heads", &d) && hf_int(h, "num_key_value_heads", 1, c->heads, &c->kv_heads, err, errlen))
        return -1;
    if (hf_int(h, "rope_theta", 1, 1000000000, &theta, err, errlen)) return -1;
    c->rope_theta = theta == (int)LLAMA_ROPE_THETA ? 0 : theta;
    const JsonField *tied = hf_field(h, "tie_word_embeddings", &d);
    if (tied->kind != JSON_BOOL && tied->kind != JSON_NUMBER)
        return snprintf(err, errlen, "has \"tie_word_embeddings\" that is no bool"), -1;
    c->untied = tied->number == 0;
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
int hf_config_model(const Json *h, GPTConfig *c, char *err, size_t errlen) {
    const JsonField *t = json_field(h, "model_type");
    if (!t || t->kind != JSON_STRING) return snprintf(err, errlen, "has no \"model_type\" (gpt2, llama or mistral)"), -1;
    HfConfig gpt2 = {h, hf_gpt2_defaults, "GPT2Config"}, llama = {h, hf_llama_defaults, "LlamaConfig"},
             mistral = {h, hf_mistral_defaults, "MistralConfig"};
    if (!strcmp(t->text, "gpt2")) return hf_gpt2(&gpt2, c, err, errlen);
    if (!strcmp(t->text, "llama")) return hf_llama(&llama, c, err, errlen);
    if (!strcmp(t->text, "mistral")) return hf_llama(&mistral, c, err, errlen);
    return snprintf(err, errlen, "has \"model_type\" \"%s\": gptmem builds gpt2, llama and mistral (Llama-shaped) "
                    "models", t->text), -1;
}

#endif
