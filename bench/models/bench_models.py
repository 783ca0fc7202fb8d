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
geometric mean of kiln/ORT per path and thread count, the large models one
by one, and the models measured only (not tuned on) apart.

Like for like: kiln runs with small pages by default (--huge-pages off), as
ORT's heap has where the system's transparent huge pages are 'madvise'; and
ORT's Node binding costs each call a promise and tensor wrapping that
kiln's timing (Method::execute() alone) does not include, so the binding's
cost is measured on a one-element model and each table gives the ratio
both with and without it.

`--models tiny_chain` (not part of 'all') runs 100 element-wise ops on 64
floats, where the time is what each instruction costs beyond its work.

ONNX Runtime comes from npm: `npm i --ignore-scripts onnxruntime-node` in
bench/models (node_modules is not committed) or in the directory --ort-dir
names.

usage: bench_models.py --kiln build/release/bin/kiln [--ort-dir DIR]
                       [--rounds 5] [--runs 20] [--models a,b|all|tuned|large|original]
                       [--isa avx512,avx2] [--threads 1,2] [--huge-pages off|on] [--workdir DIR] [--cpus 0]
                       [--precision fp32,bf16]

--precision bf16 plans a second program with `kiln plan --precision bf16`
(BF16 weights and products, FP32 accumulation: AVX512-BF16) and times it on
the avx512 and auto paths as "PATH bf16" against the same ORT runs, which
stay FP32 (ONNX Runtime has no BF16 path on x86 CPUs); its error against
PyTorch's FP32 output is in the same table.
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


class UNet(nn.Module):
    """A small U-Net (four levels, 32 to 256 channels, transposed-convolution
    up-sampling, skip connections by Concat) on a 256x256 image."""

    def __init__(self, widths=(32, 64, 128, 256), cin=3, cout=2):
        super().__init__()

        def double(i, o):
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(inplace=True),
                                 nn.Conv2d(o, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(inplace=True))
        self.down = nn.ModuleList()
        c = cin
        for w in widths:
            self.down.append(double(c, w))
            c = w
        self.up = nn.ModuleList()
        self.merge = nn.ModuleList()
        for w in reversed(widths[:-1]):
            self.up.append(nn.ConvTranspose2d(c, w, 2, stride=2))
            self.merge.append(double(2 * w, w))
            c = w
        self.head = nn.Conv2d(c, cout, 1)

    def forward(self, x):
        skips = []
        for i, block in enumerate(self.down):
            x = block(x)
            if i + 1 < len(self.down):
                skips.append(x)
                x = nn.functional.max_pool2d(x, 2)
        for up, merge in zip(self.up, self.merge):
            x = merge(torch.cat([up(x), skips.pop()], dim=1))
        return self.head(x)


def vit(width, heads):
    # A ViT/16 on 224x224, 12 layers, MLP 4x wide. torchvision starts the
    # classifier at zero (every output 0 on any input): drawn at random here
    # so outputs, and errors against PyTorch, mean something.
    from torchvision.models.vision_transformer import VisionTransformer
    model = VisionTransformer(image_size=224, patch_size=16, num_layers=12, num_heads=heads, hidden_dim=width,
                              mlp_dim=4 * width)
    nn.init.normal_(model.heads.head.weight, std=0.02)
    return model


def vit_small():
    return vit(384, 6)  # ViT-S/16 (DeiT-Small's shape)


