#!/usr/bin/env python3
"""kiln quantize on models with real signal, checked against the float model
and against ONNX Runtime running the same QDQ file.

Models, trained here with PyTorch on synthetic tasks (fixed seeds):
  mlp    16 -> 64 -> 64 -> 4 (Gemm, ReLU), four classes from a linear and a
         quadratic rule of a Gaussian point
  cnn    16x16 images of stripes (three orientations) or a blob under heavy
         noise: Conv + BatchNorm + ReLU, MaxPool, Conv, Concat of two
         branches, a residual Add, mean, Gemm
  mover  (random weights) the ops that only move data between a DQ and a Q:
         MaxPool, Resize, Pad, Slice, Concat, Transpose, Reshape, Softmax

What is checked:
  - the file is laid out as ONNX Runtime's quantize_static writes it: int8
    weights per output channel behind w_DequantizeLinear, int32 biases whose
    scale is the input's scale times the weight's, ReLU folded into its
    producer, the data-movement ops between a DQ and a Q sharing one scale,
    Softmax's output on [0, 1], the graph output written by y_DequantizeLinear;
  - kiln plans it with every linear op in int8;
  - on a held-out set the quantized model's task accuracy stays within 2
    points of the float model's (and its top-1 within 97% of the float
    model's), for minmax, percentile and entropy calibration and int8
    symmetric activations;
  - kiln and ONNX Runtime give the same outputs within one step of the
    output's quantization (1 LSB), when ONNX Runtime is installed (npm
    onnxruntime-node in KILN_ORT_DIR or ~/.cache/kiln/ort, where
    `scripts/kiln-dev setup` puts it); otherwise those checks are skipped;
  - --exclude keeps a node float; calibration folders of files or of
    subfolders (.npy, .pb); calibration memory does not grow with the
    number of samples; progress on a terminal and none when piped.

    quantize_models.py --kiln KILN --workdir DIR [--ort-dir DIR]
"""
import argparse
import json
import os
import pty
import resource
import subprocess
import sys

import numpy as np
import onnx
import torch
import torch.nn as nn
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from kiln_checks import expect, finish, run  # noqa: E402

skipped = 0


# ---------------------------------------------------------------- the models


def mlp_task(n, g):
    x = torch.randn(n, 16, generator=g)
    a = (x * torch.linspace(-1, 1, 16)).sum(1)
    b = (x[:, :8] ** 2).sum(1) - 8
    return x, (a > 0).long() * 2 + (b > 0).long()


def cnn_task(n, g):
    y = torch.randint(0, 4, (n,), generator=g)
    ii, jj = torch.meshgrid(torch.arange(16.0), torch.arange(16.0), indexing="ij")
    phase = torch.rand(n, generator=g)[:, None, None] * 6.28
    freq = 0.6 + 0.6 * torch.rand(n, generator=g)[:, None, None]
    cy = torch.randint(3, 13, (n,), generator=g)[:, None, None].float()
    cx = torch.randint(3, 13, (n,), generator=g)[:, None, None].float()
    images = torch.stack([torch.sin(freq * ii + phase), torch.sin(freq * jj + phase),
                          torch.sin(freq * (ii + jj) * 0.7 + phase),
                          2 * torch.exp(-((ii - cy) ** 2 + (jj - cx) ** 2) / 6) - 0.5], 1)
    x = images[torch.arange(n), y] + 2.0 * torch.randn(n, 16, 16, generator=g)
    return x[:, None], y


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.c2 = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.ReLU())
        self.a = nn.Conv2d(16, 8, 1)
        self.b = nn.Conv2d(16, 8, 3, padding=1)
        self.c3 = nn.Conv2d(16, 16, 3, padding=1)
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        x = nn.functional.max_pool2d(self.c1(x), 2)
        x = self.c2(x)
        x = torch.cat([self.a(x), torch.relu(self.b(x))], 1)
        x = x + torch.relu(self.c3(x))
        return self.fc(x.mean((2, 3)))


class Mover(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.c3 = nn.Conv2d(3, 8, 1)

    def forward(self, x):
        h = nn.functional.max_pool2d(torch.relu(self.c1(x)), 2)
        h = nn.functional.interpolate(h, scale_factor=2.0, mode="nearest")
        h = nn.functional.pad(h, (1, 1, 1, 1))[:, :, 1:17, 1:17]
        h = torch.cat([self.c2(h), self.c3(x)], 1)
        return torch.softmax(h.permute(0, 2, 3, 1).reshape(-1, 256, 16), -1)


def export(net, shape, path):
    net.eval()
    torch.onnx.export(net, torch.randn(*shape), path, opset_version=13, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "n"}, "y": {0: "n"}})


