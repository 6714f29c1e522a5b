// app/export.h, the lecture build's: no --export (app/rooms.h refuses it); the full build's file writes
// llm.c's model file, a Hugging Face model and PEFT's adapters.
#ifndef GPTMEM_EXPORT_H
#define GPTMEM_EXPORT_H

#include "core/absent.h"
#include "core/config.h"

int export_safetensors(const char *path) { return (void)path, absent("--export"), 0; }
long long export_bytes(const char *path, const GPTConfig *c) { return (void)path, (void)c, absent("--export"), 0; }
void export_config_path(const char *path, int adapters, char *out, size_t len) {
    (void)path, (void)adapters, (void)out, (void)len, absent("--export");
}

#endif
