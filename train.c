// train.c — gptmem's main program, in the order of the lecture slide:
// parse the flags, predict the memory, build the model, then the loop —
// forward, backward, reduce, step — and the report. Everything else lives in
// the headers it includes (doc/architecture.md has the map); each binary is
// one translation unit.
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "app/flags.h"
#include "memory/ledger.h"
#include "memory/predict.h"
#include "memory/timeline.h"
#include "memory/fit.h"
#include "io/data.h"
#include "app/net.h"
#include "io/state.h"
#include "app/observe.h"

// printf on rank 0 only: with several ranks, one copy of each line.
void say(const char *fmt, ...) {
    if (comm_rank_id != 0) return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
}

// ---------------------------------------------------------------------------
// Evaluation and sampling

// The validation loss of the model as it is: the mean of n_batches batches'
// mean losses; after_forward (if not NULL) gets the ledger after the first
// forward (for the ledger's "after forward").
float evaluate(Net *net, Dataset *data, int B, int T, int n_batches, MemSnapshot *after_forward) {
    for (int k = 0; k < n_batches; k++) {
        data_val_batch(data, B, T, k, n_batches);
        net_forward(net, data->inputs, data->targets, B, T);
        if (k == 0 && after_forward) *after_forward = ledger_snapshot();
        net_discard_activations(net);
    }
    return (float)(net_read_numbers(net).loss_sum / n_batches);
}

// Print text[from, to) escaped (data.h escape_text): raw bytes could be
// terminal escape codes or broken UTF-8.
void say_text(const unsigned char *text, int from, int to) {
    char *out = malloc(4 * (size_t)(to - from) + 1);
    escape_text(text + from, (size_t)(to - from), out);
    say("%s", out);
    free(out);
}

// Generate `len` bytes after a newline, each from the model's distribution
// over the last T bytes of context (scaled by 1/temperature). Uses the batch
// buffer data->inputs (B*T >= T) as the context. Printed a line at a time,
// escaped where the bytes are not text.
void sample_text(Net *net, Dataset *data, int T, int len, float temperature, uint64_t *rng) {
    int *ctx = data->inputs, n = 1, printed = 0;
    unsigned char *text = malloc((size_t)len + 1);
    ctx[0] = '\n';
    say("---- sample ----\n");
    for (int i = 0; i < len; i++) {
        net_forward(net, ctx, NULL, 1, n);
        const float *logits = net_logits_row(net, n - 1);  // the last position predicts the next byte
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
        net_discard_activations(net);
        if (n == T) { memmove(ctx, ctx + 1, sizeof(int) * (T - 1)); n--; }  // slide the window
        ctx[n++] = tok;
        text[i] = (unsigned char)tok;
        if (tok == '\n') {  // a line is complete: no UTF-8 sequence spans a newline
            say_text(text, printed, i + 1);
            printed = i + 1;
        }
    }
    say_text(text, printed, len);
    say("\n----------------\n");
    fflush(stdout);
    free(text);
}

// ---------------------------------------------------------------------------

int g_threads_shared_by = 1;  // the ranks on this machine that divided its cores among their threads (set_threads)

// One line saying what will run; a dry run leaves out steps and threads.
void print_config_line(const GPTConfig *c, const Settings *o) {
    const GPTConfig *p = NULL;  // the preset: a shape that differs from it is "custom"
    for (int i = 0; i < n_model_presets; i++)
        if (!strcmp(model_presets[i].name, o->model)) p = &model_presets[i].cfg;
    int preset = p && !memcmp(p, c, sizeof *c);
    printf("model %s%s: L%d C%d H%d V%d (padded %d) maxT %d | %.2fM params | batch %d x %d tokens",
           preset ? o->model : "custom", preset ? "" : " shape", c->layers, c->channels, c->heads, c->vocab, padded_vocab(c), c->max_seq,
           param_count(c) / 1e6, o->batch, o->seq_len);
    if (o->accum > 1) printf(" x %d accum", o->accum);
    if (o->dtype != DT_FP32) printf(" | %s", dtype_name[o->dtype]);
    if (o->flash) printf(" | flash");
    if (o->zero) printf(" | zero %d", o->zero);
    if (o->ranks > 1) printf(" on %d ranks", o->ranks);
    else if (comm_nranks > 1) printf(" on %d ranks", comm_nranks);
    if (o->ckpt) printf(" | ckpt");
    else if (o->recompute) printf(" | recompute %s", o->recompute_str);
    if (o->fused_ce) printf(" | fused-ce");
    if (o->cuda) printf(" | cuda");
    if (o->cuda && !o->dry_run) printf(" %s", gpu_name());
    if (o->cuda && comm_nranks > 1) printf(" | comm %s", o->comm == COMM_NCCL ? "nccl" : "mpi");
    if (o->adam_bits == 8) printf(" | 8-bit adam");
    if (o->eval_only) printf(" | eval-only%s%s", o->quantize ? ", weights in " : "", o->quantize ? quant_name[o->quantize] : "");
    if (!o->dry_run) {
        if (!o->eval_only) printf(" | %d steps", o->steps);
#ifdef _OPENMP
        if (!o->cuda) printf(" | %d thread%s", omp_get_max_threads(), omp_get_max_threads() > 1 ? "s" : "");
        if (!o->cuda && g_threads_shared_by > 1)
            printf(" a rank (%ld cores / %d ranks on this machine)", sysconf(_SC_NPROCESSORS_ONLN), g_threads_shared_by);
#endif
    }
    printf("\n");
    // --flash on the GPU: the tensor-core kernels take 16-bit runs with head size 64 or 128
    if (o->cuda && o->flash && !o->dry_run && !cu_flash_uses_mma(o->dtype, c->channels / c->heads))
        printf("note: --flash runs on the reference kernels (CUDA cores, slow) for %s with head size %d; the "
               "tensor-core kernels take --dtype bf16 or fp16 with head size 64 or 128\n", dtype_name[o->dtype],
               c->channels / c->heads);
}

// Ranks on a machine take its GPUs in turn (gpu_open), so ceil(ranks / GPUs) share each.
int ranks_per_gpu(int ranks, int gpus) { return gpus > 0 && ranks > gpus ? (ranks + gpus - 1) / gpus : 1; }

