#!/usr/bin/env python3
"""The kiln CLI: bad arguments, unreadable files and unsupported models give
one clear line and a non-zero exit, and a failed plan leaves no file behind.

usage: cli_test.py --kiln PATH/TO/kiln --workdir DIR
"""
import os
import re
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from kiln_checks import expect, finish, run, test_args  # noqa: E402


def model_with(nodes, inputs, outputs, initializers=(), opset=13):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def check_pack(k, w, model, garbage):
    """kiln pack: the C array holds the program byte for byte, the header's
    figures are the program's own (as `kiln inspect --json` reports them),
    and the source compiles as C11."""
    import json
    import re
    # --plan-io gives the method an arena (inputs and outputs planned in it).
    program = os.path.join(w, "relu_io.kiln")
    rc, out, err = run(k, "plan", model, "-o", program, "--plan-io")
    expect("plan --plan-io for pack", rc == 0, out + err)
    rc, out, err = run(k, "inspect", program, "--json")
    inspected = json.loads(out) if rc == 0 else None
    out_dir = os.path.join(w, "packed")
    rc, out, err = run(k, "pack", program, "--c-array", "relu_model", "-o", out_dir)
    pack_out = out
    expect("pack writes the source and the header", rc == 0 and "relu_model.c" in out, out + err)
    if rc != 0:
        return
    with open(os.path.join(out_dir, "relu_model.h")) as f:
        header = f.read()
    with open(os.path.join(out_dir, "relu_model.c")) as f:
        source = f.read()
    with open(program, "rb") as f:
        program_bytes = f.read()
    defines = {m.group(1): int(m.group(2)) for m in re.finditer(r"#define (\w+) (\d+)u", header)}
    array = bytes(int(h, 16) for h in re.findall(r"0x([0-9a-f]{2})", source))
    expect("pack: the array is the program, byte for byte", array == program_bytes,
           f"{len(array)} bytes vs {len(program_bytes)}")
    expect("pack: the array is const and 64-byte aligned",
           "_Alignas(64) const uint8_t relu_model[RELU_MODEL_SIZE]" in source, source[:300])
    method = inspected["methods"][0] if inspected else {"bookkeeping_bytes": -1, "arenas": []}
    expect("pack: the --plan-io program has an arena", len(method["arenas"]) == 1, str(method["arenas"]))
    want = {"RELU_MODEL_SIZE": len(program_bytes), "RELU_MODEL_FORWARD_BOOKKEEPING_BYTES": method["bookkeeping_bytes"],
            "RELU_MODEL_FORWARD_NUM_ARENAS": len(method["arenas"]), "RELU_MODEL_FORWARD_INPUT_0_BYTES": 24,
            "RELU_MODEL_FORWARD_OUTPUT_0_BYTES": 24}
    for a in method["arenas"]:
        want[f"RELU_MODEL_FORWARD_ARENA_{a['id']}_SIZE"] = a["size"]
        want[f"RELU_MODEL_FORWARD_ARENA_{a['id']}_ALIGNMENT"] = a["alignment"]
    wrong = {name: (defines.get(name), value) for name, value in want.items() if defines.get(name) != value}
    expect("pack: the header's sizes are the program's", not wrong, str(wrong))
    cc = subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-c", "relu_model.c", "-o", "relu_model.o"],
                        cwd=out_dir, capture_output=True, text=True)
    expect("pack: the source compiles as C11", cc.returncode == 0, cc.stderr)
    try:
        with open(os.path.join(out_dir, "relu_model_kernels.cc")) as f:
            registration = f.read()
    except OSError as e:
        registration = str(e)
    entries = re.findall(r"&kiln::kernels::kernel_(\w+),", registration)
    expect("pack: relu_model_kernels.cc registers the program's one kernel and no other",
           entries == ["Relu"] and "kiln::Error relu_model_register_kernels(" in registration
           and "kernels: 1 (Relu)" in pack_out, registration[:600] + pack_out)
    # The registration against the runtime's headers (the schema header is
    # generated into the build tree that holds this kiln).
    build = os.path.dirname(os.path.dirname(os.path.abspath(k)))
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    cxx = subprocess.run(["c++", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                          "-I", os.path.join(root, "runtime", "include"), "-I", os.path.join(root, "platform", "include"),
                          "-I", os.path.join(build, "schema", "include"),
                          "-I", os.path.join(root, "schema", "include"), "relu_model_kernels.cc"],
                         cwd=out_dir, capture_output=True, text=True)
    expect("pack: the registration compiles as C++17", cxx.returncode == 0, cxx.stderr)

    rc, out, err = run(k, "pack", program, "--c-array", "9lives", "-o", out_dir)
    expect("pack: a name that is not a C identifier: exit 2 naming it", rc == 2 and "9lives" in err, err)
    rc, out, err = run(k, "pack", program, "--c-array", "m")
    expect("pack without -o: exit 2", rc == 2 and "-o" in err, err)
    rc, out, err = run(k, "pack", garbage, "--c-array", "m", "-o", out_dir)
    expect("pack of a non-program: one clear error", rc == 1 and "not a kiln program" in err, err)


