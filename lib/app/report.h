// app/report.h — what a run prints: the config line, the step line (with the
// MFU), the dry run (the predicted ledger, the ZeRO paper's formula beside it,
// --infer), and the ledger at the end (--mem, --mem-json, every rank's).
#ifndef GPTMEM_APP_REPORT_H
#define GPTMEM_APP_REPORT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "app/launch.h"
#include "app/net.h"
#include "app/sends.h"
#include "app/snapshot_out.h"
#include "core/settings.h"
#include "cuda/api.h"
#include "io/state.h"
#include "memory/estimators.h"
#include "memory/fit.h"
#include "memory/ledger.h"
#include "memory/predict.h"
#include "memory/step_time.h"
#include "memory/report.h"
#include "memory/timeline.h"
#include "parallel/comm.h"

void print_flash_note(const GPTConfig *c, const Settings *s);
void print_trainable(const GPTConfig *c, const Settings *s);

// The shape's flags that make `c` differ from the preset `p` (" --max-seq 1024"), or "" if none does.
void shape_flags_changed(const GPTConfig *p, const GPTConfig *c, char *out, size_t size) {
    const char *flag[] = {"layers", "channels", "heads", "vocab", "max-seq", "kv-heads", "ffn", "rope-theta"};
    int was[] = {p->layers, p->channels, p->heads, p->vocab, p->max_seq, p->kv_heads, p->ffn, p->rope_theta};
    int is[] = {c->layers, c->channels, c->heads, c->vocab, c->max_seq, c->kv_heads, c->ffn, c->rope_theta};
    out[0] = 0;
    for (int i = 0, n = 0; i < 8; i++)
        if (was[i] != is[i] && n < (int)size) n += snprintf(out + n, size - n, " --%s %d", flag[i], is[i]);
}

// The config line's ranks: ZeRO's stage, the ranks, --shard-group's groups, --tp's split of model c.
void print_ranks_words(const Settings *s, const GPTConfig *c) {
    if (s->zero) printf(" | zero %d", s->zero);
    if (s->ranks > 1) printf(" on %d ranks", s->ranks);
    else if (comm_nranks > 1) printf(" on %d ranks", comm_nranks);
    if (s->shard_group) printf(" in groups of %d%s", s->shard_group, s->tp > 1 ? " data-parallel ranks" : "");
    if (s->tp > 1) printf(" | tp %d: a rank holds %d of %d heads, %d of the MLP's %d, %d of the vocabulary's %d%s", s->tp,
                          s->cfg.heads, c->heads, cfg_ffn(&s->cfg), cfg_ffn(c), padded_vocab(&s->cfg), padded_vocab(c),
                          s->sp ? ", 1/t of the norms' rows (--sp)" : "");
}

