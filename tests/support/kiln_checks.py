"""What the Python tests that drive the kiln CLI share: their command line
(--kiln, --workdir, and --only for the ones that run named cases), PASS and
FAIL lines, running kiln, and the exit status.

A test script puts this folder on sys.path and imports what it needs:

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
    from kiln_checks import expect, finish, run, test_args
"""
import argparse
import os
import subprocess

failures = []


def test_args(with_only=False, extra=()):
    """Parses --kiln and --workdir (and --only NAME, and each (option,
    help) of `extra`, optional), creating the workdir."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--kiln", required=True, help="the kiln binary")
    parser.add_argument("--workdir", required=True, help="where the test writes its files")
    if with_only:
        parser.add_argument("--only", help="run this one case")
    for option, text in extra:
        parser.add_argument(option, help=text)
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    return args


def run(kiln, *args):
    """Runs kiln; returns (exit status, stdout, stderr)."""
    p = subprocess.run([kiln, *args], capture_output=True, text=True, errors="replace")
    return p.returncode, p.stdout, p.stderr


def expect(name, cond, detail=""):
    """Prints one PASS or FAIL line (with `detail` on failure) and records it."""
    print(("PASS " if cond else "FAIL ") + name + ("" if cond else f": {detail}"), flush=True)
    if not cond:
        failures.append(name)
    return cond


def finish(skipped=0):
    """Prints the count and returns the exit status for sys.exit()."""
    print(f"{len(failures)} failure(s)" + (f", {skipped} skipped" if skipped else ""))
    return 1 if failures else 0


def calibrated(model, shape):
    """A torch model with its BatchNorm running statistics taken from a few
    random batches of `shape` (as a trained model's are: activations of unit
    scale). It is left in training mode: the caller calls eval()."""
    import torch  # only the model tests need it
    model.train()
    with torch.no_grad():
        for _ in range(3):
            model(torch.randn(4, *shape[1:]))
    return model


def export_model(build, shape, opset, base):
    """The model build(shape) in eval mode, seeded, exported to BASE.onnx
    (input "x", output "y") with a random input of `shape` saved as
    BASE_x.npy; returns both paths."""
    import numpy as np  # only the model tests need them
    import torch
    torch.manual_seed(0)
    model = build(shape).eval()
    x = torch.randn(*shape)
    onnx_path, inp = base + ".onnx", base + "_x.npy"
    torch.onnx.export(model, x, onnx_path, opset_version=opset, input_names=["x"], output_names=["y"])
    np.save(inp, x.numpy())
    return onnx_path, inp
