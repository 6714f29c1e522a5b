#!/usr/bin/env python3
"""tests/fuzz_files.py — every file ./train reads, damaged: refused in one line or read as valid, never a
crash, a hang, a sanitizer report, or a damaged state trained on.

Usage: tests/fuzz_files.py KIND FILE CASES SEED [--seconds S] -- TRAIN_ARGS...
       tests/fuzz_files.py KIND FILE CASES SEED [--seconds S] -- COMMAND... {} ... [{out}]

KIND is the reader: state (--resume), tokens (--data), model (--init: llm.c's GPT-2 or Llama 3 file),
tokenizer (--tokenizer), hostfile (--hostfile, read by mpirun: its errors must reach the user), safetensors
(--init FILE.safetensors, beside a copy of FILE's config.json), config (--config: a config.json), index
(--init of FILE's folder, FILE its model.safetensors.index.json), json (a JSON file a script reads:
tokenizer.json), gguf (a GGUF file gguf2llmc.py reads), adapter and adapter_config (--lora-init of FILE's folder,
PEFT's adapter_model.safetensors or its adapter_config.json damaged, the other file as it was), adapter_fields
(adapter_config.json still JSON, 1 to 3 of the fields PEFT acts on set to other values: use_dora, use_rslora,
alpha_pattern, rank_pattern, layers_to_transform, modules_to_save, bias, target_modules, r, lora_alpha; a run
that takes it must be one PEFT would run as the same plain LoRA, never silently another adapter).
Makes CASES damaged copies of FILE (seeded, so a
failure can be replayed), each with 1 to 3 of: cut off at a random length, random bytes appended, one byte
changed, a header word set to 0, -1, 1, a power of two, INT_MAX, INT_MIN or another reader's magic; and,
for the JSON a file holds (safetensors' header, the index, config.json, tokenizer.json), JSON's own
damage: a span replaced by a number that is too large, negative or fractional, NaN, hex, a bracket, a
quote, an escape, a \u0000, or deleted, or another span copied in (a key twice), the header's length then
made to fit. Runs `./train TRAIN_ARGS FLAG COPY` on each (or COMMAND, {} the copy and {out} a folder that
does not exist yet), 4 at a time, at most S seconds of starting new cases, and expects: exit 0 (a damage
the reader cannot see: a weight, a token below the vocabulary, a header word it does not use), or exit 1
or 2 with a line starting "error:" (the hostfile: any message); no sanitizer report, no Python traceback,
no signal, no run past 60 s; a damaged state always refused (its checksum); a COMMAND that failed wrote
nothing ({out} not made). Prints one line a failing case and a summary; exits 1 if any failed. Under
`make asan` ./train is the sanitized build.
"""
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

FLAG = {"state": "--resume", "tokens": "--data", "model": "--init", "tokenizer": "--tokenizer", "hostfile": "--hostfile",
        "safetensors": "--init", "config": "--config", "index": "--init", "json": None, "gguf": None,
        "adapter": "--lora-init", "adapter_config": "--lora-init", "adapter_fields": "--lora-init"}
# the readers of a folder: the file of it that is damaged (a copy of the folder, the others linked)
IN_FOLDER = {"index": "model.safetensors.index.json", "adapter": "adapter_model.safetensors",
             "adapter_config": "adapter_config.json", "adapter_fields": "adapter_config.json"}
# adapter_fields: the values a field is set to, and which of them leave PEFT's adapter the plain LoRA it was
MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "gate_proj", "down_proj", "c_attn", "c_proj", "c_fc"]
FIELD_VALUES = {
    "use_dora": [True, False, None, "true", "false", 1, 0, "LORA", {"a": 1}, "NaN", []],
    "use_rslora": [True, False, None, "true", 0, 1, [1]],
    "alpha_pattern": [{}, None, {"q_proj": 64}, {"c_attn": 2, "v_proj": 64}, [], "x"],
    "rank_pattern": [{}, None, {"q_proj": 4}, {"c_attn": 1}],
    "layers_to_transform": [None, [0], 0, [], [0, 1]],
    "modules_to_save": [None, [], ["lm_head"], "lm_head"],
    "bias": ["none", None, "all", "lora_only", 1],
    "target_modules": ["all-linear", ".*proj", ["lm_head"], ["q_proj"], ["c_attn"], []],
    "r": [1, 2, 4, 64, 0, -1, 2.5, "2", None],
    "lora_alpha": [1, 8, 64, 1e-3, 0, -1, "8", None],
}