def train(net, task, steps, batch, lr, g):
    opt = torch.optim.Adam(net.parameters(), lr)
    for _ in range(steps):
        x, y = task(batch, g)
        opt.zero_grad()
        nn.functional.cross_entropy(net(x), y).backward()
        opt.step()


def make_models(work):
    """Each model: (onnx path, input shape of one sample, calibration set, test inputs, test labels)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    models = {}
    mlp = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))
    x, y = mlp_task(4096, g)
    opt = torch.optim.Adam(mlp.parameters(), 1e-2)
    for _ in range(300):
        opt.zero_grad()
        nn.functional.cross_entropy(mlp(x), y).backward()
        opt.step()
    export(mlp, (1, 16), os.path.join(work, "mlp.onnx"))
    cal, _ = mlp_task(256, g)
    test_x, test_y = mlp_task(1000, g)
    models["mlp"] = ((1, 16), cal.numpy(), test_x.numpy(), test_y.numpy())

    cnn = Cnn()
    train(cnn, cnn_task, 200, 128, 3e-3, g)
    export(cnn, (1, 1, 16, 16), os.path.join(work, "cnn.onnx"))
    cal, _ = cnn_task(200, g)
    test_x, test_y = cnn_task(500, g)
    models["cnn"] = ((1, 1, 16, 16), cal.numpy(), test_x.numpy(), test_y.numpy())

    export(Mover(), (1, 3, 16, 16), os.path.join(work, "mover.onnx"))
    models["mover"] = ((1, 3, 16, 16), torch.randn(64, 3, 16, 16, generator=g).numpy(),
                       torch.randn(100, 3, 16, 16, generator=g).numpy(), None)
    for name, (_, cal, _, _) in models.items():
        os.makedirs(os.path.join(work, name + "_cal"), exist_ok=True)
        np.save(os.path.join(work, name + "_cal", "x.npy"), cal.astype(np.float32))
    return models


# --------------------------------------------------------- running the models


def quantize(args, name, shape, out, *options):
    """kiln quantize; (status, stdout + stderr, report dict or None)."""
    work = args.workdir
    report = out + ".json"
    status, stdout, stderr = run(args.kiln, "quantize", os.path.join(work, name + ".onnx"), "--calibration",
                                 os.path.join(work, name + "_cal"), "-o", out, "--report", report,
                                 "--input-shape", "x=" + "x".join(map(str, shape)), *options)
    if status == 0:
        print(stdout)
    return status, stdout + stderr, json.load(open(report)) if status == 0 else None


def run_kiln(args, model, x, tag):
    """Plans `model` for the whole batch `x` and runs it; (output, plan summary)."""
    program = os.path.join(args.workdir, tag + ".kiln")
    status, plan_out, err = run(args.kiln, "plan", model, "-o", program, "--input-shape",
                                "x=" + "x".join(map(str, x.shape)))
    if status != 0:
        raise RuntimeError(plan_out + err)
    x_path = os.path.join(args.workdir, tag + "_x.npy")
    np.save(x_path, x.astype(np.float32))
    out_dir = os.path.join(args.workdir, tag + "_out")
    status, out, err = run(args.kiln, "run", program, "--input", x_path, "--output-dir", out_dir)
    if status != 0:
        raise RuntimeError(out + err)
    return np.load(os.path.join(out_dir, "output_0.npy")), plan_out


def find_ort(arg):
    for d in [arg, os.environ.get("KILN_ORT_DIR"), os.path.expanduser("~/.cache/kiln/ort")]:
        if d and os.path.isdir(os.path.join(d, "node_modules", "onnxruntime-node")):
            return d
    return None


def run_ort(ort_dir, model, x, tag, work):
    x_bin = os.path.join(work, tag + "_ort_in.bin")
    y_bin = os.path.join(work, tag + "_ort_out.bin")
    x.astype(np.float32).tofile(x_bin)
    env = dict(os.environ, NODE_PATH=os.path.join(ort_dir, "node_modules"))
    p = subprocess.run(["node", os.path.join(ROOT, "bench", "models", "ort_runner.js"), model, x_bin,
                        "x".join(map(str, x.shape)), "1", y_bin], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(p.stderr)
    return np.fromfile(y_bin, dtype=np.float32), json.loads(p.stdout)["version"]


def initializers(model):
    return {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}


def output_scale(path):
    return float(initializers(onnx.load(path))["y_scale"])


# ------------------------------------------------------------------ checks


def check_layout(path, symmetric=False):
    """The QDQ layout ONNX Runtime's quantize_static writes (see the docstring)."""
    model = onnx.load(path)
    onnx.checker.check_model(model)
    inits = initializers(model)
    producer = {o: n for n in model.graph.node for o in n.output}
    ok = True
    for node in model.graph.node:
        if node.op_type not in ("Conv", "Gemm"):
            continue
        w_dq, x_dq = producer.get(node.input[1]), producer.get(node.input[0])
        w = node.input[1][:-len("_DequantizeLinear_Output")]
        axis = [a.i for a in w_dq.attribute if a.name == "axis"] if w_dq else []
        ok &= expect(f"{node.name}: weight int8 per channel behind {w}_DequantizeLinear",
                     w_dq is not None and w_dq.name == w + "_DequantizeLinear" and
                     inits[w + "_quantized"].dtype == np.int8 and axis == [0] and
                     inits[w + "_scale"].shape == (inits[w + "_quantized"].shape[0],) and
                     not inits[w + "_zero_point"].any())
        if len(node.input) > 2:
            b = node.input[2]
            scale = inits[b + "_quantized_scale"]
            want = np.float32(inits[x_dq.input[1]]) * inits[w + "_scale"]
            ok &= expect(f"{node.name}: int32 bias, scale = input scale x weight scale",
                         producer[b].op_type == "DequantizeLinear" and inits[b + "_quantized"].dtype == np.int32 and
                         np.array_equal(scale, want))
    relus = [n for n in model.graph.node if n.op_type == "Relu"]
    ok &= expect(f"ReLU {'kept (symmetric)' if symmetric else 'folded into its producer'} ({len(relus)} left)",
                 bool(relus) == symmetric)
    out = producer["y"]
    ok &= expect("the graph output y is written by y_DequantizeLinear",
                 out.op_type == "DequantizeLinear" and out.name == "y_DequantizeLinear")
    return ok


