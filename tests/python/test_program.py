"""kiln's Python package: plan, run, inspect, save and load, errors.

Each test asserts what a user would see: outputs against NumPy's, the
shapes and sizes the program declares, the exceptions and their messages."""
import os

import numpy as np
import onnx
import pytest

import kiln
from conftest import mlp_reference

X = np.random.default_rng(3).standard_normal((4, 8)).astype(np.float32)
S = np.array([0.5], dtype=np.float32)


@pytest.fixture(scope="module")
def program(mlp_path):
    return kiln.plan(mlp_path, input_shape={"x": (4, 8)})


def test_plan_from_a_path_runs_as_numpy_does(program):
    y, z = program(X, S)
    np.testing.assert_allclose(y, mlp_reference(X), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(z, mlp_reference(X, 0.5), rtol=1e-5, atol=1e-5)
    assert y.dtype == np.float32 and y.shape == (4, 3) and y.flags.owndata and y.flags.writeable


def test_plan_from_a_model_proto_and_its_bytes(mlp_model):
    for model in (mlp_model, mlp_model.SerializeToString()):
        p = kiln.plan(model, input_shape={"x": (2, 8)})
        (y, _) = p(X[:2], S)
        np.testing.assert_allclose(y, mlp_reference(X[:2]), rtol=1e-5, atol=1e-5)


def test_inputs_by_name_and_the_same_outputs_on_every_call(program):
    first = program.methods["forward"](x=X, s=S)
    again = program.methods["forward"](s=S, x=X)
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    assert first[0] is not again[0]  # every call returns new arrays


def test_a_non_contiguous_input_is_read_correctly(program):
    wide = np.zeros((4, 16), dtype=np.float32)
    wide[:, ::2] = X
    (y, _) = program(wide[:, ::2], S)
    np.testing.assert_allclose(y, mlp_reference(X), rtol=1e-5, atol=1e-5)


def test_methods_describe_inputs_outputs_arenas_and_bookkeeping(program):
    assert list(program.methods) == ["forward"]
    m = program.methods["forward"]
    assert [(t.name, t.dtype, t.shape, t.nbytes, t.device) for t in m.inputs] == [
        ("x", "float32", (4, 8), 128, "cpu:0"), ("s", "float32", (1,), 4, "cpu:0")]
    assert [(t.name, t.dtype, t.shape) for t in m.outputs] == [("y", "float32", (4, 3)), ("z", "float32", (4, 3))]
    assert all(t.quantization is None for t in m.inputs + m.outputs)
    assert m.arenas and all(a.device == "cpu:0" and a.size > 0 and a.alignment >= 16 for a in m.arenas)
    assert m.arena_bytes == sum(a.size for a in m.arenas)
    assert m.bookkeeping_bytes > 0
    # The figures are the plan report's.
    report = program.report()
    assert [a["size"] for a in report["arenas"]] == [a.size for a in m.arenas]


def test_report_and_memory_picture(program):
    report = program.report()
    assert {"arenas", "tensors"} <= set(report)
    assert any(t["name"] == "h" for t in report["tensors"])
    svg = program.memory_svg()
    assert svg.lstrip().startswith("<svg") or "<svg" in svg[:200]
    assert svg.rstrip().endswith("</svg>")


def test_save_and_load_give_the_same_program(program, tmp_path):
    path = tmp_path / "mlp.kiln"
    program.save(path)
    assert path.read_bytes() == program.to_bytes()
    loaded = kiln.load(path)
    assert all(np.array_equal(a, b) for a, b in zip(loaded(X, S), program(X, S)))
    with pytest.raises(kiln.KilnError, match="no plan report"):
        loaded.report()


def test_options_are_the_cli_options(mlp_path):
    assert {"input_shape", "target", "fold_budget", "tensor_parallel", "quantized_io", "bundle_test"} <= set(
        kiln.plan_options())
    naive = kiln.plan(mlp_path, input_shape={"x": (4, 8)}, algo="naive", no_inplace=True)
    planned = kiln.plan(mlp_path, input_shape={"x": (4, 8)}, algo="best-fit")
    assert naive.methods["forward"].arena_bytes > planned.methods["forward"].arena_bytes
    plan_io = kiln.plan(mlp_path, input_shape={"x": (4, 8)}, plan_io=True, target=["cpu"])
    assert plan_io.methods["forward"].arena_bytes > planned.methods["forward"].arena_bytes


def test_a_bad_option_is_refused_with_the_cli_message_in_python_names(mlp_path):
    with pytest.raises(kiln.OptionError, match="no option 'fold_budgets'"):
        kiln.plan(mlp_path, fold_budgets=3)
    with pytest.raises(kiln.OptionError, match="'fold_budget' must be from 1 to 65536"):
        kiln.plan(mlp_path, input_shape={"x": (4, 8)}, fold_budget=0)
    with pytest.raises(ValueError, match="'freeze' expects NAME=VALUE"):  # OptionError is a ValueError too
        kiln.plan(mlp_path, freeze=["w1"])
    with pytest.raises(kiln.PlanError, match="unknown target backend 'nope'"):
        kiln.plan(mlp_path, input_shape={"x": (4, 8)}, target="nope:0")


def test_planning_errors_carry_the_planners_message(mlp_model, tmp_path):
    with pytest.raises(kiln.PlanError, match="not an ONNX model"):
        kiln.plan(b"not a model")
    with pytest.raises(kiln.PlanError, match="missing.onnx"):
        kiln.plan(tmp_path / "missing.onnx")
    unique = onnx.helper.make_model(onnx.helper.make_graph(
        [onnx.helper.make_node("Unique", ["x"], ["y"])], "u",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["n"])]),
        opset_imports=[onnx.helper.make_opsetid("", 17)])
    with pytest.raises(kiln.UnsupportedError, match="Unique"):
        kiln.plan(unique)


