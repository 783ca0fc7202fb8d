#!/usr/bin/env python3
"""Quantized (QDQ) ONNX models from PyTorch, and kiln's int8 outputs against a reference.

Each model is built with a fixed seed (random weights, batch-norm statistics
randomised), quantized with PyTorch's FX graph mode (the x86 'fbgemm'
default: uint8 activations, int8 per-channel weights, int32 bias),
calibrated on random inputs, and exported at opset 13, which writes the
quantized ops as QuantizeLinear / DequantizeLinear around float ops. kiln
plans it (the QDQ pass folds Conv/Gemm patterns into int8 kernels) and runs
it; the reference is PyTorch's own quantized model (its quantized engine's
int8 kernels: oneDNN or QNNPACK in Debian's build)
on the same input, and, with --ort NODE_MODULES, ONNX Runtime on the same
QDQ file (bench/models/ort_runner.js).

The comparison is in units of the output's quantization step (LSB): the
model ends in a DequantizeLinear, so every output is zero_point + k steps.
kiln requantizes with a 31-bit fixed-point multiplier and one rounding (half
up, kiln/kernels/qgemm.h); fbgemm and ONNX Runtime multiply in float32 and
round half to even. They differ only at near-ties, by one step, and such a
difference can move a later layer's rounding by one step again: the test
asks for at least 99% of the outputs within 1 LSB and none beyond 4 LSB.

The models: the four MLPerf Tiny architectures, built from their published
descriptions (DS-CNN keyword spotting, MobileNetV1-0.25 visual wake words,
ResNet-8 for CIFAR-10, the dense autoencoder for anomaly detection), a
MobileNetV2 block (ReLU6 as Clip on int8 data, a residual Add in float,
MaxPool), a ResNeXt-style block of grouped convolutions (channels per group
in whole quads and not), and torchvision's mobilenet_v2 and resnet18 (--large; 224 x 224).

usage: qdq_models.py --kiln PATH/TO/kiln --workdir DIR [--only NAME] [--large] [--ort NODE_MODULES]
       qdq_models.py --export DIR [--only NAME] [--large]   (write the .onnx files and inputs only)
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from kiln_checks import expect, finish  # noqa: E402

WITHIN_1_LSB = 0.99
MAX_LSB = 4


def conv_bn_relu(cin, cout, k, stride=1, groups=1, relu=True):
    layers = [nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2 if isinstance(k, int) else (k[0] // 2, k[1] // 2),
                        groups=groups, bias=False), nn.BatchNorm2d(cout)]
    if relu:
        layers.append(nn.ReLU())
    return layers


class DsCnn(nn.Module):
    """MLPerf Tiny keyword spotting: DS-CNN (Zhang et al., 'Hello Edge'), 49 x 10
    MFCC input; a 10 x 4 stride-2 conv of 64 filters, four depthwise-separable
    blocks of 64, global average pooling, 12 classes."""

    def __init__(self):
        super().__init__()
        layers = conv_bn_relu(1, 64, (10, 4), stride=2)
        for _ in range(4):
            layers += conv_bn_relu(64, 64, 3, groups=64) + conv_bn_relu(64, 64, 1)
        self.body = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, 12)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.body(x)), 1))


class MobileNetV1(nn.Module):
    """MLPerf Tiny visual wake words: MobileNetV1 with width 0.25, 96 x 96 RGB,
    2 classes."""

    def __init__(self, alpha=0.25):
        super().__init__()
        c = lambda n: max(8, int(n * alpha))  # noqa: E731
        layers = conv_bn_relu(3, c(32), 3, stride=2)
        plan = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)] + [(512, 1)] * 5 + [(1024, 2), (1024, 1)]
        cin = c(32)
        for cout, stride in plan:
            layers += conv_bn_relu(cin, cin, 3, stride=stride, groups=cin) + conv_bn_relu(cin, c(cout), 1)
            cin = c(cout)
        self.body = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, 2)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.body(x)), 1))


class ResBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.a = nn.Sequential(*conv_bn_relu(cin, cout, 3, stride=stride))
        self.b = nn.Sequential(*conv_bn_relu(cout, cout, 3, relu=False))
        self.skip = nn.Sequential(*conv_bn_relu(cin, cout, 1, stride=stride, relu=False)) if stride != 1 or cin != cout \
            else nn.Identity()
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.b(self.a(x)) + self.skip(x))


class ResNet8(nn.Module):
    """MLPerf Tiny image classification: ResNet-8 for CIFAR-10 (32 x 32 RGB):
    a 3 x 3 conv of 16, three residual stacks of 16, 32 and 64 filters (the
    last two stride 2 with 1 x 1 shortcuts), global average pooling, 10 classes."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(*conv_bn_relu(3, 16, 3))
        self.stacks = nn.Sequential(ResBlock(16, 16, 1), ResBlock(16, 32, 2), ResBlock(32, 64, 2))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.stacks(self.stem(x))), 1))


