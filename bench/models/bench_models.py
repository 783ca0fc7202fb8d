#!/usr/bin/env python3
"""kiln against ONNX Runtime on real models, single-threaded CPU.

Exports mobilenet_v2 and resnet18 (torchvision, random weights) and a
transformer encoder block (nn.TransformerEncoderLayer) with a fixed seed,
plans each with `kiln plan`, then for several rounds runs `kiln run --runs N`
and ONNX Runtime (ort_runner.js: one thread, sequential, all graph
optimizations) back to back on the same input. Prints, per model, the
median over rounds of each round's median latency, the ratio kiln / ORT,
the spread of the round medians (how noisy the machine was), the relative
error max|y - torch| / max|torch| of kiln and of ORT against PyTorch, and
memory: kiln's arenas plus its constant segment (exact, from the program),
ORT's peak RSS growth over session creation and the runs.

ONNX Runtime comes from npm: `npm i --ignore-scripts onnxruntime-node` in
bench/models (node_modules is not committed) or in the directory --ort-dir
names.

usage: bench_models.py --kiln build/release/bin/kiln [--ort-dir DIR]
                       [--rounds 5] [--runs 20] [--models a,b] [--workdir DIR]
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))


def encoder_block():
    # BERT-style width (512, 8 heads, feed-forward 2048), sequence of 128.
    return nn.TransformerEncoderLayer(512, 8, dim_feedforward=2048, batch_first=True)


MODELS = {
    "mobilenet_v2": (lambda: torchvision.models.mobilenet_v2(weights=None), (1, 3, 224, 224)),
    "resnet18": (lambda: torchvision.models.resnet18(weights=None), (1, 3, 224, 224)),
    "encoder_block": (encoder_block, (1, 128, 512)),
}


def export(name, workdir):
    make, shape = MODELS[name]
    torch.manual_seed(1234)
    model = make().eval()
    x = torch.randn(*shape)
    with torch.no_grad():
        expected = model(x).numpy()
    onnx_path = os.path.join(workdir, name + ".onnx")
    torch.onnx.export(model, x, onnx_path, opset_version=17, input_names=["x"], output_names=["y"])
    np.save(os.path.join(workdir, name + "_input.npy"), x.numpy())
    x.numpy().astype(np.float32).tofile(os.path.join(workdir, name + "_input.bin"))
    return onnx_path, shape, expected


def rel_error(got, expected):
    return float(np.max(np.abs(got - expected)) / max(float(np.max(np.abs(expected))), 1e-30))


def kiln_round(kiln, program, workdir, name, runs):
    outdir = os.path.join(workdir, name + "_kiln_out")
    out = subprocess.run([kiln, "run", program, "--input", os.path.join(workdir, name + "_input.npy"),
                          "--output-dir", outdir, "--runs", str(runs)], check=True, capture_output=True,
                         text=True).stdout
    median = float(re.search(r"latency: median ([0-9.]+) ms", out).group(1))
    return median, np.load(os.path.join(outdir, "output_0.npy"))


def ort_round(ort_dir, onnx_path, workdir, name, shape, runs):
    out_bin = os.path.join(workdir, name + "_ort_out.bin")
    env = dict(os.environ, NODE_PATH=os.path.join(ort_dir, "node_modules"))
    out = subprocess.run(["node", os.path.join(HERE, "ort_runner.js"), onnx_path,
                          os.path.join(workdir, name + "_input.bin"), "x".join(map(str, shape)), str(runs),
                          out_bin], check=True, capture_output=True, text=True, env=env).stdout
    result = json.loads(out.strip().splitlines()[-1])
    return result, np.fromfile(out_bin, dtype=np.float32)


def kiln_memory(kiln, program):
    info = json.loads(subprocess.run([kiln, "inspect", program, "--json"], check=True, capture_output=True,
                                     text=True).stdout)
    arenas = sum(a["size"] for m in info["methods"] for a in m["arenas"])
    return arenas, info["segment_bytes"]


def mib(n):
    return f"{n / (1 << 20):.1f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--ort-dir", default=os.environ.get("KILN_ORT_DIR", HERE),
                        help="directory whose node_modules holds onnxruntime-node")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--workdir", default=os.path.join(HERE, "..", "..", "build", "bench-models"))
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    kiln = os.path.abspath(args.kiln)

    rows = []
    for name in args.models.split(","):
        onnx_path, shape, expected = export(name, args.workdir)
        program = os.path.join(args.workdir, name + ".kiln")
        subprocess.run([kiln, "plan", onnx_path, "-o", program], check=True, stdout=subprocess.DEVNULL)
        arenas, constants = kiln_memory(kiln, program)
        kiln_ms, ort_ms, ort_rss = [], [], []
        kiln_err = ort_err = None
        ort_version = "?"
        for _ in range(args.rounds):
            ms, got = kiln_round(kiln, program, args.workdir, name, args.runs)
            kiln_ms.append(ms)
            kiln_err = rel_error(got.reshape(expected.shape), expected)
            result, ort_out = ort_round(args.ort_dir, onnx_path, args.workdir, name, shape, args.runs)
            ort_ms.append(result["median_ms"])
            ort_rss.append(result["peak_rss_delta_bytes"])
            ort_version = result["version"]
            ort_err = rel_error(ort_out.reshape(expected.shape), expected)
            print(f"  {name}: kiln {ms:.2f} ms, ORT {result['median_ms']:.2f} ms", file=sys.stderr, flush=True)
        k, o = float(np.median(kiln_ms)), float(np.median(ort_ms))
        rows.append(dict(name=name, kiln=k, ort=o, ratio=k / o, kiln_spread=(min(kiln_ms), max(kiln_ms)),
                         ort_spread=(min(ort_ms), max(ort_ms)), kiln_err=kiln_err, ort_err=ort_err,
                         arenas=arenas, constants=constants, ort_rss=int(np.median(ort_rss))))

    print(f"ONNX Runtime {ort_version} (onnxruntime-node), 1 intra-op and 1 inter-op thread, sequential, "
          f"graph optimizations all; {args.rounds} rounds of {args.runs} runs each, kiln and ORT back to back.")
    print()
    print("| model | kiln ms | ORT ms | kiln/ORT | kiln round medians | ORT round medians "
          "| kiln rel. error | ORT rel. error | kiln arenas + constants (MiB) | ORT peak RSS delta (MiB) |")
    print("|---|---:|---:|---:|---|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['name']} | {r['kiln']:.2f} | {r['ort']:.2f} | {r['ratio']:.2f} "
              f"| {r['kiln_spread'][0]:.2f}-{r['kiln_spread'][1]:.2f} | {r['ort_spread'][0]:.2f}-{r['ort_spread'][1]:.2f} "
              f"| {r['kiln_err']:.1e} | {r['ort_err']:.1e} "
              f"| {mib(r['arenas'])} + {mib(r['constants'])} = {mib(r['arenas'] + r['constants'])} "
              f"| {mib(r['ort_rss'])} |")
    geomean = math.exp(sum(math.log(r["ratio"]) for r in rows) / len(rows))
    worst = max(rows, key=lambda r: r["ratio"])
    print()
    print(f"geometric mean of kiln/ORT: {geomean:.2f} (target <= 1.0); "
          f"slowest relative to ORT: {worst['name']} at {worst['ratio']:.2f}x (target <= 2.0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
