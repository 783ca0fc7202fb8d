"""kiln.quantize(): the same quantizer as `kiln quantize`, from arrays,
named arrays or a folder, with its options and errors the CLI's."""
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln
from conftest import make_model


@pytest.fixture(scope="module")
def classifier():
    """A 2-layer classifier whose classes are set by the sign pattern of its
    input, so quantization that breaks it shows as disagreement."""
    rng = np.random.default_rng(3)
    w1 = rng.standard_normal((16, 32)).astype(np.float32)
    b1 = (0.1 * rng.standard_normal(32)).astype(np.float32)
    w2 = rng.standard_normal((32, 4)).astype(np.float32)
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h0"], name="fc1"),
        helper.make_node("Relu", ["h0"], ["h"], name="relu1"),
        helper.make_node("MatMul", ["h", "w2"], ["logits"], name="fc2"),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 4])]
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"), numpy_helper.from_array(w2, "w2")]
    return make_model(nodes, inputs, outputs, inits)


def samples(n=32, seed=5):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((1, 16)).astype(np.float32) for _ in range(n)]


def test_quantize_from_arrays_runs_close_to_the_float_model(classifier):
    q = kiln.quantize(classifier, samples())
    assert isinstance(q, kiln.QuantizedModel)
    assert q.samples == 32
    assert set(q.quantized_nodes) >= {"fc1", "fc2"}
    ops = [n.op_type for n in q.model.graph.node]
    assert ops.count("QuantizeLinear") >= 2 and ops.count("DequantizeLinear") >= 4
    assert {layer["tensor"] for layer in q.layers} >= {"x", "h"}
    (acc,) = q.accuracy
    assert acc["output"] == "logits" and acc["sqnr_db"] > 25
    # The quantized model plans to int8 kernels and runs within the float
    # model's reach on data it was not calibrated on.
    float_program, int8_program = kiln.plan(classifier), q.plan()
    worst = 0.0
    for x in samples(16, seed=11):
        (f,) = float_program(x)
        (i,) = int8_program(x)
        worst = max(worst, float(np.abs(f - i).max() / (np.abs(f).max() + 1e-6)))
    assert worst < 0.1


def test_items_by_name_or_by_position_and_samples_stacked_give_one_model(classifier):
    xs = samples(8)
    by_position = kiln.quantize(classifier, [(x,) for x in xs], evaluate=False)
    by_name = kiln.quantize(classifier, [{"x": x} for x in xs], evaluate=False)
    stacked = kiln.quantize(classifier, [np.concatenate(xs)], evaluate=False)
    assert by_position.model_bytes == by_name.model_bytes == stacked.model_bytes
    assert by_position.accuracy == []


def test_the_same_bytes_as_kiln_quantize_from_a_folder(classifier, tmp_path):
    folder = tmp_path / "cal"
    folder.mkdir()
    for k, x in enumerate(samples(8)):
        np.save(folder / f"{k:03d}.npy", x)
    model = tmp_path / "float.onnx"
    onnx.save(classifier, str(model))
    ours = kiln.quantize(model, folder, method="entropy", activations="int8", exclude=["fc2"],
                         output=tmp_path / "py.onnx")
    kiln_cli = os.environ["KILN_CLI"]  # set by ctest
    subprocess.run([kiln_cli, "quantize", str(model), "--calibration", str(folder), "-o", str(tmp_path / "cli.onnx"),
                        "--method", "entropy", "--activations", "int8", "--exclude", "fc2"], check=True,
                   stdout=subprocess.DEVNULL)
    assert (tmp_path / "cli.onnx").read_bytes() == ours.model_bytes
    assert (tmp_path / "py.onnx").read_bytes() == ours.model_bytes
    assert "fc2" in ours.float_nodes
    assert all(-128 <= layer["zero_point"] <= 127 for layer in ours.layers)


def test_options_and_errors_are_the_clis(classifier):
    assert {"method", "percentile", "activations", "symmetric", "per_tensor", "exclude", "evaluate"} <= set(
        kiln.quantize_options())
    with pytest.raises(kiln.OptionError, match="method"):
        kiln.quantize(classifier, samples(2), method="median")
    with pytest.raises(kiln.OptionError, match="no option 'bins'"):
        kiln.quantize(classifier, samples(2), bins=10)
    with pytest.raises(kiln.PlanError, match="calibration item 1"):
        kiln.quantize(classifier, [samples(1)[0], np.zeros((1, 3), np.float32)])
    with pytest.raises(kiln.PlanError, match="no array for input 'x'"):
        kiln.quantize(classifier, [{"y": samples(1)[0]}])
