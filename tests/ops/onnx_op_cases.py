#!/usr/bin/env python3
"""Op cases the ONNX backend node tests leave out, checked against NumPy.

Each case is a one- or few-node ONNX model built here; `kiln plan` and
`kiln run` must reproduce the expected outputs exactly for integer and bool
results and within 1e-5 (relative to the output's scale) for floats. The
cases cover ops without node tests (com.microsoft Gelu), dtypes and
attribute combinations the node tests do not exercise (integer reductions
over non-adjacent axes, Slice with negative steps on several axes, three-way
broadcasting in Where, unused Split and LayerNormalization outputs,
integer Pow and Clip, Min and Max over unsigned, int16 and float64 values,
MaxPool over int8 and uint8, TopK with ties, the Einsum contractions torch
exports, scatters and gathers with negative and duplicate indices,
ReverseSequence on either axis order, Det of batches from 1x1 to 8x8 with
row swaps, a singular matrix and empty shapes), and
Shape folding of a value computed at run time. The refusals check that an
index or sequence length out of range at run time fails `kiln run` naming
the kernel; the plan refusals, that what is not supported fails `kiln plan`
with one line naming the node.

usage: onnx_op_cases.py --kiln PATH/TO/kiln --workdir DIR [--only NAME]
"""
import json
import math
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from kiln_checks import expect, finish, test_args  # noqa: E402
from onnx_cases import check_case, plan_and_run, plan_only, run_each  # noqa: E402


TOLERANCE = 1e-5
RNG = np.random.default_rng(7)

ONNX_TYPES = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.bool_): TensorProto.BOOL,
    np.dtype(np.uint8): TensorProto.UINT8,
    np.dtype(np.int8): TensorProto.INT8,
    np.dtype(np.int16): TensorProto.INT16,
    np.dtype(np.uint32): TensorProto.UINT32,
    np.dtype(np.uint64): TensorProto.UINT64,
    np.dtype(np.float64): TensorProto.DOUBLE,
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


def case_conv_transpose_2d_blocks():
    # 2-D, run as products over blocks of input positions: 50x48 = 2,400
    # positions are two blocks (gemm_blocking.h's kConvTransposeColumns), the
    # second partial and starting mid-row; groups, strides 2 and 3,
    # dilation, asymmetric pads, output padding, and a fused Relu.
    x = randn(1, 6, 50, 48)
    w = randn(6, 2, 3, 2)
    b = randn(6)
    nodes = [helper.make_node("ConvTranspose", ["x", "w", "b"], ["t"], group=3, strides=[2, 3], pads=[1, 0, 0, 1],
                              output_padding=[1, 0], dilations=[2, 1]),
             helper.make_node("Relu", ["t"], ["y"])]
    full = F.conv_transpose2d(torch.from_numpy(x).double(), torch.from_numpy(w).double(),
                              torch.from_numpy(b).double(), stride=(2, 3), output_padding=(1, 0), groups=3,
                              dilation=(2, 1)).numpy()
    want = np.maximum(full[:, :, 1:, :full.shape[3] - 1], 0).astype(np.float32)
    return model(nodes, {"x": x}, {"y": want}, [("w", w), ("b", b)]), [x]


def case_conv_transpose_kernel_as_stride():
    # Kernel = stride (U-Net's up-sampling): the columns are stored where
    # they land, not added. 2x2 at stride 2 over 60 x 50 = 3,000 positions
    # (two blocks, the second starting mid-row) with a fused Relu, and 2x3
    # at strides (2, 3) with two groups.
    x = randn(1, 8, 60, 50)
    w = randn(8, 3, 2, 2)
    b = randn(3)
    x2 = randn(2, 4, 5, 7)
    w2 = randn(4, 3, 2, 3)
    b2 = randn(6)
    nodes = [helper.make_node("ConvTranspose", ["x", "w", "b"], ["t"], strides=[2, 2]),
             helper.make_node("Relu", ["t"], ["y"]),
             helper.make_node("ConvTranspose", ["x2", "w2", "b2"], ["y2"], strides=[2, 3], group=2)]
    y = F.conv_transpose2d(torch.from_numpy(x).double(), torch.from_numpy(w).double(), torch.from_numpy(b).double(),
                           stride=2).clamp(min=0).numpy().astype(np.float32)
    y2 = F.conv_transpose2d(torch.from_numpy(x2).double(), torch.from_numpy(w2).double(),
                            torch.from_numpy(b2).double(), stride=(2, 3), groups=2).numpy().astype(np.float32)
    return model(nodes, {"x": x, "x2": x2}, {"y": y, "y2": y2}, [("w", w), ("b", b), ("w2", w2), ("b2", b2)]), [x, x2]


def case_transpose_paths():
    # Every permutation of three inputs, through each of the Transpose
    # kernel's ways (shape_ops.cc): row copies, 2- to 4-wide interleaves,
    # tiles (37 x 70: partial tiles both ways) and element by element;
    # size-1 axes and axes that merge, over 1-, 4- and 8-byte elements.
    from itertools import permutations
    inputs = {"a": randn(2, 3, 1, 4, 5), "b": RNG.integers(0, 256, (3, 37, 70), dtype=np.uint8),
              "c": RNG.integers(-2**40, 2**40, (2, 4, 3, 2), dtype=np.int64)}
    nodes, want = [], {}
    for name, x in inputs.items():
        for perm in permutations(range(x.ndim)):
            out = name + "_" + "".join(map(str, perm))
            nodes.append(helper.make_node("Transpose", [name], [out], perm=list(perm)))
            want[out] = np.transpose(x, perm)
    return model(nodes, inputs, want), list(inputs.values())


