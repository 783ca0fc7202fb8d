#!/usr/bin/env python3
"""kiln int8 against kiln float32 and against ONNX Runtime int8, single-threaded CPU.

For each model of tests/models/qdq_models.py (the four MLPerf Tiny
architectures and two blocks; --large adds mobilenet_v2 and resnet18 at 224 x 224): the
float32 model (random weights, seeded) and its FX-quantized QDQ export
(opset 13, uint8 activations, int8 per-channel weights). kiln plans both;
then, for several rounds, back to back on the same input: `kiln run --runs
N` of the float32 program and of the int8 program on each CPU path asked for
(--isa), and ONNX Runtime on the QDQ model (ort_runner.js: one thread,
sequential, all graph optimizations; ORT folds the QDQ pairs into its own
int8 kernels). Prints, per model and path, the median over rounds of each
round's median latency, the ratios kiln fp32 / kiln int8 (the speed-up int8
brings) and kiln int8 / ORT int8 (below 1: kiln faster), the share of MACs
kiln runs int8, and how many outputs kiln and ORT agree on within 1 LSB;
then the geometric means.

ONNX Runtime comes from npm: `npm i --ignore-scripts onnxruntime-node` in
bench/models or the directory --ort-dir names.

usage: bench_int8.py --kiln build/release/bin/kiln [--ort-dir DIR] [--rounds 5] [--runs 20]
                     [--isa avx512,avx2] [--large] [--workdir DIR]
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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "models"))
import qdq_models  # noqa: E402


def kiln_round(kiln, program, inp, outdir, runs, isa):
    command = [kiln, "run", program, "--input", inp, "--output-dir", outdir, "--runs", str(runs)]
    out = subprocess.run(command + (["--isa", isa] if isa != "auto" else []), check=True, capture_output=True,
                         text=True).stdout
    return float(re.search(r"latency: median ([0-9.]+) ms", out).group(1)), np.load(os.path.join(outdir, "output_0.npy"))


def ort_round(ort_dir, onnx_path, raw_input, shape, runs, out_bin):
    env = dict(os.environ, NODE_PATH=os.path.join(ort_dir, "node_modules"))
    out = subprocess.run(["node", os.path.join(HERE, "ort_runner.js"), onnx_path, raw_input, "x".join(map(str, shape)),
                          str(runs), out_bin], check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1]), np.fromfile(out_bin, dtype=np.float32)


def plan(kiln, onnx_path, program):
    out = subprocess.run([kiln, "plan", onnx_path, "-o", program], check=True, capture_output=True, text=True).stdout
    m = re.search(r"int8: +\d+ of \d+ linear ops \(([\d,]+) of ([\d,]+) MACs", out)
    return (int(m.group(1).replace(",", "")), int(m.group(2).replace(",", ""))) if m else (0, 0)


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--ort-dir", default=os.environ.get("KILN_ORT_DIR", HERE))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--isa", default="avx512,avx2")
    parser.add_argument("--large", action="store_true")
    parser.add_argument("--models", default="", help="comma-separated subset")
    parser.add_argument("--workdir", default="/tmp/kiln_bench_int8")
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    models = dict(qdq_models.MODELS, **(qdq_models.LARGE if args.large else {}))
    if args.models:
        models = {k: v for k, v in models.items() if k in args.models.split(",")}
    paths = args.isa.split(",")
    rows = []
    ort_version = "?"
    for name, (_, shape) in models.items():
        quantized, float_model, x = qdq_models.quantize(name, shape, with_float=True)
        base = os.path.join(args.workdir, name)
        with torch.no_grad():
            torch.onnx.export(quantized, x, base + "_int8.onnx", opset_version=13, input_names=["x"], output_names=["y"])
            torch.onnx.export(float_model, x, base + "_fp32.onnx", opset_version=13, input_names=["x"], output_names=["y"])
        np.save(base + "_input.npy", x.numpy())
        x.numpy().astype(np.float32).tofile(base + "_input.bin")
        int8_macs, all_macs = plan(args.kiln, base + "_int8.onnx", base + "_int8.kiln")
        plan(args.kiln, base + "_fp32.onnx", base + "_fp32.kiln")
        step = qdq_models.output_step(base + "_int8.onnx")
        times = {p: {"fp32": [], "int8": []} for p in paths}
        ort_ms = []
        agree = None
        for r in range(args.rounds):
            for p in paths:
                t, _ = kiln_round(args.kiln, base + "_fp32.kiln", base + "_input.npy", base + "_fp32_out", args.runs, p)
                times[p]["fp32"].append(t)
                t, got = kiln_round(args.kiln, base + "_int8.kiln", base + "_input.npy", base + "_int8_out", args.runs, p)
                times[p]["int8"].append(t)
            result, ort_out = ort_round(args.ort_dir, base + "_int8.onnx", base + "_input.bin", shape, args.runs,
                                        base + "_ort.bin")
            ort_ms.append(result["median_ms"])
            ort_version = result["version"]
            if agree is None:
                agree = qdq_models.lsb_stats(got, ort_out.reshape(got.shape), step)
            print(f"{name} round {r + 1}: " + ", ".join(
                f"{p} fp32 {times[p]['fp32'][-1]:.3f} int8 {times[p]['int8'][-1]:.3f}" for p in paths) +
                f", ORT int8 {ort_ms[-1]:.3f} ms", file=sys.stderr, flush=True)
        for p in paths:
            f32 = float(np.median(times[p]["fp32"]))
            i8 = float(np.median(times[p]["int8"]))
            o = float(np.median(ort_ms))
            rows.append(dict(model=name, path=p, fp32=f32, int8=i8, ort=o, share=int8_macs / max(all_macs, 1),
                             agree=agree))
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    print(f"processor: {cpu}; ONNX Runtime {ort_version} (onnxruntime-node), 1 intra-op and 1 inter-op thread; "
          f"{args.rounds} rounds x {args.runs} runs, medians")
    print("| model | kiln path | kiln fp32 ms | kiln int8 ms | ORT int8 ms | fp32/int8 | kiln int8/ORT int8 "
          "| int8 MACs | kiln vs ORT within 1 LSB (max) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        share, worst = row["agree"]
        print(f"| {row['model']} | {row['path']} | {row['fp32']:.3f} | {row['int8']:.3f} | {row['ort']:.3f} "
              f"| {row['fp32'] / row['int8']:.2f} | {row['int8'] / row['ort']:.2f} | {row['share'] * 100:.0f}% "
              f"| {share * 100:.1f}% ({worst:g}) |")
    for p in paths:
        sel = [r for r in rows if r["path"] == p]
        print(f"geometric mean, {p}: kiln fp32/int8 {geomean([r['fp32'] / r['int8'] for r in sel]):.2f}, "
              f"kiln int8/ORT int8 {geomean([r['int8'] / r['ort'] for r in sel]):.2f}")


if __name__ == "__main__":
    main()
