#!/usr/bin/env python3
"""kiln plan --precision fp16 / bf16 on the CUDA delegate, real models, under
the host execution model (KILN_CUDA_EXECUTION=host: the CUDA kernels run
for real on the CPU, the 16-bit types in software with the GPU's rounding).

torchvision's mobilenet_v2 and resnet18 (BatchNorm statistics calibrated on
random batches, as a trained model's are, so activations have the unit
scale 16-bit storage is made for: with torchvision's initial statistics
mobilenet_v2's logits are about 1e-9, below float16's smallest number) and
a PyTorch TransformerEncoderLayer (random weights, fixed seeds) are planned
for the CPU (the reference) and for cuda:0,cpu with --precision fp32 (plan
only), fp16 and bf16. For each 16-bit plan:

  error      max|y - y_cpu| / max|y_cpu| <= 2 u sqrt(L + 1), where
             u = 2^-11 (float16) or 2^-8 (bfloat16) is the unit roundoff of
             rounding to nearest, and L the 16-bit kernels of the delegate
             (plan.json precision_storage.kernels_16bit), an upper bound on
             how many roundings a value meets on its way to the output.
             Each stored value is rounded once, by at most u relative; the
             kernels accumulate in FP32 (error about K 2^-24 for a sum of
             K products, far below u); in layers of gain about one, as in
             these normalised networks, independent roundings add in
             quadrature (sqrt(L + 1) u), and the factor 2 allows for gains
             above one. The output's own rounding is the + 1.
  storage    plan.json names the precision and its 16-bit dtype; at least
             80% of the fp32 plan's float32 device tensors are 16-bit in
             the 16-bit plan (or have a 16-bit twin where they meet FP32:
             the input's device copy, Softmax's and LayerNormalization's
             operands), each in exactly half the bytes;
  arenas     the CUDA arena bytes, less the largest planned cuBLASLt
             workspace (bytes, not elements: at least 1 MiB, it does not
             halve), are at most 55% of the fp32 plan's: half, plus what
             stays FP32 at the edges of 16-bit storage (the input's device
             copy and what only moves it, Softmax's and LayerNormalization's
             operands, their weights) and each tensor's alignment.

usage: cuda_precision_models.py --kiln PATH/TO/kiln --workdir DIR [--only NAME]
"""
import json
import math
import os
import subprocess
import sys

import numpy as np
import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from kiln_checks import calibrated, expect, export_model, finish, test_args  # noqa: E402

UNIT_ROUNDOFF = {"fp16": 2.0 ** -11, "bf16": 2.0 ** -8}
DTYPE = {"fp16": "float16", "bf16": "bfloat16"}


def transformer():
    return torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.0,
                                            batch_first=True)


MODELS = {
    "mobilenet_v2": (lambda s: calibrated(torchvision.models.mobilenet_v2(weights=None), s), (1, 3, 128, 128), 13),
    "resnet18": (lambda s: calibrated(torchvision.models.resnet18(weights=None), s), (1, 3, 128, 128), 13),
    "transformer": (lambda s: transformer(), (2, 16, 64), 17),
}


def run(cmd, env=None):
    return subprocess.run(cmd, capture_output=True, text=True, env=env)


def last_line(text):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def plan(kiln, onnx_path, program, flags):
    report = program + ".report"
    r = run([kiln, "plan", onnx_path, "-o", program, "--report", report, *flags])
    if r.returncode != 0:
        raise RuntimeError("plan: " + last_line(r.stderr))
    with open(os.path.join(report, "plan.json")) as f:
        plan_json = json.load(f)
    inspected = json.loads(run([kiln, "inspect", program, "--json"]).stdout)
    return plan_json, inspected["methods"][0]["tensors"]