class DenseAutoencoder(nn.Module):
    """MLPerf Tiny anomaly detection: the dense autoencoder over 640 values
    (5 frames x 128 mel bins): four Dense(128) + BN + ReLU, a bottleneck of
    8, four Dense(128) + BN + ReLU, Dense(640)."""

    def __init__(self):
        super().__init__()
        dims = [640, 128, 128, 128, 128, 8, 128, 128, 128, 128]
        layers = []
        for a, b in zip(dims, dims[1:]):
            layers += [nn.Linear(a, b), nn.BatchNorm1d(b), nn.ReLU()]
        layers.append(nn.Linear(128, 640))
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        return self.body(x)


class InvertedResidual(nn.Module):
    """A MobileNetV2 block at 32 x 32 (expand 1x1, depthwise 3x3, project
    1x1, residual Add) with ReLU6, which PyTorch exports as DQ -> Clip -> Q
    after each convolution's Q (the QDQ pass clamps the int8 data there)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU6())
        self.expand = nn.Sequential(nn.Conv2d(16, 64, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU6())
        self.dw = nn.Sequential(nn.Conv2d(64, 64, 3, padding=1, groups=64, bias=False), nn.BatchNorm2d(64), nn.ReLU6())
        self.project = nn.Sequential(nn.Conv2d(64, 16, 1, bias=False), nn.BatchNorm2d(16))
        self.fc = nn.Linear(16 * 8 * 8, 10)
        self.pool = nn.MaxPool2d(4)

    def forward(self, x):
        x = self.stem(x)
        x = x + self.project(self.dw(self.expand(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


class GroupedBottleneck(nn.Module):
    """ResNeXt-style grouped convolutions at 16 x 16: a 3 x 3 stem of 32, a
    bottleneck whose 3 x 3 has 4 groups of 8 channels (whole channel quads:
    the direct convolution's quad-tap weights), a strided 3 x 3 of 8 groups
    of 6 channels in (not whole quads) and 8 out, a residual Add, global
    average pooling and 10 classes."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(*conv_bn_relu(3, 32, 3))
        self.block = nn.Sequential(*conv_bn_relu(32, 32, 1), *conv_bn_relu(32, 32, 3, groups=4),
                                   *conv_bn_relu(32, 32, 1, relu=False))
        self.down = nn.Sequential(*conv_bn_relu(32, 48, 1), *conv_bn_relu(48, 64, 3, stride=2, groups=8))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = self.stem(x)
        x = torch.relu(x + self.block(x))
        return self.fc(torch.flatten(self.pool(self.down(x)), 1))


def torchvision_model(name):
    def make():
        import torchvision
        return getattr(torchvision.models, name)(weights=None)
    return make


MODELS = {
    "ds_cnn": (DsCnn, (1, 1, 49, 10)),
    "mobilenet_v1_025": (MobileNetV1, (1, 3, 96, 96)),
    "resnet8": (ResNet8, (1, 3, 32, 32)),
    "dense_autoencoder": (DenseAutoencoder, (1, 640)),
    "inverted_residual": (InvertedResidual, (1, 3, 32, 32)),
    "grouped_bottleneck": (GroupedBottleneck, (1, 3, 16, 16)),
}
LARGE = {
    "mobilenet_v2": (torchvision_model("mobilenet_v2"), (1, 3, 224, 224)),
    "resnet18": (torchvision_model("resnet18"), (1, 3, 224, 224)),
}


def randomise(model):
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    return model.eval()


def quantize(name, shape, with_float=False):
    """The FX-quantized model and a test input (seeded); with_float, also the
    float model it was quantized from."""
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx
    cls = {**MODELS, **LARGE}[name][0]
    torch.manual_seed(1234)
    model = randomise(cls())
    prepared = prepare_fx(model, get_default_qconfig_mapping("fbgemm"), (torch.randn(*shape),))
    with torch.no_grad():
        for _ in range(8):
            prepared(torch.randn(*shape))
    quantized = convert_fx(prepared)
    x = torch.randn(*shape)
    return (quantized, model, x) if with_float else (quantized, x)


def export(name, shape, workdir):
    """Writes NAME.onnx and NAME_input.npy; returns (onnx path, input path, torch's output)."""
    quantized, x = quantize(name, shape)
    path = os.path.join(workdir, name + ".onnx")
    inp = os.path.join(workdir, name + "_input.npy")
    with torch.no_grad():
        expected = quantized(x).numpy()
        torch.onnx.export(quantized, x, path, opset_version=13, input_names=["x"], output_names=["y"])
    np.save(inp, x.numpy())
    return path, inp, expected


def output_step(path):
    """The scale of the model's last DequantizeLinear (the output's LSB)."""
    import onnx
    from onnx import numpy_helper
    model = onnx.load(path)
    consts = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant":
            consts[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    out = model.graph.output[0].name
    for node in model.graph.node:
        if node.output[0] == out and node.op_type == "DequantizeLinear":
            return float(consts[node.input[1]].reshape(-1)[0])
    raise SystemExit(f"{path}: the output is not a DequantizeLinear")


def lsb_stats(got, want, step):
    d = np.abs(got.astype(np.float64) - want.astype(np.float64)) / step
    d = np.rint(d * 1000) / 1000  # float noise of the dequantization
    return float(np.mean(d <= 1.0)), float(np.max(d)) if d.size else 0.0


def run_kiln(kiln, path, inp, workdir, name, options=()):
    program = os.path.join(workdir, name + ".kiln")
    plan = subprocess.run([kiln, "plan", path, "-o", program, *options], check=True, capture_output=True,
                          text=True).stdout
    outdir = os.path.join(workdir, name + "_out")
    subprocess.run([kiln, "run", program, "--input", inp, "--output-dir", outdir], check=True,
                   stdout=subprocess.DEVNULL)
    int8 = next((line.strip() for line in plan.splitlines() if line.strip().startswith("int8:")), "int8: none")
    return np.load(os.path.join(outdir, "output_0.npy")), int8


def run_ort(node_modules, path, inp, shape, workdir, name):
    raw = os.path.join(workdir, name + "_input.bin")
    np.load(inp).astype(np.float32).tofile(raw)
    out = os.path.join(workdir, name + "_ort.bin")
    env = dict(os.environ, NODE_PATH=node_modules)
    runner = os.path.join(HERE, "..", "..", "bench", "models", "ort_runner.js")
    line = subprocess.run(["node", runner, path, raw, "x".join(map(str, shape)), "1", out], env=env, check=True,
                          capture_output=True, text=True).stdout
    json.loads(line.strip().splitlines()[-1])
    return np.fromfile(out, dtype=np.float32)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kiln")
    parser.add_argument("--workdir")
    parser.add_argument("--only")
    parser.add_argument("--large", action="store_true", help="also mobilenet_v2 and resnet18 (224 x 224)")
    parser.add_argument("--ort", help="node_modules holding onnxruntime-node: compare with ONNX Runtime too")
    parser.add_argument("--export", help="only write the models and inputs into this folder")
    args = parser.parse_args()
    models = dict(MODELS, **(LARGE if args.large else {}))
    workdir = args.export or args.workdir
    os.makedirs(workdir, exist_ok=True)
    for name, (_, shape) in models.items():
        if args.only and name != args.only:
            continue
        path, inp, expected = export(name, shape, workdir)
        if args.export:
            print(path)
            continue
        step = output_step(path)
        got, int8 = run_kiln(args.kiln, path, inp, workdir, name)
        ok = got.shape == expected.shape
        share, worst = lsb_stats(got, expected, step) if ok else (0.0, float("inf"))
        expect(f"{name}: kiln vs PyTorch {share * 100:.2f}% within 1 LSB, max {worst:g} LSB; {int8}",
               ok and share >= WITHIN_1_LSB and worst <= MAX_LSB)
        # Without names (and the views that only rename), as firmware plans
        # them: the same program but for its bookkeeping.
        stripped, _ = run_kiln(args.kiln, path, inp, workdir, name + "_stripped", ["--strip-names"])
        expect(f"{name}: planned with --strip-names, the same outputs byte for byte",
               stripped.tobytes() == got.tobytes())
        if args.ort:
            ort = run_ort(args.ort, path, inp, shape, workdir, name).reshape(got.shape)
            share, worst = lsb_stats(got, ort, step)
            expect(f"{name}: kiln vs ONNX Runtime {share * 100:.2f}% within 1 LSB, max {worst:g} LSB",
                   share >= WITHIN_1_LSB and worst <= MAX_LSB)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
