#!/usr/bin/env python3
"""tests/lora_merge.py — --lora --merge's model against PEFT's rule, written apart from gptmem (numpy):
every targeted weight is the base's plus (lora_alpha / r) B A (transposed for GPT-2's Conv1D, whose
adapter_config.json says fan_in_fan_out), read from the adapter folder PEFT would load; every other tensor
is the base's, bit for bit. Fails too when the adapters changed nothing (a merge that did nothing passes
no test).

    tests/lora_merge.py BASE.safetensors MERGED.safetensors ADAPTER_DIR
"""
import json
import os
import sys

try:
    import numpy as np
    import safetensors.numpy as st
except ImportError:
    sys.exit("SKIP numpy and safetensors (PyPI) are not installed (scripts/setup.sh)")

base, merged = st.load_file(sys.argv[1]), st.load_file(sys.argv[2])
adapters = st.load_file(os.path.join(sys.argv[3], "adapter_model.safetensors"))
config = json.load(open(os.path.join(sys.argv[3], "adapter_config.json")))
scale = config["lora_alpha"] / config["r"]
worst = largest = 0.0
maps = 0
for name, w in merged.items():
    module = name[:-len(".weight")] if name.endswith(".weight") else None
    # PEFT's names: the model's under base_model.model. (GPT-2's transformer. prefix, which --export leaves out)
    keys = [p + module for p in ("base_model.model.", "base_model.model.transformer.")] if module else []
    key = next((k for k in keys if k + ".lora_A.weight" in adapters), None)
    if key is None:
        if not np.array_equal(w, base[name]):
            sys.exit(f"{name}: no adapter of it, and not the base's bits")
        continue
    delta = adapters[key + ".lora_B.weight"].astype(np.float64) @ adapters[key + ".lora_A.weight"].astype(np.float64)
    if config.get("fan_in_fan_out"):
        delta = delta.T
    want = base[name].astype(np.float64) + scale * delta
    worst, largest, maps = max(worst, float(np.abs(w - want).max())), max(largest, float(np.abs(scale * delta).max())), maps + 1
if not maps or worst > 1e-6 or largest < 1e-4:
    sys.exit(f"{maps} maps merged; the worst weight {worst:.2e} off base + s B A; the largest change {largest:.2e}")
print(f"{maps} maps: each weight within {worst:.0e} of base + (alpha/r) B A (changes up to {largest:.1e}), the rest the base's bits")
