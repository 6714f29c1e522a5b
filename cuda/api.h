// cuda/api.h — what the C side sees of the GPU: plain C declarations of the
// launchers in cuda/*.cu. Every pointer argument is a *device* pointer unless
// its name says host. `dt` is the storage dtype of core/dtype.h (0 fp32, 1 bf16,
// 2 fp16): tensors named with a T below are stored in it; arithmetic is fp32,
// as on the CPU. Every launcher checks its launch and exits with a message
// naming the kernel on any CUDA error.
//
// The ops mirror model.h one for one, with the same shapes and the same
// overwrite-or-accumulate rules; tests/test_cuda.c checks each against its
// CPU twin.
#ifndef GPTMEM_CUDA_OPS_H
#define GPTMEM_CUDA_OPS_H

#include <stddef.h>
#include <stdint.h>
#include "core/sizes.h"  // GPU_NORM_BLOCKS, GPU_COLSUM_CHUNKS, GPU_GEMM_WORKSPACE

#ifdef __cplusplus
extern "C" {
#endif

// --- runtime (cuda/runtime.cu) ----------------------------------------------
int gpu_built(void);  // 1 if this build has the CUDA path (cuda/kernels.o), 0 if not (cuda/none.c)
// 0 when a GPU is usable; otherwise -1 and `why` says what is missing. Ranks on one machine
// take its GPUs in turn: the process of local rank r opens GPU r mod (the GPU count).
int gpu_open(int local_rank, char *why, size_t why_len);
// cuBLASLt loaded and its functions found (cuda/matmul.cu opens the library at run time; gpu_open
// calls this): 0, or -1 and `why`. Needs no GPU, so a machine without one checks its cuBLASLt too.
int cu_blas_open(char *why, size_t why_len);
// How many GPUs the driver sees, without starting a context (for --help); 0 and `why` if none.
int gpu_count(char *why, size_t why_len);
const char *gpu_name(void);
// The opened GPU's identity (its UUID, in hex): the same string in every process that opened the
// same GPU, whatever CUDA_VISIBLE_DEVICES made its number there; "" before gpu_open. Ranks compare
// it to count how many share a GPU (app/launch.h).
void gpu_identity(char *id, size_t len);
// The GPU's nominal dense peak in FLOP/s for this storage dtype, from its SM count and clock:
// 16-bit on the tensor cores (per SM per clock: Hopper 4096, A100 2048, others 1024), fp32 on
// the CUDA cores (no TF32: 2 x 128 lanes per SM per clock, A100 2 x 64). For the step line's MFU.
double gpu_peak_flops(int dt);
void *gpu_malloc(size_t bytes, const char *name);  // zeroed; exits with a message (and the ledger's advice) on failure
void gpu_free(void *p);
// Page-locked host memory (zeroed): copies between it and the GPU run at the bus's full speed and
// need no bounce through a driver buffer (ZeRO's staging buffer). Exits with a message on failure.
void *gpu_host_alloc(size_t bytes, const char *name);
void gpu_host_free(void *p);
void gpu_upload(void *dst, const void *host_src, size_t bytes);  // waits for the GPU's queued work first
// The same copy queued behind the GPU's work, without waiting for it. host_src must be page-locked
// (gpu_host_alloc): from pageable memory the runtime may wait for the GPU ("API synchronization
// behavior" in the CUDA documentation). The GPU reads host_src when its stream reaches the copy,
// so the host must not change it before then: record an event after the copy and gpu_event_wait
// for it before writing host_src again.
void gpu_upload_queued(void *dst, const void *host_src, size_t bytes);
void gpu_download(void *host_dst, const void *src, size_t bytes);
// The download queued behind the GPU's work, without waiting: host_dst must be page-locked, and
// holds the bytes only once the host has waited for an event recorded after the copy
// (gpu_event_wait); the host neither reads nor writes it before then.
void gpu_download_queued(void *host_dst, const void *src, size_t bytes);
void gpu_copy(void *dst, const void *src, size_t bytes);  // device to device
void gpu_zero(void *p, size_t bytes);
void gpu_sync(const char *what);
// How many times so far the host has waited for the GPU to finish its queued work: each
// gpu_upload, gpu_download, gpu_sync and gpu_event_ms, and a gpu_event_wait whose event the
// GPU had not reached yet (--timing counts them inside a step).
long gpu_waits(void);
// How many calls that should return at once (queued copies, device copies and fills) took over
// 50 us while the GPU was busy: the host was held up by the runtime (--timing's "host blocked").
long gpu_blocked(void);
void gpu_mem_info(size_t *free_bytes, size_t *total_bytes);
// Timing inside the GPU's stream without stopping the host: record events
// around the work, read the time between two of them later (waits for `stop`).
void *gpu_event_new(void);
void gpu_event_record(void *event);
float gpu_event_ms(void *start, void *stop);
// The host waits until the GPU's stream has passed `event` (at once if it has).
void gpu_event_wait(void *event);
void gpu_event_free(void *event);
// A tensor just pushed on the GPU's activation stack (memory/ledger.h calls it on every push): the
// emulated GPU fills it with 0xFF bytes (NaN in fp32, bf16 and fp16) so that a read before a
// write shows; the real GPU does the same only when GPTMEM_POISON=1 is set (a debugging run).
void gpu_fill_fresh(void *p, size_t bytes);

// --- NCCL (cuda/nccl.cu): collectives on device memory, ranks with a GPU each ---
// Two communicators: ZeRO's (the ranks it shards over) and --tp's group's.
enum { NCCL_SHARDS, NCCL_TENSOR };
int gpu_nccl_built(void);          // 1 if this build links NCCL
size_t gpu_nccl_id_bytes(void);    // the size of the id rank 0 makes and every rank is sent
void gpu_nccl_unique_id(void *id); // the group's first rank, before gpu_nccl_open
// Join communicator `comm` of nranks (after gpu_open); 0, or -1 and `why`.
int gpu_nccl_open(int comm, const void *id, int nranks, int rank, char *why, size_t why_len);
void gpu_nccl_close(void);  // (both)
// data holds nranks parts of counts[r] elements (T), rank r's after rank r-1's; on return this
// rank's part holds the sum over the ranks of their part number rank (in place; T arithmetic).
void gpu_nccl_reduce_scatter(int comm, int dt, void *data, const size_t *counts, int nranks);
// Rank r's part is bytes[r] bytes at data + displs[r], in place on rank r; on return every part is on every rank.
void gpu_nccl_allgather(int comm, void *data, const size_t *bytes, const size_t *displs, int nranks);

// --- GEMM through cuBLASLt (cuda/matmul.cu) ------------------------------------
// Handed over once, both ledger buffers (scratch): cuBLASLt's workspace, and
// the partial sums of the column sums (bias gradients, layernorm's dw and db):
// GPU_COLSUM_CHUNKS x (the widest column sum) floats.
void cu_matmul_setup(void *workspace, size_t bytes, float *colsum, size_t colsum_floats);
// out[N,OC] (T) = inp[N,C] @ w[OC,C]^T + bias[OC]   (overwrites; bias may be NULL)
void cu_matmul_forward(int dt, void *out, const void *inp, const void *w, const void *bias, int N, int C, int OC);
// the same plus residual[N,OC] (NULL: none), added inside the GEMM (C = residual, beta 1) and
// rounded once (out may be residual)
void cu_matmul_residual_forward(int dt, void *out, const void *inp, const void *w, const void *bias,
                                const void *residual, int N, int C, int OC);
// out[N,OC] += bias[OC] on every row (NULL: nothing): --tp's bias after the group's sum of a row-parallel op
void cu_bias_forward(int dt, void *out, const void *bias, int N, int OC);
// dinp[N,C] = dout[N,OC] @ w[OC,C]   (overwrites; NULL skips it)
// dw[OC,C] += dout^T @ inp           (accumulates; NULL skips it and dbias: a frozen weight)
// dbias[OC] += column sums of dout   (accumulates; NULL skips it)
void cu_matmul_backward(int dt, void *dinp, void *dw, void *dbias, const void *dout, const void *inp, const void *w,
                        int N, int C, int OC);
// The bias gradients' column sums in 16-byte loads (the same bits; widths that are no multiple of 16
// bytes take the 2-byte kernel): 1 on, 0 off, -1 the default (on, unless GPTMEM_BIAS16=0).
void cu_bias_pack16(int on);
// the same with GELU's backward in the GEMM: dinp[N,C] = gelu'(pre[N,C]) * (dout @ w)   (overwrites)
void cu_matmul_dgelu_backward(int dt, void *dinp, void *dw, void *dbias, const void *dout, const void *inp,
                              const void *w, const void *pre, int N, int C, int OC);
// How many of those calls took cuBLASLt's DGELU epilogue, and how many its fallback (the plain GEMM and
// cu_gelu_backward, other bits: cuBLASLt decides which, by the machine and its version): the run's last lines
void cu_matmul_dgelu_counts(long long *fused, long long *apart);
// GPT-2's fc with GELU in the GEMM (cuBLASLt's GELU_AUX_BIAS): pre[N,OC] = inp @ w^T + bias and
// act[N,OC] = gelu(pre), one GEMM. 0, or -1 with nothing written where it is off or cuBLASLt has none (the
// caller runs cu_matmul_forward and cu_gelu_forward). Off by default unless GPTMEM_GELU_EPI=1 (its
// GELU is not the kernel's bits); cu_matmul_gelu_epilogue sets it (-1: the default).
int cu_matmul_gelu_forward(int dt, void *act, void *pre, const void *inp, const void *w, const void *bias, int N, int C,
                           int OC);
void cu_matmul_gelu_epilogue(int on);
// matmul_backward without a bias, whose dinp is added to (add 1) or overwritten (add 0):
// --fused-ce's d(lnf) adds up over the vocabulary's chunks
void cu_matmul_backward_into(int dt, void *dinp, void *dw, const void *dout, const void *inp, const void *w,
                             int N, int C, int OC, int add);
// C[M,N] (fp32/T) = A[M,K] @ B[N,K]^T, plain, for the benchmark's peak measurement
void cu_gemm_nt(int dt, void *c, const void *a, const void *b, int M, int N, int K);
// --gemm-shapes (tests/cuda_checks/speed.h): one GEMM as cuda/matmul.cu asks cuBLASLt for it (column-major
// D (m x n) = op(A) op(B), + C with beta 1, leading dimensions, epilogue 0 none, 1 bias, 2 DGELU), timed alone on
// buffers of its size: cuBLASLt's first choice (the model's) and the best of the up to 16 it offers, each the best of
// `reps` runs; the first choice's tile, split-K and stages (cublasLt.h's CUBLASLT_ALGO_CONFIG_* numbers); for
// DGELU, how many of D's elements the fallback (the plain GEMM, then cu_gelu_backward) gives other bits.
// 0, or -1 where cuBLASLt offers no algorithm.
typedef struct {
    int m, n, k, transa, transb, lda, ldb, ldd, epi, beta1;
} GemmShape;
typedef struct {
    int algos, best;         // how many algorithms cuBLASLt offered; the fastest's index (0: its first choice)
    float first_ms, best_ms;
    int tile, splitk, stages;
    long long dgelu_differ;
    uint64_t best_algo[8];   // the fastest's cublasLtMatmulAlgo_t, for a GEMM choices file (cuda/gemm_choices.h)
} GemmProbe;
int cu_gemm_probe(int dt, const GemmShape *g, int reps, GemmProbe *out);
// cuBLASLt's version (cublasLtGetVersion), which a GEMM choices file names
unsigned long cu_blas_version(void);
// #95's item 8: the GEMM algorithms a choices file (cuda/gemm_choices.h) gives its shapes, for the plans made
// from now on (those made before are dropped), or none (path NULL); GPTMEM_GEMM_CHOICES=FILE loads one at
// cu_matmul_setup. 0, or -1 with the reason in why (another GPU's or cuBLASLt's file, not such a file).
int cu_gemm_choices_load(const char *path, char *why, size_t why_len);
// the choices the loaded file holds, and how many of the GEMM plans made since took one (the run's last lines)
void cu_gemm_choices_counts(int *choices, int *taken);
// C[M,N] (T, rows ldc apart) = alpha A[M,K] B[K,N] + beta C, A and B each read with a row and a column
// stride, one of them 1 (a transposed operand: the row stride 1): --lora's low-rank products on
// bands of an op's output (gpu/lora.h)
void cu_gemm(int dt, int M, int N, int K, float alpha, const void *a, int a_rs, int a_cs, const void *b, int b_rs,
             int b_cs, float beta, void *c, int ldc);

// --- encoder (cuda/encoder.cu) ----------------------------------------------
// out[B,T,C] = wte[inp[b,t]] + wpe[t]
void cu_encoder_forward(int dt, void *out, const int *inp, const void *wte, const void *wpe, int B, int T, int C);
// dwpe[t] += sum_b dout[b,t]; dwte[v] += sum over the positions holding token v, in position order.
// The positions are bucketed by token on the host (gpu/head.h bucket_tokens): bucket u holds token tok[u] at
// positions pos[start[u] .. start[u+1]).
void cu_encoder_backward(int dt, void *dwte, void *dwpe, const void *dout, const int *pos, const int *start,
                         const int *tok, int nbuckets, int B, int T, int C);
// The embedding in 16-byte pieces (the same bits): 1 the forward and dwpe 8 channels a thread in 16 bits, the
// token rows' sums (dwte and --fused-ce's chunks) a warp a bucket's 256 bytes of a row with the loads of 8
// positions in flight; 0 the 2-byte kernels; -1 the default (1, unless GPTMEM_EMB16=0).
void cu_encoder_pack16(int on);

// --fused-ce: the table [wte | wpe] (Vp + maxT rows) a chunk of rows [r0, r1) at a time (T, C values a row):
// out[B,T,C] += the chunk's rows of each position's token and of its position (position t's row is
// Vp + t: rows at positions from p0 on, a sample's forward with the KV cache, pass Vp + p0)
void cu_encoder_forward_chunk(int dt, void *out, const int *inp, const void *rows, int r0, int r1, int Vp, int B,
                              int T, int C);
// drows (the chunk's rows) += dout of the positions that use them, in position order (the buckets above)
void cu_encoder_backward_chunk(int dt, void *drows, const void *dout, const int *pos, const int *start, const int *tok,
                               int nbuckets, int r0, int r1, int Vp, int B, int T, int C);

// --- layernorm (cuda/layernorm.cu) ----------------------------------------------
// out[N,C] (T); mean[N], rstd[N] in fp32 (the backward needs them exact)
void cu_layernorm_forward(int dt, void *out, float *mean, float *rstd, const void *inp, const void *w, const void *b,
                          int N, int C);
// Which layernorm/RMSNorm forward kernel: 0 the default, 8 a P 8 instance where it holds the row (the same bits
// as the default's P 16), 2 the 2-byte kernel; GPTMEM_LN_PIECES sets it for a run.
void cu_layernorm_pieces(int p);
// dinp += ..., dw += ..., db += ... (as model.h; dw NULL: no weight gradients, a frozen norm)
void cu_layernorm_backward(int dt, void *dinp, void *dw, void *db, const void *dout, const void *inp, const void *w,
                           const float *mean, const float *rstd, int N, int C);
// Llama's RMSNorm (the same kernels, no mean, no bias): out, rstd = ...; dinp += ..., dw += ... (cpu/ops.h rmsnorm_)
void cu_rmsnorm_forward(int dt, void *out, float *rstd, const void *inp, const void *w, int N, int C);
void cu_rmsnorm_backward(int dt, void *dinp, void *dw, const void *dout, const void *inp, const void *w,
                         const float *rstd, int N, int C);

// --- Llama's SwiGLU and RoPE (cuda/llama.cu) -------------------------------------
// out[N,F] = up * silu(gate) of inp[N,2F]; dinp[N,2F] (overwrites) from dout[N,F] (cpu/ops.h swiglu_)
void cu_swiglu_forward(int dt, void *out, const void *inp, int N, int F);
void cu_swiglu_backward(int dt, void *dinp, const void *inp, const void *dout, int N, int F);
// qkv[N,row] in place: the first nheads heads of hs channels turned by their positions p0 + n % T, with
// theta and, when scaled, Llama 3.1's frequencies; the backward turns back (cpu/attention.h rope_)
void cu_rope_forward(int dt, void *qkv, int N, int T, int p0, int row, int nheads, int hs, float theta, int scaled);
void cu_rope_backward(int dt, void *dqkv, int N, int T, int p0, int row, int nheads, int hs, float theta, int scaled);

// --- GELU, residual (cuda/elementwise.cu) ---------------------------------------
void cu_gelu_forward(int dt, void *out, const void *inp, size_t n);
void cu_gelu_backward(int dt, void *dinp, const void *inp, const void *dout, size_t n);  // dinp may be dout
void cu_residual_forward(int dt, void *out, const void *a, const void *b, size_t n);    // out may alias a or b
void cu_add_into(int dt, void *dst, const void *src, size_t n);                          // dst += src
// --fp32-grads: a bucket of gradients (T) into the fp32 gradients: dst += src (add 1), or dst = src (add 0)
void cu_widen_into(int dt, float *dst, const void *src, size_t n, int add);

// --- attention (cuda/attention.cu) --------------------------------------------
// H query heads of C/H channels over KVH key-value heads (GPT-2: KVH = H): a row of qkv is
// (H + 2 KVH) C/H wide, the queries then the keys then the values; query head h reads key-value
// head h / (H / KVH) (Llama's grouped-query attention; cpu/attention.h Heads).
void cu_attention_forward(int dt, void *out, void *att, const void *qkv, int B, int T, int C, int H, int KVH);
// dqkv (overwrites). att is consumed: it is overwritten with the score gradients.
void cu_attention_backward(int dt, void *dqkv, const void *dout, const void *qkv, void *att, int B, int T, int C,
                           int H, int KVH);
// Sampling's KV cache (gpu/kvcache.h): n rows of batch 1 at positions p0 .. p0+n-1 (qkv[n,W]).
// Their keys and values go into the layer's cache kc, vc ((Tc, KVH C/H) each, T) at rows p0 ..; then
// row i attends over the cache's positions 0 .. p0+i: out[n,C] (T). No probabilities are stored.
void cu_attention_forward_cached(int dt, void *out, void *kc, void *vc, const void *qkv, int p0, int n, int C, int H,
                                 int KVH);
enum { GPU_FLASH_MAX_HEAD = 128 };  // --flash on the GPU: head size hs = C/H up to this
// The naive attention (no --flash) and the KV-cache sampler keep a row of scores of every position
// and a head's values in a block's shared memory, (T + hs) floats: at most this many bytes (an
// H100's and H200's 227 KiB a block; about 58K positions)
enum { GPU_ATTN_ROW_BYTES = 227 << 10 };
// 1 when --flash runs on the tensor cores (cuda/flash_mma.cu: bf16/fp16, head size 64 or 128, grouped
// heads too); 0: the reference kernels (CUDA cores, any dtype, head sizes up to GPU_FLASH_MAX_HEAD)
int cu_flash_uses_mma(int dt, int hs);
void cu_flash_force_reference(int on);  // tests: 1 = always the reference kernels
// The tensor-core forward's and dK dV kernel's causal mask: 1 only on the tiles that cross a warp's diagonal or
// the end (the same bits), 0 on every tile; -1 the default (1, unless GPTMEM_FLASH_DIAG=0).
void cu_flash_diag(int on);
// D = rowsum(dout * out) before the tensor-core backward: 1 in 16-byte loads (the same bits), 0 two bytes a
// load; -1 the default (1, unless GPTMEM_FLASH_D16=0).
void cu_flash_d16(int on);
// The tensor-core forward at head size 64: 1 two row tiles of 16 a warp (128 query rows a block; the same
// bits), 0 one; -1 the default (0, unless GPTMEM_FLASH_M2=1).
void cu_flash_m2(int on);
// out[B,T,C] (T); lse[B,H,T] in fp32 (the backward recomputes every probability from it)
void cu_flash_forward(int dt, void *out, float *lse, const void *qkv, int B, int T, int C, int H, int KVH);
// dqkv (overwrites); D is fp32 scratch of B*H*T floats
void cu_flash_backward(int dt, void *dqkv, const void *dout, const void *qkv, const void *out, const float *lse,
                       float *D, int B, int T, int C, int H, int KVH);

// --- softmax + cross-entropy (cuda/crossentropy.cu) -----------------------------
// losses[N] (fp32) = -log softmax(logits[i, :V])[targets[i]]; the logits stay as they are.
void cu_crossentropy_forward(int dt, float *losses, const void *logits, const int *targets, int N, int V, int Vp);
// logits -> dlogits in place: (softmax - onehot(target)) * dloss over the first V, 0 on the padding.
// losses: what cu_crossentropy_forward wrote for these logits; a row's log-sum-exp is its loss plus
// its target's logit, so the backward reads each row once.
void cu_crossentropy_backward(int dt, void *logits, const float *losses, const int *targets, int N, int V, int Vp,
                              float dloss);
// Both in one read of the logits (llm.c's fused classifier, its first part): losses
// as the forward's, then logits -> dlogits as the backward's, the same bits. The model (gpu/head.h) leaves
// a training forward's loss to the backward this way where cu_crossentropy_fused_on() says so (the switch
// GPTMEM_CE_FUSED, off by default; cu_crossentropy_fuse sets it, -1: the default).
void cu_crossentropy_fused(int dt, float *losses, void *logits, const int *targets, int N, int V, int Vp, float dloss);
int cu_crossentropy_fused_on(void);
void cu_crossentropy_fuse(int on);

// --fused-ce (cpu/ops.h's crossentropy_tile_*): the logits a tile at a time, rows x nv columns
// (row stride nv, T) of the vocabulary from v0; columns v0 + j >= V are padding. Fold one tile into
// each row's running max m, sum s of exp(x - m) and target logit z (fp32; the tile with v0 = 0 starts them)
void cu_crossentropy_tile_forward(int dt, const void *tile, int rows, int nv, int v0, int V, const int *targets,
                                  float *m, float *s, float *z);
// after the last tile: lse[i] = m[i] + log s[i] (m was kept in lse), losses[i] = lse[i] - z[i]
void cu_crossentropy_tile_finish(float *lse, const float *s, const float *z, float *losses, int N);
// a tile -> its dlogits in place: (exp(x - lse) - onehot(target)) * dloss, 0 on the padding
void cu_crossentropy_tile_backward(int dt, void *tile, int rows, int nv, int v0, int V, const int *targets,
                                   const float *lse, float dloss);

// --- the step's numbers and the optimizer (cuda/adamw.cu) ---------------------------
// A step's loss and gradient norm stay on the GPU, in GPU_STEP_NUMBERS doubles, until the
// host reads them once after the step (no wait for the GPU inside a step):
enum { STEP_LOSS, STEP_SUMSQ, STEP_SCALE };  // the loss sum, the sum of squares, AdamW's gradient scale
// numbers[STEP_LOSS] += the mean of losses[0..N) (fp32), rounded to float as gpt_forward returns it.
void cu_loss_add(double *numbers, const float *losses, int N);
// Sum of squares of g[0..n) (T): the kernel writes GPU_NORM_BLOCKS partial sums (double) to
// partials (fixed orders: the same sum on every run).
void cu_sum_squares_partials(int dt, double *partials, const void *g, size_t n);
// numbers[STEP_SUMSQ] = partials[0] + ... + partials[nparts-1], in order; numbers[STEP_SCALE] =
// core/adamw.h's step_grad_scale of it: 1/loss_scale times the clip scale, NaN if the norm is not finite.
void cu_grad_scale(double *numbers, const double *partials, int nparts, float loss_scale, float clip);
// AdamW on n parameters, the gradients multiplied by *grad_scale (device memory: numbers +
// STEP_SCALE); nothing is written when it is NaN (a skipped step). master (fp32) -= ...; with
// 16-bit, the new weights are rounded into weights (T); for fp32 weights == master and only
// master is written.
void cu_adamw(int dt, float *master, void *weights, const void *grads, float *m, float *v, size_t n, float lr,
              float beta1, float beta2, float eps, float weight_decay, float b1_correction, float b2_correction,
              const double *grad_scale);
// cu_adamw over several ranges in one launch: range s is elements [offset, offset + n) of
// every pointer, updated with its own weight decay (a model's tensors: decay on matrices
// only); at most CU_ADAMW_SEGMENTS ranges a call, the rest ignored. The same bits as one
// cu_adamw a range. The gradients are stored in gdt: dt, or fp32 (--fp32-grads).
enum { CU_ADAMW_SEGMENTS = 64 };
typedef struct {
    size_t offset, n;
    float weight_decay;
} AdamwSegment;
void cu_adamw_segments(int dt, int gdt, float *master, void *weights, const void *grads, float *m, float *v,
                       const AdamwSegment *segs, int nsegs, float lr, float beta1, float beta2, float eps,
                       float b1_correction, float b2_correction, const double *grad_scale);
// cu_adamw_segments 8 parameters a thread, 16-byte loads and stores where aligned (the same bits): 1 on,
// 0 off, -1 the default (off, unless GPTMEM_ADAMW16=1).
void cu_adamw_pack16(int on);
// dst (T) = round(src (fp32)), n elements
void cu_store_dtype(int dt, void *dst, const float *src, size_t n);

// --- the frozen model in fewer bits (cuda/quant.cu): io/quant.h's storage, the same bits ------
// One matrix tensor of it (--lora --base-dtype): `format` core/dtype.h's QF_* (1 bf16, 2 int8, 4 nf4,
// 5 fp16); its codes from index k of the array `codes` (nf4 two a byte, the even index in the high half;
// int8 a byte; bf16, fp16 two bytes); its blocks' fp32 scales from its first block (`scales`), or with
// --double-quant (qscales not NULL) its blocks' bytes from its first, its groups' fp32 scales from its
// first and its offset (one fp32), its blocks in Hugging Face's order by halves and row (io/quant.h
// dq_position). A device struct of device pointers, passed by value.
typedef struct {
    int format;
    void *codes;
    size_t k;
    float *scales;
    unsigned char *qscales;
    float *scales2, *offset;
    int halves, row;
} CuQuantTensor;
// NF4's 16 values and 15 midpoints, double quant's 256 (host arrays: io/quant.h's), into the GPU's constants.
void cu_quant_tables(const float *nf4_code_host, const float *nf4_mid_host, const float *dq_code_host);
// Store the tensor's weights j0 .. j0 + n - 1 (src, fp32; j0 a block boundary, the range whole blocks
// but for the tensor's last) as io/quant.h quant_store does; with --double-quant the blocks' absmax go
// into `scales` (the tensor's own, from its block 0), for cu_double_quant once all are stored.
void cu_quantize(const CuQuantTensor *t, size_t j0, const float *src, size_t n);
// --double-quant: the tensor's nb blocks' absmax to its bytes, group scales and offset (io/quant.h dq_finish).
void cu_double_quant(const CuQuantTensor *t, const float *absmax, size_t nb);
// dst (T, n) = the tensor's weights j0 .. j0 + n - 1 read back (io/quant.h quant_load), j0 a block boundary.
void cu_dequantize(int dt, void *dst, const CuQuantTensor *t, size_t j0, size_t n);

#ifdef __cplusplus
}
#endif

#endif
