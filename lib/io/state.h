// io/state.h — the saved training state (--save, --resume; the messages call it
// a checkpoint): what a file holds, how it is written and read, and every
// check that refuses a file that does not belong to this run. Not to be
// confused with --ckpt (activation checkpointing, model.h), which saves
// memory inside one step.
//
// Layout (little-endian, as written by this machine):
//   "GPTMEMCK" magic, u32 version, i32 L C H V maxT B T, i32 step,
//   u64 data_rng, u64 sample_rng, u64 nparams, i32 dtype, i32 updates,
//   f32 loss_scale, i32 good_steps, i32 zero nranks rank, i32 pad (0), u64 lo hi,
//   i32 adam_bits (32, or 8: --adam-bits 8), i32 steps (the run's --steps; 0: not recorded),
//   i32 arch kv_heads ffn untied rope_scaled rope_theta (the model's layout beyond its size),
//   i32 lora_rank lora_targets, f32 lora_alpha, i32 base_format double_quant, i32 pad (0), u64 base_hash
//   (--lora; all 0 without it), i32 tp (--tp T: the file holds this rank's share of every layer; 0 or 1:
//   none), i32 pad (0),
//   f32 weights[hi - lo] (the fp32 weights: master copy for 16-bit runs; with --lora the adapters),
//   f32 adam_m[hi - lo], f32 adam_v[hi - lo] (with --adam-bits 8: the values
//   its 8-bit codes stand for; read back, they give the same codes),
//   u64 save id (the same in every rank's file of one save: a hash of every
//   rank's bytes, so files of two saves never pass for one),
//   u64 FNV-1a checksum of every byte before it.
// Written to a temp beside FILE and renamed, so a crash never leaves half a checkpoint
// (io/files.h). With several ranks each rank writes the parameters it owns:
// rank 0 to FILE, rank r to FILE.rank<r>; one rank writes everything to FILE.
// Versions 3 (no adam_bits, steps) and 4 (no layout, no save id) still load,
// as GPT-2 states: they did not record a Llama's layout; versions 5 (no --lora) and 6 (no --tp) too.
// A --tp run's files each hold a rank's share (its model fields are the share's): they resume with the
// same --tp, ranks and stage, each rank its own file, and nothing else reads them.
// A --lora run's state holds the adapters [0, A) and their m and v, not the frozen
// model: that comes from the run's --init (or --seed) again, and base_hash (FNV-1a
// of the frozen model as the run holds it, cpu/lora.h lora_base_hash) makes sure it
// is the same model.
#ifndef GPTMEM_STATE_H
#define GPTMEM_STATE_H

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include "core/config.h"
#include "core/dtype.h"
#include "core/hash.h"
#include "core/lora.h"
#include "cuda/api.h"
#include "io/files.h"
#include "io/state_arrays.h"
#include "parallel/comm.h"

#define STATE_MAGIC "GPTMEMCK"
#define STATE_VERSION 7u  // 4 added adam_bits and steps, 5 the layout and the save id, 6 --lora's fields, 7 --tp

typedef struct {
    int32_t L, C, H, V, maxT, B, T, step;
    uint64_t data_rng, sample_rng, nparams;
    int32_t dtype;       // the weights are fp32 (the master copy for 16-bit runs); dtype must match to resume
    int32_t updates;     // optimizer updates applied (fp16 skips steps): AdamW's bias-correction count
    float loss_scale;    // fp16 dynamic loss scale
    int32_t good_steps;  // fp16: steps since the scale last changed
    int32_t zero, nranks, rank;  // ZeRO: the file of rank `rank` of `nranks` at stage `zero`
    int32_t pad;                 // 0 (lo's 8-byte alignment, named so that it is written as zeros)
    uint64_t lo, hi;             // the parameters [lo, hi) this file holds (one rank: all of them)
    int32_t adam_bits;           // 32, or 8: Adam's m and v were kept in 8 bits (--adam-bits 8)
    int32_t steps;               // the run's --steps, which its learning-rate schedule follows (0: not recorded)
    int32_t arch, kv_heads, ffn, untied, rope_scaled;  // core/config.h's GPTConfig beyond L C H V maxT
    int32_t rope_theta;          // ... and RoPE's theta (0: Llama 3's; files written before it held 0 here)
    int32_t lora_rank, lora_targets;  // --lora R and its maps (core/lora.h; 0: no LoRA, [lo, hi) are the model's)
    float lora_alpha;                 // ... --lora-alpha
    int32_t base_format, double_quant;  // ... the frozen model's --base-dtype (a QF_*) and --double-quant
    int32_t pad2;                     // 0
    uint64_t base_hash;               // ... FNV-1a of the frozen model as the run holds it (the same --init, --seed)
    int32_t tp;                       // --tp T (0 or 1: none): the file holds rank `rank`'s share of every layer
    int32_t pad3;                     // 0
} StateHeader;

