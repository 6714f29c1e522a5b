// app/rooms.h, the lecture build's (make lecture): the flags of the rooms it leaves out, each refused
// where the flags are read (app/flags.h parse_args), before anything runs. What stays is the seeds'
// techniques: the dtypes, AdamW, --ckpt and --recompute, --accum, --flash, --fused-ce, ZeRO 0-3 over MPI
// ranks, the ledger, --dry-run, --mem, --trace; ./train (make) has every room.
#ifndef GPTMEM_ROOMS_H
#define GPTMEM_ROOMS_H

#include <stdio.h>
#include <string.h>

typedef struct {
    const char *flag, *room;
} LeftOut;

const LeftOut rooms_left_out[] = {
    {"device", "the GPU"}, {"lora", "LoRA"}, {"lora-alpha", "LoRA"}, {"lora-targets", "LoRA"}, {"lora-init", "LoRA"},
    {"merge", "LoRA"}, {"base-dtype", "QLoRA"}, {"double-quant", "QLoRA"}, {"tp", "tensor parallelism"},
    {"sp", "tensor parallelism"}, {"offload", "offload"}, {"offload-to", "offload"},
    {"init", "reading model files (llm.c's, Hugging Face's)"}, {"config", "reading model files (llm.c's, Hugging Face's)"},
    {"export", "writing model files (llm.c's, Hugging Face's)"}, {"eval-only", "evaluating a saved model (and quantizing it)"},
    {"quantize", "evaluating a saved model (and quantizing it)"}, {"fit", "the search for settings that fit"},
    {"fit-host", "the search for settings that fit"}, {"fit-disk", "the search for settings that fit"}};
const int n_rooms_left_out = sizeof rooms_left_out / sizeof rooms_left_out[0];

// The room flag --name (with its value; NULL for a switch) belongs to, if this build leaves it out; else
// NULL. (--device cpu is this build's one device.)
const char *room_left_out(const char *name, const char *value) {
    if (!strcmp(name, "device") && value && !strcmp(value, "cpu")) return NULL;
    for (int i = 0; i < n_rooms_left_out; i++)
        if (!strcmp(name, rooms_left_out[i].flag)) return rooms_left_out[i].room;
    return NULL;
}

void print_rooms_left_out(void) {
    printf("this build: make lecture's, the seeds' techniques alone; ./train (make) has the rest, and these flags:\n ");
    for (int i = 0; i < n_rooms_left_out; i++) printf(" --%s%s", rooms_left_out[i].flag, i == 0 ? " cuda" : "");
    printf("\n");
}

#endif
