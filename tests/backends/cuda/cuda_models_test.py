#!/usr/bin/env python3
"""bench/cuda_models.py's `run` keeps every other row and column when one
peer column or one model fails: here torch.compile fails on model `a`,
kiln-runner fails on model `c`, and the table still holds `a`'s kiln and
eager figures, all of `b`, and `c` marked failed (exit 1 for `c`). A 16-bit
program (program_fp16.kiln) is held to the bound each model's meta.json
states. PyTorch and kiln-runner are stand-ins, so this runs anywhere in
well under a second."""
import contextlib
import io
import os
import subprocess
import sys
import tempfile
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "bench"))


class Model:
    def __init__(self, name):
        self.name = name

    def cuda(self):
        return self

    def to(self, dtype):
        self.dtype = dtype
        return self

    def __call__(self, x):
        return x


def fake_torch():
    torch = types.ModuleType("torch")
    torch.no_grad = contextlib.nullcontext
    torch.cuda = types.SimpleNamespace(synchronize=lambda: None)
    torch.float16, torch.bfloat16 = "float16", "bfloat16"

    def compile(model, mode=None):
        if model.name == "a":
            raise RuntimeError("inductor cannot build this model\nsecond line")
        return model

    torch.compile = compile
    return torch


def main():
    sys.modules["torch"] = fake_torch()
    import cuda_models

    y = np.arange(6, dtype=np.float32)
    with tempfile.TemporaryDirectory() as bundle:
        for name in "abc":
            os.makedirs(os.path.join(bundle, name))
            open(os.path.join(bundle, name, "program.kiln"), "wb").close()
            y.tofile(os.path.join(bundle, name, "expected_0.bin"))
            y.tofile(os.path.join(bundle, name, "torch_0.bin"))

        def runner_ms(runner, case, out_dir, runs, program="program.kiln"):
            if case.endswith("c"):
                raise subprocess.CalledProcessError(1, runner, output="", stderr="cuda: device lost")
            return 2.0, y

        cuda_models.runner_ms = runner_ms
        cuda_models.model_and_input = lambda name: (Model(name), Model("x"))
        args = types.SimpleNamespace(bundle=bundle, models="", runner="kiln-runner", runs=3,
                                     workdir=os.path.join(bundle, "work"), no_torch=False, tolerance=1e-4,
                                     program="program.kiln", device="cuda:0", load_only=False)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = cuda_models.run(args)
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in out.getvalue().splitlines() if line.startswith("| ") and not line.startswith("| model")}
    failures = []
    if status != 1:
        failures.append(f"exit status {status}, expected 1 (model c failed)")
    if sorted(rows) != ["a", "b", "c"]:
        failures.append(f"rows {sorted(rows)}, expected a, b, c")
    else:
        if rows["a"][0] != "2.000" or rows["a"][3] == "nan" or rows["a"][4] != "nan":
            failures.append(f"row a {rows['a']}: kiln and eager figures, compile nan expected")
        if "nan" in rows["b"]:
            failures.append(f"row b {rows['b']}: every figure expected")
        if rows["c"][0] != "failed":
            failures.append(f"row c {rows['c']}: marked failed expected")
    if "torch.compile failed: RuntimeError: inductor cannot build this model" not in err.getvalue():
        failures.append("the compile failure is not named on stderr")
    if "cuda: device lost" not in err.getvalue():
        failures.append("kiln-runner's failure is not named on stderr")
    # A 16-bit program: each model checked against the bound its bundle's
    # meta.json states (b within it, a outside it), PyTorch run in the same.
    with tempfile.TemporaryDirectory() as bundle:
        for name, bound in [("a", 1e-3), ("b", 1e-1)]:
            os.makedirs(os.path.join(bundle, name))
            open(os.path.join(bundle, name, "program_fp16.kiln"), "wb").close()
            y.tofile(os.path.join(bundle, name, "expected_0.bin"))
            y.tofile(os.path.join(bundle, name, "torch_0.bin"))
            with open(os.path.join(bundle, name, "meta.json"), "w") as f:
                f.write('{"tolerance": {"fp16": %g}}' % bound)
        cuda_models.runner_ms = lambda runner, case, out_dir, runs, program="program.kiln": (2.0, y * 1.01)
        args.bundle, args.program = bundle, "program_fp16.kiln"
        out16, err16 = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out16), contextlib.redirect_stderr(err16):
            status16 = cuda_models.run(args)
    if status16 != 1 or "outside the bound stated for each of kiln on the CPU: a\n" not in err16.getvalue() or \
            "(fp16)" not in out16.getvalue():
        failures.append(f"16-bit run: status {status16}, expected 1 for a alone outside its bound; "
                        f"{out16.getvalue()} {err16.getvalue()}")
    for f in failures:
        print("FAIL:", f)
    print(out.getvalue())
    print(err.getvalue())
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
