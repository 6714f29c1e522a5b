// app/lora_flags.h, the lecture build's: no LoRA (app/rooms.h refused its flags), so the model's weights are
// what the step trains, held in the --dtype as they are without --lora.
#ifndef GPTMEM_LORA_FLAGS_H
#define GPTMEM_LORA_FLAGS_H

#include "core/config.h"
#include "core/dtype.h"
#include "core/settings.h"

void parse_lora(Settings *s, const GPTConfig *c) { (void)c, s->base_format = QF_FP32, s->base_bits = 32; }

#endif