// How many ranks share this rank's GPU (the ranks on this machine).
int gpu_sharing(void) {
    char why[128];
    return ranks_per_gpu(comm_local_size(), gpu_count(why, sizeof why));
}

// Stop early, before allocating anything, if the run cannot fit on the GPU:
// the ledger's device buffers at their peak (the host-side data left out),
// plus GPU_HEADROOM for what the ledger cannot see and the context does not
// yet hold, for each rank that shares the GPU, against the memory free now,
// after every rank created its CUDA context and before any allocated (the
// barriers). --fit applies the same test to each setting.
void check_fits_gpu(size_t device_peak_bytes) {
    size_t free_b, total_b, k = (size_t)gpu_sharing();
    comm_barrier();
    gpu_mem_info(&free_b, &total_b);
    comm_barrier();
    if (k * (device_peak_bytes + GPU_HEADROOM) > free_b) {
        char ranks[64] = "";
        if (k > 1) snprintf(ranks, sizeof ranks, " for each of the %zu ranks that share it", k);
        fprintf(stderr, "error: this run needs %.2f GiB of GPU memory (its peak, %.2f GiB, plus %.2f GiB for the "
                "CUDA libraries)%s but %.2f GiB of %.2f GiB are free; use a smaller --model, --batch or "
                "--seq-len, or --ckpt, --flash, --dtype bf16%s (./train --device cuda --dry-run shows the "
                "breakdown; --fit lists what fits)\n", (device_peak_bytes + GPU_HEADROOM) / 1073741824.0,
                device_peak_bytes / 1073741824.0, GPU_HEADROOM / 1073741824.0, ranks, free_b / 1073741824.0,
                total_b / 1073741824.0, k > 1 ? ", fewer ranks or a higher --zero" : "");
        exit(1);
    }
}

// Stop early, with a clear message, if the run cannot fit in this machine.
// The memory this machine has free for a new process now (MemAvailable in
// /proc/meminfo; else 90% of the physical memory).
size_t available_memory(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    size_t kib = 0;
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %zu kB", &kib) == 1) break;
        fclose(f);
    }
    if (kib) return kib * 1024;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? (size_t)(0.9 * pages * page) : 0;
}

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

// The end of a run with --mem / --mem-json: this rank's ledger against the
// prediction; with several ranks, one line per rank (gathered to rank 0).
typedef struct {
    size_t peak_total, predicted_peak;
    int equal;
    long long comm_bytes;
} RankLedger;

int report_memory(const Settings *o, const MemReport *predicted, const MemReport *measured, long long step_comm,
                  size_t P, int zero, const char *receipt) {
    RankLedger mine = {measured->peak_total, predicted->peak_total,
                       !memcmp(predicted, measured, sizeof *measured), step_comm};
    RankLedger *all = malloc(sizeof(RankLedger) * comm_nranks);
    comm_gather_to_root(&mine, all, sizeof mine);
    if (o->mem && comm_rank_id == 0) {
        printf("memory ledger: predicted vs measured (bytes)%s\n", comm_nranks > 1 ? ", rank 0" : "");
        print_mem_report(stdout, predicted, measured, o->eval_only ? EVAL_PHASES : MEM_NPHASE);
        printf("  activation stack: %zu bytes reserved from the prediction, high-water mark %zu\n",
               g_arena.capacity, measured->peak[MEM_ACTIVATIONS]);
        size_t rss = process_peak_rss();
        if (rss)
            printf("    %-12s %16zu B: the process's peak resident size (%.2f MiB), %.2f MiB more than the host part "
                   "of the ledger: the program and its libraries (a build with CUDA maps cuBLASLt and the CUDA "
                   "runtime: about 150 MiB, on the CPU too), thread stacks, the C library's heap; not predicted\n",
                   "process", rss, mib(rss), mib(rss) - mib(g_ledger.peak_total - g_ledger.gpu_reserved));
        if (o->cuda) {  // what cudaMemGetInfo sees beyond the ledger's own device buffers
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
            size_t e = dtype_size(o->dtype);
            printf("  communication: %lld B sent per step by rank 0 (ring volumes: (N-1)/N of each collective); "
                   "textbook %d x params = %zu B\n", all[0].comm_bytes, zero == 3 ? 3 : 2, (zero == 3 ? 3 : 2) * e * P);
        }
    }
    comm_barrier();  // no rank frees its memory before rank 0 has measured the GPU's (the runtime row)
    free(all);
    if (!o->mem_json) return 0;
    char path[4096];
    if (comm_rank_id == 0) snprintf(path, sizeof path, "%s", o->mem_json);
    else snprintf(path, sizeof path, "%s.rank%d", o->mem_json, comm_rank_id);
    if (write_mem_json(path, predicted, measured, receipt)) {
        fprintf(stderr, "error: cannot write '%s'\n", path);
        return 1;
    }
    return 0;
}

// The OpenMP threads the CPU ops use (1 without OpenMP).
int omp_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