def check_strip_names(k, w):
    """plan --strip-names: the program holds no tensor or instruction name
    but the method's input's and output's, is smaller, verifies, and
    computes what the named program computes."""
    x = helper.make_tensor_value_info("features", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("scores", TensorProto.FLOAT, [2, 3])
    # The Identity leaves a view that only renames the Relu's output: the
    # stripped program reads the Relu's output in its place.
    nodes = [helper.make_node("Relu", ["features"], ["hidden_activation"], name="first_relu"),
             helper.make_node("Identity", ["hidden_activation"], ["renamed"], name="rename_node"),
             helper.make_node("Sigmoid", ["renamed"], ["scores"], name="squash_node")]
    model = os.path.join(w, "two_nodes.onnx")
    onnx.save(model_with(nodes, [x], [y]), model)
    programs = {}
    for flag in ("named", "stripped"):
        path = os.path.join(w, f"two_nodes_{flag}.kiln")
        extra = ["--strip-names"] if flag == "stripped" else []
        rc, out, err = run(k, "plan", model, "-o", path, *extra)
        expect(f"plan {' '.join(extra) or '(names kept)'}", rc == 0, out + err)
        with open(path, "rb") as f:
            programs[flag] = (path, f.read() if rc == 0 else b"")
    named, stripped = programs["named"][1], programs["stripped"][1]
    inner = [b"hidden_activation", b"renamed", b"first_relu", b"squash_node"]
    expect("--strip-names: the named program holds the inner names", all(n in named for n in inner))
    expect("--strip-names: no inner tensor or instruction name is left",
           not any(n in stripped for n in inner), str([n for n in inner if n in stripped]))
    expect("--strip-names: the input's and output's names stay",
           b"features" in stripped and b"scores" in stripped)
    expect("--strip-names: the program is smaller", 0 < len(stripped) < len(named), f"{len(stripped)} vs {len(named)}")
    rc, out, err = run(k, "verify", programs["stripped"][0])
    expect("--strip-names: verify accepts the program", rc == 0 and "ok" in out, out + err)
    rc, out, err = run(k, "inspect", programs["stripped"][0])
    expect("--strip-names: inspect names the input and output",
           rc == 0 and "'features'" in out and "'scores'" in out and "hidden_activation" not in out, out + err)
    import json
    counts = {}
    for flag, (path, _) in programs.items():
        rc, out, err = run(k, "inspect", path, "--json")
        counts[flag] = [t["storage"] for t in json.loads(out)["methods"][0]["tensors"]] if rc == 0 else []
    expect("--strip-names: the renaming view is left out (one alias fewer)",
           len(counts["named"]) == len(counts["stripped"]) + 1 and "alias" in str(counts["named"])
           and "alias" not in str(counts["stripped"]), str(counts))
    data = np.array([[-1, 2, -3], [4, -5, 6]], dtype=np.float32)
    np.save(os.path.join(w, "features.npy"), data)
    results = {}
    for flag, (path, _) in programs.items():
        out_dir = os.path.join(w, f"two_nodes_out_{flag}")
        rc, out, err = run(k, "run", path, "--input", os.path.join(w, "features.npy"), "--output-dir", out_dir)
        results[flag] = np.load(os.path.join(out_dir, "output_0.npy")) if rc == 0 else None
        expect(f"run of the {flag} program", rc == 0, out + err)
    expect("--strip-names: the same outputs as the named program",
           results["named"] is not None and results["stripped"] is not None
           and np.array_equal(results["named"], results["stripped"]))


def check_quantized_io(k, w):
    """plan --quantized-io: x -> Q -> DQ -> Relu -> Q -> DQ -> y takes and
    gives uint8 data; inspect, pack's header and run show the scale and
    zero point, and run quantizes a float input as the Q would (the int8
    output then is the float program's, quantized)."""
    import json
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6])
    consts = [helper.make_tensor("s", TensorProto.FLOAT, [], [0.5]), helper.make_tensor("z", TensorProto.UINT8, [], [10])]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
             helper.make_node("Relu", ["xd"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "s", "z"], ["rq"]),
             helper.make_node("DequantizeLinear", ["rq", "s", "z"], ["y"])]
    model = os.path.join(w, "qio.onnx")
    onnx.save(model_with(nodes, [x], [y], consts), model)
    programs = {}
    for flag in ("float", "quantized"):
        path = os.path.join(w, f"qio_{flag}.kiln")
        extra = ["--quantized-io"] if flag == "quantized" else []
        rc, out, err = run(k, "plan", model, "-o", path, *extra)
        expect(f"plan qio.onnx {' '.join(extra)}", rc == 0, out + err)
        programs[flag] = path
        if flag == "quantized":
            expect("--quantized-io: the summary gives the input's and output's quantization",
                   "'x' uint8 [1, 6], scale 0.5, zero point 10" in out and "1 of 1 inputs, 1 of 1 outputs" in out, out)
    rc, out, err = run(k, "inspect", programs["quantized"], "--json")
    method = json.loads(out)["methods"][0] if rc == 0 else {"tensors": [], "inputs": [0], "outputs": [0]}
    io = [t for t in method["tensors"] if t["id"] in method["inputs"] + method["outputs"]]
    expect("--quantized-io: inspect --json gives uint8 input and output with scale and zero point",
           len(io) == 2 and all(t["dtype"] == "uint8" and t.get("quantization") == {"scale": 0.5, "zero_point": 10}
                                for t in io), str(io))
    pack_dir = os.path.join(w, "qio_pack")
    rc, out, err = run(k, "pack", programs["quantized"], "--c-array", "qio", "-o", pack_dir)
    header = open(os.path.join(pack_dir, "qio.h")).read() if rc == 0 else ""
    expect("--quantized-io: pack's header gives the scale and zero point",
           "#define QIO_FORWARD_INPUT_0_SCALE 5.000000000e-01f" in header
           and "#define QIO_FORWARD_OUTPUT_0_ZERO_POINT 10" in header, out + err + header)
    data = np.array([[-7.25, -1.0, 0.25, 0.75, 3.0, 200.0]], dtype=np.float32)
    np.save(os.path.join(w, "qio_x.npy"), data)
    outs = {}
    for flag, path in programs.items():
        out_dir = os.path.join(w, f"qio_out_{flag}")
        rc, out, err = run(k, "run", path, "--input", os.path.join(w, "qio_x.npy"), "--output-dir", out_dir)
        expect(f"run the {flag} qio program on float data", rc == 0, out + err)
        outs[flag] = np.load(os.path.join(out_dir, "output_0.npy")) if rc == 0 else None
        if flag == "quantized":
            expect("run prints the quantized output's float values", "quantized: scale 0.5, zero point 10" in out, out)
    # Q(x) = clamp(round_half_even(x / 0.5) + 10, 0, 255); Relu clamps at
    # the zero point.
    want = np.array([[10, 10, 10, 12, 16, 255]], dtype=np.uint8)
    got = outs["quantized"]
    expect("--quantized-io: uint8 output, the float program's values quantized",
           got is not None and got.dtype == np.uint8 and np.array_equal(got, want)
           and outs["float"] is not None and np.array_equal((got.astype(np.float32) - 10) * 0.5, outs["float"]),
           f"{got} {outs['float']}")


