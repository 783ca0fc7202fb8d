#!/usr/bin/env python3
"""The CUDA backend on real models, on one GPU (run by bench/cuda_gpu.sh).

Each model (random weights, fixed seed: mobilenet_v2, resnet18, a
transformer encoder block as bench/models/bench_models.py builds them) is
exported to ONNX, planned for `--target cpu` and `--target cuda:0,cpu`, and
run by `kiln run --runs N`. The table gives kiln's median latency on
cuda:0 (host input in, host output out: the copies are included), the max
relative error of its output against kiln on the CPU and against PyTorch,
and PyTorch's batch-1 latency on the same GPU in eager mode and with
torch.compile(mode="reduce-overhead") (CUDA graphs), input already on the
GPU, synchronised per run. The first kiln run warms up, the second
captures the CUDA graph; the median leaves both out.

usage: cuda_models.py --kiln PATH [--runs 50] [--workdir DIR] [--models a,b]
"""
import argparse
import os
import re
import subprocess
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "models"))
from bench_models import MODELS  # noqa: E402


def kiln_run(kiln, program, x_path, out_dir, runs):
    out = subprocess.run([kiln, "run", program, "--input", x_path, "--output-dir", out_dir, "--runs", str(runs)],
                         check=True, capture_output=True, text=True).stdout
    return float(re.search(r"latency: median ([0-9.]+) ms", out).group(1)), np.load(
        os.path.join(out_dir, "output_0.npy"))


def torch_ms(fn, x, runs):
    for _ in range(5):
        fn(x)
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn(x)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t) * 1e3)
    return float(np.median(times))


def rel(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--workdir", default="build/cuda_models")
    ap.add_argument("--models", default="mobilenet_v2,resnet18,encoder_block")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    rows = []
    for name in args.models.split(","):
        make, shape = MODELS[name]
        torch.manual_seed(1234)
        model = make().eval()
        x = torch.randn(*shape)
        with torch.no_grad():
            expected = model(x).numpy()
        onnx_path = os.path.join(args.workdir, name + ".onnx")
        torch.onnx.export(model, x, onnx_path, opset_version=17, input_names=["x"], output_names=["y"])
        x_path = os.path.join(args.workdir, name + "_x.npy")
        np.save(x_path, x.numpy())
        results = {}
        for target in ("cpu", "cuda:0,cpu"):
            program = os.path.join(args.workdir, f"{name}_{target.split(':')[0]}.kiln")
            subprocess.run([args.kiln, "plan", onnx_path, "-o", program, "--target", target], check=True,
                           stdout=subprocess.DEVNULL)
            results[target] = kiln_run(args.kiln, program, x_path, os.path.join(args.workdir, name + "_" +
                                                                                target.split(":")[0]), args.runs)
        gpu = model.cuda()
        xg = x.cuda()
        with torch.no_grad():
            eager = torch_ms(gpu, xg, args.runs)
            compiled = torch.compile(gpu, mode="reduce-overhead")
            graphs = torch_ms(compiled, xg, args.runs)
        ms, y = results["cuda:0,cpu"]
        rows.append((name, ms, rel(y, results["cpu"][1]), rel(y, expected), eager, graphs))
        print(f"  {name}: kiln cuda {ms:.3f} ms, eager {eager:.3f} ms, reduce-overhead {graphs:.3f} ms",
              file=sys.stderr, flush=True)
    print("| model | kiln cuda:0 ms | vs kiln CPU (rel) | vs PyTorch (rel) | torch eager ms | "
          "torch.compile reduce-overhead ms | kiln / compile |")
    print("|---|---|---|---|---|---|---|")
    bad = False
    for name, ms, e_cpu, e_torch, eager, graphs in rows:
        print(f"| {name} | {ms:.3f} | {e_cpu:.1e} | {e_torch:.1e} | {eager:.3f} | {graphs:.3f} | {ms / graphs:.2f} |")
        bad = bad or e_cpu > 1e-4
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
