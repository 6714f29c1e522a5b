// app/fit_cmd.h — --fit BUDGET: which settings fit, from the predictor alone
// (memory/fit.h searches them); the budget, and the command to run;
// --mem-snapshot: the setting as given, predicted, against the budget.
#ifndef GPTMEM_FIT_CMD_H
#define GPTMEM_FIT_CMD_H

#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include "app/flags.h"
#include "app/launch.h"
#include "app/report.h"
#include "cuda/api.h"
#include "memory/fit_report.h"
#include "memory/predict_infer.h"
#include "parallel/comm.h"

// --fit: the command line without the flags --fit chooses (for the recommended command).
void fit_base_command(int argc, char **argv, char *out, size_t n) {
    const char *chosen[] = {"fit-host", "fit-disk", "fit", "batch", "accum", "dtype", "flash", "ckpt", "recompute",
                            "fused-ce", "zero", "dry-run", "offload-to", "offload", "mem-snapshot", "fp32-grads", "base-dtype"};
    const int takes_value[] = {1, 1, 1, 1, 1, 1, 0, 0, 1, 0, 1, 0, 1, 1, 1, 0, 1}, n_chosen = sizeof takes_value / sizeof *takes_value;
    size_t k = (size_t)snprintf(out, n, "./train");
    for (int i = 1; i < argc && k < n; i++) {
        int skip = 0;
        for (int c = 0; c < n_chosen && !skip; c++) {
            size_t len = strlen(chosen[c]);
            if (strncmp(argv[i], "--", 2) || strncmp(argv[i] + 2, chosen[c], len)) continue;
            if (argv[i][2 + len] == '=') skip = 1;
            else if (argv[i][2 + len] == 0) {
                skip = 1;
                if (takes_value[c] && i + 1 < argc && strncmp(argv[i + 1], "--", 2)) i++;  // its value
            }
        }
        if (!skip) k += (size_t)snprintf(out + k, n - k, " %s", argv[i]);
    }
}

// --infer --fit BUDGET: what serves in the budget. For each format of the weights (--infer's table:
// fp32, bf16, int8, int4 with their scales), what is left for the KV cache after them (and, on the GPU,
// the CUDA libraries' headroom), the cache's bytes a token, and so how many tokens it holds: the largest
// batch at --seq-len, and the longest context at --batch (up to the model's maxT). 0 if a format
// serves one sequence of --seq-len, else 1.
int infer_fit_report(const Settings *s, size_t budget, const char *text, const char *base) {  // (base: with --infer)
    const GPTConfig *c = &s->cfg;
    InferenceBytes one = predict_inference(c, 1, 1, (int)dtype_size(s->dtype));  // the cache of one token
    size_t room = budget > (s->cuda ? GPU_HEADROOM : 0) ? budget - (s->cuda ? GPU_HEADROOM : 0) : 0;
    const char *name[] = {"fp32", "bf16", "int8", "int4"}, *best = NULL;
    const int bits[] = {32, 16, 8, 4};
    printf("--infer --fit %s: what serves in %zu bytes (%.2f GiB)%s: the weights in each format and the KV cache "
           "(K and V, %s, %zu B a token%s), as --dry-run --infer counts them\n", text, budget, budget / 1073741824.0,
           s->cuda ? ", less 0.50 GiB for the CUDA libraries" : "", dtype_name[s->dtype], one.kv_cache,
           s->dtype == DT_FP32 ? ": the --dtype's; servers keep it in bf16, --dtype bf16, half as many bytes" : "");
    printf("  %-6s %14s %14s %14s %16s %16s\n", "format", "weights", "left", "cache tokens", "batch at T", "T at batch");
    for (int k = 0; k < 4; k++) {
        size_t w = inference_weight_bytes(&one, bits[k]), left = room > w ? room - w : 0;
        size_t tokens = left / one.kv_cache, batch = tokens / s->seq_len, T = tokens / s->batch;
        if (T > (size_t)c->max_seq) T = c->max_seq;
        printf("  %-6s %10.2f GiB %10.2f GiB %14zu %11zu x %-4d %9zu at %d\n", name[k], w / 1073741824.0,
               left / 1073741824.0, tokens, batch, s->seq_len, T, s->batch);
        if (!best && batch >= 1) best = name[k];
    }
    if (!best) {
        printf("none serves one sequence of %d tokens in %s: a smaller --seq-len, or more memory\n", s->seq_len, text);
        return 1;
    }
    printf("serves: %s weights, the KV cache in %s, the most bits that hold one sequence of %d tokens (%s --dtype %s "
           "--batch %d --dry-run shows its table; --eval-only --quantize measures a saved state's weights in each format)\n",
           best, dtype_name[s->dtype], s->seq_len, base, dtype_name[s->dtype], s->batch);
    return 0;
}

