// train.c — gptmem's main program: read the flags, build the model, and run
// the training loop: forward, backward, step. Everything else (ops, memory,
// optimizer, data) lives in the headers it includes; each binary is one
// translation unit.
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "memory.h"
#include "model.h"
#include "predict.h"
#include "optimizer.h"
#include "data.h"
#include "comm.h"
#include "cuda/ops.h"
#include "cuda/model_gpu.h"

// ---------------------------------------------------------------------------
// Options

typedef struct {
    const char *model;  // preset name
    int layers, channels, heads, vocab, max_seq;  // overrides, 0 = the preset's
    const char *data;
    int batch, seq_len, steps, accum;
    int flash, ckpt;
    const char *device_str;
    int cuda;  // --device cuda
    const char *dtype_str;
    int dtype;
    float loss_scale;
    int zero, ranks;
    float lr, min_lr_frac, weight_decay, clip;
    int warmup;
    uint64_t seed;
    int threads;
    int eval_every, eval_batches, sample_every, sample_len;
    float temperature;
    const char *save, *resume;
    int save_every, stop_after;
    int mem, dry_run, trace;
    const char *mem_json;
    const char *log;
} Options;

Options default_options(void) {
    Options o;
    memset(&o, 0, sizeof o);
    o.model = "small";
    o.dtype_str = "fp32";
    o.device_str = "cpu";
    o.loss_scale = DEFAULT_LOSS_SCALE;
    o.data = "data/tinyshakespeare.txt";
    o.batch = 32;
    o.accum = 1;
    o.steps = 1000;
    o.lr = 3e-3f;
    o.min_lr_frac = 0.1f;
    o.weight_decay = 0.1f;
    o.clip = 1.0f;
    o.warmup = -1;  // -1: 5% of the steps
    o.seed = 1337;
    o.eval_every = 200;
    o.eval_batches = 16;
    o.sample_every = 500;
    o.sample_len = 240;
    o.temperature = 0.8f;
    o.save_every = 0;
    return o;
}

// The flag table: name, value kind, help. --help prints it with the defaults.
enum { ARG_FLAG, ARG_INT, ARG_FLOAT, ARG_STR, ARG_U64 };
typedef struct {
    const char *name;
    int kind;
    size_t offset;  // where in Options the value goes
    long lo, hi;    // allowed range for ints
    const char *help;
} FlagSpec;

#define OPT(field) offsetof(Options, field)
const FlagSpec flag_specs[] = {
    {"model", ARG_STR, OPT(model), 0, 0, "preset: small, gpt2, gpt2-medium, gpt2-large, gpt2-xl"},
    {"layers", ARG_INT, OPT(layers), 1, 1024, "override the preset's number of layers L"},
    {"channels", ARG_INT, OPT(channels), 1, 65536, "override the preset's channels C"},
    {"heads", ARG_INT, OPT(heads), 1, 1024, "override the preset's heads H (must divide C)"},
    {"vocab", ARG_INT, OPT(vocab), 256, 1 << 20, "override the vocabulary V (>= 256: tokens are bytes)"},
    {"max-seq", ARG_INT, OPT(max_seq), 1, 65536, "override the model's learned positions maxT"},
    {"data", ARG_STR, OPT(data), 0, 0, "text file to train on (bytes are tokens)"},
    {"batch", ARG_INT, OPT(batch), 1, 65536, "sequences per micro-batch B"},
    {"seq-len", ARG_INT, OPT(seq_len), 1, 65536, "tokens per sequence T (auto = the model's maxT)"},
    {"accum", ARG_INT, OPT(accum), 1, 65536, "gradient accumulation: micro-batches per optimizer step"},
    {"ckpt", ARG_FLAG, OPT(ckpt), 0, 0, "activation checkpointing: keep block outputs, recompute the rest"},
    {"flash", ARG_FLAG, OPT(flash), 0, 0, "flash attention: online softmax, no T x T matrix kept"},
    {"device", ARG_STR, OPT(device_str), 0, 0, "where to train: cpu (the reference) or cuda (the GPU)"},
    {"dtype", ARG_STR, OPT(dtype_str), 0, 0, "storage of weights, grads, activations: fp32, bf16 or fp16"},
    {"zero", ARG_INT, OPT(zero), 0, 3, "ZeRO stage over the mpirun ranks: 0 data parallel, 1 +optimizer, 2 +grads, 3 +weights sharded"},
    {"ranks", ARG_INT, OPT(ranks), 1, 1 << 20, "with --dry-run: predict each rank's memory on N ranks"},
    {"loss-scale", ARG_FLOAT, OPT(loss_scale), 0, 0, "fp16: initial loss scale (halved on overflow, doubled after 1000 good steps)"},
    {"steps", ARG_INT, OPT(steps), 1, INT_MAX, "optimizer steps"},
    {"lr", ARG_FLOAT, OPT(lr), 0, 0, "peak learning rate"},
    {"min-lr-frac", ARG_FLOAT, OPT(min_lr_frac), 0, 0, "final lr as a fraction of --lr (cosine decay)"},
    {"warmup", ARG_INT, OPT(warmup), -1, INT_MAX, "linear warmup steps (-1 = 5% of --steps)"},
    {"weight-decay", ARG_FLOAT, OPT(weight_decay), 0, 0, "AdamW weight decay (2-D weights only)"},
    {"clip", ARG_FLOAT, OPT(clip), 0, 0, "clip the global gradient norm to this (0 = off)"},
    {"seed", ARG_U64, OPT(seed), 0, 0, "seed for init, batches and sampling"},
    {"threads", ARG_INT, OPT(threads), 0, 1024, "OpenMP threads (0 = OMP_NUM_THREADS or all cores)"},
    {"eval-every", ARG_INT, OPT(eval_every), 0, INT_MAX, "validation loss every N steps (0 = only at the end)"},
    {"eval-batches", ARG_INT, OPT(eval_batches), 1, 100000, "batches per validation"},
    {"sample-every", ARG_INT, OPT(sample_every), 0, INT_MAX, "print a text sample every M steps (0 = only at the end)"},
    {"sample-len", ARG_INT, OPT(sample_len), 0, 100000, "bytes per sample (0 = no samples)"},
    {"temperature", ARG_FLOAT, OPT(temperature), 0, 0, "sampling temperature"},
    {"save", ARG_STR, OPT(save), 0, 0, "write a checkpoint here (every --save-every steps and at the end)"},
    {"save-every", ARG_INT, OPT(save_every), 0, INT_MAX, "checkpoint interval in steps (0 = only at the end)"},
    {"resume", ARG_STR, OPT(resume), 0, 0, "resume from this checkpoint"},
    {"stop-after", ARG_INT, OPT(stop_after), 0, INT_MAX,
     "stop after this many steps of the --steps schedule, saving if --save (0 = run all)"},
    {"mem", ARG_FLAG, OPT(mem), 0, 0, "print the memory ledger: predicted vs measured, per phase and at peak"},
    {"mem-json", ARG_STR, OPT(mem_json), 0, 0, "write the memory ledger as JSON to this file"},
    {"log", ARG_STR, OPT(log), 0, 0, "write every step as CSV: step, loss, val loss, lr, norm, ms, tokens, replicas"},
    {"dry-run", ARG_FLAG, OPT(dry_run), 0, 0, "print the predicted memory and exit (nothing allocated)"},
    {"trace", ARG_FLAG, OPT(trace), 0, 0, "print each activation push and pop, ZeRO gather and reduction of the first step"},
};
#undef OPT
const int n_flag_specs = sizeof flag_specs / sizeof flag_specs[0];

