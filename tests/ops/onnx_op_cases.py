#!/usr/bin/env python3
"""Op cases the ONNX backend node tests leave out, checked against NumPy.

Each case is a one- or few-node ONNX model built here; `kiln plan` and
`kiln run` must reproduce the expected outputs exactly for integer and bool
results and within 1e-5 (relative to the output's scale) for floats. The
cases cover ops without node tests (com.microsoft Gelu), dtypes and
attribute combinations the node tests do not exercise (integer reductions
over non-adjacent axes, Slice with negative steps on several axes, three-way
broadcasting in Where, unused Split and LayerNormalization outputs,
integer Pow and Clip), and Shape folding of a value computed at run time.

usage: onnx_op_cases.py --kiln PATH/TO/kiln --workdir DIR [--only NAME]
"""
import math
import os
import subprocess
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from kiln_checks import expect, finish, test_args  # noqa: E402


TOLERANCE = 1e-5
RNG = np.random.default_rng(7)

ONNX_TYPES = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.bool_): TensorProto.BOOL,
    np.dtype(np.uint8): TensorProto.UINT8,
}


def model(nodes, inputs, outputs, initializers=(), opset=17, extra_opsets=()):
    """inputs: name -> array (graph inputs); outputs: name -> expected array.
    Returns the model and the expected outputs."""
    graph = helper.make_graph(
        nodes, "case",
        [helper.make_tensor_value_info(n, ONNX_TYPES[a.dtype], a.shape) for n, a in inputs.items()],
        [helper.make_tensor_value_info(n, ONNX_TYPES[a.dtype], a.shape) for n, a in outputs.items()],
        [numpy_helper.from_array(a, n) for n, a in initializers])
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    return helper.make_model(graph, opset_imports=opsets), outputs


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def case_gelu():
    x = np.linspace(-4, 4, 24, dtype=np.float32).reshape(2, 3, 4)
    want = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.ravel()], np.float32).reshape(x.shape)
    return model([helper.make_node("Gelu", ["x"], ["y"], domain="com.microsoft")], {"x": x}, {"y": want},
                 extra_opsets=[("com.microsoft", 1)]), [x]


def case_reduce_int_axes():
    x = RNG.integers(-50, 50, (3, 4, 5, 2)).astype(np.int64)
    nodes = [helper.make_node("ReduceSum", ["x", "axes"], ["s"], keepdims=0),
             helper.make_node("ReduceMax", ["x"], ["m"], axes=[1, 3], keepdims=1),
             helper.make_node("ReduceProd", ["x"], ["p"], axes=[0, 2], keepdims=0)]
    want = {"s": x.sum(axis=(0, 2)), "m": x.max(axis=(1, 3), keepdims=True), "p": np.prod(x, axis=(0, 2))}
    return model(nodes, {"x": x}, want, [("axes", np.array([0, -2], np.int64))]), [x]


def case_reduce_float_trailing():
    x = randn(2, 3, 4, 5)
    nodes = [helper.make_node("ReduceMean", ["x"], ["mean"], axes=[2, 3]),
             helper.make_node("ReduceLogSumExp", ["x"], ["lse"], axes=[0, 3], keepdims=0),
             helper.make_node("ReduceL2", ["x"], ["l2"], axes=[1])]
    lse = np.log(np.exp(x.astype(np.float64)).sum(axis=(0, 3))).astype(np.float32)
    want = {"mean": x.mean(axis=(2, 3), keepdims=True), "lse": lse,
            "l2": np.sqrt((x * x).sum(axis=1, keepdims=True))}
    return model(nodes, {"x": x}, want), [x]


def case_slice_negative_steps():
    x = np.arange(4 * 6 * 5, dtype=np.int64).reshape(4, 6, 5)
    inits = [("starts", np.array([-1, 5, 1], np.int64)), ("ends", np.array([-100, 0, 100], np.int64)),
             ("axes", np.array([0, 1, 2], np.int64)), ("steps", np.array([-2, -3, 2], np.int64))]
    node = helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])
    return model([node], {"x": x}, {"y": x[::-2, 5:0:-3, 1::2]}, inits), [x]


def case_where_expand_compare():
    c = RNG.random((1, 4, 1)) > 0.5
    x = randn(3, 1, 5)
    y = np.array(2.5, np.float32)
    e = RNG.integers(0, 9, (1, 3)).astype(np.int64)
    nodes = [helper.make_node("Where", ["c", "x", "y"], ["w"]),
             helper.make_node("Expand", ["e", "shape"], ["ex"]),
             helper.make_node("GreaterOrEqual", ["ex", "k"], ["ge"]),
             helper.make_node("Xor", ["ge", "c3"], ["xo"])]
    c3 = np.array([True, False, True])
    ex = np.broadcast_to(e, (2, 1, 3))
    want = {"w": np.where(c, x, y), "ex": ex, "xo": np.logical_xor(ex >= 4, c3)}
    inits = [("y", y), ("shape", np.array([2, 1, 1], np.int64)), ("k", np.array([4], np.int64)), ("c3", c3)]
    return model(nodes, {"c": c, "x": x, "e": e}, want, inits), [c, x, e]


