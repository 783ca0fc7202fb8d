#!/usr/bin/env python3
"""Signal-processing cases the ONNX node tests leave out, checked against NumPy.

The node tests cover each window at size 10, one mel matrix, DFT along two
axes at length 10 and STFT at one frame length. These one-node models cover
the rest: the three windows periodic and symmetric at sizes 1, 2, 7 and 64
with output_datatype float64, float16 and int32 (the ONNX function body's
float32 arithmetic, reproduced in NumPy); mel matrices for an even and an
odd dft_length with a non-zero lower edge (the reference's integer bin
arithmetic). Float outputs must match within 1e-5 relative to the
output's largest magnitude (float16 within its own precision), integer
outputs exactly.

Refusals: a window size or a mel argument computed at run time, and a mel
range beyond the DFT's bins, must be refused by `kiln plan` with one line
naming the node (and, for a run-time value, the input and --freeze).

usage: onnx_signal_cases.py --kiln PATH/TO/kiln --workdir DIR [--only NAME]
"""
import os
import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from kiln_checks import expect, finish, test_args  # noqa: E402
from onnx_op_cases import ONNX_TYPES, model, plan_and_run  # noqa: E402

ONNX_TYPES.setdefault(np.dtype(np.float16), TensorProto.FLOAT16)


TOLERANCE = 1e-5
RNG = np.random.default_rng(17)

WINDOWS = {  # a0, a1, a2 as float32, ONNX's function bodies
    "HannWindow": (0.5, 0.5, 0.0),
    "HammingWindow": (25 / 46, 21 / 46, 0.0),
    "BlackmanWindow": (0.42, 0.5, 0.08),
}