// A bad flag or value: one line naming it, exit code 2.
void usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "error: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see ./train --help)\n");
    va_end(ap);
    exit(2);
}

void print_default(const FlagSpec *f, const Options *d) {
    const char *p = (const char *)d + f->offset;
    switch (f->kind) {
    case ARG_FLAG: printf("off"); break;
    case ARG_INT:  // 0 where 0 is not allowed means "work it out" (the preset's value, one rank)
        if (*(const int *)p == 0 && f->lo >= 1) printf("auto");
        else printf("%d", *(const int *)p);
        break;
    case ARG_FLOAT: printf("%g", *(const float *)p); break;
    case ARG_U64: printf("%llu", (unsigned long long)*(const uint64_t *)p); break;
    case ARG_STR: printf("%s", *(const char *const *)p ? *(const char *const *)p : "none"); break;
    }
}

void print_help(void) {
    Options d = default_options();
    printf("gptmem: train a GPT-2 style model in plain C and see where every byte of memory goes.\n\n"
           "usage: ./train [--flag value | --flag=value]...\n\n");
    for (int i = 0; i < n_flag_specs; i++) {
        const FlagSpec *f = &flag_specs[i];
        char left[64];
        snprintf(left, sizeof left, "--%s%s", f->name, f->kind == ARG_FLAG ? "" : f->kind == ARG_STR ? " S" :
                                                       f->kind == ARG_FLOAT ? " X" : " N");
        printf("  %-20s %s (default: ", left, f->help);
        print_default(f, &d);
        printf(")\n");
    }
    printf("  %-20s %s\n\n", "--help", "this text");
    printf("auto: the preset's value (--seq-len: the model's maxT; --ranks: 1)\n");
    printf("this build: MPI %s\n", comm_have_mpi() ? "yes (mpirun -np N ./train --zero S)" :
           "no (one rank; install libopenmpi-dev openmpi-bin and rebuild for ZeRO over ranks)");
    printf("            CUDA %s\n\nmodel presets:\n", gpu_built() ? "yes (--device cuda)" :
           "no (nvcc was not found at build time: --device cpu only)");
    for (int i = 0; i < n_model_presets; i++) {
        const GPTConfig *c = &model_presets[i].cfg;
        printf("  %-12s L%d C%d H%d V%d maxT %d  %.1fM params  %s\n", model_presets[i].name, c->layers,
               c->channels, c->heads, c->vocab, c->max_seq, param_count(c) / 1e6, model_presets[i].note);
    }
    printf("\nexamples:\n"
           "  ./train                                  train the small model on tiny shakespeare\n"
           "  ./train --model gpt2-xl --dry-run        how much memory would GPT-2 XL need?\n"
           "  ./train --steps 20 --mem                 predicted vs measured memory, per category\n"
           "  ./train --dtype bf16 --ckpt --flash      every memory flag of one process\n"
           "  mpirun -np 4 ./train --zero 2            ZeRO stage 2 over 4 ranks\n"
           "  scripts/compare.py --dry-run --base '--model gpt2' fp32= bf16='--dtype bf16'\n"
           "                                           settings side by side\n");
}

// Parse one value into the option it belongs to; exits 2 on a bad value.
void parse_value(const FlagSpec *f, const char *v, Options *o) {
    char *p = (char *)o + f->offset, *end;
    errno = 0;
    if (f->kind == ARG_INT) {
        long x = strtol(v, &end, 10);
        if (errno || end == v || *end || x < f->lo || x > f->hi) {
            char range[64];
            snprintf(range, sizeof range, "an integer from %ld to %ld", f->lo, f->hi);
            fprintf(stderr, "error: --%s must be %s (got '%s') (see ./train --help)\n", f->name, range, v);
            exit(2);
        }
        *(int *)p = (int)x;
    } else if (f->kind == ARG_FLOAT) {
        float x = strtof(v, &end);
        if (errno || end == v || *end || !isfinite(x) || x < 0)
            usage_error("--%s must be a number >= 0 (got '%s')", f->name, v);
        *(float *)p = x;
    } else if (f->kind == ARG_U64) {
        unsigned long long x = strtoull(v, &end, 10);
        if (errno || end == v || *end || v[0] == '-') usage_error("--%s must be an integer >= 0 (got '%s')", f->name, v);
        *(uint64_t *)p = x;
    } else {
        if (!*v) usage_error("--%s needs a value", f->name);
        *(const char **)p = v;
    }
}

Options parse_args(int argc, char **argv) {
    Options o = default_options();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { print_help(); exit(0); }
        if (strncmp(a, "--", 2) != 0) usage_error("unexpected argument '%s'; flags start with --", a);
        char name[64];
        const char *eq = strchr(a + 2, '='), *value = NULL;
        size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (len >= sizeof name) len = sizeof name - 1;
        memcpy(name, a + 2, len);
        name[len] = 0;
        const FlagSpec *f = NULL;
        for (int k = 0; k < n_flag_specs; k++)
            if (!strcmp(flag_specs[k].name, name)) f = &flag_specs[k];
        if (!f) usage_error("unknown flag '--%s'", name);
        if (f->kind == ARG_FLAG) {
            if (eq) usage_error("--%s takes no value (got '%s')", name, eq + 1);
            *(int *)((char *)&o + f->offset) = 1;
            continue;
        }
        if (eq) value = eq + 1;
        else if (i + 1 < argc) value = argv[++i];
        else usage_error("--%s needs a value", name);
        parse_value(f, value, &o);
    }
    return o;
}

