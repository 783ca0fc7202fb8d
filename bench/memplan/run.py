#!/usr/bin/python3
"""Memory planner benchmark: every interval set of the shared memplan data
(MiniMalloc's challenging instances, real traces from MindSpore SOMAS,
IOPDDL and IREE, and the small test cases), then the plans of real models
(mobilenet_v2, resnet18, a transformer encoder block exported with
python3-torch). Per instance it prints buffers, the lower bound (LB: most
bytes live at once), naive (no reuse), greedy first fit (TFLite Micro's
planner), kiln, kiln/LB and the solve time, and a markdown table at the end.

The data lives in ../shared/memplan-bench relative to the repository root
unless KILN_MEMPLAN_BENCH names another directory.

usage: bench/memplan/run.py [--kiln build/release/bin/kiln] [--time-limit 60]
                            [--only SUBSTRING] [--no-models] [--models-dir DIR]
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GROUPS = [("minimalloc-challenging", "challenging"), ("real-traces", "real trace"), ("small-cases", "small case")]
MODELS = ["mobilenet_v2", "resnet18", "transformer_block"]


def fmt_int(v):
    return f"{v:,}" if isinstance(v, int) else str(v)


def plan_interval_file(kiln, path, time_limit):
    start = time.monotonic()
    p = subprocess.run([kiln, "memplan", path, "--json", "--time-limit", str(time_limit)], capture_output=True,
                       text=True)
    wall = time.monotonic() - start
    if p.returncode != 0:
        return {"error": p.stderr.strip()}
    doc = json.loads(p.stdout)
    doc["wall"] = wall
    return doc


def plan_model(kiln, models_dir, name, time_limit):
    onnx_path = os.path.join(models_dir, name + ".onnx")
    report = os.path.join(models_dir, name + "-report")
    p = subprocess.run([kiln, "plan", onnx_path, "-o", os.path.join(models_dir, name + ".kiln"), "--report", report,
                        "--time-limit", str(time_limit)], capture_output=True, text=True)
    if p.returncode != 0:
        message = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "plan failed"
        op = re.search(r"op (\S+) is not supported", message)
        return {"error": f"pending: unsupported op {op.group(1)}" if op else message}
    with open(os.path.join(report, "plan.json")) as f:
        plan = json.load(f)
    arena = plan["arenas"][0]
    align = arena.get("alignment", 64)
    roots = [t for t in plan["tensors"] if t["alias_of"] is None and t["arena"] == 0]
    return {
        "buffers": len(roots),
        "lower_bound": arena["lower_bound"],
        "naive": sum((t["size"] + align - 1) // align * align for t in roots),
        "first_fit": arena["first_fit"],
        "arena": arena["size"],
        "ratio": arena["size"] / arena["lower_bound"] if arena["lower_bound"] else 1.0,
        "seconds": arena["solve_seconds"],
        "optimal": arena["optimal"],
        "algorithm": arena["algorithm"],
    }


def row(label, kind, d):
    if "error" in d:
        return f"| {label} | {kind} | | | | | | | | {d['error']} |"
    lb = d["lower_bound"]
    ff = d["first_fit"]
    theirs = d.get("file_plan")
    note = []
    if d.get("optimal"):
        note.append("optimal")
    if theirs:
        note.append(f"file's own plan {theirs / lb:.4f} x LB")
    if d["arena"] > ff:
        note.append("WORSE THAN FIRST FIT")
    return (f"| {label} | {kind} | {fmt_int(d['buffers'])} | {fmt_int(lb)} | {fmt_int(d['naive'])} | "
            f"{fmt_int(ff)} ({ff / lb:.4f}) | {fmt_int(d['arena'])} | {d['ratio']:.5f} | {d['seconds']:.2f} | "
            f"{', '.join(note)} |")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kiln", default=os.path.join(ROOT, "build", "release", "bin", "kiln"))
    parser.add_argument("--time-limit", type=float, default=60)
    parser.add_argument("--only", default="")
    parser.add_argument("--no-models", action="store_true")
    parser.add_argument("--models-dir", default=os.path.join(ROOT, "build", "release", "bench-models"))
    args = parser.parse_args()
    data = os.environ.get("KILN_MEMPLAN_BENCH", os.path.join(ROOT, "..", "shared", "memplan-bench"))
    if not os.path.isdir(data):
        print(f"no benchmark data at {data} (set KILN_MEMPLAN_BENCH)", file=sys.stderr)
        return 2

    lines = []
    header = ("| instance | kind | buffers | LB | naive | first fit (x LB) | kiln | kiln / LB | time s | notes |\n"
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for folder, kind in GROUPS:
        for path in sorted(glob.glob(os.path.join(data, folder, "*.csv"))):
            label = os.path.splitext(os.path.basename(path))[0]
            if args.only and args.only not in label:
                continue
            d = plan_interval_file(args.kiln, path, args.time_limit)
            lines.append(row(label, kind, d))
            print(lines[-1], flush=True)
    if not args.no_models:
        exported = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "memplan", "export_models.py"),
                                   args.models_dir], capture_output=True, text=True)
        if exported.returncode != 0:
            print(exported.stderr, file=sys.stderr)
            return 1
        for name in MODELS:
            if args.only and args.only not in name:
                continue
            d = plan_model(args.kiln, args.models_dir, name, args.time_limit)
            lines.append(row(name, "model", d))
            print(lines[-1], flush=True)
    print()
    print(header)
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
