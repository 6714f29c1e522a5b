// app/outputs.h — the files a run writes, and the one rule they all follow:
// --save, --export (and config.json beside a safetensors file), --log,
// --mem-json, --mem-timeline, --mem-snapshot, --trace-json, --tensorboard, and
// each rank's own FILE.rank<r> of them. Checked while the settings are read
// (rank 0's names) and once the ranks are known (each rank its own), before
// anything is allocated, so that a run is never lost at its end to a path it
// cannot write and never replaces what it should not:
//   - never a device, directory, fifo or socket;
//   - never one of the run's inputs, by device and inode (the corpus, --config,
//     --init and every file of its model folder, ...), nor another output;
//   - an existing file only when it holds what this writer writes (a gptmem
//     checkpoint, an llm.c model file, a gptmem log, a snapshot, ...) or is
//     empty; any other file only with --overwrite;
//   - in a folder that exists and can be written (--export makes its folder,
//     as save_pretrained does); --save and --export also need room for the
//     whole file, checked before training;
//   - one run at a time: each output locked for the run's life (PATH.lock), so a
//     second run given it refuses at its start, naming the first.
// How each is written (whole, through a temp of its own; or a stream) is io/files.h's;
// --export's writers are app/export.h.
#ifndef GPTMEM_OUTPUTS_H
#define GPTMEM_OUTPUTS_H

#include <glob.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "app/usage.h"
#include "core/config.h"
#include "core/settings.h"
#include "io/files.h"
#include "app/model_files.h"
#include "app/export.h"
#include "io/state.h"
#include "parallel/comm.h"

// What a writer writes; an existing file of its kind (or an empty one) is replaced without --overwrite.
enum { OUT_STATE, OUT_LLMC, OUT_SAFETENSORS, OUT_CONFIG, OUT_LOG, OUT_MEM_JSON, OUT_TIMELINE, OUT_SNAPSHOT,
       OUT_TRACE, OUT_TRACE_PART, OUT_EVENTS, OUT_KINDS };
static const char *const out_kind_name[OUT_KINDS] = {
    "a gptmem checkpoint", "an llm.c model file", "a safetensors file", "a model's config.json", "a gptmem log (--log)",
    "a gptmem memory report (--mem-json)", "a gptmem memory timeline (--mem-timeline)", "a memory snapshot (--mem-snapshot)",
    "a gptmem trace (--trace-json)", "a rank's part of a gptmem trace (--trace-json)", "a folder"};
// How each kind's file begins (what its writer puts first); NULL: checked otherwise.
static const char *const out_kind_head[OUT_KINDS] = {
    NULL, NULL, NULL, NULL, "step,loss,val_loss,", "{\"predicted\": ", "event,op,tensor,bytes,where", "\x80\x04}(",
    "{\"displayTimeUnit\"", "{\"ph\": \"M\", \"name\": \"process_name\"", NULL};

// Does the existing file `path` hold what a writer of `kind` writes? An empty
// or missing file does too (nothing to lose).
int holds_kind(const char *path, int kind) {
    long long size = file_size(path);
    if (size <= 0) return 1;
    char head[4097] = {0};
    FILE *f = unreadable_why(path) ? NULL : fopen(path, "rb");
    size_t got = f ? fread(head, 1, sizeof head - 1, f) : 0;
    if (f) fclose(f);
    int32_t magic;
    memcpy(&magic, head, 4);
    if (out_kind_head[kind]) return got >= strlen(out_kind_head[kind]) && !memcmp(head, out_kind_head[kind], strlen(out_kind_head[kind]));
    if (kind == OUT_STATE) return got >= 8 && !memcmp(head, STATE_MAGIC, 8);
    if (kind == OUT_CONFIG) return strstr(head, "\"model_type\"") || strstr(head, "\"peft_type\"");  // (PEFT's adapter_config.json)
    if (kind == OUT_SAFETENSORS) {  // a header length that fits the file
        uint64_t n;
        memcpy(&n, head, 8);
        return got >= 8 && n >= 2 && (long long)n < size;
    }
    return got >= 4 && (magic == LLMC_MODEL_MAGIC || magic == LLMC_LLAMA_MAGIC);
}