def device_bytes(plan_json):
    """CUDA arena bytes less the largest planned scratch (cuBLASLt's workspace)."""
    arenas = sum(a["size"] for a in plan_json["arenas"] if a["device"].startswith("cuda"))
    scratch = [t["size"] for t in plan_json["tensors"]
               if t["category"] == "scratch" and t["device"].startswith("cuda")]
    return arenas - max(scratch, default=0)


def check_storage(name, precision, tensors, fp32_tensors):
    """Each float32 device tensor of the fp32 plan, in the 16-bit plan: 16-bit
    itself, or beside a 16-bit twin (NAME/fp16) where it meets FP32."""
    fp32 = {t["name"]: t for t in fp32_tensors if t["device"].startswith("cuda") and t["dtype"] == "float32"}
    low = {}
    for t in tensors:
        base = t["name"][:-len("/" + precision)] if t["name"].endswith("/" + precision) else t["name"]
        if base in fp32 and t["dtype"] == DTYPE[precision]:
            low[base] = t
    halved = all(2 * t["bytes"] == fp32[base]["bytes"] for base, t in low.items())
    expect(f"{name} {precision}: {len(low)} of {len(fp32)} float32 device tensors stored as {DTYPE[precision]} "
           f"(or beside a 16-bit twin), each in half the bytes", halved and len(low) >= 0.8 * len(fp32))


def check(name, kiln, workdir):
    build, shape, opset = MODELS[name]
    base = os.path.join(workdir, name)
    onnx_path, inp = export_model(build, shape, opset, base)
    r = run([kiln, "plan", onnx_path, "-o", base + ".cpu.kiln"])
    if r.returncode != 0:
        print(f"SKIP {name}: {last_line(r.stderr)}", flush=True)
        return 1
    r = run([kiln, "run", base + ".cpu.kiln", "--input", inp, "--output-dir", base + ".cpu.out"])
    expect(f"{name} cpu run", r.returncode == 0, last_line(r.stderr))
    want = np.load(os.path.join(base + ".cpu.out", "output_0.npy"))
    fp32_plan, fp32_tensors = plan(kiln, onnx_path, base + ".fp32.kiln", ["--target", "cuda:0,cpu"])
    env = dict(os.environ, KILN_CUDA_EXECUTION="host")
    for precision in ("fp16", "bf16"):
        program = f"{base}.{precision}.kiln"
        plan_json, tensors = plan(kiln, onnx_path, program, ["--target", "cuda:0,cpu", "--precision", precision])
        storage = plan_json.get("precision_storage", {})
        expect(f"{name} {precision}: plan.json says {plan_json['precision']}, {storage.get('dtype')}",
               plan_json["precision"] == precision and storage.get("dtype") == DTYPE[precision])
        check_storage(name, precision, tensors, fp32_tensors)
        ratio = device_bytes(plan_json) / device_bytes(fp32_plan)
        expect(f"{name} {precision}: CUDA arena bytes (less the GEMM workspace) {ratio:.3f} of fp32's", ratio <= 0.55)
        out = f"{base}.{precision}.out"
        r = run([kiln, "run", program, "--input", inp, "--output-dir", out], env=env)
        if not expect(f"{name} {precision} run", r.returncode == 0, last_line(r.stderr)):
            continue
        got = np.load(os.path.join(out, "output_0.npy"))
        kernels = storage.get("kernels_16bit", 0)
        tolerance = 2 * UNIT_ROUNDOFF[precision] * math.sqrt(kernels + 1)
        err = float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-30))
        expect(f"{name} {precision}: error vs the CPU {err:.2e} <= {tolerance:.2e} "
               f"({kernels} 16-bit kernels, {storage.get('casts')} casts, {storage.get('kernels_fp32')} kept FP32)",
               got.shape == want.shape and err <= tolerance)
    return 0


def main():
    args = test_args(with_only=True)
    skips = 0
    for name in MODELS:
        if args.only and name != args.only:
            continue
        skips += check(name, args.kiln, args.workdir)
    return finish(skipped=skips)


if __name__ == "__main__":
    sys.exit(main())
