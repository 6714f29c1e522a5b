// app/resolve.h — the flags (app/flags.h) turned into settings: each checked against the others and
// against the model they describe (--recompute, --offload, --gpu, --eval-only's, the model's shape and
// what it can run). A bad combination exits 2 with one line naming it.
#ifndef GPTMEM_RESOLVE_H
#define GPTMEM_RESOLVE_H

#include "app/flags.h"
#include "app/model_files.h"

// --recompute LIST (comma-separated names of core/saved.h's recompute_choices)
// into o->recompute; --ckpt is "block", and "block" sets --ckpt.
void parse_recompute(Settings *s) {
    if (s->recompute_str) {
        if (s->ckpt) usage_error("--ckpt is --recompute block: give one of them, not both");
        char list[256];
        snprintf(list, sizeof list, "%s", s->recompute_str);
        for (char *name = strtok(list, ","); name; name = strtok(NULL, ",")) {
            int found = 0;
            for (int k = 0; k < N_RECOMPUTE_CHOICES; k++)
                if (!strcmp(name, recompute_choices[k].name)) s->recompute |= recompute_choices[k].flag, found = 1;
            if (!found) usage_error("--recompute: unknown name '%s'; the choices are gelu, ln, attn, mlp, block", name);
        }
        if (!s->recompute) usage_error("--recompute needs a list of names: gelu, ln, attn, mlp, block (got '%s')",
                                       s->recompute_str);
    }
    if (s->ckpt) s->recompute = REC_BLOCK;
    if (s->recompute & REC_BLOCK) s->ckpt = 1;
}

// --offload and --offload-to: what is moved, and where to.
void parse_offload(Settings *s) {
    if (strcmp(s->offload_str, "none")) {
        char list[256];
        snprintf(list, sizeof list, "%s", s->offload_str);
        for (char *name = strtok(list, ","); name; name = strtok(NULL, ",")) {
            if (!strcmp(name, "opt")) s->offload |= OFFLOAD_OPT;
            else if (!strcmp(name, "params")) s->offload |= OFFLOAD_PARAMS;
            else usage_error("--offload: unknown part '%s'; the choices are opt, or opt,params (or none)", name);
        }
        if (!s->offload) usage_error("--offload needs opt or opt,params (got '%s')", s->offload_str);
    }
    if (s->offload_to != OFFLOAD_TO_DEFAULT && !s->offload)
        usage_error("--offload-to %s: nothing to offload; add --offload opt (the optimizer's states) or opt,params",
                    s->offload_to);
    if ((s->offload & OFFLOAD_PARAMS) && !(s->offload & OFFLOAD_OPT))
        usage_error("--offload params: the weights follow the optimizer's states off the device; give --offload opt,params");
    if ((s->offload & OFFLOAD_PARAMS) && s->zero != 3)
        usage_error("--offload params moves ZeRO stage 3's weight shard: add --zero 3 (on several ranks), or use --offload opt");
    if (s->offload && s->eval_only) usage_error("--offload moves the optimizer's states; --eval-only has no optimizer");
    const char *to = s->offload_to;
    if (!strcmp(to, "host")) return;
    if (strncmp(to, "disk", 4) || (to[4] && to[4] != ':') || (to[4] == ':' && !to[5]))
        usage_error("--offload-to must be host, disk or disk:DIR (got '%s')", to);
    s->offload_disk = 1;
    snprintf(s->offload_dir, sizeof s->offload_dir, "%s", to[4] ? to + 5 : ".");
}

// --gpu and --link-gbps: a card gptmem knows, and bf16 only where it computes in it.
void parse_gpu(Settings *s) {
    if (s->link_gbps < 0) usage_error("--link-gbps must be a rate in GB/s, above 0 (got %g)", s->link_gbps);
    if (s->mfu > 0 && !s->gpu_name) usage_error("--mfu is the fraction of the --gpu's peak a step's time is estimated at: give --gpu NAME");
    if (!s->gpu_name) return;
    if (!s->cuda) usage_error("--gpu names the GPU in mind: it goes with --device cuda");
    const GpuModel *g = gpu_model(s->gpu_name);
    char names[512];
    if (!g) usage_error("--gpu '%s' is not a card gptmem knows; it knows %s", s->gpu_name, gpu_model_names(names, sizeof names));
    if (s->dtype == DT_BF16 && !g->bf16)
        usage_error("--gpu %s has no bf16 (compute capability 7.x): use --dtype fp16, the same bytes with a loss scale",
                    s->gpu_name);
}

