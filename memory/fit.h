// memory/fit.h — --fit BUDGET: which settings fit in a memory budget, and what each
// costs. Every setting that changes memory is tried through the predictor
// (memory/predict.h, the same numbers as --dry-run; nothing is allocated): the
// storage dtype, --flash, --recompute (none, gelu,ln, or block = --ckpt),
// --fused-ce, the same global batch split into smaller micro-batches
// (--batch b --accum G/b), and the ZeRO stage when there are several ranks.
// The ones whose peak per rank fits are sorted cheapest first, those beaten
// by another on every cost and on memory left out; the last line is the
// cheapest as a command to run. On the GPU a setting fits when its device
// peak plus GPU_HEADROOM does: the test the run itself makes before it
// allocates (train.c, check_fits_gpu), so a listed setting is not refused.
#ifndef GPTMEM_FIT_H
#define GPTMEM_FIT_H

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "memory/predict.h"
#include "memory/report.h"
#include "core/saved.h"
#include "core/settings.h"

// A budget: a number and a unit, B, KiB/MiB/GiB/TiB (powers of 1024) or
// KB/MB/GB/TB (powers of 1000), e.g. 80GiB, 24GB, 1.5GiB, 512MiB, 1000000B.
// 0 and a message in why if it is not one, or not above 0.
size_t parse_budget(const char *s, char *why, size_t n) {
    char *end;
    double x = strtod(s, &end);
    if (end == s || !isfinite(x)) {
        snprintf(why, n, "not a number with a unit (like 80GiB or 24GB)");
        return 0;
    }
    if (x <= 0) {
        snprintf(why, n, "a budget must be above 0");
        return 0;
    }
    while (*end == ' ') end++;
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "KB", "MB", "GB", "TB"};
    const double scale[] = {1, 1024.0, 1048576.0, 1073741824.0, 1099511627776.0, 1e3, 1e6, 1e9, 1e12};
    int u = -1;
    for (int i = 0; i < 9; i++)
        if (!strcmp(end, units[i])) u = i;
    if (u < 0) {
        snprintf(why, n, "the unit must be B, KiB, MiB, GiB, TiB, KB, MB, GB or TB");
        return 0;
    }
    if (x * scale[u] < 1) {
        snprintf(why, n, "a budget must be above 0");
        return 0;
    }
    return (size_t)(x * scale[u]);
}

enum { FIT_ROWS = 12 };  // the table's length: the cheapest this many

// One setting: the flags --fit varies, and what the predictor and the cost
// formulas say of it.
typedef struct {
    int dtype, flash, fused_ce, zero, micro, accum;
    unsigned recompute;  // REC_* (REC_BLOCK is --ckpt)
    size_t peak;         // bytes per rank at the peak (predict_memory; on the GPU its device part)
    size_t need;         // what it needs of the budget: the peak (+ GPU_HEADROOM on the GPU)
    double flops;        // extra forward FLOPs (rebuilds, the fused head's second pass) / the model's
    double rebuilt;      // bytes of tensors rebuilt in a step's backwards (--recompute: even GELU costs time)
    double comm;         // bytes each rank sends per step (the ZeRO formulas below)
    int slow;            // choices slower on this device: CPU 16-bit storage, --flash (measured a few % slower);
                         // GPU fp32, naive attention
    int category;        // the largest category at the peak
    size_t category_bytes, weights;  // its bytes; the weights' (params row)
} FitSetting;

// Bytes a rank sends in one step (ring collectives: (N-1)/N of each), Psi
// parameters, e bytes a stored weight, gradients reduced in fp32 here:
//   stage 0: all-reduce of the gradients                    2 x 4 Psi
//   stage 1: reduce-scatter of them, all-gather of weights   4 Psi + e Psi
//   stage 2: reduce-scatter each micro-batch, all-gather     A x 4 Psi + e Psi
//   stage 3: each micro-batch, reduce-scatter and two gathers (three with --ckpt's rebuild)
//            A x (4 Psi + (2 or 3) e Psi); --fused-ce gathers the table once more and
//            reduce-scatters it twice, A x (e + 4) table
double fit_comm_bytes(const FitSetting *f, double P, double table, int ranks) {
    if (ranks <= 1) return 0;
    double e = f->dtype == 0 ? 4 : 2, ring = (ranks - 1.0) / ranks, A = f->accum, b;
    if (f->zero == 0) b = 2 * 4 * P;
    else if (f->zero == 1) b = 4 * P + e * P;
    else if (f->zero == 2) b = A * 4 * P + e * P;
    else b = A * (4 * P + ((f->recompute & REC_BLOCK) ? 3 : 2) * e * P + (f->fused_ce ? (e + 4) * table : 0));
    return ring * b;
}