// Resolve the preset and overrides into a model config; check it makes sense.
GPTConfig resolve_config(Options *o) {
    const ModelPreset *p = NULL;
    for (int i = 0; i < n_model_presets; i++)
        if (!strcmp(model_presets[i].name, o->model)) p = &model_presets[i];
    if (!p) usage_error("--model must be one of small, gpt2, gpt2-medium, gpt2-large, gpt2-xl (got '%s')",
                        o->model);
    GPTConfig c = p->cfg;
    if (o->layers) c.layers = o->layers;
    if (o->channels) c.channels = o->channels;
    if (o->heads) c.heads = o->heads;
    if (o->vocab) c.vocab = o->vocab;
    if (o->max_seq) c.max_seq = o->max_seq;
    if (c.channels % c.heads) {
        fprintf(stderr, "error: --channels %d is not divisible by --heads %d; pick heads that divide "
                "channels (see ./train --help)\n", c.channels, c.heads);
        exit(2);
    }
    if (o->seq_len == 0) o->seq_len = c.max_seq;
    if (o->seq_len > c.max_seq) {
        fprintf(stderr, "error: --seq-len %d is over the model's maximum of %d positions; use --seq-len "
                "1..%d or raise --max-seq (see ./train --help)\n", o->seq_len, c.max_seq, c.max_seq);
        exit(2);
    }
    if ((long long)o->batch * o->seq_len > INT_MAX / 8) usage_error("--batch x --seq-len is too large");
    if (o->lr <= 0) usage_error("--lr must be a number > 0 (got 0)");
    if (o->min_lr_frac > 1) usage_error("--min-lr-frac must be from 0 to 1");
    if (o->temperature <= 0) usage_error("--temperature must be a number > 0");
    if (o->warmup < 0) o->warmup = o->steps / 20;
    o->dtype = -1;
    for (int d = DT_FP32; d <= DT_FP16; d++)
        if (!strcmp(o->dtype_str, dtype_name[d])) o->dtype = d;
    if (o->dtype < 0) usage_error("--dtype must be one of fp32, bf16, fp16 (got '%s')", o->dtype_str);
    if (o->loss_scale < 1.0f) usage_error("--loss-scale must be a number >= 1");
    if (strcmp(o->device_str, "cpu") && strcmp(o->device_str, "cuda"))
        usage_error("--device must be cpu or cuda (got '%s')", o->device_str);
    o->cuda = !strcmp(o->device_str, "cuda");
    if (o->cuda && o->flash && c.channels / c.heads > GPU_FLASH_MAX_HEAD) {
        fprintf(stderr, "error: --device cuda --flash supports head sizes up to %d; this model's is %d "
                "(--channels / --heads); drop --flash or use more heads\n", GPU_FLASH_MAX_HEAD,
                c.channels / c.heads);
        exit(2);
    }
    if (o->cuda && o->ranks > 1)
        usage_error("--device cuda runs on one rank for now: ZeRO on the GPU is not built yet (drop --ranks)");
    return c;
}

// ---------------------------------------------------------------------------
// Checkpoints
//
// Layout (little-endian, as written by this machine):
//   "GPTMEMCK" magic, u32 version, i32 L C H V maxT B T, i32 step,
//   u64 data_rng, u64 sample_rng, u64 nparams, i32 dtype, i32 updates,
//   f32 loss_scale, i32 good_steps, i32 zero nranks rank, u64 lo hi,
//   f32 weights[hi - lo] (the fp32 weights: master copy for 16-bit runs),
//   f32 adam_m[hi - lo], f32 adam_v[hi - lo],
//   u64 FNV-1a checksum of every byte before it.
// Written to FILE.tmp and renamed, so a crash never leaves half a checkpoint.
// With several ranks each rank writes the parameters it owns: rank 0 to FILE,
// rank r to FILE.rank<r>; one rank writes everything to FILE.

#define CKPT_MAGIC "GPTMEMCK"
#define CKPT_VERSION 3u

typedef struct {
    int32_t L, C, H, V, maxT, B, T, step;
    uint64_t data_rng, sample_rng, nparams;
    int32_t dtype;       // the weights are fp32 (the master copy for 16-bit runs); dtype must match to resume
    int32_t updates;     // optimizer updates applied (fp16 skips steps): AdamW's bias-correction count
    float loss_scale;    // fp16 dynamic loss scale
    int32_t good_steps;  // fp16: steps since the scale last changed
    int32_t zero, nranks, rank;  // ZeRO: the file of rank `rank` of `nranks` at stage `zero`
    uint64_t lo, hi;             // the parameters [lo, hi) this file holds (one rank: all of them)
} CkptHeader;

uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 0x100000001B3ULL; }
    return h;
}

int write_hashed(FILE *f, uint64_t *h, const void *p, size_t n) {
    *h = fnv1a(*h, p, n);
    return fwrite(p, 1, n, f) == n ? 0 : -1;
}

// The big arrays go through a 1 MiB host buffer, so that they can come from
// (or go to) GPU memory: on_gpu says which. CPU arrays are read in place.
enum { CKPT_CHUNK = 1 << 20 };

int write_array(FILE *f, uint64_t *h, const float *src, size_t bytes, int on_gpu) {
    if (!on_gpu) return write_hashed(f, h, src, bytes);
    char *chunk = malloc(CKPT_CHUNK);
    int bad = 0;
    for (size_t at = 0; at < bytes && !bad; at += CKPT_CHUNK) {
        size_t n = bytes - at < CKPT_CHUNK ? bytes - at : CKPT_CHUNK;
        gpu_download(chunk, (const char *)src + at, n);
        bad = write_hashed(f, h, chunk, n);
    }
    free(chunk);
    return bad;
}