// The header's bytes in a file of this version (3: without adam_bits, steps; 4: without the layout).
size_t state_header_bytes(uint32_t version) {
    return version == 3 ? offsetof(StateHeader, adam_bits) : version == 4 ? offsetof(StateHeader, arch)
           : version == 5 ? offsetof(StateHeader, lora_rank) : version == 6 ? offsetof(StateHeader, tp) : sizeof(StateHeader);
}

// The bytes of a state file (this version) holding n parameters (with --lora: n adapter parameters).
long long state_file_bytes(size_t n) { return 8 + 4 + (long long)sizeof(StateHeader) + 12LL * (long long)n + 16; }

// The model's part of a header: its size and its layout.
StateHeader state_model_header(const GPTConfig *c) {
    return (StateHeader){.L = c->layers, .C = c->channels, .H = c->heads, .V = c->vocab, .maxT = c->max_seq,
                         .nparams = param_count(c), .arch = c->arch, .kv_heads = cfg_kv_heads(c), .ffn = cfg_ffn(c),
                         .untied = c->untied, .rope_scaled = c->rope_scaled, .rope_theta = c->rope_theta};
}

// The model a header describes (its layout from version 5 on; GPT-2 before).
GPTConfig state_model(const StateHeader *h) {
    return (GPTConfig){.layers = h->L, .channels = h->C, .heads = h->H, .vocab = h->V, .max_seq = h->maxT,
                       .arch = h->arch, .kv_heads = h->kv_heads, .ffn = h->ffn, .untied = h->untied,
                       .rope_scaled = h->rope_scaled == 1 ? 8 : h->rope_scaled,  // (states before 3.2's factor: 1)
                       .rope_theta = h->rope_theta};
}

// The part of the state that changes as training goes, besides the weights,
// Adam's state and the random streams: kept here during the run, written into
// the header when saving, read out of it when resuming.
typedef struct {
    int updates;       // optimizer updates applied (fp16 skips steps): AdamW's bias-correction count
    float loss_scale;  // fp16 dynamic loss scale (1 for fp32 and bf16)
    int good_steps;    // fp16: steps since the scale last changed
} LiveState;

// The header to write after `step` steps: the run's own (model, batch, dtype,
// ranks, shard) with where training is.
StateHeader state_at(const StateHeader *run, int step, const LiveState *live, uint64_t data_rng, uint64_t sample_rng) {
    StateHeader header = *run;
    header.step = step;
    header.updates = live->updates;
    header.loss_scale = live->loss_scale;
    header.good_steps = live->good_steps;
    header.data_rng = data_rng;
    header.sample_rng = sample_rng;
    return header;
}

LiveState state_live(const StateHeader *header) {
    LiveState live = {header->updates, header->loss_scale, header->good_steps};
    return live;
}


// A state file's fp32 weights (from byte `at`) as a WeightSource's file
// (core/config.h): what --eval-only's comparison rows read a piece at a time.
typedef struct {
    FILE *f;
    long at;
} StateWeights;

int state_weights_read(const void *file, float *dst, size_t lo, size_t hi) {
    const StateWeights *w = file;
    return fseek(w->f, w->at + (long)(lo * sizeof(float)), SEEK_SET) != 0 ||
           fread(dst, sizeof(float), hi - lo, w->f) != hi - lo ? -1 : 0;
}

// Can a save go to `path` (through a temp beside it), with room for a file of n
// parameters? 0, or -1 after a message. The run checks this before training,
// so nothing is lost, and again when saving.
int state_check_target(const char *path, size_t n) { return writable_target("--save", path, state_file_bytes(n)); }

