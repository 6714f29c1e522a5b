// core/config.h — the model's shape and the flat parameter layout every part
// of gptmem shares: the config and its presets, the padded vocabulary, where
// each layer, op and tensor sits in the one parameter array, and the GPT-2
// init. No device, no allocator: the CPU and GPU models, the predictor and
// the optimizer all read it.
//
// Letters: C channels, H heads, L layers, V vocabulary, Vp = V padded to a
// multiple of 64, maxT learned positions.
#ifndef GPTMEM_CONFIG_H
#define GPTMEM_CONFIG_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "core/rng.h"

// ---------------------------------------------------------------------------
// Configuration

typedef struct {
    int layers;    // L
    int channels;  // C
    int heads;     // H
    int vocab;     // V: real vocabulary size (256 for the byte tokenizer)
    int max_seq;   // maxT: the longest sequence (GPT-2 learns a position embedding for each)
    // The fields below are 0 for GPT-2, so {L, C, H, V, maxT} is a GPT-2 config.
    int arch;      // ARCH_GPT2 or ARCH_LLAMA (RMSNorm, rotary positions, SwiGLU, no biases)
    int kv_heads;  // KVH: key-value heads, each shared by H / KVH query heads (0: H, one each)
    int ffn;       // F: the MLP's hidden width (0: 4C, GPT-2's)
    int untied;    // 1: the LM head is a matrix of its own after the final norm; 0: it is wte
    int rope_scaled;  // Llama 3.1's and 3.2's stretched rotary frequencies: 0 none, else the factor (8: Llama 3.1,
                      // llm.c's use_scaled_rope; 32: Llama 3.2's 1B and 3B; cfg_rope)
    int rope_theta;   // Llama: the rotary base theta (0: Llama 3's LLAMA_ROPE_THETA; SmolLM2's is 100000)
    int head_dim;     // hs, the channels of a head (0: C / H). Set where the heads are not C / H wide: a rank's
                      // share of a layer under --tp (parallel/tensor.h) holds H / t heads of the model's hs
    int seq_split;    // the rows of the residual path a rank holds: N / seq_split of a micro-batch's N (0 or 1:
                      // all of them; --sp: a share's 1/t, parallel/tensor.h)
    int vocab_split;  // the vocabulary's rows of the embedding and the LM head a rank holds: a band of Vp /
                      // vocab_split of them (0 or 1: all; a share under --tp: 1/t, parallel/tensor.h)
} GPTConfig;

