"""Small ONNX models for the Python package's tests, built with onnx.helper
(fast: no PyTorch), and where the package comes from.

The tests import the package staged in the build tree
(PYTHONPATH=<build>/python, set by ctest), or an installed one."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

OPSET = [helper.make_opsetid("", 17)]


def make_model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "test", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=OPSET)
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def mlp_weights():
    rng = np.random.default_rng(7)
    w1 = rng.standard_normal((8, 16)).astype(np.float32)
    b1 = rng.standard_normal(16).astype(np.float32)
    w2 = rng.standard_normal((16, 3)).astype(np.float32)
    return w1, b1, w2


def mlp_reference(x, scale=1.0):
    w1, b1, w2 = mlp_weights()
    return (np.maximum(x @ w1 + b1, 0) @ w2 * np.float32(scale)).astype(np.float32)


@pytest.fixture(scope="session")
def mlp_model():
    """y = relu(x @ w1 + b1) @ w2 and z = y * s, for x of shape [batch, 8],
    batch symbolic; two inputs (x, s), two outputs (y, z)."""
    w1, b1, w2 = mlp_weights()
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"]),
        helper.make_node("Add", ["h0", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["h"]),
        helper.make_node("MatMul", ["h", "w2"], ["y"]),
        helper.make_node("Mul", ["y", "s"], ["z"]),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8]),
              helper.make_tensor_value_info("s", TensorProto.FLOAT, [1])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3]),
               helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", 3])]
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"), numpy_helper.from_array(w2, "w2")]
    return make_model(nodes, inputs, outputs, inits)


@pytest.fixture(scope="session")
def mlp_path(tmp_path_factory, mlp_model):
    path = tmp_path_factory.mktemp("models") / "mlp.onnx"
    onnx.save(mlp_model, str(path))
    return path


@pytest.fixture(scope="session")
def qdq_model():
    """x (float) -> Q -> DQ -> MatMul(DQ(w int8)) -> Q -> DQ -> y: one
    quantized linear layer, uint8 on both sides."""
    w = ((np.arange(16 * 6).reshape(16, 6) * 37 + 11) % 256 - 128).astype(np.int8)
    scalar = lambda name, value, dtype: numpy_helper.from_array(np.array(value, dtype=dtype), name)  # noqa: E731
    inits = [numpy_helper.from_array(w, "w"), scalar("sx", 0.03, np.float32), scalar("zx", 128, np.uint8),
             scalar("sw", 0.004, np.float32), scalar("zw", 0, np.int8), scalar("sy", 0.01, np.float32),
             scalar("zy", 120, np.uint8)]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
        helper.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wd"]),
        helper.make_node("MatMul", ["xd", "wd"], ["v"]),
        helper.make_node("QuantizeLinear", ["v", "sy", "zy"], ["yq"]),
        helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"]),
    ]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6])], inits)