int ckpt_save(const char *path, const CkptHeader *hd, const float *params, const float *m, const float *v,
              int on_gpu) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) { fprintf(stderr, "error: cannot write checkpoint '%s': %s\n", tmp, strerror(errno)); return -1; }
    uint64_t h = 0xCBF29CE484222325ULL;
    uint32_t version = CKPT_VERSION;
    size_t n = (hd->hi - hd->lo) * sizeof(float);
    int bad = write_hashed(f, &h, CKPT_MAGIC, 8) | write_hashed(f, &h, &version, 4) |
              write_hashed(f, &h, hd, sizeof *hd) | write_array(f, &h, params, n, on_gpu) |
              write_array(f, &h, m, n, on_gpu) | write_array(f, &h, v, n, on_gpu);
    bad |= fwrite(&h, 8, 1, f) != 1;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        fprintf(stderr, "error: writing checkpoint '%s' failed (disk full?)\n", path);
        remove(tmp);
        return -1;
    }
    return 0;
}

int read_hashed(FILE *f, uint64_t *h, void *p, size_t n) {
    if (fread(p, 1, n, f) != n) return -1;
    *h = fnv1a(*h, p, n);
    return 0;
}

int read_array(FILE *f, uint64_t *h, float *dst, size_t bytes, int on_gpu) {
    if (!on_gpu) return read_hashed(f, h, dst, bytes);
    char *chunk = malloc(CKPT_CHUNK);
    int bad = 0;
    for (size_t at = 0; at < bytes && !bad; at += CKPT_CHUNK) {
        size_t n = bytes - at < CKPT_CHUNK ? bytes - at : CKPT_CHUNK;
        bad = read_hashed(f, h, chunk, n);
        if (!bad) gpu_upload((char *)dst + at, chunk, n);
    }
    free(chunk);
    return bad;
}

// Load a checkpoint into params/m/v after checking it matches `want`.
// Exits with a clear error if the file is missing, truncated, corrupt or for
// another model; returns the header.
CkptHeader ckpt_load(const char *path, const CkptHeader *want, float *params, float *m, float *v, int on_gpu) {
    CkptHeader hd;
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "error: cannot open checkpoint '%s': %s\n", path, strerror(errno)); exit(1); }
    long long size = file_size(path);
    char magic[8];
    uint32_t version;
    uint64_t h = 0xCBF29CE484222325ULL, stored;
    if (read_hashed(f, &h, magic, 8) || memcmp(magic, CKPT_MAGIC, 8)) {
        fprintf(stderr, "error: '%s' is not a gptmem checkpoint (bad magic)\n", path);
        exit(1);
    }
    if (read_hashed(f, &h, &version, 4) || version != CKPT_VERSION) {
        fprintf(stderr, "error: checkpoint '%s' has version %u; this build reads version %u\n", path, version,
                CKPT_VERSION);
        exit(1);
    }
    if (read_hashed(f, &h, &hd, sizeof hd)) {
        fprintf(stderr, "error: checkpoint '%s' is truncated (no complete header)\n", path);
        exit(1);
    }
    if (hd.dtype != want->dtype) {
        fprintf(stderr, "error: checkpoint '%s' was trained with --dtype %s; pass --dtype %s to resume it\n", path,
                hd.dtype >= 0 && hd.dtype <= DT_FP16 ? dtype_name[hd.dtype] : "?",
                hd.dtype >= 0 && hd.dtype <= DT_FP16 ? dtype_name[hd.dtype] : "?");
        exit(1);
    }
    if (hd.L != want->L || hd.C != want->C || hd.H != want->H || hd.V != want->V || hd.maxT != want->maxT ||
        hd.nparams != want->nparams) {
        fprintf(stderr, "error: checkpoint '%s' is for a different model (L%d C%d H%d V%d maxT %d) than this "
                "run (L%d C%d H%d V%d maxT %d); pass the same --model and overrides\n", path, hd.L, hd.C, hd.H,
                hd.V, hd.maxT, want->L, want->C, want->H, want->V, want->maxT);
        exit(1);
    }
    if (hd.zero != want->zero || hd.nranks != want->nranks || hd.rank != want->rank || hd.lo != want->lo ||
        hd.hi != want->hi) {
        fprintf(stderr, "error: checkpoint '%s' is rank %d of %d at --zero %d; this is rank %d of %d at --zero %d: "
                "resume with the same mpirun -np and --zero\n", path, hd.rank, hd.nranks, hd.zero, want->rank,
                want->nranks, want->zero);
        exit(1);
    }
    size_t n = (hd.hi - hd.lo) * sizeof(float);
    long long expect = 8 + 4 + (long long)sizeof hd + 3LL * (long long)n + 8;
    if (size != expect) {
        fprintf(stderr, "error: checkpoint '%s' has %lld bytes, expected %lld: it is %s\n", path, size, expect,
                size < expect ? "truncated" : "longer than its header says");
        exit(1);
    }
    if (read_array(f, &h, params, n, on_gpu) || read_array(f, &h, m, n, on_gpu) || read_array(f, &h, v, n, on_gpu) ||
        fread(&stored, 8, 1, f) != 1 || stored != h) {
        fprintf(stderr, "error: checkpoint '%s' is corrupt (checksum mismatch)\n", path);
        exit(1);
    }
    fclose(f);
    if (hd.B != want->B || hd.T != want->T)
        fprintf(stderr, "warning: checkpoint was trained with batch %d x %d, this run uses %d x %d\n", hd.B, hd.T,
                want->B, want->T);
    return hd;
}

// printf on rank 0 only: with several ranks, one copy of each line.
void say(const char *fmt, ...) {
    if (comm_rank_id != 0) return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
}

// ---------------------------------------------------------------------------
// The model on its device: the CPU reference (model.h, with optimizer.h's
// AdamW) or the GPU (cuda/model_gpu.h, which keeps AdamW's state on the GPU
// too). These functions are the only places the loop asks which.

typedef struct {
    int cuda;
    GPT cpu;
    Optimizer opt;  // --device cpu
    GpuGPT gpu;     // --device cuda
    float *row;     // --device cuda: one row of logits copied to the host for sampling (Vp floats)
} Net;

void net_zero_grad(Net *n) {
    if (n->cuda) gpu_gpt_zero_grad(&n->gpu);
    else gpt_zero_grad(&n->cpu);
    n->gpu.recompute_pending = 0;  // a new step: forget the last one's recompute time
    n->cpu.recompute_seconds = n->gpu.recompute_seconds = 0.0;
}

