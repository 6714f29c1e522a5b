// app/lora_flags.h — --lora, --lora-alpha and --lora-targets checked against the model
// (core/lora.h), and the flags --lora does not take yet, each refused with what to do.
#ifndef GPTMEM_LORA_FLAGS_H
#define GPTMEM_LORA_FLAGS_H

#include <stdio.h>
#include <string.h>
#include "core/config.h"
#include "core/dtype.h"
#include "core/lora.h"
#include "core/settings.h"
#include "app/usage.h"
#include "io/peft.h"
#include "io/quant.h"

// --lora-init DIR: PEFT's adapter folder gives --lora's rank, alpha and maps; a --lora, --lora-alpha or
// --lora-targets given beside it must say the same.
void lora_from_folder(Settings *s, const GPTConfig *c) {
    LoraConfig got = {0, 0, 0};
    StModel m;
    char err[1400], maps[96];
    if (peft_open(&m, s->lora_init, c, &got, err, sizeof err) || peft_check_values(&m, err, sizeof err)) {
        peft_close(&m);
        usage_error("--lora-init: %s", err);
    }
    peft_close(&m);
    LoraConfig *a = &s->lora;
    if (a->rank && a->rank != got.rank)
        usage_error("--lora %d, and --lora-init '%s' is an adapter of r %d: drop --lora (the folder's is taken)", a->rank,
                    s->lora_init, got.rank);
    if (s->lora_alpha_given && a->alpha != got.alpha)
        usage_error("--lora-alpha %g, and --lora-init '%s' says lora_alpha %g: drop --lora-alpha", a->alpha, s->lora_init, got.alpha);
    if (s->lora_targets_str)
        usage_error("--lora-init '%s' holds adapters of %s: its maps are the run's, drop --lora-targets", s->lora_init,
                    lora_targets_words(c, &got, maps, sizeof maps));
    *a = got;
    s->lora_targets_str = lora_targets_words(c, &got, s->lora_init_maps, sizeof s->lora_init_maps);
}

// --base-dtype (io/quant.h's formats but int4) and --double-quant, which only nf4 has.
void parse_base_dtype(Settings *s) {
    if (s->base_dtype_str) {
        s->base_format = -1;
        for (int f = 0; f < QF_N; f++)
            if (f != QF_INT4 && !strcmp(s->base_dtype_str, quant_name[f])) s->base_format = f;
        if (s->base_format < 0) usage_error("--base-dtype must be fp32, bf16, fp16, int8 or nf4 (got '%s')", s->base_dtype_str);
        s->base_bits = quant_bits[s->base_format];
    }
    if (s->double_quant && s->base_format != QF_NF4)
        usage_error("--double-quant quantizes nf4's scales: it goes with --base-dtype nf4 (QLoRA), not %s",
                    quant_name[s->base_format]);
}

// The flags --lora does not take (yet), each refused with its reason and what to do instead.
void refuse_with_lora(const Settings *s) {
    if (s->zero == 3 && s->base_format != QF_FP32)
        usage_error("--zero 3 with --base-dtype %s: stage 3 shards the frozen model over the ranks, and one held in "
                    "--base-dtype's storage is not sharded yet: use --zero 2 (the adapters' gradients and states sharded), "
                    "or --zero 3 with the model in the --dtype (--dtype bf16, no --base-dtype; doc/lora.md)",
                    quant_name[s->base_format]);
    const char *whole = s->lora_init ? "--lora-init" : s->merge ? "--merge" : s->export_to ? "--export" : NULL;
    if (s->zero == 3 && whole)
        usage_error("--zero 3 with --lora holds a shard of the adapters on each rank, and %s reads or writes them "
                    "whole: use --zero 2 (the adapters whole on every rank, their gradients and states sharded)", whole);
    const char *no = s->fp32_grads ? "--fp32-grads (the adapters' gradients are fp32 already)"
                     : s->eval_only && s->export_to ? "--eval-only --export" : NULL;
    size_t e = s->export_to ? strlen(s->export_to) : 0;
    if (no && s->eval_only) usage_error("%s with --lora is not built yet: drop it (doc/lora.md says what --lora takes)", no);
    if (s->merge && !e)
        usage_error("--merge writes the merged model with --export: give --export FILE.bin (llm.c's model file) or "
                    "FILE.safetensors (a Hugging Face model, config.json beside it)");
    if (e && !s->merge && (e < 12 || strcmp(s->export_to + e - 12, ".safetensors")))
        usage_error("--lora --export writes the adapters as PEFT does, a safetensors file and adapter_config.json beside "
                    "it: give --export DIR/adapter_model.safetensors, or add --merge for the merged model (got '%s')", s->export_to);
    if (no) usage_error("%s with --lora is not built yet: drop it (doc/lora.md says what --lora takes)", no);
}

// --lora R, --lora-alpha, --lora-targets (core/lora.h): the maps named, each with a rank it can
// hold; and the flags LoRA does not take (yet), refused with what to do.
void parse_lora(Settings *s, const GPTConfig *c) {
    LoraConfig *a = &s->lora;
    s->base_format = QF_FP32, s->base_bits = 32;
    if (s->lora_init) lora_from_folder(s, c);
    if (!a->rank) {
        if (s->lora_targets_str || s->lora_alpha_given || s->base_dtype_str || s->merge || s->double_quant)
            usage_error("--%s goes with --lora R (the adapters' rank; it is what keeps the model frozen)",
                        s->lora_targets_str ? "lora-targets" : s->base_dtype_str ? "base-dtype" : s->merge ? "merge"
                        : s->double_quant ? "double-quant" : "lora-alpha");
        return;
    }
    parse_base_dtype(s);
    int first = lora_first_map(c), end = lora_map_end(c);
    char names[96] = "";
    for (int k = first, n = 0; k < end; k++) n += snprintf(names + n, sizeof names - n, "%s%s", k > first ? "," : "", lora_map_names[k]);
    a->targets = lora_all_maps(c);
    const char *t = s->lora_targets_str;
    if (t && strcmp(t, "all")) {
        a->targets = 0;
        for (const char *p = t; *p;) {
            size_t len = strcspn(p, ",");
            int found = -1;
            for (int k = first; k < end; k++)
                if (strlen(lora_map_names[k]) == len && !strncmp(p, lora_map_names[k], len)) found = k;
            if (found < 0)
                usage_error("--lora-targets: '%.*s' is not a linear map of %s; its maps are %s (or all)", (int)len, p,
                            is_llama(c) ? "a Llama block" : "a GPT-2 block", names);
            a->targets |= 1u << found;
            p += len + (p[len] == ',');
        }
        if (!a->targets) usage_error("--lora-targets names no map; a block's maps are %s (or all)", names);
    }
    for (int k = first; k < end; k++) {
        LoraMap mp = lora_map(c, k);
        int most = mp.in < mp.rows ? mp.in : mp.rows;
        if (lora_targets(a, k) && a->rank > most && s->lora_init)
            usage_error("--lora-init '%s' is an adapter of r %d, more than map %s of this model can hold (min(%d inputs, %d "
                        "outputs) = %d): it is for another model", s->lora_init, a->rank, lora_map_names[k], mp.in,
                        mp.rows, most);
        if (lora_targets(a, k) && a->rank > most)
            usage_error("--lora %d is above the rank map %s can have: min(%d inputs, %d outputs) = %d; use --lora 1..%d",
                        a->rank, lora_map_names[k], mp.in, mp.rows, most, most);
    }
    refuse_with_lora(s);
}

#endif
