// app/flags.h — the command line: every flag in one table (name, kind, range,
// help), its defaults, the parser and --help (app/resolve.h turns the flags
// into settings and a model config). A bad flag or value exits 2 with one line naming it.
#ifndef GPTMEM_FLAGS_H
#define GPTMEM_FLAGS_H

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/config.h"
#include "core/gpus.h"
#include "core/settings.h"
#include "core/dtype.h"
#include "core/saved.h"
#include "core/sizes.h"
#include "cuda/api.h"
#include "app/inputs.h"
#include "app/lora_flags.h"
#include "app/outputs.h"
#include "app/ranks.h"
#include "app/rooms.h"
#include "io/data.h"
#include "parallel/comm.h"

// The flag table: name, value kind, help. --help prints it with the defaults.
enum { ARG_FLAG, ARG_INT, ARG_FLOAT, ARG_STR, ARG_U64 };
// The range of a number flag (ARG_FLOAT), in the table's `lo` column.
enum { AT_LEAST_0, ABOVE_0, AT_LEAST_1, FROM_0_TO_1, FROM_0_BELOW_1 };
typedef struct {
    const char *name;
    int kind;
    size_t offset;  // where in Settings the value goes
    long lo, hi;    // allowed range for ints; for numbers, lo is one of AT_LEAST_0 ... FROM_0_BELOW_1
    const char *help;
} FlagSpec;

