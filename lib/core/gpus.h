// core/gpus.h — the GPUs a lecture names (--gpu NAME): each card's memory as
// sold, whether it computes in bf16 (compute capability 8.0 and up: a V100 or
// a T4 has fp16 alone), and its host link, the PCIe generation's x16 rate in
// one direction (3.0: 15.75 GB/s, 4.0: 31.5, 5.0: 63). A dry run puts the
// device's peak beside the card's memory and --offload's bytes beside the
// link (their seconds: at least bytes / rate); --fit offers fp16 where bf16 is
// missing. --link-gbps sets another link (NVLink-C2C, a slower slot, ...).
// Time beside the bytes (memory/step_time.h): each card's dense peak from its
// datasheet, 16-bit on the tensor cores (fp32 accumulation) and fp32 on the CUDA
// cores, and where gptmem has run on the card, what it measured there.
#ifndef GPTMEM_GPUS_H
#define GPTMEM_GPUS_H

#include <stdio.h>
#include <string.h>

typedef struct {
    const char *name, *what;
    double gib;        // memory, GiB
    int bf16;          // computes in bf16
    double link_gbps;  // host link, GB/s one way
    double tflops16;   // dense TFLOP/s in fp16/bf16 on the tensor cores, fp32 accumulation (datasheet)
    double tflops32;   // dense TFLOP/s in fp32 on the CUDA cores (datasheet)
    // gptmem measured on this card: GPT-2 124M, bf16 --flash, B16 T1024, tokens a second (0: never run there)
    double measured_tok_s;
    const char *measured;  // when, and where the number is kept
} GpuModel;

static const GpuModel gpu_models[] = {
    {"v100-16gb", "NVIDIA V100 16GB (Volta, PCIe 3.0)", 16, 0, 15.75, 112, 14, 0, NULL},
    {"v100-32gb", "NVIDIA V100 32GB (Volta, PCIe 3.0): the lecture's card", 32, 0, 15.75, 112, 14, 0, NULL},
    {"t4", "NVIDIA T4 16GB (Turing, PCIe 3.0)", 16, 0, 15.75, 65, 8.1, 0, NULL},
    {"a100-40gb", "NVIDIA A100 40GB (Ampere, PCIe 4.0)", 40, 1, 31.5, 312, 19.5, 0, NULL},
    {"a100-80gb", "NVIDIA A100 80GB (Ampere, PCIe 4.0)", 80, 1, 31.5, 312, 19.5, 0, NULL},
    {"l4", "NVIDIA L4 24GB (Ada, PCIe 4.0)", 24, 1, 31.5, 121, 30.3, 0, NULL},
    {"rtx4090", "NVIDIA GeForce RTX 4090 24GB (Ada, PCIe 4.0)", 24, 1, 31.5, 165.2, 82.6, 0, NULL},
    {"h100-80gb", "NVIDIA H100 80GB (Hopper, PCIe 5.0)", 80, 1, 63, 989, 67, 447552, "2026-11-27, doc/cuda.md"},
    {"h200", "NVIDIA H200 141GB (Hopper, PCIe 5.0)", 141, 1, 63, 989, 67, 452570, "2026-11-26, doc/cuda.md"},
};
enum { N_GPU_MODELS = sizeof gpu_models / sizeof *gpu_models };

// The names gptmem knows, comma-separated (a message's list).
const char *gpu_model_names(char *out, size_t size) {
    out[0] = 0;
    for (int i = 0, n = 0; i < N_GPU_MODELS; i++) n += snprintf(out + n, size - n, "%s%s", i ? ", " : "", gpu_models[i].name);
    return out;
}

const GpuModel *gpu_model(const char *name) {
    for (int i = 0; i < N_GPU_MODELS; i++)
        if (!strcmp(gpu_models[i].name, name)) return &gpu_models[i];
    return NULL;
}

#endif
