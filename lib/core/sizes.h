// core/sizes.h — the numbers the trainer and the predictor must agree on. Each is
// a size the trainer allocates by; memory/predict.h uses the same name instead of a
// copy of the number, so a change here changes both.
#ifndef GPTMEM_SIZES_H
#define GPTMEM_SIZES_H

#include <stddef.h>

enum {
    REDUCE_CHUNK = 1 << 16,         // ZeRO stages 0, 1: gradients are reduced this many elements per rank at a time
    HEAD_ROWS = 256,                // the CPU's LM head and loss run this many rows at a time (16-bit runs, --fused-ce)
    VOCAB_CHUNK = 2048,             // --fused-ce: rows of the embedding table visited (gathered, widened) at a time
    GPU_GEMM_WORKSPACE = 32 << 20,  // cuBLASLt's workspace, in bytes
    GPU_NORM_BLOCKS = 264,          // the GPU's gradient norm: this many partial sums (doubles)
    GPU_STEP_NUMBERS = 3,           // the GPU's step numbers kept on the device (doubles: loss, sum of squares, scale)
    GPU_COLSUM_CHUNKS = 64,         // the GPU's column sums (bias, layernorm gradients): row chunks
    CPU_ACT_ALIGN = 4,              // every tensor on the CPU's stack starts on this boundary (fp32 row statistics follow 16-bit tensors)
    GPU_ACT_ALIGN = 256,            // every tensor on the GPU's activation stack starts on this boundary
    GPU_HEAD_ROWS = 8192,           // the GPU's --fused-ce: the LM head's tiles are this many rows (x VOCAB_CHUNK)
    GPU_HEADROOM = 512 << 20,       // GPU memory a run needs beyond the ledger's device peak: cuBLASLt's state and the
                                    // kernels' local memory, which the context does not hold yet (about 0.3 GiB on an H100)
    GPU_STAGING = 8 << 20,          // ZeRO on the GPU over MPI: each rank's host buffer its collectives go through, bytes
    GPU_REPLICA_CHECK_BYTES = 32 << 20,  // --log on GPU ranks: the replica check (every weight to the host) runs
                                         // every ceil(weight bytes / this) steps
    QUANT_BLOCK = 64,               // int8/int4 weights: one fp32 scale per this many consecutive weights of a matrix
    DQ_GROUP = 256,                 // --double-quant: nf4 blocks per second-level fp32 scale (QLoRA's; io/quant.h)
    ADAM_BLOCK = 256,               // --adam-bits 8: m and v have one fp32 scale per this many elements (ZeRO shards are whole blocks)
    GRAD_BLOCK = 4096,              // 16-bit gradients are widened (summed, stepped) this many at a time
    OFFLOAD_CHUNK = 1 << 20,        // --offload: the optimizer's step moves this many parameters at a time (over the link, to
                                    // and from disk); a multiple of ADAM_BLOCK and of GRAD_BLOCK
    PARALLEL_MIN = 1 << 15,         // an op with less work than this (elements; a GEMM's or attention's multiply-adds
                                    // / 64) runs on one thread: waking the team for it costs more, and a busy core makes
                                    // them all wait
};

#define MAX_POSITIONS 131072          // the most positions a model has (--max-seq, --seq-len, config.json): Llama 3.1's 128K
#define DEFAULT_LOSS_SCALE 65536.0f  // fp16: the starting loss scale (--loss-scale)

// --device cuda --tp T (gpu/tensor.h): the host's room, in floats, for a sum over the group: a row block
// (N,C), or the loss's statistics (each row's log-sum-exp and target logit, and the T ranks' log-sum-exps:
// N (T + 2)), whichever is more.
static inline size_t gpu_tp_host_floats(size_t N, size_t C, size_t T) { return N * C > N * (T + 2) ? N * C : N * (T + 2); }

#endif