def test_runtime_errors_carry_the_runtimes_log_line_and_status(program, capfd):
    with pytest.raises(kiln.RunError) as caught:
        kiln.Program(b"\0" * 256)
    assert caught.value.status in ("InvalidProgram", "VersionMismatch")
    assert "(" in str(caught.value)  # what the runtime logged, in the message
    assert "[kiln" not in capfd.readouterr().err  # and not on stderr
    m = program.methods["forward"]
    with pytest.raises(kiln.RunError, match="input 0 .'x'. is float64, the method expects float32") as caught:
        m(X.astype(np.float64), S)
    assert caught.value.status == "DTypeMismatch"
    with pytest.raises(kiln.RunError, match=r"has shape \[3, 8\], the method expects \[4, 8\]") as caught:
        m(X[:3], S)
    assert caught.value.status == "ShapeMismatch"
    with pytest.raises(TypeError, match="takes 2 inputs, 1 were given"):
        m(X)
    with pytest.raises(TypeError, match="no input 'q'"):
        m(x=X, q=S)


def test_threads_give_the_same_bits(program, mlp_path):
    one = program(X, S)
    threaded = kiln.plan(mlp_path, input_shape={"x": (4, 8)}, threads=3)
    assert threaded.methods["forward"].threads == 3
    assert all(np.array_equal(a, b) for a, b in zip(threaded(X, S), one))
    threaded.set_threads(1)
    assert all(np.array_equal(a, b) for a, b in zip(threaded(X, S), one))
    with pytest.raises(kiln.RunError, match="threads must be from 1"):
        threaded.methods["forward"].threads = 0


def test_isa_paths(program):
    paths = kiln.isa_paths()
    assert paths[0] == "scalar" and kiln.processor_isa() == paths[-1] and kiln.isa() in paths
    want = program(X, S)
    try:
        kiln.set_isa("scalar")
        assert kiln.isa() == "scalar"
        got = program(X, S)
    finally:
        kiln.set_isa(kiln.processor_isa())
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)
    with pytest.raises(kiln.OptionError, match="unknown ISA path 'mmx'"):
        kiln.set_isa("mmx")