// One line saying what will run; a dry run leaves out steps and threads.
void print_config_line(const GPTConfig *c, const Settings *s) {
    const GPTConfig *p = NULL;  // the preset: a shape that differs from it is "custom"
    for (int i = 0; i < n_model_presets; i++)
        if (!strcmp(model_presets[i].name, s->model)) p = &model_presets[i].cfg;
    GPTConfig as_preset = p ? *p : *c;
    if (p && s->token_width && !s->vocab && p->vocab == 256) as_preset.vocab = c->vocab;  // tokens' vocabulary (flags.h)
    int preset = p && !memcmp(&as_preset, c, sizeof *c) && !s->init && !s->config;
    char changed[160] = "";  // a preset with some of its shape's flags set otherwise: which
    if (p && !preset) shape_flags_changed(&as_preset, c, changed, sizeof changed);
    if (s->init || s->config) printf("model from %s: L%d", s->init ? s->init : s->config, c->layers);
    else if (changed[0]) printf("model %s with%s (a custom shape): L%d", s->model, changed, c->layers);
    else printf("model %s%s: L%d", preset ? s->model : "custom", preset ? "" : " shape", c->layers);
    printf(" C%d H%d V%d (padded %d) maxT %d", c->channels, c->heads, c->vocab, padded_vocab(c), c->max_seq);
    if (is_llama(c))
        printf(" (Llama: KVH%d F%d, %s head%s%s%.0d)", cfg_kv_heads(c), cfg_ffn(c), c->untied ? "untied" : "tied",
               c->rope_scaled == 32 ? ", scaled RoPE x32" : c->rope_scaled ? ", scaled RoPE" : "", c->rope_theta ? ", theta " : "",
               c->rope_theta);
    printf(" | %.2fM params | batch %d x %d tokens", param_count(c) / 1e6, s->batch, s->seq_len);
    if (s->accum > 1) printf(" x %d accum", s->accum);
    if (s->data_format != DATA_TEXT) {  // token files: which, how many tokens, how they are read
        printf(" | data: %s tokens (uint%d), %lld", s->data_format == DATA_LLMC ? "llm.c" : "nanoGPT", 8 * s->token_width,
               s->data_tokens);
        if (s->data_files > 1) printf(" in %d files", s->data_files);
        if (s->val_data) printf(", val %lld", s->val_tokens);
        if (s->in_order) printf(", in order");
    } else if (s->in_order) printf(" | data in order");
    if (s->dtype != DT_FP32) printf(" | %s%s", dtype_name[s->dtype], s->fp32_grads ? ", fp32 grads" : "");
    if (s->flash) printf(" | flash");
    char maps[96];
    if (s->lora.rank) printf(" | lora R%d alpha %g on %s", s->lora.rank, s->lora.alpha, lora_targets_words(c, &s->lora, maps, sizeof maps));
    if (s->lora.rank && s->base_format) printf(", base %s%s", quant_name[s->base_format], s->double_quant ? " double-quant" : "");
    print_ranks_words(s, c);
    if (s->ckpt) printf(" | ckpt");
    else if (s->recompute) printf(" | recompute %s", s->recompute_str);
    if (s->fused_ce) printf(" | fused-ce");
    if (s->cuda) printf(" | cuda");
    if (s->cuda && !s->dry_run) printf(" %s", gpu_name());
    if (s->cuda && comm_nranks > 1) printf(" | comm %s", s->comm == COMM_NCCL ? "nccl" : "mpi");
    if (s->adam_bits == 8) printf(" | 8-bit adam");
    if (s->offload) printf(" | offload %s to %s%s", s->offload_str, s->offload_disk ? "disk " : "host",
                           s->offload_disk ? s->offload_dir : "");
    if (s->eval_only) printf(" | eval-only%s%s", s->quantize ? ", weights in " : "", s->quantize ? quant_name[s->quantize] : "");
    if (!s->dry_run) {
        if (!s->eval_only) printf(" | %d step%s", s->steps, s->steps == 1 ? "" : "s");
        if (!s->eval_only && !s->eval_at_end)
            printf(" (no val loss%s: ask with --eval-batches N%s)", s->sample_len ? "" : " or sample",
                   s->sample_len ? "" : ", --sample-len N");
#ifdef _OPENMP
        if (!s->cuda) printf(" | %d thread%s", omp_get_max_threads(), omp_get_max_threads() > 1 ? "s" : "");
        if (!s->cuda && g_threads_shared_by > 1)
            printf(" a rank (%ld cores / %d ranks on this machine)", sysconf(_SC_NPROCESSORS_ONLN), g_threads_shared_by);
#endif
    }
    printf("\n");
    print_flash_note(c, s);
    print_trainable(c, s);
}

// n with a comma between each three digits, as Python's f"{n:,d}".
const char *thousands(size_t n, char *out, size_t len) {
    char digits[32];
    int d = snprintf(digits, sizeof digits, "%zu", n);
    size_t k = 0;
    for (int i = 0; i < d && k + 2 < len; i++) {
        if (i && (d - i) % 3 == 0) out[k++] = ',';
        out[k++] = digits[i];
    }
    out[k] = 0;
    return out;
}

// --lora: what trains, in the line PEFT's print_trainable_parameters prints.
void print_trainable(const GPTConfig *c, const Settings *s) {
    if (!s->lora.rank) return;
    char a[32], all[32];
    size_t trained = lora_param_count(c, &s->lora), total = lora_base_param_count(c) + trained;
    printf("trainable params: %s || all params: %s || trainable%%: %.4f\n", thousands(trained, a, sizeof a),
           thousands(total, all, sizeof all), 100.0 * trained / total);
}