enum { ARCH_GPT2, ARCH_LLAMA };
int is_llama(const GPTConfig *c) { return c->arch == ARCH_LLAMA; }
int cfg_kv_heads(const GPTConfig *c) { return c->kv_heads ? c->kv_heads : c->heads; }
int cfg_ffn(const GPTConfig *c) { return c->ffn ? c->ffn : 4 * c->channels; }
// The head size hs = C / H: the channels of every query, key and value head.
int head_size(const GPTConfig *c) { return c->head_dim ? c->head_dim : c->channels / c->heads; }
// The attention's output width, H hs: its heads side by side, the output projection's input (C, but for
// a rank's share of the heads under --tp).
size_t attn_width(const GPTConfig *c) { return (size_t)c->heads * head_size(c); }
// The key-value heads' width KVH hs: a row of the keys (or values), what the KV cache keeps of a
// position (GPT-2: C).
size_t kv_width(const GPTConfig *c) { return (size_t)cfg_kv_heads(c) * head_size(c); }
// The width of a row of qkv: H query heads, then KVH key and KVH value heads, of hs channels (GPT-2: 3C).
size_t qkv_width(const GPTConfig *c) { return (size_t)(c->heads + 2 * cfg_kv_heads(c)) * head_size(c); }
// The heads RoPE rotates in a row of qkv (Llama): the H queries and the KVH keys.
int rope_heads(const GPTConfig *c) { return c->heads + cfg_kv_heads(c); }
// A Llama's q or k: gptmem's row r (a head's pair j in rows 2j, 2j + 1) is Hugging Face's row hf_half_row(hs, r)
// (pair j in rows j, j + hs/2 of the head).
size_t hf_half_row(size_t hs, size_t r) { return r / hs * hs + (r % hs % 2) * (hs / 2) + r % hs / 2; }
// --tp t: a rank's share of model c (parallel/tensor.h splits every layer so): H/t query heads and KVH/t
// key-value heads of the model's hs channels, F/t of the MLP's hidden width, and a band of Vp/t of the
// vocabulary's rows of the embedding and the LM head (vocab_split; V, the real vocabulary, stays the model's);
// the channels and the layers whole. A model of its own shape, which the ops, the buffers and the predictor read as any.
GPTConfig tp_share(const GPTConfig *c, int t) {
    GPTConfig s = *c;
    if (t <= 1) return s;
    s.head_dim = head_size(c);
    s.heads = c->heads / t;
    s.kv_heads = cfg_kv_heads(c) / t;
    s.ffn = cfg_ffn(c) / t;
    s.vocab_split = t;
    return s;
}
// The rows a rank holds of a micro-batch's N on the residual path (the norms, their inputs and outputs):
// all of them, or under --sp its slice of N/t.
size_t seq_rows(const GPTConfig *c, size_t N) { return c->seq_split > 1 ? N / c->seq_split : N; }
// Llama's constants: RMSNorm's epsilon and the rotary base theta (Llama 3's: 1e-5 and 500000).
#define LLAMA_NORM_EPS 1e-5f
#define LLAMA_ROPE_THETA 500000.0f

// The rotary position embedding of a model: its base theta, and the factor its slow frequencies
// are stretched by (0: none; Llama 3.1's 8, Llama 3.2's 32: cpu/attention.h rope_frequency).
typedef struct {
    float theta;
    int scaled;
} Rope;
Rope cfg_rope(const GPTConfig *c) {
    return (Rope){c->rope_theta ? (float)c->rope_theta : LLAMA_ROPE_THETA, c->rope_scaled};
}

typedef struct {
    const char *name;
    GPTConfig cfg;
    const char *note;
} ModelPreset;

const ModelPreset model_presets[] = {
    {"small", {.layers = 4, .channels = 128, .heads = 4, .vocab = 256, .max_seq = 128},
     "the default: learns Shakespeare in about 6 minutes on 2 cores"},
    {"gpt2", {.layers = 12, .channels = 768, .heads = 12, .vocab = 50257, .max_seq = 1024},
     "GPT-2 124M"},
    {"gpt2-medium", {.layers = 24, .channels = 1024, .heads = 16, .vocab = 50257, .max_seq = 1024},
     "GPT-2 350M"},
    {"gpt2-large", {.layers = 36, .channels = 1280, .heads = 20, .vocab = 50257, .max_seq = 1024},
     "GPT-2 774M"},
    {"gpt2-xl", {.layers = 48, .channels = 1600, .heads = 25, .vocab = 50257, .max_seq = 1024},
     "GPT-2 1558M"},
    {"llama-small", {.layers = 4, .channels = 128, .heads = 4, .vocab = 256, .max_seq = 128, .arch = ARCH_LLAMA,
                     .kv_heads = 2, .ffn = 352},
     "the small model as a Llama: RMSNorm, RoPE, SwiGLU (F 352), 2 key-value heads, tied head"},
    {"llama3.2-1b", {.layers = 16, .channels = 2048, .heads = 32, .vocab = 128256, .max_seq = 8192,
                     .arch = ARCH_LLAMA, .kv_heads = 8, .ffn = 8192},
     "Llama 3.2 1B (1,235,814,400 parameters; tied head; maxT 8192, its pretraining context)"},
    {"llama3.2-3b", {.layers = 28, .channels = 3072, .heads = 24, .vocab = 128256, .max_seq = 8192,
                     .arch = ARCH_LLAMA, .kv_heads = 8, .ffn = 8192},
     "Llama 3.2 3B (3,212,749,824 parameters; tied head)"},
    {"llama3-8b", {.layers = 32, .channels = 4096, .heads = 32, .vocab = 128256, .max_seq = 8192,
                   .arch = ARCH_LLAMA, .kv_heads = 8, .ffn = 14336, .untied = 1},
     "Llama 3 8B (8,030,261,248 parameters), the articles' running example"},
    {"llama3.1-8b", {.layers = 32, .channels = 4096, .heads = 32, .vocab = 128256, .max_seq = 131072,
                     .arch = ARCH_LLAMA, .kv_heads = 8, .ffn = 14336, .untied = 1, .rope_scaled = 8},
     "Llama 3.1 8B (Llama 3 8B's shape; maxT 131072, its RoPE scaled x8 as its config.json says)"},
    {"llama3-70b", {.layers = 80, .channels = 8192, .heads = 64, .vocab = 128256, .max_seq = 8192,
                    .arch = ARCH_LLAMA, .kv_heads = 8, .ffn = 28672, .untied = 1},
     "Llama 3 70B (70,553,706,496 parameters)"},
};
const int n_model_presets = sizeof model_presets / sizeof model_presets[0];

