// app/sample.h — evaluation and sampling: the validation loss of the model as
// it is, and text generated from it a byte at a time.
#ifndef GPTMEM_SAMPLE_H
#define GPTMEM_SAMPLE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "app/launch.h"
#include "app/machines.h"
#include "app/net.h"
#include "core/rng.h"
#include "io/data.h"
#include "io/tokens.h"
#include "memory/ledger.h"

// The sample stream's start: --seed mixed with a constant of its own, so that
// sampling never draws the numbers the batches draw (io/data.h) from --seed.
uint64_t sample_stream(uint64_t seed) { return rng_seed(seed ^ 0x5A3B1E); }

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

// Print text[from, to) escaped (io/data.h escape_text): raw bytes could be
// terminal escape codes or broken UTF-8.
void say_text(const unsigned char *text, int from, int to) {
    char *out = malloc(4 * (size_t)(to - from) + 1);
    escape_text(text + from, (size_t)(to - from), out);
    say("%s", out);
    free(out);
}

// A sampled token's text appended to text[*n] (grown as needed): its byte for
// a text corpus, its bytes from the tokenizer for token files, or its number
// where there is no tokenizer. Returns whether the text now ends a line.
int append_token(unsigned char **text, size_t *n, size_t *cap, const Dataset *data, int tok) {
    unsigned char num[16];
    int len = 1;
    const unsigned char *bytes = NULL;
    if (data->format == DATA_TEXT) num[0] = (unsigned char)tok, bytes = num;
    else bytes = tokenizer_decode(&data->tokenizer, tok, &len);
    if (!bytes) len = snprintf((char *)num, sizeof num, "<%d>", tok), bytes = num;
    if (*n + (size_t)len + 1 > *cap) *cap = 2 * (*n + (size_t)len + 1), *text = realloc(*text, *cap);
    memcpy(*text + *n, bytes, (size_t)len);
    *n += (size_t)len;
    return memchr(bytes, '\n', (size_t)len) != NULL;
}

// The token drawn from a row of logits scaled by 1/temperature (the first
// V of them: the rest is padding), with one uniform number of rng.
int draw_token(const float *logits, int V, float temperature, uint64_t *rng) {
    float maxv = -INFINITY;
    for (int v = 0; v < V; v++) if (logits[v] > maxv) maxv = logits[v];
    double sum = 0.0;
    for (int v = 0; v < V; v++) sum += exp((logits[v] - maxv) / temperature);
    double r = rng_uniform(rng) * sum, acc = 0.0;
    for (int v = 0; v < V; v++) {
        acc += exp((logits[v] - maxv) / temperature);
        if (acc > r) return v;
    }
    return V - 1;
}

// Where a sample starts: --prompt's or --prompt-file's bytes (a text corpus;
// with token files, the file's tokens), else a newline (token files: the
// end-of-text token). Fills ctx; returns how many (app/inputs.h checked the
// prompt: it fits the context, its tokens are in the vocabulary).
int sample_start(int *ctx, const Dataset *data, const Settings *s, int V) {
    if (!s->prompt && !s->prompt_file) {
        int eot = data->tokenizer.n ? data->tokenizer.eot : V - 1;  // (inputs.h refused an eot of V or more)
        ctx[0] = data->format == DATA_TEXT ? '\n' : eot >= 0 && eot < V ? eot : V - 1;
        return 1;
    }
    int n = 0;
    if (data->format != DATA_TEXT) {
        TokenSet ts;
        char err[1400];
        uint32_t *raw = malloc(sizeof(uint32_t) * s->prompt_len);
        if (token_set_open(&ts, s->prompt_file, DATA_LLMC, err, sizeof err) == 0) {
            if (ts.tokens == s->prompt_len && token_set_read(&ts, 0, raw, ts.tokens) == 0)
                for (; n < s->prompt_len; n++) ctx[n] = token_at(raw, ts.width, n);
            token_set_free(&ts);
        }
        free(raw);
    } else {
        FILE *f = s->prompt_file ? fopen(s->prompt_file, "rb") : NULL;
        for (int c; n < s->prompt_len && (c = f ? fgetc(f) : (unsigned char)s->prompt[n]) != EOF; n++) ctx[n] = c;
        if (f) fclose(f);
    }
    return n ? n : (ctx[0] = data->format == DATA_TEXT ? '\n' : V - 1, 1);
}

// Work that repeats one shape (a sample's forwards: one new position, or the
// whole window) runs with the team of threads or with one thread, whichever
// was faster when last tried; every TEAM_RETRY-th run tries the other. On a
// machine whose other work holds a core, every parallel loop waits at its end
// for the thread that shares that core, and one thread is faster; on a quiet
// machine the team is. Either way the same bits (no op's sums depend on the
// threads).
enum { TEAM_RETRY = 32 };
typedef struct {
    double seconds[2];  // the last run's time with the team (0) and with one thread (1); 0 = not tried
    int runs;
} TeamChoice;

