// memory/fit_report.h — --fit's answer (memory/fit.h searches): the settings that fit, cheapest first,
// those no other beats on every cost, the recommended command; when nothing fits, the smallest peak
// reachable and what to try; with --lora, LoRA's and QLoRA's own lines.
#ifndef GPTMEM_FIT_REPORT_H
#define GPTMEM_FIT_REPORT_H

#include "memory/fit.h"

// Nothing fits: the smallest peak reachable, with and without --offload, and what to try.
void fit_print_none(const FitQuestion *q, const FitSearch *r) {
    char flags[256], u1[32], u2[32];
    int gpu = q->s->cuda;
    fit_flags(&r->best, flags, sizeof flags);
    printf(".\nnothing fits. The smallest peak reachable is %s (%zu bytes%s), with %s; its largest part is "
           "%s, %s.\n", fit_size(u1, sizeof u1, r->best.peak), r->best.peak,
           gpu ? ", the CUDA libraries' headroom aside" : "", flags, mem_category_name[r->best.category],
           fit_size(u2, sizeof u2, r->best.category_bytes));
    if (r->best_off.peak != (size_t)-1) {
        fit_flags(&r->best_off, flags, sizeof flags);
        printf("With --offload the smallest peak is %s %s, with %s, which needs ", fit_size(u1, sizeof u1, r->best_off.peak),
               gpu ? "on the GPU" : "of RAM", flags);
        if (gpu) printf("%s of host memory and ", fit_size(u1, sizeof u1, r->best_off.host));
        printf("%s of disk a rank.\n", fit_size(u1, sizeof u1, r->best_off.disk));
    }
    int lora = q->s->lora.rank > 0;
    if (q->budget < r->min_weights)
        printf("The budget is smaller than the weights alone: %s in %s%s.\n", fit_size(u1, sizeof u1, r->min_weights),
               lora && q->ranks > 1 ? "nf4 --double-quant (QLoRA's frozen model) or 16 bits sharded by ZeRO-3, the smaller"
               : lora ? "nf4 --double-quant (QLoRA's frozen model)" : "16 bits", !lora && q->ranks > 1 ? ", sharded by ZeRO-3" : "");
    if (lora) {
        printf("Try a shorter --seq-len, a smaller --lora rank or fewer --lora-targets, or a smaller model.\n");
        return;
    }
    printf("Try more ranks (--ranks N, which adds ZeRO stages), a shorter --seq-len, or a smaller model%s.\n",
           q->s->adam_bits == 32 && !gpu ? "; --adam-bits 8 keeps Adam's moments in 8 bits (10 instead of 16 bytes "
                                           "a parameter in mixed precision)" : "");
}

// The frontier: the fitting settings no other fitting one makes pointless (of
// exact equals, the first), moved to the front of r->all, cheapest first. How many.
int fit_frontier(const FitQuestion *q, FitSearch *r) {
    FitSetting *all = r->all;
    int shown = 0, n = r->n;
    for (int i = 0; i < n; i++) {
        if (!fit_fits(&all[i], q->budget, q->host_free, q->disk_free, q->ranks)) continue;
        int beaten = 0;
        for (int j = 0; j < n && !beaten; j++) {
            if (j == i || !fit_fits(&all[j], q->budget, q->host_free, q->disk_free, q->ranks)) continue;
            int equal = fit_beats(&all[i], &all[j]) == 0 && fit_beats(&all[j], &all[i]) == 0 &&
                        all[i].peak == all[j].peak && all[i].flops == all[j].flops && all[i].rebuilt == all[j].rebuilt &&
                        all[i].comm == all[j].comm && all[i].moved == all[j].moved && all[i].micro == all[j].micro &&
                        all[i].slow == all[j].slow;
            beaten = fit_beats(&all[j], &all[i]) || (equal && j < i);
        }
        if (!beaten) all[shown++] = all[i];
    }
    qsort(all, shown, sizeof *all, fit_cheaper);
    return shown;
}

// The table of the first `shown` settings (the frontier), and the recommended command.
void fit_print_table(const FitQuestion *q, const FitSearch *r, int shown, const char *base) {
    printf("; %d that no other fitting one beats on every cost; the cheapest first:\n", shown);
    int timed = q->s->gpu_name != NULL;  // --gpu: a step's estimated time
    printf("  %12s %12s %12s %14s %14s", "peak", "headroom", "extra FLOPs", "rebuilt/step", "comm/step");
    if (timed) printf(" %10s", "step");
    if (r->offloaded) printf(" %14s %10s %10s", "moved/step", "host", "disk");
    printf(" %12s  %s\n", "micro-batch", "flags");
    double unit = q->budget >= 1073741824 ? 1073741824.0 : 1048576.0;  // GiB, or MiB for small budgets
    const char *uname = q->budget >= 1073741824 ? "GiB" : "MiB";
    char flags[256];
    for (int i = 0; i < shown && i < FIT_ROWS; i++) {
        const FitSetting *f = &r->all[i];
        fit_flags(f, flags, sizeof flags);
        printf("  %8.2f %s %8.2f %s %11.1f%% %10.1f MiB %10.1f MiB", f->peak / unit, uname, (q->budget - f->need) / unit,
               uname, 100 * f->flops, f->rebuilt / 1048576.0, f->comm / 1048576.0);
        if (timed) printf(" %8.3g s", f->seconds);
        if (r->offloaded)
            printf(" %10.1f MiB %6.2f GiB %6.2f GiB", f->moved / 1048576.0, f->host / 1073741824.0, f->disk / 1073741824.0);
        printf(" %6d x %-4d  %s\n", f->micro, f->accum, flags);
    }
    if (shown > FIT_ROWS) printf("  (and %d more, each costlier in some way than one above)\n", shown - FIT_ROWS);
    printf("  (extra FLOPs counts the matmuls and attention rebuilt, and --fused-ce's second pass; rebuilding %s is "
           "elementwise work, which shows in rebuilt/step instead)\n",
           is_llama(&q->s->cfg) ? "SwiGLU's product and RMSNorm" : "GELU and layernorm");
    if (timed) {
        StepTime t = step_time(q->s, gpu_model(q->s->gpu_name), 0);
        printf("  (step: its FLOPs, extra ones included, at the card's dense peak x %.1f%% MFU, %s; memory/step_time.h)\n",
               100 * t.mfu, t.source);
    }
    fit_flags(&r->all[0], flags, sizeof flags);
    printf("recommended: %s %s\n", base, flags);
}

