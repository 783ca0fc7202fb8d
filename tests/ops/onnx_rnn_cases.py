#!/usr/bin/env python3
"""RNN, GRU and LSTM cases the ONNX node tests leave out, checked against NumPy.

The node tests cover forward RNN/GRU/LSTM with default activations; these
one-node models cover the rest of what kiln implements: reverse and
bidirectional directions, layout 1, every optional input (B, initial_h,
initial_c, P) and output (Y, Y_h, Y_c, each present or absent), every gate
activation ONNX allows with activation_alpha/beta, clip, GRU's
linear_before_reset 0 and 1, LSTM's input_forget, hidden_size left out, an
empty sequence and an empty batch, and sequence_lens as a constant (all seq_length, or varied: rows shorter than
the sequence, including an empty one). Weights come both as initializers and
as graph inputs. The reference below follows the ONNX operator definitions in
float64; `kiln plan` + `kiln run` must match it within 1e-5 relative to each
output's scale, planned both with packing scratch (the packed GEMM) and with
--no-packing (plain loops).

A sequence_lens computed at run time, and models with wrong attributes or
shapes, must be refused by `kiln plan` with one line naming the node and
the input or attribute at fault.

usage: onnx_rnn_cases.py --kiln PATH/TO/kiln --workdir DIR [--only NAME]
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from kiln_checks import expect, finish, test_args  # noqa: E402
from onnx_cases import check_run, plan_and_run, plan_only, run_each  # noqa: E402


TOLERANCE = 1e-5
RNG = np.random.default_rng(21)

# name: (function of x, alpha, beta; default alpha or None; default beta or None)
ACTIVATIONS = {
    "Sigmoid": (lambda x, a, b: 1 / (1 + np.exp(-x)), None, None),
    "Tanh": (lambda x, a, b: np.tanh(x), None, None),
    "Relu": (lambda x, a, b: np.maximum(x, 0), None, None),
    "Affine": (lambda x, a, b: a * x + b, 1.0, 0.0),
    "LeakyRelu": (lambda x, a, b: np.where(x < 0, a * x, x), 0.01, None),
    "ThresholdedRelu": (lambda x, a, b: np.where(x > a, x, 0), 1.0, None),
    "ScaledTanh": (lambda x, a, b: a * np.tanh(b * x), 1.0, 1.0),
    "HardSigmoid": (lambda x, a, b: np.clip(a * x + b, 0, 1), 0.2, 0.5),
    "Elu": (lambda x, a, b: np.where(x < 0, a * (np.exp(x) - 1), x), 1.0, None),
    "Softsign": (lambda x, a, b: x / (1 + np.abs(x)), None, None),
    "Softplus": (lambda x, a, b: np.log1p(np.exp(x)), None, None),
}
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
DEFAULT_ACTIVATIONS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}


def activation_functions(op, dirs, names, alphas, betas):
    """Each activation as a function of x; alpha/beta consumed in order by
    the functions that take them."""
    names = list(names) if names else DEFAULT_ACTIVATIONS[op] * dirs
    alphas, betas = list(alphas), list(betas)
    out = []
    for name in names:
        fn, alpha, beta = ACTIVATIONS[name]
        if alpha is not None and alphas:
            alpha = alphas.pop(0)
        if beta is not None and betas:
            beta = betas.pop(0)
        out.append(lambda x, fn=fn, alpha=alpha, beta=beta: fn(x, alpha, beta))
    return out


def reference(op, x, w, r, b=None, lens=None, h0=None, c0=None, p=None, direction="forward", layout=0,
              activations=(), alphas=(), betas=(), clip=None, linear_before_reset=0, input_forget=0):
    """Y, Y_h, Y_c (Y_c None except for LSTM) as the ONNX definitions compute them."""
    f64 = lambda a: None if a is None else a.astype(np.float64)  # noqa: E731
    x, w, r, b, h0, c0, p = map(f64, (x, w, r, b, h0, c0, p))
    if layout == 1:
        x = x.transpose(1, 0, 2)
        h0 = None if h0 is None else h0.transpose(1, 0, 2)
        c0 = None if c0 is None else c0.transpose(1, 0, 2)
    seq, batch, _ = x.shape
    dirs, hidden = w.shape[0], r.shape[2]
    acts = activation_functions(op, dirs, activations, alphas, betas)
    per = len(DEFAULT_ACTIVATIONS[op])
    cl = (lambda v: np.clip(v, -clip, clip)) if clip else (lambda v: v)
    y = np.zeros((seq, dirs, batch, hidden))
    y_h = np.zeros((dirs, batch, hidden))
    y_c = np.zeros((dirs, batch, hidden))
    for d in range(dirs):
        f, g, h_act = (acts[d * per:(d + 1) * per] + [None, None])[:3]
        reverse = direction == "reverse" or d == 1
        wb, rb = (b[d][:GATES[op] * hidden], b[d][GATES[op] * hidden:]) if b is not None else (0, 0)
        wb, rb = np.broadcast_to(wb, GATES[op] * hidden), np.broadcast_to(rb, GATES[op] * hidden)
        for row in range(batch):
            n = seq if lens is None else int(lens[row])
            h = np.zeros(hidden) if h0 is None else h0[d, row].copy()
            c = np.zeros(hidden) if c0 is None else c0[d, row].copy()
            for t in (range(n - 1, -1, -1) if reverse else range(n)):
                xw = w[d] @ x[t, row]
                H = hidden
                if op == "RNN":
                    h = f(cl(xw + r[d] @ h + wb + rb))
                elif op == "GRU":
                    rh = r[d] @ h
                    z = f(cl(xw[:H] + rh[:H] + wb[:H] + rb[:H]))
                    rr = f(cl(xw[H:2 * H] + rh[H:2 * H] + wb[H:2 * H] + rb[H:2 * H]))
                    if linear_before_reset:
                        cand = g(cl(xw[2 * H:] + rr * (rh[2 * H:] + rb[2 * H:]) + wb[2 * H:]))
                    else:
                        cand = g(cl(xw[2 * H:] + r[d][2 * H:] @ (rr * h) + rb[2 * H:] + wb[2 * H:]))
                    h = (1 - z) * cand + z * h
                else:
                    pre = xw + r[d] @ h + wb + rb
                    pi, po, pf = (p[d][:H], p[d][H:2 * H], p[d][2 * H:]) if p is not None else (0, 0, 0)
                    i = f(cl(pre[:H] + pi * c))
                    fg = 1 - i if input_forget else f(cl(pre[2 * H:3 * H] + pf * c))
                    c = fg * c + i * g(cl(pre[3 * H:]))
                    o = f(cl(pre[H:2 * H] + po * c))
                    h = o * h_act(c)
                y[t, d, row] = h
            y_h[d, row], y_c[d, row] = h, c
    if layout == 1:
        y, y_h, y_c = y.transpose(2, 0, 1, 3), y_h.transpose(1, 0, 2), y_c.transpose(1, 0, 2)
    f32 = lambda a: a.astype(np.float32)  # noqa: E731
    return f32(y), f32(y_h), (f32(y_c) if op == "LSTM" else None)


def randn(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def build(op, seq, batch, input_size, hidden, direction="forward", layout=0, bias=True, lens=None,
          initial=False, peepholes=False, outputs=("Y", "Y_h", "Y_c"), weights_as_inputs=False,
          lens_as_input=False, omit_hidden_size=False, **attrs):
    """One-node model, its graph inputs in order, and the expected outputs."""
    dirs = 2 if direction == "bidirectional" else 1
    gates = GATES[op]
    x = randn(*((batch, seq, input_size) if layout else (seq, batch, input_size)))
    arrays = {"X": x, "W": randn(dirs, gates * hidden, input_size, scale=0.5),
              "R": randn(dirs, gates * hidden, hidden, scale=0.5)}
    state = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
    if bias:
        arrays["B"] = randn(dirs, 2 * gates * hidden, scale=0.5)
    if lens is not None:
        arrays["sequence_lens"] = np.array(lens, np.int32)
    if initial:
        arrays["initial_h"] = randn(*state)
        if op == "LSTM":
            arrays["initial_c"] = randn(*state)
    if peepholes:
        arrays["P"] = randn(dirs, 3 * hidden, scale=0.5)
    order = ["X", "W", "R", "B", "sequence_lens", "initial_h"] + (["initial_c", "P"] if op == "LSTM" else [])
    node_inputs = [n if n in arrays else "" for n in order]
    while node_inputs and not node_inputs[-1]:
        node_inputs.pop()
    known = [n for n in order if n in arrays and n not in ("X", "initial_h", "initial_c")]
    if weights_as_inputs:
        known = [n for n in known if n == "sequence_lens"]
    if lens_as_input:
        known = [n for n in known if n != "sequence_lens"]
    graph_inputs = [n for n in order if n in arrays and n not in known]
    ref_attrs = {k: v for k, v in attrs.items()}
    y, y_h, y_c = reference(op, x, arrays["W"], arrays["R"], arrays.get("B"), arrays.get("sequence_lens"),
                            arrays.get("initial_h"), arrays.get("initial_c"), arrays.get("P"), direction, layout,
                            ref_attrs.pop("activations", ()), ref_attrs.pop("activation_alpha", ()),
                            ref_attrs.pop("activation_beta", ()), ref_attrs.pop("clip", None),
                            ref_attrs.pop("linear_before_reset", 0), ref_attrs.pop("input_forget", 0))
    results = {"Y": y, "Y_h": y_h, "Y_c": y_c}
    all_outputs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node_outputs = [n if n in outputs else "" for n in all_outputs]
    while node_outputs and not node_outputs[-1]:
        node_outputs.pop()
    node_attrs = dict(attrs)
    if not omit_hidden_size:
        node_attrs["hidden_size"] = hidden
    if direction != "forward":
        node_attrs["direction"] = direction
    if layout:
        node_attrs["layout"] = layout
    node = helper.make_node(op, node_inputs, node_outputs, name=f"{op.lower()}_node", **node_attrs)
    expected = {n: results[n] for n in node_outputs if n}
    types = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int32): TensorProto.INT32}
    graph = helper.make_graph(
        [node], "case",
        [helper.make_tensor_value_info(n, types[arrays[n].dtype], arrays[n].shape) for n in graph_inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape) for n, a in expected.items()],
        [numpy_helper.from_array(arrays[n], n) for n in known])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14 if layout else 13)])
    return m, [arrays[n] for n in graph_inputs], expected


CASES = {
    # Every input and output, both directions, batch first.
    "lstm_bidirectional_layout1_everything": dict(
        op="LSTM", seq=5, batch=3, input_size=4, hidden=6, direction="bidirectional", layout=1, initial=True,
        peepholes=True),
    "lstm_reverse_input_forget_clip": dict(
        op="LSTM", seq=6, batch=2, input_size=3, hidden=5, direction="reverse", input_forget=1, clip=0.7,
        initial=True, outputs=("Y_h", "Y_c")),
    "lstm_activations_alpha_beta": dict(
        op="LSTM", seq=4, batch=2, input_size=3, hidden=4, direction="bidirectional",
        activations=["HardSigmoid", "ScaledTanh", "Elu", "Sigmoid", "Affine", "Softsign"],
        activation_alpha=[0.3, 0.9, 0.7, 1.2], activation_beta=[0.4, 1.1, -0.2], outputs=("Y",)),
    "lstm_weights_as_inputs_only_y_c": dict(
        op="LSTM", seq=3, batch=2, input_size=4, hidden=3, weights_as_inputs=True, peepholes=True,
        outputs=("Y_c",)),
    "gru_reset_before_product_bidirectional": dict(
        op="GRU", seq=5, batch=3, input_size=4, hidden=5, direction="bidirectional", linear_before_reset=0,
        initial=True),
    "gru_linear_before_reset_reverse_layout1": dict(
        op="GRU", seq=6, batch=2, input_size=3, hidden=4, direction="reverse", linear_before_reset=1, layout=1,
        initial=True, clip=1.0),
    "gru_activations": dict(
        op="GRU", seq=4, batch=2, input_size=3, hidden=4, activations=["LeakyRelu", "Softplus"],
        activation_alpha=[0.2], bias=False),
    "gru_no_hidden_size_attribute": dict(
        op="GRU", seq=3, batch=2, input_size=3, hidden=4, omit_hidden_size=True, outputs=("Y",)),
    "rnn_relu_thresholded_bidirectional": dict(
        op="RNN", seq=5, batch=2, input_size=3, hidden=4, direction="bidirectional",
        activations=["Relu", "ThresholdedRelu"], activation_alpha=[0.1], initial=True),
    "rnn_affine_reverse_no_bias": dict(
        op="RNN", seq=4, batch=3, input_size=2, hidden=3, direction="reverse", bias=False,
        activations=["Affine"], activation_alpha=[0.5], activation_beta=[0.1], weights_as_inputs=True),
    "rnn_sigmoid_softsign_clip": dict(
        op="RNN", seq=4, batch=2, input_size=3, hidden=3, direction="bidirectional",
        activations=["Sigmoid", "Softsign"], clip=0.5),
    # Empty sequences and batches: Y is empty, Y_h and Y_c are the initial state.
    "lstm_empty_sequence": dict(
        op="LSTM", seq=0, batch=2, input_size=3, hidden=4, direction="bidirectional", initial=True),
    "gru_empty_batch": dict(op="GRU", seq=3, batch=0, input_size=3, hidden=4, layout=1),
    # sequence_lens: all seq_length (dropped when planning), and varied rows.
    "lstm_sequence_lens_full": dict(
        op="LSTM", seq=4, batch=3, input_size=3, hidden=4, lens=[4, 4, 4], initial=True),
    "lstm_sequence_lens_varied_bidirectional": dict(
        op="LSTM", seq=6, batch=4, input_size=3, hidden=5, direction="bidirectional", lens=[6, 2, 0, 4],
        initial=True, peepholes=True),
    "gru_sequence_lens_varied_reverse_layout1": dict(
        op="GRU", seq=5, batch=3, input_size=2, hidden=4, direction="reverse", layout=1, lens=[3, 5, 1],
        linear_before_reset=1),
    "gru_sequence_lens_varied_reset_first_y_h_only": dict(
        op="GRU", seq=5, batch=3, input_size=2, hidden=3, lens=[2, 5, 4], initial=True, outputs=("Y_h",)),
    "rnn_sequence_lens_varied_bidirectional": dict(
        op="RNN", seq=5, batch=3, input_size=3, hidden=4, direction="bidirectional", lens=[1, 5, 3],
        weights_as_inputs=True),
}


# Models kiln plan must refuse with one line naming the node and what is
# wrong: (op, attributes, sequence_lens or None, W's shape, what the message names).
REFUSALS = {
    "direction": ("LSTM", dict(hidden_size=3, direction="sideways"), None, (1, 12, 2), "'direction'"),
    "hidden_size_zero": ("GRU", dict(hidden_size=0), None, (1, 9, 2), "'hidden_size'"),
    "hidden_size_huge": ("RNN", dict(hidden_size=1 << 40), None, (1, 3, 2), "'hidden_size'"),
    "hidden_size_mismatch": ("LSTM", dict(hidden_size=4), None, (1, 12, 2), "hidden_size"),
    "activation_unknown": ("LSTM", dict(hidden_size=3, activations=["Sigmoid", "Swish", "Tanh"]), None,
                           (1, 12, 2), "'activations'"),
    "activation_count": ("GRU", dict(hidden_size=3, activations=["Sigmoid"]), None, (1, 9, 2), "'activations'"),
    "clip_negative": ("RNN", dict(hidden_size=3, clip=-1.0), None, (1, 3, 2), "'clip'"),
    "linear_before_reset": ("GRU", dict(hidden_size=3, linear_before_reset=2), None, (1, 9, 2),
                            "'linear_before_reset'"),
    "input_forget": ("LSTM", dict(hidden_size=3, input_forget=-1), None, (1, 12, 2), "'input_forget'"),
    "directions_of_w": ("LSTM", dict(hidden_size=3, direction="bidirectional"), None, (1, 12, 2), "'direction'"),
    "sequence_lens_too_long": ("LSTM", dict(hidden_size=3), [5, 1], (1, 12, 2), "sequence_lens"),
    "sequence_lens_shape": ("GRU", dict(hidden_size=3), [4], (1, 9, 2), "sequence_lens"),
}


def refusal_model(op, attrs, lens, w_shape):
    """X [4, 2, 2] through one `op` node named bad_node."""
    hidden = w_shape[1] // GATES[op]
    inits = [numpy_helper.from_array(np.zeros(w_shape, np.float32), "W"),
             numpy_helper.from_array(np.zeros((1, w_shape[1], hidden), np.float32), "R")]
    inputs = ["X", "W", "R"]
    if lens is not None:
        inits.append(numpy_helper.from_array(np.array(lens, np.int32), "L"))
        inputs += ["", "L"]
    node = helper.make_node(op, inputs, ["Y", "Y_h"], name="bad_node", **attrs)
    graph = helper.make_graph(
        [node], "refusal", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [4, 2, 2])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["a", "b", "c", "d"]),
         helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, ["e", "f", "g"])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def run_case(name, kiln, workdir, packing):
    m, inputs, expected = build(**CASES[name])
    name += "" if packing else "_no_packing"
    run = plan_and_run(name, m, inputs, kiln, workdir, () if packing else ("--no-packing",))
    return check_run(run, name, workdir, list(expected.items()), TOLERANCE)


def main():
    args = test_args(with_only=True)
    for packing in (True, False):
        run_each(CASES, args.only, lambda name: run_case(name, args.kiln, args.workdir, packing),
                 lambda name: name + ("" if packing else " --no-packing"))
    if not args.only or args.only == "run_time_sequence_lens":
        m, _, _ = build("GRU", 4, 2, 3, 3, lens=[4, 2], lens_as_input=True, outputs=("Y_h",))
        status, message = plan_only(args.kiln, m, os.path.join(args.workdir, "run_time_sequence_lens.onnx"))
        expect("run_time_sequence_lens refused naming node and input",
               status != 0 and len(message.splitlines()) == 1 and "gru_node" in message and
               "sequence_lens" in message, f"status {status}, stderr: {message}")
    for name, (op, attrs, lens, w_shape, names) in REFUSALS.items():
        if args.only and name != args.only:
            continue
        status, message = plan_only(args.kiln, refusal_model(op, attrs, lens, w_shape),
                                       os.path.join(args.workdir, f"refusal_{name}.onnx"))
        expect(f"refusal {name}", status == 1 and len(message.splitlines()) == 1 and
               "'bad_node'" in message and names in message, f"status {status}, stderr: {message}")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