def case_depth_to_space_modes():
    # DepthToSpace in both modes and SpaceToDepth, on floats and bytes:
    # the 2- and 3-wide interleaves.
    x = randn(2, 18, 5, 7)
    q = RNG.integers(0, 256, (1, 16, 6, 9), dtype=np.uint8)
    nodes = [helper.make_node("DepthToSpace", ["x"], ["dcr"], blocksize=3, mode="DCR"),
             helper.make_node("DepthToSpace", ["q"], ["crd"], blocksize=2, mode="CRD"),
             helper.make_node("SpaceToDepth", ["crd"], ["back"], blocksize=2)]
    n, c, h, w = x.shape
    dcr = x.reshape(n, 3, 3, c // 9, h, w).transpose(0, 3, 4, 1, 5, 2).reshape(n, c // 9, h * 3, w * 3)
    n, c, h, w = q.shape
    crd = q.reshape(n, c // 4, 2, 2, h, w).transpose(0, 1, 4, 2, 5, 3).reshape(n, c // 4, h * 2, w * 2)
    back = crd.reshape(n, c // 4, h, 2, w, 2).transpose(0, 3, 5, 1, 2, 4).reshape(n, c, h, w)
    return model(nodes, {"x": x, "q": q}, {"dcr": dcr, "crd": crd, "back": back}), [x, q]


def conv2d_case(x, w, b, group, stride, pad, relu):
    """A Conv (and Relu) node over x with weights w and bias b, and its outputs by torch in float64."""
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["t" if relu else "y"], group=group, strides=[stride, stride],
                              pads=[pad] * 4)]
    if relu:
        nodes.append(helper.make_node("Relu", ["t"], ["y"]))
    want = F.conv2d(torch.from_numpy(x).double(), torch.from_numpy(w).double(), torch.from_numpy(b).double(),
                    stride=stride, padding=pad, groups=group).numpy()
    if relu:
        want = np.maximum(want, 0)
    return model(nodes, {"x": x}, {"y": want.astype(np.float32)}, [("w", w), ("b", b)]), [x]


def case_conv_lanes_groups():
    # ConvLanes (output channels in lanes) with groups: two groups of 40
    # input channels, 3x3 stride 2 onto a 7 x 7 plane, two images, a fused
    # Relu.
    return conv2d_case(randn(2, 80, 13, 13), randn(64, 40, 3, 3), randn(64), 2, 2, 1, True)


def case_conv_lanes_small_groups():
    # ConvLanes with groups of 16 channels (on larger planes the grouped
    # direct kernel takes them): 6 groups, 3x3 stride 1 on a 7 x 8 plane,
    # two images.
    return conv2d_case(randn(2, 96, 7, 8), randn(96, 16, 3, 3), randn(96), 6, 1, 1, True)


def case_conv_lanes_pointwise():
    # ConvLanes on a 1x1 kernel (its tiles read the image): 40 output
    # channels (a 16-channel tile last), a 5 x 9 plane, two images.
    return conv2d_case(randn(2, 300, 5, 9), randn(40, 300, 1, 1), randn(40), 1, 1, 0, False)


def case_conv_lanes_strided():
    # ConvLanes on a larger plane, its tiles reading the image through a
    # table of offsets: a 3x3 stride-2 kernel onto 10 x 10 (100 positions)
    # from a padded 20 x 20 image, 48 output channels (a 16-channel tile
    # last), two images, a fused Relu.
    return conv2d_case(randn(2, 36, 20, 20), randn(48, 36, 3, 3), randn(48), 1, 2, 1, True)


def case_qdq_movers_that_must_stay_float():
    # Between a DQ and a Q of one quantization, a Pad by the constant 0 moves
    # bytes only where the zero point is 0, and a linear Resize never does:
    # with zero point 128 the padding is the byte 128 and a linear Resize
    # blends values, so both stay float and the outputs are still exact.
    # The same ops at zero point 0 (int8) and in nearest mode move bytes.
    # A scale of 0.25 keeps every step exact, so ties round alike here and
    # in the kernels (half to even).
    scale = np.array(0.25, np.float32)
    zp_u = np.array(128, np.uint8)
    zp_s = np.array(0, np.int8)
    u = RNG.integers(0, 256, (1, 2, 4, 4)).astype(np.uint8)
    s8 = RNG.integers(-128, 128, (1, 2, 4, 4)).astype(np.int8)
    scales = np.array([1, 1, 2, 2], np.float32)
    nodes = [helper.make_node("DequantizeLinear", ["u", "scale", "zp_u"], ["ud"]),
             helper.make_node("Pad", ["ud", "pads"], ["up"]),
             helper.make_node("QuantizeLinear", ["up", "scale", "zp_u"], ["pad_u"]),
             helper.make_node("Resize", ["ud", "", "scales"], ["ur"], mode="linear"),
             helper.make_node("QuantizeLinear", ["ur", "scale", "zp_u"], ["linear_u"]),
             helper.make_node("DequantizeLinear", ["s8", "scale", "zp_s"], ["sd"]),
             helper.make_node("Pad", ["sd", "pads"], ["sp"]),
             helper.make_node("QuantizeLinear", ["sp", "scale", "zp_s"], ["pad_s"]),
             helper.make_node("Resize", ["sd", "", "scales"], ["sr"], mode="nearest"),
             helper.make_node("QuantizeLinear", ["sr", "scale", "zp_s"], ["nearest_s"])]
    pads = np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64)
    width = ((0, 0), (0, 0), (1, 2), (2, 1))
    ud = (u.astype(np.float32) - 128) * scale
    linear = F.interpolate(torch.from_numpy(ud), scale_factor=2, mode="bilinear", align_corners=False).numpy()
    want = {"pad_u": np.pad(u, width, constant_values=128),
            "linear_u": np.clip(np.rint(linear / scale) + 128, 0, 255).astype(np.uint8),
            "pad_s": np.pad(s8, width, constant_values=0),
            "nearest_s": s8.repeat(2, axis=2).repeat(2, axis=3)}
    return model(nodes, {"u": u, "s8": s8}, want,
                 [("scale", scale), ("zp_u", zp_u), ("zp_s", zp_s), ("scales", scales), ("pads", pads)]), [u, s8]


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


