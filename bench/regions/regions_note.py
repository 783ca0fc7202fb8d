#!/usr/bin/env python3
"""Slow-region traffic with memory regions against everything in the slow
region, for one CNN and one transformer block (docs/memory.md).

  CNN          torchvision MobileNetV2, width 0.35, 1x3x96x96 (visual wake
               words' size), random weights
  transformer  torch.nn.TransformerEncoderLayer(d_model 128, 4 heads,
               feed-forward 256), 1 x 64 tokens

Each is planned with `--memory-region psram:64M:slow` alone (every tensor
there) and with a fast region of each size in TCM_SIZES beside it; traffic is
kiln's model (bytes each instruction operand reads or writes, once a run).

usage: regions_note.py --kiln KILN --workdir DIR
"""
import argparse
import json
import os
import subprocess

import torch
import torch.nn as nn
import torchvision

TCM_SIZES = ["16K", "64K", "256K"]


def export(workdir):
    torch.manual_seed(0)
    models = {}
    cnn = torchvision.models.mobilenet_v2(width_mult=0.35).eval()
    path = os.path.join(workdir, "mobilenet_v2_035.onnx")
    torch.onnx.export(cnn, torch.randn(1, 3, 96, 96), path, opset_version=13, input_names=["x"], output_names=["y"])
    models["MobileNetV2 0.35, 96x96"] = path
    block = nn.TransformerEncoderLayer(128, 4, dim_feedforward=256, batch_first=True).eval()
    path = os.path.join(workdir, "encoder_block.onnx")
    torch.onnx.export(block, torch.randn(1, 64, 128), path, opset_version=17, input_names=["x"], output_names=["y"])
    models["TransformerEncoderLayer 128/4/256, 64 tokens"] = path
    return models


def plan(kiln, model, workdir, regions):
    report = os.path.join(workdir, "report")
    args = [kiln, "plan", model, "-o", os.path.join(workdir, "p.kiln"), "--report", report]
    for r in regions:
        args += ["--memory-region", r]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(report, "plan.json")) as f:
        return json.load(f)["regions"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    print("| model | fast region | fast arena (bytes) | slow arena (bytes) | slow traffic a run (bytes) "
          "| all in slow (bytes) | slow share |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name, path in export(args.workdir).items():
        alone = plan(args.kiln, path, args.workdir, ["psram:64M:slow"])
        everything = alone["list"][0]["traffic"]
        print(f"| {name} | none | - | {alone['list'][0]['size']:,} | {everything:,} | {everything:,} | 100% |")
        for size in TCM_SIZES:
            r = plan(args.kiln, path, args.workdir, [f"tcm:{size}:fast", "psram:64M:slow"])
            tcm, psram = r["list"]
            assert r["traffic_all_in_one"] == everything
            print(f"| {name} | tcm {size} | {tcm['size']:,} | {psram['size']:,} | {psram['traffic']:,} "
                  f"| {everything:,} | {100.0 * psram['traffic'] / everything:.1f}% |")


if __name__ == "__main__":
    main()
