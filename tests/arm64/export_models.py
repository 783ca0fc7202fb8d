#!/usr/bin/env python3
"""Plans PyTorch models on the host for kiln-runner on another machine.

Each model becomes one case folder, as `kiln-runner check` reads them:
OUT/<name>/program.kiln (planned by the host's `kiln plan`), input_0.bin
(the input's raw float32 bytes) and expected_0.bin (PyTorch's output for
it), plus <name>.onnx and input.npy beside them.

  --set tests   small models the arm64 tests run under qemu in seconds on
                either CPU path: the demo CNN (examples/demo) and a
                transformer encoder block (width 64, 4 heads, 16 tokens)
  --set int8    MLPerf Tiny's int8 models and two blocks (tests/models/qdq_models.py),
                planned with --quantized-io: input_0.bin holds the quantized
                input bytes and expected_0.bin the bytes the host's kiln gives
                for them, which every host path gives alike (ctest
                models.int8_paths), so a check here is byte for byte
  --set bench   what bench/arm64 counts instructions on: torchvision's
                mobilenet_v2 and resnet18 (random weights, 1x3x224x224) and
                a BERT-width encoder block (512, 8 heads, feed-forward 2048,
                128 tokens), as bench/models/bench_models.py builds them

usage: export_models.py --kiln KILN --out DIR [--set tests|int8|bench] [--models a,b]
"""

import argparse
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")


def demo_cnn():
    sys.path.insert(0, os.path.join(ROOT, "examples", "demo"))
    import make_model  # noqa: E402 (the demo's own model definition)
    return make_model.DemoCNN()


# name: (constructor, input shape)
MODELS = {
    "tests": {
        "demo_cnn": (demo_cnn, (1, 3, 32, 32)),
        "encoder_small": (lambda: nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, batch_first=True),
                          (1, 16, 64)),
    },
    "bench": {
        "mobilenet_v2": (lambda: torchvision.models.mobilenet_v2(weights=None), (1, 3, 224, 224)),
        "resnet18": (lambda: torchvision.models.resnet18(weights=None), (1, 3, 224, 224)),
        "encoder_block": (lambda: nn.TransformerEncoderLayer(512, 8, dim_feedforward=2048, batch_first=True),
                          (1, 128, 512)),
    },
}


def export(kiln, out, name, make, shape):
    case = os.path.join(out, name)
    os.makedirs(case, exist_ok=True)
    torch.manual_seed(1234)
    model = make().eval()
    x = torch.randn(*shape)
    with torch.no_grad():
        y = model(x).numpy().astype(np.float32)
    onnx_path = os.path.join(case, name + ".onnx")
    torch.onnx.export(model, x, onnx_path, opset_version=17, input_names=["x"], output_names=["y"])
    subprocess.run([kiln, "plan", onnx_path, "-o", os.path.join(case, "program.kiln")], check=True,
                   stdout=subprocess.DEVNULL)
    np.save(os.path.join(case, "input.npy"), x.numpy())
    x.numpy().astype(np.float32).tofile(os.path.join(case, "input_0.bin"))
    y.tofile(os.path.join(case, "expected_0.bin"))
    print(f"{name}: {shape} -> {tuple(y.shape)}, planned into {case}/program.kiln")


def export_int8(kiln, out, name, shape):
    """One int8 case: the quantized input's bytes and the host's output bytes."""
    import json
    sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
    import qdq_models  # noqa: E402
    case = os.path.join(out, name)
    os.makedirs(case, exist_ok=True)
    onnx_path, float_input, _ = qdq_models.export(name, shape, case)
    program = os.path.join(case, "program.kiln")
    subprocess.run([kiln, "plan", onnx_path, "-o", program, "--quantized-io"], check=True, stdout=subprocess.DEVNULL)
    info = json.loads(subprocess.run([kiln, "inspect", program, "--json"], check=True, capture_output=True,
                                     text=True).stdout)
    method = info["methods"][0]
    tensor = next(t for t in method["tensors"] if t["id"] == method["inputs"][0])
    dtype = {"uint8": np.uint8, "int8": np.int8}[tensor["dtype"]]
    q = tensor["quantization"]
    limits = np.iinfo(dtype)
    x = np.load(float_input)
    xq = np.clip(np.rint(x / q["scale"]) + q["zero_point"], limits.min, limits.max).astype(dtype)
    np.save(os.path.join(case, "input.npy"), xq)
    xq.tofile(os.path.join(case, "input_0.bin"))
    host = os.path.join(case, "host")
    subprocess.run([kiln, "run", program, "--input", os.path.join(case, "input.npy"), "--output-dir", host],
                   check=True, stdout=subprocess.DEVNULL)
    y = np.load(os.path.join(host, "output_0.npy"))
    y.tofile(os.path.join(case, "expected_0.bin"))
    print(f"{name}: {tensor['dtype']} {shape} -> {y.dtype} {tuple(y.shape)}, planned into {program}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--set", default="tests", choices=sorted(MODELS) + ["int8"])
    parser.add_argument("--models", default="", help="comma-separated names of the set (default: all)")
    args = parser.parse_args()
    if args.set == "int8":
        sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
        import qdq_models  # noqa: E402
        os.makedirs(args.out, exist_ok=True)
        for name, (_, shape) in qdq_models.MODELS.items():
            if not args.models or name in args.models.split(","):
                export_int8(args.kiln, args.out, name, shape)
        return
    models = MODELS[args.set]
    names = args.models.split(",") if args.models else list(models)
    os.makedirs(args.out, exist_ok=True)
    for name in names:
        make, shape = models[name]
        export(args.kiln, args.out, name, make, shape)


if __name__ == "__main__":
    main()
