#!/usr/bin/env python3
"""kiln against ONNX Runtime on real models, CPU, at equal thread counts.

Exports torchvision classification and segmentation models (random weights,
batch norm calibrated on random inputs so activations stay O(1); the three
original models, mobilenet_v2, resnet18 and the encoder block, are exported
as before), transformer blocks and element-wise chains with a fixed seed,
plans each with `kiln plan`, then for several rounds runs `kiln run --runs N`
once per CPU path and thread count asked for (--isa: `kiln run --isa P`;
--threads: `kiln run --threads N`) and ONNX Runtime at each thread count
(ort_runner.js: N intra-op threads, sequential, all graph optimizations,
its own best path) back to back on the same input. Prints, per model and path, the
median over rounds of each round's median latency, the ratio kiln / ORT,
the spread of the round medians (how noisy the machine was), the relative
error max|y - torch| / max|torch| of kiln and of ORT against PyTorch, and
memory: kiln's arenas plus its constant segment (exact, from the program),
ORT's peak RSS growth over session creation and the runs; then the
geometric mean of kiln/ORT per path and thread count.

`--models tiny_chain` (not part of 'all') runs 100 element-wise ops on 64
floats, where the time is what each instruction costs beyond its work.

ONNX Runtime comes from npm: `npm i --ignore-scripts onnxruntime-node` in
bench/models (node_modules is not committed) or in the directory --ort-dir
names.

usage: bench_models.py --kiln build/release/bin/kiln [--ort-dir DIR]
                       [--rounds 5] [--runs 20] [--models a,b|all|original]
                       [--isa avx512,avx2] [--threads 1,2] [--workdir DIR]
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


class GptBlock(nn.Module):
    """A GPT-2 style pre-norm block: causal self-attention and a tanh-GELU MLP."""

    def __init__(self, d=768, heads=12, seq=128):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.gelu = nn.GELU(approximate="tanh")
        self.register_buffer("mask", torch.full((seq, seq), float("-inf")).triu(1))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.heads)) + self.mask[:t, :t]
        y = (att.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.out(self.gelu(self.fc(self.ln2(x))))


class ElementwiseChain(nn.Module):
    """Transcendental element-wise ops over 800k floats (1x64x112x112)."""

    def forward(self, x):
        y = torch.tanh(x - 0.5)
        y = y * torch.sigmoid(y)
        y = torch.nn.functional.gelu(y + x)
        y = torch.exp(-y * y) + torch.nn.functional.hardswish(x)
        y = torch.log(y + 1.5) * torch.nn.functional.hardsigmoid(x)
        return torch.erf(y) + torch.pow(y, 3)


class TinyChain(nn.Module):
    """100 element-wise ops on 64 floats: what each instruction costs beyond its work."""

    def forward(self, x):
        for _ in range(25):
            x = torch.abs(x + 0.1)
            x = -(x * 0.9)
        return x


def segmentation(make):
    # The 'out' map of a torchvision segmentation model, as one tensor.
    class Out(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = make()

        def forward(self, x):
            return self.model(x)["out"]
    return Out()


tv = torchvision.models
# name: (constructor, input shape, calibrate batch norm)
MODELS = {
    "mobilenet_v2": (lambda: tv.mobilenet_v2(weights=None), (1, 3, 224, 224), False),
    "resnet18": (lambda: tv.resnet18(weights=None), (1, 3, 224, 224), False),
    "encoder_block": (encoder_block, (1, 128, 512), False),
    "efficientnet_b0": (lambda: tv.efficientnet_b0(weights=None), (1, 3, 224, 224), True),
    "mnasnet1_0": (lambda: tv.mnasnet1_0(weights=None), (1, 3, 224, 224), True),
    "mobilenet_v3_small": (lambda: tv.mobilenet_v3_small(weights=None), (1, 3, 224, 224), True),
    "regnet_y_400mf": (lambda: tv.regnet_y_400mf(weights=None), (1, 3, 224, 224), True),
    "squeezenet1_1": (lambda: tv.squeezenet1_1(weights=None), (1, 3, 224, 224), True),
    "densenet121": (lambda: tv.densenet121(weights=None), (1, 3, 224, 224), True),
    "lraspp_mobilenet_v3": (lambda: segmentation(lambda: tv.segmentation.lraspp_mobilenet_v3_large(
        weights=None, weights_backbone=None)), (1, 3, 320, 320), True),
    "gpt_block": (GptBlock, (1, 128, 768), False),
    "elementwise_chain": (ElementwiseChain, (1, 64, 112, 112), False),
}
ORIGINAL = ["mobilenet_v2", "resnet18", "encoder_block"]
# Named with --models only (not in 'all', whose geometric mean is the broad set's).
EXTRA = {
    "tiny_chain": (TinyChain, (1, 64), False),
}


def calibrate_batch_norm(model, shape):
    # Running statistics from random inputs (cumulative average), so random
    # weights give activations of order one instead of growing or vanishing.
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn(2, *shape[1:]))
    model.eval()


def export(name, workdir):
    make, shape, calibrate = MODELS[name] if name in MODELS else EXTRA[name]
    torch.manual_seed(1234)
    model = make().eval()
    if calibrate:
        calibrate_batch_norm(model, shape)
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


def kiln_round(kiln, program, workdir, name, runs, isa, threads=1):
    outdir = os.path.join(workdir, name + "_kiln_out")
    command = [kiln, "run", program, "--input", os.path.join(workdir, name + "_input.npy"), "--output-dir", outdir,
               "--runs", str(runs), "--threads", str(threads)]
    out = subprocess.run(command + (["--isa", isa] if isa != "auto" else []), check=True, capture_output=True,
                         text=True).stdout
    median = float(re.search(r"latency: median ([0-9.]+) ms", out).group(1))
    return median, np.load(os.path.join(outdir, "output_0.npy"))


def ort_round(ort_dir, onnx_path, workdir, name, shape, runs, threads=1):
    out_bin = os.path.join(workdir, name + "_ort_out.bin")
    env = dict(os.environ, NODE_PATH=os.path.join(ort_dir, "node_modules"))
    out = subprocess.run(["node", os.path.join(HERE, "ort_runner.js"), onnx_path,
                          os.path.join(workdir, name + "_input.bin"), "x".join(map(str, shape)), str(runs),
                          out_bin, str(threads)], check=True, capture_output=True, text=True, env=env).stdout
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
    parser.add_argument("--models", default="all", help="comma-separated names, 'all' or 'original'")
    parser.add_argument("--isa", default="auto",
                        help="kiln's CPU paths, comma-separated (auto, avx512, avx2, scalar)")
    parser.add_argument("--threads", default="1",
                        help="thread counts, comma-separated: kiln run --threads N against ORT's N intra-op threads")
    parser.add_argument("--workdir", default=os.path.join(HERE, "..", "..", "build", "bench-models"))
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    kiln = os.path.abspath(args.kiln)

    names = list(MODELS) if args.models == "all" else ORIGINAL if args.models == "original" else \
        args.models.split(",")
    paths = args.isa.split(",")
    thread_counts = [int(t) for t in args.threads.split(",")]
    rows = []
    for name in names:
        onnx_path, shape, expected = export(name, args.workdir)
        program = os.path.join(args.workdir, name + ".kiln")
        subprocess.run([kiln, "plan", onnx_path, "-o", program], check=True, stdout=subprocess.DEVNULL)
        arenas, constants = kiln_memory(kiln, program)
        kiln_ms = {(p, t): [] for p in paths for t in thread_counts}
        kiln_err = {}
        ort_ms = {t: [] for t in thread_counts}
        ort_rss = []
        ort_err = None
        ort_version = "?"
        # Rounds interleave everything (each path and thread count of kiln,
        # then ORT at each thread count), so load on the machine spreads over
        # all of them alike.
        for _ in range(args.rounds):
            for t in thread_counts:
                for p in paths:
                    ms, got = kiln_round(kiln, program, args.workdir, name, args.runs, p, t)
                    kiln_ms[(p, t)].append(ms)
                    kiln_err[(p, t)] = rel_error(got.reshape(expected.shape), expected)
                result, ort_out = ort_round(args.ort_dir, onnx_path, args.workdir, name, shape, args.runs, t)
                ort_ms[t].append(result["median_ms"])
                ort_rss.append(result["peak_rss_delta_bytes"])
                ort_version = result["version"]
                ort_err = rel_error(ort_out.reshape(expected.shape), expected)
                print(f"  {name} ({t} thread{'s' if t > 1 else ''}): " +
                      ", ".join(f"kiln {p} {kiln_ms[(p, t)][-1]:.2f} ms" for p in paths) +
                      f", ORT {result['median_ms']:.2f} ms", file=sys.stderr, flush=True)
        for t in thread_counts:
            o = float(np.median(ort_ms[t]))
            for p in paths:
                k = float(np.median(kiln_ms[(p, t)]))
                rows.append(dict(name=name, path=p, threads=t, kiln=k, ort=o, ratio=k / o,
                                 kiln_spread=(min(kiln_ms[(p, t)]), max(kiln_ms[(p, t)])),
                                 ort_spread=(min(ort_ms[t]), max(ort_ms[t])), kiln_err=kiln_err[(p, t)],
                                 ort_err=ort_err, arenas=arenas, constants=constants,
                                 ort_rss=int(np.median(ort_rss))))

    print(f"ONNX Runtime {ort_version} (onnxruntime-node), {args.threads} intra-op thread(s) as kiln, 1 inter-op "
          f"thread, sequential, graph optimizations all; {args.rounds} rounds of {args.runs} runs each, kiln and "
          f"ORT back to back.")
    print()
    print("| model | kiln path | threads | kiln ms | ORT ms | kiln/ORT | kiln round medians | ORT round medians "
          "| kiln rel. error | ORT rel. error | kiln arenas + constants (MiB) | ORT peak RSS delta (MiB) |")
    print("|---|---|---:|---:|---:|---:|---|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['name']} | {r['path']} | {r['threads']} | {r['kiln']:.2f} | {r['ort']:.2f} | {r['ratio']:.2f} "
              f"| {r['kiln_spread'][0]:.2f}-{r['kiln_spread'][1]:.2f} | {r['ort_spread'][0]:.2f}-{r['ort_spread'][1]:.2f} "
              f"| {r['kiln_err']:.1e} | {r['ort_err']:.1e} "
              f"| {mib(r['arenas'])} + {mib(r['constants'])} = {mib(r['arenas'] + r['constants'])} "
              f"| {mib(r['ort_rss'])} |")
    print()
    for t in thread_counts:
        for p in paths:
            sel = [r for r in rows if r["path"] == p and r["threads"] == t]
            geomean = math.exp(sum(math.log(r["ratio"]) for r in sel) / len(sel))
            worst = max(sel, key=lambda r: r["ratio"])
            above = ", ".join(f"{r['name']} {r['ratio']:.2f}" for r in sel if r["ratio"] > 1.0) or "none"
            print(f"kiln path {p}, {t} thread{'s' if t > 1 else ''}: geometric mean of kiln/ORT {geomean:.2f} over "
                  f"{len(sel)} models; slowest relative to ORT: {worst['name']} at {worst['ratio']:.2f}x; "
                  f"above 1.0x: {above}")
    if len(thread_counts) > 1:
        # What the extra threads bought each side: time on the first count over time on each other.
        t0 = thread_counts[0]
        for t in thread_counts[1:]:
            for p in paths:
                ks = [next(r for r in rows if r["name"] == n and r["path"] == p and r["threads"] == t0)["kiln"] /
                      next(r for r in rows if r["name"] == n and r["path"] == p and r["threads"] == t)["kiln"]
                      for n in names]
                os_ = [next(r for r in rows if r["name"] == n and r["threads"] == t0)["ort"] /
                       next(r for r in rows if r["name"] == n and r["threads"] == t)["ort"] for n in names]
                gk = math.exp(sum(map(math.log, ks)) / len(ks))
                go = math.exp(sum(map(math.log, os_)) / len(os_))
                print(f"speed-up from {t0} to {t} threads (geometric mean): kiln path {p} {gk:.2f}x, ORT {go:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
