#!/usr/bin/env python3
"""LoRA by Hugging Face's PEFT on PyTorch, nothing of gptmem's but the files: the check that gptmem's --lora trains
the adapters PEFT trains, and that the two read each other's adapter folders (tests/e2e/peft.sh).

    python3 scripts/peft_reference.py init BASE OUT R ALPHA TARGETS SEED
        PEFT's own adapters for the model folder BASE (a Hugging Face model: gptmem's --export FILE.safetensors
        writes one), LoraConfig(r=R, lora_alpha=ALPHA, target_modules=TARGETS (comma-separated module names),
        init_lora_weights=False: B drawn too, not zeros, so that the adapters' path carries signal from the
        first step), torch.manual_seed(SEED); written by save_pretrained into OUT.
    python3 scripts/peft_reference.py train BASE ADAPTERS TEXT B T STEPS LR WD CLIP OUT
        PeftModel.from_pretrained(BASE, ADAPTERS, is_trainable=True), then STEPS steps of torch.optim.AdamW
        (lr LR, betas 0.9 0.95, eps 1e-8, weight_decay WD on every adapter) after clip_grad_norm_(CLIP) on the
        mean cross-entropy, in float32; the batches are gptmem's --in-order ones on a text file (a byte a
        token): B windows of T + 1 bytes a step starting T apart. Prints "step K loss X" (the loss before the
        step's update) and the loss after the last as "step STEPS loss X"; the adapters into OUT, and beside them
        which values had a gradient under SMALL_GRAD at a step (small_grads.safetensors, for compare).
    python3 scripts/peft_reference.py compare DIR1 DIR2
        The two folders' adapter_model.safetensors value by value: the largest difference, apart for the values
        DIR2's small_grads.safetensors names (AdamW's steps there are float32's noise: SMALL_GRAD below).

Needs torch, transformers and peft, which make test does not install (a PyTorch download is heavy; the test
says SKIP without them). What served (2026-11-29): Debian's python3-torch under a venv over the system's
packages, with transformers 4.40.2 and peft 0.10.0 from PyPI (pip then brings a PyTorch of its own, several GB):
    apt-get install python3-torch && /usr/bin/python3 -m venv --system-site-packages /tmp/hf &&
    /tmp/hf/bin/pip install transformers==4.40.2 peft==0.10.0 && GPTMEM_PEFT_PYTHON=/tmp/hf/bin/python3 ...
"""
import os
import sys

# (scripts/ holds a tokenize.py, which would shadow the standard library's, which torch imports)
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]
# everything is read from the folders named: Hugging Face's hub is never asked
os.environ["HF_HUB_OFFLINE"] = os.environ["TRANSFORMERS_OFFLINE"] = "1"
try:
    import torch
    import transformers
    import peft
    from safetensors.torch import load_file, save_file
except ImportError as e:
    sys.exit(f"error: scripts/peft_reference.py needs torch, transformers and peft ({e}); see its docstring")


def base_model(folder):
    torch.use_deterministic_algorithms(True)
    return transformers.AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32)


def init(base, out, r, alpha, targets, seed):
    torch.manual_seed(int(seed))
    cfg = peft.LoraConfig(r=int(r), lora_alpha=float(alpha), target_modules=targets.split(","), lora_dropout=0.0,
                          bias="none", init_lora_weights=False, task_type="CAUSAL_LM")
    model = peft.get_peft_model(base_model(base), cfg)
    model.save_pretrained(out)
    n, total = model.get_nb_trainable_parameters()
    print(f"peft init: {n} trainable of {total} (peft {peft.__version__}, transformers {transformers.__version__}, "
          f"torch {torch.__version__})")


# gptmem's --in-order batches of a text file: step s reads windows sB .. sB + B - 1, window w the T + 1 bytes
# at w T of the training split (the file's first 90%), back to the start when a step's windows do not fit
# (io/data.h data_next_train).
def batches(text, B, T, steps):
    data = open(text, "rb").read()
    train = data[:len(data) // 10 * 9]
    w = 0
    for _ in range(steps + 1):
        if (w + B) * T + 1 > len(train):
            w = 0
        rows = [train[(w + b) * T:(w + b) * T + T + 1] for b in range(B)]
        w += B
        x = torch.tensor([list(r) for r in rows], dtype=torch.long)
        yield x[:, :T], x[:, 1:]


def loss_of(model, x, y):
    logits = model(input_ids=x).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def train(base, adapters, text, B, T, steps, lr, wd, clip, out):
    B, T, steps = int(B), int(T), int(steps)
    model = peft.PeftModel.from_pretrained(base_model(base), adapters, is_trainable=True)
    named = [(n.replace(".default", ""), p) for n, p in model.named_parameters() if p.requires_grad]
    params = [p for _, p in named]
    small = {n: torch.zeros_like(p, dtype=torch.uint8) for n, p in named}
    opt = torch.optim.AdamW(params, lr=float(lr), betas=(0.9, 0.95), eps=1e-8, weight_decay=float(wd))
    for s, (x, y) in enumerate(batches(text, B, T, steps)):
        loss = loss_of(model, x, y)
        print(f"step {s} loss {loss.item():.7f}")
        if s == steps:
            break
        opt.zero_grad()
        loss.backward()
        if float(clip) > 0:
            torch.nn.utils.clip_grad_norm_(params, float(clip))
        for n, p in named:
            small[n] |= (p.grad.abs() < SMALL_GRAD).to(torch.uint8)
        opt.step()
    model.save_pretrained(out)
    save_file(small, os.path.join(out, "small_grads.safetensors"))


# AdamW's step is lr m / (sqrt(v) + eps): for a gradient near eps (1e-8) it is lr times a ratio that a float32
# rounding of the gradient moves by a large part (at g = 2.4e-8, an error of 1e-9 moves it 0.9%), so two correct
# float32 runs that sum in other orders part there by up to a step. Such elements (a gradient under SMALL_GRAD at
# any step: "train" writes them beside its adapters) are held to the bound of AdamW's steps instead.
SMALL_GRAD = 1e-5


def compare(d1, d2):
    a = load_file(os.path.join(d1, "adapter_model.safetensors"))
    b = load_file(os.path.join(d2, "adapter_model.safetensors"))
    f = os.path.join(d2, "small_grads.safetensors")
    small = load_file(f) if os.path.exists(f) else {k: torch.zeros_like(v, dtype=torch.uint8) for k, v in b.items()}
    if sorted(a) != sorted(b) or sorted(small) != sorted(b):
        sys.exit(f"error: the folders hold other tensors: {sorted(set(a) ^ set(b) ^ set(small))[:4]}")
    d = {k: (a[k].double() - b[k].double()).abs() for k in a}
    diff = max(d[k][small[k] == 0].max().item() for k in a)
    rest = max([d[k][small[k] != 0].max().item() for k in a if small[k].any()] + [0.0])
    n, top = sum(int(small[k].sum()) for k in a), max(a[k].abs().max().item() for k in a)
    print(f"compare {len(a)} tensors of {sum(v.numel() for v in a.values())} values, max abs diff {diff:.3e}, "
          f"max abs value {top:.4f}; {n} values with a gradient under {SMALL_GRAD:g}: max abs diff {rest:.3e}")


if __name__ == "__main__":
    cmds = {"init": (init, 6), "train": (train, 10), "compare": (compare, 2)}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds or len(sys.argv) - 2 != cmds[sys.argv[1]][1]:
        sys.exit(__doc__.strip())
    cmds[sys.argv[1]][0](*sys.argv[2:])