// Of two settings that both fit, does a make b pointless: at least as
// cheap on every cost and cheaper on one, or as cheap on all and smaller
// (more headroom)? Memory beyond fitting buys nothing, so only costs count.
int fit_beats(const FitSetting *a, const FitSetting *b) {
    int le = a->flops <= b->flops + 1e-12 && a->rebuilt <= b->rebuilt && a->comm <= b->comm && a->micro >= b->micro &&
             a->slow <= b->slow;
    int lt = a->flops < b->flops - 1e-12 || a->rebuilt < b->rebuilt || a->comm < b->comm || a->micro > b->micro ||
             a->slow < b->slow;
    return le && (lt || a->peak < b->peak);
}

// Cheapest first: extra FLOPs, then the bytes rebuilt, then communication,
// then the larger micro-batch, then the fewer slower choices, then the smaller peak.
int fit_cheaper(const void *pa, const void *pb) {
    const FitSetting *a = pa, *b = pb;
    if (fabs(a->flops - b->flops) > 1e-12) return a->flops < b->flops ? -1 : 1;
    if (a->rebuilt != b->rebuilt) return a->rebuilt < b->rebuilt ? -1 : 1;
    if (a->comm != b->comm) return a->comm < b->comm ? -1 : 1;
    if (a->micro != b->micro) return a->micro > b->micro ? -1 : 1;
    if (a->slow != b->slow) return a->slow - b->slow;
    return a->peak < b->peak ? -1 : a->peak > b->peak;
}

// The flags of a setting, as they go on a command line.
void fit_flags(const FitSetting *f, char *out, size_t n) {
    int k = snprintf(out, n, "--dtype %s --batch %d", f->dtype == 0 ? "fp32" : "bf16", f->micro);
    if (f->accum > 1) k += snprintf(out + k, n - k, " --accum %d", f->accum);
    if (f->flash) k += snprintf(out + k, n - k, " --flash");
    if (f->recompute & REC_BLOCK) k += snprintf(out + k, n - k, " --ckpt");
    else if (f->recompute) k += snprintf(out + k, n - k, " --recompute gelu,ln");
    if (f->fused_ce) k += snprintf(out + k, n - k, " --fused-ce");
    if (f->zero) snprintf(out + k, n - k, " --zero %d", f->zero);
}