// The input (by its flag) that `path` is the same file as, or NULL. A --save
// onto the --resume state (its own rank's file) is a state going on: allowed.
// A Hugging Face model given to --init is every file of its folder (config.json,
// the index, the shards), and so is --lora-init's adapter folder.
const char *input_at(const Settings *s, const char *flag, const char *path) {
    const char *flags[] = {"--data", "--val-data", "--init", "--tokenizer", "--prompt-file", "--hostfile", "--config", "--resume",
                           "--lora-init"};
    const char *paths[] = {s->data, s->val_data, s->init, s->tokenizer_path[0] ? s->tokenizer_path : NULL,
                           s->prompt_file, s->hostfile, s->config, s->resume, s->lora_init};
    for (int i = 0; i < 9; i++) {
        if (!paths[i] || (i == 7 && !strcmp(flag, "--save"))) continue;
        glob_t g = {0};
        int n = is_pattern(paths[i]) && glob(paths[i], 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
        int same = is_pattern(paths[i]) ? 0 : same_file(paths[i], path);
        for (int k = 0; k < n && !same; k++) same = same_file(g.gl_pathv[k], path);
        globfree(&g);
        if (!same && i == 2) same = init_folder_holds(paths[i], path);  // the model's folder
        if (!same && i == 8) same = in_folder(paths[i], path);  // PEFT's folder: every file of it
        if (same) return flags[i];
    }
    return NULL;
}

// One file a run writes: the flag that names it, its path, what it holds.
typedef struct {
    const char *flag;
    char path[4200];
    int kind;
} Output;

// The files this rank writes (rank 0 the names given, rank r > 0 its FILE.rank<r>): their count.
int run_outputs(const Settings *s, int rank, Output *out) {
    const char *flags[] = {"--save", "--export", "--log", "--mem-json", "--mem-timeline", "--mem-snapshot", "--trace-json", "--tensorboard"};
    const char *paths[] = {s->save, s->export_to, s->log, s->mem_json, s->mem_timeline, s->mem_snapshot, s->trace_json, s->tensorboard};
    int kinds[] = {OUT_STATE, OUT_LLMC, OUT_LOG, OUT_MEM_JSON, OUT_TIMELINE, OUT_SNAPSHOT, rank ? OUT_TRACE_PART : OUT_TRACE, OUT_EVENTS};
    int per_rank[] = {1, 0, 0, 1, 1, 1, 1, 0}, n = 0;
    for (int i = 0; i < 8; i++) {
        if (!paths[i] || (rank && !per_rank[i])) continue;
        Output *o = &out[n++];
        o->flag = flags[i], o->kind = kinds[i];
        if (rank) snprintf(o->path, sizeof o->path, "%.4000s.rank%d", paths[i], rank);
        else snprintf(o->path, sizeof o->path, "%s", paths[i]);
        if (i == 1 && export_safetensors(paths[i])) {
            o->kind = OUT_SAFETENSORS;
            out[n] = (Output){"--export", "", OUT_CONFIG};  // config.json (--lora: adapter_config.json) beside it
            export_config_path(paths[i], s->lora.rank > 0 && !s->merge, out[n++].path, sizeof o->path);
        }
    }
    return n;
}

// Why `o` may not be written (into why), or 0 if it may: 2 for a clash with
// an input or another output (a usage error), 1 for the path itself.
int output_refused(const Settings *s, const Output *o, const Output *all, int n, char *why, size_t len) {
    const char *p = o->path;
    char dir[4300];
    const char *input = input_at(s, o->flag, p);
    if (input)
        return snprintf(why, len, "%s '%s' is the file %s reads: writing it would replace the run's own input; write "
                        "somewhere else", o->flag, p, input), 2;
    for (const Output *q = all; q < o; q++)
        if (!strcmp(q->path, p) || same_file(q->path, p))
            return snprintf(why, len, "%s and %s both write '%s': one would replace the other; give them two paths",
                            q->flag, o->flag, p), 2;
    (void)n;
    struct stat st;
    if (stat(p, &st) == 0 && !S_ISREG(st.st_mode) && !(o->kind == OUT_EVENTS && S_ISDIR(st.st_mode)))
        return snprintf(why, len, "%s '%s': it exists and is %s, not a %s; pass %s a %s path", o->flag, p,
                        S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a fifo" :
                        S_ISSOCK(st.st_mode) ? "a socket" : "a device",
                        o->kind == OUT_EVENTS ? "folder" : "regular file", o->flag, o->kind == OUT_EVENTS ? "folder" : "file"), 1;
    if (o->kind == OUT_LLMC && is_llama(&s->cfg) && s->cfg.rope_scaled == 32)
        return snprintf(why, len, "%s '%s': llm.c's Llama 3 file says only whether RoPE is scaled (Llama 3.1's factor "
                        "8), and this model's is Llama 3.2's 32: export FILE.safetensors", o->flag, p), 2;
    if (!s->overwrite && o->kind != OUT_EVENTS && !holds_kind(p, o->kind))
        return snprintf(why, len, "%s '%s': the file exists and is not %s; gptmem replaces only its own kind of file: "
                        "give another path, or add --overwrite to replace it", o->flag, p, out_kind_name[o->kind]), 1;
    snprintf(dir, sizeof dir, "%s", p);  // the folder it goes in
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    int exporting = !strcmp(o->flag, "--export") && !s->dry_run && !s->fit;  // (its folder made, as save_pretrained does)
    if (exporting && access(dir, F_OK) != 0 && errno == ENOENT && make_folders(dir) != 0)
        return snprintf(why, len, "--export: cannot make the folder '%s' for '%s': %s; give a path in a folder you can "
                        "write", dir, p, strerror(errno)), 1;
    if (access(dir, W_OK | X_OK) != 0 && errno == ENOENT)  // (the other outputs make no folder: a mistyped one stops here)
        return snprintf(why, len, "%s: cannot write '%s': its folder '%s' does not exist; make it first (mkdir -p %s) or "
                        "give a path in a folder you can write", o->flag, p, dir, dir), 1;
    if (access(dir, W_OK | X_OK) != 0)
        return snprintf(why, len, "%s: cannot write '%s': %s; give it a path in a folder you can write", o->flag, p,
                        strerror(errno)), 1;
    return 0;
}

// The rule for this rank's outputs. 0; else 1 or 2 after a message.
int outputs_refused(const Settings *s, int rank) {
    Output out[12];
    char why[9000];
    int n = run_outputs(s, rank, out);
    for (int i = 0; i < n; i++) {
        int code = output_refused(s, &out[i], out, n, why, sizeof why);
        if (code) {
            fprintf(stderr, "error: %s\n", why);
            return code;
        }
    }
    return 0;
}

// While the settings are read: rank 0's outputs (exit 2 or 1 after a message).
void check_outputs(const Settings *s) {
    int code = outputs_refused(s, 0);
    if (code) exit(code);
}

// Once the ranks are known: every other rank's own files (0, or 1 on every rank after the message).
int check_rank_outputs(const Settings *s) { return comm_any(comm_rank_id > 0 && outputs_refused(s, comm_rank_id)); }

// This rank's outputs locked for the run's life (io/files.h lock_output): a second run given one of them
// refuses here, at its start, before either has trained. --tensorboard's folder is not locked: each run
// writes an events file of its own there. 0, or 1 after a message.
int outputs_lock(const Settings *s, int rank) {
    Output out[12];
    int n = run_outputs(s, rank, out);
    for (int i = 0; i < n; i++) {
        long pid;
        int got = out[i].kind == OUT_EVENTS ? 0 : lock_output(out[i].path, &pid);
        if (got == 1 && pid > 0)
            fprintf(stderr, "error: %s '%s' is being written by another run (pid %ld holds '%s.lock'): let it end, or "
                    "give this run another path\n", out[i].flag, out[i].path, pid, out[i].path);
        else if (got == 1)
            fprintf(stderr, "error: %s '%s' is being written by another run (one holds '%s.lock'): let it end, or "
                    "give this run another path\n", out[i].flag, out[i].path, out[i].path);
        else if (got == 2)
            fprintf(stderr, "error: %s '%s': '%s.lock' is there and is not gptmem's lock (an empty file): it was left as "
                    "it is; remove it, or give another path\n", out[i].flag, out[i].path, out[i].path);
        else if (got < 0)
            fprintf(stderr, "error: %s: cannot lock '%s' (its lock '%s.lock'): %s; give a path in a folder you can "
                    "write\n", out[i].flag, out[i].path, out[i].path, strerror(errno));
        if (got) return 1;
    }
    return 0;
}

// Before training: room for --save's file (this rank's part of the state) and --export's. 0, or 1 after a message.
int outputs_lack_room(const Settings *s, const char *save_path, size_t state_params) {
    int bad = s->save && save_path && writable_target("--save", save_path, state_file_bytes(state_params));
    if (s->export_to && comm_rank_id == 0) bad = bad || writable_target("--export", s->export_to, export_bytes(s->export_to, &s->cfg));
    return comm_any(bad);
}

// A file each rank writes its own of (--mem-json, --mem-timeline, --mem-snapshot, --trace-json): rank 0 the name
// given, rank r > 0 NAME.rank<r>.
void rank_path(const char *name, int rank, char *path, size_t n) {
    if (rank == 0) snprintf(path, n, "%s", name);
    else snprintf(path, n, "%s.rank%d", name, rank);
}

// A whole file for `flag` begun (through a temp: io/files.h out_open): the stream, or NULL after a message.
FILE *output_begin(OutFile *o, const char *flag, const char *path) {
    char what[64];
    snprintf(what, sizeof what, "the %s file", flag);
    FILE *f = out_open(o, path, what);
    if (!f) fprintf(stderr, "error: %s: cannot write '%s': %s\n", flag, path, strerror(errno));
    return f;
}

// ... and made whole (renamed over PATH). 0, or 1 after a message (the previous file intact).
int output_end(OutFile *o, const char *flag) {
    if (out_commit(o) == 0) return 0;
    fprintf(stderr, "error: %s: cannot write '%s': %s; the previous file (if any) is intact\n", flag, o->path,
            strerror(errno));
    return 1;
}

#endif
