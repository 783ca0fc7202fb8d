#!/usr/bin/env python3
"""Runs the firmware soak image (firmware_soak.cc) under QEMU for a fixed
time and judges it.

    firmware_soak.py --seconds S -- QEMU ARGS... IMAGE

QEMU is stopped after S seconds of wall-clock time. The soak passes when
the image was still running then (it loops until stopped and checks
itself: outputs identical, stack flat), printed at least two progress
lines and no "FAIL". Prints the runs completed, the rate and the stack's
high-water mark on the first and last lines.
"""
import argparse
import re
import signal
import subprocess
import sys
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command

    start = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
    try:
        output, _ = process.communicate(timeout=args.seconds)
        still_running = False
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGTERM)
        try:
            output, _ = process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            output, _ = process.communicate()
        still_running = True
    elapsed = time.monotonic() - start

    progress = [(int(m.group(1)), int(m.group(2)))
                for m in re.finditer(r"soak: (\d+) runs, outputs identical, stack (\d+) bytes", output)]
    lines = output.splitlines()
    print("\n".join(lines[:3] + (["..."] if len(lines) > 5 else []) + lines[max(3, len(lines) - 2):]))
    problems = []
    if not still_running:
        problems.append(f"the image stopped after {elapsed:.1f} s with status {process.returncode}")
    if "FAIL" in output:
        problems.append("the image reported a failure")
    if len(progress) < 2:
        problems.append(f"{len(progress)} progress lines, at least 2 expected")
    runs = progress[-1][0] if progress else 0
    stacks = f"{progress[0][1]} -> {progress[-1][1]}" if progress else "?"
    print(f"firmware_soak.py: {runs} runs in {elapsed:.1f} s ({runs / elapsed:.0f} runs/s), "
          f"stack high-water mark {stacks} bytes")
    for p in problems:
        print(f"firmware_soak.py: FAIL: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