// A model's shape in words, for a message: "GPT-2 L2 C64 H4 V50257 maxT 64" (a Llama's also "KVH2 F176, untied head").
const char *shape_words(const GPTConfig *c, char *out, size_t len) {
    int n = snprintf(out, len, "%s L%d C%d H%d V%d maxT %d", is_llama(c) ? "Llama" : "GPT-2", c->layers, c->channels,
                     c->heads, c->vocab, c->max_seq);
    if (is_llama(c) && n > 0 && (size_t)n < len)
        n += snprintf(out + n, len - n, " KVH%d F%d, %s head%s", cfg_kv_heads(c), cfg_ffn(c),
                      c->untied ? "untied" : "tied", c->rope_scaled == 32 ? ", scaled RoPE x32" : c->rope_scaled ? ", scaled RoPE" : "");
    if (is_llama(c) && c->rope_theta && n > 0 && (size_t)n < len) snprintf(out + n, len - n, ", theta %d", c->rope_theta);
    return out;
}

// The vocabulary padded to a multiple of 64 so the LM head's matmul tiles
// evenly; padded logits are masked out of the loss. The rows of the embedding and of the LM head a model
// holds: all Vp, or a --tp share's band of Vp/t (vocab_split).
int padded_vocab(const GPTConfig *c) { return (c->vocab + 63) / 64 * 64 / (c->vocab_split > 1 ? c->vocab_split : 1); }

// Does t divide every width --tp splits (the query heads, the key-value heads, the MLP's, the padded vocabulary)?
int tp_splits(const GPTConfig *c, int t) {
    return c->heads % t == 0 && cfg_kv_heads(c) % t == 0 && cfg_ffn(c) % t == 0 && padded_vocab(c) % t == 0;
}

// ---------------------------------------------------------------------------
// Parameter layout
//
// All parameters live in one flat array, in this order:
//   wte   (Vp, C)      token embedding, also the LM head unless untied
//   wpe   (maxT, C)    position embedding (GPT-2; Llama has none: its positions rotate q and k)
//   then for each layer l = 0..L-1, one contiguous block, an op's weight then its bias:
//     GPT-2: ln1w (C), ln1b (C), qkvw (3C, C), qkvb (3C), attprojw (C, C), attprojb (C),
//            ln2w (C), ln2b (C), fcw (4C, C), fcb (4C), fcprojw (C, 4C), fcprojb (C)
//     Llama: ln1w (C), qkvw ((H + 2 KVH) hs, C), attprojw (C, C), ln2w (C),
//            fcw (2F, C): the up projection's F rows, then the gate's, fcprojw (C, F); no biases
//   lnfw  (C), lnfb (C)   final norm (Llama: lnfw only)
//   lm_head (Vp, C)       only when untied
// Keeping each layer contiguous means one layer's weights (or gradients) are
// one slice of the array: what ZeRO stage 2/3 reduce and gather per layer.
// Linear weights are (out, in), as in PyTorch's nn.Linear.