float net_forward(Net *n, const int *inp, const int *targets, int B, int T) {
    return n->cuda ? gpu_gpt_forward(&n->gpu, inp, targets, B, T) : gpt_forward(&n->cpu, inp, targets, B, T);
}

void net_backward(Net *n, const int *inp, const int *targets, float dloss) {
    if (n->cuda) gpu_gpt_backward(&n->gpu, dloss);
    else gpt_backward(&n->cpu, inp, targets, dloss);
}

void net_discard_activations(Net *n) {
    if (n->cuda) gpu_discard_activations(&n->gpu);
    else gpt_discard_activations(&n->cpu);
}

const float *net_logits_row(Net *n, int i) {
    if (!n->cuda) return gpt_logits_row(&n->cpu, i);
    gpu_logits_row(&n->gpu, i, n->row);
    return n->row;
}

double net_grad_sum_squares(Net *n) {
    return n->cuda ? gpu_grad_sum_squares(&n->gpu) : gpt_grad_sum_squares(&n->cpu);
}

// AdamW over the parameters this rank owns, then the weights every rank computes with.
void net_step(Net *n, float lr, int t, float grad_scale) {
    if (n->cuda) { gpu_adamw_step(&n->gpu, &n->opt.cfg, lr, t, grad_scale); return; }
    GPT *m = &n->cpu;
    optimizer_step(&n->opt, m->params, m->master_base, gpt_grads(m), m->grads_base, m->dtype, lr, t, grad_scale);
    gpt_sync_params(m);  // stages 1, 2: all-gather the updated shards
}

double net_recompute_seconds(Net *n) { return n->cuda ? gpu_gpt_recompute_seconds(&n->gpu) : n->cpu.recompute_seconds; }

// ---------------------------------------------------------------------------
// Evaluation and sampling

float evaluate(Net *model, Dataset *data, int B, int T, int n_batches) {
    double sum = 0.0;
    for (int k = 0; k < n_batches; k++) {
        data_val_batch(data, B, T, k, n_batches);
        sum += net_forward(model, data->inputs, data->targets, B, T);
        net_discard_activations(model);
    }
    return (float)(sum / n_batches);
}

// Generate `len` bytes after a newline, each from the model's distribution
// over the last T bytes of context (scaled by 1/temperature). Uses the batch
// buffer data->inputs (B*T >= T) as the context.
void sample_text(Net *model, Dataset *data, int T, int len, float temperature, uint64_t *rng) {
    int *ctx = data->inputs, n = 1;
    ctx[0] = '\n';
    say("---- sample ----\n");
    for (int i = 0; i < len; i++) {
        net_forward(model, ctx, NULL, 1, n);
        const float *logits = net_logits_row(model, n - 1);  // the last position predicts the next byte
        float maxv = -INFINITY;
        for (int v = 0; v < 256; v++) if (logits[v] > maxv) maxv = logits[v];
        double sum = 0.0;
        for (int v = 0; v < 256; v++) sum += exp((logits[v] - maxv) / temperature);
        double r = rng_uniform(rng) * sum, acc = 0.0;
        int tok = 255;
        for (int v = 0; v < 256; v++) {
            acc += exp((logits[v] - maxv) / temperature);
            if (acc > r) { tok = v; break; }
        }
        net_discard_activations(model);
        if (n == T) { memmove(ctx, ctx + 1, sizeof(int) * (T - 1)); n--; }  // slide the window
        ctx[n++] = tok;
        if (comm_rank_id == 0) putchar(tok >= 32 || tok == '\n' || tok == '\t' ? tok : '?');
    }
    say("\n----------------\n");
    fflush(stdout);
}

// ---------------------------------------------------------------------------

// One line saying what will run; a dry run leaves out steps and threads.
void print_config_line(const GPTConfig *c, const Options *o) {
    printf("model %s: L%d C%d H%d V%d (padded %d) maxT %d | %.2fM params | batch %d x %d tokens",
           o->model, c->layers, c->channels, c->heads, c->vocab, padded_vocab(c), c->max_seq,
           param_count(c) / 1e6, o->batch, o->seq_len);
    if (o->accum > 1) printf(" x %d accum", o->accum);
    if (o->dtype != DT_FP32) printf(" | %s", dtype_name[o->dtype]);
    if (o->flash) printf(" | flash");
    if (o->zero) printf(" | zero %d", o->zero);
    if (o->ranks > 1) printf(" on %d ranks", o->ranks);
    else if (comm_nranks > 1) printf(" on %d ranks", comm_nranks);
    if (o->ckpt) printf(" | ckpt");
    if (o->cuda) printf(" | cuda");
    if (o->cuda && !o->dry_run) printf(" %s", gpu_name());
    if (!o->dry_run) {
        printf(" | %d steps", o->steps);
#ifdef _OPENMP
        if (!o->cuda) printf(" | %d threads", omp_get_max_threads());
#endif
    }
    printf("\n");
    // --flash on the GPU: the tensor-core kernels take 16-bit runs with head size 64 or 128
    if (o->cuda && o->flash && !o->dry_run && !cu_flash_uses_mma(o->dtype, c->channels / c->heads))
        printf("note: --flash runs on the reference kernels (CUDA cores, slow) for %s with head size %d; the "
               "tensor-core kernels take --dtype bf16 or fp16 with head size 64 or 128\n", dtype_name[o->dtype],
               c->channels / c->heads);
}

// fp16 dynamic loss scaling: halve the scale on an overflow (the step was
// skipped), double it after 1000 good steps in a row. bf16 needs none: it has
// fp32's exponent range, so its gradients neither overflow nor underflow.
enum { LOSS_SCALE_WINDOW = 1000 };

void update_loss_scale(CkptHeader *hd, int skipped) {
    if (skipped) {
        hd->loss_scale = hd->loss_scale / 2 > 1.0f ? hd->loss_scale / 2 : 1.0f;
        hd->good_steps = 0;
    } else if (++hd->good_steps == LOSS_SCALE_WINDOW) {
        hd->loss_scale *= 2;
        hd->good_steps = 0;
    }
}