// The dry run's last lines: this rank's model states and the buffers they
// move through, next to the ZeRO paper's formula for the stage, with the
// difference named.
void print_paper_comparison(const Settings *s, const MemReport *r) {
    const GPTConfig *cfg = &s->cfg;
    int ranks = s->ranks > 1 ? s->ranks : 1, zero = ranks > 1 ? s->zero : 0, e = s->dtype == 0 ? 4 : 2;
    double K = paper_optimizer_bytes(s);  // 12 in mixed precision, 8 in fp32; less with --adam-bits 8
    int Vp = padded_vocab(cfg), C = cfg->channels;
    size_t P = param_count(cfg);
    const size_t *b = r->peak;
    size_t states = b[MEM_PARAMS] + b[MEM_MASTER] + b[MEM_GRADS] + b[MEM_ADAM_M] + b[MEM_ADAM_V];
    size_t scratch = predict_model_scratch(s), total = states + b[MEM_COMM] + scratch;
    double paper = predict_paper_states(P, s);
    char formula[96];
    if (zero == 0) snprintf(formula, sizeof formula, "(%d + %d + %g) Psi", e, e, K);
    else if (zero == 1) snprintf(formula, sizeof formula, "(%d + %d) Psi + %g Psi / %d", e, e, K, ranks);
    else if (zero == 2) snprintf(formula, sizeof formula, "%d Psi + (%d + %g) Psi / %d", e, e, K, ranks);
    else snprintf(formula, sizeof formula, "(%d + %d + %g) Psi / %d", e, e, K, ranks);
    printf("the ZeRO paper against this run: the model states of %s (stage %d, Psi = %zu parameters)\n",
           ranks > 1 ? "each rank" : "the process", zero, P);
    printf("  %-56s %14.0f B %10.2f MiB\n", formula, paper, paper / 1048576.0);
    printf("  %-56s %14zu B %10.2f MiB\n", "gptmem: params + master + grads + adam_m + adam_v", states, mib(states));
    printf("  %-56s %14zu B %10.2f MiB\n", "  + comm (reduction chunks, gradient buckets, gathers)", b[MEM_COMM],
           mib(b[MEM_COMM]));
    printf("  %-56s %14zu B %10.2f MiB\n", "  + model-sized scratch (fp32 copies, buckets)", scratch, mib(scratch));
    printf("  %-56s %14zu B %10.2f MiB = %.2fx the paper\n", "  = total", total, mib(total), total / paper);
    size_t moved = predict_moved(C, Vp, cfg->max_seq, s->fused_ce), table = ((size_t)Vp + cfg->max_seq) * C + 2 * (size_t)C;
    if (total <= (size_t)paper) return;
    if (!s->fused_ce)
        printf("  the difference: buffers that hold the whole embedding table (%zu parameters, %.1f%% of Psi) and "
               "one op's (%zu); --fused-ce moves the table in chunks of %d rows\n", table, 100.0 * table / P,
               moved - table, VOCAB_CHUNK);
    else
        printf("  the difference: buffers for one piece of %zu parameters (%s)%s\n", moved,
               moved == 4 * (size_t)C * C + 4 * (size_t)C ? "fc's weight and bias, the largest op" :
                                                         "a chunk of the embedding table",
               states > paper + 0.5 ? ", and the shards' padding" : "");
}

// The first step's timeline (memory.h recorded it) against the predicted
// one: --mem-timeline writes both to a CSV per rank (rank r > 0: FILE.rank<r>).
// 0, or 1 if the file cannot be written.
void timeline_path(const Settings *o, char *path, size_t n) {
    if (comm_rank_id == 0) snprintf(path, n, "%s", o->mem_timeline);
    else snprintf(path, n, "%s.rank%d", o->mem_timeline, comm_rank_id);
}

// Before training: can this rank write its timeline file? 0 yes; 1 after a message.
int timeline_unwritable(const Settings *o) {
    char path[1024];
    timeline_path(o, path, sizeof path);
    FILE *f = fopen(path, "w");
    if (f) { fclose(f); return 0; }
    fprintf(stderr, "error: cannot write the memory timeline '%s': %s; give --mem-timeline a path in a writable "
            "directory\n", path, strerror(errno));
    return 1;
}

int write_timeline(const Settings *o, const PredictedTimeline *t) {
    char path[1024];
    timeline_path(o, path, sizeof path);
    if (write_mem_timeline(path, t)) {
        fprintf(stderr, "error: cannot write the memory timeline '%s'\n", path);
        return 1;
    }
    if (comm_rank_id == 0)
        printf("wrote %s: %d pushes and pops of step 1%s, measured %s predicted on every row\n", path, g_recording.n,
               comm_nranks > 1 ? " (each rank: its own file)" : "", timeline_agrees(t) ? "==" : "!= (a bug: see the file)");
    return 0;
}

