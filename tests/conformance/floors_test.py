#!/usr/bin/env python3
"""The conformance runner's floors bite: kiln_onnx_node_tests --floors FILE
on seven node tests planned for null:0,cpu (three wholly on the device, one
partly, one on the CPU, one random op passing by property, one refused)
passes with floors at its counts, fails naming the target and both numbers
when any count is below its floor, notes a count above its floor, and fails
on a floors file recorded on other data, one without a node_tests line or
the target's line, or a malformed one; --filter runs a subset and checks
nothing.

    floors_test.py --runner KILN_ONNX_NODE_TESTS --workdir DIR [--data NODE_TESTS]
"""
import argparse
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from kiln_checks import expect, finish  # noqa: E402

TARGET = "null:0,cpu"
# What the runner counts on these tests for TARGET.
CASES = ["test_abs", "test_add", "test_relu", "test_dynamicquantizelinear_expanded", "test_where_example",
         "test_bernoulli_seed", "test_nonzero_example"]
COUNTS = {"passed": 5, "by_property": 1, "on_device": 4, "device_only": 3}
FIELDS = list(COUNTS)
WHAT = {
    "passed": "tests passed by value",
    "by_property": "tests passed by property",
    "on_device": "passing tests ran on the device",
    "device_only": "passing tests ran wholly on the device",
}


def floors_file(path, counts, node_tests=len(CASES), target=TARGET, extra=""):
    with open(path, "w") as f:
        f.write(f"# floors for the test\nnode_tests {node_tests}\n{extra}")
        f.write(f"{target}  " + "  ".join(str(counts[k]) for k in FIELDS) + "\n")
    return path


def run(args, data, floors, *extra):
    p = subprocess.run([args.runner, "--data", data, "--target", TARGET, "--floors", floors, *extra],
                       capture_output=True, text=True, errors="replace")
    return p.returncode, p.stdout + p.stderr


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runner", required=True, help="kiln_onnx_node_tests")
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--data", default="/usr/share/libonnx-testdata/data/node")
    args = parser.parse_args()
    shutil.rmtree(args.workdir, ignore_errors=True)
    data = os.path.join(args.workdir, "node")
    os.makedirs(data)
    for case in CASES:
        os.symlink(os.path.join(args.data, case), os.path.join(data, case))
    floors = os.path.join(args.workdir, "floors.txt")

    status, out = run(args, data, floors_file(floors, COUNTS))
    expect("floors at the counts hold", status == 0 and f"the floors of target {TARGET}" in out, out)

    for field in FIELDS:
        higher = dict(COUNTS, **{field: COUNTS[field] + 1})
        status, out = run(args, data, floors_file(floors, higher))
        message = f"FLOOR DROPPED: target {TARGET}: {COUNTS[field]} {WHAT[field]}, below the floor of {higher[field]}"
        expect(f"{field} below its floor fails naming the target and both numbers",
               status == 1 and message in out and out.count("FLOOR DROPPED") == 1, out)

        lower = dict(COUNTS, **{field: COUNTS[field] - 1})
        status, out = run(args, data, floors_file(floors, lower))
        note = f"note: target {TARGET}: {COUNTS[field]} {WHAT[field]}, above the floor of {lower[field]}: raise"
        expect(f"{field} above its floor passes with a note", status == 0 and note in out, out)

    unchecked = dict(COUNTS, on_device="-", device_only="-")
    status, out = run(args, data, floors_file(floors, unchecked))
    expect("a '-' floor is not checked", status == 0 and "note:" not in out, out)

    status, out = run(args, data, floors_file(floors, COUNTS, node_tests=len(CASES) + 1))
    expect("floors recorded on other data fail", status == 1 and "was recorded on 8 node tests" in out, out)

    with open(floors, "w") as f:
        f.write(f"{TARGET}  " + "  ".join(str(COUNTS[k]) for k in FIELDS) + "\n")
    status, out = run(args, data, floors)
    expect("a file without a node_tests line fails", status == 1 and "has no node_tests line" in out, out)

    status, out = run(args, data, floors_file(floors, COUNTS, target="cpu"))
    expect("a file without the target's line fails", status == 1 and f"no line for target {TARGET}" in out, out)

    status, out = run(args, data, floors_file(floors, dict(COUNTS, passed="many")))
    expect("a malformed line fails naming the file and line", status == 1 and f"{floors}:3:" in out, out)

    status, out = run(args, data, floors_file(floors, dict(COUNTS, passed=99)), "--filter", "test_relu")
    expect("--filter checks no floor", status == 0 and "are not checked: --filter" in out, out)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
