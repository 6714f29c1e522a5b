// core/gpus.h — the GPUs a lecture names (--gpu NAME): each card's memory as
// sold, whether it computes in bf16 (compute capability 8.0 and up: a V100 or
// a T4 has fp16 alone), and its host link, the PCIe generation's x16 rate in
// one direction (3.0: 15.75 GB/s, 4.0: 31.5, 5.0: 63). A dry run puts the
// device's peak beside the card's memory and --offload's bytes beside the
// link (their seconds: at least bytes / rate); --fit offers fp16 where bf16 is
// missing. --link-gbps sets another link (NVLink-C2C, a slower slot, ...).
#ifndef GPTMEM_GPUS_H
#define GPTMEM_GPUS_H

#include <string.h>

typedef struct {
    const char *name, *what;
    double gib;        // memory, GiB
    int bf16;          // computes in bf16
    double link_gbps;  // host link, GB/s one way
} GpuModel;

static const GpuModel gpu_models[] = {
    {"v100-16gb", "NVIDIA V100 16GB (Volta, PCIe 3.0)", 16, 0, 15.75},
    {"v100-32gb", "NVIDIA V100 32GB (Volta, PCIe 3.0): the lecture's card", 32, 0, 15.75},
    {"t4", "NVIDIA T4 16GB (Turing, PCIe 3.0)", 16, 0, 15.75},
    {"a100-40gb", "NVIDIA A100 40GB (Ampere, PCIe 4.0)", 40, 1, 31.5},
    {"a100-80gb", "NVIDIA A100 80GB (Ampere, PCIe 4.0)", 80, 1, 31.5},
    {"l4", "NVIDIA L4 24GB (Ada, PCIe 4.0)", 24, 1, 31.5},
    {"rtx4090", "NVIDIA GeForce RTX 4090 24GB (Ada, PCIe 4.0)", 24, 1, 31.5},
    {"h100-80gb", "NVIDIA H100 80GB (Hopper, PCIe 5.0)", 80, 1, 63},
    {"h200", "NVIDIA H200 141GB (Hopper, PCIe 5.0)", 141, 1, 63},
};
enum { N_GPU_MODELS = sizeof gpu_models / sizeof *gpu_models };

const GpuModel *gpu_model(const char *name) {
    for (int i = 0; i < N_GPU_MODELS; i++)
        if (!strcmp(gpu_models[i].name, name)) return &gpu_models[i];
    return NULL;
}

#endif
