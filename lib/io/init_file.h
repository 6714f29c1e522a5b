// io/init_file.h — the file --init names: llm.c's model file (io/llmc.h) or a
// Hugging Face model, a folder of config.json and safetensors or one
// .safetensors file beside its config.json (io/safetensors.h). Either gives the
// model's shape and a reader of any range of the flat array (core/config.h
// WeightSource), a rank reading only the weights it keeps.
#ifndef GPTMEM_INIT_FILE_H
#define GPTMEM_INIT_FILE_H

#include <string.h>
#include "core/config.h"
#include "io/llmc.h"
#include "io/safetensors_model.h"

typedef struct {
    int hf;          // 1: a Hugging Face model (st), 0: llm.c's file (llmc)
    LlmcModel llmc;
    StModel st;
} InitFile;

void init_file_close(InitFile *f) {
    if (f->hf) st_model_close(&f->st);
}

// Open `path` and check its header(s): 0, or -1 with the problem in err (and nothing left open).
int init_file_open(InitFile *f, const char *path, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    f->hf = st_is_model(path);
    int bad = f->hf ? st_model_open(&f->st, path, err, errlen) : llmc_model_open(&f->llmc, path, err, errlen);
    if (bad) init_file_close(f);
    return bad;
}

const GPTConfig *init_file_config(const InitFile *f) { return f->hf ? &f->st.cfg : &f->llmc.cfg; }

// What the reader took from elsewhere than the file's header ("" for nothing).
const char *init_file_note(const InitFile *f) { return f->hf ? "" : f->llmc.note; }

// Its weights, for the init (core/config.h WeightSource).
WeightSource init_file_source(const InitFile *f) {
    return f->hf ? (WeightSource){0, st_read_range, &f->st} : (WeightSource){0, llmc_read_range, &f->llmc};
}

#endif
