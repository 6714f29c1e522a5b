// app/export.h — --export FILE: the trained weights as a model file other programs read, llm.c's
// (io/llmc.h) or Hugging Face's (FILE.safetensors with config.json beside it: io/safetensors_out.h), and
// --lora's adapters as PEFT's folder (io/peft.h). Each is written through temps that are all complete
// before any is renamed (io/files.h), so an export cut short is no model. app/outputs.h checks the paths.
#ifndef GPTMEM_EXPORT_H
#define GPTMEM_EXPORT_H

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "core/config.h"
#include "core/lora.h"
#include "io/files.h"
#include "io/llmc.h"
#include "io/peft.h"
#include "io/safetensors_out.h"
#include "parallel/comm.h"

// --export's format: FILE.safetensors writes a Hugging Face model (io/safetensors_out.h: the file, and
// config.json beside it), any other name llm.c's model file (io/llmc.h). 1 for safetensors.
int export_safetensors(const char *path) {
    size_t n = strlen(path);
    return n > 12 && !strcmp(path + n - 12, ".safetensors");
}

// The bytes of the file --export writes (checked against the disk's room before training).
long long export_bytes(const char *path, const GPTConfig *c) {
    return export_safetensors(path) ? st_export_bytes(c) : llmc_export_bytes(c);
}

// config.json beside FILE.safetensors (into out); PEFT's adapter_config.json beside --lora's adapters.
void export_config_path(const char *path, int adapters, char *out, size_t len) {
    const char *slash = strrchr(path, '/');
    snprintf(out, len, "%.*s%s", slash ? (int)(slash - path + 1) : 0, path, adapters ? "adapter_config.json" : "config.json");
}

// What --export writes, by format: its size, then (rank 0) sizing it, (every rank) its part, (rank 0) the header.
typedef struct {
    const char *name;
    long long (*bytes)(const GPTConfig *c);
    int (*begin)(const char *tmp, const GPTConfig *c);
    int (*range)(const char *tmp, const GPTConfig *c, size_t lo, size_t hi,
                 void (*get)(const void *ctx, size_t at, float *dst, size_t n), const void *ctx);
    int (*finish)(const char *tmp, const GPTConfig *c);
} ExportFormat;

// A part of the model a rank writes: the weights [lo, hi) of the flat layout, got as get(ctx, from + i)
// for the i-th of them (from: where they start in what get reads).
typedef struct {
    size_t lo, hi, from;
} ExportRun;

typedef struct {
    void (*get)(const void *ctx, size_t at, float *dst, size_t n);
    const void *ctx;
    size_t from;
} ExportGet;

static void export_run_get(const void *ctx, size_t at, float *dst, size_t n) {
    const ExportGet *g = ctx;
    g->get(g->ctx, g->from + at, dst, n);
}

