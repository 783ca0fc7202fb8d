#!/usr/bin/env python3
"""Inputs bounded above: one plan, several sizes (kiln plan --input-shape
NAME=MIN:MAXx...).

Each case is a small ONNX model whose inputs have a named dimension
(dim_param). It is planned once with that dimension bounded, then run by
`kiln run` at the bound's minimum, a size in between and its maximum; every
output must match NumPy's (or the RNN reference's) within 1e-5 of its scale
and have the extent the input implies. The cases cover element-wise chains
(two inputs sharing the dimension), positions folded from the length
(a constant whose rows at every length are the first of its MAX value), MatMul with a constant and with two
activations, Conv on a bounded batch and on a bounded length with stride 2
(an extent floor((L - 3) / 2) + 1), max and average pooling on a bounded
height, Softmax along the bounded axis, LayerNormalization over two bounded
dimensions at once, one attention head over a bounded sequence, and LSTM and
GRU over a bounded sequence, and torch's TransformerEncoderLayer exported
with a dynamic sequence (its Reshapes fed by Shape, Gather and Concat).
Also:
  - the arena is what the plan at the maximum needs, and one plan serves
    every size;
  - a size outside the bound, and two inputs that disagree on a shared
    dimension, fail `kiln run` naming the dimension;
  - a plan whose parameters follow the bounded size (a Slice whose end is
    computed from the input's shape) is refused naming the instruction.

With --capi-test, tests/capi/bounded_test.c runs one plan at several sizes
through the C API (kiln_method_set_input_shaped, kiln_method_output_dims).

usage: bounded_cases.py --kiln PATH/TO/kiln --workdir DIR [--only NAME] [--capi-test PATH]
"""
import os
import subprocess
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kiln_checks import expect, finish, test_args  # noqa: E402
from onnx_cases import compare, run_each  # noqa: E402
from onnx_rnn_cases import reference as rnn_reference  # noqa: E402

TOLERANCE = 1e-5
RNG = np.random.default_rng(11)


def randn(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def make(nodes, inputs, outputs, initializers=(), opset=17):
    """inputs/outputs: (name, dims with strings for named dimensions)."""
    graph = helper.make_graph(
        nodes, "bounded",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, d) for n, d in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, d) for n, d in outputs],
        [numpy_helper.from_array(a, n) for n, a in initializers])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(m)
    return m


def t(a):
    return torch.from_numpy(a)


# Each case: (model, {input: bound spec for --input-shape}, sizes, inputs(size) -> arrays,
#             expected(arrays) -> list of output arrays).

def eltwise():
    bias = randn(16)
    m = make([helper.make_node("Mul", ["x", "x"], ["sq"]),
              helper.make_node("Add", ["sq", "bias"], ["a"]),
              helper.make_node("Relu", ["a"], ["r"]),
              helper.make_node("Sigmoid", ["r"], ["s"]),
              helper.make_node("Mul", ["s", "y"], ["out"])],
             [("x", ["n", 16]), ("y", ["n", 16])], [("out", ["n", 16])], [("bias", bias)])
    def expected(x, y):
        return [1 / (1 + np.exp(-np.maximum(x * x + bias, 0))) * y]
    return m, {"x": "1:6x16", "y": "1:6x16"}, [1, 4, 6], lambda n: [randn(n, 16), randn(n, 16)], expected


def matmul():
    w = randn(32, 24, scale=0.2)
    b = randn(24)
    m = make([helper.make_node("MatMul", ["x", "w"], ["xw"]),
              helper.make_node("Add", ["xw", "b"], ["h"]),
              helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0]),
              helper.make_node("MatMul", ["x", "xt"], ["gram"])],
             [("x", ["s", 32])], [("h", ["s", 24]), ("gram", ["s", "s"])], [("w", w), ("b", b)])
    def expected(x):
        return [x @ w + b, x @ x.T]
    return m, {"x": "1:20x32"}, [1, 7, 20], lambda s: [randn(s, 32)], expected