// Try every setting for the run's model at its --seq-len, `global` sequences
// per rank per step, on `ranks` ranks, against `budget` bytes a rank (on the
// GPU, the rank's share of its GPU); the run's device, --adam-bits and corpus
// are kept in every setting. Prints the table; `base` is the command line
// without the flags --fit sets, for the recommended command. 0 if something
// fits, 1 if not.
int fit_report(const Settings *run, int global, int ranks, size_t budget, const char *budget_text, const char *base) {
    int L = run->cfg.layers, C = run->cfg.channels, maxT = run->cfg.max_seq, T = run->seq_len, gpu = run->cuda;
    int Vp = (run->cfg.vocab + 63) / 64 * 64;
    double P = (double)predict_param_count(L, C, Vp, maxT), table = ((double)Vp + maxT) * C;
    double fpt = model_flops_per_token(L, C, Vp, maxT, T);
    unsigned recomputes[] = {0, REC_GELU | REC_LN, REC_BLOCK};
    int cap = 2 * 2 * 3 * 2 * 4 * 64, n = 0, fits = 0;
    FitSetting *all = malloc(sizeof(FitSetting) * cap), best = {0};
    size_t min_weights = (size_t)-1;
    best.peak = (size_t)-1;
    for (int dtype = 0; dtype <= 1; dtype++)
        for (int flash = 0; flash <= 1; flash++)
            for (int r = 0; r < 3; r++)
                for (int fused = 0; fused <= 1; fused++)
                    for (int zero = 0; zero <= (ranks > 1 ? 3 : 0); zero++)
                        for (int micro = global; micro >= 1; micro--) {
                            if (global % micro || n == cap) continue;
                            FitSetting f = {dtype, flash, fused, zero, micro, global / micro, recomputes[r], 0, 0, 0, 0, 0, 0, 0, 0, 0};
                            Settings s = *run;
                            s.batch = micro, s.flash = flash, s.ckpt = r == 2, s.fused_ce = fused, s.dtype = dtype;
                            s.zero = zero, s.ranks = ranks, s.recompute = recomputes[r], s.eval_only = 0, s.quant_bits = 0;
                            MemReport pred;
                            predict_memory(&s, &pred);
                            f.peak = gpu ? pred.peak_at[LOC_DEVICE] : pred.peak_total;
                            f.need = f.peak + (gpu ? GPU_HEADROOM : 0);
                            for (int c = 0; c < MEM_NCAT; c++)
                                if (pred.peak[c] > pred.peak[f.category]) f.category = c;
                            f.category_bytes = pred.peak[f.category];
                            f.weights = pred.peak[MEM_PARAMS];
                            if (f.weights < min_weights) min_weights = f.weights;
                            unsigned drops = run_drops(&s);
                            f.flops = (L * recompute_flops_per_token_layer(drops, T, C) + (fused ? 2.0 * C * Vp : 0)) / fpt;
                            f.comm = fit_comm_bytes(&f, P, table, ranks);
                            StackParts parts = predict_stack_parts(&s);
                            f.rebuilt = (double)(parts.full - parts.kept) * L * f.accum;
                            f.slow = gpu ? (dtype == 0) + !flash : (dtype == 1) + flash;
                            if (f.peak < best.peak) best = f;
                            if (f.need <= budget) fits++;
                            all[n++] = f;
                        }
    printf("--fit %s: %zu bytes (%.2f %s) per %s; %d of %d settings fit", budget_text, budget,
           budget / (budget >= 1073741824 ? 1073741824.0 : 1048576.0), budget >= 1073741824 ? "GiB" : "MiB",
           gpu ? (ranks > 1 ? "rank on its GPU" : "GPU") : ranks > 1 ? "rank" : "process", fits, n);
    if (gpu) printf(" (each needs its device peak + %.2f GiB for the CUDA libraries)", GPU_HEADROOM / 1073741824.0);
    if (!fits) {
        char flags[256];
        fit_flags(&best, flags, sizeof flags);
        printf(".\nnothing fits. The smallest peak reachable is %.2f GiB (%zu bytes%s), with %s; its largest part is "
               "%s, %.2f GiB.\n", best.peak / 1073741824.0, best.peak, gpu ? ", the CUDA libraries' headroom aside" : "",
               flags, mem_category_name[best.category], best.category_bytes / 1073741824.0);
        if (budget < min_weights)
            printf("The budget is smaller than the weights alone: %.2f GiB in 16 bits%s.\n", min_weights / 1073741824.0,
                   ranks > 1 ? ", sharded by ZeRO-3" : "");
        printf("Try more ranks (--ranks N, which adds ZeRO stages), a shorter --seq-len, or a smaller model.\n");
        free(all);
        return 1;
    }
    // keep the ones no other fitting setting makes pointless (of exact equals, the first)
    int shown = 0;
    for (int i = 0; i < n; i++) {
        if (all[i].need > budget) continue;
        int beaten = 0;
        for (int j = 0; j < n && !beaten; j++) {
            if (j == i || all[j].need > budget) continue;
            int equal = fit_beats(&all[i], &all[j]) == 0 && fit_beats(&all[j], &all[i]) == 0 &&
                        all[i].peak == all[j].peak && all[i].flops == all[j].flops && all[i].rebuilt == all[j].rebuilt &&
                        all[i].comm == all[j].comm && all[i].micro == all[j].micro && all[i].slow == all[j].slow;
            beaten = fit_beats(&all[j], &all[i]) || (equal && j < i);
        }
        if (!beaten) all[shown++] = all[i];
    }
    qsort(all, shown, sizeof *all, fit_cheaper);
    printf("; %d that no other fitting one beats on every cost; the cheapest first:\n", shown);
    printf("  %12s %12s %12s %14s %14s %12s  %s\n", "peak", "headroom", "extra FLOPs", "rebuilt/step", "comm/step",
           "micro-batch", "flags");
    double unit = budget >= 1073741824 ? 1073741824.0 : 1048576.0;  // GiB, or MiB for small budgets
    const char *uname = budget >= 1073741824 ? "GiB" : "MiB";
    for (int i = 0; i < shown && i < FIT_ROWS; i++) {
        char flags[256];
        fit_flags(&all[i], flags, sizeof flags);
        printf("  %8.2f %s %8.2f %s %11.1f%% %10.1f MiB %10.1f MiB %6d x %-4d  %s\n", all[i].peak / unit, uname,
               (budget - all[i].need) / unit, uname, 100 * all[i].flops, all[i].rebuilt / 1048576.0,
               all[i].comm / 1048576.0, all[i].micro, all[i].accum, flags);
    }
    if (shown > FIT_ROWS) printf("  (and %d more, each costlier in some way than one above)\n", shown - FIT_ROWS);
    char flags[256];
    fit_flags(&all[0], flags, sizeof flags);
    printf("recommended: %s %s\n", base, flags);
    free(all);
    return 0;
}

#endif
