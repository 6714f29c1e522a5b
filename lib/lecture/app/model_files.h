// app/model_files.h, the lecture build's: no --config or --init (app/rooms.h refuses them), so the model's
// shape is the preset's and the flags', and its weights are drawn from --seed. The full build's file reads
// Hugging Face's config.json and llm.c's or Hugging Face's model files.
#ifndef GPTMEM_MODEL_FILES_H
#define GPTMEM_MODEL_FILES_H

#include "core/absent.h"
#include "core/config.h"
#include "core/settings.h"

void resolve_config(Settings *s, GPTConfig *c) { (void)s, (void)c, absent("--config"); }
void resolve_init(Settings *s, GPTConfig *c) { (void)s, (void)c, absent("--init"); }
int init_folder_holds(const char *init, const char *path) { return (void)init, (void)path, absent("--init"), 0; }

#endif