// --flash on the GPU: the tensor-core kernels take 16-bit runs with head size 64 or 128; else the reference ones run, said.
void print_flash_note(const GPTConfig *c, const Settings *s) {
    if (s->cuda && s->flash && !s->dry_run && !cu_flash_uses_mma(s->dtype, head_size(c)))
        printf("note: --flash runs on the reference kernels (CUDA cores, slow) for %s with head size %d; the tensor-core "
               "kernels take --dtype bf16 or fp16 with head size 64 or 128\n", dtype_name[s->dtype], head_size(c));
}

// The end of a run with --mem / --mem-json: this rank's ledger against the
// prediction; with several ranks, one line per rank (gathered to rank 0).
typedef struct {
    size_t peak_total, predicted_peak;
    int equal;
    long long comm_bytes;
    long long comm_across;  // --shard-group: of which across the groups
} RankLedger;

int report_memory(const Settings *s, const MemReport *predicted, const MemReport *measured, long long step_comm,
                  long long step_across, long long step_tensor, size_t P, int zero, const char *receipt) {
    RankLedger mine = {measured->peak_total, predicted->peak_total,
                       !memcmp(predicted, measured, sizeof *measured), step_comm, step_across};
    RankLedger *all = malloc(sizeof(RankLedger) * comm_nranks);
    comm_gather_to_root(&mine, all, sizeof mine);
    if (s->mem && comm_rank_id == 0) {
        printf("memory ledger: predicted vs measured (bytes)%s\n", comm_nranks > 1 ? ", rank 0" : "");
        print_mem_report(stdout, predicted, measured, s->eval_only ? EVAL_PHASES : MEM_NPHASE);
        printf("  activation stack: %zu bytes reserved from the prediction, high-water mark %zu\n",
               g_arena.capacity, measured->stack_peak);
        size_t rss = process_peak_rss();
        if (rss)
            printf("    %-12s %16zu B: the process's peak resident size (%.2f MiB), %.2f MiB more than the ledger's "
                   "bytes in RAM (not a GPU's, not the offload file's): the program and its libraries (--device cuda loads cuBLASLt: about 150 MiB), "
                   "thread stacks, the C library's heap; not predicted\n",
                   "process", rss, mib(rss), mib(rss) - mib(g_ledger.peak_total - g_ledger.gpu_reserved - g_ledger.peak_at[LOC_DISK]));
        if (s->cuda) {  // what cudaMemGetInfo sees beyond the ledger's own device buffers
            size_t free_b, total_b;
            gpu_mem_info(&free_b, &total_b);
            size_t used = total_b - free_b, k = (size_t)gpu_sharing(), ours = g_ledger.gpu_reserved * k;
            char share[96] = "";
            if (k > 1) snprintf(share, sizeof share, " of the %zu ranks sharing this GPU (each as this rank's)", k);
            printf("    %-12s %16lld B: GPU memory in use (%.2f MiB) minus the ledger's device buffers%s "
                   "(%.2f MiB): the CUDA context%s, cuBLASLt, allocator rounding; not predicted\n",
                   "runtime", (long long)used - (long long)ours, mib(used), share, mib(ours), k > 1 ? "s" : "");
        }
        for (int r = 0; comm_nranks > 1 && r < comm_nranks; r++)
            printf("  rank %d: peak %zu B measured, %zu B predicted: %s\n", r, all[r].peak_total,
                   all[r].predicted_peak, all[r].equal ? "equal in every row" : "DIFFERENT");
        if (comm_nranks > 1) {
            size_t e = dtype_size(s->dtype), k = zero == 3 ? 3 : 2;
            printf("  communication: %lld B sent per step by rank 0 (ring volumes: (N-1)/N of each collective); ",
                   all[0].comm_bytes);
            if (!s->lora.rank) printf("textbook %zu x params = %zu B\n", k, k * e * P);
            else printf("textbook %zu x adapters (fp32)%s = %zu B\n", k, zero == 3 ? " + 2 x the frozen model" : "",
                        k * 4 * P + (zero == 3 ? 2 * e * param_count(&s->cfg) : 0));  // (stage 3: gathered for the forward, the backward)
            Plan plan = make_plan(s, comm_nranks);
            const char *group = s->shard_group_node ? "machine" : "group";  // (--shard-group node: the machines)
            if (s->shard_group)
                printf("  of which inside its %s of %d: %lld B; across the %d %ss: %lld B (predicted %lld B)\n", group, s->shard_group,
                       all[0].comm_bytes - all[0].comm_across - (s->tp > 1 ? step_tensor : 0), plan.groups, group,  // (--tp's apart)
                       all[0].comm_across, predict_across_bytes(P, &plan));
            if (s->tp > 1) print_tp_sends(s, &plan, step_tensor);
        }
    }
    comm_barrier();  // no rank frees its memory before rank 0 has measured the GPU's (the runtime row)
    free(all);
    if (!s->mem_json) return 0;
    char path[4096];
    if (comm_rank_id == 0) snprintf(path, sizeof path, "%s", s->mem_json);
    else snprintf(path, sizeof path, "%s.rank%d", s->mem_json, comm_rank_id);
    char *more = receipt ? malloc(strlen(receipt) + 32) : NULL;
    if (more) sprintf(more, "\"peak_receipt\": %s", receipt);
    OutFile out;
    FILE *f = output_begin(&out, "--mem-json", path);
    if (f) write_mem_json(f, predicted, measured, more);
    free(more);
    return !f || output_end(&out, "--mem-json");
}

