#!/usr/bin/env python3
"""Bundled self-tests on the host: `kiln plan --bundle-test` writes
PROGRAM.test beside the program, `kiln run --self-test` passes on the
program it was made for, fails (exit 1) when a weight in the program's
constant segment is changed, and refuses a test made for another program.

    self_test_test.py --kiln KILN --workdir DIR
"""
import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from kiln_checks import expect, finish, run, test_args  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def kiln(args, *argv):
    """Runs kiln; (exit status, stdout and stderr together)."""
    status, out, err = run(args.kiln, *argv)
    return status, out + err


def main():
    args = test_args()
    work = args.workdir
    demo = os.path.join(work, "demo")
    subprocess.run([sys.executable, os.path.join(ROOT, "examples", "demo", "make_model.py"), demo], check=True,
                   stdout=subprocess.DEVNULL)
    program = os.path.join(work, "demo.kiln")
    status, out = kiln(args, "plan", os.path.join(demo, "demo_cnn.onnx"), "-o", program, "--bundle-test",
                       os.path.join(demo, "input.npy"))
    expect("kiln plan --bundle-test writes PROGRAM.test",
           status == 0 and "self-test:" in out and os.path.exists(program + ".test"), out)

    status, out = kiln(args, "run", program, "--self-test", program + ".test")
    expect("the self-test passes on its program", status == 0 and "passed" in out, out)

    # Change one weight: the program still loads (its flatbuffer is intact),
    # and the self-test catches the different outputs.
    data = bytearray(open(program, "rb").read())
    prefix = struct.unpack_from("<I", data, 0)[0]
    segment = (prefix + 4 + 63) // 64 * 64
    offset = segment + 64
    struct.pack_into("<f", data, offset, struct.unpack_from("<f", data, offset)[0] + 10.0)
    corrupt = os.path.join(work, "corrupt.kiln")
    open(corrupt, "wb").write(data)
    status, out = kiln(args, "run", corrupt, "--self-test", program + ".test")
    expect("a changed weight fails the self-test", status == 1 and "FAILED" in out, out)
    status, out = kiln(args, "run", corrupt, "--self-test", program + ".test", "--input",
                       os.path.join(demo, "input.npy"))
    expect("inputs and a self-test exclude each other", status != 0 and "brings its own inputs" in out, out)

    other = os.path.join(work, "other.kiln")
    kiln(args, "plan", os.path.join(demo, "demo_cnn.onnx"), "-o", other, "--no-packing")
    status, out = kiln(args, "run", other, "--self-test", program + ".test")
    expect("a test for another program is refused", status != 0 and "another program" in out, out)
    status, out = kiln(args, "run", program, "--self-test", program)
    expect("a program is not a self-test", status != 0 and "not a kiln self-test" in out, out)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
