#!/usr/bin/env python3
"""In-place reuse on real CNNs: torchvision mobilenet_v2, resnet18,
squeezenet1_1 and densenet121 (random weights, fixed seed) are planned with
and without in-place reuse. The arena must never grow, and the outputs must be
bit-identical (and match PyTorch). Every Concat of squeezenet1_1 (the fire
modules' two branches) and densenet121 (each dense layer's input and each
block's output) goes: its inputs are written in place.

usage: inplace_models.py --kiln PATH/TO/kiln --workdir DIR
"""
import os
import re
import subprocess
import sys

import numpy as np
import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from kiln_checks import expect, finish, test_args  # noqa: E402


def arena_bytes(out):
    m = re.search(r"--no-inplace \((\S+) -> (\S+)\)", out)
    return int(m.group(1).replace(",", "")), int(m.group(2).replace(",", ""))


def main():
    args = test_args()
    # The model and the Concats in-place reuse removes from it.
    for name, concats in (("mobilenet_v2", 0), ("resnet18", 0), ("squeezenet1_1", 8), ("densenet121", 62)):
        torch.manual_seed(0)
        model = getattr(torchvision.models, name)(weights=None).eval()
        x = torch.randn(1, 3, 224, 224)
        with torch.no_grad():
            expected = model(x).numpy()
        base = os.path.join(args.workdir, name)
        torch.onnx.export(model, x, base + ".onnx", opset_version=13, input_names=["x"], output_names=["y"])
        np.save(base + "_x.npy", x.numpy())
        outputs = {}
        for variant, flags in (("inplace", ["--compare-inplace"]), ("no-inplace", ["--no-inplace"])):
            program = f"{base}.{variant}.kiln"
            p = subprocess.run([args.kiln, "plan", base + ".onnx", "-o", program, *flags], check=True,
                               capture_output=True, text=True)
            if variant == "inplace":
                without, with_ = arena_bytes(p.stdout)
                removed = int(re.search(r"(\d+) concats removed", p.stdout).group(1))
            outdir = f"{base}.{variant}.out"
            subprocess.run([args.kiln, "run", program, "--input", base + "_x.npy", "--output-dir", outdir],
                           check=True, stdout=subprocess.DEVNULL)
            outputs[variant] = np.load(os.path.join(outdir, "output_0.npy"))
        identical = np.array_equal(outputs["inplace"], outputs["no-inplace"])
        err = float(np.max(np.abs(outputs["inplace"] - expected)) / np.max(np.abs(expected)))
        expect(f"{name}: arena {without:,} -> {with_:,} bytes with in-place "
               f"({100.0 * (without - with_) / without:.1f}% less), outputs identical: {identical}, "
               f"relative error vs PyTorch {err:.2e}, {removed} concats removed",
               with_ <= without and identical and err <= 1e-4 and removed == concats)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
