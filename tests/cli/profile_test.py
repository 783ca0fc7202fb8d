#!/usr/bin/env python3
"""Profiling: `kiln run --profile=FILE` writes every run's trace records and
`kiln profile FILE --program PROGRAM` reads them back: the instructions'
times add up to the measured execute() within 10%, the per-op table names
the model's ops, a delegate's own records (the null backend: one per kernel)
are there, the Chrome trace is valid JSON with one event per record, and a
trace is refused against another program.

    profile_test.py --kiln KILN --workdir DIR
"""
import json
import os
import re
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
    x = os.path.join(demo, "input.npy")
    for target in ["cpu", "null:0,cpu"]:
        program = os.path.join(work, f"demo_{target.split(':')[0]}.kiln")
        kiln(args, "plan", os.path.join(demo, "demo_cnn.onnx"), "-o", program, "--target", target)
        trace = program + ".trace"
        status, out = kiln(args, "run", program, "--input", x, "--runs", "20", f"--profile={trace}")
        expect(f"{target}: kiln run --profile=FILE writes a trace", status == 0 and os.path.exists(trace), out)
        chrome = program + ".json"
        status, out = kiln(args, "profile", trace, "--program", program, "--chrome", chrome)
        print(out)
        m = re.search(r"instructions account for ([0-9.]+)% of it", out)
        share = float(m.group(1)) if m else 0.0
        expect(f"{target}: instruction times add up to the execute time within 10% ({share}%)",
               status == 0 and 90.0 <= share <= 100.0)
        expect(f"{target}: the op table names the model's ops", "Conv" in out or "delegate null" in out)
        events = json.load(open(chrome))["traceEvents"]
        runs = sum(1 for e in events if e["cat"] == "execute")
        expect(f"{target}: Chrome trace with {len(events)} events over {runs} runs",
               runs == 20 and all(e["ph"] == "X" and e["dur"] >= 0 for e in events))
        if target != "cpu":
            expect(f"{target}: the delegate added its own records", any(e["cat"] == "backend" for e in events))
    status, out = kiln(args, "profile", os.path.join(work, "demo_cpu.kiln.trace"), "--program",
                       os.path.join(work, "demo_null.kiln"))
    expect("a trace against another program is refused", status != 0 and "not the program" in out, out)
    status, out = kiln(args, "profile", os.path.join(work, "demo_cpu.kiln"))
    expect("a program is not a trace", status != 0 and "not a kiln trace" in out, out)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
