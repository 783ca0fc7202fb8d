#!/usr/bin/env python3
"""kiln plan --precision bf16 on the CPU: BF16 weights, products in BF16
with FP32 accumulation (AVX512-BF16), on real models.

torchvision's resnet18 (BatchNorm statistics calibrated on random batches,
as a trained model's are), a PyTorch TransformerEncoderLayer and an MLP of
Linear layers (Gemm) are planned for the CPU twice, fp32 and bf16. For the
bf16 plan:

  weights    every Conv (one group), Gemm and MatMul with constant weights
             that the fp32 plan packs (the constants NAME/packed_weight,
             NAME/packed_b, and a Winograd convolution's
             NAME/winograd_weight) is packed in bfloat16 instead, except a first
             layer (at most 4 channels, stride 2), which keeps its direct
             FP32 kernel, and the program's constants shrink by at least
             40% of those weights' FP32 bytes;
  error      max|y - y_fp32| / max|y_fp32| <= 4 u sqrt(L + 1), where
             u = 2^-8 is bfloat16's unit roundoff and L the BF16 products
             (the BF16 weights; a Winograd convolution counts once though
             it runs 16 products: kernels_gemm_bf16_test bounds its own
             error by 4u of its output's scale): each product rounds both
             of its operands (weights at plan time, activations as they
             are packed), by at most u relative each, and accumulates in
             FP32 (about K 2^-24 for K terms, far below u); in layers of
             gain about one, independent roundings add in quadrature, and
             the factor 2 per operand allows for gains above one;
  refusal    with KILN_ISA=avx2 (no BF16 products on that path) `kiln run`
             refuses the program at load, exit status non-zero, with one
             line that names the node, BF16 and --precision bf16.

On a processor without AVX512-BF16 the runs are skipped (the refusal is
still checked), with the reason.

usage: cpu_bf16_models.py --kiln PATH/TO/kiln --workdir DIR [--only NAME]
"""
import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from kiln_checks import calibrated, expect, export_model, finish, test_args  # noqa: E402

UNIT_ROUNDOFF = 2.0 ** -8


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(96, 256), torch.nn.GELU(), torch.nn.Linear(256, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 10))


MODELS = {
    "resnet18": (lambda s: calibrated(torchvision.models.resnet18(weights=None), s), (1, 3, 96, 96), 13),
    "transformer": (lambda s: torch.nn.TransformerEncoderLayer(d_model=96, nhead=4, dim_feedforward=192, dropout=0.0,
                                                               batch_first=True), (2, 24, 96), 17),
    "mlp": (lambda s: mlp(), (8, 96), 13),
}
# Packed weights that stay FP32 (a first layer's, for its direct kernel).
KEEP_FP32 = {"resnet18": {"/conv1/Conv"}}


def run(cmd, env=None):
    return subprocess.run(cmd, capture_output=True, text=True, env=env)


def last_line(text):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def processor_has_bf16():
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return False
    return "avx512_bf16" in flags


def packed_weights(kiln, program):
    """The packed weight constants of a program: the node they belong to -> (dtype, bytes). A node's
    weights are packed for the kernel its plan picked (ConvLanes' lanes_weight in FP32 plans only)."""
    inspected = json.loads(run([kiln, "inspect", program, "--json"]).stdout)
    pattern = r"/(packed_weight|packed_b|winograd_weight|lanes_weight)(__\d+)?$"
    return {t["name"].rsplit("/", 1)[0]: (t["dtype"], t["bytes"]) for t in inspected["methods"][0]["tensors"]
            if t["storage"] == "constant" and re.search(pattern, t["name"])}


