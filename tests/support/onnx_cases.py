"""What the scripts that check kiln op by op against a reference share
(tests/ops/onnx_*_cases.py): planning and running one ONNX model through
the CLI, comparing its outputs with the expected arrays, asking kiln plan
to refuse a model, and the loop over named cases.

Each script builds its models and expected outputs itself; this module
knows nothing about ops.
"""
import os
import subprocess

import numpy as np
import onnx

from kiln_checks import expect


def plan_and_run(name, m, inputs, kiln, workdir, plan_args=()):
    """Checks and saves `m` as NAME.onnx in `workdir`, plans it (with
    `plan_args`) and runs it on `inputs` (NumPy arrays, in the graph's
    input order), writing outputs to NAME_out/; returns the finished
    `kiln run` process (stderr captured). A failing plan raises
    subprocess.CalledProcessError."""
    onnx.checker.check_model(m)
    base = os.path.join(workdir, name)
    onnx.save(m, base + ".onnx")
    args = []
    for i, a in enumerate(inputs):
        np.save(f"{base}_in{i}.npy", a)
        args += ["--input", f"{base}_in{i}.npy"]
    subprocess.run([kiln, "plan", base + ".onnx", "-o", base + ".kiln", *plan_args], check=True,
                   stdout=subprocess.DEVNULL)
    return subprocess.run([kiln, "run", base + ".kiln", *args, "--output-dir", base + "_out"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def compare(name, got, want, tolerance):
    """'' when `got` matches `want`, else what differs. Shapes and dtypes
    must be equal; integers and booleans must be equal; floating point
    must have NaN in the same places and the rest within `tolerance`
    (1e-3 at least for float16) of the largest magnitude expected."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{name}: {got.dtype}{list(got.shape)} != {want.dtype}{list(want.shape)}"
    if want.dtype.kind != "f":
        return "" if np.array_equal(got, want) else f"{name}: values differ"
    if want.size == 0:
        return ""
    if not np.array_equal(np.isnan(got), np.isnan(want)):
        return f"{name}: NaN in other places"
    if want.dtype == np.float16:
        tolerance = max(tolerance, 1e-3)
    g = np.nan_to_num(got.astype(np.float64), nan=0.0)
    w = np.nan_to_num(want.astype(np.float64), nan=0.0)
    scale = max(float(np.max(np.abs(w))), 1e-30)
    err = float(np.max(np.abs(g - w))) / scale
    return "" if err <= tolerance else f"{name}: relative error {err:.2e}"


def check_run(run, name, workdir, expected, tolerance):
    """The problems of a finished `kiln run` (plan_and_run's result) whose
    outputs, in order, should be `expected`: (output name, array) pairs."""
    if run.returncode != 0:
        return [f"kiln run failed with status {run.returncode}: {run.stderr.strip()}"]
    problems = []
    for i, (out, want) in enumerate(expected):
        got = np.load(os.path.join(workdir, name + "_out", f"output_{i}.npy"))
        problem = compare(out, got, want, tolerance)
        if problem:
            problems.append(problem)
    return problems


def check_case(name, case, kiln, workdir, tolerance):
    """The problems of one case as the op-case scripts build them,
    ((model, {output name: expected array}), inputs): planned, run and
    every graph output compared (check_run)."""
    (m, expected), inputs = case
    run = plan_and_run(name, m, inputs, kiln, workdir)
    return check_run(run, name, workdir, [(out.name, expected[out.name]) for out in m.graph.output], tolerance)


def plan_only(kiln, m, path):
    """Saves `m` (unchecked: refusals are often invalid on purpose) to
    `path` and plans it; returns (exit status, stderr stripped)."""
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    p = subprocess.run([kiln, "plan", path, "-o", path + ".kiln"], capture_output=True, text=True)
    return p.returncode, p.stderr.strip()


def run_each(names, only, case, label=lambda name: name):
    """Runs case(name) -> list of problems for every name (or only `only`)
    and prints one PASS or FAIL line each; a kiln command that fails
    counts as a problem."""
    for name in names:
        if only and name != only:
            continue
        try:
            problems = case(name)
        except subprocess.CalledProcessError as e:
            problems = [f"{' '.join(str(a) for a in e.cmd[:2])} failed with status {e.returncode}"]
        expect(label(name), not problems, "; ".join(problems))
