#!/usr/bin/python3
"""Exports the real models of the memory planner benchmark to ONNX with
Debian's python3-torch: torchvision's mobilenet_v2 and resnet18 (random
weights from a fixed seed, batch 1, 3x224x224) and one transformer encoder
block (nn.TransformerEncoderLayer, d_model 256, 4 heads, sequence 128,
batch 1). Existing files are kept.

usage: export_models.py OUT_DIR
"""
import os
import sys

import torch
import torch.nn as nn
import torchvision

OPSET = 17


class EncoderBlock(nn.Module):
    """nn.TransformerEncoderLayer's own computation (post-norm), spelled out
    so the exporter traces its ops instead of the fused inference kernel
    it has no ONNX form for."""

    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024, batch_first=True)

    def forward(self, x):
        layer = self.layer
        x = layer.norm1(x + layer._sa_block(x, None, None))
        return layer.norm2(x + layer._ff_block(x))


def export(model, example, path):
    if os.path.exists(path):
        return
    model.eval()
    tmp = path + ".tmp"
    # Gradients stay enabled while tracing: with them off, PyTorch takes
    # fused attention paths that do not export.
    torch.onnx.export(model, example, tmp, opset_version=OPSET, input_names=["input"],
                      output_names=["output"], do_constant_folding=True)
    os.replace(tmp, path)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    image = torch.randn(1, 3, 224, 224)
    export(torchvision.models.mobilenet_v2(weights=None), image, os.path.join(out, "mobilenet_v2.onnx"))
    torch.manual_seed(0)
    export(torchvision.models.resnet18(weights=None), image, os.path.join(out, "resnet18.onnx"))
    torch.manual_seed(0)
    export(EncoderBlock(), torch.randn(1, 128, 256), os.path.join(out, "transformer_block.onnx"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
