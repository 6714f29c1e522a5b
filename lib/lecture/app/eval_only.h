// app/eval_only.h, the lecture build's: no --eval-only (app/rooms.h refuses it); the full build's file
// evaluates a saved state or a model file, and its weights quantized.
#ifndef GPTMEM_EVAL_ONLY_H
#define GPTMEM_EVAL_ONLY_H

#include "core/absent.h"
#include "core/settings.h"

int eval_only_run(Settings *s) { return (void)s, absent("--eval-only"), 2; }

#endif
