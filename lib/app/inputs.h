// app/inputs.h — the files the flags name besides the outputs: --data and
// --val-data (text or token files), --tokenizer, --prompt-file (--init's and
// --config's model files: app/model_files.h). Each is found and
// its header read and checked while the settings are resolved, before
// anything is allocated, so that a bad file stops the run in one line (and
// a dry run knows the token width and the model's shape).
#ifndef GPTMEM_INPUTS_H
#define GPTMEM_INPUTS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/config.h"
#include "app/usage.h"
#include "core/settings.h"
#include "io/data.h"
#include "io/tokenizer.h"
#include "io/tokens.h"

// --data and --val-data: the format (--data-format, or found), and for token
// files their headers read (the token width and counts); nothing else read.
void resolve_data(Settings *s) {
    int f = -1;
    for (int k = DATA_AUTO; k <= DATA_NANOGPT; k++)
        if (!strcmp(s->data_format_str, data_format_name[k])) f = k;
    if (f < 0) usage_error("--data-format must be auto, text, llmc or nanogpt (got '%s')", s->data_format_str);
    const char *why = is_pattern(s->data) || path_missing(s->data) ? NULL : unreadable_why(s->data);
    if (why) {  // (a missing file is said later, with how to get the corpus; a dry run needs none)
        fprintf(stderr, "error: --data: cannot read '%s': %s; pass a file\n", s->data, why);
        exit(1);
    }
    s->data_format = data_format_of(s->data, f);
    if (s->data_format == DATA_TEXT) {
        size_t n = strlen(s->data);
        if (f == DATA_AUTO && n > 4 && !strcmp(s->data + n - 4, ".bin") && file_size(s->data) >= 0) {
            fprintf(stderr, "error: '%s' has no llm.c token header: if it is nanoGPT's train.bin (uint16 tokens, no "
                    "header) add --data-format nanogpt; to train on its bytes as text, --data-format text\n", s->data);
            exit(2);
        }
        if (is_pattern(s->data)) usage_error("--data '%s': a pattern names token files, and its first match is not one", s->data);
        if (s->val_data) usage_error("--val-data names token files; a text corpus validates on its last 10%% (make "
                                     "token files with scripts/tokenize.py)");
        return;
    }
    char err[1400];
    TokenSet ts;
    const char *names[2] = {s->data, s->val_data};
    for (int k = 0; k < 2 && names[k]; k++) {
        if (k && s->data_format == DATA_NANOGPT && !is_pattern(names[k]) && has_llmc_magic(names[k]))
            usage_error("--val-data '%s' has llm.c's token header, and --data-format nanogpt reads --val-data as "
                        "headerless tokens too: give both in one format", names[k]);
        if (token_set_open(&ts, names[k], s->data_format, err, sizeof err)) {
            fprintf(stderr, "error: --%s: %s\n", k ? "val-data" : "data", err);
            exit(1);
        }
        if (k && ts.width != s->token_width) {
            fprintf(stderr, "error: --data '%s' has %d-byte tokens and --val-data '%s' %d-byte ones: one tokenizer "
                    "made both?\n", s->data, s->token_width, s->val_data, ts.width);
            exit(1);
        }
        s->token_width = ts.width;
        *(k ? &s->val_tokens : &s->data_tokens) = ts.tokens;
        if (!k) s->data_files = ts.nfiles;
        token_set_free(&ts);
    }
}