// The ops of a layer that own parameters, in layout order. Each op's weight
// and bias sit next to each other in the layer's block, so one op's
// parameters are one slice of the flat array: what ZeRO stage 3 gathers just
// before the op runs, and stages 2 and 3 reduce-scatter as soon as the op's
// backward has produced their gradients (a "piece", see fetch_params).
enum { OP_LN1, OP_QKV, OP_ATTPROJ, OP_LN2, OP_FC, OP_FCPROJ, LAYER_OPS };
const char *const op_names[LAYER_OPS] = {"ln1", "qkv", "attproj", "ln2", "fc", "fcproj"};

// The inputs and outputs of a linear op: qkv C -> (H + 2 KVH) hs (GPT-2: 3C), attproj H hs -> C (C -> C
// but for --tp's share of the heads), fc C -> F (Llama: 2F, up and gate), fcproj F -> C.
int op_inputs(const GPTConfig *c, int op) {
    return op == OP_FCPROJ ? cfg_ffn(c) : op == OP_ATTPROJ ? (int)attn_width(c) : c->channels;
}
int op_outputs(const GPTConfig *c, int op) {
    if (op == OP_QKV) return (int)qkv_width(c);
    if (op == OP_FC) return (is_llama(c) ? 2 : 1) * cfg_ffn(c);
    return c->channels;
}

// Does an op have a bias (GPT-2's do, the layernorms' too; Llama's have none)?
int op_has_bias(const GPTConfig *c) { return !is_llama(c); }

// How many weights op `op` has (the bias follows them): a norm C; a linear outputs x inputs.
size_t op_weight_count(const GPTConfig *c, int op) {
    if (op == OP_LN1 || op == OP_LN2) return c->channels;
    return (size_t)op_outputs(c, op) * op_inputs(c, op);
}

// And its parameters: GPT-2 ln 2C; qkv 3C^2 + 3C; attproj C^2 + C; fc 4C^2 + 4C; fcproj 4C^2 + C.
size_t op_param_count(const GPTConfig *c, int op) {
    if (!op_has_bias(c)) return op_weight_count(c, op);
    size_t bias = op == OP_LN1 || op == OP_LN2 ? c->channels : op_outputs(c, op);
    return op_weight_count(c, op) + bias;
}

size_t layer_param_count(const GPTConfig *c) {
    size_t n = 0;
    for (int op = 0; op < LAYER_OPS; op++) n += op_param_count(c, op);
    return n;
}

// The embedding table [wte | wpe]: (Vp + maxT) C parameters (Llama: Vp C), the first of the flat array.
size_t embedding_param_count(const GPTConfig *c) {
    return ((size_t)padded_vocab(c) + (is_llama(c) ? 0 : c->max_seq)) * c->channels;
}

// The final norm's parameters: GPT-2 2C (weight and bias), Llama C.
size_t final_norm_param_count(const GPTConfig *c) { return (op_has_bias(c) ? 2 : 1) * (size_t)c->channels; }

// An untied LM head's parameters: Vp C (none when the head is wte).
size_t lm_head_param_count(const GPTConfig *c) { return c->untied ? (size_t)padded_vocab(c) * c->channels : 0; }

// What follows the layers: the final norm, then an untied LM head (GPT-2: lnfw, lnfb, 2C).
size_t tail_param_count(const GPTConfig *c) { return final_norm_param_count(c) + lm_head_param_count(c); }

// The embedding table's rows: Vp tokens, then (GPT-2) maxT positions.
int embedding_rows(const GPTConfig *c) { return (int)(embedding_param_count(c) / c->channels); }

size_t param_count(const GPTConfig *c) {
    return embedding_param_count(c) + c->layers * layer_param_count(c) + final_norm_param_count(c) +
           lm_head_param_count(c);
}

