#!/usr/bin/env python3
"""tests/hostile_folder.py — a downloaded model folder is hostile input: each defect of the round-7 audit
(E2's input half, E3, E6, E7, E8, E11, E12) made a folder, read by
./train --init (or --config), which must refuse it in one line naming the problem (or, where the folder is a
valid model, load it as transformers would).

Usage: tests/hostile_folder.py GPT2_DIR LLAMA_DIR TMP -- TRAIN_ARGS...

GPT2_DIR and LLAMA_DIR are Hugging Face folders ./train --export wrote (model.safetensors, config.json; the
Llama's head tied). Prints a PASS or FAIL line a case; exits 1 if any failed.
"""
import json
import os
import resource
import shutil
import struct
import subprocess
import sys
import time

gpt2, llama, tmp = sys.argv[1:4]
args = sys.argv[sys.argv.index("--") + 1:]
failed = 0


def header_of(path):
    """A safetensors file's header (dict, in file order) and its data bytes."""
    raw = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", raw)
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def safetensors(path, header_text, data):
    """A safetensors file of this header's text (str or bytes) and data."""
    h = header_text.encode() if isinstance(header_text, str) else header_text
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def folder(name, like=gpt2, config=None, files=None):
    """A copy of the folder `like`, with config.json replaced by `config` (dict or text) and files (name: bytes)."""
    d = os.path.join(tmp, name)
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(like, d)
    if config is not None:
        open(os.path.join(d, "config.json"), "w").write(config if isinstance(config, str) else json.dumps(config))
    for f, data in (files or {}).items():
        open(os.path.join(d, f), "wb").write(data)
    return d


def run(argv, timeout=60):
    """./train's exit code, stderr, seconds and peak resident MiB (of this child alone: /usr/bin/time)."""
    start = time.time()
    r = subprocess.run(["/usr/bin/time", "-f", "maxrss %M", "./train", *args, *argv], capture_output=True, text=True,
                       errors="replace", timeout=timeout)
    rss = [int(l.split()[1]) for l in r.stderr.splitlines() if l.startswith("maxrss ")]
    err = "\n".join(l for l in r.stderr.splitlines() if not l.startswith("maxrss "))
    return r.returncode, err, time.time() - start, (rss[-1] / 1024 if rss else 0)


def expect(what, argv, code, text, seconds=None, mib=None, absent=None):
    global failed
    try:
        rc, err, took, rss = run(argv)
    except subprocess.TimeoutExpired:
        print(f"FAIL {what}: no end in 60 s (a hang)")
        failed += 1
        return
    bad = []
    if rc != code:
        bad.append(f"exit {rc} (want {code})")
    if text and text not in err:
        bad.append(f"no '{text}'")
    if "Sanitizer" in err or "runtime error" in err:
        bad.append("a sanitizer report")
    if seconds and took > seconds:
        bad.append(f"{took:.1f} s (want under {seconds})")
    if mib and rss > mib:
        bad.append(f"{rss:.0f} MiB (want under {mib})")
    if absent and absent in err:
        bad.append(f"'{absent}' printed")
    limits = (f", {took:.2f} s" if seconds else "") + (f", {rss:.0f} MiB" if mib else "")
    if bad:
        failed += 1
        print(f"FAIL {what}: {'; '.join(bad)}: {err.strip()[-300:]}")
    else:
        print(f"PASS {what}: exit {code}{limits}, '{text}'" if text else f"PASS {what}: exit {code}{limits}")


g_head, g_data = header_of(os.path.join(gpt2, "model.safetensors"))
g_cfg = json.load(open(os.path.join(gpt2, "config.json")))
g_text = json.dumps(g_head)


def edited(name, edit):
    """A GPT-2 folder whose header is g_head changed by edit(header) (returning a header, or its text)."""
    h = json.loads(g_text)
    h = edit(h) or h
    d = folder(name)
    safetensors(os.path.join(d, "model.safetensors"), h if isinstance(h, (str, bytes)) else json.dumps(h), g_data)
    return d


# E2 (the input half): a fifo where the index goes is refused, never opened
d = folder("fifo_index")
os.mkfifo(os.path.join(d, "model.safetensors.index.json"))
expect("E2: a fifo model.safetensors.index.json", ["--init", d], 1, "fifo, not a regular file", seconds=20)