#define OPT(field) offsetof(Settings, field)
const FlagSpec flag_specs[] = {
    {"model", ARG_STR, OPT(model), 0, 0, "preset: small, gpt2, gpt2-medium, gpt2-large, gpt2-xl, llama-small, llama3.2-1b, llama3.2-3b, llama3-8b, llama3.1-8b, llama3-70b"},
    {"layers", ARG_INT, OPT(layers), 1, 1024, "override the preset's number of layers L"},
    {"channels", ARG_INT, OPT(channels), 1, 65536, "override the preset's channels C"},
    {"heads", ARG_INT, OPT(heads), 1, 1024, "override the preset's heads H (must divide C)"},
    {"vocab", ARG_INT, OPT(vocab), 256, 1 << 20, "override the vocabulary V (>= 256: tokens are bytes)"},
    {"max-seq", ARG_INT, OPT(max_seq), 1, MAX_POSITIONS, "override the model's learned positions maxT"},
    {"kv-heads", ARG_INT, OPT(kv_heads), 1, 1024, "Llama: override the key-value heads KVH (must divide H)"},
    {"ffn", ARG_INT, OPT(ffn), 1, 1 << 20, "Llama: override the MLP's hidden width F"},
    {"rope-theta", ARG_INT, OPT(rope_theta), 1, 1000000000, "Llama: override RoPE's base theta (Llama 3's: 500000)"},
    {"config", ARG_STR, OPT(config), 0, 0, "the model's shape from a Hugging Face config.json (GPT-2, Llama, Mistral), or a folder holding one"},
    {"data", ARG_STR, OPT(data), 0, 0, "what to train on: a text file (bytes are tokens), llm.c token shards (a pattern such as 'dir/*_train_*.bin' for several), or nanoGPT's train.bin"},
    {"data-format", ARG_STR, OPT(data_format_str), 0, 0, "auto (an llm.c shard by its header, else text), text, llmc, or nanogpt (headerless uint16 tokens)"},
    {"val-data", ARG_STR, OPT(val_data), 0, 0, "token files to validate on (default: the last 10% of --data)"},
    {"in-order", ARG_FLAG, OPT(in_order), 0, 0, "read batches in file order (batch k: tokens k*B*T ...), as llm.c's loader without shuffling; validation from the start"},
    {"tokenizer", ARG_STR, OPT(tokenizer), 0, 0, "llm.c's tokenizer file for samples of tokens (default: tokenizer.bin or gpt2_tokenizer.bin beside --data)"},
    {"init", ARG_STR, OPT(init), 0, 0, "start from llm.c's model file, GPT-2's or Llama 3's (fp32 or bf16; the shape from its header), or a Hugging Face model folder (config.json, safetensors): weights only, a fresh optimizer"},
    {"export", ARG_STR, OPT(export_to), 0, 0, "at the end, write the weights as llm.c's model file, GPT-2's or Llama 3's (fp32), which llm.c and --init load; FILE.safetensors: a Hugging Face model, config.json beside it"},
    {"batch", ARG_INT, OPT(batch), 1, 65536, "sequences per micro-batch B"},
    {"seq-len", ARG_INT, OPT(seq_len), 1, MAX_POSITIONS, "tokens per sequence T (auto = the model's maxT)"},
    {"accum", ARG_INT, OPT(accum), 1, 65536, "gradient accumulation: micro-batches per optimizer step"},
    {"ckpt", ARG_FLAG, OPT(ckpt), 0, 0, "activation checkpointing: keep block outputs, recompute the rest (= --recompute block)"},
    {"recompute", ARG_STR, OPT(recompute_str), 0, 0, "drop these of each block's tensors, rebuild them in the backward: any of gelu,ln,attn,mlp,block"},
    {"flash", ARG_FLAG, OPT(flash), 0, 0, "flash attention: online softmax, no T x T matrix kept"},
    {"fused-ce", ARG_FLAG, OPT(fused_ce), 0, 0, "chunked classifier: LM head + loss a tile at a time, no N x V logits; the table in chunks"},
    {"device", ARG_STR, OPT(device_str), 0, 0, "where to train: cpu (the reference) or cuda (the GPU)"},
    {"dtype", ARG_STR, OPT(dtype_str), 0, 0, "storage of weights, grads, activations: fp32, bf16 or fp16"},
    {"fp32-grads", ARG_FLAG, OPT(fp32_grads), 0, 0, "with --dtype bf16 or fp16: keep the gradients in fp32, accumulated and reduced in fp32 (Megatron-LM's main grads: 18 bytes a parameter with AdamW)"},
    {"zero", ARG_INT, OPT(zero), 0, 3, "ZeRO stage over the ranks: 0 data parallel, 1 +optimizer, 2 +grads, 3 +weights sharded"},
    {"shard-group", ARG_STR, OPT(shard_group_str), 0, 0, "the sharding factor: ZeRO shards over groups of K ranks, the groups hold replicas (0: all ranks); node: the ranks of a machine (shard inside a machine, replicate across machines)"},
    {"hosts", ARG_STR, OPT(hosts), 0, 0, "with --ranks: the machines to start the ranks on, NAME:SLOTS,... (mpirun's --host; --ranks defaults to the slots in all)"},
    {"hostfile", ARG_STR, OPT(hostfile), 0, 0, "with --ranks: the machines from a file, as mpirun's --hostfile reads it"},
    {"comm", ARG_STR, OPT(comm_str), 0, 0, "ZeRO's collectives (and --tp's group's sums) on the GPU: auto (nccl when each rank has a GPU of its own, else mpi), nccl, or mpi (through host buffers; ranks may share a GPU)"},
    {"tp", ARG_INT, OPT(tp), 1, 4096, "tensor parallelism: the ranks in groups of T, each group splitting every layer as Megatron-LM does (heads and MLP width; doc/tensor-parallel.md)"},
    {"sp", ARG_FLAG, OPT(sp), 0, 0, "with --tp: sequence parallelism, the norms and the residual stream on a slice of each group's rows (Megatron-LM's; an all-gather before a split layer, a reduce-scatter after)"},
    {"ranks", ARG_INT, OPT(ranks), 1, 4096, "train on N ranks (starts mpirun -np N); with --dry-run: each rank's memory on N ranks"},
    {"adam-bits", ARG_INT, OPT(adam_bits), 1, 64, "AdamW's m and v: 32 (fp32) or 8 (blocks of 256, an fp32 scale each)"},
    {"lora", ARG_INT, OPT(lora.rank), 1, 65536, "LoRA: freeze the model, train a rank-R adapter (A, B) beside each targeted linear map (PEFT's r; doc/lora.md)"},
    {"lora-alpha", ARG_FLOAT, OPT(lora.alpha), ABOVE_0, 0, "with --lora: the adapters' output is scaled by alpha / R (PEFT's lora_alpha)"},
    {"lora-targets", ARG_STR, OPT(lora_targets_str), 0, 0, "with --lora: the maps that get adapters, comma-separated: q,k,v,o,gate,up,down (Llama) or qkv,proj,fc,fcproj (GPT-2); all (the default)"},
    {"lora-init", ARG_STR, OPT(lora_init), 0, 0, "the adapters' first values from PEFT's adapter folder (adapter_model.safetensors, adapter_config.json): its r, lora_alpha and maps are --lora's"},
    {"base-dtype", ARG_STR, OPT(base_dtype_str), 0, 0, "with --lora: hold the frozen blocks' linear maps in fp32, bf16, fp16, int8 or nf4 (QLoRA: blocks of 64, an absmax each), read back an op at a time; the rest stays in the --dtype"},
    {"double-quant", ARG_FLAG, OPT(double_quant), 0, 0, "with --base-dtype nf4: the scales in 8 bits too, QLoRA's double quantization (0.127 bits a weight for 0.5; doc/lora.md)"},
    {"merge", ARG_FLAG, OPT(merge), 0, 0, "with --lora and --export FILE: write the merged model (each targeted W + alpha/R B A, fp32) as a plain model file, not the adapters"},
    {"offload", ARG_STR, OPT(offload_str), 0, 0, "off the device: opt (fp32 master, Adam's m and v; AdamW runs on the host) or opt,params (also ZeRO-3's weight shard)"},
    {"offload-to", ARG_STR, OPT(offload_to), 0, 0, "where --offload puts them: host (page-locked buffers for the link, the rest pageable) or disk[:DIR] (the optimizer's states in a file in DIR, default .)"},
    {"loss-scale", ARG_FLOAT, OPT(loss_scale), AT_LEAST_1, 0, "fp16: initial loss scale (halved on overflow, doubled after 1000 good steps)"},
    {"steps", ARG_INT, OPT(steps), 1, INT_MAX, "optimizer steps (1: a run that inspects one step, with no val loss or sample unless asked)"},
    {"lr", ARG_FLOAT, OPT(lr), ABOVE_0, 0, "peak learning rate"},
    {"min-lr-frac", ARG_FLOAT, OPT(min_lr_frac), FROM_0_TO_1, 0, "final lr as a fraction of --lr (cosine decay)"},
    {"warmup", ARG_INT, OPT(warmup), -1, INT_MAX, "linear warmup steps (-1 = 5% of --steps)"},
    {"beta1", ARG_FLOAT, OPT(beta1), FROM_0_BELOW_1, 0, "AdamW's beta1 (below 1: the bias correction divides by 1 - beta1^t)"},
    {"beta2", ARG_FLOAT, OPT(beta2), FROM_0_BELOW_1, 0, "AdamW's beta2 (llm.c: 0.999; below 1)"},
    {"weight-decay", ARG_FLOAT, OPT(weight_decay), AT_LEAST_0, 0, "AdamW weight decay (2-D weights only)"},
    {"clip", ARG_FLOAT, OPT(clip), AT_LEAST_0, 0, "clip the global gradient norm to this (0 = off)"},
    {"seed", ARG_U64, OPT(seed), 0, 0, "seed for init, batches and sampling"},
    {"threads", ARG_INT, OPT(threads), 0, 1024, "OpenMP threads (0 = OMP_NUM_THREADS, or all cores divided among the ranks on this machine)"},
    {"eval-every", ARG_INT, OPT(eval_every), 0, INT_MAX, "validation loss every N steps (0 = only at the end)"},
    {"eval-batches", ARG_INT, OPT(eval_batches), 0, 100000, "batches per validation (0: none at all, not even the last step's, which --eval-every 0 keeps)"},
    {"sample-every", ARG_INT, OPT(sample_every), 0, INT_MAX, "print a text sample every N steps (0 = only at the end)"},
    {"sample-len", ARG_INT, OPT(sample_len), 0, 100000, "tokens per sample (bytes of a text corpus; 0 = no samples)"},
    {"temperature", ARG_FLOAT, OPT(temperature), ABOVE_0, 0, "sampling temperature"},
    {"prompt", ARG_STR, OPT(prompt), 0, 0, "start each sample from this text (a text corpus's bytes; at most --seq-len of them)"},
    {"prompt-file", ARG_STR, OPT(prompt_file), 0, 0, "start each sample from this file's text (token files: its tokens, from scripts/tokenize.py --prompt)"},
    {"save", ARG_STR, OPT(save), 0, 0, "write a checkpoint here (every --save-every steps and at the end)"},
    {"overwrite", ARG_FLAG, OPT(overwrite), 0, 0, "let an output (--save, --export, --log, --mem-*, --trace-json) replace an existing file of another kind than it writes"},
    {"save-every", ARG_INT, OPT(save_every), 0, INT_MAX, "checkpoint interval in steps (0 = only at the end)"},
    {"resume", ARG_STR, OPT(resume), 0, 0, "resume from this checkpoint (saved on any number of ranks, at any --zero)"},
    {"eval-only", ARG_FLAG, OPT(eval_only), 0, 0, "evaluate and sample the --resume state or the --init model, no training; with --quantize, next to each format; with --lora-init, its adapters on top"},
    {"quantize", ARG_STR, OPT(quantize_str), 0, 0, "with --eval-only: hold the weights in bf16, int8 or int4 (blocks of 64, an fp32 scale each)"},
    {"stop-after", ARG_INT, OPT(stop_after), 0, INT_MAX,
     "stop after this many steps of the --steps schedule, saving if --save (0 = run all)"},
    {"mem", ARG_FLAG, OPT(mem), 0, 0, "print the memory ledger: predicted vs measured, per phase and at peak"},
    {"mem-json", ARG_STR, OPT(mem_json), 0, 0, "write the memory ledger as JSON to this file"},
    {"mem-timeline", ARG_STR, OPT(mem_timeline), 0, 0, "write one step's memory after every push and pop as CSV, measured and predicted (with --dry-run: predicted)"},
    {"mem-snapshot", ARG_STR, OPT(mem_snapshot), 0, 0, "write one step's memory as PyTorch's memory snapshot (a pickle its memory viewer draws), measured (with --dry-run or --fit: predicted; refused for memory: up to the allocation that would not fit)"},
    {"tensorboard", ARG_STR, OPT(tensorboard), 0, 0, "write every step's numbers and memory as TensorBoard scalars, an event file in this folder (made if missing)"},
    {"trace-json", ARG_STR, OPT(trace_json), 0, 0, "write the run in Chrome's trace format (Perfetto, chrome://tracing): each step's phases, the first step's parts, offload's copies, the ledger's categories as a counter"},
    {"estimators", ARG_FLAG, OPT(estimators), 0, 0, "print what DeepSpeed's, accelerate's and Megatron's memory calculators say for this setting, beside gptmem's bytes"},
    {"mem-ops", ARG_FLAG, OPT(mem_ops), 0, 0, "print one block's saved tensors: shape, bytes, the published formula's term, kept or rebuilt"},
    {"print-every", ARG_INT, OPT(print_every), 0, INT_MAX, "print a step line every N steps, and the first and last (0 = about 25 a run)"},
    {"log", ARG_STR, OPT(log), 0, 0, "write every step as CSV: step, loss, val loss, lr, norm, ms, tokens, replicas, loss scale, memory (the step line's, each place's now and at the step's peak, in bytes)"},
    {"dry-run", ARG_FLAG, OPT(dry_run), 0, 0, "print the predicted memory and exit (nothing allocated)"},
    {"infer", ARG_FLAG, OPT(infer), 0, 0, "with --dry-run: inference memory, the weights in fp32/bf16/int8/int4 and the KV cache (in the --dtype)"},
    {"fit", ARG_STR, OPT(fit), 0, 0, "which settings fit in this memory per rank (80GiB, 24GB, ...; alone: the free memory here), cheapest first; with --lora, LoRA's settings"},
    {"gpu", ARG_STR, OPT(gpu_name), 0, 0, "the GPU in mind: v100-16gb, v100-32gb, t4, a100-40gb, a100-80gb, l4, rtx4090, h100-80gb, h200: a dry run sets the device's peak beside its memory, a step's time (--mfu) and --offload's bytes beside its host link; --fit offers fp16 where it has no bf16"},
    {"mfu", ARG_FLOAT, OPT(mfu), FROM_0_TO_1, 0, "with --gpu: the fraction of the card's dense peak a step's time is estimated at (0 = what gptmem measured on the card, else 0.40)"},
    {"link-gbps", ARG_FLOAT, OPT(link_gbps), 0, 0, "the host link's GB/s one way, for --offload's seconds a step (0 = the --gpu's PCIe)"},
    {"fit-host", ARG_STR, OPT(fit_host), 0, 0, "with --fit: the host memory of the machine in mind, for --offload's settings (512GiB, ...; default: what is free here)"},
    {"fit-disk", ARG_STR, OPT(fit_disk), 0, 0, "with --fit: the free disk of the machine in mind, for --offload-to disk (2TB, ...; default: what is free here)"},
    {"trace", ARG_FLAG, OPT(trace), 0, 0, "print each activation push and pop, ZeRO gather and reduction of the first step"},
    {"timing", ARG_FLAG, OPT(timing), 0, 0, "print where a step's time goes: each phase's ms, the host's and the GPU's, and how often the host waited for the GPU"},
};
#undef OPT
const int n_flag_specs = sizeof flag_specs / sizeof flag_specs[0];