// The dry run's last lines: this rank's model states and the buffers they move through, next to the ZeRO
// paper's formula for the stage, with the difference named.
void print_paper_comparison(const Settings *s, const MemReport *r) {
    const GPTConfig *cfg = &s->cfg;
    // the ranks that share the shards: all, or --shard-group's K
    Plan plan = make_plan(s, s->ranks);
    int ranks = plan.ranks, zero = plan.stage, e = (int)dtype_size(s->dtype), g = (int)dtype_size(grad_dtype(s));
    double K = paper_optimizer_bytes(s);  // 12 in mixed precision, 8 in fp32; less with --adam-bits 8
    int Vp = padded_vocab(cfg), C = cfg->channels;
    size_t P = param_count(cfg);
    const size_t *b = r->peak;
    size_t states = b[MEM_PARAMS] + b[MEM_MASTER] + b[MEM_GRADS] + b[MEM_ADAM_M] + b[MEM_ADAM_V];
    size_t scratch = predict_model_scratch(s, &plan), total = states + b[MEM_COMM] + scratch;
    double paper = predict_paper_states(P, s, &plan);
    char formula[96];
    if (zero == 0) snprintf(formula, sizeof formula, "(%d + %d + %g) Psi", e, g, K);
    else if (zero == 1) snprintf(formula, sizeof formula, "(%d + %d) Psi + %g Psi / %d", e, g, K, ranks);
    else if (zero == 2) snprintf(formula, sizeof formula, "%d Psi + (%d + %g) Psi / %d", e, g, K, ranks);
    else snprintf(formula, sizeof formula, "(%d + %d + %g) Psi / %d", e, g, K, ranks);
    printf("the ZeRO paper%s against this run: the model states of %s (stage %d, Psi = %zu parameters)\n",
           s->fp32_grads ? " with fp32 gradients (Megatron-LM's 2 + 4 + 12 bytes)" : "",
           ranks > 1 ? "each rank" : "the process", zero, P);
    printf("  %-56s %14.0f B %10.2f MiB\n", formula, paper, paper / 1048576.0);
    printf("  %-56s %14zu B %10.2f MiB\n", "gptmem: params + master + grads + adam_m + adam_v", states, mib(states));
    printf("  %-56s %14zu B %10.2f MiB\n", "  + comm (reduction chunks, gradient buckets, gathers)", b[MEM_COMM],
           mib(b[MEM_COMM]));
    printf("  %-56s %14zu B %10.2f MiB\n", "  + model-sized scratch (fp32 copies, buckets)", scratch, mib(scratch));
    printf("  %-56s %14zu B %10.2f MiB = %.2fx the paper\n", "  = total", total, mib(total), total / paper);
    // what a step sends, each rank: inside the ranks that share the shards (all, or a group), and
    // with --shard-group the sum across the groups
    double inside = ring_step_bytes(zero, e, s->accum, s->ckpt, s->fused_ce, (double)P,
                                    ((double)Vp + cfg->max_seq) * C, ranks);
    if (ranks > 1 && plan.groups <= 1)  // (--tp: the data-parallel ranks, in one group)
        printf("  %-56s %14.0f B %10.2f MiB\n", "a step sends: the stage's ring formula", inside, inside / 1048576.0);
    if (plan.groups > 1) print_group_sends(s, &plan, inside);
    if (s->tp > 1) print_tp_step(s, &plan);
    size_t moved = predict_moved(cfg, plan.tiled_head), table = global_param_count(cfg);
    if (total <= (size_t)paper) return;
    if (!s->fused_ce)
        printf("  the difference: buffers that hold the whole embedding table (%zu parameters, %.1f%% of Psi) and "
               "one op's (%zu); --fused-ce moves the table in chunks of %d rows\n", table, 100.0 * table / P,
               moved - table, VOCAB_CHUNK);
    else
        printf("  the difference: buffers for one piece of %zu parameters (%s)%s\n", moved,
               moved == predict_largest_op(cfg) ? (is_llama(cfg) ? "the largest op's weights"
                                                                 : "fc's weight and bias, the largest op") :
                                                         "a chunk of the embedding table",
               states > paper + 0.5 ? ", and the shards' padding" : "");
}

