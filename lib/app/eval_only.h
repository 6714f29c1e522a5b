// app/eval_only.h — --eval-only: evaluate and sample a saved state, its
// weights held in fp32 or (--quantize) in bf16, int8 or int4, next to the
// other formats.
#ifndef GPTMEM_EVAL_ONLY_H
#define GPTMEM_EVAL_ONLY_H

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "app/launch.h"
#include "app/net.h"
#include "app/report.h"
#include "app/sample.h"
#include "cpu/eval.h"
#include "cpu/gpt.h"
#include "cpu/lora.h"
#include "io/init_file.h"
#include "io/quant.h"
#include "io/state_load.h"
#include "memory/predict.h"

// --eval-only: evaluate and sample a saved state, its weights held in fp32 or
// (--quantize) in bf16, int8 or int4, next to the other formats.

// Hold the weights [lo, lo + n) from buf in the eval model; exits with a
// message if one is not finite.
void eval_keep(GPT *model, const float *buf, size_t lo, size_t n, const char *path) {
    size_t bad = eval_store(model, buf, lo, n);
    if (!bad) return;
    fprintf(stderr, "error: '%s' has a weight that is %s (parameter %zu): it cannot be evaluated or quantized\n", path,
            isnan(buf[bad - 1 - lo]) ? "nan" : "infinite", bad - 1);
    exit(1);
}

// Read --init's weights (io/llmc.h) into the eval model, a piece at a time.
void eval_load_init(GPT *model, const WeightSource *from, const char *path) {
    for (int i = 0; i < model->eval->quant.ntensors; i++) {
        const QuantTensor *t = &model->eval->quant.tensors[i];
        for (size_t at = 0; at < t->count; at += model->piece) {
            size_t n = t->count - at < model->piece ? t->count - at : model->piece, lo = t->offset + at;
            if (from->read(from->file, model->w_piece, lo, lo + n)) {
                fprintf(stderr, "error: reading the weights of '%s' failed part-way\n", path);
                exit(1);
            }
            eval_keep(model, model->w_piece, lo, n, path);
        }
    }
}

// Read the state's weights into the eval model, a few blocks at a time
// through its piece buffer, tensor by tensor (so each read covers whole
// blocks of QUANT_BLOCK); Adam's m and v are read past, for the checksum.
// Returns the state's header; exits on a bad file or a weight that is not finite.
StateHeader eval_load(GPT *model, const char *path, StateReader *r) {
    const GPTConfig *c = &model->cfg;
    StateHeader want = state_model_header(c);
    *r = state_open(path, &want, READ_WEIGHTS);
    float *buf = model->w_piece;
    size_t K = model->piece;  // a multiple of QUANT_BLOCK
    for (int i = 0; i < model->eval->quant.ntensors; i++) {
        const QuantTensor *t = &model->eval->quant.tensors[i];
        for (size_t at = 0; at < t->count; at += K) {
            size_t n = t->count - at < K ? t->count - at : K;
            state_read(r, buf, n * sizeof(float), 0);
            eval_keep(model, buf, t->offset + at, n, path);
        }
    }
    for (size_t left = 2 * model->nparams; left > 0;) {  // m and v: read for the checksum only
        size_t n = left < K ? left : K;
        state_read(r, buf, n * sizeof(float), 0);
        left -= n;
    }
    state_close(r);
    return r->header;
}