void print_default(const FlagSpec *f, const Settings *d) {
    const char *p = (const char *)d + f->offset;
    switch (f->kind) {
    case ARG_FLAG: printf("off"); break;
    case ARG_INT:  // 0 where 0 is not allowed means "work it out" (the preset's value, one rank)
        if (*(const int *)p == 0 && f->lo >= 1) printf("auto");
        else printf("%d", *(const int *)p);
        break;
    case ARG_FLOAT: printf("%g", *(const float *)p); break;
    case ARG_U64: printf("%llu", (unsigned long long)*(const uint64_t *)p); break;
    case ARG_STR: printf("%s", *(const char *const *)p ? *(const char *const *)p : "none"); break;
    }
}

void print_help(void) {
    Settings d = default_settings();
    printf("gptmem: train a GPT-2 style model in plain C and see where every byte of memory goes.\n\n"
           "usage: ./train [--flag value | --flag=value]...\n\n");
    for (int i = 0; i < n_flag_specs; i++) {
        const FlagSpec *f = &flag_specs[i];
        char left[64];
        snprintf(left, sizeof left, "--%s%s", f->name, f->kind == ARG_FLAG ? "" : f->kind == ARG_STR ? " S" :
                                                       f->kind == ARG_FLOAT ? " X" : " N");
        printf("  %-20s %s (default: ", left, f->help);
        print_default(f, &d);
        printf(")\n");
    }
    printf("  %-20s %s\n\n", "--help", "this text");
    printf("auto: the preset's value (--seq-len: the model's maxT; --ranks: 1)\n");
    printf("this build: MPI %s\n", comm_have_mpi() ? "yes (./train --ranks N --zero S)" :
           "no (one rank; install libopenmpi-dev openmpi-bin and rebuild for ZeRO over ranks)");
    char why[256];
    int gpus = gpu_built() ? gpu_count(why, sizeof why) : 0;
    if (!gpu_built()) printf("            CUDA no (built without nvcc: --device cpu only)\n");
    else if (gpus > 0) printf("            CUDA yes, %d GPU%s found (--device cuda)\n", gpus, gpus > 1 ? "s" : "");
    else printf("            CUDA built in, but no GPU found here (%s): --device cpu only\n", why);
    if (gpu_built())
        printf("            NCCL %s\n", gpu_nccl_built() ? "yes (--comm nccl: ZeRO's collectives on the GPUs' buffers)"
                                                         : "no (ZeRO on GPUs goes over MPI; install libnccl-dev and rebuild)");
    print_rooms_left_out();
    printf("\nmodel presets:\n");
    for (int i = 0; i < n_model_presets; i++) {
        const GPTConfig *c = &model_presets[i].cfg;
        char llama[32] = "";
        if (is_llama(c)) snprintf(llama, sizeof llama, " KVH%d F%d", cfg_kv_heads(c), cfg_ffn(c));
        printf("  %-12s L%d C%d H%d%s V%d maxT %d  %.1fM params  %s\n", model_presets[i].name, c->layers,
               c->channels, c->heads, llama, c->vocab, c->max_seq, param_count(c) / 1e6, model_presets[i].note);
    }
    printf("\nexamples:\n"
           "  ./train                                  train the small model on tiny shakespeare\n"
           "  ./train --model gpt2-xl --batch 1 --dry-run\n"
           "                                           how much memory would GPT-2 XL need?\n"
           "  ./train --steps 20 --mem                 predicted vs measured memory, per category\n"
           "  ./train --dtype bf16 --ckpt --flash      every memory flag of one process\n"
           "  ./train --ranks 4 --zero 2 --steps 20    ZeRO stage 2 over 4 ranks (starts mpirun itself)\n"
           "  scripts/compare.py --dry-run --base '--model gpt2' fp32= bf16='--dtype bf16'\n"
           "                                           settings side by side\n");
}