def vit_tiny():
    return vit(192, 3)  # ViT-Ti/16 (DeiT-Tiny's shape)


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
    # The large models users time first, and more architectures: measured
    # only at first; the large-model work since tuned on four of them
    # (TUNED_ON).
    "resnet50": (lambda: tv.resnet50(weights=None), (1, 3, 224, 224), True),
    "resnext50_32x4d": (lambda: tv.resnext50_32x4d(weights=None), (1, 3, 224, 224), True),
    "convnext_tiny": (lambda: tv.convnext_tiny(weights=None), (1, 3, 224, 224), False),
    "swin_t": (lambda: tv.swin_t(weights=None), (1, 3, 224, 224), False),
    "vit_small": (vit_small, (1, 3, 224, 224), False),
    "unet": (UNet, (1, 3, 256, 256), True),
    "gpt_block_256": (lambda: GptBlock(seq=256), (1, 256, 768), False),
    "googlenet": (lambda: tv.googlenet(weights=None, aux_logits=False, init_weights=True), (1, 3, 224, 224), True),
    "shufflenet_v2": (lambda: tv.shufflenet_v2_x1_0(weights=None), (1, 3, 224, 224), True),
    "vit_tiny": (vit_tiny, (1, 3, 224, 224), False),
}
ORIGINAL = ["mobilenet_v2", "resnet18", "encoder_block"]
# The models the CPU kernels were tuned on: issue 17's broad set, then the
# large models whose layers the large-model work tuned on (bench/RESULTS.md
# names them section by section: ResNet-50's and ResNeXt-50's layers,
# ConvNeXt-T's token MLPs, the U-Net's Winograd layers). Every other model
# is measured only.
TUNED_ON = ["mobilenet_v2", "resnet18", "encoder_block", "efficientnet_b0", "mnasnet1_0", "mobilenet_v3_small",
            "regnet_y_400mf", "squeezenet1_1", "densenet121", "lraspp_mobilenet_v3", "gpt_block", "elementwise_chain",
            "resnet50", "resnext50_32x4d", "convnext_tiny", "unet"]
# Over 20 ms in ONNX Runtime on one thread of the machines here.
LARGE = ["resnet50", "resnext50_32x4d", "convnext_tiny", "swin_t", "vit_small", "unet", "densenet121",
         "gpt_block_256", "resnet18", "lraspp_mobilenet_v3"]
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


def kiln_round(kiln, program, workdir, name, runs, isa, threads=1, huge_pages="off"):
    outdir = os.path.join(workdir, name + "_kiln_out")
    command = [kiln, "run", program, "--input", os.path.join(workdir, name + "_input.npy"), "--output-dir", outdir,
               "--runs", str(runs), "--threads", str(threads), "--huge-pages", huge_pages]
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


def ort_binding_ms(ort_dir, workdir, runs, threads):
    """What one session.run() costs ONNX Runtime's Node binding beyond the
    model: the median call on a one-element Add (a promise, the input and
    output tensors wrapped, one kernel of one float)."""
    import onnx
    from onnx import TensorProto, helper
    graph = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "one_add",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = os.path.join(workdir, "one_add.onnx")
    onnx.save(model, path)
    np.array([1.0], dtype=np.float32).tofile(os.path.join(workdir, "one_add_input.bin"))
    result, _ = ort_round(ort_dir, path, workdir, "one_add", (1,), runs, threads)
    return result["median_ms"]


def kiln_memory(kiln, program):
    info = json.loads(subprocess.run([kiln, "inspect", program, "--json"], check=True, capture_output=True,
                                     text=True).stdout)
    arenas = sum(a["size"] for m in info["methods"] for a in m["arenas"])
    return arenas, info["segment_bytes"]


def geomean(values):
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def mib(n):
    return f"{n / (1 << 20):.1f}"


def add_cpus_option(parser):
    parser.add_argument("--cpus", default="",
                        help="comma-separated CPU numbers both sides run on (sched_setaffinity, inherited by kiln and "
                             "node); where a host's vCPUs run at different speeds, one-thread figures need one")


