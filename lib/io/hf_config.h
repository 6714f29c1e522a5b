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
// The JSON is read by io/json.h.
#ifndef GPTMEM_HF_CONFIG_H
#define GPTMEM_HF_CONFIG_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "core/config.h"
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

// A field that must be present: a whole number in [lo, hi] into *out. 0, or -1 with err.
static int hf_int(const Json *h, const char *name, int lo, int hi, int *out, char *err, size_t errlen) {
    const JsonField *f = json_field(h, name);
    if (!f) return snprintf(err, errlen, "has no \"%s\"", name), -1;
    if (f->kind != JSON_NUMBER || f->number != floor(f->number) || f->number < lo || f->number > hi)
        return snprintf(err, errlen, "has \"%s\" %g: gptmem takes a whole number from %d to %d", name, f->number, lo,
                        hi), -1;
    *out = (int)f->number;
    return 0;
}

// A field gptmem has no room for unless it holds the value gptmem computes with:
// absent or null, or equal to `want` (a number, or a string with want_text).
static int hf_must(const Json *h, const char *name, double want, const char *want_text, const char *why,
                   char *err, size_t errlen) {
    const JsonField *f = json_field(h, name);
    if (!f || f->kind == JSON_NULL) return 0;
    int ok = want_text ? f->kind == JSON_STRING && !strcmp(f->text, want_text)
                       : (f->kind == JSON_NUMBER || f->kind == JSON_BOOL) && fabs(f->number - want) <= 1e-6 * fabs(want);
    if (ok) return 0;
    if (f->kind == JSON_STRING) return snprintf(err, errlen, "has \"%s\" \"%s\": %s", name, f->text, why), -1;
    return snprintf(err, errlen, "has \"%s\" %g: %s", name, f->number, why), -1;
}

// RoPE's scaling: none, or Llama 3.1's (factor 8, low and high frequency factors 1 and 4, 8192
// original positions), the one gptmem rotates with (cpu/attention.h rope_frequency).
static int hf_rope_scaling(const Json *h, GPTConfig *c, char *err, size_t errlen) {
    const JsonField *f = json_field(h, "rope_scaling");
    if (!f || f->kind == JSON_NULL) return 0;
    const char *why = "gptmem's scaled RoPE is Llama 3.1's (rope_type llama3, factor 8, low_freq_factor 1, "
                      "high_freq_factor 4, original_max_position_embeddings 8192)";
    const JsonField *t = json_field(h, "rope_scaling.rope_type");
    if (!t) t = json_field(h, "rope_scaling.type");
    if (!t || t->kind != JSON_STRING || strcmp(t->text, "llama3"))
        return snprintf(err, errlen, "has \"rope_scaling\" of type \"%s\": %s", t && t->kind == JSON_STRING ? t->text : "?",
                        why), -1;
    if (hf_must(h, "rope_scaling.factor", 8, NULL, why, err, errlen) ||
        hf_must(h, "rope_scaling.low_freq_factor", 1, NULL, why, err, errlen) ||
        hf_must(h, "rope_scaling.high_freq_factor", 4, NULL, why, err, errlen) ||
        hf_must(h, "rope_scaling.original_max_position_embeddings", 8192, NULL, why, err, errlen))
        return -1;
    c->rope_scaled = 1;
    return 0;
}

static int hf_gpt2(const Json *h, GPTConfig *c, char *err, size_t errlen) {
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

static int hf_llama(const Json *h, GPTConfig *c, char *err, size_t errlen) {
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
    if (json_field(h, "num_key_value_heads") && hf_int(h, "num_key_value_heads", 1, c->heads, &c->kv_heads, err, errlen))
        return -1;
    if (json_field(h, "rope_theta") && hf_int(h, "rope_theta", 1, 1000000000, &theta, err, errlen)) return -1;
    c->rope_theta = theta == (int)LLAMA_ROPE_THETA ? 0 : theta;
    const JsonField *tied = json_field(h, "tie_word_embeddings");  // (Hugging Face's default: tied)
    c->untied = tied && tied->kind == JSON_BOOL && tied->number == 0;
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
    if (!strcmp(t->text, "gpt2")) return hf_gpt2(h, c, err, errlen);
    if (!strcmp(t->text, "llama") || !strcmp(t->text, "mistral")) return hf_llama(h, c, err, errlen);
    return snprintf(err, errlen, "has \"model_type\" \"%s\": gptmem builds gpt2, llama and mistral (Llama-shaped) "
                    "models", t->text), -1;
}

#endif
