#!/usr/bin/env python3
"""Collectives end to end: programs planned for several ranks run as real
processes under mpirun and compute what one rank computes.

    collectives_test.py --kiln KILN --run-mpi RUN_MPI.PY --mpirun MPIRUN --workdir DIR

  - tensor parallel: an MLP of Gemms, two pre-norm MLP blocks of MatMuls and
    a transformer block (8 heads), planned with --tensor-parallel 2, 4 and 8
    and run on as many ranks, match the single-rank program within 1e-5
    relative (and the single-rank program matches PyTorch);
  - placement paths: one AllReduce per path (zero copy, method input, two
    explicit copies) on 2 ranks, counted in plan.json, and each sum right;
  - reuse: 8 x (MatMul -> AllReduce) plans into one symmetric and one
    ordinary buffer, and computes 2^8 times the product on 2 ranks;
  - refusals: a program for 4 ranks on 3, and one for 2 ranks without mpirun,
    end with a message naming the rank counts.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from kiln_checks import expect, finish  # noqa: E402


def check(ok, what):
    expect(what, ok)


def run(cmd, expect_ok=True):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if expect_ok and p.returncode != 0:
        print(p.stdout)
        raise SystemExit(f"command failed: {' '.join(cmd)}")
    return p


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--run-mpi", required=True)
    parser.add_argument("--mpirun", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    work = args.workdir
    os.makedirs(work, exist_ok=True)
    run([sys.executable, os.path.join(HERE, "make_models.py"), work])
    kiln = args.kiln

    def path(name):
        return os.path.join(work, name)

    def mpi(ranks, program, inputs, out_dir, expect_ok=True):
        cmd = [sys.executable, args.run_mpi, "--mpirun", args.mpirun, "-n", str(ranks), "--max-seconds", "120", "--",
               kiln, "run", program, "--output-dir", out_dir]
        for i in inputs:
            cmd += ["--input", i]
        return run(cmd, expect_ok)

    def rel(a, b):
        return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))

    # Tensor parallelism against one rank.
    for model in ["mlp_gemm", "mlp_matmul", "transformer"]:
        x = path(model + ".input.npy")
        single = path(model + ".kiln")
        run([kiln, "plan", path(model + ".onnx"), "-o", single])
        run([kiln, "run", single, "--input", x, "--output-dir", path("out_" + model)])
        want = np.load(path(f"out_{model}/output_0.npy"))
        err = rel(want, np.load(path(model + ".expected.npy")))
        check(err <= 1e-4, f"{model}: one rank matches PyTorch (relative error {err:.1e})")
        for ranks in [2, 4, 8]:
            program = path(f"{model}.tp{ranks}.kiln")
            report = path(f"report_{model}_{ranks}")
            run([kiln, "plan", path(model + ".onnx"), "-o", program, "--tensor-parallel", str(ranks),
                 "--report", report])
            plan = json.load(open(os.path.join(report, "plan.json")))
            tp = plan["tensor_parallel"]
            check(plan["ranks"] == ranks and tp["row_splits"] >= 1 and
                  tp["weight_bytes_per_rank"] < tp["weight_bytes_total"],
                  f"{model}: {ranks} ranks, {tp['column_splits']} column and {tp['row_splits']} row splits, "
                  f"{tp['weight_bytes_per_rank']} of {tp['weight_bytes_total']} weight bytes per rank")
            out = path(f"out_{model}_{ranks}")
            mpi(ranks, program, [x], out)
            err = rel(np.load(os.path.join(out, "output_0.npy")), want)
            check(err <= 1e-5, f"{model}: {ranks} ranks match one rank (relative error {err:.1e})")

    # The three placement paths, each summed over 2 ranks holding the same input.
    report = path("report_paths")
    run([kiln, "plan", path("allreduce_paths.onnx"), "-o", path("paths.kiln"), "--ranks", "2", "--report", report])
    sym = json.load(open(os.path.join(report, "plan.json")))["symmetric"]
    check(sym["collectives"] == 5 and sym["zero_copy"]["operands"] == 1 and sym["input_buffers"]["operands"] == 1 and
          sym["input_buffers"]["copies"] == 1 and sym["explicit_copies"]["operands"] == 2,
          f"placement paths counted: {json.dumps(sym)}")
    x = np.load(path("allreduce_paths.input.npy"))
    mpi(2, path("paths.kiln"), [path("allreduce_paths.input.npy")], path("out_paths"))
    m = onnx.load(path("allreduce_paths.onnx"))
    w = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    want = 2 * (x @ w["w"]) + 4 * x + 2 * w["c"] + 2 * np.maximum(x, 0)
    err = rel(np.load(path("out_paths/output_0.npy")), want)
    check(err <= 1e-5, f"placement paths: sums over 2 ranks right (relative error {err:.1e})")

    # One symmetric and one ordinary buffer for 8 layers.
    report = path("report_chain")
    run([kiln, "plan", path("allreduce_chain.onnx"), "-o", path("chain.kiln"), "--ranks", "2", "--no-packing",
         "--report", report])
    plan = json.load(open(os.path.join(report, "plan.json")))
    layer = 4 * 64 * 4
    sizes = {a["kind"]: a["size"] for a in plan["arenas"]}
    check(sizes == {"symmetric": layer, "ordinary": layer},
          f"8 x MatMul->AllReduce: one symmetric and one ordinary buffer of {layer} bytes ({sizes})")
    mpi(2, path("chain.kiln"), [path("allreduce_chain.input.npy")], path("out_chain"))
    m = onnx.load(path("allreduce_chain.onnx"))
    w = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    y = np.load(path("allreduce_chain.input.npy")).astype(np.float64)
    for i in range(8):
        y = 2 * (y @ w[f"w{i}"])
    err = rel(np.load(path("out_chain/output_0.npy")), y)
    check(err <= 1e-5, f"8 x MatMul->AllReduce on 2 ranks (relative error {err:.1e})")

    # Refusals.
    x = path("transformer.input.npy")
    p = mpi(3, path("transformer.tp4.kiln"), [x], path("out_refused"), expect_ok=False)
    check(p.returncode != 0 and "planned for 4 ranks" in p.stdout and "'mpi-shm' has 3" in p.stdout,
          "a program for 4 ranks refuses 3")
    p = run([kiln, "run", path("transformer.tp2.kiln"), "--input", x], expect_ok=False)
    check(p.returncode != 0 and "planned for 2 ranks" in p.stdout and "mpirun -n 2" in p.stdout,
          "a program for 2 ranks run alone says how to launch it")

    return finish()


if __name__ == "__main__":
    sys.exit(main())