// Every rank's file of one save carries the same id: a hash of every rank's
// hash of its own bytes (each rank calls this with its own).
uint64_t save_id_of(uint64_t mine) {
    uint64_t *all = calloc((size_t)comm_nranks, sizeof(uint64_t));
    comm_gather_words(mine, all);
    uint64_t id = fnv1a(0xCBF29CE484222325ULL, all, sizeof(uint64_t) * (size_t)comm_nranks);
    free(all);
    return id;
}

// Write the state to path (through a temp, renamed when complete: io/files.h):
// magic, version, header, the three arrays, the save id, the checksum. Every
// rank reaches the save id's exchange, failed or not. 0, or -1 after a message.
// (GPTMEM_INTERRUPT_SAVE in the environment interrupts the write half-way, as
// a signal would: io/files.h interrupt_for_tests.)
int save_state(const char *path, const StateHeader *header, const NetState *st) {
    if (comm_any(state_check_target(path, st->hi - st->lo))) return -1;
    OutFile out;
    FILE *f = out_open(&out, path, "a checkpoint");
    int err = f ? 0 : errno;
    uint64_t h = 0xCBF29CE484222325ULL;
    uint32_t version = STATE_VERSION;
    int bad = !f;
    if (f) {
        bad = write_hashed(f, &h, STATE_MAGIC, 8) | write_hashed(f, &h, &version, 4) |
              write_hashed(f, &h, header, sizeof *header) | write_weights(f, &h, st);
        fflush(f);
        interrupt_for_tests("GPTMEM_INTERRUPT_SAVE");
        bad |= write_moments(f, &h, st, 0) | write_moments(f, &h, st, 1);
    }
    uint64_t id = save_id_of(h);
    if (f) {
        bad |= write_hashed(f, &h, &id, 8) | (fwrite(&h, 8, 1, f) != 1);
        if (bad) err = errno, out_abort(&out);
        else if (out_commit(&out)) bad = 1, err = errno;
    }
    if (bad) {
        fprintf(stderr, "error: writing checkpoint '%s' failed: %s; the previous checkpoint (if any) is intact\n",
                path, err ? strerror(err) : "a write did not complete");
        return -1;
    }
    return 0;
}

// Reading a state: open it and check its header against this run
// (state_open), read its arrays in order (state_read), then check the
// checksum (state_close). Every problem exits with a message naming the file.
typedef struct {
    FILE *f;
    const char *path;
    uint64_t h;       // FNV-1a of every byte read so far
    StateHeader header;
    long data_at;     // the byte where the weights start
    uint32_t version;
    uint64_t save_id; // (read at the end: 0 before version 5)
} StateReader;

// What the run that reads it is: RESUME_TRAINING checks dtype and ranks as a
// resume must; RESUME_RESHARDED the dtype, each file's part read wherever the
// run keeps it (io/reshard.h); READ_WEIGHTS (--eval-only) takes any dtype, from one rank.
enum { RESUME_TRAINING, READ_WEIGHTS, RESUME_RESHARDED };

// A state file's version and header, read (a version 3 file's adam_bits
// 32, an older file's layout GPT-2's): 0, or -1 if it has none.
int state_read_header(FILE *f, uint64_t *h, uint32_t *version, StateHeader *header) {
    char magic[8];
    memset(header, 0, sizeof *header);
    if (read_hashed(f, h, magic, 8) || memcmp(magic, STATE_MAGIC, 8) || read_hashed(f, h, version, 4) ||
        *version < 3 || *version > STATE_VERSION || read_hashed(f, h, header, state_header_bytes(*version)))
        return -1;
    if (*version == 3) header->adam_bits = 32;
    if (*version < 5) header->kv_heads = header->H, header->ffn = 4 * header->C;
    return 0;
}

// The ranks that saved the state whose rank-0 file is `path` (from its
// header), or -1 if it cannot be read as one (load_state then says why).
int state_ranks(const char *path) {
    if (unreadable_why(path)) return -1;
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    uint64_t h = 0;
    uint32_t version = 0;
    StateHeader header;
    int ok = state_read_header(f, &h, &version, &header) == 0;
    fclose(f);
    return ok ? header.nranks : -1;
}

