// cpu/lora.h, the lecture build's: no LoRA (app/rooms.h refuses --lora), so the model is never frozen and
// model.h's linear and linear_backward never call the adapters' ops. The full build's file holds them.
#ifndef GPTMEM_CPU_LORA_H
#define GPTMEM_CPU_LORA_H

#include "core/absent.h"
#include "cpu/gpt.h"

void lora_forward(GPT *m, int l, int op, float *out, const float *inp) { (void)m, (void)l, (void)op, (void)out, (void)inp, absent("--lora"); }
void lora_backward(GPT *m, int l, int op, float *dinp, const float *dout, const float *inp) {
    (void)m, (void)l, (void)op, (void)dinp, (void)dout, (void)inp, absent("--lora");
}

#endif
