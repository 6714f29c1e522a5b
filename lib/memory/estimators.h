// memory/estimators.h — what the calculators people quote say for the run's own
// setting (--estimators), beside gptmem's ledger, each by its published formula:
//   DeepSpeed's estimate_zero2_model_states_mem_needs and
//   estimate_zero3_model_states_mem_needs (deepspeed/runtime/zero/stage_1_and_2.py,
//   stage3.py): the model states per GPU and per CPU, with and without offload;
//   accelerate's estimate-memory (accelerate/commands/estimate.py,
//   estimate_training_usage): "Training using Adam", the largest of its terms;
//   Megatron-LM's report_theoretical_memory (megatron/training/theoretical_memory_usage.py):
//   weights and optimizer, and activations (with --tp the most loaded shard's and a rank's, its formula
//   with sequence parallelism where --sp and selective recomputation (--recompute attn) are on);
//   with --lora, gpu_poor (RahulSChand/gpu_poor, src/App.js getAllComputedData), the calculator
//   people bring for LoRA and QLoRA (the others have no input for them: they bill full fine-tuning).
// Their inputs are gptmem's: Ψ its parameter count, the largest layer the
// largest single tensor (the embedding table, V x C), the ranks as GPUs on one
// machine, B, T, C, H, KVH, F, V, L: the whole model's under --tp (model_whole: DeepSpeed's and
// accelerate's calculators take no tensor parallelism and bill it whole). What each leaves out is what the ledger
// counts and they do not: the gaps are the lesson ("the calculators disagree").
// Only the config enters here: a floor below the ledger, like the predictor.
#ifndef GPTMEM_ESTIMATORS_H
#define GPTMEM_ESTIMATORS_H

#include <math.h>
#include <stdio.h>
#include <string.h>
#include "core/config.h"
#include "core/dtype.h"
#include "core/saved.h"
#include "core/settings.h"
#include "memory/report.h"

typedef struct {
    const char *source, *setting;  // the calculator, and which of its settings
    double gpu, cpu;               // bytes it gives per GPU and per CPU (machine); cpu < 0: it says nothing
    int this_run;                  // the setting that is this run's
} Estimate;

enum { MAX_ESTIMATES = 12 };

// DeepSpeed's "largest layer": the largest module's own parameters, here the largest tensor.
double largest_layer_params(const GPTConfig *c) {
    double C = c->channels, table = padded_vocab(c) * C, fc = cfg_ffn(c) * C, qkv = qkv_width(c) * C;  // F = 4C: GPT-2
    return fmax(table, fmax(fc, qkv));
}

// Megatron-LM's parameter count (compute_weight_and_optimizer_memory): the
// blocks' matrices and norms (no biases, no learned positions), the table, an
// untied head again.
double megatron_params(const GPTConfig *c) {
    double h = c->channels, a = c->heads, g = is_llama(c) ? c->kv_heads : c->heads, F = cfg_ffn(c);
    double norm = is_llama(c) ? 1 : 2, gated = is_llama(c) ? 3.0 / 2 : 1;
    double attn = 2 * h * h * ((1 + g / a) * (head_size(c) * a / h));
    double layer = 2 * h * (F * gated + norm) + attn, table = h * padded_vocab(c);
    return layer * c->layers + norm * h + table + (c->untied ? table : 0);
}

// Megatron-LM's activations on a rank of a tensor-parallel group of t (1: none), pipeline parallel 1.
// Without sequence parallelism (compute_activation_memory_without_sp): sbh (10 + 24/t) a layer, the
// embedding's input and dropout (8sb + sbh), the logits (sb Vp/t) and the final norm's output in 16 bits,
// times 1.05. With it and selective recomputation (compute_activation_memory): sbh (18 + 4F/h) a layer,
// the embedding's 8sb + sbh, the head's input and loss 4sbh (1 + Vp/h), all over t.
double megatron_activations(const Settings *s, int sp) {
    const GPTConfig *w = model_whole(s);
    double sb = (double)s->seq_len * s->batch, h = w->channels, V = padded_vocab(w), t = s->tp > 1 ? s->tp : 1;
    if (sp) return (sb * h * (18 + 4.0 * cfg_ffn(w) / h) * w->layers + 8 * sb + sb * h + sb * h * 4 * (1 + V / h)) / t;
    double act = sb * h * (10 + 24.0 / t) * w->layers + 8 * sb + sb * h;
    return (act + (sb * V / t + sb * h) * 2) * 1.05;
}

