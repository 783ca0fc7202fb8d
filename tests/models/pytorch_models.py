#!/usr/bin/env python3
"""kiln plan + kiln run reproduce PyTorch on exported CNN, MLP, recurrent and transformer models.

Each model is built with a fixed seed, exported to ONNX by PyTorch, planned
and run by the kiln CLI, and compared with PyTorch's own output. The error
reported is max|kiln - torch| / max|torch| (relative to the output's scale);
it must be at most 1e-4.

usage: pytorch_models.py --kiln PATH/TO/kiln --workdir DIR [--only NAME]
"""
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from kiln_checks import expect, finish, test_args  # noqa: E402


TOLERANCE = 1e-4


class Cnn(nn.Module):
    """Conv/BN/ReLU stages, grouped and depthwise convs, both poolings, Linear."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 24, 3, stride=2, padding=1), nn.BatchNorm2d(24), nn.ReLU(),
            nn.Conv2d(24, 24, 3, padding=2, dilation=2, groups=24), nn.BatchNorm2d(24), nn.Hardtanh(0, 6),
            nn.Conv2d(24, 32, 1), nn.Sigmoid(),
            nn.MaxPool2d(3, stride=2, padding=1),
            nn.Conv2d(32, 48, 3, groups=4), nn.Tanh(),
            nn.AvgPool2d(2, ceil_mode=True),
        )
        self.head = nn.Linear(48 * 3 * 3, 10)

    def forward(self, x):
        x = self.body(x)
        return F.softmax(self.head(torch.flatten(x, 1)), dim=-1)


class Mlp(nn.Module):
    """Linear layers with several activations; view() exports a Shape chain."""

    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(64, 128)
        self.l2 = nn.Linear(128, 96)
        self.l3 = nn.Linear(96, 32)
        self.l4 = nn.Linear(32, 5)

    def forward(self, x):
        x = x.view(x.size(0), -1)
        x = F.relu(self.l1(x))
        x = torch.sigmoid(self.l2(x)) * 2.0 - 0.5
        x = torch.tanh(self.l3(x)) / 3.0
        return F.log_softmax(self.l4(x), dim=1)


class Mixer(nn.Module):
    """MatMul, Transpose, Concat, Clip and broadcasting arithmetic."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Parameter(torch.randn(16, 24) * 0.2)
        self.scale = nn.Parameter(torch.rand(1, 1, 24) + 0.5)
        self.fc = nn.Linear(48, 8)

    def forward(self, x):
        h = torch.matmul(x, self.proj) * self.scale
        t = h.transpose(1, 2)
        attn = torch.softmax(torch.matmul(h, t) / 4.0, dim=-1)
        mixed = torch.matmul(attn, h)
        y = torch.cat([mixed, torch.clamp(h, -0.5, 0.5)], dim=2)
        return self.fc(y)