// Stop early, before allocating anything, if the run cannot fit on the GPU:
// the ledger's device buffers at their peak (the host-side data left out),
// plus headroom for what the ledger cannot see and the context does not yet
// hold (cuBLASLt's state, the kernels' local memory: about 0.3 GiB measured on
// an H100), against the memory free now, after the CUDA context was created.
enum { GPU_HEADROOM = 512 << 20 };
void check_fits_gpu(size_t device_peak_bytes) {
    size_t free_b, total_b;
    gpu_mem_info(&free_b, &total_b);
    if (device_peak_bytes + GPU_HEADROOM > free_b) {
        fprintf(stderr, "error: this run needs %.2f GiB of GPU memory at its peak (plus %.1f GiB headroom for "
                "the CUDA libraries) but %.2f GiB of %.2f GiB are free; use a smaller --model, --batch or "
                "--seq-len, or --ckpt, --flash, --dtype bf16 (./train --device cuda --dry-run shows the "
                "breakdown)\n", device_peak_bytes / 1073741824.0, GPU_HEADROOM / 1073741824.0,
                free_b / 1073741824.0, total_b / 1073741824.0);
        exit(1);
    }
}

// Stop early, with a clear message, if the run cannot fit in this machine.
void check_fits(size_t peak_bytes) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page <= 0) return;
    double have = (double)pages * page;
    if (peak_bytes > have * 0.9) {
        fprintf(stderr, "error: this run needs %.2f GiB at its peak but the machine has %.2f GiB; use a smaller "
                "--model, --batch or --seq-len (./train --dry-run shows the breakdown)\n",
                peak_bytes / 1073741824.0, have / 1073741824.0);
        exit(1);
    }
}

// Are the weights the same on every rank? Each rank hashes the weights it
// holds whole (stages 0 to 2; at stage 3 each rank holds only its shard, so
// there is nothing to compare) and rank 0 compares: 1 yes, 0 no.
int replicas_identical(const GPT *m) {
    if (m->nranks == 1 || m->zero == 3) return 1;
    // hash 8-byte words (any differing bit changes the hash); the tail bytes, if any, with FNV-1a
    size_t bytes = m->nparams * dtype_size(m->dtype), words = bytes / 8;
    const unsigned char *w = compute_weights(m);
    uint64_t h = 0x9E3779B97F4A7C15ULL, x;
    for (size_t i = 0; i < words; i++) {
        memcpy(&x, w + 8 * i, 8);
        h = (h ^ x) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 33;
    }
    h = fnv1a(h, w + 8 * words, bytes - 8 * words);
    uint64_t *all = malloc(sizeof(uint64_t) * m->nranks);
    comm_gather_to_root(&h, all, sizeof h);
    int same = 1;
    for (int r = 1; r < m->nranks; r++) same &= all[r] == all[0];
    free(all);
    return same;
}

// The end of a run with --mem / --mem-json: this rank's ledger against the
// prediction; with several ranks, one line per rank (gathered to rank 0).
typedef struct {
    size_t peak_total, predicted_peak;
    int equal;
    long long comm_bytes;
} RankLedger;