// Beside full fine-tuning, the same question with the model frozen: LoRA of rank FIT_LORA_RANK on every linear
// map of a block (--lora, core/lora.h), its frozen model in the --dtype, and QLoRA (--base-dtype nf4): the
// smallest peak of each and whether it fits; `--lora R --fit` lists their settings. On the GPU the lines
// come only when nothing else fits.
enum { FIT_LORA_RANK = 8 };
void fit_print_lora(const FitQuestion *q, int fits, const char *budget_text, const char *base) {
    const GPTConfig *c = &q->s->cfg;
    if (q->s->cuda && fits) return;  // (the GPU's question is whether anything fits: these answer it when nothing does)
    const char *sp = " ";  // (--fit without a budget, the free memory, which each run finds: the bare flag)
    if (budget_text[0] == '(') budget_text = sp = "";
    for (int k = lora_first_map(c); k < lora_map_end(c); k++) {
        LoraMap mp = lora_map(c, k);
        if (mp.in < FIT_LORA_RANK || mp.rows < FIT_LORA_RANK) return;  // (a model too narrow for the rank)
    }
    Settings t = *q->s;
    t.lora = (LoraConfig){FIT_LORA_RANK, LORA_ALPHA_DEFAULT, lora_all_maps(c)};
    FitQuestion lq = *q;
    lq.s = &t;
    FitSearch r = fit_search(&lq);
    char flags[256], u[32];
    for (int qlora = 0; qlora <= 1; qlora++) {
        const FitSetting *best = NULL;
        for (int i = 0; i < r.n; i++)
            if ((r.all[i].base == QF_NF4) == qlora && (qlora || r.all[i].base == QF_FP32) && (!best || r.all[i].peak < best->peak))
                best = &r.all[i];
        fit_flags(best, flags, sizeof flags);
        printf("%s (--lora %d%s, every linear map): the smallest peak is %s with %s, %s\n", qlora ? "QLoRA" : "LoRA",
               FIT_LORA_RANK, qlora ? " --base-dtype nf4" : ", the model frozen", fit_size(u, sizeof u, best->peak), flags,
               fit_fits(best, q->budget, q->host_free, q->disk_free, q->ranks) ? "which fits" : "over the budget");
    }
    printf("  (%s --lora %d --fit%s%s lists their settings; doc/lora.md)\n", base, FIT_LORA_RANK, sp, budget_text);
    free(r.all);
}

// --fit: try every setting (fit_search), print how many fit, then the
// frontier's table, or what comes closest. `base` is the command line without
// the flags --fit sets, for the recommended command. 0 if something fits, 1 if not.
int fit_report(const FitQuestion *q, const char *budget_text, const char *base) {
    FitSearch r = fit_search(q);
    int gpu = q->s->cuda, ranks = q->ranks;
    char u1[32];
    printf("--fit %s: %zu bytes (%s) per %s; %d of %d settings fit", budget_text, q->budget,
           fit_size(u1, sizeof u1, q->budget), gpu ? (ranks > 1 ? "rank on its GPU" : "GPU") : ranks > 1 ? "rank" : "process",
           r.offloaded ? 0 : r.fits, r.tried);
    if (gpu) printf(" (each needs its device peak + %.2f GiB for the CUDA libraries)", GPU_HEADROOM / 1073741824.0);
    char disk[96];
    if (q->disk_given) snprintf(disk, sizeof disk, "%.2f GiB of disk (--fit-disk)", q->disk_free / 1073741824.0);
    else snprintf(disk, sizeof disk, "%.2f GiB of disk free here (in %s)", q->disk_free / 1073741824.0, g_fit_offload_dir);
    if (r.offloaded && gpu)
        printf(";\nwith --offload (the optimizer's states off the GPU), %d of %d fit in %.2f GiB of host memory (%s) and %s",
               r.fits, r.n, q->host_free / 1073741824.0, q->host_given ? "--fit-host" : "free here", disk);
    else if (r.offloaded)
        printf(";\nwith --offload-to disk (the optimizer's states in a file), %d of %d fit in %s", r.fits, r.n, disk);
    if (r.fits) fit_print_table(q, &r, fit_frontier(q, &r), base);
    else fit_print_none(q, &r);
    if (!q->s->lora.rank) fit_print_lora(q, r.fits, budget_text, base);
    free(r.all);
    return r.fits ? 0 : 1;
}

#endif
