// app/outputs.h — the files a run writes: --save, --export, --log, --mem-json,
// --mem-timeline, --mem-snapshot, --trace-json. Checked while the settings are read and again before
// training, so that a run is never lost at its end to a path it cannot write
// and never replaces a file it should not: none of them is one of the run's
// inputs (the corpus, --init, ...) or another of them; --save replaces only a
// gptmem checkpoint and --export only an llm.c model file (or an empty file)
// unless --overwrite; each has room for the whole file where it goes.
// --export itself is here too: it writes through FILE.tmp (io/files.h), the
// header last, so that an export cut short is no model file.
#ifndef GPTMEM_OUTPUTS_H
#define GPTMEM_OUTPUTS_H

#include <glob.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "app/usage.h"
#include "core/config.h"
#include "core/settings.h"
#include "io/files.h"
#include "io/llmc.h"
#include "io/safetensors_out.h"
#include "io/state.h"
#include "parallel/comm.h"

enum { OUT_STATE, OUT_LLMC, OUT_SAFETENSORS };  // what --save and --export (FILE, FILE.safetensors) write

// Does the existing file `path` hold what a writer of `kind` writes? An empty
// or missing file does too (nothing to lose).
int holds_kind(const char *path, int kind) {
    long long size = file_size(path);
    if (size <= 0) return 1;
    unsigned char head[8] = {0};
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(head, 1, sizeof head, f) : 0;
    if (f) fclose(f);
    int32_t magic;
    memcpy(&magic, head, 4);
    if (kind == OUT_STATE) return got == 8 && !memcmp(head, STATE_MAGIC, 8);
    if (kind == OUT_SAFETENSORS) {  // a header length that fits the file
        uint64_t n;
        memcpy(&n, head, 8);
        return got == 8 && n >= 2 && (long long)n < size;
    }
    return got >= 4 && (magic == LLMC_MODEL_MAGIC || magic == LLMC_LLAMA_MAGIC);
}