// --export FILE: the fp32 weights as llm.c's model file or a Hugging Face
// model (export_kind), from every rank's parts (runs, each [lo, hi) of the
// flat layout) got through get(ctx, at, dst, n): rank 0 makes a temp beside
// FILE and sizes it, each rank writes its parts into it, rank 0 writes the
// header last (and, for safetensors, config.json's temp), then both are renamed
// together. A failure or a signal on the way removes the temps. 0, or 1 after a message (every rank returns the same).
int export_weights_runs(const char *path, const GPTConfig *c, const ExportRun *runs, int nruns,
                        void (*get)(const void *ctx, size_t at, float *dst, size_t n), const void *ctx) {
    const ExportFormat llmc = {is_llama(c) ? "llm.c's Llama 3 model file" : "llm.c's GPT-2 model file", llmc_export_bytes,
                               llmc_export_begin, llmc_export_range, llmc_export_finish};
    const ExportFormat hf = {is_llama(c) ? "a Llama for Hugging Face, config.json beside it"
                                         : "a GPT-2 for Hugging Face, config.json beside it",
                             st_export_bytes, st_export_begin, st_export_range, st_export_finish};
    const ExportFormat *fmt = export_safetensors(path) ? &hf : &llmc;
    char tmp[4200], cfg[4200], file[4200];
    snprintf(file, sizeof file, "%s", path);
    export_config_path(path, 0, cfg, sizeof cfg);
    int root = comm_rank_id == 0;
    if (comm_any(root && writable_target("--export", path, fmt->bytes(c)))) return 1;
    const char *step = "make its temp";
    int fd = root ? temp_create(path, tmp, sizeof tmp, "the --export file") : -1, err = errno;
    int mine = root && fd < 0;
    if (fd >= 0) close(fd);
    comm_broadcast(tmp, sizeof tmp, 0);  // (the temp's name, which every rank writes its part into)
    if (!comm_any(mine)) step = "size it", mine = root && fmt->begin(tmp, c), err = mine ? errno : 0;
    if (!comm_any(mine)) {
        step = "write the weights";
        for (int i = 0; i < nruns && !mine; i++) {
            ExportGet g = {get, ctx, runs[i].from};
            mine = fmt->range(tmp, c, runs[i].lo, runs[i].hi, export_run_get, &g) != 0, err = mine ? errno : 0;
        }
        interrupt_for_tests("GPTMEM_INTERRUPT_EXPORT");  // (the tests' signal: the weights written, not the header)
    }
    if (!comm_any(mine)) step = "write the header", mine = root && fmt->finish(tmp, c), err = mine ? errno : 0;
    OutFile config = {0};
    if (!comm_any(mine) && fmt == &hf && root) {
        step = "write config.json beside it";
        FILE *f = out_open(&config, cfg, "the --export file");
        mine = !f || st_export_config(f, c) || out_close(&config), err = mine ? errno : 0;
    }
    int renamed = 0;
    if (!comm_any(mine) && root) {
        interrupt_for_tests("GPTMEM_INTERRUPT_EXPORT_DONE");  // (the tests' signal: every temp written, none renamed)
        char *from[] = {tmp, config.tmp}, *to[] = {file, cfg};
        int n = fmt == &hf ? 2 : 1;
        step = "rename it", renamed = temps_commit(n, from, to), mine = renamed < n, err = mine ? errno : 0;
    }
    int bad = comm_any(mine);
    if (root && fd >= 0) unlink(tmp), temp_forget(tmp);
    if (root && fmt == &hf) unlink(config.tmp), temp_forget(config.tmp);
    if (bad && mine)
        fprintf(stderr, "error: --export '%s': could not %s (%s); %s\n", path, step, err ? strerror(err) : "a write failed",
                renamed ? "the weights were replaced, and config.json beside them was not: export again" :
                "the unfinished files were removed, the previous ones (if any) are intact");
    if (!bad && root) printf("exported the weights to %s (%s, fp32)\n", path, fmt->name);
    return bad;
}

// ... each rank's one part [lo, hi), got as get(ctx, i) for the i-th.
int export_weights(const char *path, const GPTConfig *c, size_t lo, size_t hi,
                   void (*get)(const void *ctx, size_t at, float *dst, size_t n), const void *ctx) {
    ExportRun run = {lo, hi, 0};
    return export_weights_runs(path, c, &run, 1, get, ctx);
}

// --lora --export DIR/adapter_model.safetensors: the adapters as PEFT saves them (io/peft.h), with
// adapter_config.json beside; both written to temps, then renamed together. One rank (--lora's). 0, or 1
// after a message.
int export_adapters(const char *path, const GPTConfig *c, const LoraConfig *a, LoraGet get, void *ctx) {
    char cfg[4200];
    export_config_path(path, 1, cfg, sizeof cfg);
    if (writable_target("--export", path, peft_file_bytes(c, a))) return 1;
    OutFile file = {0}, config = {0};
    FILE *f = out_open(&file, path, "the --export file"), *g = f ? out_open(&config, cfg, "the --export file") : NULL;
    int bad = !f || !g || peft_write_from(f, c, a, get, ctx) || peft_write_config(g, c, a), err = bad ? errno : 0;
    if (f && out_close(&file)) bad = 1, err = errno;
    if (g && out_close(&config)) bad = 1, err = errno;
    char *from[] = {file.tmp, config.tmp}, *to[] = {file.path, config.path};
    interrupt_for_tests("GPTMEM_INTERRUPT_EXPORT_DONE");
    int renamed = bad ? 0 : temps_commit(2, from, to);
    bad = bad || renamed < 2, err = err ? err : errno;
    unlink(file.tmp), temp_forget(file.tmp), unlink(config.tmp), temp_forget(config.tmp);
    if (bad)
        fprintf(stderr, "error: --export '%s': could not write the adapters (%s); %s\n", path, err ? strerror(err) : "a write "
                "failed", renamed == 1 ? "the adapters were replaced, adapter_config.json beside them was not: export "
                "again" : "the unfinished files were removed, the previous ones (if any) are intact");
    else printf("exported the adapters to %s (PEFT's LoRA adapter, adapter_config.json beside it, fp32)\n", path);
    return bad;
}

#endif