// Offset of layer l's block in the flat array.
size_t layer_offset(const GPTConfig *c, int l) {
    return embedding_param_count(c) + (size_t)l * layer_param_count(c);
}

// Where op `op`'s parameters start in layer l's block, as a flat index.
size_t op_param_offset(const GPTConfig *c, int l, int op) {
    size_t off = layer_offset(c, l);
    for (int k = 0; k < op; k++) off += op_param_count(c, k);
    return off;
}

// One named tensor of the layout: used by init (std and which get weight
// decay) and by the optimizer (weight decay only on 2-D weights).
typedef struct {
    size_t offset, count;
    int is_matrix;     // 2-D weight: gets weight decay
    float init_std;    // 0 means "ones" (layernorm weight) or "zeros" (bias), see init
    int init_ones;
} ParamTensor;

// Append one tensor to the table and advance the running offset.
void add_tensor(ParamTensor *out, int *n, size_t *off, size_t count, int is_matrix, float std, int ones) {
    ParamTensor *t = &out[(*n)++];
    t->offset = *off; t->count = count; t->is_matrix = is_matrix; t->init_std = std; t->init_ones = ones;
    *off += count;
}

// GPT-2: wte, wpe, 12 a layer, lnfw, lnfb. Llama: wte, 6 a layer, lnfw, and lm_head if untied.
int param_tensor_count(const GPTConfig *c) {
    return is_llama(c) ? 2 + 6 * c->layers + c->untied : 4 + 12 * c->layers;
}

// Fill `out` (param_tensor_count entries) with the tensors in layout order.
void param_tensors(const GPTConfig *c, ParamTensor *out) {
    size_t C = c->channels;
    float proj_std = 0.02f / sqrtf(2.0f * c->layers);  // residual projections: GPT-2 scaling
    int n = 0, bias = op_has_bias(c);
    size_t off = 0;
    add_tensor(out, &n, &off, (size_t)padded_vocab(c) * C, 1, 0.02f, 0);  // wte
    if (!is_llama(c)) add_tensor(out, &n, &off, (size_t)c->max_seq * C, 1, 0.02f, 0);  // wpe
    for (int l = 0; l < c->layers; l++)
        for (int op = 0; op < LAYER_OPS; op++) {
            int norm = op == OP_LN1 || op == OP_LN2;
            float std = norm ? 0 : op == OP_ATTPROJ || op == OP_FCPROJ ? proj_std : 0.02f;
            add_tensor(out, &n, &off, op_weight_count(c, op), !norm, std, norm);  // the weight
            if (bias) add_tensor(out, &n, &off, op_param_count(c, op) - op_weight_count(c, op), 0, 0, 0);
        }
    add_tensor(out, &n, &off, C, 0, 0, 1);                  // lnfw
    if (bias) add_tensor(out, &n, &off, C, 0, 0, 0);        // lnfb
    if (c->untied) add_tensor(out, &n, &off, (size_t)padded_vocab(c) * C, 1, 0.02f, 0);  // lm_head
}

// Element j of tensor i (the i-th of param_tensors), drawing from *s: called
// for every element in layout order, it gives the whole init sequence.
float init_value(const ParamTensor *t, int i, size_t j, const GPTConfig *c, uint64_t *s) {
    int table = i == 0 || (c->untied && i == param_tensor_count(c) - 1);     // wte, an untied LM head
    size_t random = table ? (size_t)c->vocab * c->channels : t->count;         // their real rows only
    if (j >= random) return 0.0f;
    if (t->init_ones) return 1.0f;
    return t->init_std > 0 ? t->init_std * rng_normal(s) : 0.0f;
}

// Where the first weights come from: GPT-2's init drawn from a seed, or
// (read not NULL) a file that gives any range [lo, hi) of the flat array as
// fp32 (--init: io/llmc.h), returning 0 or -1 if it could not be read.
typedef struct {
    uint64_t seed;
    int (*read)(const void *file, float *dst, size_t lo, size_t hi);
    const void *file;
} WeightSource;

