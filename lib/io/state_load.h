// io/state_load.h — reading a state (io/state.h's format): its header checked against this run, every
// mismatch named (another model, dtype, layout of ranks, --lora or --tp, a damaged or truncated file, a file of
// another save), then its arrays and its checksum.
#ifndef GPTMEM_STATE_LOAD_H
#define GPTMEM_STATE_LOAD_H

#include "io/state.h"

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
