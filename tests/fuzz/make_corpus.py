#!/usr/bin/env python3
"""Regenerates the fuzz corpus: small real programs planned by kiln.

usage: make_corpus.py PATH/TO/kiln OUT_DIR
Each program is planned from a tiny ONNX model built here; together they
cover every instruction and storage kind and most kernels.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(5)


def init(name, *shape, dtype=np.float32):
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.5).astype(dtype), name)


def ints(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def info(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


MODELS = {
    "relu": (model([helper.make_node("Relu", ["x"], ["y"])], [info("x", [2, 3])], [info("y", [2, 3])]), []),
    "cnn": (model([
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "fc", "fb"], ["g"], transB=1),
        helper.make_node("Softmax", ["g"], ["y"], axis=1),
    ], [info("x", [1, 3, 6, 6])], [info("y", [1, 5])],
        [init("w", 4, 3, 3, 3), init("b", 4), init("fc", 5, 36), init("fb", 5)]), []),
    "elementwise": (model([
        helper.make_node("Add", ["x", "c"], ["a"]),
        helper.make_node("Mul", ["a", "x"], ["m"]),
        helper.make_node("Sigmoid", ["m"], ["s"]),
        helper.make_node("Sub", ["s", "c"], ["d"]),
        helper.make_node("Div", ["d", "c"], ["q"]),
        helper.make_node("Tanh", ["q"], ["t"]),
        helper.make_node("Clip", ["t", "lo", "hi"], ["y"]),
    ], [info("x", [3, 4])], [info("y", [3, 4])],
        [init("c", 4), numpy_helper.from_array(np.array(-0.5, np.float32), "lo"),
         numpy_helper.from_array(np.array(0.5, np.float32), "hi")]), []),
    "shapes": (model([
        helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2]),
        helper.make_node("Concat", ["t", "t"], ["c"], axis=2),
        helper.make_node("Gather", ["c", "i"], ["g"], axis=1),
        helper.make_node("Reshape", ["g", "shape"], ["y"]),
    ], [info("x", [2, 3, 4]), info("i", [2], TensorProto.INT64)], [info("y", [3, 2, 8])], [ints("shape", [3, 2, 8])]),
        []),
    "pooling": (model([
        helper.make_node("Pad", ["x", "pads"], ["p"]),
        helper.make_node("AveragePool", ["p"], ["a"], kernel_shape=[3, 3], strides=[2, 2], count_include_pad=1),
        helper.make_node("BatchNormalization", ["a", "s", "b", "mean", "var"], ["n"]),
        helper.make_node("GlobalAveragePool", ["n"], ["g"]),
        helper.make_node("Reshape", ["g", "shape"], ["g2"]),
        helper.make_node("MatMul", ["g2", "w"], ["y"]),
    ], [info("x", [1, 2, 7, 7])], [info("y", [1, 3])],
        [ints("pads", [0, 0, 1, 1, 0, 0, 1, 1]), init("s", 2), init("b", 2), init("mean", 2),
         numpy_helper.from_array(np.ones(2, np.float32), "var"), init("w", 2, 3), ints("shape", [1, 2])]), []),
    "integers": (model([
        helper.make_node("Cast", ["x"], ["i"], to=TensorProto.INT64),
        helper.make_node("Mul", ["i", "k"], ["m"]),
        helper.make_node("Add", ["m", "k"], ["a"]),
        helper.make_node("Cast", ["a"], ["y"], to=TensorProto.FLOAT),
    ], [info("x", [5])], [info("y", [5])], [ints("k", [3])]), []),
    # Concat in place: inputs written into their blocks (aliases at a byte
    # offset) and the first Concat a view of the second.
    "concat": (model([
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Sigmoid", ["x"], ["b"]),
        helper.make_node("Concat", ["a", "b"], ["c1"], axis=1),
        helper.make_node("Tanh", ["c1"], ["d"]),
        helper.make_node("Concat", ["a", "b", "d"], ["c2"], axis=1),
        helper.make_node("Neg", ["c2"], ["y"]),
    ], [info("x", [1, 2, 3, 3])], [info("y", [1, 8, 3, 3])]), []),
    "cnn_plan_io": (None, ["--plan-io"]),
    "cnn_no_inplace": (None, ["--no-inplace"]),
}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    kiln, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, (m, flags) in MODELS.items():
            base = name.split("_")[0] if m is None else name
            path = os.path.join(tmp, base + ".onnx")
            if m is not None:
                onnx.save(m, path)
            subprocess.run([kiln, "plan", path, "-o", os.path.join(out, name + ".kiln"), *flags],
                           check=True, stdout=subprocess.DEVNULL)
    print(f"{len(MODELS)} programs in {out}")


if __name__ == "__main__":
    main()