WeightSource seeded(uint64_t seed) { return (WeightSource){seed, NULL, NULL}; }

// GPT-2 init: linear and embedding weights ~ N(0, 0.02), residual output
// projections ~ N(0, 0.02/sqrt(2L)), layernorm weights 1, biases 0.
// The padded vocabulary rows of wte are left at zero (they are never used).
// Only the parameters [lo, hi) of the flat array are written, to dst[0..hi-lo):
// a ZeRO rank that owns a shard draws the whole sequence (so every rank agrees)
// and keeps its part. lo = 0, hi = P fills a full array.
// The same a window of `chunk` parameters at a time, for states that never
// sit in memory whole (--offload-to disk): buf[0..b-a) holds the parameters
// [a, b), then take(ctx, a, b) is called, for each window of [lo, hi) in
// order (the tensors are in layout order, so the sequence visits the flat
// array from its start). A file source reads each window instead.
// The largest weight --init takes: a trained model's are below 10^3 or so; one of 3e38 is a damaged file.
#define INIT_WEIGHT_MOST 1e8f

void init_params_chunks(float *buf, size_t chunk, size_t lo, size_t hi, const GPTConfig *c, const WeightSource *src,
                        void (*take)(void *ctx, size_t a, size_t b), void *ctx) {
    if (src->read) {
        for (size_t a = lo; a < hi; a += chunk) {
            size_t b = hi - a < chunk ? hi : a + chunk;
            if (src->read(src->file, buf, a, b)) {
                fprintf(stderr, "error: reading the weights of --init failed part-way\n");
                exit(1);
            }
            for (size_t k = 0; k < b - a; k++)
                if (!isfinite(buf[k])) {
                    fprintf(stderr, "error: --init's file has a weight that is %s (parameter %zu): it cannot be "
                            "trained from\n", isnan(buf[k]) ? "nan" : "infinite", a + k);
                    exit(1);
                } else if (fabsf(buf[k]) > INIT_WEIGHT_MOST) {
                    fprintf(stderr, "error: --init's file has a weight of %g (parameter %zu): no trained model holds "
                            "one past %g (its sums overflow fp32 in the first step), so the file is damaged\n",
                            buf[k], a + k, INIT_WEIGHT_MOST);
                    exit(1);
                }
            take(ctx, a, b);
        }
        return;
    }
    int n = param_tensor_count(c);
    ParamTensor *t = malloc(sizeof(ParamTensor) * n);
    param_tensors(c, t);
    uint64_t s = rng_seed(src->seed);
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < t[i].count; j++) {
            float v = init_value(&t[i], i, j, c, &s);
            size_t at = t[i].offset + j;
            if (at < lo || at >= hi) continue;
            buf[(at - lo) % chunk] = v;
            if ((at + 1 - lo) % chunk == 0 || at + 1 == hi) take(ctx, at - (at - lo) % chunk, at + 1);
        }
    free(t);
}

static void init_take_nothing(void *ctx, size_t a, size_t b) { (void)ctx, (void)a, (void)b; }

void init_params_range(float *dst, size_t lo, size_t hi, const GPTConfig *c, const WeightSource *src) {
    if (hi > lo) init_params_chunks(dst, hi - lo, lo, hi, c, src, init_take_nothing, NULL);
}

void init_params(float *params, const GPTConfig *c, uint64_t seed) {
    WeightSource src = seeded(seed);
    init_params_range(params, 0, param_count(c), c, &src);
}

// Where the LM head's table starts in the flat array: wte's (0), or an untied head's after the final norm.
size_t lm_head_offset(const GPTConfig *c) {
    return c->untied ? layer_offset(c, c->layers) + final_norm_param_count(c) : 0;
}

// Parameters outside the layers: wte, wpe, the final norm and an untied LM head (GPT-2: (Vp + maxT) C + 2C).
size_t global_param_count(const GPTConfig *c) {
    return embedding_param_count(c) + final_norm_param_count(c) + lm_head_param_count(c);
}

#endif