def conv_batch():
    w = randn(8, 3, 3, 3, scale=0.3)
    w2 = randn(4, 8, 3, 3, scale=0.3)
    m = make([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
              helper.make_node("Relu", ["c"], ["r"]),
              helper.make_node("Conv", ["r", "w2"], ["out"], strides=[2, 2])],
             [("x", ["n", 3, 10, 10])], [("out", ["n", 4, 4, 4])], [("w", w), ("w2", w2)])
    def expected(x):
        return [F.conv2d(F.relu(F.conv2d(t(x), t(w), padding=1)), t(w2), stride=2).numpy()]
    return m, {"x": "1:4x3x10x10"}, [1, 3, 4], lambda n: [randn(n, 3, 10, 10)], expected


def conv_length():
    w = randn(6, 4, 3, scale=0.3)
    b = randn(6)
    m = make([helper.make_node("Conv", ["x", "w", "b"], ["out"], strides=[2])],
             [("x", [1, 4, "len"])], [("out", [1, 6, "len_out"])], [("w", w), ("b", b)])
    def expected(x):
        return [F.conv1d(t(x), t(w), t(b), stride=2).numpy()]
    return m, {"x": "1x4x3:40"}, [3, 4, 17, 40], lambda n: [randn(1, 4, n)], expected


def pooling():
    m = make([helper.make_node("MaxPool", ["x"], ["mp"], kernel_shape=[2, 2], strides=[2, 2]),
              helper.make_node("AveragePool", ["x"], ["ap"], kernel_shape=[3, 3], strides=[1, 1],
                               pads=[1, 1, 1, 1], count_include_pad=0),
              helper.make_node("GlobalAveragePool", ["x"], ["gp"])],
             [("x", [2, 3, "h", 8])], [("mp", [2, 3, "h2", 4]), ("ap", [2, 3, "h", 8]), ("gp", [2, 3, 1, 1])])
    def expected(x):
        tx = t(x)
        return [F.max_pool2d(tx, 2, 2).numpy(),
                F.avg_pool2d(tx, 3, 1, padding=1, count_include_pad=False).numpy(),
                tx.mean(dim=(2, 3), keepdim=True).numpy()]
    return m, {"x": "2x3x2:12x8"}, [2, 5, 12], lambda h: [randn(2, 3, h, 8)], expected


def softmax():
    m = make([helper.make_node("Softmax", ["x"], ["out"], axis=-1)], [("x", [3, "s"])], [("out", [3, "s"])])
    def expected(x):
        return [torch.softmax(t(x), -1).numpy()]
    return m, {"x": "3x1:30"}, [1, 11, 30], lambda s: [randn(3, s, scale=3.0)], expected


def layer_norm():
    g = randn(16)
    b = randn(16)
    m = make([helper.make_node("LayerNormalization", ["x", "g", "b"], ["out"], axis=-1, epsilon=1e-5)],
             [("x", ["batch", "seq", 16])], [("out", ["batch", "seq", 16])], [("g", g), ("b", b)])
    def expected(x):
        return [F.layer_norm(t(x), (16,), t(g), t(b), 1e-5).numpy()]
    # Two bounded dimensions: the product batch*seq is what the kernel loops over.
    return (m, {"x": "1:3x1:9x16"}, [(1, 1), (2, 5), (3, 9), (1, 9), (3, 2)],
            lambda bs: [randn(bs[0], bs[1], 16)], expected)


