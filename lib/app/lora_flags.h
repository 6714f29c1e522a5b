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
#include "io/quant.h"

// --lora R, --lora-alpha, --lora-targets (core/lora.h): the maps named, each with a rank it can
// hold; and the flags LoRA does not take yet, refused with what to do.
void parse_lora(Settings *s, const GPTConfig *c) {
    LoraConfig *a = &s->lora;
    s->base_format = QF_FP32, s->base_bits = 32;
    if (!a->rank) {
        if (s->lora_targets_str || a->alpha != LORA_ALPHA_DEFAULT || s->base_dtype_str)
            usage_error("--%s goes with --lora R (the adapters' rank; it is what keeps the model frozen)",
                        s->lora_targets_str ? "lora-targets" : s->base_dtype_str ? "base-dtype" : "lora-alpha");
        return;
    }
    if (s->base_dtype_str) {
        s->base_format = -1;
        for (int f = 0; f < QF_N; f++)
            if (f != QF_INT4 && !strcmp(s->base_dtype_str, quant_name[f])) s->base_format = f;
        if (s->base_format < 0) usage_error("--base-dtype must be fp32, bf16, fp16, int8 or nf4 (got '%s')", s->base_dtype_str);
        s->base_bits = quant_bits[s->base_format];
    }
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
        if (lora_targets(a, k) && a->rank > most)
            usage_error("--lora %d is above the rank map %s can have: min(%d inputs, %d outputs) = %d; use --lora 1..%d",
                        a->rank, lora_map_names[k], mp.in, mp.rows, most, most);
    }
    const char *no = s->cuda ? "--device cuda" : s->zero || s->ranks > 1 ? "--zero and --ranks" : s->fp32_grads ?
                     "--fp32-grads (the adapters' gradients are fp32 already)" : s->offload ? "--offload" : s->adam_bits != 32 ? "--adam-bits 8" :
                     s->save ? "--save" : s->resume ? "--resume" : s->export_to ? "--export" : s->eval_only ?
                     "--eval-only" : s->fit ? "--fit" : s->infer ? "--infer" : s->estimators ? "--estimators" : NULL;
    if (no)
        usage_error("--lora trains on the CPU in fp32 on one rank for now; %s with --lora is not built yet: drop it "
                    "(doc/lora.md says what --lora takes)", no);
}

#endif
