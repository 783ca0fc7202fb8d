#!/usr/bin/env python3
"""Per-model latency of the Vulkan backend beside kiln's CPU path.

Each model (random weights, fixed seed) is exported to ONNX, planned twice
(`--target cpu` and `--target vulkan:0`) and run with `kiln run --runs N`;
the table gives both medians and their ratio, from the same run of this
script. The validation layer is off (KILN_VULKAN_VALIDATION unset). The
first execution of a Vulkan program includes the driver's shader
compilation (lavapipe compiles on first dispatch); the median over N runs
leaves it out.

On a machine without a GPU, vulkan:0 is Mesa's lavapipe, which runs the
compute shaders on the CPU: the ratio then says what the Vulkan path costs
on a CPU, not how fast a GPU is.

usage: bench_vulkan.py --kiln build/release/bin/kiln [--runs 10] [--workdir DIR]
                       [--models mobilenet_v2,resnet18,transformer]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torchvision


def transformer():
    return torch.nn.TransformerEncoderLayer(d_model=256, nhead=8, dim_feedforward=1024, dropout=0.0,
                                            batch_first=True)


MODELS = {
    "mobilenet_v2": (lambda: torchvision.models.mobilenet_v2(weights=None), (1, 3, 224, 224), 13),
    "resnet18": (lambda: torchvision.models.resnet18(weights=None), (1, 3, 224, 224), 13),
    "transformer": (transformer, (1, 128, 256), 17),
}


def median_ms(kiln, program, inp, runs, env):
    out = subprocess.run([kiln, "run", program, "--input", inp, "--runs", str(runs)], capture_output=True,
                         text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "kiln run failed")
    return float(re.search(r"median ([0-9.]+) ms", out.stdout).group(1))


def vulkan_device_name():
    tool = shutil.which("vulkaninfo")
    if tool is None:
        return "vulkan:0"
    out = subprocess.run([tool, "--summary"], capture_output=True, text=True)
    names = re.findall(r"deviceName\s*=\s*(.+)", out.stdout)
    return f"vulkan:0 ({names[0].strip()})" if names else "vulkan:0"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--workdir")
    parser.add_argument("--models", default=",".join(MODELS))
    args = parser.parse_args()
    workdir = args.workdir or tempfile.mkdtemp(prefix="kiln-bench-vulkan-")
    os.makedirs(workdir, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "KILN_VULKAN_VALIDATION"}
    print(f"device: {vulkan_device_name()}; CPU path: kiln's CPU kernels, one thread; "
          f"median of {args.runs} runs")
    print(f"{'model':<14} {'CPU ms':>10} {'Vulkan ms':>10} {'Vulkan/CPU':>11}")
    status = 0
    for name in args.models.split(","):
        build, shape, opset = MODELS[name]
        torch.manual_seed(0)
        model = build().eval()
        x = torch.randn(*shape)
        base = os.path.join(workdir, name)
        torch.onnx.export(model, x, base + ".onnx", opset_version=opset, input_names=["x"], output_names=["y"])
        np.save(base + "_x.npy", x.numpy())
        row = {}
        for target in ("cpu", "vulkan:0"):
            program = f"{base}.{target.replace(':', '')}.kiln"
            planned = subprocess.run([args.kiln, "plan", base + ".onnx", "-o", program, "--target", target],
                                     capture_output=True, text=True)
            if planned.returncode != 0:
                row[target] = planned.stderr.strip().splitlines()[-1]
                continue
            try:
                row[target] = median_ms(args.kiln, program, base + "_x.npy", args.runs, env)
            except RuntimeError as e:
                row[target] = str(e)
                status = 1
        cpu, vk = row.get("cpu"), row.get("vulkan:0")
        if isinstance(cpu, float) and isinstance(vk, float):
            print(f"{name:<14} {cpu:>10.1f} {vk:>10.1f} {vk / cpu:>10.2f}x", flush=True)
        else:
            reason = cpu if not isinstance(cpu, float) else vk
            print(f"{name:<14} not run: {reason}", flush=True)
    print("NVIDIA GPU beside the CUDA backend: not measured here (needs a GPU machine and the CUDA runtime half)")
    return status


if __name__ == "__main__":
    sys.exit(main())
