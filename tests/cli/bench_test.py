#!/usr/bin/env python3
"""kiln bench: the latency figures are ordered (min <= p50 <= p90 <= p99 <=
max) over exactly --runs runs, or over as many as --time allows; the memory
figures are the program's (kiln inspect --json's arenas, constant segment and
bookkeeping bytes) and the process's peak resident set holds at least them;
--per-op's table covers the model's ops with shares adding up to one, and
its Chrome trace has one execute and one event per instruction for every
run; random inputs follow the seed, the dtype and --range (written by
--save-inputs and checked here); usage errors exit with status 2.

    bench_test.py --kiln KILN --workdir DIR
"""
import json
import os
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from kiln_checks import expect, finish, run, test_args  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def bench_json(args, *argv):
    status, out, err = run(args.kiln, "bench", *argv, "--json")
    if status != 0:
        return None, out + err
    return json.loads(out), out


def mixed_dtype_model(path):
    """Inputs of four dtypes, each read by one node."""
    nodes = [helper.make_node("Relu", ["x"], ["y0"]),
             helper.make_node("Cast", ["i"], ["y1"], to=TensorProto.FLOAT),
             helper.make_node("Cast", ["q"], ["y2"], to=TensorProto.FLOAT),
             helper.make_node("Cast", ["s"], ["y3"], to=TensorProto.FLOAT)]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 64]),
              helper.make_tensor_value_info("i", TensorProto.INT64, [4096]),
              helper.make_tensor_value_info("q", TensorProto.UINT8, [4096]),
              helper.make_tensor_value_info("s", TensorProto.INT8, [4096])]
    outputs = [helper.make_tensor_value_info(f"y{k}", TensorProto.FLOAT, shape)
               for k, shape in enumerate([[64, 64], [4096], [4096], [4096]])]
    model = helper.make_model(helper.make_graph(nodes, "mixed", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, path)


def check_timing(args, program, inspect):
    b, out = bench_json(args, program, "--runs", "30", "--warmup", "2")
    if not expect("bench --json runs and prints JSON", b is not None, out):
        return
    lat = b["latency_ms"]
    expect(f"30 timed runs after 2 warm-up ({b['runs']}, {b['warmup']})", b["runs"] == 30 and b["warmup"] == 2)
    expect(f"min <= p50 <= p90 <= p99 <= max ({lat})",
           0 < lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"] and
           lat["min"] <= lat["mean"] <= lat["max"])
    expect(f"the CPU path and threads are named ({b['isa']}, {b['threads']})",
           b["isa"] in ("scalar", "avx2", "avx512", "neon") and b["threads"] == 1)
    method = inspect["methods"][0]
    arenas = [a["size"] for a in method["arenas"] if a["device"].startswith("cpu")]
    mem = b["memory"]
    expect(f"arena, constant and bookkeeping bytes are the program's ({mem})",
           mem["arena_bytes"] == arenas and mem["constant_bytes"] == inspect["segment_bytes"] and
           mem["bookkeeping_bytes"] == method["bookkeeping_bytes"] and mem["program_bytes"] == inspect["file_bytes"])
    expect("the peak resident set holds at least the arenas and constants",
           mem["peak_resident_bytes"] >= sum(arenas) + mem["constant_bytes"])

    start = time.monotonic()
    b, out = bench_json(args, program, "--time", "0.5", "--warmup", "0")
    elapsed = time.monotonic() - start
    expect(f"--time 0.5 runs for half a second ({b and b['runs']} runs in {elapsed:.2f} s)",
           b is not None and b["runs"] > 1 and elapsed >= 0.5, out)
    b, out = bench_json(args, program, "--time", "5", "--runs", "4")
    expect("--runs caps a time budget", b is not None and b["runs"] == 4, out)
    status, out, err = run(args.kiln, "bench", program, "--runs", "5", "--threads", "2", "--isa", "scalar")
    expect("text output: percentiles, the path and threads asked for",
           status == 0 and "p99" in out and "cpu path scalar, 2 threads" in out, out + err)


def check_per_op(args, program, inspect):
    chrome = os.path.join(args.workdir, "bench_trace.json")
    b, out = bench_json(args, program, "--runs", "12", f"--per-op={chrome}")
    if not expect("bench --per-op=FILE runs", b is not None, out):
        return
    ops = {op["op"]: op for op in b["per_op"]}
    shares = sum(op["share"] for op in b["per_op"])
    expect(f"the per-op table names the model's ops ({sorted(ops)}), shares add up to 1 ({shares:.6f})",
           "Conv" in ops and "Gemm" in ops and abs(shares - 1) < 1e-6)
    instructions = len(inspect["methods"][0]["instructions"])
    expect("the op counts cover every instruction", sum(op["count"] for op in b["per_op"]) == instructions)
    events = json.load(open(chrome))["traceEvents"]
    executes = sum(1 for e in events if e["cat"] == "execute")
    kernels = sum(1 for e in events if e["cat"] == "kernel")
    expect(f"the Chrome trace holds every timed run ({executes} executes, {kernels} kernel events)",
           executes == 12 and kernels == 12 * instructions)
    status, out, err = run(args.kiln, "bench", program, "--runs", "3", "--per-op", "--top", "2")
    expect("text --per-op prints the op table", status == 0 and "op type" in out, out + err)


def check_random_inputs(args):
    model = os.path.join(args.workdir, "mixed.onnx")
    mixed_dtype_model(model)
    program = os.path.join(args.workdir, "mixed.kiln")
    status, out, err = run(args.kiln, "plan", model, "-o", program)
    if not expect("the mixed-dtype model plans", status == 0, out + err):
        return

    def inputs(*argv):
        d = os.path.join(args.workdir, "inputs_" + "_".join(a.replace(",", "_") for a in argv))
        status, out, err = run(args.kiln, "bench", program, "--runs", "1", "--warmup", "0", "--save-inputs", d, *argv)
        expect(f"bench {' '.join(argv)} --save-inputs", status == 0, out + err)
        return [np.load(os.path.join(d, f"input_{k}.npy")) for k in range(4)] if status == 0 else None

    a, again, other = inputs("--seed", "7"), inputs("--seed", "7"), inputs("--seed", "8")
    if a is None or again is None or other is None:
        return
    expect("the same seed gives the same inputs", all(np.array_equal(p, q) for p, q in zip(a, again)))
    expect("another seed gives other inputs", not np.array_equal(a[0], other[0]))
    x, i, q, s = a
    expect(f"dtypes follow the method's inputs ({[t.dtype.name for t in a]})",
           [t.dtype for t in a] == [np.float32, np.int64, np.uint8, np.int8] and x.shape == (64, 64))
    expect(f"floats in [-1, 1) ({x.min():.3f}..{x.max():.3f})", x.min() >= -1 and x.max() < 1 and x.std() > 0.4)
    expect(f"wide integers in 0..99 ({i.min()}..{i.max()})", i.min() == 0 and i.max() == 99)
    expect(f"uint8 and int8 over their whole range ({q.min()}..{q.max()}, {s.min()}..{s.max()})",
           q.min() == 0 and q.max() == 255 and s.min() == -128 and s.max() == 127)
    r = inputs("--range", "2,5")
    if r:
        expect(f"--range 2,5 bounds every input ({r[0].min():.2f}..{r[0].max():.2f}, {r[1].min()}..{r[1].max()})",
               r[0].min() >= 2 and r[0].max() < 5 and all(t.min() == 2 and t.max() == 5 for t in r[1:]))


def check_errors(args, program, demo):
    for argv, what in [(["--runs", "0"], "--runs 0"), (["--range", "1,0"], "an empty --range"),
                       (["--time", "-1"], "a negative --time"), (["--warmup", "-2"], "negative --warmup")]:
        status, out, err = run(args.kiln, "bench", program, *argv)
        expect(f"{what} is a usage error", status == 2, out + err)
    status, out, err = run(args.kiln, "bench", program, "--input", os.path.join(demo, "input.npy"), "--runs", "3")
    expect("given inputs are timed", status == 0 and "given inputs" in out, out + err)
    x = os.path.join(demo, "input.npy")
    status, out, err = run(args.kiln, "bench", program, "--input", x, "--input", x)
    expect("a wrong input count is an error", status == 1 and "takes 1 inputs" in err, out + err)


def main():
    args = test_args()
    demo = os.path.join(args.workdir, "demo")
    subprocess.run([sys.executable, os.path.join(ROOT, "examples", "demo", "make_model.py"), demo], check=True,
                   stdout=subprocess.DEVNULL)
    program = os.path.join(args.workdir, "demo.kiln")
    status, out, err = run(args.kiln, "plan", os.path.join(demo, "demo_cnn.onnx"), "-o", program)
    expect("the demo model plans", status == 0, out + err)
    status, out, err = run(args.kiln, "inspect", program, "--json")
    inspect = json.loads(out)
    check_timing(args, program, inspect)
    check_per_op(args, program, inspect)
    check_random_inputs(args)
    check_errors(args, program, demo)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