def case_min_max_wide_dtypes():
    # Unsigned values above the signed range, three broadcast inputs.
    u = np.array([[1, 2**63 + 5, 7], [2**64 - 1, 0, 9]], np.uint64)
    v = np.array([2**63, 3, 8], np.uint64)
    w = np.array([[4], [2**62]], np.uint64)
    h = RNG.integers(-300, 300, (3, 4)).astype(np.int16)
    g = RNG.integers(0, 2**32, (3, 4), dtype=np.uint64).astype(np.uint32)
    d = RNG.standard_normal((2, 3))
    nodes = [helper.make_node("Max", ["u", "v", "w"], ["umax"]), helper.make_node("Min", ["u", "v", "w"], ["umin"]),
             helper.make_node("Max", ["h", "h_row"], ["hmax"]), helper.make_node("Min", ["g", "g_row"], ["gmin"]),
             helper.make_node("Min", ["d", "d2"], ["dmin"])]
    h_row = np.array([-5, 0, 5, 100], np.int16)
    g_row = np.array([2**31, 7, 2**32 - 1, 0], np.uint32)
    d2 = np.array([0.5, -0.5, 0.0])
    want = {"umax": np.maximum(np.maximum(u, v), w), "umin": np.minimum(np.minimum(u, v), w),
            "hmax": np.maximum(h, h_row), "gmin": np.minimum(g, g_row), "dmin": np.minimum(d, d2)}
    return model(nodes, {"u": u, "v": v, "w": w, "h": h, "g": g, "d": d}, want,
                 [("h_row", h_row), ("g_row", g_row), ("d2", d2)]), [u, v, w, h, g, d]


def case_max_pool_8bit():
    # int8 with padding (the pads never win, even over -128) and uint8.
    x = RNG.integers(-128, 128, (1, 2, 6, 5)).astype(np.int8)
    u = RNG.integers(0, 256, (1, 1, 5, 5)).astype(np.uint8)
    nodes = [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("MaxPool", ["u"], ["v"], kernel_shape=[2, 2], dilations=[2, 1])]
    y = F.max_pool2d(torch.from_numpy(x.astype(np.float32)), 3, stride=2, padding=1).numpy().astype(np.int8)
    v = F.max_pool2d(torch.from_numpy(u.astype(np.float32)), 2, stride=1, dilation=(2, 1)).numpy().astype(np.uint8)
    return model(nodes, {"x": x, "u": u}, {"y": y, "v": v}), [x, u]


def case_global_average_pool_long_planes():
    # Planes of 143 (eight runs of the sixteen running sums and a tail of
    # 15), 16, 1 and 3136 (a 56x56 feature map) floats, offset from zero.
    xs = [randn(2, 3, 13, 11) + np.float32(3), randn(1, 4, 4, 4), randn(1, 5, 1, 1),
          randn(1, 2, 56, 56) - np.float32(1)]
    names = ["a", "b", "c", "d"]
    nodes = [helper.make_node("GlobalAveragePool", [n], [n + "_y"]) for n in names]
    outputs = {n + "_y": x.astype(np.float64).mean(axis=(2, 3), keepdims=True).astype(np.float32)
               for n, x in zip(names, xs)}
    return model(nodes, dict(zip(names, xs)), outputs), xs


def case_reverse_sequence():
    # Lengths 0, partial and full, batch first and time first.
    x = RNG.integers(-99, 99, (4, 5, 2)).astype(np.int64)
    lens = np.array([0, 3, 5, 1], np.int32)
    t = randn(5, 3)
    t_lens = np.array([2, 5, 4], np.int64)
    want_x = x.copy()
    for b, n in enumerate(lens):
        want_x[b, :n] = x[b, :n][::-1]
    want_t = t.copy()
    for b, n in enumerate(t_lens):
        want_t[:n, b] = t[:n, b][::-1]
    nodes = [helper.make_node("ReverseSequence", ["x", "lens"], ["y"], batch_axis=0, time_axis=1),
             helper.make_node("ReverseSequence", ["t", "t_lens"], ["u"])]
    return model(nodes, {"x": x, "lens": lens, "t": t, "t_lens": t_lens}, {"y": want_x, "u": want_t}), \
        [x, lens, t, t_lens]


def stable_topk(x, k, axis, largest):
    order = np.argsort(-x if largest else x, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis=axis), idx.astype(np.int64)


def case_topk_ties_long_axis():
    # Many ties along an axis of 40 that is not the last: the lower index
    # comes first, for largest and smallest; k from a constant.
    x = RNG.integers(0, 6, (3, 40, 5)).astype(np.float32)
    nodes = [helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1),
             helper.make_node("TopK", ["x", "k"], ["sv", "si"], axis=-2, largest=0)]
    v, i = stable_topk(x, 7, 1, True)
    sv, si = stable_topk(x, 7, 1, False)
    return model(nodes, {"x": x}, {"v": v, "i": i, "sv": sv, "si": si},
                 [("k", np.array([7], np.int64))]), [x]