// gpu_poor's training total for kind 0 (full, Adam), 1 (LoRA, Adam) or 2 (QLoRA, Adam), no other quantization,
// in its MB (2^20 B), rounded up as it shows it. Its own parameter count p = 2 V C + 4 L C^2 + 3 L F C in
// 2 bytes (QLoRA: a quarter, less 2p/64, plus 6% of the 2-byte size); activations (2 bytes each) of
// T tokens a layer: attention 3TC + 2TC + 3 TC + T^2 H (2 + 4 + 2 bytes), the MLP 2TC + 6TF, the norms
// 8T + 6TC, times L and the batch, x0.15 with checkpointing; gradients and Adam 6p in full, and for
// LoRA L x 8 C x 2 x 4 x 3 x 2 bytes (a rank of 8 on two maps a layer, whatever --lora says), for QLoRA
// L x 8 C x 0.5 x 4 x 3 plus 0.75 x 50 x (15 C + 6 F) L x sqrt(T / 50) a sequence; and 650 MB for CUDA.
double gpu_poor_training(const Settings *s, int kind) {
    const GPTConfig *c = &s->cfg;
    double V = c->vocab, h = c->channels, H = c->heads, I = cfg_ffn(c), L = c->layers, T = s->seq_len, B = s->batch;
    double MB = 1048576.0, p = V * h * 2 + L * 4 * h * h + L * 3 * I * h, size = p * 2 / MB, model = size;
    if (kind == 2) model = size / 4 - p * 2 / (64 * MB) + 0.06 * size;
    double attn = T * h * 3 * 2 + T * h * 2 * 2 + T * T * H * 2 + T * T * H * 4 + T * T * H * 2 + 3 * T * h * 2;
    double ffn = 2 * h * T * 2 + 2 * 5 * T * I + I * T * 2, norm = T * 4 * 2 + T * h * 2 * 6;
    double act = (attn + ffn + norm) * L * B / MB * (s->ckpt ? 0.15 : 1.0);
    double sqrt_len = T / 50 > 1 ? sqrt(T / 50) : 1, extra = 0.75 * (15 * h + 6 * I) * L * 50 * sqrt_len;
    double states = kind == 0 ? 6 * p : kind == 1 ? L * 8 * h * 2 * 4 * 3 * 2 : L * 8 * h * 0.5 * 4 * 3 + extra * B;
    return ceil(model + states / MB + act + 650) * MB;
}

// Every calculator's numbers for setting `s`; returns how many (at most MAX_ESTIMATES).
int other_estimates(const Settings *s, Estimate *e) {
    const GPTConfig *w = model_whole(s);
    double P = (double)param_count(w), L = largest_layer_params(w), factor = 1.5, gpus_factor = 1.0 / 1;
    double N = s->ranks > 1 ? s->ranks : 1;  // the ranks, as GPUs of one machine (num_nodes 1)
    int stage = s->ranks > 1 ? s->zero : 0, opt = !!(s->offload & OFFLOAD_OPT), params = !!(s->offload & OFFLOAD_PARAMS);
    int n = 0, mixed = s->dtype != DT_FP32, tp = s->tp > 1 ? s->tp : 1, dp = (int)N / tp;
    int sp = s->sp && (s->recompute & REC_ATTN);  // (Megatron's sequence-parallel formula: with selective recompute)
    const char *z3 = "DeepSpeed estimate_zero3_model_states_mem_needs", *z2 = "DeepSpeed estimate_zero2_model_states_mem_needs";
    e[n++] = (Estimate){z3, "offload params and optimizer", 4 * L, floor(P * 18 * gpus_factor * factor), stage == 3 && params};
    e[n++] = (Estimate){z3, "offload optimizer", 4 * L + floor(2 * P / N), floor(P * 16 * gpus_factor * factor),
                        stage == 3 && opt && !params};
    e[n++] = (Estimate){z3, "no offload", 4 * L + floor(18 * P / N), floor(L * 4 * N * factor), stage == 3 && !opt};
    e[n++] = (Estimate){z2, "offload optimizer", 2 * P, floor(P * fmax(4 * N, 16) * factor), stage < 3 && opt};
    e[n++] = (Estimate){z2, "no offload", 2 * P + floor(18 * P / N), floor(P * 4 * N * factor), stage < 3 && !opt};
    // accelerate: the fp32 model's bytes; "Training using Adam" is the largest of model, gradients, optimizer, step
    double fp32 = 4 * P, fp16 = floor(fp32 / 2);
    double train = mixed ? fmax(fmax(fp32, fp32 + fp16), fp32 * 2) : fp32 * 4;
    e[n++] = (Estimate){"accelerate estimate-memory, Training using Adam", mixed ? "float16 (mixed precision)" : "float32",
                        train, -1, 1};
    double per_param = stage >= 1 && dp > 1 ? 6 + 12.0 / dp : 18, states = megatron_params(w) / tp * per_param;
    e[n++] = (Estimate){"Megatron-LM report_theoretical_memory", stage >= 1 && dp > 1 ? "weights and optimizer, distributed optimizer"
                        : "weights and optimizer", states, -1, 1};
    e[n++] = (Estimate){"Megatron-LM report_theoretical_memory", sp ? "activations (sequence parallel, selective)"
                        : "activations (no sequence parallel)", megatron_activations(s, sp), -1, 1};
    for (int i = 0; tp > 1 && i < n - 2; i++) e[i].this_run = 0;  // (--tp: DeepSpeed's and accelerate's have none)
    if (!s->lora.rank) return n;
    for (int i = 0; i < n; i++) e[i].this_run = 0;  // (they bill full fine-tuning: none has LoRA)
    int qlora = s->base_format == QF_NF4;
    const char *gp = "gpu_poor, training";
    e[n++] = (Estimate){gp, "full, Adam", gpu_poor_training(s, 0), -1, 0};
    e[n++] = (Estimate){gp, "LoRA, Adam", gpu_poor_training(s, 1), -1, !qlora};
    e[n++] = (Estimate){gp, "QLoRA, Adam", gpu_poor_training(s, 2), -1, qlora};
    return n;
}