// --dry-run --infer: serving the model, in each number format: the weights,
// and the KV cache for --batch sequences of --seq-len tokens (memory/predict.h).
// --infer's table as --mem-json's "inference": each format's weights, the KV cache, and what serving in the
// run's own dtype holds (its weights and the cache: the explorer's headline with --infer).
void inference_json(const GPTConfig *c, const Settings *s, char *out, size_t n) {
    InferenceBytes r = predict_inference(c, s->batch, s->seq_len, (int)dtype_size(s->dtype));
    size_t own = inference_weight_bytes(&r, s->dtype == DT_FP32 ? 32 : 16);
    snprintf(out, n, "\"inference\": {\"kv_cache_bytes\": %zu, \"weights_bytes\": {\"fp32\": %zu, \"bf16\": %zu, "
             "\"int8\": %zu, \"int4\": %zu}, \"format\": \"%s\", \"serving_bytes\": %zu}", r.kv_cache,
             inference_weight_bytes(&r, 32), inference_weight_bytes(&r, 16), inference_weight_bytes(&r, 8),
             inference_weight_bytes(&r, 4), s->dtype == DT_FP32 ? "fp32" : "bf16", own + r.kv_cache);
}

void print_inference(const GPTConfig *c, const Settings *s) {
    InferenceBytes r = predict_inference(c, s->batch, s->seq_len, (int)dtype_size(s->dtype));
    printf("inference: the weights in each format, and the KV cache (K and V, %s) for %d x %d tokens: %zu B "
           "(%.2f GiB)\n", dtype_name[s->dtype], s->batch, s->seq_len, r.kv_cache, r.kv_cache / 1073741824.0);
    printf("  %-6s %5s %16s %12s %16s %12s\n", "format", "bits", "weights", "GiB", "+ KV cache", "GiB");
    const char *name[] = {"fp32", "bf16", "int8", "int4"};
    const int bits[] = {32, 16, 8, 4};
    for (int k = 0; k < 4; k++) {
        size_t w = inference_weight_bytes(&r, bits[k]);
        printf("  %-6s %5d %16zu %12.2f %16zu %12.2f\n", name[k], bits[k], w, w / 1073741824.0, w + r.kv_cache,
               (w + r.kv_cache) / 1073741824.0);
    }
    printf("  int8/int4: the %zu matrix weights in blocks of %d with an fp32 scale each (%zu scales); the %zu "
           "vector parameters (biases, layernorms) in bf16\n", r.matrices, QUANT_BLOCK, r.scales, r.vectors);
    if (!s->lora.rank) return;
    size_t A = lora_param_count(c, &s->lora);
    printf("  + the adapters (--lora %d): %zu parameters in fp32, %zu B (%.2f MiB) on top of any row, kept apart as PEFT "
           "serves them (--merge folds them into the weights: nothing added)\n", s->lora.rank, A, 4 * A, 4 * A / 1048576.0);
}