// --eval-only, --quantize, --adam-bits and --fp32-grads: what each needs, what each excludes.
void parse_eval_flags(Settings *s) {
    if (s->fp32_grads && s->dtype == DT_FP32)
        usage_error("--fp32-grads keeps the gradients of a 16-bit run in fp32; with --dtype fp32 they already are: "
                    "add --dtype bf16 (or fp16), or drop --fp32-grads");
    if (s->fp32_grads && (s->eval_only || s->infer))
        usage_error("--fp32-grads sets the gradients' dtype; --%s has no gradients: drop it", s->eval_only ? "eval-only" : "infer");
    if (s->adam_bits != 32 && s->adam_bits != 8) usage_error("--adam-bits must be 32 or 8 (got %d)", s->adam_bits);
    if (s->adam_bits == 8 && s->cuda && !(s->offload & OFFLOAD_OPT))
        usage_error("--adam-bits 8 runs on the CPU (drop it, --device cpu, or --offload opt: AdamW on the host)");
    s->quantize = QF_FP32;
    if (s->quantize_str) {
        for (int f = QF_BF16; f < QF_EVAL_N; f++)
            if (!strcmp(s->quantize_str, quant_name[f])) s->quantize = f;
        if (s->quantize == QF_FP32) usage_error("--quantize must be bf16, int8 or int4 (got '%s')", s->quantize_str);
        if (!s->eval_only)
            usage_error("--quantize goes with --eval-only --resume STATE: it evaluates and samples a trained state "
                        "(training keeps fp32 master weights; see --dtype)");
    }
    if (!s->eval_only) return;
    if (s->adam_bits != 32) usage_error("--eval-only runs no optimizer: drop --adam-bits");
    if (s->cuda) usage_error("--eval-only runs on the CPU (drop --device cuda)");
    if (s->ranks > 1 || s->zero) usage_error("--eval-only runs in one process: drop --ranks and --zero");
    if (s->recompute) usage_error("--eval-only has no backward, so nothing to recompute: drop --ckpt / --recompute");
    if (s->save) usage_error("--eval-only changes nothing to save: drop --save");
    if (s->export_to && s->quantize)
        usage_error("--export writes the fp32 weights as llm.c keeps them; drop --quantize");
    const char *step_flag = s->fit ? "fit" : s->mem_timeline ? "mem-timeline" : s->mem_snapshot ? "mem-snapshot" :
                            s->mem_ops ? "mem-ops" : s->log ? "log" : s->trace ? "trace" : s->timing ? "timing" :
                            s->estimators ? "estimators" : s->trace_json ? "trace-json" : s->tensorboard ? "tensorboard" : NULL;
    if (step_flag) usage_error("--eval-only runs no training step: drop --%s", step_flag);
    if (!s->resume && !s->init && !s->dry_run)
        usage_error("--eval-only needs weights to evaluate: --resume FILE (a state saved with --save) or --init FILE "
                    "(llm.c's model file)");
}

