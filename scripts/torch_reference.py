"""What scripts/gen_fixture.py (a tiny GPT-2) and scripts/gen_fixture_llama.py (a tiny Llama) share: one
reference step of a model written in PyTorch, then 10 AdamW steps, written as a fixture the C tests read
(tests/cpu_checks/parity.h). Imported by those two scripts; it needs torch."""
import os

import torch


def leaves(params):
    """The float32 weights of params ((name, tensor, is_matrix), gptmem's layout order), their float64
    copies P that the reference differentiates, and w(name), the copy of that name."""
    weights32 = [p for _, p, _ in params]
    P = [p.double().clone().requires_grad_(True) for p in weights32]
    byname = {n: i for i, (n, _, _) in enumerate(params)}
    return weights32, P, lambda name: P[byname[name]]


def write_fixture(name, comment, config, params, P, weights32, forward, loss_of, inp, tgt, steps, lr, wd, clip):
    """The loss, logits and gradients of forward(inp) (targets tgt) at the weights P (float64 copies of weights32, in
    gptmem's layout; params: (name, tensor, is_matrix), is_matrix getting weight decay), then `steps`
    AdamW steps on the same batch with global-norm clipping at a constant lr; written to
    tests/fixtures/NAME under the comment line and the config line."""
    logits = forward(inp)
    loss = loss_of(logits)
    loss.backward()
    grads = [p.grad.clone() for p in P]
    decay = [p for p, (_, _, m) in zip(P, params) if m]
    no_decay = [p for p, (_, _, m) in zip(P, params) if not m]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.95), eps=1e-8)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        l_s = loss_of(forward(inp))
        l_s.backward()
        torch.nn.utils.clip_grad_norm_(P, clip)
        opt.step()
        losses.append(l_s.item())
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", name)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        f.write(f"# {comment} (torch {torch.__version__})\n")
        f.write(config + "\n")

        def arr(label, values):
            values = [float(x) for x in values]
            f.write(f"{label} {len(values)}\n")
            f.write(" ".join(f"{x:.9g}" for x in values) + "\n")

        arr("params", torch.cat([p.flatten() for p in weights32]).tolist())
        arr("inputs", inp.flatten().tolist())
        arr("targets", tgt.flatten().tolist())
        arr("loss", [loss.item()])
        arr("logits", logits.detach().flatten().tolist())
        arr("grads", torch.cat([gr.flatten() for gr in grads]).tolist())
        arr("step_losses", losses)
    print("wrote", os.path.normpath(out), "loss", loss.item())