// --dry-run --mem-json: what the setting costs besides memory, --fit's columns for it (memory/fit.h):
// the FLOPs rebuilt and the fused head's second pass over the model's, the bytes of tensors rebuilt,
// sent to the other ranks and moved by --offload in a step. NULL for --eval-only (no step).
const char *cost_json(const Settings *s, char *out, size_t n) {
    if (s->eval_only) return NULL;
    FitSetting f = fit_own_setting(s);
    snprintf(out, n, "\"cost\": {\"extra_flops\": %.17g, \"rebuilt_bytes\": %.17g, \"comm_bytes\": %.17g, "
             "\"moved_bytes\": %.17g}", f.flops, f.rebuilt, f.comm, f.moved);
    return out;
}

// --dry-run --mem-timeline: the predicted half of the timeline, one step's pushes, pops and drops
// (the measured columns empty: nothing ran). 0, or 1 after a message.
int dry_run_timeline(const Settings *s, const MemReport *predicted) {
    PredictedTimeline t = predicted_timeline(s, s->accum, predicted);
    OutFile out;
    FILE *f = output_begin(&out, "--mem-timeline", s->mem_timeline);
    if (f) write_mem_timeline(f, &t);
    int bad = !f || output_end(&out, "--mem-timeline");
    if (!bad) printf("wrote %s: %d pushes, pops and drops of step 1, predicted (a dry run measures nothing)\n",
                s->mem_timeline, t.n);
    predicted_timeline_free(&t);
    return bad != 0;
}

// --gpu, --link-gbps: the device's peak beside the card's memory, --offload's link bytes beside its
// rate (at least the larger direction's bytes / rate a step: the link carries both ways at once, and
// the sum if they do not overlap). Printed, and as --mem-json's "gpu" (json: NULL to print only).
void gpu_in_mind(const Settings *s, const MemReport *pred, char *json, size_t n) {
    const GpuModel *g = s->gpu_name ? gpu_model(s->gpu_name) : NULL;
    double rate = s->link_gbps > 0 ? s->link_gbps : g ? g->link_gbps : 0, cap = g ? g->gib * 1073741824.0 : 0;
    double down = pred->traffic[TR_DOWN], up = pred->traffic[TR_UP], peak = pred->peak_at[LOC_DEVICE];
    if (json) json[0] = 0;
    if (g) printf("on one %s (--gpu %s): %.2f GiB; the device's peak %.2f GiB %s %.2f GiB (the CUDA context and "
                  "libraries take some of it: --fit keeps %.2f GiB for them)\n", g->what, g->name, g->gib, peak / 1073741824.0,
                  peak <= cap ? "leaves" : "is over by", fabs(cap - peak) / 1073741824.0, GPU_HEADROOM / 1073741824.0);
    StepTime t = g ? run_step_time(s, g) : (StepTime){0};
    if (g) print_step_time(s, &t);
    if (rate > 0 && (down > 0 || up > 0))
        printf("the host link at %.2f GB/s each way%s: a step's %.2f GB down and %.2f GB up take at least %.3f s "
               "(%.3f s if they do not overlap)\n", rate, s->link_gbps > 0 ? " (--link-gbps)" : "", down / 1e9, up / 1e9,
               fmax(down, up) / (rate * 1e9), (down + up) / (rate * 1e9));
    if (json && (g || rate > 0))
        snprintf(json, n, "\"gpu\": {\"name\": \"%s\", \"memory_bytes\": %.0f, \"bf16\": %s, \"link_gbps\": %.17g, "
                 "\"device_peak_bytes\": %.0f, \"fits\": %s, \"link_seconds\": %.17g, \"step_flops\": %.17g, "
                 "\"peak_flops\": %.17g, \"mfu\": %.17g, \"step_seconds\": %.17g, \"run_tokens\": %.17g}", g ? g->name : "",
                 cap, g && g->bf16 ? "true" : "false", rate, peak, g && peak <= cap ? "true" : "false",
                 rate > 0 ? fmax(down, up) / (rate * 1e9) : 0.0, t.step_flops, t.peak, t.mfu, t.seconds, t.run_tokens);
}