int g_team;  // the team's threads, as set_threads left them (team_begin notes them first)

// The way the next run goes (0 the team, 1 one thread), its threads set.
int team_begin(TeamChoice *c) {
    int faster = c->seconds[1] && c->seconds[1] < c->seconds[0];
    int way = !c->seconds[0] ? 0 : !c->seconds[1] ? 1 : c->runs % TEAM_RETRY == TEAM_RETRY - 1 ? !faster : faster;
    if (!g_team) g_team = omp_threads();
#ifdef _OPENMP
    omp_set_num_threads(way ? 1 : g_team);
#endif
    return way;
}

// The run that went `way` took `seconds`; the team's threads back.
void team_end(TeamChoice *c, int way, double seconds) {
    c->seconds[way] = seconds;
    c->runs++;
#ifdef _OPENMP
    omp_set_num_threads(g_team);
#endif
}

// Generate --sample-len tokens (bytes of a text corpus) after the start
// (sample_start), each drawn from the model's distribution over the last T
// tokens of context (scaled by 1/temperature). The context sits in the batch
// buffer data->inputs (B*T >= T). The first forward takes the whole start (a
// prompt in one pass); after it each new token is one position, its keys and
// values added to the KV cache (cpu/kvcache.h, gpu/kvcache.h), until the
// context is full: from there every token shifts the positions (they are
// learned), so the window of T goes through again, as it would without a
// cache. The cache holds the positions the forwards will run: the start's
// and the sample's less one (its last token is drawn, never run), at most T.
// The same tokens as running the whole context every time
// (GPTMEM_SAMPLE_FULL; the tests hold them equal). Each forward after the
// first runs with the team of threads or with one, whichever is faster on
// this machine now (team_begin). Printed a line at a time, escaped where the
// bytes are not text; then the speed and the cache's bytes.
void sample_text(Net *net, Dataset *data, const Settings *s, uint64_t *rng) {
    int T = s->seq_len, len = s->sample_len, V = data->format == DATA_TEXT ? 256 : net_vocab(net);
    int *ctx = data->inputs, n = sample_start(ctx, data, s, V);
    size_t cap = (size_t)len + n + 1, used = 0, printed = 0;
    unsigned char *text = malloc(cap);
    int kv_dtype = DT_FP32, positions = n + len - 1 < T ? n + len - 1 : T;
    size_t kv_bytes = net_kv_open(net, positions, &kv_dtype);
    say("---- sample ----\n");
    if (data->format != DATA_TEXT && !data->tokenizer.n)
        say("(no tokenizer file beside the data, nor --tokenizer: the tokens' numbers)\n");
    for (int k = 0; k < n && (s->prompt || s->prompt_file); k++) append_token(&text, &used, &cap, data, ctx[k]);
    TeamChoice team[2] = {{{0, 0}, 0}, {{0, 0}, 0}};  // a forward of one position, of the whole context
    double start = now_seconds();
    const float *logits = net_sample_forward(net, ctx, 0, n);
    for (int i = 0; i < len; i++) {
        int tok = draw_token(logits, V, s->temperature, rng), shifted = n == T;
        net_discard_activations(net);
        if (shifted) { memmove(ctx, ctx + 1, sizeof(int) * (T - 1)); n--; }  // slide the window
        ctx[n++] = tok;
        if (append_token(&text, &used, &cap, data, tok)) {  // a line is complete: no UTF-8 sequence spans a newline
            say_text(text, (int)printed, (int)used);
            printed = used;
        }
        if (i + 1 < len) {  // the next token's logits: one new position, or the shifted window again
            int whole = !kv_bytes || shifted, way = net_host_threads(net) ? team_begin(&team[whole]) : 0;
            double t0 = now_seconds();
            logits = whole ? net_sample_forward(net, ctx, 0, n) : net_sample_forward(net, ctx, n - 1, 1);
            if (net_host_threads(net)) team_end(&team[whole], way, now_seconds() - t0);
        }
    }
    double took = now_seconds() - start;
    say_text(text, (int)printed, (int)used);
    say("\n----------------\n");
    double rate = len / (took > 0 ? took : 1e-9);
    if (kv_bytes)
        say("sampled %d tokens in %.2f s (%.0f tok/s), holding a KV cache of %zu B (%.2f MiB: K and V, %d layers x %d "
            "positions x %d channels in %s)\n", len, took, rate, kv_bytes, kv_bytes / 1048576.0, s->cfg.layers,
            positions, (int)kv_width(&s->cfg), dtype_name[kv_dtype]);
    else say("sampled %d tokens in %.2f s (%.0f tok/s), running the whole context for each (no KV cache)\n", len, took, rate);
    net_kv_close(net);
    fflush(stdout);
    free(text);
}

#endif