// Does the file's stored checksum differ from the hash of its bytes? (Asked
// only when its header looks wrong: a damaged header is named as damage.)
int state_corrupt(const char *path) {
    FILE *f = fopen(path, "rb");
    long long size = file_size(path);
    uint64_t h = 0xCBF29CE484222325ULL, stored = 0;
    unsigned char buf[1 << 16];
    for (long long at = 0; f && at < size - 8;) {
        size_t n = size - 8 - at < (long long)sizeof buf ? (size_t)(size - 8 - at) : sizeof buf;
        if (fread(buf, 1, n, f) != n) break;
        h = fnv1a(h, buf, n), at += (long long)n;
    }
    int bad = !f || size < 8 || fread(&stored, 8, 1, f) != 1 || stored != h;
    if (f) fclose(f);
    return bad;
}

// Stop: the header says something no saved state says (damage, or a file
// made by hand).
void state_damaged(const char *path, const char *what) {
    if (state_corrupt(path)) fprintf(stderr, "error: checkpoint '%s' is corrupt (checksum mismatch)\n", path);
    else fprintf(stderr, "error: checkpoint '%s' is corrupt: its header says %s, which no saved state says\n", path,
                 what);
    exit(1);
}

// Every field in the range a saved state gives it.
void state_check_ranges(const char *path, const StateHeader *h) {
    char what[200] = "";
    if (h->step < 0 || h->updates < 0 || h->updates > h->step) snprintf(what, sizeof what, "step %d after %d updates", h->step, h->updates);
    else if (h->dtype < DT_FP32 || h->dtype > DT_FP16) snprintf(what, sizeof what, "dtype %d", h->dtype);
    else if (h->B < 1 || h->T < 1) snprintf(what, sizeof what, "batch %d x %d", h->B, h->T);
    else if (!(h->loss_scale > 0) || !isfinite(h->loss_scale) || h->good_steps < 0)
        snprintf(what, sizeof what, "loss scale %g after %d good steps", h->loss_scale, h->good_steps);
    else if (h->nranks < 1 || h->rank < 0 || h->rank >= h->nranks || h->zero < 0 || h->zero > 3)
        snprintf(what, sizeof what, "rank %d of %d at --zero %d", h->rank, h->nranks, h->zero);
    else if (h->lora_rank < 0 || (h->lora_rank && (h->lora_targets <= 0 || h->lora_targets >= 1 << LORA_MAPS ||
                                                   !(h->lora_alpha > 0) || !isfinite(h->lora_alpha) || h->base_format < 0 ||
                                                   h->base_format >= QF_N || (unsigned)h->double_quant > 1)))
        snprintf(what, sizeof what, "--lora %d on maps %#x, alpha %g, base %d", h->lora_rank, h->lora_targets,
                 h->lora_alpha, h->base_format);
    else if (h->lo > h->hi || (!h->lora_rank && h->hi > h->nparams))
        snprintf(what, sizeof what, "parameters [%llu, %llu) of %llu", (unsigned long long)h->lo,
                 (unsigned long long)h->hi, (unsigned long long)h->nparams);
    else if (h->tp < 0 || h->tp > 4096 || (h->tp > 1 && h->nranks % h->tp))  // (--tp: at most --ranks' 4096, dividing them)
        snprintf(what, sizeof what, "--tp %d on %d ranks", h->tp, h->nranks);
    else if ((h->adam_bits != 32 && h->adam_bits != 8) || h->steps < 0)
        snprintf(what, sizeof what, "--adam-bits %d, --steps %d", h->adam_bits, h->steps);
    else if ((h->arch != ARCH_GPT2 && h->arch != ARCH_LLAMA) || h->untied < 0 || h->untied > 1 || h->rope_scaled < 0 ||
             (h->rope_scaled > 1 && h->rope_scaled != 8 && h->rope_scaled != 32) || h->rope_theta < 0)
        snprintf(what, sizeof what, "architecture %d (untied %d, scaled RoPE %d, theta %d)", h->arch, h->untied,
                 h->rope_scaled, h->rope_theta);
    if (what[0]) state_damaged(path, what);
}

