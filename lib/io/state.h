// io/state.h — the saved training state (--save, --resume; the messages call it
// a checkpoint): what a file holds and how it is written (io/state_load.h reads
// it, refusing a file that does not belong to this run). Not to be
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

#endif
