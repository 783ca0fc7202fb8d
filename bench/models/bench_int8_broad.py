#!/usr/bin/env python3
"""kiln int8 against ONNX Runtime int8 on the broad model set, QDQ laid out
the way ONNX Runtime's quantize_static writes it (made by `kiln quantize`).

For each model of bench_models.py's set (the same exports, random weights,
seeded): `kiln quantize` with 8 calibration inputs drawn like the
benchmark's input (minmax ranges, uint8 activations, int8 per-channel
weights, int32 biases, data movement between a DQ and a Q of one scale);
kiln plans the float and the QDQ model; then, for several rounds, back to
back on the same input: kiln float32, kiln int8 (on each --isa path) and
ONNX Runtime on the QDQ model (all graph optimizations; it fuses the QDQ
pairs into its own int8 kernels), each on --threads threads (1 unless
given; with 2, pin two CPUs with --cpus 0,1). Prints per model and path
the median over rounds of each round's median, every round, kiln
float/int8 (what int8 buys), kiln int8 / ORT int8 (and against ORT less
its Node binding's per-call cost), the share of MACs kiln runs in int8,
and accuracy: each side's largest and mean distance from the QDQ model's
float semantics (ONNX Runtime with graph optimizations disabled runs every
QuantizeLinear and DequantizeLinear as written), relative to the largest
output. kiln runs with small pages (kiln run --huge-pages off), as ORT.
With --reduce-range the weights are quantized on 7 bits, [-64, 64], as
quantize_static's reduce_range puts them (recommended by ONNX Runtime for
x86 without VNNI); kiln's AVX2 product is then vpmaddubsw, exact.

usage: bench_int8_broad.py --kiln build/release/bin/kiln [--ort-dir DIR] [--rounds 3] [--runs 10]
                           [--isa avx512,avx2] [--models a,b|default] [--workdir DIR] [--cpus 0]
                           [--reduce-range] [--threads 1]
"""
import argparse
import os
import re
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_models as bm  # noqa: E402

# Ten models, CNNs and transformers, small and large.
DEFAULT = ["mobilenet_v2", "resnet18", "resnet50", "efficientnet_b0", "squeezenet1_1", "googlenet", "densenet121",
           "encoder_block", "gpt_block", "vit_tiny", "unet", "convnext_tiny"]


def calibration(workdir, name, shape, count=8):
    folder = os.path.join(workdir, name + "_calibration")
    os.makedirs(folder, exist_ok=True)
    gen = torch.Generator().manual_seed(99)
    for i in range(count):
        np.save(os.path.join(folder, f"{i}.npy"), torch.randn(*shape, generator=gen).numpy())
    return folder


def int8_share(plan_stdout):
    m = re.search(r"int8: +\d+ of \d+ linear ops \(([\d,]+) of ([\d,]+) MACs", plan_stdout)
    return int(m.group(1).replace(",", "")) / max(int(m.group(2).replace(",", "")), 1) if m else 0.0


def ort_unoptimized(ort_dir, onnx_path, workdir, name, shape):
    """The QDQ model's float semantics: ORT with every optimization off runs
    each QuantizeLinear / DequantizeLinear as written."""
    out_bin = os.path.join(workdir, name + "_qdq_reference.bin")
    env = dict(os.environ, NODE_PATH=os.path.join(ort_dir, "node_modules"))
    subprocess.run(["node", os.path.join(HERE, "ort_runner.js"), onnx_path, os.path.join(workdir, name + "_input.bin"),
                    "x".join(map(str, shape)), "1", out_bin, "1", "disabled"], check=True, capture_output=True,
                   env=env)
    return np.fromfile(out_bin, dtype=np.float32)


def distance(got, reference):
    """The largest and the mean distance from the reference, both relative
    to its largest magnitude (one output step of a deep model's rounding
    decides the largest; the mean shows a bias)."""
    diff = np.abs(got.reshape(-1) - reference.reshape(-1))
    scale = max(float(np.max(np.abs(reference))), 1e-30)
    return float(np.max(diff)) / scale, float(np.mean(diff)) / scale