// How far `format` moves the weights of the file: RMS(rounded - w) / RMS(w)
// over every parameter, each tensor read through the piece buffer and
// rounded a block at a time.
double weight_error(GPT *model, const WeightSource *from, int format) {
    double err = 0, sum = 0;
    float *w = model->w_piece;
    for (int i = 0; i < model->eval->quant.ntensors; i++) {
        const QuantTensor *t = &model->eval->quant.tensors[i];
        for (size_t at = 0; at < t->count; at += model->piece) {
            size_t n = t->count - at < model->piece ? t->count - at : model->piece;
            if (from->read(from->file, w, t->offset + at, t->offset + at + n)) return NAN;
            for (size_t b = 0; b < n; b += QUANT_BLOCK) {
                float block[QUANT_BLOCK];
                size_t len = n - b < QUANT_BLOCK ? n - b : QUANT_BLOCK;
                memcpy(block, w + b, len * sizeof(float));
                quant_round_trip(&model->eval->quant, format, block, t->offset + at + b, len);
                for (size_t j = 0; j < len; j++) {
                    err += ((double)block[j] - w[b + j]) * ((double)block[j] - w[b + j]);
                    sum += (double)w[b + j] * w[b + j];
                }
            }
        }
    }
    return sqrt(err / (sum > 0 ? sum : 1));
}

// Every format's row, from the file (the state's fp32 weights, or --init's):
// each piece read and rounded through the format as the model asks for it;
// the held format's row is this run's (its loss `held`, its `held_bytes`).
// 0, or 1 after a message.
int print_formats(Net *net, Dataset *data, const Settings *s, const WeightSource *from, float held, size_t held_bytes) {
    GPT *model = &net->cpu;
    const GPTConfig *cfg = &s->cfg;
    InferenceBytes inf = predict_inference(cfg, 1, 1, 4);
    printf("  %-7s %4s %14s %12s %10s %9s\n", "weights", "bits", "bytes", "weight error", "val loss", "vs fp32");
    float fp32_loss = 0;
    for (int f = QF_FP32; f < QF_EVAL_N; f++) {
        float loss = held;
        double werr = weight_error(model, from, f);
        if (f != s->quantize) {
            eval_from_file(model, from, f);
            loss = evaluate(net, data, s->batch, s->seq_len, s->eval_batches, NULL);
            eval_from_file(model, NULL, 0);
        }
        if (f == QF_FP32) fp32_loss = loss;
        size_t bytes = f == s->quantize ? held_bytes : inference_weight_bytes(&inf, quant_bits[f]);
        printf("  %-7s %4d %14zu %11.4f%% %10.6f", quant_name[f], quant_bits[f], bytes, 100 * werr, loss);
        if (f != QF_FP32) printf(" %+9.6f", loss - fp32_loss);
        else printf(" %9s", "");
        printf("%s\n", f == s->quantize ? "  <- held in memory (this run's weights)" : "");
    }
    printf("  weight error: RMS(rounded - w) / RMS(w) over all parameters; the rows not held read the fp32 "
           "weights from the file a piece at a time, rounded through the format as the model asks for "
           "them: the same numbers, no memory held\n");
    return 0;
}

// A WeightSource read as llm.c's export asks (io/llmc.h llmc_export_range: n weights from `at`).
static void source_get(const void *ctx, size_t at, float *dst, size_t n) {
    const WeightSource *from = ctx;
    if (from->read(from->file, dst, at, at + n)) memset(dst, 0, n * sizeof(float));  // (the file was read whole once)
}

// --eval-only --export FILE: the weights evaluated (the state's or --init's,
// fp32) as llm.c's model file. 0, or 1 after a message.
int export_from(const WeightSource *from, const GPTConfig *c, const char *path) {
    return export_weights(path, c, 0, param_count(c), source_get, from);
}

// Where --eval-only's weights come from: --init's llm.c file or --resume's
// state, and what the comparison rows read them through.
typedef struct {
    InitFile init;
    StateWeights state;  // (f open while the rows read it)
    WeightSource from;
    char what[64];       // "llm.c's weights", "the Hugging Face model's weights", or the state's step
} EvalFiles;