def attention():
    d = 16
    wq, wk, wv = (randn(d, d, scale=0.3) for _ in range(3))
    scale = np.array(1 / np.sqrt(d), np.float32)
    m = make([helper.make_node("MatMul", ["x", "wq"], ["q"]),
              helper.make_node("MatMul", ["x", "wk"], ["k"]),
              helper.make_node("MatMul", ["x", "wv"], ["v"]),
              helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
              helper.make_node("MatMul", ["q", "kt"], ["qk"]),
              helper.make_node("Mul", ["qk", "scale"], ["scores"]),
              helper.make_node("Softmax", ["scores"], ["p"], axis=-1),
              helper.make_node("MatMul", ["p", "v"], ["out"])],
             [("x", [1, "seq", d])], [("out", [1, "seq", d])],
             [("wq", wq), ("wk", wk), ("wv", wv), ("scale", scale)])
    def expected(x):
        q, k, v = t(x) @ t(wq), t(x) @ t(wk), t(x) @ t(wv)
        return [(torch.softmax(q @ k.transpose(1, 2) * float(scale), -1) @ v).numpy()]
    return m, {"x": "1x1:24x16"}, [1, 9, 24], lambda s: [randn(1, s, d)], expected


def rnn(op):
    gates = {"GRU": 3, "LSTM": 4}[op]
    hidden, size, batch = 5, 3, 2
    w = randn(1, gates * hidden, size, scale=0.5)
    r = randn(1, gates * hidden, hidden, scale=0.5)
    b = randn(1, 2 * gates * hidden, scale=0.5)
    outputs = ["Y", "Y_h"]
    m = make([helper.make_node(op, ["X", "W", "R", "B"], outputs, hidden_size=hidden)],
             [("X", ["seq", batch, size])], [("Y", ["seq", 1, batch, hidden]), ("Y_h", [1, batch, hidden])],
             [("W", w), ("R", r), ("B", b)], opset=14)
    def expected(x):
        y, y_h, _ = rnn_reference(op, x, w, r, b)
        return [y, y_h]
    return m, {"X": "1:7x2x3"}, [1, 4, 7], lambda s: [randn(s, batch, size)], expected


def positions():
    # x + table[arange(len)]: the Range and the Gather fold at plan time to a
    # constant that is, at every length, the first rows of its value at MAX.
    table = randn(32, 8)
    m = make([helper.make_node("Shape", ["x"], ["shape"]),
              helper.make_node("Gather", ["shape", "one"], ["len"], axis=0),
              helper.make_node("Range", ["zero", "len", "one"], ["pos"]),
              helper.make_node("Gather", ["table", "pos"], ["emb"], axis=0),
              helper.make_node("Add", ["x", "emb"], ["out"])],
             [("x", [1, "seq", 8])], [("out", [1, "seq", 8])],
             [("table", table), ("zero", np.array(0, np.int64)), ("one", np.array(1, np.int64))])
    def expected(x):
        return [x + table[: x.shape[1]]]
    return m, {"x": "1x1:32x8"}, [1, 13, 32], lambda s: [randn(1, s, 8)], expected


def torch_encoder():
    # A transformer encoder layer as torch exports it: the heads' Reshapes
    # get their shapes from Shape, Gather and Concat of the sequence length.
    torch.manual_seed(5)
    layer = torch.nn.TransformerEncoderLayer(32, 2, 64, batch_first=True, dropout=0.0).eval()
    path = os.path.join(ARGS.workdir, "torch_encoder_export.onnx")
    torch.onnx.export(layer, torch.randn(1, 6, 32), path, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {1: "seq"}, "y": {1: "seq"}}, opset_version=17)
    def expected(x):
        with torch.no_grad():
            return [layer(t(x)).numpy()]
    return onnx.load(path), {"x": "1x1:16x32"}, [1, 5, 16], lambda s: [randn(1, s, 32)], expected


CASES = {"eltwise": eltwise, "torch_encoder": torch_encoder, "positions": positions, "matmul": matmul, "conv_batch": conv_batch, "conv_length": conv_length,
         "pooling": pooling, "softmax": softmax, "layer_norm": layer_norm, "attention": attention,
         "lstm": lambda: rnn("LSTM"), "gru": lambda: rnn("GRU")}