def case_split_unused_output():
    x = randn(2, 7, 3)
    node = helper.make_node("Split", ["x", "split"], ["a", "", "b"], axis=1)
    want = {"a": x[:, :2], "b": x[:, 5:]}
    return model([node], {"x": x}, want, [("split", np.array([2, 3, 2], np.int64))]), [x]


def case_layer_norm_outputs():
    x = randn(2, 3, 4)
    w = randn(3, 4)
    # Only Mean is used (InvStdDev unused), no bias.
    node = helper.make_node("LayerNormalization", ["x", "w"], ["y", "mean"], axis=1, epsilon=1e-3)
    xd = x.astype(np.float64)
    mean = xd.mean(axis=(1, 2), keepdims=True)
    var = ((xd - mean) ** 2).mean(axis=(1, 2), keepdims=True)
    want = {"y": ((xd - mean) / np.sqrt(var + 1e-3) * w).astype(np.float32), "mean": mean.astype(np.float32)}
    return model([node], {"x": x}, want, [("w", w)]), [x]


def case_conv_transpose_1d_group():
    x = randn(2, 4, 7)
    w = randn(4, 3, 3)
    b = randn(6)
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], group=2, strides=[2], pads=[1, 0],
                            output_padding=[1], dilations=[2])
    want = F.conv_transpose1d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), stride=2, padding=0,
                              output_padding=1, groups=2, dilation=2).numpy()
    want = want[:, :, 1:]  # pads [1, 0]: one element cut at the start only
    return model([node], {"x": x}, {"y": want}, [("w", w), ("b", b)]), [x]


def case_resize_rank3_linear():
    x = randn(2, 3, 5)
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear",
                            coordinate_transformation_mode="pytorch_half_pixel")
    want = F.interpolate(torch.from_numpy(x), scale_factor=2.5, mode="linear", align_corners=False,
                         recompute_scale_factor=False).numpy()
    return model([node], {"x": x}, {"y": want}, [("scales", np.array([1, 1, 2.5], np.float32))]), [x]


def case_shape_folding():
    # Shape of a runtime value drives a Reshape: folded at plan time.
    x = randn(2, 3, 4)
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Shape", ["r"], ["s"], start=-1),
             helper.make_node("Concat", ["minus_one", "s"], ["target"], axis=0),
             helper.make_node("Reshape", ["r", "target"], ["y"])]
    return model(nodes, {"x": x}, {"y": np.maximum(x, 0).reshape(-1, 4)},
                 [("minus_one", np.array([-1], np.int64))]), [x]


def case_integer_pow_clip():
    b = np.array([[3, -2, 7, 1], [-1, 2, 0, 5]], np.int64)
    e = np.array([5, 3, -1, 0], np.int64)
    xi = RNG.integers(-100, 100, (3, 4)).astype(np.int32)
    nodes = [helper.make_node("Pow", ["b", "e"], ["p"]),
             helper.make_node("Clip", ["xi", "", "hi"], ["c"])]
    pw = np.array([[243, -8, 0, 1], [-1, 8, 0, 1]], np.int64)
    want = {"p": pw, "c": np.minimum(xi, 17)}
    return model(nodes, {"b": b, "xi": xi}, want, [("e", e), ("hi", np.array(17, np.int32))]), [b, xi]


CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith("case_")}


def run_case(name, kiln, workdir):
    (m, expected), inputs = CASES[name]()
    onnx.checker.check_model(m)
    base = os.path.join(workdir, name)
    onnx.save(m, base + ".onnx")
    args = []
    for i, a in enumerate(inputs):
        np.save(f"{base}_in{i}.npy", a)
        args += ["--input", f"{base}_in{i}.npy"]
    subprocess.run([kiln, "plan", base + ".onnx", "-o", base + ".kiln"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([kiln, "run", base + ".kiln", *args, "--output-dir", base + "_out"], check=True,
                   stdout=subprocess.DEVNULL)
    problems = []
    for i, out in enumerate(m.graph.output):
        want = expected[out.name]
        got = np.load(os.path.join(base + "_out", f"output_{i}.npy"))
        if got.shape != want.shape or got.dtype != want.dtype:
            problems.append(f"{out.name}: {got.dtype}{list(got.shape)} != {want.dtype}{list(want.shape)}")
        elif want.dtype == np.float32:
            scale = max(float(np.max(np.abs(want))), 1e-30) if want.size else 1.0
            err = float(np.max(np.abs(got - want))) / scale if want.size else 0.0
            if not err <= TOLERANCE:
                problems.append(f"{out.name}: relative error {err:.2e}")
        elif not np.array_equal(got, want):
            problems.append(f"{out.name}: values differ")
    return problems


def main():
    args = test_args(with_only=True)
    for name in CASES:
        if args.only and name != args.only:
            continue
        try:
            problems = run_case(name, args.kiln, args.workdir)
        except subprocess.CalledProcessError as e:
            problems = [f"{' '.join(e.cmd[:2])} failed with status {e.returncode}"]
        expect(name, not problems, "; ".join(problems))
    return finish()


if __name__ == "__main__":
    sys.exit(main())
