"""The CUDA backend through kiln's CLI, on a machine without a GPU.

- A program planned for cuda:0 loads with the GPU build only where a GPU
  exists: here `kiln run` must fail cleanly (an exit status, not a signal)
  with one line naming cuda:0.
- With KILN_CUDA_EXECUTION=host the same program runs its CUDA kernels
  under the host execution model and matches NumPy; over several runs the
  delegate is warmed up once, captured once and then replayed.
- `--precision tf32` is in the program (kiln inspect, plan.json) and its
  program matches NumPy under the host execution model (whose reference GEMM
  stays FP32); a backend that runs FP32 only (null) refuses it in one line.
- `--precision fp16`: the delegate says fp16 (kiln inspect), the plan's
  summary and plan.json count its 16-bit kernels (Softmax kept FP32), and its output is within
  float16's rounding of NumPy's (2u sqrt(L+1), u = 2^-11, L = 16-bit
  kernels); `--keep-fp32 NODE` keeps that node's kernel FP32 too; a name
  no device kernel has, or --keep-fp32 without fp16/bf16, is refused.
- Convolutions: the planner's choice per layer is reported. A 3x3
  convolution goes through im2col + GEMM, a 1x1 one through the GEMM
  without im2col, a depthwise one stays direct: the summary counts them,
  plan.json's kernel_choices gives each one's choice, why and scratch bytes
  (the column buffer and cuBLASLt's workspace), `kiln inspect` marks them
  (and its JSON names the algorithm), and the program's output under the
  host execution model matches the CPU program's.

usage: cuda_cli_test.py --kiln PATH --workdir DIR [--gpu-build]
"""