// The model: the preset with --layers, --channels, ... over it (or --init's
// file's shape); with token files and no --vocab, the small model's
// vocabulary becomes the tokens' (GPT-2's for uint16, Llama 3's for uint32);
// and the sequence length it takes (--seq-len, by default its maxT). Checked.
GPTConfig resolve_model(Settings *s) {
    const ModelPreset *p = NULL;
    for (int i = 0; i < n_model_presets; i++)
        if (!strcmp(model_presets[i].name, s->model)) p = &model_presets[i];
    if (!p) usage_error("--model must be one of small, gpt2, gpt2-medium, gpt2-large, gpt2-xl, llama-small, "
                        "llama3.2-1b, llama3.2-3b, llama3-8b, llama3.1-8b, llama3-70b (got '%s')", s->model);
    GPTConfig c = p->cfg;
    if (s->layers) c.layers = s->layers;
    if (s->channels) c.channels = s->channels;
    if (s->heads) c.heads = s->heads;
    if (s->vocab) c.vocab = s->vocab;
    else if (s->token_width && c.vocab == 256) c.vocab = s->token_width == 4 ? LLAMA3_VOCAB : GPT2_VOCAB;
    if (s->max_seq) c.max_seq = s->max_seq;
    if ((s->kv_heads || s->ffn || s->rope_theta) && !is_llama(&c))
        usage_error("--%s shapes a Llama model (--model llama-small, llama3.2-1b, ...): GPT-2's heads each have their "
                    "own keys and values, its MLP is 4C wide, and it learns its positions",
                    s->kv_heads ? "kv-heads" : s->ffn ? "ffn" : "rope-theta");
    if (s->kv_heads) c.kv_heads = s->kv_heads;
    if (s->ffn) c.ffn = s->ffn;
    if (s->rope_theta) c.rope_theta = s->rope_theta == (int)LLAMA_ROPE_THETA ? 0 : s->rope_theta;
    if (s->config) resolve_config(s, &c);
    if (s->init) resolve_init(s, &c);
    if (c.channels % c.heads) {
        fprintf(stderr, "error: --channels %d is not divisible by --heads %d; pick heads that divide "
                "channels (see ./train --help)\n", c.channels, c.heads);
        exit(2);
    }
    int seq_from_model = s->seq_len == 0;
    if (s->seq_len == 0) s->seq_len = c.max_seq;
    if (s->seq_len > c.max_seq) {
        fprintf(stderr, "error: --seq-len %d is over the model's maximum of %d positions; use --seq-len "
                "1..%d or raise --max-seq (see ./train --help)\n", s->seq_len, c.max_seq, c.max_seq);
        exit(2);
    }
    if ((long long)s->batch * s->seq_len > INT_MAX / 8)
        usage_error("--batch x --seq-len is too large (%d x %d%s)", s->batch, s->seq_len,
                    seq_from_model ? ": no --seq-len was given, so it is the model's maxT; give a --seq-len" : "");
    return c;
}

// A Llama model (core/config.h) trains on both devices, on one rank or with ZeRO,
// with the memory flags; its shape must allow grouped heads and RoPE's pairs.
void check_llama(const Settings *s, const GPTConfig *c) {
    (void)s;
    if (c->heads % cfg_kv_heads(c) || head_size(c) % 2)
        usage_error("a Llama model needs heads a multiple of its key-value heads and an even head size (got H %d, "
                    "KVH %d, head size %d)", c->heads, cfg_kv_heads(c), head_size(c));
}

// On the GPU the naive attention (no --flash) and the sampler's KV-cache attention hold a row of
// scores of every position in a block's shared memory: a --seq-len past what a block has is refused
// here, with what to do, not by the kernel's launch.
void check_gpu_attention_row(const Settings *s, const GPTConfig *c) {
    size_t row = sizeof(float) * ((size_t)s->seq_len + (size_t)head_size(c));
    if (!s->cuda || (s->flash && !s->sample_len) || row <= GPU_ATTN_ROW_BYTES) return;
    int most = (int)(GPU_ATTN_ROW_BYTES / sizeof(float)) - head_size(c);
    usage_error("--device cuda: %s keeps a row of scores of every position in a block's shared memory, and --seq-len "
                "%d needs %zu KiB there, past the %d KiB a block has; %s, or a --seq-len of at most %d",
                s->flash ? "sampling (its KV cache)" : "attention without --flash", s->seq_len, row >> 10,
                GPU_ATTN_ROW_BYTES >> 10, s->flash ? "--sample-len 0" : "add --flash", most);
}

