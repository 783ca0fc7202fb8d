#!/usr/bin/env python3
"""Bundled self-tests on the host: `kiln plan --bundle-test` writes
PROGRAM.test beside the program, `kiln run --self-test` passes on the
program it was made for, fails (exit 1) when a weight in the program's
constant segment is changed, and refuses a test made for another program.

    self_test_test.py --kiln KILN --workdir DIR
"""
import argparse
import os
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def run(cmd):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    work = args.workdir
    os.makedirs(work, exist_ok=True)
    demo = os.path.join(work, "demo")
    subprocess.run([sys.executable, os.path.join(ROOT, "examples", "demo", "make_model.py"), demo], check=True,
                   stdout=subprocess.DEVNULL)
    program = os.path.join(work, "demo.kiln")
    p = run([args.kiln, "plan", os.path.join(demo, "demo_cnn.onnx"), "-o", program, "--bundle-test",
             os.path.join(demo, "input.npy")])
    check(p.returncode == 0 and "self-test:" in p.stdout and os.path.exists(program + ".test"),
          "kiln plan --bundle-test writes PROGRAM.test")

    p = run([args.kiln, "run", program, "--self-test", program + ".test"])
    check(p.returncode == 0 and "passed" in p.stdout, "the self-test passes on its program: " + p.stdout.strip())

    # Change one weight: the program still loads (its flatbuffer is intact),
    # and the self-test catches the different outputs.
    data = bytearray(open(program, "rb").read())
    prefix = struct.unpack_from("<I", data, 0)[0]
    segment = (prefix + 4 + 63) // 64 * 64
    offset = segment + 64
    struct.pack_into("<f", data, offset, struct.unpack_from("<f", data, offset)[0] + 10.0)
    corrupt = os.path.join(work, "corrupt.kiln")
    open(corrupt, "wb").write(data)
    p = run([args.kiln, "run", corrupt, "--self-test", program + ".test"])
    check(p.returncode == 1 and "FAILED" in p.stdout, "a changed weight fails the self-test: " + p.stdout.strip())
    p = run([args.kiln, "run", corrupt, "--self-test", program + ".test", "--input", os.path.join(demo, "input.npy")])
    check(p.returncode != 0 and "brings its own inputs" in p.stdout, "inputs and a self-test exclude each other")

    other = os.path.join(work, "other.kiln")
    run([args.kiln, "plan", os.path.join(demo, "demo_cnn.onnx"), "-o", other, "--no-packing"])
    p = run([args.kiln, "run", other, "--self-test", program + ".test"])
    check(p.returncode != 0 and "another program" in p.stdout, "a test for another program is refused")
    p = run([args.kiln, "run", program, "--self-test", program])
    check(p.returncode != 0 and "not a kiln self-test" in p.stdout, "a program is not a self-test")

    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
