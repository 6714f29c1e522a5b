// tests/train_host.c — ./train with the GPU API of cuda/ops.h run on the CPU
// (cuda/host.c): its --device cuda runs cuda/model_gpu.h on host memory, so
// the GPU model's host logic is tested without a GPU. Built by make test.
#include "train.c"
#include "cuda/host.c"