// Is the model of header h the model of header w: its size and its layout?
int state_same_model(const StateHeader *h, const StateHeader *w) {
    return h->L == w->L && h->C == w->C && h->H == w->H && h->V == w->V && h->maxT == w->maxT &&
           h->nparams == w->nparams && h->arch == w->arch && h->kv_heads == w->kv_heads && h->ffn == w->ffn &&
           h->untied == w->untied && h->rope_scaled == w->rope_scaled && h->rope_theta == w->rope_theta;
}

// A --lora run's settings in words, for the messages: "--lora 8 --lora-alpha 16 --lora-targets q,v --base-dtype nf4".
const char *state_lora_words(const StateHeader *h, char *out, size_t n) {
    if (!h->lora_rank) return snprintf(out, n, "no --lora"), out;
    GPTConfig c = state_model(h);
    LoraConfig a = {h->lora_rank, h->lora_alpha, (unsigned)h->lora_targets};
    char maps[96];
    snprintf(out, n, "--lora %d --lora-alpha %g --lora-targets %s%s%s%s", a.rank, a.alpha, lora_targets_words(&c, &a, maps, sizeof maps),
             h->base_format ? " --base-dtype " : "", h->base_format ? quant_name[h->base_format] : "",
             h->double_quant ? " --double-quant" : "");
    return out;
}

// --lora: a state holds the adapters of one LoRA setting, trained on one frozen model. Resuming takes the
// same setting and the same model (base_hash); --eval-only wants a model's weights, which it does not hold.
void state_check_lora(const char *path, const StateHeader *h, const StateHeader *want, int purpose) {
    char a[160], b[160];
    if (purpose == READ_WEIGHTS && h->lora_rank) {
        fprintf(stderr, "error: checkpoint '%s' holds a LoRA run's adapters (%s), not the model's weights: resume it with "
                "those flags and --export DIR/adapter_model.safetensors, then --eval-only --init BASE --lora-init DIR "
                "(doc/lora.md)\n", path,
                state_lora_words(h, a, sizeof a));
        exit(1);
    }
    if (purpose == READ_WEIGHTS) return;
    if (h->lora_rank != want->lora_rank || h->lora_targets != want->lora_targets || h->lora_alpha != want->lora_alpha ||
        h->base_format != want->base_format || h->double_quant != want->double_quant) {
        fprintf(stderr, "error: checkpoint '%s' was saved by a run with %s; this run has %s: resume with the flags of the "
                "run that saved it\n", path, state_lora_words(h, a, sizeof a), state_lora_words(want, b, sizeof b));
        exit(1);
    }
    if (h->lora_rank && h->base_hash != want->base_hash) {
        if (state_corrupt(path)) state_damaged(path, "");
        fprintf(stderr, "error: checkpoint '%s' holds adapters trained on another frozen model than this run's (its hash "
                "%016llx, this run's %016llx): pass the --init (or the --seed, without one) of the run that saved it\n", path,
                (unsigned long long)h->base_hash, (unsigned long long)want->base_hash);
        exit(1);
    }
}