// --fit's budget, and in `text` where it comes from: --gpu's card, what is free here (the GPU's, shared by
// the ranks on it), or the budget given, into *budget. 0, or -1 after a message (exit 2).
int fit_budget(const Settings *s, size_t *budget, char *text, size_t len) {
    char why[128];
    const GpuModel *card = s->cuda && s->gpu_name ? gpu_model(s->gpu_name) : NULL;
    if (!strcmp(s->fit, "free") && card) {  // --gpu NAME: the card in mind, its whole memory
        snprintf(text, len, "(the %s's %.0f GiB, --gpu)", card->name, card->gib);
        return *budget = (size_t)(card->gib * 1073741824.0), 0;
    }
    if (strcmp(s->fit, "free")) {
        if (!(*budget = parse_budget(s->fit, why, sizeof why))) usage_error("--fit '%s': %s", s->fit, why);
        snprintf(text, len, "%s", s->fit);
        return 0;
    }
    snprintf(text, len, "(free now)");  // what this machine (or its GPU) has free now
    if (!s->cuda) return *budget = available_memory(), 0;
    if (gpu_count(why, sizeof why) <= 0) {
        fprintf(stderr, "error: --fit alone measures the GPU's free memory, and there is none here (%s); give "
                "a budget, like --fit 80GiB\n", why);
        return -1;
    }
    // the ranks that share a GPU each get their share of what is free once they
    // all run: less a CUDA context for each other rank, taken to be as large as
    // what this process's context made the GPU use (exact on an otherwise idle
    // GPU, more when other processes use it: the budget errs low, so a listed
    // setting still starts)
    size_t total, free_b, k = (size_t)ranks_per_gpu(s->ranks > 1 ? s->ranks : 1, gpu_count(why, sizeof why));
    gpu_open(comm_env_local_rank() > 0 ? comm_env_local_rank() : 0, why, sizeof why);
    gpu_mem_info(&free_b, &total);
    size_t context = total - free_b, others = (k - 1) * context;
    *budget = free_b > others ? (free_b - others) / k : 0;
    if (k > 1)
        snprintf(text, len, "(free now, less %zu more CUDA contexts of %.0f MiB, / %zu ranks per GPU)", k - 1,
                 context / 1048576.0, k);
    return 0;
}

// --fit BUDGET: the settings that fit, from the predictor alone (memory/fit.h).
// 0 if one fits, 1 if none does, 2 for a bad budget.
int fit_run(const Settings *s, int argc, char **argv) {
    const GPTConfig *cfg = &s->cfg;
    char why[128], text[128];
    size_t budget;
    if (fit_budget(s, &budget, text, sizeof text)) return 2;
    size_t host = available_memory(), disk_given = 0;
    if (s->fit_host && !(host = parse_budget(s->fit_host, why, sizeof why))) usage_error("--fit-host '%s': %s", s->fit_host, why);
    if (s->fit_disk && !(disk_given = parse_budget(s->fit_disk, why, sizeof why)))
        usage_error("--fit-disk '%s': %s", s->fit_disk, why);
    char base[2048];
    fit_base_command(argc, argv, base, sizeof base);
    Settings shown = *s;
    shown.dry_run = 1;  // the config line without steps and threads: nothing runs
    print_config_line(cfg, &shown);
    // --offload's room: the host's free memory, and the disk's in the offload file's folder; or what
    // --fit-host and --fit-disk say the machine in mind has
    g_fit_offload_dir = s->offload_disk ? s->offload_dir : ".";
    struct statvfs fs;
    size_t disk = statvfs(g_fit_offload_dir, &fs) == 0 ? (size_t)fs.f_bavail * fs.f_frsize : 0;
    if (s->fit_disk) disk = disk_given;
    if (s->fit_host && !s->cuda)
        printf("note: --fit-host sizes a GPU machine's host memory; on the CPU the host is the device (--fit's budget), "
               "so --offload's settings go to disk\n");
    FitQuestion q = {s, s->batch * s->accum, s->ranks > 1 ? s->ranks : 1, budget, host, disk, s->fit_host != NULL,
                     s->fit_disk != NULL};
    if (s->infer) return infer_fit_report(s, budget, text, base);
    int rc = fit_report(&q, text, base);
    return s->mem_snapshot && fit_snapshot(s, budget) ? 1 : rc;
}

#endif