def case_einsum_torch_patterns():
    # Contractions torch exports (attention scores and values, batched
    # products, outer products), an implicit output, "...", three operands.
    q, k, v = randn(2, 3, 4, 8), randn(2, 3, 5, 8), randn(2, 3, 5, 8)
    a, b = randn(4, 3, 6), randn(4, 6, 2)
    x, y = randn(5), randn(7)
    m, n, p = randn(3, 4), randn(4, 6), randn(6, 2)
    nodes = [helper.make_node("Einsum", ["q", "k"], ["scores"], equation="bhid,bhjd->bhij"),
             helper.make_node("Einsum", ["scores", "v"], ["ctx"], equation="bhij,bhjd->bhid"),
             helper.make_node("Einsum", ["a", "b"], ["ab"], equation="bij,bjk->bik"),
             helper.make_node("Einsum", ["x", "y"], ["outer"], equation="i,j->ij"),
             helper.make_node("Einsum", ["m", "n"], ["implicit"], equation="ij, jk"),
             helper.make_node("Einsum", ["a"], ["ell"], equation="...ij->...ji"),
             helper.make_node("Einsum", ["m", "n", "p"], ["chain"], equation="ij,jk,kl->li")]
    scores = np.einsum("bhid,bhjd->bhij", q, k)
    want = {"scores": scores, "ctx": np.einsum("bhij,bhjd->bhid", scores, v),
            "ab": np.einsum("bij,bjk->bik", a, b), "outer": np.einsum("i,j->ij", x, y),
            "implicit": m @ n, "ell": np.einsum("...ij->...ji", a), "chain": (m @ n @ p).T}
    inputs = {"q": q, "k": k, "v": v, "a": a, "b": b, "x": x, "y": y, "m": m, "n": n, "p": p}
    return model(nodes, inputs, want), list(inputs.values())


def case_scatter_gather_indices():
    # Negative indices, duplicate indices under a reduction, GatherND with
    # batch dims, OneHot with an index out of range (a row of off values).
    data = randn(4, 5)
    idx = np.array([[-1, 0, -5], [2, 2, -3], [4, -4, 1], [0, 0, 0]], np.int64)
    upd = randn(4, 3)
    added = data.copy()
    for r in range(4):
        for c in range(3):
            added[r, idx[r, c]] += upd[r, c]
    nd_idx = np.array([[1], [-1], [1]], np.int64)
    nd_upd = randn(3, 5)
    multiplied = data.copy()
    for t in range(3):
        multiplied[nd_idx[t, 0]] *= nd_upd[t]
    g = randn(2, 3, 4, 5)
    g_idx = np.array([[[0, 1], [2, -1]], [[-1, 0], [1, 3]]], np.int64)
    gathered = np.stack([np.stack([g[b][tuple(t)] for t in g_idx[b]]) for b in range(2)])
    hot_idx = np.array([[0, 5, -1], [7, -6, 2]], np.int64)
    hot = np.full((2, 6, 3), 2, np.int32)
    for i in range(2):
        for j in range(3):
            h = hot_idx[i, j]
            if -6 <= h < 6:
                hot[i, h % 6, j] = 9
    nodes = [helper.make_node("ScatterElements", ["data", "idx", "upd"], ["added"], axis=1, reduction="add"),
             helper.make_node("ScatterND", ["data", "nd_idx", "nd_upd"], ["multiplied"], reduction="mul"),
             helper.make_node("GatherND", ["g", "g_idx"], ["gathered"], batch_dims=1),
             helper.make_node("OneHot", ["hot_idx", "depth", "values"], ["hot"], axis=1)]
    want = {"added": added, "multiplied": multiplied, "gathered": gathered, "hot": hot}
    inputs = {"data": data, "upd": upd, "nd_upd": nd_upd, "g": g, "hot_idx": hot_idx}
    return model(nodes, inputs, want, [("idx", idx), ("nd_idx", nd_idx), ("g_idx", g_idx),
                                       ("depth", np.array(6, np.int64)), ("values", np.array([2, 9], np.int32))]), \
        list(inputs.values())


def torch_pool_indices(y_idx, x_shape, storage_order):
    """torch's per-plane row-major indices as ONNX's: counted over N and C
    too, and with storage_order 1 over the spatial axes column-major."""
    spatial = x_shape[2:]
    plane = int(np.prod(spatial))
    planes = np.arange(x_shape[0] * x_shape[1]).reshape(x_shape[0], x_shape[1], *([1] * len(spatial)))
    if storage_order == 1:
        y_idx = np.ravel_multi_index(np.unravel_index(y_idx, spatial), spatial, order="F")
    return (y_idx + planes * plane).astype(np.int64)


def case_pool_3d_and_indices():
    # 3-D MaxPool with Indices (storage_order 1, dilations,
    # padding, one NaN), 3-D AveragePool counting the padding, and 1-D
    # MaxPool with row-major Indices.
    x = randn(2, 3, 5, 6, 7)
    x[1, 2, 3, 4, 5] = np.nan
    t = torch.from_numpy(x)
    my, mi = F.max_pool3d(t, (2, 3, 2), stride=(2, 1, 2), padding=(1, 1, 0), dilation=(1, 2, 1),
                          return_indices=True)
    avg = F.avg_pool3d(t, (3, 2, 3), stride=(1, 2, 2), padding=(1, 1, 1), count_include_pad=True)
    s = randn(2, 2, 9)
    sy, si = F.max_pool1d(torch.from_numpy(s), 3, stride=2, padding=1, return_indices=True)
    nodes = [helper.make_node("MaxPool", ["x"], ["my", "mi"], kernel_shape=[2, 3, 2], strides=[2, 1, 2],
                              pads=[1, 1, 0, 1, 1, 0], dilations=[1, 2, 1], storage_order=1),
             helper.make_node("AveragePool", ["x"], ["avg"], kernel_shape=[3, 2, 3], strides=[1, 2, 2],
                              pads=[1, 1, 1, 1, 1, 1], count_include_pad=1),
             helper.make_node("MaxPool", ["s"], ["sy", "si"], kernel_shape=[3], strides=[2], pads=[1, 1])]
    want = {"my": my.numpy(), "mi": torch_pool_indices(mi.numpy(), x.shape, 1), "avg": avg.numpy(),
            "sy": sy.numpy(), "si": torch_pool_indices(si.numpy(), s.shape, 0)}
    return model(nodes, {"x": x, "s": s}, want), [x, s]