def check_movers(path):
    """MaxPool, Resize, Pad, Slice, Transpose, Reshape between a DQ and a Q of one scale; Concat and Softmax between DQs and a Q."""
    model = onnx.load(path)
    producer = {o: n for n in model.graph.node for o in n.output}
    readers = {}
    for n in model.graph.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    seen = set()
    for node in model.graph.node:
        if node.op_type in ("QuantizeLinear", "DequantizeLinear") or not node.input or node.input[0] not in producer:
            continue
        dq = producer[node.input[0]]
        if dq.op_type != "DequantizeLinear":
            continue
        q = [r for r in readers.get(node.output[0], []) if r.op_type == "QuantizeLinear"]
        if node.op_type in ("MaxPool", "Resize", "Pad", "Slice", "Transpose", "Reshape"):
            seen.add(node.op_type)
            expect(f"{node.op_type} '{node.name}' between a DQ and a Q of the same scale and zero point",
                   len(q) == 1 and q[0].input[1:] == dq.input[1:], f"{dq.input[1:]} vs {q and q[0].input[1:]}")
        elif node.op_type in ("Concat", "Softmax"):
            seen.add(node.op_type)
            expect(f"{node.op_type} reads DQs and feeds a Q",
                   len(q) == 1 and all(producer[i].op_type == "DequantizeLinear" for i in node.input))
    expect(f"every data-movement op of the model is between DQ and Q ({sorted(seen)})",
           seen == {"MaxPool", "Resize", "Pad", "Slice", "Transpose", "Reshape", "Concat", "Softmax"})
    inits = initializers(model)
    expect("Softmax's output quantized on [0, 1] (scale 1/255, zero point 0)",
           abs(float(inits["y_scale"]) - 1 / 255) < 1e-9 and int(inits["y_zero_point"]) == 0)


def check_accuracy(tag, float_out, quant_out, labels):
    f_acc = float((float_out.argmax(-1) == labels).mean())
    q_acc = float((quant_out.argmax(-1) == labels).mean())
    agree = float((float_out.argmax(-1) == quant_out.argmax(-1)).mean())
    expect(f"{tag}: held-out accuracy {q_acc:.3f} quantized vs {f_acc:.3f} float (within 0.02), "
           f"top-1 agreement {agree:.3f} (at least 0.97)", q_acc >= f_acc - 0.02 and agree >= 0.97)


