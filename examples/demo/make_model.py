#!/usr/bin/env python3
"""Builds kiln's demo model: a small CNN classifier for 32x32 RGB images.

Exports it to ONNX with PyTorch (random weights from a fixed seed), and
writes an input and PyTorch's output for it as .npy files, so `kiln run`
results can be compared with the reference.

usage: make_model.py OUT_DIR
writes OUT_DIR/demo_cnn.onnx, OUT_DIR/input.npy, OUT_DIR/expected.npy
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn


class DemoCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1, groups=2), nn.BatchNorm2d(32), nn.ReLU6(),
            nn.Conv2d(32, 32, 3, padding=1, groups=32), nn.Sigmoid(),
            nn.AvgPool2d(2),
            nn.Conv2d(32, 64, 1), nn.Tanh(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(64, 10), nn.Softmax(dim=1))

    def forward(self, x):
        return self.classifier(self.features(x))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(7)
    model = DemoCNN().eval()
    # Give batch norm non-trivial statistics.
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    x = torch.rand(1, 3, 32, 32)
    with torch.no_grad():
        y = model(x)
    torch.onnx.export(model, x, os.path.join(out, "demo_cnn.onnx"), input_names=["image"],
                      output_names=["probabilities"], opset_version=13)
    np.save(os.path.join(out, "input.npy"), x.numpy())
    np.save(os.path.join(out, "expected.npy"), y.numpy())


if __name__ == "__main__":
    main()