import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def make_model(path):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 16)).astype(np.float32)
    b = rng.standard_normal((16,)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["mm"]),
        helper.make_node("Add", ["mm", "b"], ["biased"]),
        helper.make_node("Relu", ["biased"], ["r"]),
        helper.make_node("Softmax", ["r"], ["y"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "cuda_cli", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, path)
    return w, b


def check_precision(args, model, env, want):
    failures = []
    program = os.path.join(args.workdir, "tf32.kiln")
    report = os.path.join(args.workdir, "tf32_report")
    subprocess.run([args.kiln, "plan", model, "-o", program, "--target", "cuda:0,cpu", "--precision", "tf32",
                    "--report", report], check=True, stdout=subprocess.DEVNULL)
    inspect = subprocess.run([args.kiln, "inspect", program], check=True, capture_output=True, text=True).stdout
    if "cuda:0, tf32," not in inspect:
        failures.append("kiln inspect does not show the delegate's tf32:\n" + inspect)
    with open(os.path.join(report, "plan.json")) as f:
        if '"precision": "tf32"' not in f.read().replace('":"', '": "'):
            failures.append("plan.json does not hold the precision")
    out_dir = os.path.join(args.workdir, "out_tf32")
    r = subprocess.run([args.kiln, "run", program, "--input", os.path.join(args.workdir, "x.npy"), "--output-dir",
                        out_dir, "--runs", "3"], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        failures.append(f"the tf32 program failed under the host execution model: {r.stderr}")
    elif float(np.max(np.abs(np.load(os.path.join(out_dir, "output_0.npy")) - want))) > 1e-5:
        failures.append("the tf32 program's outputs differ from NumPy under the host execution model")
    r = subprocess.run([args.kiln, "plan", model, "-o", program + ".null", "--target", "null:0,cpu", "--precision",
                        "tf32"], capture_output=True, text=True)
    refusal = [line for line in r.stderr.splitlines() if "--precision tf32" in line]
    print(f"null:0 with tf32: exit {r.returncode}; {refusal}")
    if r.returncode == 0 or not refusal or "null:0 refuses it" not in refusal[0]:
        failures.append(f"null:0 did not refuse --precision tf32 in one line: {r.stderr}")
    return failures


def precision_storage(report):
    import json
    with open(os.path.join(report, "plan.json")) as f:
        return json.load(f).get("precision_storage", {})


def check_fp16(args, model, env, want):
    failures = []
    x = os.path.join(args.workdir, "x.npy")
    for keep, kernels_16bit in (([], 3), (["--keep-fp32", "Relu_2"], 2)):
        program = os.path.join(args.workdir, f"fp16_{len(keep)}.kiln")
        report = program + ".report"
        summary = subprocess.run([args.kiln, "plan", model, "-o", program, "--target", "cuda:0,cpu", "--precision",
                                  "fp16", "--report", report, *keep], check=True, capture_output=True, text=True).stdout
        if f"precision:   fp16: {kernels_16bit} device kernels on float16 storage" not in summary:
            failures.append(f"fp16 {keep}: the plan's summary does not count its 16-bit kernels:\n{summary}")
        inspect = subprocess.run([args.kiln, "inspect", program], check=True, capture_output=True, text=True).stdout
        if "cuda:0, fp16," not in inspect:
            failures.append("kiln inspect does not show the delegate's fp16:\n" + inspect)
        storage = precision_storage(report)
        print(f"fp16 {keep}: {storage}")
        if storage.get("dtype") != "float16" or storage.get("kernels_16bit") != kernels_16bit:
            failures.append(f"fp16 {keep}: plan.json counts {storage}, want {kernels_16bit} 16-bit kernels")
        out_dir = program + ".out"
        r = subprocess.run([args.kiln, "run", program, "--input", x, "--output-dir", out_dir], env=env,
                           capture_output=True, text=True)
        if r.returncode != 0:
            failures.append(f"fp16 {keep}: the program failed under the host execution model: {r.stderr}")
            continue
        err = float(np.max(np.abs(np.load(os.path.join(out_dir, "output_0.npy")) - want)) / np.max(np.abs(want)))
        tolerance = 2 * 2.0 ** -11 * (kernels_16bit + 1) ** 0.5
        print(f"fp16 {keep}: relative error against NumPy {err:.2e} (tolerance {tolerance:.2e})")
        if err > tolerance:
            failures.append(f"fp16 {keep}: outputs differ from NumPy by {err:.2e}, more than {tolerance:.2e}")
    for flags, what in ((["--precision", "fp16", "--keep-fp32", "nowhere"], "no device kernel comes from node"),
                        (["--keep-fp32", "Relu_2"], "--keep-fp32 goes with --precision fp16 or bf16")):
        r = subprocess.run([args.kiln, "plan", model, "-o", os.path.join(args.workdir, "refused.kiln"), "--target",
                            "cuda:0,cpu", *flags], capture_output=True, text=True)
        if r.returncode == 0 or what not in r.stderr:
            failures.append(f"{flags} was not refused ({what}): exit {r.returncode}, {r.stderr}")
    return failures


def make_conv_model(path):
    """3x3 conv 16 -> 32 (pad 1), 1x1 conv 32 -> 16, depthwise 3x3 (16 groups) on 8x8."""
    rng = np.random.default_rng(2)
    inits = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.2, name)
             for name, shape in [("w1", (32, 16, 3, 3)), ("b1", (32,)), ("w2", (16, 32, 1, 1)), ("b2", (16,)),
                                 ("w3", (16, 1, 3, 3)), ("b3", (16,))]]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv3x3", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv1x1"),
        helper.make_node("Conv", ["c2", "w3", "b3"], ["y"], name="depthwise", pads=[1, 1, 1, 1], group=16),
    ]
    graph = helper.make_graph(
        nodes, "convs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 8, 8])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def check_conv_choices(args, env):
    failures = []
    model = os.path.join(args.workdir, "convs.onnx")
    make_conv_model(model)
    x = os.path.join(args.workdir, "convs_x.npy")
    np.save(x, np.random.default_rng(3).standard_normal((1, 16, 8, 8)).astype(np.float32))
    program, report = os.path.join(args.workdir, "convs.kiln"), os.path.join(args.workdir, "convs_report")
    summary = subprocess.run([args.kiln, "plan", model, "-o", program, "--target", "cuda:0,cpu", "--report", report],
                             check=True, capture_output=True, text=True).stdout
    if "Conv on cuda:0: 1 GEMM, 1 direct, 1 im2col+GEMM" not in summary:
        failures.append("the summary does not count the convolutions' choices:\n" + summary)
    with open(os.path.join(report, "plan.json")) as f:
        choices = {c["name"]: c for c in json.load(f)["kernel_choices"]}
    want = {"conv3x3": ("im2col+GEMM", "M 32, N 64, K 144", 144 * 64 * 4 + (1 << 20)),
            "conv1x1": ("GEMM", "no im2col", 1 << 20), "depthwise": ("direct", "depthwise", 0)}
    for name, (choice, why, scratch) in want.items():
        c = choices.get(name, {})
        if c.get("choice") != choice or why not in c.get("why", "") or c.get("scratch_bytes") != scratch:
            failures.append(f"plan.json kernel_choices for {name}: {c}, want {choice}, '{why}', {scratch} bytes")
    inspect = subprocess.run([args.kiln, "inspect", program], check=True, capture_output=True, text=True).stdout
    if "Conv [im2col+GEMM]" not in inspect or "Conv [GEMM]" not in inspect:
        failures.append("kiln inspect does not mark the GEMM convolutions:\n" + inspect)
    inspect = subprocess.run([args.kiln, "inspect", program, "--json"], check=True, capture_output=True,
                             text=True).stdout
    algorithms = sorted(k.get("algorithm") for d in json.loads(inspect)["methods"][0]["delegates"]
                        for k in d["kernels"] if k["op"] == "Conv")
    if algorithms != ["DIRECT", "IM2COL_GEMM", "IM2COL_GEMM"]:
        failures.append(f"kiln inspect --json gives the Conv algorithms {algorithms}")
    cpu_program = os.path.join(args.workdir, "convs.cpu.kiln")
    subprocess.run([args.kiln, "plan", model, "-o", cpu_program], check=True, stdout=subprocess.DEVNULL)
    outs = {}
    for name, p in (("cpu", cpu_program), ("cuda", program)):
        out = os.path.join(args.workdir, "convs_out_" + name)
        subprocess.run([args.kiln, "run", p, "--input", x, "--output-dir", out], check=True, env=env,
                       capture_output=True)
        outs[name] = np.load(os.path.join(out, "output_0.npy"))
    err = float(np.max(np.abs(outs["cuda"] - outs["cpu"])) / np.max(np.abs(outs["cpu"])))
    print(f"convolutions through the GEMM against the CPU: max error {err:.2e} of the largest output")
    if err > 1e-5:
        failures.append(f"the convolutions differ from the CPU's by {err} of the largest output")
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--gpu-build", action="store_true", help="the GPU build is in this kiln")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    model = os.path.join(args.workdir, "model.onnx")
    program = os.path.join(args.workdir, "model.kiln")
    w, b = make_model(model)
    x = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    np.save(os.path.join(args.workdir, "x.npy"), x)
    z = np.maximum(x @ w + b, 0)
    want = np.exp(z - z.max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)

    subprocess.run([args.kiln, "plan", model, "-o", program, "--target", "cuda:0,cpu"], check=True,
                   stdout=subprocess.DEVNULL)
    inspect = subprocess.run([args.kiln, "inspect", program], check=True, capture_output=True, text=True).stdout
    failures = []
    if "cuda:0" not in inspect:
        failures.append("the program has no cuda:0 delegate:\n" + inspect)

    env = {k: v for k, v in os.environ.items() if not k.startswith("KILN_CUDA")}
    out_dir = os.path.join(args.workdir, "out_gpu")
    r = subprocess.run([args.kiln, "run", program, "--input", os.path.join(args.workdir, "x.npy"), "--output-dir",
                        out_dir], env=env, capture_output=True, text=True)
    print(f"without a GPU: exit {r.returncode}; stderr: {r.stderr.strip()}")
    if r.returncode <= 0:
        failures.append(f"kiln run without a GPU exited {r.returncode} (want a clean failure, status > 0)")
    if "cuda:0" not in r.stderr:
        failures.append("the error does not name cuda:0")

    env["KILN_CUDA_EXECUTION"] = "host"
    out_dir = os.path.join(args.workdir, "out_host")
    r = subprocess.run([args.kiln, "run", program, "--input", os.path.join(args.workdir, "x.npy"), "--output-dir",
                        out_dir, "--runs", "4"], env=env, capture_output=True, text=True)
    print(f"host execution model: exit {r.returncode}; stderr: {r.stderr.strip()}")
    if r.returncode != 0:
        failures.append(f"kiln run under the host execution model failed: {r.stderr}")
    else:
        got = np.load(os.path.join(out_dir, "output_0.npy"))
        err = float(np.max(np.abs(got - want)))
        print(f"max abs error against NumPy: {err:.2e}")
        if err > 1e-5:
            failures.append(f"outputs differ from NumPy by {err}")
        if "replayed from 1 captured graphs" not in r.stderr:
            failures.append("the delegate was not captured once and replayed")
        if "reference GEMM" not in r.stderr:
            failures.append("the run does not say Gemm/MatMul ran the reference GEMM")

    failures += check_precision(args, model, env, want)
    failures += check_fp16(args, model, env, want)
    failures += check_conv_choices(args, env)
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