// The input (by its flag) that `path` is the same file as, or NULL. A --save
// onto the --resume state (its own rank's file) is a state going on: allowed.
const char *input_at(const Settings *s, const char *flag, const char *path) {
    const char *flags[] = {"--data", "--val-data", "--init", "--tokenizer", "--prompt-file", "--hostfile", "--resume"};
    const char *paths[] = {s->data, s->val_data, s->init, s->tokenizer_path[0] ? s->tokenizer_path : NULL,
                           s->prompt_file, s->hostfile, s->resume};
    for (int i = 0; i < 7; i++) {
        if (!paths[i] || (i == 6 && !strcmp(flag, "--save"))) continue;
        glob_t g = {0};
        int n = is_pattern(paths[i]) && glob(paths[i], 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
        int same = is_pattern(paths[i]) ? 0 : same_file(paths[i], path);
        for (int k = 0; k < n && !same; k++) same = same_file(g.gl_pathv[k], path);
        globfree(&g);
        if (same) return flags[i];
    }
    return NULL;
}

// While the settings are read (exit 2): no output is an input, and no two
// outputs are one file.
void check_outputs_apart(const Settings *s) {
    const char *flags[] = {"--save", "--export", "--log", "--mem-json", "--mem-timeline", "--mem-snapshot", "--trace-json"};
    const char *paths[] = {s->save, s->export_to, s->log, s->mem_json, s->mem_timeline, s->mem_snapshot, s->trace_json};
    for (int i = 0; i < 7; i++) {
        if (!paths[i]) continue;
        const char *input = input_at(s, flags[i], paths[i]);
        if (input)
            usage_error("%s '%s' is the file %s reads: writing it would replace the run's own input; write "
                        "somewhere else", flags[i], paths[i], input);
        for (int j = 0; j < i; j++)
            if (paths[j] && (!strcmp(paths[i], paths[j]) || same_file(paths[i], paths[j])))
                usage_error("%s and %s both write '%s': one would replace the other; give them two paths", flags[j],
                            flags[i], paths[i]);
    }
}

// Before training (and before each write): can `flag` write `bytes` bytes of
// `kind` to `path`? 0, or -1 after a message.
int check_output(const Settings *s, const char *flag, const char *path, int kind, long long bytes) {
    if (!s->overwrite && !holds_kind(path, kind)) {
        fprintf(stderr, "error: %s '%s': the file exists and is not %s; gptmem replaces only its own kind of file: "
                "give another path, or add --overwrite to replace it\n", flag, path,
                kind == OUT_STATE ? "a gptmem checkpoint" : kind == OUT_LLMC ? "an llm.c model file" : "a safetensors file");
        return -1;
    }
    return writable_target(flag, path, bytes);
}

// Can `flag` write the file `path` (a report written at the end: --mem-json)?
// Tried without harm: opened to append, and removed if it was not there. 0, or
// 1 after a message.
int cannot_write(const char *flag, const char *path) {
    int existed = !path_missing(path);
    FILE *f = fopen(path, "a");
    if (f) {
        fclose(f);
        if (!existed) remove(path);
        return 0;
    }
    fprintf(stderr, "error: %s: cannot write '%s': %s; give it a path in a folder you can write\n", flag, path,
            strerror(errno));
    return 1;
}

// A file each rank writes its own of (--mem-timeline, --mem-snapshot, --trace-json): rank 0 the name
// given, rank r > 0 NAME.rank<r>.
void rank_path(const char *name, int rank, char *path, size_t n) {
    if (rank == 0) snprintf(path, n, "%s", name);
    else snprintf(path, n, "%s.rank%d", name, rank);
}

// Before training: can this rank write its own `flag` file? 0 yes; 1 after a message.
int rank_file_unwritable(const char *flag, const char *name, int rank) {
    char path[4096];
    rank_path(name, rank, path, sizeof path);
    return cannot_write(flag, path);
}

// --log's lines reach the file as they are written (one fflush a step), and
// a write that fails (a full disk, /dev/full) stops the run: 0, or 1 after a
// message.
int log_flush(FILE *log, const char *path) {
    if (fflush(log) == 0 && !ferror(log)) return 0;
    fprintf(stderr, "error: writing the log '%s' failed: %s\n", path, errno ? strerror(errno) : "a write failed");
    return 1;
}

// --export's format: FILE.safetensors writes a Hugging Face model (io/safetensors.h: the file, and
// config.json beside it), any other name llm.c's model file (io/llmc.h).
int export_kind(const char *path) {
    size_t n = strlen(path);
    return n > 12 && !strcmp(path + n - 12, ".safetensors") ? OUT_SAFETENSORS : OUT_LLMC;
}

// config.json beside FILE.safetensors (into out).
void export_config_path(const char *path, char *out, size_t len) {
    const char *slash = strrchr(path, '/');
    snprintf(out, len, "%.*sconfig.json", slash ? (int)(slash - path + 1) : 0, path);
}

// Before training: can --export write its file (and config.json beside a safetensors file: replaced
// only when it is a model's config, or with --overwrite)? 0, or -1 after a message.
int check_export(const Settings *s, const GPTConfig *c) {
    int kind = export_kind(s->export_to);
    if (kind == OUT_LLMC) return check_output(s, "--export", s->export_to, OUT_LLMC, llmc_export_bytes(c));
    char cfg[4200];
    export_config_path(s->export_to, cfg, sizeof cfg);
    FILE *f = path_missing(cfg) ? NULL : fopen(cfg, "r");
    char text[4096] = "";
    size_t got = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    text[got] = 0;
    if (!path_missing(cfg) && !s->overwrite && !strstr(text, "\"model_type\"")) {
        fprintf(stderr, "error: --export '%s': '%s' exists and is not a model's config.json; gptmem replaces only its "
                "own kind of file: give another folder, or add --overwrite\n", s->export_to, cfg);
        return -1;
    }
    return check_output(s, "--export", s->export_to, OUT_SAFETENSORS, st_export_bytes(c));
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

// --export FILE: the fp32 weights as llm.c's model file or a Hugging Face
// model (export_kind), from every rank's part [lo, hi) got through get(ctx,
// at, dst, n): rank 0 sizes FILE.tmp, each rank writes its part, rank 0
// writes the header last and renames it over FILE (then, for safetensors,
// config.json beside it, through its own .tmp). A failure or a signal on the
// way removes FILE.tmp. 0, or 1 after a message (every rank returns the same).
int export_weights(const char *path, const GPTConfig *c, size_t lo, size_t hi,
                   void (*get)(const void *ctx, size_t at, float *dst, size_t n), const void *ctx) {
    const ExportFormat llmc = {is_llama(c) ? "llm.c's Llama 3 model file" : "llm.c's GPT-2 model file", llmc_export_bytes,
                               llmc_export_begin, llmc_export_range, llmc_export_finish};
    const ExportFormat hf = {is_llama(c) ? "a Llama for Hugging Face, config.json beside it"
                                         : "a GPT-2 for Hugging Face, config.json beside it",
                             st_export_bytes, st_export_begin, st_export_range, st_export_finish};
    const ExportFormat *fmt = export_kind(path) == OUT_SAFETENSORS ? &hf : &llmc;
    char tmp[4096], cfg[4200], cfg_tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    export_config_path(path, cfg, sizeof cfg);
    snprintf(cfg_tmp, sizeof cfg_tmp, "%s.tmp", cfg);
    int root = comm_rank_id == 0;
    if (comm_any(root && writable_target("--export", path, fmt->bytes(c)))) return 1;
    writing_begin(tmp, "the --export file");
    const char *step = "size it";
    int mine = root && fmt->begin(tmp, c), err = mine ? errno : 0;
    if (!comm_any(mine)) {
        step = "write the weights";
        mine = fmt->range(tmp, c, lo, hi, get, ctx) != 0, err = mine ? errno : 0;
        interrupt_for_tests("GPTMEM_INTERRUPT_EXPORT");
    }
    if (!comm_any(mine)) step = "write the header", mine = root && fmt->finish(tmp, c), err = mine ? errno : 0;
    if (!comm_any(mine)) step = "rename it", mine = root && rename(tmp, path) != 0, err = mine ? errno : 0;
    if (!comm_any(mine) && fmt == &hf)
        step = "write config.json beside it",
        mine = root && (st_export_config(cfg_tmp, c) || rename(cfg_tmp, cfg) != 0), err = mine ? errno : 0;
    int bad = comm_any(mine);
    writing_end();
    if (bad) {
        if (root) unlink(tmp), unlink(cfg_tmp);
        if (mine) fprintf(stderr, "error: --export '%s': could not %s (%s); the unfinished file was removed, the "
                          "previous one (if any) is intact\n", path, step, err ? strerror(err) : "a write failed");
        return 1;
    }
    if (root) printf("exported the weights to %s (%s, fp32)\n", path, fmt->name);
    return 0;
}

#endif