def case_grid_sample_hostile_grid():
    # Grid points outside [-1, 1], huge and infinite ones (zeros and border
    # padding: clamped, they land outside or on the edge) and NaN ones (a
    # NaN coordinate samples 0, kiln's documented choice), every mode,
    # padding mode and align_corners against PyTorch.
    x = randn(2, 3, 5, 6)
    near = RNG.uniform(-3, 3, (2, 4, 5, 2)).astype(np.float32)
    near[0, 1, 2, 0] = np.nan
    near[1, 3, 4, 1] = np.nan
    far = near.copy()
    far[0, 0, :, 0] = [1e30, -1e30, np.inf, -np.inf, 7e9]
    far[1, 2, :, 1] = [np.inf, -np.inf, 1e30, -3e9, 1.5]
    # PyTorch has no defined answer for infinities: ±1e6 lands in the
    # same place after kiln's clamp to ±2^30 for zeros and border padding.
    far_ref = np.clip(np.nan_to_num(far, nan=np.nan, posinf=1e6, neginf=-1e6), -1e6, 1e6)
    nodes, want = [], {}
    for mode in ("bilinear", "nearest", "bicubic"):
        for padding in ("zeros", "border", "reflection"):
            for align in (0, 1):
                for grid_name, grid, ref in (("near", near, near), ("far", far, far_ref)):
                    if grid_name == "far" and padding == "reflection":
                        continue
                    name = f"{mode}_{padding}_{align}_{grid_name}"
                    nodes.append(helper.make_node("GridSample", ["x", grid_name], [name], mode=mode,
                                                  padding_mode=padding, align_corners=align))
                    y = F.grid_sample(torch.from_numpy(x), torch.from_numpy(ref), mode=mode, padding_mode=padding,
                                      align_corners=bool(align)).numpy()
                    nan_point = np.isnan(grid).any(axis=-1)
                    y[np.broadcast_to(nan_point[:, None], y.shape)] = 0.0
                    want[name] = y
    return model(nodes, {"x": x, "near": near, "far": far}, want), [x, near, far]


def case_max_unpool_output_shape():
    # 3-D MaxPool's Indices unpooled into its unpooled shape and into a
    # larger output_shape (values keep their coordinates), and 1-D.
    x = randn(1, 2, 4, 6, 4)
    pooled, idx = F.max_pool3d(torch.from_numpy(x), 2, stride=2, return_indices=True)
    pooled = pooled.numpy()
    flat = torch_pool_indices(idx.numpy(), x.shape, 0)
    unpooled_shape = (1, 2, 4, 6, 4)  # (in - 1) * 2 + 2 per axis
    def unpool(shape):
        y = np.zeros(shape, np.float32)
        coords = np.unravel_index(flat.ravel(), unpooled_shape)
        y[coords] = pooled.ravel()
        return y
    s = randn(2, 1, 4)
    s_idx = np.array([[[0, 3, 5, 6]], [[1, 2, 4, 7]]], np.int64) + np.array([0, 8]).reshape(2, 1, 1)
    s_want = np.zeros((2, 1, 8), np.float32)
    s_want.ravel()[s_idx.ravel()] = s.ravel()
    nodes = [helper.make_node("MaxUnpool", ["p", "i"], ["same"], kernel_shape=[2, 2, 2], strides=[2, 2, 2]),
             helper.make_node("MaxUnpool", ["p", "i", "shape"], ["larger"], kernel_shape=[2, 2, 2],
                              strides=[2, 2, 2]),
             helper.make_node("MaxUnpool", ["s", "s_idx"], ["s_out"], kernel_shape=[2], strides=[2])]
    want = {"same": unpool(unpooled_shape), "larger": unpool((1, 2, 5, 7, 6)), "s_out": s_want}
    inputs = {"p": pooled, "i": flat, "s": s, "s_idx": s_idx}
    return model(nodes, inputs, want, [("shape", np.array([1, 2, 5, 7, 6], np.int64))]), list(inputs.values())


def case_det():
    # Batched matrices from 1x1 to 8x8, a zero leading pivot (a row swap), a
    # singular matrix, an empty batch and 0x0 matrices (determinant 1).
    a = randn(3, 4, 5, 5)
    swap = np.array([[0, 2, 1], [3, 1, 4], [1, 5, 9]], np.float32)
    singular = np.array([[[1, 2, 3], [2, 4, 6], [1, 0, 1]], [[2, 0, 0], [0, 3, 0], [0, 0, 4]]], np.float32)
    inputs = {"a": a, "one": randn(2, 1, 1), "b": randn(6, 8, 8), "swap": swap, "singular": singular,
              "empty_batch": randn(0, 3, 3), "empty_matrix": randn(2, 0, 0)}
    nodes = [helper.make_node("Det", [n], ["det_" + n]) for n in inputs]
    want = {"det_" + n: np.linalg.det(x.astype(np.float64)).astype(np.float32) for n, x in inputs.items()}
    return model(nodes, inputs, want), list(inputs.values())