def test_bundled_self_test(mlp_path, tmp_path):
    p = kiln.plan(mlp_path, input_shape={"x": (4, 8)}, bundle_test=[X, S])
    report = p.self_test()
    assert report and report.passed and report.num_outputs == 2 and report.max_error <= report.tolerance
    path = tmp_path / "m.kiln"
    p.save(path)
    assert os.path.getsize(str(path) + ".test") > X.nbytes
    loaded = kiln.load(path)
    assert loaded.self_test().passed
    assert loaded.self_test(str(path) + ".test").passed
    # A test made for another program is refused, not run.
    other = kiln.plan(mlp_path, input_shape={"x": (2, 8)})
    with pytest.raises(kiln.RunError, match="self-test"):
        other.self_test(str(path) + ".test")


def test_quantized_inputs_and_outputs(qdq_model):
    plain = kiln.plan(qdq_model)
    quantized = kiln.plan(qdq_model, quantized_io=True)
    m = quantized.methods["forward"]
    (x_spec,), (y_spec,) = m.inputs, m.outputs
    assert (x_spec.dtype, y_spec.dtype) == ("uint8", "uint8")
    assert x_spec.quantization == kiln.Quantization(np.float32(0.03), 128)
    assert y_spec.quantization.zero_point == 120
    x = np.linspace(-5, 5, 16, dtype=np.float32).reshape(1, 16)
    (want,) = plain(x)
    (got,) = m(x)  # float data, quantized at the boundary
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(y_spec.quantization.dequantize(got), want)
    (again,) = m(x_spec.quantization.quantize(x, np.uint8))
    np.testing.assert_array_equal(again, got)


def test_a_device_program_makes_its_backend(mlp_path):
    if "null" not in kiln.backends():
        pytest.skip("no null backend built in")
    p = kiln.plan(mlp_path, input_shape={"x": (4, 8)}, target="null:0,cpu")
    m = p.methods["forward"]
    assert any(a.device == "null:0" for a in m.arenas)
    y, z = p(X, S)
    np.testing.assert_allclose(y, mlp_reference(X), rtol=1e-5, atol=1e-5)


def test_inputs_bounded_above(tmp_path):
    # x: [n, 8] with n from 1 to 5, planned once; outputs follow n.
    from onnx import TensorProto, helper, numpy_helper
    w = np.linspace(-1, 1, 8 * 3, dtype=np.float32).reshape(8, 3)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])], "bounded",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])], [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    program = kiln.plan(model, input_shape={"x": ((1, 5), 8)})
    method = program.methods["forward"]
    assert method.bounds == [kiln.Bound("n", 0, 0, 1, 5)]
    assert method.outputs[0].shape == (5, 3)
    rng = np.random.default_rng(3)
    for n in (1, 4, 5, 2):
        x = rng.standard_normal((n, 8)).astype(np.float32)
        (y,) = program(x)
        assert y.shape == (n, 3)
        np.testing.assert_allclose(y, np.maximum(x @ w, 0), rtol=1e-5, atol=1e-6)
    with pytest.raises(kiln.RunError) as error:
        program(np.zeros((6, 8), np.float32))
    assert error.value.status == "ShapeMismatch"


def test_memory_regions_and_hot_constants(mlp_path):
    plain = kiln.plan(mlp_path, input_shape={"x": (4, 8)})
    program = kiln.plan(mlp_path, input_shape={"x": (4, 8)}, memory_region={"tcm": "1K:fast", "sram": "64K"},
                        hot_constants=True)
    arenas = program.methods["forward"].arenas
    assert [a.region for a in arenas[:2]] == ["tcm", "sram"]
    assert arenas[0].size <= 1024
    assert program.report()["regions"]["list"][0]["hot_constants"] > 0
    y, z = program(X, S)
    y0, z0 = plain(X, S)
    assert np.array_equal(y, y0) and np.array_equal(z, z0)
