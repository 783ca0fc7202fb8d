#!/usr/bin/env python3
"""Profiling: `kiln run --profile=FILE` writes every run's trace records and
`kiln profile FILE --program PROGRAM` reads them back: the instructions'
times add up to the measured execute() within 10%, the per-op table names
the model's ops, a delegate's own records (the null backend: one per kernel)
are there, the Chrome trace is valid JSON with one event per record, and a
trace is refused against another program.

    profile_test.py --kiln KILN --workdir DIR
"""
import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p


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
    x = os.path.join(demo, "input.npy")
    for target in ["cpu", "null:0,cpu"]:
        program = os.path.join(work, f"demo_{target.split(':')[0]}.kiln")
        run([args.kiln, "plan", os.path.join(demo, "demo_cnn.onnx"), "-o", program, "--target", target])
        trace = program + ".trace"
        p = run([args.kiln, "run", program, "--input", x, "--runs", "20", f"--profile={trace}"])
        check(p.returncode == 0 and os.path.exists(trace), f"{target}: kiln run --profile=FILE writes a trace")
        chrome = program + ".json"
        p = run([args.kiln, "profile", trace, "--program", program, "--chrome", chrome])
        print(p.stdout)
        m = re.search(r"instructions account for ([0-9.]+)% of it", p.stdout)
        share = float(m.group(1)) if m else 0.0
        check(p.returncode == 0 and 90.0 <= share <= 100.0,
              f"{target}: instruction times add up to the execute time within 10% ({share}%)")
        check("Conv" in p.stdout or "delegate null" in p.stdout, f"{target}: the op table names the model's ops")
        events = json.load(open(chrome))["traceEvents"]
        runs = sum(1 for e in events if e["cat"] == "execute")
        check(runs == 20 and all(e["ph"] == "X" and e["dur"] >= 0 for e in events),
              f"{target}: Chrome trace with {len(events)} events over {runs} runs")
        if target != "cpu":
            check(any(e["cat"] == "backend" for e in events), f"{target}: the delegate added its own records")
    p = run([args.kiln, "profile", os.path.join(work, "demo_cpu.kiln.trace"), "--program",
             os.path.join(work, "demo_null.kiln")])
    check(p.returncode != 0 and "not the program" in p.stdout, "a trace against another program is refused")
    p = run([args.kiln, "profile", os.path.join(work, "demo_cpu.kiln")])
    check(p.returncode != 0 and "not a kiln trace" in p.stdout, "a program is not a trace")
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