def plain_lora(field, value, original):
    """Does PEFT read adapter_config.json's `field` = value as the plain LoRA (same maps, one r, one alpha) the
    tensors hold? (r and lora_alpha: any value the run takes is the adapter's own, so always.)"""
    if field in ("use_dora", "use_rslora", "alpha_pattern", "rank_pattern", "modules_to_save"):
        return not value  # (PEFT asks `if config.use_dora:`: Python's truth)
    if field == "layers_to_transform":
        return value is None  # ([]: no layer)
    if field == "bias":
        return value == "none"
    if field == "target_modules":
        def maps(names):
            return {m for m in MODULES for n in names if m == n or m.endswith("." + n)}
        return isinstance(value, str) or (isinstance(value, list) and maps(value) == maps(original))
    return True


def damage_fields(data, rng):
    """adapter_fields: data (an adapter_config.json) with 1 to 3 fields set to values of FIELD_VALUES; the copy,
    what was done, and whether PEFT reads it as the same plain LoRA."""
    import json
    config = json.loads(data)
    what, plain = [], True
    for field in rng.sample(sorted(FIELD_VALUES), rng.randrange(1, 4)):
        value = rng.choice(FIELD_VALUES[field])
        plain = plain and plain_lora(field, value, config.get("target_modules") or [])
        config[field] = value
        what.append(f"{field} = {json.dumps(value)}")
    return json.dumps(config).encode(), "; ".join(what), plain
SUFFIX = {"safetensors": ".safetensors", "config": ".json", "json": ".json", "gguf": ".gguf"}  # (a safetensors copy is
# read beside FILE's config.json)
JSONISH = [b"9999999999999999999999", b"-1", b"1e308", b"0.5", b"NaN", b"-Infinity", b"0x1f", b"[", b"{", b"]", b"}",
           b'"', b"\\", b'"\\u0000"', b",", b":", b"null", b"tru", b'"a":1,', b" " * 3]
MAGICS = [20240520, 20240801, 20240326, 20240803, 20240328, 0x4D4D5450]  # shards, models, tokenizer, other


def damage_once(out, rng):
    """Damage bytearray out in place one way; what was done."""
    kind = rng.choice(["truncate", "append", "byte", "word", "word", "word"])
    if kind == "truncate" and len(out) > 1:
        n = rng.randrange(0, len(out))
        del out[n:]
        return f"cut to {n} bytes"
    if kind == "append":
        extra = bytes(rng.randrange(256) for _ in range(rng.choice([1, 2, 4, 1000])))
        out += extra
        return f"{len(extra)} bytes appended"
    if kind == "byte" and out:
        i = rng.randrange(len(out))
        out[i] ^= rng.randrange(1, 256)
        return f"byte {i} changed"
    words = min(len(out), 256 * 4) // 4 or 1  # a word of the header (all llm.c files' are 256 int32)
    i = 4 * rng.randrange(min(words, 40))
    v = rng.choice([0, -1, 1, 2 ** rng.randrange(31), 2 ** 31 - 1, -2 ** 31, rng.choice(MAGICS)])
    if len(out) < i + 4:
        out += bytes(i + 4 - len(out))
    out[i:i + 4] = struct.pack("<i", v)
    return f"word {i // 4} set to {v}"


def damage_json(out, rng):
    """Damage JSON text (a bytearray) in place one of JSON's own ways; what was done."""
    i = rng.randrange(len(out) + 1)
    kind = rng.choice(["token", "token", "token", "delete", "copy"])
    if kind == "token":
        t, n = rng.choice(JSONISH), rng.randrange(0, 4)
        out[i:i + n] = t
        return f"bytes {i}..{i + n} set to {t[:12]!r}"
    if kind == "delete":
        n = rng.randrange(1, 24)
        del out[i:i + n]
        return f"bytes {i}..{i + n} deleted"
    j, n = rng.randrange(len(out) + 1), rng.randrange(1, 60)
    out[i:i] = out[j:j + n]
    return f"bytes {j}..{j + n} copied to {i}"