def roi_align_reference(x, rois, batch, oh, ow, ratio, scale, half_pixel, max_mode):
    """RoiAlign as ONNX's reference and ONNX Runtime compute it (max mode:
    the largest weighted corner value), with kiln's bound on adaptive
    sampling (at most the input's extent per axis)."""
    _, c, h, w = x.shape
    y = np.zeros((len(rois), c, oh, ow), np.float32)
    off = 0.5 if half_pixel else 0.0
    for r, (box, b) in enumerate(zip(rois.astype(np.float64), batch)):
        x0, y0 = box[0] * scale - off, box[1] * scale - off
        rw, rh = box[2] * scale - off - x0, box[3] * scale - off - y0
        if not half_pixel:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / oh, rw / ow
        gh = ratio or min(max(int(math.ceil(rh / oh)), 1), h)
        gw = ratio or min(max(int(math.ceil(rw / ow)), 1), w)
        for py in range(oh):
            for px in range(ow):
                vals = []
                for iy in range(gh):
                    sy = y0 + py * bh + (iy + 0.5) * bh / gh
                    for ix in range(gw):
                        sx = x0 + px * bw + (ix + 0.5) * bw / gw
                        if not (-1 <= sy <= h and -1 <= sx <= w):
                            vals.append(np.zeros(c) if not max_mode else np.zeros((4, c)))
                            continue
                        sy_, sx_ = max(sy, 0.0), max(sx, 0.0)
                        ylo, xlo = int(sy_), int(sx_)
                        yhi, xhi = min(ylo + 1, h - 1), min(xlo + 1, w - 1)
                        if ylo >= h - 1:
                            ylo = yhi = h - 1
                            sy_ = float(ylo)
                        if xlo >= w - 1:
                            xlo = xhi = w - 1
                            sx_ = float(xlo)
                        ly, lx = sy_ - ylo, sx_ - xlo
                        corners = np.stack([(1 - ly) * (1 - lx) * x[b, :, ylo, xlo], (1 - ly) * lx * x[b, :, ylo, xhi],
                                            ly * (1 - lx) * x[b, :, yhi, xlo], ly * lx * x[b, :, yhi, xhi]])
                        vals.append(corners if max_mode else corners.sum(axis=0))
                vals = np.array(vals)
                y[r, :, py, px] = vals.max(axis=(0, 1)) if max_mode else vals.mean(axis=0)
    return y


def case_roi_align_modes():
    # avg against torchvision (aligned = half_pixel), max mode, a fixed
    # sampling_ratio, ROIs reaching outside the image, and ROIs the adaptive
    # sampling must not follow: huge (1e30: samples bounded by the image's
    # extent, all outside, so 0) and NaN (every sample 0).
    import torchvision
    x = randn(2, 3, 7, 9)
    rois = np.array([[0.5, 1.0, 6.2, 5.5], [-3.0, -2.0, 4.0, 9.5], [2.0, 2.0, 2.5, 2.2], [1.0, 0.0, 8.9, 6.9]],
                    np.float32)
    batch = np.array([1, 0, 1, 0], np.int64)
    hostile = np.array([[0.0, 0.0, 1e30, 1e30], [np.nan, 1.0, 3.0, np.nan]], np.float32)
    hostile_batch = np.array([0, 1], np.int64)
    boxes = torch.from_numpy(np.concatenate([batch[:, None].astype(np.float32), rois], axis=1))
    avg = torchvision.ops.roi_align(torch.from_numpy(x), boxes, (3, 4), spatial_scale=0.8, sampling_ratio=0,
                                    aligned=True).numpy()
    nodes = [helper.make_node("RoiAlign", ["x", "rois", "batch"], ["avg"], output_height=3, output_width=4,
                              spatial_scale=0.8),
             helper.make_node("RoiAlign", ["x", "rois", "batch"], ["max"], mode="max", output_height=2,
                              output_width=3, sampling_ratio=2, coordinate_transformation_mode="output_half_pixel"),
             helper.make_node("RoiAlign", ["x", "hostile", "hostile_batch"], ["far"], output_height=2,
                              output_width=2)]
    want = {"avg": avg,
            "max": roi_align_reference(x, rois, batch, 2, 3, 2, 1.0, False, True),
            "far": np.zeros((2, 3, 2, 2), np.float32)}
    inputs = {"x": x, "rois": rois, "batch": batch, "hostile": hostile, "hostile_batch": hostile_batch}
    return model(nodes, inputs, want, opset=16), list(inputs.values())


def case_resize_crop_extrapolate():
    # tf_crop_and_resize on a rank-3 input with scales (not sizes), a region
    # reaching outside the image (those rows and columns take
    # extrapolation_value), linear and nearest, against ONNX's reference.
    from onnx.backend.test.case.node.resize import interpolate_nd, linear_coeffs, nearest_coeffs
    x = randn(2, 5, 6)
    roi = np.array([0, -0.2, 0.3, 1, 0.9, 1.4], np.float32)
    scales = np.array([1, 1.5, 1.5], np.float32)
    nodes = [helper.make_node("Resize", ["x", "roi", "scales"], ["lin"], mode="linear",
                              coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-7.5),
             helper.make_node("Resize", ["x", "roi", "scales"], ["near"], mode="nearest",
                              coordinate_transformation_mode="tf_crop_and_resize", nearest_mode="round_prefer_ceil")]
    size = [2, 7, 9]
    lin = interpolate_nd(x, linear_coeffs, output_size=size, roi=roi, coordinate_transformation_mode="tf_crop_and_resize",
                         extrapolation_value=-7.5).astype(np.float32)
    near = interpolate_nd(x, lambda r: nearest_coeffs(r, mode="round_prefer_ceil"), output_size=size, roi=roi,
                          coordinate_transformation_mode="tf_crop_and_resize").astype(np.float32)
    return model(nodes, {"x": x}, {"lin": lin, "near": near}, [("roi", roi), ("scales", scales)]), [x]


