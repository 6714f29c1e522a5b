// core/settings.h — one run's settings, in one struct: the flags (app/flags.h
// parses them into it, and --help prints the defaults below), and what is
// worked out from them once: the model config, the corpus size, the ranks.
// Built once and passed by pointer to everything that needs to know how the
// run is set up: the plan, both models, both predictors, --fit, the reports.
#ifndef GPTMEM_SETTINGS_H
#define GPTMEM_SETTINGS_H

#include <stdint.h>
#include <string.h>
#include "core/config.h"
#include "core/dtype.h"
#include "core/lora.h"
#include "core/sizes.h"

enum { COMM_AUTO, COMM_NCCL, COMM_MPI };  // --comm
enum { OFFLOAD_OPT = 1, OFFLOAD_PARAMS = 2 };  // --offload opt[,params]
const char OFFLOAD_TO_DEFAULT[] = "host";      // --offload-to's default (a flag that gives it points elsewhere)

typedef struct {
    // the model: a preset and its overrides (0: the preset's)
    const char *model;
    int layers, channels, heads, vocab, max_seq;
    int kv_heads, ffn;  // --kv-heads, --ffn: a Llama model's key-value heads and MLP width (0: the preset's)
    int rope_theta;     // --rope-theta: a Llama model's rotary base (0: the preset's)
    const char *config; // --config: the shape from a Hugging Face config.json (io/hf_config.h)
    GPTConfig cfg;  // the two resolved (app/flags.h resolve_settings); with --tp a rank's share of it
    int tp;         // --tp T: the ranks in groups of T, each group splitting every layer (parallel/tensor.h)
    int sp;         // --sp: with --tp, the norms and residual stream on 1/T of the rows (parallel/tensor.h)
    GPTConfig whole;  // --tp: the model the group holds (cfg is then tp_share(&whole, T))
    // one step: accum micro-batches of batch x seq_len tokens
    const char *data;     // the corpus: a text file, or token files (io/tokens.h)
    const char *val_data; // --val-data: token files that validate (NULL: the last 10% of --data)
    const char *data_format_str;  // --data-format auto|text|llmc|nanogpt
    int data_format;      // its DATA_* resolved: never DATA_AUTO (io/tokens.h)
    int token_width;      // token files: bytes a token (2 or 4); 0 for text
    long long data_tokens, val_tokens;  // token files: how many each holds
    int data_files;       // token files: how many --data names (a pattern: all it matches)
    int in_order;         // --in-order: batches in file order, as llm.c's loader without shuffling
    size_t corpus_bytes;  // what reading it holds (the data row): a text file whole, a window of
                          // T+1 tokens of token files; 0 if it is not there
    const char *tokenizer;  // --tokenizer: llm.c's tokenizer file, to print samples of tokens as text
    char tokenizer_path[1280];  // the one samples use: --tokenizer or one found beside --data ("": none)
    long long tokenizer_bytes;  // what its table holds in memory (part of corpus_bytes)
    const char *init;       // --init: llm.c's GPT-2 model file, the first weights
    const char *export_to;  // --export: write the trained weights as llm.c's model file
    int model_given;        // --model was on the command line (--init takes the shape from its file)
    int batch, seq_len, accum, steps, stop_after;
    // the memory flags
    const char *dtype_str;
    int dtype;                  // --dtype: DT_FP32, DT_BF16, DT_FP16 (core/dtype.h)
    int fp32_grads;             // --fp32-grads: 16-bit runs keep their gradients in fp32 (Megatron's main grads)
    float loss_scale;           // fp16: the initial dynamic loss scale
    int flash, fused_ce;        // --flash, --fused-ce
    const char *recompute_str;  // --recompute LIST
    unsigned recompute;         // its REC_* bits (core/saved.h); --ckpt sets REC_BLOCK
    int ckpt;                   // --ckpt, or --recompute block
    int adam_bits;              // --adam-bits 32 or 8: Adam's m and v in fp32 or 8-bit blocks
    LoraConfig lora;            // --lora R, --lora-alpha, --lora-targets (core/lora.h): the base frozen, adapters trained
    const char *lora_targets_str;  // --lora-targets LIST (NULL: all of a block's linear maps)
    const char *lora_init;         // --lora-init DIR: PEFT's adapter folder, the adapters' first values (io/peft.h)
    int merge;                     // --merge: --export writes the merged model (cpu/lora.h lora_merged_get), not the adapters
    char lora_init_maps[96];       // ... the maps it holds, as --lora-targets says them
    const char *base_dtype_str;    // --base-dtype fp32|bf16|fp16|int8|nf4: how --lora holds the frozen model
    int base_format;               // its QF_* (core/dtype.h; QF_FP32: the fp32 params array, as without --lora)
    int base_bits;                 // its bits a weight of the blocks' linear maps: 32, 16, 8 or 4
    int double_quant;              // --double-quant: nf4's scales in 8 bits (QLoRA's double quantization; io/quant.h)
    const char *offload_str;    // --offload none|opt|opt,params
    unsigned offload;           // its OFFLOAD_* bits: the optimizer's states (and ZeRO-3's weight shard) off the device
    const char *offload_to;     // --offload-to host|disk[:DIR]
    int offload_disk;           // the optimizer's states in a file (else host memory)
    char offload_dir[1024];     // the file's folder (disk)
    // where it runs: the device, and ZeRO over ranks
    const char *device_str;
    int cuda;               // --device cuda
    int zero, ranks;        // --zero S; --ranks N (the ranks to start, or with --dry-run to predict for)
    const char *shard_group_str;  // --shard-group K or node
    int shard_group;        // --shard-group K: ZeRO shards over groups of K ranks, replicated across groups (0: all ranks)
    int shard_group_node;   // --shard-group node: K = the ranks on a machine (resolved once the machines are known)
    const char *hosts;      // --hosts a:4,b:4: the machines --ranks starts the ranks on (mpirun's --host)
    const char *hostfile;   // --hostfile F: the same from a file (mpirun's --hostfile)
    int host_slots;         // --hosts: the ranks it names in all (0 without it)
    int host_each;          // --hosts: the ranks it names on each machine, when every machine has as many (else 0)
    const char *comm_str;   // --comm auto|nccl|mpi: ZeRO's collectives on the GPU
    int comm;               // its COMM_*
    int threads;            // OpenMP threads (0: divide the cores, app/launch.h)
    // the optimizer
    float lr, min_lr_frac, weight_decay, clip, beta1, beta2;
    int warmup;
    uint64_t seed;
    int seed_given;         // --seed was on the command line (a --resume run's streams come from the state instead)
    int lora_alpha_given;   // --lora-alpha was (its default, 8, given beside --lora-init's folder must agree too)
    // evaluation, samples, states
    int eval_every, eval_batches, sample_every, sample_len;
    int eval_given, sample_given;  // --eval-every/--eval-batches, --sample-every/--sample-len were on the command line
    int shape_given;               // --batch or --seq-len was (a note says what the defaults make of a long-context model)
    int eval_at_end;               // the last step evaluates (not a one-step inspection run: resolve_settings)
    float temperature;
    const char *prompt, *prompt_file;  // --prompt TEXT, --prompt-file F: what a sample starts from (bytes)
    int prompt_len;                    // its tokens (resolved; 1 without a prompt: the newline or end-of-text a sample starts from)
    const char *save, *resume;
    int save_every;
    int eval_only;             // --eval-only: evaluate and sample the --resume state, no training
    const char *quantize_str;  // --quantize bf16|int8|int4 (with --eval-only)
    int quantize;              // its QF_* (core/dtype.h); QF_FP32 without the flag
    int quant_bits;            // its bits (16, 8, 4; 0: fp32)
    // what the run shows and writes
    int mem, mem_ops, dry_run, trace, timing;
    int infer;          // --infer (with --dry-run): the weights in each format and the KV cache
    const char *fit;    // --fit BUDGET ("free": what this machine or GPU has free)
    const char *fit_host, *fit_disk;  // --fit-host, --fit-disk SIZE: --offload's room on the machine in mind (NULL: free here)
    int print_every;    // step lines: every N steps (0 = about 25 lines per run), plus the first and the last
    const char *mem_json;
    const char *mem_timeline;  // --mem-timeline FILE.csv
    const char *mem_snapshot;  // --mem-snapshot FILE.pickle: PyTorch's memory snapshot (memory/snapshot.h)
    const char *trace_json;    // --trace-json FILE.json: Chrome's trace format (app/trace_json.h)
    const char *gpu_name;      // --gpu NAME: the card in mind (core/gpus.h): its memory, bf16, host link
    float link_gbps;           // --link-gbps: the host link, GB/s one way (0: the --gpu's)
    float mfu;                 // --mfu: the fraction of the --gpu's peak its step time is estimated at (0: memory/step_time.h's)
    const char *tensorboard;   // --tensorboard DIR: TensorBoard's event file of the steps (io/tfevents.h)
    int estimators;            // --estimators: what other calculators say beside the ledger (memory/estimators.h)
    const char *log;
    int overwrite;      // --overwrite: --save and --export may replace a file of another kind
} Settings;