// --dry-run: the prediction alone, from the config; nothing is allocated.
int dry_run(const Settings *s) {
    const GPTConfig *cfg = &s->cfg;
    MemReport predicted;
    predict_memory(s, &predicted);
    settings_notes(s, s->ranks);
    print_config_line(model_whole(s), s);
    if (s->data_format == DATA_TEXT && file_size(s->data) < 0) printf("note: '%s' not found; the data row counts only the batch buffers\n", s->data);
    printf("predicted %smemory%s (dry run: nothing allocated; peak = the most at any moment, between the phases' ends too%s)\n",
           s->cuda ? "GPU " : "", s->ranks > 1 ? " of each rank" : "",
           report_off_device(&predicted) ? "; the total is the device's, the places off it have their own below" : "");
    print_prediction(stdout, &predicted, s->eval_only ? EVAL_PHASES : MEM_NPHASE);
    if (!s->cuda && !s->eval_only && !s->lora.rank) print_paper_comparison(s, &predicted);  // (full fine-tuning's bill)
    if (s->mem_ops) print_activation_table(stdout, s, 0);
    if (s->infer) print_inference(cfg, s);
    if (s->estimators && !s->eval_only) print_estimators(stdout, s, &predicted, NULL);
    char gpu[768], infer[512] = "";
    gpu_in_mind(s, &predicted, gpu, sizeof gpu);
    if (s->infer) inference_json(cfg, s, infer, sizeof infer);
    if (s->mem_timeline && dry_run_timeline(s, &predicted)) return 1;
    if (s->mem_snapshot && write_predicted_snapshot(s, &predicted, 0, 0)) return 1;
    char cost[512], more[4096];
    if (cost_json(s, cost, sizeof cost)) {  // its cost, what the other calculators say, the GPU in mind
        size_t k = (size_t)snprintf(more, sizeof more, "%s,\n ", cost);
        if (gpu[0]) k += (size_t)snprintf(more + k, sizeof more - k, "%s,\n ", gpu);
        if (infer[0]) k += (size_t)snprintf(more + k, sizeof more - k, "%s,\n ", infer);
        json_estimators(more + k, sizeof more - k, s, &predicted);
    }
    if (!s->mem_json) return 0;
    OutFile out;
    FILE *f = output_begin(&out, "--mem-json", s->mem_json);
    if (f) write_mem_json(f, &predicted, NULL, s->eval_only ? NULL : more);
    return !f || output_end(&out, "--mem-json");
}

// What one optimizer step did, for its line of output and the --log CSV.
typedef struct {
    int step;           // 1-based
    float loss, lr;     // the global batch's mean loss; the learning rate used
    double norm;        // the global gradient norm (before clipping)
    double seconds;     // wall time of the step
    long long tokens;   // tokens in the global batch
    float scale;        // fp16: the loss scale the step ran with
    int skipped;        // fp16: inf/nan gradients, the update was skipped
} StepResult;

// The CPU's peak FLOP/s, for the step line's MFU: threads x clock x FLOPs per
// cycle per core, taking a core to have two FMA pipes of its widest vectors
// (AVX-512: 2 x 16 lanes x 2 = 64 FLOPs a cycle; AVX2 with FMA: 32; else 16).
// An upper bound: some cores run AVX-512 as two 256-bit halves. The clock is
// the core's maximum (/sys/.../cpuinfo_max_freq), else /proc/cpuinfo's
// "cpu MHz". 0 when it cannot be told.
double cpu_peak_flops(int threads) {
    double per_cycle = 16, hz = 0;
#if defined(__x86_64__) || defined(__i386__)
    if (__builtin_cpu_supports("avx512f")) per_cycle = 64;
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) per_cycle = 32;
#endif
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "r");
    long khz = 0;
    if (f && fscanf(f, "%ld", &khz) == 1) hz = khz * 1e3;
    if (f) fclose(f);
    if (hz == 0 && (f = fopen("/proc/cpuinfo", "r"))) {
        char line[256];
        double mhz;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "cpu MHz : %lf", &mhz) == 1) { hz = mhz * 1e6; break; }
        fclose(f);
    }
    return threads * hz * per_cycle;
}