def damage(data, rng, kind):
    """A copy of data damaged 1 to 3 ways (drawn again if the damage changed nothing), and what was done."""
    while kind == "adapter_fields":
        out, what, plain = damage_fields(data, rng)
        if out != data:
            return out, what + ("" if plain else " (not the plain LoRA: must be refused)")
    while True:
        header = kind in ("safetensors", "adapter")
        if kind in ("config", "index", "json", "adapter_config") or (header and rng.random() < 0.7):
            head = 8 + struct.unpack_from("<Q", data)[0] if header else 0
            text = bytearray(data[8:head] if head else data)
            what = [damage_json(text, rng) for _ in range(rng.randrange(1, 4))]
            out = bytearray(struct.pack("<Q", len(text)) + text + data[head:] if head else text)
            if head and rng.random() < 0.2:
                out[:8] = data[:8]  # (the length left as it was: past or short of the new header)
                what.append("the length word kept")
        else:
            out = bytearray(data)
            what = [damage_once(out, rng) for _ in range(rng.randrange(1, 4))]
        if out != data:
            return bytes(out), "; ".join(what)


def check(kind, case, copy, what, tmp, train_args, origin):
    """Run one damaged copy; a line describing what went wrong, or None."""
    path = os.path.join(tmp, f"damaged{case}{SUFFIX.get(kind, '')}")
    out = os.path.join(tmp, f"out{case}")
    if kind in IN_FOLDER:  # a copy of the folder, one of its files damaged
        os.makedirs(path)
        for f in os.listdir(origin):
            if f != IN_FOLDER[kind]:
                os.symlink(os.path.join(origin, f), os.path.join(path, f))
        with open(os.path.join(path, IN_FOLDER[kind]), "wb") as f:
            f.write(copy)
    else:
        with open(path, "wb") as f:
            f.write(copy)
    command = "{}" in train_args
    argv = [a.replace("{out}", out).replace("{}", path) for a in train_args] if command else \
        ["./train", *train_args, FLAG[kind], path]
    try:
        run = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=60)
    except subprocess.TimeoutExpired:
        return f"  case {case} ({what}): no end in 60 s (a hang)"
    finally:
        shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    problems, err = [], run.stderr
    if run.returncode not in (0, 1, 2):
        problems.append(f"exit {run.returncode}")
    if run.returncode != 0 and kind != "hostfile" and "error:" not in err:
        problems.append("no error line")
    if run.returncode != 0 and kind == "hostfile" and not err.strip():
        problems.append("nothing on stderr")
    if "Sanitizer" in err or "runtime error" in err:
        problems.append("sanitizer report")
    if "Traceback" in err or "panicked" in err:
        problems.append("a traceback")
    if kind == "state" and (run.returncode != 1 or "resumed from" in run.stdout):
        problems.append("a damaged state was not refused")
    if kind == "adapter_fields" and "must be refused" in what and run.returncode == 0:
        problems.append("taken as plain LoRA where PEFT runs another adapter")
    if command and run.returncode != 0 and os.path.exists(out):
        problems.append("it failed and wrote " + out)
    if os.path.isdir(out):
        shutil.rmtree(out)
    return f"  case {case} ({what}): {', '.join(problems)}: {err.strip()[-300:]}" if problems else None


def main():
    args = sys.argv[1:]
    if "--" not in args or len(args) < 4 or args[0] not in FLAG:
        sys.exit(__doc__)
    split = args.index("--")
    kind, path, cases, seed = args[0], args[1], int(args[2]), int(args[3])
    seconds = float(args[args.index("--seconds") + 1]) if "--seconds" in args[:split] else 1e9
    train_args = args[split + 1:]
    data = open(path, "rb").read()
    rng = random.Random(seed)
    damaged = [damage(data, rng, kind) for _ in range(cases)]  # made in order: the seed fixes every case
    start = time.time()

    def one(c):
        if time.time() - start > seconds:
            return "skipped"
        return check(kind, c, damaged[c][0], damaged[c][1], tmp, train_args, os.path.dirname(os.path.abspath(path)))

    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(max_workers=4) as pool:
        if kind == "safetensors":
            shutil.copy(os.path.join(os.path.dirname(os.path.abspath(path)), "config.json"), tmp)
        results = list(pool.map(one, range(cases)))  # 4 at a time: runs wait on files and MPI's start
    ran = [r for r in results if r != "skipped"]
    failures = [r for r in ran if r]
    for line in failures:
        print(line)
    print(f"fuzz {kind}: {len(ran)} damaged files of {os.path.basename(path)} (seed {seed}), "
          f"{len(ran) - len(failures)} refused clearly or read as valid, {len(failures)} not")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