def plan(kiln, name, m, bounds, workdir):
    base = os.path.join(workdir, name)
    onnx.save(m, base + ".onnx")
    args = []
    for n, spec in bounds.items():
        args += ["--input-shape", f"{n}={spec}"]
    p = subprocess.run([kiln, "plan", base + ".onnx", "-o", base + ".kiln", *args], capture_output=True, text=True)
    return p, base


def run(kiln, base, tag, arrays):
    args = []
    for i, a in enumerate(arrays):
        np.save(f"{base}_{tag}_in{i}.npy", a)
        args += ["--input", f"{base}_{tag}_in{i}.npy"]
    out = f"{base}_{tag}_out"
    p = subprocess.run([kiln, "run", base + ".kiln", *args, "--output-dir", out], capture_output=True, text=True)
    return p, out


def run_case(name, kiln, workdir):
    m, bounds, sizes, make_inputs, expected = CASES[name]()
    p, base = plan(kiln, name, m, bounds, workdir)
    if p.returncode != 0:
        return [f"kiln plan failed: {p.stderr.strip()}"]
    problems = []
    for size in sizes:
        arrays = make_inputs(size)
        tag = "x".join(str(v) for v in np.atleast_1d(size))
        r, out = run(kiln, base, tag, arrays)
        if r.returncode != 0:
            problems.append(f"size {tag}: kiln run failed: {r.stderr.strip()}")
            continue
        for i, want in enumerate(expected(*arrays)):
            got = np.load(os.path.join(out, f"output_{i}.npy"))
            problem = compare(f"size {tag} output {i}", got, want.astype(np.float32), TOLERANCE)
            if problem:
                problems.append(problem)
    return problems