// A header read from `path`, checked against this run (`want`) for the
// purpose: the dtype and the ranks' shares for a resume, one file holding
// every weight for --eval-only, the model always. Exits with a message.
void state_check_header(const char *path, const StateHeader *h, const StateHeader *want, int purpose) {
    int tp = h->tp > 1 ? h->tp : 1, run_tp = want->tp > 1 ? want->tp : 1;
    StateHeader same = *h;  // (the model but for the share's parameters)
    same.nparams = want->nparams;
    if (tp > 1 && tp == run_tp && purpose != READ_WEIGHTS && h->nparams != want->nparams && state_same_model(&same, want)) {
        fprintf(stderr, "error: checkpoint '%s' holds a --tp %d share of %llu parameters, and this run's share has %llu: "
                "it was saved by a gptmem whose --tp kept the embedding and the LM head whole on every rank (this one "
                "splits them by the vocabulary); resume it with the gptmem that saved it, whose --export writes the whole "
                "model for --init\n", path, tp, (unsigned long long)h->nparams, (unsigned long long)want->nparams);
        exit(1);
    }
    int other_ranks = tp > 1 && (h->nranks != want->nranks || h->zero != want->zero);  // (a share is never resharded)
    if (tp != run_tp || (tp > 1 && purpose != RESUME_TRAINING) || other_ranks) {  // (each file a rank's share of every layer)
        char run[160];
        if (purpose == READ_WEIGHTS) snprintf(run, sizeof run, "--eval-only reads whole weights (--resume it there with --export FILE, then --eval-only --init FILE)");
        else if (tp != run_tp) snprintf(run, sizeof run, "this run has %s%.0d", run_tp > 1 ? "--tp " : "no --tp", run_tp > 1 ? run_tp : 0);
        else snprintf(run, sizeof run, "this run has other ranks or another --zero");
        fprintf(stderr, "error: checkpoint '%s' was saved by a run of --tp %d, and %s: resume it with --tp %d on the "
                "same ranks and --zero (each rank reads its own file)\n", path, tp, run, tp);
        exit(1);
    }
    if (purpose != READ_WEIGHTS && h->dtype != want->dtype) {
        fprintf(stderr, "error: checkpoint '%s' was trained with --dtype %s; pass --dtype %s to resume it\n", path,
                dtype_name[h->dtype], dtype_name[h->dtype]);
        exit(1);
    }
    if (!state_same_model(h, want)) {
        char a[200], b[200];
        GPTConfig file = state_model(h), run = state_model(want);
        fprintf(stderr, "error: checkpoint '%s' is for a different model (%s) than this run (%s); pass the same "
                "--model and overrides\n", path, shape_words(&file, a, sizeof a), shape_words(&run, b, sizeof b));
        exit(1);
    }
    state_check_lora(path, h, want, purpose);
    if (purpose == READ_WEIGHTS && (h->nranks != 1 || h->lo != 0 || h->hi != h->nparams)) {
        fprintf(stderr, "error: checkpoint '%s' is rank %d of %d (--zero %d): it holds a part of the weights; "
                "--eval-only reads a state saved by one process (resume it on %d ranks and --save from a "
                "run without --zero, or evaluate it there)\n", path, h->rank, h->nranks, h->zero, h->nranks);
        exit(1);
    }
    if (purpose == RESUME_TRAINING && (h->zero != want->zero || h->nranks != want->nranks || h->rank != want->rank ||
                                       h->lo != want->lo || h->hi != want->hi)) {
        if (state_corrupt(path)) state_damaged(path, "");
        fprintf(stderr, "error: checkpoint '%s' is rank %d of %d at --zero %d, holding parameters [%llu, %llu); this is "
                "rank %d of %d at --zero %d, needing [%llu, %llu): resume with the same mpirun -np, --zero and "
                "--shard-group\n", path, h->rank, h->nranks, h->zero, (unsigned long long)h->lo,
                (unsigned long long)h->hi, want->rank, want->nranks, want->zero, (unsigned long long)want->lo,
                (unsigned long long)want->hi);
        exit(1);
    }
}

StateReader state_open(const char *path, const StateHeader *want, int purpose) {
    const char *why = unreadable_why(path);
    if (why) { fprintf(stderr, "error: cannot read checkpoint '%s': %s\n", path, why); exit(1); }
    StateReader r = {fopen(path, "rb"), path, 0xCBF29CE484222325ULL, {0}, 0, 0, 0};
    if (!r.f) { fprintf(stderr, "error: cannot open checkpoint '%s': %s\n", path, strerror(errno)); exit(1); }
    long long size = file_size(path);
    if (state_read_header(r.f, &r.h, &r.version, &r.header)) {
        fprintf(stderr, "error: '%s' is not a gptmem checkpoint of versions 3 to %u (no such magic, version and "
                "whole header)\n", path, STATE_VERSION);
        exit(1);
    }
    state_check_ranges(path, &r.header);
    if (r.version < 5 && want->arch != ARCH_GPT2) {
        fprintf(stderr, "error: checkpoint '%s' is version %u, which did not record a Llama's layout (key-value "
                "heads, MLP width, head): this build resumes a Llama from a version %u state only\n", path,
                r.version, STATE_VERSION);
        exit(1);
    }
    state_check_header(path, &r.header, want, purpose);
    size_t header_bytes = state_header_bytes(r.version), n = (r.header.hi - r.header.lo) * sizeof(float);
    long long expect = 8 + 4 + (long long)header_bytes + 3LL * (long long)n + (r.version >= 5 ? 16 : 8);
    if (size != expect) {
        fprintf(stderr, "error: checkpoint '%s' has %lld bytes, expected %lld: it is %s%s\n", path, size, expect,
                size < expect ? "truncated" : "longer than its header says",
                state_corrupt(path) ? ", or its header is damaged (the checksum does not match)" : "");
        exit(1);
    }
    r.data_at = (long)(8 + 4 + header_bytes);
    return r;
}