def pin_cpus(parser, args):
    """Runs this process, and so kiln and node, on the CPUs --cpus names."""
    if not args.cpus:
        return
    try:
        cpus = {int(c) for c in args.cpus.split(",")}
    except ValueError:
        parser.error(f"--cpus takes CPU numbers separated by commas, not '{args.cpus}'")
    if not cpus <= os.sched_getaffinity(0):
        parser.error(f"--cpus {args.cpus}: this process may run on CPUs "
                     f"{','.join(map(str, sorted(os.sched_getaffinity(0))))} only")
    os.sched_setaffinity(0, cpus)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--ort-dir", default=os.environ.get("KILN_ORT_DIR", HERE),
                        help="directory whose node_modules holds onnxruntime-node")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--models", default="all",
                        help="comma-separated names, 'all', 'tuned' (the models the kernels were tuned on), 'large' "
                             "or 'original'")
    parser.add_argument("--huge-pages", choices=["off", "on"], default="off",
                        help="kiln run --huge-pages: off (default) gives kiln the small pages ONNX Runtime's heap "
                             "has where the system's transparent huge pages are 'madvise'")
    parser.add_argument("--isa", default="auto",
                        help="kiln's CPU paths, comma-separated (auto, avx512, avx2, scalar)")
    parser.add_argument("--threads", default="1",
                        help="thread counts, comma-separated: kiln run --threads N against ORT's N intra-op threads")
    parser.add_argument("--workdir", default=os.path.join(HERE, "..", "..", "build", "bench-models"))
    parser.add_argument("--precision", default="fp32",
                        help="kiln plan --precision of kiln's programs, comma-separated (fp32, bf16: on the avx512 and "
                             "auto paths only)")
    add_cpus_option(parser)
    args = parser.parse_args()
    pin_cpus(parser, args)
    os.makedirs(args.workdir, exist_ok=True)
    kiln = os.path.abspath(args.kiln)

    names = {"all": list(MODELS), "original": ORIGINAL, "tuned": TUNED_ON, "large": LARGE}.get(
        args.models) or args.models.split(",")
    for name in names:
        if name not in MODELS and name not in EXTRA:
            parser.error(f"unknown model '{name}' (known: {', '.join(list(MODELS) + list(EXTRA))})")
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            thp = re.search(r"\[(\w+)\]", f.read()).group(1)
    except OSError:
        thp = "unknown"
    precisions = args.precision.split(",")
    for precision in precisions:
        if precision not in ("fp32", "bf16"):
            parser.error(f"--precision {precision}: fp32 or bf16")
    # kiln's variants: each path with each precision (BF16 products need the
    # avx512 path), labelled "PATH" or "PATH bf16".
    variants = {(p if q == "fp32" else f"{p} bf16"): (p, q) for q in precisions for p in args.isa.split(",")
                if q == "fp32" or p in ("auto", "avx512")}
    paths = list(variants)
    thread_counts = [int(t) for t in args.threads.split(",")]
    # ONNX Runtime's per-call binding cost, measured before and after the
    # models (the larger of the two medians is taken off ORT's side in the
    # adjusted column).
    binding = {t: [ort_binding_ms(args.ort_dir, args.workdir, 200, t)] for t in thread_counts}
    rows = []
    for name in names:
        onnx_path, shape, expected = export(name, args.workdir)
        programs = {}
        for q in precisions:
            programs[q] = os.path.join(args.workdir, name + ("" if q == "fp32" else "." + q) + ".kiln")
            subprocess.run([kiln, "plan", onnx_path, "-o", programs[q], "--precision", q], check=True,
                           stdout=subprocess.DEVNULL)
        memory = {q: kiln_memory(kiln, programs[q]) for q in precisions}
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
                    isa, q = variants[p]
                    ms, got = kiln_round(kiln, programs[q], args.workdir, name, args.runs, isa, t, args.huge_pages)
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
                                 kiln_rounds=list(kiln_ms[(p, t)]), ort_rounds=list(ort_ms[t]),
                                 kiln_spread=(min(kiln_ms[(p, t)]), max(kiln_ms[(p, t)])),
                                 ort_spread=(min(ort_ms[t]), max(ort_ms[t])), kiln_err=kiln_err[(p, t)],
                                 ort_err=ort_err, arenas=memory[variants[p][1]][0],
                                 constants=memory[variants[p][1]][1],
                                 ort_rss=int(np.median(ort_rss))))

    for t in thread_counts:
        binding[t].append(ort_binding_ms(args.ort_dir, args.workdir, 200, t))
    print(f"ONNX Runtime {ort_version} (onnxruntime-node), {args.threads} intra-op thread(s) as kiln, 1 inter-op "
          f"thread, sequential, graph optimizations all; {args.rounds} rounds of {args.runs} runs each, kiln and "
          f"ORT back to back. Every round is kept (the ranges are all rounds' medians).")
    allowed = sorted(os.sched_getaffinity(0))
    print(f"CPUs both sides may run on: {','.join(map(str, allowed))} of {os.cpu_count()}"
          f"{' (--cpus)' if args.cpus else ''}.")
    print(f"Transparent huge pages: the system's setting is '{thp}'; kiln run --huge-pages {args.huge_pages} "
          f"({'the same small pages as ORT' if args.huge_pages == 'off' or thp == 'always' else 'kiln only: ORT has none'}).")
    print("What each side's time covers: kiln, Method::execute() with the inputs bound once (kiln run); ORT, one "
          "await session.run() from Node (the binding's promise and tensor wrapping, output allocation, the model).")
    for t in thread_counts:
        print(f"ORT's binding per call ({t} thread{'s' if t > 1 else ''}, median of 200 calls of a one-element Add, "
              f"before and after the models): {binding[t][0] * 1e3:.0f} and {binding[t][1] * 1e3:.0f} us; the "
              f"'less binding' columns take the larger off ORT's time.")
    print()
    print("| model | tuned on | kiln path | threads | kiln ms | ORT ms | kiln/ORT | ORT ms less binding | kiln/(ORT less "
          "binding) | kiln round medians | ORT round medians | kiln rel. error | ORT rel. error "
          "| kiln arenas + constants (MiB) | ORT peak RSS delta (MiB) |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---:|")
    for r in rows:
        r["ort_less"] = max(r["ort"] - max(binding[r["threads"]]), 1e-6)
        r["ratio_less"] = r["kiln"] / r["ort_less"]
        print(f"| {r['name']} | {'yes' if r['name'] in TUNED_ON else 'no'} | {r['path']} | {r['threads']} "
              f"| {r['kiln']:.2f} | {r['ort']:.2f} | {r['ratio']:.2f} | {r['ort_less']:.2f} | {r['ratio_less']:.2f} "
              f"| {', '.join(f'{v:.2f}' for v in r['kiln_rounds'])} | {', '.join(f'{v:.2f}' for v in r['ort_rounds'])} "
              f"| {r['kiln_err']:.1e} | {r['ort_err']:.1e} "
              f"| {mib(r['arenas'])} + {mib(r['constants'])} = {mib(r['arenas'] + r['constants'])} "
              f"| {mib(r['ort_rss'])} |")
    print()

    for t in thread_counts:
        for p in paths:
            sel = [r for r in rows if r["path"] == p and r["threads"] == t]
            worst = max(sel, key=lambda r: r["ratio"])
            above = ", ".join(f"{r['name']} {r['ratio']:.2f}" for r in sel if r["ratio"] > 1.0) or "none"
            print(f"kiln path {p}, {t} thread{'s' if t > 1 else ''}: geometric mean of kiln/ORT "
                  f"{geomean([r['ratio'] for r in sel]):.2f} over {len(sel)} models "
                  f"({geomean([r['ratio_less'] for r in sel]):.2f} against ORT less its binding); slowest relative "
                  f"to ORT: {worst['name']} at {worst['ratio']:.2f}x; above 1.0x: {above}")
            large = [r for r in sel if r["name"] in LARGE]
            if large:
                print(f"  large models (over 20 ms in ORT on one thread here): " +
                      ", ".join(f"{r['name']} {r['ratio']:.2f}" for r in large) +
                      f"; geometric mean {geomean([r['ratio'] for r in large]):.2f}")
            measured = [r for r in sel if r["name"] not in TUNED_ON]
            if measured:
                print(f"  measured only (not tuned on): geometric mean {geomean([r['ratio'] for r in measured]):.2f} "
                      f"over {len(measured)}")
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