// The peak FLOP/s of the run's devices (the step line's MFU): the GPU's for its dtype, or the CPU's
// threads on every rank.
double run_peak_flops(const Settings *s) {
    return s->cuda ? gpu_peak_flops(s->dtype) : cpu_peak_flops(omp_threads()) * comm_nranks;
}

// --log's memory columns (and --tensorboard's memory/ scalars), in bytes: what the
// step line's "mem" says (every place in memory, the offload file apart: now,
// and the step's peak), then each place now and at the step's peak, and the offload file.
enum { MEMCOL_N = 9 };
const char *const memory_column[MEMCOL_N] = {"mem", "mem_peak", "device", "device_peak", "host", "host_peak",
                                             "pinned", "pinned_peak", "disk"};

void step_memory(size_t *col) {
    size_t file = g_ledger.total_at[LOC_DISK];
    size_t v[MEMCOL_N] = {g_ledger.total - file, g_ledger.window_peak - file, g_ledger.total_at[LOC_DEVICE],
                          g_ledger.window_peak_at[LOC_DEVICE], g_ledger.total_at[LOC_HOST], g_ledger.window_peak_at[LOC_HOST],
                          g_ledger.total_at[LOC_PINNED], g_ledger.window_peak_at[LOC_PINNED], file};
    memcpy(col, v, sizeof v);
}

// The step line: loss, lr, norm, time, tok/s, MFU (against peak_flops of all
// ranks; token_flops: the model's FLOPs a token), memory (live now, and this step's peak; the
// offload file apart), elapsed and remaining time (to --stop-after's step, if it stops first); with --recompute the time
// it took and its FLOPs (rebuilt_token_flops) as a share of the model's.
void print_step_line(const StepResult *r, const Settings *s, int nranks, const LiveState *live, Net *net,
                     double peak_flops, double token_flops, double rebuilt_token_flops, double elapsed, int steps_done) {
    int B = s->batch, T = s->seq_len;
    char done[32], left[32];
    format_duration(done, sizeof done, elapsed);
    int end = s->stop_after && s->stop_after < s->steps ? s->stop_after : s->steps;  // where this run stops
    format_duration(left, sizeof left, elapsed / steps_done * (end - r->step));
    say("step %5d/%d | loss %.4f | lr %.2e | norm %7.4f | %8.1f ms | %8.0f tok/s", r->step, s->steps, r->loss, r->lr,
        r->norm, r->seconds * 1e3, r->tokens / r->seconds);
    if (peak_flops > 0) say(" | MFU %4.1f%%", 100.0 * r->tokens * token_flops / r->seconds / peak_flops);
    size_t file = g_ledger.total_at[LOC_DISK];  // --offload-to disk: in the file, not in memory (the same all run)
    say(" | mem %.1f MiB now, %.1f peak", mib(g_ledger.total - file), mib(g_ledger.window_peak - file));
    if (file) say(" (+ %.2f GiB on disk)", file / 1073741824.0);
    say(" | %s elapsed, %s left", done, left);
    if (s->accum > 1 || nranks > 1) say(" | tokens %d micro, %lld step", B * T, r->tokens);
    if (nranks > 1) say(" | sent %.2f MiB", comm_bytes_sent / 1048576.0);
    if (nranks > 1 && s->shard_group) say(" (%.2f across groups)", comm_across.bytes / 1048576.0);
    if (s->recompute)
        say(" | recompute %.1f ms, %.1f%% more FLOPs", net_recompute_seconds(net) * 1e3,
            100.0 * rebuilt_token_flops / token_flops);
    if (r->skipped) say(" | skipped: inf/nan gradients, loss scale %g -> %g", r->scale, live->loss_scale);
    else if (s->dtype == DT_FP16) say(" | loss scale %g", r->scale);
    say("\n");
}

#endif