def check_ort(args, ort_dir, tag, path, x, kiln_out):
    global skipped
    if ort_dir is None:
        print(f"SKIP {tag}: kiln against ONNX Runtime: onnxruntime-node not installed "
              "(scripts/kiln-dev setup puts it in ~/.cache/kiln/ort; or set KILN_ORT_DIR)")
        skipped += 1
        return
    ort_out, version = run_ort(ort_dir, path, x, tag, args.workdir)
    lsb = np.abs(kiln_out.ravel() - ort_out) / output_scale(path)
    expect(f"{tag}: kiln and ONNX Runtime {version} within 1 LSB (max {lsb.max():.3f} LSB, "
           f"{100 * (lsb < 0.5).mean():.2f}% equal)", lsb.max() <= 1.0001)


def check_model(args, ort_dir, models, name, variants):
    shape, _, test_x, test_y = models[name]
    float_out, _ = run_kiln(args, os.path.join(args.workdir, name + ".onnx"), test_x, name + "_float")
    for tag, options in variants:
        path = os.path.join(args.workdir, f"{name}_{tag}.onnx")
        status, out, report = quantize(args, name, shape, path, *options)
        if not expect(f"{name} {tag}: kiln quantize {' '.join(options)}", status == 0, out):
            continue
        if name == "mover":
            check_movers(path)
        else:
            check_layout(path, symmetric="--symmetric" in options)
        quant_out, plan = run_kiln(args, path, test_x, f"{name}_{tag}")
        linear = [line for line in plan.splitlines() if "int8:" in line]
        expect(f"{name} {tag}: kiln runs every linear op int8 ({linear[0].strip() if linear else '?'})",
               bool(linear) and "100.0%" in linear[0])
        if name == "mover":
            # The byte movers run on the quantized data, without a float
            # round trip (planner/passes/qdq.cc, fold_passthrough).
            folded = linear[0].split("QDQ folded:")[-1] if linear else ""
            expect(f"{name} {tag}: MaxPool, Slice, Resize, Pad, Transpose and Reshape run on int8 bytes ({folded.strip()})",
                   all(op in folded for op in ("MaxPool", "Slice", "Resize", "Pad", "Transpose", "Reshape")))
        acc = report["accuracy"][0]
        expect(f"{name} {tag}: the report's accuracy on the calibration set (SQNR {acc['sqnr_db']:.1f} dB)",
               acc["sqnr_db"] > 20 and acc.get("top1_agree", 1) >= 0.97 * acc.get("rows", 1))
        if test_y is not None:
            check_accuracy(f"{name} {tag}", float_out, quant_out, test_y)
        check_ort(args, ort_dir, f"{name} {tag}", path, test_x, quant_out)


def check_exclude(args, ort_dir, models):
    shape, _, test_x, _ = models["cnn"]
    conv = next(n.name for n in onnx.load(os.path.join(args.workdir, "cnn.onnx")).graph.node if n.op_type == "Conv")
    path = os.path.join(args.workdir, "cnn_exclude.onnx")
    status, out, report = quantize(args, "cnn", shape, path, "--exclude", conv)
    if not expect(f"--exclude {conv}", status == 0, out):
        return
    model = onnx.load(path)
    node = next(n for n in model.graph.node if n.name == conv)
    inits = initializers(model)
    expect(f"{conv} stays float: its weight is a float initializer, it is listed float",
           node.input[1] in inits and inits[node.input[1]].dtype == np.float32 and report["float_nodes"] == [conv])
    quant_out, plan = run_kiln(args, path, test_x, "cnn_exclude")
    expect("the other linear ops run int8", "5 of 6 linear ops" in plan, plan)
    check_ort(args, ort_dir, "cnn --exclude", path, test_x, quant_out)
    status, out, _ = quantize(args, "cnn", shape, path, "--exclude", "no_such_node")
    expect("--exclude of a node the model lacks is an error", status == 1 and "no node 'no_such_node'" in out, out)


def check_folders(args, models):
    shape, cal, _, _ = models["cnn"]
    for layout in ("pb", "named"):
        folder = os.path.join(args.workdir, "cnn_cal_" + layout)
        for k in range(8):
            sample = os.path.join(folder, f"sample_{k}")
            os.makedirs(sample, exist_ok=True)
            x = cal[k:k + 1].astype(np.float32)
            if layout == "pb":
                open(os.path.join(sample, "input_0.pb"), "wb").write(numpy_helper.from_array(x).SerializeToString())
            else:
                np.save(os.path.join(sample, "x.npy"), x)
        status, out, err = run(args.kiln, "quantize", os.path.join(args.workdir, "cnn.onnx"), "--calibration", folder,
                               "-o", os.path.join(args.workdir, "cnn_folder.onnx"), "--input-shape", "x=1x1x16x16")
        expect(f"a folder of sample subfolders ({layout}): 8 samples", status == 0 and "over 8 samples" in out,
               out + err)
    bad = os.path.join(args.workdir, "bad_cal")
    os.makedirs(bad, exist_ok=True)
    np.save(os.path.join(bad, "x.npy"), np.zeros((4, 3, 16, 16), np.float32))
    status, out, err = run(args.kiln, "quantize", os.path.join(args.workdir, "cnn.onnx"), "--calibration", bad, "-o",
                           os.path.join(args.workdir, "bad.onnx"), "--input-shape", "x=1x1x16x16")
    expect("calibration arrays of the wrong shape are an error naming the file and the input",
           status == 1 and "bad_cal/x.npy: input 0 ('x') has shape [4, 3, 16, 16]" in err, out + err)


