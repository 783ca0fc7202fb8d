#!/usr/bin/env python3
"""Real models on the Vulkan backend match the CPU.

torchvision's mobilenet_v2 and resnet18 and a PyTorch TransformerEncoderLayer
(random weights, fixed seeds) are exported to ONNX and planned three ways:

  cpu          the reference: every kernel on the CPU
  all-vulkan   --target vulkan:0: every kernel in Vulkan delegates
  split        --target vulkan:0,cpu with a few nodes placed on the CPU, so
               the model runs as several delegates with copies between them

Each plan is run with `kiln run` with the Khronos validation layer on
(KILN_VULKAN_VALIDATION=1: any validation message fails the run). The error
reported is max|vulkan - cpu| / max|cpu|; it must be at most 1e-4. A model
this build of the planner cannot plan at all (an op it does not support yet)
is skipped with the planner's reason, as is all-vulkan when an op has no
Vulkan shader.

usage: vulkan_models.py --kiln PATH/TO/kiln --workdir DIR [--only NAME]
"""
import json
import os
import re
import subprocess
import sys

import numpy as np
import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from kiln_checks import expect, finish, test_args  # noqa: E402


TOLERANCE = 1e-4


def transformer():
    return torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.0,
                                            batch_first=True)


MODELS = {
    "mobilenet_v2": (lambda: torchvision.models.mobilenet_v2(weights=None), (1, 3, 224, 224), 13),
    "resnet18": (lambda: torchvision.models.resnet18(weights=None), (1, 3, 224, 224), 13),
    "transformer": (transformer, (2, 16, 64), 17),
}


def run(cmd, env=None):
    return subprocess.run(cmd, capture_output=True, text=True, env=env)


def last_line(text):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def split_placements(kiln, cpu_program):
    """Two nodes a third and two thirds into the planned program go to the CPU
    (nodes that survived constant folding and run a kernel, not a view)."""
    inspected = json.loads(run([kiln, "inspect", cpu_program, "--json"]).stdout)
    nodes = [i["node"] for i in inspected["methods"][0]["instructions"]
             if i["kind"] == "kernel" and i["op"] != "Copy" and i["node"]]
    picks = {nodes[len(nodes) // 3], nodes[2 * len(nodes) // 3]} if len(nodes) >= 3 else set()
    args = []
    for name in sorted(picks):
        args += ["--place", f"{name}=cpu"]
    return args


def check(name, kiln, workdir):
    build, shape, opset = MODELS[name]
    torch.manual_seed(0)
    model = build().eval()
    x = torch.randn(*shape)
    base = os.path.join(workdir, name)
    onnx_path, inp = base + ".onnx", base + "_x.npy"
    torch.onnx.export(model, x, onnx_path, opset_version=opset, input_names=["x"], output_names=["y"])
    np.save(inp, x.numpy())
    env = dict(os.environ, KILN_VULKAN_VALIDATION="1")

    outputs = {}
    variants = [("cpu", []), ("all-vulkan", ["--target", "vulkan:0"]), ("split", ["--target", "vulkan:0,cpu"])]
    results = []
    for variant, flags in variants:
        if variant == "split":
            flags = flags + split_placements(kiln, f"{base}.cpu.kiln")
        program = f"{base}.{variant}.kiln"
        planned = run([kiln, "plan", onnx_path, "-o", program, *flags])
        if planned.returncode != 0:
            reason = last_line(planned.stderr)
            if variant == "cpu" or "no target in the list runs op" in reason:
                results.append(("SKIP", variant, reason))
                if variant == "cpu":
                    return results
                continue
            results.append(("FAIL", variant, "plan: " + reason))
            continue
        delegates = re.search(r"(\d+) delegate call", planned.stdout)
        delegates = int(delegates.group(1)) if delegates else 0
        outdir = f"{base}.{variant}.out"
        ran = run([kiln, "run", program, "--input", inp, "--output-dir", outdir], env=env)
        if ran.returncode != 0:
            results.append(("FAIL", variant, "run: " + last_line(ran.stderr)))
            continue
        outputs[variant] = np.load(os.path.join(outdir, "output_0.npy"))
        if variant == "cpu":
            continue
        want = outputs["cpu"]
        got = outputs[variant]
        if got.shape != want.shape:
            results.append(("FAIL", variant, f"shape {got.shape} != {want.shape}"))
            continue
        err = float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-30))
        ok = err <= TOLERANCE and delegates >= (2 if variant == "split" else 1)
        results.append(("PASS" if ok else "FAIL", variant,
                        f"{delegates} delegate call(s), relative error vs CPU {err:.2e}"))
    return results


def main():
    args = test_args(with_only=True)
    skips = 0
    for name in MODELS:
        if args.only and name != args.only:
            continue
        for status, variant, detail in check(name, args.kiln, args.workdir):
            if status == "SKIP":
                skips += 1
                print(f"SKIP {name} {variant}: {detail}", flush=True)
            else:
                expect(f"{name} {variant}: {detail}", status == "PASS")
    return finish(skipped=skips)


if __name__ == "__main__":
    sys.exit(main())
