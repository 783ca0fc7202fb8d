#!/usr/bin/env python3
"""Models for the collective and tensor-parallel tests.

    make_models.py OUT_DIR

writes, with a fixed seed, each model with an input (NAME.input.npy) and the
output PyTorch computes for it where PyTorch built the model
(NAME.expected.npy):

  mlp_gemm          Linear -> ReLU -> Linear on [8, 64] (exports Gemm)
  mlp_matmul        two pre-norm MLP blocks with GELU and residuals on
                    [2, 8, 64] (exports MatMul + Add)
  transformer       a pre-norm transformer block: separate q/k/v
                    projections, 8 heads, softmax attention, output
                    projection, GELU MLP, residuals
  allreduce_chain   8 x (MatMul -> AllReduce), built with onnx.helper:
                    every MatMul output feeds a collective
  allreduce_paths   one AllReduce per placement path: a MatMul output (zero
                    copy), a method input read twice (one buffer, one copy at
                    entry), a constant and a method output (explicit copies)
  allreduce_relu    Relu -> AllReduce on [4, 32]: the smallest collective
                    that a device kernel feeds
  allreduce_residual  Relu -> AllReduce -> Add(bias [32]) -> Add(x, .) on
                    [4, 32]: a bias and a residual (the rank's own input)
                    for the all-reduce kernels to fuse into their write

and, for the cases that give every rank its own data, NAME.input.rankR.npy
(R = 0..3) for allreduce_chain, allreduce_paths, allreduce_relu and
allreduce_residual.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import torch
from torch import nn


class MlpGemm(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 256)
        self.fc2 = nn.Linear(256, 64)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class MlpBlock(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return x + self.fc2(nn.functional.gelu(self.fc1(self.norm(x))))


class MlpMatMul(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(MlpBlock(64, 256), MlpBlock(64, 128))

    def forward(self, x):
        return self.blocks(x)


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        b, s, d = x.shape
        h = self.heads

        def split(t):
            return t.reshape(b, s, h, d // h).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = torch.matmul(q, k.transpose(-2, -1)) / (d // h) ** 0.5
        y = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.out(y.transpose(1, 2).reshape(b, s, d))


class Transformer(nn.Module):
    def __init__(self, dim=64, heads=8, hidden=256):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.attention = Attention(dim, heads)
        self.mlp = MlpBlock(dim, hidden)

    def forward(self, x):
        return self.mlp(x + self.attention(self.norm(x)))


def export(model, shape, out, name, rng):
    model.eval()
    x = torch.from_numpy(rng.standard_normal(shape).astype(np.float32))
    path = os.path.join(out, name + ".onnx")
    torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["y"], opset_version=17,
                      do_constant_folding=True)
    with torch.no_grad():
        y = model(x).numpy()
    np.save(os.path.join(out, name + ".input.npy"), x.numpy())
    np.save(os.path.join(out, name + ".expected.npy"), y)


def save_helper_model(nodes, inits, inputs, outputs, out, name, x):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    onnx.save(model, os.path.join(out, name + ".onnx"))
    np.save(os.path.join(out, name + ".input.npy"), x)


def allreduce_chain(out, rng, layers=8, dim=64):
    nodes, inits = [], []
    prev = "x"
    for i in range(layers):
        w = (rng.standard_normal((dim, dim)) / np.sqrt(dim)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"mm{i}"], name=f"matmul{i}"))
        last = i == layers - 1
        nodes.append(helper.make_node("AllReduce", [f"mm{i}"], ["y" if last else f"ar{i}"], name=f"allreduce{i}",
                                      domain="com.microsoft"))
        prev = f"ar{i}"
    x = rng.standard_normal((4, dim)).astype(np.float32)
    save_helper_model(nodes, inits, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, dim])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, dim])], out, "allreduce_chain", x)


def allreduce_paths(out, rng, dim=32):
    w = rng.standard_normal((dim, dim)).astype(np.float32)
    c = rng.standard_normal((4, dim)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["mm"], name="matmul"),
        helper.make_node("AllReduce", ["mm"], ["sum_mm"], name="zero_copy", domain="com.microsoft"),
        helper.make_node("AllReduce", ["x"], ["sum_x"], name="input_first", domain="com.microsoft"),
        helper.make_node("AllReduce", ["x"], ["sum_x2"], name="input_again", domain="com.microsoft"),
        helper.make_node("AllReduce", ["c"], ["sum_c"], name="constant", domain="com.microsoft"),
        helper.make_node("Relu", ["x"], ["relu"], name="relu"),
        helper.make_node("AllReduce", ["relu"], ["sum_relu"], name="output", domain="com.microsoft"),
        helper.make_node("Add", ["sum_mm", "sum_x"], ["s1"], name="add1"),
        helper.make_node("Add", ["s1", "sum_x2"], ["s2"], name="add2"),
        helper.make_node("Add", ["s2", "sum_c"], ["s3"], name="add3"),
        helper.make_node("Add", ["s3", "sum_relu"], ["y"], name="add4"),
    ]
    x = rng.standard_normal((4, dim)).astype(np.float32)
    vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [4, dim])
    save_helper_model(nodes, [numpy_helper.from_array(w, "w"), numpy_helper.from_array(c, "c")], [vi("x")],
                      [vi("y"), vi("relu")], out, "allreduce_paths", x)


def allreduce_relu(out, rng, dim=32):
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("AllReduce", ["r"], ["y"], name="allreduce", domain="com.microsoft")]
    vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [4, dim])
    save_helper_model(nodes, [], [vi("x")], [vi("y")], out, "allreduce_relu",
                      rng.standard_normal((4, dim)).astype(np.float32))


def allreduce_residual(out, rng, dim=32):
    bias = rng.standard_normal(dim).astype(np.float32)
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("AllReduce", ["r"], ["s"], name="allreduce", domain="com.microsoft"),
             helper.make_node("Add", ["s", "bias"], ["t"], name="bias_add"),
             helper.make_node("Add", ["x", "t"], ["y"], name="residual_add")]
    vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [4, dim])
    save_helper_model(nodes, [numpy_helper.from_array(bias, "bias")], [vi("x")], [vi("y")], out,
                      "allreduce_residual", rng.standard_normal((4, dim)).astype(np.float32))
    np.save(os.path.join(out, "allreduce_residual.bias.npy"), bias)


def rank_inputs(out, rng, name, ranks=4):
    x = np.load(os.path.join(out, name + ".input.npy"))
    for r in range(ranks):
        np.save(os.path.join(out, f"{name}.input.rank{r}.npy"), rng.standard_normal(x.shape).astype(np.float32))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(7)
    torch.manual_seed(0)
    export(MlpGemm(), (8, 64), out, "mlp_gemm", rng)
    export(MlpMatMul(), (2, 8, 64), out, "mlp_matmul", rng)
    export(Transformer(), (2, 16, 64), out, "transformer", rng)
    allreduce_chain(out, rng)
    allreduce_paths(out, rng)
    allreduce_relu(out, rng)
    for name in ["allreduce_chain", "allreduce_paths", "allreduce_relu"]:
        rank_inputs(out, rng, name)
    # Its own generator: the data above stays as it was.
    residual_rng = np.random.default_rng(11)
    allreduce_residual(out, residual_rng)
    rank_inputs(out, residual_rng, "allreduce_residual")


if __name__ == "__main__":
    main()