# E6: a shard named outside the folder is refused by name, and no byte of that file is printed
os.makedirs(os.path.join(tmp, "outside"), exist_ok=True)
shutil.copy(os.path.join(gpt2, "model.safetensors"), os.path.join(tmp, "outside", "b.safetensors"))
for case, shard in [("a sibling folder's shard", "../outside/b.safetensors"), ("/etc/passwd", "../../../../../../etc/passwd"),
                    ("an absolute path", "/etc/passwd"), ("'..'", ".."), ("an empty name", "")]:
    index = {"metadata": {}, "weight_map": {k: shard for k in g_head if k != "__metadata__"}}
    d = folder("ix_" + str(abs(hash(case))), files={"model.safetensors.index.json": json.dumps(index).encode()})
    expect(f"E6: an index naming {case}", ["--init", d], 1, "a shard is a file name in the model's folder", absent="root:")
# ... while a symlink inside the folder (Hugging Face's cache: snapshots link to blobs) is followed
d = os.path.join(tmp, "cache", "snapshots", "abc")
os.makedirs(os.path.join(tmp, "cache", "blobs"), exist_ok=True)
os.makedirs(d, exist_ok=True)
for f in ("model.safetensors", "config.json"):
    shutil.copy(os.path.join(gpt2, f), os.path.join(tmp, "cache", "blobs", f + ".blob"))
    if not os.path.lexists(os.path.join(d, f)):
        os.symlink(os.path.join("..", "..", "blobs", f + ".blob"), os.path.join(d, f))
expect("E6: a Hugging Face cache folder (symlinks to blobs) loads", ["--init", d], 0, "")