def check(name, kiln, workdir, has_bf16):
    build, shape, opset = MODELS[name]
    base = os.path.join(workdir, name)
    onnx_path, inp = export_model(build, shape, opset, base)
    programs = {}
    for precision in ("fp32", "bf16"):
        programs[precision] = f"{base}.{precision}.kiln"
        r = run([kiln, "plan", onnx_path, "-o", programs[precision], "--precision", precision, "--report",
                 programs[precision] + ".report"])
        if not expect(f"{name} {precision} plan", r.returncode == 0, last_line(r.stderr)):
            return 0
    # The summary and plan.json count the BF16 products and their weights.
    with open(os.path.join(programs["bf16"] + ".report", "plan.json")) as f:
        cpu_bf16 = json.load(f).get("cpu_bf16", {})
    summary = [line.strip() for line in r.stdout.splitlines() if "bf16 on the CPU" in line]
    fp32_weights = packed_weights(kiln, programs["fp32"])
    bf16_weights = packed_weights(kiln, programs["bf16"])
    converted = [n for n, (dtype, _) in bf16_weights.items() if dtype == "bfloat16"]
    kept = {n for n, (dtype, _) in bf16_weights.items() if dtype != "bfloat16"}
    expect(f"{name}: {len(converted)} of {len(fp32_weights)} packed weights in bfloat16, FP32: {sorted(kept)} "
           f"(the fp32 plan's are all float32)",
           len(converted) > 0 and kept == KEEP_FP32.get(name, set()) and sorted(bf16_weights) == sorted(fp32_weights)
           and all(dtype == "float32" for dtype, _ in fp32_weights.values()))
    weight_bytes = sum(b for n, (_, b) in fp32_weights.items() if bf16_weights[n][0] == "bfloat16")
    bf16_bytes = sum(b for n, (dtype, b) in bf16_weights.items() if dtype == "bfloat16")
    expect(f"{name}: plan.json cpu_bf16 {cpu_bf16}, the summary: {summary}",
           cpu_bf16.get("products") == len(converted) and cpu_bf16.get("weight_bytes") == bf16_bytes and
           len(summary) == 1 and f"{len(converted)} product" in summary[0])
    # The BF16 weights replace the FP32 ones (in whatever layout each plan's kernel reads them: the
    # FP32 plan's 7 x 7 convolutions take ConvLanes, the BF16 plan's the BF16 product).
    shrink = os.path.getsize(programs["fp32"]) - os.path.getsize(programs["bf16"])
    saving = weight_bytes - bf16_bytes
    expect(f"{name}: the program is {shrink:,} bytes smaller, its {weight_bytes:,} bytes of FP32 packed weights "
           f"{saving:,} more than their {bf16_bytes:,} in BF16", saving > 0 and
           shrink >= 0.95 * saving)

    refused = run([kiln, "run", programs["bf16"], "--input", inp], env=dict(os.environ, KILN_ISA="avx2"))
    lines = [line for line in refused.stderr.splitlines() if "BF16" in line and "--precision bf16" in line]
    expect(f"{name}: refused on the avx2 path: {lines[0] if lines else last_line(refused.stderr)}",
           refused.returncode != 0 and len(lines) == 1)
    if not has_bf16:
        print(f"SKIP {name} runs: this processor has no AVX512-BF16", flush=True)
        return 1

    outputs = {}
    for precision, program in programs.items():
        out = f"{base}.{precision}.out"
        r = run([kiln, "run", program, "--input", inp, "--output-dir", out])
        if not expect(f"{name} {precision} run", r.returncode == 0, last_line(r.stderr)):
            return 0
        outputs[precision] = np.load(os.path.join(out, "output_0.npy"))
    want, got = outputs["fp32"], outputs["bf16"]
    tolerance = 4 * UNIT_ROUNDOFF * math.sqrt(len(converted) + 1)
    err = float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-30))
    expect(f"{name} bf16: error vs fp32 {err:.2e} <= {tolerance:.2e} ({len(converted)} BF16 products)",
           got.shape == want.shape and err <= tolerance and err > 0)
    return 0


def main():
    args = test_args(with_only=True)
    has_bf16 = processor_has_bf16()
    skips = 0
    for name in MODELS:
        if args.only and name != args.only:
            continue
        skips += check(name, args.kiln, args.workdir, has_bf16)
    return finish(skipped=skips)


if __name__ == "__main__":
    sys.exit(main())
