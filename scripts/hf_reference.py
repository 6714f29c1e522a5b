#!/usr/bin/env python3
"""A Hugging Face model folder's loss by Hugging Face's own model classes (transformers' LlamaForCausalLM or
GPT2LMHeadModel on PyTorch), nothing of gptmem's but the files: the check that --export FILE.safetensors
writes a model Hugging Face loads, and of gptmem's forward on a real model.

    python3 scripts/hf_reference.py DIR TOKENS.bin T

The mean cross-entropy of the first T tokens of the llm.c token file predicting the next (the first batch
gptmem evaluates with --val-data TOKENS.bin --batch 1 --seq-len T), in float32, printed as "hf loss X".
Needs torch and transformers, which make test does not install (a PyTorch download is heavy): Debian's
python3-torch with transformers 4.40 from PyPI in a venv over the system's packages serves, e.g.
    apt-get install python3-torch && /usr/bin/python3 -m venv --system-site-packages /tmp/hf &&
    /tmp/hf/bin/pip install transformers==4.40.2 && /tmp/hf/bin/python3 scripts/hf_reference.py ...
"""
import os
import struct
import sys

# (scripts/ holds a tokenize.py, which would shadow the standard library's, which torch imports)
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]
try:
    import numpy as np
    import torch
    import transformers
except ImportError as e:
    sys.exit(f"error: scripts/hf_reference.py needs torch and transformers ({e}); see its docstring")


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__.strip())
    folder, tokens, T = argv[0], argv[1], int(argv[2])
    with open(tokens, "rb") as f:
        h = struct.unpack("<256i", f.read(1024))
        width = 2 if h[1] == 1 else 4
        toks = np.frombuffer(f.read((T + 1) * width), np.uint16 if width == 2 else np.uint32).astype(np.int64)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32).eval()
    with torch.no_grad():
        logits = model(torch.tensor(toks[None, :T])).logits[0].double()
    loss = torch.nn.functional.cross_entropy(logits, torch.tensor(toks[1:T + 1])).item()
    print(f"hf loss {loss:.6f} ({type(model).__name__}, transformers {transformers.__version__}, torch "
          f"{torch.__version__}; the first {T} tokens of {tokens} predicting the next)")


if __name__ == "__main__":
    main(sys.argv[1:])