def peak_rss_kib(argv):
    """The peak resident set of a child process, through a Python wrapper of its own."""
    code = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:], capture_output=True); "
            "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True).stdout.split()
    return int(out[0]), int(out[1])


def check_bounded_memory(args):
    """Calibration keeps statistics, not activations: 30 times the samples, about the same peak memory."""
    torch.manual_seed(5)
    path = os.path.join(args.workdir, "tall.onnx")
    export(nn.Sequential(nn.Linear(16, 4096), nn.ReLU(), nn.Linear(4096, 4)), (1, 16), path)
    peaks = {}
    for n in (100, 3000):
        folder = os.path.join(args.workdir, f"tall_cal_{n}")
        os.makedirs(folder, exist_ok=True)
        np.save(os.path.join(folder, "x.npy"), np.random.default_rng(n).standard_normal((n, 16), np.float32))
        status, peaks[n] = peak_rss_kib([args.kiln, "quantize", path, "--calibration", folder, "-o",
                                         os.path.join(args.workdir, "tall_q.onnx"), "--input-shape", "x=1x16",
                                         "--method", "entropy", "--no-evaluate"])
        expect(f"entropy calibration over {n} samples", status == 0)
    stored = 3000 * 4096 * 4 // 1024
    grew = peaks[3000] - peaks[100]
    expect(f"peak memory grew {grew} KiB from 100 to 3,000 samples (storing the ReLU's outputs would take "
           f"{stored} KiB more)", grew < stored // 4)


def check_progress(args):
    """Piped: nothing on stderr. On a terminal: a line per pass of a model
    that takes about a second a pass (16 -> 2048 -> 2048 -> 4, 2,000 samples)."""
    status, out, err = run(args.kiln, "quantize", os.path.join(args.workdir, "mlp.onnx"), "--calibration",
                           os.path.join(args.workdir, "mlp_cal"), "-o", os.path.join(args.workdir, "mlp_piped.onnx"),
                           "--input-shape", "x=1x16")
    expect("no progress when stderr is not a terminal", status == 0 and err == "", err)
    torch.manual_seed(6)
    path = os.path.join(args.workdir, "wide.onnx")
    export(nn.Sequential(nn.Linear(16, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 4)),
           (1, 16), path)
    folder = os.path.join(args.workdir, "wide_cal")
    os.makedirs(folder, exist_ok=True)
    np.save(os.path.join(folder, "x.npy"), np.random.default_rng(6).standard_normal((2000, 16), np.float32))
    argv = [args.kiln, "quantize", path, "--calibration", folder, "-o", os.path.join(args.workdir, "wide_q.onnx"),
            "--input-shape", "x=1x16"]
    master, slave = pty.openpty()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    p.wait()
    os.close(master)
    expect("progress on a terminal: samples calibrated and evaluated of 2000, the line erased at the end",
           p.returncode == 0 and b"calibrating: " in seen and b"evaluating: " in seen and b"of 2000" in seen and
           seen.endswith(b"\r\x1b[K"), seen[-200:])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--ort-dir", help="folder holding node_modules/onnxruntime-node")
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    ort_dir = find_ort(args.ort_dir)
    models = make_models(args.workdir)
    check_model(args, ort_dir, models, "mlp", [("minmax", [])])
    check_model(args, ort_dir, models, "cnn", [("minmax", []), ("percentile", ["--method", "percentile"]),
                                              ("entropy", ["--method", "entropy"]),
                                              ("int8sym", ["--activations", "int8", "--symmetric"])])
    check_model(args, ort_dir, models, "mover", [("minmax", [])])
    check_exclude(args, ort_dir, models)
    check_folders(args, models)
    check_bounded_memory(args)
    check_progress(args)
    return finish(skipped)


if __name__ == "__main__":
    sys.exit(main())