// Read the weights into the eval model; 0, or 1 after a message.
int eval_weights(GPT *model, const Settings *s, EvalFiles *e) {
    char err[1400];
    memset(e, 0, sizeof *e);
    if (s->init) {
        if (init_file_open(&e->init, s->init, err, sizeof err)) { fprintf(stderr, "error: --init: %s\n", err); return 1; }
        e->from = init_file_source(&e->init);
        eval_load_init(model, &e->from, s->init);
        snprintf(e->what, sizeof e->what, "%s", e->init.hf ? "the Hugging Face model's weights" : "llm.c's weights");
        return 0;
    }
    StateReader state;
    snprintf(e->what, sizeof e->what, "step %d", eval_load(model, s->resume, &state).step);
    e->state = (StateWeights){fopen(s->resume, "rb"), state.data_at};
    e->from = (WeightSource){0, state_weights_read, &e->state};
    if (!e->state.f) { fprintf(stderr, "error: cannot reopen '%s': %s\n", s->resume, strerror(errno)); return 1; }
    return 0;
}

int eval_only_run(Settings *s) {
    const GPTConfig *cfg = &s->cfg;
    int B = s->batch, T = s->seq_len;
    if (open_ranks_and_device(NULL, NULL, s)) return 1;
    if (comm_nranks > 1) {
        fprintf(stderr, "error: --eval-only runs in one process; start it without mpirun\n");
        return 1;
    }
    if (s->dtype != DT_FP32)
        printf("note: --eval-only computes in fp32 and holds the weights in fp32 or in --quantize's format; "
               "--dtype %s is for training (16-bit weights: --quantize bf16)\n", dtype_name[s->dtype]);
    MemReport predicted, measured;
    memset(&measured, 0, sizeof measured);
    predict_memory(s, &predicted);
    check_fits(predicted.peak_total);
    if (s->export_to && outputs_lack_room(s, NULL, 0)) return 1;
    Dataset data;
    if (load_data(&data, s)) {
        data_free(&data);
        return 1;
    }
    Net net;
    memset(&net, 0, sizeof net);
    GPT *model = &net.cpu;
    gpt_build_eval(model, s);
    arena_reserve(predicted.stack_peak);
    EvalFiles files;
    if (eval_weights(model, s, &files)) return 1;
    if (gpt_frozen(model)) lora_start(model), adapters_from_folder(s, lora_put_host, model->lora.w);  // --lora: on top
    measured.phase[PHASE_INIT] = ledger_snapshot();
    print_config_line(cfg, s);
    printf("evaluating %s (%s): %d validation batches of %d x %d, the weights held in %s\n", s->init ? s->init : s->resume,
           files.what, s->eval_batches, B, T, quant_name[s->quantize]);

    // the held weights: the run's loss, its ledger
    float held = evaluate(&net, &data, B, T, s->eval_batches, &measured.phase[PHASE_FORWARD]);
    measured.phase[PHASE_BACKWARD] = measured.phase[PHASE_STEP] = ledger_snapshot();
    size_t held_bytes = g_ledger.live[MEM_PARAMS] + g_ledger.live[MEM_QWEIGHTS] + g_ledger.live[MEM_QSCALES];

    int failed = print_formats(&net, &data, s, &files.from, held, held_bytes) ||
                 (s->export_to && export_from(&files.from, cfg, s->export_to));
    if (files.state.f) fclose(files.state.f);
    if (s->init) init_file_close(&files.init);
    if (failed) return 1;
    uint64_t rng = sample_stream(s->seed);
    if (s->sample_len) sample_text(&net, &data, s, &rng);
    memcpy(measured.peak, g_ledger.peak, sizeof measured.peak);
    measured.peak_total = g_ledger.peak_total;
    memcpy(measured.peak_at, g_ledger.peak_at, sizeof measured.peak_at);
    measured.stack_peak = g_arena.high;
    int bad = (s->mem || s->mem_json) && report_memory(s, &predicted, &measured, 0, 0, 0, model->nparams, 0, NULL);
    gpt_free_eval(model);
    arena_release();
    data_free(&data);
    comm_finalize();
    return bad;
}

#endif