def window(op, size, periodic):
    a0, a1, a2 = (np.float32(v) for v in WINDOWS[op])
    n = np.float32(size) if periodic else np.float32(size) - np.float32(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        step = np.float32(6.2831854820251465) / n
        angle = np.arange(size, dtype=np.float32) * step
        return a0 - a1 * np.cos(angle) + a2 * np.cos(angle * np.float32(2))


def case_windows():
    nodes, want, inits = [], {}, []
    for op in WINDOWS:
        for size in (1, 2, 7, 64):
            for periodic in (1, 0):
                if size == 1 and not periodic:
                    continue  # ONNX's function divides by zero (NaN)
                name = f"{op}_{size}_{periodic}"
                inits.append((f"size_{name}", np.array(size, np.int64 if size % 2 else np.int32)))
                nodes.append(helper.make_node(op, [f"size_{name}"], [name], periodic=periodic))
                want[name] = window(op, size, periodic)
    # output_datatype: float64, float16, int32 (truncated toward zero).
    nodes.append(helper.make_node("HannWindow", ["size_HannWindow_7_1"], ["hann_f64"],
                                  output_datatype=TensorProto.DOUBLE))
    nodes.append(helper.make_node("BlackmanWindow", ["size_BlackmanWindow_64_0"], ["blackman_f16"], periodic=0,
                                  output_datatype=TensorProto.FLOAT16))
    nodes.append(helper.make_node("HammingWindow", ["size_HammingWindow_7_1"], ["hamming_i32"],
                                  output_datatype=TensorProto.INT32))
    want["hann_f64"] = window("HannWindow", 7, 1).astype(np.float64)
    want["blackman_f16"] = window("BlackmanWindow", 64, 0).astype(np.float16)
    want["hamming_i32"] = window("HammingWindow", 7, 1).astype(np.int32)
    return model(nodes, {}, want, inits), []


def mel_matrix(bands, dft_length, sample_rate, lower, upper):
    """ONNX's reference (onnx/backend/test/case/node/melweightmatrix.py) in float64."""
    points = np.arange(bands + 2)
    low = 2595 * np.log10(1 + lower / 700)
    high = 2595 * np.log10(1 + upper / 700)
    hz = 700 * (np.power(10, (points * ((high - low) / (bands + 2)) + low) / 2595) - 1)
    bins = np.floor((dft_length + 1) * hz / sample_rate).astype(int)
    out = np.zeros((dft_length // 2 + 1, bands))
    for i in range(bands):
        left, center, right = bins[i], bins[i + 1], bins[i + 2]
        if center == left:
            out[center, i] = 1
        else:
            for j in range(left, center + 1):
                out[j, i] = (j - left) / (center - left)
        for j in range(center, right):
            out[j, i] = (right - j) / (right - center)
    return out.astype(np.float32)


def mel_node(name, args, **attrs):
    names = [f"{name}_{a}" for a in ("bands", "length", "rate", "lower", "upper")]
    inits = [(names[0], np.array(args[0], np.int32)), (names[1], np.array(args[1], np.int64)),
             (names[2], np.array(args[2], np.int64)), (names[3], np.array(args[3], np.float32)),
             (names[4], np.array(args[4], np.float32))]
    return helper.make_node("MelWeightMatrix", names, [name], **attrs), inits


def case_mel_weight_matrix():
    nodes, want, inits = [], {}, []
    for name, args in (("even", (10, 64, 16000, 20.0, 8000.0)), ("odd", (6, 31, 8000, 300.0, 3500.0)),
                       ("narrow", (12, 512, 22050, 100.0, 400.0))):
        node, i = mel_node(name, args)
        nodes.append(node)
        inits += i
        want[name] = mel_matrix(*args)
    node, i = mel_node("as_double", (4, 20, 1000, 0.0, 500.0), output_datatype=TensorProto.DOUBLE)
    nodes.append(node)
    inits += i
    want["as_double"] = mel_matrix(4, 20, 1000, 0.0, 500.0).astype(np.float64)
    return model(nodes, {}, want, inits), []


CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith("case_")}


# Models `kiln plan` must refuse: (model, words its one-line message must hold).
def refusal_window_size_at_run_time():
    size = np.array(8, np.int64)
    node = helper.make_node("HannWindow", ["size"], ["w"], name="hann")
    return model([node], {"size": size}, {"w": np.zeros(8, np.float32)})[0], ["hann", "'size'", "--freeze"]


def refusal_mel_rate_at_run_time():
    node, inits = mel_node("m", (4, 16, 1000, 0.0, 500.0))
    node.name = "mel"
    rate = inits.pop(2)
    return model([node], {rate[0]: rate[1]}, {"m": np.zeros((9, 4), np.float32)}, inits)[0], \
        ["mel", "sample_rate", "--freeze"]


def refusal_mel_beyond_bins():
    node, inits = mel_node("m", (4, 15, 1000, 0.0, 1000.0))  # twice the Nyquist frequency
    node.name = "mel"
    return model([node], {}, {"m": np.zeros((8, 4), np.float32)}, inits)[0], ["mel", "beyond the 8 bins"]


REFUSALS = {name[8:]: fn for name, fn in sorted(globals().items()) if name.startswith("refusal_")}


def compare(name, got, want):
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{name}: {got.dtype}{list(got.shape)} != {want.dtype}{list(want.shape)}"
    if want.dtype.kind != "f":
        return "" if np.array_equal(got, want) else f"{name}: values differ"
    if want.size == 0:
        return ""
    tolerance = 1e-3 if want.dtype == np.float16 else TOLERANCE
    g, w = got.astype(np.float64), want.astype(np.float64)
    scale = max(float(np.max(np.abs(w))), 1e-30)
    err = float(np.max(np.abs(g - w))) / scale
    return "" if err <= tolerance else f"{name}: relative error {err:.2e}"


def run_case(name, kiln, workdir):
    (m, expected), inputs = CASES[name]()
    run = plan_and_run(name, m, inputs, kiln, workdir)
    if run.returncode != 0:
        return [f"kiln run failed with status {run.returncode}: {run.stderr.strip()}"]
    base = os.path.join(workdir, name)
    problems = []
    for i, out in enumerate(m.graph.output):
        got = np.load(os.path.join(base + "_out", f"output_{i}.npy"))
        problem = compare(out.name, got, expected[out.name])
        if problem:
            problems.append(problem)
    return problems


def main():
    args = test_args(with_only=True)
    for name in CASES:
        if args.only and name != args.only:
            continue
        try:
            problems = run_case(name, args.kiln, args.workdir)
        except subprocess.CalledProcessError as e:
            problems = [f"{' '.join(e.cmd[:2])} failed with status {e.returncode}"]
        expect(name, not problems, "; ".join(problems))
    for name in REFUSALS:
        if args.only and name != args.only:
            continue
        m, words = REFUSALS[name]()
        path = os.path.join(args.workdir, name + ".onnx")
        with open(path, "wb") as f:
            f.write(m.SerializeToString())
        p = subprocess.run([args.kiln, "plan", path, "-o", path + ".kiln"], capture_output=True, text=True)
        message = p.stderr.strip()
        expect(f"{name} refused by kiln plan",
               p.returncode != 0 and len(message.splitlines()) == 1 and all(w in message for w in words),
               f"status {p.returncode}, stderr: {message}")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