def refusals(kiln, workdir):
    # Outside the bound, and two inputs disagreeing on one named dimension.
    m, bounds, _, make_inputs, _ = eltwise()
    p, base = plan(kiln, "refuse_eltwise", m, bounds, workdir)
    expect("eltwise planned for the refusals", p.returncode == 0, p.stderr)
    r, _ = run(kiln, base, "big", make_inputs(7))
    expect("a size above the bound is refused naming the dimension",
           r.returncode != 0 and "in dimension 0, beyond its bound" in r.stderr, r.stderr.strip())
    r, _ = run(kiln, base, "disagree", [randn(3, 16), randn(5, 16)])
    expect("inputs disagreeing on a shared dimension are refused",
           r.returncode != 0 and "input 'y' dimension 0 is 5" in r.stderr, r.stderr.strip())
    # One plan serves every size: the arena is the one the maximum needs.
    chain = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Exp", ["x"], ["e"]),
             helper.make_node("Add", ["r", "e"], ["out"])]
    fixed = make(chain, [("x", [6, 16])], [("out", [6, 16])])
    bounded = make(chain, [("x", ["n", 16])], [("out", ["n", 16])])
    pf, fixed_base = plan(kiln, "arena_fixed", fixed, {}, workdir)
    pb, bounded_base = plan(kiln, "arena_bounded", bounded, {"x": "2:6x16"}, workdir)
    arenas = [subprocess.run([kiln, "inspect", b + ".kiln"], capture_output=True, text=True).stdout
              for b in (fixed_base, bounded_base)]
    arena_line = [next((ln for ln in a.splitlines() if "ordinary" in ln), "") for a in arenas]
    expect("the bounded plan's arena is the maximum's", pf.returncode == 0 and pb.returncode == 0 and
           arena_line[0] != "" and arena_line[0] == arena_line[1], f"{arena_line}")
    expect("kiln inspect lists the bound", "'n' 2:6  input #0 'x' dimension 0" in arenas[1], arenas[1][:400])
    expect("kiln plan's summary lists the bound", "bounded:     'n' 2:6 (x dimension 0)" in pb.stdout, pb.stdout)
    # A value folded from the input's shape: x * (float) s.
    shape_scale = make([helper.make_node("Shape", ["x"], ["shape"]),
                        helper.make_node("Gather", ["shape", "one"], ["s"], axis=0),
                        helper.make_node("Cast", ["s"], ["sf"], to=TensorProto.FLOAT),
                        helper.make_node("Mul", ["x", "sf"], ["out"], name="scale_by_length")],
                       [("x", [4, "s"])], [("out", [4, "s"])], [("one", np.array(1, np.int64))])
    p, _ = plan(kiln, "refuse_scale", shape_scale, {"x": "4x2:9"}, workdir)
    expect("a value folded from the bounded size is refused naming it",
           p.returncode != 0 and "folded from the bounded dimension" in p.stderr and "'sf'" in p.stderr,
           p.stderr.strip())
    # A Slice to s - 1 along the bounded axis: its extent follows s, its
    # parameters (starts, steps) do not.
    shape_slice = make([helper.make_node("Shape", ["x"], ["shape"]),
                        helper.make_node("Gather", ["shape", "one"], ["s"], axis=0),
                        helper.make_node("Sub", ["s", "one"], ["end"]),
                        helper.make_node("Unsqueeze", ["end", "zero1"], ["ends"]),
                        helper.make_node("Slice", ["x", "zero1", "ends", "one1"], ["cut"]),
                        helper.make_node("Relu", ["cut"], ["out"])],
                       [("x", [4, "s"])], [("out", [4, "s1"])],
                       [("one", np.array(1, np.int64)), ("zero1", np.array([0], np.int64)),
                        ("one1", np.array([1], np.int64))])
    p, base = plan(kiln, "slice_to_length", shape_slice, {"x": "4x2:9"}, workdir)
    x = randn(4, 5)
    r, out = run(kiln, base, "5", [x])
    got = np.load(os.path.join(out, "output_0.npy")) if r.returncode == 0 else None
    expect("a Slice to the bounded length minus one runs at a smaller size",
           p.returncode == 0 and got is not None and not compare("slice", got, np.maximum(x[:, :4], 0), TOLERANCE),
           p.stderr + r.stderr)
    p, _ = plan(kiln, "refuse_bound", m, {"x": "1:6x16", "y": "1:5x16"}, workdir)
    expect("one named dimension bounded two ways is refused",
           p.returncode != 0 and "give them one bound" in p.stderr, p.stderr.strip())


def capi(kiln, capi_test, workdir):
    """The C API at n = 2, 5 and 6 of one plan bounded 2:6 (Relu + Exp)."""
    chain = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Exp", ["x"], ["e"]),
             helper.make_node("Add", ["r", "e"], ["out"])]
    p, base = plan(kiln, "capi_bounded", make(chain, [("x", ["n", 16])], [("out", ["n", 16])]), {"x": "2:6x16"},
                   workdir)
    expect("planned for the C API", p.returncode == 0, p.stderr)
    args = [capi_test, base + ".kiln", "6"]
    for n in (5, 2, 6):
        x = randn(n, 16)
        x.tofile(f"{base}_{n}.bin")
        (np.maximum(x, 0) + np.exp(x)).astype(np.float32).tofile(f"{base}_{n}_expected.bin")
        args += [str(n), f"{base}_{n}.bin", f"{base}_{n}_expected.bin"]
    r = subprocess.run(args, capture_output=True, text=True)
    expect("the C API binds and runs n = 5, 2, 6 of one plan", r.returncode == 0, r.stdout + r.stderr)


ARGS = None


def main():
    global ARGS
    args = ARGS = test_args(with_only=True, extra=[("--capi-test", "tests/capi/bounded_test.c's binary")])
    run_each(CASES, args.only, lambda name: run_case(name, args.kiln, args.workdir))
    if not args.only:
        refusals(args.kiln, args.workdir)
        if args.capi_test:
            capi(args.kiln, args.capi_test, args.workdir)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