// The next `bytes` of the file's arrays into dst (host or device memory).
void state_read(StateReader *r, float *dst, size_t bytes, int on_gpu) {
    if (read_array(r->f, &r->h, dst, bytes, on_gpu)) {
        fprintf(stderr, "error: checkpoint '%s' is truncated\n", r->path);
        exit(1);
    }
}

// Adam's m (which 0) or v (1) into the state st: into an fp32 array, or
// (--adam-bits 8) a chunk at a time through a host buffer into the codes.
void read_accessed(StateReader *r, void (*set)(void *, int, size_t, const float *, size_t), void *ctx, int which,
                   size_t at0, size_t n) {
    float *chunk = malloc(STATE_CHUNK);
    size_t per = STATE_CHUNK / sizeof(float);
    for (size_t at = 0; at < n; at += per) {
        size_t len = n - at < per ? n - at : per;
        state_read(r, chunk, len * sizeof(float), 0);
        set(ctx, which, at0 + at, chunk, len);
    }
    free(chunk);
}

void read_moments(StateReader *r, NetState *st, int which) {
    size_t n = st->hi - st->lo;
    if (!st->moments) { state_read(r, which ? st->v : st->m, n * sizeof(float), st->on_gpu); return; }
    read_accessed(r, st->moments_set, st->moments, which, st->moments_at, n);
}

// The end: the save id (version 5), then the stored checksum, which must
// equal the hash of everything before it.
void state_close(StateReader *r) {
    uint64_t stored;
    if ((r->version >= 5 && read_hashed(r->f, &r->h, &r->save_id, 8)) || fread(&stored, 8, 1, r->f) != 1 ||
        stored != r->h) {
        fprintf(stderr, "error: checkpoint '%s' is corrupt (checksum mismatch)\n", r->path);
        exit(1);
    }
    fclose(r->f);
}

// Load a checkpoint into st's weights and moments after checking it matches `want`.
// Exits with a clear error if the file is missing, truncated, corrupt or for
// another model; returns the header, and its save id in *save_id.
StateHeader load_state(const char *path, const StateHeader *want, NetState *st, uint64_t *save_id) {
    StateReader r = state_open(path, want, RESUME_TRAINING);
    if (st->weights) read_accessed(&r, st->weights_set, st->weights, 0, st->weights_at, r.header.hi - r.header.lo);
    else state_read(&r, st->w, (r.header.hi - r.header.lo) * sizeof(float), st->on_gpu);
    read_moments(&r, st, 0);
    read_moments(&r, st, 1);
    state_close(&r);
    *save_id = r.save_id;
    return r.header;
}

// After every rank read its own file of a state (rank r's is `path`): are the
// files one save's? Each rank compares rank 0's save id, step and data
// position with its own; the first that differs names its file and all stop.
// 0, or 1 after the message (every rank returns the same).
int state_one_save(const char *rank0_path, const char *path, const StateHeader *got, uint64_t save_id) {
    uint64_t mine[3] = {save_id, (uint64_t)got->step, got->data_rng}, root[3];
    memcpy(root, mine, sizeof root);
    comm_broadcast(root, sizeof root, 0);
    int first = comm_first(memcmp(mine, root, sizeof mine) != 0);
    if (first == comm_rank_id)
        fprintf(stderr, "error: '%s' was saved by another save (step %d, save id %016llx) than '%s' (step %d, save "
                "id %016llx): a file of one save was replaced by another's; resume from the files of one save\n", path,
                got->step, (unsigned long long)save_id, rank0_path, (int)root[1], (unsigned long long)root[0]);
    return first >= 0;
}

#endif
