#!/usr/bin/env python3
"""Start-up costs what the program needs: `kiln run` makes only the backends
whose devices the program names (planner/targets/runtime_backends.h).

- A CPU program runs (kiln run and kiln bench) with KILN_NULL_MEMORY_MB
  set beyond what a process can address (2^63 bytes), which the null
  backend cannot honour: so it was not made. The same program planned for null:0 fails with that
  setting (the check can fail) and runs without it.
- A CPU program's peak resident memory (kiln run, kiln bench) stays within a bound of the process
  without backends plus the program and its arenas: far below the 256 MiB
  pool the null backend's default would add. Not under the sanitizers
  (KILN_TEST_SANITIZED set), whose own memory it would measure.

    startup_test.py --kiln PATH/TO/kiln --workdir DIR
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from kiln_checks import expect, finish, test_args  # noqa: E402

# What kiln run of a small CPU program may hold at its peak (the executable,
# its shared libraries, the C++ and ONNX runtimes' own start-up); the null
# backend's default pool alone is 256 MiB.
MAX_RSS_MIB = 96


def model(path):
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.standard_normal((64, 64)).astype(np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 64])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def run(cmd, env=None):
    """Exit status, output and peak resident memory (MiB) of `cmd`."""
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    out = process.stdout.read().decode()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode, out, usage.ru_maxrss / 1024.0


def main():
    args = test_args()
    work = os.path.abspath(args.workdir)
    onnx_path, x_path = os.path.join(work, "mlp.onnx"), os.path.join(work, "x.npy")
    model(onnx_path)
    np.save(x_path, np.ones((8, 64), dtype=np.float32))
    cpu, null = os.path.join(work, "cpu.kiln"), os.path.join(work, "null.kiln")
    subprocess.run([args.kiln, "plan", onnx_path, "-o", cpu], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([args.kiln, "plan", onnx_path, "-o", null, "--target", "null:0,cpu"], check=True,
                   stdout=subprocess.DEVNULL)

    impossible = dict(os.environ, KILN_NULL_MEMORY_MB=str(1 << 43))
    status, out, rss = run([args.kiln, "run", cpu, "--input", x_path], env=impossible)
    expect("a CPU program runs where the null backend cannot be made", status == 0, f"exit {status}: {out}")
    status, out, _ = run([args.kiln, "run", null, "--input", x_path], env=impossible)
    expect("a null:0 program needs the null backend", status != 0 and "null" in out, f"exit {status}: {out}")
    status, out, _ = run([args.kiln, "run", null, "--input", x_path])
    expect("the null:0 program runs with the default pool", status == 0, f"exit {status}: {out}")
    status, out, _ = run([args.kiln, "bench", cpu, "--runs", "3"], env=impossible)
    expect("kiln bench of a CPU program runs where the null backend cannot be made", status == 0,
           f"exit {status}: {out}")

    if os.environ.get("KILN_TEST_SANITIZED"):
        print("SKIP the resident-memory bound: a sanitizer build")
        return finish(skipped=1)
    status, out, rss = run([args.kiln, "run", cpu, "--input", x_path])
    expect(f"kiln run of a CPU program peaks at {rss:.1f} MiB resident (at most {MAX_RSS_MIB})",
           status == 0 and rss < MAX_RSS_MIB, out)
    status, out, rss = run([args.kiln, "bench", cpu, "--runs", "3"])
    expect(f"kiln bench of a CPU program peaks at {rss:.1f} MiB resident (at most {MAX_RSS_MIB})",
           status == 0 and rss < MAX_RSS_MIB, out)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