// A flag of a room this build leaves out (app/rooms.h: make lecture's build) stops the run here.
void refuse_left_out(const char *name, const char *value) {
    const char *room = room_left_out(name, value);
    if (room)
        usage_error("--%s%s%s: %s is not in this build (make lecture: the seeds' techniques alone); ./train (make) has it",
                    name, value ? " " : "", value ? value : "", room);
}

// Parse one value into the option it belongs to; exits 2 on a bad value.
void parse_value(const FlagSpec *f, const char *v, Settings *s) {
    char *p = (char *)s + f->offset, *end;
    errno = 0;
    if (f->kind == ARG_INT) {
        long x = strtol(v, &end, 10);
        if (errno || end == v || *end || x < f->lo || x > f->hi) {
            char range[64];
            snprintf(range, sizeof range, "an integer from %ld to %ld", f->lo, f->hi);
            fprintf(stderr, "error: --%s must be %s (got '%s') (see ./train --help)\n", f->name, range, v);
            exit(2);
        }
        *(int *)p = (int)x;
    } else if (f->kind == ARG_FLOAT) {
        float x = strtof(v, &end);
        const char *rule[] = {"a number >= 0", "a number > 0", "a number >= 1", "a number from 0 to 1",
                              "a number from 0 up to (not including) 1"};
        if (errno == ERANGE && end != v && !*end)
            usage_error("--%s %s is too %s for a float (%g to %g)", f->name, v, isfinite(x) ? "small" : "large",
                        FLT_MIN, FLT_MAX);
        int ok = !errno && end != v && !*end && isfinite(x);
        if (ok && f->lo == AT_LEAST_0) ok = x >= 0;
        if (ok && f->lo == ABOVE_0) ok = x > 0;
        if (ok && f->lo == AT_LEAST_1) ok = x >= 1;
        if (ok && f->lo == FROM_0_TO_1) ok = x >= 0 && x <= 1;
        if (ok && f->lo == FROM_0_BELOW_1) ok = x >= 0 && x < 1;
        if (!ok) usage_error("--%s must be %s (got '%s')", f->name, rule[f->lo], v);
        *(float *)p = x;
    } else if (f->kind == ARG_U64) {
        unsigned long long x = strtoull(v, &end, 10);
        if (errno || end == v || *end || v[0] == '-') usage_error("--%s must be an integer >= 0 (got '%s')", f->name, v);
        *(uint64_t *)p = x;
    } else {
        if (!*v) usage_error("--%s needs a value", f->name);
        *(const char **)p = v;
    }
}

