#!/usr/bin/env python3
"""tests/estimators.py — --estimators against the calculators' own published formulas, evaluated here from the same
inputs, for three models (GPT-2 124M, Llama 3.2 1B, Llama 3 8B) on 1, 4 and 8 ranks, ZeRO 0-3, with and without
--offload, fp32 and bf16. The formulas, as their sources write them:
  DeepSpeed, deepspeed/runtime/zero/stage3.py, estimate_zero3_model_states_mem_needs (num_nodes=1, zero_init=True,
    additional_buffer_factor=1.5), and stage_1_and_2.py, estimate_zero2_model_states_mem_needs (after DeepSpeed#5099:
    2 + 18/N bytes a parameter on a GPU without offload);
  accelerate, src/accelerate/commands/estimate.py, estimate_training_usage: "Training using Adam" is the largest of
    model, gradients, optimizer and step;
  Megatron-LM, megatron/training/theoretical_memory_usage.py, compute_weight_and_optimizer_memory and
    compute_activation_memory_without_sp (tensor and pipeline parallel 1).
And the lecture's numbers: Llama-3-8B, ZeRO-3 on 4 GPUs with the optimizer offloaded, 5.70 GiB a GPU and 179.49 GiB
of CPU; on 8 GPUs without offload, 18.78 GiB a GPU (DeepSpeed prints GiB as "GB"). Prints PASS / FAIL lines.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "train")
# the presets' shapes: L, C, H, KVH, F, V (padded to 64), maxT, Llama, untied; and gptmem's parameter count
MODELS = {
    "gpt2": dict(L=12, C=768, H=12, KVH=12, F=3072, V=50304, T=1024, llama=False, untied=False, P=124475904),
    "llama3.2-1b": dict(L=16, C=2048, H=32, KVH=8, F=8192, V=128256, T=8192, llama=True, untied=False, P=1235814400),
    "llama3-8b": dict(L=32, C=4096, H=32, KVH=8, F=14336, V=128256, T=8192, llama=True, untied=True, P=8030261248),
}
results = {"pass": 0, "fail": 0}


def zero3(total_params, largest_layer_params, num_gpus_per_node=1, num_nodes=1, cpu_offload=True, cpu_offload_params=True,
          zero_init=True, additional_buffer_factor=1.5):
    total_gpus = num_nodes * num_gpus_per_node
    gpus_factor = 1 / num_nodes
    largest_layer_memory = 4 * largest_layer_params
    if cpu_offload:
        if cpu_offload_params:
            gpu_mem = largest_layer_memory
            cpu_mem = total_params * 18 * gpus_factor * additional_buffer_factor
        else:
            gpu_mem = largest_layer_memory + int(2 * total_params / total_gpus)
            cpu_mem = total_params * 16 * gpus_factor * additional_buffer_factor
    else:
        gpu_mem = largest_layer_memory + int(18 * total_params / total_gpus)
        cpu_mem = largest_layer_params * 4 * num_gpus_per_node * additional_buffer_factor
    return int(cpu_mem), int(gpu_mem)


def zero2(total_params, num_gpus_per_node=1, num_nodes=1, cpu_offload=True, additional_buffer_factor=1.5):
    total_gpus = num_nodes * num_gpus_per_node
    if cpu_offload:
        gpu_mem = 2 * total_params
        cpu_mem = total_params * max(4 * total_gpus, 16) * additional_buffer_factor
    else:
        gpu_mem = 2 * total_params + int(18 * total_params / total_gpus)
        cpu_mem = total_params * 4 * num_gpus_per_node * additional_buffer_factor
    return int(cpu_mem), int(gpu_mem)


def accelerate_training(size, mixed_precision):
    fp32_size, fp16_size = size, size // 2
    if mixed_precision == "float32":
        sizes = dict(model=fp32_size, gradients=fp32_size, optimizer=fp32_size * 2, step=fp32_size * 4)
    else:
        sizes = dict(model=fp32_size, gradients=fp32_size + fp16_size, optimizer=fp32_size * 2)
        sizes["step"] = sizes["optimizer"]
    return max(sizes.values())


def megatron(m, B, T, dp, distributed):
    h, a, g, F, V = m["C"], m["H"], m["KVH"], m["F"], m["V"]
    norm, gated = (1, 3 / 2) if m["llama"] else (2, 1)
    attn = 2 * h * h * ((1 + g / a) * ((h // a) * a / h))
    layer = 2 * h * (F * gated + norm) + attn
    params = layer * m["L"] + norm * h + h * V + (h * V if m["untied"] else 0)
    states = params * (6 + 12 / dp if distributed else 18)
    act = T * B * h * (10 + 24 / 1) * m["L"] + 8 * T * B + T * B * h
    act = (act + (T * B * V + T * B * h) * 2) * 1.05
    return states, act


def ok(cond, msg):
    print(("PASS" if cond else "FAIL") + " estimators: " + msg)
    results["pass" if cond else "fail"] += 1


def main():
    with tempfile.TemporaryDirectory() as tmp:
        js = os.path.join(tmp, "m.json")
        for name, m in MODELS.items():
            largest = max(m["V"] * m["C"], m["F"] * m["C"], (m["H"] + 2 * m["KVH"]) * (m["C"] // m["H"]) * m["C"])
            checked, wrong = 0, []
            for ranks in (1, 4, 8):
                for zero in ((0,) if ranks == 1 else (1, 2, 3)):
                    for offload in ("", "opt", "opt,params"):
                        for dtype in ("fp32", "bf16"):
                            if offload == "opt,params" and zero != 3:
                                continue
                            args = [TRAIN, "--model", name, "--batch", "1", "--seq-len", "256", "--device", "cuda", "--dtype",
                                    dtype, "--ranks", str(ranks), "--zero", str(zero), "--dry-run", "--mem-json", js]
                            if offload:
                                args += ["--offload", offload]
                            p = subprocess.run(args, capture_output=True, text=True)
                            if p.returncode:
                                wrong.append(f"{' '.join(args[1:])}: exit {p.returncode}: {p.stderr.strip()[:200]}")
                                continue
                            got = {(e["source"], e["setting"]): e for e in json.load(open(js))["estimators"]}
                            N, P = ranks, m["P"]
                            want = {
                                ("z3", "offload params and optimizer"): zero3(P, largest, N, 1, True, True),
                                ("z3", "offload optimizer"): zero3(P, largest, N, 1, True, False),
                                ("z3", "no offload"): zero3(P, largest, N, 1, False),
                                ("z2", "offload optimizer"): zero2(P, N, 1, True),
                                ("z2", "no offload"): zero2(P, N, 1, False),
                            }
                            mixed = "float32" if dtype == "fp32" else "float16"
                            states, act = megatron(m, 1, 256, N, zero >= 1 and N > 1)
                            for (src, setting), e in got.items():
                                key = ("z3" if "zero3" in src else "z2" if "zero2" in src else src, setting)
                                if key in want:
                                    cpu, gpu = want[key]
                                    good = (e["gpu_bytes"], e["cpu_bytes"]) == (gpu, cpu)
                                elif src.startswith("accelerate"):
                                    good = e["gpu_bytes"] == accelerate_training(4 * P, mixed) and setting.startswith(mixed)
                                elif setting.startswith("weights"):
                                    good = abs(e["gpu_bytes"] - states) <= 1
                                else:
                                    good = abs(e["gpu_bytes"] - act) <= 1
                                checked += 1
                                if not good:
                                    wrong.append(f"{name} ranks {N} zero {zero} {offload} {dtype}: {src} {setting}: {e}")
                            this = [k for k, e in got.items() if e["this_run"] and "DeepSpeed" in k[0]]
                            expect = ("offload params and optimizer" if "params" in offload else "offload optimizer"
                                      if offload else "no offload")
                            z = "zero3" if zero == 3 and N > 1 else "zero2"
                            if len(this) != 1 or z not in this[0][0] or this[0][1] != expect:
                                wrong.append(f"{name} ranks {N} zero {zero} {offload}: this run's DeepSpeed line is {this}")
            ok(not wrong and checked > 100, f"{name}: {checked} numbers equal DeepSpeed's, accelerate's and Megatron's formulas, "
               "and the line marked as this run's is DeepSpeed's for its stage and offload" + ("; " + "; ".join(wrong[:3])
                                                                                              if wrong else ""))
    lecture = [(["--ranks", "4", "--zero", "3", "--offload", "opt"], "* offload optimizer", "5.70 GiB", "179.49 GiB"),
               (["--ranks", "8", "--zero", "3"], "* no offload", "18.78 GiB", None)]
    for extra, setting, gpu, cpu in lecture:
        out = subprocess.run([TRAIN, "--model", "llama3-8b", "--device", "cuda", "--batch", "1", "--seq-len", "256",
                              "--dry-run", "--estimators"] + extra, capture_output=True, text=True).stdout
        line = [l for l in out.splitlines() if setting in l]
        good = len(line) == 1 and gpu in line[0] and (cpu is None or cpu in line[0])
        ok(good, f"the lecture's Llama-3-8B {' '.join(extra)}: DeepSpeed's {gpu} a GPU" + (f", {cpu} of CPU" if cpu else "") +
           ("" if good else f": {line}"))
    print(f"estimators: {results['pass']} passed, {results['fail']} failed")
    return 1 if results["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