// --fit: the command line without the flags --fit chooses (for the recommended command).
void fit_base_command(int argc, char **argv, char *out, size_t n) {
    const char *chosen[] = {"fit", "batch", "accum", "dtype", "flash", "ckpt", "recompute", "fused-ce", "zero", "dry-run"};
    const int takes_value[] = {1, 1, 1, 1, 0, 0, 1, 0, 1, 0};
    size_t k = (size_t)snprintf(out, n, "./train");
    for (int i = 1; i < argc && k < n; i++) {
        int skip = 0;
        for (int c = 0; c < 10 && !skip; c++) {
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

// --fit BUDGET: the settings that fit, from the predictor alone (fit.h).
// 0 if one fits, 1 if none does, 2 for a bad budget.
int fit_run(const Settings *o, int argc, char **argv) {
    const GPTConfig *cfg = &o->cfg;
    size_t budget;
    char why[128], text[128];
    if (!strcmp(o->fit, "free")) {  // what this machine (or its GPU) has free now
        if (o->cuda) {
            if (gpu_count(why, sizeof why) <= 0) {
                fprintf(stderr, "error: --fit alone measures the GPU's free memory, and there is none here (%s); give "
                        "a budget, like --fit 80GiB\n", why);
                return 2;
            }
            // the ranks that share a GPU each get their share of what is free once they
            // all run: less a CUDA context for each other rank, taken to be as large as
            // what this process's context made the GPU use (exact on an otherwise idle
            // GPU, more when other processes use it: the budget errs low, so a listed
            // setting still starts)
            size_t total, free_b, k = (size_t)ranks_per_gpu(o->ranks > 1 ? o->ranks : 1, gpu_count(why, sizeof why));
            gpu_open(comm_local_rank(), why, sizeof why);
            gpu_mem_info(&free_b, &total);
            size_t context = total - free_b, others = (k - 1) * context;
            budget = free_b > others ? (free_b - others) / k : 0;
            if (k > 1)
                snprintf(text, sizeof text, "(free now, less %zu more CUDA contexts of %.0f MiB, / %zu ranks per GPU)",
                         k - 1, context / 1048576.0, k);
            else snprintf(text, sizeof text, "(free now)");
        } else {
            budget = available_memory();
            snprintf(text, sizeof text, "(free now)");
        }
    } else {
        budget = parse_budget(o->fit, why, sizeof why);
        if (!budget) usage_error("--fit '%s': %s", o->fit, why);
        snprintf(text, sizeof text, "%s", o->fit);
    }
    char base[2048];
    fit_base_command(argc, argv, base, sizeof base);
    Settings shown = *o;
    shown.dry_run = 1;  // the config line without steps and threads: nothing runs
    print_config_line(cfg, &shown);
    return fit_report(o, o->batch * o->accum, o->ranks > 1 ? o->ranks : 1, budget, text, base);
}

// --dry-run --infer: serving the model, in each number format: the weights,
// and the KV cache for --batch sequences of --seq-len tokens (predict.h).
void print_inference(const GPTConfig *c, const Settings *o) {
    InferenceBytes r = predict_inference(c->layers, c->channels, padded_vocab(c), c->max_seq, o->batch, o->seq_len);
    printf("inference: the weights in each format, and the KV cache (K and V, bf16) for %d x %d tokens: %zu B "
           "(%.2f GiB)\n", o->batch, o->seq_len, r.kv_cache, r.kv_cache / 1073741824.0);
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
}

// --dry-run: the prediction alone, from the config; nothing is allocated.
int dry_run(const Settings *o) {
    const GPTConfig *cfg = &o->cfg;
    MemReport predicted;
    predict_memory(o, &predicted);
    print_config_line(cfg, o);
    if (file_size(o->data) < 0) printf("note: '%s' not found; the data row counts only the batch buffers\n", o->data);
    printf("predicted %smemory%s (dry run: nothing allocated; total peak = the largest total of any phase)\n",
           o->cuda ? "GPU " : "", o->ranks > 1 ? " of each rank" : "");
    print_prediction(stdout, &predicted, o->eval_only ? EVAL_PHASES : MEM_NPHASE);
    if (!o->cuda && !o->eval_only) print_paper_comparison(o, &predicted);
    if (o->mem_ops) print_activation_table(stdout, o, 0);
    if (o->infer) print_inference(cfg, o);
    if (o->mem_json && write_mem_json(o->mem_json, &predicted, NULL, NULL)) {
        fprintf(stderr, "error: cannot write '%s'\n", o->mem_json);
        return 1;
    }
    return 0;
}

// --ranks N (N > 1, not a dry run): start N copies of this command under
// mpirun, without --ranks, and become that mpirun. Open MPI's mpirun is told
// it may start more ranks than cores (--oversubscribe) and, run as root,
// that this is fine (--allow-run-as-root), so the line works as written on
// a 2-core machine and in CI.
int launch_ranks(int argc, char **argv, int n) {
    if (comm_launched())
        usage_error("--ranks starts the ranks itself (mpirun -np %d); under mpirun, leave --ranks out", n);
    if (!comm_have_mpi()) {
        fprintf(stderr, "error: --ranks %d needs MPI, and this build has none: install libopenmpi-dev and "
                "openmpi-bin, then make clean && make\n", n);
        return 1;
    }
    char np[16];
    snprintf(np, sizeof np, "%d", n);
    char **args = calloc((size_t)argc + 8, sizeof(char *));
    int k = 0;
    args[k++] = "mpirun";
    args[k++] = "-np";
    args[k++] = np;
    if (comm_is_openmpi()) args[k++] = "--oversubscribe";
    if (comm_is_openmpi() && geteuid() == 0) args[k++] = "--allow-run-as-root";
    args[k++] = argv[0];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ranks")) { i++; continue; }  // the value follows (parse_args checked it)
        if (!strncmp(argv[i], "--ranks=", 8)) continue;
        args[k++] = argv[i];
    }
    printf("starting %d ranks:", n);
    for (int i = 0; i < k; i++) printf(" %s", args[i]);
    printf("\n");
    fflush(stdout);
    execvp("mpirun", args);
    fprintf(stderr, "error: cannot start mpirun: %s; install openmpi-bin, or start the ranks yourself with "
            "mpirun -np %d\n", strerror(errno), n);
    return 1;
}

// --comm: ZeRO's collectives on the GPU go over NCCL on the device buffers
// when every rank has a GPU of its own, and over MPI through host buffers
// (staging.h) when ranks share one (NCCL refuses two ranks on one GPU) or
// the build has no NCCL. Resolves o->comm to COMM_NCCL or COMM_MPI; with NCCL,
// rank 0 makes the communicator's id and every rank joins. 0, or 1 after a message.
int open_comm_backend(Settings *o) {
    int sharing = gpu_sharing(), built = gpu_nccl_built();
    if (o->comm == COMM_NCCL && (sharing > 1 || !built)) {
        if (comm_rank_id == 0) {
            if (!built) fprintf(stderr, "error: --comm nccl: this build has no NCCL (nccl.h was not found when it "
                                "was built); use --comm mpi\n");
            else fprintf(stderr, "error: --comm nccl: %d ranks share each GPU here, and NCCL refuses two ranks on "
                         "one GPU; use --comm mpi (auto chooses it)\n", sharing);
        }
        return 1;
    }
    if (o->comm == COMM_AUTO) o->comm = sharing == 1 && built ? COMM_NCCL : COMM_MPI;
    if (o->comm != COMM_NCCL) return 0;
    unsigned char id[512] = {0};
    size_t n = gpu_nccl_id_bytes();
    if (n > sizeof id) n = sizeof id;  // (NCCL's is 128 bytes)
    if (comm_rank_id == 0) gpu_nccl_unique_id(id);
    comm_broadcast(id, (long long)n, 0);
    char why[256] = "";
    int bad = gpu_nccl_open(id, comm_nranks, comm_rank_id, why, sizeof why);
    if (comm_any(bad)) {
        if (bad) fprintf(stderr, "error: rank %d: NCCL could not start (%s); try --comm mpi\n", comm_rank_id, why);
        return 1;
    }
    return 0;
}

// The ranks (one process, or N under mpirun) and, with --device cuda, the GPU.
// 0, or 1 after a message.
int open_ranks_and_device(int *argc, char ***argv, Settings *o) {
    // the GPU first (the launcher's environment names the local rank): a CUDA-aware
    // MPI may otherwise make a context on GPU 0 for every rank at MPI_Init
    char why[256];
    int no_gpu = o->cuda && gpu_open(comm_local_rank(), why, sizeof why);
    comm_init(argc, argv);
    if (comm_any(no_gpu)) {
        if (no_gpu) fprintf(stderr, "error: --device cuda: %s; train on the CPU instead (--device cpu)\n", why);
        return 1;
    }
    if (o->cuda && comm_nranks > 1 && open_comm_backend(o)) return 1;
    if (o->zero && comm_nranks == 1)
        say("note: --zero %d on one rank: nothing to shard, training as usual; shard it with `./train --ranks 4 "
            "--zero %d`, or see each rank's memory with `./train --ranks 4 --zero %d --dry-run`%s\n", o->zero,
            o->zero, o->zero, comm_have_mpi() ? "" : " (this build has no MPI: install libopenmpi-dev and rebuild)");
    return 0;
}

// Load the data; every rank must draw the same batch windows, so check that
// they start from the same state. 0, or 1 after a message.
int load_data(Dataset *data, const Settings *o) {
    if (comm_any(data_load(data, o->data, o->batch, o->seq_len, o->seed) != 0)) {
        if (comm_nranks > 1) fprintf(stderr, "error: rank %d stops: a rank could not load its data\n", comm_rank_id);
        return 1;
    }
    uint64_t rng_root = data->rng;
    comm_broadcast(&rng_root, sizeof rng_root, 0);
    if (comm_any(rng_root != data->rng)) {
        fprintf(stderr, "error: rank %d: the ranks disagree on the data stream (same --seed on every rank?)\n",
                comm_rank_id);
        return 1;
    }
    return 0;
}

// ---------------------------------------------------------------------------
// --eval-only: evaluate and sample a saved state, its weights held in fp32 or
// (--quantize) in bf16, int8 or int4, next to the other formats.

// Read the state's weights into the eval model, a few blocks at a time
// through its piece buffer, tensor by tensor (so each read covers whole
// blocks of QUANT_BLOCK); Adam's m and v are read past, for the checksum.
// Returns the state's header; exits on a bad file or a weight that is not finite.
StateHeader eval_load(GPT *model, const char *path, StateReader *r) {
    const GPTConfig *c = &model->cfg;
    StateHeader want = {.L = c->layers, .C = c->channels, .H = c->heads, .V = c->vocab, .maxT = c->max_seq,
                        .nparams = model->nparams};
    *r = state_open(path, &want, READ_WEIGHTS);
    float *buf = model->w_piece;
    size_t K = model->piece;  // a multiple of QUANT_BLOCK
    for (int i = 0; i < model->quant.ntensors; i++) {
        const QuantTensor *t = &model->quant.tensors[i];
        for (size_t at = 0; at < t->count; at += K) {
            size_t n = t->count - at < K ? t->count - at : K;
            state_read(r, buf, n * sizeof(float), 0);
            size_t bad = eval_store(model, buf, t->offset + at, n);
            if (bad) {
                fprintf(stderr, "error: checkpoint '%s' has a weight that is %s (parameter %zu): it cannot be "
                        "evaluated or quantized; resume from an earlier checkpoint\n", path,
                        isnan(buf[bad - 1 - t->offset - at]) ? "nan" : "infinite", bad - 1);
                exit(1);
            }
        }
    }
    for (size_t left = 2 * model->nparams; left > 0;) {  // m and v: read for the checksum only
        size_t n = left < K ? left : K;
        state_read(r, buf, n * sizeof(float), 0);
        left -= n;
    }
    state_close(r);
    return r->hd;
}

// How far `format` moves the weights of the state file f (fp32 weights from
// byte data_at): RMS(rounded - w) / RMS(w) over every parameter, each tensor
// read through the piece buffer and rounded a block at a time.
double weight_error(GPT *model, FILE *f, long data_at, int format) {
    double err = 0, sum = 0;
    float *w = model->w_piece;
    if (fseek(f, data_at, SEEK_SET) != 0) return NAN;
    for (int i = 0; i < model->quant.ntensors; i++) {
        const QuantTensor *t = &model->quant.tensors[i];
        for (size_t at = 0; at < t->count; at += model->piece) {
            size_t n = t->count - at < model->piece ? t->count - at : model->piece;
            if (fread(w, sizeof(float), n, f) != n) return NAN;
            for (size_t b = 0; b < n; b += QUANT_BLOCK) {
                float block[QUANT_BLOCK];
                size_t len = n - b < QUANT_BLOCK ? n - b : QUANT_BLOCK;
                memcpy(block, w + b, len * sizeof(float));
                quant_round_trip(&model->quant, format, block, t->offset + at + b, len);
                for (size_t j = 0; j < len; j++) {
                    err += ((double)block[j] - w[b + j]) * ((double)block[j] - w[b + j]);
                    sum += (double)w[b + j] * w[b + j];
                }
            }
        }
    }
    return sqrt(err / (sum > 0 ? sum : 1));
}

int eval_only_run(Settings *o) {
    const GPTConfig *cfg = &o->cfg;
    int B = o->batch, T = o->seq_len;
    if (open_ranks_and_device(NULL, NULL, o)) return 1;
    if (comm_nranks > 1) {
        fprintf(stderr, "error: --eval-only runs in one process; start it without mpirun\n");
        return 1;
    }
    if (o->dtype != DT_FP32)
        printf("note: --eval-only computes in fp32 and holds the weights in fp32 or in --quantize's format; "
               "--dtype %s is for training (16-bit weights: --quantize bf16)\n", dtype_name[o->dtype]);
    MemReport predicted, measured;
    memset(&measured, 0, sizeof measured);
    predict_memory(o, &predicted);
    check_fits(predicted.peak_total);
    Dataset data;
    if (load_data(&data, o)) return 1;
    Net net;
    memset(&net, 0, sizeof net);
    GPT *model = &net.cpu;
    gpt_build_eval(model, o);
    arena_reserve(predicted.peak[MEM_ACTIVATIONS]);
    StateReader state;
    StateHeader hd = eval_load(model, o->resume, &state);
    measured.phase[PHASE_INIT] = ledger_snapshot();
    print_config_line(cfg, o);
    printf("evaluating %s (step %d): %d validation batches of %d x %d, the weights held in %s\n", o->resume, hd.step,
           o->eval_batches, B, T, quant_name[o->quantize]);

    // the held weights: the run's loss, its ledger
    float held = evaluate(&net, &data, B, T, o->eval_batches, &measured.phase[PHASE_FORWARD]);
    measured.phase[PHASE_BACKWARD] = measured.phase[PHASE_STEP] = ledger_snapshot();
    size_t held_bytes = g_ledger.live[MEM_PARAMS] + g_ledger.live[MEM_QWEIGHTS] + g_ledger.live[MEM_QSCALES];

    // every format, from the state file: each piece read and rounded through it as the model asks for it
    InferenceBytes inf = predict_inference(cfg->layers, cfg->channels, padded_vocab(cfg), cfg->max_seq, 1, 1);
    printf("  %-7s %4s %14s %12s %10s %9s\n", "weights", "bits", "bytes", "weight error", "val loss", "vs fp32");
    float fp32_loss = 0;
    for (int f = QF_FP32; f < QF_N; f++) {
        float loss = held;
        FILE *file = fopen(o->resume, "rb");
        if (!file) { fprintf(stderr, "error: cannot reopen '%s': %s\n", o->resume, strerror(errno)); return 1; }
        double werr = weight_error(model, file, state.data_at, f);
        if (f != o->quantize) {
            model->from_file = file, model->file_at = state.data_at, model->file_format = f;
            loss = evaluate(&net, &data, B, T, o->eval_batches, NULL);
            model->from_file = NULL;
        }
        fclose(file);
        if (f == QF_FP32) fp32_loss = loss;
        size_t bytes = f == o->quantize ? held_bytes : inference_weight_bytes(&inf, quant_bits[f]);
        printf("  %-7s %4d %14zu %11.4f%% %10.6f", quant_name[f], quant_bits[f], bytes, 100 * werr, loss);
        if (f != QF_FP32) printf(" %+9.6f", loss - fp32_loss);
        else printf(" %9s", "");
        printf("%s\n", f == o->quantize ? "  <- held in memory (this run's weights)" : "");
    }
    printf("  weight error: RMS(rounded - w) / RMS(w) over all parameters; the rows not held read the fp32 "
           "weights from the state file a piece at a time, rounded through the format as the model asks for "
           "them: the same numbers, no memory held\n");
    uint64_t rng = rng_seed(o->seed ^ 0x5A3B1E);
    if (o->sample_len) sample_text(&net, &data, T, o->sample_len, o->temperature, &rng);
    memcpy(measured.peak, g_ledger.peak, sizeof measured.peak);
    measured.peak_total = g_ledger.peak_total;
    int bad = (o->mem || o->mem_json) && report_memory(o, &predicted, &measured, 0, model->nparams, 0, NULL);
    net_free(&net);
    data_free(&data);
    comm_finalize();
    return bad;
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

// Model FLOPs of one token, forward and backward: 6 per parameter (the
// matmuls; the LM head is in P through wte) and the attention's QK^T and PV,
// 6 L T C (causal: half of 12 L T C). The usual MFU numerator.
double flops_per_token(const GPTConfig *c, int T) {
    return model_flops_per_token(c->layers, c->channels, padded_vocab(c), c->max_seq, T);
}

// m:ss, or h:mm:ss from an hour
void format_duration(char *out, size_t n, double seconds) {
    long s = (long)(seconds + 0.5);
    if (s >= 3600) snprintf(out, n, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    else snprintf(out, n, "%ld:%02ld", s / 60, s % 60);
}

// The step line: loss, lr, norm, time, tok/s, MFU (against peak_flops of all
// ranks; fpt model FLOPs a token), memory (live now, and this step's peak),
// elapsed and remaining time; with --recompute the time it took and its FLOPs
// (rfpt a token) as a share of the model's.
void print_step_line(const StepResult *r, const Settings *o, int nranks, const LiveState *live, Net *net,
                     double peak_flops, double fpt, double rfpt, double elapsed, int steps_done) {
    int B = o->batch, T = o->seq_len;
    char done[32], left[32];
    format_duration(done, sizeof done, elapsed);
    format_duration(left, sizeof left, elapsed / steps_done * (o->steps - r->step));
    say("step %5d/%d | loss %.4f | lr %.2e | norm %7.4f | %8.1f ms | %8.0f tok/s", r->step, o->steps, r->loss, r->lr,
        r->norm, r->seconds * 1e3, r->tokens / r->seconds);
    if (peak_flops > 0) say(" | MFU %4.1f%%", 100.0 * r->tokens * fpt / r->seconds / peak_flops);
    say(" | mem %.1f MiB now, %.1f peak | %s elapsed, %s left", mib(g_ledger.total), mib(g_ledger.window_peak), done,
        left);
    if (o->accum > 1 || nranks > 1) say(" | tokens %d micro, %lld step", B * T, r->tokens);
    if (nranks > 1) say(" | sent %.2f MiB", comm_bytes_sent / 1048576.0);
    if (o->recompute) say(" | recompute %.1f ms, %.1f%% more FLOPs", net_recompute_seconds(net) * 1e3, 100.0 * rfpt / fpt);
    if (r->skipped) say(" | skipped: inf/nan gradients, loss scale %g -> %g", r->scale, live->loss_scale);
    else if (o->dtype == DT_FP16) say(" | loss scale %g", r->scale);
    say("\n");
}

// OpenMP's waiting threads spin before they sleep, 300,000 times in libgomp:
// on a machine whose cores other work keeps busy, the spinning takes the
// cores from the threads that have work, and a run takes 5-40 times longer
// (doc/performance.md). A spin count of 10,000 costs nothing on a quiet
// machine and ends most of that. libgomp reads it when it loads, before main,
// so main sets it and starts the program again, once; a user's own
// OMP_WAIT_POLICY or GOMP_SPINCOUNT is left as it is.
void openmp_wait_defaults(char **argv) {
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    setenv("GOMP_SPINCOUNT", "10000", 1);
    execv("/proc/self/exe", argv);  // (if it cannot, the run goes on with the runtime's default)
}

// The OpenMP threads of this rank: --threads, else OMP_NUM_THREADS, else the
// machine's cores divided among the ranks on it (the launcher's local size,
// read before MPI starts), and no more than the cores this process may run on
// (the launcher may have bound it to one), so that N ranks do not each start
// a thread per core. Returns the ranks the cores were divided among (1: none).
int set_threads(const Settings *o) {
#ifdef _OPENMP
    if (o->threads > 0) omp_set_num_threads(o->threads);
    if (o->threads > 0 || getenv("OMP_NUM_THREADS") || comm_local_size() <= 1) return 1;
    int ranks = comm_local_size(), share = (int)sysconf(_SC_NPROCESSORS_ONLN) / ranks, mine = omp_get_num_procs();
    if (share > mine) share = mine;
    omp_set_num_threads(share > 1 ? share : 1);
    return ranks;
#else
    (void)o;
    return 1;
#endif
}

int main(int argc, char **argv) {
    openmp_wait_defaults(argv);
    // 1. parse: the flags and the model they describe
    Settings o = parse_settings(argc, argv);
    GPTConfig cfg = o.cfg;
    g_threads_shared_by = set_threads(&o);
    int B = o.batch, T = o.seq_len;
    setvbuf(stdout, NULL, _IOLBF, 0);

    if (o.ranks > 1 && !o.dry_run && !o.fit) return launch_ranks(argc, argv, o.ranks);  // --ranks N: mpirun -np N
    if (o.dry_run && !o.ranks && comm_launched()) {  // mpirun -np N ./train --dry-run: predict for N ranks,
        int launched_rank, size = comm_launched_size(&launched_rank);        // printed once
        if (launched_rank != 0) return 0;
        o.ranks = size;
    }

    // 2. predict the memory from the config alone (a dry run stops here)
    if (o.fit) return fit_run(&o, argc, argv);
    if (o.dry_run) return dry_run(&o);
    if (o.eval_only) return eval_only_run(&o);
    if (open_ranks_and_device(&argc, &argv, &o)) return 1;
    int rank = comm_rank_id, nranks = comm_nranks;
    o.ranks = nranks;
    Plan plan = make_plan(&o, nranks);
    MemReport predicted;
    predict_memory(&o, &predicted);
    if (o.cuda) check_fits_gpu(predicted.peak_total - predict_host_bytes_gpu(&o));
    else check_fits(predicted.peak_total * (size_t)nranks);

    // 3. build: data, the model and its optimizer (every buffer through the ledger), or resume
    Dataset data;
    if (load_data(&data, &o)) return 1;
    Net net;
    net_build(&net, &o, &plan, rank, nranks, predicted.peak[MEM_ACTIVATIONS]);
    AdamWConfig adam = net.opt.cfg;
    int zero = net_zero_stage(&net);
    NetState st = net_state(&net);  // this rank's part of what a saved state holds
    size_t nparams = param_count(&cfg);
    StateHeader run = {.L = cfg.layers, .C = cfg.channels, .H = cfg.heads, .V = cfg.vocab, .maxT = cfg.max_seq,
                       .B = B, .T = T, .nparams = nparams, .dtype = o.dtype, .zero = zero, .nranks = nranks,
                       .rank = rank, .lo = st.lo, .hi = st.hi, .adam_bits = o.adam_bits};
    LiveState live = {0, o.dtype == DT_FP16 ? o.loss_scale : 1.0f, 0};
    uint64_t sample_rng = rng_seed(o.seed ^ 0x5A3B1E);
    char save_path[4096] = "", resume_path[4096] = "";
    if (o.save) snprintf(save_path, sizeof save_path, rank ? "%s.rank%d" : "%s", o.save, rank);
    if (o.resume) snprintf(resume_path, sizeof resume_path, rank ? "%s.rank%d" : "%s", o.resume, rank);
    if (comm_any(o.save && state_check_target(save_path))) return 1;  // before training: nothing is lost
    if (comm_any(o.mem_timeline && timeline_unwritable(&o))) return 1;
    int start_step = 0;
    if (o.resume) {
        StateHeader got = load_state(resume_path, &run, &st);
        if (got.adam_bits != run.adam_bits)
            say("note: %s kept Adam's moments in %d bits; this run keeps them in %d (--adam-bits %d), converted as "
                "they were read\n", o.resume, got.adam_bits, run.adam_bits, run.adam_bits);
        net_state_loaded(&net);
        live = state_live(&got);
        start_step = got.step;
        data.rng = got.data_rng;
        sample_rng = got.sample_rng;
        say("resumed from %s at step %d\n", o.resume, start_step);
        if (start_step >= o.steps) {
            say("nothing to train: the state is already at step %d of --steps %d; to train further, pass --steps "
                "N with N > %d (the learning-rate schedule follows --steps)\n", start_step, o.steps, start_step);
            net_free(&net);
            data_free(&data);
            comm_finalize();
            return 0;
        }
    }
    if (rank == 0) print_config_line(&cfg, &o);

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
    double peak_flops = o.cuda ? gpu_peak_flops(o.dtype) : cpu_peak_flops(omp_threads()) * nranks;
    double fpt = flops_per_token(&cfg, T);
    double rfpt = cfg.layers * recompute_flops_per_token_layer(plan.drops, T, cfg.channels);
    int print_every = o.print_every ? o.print_every : (o.steps - start_step + 24) / 25;
    double t_start = now_seconds(), t_train = 0.0;
    long long tokens_seen = 0, first_step_comm = 0;
    size_t block_kept = 0;  // what a block kept on the stack in a training forward (measured, --mem-ops)
    float val_loss = NAN;
    int first = 1;
    Timing timing;  // --timing: each phase's time (timing.h); without it the marks do nothing
    timing_init(&timing, o.timing && rank == 0, o.cuda, o.accum);
    int replica_every = net_replica_check_every(&net);  // --log's check that the ranks agree
    if (o.log && replica_every > 1)
        say("note: --log checks that the ranks hold the same weights every %d steps (and at the last): on the GPU "
            "each check brings all %.0f MiB of them to the host\n", replica_every,
            mib(net.gpu.nparams * net.gpu.e));
    for (int step = start_step; step < o.steps; step++) {
        double t0 = now_seconds();
        comm_bytes_sent = 0;
        ledger_window_start();
        g_ledger.trace = o.trace && first && rank == 0;
        if (g_ledger.trace) printf("trace of step %d: the activation stack%s\n", step + 1,
                                   zero ? ", ZeRO gathers and reductions" : "");

        timing_start(&timing);
        net_zero_grad(&net);
        float scale = live.loss_scale;  // fp16: the loss is scaled so small gradients survive
        float dloss = scale / ((float)B * T * o.accum * nranks);  // the mean over the global batch
        if (first && !o.cuda && (o.mem || o.mem_json || o.mem_timeline)) record_start();  // the timeline and the peak's receipt
        for (int micro = 0; micro < o.accum; micro++) {  // --accum: gradients add up over micro-batches
            data_next_train(&data, B, T, rank, nranks);
            timing_mark(&timing, TM_DATA);
            net_forward(&net, data.inputs, data.targets, B, T);                    // forward
            timing_mark(&timing, TM_FORWARD);
            if (!o.cuda) block_kept = net.cpu.block_kept_bytes;                     // (--mem-ops)
            if (first && micro == 0) measured.phase[PHASE_FORWARD] = ledger_snapshot();
            net_backward(&net, data.inputs, data.targets, dloss);                  // backward
            timing_mark(&timing, TM_BACKWARD);
            if (first && micro == 0) measured.phase[PHASE_BACKWARD] = ledger_snapshot();
        }
        record_stop();
        net_reduce(&net);                                                          // reduce (ZeRO stages 0, 1)
        timing_mark(&timing, TM_REDUCE);
        net_grad_norm(&net, scale, o.clip);                                        // norm, and the clip scale
        timing_mark(&timing, TM_NORM);
        float lr = lr_at(&adam, step);
        net_step(&net, lr, live.updates + 1);                                      // step (skipped if the norm is not finite)

        // the step's numbers, read now that it is queued: on the GPU, the host's one wait for it
        NetNumbers numbers = net_read_numbers(&net);
        float loss = (float)(comm_sum_ordered(numbers.loss_sum / o.accum) / nranks);  // the global batch's mean loss
        double norm = sqrt(numbers.sumsq) / scale;
        int skipped = !isfinite(norm);  // fp16 overflow: the step did nothing; halve the scale
        if (skipped && o.dtype != DT_FP16) {
            fprintf(stderr, "error: the gradients are not finite at step %d; lower --lr\n", step + 1);
            return 1;
        }
        if (!skipped) live.updates++;
        if (o.dtype == DT_FP16) update_loss_scale(&live.loss_scale, &live.good_steps, skipped);
        timing_mark(&timing, TM_STEP);
        timing_step_end(&timing);
        if (first) {
            measured.phase[PHASE_STEP] = ledger_snapshot();
            first_step_comm = comm_bytes_sent;
        }
        g_ledger.trace = 0;
        first = 0;

        // what the step did: its line, then evaluation, the log, a sample and a save when due
        StepResult r = {step + 1, loss, lr, norm, now_seconds() - t0, (long long)B * T * o.accum * nranks, scale,
                        skipped};
        t_train += r.seconds;
        tokens_seen += r.tokens;
        int last = step + 1 == o.steps || step + 1 == o.stop_after, evaluated = 0;
        if (step == start_step || last || skipped || (step + 1) % print_every == 0)
            print_step_line(&r, &o, nranks, &live, &net, peak_flops, fpt, rfpt, now_seconds() - t_start, step + 1 - start_step);
        if (!isfinite(loss) && !skipped) {
            fprintf(stderr, "error: the loss is %f at step %d; lower --lr or raise --warmup\n", loss, step + 1);
            return 1;
        }
        if ((o.eval_every && (step + 1) % o.eval_every == 0) || last) {
            val_loss = evaluate(&net, &data, B, T, o.eval_batches, NULL);
            evaluated = 1;
            say("val loss %.4f (%d batches of %d x %d)\n", val_loss, o.eval_batches, B, T);
        }
        if (o.log) {  // every rank takes part in the replica check; rank 0 writes (empty: not checked this step)
            int same = (step + 1) % replica_every == 0 || last ? net_replicas_identical(&net) : -1;
            if (log) {
                fprintf(log, "%d,%.9g,", r.step, loss);
                if (evaluated) fprintf(log, "%.9g", val_loss);
                fprintf(log, ",%.9g,%.9g,%.3f,%lld,", lr, norm, r.seconds * 1e3, r.tokens);
                if (same >= 0) fprintf(log, "%d", same);
                fprintf(log, "\n");
            }
        }
        if (o.sample_len && ((o.sample_every && (step + 1) % o.sample_every == 0) || last))
            sample_text(&net, &data, T, o.sample_len, o.temperature, &sample_rng);
        if (o.save && ((o.save_every && (step + 1) % o.save_every == 0) || last)) {
            StateHeader hd = state_at(&run, step + 1, &live, data.rng, sample_rng);
            if (save_state(save_path, &hd, &st)) return 1;
            say("saved checkpoint %s%s at step %d\n", o.save, nranks > 1 ? " (and .rank1 ... for the other ranks)" : "",
                step + 1);
        }
        if (step + 1 == o.stop_after) break;
    }

    // 5. report
    int end_step = o.stop_after && o.stop_after < o.steps ? o.stop_after : o.steps;
    int steps_run = end_step > start_step ? end_step - start_step : 0;
    say("done: %d steps in %.1f s (%.0f tok/s training) | final val loss %.4f | peak memory %.2f MiB%s (the "
        "process: %.2f MiB, see --mem)\n", steps_run, now_seconds() - t_start, t_train > 0 ? tokens_seen / t_train : 0.0,
        val_loss, mib(g_ledger.peak_total), nranks > 1 ? " (rank 0)" : "", mib(process_peak_rss()));
    timing_print(&timing);
    timing_free(&timing);
    if (steps_run > 0) {
        memcpy(measured.peak, g_ledger.peak, sizeof measured.peak);
        measured.peak_total = g_ledger.peak_total;
        // the first step's timeline, recorded on the CPU: its CSV, and the peak's receipt (--mem, --mem-json)
        int recorded = !o.cuda && (o.mem || o.mem_json || o.mem_timeline);
        PredictedTimeline timeline = {0};
        char *receipt = NULL;
        if (recorded) {
            timeline = predicted_timeline(&o, o.accum, &predicted);
            receipt = receipt_json(&timeline);
            if (o.mem_timeline && write_timeline(&o, &timeline)) return 1;
        }
        if ((o.mem || o.mem_json) &&
            report_memory(&o, &predicted, &measured, first_step_comm, nparams, zero, receipt))
            return 1;
        if (recorded && o.mem && rank == 0) print_peak_receipt(stdout, &timeline, &predicted);
        if (recorded) { predicted_timeline_free(&timeline); free(receipt); }
        if (o.mem_ops && rank == 0) print_activation_table(stdout, &o, block_kept);
    }
    if (log) fclose(log);
    net_free(&net);
    data_free(&data);
    comm_finalize();
    return 0;
}