def main():
    args = test_args()
    k, w = args.kiln, args.workdir

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    good = os.path.join(w, "relu.onnx")
    onnx.save(model_with([helper.make_node("Relu", ["x"], ["y"], name="act")], [x], [y]), good)

    rc, out, err = run(k)
    expect("no command: usage, exit 2", rc == 2 and "usage" in err, err)
    rc, out, err = run(k, "frobnicate")
    expect("unknown command: exit 2 naming it", rc == 2 and "frobnicate" in err, err)
    rc, out, err = run(k, "plan", good)
    expect("plan without -o: exit 2", rc == 2 and "-o" in err, err)
    rc, out, err = run(k, "plan", good, "-o", os.path.join(w, "x.kiln"), "--bogus")
    expect("unknown option: exit 2 naming it", rc == 2 and "--bogus" in err, err)
    rc, out, err = run(k, "plan", good, "-o", os.path.join(w, "x.kiln"), "--algo", "magic")
    expect("unknown algorithm: exit 1 naming it", rc == 1 and "magic" in err, err)
    for option, value in [("--ranks", "0"), ("--tensor-parallel", "0"), ("--tensor-parallel", "1"), ("--threads", "0"),
                          ("--threads", "65")]:
        rc, out, err = run(k, "plan", good, "-o", os.path.join(w, "x.kiln"), option, value)
        expect(f"{option} {value}: exit 2 naming the option", rc == 2 and option in err, err)

    missing = os.path.join(w, "missing.onnx")
    rc, out, err = run(k, "plan", missing, "-o", os.path.join(w, "m.kiln"))
    expect("unreadable model: one line naming the file", rc == 1 and missing in err and err.count("\n") == 1, err)

    garbage = os.path.join(w, "garbage.onnx")
    with open(garbage, "wb") as f:
        f.write(b"\x08\x07this is not a model\xff\xff")
    target = os.path.join(w, "garbage.kiln")
    rc, out, err = run(k, "plan", garbage, "-o", target)
    expect("corrupt model: error, no output file", rc == 1 and not os.path.exists(target), err)

    unsupported = os.path.join(w, "unsupported.onnx")
    onnx.save(model_with([helper.make_node("Det", ["x"], ["y"], name="determinant")], [x], [y]), unsupported)
    target = os.path.join(w, "unsupported.kiln")
    with open(target, "wb") as f:
        f.write(b"previous")
    rc, out, err = run(k, "plan", unsupported, "-o", target)
    expect("unsupported op: names node and op", rc == 1 and "determinant" in err and "Det" in err, err)
    with open(target, "rb") as f:
        expect("failed plan leaves the old file untouched", f.read() == b"previous")
    expect("failed plan leaves no temporary file",
           not [n for n in os.listdir(w) if n.startswith("unsupported.kiln.tmp")])

    bad_shape = os.path.join(w, "bad_shape.onnx")
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [4, 5])
    out_info = helper.make_tensor_value_info("c", TensorProto.FLOAT, [2, 5])
    onnx.save(model_with([helper.make_node("MatMul", ["a", "b"], ["c"], name="mm")], [a, b], [out_info]), bad_shape)
    rc, out, err = run(k, "plan", bad_shape, "-o", os.path.join(w, "bad_shape.kiln"))
    expect("shape mismatch: names the node", rc == 1 and "mm" in err, err)

    dyn = os.path.join(w, "dynamic.onnx")
    xd = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
    yd = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])
    onnx.save(model_with([helper.make_node("Relu", ["x"], ["y"])], [xd], [yd]), dyn)
    rc, out, err = run(k, "plan", dyn, "-o", os.path.join(w, "dyn.kiln"))
    expect("symbolic input dims: asks for --input-shape", rc == 1 and "--input-shape" in err, err)
    rc, out, err = run(k, "plan", dyn, "-o", os.path.join(w, "dyn.kiln"), "--input-shape", "x=4x3")
    expect("--input-shape fixes it", rc == 0, err)

    program = os.path.join(w, "relu.kiln")
    rc, out, err = run(k, "plan", good, "-o", program)
    expect("plan prints the memory summary", rc == 0 and "lower bound" in out and "arena" in out, out + err)
    data = np.array([[-1, 2, -3], [4, -5, 6]], dtype=np.float32)
    np.save(os.path.join(w, "in.npy"), data)
    rc, out, err = run(k, "run", program, "--input", os.path.join(w, "in.npy"), "--output-dir",
                       os.path.join(w, "out"), "--runs", "3")
    got = np.load(os.path.join(w, "out", "output_0.npy")) if rc == 0 else None
    expect("run writes outputs", rc == 0 and got is not None and np.array_equal(got, np.maximum(data, 0)), out + err)
    expect("run prints shapes and latency", "[2, 3]" in out and "median" in out, out)
    rc, out, err = run(k, "run", program, "--input", os.path.join(w, "in.npy"), "--runs", "2", "--profile")
    expect("run --profile prints the time per operator and per instruction",
           rc == 0 and "profile: 1 instructions" in out and re.search(r"\n  Relu +1 ", out) is not None
           and "slowest instructions" in out, out + err)

    np.save(os.path.join(w, "wrong.npy"), np.zeros((3, 2), dtype=np.float32))
    rc, out, err = run(k, "run", program, "--input", os.path.join(w, "wrong.npy"))
    expect("wrong input shape: names the input", rc == 1 and "'x'" in err and "shape" in err, err)
    np.save(os.path.join(w, "wrong_type.npy"), np.zeros((2, 3), dtype=np.int64))
    rc, out, err = run(k, "run", program, "--input", os.path.join(w, "wrong_type.npy"))
    expect("wrong input dtype: says so", rc == 1 and "int64" in err, err)
    rc, out, err = run(k, "run", program)
    expect("missing input: says how many", rc == 1 and "1 inputs" in err, err)

    rc, out, err = run(k, "inspect", program)
    expect("inspect shows arenas, tensors, instructions",
           rc == 0 and "arenas:" in out and "tensors:" in out and "kernel Relu" in out, out + err)
    rc, out, err = run(k, "inspect", program, "--json")
    import json
    try:
        doc = json.loads(out)
        ok = doc["methods"][0]["instructions"][0]["op"] == "Relu"
    except Exception as e:  # noqa: BLE001
        ok = False
    expect("inspect --json parses", rc == 0 and ok, out + err)
    rc, out, err = run(k, "inspect", garbage)
    expect("inspect of a non-program: one clear error", rc == 1 and "not a kiln program" in err, err)
    rc, out, err = run(k, "verify", program)
    expect("verify accepts a planned program", rc == 0 and "ok" in out, out + err)

    check_pack(k, w, good, garbage)
    check_strip_names(k, w)
    check_quantized_io(k, w)

    return finish()


if __name__ == "__main__":
    sys.exit(main())