def case_conv_transpose_3d_groups():
    # 3-D ConvTranspose with groups, strides, dilations, asymmetric pads,
    # output_padding and a bias, followed by a Relu (fused into it).
    x = randn(2, 4, 3, 4, 2)
    w = randn(4, 3, 2, 3, 2)
    b = randn(6)
    nodes = [helper.make_node("ConvTranspose", ["x", "w", "b"], ["t"], group=2, strides=[2, 1, 3],
                              dilations=[1, 2, 1], pads=[1, 0, 0, 0, 1, 1], output_padding=[1, 0, 2]),
             helper.make_node("Relu", ["t"], ["y"])]
    full = F.conv_transpose3d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), stride=(2, 1, 3),
                              output_padding=(1, 0, 2), groups=2, dilation=(1, 2, 1)).numpy()
    want = np.maximum(full[:, :, 1:, :full.shape[3] - 1, :full.shape[4] - 1], 0)
    return model(nodes, {"x": x}, {"y": want}, [("w", w), ("b", b)]), [x]


# Indices are data: one out of range must fail the run with a message
# naming the kernel, never read or write outside a tensor.
def refusal_scatter_elements():
    data, upd = randn(4, 5), randn(1, 2)
    idx = np.array([[1, 5]], np.int64)
    node = helper.make_node("ScatterElements", ["data", "idx", "upd"], ["y"], axis=1)
    return model([node], {"data": data, "idx": idx, "upd": upd}, {"y": data}), [data, idx, upd], "ScatterElements"


def refusal_gather_nd():
    data, idx = randn(4, 5), np.array([[0, -6]], np.int64)
    node = helper.make_node("GatherND", ["data", "idx"], ["y"])
    return model([node], {"data": data, "idx": idx}, {"y": randn(1)}), [data, idx], "GatherND"


def refusal_scatter_nd():
    data, idx, upd = randn(4, 5), np.array([[4]], np.int64), randn(1, 5)
    node = helper.make_node("ScatterND", ["data", "idx", "upd"], ["y"], reduction="add")
    return model([node], {"data": data, "idx": idx, "upd": upd}, {"y": data}), [data, idx, upd], "ScatterND"


def refusal_reverse_sequence():
    x, lens = randn(3, 2), np.array([1, 4], np.int64)
    node = helper.make_node("ReverseSequence", ["x", "lens"], ["y"])
    return model([node], {"x": x, "lens": lens}, {"y": x}), [x, lens], "ReverseSequence"


def refusal_max_unpool():
    x, idx = randn(1, 1, 2), np.array([[[1, 4]]], np.int64)
    node = helper.make_node("MaxUnpool", ["x", "idx"], ["y"], kernel_shape=[2], strides=[2])
    return model([node], {"x": x, "idx": idx}, {"y": randn(1, 1, 4)}), [x, idx], "MaxUnpool"


def refusal_roi_align_batch():
    x, rois, batch = randn(2, 1, 4, 4), np.array([[0, 0, 2, 2], [1, 1, 3, 3]], np.float32), np.array([1, 2], np.int64)
    node = helper.make_node("RoiAlign", ["x", "rois", "batch"], ["y"])
    return model([node], {"x": x, "rois": rois, "batch": batch}, {"y": randn(2, 1, 1, 1)}, opset=16), \
        [x, rois, batch], "RoiAlign"


REFUSALS = {name[8:]: fn for name, fn in sorted(globals().items()) if name.startswith("refusal_")}


# What kiln does not support is refused when planning, in one line naming
# the node and what is missing. Each returns the model and that text.
def plan_refusal(op, inputs, outputs, text, initializers=(), **attrs):
    node = helper.make_node(op, list(inputs) + [n for n, _ in initializers], list(outputs), name="refused", **attrs)
    return model([node], inputs, outputs, initializers)[0], text


def plan_refusal_pool_4d():
    x = randn(1, 1, 2, 2, 2, 2)
    return plan_refusal("MaxPool", {"x": x}, {"y": x}, "4-D pooling (1-D to 3-D windows are supported)",
                        kernel_shape=[1, 1, 1, 1])


def plan_refusal_grid_sample_5d():
    x, grid = randn(1, 1, 2, 2, 2), randn(1, 2, 2, 2, 3)
    return plan_refusal("GridSample", {"x": x, "grid": grid}, {"y": randn(1, 1, 2, 2, 2)},
                        "5-D input (only 4-D, N C H W, is supported)")


def plan_refusal_crop_cubic():
    x = randn(1, 1, 4, 4)
    return plan_refusal("Resize", {"x": x}, {"y": randn(1, 1, 2, 2)}, "tf_crop_and_resize in cubic mode",
                        [("roi", np.array([0, 0, 0.2, 0.2, 1, 1, 0.8, 0.8], np.float32)),
                         ("scales", np.array([1, 1, 0.5, 0.5], np.float32))],
                        mode="cubic", coordinate_transformation_mode="tf_crop_and_resize")


def plan_refusal_roi_align_mode():
    x, rois, batch = randn(1, 1, 4, 4), np.zeros((1, 4), np.float32), np.zeros(1, np.int64)
    node = helper.make_node("RoiAlign", ["x", "rois", "batch"], ["y"], name="refused", mode="min")
    return model([node], {"x": x, "rois": rois, "batch": batch}, {"y": randn(1, 1, 1, 1)}, opset=16)[0], \
        "mode 'min' (avg and max are supported)"


def plan_refusal_conv_transpose_4d():
    x = randn(1, 1, 2, 2, 2, 2)
    return plan_refusal("ConvTranspose", {"x": x}, {"y": randn(1, 1, 2, 2, 2, 2)},
                        "4-D transposed convolution (1-D to 3-D are supported)",
                        [("w", randn(1, 1, 1, 1, 1, 1))])