# E7: memory and time are bounded: a 100 MB header, a 60 MB index refused at once; many entries read in linear time
big = os.path.join(tmp, "big")
os.makedirs(big, exist_ok=True)
shutil.copy(os.path.join(gpt2, "config.json"), big)
with open(os.path.join(big, "model.safetensors"), "wb") as f:
    n = 100 << 20
    f.write(struct.pack("<Q", n) + b"{" + b'"0000000":0,' * ((n - 2) // 12) + b" " * ((n - 2) % 12) + b"}")
expect("E7: a 100 MiB header", ["--init", big], 1, "is not a safetensors file", seconds=1, mib=200)
d = folder("big_index", files={"model.safetensors.index.json": b'{"weight_map": {' + b'"a":"b",' * (60 << 17) + b'"a":"b"}}'})
expect("E7: a 60 MiB index", ["--init", d], 1, "over the 32 MiB a model's index needs", seconds=1, mib=200)
many = {f"{i:07d}.attn.bias": {"dtype": "BOOL", "shape": [0], "data_offsets": [0, 0]} for i in range(17476)}
expect("E7: a header of 17,476 entries (the audit's 1 MiB, 162 s before)",
       ["--init", edited("many", lambda h: {**many, **h})], 0, "", seconds=10)
d = edited("max_fields", lambda h: "{" + ",".join(f'"{i}":0' for i in range((1 << 19) + 1)) + "}")
expect("E7: a header of over 2^19 fields", ["--init", d], 1, "over 524288 fields", seconds=5, mib=200)

# E8: a header that ends inside a literal or a number is refused, read within its bytes (ASan watches under make asan)
for case, text in [("inside true", '{"a":tr'), ("inside a number", '{"a":12'), ("inside null", '{"a":nu')]:
    expect(f"E8: a header ending {case}", ["--init", edited("e8" + case[-4:], lambda h: text)], 1, "is not JSON gptmem can read")

# E11: the messages name the problem
def tensor(key, field, value):
    def edit(h):
        h[key][field] = value
    return edit
first = next(k for k in g_head if k != "__metadata__")
b, e = g_head[first]["data_offsets"]
expect("E11: reversed data_offsets", ["--init", edited("rev", tensor(first, "data_offsets", [e, b]))], 1,
       "data_offsets are not [begin, end)")
expect("E11: data_offsets of 3 numbers", ["--init", edited("off3", tensor(first, "data_offsets", [b, e, e]))], 1,
       "data_offsets are not [begin, end)")
expect("E11: a shape of 5 dimensions", ["--init", edited("dim5", tensor(first, "shape", [1, 1, 1, 1, (e - b) // 4]))], 1,
       "has 5 dimensions; gptmem reads up to 4")
expect("E11: a dtype that is no string", ["--init", edited("dtype", tensor(first, "dtype", 7))], 1, "has no dtype string")
two = g_text.replace("{", '{"%s": %s, ' % (first, json.dumps(g_head[first])), 1)
expect("E11, E12: a tensor named twice in a header", ["--init", edited("twice", lambda h: two)], 1, f'the key "{first}" twice')
index = {"weight_map": {k: "model.safetensors" for k in g_head if k != "__metadata__"}}
index["weight_map"]["zzz.extra"] = "b.safetensors"
d = folder("twice_shards", files={"model.safetensors.index.json": json.dumps(index).encode()})
shutil.copy(os.path.join(gpt2, "model.safetensors"), os.path.join(d, "b.safetensors"))
expect("E11: a tensor in two shards", ["--init", d], 1, f"has tensor {sorted(k for k in g_head if k != '__metadata__')[0]} twice")

d = folder("big_weight")
safetensors(os.path.join(d, "model.safetensors"), g_text, struct.pack("<f", 3e38) + g_data[4:])
expect("E11: a weight of 3e38: the file named, not the learning rate", ["--init", d], 1, "has a weight of 3e+38")

# E12: lenient JSON refused by position, as Python's json and the safetensors package refuse it or read it otherwise
for case, cfg in [("a key twice", json.dumps(g_cfg)[:-1] + ', "n_layer": 2}'), ("a hex number", json.dumps(g_cfg).replace(
        '"n_layer": %d' % g_cfg["n_layer"], '"n_layer": 0x1')), ("NaN", json.dumps(g_cfg)[:-1] + ', "x": NaN}'),
        ("Infinity", json.dumps(g_cfg)[:-1] + ', "x": -Infinity}'), ("text after the object", json.dumps(g_cfg) + " x"),
        ("a \\u0000 in a key", json.dumps(g_cfg)[:-1] + ', "a\\u0000b": 1}'), ("a leading +", json.dumps(g_cfg).replace(
        '"n_layer": ', '"n_layer": +'))]:
    expect(f"E12: config.json with {case}", ["--init", folder("cf" + str(abs(hash(case))), config=cfg)], 1, "at byte")
names = [k for k in g_head if k != "__metadata__"]
second = sorted(names, key=lambda k: g_head[k]["data_offsets"][0])[1]
expect("E12: overlapping data_offsets", ["--init", edited("overlap", tensor(second, "data_offsets",
       [g_head[second]["data_offsets"][0] - 4, g_head[second]["data_offsets"][1] - 4]))], 1, "overlapping")
expect("E12: a fractional shape", ["--init", edited("frac", tensor(first, "shape", [(e - b) / 4 + 0.5]))], 1,
       "no shape of whole numbers")

# E3: a Llama config.json without tie_word_embeddings is untied, as transformers builds it
l_cfg = json.load(open(os.path.join(llama, "config.json")))
assert l_cfg.get("tie_word_embeddings") is True
cfg = dict(l_cfg)
del cfg["tie_word_embeddings"]
expect("E3: a Llama config without tie_word_embeddings (untied, as LlamaConfig) and no lm_head",
       ["--init", folder("untied_nohead", like=llama, config=cfg)], 1, "has no tensor lm_head.weight")
dry = subprocess.run(["./train", "--config", os.path.join(folder("untied_cfg", like=llama, config=cfg), "config.json"),
                      "--dry-run"], capture_output=True, text=True)
if dry.returncode == 0 and "untied head" in dry.stdout:
    print("PASS E3: --config of a Llama without tie_word_embeddings: an untied head (LlamaConfig's default)")
else:
    failed += 1
    print(f"FAIL E3: --config without tie_word_embeddings: exit {dry.returncode}, {dry.stderr.strip()[-200:]}")
cfg = dict(l_cfg, rms_norm_eps=None)
del cfg["rms_norm_eps"]
expect("E3: a Llama config without rms_norm_eps: LlamaConfig's 1e-6, named", ["--init", folder("eps", like=llama, config=cfg)],
       1, "has no \"rms_norm_eps\" (LlamaConfig's default then: 1e-06)")
sys.exit(1 if failed else 0)