class Decoder(nn.Module):
    """A segmentation-style decoder: ConvTranspose (grouped, output_padding),
    Split, Slice (steps, negative ends), Resize (nearest, bilinear with and
    without align_corners), ReduceMean, Expand, a comparison and Where."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.down = nn.Conv2d(16, 32, 3, stride=2, padding=1, groups=2)
        self.up1 = nn.ConvTranspose2d(32, 16, 4, stride=2, padding=1)
        self.up2 = nn.ConvTranspose2d(8, 8, 3, stride=2, padding=1, output_padding=1, groups=2)
        self.up3 = nn.ConvTranspose2d(8, 4, 3, stride=1, padding=2, dilation=2)
        self.head = nn.Conv2d(20, 4, 1)

    def forward(self, x):
        s = F.relu(self.stem(x))
        d = F.relu(self.down(s))
        u = self.up1(d) + s
        a, b = torch.split(u, [8, 8], dim=1)
        a = F.interpolate(a, scale_factor=2.0, mode="nearest")
        b = self.up2(b)
        c = F.interpolate(b[:, :, 8:24, ::2], size=(32, 32), mode="bilinear", align_corners=False)
        e = F.interpolate(self.up3(b[:, :, ::2, ::2]), scale_factor=2.0, mode="bilinear", align_corners=True)
        mean = c.mean(dim=(2, 3), keepdim=True)
        y = torch.where(a > mean.expand(-1, -1, 32, 32), a, c)
        y = self.head(torch.cat([y, c, e], 1))
        return y[..., 1:-1, 2:]


class Lstm(nn.Module):
    """torch.nn.LSTM, two layers, sequence first: LSTM nodes with Y used by
    the next layer and Y_h and Y_c unused, the last step through a Linear."""

    def __init__(self, bidirectional):
        super().__init__()
        self.lstm = nn.LSTM(12, 20, num_layers=2, bidirectional=bidirectional)
        self.head = nn.Linear(20 * (2 if bidirectional else 1), 6)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.head(y[-1])


class GruKeywordSpotter(nn.Module):
    """A keyword-spotting model: a Conv1d front end over 10 MFCC bands, a
    batch-first GRU (linear_before_reset, as PyTorch exports it), a Linear
    head over the final hidden state (Y_h)."""

    def __init__(self):
        super().__init__()
        self.front = nn.Sequential(nn.Conv1d(10, 32, 3, stride=2, padding=1), nn.BatchNorm1d(32), nn.ReLU())
        self.gru = nn.GRU(32, 48, batch_first=True)
        self.head = nn.Linear(48, 12)

    def forward(self, x):
        f = self.front(x).transpose(1, 2)
        _, h = self.gru(f)
        return F.log_softmax(self.head(h[-1]), dim=-1)


class Rnn(nn.Module):
    """torch.nn.RNN: a bidirectional tanh layer whose initial state is
    computed from the input (initial_h at run time), then a ReLU layer."""

    def __init__(self):
        super().__init__()
        self.h0 = nn.Linear(8, 16)
        self.rnn = nn.RNN(8, 16, bidirectional=True, batch_first=True)
        self.relu_rnn = nn.RNN(32, 24, nonlinearity="relu", batch_first=True)

    def forward(self, x):
        h0 = torch.tanh(self.h0(x.mean(dim=1))).unsqueeze(0).expand(2, -1, -1).contiguous()
        y, _ = self.rnn(x, h0)
        y, h = self.relu_rnn(y)
        return y + h.transpose(0, 1)


def encoder(norm_first, activation):
    """torch.nn.TransformerEncoderLayer (d_model 64, 4 heads, batch first):
    attention, MatMul, Softmax, LayerNormalization (opset 17) or its
    ReduceMean/Pow/Sqrt decomposition (opset 13), ReLU or erf GELU."""

    def make():
        return nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, batch_first=True,
                                          norm_first=norm_first, activation=activation)

    return make


def torchvision_model(name):
    """A torchvision classifier with random weights (the fixed seed)."""

    def make():
        return getattr(torchvision.models, name)(weights=None)

    return make


MODELS = {
    "cnn": (Cnn, (2, 3, 32, 32)),
    "mlp": (Mlp, (4, 8, 8)),
    "mixer": (Mixer, (2, 10, 16)),
    "decoder": (Decoder, (2, 3, 32, 32)),
    "encoder": (encoder(False, "relu"), (2, 10, 64)),
    "encoder_norm_first": (encoder(True, "relu"), (2, 10, 64)),
    "encoder_gelu": (encoder(True, "gelu"), (2, 10, 64)),
    "lstm": (lambda: Lstm(False), (9, 3, 12)),
    "lstm_bidirectional": (lambda: Lstm(True), (9, 3, 12)),
    "gru_kws": (GruKeywordSpotter, (2, 10, 49)),
    "rnn": (Rnn, (3, 7, 8)),
    "mobilenet_v2": (torchvision_model("mobilenet_v2"), (1, 3, 224, 224)),
    "resnet18": (torchvision_model("resnet18"), (1, 3, 224, 224)),
}


def prepare(model):
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
            if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    return model.eval()


def check(name, kiln, workdir, opset):
    cls, shape = MODELS[name]
    torch.manual_seed(1234)
    model = prepare(cls())
    x = torch.randn(*shape)
    with torch.no_grad():
        expected = model(x).numpy()
    base = os.path.join(workdir, f"{name}_opset{opset}")
    onnx_path, program, inp = base + ".onnx", base + ".kiln", base + "_input.npy"
    torch.onnx.export(model, x, onnx_path, opset_version=opset, input_names=["x"], output_names=["y"])
    np.save(inp, x.numpy())
    subprocess.run([kiln, "plan", onnx_path, "-o", program], check=True, stdout=subprocess.DEVNULL)
    outdir = base + "_out"
    subprocess.run([kiln, "run", program, "--input", inp, "--output-dir", outdir], check=True,
                   stdout=subprocess.DEVNULL)
    got = np.load(os.path.join(outdir, "output_0.npy"))
    if got.shape != expected.shape:
        return f"shape {got.shape} != {expected.shape}", float("inf")
    err = float(np.max(np.abs(got - expected)) / max(float(np.max(np.abs(expected))), 1e-30))
    return None, err


def main():
    args = test_args(with_only=True)
    for name in MODELS:
        if args.only and name != args.only:
            continue
        for opset in (13, 17):
            problem, err = check(name, args.kiln, args.workdir, opset)
            expect(f"{name} opset {opset}: relative error {err:.2e}" + (f" ({problem})" if problem else ""),
                   problem is None and err <= TOLERANCE)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
