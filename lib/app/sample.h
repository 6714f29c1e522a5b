// app/sample.h — evaluation and sampling: the validation loss of the model as
// it is, and text generated from it a byte at a time.
#ifndef GPTMEM_SAMPLE_H
#define GPTMEM_SAMPLE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "app/launch.h"
#include "app/net.h"
#include "core/rng.h"
#include "io/data.h"
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

// Generate `len` tokens (bytes of a text corpus) after a newline (token
// files: after the end-of-text token), each from the model's distribution
// over the last T tokens of context (scaled by 1/temperature). Uses the
// batch buffer data->inputs (B*T >= T) as the context. Printed a line at a
// time, escaped where the bytes are not text.
void sample_text(Net *net, Dataset *data, int T, int len, float temperature, uint64_t *rng) {
    int *ctx = data->inputs, n = 1, V = data->format == DATA_TEXT ? 256 : net_vocab(net);
    size_t cap = (size_t)len + 1, used = 0, printed = 0;
    unsigned char *text = malloc(cap);
    ctx[0] = data->format == DATA_TEXT ? '\n' : data->tokenizer.n ? data->tokenizer.eot : V - 1;
    say("---- sample ----\n");
    if (data->format != DATA_TEXT && !data->tokenizer.n)
        say("(no tokenizer file beside the data, nor --tokenizer: the tokens' numbers)\n");
    for (int i = 0; i < len; i++) {
        net_forward(net, ctx, NULL, 1, n);
        const float *logits = net_logits_row(net, n - 1);  // the last position predicts the next token
        float maxv = -INFINITY;
        for (int v = 0; v < V; v++) if (logits[v] > maxv) maxv = logits[v];
        double sum = 0.0;
        for (int v = 0; v < V; v++) sum += exp((logits[v] - maxv) / temperature);
        double r = rng_uniform(rng) * sum, acc = 0.0;
        int tok = V - 1;
        for (int v = 0; v < V; v++) {
            acc += exp((logits[v] - maxv) / temperature);
            if (acc > r) { tok = v; break; }
        }
        net_discard_activations(net);
        if (n == T) { memmove(ctx, ctx + 1, sizeof(int) * (T - 1)); n--; }  // slide the window
        ctx[n++] = tok;
        if (append_token(&text, &used, &cap, data, tok)) {  // a line is complete: no UTF-8 sequence spans a newline
            say_text(text, (int)printed, (int)used);
            printed = used;
        }
    }
    say_text(text, (int)printed, (int)used);
    say("\n----------------\n");
    fflush(stdout);
    free(text);
}

#endif