// Resolve the preset and overrides into the model config, and everything else
// the flags imply; check it makes sense.
void resolve_settings(Settings *s) {
    resolve_data(s);
    GPTConfig c = resolve_model(s);
    if (s->warmup < 0) s->warmup = s->steps / 20;
    if (!s->eval_batches && s->eval_only) usage_error("--eval-only evaluates the model on --eval-batches batches: give 1 or more");
    if (!s->eval_batches) s->eval_every = 0, s->eval_at_end = 0;  // no validation: not every N steps, not at the end
    if (s->steps == 1 && !s->eval_only) {  // a one-step run inspects the step (--trace, --mem, ...): it ends there
        if (!s->eval_given) s->eval_at_end = 0;  // its val loss is the untrained model's
        if (!s->sample_given) s->sample_len = 0; // its sample is noise
    }
    s->dtype = -1;
    for (int d = DT_FP32; d <= DT_FP16; d++)
        if (!strcmp(s->dtype_str, dtype_name[d])) s->dtype = d;
    if (s->dtype < 0) usage_error("--dtype must be one of fp32, bf16, fp16 (got '%s')", s->dtype_str);
    if (strcmp(s->device_str, "cpu") && strcmp(s->device_str, "cuda"))
        usage_error("--device must be cpu or cuda (got '%s')", s->device_str);
    s->cuda = !strcmp(s->device_str, "cuda");
    s->comm = !strcmp(s->comm_str, "auto") ? COMM_AUTO : !strcmp(s->comm_str, "nccl") ? COMM_NCCL
            : !strcmp(s->comm_str, "mpi") ? COMM_MPI : -1;
    if (s->comm < 0) usage_error("--comm must be auto, nccl or mpi (got '%s')", s->comm_str);
    if (s->comm == COMM_NCCL && !s->cuda)
        usage_error("--comm nccl moves GPU buffers: it goes with --device cuda (the CPU's ranks use MPI)");
    parse_hosts(s);
    parse_shard_group(s);
    if (s->cuda && s->flash && head_size(&c) > GPU_FLASH_MAX_HEAD) {
        fprintf(stderr, "error: --device cuda --flash supports head sizes up to %d; this model's is %d "
                "(--channels / --heads); drop --flash or use more heads\n", GPU_FLASH_MAX_HEAD, head_size(&c));
        exit(2);
    }
    check_gpu_attention_row(s, &c);
    parse_recompute(s);
    if (s->infer && !s->dry_run && !s->fit)
        usage_error("--infer goes with --dry-run or --fit (it predicts; it runs nothing)");
    if ((s->fit_host || s->fit_disk) && !s->fit)
        usage_error("--%s goes with --fit (it sizes the machine --fit searches for)", s->fit_host ? "fit-host" : "fit-disk");
    parse_offload(s);
    parse_eval_flags(s);
    parse_gpu(s);
    if (s->cuda && s->mem_ops)
        usage_error("--mem-ops shows the CPU's activation stack; drop --device cuda (the GPU pads each tensor to %d "
                    "bytes: --device cuda --dry-run shows its stack)", GPU_ACT_ALIGN);
    if (is_llama(&c)) check_llama(s, &c);
    parse_lora(s, &c);
    if (s->data_format == DATA_TEXT && c.vocab < 256 && !s->dry_run && !s->fit)
        usage_error("the model's vocabulary is %d tokens and --data '%s' is text, whose tokens are its bytes (0 to 255): "
                    "give token files of this model's tokenizer (--data, --val-data: llm.c's .bin)", c.vocab, s->data);
    s->cfg = c;
    parse_tp(s);
    long long corpus = s->data_format == DATA_TEXT ? file_size(s->data) : 0;
    s->corpus_bytes = data_held_bytes(s->data_format, s->token_width, corpus > 0 ? corpus : 0, s->seq_len);
    resolve_tokenizer(s);
    resolve_prompt(s);
    check_outputs(s);
    s->corpus_bytes += (size_t)s->tokenizer_bytes;
    s->quant_bits = s->quantize ? quant_bits[s->quantize] : 0;
}

// The run's settings, from the command line (exits 2 on a bad flag or value).
Settings parse_settings(int argc, char **argv) {
    Settings s = parse_args(argc, argv);
    return resolve_settings(&s), s;
}

#endif