Settings parse_args(int argc, char **argv) {
    Settings s = default_settings();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { print_help(); exit(0); }
        if (strncmp(a, "--", 2) != 0) usage_error("unexpected argument '%s'; flags start with --", a);
        char name[64];
        const char *eq = strchr(a + 2, '='), *value = NULL;
        size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (len >= sizeof name) len = sizeof name - 1;
        memcpy(name, a + 2, len);
        name[len] = 0;
        const FlagSpec *f = NULL;
        for (int k = 0; k < n_flag_specs; k++)
            if (!strcmp(flag_specs[k].name, name)) f = &flag_specs[k];
        if (!f) usage_error("unknown flag '--%s'", name);
        s.seed_given |= !strcmp(name, "seed"), s.model_given |= !strcmp(name, "model");  // (what was given)
        s.lora_alpha_given |= !strcmp(name, "lora-alpha"), s.shape_given |= !strcmp(name, "batch") || !strcmp(name, "seq-len");
        s.eval_given |= !strcmp(name, "eval-every") || !strcmp(name, "eval-batches");
        s.sample_given |= !strcmp(name, "sample-every") || !strcmp(name, "sample-len");
        if (f->kind == ARG_FLAG) {
            if (eq) usage_error("--%s takes no value (got '%s')", name, eq + 1);
            refuse_left_out(name, NULL);
            *(int *)((char *)&s + f->offset) = 1;
            continue;
        }
        if (eq) value = eq + 1;
        else if (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) value = argv[++i];
        else if (!strcmp(name, "fit")) value = "free";  // --fit alone: the memory free here
        else usage_error("--%s needs a value", name);  // (a value that starts with -- goes as --flag=value)
        refuse_left_out(name, value);
        parse_value(f, value, &s);
    }
    return s;
}

#endif
