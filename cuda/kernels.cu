// cuda/kernels.cu — the GPU half of gptmem as one translation unit (like
// train.c, which includes its headers): nvcc compiles this file to
// cuda/kernels.o and the Makefile links it into ./train and the GPU tests.
// Each op family is its own file; read them in this order.
#include "runtime.cu"
#include "matmul.cu"
#include "encoder.cu"
#include "layernorm.cu"
#include "elementwise.cu"
#include "llama.cu"
#include "flash_mma.cu"
#include "attention.cu"
#include "crossentropy.cu"
#include "adamw.cu"
#include "quant.cu"
#include "nccl.cu"