// "5.70 GiB", "3.10 MiB", "12.00 KiB": two decimals in the unit that fits (the JSON has the bytes).
const char *in_units(double b, char *out, size_t n) {
    if (b <= 0) snprintf(out, n, b < 0 ? "-" : "0 B");
    else if (b >= 1073741824.0) snprintf(out, n, "%.2f GiB", b / 1073741824.0);
    else if (b >= 1048576.0) snprintf(out, n, "%.2f MiB", b / 1048576.0);
    else snprintf(out, n, "%.2f KiB", b / 1024.0);
    return out;
}

// The table: every calculator's line, then gptmem's own (predicted; measured after a real run, else NULL).
// gptmem's bytes per CPU as DeepSpeed counts them: the machine's, every rank's host memory (a rank's
// times the N ranks).
double machine_host_bytes(const Settings *s, const MemReport *r) {
    return (double)(s->ranks > 1 ? s->ranks : 1) * (double)(r->peak_at[LOC_HOST] + r->peak_at[LOC_PINNED]);
}

void print_estimators(FILE *f, const Settings *s, const MemReport *pred, const MemReport *meas) {
    Estimate e[MAX_ESTIMATES];
    int n = other_estimates(s, e);
    int N = s->ranks > 1 ? s->ranks : 1;
    fprintf(f, "what other calculators say for this setting (%zu parameters, the largest layer %.0f, %d GPU%s on one "
            "machine%s), beside gptmem's; GiB = 2^30 B, which DeepSpeed prints as \"GB\":\n", param_count(model_whole(s)),
            largest_layer_params(model_whole(s)), N, N > 1 ? "s" : "", s->offload ? ", --offload" : "");
    fprintf(f, "  %-50s %-46s %12s %12s\n", "calculator", "its setting (* this run's)", "per GPU", "per CPU");
    char a[32], b[32];
    for (int i = 0; i < n; i++)
        fprintf(f, "  %-50s %c %-44s %12s %12s\n", i && !strcmp(e[i].source, e[i - 1].source) ? "" : e[i].source,
                e[i].this_run ? '*' : ' ', e[i].setting, in_units(e[i].gpu, a, sizeof a), in_units(e[i].cpu, b, sizeof b));
    fprintf(f, "  %-50s %-46s %12s %12s\n", "gptmem, predicted", "this run: everything, activations too",
            in_units(pred->peak_at[LOC_DEVICE], a, sizeof a), in_units(machine_host_bytes(s, pred), b, sizeof b));
    if (meas)
        fprintf(f, "  %-50s %-46s %12s %12s\n", "gptmem, measured", "", in_units(meas->peak_at[LOC_DEVICE], a, sizeof a),
                in_units(machine_host_bytes(s, meas), b, sizeof b));
    fprintf(f, "  (per CPU: the machine's, all %d rank%s; DeepSpeed counts the model states: no activations, no buffers, 1.5x "
            "on the CPU for its buffers; "
            "accelerate one device, no sharding, no activations; Megatron mixed precision with fp32 gradients, its "
            "distributed optimizer alone of the ZeRO stages, flash attention, x1.05%s%s; doc/tools.md)\n", N, N > 1 ? "s" : "",
            s->tp > 1 ? "; --tp: Megatron's a rank of its group, DeepSpeed's and accelerate's the whole model (they have no --tp)" : "",
            s->lora.rank ? "; none of them has LoRA, so each bills full fine-tuning; gpu_poor 2 bytes a weight of its own "
                           "count, LoRA's states as rank 8 on two maps a layer whatever the rank, 650 MB for CUDA" : "");
}

// The same as JSON members for --mem-json: "estimators": [...], and gptmem's own per CPU (the machine's).
void json_estimators(char *out, size_t cap, const Settings *s, const MemReport *pred) {
    Estimate e[MAX_ESTIMATES];
    int n = other_estimates(s, e);
    size_t len = (size_t)snprintf(out, cap, "\"largest_layer_params\": %.0f,\n \"machine_host_bytes\": %.0f,\n \"estimators\": [",
                                  largest_layer_params(model_whole(s)), machine_host_bytes(s, pred));
    for (int i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(out + len, cap - len, "%s{\"source\": \"%s\", \"setting\": \"%s\", \"gpu_bytes\": %.0f, "
                                "\"cpu_bytes\": %.0f, \"this_run\": %s}", i ? ", " : "", e[i].source, e[i].setting,
                                e[i].gpu, e[i].cpu, e[i].this_run ? "true" : "false");
    if (len < cap) snprintf(out + len, cap - len, "]");
}

#endif
