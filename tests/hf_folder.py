#!/usr/bin/env python3
"""tests/hf_folder.py — an llm.c model file written again as a Hugging Face model folder, for the tests
of --init's safetensors reader (tests/e2e/safetensors.sh). Written apart from gptmem's C reader: the
names, layouts and permutations as Hugging Face's own code writes them (transformers' GPT2LMHeadModel and
LlamaForCausalLM, and convert_llama_weights_to_hf.py's permute of q and k), with numpy and the safetensors
package.

    tests/hf_folder.py MODEL.bin DIR [--dtype F32|F16|BF16] [--shards 2] [--prefix] [--lm-head]

--prefix: GPT-2's names under "transformer." (GPT2LMHeadModel's state dict); --lm-head: a tied model's head
written too (as some savers do); --shards N: the tensors split over N files with
model.safetensors.index.json. BF16 has no numpy dtype: those tensors go through the package as their raw
16-bit patterns (uint16), and the header's dtype is then set to BF16.
"""
import json
import os
import struct
import sys

try:
    import numpy as np
    import safetensors.numpy
except ImportError:
    sys.exit("SKIP numpy and safetensors (PyPI) are not installed (scripts/setup.sh)")


def llmc(path):
    """The model's config (Hugging Face's fields) and its tensors by Hugging Face's names."""
    with open(path, "rb") as f:
        h = struct.unpack("<256i", f.read(1024))
        body = f.read()
    w = np.frombuffer(body, np.float32) if h[1] == 3 else \
        (np.frombuffer(body, np.uint16).astype(np.uint32) << 16).view(np.float32)
    at = [0]

    def take(*shape):
        n = int(np.prod(shape))
        x = w[at[0]:at[0] + n].reshape(shape)
        at[0] += n
        return x

    out = {}
    if h[0] == 20240326:  # GPT-2: wte (Vp, C), wpe, then each kind for all layers
        maxT, V, L, H, C, Vp = h[2], h[3], h[4], h[5], h[6], h[7]
        cfg = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_layer": L, "n_head": H, "n_embd": C,
               "n_positions": maxT, "n_ctx": maxT, "vocab_size": V, "layer_norm_epsilon": 1e-5,
               "activation_function": "gelu_new"}
        out["wte.weight"] = take(Vp, C)[:V]
        out["wpe.weight"] = take(maxT, C)
        kinds = [("ln_1.weight", (C,), 0), ("ln_1.bias", (C,), 0), ("attn.c_attn.weight", (3 * C, C), 1),
                 ("attn.c_attn.bias", (3 * C,), 0), ("attn.c_proj.weight", (C, C), 1), ("attn.c_proj.bias", (C,), 0),
                 ("ln_2.weight", (C,), 0), ("ln_2.bias", (C,), 0), ("mlp.c_fc.weight", (4 * C, C), 1),
                 ("mlp.c_fc.bias", (4 * C,), 0), ("mlp.c_proj.weight", (C, 4 * C), 1), ("mlp.c_proj.bias", (C,), 0)]
        for name, shape, conv1d in kinds:
            x = take(L, *shape)
            for l in range(L):
                out[f"h.{l}.{name}"] = x[l].T if conv1d else x[l]  # Conv1D stores (in, out)
        out["ln_f.weight"], out["ln_f.bias"] = take(C), take(C)
        return cfg, out, True
    maxT, V, L, H, KVH, C = h[2], h[3], h[4], h[5], h[6], h[7]
    hs = C // H
    F = (len(w) - 2 * V * C - C - L * (2 * C + (H + 2 * KVH) * hs * C + C * C)) // (3 * L * C)
    cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "num_hidden_layers": L,
           "num_attention_heads": H, "num_key_value_heads": KVH, "hidden_size": C, "intermediate_size": F,
           "vocab_size": V, "max_position_embeddings": maxT, "rms_norm_eps": 1e-5, "rope_theta": float(h[11]),
           "hidden_act": "silu", "attention_bias": False, "mlp_bias": False,
           "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                            "original_max_position_embeddings": 8192} if h[12] else None}

    def permute(x, heads):  # convert_llama_weights_to_hf.py: Meta's interleaved pairs to Hugging Face's halves
        return x.reshape(heads, hs // 2, 2, C).transpose(0, 2, 1, 3).reshape(heads * hs, C)

    wte = take(V, C)
    out["model.embed_tokens.weight"] = wte
    ln1, attn, proj, ln2 = take(L, C), take(L, (H + 2 * KVH) * hs, C), take(L, C, C), take(L, C)
    up, gate, down = take(L, F, C), take(L, F, C), take(L, C, F)
    for l in range(L):
        p = f"model.layers.{l}."
        out[p + "input_layernorm.weight"] = ln1[l]
        out[p + "self_attn.q_proj.weight"] = permute(attn[l][:H * hs], H)
        out[p + "self_attn.k_proj.weight"] = permute(attn[l][H * hs:(H + KVH) * hs], KVH)
        out[p + "self_attn.v_proj.weight"] = attn[l][(H + KVH) * hs:]
        out[p + "self_attn.o_proj.weight"] = proj[l]
        out[p + "post_attention_layernorm.weight"] = ln2[l]
        out[p + "mlp.up_proj.weight"], out[p + "mlp.gate_proj.weight"] = up[l], gate[l]
        out[p + "mlp.down_proj.weight"] = down[l]
    out["model.norm.weight"] = take(C)
    head = take(V, C)
    tied = bool(np.array_equal(head, wte))
    if not tied:
        out["lm_head.weight"] = head
    cfg["tie_word_embeddings"] = tied
    return cfg, out, tied


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    dtype = argv[argv.index("--dtype") + 1] if "--dtype" in argv else "F32"
    shards = int(argv[argv.index("--shards") + 1]) if "--shards" in argv else 1
    args = [a for a in args if a not in (dtype, str(shards))]
    src, out = args[0], args[1]
    cfg, tensors, tied = llmc(src)
    if "--prefix" in argv and cfg["model_type"] == "gpt2":
        tensors = {"transformer." + k: v for k, v in tensors.items()}
    if "--lm-head" in argv and tied:
        tensors["lm_head.weight"] = tensors.get("model.embed_tokens.weight", tensors.get("wte.weight"))
    if cfg["model_type"] == "gpt2":  # the causal-mask buffers GPT-2's state dict carries: not weights
        pre = "transformer." if "--prefix" in argv else ""
        for l in range(cfg["n_layer"]):
            tensors[f"{pre}h.{l}.attn.bias"] = np.tril(np.ones((1, 1, 4, 4), np.float32))
    os.makedirs(out, exist_ok=True)
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=2)
    names = sorted(tensors)
    files = ["model.safetensors"] if shards == 1 else \
        [f"model-{k + 1:05d}-of-{shards:05d}.safetensors" for k in range(shards)]
    weight_map = {}
    for k, fname in enumerate(files):
        part = {}
        for n in names[k::shards]:
            x = np.ascontiguousarray(tensors[n], np.float32)
            if "attn.bias" in n or dtype == "F32":
                part[n] = x
            elif dtype == "F16":
                part[n] = x.astype(np.float16)
            else:  # BF16: the top 16 bits of each float, rounded to nearest even
                u = x.view(np.uint32)
                part[n] = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
            weight_map[n] = fname
        path = os.path.join(out, fname)
        safetensors.numpy.save_file(part, path, metadata={"format": "pt"})
        if dtype == "BF16":  # the package wrote U16: the header says BF16 instead (the same 2 bytes an element)
            with open(path, "rb") as f:
                n = struct.unpack("<Q", f.read(8))[0]
                header, data = f.read(n).replace(b'"U16"', b'"BF16"'), f.read()
            header += b" " * (-len(header) % 8)  # (the data's offsets count from the header's end)
            with open(path, "wb") as f:
                f.write(struct.pack("<Q", len(header)) + header + data)
    if shards > 1:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map},
                  open(os.path.join(out, "model.safetensors.index.json"), "w"))
    print(f"{out}: {cfg['model_type']}, {len(tensors)} tensors in {len(files)} file(s), {dtype}, tied {tied}")


if __name__ == "__main__":
    main(sys.argv[1:])