// The gradients' dtype: the storage dtype, or fp32 with --fp32-grads (Megatron-LM's convention under
// mixed precision: 16-bit weights, fp32 gradients, accumulated and reduced in fp32; 2 + 4 + 12 = 18
// bytes a parameter with AdamW, where the ZeRO paper counts 16).
int grad_dtype(const Settings *s) { return s->fp32_grads ? DT_FP32 : s->dtype; }

// The parameters the optimizer trains, which ZeRO shards: the model's, or with --lora its adapters'.
size_t trained_param_count(const Settings *s) {
    return s->lora.rank ? lora_param_count(&s->cfg, &s->lora) : param_count(&s->cfg);
}

// The defaults of the flags (--help prints them).
Settings default_settings(void) {
    Settings s;
    memset(&s, 0, sizeof s);
    s.model = "small";
    s.dtype_str = "fp32";
    s.comm_str = "auto";
    s.device_str = "cpu";
    s.loss_scale = DEFAULT_LOSS_SCALE;
    s.data = "data/tinyshakespeare.txt";
    s.batch = 32;
    s.accum = 1;
    s.steps = 1000;
    s.lr = 3e-3f;
    s.min_lr_frac = 0.1f;
    s.weight_decay = 0.1f;
    s.clip = 1.0f;
    s.beta1 = 0.9f;
    s.beta2 = 0.95f;
    s.data_format_str = "auto";
    s.warmup = -1;  // -1: 5% of the steps
    s.seed = 1337;
    s.eval_every = 200;
    s.eval_batches = 16;
    s.eval_at_end = 1;
    s.sample_every = 500;
    s.sample_len = 240;
    s.temperature = 0.8f;
    s.save_every = 0;
    s.adam_bits = 32;
    s.tp = 1;
    s.lora.alpha = LORA_ALPHA_DEFAULT;
    s.offload_str = "none";
    s.offload_to = OFFLOAD_TO_DEFAULT;
    return s;
}

// The model as a whole: the config, or with --tp the one the group holds together.
const GPTConfig *model_whole(const Settings *s) { return s->tp > 1 ? &s->whole : &s->cfg; }

#endif
