#!/usr/bin/env python3
"""kiln plan on malformed models: truncated, corrupt or semantically wrong
ONNX gives one clear line naming the node or tensor, a non-zero exit status,
and no output file.

usage: bad_models_test.py --kiln PATH/TO/kiln --workdir DIR
"""
import os
import random
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from kiln_checks import expect, finish, test_args  # noqa: E402


def save(path, nodes, inputs, outputs, inits=(), opset=13, check=False):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    if check:
        onnx.checker.check_model(model)
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


def plan(kiln, model, out):
    if os.path.exists(out):
        os.remove(out)
    p = subprocess.run([kiln, "plan", model, "-o", out], capture_output=True, text=True, errors="replace")
    return p.returncode, p.stderr


def expect_clean_failure(name, kiln, model, out, must_contain=()):
    rc, err = plan(kiln, model, out)
    lines = [line for line in err.splitlines() if line.strip()]
    ok = rc == 1 and len(lines) == 1 and not os.path.exists(out) and all(s in err for s in must_contain)
    leftovers = [n for n in os.listdir(os.path.dirname(out)) if ".tmp-" in n]
    expect(name, ok and not leftovers, f"rc={rc} lines={len(lines)} out_exists={os.path.exists(out)} "
                                       f"leftovers={leftovers} stderr={err!r}")


def main():
    args = test_args()
    k, w = args.kiln, args.workdir
    out = os.path.join(w, "out.kiln")
    f = lambda n, s, t=TensorProto.FLOAT: helper.make_tensor_value_info(n, t, s)  # noqa: E731

    # A valid model to damage.
    good = os.path.join(w, "good.onnx")
    rng = np.random.default_rng(3)
    save(good, [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                helper.make_node("Relu", ["c"], ["y"], name="relu")],
         [f("x", [1, 2, 5, 5])], [f("y", [1, 3, 5, 5])],
         [numpy_helper.from_array(rng.standard_normal((3, 2, 3, 3)).astype(np.float32), "w")], check=True)
    rc, err = plan(k, good, out)
    expect("the undamaged model plans", rc == 0 and os.path.exists(out), err)
    data = open(good, "rb").read()

    bad = os.path.join(w, "bad.onnx")
    for cut in sorted({1, 7, len(data) // 3, len(data) // 2, len(data) - 40, len(data) - 1}):
        with open(bad, "wb") as fh:
            fh.write(data[:cut])
        expect_clean_failure(f"truncated at {cut} of {len(data)} bytes", k, bad, out)

    # Random corruption: either a clean failure or a valid program, never a crash.
    random.seed(11)
    crashes = 0
    for trial in range(40):
        corrupt = bytearray(data)
        for _ in range(3):
            corrupt[random.randrange(len(corrupt))] = random.randrange(256)
        with open(bad, "wb") as fh:
            fh.write(corrupt)
        rc, err = plan(k, bad, out)
        lines = [line for line in err.splitlines() if line.strip()]
        if not ((rc == 0 and os.path.exists(out)) or (rc == 1 and len(lines) == 1 and not os.path.exists(out))):
            crashes += 1
            print(f"  trial {trial}: rc={rc} {err!r}")
    expect("corrupt models fail cleanly or plan (40 trials)", crashes == 0)

    save(bad, [helper.make_node("Add", ["x", "bias"], ["y"], name="add_bias")], [f("x", [2, 3])], [f("y", [2, 3])])
    expect_clean_failure("missing initializer names the tensor", k, bad, out, ["bias"])

    save(bad, [helper.make_node("Add", ["a", "b"], ["y"], name="mismatch")], [f("a", [2, 3]), f("b", [4, 5])],
         [f("y", [2, 3])])
    expect_clean_failure("shape mismatch names the node", k, bad, out, ["mismatch"])

    save(bad, [helper.make_node("FooBar", ["x"], ["y"], name="mystery", domain="com.example")], [f("x", [2])],
         [f("y", [2])])
    expect_clean_failure("unknown op names the op and node", k, bad, out, ["FooBar"])

    save(bad, [helper.make_node("Relu", ["b"], ["a"], name="first"), helper.make_node("Relu", ["a"], ["b"], name="second")],
         [f("x", [2])], [f("a", [2])])
    expect_clean_failure("a cycle is refused", k, bad, out)

    save(bad, [helper.make_node("Relu", ["x"], ["y"], name="act")], [f("x", [2], TensorProto.COMPLEX64)],
         [f("y", [2], TensorProto.COMPLEX64)])
    expect_clean_failure("unsupported dtype names the tensor", k, bad, out, ["'x'"])

    save(bad, [helper.make_node("Conv", ["x", "w3"], ["y"], name="conv3d")], [f("x", [1, 1, 4, 4, 4])],
         [f("y", [1, 1, 2, 2, 2])], [numpy_helper.from_array(np.ones((1, 1, 3, 3, 3), np.float32), "w3")])
    expect_clean_failure("unsupported attribute combination names the node", k, bad, out, ["conv3d"])

    save(bad, [helper.make_node("Relu", ["x"], ["y"])], [f("x", [2])], [f("z", [2])])
    expect_clean_failure("an output nobody produces is named", k, bad, out, ["z"])

    empty = os.path.join(w, "empty.onnx")
    open(empty, "wb").close()
    expect_clean_failure("an empty file", k, empty, out)

    return finish()


if __name__ == "__main__":
    sys.exit(main())