// Samples of token files print as text through llm.c's tokenizer file:
// --tokenizer's, or tokenizer.bin (scripts/tokenize.py's name) or
// gpt2_tokenizer.bin (llm.c's) beside --data. None found: the samples print
// token numbers (load_data says so).
void resolve_tokenizer(Settings *s) {
    char err[1400], dir[4096], path[4200];
    int n, eot;
    s->tokenizer_path[0] = 0, s->tokenizer_bytes = 0;
    if (s->tokenizer && s->data_format == DATA_TEXT)
        usage_error("--tokenizer decodes samples of token files; a text corpus's samples are its own bytes");
    if (s->data_format == DATA_TEXT || !s->sample_len) return;
    if (s->tokenizer) {
        if ((s->tokenizer_bytes = tokenizer_bytes(s->tokenizer, &n, &eot, err, sizeof err)) < 0) {
            fprintf(stderr, "error: --tokenizer: %s\n", err);
            exit(1);
        }
        if (eot >= s->cfg.vocab) {  // a sample starts from it: a row of the embedding
            fprintf(stderr, "error: --tokenizer: '%s' says its end-of-text token is %d, which a sample starts from, "
                    "and the model's vocabulary is %d: give the tokenizer of these token files, or --vocab %d\n",
                    s->tokenizer, eot, s->cfg.vocab, eot + 1);
            exit(1);
        }
        snprintf(s->tokenizer_path, sizeof s->tokenizer_path, "%s", s->tokenizer);
        return;
    }
    snprintf(dir, sizeof dir, "%s", s->data);
    char *slash = strrchr(dir, '/');
    if (slash) slash[1] = 0;
    else dir[0] = 0;
    const char *names[2] = {"tokenizer.bin", "gpt2_tokenizer.bin"};
    for (int k = 0; k < 2 && !s->tokenizer_path[0]; k++) {
        if (snprintf(path, sizeof path, "%s%s", dir, names[k]) >= (int)sizeof s->tokenizer_path) continue;  // (none so long)
        if (path_missing(path)) continue;
        long long bytes = tokenizer_bytes(path, &n, &eot, err, sizeof err);
        if (bytes >= 0 && eot >= s->cfg.vocab)
            snprintf(err, sizeof err, "'%.1200s' says its end-of-text token is %d, past the model's vocabulary %d", path,
                     eot, s->cfg.vocab), bytes = -1;
        if (bytes >= 0) memcpy(s->tokenizer_path, path, strlen(path) + 1), s->tokenizer_bytes = bytes;  // (it fits: above)
        else if (!s->dry_run && !s->fit) printf("note: the tokenizer beside --data is not used: %s\n", err);
    }
}

// --prompt TEXT or --prompt-file F: what a sample starts from, at most
// --seq-len tokens: a text corpus's bytes (its tokens); with token files, a
// file of tokens in llm.c's format (scripts/tokenize.py --prompt makes one;
// the tokenizer file holds no encoder). prompt_len is the tokens a sample's
// first forward takes: the prompt's, or 1 (the newline, or the end-of-text
// token, a sample starts from without one).
void resolve_prompt(Settings *s) {
    s->prompt_len = 1;
    if (!s->prompt && !s->prompt_file) return;
    if (s->prompt && s->prompt_file) usage_error("give --prompt or --prompt-file, not both");
    const char *why = s->prompt_file ? unreadable_why(s->prompt_file) : NULL;
    if (why) {
        fprintf(stderr, "error: cannot read the prompt file '%s': %s\n", s->prompt_file, why);
        exit(1);
    }
    long long n = s->prompt ? (long long)strlen(s->prompt) : file_size(s->prompt_file);
    if (s->data_format != DATA_TEXT) {
        if (s->prompt)
            usage_error("with token files a prompt is tokens: make a file of them with python3 scripts/tokenize.py "
                        "--prompt TEXT FILE and pass --prompt-file FILE");
        TokenSet ts;
        char err[1400];
        if (is_pattern(s->prompt_file) || token_set_open(&ts, s->prompt_file, DATA_LLMC, err, sizeof err) ||
            token_set_check(&ts, s->cfg.vocab, err, sizeof err)) {
            fprintf(stderr, "error: --prompt-file: %s\n", is_pattern(s->prompt_file) ? "one file, not a pattern" : err);
            exit(1);
        }
        n = ts.tokens;
        token_set_free(&ts);
    }
    if (n < 1 || n > s->seq_len)
        usage_error("the prompt has %lld %s; a sample's context holds 1 to %d (--seq-len)", n,
                    s->data_format == DATA_TEXT ? "bytes" : "tokens", s->seq_len);
    s->prompt_len = (int)n;
}

#endif
