#!/usr/bin/env python3
"""Signal-processing cases the ONNX node tests leave out, checked against NumPy.

The node tests cover each window at size 10, one mel matrix, DFT along two
axes at length 10 and STFT at one frame length. These one-node models cover
the rest: the three windows periodic and symmetric at sizes 1, 2, 7 and 64
with output_datatype float64, float16 and int32 (the ONNX function body's
float32 arithmetic, reproduced in NumPy); mel matrices for an even and an
odd dft_length with a non-zero lower edge (the reference's integer bin
arithmetic); DFT against numpy.fft at lengths 1, 2, 7, 13, 16, 64, 97,
100, 128 and 256 (radix-2 FFT and direct sum), real, complex and inverse,
dft_length padding and cutting, the last signal axis, onesided for even
and odd lengths; STFT with a window, without one, at a length that is not
a power of two, on a complex signal. Float outputs must match within 1e-5
relative to the output's largest magnitude (float16 within its own
precision), integer outputs exactly.

Refusals: a window size, a mel argument, a dft_length or a frame_step
computed at run time, a mel range beyond the DFT's bins, a onesided DFT of
a complex input and a window whose length is not frame_length must be
refused by `kiln plan` with one line naming the node (and, for a run-time
value, the input and --freeze).

usage: onnx_signal_cases.py --kiln PATH/TO/kiln --workdir DIR [--only NAME]
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from kiln_checks import expect, finish, test_args  # noqa: E402
from onnx_cases import check_case, plan_only, run_each  # noqa: E402
from onnx_op_cases import ONNX_TYPES, model  # noqa: E402

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


def to_onnx_complex(z, real):
    """[..., n] complex -> [..., n, 1] (real) or [..., n, 2]."""
    if real:
        return z.real.astype(np.float32)[..., None]
    return np.stack([z.real, z.imag], axis=-1).astype(np.float32)


def case_dft_lengths():
    # Powers of two (radix-2), primes and others (direct sum), 1; real and
    # complex input; forward and inverse.
    nodes, inputs, want = [], {}, {}
    for n in (1, 2, 7, 13, 16, 64, 97, 100, 128, 256):
        for kind in ("real", "complex", "inverse"):
            z = RNG.standard_normal((2, n, 3)) + (1j * RNG.standard_normal((2, n, 3)) if kind != "real" else 0)
            x = to_onnx_complex(z, kind == "real")
            zx = x[..., 0].astype(np.float64) + (1j * x[..., 1] if kind != "real" else 0)
            name = f"{kind}_{n}"
            inputs["x_" + name] = x
            nodes.append(helper.make_node("DFT", ["x_" + name], [name], inverse=int(kind == "inverse")))
            want[name] = to_onnx_complex(np.fft.ifft(zx, axis=1) if kind == "inverse" else np.fft.fft(zx, axis=1),
                                         False)
    return model(nodes, inputs, want), list(inputs.values())


def case_dft_length_axis_onesided():
    # dft_length padding and cutting, the last signal axis (as 2 and -2),
    # onesided for an even and an odd length.
    x = RNG.standard_normal((2, 10, 12, 1)).astype(np.float32)
    c = RNG.standard_normal((3, 9, 2)).astype(np.float32)
    xz = x[..., 0].astype(np.float64)
    cz = c[..., 0].astype(np.float64) + 1j * c[..., 1]
    nodes = [helper.make_node("DFT", ["x", "len16"], ["padded"], axis=1),
             helper.make_node("DFT", ["x", "len7"], ["cut"], axis=2),
             helper.make_node("DFT", ["x"], ["onesided_even"], axis=-2, onesided=1),
             helper.make_node("DFT", ["x", "len7"], ["onesided_odd"], axis=1, onesided=1),
             helper.make_node("DFT", ["c", "len16"], ["complex_padded"], axis=1, inverse=1)]
    want = {"padded": to_onnx_complex(np.fft.fft(xz, 16, axis=1), False),
            "cut": to_onnx_complex(np.fft.fft(xz, 7, axis=2), False),
            "onesided_even": to_onnx_complex(np.fft.rfft(xz, axis=2), False),
            "onesided_odd": to_onnx_complex(np.fft.rfft(xz, 7, axis=1), False),
            "complex_padded": to_onnx_complex(np.fft.ifft(cz, 16, axis=1), False)}
    inits = [("len16", np.array(16, np.int64)), ("len7", np.array(7, np.int32))]
    return model(nodes, {"x": x, "c": c}, want, inits), [x, c]


def stft(signal, step, n, window, onesided):
    z = signal[..., 0].astype(np.float64) + (1j * signal[..., 1] if signal.shape[-1] == 2 else 0)
    w = np.ones(n) if window is None else window.astype(np.float64)
    frames = (z.shape[1] - n) // step + 1
    out = np.stack([np.fft.fft(z[:, f * step:f * step + n] * w, axis=1) for f in range(frames)], axis=1)
    return to_onnx_complex(out[:, :, :n // 2 + 1] if onesided else out, False)


def case_stft():
    # A Hann window of 32 (radix-2), a frame_length of 25 without a window
    # (direct sum), a complex signal (two-sided), frames that leave a tail.
    s = RNG.standard_normal((2, 203, 1)).astype(np.float32)
    cs = RNG.standard_normal((1, 90, 2)).astype(np.float32)
    hann = window("HannWindow", 32, 1)
    w20 = RNG.random(20).astype(np.float32)
    nodes = [helper.make_node("STFT", ["s", "step10", "hann"], ["hann_frames"]),
             helper.make_node("STFT", ["s", "step7", "", "len25"], ["plain_frames"], onesided=0),
             helper.make_node("STFT", ["cs", "step7", "w20", "len20"], ["complex_frames"], onesided=0)]
    want = {"hann_frames": stft(s, 10, 32, hann, True), "plain_frames": stft(s, 7, 25, None, False),
            "complex_frames": stft(cs, 7, 20, w20, False)}
    inits = [("step10", np.array(10, np.int64)), ("step7", np.array(7, np.int32)),
             ("len25", np.array(25, np.int64)), ("len20", np.array(20, np.int64))]
    return model(nodes, {"s": s, "cs": cs, "hann": hann, "w20": w20}, want, inits), [s, cs, hann, w20]


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


def refusal_dft_length_at_run_time():
    x, n = randn(1, 8, 1), np.array(8, np.int64)
    node = helper.make_node("DFT", ["x", "n"], ["y"], name="dft")
    return model([node], {"x": x, "n": n}, {"y": randn(1, 8, 2)})[0], ["dft", "dft_length", "'n'", "--freeze"]


def refusal_dft_onesided_complex():
    x = randn(1, 8, 2)
    node = helper.make_node("DFT", ["x"], ["y"], name="dft", onesided=1)
    return model([node], {"x": x}, {"y": randn(1, 5, 2)})[0], ["dft", "onesided", "complex"]


def refusal_stft_step_at_run_time():
    s, step, w = randn(1, 64, 1), np.array(8, np.int64), randn(16)
    node = helper.make_node("STFT", ["s", "step", "w"], ["y"], name="stft")
    return model([node], {"s": s, "step": step, "w": w}, {"y": randn(1, 7, 9, 2)})[0], \
        ["stft", "frame_step", "'step'", "--freeze"]


def refusal_stft_window_length():
    s, w = randn(1, 64, 1), randn(16)
    node = helper.make_node("STFT", ["s", "step", "w", "len"], ["y"], name="stft")
    return model([node], {"s": s, "w": w}, {"y": randn(1, 7, 9, 2)},
                 [("step", np.array(8, np.int64)), ("len", np.array(12, np.int64))])[0], \
        ["stft", "frame_length 12", "window's length 16"]


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


REFUSALS = {name[8:]: fn for name, fn in sorted(globals().items()) if name.startswith("refusal_")}


def main():
    args = test_args(with_only=True)
    run_each(CASES, args.only, lambda name: check_case(name, CASES[name](), args.kiln, args.workdir, TOLERANCE))
    for name in REFUSALS:
        if args.only and name != args.only:
            continue
        m, words = REFUSALS[name]()
        status, message = plan_only(args.kiln, m, os.path.join(args.workdir, name + ".onnx"))
        expect(f"{name} refused by kiln plan",
               status != 0 and len(message.splitlines()) == 1 and all(w in message for w in words),
               f"status {status}, stderr: {message}")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