PLAN_REFUSALS = {name[13:]: fn for name, fn in sorted(globals().items()) if name.startswith("plan_refusal_")}


CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith("case_")}


def quantize(v, scale, zp):
    return np.clip(np.rint(v / scale) + zp, 0, 255).astype(np.uint8)


def check_qdq_through_identity(kiln, workdir):
    """Two QDQ convolutions whose bias is one shared DequantizeLinear reached
    through an Identity each (as PyTorch's exporter shares an initializer):
    both must fold to int8, the second requantizing the bias to its own
    scale, and the output stay within 1 LSB of the QDQ float semantics."""
    xs, s1, s2, w1s, w2s = np.float32(0.05), np.float32(0.1), np.float32(0.2), np.float32(0.02), np.float32(0.03)
    x = randn(1, 2, 5, 5)
    w1 = RNG.integers(-127, 128, (2, 2, 3, 3)).astype(np.int8)
    w2 = RNG.integers(-127, 128, (2, 2, 3, 3)).astype(np.int8)
    bq = RNG.integers(-200, 200, (2,)).astype(np.int32)
    bs = np.float32(xs * w1s)
    inits = [("xs", np.array(xs)), ("zp", np.array(128, np.uint8)), ("s1", np.array(s1)), ("s2", np.array(s2)),
             ("w1", w1), ("w1s", np.array(w1s)), ("w2", w2), ("w2s", np.array(w2s)), ("bq", bq),
             ("bs", np.array(bs))]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "zp"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "zp"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w1", "w1s"], ["w1d"]),
             helper.make_node("DequantizeLinear", ["w2", "w2s"], ["w2d"]),
             helper.make_node("DequantizeLinear", ["bq", "bs"], ["bd"]),
             helper.make_node("Identity", ["bd"], ["b1"]), helper.make_node("Identity", ["bd"], ["b2"]),
             helper.make_node("Conv", ["xd", "w1d", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["c1", "s1", "zp"], ["c1q"]),
             helper.make_node("DequantizeLinear", ["c1q", "s1", "zp"], ["c1d"]),
             helper.make_node("Conv", ["c1d", "w2d", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["c2", "s2", "zp"], ["c2q"]),
             helper.make_node("DequantizeLinear", ["c2q", "s2", "zp"], ["y"])]

    def conv(v, w, b):
        return F.conv2d(torch.from_numpy(v).double(), torch.from_numpy(w).double(), torch.from_numpy(b).double(),
                        padding=1).numpy()
    xd = (quantize(x, xs, 128).astype(np.float64) - 128) * xs
    b = bq.astype(np.float64) * bs
    c1 = (quantize(conv(xd, w1 * np.float64(w1s), b), s1, 128).astype(np.float64) - 128) * s1
    want = (quantize(conv(c1, w2 * np.float64(w2s), b), s2, 128).astype(np.float32) - 128) * s2
    m, _ = model(nodes, {"x": x}, {"y": want}, inits)
    run = plan_and_run("qdq_through_identity", m, [x], kiln, workdir)
    got = np.load(os.path.join(workdir, "qdq_through_identity_out", "output_0.npy"))
    lsb = float(np.max(np.abs(got - want))) / float(s2)
    expect(f"qdq_through_identity: within 1 LSB of the QDQ float semantics ({lsb:.2f} LSB)",
           run.returncode == 0 and lsb <= 1.0001, run.stderr)
    plan = subprocess.run([kiln, "plan", os.path.join(workdir, "qdq_through_identity.onnx"), "-o",
                           os.path.join(workdir, "qdq_through_identity.kiln")], capture_output=True, text=True)
    line = next((l.strip() for l in plan.stdout.splitlines() if "int8:" in l), "")
    expect(f"qdq_through_identity: both convolutions fold to int8 ({line})", "2 of 2 linear ops" in line)


def main():
    args = test_args(with_only=True)
    if not args.only or args.only == "qdq_through_identity":
        check_qdq_through_identity(args.kiln, args.workdir)
    run_each(CASES, args.only, lambda name: check_case(name, CASES[name](), args.kiln, args.workdir, TOLERANCE))
    # The ConvLanes cases ran the kernel they are about.
    for name in ("conv_lanes_groups", "conv_lanes_small_groups", "conv_lanes_pointwise", "conv_lanes_strided"):
        if args.only and args.only != name:
            continue
        r = subprocess.run([args.kiln, "inspect", os.path.join(args.workdir, name + ".kiln"), "--json"],
                           capture_output=True, text=True)
        ops = [i["op"] for i in json.loads(r.stdout)["methods"][0]["instructions"]] if r.returncode == 0 else []
        expect(f"{name}: planned as ConvLanes ({', '.join(ops)})", "ConvLanes" in ops, r.stderr)
    for name in REFUSALS:
        if args.only and name != args.only:
            continue
        (m, _), inputs, kernel = REFUSALS[name]()
        run = plan_and_run(name, m, inputs, args.kiln, args.workdir)
        expect(f"{name} refused at run time", run.returncode != 0 and kernel in run.stderr and
               "out of range" in run.stderr, f"status {run.returncode}, stderr: {run.stderr.strip()}")
    for name in PLAN_REFUSALS:
        if args.only and name != args.only:
            continue
        m, text = PLAN_REFUSALS[name]()
        status, message = plan_only(args.kiln, m, os.path.join(args.workdir, name + ".onnx"))
        lines = message.splitlines()
        expect(f"{name} refused when planning", status != 0 and len(lines) == 1 and
               "node 'refused'" in lines[0] and text in lines[0], f"status {status}, stderr: {message}")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