int report_memory(const Options *o, const MemReport *predicted, const MemReport *measured, long long step_comm,
                  size_t P, int zero) {
    RankLedger mine = {measured->peak_total, predicted->peak_total,
                       !memcmp(predicted, measured, sizeof *measured), step_comm};
    RankLedger *all = malloc(sizeof(RankLedger) * comm_nranks);
    comm_gather_to_root(&mine, all, sizeof mine);
    if (o->mem && comm_rank_id == 0) {
        printf("memory ledger: predicted vs measured (bytes)%s\n", comm_nranks > 1 ? ", rank 0" : "");
        print_mem_report(stdout, predicted, measured);
        printf("  activation stack: %zu bytes reserved from the prediction, high-water mark %zu\n",
               g_arena.capacity, measured->peak[MEM_ACTIVATIONS]);
        if (o->cuda) {  // what cudaMemGetInfo sees beyond the ledger's own device buffers
            size_t free_b, total_b;
            gpu_mem_info(&free_b, &total_b);
            size_t used = total_b - free_b, ours = g_ledger.gpu_reserved;
            printf("    %-12s %16lld B: GPU memory in use (%.2f MiB) minus the ledger's device buffers "
                   "(%.2f MiB): the CUDA context, cuBLASLt, allocator rounding; not predicted\n",
                   "runtime", (long long)used - (long long)ours, mib(used), mib(ours));
        }
        for (int r = 0; comm_nranks > 1 && r < comm_nranks; r++)
            printf("  rank %d: peak %zu B measured, %zu B predicted: %s\n", r, all[r].peak_total,
                   all[r].predicted_peak, all[r].equal ? "equal in every row" : "DIFFERENT");
        if (comm_nranks > 1) {
            size_t e = dtype_size(o->dtype);
            printf("  communication: %lld B sent per step by rank 0 (ring volumes: (N-1)/N of each collective); "
                   "textbook %d x params = %zu B\n", all[0].comm_bytes, zero == 3 ? 3 : 2, (zero == 3 ? 3 : 2) * e * P);
        }
    }
    free(all);
    if (!o->mem_json) return 0;
    char path[4096];
    if (comm_rank_id == 0) snprintf(path, sizeof path, "%s", o->mem_json);
    else snprintf(path, sizeof path, "%s.rank%d", o->mem_json, comm_rank_id);
    if (write_mem_json(path, predicted, measured)) {
        fprintf(stderr, "error: cannot write '%s'\n", path);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    Options o = parse_args(argc, argv);
    GPTConfig cfg = resolve_config(&o);
#ifdef _OPENMP
    if (o.threads > 0) omp_set_num_threads(o.threads);
#endif
    int B = o.batch, T = o.seq_len;
    setvbuf(stdout, NULL, _IOLBF, 0);

    // 1. predict the memory from the config alone
    long long corpus = file_size(o.data);
    RunShape shape = {B, T, corpus > 0 ? (size_t)corpus : 0, o.flash, o.ckpt, o.dtype, o.zero, o.ranks, o.cuda};
    MemReport predicted;
    if (o.dry_run) {
        predict_memory(cfg.layers, cfg.channels, cfg.heads, cfg.vocab, cfg.max_seq, &shape, &predicted);
        print_config_line(&cfg, &o);
        if (corpus < 0) printf("note: '%s' not found; the data row counts only the batch buffers\n", o.data);
        printf("predicted %smemory%s (dry run: nothing allocated; total peak = the largest total of any phase)\n",
               o.cuda ? "GPU " : "", o.ranks > 1 ? " of each rank" : "");
        print_prediction(stdout, &predicted);
        if (o.mem_json && write_mem_json(o.mem_json, &predicted, NULL)) {
            fprintf(stderr, "error: cannot write '%s'\n", o.mem_json);
            return 1;
        }
        return 0;
    }

    // 2. the ranks: one process, or N under mpirun; and the GPU, with --device cuda
    comm_init(&argc, &argv);
    int rank = comm_rank_id, nranks = comm_nranks;
    if (o.ranks) usage_error("--ranks is for --dry-run; a real run gets its ranks from mpirun -np N");
    if (o.cuda && nranks > 1) {
        fprintf(stderr, "error: --device cuda runs on one rank for now: ZeRO on the GPU is not built yet; run "
                "without mpirun, or without --device cuda\n");
        return 1;
    }
    char why[256];
    if (o.cuda && gpu_open(why, sizeof why)) {
        fprintf(stderr, "error: --device cuda: %s; train on the CPU instead (--device cpu)\n", why);
        return 1;
    }
    if (o.zero && nranks == 1)
        say("note: --zero %d on one rank: nothing to shard, training as usual; shard with `mpirun -np 4 ./train "
            "--zero %d`%s\n", o.zero, o.zero, comm_have_mpi() ? "" : " (this build has no MPI: install "
            "libopenmpi-dev and rebuild)");
    shape.ranks = nranks;
    predict_memory(cfg.layers, cfg.channels, cfg.heads, cfg.vocab, cfg.max_seq, &shape, &predicted);
    if (o.cuda) check_fits_gpu(predicted.peak_total - predict_host_bytes_gpu(padded_vocab(&cfg), &shape));
    else check_fits(predicted.peak_total * (size_t)nranks);

    // 3. build: data, model, optimizer (every buffer through the ledger)
    Dataset data;
    if (comm_any(data_load(&data, o.data, B, T, o.seed) != 0)) {
        if (nranks > 1) fprintf(stderr, "error: rank %d stops: a rank could not load its data\n", rank);
        return 1;
    }
    // every rank must draw the same batch windows: check that they start from the same state
    uint64_t rng_root = data.rng;
    comm_broadcast(&rng_root, sizeof rng_root, 0);
    if (comm_any(rng_root != data.rng)) {
        fprintf(stderr, "error: rank %d: the ranks disagree on the data stream (same --seed on every rank?)\n", rank);
        return 1;
    }
    Net net;
    memset(&net, 0, sizeof net);
    net.cuda = o.cuda;
    GPT *model = &net.cpu;  // --device cpu
    Optimizer *opt = &net.opt;
    AdamWConfig adam = {o.lr, 0.9f, 0.95f, 1e-8f, o.weight_decay, o.warmup, o.steps, o.min_lr_frac};
    size_t activation_stack = predicted.peak[MEM_ACTIVATIONS];  // the stack is sized from the prediction
    size_t nparams = param_count(&cfg), own_lo = 0, own_hi = nparams;
    float *ck_w, *ck_m, *ck_v;  // this rank's part of the state: the fp32 weights, m and v of the parameters it owns
    if (o.cuda) {
        gpu_gpt_build(&net.gpu, &cfg, B, T, o.dtype, o.flash, o.ckpt);
        gpu_arena_reserve(activation_stack);
        gpu_gpt_init(&net.gpu, o.seed);
        opt->cfg = adam;
        net.row = malloc(sizeof(float) * padded_vocab(&cfg));
        ck_w = net.gpu.master, ck_m = net.gpu.adam_m, ck_v = net.gpu.adam_v;
    } else {
        gpt_build(model, &cfg, B, T, o.dtype, o.flash, o.ckpt, o.zero, rank, nranks);
        arena_reserve(activation_stack);
        gpt_init(model, o.seed);
        if (model->zero >= 1) optimizer_build(opt, &adam, &cfg, model->own_lo, model->own_hi, model->shard);
        else optimizer_build(opt, &adam, &cfg, 0, model->nparams, model->padded);
        own_lo = model->own_lo, own_hi = model->own_hi;
        ck_w = model->params + (own_lo - model->master_base);
        ck_m = opt->m + (own_lo - opt->lo), ck_v = opt->v + (own_lo - opt->lo);
    }
    int zero = o.cuda ? 0 : model->zero;
    uint64_t sample_rng = rng_seed(o.seed ^ 0x5A3B1E);

    CkptHeader hd = {cfg.layers, cfg.channels, cfg.heads, cfg.vocab, cfg.max_seq, B, T, 0, 0, 0, nparams,
                     o.dtype, 0, o.dtype == DT_FP16 ? o.loss_scale : 1.0f, 0, zero, nranks, rank, own_lo, own_hi};
    char save_path[4096] = "", resume_path[4096] = "";
    if (o.save) snprintf(save_path, sizeof save_path, rank ? "%s.rank%d" : "%s", o.save, rank);
    if (o.resume) snprintf(resume_path, sizeof resume_path, rank ? "%s.rank%d" : "%s", o.resume, rank);
    int start_step = 0;
    if (o.resume) {
        hd = ckpt_load(resume_path, &hd, ck_w, ck_m, ck_v, o.cuda);
        if (o.cuda) {
            gpu_gpt_sync_params(&net.gpu);
        } else {
            if (zero == 0 && nranks > 1) {  // stage 0 replicas: every rank gets every rank's part
                comm_allgather_block(model->params, (long long)model->shard * sizeof(float));
                comm_allgather_block(opt->m, (long long)model->shard * sizeof(float));
                comm_allgather_block(opt->v, (long long)model->shard * sizeof(float));
            }
            gpt_sync_params(model);
        }
        start_step = hd.step;
        data.rng = hd.data_rng;
        sample_rng = hd.sample_rng;
        say("resumed from %s at step %d\n", o.resume, start_step);
    }
    if (comm_rank_id == 0) print_config_line(&cfg, &o);

    MemReport measured;
    memset(&measured, 0, sizeof measured);
    measured.phase[PHASE_INIT] = ledger_snapshot();

    FILE *log = NULL;
    if (o.log && rank == 0) {
        log = fopen(o.log, "w");
        if (!log) { fprintf(stderr, "error: cannot write the log '%s': %s\n", o.log, strerror(errno)); return 1; }
        fprintf(log, "step,loss,val_loss,lr,grad_norm,ms,tokens,replicas_identical\n");
    }

    // 4. the training loop: forward, backward, reduce, step
    double t_start = now_seconds(), t_train = 0.0;
    long long tokens_seen = 0, first_step_comm = 0;
    float val_loss = NAN;
    int first = 1;
    for (int step = start_step; step < o.steps; step++) {
        double t0 = now_seconds();
        comm_bytes_sent = 0;
        g_ledger.trace = o.trace && first && rank == 0;
        if (g_ledger.trace) printf("trace of step %d: the activation stack%s\n", step + 1,
                                   zero ? ", ZeRO gathers and reductions" : "");

        net_zero_grad(&net);
        float loss = 0.0f, scale = hd.loss_scale;  // fp16: the loss is scaled so small gradients survive
        float dloss = scale / ((float)B * T * o.accum * nranks);  // the mean over the global batch
        for (int micro = 0; micro < o.accum; micro++) {  // --accum: gradients add up over micro-batches
            data_next_train(&data, B, T, rank, nranks);
            loss += net_forward(&net, data.inputs, data.targets, B, T) / o.accum;    // forward
            if (first && micro == 0) measured.phase[PHASE_FORWARD] = ledger_snapshot();
            net_backward(&net, data.inputs, data.targets, dloss);                  // backward
            if (first && micro == 0) measured.phase[PHASE_BACKWARD] = ledger_snapshot();
        }
        if (nranks > 1 && zero <= 1) reduce_full_grads(model);                   // reduce (stages 0, 1)
        loss = (float)(comm_sum_ordered(loss) / nranks);  // the global batch's mean loss, for the step line
        double norm = sqrt(net_grad_sum_squares(&net)) / scale;
        float lr = lr_at(&adam, step);
        int skipped = !isfinite(norm);  // fp16 overflow: skip the step, halve the scale
        if (skipped && o.dtype != DT_FP16) {
            fprintf(stderr, "error: the gradients are not finite at step %d; lower --lr\n", step + 1);
            return 1;
        }
        if (!skipped) {
            hd.updates++;
            net_step(&net, lr, hd.updates, clip_scale(norm, o.clip) / scale);    // step
        }
        if (o.dtype == DT_FP16) update_loss_scale(&hd, skipped);
        if (first) {
            measured.phase[PHASE_STEP] = ledger_snapshot();
            first_step_comm = comm_bytes_sent;
        }
        g_ledger.trace = 0;
        first = 0;

        double dt = now_seconds() - t0;
        t_train += dt;
        long long step_tokens = (long long)B * T * o.accum * nranks;
        tokens_seen += step_tokens;
        say("step %5d/%d | loss %.4f | lr %.2e | norm %7.4f | %8.1f ms | %8.0f tok/s | mem %.1f MiB",
            step + 1, o.steps, loss, lr, norm, dt * 1e3, step_tokens / dt, mib(g_ledger.peak_total));
        if (o.accum > 1 || nranks > 1) say(" | tokens %d micro, %lld step", B * T, step_tokens);
        if (nranks > 1) say(" | sent %.2f MiB", comm_bytes_sent / 1048576.0);
        if (o.ckpt) say(" | recompute %.1f ms", net_recompute_seconds(&net) * 1e3);
        if (skipped) say(" | skipped: inf/nan gradients, loss scale %g -> %g", scale, hd.loss_scale);
        else if (o.dtype == DT_FP16) say(" | loss scale %g", scale);
        say("\n");
        if (!isfinite(loss) && !skipped) {
            fprintf(stderr, "error: the loss is %f at step %d; lower --lr or raise --warmup\n", loss, step + 1);
            return 1;
        }

        int last = step + 1 == o.steps || step + 1 == o.stop_after, evaluated = 0;
        if ((o.eval_every && (step + 1) % o.eval_every == 0) || last) {
            val_loss = evaluate(&net, &data, B, T, o.eval_batches);
            evaluated = 1;
            say("val loss %.4f (%d batches of %d x %d)\n", val_loss, o.eval_batches, B, T);
        }
        if (o.log) {  // every rank takes part in the replica check; rank 0 writes
            int same = o.cuda ? 1 : replicas_identical(model);
            if (log) {
                fprintf(log, "%d,%.9g,", step + 1, loss);
                if (evaluated) fprintf(log, "%.9g", val_loss);
                fprintf(log, ",%.9g,%.9g,%.3f,%lld,%d\n", lr, norm, dt * 1e3, step_tokens, same);
            }
        }
        if (o.sample_len && ((o.sample_every && (step + 1) % o.sample_every == 0) || last))
            sample_text(&net, &data, T, o.sample_len, o.temperature, &sample_rng);
        if (o.save && ((o.save_every && (step + 1) % o.save_every == 0) || last)) {
            hd.step = step + 1;
            hd.data_rng = data.rng;
            hd.sample_rng = sample_rng;
            if (ckpt_save(save_path, &hd, ck_w, ck_m, ck_v, o.cuda)) return 1;
            say("saved checkpoint %s%s at step %d\n", o.save, nranks > 1 ? " (and .rank1 ... for the other ranks)" : "",
                step + 1);
        }
        if (step + 1 == o.stop_after) break;
    }

    // 5. summary
    int end_step = o.stop_after && o.stop_after < o.steps ? o.stop_after : o.steps;
    int steps_run = end_step > start_step ? end_step - start_step : 0;
    say("done: %d steps in %.1f s (%.0f tok/s training) | final val loss %.4f | peak memory %.2f MiB%s\n",
        steps_run, now_seconds() - t_start, t_train > 0 ? tokens_seen / t_train : 0.0, val_loss,
        mib(g_ledger.peak_total), nranks > 1 ? " (rank 0)" : "");
    if (steps_run > 0) {
        memcpy(measured.peak, g_ledger.peak, sizeof measured.peak);
        measured.peak_total = g_ledger.peak_total;
        if ((o.mem || o.mem_json) && report_memory(&o, &predicted, &measured, first_step_comm, nparams, zero))
            return 1;
    }
    if (log) fclose(log);
    if (o.cuda) {
        gpu_gpt_free(&net.gpu);
        gpu_arena_release();
        free(net.row);
    } else {
        optimizer_free(opt);
        gpt_free(model);
        arena_release();
    }
    data_free(&data);
    comm_finalize();
    return 0;
}