def measure(args, name, kiln, paths, binding):
    onnx_path, shape, _ = bm.export(name, args.workdir)
    stem = name + ("_int8r" if args.reduce_range else "_int8")
    qdq = os.path.join(args.workdir, stem + ".onnx")
    shape_arg = "x=" + "x".join(map(str, shape))
    subprocess.run([kiln, "quantize", onnx_path, "--calibration", calibration(args.workdir, name, shape), "-o", qdq,
                    "--input-shape", shape_arg] + (["--reduce-range"] if args.reduce_range else []), check=True,
                   capture_output=True, text=True)
    f32_program = os.path.join(args.workdir, name + ".kiln")
    i8_program = os.path.join(args.workdir, stem + ".kiln")
    subprocess.run([kiln, "plan", onnx_path, "-o", f32_program], check=True, capture_output=True)
    share = int8_share(subprocess.run([kiln, "plan", qdq, "-o", i8_program], check=True, capture_output=True,
                                      text=True).stdout)
    reference = ort_unoptimized(args.ort_dir, qdq, args.workdir, name, shape)
    f32 = {p: [] for p in paths}
    i8 = {p: [] for p in paths}
    ort = []
    kiln_dist = {}
    ort_dist = None
    for r in range(args.rounds):
        for p in paths:
            ms, _ = bm.kiln_round(kiln, f32_program, args.workdir, name, args.runs, p, args.threads)
            f32[p].append(ms)
            ms, got = bm.kiln_round(kiln, i8_program, args.workdir, name, args.runs, p, args.threads)
            i8[p].append(ms)
            kiln_dist[p] = distance(got, reference)
        result, ort_out = bm.ort_round(args.ort_dir, qdq, args.workdir, name, shape, args.runs, args.threads)
        ort.append(result["median_ms"])
        ort_dist = distance(ort_out, reference)
        print(f"  {name} round {r + 1}: " + ", ".join(f"{p} fp32 {f32[p][-1]:.2f} int8 {i8[p][-1]:.2f}" for p in paths) +
              f", ORT int8 {ort[-1]:.2f} ms", file=sys.stderr, flush=True)
    rows = []
    for p in paths:
        o = float(np.median(ort))
        rows.append(dict(name=name, path=p, f32=float(np.median(f32[p])), i8=float(np.median(i8[p])), ort=o,
                         ort_less=max(o - binding, 1e-6), i8_rounds=i8[p], ort_rounds=ort, share=share,
                         kiln_dist=kiln_dist[p], ort_dist=ort_dist, version=result["version"]))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--ort-dir", default=os.environ.get("KILN_ORT_DIR", HERE))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--isa", default="avx512,avx2")
    parser.add_argument("--models", default="default")
    parser.add_argument("--workdir", default=os.path.join(HERE, "..", "..", "build", "bench-int8-broad"))
    parser.add_argument("--reduce-range", action="store_true", help="weights on [-64, 64] (kiln quantize --reduce-range)")
    parser.add_argument("--threads", type=int, default=1, help="threads for kiln and ONNX Runtime alike")
    bm.add_cpus_option(parser)
    args = parser.parse_args()
    bm.pin_cpus(parser, args)
    os.makedirs(args.workdir, exist_ok=True)
    kiln = os.path.abspath(args.kiln)
    names = DEFAULT if args.models == "default" else args.models.split(",")
    for name in names:
        if name not in bm.MODELS:
            parser.error(f"unknown model '{name}'")
    paths = args.isa.split(",")
    if args.threads < 1:
        parser.error("--threads must be at least 1")
    binding = bm.ort_binding_ms(args.ort_dir, args.workdir, 200, args.threads)
    rows = []
    for name in names:
        rows += measure(args, name, kiln, paths, binding)
    threads = "one thread" if args.threads == 1 else f"{args.threads} threads"
    print(f"ONNX Runtime {rows[0]['version']} (onnxruntime-node), {threads} (kiln alike), sequential, "
          f"graph optimizations all; "
          f"{args.rounds} rounds of {args.runs} runs, every round kept; QDQ from kiln quantize (minmax, 8 samples, "
          f"uint8 activations, int8 per-channel weights{' on [-64, 64] (--reduce-range)' if args.reduce_range else ''}); "
          f"kiln run --huge-pages off; ORT binding per call "
          f"{binding * 1e3:.0f} us; CPUs {','.join(map(str, sorted(os.sched_getaffinity(0))))}"
          f"{' (--cpus)' if args.cpus else ''}.")
    print()
    print("| model | tuned on | kiln path | kiln fp32 ms | kiln int8 ms | ORT int8 ms | fp32/int8 | kiln int8/ORT int8 "
          "| against ORT less binding | kiln int8 rounds | ORT int8 rounds | int8 MACs | kiln from QDQ (max, mean) "
          "| ORT from QDQ (max, mean) |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r['name']} | {'yes' if r['name'] in bm.TUNED_ON else 'no'} | {r['path']} | {r['f32']:.2f} "
              f"| {r['i8']:.2f} | {r['ort']:.2f} | {r['f32'] / r['i8']:.2f} | {r['i8'] / r['ort']:.2f} "
              f"| {r['i8'] / r['ort_less']:.2f} | {', '.join(f'{v:.2f}' for v in r['i8_rounds'])} "
              f"| {', '.join(f'{v:.2f}' for v in r['ort_rounds'])} | {r['share'] * 100:.0f}% "
              f"| {r['kiln_dist'][0]:.1e}, {r['kiln_dist'][1]:.1e} | {r['ort_dist'][0]:.1e}, {r['ort_dist'][1]:.1e} |")
    print()
    for p in paths:
        sel = [r for r in rows if r["path"] == p]
        worst = max(sel, key=lambda r: r["i8"] / r["ort"])
        print(f"kiln path {p}: kiln int8/ORT int8 geometric mean {bm.geomean([r['i8'] / r['ort'] for r in sel]):.2f} "
              f"over {len(sel)} models, slowest {worst['name']} {worst['i8'] / worst['ort']:.2f}; kiln fp32/int8 "
              f"geometric mean {bm.geomean([r['f32'] / r['i8'] for r in sel]):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
