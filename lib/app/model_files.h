// app/model_files.h — the model files the flags name: --config (a Hugging Face config.json: the model's
// shape) and --init (llm.c's model file, or a Hugging Face model folder: its shape and weights), each read
// and checked while the settings are resolved (io/hf_config.h, io/init_file.h); the weights themselves are
// read where the model is built (app/net.h).
#ifndef GPTMEM_MODEL_FILES_H
#define GPTMEM_MODEL_FILES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/config.h"
#include "core/settings.h"
#include "app/usage.h"
#include "io/files.h"
#include "io/hf_config.h"
#include "io/init_file.h"

// Do the flags that give a shape (--model, --layers, ...) ask for another
// model than f? c is the shape they made; `whole`: all of it must be f's
// (--model given, or --config's shape), else each flag given must agree.
int shape_flags_differ(const Settings *s, const GPTConfig *c, const GPTConfig *f, int whole) {
    if (whole) return memcmp(c, f, sizeof *c) != 0;
    return (s->layers && s->layers != f->layers) || (s->channels && s->channels != f->channels) ||
           (s->heads && s->heads != f->heads) || (s->vocab && s->vocab != f->vocab) ||
           (s->max_seq && s->max_seq != f->max_seq) || (s->kv_heads && s->kv_heads != cfg_kv_heads(f)) ||
           (s->ffn && s->ffn != cfg_ffn(f)) || (s->rope_theta && c->rope_theta != f->rope_theta);
}

// --config FILE (or a folder holding config.json): the model's shape is
// Hugging Face's config (io/hf_config.h). A flag that gives a shape must agree.
void resolve_config(Settings *s, GPTConfig *c) {
    Json h;
    GPTConfig f;
    char err[600], used[1100];
    if (hf_config_read(&h, s->config, used, sizeof used, err, sizeof err)) {
        fprintf(stderr, "error: --config: %s\n", err);
        exit(1);
    }
    int bad = hf_config_model(&h, &f, err, sizeof err);
    json_free(&h);
    if (bad) {
        fprintf(stderr, "error: --config '%s' %s\n", used, err);
        exit(2);
    }
    if (shape_flags_differ(s, c, &f, s->model_given)) {
        char a[200], b[200];
        fprintf(stderr, "error: --config '%s' describes a model of %s; the flags ask for %s: drop --model, --layers, ... "
                "(the shape comes from the config)\n", used, shape_words(&f, a, sizeof a), shape_words(c, b, sizeof b));
        exit(2);
    }
    *c = f;
}

// --init FILE (llm.c's file, or a Hugging Face model: io/init_file.h): the model's shape is the file's. A flag that gives a
// shape (--model, --layers, ..., --config) must agree with it. Beside --resume only with --lora (the frozen model).
void resolve_init(Settings *s, GPTConfig *c) {
    char err[1400];
    InitFile m;
    // (--lora: a state holds the adapters, not the frozen model, which --init gives again; its hash checks it is the same)
    if (s->resume && !s->lora.rank && !s->lora_init)
        usage_error("--init starts from a model's weights and --resume from a saved state: give one of them (with --lora, "
                    "--init names the frozen model beside --resume)");
    if (init_file_open(&m, s->init, err, sizeof err)) {
        fprintf(stderr, "error: --init: %s\n", err);
        exit(1);
    }
    const GPTConfig *f = init_file_config(&m);
    if (shape_flags_differ(s, c, f, s->model_given || s->config)) {
        char a[160], b[160];
        fprintf(stderr, "error: --init '%s' holds a model of %s; the flags ask for %s: drop --model, --layers, ... (the "
                "shape comes from the file)\n", s->init, shape_words(f, a, sizeof a), shape_words(c, b, sizeof b));
        exit(2);
    }
    if (init_file_note(&m)[0]) printf("note: --init '%s': %s\n", s->init, init_file_note(&m));
    *c = *f;
    init_file_close(&m);
}

// Is `path` one of the files of --init's model `init`: a file of its folder (config.json, the index, the
// shards), or of the folder of its .safetensors file? (llm.c's file is one file, which outputs.h compares.)
int init_folder_holds(const char *init, const char *path) {
    if (!st_is_model(init)) return 0;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", init);
    char *slash = strrchr(dir, '/');
    if (!st_is_dir(dir) && slash) *slash = 0;
    else if (!st_is_dir(dir)) snprintf(dir, sizeof dir, ".");
    return in_folder(dir, path);
}

#endif
